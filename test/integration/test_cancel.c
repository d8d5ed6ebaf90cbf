/* SPDX-License-Identifier: MIT */
/* test_cancel.c - stopping one operation, and closing without stranding keys: redlock_cancel,
 * the releasing close and its fast variant, and the releases a node keeps while it is down.
 * Every check looks at the servers themselves: a canceled acquire, a closed client or a release
 * that found its node down must leave no key of theirs behind. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 5

/* Every server's key count is 0, after every command the client wrote has run. */
static void assert_no_keys(h_env *env, redlock_client *c)
{
    h_drain(env, c);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(h_dbsize(env, i), 0);
}

static const char *token_of(redlock_lock *lock)
{
    size_t len = 0;
    return redlock_lock_token(lock, &len);
}

/* 1. An acquire waiting (wait_ms 30 s) behind another holder is canceled: its callback comes
 * once, from the loop and not from inside redlock_cancel, with ECANCELED; it never takes the
 * lock; the holder's key is untouched and, once released, nothing is left. */
static void cancel_waiting_acquire(void **state)
{
    (void)state;
    h_env env;
    h_record held;
    redlock_client *c = h_start_holding(&env, N, "cancel:wait", 30000, &held);

    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.wait_ms = 30000;
    h_record waiter = {0};
    assert_int_equal(redlock_acquire(c, "cancel:wait", 11, 30000, &lo, h_record_cb, &waiter), 0);
    h_run_for(&env.loop, 300); /* a few lost attempts and retries */
    assert_int_equal(waiter.calls, 0);
    assert_int_equal(redlock_cancel(c, &waiter), 0);
    assert_int_equal(waiter.calls, 0); /* never from inside the call */
    assert_true(h_run_until(&env.loop, &waiter.calls, 1, H_WAIT_MS));
    assert_int_equal(waiter.status, REDLOCK_ECANCELED);
    assert_null(waiter.lock);
    assert_true(waiter.attempts >= 1);
    /* Canceled once: a second cancel finds nothing, and no second callback comes. */
    assert_int_equal(redlock_cancel(c, &waiter), REDLOCK_ENOTFOUND);
    h_run_for(&env.loop, 100);
    assert_int_equal(waiter.calls, 1);

    const char *token = token_of(held.lock);
    assert_int_equal(h_count_holding(&env, "cancel:wait", 11, token, strlen(token)), N);
    h_record rel;
    h_release_ok(&env, held.lock, &rel);
    assert_int_equal(rel.votes_yes, N);
    assert_no_keys(&env, c);
    h_env_stop(&env);
}

/* 2. An acquire canceled while its round is in flight (canceled in the same loop turn that
 * started it, before any answer): its attempt is released on every node, so the resource is
 * free at once for another client, not after the 60 s ttl. */
static void cancel_acquire_in_flight(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_wait_ready(&env, c);
    for (int round = 0; round < 3; round++) {
        h_record rec = {0};
        assert_int_equal(redlock_acquire(c, "cancel:flight", 13, 60000, NULL, h_record_cb, &rec),
                         0);
        assert_int_equal(redlock_cancel(c, &rec), 0);
        assert_true(h_run_until(&env.loop, &rec.calls, 1, H_WAIT_MS));
        assert_int_equal(rec.status, REDLOCK_ECANCELED);
        assert_null(rec.lock);
        assert_no_keys(&env, c);
    }
    h_record got = {0};
    assert_int_equal(h_acquire(&env, c, "cancel:flight", 60000, NULL, &got), 0);
    h_release_ok(&env, got.lock, NULL);
    h_env_stop(&env);
}

/* 3. Extend and release can be canceled on their own. The canceled extend leaves the lock's
 * deadline as it was (the safe side); the canceled release's commands still run, and the
 * callback says ECANCELED once. Operations with other data are not touched. */
