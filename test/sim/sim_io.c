/* SPDX-License-Identifier: MIT */
/* sim_io.c - io.h in virtual time: simulated Redis masters, a simulated network, and the io table
 * the real client runs on.
 *
 * Nodes hold keys with a value and an expiry on the node's own clock, evaluated lazily as Redis
 * does (a key is gone once the node's clock is past its expiry). Each process has one connection
 * per node; messages on it keep their order (TCP), may be delayed, stalled (a retransmission:
 * later messages wait behind it), dropped, or cut by a partition. A restarted node kills every
 * connection to it; the process notices a little later, fails what it still waited for, fails
 * new sends at once while it reconnects, then reconnects. */
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

static uint64_t net_delay(sim_world *w)
{
    const sim_config *cfg = &w->cfg;
    uint64_t d = sim_rng_range(&w->rng, cfg->delay_min_us, cfg->delay_max_us);
    if (sim_rng_chance(&w->rng, cfg->stall_prob))
        d += sim_rng_range(&w->rng, 0, cfg->stall_max_us);
    return d;
}

/* true if the message is lost on the way (the caller frees it). */
static bool net_lost(sim_world *w, const sim_conn *c)
{
    if (!c->alive || w->now < c->partition_until)
        return true;
    return sim_rng_chance(&w->rng, w->cfg.drop_prob);
}

static void net_to_node(sim_world *w, sim_proc *p, unsigned node, sim_msg *msg)
{
    sim_conn *c = &p->conns[node];
    if (net_lost(w, c)) {
        sim_trace(w, "p%u -> n%u req %llu lost", p->id, node, (unsigned long long)msg->req_id);
        free(msg);
        return;
    }
    uint64_t delay = net_delay(w); /* one draw: REDLOCK__MAX evaluates twice */
    uint64_t at = REDLOCK__MAX(w->now + delay, c->last_to_node);
    c->last_to_node = at;
    sim_push(w, at, EV_NODE_RECV, p->id, node, 0, msg);
}

static void net_to_client(sim_world *w, sim_proc *p, unsigned node, sim_msg *msg)
{
    sim_conn *c = &p->conns[node];
    if (net_lost(w, c)) {
        sim_trace(w, "n%u -> p%u reply %llu lost", node, p->id, (unsigned long long)msg->req_id);
        free(msg);
        return;
    }
    uint64_t delay = net_delay(w); /* one draw: REDLOCK__MAX evaluates twice */
    uint64_t at = REDLOCK__MAX(w->now + delay, c->last_to_client);
    c->last_to_client = at;
    sim_push(w, at, EV_CLIENT_RECV, p->id, node, 0, msg);
}

/* ---- the nodes --------------------------------------------------------------------------------
 */

static uint64_t node_now(const sim_world *w, const sim_node *n)
{
    return sim_clock(n->rate_ppm, n->offset_us, w->now);
}

/* The live key, or NULL (an expired key is deleted on access, as Redis does lazily). */
static sim_key *node_get(sim_world *w, sim_node *n, const char *key, size_t len)
{
    uint64_t now = node_now(w, n);
    for (unsigned i = 0; i < n->n_keys; i++) {
        sim_key *k = &n->keys[i];
        if (k->key_len != len || memcmp(k->key, key, len) != 0)
            continue;
        if (now > k->expire_at) {
            n->keys[i] = n->keys[--n->n_keys];
            return NULL;
        }
        return k;
    }
    return NULL;
}

/* The first true time at which node n's clock is past expire_at: the key is gone from then. */
static uint64_t expiry_true(const sim_node *n, uint64_t expire_at)
{
    return sim_clock_true_raw(n->rate_ppm, n->offset_us, expire_at + 1);
}

/* A key was set on node n now: open its record. */
static void presence_open(sim_world *w, sim_node *n, sim_key *k)
{
    if (w->n_presence == w->cap_presence) {
        size_t cap = w->cap_presence != 0 ? w->cap_presence * 2 : 64;
        sim_presence *v = realloc(w->presence, cap * sizeof(*v));
        if (v == NULL) {
            w->oom = true;
            k->presence = SIZE_MAX;
            return;
        }
        w->presence = v;
        w->cap_presence = cap;
    }
    sim_presence *r = &w->presence[w->n_presence];
    r->node = (unsigned)(n - w->nodes);
    r->key_len = k->key_len;
    memcpy(r->key, k->key, k->key_len);
    r->value_len = k->value_len;
    memcpy(r->value, k->value, k->value_len);
    r->from = w->now;
    r->until = expiry_true(n, k->expire_at);
    k->presence = w->n_presence++;
}

