/* SPDX-License-Identifier: MIT */
/* sim_pubsub.c - the subscriber connections that wake waiters (lib/net/subscriber.c's,
 * simulated), and the servers' subscriptions (their table is the kit's: lib/sim/sim_subs.h).
 *
 * A process whose io watches a channel keeps one subscriber connection per node, opened when the
 * first channel is wanted; its SUBSCRIBE and UNSUBSCRIBE travel to the server like any message
 * (so a waiter's first attempt may reach a node before its subscription does). A PUBLISH by a
 * script reaches each subscription the server holds for the channel (on a Redis Cluster, any
 * server's: the cluster forwards every message), after a delay that now and then grows long (a
 * lagging subscriber). PUBSUB NUMSUB answers from the server's view: a connection the server
 * still holds counts, whether anybody reads it or not.
 *
 * What may happen to a subscriber: it drops (a fault) and reconnects a little later, missing what
 * was published meanwhile; its server crashes or fails over (the same); its process vanishes,
 * and the server keeps the connection (half-open): counted by NUMSUB, granted keys, while every
 * message to it is lost. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

/* Where the subscriber of node connects: its server (node, a cluster's shard or -1, run_id), or
 * false while that server is down. The alias of node 0 listens on node 0. */
static bool sub_server(const sim_world *w, unsigned node, unsigned *server_node, int *shard,
                       uint64_t *gen)
{
    if (w->cfg.alias_node != 0 && node == w->cfg.alias_node - 1)
        node = 0;
    const sim_node *n = &w->nodes[node];
    *server_node = node;
    if (n->cluster != NULL) {
        *shard = 0;
        return sim_cluster_sub_server(w, n, gen);
    }
    *shard = -1;
    *gen = n->run_id;
    return n->up;
}

static uint64_t sub_delay(sim_world *w)
{
    const sim_config *cfg = &w->cfg;
    uint64_t d = sim_rng_range(&w->rng, cfg->delay_min_us, cfg->delay_max_us);
    if (sim_rng_chance(&w->rng, cfg->sub_stall_prob))
        d += sim_rng_range(&w->rng, 0, cfg->sub_stall_max_us);
    return d;
}

/* ---- the servers' subscriptions (lib/sim/sim_subs.h) ------------------------------------- */

static void subscription_add(sim_world *w, const sim_proc *p, unsigned node, const sim_sub *sub,
                             const char *ch, size_t len)
{
    int rc = sim_subs_add(&w->subs, p->id, node, sub, ch, len);
    if (rc == -2)
        sim_contract(w, "a channel too long for the simulation");
    else if (rc == -1)
        w->oom = true;
}

long long sim_pubsub_numsub(sim_world *w, unsigned node, int shard, uint64_t gen, const char *ch,
                            size_t len)
{
    return sim_subs_numsub(&w->subs, node, shard, gen, ch, len);
}

/* A message for subscription s is on its way (or lost: a vanished process, a cut link). */
static void deliver(sim_world *w, const sim_subscription *s, const char *ch, size_t len,
                    const char *msg, size_t msg_len)
{
    sim_proc *p = &w->procs[s->proc];
    sim_sub *sub = &p->subs[s->sub_node];
    sim_result *res = w->res;
    if (p->vanished) {
        res->notes_lost++;
        res->half_open++;
        sim_trace(w, "message on %.*s to p%u lost: half-open", (int)len, ch, p->id);
        return;
    }
    if (!sub->up || sub->epoch != s->epoch ||
        w->now < p->conns[s->sub_node].link.fault_until[SIM_LINK_TO_CLIENT]) {
        res->notes_lost++;
        return;
    }
    char buf[1024];
    if (len + msg_len > sizeof(buf)) {
        sim_contract(w, "a message too long for the simulation");
        return;
    }
    memcpy(buf, ch, len);
    memcpy(buf + len, msg, msg_len);
    sim_msg *m = sim_msg_new(buf, len + msg_len);
    if (m == NULL) {
        w->oom = true;
        return;
    }
    m->channel_len = len;
    m->epoch = sub->epoch;
    uint64_t delay = sub_delay(w);
    uint64_t at = REDLOCK__MAX(w->now + delay, sub->last_to_client);
    sub->last_to_client = at;
    sim_push(w, at, EV_SUB_RECV, p->id, s->sub_node, 0, m);
}

