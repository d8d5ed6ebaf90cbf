/* SPDX-License-Identifier: MIT */
/* test_job_runner.c - the job runners (examples/job_runner_async.c, job_runner_sync.c) as
 * processes against five real lock nodes and a sixth server for their store:
 *
 * - every_job_done_once: 4 async and 4 sync runners at once, 5 jobs each. Every job is done
 *   exactly once: the store's counter, its log and the runners' records agree on jobs 1..40,
 *   each with one fence, the fences strictly increasing in the store's order, and nothing of the
 *   lock (its key, its queue) is left on any node once all have exited.
 * - sigterm_*: a holder in a long work, a waiter in the resource's queue. SIGTERM to the waiter
 *   ends its wait: it exits 0, leaving the holder's key and no place in the queue. SIGTERM to
 *   the holder ends its work unfinished and releases: it exits 0, and the next waiter holds the
 *   key on a quorum, no node the old holder's (nothing half-held). Its own SIGTERM leaves nothing
 *   of the lock.
 * - valgrind_clean: one run of each, a waiter and a holder stopped by SIGTERM, under valgrind:
 *   no error, no leak (the suite's valgrind pass wraps this program, not the runners).
 *
 * Node timeouts are 5 s (--timeout-ms): nothing here is slow on purpose. A bound on how soon a
 * runner exits after SIGTERM is what the library promises (a canceled attempt's release, or the
 * hold's release, then the close's wait for the deletes: a node timeout each) plus slack.
 *
 * Run by meson with the paths of job_runner_async and job_runner_sync. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* posix_spawn, pipe2 */
#endif

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture.h"
#include "test_filters.h"

extern char **environ;

#define LOCK_NODES 5
#define STORE_SERVER 5 /* servers 0..4 are the lock nodes */
#define NODE_TIMEOUT_MS 5000
#define SLACK_MS 2500
/* From SIGTERM to exit: a release round and the close's wait for the deletes. */
#define EXIT_BOUND_MS (2 * NODE_TIMEOUT_MS + SLACK_MS)
/* "All nodes show X" waits this long for the late ones (test/README.md). */
#define WAIT_MS 10000
/* A whole run of several runners: seconds; minutes would mean livelock. */
#define RUN_BOUND_MS 120000
#define LONG_WORK "600000" /* --work-ms of a holder that only SIGTERM ends */
#define MAX_PROCS 16

typedef enum kind { ASYNC, SYNC } kind;
static const char *runner_path[2]; /* argv[1], argv[2] */
static const char *const kind_name[2] = {"async", "sync"};

static fixture_cluster cluster;
static char nodes[LOCK_NODES * 160]; /* "URL,URL,..." */

/* ---- runner processes ---------------------------------------------------------------------- */

typedef struct proc {
    pid_t pid; /* 0 once reaped */
    int out_fd;
    char name[32];
    char out[16384]; /* its stdout so far */
    size_t len;
    bool eof;
    int exit_code; /* -1: did not exit normally */
} proc;

static proc *live[MAX_PROCS]; /* every runner not yet reaped, for the teardown */

/* Start a runner of kind k on resource with its work taking work_ms, more args (NULL-ended)
 * after; under valgrind when vg is not NULL. */
