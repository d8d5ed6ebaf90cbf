/* node.c - one Redis master on libuv: connection, handshake, writes, replies, deadlines,
 * reconnection. See node.h for the model. */
#include "node.h"

#include <stdlib.h>
#include <string.h>

#include <hiredis/read.h>

#include "command.h"
#include "handshake.h"

#define READ_BUF_SIZE 65536
#define ERR_LEN REDLOCK_ERROR_TEXT_MAX /* messages end up in per-node error slots */
/* A node that owes replies and has answered nothing for this many timeouts is dropped. */
#define DROP_AFTER_TIMEOUTS 3
#define MAX_ADDRS 8

typedef enum {
    NODE_IDLE,       /* no connection; requests fail fast; a reconnect may be scheduled */
    NODE_CONNECTING, /* resolving or connecting; requests queue (fail fast if the node is down) */
    NODE_HANDSHAKE,  /* connected, handshake answers pending; requests wait until they all came */
    NODE_READY,
    NODE_CLOSING
} node_state;

/* One connection. Lives until its handle's close callback, which may be after the node moved on
 * to a new connection. */
typedef struct conn {
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
    bool connected;
    bool detached; /* the node no longer uses this connection */
    redisReader *reader;
    redlock__node *node;
    char rbuf[READ_BUF_SIZE];
} conn;

struct redlock__node {
    uv_loop_t *loop;
    redlock__node_config cfg;
    node_state state;
    conn *conn;

    uv_timer_t deadline_timer; /* armed at or before the FIFO head's deadline */
    uv_timer_t conn_timer;     /* connect timeout, then reconnect backoff */
    uv_getaddrinfo_t gai;
    bool gai_active;
    /* Addresses of a resolved host name, tried in turn until one accepts ("localhost" may give
     * ::1 first while the server listens on 127.0.0.1 only). */
    struct sockaddr_storage addrs[MAX_ADDRS];
    unsigned n_addrs, next_addr;

    redlock__buf hs;           /* the handshake of the connection being made, until written */
    redlock__buf out;          /* appended commands not yet handed to uv_write; held until the
                                  handshake has succeeded, so nothing runs on a server that
                                  refused AUTH or SELECT */
    redlock__req *head, *tail; /* requests whose replies are awaited, in write order */
    unsigned fifo_len;
    unsigned skip_replies; /* replies owed to requests that already timed out */
    /* The handshake of the current connection (handshake.h): requests are written only once
     * it has succeeded. */
    redlock__handshake handshake;
    uint64_t last_reply_us;  /* last reply (or connect) time */
    uint64_t owing_since_us; /* when the node last went from owing nothing to owing a reply */
    uint64_t backoff_us;
    uint64_t rng; /* xorshift state for backoff jitter (not a secret) */
    char last_error[ERR_LEN];
    /* A connection failed and no new one has become ready since: the node is down, and the
     * requests made while it tries to reconnect fail fast instead of waiting for an attempt that
     * may hang (a stopped server still accepts TCP connections and never answers). */
    bool down;

    unsigned closes_pending; /* connection handles, timers and a lookup still to finish */
    void (*close_cb)(void *data);
    void *close_data;
};

static void node_connect(redlock__node *n);
static void node_fail(redlock__node *n, const char *why, bool immediate_retry);
static void flush(redlock__node *n);

static uint64_t now_us(void)
{
    return uv_hrtime() / 1000;
}

static uint64_t ms_ceil(uint64_t us)
{
    return (us + 999) / 1000;
}

/* ---- FIFO ---------------------------------------------------------------------------------- */

static void fifo_push(redlock__node *n, redlock__req *req)
{
    req->next = NULL;
    if (n->tail != NULL)
        n->tail->next = req;
    else
        n->head = req;
    n->tail = req;
    n->fifo_len++;
}

static redlock__req *fifo_pop(redlock__node *n)
{
    redlock__req *req = n->head;
    if (req == NULL)
        return NULL;
    n->head = req->next;
    if (n->head == NULL)
        n->tail = NULL;
    req->next = NULL;
    n->fifo_len--;
    return req;
}

