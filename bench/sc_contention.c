/* SPDX-License-Identifier: MIT */
/* sc_contention.c - W workers on ONE resource, each doing a read-modify-write of a counter
 * under the lock: how fast the lock changes hands, how fairly, and that no update is lost.
 *
 * Every worker is a client of its own (its own redlock_client, so its own connections to every
 * node, and its own connection to the data server): the nodes see the workers' SETs in
 * different orders, so votes can split, as they do between processes. The counter lives on the
 * first node's server (GET, then SET of the value + 1, two separate round trips: only the lock
 * keeps two workers apart). Each worker count runs twice: waiting by polling (notify off,
 * every lost round retried after 1 ms +/- 1 ms: the busiest polling a client would do), and
 * waiting for the release notifications (notify on, the library's defaults: a lost round sleeps
 * 200 +/- 100 ms unless a release wakes it first). Jain's index over the workers' acquisitions
 * (1: every worker had as many turns; 1/W: one had them all) says how fair the turns were.
 *
 * The ttl is short (CONTENTION_TTL_MS) and once a second one hold runs on past its deadline
 * before its critical section: its key expires on the nodes while the worker still has it, other
 * workers take the lock meanwhile, and the worker, seeing redlock_lock_is_held() false, skips its
 * write. Every worker checks redlock_lock_is_held() before its SET. So expiry happens in every
 * run, and lost_updates (writes made - final counter) must be 0.
 *
 * The negative control (one row, "control":"nolock"): the same workers doing the same
 * read-modify-write without the lock must lose updates, or the check above proves nothing.
 *
 * The same waiting, for a fenced lock and for a set of two resources ("lock":"fenced" and
 * "lock":"set", notify on): they take turns in the queue and are handed the lock by grants like
 * plain ones. Every row says what a turn cost: attempts per acquisition (median), and for a
 * fenced lock how far the fence moved per acquisition (last - first fence, over the turns). */
#include <stdlib.h>
#include <string.h>

#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>

#include "bench.h"

#define RESOURCE "bench:contended"
#define RESOURCE_2 "bench:contended:2" /* a set's second resource */
#define COUNTER "bench:contended:counter"
#define CONTENTION_TTL_MS 100
#define OVERRUN_FIRST_US 300000  /* the first overrun, after the start ... */
#define OVERRUN_EVERY_US 1000000 /* ... then one a second */
#define CONTROL_WORKERS 8
#define THINK_US 1000 /* a worker's time outside the lock after each release */
#define RTT_PINGS 200

typedef struct cworker cworker;

typedef enum { LOCK_PLAIN, LOCK_FENCED, LOCK_SET } lock_kind;

static const char *const lock_kind_names[] = {"plain", "fenced", "set"};

typedef struct contention {
    bool nolock; /* the negative control */
    lock_kind kind;
    uint64_t until_us;
    uint64_t next_overrun_us;
    unsigned running;
    bool done;
    uint64_t acquisitions, failures, writes, skipped, overruns, lost_releases;
    uint64_t last_release_us; /* 0: none yet */
    cworker *last_releaser;
    samples handoff; /* release -> acquire by another worker that was already waiting */
    /* A release's own quorum round trip: the latency of the node whose answer made a quorum
     * (of N nodes, the (N/2+1)-th fastest). A handoff by grant cannot beat it: the grants leave
     * the nodes in the scripts that answer the release. */
    samples release_quorum;
    samples attempts; /* per acquisition */
    uint64_t first_fence, last_fence;
    cworker *workers;
} contention;

struct cworker {
    contention *ct;
    uv_loop_t *loop;
    redlock_client *client;
    redisAsyncContext *data;
    redlock_lock *lock;
    bool overrun;
    uv_timer_t timer;
    uint64_t acquisitions;
    uint64_t acquire_start_us;
};

static void cworker_next(cworker *w);

static void on_thought(uv_timer_t *t)
{
    cworker_next(t->data);
}

/* Outside the lock for THINK_US: the releasing worker does not race the waiters at once. */
static void think(cworker *w)
{
    uv_timer_start(&w->timer, on_thought, THINK_US / 1000, 0);
}

/* The latency at which the result's yes votes made a quorum (0: they did not). */
static uint64_t quorum_latency_us(const redlock_result *result)
{
    uint64_t v[64];
    unsigned n = 0;
    for (unsigned i = 0; i < result->n_nodes && i < 64; i++) {
        if (result->nodes[i].vote == REDLOCK_VOTE_YES)
            v[n++] = result->nodes[i].latency_us;
    }
    unsigned quorum = redlock_quorum_of(result->n_nodes);
    if (n < quorum)
        return 0;
    qsort(v, n, sizeof(v[0]), bench_cmp_u64);
    return v[quorum - 1];
}

