/* SPDX-License-Identifier: MIT */
/* sc_limit.c - the limit scenario: what the nodes themselves can do, measured in the same run, so
 * that the throughput rows can say what fraction of it a lock cycle reaches (of_limit).
 *
 * The commands of one lock cycle, byte for byte as the library sends them (lib/core/command.c
 * encodes them here too: SET key token NX PX ttl, then EVALSHA of the library's release script from
 * lib/core/lua/release.lua on the same key and token), go to every node deeply pipelined, with no
 * lock logic at all. Every node gets the same batches, each BATCH_CYCLES SETs followed by their
 * BATCH_CYCLES releases; WINDOW batches are in flight, and the next batch goes to every node once
 * the oldest has been answered by all of them. So every node does the same work in the same order,
 * as under lock cycles, and the pace is that of the nodes together (the slowest sets it, as it does
 * for a release that waits for every node). The client's own part is as small as it can be: the
 * batches are encoded once, a batch is one write per node, and the replies (each one line: +OK, :1)
 * are checked by their bytes, without a RESP parser; no event library, poll(2) on the sockets.
 *
 * commands_per_s counts every node's answers; a lock cycle is commands_per_cycle = 2 x nodes of
 * them, so cycles_per_s_limit = commands_per_s / commands_per_cycle. Where the client and the
 * servers share the cores (bench/run on one machine), the library's own work takes CPU from the
 * servers, so a lock cycle cannot reach 1.0 of this figure there. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "bench.h"
#include "command.h"
#include "common.h"
#include "scripts.h"

#define BATCH_CYCLES 128
#define WINDOW 8 /* batches in flight: 1,024 cycles, 2,048 commands on each node */
#define SLICES 4
#define READ_BYTES (64 * 1024)
#define LINE_KEPT 64 /* of a reply line: enough to check it and to quote a wrong one */

typedef struct lnode {
    redisContext *ctx; /* the connection, set up through hiredis; its fd is then driven here */
    int fd;
    uint64_t written;  /* batches written whole */
    size_t write_off;  /* bytes of batch `written` written so far */
    uint64_t answered; /* replies read */
    size_t line_len;   /* bytes of the reply line being read */
    char line[LINE_KEPT];
} lnode;

typedef struct limit_run {
    unsigned n;
    lnode nodes[REDLOCK_MAX_NODES];
    redlock__buf batch[WINDOW]; /* batch k goes out of batch[k % WINDOW]: its keys are free again */
    redlock__alloc alloc;
    uint64_t issued; /* batches handed to every node */
    bool issuing;
    char error[256];
    char read[READ_BYTES]; /* each node's replies, one read at a time */
} limit_run;

#define REPLIES_PER_BATCH (2 * BATCH_CYCLES) /* on each node */

/* Batch slot s: BATCH_CYCLES SETs on keys of its own, then their releases, as the library encodes
 * them. */
static int make_batch(limit_run *L, unsigned s, uint64_t ttl_ms)
{
    char keys[BATCH_CYCLES][48], tokens[BATCH_CYCLES][33];
    size_t key_len[BATCH_CYCLES];
    for (unsigned i = 0; i < BATCH_CYCLES; i++) {
        key_len[i] = (size_t)snprintf(keys[i], sizeof(keys[i]), "bench:limit:%u:%u", s, i);
        /* 128 bits as 32 hex digits, the library's token shape (their randomness costs the
         * servers nothing). */
        unsigned long long x = (unsigned long long)s * BATCH_CYCLES + i + 1;
        snprintf(tokens[i], sizeof(tokens[i]), "%016llx%016llx", x, x * 0x9e3779b97f4a7c15ull);
    }
    for (int release = 0; release < 2; release++) {
        for (unsigned i = 0; i < BATCH_CYCLES; i++) {
            redlock__cmd cmd;
            memset(&cmd, 0, sizeof(cmd));
            cmd.kind = release ? REDLOCK__CMD_RELEASE : REDLOCK__CMD_ACQUIRE;
            cmd.key = keys[i];
            cmd.key_len = key_len[i];
            cmd.token = tokens[i];
            cmd.token_len = 32;
            cmd.ttl_ms = ttl_ms;
            cmd.tell = true; /* a holder's release, as a lock cycle's */
            if (redlock__cmd_append(&cmd, false, &L->batch[s], &L->alloc) != 0)
                return -1;
        }
    }
    return 0;
}

