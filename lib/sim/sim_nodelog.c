/* SPDX-License-Identifier: MIT */
/* sim_nodelog.c - the nodes' record as a run writes it (sim_nodelog.h). */
#include "sim_nodelog.h"

#include <stdlib.h>
#include <string.h>

int sim_nodelog_open(sim_nodelog *log, unsigned node, sim_db_key *k, uint64_t from, uint64_t until)
{
    k->mark = SIZE_MAX;
    if (k->name_len > SIM_KEY_MAX || k->value_len > SIM_VALUE_MAX)
        return 1;
    if (log->n_presence == log->cap_presence) {
        size_t cap = log->cap_presence != 0 ? log->cap_presence * 2 : 64;
        sim_presence *v = realloc(log->presence, cap * sizeof(*v));
        if (v == NULL)
            return -1;
        log->presence = v;
        log->cap_presence = cap;
    }
    sim_presence *r = &log->presence[log->n_presence];
    r->node = node;
    r->key_len = k->name_len;
    memcpy(r->key, k->name, k->name_len);
    r->value_len = k->value_len;
    memcpy(r->value, k->value, k->value_len);
    r->from = from;
    r->until = until;
    k->mark = log->n_presence++;
    return 0;
}

const sim_presence *sim_nodelog_find(const sim_nodelog *log, const sim_db_key *k)
{
    return k->mark < log->n_presence ? &log->presence[k->mark] : NULL;
}

void sim_nodelog_cut(sim_nodelog *log, const sim_db_key *k, uint64_t until)
{
    if (k->mark < log->n_presence && log->presence[k->mark].until > until)
        log->presence[k->mark].until = until;
}

void sim_nodelog_close(sim_nodelog *log, sim_db_key *k, uint64_t until)
{
    sim_nodelog_cut(log, k, until);
    k->mark = SIZE_MAX;
}

int sim_nodelog_down(sim_nodelog *log, unsigned node, uint64_t now)
{
    if (log->n_downtimes == log->cap_downtimes) {
        size_t cap = log->cap_downtimes != 0 ? log->cap_downtimes * 2 : 16;
        sim_downtime *v = realloc(log->downtimes, cap * sizeof(*v));
        if (v == NULL)
            return -1;
        log->downtimes = v;
        log->cap_downtimes = cap;
    }
    log->downtimes[log->n_downtimes++] = (sim_downtime){node, now, SIM_NEVER};
    return 0;
}

void sim_nodelog_up(sim_nodelog *log, unsigned node, uint64_t now)
{
    for (size_t i = 0; i < log->n_downtimes; i++)
        if (log->downtimes[i].node == node && log->downtimes[i].until == SIM_NEVER)
            log->downtimes[i].until = now;
}

sim_record sim_nodelog_record(const sim_nodelog *log, unsigned n_nodes)
{
    return (sim_record){n_nodes, log->presence, log->n_presence, log->downtimes, log->n_downtimes};
}

void sim_nodelog_free(sim_nodelog *log)
{
    free(log->presence);
    free(log->downtimes);
    *log = (sim_nodelog){0};
}
