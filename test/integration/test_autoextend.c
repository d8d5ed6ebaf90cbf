/* SPDX-License-Identifier: MIT */
/* test_autoextend.c - auto-extension against five real servers: a short-ttl lock stays held as
 * long as its holder wants; when it cannot be kept, "lost" fires exactly once and before the
 * validity deadline; nothing is extended after release. */
#include "harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct lost_record {
    int calls;
    int reason;
    uint64_t at_us;
    uint64_t deadline_us; /* the lock's deadline when "lost" fired */
    bool held_in_cb;      /* redlock_lock_is_held() inside the callback (must be false) */
    bool free_in_cb;
} lost_record;

static void on_lost(redlock_lock *lock, int reason, void *data)
{
    lost_record *l = data;
    l->calls++;
    l->reason = reason;
    l->at_us = redlock_now_us();
    l->deadline_us = redlock_lock_deadline_us(lock);
    l->held_in_cb = redlock_lock_is_held(lock, l->at_us);
    if (l->free_in_cb)
        redlock_lock_free(lock);
}

static int acquire_auto(h_env *env, redlock_client *c, const char *name, uint64_t ttl_ms,
                        const redlock_auto_opts *auto_opts, lost_record *lost, h_record *rec)
{
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    redlock_auto_opts defaults;
    redlock_auto_opts_init(&defaults);
    lo.auto_extend = auto_opts != NULL ? auto_opts : &defaults;
    lo.lost_cb = on_lost;
    lo.lost_data = lost;
    return h_acquire(env, c, name, ttl_ms, &lo, rec);
}

/* ttl 2 s, held 2.5 s: still ours, a second client is refused throughout, and the keys' PTTL
 * never ran out. (Extended every third of the ttl, "lost" at a tenth before the deadline: an
 * extension has more than a second to be late by on a loaded machine.) */
static void short_ttl_lock_stays_held(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 5, NULL);
    redlock_client *a = h_client(&env, NULL);
    redlock_client *b = h_client(&env, NULL);
    lost_record lost = {0};
    h_record rec;
    const uint64_t ttl_ms = 2000, hold_ms = 2500;
    assert_int_equal(acquire_auto(&env, a, "auto:held", ttl_ms, NULL, &lost, &rec), 0);
    redlock_lock *lock = rec.lock;
    uint64_t t0 = redlock_now_us();
    int refused = 0;
    while (h_since_us(t0) < hold_ms * 1000 || refused < 10) {
        h_record other;
        assert_int_equal(h_acquire(&env, b, "auto:held", ttl_ms, NULL, &other), REDLOCK_EBUSY);
        refused++;
        h_run_for(&env.loop, 100);
        assert_true(redlock_lock_is_held(lock, redlock_now_us()));
    }
    assert_int_equal(lost.calls, 0);
    /* Held past its ttl: extended (every third of the ttl: about three times). */
    assert_true(redlock_lock_extensions(lock) >= 1);
    size_t token_len;
    const char *token = redlock_lock_token(lock, &token_len);
    assert_true(h_count_holding(&env, "auto:held", 9, token, token_len) >= 3);

    /* Released: nothing is extended after, and "lost" never fires. */
    h_record rel;
    assert_int_equal(h_release(&env, lock, &rel), 0);
    unsigned ext = redlock_lock_extensions(lock);
    h_run_for(&env.loop, 500);
    assert_int_equal(redlock_lock_extensions(lock), ext);
    assert_int_equal(lost.calls, 0);
    assert_int_equal(h_count_holding(&env, "auto:held", 9, token, token_len), 0);
    h_record got;
    assert_int_equal(h_acquire(&env, b, "auto:held", ttl_ms, NULL, &got), 0);
    h_close_client(&env, b);
    h_env_stop(&env);
}

/* 3 of 5 nodes stopped during the hold: "lost" fires once, before the validity deadline. The
 * stopped nodes alone have a short node timeout: the extension rounds are lost on their
 * timeouts (ENOQUORUM), and retried until the guard gives up. A lost margin of 500 ms leaves
 * the guard's timer that much to be late by. */
