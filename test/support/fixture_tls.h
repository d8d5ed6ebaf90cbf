/* SPDX-License-Identifier: MIT */
/* fixture_tls.h - redis-server processes that speak TLS, on top of the fixture (fixture.h).
 *
 * Each TLS server is a one-server fixture cluster whose extra config adds
 *   tls-port P, tls-cert-file, tls-key-file, tls-ca-cert-file, tls-auth-clients yes|no
 * so every fixture function (kill, pause, resume, restart, command) works on it through its
 * .cluster, index 0, and a restart keeps its TLS port. The server keeps the fixture's plain
 * loopback port as well: the fixture's readiness probe and its commands (hiredis 0.14 has no
 * TLS) use it, and it is the "plain port" of tests that point a TLS client at a plain port.
 * Only the TLS URL is given to the library unless a test chooses otherwise.
 *
 * Same rules as fixture.h: one thread, structs stay at their address while running. */
#ifndef REDLOCK_TEST_FIXTURE_TLS_H
#define REDLOCK_TEST_FIXTURE_TLS_H

#include <stdbool.h>

#include "fixture.h"

typedef struct fixture_tls_conf {
    const char *cert_file; /* the server's certificate chain (PEM) */
    const char *key_file;  /* its key (PEM, unencrypted) */
    const char *ca_file;   /* CA for client certificates (Redis requires one even when unused) */
    bool auth_clients;     /* tls-auth-clients yes: a client certificate is required */
} fixture_tls_conf;

typedef struct fixture_tls_server {
    fixture_cluster cluster; /* one server */
    int tls_port;
    char url[128];       /* "rediss://127.0.0.1:TLS_PORT" */
    char name_url[128];  /* "rediss://localhost:TLS_PORT" (SNI and a host-name check) */
    char plain_url[128]; /* "redis://127.0.0.1:PLAIN_PORT" */
} fixture_tls_server;

typedef struct fixture_tls_cluster {
    unsigned n;
    fixture_tls_server servers[FIXTURE_MAX_SERVERS];
    const char *urls[FIXTURE_MAX_SERVERS]; /* servers[i].url */
} fixture_tls_cluster;

/* Start one TLS server with conf and extra_conf (may be NULL; redis.conf lines under 512
 * bytes). Returns 0, or -1 with a message on stderr (nothing left running). */
int fixture_tls_start_one(fixture_tls_server *s, const fixture_tls_conf *conf,
                          const char *extra_conf);

/* Start n servers, server i with confs[i] (or confs[0] for all when all_same). Returns 0, or -1
 * with every server stopped. */
int fixture_tls_start(fixture_tls_cluster *t, unsigned n, const fixture_tls_conf *confs,
                      bool all_same, const char *extra_conf);

/* Stop every server (safe twice, and on a failed start). */
void fixture_tls_stop(fixture_tls_cluster *t);

#endif
