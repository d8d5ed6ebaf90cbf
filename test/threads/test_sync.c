/* SPDX-License-Identifier: MIT */
/* test_sync.c - the blocking, thread-safe API (redlock_sync_*) from many threads at once,
 * against five real redis-server processes.
 *
 * cmocka's assertions jump back into the test function, so they are used on the main thread
 * only; worker threads count what they saw and the main thread checks the counts. The fixture
 * is driven from the main thread too (it is not thread-safe).
 *
 * The rule of test/README.md holds here too: node timeouts of seconds, waits for late nodes,
 * time bounds only as the promised time plus generous slack. A failed check leaves the test
 * function by longjmp: sync_teardown then frees the sync clients it left (start_sync records
 * them) and stops its servers. Whatever a worker thread or a lost callback may still write
 * after that is static, never in the test's (then dead) stack frame. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <sched.h>
#include <uv.h>

#include "fixture.h"
#include "redlock.h"

#define N_NODES 5
/* A healthy node on a loaded machine (sanitizers, valgrind, CPU hogs) answers well within it. */
#define NODE_TIMEOUT_MS 5000
/* How long a test waits, at most, for something that must happen soon. */
#define WAIT_MS 10000
/* What a loaded machine may add to anything the library does promptly. */
#define SLACK_MS 2500

/* Options for a loaded machine (sanitizers, valgrind): node timeouts of seconds, short retries. */
static void test_options(redlock_options *opts)
{
    redlock_options_init(opts);
    opts->node_timeout_ms = NODE_TIMEOUT_MS;
    opts->connect_timeout_ms = NODE_TIMEOUT_MS;
    opts->retry_count = 0;
    opts->retry_delay_ms = 3;
    opts->retry_jitter_ms = 2;
    opts->release_waits_all = true; /* "every node deleted it" is there when a release returns */
}

/* The sync clients the running test has not freed yet, for sync_teardown. */
#define MAX_SYNCS 4
static redlock_sync *live_syncs[MAX_SYNCS];

static void track_sync(redlock_sync *sync)
{
    for (unsigned i = 0; i < MAX_SYNCS; i++) {
        if (live_syncs[i] == NULL) {
            live_syncs[i] = sync;
            return;
        }
    }
    fail_msg("more than %d sync clients in one test", MAX_SYNCS);
}

/* redlock_sync_free, and forget it. */
static void free_sync(redlock_sync *sync)
{
    for (unsigned i = 0; i < MAX_SYNCS; i++) {
        if (live_syncs[i] == sync)
            live_syncs[i] = NULL;
    }
    redlock_sync_free(sync);
}

/* cmocka teardown of every test: after a failed check, free the sync clients and stop the
 * servers the test left, so the next test starts clean. */
static int sync_teardown(void **state)
{
    (void)state;
    unsigned freed = 0;
    for (unsigned i = 0; i < MAX_SYNCS; i++) {
        if (live_syncs[i] != NULL) {
            redlock_sync_free(live_syncs[i]);
            live_syncs[i] = NULL;
            freed++;
        }
    }
    unsigned stopped = fixture_stop_all();
    if (freed > 0 || stopped > 0)
        fprintf(stderr,
                "# sync_teardown: the test ended with %u sync client(s) and %u cluster(s) left "
                "(a failed check): freed and stopped\n",
                freed, stopped);
    return 0;
}

#define SYNC_TEST(f) cmocka_unit_test_teardown(f, sync_teardown)

static redlock_sync *start_sync(fixture_cluster *cluster, const redlock_options *opts)
{
    redlock_options defaults;
    if (opts == NULL) {
        test_options(&defaults);
        opts = &defaults;
    }
    redlock_sync *sync = NULL;
    char err[256];
    int rc = redlock_sync_new(cluster->urls, cluster->n, opts, &sync, err, sizeof(err));
    if (rc != 0)
        fprintf(stderr, "redlock_sync_new: %s: %s\n", redlock_err_name(rc), err);
    assert_int_equal(rc, 0);
    assert_non_null(sync);
    track_sync(sync);
    return sync;
}

static void sleep_ms(unsigned ms)
{
    uv_sleep(ms);
}

static int acquire_str(redlock_sync *sync, const char *resource, uint64_t ttl_ms,
                       const redlock_lock_opts *opts, redlock_sync_lock **out,
                       redlock_report *report)
{
    return redlock_sync_acquire(sync, resource, strlen(resource), ttl_ms, opts, out, report);
}

/* How many servers of the cluster hold key with exactly this value. */
static unsigned count_holding(fixture_cluster *cluster, const char *key, const char *value,
                              size_t value_len)
{
    unsigned n = 0;
    for (unsigned i = 0; i < cluster->n; i++) {
        redisReply *r = fixture_command(cluster, i, "GET %s", key);
        n += r != NULL && r->type == REDIS_REPLY_STRING && r->len == value_len &&
             memcmp(r->str, value, value_len) == 0;
        if (r != NULL)
            freeReplyObject(r);
    }
    return n;
}

/* Wait (at most WAIT_MS) until every server holds key with value: an acquire or extend is decided
 * at the quorum, and the other nodes' commands land a moment later. */
static bool wait_all_holding(fixture_cluster *cluster, const char *key, const char *value,
                             size_t value_len)
{
    uint64_t deadline = redlock_now_us() + WAIT_MS * 1000;
    while (count_holding(cluster, key, value, value_len) != cluster->n) {
        if (redlock_now_us() >= deadline)
            return false;
        sleep_ms(10);
    }
    return true;
}

/* The validity a won round gave, against the promise: ttl - elapsed - drift (drift = ttl * 0.01
 * + 2 ms, the default drift factor), whatever the machine's speed. */
static void assert_validity(uint64_t validity_ms, uint64_t ttl_ms, uint64_t elapsed_us)
{
    uint64_t most_us = ttl_ms * 1000 - (ttl_ms * 10 + 2000);
    uint64_t least_us = most_us > elapsed_us + 1000 ? most_us - elapsed_us - 1000 : 0;
    if (validity_ms * 1000 > most_us || validity_ms * 1000 < least_us)
        fail_msg("validity %llu ms of a %llu ms ttl, round took %llu us",
                 (unsigned long long)validity_ms, (unsigned long long)ttl_ms,
                 (unsigned long long)elapsed_us);
}

/* ---- 1. contention: a plain counter per resource, incremented under the lock ---------------- */

#define CONTENDERS 8
#define CYCLES 200
#define RESOURCES 4

typedef struct contention {
    redlock_sync *sync;
    long counters[RESOURCES]; /* plain, non-atomic: only the distributed lock protects them */
} contention;

typedef struct contender {
    contention *shared;
    unsigned index;
    uint64_t rng;
    long increments[RESOURCES]; /* this thread's successful increments, per resource */
    int failures;               /* acquires or releases that did not return 0 */
    int first_error;
} contender;

