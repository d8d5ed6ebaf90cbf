/* SPDX-License-Identifier: MIT */
/* sim_link.c - a simulated client-node connection (sim_link.h). */
#include "sim_link.h"

#include <stdlib.h>

void sim_link_init(sim_link *l, bool up, uint64_t run_id)
{
    *l = (sim_link){.alive = up, .client_up = up, .epoch = 1, .run_id = up ? run_id : 0};
}

bool sim_link_cut(const sim_link *l, int dir, uint64_t now)
{
    return !l->alive || (now < l->fault_until[dir] && l->fault_delay_us[dir] == 0);
}

uint64_t sim_link_land(sim_link *l, int dir, uint64_t now, uint64_t from, uint64_t delay_us)
{
    uint64_t extra = now < l->fault_until[dir] ? l->fault_delay_us[dir] : 0;
    uint64_t at = from + delay_us + extra;
    if (at < l->last_at[dir])
        at = l->last_at[dir];
    l->last_at[dir] = at;
    return at;
}

void sim_link_fault(sim_link *l, int dir, uint64_t until, uint64_t extra_delay_us)
{
    if (until > l->fault_until[dir])
        l->fault_until[dir] = until;
    l->fault_delay_us[dir] = extra_delay_us;
}

bool sim_link_crash(sim_link *l)
{
    l->crash_epoch = ++l->epoch;
    if (!l->alive)
        return false;
    l->alive = false;
    return true;
}

bool sim_link_noticed(sim_link *l)
{
    if (!l->client_up)
        return false;
    l->client_up = false;
    return true;
}

void sim_link_drop(sim_link *l)
{
    l->client_up = false;
    l->alive = false;
    l->epoch++;
}

bool sim_link_reconnect(sim_link *l, uint64_t now, uint64_t run_id)
{
    l->alive = true;
    l->client_up = true;
    l->epoch++;
    l->last_at[SIM_LINK_TO_NODE] = l->last_at[SIM_LINK_TO_CLIENT] = now;
    bool changed = l->run_id != 0 && l->run_id != run_id;
    l->run_id = run_id;
    return changed;
}

uint64_t sim_link_retry_us(sim_rng *rng)
{
    return sim_rng_range(rng, SIM_RETRY_MIN_US, SIM_RETRY_MAX_US);
}

void sim_link_owe(sim_link *l, sim_pending *q)
{
    q->next = NULL;
    if (l->tail != NULL)
        l->tail->next = q;
    else
        l->head = q;
    l->tail = q;
}

sim_pending *sim_link_take(sim_link *l, uint64_t id)
{
    sim_pending *prev = NULL;
    for (sim_pending *q = l->head; q != NULL; prev = q, q = q->next) {
        if (q->id != id)
            continue;
        if (prev != NULL)
            prev->next = q->next;
        else
            l->head = q->next;
        if (l->tail == q)
            l->tail = prev;
        return q;
    }
    return NULL;
}

sim_pending *sim_link_next(sim_link *l)
{
    sim_pending *q = l->head;
    if (q != NULL) {
        l->head = q->next;
        if (l->head == NULL)
            l->tail = NULL;
    }
    return q;
}

void sim_link_free(sim_link *l)
{
    for (sim_pending *q = sim_link_next(l); q != NULL; q = sim_link_next(l))
        free(q);
}
