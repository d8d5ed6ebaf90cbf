/* SPDX-License-Identifier: MIT */
/* fleet.h - the test kit's fleet (<redlock/sim.h>): its nodes, clients, network and event queue
 * (fleet.c), shared with its subscriber connections (pubsub.c), its hostile nodes
 * (hostile.c), its trace (trace.c), the checkers over the user's holds (history.c) and the seed
 * driver (explore.c). */
#ifndef REDLOCK_SIM_FLEET_H
#define REDLOCK_SIM_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kit.h"
#include "redlock/sim.h"
#include "sim_check.h"
#include "sim_db.h"
#include "sim_link.h"
#include "sim_nodelog.h"
#include "sim_queue.h"
#include "sim_rng.h"
#include "sim_scripts.h"
#include "sim_subs.h"

typedef enum {
    KIT_NODE_RECV,    /* a request reaches its node */
    KIT_CLIENT_RECV,  /* a reply reaches its client */
    KIT_REQ_TIMEOUT,  /* a request's deadline */
    KIT_CONN_LOST,    /* a client notices its connection to a node died */
    KIT_CONN_RETRY,   /* a client tries to connect again */
    KIT_NODE_CHANGED, /* a client reconnected to a node that is a new server */
    KIT_WAKE,         /* a client's timer (io wake_at) */
    KIT_IO_CLOSED,    /* a client's io finishes closing */
    KIT_TIMER,        /* the user's timer (redlock_sim_timer) */
    /* Subscriber connections (pubsub.c) */
    KIT_SUB_CONNECT, /* a client's subscriber connects (again) to its node */
    KIT_SUB_CMD,     /* a SUBSCRIBE (arg 1) or UNSUBSCRIBE (arg 0) reaches the node */
    KIT_SUB_RECV,    /* a published message reaches the client */
    KIT_FORGE,       /* a hostile node publishes a forged message (hostile.c) */
} kit_ev_kind;

/* A request on its way to a node, then its reply on its way back; or on a subscriber connection,
 * a SUBSCRIBE's channel, or a published message (its channel, then its text). */
typedef struct kit_msg {
    uint64_t req_id;
    uint64_t epoch; /* the connection it travels on */
    char *wire;     /* the request as the library encoded it; a subscriber's channel and text */
    size_t wire_len, channel_len;
    sim_reply reply;
    /* A hostile node's forged reply in reply: what it ran in honest (hostile.c). */
    bool forged;
    sim_reply honest;
} kit_msg;

/* The user's timer, carried as a KIT_TIMER event's msg. */
typedef struct kit_timer {
    redlock_sim_timer_fn fn;
    void *data;
} kit_timer;

typedef struct kit_node {
    redlock_sim *sim;
    bool up;
    uint64_t run_id;
    /* Its clock (kit_node_clock): offset_us (its jumps) + base_local + what rate_ppm (a million:
     * true time's rate) made of the true time since base_true. */
    uint64_t offset_us, base_local, base_true, rate_ppm;
    uint64_t paused_until;
    sim_db db;
    /* A hostile node (redlock_sim_node_hostile): its replies' chance to be forged, per million,
     * and the mean span between its forged messages (0: none). */
    uint32_t lie_ppm;
    uint64_t forge_every_us;
} kit_node;

typedef struct kit_client kit_client;

typedef struct kit_io {
    redlock__io base;
    kit_client *client;
    bool closing, closed;
} kit_io;

struct kit_client {
    redlock_sim *sim;
    unsigned index;
    redlock_client *client; /* NULL once closed */
    kit_io io;
    bool has_io;
    uint64_t timeout_us[REDLOCK_SIM_MAX_NODES];
    uint64_t paused_until;
    uint64_t wake_gen;
    sim_rng rng;                           /* its tokens */
    redlock__alloc alloc;                  /* the client's (its commands' encodings) */
    sim_link conns[REDLOCK_SIM_MAX_NODES]; /* its connections (sim_link.h) */
    /* Its subscriber connections (sim_subs.h; pubsub.c) and the channels its io watches,
     * each with its count of waiters. */
    sim_sub subs[REDLOCK_SIM_MAX_NODES];
    struct kit_channel *chans;
    size_t n_chans, cap_chans;
};

/* A hold the user reported (redlock_sim_hold_begin): stop is its last use; key and token are its
 * lock's (its first resource's key). */
typedef struct kit_hold {
    sim_hold h;
    size_t key_len, token_len;
    char key[SIM_KEY_MAX];
    char token[SIM_VALUE_MAX];
} kit_hold;

