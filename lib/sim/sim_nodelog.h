/* SPDX-License-Identifier: MIT */
/* sim_nodelog.h - the nodes' record (sim_check.h's sim_record) as a simulator writes it during a
 * run: the kit's fleet (record.c) and test/sim's world (sim_node.c). A lock key's presence is
 * opened when a node sets it, cut short when the node's clock jumps, closed when it goes (a
 * delete, a restart without data); a node's downtime is opened when it goes down and closed when
 * it comes back. A key's open presence is found through its sim_db_key's mark. Times are true
 * time, microseconds. */
#ifndef SIM_NODELOG_H
#define SIM_NODELOG_H

#include <stddef.h>
#include <stdint.h>

#include "sim_check.h"
#include "sim_db.h"

typedef struct sim_nodelog {
    sim_presence *presence;
    size_t n_presence, cap_presence;
    sim_downtime *downtimes;
    size_t n_downtimes, cap_downtimes;
} sim_nodelog;

/* Node node holds k (a string key) with its value from from, until until at the longest (its
 * expiry): k's mark names the new presence. Returns 0; 1 if its name or value is too long for
 * the record; -1 without memory (k unmarked in both cases). */
int sim_nodelog_open(sim_nodelog *log, unsigned node, sim_db_key *k, uint64_t from, uint64_t until);

/* k's open presence (NULL: none). */
const sim_presence *sim_nodelog_find(const sim_nodelog *log, const sim_db_key *k);

/* k's presence ends at until at the latest (its node's clock jumped): it stays open. */
void sim_nodelog_cut(sim_nodelog *log, const sim_db_key *k, uint64_t until);

/* k's presence ends at until at the latest, and is no longer k's (k is set again or gone). */
void sim_nodelog_close(sim_nodelog *log, sim_db_key *k, uint64_t until);

/* Node node is down from now (0, or -1 without memory), or up again from now. */
int sim_nodelog_down(sim_nodelog *log, unsigned node, uint64_t now);
void sim_nodelog_up(sim_nodelog *log, unsigned node, uint64_t now);

/* The record so far, of a fleet of n_nodes nodes, for sim_check.h's checkers (valid until the
 * next write). */
sim_record sim_nodelog_record(const sim_nodelog *log, unsigned n_nodes);

void sim_nodelog_free(sim_nodelog *log);

#endif
