/* SPDX-License-Identifier: MIT */
/* test_simkit.c - the test kit (<redlock/sim.h>) as a user drives it, through the public headers
 * only, linked to the installed-style libredlock-sim.so and libredlock.so: a seed gives the same
 * trace byte for byte and another seed another one; each fault does what it says (seen in what
 * the user's real client reports); a waiter in the queue gets the lock after the holder's
 * release, with a larger fence; each checker fires on a planted bug and stays quiet on the
 * correct code; the driver finds a planted bug's seed and the replay of that seed fails again. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redlock.h"
#include "redlock/sim.h"

#define TTL_MS 1000

/* ---- a user's code: take a lock, work, write to a store, release ------------------------------
 */

/* One worker: a client of the fleet that takes resource, works, writes to the store with its
 * fence, and releases. */
typedef struct worker {
    redlock_sim *sim;
    redlock_client *client;
    unsigned index;
    const char *resource;
    uint64_t work_us;
    bool check_lock;      /* writes only while the lock is held (the correct code) */
    bool check_fence;     /* the store refuses a fence below the highest it accepted */
    bool report_holds;    /* tells the checker what it relies on */
    uint64_t pause_at_us; /* > 0: its process pauses this long after acquiring (a GC) */
    int acquired, released, acquire_status, release_status, skipped;
    redlock_lock *lock;
    int hold;
    uint64_t fence, acquired_at;
} worker;

/* The user's store, with the check of docs/safety.md ("the check in the store") when asked. */
typedef struct store {
    uint64_t highest;
    int accepted, refused;
} store;

static store the_store;

static void released(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)lock, (void)result;
    worker *w = data;
    w->released++;
    w->release_status = status;
    redlock_lock_free(w->lock);
    w->lock = NULL;
}

static void work_done(redlock_sim *sim, void *data)
{
    worker *w = data;
    if (w->check_lock && !redlock_lock_is_held(w->lock, redlock_sim_client_now_us(sim, w->index))) {
        w->skipped++; /* too late: the write is not made */
    } else if (w->check_fence && w->fence < the_store.highest) {
        the_store.refused++;
    } else {
        the_store.accepted++;
        if (w->report_holds)
            redlock_sim_hold_use(sim, w->hold);
        if (w->fence > the_store.highest)
            the_store.highest = w->fence;
        redlock_sim_store_accepted(sim, w->resource, strlen(w->resource), w->fence);
    }
    if (redlock_release(w->lock, released, w) != 0)
        w->released = -1;
}

static void acquired(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)result;
    worker *w = data;
    w->acquire_status = status;
    if (status != 0)
        return;
    w->acquired++;
    w->lock = lock;
    w->fence = redlock_lock_fence(lock);
    w->acquired_at = redlock_sim_now_us(w->sim);
    if (w->report_holds)
        w->hold = redlock_sim_hold_begin(w->sim, w->index, lock);
    if (w->pause_at_us > 0)
        redlock_sim_client_pause(w->sim, w->index, w->pause_at_us);
    assert_int_equal(redlock_sim_timer(w->sim, w->index, w->work_us, work_done, w), 0);
}

static void worker_client(worker *w, redlock_sim *sim, int retries)
{
    w->sim = sim;
    w->hold = -1;
    redlock_options opts;
    redlock_options_init(&opts);
    opts.node_timeout_ms = 50;
    opts.retry_count = retries;
    opts.retry_delay_ms = 200;
    opts.retry_jitter_ms = 100;
    assert_int_equal(redlock_sim_client_new(sim, &opts, &w->client, &w->index), 0);
}

static void worker_acquire(worker *w, bool fenced)
{
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.fencing = fenced;
    assert_int_equal(
        redlock_acquire(w->client, w->resource, strlen(w->resource), TTL_MS, &lo, acquired, w), 0);
}

