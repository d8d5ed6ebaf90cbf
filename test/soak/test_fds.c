/* SPDX-License-Identifier: MIT */
/* test_fds.c - no descriptor outlives the client that opened it.
 *
 * Every way the API lets a client end is run a few times, and after each the process must have
 * exactly the descriptors it had before: the count of /proc/self/fd, taken with the caller's
 * loop open, is back to its starting value once the close callback ran (redlock_sync_free
 * returned, a failed creation returned), and the loop then closes with nothing left on it.
 * valgrind's --track-fds lists open descriptors but does not fail a run on them, so the test
 * counts for itself.
 *
 * The ways: a plain close after work (TCP and unix nodes); a close with acquires, extends,
 * releases and auto-extended locks in flight; a close from inside a callback; a close while a
 * node is killed (refused reconnects), stopped (a connection that hangs in the handshake, and
 * requests waiting on it), or coming back (closed at staggered moments of the reconnect); nodes
 * that refuse the connection, refuse AUTH, are the same server twice, or need a name lookup;
 * client creations that fail (bad URL, the same node twice, bad options); and blocking clients:
 * new/free, free with an auto-extended lock held, free while another thread waits in a call,
 * failed creation. */
#include "harness.h"
#include "procstat.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 5
#define REPEAT 3
#define NODE_TIMEOUT_MS 5000

typedef struct fds_state {
    h_env env;
    fixture_cluster auth; /* one server with requirepass, for the AUTH refusal */
    bool done;            /* the test body finished: the state may be freed */
} fds_state;

static int setup(void **state)
{
    fds_state *st = calloc(1, sizeof(*st));
    assert_non_null(st);
    *state = st;
    h_env_start(&st->env, N, NULL);
    assert_int_equal(fixture_start(&st->auth, 1, "requirepass fds-secret\n"), 0);
    /* libuv gives a loop a spare descriptor (/dev/null, for running out of descriptors) with its
     * first stream handle, and keeps it until uv_loop_close: take it before any count. */
    uv_tcp_t warm;
    assert_int_equal(uv_tcp_init(&st->env.loop, &warm), 0);
    uv_close((uv_handle_t *)&warm, NULL);
    uv_run(&st->env.loop, UV_RUN_NOWAIT);
    return 0;
}

/* After a failed check the test's loop and client are left as they are (callbacks in flight
 * point into the dead test frame), but its servers are always stopped so that nothing cascades
 * into the next test. */
static int teardown(void **state)
{
    fds_state *st = *state;
    if (st == NULL)
        return 0;
    fixture_stop(&st->auth);
    if (st->done) {
        h_env_stop(&st->env);
        free(st);
    } else {
        fixture_stop(&st->env.cluster);
    }
    return 0;
}

static void fds_options(redlock_options *o)
{
    redlock_options_init(o);
    o->node_timeout_ms = NODE_TIMEOUT_MS;
    o->connect_timeout_ms = NODE_TIMEOUT_MS;
    o->retry_count = 0;
    /* Short backoffs: a run of a few hundred ms goes through several reconnect attempts. */
    o->reconnect_min_ms = 20;
    o->reconnect_max_ms = 200;
}

static void assert_fds_back(int before, const char *what)
{
    int now = ps_fd_count();
    if (now != before) {
        fprintf(stderr, "%s: %d descriptors open, %d before\n", what, now, before);
        ps_fd_dump(stderr, "  ");
    }
    assert_int_equal(now, before);
}

static redlock_client *new_client(h_env *env, const char *const *urls, unsigned n)
{
    redlock_options o;
    fds_options(&o);
    redlock_client *c = NULL;
    char err[256] = "";
    int rc = h_client_urls(env, urls, n, &o, &c, err, sizeof(err));
    if (rc != 0)
        fprintf(stderr, "redlock_client_new: %s: %s\n", redlock_err_name(rc), err);
    assert_int_equal(rc, 0);
    return c;
}

/* Close c (flags: redlock_client_close_ex's) and run the loop until its close callback;
 * h_close_client_ex fails the test otherwise. */
