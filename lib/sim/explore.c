/* SPDX-License-Identifier: MIT */
/* explore.c - the seed driver (<redlock/sim.h>, "many seeds"): a scenario over many seeds, and
 * the replay of one. */
#include <stdio.h>
#include <string.h>

#include "fleet.h"

/* opts as this kit's struct (the defaults where the caller's is shorter), to change its seed. A
 * struct never set up, or one asking for members this kit does not know, is passed on as is, for
 * redlock_sim_new to refuse. */
static const redlock_sim_options *options_copy(const redlock_sim_options *opts,
                                               redlock_sim_options *o)
{
    redlock_sim_options_init(o);
    if (opts == NULL)
        return o;
    if (opts->size < sizeof(o->size) + sizeof(o->seed) || opts->size > 4096)
        return opts;
    for (size_t i = sizeof(*o); i < opts->size; i++)
        if (((const unsigned char *)opts)[i] != 0)
            return opts; /* asks for what this kit does not know */
    memcpy(o, opts, REDLOCK__MIN(opts->size, sizeof(*o)));
    o->size = sizeof(*o);
    return o;
}

/* Run scenario on a fresh fleet of opts with seed, with its trace (traced) or without. Returns 0
 * (passed), 1 (failed: what says why) or a negative error; the trace goes to out when traced. */
static int run_one(const redlock_sim_options *opts, uint64_t seed, redlock_sim_scenario_fn scenario,
                   void *data, FILE *out, bool traced)
{
    redlock_sim_options copy;
    const redlock_sim_options *o = options_copy(opts, &copy);
    if (o == &copy)
        copy.seed = seed;
    redlock_sim *sim;
    int rc = redlock_sim_new(o, &sim);
    if (rc != 0)
        return rc;
    sim->untraced = !traced;
    char what[768];
    int status = scenario(sim, data);
    int bad = redlock_sim_verdict(sim, what, sizeof(what));
    if (status != 0 && !bad)
        snprintf(what, sizeof(what), "the scenario failed (it returned %d)", status);
    bad = bad || status != 0;
    if (out != NULL && traced) {
        size_t len;
        const char *trace = redlock_sim_trace(sim, &len);
        fprintf(out, "seed %llu: %s\n", (unsigned long long)seed, bad ? what : "passed");
        fwrite(trace, 1, len, out);
        fprintf(out, "seed %llu: %s\n", (unsigned long long)seed, bad ? what : "passed");
    }
    redlock_sim_free(sim);
    return bad;
}

int redlock_sim_explore(const redlock_sim_options *opts, uint64_t n_seeds,
                        redlock_sim_scenario_fn scenario, void *data, FILE *out,
                        uint64_t *failed_seed)
{
    uint64_t first = 1;
    if (opts != NULL)
        first = opts->seed;
    /* The search keeps no trace (most of a run's cost); the failing seed runs again with it,
     * the same run since the seed decides it. */
    for (uint64_t i = 0; i < n_seeds; i++) {
        int rc = run_one(opts, first + i, scenario, data, NULL, false);
        if (rc == 1) {
            if (failed_seed != NULL)
                *failed_seed = first + i;
            if (out != NULL && run_one(opts, first + i, scenario, data, out, true) == 0)
                fprintf(out,
                        "seed %llu failed once and passed when run again: the scenario "
                        "depends on more than the seed\n",
                        (unsigned long long)(first + i));
        }
        if (rc != 0)
            return rc;
    }
    return 0;
}

int redlock_sim_replay(const redlock_sim_options *opts, redlock_sim_scenario_fn scenario,
                       void *data, FILE *out)
{
    return run_one(opts, opts != NULL ? opts->seed : 1, scenario, data, out, true);
}
