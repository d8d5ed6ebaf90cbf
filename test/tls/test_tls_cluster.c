/* SPDX-License-Identifier: MIT */
/* test_tls_cluster.c - a clusters:// node: a Redis Cluster whose masters speak TLS on ports of
 * their own, beside a rediss:// server. The client is given one master's TLS port only, so it can
 * reach the two others only at the "tls-port" their CLUSTER SHARDS entries name: a client that
 * used their plain ports, or spoke plain TCP to them, would get no vote there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_fixture.h"
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

int main(void)
{
    t_main_init();
    const struct CMUnitTest tests[] = {
        H_TEST(cluster_over_tls),
        H_TEST(tls_ports_unknown_is_a_clear_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
