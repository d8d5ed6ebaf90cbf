/* SPDX-License-Identifier: MIT */
/* test_counter.c - the shared-counter example (examples/counter.c) run end to end: 4 worker
 * processes x 250 increments over five real lock nodes and a sixth server for the counter.
 *
 * The lock nodes are given a node timeout of seconds in their URLs (the library's default is
 * 50 ms): nothing here is slow on purpose, so a loaded machine must never cost a worker its
 * turn.
 *
 * Run by meson with the path of the counter executable as the only argument. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* posix_spawn, pipe2 */
#endif

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture.h"

extern char **environ;

#define LOCK_NODES 5
#define DATA_SERVER 5 /* servers 0..4 are the lock nodes */

/* What the whole group shares: the servers and the counter's command-line arguments. */
typedef struct counter_env {
    fixture_cluster cluster;      /* must not move while running: it is malloc'ed once */
    char nodes[LOCK_NODES * 160]; /* "URL?timeout_ms=5000,URL...,..." */
} counter_env;

/* What one run of the counter did. */
typedef struct run_result {
    int exit_code;   /* -1 if it did not exit normally */
    long long final; /* the "final count: N" it printed; -1 if none */
    double elapsed_s;
    char output[8192]; /* its stdout */
} run_result;

static const char *counter_path; /* argv[1], set once in main */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Run the counter with args (NULL-terminated, without argv[0]), wait for it, and echo its stdout
 * as TAP comments. Its stderr goes to the test's stderr. */
