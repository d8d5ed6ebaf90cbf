/* SPDX-License-Identifier: MIT */
/* test_cli_check.c - `redlock check` against real redis-server processes: a healthy deployment,
 * one without persistence, one with an evicting policy, a replica among the masters, a user with
 * exactly the ACL that docs/operations.md recommends (and one short of it), two URLs of one
 * server, a node that is down or stopped, cluster:// nodes on real clusters the cluster fixture
 * forms (each master checked, an evicting master, wait_replicas against the replicas there are,
 * uncovered slots, a cluster master given again as a plain node), and what the check refuses
 * before it sends anything. Every run checks the JSON shape and that the probe key is gone
 * afterwards. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "cli_harness.h"
#include "cluster_fixture.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ACL_PASS "Ch3ck-Pw"

/* What every server's entry has: a plain node's, or a cluster master's. */
static void check_server_shape(const jv *server)
{
    assert_int_equal(jv_get(server, "ok")->type, JV_BOOL);
    assert_int_equal(jv_get(server, "warnings")->type, JV_ARRAY);
    assert_int_equal(jv_get(server, "errors")->type, JV_ARRAY);
    assert_int_equal(jv_get(server, "denied")->type, JV_ARRAY);
    /* ok is "no errors" */
    assert_int_equal(jv_get(server, "ok")->boolean, jv_get(server, "errors")->n == 0);
    static const char *const maybe[] = {"version",          "role",        "run_id",
                                        "maxmemory_policy", "appendfsync", "rtt_us",
                                        "clock_offset_ms",  "aof"};
    for (size_t k = 0; k < sizeof(maybe) / sizeof(maybe[0]); k++)
        assert_non_null(jv_get(server, maybe[k]));
}

/* A cluster node's entry: its own notes, and masters[], each a server's entry with an address;
 * the node is ok when it and every master have no errors. */
static void check_cluster_shape(const jv *node)
{
    assert_int_equal(jv_get(node, "ok")->type, JV_BOOL);
    assert_int_equal(jv_get(node, "warnings")->type, JV_ARRAY);
    assert_int_equal(jv_get(node, "errors")->type, JV_ARRAY);
    assert_non_null(jv_get(node, "cluster_state"));
    assert_int_equal(jv_get(node, "slots_covered")->type, JV_INT);
    assert_int_equal(jv_get(node, "wait_replicas")->type, JV_INT);
    const jv *masters = jv_get(node, "masters");
    assert_int_equal(masters->type, JV_ARRAY);
    bool ok = jv_get(node, "errors")->n == 0;
    for (size_t k = 0; k < masters->n; k++) {
        const jv *m = jv_at(masters, k);
        check_server_shape(m);
        assert_int_equal(jv_get(m, "address")->type, JV_STRING);
        assert_int_equal(jv_get(m, "slots")->type, JV_INT);
        assert_non_null(jv_get(m, "probe_key"));
        assert_non_null(jv_get(m, "connected_replicas"));
        ok = ok && jv_get(m, "ok")->boolean;
    }
    assert_int_equal(jv_get(node, "ok")->boolean, ok);
}

/* The JSON line's shape, for n nodes; returns it parsed. */
static jv *check_result(const proc *p, unsigned n, const char *status)
{
    jv *v = json_line(p);
    if (!jv_is_str(jv_get(v, "status"), status))
        fail_msg("status %s, expected %s; stdout:\n%s\nstderr:\n%s", jstr(v, "status"), status,
                 p->out, p->err);
    assert_int_equal(jv_get(v, "warnings")->type, JV_ARRAY);
    const jv *nodes = jv_get(v, "nodes");
    assert_non_null(nodes);
    assert_int_equal(nodes->type, JV_ARRAY);
    assert_int_equal(nodes->n, n);
    for (unsigned i = 0; i < n; i++) {
        const jv *node = jv_at(nodes, i);
        if (jv_get(node, "masters") != NULL)
            check_cluster_shape(node);
        else
            check_server_shape(node);
    }
    return v;
}

static const jv *node_at(const jv *v, unsigned i)
{
    return jv_at(jv_get(v, "nodes"), i);
}

/* Some string of the node's list `which` ("warnings", "errors") contains text. */
static bool node_says(const jv *v, unsigned i, const char *which, const char *text)
{
    const jv *list = jv_get(node_at(v, i), which);
    for (size_t k = 0; list != NULL && k < list->n; k++)
        if (strstr(jv_at(list, k)->str, text) != NULL)
            return true;
    return false;
}

static void expect_says(const jv *v, unsigned i, const char *which, const char *text)
{
    if (!node_says(v, i, which, text))
        fail_msg("node %u's %s do not mention \"%s\"", i, which, text);
}

/* The probe key the run reports is on no server of c (deleted, not left to expire). */
static void expect_probe_gone(const jv *v, fixture_cluster *c, const char *password)
{
    const char *key = jstr(v, "probe_key");
    assert_non_null(strstr(key, "redlock-check-"));
    for (unsigned i = 0; i < c->n; i++) {
        char *got = server_get_pw(c, i, password, key, NULL);
        if (got != NULL)
            fail_msg("the probe key %s is still on server %u", key, i);
    }
}