/* Connect through hiredis (AUTH and SELECT as the URL says), load the library's release script
 * and check that the server's SHA1 is the one the library sends; then the socket is ours. */
static int node_open(limit_run *L, unsigned i, const char *url)
{
    lnode *nd = &L->nodes[i];
    redlock_url u;
    char err[256];
    if (redlock_url_parse(&u, url, err, sizeof(err)) != 0) {
        snprintf(L->error, sizeof(L->error), "%s", err);
        redlock_url_free(&u);
        return -1;
    }
    int rc = -1;
    struct timeval tv = {2, 0};
    nd->ctx = u.is_unix ? redisConnectUnixWithTimeout(u.path, tv)
                        : redisConnectWithTimeout(u.host, u.port, tv);
    if (nd->ctx == NULL || nd->ctx->err) {
        snprintf(L->error, sizeof(L->error), "node %s: %s", u.redacted,
                 nd->ctx != NULL ? nd->ctx->errstr : "out of memory");
        goto out;
    }
    redisReply *r = NULL;
    if (u.password != NULL) {
        r = u.user != NULL ? redisCommand(nd->ctx, "AUTH %s %s", u.user, u.password)
                           : redisCommand(nd->ctx, "AUTH %s", u.password);
        if (r == NULL || r->type == REDIS_REPLY_ERROR)
            goto reply_error;
        freeReplyObject(r);
    }
    if (u.db > 0) {
        r = redisCommand(nd->ctx, "SELECT %d", u.db);
        if (r == NULL || r->type == REDIS_REPLY_ERROR)
            goto reply_error;
        freeReplyObject(r);
    }
    r = redisCommand(nd->ctx, "SCRIPT LOAD %b", redlock__script_release.source,
                     redlock__script_release.source_len);
    if (r == NULL || r->type != REDIS_REPLY_STRING)
        goto reply_error;
    if (strcmp(r->str, redlock__script_release.sha1) != 0) {
        snprintf(L->error, sizeof(L->error), "node %s: the release script's SHA1 is %s, not %s",
                 u.redacted, r->str, redlock__script_release.sha1);
        freeReplyObject(r);
        goto out;
    }
    freeReplyObject(r);
    nd->fd = nd->ctx->fd;
    int one = 1;
    if (!u.is_unix)
        setsockopt(nd->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fcntl(nd->fd, F_SETFL, fcntl(nd->fd, F_GETFL) | O_NONBLOCK);
    rc = 0;
    goto out;
reply_error:
    snprintf(L->error, sizeof(L->error), "node %s: %s", u.redacted,
             r != NULL ? r->str : nd->ctx->errstr);
    if (r != NULL)
        freeReplyObject(r);
out:
    redlock_url_free(&u);
    return rc;
}

/* One reply line ended: it must be what the library's cycle gets on a free key. */
static int check_line(limit_run *L, unsigned i, lnode *nd)
{
    bool is_set = nd->answered % REPLIES_PER_BATCH < BATCH_CYCLES;
    const char *want = is_set ? "+OK\r\n" : ":1\r\n";
    size_t want_len = strlen(want);
    if (nd->line_len == want_len && memcmp(nd->line, want, want_len) == 0)
        return 0;
    size_t shown = nd->line_len < LINE_KEPT ? nd->line_len : LINE_KEPT;
    while (shown > 0 && (nd->line[shown - 1] == '\n' || nd->line[shown - 1] == '\r'))
        shown--;
    snprintf(L->error, sizeof(L->error), "node %u answered a %s with \"%.*s\"", i,
             is_set ? "SET" : "release", (int)shown, nd->line);
    return -1;
}

static int node_read(limit_run *L, unsigned i)
{
    lnode *nd = &L->nodes[i];
    char *rbuf = L->read;
    for (;;) {
        ssize_t got = read(nd->fd, rbuf, sizeof(L->read));
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return 0;
        if (got <= 0) {
            snprintf(L->error, sizeof(L->error), "node %u: %s", i,
                     got == 0 ? "connection closed" : strerror(errno));
            return -1;
        }
        const char *p = rbuf, *end = rbuf + got;
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t take = (size_t)((nl != NULL ? nl + 1 : end) - p);
            if (nd->line_len < LINE_KEPT) {
                size_t room = LINE_KEPT - nd->line_len;
                memcpy(nd->line + nd->line_len, p, take < room ? take : room);
            }
            nd->line_len += take;
            p += take;
            if (nl != NULL) {
                if (check_line(L, i, nd) != 0)
                    return -1;
                nd->answered++;
                nd->line_len = 0;
            }
        }
    }
}

