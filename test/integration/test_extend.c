/* SPDX-License-Identifier: MIT */
/* test_extend.c - extending a held lock: renewal on the nodes, expiry, release, keys deleted
 * behind the lock's back, and re-taking the key on a node that was restarted. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 5
#define MS 1000ull

static void token_opts(redlock_lock_opts *lo, const char *token)
{
    redlock_lock_opts_init(lo);
    lo->token = token;
    lo->token_len = strlen(token);
}

/* 7. extending keeps the lock past its first ttl. */
static void extend_keeps_lock_alive(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *a = h_client(&env, NULL);
    redlock_client *b = h_client(&env, NULL);
    h_wait_ready(&env, a);
    h_wait_ready(&env, b);
    redlock_lock_opts lo;
    token_opts(&lo, "tok-ext");
    h_record rec, ext;
    /* Extended every 500 ms: a ttl of 5 s leaves the machine seconds to be late by (valgrind on
     * a loaded machine stalls a process for more than one). */
    const uint64_t ttl_ms = 5000;
    assert_int_equal(h_acquire(&env, a, "ext:alive", ttl_ms, &lo, &rec), 0);
    uint64_t first_deadline = redlock_lock_deadline_us(rec.lock);
    int extends = 0;
    while (extends < 3 || redlock_now_us() <= first_deadline + 100 * MS) {
        h_run_for(&env.loop, 500);
        uint64_t before = redlock_now_us();
        assert_int_equal(h_extend(&env, rec.lock, ttl_ms, 0, &ext), 0);
        extends++;
        assert_true(ext.lock == rec.lock);
        assert_true(ext.votes_yes >= 3);
        assert_int_equal(ext.attempts, 1);
        /* The new validity counts from the extend, not from the acquire. */
        assert_true(redlock_lock_deadline_us(rec.lock) > before);
        h_assert_validity(&ext, ttl_ms, redlock_lock_validity_ms(rec.lock));
        assert_true(redlock_lock_validity_ms(rec.lock) > 0);
        assert_int_equal(redlock_lock_ttl_ms(rec.lock), ttl_ms);
        assert_true(redlock_lock_is_held(rec.lock, redlock_now_us()));
    }
    /* Well past the first ttl: a's key is still there and b is refused. */
    assert_true(redlock_now_us() > first_deadline);
    assert_true(h_wait_holding(&env, "ext:alive", 9, "tok-ext", 7, N, H_WAIT_MS));
    for (unsigned i = 0; i < N; i++) {
        long long pttl = h_pttl(&env, i, "ext:alive", 9);
        assert_true(pttl > 0 && pttl <= (long long)ttl_ms);
    }
    h_record rb;
    assert_int_equal(h_acquire(&env, b, "ext:alive", 500, NULL, &rb), REDLOCK_EBUSY);
    assert_true(rb.votes_no >= 3);
    /* A longer ttl shows up on the nodes (once every node ran the extend, not only a quorum):
     * beyond the old ttl everywhere. */
    const uint64_t longer_ms = 30000;
    assert_int_equal(h_extend(&env, rec.lock, longer_ms, 0, &ext), 0);
    assert_int_equal(redlock_lock_ttl_ms(rec.lock), longer_ms);
    h_assert_validity(&ext, longer_ms, redlock_lock_validity_ms(rec.lock));
    h_drain(&env, a);
    for (unsigned i = 0; i < N; i++) {
        long long pttl = h_pttl(&env, i, "ext:alive", 9);
        assert_true(pttl > (long long)ttl_ms && pttl <= (long long)longer_ms);
    }
    h_record rel;
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, N);
    redlock_lock_free(rec.lock);
    h_close_client(&env, b);
    h_env_stop(&env);
}

/* 7. extend after expiry is refused at once; after release too. */
static void extend_after_expiry_or_release_is_refused(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_record rec, ext, rel;
    assert_int_equal(h_acquire(&env, c, "ext:expired", 300, NULL, &rec), 0);
    while (redlock_lock_is_held(rec.lock, redlock_now_us()))
        h_run_for(&env.loop, 20);
    memset(&ext, 0, sizeof(ext));
    assert_int_equal(redlock_extend(rec.lock, 300, 0, h_record_cb, &ext), REDLOCK_EEXPIRED);
    assert_true(strlen(redlock_client_last_error(c)) > 0);
    h_run_for(&env.loop, 50);
    assert_int_equal(ext.calls, 0); /* failed at once: no callback */
    /* Also with RETAKE. */
    assert_int_equal(redlock_extend(rec.lock, 300, REDLOCK_EXTEND_RETAKE, h_record_cb, &ext),
                     REDLOCK_EEXPIRED);
    assert_int_equal(h_release(&env, rec.lock, &rel), REDLOCK_ELOST); /* the keys expired */
    redlock_lock_free(rec.lock);

    assert_int_equal(h_acquire(&env, c, "ext:released", 5000, NULL, &rec), 0);
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, N);
    assert_int_equal(redlock_extend(rec.lock, 5000, 0, h_record_cb, &ext), REDLOCK_ERELEASED);
    assert_int_equal(redlock_extend(rec.lock, 5000, REDLOCK_EXTEND_RETAKE, h_record_cb, &ext),
                     REDLOCK_ERELEASED);
    h_run_for(&env.loop, 50);
    assert_int_equal(ext.calls, 0);
    /* And nothing came back on the nodes. */
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(h_pttl(&env, i, "ext:released", 12), -2);
    /* Bad flags are refused. */
    assert_int_equal(h_acquire(&env, c, "ext:flags", 5000, NULL, &rec), 0);
    assert_int_equal(redlock_extend(rec.lock, 5000, 0x80, h_record_cb, &ext), REDLOCK_EINVAL);
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

