/* SPDX-License-Identifier: MIT */
/* tls_harness.c - see tls_harness.h. */
#include "tls_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "certs.h"
#include "client.h"
#include "common.h"
#include "io_uv.h"
#include "node.h"

char t_certs[256];

static void remove_certs(void)
{
    if (t_certs[0] == '\0')
        return;
    char cmd[512];
    /* Our own mkdtemp() dir, certificates and keys only. */
    snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", t_certs);
    if (system(cmd) != 0)
        fprintf(stderr, "tls: cannot remove %s\n", t_certs);
}

void t_main_init(void)
{
    h_test_main_init();
    const char *tmp = getenv("TMPDIR");
    snprintf(t_certs, sizeof(t_certs), "%s/redlock-tls-XXXXXX",
             tmp != NULL && tmp[0] != '\0' && strlen(tmp) < 150 ? tmp : "/tmp");
    if (mkdtemp(t_certs) == NULL) {
        perror("tls: mkdtemp");
        exit(1);
    }
    atexit(remove_certs);
    char err[512];
    if (tls_certs_make(t_certs, err, sizeof(err)) != 0) {
        fprintf(stderr, "tls: %s\n", err);
        exit(1);
    }
}

const char *t_path(const char *file)
{
    static char paths[16][512];
    static unsigned next;
    char *p = paths[next++ % 16];
    snprintf(p, sizeof(paths[0]), "%s/%s", t_certs, file);
    return p;
}

fixture_tls_conf t_conf(const char *cert, bool auth_clients)
{
    char crt[64], key[64];
    snprintf(crt, sizeof(crt), "%s.crt", cert);
    snprintf(key, sizeof(key), "%s.key", cert);
    /* t_path's buffers rotate: copy out of them into storage that lives with the program. */
    static char store[64][512];
    static unsigned next;
    char *c = store[next++ % 64], *k = store[next++ % 64], *ca = store[next++ % 64];
    snprintf(c, 512, "%s", t_path(crt));
    snprintf(k, 512, "%s", t_path(key));
    snprintf(ca, 512, "%s", t_path("ca.crt"));
    return (fixture_tls_conf){c, k, ca, auth_clients};
}

void t_start_extra(t_env *env, unsigned n, const fixture_tls_conf *confs, bool all_same,
                   const char *extra_conf)
{
    memset(env, 0, sizeof(*env));
    redlock__keep_stdio_taken();
    assert_int_equal(uv_loop_init(&env->h.loop), 0);
    env->tls = calloc(1, sizeof(*env->tls));
    assert_non_null(env->tls);
    assert_int_equal(fixture_tls_start(env->tls, n, confs, all_same, extra_conf), 0);
}

void t_start(t_env *env, unsigned n, const fixture_tls_conf *confs, bool all_same)
{
    t_start_extra(env, n, confs, all_same, NULL);
}

void t_stop(t_env *env)
{
    h_env_stop(&env->h); /* closes the client, checks the loop is empty */
    fixture_tls_stop(env->tls);
    free(env->tls);
    env->tls = NULL;
}

void t_options(redlock_options *o)
{
    h_test_options(o);
    o->node_timeout_ms = 10000;
    o->connect_timeout_ms = 20000;
    o->tls_ca_file = t_path("ca.crt");
}

redlock_client *t_client(t_env *env, const char *const *urls, unsigned n, const redlock_options *o)
{
    redlock_client *c = NULL;
    char err[256];
    int rc = h_client_urls(&env->h, urls, n, o, &c, err, sizeof(err));
    if (rc != 0)
        fail_msg("redlock_client_new: %s: %s", redlock_err_name(rc), err);
    return c;
}

char *t_get(t_env *env, unsigned i, const char *key)
{
    redisReply *r = fixture_command(&env->tls->servers[i].cluster, 0, "GET %s", key);
    char *out = NULL;
    if (r != NULL && r->type == REDIS_REPLY_STRING)
        out = strdup(r->str);
    if (r != NULL)
        freeReplyObject(r);
    return out;
}

unsigned t_count_holding(t_env *env, const char *key, const char *token)
{
    unsigned n = 0;
    for (unsigned i = 0; i < env->tls->n; i++) {
        const fixture_server *s = &env->tls->servers[i].cluster.servers[0];
        if (s->pid == 0 || s->paused)
            continue;
        char *v = t_get(env, i, key);
        n += v != NULL && strcmp(v, token) == 0;
        free(v);
    }
    return n;
}

const redlock__stream_stats *t_stats(redlock_client *c, unsigned i)
{
    redlock__node *node = redlock__io_uv_node(c->io, i);
    assert_non_null(node);
    return redlock__node_stream_stats(node);
}

bool t_wait_votes(t_env *env, redlock_client *c, unsigned want, uint64_t timeout_ms)
{
    return h_wait_release_votes(&env->h, c, want, timeout_ms);
}

bool t_wait_node_error(t_env *env, redlock_client *c, unsigned i, const char *needle,
                       uint64_t timeout_ms, char *last)
{
    uint64_t deadline = redlock_now_us() + timeout_ms * 1000;
    char name[64];
    snprintf(name, sizeof(name), "t-probe-%llu", (unsigned long long)redlock_now_us());
    for (;;) {
        h_record rec;
        int rc = h_acquire(&env->h, c, name, 5000, NULL, &rec);
        if (last != NULL)
            snprintf(last, 160, "%s", rec.node_error[i]);
        if (rc == 0) {
            h_record rel;
            h_release(&env->h, rec.lock, &rel);
            redlock_lock_free(rec.lock);
            if (last != NULL && rel.node_error[i][0] != '\0')
                snprintf(last, 160, "%s", rel.node_error[i]);
            if (strstr(rel.node_error[i], needle) != NULL)
                return true;
        }
        if (strstr(rec.node_error[i], needle) != NULL)
            return true;
        if (redlock_now_us() >= deadline)
            return false;
        h_run_for(&env->h.loop, 50);
    }
}

void t_expect_error(const h_record *rec, unsigned i, const char *needle)
{
    if (strstr(rec->node_error[i], needle) == NULL) {
        h_dump_record("record", rec);
        fail_msg("node %u: error \"%s\" lacks \"%s\"", i, rec->node_error[i], needle);
    }
}
