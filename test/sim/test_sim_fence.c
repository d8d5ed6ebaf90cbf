/* SPDX-License-Identifier: MIT */
/* test_sim_fence.c - fences in the deterministic simulation (issue 12): every lock is
 * taken with a fence, holders write to a fenced store (sim_fence.c), and over thousands of
 * seeds
 *
 *   - fences strictly increase in the true-time order of grants, and the store never accepts a
 *     stale write (one from a hold granted before a hold whose write it already accepted), in
 *     the safe world (delays, stalls, drops, partitions, pauses, restarts that keep data), with
 *     and without auto-extension; the lock's own properties still hold;
 *   - the broken assumptions, each shown: nodes that restart empty with fence_commit = the
 *     quorum break the order of fences (the negative control); with quorum + 1 and one such
 *     node at a time they never do; a clock running far beyond the drift allowance breaks the
 *     lock (two holds overlap, as without fencing) while the store still refuses every stale
 *     write.
 *
 * A failing seed is printed with the command that replays it with a trace:
 *   SIM_SEED=1234 SIM_SCENARIO=fence build/test/sim/test-sim-fence
 * SIM_FENCE_SEEDS=N changes the number of seeds of the safe run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "sim_fence.h"

#define SAFE_SEEDS (SIM_SANITIZED ? 1000u : 4000u)
#define AUTO_SEEDS (SIM_SANITIZED ? 500u : 2000u)
#define BROKEN_SEEDS (SIM_SANITIZED ? 300u : 1000u)
#define SHOW_MAX 3

typedef struct batch {
    unsigned runs, exclusion, contracts, promises, gaps, fence_problems;
    sim_fence_stats f; /* summed */
} batch;

static void add(sim_fence_stats *sum, const sim_fence_stats *s)
{
    sum->grants += s->grants;
    sum->order_checks += s->order_checks;
    sum->order_broken += s->order_broken;
    sum->order_excused += s->order_excused;
    sum->amnesia_pairs += s->amnesia_pairs;
    sum->writes += s->writes;
    sum->accepted += s->accepted;
    sum->refused += s->refused;
    sum->late_writes += s->late_writes;
    sum->stale_accepted += s->stale_accepted;
}

static void show(const char *scenario, uint64_t seed, const char *what, const char *text,
                 unsigned *shown)
{
    if (*shown >= SHOW_MAX)
        return;
    (*shown)++;
    printf("# %s seed %" PRIu64 ": %s: %s\n#   replay: SIM_SEED=%" PRIu64
           " SIM_SCENARIO=%s test-sim-fence\n",
           scenario, seed, what, text, seed, scenario);
}

/* Run seeds 1..count of a fencing scenario. show_fence: print the seeds with a fencing problem
 * (where it must not happen); the others are counted only. */
static batch run_batch(const char *scenario, unsigned count, bool show_fence)
{
    batch b;
    memset(&b, 0, sizeof(b));
    unsigned shown = 0;
    for (uint64_t seed = 1; seed <= count; seed++) {
        sim_config cfg;
        assert_true(sim_fence_scenario(&cfg, scenario, seed));
        sim_result r;
        assert_int_equal(sim_run(&cfg, &r), 0);
        b.runs++;
        add(&b.f, &r.fence);
        if (r.contract_broken) {
            b.contracts++;
            show(scenario, seed, "contract", r.what, &shown);
        } else if (r.violation) {
            b.exclusion++;
        }
        if (r.promise_broken) {
            b.promises++;
            show(scenario, seed, "broken promise", r.promise, &shown);
        }
        b.gaps += r.gap_found;
        if (r.fence_broken) {
            b.fence_problems++;
            if (show_fence)
                show(scenario, seed, "fencing", r.fence_what, &shown);
        }
    }
    printf("# %s: %u seeds, %u grants, %u ordered pairs (%u with a node restarted empty between "
           "them), fences not increasing: %u (%u beyond fence_commit's cover); %u writes, %u "
           "accepted, %u refused, %u reached the store after their hold, %u stale accepted; %u "
           "seeds with overlapping holds\n",
           scenario, b.runs, b.f.grants, b.f.order_checks, b.f.amnesia_pairs, b.f.order_broken,
           b.f.order_excused, b.f.writes, b.f.accepted, b.f.refused, b.f.late_writes,
           b.f.stale_accepted, b.exclusion);
    return b;
}

/* Every assumption kept: no fence out of order, no stale write accepted, no overlap; and the
 * store was really tested: late writes reached it, and it refused some. */
static void check_safe(const batch *b)
{
    assert_int_equal(b->contracts, 0);
    assert_int_equal(b->promises, 0);
    assert_int_equal(b->exclusion, 0);
    assert_int_equal(b->gaps, 0);
    assert_int_equal(b->f.order_broken, 0);
    assert_int_equal(b->f.order_excused, 0);
    assert_int_equal(b->f.stale_accepted, 0);
    assert_true(b->f.grants > b->runs);
    assert_true(b->f.order_checks > b->runs / 2);
    assert_true(b->f.late_writes > 0);
    assert_true(b->f.refused > 0);
}

