/* SPDX-License-Identifier: MIT */
/* sc_multi.c - the multi scenario: locks on k = 1, 2, 4 and 8 resources at once
 * (redlock_acquire_multi: one script per node that sets the whole set or none). For each k, in
 * slices that rotate over the four (a balanced order, so a machine whose speed drifts favours
 * none):
 *   - the acquire's latency, one lock at a time;
 *   - lock cycles (acquire + release) per second with 64 in flight, each on fresh resources, as
 *     in the throughput scenario (no cycle waits for another).
 * k = 1 is redlock_acquire itself (a plain SET NX PX), the baseline of the others. */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define SLICES 4
#define WIDTH 64
#define K_POINTS 4
#define K_MAX 8

static const unsigned k_values[K_POINTS] = {1, 2, 4, 8};

typedef struct mchain mchain;

typedef struct mworker {
    mchain *ch;
    unsigned id;
    uint64_t t0;
    char names[K_MAX][64];
    const void *res[K_MAX];
    size_t lens[K_MAX];
} mworker;

struct mchain {
    redlock_client *client;
    unsigned k;
    uint64_t until_us;
    unsigned running;
    uint64_t cycles, failures, seq;
    samples *acquire; /* may be NULL */
    bool done;
};

static void mworker_next(mworker *w);

static void on_released(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)result;
    mworker *w = data;
    if (status != 0)
        w->ch->failures++;
    w->ch->cycles++;
    redlock_lock_free(lock);
    mworker_next(w);
}

static void on_acquired(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)result;
    mworker *w = data;
    mchain *ch = w->ch;
    if (status != 0) {
        ch->failures++;
        mworker_next(w);
        return;
    }
    if (ch->acquire != NULL)
        samples_add(ch->acquire, bench_now_us() - w->t0);
    if (redlock_release(lock, on_released, w) != 0) {
        ch->failures++;
        redlock_lock_free(lock);
        mworker_next(w);
    }
}

static void mworker_next(mworker *w)
{
    mchain *ch = w->ch;
    if (bench_now_us() >= ch->until_us) {
        if (--ch->running == 0)
            ch->done = true;
        return;
    }
    unsigned long long seq = (unsigned long long)ch->seq++;
    for (unsigned j = 0; j < ch->k; j++) {
        int len = snprintf(w->names[j], sizeof(w->names[j]), "bench:multi:%u:%u:%llu:%u", ch->k,
                           w->id, seq, j);
        w->res[j] = w->names[j];
        w->lens[j] = (size_t)len;
    }
    w->t0 = bench_now_us();
    if (redlock_acquire_multi(ch->client, w->res, w->lens, ch->k, 0, NULL, on_acquired, w) != 0) {
        ch->failures++;
        if (--ch->running == 0)
            ch->done = true;
    }
}

/* width workers on sets of k fresh resources for seconds: cycles per second; acquire latencies
 * to acquire. */
static double run_mchain(uv_loop_t *loop, redlock_client *c, unsigned k, unsigned width,
                         double seconds, samples *acquire, uint64_t *failures)
{
    mchain ch;
    memset(&ch, 0, sizeof(ch));
    ch.client = c;
    ch.k = k;
    ch.acquire = acquire;
    ch.running = width;
    static uint64_t next_seq; /* names are never reused, slice after slice */
    ch.seq = next_seq;
    mworker *ws = calloc(width, sizeof(*ws));
    if (ws == NULL)
        exit(1);
    uint64_t start = bench_now_us();
    ch.until_us = start + (uint64_t)(seconds * 1e6);
    for (unsigned i = 0; i < width; i++) {
        ws[i].ch = &ch;
        ws[i].id = i;
        mworker_next(&ws[i]);
    }
    bench_run_until(loop, &ch.done, ch.until_us + 30000000);
    next_seq = ch.seq;
    double elapsed = (double)(bench_now_us() - start) / 1e6;
    free(ws);
    *failures += ch.failures;
    return (double)ch.cycles / elapsed;
}

int bench_multi(bench_config *cfg)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    redlock_client *c = bench_client(cfg, &loop, NULL, 0, NULL);
    uint64_t failures = 0, warm = 0;
    for (unsigned i = 0; i < K_POINTS; i++) /* connections, scripts */
        run_mchain(&loop, c, k_values[i], 1, 0.1, NULL, &warm);

    /* Half of the duration for latency, half for throughput; each slice runs every k, the
     * order rotating slice by slice. */
    samples acq[K_POINTS];
    memset(acq, 0, sizeof(acq));
    double rate[K_POINTS] = {0};
    double slice = cfg->duration_s / (2.0 * SLICES * K_POINTS);
    for (unsigned s = 0; s < SLICES; s++) {
        for (unsigned j = 0; j < K_POINTS; j++) {
            unsigned i = (j + s) % K_POINTS;
            run_mchain(&loop, c, k_values[i], 1, slice, &acq[i], &failures);
        }
    }
    for (unsigned s = 0; s < SLICES; s++) {
        for (unsigned j = 0; j < K_POINTS; j++) {
            unsigned i = (j + s) % K_POINTS;
            rate[i] += run_mchain(&loop, c, k_values[i], WIDTH, slice, NULL, &failures) / SLICES;
        }
    }
    for (unsigned i = 0; i < K_POINTS; i++) {
        percentiles p = samples_percentiles(&acq[i]);
        double of_single = ratio_of(rate[i], rate[0]);
        printf("%-11s %u resource%s: acquire p50 %5llu us p99 %5llu  |  concurrency %u: %8.0f "
               "cycles/s (%8.0f resources/s, %.2f of one resource)\n",
               "multi", k_values[i], k_values[i] == 1 ? " " : "s", (unsigned long long)p.p50,
               (unsigned long long)p.p99, WIDTH, rate[i], rate[i] * k_values[i], of_single);
        if (cfg->json != NULL) {
            json_begin(cfg->json, "multi");
            fprintf(cfg->json, ",\"resources\":%u,\"acquire_us\":", k_values[i]);
            json_percentiles(cfg->json, &p);
            fprintf(cfg->json,
                    ",\"concurrency\":%u,\"cycles_per_s\":%.1f,\"resources_per_s\":%.1f,"
                    "\"of_single\":%.3f,\"failures\":%llu}\n",
                    WIDTH, rate[i], rate[i] * k_values[i], of_single, (unsigned long long)failures);
            fflush(cfg->json);
        }
        samples_free(&acq[i]);
    }
    bench_close(&loop, c);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return failures == 0 ? 0 : -1;
}
