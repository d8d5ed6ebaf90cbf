/* SPDX-License-Identifier: MIT */
/* sim_internal.h - the simulation's world, shared by sim_world.c (event loop, faults, checker),
 * sim_proc.c (the client processes' program) and sim_io.c (nodes, network and the io.h
 * implementation). */
#ifndef SIM_INTERNAL_H
#define SIM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chanset.h"
#include "client.h"
#include "io.h"
#include "lock.h"
#include "sim.h"
#include "sim_check.h"
#include "sim_db.h"
#include "sim_fence.h"
#include "sim_link.h"
#include "sim_nodelog.h"
#include "sim_queue.h"
#include "sim_rng.h"
#include "sim_scripts.h"
#include "sim_subs.h"

#define SIM_PPM 1000000u

typedef enum {
    EV_NODE_RECV,   /* a request reaches its node */
    EV_CLIENT_RECV, /* a reply reaches its process */
    EV_REQ_TIMEOUT, /* a request's deadline on its process's clock */
    EV_CONN_LOST,   /* a process notices its connection to a node died */
    EV_CONN_RETRY,  /* a process tries to reconnect */
    EV_WAKE,        /* the client's timer (io wake_at) */
    EV_IO_CLOSED,   /* the io finishes closing */
    EV_PROC_STEP,   /* the process's own program: acquire, extend, done */
    EV_NODE_CRASH,
    EV_NODE_UP,
    EV_PARTITION,
    EV_PAUSE,
    EV_CLOCK_JUMP,
    EV_STORE,      /* a write reaches the fenced store (sim_fence.c) */
    EV_NEW_SERVER, /* a process reconnected to a node that restarted (io.h's on_node_changed) */
    EV_VANISH,     /* a process vanishes (sim_config.vanish_prob) */
    /* Subscriber connections (sim_pubsub.c) */
    EV_SUB_CONNECT, /* a process's subscriber connects (again) to its node */
    EV_SUB_CMD,     /* a SUBSCRIBE (arg 1) or UNSUBSCRIBE (arg 0) reaches the server */
    EV_SUB_RECV,    /* a published message reaches the process */
    EV_SUB_DROP,    /* a subscriber connection drops (a fault) */
    /* Redis Cluster nodes (sim_cluster.c) */
    EV_REPLICATE, /* a replica has its master's writes up to a snapshot */
    EV_FAILOVER,  /* a shard's replica takes over its master */
    EV_RESYNC,    /* a shard that failed over has a replica again */
    EV_MIGRATE,   /* a slot migration starts (arg 0) or moves its next key (arg 1) */
    EV_FORGE,     /* the hostile node publishes a forged message (sim_hostile.c) */
} sim_ev_kind;

/* A message on a connection: a request (the command as the library encoded it: the round may be
 * gone when it lands) or its reply; or a subscriber's SUBSCRIBE or published message. */
typedef struct sim_msg {
    uint64_t req_id;
    uint64_t epoch; /* the connection it travels on */
    redlock__cmd_kind kind;
    bool queued;
    unsigned n_keys; /* the lock keys it names (a set's: more than one) */
    char *wire;      /* the request's bytes; a subscriber's channel then message */
    size_t wire_len, channel_len;
    /* A cluster node's routing (sim_cluster.c): the shard it goes to, after ASKING, redirects
     * followed so far, and the request's deadline on its process's clock. */
    unsigned shard;
    bool asking;
    unsigned hops;
    uint64_t deadline_local;
    /* reply */
    sim_reply reply;
    int wait_count;     /* a cluster node's replica wait: what WAIT answered (-1: none) */
    bool mid_migration; /* run by a cluster's master while its slot migrates */
} sim_msg;

sim_msg *sim_msg_new(const char *wire, size_t len);
void sim_msg_free(sim_msg *m);

typedef struct sim_world sim_world;
typedef struct sim_proc sim_proc;
struct sim_cluster;

/* A node: one Redis server, or a Redis Cluster (sim_cluster.c) that the client sees as one. A
 * lock key's presence record (sim_check.h) is kept in its sim_db_key's mark. */
