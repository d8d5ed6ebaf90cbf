/* SPDX-License-Identifier: MIT */
/* stream.c - a node's byte stream on libuv: connect, read, write, close, reconnect; TLS through
 * tls.h when the URL asks for it. See stream.h for the states and their transitions. */
#include "stream.h"

#include <string.h>

#define READ_BUF_SIZE 65536
#define ERR_LEN REDLOCK_ERROR_TEXT_MAX /* messages end up in per-node error slots */

/* One connection. Lives until its handle's close callback, which may be after the stream moved
 * on to a new connection. */
struct redlock__stream_conn {
    union {
        uv_handle_t handle;
        uv_stream_t stream;
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    } h;
    uv_connect_t connect_req;
    uv_write_t write_req;
    redlock__buf inflight; /* bytes handed to uv_write */
    bool writing;
    bool detached;     /* the stream no longer uses this connection */
    redlock__tls *tls; /* TLS over this connection, or NULL */
    bool heard;        /* TLS: the server has sent something */
    redlock__stream *stream;
    char rbuf[READ_BUF_SIZE];
};

typedef redlock__stream_conn conn;

static void stream_connect(redlock__stream *s);

/* ---- teardown ------------------------------------------------------------------------------ */

/* One of its handles (or a connection's, or the lookup) closed: the stream is closed once it is
 * asked to and none is left. */
static void part_closed(redlock__stream *s)
{
    if (!redlock__closing_done(&s->closes) || s->state != REDLOCK__STREAM_CLOSED)
        return;
    redlock__buf_free(&s->out, s->cfg.alloc);
    redlock__tls_resume_clear(&s->resume);
    s->cfg.on_closed(s);
}

static void on_conn_closed(uv_handle_t *h)
{
    conn *c = REDLOCK__CONTAINER_OF(h, conn, h.handle);
    redlock__stream *s = c->stream;
    redlock__buf_free(&c->inflight, s->cfg.alloc);
    redlock__free(s->cfg.alloc, c);
    part_closed(s);
}

/* Stop using the current connection; its memory goes in its close callback. */
static void detach_conn(redlock__stream *s)
{
    conn *c = s->conn;
    if (c == NULL)
        return;
    s->conn = NULL;
    c->detached = true;
    redlock__tls_free(c->tls); /* nothing reads or writes through it any more */
    c->tls = NULL;
    redlock__closing_add(&s->closes, 1); /* the stream outlives every connection it ever had */
    uv_close(&c->h.handle, on_conn_closed);
}

static uint64_t jitter(redlock__stream *s, uint64_t base_us)
{
    /* xorshift64: jitter spreads reconnects of many clients; it needs no secrecy. */
    s->rng ^= s->rng << 13;
    s->rng ^= s->rng >> 7;
    s->rng ^= s->rng << 17;
    /* base * [0.5, 1.5) */
    return base_us / 2 + (base_us > 0 ? s->rng % base_us : 0);
}

static void on_reconnect_timer(uv_timer_t *t)
{
    redlock__stream *s = REDLOCK__CONTAINER_OF(t, redlock__stream, reconnect_timer);
    if (s->state == REDLOCK__STREAM_IDLE)
        stream_connect(s);
}

/* Leave the current connection or attempt: go IDLE and schedule the next attempt. */
static void go_idle(redlock__stream *s)
{
    bool was_established = s->state == REDLOCK__STREAM_ESTABLISHED;
    detach_conn(s);
    s->state = REDLOCK__STREAM_IDLE;
    s->out.len = 0;
    uv_timer_stop(&s->connect_timer);
    /* A connection that worked starts over at the shortest backoff. */
    if (was_established || s->backoff_us == 0)
        s->backoff_us = s->cfg.reconnect_min_us;
    uint64_t delay = jitter(s, s->backoff_us);
    s->stats.next_attempt_us = delay;
    s->backoff_us = REDLOCK__MIN(s->backoff_us * 2, s->cfg.reconnect_max_us);
    uv_timer_start(&s->reconnect_timer, on_reconnect_timer, redlock__ms_ceil(delay), 0);
}

