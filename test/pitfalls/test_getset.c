/* SPDX-License-Identifier: MIT */
/* test_getset.c - pitfall 2 (docs/pitfalls.md): SETNX with a timestamp, GETSET to break stale
 * locks, DEL to unlock. The recipe the old SETNX page of redis.io gave: the value is the holder's
 * expiry time on its own wall clock; a waiter that finds a value in the past takes the lock with
 * GETSET and keeps it if the old value it got back was still in the past.
 *
 * Two ways it breaks, each made on purpose:
 *   - clocks: the waiters compare timestamps written by other machines' clocks. Waiter C's clock
 *     runs 3 timeouts ahead of waiter B's. B breaks the stale lock of a crashed holder; C reads
 *     B's fresh timestamp, which is in the past by C's clock, breaks it too, and both work.
 *   - DEL: holder B is slow past its timestamp, C breaks the lock with GETSET, B's work ends and
 *     it unlocks with DEL, deleting C's lock, and D takes it with SETNX while C works.
 * The steps run in this order in one thread (each a separate connection: a separate client as
 * far as the server can tell), so nothing depends on timing; the only time that passes on
 * purpose is waiting until a timestamp is in the past.
 *
 * libredlock writes no timestamp anywhere: a key expires by its ttl on its own server, and a
 * process measures only its own elapsed time (the drift allowance covers clocks that run at
 * different rates, not clocks that are set differently). The same scenarios: a crashed holder's
 * lock, two waiters, exactly one gets it at a time; a holder slow past its validity releases
 * with compare-and-delete, which leaves the next holder's keys alone. */
#include "pitfalls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 5
#define KEY "pitfall:getset"
#define TIMEOUT_MS 1000 /* the timestamp lock's timeout; every wait below derives from it */

/* ---- the legacy lock, as it is written ------------------------------------------------------ */

/* Take the lock at this client's clock (pf_wall_ms(skew_ms)). */
static bool getset_lock(redisContext *ctx, const char *key, long long skew_ms)
{
    long long now = pf_wall_ms(skew_ms);
    char expires[32];
    snprintf(expires, sizeof(expires), "%lld", now + TIMEOUT_MS + 1);
    redisReply *r = pf_cmd(ctx, "SETNX %s %s", key, expires);
    bool won = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    if (won)
        return true;
    /* Held: is it stale? */
    r = pf_cmd(ctx, "GET %s", key);
    bool stale = r->type == REDIS_REPLY_STRING && atoll(r->str) < now;
    freeReplyObject(r);
    if (!stale)
        return false;
    /* Break it, and keep it only if nobody broke it before us (the old value is still stale). */
    r = pf_cmd(ctx, "GETSET %s %s", key, expires);
    won = r->type == REDIS_REPLY_NIL || (r->type == REDIS_REPLY_STRING && atoll(r->str) < now);
    freeReplyObject(r);
    return won;
}

static void getset_unlock(redisContext *ctx, const char *key, long long *deleted)
{
    redisReply *r = pf_cmd(ctx, "DEL %s", key);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    *deleted = r->integer;
    freeReplyObject(r);
}

/* Wait until a timestamp written at this process's clock (skew 0) is in the past. */
static void wait_stale(redisContext *ctx, const char *key)
{
    redisReply *r = pf_cmd(ctx, "GET %s", key);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    long long expires = atoll(r->str);
    freeReplyObject(r);
    while (pf_wall_ms(0) <= expires)
        pf_sleep_ms(10);
}

/* ---- the scenarios -------------------------------------------------------------------------- */

