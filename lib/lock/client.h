/* SPDX-License-Identifier: MIT */
/* client.h - the client core (client.c): its options, nodes and io, the timer queue and clock,
 * its last error, the close's count of steps and its lists of closers. Nothing here is public.
 * The core calls nothing above it (lock handles, operations, auto-extension, using): what they
 * must hear of reaches them through callbacks they set themselves - on the io (a notification:
 * waiter.c; a node that changed: recheck.c; a token's wake-up: op.c), on the client (a round's
 * kept token lost: recheck.c), and at the close through each object's closer (below). */
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

/* Freed rounds, and freed operations, a client keeps for its next ones (round.c, op.c): this
 * many of each, or as many as it has in use if that is more. */
#define REDLOCK__SPARES_KEPT 8

/* An object's part in the client's close, as a libuv handle's close_cb: while the object lives,
 * its closer is linked into the client's list of the phase of the close that ends it
 * (redlock__closer_link; the lists are ops, closing_lost, closing_ended and locks, below), and
 * the object unlinks it itself when it ends (redlock__closer_unlink). Once the io has closed, the
 * close takes each closer still linked off its list and calls its close_cb, list after list
 * (client.c, on_io_closed): close_cb ends the object. The client core knows no more of it. */
typedef struct redlock__closer redlock__closer;
struct redlock__closer {
    redlock__list link;
    void (*close_cb)(redlock__closer *closer);
};

/* closer joins list (one of the client's lists of closers), to be ended by close_cb. */
static inline void redlock__closer_link(redlock__list *list, redlock__closer *closer,
                                        void (*close_cb)(redlock__closer *closer))
{
    closer->close_cb = close_cb;
    redlock__list_push(list, &closer->link);
}

/* Harmless on a closer unlinked already (or initialized with redlock__list_init). */
static inline void redlock__closer_unlink(redlock__closer *closer)
{
    redlock__list_remove(&closer->link);
}

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

    /* What the close ends once the io has closed: one list of closers per phase, in the order
     * docs/api.md promises (client.c, on_io_closed). */
    redlock__list ops;           /* 1. operations whose callback has not run (op.c), delivered */
    redlock__list closing_lost;  /* 2. auto-extensions (autoextend.c): the lost callback */
    redlock__list closing_ended; /* 3. holds of redlock_using at work (using.c): the ended */
    redlock__list locks;         /* 4. every live lock handle (lock.c), freed */
    /* Every release round alive (round.c): decided at the quorum, its other nodes' deletes go
     * on, and a closing client waits for them. */
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
    /* A round's command encoded once for all its nodes (round.c, redlock__round_send); busy while
     * they are sent to, so that a round sent from a completion that came at once encodes per node.
     */
    redlock__buf wire;
    bool wire_busy;
    /* A node reached a new server (recheck.c): when the last one did, on the client's clock (0:
     * never). A round started before it may hold a vote of the old server. */
    uint64_t node_changed_us;
    uint64_t node_changed_at_us[REDLOCK_MAX_NODES]; /* the same, per node */
    /* Per node, when the newest request it answered (yes or no) was sent: its server held what
     * it held then (kept.c). */
    uint64_t heard_us[REDLOCK_MAX_NODES];
    uint64_t sent_us[REDLOCK_MAX_NODES]; /* per node, when a round last wrote to it */
    /* kept.c's probe: a TIME to each node the client has written nothing to since the newest
     * fresh key (probe_for_us), so that a quiet client hears its kept nodes after it. */
    uint64_t probe_for_us;
    bool probe_armed;
    redlock__timer probe_timer;
    struct redlock__probe {
        redlock__req req;
        redlock_client *client;
        unsigned node;
        bool busy;
    } probes[REDLOCK_MAX_NODES];
    redlock__timer recheck_timer; /* checks every held lock, on the loop turn after a change */
    redlock__timer gap_timer;     /* reports the locks that had a gap, on the next loop turn */
    /* A check found a lock without auto-extension lost (the blocking client's handle status
     * follows it); NULL: nobody listens. */
    void (*on_checked_lost)(redlock_lock *lock);
    /* A round's answer showed that node no longer keeps lock's token (round.c, kept.c): said_no,
     * a "no" where it was kept (its keys are gone: check every held lock); gap, the hold had a
     * gap from then on (report it lost). Set by the recheck (recheck.c); NULL: nobody listens. */
    void (*on_kept_lost)(redlock_lock *lock, unsigned node, bool said_no, bool gap);
};

