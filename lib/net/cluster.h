/* SPDX-License-Identifier: MIT */
/* cluster.h - a node that is a whole Redis Cluster (a cluster:// or clusters:// URL).
 *
 * To the rounds it is one node: send a request, get one vote. Inside, it keeps the slot map
 * (cluster_map.h), learnt from CLUSTER SHARDS (CLUSTER SLOTS on servers older than 7) asked of
 * the URL's host and its seeds, and one connection (a node.c queue, with its deadlines,
 * handshake, reconnect and TLS) per server it has to talk to, opened on first need. A request
 * goes to the master that owns its key's slot; that master's answer is the vote.
 *
 * - Every key of one request must lie in one slot (a hash tag); a request whose keys do not is
 *   answered ERROR at once, naming the keys' slots.
 * - MOVED: the map takes the new owner at once and the request goes there; a refresh of the
 *   whole map follows (at most one at a time, and not sooner than REFRESH_MIN after the last).
 * - ASK: the request goes once to the named server, preceded by ASKING; the map is unchanged.
 * - TRYAGAIN, CLUSTERDOWN, or a slot the map gives to nobody: the request is sent again after a
 *   short pause while its deadline allows, then votes what the last attempt answered.
 * - A request's deadline is the cluster's timeout from the moment it was sent, whatever the
 *   redirects: at the deadline it votes timeout.
 * - The master's connection being down is the cluster's vote (ERROR, at once); it also asks for
 *   a refresh, so that a failover is seen by the next round.
 * - Before the first map is known requests wait (each within its deadline); when every seed
 *   failed to give one they fail at once, as a plain node that is down does.
 * - The replica wait (the URL's wait_replicas=N) sends WAIT N right behind every write on the
 *   same connection: a yes counts only when N replicas acknowledged it within the deadline. */
#ifndef REDLOCK_CLUSTER_H
#define REDLOCK_CLUSTER_H

#include <stdbool.h>

#include <uv.h>

#include "io.h"
#include "node.h"

typedef struct redlock__cluster redlock__cluster;

/* A cluster for cfg->url (url->cluster set): memory only, nothing started. cfg is copied (its
 * pointers must outlive the cluster); cfg->twin_of is asked about each server the cluster
 * connects to. Returns 0 or REDLOCK_ENOMEM. */
int redlock__cluster_new(uv_loop_t *loop, const redlock__node_config *cfg, redlock__cluster **out);
void redlock__cluster_free_unstarted(redlock__cluster *cl);
/* Start connecting to the first seed and asking for the topology. */
void redlock__cluster_start(redlock__cluster *cl);
/* As redlock__node_send (io.h's contract). */
void redlock__cluster_send(redlock__cluster *cl, redlock__req *req);
/* Complete every request with ERROR "canceled", close every connection and timer, then call cb
 * and free the cluster. */
void redlock__cluster_close(redlock__cluster *cl, void (*cb)(void *data), void *data);

/* Its state and counters as one node: up once it has a map and the last request was answered,
 * down when no seed gave a map, connecting before. */
void redlock__cluster_info(const redlock__cluster *cl, redlock_node_info *out);
/* The name of a connection of this cluster to the server with run_id, other than node; NULL
 * when none (node itself belonging to this cluster: NULL, a cluster's servers are one vote). */
const char *redlock__cluster_twin(const redlock__cluster *cl, const redlock__node *node,
                                  const char *run_id);

/* The deadline its requests get, across their redirects (rto.h, redlock__rto_bound_us). */
uint64_t redlock__cluster_timeout_us(const redlock__cluster *cl);

#endif