static uint64_t xorshift(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

static void contender_main(void *arg)
{
    contender *me = arg;
    contention *sh = me->shared;
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.wait_ms = 30000; /* a contended acquire retries until it gets the lock */
    for (int cycle = 0; cycle < CYCLES; cycle++) {
        unsigned r = (unsigned)(xorshift(&me->rng) % RESOURCES);
        char resource[32];
        snprintf(resource, sizeof(resource), "threads:counter:%u", r);
        redlock_sync_lock *lock = NULL;
        int rc = acquire_str(sh->sync, resource, 10000, &lo, &lock, NULL);
        if (rc != 0) {
            me->failures++;
            if (me->first_error == 0)
                me->first_error = rc;
            continue;
        }
        /* Read, let others run, write: any overlap of two holders loses an increment. */
        long value = sh->counters[r];
        sched_yield();
        sh->counters[r] = value + 1;
        me->increments[r]++;
        rc = redlock_sync_release(lock, NULL);
        if (rc != 0) {
            me->failures++;
            if (me->first_error == 0)
                me->first_error = rc;
        }
        redlock_sync_lock_free(lock);
    }
}

static void contended_counters_are_exact(void **state)
{
    (void)state;
    fixture_cluster cluster;
    assert_int_equal(fixture_start(&cluster, N_NODES, NULL), 0);
    static contention shared; /* the threads' (static: see the top of the file) */
    contention *sh = &shared;
    memset(sh, 0, sizeof(*sh));
    sh->sync = start_sync(&cluster, NULL);

    static contender workers[CONTENDERS];
    uv_thread_t threads[CONTENDERS];
    memset(workers, 0, sizeof(workers));
    uint64_t t0 = redlock_now_us();
    for (unsigned i = 0; i < CONTENDERS; i++) {
        workers[i].shared = sh;
        workers[i].index = i;
        workers[i].rng = 0x9e3779b97f4a7c15ull * (i + 1);
        assert_int_equal(uv_thread_create(&threads[i], contender_main, &workers[i]), 0);
    }
    for (unsigned i = 0; i < CONTENDERS; i++)
        assert_int_equal(uv_thread_join(&threads[i]), 0);
    uint64_t took_ms = (redlock_now_us() - t0) / 1000;

    long total = 0;
    int failures = 0;
    for (unsigned r = 0; r < RESOURCES; r++) {
        long expected = 0;
        for (unsigned i = 0; i < CONTENDERS; i++)
            expected += workers[i].increments[r];
        assert_int_equal(sh->counters[r], expected);
        total += sh->counters[r];
    }
    for (unsigned i = 0; i < CONTENDERS; i++) {
        if (workers[i].failures != 0)
            fprintf(stderr, "thread %u: %d failures, first %s\n", i, workers[i].failures,
                    redlock_err_name(workers[i].first_error));
        failures += workers[i].failures;
    }
    assert_int_equal(failures, 0);
    assert_int_equal(total, CONTENDERS * CYCLES);
    fprintf(stderr, "# %d acquire/release cycles on %d threads in %llu ms\n", CONTENDERS * CYCLES,
            CONTENDERS, (unsigned long long)took_ms);

    free_sync(sh->sync);
    fixture_stop(&cluster);
}

/* ---- 2. reports: the per-node outcome survives the call ---------------------------------------
 */

static void report_shows_each_node(void **state)
{
    (void)state;
    fixture_cluster cluster;
    assert_int_equal(fixture_start(&cluster, N_NODES, NULL), 0);
    redlock_sync *sync = start_sync(&cluster, NULL);
    redlock_report *report = malloc(sizeof(*report));
    assert_non_null(report);
    redlock_report_init(report);

    /* Every node connected and answering: a release is confirmed by all five. */
    redlock_sync_lock *lock = NULL;
    assert_int_equal(acquire_str(sync, "threads:report", 5000, NULL, &lock, report), 0);
    assert_int_equal(report->status, 0);
    assert_int_equal(redlock_sync_release(lock, report), 0);
    assert_int_equal(report->votes_yes, N_NODES);
    redlock_sync_lock_free(lock);

    const unsigned dead = 2;
    assert_int_equal(fixture_kill(&cluster, dead), 0);
    /* Wait until the client has seen the connection drop: from then on the node fails at once,
     * so even a round decided at the quorum has its vote. */
    uint64_t deadline = redlock_now_us() + WAIT_MS * 1000;
    for (;;) {
        assert_int_equal(redlock_sync_inspect(sync, "threads:probe", 13, report), 0);
        if (report->nodes[dead].vote == REDLOCK_VOTE_ERROR && report->nodes[dead].error != NULL &&
            strstr(report->nodes[dead].error, "node down") != NULL)
            break;
        assert_true(redlock_now_us() < deadline);
        sleep_ms(10);
    }

    assert_int_equal(acquire_str(sync, "threads:report", 5000, NULL, &lock, report), 0);
    assert_int_equal(report->status, 0);
    assert_int_equal(report->n_nodes, N_NODES);
    assert_int_equal(report->attempts, 1);
    assert_true(report->votes_yes >= 3);
    assert_int_equal(report->votes_no, 0);
    assert_int_equal(report->nodes[dead].vote, REDLOCK_VOTE_ERROR);
    assert_non_null(report->nodes[dead].error);
    assert_ptr_equal(report->nodes[dead].error, report->errors[dead]);
    assert_true(strlen(report->nodes[dead].error) > 0);
    char port[16];
    snprintf(port, sizeof(port), ":%d", cluster.servers[dead].port);
    assert_non_null(strstr(report->nodes[dead].url, port));

    /* A release waits for every node: exactly the four live ones said yes. */
    assert_int_equal(redlock_sync_release(lock, report), 0);
    assert_int_equal(report->status, 0);
    assert_int_equal(report->votes_yes, N_NODES - 1);
    assert_int_equal(report->votes_error, 1);
    for (unsigned i = 0; i < N_NODES; i++) {
        if (i == dead) {
            assert_int_equal(report->nodes[i].vote, REDLOCK_VOTE_ERROR);
            assert_true(strlen(report->nodes[i].error) > 0);
        } else {
            assert_int_equal(report->nodes[i].vote, REDLOCK_VOTE_YES);
            assert_null(report->nodes[i].error);
        }
    }
    fprintf(stderr, "# dead node %s: %s\n", report->nodes[dead].url, report->nodes[dead].error);
    /* Released: a second release is refused at once, and the report says so. */
    assert_int_equal(redlock_sync_lock_status(lock), REDLOCK_ERELEASED);
    assert_int_equal(redlock_sync_release(lock, report), REDLOCK_ERELEASED);
    assert_int_equal(report->status, REDLOCK_ERELEASED);
    assert_int_equal(report->n_nodes, 0);
    redlock_sync_lock_free(lock);

    free(report);
    free_sync(sync);
    fixture_stop(&cluster);
}

/* Inspect reads every node's copy of the key; attach lets another client (another process)
 * extend and release a lock it did not take, knowing only the resource and the token. */
static void inspect_and_attach(void **state)
{
    (void)state;
    fixture_cluster cluster;
    assert_int_equal(fixture_start(&cluster, N_NODES, NULL), 0);
    redlock_sync *owner = start_sync(&cluster, NULL);
    redlock_sync *other = start_sync(&cluster, NULL);
    redlock_report *report = malloc(sizeof(*report));
    assert_non_null(report);
    redlock_report_init(report);
    const char *res = "threads:attach";

    redlock_sync_lock *lock = NULL;
    assert_int_equal(acquire_str(owner, res, 5000, NULL, &lock, report), 0);
    size_t token_len = 0;
    const char *token = redlock_sync_lock_token(lock, &token_len);

    /* Won at the quorum: once the other nodes' SETs landed, every node holds the owner's
     * token, with a ttl of at most 5 s left, and inspect shows it. */
    assert_true(wait_all_holding(&cluster, res, token, token_len));
    assert_int_equal(redlock_sync_inspect(other, res, strlen(res), report), 0);
    assert_int_equal(report->status, 0);
    assert_int_equal(report->votes_yes, N_NODES);
    for (unsigned i = 0; i < N_NODES; i++) {
        assert_int_equal(report->nodes[i].value_len, token_len);
        assert_memory_equal(report->nodes[i].value, token, token_len);
        assert_ptr_equal(report->nodes[i].value, report->values[i]);
        assert_in_range(report->nodes[i].pttl_ms, 1, 5000);
    }

    redlock_sync_lock *attached = NULL;
    assert_int_equal(
        redlock_sync_attach(other, res, strlen(res), token, token_len, 8000, &attached), 0);
    assert_non_null(attached);
    size_t len = 0;
    assert_memory_equal(redlock_sync_lock_token(attached, &len), token, token_len);
    assert_int_equal(len, token_len);
    assert_int_equal(redlock_sync_lock_validity_ms(attached), 0); /* unknown until an extend */
    assert_int_equal(redlock_sync_lock_status(attached), 0);
    assert_int_equal(redlock_sync_extend(attached, 0, 0, report), 0);
    assert_true(report->votes_yes >= N_NODES / 2 + 1); /* decided at the quorum */
    /* Its own ttl, 8 s. */
    assert_validity(redlock_sync_lock_validity_ms(attached), 8000, report->elapsed_us);
    assert_int_equal(redlock_sync_release(attached, report), 0);
    assert_int_equal(report->votes_yes, N_NODES);
    redlock_sync_lock_free(attached);

    /* Gone everywhere: inspect sees no key (a quorum answered, so status 0). */
    assert_int_equal(redlock_sync_inspect(owner, res, strlen(res), report), 0);
    assert_int_equal(report->votes_no, N_NODES);
    for (unsigned i = 0; i < N_NODES; i++) {
        assert_null(report->nodes[i].value);
        assert_int_equal(report->nodes[i].pttl_ms, -2);
    }
    assert_int_equal(redlock_sync_inspect(owner, res, strlen(res), NULL), 0);
    redlock_sync_lock_free(lock);

    /* Bad arguments: a clear status, nothing queued, nothing handed out. */
    char long_token[REDLOCK_TOKEN_MAX + 1];
    memset(long_token, 'x', sizeof(long_token));
    redlock_sync_lock *none = (redlock_sync_lock *)report; /* must be reset to NULL */
    assert_int_equal(redlock_sync_attach(NULL, res, strlen(res), "t", 1, 0, &none), REDLOCK_EINVAL);
    assert_null(none);
    assert_int_equal(redlock_sync_attach(other, res, strlen(res), "t", 1, 0, NULL), REDLOCK_EINVAL);
    assert_int_equal(redlock_sync_attach(other, res, 0, "t", 1, 0, &none), REDLOCK_EINVAL);
    assert_int_equal(redlock_sync_attach(other, res, strlen(res), NULL, 1, 0, &none),
                     REDLOCK_EINVAL);
    assert_int_equal(redlock_sync_attach(other, res, strlen(res), "t", 0, 0, &none),
                     REDLOCK_EINVAL);
    assert_int_equal(
        redlock_sync_attach(other, res, strlen(res), long_token, sizeof(long_token), 0, &none),
        REDLOCK_EINVAL);
    assert_int_equal(
        redlock_sync_attach(other, res, strlen(res), "t", 1, REDLOCK_TTL_MAX_MS + 1, &none),
        REDLOCK_EINVAL);
    assert_null(none);
    assert_int_equal(redlock_sync_inspect(other, res, 0, report), REDLOCK_EINVAL);
    assert_int_equal(report->status, REDLOCK_EINVAL);
    assert_int_equal(report->n_nodes, 0);
    assert_int_equal(redlock_sync_inspect(NULL, res, strlen(res), report), REDLOCK_EINVAL);
    assert_int_equal(redlock_sync_inspect(other, NULL, 3, NULL), REDLOCK_EINVAL);

    free(report);
    free_sync(other);
    free_sync(owner);
    fixture_stop(&cluster);
}

static void report_copy_is_deep(void **state)
{
    (void)state;
    char long_value[REDLOCK_TOKEN_MAX + 40];
    memset(long_value, 'v', sizeof(long_value));
    char long_error[400];
    memset(long_error, 'e', sizeof(long_error) - 1);
    long_error[sizeof(long_error) - 1] = '\0';
    char url0[] = "redis://a:1", url1[] = "redis://b:2";
    redlock_node_result nodes[2] = {
        {.url = url0,
         .vote = REDLOCK_VOTE_YES,
         .latency_us = 7,
         .pttl_ms = 900,
         .value = long_value,
         .value_len = sizeof(long_value)},
        {.url = url1, .vote = REDLOCK_VOTE_ERROR, .error = long_error, .pttl_ms = -2},
    };
    redlock_result result = {.status = REDLOCK_ENOQUORUM,
                             .n_nodes = 2,
                             .votes_yes = 1,
                             .votes_error = 1,
                             .attempts = 3,
                             .elapsed_us = 1234,
                             .nodes = nodes};
    redlock_report *report = malloc(sizeof(*report));
    assert_non_null(report);
    memset(report, 0xa5, sizeof(*report));
    redlock_report_init(report);
    memset((char *)report + sizeof(report->size), 0xa5, sizeof(*report) - sizeof(report->size));
    assert_int_equal(redlock_report_copy(report, &result), 0);
    memset(long_value, 'x', sizeof(long_value)); /* the report owns its copies */
    memset(long_error, 'x', sizeof(long_error) - 1);

    assert_int_equal(report->status, REDLOCK_ENOQUORUM);
    assert_int_equal(report->n_nodes, 2);
    assert_int_equal(report->votes_yes, 1);
    assert_int_equal(report->votes_error, 1);
    assert_int_equal(report->attempts, 3);
    assert_int_equal(report->elapsed_us, 1234);
    assert_ptr_equal(report->nodes[0].url, url0);
    assert_int_equal(report->nodes[0].latency_us, 7);
    assert_int_equal(report->nodes[0].pttl_ms, 900);
    assert_int_equal(report->nodes[0].value_len, REDLOCK_TOKEN_MAX);
    assert_ptr_equal(report->nodes[0].value, report->values[0]);
    for (size_t k = 0; k < REDLOCK_TOKEN_MAX; k++)
        assert_int_equal(report->values[0][k], 'v');
    assert_int_equal(report->values[0][REDLOCK_TOKEN_MAX], '\0');
    assert_null(report->nodes[0].error);
    assert_null(report->nodes[1].value);
    assert_int_equal(report->nodes[1].pttl_ms, -2);
    assert_ptr_equal(report->nodes[1].error, report->errors[1]);
    assert_int_equal(strlen(report->errors[1]), REDLOCK_ERROR_TEXT_MAX - 1);
    assert_int_equal(report->errors[1][0], 'e');
    free(report);
}

/* ---- 3. creation errors are reported at once ---------------------------------------------- */

static void new_reports_bad_arguments(void **state)
{
    (void)state;
    redlock_sync *sync = (redlock_sync *)(uintptr_t)1;
    char err[256];

    const char *bad[] = {"redis://127.0.0.1:6379", "http://example.com"};
    err[0] = '\0';
    assert_int_equal(redlock_sync_new(bad, 2, NULL, &sync, err, sizeof(err)), REDLOCK_EURL);
    assert_null(sync);
    assert_true(strlen(err) > 0);
    fprintf(stderr, "# bad URL: %s\n", err);

    const char *dup[] = {"redis://127.0.0.1:7001", "redis://127.0.0.1:7002",
                         "redis://127.0.0.1:7001"};
    sync = (redlock_sync *)(uintptr_t)1;
    err[0] = '\0';
    assert_int_equal(redlock_sync_new(dup, 3, NULL, &sync, err, sizeof(err)), REDLOCK_EDUPNODE);
    assert_null(sync);
    assert_true(strlen(err) > 0);
    fprintf(stderr, "# duplicate: %s\n", err);

    const char *pw[] = {"redis://:hunter2@127.0.0.1:7001", "redis://:hunter2@127.0.0.1:7001"};
    assert_int_equal(redlock_sync_new(pw, 2, NULL, &sync, err, sizeof(err)), REDLOCK_EDUPNODE);
    assert_null(strstr(err, "hunter2"));

    sync = (redlock_sync *)(uintptr_t)1;
    assert_int_equal(redlock_sync_new(bad, 0, NULL, &sync, err, sizeof(err)), REDLOCK_EINVAL);
    assert_null(sync);
    assert_true(strlen(err) > 0);

    redlock_options opts;
    redlock_options_init(&opts);
    opts.ttl_ms = 0;
    assert_int_equal(redlock_sync_new(dup, 1, &opts, &sync, NULL, 0), REDLOCK_EINVAL);
    assert_null(sync);
    assert_int_equal(redlock_sync_new(dup, 1, NULL, NULL, err, sizeof(err)), REDLOCK_EINVAL);

    /* NULL everywhere a handle is allowed to be NULL. */
    redlock_sync_free(NULL);
    redlock_sync_lock_free(NULL);
    redlock_report report;
    redlock_report_init(&report);
    assert_int_equal(redlock_sync_release(NULL, &report), REDLOCK_EINVAL);
    assert_int_equal(report.status, REDLOCK_EINVAL);
    assert_int_equal(redlock_sync_extend(NULL, 0, 0, NULL), REDLOCK_EINVAL);
    redlock_sync_lock *lock = (redlock_sync_lock *)(uintptr_t)1;
    assert_int_equal(redlock_sync_acquire(NULL, "x", 1, 0, NULL, &lock, NULL), REDLOCK_EINVAL);
    assert_null(lock);
}

/* Bad arguments to calls on a live sync client come back at once with the async API's code. */
static void calls_report_bad_arguments(void **state)
{
    (void)state;
    fixture_cluster cluster;
    assert_int_equal(fixture_start(&cluster, N_NODES, NULL), 0);
    redlock_sync *sync = start_sync(&cluster, NULL);
    redlock_report report;
    redlock_report_init(&report);
    redlock_sync_lock *lock = NULL;
    assert_int_equal(redlock_sync_acquire(sync, "", 0, 0, NULL, &lock, &report), REDLOCK_EINVAL);
    assert_int_equal(report.status, REDLOCK_EINVAL);
    assert_string_equal(report.message, "resource is empty");
    assert_int_equal(redlock_sync_acquire(sync, "x", 1, 0, NULL, NULL, NULL), REDLOCK_EINVAL);
    /* Over the size limit: refused on the caller's thread with the async call's words. */
    static char big[REDLOCK_RESOURCE_MAX + 1];
    memset(big, 'b', sizeof(big));
    assert_int_equal(redlock_sync_acquire(sync, big, sizeof(big), 0, NULL, &lock, &report),
                     REDLOCK_EINVAL);
    assert_null(lock);
    assert_non_null(strstr(report.message, "over REDLOCK_RESOURCE_MAX"));
    assert_int_equal(redlock_sync_inspect(sync, big, sizeof(big), &report), REDLOCK_EINVAL);
    assert_non_null(strstr(report.message, "lock a digest of it instead"));
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.retry_count = -5;
    assert_int_equal(acquire_str(sync, "threads:bad", 1000, &lo, &lock, &report), REDLOCK_EINVAL);
    assert_int_equal(report.status, REDLOCK_EINVAL);
    assert_null(lock);
    redlock_auto_opts ao;
    redlock_auto_opts_init(&ao);
    redlock_lock_opts_init(&lo);
    lo.auto_extend = &ao;
    ao.extend_at = 2; /* bad auto-extension options */
    assert_int_equal(acquire_str(sync, "threads:bad", 1000, &lo, &lock, NULL), REDLOCK_EINVAL);

    assert_int_equal(acquire_str(sync, "threads:bad", 5000, NULL, &lock, &report), 0);
    assert_int_equal(redlock_sync_extend(lock, 0, 0x80, &report), REDLOCK_EINVAL);
    assert_int_equal(report.status, REDLOCK_EINVAL);
    /* A custom token comes back as given, with its NUL. */
    size_t len = 0;
    const char *token = redlock_sync_lock_token(lock, &len);
    assert_int_equal(len, 32);
    assert_int_equal(strlen(token), 32);
    const char *res = redlock_sync_lock_resource(lock, &len);
    assert_int_equal(len, strlen("threads:bad"));
    assert_memory_equal(res, "threads:bad", len);
    redlock_sync_lock *other = NULL;
    redlock_lock_opts_init(&lo);
    lo.token = "tok\0en";
    lo.token_len = 6;
    assert_int_equal(redlock_sync_acquire(sync, "a\0b", 3, 5000, &lo, &other, NULL), 0);
    token = redlock_sync_lock_token(other, &len);
    assert_int_equal(len, 6);
    assert_memory_equal(token, "tok\0en", 7);
    res = redlock_sync_lock_resource(other, &len);
    assert_int_equal(len, 3);
    assert_memory_equal(res, "a\0b", 3);
    assert_int_equal(redlock_sync_release(other, NULL), 0);
    redlock_sync_lock_free(other);
    /* lock is left held and not freed: the free takes care of it. */
    free_sync(sync);
    fixture_stop(&cluster);
}

/* ---- 4. free with calls in flight -------------------------------------------------------- */

#define WAITERS 4

typedef struct waiter {
    redlock_sync *sync;
    atomic_int started;
    int rc;
    int report_status;
    uint64_t took_us;
    redlock_sync_lock *lock;
} waiter;

static void waiter_main(void *arg)
{
    waiter *w = arg;
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.wait_ms = 30000;
    redlock_report *report = malloc(sizeof(*report));
    if (report == NULL) {
        w->rc = REDLOCK_ENOMEM;
        return;
    }
    redlock_report_init(report);
    atomic_store(&w->started, 1);
    uint64_t t0 = redlock_now_us();
    w->rc = acquire_str(w->sync, "threads:held", 30000, &lo, &w->lock, report);
    w->took_us = redlock_now_us() - t0;
    w->report_status = report->status;
    free(report);
}

typedef struct lost_record {
    atomic_int calls;
    atomic_int reason;
    atomic_int status_seen; /* redlock_sync_lock_status() inside the callback */
    atomic_int on_main_thread;
    atomic_int reentrant_rc;    /* a blocking call from inside the callback */
    atomic_int sigpipe_blocked; /* on the library's thread */
    bool try_reentrant;
    bool free_inside;
    redlock_sync *sync;
    uv_thread_t main_thread;
} lost_record;

static void record_lost(redlock_lock *lock, int reason, void *data)
{
    lost_record *rec = data;
    redlock_sync_lock *sl = redlock_lock_get_data(lock);
    atomic_store(&rec->reason, reason);
    atomic_store(&rec->status_seen, sl != NULL ? redlock_sync_lock_status(sl) : 1);
    uv_thread_t self = uv_thread_self();
    atomic_store(&rec->on_main_thread, uv_thread_equal(&self, &rec->main_thread));
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, NULL, &mask);
    atomic_store(&rec->sigpipe_blocked, sigismember(&mask, SIGPIPE) == 1);
    if (rec->try_reentrant) {
        redlock_sync_lock *other = NULL;
        atomic_store(&rec->reentrant_rc,
                     acquire_str(rec->sync, "threads:reentrant", 1000, NULL, &other, NULL));
    }
    if (rec->free_inside)
        redlock_sync_lock_free(sl);
    atomic_fetch_add(&rec->calls, 1);
}

