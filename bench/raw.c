/* SPDX-License-Identifier: MIT */
/* raw.c - see raw.h. */
#include "raw.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "redlock.h"
#include "scripts.h"
#include "stats.h"

#define READ_BYTES (64 * 1024)
#define TOKEN_CHARS 32 /* the library's tokens: 128 bits as 32 hex digits */

typedef struct cycle cycle;

/* What a reply answers, in the order the requests went out on one connection. */
typedef enum want { WANT_SETUP, WANT_SET, WANT_RELEASE } want;

typedef struct pending {
    want what;
    cycle *c; /* NULL for WANT_SETUP */
} pending;

typedef struct buf {
    char *p;
    size_t len, cap;
} buf;

typedef struct rnode {
    raw *r;
    unsigned index;
    union {
        uv_handle_t handle;
        uv_stream_t stream;
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    } h;
    bool open; /* the handle was initialised (needs closing) */
    uv_connect_t connect_req;
    uv_write_t write_req;
    redisReader *reader;
    buf out;     /* commands not yet handed to a write */
    buf writing; /* the bytes of the write in flight */
    bool write_busy;
    pending *fifo; /* a ring of requests owed an answer */
    size_t head, count, cap;
    char read[READ_BYTES];
} rnode;

struct raw {
    uv_loop_t *loop;
    unsigned n, quorum;
    unsigned setup_owed, setup_failed;
    char sha[41];
    char *err;
    size_t err_len;
    uint64_t next_token;
    unsigned closing;
    unsigned live_cycles; /* cycles some node still owes an answer */
    rnode *nodes[REDLOCK_MAX_NODES];
};

struct cycle {
    raw *r;
    raw_wait wait;
    raw_done_cb cb;
    void *data;
    unsigned set_owed, yes, no, release_owed, release_yes;
    bool decided, reported;
    uint64_t start_us, decided_us;
    size_t key_len;
    char token[TOKEN_CHARS + 1];
    char key[];
};

static void die(const char *what)
{
    fprintf(stderr, "redlock-bench: raw fan-out: %s\n", what);
    exit(1);
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (q == NULL)
        die("out of memory");
    return q;
}

static void fail(raw *r, const char *fmt, ...)
{
    if (r->setup_failed++ > 0 || r->err == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, r->err_len, fmt, ap);
    va_end(ap);
}

const char *raw_release_sha1(const raw *r)
{
    return r->sha;
}

const char *raw_wait_name(raw_wait wait)
{
    return wait == RAW_WAIT_ALL ? "all" : "quorum";
}

/* ---- writing ------------------------------------------------------------------------------- */

static void flush(rnode *n);

static void on_written(uv_write_t *req, int status)
{
    rnode *n = req->data;
    n->write_busy = false;
    n->writing.len = 0;
    if (status == UV_ECANCELED) /* closing */
        return;
    if (status != 0) {
        if (n->r->setup_owed > 0) {
            fail(n->r, "write: %s", uv_strerror(status));
            return;
        }
        die(uv_strerror(status));
    }
    flush(n);
}

/* One write at a time; what is queued meanwhile goes out together with the next. */
static void flush(rnode *n)
{
    if (n->write_busy || n->out.len == 0)
        return;
    buf t = n->writing;
    n->writing = n->out;
    n->out = t;
    n->out.len = 0;
    uv_buf_t b = uv_buf_init(n->writing.p, (unsigned)n->writing.len);
    n->write_req.data = n;
    n->write_busy = true;
    int rc = uv_write(&n->write_req, &n->h.stream, &b, 1, on_written);
    if (rc != 0)
        die(uv_strerror(rc));
}

static void owe(rnode *n, want what, cycle *c)
{
    if (n->count == n->cap) {
        size_t cap = n->cap != 0 ? n->cap * 2 : 256;
        pending *f = xrealloc(NULL, cap * sizeof(*f));
        for (size_t i = 0; i < n->count; i++)
            f[i] = n->fifo[(n->head + i) % n->cap];
        free(n->fifo);
        n->fifo = f;
        n->head = 0;
        n->cap = cap;
    }
    n->fifo[(n->head + n->count++) % n->cap] = (pending){what, c};
}

