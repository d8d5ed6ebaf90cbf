/* SPDX-License-Identifier: MIT */
/* cli_harness.h - what the cli tests share: running build/tools/redlock (path in $REDLOCK_TOOL)
 * as a child process, reading its JSON line, looking at the keys on the servers, and one
 * 3-node cluster per test program (cli_main starts it).
 *
 * The rule for every test here: a check asserts what the tool and the library promise, never
 * that the machine met a deadline.
 *   - Every tool run gets a node timeout of seconds (TOOL_NODE_TIMEOUT, added by tool_start):
 *     nothing here is slow unless a test makes it slow on purpose (fixture_pause, a killed
 *     server), so only a node the test stopped can ever time out. A test about a deadline gives
 *     its own -T after it (the last one wins).
 *   - "Every node did X" waits, bounded and generously, for the late ones
 *     (expect_key_everywhere); a won round is decided at the quorum, not when the last node
 *     answered.
 *   - Times are bounded by what was configured or measured around the tool (expect_validity,
 *     expect_pttl), not by how fast the machine is.
 *   - A second cluster a test starts is `extra`: it is stopped after every test, passed or
 *     failed, and every paused server of `shared` is resumed, so a failed check never leaves
 *     servers behind for the next test. */
#ifndef REDLOCK_TEST_CLI_HARNESS_H
#define REDLOCK_TEST_CLI_HARNESS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cmocka.h>

#include "fixture.h"
#include "jsonp.h"
#include "proc.h"

#define TOOL_TIMEOUT_MS 15000
/* The node timeout every tool run gets (the tool's own default is 500 ms). */
#define TOOL_NODE_TIMEOUT "--node-timeout=10s"
/* How long "every node" checks wait for a late node: generous, since they return at once. */
#define LATE_NODE_WAIT_MS 5000

extern const char *tool_path;
extern fixture_cluster shared;  /* 3 nodes, no password */
extern char shared_nodes[1024]; /* their URLs, comma-separated */
/* A cluster of a test's own (fixture_start(&extra, ...)); stopped after every test. */
extern fixture_cluster extra;

long long now_ms(void);
void sleep_ms(int ms);

/* "redis://[:password@]127.0.0.1:PORT,..." for every server of c. */
void node_list(const fixture_cluster *c, const char *password, char *out, size_t len);

/* Start the tool with TOOL_NODE_TIMEOUT first, then args, the arguments after argv[0]
 * (NULL-terminated). $REDLOCK_NODES is unset unless env ("NAME=VALUE" entries, NULL-terminated,
 * may be NULL) sets it. */
void tool_start(proc *p, const char *const *env, const char *const *args);
/* As tool_start, with exactly args (for the command-line checks themselves). */
void tool_start_bare(proc *p, const char *const *env, const char *const *args);
/* Wait for the tool to exit; fail the test after timeout_ms. */
void tool_finish(proc *p, int timeout_ms);

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
/* Run the tool to completion. */
#define TOOL(p, env, ...)                                                                          \
    do {                                                                                           \
        tool_start((p), (env), ARGS(__VA_ARGS__));                                                 \
        tool_finish((p), TOOL_TIMEOUT_MS);                                                         \
    } while (0)

void expect_status(const proc *p, int status);
/* stdout must be exactly one line of valid JSON, an object; free it with jv_free. */
jv *json_line(const proc *p);
/* A member that must be a string / an integer. */
const char *jstr(const jv *v, const char *key);
int64_t jint(const jv *v, const char *key);
bool is_hex_token(const char *s);
/* The "nodes" array has one well-formed entry per server of c, in order (status_shape: the
 * entries of status, else those of acquire, release and extend). */
void check_nodes(const jv *v, fixture_cluster *c, bool status_shape);
unsigned count_votes(const jv *v, const char *vote);

/* One command on server i (AUTH first when password is set); NULL if it cannot connect. */
redisReply *server_cmd(fixture_cluster *c, unsigned i, const char *password, int argc,
                       const char **argv, const size_t *lens);
/* The key's value on server i (malloc'ed, NUL-terminated; NULL when there is no key). */
char *server_get_pw(fixture_cluster *c, unsigned i, const char *password, const char *key,
                    size_t *len_out);
char *server_get(fixture_cluster *c, unsigned i, const char *key);
long long server_pttl(fixture_cluster *c, unsigned i, const char *key);
void server_del(fixture_cluster *c, unsigned i, const char *key);
/* Every server of c holds key with value token (NULL: the key is on none), within
 * LATE_NODE_WAIT_MS. */
void expect_key_everywhere(fixture_cluster *c, const char *key, const char *token);

/* validity_ms, reported by a tool run that took took_ms (measured around it), is what the
 * library promises: ttl - elapsed - drift (drift = 1% of the ttl + 2 ms) with elapsed somewhere
 * in [0, took_ms]. */
void expect_validity(int64_t validity_ms, long long ttl_ms, long long took_ms);
/* A PTTL read since_ms after the command that set the key with ttl_ms was started: in
 * [ttl_ms - since_ms, ttl_ms] (a few ms of slack for the server's clock and rounding). */
void expect_pttl(long long pttl_ms, long long ttl_ms, long long since_ms);

/* Acquire key on the shared cluster with the tool; returns the token (malloc'ed). */
char *acquire_shared(const char *key, const char *ttl);

/* A path in the test's temp dir (removed, with the files named in cli_main, at the end). */
void marker_path(char *out, size_t len, const char *name);
bool file_exists(const char *path);

/* Start the shared cluster and a temp dir, run the tests, clean up. temp_files: names in the
 * temp dir to remove at the end (NULL-terminated). */
int cli_main(const char *group, const struct CMUnitTest *tests, size_t n,
             const char *const *temp_files);

#endif /* REDLOCK_TEST_CLI_HARNESS_H */