/* A blocking acquire waiting (wait_ms 60 s) behind a holder, abandoned from another thread with
 * redlock_sync_cancel(its report). */
typedef struct cancel_waiter {
    redlock_sync *sync;
    redlock_report report;
    int rc;
    redlock_sync_lock *lock;
} cancel_waiter;

static void cancel_waiter_main(void *arg)
{
    cancel_waiter *w = arg;
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.wait_ms = 60000;
    w->rc = acquire_str(w->sync, "threads:cancel", 30000, &lo, &w->lock, &w->report);
}

/* The canceled call returns REDLOCK_ECANCELED long before its wait, hands out no handle, and the
 * holder's key is untouched; a cancel that names no call in progress is REDLOCK_ENOTFOUND. Then
 * redlock_sync_free releases the lock still held, and redlock_sync_free_ex(REDLOCK_CLOSE_FAST)
 * leaves another one held. */
static void sync_cancel_and_releasing_free(void **state)
{
    (void)state;
    fixture_cluster cluster;
    assert_int_equal(fixture_start(&cluster, N_NODES, NULL), 0);
    redlock_sync *sync = start_sync(&cluster, NULL);
    redlock_sync_lock *held = NULL;
    assert_int_equal(acquire_str(sync, "threads:cancel", 30000, NULL, &held, NULL), 0);
    size_t token_len = 0;
    const char *token = redlock_sync_lock_token(held, &token_len);
    assert_true(wait_all_holding(&cluster, "threads:cancel", token, token_len));

    assert_int_equal(redlock_sync_cancel(NULL, NULL), REDLOCK_EINVAL);
    static redlock_report unused; /* static: see the top of the file */
    redlock_report_init(&unused);
    assert_int_equal(redlock_sync_cancel(sync, &unused), REDLOCK_ENOTFOUND);

    static cancel_waiter w;
    memset(&w, 0, sizeof(w));
    w.sync = sync;
    redlock_report_init(&w.report);
    uv_thread_t thread;
    uint64_t t0 = redlock_now_us();
    assert_int_equal(uv_thread_create(&thread, cancel_waiter_main, &w), 0);
    /* Until the waiter's call has reached the library, there is nothing to cancel. */
    int rc;
    while ((rc = redlock_sync_cancel(sync, &w.report)) == REDLOCK_ENOTFOUND &&
           redlock_now_us() - t0 < WAIT_MS * 1000ull)
        sleep_ms(5);
    assert_int_equal(rc, 0);
    uv_thread_join(&thread);
    assert_int_equal(w.rc, REDLOCK_ECANCELED);
    assert_int_equal(w.report.status, REDLOCK_ECANCELED);
    assert_null(w.lock);
    assert_true(redlock_now_us() - t0 < 60000 * 1000ull); /* not the end of its wait */
    assert_int_equal(redlock_sync_cancel(sync, &w.report), REDLOCK_ENOTFOUND);
    assert_int_equal(count_holding(&cluster, "threads:cancel", token, token_len), N_NODES);

    char copy[REDLOCK_TOKEN_MAX + 1];
    memcpy(copy, token, token_len); /* the handle goes with the free */
    free_sync(sync);
    assert_int_equal(count_holding(&cluster, "threads:cancel", copy, token_len), 0);

    sync = start_sync(&cluster, NULL);
    assert_int_equal(acquire_str(sync, "threads:kept", 30000, NULL, &held, NULL), 0);
    token = redlock_sync_lock_token(held, &token_len);
    memcpy(copy, token, token_len);
    assert_true(wait_all_holding(&cluster, "threads:kept", copy, token_len));
    for (unsigned i = 0; i < MAX_SYNCS; i++) {
        if (live_syncs[i] == sync)
            live_syncs[i] = NULL;
    }
    redlock_sync_free_ex(sync, REDLOCK_CLOSE_FAST);
    assert_int_equal(count_holding(&cluster, "threads:kept", copy, token_len), N_NODES);
    fixture_stop(&cluster);
}

