/* SPDX-License-Identifier: MIT */
/* test_kept.c - a release is kept until a node answers it (docs/operations.md): one that timed
 * out on a silent node, whose connection then went before the late answer came, is sent again on
 * the next connection, so the key does not block the resource for the rest of its ttl.
 *
 * Node 0 alone has a short deadline (SHORT_MS, in its URL) and is the only node made silent:
 * behind a blackholing proxy, or stopped (SIGSTOP). The others keep the harness's seconds. The
 * key's ttl is 30 s; "gone soon" is bounded by H_WAIT_MS, a third of it. */
#include "harness.h"
#include "proxy.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 3
#define SHORT_MS 400
#define TTL_MS 30000

static proxy *front; /* node 0's proxy, if any; file-level so the teardown stops it */

static int teardown(void **state)
{
    proxy_stop(front);
    front = NULL;
    return h_teardown(state);
}

#define K_TEST(f) cmocka_unit_test_teardown(f, teardown)

/* Acquire key on every node (each of them holds it once the call returns). */
static void hold_everywhere(h_env *env, redlock_client *c, const char *key, h_record *held)
{
    assert_int_equal(h_acquire(env, c, key, TTL_MS, NULL, held), 0);
    size_t token_len = 0;
    const char *token = redlock_lock_token(held->lock, &token_len);
    assert_true(h_wait_holding(env, key, strlen(key), token, token_len, N, H_WAIT_MS));
    h_hear_all(env, c); /* every key kept: one node's loss costs its own vote only */
}

/* Release held (its client waits for every node; the handle is freed): deleted on the two
 * answering nodes, timed out on node 0. */
static void release_times_out_on_node_0(h_env *env, h_record *held)
{
    h_record rel;
    h_release_ok(env, held->lock, &rel);
    if (rel.votes_yes != N - 1 || rel.node_vote[0] != REDLOCK_VOTE_TIMEOUT)
        h_dump_record("the release", &rel);
    assert_int_equal(rel.votes_yes, N - 1);
    assert_int_equal(rel.node_vote[0], REDLOCK_VOTE_TIMEOUT);
}

/* Run the loop until node 0 no longer holds key, at most H_WAIT_MS. */
static bool gone_from_node_0(h_env *env, const char *key)
{
    uint64_t t0 = redlock_now_us();
    while (h_pttl(env, 0, key, strlen(key)) != -2) {
        if (h_since_us(t0) > H_WAIT_MS * 1000ull)
            return false;
        h_run_for(&env->loop, 20);
    }
    return true;
}

/* 1. Node 0 blackholed during the release: its request times out, then the connection is reset
 * (what the blackhole held is lost). The reconnection sends the release again. */
static void timed_out_release_sent_after_a_reset(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    front = proxy_start(fixture_free_port(), "127.0.0.1", env.cluster.servers[0].port);
    assert_non_null(front);
    static char buf[N][160];
    const char *urls[N];
    for (unsigned i = 0; i < N; i++) {
        if (i == 0)
            snprintf(buf[i], sizeof(buf[i]), "redis://127.0.0.1:%d?timeout_ms=%d",
                     proxy_port(front), SHORT_MS);
        else
            snprintf(buf[i], sizeof(buf[i]), "redis://127.0.0.1:%d", env.cluster.servers[i].port);
        urls[i] = buf[i];
    }
    redlock_options o;
    h_test_options(&o);
    redlock_client *c = NULL;
    char err[256] = "";
    assert_int_equal(h_client_urls(&env, urls, N, &o, &c, err, sizeof(err)), 0);
    h_wait_connected(&env, c);
    h_record held;
    hold_everywhere(&env, c, "kept:reset", &held);

    proxy_set_mode(front, PROXY_BLACKHOLE);
    release_times_out_on_node_0(&env, &held);
    proxy_reset_all(front); /* the held release is dropped with the connection */
    assert_true(h_pttl(&env, 0, "kept:reset", 10) > 0);
    proxy_set_mode(front, PROXY_PASS);
    assert_true(gone_from_node_0(&env, "kept:reset"));
    h_env_stop(&env);
}

/* 2. Node 0 stopped during the release, then killed and restarted with its fsynced AOF: the key
 * comes back, and the release the stopped server never read is sent on the new connection. */
static void timed_out_release_sent_after_a_restart(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, "appendonly yes\nappendfsync always\n");
    static char buf[N][160];
    const char *urls[N];
    h_urls_with_timeout(&env, 1u << 0, SHORT_MS, buf, urls);
    redlock_options o;
    h_test_options(&o);
    redlock_client *c = NULL;
    char err[256] = "";
    assert_int_equal(h_client_urls(&env, urls, N, &o, &c, err, sizeof(err)), 0);
    h_wait_connected(&env, c);
    h_record held;
    hold_everywhere(&env, c, "kept:restart", &held);

    assert_int_equal(fixture_pause(&env.cluster, 0), 0);
    release_times_out_on_node_0(&env, &held);
    /* Killed while stopped, it never reads the release (fixture_restart would continue it for an
     * instant before its SIGKILL); the restart then only reaps it. */
    assert_int_equal(kill(env.cluster.servers[0].pid, SIGKILL), 0);
    assert_int_equal(fixture_restart(&env.cluster, 0), 0);
    /* The AOF brings the key back; the server answers -LOADING until it has read it. The
     * client's loop does not run meanwhile, so nothing of the client's reaches it before. */
    uint64_t t0 = redlock_now_us();
    long long pttl;
    while ((pttl = h_pttl(&env, 0, "kept:restart", 12)) < 0 && h_since_us(t0) < H_WAIT_MS * 1000ull)
        uv_sleep(10);
    assert_true(pttl > 0);
    assert_true(gone_from_node_0(&env, "kept:restart"));
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        K_TEST(timed_out_release_sent_after_a_reset),
        K_TEST(timed_out_release_sent_after_a_restart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
