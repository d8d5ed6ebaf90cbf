/* SPDX-License-Identifier: MIT */
/* test_amnesia.c - nodes that restart empty under a held lock (a broken assumption, docs/safety.md)
 * are noticed at once: the reconnection reaches a server with a new run_id, and every held lock
 * is checked with one round then, not at its next planned extension.
 *
 * Every lock here has a 60 s ttl, so its first planned extension is 20 s away; the promise is
 * the reconnect backoff (at most 1.5 reconnect_max_ms once the node is back) plus one round (at
 * most the node timeout), plus H_SLACK_MS: 9 s with the 1 s reconnect_max_ms used here. A
 * library that waits for the planned extension fails every bound below.
 *
 * A node back empty costs the lock nothing only if the client knows the other keys were kept
 * (issue 39's rule, docs/safety.md): an acquire is decided at two yes votes of three, and the
 * third's yes, when it comes after the decision, is a key that may have been set after one of the
 * first two was lost - it vouches for nothing until those two were heard again. So every lock
 * here is taken with every vote read and every node heard after the last one (hold()) before a
 * node restarts; restart_right_after_a_late_yes_is_a_loss_when_unheard shows what happens
 * without. */
#include "harness.h"

#include <stdio.h>
#include <string.h>

#define N 3
#define TTL_MS 60000
#define RECONNECT_MAX_MS 1000
/* From a node's return to the report: the backoff, one round, slack. */
#define BOUND_MS (RECONNECT_MAX_MS * 3 / 2 + H_NODE_TIMEOUT_MS + H_SLACK_MS)
#define FIRST_EXTENSION_MS (TTL_MS / 3)

typedef struct lost_record {
    int calls;
    int reason;
    uint64_t at_us;
    bool held_in_cb;
} lost_record;

static void on_lost(redlock_lock *lock, int reason, void *data)
{
    lost_record *l = data;
    l->calls++;
    l->reason = reason;
    l->at_us = redlock_now_us();
    l->held_in_cb = redlock_lock_is_held(lock, l->at_us);
}

/* Lines the client logged that say a node came back as a new server. */
static int new_server_lines;

static void count_log(redlock_client *client, redlock_log_level level, const char *url,
                      const char *message, void *data)
{
    (void)client;
    (void)url;
    (void)data;
    if (level == REDLOCK_LOG_WARN && strstr(message, "a new server (run_id ") != NULL)
        new_server_lines++;
}

/* A client of env's nodes; slow_mask's nodes get a node timeout longer than BOUND_MS, so that a
 * loss reported within the bound is not their timeout's. */
static redlock_client *amnesia_client_slow(h_env *env, unsigned slow_mask)
{
    redlock_options o;
    h_test_options(&o);
    o.reconnect_max_ms = RECONNECT_MAX_MS;
    o.log_fn = count_log;
    new_server_lines = 0;
    static char buf[N][160];
    const char *urls[N];
    h_urls_with_timeout(env, slow_mask, 2 * BOUND_MS, buf, urls);
    redlock_client *c = NULL;
    char err[256] = "";
    assert_int_equal(h_client_urls(env, urls, N, &o, &c, err, sizeof(err)), 0);
    h_wait_ready(env, c);
    return c;
}

static redlock_client *amnesia_client(h_env *env)
{
    return amnesia_client_slow(env, 0);
}

/* Acquire name for TTL_MS, auto-extended with flags unless lost is NULL; wait until every node
 * holds it, and until the client heard every node after its last vote (h_hear_all). */
/* Lock options for an acquire auto-extended with flags that reports to lost (none if NULL). */
static void lock_opts(redlock_lock_opts *lo, redlock_auto_opts *ao, unsigned flags,
                      lost_record *lost)
{
    redlock_auto_opts_init(ao);
    ao->extend_flags = flags;
    redlock_lock_opts_init(lo);
    if (lost != NULL) {
        lo->auto_extend = ao;
        lo->lost_cb = on_lost;
        lo->lost_data = lost;
    }
}

