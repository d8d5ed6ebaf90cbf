/* SPDX-License-Identifier: MIT */
/* test_tls_cluster.c - a clusters:// node: a Redis Cluster whose masters speak TLS on ports of
 * their own, beside a rediss:// server. The client is given one master's TLS port only, so it can
 * reach the two others only at the "tls-port" their CLUSTER SHARDS entries name: a client that
 * used their plain ports, or spoke plain TCP to them, would get no vote there. `redlock check`
 * ($REDLOCK_TOOL, a child process) must reach them the same way. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_fixture.h"
#include "jsonp.h"
#include "proc.h"
#include "tls_harness.h"

#define MASTERS 3

static fixture_redis_cluster rc; /* about 150 KB: static */

/* Whether the master of key's slot holds it with token (read over its plain port). */
static bool master_holds(const char *key, const char *token)
{
    int owner = fixture_cluster_key_owner(&rc, key, strlen(key));
    assert_true(owner >= 0);
    redisReply *r = fixture_cluster_command(&rc, (unsigned)owner, "GET %s", key);
    assert_non_null(r);
    bool yes = r->type == REDIS_REPLY_STRING && strcmp(r->str, token) == 0;
    freeReplyObject(r);
    return yes;
}

/* The TLS lines of every node: its certificate, and with tls_cluster the cluster bus on TLS
 * too (Redis 7 names a master's TLS port in CLUSTER SHARDS only then; the bus always asks for a
 * client certificate, so the nodes present client.crt). */
static void tls_lines(char *out, size_t len, const fixture_tls_conf *conf, bool tls_cluster)
{
    char client_crt[512], client_key[512];
    snprintf(client_crt, sizeof(client_crt), "%s", t_path("client.crt"));
    snprintf(client_key, sizeof(client_key), "%s", t_path("client.key"));
    int n = snprintf(out, len,
                     "tls-cert-file %s\ntls-key-file %s\ntls-ca-cert-file %s\n"
                     "tls-auth-clients no\n",
                     conf->cert_file, conf->key_file, conf->ca_file);
    assert_true(n > 0 && (size_t)n < len);
    if (tls_cluster) {
        int more = snprintf(out + n, len - (size_t)n,
                            "tls-cluster yes\ntls-client-cert-file %s\ntls-client-key-file %s\n",
                            client_crt, client_key);
        assert_true(more > 0 && (size_t)more < len - (size_t)n);
    }
}

/* The TLS cluster (tls_cluster: with its bus on TLS), a rediss:// server and a client over the
 * two, given the cluster's first master's TLS port alone. */
static redlock_client *start(t_env *env, bool tls_cluster)
{
    fixture_tls_conf conf = t_conf("server", false);
    char files[4096];
    tls_lines(files, sizeof(files), &conf, tls_cluster);
    assert_int_equal(fixture_cluster_start_tls(&rc, MASTERS, 0, NULL, files), 0);
    assert_int_equal(fixture_cluster_wait_formed(&rc), 0);
    t_start(env, 1, &conf, true);
    static char url[128];
    snprintf(url, sizeof(url), "clusters://127.0.0.1:%d", rc.tls_ports[0]);
    const char *urls[2] = {url, env->tls->servers[0].url};
    redlock_options o;
    t_options(&o);
    return t_client(env, urls, 2, &o);
}

static void cluster_over_tls(void **state)
{
    (void)state;
    t_env env;
    redlock_client *c = start(&env, true);

    bool used[MASTERS] = {false};
    static const char *const keys[] = {"tls:alpha", "tls:bravo",   "tls:charlie", "tls:delta",
                                       "tls:echo",  "tls:foxtrot", "tls:golf",    "tls:hotel"};
    for (unsigned k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
        int owner = fixture_cluster_key_owner(&rc, keys[k], strlen(keys[k]));
        assert_true(owner >= 0 && owner < MASTERS);
        used[owner] = true;
        h_record rec, rel;
        if (h_acquire(&env.h, c, keys[k], 10000, NULL, &rec) != 0) {
            h_dump_record("acquire on a TLS cluster", &rec);
            fail_msg("acquire failed");
        }
        char token[REDLOCK_TOKEN_MAX + 1];
        snprintf(token, sizeof(token), "%s", redlock_lock_token(rec.lock, NULL));
        assert_true(master_holds(keys[k], token));
        assert_int_equal(h_release(&env.h, rec.lock, &rel), 0);
        if (rel.votes_yes != 2)
            h_dump_record("release on a TLS cluster", &rel);
        assert_int_equal(rel.votes_yes, 2);
        assert_false(master_holds(keys[k], token));
        redlock_lock_free(rec.lock);
    }
    for (unsigned m = 0; m < MASTERS; m++)
        assert_true(used[m]); /* every master was reached, two of them only through the map */
    h_close_client(&env.h, c);
    t_stop(&env);
    fixture_cluster_stop(&rc);
}

