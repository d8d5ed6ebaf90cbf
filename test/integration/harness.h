/* SPDX-License-Identifier: MIT */
/* harness.h - what every integration test needs: a loop, a cluster of real redis-server
 * processes, a client on them, callbacks that record what happened, and a way to run the loop
 * until something happened (with a bound, so no test can hang).
 *
 * The rule (test/README.md): a check asserts what the library promises, never that the machine
 * met a deadline. Node timeouts are seconds (H_NODE_TIMEOUT_MS) except on a node the test stops
 * on purpose; "every node did X" waits for the late ones (h_wait_holding, h_drain); an upper
 * bound on elapsed time is the promised time plus H_SLACK_MS. */
#ifndef REDLOCK_TEST_HARNESS_H
#define REDLOCK_TEST_HARNESS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>
#include <uv.h>

#include "fixture.h"
#include "redlock.h"

#define H_MAX_NODES 16

/* The node and connect timeouts of h_test_options: a healthy node on a loaded machine (two CPU
 * hogs, sanitizers, valgrind) always answers well within them. A test whose subject is a
 * deadline stops a node on purpose (fixture_pause) and gives that node alone a short timeout,
 * best with "?timeout_ms=" in its URL (h_urls_with_timeout). */
#define H_NODE_TIMEOUT_MS 5000
#define H_CONNECT_TIMEOUT_MS 5000
/* How long a test waits, at most, for something that must happen soon: a late node's SET, a
 * reconnect, a lost callback. Only a failing test ever waits this long: 10 s, unless the
 * environment's H_WAIT_MS (milliseconds, 1000..600000) says otherwise. test/mutants/run
 * shortens it, because there the broken libraries make tests fail by waiting (every killer
 * passes on the unbroken library with the same value first). */
uint64_t h_wait_ms(void);
#define H_WAIT_MS h_wait_ms()
/* What a loaded machine may add to anything the library does promptly. An upper bound on elapsed
 * time is what the library promises (derived from the configured timeouts and delays) plus this;
 * it still tells "after about one node timeout" from "after the 5 s timeout of a healthy node". */
#define H_SLACK_MS 2500

/* A test in a cmocka table, with h_teardown: use it for every test that starts servers. */
#define H_TEST(f) cmocka_unit_test_teardown(f, h_teardown)

/* Skip the rest of the test (call it from the test function itself: it returns), saying why in
 * a "# SKIP why" line, which test/run counts as a skipped check, never a passed one. (cmocka's
 * own skip() prints "not ok N # SKIP", which meson's TAP reader counts as a failure.) */
#define h_skip(...)                                                                                \
    do {                                                                                           \
        printf("# SKIP ");                                                                         \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
        fflush(stdout);                                                                            \
        return;                                                                                    \
    } while (0)

/* What one callback saw, copied out of the borrowed result. */
typedef struct h_record {
    int calls;
    int status;
    redlock_lock *lock;
    unsigned votes_yes, votes_no, votes_error, votes_timeout, attempts, n_nodes;
    uint64_t elapsed_us;
    uint64_t at_us; /* redlock_now_us() when the callback ran */
    redlock_vote node_vote[H_MAX_NODES];
    uint64_t node_latency_us[H_MAX_NODES];
    char node_error[H_MAX_NODES][160];
    char node_url[H_MAX_NODES][160];
    uint64_t fence;                   /* result->fence */
    uint64_t node_fence[H_MAX_NODES]; /* result->nodes[i].fence */
} h_record;

/* A redlock_cb that fills the h_record passed as data. */
void h_record_cb(redlock_lock *lock, int status, const redlock_result *result, void *data);

typedef struct h_env {
    uv_loop_t loop;
    fixture_cluster cluster;
    redlock_client *client;
    bool closed;
} h_env;

/* Start n servers and a loop. extra_conf may be NULL. Fails the test on error. */
void h_env_start(h_env *env, unsigned n, const char *extra_conf);
/* Close the client (if any) and wait for its close callback, check the loop has nothing left
 * open, stop the servers. */
void h_env_stop(h_env *env);
/* A client on the env's servers with opts (NULL: h_test_options). */
redlock_client *h_client(h_env *env, const redlock_options *opts);
/* redlock_options_init, then the tests' defaults: node and connect timeouts H_NODE_TIMEOUT_MS
 * and H_CONNECT_TIMEOUT_MS, retry_count 0, release_waits_all. */