/* "redis://userinfo@127.0.0.1:PORT,..." for every server of c. */
static void user_nodes(const fixture_cluster *c, const char *userinfo, char *out, size_t len)
{
    size_t o = 0;
    out[0] = '\0';
    for (unsigned i = 0; i < c->n; i++) {
        int w = snprintf(out + o, len - o, "%sredis://%s@127.0.0.1:%d", i > 0 ? "," : "", userinfo,
                         c->servers[i].port);
        assert_true(w > 0 && (size_t)w < len - o);
        o += (size_t)w;
    }
}

/* Stop a cluster that ran with AOF: Redis keeps it in a directory of its own, which the
 * fixture (files only) cannot remove; its servers are stopped first so nothing writes there. */
static void stop_aof_cluster(fixture_cluster *c)
{
    for (unsigned i = 0; i < c->n; i++)
        fixture_kill(c, i);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf -- '%s/appendonlydir'", c->dir);
    assert_int_equal(system(cmd), 0);
    fixture_stop(c);
}

/* ---- a healthy deployment ------------------------------------------------------------------ */

static void healthy_nodes_pass(void **state)
{
    (void)state;
    proc p;
    /* The fixture runs without persistence: fine when restarts are delayed. */
    TOOL(&p, NULL, "-n", shared_nodes, "check", "--delayed-restart");
    expect_status(&p, 0);
    jv *v = check_result(&p, shared.n, "ok");
    assert_int_equal(jv_get(v, "warnings")->n, 0);
    for (unsigned i = 0; i < shared.n; i++) {
        const jv *n = node_at(v, i);
        assert_string_equal(jstr(n, "url"), shared.servers[i].url);
        assert_true(jv_get(n, "ok")->boolean);
        assert_int_equal(jv_get(n, "warnings")->n, 0);
        assert_string_equal(jstr(n, "role"), "master");
        assert_string_equal(jstr(n, "maxmemory_policy"), "noeviction");
        assert_true(strlen(jstr(n, "version")) > 0);
        assert_int_equal(strlen(jstr(n, "run_id")), 40);
        for (unsigned j = 0; j < i; j++)
            assert_string_not_equal(jstr(n, "run_id"), jstr(node_at(v, j), "run_id"));
        assert_true(jint(n, "rtt_us") >= 0);
        /* One clock on this machine: the offset is only the reading's own error, at most half
         * the time TIME took, which the node timeout (10 s here) bounds. */
        int64_t offset = jint(n, "clock_offset_ms");
        assert_true(offset >= -5001 && offset <= 5001);
        assert_false(jv_get(n, "aof")->boolean);
    }
    assert_non_null(strstr(p.err, "every node can serve locks"));
    expect_probe_gone(v, &shared, NULL);
    jv_free(v);
    proc_free(&p);

    /* Without --delayed-restart, no AOF is a warning on every node: exit 1. */
    TOOL(&p, NULL, "-n", shared_nodes, "check");
    expect_status(&p, 1);
    v = check_result(&p, shared.n, "warn");
    for (unsigned i = 0; i < shared.n; i++) {
        assert_true(jv_get(node_at(v, i), "ok")->boolean);
        expect_says(v, i, "warnings", "no AOF");
    }
    jv_free(v);
    proc_free(&p);

    /* Unix sockets, as the library takes them. */
    char unix_nodes[1024];
    snprintf(unix_nodes, sizeof(unix_nodes), "%s,%s,%s", shared.servers[0].unix_url,
             shared.servers[1].unix_url, shared.servers[2].unix_url);
    TOOL(&p, NULL, "-n", unix_nodes, "check", "--delayed-restart");
    expect_status(&p, 0);
    v = check_result(&p, shared.n, "ok");
    jv_free(v);
    proc_free(&p);

    /* --quiet: nothing on stderr when all is well. */
    TOOL(&p, NULL, "-q", "-n", shared_nodes, "check", "--delayed-restart");
    expect_status(&p, 0);
    assert_int_equal(p.err_len, 0);
    proc_free(&p);
}

static void persistence_always_passes(void **state)
{
    (void)state;
    assert_int_equal(fixture_start(&extra, 3, "appendonly yes\nappendfsync always\n"), 0);
    char nodes[1024];
    node_list(&extra, NULL, nodes, sizeof(nodes));
    proc p;
    TOOL(&p, NULL, "-n", nodes, "check");
    expect_status(&p, 0);
    jv *v = check_result(&p, extra.n, "ok");
    for (unsigned i = 0; i < extra.n; i++) {
        assert_true(jv_get(node_at(v, i), "aof")->boolean);
        assert_string_equal(jstr(node_at(v, i), "appendfsync"), "always");
    }
    jv_free(v);
    proc_free(&p);
    stop_aof_cluster(&extra);

    /* everysec may lose the last second of keys. */
    assert_int_equal(fixture_start(&extra, 3, "appendonly yes\nappendfsync everysec\n"), 0);
    node_list(&extra, NULL, nodes, sizeof(nodes));
    TOOL(&p, NULL, "-n", nodes, "check");
    expect_status(&p, 1);
    v = check_result(&p, extra.n, "warn");
    for (unsigned i = 0; i < extra.n; i++)
        expect_says(v, i, "warnings", "appendfsync everysec");
    jv_free(v);
    proc_free(&p);
    stop_aof_cluster(&extra);
}

