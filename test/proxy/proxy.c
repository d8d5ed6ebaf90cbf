/* SPDX-License-Identifier: MIT */
/* proxy.c - the fault proxy (proxy.h): a libuv loop on its own thread, driven by requests.
 *
 * Each proxied connection is two TCP handles and two directions. A direction reads from its
 * source into chunks, stamps each with its due time (read time + delay) and writes it to its
 * destination once due; chunks wait in a FIFO so byte order holds, and one timer per direction
 * is armed at the head's due time. Bytes queued or being written count against a high-water
 * mark; above it the direction stops reading its source until the destination drains.
 *
 * Teardown: a FIN from a source is passed on as a shutdown of the destination once everything
 * read before it was written; when both directions have done that, the connection closes. An
 * RST or any error closes both sides at once, mirroring an RST with an RST.
 *
 * Control calls from other threads queue a request on the stack of the caller, wake the loop
 * with uv_async_send (wake-ups coalesce, so the loop drains the whole queue), and wait on a
 * condition variable until the loop has applied it. */
#include "proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>
#include <uv.h>

#define CHUNK_BYTES (64 * 1024)
/* Pending bytes (delay queue + writes in flight) above which a direction stops reading, and
 * below which it reads again. */
#define HIGH_WATER_BYTES ((size_t)4 << 20)
#define LOW_WATER_BYTES ((size_t)1 << 20)
#define LISTEN_BACKLOG 128

struct direction;

typedef struct chunk {
    struct chunk *next;
    struct direction *dir;
    uint64_t due_ns; /* uv_hrtime() at which it may be written */
    size_t len;
    uv_write_t req;
    char data[]; /* CHUNK_BYTES when allocated, shrunk to len when much smaller */
} chunk;

typedef struct direction {
    struct conn *conn;
    uv_tcp_t *src, *dst;
    chunk *head, *tail; /* read, not yet due */
    uv_timer_t timer;   /* armed at head->due_ns while head != NULL */
    uv_shutdown_t shutdown_req;
    size_t pending_bytes; /* queued + handed to uv_write, not yet written */
    bool paused;          /* reading from src stopped for backpressure */
    bool eof;             /* src sent FIN */
    bool fin_sent;        /* shutdown of dst requested */
    bool fin_done;        /* shutdown of dst completed */
} direction;

typedef struct conn {
    struct proxy *proxy;
    struct conn *prev, *next;
    uv_tcp_t client, upstream;
    uv_connect_t connect_req;
    direction up;   /* client -> upstream */
    direction down; /* upstream -> client */
    int handles_open;
    bool closing;
} conn;

typedef enum { REQ_DELAY, REQ_MODE, REQ_CLOSE_ALL, REQ_RESET_ALL, REQ_STOP } request_kind;

/* Lives on the caller's stack until the loop sets done (under the mutex). */
typedef struct request {
    struct request *next;
    request_kind kind;
    unsigned value;
    bool done;
} request;

struct proxy {
    uv_loop_t loop;
    uv_thread_t thread;
    uv_async_t wakeup;
    uv_tcp_t *listener; /* NULL while refusing */
    struct sockaddr_in listen_addr;
    struct sockaddr_storage upstream_addr;
    int port;
    /* Owned by the loop thread. */
    unsigned delay_ms;
    proxy_mode mode;
    conn *conns;
    /* Shared. */
    atomic_uint connections;
    uv_mutex_t mutex;
    uv_cond_t applied;
    request *requests, *requests_tail;
};

/* ---- connections ----------------------------------------------------------------------------- */

static void on_handle_closed(uv_handle_t *handle)
{
    direction *d = handle->data;
    conn *c = d->conn;
    if (--c->handles_open == 0)
        free(c);
}

static void drop_queue(direction *d)
{
    while (d->head != NULL) {
        chunk *ch = d->head;
        d->head = ch->next;
        d->pending_bytes -= ch->len;
        free(ch);
    }
    d->tail = NULL;
    uv_timer_stop(&d->timer);
}

static void close_tcp(uv_tcp_t *tcp, bool reset)
{
    /* close_reset refuses a handle that is shutting down; a plain close is all we can do then. */
    if (reset && uv_tcp_close_reset(tcp, on_handle_closed) == 0)
        return;
    uv_close((uv_handle_t *)tcp, on_handle_closed);
}

