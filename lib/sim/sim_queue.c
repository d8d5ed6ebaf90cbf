/* SPDX-License-Identifier: MIT */
/* sim_queue.c - the simulators' event queue (sim_queue.h): a binary heap on (at, seq). */
#include "sim_queue.h"

#include <stdlib.h>

static bool before(const sim_event *a, const sim_event *b)
{
    return a->at != b->at ? a->at < b->at : a->seq < b->seq;
}

static bool insert(sim_queue *q, sim_event ev)
{
    if (q->len == q->cap) {
        size_t cap = q->cap != 0 ? q->cap * 2 : 256;
        sim_event *h = realloc(q->heap, cap * sizeof(*h));
        if (h == NULL)
            return false;
        q->heap = h;
        q->cap = cap;
    }
    size_t i = q->len++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(&ev, &q->heap[parent]))
            break;
        q->heap[i] = q->heap[parent];
        i = parent;
    }
    q->heap[i] = ev;
    return true;
}

bool sim_queue_push(sim_queue *q, sim_event ev)
{
    ev.seq = ++q->next_seq;
    return insert(q, ev);
}

bool sim_queue_defer(sim_queue *q, sim_event ev, uint64_t until)
{
    ev.at = until;
    ev.deferred = true;
    return insert(q, ev);
}

sim_event sim_queue_pop(sim_queue *q)
{
    sim_event top = q->heap[0];
    sim_event last = q->heap[--q->len];
    size_t i = 0, n = q->len;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= n)
            break;
        if (child + 1 < n && before(&q->heap[child + 1], &q->heap[child]))
            child++;
        if (!before(&q->heap[child], &last))
            break;
        q->heap[i] = q->heap[child];
        i = child;
    }
    if (n > 0)
        q->heap[i] = last;
    return top;
}

void sim_queue_free(sim_queue *q)
{
    free(q->heap);
    *q = (sim_queue){0};
}