static redlock_lock *hold(h_env *env, redlock_client *c, const char *name, unsigned flags,
                          lost_record *lost)
{
    redlock_auto_opts ao;
    redlock_lock_opts lo;
    lock_opts(&lo, &ao, flags, lost);
    h_record rec;
    assert_int_equal(h_acquire(env, c, name, TTL_MS, &lo, &rec), 0);
    size_t len;
    const char *token = redlock_lock_token(rec.lock, &len);
    assert_true(h_wait_holding(env, name, strlen(name), token, len, N, H_WAIT_MS));
    h_hear_all(env, c);
    return rec.lock;
}

/* Restart nodes 1 and 2 empty while the loop does not run (the client cannot see it before
 * they are back). Returns when both are back. */
static uint64_t restart_two(h_env *env)
{
    assert_int_equal(fixture_restart(&env->cluster, 1), 0);
    assert_int_equal(fixture_restart(&env->cluster, 2), 0);
    return redlock_now_us();
}

static void expect_lost_in_time(h_env *env, const lost_record *lost, uint64_t back_us)
{
    assert_true(h_run_until(&env->loop, &lost->calls, 1, BOUND_MS));
    uint64_t took_ms = (lost->at_us - back_us) / 1000;
    printf("# lost callback %llu ms after the nodes were back (bound %d ms, planned extension "
           "at %d ms)\n",
           (unsigned long long)took_ms, BOUND_MS, FIRST_EXTENSION_MS);
    assert_int_equal(lost->calls, 1);
    assert_int_equal(lost->reason, REDLOCK_ELOST);
    assert_false(lost->held_in_cb);
    assert_true(took_ms <= BOUND_MS);
}

/* Two of three nodes killed, down for a while under an auto-extended lock (the client sees them
 * down and retries on its backoff with no request waiting), then back empty: the lost callback
 * says ELOST within the bound of their return. */
static void majority_back_empty_is_lost_at_once(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = amnesia_client(&env);
    lost_record lost = {0};
    redlock_lock *lock = hold(&env, c, "amnesia:auto", 0, &lost);
    assert_int_equal(fixture_kill(&env.cluster, 1), 0);
    assert_int_equal(fixture_kill(&env.cluster, 2), 0);
    /* Down is not lost: nothing is said while they are away (the backoff reaches its cap). */
    h_run_for(&env.loop, 2 * RECONNECT_MAX_MS);
    assert_int_equal(lost.calls, 0);
    assert_true(redlock_lock_is_held(lock, redlock_now_us()));
    uint64_t back = restart_two(&env);
    expect_lost_in_time(&env, &lost, back);
    /* The first node back may decide it: its "no" and the other's error are a lost round. */
    assert_true(new_server_lines >= 1);
    h_record rel;
    assert_int_equal(h_release(&env, lock, &rel), REDLOCK_ELOST);
    redlock_lock_free(lock);
    h_env_stop(&env);
}

/* With REDLOCK_EXTEND_RETAKE and nobody else in between, one node of three back empty: a quorum
 * kept the token, so the check puts the key back on the restarted node at once and the lock goes
 * on, continuous. */
static void retake_restores_the_keys_at_once(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = amnesia_client(&env);
    lost_record lost = {0};
    redlock_lock *lock = hold(&env, c, "amnesia:retake", REDLOCK_EXTEND_RETAKE, &lost);
    size_t len;
    const char *token = redlock_lock_token(lock, &len);
    assert_int_equal(fixture_restart(&env.cluster, 1), 0);
    uint64_t back = redlock_now_us();
    assert_int_equal(h_count_holding(&env, "amnesia:retake", 14, token, len), 2);
    assert_true(h_wait_holding(&env, "amnesia:retake", 14, token, len, N, BOUND_MS));
    uint64_t took_ms = h_since_us(back) / 1000;
    printf("# key back on the restarted node %llu ms after the restart (bound %d ms)\n",
           (unsigned long long)took_ms, BOUND_MS);
    assert_true(took_ms <= BOUND_MS);
    /* The extension that set it is won once the client has read the two renewals as well. */
    uint64_t until = redlock_now_us() + (uint64_t)BOUND_MS * 1000;
    while (redlock_lock_extensions(lock) < 1 && lost.calls == 0 && redlock_now_us() < until)
        h_run_for(&env.loop, 5);
    assert_int_equal(lost.calls, 0);
    assert_true(redlock_lock_extensions(lock) >= 1);
    assert_true(redlock_lock_is_held(lock, redlock_now_us()));
    h_release_ok(&env, lock, NULL);
    h_env_stop(&env);
}