static void quorum_gone_fires_lost_before_deadline(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 5, NULL);
    redlock_options o;
    h_test_options(&o);
    o.retry_delay_ms = 20;
    o.retry_jitter_ms = 0;
    char buf[5][160];
    const char *urls[5];
    h_urls_with_timeout(&env, 0x7, 400, buf, urls);
    redlock_client *c = NULL;
    assert_int_equal(h_client_urls(&env, urls, 5, &o, &c, NULL, 0), 0);
    lost_record lost = {0};
    h_record rec;
    const uint64_t ttl_ms = 2000;
    redlock_auto_opts ao;
    redlock_auto_opts_init(&ao);
    ao.lost_margin_ms = 500;
    assert_int_equal(acquire_auto(&env, c, "auto:lost", ttl_ms, &ao, &lost, &rec), 0);
    /* An extension first. */
    uint64_t give_up = redlock_now_us() + H_WAIT_MS * 1000;
    while (redlock_lock_extensions(rec.lock) < 1 && redlock_now_us() < give_up)
        h_run_for(&env.loop, 5);
    assert_true(redlock_lock_extensions(rec.lock) >= 1);
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(fixture_pause(&env.cluster, i), 0);
    uint64_t stopped_at = redlock_now_us();
    assert_true(h_run_until(&env.loop, &lost.calls, 1, H_WAIT_MS));
    assert_int_equal(lost.calls, 1);
    assert_true(lost.reason == REDLOCK_ENOQUORUM || lost.reason == REDLOCK_EEXPIRED);
    /* Before the deadline, never after it: so within a ttl of the stop. */
    assert_true(lost.at_us < lost.deadline_us);
    assert_true(lost.at_us - stopped_at < ttl_ms * 1000);
    /* Exactly once: nothing more arrives. */
    h_run_for(&env.loop, 500);
    assert_int_equal(lost.calls, 1);
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(fixture_resume(&env.cluster, i), 0);
    h_env_stop(&env);
}

/* Someone deletes the keys behind the holder's back: the next extension says ELOST at once. */
static void keys_taken_fires_lost_elost(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 5, NULL);
    redlock_client *c = h_client(&env, NULL);
    lost_record lost = {0};
    h_record rec;
    assert_int_equal(acquire_auto(&env, c, "auto:stolen", 1000, NULL, &lost, &rec), 0);
    for (unsigned i = 0; i < 5; i++) {
        redisReply *r = fixture_command(&env.cluster, i, "SET auto:stolen intruder");
        assert_non_null(r);
        freeReplyObject(r);
    }
    assert_true(h_run_until(&env.loop, &lost.calls, 1, H_WAIT_MS));
    assert_int_equal(lost.reason, REDLOCK_ELOST);
    assert_true(lost.at_us < lost.deadline_us);
    h_run_for(&env.loop, 300);
    assert_int_equal(lost.calls, 1);
    h_env_stop(&env);
}

/* The cap on extensions ends the hold through the same path, with REDLOCK_ELIMIT, before the
 * deadline of the last extension (a margin of 400 ms leaves the guard's timer room to be
 * late on a loaded machine, and each extension more than 500 ms). */
static void extension_cap_fires_elimit(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 5, NULL);
    redlock_client *c = h_client(&env, NULL);
    redlock_auto_opts ao;
    redlock_auto_opts_init(&ao);
    ao.max_extensions = 2;
    ao.lost_margin_ms = 400;
    lost_record lost = {0};
    h_record rec;
    assert_int_equal(acquire_auto(&env, c, "auto:cap", 1500, &ao, &lost, &rec), 0);
    assert_true(h_run_until(&env.loop, &lost.calls, 1, H_WAIT_MS));
    assert_int_equal(lost.reason, REDLOCK_ELIMIT);
    assert_int_equal(redlock_lock_extensions(rec.lock), 2);
    assert_true(lost.at_us < lost.deadline_us);
    h_run_for(&env.loop, 300);
    assert_int_equal(lost.calls, 1);
    h_env_stop(&env);
}

