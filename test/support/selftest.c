/* SPDX-License-Identifier: MIT */
/* Self-test of the redis-server fixture: every fixture function against real servers.
 *
 * A plain program rather than cmocka, so the fixture can be checked before anything else in the
 * test tree builds. Exits 0 on success; a failed CHECK exits 1 through exit(), so the fixture's
 * atexit handler still stops whatever is running. Lines starting with "fixture:" on stderr are
 * expected: several checks provoke failures on purpose.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* fork, kill, prctl */
#endif

#include "fixture.h"
#include "ports.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

// Always on, unlike assert(), which a release build compiles out.
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool process_gone(pid_t pid)
{
    return kill(pid, 0) != 0 && errno == ESRCH;
}

static bool dir_gone(const char *dir)
{
    struct stat st;
    return stat(dir, &st) != 0 && errno == ENOENT;
}

/* A fresh connection's PING answered PONG within the fixture's command timeout. */
static bool pong(fixture_cluster *c, unsigned i)
{
    redisContext *ctx = fixture_connect(c, i);
    CHECK(ctx != NULL);
    bool ok = false;
    if (!ctx->err) {
        redisReply *reply = redisCommand(ctx, "PING");
        ok = reply && reply->type == REDIS_REPLY_STATUS && strcmp(reply->str, "PONG") == 0;
        freeReplyObject(reply);
    }
    redisFree(ctx);
    return ok;
}

static bool reply_is(redisReply *reply, int type, const char *str)
{
    bool ok = reply && reply->type == type && (!str || strcmp(reply->str, str) == 0);
    freeReplyObject(reply);
    return ok;
}

static void test_free_port(void)
{
    int port = fixture_free_port();
    CHECK(port > 0 && port < 65536);
}

/* A claimed port lies below the kernel's ephemeral range and is handed to no other live process
 * (a child here) until it is released; a released port has no claim left. */
static void test_port_claims(void)
{
    int lo = 0, hi = 0;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    CHECK(f != NULL && fscanf(f, "%d %d", &lo, &hi) == 2);
    fclose(f);
    int mine[8];
    for (int i = 0; i < 8; i++) {
        mine[i] = fixture_port_claim();
        CHECK(mine[i] > 0 && mine[i] < lo);
        for (int j = 0; j < i; j++)
            CHECK(mine[j] != mine[i]);
    }
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        for (int k = 0; k < 2000; k++) {
            int p = fixture_port_claim();
            for (int i = 0; i < 8; i++) {
                if (p == mine[i])
                    _exit(1);
            }
            fixture_port_release(p);
        }
        _exit(0);
    }
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (int i = 0; i < 8; i++) {
        fixture_port_release(mine[i]);
        char path[128];
        snprintf(path, sizeof(path), "/tmp/redlock-fixture-ports-%u/%d", (unsigned)getuid(),
                 mine[i]);
        CHECK(access(path, F_OK) != 0);
    }
}

static void test_bad_arguments(void)
{
    fixture_cluster c;
    CHECK(fixture_start(&c, 0, NULL) == -1);
    CHECK(fixture_start(&c, FIXTURE_MAX_SERVERS + 1, NULL) == -1);
    fixture_stop(&c);
    fixture_stop(NULL);

    fixture_cluster zeroed = {0};
    fixture_stop(&zeroed);
    CHECK(fixture_kill(&zeroed, 0) == -1);
    CHECK(fixture_pause(&zeroed, 0) == -1);
    CHECK(fixture_resume(&zeroed, 0) == -1);
    CHECK(fixture_restart(&zeroed, 0) == -1);
    CHECK(fixture_connect(&zeroed, 0) == NULL);
}

static void check_started(fixture_cluster *c, unsigned n)
{
    CHECK(c->n == n);
    CHECK(!dir_gone(c->dir));
    for (unsigned i = 0; i < n; i++) {
        fixture_server *s = &c->servers[i];
        char url[128];
        snprintf(url, sizeof(url), "redis://127.0.0.1:%d", s->port);
        CHECK(s->pid > 0 && !s->paused);
        CHECK(strcmp(s->url, url) == 0 && c->urls[i] == s->url);
        CHECK(strncmp(s->unix_path, c->dir, strlen(c->dir)) == 0);
        CHECK(strncmp(s->unix_url, "unix://", 7) == 0 &&
              strcmp(s->unix_url + 7, s->unix_path) == 0);
        for (unsigned j = 0; j < i; j++)
            CHECK(c->servers[j].port != s->port);
        CHECK(pong(c, i));

        redisContext *ctx = redisConnectUnix(s->unix_path);
        CHECK(ctx && !ctx->err);
        CHECK(reply_is(redisCommand(ctx, "PING"), REDIS_REPLY_STATUS, "PONG"));
        redisFree(ctx);
    }
}

