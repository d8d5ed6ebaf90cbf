/* SPDX-License-Identifier: MIT */
/* test_faults.c - nodes that die, stop answering (SIGSTOP), restart, or are held by someone
 * else: quorum decisions, how long they take, what a lost round leaves on the nodes, and the
 * per-node outcome a caller sees. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N 5
#define MS 1000ull /* microseconds per millisecond */

/* A client whose nodes in stopped_mask (bit i: node i) have the short timeout: the nodes the
 * test will stop. Every other node keeps H_NODE_TIMEOUT_MS, so only a stopped node can time
 * out. */
static redlock_client *client_stopping(h_env *env, unsigned stopped_mask, uint64_t timeout_ms,
                                       const redlock_options *opts)
{
    char buf[N][160];
    const char *urls[N];
    h_urls_with_timeout(env, stopped_mask, timeout_ms, buf, urls);
    redlock_client *c = NULL;
    char err[256];
    int rc = h_client_urls(env, urls, N, opts, &c, err, sizeof(err));
    if (rc != 0)
        fprintf(stderr, "redlock_client_new: %s: %s\n", redlock_err_name(rc), err);
    assert_int_equal(rc, 0);
    return c;
}

static void token_opts(redlock_lock_opts *lo, const char *token)
{
    redlock_lock_opts_init(lo);
    lo->token = token;
    lo->token_len = strlen(token);
}

/* 3. two of five nodes down: still a quorum. */
static void two_nodes_down_still_locks(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_wait_ready(&env, c);
    assert_int_equal(fixture_kill(&env.cluster, 1), 0);
    assert_int_equal(fixture_kill(&env.cluster, 3), 0);
    h_record rec, rel;
    assert_int_equal(h_acquire(&env, c, "faults:2down", 5000, NULL, &rec), 0);
    assert_int_equal(rec.votes_yes, 3);
    assert_int_equal(rec.node_vote[1], REDLOCK_VOTE_ERROR);
    assert_int_equal(rec.node_vote[3], REDLOCK_VOTE_ERROR);
    size_t token_len = 0;
    const char *token = redlock_lock_token(rec.lock, &token_len);
    assert_int_equal(h_count_holding(&env, "faults:2down", 12, token, token_len), 3);
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, 3);
    assert_int_equal(rel.votes_error, 2);
    assert_int_equal(h_count_holding(&env, "faults:2down", 12, token, token_len), 0);
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

/* 3. three of five nodes down: no quorum, decided at once (dead nodes fail fast, nobody waits
 * for a deadline), and the two live nodes do not keep the key. */
static void three_nodes_down_fails_fast_and_leaves_no_key(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    const uint64_t timeout_ms = H_NODE_TIMEOUT_MS;
    redlock_client *c = h_client(&env, NULL);
    h_wait_ready(&env, c);
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(fixture_kill(&env.cluster, i), 0);
    redlock_lock_opts lo;
    token_opts(&lo, "tok-3down");
    h_record rec;
    uint64_t t0 = redlock_now_us();
    assert_int_equal(h_acquire(&env, c, "faults:3down", 10000, &lo, &rec), REDLOCK_ENOQUORUM);
    uint64_t took_us = h_since_us(t0);
    assert_null(rec.lock);
    /* Long before any node's deadline. */
    assert_true(took_us < timeout_ms * MS / 2);
    assert_true(rec.elapsed_us < timeout_ms * MS / 2);
    assert_true(rec.votes_error >= 3);
    assert_int_equal(rec.votes_no, 0);
    assert_int_equal(rec.attempts, 1);
    for (unsigned i = 0; i < 3; i++) {
        assert_int_equal(rec.node_vote[i], REDLOCK_VOTE_ERROR);
        assert_true(strlen(rec.node_error[i]) > 0);
    }
    /* Once the live nodes ran everything sent so far (the SET, then the release after it on the
     * same connection), no key of ours is left. */
    h_drain(&env, c);
    assert_int_equal(h_count_holding(&env, "faults:3down", 12, "tok-3down", 9), 0);
    assert_int_equal(h_dbsize(&env, 3), 0);
    assert_int_equal(h_dbsize(&env, 4), 0);
    h_env_stop(&env);
}

