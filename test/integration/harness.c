/* SPDX-License-Identifier: MIT */
/* harness.c - see harness.h. */
#include "harness.h"
#include "test_filters.h"

#include "common.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scripts.h"

void h_record_cb(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    h_record *rec = data;
    rec->calls++;
    rec->status = status;
    rec->lock = lock;
    rec->at_us = redlock_now_us();
    assert_int_equal(result->status, status);
    rec->votes_yes = result->votes_yes;
    rec->votes_no = result->votes_no;
    rec->votes_error = result->votes_error;
    rec->votes_timeout = result->votes_timeout;
    rec->attempts = result->attempts;
    rec->elapsed_us = result->elapsed_us;
    rec->n_nodes = result->n_nodes;
    rec->fence = result->fence;
    for (unsigned i = 0; i < result->n_nodes && i < H_MAX_NODES; i++) {
        rec->node_fence[i] = result->nodes[i].fence;
        rec->node_vote[i] = result->nodes[i].vote;
        rec->node_latency_us[i] = result->nodes[i].latency_us;
        snprintf(rec->node_error[i], sizeof(rec->node_error[i]), "%s",
                 result->nodes[i].error != NULL ? result->nodes[i].error : "");
        snprintf(rec->node_url[i], sizeof(rec->node_url[i]), "%s",
                 result->nodes[i].url != NULL ? result->nodes[i].url : "");
    }
}

void h_test_options(redlock_options *opts)
{
    redlock_options_init(opts);
    opts->node_timeout_ms = H_NODE_TIMEOUT_MS;
    opts->connect_timeout_ms = H_CONNECT_TIMEOUT_MS;
    opts->retry_count = 0;
    /* A release waits for every node's answer: what the tests check of it ("every node deleted
     * the key") is then there when its callback runs. The release decided at the quorum (the
     * default) has tests of its own (test_release.c). */
    opts->release_waits_all = true;
}

int h_teardown(void **state)
{
    (void)state;
    unsigned stopped = fixture_stop_all();
    if (stopped > 0)
        fprintf(stderr,
                "# h_teardown: the test ended with %u cluster(s) running (a failed check): "
                "stopped\n",
                stopped);
    return 0;
}

void h_env_start(h_env *env, unsigned n, const char *extra_conf)
{
    memset(env, 0, sizeof(*env));
    /* A runner may start us with stdin closed; libuv aborts if its loop lands on fd 0. */
    redlock__keep_stdio_taken();
    assert_int_equal(uv_loop_init(&env->loop), 0);
    assert_int_equal(fixture_start(&env->cluster, n, extra_conf), 0);
}

static void on_closed(redlock_client *client, void *data)
{
    (void)client;
    *(bool *)data = true;
}

void h_close_client(h_env *env, redlock_client *client)
{
    h_close_client_ex(env, client, 0);
}

void h_close_client_ex(h_env *env, redlock_client *client, unsigned flags)
{
    bool closed = false;
    assert_int_equal(redlock_client_close_ex(client, flags, on_closed, &closed), 0);
    assert_true(h_run_until_true(&env->loop, &closed, H_WAIT_MS + H_SLACK_MS));
    if (env->client == client)
        env->client = NULL;
}

static void walk_cb(uv_handle_t *h, void *arg)
{
    (void)arg;
    fprintf(stderr, "left open: handle type %s\n", uv_handle_type_name(uv_handle_get_type(h)));
}

void h_env_stop(h_env *env)
{
    if (env->client != NULL)
        h_close_client(env, env->client);
    /* Let closing handles finish, then the loop must be empty. */
    uv_run(&env->loop, UV_RUN_NOWAIT);
    int rc = uv_loop_close(&env->loop);
    if (rc != 0)
        uv_walk(&env->loop, walk_cb, NULL);
    fixture_stop(&env->cluster);
    assert_int_equal(rc, 0);
}

redlock_client *h_client(h_env *env, const redlock_options *opts)
{
    redlock_options defaults;
    if (opts == NULL) {
        h_test_options(&defaults);
        opts = &defaults;
    }
    redlock_client *c = NULL;
    char err[256];
    int rc = redlock_client_new(&env->loop, env->cluster.urls, env->cluster.n, opts, &c, err,
                                sizeof(err));
    if (rc != 0)
        fprintf(stderr, "redlock_client_new: %s: %s\n", redlock_err_name(rc), err);
    assert_int_equal(rc, 0);
    if (env->client == NULL)
        env->client = c;
    return c;
}

