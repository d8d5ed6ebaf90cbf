/* SPDX-License-Identifier: MIT */
/* test_cli.c - the redlock tool's one-shot commands and its command line, against real
 * redis-server processes: usage errors (exit 64, nothing sent), acquire, release, extend and
 * status with their JSON, a slow node, no quorum, passwords, escaping, the environment, quiet,
 * a closed stdout, and valgrind. `run` is in test_cli_run.c. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "cli_harness.h"
#include "fake_redis.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "redlock.h"

#define PASSWORD "pw-S3cret"

/* ---- usage errors: exit 64, one line on stderr, nothing sent ------------------------------- */

typedef struct usage_case {
    const char *name;
    const char *args[12];  /* "@NODES": the shared cluster's list; "@DUP", "@DUPPW", "@GAP" */
    const char *env_nodes; /* value for $REDLOCK_NODES ("@NODES", "@GAP" allowed), or NULL */
    const char *expect;    /* in the stderr line */
    const char *secret;    /* must not appear in any output */
} usage_case;

static const usage_case usage_cases[] = {
    {"unknown long option", {"--bogus", "acquire", "usage-k"}, "@NODES", "unknown option", NULL},
    {"unknown short option", {"-x", "acquire", "usage-k"}, "@NODES", "unknown option '-x'", NULL},
    {"unknown option with a URL value",
     {"--nodez=redis://:" PASSWORD "@127.0.0.1:1", "acquire", "usage-k"},
     "@NODES",
     "--nodez",
     PASSWORD},
    {"option without its value",
     {"acquire", "usage-k", "--ttl"},
     "@NODES",
     "unexpected argument",
     NULL},
    {"value missing at the end", {"--ttl"}, "@NODES", "needs a value", NULL},
    {"flag with a value", {"--quiet=yes", "acquire", "usage-k"}, "@NODES", "takes no value", NULL},
    {"duration: unknown unit", {"-t", "10x", "acquire", "usage-k"}, "@NODES", "unknown unit", NULL},
    {"duration: negative", {"-t", "-5s", "acquire", "usage-k"}, "@NODES", "negative", NULL},
    {"duration: empty", {"--ttl=", "acquire", "usage-k"}, "@NODES", "empty duration", NULL},
    {"duration: overflow",
     {"-t", "99999999999999999999999", "acquire", "usage-k"},
     "@NODES",
     "too long",
     NULL},
    {"duration: hours overflow",
     {"-w", "2000000000h", "acquire", "usage-k"},
     "@NODES",
     "too long",
     NULL},
    {"duration: sub-millisecond",
     {"-t", "1.5ms", "acquire", "usage-k"},
     "@NODES",
     "whole number of milliseconds",
     NULL},
    {"duration: fraction without digits",
     {"-t", "1.s", "acquire", "usage-k"},
     "@NODES",
     "digits after",
     NULL},
    {"duration: ttl too short", {"-t", "5ms", "acquire", "usage-k"}, "@NODES", "too short", NULL},
    {"duration: not a number",
     {"--wait", "soon", "acquire", "usage-k"},
     "@NODES",
     "not a duration",
     NULL},
    {"duration: node timeout 0", {"-T", "0", "acquire", "usage-k"}, "@NODES", "too short", NULL},
    {"duration: node timeout over 1h",
     {"-T", "2h", "acquire", "usage-k"},
     "@NODES",
     "too long",
     NULL},
    {"empty key", {"acquire", ""}, "@NODES", "KEY must not be empty", NULL},
    {"empty key for run", {"run", "", "--", "true"}, "@NODES", "KEY must not be empty", NULL},
    {"missing key", {"status"}, "@NODES", "missing KEY", NULL},
    {"bad URL scheme",
     {"-n", "http://127.0.0.1:1", "acquire", "usage-k"},
     "@NODES",
     "node 0",
     NULL},
    {"bad URL port", {"-n", "redis://127.0.0.1:99999", "acquire", "usage-k"}, NULL, "node 0", NULL},
    {"bad URL with a password",
     {"-n", "redis://:" PASSWORD "@127.0.0.1:99999", "acquire", "usage-k"},
     NULL,
     "node 0",
     PASSWORD},
    {"no nodes", {"acquire", "usage-k"}, NULL, "no nodes", NULL},
    {"blank REDLOCK_NODES", {"acquire", "usage-k"}, "  ", "no nodes", NULL},
    {"empty element in --nodes", {"-n", "@GAP", "acquire", "usage-k"}, NULL, "URL 2", NULL},
    {"empty element in REDLOCK_NODES", {"acquire", "usage-k"}, "@GAP", "REDLOCK_NODES", NULL},
    {"duplicated node", {"-n", "@DUP", "acquire", "usage-k"}, NULL, "same as node 0", NULL},
    {"duplicated node with a password",
     {"-n", "@DUPPW", "acquire", "usage-k"},
     NULL,
     "same as node 0",
     PASSWORD},
    {"duplicated node in REDLOCK_NODES", {"acquire", "usage-k"}, "@DUP", "same as node 0", NULL},
    {"missing command", {"-q"}, "@NODES", "missing command", NULL},
    {"unknown command", {"grab", "usage-k"}, "@NODES", "unknown command 'grab'", NULL},
    {"stray URL as command",
     {"redis://:" PASSWORD "@127.0.0.1:1", "acquire", "usage-k"},
     "@NODES",
     "unknown command",
     PASSWORD},
    {"run without --", {"run", "usage-k", "touch", "@MARKER"}, "@NODES", "expected '--'", NULL},
    {"run without command", {"run", "usage-k", "--"}, "@NODES", "missing COMMAND", NULL},
    {"release without token", {"release", "usage-k"}, "@NODES", "missing TOKEN", NULL},
    {"extend with empty token",
     {"extend", "usage-k", ""},
     "@NODES",
     "TOKEN must not be empty",
     NULL},
    {"extra argument",
     {"acquire", "usage-k", "extra"},
     "@NODES",
     "unexpected argument 'extra'",
     NULL},
    {"quiet does not hide usage errors",
     {"-q", "-t", "abc", "acquire", "usage-k"},
     "@NODES",
     "--ttl",
     NULL},
};
#define N_USAGE_CASES (sizeof(usage_cases) / sizeof(usage_cases[0]))

