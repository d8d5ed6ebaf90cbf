/* SPDX-License-Identifier: MIT */
/* test_sim_grants.c - the waiting holds on the deterministic simulator: queues, grants,
 * notifications, sets, fenced holds and Redis Cluster nodes (sim.h, sim_pubsub.c,
 * sim_cluster.c), with the scripts run by their C models (sim_scripts.h, which
 * test_sim_scripts.c holds to the real scripts).
 *
 *   every path keeps its promises: over the "grants", "grants-alias", "cluster" and "turns"
 *       worlds, "grants" and "cluster" with auto-extended holds too (plain, fenced, waiting,
 *       granted and set holds, mixed), no two holders of one
 *       resource (of overlapping sets) at one true time; no lock handed out, released with
 *       status 0 or extended without a quorum holding its keys all along; fences strictly
 *       increasing in the order of grants and no stale write accepted; no node whose release
 *       deleted a hold's keys answering other than yes; no grant to a vanished waiter outliving
 *       its place; and in "turns", every waiter served within sim_wait_bound_us. The run's
 *       coverage is printed on one line that scripts read, and every count must be above zero:
 *         # coverage: grants N, queued waits N, notifications lost N, half-open waiters N,
 *           multi holds N, fenced holds N, cluster redirects N, replica waits N
 *   the controls: each broken rule of the grants issue, and the old rules, put back one at a
 *       time, is found - a seed that breaks a property, printed with its replay line;
 *   the replica wait is what keeps a cluster's failover safe: without it, holds overlap;
 *   a hostile node (the "hostile" world: the last node forges grants naming any node with any
 *       counter, and wake-ups on every channel it carries) costs only its own vote: every
 *       property above holds;
 *   determinism: one seed, one trace.
 *
 * SIM_GRANT_SEEDS=N sets the seeds of each world (SIM_SEEDS, when set, halves it: test/run
 * --quick); a seed replays with a trace with test-sim: SIM_SEED=N SIM_SCENARIO=grants ...
 * build/test/sim/test-sim. */
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
#include "sim_batch.h"

#define GRANT_SEEDS (SIM_SANITIZED ? 150u : 600u) /* per world */
#define CONTROL_SEEDS 2000u /* at most, per control: each stops at its first finding */

static unsigned grant_seeds(void)
{
    unsigned seeds = env_unsigned("SIM_GRANT_SEEDS", 0);
    if (seeds != 0)
        return seeds;
    unsigned quick = env_unsigned("SIM_SEEDS", 0);
    return quick != 0 ? (quick + 1) / 2 : GRANT_SEEDS;
}

static void assert_kept(const batch *b)
{
    assert_int_equal(b->contract_failures, 0);
    assert_int_equal(b->broken_promises, 0);
    assert_int_equal(b->violations, 0);
    assert_int_equal(b->gaps, 0);
    assert_int_equal(b->fence_problems, 0);
    assert_int_equal(b->dishonest, 0);
    assert_int_equal(b->overstayed, 0);
    assert_int_equal(b->starved, 0);
    assert_int_equal(b->out_of_turn, 0);
}

/* Every world of waiting holds keeps every property; the coverage line, every count above 0. */
static void every_path_keeps_its_promises(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        unsigned share; /* of the seeds, in quarters: the auto-extended worlds run longer */
    } worlds[] = {{"grants", 4}, {"grants-alias", 4}, {"cluster", 4},
                  {"turns", 4},  {"grants-auto", 1},  {"cluster-auto", 1}};
    unsigned seeds = grant_seeds();
    batch all;
    memset(&all, 0, sizeof(all));
    for (size_t i = 0; i < sizeof(worlds) / sizeof(worlds[0]); i++) {
        batch b = run_batch(worlds[i].name, 1, (seeds * worlds[i].share + 3) / 4, NULL, NULL);
        assert_kept(&b);
        batch_add(&all, &b);
    }
    printf("# coverage: grants %" PRIu64 ", queued waits %" PRIu64 ", notifications lost %" PRIu64
           ", half-open waiters %" PRIu64 ", multi holds %" PRIu64 ", fenced holds %" PRIu64
           ", cluster redirects %" PRIu64 ", replica waits %" PRIu64 "\n",
           all.grants, all.queued_waits, all.notes_lost, all.half_open, all.multi_holds,
           all.fenced_holds, all.cluster_redirects, all.replica_waits);
    fflush(stdout);
    assert_true(all.grants > 0);
    assert_true(all.queued_waits > 0);
    assert_true(all.notes_lost > 0);
    assert_true(all.half_open > 0);
    assert_true(all.multi_holds > 0);
    assert_true(all.fenced_holds > 0);
    assert_true(all.cluster_redirects > 0);
    assert_true(all.replica_waits > 0);
}

/* Which property a control must break. */
typedef enum { BY_EXCLUSION, BY_UNQUORATE, BY_OVERSTAY, BY_MISREPORT, BY_TURNS } broken_by;