static int node_write(limit_run *L, unsigned i)
{
    lnode *nd = &L->nodes[i];
    while (nd->written < L->issued) {
        const redlock__buf *b = &L->batch[nd->written % WINDOW];
        ssize_t put = write(nd->fd, b->data + nd->write_off, b->len - nd->write_off);
        if (put < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return 0;
        if (put < 0) {
            snprintf(L->error, sizeof(L->error), "node %u: %s", i, strerror(errno));
            return -1;
        }
        nd->write_off += (size_t)put;
        if (nd->write_off == b->len) {
            nd->written++;
            nd->write_off = 0;
        }
    }
    return 0;
}

static uint64_t answered_total(const limit_run *L)
{
    uint64_t sum = 0;
    for (unsigned i = 0; i < L->n; i++)
        sum += L->nodes[i].answered;
    return sum;
}

/* Hand out batches while the window allows, then one poll over the nodes. */
static int pump(limit_run *L)
{
    uint64_t oldest_open = UINT64_MAX;
    for (unsigned i = 0; i < L->n; i++) {
        uint64_t done = L->nodes[i].answered / REPLIES_PER_BATCH;
        if (done < oldest_open)
            oldest_open = done;
    }
    while (L->issuing && L->issued < oldest_open + WINDOW)
        L->issued++;
    struct pollfd pfd[REDLOCK_MAX_NODES];
    for (unsigned i = 0; i < L->n; i++) {
        pfd[i].fd = L->nodes[i].fd;
        pfd[i].events = (short)(POLLIN | (L->nodes[i].written < L->issued ? POLLOUT : 0));
        pfd[i].revents = 0;
    }
    int ready = poll(pfd, L->n, 100);
    if (ready < 0 && errno != EINTR) {
        snprintf(L->error, sizeof(L->error), "poll: %s", strerror(errno));
        return -1;
    }
    for (unsigned i = 0; i < L->n && ready > 0; i++) {
        if ((pfd[i].revents & POLLOUT) && node_write(L, i) != 0)
            return -1;
        if ((pfd[i].revents & (POLLIN | POLLERR | POLLHUP)) && node_read(L, i) != 0)
            return -1;
    }
    return 0;
}

static int pump_until(limit_run *L, uint64_t until_us)
{
    while (bench_now_us() < until_us)
        if (pump(L) != 0)
            return -1;
    return 0;
}

/* Every batch handed out answered by every node (nothing left on the connections). */
static int drain(limit_run *L)
{
    L->issuing = false;
    uint64_t until = bench_now_us() + 30000000;
    for (;;) {
        bool all = true;
        for (unsigned i = 0; i < L->n; i++)
            all = all && L->nodes[i].answered == L->issued * REPLIES_PER_BATCH;
        if (all)
            return 0;
        if (bench_now_us() >= until) {
            snprintf(L->error, sizeof(L->error), "the nodes did not answer every batch in 30 s");
            return -1;
        }
        if (pump(L) != 0)
            return -1;
    }
}

static void limit_free(limit_run *L)
{
    for (unsigned i = 0; i < L->n; i++)
        if (L->nodes[i].ctx != NULL)
            redisFree(L->nodes[i].ctx);
    for (unsigned s = 0; s < WINDOW; s++)
        redlock__buf_free(&L->batch[s], &L->alloc);
    free(L);
}

limit_run *bench_limit_open(const bench_config *cfg, int *rc)
{
    *rc = 0;
    for (unsigned i = 0; i < cfg->n_nodes; i++) {
        redlock_url u;
        bool tls = redlock_url_parse(&u, cfg->urls[i], NULL, 0) == 0 && u.tls;
        redlock_url_free(&u);
        if (tls) {
            printf("%-11s skipped: the nodes are TLS nodes (the limit is measured over plain "
                   "connections)\n",
                   "limit");
            *rc = 1;
            return NULL;
        }
    }
    limit_run *L = calloc(1, sizeof(*L));
    if (L == NULL) {
        *rc = -1;
        return NULL;
    }
    redlock__alloc_init(&L->alloc, NULL, NULL);
    L->n = cfg->n_nodes;
    for (unsigned i = 0; i < L->n && *rc == 0; i++)
        *rc = node_open(L, i, cfg->urls[i]);
    for (unsigned s = 0; s < WINDOW && *rc == 0; s++)
        *rc = make_batch(L, s, cfg->ttl_ms);
    if (*rc == 0) { /* warm-up: buffers grown, caches hot */
        L->issuing = true;
        *rc = pump_until(L, bench_now_us() + 200000);
        if (*rc == 0)
            *rc = drain(L);
    }
    if (*rc != 0) {
        fprintf(stderr, "redlock-bench: limit: %s\n", L->error);
        limit_free(L);
        *rc = -1;
        return NULL;
    }
    return L;
}

double bench_limit_slice(limit_run *L, double seconds, uint64_t *cpu_us, uint64_t *commands)
{
    uint64_t cpu0 = bench_cpu_us();
    uint64_t t0 = bench_now_us(), a0 = answered_total(L);
    L->issuing = true;
    int rc = pump_until(L, t0 + (uint64_t)(seconds * 1e6));
    uint64_t answered = answered_total(L) - a0;
    double elapsed_s = (double)(bench_now_us() - t0) / 1e6;
    if (rc == 0)
        rc = drain(L); /* the servers idle again before whatever runs next */
    if (rc != 0) {
        fprintf(stderr, "redlock-bench: limit: %s\n", L->error);
        return -1;
    }
    if (cpu_us != NULL)
        *cpu_us += bench_cpu_us() - cpu0;
    if (commands != NULL)
        *commands += answered;
    return (double)answered / elapsed_s / (2.0 * L->n);
}

void bench_limit_close(limit_run *L)
{
    if (L != NULL)
        limit_free(L);
}

int bench_limit(bench_config *cfg)
{
    int rc;
    limit_run *L = bench_limit_open(cfg, &rc);
    if (L == NULL)
        return rc;
    unsigned per_cycle = 2 * L->n;
    double slices[SLICES], sorted[SLICES];
    uint64_t cpu = 0, answered = 0;
    double slice_s = cfg->duration_s / SLICES;
    for (unsigned s = 0; s < SLICES; s++) {
        slices[s] = bench_limit_slice(L, slice_s, &cpu, &answered);
        if (slices[s] < 0) {
            bench_limit_close(L);
            return -1;
        }
    }
    memcpy(sorted, slices, sizeof(sorted));
    double cycles_per_s = median_of(sorted, SLICES);
    cfg->limit_cycles_per_s = cycles_per_s;
    double commands_per_s = cycles_per_s * per_cycle;
    double cycles = (double)answered / per_cycle;
    double cpu_per_cycle = cycles > 0 ? (double)cpu / cycles : 0;
    printf("%-11s %u nodes, %u in flight, pipelined: %6.0f cycles/s (%.0f commands/s): the "
           "servers' limit\n",
           "limit", L->n, WINDOW * BATCH_CYCLES, cycles_per_s, commands_per_s);
    if (cfg->json != NULL) {
        FILE *f = cfg->json;
        json_begin(f, "limit");
        fprintf(f,
                ",\"nodes\":%u,\"in_flight\":%u,\"commands_per_s\":%.1f,\"commands_per_cycle\":%u,"
                "\"cycles_per_s_limit\":%.1f,\"slices\":",
                L->n, WINDOW * BATCH_CYCLES, commands_per_s, per_cycle, cycles_per_s);
        json_doubles(f, slices, SLICES);
        fprintf(f, ",\"cpu_us_per_cycle\":%.2f}\n", cpu_per_cycle);
        fflush(f);
    }
    bench_limit_close(L);
    return 0;
}
