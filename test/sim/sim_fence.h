/* SPDX-License-Identifier: MIT */
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

/* The step code of a holder's write (EV_PROC_STEP; sim_proc.c's own are below it). */
#define SIM_STEP_WRITE 8

struct sim_world;
struct sim_proc;
struct sim_event;
struct redlock_lock;

/* The checker (sim_fence.c). The run calls start before the processes start and finish after
 * the loop (it checks the order of fences and frees everything); a process calls granted from
 * its acquire callback, write from its write step; the loop hands EV_STORE events to store. */
int sim_fence_start(struct sim_world *w);
void sim_fence_granted(struct sim_proc *p, struct redlock_lock *lock);
void sim_fence_write(struct sim_proc *p);
void sim_fence_store(struct sim_world *w, const struct sim_event *ev);
void sim_fence_finish(struct sim_world *w);

/* The fencing scenarios: "fence" (the safe world, every lock fenced, holders write to the
 * store), "fence-amnesia" (nodes restart empty, fence_commit = the quorum: the counters'
 * assumption broken), "fence-amnesia-q1" (the same, one restart at a time, fence_commit =
 * quorum + 1), "fence-clock" (process 0's clock 30% slow: the lock's assumption broken). Each
 * also with "-auto" (auto-extended holds). Returns false for another name. */
bool sim_fence_scenario(struct sim_config *c, const char *name, uint64_t seed);

/* The counter of lock key key (0 when absent). */
uint64_t sim_counter_get(const sim_counters *cs, const char *key, size_t len);
/* counter = max(counter, value). Returns false when there is no room for a new counter. */
bool sim_counter_raise(sim_counters *cs, const char *key, size_t len, uint64_t value);

#endif