/* Rolling restarts, one node at a time, each back empty and restored by the retake before the
 * next: a quorum kept the token at every moment, so the lock goes on, continuous, however many
 * nodes have restarted in all. Between two restarts the client reads every answer of the retake
 * and then hears every node again (h_hear_all): the retake's renewals on the other two nodes
 * may have come before the restored key was set, so only answers to requests sent after it show
 * that key inside the hold; without them the next restart is a loss. */
static void rolling_restarts_keep_the_lock(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = amnesia_client(&env);
    lost_record lost = {0};
    redlock_lock *lock = hold(&env, c, "amnesia:rolling", REDLOCK_EXTEND_RETAKE, &lost);
    size_t len;
    const char *token = redlock_lock_token(lock, &len);
    for (unsigned round = 0; round < 2; round++) {
        for (unsigned i = 0; i < N; i++) {
            assert_int_equal(fixture_restart(&env.cluster, i), 0);
            assert_true(h_wait_holding(&env, "amnesia:rolling", 15, token, len, N, BOUND_MS));
            h_hear_all(&env, c);
            assert_int_equal(lost.calls, 0);
        }
    }
    assert_true(redlock_lock_is_held(lock, redlock_now_us()));
    h_release_ok(&env, lock, NULL);
    h_env_stop(&env);
}

/* Two of three nodes back empty under a retaking auto-extended lock (issue 39's finding: the
 * retake re-created both keys and the hold read as continuous): fewer than a quorum kept the
 * token, so another client could have taken and released the lock in the gap. The loss is
 * reported (ELOST) however the retake fares, and the release says ELOST too. */
static void retake_does_not_hide_a_majority_back_empty(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = amnesia_client(&env);
    lost_record lost = {0};
    redlock_lock *lock = hold(&env, c, "amnesia:gap", REDLOCK_EXTEND_RETAKE, &lost);
    uint64_t back = restart_two(&env);
    expect_lost_in_time(&env, &lost, back);
    assert_false(redlock_lock_is_held(lock, redlock_now_us()));
    h_record rel;
    assert_int_equal(h_release(&env, lock, &rel), REDLOCK_ELOST);
    redlock_lock_free(lock);
    h_env_stop(&env);
}

/* The same gap, seen one node at a time: node 2 is killed (down, not known to be empty), node 1
 * comes back empty and the retake puts its key back (nodes 0 and 1 hold it, a quorum), then node 2
 * comes back empty too. Node 2 may have lost the key before node 1's was re-created, when only
 * node 0 had it: the re-created key vouches for no moment before it was set, so this is a gap
 * as well, reported lost. (Continuity counted from the retake's yes votes alone misses it.)
 * The retake itself cannot show the hold continuous either: of the nodes that kept the token,
 * node 0 alone renewed it (node 1's key is new, node 2 is down), so the loss may be reported as
 * soon as the retake's request to node 2 fails, while node 2 is still away; at the latest it is
 * reported within the bound of node 2's return, once. */
