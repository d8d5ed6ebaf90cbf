/* SPDX-License-Identifier: MIT */
/* test_release.c - a release is decided at the quorum, like acquire and extend (docs/algorithm.md,
 * "Extend and release rounds"): its callback runs as soon as its status is known, with the far
 * nodes still pending, and their deletes go on and land; a close right after it completes only
 * once they did; the status rules of a release (0, REDLOCK_ELOST, REDLOCK_ENOQUORUM, a lapsed
 * hold) hold when it is decided early; release_waits_all waits for every node.
 *
 * Nodes 3 and 4 of five are behind a proxy that delays each way by FAR_MS, far longer than a
 * loaded machine takes to answer from the three near nodes: the far nodes cannot have answered
 * when the near quorum decided. Every node has seconds of deadline (the far ones a little more
 * than their round trip), so the only node that is slow is the one the test made slow. */
#include "harness.h"
#include "proxy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 5
#define FAR_MS 1500 /* one way: a far round trip is 3 s */
#define FAR_TIMEOUT_MS (2 * FAR_MS + H_NODE_TIMEOUT_MS)

static proxy *proxies[N];

static int teardown(void **state)
{
    for (unsigned i = 0; i < N; i++) {
        proxy_stop(proxies[i]);
        proxies[i] = NULL;
    }
    return h_teardown(state);
}

#define R_TEST(f) cmocka_unit_test_teardown(f, teardown)

/* Five servers; a client whose nodes 3 and 4 are behind delay proxies (set to FAR_MS once the
 * client is ready). waits_all: release_waits_all. */
static redlock_client *far_client(h_env *env, bool waits_all)
{
    h_env_start(env, N, NULL);
    static char buf[N][128];
    const char *urls[N];
    for (unsigned i = 0; i < N; i++) {
        int port = env->cluster.servers[i].port;
        if (i >= 3) {
            proxies[i] = proxy_start(fixture_free_port(), "127.0.0.1", port);
            assert_non_null(proxies[i]);
            snprintf(buf[i], sizeof(buf[i]), "redis://127.0.0.1:%d?timeout_ms=%d",
                     proxy_port(proxies[i]), FAR_TIMEOUT_MS);
        } else {
            snprintf(buf[i], sizeof(buf[i]), "redis://127.0.0.1:%d", port);
        }
        urls[i] = buf[i];
    }
    redlock_options o;
    h_test_options(&o);
    o.release_waits_all = waits_all;
    redlock_client *c = NULL;
    char err[256] = "";
    assert_int_equal(h_client_urls(env, urls, N, &o, &c, err, sizeof(err)), 0);
    h_wait_connected(env, c);
    for (unsigned i = 3; i < N; i++)
        proxy_set_delay_ms(proxies[i], FAR_MS);
    return c;
}

static void stop_proxies(void)
{
    for (unsigned i = 0; i < N; i++) {
        proxy_stop(proxies[i]);
        proxies[i] = NULL;
    }
}

/* Acquire key (decided by the near three), and wait until the far two hold it too. */
static void acquire_everywhere(h_env *env, redlock_client *c, const char *key, h_record *held)
{
    assert_int_equal(h_acquire(env, c, key, 60000, NULL, held), 0);
    size_t token_len = 0;
    const char *token = redlock_lock_token(held->lock, &token_len);
    assert_true(h_wait_holding(env, key, strlen(key), token, token_len, N, H_WAIT_MS));
}

/* Run the loop until no server holds key (bounded by wait_ms). */
static bool wait_gone(h_env *env, const char *key, uint64_t wait_ms)
{
    uint64_t t0 = redlock_now_us();
    for (;;) {
        unsigned left = 0;
        for (unsigned i = 0; i < N; i++)
            left += h_pttl(env, i, key, strlen(key)) != -2;
        if (left == 0)
            return true;
        if (h_since_us(t0) > wait_ms * 1000)
            return false;
        h_run_for(&env->loop, 10);
    }
}

/* 1. Decided at the quorum: status 0 with the near three's yes, the far two pending (no vote
 * yet); their deletes land within their deadline. */
static void release_decided_at_the_quorum(void **state)
{
    (void)state;
    h_env env;
    redlock_client *c = far_client(&env, false);
    h_record held, rel;
    acquire_everywhere(&env, c, "release:quorum", &held);
    assert_int_equal(h_release(&env, held.lock, &rel), 0);
    if (rel.votes_yes != 3 || rel.node_vote[3] != REDLOCK_VOTE_NONE ||
        rel.node_vote[4] != REDLOCK_VOTE_NONE)
        h_dump_record("the release", &rel);
    assert_int_equal(rel.votes_yes, 3);
    assert_int_equal(rel.node_vote[3], REDLOCK_VOTE_NONE);
    assert_int_equal(rel.node_vote[4], REDLOCK_VOTE_NONE);
    assert_true(wait_gone(&env, "release:quorum", FAR_TIMEOUT_MS + H_SLACK_MS));
    redlock_lock_free(held.lock);
    stop_proxies();
    h_env_stop(&env);
}

