/* SPDX-License-Identifier: MIT */
/* stream.h - the byte stream under a node's request queue: TCP, a unix socket, or TLS over TCP,
 * on libuv.
 *
 * A stream connects (name lookup, then each address in turn), carries bytes both ways, and
 * after a failure reconnects by itself with exponential backoff and jitter. It knows nothing of
 * Redis: its owner (node.c) writes commands into the stream's one output buffer and reads
 * replies from the bytes it is handed. With TLS (tls.h) the owner's bytes are plaintext on both
 * sides; the stream encrypts each flush of the output buffer with one SSL_write, decrypts what
 * it reads, and offers the node's last session on every reconnection.
 *
 * Writes: the owner appends to redlock__stream_out() and calls redlock__stream_flush(), which
 * only marks the stream due. The buffer goes out once per loop iteration, from the stream's own
 * uv_check (right after the poll phase's I/O callbacks: commands made from replies) or uv_idle
 * (before the poll: commands made from timers, pending callbacks, or by the caller before
 * uv_run), whichever runs first; both are active only while the stream is due. So a lone
 * command leaves in the same iteration without any added wait, and hundreds made in one
 * iteration leave as one write per node: pipelining without a Nagle delay, and without a write
 * syscall per command. Idle, not prepare: a prepare handle started from another prepare
 * callback would wait until after the poll, which may block; an active idle handle keeps the
 * poll from blocking, so a due stream never waits for I/O or a timer. The write itself is tried
 * on the spot (uv_try_write); only what the socket does not take at once goes through uv_write,
 * and later bytes wait for it.
 *
 * Timers: one for the connect timeout, one for the reconnect backoff, never shared. The connect
 * timeout covers everything up to redlock__stream_established(): lookup, connect, the TLS
 * handshake and the owner's own handshake on the open stream.
 *
 * States and transitions (the only state a stream has):
 *
 *   IDLE        -- start, or the backoff timer fires -->   RESOLVING (a host name)
 *                                                          CONNECTING (an address, a unix path)
 *   RESOLVING   -- resolved -->                            CONNECTING
 *   CONNECTING  -- connected -->                           OPEN (on_open), with TLS: SECURING
 *               -- refused, another address left -->       CONNECTING (next address)
 *   SECURING    -- TLS handshake done -->                  OPEN (on_open)
 *   OPEN        -- redlock__stream_established() -->       ESTABLISHED
 *   RESOLVING, CONNECTING, SECURING, OPEN
 *               -- connect timeout, lookup/connect/TLS error --> IDLE (on_down; backoff armed)
 *   OPEN, ESTABLISHED
 *               -- read error, end of file, write error --> IDLE (on_down; backoff armed)
 *   any but CLOSED -- redlock__stream_drop() -->           IDLE (no callback; backoff armed)
 *   any         -- redlock__stream_close() -->             CLOSED (final; on_closed once every
 *                                                          handle is closed)
 *
 * Callbacks run on the loop thread and may call any stream function, including drop and close
 * (the stream never touches a connection it dropped). A connection's memory lives until its
 * handle's close callback, which may come after the stream moved on to a new one. */
#ifndef REDLOCK_STREAM_H
#define REDLOCK_STREAM_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "common.h"
#include "tls.h"
#include "url.h"

#define REDLOCK__STREAM_MAX_ADDRS 8

typedef enum redlock__stream_state {
    REDLOCK__STREAM_IDLE,        /* no connection; a reconnect may be scheduled */
    REDLOCK__STREAM_RESOLVING,   /* looking up the host name */
    REDLOCK__STREAM_CONNECTING,  /* connect in flight */
    REDLOCK__STREAM_SECURING,    /* TLS handshake in flight */
    REDLOCK__STREAM_OPEN,        /* bytes flow; the connect timeout still runs */
    REDLOCK__STREAM_ESTABLISHED, /* the owner accepted the connection */
    REDLOCK__STREAM_CLOSED       /* closed for good */
} redlock__stream_state;

typedef struct redlock__stream redlock__stream;
typedef struct redlock__stream_conn redlock__stream_conn;

/* What the stream counts, for tests and the bench (never for decisions). */
typedef struct redlock__stream_stats {
    uint64_t writes;            /* writes tried (uv_try_write, and uv_write for what a socket
                                   did not take at once); with TLS each carries one SSL_write of
                                   application data, or handshake records */
    unsigned tls_handshakes;    /* TLS handshakes completed ... */
    unsigned tls_resumed;       /* ... of which resumed a session */
    bool last_resumed;          /* the last completed handshake resumed a session */
    uint64_t last_handshake_us; /* TCP connected to TLS handshake done, last time */
    uint64_t connect_attempts;  /* connection attempts started */
    uint64_t next_attempt_us;   /* the backoff (jitter included) before the next attempt, as
                                   armed by the last failure */
} redlock__stream_stats;