/* Three of five nodes stopped: the round is lost when their deadlines trip (about one node
 * timeout, not later), and once they wake up they run the SET and then the release, in order,
 * so no key of ours survives anywhere. Only the stopped nodes have the short timeout. */
static void three_nodes_paused_fail_after_one_timeout(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    const uint64_t timeout_ms = 500;
    redlock_client *c = client_stopping(&env, 0x7, timeout_ms, NULL);
    h_wait_ready(&env, c);
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(fixture_pause(&env.cluster, i), 0);
    redlock_lock_opts lo;
    token_opts(&lo, "tok-paused");
    h_record rec;
    uint64_t t0 = redlock_now_us();
    /* A ttl longer than every wait below: only a release can take the keys away. */
    assert_int_equal(h_acquire(&env, c, "faults:paused", 60000, &lo, &rec), REDLOCK_ENOQUORUM);
    uint64_t took_us = h_since_us(t0);
    assert_true(took_us >= timeout_ms * MS * 8 / 10);
    assert_true(took_us < (timeout_ms + H_SLACK_MS) * MS); /* not at the others' 5 s */
    assert_int_equal(rec.votes_timeout, 3);
    assert_int_equal(rec.votes_yes, 2);
    for (unsigned i = 0; i < 3; i++) {
        assert_int_equal(rec.node_vote[i], REDLOCK_VOTE_TIMEOUT);
        assert_true(rec.node_latency_us[i] >= timeout_ms * MS * 8 / 10);
        assert_true(strlen(rec.node_error[i]) > 0);
    }
    /* The live nodes voted yes and then got the release. */
    assert_true(h_wait_holding(&env, "faults:paused", 13, "tok-paused", 10, 0, H_WAIT_MS));
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(fixture_resume(&env.cluster, i), 0);
    h_drain(&env, c);
    assert_int_equal(h_count_holding(&env, "faults:paused", 13, "tok-paused", 10), 0);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(h_dbsize(&env, i), 0);
    /* And the client is fine afterwards. */
    assert_true(h_wait_release_votes(&env, c, N, H_WAIT_MS));
    h_env_stop(&env);
}

static void assert_votes_sane(const h_record *rec, redlock_vote allowed_other)
{
    for (unsigned i = 0; i < N; i++) {
        redlock_vote v = rec->node_vote[i];
        assert_true(v == REDLOCK_VOTE_YES || v == allowed_other);
    }
}

/* 4. one node stopped with a long node timeout: the decision does not wait for it, and its late
 * replies after it wakes up do not confuse later rounds. */