/* Close both sides, with an RST when reset. Pending writes end with UV_ECANCELED before the
 * close callbacks run, and c is freed in the last of those. */
static void conn_close(conn *c, bool reset)
{
    if (c->closing)
        return;
    c->closing = true;
    proxy *p = c->proxy;
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        p->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    atomic_fetch_sub(&p->connections, 1);
    drop_queue(&c->up);
    drop_queue(&c->down);
    uv_close((uv_handle_t *)&c->up.timer, on_handle_closed);
    uv_close((uv_handle_t *)&c->down.timer, on_handle_closed);
    close_tcp(&c->client, reset);
    close_tcp(&c->upstream, reset);
}

static direction *other_direction(direction *d)
{
    return d == &d->conn->up ? &d->conn->down : &d->conn->up;
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    direction *d = req->data;
    if (status == UV_ECANCELED)
        return; /* the connection is closing */
    if (status < 0) {
        conn_close(d->conn, false);
        return;
    }
    d->fin_done = true;
    if (other_direction(d)->fin_done)
        conn_close(d->conn, false);
}

/* Once src sent FIN and all it sent before is written, pass the FIN on (a blackhole holds it
 * like the data before it). */
static void maybe_pass_fin(direction *d)
{
    if (!d->eof || d->pending_bytes > 0 || d->fin_sent || d->conn->closing ||
        d->conn->proxy->mode == PROXY_BLACKHOLE)
        return;
    d->fin_sent = true;
    d->shutdown_req.data = d;
    if (uv_shutdown(&d->shutdown_req, (uv_stream_t *)d->dst, on_shutdown) != 0)
        conn_close(d->conn, false);
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

static void maybe_resume(direction *d)
{
    if (!d->paused || d->pending_bytes >= LOW_WATER_BYTES || d->conn->closing)
        return;
    d->paused = false;
    if (uv_read_start((uv_stream_t *)d->src, on_alloc, on_read) != 0)
        conn_close(d->conn, true);
}

static void on_write(uv_write_t *req, int status)
{
    chunk *ch = req->data;
    direction *d = ch->dir;
    size_t len = ch->len;
    free(ch);
    if (status == UV_ECANCELED)
        return; /* the connection is closing */
    d->pending_bytes -= len;
    if (status < 0) {
        conn_close(d->conn, true); /* the destination is gone: reset the source */
        return;
    }
    maybe_resume(d);
    maybe_pass_fin(d);
}

static void write_chunk(direction *d, chunk *ch)
{
    uv_buf_t b = uv_buf_init(ch->data, (unsigned)ch->len);
    ch->req.data = ch;
    if (uv_write(&ch->req, (uv_stream_t *)d->dst, &b, 1, on_write) != 0) {
        d->pending_bytes -= ch->len;
        free(ch);
        conn_close(d->conn, true);
    }
}

static void on_due(uv_timer_t *timer);

static void arm_timer(direction *d)
{
    if (d->head == NULL || d->conn->proxy->mode == PROXY_BLACKHOLE)
        return;
    uint64_t now_ns = uv_hrtime();
    uint64_t wait_ms = 0;
    if (d->head->due_ns > now_ns)
        wait_ms = (d->head->due_ns - now_ns + 999999) / 1000000;
    uv_timer_start(&d->timer, on_due, wait_ms, 0);
}

static void on_due(uv_timer_t *timer)
{
    direction *d = timer->data;
    uint64_t now_ns = uv_hrtime();
    while (!d->conn->closing && d->head != NULL && d->head->due_ns <= now_ns) {
        chunk *ch = d->head;
        d->head = ch->next;
        if (d->head == NULL)
            d->tail = NULL;
        write_chunk(d, ch);
    }
    if (!d->conn->closing)
        arm_timer(d);
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
    chunk *ch = malloc(sizeof(*ch) + CHUNK_BYTES);
    /* A NULL base makes libuv report UV_ENOBUFS to on_read, which closes the connection. */
    *buf = uv_buf_init(ch != NULL ? ch->data : NULL, ch != NULL ? CHUNK_BYTES : 0);
}

static void forward(direction *d, chunk *ch, size_t len)
{
    proxy *p = d->conn->proxy;
    if (len < CHUNK_BYTES / 4) { /* do not let small reads pin 64 KiB each while delayed */
        chunk *small = realloc(ch, sizeof(*ch) + len);
        if (small != NULL)
            ch = small;
    }
    ch->next = NULL;
    ch->dir = d;
    ch->len = len;
    d->pending_bytes += len;
    if (d->pending_bytes > HIGH_WATER_BYTES && !d->paused) {
        uv_read_stop((uv_stream_t *)d->src);
        d->paused = true;
    }
    if (p->delay_ms == 0 && d->head == NULL && p->mode != PROXY_BLACKHOLE) {
        write_chunk(d, ch);
        return;
    }
    ch->due_ns = uv_hrtime() + (uint64_t)p->delay_ms * 1000000;
    if (d->tail != NULL) {
        d->tail->next = ch;
        d->tail = ch;
        return;
    }
    d->head = d->tail = ch;
    arm_timer(d);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    direction *d = stream->data;
    chunk *ch = buf->base != NULL ? (chunk *)(buf->base - offsetof(chunk, data)) : NULL;
    if (nread > 0) {
        forward(d, ch, (size_t)nread);
        return;
    }
    free(ch);
    if (nread == 0)
        return; /* EAGAIN */
    if (nread == UV_EOF) {
        d->eof = true;
        uv_read_stop(stream);
        maybe_pass_fin(d);
        return;
    }
    conn_close(d->conn, true); /* ECONNRESET, ENOBUFS, ...: reset the other side at once */
}

static void on_upstream_connected(uv_connect_t *req, int status)
{
    conn *c = req->data;
    if (status == UV_ECANCELED || c->closing)
        return;
    if (status < 0) {
        conn_close(c, false);
        return;
    }
    uv_tcp_nodelay(&c->upstream, 1);
    if (uv_read_start((uv_stream_t *)&c->client, on_alloc, on_read) != 0 ||
        uv_read_start((uv_stream_t *)&c->upstream, on_alloc, on_read) != 0)
        conn_close(c, true);
}

static void init_direction(conn *c, direction *d, uv_tcp_t *src, uv_tcp_t *dst)
{
    d->conn = c;
    d->src = src;
    d->dst = dst;
    src->data = d;
    uv_timer_init(&c->proxy->loop, &d->timer);
    d->timer.data = d;
}

static void on_connection(uv_stream_t *listener, int status)
{
    proxy *p = listener->data;
    if (status < 0) {
        fprintf(stderr, "proxy %d: accept: %s\n", p->port, uv_strerror(status));
        return;
    }
    conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        /* libuv holds the connection until the next uv_accept; nothing better to do. */
        fprintf(stderr, "proxy %d: out of memory for a connection\n", p->port);
        return;
    }
    c->proxy = p;
    uv_tcp_init(&p->loop, &c->client);
    uv_tcp_init(&p->loop, &c->upstream);
    init_direction(c, &c->up, &c->client, &c->upstream);
    init_direction(c, &c->down, &c->upstream, &c->client);
    c->handles_open = 4;
    c->next = p->conns;
    if (p->conns != NULL)
        p->conns->prev = c;
    p->conns = c;
    atomic_fetch_add(&p->connections, 1);

    if (uv_accept(listener, (uv_stream_t *)&c->client) != 0) {
        conn_close(c, false);
        return;
    }
    uv_tcp_nodelay(&c->client, 1);
    c->connect_req.data = c;
    int rc = uv_tcp_connect(&c->connect_req, &c->upstream,
                            (const struct sockaddr *)&p->upstream_addr, on_upstream_connected);
    if (rc != 0)
        conn_close(c, false);
}