/* 7. keys deleted behind the lock's back on a quorum of nodes: the lock is lost. */
static void extend_fails_when_quorum_lost_the_key(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    redlock_lock_opts lo;
    token_opts(&lo, "tok-lost");
    h_record rec, ext, rel;
    assert_int_equal(h_acquire(&env, c, "ext:lost", 5000, &lo, &rec), 0);
    assert_true(h_wait_holding(&env, "ext:lost", 8, "tok-lost", 8, N, H_WAIT_MS));
    h_hear_all(&env, c); /* every key kept */
    /* Two deletions leave a quorum: the extend still wins. */
    assert_int_equal(h_del(&env, 0, "ext:lost", 8), 1);
    assert_int_equal(h_del(&env, 1, "ext:lost", 8), 1);
    assert_int_equal(h_extend(&env, rec.lock, 5000, 0, &ext), 0);
    /* Without RETAKE the deleted keys stay deleted (once nodes 0 and 1 ran the extend). */
    h_drain(&env, c);
    assert_int_equal(h_pttl(&env, 0, "ext:lost", 8), -2);
    assert_int_equal(h_pttl(&env, 1, "ext:lost", 8), -2);
    /* A third: the quorum no longer holds the token. */
    assert_int_equal(h_del(&env, 2, "ext:lost", 8), 1);
    assert_int_equal(h_extend(&env, rec.lock, 5000, 0, &ext), REDLOCK_ELOST);
    assert_int_equal(ext.votes_no, 3);
    assert_true(ext.lock == rec.lock);
    /* Another value in place of ours is "lost" too, and is not touched. After the loss a retake
     * is refused (it could hide a gap): only a plain extend may run. */
    for (unsigned i = 0; i < 3; i++)
        h_set(&env, i, "ext:lost", 8, "foreign");
    assert_int_equal(redlock_extend(rec.lock, 5000, REDLOCK_EXTEND_RETAKE, h_record_cb, &ext),
                     REDLOCK_EINVAL);
    assert_int_equal(h_extend(&env, rec.lock, 5000, 0, &ext), REDLOCK_ELOST);
    h_drain(&env, c);
    assert_int_equal(h_count_holding(&env, "ext:lost", 8, "foreign", 7), 3);
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(h_pttl(&env, i, "ext:lost", 8), -1);         /* no ttl was put on it */
    assert_int_equal(h_release(&env, rec.lock, &rel), REDLOCK_ELOST); /* 2 of 5 still held it */
    assert_int_equal(rel.votes_yes, 2);
    assert_int_equal(h_count_holding(&env, "ext:lost", 8, "foreign", 7), 3);
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

/* 7. RETAKE puts the key back on a node that was restarted (and so lost it). */
static void extend_retake_restores_restarted_node(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_options o;
    h_test_options(&o);
    o.reconnect_max_ms = 1000;
    redlock_client *c = h_client(&env, &o);
    redlock_lock_opts lo;
    token_opts(&lo, "tok-retake");
    h_record rec, ext, rel;
    assert_int_equal(h_acquire(&env, c, "ext:retake", 10000, &lo, &rec), 0);
    assert_true(h_wait_holding(&env, "ext:retake", 10, "tok-retake", 10, N, H_WAIT_MS));
    h_hear_all(&env, c); /* every key kept: node 0 back empty costs its own vote only */
    assert_int_equal(fixture_restart(&env.cluster, 0), 0);
    assert_int_equal(h_pttl(&env, 0, "ext:retake", 10), -2);
    assert_true(h_wait_release_votes(&env, c, N, H_WAIT_MS)); /* node 0 is reconnected */

    /* Without the flag node 0 says no and stays without the key. */
    assert_int_equal(h_extend(&env, rec.lock, 10000, 0, &ext), 0);
    assert_true(ext.node_vote[0] == REDLOCK_VOTE_NO || ext.node_vote[0] == REDLOCK_VOTE_NONE);
    h_drain(&env, c);
    assert_int_equal(h_pttl(&env, 0, "ext:retake", 10), -2);
    assert_int_equal(h_count_holding(&env, "ext:retake", 10, "tok-retake", 10), 4);

    /* With it, node 0 has the token again, with the new ttl. */
    assert_int_equal(h_extend(&env, rec.lock, 9000, REDLOCK_EXTEND_RETAKE, &ext), 0);
    assert_true(ext.node_vote[0] == REDLOCK_VOTE_YES || ext.node_vote[0] == REDLOCK_VOTE_NONE);
    assert_true(h_wait_holding(&env, "ext:retake", 10, "tok-retake", 10, N, H_WAIT_MS));
    long long pttl = h_pttl(&env, 0, "ext:retake", 10);
    assert_true(pttl > 0 && pttl <= 9000);
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, N);
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

/* The same, with two other nodes killed (their keys gone with them) so node 0's vote decides the
 * round: without RETAKE it votes no and the extend fails; with RETAKE it votes yes, but its key is
 * set anew and vouches for nothing before: only nodes 1 and 2 renewed kept keys, two of five, so
 * the hold cannot be shown continuous (ENOQUORUM: too few kept nodes answered, the extend not
 * won), and it was not: for a while only nodes 1 and 2 held the token, and anyone could have
 * taken 0, 3 and 4. The release cannot tell either. */
static void extend_retake_vote_decides(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_options o;
    h_test_options(&o);
    o.reconnect_max_ms = 1000;
    redlock_client *c = h_client(&env, &o);
    redlock_lock_opts lo;
    token_opts(&lo, "tok-decide");
    h_record rec, ext, rel;
    assert_int_equal(h_acquire(&env, c, "ext:decide", 10000, &lo, &rec), 0);
    assert_true(h_wait_holding(&env, "ext:decide", 10, "tok-decide", 10, N, H_WAIT_MS));
    h_hear_all(&env, c); /* every key kept */
    assert_int_equal(fixture_kill(&env.cluster, 3), 0);
    assert_int_equal(fixture_kill(&env.cluster, 4), 0);
    assert_int_equal(fixture_restart(&env.cluster, 0), 0);
    assert_true(h_wait_release_votes(&env, c, 3, H_WAIT_MS));

    assert_int_equal(h_extend(&env, rec.lock, 10000, 0, &ext), REDLOCK_ENOQUORUM);
    assert_int_equal(ext.node_vote[0], REDLOCK_VOTE_NO);
    assert_int_equal(ext.node_vote[3], REDLOCK_VOTE_ERROR);
    assert_int_equal(ext.node_vote[4], REDLOCK_VOTE_ERROR);
    assert_int_equal(h_pttl(&env, 0, "ext:decide", 10), -2);
    /* A failed extend does not end the lock: its old validity still runs. */
    assert_true(redlock_lock_is_held(rec.lock, redlock_now_us()));

    assert_int_equal(h_extend(&env, rec.lock, 10000, REDLOCK_EXTEND_RETAKE, &ext),
                     REDLOCK_ENOQUORUM);
    assert_int_equal(ext.votes_yes, 3);
    assert_int_equal(ext.node_vote[0], REDLOCK_VOTE_YES);
    assert_int_equal(ext.node_vote[1], REDLOCK_VOTE_YES);
    assert_int_equal(ext.node_vote[2], REDLOCK_VOTE_YES);
    size_t len = 0;
    char *v = h_get(&env, 0, "ext:decide", 10, &len);
    assert_non_null(v);
    assert_int_equal(len, 10);
    assert_memory_equal(v, "tok-decide", 10);
    free(v);
    assert_int_equal(h_release(&env, rec.lock, &rel), REDLOCK_ENOQUORUM);
    assert_int_equal(rel.votes_yes, 3);
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

/* Release while an extend is in flight: on each node the release runs after the extend, so the
 * key is gone at the end. */
static void release_during_extend(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_record rec, ext, rel;
    /* Cache both scripts first: a NOSCRIPT fallback is test_scripts.c's business. */
    h_load_scripts(&env);
    assert_int_equal(h_acquire(&env, c, "ext:race", 5000, NULL, &rec), 0);
    memset(&ext, 0, sizeof(ext));
    memset(&rel, 0, sizeof(rel));
    assert_int_equal(redlock_extend(rec.lock, 5000, 0, h_record_cb, &ext), 0);
    assert_int_equal(redlock_release(rec.lock, h_record_cb, &rel), 0);
    assert_true(h_run_until(&env.loop, &rel.calls, 1, 10000));
    assert_true(h_run_until(&env.loop, &ext.calls, 1, 10000));
    h_run_for(&env.loop, 50);
    assert_int_equal(ext.calls, 1);
    assert_int_equal(rel.calls, 1);
    assert_int_equal(ext.status, 0);
    assert_int_equal(rel.status, 0);
    assert_int_equal(rel.votes_yes, N);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(h_pttl(&env, i, "ext:race", 8), -2);
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        H_TEST(extend_keeps_lock_alive),
        H_TEST(extend_after_expiry_or_release_is_refused),
        H_TEST(extend_fails_when_quorum_lost_the_key),
        H_TEST(extend_retake_restores_restarted_node),
        H_TEST(extend_retake_vote_decides),
        H_TEST(release_during_extend),
    };
    return cmocka_run_group_tests_name("extend", tests, NULL, NULL);
}