static const char *expand(const char *arg, char *buf, size_t len)
{
    const char *url0 = shared.servers[0].url;
    if (strcmp(arg, "@NODES") == 0)
        return shared_nodes;
    if (strcmp(arg, "@DUP") == 0)
        snprintf(buf, len, "%s,%s,%s", url0, shared.servers[1].url, url0);
    else if (strcmp(arg, "@DUPPW") == 0)
        snprintf(buf, len, "redis://:%s@127.0.0.1:%d,redis://:%s@127.0.0.1:%d", PASSWORD,
                 shared.servers[0].port, PASSWORD, shared.servers[0].port);
    else if (strcmp(arg, "@GAP") == 0)
        snprintf(buf, len, "%s,,%s", url0, shared.servers[1].url);
    else if (strcmp(arg, "@MARKER") == 0)
        marker_path(buf, len, "usage-marker");
    else
        return arg;
    return buf;
}

static void reset_stats(fixture_cluster *c)
{
    for (unsigned i = 0; i < c->n; i++) {
        redisReply *r = fixture_command(c, i, "CONFIG RESETSTAT");
        assert_non_null(r);
        freeReplyObject(r);
    }
}

/* No lock command (SET, EVAL, EVALSHA) reached any server since reset_stats. */
static void expect_no_lock_commands(fixture_cluster *c)
{
    static const char *const forbidden[] = {
        "cmdstat_set:", "cmdstat_eval:", "cmdstat_evalsha:", "cmdstat_del:"};
    for (unsigned i = 0; i < c->n; i++) {
        redisReply *r = fixture_command(c, i, "INFO commandstats");
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_STRING);
        for (size_t k = 0; k < sizeof(forbidden) / sizeof(forbidden[0]); k++)
            if (strstr(r->str, forbidden[k]) != NULL)
                fail_msg("node %u saw %s", i, forbidden[k]);
        freeReplyObject(r);
    }
}

static void usage_error(void **state)
{
    const usage_case *uc = *state;
    char bufs[12][1024], env_buf[1100], env_expanded[1024];
    const char *args[13];
    size_t n = 0;
    for (; n < 12 && uc->args[n] != NULL; n++)
        args[n] = expand(uc->args[n], bufs[n], sizeof(bufs[n]));
    args[n] = NULL;
    const char *env[2] = {NULL, NULL};
    if (uc->env_nodes != NULL) {
        snprintf(env_buf, sizeof(env_buf), "REDLOCK_NODES=%s",
                 expand(uc->env_nodes, env_expanded, sizeof(env_expanded)));
        env[0] = env_buf;
    }
    reset_stats(&shared);
    proc p;
    tool_start_bare(&p, env, args);
    tool_finish(&p, TOOL_TIMEOUT_MS);
    expect_status(&p, 64);
    assert_int_equal(p.out_len, 0);
    if (text_lines(p.err) != 1 || strncmp(p.err, "redlock: ", 9) != 0 ||
        p.err[p.err_len - 1] != '\n')
        fail_msg("stderr is not one \"redlock: \" line: [%s]", p.err);
    if (strstr(p.err, uc->expect) == NULL)
        fail_msg("stderr lacks \"%s\": %s", uc->expect, p.err);
    if (uc->secret != NULL && (strstr(p.err, uc->secret) != NULL))
        fail_msg("the password appears in: %s", p.err);
    expect_no_lock_commands(&shared);
    expect_key_everywhere(&shared, "usage-k", NULL);
    char marker[512];
    marker_path(marker, sizeof(marker), "usage-marker");
    assert_false(file_exists(marker));
    proc_free(&p);
}

/* ---- help and version ---------------------------------------------------------------------- */

static void help_documents_everything(void **state)
{
    (void)state;
    proc p;
    TOOL(&p, NULL, "--help");
    expect_status(&p, 0);
    static const char *const must[] = {"run KEY -- COMMAND",
                                       "acquire KEY",
                                       "release KEY TOKEN",
                                       "extend KEY TOKEN",
                                       "status KEY",
                                       "--nodes",
                                       "--ttl",
                                       "--wait",
                                       "--node-timeout",
                                       "--grace",
                                       "--quiet",
                                       "--help",
                                       "--version",
                                       "REDLOCK_NODES",
                                       "REDLOCK_TOKEN",
                                       "REDLOCK_KEY",
                                       "   64",
                                       "   69",
                                       "   70",
                                       "   71",
                                       "   75",
                                       "  126",
                                       "  127",
                                       "128+N",
                                       "    0"};
    for (size_t i = 0; i < sizeof(must) / sizeof(must[0]); i++)
        if (strstr(p.out, must[i]) == NULL)
            fail_msg("--help does not mention \"%s\"", must[i]);
    assert_int_equal(p.err_len, 0);
    proc_free(&p);
    /* Help wins over whatever else is on the line. */
    TOOL(&p, NULL, "run", "-h");
    expect_status(&p, 0);
    proc_free(&p);
    TOOL(&p, NULL, "--version");
    expect_status(&p, 0);
    assert_non_null(strstr(p.out, "redlock " REDLOCK_VERSION_STRING " (libredlock "));
    assert_non_null(strstr(p.out, "libuv"));
    proc_free(&p);
}

