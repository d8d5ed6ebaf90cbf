/* SPDX-License-Identifier: MIT */
/* sim_hostile.c - a hostile node (sim_config.forges > 0): the last node runs every command as
 * its scripts say, but also publishes, cfg.forges times a run at random moments, forged messages
 * of every kind on the channels its subscribers carry, from what it can read in its own keyspace
 * (the waiters' grant records: stamp, node tag, key index, channel, token; their ids):
 *   - a grant "g:<stamp>:<tag>:<j>:<full>:<counter>:<token>" on a waiter's own channel, with
 *     another node's tag, the full ttl or not, and for a fenced waiter any
 *     counter (0, 999999999, or the record's domain's read back), else none or one;
 *   - a wake-up "w:<anything>" on a waiter's own channel, "<id>:<anything>" on a queue's channel,
 *     and a token it saw on a key's channel.
 * And it answers a fifth of the requests with an error whatever its scripts did (never a yes it
 * did not give: sim_internal.h says why).
 * A node costs only its own vote (docs/safety.md): with the other properties' checkers on, no
 * forgery may make two holders, a hold without a quorum of keys, or a gap reported continuous. */
#include <stdio.h>
#include <string.h>

#include "sim_internal.h"

#define RECORDS_MAX 16

/* A waiter's grant record on the hostile node (sim_grant_record, under field "<id>:g" of
 * "<key>:queue-due"), with its waiter's id. */
typedef struct forge_record {
    const char *stamp, *j, *ch, *token, *id;
    size_t stamp_len, j_len, ch_len, token_len, id_len;
    bool fenced;
} forge_record;

static bool parse(const sim_db_item *it, forge_record *r)
{
    sim_grant_record g;
    if (it->name_len < 3 || memcmp(it->name + it->name_len - 2, ":g", 2) != 0 ||
        !sim_grant_record_parse(it->value, it->value_len, &g) || g.token_len == 0)
        return false;
    *r = (forge_record){.stamp = g.stamp,
                        .stamp_len = g.stamp_len,
                        .j = g.j,
                        .j_len = g.j_len,
                        .ch = g.ch,
                        .ch_len = g.ch_len,
                        .token = g.token,
                        .token_len = g.token_len,
                        .id = it->name,
                        .id_len = it->name_len - 2,
                        .fenced = g.fenced};
    return true;
}

/* Up to RECORDS_MAX grant records of the node's keyspace. */
static size_t records(const sim_db *db, forge_record *out)
{
    static const char suffix[] = ":queue-due";
    size_t n = 0, sl = sizeof(suffix) - 1;
    for (size_t i = 0; i < db->n && n < RECORDS_MAX; i++) {
        const sim_db_key *k = db->keys[i];
        if (k->type != SIM_DB_HASH || k->name_len <= sl ||
            memcmp(k->name + k->name_len - sl, suffix, sl) != 0)
            continue;
        for (size_t f = 0; f < k->n_items && n < RECORDS_MAX; f++)
            if (parse(&k->items[f], &out[n]))
                n++;
    }
    return n;
}

static void publish(sim_world *w, unsigned node, const char *ch, size_t ch_len, const char *msg,
                    size_t len)
{
    sim_trace(w, "n%u (hostile) publishes on %.*s: %.*s", node, (int)ch_len, ch,
              (int)REDLOCK__MIN(len, 60), msg);
    sim_pubsub_publish(w, node, ch, ch_len, msg, len);
}

