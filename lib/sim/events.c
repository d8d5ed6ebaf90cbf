/* SPDX-License-Identifier: MIT */
/* events.c - what every part of the fleet (fleet.c, pubsub.c, hostile.c, record.c) builds on:
 * its events and messages, the network's seeded draws, and each node's clock (fleet.h). Calls
 * only the event queue and the seeded generator. */
#include "fleet.h"

#include <stdlib.h>

/* ---- events ---------------------------------------------------------------------------------- */

void kit_event_free(const sim_event *ev)
{
    if (ev->kind == KIT_TIMER)
        free(ev->msg);
    else
        kit_msg_free(ev->msg);
}

bool kit_push(redlock_sim *sim, uint64_t at, kit_ev_kind kind, unsigned client, unsigned node,
              uint64_t arg, void *msg)
{
    sim_event ev = {REDLOCK__MAX(at, sim->now), 0, (int)kind, client, node, arg, msg, false};
    if (sim_queue_push(&sim->queue, ev))
        return true;
    sim->oom = true;
    kit_event_free(&ev);
    return false;
}

void kit_msg_free(kit_msg *m)
{
    if (m != NULL)
        free(m->wire);
    free(m);
}

/* ---- the network ---------------------------------------------------------------------------- */

uint64_t kit_net_delay(redlock_sim *sim)
{
    return sim_rng_range(&sim->rng, sim->opts.delay_min_us, sim->opts.delay_max_us);
}

bool kit_net_drops(redlock_sim *sim)
{
    return sim->opts.drop_ppm > 0 && sim_rng_range(&sim->rng, 0, 999999) < sim->opts.drop_ppm;
}

/* ---- node clocks ----------------------------------------------------------------------------- */

uint64_t kit_node_clock(const kit_node *n, uint64_t t)
{
    uint64_t since = t > n->base_true ? t - n->base_true : 0;
    /* since * rate stays below 2^64 for some 140 simulated days */
    return KIT_NODE_EPOCH_US + n->offset_us + n->base_local + since * n->rate_ppm / 1000000u;
}

uint64_t kit_node_true(const kit_node *n, uint64_t local)
{
    uint64_t base = KIT_NODE_EPOCH_US + n->offset_us + n->base_local;
    if (local <= base)
        return n->base_true;
    /* the first t with (t - base_true) * rate / 10^6 >= local - base */
    if (local - base > UINT64_MAX / 2000000u)
        return UINT64_MAX;
    return n->base_true + ((local - base) * 1000000u + n->rate_ppm - 1) / n->rate_ppm;
}
