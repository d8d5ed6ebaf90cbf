/* SPDX-License-Identifier: MIT */
/* sc_fencing.c - the fencing scenario: what a fence costs (redlock_lock_opts.fencing: a
 * script instead of a SET, and the commit round where the counters disagree). In one run, slices
 * alternating (plain, fenced, plain, ...) so a machine whose speed drifts favours neither:
 *   - the acquire's latency, one lock at a time;
 *   - lock cycles (acquire + release) per second with 64 in flight, each on a fresh resource, as
 *     in the throughput scenario: no cycle waits for another, and every fenced cycle creates the
 *     counter of a resource never locked before (a key that never expires, which bench/run's
 *     servers forget);
 *   - the same on reused resources: each worker takes its own 64 resources in turn, so the
 *     counters exist (a service locks the same resources over and over) and still no cycle
 *     waits for another (a worker's release has reached every node before it comes back). */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define SLICES 4
#define WIDTH 64
#define REUSED 64

/* width workers, fenced or not, for seconds (reuse: each worker's REUSED resources in turn):
 * cycles per second; acquire latencies to acquire. */
typedef struct fcount {
    uint64_t cycles, fence_missing;
} fcount;

static double run_fchain(uv_loop_t *loop, redlock_client *c, bool fencing, bool reuse,
                         unsigned width, double seconds, samples *acquire, uint64_t *failures,
                         fcount *n)
{
    redlock_lock_opts opts;
    redlock_lock_opts_init(&opts);
    opts.fencing = fencing;
    bench_chain_spec spec = {
        .opts = &opts,
        .reuse = reuse ? REUSED : 0,
        .tag = fencing ? (reuse ? "fencing:f:reused" : "fencing:f")
                       : (reuse ? "fencing:p:reused" : "fencing:p"),
    };
    return bench_chain_spec_count(loop, c, width, seconds, &spec, acquire, NULL, failures,
                                  &n->cycles, &n->fence_missing);
}

int bench_fencing(bench_config *cfg)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    redlock_client *c = bench_client(cfg, &loop, NULL, 0, NULL);
    uint64_t failures = 0, warm = 0;
    fcount n = {0, 0}, warm_n = {0, 0};
    run_fchain(&loop, c, false, false, 1, 0.2, NULL, &warm, &warm_n); /* connections, scripts */
    run_fchain(&loop, c, true, false, 1, 0.2, NULL, &warm, &warm_n);
    n.fence_missing = warm_n.fence_missing; /* a lock without its fence counts, warm or not */
    bench_causes_clear();                   /* a warm-up's other failures are no row's */

    /* A third of the duration each: latency (one acquire at a time, fresh resources), then
     * throughput on fresh resources, then on reused ones. */
    samples fenced_acq = {0}, plain_acq = {0};
    double slice = cfg->duration_s / (6 * SLICES);
    for (int i = 0; i < SLICES; i++) {
        run_fchain(&loop, c, false, false, 1, slice, &plain_acq, &failures, &n);
        run_fchain(&loop, c, true, false, 1, slice, &fenced_acq, &failures, &n);
    }
    double fenced_rate = 0, plain_rate = 0, reused_fenced_rate = 0, reused_plain_rate = 0;
    uint64_t plain_failures = 0;
    for (int reuse = 0; reuse <= 1; reuse++) {
        double *p = reuse ? &reused_plain_rate : &plain_rate;
        double *f = reuse ? &reused_fenced_rate : &fenced_rate;
        for (int i = 0; i < SLICES; i++) {
            *p += run_fchain(&loop, c, false, reuse, WIDTH, slice, NULL, &plain_failures, &n) /
                  SLICES;
            *f += run_fchain(&loop, c, true, reuse, WIDTH, slice, NULL, &failures, &n) / SLICES;
        }
    }
    failures += plain_failures;
    percentiles pf = samples_percentiles(&fenced_acq), pp = samples_percentiles(&plain_acq);
    double acquire_ratio = pp.p50 != 0 ? (double)pf.p50 / (double)pp.p50 : 0;
    double ratio = ratio_of(fenced_rate, plain_rate);
    double reused_ratio = ratio_of(reused_fenced_rate, reused_plain_rate);
    printf("%-11s acquire p50 %5llu us p99 %5llu | plain p50 %5llu us p99 %5llu | ratio %.2f\n",
           "fencing", (unsigned long long)pf.p50, (unsigned long long)pf.p99,
           (unsigned long long)pp.p50, (unsigned long long)pp.p99, acquire_ratio);
    printf("%-11s %3u in flight: %7.0f cycles/s, plain %7.0f: ratio %.2f\n", "fencing", WIDTH,
           fenced_rate, plain_rate, ratio);
    printf("%-11s %3u in flight, %u names each: %7.0f cycles/s, plain %7.0f: ratio %.2f\n",
           "fencing", WIDTH, REUSED, reused_fenced_rate, reused_plain_rate, reused_ratio);
    bench_row_failures(cfg, "fencing", "all rows", failures, n.cycles);
    if (n.fence_missing > 0)
        bench_broken(cfg, "fencing", "%llu fenced locks granted without a fence",
                     (unsigned long long)n.fence_missing);
    if (cfg->json != NULL) {
        json_begin(cfg->json, "fencing");
        fprintf(cfg->json, ",\"acquire_us\":");
        json_percentiles(cfg->json, &pf);
        fprintf(cfg->json, ",\"plain_acquire_us\":");
        json_percentiles(cfg->json, &pp);
        fprintf(cfg->json,
                ",\"acquire_ratio_p50\":%.3f,\"concurrency\":%u,\"cycles_per_s\":%.1f,"
                "\"plain_cycles_per_s\":%.1f,\"ratio\":%.3f,\"reused_cycles_per_s\":%.1f,"
                "\"reused_plain_cycles_per_s\":%.1f,\"reused_ratio\":%.3f,\"failures\":%llu}\n",
                acquire_ratio, WIDTH, fenced_rate, plain_rate, ratio, reused_fenced_rate,
                reused_plain_rate, reused_ratio, (unsigned long long)failures);
        fflush(cfg->json);
    }
    samples_free(&fenced_acq);
    samples_free(&plain_acq);
    bench_close(&loop, c);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return 0;
}
