/* SPDX-License-Identifier: MIT */
/* sim_rng.c - the seeded generator (sim_rng.h). */
#include "sim_rng.h"

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void sim_rng_seed(sim_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t sim_rng_next(sim_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t sim_rng_range(sim_rng *r, uint64_t lo, uint64_t hi)
{
    if (hi <= lo)
        return lo;
    return lo + sim_rng_next(r) % (hi - lo + 1);
}

bool sim_rng_chance(sim_rng *r, double p)
{
    if (p <= 0)
        return false;
    return (double)(sim_rng_next(r) >> 11) * 0x1.0p-53 < p;
}

void sim_rng_bytes(sim_rng *r, void *buf, size_t len)
{
    unsigned char *out = buf;
    for (size_t i = 0; i < len; i++)
        out[i] = (unsigned char)(sim_rng_next(r) >> 56);
}
