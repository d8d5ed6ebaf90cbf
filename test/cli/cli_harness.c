/* SPDX-License-Identifier: MIT */
/* cli_harness.c - what the cli tests share (see cli_harness.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "cli_harness.h"
#include "test_filters.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *tool_path;
fixture_cluster shared;
char shared_nodes[1024];
fixture_cluster extra;
static char temp_dir[256];

/* ---- helpers ------------------------------------------------------------------------------- */

long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* "redis://[:password@]127.0.0.1:PORT,..." for servers first..first+n-1 of c. */
void node_list(const fixture_cluster *c, const char *password, char *out, size_t len)
{
    size_t o = 0;
    out[0] = '\0';
    for (unsigned i = 0; i < c->n; i++) {
        int w = snprintf(out + o, len - o, "%sredis://%s%s%s127.0.0.1:%d", i > 0 ? "," : "",
                         password != NULL ? ":" : "", password != NULL ? password : "",
                         password != NULL ? "@" : "", c->servers[i].port);
        assert_true(w > 0 && (size_t)w < len - o);
        o += (size_t)w;
    }
}

static void start_tool(proc *p, const char *const *env, const char *const *args, bool timeout)
{
    const char *argv[64];
    size_t n = 0;
    argv[n++] = "redlock";
    if (timeout)
        argv[n++] = TOOL_NODE_TIMEOUT;
    for (size_t k = 0; args[k] != NULL; k++) {
        assert_true(n < 63);
        argv[n++] = args[k];
    }
    argv[n] = NULL;
    const char *full_env[16];
    size_t e = 0;
    full_env[e++] = "REDLOCK_NODES";
    for (; env != NULL && env[e - 1] != NULL; e++) {
        assert_true(e < 15);
        full_env[e] = env[e - 1];
    }
    full_env[e] = NULL;
    proc_start(p, tool_path, argv, full_env);
}

void tool_start(proc *p, const char *const *env, const char *const *args)
{
    start_tool(p, env, args, true);
}

void tool_start_bare(proc *p, const char *const *env, const char *const *args)
{
    start_tool(p, env, args, false);
}

void tool_finish(proc *p, int timeout_ms)
{
    if (!proc_wait(p, timeout_ms))
        fail_msg("the tool did not exit within %d ms; stderr:\n%s", timeout_ms, p->err);
}

void expect_status(const proc *p, int status)
{
    if (p->status != status)
        fail_msg("exit status %d, expected %d\nstdout: %s\nstderr: %s", p->status, status, p->out,
                 p->err);
}

/* stdout must be exactly one line of valid JSON. */
jv *json_line(const proc *p)
{
    if (p->out_len == 0 || p->out[p->out_len - 1] != '\n' || text_lines(p->out) != 1)
        fail_msg("stdout is not exactly one line: [%s]", p->out);
    char err[256];
    jv *v = jv_parse(p->out, p->out_len, err, sizeof(err));
    if (v == NULL)
        fail_msg("stdout is not valid JSON (%s): %s", err, p->out);
    assert_int_equal(v->type, JV_OBJECT);
    return v;
}

const char *jstr(const jv *v, const char *key)
{
    const jv *m = jv_get(v, key);
    if (m == NULL || m->type != JV_STRING)
        fail_msg("member \"%s\" is missing or not a string", key);
    return m->str;
}

int64_t jint(const jv *v, const char *key)
{
    const jv *m = jv_get(v, key);
    if (m == NULL || m->type != JV_INT)
        fail_msg("member \"%s\" is missing or not an integer", key);
    return m->integer;
}