static void free_cancels_calls_in_flight(void **state)
{
    (void)state;
    fixture_cluster cluster;
    assert_int_equal(fixture_start(&cluster, N_NODES, NULL), 0);
    redlock_sync *sync = start_sync(&cluster, NULL);

    /* The main thread holds the resource; an auto-extended lock hears of the free too. */
    redlock_sync_lock *held = NULL;
    assert_int_equal(acquire_str(sync, "threads:held", 30000, NULL, &held, NULL), 0);
    static lost_record lost; /* static: see the top of the file */
    memset(&lost, 0, sizeof(lost));
    lost.main_thread = uv_thread_self();
    redlock_auto_opts ao;
    redlock_auto_opts_init(&ao);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.auto_extend = &ao;
    lo.lost_cb = record_lost;
    lo.lost_data = &lost;
    redlock_sync_lock *extended = NULL;
    assert_int_equal(acquire_str(sync, "threads:auto", 5000, &lo, &extended, NULL), 0);

    static waiter waiters[WAITERS];
    uv_thread_t threads[WAITERS];
    memset(waiters, 0, sizeof(waiters));
    for (unsigned i = 0; i < WAITERS; i++) {
        waiters[i].sync = sync;
        assert_int_equal(uv_thread_create(&threads[i], waiter_main, &waiters[i]), 0);
    }
    for (unsigned i = 0; i < WAITERS; i++)
        while (!atomic_load(&waiters[i].started))
            sleep_ms(1);
    sleep_ms(300); /* well inside their retries */

    uint64_t t0 = redlock_now_us();
    free_sync(sync); /* also frees held and extended */
    uint64_t free_ms = (redlock_now_us() - t0) / 1000;
    int joined[WAITERS];
    for (unsigned i = 0; i < WAITERS; i++)
        joined[i] = uv_thread_join(&threads[i]);
    for (unsigned i = 0; i < WAITERS; i++) {
        assert_int_equal(joined[i], 0);
        assert_int_equal(waiters[i].rc, REDLOCK_ECANCELED);
        assert_int_equal(waiters[i].report_status, REDLOCK_ECANCELED);
        assert_null(waiters[i].lock);
        assert_true(waiters[i].took_us < 10000000); /* not their 30 s wait */
    }
    /* The free waits for no node (it cancels): far below a node timeout. */
    assert_true(free_ms < NODE_TIMEOUT_MS);
    assert_int_equal(atomic_load(&lost.calls), 1);
    assert_int_equal(atomic_load(&lost.reason), REDLOCK_ECANCELED);
    assert_int_equal(atomic_load(&lost.status_seen), REDLOCK_ECANCELED);
    assert_false(atomic_load(&lost.on_main_thread));
    fixture_stop(&cluster);
}

