/* SPDX-License-Identifier: MIT */
/* io.h - the only way the client's round logic reaches nodes and time.
 *
 * The libuv implementation (io_uv.c + node.c) drives real sockets; the deterministic simulator
 * (test/sim/) implements the same table with virtual time and simulated nodes, so the
 * simulation runs the very round code that production runs.
 *
 * Contract of send: the request completes exactly once through req->cb - with the node's vote,
 * an error (node down, connection lost, canceled by close) or a timeout at the node's deadline.
 * A completion may come synchronously from inside send (a node that is down fails fast); the
 * caller must be ready for that. Requests to one node run on the node in the order they were
 * sent. */
#ifndef REDLOCK_IO_H
#define REDLOCK_IO_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "command.h"

typedef struct redlock__req redlock__req;
typedef struct redlock__io redlock__io;

/* on_notify's node when no node vouches for a message. */
#define REDLOCK__IO_NO_NODE UINT_MAX

/* Why a request got an ERROR vote: what a caller that retries or refreshes decides on, never by
 * matching the error's text (cluster.c on the requests it sends to its masters). */
typedef enum redlock__fail {
    REDLOCK__FAIL_NONE,   /* not an ERROR vote */
    REDLOCK__FAIL_SERVER, /* the server answered with an error reply */
    REDLOCK__FAIL_LINK,   /* the connection: down, lost, or out of step with its replies */
    REDLOCK__FAIL_LOCAL,  /* here: out of memory, too many in flight, closing, or an answer that
                             is not an error reply but none the command expects */
} redlock__fail;

/* error: NULL unless vote is ERROR or TIMEOUT, or a note beside another vote (a queued release
 * whose queue upkeep failed: command.c); data: NULL except for answers to INSPECT and
 * ACQUIRE_FENCED (redlock__cmd_has_data). Both are
 * valid only during the call. */
typedef void (*redlock__req_cb)(redlock__req *req, redlock_vote vote, const char *error,
                                const redlock__reply_data *data, uint64_t now_us);

struct redlock__req {
    redlock__req *next;      /* the IO layer's FIFO link while in flight */
    const redlock__cmd *cmd; /* must stay valid until cb */
    redlock__req_cb cb;
    /* Set by the caller before send: when it sends, by io's clock (a round reads the clock
     * once for all its nodes: an earlier time only makes the deadline earlier). */
    uint64_t sent_us;
    uint64_t deadline_us; /* set by the IO layer: sent_us + the node's timeout */
    /* A Redis Cluster's ASK redirect (cluster.c): the command goes preceded by ASKING, whose
     * reply the node reads and drops (it clears the flag then). Only a node of node.c reads it. */
    bool asking;
    /* A waiter's acquire (redlock__cmd_per_node): 1 + the index of the node it goes to, which a
     * grant made on that server names (so a grant counts for the node whose connection asked for
     * it, whichever subscriber heard it), or 0 where no grant may be made (a cluster node that
     * waits for replicas: a grant's SET is the releaser's, and no WAIT follows it). Set by the
     * caller; the IO layer passes it to the encoder and may clear it, never set it. */
    unsigned grant_tag;
    /* Set by a node (node.c) before the callback: why the vote is ERROR (else
     * REDLOCK__FAIL_NONE). */
    redlock__fail fail;
    /* Set by a node with an ERROR vote when the request never left this process (the node was
     * down, closing, full): what it asked was surely not done. */
    bool unsent;
};

typedef struct redlock__io_ops {
    void (*send)(redlock__io *io, unsigned node, redlock__req *req);
    uint64_t (*now_us)(redlock__io *io);
    /* Call io->on_wake once the clock reaches due_us (UINT64_MAX: never). Replaces any earlier
     * wake-up. */
    void (*wake_at)(redlock__io *io, uint64_t due_us);
    /* Fill buf with random bytes (a CSPRNG for real IO). Returns 0 or a negative error. */
    int (*random)(redlock__io *io, void *buf, size_t len);
    /* Complete every pending request with an ERROR ("canceled"), stop all activity, then call
     * io->on_closed. Frees the io itself after on_closed returns. */
    void (*close)(redlock__io *io);
    /* One more (on) or one less (!on) waiter for key: while any waits, io->on_notify is called
     * when a node says the key was released (subscriber.h). Returns 0 or REDLOCK_ENOMEM (on only:
     * then nothing is watched). NULL: an io without notifications. */
    int (*watch)(redlock__io *io, const char *key, size_t len, bool on);
    /* Fill out with node's state and counters (redlock_client_node_info); false when node is out
     * of range. NULL: an io with no node state to tell (the simulator's). */
    bool (*node_info)(redlock__io *io, unsigned node, redlock_node_info *out);
    /* The wall clock (us since the epoch) that places a waiter in a queue (waiter.c, queue_join);
     * NULL: the system's (uv_gettimeofday). The simulator gives each process its own. */
    uint64_t (*wall_us)(redlock__io *io);
    /* Make ready the wake-up that signal sends (loop thread; once is enough, more is harmless).
     * Returns 0 or REDLOCK_ENOMEM. NULL, with signal: an io no other thread can wake (the
     * simulator's): it takes no cancelers. */
    int (*signal_start)(redlock__io *io);
    /* From any thread, after signal_start: call io->on_signal on the loop thread soon (calls
     * coalesce). Never after close has begun (canceler.h says why none comes then). */
    void (*signal)(redlock__io *io);
    /* The timeout a request sent to node now gets (node.h; adaptive ones change). NULL: the one
     * the node's config gives (an io whose nodes do not adapt: the simulator's). */
    uint64_t (*timeout_us)(redlock__io *io, unsigned node);
} redlock__io_ops;

struct redlock__io {
    const redlock__io_ops *ops;
    void *owner; /* the client */
    void (*on_wake)(redlock__io *io);
    void (*on_closed)(redlock__io *io);
    /* A node said, on channel (len bytes), that a key was released: message (message_len
     * bytes) is the token that held it, or a grant (waiter.c); both valid during the call. node:
     * the node whose server sent it, as sure as a vote on that node's command connection (the
     * same server, by its run_id), or REDLOCK__IO_NO_NODE when the io cannot vouch for that (a
     * subscriber that reached another server, or did not say which): then it is a hint only. */
    void (*on_notify)(redlock__io *io, unsigned node, const char *channel, size_t len,
                      const char *message, size_t message_len);
    /* Node node reconnected to another server than before (a new run_id: it restarted, and may
     * have lost every key it held). Comes after the new connection is ready, never from inside
     * send; NULL: nobody listens. */
    void (*on_node_changed)(redlock__io *io, unsigned node);
    /* Node node reconnected to the server it had (the same run_id), which was running, with
     * every key it held, when the handshake was written at asked_us. NULL: nobody listens. */
    void (*on_node_same)(redlock__io *io, unsigned node, uint64_t asked_us);
    /* Another thread called signal (a canceler fired). */
    void (*on_signal)(redlock__io *io);
};

#endif