static void close_client_ex(h_env *env, redlock_client *c, unsigned flags)
{
    h_close_client_ex(env, c, flags);
    /* Handles closed in the same turn as the close callback are gone after one more turn. */
    uv_run(&env->loop, UV_RUN_NOWAIT);
}

static void close_client(h_env *env, redlock_client *c)
{
    h_close_client(env, c);
    /* Handles closed in the same turn as the close callback are gone after one more turn. */
    uv_run(&env->loop, UV_RUN_NOWAIT);
}

typedef struct counter {
    int calls;
    int canceled;
    int ok;
} counter;

static void count_cb(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)lock;
    (void)result;
    counter *k = data;
    k->calls++;
    k->canceled += status == REDLOCK_ECANCELED;
    k->ok += status == 0;
}

static void on_lost(redlock_lock *lock, int reason, void *data)
{
    (void)lock;
    counter *k = data;
    k->calls++;
    k->canceled += reason == REDLOCK_ECANCELED;
}

/* One acquire, extend, inspect and release on c, each of which must succeed. */
static void some_work(h_env *env, redlock_client *c, const char *resource)
{
    h_record rec, ext, ins, rel;
    assert_int_equal(h_acquire(env, c, resource, 10000, NULL, &rec), 0);
    assert_int_equal(h_extend(env, rec.lock, 10000, 0, &ext), 0);
    memset(&ins, 0, sizeof(ins));
    assert_int_equal(redlock_inspect(c, resource, strlen(resource), h_record_cb, &ins), 0);
    assert_true(h_run_until(&env->loop, &ins.calls, 1, 30000));
    assert_int_equal(ins.status, 0);
    assert_int_equal(h_release(env, rec.lock, &rel), 0);
    redlock_lock_free(rec.lock);
}

/* Created, used and closed; on TCP nodes and on unix-socket nodes; and closed at once, before
 * a single loop turn (every connect still pending). */
static void plain_close(void **state)
{
    fds_state *st = *state;
    h_env *env = &st->env;
    const char *unix_urls[N];
    for (unsigned i = 0; i < N; i++)
        unix_urls[i] = env->cluster.servers[i].unix_url;
    const int before = ps_fd_count();
    for (int k = 0; k < REPEAT; k++) {
        redlock_client *c = new_client(env, env->cluster.urls, N);
        h_wait_ready(env, c);
        some_work(env, c, "fds:plain");
        close_client(env, c);
        assert_fds_back(before, "tcp client closed");

        c = new_client(env, unix_urls, N);
        h_wait_ready(env, c);
        some_work(env, c, "fds:unix");
        close_client(env, c);
        assert_fds_back(before, "unix client closed");

        c = new_client(env, env->cluster.urls, N);
        close_client(env, c);
        assert_fds_back(before, "client closed before connecting");
    }
    st->done = true;
}

/* Closed with every kind of operation in flight: acquires just started, extends and releases
 * of held locks, auto-extended locks (their lost callback fires with ECANCELED), and held locks
 * whose handles the close frees. */
static void close_with_operations_in_flight(void **state)
{
    fds_state *st = *state;
    h_env *env = &st->env;
    const int before = ps_fd_count();
    for (int k = 0; k < REPEAT; k++) {
        redlock_client *c = new_client(env, env->cluster.urls, N);
        h_wait_ready(env, c);
        enum { HELD = 8, FRESH = 64 };
        h_record held[HELD];
        counter lost = {0}, ops = {0};
        redlock_auto_opts ao;
        redlock_auto_opts_init(&ao);
        for (int i = 0; i < HELD; i++) {
            char name[32];
            snprintf(name, sizeof(name), "fds:held:%d:%d", k, i);
            redlock_lock_opts lo;
            redlock_lock_opts_init(&lo);
            if (i % 2 == 0) {
                lo.auto_extend = &ao;
                lo.lost_cb = on_lost;
                lo.lost_data = &lost;
            }
            assert_int_equal(h_acquire(env, c, name, 10000, &lo, &held[i]), 0);
        }
        for (int i = 0; i < FRESH; i++) {
            char name[32];
            int len = snprintf(name, sizeof(name), "fds:fresh:%d:%d", k, i);
            assert_int_equal(redlock_acquire(c, name, (size_t)len, 10000, NULL, count_cb, &ops), 0);
        }
        assert_int_equal(redlock_extend(held[1].lock, 10000, 0, count_cb, &ops), 0);
        assert_int_equal(redlock_release(held[3].lock, count_cb, &ops), 0);
        assert_int_equal(redlock_release(held[5].lock, count_cb, &ops), 0);
        redlock_lock_free(held[5].lock); /* freed after its release's callback */
        close_client(env, c);
        assert_int_equal(ops.calls, FRESH + 3);
        assert_int_equal(ops.canceled, FRESH + 3);
        assert_int_equal(lost.calls, HELD / 2);
        assert_int_equal(lost.canceled, HELD / 2);
        assert_fds_back(before, "closed with operations in flight");
    }
    st->done = true;
}