/* Encode with hiredis (as a user would; the library has its own encoder), queue, and owe the
 * answer. */
static void command(rnode *n, want what, cycle *c, int argc, const char **argv,
                    const size_t *argvlen)
{
    char *cmd = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, argv, argvlen);
    if (len < 0)
        die("out of memory");
    if (n->out.len + (size_t)len > n->out.cap) {
        n->out.cap = (n->out.len + (size_t)len) * 2;
        n->out.p = xrealloc(n->out.p, n->out.cap);
    }
    memcpy(n->out.p + n->out.len, cmd, (size_t)len);
    n->out.len += (size_t)len;
    redisFreeCommand(cmd);
    owe(n, what, c);
}

/* ---- a cycle ------------------------------------------------------------------------------- */

static void release_all(cycle *c)
{
    raw *r = c->r;
    c->decided = true;
    c->decided_us = bench_now_us();
    c->release_owed = r->n;
    for (unsigned i = 0; i < r->n; i++) {
        /* A holder's release: it tells the waiters ("1"), as the library's does. */
        const char *argv[6] = {"EVALSHA", r->sha, "1", c->key, c->token, "1"};
        size_t argvlen[6] = {7, 40, 1, c->key_len, TOKEN_CHARS, 1};
        command(r->nodes[i], WANT_RELEASE, c, 6, argv, argvlen);
        flush(r->nodes[i]);
    }
}

static void on_set_reply(cycle *c, const redisReply *rep)
{
    c->set_owed--;
    if (rep->type == REDIS_REPLY_STATUS && rep->len == 2 && memcmp(rep->str, "OK", 2) == 0)
        c->yes++;
    else
        c->no++; /* nil (held) or an error */
    if (c->decided)
        return;
    unsigned q = c->r->quorum;
    bool decide =
        c->wait == RAW_WAIT_ALL ? c->set_owed == 0 : c->yes >= q || c->yes + c->set_owed < q;
    if (decide)
        release_all(c);
}

/* The release is decided as the library's is: at a quorum of deletes, or once that is out of
 * reach (RAW_WAIT_QUORUM), or at the last answer (RAW_WAIT_ALL); the cycle lives until its last
 * answer, which the FIFOs owe it. */
static void on_release_reply(cycle *c, bool deleted)
{
    c->release_owed--;
    c->release_yes += deleted;
    unsigned q = c->r->quorum;
    bool decided = c->wait == RAW_WAIT_ALL
                       ? c->release_owed == 0
                       : c->release_yes >= q || c->release_yes + c->release_owed < q;
    if (decided && !c->reported) {
        /* Every SET was answered before: each node answers in order, and the releases went out
         * after the SETs on every connection. */
        c->reported = true;
        uint64_t now = bench_now_us();
        c->cb(c->data, c->yes >= q, c->decided_us - c->start_us, now - c->decided_us);
    }
    if (c->release_owed == 0) {
        c->r->live_cycles--;
        free(c);
    }
}

void raw_cycle(raw *r, const char *key, size_t key_len, uint64_t ttl_ms, raw_wait wait,
               raw_done_cb cb, void *data)
{
    cycle *c = xrealloc(NULL, sizeof(*c) + key_len + 1);
    memset(c, 0, sizeof(*c));
    r->live_cycles++;
    c->r = r;
    c->wait = wait;
    c->cb = cb;
    c->data = data;
    c->set_owed = r->n;
    c->key_len = key_len;
    memcpy(c->key, key, key_len);
    c->key[key_len] = '\0';
    r->next_token++;
    snprintf(c->token, sizeof(c->token), "%016llx%016llx", (unsigned long long)r->next_token,
             (unsigned long long)(r->next_token * 0x9e3779b97f4a7c15ull));
    char ttl[24];
    int ttl_len = snprintf(ttl, sizeof(ttl), "%llu", (unsigned long long)ttl_ms);
    c->start_us = bench_now_us();
    for (unsigned i = 0; i < r->n; i++) {
        const char *argv[6] = {"SET", c->key, c->token, "NX", "PX", ttl};
        size_t argvlen[6] = {3, key_len, TOKEN_CHARS, 2, 2, (size_t)ttl_len};
        command(r->nodes[i], WANT_SET, c, 6, argv, argvlen);
        flush(r->nodes[i]);
    }
}

