/* SPDX-License-Identifier: MIT */
/* sim_io.c - io.h in virtual time: a simulated network between the processes and the nodes, and
 * the io table the real client runs on.
 *
 * Each process has one connection per node; messages on it keep their order (TCP), may be
 * delayed, stalled (a retransmission: later messages wait behind it), dropped, or cut by a
 * partition. A request carries the command as the library encoded it (grant tag and all); the
 * node runs it (sim_node.c, sim_cluster.c) and its reply comes back as the server's reply, read
 * by the library's own reply reader (redlock__cmd_vote) as lib/net/node.c reads it. A restarted
 * node kills every connection to it; the process notices a little later, fails what it still waited
 * for, fails new sends at once while it reconnects, then reconnects (the connection's model is the
 * kit's, lib/sim/sim_link.h). The subscriber connections that wake waiters are sim_pubsub.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

static sim_proc *proc_of(redlock__io *io)
{
    return ((sim_io *)io)->proc;
}

/* ---- the network ------------------------------------------------------------------------------
 */

sim_msg *sim_msg_new(const char *wire, size_t len)
{
    sim_msg *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return NULL;
    m->wire = malloc(len > 0 ? len : 1);
    if (m->wire == NULL) {
        free(m);
        return NULL;
    }
    if (len > 0)
        memcpy(m->wire, wire, len);
    m->wire_len = len;
    m->wait_count = -1;
    return m;
}

void sim_msg_free(sim_msg *m)
{
    if (m != NULL)
        free(m->wire);
    free(m);
}

uint64_t sim_net_delay(sim_world *w)
{
    const sim_config *cfg = &w->cfg;
    uint64_t d = sim_rng_range(&w->rng, cfg->delay_min_us, cfg->delay_max_us);
    if (sim_rng_chance(&w->rng, cfg->stall_prob))
        d += sim_rng_range(&w->rng, 0, cfg->stall_max_us);
    return d;
}

/* true if the message is lost on the way in direction dir (the caller frees it). */
static bool net_lost(sim_world *w, const sim_conn *c, int dir)
{
    if (sim_link_cut(&c->link, dir, w->now))
        return true;
    return sim_rng_chance(&w->rng, w->cfg.drop_prob);
}

static void net_to_node(sim_world *w, sim_proc *p, unsigned node, sim_msg *msg)
{
    sim_conn *c = &p->conns[node];
    if (net_lost(w, c, SIM_LINK_TO_NODE)) {
        sim_trace(w, "p%u -> n%u req %llu lost", p->id, node, (unsigned long long)msg->req_id);
        sim_msg_free(msg);
        return;
    }
    uint64_t at = sim_link_land(&c->link, SIM_LINK_TO_NODE, w->now, w->now, sim_net_delay(w));
    sim_push(w, at, EV_NODE_RECV, p->id, node, 0, msg);
}

void sim_net_reply(sim_world *w, sim_proc *p, unsigned node, sim_msg *msg, uint64_t leave_at)
{
    sim_conn *c = &p->conns[node];
    if (net_lost(w, c, SIM_LINK_TO_CLIENT)) {
        sim_trace(w, "n%u -> p%u reply %llu lost", node, p->id, (unsigned long long)msg->req_id);
        sim_msg_free(msg);
        return;
    }
    uint64_t at = sim_link_land(&c->link, SIM_LINK_TO_CLIENT, w->now,
                                REDLOCK__MAX(leave_at, w->now), sim_net_delay(w));
    sim_push(w, at, EV_CLIENT_RECV, p->id, node, 0, msg);
}

void sim_net_resend(sim_world *w, sim_proc *p, unsigned node, sim_msg *msg, uint64_t at)
{
    if (net_lost(w, &p->conns[node], SIM_LINK_TO_NODE)) {
        sim_msg_free(msg);
        return;
    }
    sim_push(w, at, EV_NODE_RECV, p->id, node, 0, msg);
}

uint64_t sim_node_run_id(const sim_world *w, unsigned node)
{
    const sim_node *n = &w->nodes[node];
    return n->cluster != NULL ? sim_cluster_run_id(n) : n->run_id;
}

/* ---- completions ------------------------------------------------------------------------------
 */

