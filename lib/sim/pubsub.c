/* SPDX-License-Identifier: MIT */
/* pubsub.c - the fleet's publish/subscribe (lib/net/subscriber.c's, simulated): each client's
 * subscriber connections and the nodes' subscriptions (their table: sim_subs.h, test/sim's too).
 *
 * A client whose io watches a channel (a waiter's key or its own channel) keeps one subscriber
 * connection per node, opened when the first channel is wanted: it learns the server's run id
 * (INFO server), then SUBSCRIBEs to every channel wanted. Its SUBSCRIBE and UNSUBSCRIBE travel
 * to the node like any message, so an attempt may reach a node before its subscription does; a
 * PUBLISH by a node's script reaches each subscription the node holds after a network delay,
 * in order on its connection. A message counts for the node (io.h's on_notify) only while the
 * client's command connection to that node reached the same server (the run id), as io_uv.c
 * decides; else it is a hint from nobody.
 *
 * Faults: a link fault between a client and a node loses (or delays) the messages of its
 * subscriber connection in the same directions; drop_ppm loses them too; a node killed drops
 * every subscriber connection (its subscriptions are gone) and each reconnects a retry span
 * later, missing what was published meanwhile; a paused node runs a SUBSCRIBE when its pause
 * ends, a paused client reads its messages when its pause ends. */
#include <stdlib.h>
#include <string.h>

#include "fleet.h"

/* A channel the client's io watches, with its count of waiters. */
typedef struct kit_channel {
    size_t len;
    unsigned refs;
    char name[SIM_CHANNEL_MAX];
} kit_channel;

/* When a message sent now in direction dir on k's subscriber connection to node lands (behind
 * *last), or UINT64_MAX when it is lost: the faults of k's link to node apply. */
static uint64_t land(redlock_sim *sim, kit_client *k, unsigned node, int dir, uint64_t *last)
{
    const sim_link *c = &k->conns[node];
    uint64_t extra = 0;
    if (sim->now < c->fault_until[dir]) {
        if (c->fault_delay_us[dir] == 0)
            return UINT64_MAX;
        extra = c->fault_delay_us[dir];
    }
    if (kit_net_drops(sim))
        return UINT64_MAX;
    uint64_t at = REDLOCK__MAX(sim->now + kit_net_delay(sim) + extra, *last);
    *last = at;
    return at;
}

static kit_msg *msg_new(redlock_sim *sim, const char *a, size_t a_len, const char *b, size_t b_len)
{
    kit_msg *m = calloc(1, sizeof(*m));
    if (m != NULL && (m->wire = malloc(a_len + b_len + 1)) != NULL) {
        memcpy(m->wire, a, a_len);
        memcpy(m->wire + a_len, b, b_len);
        m->wire_len = a_len + b_len;
        m->channel_len = a_len;
        return m;
    }
    free(m);
    sim->oom = true;
    return NULL;
}

/* ---- the nodes' side -------------------------------------------------------------------------
 */

long long kit_sub_numsub(redlock_sim *sim, unsigned node, const char *ch, size_t len)
{
    return sim_subs_numsub(&sim->subs, node, -1, sim->nodes[node].run_id, ch, len);
}

/* A message for subscription s is on its way (or lost). */
static void deliver(redlock_sim *sim, const sim_subscription *s, const char *ch, size_t len,
                    const char *msg, size_t msg_len)
{
    kit_client *k = sim->clients[s->proc];
    sim_sub *sub = &k->subs[s->sub_node];
    if (!sub->up || sub->epoch != s->epoch)
        return;
    uint64_t at = land(sim, k, s->sub_node, SIM_LINK_TO_CLIENT, &sub->last_to_client);
    if (at == UINT64_MAX) {
        kit_trace(sim, "n%u -> c%u's subscriber: %.*s lost", s->server_node, s->proc, (int)len, ch);
        return;
    }
    kit_msg *m = msg_new(sim, ch, len, msg, msg_len);
    if (m == NULL)
        return;
    m->epoch = sub->epoch;
    kit_push(sim, at, KIT_SUB_RECV, s->proc, s->sub_node, 0, m);
}

