/* SPDX-License-Identifier: MIT */
/* test_misuse.c - API misuse against real servers, one table row per misuse.
 *
 * Every row starts its own servers and loop, makes one kind of mistake, and checks what a user
 * would see: the status the call returns (or its callback gets), a non-empty message where the
 * library promises one (redlock_client_last_error or the constructor's err buffer), that a
 * call refused at once never calls back, that nothing is left on the nodes for a refused call
 * (DBSIZE 0), and, through h_env_stop, that nothing is left open on the loop. Leaks show up
 * in the ASan build and under test/run --valgrind. Each row is one TAP line. */
#include "harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct mctx {
    h_env env;
    redlock_client *c; /* the row's client (also env.client until the row closes it) */
    char err[256];     /* constructors' err buffer */
    char msg[256];     /* the message the row's call left: copied right after the call */
    h_record rec[4];
    int stray;       /* callbacks of calls that were refused at once: must stay 0 */
    int close_calls; /* close callbacks */
    int order;       /* callbacks so far, to check the close callback comes last */
    int close_at;    /* order when the close callback ran */
    int inner_rc;    /* the status of a call made from inside a callback */
    int inner_rc2;
    redlock_lock *lock;
} mctx;

typedef struct row {
    const char *name;
    unsigned servers; /* servers to start (at least 1: every row needs a loop and a node) */
    bool client;      /* give the row a client on the servers */
    int (*call)(mctx *m);
    int expect;        /* what call returns */
    bool want_message; /* m->msg must not be empty */
    bool want_empty;   /* DBSIZE 0 on every node afterwards */
} row;

/* ---- helpers -------------------------------------------------------------------------------- */

static int last(mctx *m, int rc)
{
    snprintf(m->msg, sizeof(m->msg), "%s", redlock_client_last_error(m->c));
    return rc;
}

static int from_err(mctx *m, int rc)
{
    snprintf(m->msg, sizeof(m->msg), "%s", m->err);
    return rc;
}

static void on_never(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)lock, (void)status, (void)result;
    ((mctx *)data)->stray++;
}

static void on_lost_never(redlock_lock *lock, int reason, void *data)
{
    (void)lock, (void)reason;
    ((mctx *)data)->stray++;
}

static void on_close(redlock_client *client, void *data)
{
    (void)client;
    mctx *m = data;
    m->close_calls++;
    m->close_at = m->order;
}

/* Close the row's client with on_close and wait for it; the env no longer owns it. */
static void close_and_wait(mctx *m)
{
    assert_int_equal(redlock_client_close(m->c, on_close, m), 0);
    m->env.client = NULL;
    assert_true(h_run_until(&m->env.loop, &m->close_calls, 1, 10000));
}

/* Start closing (without waiting): later calls see REDLOCK_ECLOSING. */
static void start_close(mctx *m)
{
    assert_int_equal(redlock_client_close(m->c, on_close, m), 0);
    m->env.client = NULL;
}

static void finish_close(mctx *m)
{
    assert_true(h_run_until(&m->env.loop, &m->close_calls, 1, 10000));
}

/* A held lock in m->lock (rec[3] holds the acquire's record). */
static void hold(mctx *m, const char *resource)
{
    assert_int_equal(h_acquire(&m->env, m->c, resource, 10000, NULL, &m->rec[3]), 0);
    m->lock = m->rec[3].lock;
}

static void release_and_free(mctx *m)
{
    h_record rel;
    assert_int_equal(h_release(&m->env, m->lock, &rel), 0);
    redlock_lock_free(m->lock);
    m->lock = NULL;
}

/* ---- redlock_client_new ------------------------------------------------------------------- */

static int new_null_loop(mctx *m)
{
    redlock_client *c = NULL;
    return from_err(
        m, redlock_client_new(NULL, m->env.cluster.urls, 1, NULL, &c, m->err, sizeof(m->err)));
}

static int new_null_urls(mctx *m)
{
    redlock_client *c = NULL;
    return from_err(m, h_client_urls(&m->env, NULL, 1, NULL, &c, m->err, sizeof(m->err)));
}

static int new_null_out(mctx *m)
{
    return from_err(m, redlock_client_new(&m->env.loop, m->env.cluster.urls, 1, NULL, NULL, m->err,
                                          sizeof(m->err)));
}

static int new_null_url_entry(mctx *m)
{
    const char *urls[2] = {m->env.cluster.urls[0], NULL};
    redlock_client *c = NULL;
    return from_err(m, h_client_urls(&m->env, urls, 2, NULL, &c, m->err, sizeof(m->err)));
}

static int new_null_err_buffer(mctx *m)
{
    redlock_client *c = NULL;
    snprintf(m->msg, sizeof(m->msg), "-");
    return h_client_urls(&m->env, m->env.cluster.urls, 0, NULL, &c, NULL, 200);
}

static int new_zero_err_len(mctx *m)
{
    redlock_client *c = NULL;
    char err[4] = "xyz";
    int rc = h_client_urls(&m->env, m->env.cluster.urls, 0, NULL, &c, err, 0);
    assert_string_equal(err, "xyz"); /* err_len 0: not one byte written */
    snprintf(m->msg, sizeof(m->msg), "-");
    return rc;
}

static int new_zero_nodes(mctx *m)
{
    redlock_client *c = NULL;
    int rc = h_client_urls(&m->env, m->env.cluster.urls, 0, NULL, &c, m->err, sizeof(m->err));
    assert_null(c);
    return from_err(m, rc);
}

static char many_urls[REDLOCK_MAX_NODES + 1][64];

