/* SPDX-License-Identifier: MIT */
/* sim_fence.h - fencing in the simulation: the fenced holds' writes to a fenced store, and the
 * checker of fences (the nodes keep the counters as the scripts do: sim_scripts.h). */
#ifndef SIM_FENCE_H
#define SIM_FENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

#endif