typedef struct run_state {
    uv_timer_t guard;     /* the time bound */
    uv_prepare_t prepare; /* checks the condition right before the loop would block */
    bool fired;
    const int *counter;
    int target;
    const bool *flag;
    int closing;
} run_state;

static bool run_done(const run_state *st)
{
    return st->fired || (st->counter != NULL && *st->counter >= st->target) ||
           (st->flag != NULL && *st->flag);
}

static void on_guard(uv_timer_t *t)
{
    ((run_state *)t->data)->fired = true;
}

/* Called after the timers of a turn ran and before the loop polls. A condition met by a timer
 * callback (a result delivered from the client's timer queue, say) must not leave UV_RUN_ONCE
 * blocked in poll until some other event - the guard, seconds later: uv_stop makes this turn's
 * poll return at once. */
static void on_prepare(uv_prepare_t *p)
{
    if (run_done(p->data))
        uv_stop(p->loop);
}

static void run_handle_closed(uv_handle_t *h)
{
    ((run_state *)h->data)->closing--;
}

static bool run_until(uv_loop_t *loop, run_state *st, uint64_t timeout_ms)
{
    st->fired = false;
    st->guard.data = st;
    st->prepare.data = st;
    uv_timer_init(loop, &st->guard);
    uv_prepare_init(loop, &st->prepare);
    uv_prepare_start(&st->prepare, on_prepare);
    /* The loop's cached time may be stale (blocking fixture calls ran since the last turn). */
    uv_update_time(loop);
    uv_timer_start(&st->guard, on_guard, timeout_ms, 0);
    while (!run_done(st))
        uv_run(loop, UV_RUN_ONCE);
    bool reached =
        (st->counter != NULL && *st->counter >= st->target) || (st->flag != NULL && *st->flag);
    st->closing = 2;
    uv_close((uv_handle_t *)&st->guard, run_handle_closed);
    uv_close((uv_handle_t *)&st->prepare, run_handle_closed);
    while (st->closing > 0)
        uv_run(loop, UV_RUN_NOWAIT);
    return reached;
}

bool h_run_until(uv_loop_t *loop, const int *counter, int target, uint64_t timeout_ms)
{
    run_state st = {.counter = counter, .target = target};
    return run_until(loop, &st, timeout_ms);
}

bool h_run_until_true(uv_loop_t *loop, const bool *flag, uint64_t timeout_ms)
{
    run_state st = {.flag = flag};
    return run_until(loop, &st, timeout_ms);
}

void h_run_for(uv_loop_t *loop, uint64_t ms)
{
    int never = 0;
    h_run_until(loop, &never, 1, ms);
}

int h_acquire(h_env *env, redlock_client *c, const char *resource, uint64_t ttl_ms,
              const redlock_lock_opts *opts, h_record *rec)
{
    memset(rec, 0, sizeof(*rec));
    int rc = redlock_acquire(c, resource, strlen(resource), ttl_ms, opts, h_record_cb, rec);
    if (rc != 0)
        return rc;
    assert_int_equal(rec->calls, 0); /* never called back from inside the call */
    assert_true(h_run_until(&env->loop, &rec->calls, 1, 30000));
    assert_int_equal(rec->calls, 1);
    return rec->status;
}

uint64_t h_wait_ms(void)
{
    static uint64_t ms;
    if (ms == 0) {
        const char *env = getenv("H_WAIT_MS");
        unsigned long long v = env != NULL ? strtoull(env, NULL, 10) : 0;
        ms = v >= 1000 && v <= 600000 ? v : 10000;
    }
    return ms;
}

int h_release(h_env *env, redlock_lock *lock, h_record *rec)
{
    memset(rec, 0, sizeof(*rec));
    int rc = redlock_release(lock, h_record_cb, rec);
    if (rc != 0)
        return rc;
    assert_true(h_run_until(&env->loop, &rec->calls, 1, 30000));
    assert_int_equal(rec->calls, 1);
    return rec->status;
}

