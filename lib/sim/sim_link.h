/* SPDX-License-Identifier: MIT */
/* sim_link.h - one client's connection to one simulated node, as the simulators model it: the
 * kit's fleet (fleet.c) and test/sim's world (sim_io.c). Messages on it keep their order in each
 * direction (TCP: none overtakes an earlier one), are lost while the connection is gone or a
 * fault cuts that direction, or arrive a fault's extra delay late. A node's crash kills it with
 * what is in flight; the client notices later, fails the requests it waited for, and reconnects
 * after a retry span (SIM_RETRY_MIN_US..SIM_RETRY_MAX_US) to a node that is up. The requests the
 * client's io owes a completion wait on it in the order they were sent. */
#ifndef SIM_LINK_H
#define SIM_LINK_H

#include <stdbool.h>
#include <stdint.h>

#include "io.h"
#include "sim_rng.h"

/* A client retries connecting to a node that is down after a span in this range (true time):
 * sim_link_retry_us draws it. */
#define SIM_RETRY_MIN_US 5000
#define SIM_RETRY_MAX_US 30000

/* The directions of a message. */
#define SIM_LINK_TO_NODE 0
#define SIM_LINK_TO_CLIENT 1

/* A request the io owes a completion. */
typedef struct sim_pending {
    struct sim_pending *next;
    uint64_t id;
    redlock__req *req;
} sim_pending;

/* epoch changes whenever the connection dies or is made again: a message of another epoch is
 * discarded where it lands. */
typedef struct sim_link {
    bool alive;     /* the connection exists */
    bool client_up; /* the client believes it does (else its sends fail fast) */
    uint64_t epoch;
    uint64_t crash_epoch; /* messages of this epoch or older died with their node */
    uint64_t run_id;      /* of the server it last reached (0: none yet) */
    uint64_t last_at[2];  /* per direction: when its last message lands */
    uint64_t fault_until[2], fault_delay_us[2]; /* per direction: lost (delay 0) or late */
    sim_pending *head, *tail;
} sim_link;

/* A new connection (the client's first): up to a node that is up (run_id its server's), else
 * gone (the client retries). */
void sim_link_init(sim_link *l, bool up, uint64_t run_id);

/* Whether a message sent now in direction dir is lost whatever the network draws: the
 * connection is gone, or a fault loses that direction. */
bool sim_link_cut(const sim_link *l, int dir, uint64_t now);

/* When a message that leaves at from (>= now) in direction dir with delay_us lands: behind what
 * is on its way in that direction, a fault's extra delay added. */
uint64_t sim_link_land(sim_link *l, int dir, uint64_t now, uint64_t from, uint64_t delay_us);

/* Direction dir loses its messages (extra_delay_us 0) or delays them by extra_delay_us until
 * until (true time); an earlier fault lasts at least as long as it was to. */
void sim_link_fault(sim_link *l, int dir, uint64_t until, uint64_t extra_delay_us);

/* The node died: what is in flight dies with it. Returns true if the connection was there (the
 * client is to notice, sim_link_noticed), false if it was gone already. */
bool sim_link_crash(sim_link *l);

/* The client notices its connection is gone: returns false if it knew (nothing to do), else true:
 * it is to fail what it waits for (sim_link_next) and retry. */
bool sim_link_noticed(sim_link *l);

/* The client drops the connection itself (it is silent, or the process is gone): a new epoch
 * orphans it (replies on it are discarded; what it carries to the node still lands). */
void sim_link_drop(sim_link *l);

/* The client connected (again) at now to the node's server run_id: returns true if it is another
 * server than the one it last reached (the client is told: io.h's on_node_changed). */
bool sim_link_reconnect(sim_link *l, uint64_t now, uint64_t run_id);

/* The span after which a client tries to connect again, drawn from rng. */
uint64_t sim_link_retry_us(sim_rng *rng);

/* The owed requests: append q; take the one with id out (NULL: none); take the first out (NULL:
 * none); free them all without completing them (the end of a run). */
void sim_link_owe(sim_link *l, sim_pending *q);
sim_pending *sim_link_take(sim_link *l, uint64_t id);
sim_pending *sim_link_next(sim_link *l);
void sim_link_free(sim_link *l);

#endif
