/* SPDX-License-Identifier: MIT */
/* redlock/sim.h - the test kit: your real redlock_client against a simulated fleet of Redis
 * masters, in virtual time, from one seed (libredlock-sim; docs/testing.md).
 *
 * A fleet (redlock_sim) holds N simulated nodes, the network between them and the clients made
 * on it, and one clock. Nothing happens until the kit runs the fleet (redlock_sim_run,
 * redlock_sim_run_for, redlock_sim_step): every reply, timeout and callback of the clients,
 * and every timer of yours (redlock_sim_timer), comes from inside those calls, in an order
 * decided by the seed. The same seed and the same calls give the same run, and the same trace
 * byte for byte.
 *
 * A client's subscriber connections work as against real servers: SUBSCRIBE and UNSUBSCRIBE
 * travel to the nodes, a release's PUBLISH reaches the waiters after a network delay, so a
 * waiter (wait_ms, the queue) is woken and granted the lock as in production; a node's kill
 * drops them (they reconnect), a link fault cuts them too.
 *
 * Everything here is single-threaded: a fleet and its clients belong to the thread that made the
 * fleet. A client made on a fleet takes no cancel tokens (no other thread can wake it) and has no
 * loop (redlock_client_loop returns NULL). */
#ifndef REDLOCK_SIM_H
#define REDLOCK_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "redlock.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most nodes and clients one fleet has. */
#define REDLOCK_SIM_MAX_NODES 9
#define REDLOCK_SIM_MAX_CLIENTS 16

typedef struct redlock_sim redlock_sim;

/* A fleet's settings, read by redlock_sim_new; defaults: redlock_sim_options_init.
 *
 * Each message (a request to a node, or its reply) takes a delay drawn from the seed in
 * [delay_min_us, delay_max_us], and keeps its order behind earlier ones on its connection
 * (TCP); with chance drop_ppm in a million it is lost. */
typedef struct redlock_sim_options {
    size_t size;           /* set by redlock_sim_options_init; do not change */
    uint64_t seed;         /* decides every delay, loss and token; default 1 */
    uint32_t n_nodes;      /* 1..REDLOCK_SIM_MAX_NODES; default 5 */
    uint32_t drop_ppm;     /* a message's chance to be lost, per million; default 0 */
    uint64_t delay_min_us; /* default 200 */
    uint64_t delay_max_us; /* default 2000 */
    /* New members are appended here. */
} redlock_sim_options;

/* Fill opts with the defaults and record its size (a macro: always call it first). */
REDLOCK_EXTERN void redlock_sim_options_init_sized(redlock_sim_options *opts, size_t size);
#define redlock_sim_options_init(opts)                                                             \
    redlock_sim_options_init_sized((opts), sizeof(redlock_sim_options))

/* A new fleet in *out, its nodes up and empty, its clock at 0. opts: NULL for the defaults; read
 * only during the call. Returns 0, REDLOCK_ENOMEM, or REDLOCK_EINVAL (opts not set up by
 * redlock_sim_options_init, n_nodes out of range, delay_min_us above delay_max_us, or a kit of
 * another version than the libredlock it runs with). */
REDLOCK_EXTERN int redlock_sim_new(const redlock_sim_options *opts, redlock_sim **out);

/* Close every client still open, releasing nothing (redlock_client_close_ex with
 * REDLOCK_CLOSE_FAST: pending operations end with REDLOCK_ECANCELED, their callbacks called
 * from here), run the fleet until they are closed, and free it. Locks and
 * clients of the fleet are invalid afterwards. NULL is ignored. */
REDLOCK_EXTERN void redlock_sim_free(redlock_sim *sim);

/* A real client on every node of the fleet, in order, in *out; its index (0, 1, ... in the order
 * made) in *index if index is not NULL. opts as redlock_client_new takes them (NULL: the
 * defaults); node_timeout_ms 0 (adaptive) is a fixed 1 s here. Use it with the whole of
 * redlock.h; close it with redlock_client_close (its close callback comes from a run) or leave
 * it to redlock_sim_free. Returns 0, REDLOCK_ENOMEM, REDLOCK_EINVAL (REDLOCK_SIM_MAX_CLIENTS
 * made already), or redlock_client_new's errors. */
REDLOCK_EXTERN int redlock_sim_client_new(redlock_sim *sim, const redlock_options *opts,
                                          redlock_client **out, unsigned *index);

/* ---- time ------------------------------------------------------------------------------------ */

/* The fleet's true time, microseconds since it was made. Every clock of the fleet (the clients',
 * the nodes') runs at this rate; a node's reads ahead of it by what redlock_sim_clock_jump
 * moved it. */
REDLOCK_EXTERN uint64_t redlock_sim_now_us(const redlock_sim *sim);

