/* SPDX-License-Identifier: MIT */
/* sim_hostile.c - a hostile node (sim_config.forges > 0): the last node runs every command as
 * its scripts say, but also publishes, cfg.forges times a run at random moments, forged messages
 * of every kind on the channels its subscribers carry, made from what it reads in its own
 * keyspace (forged grants, wake-ups, queue and key messages: the kit's model, lib/sim/sim_forge.h).
 * And it answers a fifth of the requests with an error whatever its scripts did (never a yes it
 * did not give: sim_internal.h says why).
 * A node costs only its own vote (docs/safety.md): with the other properties' checkers on, no
 * forgery may make two holders, a hold without a quorum of keys, or a gap reported continuous. */
#include <stdio.h>
#include <string.h>

#include "sim_forge.h"
#include "sim_internal.h"

static void publish(sim_world *w, unsigned node, const char *ch, size_t ch_len, const char *msg,
                    size_t len)
{
    sim_trace(w, "n%u (hostile) publishes on %.*s: %.*s", node, (int)ch_len, ch,
              (int)REDLOCK__MIN(len, 60), msg);
    sim_pubsub_publish(w, node, ch, ch_len, msg, len);
}

/* EV_FORGE: one forged message from the hostile node, of a kind drawn at random (the kit's
 * model: lib/sim/sim_forge.h). */
void sim_hostile_event(sim_world *w, const sim_event *ev)
{
    (void)ev;
    unsigned node = w->cfg.n_nodes - 1;
    sim_node *n = &w->nodes[node];
    if (!n->up || n->cluster != NULL)
        return;
    char ch[SIM_CHANNEL_MAX], msg[SIM_FORGE_MSG_MAX];
    size_t ch_len, msg_len;
    switch (
        sim_forge(&w->rng, &n->db, &w->subs, node, w->cfg.n_nodes, ch, &ch_len, msg, &msg_len)) {
    case SIM_FORGE_NONE:
        return;
    case SIM_FORGE_GRANT:
        w->res->forged_grants++;
        break;
    case SIM_FORGE_WAKE:
        w->res->forged_wakes++;
        break;
    case SIM_FORGE_QUEUE:
        w->res->forged_queue++;
        break;
    case SIM_FORGE_KEY:
        w->res->forged_key++;
        break;
    }
    publish(w, node, ch, ch_len, msg, msg_len);
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