static void run_counter(const char *const *args, run_result *res)
{
    const char *argv[32] = {counter_path};
    size_t argc = 1;
    for (; args[argc - 1] != NULL; argc++) {
        assert_true(argc < 31);
        argv[argc] = args[argc - 1];
    }
    argv[argc] = NULL;

    int out[2];
    assert_int_equal(pipe2(out, O_CLOEXEC), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    pid_t pid;
    double start = now_s();
    int rc = posix_spawn(&pid, counter_path, &actions, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    assert_int_equal(rc, 0);

    size_t len = 0;
    for (;;) {
        ssize_t n = read(out[0], res->output + len, sizeof(res->output) - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    res->output[len] = '\0';
    close(out[0]);

    int status;
    while (waitpid(pid, &status, 0) < 0)
        assert_int_equal(errno, EINTR);
    res->elapsed_s = now_s() - start;
    res->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;

    res->final = -1;
    const char *line = strstr(res->output, "final count: ");
    if (line != NULL)
        res->final = strtoll(line + strlen("final count: "), NULL, 10);

    for (char *save = NULL, *l = strtok_r(res->output, "\n", &save); l != NULL;
         l = strtok_r(NULL, "\n", &save))
        printf("# %s\n", l);
    printf("# exit %d after %.2f s\n", res->exit_code, res->elapsed_s);
    fflush(stdout);
}

/* The counter's value on the data server, read directly; -1 if the key is missing. */
static long long data_count(counter_env *env, const char *key)
{
    redisReply *reply = fixture_command(&env->cluster, DATA_SERVER, "GET %s", key);
    assert_non_null(reply);
    long long value = -1;
    if (reply->type == REDIS_REPLY_STRING)
        value = strtoll(reply->str, NULL, 10);
    else
        assert_int_equal(reply->type, REDIS_REPLY_NIL);
    freeReplyObject(reply);
    return value;
}

static int group_setup(void **state)
{
    counter_env *env = calloc(1, sizeof(*env));
    if (env == NULL || fixture_start(&env->cluster, LOCK_NODES + 1, NULL) != 0) {
        free(env);
        return -1;
    }
    for (unsigned i = 0; i < LOCK_NODES; i++) {
        if (i > 0)
            strcat(env->nodes, ",");
        strcat(env->nodes, env->cluster.servers[i].url);
        strcat(env->nodes, "?timeout_ms=5000");
    }
    *state = env;
    return 0;
}

static int group_teardown(void **state)
{
    counter_env *env = *state;
    fixture_stop(&env->cluster);
    free(env);
    return 0;
}

/* With the lock, no increment is lost: exactly 4 x 250, and every lock key is gone after. */
static void locked_count_is_exact(void **state)
{
    counter_env *env = *state;
    /* A stale value must be reset, not added to. */
    redisReply *reply = fixture_command(&env->cluster, DATA_SERVER, "SET locked 12345");
    assert_non_null(reply);
    freeReplyObject(reply);

    const char *args[] = {"--nodes", env->nodes, "--data",  env->cluster.servers[DATA_SERVER].url,
                          "--procs", "4",        "--incr",  "250",
                          "--key",   "locked",   "--reset", NULL};
    run_result res;
    run_counter(args, &res);
    assert_int_equal(res.exit_code, 0);
    assert_int_equal(res.final, 1000);
    assert_int_equal(data_count(env, "locked"), 1000);
    assert_true(res.elapsed_s < 60); /* about 1 s; minutes would mean livelock */
    /* Every worker released its last lock: no node still holds the resource. */
    for (unsigned i = 0; i < LOCK_NODES; i++) {
        reply = fixture_command(&env->cluster, i, "EXISTS %s", "locked:lock");
        assert_non_null(reply);
        assert_int_equal(reply->type, REDIS_REPLY_INTEGER);
        assert_int_equal(reply->integer, 0);
        freeReplyObject(reply);
    }
}

/* Without --reset the counter goes on from its value. */
static void locked_count_adds_to_the_value(void **state)
{
    counter_env *env = *state;
    redisReply *reply = fixture_command(&env->cluster, DATA_SERVER, "SET further 500");
    assert_non_null(reply);
    freeReplyObject(reply);
    const char *args[] = {"--nodes", env->nodes, "--data", env->cluster.servers[DATA_SERVER].url,
                          "--procs", "2",        "--incr", "50",
                          "--key",   "further",  NULL};
    run_result res;
    run_counter(args, &res);
    assert_int_equal(res.exit_code, 0);
    assert_int_equal(data_count(env, "further"), 600);
}

/* Without the lock, updates are lost, and the program still exits 0. How many depends on the
 * scheduling, and a run may now and then lose none (the workers happened not to interleave, e.g.
 * one started late on a loaded machine): it is run again, a few times, until one loses some. */
static void unlocked_count_loses_updates(void **state)
{
    counter_env *env = *state;
    const char *args[] = {"--data",  env->cluster.servers[DATA_SERVER].url,
                          "--procs", "4",
                          "--incr",  "250",
                          "--key",   "unlocked",
                          "--reset", "--no-lock",
                          NULL};
    const int max_runs = 5;
    long long count = 1000;
    int run = 0;
    while (count == 1000 && run < max_runs) {
        run++;
        run_result res;
        run_counter(args, &res);
        assert_int_equal(res.exit_code, 0);
        count = data_count(env, "unlocked");
        assert_int_equal(res.final, count);
        /* A lost update only ever loses: the count never exceeds the increments made. */
        assert_true(count >= 1 && count <= 1000);
        printf("# run %d without the lock: %lld of 1000 increments survived, %lld lost\n", run,
               count, 1000 - count);
    }
    if (count == 1000)
        fail_msg("%d runs without the lock lost no update: the example does not show the race",
                 max_runs);
}

/* Bad usage is exit status 2 and touches nothing. */
static void bad_usage_exits_2(void **state)
{
    counter_env *env = *state;
    const char *data = env->cluster.servers[DATA_SERVER].url;
    const char *no_nodes[] = {"--data", data, NULL};
    const char *zero_procs[] = {"--nodes", env->nodes, "--data", data, "--procs", "0", NULL};
    const char *bad_url[] = {"--nodes", "http://127.0.0.1:1", "--data", data, NULL};
    const char *const *cases[] = {no_nodes, zero_procs, bad_url};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        run_result res;
        run_counter(cases[i], &res);
        assert_int_equal(res.exit_code, 2);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s path/to/examples/counter\n", argv[0]);
        return 2;
    }
    counter_path = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(locked_count_is_exact),
        cmocka_unit_test(locked_count_adds_to_the_value),
        cmocka_unit_test(unlocked_count_loses_updates),
        cmocka_unit_test(bad_usage_exits_2),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
