/* SPDX-License-Identifier: MIT */
/* sc_scale.c - the scale scenario: how a lock's cost grows with the number of nodes.
 *
 * For N = 1, 3, 5, 7 and 9 (the first N of --scale-nodes; bench/run starts nine servers for it),
 * a client of N nodes and the raw fan-out (raw.h) on the same N nodes, in balanced alternating
 * slices as in sc_speed.c: first one lock at a time (the acquire's latency), then 64 cycles in
 * flight (cycles per second). Each side's cpu_us_per_cycle is the bench process's CPU time, user +
 * system (getrusage), over its 64-in-flight slices, divided by the cycles they finished: what a
 * lock cycle costs the client as the nodes grow, next to what the same commands cost a
 * hand-written fan-out. */
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "raw.h"

#define SLICES 4 /* per side and phase */
#define WIDTH 64 /* cycles in flight in the cycles-per-second phase */

static const unsigned node_counts[BENCH_SCALE_POINTS] = {1, 3, 5, 7, 9};

enum { LOCK, RAW };

/* One N: its table row and JSON line (failed cycles under it); 0, or -1 when raw could not
 * start. */
static int scale_one(bench_config *cfg, const char *const *urls, unsigned n, unsigned point)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    redlock_client *client = bench_client(cfg, &loop, urls, n, NULL);
    char err[256];
    raw *r = raw_new(&loop, urls, n, err, sizeof(err));
    if (r == NULL) {
        fprintf(stderr, "redlock-bench: scale: raw fan-out: %s\n", err);
        bench_close(&loop, client);
        uv_loop_close(&loop);
        return -1;
    }
    /* Warm-up: connections made, scripts loaded, buffers grown. */
    bench_side warm[2] = {{.client = client}, {.raw = r}};
    bench_side_run(&loop, &warm[LOCK], 1, 0.1);
    bench_side_run(&loop, &warm[RAW], 1, 0.1);
    bench_side_run(&loop, &warm[LOCK], WIDTH, 0.1);
    bench_side_run(&loop, &warm[RAW], WIDTH, 0.1);
    bench_causes_clear(); /* a warm-up's failures are no row's */

    double slice = cfg->duration_s / 2 / (2 * SLICES);
    samples acq = {0}, cyc = {0}, raw_acq = {0}, raw_cyc = {0};
    bench_side one[2] = {{.client = client, .acquire = &acq, .cycle = &cyc},
                         {.raw = r, .acquire = &raw_acq, .cycle = &raw_cyc}};
    for (unsigned k = 0; k < 2 * SLICES; k++)
        bench_side_run(&loop, &one[bench_slice_side(k, 2)], 1, slice);

    bench_side many[2] = {{.client = client}, {.raw = r}};
    double rates[2][SLICES], sorted[2][SLICES];
    unsigned done[2] = {0, 0};
    for (unsigned k = 0; k < 2 * SLICES; k++) {
        unsigned side = bench_slice_side(k, 2);
        rates[side][done[side]++] = bench_side_run(&loop, &many[side], WIDTH, slice);
    }
    memcpy(sorted, rates, sizeof(sorted));
    double lock_rate = median_of(sorted[LOCK], SLICES), raw_rate = median_of(sorted[RAW], SLICES);
    double cpu = ratio_of((double)many[LOCK].cpu_us, (double)many[LOCK].cycles);
    double raw_cpu = ratio_of((double)many[RAW].cpu_us, (double)many[RAW].cycles);
    uint64_t failures = one[LOCK].failures + many[LOCK].failures;
    uint64_t raw_lost = one[RAW].failures + many[RAW].failures;
    percentiles pa = samples_percentiles(&acq), pc = samples_percentiles(&cyc),
                pra = samples_percentiles(&raw_acq), prc = samples_percentiles(&raw_cyc);

    printf("%-11s %u nodes: acquire p50 %4llu us (raw %4llu) | %u in flight: %6.0f cycles/s, "
           "ratio %.2f\n",
           "scale", n, (unsigned long long)pa.p50, (unsigned long long)pra.p50, WIDTH, lock_rate,
           ratio_of(lock_rate, raw_rate));
    char row[48];
    snprintf(row, sizeof(row), "%u nodes", n);
    bench_row_failures(cfg, "scale", row, failures + raw_lost,
                       one[LOCK].cycles + many[LOCK].cycles + one[RAW].cycles + many[RAW].cycles);
    if (cfg->json != NULL) {
        FILE *f = cfg->json;
        json_begin(f, "scale");
        fprintf(f, ",\"nodes\":%u,\"quorum\":%u,\"raw_wait\":\"%s\",\"acquire_us\":", n,
                redlock_quorum_of(n), raw_wait_name(RAW_WAIT_QUORUM));
        json_percentiles(f, &pa);
        fprintf(f, ",\"raw_acquire_us\":");
        json_percentiles(f, &pra);
        fprintf(f, ",\"cycle_us\":");
        json_percentiles(f, &pc);
        fprintf(f, ",\"raw_cycle_us\":");
        json_percentiles(f, &prc);
        fprintf(f,
                ",\"in_flight\":%u,\"cycles_per_s\":%.1f,\"raw_cycles_per_s\":%.1f,\"ratio\":%.3f,"
                "\"slices\":",
                WIDTH, lock_rate, raw_rate, ratio_of(lock_rate, raw_rate));
        json_doubles(f, rates[LOCK], SLICES);
        fprintf(f, ",\"raw_slices\":");
        json_doubles(f, rates[RAW], SLICES);
        fprintf(f,
                ",\"cpu_us_per_cycle\":%.2f,\"raw_cpu_us_per_cycle\":%.2f,\"cpu_ratio\":%.3f,"
                "\"failures\":%llu,\"raw_lost\":%llu}\n",
                cpu, raw_cpu, ratio_of(cpu, raw_cpu), (unsigned long long)failures,
                (unsigned long long)raw_lost);
        fflush(f);
    }
    cfg->scale_nodes[point] = n;
    cfg->scale_lock[point] = lock_rate;
    cfg->scale_raw[point] = raw_rate;
    cfg->scale_points = point + 1;

    samples_free(&acq);
    samples_free(&cyc);
    samples_free(&raw_acq);
    samples_free(&raw_cyc);
    raw_free(r);
    bench_close(&loop, client);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return 0;
}

int bench_scale(bench_config *cfg)
{
    const char *const *urls = cfg->n_scale > 0 ? cfg->scale_urls : cfg->urls;
    unsigned have = cfg->n_scale > 0 ? cfg->n_scale : cfg->n_nodes;
    unsigned largest = node_counts[BENCH_SCALE_POINTS - 1];
    if (have < largest)
        printf("%-11s %u nodes given (--scale-nodes names up to %u; bench/run starts them): "
               "larger N not measured\n",
               "scale", have, largest);
    int rc = 0;
    cfg->scale_points = 0;
    for (unsigned i = 0; i < BENCH_SCALE_POINTS && node_counts[i] <= have; i++)
        if (scale_one(cfg, urls, node_counts[i], cfg->scale_points) != 0)
            rc = -1;
    return rc;
}
