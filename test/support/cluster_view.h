/* SPDX-License-Identifier: MIT */
/* cluster_view.h - internal to the cluster fixture (cluster_fixture.c): one node's view of its
 * cluster (its CLUSTER SHARDS, by node index), and the bounded wait until every node's view
 * agrees (what cluster_fixture.h calls converged). */
#ifndef REDLOCK_TEST_CLUSTER_VIEW_H
#define REDLOCK_TEST_CLUSTER_VIEW_H

#include <stdbool.h>
#include <stddef.h>

#include "cluster_fixture.h"

/* One node's CLUSTER SHARDS, by node index. Zeroed before filling, so views compare with
 * memcmp. */
typedef struct cluster_view {
    signed char slot_owner[FIXTURE_CLUSTER_SLOTS];    /* master node, -1 none */
    signed char master_of[FIXTURE_CLUSTER_MAX_NODES]; /* itself for a master, -1 none/unlisted */
    bool listed[FIXTURE_CLUSTER_MAX_NODES];
    bool failed[FIXTURE_CLUSTER_MAX_NODES]; /* health "fail" */
} cluster_view;

/* Node i is running and answering: started, not killed, not paused. */
bool cluster_view_node_up(const fixture_redis_cluster *rc, unsigned i);
/* The first such node, or -1 with a message. */
int cluster_view_first_up(const fixture_redis_cluster *rc);

/* Node i's CLUSTER SHARDS into v. Returns 0, or -1 with the reason in why. */
int cluster_view_read(fixture_redis_cluster *rc, unsigned i, cluster_view *v, char *why,
                      size_t why_len);
/* The first running node's view, on the heap (the caller frees it), or NULL with a message. */
cluster_view *cluster_view_current(fixture_redis_cluster *rc);

/* Whether field of node i's answer to command (INFO-style, e.g. "INFO replication") is value. */
bool cluster_view_field_is(fixture_redis_cluster *rc, unsigned i, const char *command,
                           const char *field, const char *value);

/* Poll until the cluster has converged and (expect != NULL) the agreed view has expect's slot
 * owners and masters; at most timeout_ms. Returns 0, or -1 with what still differs on stderr,
 * prefixed by what. */
int cluster_view_wait(fixture_redis_cluster *rc, const cluster_view *expect, long long timeout_ms,
                      const char *what);

#endif /* REDLOCK_TEST_CLUSTER_VIEW_H */
