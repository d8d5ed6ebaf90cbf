/* SPDX-License-Identifier: MIT */
/* test_crash.c - nodes killed with SIGKILL one after another while lock traffic is in flight,
 * then restarted: the client keeps its quorum while it can, fails every call promptly with
 * REDLOCK_ENOQUORUM when it cannot (never hangs, every callback comes), and comes back by
 * itself once the nodes are back.
 *
 * A killed node refuses at once, so no call here ever has to wait for a node deadline: the node
 * timeout is seconds (a live node is never "too slow", however loaded the machine), and "prompt"
 * means well under one node timeout. Each epoch lasts until its traffic did what is checked
 * (bounded), not a fixed time a slow machine might not fill. */
#include "traffic.h"

#include <stdio.h>

#define N 5
#define MS 1000ull /* microseconds per millisecond */
#define SLOTS 32

enum { E_ALL_UP, E_ONE_DOWN, E_TWO_DOWN, E_THREE_DOWN, E_RESTARTED, E_RECOVERED };

static h_env env; /* file-level: the teardown stops its servers after a failed check */

/* Run the loop for at least min_ms, then until *counter (one of epoch e's counts) reaches want,
 * at most 10 s more. */
static void run_epoch(traffic *t, unsigned e, uint64_t min_ms, const int *counter, int want)
{
    h_run_for(&env.loop, min_ms);
    if (!h_run_until(&env.loop, counter, want, 10000)) {
        traffic_dump(t, e);
        fail_msg("epoch %u: %d of the %d calls expected within 10 s", e, *counter, want);
    }
}

static void assert_all_ok(const traffic *t, unsigned epoch, const traffic_stats *st)
{
    if (st->ok != st->calls || st->immediate_errors != 0)
        traffic_dump(t, epoch);
    assert_int_equal(st->ok, st->calls);
    assert_int_equal(st->immediate_errors, 0);
}

/* The same for calls in flight at a kill, where a release of a lock the killed node was one of
 * the few kept nodes of (acquired just before, its late votes not yet heard after) may be deleted
 * on a quorum and still unproven (ENOQUORUM: docs/safety.md). */
static void assert_ok_or_unproven(const traffic *t, unsigned epoch, const traffic_stats *st)
{
    if (st->ok + st->releases_unproven != st->calls || st->immediate_errors != 0)
        traffic_dump(t, epoch);
    assert_int_equal(st->ok + st->releases_unproven, st->calls);
    assert_int_equal(st->immediate_errors, 0);
}

static void kill_three_then_restart_under_traffic(void **state)
{
    (void)state;
    h_env_start(&env, N, NULL);
    redlock_options o;
    h_test_options(&o);
    const uint64_t timeout_ms = 10000;
    o.node_timeout_ms = timeout_ms;
    o.retry_count = 1;
    o.retry_delay_ms = 100;
    o.retry_jitter_ms = 50;
    o.reconnect_min_ms = 20;
    o.reconnect_max_ms = 500; /* bounds how long a restarted node waits to be tried again */
    redlock_client *c = h_client(&env, &o);
    h_wait_ready(&env, c);
    /* No call waits for a node deadline (a dead node refuses at once): each is two rounds and a
     * retry delay, far under one node timeout. Half a node timeout leaves seconds of slack for a
     * loaded machine under ASan and still tells a call that waited for a deadline. */
    const uint64_t bound_us = timeout_ms / 2 * MS;

    traffic t;
    traffic_start(&t, &env, c, SLOTS, "fault:crash", 5000);
    run_epoch(&t, E_ALL_UP, 300, &t.by_epoch[E_ALL_UP].acquires_ok, SLOTS);
    for (unsigned down = 1; down <= 3; down++) {
        /* SIGKILL with calls in flight (the loop is only paused while fixture_kill reaps). */
        assert_int_equal(fixture_kill(&env.cluster, down - 1), 0);
        traffic_set_epoch(&t, down);
        if (down < 3)
            run_epoch(&t, down, 500, &t.by_epoch[down].acquires_ok, SLOTS);
        else /* reconnect attempts come and go meanwhile */
            run_epoch(&t, down, 1500, &t.by_epoch[down].calls, SLOTS);
    }

    /* Up to two nodes down: every call succeeded, in flight at a kill or not, but for releases
     * of the locks held at a kill that the killed node was one of the few kept nodes of (each
     * slot holds one lock at a time: at most SLOTS an epoch). */
    for (unsigned e = E_ALL_UP; e <= E_TWO_DOWN; e++) {
        assert_ok_or_unproven(&t, e, &t.by_epoch[e]);
        assert_true(t.by_epoch[e].releases_unproven + t.straddle[e].releases_unproven <= SLOTS);
        assert_true(t.by_epoch[e].acquires_ok >= SLOTS);
        assert_true(t.by_epoch[e].max_latency_us < bound_us);
    }
    assert_ok_or_unproven(&t, E_ALL_UP, &t.straddle[E_ALL_UP]);
    assert_ok_or_unproven(&t, E_ONE_DOWN, &t.straddle[E_ONE_DOWN]);
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

    /* Restart them: the same client is confirmed by all five again, by itself (reconnects back
     * off to 500 ms at most; the bound is seconds of slack on that). */
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(fixture_restart(&env.cluster, i), 0);
    traffic_set_epoch(&t, E_RESTARTED);
    bool back = h_run_until(&env.loop, &t.by_epoch[E_RESTARTED].releases_full, 1, 10000);
    if (!back)
        traffic_dump(&t, E_RESTARTED);
    assert_true(back);
    /* And from then on every call succeeds again. */
    traffic_set_epoch(&t, E_RECOVERED);
    run_epoch(&t, E_RECOVERED, 500, &t.by_epoch[E_RECOVERED].acquires_ok, SLOTS);
    assert_true(traffic_stop(&t, 10000));
    assert_all_ok(&t, E_RECOVERED, &t.by_epoch[E_RECOVERED]);
    assert_true(t.by_epoch[E_RECOVERED].acquires_ok >= SLOTS);
    assert_true(t.by_epoch[E_RECOVERED].releases_full >= 1);
    assert_true(t.by_epoch[E_RECOVERED].max_latency_us < bound_us);
    h_env_stop(&env);
}

/* After the test, passed or failed: no server is left running for the next program. */
static int teardown(void **state)
{
    (void)state;
    fixture_stop(&env.cluster);
    return 0;
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(kill_three_then_restart_under_traffic, teardown),
    };
    return cmocka_run_group_tests_name("fault-crash", tests, NULL, NULL);
}
