/* test_crash.c - nodes killed with SIGKILL one after another while lock traffic is in flight,
 * then restarted: the client keeps its quorum while it can, fails every call promptly with
 * REDLOCK_ENOQUORUM when it cannot (never hangs, every callback comes), and comes back by
 * itself once the nodes are back. */
#include "traffic.h"

#include <stdio.h>

#define N 5
#define MS 1000ull /* microseconds per millisecond */
#define SLOTS 32

enum { E_ALL_UP, E_ONE_DOWN, E_TWO_DOWN, E_THREE_DOWN, E_RESTARTED, E_RECOVERED };

static void assert_all_ok(const traffic *t, unsigned epoch, const traffic_stats *st)
{
    if (st->ok != st->calls || st->immediate_errors != 0)
        traffic_dump(t, epoch);
    assert_int_equal(st->ok, st->calls);
    assert_int_equal(st->immediate_errors, 0);
}

static void kill_three_then_restart_under_traffic(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_options o;
    h_test_options(&o);
    const uint64_t timeout_ms = 200;
    o.node_timeout_ms = timeout_ms;
    o.retry_count = 1;
    o.retry_delay_ms = 100;
    o.retry_jitter_ms = 50;
    o.reconnect_min_ms = 20;
    o.reconnect_max_ms = 500; /* bounds how long a restarted node waits to be tried again */
    redlock_client *c = h_client(&env, &o);
    h_wait_ready(&env, c);
    /* Every call, whatever happens, is bounded by its rounds' node deadlines and the retry
     * delays between them; the rest is slack for a loaded CI machine under ASan. */
    const uint64_t bound_us = (2 * timeout_ms + o.retry_delay_ms + o.retry_jitter_ms + 1000) * MS;

    traffic t;
    traffic_start(&t, &env, c, SLOTS, "fault:crash", 5000);
    h_run_for(&env.loop, 300);
    for (unsigned down = 1; down <= 3; down++) {
        /* SIGKILL with calls in flight (the loop is only paused while fixture_kill reaps). */
        assert_int_equal(fixture_kill(&env.cluster, down - 1), 0);
        traffic_set_epoch(&t, down);
        h_run_for(&env.loop, down < 3 ? 500 : 1500);
    }

    /* Up to two nodes down: every call succeeded, in flight at a kill or not. */
    for (unsigned e = E_ALL_UP; e <= E_TWO_DOWN; e++) {
        assert_all_ok(&t, e, &t.by_epoch[e]);
        assert_true(t.by_epoch[e].acquires_ok >= SLOTS);
        assert_true(t.by_epoch[e].max_latency_us < bound_us);
    }
    assert_all_ok(&t, E_ALL_UP, &t.straddle[E_ALL_UP]);
    assert_all_ok(&t, E_ONE_DOWN, &t.straddle[E_ONE_DOWN]);
    /* With two down the releases say so: three nodes confirm, not more. */
    assert_int_equal(t.by_epoch[E_TWO_DOWN].min_release_votes_yes, 3);
    /* Calls in flight when the third node died may have been won just before. */
    const traffic_stats *cut = &t.straddle[E_TWO_DOWN];
    if (cut->other != 0)
        traffic_dump(&t, E_TWO_DOWN);
    assert_int_equal(cut->other, 0);
    assert_true(cut->max_latency_us < bound_us);

    /* Three down: every call issued since failed with REDLOCK_ENOQUORUM, promptly. */
    const traffic_stats *three = &t.by_epoch[E_THREE_DOWN];
    if (three->enoquorum != three->calls || three->calls < SLOTS)
        traffic_dump(&t, E_THREE_DOWN);
    assert_true(three->calls >= SLOTS); /* every slot came back at least once */
    assert_int_equal(three->enoquorum, three->calls);
    assert_int_equal(three->immediate_errors, 0);
    assert_true(three->max_latency_us < bound_us);

    /* Restart them: the same client is confirmed by all five within a few seconds. */
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(fixture_restart(&env.cluster, i), 0);
    traffic_set_epoch(&t, E_RESTARTED);
    uint64_t t0 = redlock_now_us();
    bool back = h_run_until(&env.loop, &t.by_epoch[E_RESTARTED].releases_full, 1, 5000);
    if (!back)
        traffic_dump(&t, E_RESTARTED);
    assert_true(back);
    assert_true(h_since_us(t0) < 5000 * MS);
    /* And from then on every call succeeds again. */
    traffic_set_epoch(&t, E_RECOVERED);
    h_run_for(&env.loop, 500);
    assert_true(traffic_stop(&t, 10000));
    assert_all_ok(&t, E_RECOVERED, &t.by_epoch[E_RECOVERED]);
    assert_true(t.by_epoch[E_RECOVERED].acquires_ok >= SLOTS);
    assert_true(t.by_epoch[E_RECOVERED].releases_full >= 1);
    assert_true(t.by_epoch[E_RECOVERED].max_latency_us < bound_us);
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kill_three_then_restart_under_traffic),
    };
    return cmocka_run_group_tests_name("fault-crash", tests, NULL, NULL);
}
