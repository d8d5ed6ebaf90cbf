/* SPDX-License-Identifier: MIT */
/* io_uv.c - io.h on libuv. */
#include "io_uv.h"

#include "chanset.h"
#include "cluster.h"
#include "subscriber.h"

#include <stdint.h>
#include <string.h>

#define RANDOM_POOL 512

typedef struct io_uv {
    redlock__io base;
    uv_loop_t *loop;
    redlock__alloc alloc; /* a copy: the io outlives the client's memory by a moment at close */
    uv_timer_t timer;
    uv_async_t async; /* signal: made by the first signal_start */
    bool async_started;
    unsigned n_nodes;
    redlock__closing closing; /* its timer, each node's subscriber and node */
    /* Tokens take 16 bytes each; one getrandom() per 32 of them keeps syscalls off the lock
     * path without weakening the randomness. */
    unsigned char pool[RANDOM_POOL];
    size_t pool_left;
    redlock__chanset chans;      /* keys waiters wait for, shared by the subscribers */
    redlock__sub **subs;         /* one per node: connects only while chans is not empty */
    redlock__cluster **clusters; /* per node: the cluster, for a cluster:// node; else NULL */
    redlock__node *nodes[];      /* per node: the node, for any other; else NULL */
} io_uv;

static uint64_t io_now_us(redlock__io *io)
{
    (void)io;
    return redlock__now_us();
}

static void io_send(redlock__io *base, unsigned node, redlock__req *req)
{
    io_uv *io = (io_uv *)base;
    if (io->clusters[node] != NULL)
        redlock__cluster_send(io->clusters[node], req);
    else
        redlock__node_send(io->nodes[node], req);
}

static void on_timer(uv_timer_t *t)
{
    io_uv *io = REDLOCK__CONTAINER_OF(t, io_uv, timer);
    io->base.on_wake(&io->base);
}

static void io_wake_at(redlock__io *base, uint64_t due_us)
{
    io_uv *io = (io_uv *)base;
    if (due_us == UINT64_MAX) {
        uv_timer_stop(&io->timer);
        return;
    }
    redlock__timer_at(&io->timer, on_timer, due_us, redlock__now_us());
}

static int io_random(redlock__io *base, void *buf, size_t len)
{
    io_uv *io = (io_uv *)base;
    unsigned char *out = buf;
    while (len > 0) {
        if (io->pool_left == 0) {
            int rc = uv_random(NULL, NULL, io->pool, sizeof(io->pool), 0, NULL);
            if (rc != 0)
                return rc;
            io->pool_left = sizeof(io->pool);
        }
        size_t take = REDLOCK__MIN(len, io->pool_left);
        unsigned char *src = io->pool + sizeof(io->pool) - io->pool_left;
        memcpy(out, src, take);
        memset(src, 0, take); /* a token is never handed out twice, even from a core dump */
        io->pool_left -= take;
        out += take;
        len -= take;
    }
    return 0;
}

static void maybe_closed(io_uv *io)
{
    if (!redlock__closing_done(&io->closing))
        return;
    /* on_closed may free the client; the io frees itself after, with its own copy of the
     * allocator, so the client can still use the io (its clock) while it delivers. */
    if (io->base.on_closed != NULL)
        io->base.on_closed(&io->base);
    redlock__alloc alloc = io->alloc;
    redlock__chanset_free(&io->chans, &alloc);
    redlock__free(&alloc, io->subs);
    redlock__free(&alloc, io->clusters);
    redlock__free(&alloc, io);
}

static void on_node_closed(void *data)
{
    maybe_closed(data);
}

static void on_timer_closed(uv_handle_t *h)
{
    maybe_closed(h->data);
}

static void on_async(uv_async_t *async)
{
    io_uv *io = REDLOCK__CONTAINER_OF(async, io_uv, async);
    if (io->base.on_signal != NULL)
        io->base.on_signal(&io->base);
}

