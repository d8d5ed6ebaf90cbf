/* SPDX-License-Identifier: MIT */
/* fleet.c - the test kit's fleet (<redlock/sim.h>): simulated nodes that run the library's
 * commands through the C models of its scripts (sim_scripts.h), a network of ordered, delayed,
 * lossy connections, the faults the user scripts, and the io (lib/net/io.h) each real client
 * runs on, all in one virtual time driven by an event queue. The library's internals come
 * through its kit table (lib/api/kit.h). */
#include "fleet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The deadline of a client whose node_timeout_ms is 0 (adaptive, which the kit does not run). */
#define DEFAULT_TIMEOUT_US 1000000u

/* ---- options ----------------------------------------------------------------------------------
 */

static const redlock_sim_options defaults = {
    .size = sizeof(redlock_sim_options),
    .seed = 1,
    .n_nodes = 5,
    .drop_ppm = 0,
    .delay_min_us = 200,
    .delay_max_us = 2000,
};

/* The first layout of redlock_sim_options: no program has less. */
#define OPTIONS_MIN (offsetof(redlock_sim_options, delay_max_us) + sizeof(uint64_t))

void redlock_sim_options_init_sized(redlock_sim_options *opts, size_t size)
{
    const redlock__kit *kit = redlock__kit_get(REDLOCK_VERSION_STRING, REDLOCK__KIT_LAYOUT);
    if (kit != NULL) {
        kit->struct_init(opts, size, &defaults, sizeof(defaults));
        return;
    }
    /* A library of another version: only the size, which redlock_sim_new refuses anyway. */
    memset(opts, 0, size);
    opts->size = size;
}

/* ---- events ----------------------------------------------------------------------------------
 */

/* ---- the network -------------------------------------------------------------------------------
 */

/* When a message sent now in direction dir (SIM_LINK_TO_NODE, SIM_LINK_TO_CLIENT) on c lands, or
 * UINT64_MAX when it is lost. */
static uint64_t net_arrival(redlock_sim *sim, sim_link *c, int dir)
{
    if (sim_link_cut(c, dir, sim->now))
        return UINT64_MAX;
    if (kit_net_drops(sim))
        return UINT64_MAX;
    return sim_link_land(c, dir, sim->now, sim->now, kit_net_delay(sim));
}

/* ---- completions -------------------------------------------------------------------------------
 */

static uint64_t client_now(const kit_client *k)
{
    return k->sim->now + KIT_CLIENT_EPOCH_US;
}

/* The pending record is already unlinked: the callback may send again or close the client. */
static void complete(kit_client *k, redlock__req *req, redlock_vote vote, const char *error,
                     const redlock__reply_data *data)
{
    req->cb(req, vote, error, data, client_now(k));
}

static void fail_pending(kit_client *k, sim_link *c, const char *why)
{
    for (sim_pending *q = sim_link_next(c); q != NULL; q = sim_link_next(c)) {
        redlock__req *req = q->req;
        free(q);
        complete(k, req, REDLOCK_VOTE_ERROR, why, NULL);
    }
}

/* ---- the io table ------------------------------------------------------------------------------
 */

static kit_client *client_of(redlock__io *io)
{
    return ((kit_io *)io)->client;
}

