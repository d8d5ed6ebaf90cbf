/* SPDX-License-Identifier: MIT */
/* client.h - the client's internals shared by client.c (rounds, operations) and lock.c (the
 * lock handle). Nothing here is public. */
#ifndef REDLOCK_CLIENT_H
#define REDLOCK_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "io.h"
#include "node.h"
#include "stats.h"
#include "timerq.h"
#include "tls.h"

#define REDLOCK__TOKEN_BYTES 16 /* 128 random bits, printed as 32 hex digits */
#define REDLOCK__WAITER_BYTES 8 /* a waiter's id in a resource's queue: 64 random bits, in hex */
/* A lock's token up to this many bytes is kept in the lock itself (the library's own, 32 hex
 * digits, and a caller's UUID fit); a longer caller's token gets an allocation of its own. */
#define REDLOCK__TOKEN_INLINE 47
_Static_assert(2 * REDLOCK__TOKEN_BYTES <= REDLOCK__TOKEN_INLINE,
               "the library's tokens fit inline");
/* Freed rounds, and freed operations, a client keeps for its next ones (ops.c): this many of
 * each, or as many as it has in use if that is more. */
#define REDLOCK__SPARES_KEPT 8

struct redlock_client {
    uv_loop_t *loop;
    redlock__alloc alloc;
    redlock__io *io;
    redlock_options opts;
    char *key_prefix;
    size_t key_prefix_len;
    unsigned n_nodes;
    redlock_url *urls;

    redlock__timerq timers;
    uint64_t wake_due; /* what the io's wake-up is armed for (UINT64_MAX: nothing) */
    bool in_wake;

    redlock__list ops;   /* operations whose callback has not run */
    redlock__list locks; /* every live lock handle */
    /* Every release round alive (ops.c): decided at the quorum, its other nodes' deletes go on,
     * and a closing client waits for them. */
    redlock__list releases;
    unsigned api_depth; /* > 0 while inside a public call: completions are deferred */
    bool closing;
    /* A node is a Redis Cluster (cluster:// URL): every key of one request must share a slot. */
    bool has_cluster;
    unsigned close_rounds; /* while closing: releases still out, + 1 while they are started */
    redlock_close_cb close_cb;
    void *close_data;
    char last_error[256];
    redlock__tls_ctx *tls; /* made when a node is rediss:// (tls.h); freed with the client */
    redlock__stats stats;  /* redlock_client_stats (stats.c) */
    /* Freed rounds of the common size (every kind but inspect), kept for the next rounds: a
     * five-node round is larger than glibc's per-thread cache takes, so each malloc and free of
     * one went through the heap's bins, at two rounds per lock cycle. Up to
     * REDLOCK__SPARES_KEPT, or up to live_rounds: at 256 locks in flight the replies of one
     * read end a hundred rounds, and the next read's start as many. Freed with the client. */
    redlock__spares spare_rounds;
    unsigned live_rounds; /* rounds not freed yet */
    /* Freed operations, kept the same way (two per lock cycle): up to REDLOCK__SPARES_KEPT, or
     * up to live_ops. Freed with the client. */
    redlock__spares spare_ops;
    unsigned live_ops; /* operations not freed yet */
    /* A round's command encoded once for all its nodes (ops.c, round_send); busy while they are
     * sent to, so that a round sent from a completion that came at once encodes per node. */
    redlock__buf wire;
    bool wire_busy;
    /* A node reached a new server (recheck.c): when the last one did, on the client's clock (0:
     * never). A round started before it may hold a vote of the old server. */
    uint64_t node_changed_us;
    redlock__timer recheck_timer; /* checks every held lock, on the loop turn after a change */
    /* A check found a lock without auto-extension lost (the blocking client's handle status
     * follows it); NULL: nobody listens. */
    void (*on_checked_lost)(redlock_lock *lock);
};

/* Auto-extension state of one lock (autoextend.c). */
typedef struct redlock__auto {
    bool active;
    bool extending;      /* an extend round is in flight */
    uint64_t started_us; /* ... and when it began */
    redlock_auto_opts opts;
    uint64_t margin_us;
    redlock_lost_cb lost_cb;
    void *lost_data;
    redlock__timer extend_timer; /* the next extension (or retry) */
    redlock__timer guard_timer;  /* deadline - margin: "lost" if nothing renewed the lock */
    unsigned extensions;
    int last_failure; /* status of the last failed extension, 0 if none */
} redlock__auto;

