/* SPDX-License-Identifier: MIT */
/* test_fixed_del.c - pitfall 3 (docs/pitfalls.md): a fixed value, and a plain DEL to unlock.
 *
 * The legacy lock is SET key 1 NX PX ttl - the expiry is right - but every holder writes the
 * same value and unlocks with DEL. A's ttl runs out during a slow step, B takes the lock, A's
 * step ends and its DEL removes B's lock, and C enters while B works. The steps run in this
 * order in one thread (one connection per holder), so nothing depends on timing; the only time
 * that passes on purpose is A's ttl running out.
 *
 * libredlock gives every holder its own random token and releases with a compare-and-delete
 * script: the same slow A releases, and B's keys stay on every node; C is refused. */
#include "pitfalls.h"

#include <stdio.h>
#include <string.h>

#define N 5
#define KEY "pitfall:fixed-del"
#define TTL_MS 1000 /* A's expiry is the subject; every wait below derives from it */

static bool fixed_lock(redisContext *ctx, uint64_t ttl_ms)
{
    redisReply *r = pf_cmd(ctx, "SET %s 1 NX PX %llu", KEY, (unsigned long long)ttl_ms);
    bool taken = r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
    freeReplyObject(r);
    return taken;
}

static long long fixed_unlock(redisContext *ctx)
{
    redisReply *r = pf_cmd(ctx, "DEL %s", KEY);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    long long deleted = r->integer;
    freeReplyObject(r);
    return deleted;
}

static void slow_holder_deletes_the_next_ones_lock(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redisContext *a = pf_connect(&env.cluster, 0), *b = pf_connect(&env.cluster, 0),
                 *c = pf_connect(&env.cluster, 0);
    pf_history h;
    pf_history_init(&h, "legacy fixed value + DEL");

    /* A holds; its slow step outlasts the ttl. B takes the lock once A's key expired. */
    assert_true(fixed_lock(a, TTL_MS));
    const uint64_t a_from = redlock_now_us();
    assert_true(pf_wait_gone(&env.cluster, 0, KEY, TTL_MS + H_WAIT_MS));
    assert_true(fixed_lock(b, PF_LONG_TTL_MS));
    const uint64_t b_from = redlock_now_us();
    /* A's step ends: DEL. The key it deletes is B's. */
    assert_int_equal(fixed_unlock(a), 1);
    pf_history_add(&h, "A", a_from, redlock_now_us());
    /* C enters while B works. */
    assert_true(fixed_lock(c, PF_LONG_TTL_MS));
    const uint64_t c_from = redlock_now_us();
    assert_int_equal(fixed_unlock(b), 1); /* and B's DEL deletes C's */
    pf_history_add(&h, "B", b_from, redlock_now_us());
    assert_int_equal(fixed_unlock(c), 0);
    pf_history_add(&h, "C", c_from, redlock_now_us());
    pf_report(&h);
    /* (A's slow step overlaps B too, which only fencing can stop: pitfall 6.) */
    assert_true(pf_overlap_between(&h, "B", "C"));
    redisFree(a);
    redisFree(b);
    redisFree(c);

    pf_redlock_overrun(&env, KEY, TTL_MS, "libredlock, the same slow holder");
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        PF_TEST(slow_holder_deletes_the_next_ones_lock),
    };
    return cmocka_run_group_tests_name("pitfall-fixed-del", tests, NULL, NULL);
}