long long kit_sub_publish(redlock_sim *sim, unsigned node, const char *ch, size_t len,
                          const char *msg, size_t msg_len)
{
    long long n = 0;
    for (size_t i = 0; i < sim->subs.n; i++) {
        const sim_subscription *s = &sim->subs.v[i];
        if (s->server_node != node || !sim_subs_same_channel(s, ch, len))
            continue;
        n++;
        deliver(sim, s, ch, len, msg, msg_len);
    }
    return n;
}

/* ---- the clients' side -----------------------------------------------------------------------
 */

/* A SUBSCRIBE (on) or UNSUBSCRIBE of ch on k's subscriber of node, on its way to the node. */
static void send_cmd(kit_client *k, unsigned node, const char *ch, size_t len, bool on)
{
    redlock_sim *sim = k->sim;
    sim_sub *sub = &k->subs[node];
    uint64_t at = land(sim, k, node, SIM_LINK_TO_NODE, &sub->last_to_server);
    if (at == UINT64_MAX) {
        kit_trace(sim, "c%u's subscriber -> n%u: %s %.*s lost", k->index, node,
                  on ? "SUBSCRIBE" : "UNSUBSCRIBE", (int)len, ch);
        return;
    }
    kit_msg *m = msg_new(sim, ch, len, "", 0);
    if (m == NULL)
        return;
    m->epoch = sub->epoch;
    kit_push(sim, at, KIT_SUB_CMD, k->index, node, on, m);
}

static void connect_later(kit_client *k, unsigned node, uint64_t after_us)
{
    k->subs[node].connecting = true;
    kit_push(k->sim, k->sim->now + after_us, KIT_SUB_CONNECT, k->index, node, 0, NULL);
}

static void changed(kit_client *k, const char *ch, size_t len, bool on)
{
    for (unsigned i = 0; i < k->sim->opts.n_nodes; i++) {
        sim_sub *sub = &k->subs[i];
        if (sub->up)
            send_cmd(k, i, ch, len, on);
        else if (on && !sub->connecting)
            connect_later(k, i, kit_net_delay(k->sim));
    }
}

int kit_sub_watch(kit_client *k, const char *ch, size_t len, bool on)
{
    kit_channel *c = NULL;
    for (size_t i = 0; i < k->n_chans && c == NULL; i++)
        if (k->chans[i].len == len && memcmp(k->chans[i].name, ch, len) == 0)
            c = &k->chans[i];
    if (!on) {
        if (c == NULL || --c->refs > 0)
            return 0;
        changed(k, ch, len, false);
        *c = k->chans[--k->n_chans];
        return 0;
    }
    if (c != NULL) {
        c->refs++;
        return 0;
    }
    if (len > SIM_CHANNEL_MAX) {
        /* The waiter retries instead (its watch failed, as without memory). */
        kit_trace(k->sim, "c%u: channel of %zu bytes, too long for the kit", k->index, len);
        return REDLOCK_ENOMEM;
    }
    if (k->n_chans == k->cap_chans) {
        size_t cap = k->cap_chans != 0 ? 2 * k->cap_chans : 8;
        kit_channel *v = realloc(k->chans, cap * sizeof(*v));
        if (v == NULL)
            return REDLOCK_ENOMEM;
        k->chans = v;
        k->cap_chans = cap;
    }
    c = &k->chans[k->n_chans++];
    c->len = len;
    c->refs = 1;
    memcpy(c->name, ch, len);
    changed(k, ch, len, true);
    return 0;
}

/* The connection died: the node forgets its subscriptions, what is on the way is lost, and the
 * client reconnects a little later. */
static void sub_drop(kit_client *k, unsigned node)
{
    sim_sub *sub = &k->subs[node];
    sim_subs_remove(&k->sim->subs, k->index, (int)node, NULL, 0);
    sub->up = false;
    sub->epoch++;
    if (!k->io.closing && !sub->connecting)
        connect_later(k, node, kit_net_delay(k->sim) + sim_link_retry_us(&k->sim->rng));
}

void kit_sub_server_gone(redlock_sim *sim, unsigned node)
{
    sim_subs_server_gone(&sim->subs, node, -1);
    for (unsigned i = 0; i < sim->n_clients; i++) {
        kit_client *k = sim->clients[i];
        if (k->has_io && !k->io.closed && k->subs[node].up)
            sub_drop(k, node);
    }
}