struct redlock_lock {
    redlock_client *client;
    redlock__list link; /* client->locks */
    unsigned refs;      /* the user's (once handed out), each operation's, each round's */
    bool user_owned;
    bool released;     /* unlock was called */
    bool lost;         /* auto-extension reported it lost; only an extend called since clears it */
    bool attached;     /* made by redlock_lock_attach: validity unknown until an extend wins */
    bool lapsed;       /* an extend ended REDLOCK_ELOST: RETAKE refused until a plain one wins */
    bool caller_token; /* the caller chose the token: retries reuse it */
    bool fencing;      /* acquire with a fence (redlock_lock_opts.fencing) */
    unsigned fence_commit; /* commit acks a fenced acquire needs (0: the quorum) */
    uint64_t fence;        /* the fence the lock was granted with; 0: none */
    uint64_t ttl_ms;
    uint64_t validity_ms;
    uint64_t deadline_us;
    uint64_t won_start_us; /* start of the last won round (acquire or extend) */
    uint64_t check_us;     /* start of a check in flight (recheck.c), 0: none */
    uint64_t yes_nodes;    /* bit i: node i said yes in the last won round (recheck.c) */
    redlock__auto autox;
    void *data;
    /* key prefix + resource; the resource starts at key + prefix length. The fence counter's key
     * is the same bytes with REDLOCK__FENCE_SUFFIX after them (key_len + its length). */
    char *key;
    size_t key_len;
    size_t prefix_len;
    uint64_t key_hash;
    /* A lock on several resources (redlock_acquire_multi): the keys after the first (prefix +
     * resource each), in one allocation with their bytes; NULL and 0 for one resource. */
    redlock__span *more;
    unsigned n_more;
    /* Fair turns (ops.c, "queue"): set while an acquire with a wait (and notifications) takes it
     * through its keys' queues, and kept for the lock's release. channels holds its queue's
     * channel (its first key's queue name) and its own (that, ":" and its id), each
     * NUL-terminated (ops.c, queue_join). */
    bool queued;
    bool channel_watched;       /* its own channel is subscribed */
    bool queue_channel_watched; /* and the queue's */
    char *channels;
    uint64_t place_us;
    uint64_t place_ttl_ms; /* how long a node keeps its place after an attempt (ops.c) */
    size_t waiter_len;
    char waiter[2 * REDLOCK__WAITER_BYTES + 1];
    size_t token_len;
    char *token; /* NUL-terminated: token_small, or its own allocation (redlock__lock_set_token) */
    char token_small[REDLOCK__TOKEN_INLINE + 1];
};

/* Makes the io for a new client (io.h): the libuv one, or the simulator's. */
typedef int (*redlock__io_factory)(void *ctx, const redlock__node_config *cfgs, unsigned n,
                                   const redlock__alloc *alloc, redlock__io **out);

/* redlock_client_new with the io made by make_io(make_ctx, ...) instead of libuv's: the
 * deterministic simulator (test/sim/) runs the real client on simulated nodes and time this way.
 * loop may be NULL then (redlock_client_loop returns it). */
int redlock__client_new_io(uv_loop_t *loop, const char *const *node_urls, unsigned n_nodes,
                           const redlock_options *opts, redlock__io_factory make_io, void *make_ctx,
                           redlock_client **client_out, char *err, size_t err_len);

/* Make client->tls when a node is rediss:// (tls_setup.c). Returns 0, or REDLOCK_EINVAL /
 * REDLOCK_ENOMEM with a message in err naming the node or the option at fault. */
int redlock__client_tls_setup(redlock_client *c, char *err, size_t err_len);

