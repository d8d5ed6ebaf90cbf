/* SPDX-License-Identifier: MIT */
/* sim.h - a deterministic simulation of libredlock in virtual time.
 *
 * One run, from one seed: N simulated Redis masters (every command the library sends, run by C
 * models of its scripts: sim_scripts.h; each key expiring on its node's own clock), or Redis
 * Clusters (sim_cluster.c), a simulated network (seeded per-message delays, stalls that keep
 * TCP's order, drops, client-node partitions) with subscriber connections (sim_pubsub.c), node
 * restarts with or without their data, and several client processes. Each process runs a real
 * redlock_client (the production round code, made with redlock__client_new_io on the simulator's
 * io) on its own drifting clock, may be paused (a GC pause, SIGSTOP), and loops: acquire, work
 * while it believes it holds the lock (never past its validity deadline on its own clock), release.
 * Some holds may be auto-extended (redlock_auto_extend, or the acquire option): kept for several
 * ttls, worked only up to the deadline the library reports at each moment, stopped at once by the
 * lost callback.
 *
 * A checker (sim_check.h) records every hold as an interval of true (global) time and reports two
 * holds of one resource that overlap: a violation of mutual exclusion. The promises of the
 * auto-extension API (the lost callback fires once per lost hold, in time, never after a
 * release; nothing is extended after a release; a cap ends the hold through the lost callback)
 * are checked as the run goes.
 *
 * And no operation reports a hold without a gap that had one: whenever a release completes with
 * status 0 or an extend is won, the nodes' true-time record (every interval over which a node
 * held the key with the hold's token) must show a quorum of nodes holding the token at every
 * moment from the acquire's callback to that point (to the release call, for a release), so no
 * other holder could have been granted in between.
 *
 * With fencing (sim_fence.h, test_sim_fence.c), every lock is fenced, the nodes keep counters,
 * holders write to a fenced store, and the checker adds two properties: fences strictly increase
 * in the true-time order of grants, and the store never accepts a stale write. */
#ifndef SIM_H
#define SIM_H

/* Sanitizers make each run several times slower: the test programs run fewer seeds there. */
#if defined(__SANITIZE_ADDRESS__)
#define SIM_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SIM_SANITIZED 1
#endif
#endif
#ifndef SIM_SANITIZED
#define SIM_SANITIZED 0
#endif

#include <stdbool.h>
#include <stdint.h>

#include "sim_fence_stats.h"