static void test_commands(fixture_cluster *c)
{
    CHECK(reply_is(fixture_command(c, 0, "SET %s %s", "greeting", "hello"), REDIS_REPLY_STATUS,
                   "OK"));
    CHECK(reply_is(fixture_command(c, 0, "GET %s", "greeting"), REDIS_REPLY_STRING, "hello"));
    CHECK(reply_is(fixture_command(c, 1, "GET %s", "greeting"), REDIS_REPLY_NIL, NULL));
    CHECK(reply_is(fixture_command(c, 0, "NOSUCHCOMMAND"), REDIS_REPLY_ERROR, NULL));

    static const char key[] = "bin\0key\xff\n";
    static const char value[] = "\0v\r\n\0";
    const char *set_argv[] = {"SET", key, value};
    size_t set_len[] = {3, sizeof(key) - 1, sizeof(value) - 1};
    CHECK(reply_is(fixture_command_argv(c, 1, 3, set_argv, set_len), REDIS_REPLY_STATUS, "OK"));
    const char *get_argv[] = {"GET", key};
    size_t get_len[] = {3, sizeof(key) - 1};
    redisReply *reply = fixture_command_argv(c, 1, 2, get_argv, get_len);
    CHECK(reply && reply->type == REDIS_REPLY_STRING && reply->len == sizeof(value) - 1);
    CHECK(memcmp(reply->str, value, sizeof(value) - 1) == 0);
    freeReplyObject(reply);
    // The key's NUL must not have truncated it: the prefix before it is a different key.
    reply = fixture_command(c, 1, "EXISTS %s", "bin");
    CHECK(reply && reply->type == REDIS_REPLY_INTEGER && reply->integer == 0);
    freeReplyObject(reply);
    reply = fixture_command(c, 1, "EXISTS %b", key, sizeof(key) - 1);
    CHECK(reply && reply->type == REDIS_REPLY_INTEGER && reply->integer == 1);
    freeReplyObject(reply);
    const char *echo_argv[] = {"ECHO", "plain"};
    CHECK(reply_is(fixture_command_argv(c, 2, 2, echo_argv, NULL), REDIS_REPLY_STRING, "plain"));
}

static void test_pause_resume(fixture_cluster *c)
{
    CHECK(fixture_pause(c, 1) == 0);
    CHECK(c->servers[1].paused);
    CHECK(fixture_pause(c, 1) == 0); // idempotent, must not block

    long long started_ms = now_ms();
    redisContext *ctx = fixture_connect(c, 1);
    CHECK(ctx != NULL);
    redisReply *reply = ctx->err ? NULL : redisCommand(ctx, "PING");
    CHECK(reply == NULL && ctx->err != 0);
    redisFree(ctx);
    long long waited_ms = now_ms() - started_ms;
    CHECK(waited_ms >= FIXTURE_COMMAND_TIMEOUT_MS * 8 / 10 &&
          waited_ms < FIXTURE_COMMAND_TIMEOUT_MS + 10000);
    CHECK(fixture_command(c, 1, "PING") == NULL);
    CHECK(pong(c, 0) && pong(c, 2));

    CHECK(fixture_resume(c, 1) == 0);
    CHECK(!c->servers[1].paused);
    CHECK(pong(c, 1));
    CHECK(fixture_resume(c, 1) == 0); // resuming a running server is harmless
    CHECK(pong(c, 1));
}