typedef struct closer {
    redlock_client *client;
    int calls;
    int close_rc;
    bool closed;
} closer;

static void on_closed(redlock_client *client, void *data)
{
    (void)client;
    ((closer *)data)->closed = true;
}

static void close_inside_cb(redlock_lock *lock, int status, const redlock_result *result,
                            void *data)
{
    (void)lock;
    (void)status;
    (void)result;
    closer *cl = data;
    if (cl->calls++ == 0)
        cl->close_rc = redlock_client_close(cl->client, on_closed, cl);
}

/* The client closed from inside the first of several acquire callbacks. */
static void close_from_a_callback(void **state)
{
    fds_state *st = *state;
    h_env *env = &st->env;
    const int before = ps_fd_count();
    for (int k = 0; k < REPEAT; k++) {
        redlock_client *c = new_client(env, env->cluster.urls, N);
        h_wait_ready(env, c);
        env->client = NULL; /* closed by the callback, not by the env */
        closer cl = {.client = c};
        for (int i = 0; i < 16; i++) {
            char name[32];
            int len = snprintf(name, sizeof(name), "fds:inside:%d:%d", k, i);
            assert_int_equal(
                redlock_acquire(c, name, (size_t)len, 10000, NULL, close_inside_cb, &cl), 0);
        }
        int done = 0;
        while (!cl.closed && done++ < 100000)
            uv_run(&env->loop, UV_RUN_ONCE);
        assert_true(cl.closed);
        assert_int_equal(cl.close_rc, 0);
        assert_int_equal(cl.calls, 16);
        uv_run(&env->loop, UV_RUN_NOWAIT);
        assert_fds_back(before, "closed from a callback");
    }
    st->done = true;
}

/* Run rounds until a release shows node i voting error (the client saw it go), at most 10 s. */
static void wait_node_seen_down(h_env *env, redlock_client *c, unsigned i)
{
    uint64_t deadline = redlock_now_us() + 10000000;
    for (;;) {
        h_record rec, rel;
        memset(&rel, 0, sizeof(rel));
        if (h_acquire(env, c, "fds:probe", 5000, NULL, &rec) == 0) {
            h_release(env, rec.lock, &rel);
            redlock_lock_free(rec.lock);
            if (rel.node_vote[i] == REDLOCK_VOTE_ERROR)
                return;
        }
        if (redlock_now_us() >= deadline)
            fail_msg("node %u was never seen down", i);
        h_run_for(&env->loop, 20);
    }
}

/* A node killed: closed while its reconnects are refused, on a client that was connected and
 * on one created while the node was down. */
static void close_while_a_node_is_down(void **state)
{
    fds_state *st = *state;
    h_env *env = &st->env;
    const int before = ps_fd_count();
    for (int k = 0; k < REPEAT; k++) {
        redlock_client *c = new_client(env, env->cluster.urls, N);
        h_wait_ready(env, c);
        assert_int_equal(fixture_kill(&env->cluster, 2), 0);
        wait_node_seen_down(env, c, 2);
        h_run_for(&env->loop, 100); /* a few refused reconnects */
        close_client(env, c);
        assert_fds_back(before, "closed with a node down");

        c = new_client(env, env->cluster.urls, N);
        h_run_for(&env->loop, 150);
        some_work(env, c, "fds:down");
        close_client(env, c);
        assert_fds_back(before, "created and closed with a node down");
        assert_int_equal(fixture_restart(&env->cluster, 2), 0);
    }
    st->done = true;
}