struct redlock_sim {
    const redlock__kit *kit;
    redlock_sim_options opts;
    sim_rng rng;
    uint64_t now, next_req_id, next_run_id;
    sim_queue queue; /* the events (sim_queue.h): a kit_ev_kind each, a kit_msg or a kit_timer */
    sim_subs subs;   /* the nodes' subscriptions (pubsub.c) */
    kit_node nodes[REDLOCK_SIM_MAX_NODES];
    kit_client *clients[REDLOCK_SIM_MAX_CLIENTS];
    unsigned n_clients;
    char *trace;
    size_t trace_len, trace_cap;
    bool untraced; /* the driver's search: no trace kept (explore.c) */
    bool oom;
    /* The checkers' history (history.c). */
    kit_hold *holds;
    size_t n_holds, cap_holds;
    char **resources; /* the resources named in holds: a hold's resource is its index here */
    size_t *resource_lens;
    size_t n_resources, cap_resources;
    char store_what[256];     /* the store's first violation, or "" */
    sim_nodelog log;          /* the nodes' record (record.c, on sim_nodelog.h) */
    struct kit_fence *fences; /* per resource: the highest fence the store accepted */
    size_t n_fences, cap_fences;
};

/* A client's clock: true time plus this (the library treats 0 as no time). */
#define KIT_CLIENT_EPOCH_US 1000000u
/* A node's clock reads about the Unix time of 2023 when the fleet is made (the queue scripts
 * read it with TIME). */
#define KIT_NODE_EPOCH_US 1700000000000000ull

/* events.c: an event or a message freed (a timer's data, a message and its bytes). */
void kit_event_free(const sim_event *ev);
/* Queue an event of kind at at (now at the earliest); msg (a kit_msg, or a KIT_TIMER's kit_timer)
 * is the event's from here, freed without memory (events.c). */
bool kit_push(redlock_sim *sim, uint64_t at, kit_ev_kind kind, unsigned client, unsigned node,
              uint64_t arg, void *msg);
void kit_msg_free(kit_msg *m);
/* A message's delay on the network, drawn from the seed; whether a message is lost to drop_ppm. */
uint64_t kit_net_delay(redlock_sim *sim);
bool kit_net_drops(redlock_sim *sim);
/* Node n's clock at true time t (microseconds, about the Unix time), and the first true time at
 * which it reads local or more (UINT64_MAX: never). */
uint64_t kit_node_clock(const kit_node *n, uint64_t t);
uint64_t kit_node_true(const kit_node *n, uint64_t local);

/* pubsub.c: the clients' subscriber connections and the nodes' pub/sub. */
/* One more (on) or one less waiter for channel ch on client k (its io's watch). */
int kit_sub_watch(kit_client *k, const char *ch, size_t len, bool on);
/* PUBSUB NUMSUB and PUBLISH on node. */
long long kit_sub_numsub(redlock_sim *sim, unsigned node, const char *ch, size_t len);
long long kit_sub_publish(redlock_sim *sim, unsigned node, const char *ch, size_t len,
                          const char *msg, size_t msg_len);
/* Node node died: its subscriptions go, its subscribers' connections drop and reconnect. */
void kit_sub_server_gone(redlock_sim *sim, unsigned node);
/* k's io closes (its subscribers close), or k is freed. */
void kit_sub_close(kit_client *k);
void kit_sub_free(kit_client *k);
void kit_sub_event(redlock_sim *sim, const sim_event *ev);

/* hostile.c: the hostile nodes. node ran m (its honest reply in m->reply): now and then it
 * forges another; the client's vote on a forged reply (kit_hostile_vote: never a yes). */
void kit_hostile_reply(redlock_sim *sim, unsigned node, kit_msg *m);
void kit_hostile_event(redlock_sim *sim, const sim_event *ev);
void kit_hostile_schedule(redlock_sim *sim, unsigned node);

/* Append a line to the trace, after the time (trace.c). */
void kit_trace(redlock_sim *sim, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The history's own memory (history.c), freed with the fleet. */
void kit_history_free(redlock_sim *sim);

/* The nodes' record (record.c): node's keys are recorded from now; its keys are all gone now (a
 * restart without data, before sim_db_clear); its clock jumped or changed its rate; it went down
 * (down) or came back up. */
void kit_record_watch(redlock_sim *sim, unsigned node);
void kit_record_cleared(redlock_sim *sim, unsigned node);
void kit_record_jumped(redlock_sim *sim, unsigned node);
void kit_record_rate_changed(redlock_sim *sim, unsigned node);
void kit_record_down(redlock_sim *sim, unsigned node, bool down);
void kit_record_free(redlock_sim *sim);

#endif