/* ---- what makes a node unfit --------------------------------------------------------------- */

static void evicting_policy_warns(void **state)
{
    (void)state;
    assert_int_equal(fixture_start(&extra, 3, "maxmemory 64mb\nmaxmemory-policy volatile-lru\n"),
                     0);
    char nodes[1024];
    node_list(&extra, NULL, nodes, sizeof(nodes));
    proc p;
    TOOL(&p, NULL, "-n", nodes, "check", "--delayed-restart");
    expect_status(&p, 1);
    jv *v = check_result(&p, extra.n, "warn");
    for (unsigned i = 0; i < extra.n; i++) {
        assert_true(jv_get(node_at(v, i), "ok")->boolean); /* it still serves locks */
        assert_string_equal(jstr(node_at(v, i), "maxmemory_policy"), "volatile-lru");
        expect_says(v, i, "warnings", "maxmemory-policy volatile-lru may evict");
    }
    assert_non_null(strstr(p.err, "maxmemory-policy volatile-lru"));
    expect_probe_gone(v, &extra, NULL);
    jv_free(v);
    proc_free(&p);
    fixture_stop(&extra);
}

/* A replica answers every write READONLY; its master is told it has one. */
static void replica_is_an_error(void **state)
{
    (void)state;
    char conf[128];
    snprintf(conf, sizeof(conf), "replicaof 127.0.0.1 %d\n", shared.servers[0].port);
    assert_int_equal(fixture_start(&extra, 1, conf), 0);
    /* The master counts its replica once the replica has connected: wait for that. */
    long long until = now_ms() + TOOL_TIMEOUT_MS;
    for (;;) {
        redisReply *r = fixture_command(&shared, 0, "INFO replication");
        assert_non_null(r);
        bool linked = strstr(r->str, "connected_slaves:1") != NULL;
        freeReplyObject(r);
        if (linked)
            break;
        if (now_ms() >= until)
            fail_msg("the replica did not connect to its master");
        sleep_ms(20);
    }
    char nodes[1024];
    snprintf(nodes, sizeof(nodes), "%s,%s,%s", shared.servers[0].url, shared.servers[1].url,
             extra.servers[0].url);
    proc p;
    TOOL(&p, NULL, "-n", nodes, "check", "--delayed-restart");
    expect_status(&p, 69);
    jv *v = check_result(&p, 3, "error");
    assert_false(jv_get(node_at(v, 2), "ok")->boolean);
    assert_string_equal(jstr(node_at(v, 2), "role"), "slave");
    expect_says(v, 2, "errors", "locks need masters");
    assert_true(jv_get(node_at(v, 0), "ok")->boolean);
    expect_says(v, 0, "warnings", "has 1 replica");
    assert_true(jv_get(node_at(v, 1), "ok")->boolean);
    assert_non_null(strstr(p.err, "1 of 3 nodes cannot serve locks"));
    jv_free(v);
    proc_free(&p);
    fixture_stop(&extra);
    /* The old master forgets its replica only after a while: later tests do not look. */
}

/* ---- the ACL the docs recommend ------------------------------------------------------------ */

/* The rules of "ACL SETUSER locker on >secret RULES" in a doc, malloc'ed (fails the test when
 * the doc has no such line). */
static char *acl_rules_in(const char *doc)
{
    const char *dir = getenv("REDLOCK_DOCS");
    assert_non_null(dir);
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, doc);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        fail_msg("cannot read %s: %s", path, strerror(errno));
    static const char head[] = "ACL SETUSER locker on >secret ";
    char line[1024];
    char *rules = NULL;
    while (rules == NULL && fgets(line, sizeof(line), f) != NULL) {
        char *at = strstr(line, head);
        if (at != NULL) {
            rules = strdup(at + strlen(head));
            rules[strcspn(rules, "\r\n`")] = '\0';
        }
    }
    fclose(f);
    if (rules == NULL)
        fail_msg("%s has no line \"%s...\"", path, head);
    return rules;
}

/* Start extra's servers with user locker and rules (its password ACL_PASS; the default user
 * keeps every right, for the test's own look at the keys), and put their URLs as locker into
 * nodes. */
static void start_with_locker(const char *rules, char *nodes, size_t len)
{
    char conf[1024];
    snprintf(conf, sizeof(conf), "user locker on >%s %s\n", ACL_PASS, rules);
    assert_int_equal(fixture_start(&extra, 3, conf), 0);
    user_nodes(&extra, "locker:" ACL_PASS, nodes, len);
}

/* The recipe's rules without one right (" +right") start the servers, on which check exits 1
 * with warning on every node. The servers are left running. */