/* The stream failed on its own: go IDLE, then tell the owner. */
static void stream_fail(redlock__stream *s, const char *why)
{
    if (s->state == REDLOCK__STREAM_CLOSED || s->state == REDLOCK__STREAM_IDLE)
        return;
    go_idle(s);
    s->cfg.on_down(s, why);
}

static void fail_uv(redlock__stream *s, const char *what, int status)
{
    char why[ERR_LEN];
    redlock__fmt(why, sizeof(why), "%s: %s", what, uv_strerror(status));
    stream_fail(s, why);
}

/* The open connection broke (read or write error, end of file). Right after a TLS handshake,
 * before the owner accepted the connection, the reason may be the server's refusal of the
 * client's certificate, whose alert the reset overtook: tls.c knows whether it asked for one. */
static void fail_io(redlock__stream *s, const char *why)
{
    char better[ERR_LEN];
    if (s->state == REDLOCK__STREAM_OPEN && s->conn != NULL && s->conn->tls != NULL &&
        redlock__tls_explain_drop(s->conn->tls, better, sizeof(better)))
        why = better;
    stream_fail(s, why);
}

static void fail_io_uv(redlock__stream *s, const char *what, int status)
{
    char why[ERR_LEN];
    redlock__fmt(why, sizeof(why), "%s: %s", what, uv_strerror(status));
    fail_io(s, why);
}

void redlock__stream_drop(redlock__stream *s)
{
    if (s->state == REDLOCK__STREAM_CLOSED || s->state == REDLOCK__STREAM_IDLE)
        return;
    go_idle(s);
}

void redlock__stream_established(redlock__stream *s)
{
    if (s->state != REDLOCK__STREAM_OPEN)
        return;
    s->state = REDLOCK__STREAM_ESTABLISHED;
    s->backoff_us = 0;
    uv_timer_stop(&s->connect_timer);
}

/* ---- writes -------------------------------------------------------------------------------- */

static void flush_now(redlock__stream *s);

/* A remainder the socket did not take at once has been written. */
static void on_write(uv_write_t *req, int status)
{
    conn *c = REDLOCK__CONTAINER_OF(req, conn, write_req);
    c->writing = false;
    c->inflight.len = 0;
    if (c->detached)
        return;
    redlock__stream *s = c->stream;
    redlock__buf_trim(&c->inflight, s->cfg.alloc); /* a burst's buffer goes, a steady one stays */
    if (status < 0) {
        fail_io_uv(s, "write", status);
        return;
    }
    flush_now(s); /* what came meanwhile */
}

/* With TLS: encrypt the whole output buffer in one SSL_write (as few records as its size
 * needs), then take every waiting record, the handshake's too, into c->inflight. Returns false
 * when the stream failed. */
static bool take_ciphertext(redlock__stream *s, conn *c)
{
    char why[ERR_LEN];
    if (s->out.len > 0 && redlock__stream_is_open(s)) {
        if (redlock__tls_write(c->tls, s->out.data, s->out.len, why, sizeof(why)) != 0) {
            stream_fail(s, why);
            return false;
        }
        s->out.len = 0;
    }
    c->inflight.len = 0;
    if (redlock__tls_take(c->tls, &c->inflight, s->cfg.alloc) != 0) {
        stream_fail(s, "tls: out of memory");
        return false;
    }
    return true;
}

/* Write b's bytes: on the spot as far as the socket takes them (no request, no callback, no
 * loop turn), the rest through uv_write from c->inflight. b is c->inflight (TLS) or the stream's
 * output buffer, left empty either way. Returns 0 or a libuv error. */