/* Complete a request. The pending record is already unlinked: the callback may send again,
 * close the client, or do anything else the client does. */
static void complete(sim_proc *p, redlock__req *req, redlock_vote vote, const char *error,
                     const redlock__reply_data *data)
{
    sim_world *w = p->w;
    p->completed++;
    sim_hash(w, (uint64_t)vote);
    req->cb(req, vote, error, data, sim_proc_now(p));
}

static void fail_pending(sim_proc *p, sim_conn *c, const char *why)
{
    for (sim_pending *q = sim_link_next(&c->link); q != NULL; q = sim_link_next(&c->link)) {
        redlock__req *req = q->req;
        free(q);
        complete(p, req, REDLOCK_VOTE_ERROR, why, NULL);
    }
}

/* ---- the io table -----------------------------------------------------------------------------
 */

static bool is_cluster(const sim_world *w, unsigned node)
{
    return w->nodes[node].cluster != NULL;
}

/* The encoding a node gets: the library's, with the grant tag a cluster node with the replica
 * wait clears (lib/net/cluster.c: no grant where a write counts only with its replicas' acks),
 * unless that rule is the control that is broken. */
static sim_msg *encode(sim_proc *p, unsigned node, const redlock__req *req)
{
    sim_world *w = p->w;
    unsigned tag = req->grant_tag;
    if (is_cluster(w, node) && w->cfg.wait_replicas > 0 && !w->cfg.grant_without_wait)
        tag = 0;
    redlock__buf buf = {0};
    int rc = redlock__cmd_append_tagged(req->cmd, tag, false, &buf, &w->alloc);
    sim_msg *m = rc == 0 ? sim_msg_new(buf.data, buf.len) : NULL;
    redlock__buf_free(&buf, &w->alloc);
    return m;
}

static void io_send(redlock__io *io, unsigned node, redlock__req *req)
{
    sim_proc *p = proc_of(io);
    sim_world *w = p->w;
    sim_conn *c = &p->conns[node];
    uint64_t now = sim_proc_now(p);
    req->sent_us = now;
    req->deadline_us = now + p->io.timeout_us[node];
    req->next = NULL;
    p->sent++;
    const redlock__cmd *cmd = req->cmd;
    sim_trace(w, "p%u -> n%u %s %.*s %.*s ttl=%llu%s", p->id, node, redlock__cmd_name(cmd->kind),
              (int)cmd->key_len, cmd->key, (int)REDLOCK__MIN(cmd->token_len, 8), cmd->token,
              (unsigned long long)cmd->ttl_ms, cmd->place != NULL ? " queued" : "");
    if (cmd->kind == REDLOCK__CMD_EXTEND && cmd->token_len == p->dead_token_len &&
        memcmp(cmd->token, p->dead_token, cmd->token_len) == 0)
        sim_promise(w, "p%u sent an extension of a lock it had released or been told it lost",
                    p->id);
    /* Fail fast, synchronously, as the real io does for a closed client or a node that is down. */
    if (p->io.closing || p->io.closed) {
        complete(p, req, REDLOCK_VOTE_ERROR, "canceled: client closing", NULL);
        return;
    }
    if (p->vanished) {
        complete(p, req, REDLOCK_VOTE_ERROR, "not connected: the process vanished", NULL);
        return;
    }
    /* A server listed twice: lib/net/node.c refuses the second connection (same run_id). */
    if (w->cfg.alias_node != 0 && node == w->cfg.alias_node - 1) {
        complete(p, req, REDLOCK_VOTE_ERROR,
                 "same server as redis://sim-0:6379: a server must count only once", NULL);
        return;
    }
    if (!c->link.client_up) {
        complete(p, req, REDLOCK_VOTE_ERROR, "not connected", NULL);
        return;
    }
    sim_pending *q = calloc(1, sizeof(*q));
    sim_msg *m = encode(p, node, req);
    if (q == NULL || m == NULL) {
        free(q);
        sim_msg_free(m);
        w->oom = true;
        complete(p, req, REDLOCK_VOTE_ERROR, "out of memory", NULL);
        return;
    }
    q->id = ++w->next_req_id;
    q->req = req;
    if (c->link.head == NULL && c->skip == 0)
        c->owing_since_local = now;
    sim_link_owe(&c->link, q);
    m->req_id = q->id;
    m->epoch = c->link.epoch;
    m->kind = cmd->kind;
    m->queued = cmd->place != NULL;
    m->n_keys = cmd->n_more + 1;
    m->deadline_local = req->deadline_us;
    if (is_cluster(w, node)) {
        char key[32];
        for (unsigned r = 0; r < w->cfg.n_resources; r++) /* the shard p believes owns it */
            if (sim_resource_key(w, r, key, sizeof(key)) == cmd->key_len &&
                memcmp(key, cmd->key, cmd->key_len) == 0)
                m->shard = p->view[node][r];
    }
    sim_push(w, sim_clock_true(w, p->rate_ppm, p->offset_us, req->deadline_us), EV_REQ_TIMEOUT,
             p->id, node, q->id, NULL);
    net_to_node(w, p, node, m);
}