static void skewed_waiters_both_break_a_stale_lock(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redisContext *a = pf_connect(&env.cluster, 0), *b = pf_connect(&env.cluster, 0),
                 *c = pf_connect(&env.cluster, 0);
    pf_history h;
    pf_history_init(&h, "legacy SETNX timestamp + GETSET, waiters' clocks 3 timeouts apart");

    /* A takes the lock and crashes: a stale lock, once its timestamp is past. */
    assert_true(getset_lock(a, KEY, 0));
    redisFree(a);
    wait_stale(b, KEY);
    /* B (clock right) breaks it. C (clock 3 timeouts ahead) finds B's fresh timestamp "stale"
     * and breaks it too. Both go to work. */
    assert_true(getset_lock(b, KEY, 0));
    const uint64_t b_from = redlock_now_us();
    assert_true(getset_lock(c, KEY, 3 * TIMEOUT_MS));
    const uint64_t c_from = redlock_now_us();
    long long deleted_b, deleted_c;
    getset_unlock(b, KEY, &deleted_b);
    pf_history_add(&h, "B", b_from, redlock_now_us());
    getset_unlock(c, KEY, &deleted_c);
    pf_history_add(&h, "C", c_from, redlock_now_us());
    pf_report(&h);
    assert_true(pf_overlap_between(&h, "B", "C"));
    /* B's DEL removed C's lock (the key held C's timestamp); C's found nothing. */
    assert_int_equal(deleted_b, 1);
    assert_int_equal(deleted_c, 0);
    redisFree(b);
    redisFree(c);

    /* libredlock: A takes the lock and crashes (its client goes away without releasing); B and
     * C wait for it at the same time. One gets it after A's keys expired; the other is still
     * waiting when the first has worked for a while, and gets it only after its release. */
    redlock_client *ca = pf_client(&env), *cb = pf_client(&env), *cc = pf_client(&env);
    pf_history_init(&h, "libredlock, the same crashed holder and two waiters");
    h_record ra;
    assert_int_equal(h_acquire(&env, ca, KEY, TIMEOUT_MS, NULL, &ra), 0);
    const uint64_t a_deadline_us = redlock_lock_deadline_us(ra.lock);
    /* The crash: nothing released, A's keys wait for their ttl (the close freed A's handle). */
    h_close_client_ex(&env, ca, REDLOCK_CLOSE_FAST);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.wait_ms = 2 * TIMEOUT_MS + 2 * H_WAIT_MS;
    int done = 0;
    pf_pending pb, pc;
    pf_acquire_start(cb, KEY, PF_LONG_TTL_MS, &lo, &pb, &done);
    pf_acquire_start(cc, KEY, PF_LONG_TTL_MS, &lo, &pc, &done);
    assert_true(h_run_until(&env.loop, &done, 1, TIMEOUT_MS + H_WAIT_MS));
    pf_pending *first = pb.rec.calls == 1 ? &pb : &pc, *second = first == &pb ? &pc : &pb;
    const char *first_name = first == &pb ? "B" : "C", *second_name = first == &pb ? "C" : "B";
    if (first->rec.status != 0)
        h_dump_record("the first waiter", &first->rec);
    assert_int_equal(first->rec.status, 0);
    assert_true(first->rec.at_us >= a_deadline_us);
    /* The first works (the loop runs: the other keeps retrying), and the other is still
     * waiting. */
    h_run_for(&env.loop, 1000);
    assert_int_equal(second->rec.calls, 0);
    const uint64_t first_end = redlock_now_us();
    h_record rel;
    assert_int_equal(h_release(&env, first->rec.lock, &rel), 0);
    pf_history_add(&h, first_name, first->rec.at_us, first_end);
    assert_true(h_run_until(&env.loop, &done, 2, 2 * H_WAIT_MS));
    if (second->rec.status != 0)
        h_dump_record("the second waiter", &second->rec);
    assert_int_equal(second->rec.status, 0);
    const uint64_t second_end = redlock_now_us();
    assert_int_equal(h_release(&env, second->rec.lock, &rel), 0);
    pf_history_add(&h, second_name, second->rec.at_us, second_end);
    assert_int_equal(pf_report(&h), 0);
    assert_true(second->rec.at_us > first_end);

    redlock_lock_free(pb.rec.lock);
    redlock_lock_free(pc.rec.lock);
    h_close_client(&env, cb);
    h_close_client(&env, cc);
    h_env_stop(&env);
}

static void overwritten_holder_still_deletes(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redisContext *b = pf_connect(&env.cluster, 0), *c = pf_connect(&env.cluster, 0),
                 *d = pf_connect(&env.cluster, 0);
    pf_history h;
    pf_history_init(&h, "legacy SETNX timestamp + GETSET, a slow holder unlocks with DEL");

    /* B holds; its work is slow, past its timestamp. C breaks the lock. */
    assert_true(getset_lock(b, KEY, 0));
    const uint64_t b_from = redlock_now_us();
    wait_stale(c, KEY);
    assert_true(getset_lock(c, KEY, 0));
    const uint64_t c_from = redlock_now_us();
    /* B's work ends: DEL, which deletes C's lock. D takes it at once, while C works. */
    long long deleted;
    getset_unlock(b, KEY, &deleted);
    pf_history_add(&h, "B", b_from, redlock_now_us());
    assert_int_equal(deleted, 1);
    assert_true(getset_lock(d, KEY, 0));
    const uint64_t d_from = redlock_now_us();
    getset_unlock(c, KEY, &deleted);
    pf_history_add(&h, "C", c_from, redlock_now_us());
    getset_unlock(d, KEY, &deleted);
    pf_history_add(&h, "D", d_from, redlock_now_us());
    pf_report(&h);
    assert_true(pf_overlap_between(&h, "C", "D"));
    redisFree(b);
    redisFree(c);
    redisFree(d);

    /* libredlock: a slow holder's validity runs out, the next takes the lock, the slow one's
     * release deletes nothing of it, and a third is refused. */
    pf_redlock_overrun(&env, KEY, TIMEOUT_MS, "libredlock, the same slow holder");
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        PF_TEST(skewed_waiters_both_break_a_stale_lock),
        PF_TEST(overwritten_holder_still_deletes),
    };
    return cmocka_run_group_tests_name("pitfall-getset", tests, NULL, NULL);
}