static void on_released(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    cworker *w = data;
    uint64_t q = status == 0 ? quorum_latency_us(result) : 0;
    if (q > 0)
        samples_add(&w->ct->release_quorum, q);
    if (status == REDLOCK_ELOST && w->overrun)
        w->ct->lost_releases++; /* the hold ran past its deadline on purpose */
    else if (status != 0) {
        w->ct->failures++;
        bench_cause(status, result);
    }
    w->overrun = false;
    redlock_lock_free(lock);
    think(w);
}

static void release(cworker *w)
{
    if (w->ct->nolock) {
        cworker_next(w);
        return;
    }
    /* The handoff is counted from here: the next holder may win before this release has heard
     * from every node (a release waits for all of them, an acquire for a quorum). */
    w->ct->last_release_us = bench_now_us();
    w->ct->last_releaser = w;
    if (redlock_release(w->lock, on_released, w) != 0) {
        w->ct->failures++;
        redlock_lock_free(w->lock);
        think(w);
    }
}

static void on_set(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    (void)reply;
    release(privdata);
}

static void on_get(redisAsyncContext *ac, void *reply, void *privdata)
{
    cworker *w = privdata;
    redisReply *r = reply;
    long long value = 0;
    if (r != NULL && r->type == REDIS_REPLY_STRING)
        value = atoll(r->str);
    /* Write only while the lock is held; a hold whose validity ran out skips its write. */
    if (!w->ct->nolock && !redlock_lock_is_held(w->lock, redlock_now_us())) {
        w->ct->skipped++;
        release(w);
        return;
    }
    w->ct->writes++;
    redisAsyncCommand(ac, on_set, w, "SET %s %lld", COUNTER, value + 1);
}

static void critical_section(cworker *w)
{
    redisAsyncCommand(w->data, on_get, w, "GET %s", COUNTER);
}

static void on_overrun_done(uv_timer_t *t)
{
    critical_section(t->data);
}

static void on_acquired(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    cworker *w = data;
    contention *ct = w->ct;
    if (status != 0) {
        ct->failures++;
        bench_cause(status, result);
        cworker_next(w);
        return;
    }
    uint64_t now = bench_now_us();
    if (ct->last_release_us != 0 && ct->last_releaser != w &&
        w->acquire_start_us < ct->last_release_us)
        samples_add(&ct->handoff, now - ct->last_release_us);
    ct->acquisitions++;
    w->acquisitions++;
    w->lock = lock;
    samples_add(&ct->attempts, result->attempts);
    if (ct->kind == LOCK_FENCED) {
        if (ct->first_fence == 0)
            ct->first_fence = result->fence;
        ct->last_fence = result->fence;
    }
    if (now >= ct->next_overrun_us) {
        /* Hold on until the key has expired on the nodes (the validity ends before it). */
        ct->next_overrun_us = now + OVERRUN_EVERY_US;
        ct->overruns++;
        w->overrun = true;
        uv_timer_start(&w->timer, on_overrun_done, CONTENTION_TTL_MS + 20, 0);
        return;
    }
    critical_section(w);
}

static void cworker_next(cworker *w)
{
    contention *ct = w->ct;
    if (bench_now_us() >= ct->until_us) {
        if (--ct->running == 0)
            ct->done = true;
        return;
    }
    if (ct->nolock) {
        ct->acquisitions++;
        w->acquisitions++;
        critical_section(w);
        return;
    }
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.wait_ms = 10000;
    lo.fencing = ct->kind == LOCK_FENCED;
    static const void *const resources[2] = {RESOURCE, RESOURCE_2};
    static const size_t lens[2] = {sizeof(RESOURCE) - 1, sizeof(RESOURCE_2) - 1};
    w->acquire_start_us = bench_now_us();
    if (redlock_acquire_multi(w->client, resources, lens, ct->kind == LOCK_SET ? 2 : 1, 0, &lo,
                              on_acquired, w) != 0) {
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
    *(int *)privdata = reply != NULL ? 1 : -1;
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
        if (u.password != NULL) {
            if (u.user != NULL)
                redisAsyncCommand(ac, NULL, NULL, "AUTH %s %s", u.user, u.password);
            else
                redisAsyncCommand(ac, NULL, NULL, "AUTH %s", u.password);
        }
        if (u.db > 0)
            redisAsyncCommand(ac, NULL, NULL, "SELECT %d", u.db);
    }
    redlock_url_free(&u);
    if (ac != NULL && ac->err) {
        redisAsyncFree(ac);
        return NULL;
    }
    return ac;
}