static const char *const *make_urls(unsigned n)
{
    static const char *ptrs[REDLOCK_MAX_NODES + 1];
    for (unsigned i = 0; i < n; i++) {
        /* Distinct ports nothing listens on (connections are refused, which is fine). */
        snprintf(many_urls[i], sizeof(many_urls[i]), "redis://127.0.0.1:%u", 1000 + i);
        ptrs[i] = many_urls[i];
    }
    return ptrs;
}

static int new_65_nodes(mctx *m)
{
    redlock_client *c = NULL;
    int rc = h_client_urls(&m->env, make_urls(65), 65, NULL, &c, m->err, sizeof(m->err));
    assert_null(c);
    return from_err(m, rc);
}

static int new_64_nodes(mctx *m)
{
    redlock_client *c = NULL;
    int rc = h_client_urls(&m->env, make_urls(64), 64, NULL, &c, m->err, sizeof(m->err));
    if (rc == 0) {
        assert_int_equal(redlock_client_node_count(c), 64);
        assert_string_equal(redlock_client_node_url(c, 63), "redis://127.0.0.1:1063");
        assert_null(redlock_client_node_url(c, 64));
    }
    snprintf(m->msg, sizeof(m->msg), "%s", m->err);
    return rc;
}

static int dup_pair(mctx *m, const char *fmt_a, const char *fmt_b)
{
    char a[128], b[128];
    int port = m->env.cluster.servers[0].port;
    snprintf(a, sizeof(a), fmt_a, port);
    snprintf(b, sizeof(b), fmt_b, port);
    const char *urls[2] = {a, b};
    redlock_client *c = NULL;
    int rc = h_client_urls(&m->env, urls, 2, NULL, &c, m->err, sizeof(m->err));
    assert_null(c);
    return from_err(m, rc);
}

static int dup_same(mctx *m)
{
    return dup_pair(m, "redis://127.0.0.1:%d", "redis://127.0.0.1:%d");
}

static int dup_v6_spelling(mctx *m)
{
    return dup_pair(m, "redis://[::1]:%d", "redis://[0:0::1]:%d");
}

static int dup_v4_mapped(mctx *m)
{
    return dup_pair(m, "redis://127.0.0.1:%d", "redis://[::ffff:127.0.0.1]:%d");
}

static int dup_other_db(mctx *m)
{
    return dup_pair(m, "redis://127.0.0.1:%d/0", "redis://127.0.0.1:%d/1");
}

static int dup_password_differs(mctx *m)
{
    return dup_pair(m, "redis://:one@127.0.0.1:%d", "redis://:two@127.0.0.1:%d");
}

static int dup_unix(mctx *m)
{
    const char *urls[2] = {m->env.cluster.servers[0].unix_url, m->env.cluster.servers[0].unix_url};
    redlock_client *c = NULL;
    return from_err(m, h_client_urls(&m->env, urls, 2, NULL, &c, m->err, sizeof(m->err)));
}

static int new_bad_url(mctx *m)
{
    const char *urls[1] = {"redis://127.0.0.1:99999"};
    redlock_client *c = NULL;
    return from_err(m, h_client_urls(&m->env, urls, 1, NULL, &c, m->err, sizeof(m->err)));
}

static int new_bad_drift(mctx *m)
{
    redlock_options o;
    h_test_options(&o);
    o.drift_factor = 1.0;
    redlock_client *c = NULL;
    return from_err(m, h_client_urls(&m->env, m->env.cluster.urls, m->env.cluster.n, &o, &c, m->err,
                                     sizeof(m->err)));
}

static int new_opts_null(mctx *m)
{
    /* Each URL fixes its node timeout at the other tests' (not the adaptive default). The
     * options are still NULL: the ttl below is their default. */
    char buf[FIXTURE_MAX_SERVERS][160];
    const char *urls[FIXTURE_MAX_SERVERS];
    for (unsigned i = 0; i < m->env.cluster.n; i++) {
        snprintf(buf[i], sizeof(buf[i]), "%s?timeout_ms=%d", m->env.cluster.urls[i],
                 H_NODE_TIMEOUT_MS);
        urls[i] = buf[i];
    }
    redlock_client *c = NULL;
    int rc =
        redlock_client_new(&m->env.loop, urls, m->env.cluster.n, NULL, &c, m->err, sizeof(m->err));
    if (rc == 0) {
        m->env.client = m->c = c;
        hold(m, "misuse:opts-null");
        assert_int_equal(redlock_lock_ttl_ms(m->lock), 10000);
        release_and_free(m);
    }
    return rc;
}

/* ---- redlock_client_close ----------------------------------------------------------------- */

static int close_null(mctx *m)
{
    (void)m;
    return redlock_client_close(NULL, NULL, NULL);
}

static int close_twice(mctx *m)
{
    start_close(m);
    int rc = redlock_client_close(m->c, on_close, m);
    finish_close(m);
    assert_int_equal(m->close_calls, 1);
    return rc;
}

static int close_in_flight(mctx *m)
{
    hold(m, "misuse:held");
    assert_int_equal(redlock_acquire(m->c, "misuse:a", 8, 0, NULL, h_record_cb, &m->rec[0]), 0);
    assert_int_equal(redlock_extend(m->lock, 0, 0, h_record_cb, &m->rec[1]), 0);
    assert_int_equal(redlock_release(m->lock, h_record_cb, &m->rec[2]), 0);
    /* m->lock is not freed: the close frees every handle the client gave out. */
    close_and_wait(m);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(m->rec[i].calls, 1);
        assert_int_equal(m->rec[i].status, REDLOCK_ECANCELED);
    }
    assert_null(m->rec[0].lock); /* a failed acquire hands out no lock */
    m->lock = NULL;
    return 0;
}