static redlock_sim *fleet(uint64_t seed, unsigned n_nodes)
{
    redlock_sim_options o;
    redlock_sim_options_init(&o);
    o.seed = seed;
    o.n_nodes = n_nodes;
    redlock_sim *sim = NULL;
    assert_int_equal(redlock_sim_new(&o, &sim), 0);
    memset(&the_store, 0, sizeof(the_store));
    return sim;
}

static void verdict_is(redlock_sim *sim, int expected, const char *needle)
{
    char what[768];
    int bad = redlock_sim_verdict(sim, what, sizeof(what));
    printf("# verdict %d: %s\n", bad, what);
    assert_int_equal(bad, expected);
    if (needle != NULL)
        assert_non_null(strstr(what, needle));
}

/* ---- the scenario of the driver and of determinism ---------------------------------------------
 */

/* Two workers compete for one resource on 5 nodes, with faults drawn from the seed within the
 * algorithm's assumptions: a node killed and restarted with its data (one back empty may leave a
 * bare quorum of a lock's keys short: restart_empty's test), a link cut, a node's clock jump, and,
 * with chance 1 in 4 for worker 0, a pause of 1.5 ttl right after it acquired. planted: worker 0
 * writes without checking that its lock is still held (the bug the driver must find). */
typedef struct contest {
    bool planted;
    worker w[2];
} contest;

static int contest_run(redlock_sim *sim, void *data)
{
    contest *c = data;
    memset(c->w, 0, sizeof(c->w));
    memset(&the_store, 0, sizeof(the_store));
    for (int i = 0; i < 2; i++) {
        worker *w = &c->w[i];
        w->resource = "job-7";
        w->work_us = 300000;
        w->check_lock = !(c->planted && i == 0);
        w->check_fence = true;
        w->report_holds = true;
        worker_client(w, sim, 20);
    }
    if (redlock_sim_random(sim) % 4 == 0)
        c->w[0].pause_at_us = TTL_MS * 1500;
    worker_acquire(&c->w[0], true);
    redlock_sim_run_for(sim, redlock_sim_random(sim) % 20000);
    worker_acquire(&c->w[1], true);
    unsigned node = (unsigned)(redlock_sim_random(sim) % 5);
    redlock_sim_run_for(sim, redlock_sim_random(sim) % 200000);
    switch (redlock_sim_random(sim) % 4) {
    case 0:
        redlock_sim_node_kill(sim, node);
        redlock_sim_run_for(sim, 100000);
        redlock_sim_node_restart(sim, node, true);
        break;
    case 1:
        redlock_sim_link_fault(sim, 1, node, REDLOCK_SIM_TO_NODE | REDLOCK_SIM_TO_CLIENT, 300000,
                               0);
        break;
    case 2:
        redlock_sim_clock_jump(sim, node, 200000);
        break;
    default:
        redlock_sim_node_pause(sim, node, 100000);
        break;
    }
    redlock_sim_run_for(sim, 10 * 1000000);
    return 0;
}

/* ---- determinism -------------------------------------------------------------------------------
 */

static char *trace_of(uint64_t seed)
{
    contest c = {0};
    redlock_sim *sim = fleet(seed, 5);
    assert_int_equal(contest_run(sim, &c), 0);
    size_t len;
    const char *trace = redlock_sim_trace(sim, &len);
    char *copy = malloc(len + 1);
    assert_non_null(copy);
    memcpy(copy, trace, len + 1);
    assert_true(c.w[0].acquired + c.w[1].acquired >= 1);
    redlock_sim_free(sim);
    return copy;
}

static void same_seed_same_trace(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        char *a = trace_of(seed), *b = trace_of(seed), *other = trace_of(seed + 1000);
        assert_true(strlen(a) > 1000);
        assert_string_equal(a, b);
        assert_true(strcmp(a, other) != 0);
        free(a);
        free(b);
        free(other);
    }
}

/* ---- faults ------------------------------------------------------------------------------------
 */

/* One acquire on a fresh fleet after setup(sim) has put in its faults: its status, and when
 * (true time) it was decided. */
