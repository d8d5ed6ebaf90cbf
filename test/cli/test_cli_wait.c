/* SPDX-License-Identifier: MIT */
/* test_cli_wait.c - `--wait` is the library's wait, against real redis-server processes: the
 * tool's waiters and a library waiter on the same key get the lock in the order they began to
 * wait (docs/operations.md, "Waiting for a lock"), a wait interrupted by a signal leaves the
 * queue, and a wait says on stderr what the nodes say while it lasts (not with --quiet).
 *
 * The old tool polled with a loop of its own (one round every 200 +- 100 ms) and never entered
 * the queue: its waiters won in any order, and none of them was ever in KEY:queue. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "cli_harness.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <redlock.h>

/* The waiters in KEY:queue on server i (ZCARD). */
static long long queue_length(fixture_cluster *c, unsigned i, const char *key)
{
    redisReply *r = fixture_command(c, i, "ZCARD %s:queue", key);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    long long n = r->integer;
    freeReplyObject(r);
    return n;
}

/* Wait (bounded, generously) until KEY:queue holds n waiters on every server of c. */
static void wait_queue_length(fixture_cluster *c, const char *key, long long n)
{
    long long until = now_ms() + TOOL_TIMEOUT_MS;
    for (unsigned i = 0; i < c->n; i++) {
        long long got;
        while ((got = queue_length(c, i, key)) != n) {
            if (now_ms() >= until)
                fail_msg("%s:queue on node %u holds %lld waiters, not %lld", key, i, got, n);
            sleep_ms(10);
        }
    }
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return strdup("");
    static char buf[256];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return strdup(buf);
}

/* ---- a library waiter: the blocking API on a thread of its own ------------------------------ */

typedef struct lib_waiter {
    const char *key;
    const char *order_path; /* it appends "L\n" holding the lock */
    int status;             /* its acquire's */
    pthread_t thread;
} lib_waiter;

static void *lib_waiter_main(void *arg)
{
    lib_waiter *w = arg;
    const char *urls[3];
    char url_buf[3][160];
    for (unsigned i = 0; i < 3; i++) {
        snprintf(url_buf[i], sizeof(url_buf[i]), "%s", shared.servers[i].url);
        urls[i] = url_buf[i];
    }
    redlock_options opts;
    redlock_options_init(&opts);
    opts.node_timeout_ms = 10000; /* as the tool's runs here (TOOL_NODE_TIMEOUT) */
    redlock_sync *sync = NULL;
    char err[256];
    w->status = redlock_sync_new(urls, 3, &opts, &sync, err, sizeof(err));
    if (w->status != 0)
        return NULL;
    redlock_lock_opts lock_opts;
    redlock_lock_opts_init(&lock_opts);
    lock_opts.wait_ms = 60000;
    redlock_sync_lock *lock = NULL;
    w->status = redlock_sync_acquire(sync, w->key, strlen(w->key), 30000, &lock_opts, &lock, NULL);
    if (w->status == 0) {
        FILE *f = fopen(w->order_path, "a");
        if (f != NULL) {
            fputs("L\n", f);
            fclose(f);
        }
        redlock_sync_release(lock, NULL);
        redlock_sync_lock_free(lock);
    }
    redlock_sync_free(sync);
    return NULL;
}

/* Three `run --wait` and a library waiter start waiting in the order 1, 2, L, 3 (each once the
 * one before is in the queue on every node) while a holder holds the key; the holder releases,
 * and each gets the lock in that order, hands it on at its release, and exits 0. */