/* ---- reading ------------------------------------------------------------------------------- */

static void on_reply(rnode *n, redisReply *rep)
{
    if (n->count == 0)
        die("an answer nobody asked for");
    pending p = n->fifo[n->head];
    n->head = (n->head + 1) % n->cap;
    n->count--;
    raw *r = n->r;
    switch (p.what) {
    case WANT_SETUP:
        r->setup_owed--;
        if (rep->type == REDIS_REPLY_ERROR)
            fail(r, "node %u: %s", n->index, rep->str);
        else if (rep->type == REDIS_REPLY_STRING && rep->len == 40)
            memcpy(r->sha, rep->str, 41);
        break;
    case WANT_SET:
        on_set_reply(p.c, rep);
        break;
    case WANT_RELEASE:
        if (rep->type == REDIS_REPLY_ERROR)
            die(rep->str);
        on_release_reply(p.c, rep->type == REDIS_REPLY_INTEGER && rep->integer == 1);
        break;
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    (void)suggested;
    rnode *n = h->data;
    *b = uv_buf_init(n->read, sizeof(n->read));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    rnode *n = s->data;
    if (nread == 0)
        return;
    if (nread < 0) {
        if (n->r->setup_owed > 0) {
            fail(n->r, "node %u: %s", n->index, uv_strerror((int)nread));
            uv_read_stop(s);
            return;
        }
        die(uv_strerror((int)nread));
    }
    if (redisReaderFeed(n->reader, b->base, (size_t)nread) != REDIS_OK)
        die("out of memory");
    for (;;) {
        void *rep = NULL;
        if (redisReaderGetReply(n->reader, &rep) != REDIS_OK)
            die(n->reader->errstr);
        if (rep == NULL)
            break;
        on_reply(n, rep);
        freeReplyObject(rep);
    }
}

/* ---- connecting ---------------------------------------------------------------------------- */

static void on_connected(uv_connect_t *req, int status)
{
    rnode *n = req->data;
    if (status != 0) {
        fail(n->r, "cannot connect to node %u: %s", n->index, uv_strerror(status));
        return;
    }
    if (n->h.handle.type == UV_TCP)
        uv_tcp_nodelay(&n->h.tcp, 1);
    uv_read_start(&n->h.stream, on_alloc, on_read);
    flush(n);
}

static int node_open(raw *r, unsigned i, const char *url)
{
    redlock_url u;
    char err[256];
    if (redlock_url_parse(&u, url, err, sizeof(err)) != 0) {
        fail(r, "%s", err);
        redlock_url_free(&u);
        return -1;
    }
    rnode *n = xrealloc(NULL, sizeof(*n));
    memset(n, 0, sizeof(*n));
    r->nodes[i] = n;
    n->r = r;
    n->index = i;
    n->reader = redisReaderCreate();
    if (n->reader == NULL)
        die("out of memory");
    n->h.handle.data = n;
    n->connect_req.data = n;
    int rc = 0;
    if (u.is_unix) {
        uv_pipe_init(r->loop, &n->h.pipe, 0);
        n->open = true;
        n->h.handle.data = n;
        uv_pipe_connect(&n->connect_req, &n->h.pipe, u.path, on_connected);
    } else {
        struct sockaddr_storage sa;
        if (uv_ip4_addr(u.host, u.port, (struct sockaddr_in *)&sa) != 0 &&
            uv_ip6_addr(u.host, u.port, (struct sockaddr_in6 *)&sa) != 0) {
            /* A name: resolve it now, once (setup is not measured). */
            uv_getaddrinfo_t gai;
            char port[8];
            snprintf(port, sizeof(port), "%d", u.port);
            struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
            rc = uv_getaddrinfo(r->loop, &gai, NULL, u.host, port, &hints);
            if (rc != 0) {
                fail(r, "node %u: %s: %s", i, u.host, uv_strerror(rc));
                redlock_url_free(&u);
                return -1;
            }
            memcpy(&sa, gai.addrinfo->ai_addr, gai.addrinfo->ai_addrlen);
            uv_freeaddrinfo(gai.addrinfo);
        }
        uv_tcp_init(r->loop, &n->h.tcp);
        n->open = true;
        n->h.handle.data = n;
        rc = uv_tcp_connect(&n->connect_req, &n->h.tcp, (const struct sockaddr *)&sa, on_connected);
        if (rc != 0) {
            fail(r, "cannot connect to node %u: %s", i, uv_strerror(rc));
            redlock_url_free(&u);
            return -1;
        }
    }
    /* The handshake rides on the first write, once connected. */
    if (u.password != NULL) {
        const char *argv[3] = {"AUTH", u.user != NULL ? u.user : u.password, u.password};
        size_t argvlen[3] = {4, strlen(argv[1]), strlen(u.password)};
        command(n, WANT_SETUP, NULL, u.user != NULL ? 3 : 2, argv, argvlen);
        r->setup_owed++;
    }
    if (u.db > 0) {
        char db[16];
        snprintf(db, sizeof(db), "%d", u.db);
        const char *argv[2] = {"SELECT", db};
        size_t argvlen[2] = {6, strlen(db)};
        command(n, WANT_SETUP, NULL, 2, argv, argvlen);
        r->setup_owed++;
    }
    /* The library's release script, its own bytes (lib/core/lua/release.lua): the SHA1 is the
     * library's, and the servers do the same work for both sides (the scenarios check it). */
    const char *argv[3] = {"SCRIPT", "LOAD", redlock__script_release.source};
    size_t argvlen[3] = {6, 4, redlock__script_release.source_len};
    command(n, WANT_SETUP, NULL, 3, argv, argvlen);
    r->setup_owed++;
    redlock_url_free(&u);
    return 0;
}

raw *raw_new(uv_loop_t *loop, const char *const *urls, unsigned n, char *err, size_t err_len)
{
    if (n == 0 || n > REDLOCK_MAX_NODES) {
        snprintf(err, err_len, "1 to %d nodes", REDLOCK_MAX_NODES);
        return NULL;
    }
    raw *r = xrealloc(NULL, sizeof(*r));
    memset(r, 0, sizeof(*r));
    r->loop = loop;
    r->n = n;
    r->quorum = redlock_quorum_of(n);
    r->err = err;
    r->err_len = err_len;
    for (unsigned i = 0; i < n && r->setup_failed == 0; i++)
        node_open(r, i, urls[i]);
    while (r->setup_owed > 0 && r->setup_failed == 0)
        uv_run(loop, UV_RUN_ONCE);
    if (r->setup_failed == 0 && r->sha[0] == '\0')
        fail(r, "SCRIPT LOAD gave no digest");
    if (r->setup_failed != 0) {
        raw_free(r);
        uv_run(loop, UV_RUN_DEFAULT); /* let the handles close */
        return NULL;
    }
    r->err = NULL;
    return r;
}

static void on_closed(uv_handle_t *h)
{
    rnode *n = h->data;
    raw *r = n->r;
    redisReaderFree(n->reader);
    free(n->out.p);
    free(n->writing.p);
    free(n->fifo);
    free(n);
    if (--r->closing == 0)
        free(r);
}

void raw_free(raw *r)
{
    if (r == NULL)
        return;
    /* A cycle is reported at its release's quorum: the other nodes' answers are owed to it. */
    while (r->live_cycles > 0)
        uv_run(r->loop, UV_RUN_ONCE);
    r->closing = 1; /* held until every node is looked at */
    for (unsigned i = 0; i < r->n; i++) {
        rnode *n = r->nodes[i];
        if (n == NULL)
            continue;
        if (!n->open) {
            redisReaderFree(n->reader);
            free(n->out.p);
            free(n->fifo);
            free(n);
            continue;
        }
        r->closing++;
        uv_close(&n->h.handle, on_closed);
    }
    if (--r->closing == 0)
        free(r);
}
