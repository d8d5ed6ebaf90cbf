/* SPDX-License-Identifier: MIT */
/* common.c - helpers the scenarios share. */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

redlock_client *bench_client(const bench_config *cfg, uv_loop_t *loop, const char *const *urls,
                             unsigned n, const redlock_options *opts)
{
    redlock_options defaults;
    if (opts == NULL) {
        redlock_options_init(&defaults);
        defaults.ttl_ms = cfg->ttl_ms;
        defaults.node_timeout_ms = cfg->node_timeout_ms;
        defaults.drift_factor = cfg->drift_factor;
        defaults.retry_count = 0;
        opts = &defaults;
    }
    redlock_client *c = NULL;
    char err[256];
    int rc = redlock_client_new(loop, urls != NULL ? urls : cfg->urls,
                                urls != NULL ? n : cfg->n_nodes, opts, &c, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "redlock-bench: %s: %s\n", redlock_err_name(rc), err);
        exit(1);
    }
    return c;
}

static void on_closed(redlock_client *c, void *data)
{
    (void)c;
    *(bool *)data = true;
}

void bench_close(uv_loop_t *loop, redlock_client *client)
{
    bool closed = false;
    redlock_client_close(client, on_closed, &closed);
    while (!closed)
        uv_run(loop, UV_RUN_ONCE);
}

static void on_guard(uv_timer_t *t)
{
    (void)t;
}

void bench_run_until(uv_loop_t *loop, const bool *flag, uint64_t until_us)
{
    uv_timer_t guard;
    uv_timer_init(loop, &guard);
    uint64_t now = bench_now_us();
    uv_timer_start(&guard, on_guard, until_us > now ? (until_us - now) / 1000 + 1 : 0, 0);
    while (!*flag && bench_now_us() < until_us)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&guard, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
}

typedef struct once {
    bool done;
    int status;
    redlock_lock *lock;
} once;

static void on_once(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)result;
    once *o = data;
    o->done = true;
    o->status = status;
    o->lock = lock;
}

int bench_cycle_once(uv_loop_t *loop, redlock_client *c, const char *resource, uint64_t *acquire_us,
                     uint64_t *release_us)
{
    once o = {false, 0, NULL};
    uint64_t t0 = bench_now_us();
    if (redlock_acquire(c, resource, strlen(resource), 0, NULL, on_once, &o) != 0)
        return -1;
    bench_run_until(loop, &o.done, t0 + 60000000);
    uint64_t t1 = bench_now_us();
    *acquire_us = t1 - t0;
    *release_us = 0;
    if (o.status != 0)
        return o.status;
    once r = {false, 0, NULL};
    redlock_release(o.lock, on_once, &r);
    bench_run_until(loop, &r.done, t1 + 60000000);
    *release_us = bench_now_us() - t1;
    redlock_lock_free(o.lock);
    return 0;
}

void bench_results_free(bench_config *cfg)
{
    samples_free(&cfg->plot_cycle);
    samples_free(&cfg->plot_raw_cycle);
}
