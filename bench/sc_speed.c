/* SPDX-License-Identifier: MIT */
/* sc_speed.c - the latency and throughput scenarios: lock cycles (acquire + release) on
 * distinct resources, each measured next to the raw fan-out (raw.h) on the same nodes.
 *
 * Each side runs in SLICES slices per figure, in a balanced alternating order (L R R L L R R L),
 * so a machine whose speed drifts during the run favours neither side and no side always goes
 * first; every slice's rate is reported, so the spread shows. Each side's CPU time (getrusage of
 * the bench process over its slices) divided by its cycles is its cpu_us_per_cycle: what a lock
 * cycle costs the client, next to what the same commands cost a hand-written one. The throughput
 * rows also say what fraction of the servers' own capacity the cycles reach (of_limit): the
 * limit's pipelined commands (sc_limit.c) run as a third side, in slices alternating with the
 * row's lock and raw slices, so that a load that comes and goes on the machine weighs on the
 * limit as it weighs on the cycles. */
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "raw.h"
#include "scripts.h"

#define SLICES 4 /* per side */

/* ---- chains: `width` independent workers, each doing cycles back to back -------------------- */

typedef struct chain chain;

typedef struct worker {
    chain *ch;
    unsigned id;
    uint64_t t0, t1;
    char names[BENCH_CHAIN_RESOURCES_MAX][64]; /* the resources of its current cycle */
    const void *res[BENCH_CHAIN_RESOURCES_MAX];
    size_t lens[BENCH_CHAIN_RESOURCES_MAX];
} worker;

struct chain {
    redlock_client *client; /* NULL: raw */
    raw *raw;
    raw_wait raw_wait;
    uint64_t until_us;
    unsigned width, running;
    uint64_t cycles, failures, seq;
    uint64_t fence_missing;             /* fenced locks granted without a fence (also failures) */
    uint64_t cycles_all, cpu_us;        /* over every run of this chain */
    samples *acquire, *release, *cycle; /* may be NULL */
    bool done;
    worker *workers;
    bench_chain_spec spec; /* what the library's cycles lock (zero: one fresh resource, no opts) */
};

static void worker_next(worker *w);

static void on_raw_done(void *data, int won, uint64_t set_us, uint64_t release_us)
{
    worker *w = data;
    chain *ch = w->ch;
    ch->cycles++;
    if (!won) {
        ch->failures++;
        bench_cause_text("raw fan-out: not won at the quorum");
    }
    if (ch->acquire != NULL)
        samples_add(ch->acquire, set_us);
    if (ch->release != NULL)
        samples_add(ch->release, release_us);
    if (ch->cycle != NULL)
        samples_add(ch->cycle, set_us + release_us);
    worker_next(w);
}