/* Set client->last_error (printf-style) and return err. */
int redlock__client_error(redlock_client *c, int err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* The clock and the timer queue (client.c). */
uint64_t redlock__client_now(redlock_client *c);
void redlock__client_timer_start(redlock_client *c, redlock__timer *t, uint64_t due_us,
                                 redlock__timer_cb cb);
void redlock__client_timer_stop(redlock_client *c, redlock__timer *t);

/* Deliver every pending operation with REDLOCK_ECANCELED (ops.c); the client is closed. */
void redlock__ops_cancel_all(redlock_client *c);
/* The client is closing (ops.c): every release still out (decided at the quorum, or in flight)
 * counts in close_rounds until its last node answered or timed out, so the close completes after
 * their deletes. */
void redlock__ops_close_waits(redlock_client *c);
/* The client is closing and not fast (ops.c): release on every node each lock the caller holds
 * (handed out, not released, not attached) and each acquire in flight or won and not handed out.
 * Each release round counts in close_rounds and calls redlock__client_close_step when its last
 * node has answered or timed out. */
void redlock__ops_release_all(redlock_client *c);
/* Node node said on channel that a key was released, or granted it to a waiter of this client
 * (message, ops.c): count the grant, or retry the queue's head if it is this client's, or
 * without a head the longest-waiting acquire of that key. */
void redlock__ops_notified(redlock_client *c, unsigned node, const char *channel, size_t len,
                           const char *message, size_t message_len);
/* One of the close's releases is done (or their start is): the last one closes the io. */
void redlock__client_close_step(redlock_client *c);
/* redlock_extend; the auto-extension's own extends are not cancelable by redlock_cancel. */
int redlock__extend(redlock_lock *lock, uint64_t ttl_ms, unsigned flags, redlock_cb cb, void *data,
                    bool cancelable);

/* Auto-extension (autoextend.c): stop without a callback; tell every auto-extended lock of the
 * client that it is lost with REDLOCK_ECANCELED. */
void redlock__auto_stop(redlock_lock *lock);
/* The lock's deadline moved (an extend won): if it is auto-extended, plan from the new one. */
void redlock__auto_moved(redlock_lock *lock);
/* May an extend of lock use REDLOCK_EXTEND_RETAKE? Not while the lock is not known to have been
 * held without a gap since its last won round: an attached lock before its first won extend, a
 * lock an extend found lost. Returns 0 or REDLOCK_EINVAL with the client's last error set. */
int redlock__check_retake(redlock_lock *lock);
/* Check auto-extension options for a lock of ttl_ms; sets the client's last error. */
int redlock__auto_check(redlock_client *c, const redlock_auto_opts *opts, uint64_t ttl_ms,
                        redlock_lost_cb lost_cb);
void redlock__auto_cancel_all(redlock_client *c);
/* A node reached a new server (recheck.c): extend lock at once unless an extension is in flight
 * (its win is followed by another at once, since it started before the change). Returns false,
 * doing nothing, when auto-extension cannot extend it (not active, or at its cap). */
bool redlock__auto_recheck(redlock_lock *lock);
/* Report an auto-extended lock lost with reason (the lost callback, once); harmless when not
 * active. */
void redlock__auto_lost(redlock_lock *lock, int reason);

/* Node node reached a new server (io.h's on_node_changed): on the next loop turn every lock the
 * client holds is checked - an extension for an auto-extended one, else an inspect round - and
 * one a quorum no longer holds is reported lost (recheck.c). */
void redlock__recheck_node(redlock_client *c, unsigned node);
/* A round of lock was decided (won: it now holds where q's yes votes say): a node that said no
 * where the last won round had its yes answers as if it had lost its keys, and has every held
 * lock checked as redlock__recheck_node does. */
void redlock__recheck_votes(redlock_lock *lock, const redlock_round *q, bool won);

/* The checks every call that names a resource makes: the client is open, the resource is
 * 1..REDLOCK_RESOURCE_MAX bytes. Returns 0 or the error (with the client's last error set). */
int redlock__check_resource(redlock_client *c, const void *resource, size_t len);
/* The same for a set of count resources (redlock_acquire_multi, redlock_inspect_multi): 1..
 * REDLOCK_RESOURCES_MAX of them, each as above, REDLOCK_RESOURCE_MAX bytes in all, no two
 * alike. */
int redlock__check_resources(redlock_client *c, const void *const *resources, const size_t *lens,
                             unsigned count);

/* Lock handles (lock.c). */
redlock_lock *redlock__lock_new(redlock_client *c, const void *resource, size_t len);
/* A handle for a set of count >= 1 resources (checked by redlock__check_resources). */
redlock_lock *redlock__lock_new_set(redlock_client *c, const void *const *resources,
                                    const size_t *lens, unsigned count);
/* Key i (0..n_more) of the lock, prefix included. */
const char *redlock__lock_key(const redlock_lock *lock, unsigned i, size_t *len);
/* Whether key is one of the lock's keys. */
bool redlock__lock_has_key(const redlock_lock *lock, const char *key, size_t len);
void redlock__lock_ref(redlock_lock *lock);
void redlock__lock_unref(redlock_lock *lock);
/* Set the lock's token (1..REDLOCK_TOKEN_MAX bytes, NUL-terminated in the lock). Returns 0, or
 * REDLOCK_ENOMEM (the token unchanged). */
int redlock__lock_set_token(redlock_lock *lock, const char *token, size_t len);
/* Free every handle still alive; the client is going away. */
void redlock__lock_free_all(redlock_client *c);

#endif