/* ---- acquire, release, extend, status ------------------------------------------------------ */

static void acquire_prints_json_and_second_is_busy(void **state)
{
    (void)state;
    proc p;
    long long start = now_ms();
    TOOL(&p, NULL, "-n", shared_nodes, "acquire", "cli:acquire");
    long long took = now_ms() - start;
    expect_status(&p, 0);
    jv *v = json_line(&p);
    assert_true(jv_is_str(jv_get(v, "resource"), "cli:acquire"));
    assert_true(jv_is_str(jv_get(v, "status"), "REDLOCK_OK"));
    assert_null(jv_get(v, "error"));
    const char *token = jstr(v, "token");
    assert_true(is_hex_token(token));
    expect_validity(jint(v, "validity_ms"), 10000, took);
    assert_int_equal(jint(v, "attempts"), 1);
    check_nodes(v, &shared, false);
    assert_true(count_votes(v, "yes") >= 2);
    assert_non_null(strstr(p.err, "redlock: acquired cli:acquire (validity "));
    char *tok = strdup(token);
    jv_free(v);
    proc_free(&p);
    /* The lock is left held for its ttl: every node has the token. */
    expect_key_everywhere(&shared, "cli:acquire", tok);
    expect_pttl(server_pttl(&shared, 0, "cli:acquire"), 10000, now_ms() - start);

    /* A second acquire: busy, 75, and JSON that says why. */
    TOOL(&p, NULL, "-n", shared_nodes, "acquire", "cli:acquire");
    expect_status(&p, 75);
    v = json_line(&p);
    assert_true(jv_is_str(jv_get(v, "status"), "REDLOCK_EBUSY"));
    assert_non_null(jv_get(v, "error"));
    assert_null(jv_get(v, "token"));
    assert_null(jv_get(v, "validity_ms"));
    check_nodes(v, &shared, false);
    assert_true(count_votes(v, "no") >= 2);
    assert_non_null(strstr(p.err, "locked by another holder"));
    jv_free(v);
    proc_free(&p);
    expect_key_everywhere(&shared, "cli:acquire", tok);
    free(tok);
}

static void release_frees_and_wrong_token_deletes_nothing(void **state)
{
    (void)state;
    char *token = acquire_shared("cli:release", "10s");
    expect_key_everywhere(&shared, "cli:release", token);

    proc p;
    TOOL(&p, NULL, "-n", shared_nodes, "--all", "release", "cli:release",
         "0123456789abcdef0123456789abcdef");
    expect_status(&p, 70); /* this token held nothing: "lapsed" */
    jv *v = json_line(&p);
    assert_int_equal(jint(v, "released"), 0);
    assert_true(jv_is_str(jv_get(v, "token"), "0123456789abcdef0123456789abcdef"));
    assert_null(jv_get(v, "validity_ms"));
    check_nodes(v, &shared, false);
    assert_int_equal(count_votes(v, "no"), 3);
    assert_non_null(strstr(p.err, "had lapsed"));
    jv_free(v);
    proc_free(&p);
    expect_key_everywhere(&shared, "cli:release", token);

    TOOL(&p, NULL, "-n", shared_nodes, "--all", "release", "cli:release", token);
    expect_status(&p, 0);
    v = json_line(&p);
    assert_true(jv_is_str(jv_get(v, "status"), "REDLOCK_OK"));
    assert_true(jv_is_str(jv_get(v, "token"), token));
    assert_int_equal(jint(v, "released"), 3);
    jv_free(v);
    proc_free(&p);
    expect_key_everywhere(&shared, "cli:release", NULL);

    /* Free again: another acquire gets it at once. */
    free(acquire_shared("cli:release", "10s"));
    free(token);
}

static void extend_renews_then_reports_lost(void **state)
{
    (void)state;
    char *token = acquire_shared("cli:extend", "2s");
    proc p;
    long long start = now_ms();
    TOOL(&p, NULL, "-n", shared_nodes, "-t", "60s", "extend", "cli:extend", token);
    long long took = now_ms() - start;
    expect_status(&p, 0);
    jv *v = json_line(&p);
    assert_true(jv_is_str(jv_get(v, "status"), "REDLOCK_OK"));
    assert_true(jv_is_str(jv_get(v, "token"), token));
    expect_validity(jint(v, "validity_ms"), 60000, took);
    check_nodes(v, &shared, false);
    jv_free(v);
    proc_free(&p);
    /* Every node's key was renewed: its PTTL is past the old 2 s ttl (the last node's extend may
     * land a moment after the quorum's), and no more than 60 s since the extend started. */
    for (unsigned i = 0; i < shared.n; i++) {
        long long pttl = -3, until = now_ms() + LATE_NODE_WAIT_MS;
        while ((pttl = server_pttl(&shared, i, "cli:extend")) <= 2000 && now_ms() < until)
            sleep_ms(10);
        expect_pttl(pttl, 60000, now_ms() - start);
    }

    /* The keys are gone (expired, or deleted by an operator): extend says the lock is lost. */
    for (unsigned i = 0; i < shared.n; i++)
        server_del(&shared, i, "cli:extend");
    TOOL(&p, NULL, "-n", shared_nodes, "extend", "cli:extend", token);
    expect_status(&p, 70);
    v = json_line(&p);
    assert_true(jv_is_str(jv_get(v, "status"), "REDLOCK_ELOST"));
    assert_null(jv_get(v, "validity_ms"));
    jv_free(v);
    assert_non_null(strstr(p.err, "lost"));
    proc_free(&p);
    expect_key_everywhere(&shared, "cli:extend", NULL);
    free(token);
}