static int write_buf(redlock__stream *s, conn *c, redlock__buf *b)
{
    s->stats.writes++;
    uv_buf_t buf = uv_buf_init(b->data, (unsigned)b->len);
    int n = uv_try_write(&c->h.stream, &buf, 1);
    if (n == UV_EAGAIN)
        n = 0;
    if (n < 0) {
        b->len = 0;
        return n;
    }
    if ((size_t)n == b->len) {
        b->len = 0;
        redlock__buf_trim(b, s->cfg.alloc);
        return 0;
    }
    if (b != &c->inflight) { /* swap: the empty in-flight buffer takes out's place */
        redlock__buf tmp = c->inflight;
        c->inflight = *b;
        *b = tmp;
        b->len = 0;
    }
    c->inflight.len -= (size_t)n;
    memmove(c->inflight.data, c->inflight.data + n, c->inflight.len);
    s->stats.writes++;
    buf = uv_buf_init(c->inflight.data, (unsigned)c->inflight.len);
    c->writing = true;
    int rc = uv_write(&c->write_req, &c->h.stream, &buf, 1, on_write);
    if (rc < 0) {
        c->writing = false;
        c->inflight.len = 0;
    }
    return rc;
}

/* Write what waits, unless a remainder is still in flight (on_write comes back here). */
static void flush_now(redlock__stream *s)
{
    conn *c = s->conn;
    if (c == NULL || c->writing)
        return;
    redlock__buf *b = &s->out;
    if (c->tls != NULL) {
        if (!take_ciphertext(s, c))
            return;
        b = &c->inflight;
    } else if (!redlock__stream_is_open(s)) {
        return;
    }
    if (b->len == 0)
        return;
    int rc = write_buf(s, c, b);
    if (rc < 0)
        fail_io_uv(s, "write", rc);
}

/* The stream's turn in this loop iteration: whichever of its two handles runs first. */
static void flush_turn(redlock__stream *s)
{
    s->flush_due = false;
    uv_idle_stop(&s->flush_idle);
    uv_check_stop(&s->flush_check);
    flush_now(s);
}

static void on_flush_idle(uv_idle_t *h)
{
    flush_turn(REDLOCK__CONTAINER_OF(h, redlock__stream, flush_idle));
}

static void on_flush_check(uv_check_t *h)
{
    flush_turn(REDLOCK__CONTAINER_OF(h, redlock__stream, flush_check));
}

void redlock__stream_flush(redlock__stream *s)
{
    if (s->flush_due || s->conn == NULL || s->state == REDLOCK__STREAM_CLOSED)
        return;
    s->flush_due = true;
    uv_idle_start(&s->flush_idle, on_flush_idle);
    uv_check_start(&s->flush_check, on_flush_check);
}

/* At close: what is due goes out as far as the socket takes it at once (a release sent just
 * before the close, say); an error no longer matters to anyone. */
static void write_before_close(redlock__stream *s)
{
    conn *c = s->conn;
    if (!s->flush_due || c == NULL || c->writing || !redlock__stream_is_open(s))
        return;
    redlock__buf *b = &s->out;
    if (c->tls != NULL) {
        char why[ERR_LEN];
        c->inflight.len = 0;
        if (s->out.len > 0 &&
            redlock__tls_write(c->tls, s->out.data, s->out.len, why, sizeof(why)) != 0)
            return;
        if (redlock__tls_take(c->tls, &c->inflight, s->cfg.alloc) != 0)
            return;
        b = &c->inflight;
    }
    if (b->len > 0) {
        uv_buf_t buf = uv_buf_init(b->data, (unsigned)b->len);
        (void)uv_try_write(&c->h.stream, &buf, 1);
        b->len = 0;
    }
}

/* ---- reads --------------------------------------------------------------------------------- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    conn *c = REDLOCK__CONTAINER_OF(h, conn, h.handle);
    (void)suggested;
    *buf = uv_buf_init(c->rbuf, sizeof(c->rbuf));
}

static void tls_input(redlock__stream *s, conn *c, const char *data, size_t len);

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    conn *c = REDLOCK__CONTAINER_OF(st, conn, h.stream);
    (void)buf;
    if (c->detached || nread == 0)
        return;
    redlock__stream *s = c->stream;
    if (nread == UV_EOF) {
        fail_io(s, s->state == REDLOCK__STREAM_SECURING
                       ? "tls: connection closed by the node during the handshake"
                       : "connection closed by the node");
        return;
    }
    if (nread < 0) {
        fail_io_uv(s, "read", (int)nread);
        return;
    }
    if (c->tls != NULL)
        tls_input(s, c, c->rbuf, (size_t)nread);
    else
        s->cfg.on_read(s, c->rbuf, (size_t)nread);
}

/* ---- TLS ----------------------------------------------------------------------------------- */