static int acquire_after(void (*setup)(redlock_sim *sim), uint64_t *decided_us)
{
    redlock_sim *sim = fleet(3, 5);
    worker w = {.resource = "res", .work_us = 1000, .check_lock = true};
    worker_client(&w, sim, 0);
    setup(sim);
    w.acquire_status = 1;
    worker_acquire(&w, false);
    uint64_t start = redlock_sim_now_us(sim);
    while (w.acquire_status == 1 && redlock_sim_step(sim) == 1) {
    }
    *decided_us = redlock_sim_now_us(sim) - start;
    int status = w.acquire_status;
    redlock_sim_run_for(sim, 100000);
    redlock_sim_free(sim);
    return status;
}

static void kill_two(redlock_sim *sim)
{
    redlock_sim_node_kill(sim, 0);
    redlock_sim_node_kill(sim, 1);
    redlock_sim_run_for(sim, 10000);
}

static void kill_three(redlock_sim *sim)
{
    kill_two(sim);
    redlock_sim_node_kill(sim, 2);
    redlock_sim_run_for(sim, 10000);
}

static void pause_three_long(redlock_sim *sim)
{
    for (unsigned i = 0; i < 3; i++)
        redlock_sim_node_pause(sim, i, 500000);
}

static void pause_three_short(redlock_sim *sim)
{
    for (unsigned i = 0; i < 3; i++)
        redlock_sim_node_pause(sim, i, 20000);
}

static void cut_three(redlock_sim *sim)
{
    for (unsigned i = 0; i < 3; i++)
        redlock_sim_link_fault(sim, 0, i, REDLOCK_SIM_TO_NODE, 500000, 0);
}

static void lose_replies_of_three(redlock_sim *sim)
{
    for (unsigned i = 0; i < 3; i++)
        redlock_sim_link_fault(sim, 0, i, REDLOCK_SIM_TO_CLIENT, 500000, 0);
}

static void delay_three_a_little(redlock_sim *sim)
{
    for (unsigned i = 0; i < 3; i++)
        redlock_sim_link_fault(sim, 0, i, REDLOCK_SIM_TO_CLIENT, 500000, 20000);
}

static void delay_three_past_the_deadline(redlock_sim *sim)
{
    for (unsigned i = 0; i < 3; i++)
        redlock_sim_link_fault(sim, 0, i, REDLOCK_SIM_TO_NODE, 500000, 80000);
}

static void no_fault(redlock_sim *sim)
{
    (void)sim;
}

static void faults_on_one_acquire(void **state)
{
    (void)state;
    uint64_t t;
    assert_int_equal(acquire_after(no_fault, &t), 0);
    assert_true(t < 10000);
    assert_int_equal(acquire_after(kill_two, &t), 0); /* 3 of 5 up: a quorum */
    assert_int_equal(acquire_after(kill_three, &t), REDLOCK_ENOQUORUM);
    assert_true(t < 1000); /* down nodes fail fast */
    assert_int_equal(acquire_after(pause_three_long, &t), REDLOCK_ENOQUORUM);
    assert_true(t >= 50000); /* their deadlines */
    assert_int_equal(acquire_after(pause_three_short, &t), 0);
    assert_true(t >= 20000); /* decided once a paused node answered */
    assert_int_equal(acquire_after(cut_three, &t), REDLOCK_ENOQUORUM);
    assert_int_equal(acquire_after(lose_replies_of_three, &t), REDLOCK_ENOQUORUM);
    assert_int_equal(acquire_after(delay_three_a_little, &t), 0);
    assert_true(t >= 20000);
    assert_int_equal(acquire_after(delay_three_past_the_deadline, &t), REDLOCK_ENOQUORUM);
}

