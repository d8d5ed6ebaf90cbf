/* sim.h - a deterministic simulation of libredlock in virtual time.
 *
 * One run, from one seed: N simulated Redis masters (SET NX PX and the three scripts, each key
 * expiring on its node's own clock), a simulated network (seeded per-message delays, stalls that
 * keep TCP's order, drops, client-node partitions), node restarts with or without their data,
 * and several client processes. Each process runs a real redlock_client (the production round
 * code, made with redlock__client_new_io on the simulator's io) on its own drifting clock, may be
 * paused (a GC pause, SIGSTOP), and loops: acquire, work while it believes it holds the lock
 * (never past its validity deadline on its own clock), release.
 *
 * A checker records every hold as an interval of true (global) time and reports two holds of
 * one resource that overlap: a violation of mutual exclusion. */
#ifndef SIM_H
#define SIM_H

#include <stdbool.h>
#include <stdint.h>

#define SIM_MAX_NODES 7
#define SIM_MAX_PROCS 8
#define SIM_MAX_RESOURCES 4

typedef struct sim_config {
    uint64_t seed;
    unsigned n_nodes;     /* 1..SIM_MAX_NODES */
    unsigned n_procs;     /* 1..SIM_MAX_PROCS client processes */
    unsigned n_resources; /* 1..SIM_MAX_RESOURCES */
    unsigned cycles;      /* acquire attempts per process */

    /* Client options. */
    uint64_t ttl_ms;
    uint64_t node_timeout_ms;
    double drift_factor;
    int retry_count;
    uint64_t wait_ms; /* > 0: acquire keeps retrying this long (retry_count is then unused) */
    uint64_t retry_delay_ms, retry_jitter_ms;
    double extend_prob; /* chance that a holder extends its lock once while working */

    /* Clocks. Every clock (processes' and nodes') runs at a rate within 1 +/- rate_spread;
     * rate_spread = drift_factor / 2 keeps any two clocks within drift_factor of each other. */
    double rate_spread;
    double bad_rate; /* > 0: process 0's clock runs at exactly this rate (a broken clock) */

    /* Network, per message. */
    uint64_t delay_min_us, delay_max_us;
    double stall_prob; /* a TCP retransmission: delay + stall, later messages wait behind it */
    uint64_t stall_max_us;
    double drop_prob; /* lost for good */
    /* Like the real node: after 3 timeouts' worth of silence the process drops the connection and
     * reconnects. What it already wrote still reaches the node on the old connection (TCP
     * delivers it after close), with no order against the new connection. */
    bool drop_silent_conns;

    /* Faults, scheduled over [0, horizon_us] of true time. */
    uint64_t horizon_us;
    unsigned partitions; /* client-node links cut (both ways) for a while */
    uint64_t partition_max_us;
    unsigned pauses; /* a process stops handling events for a while */
    uint64_t pause_max_us;
    unsigned restarts;            /* node restarts */
    uint64_t restart_down_min_us; /* 0: 1 ms */
    uint64_t restart_down_max_us;
    bool restart_loses_data; /* the restarted node comes back empty (no persistence) */

    bool trace; /* print every event to stderr */
} sim_config;

typedef struct sim_result {
    bool violation;
    char what[512];       /* the first violation, or the first broken contract */
    bool contract_broken; /* the io contract or the simulation's own bookkeeping failed */
    uint64_t trace_hash;  /* FNV-1a over every event handled and every callback seen */
    uint64_t events;
    uint64_t end_us;    /* true time of the last event */
    unsigned holds;     /* intervals recorded (non-empty holds) */
    unsigned handovers; /* a hold that began within one ttl of another's end, same resource */
    unsigned acquired[SIM_MAX_PROCS];
    unsigned extended;
} sim_result;

/* The named scenarios the tests use; seed is folded into each. "safe": every assumption holds,
 * with random delays, stalls, drops, partitions, pauses and restarts that keep data.
 * "slow-clock": process 0's clock runs 30% slow. "amnesia": nodes restart without their data.
 * "calm": no faults at all. Returns false for an unknown name. */
bool sim_config_scenario(sim_config *cfg, const char *name, uint64_t seed);

/* Run one simulation. Returns 0, or -1 if the run could not be set up (out of memory). */
int sim_run(const sim_config *cfg, sim_result *result);

#endif