static void paused_node_does_not_delay_or_confuse(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    /* Node 4's; long enough that, resumed, it surely answers within it. */
    const uint64_t timeout_ms = 2000;
    redlock_client *c = client_stopping(&env, 1u << 4, timeout_ms, NULL);
    h_wait_ready(&env, c);
    assert_int_equal(fixture_pause(&env.cluster, 4), 0);

    redlock_lock_opts lo;
    token_opts(&lo, "tok-p1");
    h_record rec1, rec2, rec, rel;
    uint64_t t0;
    /* Decided without node 4: no answer from it, not even its timeout, was waited for. */
    assert_int_equal(h_acquire(&env, c, "faults:p", 10000, &lo, &rec1), 0);
    assert_int_equal(rec1.node_vote[4], REDLOCK_VOTE_NONE);
    assert_int_equal(rec1.node_latency_us[4], 0);
    assert_true(rec1.votes_yes >= 3);
    assert_int_equal(rec1.votes_timeout, 0);
    token_opts(&lo, "tok-p2");
    assert_int_equal(h_acquire(&env, c, "faults:p2", 10000, &lo, &rec2), 0);
    assert_int_equal(rec2.node_vote[4], REDLOCK_VOTE_NONE);

    /* A release waits for every node: the stopped one times out after about one timeout (and
     * the loop runs no longer than that bound, so a release that never ends fails fast). */
    t0 = redlock_now_us();
    memset(&rel, 0, sizeof(rel));
    assert_int_equal(redlock_release(rec2.lock, h_record_cb, &rel), 0);
    assert_true(h_run_until(&env.loop, &rel.calls, 1, timeout_ms + H_SLACK_MS));
    assert_int_equal(rel.status, 0);
    uint64_t took_us = h_since_us(t0);
    assert_true(took_us >= timeout_ms * MS * 8 / 10);
    assert_true(took_us < (timeout_ms + H_SLACK_MS) * MS);
    assert_int_equal(rel.votes_yes, 4);
    assert_int_equal(rel.node_vote[4], REDLOCK_VOTE_TIMEOUT);
    assert_int_equal(h_count_holding(&env, "faults:p2", 9, "tok-p2", 6), 0);
    redlock_lock_free(rec2.lock);

    /* Node 4 now owes three late replies (SET p, SET p2, release p2: OK, OK, 1). Release p and
     * wake the node at once: the late replies come first and must be dropped, so that the
     * release's own answer, and only it, counts as node 4's vote. */
    memset(&rel, 0, sizeof(rel));
    assert_int_equal(redlock_release(rec1.lock, h_record_cb, &rel), 0);
    assert_int_equal(fixture_resume(&env.cluster, 4), 0);
    assert_true(h_run_until(&env.loop, &rel.calls, 1, 10000));
    if (rel.node_vote[4] != REDLOCK_VOTE_YES)
        fprintf(stderr, "node 4: %s: %s\n", redlock_vote_name(rel.node_vote[4]), rel.node_error[4]);
    assert_int_equal(rel.status, 0);
    assert_int_equal(rel.votes_yes, N);
    assert_int_equal(rel.node_vote[4], REDLOCK_VOTE_YES);
    redlock_lock_free(rec1.lock);
    h_run_for(&env.loop, 50);
    assert_int_equal(h_pttl(&env, 4, "faults:p", 8), -2);
    assert_int_equal(h_pttl(&env, 4, "faults:p2", 9), -2);

    for (int round = 0; round < 5; round++) {
        char token[32];
        snprintf(token, sizeof(token), "tok-p-next-%d", round);
        token_opts(&lo, token);
        const char *res = round % 2 == 0 ? "faults:p" : "faults:p-other";
        size_t res_len = strlen(res);
        assert_int_equal(h_acquire(&env, c, res, 10000, &lo, &rec), 0);
        assert_int_equal(rec.votes_no + rec.votes_error + rec.votes_timeout, 0);
        assert_votes_sane(&rec, REDLOCK_VOTE_NONE);
        assert_true(h_wait_holding(&env, res, res_len, token, strlen(token), N, H_WAIT_MS));
        assert_int_equal(h_release(&env, rec.lock, &rel), 0);
        assert_int_equal(rel.votes_yes, N);
        assert_votes_sane(&rel, REDLOCK_VOTE_YES);
        assert_int_equal(h_count_holding(&env, res, res_len, token, strlen(token)), 0);
        redlock_lock_free(rec.lock);
    }
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(h_dbsize(&env, i), 0);
    h_env_stop(&env);
}

