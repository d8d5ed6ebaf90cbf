/* SPDX-License-Identifier: MIT */
/* kept.h - which nodes of a held lock vouch for its continuity (kept.c; docs/safety.md, "A hold
 * is continuous while a quorum kept it"). Below the operations: rounds report their answers
 * here, the extend and release decisions read it, recheck.c reports what it finds. */
#ifndef REDLOCK_KEPT_H
#define REDLOCK_KEPT_H

#include <stdbool.h>
#include <stdint.h>

#include "quorum.h"

/* One lock's nodes (bit i: node i). kept: the key is known to have held the token without a
 * break since before a moment the hold was proven continuous; fresh: the node holds the token
 * (it said so) in a key that may have been set later, so it vouches for no earlier moment;
 * pending: kept nodes that did not renew the key in the last won extend, whose keys may end at
 * pending_until_us (the deadline before it). fresh_since_us: when the newest fresh key was
 * known to be there. */
typedef struct redlock__kept {
    uint64_t kept;
    uint64_t fresh;
    uint64_t pending;
    uint64_t pending_until_us;
    uint64_t fresh_since_us;
} redlock__kept;

struct redlock_lock;
struct redlock_client;

/* A round that made lock held was won (an acquire or its commit, by votes or grants; the first
 * extend of an attached lock): its yes votes so far, less those of nodes that reached a new
 * server since it began, are the kept nodes. Returns whether they are a quorum (if not, a yes was
 * an old server's, and fewer than a quorum may hold the keys). */
bool redlock__kept_won(struct redlock_lock *lock, const redlock_round *q);
/* Node i holds the lock's token in a key set at some moment up to now_us: fresh, unless kept. */
void redlock__kept_fresh(struct redlock_lock *lock, unsigned i, uint64_t now_us);
/* Node i no longer keeps the token, or may not (a new server, a "no", a key a retake set anew,
 * a retake whose outcome is unknown). Its answers until now still count (they show its server
 * held the key then; a key lost without a restart is taken to be lost after them). Returns
 * whether the hold had a gap from now on (fewer than a quorum may have kept the token): then
 * lock->gap and lapsed are set, and stay. */
bool redlock__kept_lose(struct redlock_lock *lock, unsigned i, uint64_t now_us);
/* The kept nodes now: the fresh ones join them first if a quorum of the kept nodes (not pending)
 * answered requests sent after fresh_since_us (they held the key after every fresh key was set,
 * so those were set inside a continuous hold). */
uint64_t redlock__kept_now(struct redlock_lock *lock);
/* An extend of the lock was proven continuous (redlock__continuity) by the nodes in renewed:
 * kept nodes that did not renew it in the extend before either leave, the others that did not
 * renew it yet are pending until prev_deadline_us. */
void redlock__kept_proven(struct redlock_lock *lock, uint64_t renewed, uint64_t prev_deadline_us);
/* A renewal of node i (the key held the token) after its extend was decided. */
void redlock__kept_renewed(struct redlock_lock *lock, unsigned i, uint64_t now_us);

#endif
