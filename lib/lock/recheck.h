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
/* A round's answer showed node no longer keeps lock's token (the hooks' kept_lost, client.h):
 * said_no, it said "no" where it was kept, as if it had lost its keys: every held lock is
 * checked as redlock__recheck_node does; gap, the hold had a gap: on the next loop turn it is
 * reported lost. */
void redlock__recheck_kept_lost(redlock_lock *lock, unsigned node, bool said_no, bool gap);

#endif