/* ---- listener and modes ---------------------------------------------------------------------- */

static void on_listener_closed(uv_handle_t *handle)
{
    free(handle);
}

/* Returns 0 or a libuv error; on error nothing is left listening. */
static int listen_start(proxy *p)
{
    uv_tcp_t *listener = malloc(sizeof(*listener));
    if (listener == NULL)
        return UV_ENOMEM;
    uv_tcp_init(&p->loop, listener);
    listener->data = p;
    int rc = uv_tcp_bind(listener, (const struct sockaddr *)&p->listen_addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)listener, LISTEN_BACKLOG, on_connection);
    if (rc != 0) {
        uv_close((uv_handle_t *)listener, on_listener_closed);
        return rc;
    }
    p->listener = listener;
    return 0;
}

static void listen_stop(proxy *p)
{
    if (p->listener == NULL)
        return;
    /* Closes the socket now: connects fail with ECONNREFUSED from here on, and connections
     * still in the backlog are reset. */
    uv_close((uv_handle_t *)p->listener, on_listener_closed);
    p->listener = NULL;
}

static void set_mode(proxy *p, proxy_mode mode)
{
    p->mode = mode;
    if (mode == PROXY_REFUSE) {
        listen_stop(p);
    } else if (p->listener == NULL) {
        int rc = listen_start(p);
        if (rc != 0)
            fprintf(stderr, "proxy %d: listen again: %s\n", p->port, uv_strerror(rc));
    }
    /* Entering a blackhole stops every direction's timer, so queued data stays queued; leaving
     * it re-arms them, and what is overdue goes out at once, in order, followed by any FIN. */
    for (conn *c = p->conns; c != NULL; c = c->next) {
        direction *dirs[2] = {&c->up, &c->down};
        for (int i = 0; i < 2; i++) {
            if (mode == PROXY_BLACKHOLE) {
                uv_timer_stop(&dirs[i]->timer);
                continue;
            }
            arm_timer(dirs[i]);
            maybe_pass_fin(dirs[i]);
        }
    }
}

