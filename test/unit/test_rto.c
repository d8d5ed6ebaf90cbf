/* SPDX-License-Identifier: MIT */
/* test_rto.c - a node's request timeout (lib/core/rto.h): fixed stays fixed; adaptive starts
 * generous, follows the round trips it measures within its floor and cap, backs off on a
 * timeout and comes back with the next sample. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "rto.h"

static void fixed_never_moves(void **state)
{
    (void)state;
    redlock__rto r;
    redlock__rto_init(&r, 50000);
    assert_int_equal(redlock__rto_us(&r), 50000);
    for (int i = 0; i < 100; i++)
        redlock__rto_sample(&r, 300000);
    redlock__rto_timeout(&r);
    assert_int_equal(redlock__rto_us(&r), 50000);
    assert_int_equal(redlock__rto_base_us(&r), 50000);
}

static void adaptive_starts_generous(void **state)
{
    (void)state;
    redlock__rto r;
    redlock__rto_init(&r, 0);
    assert_int_equal(redlock__rto_us(&r), REDLOCK__RTO_INITIAL_US);
    assert_true(REDLOCK__RTO_INITIAL_US >= 1000000);
}

/* A far node (a 160 ms round trip, as 80 ms each way) gets a timeout above its round trip after
 * one answer, and keeps one there while the round trip is steady. */
static void far_node_fits(void **state)
{
    (void)state;
    redlock__rto r;
    redlock__rto_init(&r, 0);
    redlock__rto_sample(&r, 160000);
    assert_true(redlock__rto_us(&r) >= 160000 * 2); /* srtt + 4 * srtt/2 */
    for (int i = 0; i < 200; i++)
        redlock__rto_sample(&r, 160000 + (uint64_t)(i % 5) * 1000);
    assert_true(redlock__rto_us(&r) > 165000);
    assert_true(redlock__rto_us(&r) <= REDLOCK__RTO_MAX_US);
}

/* A loopback node (tens of us) sits at the floor, never under it. */
static void near_node_floor(void **state)
{
    (void)state;
    redlock__rto r;
    redlock__rto_init(&r, 0);
    for (int i = 0; i < 100; i++)
        redlock__rto_sample(&r, 40);
    assert_int_equal(redlock__rto_us(&r), REDLOCK__RTO_MIN_US);
    redlock__rto_sample(&r, 0); /* a clock that did not move */
    assert_int_equal(redlock__rto_us(&r), REDLOCK__RTO_MIN_US);
}

/* Huge samples stop at the cap. */
static void capped(void **state)
{
    (void)state;
    redlock__rto r;
    redlock__rto_init(&r, 0);
    redlock__rto_sample(&r, 60000000);
    assert_int_equal(redlock__rto_us(&r), REDLOCK__RTO_MAX_US);
}

/* A timeout doubles the timeout (not its base), up to the cap; the next answer recomputes it. */
static void backoff_and_back(void **state)
{
    (void)state;
    redlock__rto r;
    redlock__rto_init(&r, 0);
    for (int i = 0; i < 50; i++)
        redlock__rto_sample(&r, 100);
    uint64_t base = redlock__rto_us(&r);
    redlock__rto_timeout(&r);
    assert_int_equal(redlock__rto_us(&r), 2 * base);
    assert_int_equal(redlock__rto_base_us(&r), base);
    for (int i = 0; i < 20; i++)
        redlock__rto_timeout(&r);
    assert_int_equal(redlock__rto_us(&r), REDLOCK__RTO_MAX_US);
    redlock__rto_sample(&r, 100);
    assert_int_equal(redlock__rto_us(&r), REDLOCK__RTO_MIN_US);
}

/* A path that became slower (5 ms to 300 ms each way, beyond the timeout it had) is learnt:
 * answers after their deadline are not sampled, but the doublings reach the new round trip,
 * whose next answer is. */
static void slower_path_is_learnt(void **state)
{
    (void)state;
    redlock__rto r;
    redlock__rto_init(&r, 0);
    for (int i = 0; i < 50; i++)
        redlock__rto_sample(&r, 10000);
    uint64_t rtt = 600000;
    int timeouts = 0;
    while (redlock__rto_us(&r) < rtt) {
        redlock__rto_timeout(&r);
        assert_true(++timeouts < 10);
    }
    redlock__rto_sample(&r, rtt);
    assert_true(redlock__rto_us(&r) > rtt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fixed_never_moves),
        cmocka_unit_test(adaptive_starts_generous),
        cmocka_unit_test(far_node_fits),
        cmocka_unit_test(near_node_floor),
        cmocka_unit_test(capped),
        cmocka_unit_test(backoff_and_back),
        cmocka_unit_test(slower_path_is_learnt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