/* ---- 5. reading a handle while another thread extends it ---------------------------------- */

typedef struct reader {
    redlock_sync_lock *lock;
    atomic_int stop;
    long reads;
    int bad_status;
    int deadline_went_back;
    int bad_validity;
    int bad_token;
} reader;

static void reader_main(void *arg)
{
    reader *r = arg;
    uint64_t last_deadline = 0;
    while (!atomic_load(&r->stop)) {
        uint64_t deadline = redlock_sync_lock_deadline_us(r->lock);
        uint64_t validity = redlock_sync_lock_validity_ms(r->lock);
        int status = redlock_sync_lock_status(r->lock);
        size_t len = 0;
        const char *token = redlock_sync_lock_token(r->lock, &len);
        if (status != 0)
            r->bad_status++;
        if (deadline < last_deadline)
            r->deadline_went_back++;
        if (validity == 0 || validity > 5000)
            r->bad_validity++;
        if (len != 32 || strlen(token) != 32)
            r->bad_token++;
        last_deadline = deadline;
        r->reads++;
        sched_yield(); /* under valgrind (one thread at a time) a pure spin starves the loop */
    }
}

typedef struct extender {
    redlock_sync_lock *lock;
    int rounds;
    int failures;
    int first_error;
    int deadline_not_moved;
} extender;