void h_release_ok(h_env *env, redlock_lock *lock, h_record *rec)
{
    h_record own;
    if (rec == NULL)
        rec = &own;
    int rc = h_release(env, lock, rec);
    if (rc != 0)
        h_dump_record("the release", rec);
    assert_int_equal(rc, 0);
    redlock_lock_free(lock);
}

redlock_client *h_own_client(h_env *env, const redlock_options *opts)
{
    redlock_client *keep = env->client;
    redlock_client *c = h_client(env, opts);
    env->client = keep;
    h_wait_ready(env, c);
    return c;
}

redlock_client *h_start_holding(h_env *env, unsigned n, const char *resource, uint64_t ttl_ms,
                                h_record *held)
{
    h_env_start(env, n, NULL);
    redlock_client *c = h_client(env, NULL);
    h_wait_ready(env, c);
    memset(held, 0, sizeof(*held));
    int rc = h_acquire(env, c, resource, ttl_ms, NULL, held);
    if (rc != 0)
        h_dump_record("the acquire", held);
    assert_int_equal(rc, 0);
    return c;
}

int h_extend(h_env *env, redlock_lock *lock, uint64_t ttl_ms, unsigned flags, h_record *rec)
{
    memset(rec, 0, sizeof(*rec));
    int rc = redlock_extend(lock, ttl_ms, flags, h_record_cb, rec);
    if (rc != 0)
        return rc;
    assert_true(h_run_until(&env->loop, &rec->calls, 1, 30000));
    assert_int_equal(rec->calls, 1);
    return rec->status;
}

void h_wait_connected(h_env *env, redlock_client *c)
{
    /* A throwaway acquire + release waits for every connection: the first command to each node
     * is queued behind its connect. */
    h_record rec;
    char name[64];
    snprintf(name, sizeof(name), "h-warmup-%llu", (unsigned long long)redlock_now_us());
    int rc = h_acquire(env, c, name, 1000, NULL, &rec);
    if (rc == 0) {
        h_record rel;
        h_release(env, rec.lock, &rel);
        redlock_lock_free(rec.lock);
    }
}

char *h_get(h_env *env, unsigned i, const void *key, size_t key_len, size_t *len)
{
    const char *argv[2] = {"GET", key};
    size_t argvlen[2] = {3, key_len};
    redisReply *r = fixture_command_argv(&env->cluster, i, 2, argv, argvlen);
    char *out = NULL;
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        out = malloc(r->len + 1);
        memcpy(out, r->str, r->len);
        out[r->len] = '\0';
        if (len != NULL)
            *len = r->len;
    }
    if (r != NULL)
        freeReplyObject(r);
    return out;
}

long long h_pttl(h_env *env, unsigned i, const void *key, size_t key_len)
{
    const char *argv[2] = {"PTTL", key};
    size_t argvlen[2] = {4, key_len};
    redisReply *r = fixture_command_argv(&env->cluster, i, 2, argv, argvlen);
    long long v = -100;
    if (r != NULL && r->type == REDIS_REPLY_INTEGER)
        v = r->integer;
    if (r != NULL)
        freeReplyObject(r);
    return v;
}

unsigned h_count_holding(h_env *env, const void *key, size_t key_len, const char *token,
                         size_t token_len)
{
    unsigned n = 0;
    for (unsigned i = 0; i < env->cluster.n; i++) {
        if (env->cluster.servers[i].pid == 0 || env->cluster.servers[i].paused)
            continue;
        size_t len = 0;
        char *v = h_get(env, i, key, key_len, &len);
        if (v != NULL && len == token_len && memcmp(v, token, len) == 0)
            n++;
        free(v);
    }
    return n;
}

/* ---- helpers added for the integration suite ------------------------------------------------ */

int h_acquire_bin(h_env *env, redlock_client *c, const void *resource, size_t len, uint64_t ttl_ms,
                  const redlock_lock_opts *opts, h_record *rec)
{
    memset(rec, 0, sizeof(*rec));
    int rc = redlock_acquire(c, resource, len, ttl_ms, opts, h_record_cb, rec);
    if (rc != 0)
        return rc;
    assert_int_equal(rec->calls, 0);
    assert_true(h_run_until(&env->loop, &rec->calls, 1, 30000));
    assert_int_equal(rec->calls, 1);
    return rec->status;
}