/* Complete every request in the FIFO with an error. Completions may re-enter (send again), so
 * the FIFO is detached first: anything sent from a callback belongs to the new state. */
static void fail_all(redlock__node *n, const char *why)
{
    redlock__req *req = n->head;
    n->head = n->tail = NULL;
    n->fifo_len = 0;
    uint64_t now = now_us();
    while (req != NULL) {
        redlock__req *next = req->next;
        req->next = NULL;
        req->cb(req, REDLOCK_VOTE_ERROR, why, NULL, now);
        req = next;
    }
}

/* ---- deadlines ----------------------------------------------------------------------------- */

static void on_deadline(uv_timer_t *t);

static void start_deadline_timer(redlock__node *n, uint64_t now)
{
    if (n->head == NULL || n->state == NODE_CLOSING)
        return;
    uint64_t due = n->head->deadline_us;
    uint64_t wait_ms = due > now ? ms_ceil(due - now) : 0;
    uv_timer_start(&n->deadline_timer, on_deadline, wait_ms, 0);
}

static void on_deadline(uv_timer_t *t)
{
    redlock__node *n = REDLOCK__CONTAINER_OF(t, redlock__node, deadline_timer);
    uint64_t now = now_us();
    char why[ERR_LEN];
    redlock__fmt(why, sizeof(why), "no answer within %llu ms",
                 (unsigned long long)(n->cfg.timeout_us / 1000));
    while (n->head != NULL && n->head->deadline_us <= now && n->state != NODE_CLOSING) {
        redlock__req *req = fifo_pop(n);
        n->skip_replies++; /* its reply, if it ever comes, is read and dropped */
        req->cb(req, REDLOCK_VOTE_TIMEOUT, why, NULL, now);
    }
    if (n->state == NODE_CLOSING)
        return;
    bool owes = n->skip_replies > 0;
    /* Silence counts from the later of the last reply and the moment the node started to owe
     * one: an idle spell is not silence. */
    uint64_t quiet_since = REDLOCK__MAX(n->last_reply_us, n->owing_since_us);
    bool silent = now - quiet_since >= DROP_AFTER_TIMEOUTS * n->cfg.timeout_us;
    if (owes && silent && (n->state == NODE_READY || n->state == NODE_HANDSHAKE)) {
        char drop[ERR_LEN];
        redlock__fmt(drop, sizeof(drop), "connection dropped: no answer for %llu ms",
                     (unsigned long long)((now - quiet_since) / 1000));
        node_fail(n, drop, false);
        return;
    }
    start_deadline_timer(n, now);
}

/* ---- connection teardown ------------------------------------------------------------------- */

static void maybe_closed(redlock__node *n)
{
    if (n->state != NODE_CLOSING || n->closes_pending > 0)
        return;
    void (*cb)(void *) = n->close_cb;
    void *data = n->close_data;
    redlock__buf_free(&n->out, n->cfg.alloc);
    redlock__buf_free(&n->hs, n->cfg.alloc);
    redlock__free(n->cfg.alloc, n);
    if (cb != NULL)
        cb(data);
}

static void on_conn_closed(uv_handle_t *h)
{
    conn *c = REDLOCK__CONTAINER_OF(h, conn, h.handle);
    redlock__node *n = c->node;
    const redlock__alloc *alloc = n->cfg.alloc;
    if (c->reader != NULL)
        redisReaderFree(c->reader);
    redlock__buf_free(&c->inflight, alloc);
    redlock__free(alloc, c);
    n->closes_pending--;
    maybe_closed(n);
}

/* Stop using the current connection; its memory goes in its close callback. */
static void drop_conn(redlock__node *n)
{
    conn *c = n->conn;
    if (c == NULL)
        return;
    n->conn = NULL;
    c->detached = true;
    n->closes_pending++; /* the node outlives every connection it ever had */
    uv_close(&c->h.handle, on_conn_closed);
}