static void check_warns_without(const char *rules, const char *right, const char *warning)
{
    char fewer[512];
    snprintf(fewer, sizeof(fewer), "%s", rules);
    char *at = strstr(fewer, right);
    assert_non_null(at);
    memmove(at, at + strlen(right), strlen(at + strlen(right)) + 1);
    char nodes[1024];
    start_with_locker(fewer, nodes, sizeof(nodes));
    proc p;
    TOOL(&p, NULL, "-n", nodes, "check", "--delayed-restart", "locks:");
    expect_status(&p, 1);
    jv *v = check_result(&p, extra.n, "warn");
    for (unsigned i = 0; i < extra.n; i++)
        expect_says(v, i, "warnings", warning);
    jv_free(v);
    proc_free(&p);
}

static void recommended_acl_passes(void **state)
{
    (void)state;
    char *rules = acl_rules_in("operations.md"); /* the one recipe, which cli.md links to */
    char nodes[1024];
    start_with_locker(rules, nodes, sizeof(nodes));

    /* The recipe's key pattern is locks:*, so the probe key starts with locks:. */
    proc p;
    TOOL(&p, NULL, "-n", nodes, "check", "--delayed-restart", "locks:");
    expect_status(&p, 0);
    jv *v = check_result(&p, extra.n, "ok");
    for (unsigned i = 0; i < extra.n; i++) {
        assert_int_equal(jv_get(node_at(v, i), "denied")->n, 0);
        assert_int_equal(jv_get(node_at(v, i), "warnings")->n, 0);
        assert_string_equal(jstr(node_at(v, i), "role"), "master");  /* INFO is allowed */
        assert_true(jint(node_at(v, i), "clock_offset_ms") <= 5001); /* without TIME */
    }
    assert_non_null(strstr(jstr(v, "probe_key"), "locks:redlock-check-"));
    assert_null(strstr(p.out, ACL_PASS));
    assert_null(strstr(p.err, ACL_PASS));
    expect_probe_gone(v, &extra, NULL);
    jv_free(v);
    proc_free(&p);

    /* A probe key outside the pattern: said once per node, with the way out. */
    TOOL(&p, NULL, "-n", nodes, "check", "--delayed-restart");
    expect_status(&p, 69);
    v = check_result(&p, extra.n, "error");
    for (unsigned i = 0; i < extra.n; i++) {
        assert_int_equal(jv_get(node_at(v, i), "errors")->n, 1);
        expect_says(v, i, "errors", "may not use the probe key");
    }
    jv_free(v);
    proc_free(&p);

    /* The same user through the tool's lock commands. */
    TOOL(&p, NULL, "-n", nodes, "run", "locks:check-run", "--", "true");
    expect_status(&p, 0);
    proc_free(&p);
    fixture_stop(&extra);

    /* One right short of the recipe: that command is named, and the node cannot serve locks. */
    static const char *const needed[] = {"+pttl", "+pexpire", "+del", "+evalsha"};
    for (size_t k = 0; k < sizeof(needed) / sizeof(needed[0]); k++) {
        char fewer[512];
        snprintf(fewer, sizeof(fewer), "%s", rules);
        char *at = strstr(fewer, needed[k]);
        assert_non_null(at);
        memmove(at, at + strlen(needed[k]), strlen(at + strlen(needed[k])) + 1);
        start_with_locker(fewer, nodes, sizeof(nodes));
        TOOL(&p, NULL, "-q", "-n", nodes, "check", "--delayed-restart", "locks:");
        expect_status(&p, 69);
        v = check_result(&p, extra.n, "error");
        for (unsigned i = 0; i < extra.n; i++) {
            const jv *denied = jv_get(node_at(v, i), "denied");
            assert_int_equal(denied->n, 1);
            assert_string_equal(jv_at(denied, 0)->str, needed[k] + 1);
        }
        jv_free(v);
        proc_free(&p);
        fixture_stop(&extra);
    }

    /* Without +pubsub|numsub a release cannot hand the lock to the next waiter: a warning. */
    check_warns_without(rules, " +pubsub|numsub", "PUBSUB NUMSUB is not allowed");
    fixture_stop(&extra);
    /* Without +info the library cannot tell two URLs of one server apart: a warning. */
    check_warns_without(rules, " +info", "INFO is not allowed");

    /* A wrong password is an error; no password shows. */
    user_nodes(&extra, "locker:wr0ng-Pw", nodes, sizeof(nodes));
    TOOL(&p, NULL, "-n", nodes, "check", "--delayed-restart", "locks:");
    expect_status(&p, 69);
    v = check_result(&p, extra.n, "error");
    for (unsigned i = 0; i < extra.n; i++)
        expect_says(v, i, "errors", "authentication failed");
    assert_null(strstr(p.out, "wr0ng-Pw"));
    assert_null(strstr(p.err, "wr0ng-Pw"));
    jv_free(v);
    proc_free(&p);
    fixture_stop(&extra);
    free(rules);
}

/* ---- nodes that are down, slow, or twice there --------------------------------------------- */

