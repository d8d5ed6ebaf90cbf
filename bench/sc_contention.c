/* sc_contention.c - W workers on ONE resource, each doing a read-modify-write of a counter
 * under the lock: how fast the lock changes hands, how fairly, and that no update is lost.
 *
 * The counter lives on the first node's server (GET, then SET of the value + 1, two separate
 * round trips: only the lock keeps two workers apart). A worker that loses a round retries
 * after a short delay (1 ms +/- 1 ms) for up to 10 s. */
#include <stdlib.h>
#include <string.h>

#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>

#include "bench.h"

#define RESOURCE "bench:contended"
#define COUNTER "bench:contended:counter"

typedef struct cworker cworker;

typedef struct contention {
    redlock_client *client;
    redisAsyncContext *data;
    uint64_t until_us;
    unsigned running;
    bool done;
    uint64_t acquisitions, failures;
    uint64_t last_release_us; /* 0: none yet */
    samples handoff;
    cworker *workers;
} contention;

struct cworker {
    contention *ct;
    redlock_lock *lock;
    uint64_t acquisitions;
};

static void cworker_next(cworker *w);

static void on_released(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)result;
    cworker *w = data;
    if (status != 0)
        w->ct->failures++;
    w->ct->last_release_us = bench_now_us();
    redlock_lock_free(lock);
    cworker_next(w);
}

static void on_set(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    (void)reply;
    cworker *w = privdata;
    if (redlock_release(w->lock, on_released, w) != 0) {
        w->ct->failures++;
        redlock_lock_free(w->lock);
        cworker_next(w);
    }
}

static void on_get(redisAsyncContext *ac, void *reply, void *privdata)
{
    cworker *w = privdata;
    redisReply *r = reply;
    long long value = 0;
    if (r != NULL && r->type == REDIS_REPLY_STRING)
        value = atoll(r->str);
    redisAsyncCommand(ac, on_set, w, "SET %s %lld", COUNTER, value + 1);
}

static void on_acquired(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)result;
    cworker *w = data;
    contention *ct = w->ct;
    if (status != 0) {
        ct->failures++;
        cworker_next(w);
        return;
    }
    uint64_t now = bench_now_us();
    if (ct->last_release_us != 0)
        samples_add(&ct->handoff, now - ct->last_release_us);
    ct->acquisitions++;
    w->acquisitions++;
    w->lock = lock;
    redisAsyncCommand(ct->data, on_get, w, "GET %s", COUNTER);
}

static void cworker_next(cworker *w)
{
    contention *ct = w->ct;
    if (bench_now_us() >= ct->until_us) {
        if (--ct->running == 0)
            ct->done = true;
        return;
    }
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.wait_ms = 10000;
    if (redlock_acquire(ct->client, RESOURCE, strlen(RESOURCE), 0, &lo, on_acquired, w) != 0) {
        ct->failures++;
        if (--ct->running == 0)
            ct->done = true;
    }
}

static void on_data_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    redisReply *r = reply;
    long long *out = privdata;
    *out = r != NULL && r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
}

static void on_data_done(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    (void)reply;
    *(bool *)privdata = true;
}

static redisAsyncContext *data_connect(const bench_config *cfg, uv_loop_t *loop)
{
    redlock_url u;
    if (redlock_url_parse(&u, cfg->urls[0], NULL, 0) != 0) {
        redlock_url_free(&u);
        return NULL;
    }
    redisAsyncContext *ac =
        u.is_unix ? redisAsyncConnectUnix(u.path) : redisAsyncConnect(u.host, u.port);
    if (ac != NULL && !ac->err) {
        redisLibuvAttach(ac, loop);
        if (u.password != NULL)
            redisAsyncCommand(ac, NULL, NULL, "AUTH %s", u.password);
        if (u.db > 0)
            redisAsyncCommand(ac, NULL, NULL, "SELECT %d", u.db);
    }
    redlock_url_free(&u);
    return ac != NULL && !ac->err ? ac : NULL;
}

