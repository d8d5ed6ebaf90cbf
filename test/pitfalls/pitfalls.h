/* SPDX-License-Identifier: MIT */
/* pitfalls.h - what the pitfall tests (docs/pitfalls.md) share: a history of who held a lock
 * from when to when and its overlap check, lock holders in child processes (to kill or stop them
 * at a chosen point), the single-instance lock that several legacy scenarios build on, and
 * blocking helpers on the fixture's servers.
 *
 * Every time here is true time: redlock_now_us(), CLOCK_MONOTONIC, the same clock in every
 * process on the host, so a child's times and the parent's compare directly. A legacy lock that
 * reads a wall clock (the GETSET lock) does so through its own code and offset; the history never
 * does. */
#ifndef REDLOCK_TEST_PITFALLS_H
#define REDLOCK_TEST_PITFALLS_H

#include "harness.h"

#include <hiredis/hiredis.h>
#include <sys/types.h>

/* The ttl of a lock whose expiry is not the subject: it must outlast whatever a loaded machine
 * does while the test runs, and nobody ever waits for it to run out. */
#define PF_LONG_TTL_MS 20000

/* ---- the history and its checker --------------------------------------------------------- */

#define PF_MAX_HOLDS 16
#define PF_NAME_MAX 32

/* One hold: the interval of true time during which a holder worked under the lock, believing
 * it held it: from the moment its lock call returned to the moment its last protected action
 * ended. A legacy holder believes it holds until it unlocks. A libredlock holder stops at its
 * deadline, its lost callback or its release, whichever comes first (it checks
 * redlock_lock_is_held before going on), unless it was paused between that check and its write
 * (pitfall 6): then its hold ends with the write. */
typedef struct pf_hold {
    char who[PF_NAME_MAX];
    uint64_t from_us, to_us;
} pf_hold;

typedef struct pf_history {
    const char *title; /* printed with the report */
    uint64_t t0_us;    /* times are printed relative to it */
    unsigned n;
    pf_hold holds[PF_MAX_HOLDS];
} pf_history;

/* Start an empty history; t0 is now. */
void pf_history_init(pf_history *h, const char *title);
/* Record that who held over [from_us, to_us) (to_us >= from_us; fails the test otherwise, or
 * when the history is full). */
void pf_history_add(pf_history *h, const char *who, uint64_t from_us, uint64_t to_us);
/* Whether two holds overlap: they share an instant (half-open intervals: a hold that ends
 * exactly when another begins does not overlap it). */
bool pf_holds_overlap(const pf_hold *a, const pf_hold *b);
/* The number of pairs of overlapping holds in h. */
unsigned pf_overlaps(const pf_history *h);
/* Whether the holds named a and b overlap (fails the test if either is not in h). */
bool pf_overlap_between(const pf_history *h, const char *a, const char *b);
/* Print h as TAP comments on stdout: each hold relative to t0, then every overlapping pair.
 * Returns pf_overlaps(h). */
unsigned pf_report(const pf_history *h);

/* ---- holders in child processes ------------------------------------------------------------ */

/* The parent's side of a child process. The child runs a function of the test with two pipes:
 * it reports to the parent (fixed-size messages) and waits for the parent's "go". */
typedef struct pf_child {
    pid_t pid;   /* 0 once reaped */
    int from_fd; /* the child's reports */
    int go_fd;   /* the parent's "go" */
} pf_child;

/* The child's function: no cmocka inside (a failed check would unwind into the parent's copy of
 * the stack); every problem is a nonzero exit code. report_fd and go_fd are its pipe ends. */
typedef int (*pf_child_fn)(int report_fd, int go_fd, void *arg);

/* Fork a child that runs fn(arg) and _exits with its return value. The child is killed by the
 * suite's teardown if a failed check leaves it behind. */
void pf_child_start(pf_child *ch, pf_child_fn fn, void *arg);
/* Parent: read one report of len bytes, waiting at most H_WAIT_MS. Returns false if none came. */
bool pf_child_read(pf_child *ch, void *msg, size_t len);
/* Parent: let the child go on past its pf_await_go. */
void pf_child_go(pf_child *ch);
/* Parent: SIGSTOP the child and wait until it has stopped (the process pause of the critique);
 * SIGCONT it again. */
void pf_child_stop(pf_child *ch);
void pf_child_cont(pf_child *ch);
/* Parent: SIGKILL the child and reap it (a holder that crashes). */
void pf_child_kill(pf_child *ch);
/* Parent: wait (at most H_WAIT_MS, else kill it) for the child to exit; returns its exit code,
 * or 128 + the signal that ended it. Closes the pipes. */