/* The key's record ends at until (its new expiry, or now: deleted). */
static void presence_until(sim_world *w, const sim_key *k, uint64_t until)
{
    if (k->presence < w->n_presence)
        w->presence[k->presence].until = until;
}

static void node_del(sim_world *w, sim_node *n, sim_key *k)
{
    presence_until(w, k, w->now);
    *k = n->keys[--n->n_keys];
}

static void node_set(sim_world *w, sim_node *n, const sim_msg *m)
{
    sim_key *k = node_get(w, n, m->key, m->key_len);
    if (k == NULL) {
        if (n->n_keys == sizeof(n->keys) / sizeof(n->keys[0])) {
            sim_contract(w, "simulated node is out of key slots");
            return;
        }
        k = &n->keys[n->n_keys++];
    }
    k->key_len = m->key_len;
    memcpy(k->key, m->key, m->key_len);
    k->value_len = m->token_len;
    memcpy(k->value, m->token, m->token_len);
    k->expire_at = node_now(w, n) + m->ttl_ms * 1000;
    presence_open(w, n, k);
}

static bool is_ours(const sim_key *k, const sim_msg *m)
{
    return k != NULL && k->value_len == m->token_len &&
           memcmp(k->value, m->token, m->token_len) == 0;
}

/* Run a request on node n; the reply goes into m (reused). */
static void node_apply(sim_world *w, sim_node *n, sim_msg *m)
{
    sim_key *k = node_get(w, n, m->key, m->key_len);
    m->vote = REDLOCK_VOTE_NO;
    switch (m->kind) {
    case REDLOCK__CMD_ACQUIRE: /* SET key token NX PX ttl */
        if (k == NULL) {
            node_set(w, n, m);
            m->vote = REDLOCK_VOTE_YES;
        }
        break;
    case REDLOCK__CMD_EXTEND: /* compare-and-pexpire, or SET when missing and retake */
        if (is_ours(k, m)) {
            k->expire_at = node_now(w, n) + m->ttl_ms * 1000;
            presence_until(w, k, expiry_true(n, k->expire_at));
            m->vote = REDLOCK_VOTE_YES;
        } else if (k == NULL && m->retake) {
            node_set(w, n, m);
            if (m->fence != 0) /* a fenced lock's retake restores the counter too */
                sim_counter_raise(&n->counters, m->key, m->key_len, m->fence);
            m->vote = REDLOCK_VOTE_YES;
        }
        break;
    case REDLOCK__CMD_RELEASE: /* compare-and-delete */
        if (is_ours(k, m)) {
            node_del(w, n, k);
            m->vote = REDLOCK_VOTE_YES;
        }
        break;
    case REDLOCK__CMD_INSPECT: /* GET + PTTL */
        m->has_value = k != NULL;
        m->pttl_ms = -2;
        if (k != NULL) {
            m->vote = REDLOCK_VOTE_YES;
            m->token_len = k->value_len;
            memcpy(m->token, k->value, k->value_len);
            m->pttl_ms = (int64_t)((k->expire_at - node_now(w, n) + 500) / 1000);
        }
        m->fence = sim_counter_get(&n->counters, m->key, m->key_len);
        break;
    case REDLOCK__CMD_ACQUIRE_FENCED: /* SET NX PX and the counter up by one, in one step */
        if (k == NULL) {
            node_set(w, n, m);
            m->vote = REDLOCK_VOTE_YES;
            m->fence = sim_counter_get(&n->counters, m->key, m->key_len);
            if (!sim_counter_raise(&n->counters, m->key, m->key_len, m->fence + 1))
                sim_contract(w, "simulated node is out of counter slots");
        }
        break;
    case REDLOCK__CMD_COMMIT: /* counter = max(counter, fence) where the token stands */
        if (is_ours(k, m)) {
            if (!sim_counter_raise(&n->counters, m->key, m->key_len, m->fence))
                sim_contract(w, "simulated node is out of counter slots");
            m->vote = REDLOCK_VOTE_YES;
        }
        break;
    default: /* a cluster node's own commands: the simulator has no clusters */
        sim_contract(w, "simulated node got a cluster command");
        break;
    }
}

/* ---- the "no gap" property --------------------------------------------------------------------
 */