void kit_sub_close(kit_client *k)
{
    sim_subs_remove(&k->sim->subs, k->index, -1, NULL, 0);
    for (unsigned i = 0; i < k->sim->opts.n_nodes; i++) {
        k->subs[i].up = false;
        k->subs[i].epoch++;
    }
    kit_sub_free(k);
}

void kit_sub_free(kit_client *k)
{
    free(k->chans);
    k->chans = NULL;
    k->n_chans = k->cap_chans = 0;
}

static void on_connect(redlock_sim *sim, const sim_event *ev)
{
    kit_client *k = sim->clients[ev->proc];
    sim_sub *sub = &k->subs[ev->node];
    sub->connecting = false;
    if (k->io.closing || sub->up || k->n_chans == 0)
        return;
    const kit_node *n = &sim->nodes[ev->node];
    if (!n->up) {
        connect_later(k, ev->node, sim_link_retry_us(&sim->rng));
        return;
    }
    /* INFO server told it the run id; then every channel it wants. */
    *sub = (sim_sub){.up = true,
                     .epoch = sub->epoch + 1,
                     .last_to_server = sim->now,
                     .last_to_client = sim->now,
                     .server_node = ev->node,
                     .server_shard = -1,
                     .server_gen = n->run_id};
    kit_trace(sim, "c%u: subscriber of n%u connected", ev->proc, ev->node);
    for (size_t i = 0; i < k->n_chans; i++)
        send_cmd(k, ev->node, k->chans[i].name, k->chans[i].len, true);
}

static void on_cmd(redlock_sim *sim, const sim_event *ev)
{
    kit_client *k = sim->clients[ev->proc];
    sim_sub *sub = &k->subs[ev->node];
    kit_msg *m = ev->msg;
    if (sim->nodes[ev->node].up && sub->up && m->epoch == sub->epoch) {
        if (!ev->arg)
            sim_subs_remove(&sim->subs, ev->proc, (int)ev->node, m->wire, m->channel_len);
        else if (sim_subs_add(&sim->subs, ev->proc, ev->node, sub, m->wire, m->channel_len) != 0)
            sim->oom = true; /* a channel too long never gets here (kit_sub_watch) */
        kit_trace(sim, "n%u: c%u %s %.*s", ev->node, ev->proc,
                  ev->arg ? "subscribes to" : "unsubscribes from", (int)m->channel_len, m->wire);
    }
    kit_msg_free(m);
}

static void on_recv(redlock_sim *sim, const sim_event *ev)
{
    kit_client *k = sim->clients[ev->proc];
    sim_sub *sub = &k->subs[ev->node];
    kit_msg *m = ev->msg;
    if (!sub->up || m->epoch != sub->epoch || k->io.closing) {
        kit_msg_free(m);
        return;
    }
    const char *ch = m->wire, *msg = m->wire + m->channel_len;
    size_t msg_len = m->wire_len - m->channel_len;
    /* io_uv.c's rule: the subscriber's server must be the one the node's votes come from. */
    const sim_link *c = &k->conns[ev->node];
    unsigned from = c->client_up && c->run_id == sub->server_gen ? ev->node : REDLOCK__IO_NO_NODE;
    kit_trace(sim, "c%u <- n%u's subscriber%s: %.*s %.*s", ev->proc, ev->node,
              from == REDLOCK__IO_NO_NODE ? " (another server: a hint)" : "", (int)m->channel_len,
              ch, (int)REDLOCK__MIN(msg_len, 60), msg);
    if (k->io.base.on_notify != NULL)
        k->io.base.on_notify(&k->io.base, from, ch, m->channel_len, msg, msg_len);
    kit_msg_free(m);
}

void kit_sub_event(redlock_sim *sim, const sim_event *ev)
{
    switch (ev->kind) {
    case KIT_SUB_CONNECT:
        on_connect(sim, ev);
        break;
    case KIT_SUB_CMD:
        on_cmd(sim, ev);
        break;
    default:
        on_recv(sim, ev);
        break;
    }
}
