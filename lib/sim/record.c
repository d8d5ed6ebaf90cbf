/* SPDX-License-Identifier: MIT */
/* record.c - the nodes' record of a fleet (sim_check.h's sim_record): every interval of true time
 * over which a node held a string key with a value, and every interval it was down, for the
 * check that no hold is used while a quorum of nodes is up without its token (history.c). */
#include <stdlib.h>
#include <string.h>

#include "fleet.h"

/* The true time from which node's clock is past expire_us (the key is gone then). */
static uint64_t expiry_true(const redlock_sim *sim, const kit_node *n, uint64_t expire_us)
{
    if (expire_us == SIM_DB_PERSIST)
        return SIM_NEVER;
    uint64_t base = KIT_NODE_EPOCH_US + n->offset_us;
    return expire_us + 1 > base ? REDLOCK__MAX(expire_us + 1 - base, sim->now) : sim->now;
}

static void presence_close(redlock_sim *sim, sim_db_key *k, uint64_t until)
{
    if (k->mark < sim->n_presence && sim->presence[k->mark].until > until)
        sim->presence[k->mark].until = until;
    k->mark = SIZE_MAX;
}

static void presence_open(redlock_sim *sim, unsigned node, sim_db_key *k)
{
    k->mark = SIZE_MAX;
    if (k->name_len > SIM_KEY_MAX || k->value_len > SIM_VALUE_MAX)
        return; /* not a lock key with a token */
    if (sim->n_presence == sim->cap_presence) {
        size_t cap = sim->cap_presence != 0 ? sim->cap_presence * 2 : 64;
        sim_presence *v = realloc(sim->presence, cap * sizeof(*v));
        if (v == NULL) {
            sim->oom = true;
            return;
        }
        sim->presence = v;
        sim->cap_presence = cap;
    }
    sim_presence *r = &sim->presence[sim->n_presence];
    r->node = node;
    r->key_len = k->name_len;
    memcpy(r->key, k->name, k->name_len);
    r->value_len = k->value_len;
    memcpy(r->value, k->value, k->value_len);
    r->from = sim->now;
    r->until = expiry_true(sim, &sim->nodes[node], k->expire_us);
    k->mark = sim->n_presence++;
}

/* The observer of a node's keys (sim_db.h): a string key set (again) or deleted. */
static void on_key(void *ctx, sim_db *db, sim_db_key *k, bool gone)
{
    kit_node *n = ctx;
    redlock_sim *sim = n->sim;
    (void)db;
    presence_close(sim, k, sim->now);
    if (!gone)
        presence_open(sim, (unsigned)(n - sim->nodes), k);
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
        presence_close(sim, db->keys[i], sim->now);
}

void kit_record_jumped(redlock_sim *sim, unsigned node)
{
    kit_node *n = &sim->nodes[node];
    for (size_t i = 0; i < n->db.n; i++) {
        sim_db_key *k = n->db.keys[i];
        if (k->mark < sim->n_presence) {
            uint64_t until = expiry_true(sim, n, k->expire_us);
            if (until < sim->presence[k->mark].until)
                sim->presence[k->mark].until = until;
        }
    }
}

void kit_record_down(redlock_sim *sim, unsigned node, bool down)
{
    if (!down) {
        for (size_t i = sim->n_downtimes; i-- > 0;)
            if (sim->downtimes[i].node == node && sim->downtimes[i].until == SIM_NEVER) {
                sim->downtimes[i].until = sim->now;
                return;
            }
        return;
    }
    if (sim->n_downtimes == sim->cap_downtimes) {
        size_t cap = sim->cap_downtimes != 0 ? sim->cap_downtimes * 2 : 16;
        sim_downtime *v = realloc(sim->downtimes, cap * sizeof(*v));
        if (v == NULL) {
            sim->oom = true;
            return;
        }
        sim->downtimes = v;
        sim->cap_downtimes = cap;
    }
    sim->downtimes[sim->n_downtimes++] = (sim_downtime){node, sim->now, SIM_NEVER};
}

void kit_record_free(redlock_sim *sim)
{
    free(sim->presence);
    free(sim->downtimes);
}