static bool found(const sim_result *r, broken_by by)
{
    switch (by) {
    case BY_EXCLUSION:
        return r->violation || r->gap_found;
    case BY_UNQUORATE:
        return r->gap_grants > 0;
    case BY_OVERSTAY:
        return r->overstay;
    case BY_MISREPORT:
        return r->dishonest;
    case BY_TURNS:
        return r->starved || r->out_of_turn;
    }
    return false;
}

static const char *finding(const sim_result *r, broken_by by)
{
    switch (by) {
    case BY_EXCLUSION:
        return r->violation ? r->what : r->gap;
    case BY_UNQUORATE:
        return r->gap;
    case BY_OVERSTAY:
        return r->overstay_what;
    case BY_MISREPORT:
        return r->dishonest_what;
    case BY_TURNS:
        return r->starved ? r->starved_what : r->out_of_turn_what;
    }
    return "";
}

/* Each broken variant is found by the simulator: the first seed (of CONTROL_SEEDS at most) that
 * breaks its property is printed with its replay line. The grants issue's findings first - a
 * grant counted per subscriber (one server listed twice), a grant counted without the replica
 * wait (a failover loses it), a grant to a half-open waiter for the full ttl, a refused PUBSUB
 * that fails the release after its DEL - then an old rule: queue order by arrival. The other old
 * rules live in lib/ops.c (validity from the grant, a set checked on its first key): their
 * mutants (test/mutants/mutants.py) are killed by every_path_keeps_its_promises. */
static void broken_variants_are_found(void **state)
{
    (void)state;
    static const struct {
        const char *control, *world;
        broken_by by;
    } controls[] = {
        {"per-subscriber", "grants-alias", BY_UNQUORATE},
        {"without-wait", "cluster", BY_EXCLUSION},
        {"full-ttl", "grants", BY_OVERSTAY},
        {"numsub-raises", "grants", BY_MISREPORT},
        {"by-arrival", "turns", BY_TURNS},
    };
    for (size_t i = 0; i < sizeof(controls) / sizeof(controls[0]); i++) {
        char tweak[64];
        snprintf(tweak, sizeof(tweak), "SIM_CONTROL=%s", controls[i].control);
        uint64_t seed = 0;
        sim_result r;
        for (uint64_t s = 1; s <= CONTROL_SEEDS && seed == 0; s++) {
            sim_config cfg;
            assert_true(sim_config_scenario(&cfg, controls[i].world, s));
            apply_tweak_text(&cfg, tweak);
            assert_int_equal(sim_run(&cfg, &r), 0);
            assert_false(r.contract_broken);
            if (found(&r, controls[i].by))
                seed = s;
        }
        if (seed != 0)
            printf("# control %s: found by seed %" PRIu64 ": %s\n"
                   "#   replay: SIM_SEED=%" PRIu64 " %s SIM_SCENARIO=%s test-sim\n",
                   controls[i].control, seed, finding(&r, controls[i].by), seed, tweak,
                   controls[i].world);
        else
            printf("# control %s: NOT found in %u seeds of %s\n", controls[i].control,
                   CONTROL_SEEDS, controls[i].world);
        fflush(stdout);
        assert_true(seed != 0);
    }
}

/* A cluster node without the replica wait: a failover loses writes its master acknowledged, an
 * assumption broken (docs/cluster.md asks for wait_replicas), and holds overlap. */
static void cluster_failover_needs_the_replica_wait(void **state)
{
    (void)state;
    batch b = run_batch("cluster", 1, grant_seeds(), "SIM_WAIT_REPLICAS=0", " (no replica wait)");
    assert_int_equal(b.contract_failures, 0);
    assert_true(b.failovers > 0);
    assert_true(b.violations + b.gaps > 0);
}

/* A hostile node (the last one: sim_hostile.c) forges every kind of message on every channel it
 * carries - grants naming any node, with any counter, wake-ups on waiters', queues' and keys'
 * channels - and costs only its own vote: no two holders, no hold handed out without a quorum
 * of keys, no hold reported continuous across a gap. Its counts are printed by the batch. */
static void a_hostile_node_costs_only_its_vote(void **state)
{
    (void)state;
    batch b = run_batch("hostile", 1, (grant_seeds() + 5) / 6, NULL, NULL);
    assert_true(b.forged_grants > 0);
    assert_true(b.forged_wakes + b.forged_queue + b.forged_key > 0);
    assert_kept(&b);
    assert_int_equal(b.gap_grants, 0);
}

static void same_seed_same_trace(void **state)
{
    (void)state;
    static const char *const scenarios[] = {"grants", "grants-alias", "cluster", "turns",
                                            "hostile"};
    sim_assert_same_seed_same_trace(scenarios, sizeof(scenarios) / sizeof(scenarios[0]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_path_keeps_its_promises),
        cmocka_unit_test(broken_variants_are_found),
        cmocka_unit_test(cluster_failover_needs_the_replica_wait),
        cmocka_unit_test(a_hostile_node_costs_only_its_vote),
        cmocka_unit_test(same_seed_same_trace),
    };
    return sim_test_main(tests, sizeof(tests) / sizeof(tests[0]));
}