static void retake_does_not_hide_a_gap_seen_late(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = amnesia_client(&env);
    lost_record lost = {0};
    redlock_lock *lock = hold(&env, c, "amnesia:late", REDLOCK_EXTEND_RETAKE, &lost);
    size_t len;
    const char *token = redlock_lock_token(lock, &len);
    assert_int_equal(fixture_kill(&env.cluster, 2), 0);
    assert_int_equal(fixture_restart(&env.cluster, 1), 0);
    /* The retake restores node 1 (a quorum with node 0); node 2 is still away. */
    uint64_t until = redlock_now_us() + (uint64_t)BOUND_MS * 1000;
    while (h_count_holding(&env, "amnesia:late", 12, token, len) < 2 && redlock_now_us() < until)
        h_run_for(&env.loop, 20);
    assert_int_equal(h_count_holding(&env, "amnesia:late", 12, token, len), 2);
    int before = lost.calls;
    assert_int_equal(fixture_restart(&env.cluster, 2), 0);
    if (before == 0) {
        expect_lost_in_time(&env, &lost, redlock_now_us());
    } else {
        printf("# lost before node 2 came back (the retake could not renew a quorum of kept "
               "nodes)\n");
        h_drain(&env, c); /* node 2's return reported nothing more */
        assert_int_equal(lost.calls, 1);
        assert_int_equal(lost.reason, REDLOCK_ELOST);
        assert_false(lost.held_in_cb);
    }
    h_record rel;
    assert_int_equal(h_release(&env, lock, &rel), REDLOCK_ELOST);
    redlock_lock_free(lock);
    h_env_stop(&env);
}

/* With REDLOCK_EXTEND_RETAKE, but another holder took the key on the restarted nodes first (a
 * quorum with the third): the retake is refused there, and the loss is reported at once. */
static void retake_finds_another_holder(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = amnesia_client(&env);
    lost_record lost = {0};
    redlock_lock *lock = hold(&env, c, "amnesia:taken", REDLOCK_EXTEND_RETAKE, &lost);
    uint64_t back = restart_two(&env);
    for (unsigned i = 1; i <= 2; i++) {
        redisReply *r = fixture_command(&env.cluster, i, "SET %s %s NX PX %d", "amnesia:taken",
                                        "other-holder", TTL_MS);
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_STATUS);
        freeReplyObject(r);
    }
    expect_lost_in_time(&env, &lost, back);
    /* The other holder's keys are untouched. */
    assert_int_equal(h_count_holding(&env, "amnesia:taken", 13, "other-holder", 12), 2);
    redlock_lock_free(lock);
    h_env_stop(&env);
}

/* A lock without auto-extension: the check is an inspect round (nothing changes on the nodes),
 * and the handle reads as not held from then on; its release says ELOST, and a retake, which
 * would hide the gap, is refused. */
static void plain_lock_reads_as_lost(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = amnesia_client(&env);
    redlock_lock *lock = hold(&env, c, "amnesia:plain", 0, NULL);
    uint64_t deadline = redlock_lock_deadline_us(lock);
    uint64_t back = restart_two(&env);
    uint64_t until = back + (uint64_t)BOUND_MS * 1000;
    while (redlock_lock_is_held(lock, redlock_now_us()) && redlock_now_us() < until)
        h_run_for(&env.loop, 5);
    uint64_t took_ms = h_since_us(back) / 1000;
    printf("# plain lock read as lost %llu ms after the restarts (bound %d ms)\n",
           (unsigned long long)took_ms, BOUND_MS);
    assert_false(redlock_lock_is_held(lock, redlock_now_us()));
    assert_true(redlock_now_us() < deadline); /* lost, not expired */
    assert_true(took_ms <= BOUND_MS);
    assert_int_equal(redlock_extend(lock, 0, REDLOCK_EXTEND_RETAKE, h_record_cb, NULL),
                     REDLOCK_EINVAL);
    h_record rel;
    assert_int_equal(h_release(&env, lock, &rel), REDLOCK_ELOST);
    redlock_lock_free(lock);
    h_env_stop(&env);
}

/* The check is more than the count of kept nodes: node 2 lost the plain lock's key without a word
 * (deleted: an eviction, a flush), then node 1 comes back empty. Nodes 0 and 2 are still kept as
 * far as the client heard, a quorum; the inspect that the restart sets off finds the key on node
 * 0 alone, and the lock reads as lost. */
static void inspect_finds_a_silent_loss(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = amnesia_client(&env);
    redlock_lock *lock = hold(&env, c, "amnesia:silent", 0, NULL);
    assert_int_equal(h_del(&env, 2, "amnesia:silent", 14), 1);
    assert_int_equal(fixture_restart(&env.cluster, 1), 0);
    uint64_t back = redlock_now_us();
    uint64_t until = back + (uint64_t)BOUND_MS * 1000;
    while (redlock_lock_is_held(lock, redlock_now_us()) && redlock_now_us() < until)
        h_run_for(&env.loop, 5);
    assert_false(redlock_lock_is_held(lock, redlock_now_us()));
    h_record rel;
    assert_int_equal(h_release(&env, lock, &rel), REDLOCK_ELOST);
    redlock_lock_free(lock);
    h_env_stop(&env);
}