static void cancel_extend_and_release(void **state)
{
    (void)state;
    h_env env;
    h_record held;
    redlock_client *c = h_start_holding(&env, N, "cancel:ext", 30000, &held);
    uint64_t deadline = redlock_lock_deadline_us(held.lock);

    h_record ext = {0}, other = {0};
    assert_int_equal(redlock_extend(held.lock, 60000, 0, h_record_cb, &ext), 0);
    assert_int_equal(redlock_inspect(c, "cancel:ext", 10, h_record_cb, &other), 0);
    assert_int_equal(redlock_cancel(c, &ext), 0);
    assert_true(h_run_until(&env.loop, &ext.calls, 1, H_WAIT_MS));
    assert_int_equal(ext.status, REDLOCK_ECANCELED);
    assert_int_equal(redlock_lock_deadline_us(held.lock), deadline);
    assert_true(h_run_until(&env.loop, &other.calls, 1, H_WAIT_MS));
    assert_int_equal(other.status, 0); /* the inspect was not canceled */

    h_record rel = {0};
    assert_int_equal(redlock_release(held.lock, h_record_cb, &rel), 0);
    assert_int_equal(redlock_cancel(c, &rel), 0);
    assert_true(h_run_until(&env.loop, &rel.calls, 1, H_WAIT_MS));
    assert_int_equal(rel.status, REDLOCK_ECANCELED);
    /* Released from the call on: no second release, and the keys are gone. */
    assert_int_equal(redlock_release(held.lock, h_record_cb, &rel), REDLOCK_ERELEASED);
    redlock_lock_free(held.lock);
    assert_no_keys(&env, c);
    h_env_stop(&env);
}

/* 4. What cancel refuses: a NULL client, data nothing pending has, an operation whose callback
 * has run. The auto-extension's own extends (callback data NULL inside the library) are never
 * canceled, even by redlock_cancel(c, NULL) while one is in flight. */
static int lost_calls;

static void on_lost(redlock_lock *lock, int reason, void *data)
{
    (void)lock;
    (void)reason;
    (void)data;
    lost_calls++;
}

static void cancel_refusals(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_wait_ready(&env, c);
    assert_int_equal(redlock_cancel(NULL, NULL), REDLOCK_EINVAL);
    int nothing = 0;
    assert_int_equal(redlock_cancel(c, &nothing), REDLOCK_ENOTFOUND);
    assert_non_null(strstr(redlock_client_last_error(c), "no pending operation"));

    lost_calls = 0;
    redlock_auto_opts ao;
    redlock_auto_opts_init(&ao);
    ao.extend_at = 0.2;
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.auto_extend = &ao;
    lo.lost_cb = on_lost;
    h_record held = {0};
    assert_int_equal(h_acquire(&env, c, "cancel:auto", 1000, &lo, &held), 0);
    /* Until several extensions have won, whenever an operation is pending (only the
     * auto-extension's extends can be), cancel(c, NULL) must find nothing. */
    unsigned seen_pending = 0;
    uint64_t t0 = redlock_now_us();
    while (redlock_lock_extensions(held.lock) < 5 && h_since_us(t0) < 20 * 1000000ull) {
        uv_run(&env.loop, UV_RUN_ONCE);
        redlock_stats st;
        redlock_stats_init(&st);
        assert_int_equal(redlock_client_stats(c, &st), 0);
        if (st.pending > 0) {
            seen_pending++;
            assert_int_equal(redlock_cancel(c, NULL), REDLOCK_ENOTFOUND);
        }
    }
    assert_true(redlock_lock_extensions(held.lock) >= 5);
    assert_true(seen_pending > 0);
    assert_int_equal(lost_calls, 0);
    assert_true(redlock_lock_is_held(held.lock, redlock_now_us()));
    h_release_ok(&env, held.lock, NULL);
    h_env_stop(&env);
}

/* 5. Closing releases what the client holds - three held locks, one of them auto-extended, and
 * an acquire in flight - on every node, before the close callback; an attached handle (a hold
 * that belongs to another client) is left alone. With REDLOCK_CLOSE_FAST nothing is released.
 * Unknown flags are refused and leave the client open. */