static void extender_main(void *arg)
{
    extender *e = arg;
    for (int i = 0; i < e->rounds; i++) {
        uint64_t before = redlock_sync_lock_deadline_us(e->lock);
        redlock_report report;
        redlock_report_init(&report);
        int rc = redlock_sync_extend(e->lock, 5000, 0, &report);
        if (rc != 0 || report.status != 0) {
            if (e->first_error == 0)
                e->first_error = rc;
            e->failures++;
        } else if (redlock_sync_lock_deadline_us(e->lock) <= before) {
            e->deadline_not_moved++;
        }
    }
}

static void reads_race_free_with_extends(void **state)
{
    (void)state;
    fixture_cluster cluster;
    assert_int_equal(fixture_start(&cluster, N_NODES, NULL), 0);
    redlock_sync *sync = start_sync(&cluster, NULL);
    redlock_sync_lock *lock = NULL;
    assert_int_equal(acquire_str(sync, "threads:read", 5000, NULL, &lock, NULL), 0);

    static reader readers[2];
    uv_thread_t reader_threads[2];
    memset(readers, 0, sizeof(readers));
    for (int i = 0; i < 2; i++) {
        readers[i].lock = lock;
        assert_int_equal(uv_thread_create(&reader_threads[i], reader_main, &readers[i]), 0);
    }
    static extender ext;
    ext = (extender){.lock = lock, .rounds = 200};
    uv_thread_t ext_thread;
    assert_int_equal(uv_thread_create(&ext_thread, extender_main, &ext), 0);
    assert_int_equal(uv_thread_join(&ext_thread), 0);
    for (int i = 0; i < 2; i++) {
        atomic_store(&readers[i].stop, 1);
        assert_int_equal(uv_thread_join(&reader_threads[i]), 0);
    }
    if (ext.failures != 0)
        fprintf(stderr, "extend failed %d times, first %s\n", ext.failures,
                redlock_err_name(ext.first_error));
    assert_int_equal(ext.failures, 0);
    assert_int_equal(ext.deadline_not_moved, 0);
    for (int i = 0; i < 2; i++) {
        assert_true(readers[i].reads > 0);
        assert_int_equal(readers[i].bad_status, 0);
        assert_int_equal(readers[i].deadline_went_back, 0);
        assert_int_equal(readers[i].bad_validity, 0);
        assert_int_equal(readers[i].bad_token, 0);
    }
    assert_int_equal(redlock_sync_release(lock, NULL), 0);
    assert_int_equal(redlock_sync_lock_status(lock), REDLOCK_ERELEASED);
    assert_int_equal(redlock_sync_extend(lock, 0, 0, NULL), REDLOCK_ERELEASED);
    redlock_sync_lock_free(lock);
    free_sync(sync);
    fixture_stop(&cluster);
}

/* ---- 6. auto-extension through the blocking API ------------------------------------------ */

typedef struct prober {
    redlock_sync *sync;
    const char *resource;
    atomic_int stop;
    atomic_int attempts;
    int busy;
    int other;
    int other_rc;
} prober;

static void prober_main(void *arg)
{
    prober *p = arg;
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.retry_count = 0; /* no wait */
    while (!atomic_load(&p->stop)) {
        redlock_sync_lock *lock = NULL;
        int rc = acquire_str(p->sync, p->resource, 300, &lo, &lock, NULL);
        atomic_fetch_add(&p->attempts, 1);
        if (rc == REDLOCK_EBUSY) {
            p->busy++;
        } else {
            p->other++;
            p->other_rc = rc;
            if (rc == 0) {
                redlock_sync_release(lock, NULL);
                redlock_sync_lock_free(lock);
            }
        }
        uv_sleep(50);
    }
}

static void auto_extension_keeps_lock(void **state)
{
    (void)state;
    fixture_cluster cluster;
    assert_int_equal(fixture_start(&cluster, N_NODES, NULL), 0);
    redlock_sync *sync = start_sync(&cluster, NULL);

    static lost_record lost; /* static: see the top of the file */
    memset(&lost, 0, sizeof(lost));
    lost.main_thread = uv_thread_self();
    redlock_auto_opts ao;
    redlock_auto_opts_init(&ao);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.auto_extend = &ao;
    lo.lost_cb = record_lost;
    lo.lost_data = &lost;
    redlock_sync_lock *lock = NULL;
    /* Extended every third of the ttl, lost a tenth before the deadline: a ttl of 2 s leaves an
     * extension more than a second to be late by on a loaded machine. */
    const uint64_t ttl_ms = 2000, hold_ms = 2500;
    assert_int_equal(acquire_str(sync, "threads:auto", ttl_ms, &lo, &lock, NULL), 0);
    uint64_t first_deadline = redlock_sync_lock_deadline_us(lock);

    static prober p;
    memset(&p, 0, sizeof(p));
    p.sync = sync;
    p.resource = "threads:auto";
    uv_thread_t probe_thread;
    assert_int_equal(uv_thread_create(&probe_thread, prober_main, &p), 0);
    uint64_t t0 = redlock_now_us();
    int checks = 0, not_held = 0;
    while (redlock_now_us() - t0 < hold_ms * 1000 || checks < 10 || atomic_load(&p.attempts) < 5) {
        if (redlock_sync_lock_status(lock) != 0 ||
            redlock_sync_lock_deadline_us(lock) <= redlock_now_us())
            not_held++;
        checks++;
        sleep_ms(20);
    }
    atomic_store(&p.stop, 1);
    assert_int_equal(uv_thread_join(&probe_thread), 0);

    if (atomic_load(&lost.calls) != 0)
        fprintf(stderr, "lost: %s\n", redlock_err_name(atomic_load(&lost.reason)));
    assert_int_equal(not_held, 0);
    assert_int_equal(atomic_load(&lost.calls), 0);
    if (p.other != 0)
        fprintf(stderr, "prober: %d unexpected results, last %s\n", p.other,
                redlock_err_name(p.other_rc));
    assert_int_equal(p.busy, atomic_load(&p.attempts));
    /* Held past its first deadline, twice its ttl: extended, and still held now. */
    uint64_t now = redlock_now_us();
    assert_true(now > first_deadline);
    assert_true(redlock_sync_lock_deadline_us(lock) > now);
    assert_int_equal(redlock_sync_lock_status(lock), 0);

    assert_int_equal(redlock_sync_release(lock, NULL), 0);
    assert_int_equal(redlock_sync_lock_status(lock), REDLOCK_ERELEASED);
    redlock_sync_lock_free(lock);
    /* Free at once for another holder; no lost callback for a release. */
    redlock_sync_lock *next = NULL;
    assert_int_equal(acquire_str(sync, "threads:auto", 300, NULL, &next, NULL), 0);
    assert_int_equal(redlock_sync_release(next, NULL), 0);
    redlock_sync_lock_free(next);
    sleep_ms(ttl_ms / 2);
    assert_int_equal(atomic_load(&lost.calls), 0);

    free_sync(sync);
    assert_int_equal(atomic_load(&lost.calls), 0);
    fixture_stop(&cluster);
}

