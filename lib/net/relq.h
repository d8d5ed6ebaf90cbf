/* SPDX-License-Identifier: MIT */
/* relq.h - releases kept for a node that could not take them (node.c).
 *
 * A release that finds its node down, loses its connection before the answer, or times out and
 * then loses the connection before the late answer came, would leave the key blocking the
 * resource for the rest of its ttl. The node keeps a copy of it here - the key, the token and
 * when the key expires at the latest - and sends it, oldest first, behind the handshake of its
 * next connection, unless the key has expired meanwhile. A release kept is done only when a
 * node answered it (whatever it said) or its key's possible end of life passed. The queue is
 * bounded: when it is full the oldest entry is dropped (the caller logs it). A compare-and-delete
 * is safe to send late or twice: it deletes the key only while it still holds this token. A
 * waiter's last release (cmd.leave) is kept with the waiter's id, and takes it out of the node's
 * queues too (lib/core/lua/release_queued.lua), as late or as often. */
#ifndef REDLOCK_RELQ_H
#define REDLOCK_RELQ_H

#include <stdint.h>

#include "common.h"
#include "io.h"

#define REDLOCK__RELQ_MAX 1024 /* kept releases per node */

typedef struct redlock__relq_entry redlock__relq_entry;

struct redlock__relq_entry {
    redlock__req req; /* its cmd points at the copy below; cb and the rest are the node's */
    redlock__relq_entry *next;
    void *owner;         /* the node that sends it */
    uint64_t expires_us; /* the key is gone by then: sending it later is pointless */
    /* A release that timed out waits for its late answer: it is the reply_seq-th reply the
     * connection skips (node.c); 0 otherwise. */
    uint64_t reply_seq;
    redlock__cmd cmd;
    redlock__cmd_place place; /* a waiter's that leaves the queues: its id (cmd.place) */
    redlock__span *more; /* a set's other keys (cmd.more), with their bytes; NULL for one key */
    char bytes[];        /* key, token, then the id of a waiter leaving the queues */
};

typedef struct redlock__relq {
    redlock__relq_entry *head, *tail;
    unsigned len;
} redlock__relq;

/* Keep a copy of cmd (a RELEASE) whose key expires at expires_us. Returns 0, 1 when the oldest
 * entry was dropped to make room, or REDLOCK_ENOMEM (nothing kept). */
int redlock__relq_keep(redlock__relq *q, const redlock__alloc *alloc, const redlock__cmd *cmd,
                       uint64_t expires_us, void *owner);
/* Put back an entry taken with pop (its send failed again). Returns 0, or 1 when the oldest entry
 * was dropped to make room. */
int redlock__relq_put(redlock__relq *q, const redlock__alloc *alloc, redlock__relq_entry *e);
/* Take the oldest entry, or NULL. */
redlock__relq_entry *redlock__relq_pop(redlock__relq *q);
void redlock__relq_entry_free(const redlock__alloc *alloc, redlock__relq_entry *e);
/* Free every entry. */
void redlock__relq_clear(redlock__relq *q, const redlock__alloc *alloc);

#endif