typedef struct sim_node {
    sim_world *w;
    unsigned index;
    bool up;
    uint64_t run_id; /* new at every restart, as a Redis server's */
    uint64_t rate_ppm, offset_us;
    sim_db db;                   /* a plain node's keys */
    bool refuse_pubsub;          /* its ACL refuses PUBSUB NUMSUB and PUBLISH */
    struct sim_cluster *cluster; /* a Redis Cluster's shards, or NULL */
} sim_node;

/* One process's connection to one node: the link (lib/sim/sim_link.h), and what the process's
 * io keeps of it. */
typedef struct sim_conn {
    sim_link link;
    /* When the process last heard from the node, and when it last went from owing nothing to
     * owing a reply, on its clock; replies owed to requests that timed out (lib/net/node.c's
     * last_reply_us, owing_since_us, skip_replies). */
    uint64_t last_reply_local, owing_since_local;
    unsigned skip;
} sim_conn;

typedef struct sim_io {
    redlock__io base;
    sim_proc *proc;
    uint64_t timeout_us[SIM_MAX_NODES];
    bool closing, closed;
} sim_io;

typedef enum { PROC_IDLE, PROC_ACQUIRING, PROC_HOLDING, PROC_RELEASING, PROC_DONE } sim_proc_state;

/* How the holder ended auto-extension itself (the lost callback may not come after any). */
typedef enum {
    AUTO_RUNNING = 0,
    AUTO_RELEASED, /* redlock_release */
    AUTO_CLOSED,   /* redlock_client_close while holding: the lost callback says ECANCELED */
    AUTO_STOPPED,  /* redlock_auto_extend_stop, then work on before the deadline, release */
    AUTO_FREED,    /* redlock_lock_free without a release: the keys live out their ttl */
} sim_auto_end;

/* One auto-extended hold, as its process sees it; the lost callback's data. Kept until the end
 * of the run, so a callback that comes when it should not still lands in valid memory. */
typedef struct sim_auto_hold {
    struct sim_auto_hold *next; /* sim_world.auto_holds */
    sim_proc *proc;
    redlock_auto_opts opts;
    bool via_opts;      /* started by redlock_acquire's option, else by redlock_auto_extend */
    uint64_t margin_us; /* lost_margin as the API defines it */
    bool started;       /* handed to the process with auto-extension on */
    bool expired;       /* the holder saw the deadline pass: the lost callback is owed */
    sim_auto_end ended; /* what the holder did to end it, if it did */
    unsigned lost;      /* lost callbacks seen */
    uint64_t seen_deadline_us, renewed_us; /* the deadline last seen, and when it changed */
} sim_auto_hold;

struct sim_proc {
    sim_world *w;
    unsigned id;
    sim_io io;
    redlock_client *client;
    uint64_t rate_ppm, offset_us;
    uint64_t paused_until;
    uint64_t wake_gen;
    sim_rng rng;
    sim_conn conns[SIM_MAX_NODES];
    uint64_t sent, completed;

    sim_proc_state state;
    unsigned cycles_done;
    unsigned resource;
    redlock_lock *lock;
    uint64_t hold_gen;
    bool using_lock;      /* inside [acquired, min(done, deadline)) */
    uint64_t hold_start;  /* true time */
    uint64_t granted_at;  /* true time the acquire callback handed the current lock out */
    uint64_t release_at;  /* true time redlock_release was called on it */
    uint64_t deadline_us; /* the lock's deadline on this process's clock, as last seen */
    uint64_t lost_at;     /* true time of the current hold's lost callback, or SIM_NEVER */
    bool reported;        /* the library said the current hold is lost, and its work ended */
    sim_auto_hold *autoh; /* the current hold's auto-extension, or NULL */
    bool client_closed;
    /* The token of the lock last released or lost: no extension may carry it any more. */
    size_t dead_token_len;
    char dead_token[SIM_VALUE_MAX];