static void status_shows_holder_everywhere(void **state)
{
    (void)state;
    proc p;
    TOOL(&p, NULL, "-n", shared_nodes, "status", "cli:status");
    expect_status(&p, 0);
    jv *v = json_line(&p);
    assert_true(jv_is_str(jv_get(v, "status"), "REDLOCK_OK"));
    assert_int_equal(jv_get(v, "holder")->type, JV_NULL);
    check_nodes(v, &shared, true);
    for (unsigned i = 0; i < shared.n; i++) {
        const jv *n = jv_at(jv_get(v, "nodes"), i);
        assert_int_equal(jv_get(n, "holder")->type, JV_NULL);
        assert_int_equal(jint(n, "pttl_ms"), -2);
        assert_int_equal(jv_get(n, "error")->type, JV_NULL);
    }
    assert_non_null(strstr(p.err, "is free"));
    jv_free(v);
    proc_free(&p);

    long long start = now_ms();
    char *token = acquire_shared("cli:status", "10s");
    expect_key_everywhere(&shared, "cli:status", token);
    TOOL(&p, NULL, "-n", shared_nodes, "status", "cli:status");
    long long since = now_ms() - start;
    expect_status(&p, 0);
    v = json_line(&p);
    assert_true(jv_is_str(jv_get(v, "holder"), token));
    for (unsigned i = 0; i < shared.n; i++) {
        const jv *n = jv_at(jv_get(v, "nodes"), i);
        assert_true(jv_is_str(jv_get(n, "holder"), token));
        expect_pttl(jint(n, "pttl_ms"), 10000, since);
    }
    assert_non_null(strstr(p.err, "is held by"));
    jv_free(v);
    proc_free(&p);
    free(token);
}

/* ---- a slow node: acquire and extend reach every node before the tool exits --------------- */

/* Run the tool on extra's nodes with node 2 stopped: the round is decided by nodes 0 and 1, and
 * the result printed, while node 2 has not even finished its handshake. Then let node 2 go on:
 * the tool must still be running (waiting for it), and exit once node 2 took the command. */
static void run_with_node_2_stopped(proc *p, const char *const *args, jv **result)
{
    assert_int_equal(fixture_pause(&extra, 2), 0);
    tool_start(p, NULL, args);
    if (!proc_wait_for_output(p, "\n", false, TOOL_TIMEOUT_MS))
        fail_msg("no result while node 2 is stopped; stderr:\n%s", p->err);
    *result = json_line(p);
    /* Decided without node 2: it had not answered (nor even connected). */
    assert_true(jv_is_str(jv_get(jv_at(jv_get(*result, "nodes"), 2), "vote"), "none"));
    /* The tool waits for it (within its 10 s node timeout) instead of exiting. */
    proc_wait(p, 200);
    if (p->exited)
        fail_msg("the tool exited before node 2 answered; stderr:\n%s", p->err);
    assert_int_equal(fixture_resume(&extra, 2), 0);
    tool_finish(p, TOOL_TIMEOUT_MS);
    expect_status(p, 0);
}

/* A key under the lock's name that holds application data (a string without a ttl, a hash) is
 * named as such by status, with the fix; no lock can ever be taken there. */
static void status_names_application_data(void **state)
{
    (void)state;
    const char *key = "cli:app-data";
    for (int kind = 0; kind < 2; kind++) {
        for (unsigned i = 0; i < shared.n; i++) {
            redisReply *r = kind == 0 ? fixture_command(&shared, i, "SET %s some-value", key)
                                      : fixture_command(&shared, i, "HSET %s field v", key);
            assert_non_null(r);
            freeReplyObject(r);
        }
        proc p;
        TOOL(&p, NULL, "-n", shared_nodes, "status", key);
        if (strstr(p.err, "redlock: cli:app-data holds application data on 3 of 3 nodes") == NULL ||
            strstr(p.err, "--prefix") == NULL)
            fail_msg("%s: stderr:\n%s", kind == 0 ? "a string without ttl" : "a hash", p.err);
        assert_null(strstr(p.err, "is held by"));
        proc_free(&p);
        TOOL(&p, NULL, "-n", shared_nodes, "acquire", key);
        expect_status(&p, 75);
        proc_free(&p);
        if (kind == 1) { /* the queue's script reads the key: the nodes' WRONGTYPE, named */
            TOOL(&p, NULL, "-q", "-n", shared_nodes, "-w", "1s", "acquire", key);
            assert_non_null(strstr(p.err, "redlock: cli:app-data holds application data on "));
            proc_free(&p);
        }
        for (unsigned i = 0; i < shared.n; i++)
            server_del(&shared, i, key);
    }
}

static void won_round_reaches_slow_node(void **state)
{
    (void)state;
    assert_int_equal(fixture_start(&extra, 3, NULL), 0);
    char nodes[1024];
    node_list(&extra, NULL, nodes, sizeof(nodes));
    proc p;
    jv *v;
    run_with_node_2_stopped(&p, ARGS("-n", nodes, "-t", "20s", "acquire", "cli:slow"), &v);
    char *token = strdup(jstr(v, "token"));
    jv_free(v);
    proc_free(&p);
    /* The tool waited for the slow node, so its SET is there now (no waiting here). */
    char *val = server_get(&extra, 2, "cli:slow");
    if (val == NULL || strcmp(val, token) != 0)
        fail_msg("the slow node does not hold the lock: %s", val != NULL ? val : "(no key)");
    free(val);

    /* extend, likewise: the slow node's ttl is renewed too. */
    long long start = now_ms();
    run_with_node_2_stopped(&p, ARGS("-n", nodes, "-t", "60s", "extend", "cli:slow", token), &v);
    jv_free(v);
    proc_free(&p);
    expect_pttl(server_pttl(&extra, 2, "cli:slow"), 60000, now_ms() - start);

    TOOL(&p, NULL, "-n", nodes, "--all", "release", "cli:slow", token);
    expect_status(&p, 0);
    v = json_line(&p);
    assert_int_equal(jint(v, "released"), 3);
    jv_free(v);
    proc_free(&p);
    free(token);
    fixture_stop(&extra);
}