/* Client client's clock, microseconds: the one its locks' deadlines are on
 * (redlock_lock_deadline_us), to pass to redlock_lock_is_held and to compare with deadlines
 * where your code would read redlock_now_us(). 0 for a client out of range. */
REDLOCK_EXTERN uint64_t redlock_sim_client_now_us(const redlock_sim *sim, unsigned client);

/* Handle the next event (a message landing, a deadline, a timer, a fault): 1, or 0 if there is
 * none. */
REDLOCK_EXTERN int redlock_sim_step(redlock_sim *sim);

/* Handle events until none is left, or until max_events were handled (0: no limit). Returns
 * the number handled. A client whose auto-extension runs, or that retries connecting to a node
 * that is down, never leaves the fleet idle: give it a limit, or use redlock_sim_run_for. */
REDLOCK_EXTERN uint64_t redlock_sim_run(redlock_sim *sim, uint64_t max_events);

/* Handle every event due within duration_us from now, then set the clock to now + duration_us.
 * Returns the number handled. */
REDLOCK_EXTERN uint64_t redlock_sim_run_for(redlock_sim *sim, uint64_t duration_us);

/* Call fn(sim, data) once client's clock has run delay_us more, from inside a run: your own
 * work's steps (write after 30 ms, release after 200 ms). A paused client's timers wait for the
 * pause to end. Returns 0, REDLOCK_EINVAL (no such client) or REDLOCK_ENOMEM. */
typedef void (*redlock_sim_timer_fn)(redlock_sim *sim, void *data);
REDLOCK_EXTERN int redlock_sim_timer(redlock_sim *sim, unsigned client, uint64_t delay_us,
                                     redlock_sim_timer_fn fn, void *data);

/* The next number of the fleet's seeded generator: draw your own random faults with it, so that
 * the seed decides them too. */
REDLOCK_EXTERN uint64_t redlock_sim_random(redlock_sim *sim);

/* ---- faults ---------------------------------------------------------------------------------- *
 * Each takes effect now (call it between runs, or from a timer or a callback) and returns 0, or
 * REDLOCK_EINVAL for a node or client out of range. */

/* Node node runs nothing for duration_us (a stopped process, a stall): what reaches it waits,
 * then runs in order; its keys keep expiring on its clock. */
REDLOCK_EXTERN int redlock_sim_node_pause(redlock_sim *sim, unsigned node, uint64_t duration_us);

/* Node node crashes: every connection to it dies (each client notices after a network delay,
 * fails what it waited for, and retries connecting every few milliseconds); it answers nothing
 * until redlock_sim_node_restart. */
REDLOCK_EXTERN int redlock_sim_node_kill(redlock_sim *sim, unsigned node);

/* Node node comes back (after redlock_sim_node_kill; else it is killed first) as a new server
 * (a new run id, which the clients see when they reconnect), with its keys if keep_data (a
 * persisted node) or empty. */
REDLOCK_EXTERN int redlock_sim_node_restart(redlock_sim *sim, unsigned node, bool keep_data);

/* Node node's clock jumps forward by jump_us (an NTP step, a VM resumed): its keys expire that
 * much early in true time. */
REDLOCK_EXTERN int redlock_sim_clock_jump(redlock_sim *sim, unsigned node, uint64_t jump_us);

/* Node node's clock runs drift_ppm parts per million fast (> 0) or slow (< 0) from now on, against
 * true time (0: true again): its keys expire on it, that much early or late in true time, as
 * with a clock that drifts or a slewing NTP. The library allows for a drift of drift_factor
 * (redlock_options); a larger one may cost exclusion, which the verdict then shows. Returns
 * REDLOCK_EINVAL also for |drift_ppm| of 500,000 or more. */
REDLOCK_EXTERN int redlock_sim_clock_drift(redlock_sim *sim, unsigned node, int32_t drift_ppm);

/* Node node turns hostile (a compromised or broken server): it still runs every command, then
 * replaces each reply, with chance lie_ppm in a million, by a forgery drawn from the seed (an
 * error, nil, any integer, status or bulk string, a token it holds, an array of them), and, if
 * forge_every_us > 0, publishes a forged message every forge_every_us on average on a channel
 * its subscribers carry (grants naming other nodes with any fence counter, wake-ups, queue and
 * key messages). It never forges a yes: the client then gets its honest answer (one node that
 * says yes to everyone breaks every quorum: two majorities may share just it). A hostile node
 * costs its own vote, never another's: the verdict stays 0. lie_ppm 0 and forge_every_us 0 end
 * it. Returns REDLOCK_EINVAL also for lie_ppm above a million. */
REDLOCK_EXTERN int redlock_sim_node_hostile(redlock_sim *sim, unsigned node, uint32_t lie_ppm,
                                            uint64_t forge_every_us);