/* A caller's own extend moves the auto-extension's plan: with the cap reached, the guard is
 * re-armed at the new deadline, so "lost" (ELIMIT) comes shortly before that deadline, not at
 * the old one while the lock is still valid for long. */
static void own_extend_moves_the_guard(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 5, NULL);
    redlock_client *c = h_client(&env, NULL);
    redlock_auto_opts ao;
    redlock_auto_opts_init(&ao);
    ao.max_extensions = 1;
    /* Room for the guard's timer to be late on a loaded machine, and for the first extension
     * (at 400 ms, before the guard at 786 ms). */
    ao.lost_margin_ms = 400;
    lost_record lost = {0};
    h_record rec;
    assert_int_equal(acquire_auto(&env, c, "auto:moved", 1200, &ao, &lost, &rec), 0);
    uint64_t give_up = redlock_now_us() + H_WAIT_MS * 1000;
    while (redlock_lock_extensions(rec.lock) < 1 && redlock_now_us() < give_up)
        h_run_for(&env.loop, 5);
    assert_int_equal(redlock_lock_extensions(rec.lock), 1);
    assert_int_equal(lost.calls, 0);
    h_record ext;
    assert_int_equal(h_extend(&env, rec.lock, 1500, 0, &ext), 0);
    uint64_t deadline = redlock_lock_deadline_us(rec.lock);
    assert_true(h_run_until(&env.loop, &lost.calls, 1, H_WAIT_MS));
    assert_int_equal(lost.reason, REDLOCK_ELIMIT);
    assert_int_equal(lost.deadline_us, deadline);
    assert_true(lost.at_us < deadline);
    /* Said lost: not held, though still before the deadline; an extend of the caller's own
     * after that makes it held again. */
    assert_false(lost.held_in_cb);
    assert_false(redlock_lock_is_held(rec.lock, redlock_now_us()));
    assert_int_equal(h_extend(&env, rec.lock, 1500, 0, &ext), 0);
    assert_true(redlock_lock_is_held(rec.lock, redlock_now_us()));
    assert_int_equal(lost.calls, 1);
    /* The guard keeps the margin planned at the start (400 ms): not much earlier (a timer is
     * never early; this bound does not depend on the machine). */
    if (lost.at_us + (400 + 50) * 1000 < deadline)
        fail_msg("lost %llu us before the deadline", (unsigned long long)(deadline - lost.at_us));
    h_env_stop(&env);
}

/* Closing the client tells every auto-extended lock, once, before the close callback; a lost
 * callback may free its lock. */
static bool closed_seen;
static lost_record *close_lost;

static void on_closed(redlock_client *client, void *data)
{
    (void)client;
    (void)data;
    assert_int_equal(close_lost->calls, 1); /* lost came first */
    closed_seen = true;
}

static void close_fires_lost_ecanceled(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 5, NULL);
    redlock_client *c = h_client(&env, NULL);
    lost_record lost = {0};
    lost.free_in_cb = true;
    h_record rec;
    assert_int_equal(acquire_auto(&env, c, "auto:close", 1000, NULL, &lost, &rec), 0);
    close_lost = &lost;
    closed_seen = false;
    assert_int_equal(redlock_client_close(c, on_closed, NULL), 0);
    env.client = NULL;
    assert_true(h_run_until_true(&env.loop, &closed_seen, H_WAIT_MS));
    assert_int_equal(lost.calls, 1);
    assert_int_equal(lost.reason, REDLOCK_ECANCELED);
    h_env_stop(&env);
}