/* A release to a stopped node: the tool connects afresh, and the stopped server's kernel accepts
 * the connection but nobody answers its handshake. The release goes with the handshake, so the
 * tool exits at its own deadline (-T 1s: it does not wait for the node), and the server deletes
 * the key once it continues, with the tool long gone. */
static void release_reaches_a_stopped_node(void **state)
{
    (void)state;
    assert_int_equal(fixture_start(&extra, 3, NULL), 0);
    char nodes[1024];
    node_list(&extra, NULL, nodes, sizeof(nodes));
    proc p;
    TOOL(&p, NULL, "-n", nodes, "-t", "30s", "acquire", "cli:stopped");
    expect_status(&p, 0);
    jv *v = json_line(&p);
    char *token = strdup(jstr(v, "token"));
    jv_free(v);
    proc_free(&p);
    expect_key_everywhere(&extra, "cli:stopped", token);

    assert_int_equal(fixture_pause(&extra, 2), 0);
    TOOL(&p, NULL, "-n", nodes, "-T", "1s", "release", "cli:stopped", token);
    expect_status(&p, 0);
    v = json_line(&p);
    assert_int_equal(jint(v, "released"), 2);
    jv_free(v);
    proc_free(&p);
    assert_int_equal(fixture_resume(&extra, 2), 0);
    long long start = now_ms();
    long long pttl;
    while ((pttl = server_pttl(&extra, 2, "cli:stopped")) != -2 &&
           now_ms() - start < LATE_NODE_WAIT_MS)
        sleep_ms(20);
    if (pttl != -2)
        fail_msg("node 2 kept the key after it continued (pttl %lld ms)", pttl);
    free(token);
    fixture_stop(&extra);
}

static void no_quorum_exits_69(void **state)
{
    (void)state;
    fixture_cluster *c = &extra;
    assert_int_equal(fixture_start(c, 5, NULL), 0);
    char nodes[1024];
    node_list(c, NULL, nodes, sizeof(nodes));
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(fixture_kill(c, i), 0);
    proc p;
    TOOL(&p, NULL, "-n", nodes, "acquire", "cli:noq");
    expect_status(&p, 69);
    jv *v = json_line(&p);
    assert_true(jv_is_str(jv_get(v, "status"), "REDLOCK_ENOQUORUM"));
    check_nodes(v, c, false);
    assert_int_equal(count_votes(v, "error"), 3);
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(jv_get(jv_at(jv_get(v, "nodes"), i), "error")->type, JV_STRING);
    jv_free(v);
    assert_non_null(strstr(p.err, "no quorum"));
    /* Each node's line says what happened to it, once: the refusals, and the healthy nodes as
     * not waited for (not as a vote of "none"). */
    assert_null(strstr(p.err, "none ("));
    for (unsigned i = 0; i < 5; i++) {
        unsigned seen = 0;
        for (const char *at = p.err; (at = strstr(at, c->servers[i].url)) != NULL; at++)
            seen++;
        if (seen != 1)
            fail_msg("node %u named %u times; stderr:\n%s", i, seen, p.err);
    }
    proc_free(&p);

    TOOL(&p, NULL, "-n", nodes, "status", "cli:noq");
    expect_status(&p, 69);
    v = json_line(&p);
    assert_true(jv_is_str(jv_get(v, "status"), "REDLOCK_ENOQUORUM"));
    for (unsigned i = 0; i < 5; i++) {
        const jv *n = jv_at(jv_get(v, "nodes"), i);
        assert_int_equal(jv_get(n, "error")->type, i < 3 ? JV_STRING : JV_NULL);
        assert_int_equal(jv_get(n, "pttl_ms")->type, i < 3 ? JV_NULL : JV_INT);
    }
    jv_free(v);
    proc_free(&p);

    /* --quiet does not hide failing nodes. */
    TOOL(&p, NULL, "-q", "-n", nodes, "acquire", "cli:noq");
    expect_status(&p, 69);
    assert_non_null(strstr(p.err, "redlock: no quorum for cli:noq"));
    assert_non_null(strstr(p.err, "connection refused"));
    proc_free(&p);

    TOOL(&p, NULL, "-n", nodes, "--all", "release", "cli:noq", "0123456789abcdef0123456789abcdef");
    expect_status(&p, 69);
    proc_free(&p);
    TOOL(&p, NULL, "-n", nodes, "run", "cli:noq", "--", "true");
    expect_status(&p, 69);
    proc_free(&p);
    fixture_stop(c);
}

/* ---- passwords, escaping, environment, quiet ----------------------------------------------- */

static void expect_no_secret(const proc *p, const char *secret)
{
    if (strstr(p->out, secret) != NULL || strstr(p->err, secret) != NULL)
        fail_msg("\"%s\" appears in the output:\n%s\n%s", secret, p->out, p->err);
}