    /* The current acquire and hold: its resources (resource is res[0]), fenced, waiting. */
    unsigned n_res, res[SIM_MAX_RESOURCES];
    bool fenced, queued;
    uint64_t acquire_at; /* true time of the acquire call */
    /* A process that vanished handles nothing from then on (its events are dropped); its
     * subscribers stay counted by their servers. It is closed after the run. */
    bool vanished;
    uint64_t vanished_at;
    /* Its waiter's tokens (the last few), and per node the server time (ms) of its last attempt
     * that queued there and the place ttl it gave: what its place deadline there is. */
    char tokens[8][2 * REDLOCK__TOKEN_BYTES + 1];
    unsigned n_tokens;
    uint64_t queued_ms[SIM_MAX_NODES], place_ttl_ms[SIM_MAX_NODES];
    /* Its current waiter: its place (0: none seen yet), and per node (true time, 0: not yet)
     * when an attempt first queued there, and when its keys were last taken there for it. */
    uint64_t place_us;
    uint64_t first_queued_at[SIM_MAX_NODES], took_at[SIM_MAX_NODES];
    /* Subscribers: the channels its io watches, and a connection per node (lib/sim/sim_subs.h). */
    redlock__chanset chans;
    sim_sub subs[SIM_MAX_NODES];
    int64_t wall_offset_us; /* its wall clock (places) against true time */
    /* Its view of each cluster node's slots: the shard it sends each resource's keys to. */
    unsigned char view[SIM_MAX_NODES][SIM_MAX_RESOURCES];
};

struct sim_world {
    sim_config cfg;
    sim_result *res;
    sim_rng rng;  /* network and faults */
    uint64_t now; /* true time */
    uint64_t next_req_id;
    sim_queue queue; /* the events (sim_queue.h) */
    sim_node nodes[SIM_MAX_NODES];
    sim_proc procs[SIM_MAX_PROCS];
    sim_hold *holds; /* every hold, for the checker (sim_check.h) */
    size_t n_holds, cap_holds;
    sim_auto_hold *auto_holds;
    sim_nodelog log;  /* every key every node ever held, every time a node was down */
    bool ev_deferred; /* the event being handled was held back by a pause */
    bool oom;
    struct sim_fence_world *fence; /* sim_fence.c: grants, writes and the store */
    sim_subs subs;        /* every server's subscriptions (lib/sim/sim_subs.h; sim_pubsub.c) */
    redlock__alloc alloc; /* the encodings of the commands */
    /* A release is being run on a node (sim_node.c): the keys it sets are grants; and whether
     * the last command run granted any. */
    bool exec_release, exec_granted;
};

/* Queue an event at at (now at the earliest) on the world's queue (sim_queue.h); msg is freed
 * without memory. */
void sim_push(sim_world *w, uint64_t at, sim_ev_kind kind, unsigned proc, unsigned node,
              uint64_t arg, sim_msg *msg);
