/* SPDX-License-Identifier: MIT */
/* test_sync_with.c - the blocking side of issue 33, against five real redis-server processes:
 * redlock_sync_with (a function run holding an auto-extended lock, returning how the hold ended),
 * the loss seen from the caller's threads (redlock_sync_lock_lost, an atomic read, and the loss
 * descriptor, readable once the lock is lost and closed with the handle), and cancelers fired
 * from other threads, one of them shared by an async client and a blocking one.
 *
 * As in test_sync.c: cmocka's assertions and the fixture on the main thread only (the function of
 * redlock_sync_with runs on the thread that called it, the main thread here); whatever another
 * thread may write after a failed check is static; node timeouts of seconds. */
#include <dirent.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <uv.h>

#include "fixture.h"
#include "redlock.h"

#define N_NODES 5
#define NODE_TIMEOUT_MS 5000
#define WAIT_MS 10000

static void test_options(redlock_options *opts)
{
    redlock_options_init(opts);
    opts->node_timeout_ms = NODE_TIMEOUT_MS;
    opts->connect_timeout_ms = NODE_TIMEOUT_MS;
    opts->retry_count = 0;
    opts->release_waits_all = true;
}

/* The sync clients the running test has not freed yet, for the teardown. */
#define MAX_SYNCS 4
static redlock_sync *live_syncs[MAX_SYNCS];

static redlock_sync *start_sync(fixture_cluster *cluster)
{
    redlock_options opts;
    test_options(&opts);
    redlock_sync *sync = NULL;
    char err[256];
    int rc = redlock_sync_new(cluster->urls, cluster->n, &opts, &sync, err, sizeof(err));
    if (rc != 0)
        fprintf(stderr, "redlock_sync_new: %s: %s\n", redlock_err_name(rc), err);
    assert_int_equal(rc, 0);
    for (unsigned i = 0; i < MAX_SYNCS; i++) {
        if (live_syncs[i] == NULL) {
            live_syncs[i] = sync;
            return sync;
        }
    }
    fail_msg("more than %d sync clients in one test", MAX_SYNCS);
    return NULL;
}

static void free_sync(redlock_sync *sync)
{
    for (unsigned i = 0; i < MAX_SYNCS; i++) {
        if (live_syncs[i] == sync)
            live_syncs[i] = NULL;
    }
    redlock_sync_free(sync);
}

static int teardown(void **state)
{
    (void)state;
    for (unsigned i = 0; i < MAX_SYNCS; i++) {
        if (live_syncs[i] != NULL)
            redlock_sync_free(live_syncs[i]);
        live_syncs[i] = NULL;
    }
    fixture_stop_all();
    return 0;
}

#define TEST(f) cmocka_unit_test_teardown(f, teardown)

/* How many servers hold key with exactly value. */
static unsigned count_holding(fixture_cluster *cluster, const char *key, const char *value)
{
    unsigned n = 0;
    for (unsigned i = 0; i < cluster->n; i++) {
        redisReply *r = fixture_command(cluster, i, "GET %s", key);
        n += r != NULL && r->type == REDIS_REPLY_STRING && strcmp(r->str, value) == 0;
        if (r != NULL)
            freeReplyObject(r);
    }
    return n;
}

/* Wait (at most WAIT_MS) until want servers hold key with value. */
static bool wait_holding(fixture_cluster *cluster, const char *key, const char *value,
                         unsigned want)
{
    uint64_t deadline = redlock_now_us() + WAIT_MS * 1000ull;
    while (count_holding(cluster, key, value) != want) {
        if (redlock_now_us() >= deadline)
            return false;
        uv_sleep(10);
    }
    return true;
}

static void run_on_each(fixture_cluster *cluster, unsigned n, const char *fmt, const char *key)
{
    for (unsigned i = 0; i < n; i++) {
        redisReply *r = fixture_command(cluster, i, fmt, key);
        assert_non_null(r);
        freeReplyObject(r);
    }
}

static bool readable(int fd, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN) != 0;
}