static void password_never_shown(void **state)
{
    (void)state;
    fixture_cluster *c = &extra;
    assert_int_equal(fixture_start(c, 3, "requirepass " PASSWORD "\n"), 0);
    char nodes[1024], wrong[1024], redacted[128];
    node_list(c, PASSWORD, nodes, sizeof(nodes));
    node_list(c, "wrong-Pw0rd", wrong, sizeof(wrong));
    snprintf(redacted, sizeof(redacted), "redis://:***@127.0.0.1:%d", c->servers[0].port);

    proc p;
    TOOL(&p, NULL, "-n", nodes, "acquire", "cli:pw");
    expect_status(&p, 0);
    expect_no_secret(&p, PASSWORD);
    jv *v = json_line(&p);
    char *token = strdup(jstr(v, "token"));
    assert_true(jv_is_str(jv_get(jv_at(jv_get(v, "nodes"), 0), "url"), redacted));
    jv_free(v);
    proc_free(&p);
    for (unsigned i = 0; i < c->n; i++) {
        char *val = NULL;
        long long until = now_ms() + LATE_NODE_WAIT_MS;
        while ((val = server_get_pw(c, i, PASSWORD, "cli:pw", NULL)) == NULL && now_ms() < until)
            sleep_ms(10);
        assert_non_null(val);
        assert_string_equal(val, token);
        free(val);
    }

    const char *env[] = {NULL, NULL};
    char env_nodes[1100];
    snprintf(env_nodes, sizeof(env_nodes), "REDLOCK_NODES=%s", nodes);
    env[0] = env_nodes;
    TOOL(&p, env, "status", "cli:pw");
    expect_status(&p, 0);
    expect_no_secret(&p, PASSWORD);
    assert_non_null(strstr(p.out, redacted));
    proc_free(&p);
    TOOL(&p, env, "extend", "cli:pw", token);
    expect_status(&p, 0);
    expect_no_secret(&p, PASSWORD);
    proc_free(&p);
    TOOL(&p, NULL, "-n", nodes, "--all", "release", "cli:pw", token);
    expect_status(&p, 0);
    expect_no_secret(&p, PASSWORD);
    v = json_line(&p);
    assert_int_equal(jint(v, "released"), 3);
    jv_free(v);
    proc_free(&p);
    TOOL(&p, NULL, "-n", nodes, "run", "cli:pw", "--", "true");
    expect_status(&p, 0);
    expect_no_secret(&p, PASSWORD);
    proc_free(&p);

    /* A wrong password: every node refuses, and neither password shows. */
    TOOL(&p, NULL, "-n", wrong, "acquire", "cli:pw");
    expect_status(&p, 69);
    expect_no_secret(&p, "wrong-Pw0rd");
    expect_no_secret(&p, PASSWORD);
    v = json_line(&p);
    assert_true(count_votes(v, "error") >= 2); /* the round is lost at the second refusal */
    jv_free(v);
    proc_free(&p);
    free(token);
    fixture_stop(c);
}

static bool printable_text(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c != '\n' && (c < 0x20 || c >= 0x7f))
            return false;
    }
    return true;
}

static void any_byte_in_key_is_escaped(void **state)
{
    (void)state;
    /* quote, backslash, slash, newline, tab, 0x01, DEL, valid UTF-8 (e-acute), a stray 0xff,
     * an encoded surrogate (invalid UTF-8), a truncated sequence at the end. */
    static const char key[] = "k\"\\/\n\t\x01\x7f\xc3\xa9\xff\xed\xa0\x80.\xe2\x82";
    static const char escaped[] =
        "\"resource\":\"k\\\"\\\\/\\n\\t\\u0001\\u007f\xc3\xa9\\u00ff\\u00ed\\u00a0\\u0080."
        "\\u00e2\\u0082\"";
    static const char decoded[] = "k\"\\/\n\t\x01\x7f\xc3\xa9\xc3\xbf\xc3\xad\xc2\xa0\xc2\x80."
                                  "\xc3\xa2\xc2\x82";
    proc p;
    TOOL(&p, NULL, "-n", shared_nodes, "acquire", key);
    expect_status(&p, 0);
    if (strstr(p.out, escaped) == NULL)
        fail_msg("resource not escaped as expected: %s", p.out);
    jv *v = json_line(&p);
    const jv *res = jv_get(v, "resource");
    assert_int_equal(res->len, strlen(decoded));
    assert_memory_equal(res->str, decoded, res->len);
    char *token = strdup(jstr(v, "token"));
    jv_free(v);
    /* Human messages stay printable. */
    assert_true(printable_text(p.err, p.err_len));
    proc_free(&p);
    /* The key on the servers is the exact bytes given. */
    expect_key_everywhere(&shared, key, token);

    TOOL(&p, NULL, "-n", shared_nodes, "status", key);
    expect_status(&p, 0);
    v = json_line(&p);
    assert_true(jv_is_str(jv_get(v, "holder"), token));
    jv_free(v);
    assert_true(printable_text(p.err, p.err_len));
    proc_free(&p);

    /* A token with odd bytes is escaped the same way (and, not ours, deletes nothing: 70). */
    TOOL(&p, NULL, "-n", shared_nodes, "--all", "release", key, "t\x01\"\xfe");
    expect_status(&p, 70);
    assert_non_null(strstr(p.out, "\"token\":\"t\\u0001\\\"\\u00fe\""));
    proc_free(&p);
    TOOL(&p, NULL, "-n", shared_nodes, "--all", "release", key, token);
    expect_status(&p, 0);
    proc_free(&p);
    expect_key_everywhere(&shared, key, NULL);

    /* A key that starts with '-' comes after "--". */
    TOOL(&p, NULL, "-n", shared_nodes, "run", "--", "-dash-key", "--", "sh", "-c",
         "test \"$REDLOCK_KEY\" = -dash-key");
    expect_status(&p, 0);
    proc_free(&p);
    free(token);
}

/* A server's text reaches no terminal raw: the error of a node whose every answer holds escape
 * sequences and a bell (two fakes of three, so the round is lost and each node's error is
 * printed) shows them as '?' on stderr and in the JSON, in the acquire's messages and in the
 * check's table. */
