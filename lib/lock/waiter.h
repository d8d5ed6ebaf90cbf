/* SPDX-License-Identifier: MIT */
/* waiter.h - waiting for a lock (waiter.c): a waiting lock's place in its keys' queues, which the
 * lock keeps for its release (lock->place), and an acquire's waiting state (op->w). Nothing here
 * is public; acquire.c, round.c (a queued command carries the place) and lock.c (which frees the
 * place with the lock) use it. */
#ifndef REDLOCK_WAITER_H
#define REDLOCK_WAITER_H

#include "op.h"

/* A lock's place in its keys' queues (waiter.c), in one allocation with its channel names. */
struct redlock__place {
    redlock__cmd_place cmd;     /* what its queued commands carry (redlock__place_cmd) */
    bool channel_watched;       /* its own channel is subscribed */
    bool queue_channel_watched; /* and the queue's */
    size_t queue_len;           /* of the queue's channel: its first key's queue name */
    char waiter[2 * REDLOCK__WAITER_BYTES + 1]; /* its id, in hex */
    char channels[]; /* the queue's channel, NUL, its own (that, ":" and its id), NUL */
};

/* What a queued command of the lock whose place is p carries. */
static inline const redlock__cmd_place *redlock__place_cmd(const redlock__place *p)
{
    return &p->cmd;
}

/* What a node's grants told a waiter (waiter.nodes). */
typedef struct waiter_node {
    unsigned keys;      /* keys of the lock the node's grants set for its token */
    uint64_t oldest_us; /* the oldest stamp among them: the earliest attempt they answer */
    uint64_t counter;   /* a fenced lock's: the counter the grant read (its yes's counter) */
    bool partial;       /* a grant set a key only until the waiter's place deadline there */
} waiter_node;

/* The state of an acquire that waits (wait_ms): only such an operation carries one (waiter.c). */
struct redlock__waiter {
    bool watching;         /* the io says when its keys are released (subscriber.h) */
    bool woken;            /* its retry timer was moved up by a notification */
    bool notified;         /* a notification came while an attempt was out: retry at once if lost */
    bool claim;            /* a quorum granted while an attempt was out: retry at once if lost */
    uint64_t wake_free_us; /* before this, a notification moves no attempt up (a retry period
                              after the last it did: redlock__waiter_wake_due) */
    unsigned collisions;   /* its attempts lost in a split vote (redlock__waiter_jitter_us) */
    uint64_t grace_us;     /* how long a grant from fewer than a quorum waits for the others' */
    /* Handoff by grant (docs/algorithm.md): a queued waiter's attempt that loses with neither a
     * yes nor a timeout (no node may hold its key) keeps its token and sends no release, and a
     * node's release may then set its keys for it: a grant, heard on its own channel from a
     * node's own server and naming that node (its tag), counts as that node's yes for the
     * attempt it names, valid from that attempt's send. */
    bool token_kept;         /* the last attempt lost so: its token stands */
    uint64_t grant_after_us; /* the stamps of this token's attempts: after this ... */
    uint64_t grant_until_us; /* ... up to the last one sent (0: none; acquire_check) */
    uint64_t granted;        /* the nodes whose grants set every key of the lock (bit i: node i) */
    unsigned n_keys;         /* the lock's keys */
    waiter_node *nodes;      /* per node */
    unsigned char *key_bits; /* a set's: per node, which of its keys a grant set (n_keys bits) */
};

/* ---- waiter.c: waiting for a lock ---------------------------------------------------------- */

/* The waiting state of an acquire of lock, or NULL without memory. */
redlock__waiter *redlock__waiter_new(redlock_client *c, const redlock_lock *lock);
/* Watch lock's keys for releases, and join their queues where they can hold one: before the
 * first attempt, so a release during it is heard. Without memory it only polls. */
void redlock__waiter_start(redlock__op *o);
/* o is delivered: it watches nothing any more. */
void redlock__waiter_end(redlock__op *o);
/* Forget the grants o heard so far: they were of keys a release deletes, or of a token given
 * up. */
void redlock__waiter_forget_grants(redlock__waiter *w, unsigned n_nodes);
/* w's attempt, round q, was decided: the grace its grants get is as long as q took. */
void redlock__waiter_attempt_took(redlock__waiter *w, const redlock_round *q);
/* Whether o heard of grants from a quorum of nodes, and if so won with them. */
bool redlock__waiter_grant_check(redlock__op *o);
/* When an attempt that a notification moves up to due_us may run: due_us, or the end of the
 * retry period that began when a notification last moved one up (a hint costs at most one extra
 * attempt per retry period, whatever is published); the period starts anew there. */
uint64_t redlock__waiter_wake_due(redlock_client *c, redlock__waiter *w, uint64_t due_us);
/* The short, growing jitter of a woken waiter's retry. */
uint64_t redlock__waiter_jitter_us(redlock_client *c, const redlock__op *o);

#endif