static void close_releases_held_locks(void **state)
{
    (void)state;
    for (int fast = 0; fast < 2; fast++) {
        h_env env;
        h_env_start(&env, N, NULL);
        redlock_client *owner = h_own_client(&env, NULL);
        h_record foreign = {0};
        assert_int_equal(h_acquire(&env, owner, "close:foreign", 60000, NULL, &foreign), 0);
        const char *ftoken = token_of(foreign.lock);

        redlock_client *c = h_own_client(&env, NULL);
        assert_int_equal(redlock_client_close_ex(c, 2, NULL, NULL), REDLOCK_EINVAL);
        h_record held[3];
        char tokens[3][REDLOCK_TOKEN_MAX + 1];
        memset(held, 0, sizeof(held));
        redlock_auto_opts ao;
        redlock_auto_opts_init(&ao);
        redlock_lock_opts lo;
        redlock_lock_opts_init(&lo);
        lo.auto_extend = &ao;
        lo.lost_cb = on_lost;
        for (int i = 0; i < 3; i++) {
            char name[32];
            snprintf(name, sizeof(name), "close:held:%d", i);
            assert_int_equal(h_acquire(&env, c, name, 60000, i == 0 ? &lo : NULL, &held[i]), 0);
            snprintf(tokens[i], sizeof(tokens[i]), "%s", token_of(held[i].lock));
            assert_true(h_wait_holding(&env, name, strlen(name), tokens[i], strlen(tokens[i]), N,
                                       H_WAIT_MS));
        }
        redlock_lock *attached = NULL;
        assert_int_equal(
            redlock_lock_attach(c, "close:foreign", 13, ftoken, strlen(ftoken), 60000, &attached),
            0);
        h_record flight = {0};
        assert_int_equal(redlock_acquire(c, "close:flight", 12, 60000, NULL, h_record_cb, &flight),
                         0);
        lost_calls = 0;
        h_close_client_ex(&env, c, fast ? REDLOCK_CLOSE_FAST : 0);
        assert_int_equal(flight.calls, 1);
        assert_int_equal(flight.status, REDLOCK_ECANCELED);
        assert_int_equal(lost_calls, 1); /* the auto-extended one hears of the close */

        h_drain(&env, owner); /* every command the closed client wrote ran before these */
        unsigned want = fast ? N : 0;
        for (int i = 0; i < 3; i++) {
            char name[32];
            snprintf(name, sizeof(name), "close:held:%d", i);
            assert_int_equal(
                h_count_holding(&env, name, strlen(name), tokens[i], strlen(tokens[i])), want);
        }
        long long flight_keys = 0;
        for (unsigned i = 0; i < N; i++)
            flight_keys += h_pttl(&env, i, "close:flight", 12) >= 0;
        if (!fast)
            assert_int_equal(flight_keys, 0);
        /* The attached handle's lock is the owner's: still held everywhere. */
        assert_int_equal(h_count_holding(&env, "close:foreign", 13, ftoken, strlen(ftoken)), N);
        h_release_ok(&env, foreign.lock, NULL);
        h_close_client_ex(&env, owner, 0);
        h_env_stop(&env);
    }
}

/* 6. A close with a node stopped: the release waits for that node no longer than its timeout
 * (300 ms here; the others keep their seconds), the other nodes' keys are deleted, and the close
 * callback comes. */
static void close_with_a_node_stopped(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    char buf[N][160];
    const char *urls[N];
    h_urls_with_timeout(&env, 1u << 0, 300, buf, urls);
    redlock_options opts;
    h_test_options(&opts);
    redlock_client *c = NULL;
    assert_int_equal(h_client_urls(&env, urls, N, &opts, &c, NULL, 0), 0);
    env.client = NULL;
    h_wait_ready(&env, c);
    h_record held = {0};
    assert_int_equal(h_acquire(&env, c, "close:stopped", 60000, NULL, &held), 0);
    char token[REDLOCK_TOKEN_MAX + 1];
    snprintf(token, sizeof(token), "%s", token_of(held.lock));
    assert_true(h_wait_holding(&env, "close:stopped", 13, token, strlen(token), N, H_WAIT_MS));
    assert_int_equal(fixture_pause(&env.cluster, 0), 0);
    uint64_t t0 = redlock_now_us();
    h_close_client_ex(&env, c, 0);
    uint64_t took_ms = h_since_us(t0) / 1000;
    assert_true(took_ms >= 300); /* it waited for the stopped node's deadline */
    assert_int_equal(fixture_resume(&env.cluster, 0), 0);
    /* Node 0 runs the release it got while stopped; the others ran it before the close ended. */
    unsigned left = 0;
    for (unsigned i = 1; i < N; i++)
        left += h_pttl(&env, i, "close:stopped", 13) >= 0;
    assert_int_equal(left, 0);
    h_env_stop(&env);
}