static uint64_t io_now_us(redlock__io *io)
{
    return sim_proc_now(proc_of(io));
}

static void io_wake_at(redlock__io *io, uint64_t due_us)
{
    sim_proc *p = proc_of(io);
    p->wake_gen++; /* an earlier wake-up is replaced */
    if (due_us == UINT64_MAX || p->io.closed)
        return;
    sim_world *w = p->w;
    sim_push(w, sim_clock_true(w, p->rate_ppm, p->offset_us, due_us), EV_WAKE, p->id, 0,
             p->wake_gen, NULL);
}

static int io_random(redlock__io *io, void *buf, size_t len)
{
    sim_rng_bytes(&proc_of(io)->rng, buf, len);
    return 0;
}

static void io_close(redlock__io *io)
{
    sim_proc *p = proc_of(io);
    if (p->io.closing) {
        sim_contract(p->w, "io closed twice by process %u", p->id);
        return;
    }
    p->io.closing = true;
    p->wake_gen++;
    for (unsigned i = 0; i < p->w->cfg.n_nodes; i++)
        fail_pending(p, &p->conns[i], "canceled: client closing");
    sim_pubsub_close(p);
    redlock__chanset_free(&p->chans, &p->w->alloc);
    /* on_closed comes later, as libuv's close callbacks do. */
    sim_push(p->w, p->w->now, EV_IO_CLOSED, p->id, 0, 0, NULL);
}

/* One more or one less waiter for a channel (chanset.h's set, as io_uv.c keeps it): a channel new
 * to the set, or gone from it, is (un)subscribed on every node's subscriber. */
static int io_watch(redlock__io *io, const char *key, size_t len, bool on)
{
    sim_proc *p = proc_of(io);
    int rc = on ? redlock__chanset_ref(&p->chans, &p->w->alloc, key, len)
                : redlock__chanset_unref(&p->chans, &p->w->alloc, key, len);
    if (rc < 0)
        return rc;
    if (rc == 1)
        sim_pubsub_changed(p, key, len, on);
    return 0;
}

/* The process's wall clock: true time give or take its offset (places in the queues). */
static uint64_t io_wall_us(redlock__io *io)
{
    sim_proc *p = proc_of(io);
    return (uint64_t)((int64_t)p->w->now + p->wall_offset_us);
}

static const redlock__io_ops sim_io_ops = {
    io_send,  io_now_us, io_wake_at, io_random, io_close,
    io_watch, NULL,      io_wall_us, NULL, /* signal_start: no other thread wakes the simulator, so
                                              no cancelers */
    NULL,     NULL,                        /* timeout_us: the configured one */
};

int sim_io_factory(void *ctx, const redlock__node_config *cfgs, unsigned n,
                   const redlock__alloc *alloc, redlock__io **out)
{
    (void)alloc;
    sim_proc *p = ctx;
    sim_world *w = p->w;
    if (n != w->cfg.n_nodes)
        return REDLOCK_EINVAL;
    memset(&p->io, 0, sizeof(p->io));
    p->io.base.ops = &sim_io_ops;
    p->io.proc = p;
    for (unsigned i = 0; i < n; i++) {
        bool up = w->nodes[i].up; /* down only if dead from the start */
        p->io.timeout_us[i] = cfgs[i].timeout_us;
        p->conns[i] = (sim_conn){0};
        sim_link_init(&p->conns[i].link, up, up ? sim_node_run_id(w, i) : 0);
        p->conns[i].last_reply_local = sim_proc_now(p);
        for (unsigned r = 0; w->nodes[i].cluster != NULL && r < w->cfg.n_resources; r++)
            p->view[i][r] = (unsigned char)sim_cluster_owner(&w->nodes[i], r);
    }
    *out = &p->io.base;
    return 0;
}