static void on_released(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    worker *w = data;
    chain *ch = w->ch;
    uint64_t now = bench_now_us();
    if (status != 0) {
        ch->failures++;
        bench_cause(status, result);
    }
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
    worker *w = data;
    chain *ch = w->ch;
    w->t1 = bench_now_us();
    bool fence_missing =
        ch->spec.opts != NULL && ch->spec.opts->fencing && status == 0 && result->fence == 0;
    if (status != 0 || fence_missing) { /* a lock without its fence counts as failed */
        ch->failures++;
        if (fence_missing) {
            ch->fence_missing++;
            bench_cause_text("granted without a fence");
        } else {
            bench_cause(status, result);
        }
        if (lock != NULL)
            redlock_lock_free(lock);
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
    /* Fresh names, or with spec.reuse each worker's own ones in turn. */
    const bench_chain_spec *sp = &ch->spec;
    unsigned long long seq = (unsigned long long)ch->seq++;
    if (sp->reuse > 0)
        seq %= sp->reuse;
    unsigned k = sp->resources > 0 ? sp->resources : 1;
    for (unsigned j = 0; j < k; j++) {
        int len =
            snprintf(w->names[j], sizeof(w->names[j]), "bench:%s%s%u:%llu:%u",
                     sp->tag != NULL ? sp->tag : "", sp->tag != NULL ? ":" : "", w->id, seq, j);
        w->res[j] = w->names[j];
        w->lens[j] = (size_t)len;
    }
    w->t0 = bench_now_us();
    if (ch->client == NULL) {
        raw_cycle(ch->raw, w->names[0], w->lens[0], 10000, ch->raw_wait, on_raw_done, w);
        return;
    }
    if (redlock_acquire_multi(ch->client, w->res, w->lens, k, 0, sp->opts, on_acquired, w) != 0) {
        ch->failures++;
        if (--ch->running == 0)
            ch->done = true;
    }
}

/* Run width workers for seconds; returns cycles per second (cycles finished, over the time until
 * the last one finished). */
static double run_chain(uv_loop_t *loop, chain *ch, unsigned width, double seconds)
{
    ch->width = ch->running = width;
    ch->done = false;
    ch->cycles = 0;
    ch->workers = calloc(width, sizeof(worker));
    uint64_t cpu0 = bench_cpu_us();
    uint64_t start = bench_now_us();
    ch->until_us = start + (uint64_t)(seconds * 1e6);
    for (unsigned i = 0; i < width; i++) {
        ch->workers[i].ch = ch;
        ch->workers[i].id = i;
        worker_next(&ch->workers[i]);
    }
    bench_run_until(loop, &ch->done, ch->until_us + 30000000);
    double elapsed = (double)(bench_now_us() - start) / 1e6;
    ch->cpu_us += bench_cpu_us() - cpu0;
    ch->cycles_all += ch->cycles;
    free(ch->workers);
    return (double)ch->cycles / elapsed;
}

/* Slice k of a balanced alternation of sides sides: the order of round k/sides is reversed on
 * every other round (L R, R L, L R, ...; with three: L R A, A R L, ...). */
unsigned bench_slice_side(unsigned k, unsigned sides)
{
    unsigned round = k / sides, pos = k % sides;
    return round % 2 == 0 ? pos : sides - 1 - pos;
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
    bench_causes_clear(); /* a warm-up's failures are no row's */
}

/* A loop with a warmed-up client and raw fan-out on it. */
typedef struct speed_env {
    uv_loop_t loop;
    redlock_client *client;
    raw *raw;
} speed_env;

static void speed_stop(speed_env *e);

static int speed_start(bench_config *cfg, speed_env *e)
{
    uv_loop_init(&e->loop);
    e->client = bench_client(cfg, &e->loop, NULL, 0, NULL);
    char err[256];
    e->raw = raw_new(&e->loop, cfg->urls, cfg->n_nodes, err, sizeof(err));
    if (e->raw == NULL) {
        fprintf(stderr, "redlock-bench: raw fan-out: %s\n", err);
        bench_close(&e->loop, e->client);
        uv_loop_close(&e->loop);
        return -1;
    }
    /* The baseline must make the servers do what the library makes them do. */
    if (strcmp(raw_release_sha1(e->raw), redlock__script_release.sha1) != 0) {
        fprintf(stderr, "redlock-bench: the raw fan-out's release script is not the library's\n");
        speed_stop(e);
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
    return bench_chain_spec_run(loop, client, width, seconds, NULL, NULL, cycle, failures);
}

double bench_chain_spec_run(uv_loop_t *loop, redlock_client *client, unsigned width, double seconds,
                            const bench_chain_spec *spec, samples *acquire, samples *cycle,
                            uint64_t *failures)
{
    return bench_chain_spec_count(loop, client, width, seconds, spec, acquire, cycle, failures,
                                  NULL, NULL);
}

double bench_chain_spec_count(uv_loop_t *loop, redlock_client *client, unsigned width,
                              double seconds, const bench_chain_spec *spec, samples *acquire,
                              samples *cycle, uint64_t *failures, uint64_t *cycles,
                              uint64_t *fence_missing)
{
    chain ch;
    memset(&ch, 0, sizeof(ch));
    ch.client = client;
    ch.acquire = acquire;
    ch.cycle = cycle;
    if (spec != NULL)
        ch.spec = *spec;
    /* Fresh names are never reused, run after run (reused ones come back by design). */
    static uint64_t next_seq;
    if (ch.spec.reuse == 0)
        ch.seq = next_seq;
    double rate = run_chain(loop, &ch, width, seconds);
    if (ch.spec.reuse == 0)
        next_seq = ch.seq;
    *failures += ch.failures;
    if (cycles != NULL)
        *cycles += ch.cycles;
    if (fence_missing != NULL)
        *fence_missing += ch.fence_missing;
    return rate;
}

double bench_side_run(uv_loop_t *loop, bench_side *side, unsigned width, double seconds)
{
    chain ch;
    memset(&ch, 0, sizeof(ch));
    ch.client = side->client;
    ch.raw = side->raw;
    ch.raw_wait = RAW_WAIT_QUORUM;
    ch.acquire = side->acquire;
    ch.cycle = side->cycle;
    double rate = run_chain(loop, &ch, width, seconds);
    side->cycles += ch.cycles;
    side->failures += ch.failures;
    side->cpu_us += ch.cpu_us;
    return rate;
}

/* ---- latency ------------------------------------------------------------------------------- */

enum { SIDE_LOCK, SIDE_RAW, SIDE_RAW_ALL, SIDES };

int bench_latency(bench_config *cfg)
{
    speed_env e;
    if (speed_start(cfg, &e) != 0)
        return -1;
    samples acq = {0}, rel = {0}, cyc = {0}, raw_set = {0}, raw_rel = {0}, raw_cyc = {0},
            all_cyc = {0};
    chain ch[SIDES];
    memset(ch, 0, sizeof(ch));
    ch[SIDE_LOCK].client = e.client;
    ch[SIDE_LOCK].acquire = &acq;
    ch[SIDE_LOCK].release = &rel;
    ch[SIDE_LOCK].cycle = &cyc;
    ch[SIDE_RAW].raw = e.raw;
    ch[SIDE_RAW].raw_wait = RAW_WAIT_QUORUM;
    ch[SIDE_RAW].acquire = &raw_set;
    ch[SIDE_RAW].release = &raw_rel;
    ch[SIDE_RAW].cycle = &raw_cyc;
    ch[SIDE_RAW_ALL].raw = e.raw;
    ch[SIDE_RAW_ALL].raw_wait = RAW_WAIT_ALL;
    ch[SIDE_RAW_ALL].cycle = &all_cyc;
    double slice = cfg->duration_s / (SIDES * SLICES);
    for (unsigned k = 0; k < SIDES * SLICES; k++)
        run_chain(&e.loop, &ch[bench_slice_side(k, SIDES)], 1, slice);
    percentiles pa = samples_percentiles(&acq), pr = samples_percentiles(&rel),
                pc = samples_percentiles(&cyc), prs = samples_percentiles(&raw_set),
                prr = samples_percentiles(&raw_rel), prc = samples_percentiles(&raw_cyc),
                pall = samples_percentiles(&all_cyc);
    double ratio_p50 = ratio_of((double)pc.p50, (double)prc.p50);
    double ratio_p99 = ratio_of((double)pc.p99, (double)prc.p99);
    uint64_t failures = ch[SIDE_LOCK].failures, raw_lost = ch[SIDE_RAW].failures;
    printf("%-11s cycle p50 %5llu us p99 %6llu | raw p50 %5llu p99 %6llu | ratio %.2f, p99 %.2f\n",
           "latency", (unsigned long long)pc.p50, (unsigned long long)pc.p99,
           (unsigned long long)prc.p50, (unsigned long long)prc.p99, ratio_p50, ratio_p99);
    bench_row_failures(cfg, "latency", "one at a time", failures + raw_lost,
                       ch[SIDE_LOCK].cycles_all + ch[SIDE_RAW].cycles_all);
    if (cfg->json != NULL) {
        FILE *f = cfg->json;
        json_begin(f, "latency");
        fprintf(f, ",\"raw_wait\":\"%s\",\"in_flight\":1,\"acquire_us\":",
                raw_wait_name(RAW_WAIT_QUORUM));
        json_percentiles(f, &pa);
        fprintf(f, ",\"release_us\":");
        json_percentiles(f, &pr);
        fprintf(f, ",\"cycle_us\":");
        json_percentiles(f, &pc);
        fprintf(f, ",\"raw_set_us\":");
        json_percentiles(f, &prs);
        fprintf(f, ",\"raw_release_us\":");
        json_percentiles(f, &prr);
        fprintf(f, ",\"raw_cycle_us\":");
        json_percentiles(f, &prc);
        fprintf(f, ",\"raw_all_cycle_us\":");
        json_percentiles(f, &pall);
        fprintf(f,
                ",\"ratio_p50\":%.3f,\"ratio_p99\":%.3f,\"slices_per_side\":%d,\"failures\":%llu,"
                "\"raw_lost\":%llu}\n",
                ratio_p50, ratio_p99, SLICES, (unsigned long long)failures,
                (unsigned long long)raw_lost);
        fflush(f);
    }
    samples_free(&cfg->plot_cycle);
    samples_free(&cfg->plot_raw_cycle);
    cfg->plot_cycle = cyc;
    cfg->plot_raw_cycle = raw_cyc;
    samples_free(&acq);
    samples_free(&rel);
    samples_free(&raw_set);
    samples_free(&raw_rel);
    samples_free(&all_cyc);
    speed_stop(&e);
    return 0;
}

/* ---- throughput ---------------------------------------------------------------------------- */

int bench_throughput(bench_config *cfg)
{
    static const unsigned levels[BENCH_TP_POINTS] = {1, 16, 64, 256, 1024};
    int rc = 0;
    /* The limit's connections, opened before any lock connection exists. NULL (TLS nodes, or an
     * error, said): the rows have no of_limit. */
    int limit_rc;
    limit_run *lim = bench_limit_open(cfg, &limit_rc);
    if (limit_rc < 0)
        rc = -1;
    speed_env e;
    if (speed_start(cfg, &e) != 0) {
        bench_limit_close(lim);
        return -1;
    }
    cfg->tp_points = 0;
    for (unsigned l = 0; l < BENCH_TP_POINTS; l++) {
        samples cyc = {0}, raw_cyc = {0};
        chain ch[2];
        memset(ch, 0, sizeof(ch));
        ch[0].client = e.client;
        ch[0].cycle = &cyc;
        ch[1].raw = e.raw;
        ch[1].raw_wait = RAW_WAIT_QUORUM;
        ch[1].cycle = &raw_cyc;
        /* Sides: 0 lock, 1 raw, 2 the limit (when measured). */
        unsigned sides = lim != NULL ? 3 : 2;
        double rates[3][SLICES] = {{0}}, sorted[3][SLICES];
        unsigned done[3] = {0, 0, 0};
        double slice = cfg->duration_s / (2 * SLICES);
        for (unsigned k = 0; k < sides * SLICES; k++) {
            unsigned side = bench_slice_side(k, sides);
            double rate = side < 2 ? run_chain(&e.loop, &ch[side], levels[l], slice)
                                   : bench_limit_slice(lim, slice, NULL, NULL);
            if (rate < 0) { /* the limit's connections failed (said): no of_limit from here */
                bench_limit_close(lim);
                lim = NULL;
                rc = -1;
                break;
            }
            rates[side][done[side]++] = rate;
        }
        if (done[0] < SLICES || done[1] < SLICES) { /* cut short by the limit's failure */
            samples_free(&cyc);
            samples_free(&raw_cyc);
            break;
        }
        memcpy(sorted, rates, sizeof(sorted));
        double lock_rate = median_of(sorted[0], SLICES), raw_rate = median_of(sorted[1], SLICES);
        double limit = lim != NULL ? median_of(sorted[2], SLICES) : 0;
        double ratio = ratio_of(lock_rate, raw_rate);
        double of_limit = ratio_of(lock_rate, limit), raw_of_limit = ratio_of(raw_rate, limit);
        double cpu = ratio_of((double)ch[0].cpu_us, (double)ch[0].cycles_all);
        double raw_cpu = ratio_of((double)ch[1].cpu_us, (double)ch[1].cycles_all);
        percentiles pc = samples_percentiles(&cyc), prc = samples_percentiles(&raw_cyc);
        printf("%-11s %4u in flight: %7.0f cycles/s, raw %7.0f: ratio %.2f | of limit %.2f | "
               "p99 %5llu us\n",
               "throughput", levels[l], lock_rate, raw_rate, ratio, of_limit,
               (unsigned long long)pc.p99);
        char row[48];
        snprintf(row, sizeof(row), "%u in flight", levels[l]);
        bench_row_failures(cfg, "throughput", row, ch[0].failures + ch[1].failures,
                           ch[0].cycles_all + ch[1].cycles_all);
        if (cfg->json != NULL) {
            FILE *f = cfg->json;
            json_begin(f, "throughput");
            fprintf(f,
                    ",\"raw_wait\":\"%s\",\"concurrency\":%u,\"cycles_per_s\":%.1f,"
                    "\"raw_cycles_per_s\":%.1f,\"ratio\":%.3f,\"cycle_us\":",
                    raw_wait_name(RAW_WAIT_QUORUM), levels[l], lock_rate, raw_rate, ratio);
            json_percentiles(f, &pc);
            fprintf(f, ",\"raw_cycle_us\":");
            json_percentiles(f, &prc);
            fprintf(f, ",\"slices\":");
            json_doubles(f, rates[0], SLICES);
            fprintf(f, ",\"raw_slices\":");
            json_doubles(f, rates[1], SLICES);
            /* of_limit is null when the limit could not be measured (TLS nodes, an error). */
            if (limit > 0) {
                fprintf(f, ",\"limit_cycles_per_s\":%.1f,\"limit_slices\":", limit);
                json_doubles(f, rates[2], SLICES);
                fprintf(f, ",\"of_limit\":%.3f,\"raw_of_limit\":%.3f", of_limit, raw_of_limit);
            } else {
                fprintf(f, ",\"limit_cycles_per_s\":null,\"of_limit\":null,\"raw_of_limit\":null");
            }
            fprintf(f,
                    ",\"cpu_us_per_cycle\":%.2f,\"raw_cpu_us_per_cycle\":%.2f,\"failures\":%llu,"
                    "\"raw_lost\":%llu}\n",
                    cpu, raw_cpu, (unsigned long long)ch[0].failures,
                    (unsigned long long)ch[1].failures);
            fflush(f);
        }
        samples_free(&cyc);
        samples_free(&raw_cyc);
        cfg->tp_concurrency[l] = levels[l];
        cfg->tp_lock[l] = lock_rate;
        cfg->tp_raw[l] = raw_rate;
        cfg->tp_limit[l] = limit;
        cfg->tp_points = l + 1;
    }
    speed_stop(&e);
    bench_limit_close(lim);
    return rc;
}