static int after_close_acquire(mctx *m)
{
    start_close(m);
    int rc = last(m, redlock_acquire(m->c, "x", 1, 0, NULL, on_never, m));
    finish_close(m);
    return rc;
}

static int after_close_inspect(mctx *m)
{
    start_close(m);
    int rc = last(m, redlock_inspect(m->c, "x", 1, on_never, m));
    finish_close(m);
    return rc;
}

static int after_close_attach(mctx *m)
{
    start_close(m);
    redlock_lock *l = NULL;
    int rc = last(m, redlock_lock_attach(m->c, "x", 1, "tok", 3, 0, &l));
    assert_null(l);
    finish_close(m);
    return rc;
}

static int after_close_release(mctx *m)
{
    hold(m, "misuse:r");
    start_close(m);
    int rc = last(m, redlock_release(m->lock, on_never, m));
    finish_close(m);
    return rc;
}

static int after_close_extend(mctx *m)
{
    hold(m, "misuse:e");
    start_close(m);
    int rc = last(m, redlock_extend(m->lock, 0, 0, on_never, m));
    finish_close(m);
    return rc;
}

static int after_close_auto_extend(mctx *m)
{
    hold(m, "misuse:ae");
    start_close(m);
    int rc = last(m, redlock_auto_extend(m->lock, NULL, on_lost_never, m));
    finish_close(m);
    return rc;
}

/* ---- redlock_acquire ------------------------------------------------------------------------ */

static int acq_null_client(mctx *m)
{
    snprintf(m->msg, sizeof(m->msg), "-"); /* no client to hold a message */
    return redlock_acquire(NULL, "x", 1, 0, NULL, on_never, m);
}

static int acq_null_resource(mctx *m)
{
    return last(m, redlock_acquire(m->c, NULL, 5, 0, NULL, on_never, m));
}

static int acq_empty_resource(mctx *m)
{
    return last(m, redlock_acquire(m->c, "x", 0, 0, NULL, on_never, m));
}

static int acq_null_cb(mctx *m)
{
    return last(m, redlock_acquire(m->c, "x", 1, 0, NULL, NULL, m));
}

static int acq_ttl(mctx *m, uint64_t ttl_ms)
{
    return last(m, redlock_acquire(m->c, "misuse:ttl", 10, ttl_ms, NULL, on_never, m));
}

static int acq_ttl_over_max(mctx *m)
{
    return acq_ttl(m, REDLOCK_TTL_MAX_MS + 1);
}

static int acq_ttl_uint64_max(mctx *m)
{
    return acq_ttl(m, UINT64_MAX);
}

static int acq_ttl_1ms(mctx *m)
{
    return acq_ttl(m, 1);
}

/* Once every node has the held lock's key (won at the quorum, the others' SETs land a moment
 * later), its PTTL on every node: at most ttl_ms, and at least ttl_ms less the time since the
 * acquire started (t0_us), whatever the machine's speed. */
static void assert_key_ttl(mctx *m, const char *key, uint64_t ttl_ms, uint64_t t0_us)
{
    size_t token_len = 0;
    const char *token = redlock_lock_token(m->lock, &token_len);
    assert_true(
        h_wait_holding(&m->env, key, strlen(key), token, token_len, m->env.cluster.n, H_WAIT_MS));
    for (unsigned i = 0; i < m->env.cluster.n; i++) {
        long long pttl = h_pttl(&m->env, i, key, strlen(key));
        long long least = (long long)ttl_ms - (long long)(h_since_us(t0_us) / 1000) - 1;
        if (pttl > (long long)ttl_ms || pttl < least)
            fail_msg("%s on node %u: PTTL %lld, want %lld..%llu", key, i, pttl, least,
                     (unsigned long long)ttl_ms);
    }
}

static int acq_ttl_zero_default(mctx *m)
{
    uint64_t t0 = redlock_now_us();
    int rc = h_acquire(&m->env, m->c, "misuse:ttl0", 0, NULL, &m->rec[3]);
    if (rc == 0) {
        m->lock = m->rec[3].lock;
        assert_int_equal(redlock_lock_ttl_ms(m->lock), 10000);
        assert_key_ttl(m, "misuse:ttl0", 10000, t0);
        release_and_free(m);
    }
    return rc;
}

static int acq_ttl_max(mctx *m)
{
    uint64_t t0 = redlock_now_us();
    int rc = h_acquire(&m->env, m->c, "misuse:ttlmax", REDLOCK_TTL_MAX_MS, NULL, &m->rec[3]);
    if (rc == 0) {
        m->lock = m->rec[3].lock;
        assert_key_ttl(m, "misuse:ttlmax", REDLOCK_TTL_MAX_MS, t0);
        release_and_free(m);
    }
    return rc;
}

static int acq_at_resource_max(mctx *m)
{
    size_t len = REDLOCK_RESOURCE_MAX;
    char *res = malloc(len);
    assert_non_null(res);
    for (size_t i = 0; i < len; i++)
        res[i] = (char)('a' + i % 26);
    /* The largest resource through each connection while it is still being set up: the
     * harness's node timeout (seconds) gives the nodes time, also under valgrind. */
    m->c = h_client(&m->env, NULL);
    int rc = h_acquire_bin(&m->env, m->c, res, len, 0, NULL, &m->rec[3]);
    if (rc != 0)
        h_dump_record("REDLOCK_RESOURCE_MAX acquire", &m->rec[3]);
    if (rc == 0) {
        m->lock = m->rec[3].lock;
        size_t tlen = 0;
        const char *token = redlock_lock_token(m->lock, &tlen);
        /* Won at the quorum: the other node's SET lands a moment later. */
        assert_true(h_wait_holding(&m->env, res, len, token, tlen, m->env.cluster.n, H_WAIT_MS));
        release_and_free(m);
    }
    free(res);
    return rc;
}

