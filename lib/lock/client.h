/* SPDX-License-Identifier: MIT */
/* client.h - the client core (client.c): its options, nodes and io, the timer queue and clock,
 * its last error, and the close's count of steps. Nothing here is public. The core knows nothing
 * of the layers above it (lock handles, operations, auto-extension); what they must hear of the
 * io (a notification, a node that changed, the io closed) and of a lock's hold reaches them
 * through the hooks the top of the library (api.c) installs when it makes a client. */
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

/* What the layers above the client core do when it hears of something (api.c installs them, the
 * same for every client). */
typedef struct redlock__hooks {
    /* The io: node node said on channel that a key was released, or granted it (wait.c). */
    void (*notified)(redlock_client *c, unsigned node, const char *channel, size_t len,
                     const char *message, size_t message_len);
    /* The io: node node reached a new server (recheck.c). */
    void (*node_changed)(redlock_client *c, unsigned node);
    /* The io closed, every request completed: end every operation, auto-extension and lock
     * handle before the close callback (api.c). */
    void (*io_closed)(redlock_client *c);
    /* A round's answer showed that node no longer keeps lock's token (kept.c): said_no, a "no"
     * where it was kept (its keys are gone: check every held lock); gap, the hold had a gap from
     * then on (report it lost). recheck.c. */
    void (*kept_lost)(redlock_lock *lock, unsigned node, bool said_no, bool gap);
    /* An acquire won and asked for auto-extension: start it before the lock is handed out
     * (autoextend.c, redlock_auto_extend). Nonzero: the lock is not worth handing out. */
    int (*auto_start)(redlock_lock *lock, const redlock_auto_opts *opts, redlock_lost_cb lost_cb,
                      void *lost_data);
    /* An extend won: the lock's deadline moved (autoextend.c). */
    void (*deadline_moved)(redlock_lock *lock);
    /* The lock's hold ended for the caller (released, freed, or its acquire canceled): nothing
     * more is extended (autoextend.c). */
    void (*lock_ended)(redlock_lock *lock);
    /* The io: another thread woke the loop, a canceler fired (op.c). */
    void (*signaled)(redlock_client *c);
} redlock__hooks;

struct redlock_client {
    const redlock__hooks *hooks;
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

    redlock__list ops;   /* operations whose callback has not run (op.c) */
    redlock__list locks; /* every live lock handle (lock.c) */
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
};

/* Makes the io for a new client (io.h): the libuv one, or the simulator's. */
typedef int (*redlock__io_factory)(void *ctx, const redlock__node_config *cfgs, unsigned n,
                                   const redlock__alloc *alloc, redlock__io **out);

/* A client with the io made by make_io(make_ctx, ...) and the layers above reached through
 * hooks (api.c makes every client so). loop may be NULL for an io that needs none. */
int redlock__client_create(uv_loop_t *loop, const char *const *node_urls, unsigned n_nodes,
                           const redlock_options *opts, redlock__io_factory make_io, void *make_ctx,
                           const redlock__hooks *hooks, redlock_client **client_out, char *err,
                           size_t err_len);
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
 * (redlock__client_close_step): the last one closes the io, whose close calls the io_closed hook,
 * the close callback, and frees the client. Returns 0, or the error of a close that cannot
 * begin. */
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