void sim_check_no_gap(sim_world *w, sim_proc *p, redlock_lock *lock, uint64_t from, uint64_t to,
                      const char *what)
{
    sim_result *res = w->res;
    res->gap_checks++;
    char key[16];
    size_t key_len = (size_t)snprintf(key, sizeof(key), "res-%u", p->resource);
    size_t token_len;
    const char *token = redlock_lock_token(lock, &token_len);
    sim_record record = {w->cfg.n_nodes, w->presence, w->n_presence, w->downtimes, w->n_downtimes};
    uint64_t at = 0;
    unsigned free_nodes = 0;
    int gap = sim_find_gap(&record, key, key_len, token, token_len, from, to, &at, &free_nodes);
    if (gap < 0)
        w->oom = true;
    if (gap <= 0)
        return;
    if (strncmp(what, "released", 8) == 0)
        res->gap_releases++;
    else
        res->gap_extends++;
    if (res->gap_found)
        return;
    res->gap_found = true;
    snprintf(res->gap, sizeof(res->gap),
             "p%u %s on res-%u as held over [%llu, %llu) us (true time), but at %llu us %u of "
             "%u nodes were up without its token: a quorum for another holder",
             p->id, what, p->resource, (unsigned long long)from, (unsigned long long)to,
             (unsigned long long)at, free_nodes, w->cfg.n_nodes);
    sim_trace(w, "HOLD WITH A GAP: %s", res->gap);
}

void sim_note_forgotten(sim_world *w, sim_proc *p, uint64_t end)
{
    char key[16];
    size_t key_len = (size_t)snprintf(key, sizeof(key), "res-%u", p->resource);
    size_t token_len;
    const char *token = redlock_lock_token(p->lock, &token_len);
    sim_record record = {w->cfg.n_nodes, w->presence, w->n_presence, w->downtimes, w->n_downtimes};
    uint64_t at = 0;
    int gap = sim_first_gap(&record, key, key_len, token, token_len, p->hold_start, end, &at);
    if (gap < 0)
        w->oom = true;
    if (gap <= 0)
        return;
    sim_result *res = w->res;
    res->forgotten++;
    res->unaware_us_total += end - at;
    if (!p->reported)
        return;
    uint64_t took = w->now - at;
    res->forgotten_reported++;
    res->report_us_total += took;
    res->report_us_max = REDLOCK__MAX(res->report_us_max, took);
    /* The promise: the next reconnection attempt, then one round (each way a message's delay,
     * the node's timeout at most). */
    uint64_t bound = SIM_RETRY_MAX_US + 2 * w->cfg.delay_max_us + w->cfg.node_timeout_ms * 1000;
    res->reported_in_time += took <= bound;
    sim_trace(w, "p%u: reported lost %llu us after a quorum forgot its lock", p->id,
              (unsigned long long)took);
}

/* ---- completions ------------------------------------------------------------------------------
 */

static sim_pending *pending_take(sim_conn *c, uint64_t id)
{
    sim_pending *prev = NULL;
    for (sim_pending *q = c->head; q != NULL; prev = q, q = q->next) {
        if (q->id != id)
            continue;
        if (prev != NULL)
            prev->next = q->next;
        else
            c->head = q->next;
        if (c->tail == q)
            c->tail = prev;
        return q;
    }
    return NULL;
}

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
    while (c->head != NULL) {
        sim_pending *q = c->head;
        c->head = q->next;
        if (c->head == NULL)
            c->tail = NULL;
        redlock__req *req = q->req;
        free(q);
        complete(p, req, REDLOCK_VOTE_ERROR, why, NULL);
    }
}