static void test_kill_restart(fixture_cluster *c)
{
    CHECK(reply_is(fixture_command(c, 2, "SET k v"), REDIS_REPLY_STATUS, "OK"));
    pid_t old_pid = c->servers[2].pid;
    int port = c->servers[2].port;
    CHECK(fixture_kill(c, 2) == 0);
    CHECK(c->servers[2].pid == 0 && process_gone(old_pid));
    CHECK(fixture_kill(c, 2) == -1);
    CHECK(fixture_pause(c, 2) == -1);

    redisContext *ctx = fixture_connect(c, 2);
    CHECK(ctx && ctx->err == REDIS_ERR_IO && strstr(ctx->errstr, "refused"));
    redisFree(ctx);
    CHECK(fixture_command(c, 2, "PING") == NULL);
    CHECK(pong(c, 0) && pong(c, 1));

    CHECK(fixture_restart(c, 2) == 0);
    CHECK(c->servers[2].port == port && c->servers[2].pid > 0 && c->servers[2].pid != old_pid);
    CHECK(pong(c, 2));
    CHECK(reply_is(fixture_command(c, 2, "GET k"), REDIS_REPLY_NIL, NULL));

    // Restarting a paused, running server kills it first.
    CHECK(reply_is(fixture_command(c, 0, "SET k v"), REDIS_REPLY_STATUS, "OK"));
    old_pid = c->servers[0].pid;
    CHECK(fixture_pause(c, 0) == 0);
    CHECK(fixture_restart(c, 0) == 0);
    CHECK(process_gone(old_pid) && !c->servers[0].paused);
    CHECK(reply_is(fixture_command(c, 0, "GET k"), REDIS_REPLY_NIL, NULL));
    CHECK(fixture_kill(c, 7) == -1);
}

static void test_requirepass(void)
{
    fixture_cluster c;
    CHECK(fixture_start(&c, 1, "requirepass s3cret") == 0);
    CHECK(strcmp(c.extra_conf, "requirepass s3cret") == 0);
    redisReply *reply = fixture_command(&c, 0, "GET k");
    CHECK(reply && reply->type == REDIS_REPLY_ERROR && strncmp(reply->str, "NOAUTH", 6) == 0);
    freeReplyObject(reply);

    CHECK(fixture_restart(&c, 0) == 0); // readiness must accept -NOAUTH as "up"
    redisContext *ctx = fixture_connect(&c, 0);
    CHECK(ctx && !ctx->err);
    CHECK(reply_is(redisCommand(ctx, "AUTH s3cret"), REDIS_REPLY_STATUS, "OK"));
    CHECK(reply_is(redisCommand(ctx, "GET k"), REDIS_REPLY_NIL, NULL));
    redisFree(ctx);
    fixture_stop(&c);
}

static void test_start_twice(void)
{
    fixture_cluster c;
    CHECK(fixture_start(&c, 1, NULL) == 0);
    pid_t old_pid = c.servers[0].pid;
    char old_dir[256];
    memcpy(old_dir, c.dir, sizeof(old_dir));
    CHECK(fixture_start(&c, 2, NULL) == 0); // the forgotten first cluster is stopped
    CHECK(process_gone(old_pid) && dir_gone(old_dir));
    check_started(&c, 2);
    fixture_stop(&c);
}

/* fixture_stop_all stops every cluster still running, from the fixture's own records: the
 * callers' structs may already be gone (a failed test check longjmps past its fixture_stop). */
static void test_stop_all(void)
{
    CHECK(fixture_stop_all() == 0);
    fixture_cluster *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
    CHECK(a != NULL && b != NULL);
    CHECK(fixture_start(a, 1, NULL) == 0);
    CHECK(fixture_start(b, 2, NULL) == 0);
    pid_t pids[3] = {a->servers[0].pid, b->servers[0].pid, b->servers[1].pid};
    char dir_a[256], dir_b[256];
    memcpy(dir_a, a->dir, sizeof(dir_a));
    memcpy(dir_b, b->dir, sizeof(dir_b));
    memset(a, 0x5a, sizeof(*a)); // what a reused stack slot would hold
    free(a);
    CHECK(fixture_stop_all() == 2);
    for (unsigned i = 0; i < 3; i++)
        CHECK(process_gone(pids[i]));
    CHECK(dir_gone(dir_a) && dir_gone(dir_b));
    CHECK(fixture_stop_all() == 0);
    CHECK(fixture_kill(b, 0) == -1); // b's struct is stale: not a started cluster any more
    fixture_stop(b);
    free(b);
}

typedef struct child_report {
    unsigned n;
    pid_t pids[FIXTURE_MAX_SERVERS];
    char dir[256];
} child_report;

/* Fork a child that starts a 2-server cluster, reports it over a pipe, then leaves through
 * exit() (crash == false) or dies by SIGKILL (crash == true), never calling fixture_stop. */