static int acq_over_resource_max(mctx *m)
{
    size_t len = (size_t)REDLOCK_RESOURCE_MAX + 1;
    char *res = calloc(len, 1); /* untouched pages: cheap */
    assert_non_null(res);
    int rc = last(m, redlock_acquire(m->c, res, len, 0, NULL, on_never, m));
    free(res);
    /* The message names the limit and the way out; the tool's reads the same (tools/args.c). */
    char want[128];
    snprintf(want, sizeof(want),
             "resource is %zu bytes, over REDLOCK_RESOURCE_MAX (%u): lock a "
             "digest of it instead",
             len, (unsigned)REDLOCK_RESOURCE_MAX);
    assert_string_equal(m->msg, want);
    return rc;
}

static int acq_token_len0(mctx *m)
{
    redlock_lock_opts o;
    redlock_lock_opts_init(&o);
    o.token = "tok";
    o.token_len = 0;
    return last(m, redlock_acquire(m->c, "x", 1, 0, &o, on_never, m));
}

static int acq_token_too_long(mctx *m)
{
    static char token[REDLOCK_TOKEN_MAX + 1];
    memset(token, 't', sizeof(token));
    redlock_lock_opts o;
    redlock_lock_opts_init(&o);
    o.token = token;
    o.token_len = sizeof(token);
    return last(m, redlock_acquire(m->c, "x", 1, 0, &o, on_never, m));
}

static int acq_retry_negative(mctx *m)
{
    redlock_lock_opts o;
    redlock_lock_opts_init(&o);
    o.retry_count = -2;
    return last(m, redlock_acquire(m->c, "x", 1, 0, &o, on_never, m));
}

static int acq_auto_without_lost_cb(mctx *m)
{
    redlock_auto_opts a;
    redlock_auto_opts_init(&a);
    redlock_lock_opts o;
    redlock_lock_opts_init(&o);
    o.auto_extend = &a;
    return last(m, redlock_acquire(m->c, "x", 1, 0, &o, on_never, m));
}

/* ---- redlock_extend / redlock_release ---------------------------------------------------- */

static int ext_null_lock(mctx *m)
{
    snprintf(m->msg, sizeof(m->msg), "-");
    return redlock_extend(NULL, 0, 0, on_never, m);
}

static int ext_null_cb(mctx *m)
{
    hold(m, "misuse:e");
    int rc = last(m, redlock_extend(m->lock, 0, 0, NULL, m));
    release_and_free(m);
    return rc;
}

static int ext_flags(mctx *m, unsigned flags)
{
    hold(m, "misuse:e");
    int rc = last(m, redlock_extend(m->lock, 0, flags, on_never, m));
    release_and_free(m);
    return rc;
}

static int ext_flag_2(mctx *m)
{
    return ext_flags(m, 2u);
}

static int ext_flag_high(mctx *m)
{
    return ext_flags(m, 0x80000000u | REDLOCK_EXTEND_RETAKE);
}

static int ext_ttl_overflow(mctx *m)
{
    hold(m, "misuse:e");
    int rc = last(m, redlock_extend(m->lock, UINT64_MAX, 0, on_never, m));
    release_and_free(m);
    return rc;
}

static int ext_after_release(mctx *m)
{
    hold(m, "misuse:e");
    h_record rel;
    assert_int_equal(h_release(&m->env, m->lock, &rel), 0);
    int rc = last(m, redlock_extend(m->lock, 0, 0, on_never, m));
    redlock_lock_free(m->lock);
    return rc;
}

static int rel_null_lock(mctx *m)
{
    snprintf(m->msg, sizeof(m->msg), "-");
    return redlock_release(NULL, on_never, m);
}

static int rel_null_cb(mctx *m)
{
    hold(m, "misuse:r");
    int rc = last(m, redlock_release(m->lock, NULL, m));
    release_and_free(m);
    return rc;
}

static int rel_twice_in_flight(mctx *m)
{
    hold(m, "misuse:r");
    assert_int_equal(redlock_release(m->lock, h_record_cb, &m->rec[0]), 0);
    int rc = last(m, redlock_release(m->lock, on_never, m));
    assert_true(h_run_until(&m->env.loop, &m->rec[0].calls, 1, 10000));
    assert_int_equal(m->rec[0].status, 0);
    redlock_lock_free(m->lock);
    return rc;
}

static int rel_twice_after(mctx *m)
{
    hold(m, "misuse:r");
    h_record rel;
    assert_int_equal(h_release(&m->env, m->lock, &rel), 0);
    int rc = last(m, redlock_release(m->lock, on_never, m));
    redlock_lock_free(m->lock);
    return rc;
}

/* ---- inspect, attach, auto-extend, free ------------------------------------------------- */

static int insp_null_client(mctx *m)
{
    snprintf(m->msg, sizeof(m->msg), "-");
    return redlock_inspect(NULL, "x", 1, on_never, m);
}

static int insp_null_resource(mctx *m)
{
    return last(m, redlock_inspect(m->c, NULL, 1, on_never, m));
}

static int insp_null_cb(mctx *m)
{
    return last(m, redlock_inspect(m->c, "x", 1, NULL, m));
}