static void io_send(redlock__io *io, unsigned node, redlock__req *req)
{
    kit_client *k = client_of(io);
    redlock_sim *sim = k->sim;
    sim_link *c = &k->conns[node];
    const redlock__cmd *cmd = req->cmd;
    req->sent_us = client_now(k);
    req->deadline_us = req->sent_us + k->timeout_us[node];
    req->next = NULL;
    if (k->io.closing) {
        complete(k, req, REDLOCK_VOTE_ERROR, "canceled: client closing", NULL);
        return;
    }
    if (!c->client_up) {
        kit_trace(sim, "c%u -> n%u %s: not connected", k->index, node,
                  sim->kit->cmd_name(cmd->kind));
        complete(k, req, REDLOCK_VOTE_ERROR, "not connected", NULL);
        return;
    }
    sim_pending *q = calloc(1, sizeof(*q));
    kit_msg *m = calloc(1, sizeof(*m));
    redlock__buf buf = {0};
    int rc = q != NULL && m != NULL ? sim->kit->encode(cmd, req->grant_tag, &buf, &k->alloc)
                                    : REDLOCK_ENOMEM;
    if (rc == 0 && (m->wire = malloc(buf.len > 0 ? buf.len : 1)) != NULL) {
        memcpy(m->wire, buf.data, buf.len);
        m->wire_len = buf.len;
    } else {
        rc = REDLOCK_ENOMEM;
    }
    sim->kit->buf_free(&buf, &k->alloc);
    if (rc != 0) {
        free(q);
        kit_msg_free(m);
        sim->oom = true;
        complete(k, req, REDLOCK_VOTE_ERROR, "out of memory", NULL);
        return;
    }
    q->id = m->req_id = ++sim->next_req_id;
    q->req = req;
    sim_link_owe(c, q);
    m->epoch = c->epoch;
    kit_trace(sim, "c%u -> n%u #%llu %s %.*s ttl=%llu", k->index, node, (unsigned long long)q->id,
              sim->kit->cmd_name(cmd->kind), (int)cmd->key_len, cmd->key,
              (unsigned long long)cmd->ttl_ms);
    kit_push(sim, req->deadline_us - KIT_CLIENT_EPOCH_US, KIT_REQ_TIMEOUT, k->index, node, q->id,
             NULL);
    uint64_t at = net_arrival(sim, c, SIM_LINK_TO_NODE);
    if (at == UINT64_MAX) {
        kit_trace(sim, "c%u -> n%u #%llu lost", k->index, node, (unsigned long long)q->id);
        kit_msg_free(m);
        return;
    }
    kit_push(sim, at, KIT_NODE_RECV, k->index, node, 0, m);
}

static uint64_t io_now_us(redlock__io *io)
{
    return client_now(client_of(io));
}

static void io_wake_at(redlock__io *io, uint64_t due_us)
{
    kit_client *k = client_of(io);
    k->wake_gen++; /* an earlier wake-up is replaced */
    if (due_us == UINT64_MAX || k->io.closed)
        return;
    uint64_t at = due_us > KIT_CLIENT_EPOCH_US ? due_us - KIT_CLIENT_EPOCH_US : 0;
    kit_push(k->sim, at, KIT_WAKE, k->index, 0, k->wake_gen, NULL);
}

static int io_random(redlock__io *io, void *buf, size_t len)
{
    sim_rng_bytes(&client_of(io)->rng, buf, len);
    return 0;
}

static void io_close(redlock__io *io)
{
    kit_client *k = client_of(io);
    k->io.closing = true;
    k->wake_gen++;
    for (unsigned i = 0; i < k->sim->opts.n_nodes; i++)
        fail_pending(k, &k->conns[i], "canceled: client closing");
    kit_sub_close(k);
    /* on_closed comes later, as libuv's close callbacks do. */
    kit_push(k->sim, k->sim->now, KIT_IO_CLOSED, k->index, 0, 0, NULL);
}

static uint64_t io_wall_us(redlock__io *io)
{
    return KIT_NODE_EPOCH_US + client_of(io)->sim->now;
}

static int io_watch(redlock__io *io, const char *key, size_t len, bool on)
{
    return kit_sub_watch(client_of(io), key, len, on);
}

/* Subscribers (pubsub.c); no node state, no other thread's signal, the configured
 * timeouts. */
static const redlock__io_ops kit_io_ops = {
    .watch = io_watch,
    .send = io_send,
    .now_us = io_now_us,
    .wake_at = io_wake_at,
    .random = io_random,
    .close = io_close,
    .wall_us = io_wall_us,
};

static int io_factory(void *ctx, const redlock__node_config *cfgs, unsigned n,
                      const redlock__alloc *alloc, redlock__io **out)
{
    kit_client *k = ctx;
    k->alloc = *alloc;
    redlock_sim *sim = k->sim;
    if (n != sim->opts.n_nodes)
        return REDLOCK_EINVAL;
    memset(&k->io, 0, sizeof(k->io));
    k->io.base.ops = &kit_io_ops;
    k->io.client = k;
    for (unsigned i = 0; i < n; i++) {
        bool up = sim->nodes[i].up;
        k->timeout_us[i] = cfgs[i].timeout_us > 0 ? cfgs[i].timeout_us : DEFAULT_TIMEOUT_US;
        sim_link_init(&k->conns[i], up, sim->nodes[i].run_id);
        if (!up)
            kit_push(sim, sim->now + sim_link_retry_us(&sim->rng), KIT_CONN_RETRY, k->index, i, 0,
                     NULL);
    }
    k->has_io = true;
    *out = &k->io.base;
    return 0;
}

