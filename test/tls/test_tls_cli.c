/* SPDX-License-Identifier: MIT */
/* test_tls_cli.c - the redlock tool (and examples/counter.c) on rediss:// nodes: the --tls-*
 * options and their $REDLOCK_TLS_* variables (the command line wins), mutual TLS, handshake
 * failures that cost the quorum exit 69 with each node's reason in the JSON and on stderr,
 * --tls-insecure, `redlock check` over TLS, --version, and no key path or password in any output
 * the user did not write themselves. The tool is build/tools/redlock ($REDLOCK_TOOL), run as a
 * child process. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonp.h"
#include "proc.h"
#include "tls_harness.h"

#define TOOL_TIMEOUT_MS 60000
#define SECRET "tls-cli-s3cret"

static const char *tool_path;
static const char *counter_path;

/* Run the tool with --node-timeout=10s and args (NULL-terminated) and env ("NAME=VALUE", "NAME"
 * unsets; NULL-terminated or NULL); REDLOCK_NODES and every REDLOCK_TLS_* variable are unset unless
 * env sets them. */
static void run_tool(proc *p, const char *const *env, const char *const *args)
{
    const char *argv[32];
    size_t n = 0;
    argv[n++] = "redlock";
    /* The node timeout also bounds the first connection (TCP, TLS, AUTH...): seconds, for a
     * loaded machine and sanitizer builds; no test here is about a deadline. */
    argv[n++] = "--node-timeout=10s";
    for (size_t k = 0; args[k] != NULL; k++) {
        assert_true(n < 31);
        argv[n++] = args[k];
    }
    argv[n] = NULL;
    const char *full_env[32] = {"REDLOCK_NODES",    "REDLOCK_TLS_CA",  "REDLOCK_TLS_CA_DIR",
                                "REDLOCK_TLS_CERT", "REDLOCK_TLS_KEY", NULL};
    size_t e = 5;
    for (size_t k = 0; env != NULL && env[k] != NULL; k++) {
        assert_true(e < 31);
        full_env[e++] = env[k];
    }
    full_env[e] = NULL;
    proc_start(p, tool_path, argv, full_env);
    if (!proc_wait(p, TOOL_TIMEOUT_MS))
        fail_msg("the tool did not exit; stderr:\n%s", p->err);
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define ENV(...) ((const char *const[]){__VA_ARGS__, NULL})

static void expect_status(const proc *p, int status)
{
    if (p->status != status)
        fail_msg("exit status %d, expected %d\nstdout: %s\nstderr: %s", p->status, status, p->out,
                 p->err);
}

static jv *json_line(const proc *p)
{
    char err[200];
    jv *v = jv_parse(p->out, p->out_len, err, sizeof(err));
    if (v == NULL)
        fail_msg("stdout is not one JSON line (%s): %s", err, p->out);
    return v;
}

/* Neither stdout nor stderr contains text. */
static void expect_hidden(const proc *p, const char *text)
{
    if (strstr(p->out, text) != NULL || strstr(p->err, text) != NULL)
        fail_msg("\"%s\" shows in the output:\nstdout: %s\nstderr: %s", text, p->out, p->err);
}

/* "rediss://[:PASSWORD@]127.0.0.1:PORT,..." for every server. */
static void node_list(t_env *env, char *out, size_t len, const char *password)
{
    size_t used = 0;
    for (unsigned i = 0; i < env->tls->n; i++)
        used += (size_t)snprintf(out + used, len - used, "%srediss://%s%s%s127.0.0.1:%d",
                                 i > 0 ? "," : "", password != NULL ? ":" : "",
                                 password != NULL ? password : "", password != NULL ? "@" : "",
                                 env->tls->servers[i].tls_port);
}

static void acquire_release_with_flags_and_env(void **state)
{
    (void)state;
    t_env env;
    fixture_tls_conf conf = t_conf("server", false);
    t_start(&env, 3, &conf, true);
    char nodes[1024];
    node_list(&env, nodes, sizeof(nodes), NULL);
    proc p;
    run_tool(&p, NULL, ARGS("--tls-ca", t_path("ca.crt"), "-n", nodes, "acquire", "cli-tls"));
    expect_status(&p, 0);
    jv *v = json_line(&p);
    char token[128];
    snprintf(token, sizeof(token), "%s", jv_get(v, "token")->str);
    jv_free(v);
    proc_free(&p);
    assert_int_equal(t_count_holding(&env, "cli-tls", token), 3);

    /* The CA from the environment; the command line wins over it. */
    char env_ca[600], env_bad[600];
    snprintf(env_ca, sizeof(env_ca), "REDLOCK_TLS_CA=%s", t_path("ca.crt"));
    snprintf(env_bad, sizeof(env_bad), "REDLOCK_TLS_CA=%s", t_path("other-ca.crt"));
    run_tool(&p, ENV(env_bad),
             ARGS("--tls-ca", t_path("ca.crt"), "-n", nodes, "status", "cli-tls"));
    expect_status(&p, 0);
    proc_free(&p);
    run_tool(&p, ENV(env_ca), ARGS("-n", nodes, "release", "cli-tls", token));
    expect_status(&p, 0);
    proc_free(&p);
    assert_int_equal(t_count_holding(&env, "cli-tls", token), 0);

    /* A CA file that cannot be loaded is a usage error, named as the tool's option. */
    run_tool(&p, ENV("REDLOCK_TLS_CA=/nonexistent/ca.pem"),
             ARGS("-n", nodes, "acquire", "cli-tls"));
    expect_status(&p, 64);
    assert_non_null(strstr(p.err, "--tls-ca: cannot load /nonexistent/ca.pem"));
    proc_free(&p);
    /* A CA directory works as well. */
    run_tool(&p, NULL, ARGS("--tls-ca-dir", t_path("ca-dir"), "-n", nodes, "status", "cli-tls"));
    expect_status(&p, 0);
    proc_free(&p);
    t_stop(&env);
}

/* Servers that require a client certificate: with one (flags or environment) the lock works;
 * without, every handshake fails, the tool exits 69 and says why per node, in the JSON and on
 * stderr. No key path shows anywhere, not even when the key cannot be used. */
static void mutual_tls_and_handshake_failures(void **state)
{
    (void)state;
    t_env env;
    fixture_tls_conf conf = t_conf("server", true);
    t_start(&env, 3, &conf, true);
    char nodes[1024];
    node_list(&env, nodes, sizeof(nodes), NULL);
    const char *ca = t_path("ca.crt");
    char cert[600], key[600];
    snprintf(cert, sizeof(cert), "%s", t_path("client.crt"));
    snprintf(key, sizeof(key), "%s", t_path("client.key"));
    proc p;
    run_tool(&p, NULL,
             ARGS("--tls-ca", ca, "--tls-cert", cert, "--tls-key", key, "-n", nodes, "acquire",
                  "cli-mtls"));
    expect_status(&p, 0);
    expect_hidden(&p, key);
    jv *v = json_line(&p);
    char token[128];
    snprintf(token, sizeof(token), "%s", jv_get(v, "token")->str);
    jv_free(v);
    proc_free(&p);

    char env_ca[600], env_cert[700], env_key[700];
    snprintf(env_ca, sizeof(env_ca), "REDLOCK_TLS_CA=%s", ca);
    snprintf(env_cert, sizeof(env_cert), "REDLOCK_TLS_CERT=%s", cert);
    snprintf(env_key, sizeof(env_key), "REDLOCK_TLS_KEY=%s", key);
    run_tool(&p, ENV(env_ca, env_cert, env_key), ARGS("-n", nodes, "release", "cli-mtls", token));
    expect_status(&p, 0);
    expect_hidden(&p, key);
    proc_free(&p);

    /* No certificate: no quorum. */
    run_tool(&p, NULL, ARGS("--tls-ca", ca, "-n", nodes, "acquire", "cli-mtls"));
    expect_status(&p, 69);
    v = json_line(&p);
    assert_true(jv_is_str(jv_get(v, "status"), "REDLOCK_ENOQUORUM"));
    const jv *list = jv_get(v, "nodes");
    assert_non_null(list);
    /* The round is lost at the second failure (3 nodes): every node that voted says why; one
     * may not have voted yet. */
    unsigned said_why = 0;
    for (size_t i = 0; i < 3; i++) {
        const jv *node = jv_at(list, i);
        if (jv_is_str(jv_get(node, "vote"), "none"))
            continue;
        const jv *err = jv_get(node, "error");
        if (err == NULL || err->type != JV_STRING ||
            strstr(err->str, "tls: server requires a client certificate") == NULL)
            fail_msg("node %zu: error is not the TLS reason: %s", i, p.out);
        said_why++;
    }
    assert_true(said_why >= 2);
    jv_free(v);
    assert_non_null(strstr(p.err, "tls: server requires a client certificate"));
    proc_free(&p);

    /* A key that does not match, a key that does not exist: exit 64, the path never shown. */
    char wrong_key[600];
    snprintf(wrong_key, sizeof(wrong_key), "%s", t_path("other-client.key"));
    run_tool(&p, NULL,
             ARGS("--tls-ca", ca, "--tls-cert", cert, "--tls-key", wrong_key, "-n", nodes,
                  "acquire", "cli-mtls"));
    expect_status(&p, 64);
    assert_non_null(strstr(p.err, "--tls-key: the private key does not match --tls-cert"));
    expect_hidden(&p, wrong_key);
    proc_free(&p);
    char missing_key[600];
    snprintf(missing_key, sizeof(missing_key), "%s/no-such-dir/secret-name.key", t_certs);
    char env_missing[700];
    snprintf(env_missing, sizeof(env_missing), "REDLOCK_TLS_KEY=%s", missing_key);
    run_tool(&p, ENV(env_missing),
             ARGS("--tls-ca", ca, "--tls-cert", cert, "-n", nodes, "acquire", "cli-mtls"));
    expect_status(&p, 64);
    assert_non_null(strstr(p.err, "--tls-key: cannot load the private key"));
    expect_hidden(&p, "secret-name");
    proc_free(&p);
    t_stop(&env);
}

/* Servers whose certificates the CA does not vouch for: exit 69 with the reason; with
 * --tls-insecure the lock is taken. A password in the URLs never shows. */
static void verification_failure_and_insecure(void **state)
{
    (void)state;
    t_env env;
    fixture_tls_conf conf = t_conf("other-server", false);
    t_start_extra(&env, 3, &conf, true, "requirepass " SECRET "\n");
    char nodes[1024];
    node_list(&env, nodes, sizeof(nodes), SECRET);
    proc p;
    run_tool(&p, NULL, ARGS("--tls-ca", t_path("ca.crt"), "-n", nodes, "acquire", "cli-verify"));
    expect_status(&p, 69);
    assert_non_null(strstr(p.out, "tls: certificate verify failed (unable to get local issuer "
                                  "certificate)"));
    assert_non_null(strstr(p.err, "tls: certificate verify failed"));
    expect_hidden(&p, SECRET);
    proc_free(&p);

    run_tool(
        &p, NULL,
        ARGS("--tls-ca", t_path("ca.crt"), "--tls-insecure", "-n", nodes, "acquire", "cli-verify"));
    expect_status(&p, 0);
    expect_hidden(&p, SECRET);
    proc_free(&p);
    /* The name to verify can be given: "localhost" is in the certificate, but its CA is not
     * trusted, so it still fails. */
    run_tool(&p, NULL,
             ARGS("--tls-ca", t_path("ca.crt"), "--tls-server-name", "localhost", "-n", nodes,
                  "status", "cli-verify"));
    expect_status(&p, 69);
    expect_hidden(&p, SECRET);
    proc_free(&p);
    t_stop(&env);
}

/* examples/counter.c with its lock on five TLS nodes (mutual TLS, the CA from the environment):
 * the count is exact. */
static void counter_over_tls(void **state)
{
    (void)state;
    t_env env;
    fixture_tls_conf conf = t_conf("server", true);
    t_start(&env, 5, &conf, true);
    char nodes[1024];
    node_list(&env, nodes, sizeof(nodes), NULL);
    char env_ca[600];
    snprintf(env_ca, sizeof(env_ca), "REDLOCK_TLS_CA=%s", t_path("ca.crt"));
    char cert[600], key[600];
    snprintf(cert, sizeof(cert), "%s", t_path("client.crt"));
    snprintf(key, sizeof(key), "%s", t_path("client.key"));
    const char *argv[] = {
        "counter",    "--nodes", nodes,       "--data", env.tls->servers[0].plain_url,
        "--procs",    "3",       "--incr",    "40",     "--reset",
        "--tls-cert", cert,      "--tls-key", key,      NULL};
    const char *envs[] = {"REDLOCK_TLS_CA", "REDLOCK_TLS_CERT", "REDLOCK_TLS_KEY", env_ca, NULL};
    proc p;
    proc_start(&p, counter_path, argv, envs);
    if (!proc_wait(&p, TOOL_TIMEOUT_MS * 2))
        fail_msg("the counter did not finish; stderr:\n%s", p.err);
    expect_status(&p, 0);
    char *count = t_get(&env, 0, "counter");
    assert_non_null(count);
    assert_string_equal(count, "120");
    free(count);
    proc_free(&p);
    t_stop(&env);
}

/* Node i of check's JSON line: its errors (or warnings) include text. */
static void expect_node_says(const jv *v, size_t i, const char *which, const char *text)
{
    const jv *list = jv_get(jv_at(jv_get(v, "nodes"), i), which);
    for (size_t k = 0; list != NULL && k < list->n; k++)
        if (strstr(jv_at(list, k)->str, text) != NULL)
            return;
    fail_msg("node %zu's %s do not say \"%s\"", i, which, text);
}

/* redlock check on rediss:// nodes: each is checked in TLS, with the client's verification, as a
 * plain node is (these servers' TLS ports speak nothing else, so a pass is a pass over TLS); a
 * server the CA does not vouch for, or one that wants a client certificate that was not given,
 * is that node's error with the TLS reason (exit 69); --tls-insecure passes with a warning that
 * says so; a CA file that cannot be loaded is a usage error before anything is sent. */
static void check_over_tls(void **state)
{
    (void)state;
    t_env env;
    fixture_tls_conf conf = t_conf("server", false);
    t_start_extra(&env, 3, &conf, true, "requirepass " SECRET "\n");
    char nodes[1024];
    node_list(&env, nodes, sizeof(nodes), SECRET);
    proc p;
    run_tool(&p, NULL,
             ARGS("--tls-ca", t_path("ca.crt"), "-n", nodes, "check", "--delayed-restart"));
    expect_status(&p, 0);
    expect_hidden(&p, SECRET);
    jv *v = json_line(&p);
    assert_true(jv_is_str(jv_get(v, "status"), "ok"));
    for (size_t i = 0; i < 3; i++) {
        const jv *n = jv_at(jv_get(v, "nodes"), i);
        assert_true(jv_get(n, "ok")->boolean);
        assert_true(jv_is_str(jv_get(n, "role"), "master"));
        assert_int_equal(jv_get(n, "errors")->n, 0);
        assert_int_equal(jv_get(n, "warnings")->n, 0);
        assert_int_equal(jv_get(n, "denied")->n, 0); /* every command went through */
    }
    jv_free(v);
    proc_free(&p);

    /* A CA that does not vouch for the servers: every node is an error that says why. */
    run_tool(&p, NULL,
             ARGS("--tls-ca", t_path("other-ca.crt"), "-n", nodes, "check", "--delayed-restart"));
    expect_status(&p, 69);
    v = json_line(&p);
    for (size_t i = 0; i < 3; i++)
        expect_node_says(v, i, "errors", "tls: certificate verify failed");
    jv_free(v);
    assert_non_null(strstr(p.err, "tls: certificate verify failed"));
    expect_hidden(&p, SECRET);
    proc_free(&p);

    /* Verification off: the nodes pass, and the deployment gets a warning (exit 1). */
    run_tool(&p, NULL,
             ARGS("--tls-ca", t_path("other-ca.crt"), "--tls-insecure", "-n", nodes, "check",
                  "--delayed-restart"));
    expect_status(&p, 1);
    v = json_line(&p);
    assert_true(jv_is_str(jv_get(v, "status"), "warn"));
    const jv *warnings = jv_get(v, "warnings");
    assert_int_equal(warnings->n, 1);
    assert_non_null(strstr(jv_at(warnings, 0)->str, "TLS verification is off"));
    for (size_t i = 0; i < 3; i++)
        assert_true(jv_get(jv_at(jv_get(v, "nodes"), i), "ok")->boolean);
    jv_free(v);
    proc_free(&p);

    /* A CA file that cannot be loaded: exit 64, nothing on stdout. */
    run_tool(&p, ENV("REDLOCK_TLS_CA=/nonexistent/ca.pem"), ARGS("-n", nodes, "check"));
    expect_status(&p, 64);
    assert_non_null(strstr(p.err, "--tls-ca: cannot load /nonexistent/ca.pem"));
    assert_int_equal(p.out_len, 0);
    proc_free(&p);
    t_stop(&env);

    /* Servers that require a client certificate: without one, each node says so; with one
     * (from the environment), all pass. */
    conf = t_conf("server", true);
    t_start(&env, 3, &conf, true);
    node_list(&env, nodes, sizeof(nodes), NULL);
    run_tool(&p, NULL,
             ARGS("--tls-ca", t_path("ca.crt"), "-n", nodes, "check", "--delayed-restart"));
    expect_status(&p, 69);
    v = json_line(&p);
    for (size_t i = 0; i < 3; i++)
        expect_node_says(v, i, "errors", "tls: server requires a client certificate");
    jv_free(v);
    proc_free(&p);
    char env_cert[700], env_key[700];
    snprintf(env_cert, sizeof(env_cert), "REDLOCK_TLS_CERT=%s", t_path("client.crt"));
    snprintf(env_key, sizeof(env_key), "REDLOCK_TLS_KEY=%s", t_path("client.key"));
    run_tool(&p, ENV(env_cert, env_key),
             ARGS("--tls-ca", t_path("ca.crt"), "-n", nodes, "check", "--delayed-restart"));
    expect_status(&p, 0);
    proc_free(&p);
    t_stop(&env);
}

static void version_says_tls(void **state)
{
    (void)state;
    proc p;
    run_tool(&p, NULL, ARGS("--version"));
    expect_status(&p, 0);
    assert_non_null(strstr(p.out, "TLS: OpenSSL"));
    proc_free(&p);
    run_tool(&p, NULL, ARGS("--help"));
    expect_status(&p, 0);
    static const char *const must[] = {"--tls-ca",       "--tls-ca-dir",       "--tls-cert",
                                       "--tls-key",      "--tls-server-name",  "--tls-insecure",
                                       "REDLOCK_TLS_CA", "REDLOCK_TLS_CA_DIR", "REDLOCK_TLS_CERT",
                                       "REDLOCK_TLS_KEY"};
    for (size_t i = 0; i < sizeof(must) / sizeof(must[0]); i++)
        if (strstr(p.out, must[i]) == NULL)
            fail_msg("--help does not mention %s", must[i]);
    proc_free(&p);
    /* Usage errors: nothing is sent, and a value is never repeated. */
    run_tool(&p, NULL, ARGS("--tls-key=", "-n", "rediss://127.0.0.1:1", "acquire", "k"));
    expect_status(&p, 64);
    assert_non_null(strstr(p.err, "--tls-key: empty value"));
    proc_free(&p);
    run_tool(&p, NULL, ARGS("--tls-insecure=yes", "-n", "rediss://127.0.0.1:1", "acquire", "k"));
    expect_status(&p, 64);
    assert_non_null(strstr(p.err, "option --tls-insecure takes no value"));
    proc_free(&p);
    run_tool(&p, NULL, ARGS("-n", "rediss://127.0.0.1:1", "acquire", "k", "--tls-cert"));
    expect_status(&p, 64);
    proc_free(&p);
}

int main(void)
{
    tool_path = getenv("REDLOCK_TOOL");
    counter_path = getenv("REDLOCK_COUNTER");
    if (tool_path == NULL || counter_path == NULL) {
        fprintf(stderr, "tls-cli: set REDLOCK_TOOL and REDLOCK_COUNTER to the executables\n");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    t_main_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(acquire_release_with_flags_and_env),
        cmocka_unit_test(mutual_tls_and_handshake_failures),
        cmocka_unit_test(verification_failure_and_insecure),
        cmocka_unit_test(counter_over_tls),
        cmocka_unit_test(check_over_tls),
        cmocka_unit_test(version_says_tls),
    };
    return cmocka_run_group_tests_name("tls-cli", tests, NULL, NULL);
}