/* A holds res; then fault(sim) on three of the five nodes; B tries once: its status. */
static int second_acquire_after(void (*fault)(redlock_sim *sim, unsigned node))
{
    redlock_sim *sim = fleet(5, 5);
    worker a = {.resource = "res", .work_us = 10 * 1000000}, b = {.resource = "res"};
    worker_client(&a, sim, 0);
    worker_client(&b, sim, 0);
    worker_acquire(&a, false);
    redlock_sim_run_for(sim, 20000);
    assert_int_equal(a.acquired, 1);
    for (unsigned i = 0; i < 3; i++)
        fault(sim, i);
    redlock_sim_run_for(sim, 100000); /* the clients reconnect */
    b.acquire_status = 1;
    worker_acquire(&b, false);
    redlock_sim_run_for(sim, 200000);
    int status = b.acquire_status;
    redlock_sim_free(sim);
    return status;
}

static void restart_keeping(redlock_sim *sim, unsigned node)
{
    redlock_sim_node_restart(sim, node, true);
}

static void restart_empty(redlock_sim *sim, unsigned node)
{
    redlock_sim_node_restart(sim, node, false);
}

static void jump_clock(redlock_sim *sim, unsigned node)
{
    redlock_sim_clock_jump(sim, node, 2 * TTL_MS * 1000);
}

static void jump_clock_a_little(redlock_sim *sim, unsigned node)
{
    redlock_sim_clock_jump(sim, node, 100000);
}

static void nothing(redlock_sim *sim, unsigned node)
{
    (void)sim, (void)node;
}

static void faults_on_a_held_lock(void **state)
{
    (void)state;
    assert_int_equal(second_acquire_after(nothing), REDLOCK_EBUSY);
    assert_int_equal(second_acquire_after(restart_keeping), REDLOCK_EBUSY);
    assert_int_equal(second_acquire_after(restart_empty), 0); /* the nodes forgot it */
    assert_int_equal(second_acquire_after(jump_clock_a_little), REDLOCK_EBUSY);
    assert_int_equal(second_acquire_after(jump_clock), 0); /* the keys expired early */
}

static void mark(redlock_sim *sim, void *data)
{
    *(uint64_t *)data = redlock_sim_now_us(sim);
}

static void client_pause_holds_its_events(void **state)
{
    (void)state;
    redlock_sim *sim = fleet(9, 3);
    worker a = {0}, b = {0};
    worker_client(&a, sim, 0);
    worker_client(&b, sim, 0);
    uint64_t at_a = 0, at_b = 0;
    redlock_sim_timer(sim, a.index, 10000, mark, &at_a);
    redlock_sim_timer(sim, b.index, 10000, mark, &at_b);
    redlock_sim_client_pause(sim, a.index, 700000);
    redlock_sim_run(sim, 0);
    assert_int_equal(at_b, 10000);  /* b runs on */
    assert_int_equal(at_a, 700000); /* a's timer waited for its pause */
    redlock_sim_free(sim);
}

/* ---- the checkers ------------------------------------------------------------------------------
 */

/* A works for 2.5 ttl, then writes; B retries until it gets the lock, works a little, writes. */
static void overlap_scenario(bool check_lock, int expected)
{
    redlock_sim *sim = fleet(11, 5);
    worker a = {.resource = "job",
                .work_us = 2500000,
                .check_lock = check_lock,
                .report_holds = true},
           b = {.resource = "job", .work_us = 100000, .check_lock = true, .report_holds = true};
    worker_client(&a, sim, 0);
    worker_client(&b, sim, 30);
    worker_acquire(&a, false);
    redlock_sim_run_for(sim, 20000);
    worker_acquire(&b, false);
    redlock_sim_run_for(sim, 5 * 1000000);
    assert_int_equal(a.acquired, 1);
    assert_int_equal(b.acquired, 1);
    assert_int_equal(a.skipped, check_lock ? 1 : 0);
    verdict_is(sim, expected, expected ? "two holders at once" : NULL);
    redlock_sim_free(sim);
}

static void overlap_checker_fires_on_a_write_past_the_deadline(void **state)
{
    (void)state;
    overlap_scenario(false, 1);
    overlap_scenario(true, 0);
}

/* A takes a fenced lock and its process pauses for 2 ttl; B takes it, writes; A wakes and writes
 * with its older fence: the store must refuse it. */
