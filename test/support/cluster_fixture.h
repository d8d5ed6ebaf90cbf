/* SPDX-License-Identifier: MIT */
/* Integration-test fixture for Redis Cluster: real clusters formed from redis-server processes
 * that the fixture starts itself (fixture.h), on loopback, with blocking hiredis connections
 * only (no redis-cli).
 *
 * Node i of a cluster is a one-server fixture_cluster of its own (rc->nodes[i]): its own temp
 * dir (which holds its cluster config file, kept across a restart), its own claimed data port
 * and a second claimed port for its cluster bus ("cluster-port"), so several clusters side by
 * side never share a port, a file or a node. Because every node is an ordinary fixture cluster,
 * fixture_stop_all() (h_teardown) and the fixture's atexit handler stop cluster nodes too: a
 * failed check leaves no process behind. Nodes run without persistence, with
 * cluster-node-timeout 2000 ms and cluster-require-full-coverage no (so the other masters keep
 * serving while one is stopped); extra_conf may override any of it.
 *
 * Layout after fixture_cluster_form(): nodes 0..masters-1 are the masters, master m owning the
 * m-th of `masters` even ranges of the 16384 slots; the replicas of master m are the nodes
 * masters + m * replicas_per_master + r. Roles change with a failover; the fixture asks the
 * servers whenever it needs to know who is master now.
 *
 * Every wait is a bounded poll (FIXTURE_CLUSTER_WAIT_MS): only a failing cluster ever waits that
 * long. "Converged" means: every running node says cluster_state:ok; every running node's
 * CLUSTER SHARDS gives the same shards (each slot owned by the same master, each node the same
 * role and master), with every slot owned; every running node is online and every killed node
 * failed in every running node's view (a paused one may be either); every running replica has
 * master_link_status:up; and all running nodes agree on cluster_current_epoch. A node is marked
 * failed only by a majority of the masters, so a cluster with half its masters or more stopped
 * never converges.
 *
 * Same threading rules as fixture.h (one thread, the one that keeps the servers alive).
 * Functions that fail print a line starting with "fixture:" on stderr.
 */
#ifndef REDLOCK_TEST_CLUSTER_FIXTURE_H
#define REDLOCK_TEST_CLUSTER_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>

#include <hiredis/hiredis.h>

#include "fixture.h"

#define FIXTURE_CLUSTER_SLOTS 16384
/* Nodes (masters and replicas) in one cluster. Each node takes one of the fixture's 32 live
 * clusters, so one process runs at most 32 nodes at a time over all its clusters. */
#define FIXTURE_CLUSTER_MAX_NODES 12
/* Upper bound of every wait for the cluster to converge (formation, failover, migration,
 * restart). Formation takes about a second or two on an idle machine. */
#define FIXTURE_CLUSTER_WAIT_MS 30000

typedef struct fixture_redis_cluster {
    unsigned n; /* masters * (1 + replicas_per_master) */
    unsigned masters;
    unsigned replicas_per_master;
    fixture_cluster nodes[FIXTURE_CLUSTER_MAX_NODES]; /* node i is nodes[i].servers[0] */
    int bus_ports[FIXTURE_CLUSTER_MAX_NODES];         /* each node's cluster-port */
    int tls_ports[FIXTURE_CLUSTER_MAX_NODES]; /* each node's tls-port (fixture_cluster_start_tls),
                                                 else 0 */
    char ids[FIXTURE_CLUSTER_MAX_NODES][41];  /* CLUSTER MYID, 40 hex digits */
} fixture_redis_cluster;

/* How far fixture_cluster_migrate_slot goes. */
typedef enum fixture_migrate_mode {
    /* The whole dance: IMPORTING on the target, MIGRATING on the source, MIGRATE of every key
     * of the slot, SETSLOT NODE on the target, the source and every other master, then wait
     * until every node's view has the target owning the slot. */
    FIXTURE_MIGRATE_FULL,
    /* Stop half way: IMPORTING and MIGRATING set and every key of the slot moved to the target,
     * but no SETSLOT NODE. The source then answers -ASK for a key of the slot it lacks, and the
     * target -MOVED (to the source) unless the command follows ASKING. Finish it later with
     * FIXTURE_MIGRATE_FINISH. */
    FIXTURE_MIGRATE_HALF,
    /* Finish a migration left half way: move what keys the source still has, then as FULL. */
    FIXTURE_MIGRATE_FINISH,
} fixture_migrate_mode;

/* Start masters * (1 + replicas_per_master) redis-server processes (1..FIXTURE_CLUSTER_MAX_NODES
 * in all) with cluster-enabled yes, assign the slots evenly to the masters (CLUSTER
 * ADDSLOTSRANGE), introduce every node (CLUSTER MEET), make the replicas replicate their masters
 * (CLUSTER REPLICATE) and wait until the cluster has converged on that layout (see above).
 *
 * rc is caller-owned (about 150 KB: static storage or the heap suit it better than a stack),
 * overwritten entirely, and must stay at the same address until fixture_cluster_stop(). A
 * cluster still running in rc is stopped first. extra_conf (may be NULL) holds redis.conf lines
 * for every node, applied after the fixture's own; it must fit with them in fixture_cluster's
 * 1024 bytes.
 *
 * Returns 0, or -1 with a message on stderr; on failure nothing of rc is left running. */
