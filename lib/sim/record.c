/* SPDX-License-Identifier: MIT */
/* record.c - the nodes' record of a fleet (sim_nodelog.h, sim_check.h's sim_record): every
 * interval of true time over which a node held a string key with a value (until its expiry on
 * the node's clock, which may jump or drift), and every interval it was down, for the check that no
 * hold is used while a quorum of nodes is up without its token (history.c). */

#include "fleet.h"

/* The true time from which node's clock is past expire_us (the key is gone then). */
static uint64_t expiry_true(const redlock_sim *sim, const kit_node *n, uint64_t expire_us)
{
    if (expire_us == SIM_DB_PERSIST)
        return SIM_NEVER;
    return REDLOCK__MAX(kit_node_true(n, expire_us + 1), sim->now);
}

/* The observer of a node's keys (sim_db.h): a string key set (again) or deleted. A key or value
 * too long for the record is no lock key with a token: not recorded. */
static void on_key(void *ctx, sim_db *db, sim_db_key *k, bool gone)
{
    kit_node *n = ctx;
    redlock_sim *sim = n->sim;
    (void)db;
    sim_nodelog_close(&sim->log, k, sim->now);
    if (!gone && sim_nodelog_open(&sim->log, (unsigned)(n - sim->nodes), k, sim->now,
                                  expiry_true(sim, n, k->expire_us)) < 0)
        sim->oom = true;
}

void kit_record_watch(redlock_sim *sim, unsigned node)
{
    kit_node *n = &sim->nodes[node];
    n->sim = sim;
    n->db.observer = on_key;
    n->db.observer_ctx = n;
}

void kit_record_cleared(redlock_sim *sim, unsigned node)
{
    sim_db *db = &sim->nodes[node].db;
    for (size_t i = 0; i < db->n; i++)
        sim_nodelog_close(&sim->log, db->keys[i], sim->now);
}

void kit_record_jumped(redlock_sim *sim, unsigned node)
{
    kit_node *n = &sim->nodes[node];
    for (size_t i = 0; i < n->db.n; i++)
        sim_nodelog_cut(&sim->log, n->db.keys[i], expiry_true(sim, n, n->db.keys[i]->expire_us));
}

void kit_record_rate_changed(redlock_sim *sim, unsigned node)
{
    kit_node *n = &sim->nodes[node];
    for (size_t i = 0; i < n->db.n; i++) {
        sim_db_key *k = n->db.keys[i];
        if (sim_nodelog_find(&sim->log, k) == NULL)
            continue;
        /* its expiry moves either way: one presence up to now, the next from now */
        sim_nodelog_close(&sim->log, k, sim->now);
        if (sim_nodelog_open(&sim->log, node, k, sim->now, expiry_true(sim, n, k->expire_us)) < 0)
            sim->oom = true;
    }
}

void kit_record_down(redlock_sim *sim, unsigned node, bool down)
{
    if (!down)
        sim_nodelog_up(&sim->log, node, sim->now);
    else if (sim_nodelog_down(&sim->log, node, sim->now) < 0)
        sim->oom = true;
}

void kit_record_free(redlock_sim *sim)
{
    sim_nodelog_free(&sim->log);
}