bool is_hex_token(const char *s)
{
    if (strlen(s) != 32)
        return false;
    for (const char *c = s; *c != '\0'; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
            return false;
    return true;
}

/* Run one command on server i (AUTH first when password is set). */
redisReply *server_cmd(fixture_cluster *c, unsigned i, const char *password, int argc,
                       const char **argv, const size_t *lens)
{
    redisContext *ctx = fixture_connect(c, i);
    assert_non_null(ctx);
    if (ctx->err != 0) {
        redisFree(ctx);
        return NULL;
    }
    if (password != NULL) {
        redisReply *r = redisCommand(ctx, "AUTH %s", password);
        assert_non_null(r);
        freeReplyObject(r);
    }
    redisReply *r = redisCommandArgv(ctx, argc, argv, lens);
    redisFree(ctx);
    return r;
}

/* The key's value on server i (malloc'ed, NUL-terminated; NULL when there is no key). */
char *server_get_pw(fixture_cluster *c, unsigned i, const char *password, const char *key,
                    size_t *len_out)
{
    const char *argv[2] = {"GET", key};
    size_t lens[2] = {3, strlen(key)};
    redisReply *r = server_cmd(c, i, password, 2, argv, lens);
    assert_non_null(r);
    char *v = NULL;
    if (r->type == REDIS_REPLY_STRING) {
        v = malloc(r->len + 1);
        assert_non_null(v);
        memcpy(v, r->str, r->len);
        v[r->len] = '\0';
        if (len_out != NULL)
            *len_out = r->len;
    } else {
        assert_int_equal(r->type, REDIS_REPLY_NIL);
    }
    freeReplyObject(r);
    return v;
}

char *server_get(fixture_cluster *c, unsigned i, const char *key)
{
    return server_get_pw(c, i, NULL, key, NULL);
}

long long server_pttl(fixture_cluster *c, unsigned i, const char *key)
{
    const char *argv[2] = {"PTTL", key};
    size_t lens[2] = {4, strlen(key)};
    redisReply *r = server_cmd(c, i, NULL, 2, argv, lens);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

void server_del(fixture_cluster *c, unsigned i, const char *key)
{
    const char *argv[2] = {"DEL", key};
    size_t lens[2] = {3, strlen(key)};
    redisReply *r = server_cmd(c, i, NULL, 2, argv, lens);
    assert_non_null(r);
    freeReplyObject(r);
}

/* Every server of c holds key with value token (NULL: the key is on none). A won round is
 * decided at the quorum, so the last node's command may land after the tool said so (or, on a
 * loaded machine, a while after it exited): wait for it, bounded. */
void expect_key_everywhere(fixture_cluster *c, const char *key, const char *token)
{
    for (unsigned i = 0; i < c->n; i++) {
        char *v = NULL;
        long long until = now_ms() + LATE_NODE_WAIT_MS;
        for (;;) {
            free(v);
            v = server_get(c, i, key);
            if ((token == NULL) == (v == NULL) && (v == NULL || strcmp(v, token) == 0))
                break;
            if (now_ms() >= until)
                break;
            sleep_ms(10);
        }
        if (token == NULL && v != NULL)
            fail_msg("node %u still holds %s = %s", i, key, v);
        if (token != NULL && (v == NULL || strcmp(v, token) != 0))
            fail_msg("node %u: %s = %s, expected %s", i, key, v != NULL ? v : "(none)", token);
        free(v);
    }
}

void expect_validity(int64_t validity_ms, long long ttl_ms, long long took_ms)
{
    /* drift = floor(ttl_us * 0.01) + 2000 us (lib/core/quorum.c), and the JSON has whole ms. */
    long long ttl_us = ttl_ms * 1000;
    long long best_us = ttl_us - ttl_us / 100 - 2000;
    long long most = best_us / 1000;
    long long least = (best_us - took_ms * 1000) / 1000 - 1;
    if (validity_ms > most || validity_ms < least)
        fail_msg("validity %lld ms for a %lld ms ttl, not in [%lld, %lld] (the tool took %lld ms)",
                 (long long)validity_ms, ttl_ms, least, most, took_ms);
}

void expect_pttl(long long pttl_ms, long long ttl_ms, long long since_ms)
{
    /* Redis counts the expiry on its own clock, in whole ms: allow it a little. */
    const long long slack_ms = 10;
    if (pttl_ms > ttl_ms || pttl_ms < ttl_ms - since_ms - slack_ms)
        fail_msg("PTTL %lld ms for a %lld ms ttl set at most %lld ms ago", pttl_ms, ttl_ms,
                 since_ms);
}

/* Acquire key on the shared cluster with the tool; returns the token (malloc'ed). */
char *acquire_shared(const char *key, const char *ttl)
{
    proc p;
    TOOL(&p, NULL, "-n", shared_nodes, "-t", ttl, "acquire", key);
    expect_status(&p, 0);
    jv *v = json_line(&p);
    char *token = strdup(jstr(v, "token"));
    jv_free(v);
    proc_free(&p);
    return token;
}

void marker_path(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", temp_dir, name);
}

bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

void check_nodes(const jv *v, fixture_cluster *c, bool status_shape)
{
    const jv *nodes = jv_get(v, "nodes");
    assert_non_null(nodes);
    assert_int_equal(nodes->type, JV_ARRAY);
    assert_int_equal(nodes->n, c->n);
    for (unsigned i = 0; i < c->n; i++) {
        const jv *n = jv_at(nodes, i);
        assert_int_equal(n->type, JV_OBJECT);
        assert_string_equal(jstr(n, "url"), c->servers[i].url);
        const jv *err = jv_get(n, "error");
        assert_non_null(err);
        assert_true(err->type == JV_NULL || err->type == JV_STRING);
        if (status_shape) {
            assert_int_equal(n->n, 4);
            const jv *holder = jv_get(n, "holder");
            assert_true(holder != NULL && (holder->type == JV_NULL || holder->type == JV_STRING));
            const jv *pttl = jv_get(n, "pttl_ms");
            assert_true(pttl != NULL && (pttl->type == JV_NULL || pttl->type == JV_INT));
        } else {
            assert_int_equal(n->n, 4);
            const char *vote = jstr(n, "vote");
            assert_true(strcmp(vote, "yes") == 0 || strcmp(vote, "no") == 0 ||
                        strcmp(vote, "error") == 0 || strcmp(vote, "timeout") == 0 ||
                        strcmp(vote, "none") == 0);
            assert_true(jint(n, "latency_us") >= 0);
        }
    }
}

unsigned count_votes(const jv *v, const char *vote)
{
    const jv *nodes = jv_get(v, "nodes");
    unsigned k = 0;
    for (size_t i = 0; nodes != NULL && i < nodes->n; i++)
        k += jv_is_str(jv_get(jv_at(nodes, i), "vote"), vote);
    return k;
}

/* ---- the test program ---------------------------------------------------------------------- */

static const char *const *temp_files_to_remove;

static int group_setup(void **state)
{
    (void)state;
    if (fixture_start(&shared, 3, NULL) != 0)
        return -1;
    node_list(&shared, NULL, shared_nodes, sizeof(shared_nodes));
    snprintf(temp_dir, sizeof(temp_dir), "%s/redlock-cli-XXXXXX",
             getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp");
    return mkdtemp(temp_dir) != NULL ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    for (const char *const *f = temp_files_to_remove; f != NULL && *f != NULL; f++) {
        char path[512];
        marker_path(path, sizeof(path), *f);
        unlink(path);
    }
    rmdir(temp_dir);
    fixture_stop(&extra);
    fixture_stop(&shared);
    return 0;
}

/* After every test, passed or failed (a failed check longjmps past the test's own cleanup): its
 * own cluster is stopped and the shared one has no paused server, so the next test starts
 * clean. */
static int test_teardown(void **state)
{
    (void)state;
    fixture_stop(&extra);
    for (unsigned i = 0; i < shared.n; i++)
        if (shared.servers[i].paused)
            fixture_resume(&shared, i);
    return 0;
}

int cli_main(const char *group, const struct CMUnitTest *tests, size_t n,
             const char *const *temp_files)
{
    tool_path = getenv("REDLOCK_TOOL");
    if (tool_path == NULL) {
        fprintf(stderr, "%s: set REDLOCK_TOOL to the redlock executable\n", group);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    test_filters_from_env();
    temp_files_to_remove = temp_files;
    struct CMUnitTest *all = calloc(n, sizeof(*all));
    if (all == NULL)
        return 1;
    for (size_t i = 0; i < n; i++) {
        all[i] = tests[i];
        if (all[i].teardown_func == NULL)
            all[i].teardown_func = test_teardown;
    }
    int rc = _cmocka_run_group_tests(group, all, n, group_setup, group_teardown);
    free(all);
    return rc;
}