int h_client_urls(h_env *env, const char *const *urls, unsigned n, const redlock_options *opts,
                  redlock_client **out, char *err, size_t err_len)
{
    redlock_options defaults;
    if (opts == NULL) {
        h_test_options(&defaults);
        opts = &defaults;
    }
    int rc = redlock_client_new(&env->loop, urls, n, opts, out, err, err_len);
    if (rc == 0 && env->client == NULL)
        env->client = *out;
    return rc;
}

bool h_wait_holding(h_env *env, const void *key, size_t key_len, const char *token,
                    size_t token_len, unsigned want, uint64_t timeout_ms)
{
    uint64_t deadline = redlock_now_us() + timeout_ms * 1000;
    for (;;) {
        if (h_count_holding(env, key, key_len, token, token_len) == want)
            return true;
        if (redlock_now_us() >= deadline)
            return false;
        h_run_for(&env->loop, 10);
    }
}

void h_set(h_env *env, unsigned i, const void *key, size_t key_len, const char *value)
{
    const char *argv[3] = {"SET", key, value};
    size_t argvlen[3] = {3, key_len, strlen(value)};
    redisReply *r = fixture_command_argv(&env->cluster, i, 3, argv, argvlen);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    assert_string_equal(r->str, "OK");
    freeReplyObject(r);
}

long long h_del(h_env *env, unsigned i, const void *key, size_t key_len)
{
    const char *argv[2] = {"DEL", key};
    size_t argvlen[2] = {3, key_len};
    redisReply *r = fixture_command_argv(&env->cluster, i, 2, argv, argvlen);
    long long v = -1;
    if (r != NULL && r->type == REDIS_REPLY_INTEGER)
        v = r->integer;
    if (r != NULL)
        freeReplyObject(r);
    return v;
}

long long h_dbsize(h_env *env, unsigned i)
{
    redisReply *r = fixture_command(&env->cluster, i, "DBSIZE");
    long long v = -1;
    if (r != NULL && r->type == REDIS_REPLY_INTEGER)
        v = r->integer;
    if (r != NULL)
        freeReplyObject(r);
    return v;
}

/* How many nodes answer an inspect of name (a yes or a no: the key's state, whatever it is). An
 * inspect waits for every node, where a release is decided at the quorum. */
static unsigned nodes_answering(h_env *env, redlock_client *c, const char *name, h_record *rec)
{
    memset(rec, 0, sizeof(*rec));
    if (redlock_inspect(c, name, strlen(name), h_record_cb, rec) != 0)
        return 0;
    assert_true(h_run_until(&env->loop, &rec->calls, 1, H_WAIT_MS + H_NODE_TIMEOUT_MS));
    unsigned answered = 0;
    for (unsigned i = 0; i < rec->n_nodes && i < H_MAX_NODES; i++)
        answered += rec->node_vote[i] == REDLOCK_VOTE_YES || rec->node_vote[i] == REDLOCK_VOTE_NO;
    return answered;
}

/* A lock taken and released, then an inspect that want nodes answer (whatever the client's
 * release_waits_all). */
static bool probe(h_env *env, redlock_client *c, const char *name, unsigned want, bool verbose)
{
    h_record rec, rel, look;
    memset(&rel, 0, sizeof(rel));
    int rc = h_acquire(env, c, name, 2000, NULL, &rec);
    if (rc != 0) {
        if (verbose)
            h_dump_record("h_wait_ready: acquire", &rec);
        return false;
    }
    rc = h_release(env, rec.lock, &rel);
    redlock_lock_free(rec.lock);
    if (rc != 0) {
        if (verbose)
            h_dump_record("h_wait_ready: release", &rel);
        return false;
    }
    unsigned answered = nodes_answering(env, c, name, &look);
    if (answered == want)
        return true;
    if (verbose) {
        fprintf(stderr, "h_wait_ready: %u of %u nodes answered\n", answered, want);
        h_dump_record("h_wait_ready: inspect", &look);
    }
    return false;
}