static void unreachable_and_twin_nodes(void **state)
{
    (void)state;
    assert_int_equal(fixture_start(&extra, 3, NULL), 0);
    assert_int_equal(fixture_kill(&extra, 1), 0);
    assert_int_equal(fixture_pause(&extra, 2), 0);
    /* The stopped node alone gets a short timeout (in its URL); the rest keep seconds. */
    char nodes[1024];
    snprintf(nodes, sizeof(nodes), "%s,%s,%s?timeout_ms=300,redis://localhost:%d",
             extra.servers[0].url, extra.servers[1].url, extra.servers[2].url,
             extra.servers[0].port);
    proc p;
    long long start = now_ms();
    TOOL(&p, NULL, "-n", nodes, "check", "--delayed-restart");
    long long took = now_ms() - start;
    fixture_resume(&extra, 2);
    expect_status(&p, 69);
    jv *v = check_result(&p, 4, "error");
    assert_true(jv_get(node_at(v, 0), "ok")->boolean);
    expect_says(v, 1, "errors", "cannot connect");
    expect_says(v, 2, "errors", "no answer to INFO within 300 ms");
    expect_says(v, 3, "errors", "same server as node 0");
    assert_true(took < 300 + 10000 + 2500); /* one short timeout, not the others' 10 s each */
    assert_non_null(strstr(p.err, "3 of 4 nodes cannot serve locks"));
    jv_free(v);
    proc_free(&p);
    fixture_stop(&extra);
}

/* ---- cluster:// nodes ---------------------------------------------------------------------- */

/* The cluster of the test that runs (fixture_cluster_form stops one still running there). */
static fixture_redis_cluster rc;

/* "cluster://127.0.0.1:P0?seed=127.0.0.1:P1" + params ("&k=v" or ""), then two servers of
 * shared: three nodes, so that the deployment itself draws no warning. */
static void cluster_nodes(const char *params, char *out, size_t len)
{
    int w = snprintf(out, len, "cluster://127.0.0.1:%d?seed=127.0.0.1:%d%s,%s,%s",
                     fixture_cluster_port(&rc, 0), fixture_cluster_port(&rc, 1), params,
                     shared.servers[0].url, shared.servers[1].url);
    assert_true(w > 0 && (size_t)w < len);
}

static const jv *master_at(const jv *v, unsigned node, unsigned k)
{
    return jv_at(jv_get(node_at(v, node), "masters"), k);
}

static bool list_says(const jv *list, const char *text)
{
    for (size_t k = 0; list != NULL && k < list->n; k++)
        if (strstr(jv_at(list, k)->str, text) != NULL)
            return true;
    return false;
}

/* Every master of node 0 says text in its list `which` (or, with only >= 0, that master alone). */
static void expect_masters_say(const jv *v, int only, const char *which, const char *text)
{
    const jv *masters = jv_get(node_at(v, 0), "masters");
    for (unsigned k = 0; k < masters->n; k++) {
        bool says = list_says(jv_get(jv_at(masters, k), which), text);
        if (says != (only < 0 || (unsigned)only == k))
            fail_msg("master %u's %s %s \"%s\"", k, which, says ? "mention" : "do not mention",
                     text);
    }
}

/* Node 0 lists the masters of rc, in slot order (the fixture's master m owns the m-th range),
 * each a distinct server, together owning every slot; each one's probe key lay in its own slots
 * (so no probe was answered MOVED) and is gone, with its queue's keys; the table names each. */
static void expect_masters(const proc *p, const jv *v, unsigned masters)
{
    const jv *list = jv_get(node_at(v, 0), "masters");
    assert_int_equal(list->n, masters);
    int64_t slots = 0;
    for (unsigned m = 0; m < masters; m++) {
        const jv *e = jv_at(list, m);
        char address[64], line[80];
        snprintf(address, sizeof(address), "127.0.0.1:%d", fixture_cluster_port(&rc, m));
        assert_string_equal(jstr(e, "address"), address);
        snprintf(line, sizeof(line), "    master %s ", address);
        if (strstr(p->err, line) == NULL)
            fail_msg("the table has no line for master %s:\n%s", address, p->err);
        assert_string_equal(jstr(e, "role"), "master");
        assert_int_equal(strlen(jstr(e, "run_id")), 40);
        for (unsigned j = 0; j < m; j++)
            assert_string_not_equal(jstr(e, "run_id"), jstr(jv_at(list, j), "run_id"));
        slots += jint(e, "slots");
        const char *key = jstr(e, "probe_key");
        assert_non_null(strstr(key, "redlock-check-{"));
        assert_int_equal(fixture_cluster_key_owner(&rc, key, strlen(key)), (int)m);
        char queue[400];
        snprintf(queue, sizeof(queue), "%s:queue", key);
        redisReply *r = fixture_cluster_command(&rc, m, "EXISTS %s %s", key, queue);
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_INTEGER);
        if (r->integer != 0)
            fail_msg("the probe key %s (or its queue) is still on master %u", key, m);
        freeReplyObject(r);
    }
    assert_int_equal(slots, FIXTURE_CLUSTER_SLOTS);
}