/* Drive the TLS handshake with what came; once it is done the stream is OPEN. Returns false
 * when it is not (yet), or the stream failed. */
static bool tls_secure(redlock__stream *s, conn *c)
{
    char why[ERR_LEN];
    int rc = redlock__tls_handshake(c->tls, why, sizeof(why));
    if (rc < 0) {
        stream_fail(s, why);
        return false;
    }
    redlock__stream_flush(s); /* the handshake's own records */
    if (rc == 0 || c->detached)
        return false;
    bool resumed = redlock__tls_resumed(c->tls);
    s->stats.tls_handshakes++;
    s->stats.tls_resumed += resumed;
    s->stats.last_resumed = resumed;
    s->stats.last_handshake_us = redlock__now_us() - s->secure_start_us;
    s->state = REDLOCK__STREAM_OPEN;
    s->cfg.on_open(s);
    return !c->detached;
}

/* Ciphertext arrived: feed it, finish the handshake if it is under way, and hand every byte of
 * plaintext to the owner (TLS 1.3 session tickets are taken on the way, inside tls.c). */
static void tls_input(redlock__stream *s, conn *c, const char *data, size_t len)
{
    c->heard = true;
    if (redlock__tls_feed(c->tls, data, len) != 0) {
        stream_fail(s, "tls: out of memory");
        return;
    }
    if (s->state == REDLOCK__STREAM_SECURING && !tls_secure(s, c))
        return;
    char why[ERR_LEN];
    for (;;) {
        const char *plain;
        size_t plain_len;
        int rc = redlock__tls_read(c->tls, &plain, &plain_len, why, sizeof(why));
        if (rc < 0) {
            stream_fail(s, why);
            return;
        }
        if (rc == 0)
            break;
        s->cfg.on_read(s, plain, plain_len);
        if (c->detached) /* the owner dropped the connection or closed the stream */
            return;
    }
    redlock__stream_flush(s); /* anything reading produced (an alert, a key update) */
}

static void tls_begin(redlock__stream *s, conn *c)
{
    char why[ERR_LEN];
    if (redlock__tls_new(s->cfg.tls, s->cfg.url->host, &s->resume, &c->tls, why, sizeof(why)) !=
        0) {
        stream_fail(s, why);
        return;
    }
    s->state = REDLOCK__STREAM_SECURING;
    s->secure_start_us = redlock__now_us();
    tls_secure(s, c); /* writes the ClientHello */
}

/* ---- connecting ---------------------------------------------------------------------------- */

void redlock__stream_pending_why(const redlock__stream *s, char *out, size_t out_len)
{
    const char *what = "";
    switch (s->state) {
    case REDLOCK__STREAM_RESOLVING:
        what = "looking up the host name";
        break;
    case REDLOCK__STREAM_CONNECTING:
        what = "TCP connect under way";
        break;
    case REDLOCK__STREAM_SECURING:
        what = s->conn != NULL && !s->conn->heard
                   ? "no answer to the TLS handshake: " REDLOCK__TLS_PLAIN_HINT
                   : "TLS handshake under way";
        break;
    case REDLOCK__STREAM_OPEN:
        what = "waiting for the answers to AUTH, SELECT, SCRIPT LOAD, INFO";
        break;
    default:
        break;
    }
    redlock__fmt(out, out_len, "%s", what);
}

static void connect_to(redlock__stream *s, const struct sockaddr *addr);