/* ---- the io table -----------------------------------------------------------------------------
 */

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
    sim_trace(w, "p%u -> n%u %s %.*s %.*s ttl=%llu", p->id, node, redlock__cmd_name(cmd->kind),
              (int)cmd->key_len, cmd->key, (int)REDLOCK__MIN(cmd->token_len, 8), cmd->token,
              (unsigned long long)cmd->ttl_ms);
    if (cmd->kind == REDLOCK__CMD_EXTEND && cmd->token_len == p->dead_token_len &&
        memcmp(cmd->token, p->dead_token, cmd->token_len) == 0)
        sim_promise(w, "p%u sent an extension of a lock it had released or been told it lost",
                    p->id);
    /* Fail fast, synchronously, as the real io does for a closed client or a node that is down. */
    if (p->io.closing || p->io.closed) {
        complete(p, req, REDLOCK_VOTE_ERROR, "canceled: client closing", NULL);
        return;
    }
    if (!c->client_up) {
        complete(p, req, REDLOCK_VOTE_ERROR, "not connected", NULL);
        return;
    }
    /* The simulator's nodes keep one key per command: a lock on several resources is not
     * modelled, and a test that tries one is told so rather than checked on one key. */
    if (cmd->n_more > 0) {
        sim_contract(w, "a lock on several resources: the simulator models one key per command");
        complete(p, req, REDLOCK_VOTE_ERROR, "simulator limit", NULL);
        return;
    }
    if (cmd->key_len > SIM_KEY_MAX || cmd->token_len > SIM_VALUE_MAX) {
        sim_contract(w, "key or token too long for the simulator");
        complete(p, req, REDLOCK_VOTE_ERROR, "simulator limit", NULL);
        return;
    }
    sim_pending *q = calloc(1, sizeof(*q));
    sim_msg *m = calloc(1, sizeof(*m));
    if (q == NULL || m == NULL) {
        free(q);
        free(m);
        w->oom = true;
        complete(p, req, REDLOCK_VOTE_ERROR, "out of memory", NULL);
        return;
    }
    q->id = ++w->next_req_id;
    q->req = req;
    if (c->head == NULL && c->skip == 0)
        c->owing_since_local = now;
    if (c->tail != NULL)
        c->tail->next = q;
    else
        c->head = q;
    c->tail = q;
    m->req_id = q->id;
    m->epoch = c->epoch;
    m->kind = cmd->kind;
    m->retake = cmd->retake;
    m->ttl_ms = cmd->ttl_ms;
    m->fence = cmd->fence;
    m->key_len = cmd->key_len;
    memcpy(m->key, cmd->key, cmd->key_len);
    m->token_len = cmd->token_len;
    memcpy(m->token, cmd->token, cmd->token_len);
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
    sim_proc *p = proc_of(io);
    unsigned char *out = buf;
    for (size_t i = 0; i < len; i++)
        out[i] = (unsigned char)(sim_rng_next(&p->rng) >> 56);
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
    /* on_closed comes later, as libuv's close callbacks do. */
    sim_push(p->w, p->w->now, EV_IO_CLOSED, p->id, 0, 0, NULL);
}

/* No notifications (watch NULL): the simulated waiters poll, which is what the safety
 * properties are checked against; notifications only make waiting shorter. */
static const redlock__io_ops sim_io_ops = {
    io_send, io_now_us, io_wake_at, io_random, io_close, NULL, NULL,
};