/* ---- the fleet ---------------------------------------------------------------------------------
 */

int redlock_sim_new(const redlock_sim_options *opts, redlock_sim **out)
{
    const redlock__kit *kit = redlock__kit_get(REDLOCK_VERSION_STRING, REDLOCK__KIT_LAYOUT);
    if (kit == NULL || out == NULL)
        return REDLOCK_EINVAL;
    redlock_sim_options o = defaults;
    char err[REDLOCK_ERROR_TEXT_MAX];
    if (opts != NULL && kit->struct_in(&o, sizeof(o), opts, OPTIONS_MIN, "redlock_sim_options",
                                       "redlock_sim_options_init", err, sizeof(err)) != 0)
        return REDLOCK_EINVAL;
    if (o.n_nodes < 1 || o.n_nodes > REDLOCK_SIM_MAX_NODES || o.delay_min_us > o.delay_max_us)
        return REDLOCK_EINVAL;
    redlock_sim *sim = calloc(1, sizeof(*sim));
    if (sim == NULL)
        return REDLOCK_ENOMEM;
    sim->kit = kit;
    sim->opts = o;
    sim_rng_seed(&sim->rng, o.seed);
    for (unsigned i = 0; i < o.n_nodes; i++) {
        sim->nodes[i].up = true;
        sim->nodes[i].run_id = ++sim->next_run_id;
        sim->nodes[i].rate_ppm = 1000000;
        sim_db_init(&sim->nodes[i].db);
        kit_record_watch(sim, i);
    }
    kit_trace(sim, "fleet of %u nodes, seed %llu", o.n_nodes, (unsigned long long)o.seed);
    *out = sim;
    return sim->oom ? (redlock_sim_free(sim), REDLOCK_ENOMEM) : 0;
}

int redlock_sim_client_new(redlock_sim *sim, const redlock_options *opts, redlock_client **out,
                           unsigned *index)
{
    if (sim->n_clients == REDLOCK_SIM_MAX_CLIENTS || out == NULL)
        return REDLOCK_EINVAL;
    kit_client *k = calloc(1, sizeof(*k));
    if (k == NULL)
        return REDLOCK_ENOMEM;
    k->sim = sim;
    k->index = sim->n_clients;
    sim_rng_seed(&k->rng, sim_rng_next(&sim->rng));
    char names[REDLOCK_SIM_MAX_NODES][32];
    const char *urls[REDLOCK_SIM_MAX_NODES];
    for (unsigned i = 0; i < sim->opts.n_nodes; i++) {
        snprintf(names[i], sizeof(names[i]), "redis://sim-%u:6379", i);
        urls[i] = names[i];
    }
    char err[REDLOCK_ERROR_TEXT_MAX];
    int rc = sim->kit->client_new(urls, sim->opts.n_nodes, opts, io_factory, k, &k->client, err,
                                  sizeof(err));
    if (rc != 0) {
        /* A client whose io was made freed it through its close (never here: the io is the last
         * thing made), so only k is left. */
        free(k);
        return rc;
    }
    sim->clients[sim->n_clients++] = k;
    kit_trace(sim, "client c%u made", k->index);
    *out = k->client;
    if (index != NULL)
        *index = k->index;
    return 0;
}

uint64_t redlock_sim_now_us(const redlock_sim *sim)
{
    return sim->now;
}

uint64_t redlock_sim_client_now_us(const redlock_sim *sim, unsigned client)
{
    return client < sim->n_clients ? client_now(sim->clients[client]) : 0;
}

uint64_t redlock_sim_random(redlock_sim *sim)
{
    return sim_rng_next(&sim->rng);
}

