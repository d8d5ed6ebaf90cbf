/* SPDX-License-Identifier: MIT */
/* proxy.h - a loopback TCP fault proxy that tests and the bench put in front of a redis-server.
 *
 * Each proxy runs its own libuv loop on its own thread, listens on 127.0.0.1 and forwards every
 * connection it accepts to one upstream address. From any other thread the caller adds a one-way
 * delay, holds traffic (blackhole), refuses new connections, or closes or resets every proxied
 * connection: the faults a distributed lock must survive, made on demand and deterministic.
 *
 * Loopback only: the upstream must be an address in 127.0.0.0/8 or ::1 ("localhost" means
 * 127.0.0.1), so a test can never send traffic off the machine by mistake.
 *
 * Every control function is thread-safe, may be called from any thread except the proxy's own
 * (there are no callbacks, so user code never runs there), takes effect within one turn of the
 * proxy's loop and returns only once applied. They must not be called after proxy_stop(). */
#ifndef REDLOCK_TEST_PROXY_H
#define REDLOCK_TEST_PROXY_H

typedef struct proxy proxy;

typedef enum {
    /* Forward both ways (after the current delay). */
    PROXY_PASS,
    /* A partition that TCP survives: accept new connections and keep existing ones open, but
     * deliver nothing either way until the mode changes. Nothing is lost: bytes read (and data
     * queued for delay when the mode is set) are held in order, and when the mode goes back to
     * PASS (or REFUSE) everything overdue is delivered at once, then the rest on its due time. A
     * FIN is held behind the data; an RST from one side still resets the other at once. Above
     * 4 MiB held per direction the proxy stops reading, so the kernel's buffers and TCP flow
     * control hold the rest. Data already handed to the kernel before the call is delivered. */
    PROXY_BLACKHOLE,
    /* Stop listening, so a new connect fails at once with ECONNREFUSED; existing connections
     * keep forwarding. Leaving this mode listens again on the same port. */
    PROXY_REFUSE,
} proxy_mode;

/* Start a proxy on its own thread and loop, listening on 127.0.0.1:listen_port (0: any free
 * port) and forwarding to upstream_host:upstream_port. upstream_host is an IPv4 or IPv6 literal
 * (or "localhost") and is only read during the call. The proxy starts in PROXY_PASS mode with no
 * delay; the upstream is connected once per accepted connection, so it need not be up yet.
 * Returns the proxy, owned by the caller until proxy_stop(), or NULL with a message on stderr
 * when an argument is invalid (a port out of range, an upstream that is not loopback), the port
 * cannot be bound, or memory or a thread cannot be had. */
proxy *proxy_start(int listen_port, const char *upstream_host, int upstream_port);

/* The port the proxy listens on (fixed for its lifetime, even across PROXY_REFUSE). */
int proxy_port(const proxy *p);

/* Add a one-way delay of one_way_ms to each direction of every connection, existing and new.
 * Each chunk read is written when its read time plus the delay has passed, so byte order holds
 * and round trips are not serialized (a pipeline of requests costs one round trip). Applies to
 * data read after the call; data already queued keeps its due time, and later data never
 * overtakes it. 0 forwards at once. */
void proxy_set_delay_ms(proxy *p, unsigned one_way_ms);

/* Switch mode (see proxy_mode). Setting the current mode again does nothing. */
void proxy_set_mode(proxy *p, proxy_mode mode);

/* Close every proxied connection on both sides with a FIN; delayed data still queued is dropped.
 * Returns once the sockets are closed, so a client's next read sees end of file. */
void proxy_close_all(proxy *p);

/* Reset every proxied connection on both sides (SO_LINGER 0, an RST); queued data is dropped.
 * Returns once the sockets are closed, so a client's next call sees ECONNRESET. */
void proxy_reset_all(proxy *p);

/* How many proxied connections are open now: counted from accept until the proxy closes them
 * (both sides), including ones still connecting upstream or half-closed. */
unsigned proxy_connections(const proxy *p);

/* Close every connection (FIN) and the listener, join the proxy's thread and free p. p may be
 * NULL (does nothing). Must not race with another call on the same proxy. */
void proxy_stop(proxy *p);

#endif /* REDLOCK_TEST_PROXY_H */