/* The single-node round trip of this run, twice: before the workers start, once every client's
 * connections are up (RTT_PINGS PINGs one after another on the data connection, to the first
 * node's server: the network and one server, nothing else), and during the run (a PING every
 * BUSY_PING_MS on a connection of its own, beside the workers: what a round trip costs on the
 * machine the handoffs share). Medians in microseconds. */
#define BUSY_PING_MS 2

typedef struct pinger {
    samples rtt;
    uint64_t sent_us;
    unsigned left; /* 0: until stopped (the busy pinger) */
    bool in_flight, stopped;
    int done;
    redisAsyncContext *ac;
    uv_timer_t timer;
} pinger;

static void on_pong(redisAsyncContext *ac, void *reply, void *privdata)
{
    pinger *p = privdata;
    p->in_flight = false;
    if (p->stopped) /* the run is over: its samples are counted */
        return;
    if (reply == NULL) {
        p->done = -1;
        return;
    }
    samples_add(&p->rtt, bench_now_us() - p->sent_us);
    if (p->left == 0) /* the busy pinger: the next PING is the timer's */
        return;
    if (--p->left == 0) {
        p->done = 1;
        return;
    }
    p->sent_us = bench_now_us();
    p->in_flight = true;
    redisAsyncCommand(ac, on_pong, p, "PING");
}

static void on_busy_ping(uv_timer_t *t)
{
    pinger *p = t->data;
    if (p->stopped || p->in_flight)
        return;
    p->sent_us = bench_now_us();
    p->in_flight = true;
    redisAsyncCommand(p->ac, on_pong, p, "PING");
}

/* Whether every node of every worker's client is up, waiting at most 5 s. */
static bool wait_workers_up(uv_loop_t *loop, contention *ct, unsigned w_count)
{
    uint64_t until = bench_now_us() + 5000000;
    for (;;) {
        bool all = true;
        for (unsigned i = 0; all && i < w_count; i++) {
            redlock_client *c = ct->workers[i].client;
            for (unsigned n = 0; all && n < redlock_client_node_count(c); n++) {
                redlock_node_info info;
                redlock_node_info_init(&info);
                all = redlock_client_node_info(c, n, &info) == 0 && info.state == REDLOCK_NODE_UP;
            }
        }
        if (all)
            return true;
        if (bench_now_us() >= until)
            return false;
        uv_run(loop, UV_RUN_ONCE);
    }
}

static bool wait_flag(uv_loop_t *loop, const int *flag);

static uint64_t measure_rtt_us(uv_loop_t *loop, redisAsyncContext *ac)
{
    pinger p;
    memset(&p, 0, sizeof(p));
    p.left = RTT_PINGS;
    p.sent_us = bench_now_us();
    redisAsyncCommand(ac, on_pong, &p, "PING");
    uint64_t rtt = wait_flag(loop, &p.done) ? samples_percentiles(&p.rtt).p50 : 0;
    samples_free(&p.rtt);
    return rtt;
}

/* Runs until the flag is set, at most 5 s; false if it was not. */
static bool wait_flag(uv_loop_t *loop, const int *flag)
{
    uint64_t until = bench_now_us() + 5000000;
    while (*flag == 0 && bench_now_us() < until)
        uv_run(loop, UV_RUN_ONCE);
    return *flag == 1;
}