static int run_level(bench_config *cfg, unsigned w_count)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    redlock_options o;
    redlock_options_init(&o);
    o.ttl_ms = cfg->ttl_ms;
    o.node_timeout_ms = cfg->node_timeout_ms;
    o.retry_delay_ms = 1;
    o.retry_jitter_ms = 1;
    redlock_client *c = bench_client(cfg, &loop, NULL, 0, &o);
    contention ct;
    memset(&ct, 0, sizeof(ct));
    ct.client = c;
    ct.data = data_connect(cfg, &loop);
    if (ct.data == NULL) {
        fprintf(stderr, "redlock-bench: contention: cannot connect to the data node\n");
        bench_close(&loop, c);
        uv_loop_close(&loop);
        return -1;
    }
    bool reset = false;
    redisAsyncCommand(ct.data, on_data_done, &reset, "SET %s 0", COUNTER);
    bench_run_until(&loop, &reset, bench_now_us() + 5000000);

    ct.workers = calloc(w_count, sizeof(cworker));
    ct.running = w_count;
    uint64_t start = bench_now_us();
    ct.until_us = start + (uint64_t)(cfg->duration_s * 1e6);
    for (unsigned i = 0; i < w_count; i++) {
        ct.workers[i].ct = &ct;
        cworker_next(&ct.workers[i]);
    }
    bench_run_until(&loop, &ct.done, ct.until_us + 60000000);
    double elapsed = (double)(bench_now_us() - start) / 1e6;

    long long final = -1;
    bool got = false;
    redisAsyncCommand(ct.data, on_data_reply, &final, "GET %s", COUNTER);
    redisAsyncCommand(ct.data, on_data_done, &got, "DEL %s", COUNTER);
    bench_run_until(&loop, &got, bench_now_us() + 5000000);
    long long lost = (long long)ct.acquisitions - final;

    uint64_t min = UINT64_MAX, max = 0;
    for (unsigned i = 0; i < w_count; i++) {
        min = ct.workers[i].acquisitions < min ? ct.workers[i].acquisitions : min;
        max = ct.workers[i].acquisitions > max ? ct.workers[i].acquisitions : max;
    }
    percentiles ph = samples_percentiles(&ct.handoff);
    double rate = (double)ct.acquisitions / elapsed;
    printf("%-11s workers %3u: %8.0f acquisitions/s  handoff p50 %6llu us p99 %6llu  per-worker "
           "min %llu max %llu  lost_updates %lld  (%llu failed)\n",
           "contention", w_count, rate, (unsigned long long)ph.p50, (unsigned long long)ph.p99,
           (unsigned long long)min, (unsigned long long)max, lost, (unsigned long long)ct.failures);
    if (cfg->json != NULL) {
        fprintf(cfg->json,
                "{\"scenario\":\"contention\",\"workers\":%u,\"acquisitions\":%llu,"
                "\"acquisitions_per_s\":%.1f,\"handoff_us\":",
                w_count, (unsigned long long)ct.acquisitions, rate);
        json_percentiles(cfg->json, &ph);
        fprintf(cfg->json,
                ",\"per_worker_min\":%llu,\"per_worker_max\":%llu,\"final_counter\":%lld,"
                "\"lost_updates\":%lld,\"failures\":%llu}\n",
                (unsigned long long)min, (unsigned long long)max, final, lost,
                (unsigned long long)ct.failures);
        fflush(cfg->json);
    }
    samples_free(&ct.handoff);
    free(ct.workers);
    redisAsyncDisconnect(ct.data);
    bench_close(&loop, c);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return lost == 0 && final >= 0 ? 0 : -1;
}

int bench_contention(bench_config *cfg)
{
    static const unsigned levels[] = {2, 8, 32};
    int rc = 0;
    for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
        if (run_level(cfg, levels[i]) != 0)
            rc = -1;
    return rc;
}