/* A URL's timeout_ms overrides the client's node timeout for that node. */
static void url_timeout_overrides_node_timeout(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    char url0[160];
    snprintf(url0, sizeof(url0), "%s?timeout_ms=300", env.cluster.urls[0]);
    const char *urls[N] = {url0, env.cluster.urls[1], env.cluster.urls[2], env.cluster.urls[3],
                           env.cluster.urls[4]};
    redlock_options o;
    h_test_options(&o);
    o.node_timeout_ms = H_NODE_TIMEOUT_MS;
    redlock_client *c = NULL;
    assert_int_equal(h_client_urls(&env, urls, N, &o, &c, NULL, 0), 0);
    h_wait_ready(&env, c);
    h_record rec, rel;
    assert_int_equal(h_acquire(&env, c, "faults:urltimeout", 10000, NULL, &rec), 0);
    assert_true(h_wait_holding(&env, "faults:urltimeout", 17, redlock_lock_token(rec.lock, NULL),
                               32, N, H_WAIT_MS));
    h_hear_all(&env, c); /* every key kept: one node's loss costs its own vote only */
    assert_int_equal(fixture_pause(&env.cluster, 0), 0);
    uint64_t t0 = redlock_now_us();
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    uint64_t took_us = h_since_us(t0);
    assert_int_equal(rel.node_vote[0], REDLOCK_VOTE_TIMEOUT);
    assert_int_equal(rel.votes_yes, 4);
    /* About 300 ms: the URL's, not the client's 5 s. */
    assert_true(took_us >= 240 * MS);
    assert_true(took_us < (300 + H_SLACK_MS) * MS);
    assert_true(rel.node_latency_us[0] >= 240 * MS &&
                rel.node_latency_us[0] < (300 + H_SLACK_MS) * MS);
    assert_int_equal(fixture_resume(&env.cluster, 0), 0);
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

/* 5. a round lost to another holder leaves no key with its token: the release goes to every
 * node, including those that said yes. */
static void lost_round_leaves_no_key(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_wait_ready(&env, c);
    for (unsigned i = 0; i < 3; i++)
        h_set(&env, i, "faults:lost", 11, "foreign");
    redlock_lock_opts lo;
    token_opts(&lo, "tok-lost");
    h_record rec;
    assert_int_equal(h_acquire(&env, c, "faults:lost", 10000, &lo, &rec), REDLOCK_EBUSY);
    assert_null(rec.lock);
    assert_int_equal(rec.votes_no, 3);
    assert_int_equal(rec.attempts, 1);
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(rec.node_vote[i], REDLOCK_VOTE_NO);
    h_drain(&env, c);
    assert_int_equal(h_count_holding(&env, "faults:lost", 11, "tok-lost", 8), 0);
    assert_int_equal(h_pttl(&env, 3, "faults:lost", 11), -2);
    assert_int_equal(h_pttl(&env, 4, "faults:lost", 11), -2);
    /* The foreign holder's keys are untouched. */
    assert_int_equal(h_count_holding(&env, "faults:lost", 11, "foreign", 7), 3);
    h_env_stop(&env);
}

/* 5. the same with retries: every attempt is counted and every lost round cleaned up. */
static void lost_rounds_with_retries_leave_no_key(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_options o;
    h_test_options(&o);
    o.retry_delay_ms = 40;
    o.retry_jitter_ms = 10;
    redlock_client *c = h_client(&env, &o);
    h_wait_ready(&env, c);
    for (unsigned i = 2; i < N; i++)
        h_set(&env, i, "faults:retry", 12, "foreign");
    redlock_lock_opts lo;
    token_opts(&lo, "tok-retry");
    lo.retry_count = 2;
    h_record rec;
    uint64_t t0 = redlock_now_us();
    assert_int_equal(h_acquire(&env, c, "faults:retry", 10000, &lo, &rec), REDLOCK_EBUSY);
    uint64_t took_us = h_since_us(t0);
    assert_int_equal(rec.attempts, 3);
    assert_int_equal(rec.votes_no, 3);
    /* Two delays of 40 +/- 10 ms between the three rounds. */
    assert_true(took_us >= 2 * 30 * MS);
    assert_true(took_us < (2 * 50 + H_SLACK_MS) * MS);
    h_drain(&env, c);
    assert_int_equal(h_count_holding(&env, "faults:retry", 12, "tok-retry", 9), 0);
    assert_int_equal(h_count_holding(&env, "faults:retry", 12, "foreign", 7), 3);

    /* The client's retry_count applies when the call does not say. */
    o.retry_count = 1;
    redlock_client *c2 = h_client(&env, &o);
    assert_int_equal(h_acquire(&env, c2, "faults:retry", 10000, NULL, &rec), REDLOCK_EBUSY);
    assert_int_equal(rec.attempts, 2);
    /* wait_ms keeps retrying until its deadline. */
    redlock_lock_opts_init(&lo);
    lo.wait_ms = 300;
    t0 = redlock_now_us();
    assert_int_equal(h_acquire(&env, c2, "faults:retry", 10000, &lo, &rec), REDLOCK_EBUSY);
    took_us = h_since_us(t0);
    assert_true(rec.attempts >= 3);
    assert_true(took_us >= 300 * MS);
    assert_true(took_us < (300 + H_SLACK_MS) * MS);
    h_drain(&env, c2);
    for (unsigned i = 0; i < 2; i++)
        assert_int_equal(h_dbsize(&env, i), 0);
    h_close_client(&env, c2);
    h_env_stop(&env);
}

typedef struct release_later {
    uv_timer_t timer;
    redlock_lock *lock;
    h_record rec;
} release_later;

static void on_release_later(uv_timer_t *t)
{
    release_later *r = (release_later *)t;
    assert_int_equal(redlock_release(r->lock, h_record_cb, &r->rec), 0);
}

/* A waiting acquire gets the lock once the holder lets go. */
static void waiting_acquire_gets_lock_after_release(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_options o;
    h_test_options(&o);
    o.retry_delay_ms = 50;
    o.retry_jitter_ms = 10;
    redlock_client *a = h_client(&env, &o);
    redlock_client *b = h_client(&env, &o);
    h_record ra, rb;
    assert_int_equal(h_acquire(&env, a, "faults:wait", 10000, NULL, &ra), 0);
    /* Won at the quorum: let a's SETs land everywhere before b starts, else b's SET may take a
     * node first (and b's lost round then frees it), and a's release finds no key there. */
    assert_true(h_wait_holding(&env, "faults:wait", 11, redlock_lock_token(ra.lock, NULL), 32, N,
                               H_WAIT_MS));
    release_later later = {.lock = ra.lock};
    uv_timer_init(&env.loop, &later.timer);
    uv_timer_start(&later.timer, on_release_later, 300, 0);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.wait_ms = 10000;
    uint64_t t0 = redlock_now_us();
    assert_int_equal(h_acquire(&env, b, "faults:wait", 10000, &lo, &rb), 0);
    uint64_t took_us = h_since_us(t0);
    /* a's release waits for all five nodes (each has H_NODE_TIMEOUT_MS to answer), b's acquire
     * only for three: either may finish first. */
    assert_true(h_run_until(&env.loop, &later.rec.calls, 1, H_WAIT_MS));
    if (later.rec.votes_yes != N)
        h_dump_record("a's release", &later.rec);
    assert_int_equal(later.rec.status, 0);
    assert_int_equal(later.rec.votes_yes, N);
    assert_true(rb.attempts >= 2);
    /* Taken once a let go (after 300 ms), within a retry delay (50 +/- 10 ms) or so. */
    assert_true(took_us >= 250 * MS);
    assert_true(took_us < (300 + 60 + H_SLACK_MS) * MS);
    /* b holds the key where its attempt ran after a's release: on a quorum at least, on every
     * node only if a's release reached each one before b's attempt did. b was woken by the first
     * node that freed the key, so a's release may still have been on its way to another when
     * b's attempt got there. a's release has completed by now, and once every node has
     * answered b's attempt nothing changes any more. */
    h_drain(&env, b);
    size_t token_len = 0;
    const char *token = redlock_lock_token(rb.lock, &token_len);
    unsigned holding = h_count_holding(&env, "faults:wait", 11, token, token_len);
    assert_true(holding >= N / 2 + 1);
    assert_true(holding >= rb.votes_yes);
    uv_close((uv_handle_t *)&later.timer, NULL);
    h_record rel;
    assert_int_equal(h_release(&env, rb.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, holding);
    redlock_lock_free(ra.lock);
    redlock_lock_free(rb.lock);
    h_close_client(&env, b);
    h_env_stop(&env);
}

/* 12. the per-node outcome tells a caller which node failed and why. */
static void per_node_outcome_names_the_failed_node(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    const uint64_t timeout_ms = H_NODE_TIMEOUT_MS;
    redlock_client *c = h_client(&env, NULL);
    h_wait_ready(&env, c);
    assert_int_equal(fixture_kill(&env.cluster, 2), 0);
    h_record rec, rel;
    assert_int_equal(h_acquire(&env, c, "faults:outcome", 5000, NULL, &rec), 0);
    assert_int_equal(rec.n_nodes, N);
    assert_int_equal(rec.votes_error, 1);
    assert_int_equal(rec.node_vote[2], REDLOCK_VOTE_ERROR);
    assert_true(strlen(rec.node_error[2]) > 0);
    char port[16];
    snprintf(port, sizeof(port), ":%d", env.cluster.servers[2].port);
    for (unsigned i = 0; i < N; i++) {
        assert_string_equal(rec.node_url[i], redlock_client_node_url(c, i));
        assert_string_equal(rec.node_url[i], env.cluster.urls[i]);
        if (rec.node_vote[i] == REDLOCK_VOTE_YES) {
            assert_true(rec.node_latency_us[i] > 0);
            assert_true(rec.node_latency_us[i] < timeout_ms * MS);
            assert_string_equal(rec.node_error[i], "");
        }
    }
    assert_non_null(strstr(rec.node_url[2], port));
    /* The release reports every node, the dead one as an error. */
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, 4);
    assert_int_equal(rel.votes_error, 1);
    assert_int_equal(rel.node_vote[2], REDLOCK_VOTE_ERROR);
    assert_true(strlen(rel.node_error[2]) > 0);
    for (unsigned i = 0; i < N; i++) {
        if (i == 2)
            continue;
        assert_int_equal(rel.node_vote[i], REDLOCK_VOTE_YES);
        assert_true(rel.node_latency_us[i] > 0);
    }
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

/* 9. a node killed and restarted is reconnected and counts again. */
static void restarted_node_is_used_again(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_options o;
    h_test_options(&o);
    o.reconnect_max_ms = 1000; /* bound the backoff so the test's wait is bounded too */
    redlock_client *c = h_client(&env, &o);
    h_wait_ready(&env, c);
    assert_int_equal(fixture_kill(&env.cluster, 4), 0);
    h_record rec, rel;
    assert_int_equal(h_acquire(&env, c, "faults:restart", 5000, NULL, &rec), 0);
    assert_int_equal(rec.node_vote[4], REDLOCK_VOTE_ERROR);
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, 4);
    assert_int_equal(rel.node_vote[4], REDLOCK_VOTE_ERROR);
    redlock_lock_free(rec.lock);

    assert_int_equal(fixture_restart(&env.cluster, 4), 0);
    uint64_t t0 = redlock_now_us();
    assert_true(h_wait_release_votes(&env, c, N, H_WAIT_MS));
    /* Within the bounded backoff: at most reconnect_max_ms, +50% jitter. */
    assert_true(h_since_us(t0) < (1500 + H_SLACK_MS) * MS);
    /* A lock taken now lands on the restarted node too. */
    assert_int_equal(h_acquire(&env, c, "faults:restart", 5000, NULL, &rec), 0);
    size_t token_len = 0;
    const char *token = redlock_lock_token(rec.lock, &token_len);
    assert_true(h_wait_holding(&env, "faults:restart", 14, token, token_len, N, H_WAIT_MS));
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, N);
    assert_int_equal(rel.node_vote[4], REDLOCK_VOTE_YES);
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

/* A node that stays silent is dropped after a few timeouts (its requests then fail fast instead
 * of piling up behind a dead connection), reconnected, and used again once it answers. */
static void silent_node_is_dropped_and_comes_back(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_options o;
    h_test_options(&o);
    o.connect_timeout_ms = 300;
    o.reconnect_max_ms = 500;
    redlock_client *c = client_stopping(&env, 1u << 4, 200, &o);
    h_wait_ready(&env, c);
    assert_int_equal(fixture_pause(&env.cluster, 4), 0);
    /* Keep the client busy until node 4 has timed out and then been seen failing fast: how many
     * rounds that takes depends on the machine, what must happen in them does not. */
    uint64_t t0 = redlock_now_us();
    int timeouts = 0, errors = 0;
    while ((timeouts == 0 || errors == 0) && h_since_us(t0) < H_WAIT_MS * MS) {
        h_record rec, rel;
        if (h_acquire(&env, c, "faults:silent", 10000, NULL, &rec) != 0)
            h_dump_record("acquire", &rec);
        assert_int_equal(rec.status, 0);
        if (h_release(&env, rec.lock, &rel) != 0)
            h_dump_record("release", &rel);
        assert_int_equal(rel.status, 0);
        assert_int_equal(rel.votes_yes, 4);
        if (rel.node_vote[4] == REDLOCK_VOTE_TIMEOUT)
            timeouts++;
        else if (rel.node_vote[4] == REDLOCK_VOTE_ERROR)
            errors++;
        else
            fail_msg("node 4 voted %s while stopped", redlock_vote_name(rel.node_vote[4]));
        redlock_lock_free(rec.lock);
    }
    assert_true(timeouts >= 1);
    assert_true(errors >= 1); /* dropped at some point: failed fast */
    assert_int_equal(fixture_resume(&env.cluster, 4), 0);
    assert_true(h_wait_release_votes(&env, c, N, H_WAIT_MS));
    h_env_stop(&env);
}

/* The connect timeout counts from when the client starts connecting, even if the loop has not
 * run for a while before (its cached time is then stale): a program that sets up its loop, does
 * some slow work, then creates the client must not see its connects "time out" at once. A
 * connect that timed out would leave its node down, failing fast: an error vote. */
static void connect_timeout_counts_from_client_creation(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    h_run_for(&env.loop, 1);
    /* Slow start-up work with the loop idle, for longer than the connect timeout (which must
     * itself be long enough for a connection and its handshake under valgrind on a loaded
     * machine: the subject is where the timeout counts from, not how fast a connect is). */
    const uint64_t connect_timeout_ms = 3000;
    struct timespec pause_ts = {.tv_sec = 3, .tv_nsec = 200 * 1000 * 1000};
    while (nanosleep(&pause_ts, &pause_ts) != 0)
        ;
    redlock_options o;
    h_test_options(&o);
    o.connect_timeout_ms = connect_timeout_ms;
    redlock_client *c = h_client(&env, &o);
    h_record rec, rel;
    if (h_acquire(&env, c, "faults:connect", 5000, NULL, &rec) != 0 || rec.votes_error != 0)
        h_dump_record("first acquire", &rec);
    assert_int_equal(rec.status, 0);
    assert_int_equal(rec.votes_error, 0);
    size_t token_len = 0;
    const char *token = redlock_lock_token(rec.lock, &token_len);
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    /* Every node deletes the key: in the release's time, or (a node late on a loaded machine)
     * soon after. */
    assert_int_equal(rel.votes_yes + rel.votes_timeout, N);
    assert_true(h_wait_holding(&env, "faults:connect", 14, token, token_len, 0, H_WAIT_MS));
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        H_TEST(two_nodes_down_still_locks),
        H_TEST(three_nodes_down_fails_fast_and_leaves_no_key),
        H_TEST(three_nodes_paused_fail_after_one_timeout),
        H_TEST(paused_node_does_not_delay_or_confuse),
        H_TEST(url_timeout_overrides_node_timeout),
        H_TEST(lost_round_leaves_no_key),
        H_TEST(lost_rounds_with_retries_leave_no_key),
        H_TEST(waiting_acquire_gets_lock_after_release),
        H_TEST(per_node_outcome_names_the_failed_node),
        H_TEST(restarted_node_is_used_again),
        H_TEST(silent_node_is_dropped_and_comes_back),
        H_TEST(connect_timeout_counts_from_client_creation),
    };
    return cmocka_run_group_tests_name("faults", tests, NULL, NULL);
}
