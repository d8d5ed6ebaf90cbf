/* SPDX-License-Identifier: MIT */
/* node.h - one Redis master's request queue, on a byte stream (stream.h).
 *
 * Commands are appended to the stream's one output buffer, which goes out once per loop
 * iteration, in the same iteration (pipelining without a Nagle delay; see stream.h). Replies are
 * parsed with hiredis's redisReader from the bytes the stream hands over, and matched to a FIFO
 * of outstanding requests. Every request has a deadline: its send time plus the node's timeout,
 * fixed or adapted to the round trips the node measures (rto.h), and never before the deadline
 * of the request queued before it; one uv_timer_t, armed at the FIFO's head, serves them all
 * because deadlines grow in FIFO order. A
 * timed-out request leaves the FIFO at once and only a counter remembers that its reply is still
 * owed: the late reply is read and dropped. The queue never knows how its bytes travel (TCP, a
 * unix socket, TLS).
 *
 * A node that is down fails every request at once (nothing queues) while its stream reconnects
 * in the background with exponential backoff and jitter. While the first connection is being
 * made, requests wait, each within its own deadline, and are written only once every reply of
 * the handshake (AUTH, SELECT, SCRIPT LOAD, INFO) has come and was the expected one; releases
 * alone go right behind the handshake (node.c, early_releases). A reply
 * that no Redis gives to its command means the replies are out of step: the connection is
 * dropped. A node that owes replies and has answered nothing for three timeouts is dropped and
 * reconnected, so nothing grows without bound. */
#ifndef REDLOCK_NODE_H
#define REDLOCK_NODE_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "common.h"
#include "io.h"
#include "reader.h"
#include "stream.h"

typedef struct redlock__node redlock__node;

/* What redlock_client_node_info reports of a node's requests, kept the same way by a node and a
 * cluster node (counted, never used for decisions). */
typedef struct redlock__tally {
    uint64_t requests, answers, errors, timeouts;
    uint64_t probes; /* of the requests, the TIMEs kept.c asks as signs of life */
    uint64_t rtt_us; /* moving average of the answers' latencies (redlock__rtt_average) */
    unsigned consecutive_failures;
    uint64_t state_since_us;                   /* when its state last changed */
    char last_failure[REDLOCK_ERROR_TEXT_MAX]; /* of a request (or of a connection); "" at first */
} redlock__tally;

/* A request is sent (or fails at once). */
void redlock__node_tally_request(redlock__tally *t, const redlock__req *req);
/* An answer came sample_us after its request was sent. */
void redlock__node_tally_answer(redlock__tally *t, uint64_t sample_us);
/* A request ended with vote (error: its text, or NULL). */
void redlock__node_tally_vote(redlock__tally *t, redlock_vote vote, const char *error);
/* The state changes (to one that differs from the last). */
void redlock__node_tally_state(redlock__tally *t);
/* Its counters into out (the members named like them; last_error from last_failure). */
void redlock__node_tally_info(const redlock__tally *t, redlock_node_info *out);

typedef struct redlock__node_config {
    const redlock_url *url; /* must outlive the node */
    const char *name;       /* redacted URL for messages; must outlive the node */
    uint64_t timeout_us;    /* a request's deadline; 0: adaptive (rto.h) */
    uint64_t connect_timeout_us;
    uint64_t reconnect_min_us;
    uint64_t reconnect_max_us;
    unsigned max_inflight;
    const redlock__alloc *alloc; /* must outlive the node */
    /* Asked when a connection's handshake is done, with the run_id of the server it reached:
     * the name of another node that is connected to that same server, or NULL. If there is
     * one, this node stays down (a server must count only once in a quorum). NULL: no check. */
    const char *(*twin_of)(void *ctx, const redlock__node *node, const char *run_id);
    void *twin_ctx;
    /* Told when a connection's handshake reached a server with another run_id than the last
     * ready connection had (a restart): changed(changed_ctx, index). NULL: nobody is told. A
     * cluster's connections (cluster.c) inherit it, and the cluster's index, with the config. */
    void (*changed)(void *ctx, unsigned index);
    void *changed_ctx;
    /* Told when a connection's handshake reached the same server as the last ready connection
     * (its run_id): same(changed_ctx, index, asked_us), asked_us the time the handshake was
     * written, before which that server was already running. NULL: nobody is told. */
    void (*same)(void *ctx, unsigned index, uint64_t asked_us);
    unsigned index;        /* the io's node this connection serves */
    redlock__tls_ctx *tls; /* the client's TLS context, for a rediss:// url; must outlive the
                              node */
    /* Told what happens to the connection (connected, lost, refused, dropped, each failed
     * attempt), as one line about this node; NULL: nothing is formatted. */
    redlock__log_sink log;
    void *log_ctx;
    /* What its connections may be sent (reader.h): a plain node's (0) or a cluster's server's. */
    redlock__reader_use replies;
} redlock__node_config;

/* Format one line and hand it to cfg->log as about cfg->name (nothing is formatted when log is
 * NULL). For the node, a cluster (cluster.c) and a subscriber (subscriber.c), which share this
 * config; the v form puts prefix ("subscriber: ") before the text. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void redlock__node_cfg_log(const redlock__node_config *cfg, redlock_log_level level,
                           const char *fmt, ...);
#if defined(__GNUC__)
__attribute__((format(printf, 4, 0)))
#endif
void redlock__node_cfg_vlog(const redlock__node_config *cfg, redlock_log_level level,
                            const char *prefix, const char *fmt, va_list ap);

/* Why a request of a cluster node with cfg timed out: "no answer within N ms". */
void redlock__node_cfg_timeout_why(const redlock__node_config *cfg, char *out, size_t out_len);

/* Create a node (memory only, no handle yet). Returns 0 or REDLOCK_ENOMEM. */
int redlock__node_new(uv_loop_t *loop, const redlock__node_config *cfg, redlock__node **out);
/* Free a node that was never started. */
void redlock__node_free_unstarted(redlock__node *node);
/* Initialise its handles and start connecting. */
void redlock__node_start(redlock__node *node);

/* Send req, whose sent_us the caller set (see io.h for the completion contract). */
void redlock__node_send(redlock__node *node, redlock__req *req);

/* Complete every request with ERROR "canceled", close every handle, then call cb and free the
 * node. */
void redlock__node_close(redlock__node *node, void (*cb)(void *data), void *data);

/* The timeout a request sent to it now gets (fixed, or adaptive: rto.h). */
uint64_t redlock__node_timeout_us(const redlock__node *node);
/* Its name for messages (the redacted URL of its config). */
const char *redlock__node_name(const redlock__node *node);
/* The run_id of the server a ready node is connected to, or NULL (not ready, or INFO refused). */
const char *redlock__node_run_id(const redlock__node *node);
/* Its state and counters, into out (a library-sized struct; url and the rest are filled). */
void redlock__node_info(const redlock__node *node, redlock_node_info *out);
/* What its stream counted (tests and the bench). */
const redlock__stream_stats *redlock__node_stream_stats(const redlock__node *node);

#endif