static void close_all(proxy *p, bool reset)
{
    while (p->conns != NULL)
        conn_close(p->conns, reset); /* unlinks it */
}

/* ---- requests from other threads ------------------------------------------------------------- */

static void apply(proxy *p, const request *r)
{
    switch (r->kind) {
    case REQ_DELAY:
        p->delay_ms = r->value;
        break;
    case REQ_MODE:
        set_mode(p, (proxy_mode)r->value);
        break;
    case REQ_CLOSE_ALL:
        close_all(p, false);
        break;
    case REQ_RESET_ALL:
        close_all(p, true);
        break;
    case REQ_STOP:
        close_all(p, false);
        listen_stop(p);
        uv_close((uv_handle_t *)&p->wakeup, NULL); /* the loop ends once all is closed */
        break;
    }
}

static void on_wakeup(uv_async_t *async)
{
    proxy *p = async->data;
    uv_mutex_lock(&p->mutex);
    request *list = p->requests;
    p->requests = p->requests_tail = NULL;
    uv_mutex_unlock(&p->mutex);

    for (request *r = list; r != NULL; r = r->next)
        apply(p, r);

    uv_mutex_lock(&p->mutex);
    while (list != NULL) {
        request *next = list->next; /* list is gone once done is seen */
        list->done = true;
        list = next;
    }
    uv_cond_broadcast(&p->applied);
    uv_mutex_unlock(&p->mutex);
}

static void submit(proxy *p, request_kind kind, unsigned value)
{
    request r = {.kind = kind, .value = value};
    uv_mutex_lock(&p->mutex);
    if (p->requests_tail != NULL)
        p->requests_tail->next = &r;
    else
        p->requests = &r;
    p->requests_tail = &r;
    uv_mutex_unlock(&p->mutex);
    uv_async_send(&p->wakeup);
    uv_mutex_lock(&p->mutex);
    while (!r.done)
        uv_cond_wait(&p->applied, &p->mutex);
    uv_mutex_unlock(&p->mutex);
}

/* ---- lifecycle ------------------------------------------------------------------------------- */

static void run_loop(void *arg)
{
    proxy *p = arg;
    uv_run(&p->loop, UV_RUN_DEFAULT);
}

/* Parse a loopback address; anything else is refused. Returns 0 or -1. */
static int parse_loopback(const char *host, int port, struct sockaddr_storage *out)
{
    if (strcmp(host, "localhost") == 0)
        host = "127.0.0.1";
    memset(out, 0, sizeof(*out));
    struct sockaddr_in *in4 = (struct sockaddr_in *)out;
    if (uv_ip4_addr(host, port, in4) == 0)
        return (ntohl(in4->sin_addr.s_addr) >> 24) == 127 ? 0 : -1;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)out;
    if (uv_ip6_addr(host, port, in6) == 0)
        return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) ? 0 : -1;
    return -1;
}