void redlock_sim_free(redlock_sim *sim)
{
    if (sim == NULL)
        return;
    for (unsigned i = 0; i < sim->n_clients; i++) {
        kit_client *k = sim->clients[i];
        if (k->client != NULL && !k->io.closing)
            redlock_client_close_ex(k->client, REDLOCK_CLOSE_FAST, NULL, NULL);
    }
    /* The closes finish in the run (their io's on_closed); a pause still running delays them. */
    bool open = true;
    while (open && redlock_sim_step(sim) == 1) {
        open = false;
        for (unsigned i = 0; i < sim->n_clients; i++)
            open = open || sim->clients[i]->client != NULL;
    }
    for (size_t i = 0; i < sim->queue.len; i++)
        kit_event_free(&sim->queue.heap[i]);
    sim_queue_free(&sim->queue);
    for (unsigned i = 0; i < sim->n_clients; i++) {
        for (unsigned j = 0; j < sim->opts.n_nodes; j++)
            sim_link_free(&sim->clients[i]->conns[j]);
        kit_sub_free(sim->clients[i]);
        free(sim->clients[i]);
    }
    sim_subs_free(&sim->subs);
    for (unsigned i = 0; i < sim->opts.n_nodes; i++)
        sim_db_free(&sim->nodes[i].db);
    kit_history_free(sim);
    kit_record_free(sim);
    free(sim->trace);
    free(sim);
}

/* ---- events ------------------------------------------------------------------------------------
 */

/* The node a script runs on: its pub/sub (pubsub.c). */
typedef struct exec_ctx {
    redlock_sim *sim;
    unsigned node;
} exec_ctx;

static long long hook_numsub(void *ctx, const char *channel, size_t len)
{
    exec_ctx *x = ctx;
    return kit_sub_numsub(x->sim, x->node, channel, len);
}

static long long hook_publish(void *ctx, const char *channel, size_t len, const char *msg,
                              size_t msg_len)
{
    exec_ctx *x = ctx;
    kit_trace(x->sim, "n%u publishes on %.*s: %.*s", x->node, (int)len, channel,
              (int)REDLOCK__MIN(msg_len, 60), msg);
    return kit_sub_publish(x->sim, x->node, channel, len, msg, msg_len);
}

static void describe_reply(const sim_reply *r, char *out, size_t cap)
{
    switch (r->v.type) {
    case SIM_R_NIL:
        snprintf(out, cap, "nil");
        break;
    case SIM_R_INT:
        snprintf(out, cap, "%lld", r->v.integer);
        break;
    case SIM_R_ARRAY:
        snprintf(out, cap, "array of %u", r->n);
        break;
    default:
        snprintf(out, cap, "%.*s", (int)REDLOCK__MIN(r->v.len, 60), r->v.str);
        break;
    }
}

static void on_node_recv(redlock_sim *sim, const sim_event *ev)
{
    kit_client *k = sim->clients[ev->proc];
    kit_node *n = &sim->nodes[ev->node];
    kit_msg *m = ev->msg;
    sim_link *c = &k->conns[ev->node];
    if (!n->up || m->epoch <= c->crash_epoch) {
        kit_trace(sim, "n%u drops #%llu (connection gone)", ev->node,
                  (unsigned long long)m->req_id);
        kit_msg_free(m);
        return;
    }
    const char *argv[64];
    size_t lens[64];
    int argc = sim_resp_argv(m->wire, m->wire_len, argv, lens, 64);
    if (argc <= 0) {
        memset(&m->reply, 0, sizeof(m->reply));
        m->reply.v.type = SIM_R_ERROR;
        m->reply.v.len = (size_t)snprintf(m->reply.v.str, sizeof(m->reply.v.str),
                                          "ERR the simulated node cannot read the request");
    } else {
        exec_ctx x = {sim, ev->node};
        sim_server_hooks hooks = {hook_numsub, hook_publish,      NULL,
                                  &x,          sim->kit->scripts, sim->kit->n_scripts};
        sim_server_exec(&n->db, kit_node_clock(n, sim->now), &hooks, 0, argc, argv, lens,
                        &m->reply);
        if (n->db.oom)
            sim->oom = true;
    }
    kit_hostile_reply(sim, ev->node, m);
    char what[80];
    describe_reply(&m->reply, what, sizeof(what));
    kit_trace(sim, "n%u ran #%llu from c%u: %s", ev->node, (unsigned long long)m->req_id, ev->proc,
              what);
    uint64_t at = net_arrival(sim, c, SIM_LINK_TO_CLIENT);
    if (at == UINT64_MAX) {
        kit_trace(sim, "n%u -> c%u #%llu reply lost", ev->node, ev->proc,
                  (unsigned long long)m->req_id);
        kit_msg_free(m);
        return;
    }
    kit_push(sim, at, KIT_CLIENT_RECV, ev->proc, ev->node, 0, m);
}