/* Keys deleted behind the holder's back: the lost callback runs on the library's thread, the
 * handle's status is the reason by then, a blocking call from inside it is refused, and freeing
 * the handle from inside it is allowed. */
static void lost_callback_sets_status(void **state)
{
    (void)state;
    fixture_cluster cluster;
    assert_int_equal(fixture_start(&cluster, N_NODES, NULL), 0);
    redlock_sync *sync = start_sync(&cluster, NULL);

    static lost_record lost; /* static: see the top of the file */
    memset(&lost, 0, sizeof(lost));
    lost.main_thread = uv_thread_self();
    lost.try_reentrant = true;
    lost.sync = sync;
    redlock_auto_opts ao;
    redlock_auto_opts_init(&ao);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.auto_extend = &ao;
    lo.lost_cb = record_lost;
    lo.lost_data = &lost;
    redlock_sync_lock *lock = NULL;
    /* The extension at a third of the ttl finds the keys gone; a ttl of 1.5 s leaves it more
     * than 800 ms before the guard would say EEXPIRED instead. */
    assert_int_equal(acquire_str(sync, "threads:lost", 1500, &lo, &lock, NULL), 0);
    assert_int_equal(redlock_sync_lock_status(lock), 0);
    for (unsigned i = 0; i < N_NODES; i++) {
        redisReply *r = fixture_command(&cluster, i, "DEL %s", "threads:lost");
        assert_non_null(r);
        freeReplyObject(r);
    }
    uint64_t t0 = redlock_now_us();
    while (atomic_load(&lost.calls) == 0 && redlock_now_us() - t0 < WAIT_MS * 1000)
        sleep_ms(5);
    assert_int_equal(atomic_load(&lost.calls), 1);
    assert_int_equal(atomic_load(&lost.reason), REDLOCK_ELOST);
    assert_int_equal(atomic_load(&lost.status_seen), REDLOCK_ELOST);
    assert_false(atomic_load(&lost.on_main_thread));
    /* The library's thread blocks signals: SIGPIPE there cannot kill the process. */
    assert_true(atomic_load(&lost.sigpipe_blocked));
    assert_int_equal(atomic_load(&lost.reentrant_rc), REDLOCK_EINVAL);
    assert_int_equal(redlock_sync_lock_status(lock), REDLOCK_ELOST);
    assert_int_equal(redlock_sync_release(lock, NULL), REDLOCK_ELOST); /* the keys were gone */
    redlock_sync_lock_free(lock);

    /* Again, and this time the callback frees the handle itself. */
    memset(&lost, 0, sizeof(lost));
    lost.main_thread = uv_thread_self();
    lost.free_inside = true;
    assert_int_equal(acquire_str(sync, "threads:lost", 1500, &lo, &lock, NULL), 0);
    for (unsigned i = 0; i < N_NODES; i++) {
        redisReply *r = fixture_command(&cluster, i, "DEL %s", "threads:lost");
        assert_non_null(r);
        freeReplyObject(r);
    }
    t0 = redlock_now_us();
    while (atomic_load(&lost.calls) == 0 && redlock_now_us() - t0 < WAIT_MS * 1000)
        sleep_ms(5);
    assert_int_equal(atomic_load(&lost.calls), 1);
    assert_int_equal(atomic_load(&lost.reason), REDLOCK_ELOST);

    free_sync(sync);
    fixture_stop(&cluster);
}

/* Three of five nodes restart empty (a broken assumption, docs/safety.md) under two 60 s locks,
 * one auto-extended and one not: both are checked as soon as the client reconnects, and each
 * handle's status reads REDLOCK_ELOST within the reconnect backoff (1.5 reconnect_max_ms) plus
 * one round (the node timeout) of the restarts, not at the first planned extension, 20 s away. */
static void restart_empty_sets_status_at_once(void **state)
{
    (void)state;
    fixture_cluster cluster;
    assert_int_equal(fixture_start(&cluster, N_NODES, NULL), 0);
    redlock_options o;
    test_options(&o);
    o.reconnect_max_ms = 1000;
    redlock_sync *sync = start_sync(&cluster, &o);
    static lost_record lost; /* static: see the top of the file */
    memset(&lost, 0, sizeof(lost));
    lost.main_thread = uv_thread_self();
    redlock_auto_opts ao;
    redlock_auto_opts_init(&ao);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.auto_extend = &ao;
    lo.lost_cb = record_lost;
    lo.lost_data = &lost;
    redlock_sync_lock *autol = NULL, *plain = NULL;
    assert_int_equal(acquire_str(sync, "threads:amnesia-auto", 60000, &lo, &autol, NULL), 0);
    assert_int_equal(acquire_str(sync, "threads:amnesia-plain", 60000, NULL, &plain, NULL), 0);
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(fixture_restart(&cluster, i), 0);
    uint64_t back = redlock_now_us(), bound_us = (1500 + NODE_TIMEOUT_MS + SLACK_MS) * 1000ull;
    while ((redlock_sync_lock_status(autol) == 0 || redlock_sync_lock_status(plain) == 0) &&
           redlock_now_us() - back < bound_us)
        sleep_ms(5);
    printf("# both handles read REDLOCK_ELOST %llu ms after the restarts\n",
           (unsigned long long)((redlock_now_us() - back) / 1000));
    assert_int_equal(redlock_sync_lock_status(plain), REDLOCK_ELOST);
    assert_int_equal(redlock_sync_lock_status(autol), REDLOCK_ELOST);
    assert_int_equal(atomic_load(&lost.calls), 1);
    assert_int_equal(atomic_load(&lost.reason), REDLOCK_ELOST);
    assert_int_equal(redlock_sync_release(plain, NULL), REDLOCK_ELOST);
    assert_int_equal(redlock_sync_release(autol, NULL), REDLOCK_ELOST);
    redlock_sync_lock_free(plain);
    redlock_sync_lock_free(autol);
    free_sync(sync);
    fixture_stop(&cluster);
}

/* Freeing an auto-extended handle without releasing stops the extension: the key runs out with
 * its ttl and nobody is told it was lost. */
static void lock_free_stops_auto_extension(void **state)
{
    (void)state;
    fixture_cluster cluster;
    assert_int_equal(fixture_start(&cluster, N_NODES, NULL), 0);
    redlock_sync *sync = start_sync(&cluster, NULL);
    static lost_record lost; /* static: see the top of the file */
    memset(&lost, 0, sizeof(lost));
    redlock_auto_opts ao;
    redlock_auto_opts_init(&ao);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.auto_extend = &ao;
    lo.lost_cb = record_lost;
    lo.lost_data = &lost;
    redlock_sync_lock *lock = NULL;
    const uint64_t ttl_ms = 300;
    uint64_t t0 = redlock_now_us(); /* before the key's SET: it runs out ttl_ms after, or later */
    assert_int_equal(acquire_str(sync, "threads:forget", ttl_ms, &lo, &lock, NULL), 0);
    redlock_sync_lock_free(lock);

    redlock_lock_opts wait;
    redlock_lock_opts_init(&wait);
    wait.wait_ms = WAIT_MS;
    redlock_sync_lock *next = NULL;
    assert_int_equal(acquire_str(sync, "threads:forget", 1000, &wait, &next, NULL), 0);
    uint64_t took_ms = (redlock_now_us() - t0) / 1000;
    /* The old key lived out its ttl (a few ms of slack between the server's clock and ours),
     * renewed by at most the one extension that may have been in flight at the free. */
    if (took_ms < ttl_ms - 5 || took_ms >= 2 * ttl_ms + SLACK_MS)
        fail_msg("free to next acquire: %llu ms", (unsigned long long)took_ms);
    assert_int_equal(redlock_sync_release(next, NULL), 0);
    redlock_sync_lock_free(next);
    assert_int_equal(atomic_load(&lost.calls), 0);
    free_sync(sync);
    assert_int_equal(atomic_load(&lost.calls), 0);
    fixture_stop(&cluster);
}