static int att_null_client(mctx *m)
{
    redlock_lock *l = NULL;
    snprintf(m->msg, sizeof(m->msg), "-");
    return redlock_lock_attach(NULL, "x", 1, "t", 1, 0, &l);
}

static int att_null_out(mctx *m)
{
    snprintf(m->msg, sizeof(m->msg), "-");
    return redlock_lock_attach(m->c, "x", 1, "t", 1, 0, NULL);
}

static int att_null_token(mctx *m)
{
    redlock_lock *l = (redlock_lock *)m; /* must be overwritten with NULL */
    int rc = last(m, redlock_lock_attach(m->c, "x", 1, NULL, 4, 0, &l));
    assert_null(l);
    return rc;
}

static int att_null_resource(mctx *m)
{
    redlock_lock *l = NULL;
    return last(m, redlock_lock_attach(m->c, NULL, 1, "t", 1, 0, &l));
}

static int att_ttl_overflow(mctx *m)
{
    redlock_lock *l = NULL;
    return last(m, redlock_lock_attach(m->c, "x", 1, "t", 1, UINT64_MAX, &l));
}

static int auto_null_lock(mctx *m)
{
    snprintf(m->msg, sizeof(m->msg), "-");
    return redlock_auto_extend(NULL, NULL, on_lost_never, m);
}

static int auto_null_lost_cb(mctx *m)
{
    hold(m, "misuse:a");
    int rc = last(m, redlock_auto_extend(m->lock, NULL, NULL, m));
    release_and_free(m);
    return rc;
}

static int auto_bad_extend_at(mctx *m)
{
    hold(m, "misuse:a");
    redlock_auto_opts a;
    redlock_auto_opts_init(&a);
    a.extend_at = 1.0;
    int rc = last(m, redlock_auto_extend(m->lock, &a, on_lost_never, m));
    release_and_free(m);
    return rc;
}

static int auto_after_release(mctx *m)
{
    hold(m, "misuse:a");
    h_record rel;
    assert_int_equal(h_release(&m->env, m->lock, &rel), 0);
    int rc = last(m, redlock_auto_extend(m->lock, NULL, on_lost_never, m));
    redlock_lock_free(m->lock);
    return rc;
}

static int free_and_stop_null(mctx *m)
{
    redlock_lock_free(NULL);
    redlock_auto_extend_stop(NULL);
    assert_string_equal(redlock_client_last_error(NULL), "");
    snprintf(m->msg, sizeof(m->msg), "-");
    return 0;
}

/* ---- url and quorum core ------------------------------------------------------------------ */

static int url_nulls(mctx *m)
{
    redlock_url u;
    char err[64];
    assert_int_equal(redlock_url_parse(NULL, "redis://h", err, sizeof(err)), REDLOCK_EINVAL);
    assert_true(err[0] != '\0');
    assert_int_equal(redlock_url_parse(&u, NULL, err, sizeof(err)), REDLOCK_EINVAL);
    redlock_url_free(&u);
    assert_int_equal(redlock_url_parse(&u, "bogus", NULL, 0), REDLOCK_EURL);
    redlock_url_free(&u);
    redlock_url_free(NULL);
    char out[8] = "xyz";
    size_t n = redlock_url_redact("redis://:pw@h", NULL, 0);
    assert_true(n > 0);
    redlock_url_redact("redis://:pw@h", out, 0);
    assert_string_equal(out, "xyz");
    redlock_url_redact(NULL, out, sizeof(out)); /* treated as "" */
    assert_string_equal(out, "");
    snprintf(m->msg, sizeof(m->msg), "%s", err);
    return 0;
}

static int round_nulls(mctx *m)
{
    assert_int_equal(redlock_round_init(NULL, 3, 1000, 0.01, 0, 0), REDLOCK_EINVAL);
    redlock_round r;
    assert_int_equal(redlock_round_init(&r, 0, 1000, 0.01, 0, 0), REDLOCK_EINVAL);
    assert_int_equal(redlock_round_status(&r), REDLOCK_EINVAL);
    assert_int_equal(redlock_round_init(&r, 65, 1000, 0.01, 0, 0), REDLOCK_EINVAL);
    assert_int_equal(redlock_round_init(&r, 3, 0, 0.01, 0, 0), REDLOCK_EINVAL);
    assert_int_equal(redlock_round_init(&r, 3, REDLOCK_TTL_MAX_MS + 1, 0.01, 0, 0), REDLOCK_EINVAL);
    assert_int_equal(redlock_round_init(&r, 3, 1000, 1.0, 0, 0), REDLOCK_EINVAL);
    assert_int_equal(redlock_round_vote(NULL, 0, REDLOCK_VOTE_YES, 0), REDLOCK_EINVAL);
    assert_int_equal(redlock_round_init(&r, 3, 1000, 0.01, 0, 0), 0);
    assert_int_equal(redlock_round_vote(&r, 3, REDLOCK_VOTE_YES, 0), REDLOCK_EINVAL);
    assert_int_equal(redlock_round_vote(&r, 0, REDLOCK_VOTE_NONE, 0), REDLOCK_EINVAL);
    assert_int_equal(redlock_round_vote(&r, 0, (redlock_vote)99, 0), REDLOCK_EINVAL);
    assert_int_equal(redlock_round_vote(&r, 0, REDLOCK_VOTE_YES, 0), REDLOCK_ROUND_PENDING);
    assert_int_equal(redlock_round_vote(&r, 0, REDLOCK_VOTE_YES, 0), REDLOCK_EINVAL);
    assert_int_equal(redlock_round_node_vote(&r, 64), REDLOCK_VOTE_NONE);
    snprintf(m->msg, sizeof(m->msg), "-");
    return 0;
}