static void time_out(kit_client *k, sim_pending *q, unsigned node)
{
    redlock__req *req = q->req;
    kit_trace(k->sim, "c%u: #%llu to n%u timed out", k->index, (unsigned long long)q->id, node);
    free(q);
    complete(k, req, REDLOCK_VOTE_TIMEOUT, "timeout", NULL);
}

static void on_client_recv(redlock_sim *sim, const sim_event *ev)
{
    kit_client *k = sim->clients[ev->proc];
    kit_msg *m = ev->msg;
    sim_link *c = &k->conns[ev->node];
    sim_pending *q = NULL;
    if (!k->io.closing && m->epoch == c->epoch)
        q = sim_link_take(c, m->req_id);
    if (q == NULL) {
        kit_trace(sim, "c%u drops late reply #%llu from n%u", ev->proc,
                  (unsigned long long)m->req_id, ev->node);
        kit_msg_free(m);
        return;
    }
    if (q->req->deadline_us <= client_now(k)) {
        /* After a pause, libuv runs the due timers before it reads the sockets. */
        time_out(k, q, ev->node);
        kit_msg_free(m);
        return;
    }
    redlock__req *req = q->req;
    free(q);
    redisReply reply, elems[3], *ptrs[3];
    sim_reply_to_redis(&m->reply, &reply, elems, ptrs);
    char err[REDLOCK_ERROR_TEXT_MAX];
    redlock__reply_kind kind;
    redlock__reply_data data;
    redlock_vote vote = sim->kit->vote(req->cmd, &reply, err, sizeof(err), &kind, &data);
    if (m->forged && vote == REDLOCK_VOTE_YES) {
        /* A hostile node never gives a yes it did not give (hostile.c says why): its forgery
         * stands only where it reads as no yes, else the node's honest answer does. */
        sim_reply_to_redis(&m->honest, &reply, elems, ptrs);
        vote = sim->kit->vote(req->cmd, &reply, err, sizeof(err), &kind, &data);
    }
    kit_trace(sim, "c%u <- n%u #%llu: %s", ev->proc, ev->node, (unsigned long long)m->req_id,
              redlock_vote_name(vote));
    /* data points into the reply: valid during the callback only (io.h) */
    complete(k, req, vote, vote == REDLOCK_VOTE_ERROR ? err : NULL,
             redlock__cmd_has_data(req->cmd) ? &data : NULL);
    kit_msg_free(m);
}

static void on_timeout(redlock_sim *sim, const sim_event *ev)
{
    kit_client *k = sim->clients[ev->proc];
    sim_link *c = &k->conns[ev->node];
    sim_pending *q = sim_link_take(c, ev->arg);
    if (q != NULL)
        time_out(k, q, ev->node);
}

static void on_conn_lost(redlock_sim *sim, const sim_event *ev)
{
    kit_client *k = sim->clients[ev->proc];
    sim_link *c = &k->conns[ev->node];
    if (k->io.closing || !sim_link_noticed(c))
        return;
    kit_trace(sim, "c%u: connection to n%u lost", ev->proc, ev->node);
    kit_push(sim, sim->now + sim_link_retry_us(&sim->rng), KIT_CONN_RETRY, ev->proc, ev->node, 0,
             NULL);
    fail_pending(k, c, "connection lost");
}

static void on_conn_retry(redlock_sim *sim, const sim_event *ev)
{
    kit_client *k = sim->clients[ev->proc];
    sim_link *c = &k->conns[ev->node];
    if (k->io.closing)
        return;
    if (!sim->nodes[ev->node].up) {
        kit_push(sim, sim->now + sim_link_retry_us(&sim->rng), KIT_CONN_RETRY, ev->proc, ev->node,
                 0, NULL);
        return;
    }
    kit_trace(sim, "c%u: connected to n%u", ev->proc, ev->node);
    if (sim_link_reconnect(c, sim->now,
                           sim->nodes[ev->node].run_id)) /* told once the connection is up, as the
                                                            real node does after its handshake */
        kit_push(sim, sim->now, KIT_NODE_CHANGED, ev->proc, ev->node, 0, NULL);
}