#define SIM_MAX_NODES 9
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

    /* Auto-extension. A hold is auto-extended with chance auto_prob: half the time through
     * redlock_lock_opts.auto_extend, half through redlock_auto_extend from the acquire
     * callback, with extend_at, lost_margin_ms and the retake flag drawn per hold. The holder
     * means to keep it for a span drawn in (ttl, auto_hold_max_ms] on its own clock, then
     * releases it; it works only up to the deadline the library reports, and stops at once if
     * the lost callback fires. With chance auto_cap_prob the hold has a cap (max_extensions
     * 1..auto_cap_max); with chance auto_close_prob a process ends its last auto-extended hold
     * by closing its client instead of releasing (the lost callback must say ECANCELED). */
    double auto_prob;
    uint64_t auto_hold_max_ms;
    double auto_cap_prob;
    unsigned auto_cap_max;
    double auto_close_prob;

    /* Clocks. Every clock (processes' and nodes') runs at a rate within 1 +/- rate_spread;
     * rate_spread = drift_factor / 2 keeps any two clocks within drift_factor of each other.
     * opposite_clocks puts every process's clock at the slow edge and every node's at the fast
     * one: the holder's deadline comes as late, and its keys expire as early, as the assumption
     * allows. */
    double rate_spread;
    bool opposite_clocks;
    double bad_rate; /* > 0: process 0's clock runs at exactly this rate (a broken clock) */
    /* A broken assumption: clock_jumps times, a random node's clock jumps forward by a span in
     * [clock_jump_min_us, clock_jump_max_us] (an NTP step, a VM resumed): its keys expire that
     * much early in true time. */
    unsigned clock_jumps;
    uint64_t clock_jump_min_us, clock_jump_max_us;

    /* The contender at the worst moment: with chance snipe_prob, a process about to acquire a
     * resource that is held waits until a quorum of the nodes will have let the holder's key
     * expire (or lost it), and sends its acquire so that it lands just then. The simulation
     * knows the nodes' clocks, so this is an adversarial schedule, not something a client can
     * do. */
    double snipe_prob;
    /* With chance round_pause_prob a process is paused right after it sent an acquire, for 1 ms
     * up to 1 ms less than the node timeout (preempted between its writes and its reads): the
     * replies wait, and the round is decided late but still won. */
    double round_pause_prob;

    /* Network, per message. */
    uint64_t delay_min_us, delay_max_us;
    double stall_prob; /* a TCP retransmission: delay + stall, later messages wait behind it */
    uint64_t stall_max_us;
    double drop_prob; /* lost for good */
    /* Like the real node (lib/net/node.c): when a request times out and the node owes replies and
     * has been silent for 3 timeouts, counted from the later of its last reply (a late one to a
     * request that timed out counts too) and the moment it started to owe one, the process drops
     * the connection and reconnects. What it already wrote still reaches the node on the old
     * connection (TCP delivers it after close), with no order against the new connection. */
    bool drop_silent_conns;

    /* Nodes 0..dead_nodes-1 are down for the whole run (the processes fail them fast). */
    unsigned dead_nodes;

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
    /* The control of the check after a restart: the io never tells the client that a node came
     * back as a new server (io.h's on_node_changed), as before issue 36. Every restart gives
     * the node a new run_id otherwise, with or without its data. */
    bool no_recheck;

    /* The negative control of the "no gap" property: read each release's status as the library
     * before issue 17 gave it (0 whenever a quorum answered, whatever it deleted). The library
     * is unchanged; only the simulated caller's reading of the outcome is. */
    bool old_release_status;

    bool trace; /* print every event to stderr */

    /* Fencing (sim_fence.h): every acquire takes a fence, and holders write to a fenced store. */
    bool fencing;
    unsigned fence_commit; /* redlock_lock_opts.fence_commit (0: the quorum) */

    /* The kinds of holds (with wait_ms): an acquire waits (through the queues, the grants and
     * the notifications) with chance wait_prob (0: every acquire waits); one of one resource is
     * fenced with chance fenced_prob, and with chance set_prob an acquire takes a set of 2 up to
     * set_max resources (redlock_acquire_multi; never fenced). */
    double wait_prob, fenced_prob, set_prob;
    unsigned set_max;
    /* With chance vanish_prob a process vanishes once in the run (a machine gone): it stops
     * handling anything, and its subscriber connections stay half-open, counted by the servers
     * (PUBSUB NUMSUB) while nothing reaches it. Closed after the run. */
    double vanish_prob;
    /* Subscriber connections (sim_pubsub.c): a message is delayed as any, and with chance
     * sub_stall_prob up to sub_stall_max_us more (a lagging subscriber); sub_drops times a run a
     * random one drops and reconnects, missing what was published meanwhile. */
    double sub_stall_prob;
    uint64_t sub_stall_max_us;
    unsigned sub_drops;
    /* Nodes (bit i: node i) whose ACL refuses PUBSUB NUMSUB and PUBLISH. */
    unsigned refuse_pubsub_mask;
    /* > 0: node alias_node - 1 is the same server as node 0 listed again (its command
     * connection is refused as a twin, as lib/net/node.c does; its subscriber listens on node 0).
     */
    unsigned alias_node;
    /* Nodes (bit i: node i) that are Redis Clusters (sim_cluster.c): two shards of a master and a
     * replica each, slots moving between them (migrations times a run), failovers that keep only
     * what the replica had (failovers at random, and with chance failover_prob right after a
     * write that is not replicated yet), and the URL's wait_replicas. Resources are then named
     * with a hash tag. */
    unsigned cluster_mask;
    unsigned wait_replicas;
    unsigned failovers, migrations;
    double failover_prob;
    /* Broken variants, the controls (sim.h's properties must catch each): SIM_BREAK_* flags of
     * the scripts' models (sim_scripts.h); grant_per_subscriber: a grant counts for the node
     * whose subscriber heard it (the io rewrites its tag); grant_without_wait: a cluster node
     * with wait_replicas takes grant records (as lib/net/cluster.c before the grants issue). */
    unsigned breaks;
    bool grant_per_subscriber, grant_without_wait;
    /* > 0: the last node is hostile (sim_hostile.c): this many forged messages a run, of every
     * kind, on the channels it carries (grants with any node's tag, full ttl or not and any
     * counter, from the grant records it stores; wake-ups on waiters', queues' and keys'
     * channels). */
    unsigned forges;
    /* Liveness (the "turns" scenario): every waiter of a process that does not vanish is served
     * within sim_wait_bound_us (sim.h) of its call. */
    bool check_liveness;
} sim_config;