static unsigned open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    unsigned n = 0;
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

/* What a function of redlock_sync_with saw, and what it does. */
typedef struct with_rec {
    fixture_cluster *cluster;
    const char *key;
    int calls;
    char token[64];
    bool held_everywhere; /* every node held its token while it ran */
    bool lost_at_start;   /* redlock_sync_lock_lost when it began */
    bool fd_at_start;     /* the loss descriptor was readable when it began */
    int fd;               /* its loss descriptor */
    bool steal;           /* take the keys away on every node, then wait on the descriptor */
    bool delete_quorum;   /* delete the keys on three nodes, and return at once */
    bool told;            /* the descriptor became readable (steal) ... */
    bool lost_flag;       /* ... and the flag said lost */
    uint64_t told_us, deadline_us;
    int release_in_fn;      /* redlock_sync_release from inside: refused */
    redlock_canceler *fire; /* fired from inside */
    unsigned sleep_ms;      /* then a pause */
} with_rec;

static void with_fn(redlock_sync_lock *lock, void *data)
{
    with_rec *w = data;
    w->calls++;
    snprintf(w->token, sizeof(w->token), "%s", redlock_sync_lock_token(lock, NULL));
    w->held_everywhere = wait_holding(w->cluster, w->key, w->token, N_NODES);
    w->lost_at_start = redlock_sync_lock_lost(lock);
    w->fd = redlock_sync_lock_fd(lock);
    w->fd_at_start = readable(w->fd, 0);
    w->release_in_fn = redlock_sync_release(lock, NULL);
    redlock_sync_lock_free(lock); /* ignored inside */
    if (w->fire != NULL)
        redlock_canceler_fire(w->fire);
    if (w->sleep_ms > 0)
        uv_sleep(w->sleep_ms);
    if (w->steal) {
        run_on_each(w->cluster, N_NODES, "SET %s intruder", w->key);
        w->told = readable(w->fd, WAIT_MS);
        w->told_us = redlock_now_us();
        w->deadline_us = redlock_sync_lock_deadline_us(lock);
        w->lost_flag = redlock_sync_lock_lost(lock);
    }
    if (w->delete_quorum)
        run_on_each(w->cluster, 3, "DEL %s", w->key);
}

static int with(redlock_sync *sync, with_rec *w, uint64_t ttl_ms, const redlock_lock_opts *opts,
                redlock_hold_end *end, redlock_report *report)
{
    return redlock_sync_with(sync, w->key, REDLOCK_STRLEN, ttl_ms, opts, with_fn, w, end, report);
}

/* 1. The function runs holding the lock (every node holds its token), not lost, its descriptor
 * not readable; the caller's release inside is refused; on return the lock is released on every
 * node: released, 0. */
static void with_runs_fn_holding(void **state)
{
    (void)state;
    fixture_cluster cluster;
    assert_int_equal(fixture_start(&cluster, N_NODES, NULL), 0);
    redlock_sync *sync = start_sync(&cluster);
    static with_rec w;
    w = (with_rec){.cluster = &cluster, .key = "with:held"};
    static redlock_report report;
    redlock_report_init(&report);
    redlock_hold_end end = REDLOCK_HOLD_CANCELED;
    assert_int_equal(with(sync, &w, 3000, NULL, &end, &report), 0);
    assert_int_equal(end, REDLOCK_HOLD_RELEASED);
    assert_int_equal(w.calls, 1);
    assert_true(w.held_everywhere);
    assert_false(w.lost_at_start);
    assert_true(w.fd >= 0);
    assert_false(w.fd_at_start);
    assert_int_equal(w.release_in_fn, REDLOCK_EINVAL);
    assert_int_equal(report.votes_yes, N_NODES); /* the release's report */
    assert_int_equal(count_holding(&cluster, "with:held", w.token), 0);
    assert_int_equal(redlock_sync_with(sync, "x", 1, 0, NULL, NULL, NULL, &end, NULL),
                     REDLOCK_EINVAL);
    free_sync(sync);
    fixture_stop(&cluster);
}