/* One node of three back empty: the checks run (an extension of the auto-extended lock, an
 * inspect of the other) and find a quorum: both locks are still held, nothing is reported. Both
 * were taken by hold(), which had every node heard after each acquire's last vote: without that,
 * node 1 back empty right after an acquire that node 2's yes reached late is a loss (see
 * restart_right_after_a_late_yes_is_a_loss_when_unheard). */
static void one_node_back_empty_keeps_the_locks(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = amnesia_client(&env);
    lost_record lost = {0};
    redlock_lock *autol = hold(&env, c, "amnesia:one-auto", 0, &lost);
    redlock_lock *plain = hold(&env, c, "amnesia:one-plain", 0, NULL);
    assert_int_equal(fixture_restart(&env.cluster, 1), 0);
    /* The check's extension (the same turn of the loop started the plain lock's inspect), then a
     * drain: an inspect queued behind both on every connection. */
    uint64_t until = redlock_now_us() + (uint64_t)BOUND_MS * 1000;
    while (redlock_lock_extensions(autol) < 1 && redlock_now_us() < until)
        h_run_for(&env.loop, 5);
    assert_true(redlock_lock_extensions(autol) >= 1);
    h_drain(&env, c);
    assert_int_equal(new_server_lines, 1);
    assert_int_equal(lost.calls, 0);
    assert_true(redlock_lock_is_held(autol, redlock_now_us()));
    assert_true(redlock_lock_is_held(plain, redlock_now_us()));
    h_release_ok(&env, autol, NULL);
    h_release_ok(&env, plain, NULL);
    h_env_stop(&env);
}

/* An auto-extended lock on name (reporting to lost) acquired with node 2 stopped: decided by the
 * yes votes of nodes 0 and 1, node 2's request still out (it is left stopped). */
static redlock_lock *acquire_with_node_2_stopped(h_env *env, redlock_client *c, const char *name,
                                                 lost_record *lost)
{
    redlock_auto_opts ao;
    redlock_lock_opts lo;
    lock_opts(&lo, &ao, 0, lost);
    assert_int_equal(fixture_pause(&env->cluster, 2), 0);
    h_record rec;
    assert_int_equal(h_acquire(env, c, name, TTL_MS, &lo, &rec), 0);
    assert_int_equal(rec.node_vote[0], REDLOCK_VOTE_YES);
    assert_int_equal(rec.node_vote[1], REDLOCK_VOTE_YES);
    assert_int_equal(rec.node_vote[2], REDLOCK_VOTE_NONE); /* stopped: not answered yet */
    return rec.lock;
}

/* Node 1 back empty (lost not called yet): run until the lock is reported lost or the check's
 * extension is won (a library that misses a loss), at most BOUND_MS, and print what came. */
static void restart_node_1_and_watch(h_env *env, redlock_lock *lock, const lost_record *lost)
{
    assert_int_equal(lost->calls, 0);
    assert_int_equal(fixture_restart(&env->cluster, 1), 0);
    uint64_t back = redlock_now_us();
    while (lost->calls == 0 && redlock_lock_extensions(lock) == 0 &&
           h_since_us(back) < BOUND_MS * 1000ull)
        h_run_for(&env->loop, 5);
    printf("# lost callbacks %d (reason %d), extensions %u\n", lost->calls, lost->reason,
           redlock_lock_extensions(lock));
}

/* The other side of hold()'s care: node 2 stopped, the acquire is decided by the yes votes of
 * nodes 0 and 1, and node 2's yes comes late, after the decision (it is continued only then, and
 * node 0 is stopped first, so the client's probe after the late yes reaches node 1 only). Then
 * node 1 comes back empty. Node 2's key may have been set after node 1 lost its key, when only
 * node 0 held the token, and node 0 was not heard since to exclude that: a loss, reported (ELOST),
 * and the release says ELOST. (A library that takes the late yes for a kept key from the start
 * sees nodes 0 and 2, a quorum, and goes on.) */
