/* SPDX-License-Identifier: MIT */
/* sim_batch.c - see sim_batch.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim_batch.h"
#include "sim_fence.h"
#include "sim_scripts.h"

static double wall_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

unsigned env_unsigned(const char *name, unsigned fallback)
{
    const char *s = getenv(name);
    if (s == NULL || *s == '\0')
        return fallback;
    return (unsigned)strtoul(s, NULL, 10);
}

/* A broken variant (sim.h, "the controls"), by name. */
static bool apply_control(sim_config *cfg, const char *name)
{
    if (strcmp(name, "per-subscriber") == 0)
        cfg->grant_per_subscriber = true; /* a grant counts for the subscriber that heard it */
    else if (strcmp(name, "without-wait") == 0)
        cfg->grant_without_wait = true; /* a replica-waiting cluster node takes grant records */
    else if (strcmp(name, "full-ttl") == 0)
        cfg->breaks |= SIM_BREAK_GRANT_FULL_TTL; /* a grant's whole ttl, whatever the place */
    else if (strcmp(name, "numsub-raises") == 0)
        cfg->breaks |= SIM_BREAK_NUMSUB_RAISES; /* a refused NUMSUB fails the release */
    else if (strcmp(name, "by-arrival") == 0)
        cfg->breaks |= SIM_BREAK_QUEUE_BY_ARRIVAL; /* places by arrival */
    else
        return false;
    return true;
}

/* A change to a scenario's configuration (a clock rate, a broken assumption restored), named
 * by the environment variable that makes a replay apply it too. Returns false for an unknown
 * name. */
static bool apply_tweak(sim_config *cfg, const char *name, const char *value)
{
    if (strcmp(name, "SIM_RATE") == 0) {
        cfg->bad_rate = strtod(value, NULL); /* process 0's clock rate */
    } else if (strcmp(name, "SIM_KEEP_DATA") == 0) {
        cfg->restart_loses_data = false; /* restarted nodes keep their keys */
    } else if (strcmp(name, "SIM_OLD_RELEASE") == 0) {
        /* Read releases as the library reported them before issue 17 (the negative control of
         * the "no gap" property). */
        cfg->old_release_status = strcmp(value, "0") != 0;
    } else if (strcmp(name, "SIM_NODES") == 0) {
        cfg->n_nodes = (unsigned)strtoul(value, NULL, 10); /* the scenario on N nodes */
    } else if (strcmp(name, "SIM_DEAD") == 0) {
        cfg->dead_nodes = (unsigned)strtoul(value, NULL, 10); /* nodes down all the run */
    } else if (strcmp(name, "SIM_JUMP_US") == 0) {
        /* node clocks jump forward by exactly this much */
        cfg->clock_jump_min_us = cfg->clock_jump_max_us = strtoull(value, NULL, 10);
    } else if (strcmp(name, "SIM_NO_RECHECK") == 0) {
        /* The client is never told that a node came back as a new server (before issue 36). */
        cfg->no_recheck = strcmp(value, "0") != 0;
    } else if (strcmp(name, "SIM_DELAY_RESTART") == 0) {
        /* The delayed restart of docs/operations.md: an empty node stays away over a ttl. */
        cfg->restart_down_min_us = cfg->ttl_ms * 1100;
        cfg->restart_down_max_us = cfg->ttl_ms * 1500;
    } else if (strcmp(name, "SIM_WAIT_REPLICAS") == 0) {
        cfg->wait_replicas = (unsigned)strtoul(value, NULL, 10); /* a cluster node's URL's */
    } else if (strcmp(name, "SIM_CONTROL") == 0) {
        return apply_control(cfg, value);
    } else {
        return false;
    }
    return true;
}

static const char *const tweak_names[] = {
    "SIM_NODES",       "SIM_DEAD",    "SIM_RATE",       "SIM_KEEP_DATA",     "SIM_DELAY_RESTART",
    "SIM_OLD_RELEASE", "SIM_JUMP_US", "SIM_NO_RECHECK", "SIM_WAIT_REPLICAS", "SIM_CONTROL"};

/* tweak: "NAME=VALUE", or several separated by spaces (see apply_tweak), or NULL for the
 * scenario as named. */