int pf_child_wait(pf_child *ch);

/* Child: send one report / wait for the parent's "go". Return false on a broken pipe. */
bool pf_tell(int report_fd, const void *msg, size_t len);
bool pf_await_go(int go_fd);

/* cmocka teardown for every pitfall test: kills the children a failed check left behind, then
 * h_teardown (stops the servers). */
int pf_teardown(void **state);
#define PF_TEST(f) cmocka_unit_test_teardown(f, pf_teardown)

/* ---- blocking helpers on the servers ------------------------------------------------------- */

/* A blocking connection to server i of c (fixture_connect); fails the test if it cannot
 * connect. Free with redisFree. */
redisContext *pf_connect(fixture_cluster *c, unsigned i);
/* Run a command on ctx (the parent's: it uses cmocka); fails the test when there is no reply
 * (connection broken, timeout). A Redis error is a reply. The caller frees it. */
redisReply *pf_cmd(redisContext *ctx, const char *fmt, ...);
/* Whether key exists on server i of c. */
bool pf_exists(fixture_cluster *c, unsigned i, const char *key);
/* Wait until key is gone from server i of c (expired), at most timeout_ms; true if it is. */
bool pf_wait_gone(fixture_cluster *c, unsigned i, const char *key, uint64_t timeout_ms);
/* Sleep ms milliseconds of true time (the blocking scenarios have no loop to run). */
void pf_sleep_ms(uint64_t ms);

/* ---- the single-instance lock, done as redis.io says ---------------------------------------- */

/* These three use no cmocka, so child processes may call them. */

/* SET key token NX PX ttl_ms: a random token per holder and the expiry in the same command.
 * Returns true when taken (false also when the server did not answer). The right way to lock one
 * Redis server, and the base of the legacy locks of the failover, no-renewal and pause scenarios:
 * what breaks there is not this code. */
bool pf_token_lock(redisContext *ctx, const char *key, const char *token, uint64_t ttl_ms);
/* Release it: delete the key only if it still holds token (one Lua script, so nothing slips
 * between the comparison and the delete). Returns the number of keys deleted (0: not ours), or
 * -1 when the server did not answer. */
long long pf_token_unlock(redisContext *ctx, const char *key, const char *token);
/* A random token (32 hex digits, from uv_random) into buf (at least 33 bytes). */
bool pf_random_token(char *buf, size_t len);
/* Parent: pf_token_lock, tried every 20 ms until taken, at most wait_ms (a waiter that polls, as
 * single-server locks do). Returns true when taken. */
bool pf_token_lock_wait(redisContext *ctx, const char *key, const char *token, uint64_t ttl_ms,
                        uint64_t wait_ms);
/* This process's wall clock (CLOCK_REALTIME) in ms, moved by skew_ms: how the timestamp lock
 * (pitfall 2) models a machine whose clock is off. */
long long pf_wall_ms(long long skew_ms);

/* ---- libredlock on the loop ---------------------------------------------------------------- */

/* An acquire in flight, for scenarios with several at once: h_record_cb into rec, then
 * (*done)++ so one counter tells that any of them completed. */
typedef struct pf_pending {
    h_record rec;
    int *done;
} pf_pending;
/* Start an acquire of resource (ttl_ms, opts may be NULL); fails the test if the call fails. */
void pf_acquire_start(redlock_client *c, const char *resource, uint64_t ttl_ms,
                      const redlock_lock_opts *opts, pf_pending *p, int *done);

/* A second client on the env's servers (h_test_options): another process, as far as the lock
 * can tell. Close it with h_close_client before h_env_stop. */
redlock_client *pf_client(h_env *env);

/* The libredlock side of pitfalls 2 and 3, one scenario: holder A (ttl_ms, no auto-extension)
 * is slow and its validity runs out; B, waiting, takes the lock (PF_LONG_TTL_MS), but not before
 * A's deadline; A's slow step ends, it sees the lock is no longer held and releases as the legacy
 * code unlocks: REDLOCK_ELOST, no node deleted anything, B's key is on every node; C then tries and
 * is refused (REDLOCK_EBUSY) while B works; B releases (0, every node). Checks all of it and
 * that no holds overlap (A's hold ends at its deadline: it checks before going on), prints the
 * history under title. Uses three clients of its own on env. */
void pf_redlock_overrun(h_env *env, const char *resource, uint64_t ttl_ms, const char *title);

#endif
