/* SPDX-License-Identifier: MIT */
/* test_async_lock.c - the observing example (examples/async_lock.c) run against real servers: it
 * takes and releases a lock, logs the client's connections through the log callback and prints
 * every node's state and the client's counters; with a node down, the log says why and the node
 * is shown down with its last error. Every URL carries a password, which must never show.
 *
 * Run by meson with the path of the async_lock executable as the only argument. */
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
#include <unistd.h>

#include <cmocka.h>

#include "fixture.h"

extern char **environ;

#define N_NODES 3
#define SECRET "Ex4mple-Pw"

static const char *example_path; /* argv[1] */

typedef struct example_env {
    fixture_cluster cluster;
    char url_text[N_NODES][256]; /* with the password and a node timeout of seconds */
    char host_port[N_NODES][64]; /* "127.0.0.1:PORT", to find a node's lines */
} example_env;

/* Run the example on the cluster's URLs; its stdout and stderr, merged, into out. Returns its
 * exit status (-1 if it did not exit normally). */
static int run_example(example_env *env, char *out, size_t out_len)
{
    const char *argv[N_NODES + 2] = {example_path};
    for (unsigned i = 0; i < N_NODES; i++)
        argv[i + 1] = env->url_text[i];
    argv[N_NODES + 1] = NULL;
    int fds[2];
    assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
    pid_t pid;
    int rc = posix_spawn(&pid, example_path, &actions, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    assert_int_equal(rc, 0);
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fds[0], out + len, out_len - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    out[len] = '\0';
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        assert_int_equal(errno, EINTR);
    char copy[16384];
    snprintf(copy, sizeof(copy), "%s", out);
    for (char *save = NULL, *l = strtok_r(copy, "\n", &save); l != NULL;
         l = strtok_r(NULL, "\n", &save))
        printf("# %s\n", l);
    fflush(stdout);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The last line of out that starts with prefix and mentions node i; NULL if none. Copied into
 * line. */
static const char *last_line(const example_env *env, const char *out, const char *prefix,
                             unsigned i, char *line, size_t line_len)
{
    const char *found = NULL;
    size_t found_len = 0;
    for (const char *p = out; *p != '\0';) {
        size_t n = strcspn(p, "\n");
        if (strncmp(p, prefix, strlen(prefix)) == 0) {
            char buf[1024];
            snprintf(buf, sizeof(buf), "%.*s", (int)n, p);
            if (strstr(buf, env->host_port[i]) != NULL) {
                found = p;
                found_len = n;
            }
        }
        p += n + (p[n] == '\n');
    }
    if (found == NULL)
        return NULL;
    snprintf(line, line_len, "%.*s", (int)found_len, found);
    return line;
}

static int group_setup(void **state)
{
    example_env *env = calloc(1, sizeof(*env));
    if (env == NULL || fixture_start(&env->cluster, N_NODES, "requirepass " SECRET "\n") != 0) {
        free(env);
        return -1;
    }
    for (unsigned i = 0; i < N_NODES; i++) {
        int port = env->cluster.servers[i].port;
        snprintf(env->url_text[i], sizeof(env->url_text[i]),
                 "redis://:" SECRET "@127.0.0.1:%d?timeout_ms=5000", port);
        snprintf(env->host_port[i], sizeof(env->host_port[i]), "127.0.0.1:%d", port);
    }
    *state = env;
    return 0;
}

static int group_teardown(void **state)
{
    example_env *env = *state;
    fixture_stop(&env->cluster);
    free(env);
    return 0;
}

/* All nodes up: the lock is taken and released, each node's connection is logged, and each is
 * shown up at the end with the counters. */
static void logs_and_prints_every_node(void **state)
{
    example_env *env = *state;
    static char out[16384];
    int status = run_example(env, out, sizeof(out));
    assert_int_equal(status, 0);
    assert_non_null(strstr(out, "released: success (deleted on "));
    char line[1024];
    for (unsigned i = 0; i < N_NODES; i++) {
        if (last_line(env, out, "[redlock info] ", i, line, sizeof(line)) == NULL ||
            strstr(line, ": connected") == NULL)
            fail_msg("no log line of node %u's connection", i);
        if (last_line(env, out, "node ", i, line, sizeof(line)) == NULL)
            fail_msg("node %u's state is not printed", i);
        /* A release is decided at the quorum: the slowest node may still be connecting then
         * (its requests held for the connection), never failed. */
        if ((strstr(line, ": up, rtt ") == NULL && strstr(line, ": connecting, rtt ") == NULL) ||
            strstr(line, " 2 requests, 0 errors") == NULL)
            fail_msg("node %u: %s", i, line);
    }
    assert_non_null(strstr(out, "rounds: 1 won, 0 busy, 0 broken; releases: 1 ok, 0 lapsed"));
    assert_null(strstr(out, SECRET));
}

/* One node down: a quorum still takes the lock; the log says the node failed, and its state is
 * down with the reason. */
static void a_node_down_is_logged_and_shown(void **state)
{
    example_env *env = *state;
    assert_int_equal(fixture_kill(&env->cluster, 2), 0);
    static char out[16384];
    int status = run_example(env, out, sizeof(out));
    assert_int_equal(fixture_restart(&env->cluster, 2), 0);
    assert_int_equal(status, 0);
    assert_non_null(strstr(out, "released: success (deleted on 2 of 3 nodes"));
    char line[1024];
    if (last_line(env, out, "[redlock warn] ", 2, line, sizeof(line)) == NULL ||
        strstr(line, "connection attempt failed") == NULL)
        fail_msg("no warning about node 2's failed connection");
    /* The release's attempt on node 2 failed at once (down), so its connection had failed by
     * the time the release was decided. */
    if (last_line(env, out, "node ", 2, line, sizeof(line)) == NULL)
        fail_msg("node 2's state is not printed");
    if (strstr(line, ": down, ") == NULL || strstr(line, "last error: ") == NULL)
        fail_msg("node 2: %s", line);
    for (unsigned i = 0; i < 2; i++)
        if (last_line(env, out, "node ", i, line, sizeof(line)) == NULL ||
            strstr(line, ": up, ") == NULL)
            fail_msg("node %u is not shown up", i);
    assert_null(strstr(out, SECRET));
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH-TO-async_lock\n", argv[0]);
        return 2;
    }
    example_path = argv[1];
    static const struct CMUnitTest tests[] = {
        cmocka_unit_test(logs_and_prints_every_node),
        cmocka_unit_test(a_node_down_is_logged_and_shown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
