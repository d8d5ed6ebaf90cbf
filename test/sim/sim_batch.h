/* SPDX-License-Identifier: MIT */
/* sim_batch.h - running many seeds of a scenario and summing what they showed, for the
 * simulation's test programs (test_sim.c, test_sim_grants.c); and the replay of one seed with a
 * trace (SIM_SEED=N SIM_SCENARIO=name, with the scenario's changes in SIM_* variables). */
#ifndef SIM_BATCH_H
#define SIM_BATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "sim.h"

struct CMUnitTest;

#define SHOW_MAX 3
#define FAIL_MAX 20 /* a batch stops after this many seeds broke a contract or a promise */

typedef struct batch {
    unsigned runs, violations, contract_failures, broken_promises;
    uint64_t holds, handovers, events, extended;
    /* auto-extension */
    uint64_t auto_holds, auto_long_holds, auto_extensions, auto_planned, auto_stopped, auto_freed;
    uint64_t lost, lost_limit, lost_canceled, lost_lost, lost_noquorum, lost_expired;
    uint64_t release_races;
    /* no hold reported without a gap */
    unsigned gaps;
    uint64_t gap_checks, gap_releases, gap_extends, gap_grants, releases_lapsed;
    uint64_t conn_drops, clock_jumps, snipes;
    /* holds forgotten by a quorum (restarts without data), and how soon they were reported */
    uint64_t forgotten, forgotten_reported, report_us_total, report_us_max, unaware_us_total;
    uint64_t reported_in_time;
    /* seeds that broke the order of fences, a release's reply, a vanished waiter's place, or
     * liveness (sim.h) */
    unsigned fence_problems, dishonest, overstayed, starved, out_of_turn;
    uint64_t dishonest_releases, migration_release_errors, overstays, served, wait_max_us;
    unsigned wait_bound_permille;
    /* what the seeds exercised (sim_result's coverage) */
    uint64_t grants, queued_waits, notes_lost, half_open, multi_holds, fenced_holds;
    uint64_t cluster_redirects, replica_waits, vanished, failovers, migrations;
    /* the hostile node's forgeries, by kind (sim_hostile.c) */
    uint64_t forged_grants, forged_wakes, forged_queue, forged_key, forged_votes, requests;
    double seconds;
} batch;

unsigned env_unsigned(const char *name, unsigned fallback);
/* Apply tweak ("NAME=VALUE", several separated by spaces; NULL: nothing) to cfg: a change to a
 * scenario named by the environment variable that makes a replay apply it too. */
void apply_tweak_text(sim_config *cfg, const char *tweak);
/* Run seeds first..first+count-1 of a scenario, changed by tweak; print the first few seeds that
 * broke anything, each with the command that replays it, and a summary under label. */
batch run_batch(const char *scenario, uint64_t first, unsigned count, const char *tweak,
                const char *label);
/* Add b's sums to *to. */
void batch_add(batch *to, const batch *b);
/* SIM_SEED=N [SIM_SCENARIO=name] [SIM_...]: run one seed with a trace on stderr; 0 when it broke
 * nothing. */
int sim_replay(const char *seed_text);
/* A test program's main: SIM_SEED replays one seed (sim_replay); SIM_TEST_FILTER=name runs only
 * the matching tests (cmocka's '*' and '?' wildcards); else the tests run. */
int sim_test_main(const struct CMUnitTest *tests, size_t count);
/* Each scenario, run twice with one seed, gives the same trace, and another seed another one. */
void sim_assert_same_seed_same_trace(const char *const *scenarios, size_t count);

#endif