static void restart_right_after_a_late_yes_is_a_loss_when_unheard(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = amnesia_client_slow(&env, 1u << 0); /* node 0 is stopped below */
    lost_record lost = {0};
    redlock_lock *lock = acquire_with_node_2_stopped(&env, c, "amnesia:late-yes", &lost);
    assert_int_equal(fixture_pause(&env.cluster, 0), 0);
    assert_int_equal(fixture_resume(&env.cluster, 2), 0);
    /* Node 2's late yes read, and the probe after it answered by node 1 (node 0 owes it). */
    redlock_node_info info;
    redlock_node_info_init(&info);
    uint64_t t0 = redlock_now_us();
    do {
        h_run_for(&env.loop, 5);
        assert_int_equal(redlock_client_node_info(c, 2, &info), 0);
    } while (info.inflight != 0 && h_since_us(t0) < H_WAIT_MS * 1000ull);
    assert_int_equal(info.inflight, 0);
    h_run_for(&env.loop, 50);
    size_t len;
    const char *token = redlock_lock_token(lock, &len);
    assert_int_equal(h_count_holding(&env, "amnesia:late-yes", 16, token, len),
                     N - 1); /* 0: stopped */
    restart_node_1_and_watch(&env, lock, &lost);
    printf("# (want 1, %d, 0)\n", REDLOCK_ELOST);
    assert_int_equal(lost.calls, 1);
    assert_int_equal(lost.reason, REDLOCK_ELOST);
    assert_false(lost.held_in_cb);
    assert_false(redlock_lock_is_held(lock, redlock_now_us()));
    h_record rel;
    assert_int_equal(fixture_resume(&env.cluster, 0), 0);
    assert_int_equal(h_release(&env, lock, &rel), REDLOCK_ELOST);
    redlock_lock_free(lock);
    h_env_stop(&env);
}

/* The same late yes with every node running and the client quiet: 5 ms after it the client asks
 * nodes 0 and 1, which it wrote nothing to since, for the TIME (its probe, counted in
 * redlock_node_info's probes), and their answers show that node 2's key lies inside the hold.
 * Then node 1 back empty costs only its own key: nodes 0 and 2 kept the lock, the check's
 * extension is won on them, and the release is 0. (A client that never asks, or that counts its
 * probe for nothing, sees only node 0 kept and reports a loss.) */
static void a_quiet_client_asks_after_a_late_yes(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = amnesia_client(&env);
    lost_record lost = {0};
    redlock_lock *lock = acquire_with_node_2_stopped(&env, c, "amnesia:asks", &lost);
    assert_int_equal(fixture_resume(&env.cluster, 2), 0);
    h_settle(&env, c); /* node 2's late yes */
    redlock_node_info info[N];
    uint64_t t0 = redlock_now_us();
    for (;;) { /* until the probes went and were answered */
        unsigned asked = 0;
        for (unsigned i = 0; i < N; i++) {
            redlock_node_info_init(&info[i]);
            assert_int_equal(redlock_client_node_info(c, i, &info[i]), 0);
            asked += i < 2 && info[i].probes > 0 && info[i].inflight == 0;
        }
        if (asked == 2 || h_since_us(t0) > H_WAIT_MS * 1000ull)
            break;
        h_run_for(&env.loop, 5);
    }
    assert_int_equal(info[0].probes, 1);
    assert_int_equal(info[1].probes, 1);
    assert_true(info[2].probes <= 1); /* the probe is the client's, for all its locks */
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(info[i].answers, info[i].requests);
    restart_node_1_and_watch(&env, lock, &lost);
    printf("# (want 0, 0, 1)\n");
    assert_int_equal(lost.calls, 0);
    assert_int_equal(redlock_lock_extensions(lock), 1);
    h_record rel;
    assert_int_equal(h_release(&env, lock, &rel), 0);
    redlock_lock_free(lock);
    h_env_stop(&env);
}