typedef struct redlock__stream_config {
    const redlock_url *url; /* where to connect; must outlive the stream */
    redlock__tls_ctx *tls;  /* for a rediss:// url (required then), else NULL; must outlive
                               the stream */
    uint64_t connect_timeout_us;
    uint64_t reconnect_min_us;
    uint64_t reconnect_max_us;
    const redlock__alloc *alloc; /* must outlive the stream */
    /* Bytes may flow: the owner writes what a new connection says first. */
    void (*on_open)(redlock__stream *s);
    /* len > 0 bytes arrived; valid only during the call. */
    void (*on_read)(redlock__stream *s, const char *data, size_t len);
    /* The connection failed or could not be made (why says how). The stream is IDLE already,
     * its output buffer empty, and a reconnect is scheduled. */
    void (*on_down)(redlock__stream *s, const char *why);
    /* After redlock__stream_close, once every handle has closed. The stream's memory may be
     * freed from here. */
    void (*on_closed)(redlock__stream *s);
} redlock__stream_config;

struct redlock__stream {
    uv_loop_t *loop;
    redlock__stream_config cfg;
    redlock__stream_state state;
    redlock__stream_conn *conn; /* the current connection, NULL when none */
    redlock__buf out;           /* appended bytes not yet written */
    bool flush_due;             /* out (or TLS records) waits for flush_idle / flush_check */
    uv_idle_t flush_idle;       /* flushes a due stream before the poll phase */
    uv_check_t flush_check;     /* flushes a due stream after the poll phase */

    uv_timer_t connect_timer;   /* the connect timeout of the attempt under way */
    uv_timer_t reconnect_timer; /* the backoff before the next attempt */
    uv_getaddrinfo_t gai;
    bool gai_active;
    /* Addresses of a resolved host name, tried in turn until one accepts ("localhost" may give
     * ::1 first while the server listens on 127.0.0.1 only). */
    struct sockaddr_storage addrs[REDLOCK__STREAM_MAX_ADDRS];
    unsigned n_addrs, next_addr;

    uint64_t backoff_us;
    uint64_t rng;               /* xorshift state for backoff jitter (not a secret) */
    redlock__closing closes;    /* connections and the lookup while alive; at the close, the rest */
    redlock__tls_resume resume; /* TLS: the session the next connection offers */
    uint64_t secure_start_us;   /* TLS: when the handshake began */
    redlock__stream_stats stats;
};

/* Set the stream up (memory only: no handle, no callback). cfg is copied. */
void redlock__stream_init(redlock__stream *s, uv_loop_t *loop, const redlock__stream_config *cfg);

/* Initialise the timers and the flush handles, and make the first connection attempt. */
void redlock__stream_start(redlock__stream *s);

/* true in OPEN and ESTABLISHED: bytes flow. */
static inline bool redlock__stream_is_open(const redlock__stream *s)
{
    return s->state == REDLOCK__STREAM_OPEN || s->state == REDLOCK__STREAM_ESTABLISHED;
}

/* The output buffer: append bytes, then call redlock__stream_flush. Appending while the stream
 * is not open is allowed but pointless: a new connection starts with an empty buffer. */
static inline redlock__buf *redlock__stream_out(redlock__stream *s)
{
    return &s->out;
}

/* What a connection attempt under way waits for, in a few words ("": none under way), for the
 * message of a request that timed out before its node was ever ready. */
void redlock__stream_pending_why(const redlock__stream *s, char *out, size_t out_len);

/* Have the output buffer written in this loop iteration (see Writes above), unless the stream is
 * not open then: a stream that is not open drops it. Never writes, nor calls back, from inside
 * this call: a write error arrives through on_down from the loop. */
void redlock__stream_flush(redlock__stream *s);

/* The owner accepted the open connection (its handshake succeeded): stop the connect timeout,
 * and let the next failure start over at the shortest backoff. Only in OPEN. */
void redlock__stream_established(redlock__stream *s);

/* Give up the current connection, or the attempt under way, without a callback: the stream
 * goes IDLE, drops unwritten bytes and schedules a reconnect after the backoff. Does nothing
 * when IDLE or CLOSED. */
void redlock__stream_drop(redlock__stream *s);

/* Close for good: write what is due (a release sent just before close still leaves, as far as
 * the socket takes it at once), drop the connection, stop both timers, the flush handles and any
 * lookup; on_closed runs once all of them are closed (never from inside this call). */
void redlock__stream_close(redlock__stream *s);

#endif