static uint64_t jitter(redlock__node *n, uint64_t base_us)
{
    /* xorshift64: jitter spreads reconnects of many clients; it needs no secrecy. */
    n->rng ^= n->rng << 13;
    n->rng ^= n->rng >> 7;
    n->rng ^= n->rng << 17;
    /* base * [0.5, 1.5) */
    return base_us / 2 + (base_us > 0 ? n->rng % base_us : 0);
}

static void on_reconnect_timer(uv_timer_t *t)
{
    redlock__node *n = REDLOCK__CONTAINER_OF(t, redlock__node, conn_timer);
    if (n->state == NODE_IDLE)
        node_connect(n);
}

/* The connection failed or was dropped: fail what waits, go idle, reconnect after a backoff. */
static void node_fail(redlock__node *n, const char *why, bool immediate_retry)
{
    if (n->state == NODE_CLOSING)
        return;
    char full[ERR_LEN]; /* with the server's answer, if it refused the handshake and closed */
    why = redlock__handshake_why(&n->handshake, why, full, sizeof(full));
    redlock__fmt(n->last_error, sizeof(n->last_error), "%s", why);
    bool was_ready = n->state == NODE_READY;
    drop_conn(n);
    n->state = NODE_IDLE;
    n->down = true;
    n->out.len = 0;
    n->hs.len = 0;
    n->skip_replies = 0;
    redlock__handshake_reset(&n->handshake);
    uv_timer_stop(&n->deadline_timer);
    /* A connection that worked starts over at the shortest backoff. */
    if (was_ready || n->backoff_us == 0)
        n->backoff_us = n->cfg.reconnect_min_us;
    uint64_t delay = immediate_retry ? 0 : jitter(n, n->backoff_us);
    n->backoff_us = REDLOCK__MIN(n->backoff_us * 2, n->cfg.reconnect_max_us);
    uv_timer_start(&n->conn_timer, on_reconnect_timer, ms_ceil(delay), 0);
    char msg[ERR_LEN];
    redlock__fmt(msg, sizeof(msg), "%s", why);
    fail_all(n, msg);
}

/* ---- writes -------------------------------------------------------------------------------- */

static void on_write(uv_write_t *req, int status)
{
    conn *c = REDLOCK__CONTAINER_OF(req, conn, write_req);
    c->writing = false;
    c->inflight.len = 0;
    if (c->detached)
        return;
    redlock__node *n = c->node;
    if (status < 0) {
        char why[ERR_LEN];
        redlock__fmt(why, sizeof(why), "write: %s", uv_strerror(status));
        node_fail(n, why, false);
        return;
    }
    flush(n);
}

/* Hand the handshake, or once it has succeeded the output buffer, to uv_write unless a write is
 * in flight; uv_write tries the write at once, so a lone command leaves without waiting for a
 * loop turn. */
static void flush(redlock__node *n)
{
    conn *c = n->conn;
    if (c == NULL || !c->connected || c->writing)
        return;
    redlock__buf *src = &n->hs;
    if (src->len == 0) {
        src = &n->out;
        if (n->state != NODE_READY || src->len == 0)
            return;
    }
    redlock__buf tmp = c->inflight; /* swap: the empty in-flight buffer takes src's place */
    c->inflight = *src;
    *src = tmp;
    src->len = 0;
    uv_buf_t buf = uv_buf_init(c->inflight.data, (unsigned)c->inflight.len);
    c->writing = true;
    int rc = uv_write(&c->write_req, &c->h.stream, &buf, 1, on_write);
    if (rc < 0) {
        c->writing = false;
        c->inflight.len = 0;
        char why[ERR_LEN];
        redlock__fmt(why, sizeof(why), "write: %s", uv_strerror(rc));
        node_fail(n, why, false);
    }
}

/* ---- replies ------------------------------------------------------------------------------- */

static void set_ready(redlock__node *n)
{
    n->state = NODE_READY;
    n->down = false;
    n->backoff_us = 0;
    n->last_error[0] = '\0';
    n->last_reply_us = now_us();
    uv_timer_stop(&n->conn_timer);
    flush(n); /* the requests held behind the handshake */
}