static int io_signal_start(redlock__io *base)
{
    io_uv *io = (io_uv *)base;
    if (io->async_started)
        return 0;
    if (uv_async_init(io->loop, &io->async, on_async) != 0)
        return REDLOCK_ENOMEM;
    uv_unref((uv_handle_t *)&io->async); /* it keeps no loop running that the client would not */
    io->async_started = true;
    return 0;
}

static void io_signal(redlock__io *base)
{
    uv_async_send(&((io_uv *)base)->async);
}

static void io_close(redlock__io *base)
{
    io_uv *io = (io_uv *)base;
    /* it tells on_closed */
    io->closing = (redlock__closing){.pending = 2 * io->n_nodes + 1 + io->async_started};
    io->timer.data = io;
    uv_close((uv_handle_t *)&io->timer, on_timer_closed);
    if (io->async_started) {
        io->async.data = io;
        uv_close((uv_handle_t *)&io->async, on_timer_closed);
    }
    for (unsigned i = 0; i < io->n_nodes; i++)
        redlock__sub_close(io->subs[i], on_node_closed, io);
    for (unsigned i = 0; i < io->n_nodes; i++) {
        if (io->clusters[i] != NULL)
            redlock__cluster_close(io->clusters[i], on_node_closed, io);
        else
            redlock__node_close(io->nodes[i], on_node_closed, io);
    }
}

static int io_watch(redlock__io *base, const char *key, size_t len, bool on)
{
    io_uv *io = (io_uv *)base;
    int rc = on ? redlock__chanset_ref(&io->chans, &io->alloc, key, len)
                : redlock__chanset_unref(&io->chans, &io->alloc, key, len);
    if (rc < 0)
        return rc;
    if (rc == 1) {
        for (unsigned i = 0; i < io->n_nodes; i++)
            redlock__sub_changed(io->subs[i], key, len, on);
    }
    return 0;
}

/* Whether the server a subscriber of node reached (run_id, "" unknown) is the one node's
 * command connections count votes from: for a plain node, the server its ready connection
 * reached; for a cluster, one of its masters' (a cluster is one vote whichever of its servers
 * speaks). */
static bool sub_is_node(const io_uv *io, unsigned node, const char *run_id)
{
    if (run_id[0] == '\0')
        return false;
    if (io->clusters[node] != NULL)
        return redlock__cluster_twin(io->clusters[node], NULL, run_id) != NULL;
    const char *cmd = redlock__node_run_id(io->nodes[node]);
    return cmd != NULL && strcmp(cmd, run_id) == 0;
}

static void on_sub_message(void *ctx, unsigned node, const char *run_id, const char *channel,
                           size_t len, const char *message, size_t message_len)
{
    io_uv *io = ctx;
    if (io->base.on_notify == NULL)
        return;
    unsigned from = sub_is_node(io, node, run_id) ? node : REDLOCK__IO_NO_NODE;
    io->base.on_notify(&io->base, from, channel, len, message, message_len);
}

/* node_config.changed: node index (a plain node, or a connection of a cluster) reached a new
 * server. */
static void on_node_changed(void *ctx, unsigned index)
{
    io_uv *io = ctx;
    if (io->base.on_node_changed != NULL)
        io->base.on_node_changed(&io->base, index);
}

/* node_config.same: node index reconnected to the server it had, running since before asked_us. */
static void on_node_same(void *ctx, unsigned index, uint64_t asked_us)
{
    io_uv *io = ctx;
    if (io->base.on_node_same != NULL)
        io->base.on_node_same(&io->base, index, asked_us);
}

/* node_config.twin_of: another node connected to the server with this run_id (for a cluster,
 * a connection of another cluster: a cluster's own servers are one vote together). */
static const char *io_twin_of(void *ctx, const redlock__node *node, const char *run_id)
{
    io_uv *io = ctx;
    for (unsigned i = 0; i < io->n_nodes; i++) {
        if (io->clusters[i] != NULL) {
            const char *twin = redlock__cluster_twin(io->clusters[i], node, run_id);
            if (twin != NULL)
                return twin;
            continue;
        }
        const char *other = io->nodes[i] != node ? redlock__node_run_id(io->nodes[i]) : NULL;
        if (other != NULL && strcmp(other, run_id) == 0)
            return redlock__node_name(io->nodes[i]);
    }
    return NULL;
}