void apply_tweak_text(sim_config *cfg, const char *tweak)
{
    while (tweak != NULL && *tweak != '\0') {
        char name[32], value[32];
        const char *eq = strchr(tweak, '=');
        assert_non_null(eq);
        size_t value_len = strcspn(eq + 1, " ");
        snprintf(name, sizeof(name), "%.*s", (int)(eq - tweak), tweak);
        snprintf(value, sizeof(value), "%.*s", (int)value_len, eq + 1);
        assert_true(apply_tweak(cfg, name, value));
        tweak = eq + 1 + value_len;
        tweak += *tweak == ' ';
    }
}

/* Count a seed that broke a property, and print the first few with their replay line. */
static void show_problem(bool broke, unsigned *count, const char *what, const char *text,
                         uint64_t seed, const char *shown, const char *sep, const char *scenario)
{
    if (!broke)
        return;
    if (*count < SHOW_MAX)
        printf("# seed %" PRIu64 " %s: %s\n"
               "#   replay: SIM_SEED=%" PRIu64 " %s%sSIM_SCENARIO=%s test-sim\n",
               seed, what, text, seed, shown, sep, scenario);
    (*count)++;
}

batch run_batch(const char *scenario, uint64_t first, unsigned count, const char *tweak,
                const char *label)
{
    const char *sep = tweak != NULL ? " " : "";
    const char *shown = tweak != NULL ? tweak : "";
    batch b;
    memset(&b, 0, sizeof(b));
    double t0 = wall_seconds();
    for (uint64_t seed = first; seed < first + count; seed++) {
        if (b.contract_failures + b.broken_promises >= FAIL_MAX) {
            printf("# %s: stopped after %u failing seeds\n", scenario, FAIL_MAX);
            break;
        }
        sim_config cfg;
        assert_true(sim_config_scenario(&cfg, scenario, seed));
        apply_tweak_text(&cfg, tweak);
        sim_result r;
        int rc = sim_run(&cfg, &r);
        b.runs++;
        b.holds += r.holds;
        b.handovers += r.handovers;
        b.events += r.events;
        b.extended += r.extended;
        b.auto_holds += r.auto_holds;
        b.auto_long_holds += r.auto_long_holds;
        b.auto_extensions += r.auto_extensions;
        b.auto_planned += r.auto_planned;
        b.auto_stopped += r.auto_stopped;
        b.auto_freed += r.auto_freed;
        b.lost += r.lost;
        b.lost_limit += r.lost_limit;
        b.lost_canceled += r.lost_canceled;
        b.lost_lost += r.lost_lost;
        b.lost_noquorum += r.lost_noquorum;
        b.lost_expired += r.lost_expired;
        b.release_races += r.release_races;
        b.gap_checks += r.gap_checks;
        b.gap_releases += r.gap_releases;
        b.gap_extends += r.gap_extends;
        b.releases_lapsed += r.releases_lapsed;
        b.conn_drops += r.conn_drops;
        b.clock_jumps += r.clock_jumps;
        b.snipes += r.snipes;
        b.forgotten += r.forgotten;
        b.forgotten_reported += r.forgotten_reported;
        b.report_us_total += r.report_us_total;
        b.report_us_max = r.report_us_max > b.report_us_max ? r.report_us_max : b.report_us_max;
        b.unaware_us_total += r.unaware_us_total;
        b.reported_in_time += r.reported_in_time;
        b.gap_grants += r.gap_grants;
        b.dishonest_releases += r.dishonest_releases;
        b.migration_release_errors += r.migration_release_errors;
        b.overstays += r.overstays;
        b.served += r.served;
        b.wait_max_us = r.wait_max_us > b.wait_max_us ? r.wait_max_us : b.wait_max_us;
        if (r.wait_bound_permille > b.wait_bound_permille)
            b.wait_bound_permille = r.wait_bound_permille;
        b.grants += r.grants;
        b.queued_waits += r.queued_waits;
        b.notes_lost += r.notes_lost;
        b.half_open += r.half_open;
        b.multi_holds += r.multi_holds;
        b.fenced_holds += r.fenced_holds;
        b.cluster_redirects += r.cluster_redirects;
        b.replica_waits += r.replica_waits;
        b.vanished += r.vanished;
        b.failovers += r.failovers;
        b.migrations += r.migrations;
        b.forged_grants += r.forged_grants;
        b.forged_wakes += r.forged_wakes;
        b.forged_queue += r.forged_queue;
        b.forged_key += r.forged_key;
        b.requests += r.requests;
        b.forged_votes += r.forged_votes;
        bool ran = rc == 0 && !r.contract_broken;
        show_problem(ran && r.fence_broken, &b.fence_problems, "breaks the order of fences",
                     r.fence_what, seed, shown, sep, scenario);
        show_problem(ran && r.dishonest, &b.dishonest, "misreports a release", r.dishonest_what,
                     seed, shown, sep, scenario);
        show_problem(ran && r.overstay, &b.overstayed, "lets a vanished waiter overstay",
                     r.overstay_what, seed, shown, sep, scenario);
        show_problem(ran && r.starved, &b.starved, "starves a waiter", r.starved_what, seed, shown,
                     sep, scenario);
        show_problem(ran && r.out_of_turn, &b.out_of_turn, "serves a waiter out of turn",
                     r.out_of_turn_what, seed, shown, sep, scenario);
        if (rc == 0 && !r.contract_broken && r.gap_found) {
            if (b.gaps < SHOW_MAX)
                printf("# seed %" PRIu64 " reports a hold without its gap: %s\n"
                       "#   replay: SIM_SEED=%" PRIu64 " %s%sSIM_SCENARIO=%s test-sim\n",
                       seed, r.gap, seed, shown, sep, scenario);
            b.gaps++;
        }
        if (rc != 0 || r.contract_broken) {
            b.contract_failures++;
            printf("# seed %" PRIu64 " (%s) broke the simulation's contract: %s\n", seed, scenario,
                   r.what);
        }
        if (r.promise_broken) {
            if (b.broken_promises < SHOW_MAX)
                printf("# seed %" PRIu64 " breaks a promise of auto-extension: %s\n"
                       "#   replay: SIM_SEED=%" PRIu64 " %s%sSIM_SCENARIO=%s test-sim\n",
                       seed, r.promise, seed, shown, sep, scenario);
            b.broken_promises++;
        }
        if (rc == 0 && !r.contract_broken && r.violation) {
            if (b.violations < SHOW_MAX)
                printf("# seed %" PRIu64 " violates mutual exclusion: %s\n"
                       "#   replay: SIM_SEED=%" PRIu64 " %s%sSIM_SCENARIO=%s test-sim\n",
                       seed, r.what, seed, shown, sep, scenario);
            b.violations++;
        }
    }
    b.seconds = wall_seconds() - t0;
    printf("# %s%s: %u seeds, %u violations (%.1f%%), %" PRIu64 " holds, %" PRIu64
           " handovers within a ttl, %" PRIu64 " extensions, %" PRIu64 " events, %.2f s\n",
           scenario, label != NULL ? label : "", b.runs, b.violations,
           100.0 * b.violations / (b.runs ? b.runs : 1), b.holds, b.handovers, b.extended, b.events,
           b.seconds);
    printf("#   no gap hidden: %" PRIu64 " releases with status 0 and won extends checked, %" PRIu64
           " releases and %" PRIu64 " extends hid a gap (%u seeds); %" PRIu64
           " releases said REDLOCK_ELOST\n",
           b.gap_checks, b.gap_releases, b.gap_extends, b.gaps, b.releases_lapsed);
    if (b.conn_drops + b.clock_jumps + b.snipes > 0)
        printf("#   %" PRIu64 " acquires timed to land as the keys expired, %" PRIu64
               " silent connections dropped, %" PRIu64 " node clocks jumped\n",
               b.snipes, b.conn_drops, b.clock_jumps);
    if (b.forgotten > 0)
        printf(
            "#   forgotten by a quorum while worked: %" PRIu64 " holds, %" PRIu64
            " reported lost (%" PRIu64 " within a reconnection and a round; %.1f ms mean, %.1f ms "
            "max from the moment a quorum was free to the report); %.1f ms worked after it on "
            "average\n",
            b.forgotten, b.forgotten_reported, b.reported_in_time,
            b.report_us_total / 1000.0 / (double)(b.forgotten_reported ? b.forgotten_reported : 1),
            b.report_us_max / 1000.0, b.unaware_us_total / 1000.0 / (double)b.forgotten);
    if (b.queued_waits + b.grants + b.fenced_holds + b.multi_holds > 0)
        printf("#   %" PRIu64 " locks won by grants, %" PRIu64 " queued waits, %" PRIu64
               " holds handed out checked (%" PRIu64 " without a quorum), %" PRIu64
               " fenced holds (%u seeds broke their order), %" PRIu64 " holds of sets, %" PRIu64
               " notifications lost (%" PRIu64 " to half-open waiters of %" PRIu64
               " vanished processes; %" PRIu64 " grants overstayed a place), %" PRIu64
               " releases misreported (%" PRIu64 " mid-migration apart), %" PRIu64
               " cluster redirects, %" PRIu64 " replica waits, %" PRIu64 " failovers, %" PRIu64
               " migrations; %" PRIu64 " waiters served (longest wait %.1f ms, at most %.1f%% of "
               "its bound; %u seeds starved)\n",
               b.grants, b.queued_waits, b.gap_checks, b.gap_grants, b.fenced_holds,
               b.fence_problems, b.multi_holds, b.notes_lost, b.half_open, b.vanished, b.overstays,
               b.dishonest_releases, b.migration_release_errors, b.cluster_redirects,
               b.replica_waits, b.failovers, b.migrations, b.served, b.wait_max_us / 1000.0,
               b.wait_bound_permille / 10.0, b.starved);
    if (b.forged_grants + b.forged_wakes + b.forged_queue + b.forged_key > 0)
        printf("#   hostile node: %" PRIu64 " forged grants, %" PRIu64 " wake-ups on waiters' "
               "channels, %" PRIu64 " on queues' channels, %" PRIu64
               " tokens on keys' channels, %" PRIu64 " votes "
               "turned into errors; %" PRIu64
               " requests sent; %u seeds with two holders, %u with a gap reported "
               "continuous, %" PRIu64 " holds handed out without a quorum\n",
               b.forged_grants, b.forged_wakes, b.forged_queue, b.forged_key, b.forged_votes,
               b.requests, b.violations, b.gaps, b.gap_grants);
    if (b.auto_holds > 0)
        printf("#   auto-extension: %" PRIu64 " holds (%" PRIu64 " worked over a ttl, %" PRIu64
               " ended as planned, %" PRIu64 " stopped first, %" PRIu64
               " freed unreleased), %" PRIu64 " extensions, %" PRIu64 " lost callbacks (%" PRIu64
               " ELOST, %" PRIu64 " ENOQUORUM, %" PRIu64 " EEXPIRED, %" PRIu64 " ELIMIT, %" PRIu64
               " ECANCELED), %" PRIu64 " releases during an extension, %u broken promises\n",
               b.auto_holds, b.auto_long_holds, b.auto_planned, b.auto_stopped, b.auto_freed,
               b.auto_extensions, b.lost, b.lost_lost, b.lost_noquorum, b.lost_expired,
               b.lost_limit, b.lost_canceled, b.release_races, b.broken_promises);
    fflush(stdout);
    return b;
}