static void server_text_is_printable(void **state)
{
    (void)state;
    fake_redis *fakes[2] = {NULL, NULL};
    char nodes[256];
    for (int i = 0; i < 2; i++) {
        fakes[i] = fake_redis_start(FAKE_ERROR, "ERR \x1b[31mred\x1b[0m \007bell");
        assert_non_null(fakes[i]);
    }
    snprintf(nodes, sizeof(nodes), "redis://127.0.0.1:%d,redis://127.0.0.1:%d,redis://127.0.0.1:%d",
             shared.servers[0].port, fake_redis_port(fakes[0]), fake_redis_port(fakes[1]));
    proc p;
    TOOL(&p, NULL, "-n", nodes, "acquire", "cli:escape");
    expect_status(&p, 69);
    assert_true(printable_text(p.err, p.err_len));
    assert_true(printable_text(p.out, p.out_len));
    assert_non_null(strstr(p.err, "ERR ?[31mred?[0m ?bell"));
    jv *v = json_line(&p);
    assert_true(jv_is_str(jv_get(jv_at(jv_get(v, "nodes"), 1), "error"), "ERR ?[31mred?[0m ?bell"));
    jv_free(v);
    proc_free(&p);
    TOOL(&p, NULL, "-n", nodes, "check");
    expect_status(&p, 69);
    assert_true(printable_text(p.err, p.err_len));
    assert_non_null(strstr(p.err, "?[31mred"));
    proc_free(&p);
    for (int i = 0; i < 2; i++)
        fake_redis_stop(fakes[i]);
}

static void nodes_from_environment(void **state)
{
    (void)state;
    char env_nodes[1100];
    snprintf(env_nodes, sizeof(env_nodes), "REDLOCK_NODES= %s , %s ,%s", shared.servers[0].url,
             shared.servers[1].url, shared.servers[2].url);
    const char *env[] = {env_nodes, NULL};
    proc p;
    TOOL(&p, env, "acquire", "cli:env");
    expect_status(&p, 0);
    jv *v = json_line(&p);
    check_nodes(v, &shared, false);
    char *token = strdup(jstr(v, "token"));
    jv_free(v);
    proc_free(&p);

    /* --nodes wins over the environment (here a list that could not work). */
    const char *bad_env[] = {"REDLOCK_NODES=redis://127.0.0.1:1", NULL};
    TOOL(&p, bad_env, "-n", shared_nodes, "--all", "release", "cli:env", token);
    expect_status(&p, 0);
    v = json_line(&p);
    assert_int_equal(jint(v, "released"), 3);
    jv_free(v);
    proc_free(&p);

    /* Options may also come between the command and KEY, and -n may be repeated. */
    char n0[200], n12[400];
    snprintf(n0, sizeof(n0), "%s", shared.servers[0].url);
    snprintf(n12, sizeof(n12), "%s,%s", shared.servers[1].url, shared.servers[2].url);
    long long start = now_ms();
    TOOL(&p, NULL, "acquire", "-n", n0, "--nodes", n12, "--ttl=2.5s", "cli:env");
    long long took = now_ms() - start;
    expect_status(&p, 0);
    v = json_line(&p);
    check_nodes(v, &shared, false);
    expect_validity(jint(v, "validity_ms"), 2500, took);
    jv_free(v);
    proc_free(&p);
    free(token);
}

static void quiet_silences_messages(void **state)
{
    (void)state;
    proc p;
    TOOL(&p, NULL, "-q", "-n", shared_nodes, "acquire", "cli:quiet");
    expect_status(&p, 0);
    assert_int_equal(p.err_len, 0);
    jv_free(json_line(&p));
    proc_free(&p);
    TOOL(&p, NULL, "--quiet", "-n", shared_nodes, "acquire", "cli:quiet");
    expect_status(&p, 75);
    assert_int_equal(p.err_len, 0);
    jv_free(json_line(&p));
    proc_free(&p);
    TOOL(&p, NULL, "-qn", shared_nodes, "run", "cli:quiet2", "--", "true");
    expect_status(&p, 0);
    assert_int_equal(p.err_len, 0);
    assert_int_equal(p.out_len, 0);
    proc_free(&p);
}

/* Started with stdout closed (a careless cron wrapper): no crash, and no silent success either,
 * since the token never reached anyone. */
static void closed_stdout_is_an_error(void **state)
{
    (void)state;
    proc p;
    const char *argv[] = {"sh",
                          "-c",
                          "exec \"$0\" \"$@\" >&-",
                          tool_path,
                          TOOL_NODE_TIMEOUT,
                          "-n",
                          shared_nodes,
                          "acquire",
                          "cli:closed",
                          NULL};
    const char *env[] = {"REDLOCK_NODES", NULL};
    proc_start(&p, "/bin/sh", argv, env);
    tool_finish(&p, TOOL_TIMEOUT_MS);
    expect_status(&p, 71);
    assert_non_null(strstr(p.err, "cannot write the result"));
    proc_free(&p);
    /* run: COMMAND inherits the closed stdout, and its status is what counts. */
    const char *run_argv[] = {"sh",
                              "-c",
                              "exec \"$0\" \"$@\" >&-",
                              tool_path,
                              TOOL_NODE_TIMEOUT,
                              "-n",
                              shared_nodes,
                              "run",
                              "cli:closed2",
                              "--",
                              "sh",
                              "-c",
                              "echo x || exit 4",
                              NULL};
    proc_start(&p, "/bin/sh", run_argv, env);
    tool_finish(&p, TOOL_TIMEOUT_MS);
    expect_status(&p, 4);
    proc_free(&p);
    expect_key_everywhere(&shared, "cli:closed2", NULL);
}

/* ---- valgrind ------------------------------------------------------------------------------ */