/* Bad options are refused at once and nothing is acquired. */
static void bad_auto_options_are_refused(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_record rec;
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    redlock_auto_opts ao;
    redlock_auto_opts_init(&ao);
    lo.auto_extend = &ao;
    lo.lost_cb = NULL;
    assert_int_equal(redlock_acquire(c, "auto:bad", 8, 1000, &lo, h_record_cb, &rec),
                     REDLOCK_EINVAL);
    assert_non_null(strstr(redlock_client_last_error(c), "lost"));
    lo.lost_cb = on_lost;
    ao.extend_at = 1.0;
    assert_int_equal(redlock_acquire(c, "auto:bad", 8, 1000, &lo, h_record_cb, &rec),
                     REDLOCK_EINVAL);
    ao.extend_at = 0.5;
    ao.lost_margin_ms = 1000;
    assert_int_equal(redlock_acquire(c, "auto:bad", 8, 1000, &lo, h_record_cb, &rec),
                     REDLOCK_EINVAL);
    /* Extending at 0.9 of the ttl would come after the guard (ttl - drift - margin): every hold
     * would be lost before its first extension. */
    ao.lost_margin_ms = 0;
    ao.extend_at = 0.9;
    assert_int_equal(redlock_acquire(c, "auto:bad", 8, 1000, &lo, h_record_cb, &rec),
                     REDLOCK_EINVAL);
    assert_non_null(strstr(redlock_client_last_error(c), "no time to extend"));
    ao.extend_at = 0.5;
    ao.extend_flags = 0x80;
    assert_int_equal(redlock_acquire(c, "auto:bad", 8, 1000, &lo, h_record_cb, &rec),
                     REDLOCK_EINVAL);
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(h_pttl(&env, i, "auto:bad", 8), -2);
    /* redlock_auto_extend on an attached lock, twice, and after release. */
    redlock_lock *att = NULL;
    assert_int_equal(redlock_lock_attach(c, "auto:att", 8, "tok", 3, 1000, &att), 0);
    assert_int_equal(redlock_auto_extend(att, NULL, on_lost, NULL), REDLOCK_EINVAL);
    redlock_lock_free(att);
    assert_int_equal(h_acquire(&env, c, "auto:twice", 1000, NULL, &rec), 0);
    lost_record lost = {0};
    assert_int_equal(redlock_auto_extend(rec.lock, NULL, on_lost, &lost), 0);
    assert_int_equal(redlock_auto_extend(rec.lock, NULL, on_lost, &lost), REDLOCK_EINVAL);
    h_record rel;
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    assert_int_equal(redlock_auto_extend(rec.lock, NULL, on_lost, &lost), REDLOCK_ERELEASED);
    assert_int_equal(lost.calls, 0);
    h_env_stop(&env);
}

/* attach + extend + release by token, as another process would (the command-line tool). */
static void attach_extend_release_by_token(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 5, NULL);
    redlock_client *a = h_client(&env, NULL);
    redlock_client *b = h_client(&env, NULL);
    h_record rec;
    /* a's keys live 3 s: b's extend (behind its new connections) reaches every node before. */
    const uint64_t ttl_a_ms = 3000, ttl_b_ms = 10000;
    assert_int_equal(h_acquire(&env, a, "auto:attach", ttl_a_ms, NULL, &rec), 0);
    size_t token_len;
    const char *token = redlock_lock_token(rec.lock, &token_len);
    assert_true(h_wait_holding(&env, "auto:attach", 11, token, token_len, 5, H_WAIT_MS));
    redlock_lock *att = NULL;
    assert_int_equal(redlock_lock_attach(b, "auto:attach", 11, token, token_len, ttl_b_ms, &att),
                     0);
    assert_int_equal(redlock_lock_validity_ms(att), 0);
    h_record ext;
    assert_int_equal(h_extend(&env, att, ttl_b_ms, 0, &ext), 0);
    h_assert_validity(&ext, ttl_b_ms, redlock_lock_validity_ms(att));
    /* Won at the quorum; once every node ran b's extend, each has the new ttl, beyond a's. */
    h_drain(&env, b);
    for (unsigned i = 0; i < 5; i++) {
        long long pttl = h_pttl(&env, i, "auto:attach", 11);
        if (pttl <= (long long)ttl_a_ms)
            fprintf(stderr, "node %u: PTTL %lld\n", i, pttl);
        assert_true(pttl > (long long)ttl_a_ms && pttl <= (long long)ttl_b_ms);
    }
    h_record rel;
    assert_int_equal(h_release(&env, att, &rel), 0);
    assert_int_equal(rel.votes_yes, 5);
    /* A wrong token attaches fine but extends nothing: ELOST. */
    redlock_lock *wrong = NULL;
    assert_int_equal(redlock_lock_attach(b, "auto:attach", 11, "nope", 4, 1000, &wrong), 0);
    assert_int_equal(h_extend(&env, wrong, 1000, 0, &ext), REDLOCK_ELOST);
    redlock_lock_free(wrong);
    h_close_client(&env, b);
    h_env_stop(&env);
}