void h_test_options(redlock_options *opts);
/* cmocka teardown for every test (H_TEST): a failed check longjmps out of the test past its
 * h_env_stop, so this stops whatever servers the test left running (fixture_stop_all) and the
 * next test starts clean. The failed test's client and loop are left as they are, never run or
 * closed again: their pending callbacks point into the test's dead stack frame, and closing the
 * client would call them (ECANCELED) and write there. A failed run may leak them. */
int h_teardown(void **state);
/* Close a client (releasing what it holds) and run the loop until its close callback ran. */
void h_close_client(h_env *env, redlock_client *client);
/* The same with redlock_client_close_ex's flags: REDLOCK_CLOSE_FAST is how a test makes a
 * holder "crash" (nothing released, its keys wait for their ttl). */
void h_close_client_ex(h_env *env, redlock_client *client, unsigned flags);

/* Run the loop until *counter >= target or timeout_ms passed. Returns true if reached. */
bool h_run_until(uv_loop_t *loop, const int *counter, int target, uint64_t timeout_ms);
/* Run the loop until *flag is true or timeout_ms passed. Returns true if it became true. */
bool h_run_until_true(uv_loop_t *loop, const bool *flag, uint64_t timeout_ms);
/* Run the loop for ms milliseconds. */
void h_run_for(uv_loop_t *loop, uint64_t ms);

/* Acquire / release / extend and wait for the callback (bounded), recording into rec. */
int h_acquire(h_env *env, redlock_client *c, const char *resource, uint64_t ttl_ms,
              const redlock_lock_opts *opts, h_record *rec);
int h_release(h_env *env, redlock_lock *lock, h_record *rec);
int h_extend(h_env *env, redlock_lock *lock, uint64_t ttl_ms, unsigned flags, h_record *rec);
/* Release lock, which must complete 0 (else the test fails, showing what the release saw), and
 * free its handle. rec (may be NULL) gets the release's record. */
void h_release_ok(h_env *env, redlock_lock *lock, h_record *rec);
/* One more client on the env's servers, in order (so h_drain works with it), with opts (NULL:
 * h_test_options), ready (h_wait_ready); the test owns it (h_close_client), never the env. */
redlock_client *h_own_client(h_env *env, const redlock_options *opts);
/* Start n servers and the env's client (h_client, ready), and acquire resource for ttl_ms with
 * it, which must succeed: held gets the lock. Returns the client. */
redlock_client *h_start_holding(h_env *env, unsigned n, const char *resource, uint64_t ttl_ms,
                                h_record *held);

/* Wait until every node of the client is connected (bounded). */
void h_wait_connected(h_env *env, redlock_client *c);

/* GET key on server i: returns a malloc'ed copy (NULL if nil or error; *len set). */
char *h_get(h_env *env, unsigned i, const void *key, size_t key_len, size_t *len);
/* PTTL key on server i (-2 missing, -1 no ttl, -100 error). */
long long h_pttl(h_env *env, unsigned i, const void *key, size_t key_len);
/* How many servers hold key with exactly this token. */
unsigned h_count_holding(h_env *env, const void *key, size_t key_len, const char *token,
                         size_t token_len);

/* ---- helpers added for the integration suite ------------------------------------------------ */

/* As h_acquire, for a binary-safe resource of len bytes. */
int h_acquire_bin(h_env *env, redlock_client *c, const void *resource, size_t len, uint64_t ttl_ms,
                  const redlock_lock_opts *opts, h_record *rec);
/* A client on explicit URLs. Returns redlock_client_new's code; on success *out is set and, if
 * the env has no client yet, it becomes the env's client (closed by h_env_stop). err may be
 * NULL. */
int h_client_urls(h_env *env, const char *const *urls, unsigned n, const redlock_options *opts,
                  redlock_client **out, char *err, size_t err_len);
/* Run the loop in short slices until h_count_holding(key, token) == want, at most timeout_ms.
 * Returns true if reached. An acquire or extend is decided at a quorum: this is how a test waits
 * for the other nodes' SETs ("every node holds the token"). */
bool h_wait_holding(h_env *env, const void *key, size_t key_len, const char *token,
                    size_t token_len, unsigned want, uint64_t timeout_ms);