/* 2. The lock is lost while the function runs (another holder took every key): the descriptor,
 * not readable before, becomes readable, before the validity ran out, and the flag says lost;
 * the hold ends lost with REDLOCK_ELOST, and the other holder's keys stay. */
static void with_loss_is_seen(void **state)
{
    (void)state;
    fixture_cluster cluster;
    assert_int_equal(fixture_start(&cluster, N_NODES, NULL), 0);
    redlock_sync *sync = start_sync(&cluster);
    static with_rec w;
    w = (with_rec){.cluster = &cluster, .key = "with:lost", .steal = true};
    redlock_hold_end end = REDLOCK_HOLD_CANCELED;
    assert_int_equal(with(sync, &w, 3000, NULL, &end, NULL), REDLOCK_ELOST);
    assert_int_equal(end, REDLOCK_HOLD_LOST);
    assert_false(w.fd_at_start);
    assert_true(w.told);
    assert_true(w.lost_flag);
    assert_true(w.told_us < w.deadline_us);
    assert_int_equal(count_holding(&cluster, "with:lost", "intruder"), N_NODES);
    free_sync(sync);
    fixture_stop(&cluster);
}

/* 3. A quorum lost the keys between two extensions and the function returned before anything
 * noticed: the hold is not shown continuous, so it ends lapsed with the release's ELOST. */
static void with_lapsed_hold(void **state)
{
    (void)state;
    fixture_cluster cluster;
    assert_int_equal(fixture_start(&cluster, N_NODES, NULL), 0);
    redlock_sync *sync = start_sync(&cluster);
    static with_rec w;
    w = (with_rec){.cluster = &cluster, .key = "with:lapsed", .delete_quorum = true};
    redlock_hold_end end = REDLOCK_HOLD_CANCELED;
    assert_int_equal(with(sync, &w, 30000, NULL, &end, NULL), REDLOCK_ELOST);
    assert_int_equal(end, REDLOCK_HOLD_LAPSED);
    assert_int_equal(count_holding(&cluster, "with:lapsed", w.token), 0);
    free_sync(sync);
    fixture_stop(&cluster);
}

/* 4. Another holder has it: the function never runs; not acquired, REDLOCK_EBUSY. */
static void with_not_acquired(void **state)
{
    (void)state;
    fixture_cluster cluster;
    assert_int_equal(fixture_start(&cluster, N_NODES, NULL), 0);
    redlock_sync *sync = start_sync(&cluster);
    redlock_sync_lock *holder = NULL;
    assert_int_equal(
        redlock_sync_acquire(sync, "with:busy", REDLOCK_STRLEN, 30000, NULL, &holder, NULL), 0);
    static with_rec w;
    w = (with_rec){.cluster = &cluster, .key = "with:busy"};
    static redlock_report report;
    redlock_report_init(&report);
    redlock_hold_end end = REDLOCK_HOLD_CANCELED;
    assert_int_equal(with(sync, &w, 30000, NULL, &end, &report), REDLOCK_EBUSY);
    assert_int_equal(end, REDLOCK_HOLD_NOT_ACQUIRED);
    assert_int_equal(w.calls, 0);
    assert_true(report.votes_no >= 3);
    assert_int_equal(redlock_sync_release(holder, NULL), 0);
    redlock_sync_lock_free(holder);
    free_sync(sync);
    fixture_stop(&cluster);
}

static void fire_after(void *arg)
{
    uv_sleep(100);
    redlock_canceler_fire(arg);
}

/* 5. Cancelers: fired before the call, the call returns REDLOCK_ECANCELED at once and takes
 * nothing; fired from another thread during a wait behind another holder, the wait ends
 * canceled, the function never runs, the holder keeps its keys; fired by the function itself,
 * the hold goes on (auto-extended past its ttl) until it returns, then is released. */
