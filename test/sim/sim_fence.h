/* sim_fence.h - fencing in the simulation: each simulated node's fence counters (a key next to
 * each lock key that never expires), kept apart from the lock keys so that a restart without
 * data can lose both, and a restart with data keeps both. */
#ifndef SIM_FENCE_H
#define SIM_FENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_FENCE_KEY_MAX 64
#define SIM_FENCE_COUNTERS 8

typedef struct sim_counter {
    size_t key_len; /* the lock key's: the counter is that key with ":fence" after it */
    char key[SIM_FENCE_KEY_MAX];
    uint64_t value;
} sim_counter;

typedef struct sim_counters {
    unsigned n;
    sim_counter c[SIM_FENCE_COUNTERS];
} sim_counters;

/* The counter of lock key key (0 when absent). */
uint64_t sim_counter_get(const sim_counters *cs, const char *key, size_t len);
/* counter = max(counter, value). Returns false when there is no room for a new counter. */
bool sim_counter_raise(sim_counters *cs, const char *key, size_t len, uint64_t value);

#endif
