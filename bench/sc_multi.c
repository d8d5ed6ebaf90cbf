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

static const unsigned k_values[K_POINTS] = {1, 2, 4, 8};

/* width workers on sets of k fresh resources for seconds: cycles per second; acquire latencies
 * to acquire. */
static double run_mchain(uv_loop_t *loop, redlock_client *c, unsigned k, unsigned width,
                         double seconds, samples *acquire, uint64_t *failures, uint64_t *cycles)
{
    bench_chain_spec spec = {.resources = k, .tag = "multi"};
    return bench_chain_spec_count(loop, c, width, seconds, &spec, acquire, NULL, failures, cycles,
                                  NULL);
}

int bench_multi(bench_config *cfg)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    redlock_client *c = bench_client(cfg, &loop, NULL, 0, NULL);
    uint64_t failures = 0, warm = 0, cycles = 0;
    for (unsigned i = 0; i < K_POINTS; i++) /* connections, scripts */
        run_mchain(&loop, c, k_values[i], 1, 0.1, NULL, &warm, NULL);
    bench_causes_clear(); /* a warm-up's failures are no row's */

    /* Half of the duration for latency, half for throughput; each slice runs every k, the
     * order rotating slice by slice. */
    samples acq[K_POINTS];
    memset(acq, 0, sizeof(acq));
    double rate[K_POINTS] = {0};
    double slice = cfg->duration_s / (2.0 * SLICES * K_POINTS);
    for (unsigned s = 0; s < SLICES; s++) {
        for (unsigned j = 0; j < K_POINTS; j++) {
            unsigned i = (j + s) % K_POINTS;
            run_mchain(&loop, c, k_values[i], 1, slice, &acq[i], &failures, &cycles);
        }
    }
    for (unsigned s = 0; s < SLICES; s++) {
        for (unsigned j = 0; j < K_POINTS; j++) {
            unsigned i = (j + s) % K_POINTS;
            rate[i] +=
                run_mchain(&loop, c, k_values[i], WIDTH, slice, NULL, &failures, &cycles) / SLICES;
        }
    }
    for (unsigned i = 0; i < K_POINTS; i++) {
        percentiles p = samples_percentiles(&acq[i]);
        double of_single = ratio_of(rate[i], rate[0]);
        printf("%-11s %u resource%s: acquire p50 %5llu us p99 %5llu | %u in flight: %6.0f "
               "cycles/s, %.2f of one\n",
               "multi", k_values[i], k_values[i] == 1 ? " " : "s", (unsigned long long)p.p50,
               (unsigned long long)p.p99, WIDTH, rate[i], of_single);
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
    bench_row_failures(cfg, "multi", "all rows", failures, cycles);
    return 0;
}