/* Every handshake reply came: the node is ready unless another node already reached the same
 * server (then it stays down, and tries again after its backoff in case that changes). */
static void handshake_done(redlock__node *n)
{
    const char *twin = NULL;
    const char *run_id = n->handshake.run_id;
    if (run_id[0] != '\0' && n->cfg.twin_of != NULL)
        twin = n->cfg.twin_of(n->cfg.twin_ctx, n, run_id);
    if (twin != NULL) {
        char why[ERR_LEN];
        redlock__fmt(why, sizeof(why),
                     "same server as %s (run_id %.8s...): a server must count only once", twin,
                     run_id);
        node_fail(n, why, false);
        return;
    }
    set_ready(n);
}

static void handshake_reply(redlock__node *n, const redisReply *r)
{
    char why[ERR_LEN];
    if (!redlock__handshake_reply(&n->handshake, r, why, sizeof(why))) {
        node_fail(n, why, false);
        return;
    }
    if (!redlock__handshake_pending(&n->handshake))
        handshake_done(n);
}

static bool same_lock(const redlock__cmd *a, const redlock__cmd *b)
{
    return a->key_hash == b->key_hash && a->key_len == b->key_len && a->token_len == b->token_len &&
           memcmp(a->token, b->token, a->token_len) == 0 && memcmp(a->key, b->key, a->key_len) == 0;
}

/* A NOSCRIPT answer to EVALSHA: resend as EVAL, which also loads the script. The resend goes to
 * the FIFO's tail, so it runs after commands written since. For another token that is harmless
 * (the script only touches a key holding its own token), but a later command of the same lock
 * (an acquire retry's SET, a release after an extend) could be undone by replaying the script
 * after it, so then the request fails instead. */
static void resend_with_eval(redlock__node *n, redlock__req *req, uint64_t now)
{
    for (redlock__req *r = n->head; r != NULL; r = r->next) {
        if (same_lock(r->cmd, req->cmd)) {
            req->cb(req, REDLOCK_VOTE_ERROR,
                    "NOSCRIPT, and a later command of the same lock is already queued", NULL, now);
            return;
        }
    }
    if (redlock__cmd_append(req->cmd, true, &n->out, n->cfg.alloc) != 0) {
        req->cb(req, REDLOCK_VOTE_ERROR, "out of memory", NULL, now);
        return;
    }
    req->deadline_us = now + n->cfg.timeout_us;
    bool was_empty = n->head == NULL;
    fifo_push(n, req);
    if (was_empty)
        start_deadline_timer(n, now);
    flush(n);
}