/* A command (words separated by single spaces) on cluster node i, answered +OK. */
static void cluster_command_ok(unsigned i, const char *command)
{
    char words[200];
    snprintf(words, sizeof(words), "%s", command);
    const char *argv[8];
    int argc = 0;
    for (char *w = strtok(words, " "); w != NULL && argc < 8; w = strtok(NULL, " "))
        argv[argc++] = w;
    redisReply *r = fixture_command_argv(&rc.nodes[i], 0, argc, argv, NULL);
    if (r == NULL || r->type != REDIS_REPLY_STATUS)
        fail_msg("%s on cluster node %u: %s", command, i,
                 r != NULL && r->str != NULL ? r->str : "no answer");
    freeReplyObject(r);
}

static void cluster_masters_checked(void **state)
{
    (void)state;
    assert_int_equal(fixture_cluster_form(&rc, 3, 0, NULL), 0);
    char nodes[1024];
    cluster_nodes("", nodes, sizeof(nodes));
    proc p;
    TOOL(&p, NULL, "-n", nodes, "check", "--delayed-restart", "locks:");
    expect_status(&p, 0);
    jv *v = check_result(&p, 3, "ok");
    const jv *node = node_at(v, 0);
    assert_true(jv_get(node, "ok")->boolean);
    assert_int_equal(jv_get(node, "warnings")->n, 0);
    assert_string_equal(jstr(node, "cluster_state"), "ok");
    assert_int_equal(jint(node, "slots_covered"), FIXTURE_CLUSTER_SLOTS);
    expect_masters(&p, v, 3);
    for (unsigned m = 0; m < 3; m++) {
        const jv *e = master_at(v, 0, m);
        assert_true(jv_get(e, "ok")->boolean);
        assert_int_equal(jv_get(e, "warnings")->n, 0);
        assert_int_equal(jv_get(e, "denied")->n, 0);
        assert_string_equal(jstr(e, "maxmemory_policy"), "noeviction");
        assert_int_equal(jint(e, "connected_replicas"), 0);
        assert_non_null(strstr(jstr(e, "probe_key"), "locks:redlock-check-{"));
    }
    assert_non_null(strstr(p.err, "every node can serve locks"));
    jv_free(v);
    proc_free(&p);

    /* One master that evicts: its warning, and its alone. */
    cluster_command_ok(1, "CONFIG SET maxmemory-policy allkeys-lru");
    TOOL(&p, NULL, "-n", nodes, "check", "--delayed-restart");
    cluster_command_ok(1, "CONFIG SET maxmemory-policy noeviction");
    expect_status(&p, 1);
    v = check_result(&p, 3, "warn");
    expect_masters_say(v, 1, "warnings", "maxmemory-policy allkeys-lru may evict");
    assert_string_equal(jstr(master_at(v, 0, 1), "maxmemory_policy"), "allkeys-lru");
    char line[80];
    snprintf(line, sizeof(line), "master 127.0.0.1:%d ", fixture_cluster_port(&rc, 1));
    const char *at = strstr(p.err, line);
    assert_non_null(at);
    at = strchr(at, '\n');
    assert_non_null(at);
    assert_int_equal(strncmp(at + 1, "        warning: maxmemory-policy allkeys-lru", 45), 0);
    jv_free(v);
    proc_free(&p);

    /* wait_replicas=1 and no replica: no write could ever count. */
    cluster_nodes("&wait_replicas=1", nodes, sizeof(nodes));
    TOOL(&p, NULL, "-n", nodes, "check", "--delayed-restart");
    expect_status(&p, 69);
    v = check_result(&p, 3, "error");
    assert_false(jv_get(node_at(v, 0), "ok")->boolean);
    assert_int_equal(jint(node_at(v, 0), "wait_replicas"), 1);
    expect_masters_say(v, -1, "errors", "has 0 connected replica(s), fewer than wait_replicas=1");
    assert_true(jv_get(node_at(v, 1), "ok")->boolean);
    assert_non_null(strstr(p.err, "1 of 3 nodes cannot serve locks"));
    jv_free(v);
    proc_free(&p);

    /* The URL's host is down: the seed gives the map, and the dead host is a warning. */
    int dead = fixture_free_port();
    assert_true(dead > 0);
    snprintf(nodes, sizeof(nodes), "cluster://127.0.0.1:%d?seed=127.0.0.1:%d,%s,%s", dead,
             fixture_cluster_port(&rc, 0), shared.servers[0].url, shared.servers[1].url);
    TOOL(&p, NULL, "-n", nodes, "check", "--delayed-restart");
    expect_status(&p, 1);
    v = check_result(&p, 3, "warn");
    expect_says(v, 0, "warnings", "no slot map from 127.0.0.1:");
    char seed[64];
    snprintf(seed, sizeof(seed), "127.0.0.1:%d", fixture_cluster_port(&rc, 0));
    assert_string_equal(jstr(node_at(v, 0), "asked"), seed);
    expect_masters(&p, v, 3);
    jv_free(v);
    proc_free(&p);

    /* A slot no master owns, in the view of the server asked: a warning naming it. */
    cluster_command_ok(0, "CLUSTER DELSLOTS 100");
    cluster_nodes("", nodes, sizeof(nodes));
    TOOL(&p, NULL, "-n", nodes, "check", "--delayed-restart");
    cluster_command_ok(0, "CLUSTER ADDSLOTS 100");
    expect_status(&p, 1);
    v = check_result(&p, 3, "warn");
    expect_says(v, 0, "warnings", "1 of 16384 slots have no master (the first: 100-100)");
    assert_int_equal(jint(node_at(v, 0), "slots_covered"), FIXTURE_CLUSTER_SLOTS - 1);
    assert_true(jv_get(node_at(v, 0), "ok")->boolean);
    jv_free(v);
    proc_free(&p);

    /* A server that requires full coverage calls the cluster down then: an error. */
    cluster_command_ok(0, "CONFIG SET cluster-require-full-coverage yes");
    cluster_command_ok(0, "CLUSTER DELSLOTS 100");
    TOOL(&p, NULL, "-n", nodes, "check", "--delayed-restart");
    cluster_command_ok(0, "CLUSTER ADDSLOTS 100");
    cluster_command_ok(0, "CONFIG SET cluster-require-full-coverage no");
    expect_status(&p, 69);
    v = check_result(&p, 3, "error");
    assert_string_equal(jstr(node_at(v, 0), "cluster_state"), "fail");
    expect_says(v, 0, "errors", "cluster_state is fail");
    jv_free(v);
    proc_free(&p);
    assert_int_equal(fixture_cluster_wait_converged(&rc), 0);

    /* A master given again as a plain node would count twice: the later URL is an error. */
    snprintf(nodes, sizeof(nodes), "cluster://127.0.0.1:%d,redis://127.0.0.1:%d,%s",
             fixture_cluster_port(&rc, 0), fixture_cluster_port(&rc, 2), shared.servers[0].url);
    TOOL(&p, NULL, "-n", nodes, "check", "--delayed-restart");
    expect_status(&p, 69);
    v = check_result(&p, 3, "error");
    char twin[80];
    snprintf(twin, sizeof(twin), "same server as master 127.0.0.1:%d of node 0",
             fixture_cluster_port(&rc, 2));
    expect_says(v, 1, "errors", twin);
    assert_true(jv_get(node_at(v, 0), "ok")->boolean);
    jv_free(v);
    proc_free(&p);
    /* The other way round: the plain node first, and the cluster's master is the twin. */
    snprintf(nodes, sizeof(nodes), "redis://127.0.0.1:%d,cluster://127.0.0.1:%d,%s",
             fixture_cluster_port(&rc, 2), fixture_cluster_port(&rc, 0), shared.servers[0].url);
    TOOL(&p, NULL, "-n", nodes, "check", "--delayed-restart");
    expect_status(&p, 69);
    v = check_result(&p, 3, "error");
    const jv *twin_master = jv_at(jv_get(node_at(v, 1), "masters"), 2);
    assert_false(jv_get(twin_master, "ok")->boolean);
    assert_true(list_says(jv_get(twin_master, "errors"), "same server as node 0 (redis://"));
    assert_false(jv_get(node_at(v, 1), "ok")->boolean);
    assert_true(jv_get(jv_at(jv_get(node_at(v, 1), "masters"), 0), "ok")->boolean);
    jv_free(v);
    proc_free(&p);
    fixture_cluster_stop(&rc);
}