/* ---- calls back into the client from its callbacks --------------------------------------- */

static void on_acq_then_release(redlock_lock *lock, int status, const redlock_result *result,
                                void *data)
{
    mctx *m = data;
    h_record_cb(lock, status, result, &m->rec[0]);
    m->inner_rc = status == 0 ? redlock_release(lock, h_record_cb, &m->rec[1]) : status;
}

static int cb_release_from_acquire(mctx *m)
{
    assert_int_equal(redlock_acquire(m->c, "misuse:cb", 9, 0, NULL, on_acq_then_release, m), 0);
    assert_true(h_run_until(&m->env.loop, &m->rec[1].calls, 1, 10000));
    assert_int_equal(m->rec[0].status, 0);
    assert_int_equal(m->rec[1].status, 0);
    assert_int_equal(m->rec[1].votes_yes, m->env.cluster.n);
    redlock_lock_free(m->rec[0].lock);
    return m->inner_rc;
}

static void on_acq_then_close(redlock_lock *lock, int status, const redlock_result *result,
                              void *data)
{
    mctx *m = data;
    m->order++;
    h_record_cb(lock, status, result, &m->rec[0]);
    m->inner_rc = redlock_client_close(m->c, on_close, m);
    m->inner_rc2 = redlock_client_close(m->c, on_close, m); /* second time: refused */
}

static int cb_close_from_acquire(mctx *m)
{
    assert_int_equal(redlock_acquire(m->c, "misuse:cb", 9, 0, NULL, on_acq_then_close, m), 0);
    m->env.client = NULL;
    assert_true(h_run_until(&m->env.loop, &m->close_calls, 1, 10000));
    assert_int_equal(m->rec[0].calls, 1);
    assert_int_equal(m->rec[0].status, 0);
    assert_int_equal(m->inner_rc2, REDLOCK_ECLOSING);
    assert_int_equal(m->close_at, 1);
    /* The held lock's handle went with the client; its key stays until the ttl (documented). */
    return m->inner_rc;
}

static void on_rel_then_acquire(redlock_lock *lock, int status, const redlock_result *result,
                                void *data)
{
    mctx *m = data;
    h_record_cb(lock, status, result, &m->rec[1]);
    m->inner_rc = redlock_acquire(m->c, "misuse:cb", 9, 0, NULL, h_record_cb, &m->rec[2]);
    redlock_lock_free(lock); /* freeing the handle from its own callback is fine */
}

static int cb_acquire_from_release(mctx *m)
{
    hold(m, "misuse:cb");
    assert_int_equal(redlock_release(m->lock, on_rel_then_acquire, m), 0);
    m->lock = NULL;
    assert_true(h_run_until(&m->env.loop, &m->rec[2].calls, 1, 10000));
    assert_int_equal(m->rec[1].status, 0);
    assert_int_equal(m->rec[2].status, 0); /* the resource was free again */
    m->lock = m->rec[2].lock;
    release_and_free(m);
    return m->inner_rc;
}

static void on_rel_then_close(redlock_lock *lock, int status, const redlock_result *result,
                              void *data)
{
    mctx *m = data;
    m->order++;
    h_record_cb(lock, status, result, &m->rec[1]);
    m->inner_rc = redlock_client_close(m->c, on_close, m);
}

static int cb_close_from_release(mctx *m)
{
    hold(m, "misuse:cb");
    assert_int_equal(redlock_release(m->lock, on_rel_then_close, m), 0);
    m->env.client = NULL;
    assert_true(h_run_until(&m->env.loop, &m->close_calls, 1, 10000));
    assert_int_equal(m->rec[1].status, 0);
    assert_int_equal(m->close_at, 1);
    m->lock = NULL; /* freed by the close */
    return m->inner_rc;
}

static void on_close_then_call(redlock_client *client, void *data)
{
    mctx *m = data;
    m->close_calls++;
    /* The client is still alive while its close callback runs, and refuses everything. */
    m->inner_rc = redlock_acquire(client, "late", 4, 0, NULL, on_never, m);
    m->inner_rc2 = redlock_client_close(client, on_close, m);
    snprintf(m->msg, sizeof(m->msg), "%s", redlock_client_last_error(client));
}

static int cb_calls_from_close_cb(mctx *m)
{
    assert_int_equal(redlock_client_close(m->c, on_close_then_call, m), 0);
    m->env.client = NULL;
    assert_true(h_run_until(&m->env.loop, &m->close_calls, 1, 10000));
    h_run_for(&m->env.loop, 10);
    assert_int_equal(m->close_calls, 1);
    assert_int_equal(m->inner_rc2, REDLOCK_ECLOSING);
    return m->inner_rc;
}

/* ---- accessors given NULL (probed in a child process: a crash fails the row, not the run) -- */