static void handle_reply(redlock__node *n, const redisReply *r)
{
    uint64_t now = now_us();
    n->last_reply_us = now;
    if (redlock__handshake_pending(&n->handshake)) {
        handshake_reply(n, r);
        return;
    }
    if (n->skip_replies > 0) {
        n->skip_replies--;
        return;
    }
    redlock__req *req = fifo_pop(n);
    if (req == NULL) {
        node_fail(n, "protocol error: reply without a request", false);
        return;
    }
    char err[ERR_LEN];
    redlock__reply_kind kind;
    redlock__reply_data data;
    redlock_vote vote = redlock__cmd_vote(req->cmd, r, err, sizeof(err), &kind, &data);
    if (kind == REDLOCK__REPLY_NOSCRIPT) {
        resend_with_eval(n, req, now);
        return;
    }
    if (kind == REDLOCK__REPLY_MISMATCH) {
        /* Out of step: this reply may belong to another request, and so may every later one.
         * Nothing on this connection is believed any more. */
        char why[ERR_LEN];
        redlock__fmt(why, sizeof(why), "protocol error: %s (connection dropped)", err);
        node_fail(n, why, false);
        req->cb(req, REDLOCK_VOTE_ERROR, why, NULL, now);
        return;
    }
    req->cb(req, vote, vote == REDLOCK_VOTE_ERROR ? err : NULL,
            req->cmd->kind == REDLOCK__CMD_INSPECT ? &data : NULL, now);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    conn *c = REDLOCK__CONTAINER_OF(h, conn, h.handle);
    (void)suggested;
    *buf = uv_buf_init(c->rbuf, sizeof(c->rbuf));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    conn *c = REDLOCK__CONTAINER_OF(s, conn, h.stream);
    (void)buf;
    if (c->detached || nread == 0)
        return;
    redlock__node *n = c->node;
    if (nread < 0) {
        char why[ERR_LEN];
        if (nread == UV_EOF)
            redlock__fmt(why, sizeof(why), "connection closed by the node");
        else
            redlock__fmt(why, sizeof(why), "read: %s", uv_strerror((int)nread));
        node_fail(n, why, false);
        return;
    }
    if (redisReaderFeed(c->reader, c->rbuf, (size_t)nread) != REDIS_OK) {
        node_fail(n, "protocol error: cannot buffer the reply", false);
        return;
    }
    for (;;) {
        void *reply = NULL;
        if (redisReaderGetReply(c->reader, &reply) != REDIS_OK) {
            char why[ERR_LEN];
            redlock__fmt(why, sizeof(why), "protocol error: %s", c->reader->errstr);
            node_fail(n, why, false);
            return;
        }
        if (reply == NULL)
            return;
        handle_reply(n, reply);
        freeReplyObject(reply);
        /* A callback may have dropped this connection or closed the client. */
        if (c->detached)
            return;
    }
}

/* ---- connecting ---------------------------------------------------------------------------- */

static void connect_to(redlock__node *n, const struct sockaddr *addr);

static void on_connect(uv_connect_t *req, int status)
{
    conn *c = REDLOCK__CONTAINER_OF(req, conn, connect_req);
    if (c->detached)
        return;
    redlock__node *n = c->node;
    if (status < 0 && n->next_addr < n->n_addrs) {
        /* Another address of the host may answer: retry on a fresh handle, same handshake. */
        drop_conn(n);
        connect_to(n, (const struct sockaddr *)&n->addrs[n->next_addr++]);
        return;
    }
    if (status < 0) {
        char why[ERR_LEN];
        redlock__fmt(why, sizeof(why), "connect: %s", uv_strerror(status));
        node_fail(n, why, false);
        return;
    }
    c->connected = true;
    n->last_reply_us = now_us();
    if (!n->cfg.url->is_unix) {
        uv_tcp_nodelay(&c->h.tcp, 1);
        uv_tcp_keepalive(&c->h.tcp, 1, 30);
    }
    int rc = uv_read_start(&c->h.stream, on_alloc, on_read);
    if (rc < 0) {
        char why[ERR_LEN];
        redlock__fmt(why, sizeof(why), "read: %s", uv_strerror(rc));
        node_fail(n, why, false);
        return;
    }
    if (!redlock__handshake_pending(&n->handshake))
        handshake_done(n);
    else
        n->state = NODE_HANDSHAKE;
    flush(n);
}

static void on_connect_timeout(uv_timer_t *t)
{
    redlock__node *n = REDLOCK__CONTAINER_OF(t, redlock__node, conn_timer);
    if (n->state != NODE_CONNECTING && n->state != NODE_HANDSHAKE)
        return;
    char why[ERR_LEN];
    redlock__fmt(why, sizeof(why), "connect: timed out after %llu ms",
                 (unsigned long long)(n->cfg.connect_timeout_us / 1000));
    node_fail(n, why, false);
}