static void with_cancelers(void **state)
{
    (void)state;
    fixture_cluster cluster;
    assert_int_equal(fixture_start(&cluster, N_NODES, NULL), 0);
    redlock_sync *sync = start_sync(&cluster);
    redlock_canceler *canceler = NULL;
    assert_int_equal(redlock_canceler_new(&canceler), 0);
    redlock_canceler_fire(canceler);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.cancel = canceler;
    lo.wait_ms = 30000;
    static with_rec w;
    w = (with_rec){.cluster = &cluster, .key = "with:tok"};
    static redlock_report report;
    redlock_report_init(&report);
    redlock_hold_end end = REDLOCK_HOLD_RELEASED;
    assert_int_equal(with(sync, &w, 30000, &lo, &end, &report), REDLOCK_ECANCELED);
    assert_int_equal(end, REDLOCK_HOLD_CANCELED);
    assert_non_null(strstr(report.message, "canceler"));
    redlock_sync_lock *lock = NULL;
    assert_int_equal(redlock_sync_acquire(sync, "with:tok", REDLOCK_STRLEN, 0, &lo, &lock, NULL),
                     REDLOCK_ECANCELED);
    assert_null(lock);
    assert_int_equal(w.calls, 0);
    for (unsigned i = 0; i < N_NODES; i++) {
        redisReply *r = fixture_command(&cluster, i, "DBSIZE");
        assert_non_null(r);
        assert_int_equal(r->integer, 0);
        freeReplyObject(r);
    }
    redlock_canceler_free(canceler);

    /* During a wait, from another thread. */
    redlock_sync_lock *holder = NULL;
    assert_int_equal(
        redlock_sync_acquire(sync, "with:tok", REDLOCK_STRLEN, 30000, NULL, &holder, NULL), 0);
    assert_true(wait_holding(&cluster, "with:tok", redlock_sync_lock_token(holder, NULL), N_NODES));
    assert_int_equal(redlock_canceler_new(&canceler), 0);
    lo.cancel = canceler;
    uv_thread_t t;
    assert_int_equal(uv_thread_create(&t, fire_after, canceler), 0);
    assert_int_equal(with(sync, &w, 30000, &lo, &end, NULL), REDLOCK_ECANCELED);
    uv_thread_join(&t);
    assert_int_equal(end, REDLOCK_HOLD_CANCELED);
    assert_int_equal(w.calls, 0);
    assert_int_equal(count_holding(&cluster, "with:tok", redlock_sync_lock_token(holder, NULL)),
                     N_NODES);
    assert_int_equal(redlock_sync_release(holder, NULL), 0);
    redlock_sync_lock_free(holder);
    redlock_canceler_free(canceler);

    /* During the function, by the function: the hold is kept, then released. */
    assert_int_equal(redlock_canceler_new(&canceler), 0);
    lo.cancel = canceler;
    w = (with_rec){.cluster = &cluster, .key = "with:tok", .fire = canceler, .sleep_ms = 2500};
    assert_int_equal(with(sync, &w, 2000, &lo, &end, NULL), 0);
    assert_int_equal(end, REDLOCK_HOLD_RELEASED);
    assert_int_equal(w.calls, 1);
    assert_true(redlock_canceler_fired(canceler));
    assert_int_equal(count_holding(&cluster, "with:tok", w.token), 0);
    redlock_canceler_free(canceler);
    free_sync(sync);
    fixture_stop(&cluster);
}

/* 6. One token, an async client and a blocking one, both waiting behind a holder: fired once
 * from a third thread, it cancels both. */
typedef struct waiter_thread {
    redlock_sync *sync;
    redlock_lock_opts *opts;
    int rc;
    redlock_hold_end end;
    with_rec w;
} waiter_thread;

static void waiter_main(void *arg)
{
    waiter_thread *t = arg;
    t->rc = redlock_sync_with(t->sync, "with:shared", REDLOCK_STRLEN, 30000, t->opts, with_fn,
                              &t->w, &t->end, NULL);
}

static int async_calls, async_status;
static void on_async_acquired(redlock_lock *lock, int status, const redlock_result *result,
                              void *data)
{
    (void)lock;
    (void)result;
    (void)data;
    async_calls++;
    async_status = status;
}