/* ---- events -----------------------------------------------------------------------------------
 */

static void on_node_recv(sim_world *w, const sim_event *ev)
{
    sim_proc *p = &w->procs[ev->proc];
    sim_node *n = &w->nodes[ev->node];
    sim_msg *m = ev->msg;
    sim_conn *c = &p->conns[ev->node];
    /* A connection the process dropped still delivers what was written on it; one the node's
     * crash killed does not. */
    if (!n->up || m->epoch <= c->link.crash_epoch) {
        sim_trace(w, "n%u drops req %llu (connection gone)", ev->node,
                  (unsigned long long)m->req_id);
        sim_msg_free(m);
        return;
    }
    if (n->cluster != NULL) {
        sim_cluster_recv(w, p, ev->node, m);
        return;
    }
    sim_node_exec(w, p, ev->node, &n->db, -1, n->run_id, NULL, NULL, m);
    sim_hostile_reply(w, ev->node, m);
    sim_trace(w, "n%u ran req %llu from p%u: reply type %d %lld", ev->node,
              (unsigned long long)m->req_id, ev->proc, (int)m->reply.v.type, m->reply.v.integer);
    sim_hash(w, (uint64_t)m->reply.v.type << 32 ^ (uint64_t)m->reply.v.integer);
    sim_net_reply(w, p, ev->node, m, w->now);
}

/* A node deleted every key of a hold with the release's token, but the reply does not say yes:
 * the release would report a gap that was not there (its status must not depend on pubsub). */
static void check_release_reply(sim_proc *p, unsigned node, const sim_msg *m, redlock_vote vote)
{
    sim_world *w = p->w;
    if (m->kind != REDLOCK__CMD_RELEASE || m->reply.freed != m->n_keys ||
        vote == REDLOCK_VOTE_YES || sim_hostile_node(w, node))
        return;
    sim_result *res = w->res;
    if (m->mid_migration) {
        res->migration_release_errors++;
        return;
    }
    res->dishonest_releases++;
    if (res->dishonest)
        return;
    res->dishonest = true;
    snprintf(res->dishonest_what, sizeof(res->dishonest_what),
             "n%u deleted every key of p%u's hold (%u) with its release, whose reply then said "
             "%s (\"%.200s\")",
             node, p->id, m->n_keys, redlock_vote_name(vote), m->reply.v.str);
    sim_trace(w, "RELEASE MISREPORTED: %s", res->dishonest_what);
}

static void on_client_recv(sim_world *w, const sim_event *ev)
{
    sim_proc *p = &w->procs[ev->proc];
    sim_msg *m = ev->msg;
    sim_conn *c = &p->conns[ev->node];
    sim_pending *q = NULL;
    bool current = !p->io.closing && m->epoch == c->link.epoch;
    if (current)
        q = sim_link_take(&c->link, m->req_id);
    if (q == NULL && current && c->skip > 0) {
        /* The late reply of a request that timed out: read and dropped, but the node spoke. */
        c->skip--;
        c->last_reply_local = sim_proc_now(p);
    }
    if (q == NULL) {
        sim_trace(w, "p%u drops late reply %llu from n%u", ev->proc, (unsigned long long)m->req_id,
                  ev->node);
        sim_msg_free(m);
        return;
    }
    redlock__req *req = q->req;
    free(q);
    c->last_reply_local = sim_proc_now(p);
    /* The reply read as lib/net/node.c reads it. */
    redisReply reply, elems[3], *ptrs[3];
    sim_reply_to_redis(&m->reply, &reply, elems, ptrs);
    char err[REDLOCK_ERROR_TEXT_MAX];
    redlock__reply_kind kind;
    redlock__reply_data data;
    redlock_vote vote = redlock__cmd_vote(req->cmd, &reply, err, sizeof(err), &kind, &data);
    if (kind != REDLOCK__REPLY_ANSWER)
        sim_contract(w, "p%u: a reply the library cannot take from n%u: %s", p->id, ev->node, err);
    /* A cluster node's replica wait (lib/net/cluster.c): a yes counts only with its replicas. */
    if (vote == REDLOCK_VOTE_YES && m->wait_count >= 0 &&
        (unsigned)m->wait_count < w->cfg.wait_replicas) {
        vote = REDLOCK_VOTE_ERROR;
        snprintf(err, sizeof(err), "written, but %d of %u replicas acknowledged it in time",
                 m->wait_count, w->cfg.wait_replicas);
    } else if (vote == REDLOCK_VOTE_YES && m->wait_count >= 0) {
        w->res->replica_waits++;
    }
    check_release_reply(p, ev->node, m, vote);
    sim_trace(w, "p%u <- n%u req %llu: %s", ev->proc, ev->node, (unsigned long long)m->req_id,
              redlock_vote_name(vote));
    complete(p, req, vote, vote == REDLOCK_VOTE_ERROR ? err : NULL,
             redlock__cmd_has_data(req->cmd) ? &data : NULL);
    sim_msg_free(m);
}