/* The directions of a link fault. */
#define REDLOCK_SIM_TO_NODE 1u   /* requests */
#define REDLOCK_SIM_TO_CLIENT 2u /* replies */

/* For duration_us, the messages between client and node in the directions given
 * (REDLOCK_SIM_TO_NODE, REDLOCK_SIM_TO_CLIENT, or both: a partition) are lost (extra_delay_us
 * 0) or arrive extra_delay_us late, still in order; on the client's subscriber connection to
 * node too (its SUBSCRIBEs, the messages published to it). */
REDLOCK_EXTERN int redlock_sim_link_fault(redlock_sim *sim, unsigned client, unsigned node,
                                          unsigned directions, uint64_t duration_us,
                                          uint64_t extra_delay_us);

/* Client client's process runs nothing for duration_us (a GC pause, SIGSTOP): time passes,
 * replies and deadlines wait, and it handles them, in order, when the pause ends. */
REDLOCK_EXTERN int redlock_sim_client_pause(redlock_sim *sim, unsigned client,
                                            uint64_t duration_us);

/* ---- the trace ------------------------------------------------------------------------------- */

/* Every event of the run so far as text, one line each ("12.345678 c0 -> n2 ACQUIRE res ..."):
 * what each node received and answered, what each client got, each fault. Valid until the next
 * call on sim; *len (if not NULL) gets its length. */
REDLOCK_EXTERN const char *redlock_sim_trace(const redlock_sim *sim, size_t *len);

/* ---- checking your holds --------------------------------------------------------------------- *
 * Report what your code did; redlock_sim_verdict says whether it could have been safe. */

/* Your code, on client, was handed lock (the acquire callback, or your using function began).
 * Returns a hold number for redlock_sim_hold_use, or -1 without memory (the verdict then says
 * so). The resource is read from lock now. */
REDLOCK_EXTERN int redlock_sim_hold_begin(redlock_sim *sim, unsigned client,
                                          const redlock_lock *lock);

/* Your code acts on hold's lock now: it writes, or does a step of the work the lock protects.
 * A hold lasts from its begin to its last use; two holds of one resource must not overlap. Code
 * that checks the lock before it acts (redlock_lock_is_held on redlock_sim_client_now_us) never
 * uses a hold past its deadline; code that does not, after a pause say, overlaps the next
 * holder's. */
REDLOCK_EXTERN void redlock_sim_hold_use(redlock_sim *sim, int hold);

/* Your store accepted a write to resource (len bytes) made with fence: call it from the write
 * path of your store's model, after its own check. */
REDLOCK_EXTERN void redlock_sim_store_accepted(redlock_sim *sim, const char *resource, size_t len,
                                               uint64_t fence);

/* The verdict over what was reported so far: 0 if it was safe, or 1 with the first violation
 * described in what (what_len bytes, may be 0): two holds of one resource that overlap (two
 * holders acting at once), a hold used after a moment at which a quorum of the nodes was up
 * without its token (a lost lock used: the library says so, redlock_lock_is_held turns false,
 * once it knows; for a lock of several resources, its first one is checked), or a store that
 * accepted a write with a fence below one it had accepted (a stale holder's write got through).
 */
REDLOCK_EXTERN int redlock_sim_verdict(redlock_sim *sim, char *what, size_t what_len);

/* ---- many seeds ------------------------------------------------------------------------------ */

/* Your scenario: make clients on sim, run it, report holds; return 0, or non-zero for a failure
 * of your own (the driver then stops as for a violation). */
typedef int (*redlock_sim_scenario_fn)(redlock_sim *sim, void *data);

/* Run scenario on a new fleet for each seed opts->seed, opts->seed + 1, ... (n_seeds of them),
 * checking its verdict after each. The search keeps no trace (redlock_sim_trace gives ""): at the
 * first seed that fails, it runs that seed again with its trace, writes the seed, what failed and
 * the trace to out (if not NULL), and puts the seed in *failed_seed. Returns 0 when every seed
 * passed, 1 at a failing seed, or a negative error (redlock_sim_new's). */
REDLOCK_EXTERN int redlock_sim_explore(const redlock_sim_options *opts, uint64_t n_seeds,
                                       redlock_sim_scenario_fn scenario, void *data, FILE *out,
                                       uint64_t *failed_seed);

/* Run scenario once with opts (its seed), and write its verdict and trace to out (if not NULL):
 * the replay of a seed redlock_sim_explore reported. Returns 0 if it passed, 1 if it failed, or
 * a negative error. */
REDLOCK_EXTERN int redlock_sim_replay(const redlock_sim_options *opts,
                                      redlock_sim_scenario_fn scenario, void *data, FILE *out);

#ifdef __cplusplus
}
#endif

#endif