/* Makes the io for a new client (io.h): the libuv one, or the simulator's. */
typedef int (*redlock__io_factory)(void *ctx, const redlock__node_config *cfgs, unsigned n,
                                   const redlock__alloc *alloc, redlock__io **out);

/* A client with the io made by make_io(make_ctx, ...) (api.c makes every client so, then starts
 * what listens on it). loop may be NULL for an io that needs none. */
int redlock__client_create(uv_loop_t *loop, const char *const *node_urls, unsigned n_nodes,
                           const redlock_options *opts, redlock__io_factory make_io, void *make_ctx,
                           redlock_client **client_out, char *err, size_t err_len);
/* redlock_client_new with the io made by make_io(make_ctx, ...) instead of libuv's (api.c): the
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

/* The clock and the timer queue. */
uint64_t redlock__client_now(redlock_client *c);
/* The longest timeout a request sent now gets on any of its nodes, in ms (rounded up): fixed,
 * or what an adaptive node measured (rto.h). */
uint64_t redlock__client_slowest_timeout_ms(const redlock_client *c);
void redlock__client_timer_start(redlock_client *c, redlock__timer *t, uint64_t due_us,
                                 redlock__timer_cb cb);
void redlock__client_timer_stop(redlock_client *c, redlock__timer *t);

/* The close: check and begin it (closing set, the callback kept, pending timers dropped, one
 * step counted for the caller's own releases to start under); then each step done
 * (redlock__client_close_step): the last one closes the io, whose close ends every object still
 * linked into the client's lists of closers (above), then calls the close callback and frees the
 * client. Returns 0, or the error of a close that cannot begin. */
int redlock__client_close_begin(redlock_client *c, unsigned flags, redlock_close_cb close_cb,
                                void *data);
void redlock__client_close_step(redlock_client *c);

/* A length as the caller gave it: REDLOCK_STRLEN means up to the NUL (a NULL pointer reads as
 * empty, which the checks below refuse). */
static inline size_t redlock__len(const void *p, size_t len)
{
    return len == REDLOCK_STRLEN ? (p != NULL ? strlen(p) : 0) : len;
}

/* The end of the message of a resource over the limit, with the limit for its %u (the tool's
 * message of a KEY over it reads the same: tools/args.c). Larger resources cannot make a lock
 * cycle within the default node timeout (docs/api.md). */
#define REDLOCK__OVER_MAX "over REDLOCK_RESOURCE_MAX (%u): lock a digest of it instead"

/* What a set of count resources must be, with no client to ask (the blocking API checks it on the
 * caller's thread): 1..REDLOCK_RESOURCES_MAX of them (lens[i] may be REDLOCK_STRLEN), each
 * non-empty, REDLOCK_RESOURCE_MAX bytes in all. Returns 0, or REDLOCK_EINVAL with why filled
 * (the wording of a call for one resource when count is 1). */
int redlock__client_resources_valid(const void *const *resources, const size_t *lens,
                                    unsigned count, char *why, size_t why_len);
/* The checks every call that names a resource makes: the client is open, the resource is valid
 * (as above). Returns 0 or the error (with the client's last error set). */
int redlock__client_check_resource(redlock_client *c, const void *resource, size_t len);
/* The same for a set of count resources (redlock_acquire_multi, redlock_inspect_multi): 1..
 * REDLOCK_RESOURCES_MAX of them, each as above, REDLOCK_RESOURCE_MAX bytes in all, no two
 * alike. */
int redlock__client_check_resources(redlock_client *c, const void *const *resources,
                                    const size_t *lens, unsigned count);
/* What acquire and inspect check before anything is allocated: the client (non-NULL), the
 * resources (one, with the messages of a call for one, or a set), the callback. */
int redlock__client_check_call(redlock_client *c, const void *const *resources, const size_t *lens,
                               unsigned count, redlock_cb cb);

/* Log one line about the client (url NULL) or a node, if the client has a log callback; nothing
 * is formatted otherwise. */
void redlock__client_log(redlock_client *c, redlock_log_level level, const char *url,
                         const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* The nodes' log (redlock__node_config.log), ctx being the client. */
void redlock__client_node_log(void *ctx, redlock_log_level level, const char *url,
                              const char *message);

#endif