static int probe_child(void (*fn)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* cmocka's handlers would turn the crash into a failed test in the child. */
        signal(SIGSEGV, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        signal(SIGILL, SIG_DFL);
        signal(SIGFPE, SIG_DFL);
        fn();
        _exit(0);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : (WIFSIGNALED(st) ? WTERMSIG(st) : 255);
}

/* Run in a child (probe_child): a crash fails the row instead of the whole program; a wrong
 * value exits 1. */
static void null_client_accessors(void)
{
    bool empty = redlock_client_node_count(NULL) == 0 && redlock_client_node_url(NULL, 0) == NULL &&
                 redlock_client_loop(NULL) == NULL &&
                 strcmp(redlock_client_last_error(NULL), "") == 0;
    _exit(empty ? 0 : 1);
}

static void null_lock_accessors(void)
{
    size_t len1 = 7, len2 = 7, len3 = 7, len4 = 7;
    int x = 0;
    redlock_lock_set_data(NULL, &x);
    bool empty = redlock_lock_resource(NULL, &len1) == NULL && len1 == 0 &&
                 redlock_lock_token(NULL, &len2) == NULL && len2 == 0 &&
                 redlock_lock_resource(NULL, NULL) == NULL && redlock_lock_validity_ms(NULL) == 0 &&
                 redlock_lock_deadline_us(NULL) == 0 && redlock_lock_ttl_ms(NULL) == 0 &&
                 !redlock_lock_is_held(NULL, 0) && redlock_lock_client(NULL) == NULL &&
                 redlock_lock_get_data(NULL) == NULL && redlock_lock_extensions(NULL) == 0 &&
                 redlock_sync_lock_resource(NULL, &len3) == NULL && len3 == 0 &&
                 redlock_sync_lock_token(NULL, &len4) == NULL && len4 == 0 &&
                 redlock_sync_lock_validity_ms(NULL) == 0 &&
                 redlock_sync_lock_deadline_us(NULL) == 0 &&
                 redlock_sync_lock_status(NULL) == REDLOCK_EINVAL;
    _exit(empty ? 0 : 1);
}

/* The accessors read a NULL handle as empty (the header says so): 0 on success, like a call. */
static int accessors_null(mctx *m, void (*fn)(void))
{
    snprintf(m->msg, sizeof(m->msg), "-");
    int st = probe_child(fn);
    if (st != 0)
        printf("# accessors given NULL: %s\n", st == 255 ? "a value not empty" : "a crash");
    return st == 0 ? 0 : REDLOCK_EINVAL;
}

static int client_accessors_null(mctx *m)
{
    return accessors_null(m, null_client_accessors);
}

static int lock_accessors_null(mctx *m)
{
    return accessors_null(m, null_lock_accessors);
}

/* ---- the table ------------------------------------------------------------------------------ */

#define E_INVAL REDLOCK_EINVAL
#define E_CLOSING REDLOCK_ECLOSING

static const row rows[] = {
    /* name, servers, client, call, expect, message, empty nodes */
    {"new: loop NULL", 1, false, new_null_loop, E_INVAL, true, true},
    {"new: node_urls NULL", 1, false, new_null_urls, E_INVAL, true, true},
    {"new: client_out NULL", 1, false, new_null_out, E_INVAL, true, true},
    {"new: a NULL url", 1, false, new_null_url_entry, E_INVAL, true, true},
    {"new: err NULL", 1, false, new_null_err_buffer, E_INVAL, true, true},
    {"new: err_len 0", 1, false, new_zero_err_len, E_INVAL, true, true},
    {"new: 0 nodes", 1, false, new_zero_nodes, E_INVAL, true, true},
    {"new: 65 nodes", 1, false, new_65_nodes, E_INVAL, true, true},
    {"new: 64 nodes accepted", 1, false, new_64_nodes, 0, false, true},
    {"new: duplicate url", 1, false, dup_same, REDLOCK_EDUPNODE, true, true},
    {"new: [::1] vs [0:0::1]", 1, false, dup_v6_spelling, REDLOCK_EDUPNODE, true, true},
    {"new: v4 vs v4-mapped v6", 1, false, dup_v4_mapped, REDLOCK_EDUPNODE, true, true},
    {"new: same port other db", 1, false, dup_other_db, REDLOCK_EDUPNODE, true, true},
    {"new: same node other password", 1, false, dup_password_differs, REDLOCK_EDUPNODE, true, true},
    {"new: same unix socket", 1, false, dup_unix, REDLOCK_EDUPNODE, true, true},
    {"new: bad url", 1, false, new_bad_url, REDLOCK_EURL, true, true},
    {"new: drift_factor 1.0", 1, false, new_bad_drift, E_INVAL, true, true},
    {"new: opts NULL means defaults", 3, false, new_opts_null, 0, false, true},
    {"close: NULL", 1, false, close_null, E_INVAL, false, true},
    {"close: twice", 3, true, close_twice, E_CLOSING, false, true},
    {"close: operations in flight", 3, true, close_in_flight, 0, false, false},
    {"after close: acquire", 3, true, after_close_acquire, E_CLOSING, true, true},
    {"after close: inspect", 3, true, after_close_inspect, E_CLOSING, true, true},
    {"after close: attach", 3, true, after_close_attach, E_CLOSING, true, true},
    {"after close: release", 3, true, after_close_release, E_CLOSING, true, false},
    {"after close: extend", 3, true, after_close_extend, E_CLOSING, true, false},
    {"after close: auto_extend", 3, true, after_close_auto_extend, E_CLOSING, true, false},
    {"acquire: client NULL", 3, true, acq_null_client, E_INVAL, true, true},
    {"acquire: resource NULL", 3, true, acq_null_resource, E_INVAL, true, true},
    {"acquire: empty resource", 3, true, acq_empty_resource, E_INVAL, true, true},
    {"acquire: cb NULL", 3, true, acq_null_cb, E_INVAL, true, true},
    {"acquire: ttl 0 means default", 3, true, acq_ttl_zero_default, 0, false, true},
    {"acquire: ttl REDLOCK_TTL_MAX_MS", 3, true, acq_ttl_max, 0, false, true},
    {"acquire: ttl REDLOCK_TTL_MAX_MS+1", 3, true, acq_ttl_over_max, E_INVAL, true, true},
    {"acquire: ttl UINT64_MAX", 3, true, acq_ttl_uint64_max, E_INVAL, true, true},
    {"acquire: ttl 1 ms eaten by drift", 3, true, acq_ttl_1ms, E_INVAL, true, true},
    {"acquire: REDLOCK_RESOURCE_MAX bytes", 3, false, acq_at_resource_max, 0, false, true},
    {"acquire: REDLOCK_RESOURCE_MAX+1", 3, true, acq_over_resource_max, E_INVAL, true, true},
    {"acquire: token_len 0", 3, true, acq_token_len0, E_INVAL, true, true},
    {"acquire: token too long", 3, true, acq_token_too_long, E_INVAL, true, true},
    {"acquire: retry_count -2", 3, true, acq_retry_negative, E_INVAL, true, true},
    {"acquire: auto_extend no lost_cb", 3, true, acq_auto_without_lost_cb, E_INVAL, true, true},
    {"extend: lock NULL", 3, true, ext_null_lock, E_INVAL, true, true},
    {"extend: cb NULL", 3, true, ext_null_cb, E_INVAL, true, true},
    {"extend: unknown flag 2", 3, true, ext_flag_2, E_INVAL, true, true},
    {"extend: unknown high flag", 3, true, ext_flag_high, E_INVAL, true, true},
    {"extend: ttl UINT64_MAX", 3, true, ext_ttl_overflow, E_INVAL, true, true},
    {"extend: after release", 3, true, ext_after_release, REDLOCK_ERELEASED, true, true},
    {"release: lock NULL", 3, true, rel_null_lock, E_INVAL, true, true},
    {"release: cb NULL", 3, true, rel_null_cb, E_INVAL, true, true},
    {"release: twice, first in flight", 3, true, rel_twice_in_flight, REDLOCK_ERELEASED, true,
     true},
    {"release: twice, after the first", 3, true, rel_twice_after, REDLOCK_ERELEASED, true, true},
    {"inspect: client NULL", 3, true, insp_null_client, E_INVAL, true, true},
    {"inspect: resource NULL", 3, true, insp_null_resource, E_INVAL, true, true},
    {"inspect: cb NULL", 3, true, insp_null_cb, E_INVAL, true, true},
    {"attach: client NULL", 3, true, att_null_client, E_INVAL, true, true},
    {"attach: lock_out NULL", 3, true, att_null_out, E_INVAL, true, true},
    {"attach: token NULL", 3, true, att_null_token, E_INVAL, true, true},
    {"attach: resource NULL", 3, true, att_null_resource, E_INVAL, true, true},
    {"attach: ttl UINT64_MAX", 3, true, att_ttl_overflow, E_INVAL, true, true},
    {"auto_extend: lock NULL", 3, true, auto_null_lock, E_INVAL, true, true},
    {"auto_extend: lost_cb NULL", 3, true, auto_null_lost_cb, E_INVAL, true, true},
    {"auto_extend: extend_at 1.0", 3, true, auto_bad_extend_at, E_INVAL, true, true},
    {"auto_extend: after release", 3, true, auto_after_release, REDLOCK_ERELEASED, true, true},
    {"free/stop/last_error: NULL", 1, false, free_and_stop_null, 0, false, true},
    {"url: NULL arguments", 1, false, url_nulls, 0, true, true},
    {"round: bad arguments", 1, false, round_nulls, 0, false, true},
    {"callback: release from acquire cb", 3, true, cb_release_from_acquire, 0, false, true},
    {"callback: close from acquire cb", 3, true, cb_close_from_acquire, 0, false, false},
    {"callback: acquire from release cb", 3, true, cb_acquire_from_release, 0, false, true},
    {"callback: close from release cb", 3, true, cb_close_from_release, 0, false, true},
    {"callback: calls from the close cb", 3, true, cb_calls_from_close_cb, E_CLOSING, true, true},
    {"accessors: client NULL", 1, false, client_accessors_null, 0, false, true},
    {"accessors: lock NULL", 1, false, lock_accessors_null, 0, false, true},
};

#define N_ROWS (sizeof(rows) / sizeof(rows[0]))

static void run_row(void **state)
{
    const row *r = *state;
    mctx *m = calloc(1, sizeof(*m));
    assert_non_null(m);
    h_env_start(&m->env, r->servers, NULL);
    if (r->client)
        m->c = h_client(&m->env, NULL);
    int got = r->call(m);
    if (got != r->expect)
        fprintf(stderr, "%s: got %s, want %s (message \"%s\")\n", r->name, redlock_err_name(got),
                redlock_err_name(r->expect), m->msg);
    assert_int_equal(got, r->expect);
    if (r->want_message && m->msg[0] == '\0')
        fprintf(stderr, "%s: no message for %s\n", r->name, redlock_err_name(got));
    if (r->want_message)
        assert_true(m->msg[0] != '\0');
    /* A refused call never calls back, also not later. */
    h_run_for(&m->env.loop, 20);
    assert_int_equal(m->stray, 0);
    if (r->want_empty) {
        for (unsigned i = 0; i < m->env.cluster.n; i++)
            assert_int_equal(h_dbsize(&m->env, i), 0);
    }
    h_env_stop(&m->env); /* closes the client if the row did not, and checks the loop is empty */
    free(m);
}

int main(void)
{
    h_test_main_init();
    static struct CMUnitTest tests[N_ROWS];
    for (size_t i = 0; i < N_ROWS; i++) {
        tests[i] = (struct CMUnitTest){.name = rows[i].name,
                                       .test_func = run_row,
                                       .teardown_func = h_teardown,
                                       .initial_state = (void *)&rows[i]};
    }
    return _cmocka_run_group_tests("misuse", tests, N_ROWS, NULL, NULL);
}