void sim_hash(sim_world *w, uint64_t x);
void sim_trace(sim_world *w, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Record a broken contract (first one wins). */
void sim_contract(sim_world *w, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Record a broken promise of the auto-extension API (first one wins). */
void sim_promise(sim_world *w, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Clocks: a process's or node's reading at true time t; the first true time its clock reads at
 * least local (the raw one may be in the past; sim_clock_true is never before w->now). */
uint64_t sim_clock(uint64_t rate_ppm, uint64_t offset_us, uint64_t t);
uint64_t sim_clock_true_raw(uint64_t rate_ppm, uint64_t offset_us, uint64_t local);
uint64_t sim_clock_true(sim_world *w, uint64_t rate_ppm, uint64_t offset_us, uint64_t local);
uint64_t sim_proc_now(sim_proc *p);

/* For the checker (sim_world.c): p stopped using its lock now; it held it from p->hold_start,
 * up to deadline (true time) at the latest. */
void sim_record_hold(sim_world *w, sim_proc *p, uint64_t deadline);

/* sim_proc.c: the processes' program. start schedules the first acquire; step runs an
 * EV_PROC_STEP; observe runs after each of the process's events (it notes when the library
 * moved the lock's deadline); finish checks, at the end of the run, that nothing is owed. */
void sim_proc_start(sim_proc *p);
void sim_proc_step(sim_proc *p, uint64_t arg);
void sim_proc_observe(sim_proc *p);
void sim_proc_finish(sim_proc *p);
/* p vanishes now (EV_VANISH); after the run, its client is closed. */
void sim_proc_vanish(sim_proc *p);
void sim_proc_close_vanished(sim_proc *p);

/* sim_node.c: the servers, their keys' record, and the properties read from it. */
/* The name of resource r's key ("res-N"; "{res-N}" in a world with cluster nodes, whose keys
 * need a hash tag): its length. */
size_t sim_resource_key(const sim_world *w, unsigned r, char *buf, size_t cap);
/* Set up node i (its keyspace and the observer of its keys), or tear it down. */
int sim_node_init(sim_world *w, unsigned i);
void sim_node_free(sim_world *w, unsigned i);
uint64_t sim_node_now(const sim_world *w, const sim_node *n);
/* Run m's request (the library's encoding) on db, node's keyspace (a cluster's master: shard
 * >= 0, whose scripts may not touch what refuse says; gen: the server's run_id, which its
 * subscribers name), for process p; the reply goes into m.
 * Notes what the properties and the coverage need. */
void sim_node_exec(sim_world *w, sim_proc *p, unsigned node, sim_db *db, int shard, uint64_t gen,
                   const char *(*refuse)(void *ctx, const char *key, size_t len), void *refuse_ctx,
                   sim_msg *m);
/* db becomes a node's keys now (open a record for each lock key), or stops being them. */
void sim_node_db_opened(sim_world *w, sim_node *n, sim_db *db);
void sim_node_db_closed(sim_world *w, sim_db *db);
/* The "no gap" property: lock (p's, on p's resources) was reported held from true time from to
 * to (a release with status 0, a won extend, the acquire itself: what names it). Records a gap if
 * at some moment in [from, to) another holder could have been granted one of its keys: a quorum
 * of nodes was up without its token there. (A node that is down grants nobody, which is why a
 * delayed restart keeps the lock.) */
void sim_check_no_gap(sim_world *w, sim_proc *p, redlock_lock *lock, uint64_t from, uint64_t to,
                      const char *what);
/* p was handed lock now: a quorum of the nodes must hold each of its keys with its token (a node
 * that is down counts: it grants nobody), a cluster node with the replica wait only when its
 * replica has the key too (a failover keeps only that). Counted in gap_grants otherwise. */
void sim_check_handed_out(sim_world *w, sim_proc *p, redlock_lock *lock);
/* p stops working its hold at end (true time): if a quorum forgot it before (sim.h, forgotten),
 * count it, and how long after that the library reported it lost (p->reported) or the holder
 * worked on. */
void sim_note_forgotten(sim_world *w, sim_proc *p, uint64_t end);
/* Node node is down from now on (a crash, or dead from the start). */
void sim_node_down(sim_world *w, unsigned node);
/* The true time from which a quorum of the nodes that are up will no longer hold key as they
 * hold it now (each node's key expires on its own clock; a node without it is free now), or
 * SIM_NEVER if fewer than a quorum are up. */
uint64_t sim_quorum_free_at(sim_world *w, const char *key, size_t key_len);
/* The node events: crash, back up, clock jump. */
void sim_node_event(sim_world *w, const sim_event *ev);

/* sim_io.c: the network, the connections and the io table. */
int sim_io_factory(void *ctx, const redlock__node_config *cfgs, unsigned n,
                   const redlock__alloc *alloc, redlock__io **out);
/* A message's delay on the network (with a stall now and then). */
uint64_t sim_net_delay(sim_world *w);
/* m (a reply) leaves node for p at true time at (>= now), behind what is already on the way. */
void sim_net_reply(sim_world *w, sim_proc *p, unsigned node, sim_msg *m, uint64_t at);
/* m (a request) goes to node again at true time at: a cluster's redirect or retry, sent on by
 * p's cluster connection (lost like any message if the connection is cut or gone). */
void sim_net_resend(sim_world *w, sim_proc *p, unsigned node, sim_msg *m, uint64_t at);
/* p vanished and is closed after the run: its connections are gone, what it waited for fails. */
void sim_io_vanished(sim_proc *p);
/* Every process's connection to node dies with it now (a crash, a cluster's failover). */
void sim_conns_die(sim_world *w, unsigned node);
/* The run_id the processes see of node (a cluster's: its failovers). */
uint64_t sim_node_run_id(const sim_world *w, unsigned node);
/* Handle the network and connection events. */
void sim_io_event(sim_world *w, const sim_event *ev);
/* Free whatever the io still holds at the end of a run (after the contract check). */
void sim_io_teardown(sim_world *w);

/* sim_pubsub.c: subscriber connections and the servers' subscriptions. */
/* p's io watches channel ch from now (on) or no more: tell each node's subscriber. */
void sim_pubsub_changed(sim_proc *p, const char *ch, size_t len, bool on);
/* PUBSUB NUMSUB ch on a server (node, a cluster's shard or -1, its run_id): -1 when refused. */
long long sim_pubsub_numsub(sim_world *w, unsigned node, int shard, uint64_t gen, const char *ch,
                            size_t len);
/* PUBLISH on node (to every subscriber of every server of a cluster): receivers, -1 refused. */
long long sim_pubsub_publish(sim_world *w, unsigned node, const char *ch, size_t len,
                             const char *msg, size_t msg_len);
/* A server died (a crash; a cluster's failover): its subscriptions go, its subscribers'
 * connections drop and reconnect. shard -1: a plain node. */
void sim_pubsub_server_gone(sim_world *w, unsigned node, int shard);
/* p's io closes: its subscriber connections close. */
void sim_pubsub_close(sim_proc *p);
void sim_pubsub_schedule(sim_world *w);
void sim_pubsub_event(sim_world *w, const sim_event *ev);
void sim_pubsub_free(sim_world *w);

/* sim_hostile.c: the hostile node's forgeries (cfg.forges). */
void sim_hostile_schedule(sim_world *w);
void sim_hostile_event(sim_world *w, const sim_event *ev);
/* Whether node is the hostile one. */
bool sim_hostile_node(const sim_world *w, unsigned node);
/* The hostile node ran m as its scripts say: now and then it answers with an error instead (a
 * vote of its own lost). Never a yes it did not give: one node that says yes to two clients
 * makes two quorums of 2Q - N = 1 shared node (odd N) both hold, as a node that forgets would
 * (docs/safety.md, its assumptions), which no client can tell. */
void sim_hostile_reply(sim_world *w, unsigned node, sim_msg *m);

/* sim_cluster.c: the nodes that are Redis Clusters. */
int sim_cluster_new(sim_world *w, unsigned node);
void sim_cluster_free(sim_node *n);
/* m, a request of p, reaches the cluster node (routed by p's view of its slots). */
void sim_cluster_recv(sim_world *w, sim_proc *p, unsigned node, sim_msg *m);
/* The shard that owns resource r's slot now. */
unsigned sim_cluster_owner(const sim_node *n, unsigned r);
/* Whether a master holds key with value (and, replicated, its replica too, if it has one and
 * the key is not one a migration moved: a failover keeps it). */
bool sim_cluster_holds(sim_node *n, const char *key, size_t len, const char *value,
                       size_t value_len, bool replicated, uint64_t now_us);
/* key on whichever master holds it (NULL: none). */
const sim_db_key *sim_cluster_find(sim_node *n, const char *key, size_t len, uint64_t now_us);
/* The cluster's run_id as its clients see it (changes with each failover), and the server a
 * subscriber connects to (shard 0's master: its run_id in *gen; false while it is down). */
uint64_t sim_cluster_run_id(const sim_node *n);
bool sim_cluster_sub_server(const sim_world *w, const sim_node *n, uint64_t *gen);
void sim_cluster_schedule(sim_world *w);
void sim_cluster_event(sim_world *w, const sim_event *ev);

#endif
