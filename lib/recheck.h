/* SPDX-License-Identifier: MIT */
/* recheck.h - the check of every held lock after a node came back as a new server, or answered
 * as if it had lost its keys (recheck.c). Above the auto-extension; the client core reaches it
 * through its hooks (client.h). Nothing here is public. */
#ifndef REDLOCK_RECHECK_H
#define REDLOCK_RECHECK_H

#include "lock.h"

/* Node node reached a new server (io.h's on_node_changed): at once, node no longer counts among
 * the nodes that kept any lock's token, and a held lock that has fewer than a quorum left had a
 * gap (lock.h); on the next loop turn such a lock is reported lost, and every other lock the
 * client holds is checked - an extension for an auto-extended one, else an inspect round - and
 * one a quorum no longer holds is reported lost. */
void redlock__recheck_node(redlock_client *c, unsigned node);
/* A round of lock was decided (won: it now holds where q's yes votes say, less the nodes that
 * reached a new server since q started): a node that said no where the last won round had its
 * yes answers as if it had lost its keys, and has every held lock checked as
 * redlock__recheck_node does. Returns whether the hold is continuous: a quorum kept the token
 * since its last won round (docs/safety.md), and it never had a gap. */
bool redlock__recheck_votes(redlock_lock *lock, const redlock_round *q, bool won);

#endif
