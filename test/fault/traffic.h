/* SPDX-License-Identifier: MIT */
/* traffic.h - continuous lock traffic for the fault tests: n slots, each cycling acquire ->
 * release on its own resource, so that a fault always hits operations in flight.
 *
 * Outcomes are counted per epoch: the test bumps the epoch whenever it changes the world (kills
 * a node, stops one, heals a proxy). A call issued and completed within one epoch is "clean" and
 * counted in by_epoch[e]; a call that completes in a later epoch than it was issued in straddles
 * a change, and is counted in straddle[e] by the epoch it was issued in. A release is issued in
 * its acquire's epoch: a lock whose acquire straddles a change (a node stopped or killed while its
 * votes were on the way) is judged with that change, and so is its release, whose outcome
 * depends on which nodes kept the lock (docs/safety.md). Everything runs on the env's loop
 * thread; the test drives the loop (h_run_for) between changes. */
#ifndef REDLOCK_TEST_TRAFFIC_H
#define REDLOCK_TEST_TRAFFIC_H

#include "harness.h"

#define TRAFFIC_MAX_SLOTS 128
#define TRAFFIC_MAX_EPOCHS 8

typedef struct traffic_stats {
    int calls; /* acquires and releases called back */
    int ok;
    int enoquorum;
    int other;         /* any other status */
    int other_status;  /* the first such status */
    int acquires_ok;   /* acquires that won */
    int releases_ok;   /* releases that reported status 0 */
    int releases_full; /* releases confirmed by every node (votes_yes == n_nodes) */
    /* Releases deleted on a quorum but ENOQUORUM: too few of the lock's kept nodes answered to
     * show the hold continuous (docs/safety.md, "A hold is continuous while a quorum kept it"). */
    int releases_unproven;
    int immediate_errors;             /* calls refused at once (no callback expected) */
    uint64_t max_latency_us;          /* call to callback, acquire or release */
    uint64_t max_acquire_latency_us;  /* call to callback, acquires only */
    unsigned min_release_votes_yes;   /* over releases that reported status 0 */
    unsigned max_votes_timeout;       /* over every call */
    unsigned max_votes_failed;        /* errors + timeouts, over every call */
    unsigned max_votes_error;         /* errors alone, over every call */
    char last_error[H_MAX_NODES][96]; /* the last error text each node gave (diagnosis) */
} traffic_stats;

typedef struct traffic traffic;

typedef struct traffic_slot {
    traffic *t;
    unsigned index;
    char resource[48];
    redlock_lock *lock; /* held between a won acquire and its release's callback */
    uint64_t issued_us;
    unsigned epoch; /* when the call in flight (for a release: its acquire) was issued */
    bool busy;      /* a call is in flight */
} traffic_slot;

struct traffic {
    h_env *env;
    redlock_client *client;
    unsigned n_slots;
    uint64_t ttl_ms;
    bool stopping;
    unsigned epoch;
    int issued, completed;
    traffic_stats by_epoch[TRAFFIC_MAX_EPOCHS];
    traffic_stats straddle[TRAFFIC_MAX_EPOCHS];
    traffic_slot slots[TRAFFIC_MAX_SLOTS];
};

/* Start n_slots acquire/release cycles on client (resources "<prefix>:<slot>", ttl_ms each). */
void traffic_start(traffic *t, h_env *env, redlock_client *client, unsigned n_slots,
                   const char *prefix, uint64_t ttl_ms);
/* Calls issued from now on belong to epoch (< TRAFFIC_MAX_EPOCHS). */
void traffic_set_epoch(traffic *t, unsigned epoch);
/* Stop issuing new cycles and run the loop until every call in flight has called back (a held
 * lock is released first), at most timeout_ms. Returns true if everything came back. With
 * $FAULT_VERBOSE set, prints every epoch's counters first. */
bool traffic_stop(traffic *t, uint64_t timeout_ms);
/* Print an epoch's counters on stderr (for failure diagnosis). */
void traffic_dump(const traffic *t, unsigned epoch);

#endif