static void run_abandoning_child(bool crash, child_report *report, int *child_status)
{
    int fds[2];
    CHECK(pipe(fds) == 0);
    fflush(NULL);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        close(fds[0]);
        fixture_cluster c;
        child_report r = {0};
        if (fixture_start(&c, 2, NULL) == 0) {
            r.n = c.n;
            for (unsigned i = 0; i < c.n; i++)
                r.pids[i] = c.servers[i].pid;
            memcpy(r.dir, c.dir, sizeof(r.dir));
        }
        if (write(fds[1], &r, sizeof(r)) != (ssize_t)sizeof(r))
            _exit(2);
        if (crash)
            raise(SIGKILL);
        exit(0);
    }
    close(fds[1]);
    CHECK(read(fds[0], report, sizeof(*report)) == (ssize_t)sizeof(*report));
    close(fds[0]);
    CHECK(report->n == 2);
    CHECK(waitpid(child, child_status, 0) == child);
}

/* A test process that exits without fixture_stop: atexit stops its servers and removes the dir,
 * while the parent's cluster (inherited by the fork) is left alone. */
static void test_atexit_cleanup(fixture_cluster *parent_cluster)
{
    child_report report;
    int status;
    run_abandoning_child(false, &report, &status);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (unsigned i = 0; i < report.n; i++)
        CHECK(process_gone(report.pids[i]));
    CHECK(dir_gone(report.dir));
    for (unsigned i = 0; i < parent_cluster->n; i++)
        CHECK(pong(parent_cluster, i));
}

static void remove_leaked_dir(const char *dir)
{
    static const char *const suffixes[] = {".conf", ".log", ".sock"};
    for (unsigned i = 0; i < 2; i++) {
        for (size_t k = 0; k < sizeof(suffixes) / sizeof(suffixes[0]); k++) {
            char path[512];
            snprintf(path, sizeof(path), "%s/redis-%u%s", dir, i, suffixes[k]);
            unlink(path);
        }
    }
    CHECK(rmdir(dir) == 0);
}

/* A test process killed outright: PR_SET_PDEATHSIG takes its servers down with it. As a
 * subreaper we inherit the orphaned servers, so we can see them die and reap them. */
static void test_crash_cleanup(void)
{
    CHECK(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
    child_report report;
    int status;
    run_abandoning_child(true, &report, &status);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    long long deadline_ms = now_ms() + 5000;
    for (unsigned i = 0; i < report.n; i++) {
        pid_t r;
        while ((r = waitpid(report.pids[i], &status, WNOHANG)) == 0 && now_ms() < deadline_ms)
            usleep(10000);
        CHECK(r == report.pids[i] && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    }
    // Nothing runs atexit in a killed process; the dir is the one thing a crash leaks.
    remove_leaked_dir(report.dir);
}

static void test_stop(fixture_cluster *c)
{
    pid_t pids[FIXTURE_MAX_SERVERS];
    char dir[256];
    memcpy(dir, c->dir, sizeof(dir));
    for (unsigned i = 0; i < c->n; i++)
        pids[i] = c->servers[i].pid;
    CHECK(fixture_pause(c, 1) == 0); // stop must also end a paused server

    fixture_stop(c);
    for (unsigned i = 0; i < c->n; i++)
        CHECK(process_gone(pids[i]) && c->servers[i].pid == 0 && !c->servers[i].paused);
    CHECK(dir_gone(dir));
    fixture_stop(c);
    CHECK(fixture_kill(c, 0) == -1);
    CHECK(fixture_restart(c, 0) == -1);
    CHECK(fixture_command(c, 0, "PING") == NULL);
}

int main(void)
{
    test_free_port();
    test_port_claims();
    test_bad_arguments();

    static fixture_cluster c;
    CHECK(fixture_start(&c, 3, NULL) == 0);
    check_started(&c, 3);
    test_commands(&c);
    test_pause_resume(&c);
    test_kill_restart(&c);
    test_atexit_cleanup(&c);
    test_stop(&c);

    test_requirepass();
    test_start_twice();
    test_stop_all();
    test_crash_cleanup();

    // Every server was ours and has been reaped: no child of this process is left.
    CHECK(waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD);
    printf("fixture selftest: ok\n");
    return 0;
}