long long sim_pubsub_publish(sim_world *w, unsigned node, const char *ch, size_t len,
                             const char *msg, size_t msg_len)
{
    long long n = 0;
    for (size_t i = 0; i < w->subs.n; i++) {
        const sim_subscription *s = &w->subs.v[i];
        if (s->server_node != node || !sim_subs_same_channel(s, ch, len))
            continue;
        n++;
        deliver(w, s, ch, len, msg, msg_len);
    }
    return n;
}

/* ---- the processes' subscriber connections -------------------------------------------------- */

/* A SUBSCRIBE (on) or UNSUBSCRIBE of ch on p's subscriber of node, on its way to the server. */
static void send_cmd(sim_proc *p, unsigned node, const char *ch, size_t len, bool on)
{
    sim_world *w = p->w;
    sim_sub *sub = &p->subs[node];
    sim_msg *m = sim_msg_new(ch, len);
    if (m == NULL) {
        w->oom = true;
        return;
    }
    m->epoch = sub->epoch;
    m->channel_len = len;
    uint64_t delay = sim_net_delay(w);
    uint64_t at = REDLOCK__MAX(w->now + delay, sub->last_to_server);
    sub->last_to_server = at;
    sim_push(w, at, EV_SUB_CMD, p->id, node, on, m);
}

static void connect_later(sim_proc *p, unsigned node, uint64_t after_us)
{
    sim_sub *sub = &p->subs[node];
    sub->connecting = true;
    sim_push(p->w, p->w->now + after_us, EV_SUB_CONNECT, p->id, node, 0, NULL);
}

void sim_pubsub_changed(sim_proc *p, const char *ch, size_t len, bool on)
{
    for (unsigned i = 0; i < p->w->cfg.n_nodes; i++) {
        sim_sub *sub = &p->subs[i];
        if (sub->up)
            send_cmd(p, i, ch, len, on);
        else if (on && !sub->connecting)
            connect_later(p, i, sim_net_delay(p->w));
    }
}

/* The connection died: the server forgets its subscriptions, what is on the way is lost, and
 * the process reconnects a little later if it still wants channels. */
static void sub_drop(sim_world *w, sim_proc *p, unsigned node)
{
    sim_sub *sub = &p->subs[node];
    sim_subs_remove(&w->subs, p->id, (int)node, NULL, 0);
    sub->up = false;
    sub->epoch++;
    if (!p->io.closing && !p->vanished && !sub->connecting)
        connect_later(p, node, sim_net_delay(w) + sim_link_retry_us(&w->rng));
}

static void on_connect(sim_world *w, const sim_event *ev)
{
    sim_proc *p = &w->procs[ev->proc];
    sim_sub *sub = &p->subs[ev->node];
    sub->connecting = false;
    if (p->io.closing || p->vanished || sub->up || p->chans.n == 0)
        return;
    unsigned server;
    int shard;
    uint64_t gen;
    if (!sub_server(w, ev->node, &server, &shard, &gen)) {
        connect_later(p, ev->node, sim_link_retry_us(&w->rng));
        return;
    }
    sub->up = true;
    sub->epoch++;
    sub->server_node = server;
    sub->server_shard = shard;
    sub->server_gen = gen;
    sub->last_to_server = sub->last_to_client = w->now;
    sim_trace(w, "p%u: subscriber of n%u connected", p->id, ev->node);
    for (unsigned i = 0; i < p->chans.n; i++)
        send_cmd(p, ev->node, p->chans.v[i].name, p->chans.v[i].len, true);
}

static void on_cmd(sim_world *w, const sim_event *ev)
{
    sim_proc *p = &w->procs[ev->proc];
    sim_sub *sub = &p->subs[ev->node];
    sim_msg *m = ev->msg;
    if (sub->up && m->epoch == sub->epoch) {
        if (ev->arg)
            subscription_add(w, p, ev->node, sub, m->wire, m->channel_len);
        else
            sim_subs_remove(&w->subs, p->id, (int)ev->node, m->wire, m->channel_len);
    }
    sim_msg_free(m);
}

