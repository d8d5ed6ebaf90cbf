/* SPDX-License-Identifier: MIT */
/* sim_fence_stats.h - what the fencing checker of the simulation counts (sim_fence.c). */
#ifndef SIM_FENCE_STATS_H
#define SIM_FENCE_STATS_H

typedef struct sim_fence_stats {
    unsigned grants;         /* fenced locks handed out */
    unsigned order_checks;   /* pairs of grants of a resource, one after the other in true time */
    unsigned order_broken;   /* ... whose fences did not increase, within the assumptions */
    unsigned order_excused;  /* ... that did not, with more nodes forgetting between them than
                                fence_commit covers (an assumption broken on purpose) */
    unsigned amnesia_pairs;  /* pairs with a node restarted empty between them */
    unsigned writes;         /* writes sent to the fenced store */
    unsigned accepted;       /* ... it accepted */
    unsigned refused;        /* ... it refused (a fence below the last accepted one) */
    unsigned late_writes;    /* ... that reached it after their hold's validity, in true time */
    unsigned stale_accepted; /* accepted after a write of a hold granted later */
} sim_fence_stats;

#endif