bool h_wait_release_votes(h_env *env, redlock_client *c, unsigned want, uint64_t timeout_ms)
{
    uint64_t deadline = redlock_now_us() + timeout_ms * 1000;
    char name[64];
    snprintf(name, sizeof(name), "h-probe-%llu", (unsigned long long)redlock_now_us());
    for (;;) {
        h_record rec;
        if (h_acquire(env, c, name, 2000, NULL, &rec) == 0) {
            h_record rel;
            int rc = h_release(env, rec.lock, &rel);
            redlock_lock_free(rec.lock);
            unsigned unheard =
                rel.n_nodes - rel.votes_yes - rel.votes_no - rel.votes_error - rel.votes_timeout;
            if (unheard > 0)
                fail_msg("h_wait_release_votes: the release was decided with %u nodes unheard "
                         "(the client needs redlock_options.release_waits_all)",
                         unheard);
            if (rc == 0 && rel.votes_yes == want)
                return true;
        }
        if (redlock_now_us() >= deadline)
            return false;
        h_run_for(&env->loop, 20);
    }
}

uint64_t h_since_us(uint64_t t0_us)
{
    uint64_t now = redlock_now_us();
    return now > t0_us ? now - t0_us : 0;
}

void h_test_main_init(void)
{
    signal(SIGPIPE, SIG_IGN);
    test_filters_from_env();
}

void h_load_scripts(h_env *env)
{
    const redlock__script *scripts[2] = {&redlock__script_extend, &redlock__script_release};
    for (unsigned i = 0; i < env->cluster.n; i++) {
        if (env->cluster.servers[i].pid == 0 || env->cluster.servers[i].paused)
            continue;
        for (int k = 0; k < 2; k++) {
            const char *argv[3] = {"SCRIPT", "LOAD", scripts[k]->source};
            size_t argvlen[3] = {6, 4, scripts[k]->source_len};
            redisReply *r = fixture_command_argv(&env->cluster, i, 3, argv, argvlen);
            assert_non_null(r);
            assert_int_equal(r->type, REDIS_REPLY_STRING);
            freeReplyObject(r);
        }
    }
}

void h_dump_record(const char *what, const h_record *rec)
{
    fprintf(stderr, "%s: %s, yes %u no %u error %u timeout %u, attempts %u, %llu us\n", what,
            rec->status == 0 ? "ok" : redlock_err_name(rec->status), rec->votes_yes, rec->votes_no,
            rec->votes_error, rec->votes_timeout, rec->attempts,
            (unsigned long long)rec->elapsed_us);
    for (unsigned i = 0; i < rec->n_nodes && i < H_MAX_NODES; i++)
        fprintf(stderr, "  node %u %s: %s after %llu us %s\n", i, rec->node_url[i],
                redlock_vote_name(rec->node_vote[i]), (unsigned long long)rec->node_latency_us[i],
                rec->node_error[i]);
}

void h_wait_ready(h_env *env, redlock_client *c)
{
    unsigned running = 0;
    for (unsigned i = 0; i < env->cluster.n; i++)
        running += env->cluster.servers[i].pid != 0 && !env->cluster.servers[i].paused;
    uint64_t deadline = redlock_now_us() + H_WAIT_MS * 1000;
    char name[64];
    snprintf(name, sizeof(name), "h-ready-%llu", (unsigned long long)redlock_now_us());
    for (int attempt = 1;; attempt++) {
        bool last = redlock_now_us() >= deadline;
        if (probe(env, c, name, running, last || attempt % 50 == 0))
            return;
        if (last)
            fail_msg("client not ready after %d ms", H_WAIT_MS);
        h_run_for(&env->loop, 20);
    }
}

static bool server_running(const h_env *env, unsigned i)
{
    return env->cluster.servers[i].pid != 0 && !env->cluster.servers[i].paused;
}

void h_settle_node(h_env *env, redlock_client *c, unsigned i)
{
    uint64_t t0 = redlock_now_us();
    redlock_node_info info;
    for (;;) {
        redlock_node_info_init(&info);
        assert_int_equal(redlock_client_node_info(c, i, &info), 0);
        if (info.inflight == 0 && info.owed == 0)
            return;
        if (h_since_us(t0) > H_WAIT_MS * 1000ull)
            fail_msg("h_settle_node: node %u still owes an answer after %llu ms", i,
                     (unsigned long long)H_WAIT_MS);
        h_run_for(&env->loop, 1);
    }
}