/* The longest a waiter of cfg's world may wait when every holder releases (test/sim/README.md):
 * each other process may hold once before it, for up to its work (1.5 ttl) and a release round,
 * each handoff may take the fallback retry (retry delay + jitter) and two rounds, and each of
 * the vanished processes may hold the queue for its place's deadline (ops.c's place ttl) and a
 * handoff. */
uint64_t sim_wait_bound_us(const sim_config *cfg, unsigned vanished);

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

    /* Auto-extension. promise: the first broken promise of its API (a lost callback twice,
     * late, after a release or missing; an extension sent after a release or a loss; a cap not
     * kept or not reported). */
    bool promise_broken;
    char promise[512];
    unsigned auto_holds;      /* auto-extended holds handed out */
    unsigned auto_long_holds; /* ... worked for over a ttl of true time */
    unsigned auto_extensions; /* extensions they won (redlock_lock_extensions at their end) */
    unsigned auto_planned;    /* ... ended by the holder at its planned end, of which: */
    unsigned auto_stopped;    /*   redlock_auto_extend_stop, then released before the deadline */
    unsigned auto_freed;      /*   freed without a release (also from a lost callback) */
    unsigned lost;            /* lost callbacks, and of them: */
    unsigned lost_limit;      /*   REDLOCK_ELIMIT (the cap) */
    unsigned lost_canceled;   /*   REDLOCK_ECANCELED (the holder closed its client) */
    unsigned lost_lost, lost_noquorum, lost_expired; /* REDLOCK_ELOST, _ENOQUORUM, _EEXPIRED */
    unsigned release_races; /* releases made while an extension of the lock was on the wire */
    unsigned conn_drops;    /* silent connections dropped (drop_silent_conns) */
    unsigned clock_jumps;   /* node clocks that jumped (clock_jumps) */
    unsigned snipes;        /* acquires timed to land as the holder's keys expire */

    /* Holds a quorum of nodes forgot while they were worked (a moment at which a quorum was up
     * without the token: restarts without data), and of them those the library reported lost
     * (the lost callback; a plain hold read as not held) before its holder ended it. From the
     * first such moment (the restart that gave another holder a quorum) to the report, in true
     * time: the total and the longest; and the time worked after it, over every forgotten
     * hold. */
    unsigned forgotten, forgotten_reported;
    uint64_t report_us_total, report_us_max, unaware_us_total;
    /* ... reported within a reconnection attempt and one round of that moment: at most the
     * retry delay, twice the network's delay and the node timeout */
    unsigned reported_in_time;

    /* No hold reported without a gap. gap: the first release (status 0) or won extend whose
     * hold had a moment where another holder could have been granted. */
    bool gap_found;
    char gap[512];
    unsigned gap_checks;      /* releases with status 0 and won extends checked */
    unsigned gap_releases;    /* ... releases among them that hid a gap */
    unsigned gap_extends;     /* ... won extends among them that hid a gap */
    unsigned releases_lapsed; /* releases the library completed with REDLOCK_ELOST */

    /* Fencing (sim_fence.h): fences strictly increase in the true-time order of grants, and the
     * fenced store never accepts a stale write. */
    bool fence_broken;
    char fence_what[512];
    sim_fence_stats fence;

    /* The grants' properties. unquorate: a lock handed out while no quorum of the nodes held
     * its token (a gap at the moment of the grant: counted in gap_found, gap_grants). dishonest:
     * a node whose release deleted every key of the hold voted other than yes (the release's
     * status must not depend on pubsub); on a cluster node during a slot migration such a
     * release is counted apart (migration_release_errors), not a violation. overstay: a grant to
     * a process that had vanished kept the key past that waiter's place deadline on the node. */
    unsigned gap_grants;
    bool dishonest;
    char dishonest_what[512];
    unsigned dishonest_releases, migration_release_errors;
    bool overstay;
    char overstay_what[512];
    unsigned overstays;
    /* Liveness (check_liveness): a waiter not served, or served after sim_wait_bound_us; and
     * turns: a waiter served while one that began to wait before it (a smaller place) was in
     * the queues of a quorum of the nodes (out of turn). */
    bool starved;
    char starved_what[512];
    unsigned served;
    uint64_t wait_max_us;
    unsigned wait_bound_permille; /* the longest wait against its bound, in thousandths */
    bool out_of_turn;
    char out_of_turn_what[512];
    unsigned turn_checks;

    /* What the run exercised (the coverage line). */
    unsigned grants;            /* locks won by grants (redlock_stats.acquires_granted) */
    unsigned queued_waits;      /* waiters' attempts that queued (answered with a wait) */
    unsigned notes_lost;        /* notifications published to a subscriber that never got them */
    unsigned half_open;         /* ... of them to a half-open subscriber (a vanished process) */
    unsigned multi_holds;       /* holds of a set */
    unsigned fenced_holds;      /* fenced holds */
    unsigned cluster_redirects; /* MOVED and ASK followed */
    unsigned replica_waits;     /* yes votes that waited for a replica's ack (WAIT) */
    unsigned vanished;          /* processes that vanished */
    unsigned failovers, migrations;
    /* The hostile node's forgeries (cfg.forges), by kind. */
    unsigned forged_grants, forged_wakes, forged_queue, forged_key, forged_votes;
    uint64_t requests; /* requests the processes sent: their rounds, a request per node */
} sim_result;

/* The named scenarios the tests use; seed is folded into each. "safe": every assumption holds,
 * with random delays, stalls, drops, partitions, pauses and restarts that keep data, on 3 or 5
 * nodes; contenders timed to land as the keys expire, processes paused with an acquire on the
 * wire, and in a third of the seeds clocks at opposite edges of the allowance and a fast
 * network. "slow-clock": process 0's clock runs 30% slow. "amnesia": nodes restart without
 * their data. "clock-jump": node clocks jump forward by 30-80% of the ttl, four times a run.
 * "calm": no faults at all. "reconnect": silent connections are dropped and re-made. The worlds
 * of waiting holds (sim_world.c: "grants", "grants-alias", "cluster", "turns") mix waiting,
 * fenced and set holds with subscribers, vanishing processes and cluster nodes.
 * Each name with "-auto" appended ("safe-auto", ...) is the same world with auto-extended holds
 * (all of them in "slow-clock-auto" and "amnesia-auto", most in the others), running longer.
 * Returns false for an unknown name. */
bool sim_config_scenario(sim_config *cfg, const char *name, uint64_t seed);

/* Run one simulation. Returns 0, or -1 if the run could not be set up (out of memory). */
int sim_run(const sim_config *cfg, sim_result *result);

#endif
