/* SPDX-License-Identifier: MIT */
/* fixture_tls.c - see fixture_tls.h. */
#include "fixture_tls.h"

#include <stdio.h>
#include <string.h>

/* A free port may be taken between the probe and redis-server's bind; the server then exits at
 * start-up and the fixture gives up on it. Try again with other ports. */
#define START_ATTEMPTS 3

int fixture_tls_start_one(fixture_tls_server *s, const fixture_tls_conf *conf,
                          const char *extra_conf)
{
    for (int attempt = 1; attempt <= START_ATTEMPTS; attempt++) {
        int port = fixture_free_port();
        if (port < 0)
            return -1;
        char conf_text[1024];
        int len = snprintf(conf_text, sizeof(conf_text),
                           "tls-port %d\n"
                           "tls-cert-file \"%s\"\n"
                           "tls-key-file \"%s\"\n"
                           "tls-ca-cert-file \"%s\"\n"
                           "tls-auth-clients %s\n"
                           "%s",
                           port, conf->cert_file, conf->key_file, conf->ca_file,
                           conf->auth_clients ? "yes" : "no", extra_conf != NULL ? extra_conf : "");
        if (len < 0 || (size_t)len >= sizeof(conf_text)) {
            fprintf(stderr, "fixture_tls: config too long\n");
            return -1;
        }
        if (fixture_start(&s->cluster, 1, conf_text) == 0) {
            s->tls_port = port;
            snprintf(s->url, sizeof(s->url), "rediss://127.0.0.1:%d", port);
            snprintf(s->name_url, sizeof(s->name_url), "rediss://localhost:%d", port);
            snprintf(s->plain_url, sizeof(s->plain_url), "%s", s->cluster.servers[0].url);
            return 0;
        }
        fprintf(stderr, "fixture_tls: start attempt %d of %d failed\n", attempt, START_ATTEMPTS);
    }
    return -1;
}

int fixture_tls_start(fixture_tls_cluster *t, unsigned n, const fixture_tls_conf *confs,
                      bool all_same, const char *extra_conf)
{
    memset(t, 0, sizeof(*t));
    if (n == 0 || n > FIXTURE_MAX_SERVERS) {
        fprintf(stderr, "fixture_tls: server count %u not in 1..%d\n", n, FIXTURE_MAX_SERVERS);
        return -1;
    }
    for (unsigned i = 0; i < n; i++) {
        if (fixture_tls_start_one(&t->servers[i], &confs[all_same ? 0 : i], extra_conf) != 0) {
            fixture_tls_stop(t);
            return -1;
        }
        t->n = i + 1;
        t->urls[i] = t->servers[i].url;
    }
    return 0;
}

void fixture_tls_stop(fixture_tls_cluster *t)
{
    for (unsigned i = 0; i < FIXTURE_MAX_SERVERS; i++)
        fixture_stop(&t->servers[i].cluster);
    t->n = 0;
}
