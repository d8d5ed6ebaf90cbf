/* SPDX-License-Identifier: MIT */
/* sim_queue.h - the simulators' event queue, in virtual time: the kit's fleet (fleet.c) and
 * test/sim's world (sim_world.c) run on it. Events come out in the order of (at, seq): by time,
 * then in the order they were queued, so that one seed gives one order. */
#ifndef SIM_QUEUE_H
#define SIM_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One event. kind, proc (a client, or a process), node and arg mean what the simulator that
 * queued it says; msg is what it carries (its simulator frees it). */
typedef struct sim_event {
    uint64_t at, seq;
    int kind;
    unsigned proc, node;
    uint64_t arg;
    void *msg;
    bool deferred; /* held back by a pause (sim_queue_defer): it runs later than it was due */
} sim_event;

typedef struct sim_queue {
    sim_event *heap; /* a binary heap on (at, seq) */
    size_t len, cap;
    uint64_t next_seq;
} sim_queue;

/* Queue ev with the next sequence number (its seq is ignored). Returns false without memory (ev
 * is not queued; its msg is still the caller's). */
bool sim_queue_push(sim_queue *q, sim_event ev);

/* Queue ev again at until, with its own sequence number: what a pause held back keeps its order
 * among the events held with it. Returns false without memory, as sim_queue_push. */
bool sim_queue_defer(sim_queue *q, sim_event ev, uint64_t until);

/* The first event (the queue must not be empty), taken out. */
sim_event sim_queue_pop(sim_queue *q);

/* The first event's time, or UINT64_MAX when the queue is empty. */
static inline uint64_t sim_queue_next_at(const sim_queue *q)
{
    return q->len > 0 ? q->heap[0].at : UINT64_MAX;
}

/* The queue's memory (the events' msgs are the caller's: pop them first, or walk heap[0..len)). */
void sim_queue_free(sim_queue *q);

#endif