/* Start the thread with every asynchronous signal blocked: SIGPIPE from a write to a peer that
 * reset then stays pending on that thread and the write fails with EPIPE, and signals meant for
 * the process (SIGINT, SIGTERM) go to the caller's threads. */
static int start_thread(proxy *p)
{
    sigset_t all, old;
    sigfillset(&all);
    int sync_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP};
    for (size_t i = 0; i < sizeof(sync_signals) / sizeof(sync_signals[0]); i++)
        sigdelset(&all, sync_signals[i]);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = uv_thread_create(&p->thread, run_loop, p);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

proxy *proxy_start(int listen_port, const char *upstream_host, int upstream_port)
{
    if (listen_port < 0 || listen_port > 65535 || upstream_port < 1 || upstream_port > 65535) {
        fprintf(stderr, "proxy: port out of range (listen %d, upstream %d)\n", listen_port,
                upstream_port);
        return NULL;
    }
    if (upstream_host == NULL) {
        fprintf(stderr, "proxy: no upstream host\n");
        return NULL;
    }
    proxy *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        fprintf(stderr, "proxy: out of memory\n");
        return NULL;
    }
    if (parse_loopback(upstream_host, upstream_port, &p->upstream_addr) != 0) {
        fprintf(stderr, "proxy: upstream %s is not a loopback address (127.0.0.0/8 or ::1)\n",
                upstream_host);
        free(p);
        return NULL;
    }
    uv_ip4_addr("127.0.0.1", listen_port, &p->listen_addr);
    atomic_init(&p->connections, 0);
    int rc = uv_loop_init(&p->loop);
    if (rc != 0) {
        fprintf(stderr, "proxy: loop: %s\n", uv_strerror(rc));
        free(p);
        return NULL;
    }
    uv_async_init(&p->loop, &p->wakeup, on_wakeup);
    p->wakeup.data = p;

    const char *what = "listen";
    rc = listen_start(p);
    if (rc == 0) {
        struct sockaddr_in bound;
        int len = sizeof(bound);
        what = "getsockname";
        rc = uv_tcp_getsockname(p->listener, (struct sockaddr *)&bound, &len);
        p->port = ntohs(bound.sin_port);
        p->listen_addr.sin_port = bound.sin_port; /* listen again on this port after REFUSE */
    }
    if (rc == 0) {
        rc = uv_mutex_init(&p->mutex);
        what = "mutex";
        if (rc == 0 && (rc = uv_cond_init(&p->applied)) != 0)
            uv_mutex_destroy(&p->mutex);
    }
    if (rc == 0) {
        what = "thread";
        if ((rc = start_thread(p)) != 0) {
            uv_cond_destroy(&p->applied);
            uv_mutex_destroy(&p->mutex);
        }
    }
    if (rc != 0) {
        fprintf(stderr, "proxy: %s on 127.0.0.1:%d: %s\n", what, listen_port, uv_strerror(rc));
        listen_stop(p);
        uv_close((uv_handle_t *)&p->wakeup, NULL);
        uv_run(&p->loop, UV_RUN_DEFAULT);
        uv_loop_close(&p->loop);
        free(p);
        return NULL;
    }
    return p;
}

int proxy_port(const proxy *p)
{
    return p->port;
}

void proxy_set_delay_ms(proxy *p, unsigned one_way_ms)
{
    submit(p, REQ_DELAY, one_way_ms);
}

void proxy_set_mode(proxy *p, proxy_mode mode)
{
    submit(p, REQ_MODE, (unsigned)mode);
}

void proxy_close_all(proxy *p)
{
    submit(p, REQ_CLOSE_ALL, 0);
}

void proxy_reset_all(proxy *p)
{
    submit(p, REQ_RESET_ALL, 0);
}

unsigned proxy_connections(const proxy *p)
{
    return atomic_load(&p->connections);
}

void proxy_stop(proxy *p)
{
    if (p == NULL)
        return;
    submit(p, REQ_STOP, 0);
    uv_thread_join(&p->thread);
    int rc = uv_loop_close(&p->loop);
    if (rc != 0)
        fprintf(stderr, "proxy %d: loop close: %s\n", p->port, uv_strerror(rc));
    uv_cond_destroy(&p->applied);
    uv_mutex_destroy(&p->mutex);
    free(p);
}