/* Keys lost without a restart (FLUSHALL here; a proxy in front of a restarted server, an
 * eviction): no new run_id tells, but the first round that hears a "no" from a node where the
 * lock's last won round had a "yes" does, and every held lock is checked then: within one more
 * round, not at each lock's next planned extension (a plain lock: never). */
static void a_key_gone_checks_every_lock(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = amnesia_client(&env);
    lost_record lost = {0};
    redlock_lock *a = hold(&env, c, "amnesia:flush-a", 0, NULL);
    redlock_lock *b = hold(&env, c, "amnesia:flush-b", 0, NULL);
    redlock_lock *autol = hold(&env, c, "amnesia:flush-c", 0, &lost);
    for (unsigned i = 1; i <= 2; i++) {
        redisReply *r = fixture_command(&env.cluster, i, "FLUSHALL");
        assert_non_null(r);
        freeReplyObject(r);
    }
    h_record ext;
    assert_int_equal(h_extend(&env, a, 0, 0, &ext), REDLOCK_ELOST);
    uint64_t seen = redlock_now_us(), bound_us = (H_NODE_TIMEOUT_MS + H_SLACK_MS) * 1000ull;
    while ((lost.calls == 0 || redlock_lock_is_held(b, redlock_now_us())) &&
           h_since_us(seen) < bound_us)
        h_run_for(&env.loop, 5);
    printf("# the other locks were found lost %llu ms after the extend that saw the key gone\n",
           (unsigned long long)(h_since_us(seen) / 1000));
    assert_int_equal(lost.calls, 1);
    assert_int_equal(lost.reason, REDLOCK_ELOST);
    assert_false(redlock_lock_is_held(b, redlock_now_us()));
    assert_false(redlock_lock_is_held(a, redlock_now_us()));
    assert_int_equal(new_server_lines, 0); /* no reconnection told it */
    h_record rel;
    assert_int_equal(h_release(&env, b, &rel), REDLOCK_ELOST);
    redlock_lock_free(a);
    redlock_lock_free(b);
    redlock_lock_free(autol);
    h_env_stop(&env);
}

/* The client closes while a check is in flight (a stopped node owes its answer): the check ends
 * with the close (canceled), the close callback runs, and nothing is left behind (the sanitizer
 * and valgrind runs see to the memory). */
static void close_during_a_check(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = amnesia_client(&env);
    (void)hold(&env, c, "amnesia:closing", 0, NULL);
    assert_int_equal(fixture_pause(&env.cluster, 2), 0);
    assert_int_equal(fixture_restart(&env.cluster, 1), 0);
    redlock_node_info info;
    redlock_node_info_init(&info);
    uint64_t until = redlock_now_us() + H_WAIT_MS * 1000;
    do {
        h_run_for(&env.loop, 5);
        assert_int_equal(redlock_client_node_info(c, 2, &info), 0);
    } while ((new_server_lines == 0 || info.inflight == 0) && redlock_now_us() < until);
    assert_int_equal(new_server_lines, 1);
    assert_int_equal(info.inflight, 1); /* the check's inspect waits for the stopped node */
    h_close_client_ex(&env, c, REDLOCK_CLOSE_FAST);
    assert_int_equal(fixture_resume(&env.cluster, 2), 0);
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        H_TEST(majority_back_empty_is_lost_at_once),
        H_TEST(retake_restores_the_keys_at_once),
        H_TEST(rolling_restarts_keep_the_lock),
        H_TEST(retake_does_not_hide_a_majority_back_empty),
        H_TEST(retake_does_not_hide_a_gap_seen_late),
        H_TEST(retake_finds_another_holder),
        H_TEST(plain_lock_reads_as_lost),
        H_TEST(inspect_finds_a_silent_loss),
        H_TEST(one_node_back_empty_keeps_the_locks),
        H_TEST(restart_right_after_a_late_yes_is_a_loss_when_unheard),
        H_TEST(a_quiet_client_asks_after_a_late_yes),
        H_TEST(a_key_gone_checks_every_lock),
        H_TEST(close_during_a_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