void batch_add(batch *to, const batch *b)
{
    to->runs += b->runs;
    to->violations += b->violations;
    to->contract_failures += b->contract_failures;
    to->broken_promises += b->broken_promises;
    to->gaps += b->gaps;
    to->fence_problems += b->fence_problems;
    to->dishonest += b->dishonest;
    to->overstayed += b->overstayed;
    to->starved += b->starved;
    to->out_of_turn += b->out_of_turn;
    to->holds += b->holds;
    to->grants += b->grants;
    to->queued_waits += b->queued_waits;
    to->notes_lost += b->notes_lost;
    to->half_open += b->half_open;
    to->multi_holds += b->multi_holds;
    to->fenced_holds += b->fenced_holds;
    to->cluster_redirects += b->cluster_redirects;
    to->forged_grants += b->forged_grants;
    to->forged_wakes += b->forged_wakes;
    to->forged_queue += b->forged_queue;
    to->forged_key += b->forged_key;
    to->requests += b->requests;
    to->forged_votes += b->forged_votes;
    to->replica_waits += b->replica_waits;
    to->vanished += b->vanished;
    to->failovers += b->failovers;
    to->migrations += b->migrations;
    to->served += b->served;
    to->seconds += b->seconds;
}

/* SIM_SEED=N [SIM_SCENARIO=name]: run one seed with a trace on stderr. */
int sim_replay(const char *seed_text)
{
    const char *scenario = getenv("SIM_SCENARIO");
    if (scenario == NULL || *scenario == '\0')
        scenario = "safe";
    uint64_t seed = strtoull(seed_text, NULL, 10);
    sim_config cfg;
    if (!sim_config_scenario(&cfg, scenario, seed) && !sim_fence_scenario(&cfg, scenario, seed)) {
        fprintf(stderr,
                "unknown SIM_SCENARIO %s (safe, calm, slow-clock, amnesia, reconnect, "
                "clock-jump, each also with -auto; grants, grants-alias, cluster, turns, hostile; "
                "fence, "
                "fence-amnesia, fence-amnesia-q1, fence-clock)\n",
                scenario);
        return 2;
    }
    for (size_t i = 0; i < sizeof(tweak_names) / sizeof(tweak_names[0]); i++) {
        const char *value = getenv(tweak_names[i]);
        if (value != NULL && *value != '\0')
            apply_tweak(&cfg, tweak_names[i], value);
    }
    cfg.trace = true;
    sim_result r;
    int rc = sim_run(&cfg, &r);
    printf("seed %" PRIu64 " (%s): %" PRIu64 " events, %u holds, trace hash %016" PRIx64 "\n", seed,
           scenario, r.events, r.holds, r.trace_hash);
    if (rc != 0 || r.contract_broken) {
        printf("seed %" PRIu64 " broke the simulation's contract: %s\n", seed, r.what);
        return 1;
    }
    if (r.promise_broken) {
        printf("seed %" PRIu64 " breaks a promise of auto-extension: %s\n", seed, r.promise);
        return 1;
    }
    if (r.violation) {
        printf("seed %" PRIu64 " violates mutual exclusion: %s\n", seed, r.what);
        return 1;
    }
    if (r.gap_found) {
        printf("seed %" PRIu64 " reports a hold without its gap: %s\n", seed, r.gap);
        return 1;
    }
    const struct {
        bool broke;
        const char *what, *text;
    } more[] = {
        {r.fence_broken, "breaks the order of fences", r.fence_what},
        {r.dishonest, "misreports a release", r.dishonest_what},
        {r.overstay, "lets a vanished waiter overstay", r.overstay_what},
        {r.starved, "starves a waiter", r.starved_what},
        {r.out_of_turn, "serves a waiter out of turn", r.out_of_turn_what},
    };
    for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++) {
        if (more[i].broke) {
            printf("seed %" PRIu64 " %s: %s\n", seed, more[i].what, more[i].text);
            return 1;
        }
    }
    printf("seed %" PRIu64 ": mutual exclusion holds\n", seed);
    return 0;
}

int sim_test_main(const struct CMUnitTest *tests, size_t count)
{
    const char *seed = getenv("SIM_SEED");
    if (seed != NULL && *seed != '\0')
        return sim_replay(seed);
    const char *filter = getenv("SIM_TEST_FILTER");
    if (filter != NULL && *filter != '\0')
        cmocka_set_test_filter(filter);
    return _cmocka_run_group_tests("sim", tests, count, NULL, NULL);
}

void sim_assert_same_seed_same_trace(const char *const *scenarios, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        sim_config cfg;
        sim_result a, b, c;
        assert_true(sim_config_scenario(&cfg, scenarios[i], 4242));
        assert_int_equal(sim_run(&cfg, &a), 0);
        assert_int_equal(sim_run(&cfg, &b), 0);
        assert_true(a.events > 100);
        assert_true(a.trace_hash == b.trace_hash);
        assert_true(a.events == b.events && a.end_us == b.end_us && a.holds == b.holds);
        assert_int_equal(a.violation, b.violation);
        cfg.seed = 4243;
        assert_int_equal(sim_run(&cfg, &c), 0);
        assert_true(c.trace_hash != a.trace_hash);
    }
}