static void handle(redlock_sim *sim, sim_event *ev)
{
    bool at_node = ev->kind == KIT_NODE_RECV || ev->kind == KIT_SUB_CMD || ev->kind == KIT_FORGE;
    uint64_t until =
        at_node ? sim->nodes[ev->node].paused_until : sim->clients[ev->proc]->paused_until;
    if (until > sim->now) { /* held back until the pause ends, in order */
        if (!sim_queue_defer(&sim->queue, *ev, until)) {
            sim->oom = true;
            kit_event_free(ev);
        }
        return;
    }
    kit_client *k = sim->clients[ev->proc];
    switch (ev->kind) {
    case KIT_NODE_RECV:
        on_node_recv(sim, ev);
        break;
    case KIT_CLIENT_RECV:
        on_client_recv(sim, ev);
        break;
    case KIT_REQ_TIMEOUT:
        on_timeout(sim, ev);
        break;
    case KIT_CONN_LOST:
        on_conn_lost(sim, ev);
        break;
    case KIT_CONN_RETRY:
        on_conn_retry(sim, ev);
        break;
    case KIT_NODE_CHANGED:
        kit_trace(sim, "c%u: n%u is a new server", ev->proc, ev->node);
        if (!k->io.closing && k->io.base.on_node_changed != NULL)
            k->io.base.on_node_changed(&k->io.base, ev->node);
        break;
    case KIT_WAKE:
        if (ev->arg == k->wake_gen && !k->io.closing && k->io.base.on_wake != NULL)
            k->io.base.on_wake(&k->io.base);
        break;
    case KIT_IO_CLOSED:
        k->io.closed = true;
        kit_trace(sim, "c%u: closed", ev->proc);
        k->client = NULL;
        if (k->io.base.on_closed != NULL)
            k->io.base.on_closed(&k->io.base); /* frees the client */
        break;
    case KIT_SUB_CONNECT:
    case KIT_SUB_CMD:
    case KIT_SUB_RECV:
        kit_sub_event(sim, ev);
        break;
    case KIT_FORGE:
        kit_hostile_event(sim, ev);
        break;
    case KIT_TIMER: {
        kit_timer t = *(kit_timer *)ev->msg;
        free(ev->msg);
        kit_trace(sim, "c%u: timer", ev->proc);
        t.fn(sim, t.data);
        break;
    }
    }
}

int redlock_sim_step(redlock_sim *sim)
{
    if (sim->queue.len == 0)
        return 0;
    sim_event ev = sim_queue_pop(&sim->queue);
    sim->now = ev.at;
    handle(sim, &ev);
    return 1;
}

uint64_t redlock_sim_run(redlock_sim *sim, uint64_t max_events)
{
    uint64_t n = 0;
    while ((max_events == 0 || n < max_events) && redlock_sim_step(sim) == 1)
        n++;
    return n;
}

uint64_t redlock_sim_run_for(redlock_sim *sim, uint64_t duration_us)
{
    uint64_t end = sim->now + duration_us, n = 0;
    while (sim_queue_next_at(&sim->queue) <= end && redlock_sim_step(sim) == 1)
        n++;
    sim->now = end;
    return n;
}

int redlock_sim_timer(redlock_sim *sim, unsigned client, uint64_t delay_us, redlock_sim_timer_fn fn,
                      void *data)
{
    if (client >= sim->n_clients || fn == NULL)
        return REDLOCK_EINVAL;
    kit_timer *t = malloc(sizeof(*t));
    if (t == NULL)
        return REDLOCK_ENOMEM;
    *t = (kit_timer){fn, data};
    return kit_push(sim, sim->now + delay_us, KIT_TIMER, client, 0, 0, t) ? 0 : REDLOCK_ENOMEM;
}

/* ---- faults ------------------------------------------------------------------------------------
 */

int redlock_sim_node_pause(redlock_sim *sim, unsigned node, uint64_t duration_us)
{
    if (node >= sim->opts.n_nodes)
        return REDLOCK_EINVAL;
    kit_node *n = &sim->nodes[node];
    n->paused_until = REDLOCK__MAX(n->paused_until, sim->now + duration_us);
    kit_trace(sim, "n%u paused for %llu us", node, (unsigned long long)duration_us);
    return 0;
}

int redlock_sim_node_kill(redlock_sim *sim, unsigned node)
{
    if (node >= sim->opts.n_nodes)
        return REDLOCK_EINVAL;
    kit_node *n = &sim->nodes[node];
    if (!n->up)
        return 0;
    n->up = false;
    kit_record_down(sim, node, true);
    kit_trace(sim, "n%u killed", node);
    kit_sub_server_gone(sim, node);
    for (unsigned i = 0; i < sim->n_clients; i++) {
        kit_client *k = sim->clients[i];
        /* everything in flight dies with the node */
        if (!k->has_io || k->io.closed || !sim_link_crash(&k->conns[node]))
            continue;
        kit_push(sim, sim->now + kit_net_delay(sim), KIT_CONN_LOST, i, node, 0, NULL);
    }
    return 0;
}

