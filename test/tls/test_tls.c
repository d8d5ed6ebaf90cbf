/* SPDX-License-Identifier: MIT */
/* test_tls.c - rediss:// nodes against real TLS redis-servers: the lock works over TLS (with and
 * without mutual TLS, mixed with plain nodes), every verification failure is that node's error
 * vote with its reason while the others decide, the client's TLS options are checked at
 * creation, verification off says so, and a batch of commands leaves in a few writes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tls_harness.h"

#define KEY_MARKER "keyfile-marker-7f3a"

/* acquire, check the keys, extend, check the ttl moved, release, check the keys are gone. */
static void lock_cycle(t_env *env, redlock_client *c, const char *resource, unsigned n)
{
    h_record rec, ext, rel;
    if (h_acquire(&env->h, c, resource, 10000, NULL, &rec) != 0) {
        h_dump_record("acquire", &rec);
        fail_msg("acquire over TLS failed");
    }
    size_t token_len;
    const char *token = redlock_lock_token(rec.lock, &token_len);
    /* The round may be decided before the last nodes answer: wait for every SET to land. */
    uint64_t deadline = redlock_now_us() + 5000000;
    while (t_count_holding(env, resource, token) < n && redlock_now_us() < deadline)
        h_run_for(&env->h.loop, 10);
    assert_int_equal(t_count_holding(env, resource, token), n);

    if (h_extend(&env->h, rec.lock, 60000, 0, &ext) != 0) {
        h_dump_record("extend", &ext);
        fail_msg("extend over TLS failed");
    }
    deadline = redlock_now_us() + 5000000;
    for (;;) {
        redisReply *r = fixture_command(&env->tls->servers[0].cluster, 0, "PTTL %s", resource);
        assert_non_null(r);
        long long pttl = r->integer;
        freeReplyObject(r);
        if (pttl > 10000)
            break;
        assert_true(redlock_now_us() < deadline);
        h_run_for(&env->h.loop, 10);
    }
    assert_int_equal(h_release(&env->h, rec.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, n);
    assert_int_equal(t_count_holding(env, resource, token), 0);
    redlock_lock_free(rec.lock);
}

static void five_tls_nodes(void **state)
{
    (void)state;
    t_env env;
    fixture_tls_conf conf = t_conf("server", false);
    t_start(&env, 5, &conf, true);
    /* Three nodes by address (the certificate's IP SAN, no SNI), two by name (SNI and the DNS
     * SAN). */
    const char *urls[5] = {env.tls->servers[0].url, env.tls->servers[1].url,
                           env.tls->servers[2].url, env.tls->servers[3].name_url,
                           env.tls->servers[4].name_url};
    redlock_options o;
    t_options(&o);
    redlock_client *c = t_client(&env, urls, 5, &o);
    lock_cycle(&env, c, "tls-five", 5);
    for (unsigned i = 0; i < 5; i++) {
        const redlock__stream_stats *st = t_stats(c, i);
        assert_int_equal(st->tls_handshakes, 1);
        assert_int_equal(st->tls_resumed, 0);
    }
    t_stop(&env);
}

static void mutual_tls(void **state)
{
    (void)state;
    t_env env;
    fixture_tls_conf conf = t_conf("server", true);
    t_start(&env, 5, &conf, true);
    redlock_options o;
    t_options(&o);
    o.tls_cert_file = t_path("client.crt");
    o.tls_key_file = t_path("client.key");
    redlock_client *c = t_client(&env, env.tls->urls, 5, &o);
    lock_cycle(&env, c, "tls-mutual", 5);
    t_stop(&env);
}

static void mixed_tls_and_plain(void **state)
{
    (void)state;
    t_env env;
    fixture_tls_conf conf = t_conf("server", false);
    t_start(&env, 5, &conf, true);
    const char *urls[5] = {env.tls->servers[0].url, env.tls->servers[1].plain_url,
                           env.tls->servers[2].url, env.tls->servers[3].plain_url,
                           env.tls->servers[4].name_url};
    redlock_options o;
    t_options(&o);
    redlock_client *c = t_client(&env, urls, 5, &o);
    lock_cycle(&env, c, "tls-mixed", 5);
    assert_int_equal(t_stats(c, 0)->tls_handshakes, 1);
    assert_int_equal(t_stats(c, 1)->tls_handshakes, 0); /* plain */
    t_stop(&env);
}

/* Another CA, a certificate for another name, an expired one: those nodes vote error with the
 * reason, the four good ones make the quorum of seven. */
static void bad_certificates_vote_error(void **state)
{
    (void)state;
    t_env env;
    fixture_tls_conf confs[7] = {t_conf("other-server", false), t_conf("wrongname", false),
                                 t_conf("expired", false),      t_conf("server", false),
                                 t_conf("server", false),       t_conf("server", false),
                                 t_conf("server", false)};
    t_start(&env, 7, confs, false);
    const char *urls[7];
    for (unsigned i = 0; i < 7; i++)
        urls[i] = env.tls->servers[i].url;
    urls[1] = env.tls->servers[1].name_url; /* "localhost" against a wrong.example certificate */
    redlock_options o;
    t_options(&o);
    redlock_client *c = t_client(&env, urls, 7, &o);
    h_record rec, rel;
    if (h_acquire(&env.h, c, "tls-bad-certs", 10000, NULL, &rec) != 0) {
        h_dump_record("acquire", &rec);
        fail_msg("the four good nodes should have made the quorum");
    }
    assert_int_equal(h_release(&env.h, rec.lock, &rel), 0);
    redlock_lock_free(rec.lock);
    assert_int_equal(rel.votes_yes, 4);
    assert_int_equal(rel.votes_error, 3);
    t_expect_error(&rel, 0,
                   "tls: certificate verify failed (unable to get local issuer "
                   "certificate)");
    t_expect_error(&rel, 1, "tls: host name mismatch (the certificate is not for localhost)");
    t_expect_error(&rel, 2, "tls: certificate verify failed (certificate has expired)");
    for (unsigned i = 3; i < 7; i++)
        assert_int_equal(rel.node_vote[i], REDLOCK_VOTE_YES);
    /* An address is checked against the certificate's IP names. */
    redlock_client *c2 = t_client(&env, (const char *const[]){env.tls->servers[1].url}, 1, &o);
    char last[160];
    if (!t_wait_node_error(&env, c2, 0,
                           "tls: host name mismatch (the certificate is not for "
                           "127.0.0.1)",
                           30000, last))
        fail_msg("node error \"%s\"", last);
    h_close_client(&env.h, c2);
    t_stop(&env);
}

/* A certificate whose subject's CN is localhost but that names no host (no subjectAltName) is
 * refused for localhost: host names are matched against the DNS names only (RFC 6125). */
static void cn_only_certificate_refused(void **state)
{
    (void)state;
    t_env env;
    fixture_tls_conf confs[3] = {t_conf("cn-only", false), t_conf("server", false),
                                 t_conf("server", false)};
    t_start(&env, 3, confs, false);
    const char *urls[3] = {env.tls->servers[0].name_url, env.tls->servers[1].name_url,
                           env.tls->servers[2].name_url};
    redlock_options o;
    t_options(&o);
    redlock_client *c = t_client(&env, urls, 3, &o);
    h_record rec, rel;
    assert_int_equal(h_acquire(&env.h, c, "tls-cn-only", 10000, NULL, &rec), 0);
    assert_int_equal(h_release(&env.h, rec.lock, &rel), 0);
    redlock_lock_free(rec.lock);
    assert_int_equal(rel.votes_yes, 2);
    t_expect_error(&rel, 0, "tls: host name mismatch (the certificate is not for localhost)");
    h_close_client(&env.h, c);
    t_stop(&env);
}

/* Two of five nodes require a client certificate and the client has none: they vote error and
 * say why; with a certificate from an unrelated CA they say it was rejected. */
static void missing_client_certificate(void **state)
{
    (void)state;
    t_env env;
    fixture_tls_conf confs[5] = {t_conf("server", true), t_conf("server", true),
                                 t_conf("server", false), t_conf("server", false),
                                 t_conf("server", false)};
    t_start(&env, 5, confs, false);
    redlock_options o;
    t_options(&o);
    redlock_client *c = t_client(&env, env.tls->urls, 5, &o);
    h_record rec, rel;
    assert_int_equal(h_acquire(&env.h, c, "tls-no-cert", 10000, NULL, &rec), 0);
    assert_int_equal(h_release(&env.h, rec.lock, &rel), 0);
    redlock_lock_free(rec.lock);
    assert_int_equal(rel.votes_yes, 3);
    t_expect_error(&rel, 0, "tls: server requires a client certificate");
    t_expect_error(&rel, 1, "tls: server requires a client certificate");
    h_close_client(&env.h, c);

    /* With a certificate from an unrelated CA the server sends an alert and closes. In TLS 1.3
     * the client has finished its side of the handshake and written its first commands by then;
     * the server closes with them unread, so its TCP stack sends a reset, and a client that had
     * not read the alert before the reset came (a slow one: under valgrind, every time) loses it
     * with the reset. The library then says what it can still tell, the other message; either
     * names the client certificate. */
    o.tls_cert_file = t_path("other-client.crt");
    o.tls_key_file = t_path("other-client.key");
    c = t_client(&env, env.tls->urls, 5, &o);
    char last[160];
    if (!t_wait_node_error(&env, c, 0, "client certificate", 30000, last))
        fail_msg("node 0 error \"%s\"", last);
    /* ("tls: server rejected the client certificate (...)" or "tls: server closed the connection
     * after the handshake (did it reject the client certificate?)"), never "requires". */
    if (strstr(last, "requires a client certificate") != NULL)
        fail_msg("node 0 error \"%s\"", last);
    t_stop(&env);
}

/* The options are checked when the client is made; the key's path is never repeated. */
static void options_checked_at_creation(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    const char *urls[1] = {"rediss://127.0.0.1:1"};
    redlock_client *c = NULL;
    char err[512];
    redlock_options o;
    t_options(&o);

    o.tls_ca_file = "/nonexistent/ca.pem";
    assert_int_equal(redlock_client_new(&loop, urls, 1, &o, &c, err, sizeof(err)), REDLOCK_EINVAL);
    assert_non_null(strstr(err, "tls_ca_file: cannot load /nonexistent/ca.pem"));

    t_options(&o);
    o.tls_ca_dir = "/nonexistent-dir";
    o.tls_ca_file = NULL;
    assert_int_equal(redlock_client_new(&loop, urls, 1, &o, &c, err, sizeof(err)), REDLOCK_EINVAL);
    assert_non_null(strstr(err, "tls_ca_dir"));

    t_options(&o);
    o.tls_cert_file = t_path("client.crt");
    assert_int_equal(redlock_client_new(&loop, urls, 1, &o, &c, err, sizeof(err)), REDLOCK_EINVAL);
    assert_non_null(strstr(err, "go together"));

    /* A key that does not belong to the certificate, and a key file that does not exist: the
     * message names the option, never the key's path. */
    char key_path[600];
    snprintf(key_path, sizeof(key_path), "%s", t_path("other-client.key"));
    o.tls_key_file = key_path;
    assert_int_equal(redlock_client_new(&loop, urls, 1, &o, &c, err, sizeof(err)), REDLOCK_EINVAL);
    assert_non_null(strstr(err, "tls_key_file: the private key does not match tls_cert_file"));
    assert_null(strstr(err, key_path));
    snprintf(key_path, sizeof(key_path), "%s/" KEY_MARKER ".key", t_certs);
    assert_int_equal(redlock_client_new(&loop, urls, 1, &o, &c, err, sizeof(err)), REDLOCK_EINVAL);
    assert_non_null(strstr(err, "tls_key_file: cannot load the private key"));
    assert_null(strstr(err, KEY_MARKER));

    t_options(&o);
    o.tls_server_name = "";
    assert_int_equal(redlock_client_new(&loop, urls, 1, &o, &c, err, sizeof(err)), REDLOCK_EINVAL);
    assert_non_null(strstr(err, "tls_server_name"));

    /* Without a rediss:// node the TLS options are not looked at. */
    t_options(&o);
    o.tls_ca_file = "/nonexistent/ca.pem";
    const char *plain[1] = {"redis://127.0.0.1:1"};
    assert_int_equal(redlock_client_new(&loop, plain, 1, &o, &c, err, sizeof(err)), 0);
    redlock_client_close(c, NULL, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* A CA directory instead of a file, and a server-name override: an IP URL verified as
 * "localhost", and an override no certificate has fails every node. */
static void ca_dir_and_server_name(void **state)
{
    (void)state;
    t_env env;
    fixture_tls_conf conf = t_conf("server", false);
    t_start(&env, 3, &conf, true);
    redlock_options o;
    t_options(&o);
    o.tls_ca_file = NULL;
    o.tls_ca_dir = t_path("ca-dir");
    o.tls_server_name = "localhost";
    redlock_client *c = t_client(&env, env.tls->urls, 3, &o);
    assert_true(t_wait_votes(&env, c, 3, 30000));
    h_close_client(&env.h, c);

    o.tls_server_name = "wrong.example";
    c = t_client(&env, env.tls->urls, 3, &o);
    char last[160];
    if (!t_wait_node_error(&env, c, 2,
                           "tls: host name mismatch (the certificate is not for wrong.example)",
                           30000, last))
        fail_msg("node error \"%s\"", last);
    t_stop(&env);
}

/* Verification off: servers with an unknown CA are accepted, and a node error says the check
 * was off. */
static void insecure_says_so(void **state)
{
    (void)state;
    t_env env;
    fixture_tls_conf conf = t_conf("other-server", false);
    t_start(&env, 3, &conf, true);
    redlock_options o;
    t_options(&o);
    o.tls_insecure = true;
    redlock_client *c = t_client(&env, env.tls->urls, 3, &o);
    assert_true(t_wait_votes(&env, c, 3, 30000));
    assert_int_equal(fixture_kill(&env.tls->servers[0].cluster, 0), 0);
    char last[160];
    if (!t_wait_node_error(&env, c, 0, "[tls verification off]", 30000, last))
        fail_msg("node 0 error \"%s\"", last);
    h_close_client(&env.h, c);

    o.tls_insecure = false; /* the same servers fail verification */
    c = t_client(&env, env.tls->urls, 3, &o);
    if (!t_wait_node_error(&env, c, 1, "tls: certificate verify failed", 30000, last))
        fail_msg("node 1 error \"%s\"", last);
    assert_null(strstr(last, "[tls verification off]"));
    t_stop(&env);
}

typedef struct burst {
    int done;
    int ok;
} burst;

static void on_burst(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)result;
    burst *b = data;
    b->done++;
    b->ok += status == 0;
    redlock_lock_free(lock);
}

/* 200 acquires made in one loop turn leave each TLS node in a few writes (one SSL_write each),
 * not 200: the first goes at once, the rest ride together when it completes. */
static void batch_leaves_in_few_writes(void **state)
{
    (void)state;
    t_env env;
    fixture_tls_conf conf = t_conf("server", false);
    t_start(&env, 3, &conf, true);
    redlock_options o;
    t_options(&o);
    redlock_client *c = t_client(&env, env.tls->urls, 3, &o);
    assert_true(t_wait_votes(&env, c, 3, 30000));
    uint64_t before[3];
    for (unsigned i = 0; i < 3; i++)
        before[i] = t_stats(c, i)->writes;
    enum { N = 200 };
    burst b = {0, 0};
    for (int k = 0; k < N; k++) {
        char name[32];
        int len = snprintf(name, sizeof(name), "tls-burst-%d", k);
        assert_int_equal(redlock_acquire(c, name, (size_t)len, 10000, NULL, on_burst, &b), 0);
    }
    assert_true(h_run_until(&env.h.loop, &b.done, N, 30000));
    assert_int_equal(b.ok, N);
    for (unsigned i = 0; i < 3; i++) {
        uint64_t writes = t_stats(c, i)->writes - before[i];
        if (writes > 10)
            fail_msg("node %u: %llu writes for %d commands", i, (unsigned long long)writes, N);
    }
    t_stop(&env);
}

int main(void)
{
    t_main_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(five_tls_nodes),
        cmocka_unit_test(mutual_tls),
        cmocka_unit_test(mixed_tls_and_plain),
        cmocka_unit_test(bad_certificates_vote_error),
        cmocka_unit_test(cn_only_certificate_refused),
        cmocka_unit_test(missing_client_certificate),
        cmocka_unit_test(options_checked_at_creation),
        cmocka_unit_test(ca_dir_and_server_name),
        cmocka_unit_test(insecure_says_so),
        cmocka_unit_test(batch_leaves_in_few_writes),
    };
    return cmocka_run_group_tests_name("tls", tests, NULL, NULL);
}