static bool io_node_info(redlock__io *base, unsigned i, redlock_node_info *out)
{
    io_uv *io = (io_uv *)base;
    if (i >= io->n_nodes)
        return false;
    if (io->clusters[i] != NULL)
        redlock__cluster_info(io->clusters[i], out);
    else
        redlock__node_info(io->nodes[i], out);
    return true;
}

static uint64_t io_timeout_us(redlock__io *base, unsigned i)
{
    io_uv *io = (io_uv *)base;
    if (io->clusters[i] != NULL)
        return redlock__cluster_timeout_us(io->clusters[i]);
    return redlock__node_timeout_us(io->nodes[i]);
}

static const redlock__io_ops io_uv_ops = {
    io_send,      io_now_us, io_wake_at,      io_random, io_close,      io_watch,
    io_node_info, NULL,      io_signal_start, io_signal, io_timeout_us,
};

redlock__node *redlock__io_uv_node(redlock__io *base, unsigned i)
{
    if (base == NULL || base->ops != &io_uv_ops)
        return NULL;
    io_uv *io = (io_uv *)base;
    return i < io->n_nodes ? io->nodes[i] : NULL;
}

int redlock__io_uv_new(uv_loop_t *loop, const redlock__node_config *cfgs, unsigned n,
                       const redlock__alloc *alloc, redlock__io **out)
{
    io_uv *io = redlock__calloc(alloc, 1, sizeof(*io) + n * sizeof(io->nodes[0]));
    if (io == NULL)
        return REDLOCK_ENOMEM;
    io->base.ops = &io_uv_ops;
    io->loop = loop;
    io->alloc = *alloc;
    io->n_nodes = n;
    io->subs = redlock__calloc(alloc, n, sizeof(io->subs[0]));
    io->clusters = redlock__calloc(alloc, n, sizeof(io->clusters[0]));
    if (io->subs == NULL || io->clusters == NULL) {
        redlock__free(alloc, io->subs);
        redlock__free(alloc, io->clusters);
        redlock__free(alloc, io);
        return REDLOCK_ENOMEM;
    }
    for (unsigned i = 0; i < n; i++) {
        redlock__node_config cfg = cfgs[i];
        cfg.twin_of = io_twin_of;
        cfg.twin_ctx = io;
        cfg.changed = on_node_changed;
        cfg.same = cfg.url->cluster ? NULL : on_node_same; /* a cluster: one of its masters */
        cfg.changed_ctx = io;
        cfg.index = i;
        int rc = cfg.url->cluster ? redlock__cluster_new(loop, &cfg, &io->clusters[i])
                                  : redlock__node_new(loop, &cfg, &io->nodes[i]);
        if (rc != 0 || redlock__sub_new(loop, &cfgs[i], i, &io->chans, on_sub_message, io,
                                        &io->subs[i]) != 0) {
            for (unsigned j = i + 1; j-- > 0;) { /* i itself, then those before */
                if (io->nodes[j] != NULL)
                    redlock__node_free_unstarted(io->nodes[j]);
                if (io->clusters[j] != NULL)
                    redlock__cluster_free_unstarted(io->clusters[j]);
                if (io->subs[j] != NULL)
                    redlock__sub_free_unstarted(io->subs[j]);
            }
            redlock__free(alloc, io->subs);
            redlock__free(alloc, io->clusters);
            redlock__free(alloc, io);
            return REDLOCK_ENOMEM;
        }
    }
    uv_timer_init(loop, &io->timer);
    for (unsigned i = 0; i < n; i++) {
        if (io->clusters[i] != NULL)
            redlock__cluster_start(io->clusters[i]);
        else
            redlock__node_start(io->nodes[i]);
        redlock__sub_start(io->subs[i]);
    }
    *out = &io->base;
    return 0;
}