/* 7. A release that finds its node down is kept and sent when the node is back: node 0 is
 * killed (its data kept by an fsynced AOF), the release deletes the key on the other four and
 * fails on node 0; node 0 is restarted with the key; the client reconnects and deletes it there
 * too, long before the key's 60 s ttl. The release kept for a key whose ttl ran out is dropped. */
static void release_kept_until_node_returns(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, "appendonly yes\nappendfsync always\n");
    redlock_client *c = h_client(&env, NULL);
    h_wait_ready(&env, c);
    h_record held = {0};
    assert_int_equal(h_acquire(&env, c, "kept:rel", 60000, NULL, &held), 0);
    char token[REDLOCK_TOKEN_MAX + 1];
    snprintf(token, sizeof(token), "%s", token_of(held.lock));
    assert_true(h_wait_holding(&env, "kept:rel", 8, token, strlen(token), N, H_WAIT_MS));
    h_hear_all(&env, c); /* every key kept: one node's loss costs its own vote only */

    assert_int_equal(fixture_kill(&env.cluster, 0), 0);
    h_record rel;
    h_release_ok(&env, held.lock, &rel);
    assert_int_equal(rel.votes_yes, N - 1);
    assert_int_equal(rel.node_vote[0], REDLOCK_VOTE_ERROR);

    assert_int_equal(fixture_restart(&env.cluster, 0), 0);
    /* The AOF brings the key back. The server answers -LOADING until it has read it (the
     * fixture counts that as up), so ask until it says: the client's loop does not run
     * meanwhile, so nothing of the client's reaches the server before this. */
    uint64_t t0 = redlock_now_us();
    long long pttl;
    while ((pttl = h_pttl(&env, 0, "kept:rel", 8)) < 0 && h_since_us(t0) < H_WAIT_MS * 1000ull)
        uv_sleep(10);
    assert_true(pttl > 0);
    t0 = redlock_now_us();
    while (h_pttl(&env, 0, "kept:rel", 8) != -2 && h_since_us(t0) < H_WAIT_MS * 1000ull)
        h_run_for(&env.loop, 20);
    assert_int_equal(h_pttl(&env, 0, "kept:rel", 8), -2);
    assert_no_keys(&env, c);
    h_env_stop(&env);
}

/* ZCARD of queue on server i; -1 while the server answers -LOADING (reading its AOF). */
static long long queue_len(h_env *env, unsigned i, const char *queue)
{
    redisReply *r = fixture_command(&env->cluster, i, "ZCARD %s", queue);
    assert_non_null(r);
    if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "LOADING", 7) == 0) {
        freeReplyObject(r);
        return -1;
    }
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    long long n = r->integer;
    freeReplyObject(r);
    return n;
}

/* The client's lines "sent N release(s) kept while the node was down": how many, the Ns' sum. */
static int kept_lines, kept_sent;

static void count_kept(redlock_client *client, redlock_log_level level, const char *url,
                       const char *message, void *data)
{
    (void)client;
    (void)level;
    (void)url;
    (void)data;
    unsigned sent = 0;
    if (strstr(message, "kept while the node was down") != NULL &&
        sscanf(message, "sent %u release", &sent) == 1) {
        kept_lines++;
        kept_sent += (int)sent;
    }
}

/* 8. The same for a waiter's last release, which also takes it out of the queues: a waiter w got
 * the lock through the queue (it waited behind a holder), so it stands in the queue on every node
 * while it holds; node 0 is killed, w's release fails there, node 0 comes back with its AOF (w in
 * its queue, and the key unless its ttl ran out meanwhile); the kept release takes them away,
 * the key's ttl or not. Else node 0 would keep w at its queue's head, refusing everybody else,
 * until w's place deadline (10 s). */
