/* SPDX-License-Identifier: MIT */
/* hostile.c - the fleet's hostile nodes (redlock_sim_node_hostile): a node that runs every
 * command as its scripts say, then answers anything, and publishes anything.
 *
 * Its replies: with chance lie_ppm, the reply is replaced by a forgery of a kind drawn from the
 * seed: an error with any text, a nil, any integer, a status, any bulk string (random bytes, or
 * a token it holds), an array of those. A forgery that the client reads as a yes is not made:
 * the client gets the node's honest answer instead. No quorum algorithm survives a node that
 * says yes to whoever asks: two majorities of N share 2Q - N nodes, one for an odd N, and if
 * that one lies, both hold (docs/safety.md, its assumptions); so a hostile node here costs its
 * own vote and no more, which is what the library must keep.
 *
 * Its messages: every forge_every_us on average (a span drawn in [0, 2 forge_every_us]), it
 * publishes a forged message (sim_forge.h: grants with another node's tag and any counter,
 * wake-ups, queue and key messages) on a channel its subscribers carry. A grant it forges is
 * heard from it: it may count for it alone, never for the node its text names. */
#include <stdio.h>
#include <string.h>

#include "fleet.h"
#include "sim_forge.h"

static void random_text(redlock_sim *sim, char *out, size_t *len)
{
    static const char alphabet[] = "0123456789abcdefg:-OKQUEDnil *$\r\n";
    *len = (size_t)sim_rng_range(&sim->rng, 0, 40);
    for (size_t i = 0; i < *len; i++)
        out[i] = alphabet[sim_rng_range(&sim->rng, 0, sizeof(alphabet) - 2)];
}

/* One forged value: v's type and text drawn from the seed; held: a token the node holds. */
static void forge_value(redlock_sim *sim, sim_rval *v, const char *held, size_t held_len)
{
    static const long long ints[] = {0, 1, -1, 2, 3, 999999999, -2};
    memset(v, 0, sizeof(*v));
    switch (sim_rng_range(&sim->rng, 0, 5)) {
    case 0:
        v->type = SIM_R_ERROR;
        random_text(sim, v->str, &v->len);
        if (v->len == 0)
            v->str[v->len++] = 'E';
        break;
    case 1:
        v->type = SIM_R_NIL;
        break;
    case 2:
        v->type = SIM_R_INT;
        v->integer = ints[sim_rng_range(&sim->rng, 0, sizeof(ints) / sizeof(ints[0]) - 1)];
        break;
    case 3:
        v->type = SIM_R_STATUS;
        random_text(sim, v->str, &v->len);
        break;
    default:
        v->type = SIM_R_BULK;
        if (held_len > 0 && held_len <= sizeof(v->str) && sim_rng_chance(&sim->rng, 0.5)) {
            memcpy(v->str, held, held_len);
            v->len = held_len;
        } else {
            random_text(sim, v->str, &v->len);
        }
        break;
    }
}

/* A token node holds (any string value of its keyspace), or none. */
static void some_token(redlock_sim *sim, const sim_db *db, const char **tok, size_t *len)
{
    *tok = NULL;
    *len = 0;
    if (db->n == 0)
        return;
    const sim_db_key *k = db->keys[sim_rng_range(&sim->rng, 0, db->n - 1)];
    if (k->type == SIM_DB_STRING) {
        *tok = k->value;
        *len = k->value_len;
    }
}

void kit_hostile_reply(redlock_sim *sim, unsigned node, kit_msg *m)
{
    const kit_node *n = &sim->nodes[node];
    if (n->lie_ppm == 0 || sim_rng_range(&sim->rng, 0, 999999) >= n->lie_ppm)
        return;
    const char *tok;
    size_t tok_len;
    some_token(sim, &n->db, &tok, &tok_len);
    m->honest = m->reply;
    m->forged = true;
    memset(&m->reply, 0, sizeof(m->reply));
    if (sim_rng_chance(&sim->rng, 0.25)) {
        m->reply.v.type = SIM_R_ARRAY;
        m->reply.n = (unsigned)sim_rng_range(&sim->rng, 0, 3);
        for (unsigned i = 0; i < m->reply.n; i++)
            forge_value(sim, &m->reply.elem[i], tok, tok_len);
    } else {
        forge_value(sim, &m->reply.v, tok, tok_len);
    }
    kit_trace(sim, "n%u (hostile) forges its reply to #%llu", node, (unsigned long long)m->req_id);
}

void kit_hostile_schedule(redlock_sim *sim, unsigned node)
{
    uint64_t every = sim->nodes[node].forge_every_us;
    kit_push(sim, sim->now + sim_rng_range(&sim->rng, 0, 2 * every), KIT_FORGE, 0, node, 0, NULL);
}

void kit_hostile_event(redlock_sim *sim, const sim_event *ev)
{
    kit_node *n = &sim->nodes[ev->node];
    if (n->forge_every_us == 0)
        return; /* no longer hostile */
    kit_hostile_schedule(sim, ev->node);
    if (!n->up)
        return;
    char ch[SIM_CHANNEL_MAX], msg[SIM_FORGE_MSG_MAX];
    size_t ch_len, msg_len;
    if (sim_forge(&sim->rng, &n->db, &sim->subs, ev->node, sim->opts.n_nodes, ch, &ch_len, msg,
                  &msg_len) == SIM_FORGE_NONE)
        return;
    kit_trace(sim, "n%u (hostile) publishes on %.*s: %.*s", ev->node, (int)ch_len, ch,
              (int)REDLOCK__MIN(msg_len, 60), msg);
    kit_sub_publish(sim, ev->node, ch, ch_len, msg, msg_len);
}