static void waiters_take_turns_in_the_order_they_began(void **state)
{
    (void)state;
    const char *key = "cli:wait-fifo";
    char order[512], script[700];
    marker_path(order, sizeof(order), "wait-order");
    unlink(order);
    char *holder = acquire_shared(key, "60s");
    proc waiters[3];
    lib_waiter lib = {key, order, -1, 0};
    long long in_queue = 0;
    for (int k = 1; k <= 3; k++) {
        if (k == 3) { /* the library's waiter, between the tool's second and third */
            assert_int_equal(pthread_create(&lib.thread, NULL, lib_waiter_main, &lib), 0);
            wait_queue_length(&shared, key, ++in_queue);
        }
        snprintf(script, sizeof(script), "echo %d >> '%s'", k, order);
        tool_start(
            &waiters[k - 1], NULL,
            ARGS("-q", "-n", shared_nodes, "-w", "60s", "run", key, "--", "sh", "-c", script));
        wait_queue_length(&shared, key, ++in_queue);
    }
    proc rel;
    TOOL(&rel, NULL, "-n", shared_nodes, "release", key, holder);
    expect_status(&rel, 0);
    proc_free(&rel);
    for (int k = 0; k < 3; k++) {
        tool_finish(&waiters[k], 4 * TOOL_TIMEOUT_MS);
        expect_status(&waiters[k], 0);
        proc_free(&waiters[k]);
    }
    assert_int_equal(pthread_join(lib.thread, NULL), 0);
    assert_int_equal(lib.status, 0);
    char *got = read_file(order);
    assert_string_equal(got, "1\n2\nL\n3\n");
    free(got);
    expect_key_everywhere(&shared, key, NULL);
    free(holder);
    unlink(order);
}

/* A signal ends the wait: the tool's place in the queue goes with it, on every node, so the
 * waiters behind it are not held up until its place's deadline. */
static void interrupted_wait_leaves_the_queue(void **state)
{
    (void)state;
    const char *key = "cli:wait-leave";
    char *holder = acquire_shared(key, "60s");
    proc p;
    tool_start(&p, NULL, ARGS("-n", shared_nodes, "-w", "60s", "acquire", key));
    wait_queue_length(&shared, key, 1);
    proc_signal(&p, SIGTERM);
    tool_finish(&p, TOOL_TIMEOUT_MS);
    assert_int_equal(p.term_signal, SIGTERM);
    jv *v = json_line(&p);
    assert_string_equal(jstr(v, "status"), "REDLOCK_ECANCELED");
    jv_free(v);
    proc_free(&p);
    wait_queue_length(&shared, key, 0);
    expect_key_everywhere(&shared, key, holder);
    for (unsigned i = 0; i < shared.n; i++)
        server_del(&shared, i, key);
    free(holder);
}

/* While it waits, the tool says what the nodes say: held by another on two, the third down (its
 * error named); -q says nothing of it. The old tool waited in silence. */
static void wait_says_what_the_nodes_say(void **state)
{
    (void)state;
    const char *key = "cli:wait-progress";
    assert_int_equal(fixture_start(&extra, 3, NULL), 0);
    char nodes[1024];
    node_list(&extra, NULL, nodes, sizeof(nodes));
    assert_int_equal(fixture_kill(&extra, 2), 0);
    proc p;
    TOOL(&p, NULL, "-n", nodes, "-t", "60s", "acquire", key);
    expect_status(&p, 0);
    proc_free(&p);

    TOOL(&p, NULL, "-n", nodes, "-w", "8s", "acquire", key);
    expect_status(&p, 75);
    const char *line = strstr(p.err, "redlock: waiting for cli:wait-progress (");
    if (line == NULL)
        fail_msg("no progress line; stderr:\n%s", p.err);
    const char *end = strchr(line, '\n');
    char said[600];
    snprintf(said, sizeof(said), "%.*s", (int)(end != NULL ? end - line : 500), line);
    char down[200];
    snprintf(down, sizeof(down), "1 down (%s: ", extra.servers[2].url);
    if (strstr(said, "of 3 nodes: 2 busy (held by another)") == NULL ||
        strstr(said, down) == NULL || strstr(said, "connection refused)") == NULL)
        fail_msg("the progress line does not say what the nodes said: %s", said);
    proc_free(&p);

    TOOL(&p, NULL, "-q", "-n", nodes, "-w", "3s", "acquire", key);
    expect_status(&p, 75);
    assert_null(strstr(p.err, "waiting for"));
    proc_free(&p);
}

int main(void)
{
    static const struct CMUnitTest tests[] = {
        cmocka_unit_test(waiters_take_turns_in_the_order_they_began),
        cmocka_unit_test(interrupted_wait_leaves_the_queue),
        cmocka_unit_test(wait_says_what_the_nodes_say),
    };
    static const char *const temp_files[] = {"wait-order", NULL};
    return cli_main("cli-wait", tests, sizeof(tests) / sizeof(tests[0]), temp_files);
}