/* A node stopped (SIGSTOP): the kernel still completes connects, so a new client's connection
 * hangs in the handshake; a connected client's requests wait on it. Closed in both states. */
static void close_while_a_node_is_paused(void **state)
{
    fds_state *st = *state;
    h_env *env = &st->env;
    const int before = ps_fd_count();
    for (int k = 0; k < REPEAT; k++) {
        redlock_client *c = new_client(env, env->cluster.urls, N);
        h_wait_ready(env, c);
        assert_int_equal(fixture_pause(&env->cluster, 1), 0);
        counter ops = {0};
        for (int i = 0; i < 8; i++) {
            char name[32];
            int len = snprintf(name, sizeof(name), "fds:paused:%d:%d", k, i);
            assert_int_equal(redlock_acquire(c, name, (size_t)len, 10000, NULL, count_cb, &ops), 0);
        }
        /* Decided by the four others; node 1 still owes its answers. */
        assert_true(h_run_until(&env->loop, &ops.calls, 8, 30000));
        assert_int_equal(ops.ok, 8);
        /* The releasing close waits for the stopped node's deadline (5 s): once is enough to
         * see its fds come back too; the other rounds close fast. */
        close_client_ex(env, c, k == 0 ? 0 : REDLOCK_CLOSE_FAST);
        assert_fds_back(before, "closed with requests waiting on a stopped node");

        c = new_client(env, env->cluster.urls, N);
        h_run_for(&env->loop, 100); /* node 1's connection is made; its handshake hangs */
        close_client(env, c);
        assert_fds_back(before, "closed with a handshake hanging on a stopped node");
        assert_int_equal(fixture_resume(&env->cluster, 1), 0);
    }
    st->done = true;
}

/* A node killed and restarted; the client closed at staggered moments after the restart, so the
 * close lands in every phase of the reconnect (backoff timer, connect, handshake, ready). */
static void close_while_reconnecting(void **state)
{
    fds_state *st = *state;
    h_env *env = &st->env;
    const int before = ps_fd_count();
    for (unsigned offset_ms = 0; offset_ms <= 240; offset_ms += 30) {
        redlock_client *c = new_client(env, env->cluster.urls, N);
        h_wait_ready(env, c);
        assert_int_equal(fixture_kill(&env->cluster, 3), 0);
        h_run_for(&env->loop, 60);
        assert_int_equal(fixture_restart(&env->cluster, 3), 0);
        if (offset_ms > 0)
            h_run_for(&env->loop, offset_ms);
        close_client(env, c);
        char what[64];
        snprintf(what, sizeof(what), "closed %u ms after the node came back", offset_ms);
        assert_fds_back(before, what);
    }
    st->done = true;
}

/* Nodes that never become usable, each reconnected over and over while the client lives:
 * nothing listening on the port, a password the server refuses, the same server given twice
 * (TCP and unix socket: one of them must stay down), and a host name that needs a lookup. */
static void nodes_that_never_work(void **state)
{
    fds_state *st = *state;
    h_env *env = &st->env;
    int free_port = fixture_free_port();
    assert_true(free_port > 0);
    char refused[64], wrong_pass[96], by_name[64];
    snprintf(refused, sizeof(refused), "redis://127.0.0.1:%d", free_port);
    snprintf(wrong_pass, sizeof(wrong_pass), "redis://:not-the-secret@127.0.0.1:%d",
             st->auth.servers[0].port);
    snprintf(by_name, sizeof(by_name), "redis://localhost:%d", env->cluster.servers[4].port);
    const char *urls[5] = {env->cluster.urls[0], refused, wrong_pass, env->cluster.urls[1],
                           env->cluster.servers[1].unix_url};
    const int before = ps_fd_count();
    for (int k = 0; k < REPEAT; k++) {
        redlock_client *c = new_client(env, urls, 5);
        h_run_for(&env->loop, 400);
        /* Nodes 0 and 1 (or its twin) work: two yes of five, never a quorum. */
        h_record rec;
        assert_int_equal(h_acquire(env, c, "fds:never", 1000, NULL, &rec), REDLOCK_ENOQUORUM);
        if (strstr(rec.node_error[1], "refused") == NULL ||
            strstr(rec.node_error[2], "WRONGPASS") == NULL ||
            (strstr(rec.node_error[3], "same server") == NULL &&
             strstr(rec.node_error[4], "same server") == NULL))
            h_dump_record("nodes that never work", &rec);
        assert_non_null(strstr(rec.node_error[1], "refused"));
        assert_non_null(strstr(rec.node_error[2], "WRONGPASS"));
        assert_true(strstr(rec.node_error[3], "same server") != NULL ||
                    strstr(rec.node_error[4], "same server") != NULL);
        close_client(env, c);
        assert_fds_back(before, "closed with nodes that never work");

        /* The lookup may still be running in libuv's thread pool at the close. */
        const char *named[1] = {by_name};
        c = new_client(env, named, 1);
        close_client(env, c);
        c = new_client(env, named, 1);
        some_work(env, c, "fds:named");
        close_client(env, c);
        assert_fds_back(before, "closed a client on a host name");
    }
    st->done = true;
}