static bool find_valgrind(char *out, size_t len)
{
    const char *path = getenv("PATH");
    if (path == NULL)
        return false;
    char *copy = strdup(path), *save = NULL;
    bool found = false;
    for (char *dir = strtok_r(copy, ":", &save); dir != NULL; dir = strtok_r(NULL, ":", &save)) {
        snprintf(out, len, "%s/valgrind", dir);
        if (access(out, X_OK) == 0) {
            found = true;
            break;
        }
    }
    free(copy);
    return found;
}

static void valgrind_run(const char *valgrind, int expected, const char *const *args)
{
    const char *argv[40];
    size_t n = 0;
    static const char *const vg[] = {"--quiet",
                                     "--error-exitcode=99",
                                     "--leak-check=full",
                                     "--show-leak-kinds=definite,indirect,possible",
                                     "--errors-for-leak-kinds=definite,indirect,possible",
                                     "--child-silent-after-fork=yes"};
    argv[n++] = "valgrind";
    for (size_t i = 0; i < sizeof(vg) / sizeof(vg[0]); i++)
        argv[n++] = vg[i];
    argv[n++] = tool_path;
    argv[n++] = TOOL_NODE_TIMEOUT;
    for (size_t i = 0; args[i] != NULL; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    proc p;
    const char *env[] = {"REDLOCK_NODES", NULL};
    proc_start(&p, valgrind, argv, env);
    tool_finish(&p, 60000);
    expect_status(&p, expected);
    proc_free(&p);
}

static void valgrind_clean(void **state)
{
    (void)state;
    char valgrind[512];
    const char *sanitized = getenv("REDLOCK_SANITIZED");
    if ((sanitized != NULL && strcmp(sanitized, "1") == 0) ||
        !find_valgrind(valgrind, sizeof(valgrind))) {
        /* Not cmocka's skip(): its "not ok # SKIP" counts as a failure in meson's TAP reader;
         * test/run counts a case that prints "# SKIP" as skipped. */
        printf("# SKIP valgrind not run (sanitized build, or no valgrind in PATH)\n");
        return;
    }
    valgrind_run(valgrind, 0, ARGS("-n", shared_nodes, "acquire", "cli:vg"));
    valgrind_run(valgrind, 75, ARGS("-n", shared_nodes, "acquire", "cli:vg"));
    /* Several attempts, each its own round and token, with the retry timer between them. */
    valgrind_run(valgrind, 75, ARGS("-n", shared_nodes, "-w", "600ms", "acquire", "cli:vg"));
    valgrind_run(valgrind, 0, ARGS("-n", shared_nodes, "check", "--delayed-restart"));
    valgrind_run(valgrind, 0, ARGS("-n", shared_nodes, "status", "cli:vg"));
    valgrind_run(valgrind, 70, ARGS("-n", shared_nodes, "extend", "cli:vg", "not-the-token"));
    valgrind_run(valgrind, 70,
                 ARGS("-n", shared_nodes, "--all", "release", "cli:vg", "not-the-token"));
    valgrind_run(valgrind, 0,
                 ARGS("-n", shared_nodes, "-t", "3s", "run", "cli:vg2", "--", "sleep", "1.5"));
    valgrind_run(valgrind, 127, ARGS("-n", shared_nodes, "run", "cli:vg2", "--", "/nonexistent"));
    valgrind_run(valgrind, 64, ARGS("-n", shared_nodes, "-t", "1x", "acquire", "cli:vg"));
    char dup[512];
    snprintf(dup, sizeof(dup), "%s,%s", shared.servers[0].url, shared.servers[0].url);
    valgrind_run(valgrind, 64, ARGS("-n", dup, "acquire", "cli:vg"));
    /* check's TLS context: made and freed (nothing listens on port 1), or refused. */
    valgrind_run(valgrind, 69, ARGS("-n", "rediss://127.0.0.1:1", "check"));
    valgrind_run(valgrind, 64,
                 ARGS("--tls-ca", "/nonexistent/ca.pem", "-n", "rediss://127.0.0.1:1", "check"));
}

int main(void)
{
    static const struct CMUnitTest fixed[] = {
        cmocka_unit_test(help_documents_everything),
        cmocka_unit_test(acquire_prints_json_and_second_is_busy),
        cmocka_unit_test(release_frees_and_wrong_token_deletes_nothing),
        cmocka_unit_test(extend_renews_then_reports_lost),
        cmocka_unit_test(status_shows_holder_everywhere),
        cmocka_unit_test(status_names_application_data),
        cmocka_unit_test(won_round_reaches_slow_node),
        cmocka_unit_test(release_reaches_a_stopped_node),
        cmocka_unit_test(no_quorum_exits_69),
        cmocka_unit_test(password_never_shown),
        cmocka_unit_test(any_byte_in_key_is_escaped),
        cmocka_unit_test(server_text_is_printable),
        cmocka_unit_test(nodes_from_environment),
        cmocka_unit_test(quiet_silences_messages),
        cmocka_unit_test(closed_stdout_is_an_error),
        cmocka_unit_test(valgrind_clean),
    };
    enum { N_FIXED = sizeof(fixed) / sizeof(fixed[0]) };
    static struct CMUnitTest tests[N_USAGE_CASES + N_FIXED];
    static char names[N_USAGE_CASES][128];
    for (size_t i = 0; i < N_USAGE_CASES; i++) {
        snprintf(names[i], sizeof(names[i]), "usage: %s", usage_cases[i].name);
        tests[i] = (struct CMUnitTest){names[i], usage_error, NULL, NULL, (void *)&usage_cases[i]};
    }
    for (size_t i = 0; i < N_FIXED; i++)
        tests[N_USAGE_CASES + i] = fixed[i];
    static const char *const temp_files[] = {"usage-marker", NULL};
    return cli_main("cli", tests, N_USAGE_CASES + N_FIXED, temp_files);
}