static conn *conn_new(redlock__node *n)
{
    conn *c = redlock__calloc(n->cfg.alloc, 1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->node = n;
    c->reader = redisReaderCreate();
    if (c->reader == NULL) {
        redlock__free(n->cfg.alloc, c);
        return NULL;
    }
    return c;
}

static void connect_to(redlock__node *n, const struct sockaddr *addr)
{
    conn *c = conn_new(n);
    if (c == NULL) {
        node_fail(n, "connect: out of memory", false);
        return;
    }
    int rc;
    if (n->cfg.url->is_unix) {
        rc = uv_pipe_init(n->loop, &c->h.pipe, 0);
        if (rc == 0) {
            n->conn = c;
            uv_pipe_connect(&c->connect_req, &c->h.pipe, n->cfg.url->path, on_connect);
        }
    } else {
        rc = uv_tcp_init(n->loop, &c->h.tcp);
        if (rc == 0) {
            n->conn = c;
            rc = uv_tcp_connect(&c->connect_req, &c->h.tcp, addr, on_connect);
        }
    }
    if (rc < 0) {
        char why[ERR_LEN];
        redlock__fmt(why, sizeof(why), "connect: %s", uv_strerror(rc));
        if (n->conn != c) { /* the handle was never initialised */
            redisReaderFree(c->reader);
            redlock__free(n->cfg.alloc, c);
        }
        node_fail(n, why, false);
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
    redlock__node *n = REDLOCK__CONTAINER_OF(req, redlock__node, gai);
    n->gai_active = false;
    if (n->state == NODE_CLOSING) {
        uv_freeaddrinfo(res);
        n->closes_pending--;
        maybe_closed(n);
        return;
    }
    /* Any attempt still waiting for an address takes the answer; otherwise it is stale (a connect
     * timeout abandoned the attempt that asked). */
    if (n->state != NODE_CONNECTING || n->conn != NULL) {
        uv_freeaddrinfo(res);
        return;
    }
    if (status < 0 || res == NULL) {
        char why[ERR_LEN];
        redlock__fmt(why, sizeof(why), "resolve %s: %s", n->cfg.url->host, uv_strerror(status));
        uv_freeaddrinfo(res);
        node_fail(n, why, false);
        return;
    }
    n->n_addrs = n->next_addr = 0;
    for (struct addrinfo *ai = res; ai != NULL && n->n_addrs < MAX_ADDRS; ai = ai->ai_next) {
        if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
            continue;
        memcpy(&n->addrs[n->n_addrs], ai->ai_addr, ai->ai_addrlen);
        set_port((struct sockaddr *)&n->addrs[n->n_addrs], n->cfg.url->port);
        n->n_addrs++;
    }
    uv_freeaddrinfo(res);
    if (n->n_addrs == 0) {
        char why[ERR_LEN];
        redlock__fmt(why, sizeof(why), "resolve %s: no IPv4 or IPv6 address", n->cfg.url->host);
        node_fail(n, why, false);
        return;
    }
    connect_to(n, (const struct sockaddr *)&n->addrs[n->next_addr++]);
}

static void node_connect(redlock__node *n)
{
    n->state = NODE_CONNECTING;
    n->n_addrs = n->next_addr = 0;
    n->out.len = 0;
    n->hs.len = 0;
    n->skip_replies = 0;
    if (redlock__handshake_start(&n->handshake, n->cfg.url, &n->hs, n->cfg.alloc) != 0) {
        node_fail(n, "connect: out of memory", false);
        return;
    }
    /* libuv times timers from the loop's cached clock, which is stale when the caller was busy
     * before creating the client: refresh it, or the timeout fires early. */
    uv_update_time(n->loop);
    uv_timer_start(&n->conn_timer, on_connect_timeout, ms_ceil(n->cfg.connect_timeout_us), 0);

    const redlock_url *u = n->cfg.url;
    if (u->is_unix) {
        connect_to(n, NULL);
        return;
    }
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    if (uv_ip4_addr(u->host, u->port, (struct sockaddr_in *)&ss) == 0 ||
        uv_ip6_addr(u->host, u->port, (struct sockaddr_in6 *)&ss) == 0) {
        connect_to(n, (struct sockaddr *)&ss);
        return;
    }
    if (n->gai_active)
        return; /* an older lookup is still running; its answer will be taken as stale */
    struct addrinfo hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = uv_getaddrinfo(n->loop, &n->gai, on_resolved, u->host, NULL, &hints);
    if (rc < 0) {
        char why[ERR_LEN];
        redlock__fmt(why, sizeof(why), "resolve %s: %s", u->host, uv_strerror(rc));
        node_fail(n, why, false);
        return;
    }
    n->gai_active = true;
}

/* ---- public (internal) API ----------------------------------------------------------------- */

int redlock__node_new(uv_loop_t *loop, const redlock__node_config *cfg, redlock__node **out)
{
    redlock__node *n = redlock__calloc(cfg->alloc, 1, sizeof(*n));
    if (n == NULL)
        return REDLOCK_ENOMEM;
    n->loop = loop;
    n->cfg = *cfg;
    n->state = NODE_IDLE;
    *out = n;
    return 0;
}

void redlock__node_free_unstarted(redlock__node *n)
{
    redlock__free(n->cfg.alloc, n);
}

void redlock__node_start(redlock__node *n)
{
    uint64_t seed = 0;
    if (uv_random(NULL, NULL, &seed, sizeof(seed), 0, NULL) != 0 || seed == 0)
        seed = uv_hrtime() | 1;
    n->rng = seed;
    uv_timer_init(n->loop, &n->deadline_timer);
    uv_timer_init(n->loop, &n->conn_timer);
    redlock__fmt(n->last_error, sizeof(n->last_error), "not connected yet");
    node_connect(n);
}

void redlock__node_send(redlock__node *n, redlock__req *req)
{
    uint64_t now = now_us();
    req->sent_us = now;
    req->deadline_us = now + n->cfg.timeout_us;
    if (n->state == NODE_CLOSING) {
        req->cb(req, REDLOCK_VOTE_ERROR, "canceled: client closing", NULL, now);
        return;
    }
    if (n->down) { /* idle, or trying to reconnect */
        char why[ERR_LEN + 16];
        redlock__fmt(why, sizeof(why), "node down: %s", n->last_error);
        req->cb(req, REDLOCK_VOTE_ERROR, why, NULL, now);
        return;
    }
    if (n->fifo_len + n->skip_replies >= n->cfg.max_inflight) {
        req->cb(req, REDLOCK_VOTE_ERROR, "too many requests in flight on this node", NULL, now);
        return;
    }
    if (redlock__cmd_append(req->cmd, false, &n->out, n->cfg.alloc) != 0) {
        req->cb(req, REDLOCK_VOTE_ERROR, "out of memory", NULL, now);
        return;
    }
    if (n->head == NULL && n->skip_replies == 0)
        n->owing_since_us = now;
    bool was_empty = n->head == NULL;
    fifo_push(n, req);
    if (was_empty && !uv_is_active((uv_handle_t *)&n->deadline_timer))
        start_deadline_timer(n, now);
    flush(n);
}

const char *redlock__node_name(const redlock__node *n)
{
    return n->cfg.name;
}

const char *redlock__node_run_id(const redlock__node *n)
{
    return n->state == NODE_READY && n->handshake.run_id[0] != '\0' ? n->handshake.run_id : NULL;
}

static void on_timer_closed(uv_handle_t *h)
{
    redlock__node *n = h->data;
    n->closes_pending--;
    maybe_closed(n);
}

void redlock__node_close(redlock__node *n, void (*cb)(void *data), void *data)
{
    n->state = NODE_CLOSING;
    n->close_cb = cb;
    n->close_data = data;
    n->closes_pending += 2; /* the two timers; connections and the resolver count themselves */
    n->skip_replies = 0;
    fail_all(n, "canceled: client closing");
    drop_conn(n);
    if (n->gai_active) {
        n->closes_pending++;
        uv_cancel((uv_req_t *)&n->gai);
    }
    n->deadline_timer.data = n;
    n->conn_timer.data = n;
    uv_close((uv_handle_t *)&n->deadline_timer, on_timer_closed);
    uv_close((uv_handle_t *)&n->conn_timer, on_timer_closed);
}