/* A request timed out; as lib/net/node.c's on_deadline, every request whose deadline has passed
 * times out with it (in FIFO order), its reply owed; then a node that owes replies and has been
 * silent for DROP_AFTER_TIMEOUTS timeouts loses its connection. */
#define DROP_AFTER_TIMEOUTS 3

static void time_out(sim_proc *p, sim_conn *c, sim_pending *q, unsigned node)
{
    redlock__req *req = q->req;
    sim_trace(p->w, "p%u: req %llu to n%u timed out", p->id, (unsigned long long)q->id, node);
    free(q);
    c->skip++;
    complete(p, req, REDLOCK_VOTE_TIMEOUT, "timeout", NULL);
}

static void on_timeout(sim_world *w, const sim_event *ev)
{
    sim_proc *p = &w->procs[ev->proc];
    sim_conn *c = &p->conns[ev->node];
    sim_pending *q = sim_link_take(&c->link, ev->arg);
    if (q == NULL)
        return; /* answered in time, or already timed out with an earlier one */
    time_out(p, c, q, ev->node);
    uint64_t now = sim_proc_now(p);
    while (c->link.head != NULL && c->link.head->req->deadline_us <= now && !p->io.closing)
        time_out(p, c, sim_link_next(&c->link), ev->node);
    if (!w->cfg.drop_silent_conns || p->io.closing || !c->link.client_up || !c->link.alive ||
        c->skip == 0)
        return;
    uint64_t quiet_since = REDLOCK__MAX(c->last_reply_local, c->owing_since_local);
    if (now - quiet_since < DROP_AFTER_TIMEOUTS * p->io.timeout_us[ev->node])
        return;
    /* The new epoch orphans the old connection: its replies are discarded here, but what it
     * carries to the node still lands there, unordered with the next connection. */
    sim_trace(w, "p%u drops its silent connection to n%u", ev->proc, ev->node);
    w->res->conn_drops++;
    sim_link_drop(&c->link);
    c->skip = 0;
    sim_push(w, w->now + sim_rng_range(&w->rng, 25000, 75000), EV_CONN_RETRY, ev->proc, ev->node, 0,
             NULL);
    fail_pending(p, c, "connection dropped: no answer");
}

void sim_io_vanished(sim_proc *p)
{
    for (unsigned i = 0; i < p->w->cfg.n_nodes; i++) {
        sim_conn *c = &p->conns[i];
        sim_link_drop(&c->link);
        fail_pending(p, c, "connection lost: the process vanished");
    }
}

void sim_conns_die(sim_world *w, unsigned node)
{
    for (unsigned i = 0; i < w->cfg.n_procs; i++) {
        sim_proc *p = &w->procs[i];
        /* everything in flight dies with the node; a connection the process dropped already
         * has nothing to notice */
        if (p->io.closed || !sim_link_crash(&p->conns[node].link))
            continue;
        sim_push(w, w->now + sim_rng_range(&w->rng, w->cfg.delay_min_us, w->cfg.delay_max_us),
                 EV_CONN_LOST, i, node, 0, NULL);
    }
}

