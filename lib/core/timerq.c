/* SPDX-License-Identifier: MIT */
/* timerq.c - pairing heap: O(1) insert, amortised O(log n) removal, no allocation. */
#include "timerq.h"

#include <stddef.h>

static bool before(const redlock__timer *a, const redlock__timer *b)
{
    return a->due_us != b->due_us ? a->due_us < b->due_us : a->seq < b->seq;
}

static redlock__timer *meld(redlock__timer *a, redlock__timer *b)
{
    if (a == NULL)
        return b;
    if (b == NULL)
        return a;
    if (before(b, a)) {
        redlock__timer *t = a;
        a = b;
        b = t;
    }
    /* b becomes a's first child. */
    b->sibling = a->child;
    if (a->child != NULL)
        a->child->prev = b;
    b->prev = a;
    a->child = b;
    a->sibling = NULL;
    a->prev = NULL;
    return a;
}

/* Two-pass pairing of a sibling list: pairs left to right, then melds right to left. */
static redlock__timer *merge_pairs(redlock__timer *first)
{
    redlock__timer *pairs = NULL; /* stack of melded pairs, linked through sibling */
    while (first != NULL) {
        redlock__timer *a = first;
        redlock__timer *b = a->sibling;
        first = b != NULL ? b->sibling : NULL;
        a->sibling = a->prev = NULL;
        if (b != NULL)
            b->sibling = b->prev = NULL;
        redlock__timer *m = meld(a, b);
        m->sibling = pairs;
        pairs = m;
    }
    redlock__timer *root = NULL;
    while (pairs != NULL) {
        redlock__timer *next = pairs->sibling;
        pairs->sibling = NULL;
        root = meld(root, pairs);
        pairs = next;
    }
    return root;
}

void redlock__timerq_init(redlock__timerq *q)
{
    q->root = NULL;
    q->next_seq = 0;
}

void redlock__timerq_start(redlock__timerq *q, redlock__timer *t, uint64_t due_us,
                           redlock__timer_cb cb)
{
    redlock__timerq_stop(q, t);
    t->due_us = due_us;
    t->seq = q->next_seq++;
    t->cb = cb;
    t->child = t->sibling = t->prev = NULL;
    t->active = true;
    q->root = meld(q->root, t);
}

void redlock__timerq_stop(redlock__timerq *q, redlock__timer *t)
{
    if (!t->active)
        return;
    t->active = false;
    if (t == q->root) {
        q->root = merge_pairs(t->child);
    } else {
        /* Cut t (with its subtree) out of its parent's child list, then meld the rest back. */
        if (t->prev->child == t)
            t->prev->child = t->sibling;
        else
            t->prev->sibling = t->sibling;
        if (t->sibling != NULL)
            t->sibling->prev = t->prev;
        q->root = meld(q->root, merge_pairs(t->child));
    }
    t->child = t->sibling = t->prev = NULL;
}

uint64_t redlock__timerq_next_due(const redlock__timerq *q)
{
    return q->root != NULL ? q->root->due_us : UINT64_MAX;
}

redlock__timer *redlock__timerq_pop_due(redlock__timerq *q, uint64_t now_us)
{
    redlock__timer *t = q->root;
    if (t == NULL || t->due_us > now_us)
        return NULL;
    redlock__timerq_stop(q, t);
    return t;
}
