/* cli_harness.c - what the cli tests share (see cli_harness.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "cli_harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *tool_path;
fixture_cluster shared;
char shared_nodes[1024];
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

/* Start the tool; args are the arguments after argv[0] (NULL-terminated). $REDLOCK_NODES is
 * unset unless env sets it. */
void tool_start(proc *p, const char *const *env, const char *const *args)
{
    const char *argv[64];
    size_t n = 0;
    argv[n++] = "redlock";
    for (; args[n - 1] != NULL; n++) {
        assert_true(n < 63);
        argv[n] = args[n - 1];
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

/* Every server of c holds key with value token (NULL: the key is on none). The last SETs of a
 * won round may still be on their way when the tool exits: give them a moment. */
void expect_key_everywhere(fixture_cluster *c, const char *key, const char *token)
{
    for (unsigned i = 0; i < c->n; i++) {
        char *v = NULL;
        for (int tries = 0; tries < 50; tries++) {
            free(v);
            v = server_get(c, i, key);
            if ((token == NULL) == (v == NULL) && (v == NULL || strcmp(v, token) == 0))
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

/* ---- a slow node ----------------------------------------------------------------------------- */

/* Shuttle bytes between two sockets until either side closes. */
static void shuttle(int a, int b)
{
    char buf[16384];
    for (;;) {
        struct pollfd fds[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
        if (poll(fds, 2, -1) < 0 && errno != EINTR)
            return;
        for (int k = 0; k < 2; k++) {
            if (fds[k].revents == 0)
                continue;
            ssize_t n = read(fds[k].fd, buf, sizeof(buf));
            if (n <= 0)
                return;
            if (write(fds[1 - k].fd, buf, (size_t)n) != n)
                return;
        }
    }
}

/* A TCP proxy on a free loopback port to upstream_port that lets each connection in at once but
 * connects it upstream only after delay_ms: a node whose connection setup is slow. Returns the
 * proxy's pid (it and its helpers die with the test) and its port in *port. */
pid_t slow_proxy_start(int upstream_port, int delay_ms, int *port)
{
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(ls >= 0);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(ls, (struct sockaddr *)&addr, sizeof(addr)), 0);
    assert_int_equal(listen(ls, 16), 0);
    socklen_t len = sizeof(addr);
    assert_int_equal(getsockname(ls, (struct sockaddr *)&addr, &len), 0);
    *port = ntohs(addr.sin_port);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid > 0) {
        close(ls);
        return pid;
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGCHLD, SIG_IGN); /* helpers are reaped by the kernel */
    for (;;) {
        int c = accept(ls, NULL, NULL);
        if (c < 0)
            continue;
        if (fork() == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            sleep_ms(delay_ms);
            int u = socket(AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in up;
            memset(&up, 0, sizeof(up));
            up.sin_family = AF_INET;
            up.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            up.sin_port = htons((uint16_t)upstream_port);
            if (u >= 0 && connect(u, (struct sockaddr *)&up, sizeof(up)) == 0)
                shuttle(c, u);
            _exit(0);
        }
        close(c);
    }
}

void slow_proxy_stop(pid_t pid)
{
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
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
    fixture_stop(&shared);
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
    temp_files_to_remove = temp_files;
    return _cmocka_run_group_tests(group, tests, n, group_setup, group_teardown);
}
