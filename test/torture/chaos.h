/* SPDX-License-Identifier: MIT */
/* chaos.h - the torture's fault schedule on the five lock nodes: kills, pauses and restarts of
 * the redis-servers, and faults of the loopback proxy in front of each (proxy.h) that the
 * workers connect through: a blackhole, a one-way delay above the node timeout, a reset of every
 * connection, refused connections. Never more than a minority of the nodes is faulty at once.
 *
 * Every choice (when, which node, which fault, how long a delay) is drawn from the seed with
 * rand_r, so a seed repeats the same schedule of choices; the timings (and so the
 * time-dependent choices, such as whether a killed node may come back yet) vary run to run.
 *
 * Not thread-safe, and it must run on the thread that started the servers (fixture.h). The
 * proxy controls it calls are thread-safe and return once applied. */
#ifndef REDLOCK_TEST_TORTURE_CHAOS_H
#define REDLOCK_TEST_TORTURE_CHAOS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "fixture.h"
#include "proxy.h"

#define CHAOS_NODES 5
#define CHAOS_MAX_FAULTY 2 /* a minority of CHAOS_NODES */
#define CHAOS_MAX_FORGOT 4096

/* The fault kinds, drawn in turn from a shuffled bag of all of them, so every run of at least
 * CHAOS_FAULT_KINDS injections has each kind. */
typedef enum {
    CHAOS_KILL,      /* SIGKILL the server (data lost); restarted no sooner than ttl later */
    CHAOS_PAUSE,     /* SIGSTOP the server (data kept); SIGCONT later */
    CHAOS_BLACKHOLE, /* the proxy forwards nothing either way for a while (PROXY_BLACKHOLE) */
    CHAOS_DELAY,     /* the proxy delays each direction by more than the node timeout */
    CHAOS_RESET,     /* the proxy resets every connection (RST) once */
    CHAOS_REFUSE,    /* the proxy resets every connection and refuses new ones for a while */
    CHAOS_FAULT_KINDS
} chaos_fault;

/* A node is up, down in one of the fault states (until the chaos heals it), or recovering: back,
 * but it still counts as faulty for a cool-down, because the clients may not have reconnected to
 * it yet (see chaos_init). */
typedef enum {
    CHAOS_UP,
    CHAOS_KILLED,
    CHAOS_PAUSED,
    CHAOS_BLACKHOLED,
    CHAOS_DELAYED,
    CHAOS_REFUSED,
    CHAOS_RECOVERING
} chaos_node_state;

typedef struct chaos {
    fixture_cluster *nodes;      /* the lock servers, started */
    proxy *proxies[CHAOS_NODES]; /* proxies[i] forwards to nodes->servers[i] */
    unsigned seed;               /* rand_r state: every choice comes from it */
    uint64_t ttl_us;             /* lock ttl: a killed node stays down this long + slack */
    uint64_t node_timeout_us;    /* the clients' per-request deadline */
    uint64_t recovery_us;        /* base cool-down of a node that came back */
    uint64_t connect_timeout_us; /* the clients' connect + handshake deadline */
    bool verbose;                /* print every event on stderr */
    bool unsafe;                 /* negative control: wipe a majority instead */
    chaos_node_state state[CHAOS_NODES];
    uint64_t since_us[CHAOS_NODES];    /* when the node went down, or came back */
    uint64_t cooldown_us[CHAOS_NODES]; /* CHAOS_RECOVERING: faulty this long after since_us */
    unsigned delay_ms[CHAOS_NODES];    /* CHAOS_DELAYED: the one-way delay set */
    chaos_fault bag[CHAOS_FAULT_KINDS];
    unsigned bag_left;
    unsigned long injected[CHAOS_FAULT_KINDS]; /* faults made, by kind */
    unsigned long restarts, resumes, proxy_heals, wipes;
    unsigned long errors; /* fixture calls that failed */
    /* When a node lost its data (a kill, a wipe), on the redlock_now_us clock: the fences'
     * checker (fence_check.h) excuses a fence that did not grow across one. */
    uint64_t forgot_us[CHAOS_MAX_FORGOT];
    unsigned n_forgot;
    bool forgot_overflow; /* more than CHAOS_MAX_FORGOT: treat every moment as one */
} chaos;

/* Set ch up to act on nodes (started, CHAOS_NODES servers) through proxies (one per node, in
 * the same order; borrowed, the caller stops them after the last chaos call). The cool-down of
 * a node that came back covers the clients' longest reconnect backoff (reconnect_max_ms + 50%
 * jitter), plus, after a delay, the data still queued in the proxy (2 x the delay) and, after a
 * blackhole, a connect whose handshake it swallowed (connect_timeout_ms). */
void chaos_init(chaos *ch, fixture_cluster *nodes, proxy *const *proxies, unsigned seed,
                uint64_t ttl_ms, uint64_t node_timeout_ms, uint64_t reconnect_max_ms,
                uint64_t connect_timeout_ms, bool verbose, bool unsafe);

/* One chaos event: make a fault on a healthy node while fewer than CHAOS_MAX_FAULTY are faulty
 * (down or recovering), else (or at random) heal one, if it may come back yet. With unsafe,
 * FLUSHALL a majority of the nodes instead. */
void chaos_step(chaos *ch);

/* The wait before the next event: uniform in [50, 400] ms, from the seed. */
uint64_t chaos_gap_us(chaos *ch);

/* Heal every node: restart killed ones (waiting out their ttl), resume paused ones, set every
 * proxy back to PROXY_PASS with no delay. */
void chaos_heal_all(chaos *ch);

/* How many faults the chaos made, all kinds together. */
unsigned long chaos_faults(const chaos *ch);

/* Print the counts of every event kind as one "# chaos: ..." line. */
void chaos_print_summary(const chaos *ch, FILE *out);

/* "kill", "pause", ... */
const char *chaos_fault_name(chaos_fault kind);

#endif /* REDLOCK_TEST_TORTURE_CHAOS_H */