static void on_conn_lost(sim_world *w, const sim_event *ev)
{
    sim_proc *p = &w->procs[ev->proc];
    sim_conn *c = &p->conns[ev->node];
    if (p->io.closing || !sim_link_noticed(&c->link))
        return;
    sim_trace(w, "p%u: connection to n%u lost", ev->proc, ev->node);
    sim_push(w, w->now + sim_link_retry_us(&w->rng), EV_CONN_RETRY, ev->proc, ev->node, 0, NULL);
    fail_pending(p, c, "connection lost");
}

static void on_conn_retry(sim_world *w, const sim_event *ev)
{
    sim_proc *p = &w->procs[ev->proc];
    sim_conn *c = &p->conns[ev->node];
    if (p->io.closing)
        return;
    if (!w->nodes[ev->node].up) {
        sim_push(w, w->now + sim_link_retry_us(&w->rng), EV_CONN_RETRY, ev->proc, ev->node, 0,
                 NULL);
        return;
    }
    sim_trace(w, "p%u: reconnected to n%u", ev->proc, ev->node);
    c->last_reply_local = sim_proc_now(p);
    c->skip = 0;
    /* Another server than before (it restarted, or a cluster failed over): the client is told
     * once the connection is up, as the real node does after its handshake (a process event: a
     * pause holds it back). */
    bool changed = sim_link_reconnect(&c->link, w->now, sim_node_run_id(w, ev->node));
    if (changed && !w->cfg.no_recheck)
        sim_push(w, w->now, EV_NEW_SERVER, ev->proc, ev->node, 0, NULL);
}

void sim_io_event(sim_world *w, const sim_event *ev)
{
    switch (ev->kind) {
    case EV_NODE_RECV:
        on_node_recv(w, ev);
        break;
    case EV_CLIENT_RECV:
        on_client_recv(w, ev);
        break;
    case EV_REQ_TIMEOUT:
        on_timeout(w, ev);
        break;
    case EV_CONN_LOST:
        on_conn_lost(w, ev);
        break;
    case EV_CONN_RETRY:
        on_conn_retry(w, ev);
        break;
    case EV_NEW_SERVER: {
        sim_proc *p = &w->procs[ev->proc];
        sim_trace(w, "p%u: n%u is a new server", ev->proc, ev->node);
        if (!p->io.closing && p->io.base.on_node_changed != NULL)
            p->io.base.on_node_changed(&p->io.base, ev->node);
        break;
    }
    case EV_NODE_CRASH:
    case EV_CLOCK_JUMP:
    case EV_NODE_UP:
        sim_node_event(w, ev);
        break;
    case EV_SUB_CONNECT:
    case EV_SUB_CMD:
    case EV_SUB_RECV:
    case EV_SUB_DROP:
        sim_pubsub_event(w, ev);
        break;
    case EV_REPLICATE:
    case EV_FAILOVER:
    case EV_RESYNC:
    case EV_MIGRATE:
        sim_cluster_event(w, ev);
        break;
    case EV_PARTITION: {
        sim_link *l = &w->procs[ev->proc].conns[ev->node].link;
        sim_link_fault(l, SIM_LINK_TO_NODE, w->now + ev->arg, 0);
        sim_link_fault(l, SIM_LINK_TO_CLIENT, w->now + ev->arg, 0);
        sim_trace(w, "p%u and n%u partitioned for %llu us", ev->proc, ev->node,
                  (unsigned long long)ev->arg);
        break;
    }
    case EV_IO_CLOSED: {
        sim_proc *p = &w->procs[ev->proc];
        p->io.closed = true;
        sim_trace(w, "p%u: io closed", ev->proc);
        if (p->io.base.on_closed != NULL)
            p->io.base.on_closed(&p->io.base); /* frees the client */
        p->client = NULL;
        break;
    }
    default:
        sim_contract(w, "event %d reached the io", (int)ev->kind);
        break;
    }
}

void sim_io_teardown(sim_world *w)
{
    for (unsigned i = 0; i < w->cfg.n_procs; i++) {
        sim_proc *p = &w->procs[i];
        for (unsigned j = 0; j < w->cfg.n_nodes; j++)
            sim_link_free(&p->conns[j].link);
        redlock__chanset_free(&p->chans, &w->alloc);
    }
}