static void on_connect(uv_connect_t *req, int status)
{
    conn *c = REDLOCK__CONTAINER_OF(req, conn, connect_req);
    if (c->detached)
        return;
    redlock__stream *s = c->stream;
    if (status < 0 && s->next_addr < s->n_addrs) {
        /* Another address of the host may answer: retry on a fresh handle. */
        detach_conn(s);
        connect_to(s, (const struct sockaddr *)&s->addrs[s->next_addr++]);
        return;
    }
    if (status < 0) {
        fail_uv(s, "connect", status);
        return;
    }
    if (!s->cfg.url->is_unix) {
        uv_tcp_nodelay(&c->h.tcp, 1);
        uv_tcp_keepalive(&c->h.tcp, 1, 30);
    }
    int rc = uv_read_start(&c->h.stream, on_alloc, on_read);
    if (rc < 0) {
        fail_uv(s, "read", rc);
        return;
    }
    if (s->cfg.url->tls) {
        tls_begin(s, c);
        return;
    }
    s->state = REDLOCK__STREAM_OPEN;
    s->cfg.on_open(s);
}

static void on_connect_timeout(uv_timer_t *t)
{
    redlock__stream *s = REDLOCK__CONTAINER_OF(t, redlock__stream, connect_timer);
    if (s->state == REDLOCK__STREAM_IDLE || s->state == REDLOCK__STREAM_ESTABLISHED ||
        s->state == REDLOCK__STREAM_CLOSED)
        return;
    char why[ERR_LEN];
    unsigned long long ms = (unsigned long long)(s->cfg.connect_timeout_us / 1000);
    if (s->state == REDLOCK__STREAM_SECURING && s->conn != NULL && !s->conn->heard)
        redlock__fmt(why, sizeof(why),
                     "tls: no answer to the TLS handshake within %llu ms (server stopped, or "
                     "%s)",
                     ms, REDLOCK__TLS_PLAIN_HINT);
    else
        redlock__fmt(why, sizeof(why), "connect: timed out after %llu ms", ms);
    stream_fail(s, why);
}

static void connect_to(redlock__stream *s, const struct sockaddr *addr)
{
    s->state = REDLOCK__STREAM_CONNECTING;
    conn *c = redlock__calloc(s->cfg.alloc, 1, sizeof(*c));
    if (c == NULL) {
        stream_fail(s, "connect: out of memory");
        return;
    }
    c->stream = s;
    int rc;
    if (s->cfg.url->is_unix) {
        rc = uv_pipe_init(s->loop, &c->h.pipe, 0);
        if (rc == 0) {
            s->conn = c;
            uv_pipe_connect(&c->connect_req, &c->h.pipe, s->cfg.url->path, on_connect);
        }
    } else {
        rc = uv_tcp_init(s->loop, &c->h.tcp);
        if (rc == 0) {
            s->conn = c;
            rc = uv_tcp_connect(&c->connect_req, &c->h.tcp, addr, on_connect);
        }
    }
    if (rc < 0) {
        if (s->conn != c) /* the handle was never initialised */
            redlock__free(s->cfg.alloc, c);
        fail_uv(s, "connect", rc);
    }
}

static void set_port(struct sockaddr *sa, int port)
{
    if (sa->sa_family == AF_INET)
        ((struct sockaddr_in *)(void *)sa)->sin_port = htons((uint16_t)port);
    else if (sa->sa_family == AF_INET6)
        ((struct sockaddr_in6 *)(void *)sa)->sin6_port = htons((uint16_t)port);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    redlock__stream *s = REDLOCK__CONTAINER_OF(req, redlock__stream, gai);
    s->gai_active = false;
    if (s->state == REDLOCK__STREAM_CLOSED) {
        uv_freeaddrinfo(res);
        part_closed(s);
        return;
    }
    /* Only an attempt still waiting for an address takes the answer; otherwise it is stale (a
     * connect timeout abandoned the attempt that asked). */
    if (s->state != REDLOCK__STREAM_RESOLVING) {
        uv_freeaddrinfo(res);
        return;
    }
    if (status < 0 || res == NULL) {
        char why[ERR_LEN];
        redlock__fmt(why, sizeof(why), "resolve %s: %s", s->cfg.url->host, uv_strerror(status));
        uv_freeaddrinfo(res);
        stream_fail(s, why);
        return;
    }
    s->n_addrs = s->next_addr = 0;
    for (struct addrinfo *ai = res; ai != NULL && s->n_addrs < REDLOCK__STREAM_MAX_ADDRS;
         ai = ai->ai_next) {
        if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
            continue;
        memcpy(&s->addrs[s->n_addrs], ai->ai_addr, ai->ai_addrlen);
        set_port((struct sockaddr *)&s->addrs[s->n_addrs], s->cfg.url->port);
        s->n_addrs++;
    }
    uv_freeaddrinfo(res);
    if (s->n_addrs == 0) {
        char why[ERR_LEN];
        redlock__fmt(why, sizeof(why), "resolve %s: no IPv4 or IPv6 address", s->cfg.url->host);
        stream_fail(s, why);
        return;
    }
    connect_to(s, (const struct sockaddr *)&s->addrs[s->next_addr++]);
}