/* wait_replicas against the replicas a cluster has: one each passes wait_replicas=1 and fails
 * wait_replicas=2; without it, each replica is the usual warning. Replicas are not listed. */
static void cluster_replicas_counted(void **state)
{
    (void)state;
    assert_int_equal(fixture_cluster_form(&rc, 3, 1, NULL), 0);
    char nodes[1024];
    cluster_nodes("", nodes, sizeof(nodes));
    proc p;
    TOOL(&p, NULL, "-n", nodes, "check", "--delayed-restart");
    expect_status(&p, 1);
    jv *v = check_result(&p, 3, "warn");
    expect_masters(&p, v, 3);
    for (unsigned m = 0; m < 3; m++)
        assert_int_equal(jint(master_at(v, 0, m), "connected_replicas"), 1);
    expect_masters_say(v, -1, "warnings", "has 1 replica(s)");
    jv_free(v);
    proc_free(&p);

    cluster_nodes("&wait_replicas=1", nodes, sizeof(nodes));
    TOOL(&p, NULL, "-n", nodes, "check", "--delayed-restart");
    expect_status(&p, 0);
    v = check_result(&p, 3, "ok");
    expect_masters(&p, v, 3);
    jv_free(v);
    proc_free(&p);

    cluster_nodes("&wait_replicas=2", nodes, sizeof(nodes));
    TOOL(&p, NULL, "-n", nodes, "check", "--delayed-restart");
    expect_status(&p, 69);
    v = check_result(&p, 3, "error");
    expect_masters_say(v, -1, "errors", "has 1 connected replica(s), fewer than wait_replicas=2");
    jv_free(v);
    proc_free(&p);
    fixture_cluster_stop(&rc);
}

/* allow=: masters outside it are errors the check does not connect to (their master entries say
 * so); within it they are checked. The URL names the cluster by "localhost", its masters call
 * themselves 127.0.0.1. */
