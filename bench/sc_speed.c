/* sc_speed.c - the latency and throughput scenarios: lock cycles (acquire + release) on
 * distinct resources, each measured next to the raw fan-out on the same nodes.
 *
 * Both alternate lock and raw slices (lock, raw, lock, raw) so that a machine whose speed
 * drifts during the run does not favour either side. */
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "raw.h"

#define SLICES 2

/* ---- chains: `width` independent workers, each doing cycles back to back -------------------- */

typedef struct chain chain;

typedef struct worker {
    chain *ch;
    unsigned id;
    uint64_t t0, t1;
    char name[64];
} worker;

struct chain {
    redlock_client *client; /* NULL: raw */
    raw *raw;
    uint64_t until_us;
    unsigned width, running;
    uint64_t cycles, failures, seq;
    samples *acquire, *release, *cycle; /* may be NULL */
    bool done;
    worker *workers;
};

static void worker_next(worker *w);

static void on_raw_done(void *data, uint64_t set_us, uint64_t cycle_us)
{
    worker *w = data;
    chain *ch = w->ch;
    ch->cycles++;
    if (ch->acquire != NULL)
        samples_add(ch->acquire, set_us);
    if (ch->cycle != NULL)
        samples_add(ch->cycle, cycle_us);
    worker_next(w);
}

static void on_released(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)result;
    worker *w = data;
    chain *ch = w->ch;
    uint64_t now = bench_now_us();
    if (status != 0)
        ch->failures++;
    ch->cycles++;
    if (ch->release != NULL)
        samples_add(ch->release, now - w->t1);
    if (ch->cycle != NULL)
        samples_add(ch->cycle, now - w->t0);
    redlock_lock_free(lock);
    worker_next(w);
}

static void on_acquired(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)result;
    worker *w = data;
    chain *ch = w->ch;
    w->t1 = bench_now_us();
    if (status != 0) {
        ch->failures++;
        worker_next(w);
        return;
    }
    if (ch->acquire != NULL)
        samples_add(ch->acquire, w->t1 - w->t0);
    if (redlock_release(lock, on_released, w) != 0) {
        ch->failures++;
        redlock_lock_free(lock);
        worker_next(w);
    }
}

static void worker_next(worker *w)
{
    chain *ch = w->ch;
    if (bench_now_us() >= ch->until_us) {
        if (--ch->running == 0)
            ch->done = true;
        return;
    }
    int len =
        snprintf(w->name, sizeof(w->name), "bench:%u:%llu", w->id, (unsigned long long)ch->seq++);
    w->t0 = bench_now_us();
    if (ch->client == NULL) {
        raw_cycle(ch->raw, w->name, 10000, on_raw_done, w);
        return;
    }
    if (redlock_acquire(ch->client, w->name, (size_t)len, 0, NULL, on_acquired, w) != 0) {
        ch->failures++;
        if (--ch->running == 0)
            ch->done = true;
    }
}

/* Run width workers for seconds; returns cycles per second. */
static double run_chain(uv_loop_t *loop, chain *ch, unsigned width, double seconds)
{
    ch->width = ch->running = width;
    ch->done = false;
    ch->cycles = 0;
    ch->workers = calloc(width, sizeof(worker));
    uint64_t start = bench_now_us();
    ch->until_us = start + (uint64_t)(seconds * 1e6);
    for (unsigned i = 0; i < width; i++) {
        ch->workers[i].ch = ch;
        ch->workers[i].id = i;
        worker_next(&ch->workers[i]);
    }
    bench_run_until(loop, &ch->done, ch->until_us + 30000000);
    double elapsed = (double)(bench_now_us() - start) / 1e6;
    free(ch->workers);
    return (double)ch->cycles / elapsed;
}

static void warm_up(uv_loop_t *loop, redlock_client *c, raw *r)
{
    chain ch;
    memset(&ch, 0, sizeof(ch));
    ch.client = c;
    run_chain(loop, &ch, 1, 0.2);
    ch.client = NULL;
    ch.raw = r;
    run_chain(loop, &ch, 1, 0.2);
}

/* A loop with a warmed-up client and raw fan-out on it. */
typedef struct speed_env {
    uv_loop_t loop;
    redlock_client *client;
    raw *raw;
} speed_env;

static int speed_start(bench_config *cfg, speed_env *e)
{
    uv_loop_init(&e->loop);
    e->client = bench_client(cfg, &e->loop, NULL, 0, NULL);
    e->raw = raw_new(&e->loop, cfg->urls, cfg->n_nodes);
    if (e->raw == NULL) {
        bench_close(&e->loop, e->client);
        uv_loop_close(&e->loop);
        return -1;
    }
    warm_up(&e->loop, e->client, e->raw);
    return 0;
}

static void speed_stop(speed_env *e)
{
    raw_free(e->raw);
    bench_close(&e->loop, e->client);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    uv_loop_close(&e->loop);
}

double bench_chain(uv_loop_t *loop, redlock_client *client, unsigned width, double seconds,
                   samples *cycle, uint64_t *failures)
{
    chain ch;
    memset(&ch, 0, sizeof(ch));
    ch.client = client;
    ch.cycle = cycle;
    double rate = run_chain(loop, &ch, width, seconds);
    *failures += ch.failures;
    return rate;
}

/* ---- latency ------------------------------------------------------------------------------- */