/* ---- allocation failures -------------------------------------------------------------- */

/* A realloc hook that fails on request. It is called from the library's thread as well, so its
 * state is atomic. */
typedef struct failing_alloc {
    atomic_long countdown;   /* > 0: fail the allocation that brings it to 0; <= 0: never */
    atomic_size_t fail_size; /* non-zero: fail every allocation of exactly this size */
    atomic_size_t watch_min; /* record the first allocation of at least this size ... */
    atomic_size_t seen;      /* ... here */
    atomic_long live;        /* allocations not yet freed */
} failing_alloc;

static void *failing_realloc(void *ud, void *ptr, size_t size)
{
    failing_alloc *fa = ud;
    if (size == 0) {
        if (ptr != NULL)
            atomic_fetch_sub(&fa->live, 1);
        free(ptr);
        return NULL;
    }
    if (ptr != NULL)
        return realloc(ptr, size);
    if (atomic_fetch_sub(&fa->countdown, 1) == 1 || size == atomic_load(&fa->fail_size))
        return NULL;
    size_t watch = atomic_load(&fa->watch_min);
    size_t none = 0;
    if (watch != 0 && size >= watch)
        atomic_compare_exchange_strong(&fa->seen, &none, size);
    void *p = malloc(size);
    if (p != NULL)
        atomic_fetch_add(&fa->live, 1);
    return p;
}

static void failing_options(redlock_options *opts, failing_alloc *fa)
{
    atomic_init(&fa->countdown, 0);
    atomic_init(&fa->fail_size, 0);
    atomic_init(&fa->watch_min, 0);
    atomic_init(&fa->seen, 0);
    atomic_init(&fa->live, 0);
    test_options(opts);
    opts->realloc_fn = failing_realloc;
    opts->realloc_ud = fa;
}

/* Fail the first, second, ... allocation of redlock_sync_new until it succeeds: each failure is
 * REDLOCK_ENOMEM with a message and leaves nothing allocated. */
static void new_survives_every_allocation_failure(void **state)
{
    (void)state;
    fixture_cluster cluster;
    assert_int_equal(fixture_start(&cluster, N_NODES, NULL), 0);
    static failing_alloc fa; /* outlives a failed assertion, as the library's thread may */
    redlock_options opts;
    failing_options(&opts, &fa);
    redlock_sync *sync = NULL;
    int failures = 0;
    for (long k = 1; k < 1000; k++) {
        atomic_store(&fa.countdown, k);
        char err[256] = "";
        int rc = redlock_sync_new(cluster.urls, cluster.n, &opts, &sync, err, sizeof(err));
        if (rc == 0) {
            track_sync(sync);
            break;
        }
        assert_int_equal(rc, REDLOCK_ENOMEM);
        assert_null(sync);
        assert_true(strlen(err) > 0);
        assert_int_equal(atomic_load(&fa.live), 0);
        failures++;
    }
    atomic_store(&fa.countdown, 0);
    assert_non_null(sync);
    assert_true(failures >= 2); /* the sync client itself, then the async client */
    redlock_sync_lock *lock = NULL;
    assert_int_equal(acquire_str(sync, "threads:alloc", 5000, NULL, &lock, NULL), 0);
    assert_int_equal(redlock_sync_release(lock, NULL), 0);
    free_sync(sync);
    assert_int_equal(atomic_load(&fa.live), 0);
    fixture_stop(&cluster);
}

/* The handle of an acquire cannot be allocated: REDLOCK_ENOMEM, nothing taken. */
static void acquire_out_of_memory_takes_nothing(void **state)
{
    (void)state;
    fixture_cluster cluster;
    assert_int_equal(fixture_start(&cluster, N_NODES, NULL), 0);
    static failing_alloc fa; /* outlives a failed assertion, as the library's thread may */
    redlock_options opts;
    failing_options(&opts, &fa);
    redlock_sync *sync = start_sync(&cluster, &opts);

    /* A resource of an unusual length singles out the handle's allocation: the first one of at
     * least that length (the handle embeds its copy of the resource, and is allocated before
     * the acquire starts). */
    size_t len = REDLOCK_RESOURCE_MAX - 3;
    char *resource = malloc(len);
    assert_non_null(resource);
    memset(resource, 'r', len);
    redlock_sync_lock *lock = NULL;
    atomic_store(&fa.watch_min, len);
    assert_int_equal(redlock_sync_acquire(sync, resource, len, 5000, NULL, &lock, NULL), 0);
    atomic_store(&fa.watch_min, 0);
    assert_int_equal(redlock_sync_release(lock, NULL), 0);
    redlock_sync_lock_free(lock);
    size_t handle_size = atomic_load(&fa.seen);
    assert_true(handle_size > len + REDLOCK_TOKEN_MAX); /* not the async key copy */

    long live_before = atomic_load(&fa.live);
    atomic_store(&fa.fail_size, handle_size);
    redlock_report report;
    redlock_report_init(&report);
    lock = (redlock_sync_lock *)(uintptr_t)1;
    assert_int_equal(redlock_sync_acquire(sync, resource, len, 5000, NULL, &lock, &report),
                     REDLOCK_ENOMEM);
    atomic_store(&fa.fail_size, 0);
    assert_null(lock);
    assert_int_equal(report.status, REDLOCK_ENOMEM);
    assert_int_equal(report.n_nodes, 0);
    assert_int_equal(atomic_load(&fa.live), live_before);
    /* Nothing was taken: the resource is free at once (no retries). */
    assert_int_equal(redlock_sync_acquire(sync, resource, len, 5000, NULL, &lock, NULL), 0);
    assert_int_equal(redlock_sync_release(lock, NULL), 0);
    free(resource);
    free_sync(sync);
    assert_int_equal(atomic_load(&fa.live), 0);
    fixture_stop(&cluster);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const char *filter = getenv("H_TEST_FILTER");
    if (filter != NULL && filter[0] != '\0')
        cmocka_set_test_filter(filter);
    const struct CMUnitTest tests[] = {
        SYNC_TEST(contended_counters_are_exact),
        SYNC_TEST(report_shows_each_node),
        SYNC_TEST(inspect_and_attach),
        SYNC_TEST(report_copy_is_deep),
        SYNC_TEST(new_reports_bad_arguments),
        SYNC_TEST(calls_report_bad_arguments),
        SYNC_TEST(free_cancels_calls_in_flight),
        SYNC_TEST(sync_cancel_and_releasing_free),
        SYNC_TEST(reads_race_free_with_extends),
        SYNC_TEST(auto_extension_keeps_lock),
        SYNC_TEST(lost_callback_sets_status),
        SYNC_TEST(restart_empty_sets_status_at_once),
        SYNC_TEST(lock_free_stops_auto_extension),
        SYNC_TEST(acquire_out_of_memory_takes_nothing),
        SYNC_TEST(new_survives_every_allocation_failure),
    };
    return cmocka_run_group_tests_name("threads", tests, NULL, NULL);
}