/* A cluster whose bus is plain (tls-cluster no) does not tell its masters' TLS ports: the
 * cluster's vote is an error that says so, at once, never a hang on a plain port. */
static void tls_ports_unknown_is_a_clear_error(void **state)
{
    (void)state;
    t_env env;
    redlock_client *c = start(&env, false);
    h_record rec;
    assert_int_equal(h_acquire(&env.h, c, "tls:no-port", 10000, NULL, &rec), REDLOCK_ENOQUORUM);
    t_expect_error(&rec, 0, "tls-cluster yes");
    h_close_client(&env.h, c);
    t_stop(&env);
    fixture_cluster_stop(&rc);
}

/* `redlock check` on the clusters:// node and the rediss:// server, expecting exit status; its
 * JSON line is returned. */
static jv *run_check(t_env *env, int status)
{
    char nodes[512];
    snprintf(nodes, sizeof(nodes), "clusters://127.0.0.1:%d,%s", rc.tls_ports[0],
             env->tls->servers[0].url);
    const char *argv[] = {
        "redlock", "--node-timeout=10s", "--tls-ca", t_path("ca.crt"), "-n", nodes,
        "check",   "--delayed-restart",  NULL};
    const char *unset[] = {"REDLOCK_NODES", "REDLOCK_TLS_CA", "REDLOCK_TLS_CERT", "REDLOCK_TLS_KEY",
                           NULL};
    proc p;
    proc_start(&p, getenv("REDLOCK_TOOL"), argv, unset);
    if (!proc_wait(&p, 60000))
        fail_msg("check did not exit; stderr:\n%s", p.err);
    if (p.status != status)
        fail_msg("exit status %d, expected %d\nstdout: %s\nstderr: %s", p.status, status, p.out,
                 p.err);
    char err[200];
    jv *v = jv_parse(p.out, p.out_len, err, sizeof(err));
    if (v == NULL)
        fail_msg("stdout is not one JSON line (%s): %s", err, p.out);
    proc_free(&p);
    return v;
}

/* check reads the slot map over TLS from the URL's port and checks every master in TLS at the
 * tls-port the map names (each passes, with its probe key); without tls-cluster the map names no
 * TLS port, and every master is an error that says what to turn on. */
static void check_over_tls(void **state)
{
    (void)state;
    for (int tls_cluster = 1; tls_cluster >= 0; tls_cluster--) {
        t_env env;
        h_close_client(&env.h, start(&env, tls_cluster != 0));
        /* Two nodes: a warning that none may fail (exit 1) when all is well. */
        jv *v = run_check(&env, tls_cluster ? 1 : 69);
        if (tls_cluster) {
            const jv *warnings = jv_get(v, "warnings");
            assert_int_equal(warnings->n, 1);
            assert_non_null(strstr(jv_at(warnings, 0)->str, "2 node(s)"));
        }
        const jv *cluster = jv_at(jv_get(v, "nodes"), 0);
        const jv *masters = jv_get(cluster, "masters");
        assert_int_equal(masters->n, MASTERS);
        for (size_t m = 0; m < MASTERS; m++) {
            const jv *master = jv_at(masters, m);
            const jv *errors = jv_get(master, "errors");
            if (tls_cluster) {
                if (errors->n != 0)
                    fail_msg("master %zu: %s", m, jv_at(errors, 0)->str);
                assert_true(jv_get(master, "ok")->boolean);
                assert_true(jv_get(master, "probe_key")->type == JV_STRING);
                /* Reached at its TLS port, which the map alone named for two of them. */
                char at[32];
                bool listed = false;
                for (unsigned k = 0; k < MASTERS; k++) {
                    snprintf(at, sizeof(at), "127.0.0.1:%d", rc.tls_ports[k]);
                    listed = listed || jv_is_str(jv_get(master, "address"), at);
                }
                if (!listed)
                    fail_msg("master %zu was checked at %s, not at a TLS port", m,
                             jv_get(master, "address")->str);
            } else {
                assert_false(jv_get(master, "ok")->boolean);
                assert_true(errors->n >= 1);
                assert_non_null(strstr(jv_at(errors, 0)->str, "tls-cluster yes"));
            }
        }
        assert_true(jv_get(jv_at(jv_get(v, "nodes"), 1), "ok")->boolean);
        jv_free(v);
        t_stop(&env);
        fixture_cluster_stop(&rc);
    }
}

int main(void)
{
    if (getenv("REDLOCK_TOOL") == NULL) {
        fprintf(stderr, "tls-cluster: set REDLOCK_TOOL to the redlock executable\n");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    t_main_init();
    const struct CMUnitTest tests[] = {
        H_TEST(cluster_over_tls),
        H_TEST(tls_ports_unknown_is_a_clear_error),
        H_TEST(check_over_tls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
