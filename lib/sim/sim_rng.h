/* SPDX-License-Identifier: MIT */
/* sim_rng.h - the simulations' seeded generator: xoshiro256** seeded through splitmix64. Every
 * draw of a run comes from one of these, so a seed decides the whole run. */
#ifndef SIM_RNG_H
#define SIM_RNG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sim_rng {
    uint64_t s[4];
} sim_rng;

void sim_rng_seed(sim_rng *r, uint64_t seed);
uint64_t sim_rng_next(sim_rng *r);
/* Uniform in [lo, hi] (lo when hi <= lo). */
uint64_t sim_rng_range(sim_rng *r, uint64_t lo, uint64_t hi);
bool sim_rng_chance(sim_rng *r, double p);
/* len random bytes into buf (a client's tokens: io.h's random), one draw each. */
void sim_rng_bytes(sim_rng *r, void *buf, size_t len);

#endif