/* SET key value on server i (no options); fails the test unless the reply is OK. */
void h_set(h_env *env, unsigned i, const void *key, size_t key_len, const char *value);
/* DEL key on server i; returns the number deleted (-1 on error). */
long long h_del(h_env *env, unsigned i, const void *key, size_t key_len);
/* DBSIZE of server i (-1 on error). */
long long h_dbsize(h_env *env, unsigned i);
/* Probe the client with short acquire/release cycles on a throwaway resource until a release is
 * confirmed by want nodes (votes_yes == want), at most timeout_ms. Returns true if reached. The
 * client must have redlock_options.release_waits_all (h_test_options sets it): a release decided
 * with nodes unheard fails the test. */
bool h_wait_release_votes(h_env *env, redlock_client *c, unsigned want, uint64_t timeout_ms);
/* SCRIPT LOAD the library's extend and release scripts on every running server, so that EVALSHA
 * finds them (a test that is not about the NOSCRIPT fallback should not depend on it). */
void h_load_scripts(h_env *env);
/* Print what rec saw (status, votes, per-node vote and error) on stderr, prefixed by what. For
 * failure messages: call it before an assertion on rec is expected to fail. */
void h_dump_record(const char *what, const h_record *rec);
/* For a test program's main(): ignore SIGPIPE; if $H_TEST_FILTER is set run only the tests whose
 * names match it, and if $H_TEST_SKIP is set skip those that match it (cmocka's filters: '*' and
 * '?' wildcards). */
void h_test_main_init(void);
/* Wait (at most H_WAIT_MS, else fail the test) until the client has every running server of the env
 * connected and working: a probe acquire/release succeeds and every running server answers the
 * inspect after it. Every 50th failing probe and the last are printed on stderr (so a flaky start
 * leaves a trace in the test log). */
void h_wait_ready(h_env *env, redlock_client *c);
/* Run the loop until c has lost n acquire rounds to a holder (redlock_stats.rounds_busy), at
 * most H_WAIT_MS, else fail the test: its waiters then sleep on their retry timers. */
void h_wait_busy_rounds(h_env *env, redlock_client *c, uint64_t n);
/* Microseconds since t0_us on the redlock_now_us() clock. */
uint64_t h_since_us(uint64_t t0_us);
/* Wait until every command client c has written so far has been executed by every running
 * (not stopped) server: an inspect round, which goes to each node behind them on the same
 * ordered connection, is run until each such server answered one (at most H_WAIT_MS, else the
 * test fails). For checking what a round decided at the quorum, or a lost round's release
 * everywhere, left on the servers. c's node i must be the env's server i (h_client, or
 * h_client_urls with the env's servers in order). */
void h_drain(h_env *env, redlock_client *c);
/* Run the loop until no node owes c an answer: every reply to what c sent so far (a round's late
 * votes too) has been read, at most H_WAIT_MS (else the test fails). Nothing is sent. */
void h_settle(h_env *env, redlock_client *c);
/* The same for node i alone. */
void h_settle_node(h_env *env, redlock_client *c, unsigned i);
/* h_settle, then h_drain: every node was heard on a request sent after every vote c was owed, so
 * a key a late yes (or a retake) set is known to lie inside the hold, and a node back empty
 * afterwards costs only its own key (docs/safety.md, "A hold is continuous while a quorum kept
 * it"). Without it a restart of one of an acquire's first yes voters right after a late yes is
 * a loss: the late key may have been set after the restarted one was lost. */
void h_hear_all(h_env *env, redlock_client *c);
/* Check the validity a won acquire or extend gave (validity_ms, from redlock_lock_validity_ms)
 * against the library's promise for the round recorded in rec with this ttl: ttl - elapsed -
 * drift (drift = ttl * 0.01 + 2 ms, the default drift factor), whatever the machine's speed:
 * at most ttl - drift, at least that minus rec->elapsed_us (and 1 ms of rounding). */
void h_assert_validity(const h_record *rec, uint64_t ttl_ms, uint64_t validity_ms);
/* URLs of the env's servers into urls[] (each buf[i], at least 160 bytes), the servers listed in
 * short_mask (bit i: server i) with "?timeout_ms=short_timeout_ms": the nodes a test stops get
 * a short deadline, every other node keeps the client's H_NODE_TIMEOUT_MS. */
void h_urls_with_timeout(h_env *env, unsigned short_mask, uint64_t short_timeout_ms,
                         char (*buf)[160], const char **urls);

#endif
