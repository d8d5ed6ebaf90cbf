/* SPDX-License-Identifier: MIT */
/* sim_internal.h - the simulation's world, shared by sim_world.c (event loop, faults, checker),
 * sim_proc.c (the client processes' program) and sim_io.c (nodes, network and the io.h
 * implementation). */
#ifndef SIM_INTERNAL_H
#define SIM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client.h"
#include "io.h"
#include "sim.h"
#include "sim_check.h"
#include "sim_fence.h"

#define SIM_PPM 1000000u
/* A process retries the connection to a node that is down after this much (true time). */
#define SIM_RETRY_MIN_US 5000
#define SIM_RETRY_MAX_US 30000

/* xoshiro256** seeded through splitmix64. */
typedef struct sim_rng {
    uint64_t s[4];
} sim_rng;

void sim_rng_seed(sim_rng *r, uint64_t seed);
uint64_t sim_rng_next(sim_rng *r);
/* Uniform in [lo, hi] (lo when hi <= lo). */
uint64_t sim_rng_range(sim_rng *r, uint64_t lo, uint64_t hi);
bool sim_rng_chance(sim_rng *r, double p);

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
} sim_ev_kind;

/* A message on a connection: a request (command copied, the round may be gone when it lands)
 * or a reply. */
typedef struct sim_msg {
    uint64_t req_id;
    uint64_t epoch; /* the connection it travels on */
    redlock__cmd_kind kind;
    bool retake;
    uint64_t ttl_ms;
    size_t key_len, token_len;
    char key[SIM_KEY_MAX];
    char token[SIM_VALUE_MAX];
    /* reply */
    redlock_vote vote;
    bool has_value;
    int64_t pttl_ms;
    uint64_t fence; /* request: the fence to commit or restore; reply: the counter read */
} sim_msg;

typedef struct sim_event {
    uint64_t at, seq;
    sim_ev_kind kind;
    unsigned proc, node;
    uint64_t arg;
    sim_msg *msg;
    bool deferred; /* held back by a pause of its process: it runs later than it was due */
} sim_event;

typedef struct sim_key {
    size_t key_len, value_len;
    char key[SIM_KEY_MAX];
    char value[SIM_VALUE_MAX];
    uint64_t expire_at; /* on the node's clock */
    size_t presence;    /* its record in sim_world.presence */
} sim_key;

typedef struct sim_node {
    bool up;
    uint64_t run_id; /* new at every restart, as a Redis server's */
    uint64_t rate_ppm, offset_us;
    unsigned n_keys;
    sim_key keys[SIM_MAX_RESOURCES * 2];
    sim_counters counters; /* fence counters (sim_fence.h) */
} sim_node;

/* A request the io owes a completion. */
typedef struct sim_pending {
    struct sim_pending *next;
    uint64_t id;
    redlock__req *req;
} sim_pending;

/* One process's connection to one node. epoch changes whenever the TCP connection dies or is
 * re-made; a message of another epoch is discarded where it lands. */
typedef struct sim_conn {
    bool alive;     /* the TCP connection exists */
    bool client_up; /* the process believes it does (else sends fail fast) */
    uint64_t epoch;
    uint64_t crash_epoch; /* messages of this epoch or older died with their node */
    uint64_t run_id;      /* of the server it last connected to (0: none yet) */
    /* When the process last heard from the node, and when it last went from owing nothing to
     * owing a reply, on its clock; replies owed to requests that timed out (lib/node.c's
     * last_reply_us, owing_since_us, skip_replies). */
    uint64_t last_reply_local, owing_since_local;
    unsigned skip;
    uint64_t last_to_node, last_to_client; /* FIFO: no message overtakes an earlier one */
    uint64_t partition_until;
    sim_pending *head, *tail;
} sim_conn;

typedef struct sim_world sim_world;
typedef struct sim_proc sim_proc;

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
};

struct sim_world {
    sim_config cfg;
    sim_result *res;
    sim_rng rng;  /* network and faults */
    uint64_t now; /* true time */
    uint64_t next_seq;
    uint64_t next_req_id;
    sim_event *heap;
    size_t heap_len, heap_cap;
    sim_node nodes[SIM_MAX_NODES];
    sim_proc procs[SIM_MAX_PROCS];
    sim_hold *holds; /* every hold, for the checker (sim_check.h) */
    size_t n_holds, cap_holds;
    sim_auto_hold *auto_holds;
    sim_presence *presence; /* every key every node ever held (sim_check.h) */
    size_t n_presence, cap_presence;
    sim_downtime *downtimes; /* every time a node was down */
    size_t n_downtimes, cap_downtimes;
    bool ev_deferred; /* the event being handled was held back by a pause */
    bool oom;
    struct sim_fence_world *fence; /* sim_fence.c: grants, writes and the store */
};

/* The event queue (sim_world.c). seq 0: a new sequence number. */
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

/* sim_io.c */
/* The "no gap" property: lock (p's, on p's resource) was reported held from true time from to
 * to (a release with status 0, a won extend: what names it). Records a gap if at some moment in
 * [from, to) another holder could have been granted: a quorum of nodes was up without its
 * token. (A node that is down grants nobody, which is why a delayed restart keeps the lock.) */
void sim_check_no_gap(sim_world *w, sim_proc *p, redlock_lock *lock, uint64_t from, uint64_t to,
                      const char *what);
/* p stops working its hold at end (true time): if a quorum forgot it before (sim.h, forgotten),
 * count it, and how long after that the library reported it lost (p->reported) or the holder
 * worked on. */
void sim_note_forgotten(sim_world *w, sim_proc *p, uint64_t end);
int sim_io_factory(void *ctx, const redlock__node_config *cfgs, unsigned n,
                   const redlock__alloc *alloc, redlock__io **out);
/* Node node is down from now on (a crash, or dead from the start). */
void sim_node_down(sim_world *w, unsigned node);
/* The true time from which a quorum of the nodes that are up will no longer hold key as they
 * hold it now (each node's key expires on its own clock; a node without it is free now), or
 * SIM_NEVER if fewer than a quorum are up. */
uint64_t sim_quorum_free_at(sim_world *w, const char *key, size_t key_len);
/* Handle the network, node and connection events. */
void sim_io_event(sim_world *w, const sim_event *ev);
/* Free whatever the io still holds at the end of a run (after the contract check). */
void sim_io_teardown(sim_world *w);

#endif