static void cluster_allow_respected(void **state)
{
    (void)state;
    assert_int_equal(fixture_cluster_form(&rc, 3, 0, NULL), 0);
    const char *params[] = {"?allow=127.0.0.2", "?allow=127.0.0.0/8"};
    for (int k = 0; k < 2; k++) {
        char nodes[1024];
        snprintf(nodes, sizeof(nodes), "cluster://localhost:%d%s,%s,%s",
                 fixture_cluster_port(&rc, 0), params[k], shared.servers[0].url,
                 shared.servers[1].url);
        proc p;
        TOOL(&p, NULL, "-n", nodes, "check", "--delayed-restart");
        expect_status(&p, k == 0 ? 69 : 0);
        jv *v = check_result(&p, 3, k == 0 ? "error" : "ok");
        if (k == 0)
            expect_masters_say(v, -1, "errors", "not among those the URL allows (allow=)");
        else
            expect_masters(&p, v, 3);
        jv_free(v);
        proc_free(&p);
    }
    fixture_cluster_stop(&rc);
}

static void refused_before_sending(void **state)
{
    (void)state;
    proc p;
    /* TLS nodes are checked in TLS (test/tls/test_tls_cli.c): one that refuses the connection
     * is an error, said without the URL's password. */
    TOOL(&p, NULL, "-n", "rediss://:pw@127.0.0.1:1", "check");
    expect_status(&p, 69);
    assert_non_null(strstr(p.err, "cannot connect"));
    assert_null(strstr(p.err, ":pw@"));
    assert_null(strstr(p.out, ":pw@"));
    proc_free(&p);
    TOOL(&p, NULL, "-n", "clusters://:pw@127.0.0.1:1", "check");
    expect_status(&p, 69);
    assert_non_null(strstr(p.err, "cannot connect"));
    assert_null(strstr(p.err, ":pw@"));
    assert_null(strstr(p.out, ":pw@"));
    proc_free(&p);
    /* Usage errors: nothing sent. */
    char twice[600];
    snprintf(twice, sizeof(twice), "%s,%s", shared.servers[0].url, shared.servers[0].url);
    TOOL(&p, NULL, "-n", twice, "check");
    expect_status(&p, 64);
    assert_non_null(strstr(p.err, "the same as node 0"));
    proc_free(&p);
    TOOL(&p, NULL, "-n", shared_nodes, "check", "a", "b");
    expect_status(&p, 64);
    proc_free(&p);
}

/* acquire, status and release on a cluster node say which master answered ("answered_by", the
 * master of the key's slot); a plain node's entry has no such member. Two nodes, so the quorum
 * is both and every round waits for the cluster's vote. */
static void cluster_answers_named(void **state)
{
    (void)state;
    assert_int_equal(fixture_cluster_form(&rc, 3, 0, NULL), 0);
    char nodes[1024];
    int w = snprintf(nodes, sizeof(nodes), "%s,cluster://127.0.0.1:%d", shared.servers[0].url,
                     fixture_cluster_port(&rc, 0));
    assert_true(w > 0 && (size_t)w < sizeof(nodes));
    const char *key = "cli:answered";
    int owner = fixture_cluster_key_owner(&rc, key, strlen(key));
    assert_true(owner >= 0);
    char want[64];
    snprintf(want, sizeof(want), "127.0.0.1:%d", fixture_cluster_port(&rc, (unsigned)owner));
    char token[300] = "";
    for (unsigned k = 0; k < 3; k++) {
        proc p;
        if (k == 0)
            TOOL(&p, NULL, "-n", nodes, "acquire", key);
        else if (k == 1)
            TOOL(&p, NULL, "-n", nodes, "status", key);
        else
            TOOL(&p, NULL, "-n", nodes, "--all", "release", key, token);
        expect_status(&p, 0);
        jv *v = json_line(&p);
        if (k == 0)
            snprintf(token, sizeof(token), "%s", jstr(v, "token"));
        const jv *list = jv_get(v, "nodes");
        assert_int_equal(list->n, 2);
        assert_string_equal(jstr(jv_at(list, 1), "answered_by"), want);
        assert_null(jv_get(jv_at(list, 0), "answered_by"));
        if (k == 1)
            assert_true(jv_is_str(jv_get(jv_at(list, 1), "holder"), token));
        jv_free(v);
        proc_free(&p);
    }
    fixture_cluster_stop(&rc);
}

int main(void)
{
    static const struct CMUnitTest tests[] = {
        cmocka_unit_test(healthy_nodes_pass),      cmocka_unit_test(persistence_always_passes),
        cmocka_unit_test(evicting_policy_warns),   cmocka_unit_test(replica_is_an_error),
        cmocka_unit_test(recommended_acl_passes),  cmocka_unit_test(unreachable_and_twin_nodes),
        cmocka_unit_test(cluster_masters_checked), cmocka_unit_test(cluster_replicas_counted),
        cmocka_unit_test(cluster_allow_respected), cmocka_unit_test(refused_before_sending),
        cmocka_unit_test(cluster_answers_named),
    };
    return cli_main("cli-check", tests, sizeof(tests) / sizeof(tests[0]), NULL);
}
