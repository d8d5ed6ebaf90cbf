/* SPDX-License-Identifier: MIT */
/* sim_forge.c - a hostile node's forged messages (sim_forge.h). */
#include "sim_forge.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "sim_scripts.h"

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

/* A forged grant for record r, with another node's tag (its own would be a yes it did not
 * give), full ttl or not, and any counter: its length, 0 if it does not fit. */
static size_t forge_grant(sim_rng *rng, unsigned node, unsigned n_nodes, const forge_record *r,
                          char *msg)
{
    static const char *const fenced_counters[] = {"0", "999999999", "1", "7"};
    static const char *const plain_counters[] = {"", "", "", "3"};
    unsigned tag = (unsigned)sim_rng_range(rng, 0, n_nodes - 2);
    if (tag >= node)
        tag++;
    unsigned full = sim_rng_chance(rng, 0.8) ? 1 : 0;
    const char *counter = r->fenced ? fenced_counters[sim_rng_range(rng, 0, 3)]
                                    : plain_counters[sim_rng_range(rng, 0, 3)];
    int n =
        snprintf(msg, SIM_FORGE_MSG_MAX, "g:%.*s:%u:%.*s:%u:%s:%.*s", (int)r->stamp_len, r->stamp,
                 tag, (int)r->j_len, r->j, full, counter, (int)r->token_len, r->token);
    return n > 0 && n < SIM_FORGE_MSG_MAX && r->ch_len <= SIM_CHANNEL_MAX ? (size_t)n : 0;
}

static size_t text(char *msg, const char *s, size_t len)
{
    len = len < SIM_FORGE_MSG_MAX ? len : SIM_FORGE_MSG_MAX;
    memcpy(msg, s, len);
    return len;
}

sim_forge_kind sim_forge(sim_rng *rng, const sim_db *db, const sim_subs *subs, unsigned node,
                         unsigned n_nodes, char *ch, size_t *ch_len, char *msg, size_t *msg_len)
{
    forge_record recs[RECORDS_MAX];
    size_t n_recs = records(db, recs);
    const forge_record *r = n_recs > 0 ? &recs[sim_rng_range(rng, 0, n_recs - 1)] : NULL;
    /* Any channel a subscriber of this node carries. */
    size_t carried = 0;
    for (size_t i = 0; i < subs->n; i++)
        carried += subs->v[i].server_node == node;
    if (carried == 0)
        return SIM_FORGE_NONE;
    size_t pick = (size_t)sim_rng_range(rng, 0, carried - 1);
    const sim_subscription *s = NULL;
    for (size_t i = 0; i < subs->n && s == NULL; i++)
        if (subs->v[i].server_node == node && pick-- == 0)
            s = &subs->v[i];
    *ch_len = s->channel_len;
    memcpy(ch, s->channel, s->channel_len);
    switch (sim_rng_range(rng, 0, 3)) {
    case 0:
        if (r != NULL && n_nodes >= 2 && (*msg_len = forge_grant(rng, node, n_nodes, r, msg)) > 0) {
            *ch_len = r->ch_len;
            memcpy(ch, r->ch, r->ch_len);
            return SIM_FORGE_GRANT;
        }
        /* no record to forge from: a wake-up instead */
        /* fall through */
    case 1:
        *msg_len = text(msg, "w:x", 3);
        return SIM_FORGE_WAKE;
    case 2: {
        int len = r != NULL ? snprintf(msg, SIM_FORGE_MSG_MAX, "%.*s:x", (int)r->id_len, r->id) : 0;
        if (len <= 0 || len >= SIM_FORGE_MSG_MAX)
            len = snprintf(msg, SIM_FORGE_MSG_MAX, "0:x");
        *msg_len = (size_t)len;
        return SIM_FORGE_QUEUE;
    }
    default:
        *msg_len = r != NULL ? text(msg, r->token, r->token_len) : text(msg, "00", 2);
        return SIM_FORGE_KEY;
    }
}
