/* SPDX-License-Identifier: MIT */
/* test_hostile.c - a hostile node costs its own vote and nothing more: a fake Redis
 * (fake_redis.h) that answers the handshake properly and then every lock command with an array
 * of 2^31 elements that never ends, or with a bulk string of a billion bytes trickled 4 KiB at a
 * time, is one of three nodes. Its reply is refused as a protocol error as soon as its header
 * is read (lib/core/reader.h), so its vote is an error at once, never a timeout; the two real
 * servers decide every round; and the loop is never held up, not even when the fake's
 * connections are dropped and made again (what a reply cut off holds is bounded, and so is its
 * teardown). That last part is watched by a timer on the loop: the longest gap between its
 * ticks, over every round, reconnect and the client's close, stays below H_SLACK_MS. */
#include "fake_redis.h"
#include "harness.h"

#include <stdio.h>
#include <string.h>

#define N 3
#define FAKE 2 /* the fake is node 2; 0 and 1 are real servers */
#define FAKE_TIMEOUT_MS 300
#define ROUNDS 6
#define TICK_MS 20

static fake_redis *fake; /* file-level: the teardown stops it after a failed check */

/* The loop's pulse: every TICK_MS, the longest gap seen between two ticks. */
typedef struct pulse {
    uv_timer_t timer;
    uint64_t last_us, max_gap_us;
} pulse;

static void on_tick(uv_timer_t *t)
{
    pulse *p = t->data;
    uint64_t now = redlock_now_us();
    if (now - p->last_us > p->max_gap_us)
        p->max_gap_us = now - p->last_us;
    p->last_us = now;
}

static int teardown(void **state)
{
    fake_redis_stop(fake);
    fake = NULL;
    return h_teardown(state);
}

/* Node FAKE of rec, when it voted: an error (never a timeout) that says why. */
static void assert_refused(const char *what, const h_record *rec, const char *want)
{
    if (rec->node_vote[FAKE] == REDLOCK_VOTE_NONE)
        return;
    if (rec->node_vote[FAKE] != REDLOCK_VOTE_ERROR || strstr(rec->node_error[FAKE], want) == NULL)
        h_dump_record(what, rec);
    assert_int_equal(rec->node_vote[FAKE], REDLOCK_VOTE_ERROR);
    assert_non_null(strstr(rec->node_error[FAKE], want));
}

/* Acquire and release ROUNDS times with the fake as node 2 (its own deadline short, so that a
 * reply it leaves hanging would soon get its connection dropped and made again), a pause between
 * rounds for the fake to reconnect. want: what its error says. */
static void hostile_node(fake_mode mode, const char *want)
{
    h_env env;
    h_env_start(&env, 2, NULL);
    fake = fake_redis_start(mode, NULL);
    assert_non_null(fake);
    char fake_url[96];
    snprintf(fake_url, sizeof(fake_url), "redis://127.0.0.1:%d?timeout_ms=%d",
             fake_redis_port(fake), FAKE_TIMEOUT_MS);
    const char *urls[N] = {env.cluster.urls[0], env.cluster.urls[1], fake_url};
    redlock_client *client;
    assert_int_equal(h_client_urls(&env, urls, N, NULL, &client, NULL, 0), 0);

    pulse p = {.last_us = redlock_now_us()};
    uv_timer_init(&env.loop, &p.timer);
    p.timer.data = &p;
    uv_timer_start(&p.timer, on_tick, TICK_MS, TICK_MS);

    /* A round is decided by the two real servers: it never waits for the fake, whose deadline is
     * FAKE_TIMEOUT_MS anyway. */
    const uint64_t round_bound_us = (FAKE_TIMEOUT_MS + H_SLACK_MS) * 1000ull;
    unsigned refused = 0;
    for (int k = 0; k < ROUNDS; k++) {
        h_record acq, rel;
        uint64_t t0 = redlock_now_us();
        if (h_acquire(&env, client, "hostile", 10000, NULL, &acq) != 0)
            h_dump_record("acquire", &acq);
        assert_int_equal(acq.status, 0);
        assert_true(h_since_us(t0) < round_bound_us);
        assert_refused("acquire", &acq, want);
        /* The release waits for every node: the fake's vote is certain here. */
        uint64_t t1 = redlock_now_us();
        assert_int_equal(h_release(&env, acq.lock, &rel), 0);
        assert_true(h_since_us(t1) < round_bound_us);
        assert_int_equal(rel.votes_yes, 2);
        assert_int_equal(rel.node_vote[FAKE], REDLOCK_VOTE_ERROR);
        assert_refused("release", &rel, want);
        refused += strstr(rel.node_error[FAKE], "protocol error") != NULL;
        redlock_lock_free(acq.lock);
        h_run_for(&env.loop, 150); /* past the reconnect backoff: the fake is asked again */
    }
    /* It was asked, and refused, more than once: each time on a connection made anew. */
    assert_true(fake_redis_commands(fake) >= 2);
    assert_true(refused >= 2);

    h_close_client(&env, client);
    uv_timer_stop(&p.timer);
    on_tick(&p.timer); /* the gap up to now, the close included */
    uv_close((uv_handle_t *)&p.timer, NULL);
    uv_run(&env.loop, UV_RUN_NOWAIT);
    fprintf(stderr, "# longest pause of the loop: %llu ms\n",
            (unsigned long long)(p.max_gap_us / 1000));
    assert_true(p.max_gap_us < H_SLACK_MS * 1000ull);
    h_env_stop(&env);
    fake_redis_stop(fake);
    fake = NULL;
}

/* "*2147483647" then 100,000 ":1": refused at the header (hiredis alone would reserve 16 GiB of
 * slots, and walk them all for seconds when the connection goes). */
static void huge_array_is_refused_and_stalls_nothing(void **state)
{
    (void)state;
    hostile_node(FAKE_HUGE_ARRAY, "array of 2147483647 elements");
}

/* "$1000000000" then 4 KiB every 10 ms: refused at the header, not buffered until the deadline. */
static void trickled_bulk_is_refused_and_stalls_nothing(void **state)
{
    (void)state;
    hostile_node(FAKE_TRICKLE_BULK, "bulk string of 1000000000 bytes");
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(huge_array_is_refused_and_stalls_nothing, teardown),
        cmocka_unit_test_teardown(trickled_bulk_is_refused_and_stalls_nothing, teardown),
    };
    return cmocka_run_group_tests_name("fault-hostile", tests, NULL, NULL);
}
