/* SPDX-License-Identifier: MIT */
/* sim_nodelog.c - the nodes' record as a run writes it (sim_nodelog.h). */
#include "sim_nodelog.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Room for one more of n items of size bytes in *v (cap of them; first when there is none yet):
 * false without memory. */
static bool room(void **v, size_t *cap, size_t n, size_t size, size_t first)
{
    if (n < *cap)
        return true;
    size_t more = *cap != 0 ? *cap * 2 : first;
    void *p = realloc(*v, more * size);
    if (p == NULL)
        return false;
    *v = p;
    *cap = more;
    return true;
}

int sim_nodelog_open(sim_nodelog *log, unsigned node, sim_db_key *k, uint64_t from, uint64_t until)
{
    k->mark = SIZE_MAX;
    if (k->name_len > SIM_KEY_MAX || k->value_len > SIM_VALUE_MAX)
        return 1;
    void *v = log->presence;
    if (!room(&v, &log->cap_presence, log->n_presence, sizeof(sim_presence), 64))
        return -1;
    log->presence = v;
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
    void *v = log->downtimes;
    if (!room(&v, &log->cap_downtimes, log->n_downtimes, sizeof(sim_downtime), 16))
        return -1;
    log->downtimes = v;
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
