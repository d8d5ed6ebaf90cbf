/* SPDX-License-Identifier: MIT */
/* recheck.h - the check of every held lock after a node came back as a new server, or answered
 * as if it had lost its keys (recheck.c). Above the auto-extension; it hears of a new server from
 * the io and of a node that no longer keeps a token from the rounds through the callbacks it sets
 * on the client when the client is made (api.c). Nothing here is public. */
#ifndef REDLOCK_RECHECK_H
#define REDLOCK_RECHECK_H

#include "client.h"

/* What the recheck keeps on each lock (lock->check). */
typedef struct redlock__lock_check {
    uint64_t started_us; /* start of a check in flight, 0: none */
} redlock__lock_check;

/* Check c's held locks from now on: the recheck sets its callbacks on c's io (on_node_changed)
 * and on c (on_kept_lost).
 *
 * When a node reaches a new server, at once that node no longer counts among the nodes that kept
 * any lock's token, and a held lock that has fewer than a quorum left had a gap (lock.h); on the
 * next loop turn such a lock is reported lost, and every other lock the client holds is checked -
 * an extension for an auto-extended one, else an inspect round - and one a quorum no longer holds
 * is reported lost.
 *
 * When a round's answer shows that a node no longer keeps a lock's token: if it said "no" where
 * it was kept, as if it had lost its keys, every held lock is checked as above; if the hold had a
 * gap, it is reported lost on the next loop turn. */
void redlock__recheck_start(redlock_client *c);

#endif