/* Creations that fail return at once and leave nothing open, async and blocking alike. */
static void failed_creation(void **state)
{
    fds_state *st = *state;
    h_env *env = &st->env;
    const char *bad_url[2] = {env->cluster.urls[0], "redis://127.0.0.1:notaport"};
    const char *dup[3] = {env->cluster.urls[0], env->cluster.urls[1], env->cluster.urls[0]};
    const char *empty[1] = {""};
    const char *many[REDLOCK_MAX_NODES + 1];
    for (unsigned i = 0; i <= REDLOCK_MAX_NODES; i++)
        many[i] = env->cluster.urls[i % N];
    struct {
        const char *const *urls;
        unsigned n;
        bool bad_opts;
        int want;
    } cases[] = {
        {bad_url, 2, false, REDLOCK_EURL},
        {dup, 3, false, REDLOCK_EDUPNODE},
        {empty, 1, false, REDLOCK_EURL},
        {env->cluster.urls, 0, false, REDLOCK_EINVAL},
        {many, REDLOCK_MAX_NODES + 1, false, REDLOCK_EINVAL},
        {env->cluster.urls, N, true, REDLOCK_EINVAL},
    };
    const int before = ps_fd_count();
    for (int k = 0; k < REPEAT; k++) {
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            redlock_options o;
            fds_options(&o);
            if (cases[i].bad_opts)
                o.node_timeout_ms = 3600001; /* out of range (0 is adaptive) */
            redlock_client *c = NULL;
            char err[256];
            assert_int_equal(
                redlock_client_new(&env->loop, cases[i].urls, cases[i].n, &o, &c, err, 256),
                cases[i].want);
            assert_null(c);
            assert_fds_back(before, "failed redlock_client_new");
            redlock_sync *s = NULL;
            assert_int_equal(redlock_sync_new(cases[i].urls, cases[i].n, &o, &s, err, 256),
                             cases[i].want);
            assert_null(s);
            assert_fds_back(before, "failed redlock_sync_new");
        }
        redlock_client *c = NULL;
        assert_int_equal(redlock_client_new(NULL, env->cluster.urls, N, NULL, &c, NULL, 0),
                         REDLOCK_EINVAL);
        assert_fds_back(before, "redlock_client_new without a loop");
    }
    st->done = true;
}

typedef struct waiter {
    redlock_sync *sync;
    char token[32];
    int rc;
} waiter;

static void wait_in_acquire(void *arg)
{
    waiter *w = arg;
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.token = w->token;
    lo.token_len = strlen(w->token);
    redlock_sync_lock *lock = NULL;
    w->rc = redlock_sync_acquire(w->sync, "fds:sync:wait", 13, 10000, &lo, &lock, NULL);
}

static void sync_lost(redlock_lock *lock, int reason, void *data)
{
    (void)lock;
    (void)reason;
    (void)data;
}

static redlock_sync *new_sync(h_env *env)
{
    redlock_options o;
    fds_options(&o);
    o.node_timeout_ms = 10000;
    redlock_sync *s = NULL;
    char err[256] = "";
    int rc = redlock_sync_new(env->cluster.urls, N, &o, &s, err, sizeof(err));
    if (rc != 0)
        fprintf(stderr, "redlock_sync_new: %s\n", err);
    assert_int_equal(rc, 0);
    return s;
}