int sim_io_factory(void *ctx, const redlock__node_config *cfgs, unsigned n,
                   const redlock__alloc *alloc, redlock__io **out)
{
    (void)alloc;
    sim_proc *p = ctx;
    if (n != p->w->cfg.n_nodes)
        return REDLOCK_EINVAL;
    memset(&p->io, 0, sizeof(p->io));
    p->io.base.ops = &sim_io_ops;
    p->io.proc = p;
    for (unsigned i = 0; i < n; i++) {
        bool up = p->w->nodes[i].up; /* down only if dead from the start */
        p->io.timeout_us[i] = cfgs[i].timeout_us;
        p->conns[i] = (sim_conn){
            .alive = up, .client_up = up, .epoch = 1, .run_id = up ? p->w->nodes[i].run_id : 0};
        p->conns[i].last_reply_local = sim_proc_now(p);
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
    if (!n->up || m->epoch <= c->crash_epoch) {
        sim_trace(w, "n%u drops req %llu (connection gone)", ev->node,
                  (unsigned long long)m->req_id);
        free(m);
        return;
    }
    node_apply(w, n, m);
    sim_trace(w, "n%u ran req %llu from p%u: %s", ev->node, (unsigned long long)m->req_id, ev->proc,
              redlock_vote_name(m->vote));
    sim_hash(w, m->vote);
    net_to_client(w, p, ev->node, m);
}

static void on_client_recv(sim_world *w, const sim_event *ev)
{
    sim_proc *p = &w->procs[ev->proc];
    sim_msg *m = ev->msg;
    sim_conn *c = &p->conns[ev->node];
    sim_pending *q = NULL;
    bool current = !p->io.closing && m->epoch == c->epoch;
    if (current)
        q = pending_take(c, m->req_id);
    if (q == NULL && current && c->skip > 0) {
        /* The late reply of a request that timed out: read and dropped, but the node spoke. */
        c->skip--;
        c->last_reply_local = sim_proc_now(p);
    }
    if (q == NULL) {
        sim_trace(w, "p%u drops late reply %llu from n%u", ev->proc, (unsigned long long)m->req_id,
                  ev->node);
        free(m);
        return;
    }
    redlock__req *req = q->req;
    free(q);
    c->last_reply_local = sim_proc_now(p);
    sim_trace(w, "p%u <- n%u req %llu: %s", ev->proc, ev->node, (unsigned long long)m->req_id,
              redlock_vote_name(m->vote));
    redlock__reply_data data = {m->has_value ? m->token : NULL,
                                m->has_value ? m->token_len : 0,
                                m->pttl_ms,
                                m->fence,
                                NULL,
                                NULL};
    complete(p, req, m->vote, NULL, redlock__cmd_has_data(req->cmd) ? &data : NULL);
    free(m);
}

/* A request timed out; as lib/node.c's on_deadline, every request whose deadline has passed
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
    sim_pending *q = pending_take(c, ev->arg);
    if (q == NULL)
        return; /* answered in time, or already timed out with an earlier one */
    time_out(p, c, q, ev->node);
    uint64_t now = sim_proc_now(p);
    while (c->head != NULL && c->head->req->deadline_us <= now && !p->io.closing)
        time_out(p, c, pending_take(c, c->head->id), ev->node);
    if (!w->cfg.drop_silent_conns || p->io.closing || !c->client_up || !c->alive || c->skip == 0)
        return;
    uint64_t quiet_since = REDLOCK__MAX(c->last_reply_local, c->owing_since_local);
    if (now - quiet_since < DROP_AFTER_TIMEOUTS * p->io.timeout_us[ev->node])
        return;
    /* The new epoch orphans the old connection: its replies are discarded here, but what it
     * carries to the node still lands there, unordered with the next connection. */
    sim_trace(w, "p%u drops its silent connection to n%u", ev->proc, ev->node);
    w->res->conn_drops++;
    c->client_up = false;
    c->alive = false;
    c->epoch++;
    c->skip = 0;
    sim_push(w, w->now + sim_rng_range(&w->rng, 25000, 75000), EV_CONN_RETRY, ev->proc, ev->node, 0,
             NULL);
    fail_pending(p, c, "connection dropped: no answer");
}

static void on_crash(sim_world *w, const sim_event *ev)
{
    sim_node *n = &w->nodes[ev->node];
    if (!n->up)
        return;
    n->up = false;
    n->run_id++; /* the server that comes back is a new one */
    if (w->cfg.restart_loses_data) {
        for (unsigned i = 0; i < n->n_keys; i++)
            if (n->keys[i].presence < w->n_presence)
                w->presence[n->keys[i].presence].until =
                    REDLOCK__MIN(w->presence[n->keys[i].presence].until, w->now);
        n->n_keys = 0;
        n->counters.n = 0; /* the fence counters go with the data */
    }
    sim_trace(w, "n%u crashes for %llu us%s", ev->node, (unsigned long long)ev->arg,
              w->cfg.restart_loses_data ? ", losing its data" : "");
    for (unsigned i = 0; i < w->cfg.n_procs; i++) {
        sim_proc *p = &w->procs[i];
        sim_conn *c = &p->conns[ev->node];
        if (p->io.closed)
            continue;
        c->crash_epoch = ++c->epoch; /* everything in flight dies with the node */
        if (!c->alive)
            continue; /* the process already dropped this connection */
        c->alive = false;
        sim_push(w, w->now + sim_rng_range(&w->rng, w->cfg.delay_min_us, w->cfg.delay_max_us),
                 EV_CONN_LOST, i, ev->node, 0, NULL);
    }
    sim_push(w, w->now + ev->arg, EV_NODE_UP, 0, ev->node, 0, NULL);
    sim_node_down(w, ev->node);
}

void sim_node_down(sim_world *w, unsigned node)
{
    w->nodes[node].up = false;
    if (w->n_downtimes == w->cap_downtimes) {
        size_t cap = w->cap_downtimes != 0 ? w->cap_downtimes * 2 : 16;
        sim_downtime *v = realloc(w->downtimes, cap * sizeof(*v));
        if (v == NULL) {
            w->oom = true;
            return;
        }
        w->downtimes = v;
        w->cap_downtimes = cap;
    }
    w->downtimes[w->n_downtimes++] = (sim_downtime){node, w->now, SIM_NEVER};
}