typedef struct inspect_record {
    h_record rec;
    char values[5][64];
    int64_t pttl[5];
} inspect_record;

static void on_inspect(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    inspect_record *ir = data;
    assert_null(lock);
    for (unsigned i = 0; i < result->n_nodes && i < 5; i++) {
        ir->pttl[i] = result->nodes[i].pttl_ms;
        snprintf(ir->values[i], sizeof(ir->values[i]), "%.*s", (int)result->nodes[i].value_len,
                 result->nodes[i].value != NULL ? result->nodes[i].value : "");
    }
    h_record_cb(lock, status, result, &ir->rec);
}

/* inspect shows the holder and PTTL on every node, and errors for a dead one. */
static void inspect_shows_holder_per_node(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 5, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_record rec;
    assert_int_equal(h_acquire(&env, c, "auto:inspect", 5000, NULL, &rec), 0);
    const char *token = redlock_lock_token(rec.lock, NULL);
    /* Won at the quorum: every node has the key once the late SETs landed. */
    assert_true(h_wait_holding(&env, "auto:inspect", 12, token, 32, 5, H_WAIT_MS));
    assert_int_equal(fixture_kill(&env.cluster, 4), 0);
    inspect_record ir;
    memset(&ir, 0, sizeof(ir));
    assert_int_equal(redlock_inspect(c, "auto:inspect", 12, on_inspect, &ir), 0);
    assert_true(h_run_until(&env.loop, &ir.rec.calls, 1, 5000));
    assert_int_equal(ir.rec.status, 0);
    for (unsigned i = 0; i < 4; i++) {
        assert_int_equal(ir.rec.node_vote[i], REDLOCK_VOTE_YES);
        assert_string_equal(ir.values[i], token);
        assert_true(ir.pttl[i] > 0 && ir.pttl[i] <= 5000);
    }
    assert_int_equal(ir.rec.node_vote[4], REDLOCK_VOTE_ERROR);
    /* A free resource: every live node says no key. */
    memset(&ir, 0, sizeof(ir));
    assert_int_equal(redlock_inspect(c, "auto:none", 9, on_inspect, &ir), 0);
    assert_true(h_run_until(&env.loop, &ir.rec.calls, 1, 5000));
    assert_int_equal(ir.rec.status, 0);
    assert_int_equal(ir.rec.votes_no, 4);
    assert_int_equal(ir.pttl[0], -2);
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        H_TEST(short_ttl_lock_stays_held),     H_TEST(quorum_gone_fires_lost_before_deadline),
        H_TEST(keys_taken_fires_lost_elost),   H_TEST(extension_cap_fires_elimit),
        H_TEST(own_extend_moves_the_guard),    H_TEST(close_fires_lost_ecanceled),
        H_TEST(bad_auto_options_are_refused),  H_TEST(attach_extend_release_by_token),
        H_TEST(inspect_shows_holder_per_node),
    };
    return cmocka_run_group_tests_name("autoextend", tests, NULL, NULL);
}