void h_settle(h_env *env, redlock_client *c)
{
    uint64_t t0 = redlock_now_us();
    for (;;) {
        bool idle = true;
        for (unsigned i = 0; i < redlock_client_node_count(c); i++) {
            redlock_node_info info;
            redlock_node_info_init(&info);
            assert_int_equal(redlock_client_node_info(c, i, &info), 0);
            if (info.inflight != 0 || info.owed != 0)
                idle = false;
        }
        if (idle)
            return;
        if (h_since_us(t0) > H_WAIT_MS * 1000ull)
            fail_msg("h_settle: a node still owes an answer after %llu ms",
                     (unsigned long long)H_WAIT_MS);
        h_run_for(&env->loop, 5);
    }
}

void h_hear_all(h_env *env, redlock_client *c)
{
    h_settle(env, c);
    h_drain(env, c);
}

void h_drain(h_env *env, redlock_client *c)
{
    bool answered[H_MAX_NODES] = {false};
    uint64_t deadline = redlock_now_us() + H_WAIT_MS * 1000;
    for (;;) {
        h_record rec;
        memset(&rec, 0, sizeof(rec));
        assert_int_equal(redlock_inspect(c, "h-drain", 7, h_record_cb, &rec), 0);
        assert_true(h_run_until(&env->loop, &rec.calls, 1, H_WAIT_MS + H_NODE_TIMEOUT_MS));
        bool all = true;
        for (unsigned i = 0; i < env->cluster.n && i < H_MAX_NODES; i++) {
            if (rec.node_vote[i] == REDLOCK_VOTE_YES || rec.node_vote[i] == REDLOCK_VOTE_NO)
                answered[i] = true;
            if (server_running(env, i) && !answered[i])
                all = false;
        }
        if (all)
            return;
        if (redlock_now_us() >= deadline) {
            h_dump_record("h_drain: last inspect", &rec);
            fail_msg("h_drain: not every running server answered within %d ms", H_WAIT_MS);
        }
        h_run_for(&env->loop, 20);
    }
}

void h_assert_validity(const h_record *rec, uint64_t ttl_ms, uint64_t validity_ms)
{
    const uint64_t drift_us = ttl_ms * 10 + 2000;
    const uint64_t most_us = ttl_ms * 1000 - drift_us;
    const uint64_t least_us =
        most_us > rec->elapsed_us + 1000 ? most_us - rec->elapsed_us - 1000 : 0;
    if (validity_ms * 1000 > most_us || validity_ms * 1000 < least_us)
        fail_msg("validity %llu ms of a %llu ms ttl, round took %llu us: want %llu..%llu ms",
                 (unsigned long long)validity_ms, (unsigned long long)ttl_ms,
                 (unsigned long long)rec->elapsed_us, (unsigned long long)least_us / 1000,
                 (unsigned long long)most_us / 1000);
}

void h_urls_with_timeout(h_env *env, unsigned short_mask, uint64_t short_timeout_ms,
                         char (*buf)[160], const char **urls)
{
    for (unsigned i = 0; i < env->cluster.n; i++) {
        if (short_mask & (1u << i))
            snprintf(buf[i], 160, "%s?timeout_ms=%llu", env->cluster.urls[i],
                     (unsigned long long)short_timeout_ms);
        else
            snprintf(buf[i], 160, "%s", env->cluster.urls[i]);
        urls[i] = buf[i];
    }
}

void h_wait_busy_rounds(h_env *env, redlock_client *c, uint64_t n)
{
    uint64_t t0 = redlock_now_us();
    for (;;) {
        redlock_stats st;
        redlock_stats_init(&st);
        assert_int_equal(redlock_client_stats(c, &st), 0);
        if (st.rounds_busy >= n)
            return;
        assert_true(h_since_us(t0) < H_WAIT_MS * 1000ull);
        h_run_for(&env->loop, 10);
    }
}