int fixture_cluster_form(fixture_redis_cluster *rc, unsigned masters, unsigned replicas_per_master,
                         const char *extra_conf);

/* fixture_cluster_form() in two halves, so several clusters form at once: start each with
 * fixture_cluster_start() (everything up to CLUSTER REPLICATE; on failure nothing of rc is left
 * running), then wait for each with fixture_cluster_wait_formed() (which leaves rc running on
 * failure, for the caller's fixture_cluster_stop() or teardown). A node waits about 2 s after
 * it starts before it calls its cluster ok, so clusters formed one after the other pay that
 * once each. Both return 0 or -1. */
int fixture_cluster_start(fixture_redis_cluster *rc, unsigned masters, unsigned replicas_per_master,
                          const char *extra_conf);
int fixture_cluster_wait_formed(fixture_redis_cluster *rc);
/* fixture_cluster_start() with TLS: every node also listens for TLS on a claimed port of its own
 * (rc->tls_ports[i]), with tls_files's redis.conf lines (tls-cert-file, tls-key-file,
 * tls-ca-cert-file, tls-auth-clients; under 400 bytes). The cluster bus and the fixture's own
 * commands stay plain, so CLUSTER SHARDS names both ports ("port" and "tls-port"). */
int fixture_cluster_start_tls(fixture_redis_cluster *rc, unsigned masters,
                              unsigned replicas_per_master, const char *extra_conf,
                              const char *tls_files);

/* Stop every node of rc (as fixture_stop() does) and give back its bus ports (after
 * fixture_stop_all() alone, they stay claimed until the process exits). Safe to call twice,
 * on a failed form, or on a cluster fixture_stop_all() already stopped. */
void fixture_cluster_stop(fixture_redis_cluster *rc);

/* Wait until rc has converged (see above). Returns 0, or -1 after FIXTURE_CLUSTER_WAIT_MS with
 * what still differs on stderr. */
int fixture_cluster_wait_converged(fixture_redis_cluster *rc);

/* "redis://127.0.0.1:PORT" of node i (a seed for a client), pointing into rc; NULL if i is out
 * of range. */
const char *fixture_cluster_url(const fixture_redis_cluster *rc, unsigned i);
/* Node i's data port, or -1 if i is out of range. */
int fixture_cluster_port(const fixture_redis_cluster *rc, unsigned i);

/* As fixture_connect() and fixture_command() on node i (see fixture.h for ownership). */
redisContext *fixture_cluster_connect(fixture_redis_cluster *rc, unsigned i);
redisReply *fixture_cluster_command(fixture_redis_cluster *rc, unsigned i, const char *fmt, ...);

/* SIGKILL node i by pid (fixture_kill). Does not wait for the others to notice: follow with
 * fixture_cluster_wait_converged() to wait until every running node sees it failed (and, if
 * it was a master with a replica, until a replica took over). Returns 0 or -1. */
int fixture_cluster_kill(fixture_redis_cluster *rc, unsigned i);
/* Start node i again on its ports with its cluster config file (so it rejoins with its
 * identity) and an empty data set, then wait until the cluster has converged. Returns 0 or -1. */
int fixture_cluster_restart(fixture_redis_cluster *rc, unsigned i);
/* SIGSTOP / SIGCONT node i (fixture_pause / fixture_resume). Return 0 or -1. */
int fixture_cluster_pause(fixture_redis_cluster *rc, unsigned i);
int fixture_cluster_resume(fixture_redis_cluster *rc, unsigned i);

/* Run CLUSTER FAILOVER [how] on replica `replica` (how: NULL, "FORCE" or "TAKEOVER"; FORCE or
 * TAKEOVER when its master is down) and wait until it is a master in every running node's view
 * and the cluster has converged. Returns 0, or -1 (not a replica, refused, or no convergence). */
int fixture_cluster_failover(fixture_redis_cluster *rc, unsigned replica, const char *how);

/* Move slot from master `from` to master `to` step by step (see fixture_migrate_mode). Returns
 * 0, or -1 with the failing step on stderr. */
int fixture_cluster_migrate_slot(fixture_redis_cluster *rc, unsigned slot, unsigned from,
                                 unsigned to, fixture_migrate_mode mode);

/* The hash slot of key (CLUSTER KEYSLOT, asked of a running node), or -1. */
int fixture_cluster_keyslot(fixture_redis_cluster *rc, const void *key, size_t key_len);
/* The node that serves slot as master in the first running node's CLUSTER SHARDS, or -1. */
int fixture_cluster_slot_owner(fixture_redis_cluster *rc, unsigned slot);
/* The node that serves key's slot as master, or -1. */
int fixture_cluster_key_owner(fixture_redis_cluster *rc, const void *key, size_t key_len);
/* The first node that replicates master in the first running node's view, or -1 (none). */
int fixture_cluster_replica_of(fixture_redis_cluster *rc, unsigned master);
/* The master node i replicates in the first running node's view; i itself if i is a master;
 * -1 on error. */
int fixture_cluster_master_of(fixture_redis_cluster *rc, unsigned i);

#endif /* REDLOCK_TEST_CLUSTER_FIXTURE_H */