typedef struct closed {
    h_env *env;
    bool done;
    unsigned holding; /* servers that still held the key when the close callback ran */
} closed;

static void on_closed(redlock_client *c, void *data)
{
    (void)c;
    closed *cl = data;
    for (unsigned i = 0; i < N; i++)
        cl->holding += h_pttl(cl->env, i, "release:close", 13) != -2;
    cl->done = true;
}

static void on_release(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    h_record_cb(lock, status, result, data);
    redlock_lock_free(lock);
}

/* 2. A close right after a release decided at the quorum completes only once the far nodes'
 * deletes were answered: nothing is left held when its callback runs. */
static void close_after_release_deletes_everything(void **state)
{
    (void)state;
    h_env env;
    redlock_client *c = far_client(&env, false);
    h_record held, rel = {0};
    acquire_everywhere(&env, c, "release:close", &held);
    assert_int_equal(redlock_release(held.lock, on_release, &rel), 0);
    assert_true(h_run_until(&env.loop, &rel.calls, 1, H_WAIT_MS));
    assert_int_equal(rel.status, 0);
    closed cl = {&env, false, 0};
    env.client = NULL; /* closed here, not by h_env_stop */
    assert_int_equal(redlock_client_close(c, on_closed, &cl), 0);
    assert_true(h_run_until_true(&env.loop, &cl.done, FAR_TIMEOUT_MS + H_WAIT_MS));
    assert_int_equal(cl.holding, 0);
    stop_proxies();
    h_env_stop(&env);
}

/* 3. The status rules, decided early: more than N - quorum near nodes say "not ours"
 * (REDLOCK_ELOST); no quorum of yes nor of no is in reach any more with the near three down
 * (REDLOCK_ENOQUORUM); a hold whose validity had run out (REDLOCK_ELOST, once a quorum answered).
 * Each with the far two pending. */
static void status_rules_hold_when_decided_early(void **state)
{
    (void)state;
    h_env env;
    redlock_client *c = far_client(&env, false);
    h_record held, rel;

    acquire_everywhere(&env, c, "release:lost", &held);
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(h_del(&env, i, "release:lost", 12), 1);
    assert_int_equal(h_release(&env, held.lock, &rel), REDLOCK_ELOST);
    assert_int_equal(rel.votes_no, 3);
    assert_int_equal(rel.node_vote[3], REDLOCK_VOTE_NONE);
    redlock_lock_free(held.lock);

    h_record late;
    assert_int_equal(h_acquire(&env, c, "release:late", 300, NULL, &late), 0);
    h_run_for(&env.loop, 400); /* its validity ran out (its keys too) */
    assert_int_equal(h_release(&env, late.lock, &rel), REDLOCK_ELOST);
    assert_true(rel.votes_yes + rel.votes_no + rel.votes_error + rel.votes_timeout >= 3);
    redlock_lock_free(late.lock);

    acquire_everywhere(&env, c, "release:noq", &held);
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(fixture_kill(&env.cluster, i), 0);
    assert_int_equal(h_release(&env, held.lock, &rel), REDLOCK_ENOQUORUM);
    assert_int_equal(rel.votes_error, 3);
    assert_int_equal(rel.node_vote[3], REDLOCK_VOTE_NONE);
    assert_int_equal(rel.node_vote[4], REDLOCK_VOTE_NONE);
    redlock_lock_free(held.lock);
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(fixture_restart(&env.cluster, i), 0);
    stop_proxies();
    h_env_stop(&env);
}

/* 4. release_waits_all: the callback has every node's answer, the far ones included. */
static void release_waits_all_hears_every_node(void **state)
{
    (void)state;
    h_env env;
    redlock_client *c = far_client(&env, true);
    h_record held, rel;
    acquire_everywhere(&env, c, "release:all", &held);
    assert_int_equal(h_release(&env, held.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, N);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(h_pttl(&env, i, "release:all", 11), -2);
    redlock_lock_free(held.lock);
    stop_proxies();
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        R_TEST(release_decided_at_the_quorum),
        R_TEST(close_after_release_deletes_everything),
        R_TEST(status_rules_hold_when_decided_early),
        R_TEST(release_waits_all_hears_every_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