static void fence_scenario(bool check_fence, int expected)
{
    redlock_sim *sim = fleet(13, 5);
    worker a = {.resource = "acct",
                .work_us = 1000,
                .check_fence = check_fence,
                .pause_at_us = 2 * TTL_MS * 1000},
           b = {.resource = "acct", .work_us = 1000, .check_fence = check_fence};
    worker_client(&a, sim, 0);
    worker_client(&b, sim, 30);
    worker_acquire(&a, true);
    redlock_sim_run_for(sim, 20000);
    worker_acquire(&b, true);
    redlock_sim_run_for(sim, 5 * 1000000);
    assert_int_equal(a.acquired, 1);
    assert_int_equal(b.acquired, 1);
    assert_true(a.fence < b.fence);
    assert_int_equal(the_store.refused, check_fence ? 1 : 0);
    verdict_is(sim, expected, expected ? "a fence went backwards" : NULL);
    redlock_sim_free(sim);
}

static void fence_checker_fires_on_a_store_without_the_check(void **state)
{
    (void)state;
    fence_scenario(false, 1);
    fence_scenario(true, 0);
}

/* A holds job (reporting it) and works 500 ms; after 100 ms three of the five nodes restart
 * empty: the lock is lost with no other client around. check_lock: A asks the library before it
 * writes (the library rechecks after a node came back as a new server, and says it is lost). */
static void lost_lock_scenario(bool check_lock, int expected)
{
    redlock_sim *sim = fleet(19, 5);
    worker a = {
        .resource = "job", .work_us = 500000, .check_lock = check_lock, .report_holds = true};
    worker_client(&a, sim, 0);
    worker_acquire(&a, false);
    redlock_sim_run_for(sim, 100000);
    assert_int_equal(a.acquired, 1);
    for (unsigned i = 0; i < 3; i++)
        redlock_sim_node_restart(sim, i, false);
    redlock_sim_run_for(sim, 1000000);
    assert_int_equal(a.skipped, check_lock ? 1 : 0);
    verdict_is(sim, expected, expected ? "a lost lock used" : NULL);
    redlock_sim_free(sim);
}

static void lost_lock_checker_fires_on_a_write_after_the_loss(void **state)
{
    (void)state;
    lost_lock_scenario(false, 1);
    lost_lock_scenario(true, 0);
}

/* ---- the driver --------------------------------------------------------------------------------
 */

/* The correct workers over this many seeds: every checker quiet (a few seconds at most). */
#define GOOD_SEEDS 20000

static void driver_finds_the_planted_seed_and_replays_it(void **state)
{
    (void)state;
    redlock_sim_options o;
    redlock_sim_options_init(&o);
    o.seed = 1;
    contest bad = {.planted = true}, good = {.planted = false};
    uint64_t failed = 0;
    FILE *out = tmpfile();
    assert_non_null(out);
    assert_int_equal(redlock_sim_explore(&o, 200, contest_run, &bad, out, &failed), 1);
    printf("# the planted bug fails at seed %llu\n", (unsigned long long)failed);
    assert_true(failed >= 1 && failed <= 200);
    long printed = ftell(out);
    assert_true(printed > 1000); /* the seed and its trace */
    fclose(out);
    o.seed = failed;
    assert_int_equal(redlock_sim_replay(&o, contest_run, &bad, NULL), 1);
    assert_int_equal(redlock_sim_replay(&o, contest_run, &good, NULL), 0);
    o.seed = 1;
    assert_int_equal(redlock_sim_explore(&o, GOOD_SEEDS, contest_run, &good, NULL, &failed), 0);
}

/* A waits nothing and holds res for 300 ms; B waits for it in the queue (wait_ms, fenced): it
 * gets it after A's release, with a larger fence. */
typedef struct waiting {
    redlock_sim *sim;
    redlock_lock *a;
    int a_status, b_status, released;
    uint64_t a_fence, b_fence, b_at, released_at;
} waiting;