/* The node's clock jumps forward: every key it holds expires that much early in true time. */
static void on_clock_jump(sim_world *w, const sim_event *ev)
{
    sim_node *n = &w->nodes[ev->node];
    n->offset_us += ev->arg;
    w->res->clock_jumps++;
    sim_trace(w, "n%u's clock jumps %llu us forward", ev->node, (unsigned long long)ev->arg);
    for (unsigned i = 0; i < n->n_keys; i++) {
        const sim_key *k = &n->keys[i];
        if (k->presence < w->n_presence) {
            uint64_t until = REDLOCK__MAX(w->now, expiry_true(n, k->expire_at));
            presence_until(w, k, REDLOCK__MIN(until, w->presence[k->presence].until));
        }
    }
}

uint64_t sim_quorum_free_at(sim_world *w, const char *key, size_t key_len)
{
    uint64_t free_at[SIM_MAX_NODES];
    unsigned n_up = 0;
    for (unsigned i = 0; i < w->cfg.n_nodes; i++) {
        sim_node *n = &w->nodes[i];
        if (!n->up)
            continue;
        const sim_key *k = node_get(w, n, key, key_len);
        uint64_t at = k != NULL ? expiry_true(n, k->expire_at) : w->now;
        /* insertion sort: a handful of nodes */
        unsigned j = n_up++;
        while (j > 0 && free_at[j - 1] > at) {
            free_at[j] = free_at[j - 1];
            j--;
        }
        free_at[j] = at;
    }
    unsigned quorum = w->cfg.n_nodes / 2 + 1;
    return n_up < quorum ? SIM_NEVER : free_at[quorum - 1];
}

static void on_conn_lost(sim_world *w, const sim_event *ev)
{
    sim_proc *p = &w->procs[ev->proc];
    sim_conn *c = &p->conns[ev->node];
    if (p->io.closing || !c->client_up)
        return;
    sim_trace(w, "p%u: connection to n%u lost", ev->proc, ev->node);
    c->client_up = false;
    sim_push(w, w->now + sim_rng_range(&w->rng, SIM_RETRY_MIN_US, SIM_RETRY_MAX_US), EV_CONN_RETRY,
             ev->proc, ev->node, 0, NULL);
    fail_pending(p, c, "connection lost");
}

static void on_conn_retry(sim_world *w, const sim_event *ev)
{
    sim_proc *p = &w->procs[ev->proc];
    sim_conn *c = &p->conns[ev->node];
    if (p->io.closing)
        return;
    if (!w->nodes[ev->node].up) {
        sim_push(w, w->now + sim_rng_range(&w->rng, SIM_RETRY_MIN_US, SIM_RETRY_MAX_US),
                 EV_CONN_RETRY, ev->proc, ev->node, 0, NULL);
        return;
    }
    sim_trace(w, "p%u: reconnected to n%u", ev->proc, ev->node);
    c->alive = true;
    c->client_up = true;
    c->epoch++;
    c->last_to_node = c->last_to_client = w->now;
    c->last_reply_local = sim_proc_now(p);
    c->skip = 0;
    /* Another server than before (it restarted): the client is told once the connection is up,
     * as the real node does after its handshake (a process event: a pause holds it back). */
    uint64_t run_id = w->nodes[ev->node].run_id;
    bool changed = c->run_id != 0 && c->run_id != run_id;
    c->run_id = run_id;
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
        on_crash(w, ev);
        break;
    case EV_CLOCK_JUMP:
        on_clock_jump(w, ev);
        break;
    case EV_NODE_UP:
        w->nodes[ev->node].up = true;
        for (size_t i = 0; i < w->n_downtimes; i++)
            if (w->downtimes[i].node == ev->node && w->downtimes[i].until == SIM_NEVER)
                w->downtimes[i].until = w->now;
        sim_trace(w, "n%u is back with %u keys", ev->node, w->nodes[ev->node].n_keys);
        break;
    case EV_PARTITION: {
        sim_conn *c = &w->procs[ev->proc].conns[ev->node];
        c->partition_until = REDLOCK__MAX(c->partition_until, w->now + ev->arg);
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
        for (unsigned j = 0; j < w->cfg.n_nodes; j++) {
            sim_conn *c = &w->procs[i].conns[j];
            while (c->head != NULL) {
                sim_pending *q = c->head;
                c->head = q->next;
                free(q);
            }
            c->tail = NULL;
        }
    }
}