static unsigned env_unsigned(const char *name, unsigned fallback)
{
    const char *s = getenv(name);
    return s != NULL && *s != '\0' ? (unsigned)strtoul(s, NULL, 10) : fallback;
}

static void fences_increase_and_stale_writes_are_refused(void **state)
{
    (void)state;
    batch b = run_batch("fence", env_unsigned("SIM_FENCE_SEEDS", SAFE_SEEDS), true);
    check_safe(&b);
}

static void fences_with_auto_extension(void **state)
{
    (void)state;
    batch b = run_batch("fence-auto", AUTO_SEEDS, true);
    check_safe(&b);
}

/* The negative control: nodes restart empty and the commit needs only the quorum. A later
 * grant's quorum may meet the earlier commit only on nodes that forgot: fences go back. */
static void amnesia_with_quorum_commit_breaks_the_order(void **state)
{
    (void)state;
    batch b = run_batch("fence-amnesia", BROKEN_SEEDS, false);
    assert_int_equal(b.contracts, 0);
    assert_int_equal(b.f.order_broken, 0); /* every break has a forgetting node in its window */
    if (b.f.order_excused == 0)
        fail_msg("no fence went back with empty restarts and fence_commit = quorum: the "
                 "negative control shows nothing");
}

/* quorum + 1 commit acks: one node forgetting at a time never breaks the order. */
static void amnesia_with_one_more_ack_keeps_the_order(void **state)
{
    (void)state;
    batch b = run_batch("fence-amnesia-q1", BROKEN_SEEDS, true);
    assert_int_equal(b.contracts, 0);
    assert_int_equal(b.f.order_broken, 0);
    /* Not vacuous: many pairs of grants had a node restarted empty between them. */
    assert_true(b.f.amnesia_pairs > b.runs);
}

/* A clock 30% slow breaks the lock, as without fencing; the store still accepts no stale
 * write. */
static void slow_clock_breaks_the_lock_not_the_store(void **state)
{
    (void)state;
    batch b = run_batch("fence-clock", BROKEN_SEEDS, false);
    assert_int_equal(b.contracts, 0);
    if (b.exclusion == 0)
        fail_msg("no overlapping holds with a clock 30%% slow: the scenario shows nothing");
    if (b.f.stale_accepted != 0)
        fail_msg("the store accepted %u stale writes with a slow clock", b.f.stale_accepted);
    assert_true(b.f.late_writes > 0);
}

static void same_seed_same_trace(void **state)
{
    (void)state;
    sim_config cfg;
    sim_result a, b;
    assert_true(sim_fence_scenario(&cfg, "fence", 77));
    assert_int_equal(sim_run(&cfg, &a), 0);
    assert_int_equal(sim_run(&cfg, &b), 0);
    assert_true(a.trace_hash == b.trace_hash);
    assert_int_equal(a.fence.writes, b.fence.writes);
}

/* SIM_SEED=N [SIM_SCENARIO=name]: one seed, with a trace on stderr. */
static int replay(const char *seed_text)
{
    const char *scenario = getenv("SIM_SCENARIO");
    if (scenario == NULL)
        scenario = "fence";
    sim_config cfg;
    if (!sim_fence_scenario(&cfg, scenario, strtoull(seed_text, NULL, 10))) {
        fprintf(stderr,
                "unknown SIM_SCENARIO %s (fence, fence-amnesia, fence-amnesia-q1, "
                "fence-clock, each also with -auto)\n",
                scenario);
        return 2;
    }
    cfg.trace = true;
    sim_result r;
    if (sim_run(&cfg, &r) != 0)
        return 2;
    printf("holds %u, grants %u, writes %u (accepted %u, refused %u, late %u, stale accepted %u), "
           "order broken %u (excused %u)%s%s%s%s\n",
           r.holds, r.fence.grants, r.fence.writes, r.fence.accepted, r.fence.refused,
           r.fence.late_writes, r.fence.stale_accepted, r.fence.order_broken, r.fence.order_excused,
           r.violation ? "\noverlap: " : "", r.violation ? r.what : "",
           r.fence_broken ? "\nfencing: " : "", r.fence_broken ? r.fence_what : "");
    return r.violation || r.fence_broken || r.contract_broken ? 1 : 0;
}

int main(void)
{
    const char *seed = getenv("SIM_SEED");
    if (seed != NULL)
        return replay(seed);
    const char *filter = getenv("SIM_TEST_FILTER");
    if (filter != NULL)
        cmocka_set_test_filter(filter);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fences_increase_and_stale_writes_are_refused),
        cmocka_unit_test(fences_with_auto_extension),
        cmocka_unit_test(amnesia_with_quorum_commit_breaks_the_order),
        cmocka_unit_test(amnesia_with_one_more_ack_keeps_the_order),
        cmocka_unit_test(slow_clock_breaks_the_lock_not_the_store),
        cmocka_unit_test(same_seed_same_trace),
    };
    return cmocka_run_group_tests_name("sim-fence", tests, NULL, NULL);
}