static void waiting_released(redlock_lock *lock, int status, const redlock_result *result,
                             void *data)
{
    (void)result;
    waiting *t = data;
    t->released = status == 0 ? 1 : -1;
    t->released_at = redlock_sim_now_us(t->sim);
    redlock_lock_free(lock);
}

static void waiting_release_a(redlock_sim *sim, void *data)
{
    (void)sim;
    waiting *t = data;
    assert_int_equal(redlock_release(t->a, waiting_released, t), 0);
}

static void waiting_got_a(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)result;
    waiting *t = data;
    t->a_status = status;
    t->a = lock;
    t->a_fence = redlock_lock_fence(lock);
    assert_int_equal(redlock_sim_timer(t->sim, 0, 300000, waiting_release_a, t), 0);
}

static void waiting_got_b(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)result;
    waiting *t = data;
    t->b_status = status;
    t->b_at = redlock_sim_now_us(t->sim);
    t->b_fence = status == 0 ? redlock_lock_fence(lock) : 0;
}

static void a_waiter_gets_the_lock_after_the_release(void **state)
{
    (void)state;
    waiting t = {.sim = fleet(17, 5), .a_status = 1, .b_status = 1};
    redlock_client *a, *b;
    redlock_options opts;
    redlock_options_init(&opts);
    opts.node_timeout_ms = 50;
    assert_int_equal(redlock_sim_client_new(t.sim, &opts, &a, NULL), 0);
    assert_int_equal(redlock_sim_client_new(t.sim, &opts, &b, NULL), 0);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.fencing = true;
    assert_int_equal(redlock_acquire(a, "q", 1, TTL_MS, &lo, waiting_got_a, &t), 0);
    redlock_sim_run_for(t.sim, 10000);
    assert_int_equal(t.a_status, 0);
    lo.wait_ms = 5000;
    assert_int_equal(redlock_acquire(b, "q", 1, TTL_MS, &lo, waiting_got_b, &t), 0);
    redlock_sim_run_for(t.sim, 3000000);
    assert_int_equal(t.released, 1);
    assert_int_equal(t.b_status, 0);
    assert_true(t.b_at >= t.released_at);
    assert_true(t.b_fence > t.a_fence);
    redlock_sim_free(t.sim);
}

static void bad_options_are_refused(void **state)
{
    (void)state;
    redlock_sim *sim = NULL;
    redlock_sim_options o;
    memset(&o, 0, sizeof(o));
    assert_int_equal(redlock_sim_new(&o, &sim), REDLOCK_EINVAL); /* never set up */
    redlock_sim_options_init(&o);
    o.n_nodes = REDLOCK_SIM_MAX_NODES + 1;
    assert_int_equal(redlock_sim_new(&o, &sim), REDLOCK_EINVAL);
    redlock_sim_options_init(&o);
    o.delay_min_us = 10;
    o.delay_max_us = 5;
    assert_int_equal(redlock_sim_new(&o, &sim), REDLOCK_EINVAL);
    assert_int_equal(redlock_sim_new(NULL, &sim), 0);
    assert_int_equal(redlock_sim_node_kill(sim, 5), REDLOCK_EINVAL);
    assert_int_equal(redlock_sim_client_pause(sim, 0, 1), REDLOCK_EINVAL);
    redlock_sim_free(sim);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_seed_same_trace),
        cmocka_unit_test(faults_on_one_acquire),
        cmocka_unit_test(faults_on_a_held_lock),
        cmocka_unit_test(client_pause_holds_its_events),
        cmocka_unit_test(a_waiter_gets_the_lock_after_the_release),
        cmocka_unit_test(overlap_checker_fires_on_a_write_past_the_deadline),
        cmocka_unit_test(fence_checker_fires_on_a_store_without_the_check),
        cmocka_unit_test(lost_lock_checker_fires_on_a_write_after_the_loss),
        cmocka_unit_test(driver_finds_the_planted_seed_and_replays_it),
        cmocka_unit_test(bad_options_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