static void proc_start(proc *p, kind k, const char *vg, const char *resource, const char *jobs,
                       const char *work_ms)
{
    static unsigned serial;
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "%s-%u", kind_name[k], ++serial);
    const char *argv[40];
    size_t n = 0;
    if (vg != NULL) {
        argv[n++] = vg;
        static const char *const vg_args[] = {"--quiet", "--error-exitcode=99", "--leak-check=full",
                                              "--show-leak-kinds=definite,indirect,possible",
                                              "--errors-for-leak-kinds=definite,indirect,possible"};
        for (size_t i = 0; i < sizeof(vg_args) / sizeof(vg_args[0]); i++)
            argv[n++] = vg_args[i];
    }
    const char *args[] = {
        runner_path[k], "--nodes",      nodes,    "--store", cluster.servers[STORE_SERVER].url,
        "--resource",   resource,       "--jobs", jobs,      "--work-ms",
        work_ms,        "--timeout-ms", "5000",   NULL};
    for (size_t i = 0; args[i] != NULL; i++)
        argv[n++] = args[i];
    argv[n] = NULL;

    int out[2];
    assert_int_equal(pipe2(out, O_CLOEXEC), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    int rc = posix_spawn(&p->pid, argv[0], &actions, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    assert_int_equal(rc, 0);
    p->out_fd = out[0];
    assert_int_equal(fcntl(p->out_fd, F_SETFL, O_NONBLOCK), 0);
    for (size_t i = 0; i < MAX_PROCS; i++) {
        if (live[i] == NULL) {
            live[i] = p;
            break;
        }
    }
}

/* Read what p wrote, waiting at most timeout_ms for something. */
static void proc_read(proc *p, int timeout_ms)
{
    if (p->eof)
        return;
    struct pollfd pfd = {.fd = p->out_fd, .events = POLLIN};
    if (poll(&pfd, 1, timeout_ms) <= 0)
        return;
    for (;;) {
        ssize_t n = read(p->out_fd, p->out + p->len, sizeof(p->out) - 1 - p->len);
        if (n > 0) {
            p->len += (size_t)n;
            p->out[p->len] = '\0';
            continue;
        }
        if (n == 0 || p->len == sizeof(p->out) - 1)
            p->eof = true;
        return;
    }
}

static void proc_print(const proc *p)
{
    char copy[sizeof(p->out)];
    memcpy(copy, p->out, p->len + 1);
    for (char *save = NULL, *l = strtok_r(copy, "\n", &save); l != NULL;
         l = strtok_r(NULL, "\n", &save))
        printf("# %s: %s\n", p->name, l);
    fflush(stdout);
}

/* Wait until p printed a line starting with prefix; returns that line's rest. */
static const char *proc_wait_line(proc *p, const char *prefix)
{
    long long deadline = fixture_now_ms() + RUN_BOUND_MS;
    char needle[64];
    snprintf(needle, sizeof(needle), "\n%s", prefix);
    for (;;) {
        const char *at =
            strncmp(p->out, prefix, strlen(prefix)) == 0 ? p->out - 1 : strstr(p->out, needle);
        if (at != NULL)
            return at + 1 + strlen(prefix);
        if (p->eof || fixture_now_ms() > deadline) {
            proc_print(p);
            fail_msg("%s never printed \"%s\"", p->name, prefix);
        }
        proc_read(p, 100);
    }
}

/* Wait for p to exit, at most bound_ms (then SIGKILL and fail); its output is printed. */
static void proc_finish(proc *p, long long bound_ms)
{
    long long start = fixture_now_ms();
    int status;
    pid_t got;
    while ((got = waitpid(p->pid, &status, WNOHANG)) == 0) {
        if (fixture_now_ms() - start > bound_ms) {
            kill(p->pid, SIGKILL);
            proc_read(p, 0);
            proc_print(p);
            fail_msg("%s did not exit within %lld ms", p->name, bound_ms);
        }
        proc_read(p, 50);
    }
    assert_int_equal(got, p->pid);
    while (!p->eof)
        proc_read(p, 1000);
    close(p->out_fd);
    p->pid = 0;
    p->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    proc_print(p);
    printf("# %s: exit %d after %lld ms\n", p->name, p->exit_code, fixture_now_ms() - start);
    for (size_t i = 0; i < MAX_PROCS; i++)
        if (live[i] == p)
            live[i] = NULL;
}

/* SIGTERM p, which must then exit 0 within EXIT_BOUND_MS (times 10 under valgrind). */
static void proc_stop(proc *p, bool valgrind)
{
    assert_int_equal(kill(p->pid, SIGTERM), 0);
    proc_finish(p, valgrind ? 10 * EXIT_BOUND_MS : EXIT_BOUND_MS);
    assert_int_equal(p->exit_code, 0);
    assert_non_null(strstr(p->out, "\nstopped: "));
}

/* A failed check longjmps past the runners' ends: kill what is left. */
static int kill_runners(void **state)
{
    (void)state;
    for (size_t i = 0; i < MAX_PROCS; i++) {
        if (live[i] != NULL && live[i]->pid > 0) {
            kill(live[i]->pid, SIGKILL);
            waitpid(live[i]->pid, NULL, 0);
            close(live[i]->out_fd);
        }
        live[i] = NULL;
    }
    return 0;
}

/* ---- what the servers hold ----------------------------------------------------------------- */

static redisReply *command(unsigned server, const char *fmt, const char *arg)
{
    redisReply *reply = fixture_command(&cluster, server, fmt, arg);
    assert_non_null(reply);
    assert_int_not_equal(reply->type, REDIS_REPLY_ERROR);
    return reply;
}

/* The lock's key on lock node i, copied into value ("" when there is none). */
static void key_on(unsigned i, const char *resource, char *value, size_t len)
{
    redisReply *reply = command(i, "GET %s", resource);
    snprintf(value, len, "%s", reply->type == REDIS_REPLY_STRING ? reply->str : "");
    freeReplyObject(reply);
}

static long long queue_length(unsigned i, const char *resource)
{
    char queue[256];
    snprintf(queue, sizeof(queue), "%s:queue", resource);
    redisReply *reply = command(i, "ZCARD %s", queue);
    long long n = reply->integer;
    freeReplyObject(reply);
    return n;
}

/* Wait until every lock node holds the resource with token: an acquire is decided at the
 * quorum, the other nodes' SETs land a moment later. */
static void wait_held_by(const char *resource, const char *token)
{
    long long deadline = fixture_now_ms() + WAIT_MS;
    for (unsigned i = 0; i < LOCK_NODES;) {
        char value[512];
        key_on(i, resource, value, sizeof(value));
        if (strcmp(value, token) == 0) {
            i++;
            continue;
        }
        if (fixture_now_ms() > deadline)
            fail_msg("node %u holds \"%s\", not the holder's token %s", i, value, token);
        fixture_sleep_ms(20);
    }
}

/* Every lock node holds the resource with token now. */
static void assert_held_by(const char *resource, const char *token)
{
    for (unsigned i = 0; i < LOCK_NODES; i++) {
        char value[512];
        key_on(i, resource, value, sizeof(value));
        if (strcmp(value, token) != 0)
            fail_msg("node %u holds \"%s\", not the holder's token %s", i, value, token);
    }
}

/* The lock passed to the holder of token: a quorum holds its key, and every other node is free.
 * (A waiter may win by the grants of a quorum alone: a node that granted nothing has no key.) */
static void assert_taken_over(const char *resource, const char *token)
{
    unsigned holding = 0;
    for (unsigned i = 0; i < LOCK_NODES; i++) {
        char value[512];
        key_on(i, resource, value, sizeof(value));
        if (strcmp(value, token) == 0)
            holding++;
        else if (value[0] != '\0')
            fail_msg("node %u holds \"%s\": neither free nor the new holder's %s", i, value, token);
    }
    if (holding < LOCK_NODES / 2 + 1)
        fail_msg("only %u nodes hold the new holder's token %s", holding, token);
    printf("# the new holder's key is on %u of %d nodes, the others are free\n", holding,
           LOCK_NODES);
}

/* Wait until n waiters have their place in the resource's queue on every lock node. */
static void wait_queued(const char *resource, long long n)
{
    long long deadline = fixture_now_ms() + RUN_BOUND_MS;
    for (unsigned i = 0; i < LOCK_NODES;) {
        if (queue_length(i, resource) == n) {
            i++;
            continue;
        }
        if (fixture_now_ms() > deadline)
            fail_msg("node %u's queue of %s never had %lld waiters", i, resource, n);
        fixture_sleep_ms(20);
    }
}

/* Nothing of the lock on any node: no key, no queue; only its fence counter, which is kept for
 * ever (docs/api.md, "Fences"). */
static void assert_nothing_left(const char *resource)
{
    char fence_key[256];
    snprintf(fence_key, sizeof(fence_key), "%s:fence", resource);
    for (unsigned i = 0; i < LOCK_NODES; i++) {
        redisReply *reply = command(i, "KEYS %s*", resource);
        assert_int_equal(reply->type, REDIS_REPLY_ARRAY);
        for (size_t k = 0; k < reply->elements; k++)
            if (strcmp(reply->element[k]->str, fence_key) != 0)
                fail_msg("node %u still has %s", i, reply->element[k]->str);
        freeReplyObject(reply);
    }
}

/* The holder's token from its "holding job=J fence=F token=T" line. */
static void holder_token(proc *p, char *token, size_t len)
{
    const char *rest = proc_wait_line(p, "holding ");
    const char *t = strstr(rest, "token=");
    assert_non_null(t);
    snprintf(token, len, "%.*s", (int)strcspn(t + 6, "\n"), t + 6);
}

/* ---- every job once ------------------------------------------------------------------------ */

#define PER_KIND 4
#define JOBS_EACH 5
#define ALL_JOBS (2 * PER_KIND * JOBS_EACH)

/* Each runner's "done job=J fence=F" lines into fence_of[J] (0: none); a job recorded twice
 * fails. Returns how many lines. */
static unsigned records(const proc *p, uint64_t *fence_of)
{
    unsigned n = 0;
    for (const char *l = p->out; (l = strstr(l, "\ndone job=")) != NULL; l++) {
        unsigned long long job, fence;
        assert_int_equal(sscanf(l + 1, "done job=%llu fence=%llu", &job, &fence), 2);
        if (job < 1 || job > ALL_JOBS)
            fail_msg("%s did job %llu, beyond the %d there are", p->name, job, ALL_JOBS);
        if (fence_of[job] != 0)
            fail_msg("job %llu was done twice: fences %" PRIu64 " and %llu", job, fence_of[job],
                     fence);
        fence_of[job] = fence;
        n++;
    }
    return n;
}

static void every_job_done_once(void **state)
{
    (void)state;
    const char *resource = "job:nightly-report";
    static proc runners[2 * PER_KIND];
    long long start = fixture_now_ms();
    for (unsigned i = 0; i < 2 * PER_KIND; i++)
        proc_start(&runners[i], i % 2 == 0 ? ASYNC : SYNC, NULL, resource, "5", "20");
    uint64_t fence_of[ALL_JOBS + 1] = {0};
    unsigned refused = 0;
    for (unsigned i = 0; i < 2 * PER_KIND; i++) {
        proc_finish(&runners[i], RUN_BOUND_MS);
        assert_int_equal(runners[i].exit_code, 0);
        assert_int_equal(records(&runners[i], fence_of), JOBS_EACH);
        assert_non_null(strstr(runners[i].out, "\nfinished: 5 jobs done\n"));
        for (const char *l = runners[i].out; (l = strstr(l, "\nrefused ")) != NULL; l++)
            refused++;
    }
    printf("# %d runners, %d jobs in %lld ms; %u commits refused by the store\n", 2 * PER_KIND,
           ALL_JOBS, fixture_now_ms() - start, refused);

    /* The store: the last job done is the last there is, and its log lists every job once, in
     * order, each with the fence its runner recorded, the fences strictly increasing. */
    redisReply *reply = command(STORE_SERVER, "GET %s", "job:nightly-report:done");
    assert_int_equal(reply->type, REDIS_REPLY_STRING);
    assert_int_equal(strtoll(reply->str, NULL, 10), ALL_JOBS);
    freeReplyObject(reply);
    reply = command(STORE_SERVER, "LRANGE %s 0 -1", "job:nightly-report:log");
    assert_int_equal(reply->type, REDIS_REPLY_ARRAY);
    assert_int_equal(reply->elements, ALL_JOBS);
    uint64_t last_fence = 0;
    for (size_t k = 0; k < reply->elements; k++) {
        unsigned long long job, fence;
        assert_int_equal(sscanf(reply->element[k]->str, "%llu %llu", &job, &fence), 2);
        if (job != k + 1 || fence != fence_of[job] || fence <= last_fence)
            fail_msg("the store's entry %zu is \"%s\": expected job %zu, with the fence its "
                     "runner recorded (%" PRIu64 "), above %" PRIu64,
                     k, reply->element[k]->str, k + 1, fence_of[k + 1], last_fence);
        last_fence = fence;
    }
    freeReplyObject(reply);
    assert_nothing_left(resource);
}

/* ---- SIGTERM during a wait and during a hold ----------------------------------------------- */

static void sigterm_stops_cleanly(kind k, const char *vg)
{
    char resource[64], token[256];
    snprintf(resource, sizeof(resource), "job:sigterm-%s%s", kind_name[k], vg ? "-vg" : "");
    static proc holder, waiter, next;
    bool valgrind = vg != NULL;

    proc_start(&holder, k, vg, resource, "1", LONG_WORK);
    holder_token(&holder, token, sizeof(token));
    wait_held_by(resource, token);

    /* During a wait: the waiter leaves its place and holds nothing; the holder is untouched. */
    proc_start(&waiter, k, vg, resource, "1", LONG_WORK);
    wait_queued(resource, 1);
    proc_stop(&waiter, valgrind);
    assert_non_null(strstr(waiter.out, "ended canceled: "));
    assert_null(strstr(waiter.out, "holding "));
    assert_held_by(resource, token);
    for (unsigned i = 0; i < LOCK_NODES; i++)
        assert_int_equal(queue_length(i, resource), 0);

    /* During a hold: the work ends unfinished, the lock is released on every node (the close
     * waits for the deletes), and the next waiter takes it. */
    proc_start(&next, k, vg, resource, "1", LONG_WORK);
    wait_queued(resource, 1);
    proc_stop(&holder, valgrind);
    assert_non_null(strstr(holder.out, "\nabandoned job=1: stopping\n"));
    assert_non_null(strstr(holder.out, "\nended released: success\n"));
    char next_token[256];
    holder_token(&next, next_token, sizeof(next_token));
    assert_string_not_equal(next_token, token);
    assert_taken_over(resource, next_token);

    proc_stop(&next, valgrind);
    assert_non_null(strstr(next.out, "\nended released: success\n"));
    assert_nothing_left(resource);
    /* No job was done: nothing reached the store. */
    char done_key[128];
    snprintf(done_key, sizeof(done_key), "%s:done", resource);
    redisReply *reply = command(STORE_SERVER, "EXISTS %s", done_key);
    assert_int_equal(reply->integer, 0);
    freeReplyObject(reply);
}

static void sigterm_async(void **state)
{
    (void)state;
    sigterm_stops_cleanly(ASYNC, NULL);
}

static void sigterm_sync(void **state)
{
    (void)state;
    sigterm_stops_cleanly(SYNC, NULL);
}

/* ---- valgrind ------------------------------------------------------------------------------ */

static bool find_valgrind(char *out, size_t len)
{
    const char *path = getenv("PATH");
    char *copy = path != NULL ? strdup(path) : NULL, *save = NULL;
    bool found = false;
    for (char *dir = copy != NULL ? strtok_r(copy, ":", &save) : NULL; dir != NULL && !found;
         dir = strtok_r(NULL, ":", &save)) {
        snprintf(out, len, "%s/valgrind", dir);
        found = access(out, X_OK) == 0;
    }
    free(copy);
    return found;
}

static void valgrind_clean(void **state)
{
    (void)state;
    char vg[512];
    const char *sanitized = getenv("REDLOCK_SANITIZED");
    if ((sanitized != NULL && strcmp(sanitized, "1") == 0) || !find_valgrind(vg, sizeof(vg))) {
        /* Not cmocka's skip(): test/run counts a case that prints "# SKIP" as skipped. */
        printf("# SKIP valgrind not run (sanitized build, or no valgrind in PATH)\n");
        return;
    }
    for (kind k = ASYNC; k <= SYNC; k++) {
        static proc p;
        char resource[64];
        snprintf(resource, sizeof(resource), "job:valgrind-%s", kind_name[k]);
        proc_start(&p, k, vg, resource, "2", "20");
        proc_finish(&p, 10 * RUN_BOUND_MS);
        assert_int_equal(p.exit_code, 0); /* 99: valgrind found an error or a leak */
        assert_non_null(strstr(p.out, "\nfinished: 2 jobs done\n"));
        sigterm_stops_cleanly(k, vg);
    }
}

/* ---- bad usage ----------------------------------------------------------------------------- */

static void bad_usage_exits_2(void **state)
{
    (void)state;
    const char *store = cluster.servers[STORE_SERVER].url;
    const char *const cases[][8] = {
        {"--nodes", nodes, NULL},
        {"--nodes", nodes, "--store", store, "--jobs", "0", NULL},
        {"--nodes", "http://127.0.0.1:1", "--store", store, NULL},
        {"--nodes", nodes, "--store", store, "stray", NULL},
    };
    for (kind k = ASYNC; k <= SYNC; k++) {
        for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
            const char *argv[10] = {runner_path[k]};
            for (size_t i = 0; cases[c][i] != NULL; i++)
                argv[i + 1] = cases[c][i];
            posix_spawn_file_actions_t quiet; /* its usage goes to stderr; stdout is TAP's */
            posix_spawn_file_actions_init(&quiet);
            posix_spawn_file_actions_addopen(&quiet, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
            pid_t pid;
            int rc = posix_spawn(&pid, argv[0], &quiet, NULL, (char *const *)argv, environ);
            posix_spawn_file_actions_destroy(&quiet);
            assert_int_equal(rc, 0);
            int status;
            assert_int_equal(waitpid(pid, &status, 0), pid);
            assert_true(WIFEXITED(status));
            if (WEXITSTATUS(status) != 2)
                fail_msg("%s, case %zu: exit %d, not 2", kind_name[k], c, WEXITSTATUS(status));
        }
    }
}

static int group_setup(void **state)
{
    (void)state;
    if (fixture_start(&cluster, LOCK_NODES + 1, NULL) != 0)
        return -1;
    for (unsigned i = 0; i < LOCK_NODES; i++) {
        if (i > 0)
            strcat(nodes, ",");
        strcat(nodes, cluster.servers[i].url);
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    fixture_stop(&cluster);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s path/to/job_runner_async path/to/job_runner_sync\n", argv[0]);
        return 2;
    }
    runner_path[ASYNC] = argv[1];
    runner_path[SYNC] = argv[2];
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(every_job_done_once, kill_runners),
        cmocka_unit_test_teardown(sigterm_async, kill_runners),
        cmocka_unit_test_teardown(sigterm_sync, kill_runners),
        cmocka_unit_test_teardown(valgrind_clean, kill_runners),
        cmocka_unit_test_teardown(bad_usage_exits_2, kill_runners),
    };
    test_filters_from_env();
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