static void waiter_release_kept(uint64_t ttl_ms, bool key_expires)
{
    h_env env;
    h_env_start(&env, N, "appendonly yes\nappendfsync always\n");
    redlock_options o;
    h_test_options(&o);
    o.log_fn = count_kept;
    kept_lines = kept_sent = 0;
    redlock_client *c = h_client(&env, &o);
    h_wait_ready(&env, c);
    redlock_client *holder = h_own_client(&env, NULL);
    const char *key = "kept:q", *queue = "kept:q:queue";
    h_record held = {0}, rec = {0};
    assert_int_equal(h_acquire(&env, holder, key, 60000, NULL, &held), 0);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.wait_ms = 30000;
    assert_int_equal(redlock_acquire(c, key, strlen(key), ttl_ms, &lo, h_record_cb, &rec), 0);
    uint64_t t0 = redlock_now_us();
    for (unsigned i = 0; i < N; i++)
        while (queue_len(&env, i, queue) != 1 && h_since_us(t0) < H_WAIT_MS * 1000ull)
            h_run_for(&env.loop, 10);
    h_release_ok(&env, held.lock, NULL);
    assert_true(h_run_until(&env.loop, &rec.calls, 1, H_WAIT_MS));
    assert_int_equal(rec.status, 0);
    char token[REDLOCK_TOKEN_MAX + 1];
    snprintf(token, sizeof(token), "%s", token_of(rec.lock));
    assert_true(h_wait_holding(&env, key, strlen(key), token, strlen(token), N, H_WAIT_MS));
    assert_int_equal(queue_len(&env, 0, queue), 1); /* w, holding */
    h_hear_all(&env, c); /* every key kept: one node's loss costs its own vote only */

    assert_int_equal(fixture_kill(&env.cluster, 0), 0);
    h_record rel;
    h_release_ok(&env, rec.lock, &rel);
    assert_int_equal(rel.node_vote[0], REDLOCK_VOTE_ERROR);
    for (unsigned i = 1; i < N; i++)
        assert_int_equal(queue_len(&env, i, queue), 0);
    if (key_expires)
        uv_sleep((unsigned)ttl_ms + 100); /* node 0 is down past the key's ttl */

    assert_int_equal(fixture_restart(&env.cluster, 0), 0);
    t0 = redlock_now_us(); /* the AOF is read (-LOADING meanwhile): w is back, maybe the key */
    while (queue_len(&env, 0, queue) != 1 && h_since_us(t0) < H_WAIT_MS * 1000ull)
        uv_sleep(10);
    assert_int_equal(queue_len(&env, 0, queue), 1);
    assert_true(key_expires == (h_pttl(&env, 0, key, strlen(key)) == -2));
    t0 = redlock_now_us();
    while (kept_lines == 0 && h_since_us(t0) < H_WAIT_MS * 1000ull)
        h_run_for(&env.loop, 20);
    assert_int_equal(kept_lines, 1);
    assert_int_equal(kept_sent, 1); /* one kept release sent */
    h_drain(&env, c);
    assert_int_equal(h_pttl(&env, 0, key, strlen(key)), -2);
    assert_int_equal(queue_len(&env, 0, queue), 0);
    h_close_client(&env, holder);
    assert_no_keys(&env, c);
    h_env_stop(&env);
}

static void waiter_release_kept_leaves_the_queue(void **state)
{
    (void)state;
    waiter_release_kept(60000, false);
}

/* 9. Its key's ttl ran out while node 0 was down: the release is kept for w's place, still. */
static void waiter_release_kept_past_the_keys_ttl(void **state)
{
    (void)state;
    waiter_release_kept(1000, true);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        H_TEST(cancel_waiting_acquire),
        H_TEST(cancel_acquire_in_flight),
        H_TEST(cancel_extend_and_release),
        H_TEST(cancel_refusals),
        H_TEST(close_releases_held_locks),
        H_TEST(close_with_a_node_stopped),
        H_TEST(release_kept_until_node_returns),
        H_TEST(waiter_release_kept_leaves_the_queue),
        H_TEST(waiter_release_kept_past_the_keys_ttl),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
