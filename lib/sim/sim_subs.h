/* SPDX-License-Identifier: MIT */
/* sim_subs.h - publish/subscribe as the simulators model it: the kit's fleet (pubsub.c) and
 * test/sim's world (sim_pubsub.c). A server keeps a table of subscriptions, one per subscriber
 * connection and channel (SUBSCRIBE adds, UNSUBSCRIBE or the connection's end removes, PUBSUB
 * NUMSUB counts, PUBLISH walks them); a client keeps, per node, the state of its subscriber
 * connection. The table keeps its order the same for one seed (a removal moves the last entry
 * into the hole), so a PUBLISH reaches its subscribers, and draws their delays, in one order. */
#ifndef SIM_SUBS_H
#define SIM_SUBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest channel the simulators carry (a lock key's name, or a waiter's channel). */
#define SIM_CHANNEL_MAX 256

/* One client's subscriber connection to one node, as the client sees it. */
typedef struct sim_sub {
    bool connecting, up;
    uint64_t epoch;                          /* a message of another epoch is discarded */
    uint64_t last_to_server, last_to_client; /* FIFO: when its last message lands */
    /* The server it is connected to: a node, a cluster's shard (-1: none), its run_id (what
     * INFO server told it). */
    unsigned server_node;
    int server_shard;
    uint64_t server_gen;
} sim_sub;

/* A server's subscription: the subscriber connection of client proc to node sub_node (epoch),
 * subscribed to channel on the server (server_node, server_shard, server_gen). */
typedef struct sim_subscription {
    unsigned proc, sub_node;
    uint64_t epoch;
    unsigned server_node;
    int server_shard;
    uint64_t server_gen;
    size_t channel_len;
    char channel[SIM_CHANNEL_MAX];
} sim_subscription;

/* Every server's subscriptions. */
typedef struct sim_subs {
    sim_subscription *v;
    size_t n, cap;
} sim_subs;

bool sim_subs_same_channel(const sim_subscription *s, const char *ch, size_t len);

/* Client proc's subscriber of node (sub, its server) subscribes to ch on its server. Returns 0
 * (added, or it was already), -1 without memory, -2 for a channel over SIM_CHANNEL_MAX. */
int sim_subs_add(sim_subs *t, unsigned proc, unsigned node, const sim_sub *sub, const char *ch,
                 size_t len);

/* Forget the subscriptions that match: of client proc's subscriber of node (node < 0: any),
 * channel ch (NULL: any). */
void sim_subs_remove(sim_subs *t, unsigned proc, int node, const char *ch, size_t len);

/* PUBSUB NUMSUB ch on a server (node, shard or -1, run_id gen): the connections it holds. */
long long sim_subs_numsub(const sim_subs *t, unsigned node, int shard, uint64_t gen, const char *ch,
                          size_t len);

/* A server died: forget its subscriptions (shard -1: every one of node's). */
void sim_subs_server_gone(sim_subs *t, unsigned node, int shard);

void sim_subs_free(sim_subs *t);

#endif