static void stream_connect(redlock__stream *s)
{
    s->stats.connect_attempts++;
    s->n_addrs = s->next_addr = 0;
    s->out.len = 0;
    /* libuv times timers from the loop's cached clock, which is stale when the caller was busy
     * before creating the client: refresh it, or the timeout fires early. */
    uv_update_time(s->loop);
    uv_timer_start(&s->connect_timer, on_connect_timeout,
                   redlock__ms_ceil(s->cfg.connect_timeout_us), 0);

    const redlock_url *u = s->cfg.url;
    if (u->is_unix) {
        connect_to(s, NULL);
        return;
    }
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    if (uv_ip4_addr(u->host, u->port, (struct sockaddr_in *)&ss) == 0 ||
        uv_ip6_addr(u->host, u->port, (struct sockaddr_in6 *)&ss) == 0) {
        connect_to(s, (struct sockaddr *)&ss);
        return;
    }
    s->state = REDLOCK__STREAM_RESOLVING;
    if (s->gai_active)
        return; /* an older lookup is still running: this attempt takes its answer */
    struct addrinfo hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = uv_getaddrinfo(s->loop, &s->gai, on_resolved, u->host, NULL, &hints);
    if (rc < 0) {
        char why[ERR_LEN];
        redlock__fmt(why, sizeof(why), "resolve %s: %s", u->host, uv_strerror(rc));
        stream_fail(s, why);
        return;
    }
    s->gai_active = true;
}

/* ---- life ---------------------------------------------------------------------------------- */

void redlock__stream_init(redlock__stream *s, uv_loop_t *loop, const redlock__stream_config *cfg)
{
    memset(s, 0, sizeof(*s));
    s->loop = loop;
    s->cfg = *cfg;
    s->state = REDLOCK__STREAM_IDLE;
}

void redlock__stream_start(redlock__stream *s)
{
    uint64_t seed = 0;
    if (uv_random(NULL, NULL, &seed, sizeof(seed), 0, NULL) != 0 || seed == 0)
        seed = uv_hrtime() | 1;
    s->rng = seed;
    uv_timer_init(s->loop, &s->connect_timer);
    uv_timer_init(s->loop, &s->reconnect_timer);
    uv_idle_init(s->loop, &s->flush_idle);
    uv_check_init(s->loop, &s->flush_check);
    stream_connect(s);
}

/* A timer's or a flush handle's. */
static void on_handle_closed(uv_handle_t *h)
{
    redlock__stream *s = h->data;
    part_closed(s);
}

void redlock__stream_close(redlock__stream *s)
{
    write_before_close(s);
    s->state = REDLOCK__STREAM_CLOSED;
    s->flush_due = false;
    /* the two timers and the two flush handles; connections and the lookup count themselves */
    redlock__closing_add(&s->closes, 4);
    detach_conn(s);
    if (s->gai_active) {
        redlock__closing_add(&s->closes, 1);
        uv_cancel((uv_req_t *)&s->gai);
    }
    s->connect_timer.data = s;
    s->reconnect_timer.data = s;
    uv_close((uv_handle_t *)&s->connect_timer, on_handle_closed);
    uv_close((uv_handle_t *)&s->reconnect_timer, on_handle_closed);
    s->flush_idle.data = s;
    s->flush_check.data = s;
    uv_close((uv_handle_t *)&s->flush_idle, on_handle_closed);
    uv_close((uv_handle_t *)&s->flush_check, on_handle_closed);
}