static void on_async_closed(redlock_client *client, void *data)
{
    (void)client;
    *(bool *)data = true;
}

static void canceler_shared_by_async_and_sync(void **state)
{
    (void)state;
    fixture_cluster cluster;
    assert_int_equal(fixture_start(&cluster, N_NODES, NULL), 0);
    redlock_sync *holder_sync = start_sync(&cluster);
    redlock_sync *waiter_sync = start_sync(&cluster);
    redlock_sync_lock *holder = NULL;
    assert_int_equal(redlock_sync_acquire(holder_sync, "with:shared", REDLOCK_STRLEN, 30000, NULL,
                                          &holder, NULL),
                     0);
    /* Decided at the quorum: the last node's SET lands a moment later, before any waiter's. */
    assert_true(
        wait_holding(&cluster, "with:shared", redlock_sync_lock_token(holder, NULL), N_NODES));
    redlock_canceler *canceler = NULL;
    assert_int_equal(redlock_canceler_new(&canceler), 0);
    static redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.cancel = canceler;
    lo.wait_ms = 30000;

    static waiter_thread wt;
    memset(&wt, 0, sizeof(wt));
    wt = (waiter_thread){.sync = waiter_sync, .opts = &lo, .rc = 1};
    wt.w = (with_rec){.cluster = &cluster, .key = "with:shared"};
    uv_thread_t t;
    assert_int_equal(uv_thread_create(&t, waiter_main, &wt), 0);

    static uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    redlock_options opts;
    test_options(&opts);
    redlock_client *client = NULL;
    char err[256];
    assert_int_equal(
        redlock_client_new(&loop, cluster.urls, N_NODES, &opts, &client, err, sizeof(err)), 0);
    async_calls = 0;
    assert_int_equal(
        redlock_acquire(client, "with:shared", REDLOCK_STRLEN, 30000, &lo, on_async_acquired, NULL),
        0);
    /* Both wait: each has lost a round to the holder. */
    uint64_t deadline = redlock_now_us() + WAIT_MS * 1000ull;
    for (;;) {
        redlock_stats a, b;
        redlock_stats_init(&a);
        redlock_stats_init(&b);
        assert_int_equal(redlock_client_stats(client, &a), 0);
        assert_int_equal(redlock_sync_stats(waiter_sync, &b), 0);
        if (a.rounds_busy >= 1 && b.rounds_busy >= 1)
            break;
        assert_true(redlock_now_us() < deadline);
        uv_run(&loop, UV_RUN_NOWAIT);
        uv_sleep(5);
    }
    uv_thread_t f;
    assert_int_equal(uv_thread_create(&f, fire_after, canceler), 0);
    deadline = redlock_now_us() + WAIT_MS * 1000ull;
    while (async_calls == 0) {
        assert_true(redlock_now_us() < deadline);
        uv_run(&loop, UV_RUN_NOWAIT);
        uv_sleep(5);
    }
    uv_thread_join(&f);
    uv_thread_join(&t);
    assert_int_equal(async_status, REDLOCK_ECANCELED);
    assert_int_equal(wt.rc, REDLOCK_ECANCELED);
    assert_int_equal(wt.end, REDLOCK_HOLD_CANCELED);
    assert_int_equal(wt.w.calls, 0);
    redlock_canceler_free(canceler);

    static bool closed;
    closed = false;
    assert_int_equal(redlock_client_close(client, on_async_closed, &closed), 0);
    while (!closed)
        uv_run(&loop, UV_RUN_ONCE);
    assert_int_equal(uv_loop_close(&loop), 0);
    assert_int_equal(count_holding(&cluster, "with:shared", redlock_sync_lock_token(holder, NULL)),
                     N_NODES);
    assert_int_equal(redlock_sync_release(holder, NULL), 0);
    free_sync(waiter_sync);
    free_sync(holder_sync);
    fixture_stop(&cluster);
}