/* A forged grant for record r, with any node's tag, full ttl or not, and any counter. */
static void forge_grant(sim_world *w, unsigned node, const forge_record *r)
{
    static const char *const fenced_counters[] = {"0", "999999999", "1", "7"};
    static const char *const plain_counters[] = {"", "", "", "3"};
    /* Another node's tag: its own would be a yes it did not give (sim_internal.h). */
    unsigned tag = (unsigned)sim_rng_range(&w->rng, 0, w->cfg.n_nodes - 2);
    unsigned full = sim_rng_chance(&w->rng, 0.8) ? 1 : 0;
    const char *counter = r->fenced ? fenced_counters[sim_rng_range(&w->rng, 0, 3)]
                                    : plain_counters[sim_rng_range(&w->rng, 0, 3)];
    char msg[512];
    int n = snprintf(msg, sizeof(msg), "g:%.*s:%u:%.*s:%u:%s:%.*s", (int)r->stamp_len, r->stamp,
                     tag, (int)r->j_len, r->j, full, counter, (int)r->token_len, r->token);
    if (n <= 0 || (size_t)n >= sizeof(msg))
        return;
    w->res->forged_grants++;
    publish(w, node, r->ch, r->ch_len, msg, (size_t)n);
}

/* EV_FORGE: one forged message from the hostile node, of a kind drawn at random. */
void sim_hostile_event(sim_world *w, const sim_event *ev)
{
    (void)ev;
    unsigned node = w->cfg.n_nodes - 1;
    sim_node *n = &w->nodes[node];
    if (!n->up || n->cluster != NULL)
        return;
    forge_record recs[RECORDS_MAX];
    size_t n_recs = records(&n->db, recs);
    const forge_record *r = n_recs > 0 ? &recs[sim_rng_range(&w->rng, 0, n_recs - 1)] : NULL;
    /* Any channel a subscriber of this node carries. */
    size_t carried = 0;
    for (size_t i = 0; i < w->n_subscriptions; i++)
        carried += w->subscriptions[i].server_node == node;
    if (carried == 0)
        return;
    size_t pick = (size_t)sim_rng_range(&w->rng, 0, carried - 1);
    const sim_subscription *s = NULL;
    for (size_t i = 0; i < w->n_subscriptions && s == NULL; i++)
        if (w->subscriptions[i].server_node == node && pick-- == 0)
            s = &w->subscriptions[i];
    char ch[sizeof(s->channel)], msg[256];
    size_t ch_len = s->channel_len;
    memcpy(ch, s->channel, ch_len);
    switch (sim_rng_range(&w->rng, 0, 3)) {
    case 0:
        if (r != NULL) {
            forge_grant(w, node, r);
            return;
        }
        /* no record to forge from: a wake-up instead */
        /* fall through */
    case 1:
        w->res->forged_wakes++;
        publish(w, node, ch, ch_len, "w:x", 3);
        return;
    case 2: {
        int len = r != NULL ? snprintf(msg, sizeof(msg), "%.*s:x", (int)r->id_len, r->id) : 0;
        if (len <= 0 || (size_t)len >= sizeof(msg))
            len = snprintf(msg, sizeof(msg), "0:x");
        w->res->forged_queue++;
        publish(w, node, ch, ch_len, msg, (size_t)len);
        return;
    }
    default:
        w->res->forged_key++;
        if (r != NULL)
            publish(w, node, ch, ch_len, r->token, r->token_len);
        else
            publish(w, node, ch, ch_len, "00", 2);
        return;
    }
}

bool sim_hostile_node(const sim_world *w, unsigned node)
{
    return w->cfg.forges > 0 && node == w->cfg.n_nodes - 1;
}

void sim_hostile_reply(sim_world *w, unsigned node, sim_msg *m)
{
    if (!sim_hostile_node(w, node) || !sim_rng_chance(&w->rng, 0.2))
        return;
    w->res->forged_votes++;
    memset(&m->reply, 0, sizeof(m->reply));
    m->reply.v.type = SIM_R_ERROR;
    m->reply.v.len = (size_t)snprintf(m->reply.v.str, sizeof(m->reply.v.str), "ERR hostile");
}

void sim_hostile_schedule(sim_world *w)
{
    for (unsigned i = 0; i < w->cfg.forges; i++)
        sim_push(w, sim_rng_range(&w->rng, 0, w->cfg.horizon_us), EV_FORGE, 0, w->cfg.n_nodes - 1,
                 0, NULL);
}
