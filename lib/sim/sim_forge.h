/* SPDX-License-Identifier: MIT */
/* sim_forge.h - a hostile node's forged messages, as the simulators model them: the kit's
 * (hostile.c, redlock_sim_node_hostile) and test/sim's (sim_hostile.c). The node publishes, on
 * a channel one of its subscribers carries, a message of a kind drawn at random, made from what
 * it can read in its own keyspace (the waiters' grant records: stamp, node tag, key index,
 * channel, token; their ids):
 *   - a grant "g:<stamp>:<tag>:<j>:<full>:<counter>:<token>" on a waiter's own channel, with
 *     another node's tag, the full ttl or not, and for a fenced waiter any counter (0,
 *     999999999, 1, 7), else none or one;
 *   - a wake-up "w:x" on any channel it carries, "<id>:x" (a queue's), and a token it saw (a
 *     key's). */
#ifndef SIM_FORGE_H
#define SIM_FORGE_H

#include <stddef.h>

#include "sim_db.h"
#include "sim_rng.h"
#include "sim_subs.h"

typedef enum {
    SIM_FORGE_NONE,  /* no subscriber carries a channel of the node: nothing to publish */
    SIM_FORGE_GRANT, /* a forged grant for one of its records */
    SIM_FORGE_WAKE,  /* "w:x" */
    SIM_FORGE_QUEUE, /* "<id>:x" */
    SIM_FORGE_KEY,   /* a token it saw, or "00" */
} sim_forge_kind;

#define SIM_FORGE_MSG_MAX 512

/* One forged message of node (of n_nodes; its keyspace db, the subscriptions subs), drawn from
 * rng: its channel (SIM_CHANNEL_MAX bytes of room) and text (SIM_FORGE_MSG_MAX) into ch and msg,
 * their lengths into *ch_len and *msg_len; its kind (nothing written for SIM_FORGE_NONE). */
sim_forge_kind sim_forge(sim_rng *rng, const sim_db *db, const sim_subs *subs, unsigned node,
                         unsigned n_nodes, char *ch, size_t *ch_len, char *msg, size_t *msg_len);

#endif