int bench_latency(bench_config *cfg)
{
    speed_env e;
    if (speed_start(cfg, &e) != 0)
        return -1;
    samples acq = {0}, rel = {0}, cyc = {0}, raw_set = {0}, raw_cyc = {0};
    chain lock_ch, raw_ch;
    memset(&lock_ch, 0, sizeof(lock_ch));
    memset(&raw_ch, 0, sizeof(raw_ch));
    lock_ch.client = e.client;
    lock_ch.acquire = &acq;
    lock_ch.release = &rel;
    lock_ch.cycle = &cyc;
    raw_ch.raw = e.raw;
    raw_ch.acquire = &raw_set;
    raw_ch.cycle = &raw_cyc;
    double slice = cfg->duration_s / (2 * SLICES);
    for (int i = 0; i < SLICES; i++) {
        run_chain(&e.loop, &lock_ch, 1, slice);
        run_chain(&e.loop, &raw_ch, 1, slice);
    }
    /* Keep the raw samples for the plot before percentiles sort them (sorting is harmless). */
    percentiles pa = samples_percentiles(&acq), pr = samples_percentiles(&rel),
                pc = samples_percentiles(&cyc), prs = samples_percentiles(&raw_set),
                prc = samples_percentiles(&raw_cyc);
    double ratio_p50 = prc.p50 != 0 ? (double)pc.p50 / (double)prc.p50 : 0;
    double ratio_p99 = prc.p99 != 0 ? (double)pc.p99 / (double)prc.p99 : 0;
    printf("%-11s acquire p50 %6llu us  release p50 %6llu  cycle p50 %6llu p99 %6llu  |  raw "
           "cycle p50 %6llu p99 %6llu  |  ratio p50 %.2f p99 %.2f  (%zu cycles, %llu failed)\n",
           "latency", (unsigned long long)pa.p50, (unsigned long long)pr.p50,
           (unsigned long long)pc.p50, (unsigned long long)pc.p99, (unsigned long long)prc.p50,
           (unsigned long long)prc.p99, ratio_p50, ratio_p99, pc.n,
           (unsigned long long)lock_ch.failures);
    if (cfg->json != NULL) {
        FILE *f = cfg->json;
        fprintf(f, "{\"scenario\":\"latency\",\"acquire_us\":");
        json_percentiles(f, &pa);
        fprintf(f, ",\"release_us\":");
        json_percentiles(f, &pr);
        fprintf(f, ",\"cycle_us\":");
        json_percentiles(f, &pc);
        fprintf(f, ",\"raw_set_us\":");
        json_percentiles(f, &prs);
        fprintf(f, ",\"raw_cycle_us\":");
        json_percentiles(f, &prc);
        fprintf(f, ",\"ratio_p50\":%.3f,\"ratio_p99\":%.3f,\"failures\":%llu}\n", ratio_p50,
                ratio_p99, (unsigned long long)lock_ch.failures);
        fflush(f);
    }
    samples_free(&cfg->plot_cycle);
    samples_free(&cfg->plot_raw_cycle);
    cfg->plot_cycle = cyc;
    cfg->plot_raw_cycle = raw_cyc;
    samples_free(&acq);
    samples_free(&rel);
    samples_free(&raw_set);
    speed_stop(&e);
    return lock_ch.failures == 0 ? 0 : -1;
}

/* ---- throughput ---------------------------------------------------------------------------- */

int bench_throughput(bench_config *cfg)
{
    static const unsigned levels[BENCH_TP_POINTS] = {1, 16, 64, 256};
    speed_env e;
    if (speed_start(cfg, &e) != 0)
        return -1;
    int rc = 0;
    cfg->tp_points = 0;
    for (unsigned l = 0; l < BENCH_TP_POINTS; l++) {
        chain lock_ch, raw_ch;
        memset(&lock_ch, 0, sizeof(lock_ch));
        memset(&raw_ch, 0, sizeof(raw_ch));
        lock_ch.client = e.client;
        raw_ch.raw = e.raw;
        double slice = cfg->duration_s / (2 * SLICES);
        double lock_rate = 0, raw_rate = 0;
        for (int i = 0; i < SLICES; i++) {
            lock_rate += run_chain(&e.loop, &lock_ch, levels[l], slice) / SLICES;
            raw_rate += run_chain(&e.loop, &raw_ch, levels[l], slice) / SLICES;
        }
        double ratio = raw_rate > 0 ? lock_rate / raw_rate : 0;
        printf("%-11s concurrency %3u: %8.0f cycles/s  |  raw %8.0f cycles/s  |  ratio %.2f  "
               "(%llu failed)\n",
               "throughput", levels[l], lock_rate, raw_rate, ratio,
               (unsigned long long)lock_ch.failures);
        if (cfg->json != NULL) {
            fprintf(cfg->json,
                    "{\"scenario\":\"throughput\",\"concurrency\":%u,\"cycles_per_s\":%.1f,"
                    "\"raw_cycles_per_s\":%.1f,\"ratio\":%.3f,\"failures\":%llu}\n",
                    levels[l], lock_rate, raw_rate, ratio, (unsigned long long)lock_ch.failures);
            fflush(cfg->json);
        }
        cfg->tp_concurrency[l] = levels[l];
        cfg->tp_lock[l] = lock_rate;
        cfg->tp_raw[l] = raw_rate;
        cfg->tp_points = l + 1;
        if (lock_ch.failures != 0)
            rc = -1;
    }
    speed_stop(&e);
    return rc;
}