static int run_level(bench_config *cfg, unsigned w_count, bool nolock, bool notify, lock_kind kind)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    redlock_options o;
    redlock_options_init(&o);
    o.ttl_ms = CONTENTION_TTL_MS;
    o.node_timeout_ms = cfg->node_timeout_ms;
    o.drift_factor = cfg->drift_factor;
    if (!notify) {
        o.no_notify = true;
        o.retry_delay_ms = 1;
        o.retry_jitter_ms = 1;
    }
    contention ct;
    memset(&ct, 0, sizeof(ct));
    ct.nolock = nolock || cfg->break_lock; /* --break-lock: every row unlocked, to be caught */
    ct.kind = kind;
    ct.workers = calloc(w_count, sizeof(cworker));
    int rc = 0;
    for (unsigned i = 0; i < w_count; i++) {
        cworker *w = &ct.workers[i];
        w->ct = &ct;
        w->loop = &loop;
        w->client = bench_client(cfg, &loop, NULL, 0, &o);
        w->data = data_connect(cfg, &loop);
        uv_timer_init(&loop, &w->timer);
        w->timer.data = w;
        if (w->data == NULL) {
            fprintf(stderr, "redlock-bench: contention: cannot connect to the data node\n");
            rc = -1;
        }
    }
    int reset = 0;
    if (rc == 0) {
        redisAsyncCommand(ct.workers[0].data, on_data_done, &reset, "SET %s 0", COUNTER);
        if (!wait_flag(&loop, &reset)) {
            fprintf(stderr, "redlock-bench: contention: the data node does not answer\n");
            rc = -1;
        }
    }
    if (rc == 0 && !ct.nolock && !wait_workers_up(&loop, &ct, w_count)) {
        fprintf(stderr, "redlock-bench: contention: the workers' nodes are not all up\n");
        rc = -1;
    }
    uint64_t rtt_us = rc == 0 ? measure_rtt_us(&loop, ct.workers[0].data) : 0;
    pinger busy;
    memset(&busy, 0, sizeof(busy));
    busy.ac = rc == 0 ? data_connect(cfg, &loop) : NULL;
    uv_timer_init(&loop, &busy.timer);
    busy.timer.data = &busy;
    uint64_t start = bench_now_us();
    double elapsed = 0;
    long long final = -1;
    if (rc == 0) {
        ct.running = w_count;
        ct.until_us = start + (uint64_t)(cfg->duration_s * 1e6);
        /* A short run (the smoke's) still has its overrun, a third of the way in. */
        uint64_t first = (uint64_t)(cfg->duration_s * 1e6 / 3);
        ct.next_overrun_us = start + (first < OVERRUN_FIRST_US ? first : OVERRUN_FIRST_US);
        if (busy.ac != NULL)
            uv_timer_start(&busy.timer, on_busy_ping, BUSY_PING_MS, BUSY_PING_MS);
        for (unsigned i = 0; i < w_count; i++)
            cworker_next(&ct.workers[i]);
        bench_run_until(&loop, &ct.done, ct.until_us + 60000000);
        elapsed = (double)(bench_now_us() - start) / 1e6;
        busy.stopped = true;
        uv_timer_stop(&busy.timer);
        int got = 0;
        redisAsyncCommand(ct.workers[0].data, on_data_reply, &final, "GET %s", COUNTER);
        redisAsyncCommand(ct.workers[0].data, on_data_done, &got, "DEL %s", COUNTER);
        if (!wait_flag(&loop, &got) || !ct.done) {
            fprintf(stderr, "redlock-bench: contention: the run did not finish\n");
            rc = -1;
        }
    }
    long long lost = (long long)ct.writes - final;
    uint64_t rtt_busy_us = busy.rtt.n > 0 ? samples_percentiles(&busy.rtt).p50 : 0;
    samples_free(&busy.rtt);
    if (busy.ac != NULL)
        redisAsyncDisconnect(busy.ac); /* a PING still out is answered with NULL */
    uv_close((uv_handle_t *)&busy.timer, NULL);

    uint64_t min = UINT64_MAX, max = 0;
    double sum = 0, sum_sq = 0;
    for (unsigned i = 0; i < w_count; i++) {
        double a = (double)ct.workers[i].acquisitions;
        min = ct.workers[i].acquisitions < min ? ct.workers[i].acquisitions : min;
        max = ct.workers[i].acquisitions > max ? ct.workers[i].acquisitions : max;
        sum += a;
        sum_sq += a * a;
    }
    double jain = sum_sq > 0 ? sum * sum / ((double)w_count * sum_sq) : 0;
    percentiles ph = samples_percentiles(&ct.handoff);
    uint64_t release_quorum_us =
        ct.release_quorum.n > 0 ? samples_percentiles(&ct.release_quorum).p50 : 0;
    double rate = elapsed > 0 ? (double)ct.acquisitions / elapsed : 0;
    uint64_t attempts_p50 = ct.attempts.n > 0 ? samples_percentiles(&ct.attempts).p50 : 0;
    double attempts_mean = 0;
    for (size_t i = 0; i < ct.attempts.n; i++)
        attempts_mean += (double)ct.attempts.v[i] / (double)ct.attempts.n;
    double fence_step =
        kind == LOCK_FENCED && ct.acquisitions > 1
            ? (double)(ct.last_fence - ct.first_fence) / (double)(ct.acquisitions - 1)
            : 0;
    if (rc == 0 && nolock) {
        printf("%-11s %2u workers, NO LOCK (control): %6.0f updates/s, lost_updates %lld of %llu "
               "(must be > 0)\n",
               "contention", w_count, rate, lost, (unsigned long long)ct.writes);
    } else if (rc == 0) {
        printf("%-11s %-6s %2u workers, notify %-3s: %5.0f acquisitions/s | handoff p50 %5llu us "
               "| lost_updates %lld\n",
               "contention", lock_kind_names[kind], w_count, notify ? "on" : "off", rate,
               (unsigned long long)ph.p50, lost);
        char row[48];
        snprintf(row, sizeof(row), "%s %u workers notify %s", lock_kind_names[kind], w_count,
                 notify ? "on" : "off");
        bench_row_failures(cfg, "contention", row, ct.failures, ct.acquisitions);
    }
    if (rc == 0 && cfg->json != NULL) {
        FILE *f = cfg->json;
        json_begin(f, "contention");
        if (nolock)
            fprintf(f, ",\"control\":\"nolock\"");
        else
            fprintf(f,
                    ",\"lock\":\"%s\",\"notify\":%s,\"jain_index\":%.3f,\"rtt_us\":%llu,"
                    "\"rtt_busy_us\":%llu,\"release_quorum_us\":%llu,\"think_us\":%d,"
                    "\"attempts_per_acquisition_p50\":%llu,\"attempts_per_acquisition_mean\":%.3f,"
                    "\"fence_per_acquisition\":%.3f",
                    lock_kind_names[kind], notify ? "true" : "false", jain,
                    (unsigned long long)rtt_us, (unsigned long long)rtt_busy_us,
                    (unsigned long long)release_quorum_us, THINK_US,
                    (unsigned long long)attempts_p50, attempts_mean, fence_step);
        fprintf(f,
                ",\"workers\":%u,\"clients\":%u,\"ttl_ms\":%u,\"acquisitions\":%llu,"
                "\"acquisitions_per_s\":%.1f,\"handoff_us\":",
                w_count, w_count, CONTENTION_TTL_MS, (unsigned long long)ct.acquisitions, rate);
        json_percentiles(f, &ph);
        fprintf(f,
                ",\"per_worker_min\":%llu,\"per_worker_max\":%llu,\"writes\":%llu,"
                "\"final_counter\":%lld,\"lost_updates\":%lld,\"expired_holds\":%llu,"
                "\"skipped_writes\":%llu,\"failures\":%llu}\n",
                (unsigned long long)min, (unsigned long long)max, (unsigned long long)ct.writes,
                final, lost, (unsigned long long)ct.overruns, (unsigned long long)ct.skipped,
                (unsigned long long)ct.failures);
        fflush(f);
    }
    samples_free(&ct.handoff);
    samples_free(&ct.release_quorum);
    samples_free(&ct.attempts);
    for (unsigned i = 0; i < w_count; i++) {
        cworker *w = &ct.workers[i];
        if (w->data != NULL)
            redisAsyncDisconnect(w->data);
        uv_close((uv_handle_t *)&w->timer, NULL);
        bench_close(&loop, w->client);
    }
    free(ct.workers);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    if (rc != 0 || final < 0)
        return -1;
    if (nolock && lost <= 0) /* a control that loses nothing proves nothing */
        bench_broken(cfg, "contention",
                     "the no-lock control lost no update: the check of "
                     "lost updates could not fail");
    if (!nolock && lost != 0)
        bench_broken(cfg, "contention", "%s lock, %u workers: %lld lost updates",
                     lock_kind_names[kind], w_count, lost);
    return 0;
}

int bench_contention(bench_config *cfg)
{
    static const unsigned levels[] = {2, 8, 32};
    int rc = 0;
    for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
        for (int notify = 0; notify < 2; notify++)
            if (run_level(cfg, levels[i], false, notify != 0, LOCK_PLAIN) != 0)
                rc = -1;
    }
    /* Fenced locks and sets wait in the queue too (notify on: the library's defaults). */
    for (lock_kind kind = LOCK_FENCED; kind <= LOCK_SET; kind++) {
        for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
            if (run_level(cfg, levels[i], false, true, kind) != 0)
                rc = -1;
    }
    if (run_level(cfg, CONTROL_WORKERS, true, false, LOCK_PLAIN) != 0)
        rc = -1;
    return rc;
}
