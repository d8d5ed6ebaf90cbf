/* SPDX-License-Identifier: MIT */
/* test_fence_pause.c - the pause scenario fences exist for (issue 12), end to end, with
 * the example worker (examples/fenced_store.c) over five real lock nodes and a sixth server as
 * the data store.
 *
 * Worker A takes the lock with a fence, checks it, and stops right before its write: it waits
 * for a marker file, and the test also stops it with SIGSTOP, as a GC or VM pause would. The
 * test waits until A's keys are gone from every node and A's validity has run out. Worker B
 * then takes the lock and writes. A is continued and writes: the store refuses A's write (its
 * fence is below B's), A reports it, and B's value survives.
 *
 * The control: the same scenario without fencing loses B's write (A's late plain SET overwrites
 * it). It must: otherwise the scenario would not show what the fence prevents.
 *
 * Only A is slow, on purpose; every wait is bounded by generous limits and by what the workers
 * report, never by how fast the machine is. Run by meson with the example's path as argument. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"
#include "proc.h"

#define LOCK_NODES 5
#define DATA 5        /* server 5 is the store */
#define TTL_MS "2000" /* A checks its lock within this; a loaded machine needs some */
#define WAIT_MS 30000

static const char *worker_path;
static fixture_cluster cluster;
static char nodes[LOCK_NODES * 64];
static char data_url[64];
static char marker[320];

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static char *get(unsigned server, const char *key)
{
    redisReply *r = fixture_command(&cluster, server, "GET %s", key);
    assert_non_null(r);
    char *v = r->type == REDIS_REPLY_STRING ? strdup(r->str) : NULL;
    freeReplyObject(r);
    return v;
}

static bool key_anywhere(const char *key)
{
    for (unsigned i = 0; i < LOCK_NODES; i++) {
        redisReply *r = fixture_command(&cluster, i, "EXISTS %s", key);
        assert_non_null(r);
        bool there = r->integer != 0;
        freeReplyObject(r);
        if (there)
            return true;
    }
    return false;
}

static void start_worker(proc *p, const char *value, bool fencing, bool stall)
{
    const char *argv[16];
    int n = 0;
    argv[n++] = worker_path;
    argv[n++] = "--nodes";
    argv[n++] = nodes;
    argv[n++] = "--data";
    argv[n++] = data_url;
    argv[n++] = "--key";
    argv[n++] = "report";
    argv[n++] = "--value";
    argv[n++] = value;
    argv[n++] = "--ttl";
    argv[n++] = TTL_MS;
    if (!fencing)
        argv[n++] = "--no-fence";
    if (stall) {
        argv[n++] = "--wait-for";
        argv[n++] = marker;
    }
    argv[n] = NULL;
    proc_start(p, worker_path, argv, NULL);
}

static void finish(proc *p, int want_status)
{
    assert_true(proc_wait(p, WAIT_MS));
    if (p->status != want_status)
        fprintf(stderr, "worker exited %d, want %d\nstdout:\n%s\nstderr:\n%s\n", p->status,
                want_status, p->out, p->err);
    assert_int_equal(p->status, want_status);
}

/* The scenario. Returns the store's value at the end; A's and B's output go to a_out, b_out. */
static char *pause_scenario(bool fencing, int a_status, proc *a, proc *b)
{
    assert_int_equal(fixture_start(&cluster, LOCK_NODES + 1, NULL), 0);
    nodes[0] = '\0';
    for (unsigned i = 0; i < LOCK_NODES; i++) {
        /* Node timeouts of seconds: only A is ever slow, on purpose. */
        char one[64];
        snprintf(one, sizeof(one), "%s%s?timeout_ms=5000", i > 0 ? "," : "", cluster.urls[i]);
        strcat(nodes, one);
    }
    snprintf(data_url, sizeof(data_url), "%s", cluster.urls[DATA]);
    snprintf(marker, sizeof(marker), "%s/fence-pause-marker", cluster.dir);
    unlink(marker);

    /* A: acquired and checked, now stopped right before its write. */
    start_worker(a, "from A", fencing, true);
    assert_true(proc_wait_for_output(a, "checked", false, WAIT_MS));
    long long a_acquired = now_ms();
    proc_signal(a, SIGSTOP);

    /* A's lock runs out while it is stopped: wait until its keys are gone everywhere and its
     * ttl has passed since it reported the lock (its validity is shorter than that). */
    while (key_anywhere("report:lock") || now_ms() - a_acquired < atoi(TTL_MS)) {
        assert_true(now_ms() - a_acquired < WAIT_MS);
        sleep_ms(20);
    }

    /* B takes the lock and writes. */
    start_worker(b, "from B", fencing, false);
    finish(b, 0);
    assert_non_null(strstr(b->out, "wrote"));
    char *value = get(DATA, "report");
    assert_non_null(value);
    assert_string_equal(value, "from B");
    free(value);

    /* A wakes up and writes, late. */
    FILE *f = fopen(marker, "w");
    assert_non_null(f);
    fclose(f);
    proc_signal(a, SIGCONT);
    finish(a, a_status);
    value = get(DATA, "report");
    assert_non_null(value);
    fixture_stop(&cluster);
    return value;
}

static void late_write_is_refused_with_fencing(void **state)
{
    (void)state;
    proc a, b;
    char *value = pause_scenario(true, 3, &a, &b);
    /* The store refused A, said why, and B's value survived. */
    assert_string_equal(value, "from B");
    unsigned long long fa = 0, fb = 0;
    const char *sa = strstr(a.out, "acquired fence="), *sb = strstr(b.out, "acquired fence=");
    assert_non_null(sa);
    assert_non_null(sb);
    fa = strtoull(sa + strlen("acquired fence="), NULL, 10);
    fb = strtoull(sb + strlen("acquired fence="), NULL, 10);
    assert_true(fa >= 1 && fb > fa);
    assert_non_null(strstr(a.out, "refused: STALE fence"));
    assert_null(strstr(a.out, "wrote"));
    /* A's release knows its hold had lapsed. */
    assert_non_null(strstr(a.out, "released: the lock had lapsed"));
    free(value);
    proc_free(&a);
    proc_free(&b);
}

/* The control: without fencing, A's late write overwrites B's. */
static void late_write_wins_without_fencing(void **state)
{
    (void)state;
    proc a, b;
    char *value = pause_scenario(false, 0, &a, &b);
    assert_non_null(strstr(a.out, "wrote"));
    if (strcmp(value, "from A") != 0)
        fail_msg("without fencing, A's late write should have overwritten B's (the control), "
                 "but the store holds \"%s\"",
                 value);
    free(value);
    proc_free(&a);
    proc_free(&b);
}

static int teardown(void **state)
{
    (void)state;
    fixture_stop_all();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s PATH-OF-fenced_store\n", argv[0]);
        return 2;
    }
    worker_path = argv[1];
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(late_write_is_refused_with_fencing, teardown),
        cmocka_unit_test_teardown(late_write_wins_without_fencing, teardown),
    };
    return cmocka_run_group_tests_name("fault-fence", tests, NULL, NULL);
}