int redlock_sim_node_restart(redlock_sim *sim, unsigned node, bool keep_data)
{
    if (node >= sim->opts.n_nodes)
        return REDLOCK_EINVAL;
    redlock_sim_node_kill(sim, node);
    kit_node *n = &sim->nodes[node];
    n->up = true;
    n->run_id = ++sim->next_run_id;
    kit_record_down(sim, node, false);
    if (!keep_data) {
        kit_record_cleared(sim, node);
        sim_db_clear(&n->db);
    }
    kit_trace(sim, "n%u restarted %s", node, keep_data ? "with its data" : "empty");
    return 0;
}

int redlock_sim_clock_drift(redlock_sim *sim, unsigned node, int32_t drift_ppm)
{
    if (node >= sim->opts.n_nodes || drift_ppm <= -500000 || drift_ppm >= 500000)
        return REDLOCK_EINVAL;
    kit_node *n = &sim->nodes[node];
    n->base_local = kit_node_clock(n, sim->now) - KIT_NODE_EPOCH_US - n->offset_us;
    n->base_true = sim->now;
    n->rate_ppm = (uint64_t)(1000000 + (int64_t)drift_ppm);
    kit_record_rate_changed(sim, node);
    kit_trace(sim, "n%u clock drifts %+d ppm", node, (int)drift_ppm);
    return 0;
}

int redlock_sim_node_hostile(redlock_sim *sim, unsigned node, uint32_t lie_ppm,
                             uint64_t forge_every_us)
{
    if (node >= sim->opts.n_nodes || lie_ppm > 1000000)
        return REDLOCK_EINVAL;
    kit_node *n = &sim->nodes[node];
    bool forging = n->forge_every_us > 0;
    n->lie_ppm = lie_ppm;
    n->forge_every_us = forge_every_us;
    kit_trace(sim, "n%u hostile: forges %u ppm of its replies, a message every %llu us", node,
              (unsigned)lie_ppm, (unsigned long long)forge_every_us);
    if (!forging && forge_every_us > 0)
        kit_hostile_schedule(sim, node);
    return 0;
}

int redlock_sim_clock_jump(redlock_sim *sim, unsigned node, uint64_t jump_us)
{
    if (node >= sim->opts.n_nodes)
        return REDLOCK_EINVAL;
    sim->nodes[node].offset_us += jump_us;
    kit_record_jumped(sim, node);
    kit_trace(sim, "n%u clock jumps %llu us", node, (unsigned long long)jump_us);
    return 0;
}

int redlock_sim_link_fault(redlock_sim *sim, unsigned client, unsigned node, unsigned directions,
                           uint64_t duration_us, uint64_t extra_delay_us)
{
    if (client >= sim->n_clients || node >= sim->opts.n_nodes ||
        (directions & ~(REDLOCK_SIM_TO_NODE | REDLOCK_SIM_TO_CLIENT)) != 0 || directions == 0)
        return REDLOCK_EINVAL;
    sim_link *c = &sim->clients[client]->conns[node];
    if (directions & REDLOCK_SIM_TO_NODE)
        sim_link_fault(c, SIM_LINK_TO_NODE, sim->now + duration_us, extra_delay_us);
    if (directions & REDLOCK_SIM_TO_CLIENT)
        sim_link_fault(c, SIM_LINK_TO_CLIENT, sim->now + duration_us, extra_delay_us);
    kit_trace(sim, "c%u %s n%u: %s for %llu us", client,
              directions == 3   ? "<->"
              : directions == 1 ? "->"
                                : "<-",
              node, extra_delay_us == 0 ? "lost" : "delayed", (unsigned long long)duration_us);
    return 0;
}

int redlock_sim_client_pause(redlock_sim *sim, unsigned client, uint64_t duration_us)
{
    if (client >= sim->n_clients)
        return REDLOCK_EINVAL;
    kit_client *k = sim->clients[client];
    k->paused_until = REDLOCK__MAX(k->paused_until, sim->now + duration_us);
    kit_trace(sim, "c%u paused for %llu us", client, (unsigned long long)duration_us);
    return 0;
}