/* "g:<stamp>:<tag>:..." with tag the subscriber's node: the control that counts a grant for
 * whichever subscriber heard it. */
static size_t retag(const char *msg, size_t len, unsigned node, char *out, size_t cap)
{
    const char *tag = memchr(msg + 2, ':', len - 2);
    const char *rest = tag != NULL ? memchr(tag + 1, ':', len - (size_t)(tag + 1 - msg)) : NULL;
    if (rest == NULL)
        return 0;
    int n = snprintf(out, cap, "%.*s%u%.*s", (int)(tag + 1 - msg), msg, node,
                     (int)(len - (size_t)(rest - msg)), rest);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

static void on_recv(sim_world *w, const sim_event *ev)
{
    sim_proc *p = &w->procs[ev->proc];
    sim_sub *sub = &p->subs[ev->node];
    sim_msg *m = ev->msg;
    if (!sub->up || m->epoch != sub->epoch || p->io.closing) {
        w->res->notes_lost++;
        sim_msg_free(m);
        return;
    }
    const char *ch = m->wire, *msg = m->wire + m->channel_len;
    size_t msg_len = m->wire_len - m->channel_len;
    char rewritten[1024];
    if (w->cfg.grant_per_subscriber && msg_len > 2 && msg[0] == 'g' && msg[1] == ':') {
        size_t n = retag(msg, msg_len, ev->node, rewritten, sizeof(rewritten));
        if (n > 0) {
            msg = rewritten;
            msg_len = n;
        }
    }
    sim_trace(w, "p%u <- n%u's subscriber: %.*s %.*s", p->id, ev->node, (int)m->channel_len, ch,
              (int)REDLOCK__MIN(msg_len, 40), msg);
    if (p->io.base.on_notify != NULL)
        p->io.base.on_notify(&p->io.base, ev->node, ch, m->channel_len, msg, msg_len);
    sim_msg_free(m);
}

void sim_pubsub_server_gone(sim_world *w, unsigned node, int shard)
{
    sim_subs_server_gone(&w->subs, node, shard);
    for (unsigned i = 0; i < w->cfg.n_procs; i++) {
        sim_proc *p = &w->procs[i];
        for (unsigned j = 0; j < w->cfg.n_nodes; j++) {
            sim_sub *sub = &p->subs[j];
            if (sub->up && sub->server_node == node && (shard < 0 || sub->server_shard == shard))
                sub_drop(w, p, j);
        }
    }
}

void sim_pubsub_close(sim_proc *p)
{
    sim_subs_remove(&p->w->subs, p->id, -1, NULL, 0);
    for (unsigned i = 0; i < p->w->cfg.n_nodes; i++) {
        p->subs[i].up = false;
        p->subs[i].epoch++;
    }
}

void sim_pubsub_schedule(sim_world *w)
{
    const sim_config *cfg = &w->cfg;
    for (unsigned i = 0; i < cfg->sub_drops; i++)
        sim_push(w, sim_rng_range(&w->rng, 0, cfg->horizon_us), EV_SUB_DROP,
                 (unsigned)sim_rng_range(&w->rng, 0, cfg->n_procs - 1),
                 (unsigned)sim_rng_range(&w->rng, 0, cfg->n_nodes - 1), 0, NULL);
}

void sim_pubsub_event(sim_world *w, const sim_event *ev)
{
    switch (ev->kind) {
    case EV_SUB_CONNECT:
        on_connect(w, ev);
        break;
    case EV_SUB_CMD:
        on_cmd(w, ev);
        break;
    case EV_SUB_RECV:
        on_recv(w, ev);
        break;
    case EV_SUB_DROP: {
        sim_proc *p = &w->procs[ev->proc];
        if (p->subs[ev->node].up && !p->vanished) {
            sim_trace(w, "p%u: subscriber of n%u drops", p->id, ev->node);
            sub_drop(w, p, ev->node);
        }
        break;
    }
    default:
        sim_contract(w, "event %d reached pub/sub", (int)ev->kind);
        break;
    }
}

void sim_pubsub_free(sim_world *w)
{
    sim_subs_free(&w->subs);
}
