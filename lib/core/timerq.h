/* SPDX-License-Identifier: MIT */
/* timerq.h - an intrusive min-heap of timers (a pairing heap): the client's retry delays and
 * deferred completions share one real timer, armed at the earliest due time. No allocation:
 * the timer lives inside the object that waits on it. */
#ifndef REDLOCK_TIMERQ_H
#define REDLOCK_TIMERQ_H

#include <stdbool.h>
#include <stdint.h>

typedef struct redlock__timer redlock__timer;
typedef void (*redlock__timer_cb)(redlock__timer *timer);

struct redlock__timer {
    uint64_t due_us;
    uint64_t seq; /* insertion order: equal due times fire first-in first-out */
    redlock__timer_cb cb;
    redlock__timer *child, *sibling, *prev; /* prev: parent for a first child, else left sibling */
    bool active;
};

typedef struct redlock__timerq {
    redlock__timer *root;
    uint64_t next_seq;
} redlock__timerq;

void redlock__timerq_init(redlock__timerq *q);
/* Arm t for due_us (re-arms if already active). */
void redlock__timerq_start(redlock__timerq *q, redlock__timer *t, uint64_t due_us,
                           redlock__timer_cb cb);
/* Disarm t; harmless if not active. */
void redlock__timerq_stop(redlock__timerq *q, redlock__timer *t);
/* The earliest due time, or UINT64_MAX when empty. */
uint64_t redlock__timerq_next_due(const redlock__timerq *q);
/* Remove and return the earliest timer if due at now_us, else NULL. The caller runs its cb. */
redlock__timer *redlock__timerq_pop_due(redlock__timerq *q, uint64_t now_us);

#endif
