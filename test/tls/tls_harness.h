/* SPDX-License-Identifier: MIT */
/* tls_harness.h - what the TLS tests share: certificates made once per test program, TLS
 * servers (fixture_tls.h), a loop and clients (the integration harness), checks of the keys on
 * the servers over their plain ports, and what each node's stream counted. */
#ifndef REDLOCK_TEST_TLS_HARNESS_H
#define REDLOCK_TEST_TLS_HARNESS_H

#include <stdbool.h>

#include "fixture_tls.h"
#include "harness.h"
#include "stream.h"

/* The directory tls_harness_init() filled with certs.h's files. */
extern char t_certs[256];

/* For main(): h_test_main_init, then make the certificates in a fresh temp dir (removed at
 * exit). Exits 1 on failure. */
void t_main_init(void);

/* certs.h file name -> path in t_certs (a static buffer per call site is not needed: the
 * returned pointer stays valid until the next 16 calls). */
const char *t_path(const char *file);

/* A server conf with the given certificate ("server", "expired", ...), auth_clients as given. */
fixture_tls_conf t_conf(const char *cert, bool auth_clients);

/* A loop (no plain cluster) plus TLS servers, one per conf (or confs[0] for all). */
typedef struct t_env {
    h_env h; /* h.cluster stays unused */
    fixture_tls_cluster *tls;
} t_env;

void t_start(t_env *env, unsigned n, const fixture_tls_conf *confs, bool all_same);
/* As t_start, with extra redis.conf lines for every server. */
void t_start_extra(t_env *env, unsigned n, const fixture_tls_conf *confs, bool all_same,
                   const char *extra_conf);
void t_stop(t_env *env);

/* Test options: h_test_options, node timeout 10 s, connect timeout 20 s (a loaded machine, and
 * TLS handshakes under valgrind, must never trip them), the test CA. */
void t_options(redlock_options *o);

/* A client on urls (fails the test if creation fails). */
redlock_client *t_client(t_env *env, const char *const *urls, unsigned n, const redlock_options *o);

/* GET key over server i's plain port: malloc'ed value or NULL. */
char *t_get(t_env *env, unsigned i, const char *key);
/* How many running servers hold key with token. */
unsigned t_count_holding(t_env *env, const char *key, const char *token);

/* What node i's stream counted. */
const redlock__stream_stats *t_stats(redlock_client *c, unsigned i);

/* Run acquire + release probes until a release is confirmed by want nodes (at most timeout_ms);
 * true if reached. */
bool t_wait_votes(t_env *env, redlock_client *c, unsigned want, uint64_t timeout_ms);

/* Run probe acquires until node i's error text contains needle (at most timeout_ms); true if
 * seen. The last text seen goes to last (if not NULL, 160 bytes). */
bool t_wait_node_error(t_env *env, redlock_client *c, unsigned i, const char *needle,
                       uint64_t timeout_ms, char *last);

/* Fail the test with the record's dump unless node i's error contains needle. */
void t_expect_error(const h_record *rec, unsigned i, const char *needle);

#endif