/* Blocking clients: used and freed; freed with an auto-extended lock held and an unreleased
 * handle; freed while another thread waits in an acquire that three stopped nodes hold up. */
static void sync_clients(void **state)
{
    fds_state *st = *state;
    h_env *env = &st->env;
    const int before = ps_fd_count();
    for (int k = 0; k < REPEAT; k++) {
        redlock_sync *s = new_sync(env);
        redlock_sync_lock *lock = NULL;
        assert_int_equal(redlock_sync_acquire(s, "fds:sync", 8, 10000, NULL, &lock, NULL), 0);
        assert_int_equal(redlock_sync_extend(lock, 10000, 0, NULL), 0);
        assert_int_equal(redlock_sync_inspect(s, "fds:sync", 8, NULL), 0);
        assert_int_equal(redlock_sync_release(lock, NULL), 0);
        redlock_sync_lock_free(lock);
        redlock_sync_free(s);
        assert_fds_back(before, "blocking client freed");

        s = new_sync(env);
        redlock_auto_opts ao;
        redlock_auto_opts_init(&ao);
        redlock_lock_opts lo;
        redlock_lock_opts_init(&lo);
        lo.auto_extend = &ao;
        lo.lost_cb = sync_lost;
        redlock_sync_lock *held = NULL, *plain = NULL;
        char name[32];
        int len = snprintf(name, sizeof(name), "fds:sync:auto:%d", k);
        assert_int_equal(redlock_sync_acquire(s, name, (size_t)len, 10000, &lo, &held, NULL), 0);
        len = snprintf(name, sizeof(name), "fds:sync:held:%d", k);
        assert_int_equal(redlock_sync_acquire(s, name, (size_t)len, 10000, NULL, &plain, NULL), 0);
        redlock_sync_free(s); /* frees both handles */
        assert_fds_back(before, "blocking client freed with locks held");

        s = new_sync(env);
        for (unsigned i = 2; i < N; i++)
            assert_int_equal(fixture_pause(&env->cluster, i), 0);
        waiter w = {.sync = s, .rc = 1};
        snprintf(w.token, sizeof(w.token), "fds-waiter-%d", k);
        uv_thread_t thread;
        assert_int_equal(uv_thread_create(&thread, wait_in_acquire, &w), 0);
        /* The acquire is in flight once its SET reached a running node. */
        assert_true(h_wait_holding(env, "fds:sync:wait", 13, w.token, strlen(w.token), 2, 10000));
        /* Releasing waits for the stopped nodes' deadlines (5 s): once, then fast. */
        redlock_sync_free_ex(s, k == 0 ? 0 : REDLOCK_CLOSE_FAST);
        uv_thread_join(&thread);
        assert_int_equal(w.rc, REDLOCK_ECANCELED);
        for (unsigned i = 2; i < N; i++)
            assert_int_equal(fixture_resume(&env->cluster, i), 0);
        assert_fds_back(before, "blocking client freed during a call");
        for (unsigned i = 0; i < N; i++)
            h_del(env, i, "fds:sync:wait", 13);
    }
    st->done = true;
}

int main(void)
{
    h_test_main_init();
    /* libuv opens a process-wide signal pipe with the first loop; take it before any count. */
    uv_loop_t warm;
    uv_loop_init(&warm);
    uv_loop_close(&warm);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(plain_close, setup, teardown),
        cmocka_unit_test_setup_teardown(close_with_operations_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(close_from_a_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(close_while_a_node_is_down, setup, teardown),
        cmocka_unit_test_setup_teardown(close_while_a_node_is_paused, setup, teardown),
        cmocka_unit_test_setup_teardown(close_while_reconnecting, setup, teardown),
        cmocka_unit_test_setup_teardown(nodes_that_never_work, setup, teardown),
        cmocka_unit_test_setup_teardown(failed_creation, setup, teardown),
        cmocka_unit_test_setup_teardown(sync_clients, setup, teardown),
    };
    return cmocka_run_group_tests_name("soak-fds", tests, NULL, NULL);
}