/* 7. The loss descriptor of a plain blocking lock (auto-extended, no lost callback needed): not
 * readable while held, readable once lost; closed with the handle, by redlock_sync_lock_free or
 * by redlock_sync_free: after many locks, as many descriptors are open as before. */
static void lock_fd_and_no_leak(void **state)
{
    (void)state;
    fixture_cluster cluster;
    assert_int_equal(fixture_start(&cluster, N_NODES, NULL), 0);
    unsigned before_sync = open_fds();
    redlock_sync *sync = start_sync(&cluster);
    redlock_auto_opts ao;
    redlock_auto_opts_init(&ao);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.auto_extend = &ao;
    redlock_sync_lock *lock = NULL;
    /* Warm up: the client's connections are open from here on. */
    assert_int_equal(redlock_sync_acquire(sync, "fd:warm", REDLOCK_STRLEN, 0, NULL, &lock, NULL),
                     0);
    assert_int_equal(redlock_sync_release(lock, NULL), 0);
    redlock_sync_lock_free(lock);
    unsigned before = open_fds();
    for (int i = 0; i < 20; i++) {
        assert_int_equal(
            redlock_sync_acquire(sync, "fd:plain", REDLOCK_STRLEN, 3000, &lo, &lock, NULL), 0);
        int fd = redlock_sync_lock_fd(lock);
        assert_true(fd >= 0);
        assert_int_equal(redlock_sync_lock_fd(lock), fd); /* one per handle */
        assert_false(readable(fd, 0));
        assert_int_equal(redlock_sync_release(lock, NULL), 0);
        assert_false(readable(fd, 0)); /* released is not lost */
        redlock_sync_lock_free(lock);
    }
    assert_int_equal(open_fds(), before);

    /* Lost: readable, flag set; a descriptor asked for after the loss is readable at once. */
    assert_int_equal(redlock_sync_acquire(sync, "fd:lost", REDLOCK_STRLEN, 3000, &lo, &lock, NULL),
                     0);
    int fd = redlock_sync_lock_fd(lock);
    assert_false(redlock_sync_lock_lost(lock));
    run_on_each(&cluster, N_NODES, "SET %s intruder", "fd:lost");
    assert_true(readable(fd, WAIT_MS));
    assert_true(redlock_sync_lock_lost(lock));
    assert_int_equal(redlock_sync_lock_status(lock), REDLOCK_ELOST);
    redlock_sync_lock_free(lock);
    redlock_sync_lock *late = NULL;
    assert_int_equal(redlock_sync_acquire(sync, "fd:late", REDLOCK_STRLEN, 3000, &lo, &late, NULL),
                     0);
    run_on_each(&cluster, N_NODES, "SET %s intruder", "fd:late");
    uint64_t deadline = redlock_now_us() + WAIT_MS * 1000ull;
    while (!redlock_sync_lock_lost(late)) {
        assert_true(redlock_now_us() < deadline);
        uv_sleep(10);
    }
    assert_true(readable(redlock_sync_lock_fd(late), 0));
    assert_int_equal(open_fds(), before + 1);
    /* Held by handles at redlock_sync_free: closed with them. */
    assert_int_equal(redlock_sync_acquire(sync, "fd:kept", REDLOCK_STRLEN, 30000, &lo, &lock, NULL),
                     0);
    assert_true(redlock_sync_lock_fd(lock) >= 0);
    assert_int_equal(redlock_sync_lock_fd(NULL), -1);
    assert_false(redlock_sync_lock_lost(NULL));
    free_sync(sync);
    assert_int_equal(open_fds(), before_sync);
    fixture_stop(&cluster);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const char *filter = getenv("H_TEST_FILTER"); /* as the other suites: one test by name */
    if (filter != NULL && filter[0] != '\0')
        cmocka_set_test_filter(filter);
    const struct CMUnitTest tests[] = {
        TEST(with_runs_fn_holding), TEST(with_loss_is_seen),
        TEST(with_lapsed_hold),     TEST(with_not_acquired),
        TEST(with_cancelers),       TEST(canceler_shared_by_async_and_sync),
        TEST(lock_fd_and_no_leak),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
