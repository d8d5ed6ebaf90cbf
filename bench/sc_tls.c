/* SPDX-License-Identifier: MIT */
/* sc_tls.c - the tls scenario: the lock cycles of the throughput scenario over the same servers'
 * plain and TLS ports, in one run, slices alternating (plain, TLS, plain, TLS, ...) so a machine
 * whose speed drifts favours neither; then what a TLS handshake costs when it is full (a new
 * client: no session) and when a reconnect resumes the node's session (the servers drop the
 * connections with CLIENT KILL, over their plain ports).
 *
 * The handshake times are the library's own (TCP connected to TLS handshake done, per node),
 * read from the node's stream: that is why the bench links the library's internal build. */
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "bench.h"
#include "client.h"
#include "io_uv.h"
#include "node.h"

/* More, shorter slices than the throughput scenario: the TLS and plain figures are compared with
 * each other, so the more finely they interleave, the less a drifting machine skews the ratio. */
#define SLICES 4
#define LEVELS 4

static redlock_client *tls_client(const bench_config *cfg, uv_loop_t *loop)
{
    redlock_options o;
    redlock_options_init(&o);
    o.ttl_ms = cfg->ttl_ms;
    o.node_timeout_ms = cfg->node_timeout_ms;
    o.drift_factor = cfg->drift_factor;
    o.retry_count = 0;
    o.connect_timeout_ms = 10000;
    o.tls_ca_file = cfg->tls_ca;
    o.tls_cert_file = cfg->tls_cert;
    o.tls_key_file = cfg->tls_key;
    return bench_client(cfg, loop, cfg->tls_urls, cfg->n_tls, &o);
}

/* Cycles until one succeeds (the first ones wait for the connections), at most 10 s. */
static int wait_ready(uv_loop_t *loop, redlock_client *c)
{
    uint64_t give_up = bench_now_us() + 10000000;
    for (unsigned k = 0;; k++) {
        char name[64];
        snprintf(name, sizeof(name), "bench:tls-ready:%u", k);
        uint64_t a, r;
        if (bench_cycle_once(loop, c, name, &a, &r) == 0)
            return 0;
        if (bench_now_us() >= give_up)
            return -1;
    }
}

static const redlock__stream_stats *stats_of(redlock_client *c, unsigned i)
{
    return redlock__node_stream_stats(redlock__io_uv_node(c->io, i));
}

static void on_tick(uv_timer_t *t)
{
    *(bool *)t->data = true;
}

/* Run the loop for about ms with nothing else to do: a repeating timer, because libuv before
 * 1.45 runs a due one-shot timer at the top of a UV_RUN_ONCE turn and then polls without a
 * timeout when no timer is left (idle connections would block it for good). */
static void run_for_ms(uv_loop_t *loop, uint64_t ms)
{
    bool fired = false;
    uv_timer_t tick;
    uv_timer_init(loop, &tick);
    tick.data = &fired;
    uv_update_time(loop);
    uv_timer_start(&tick, on_tick, ms, 1);
    while (!fired)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&tick, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
}

/* Run the loop until every node of c has completed more than before[i] TLS handshakes, at most
 * 10 s. */
static int wait_handshakes(uv_loop_t *loop, redlock_client *c, unsigned n, const unsigned *before)
{
    uint64_t give_up = bench_now_us() + 10000000;
    for (;;) {
        unsigned done = 0;
        for (unsigned i = 0; i < n; i++)
            done += stats_of(c, i)->tls_handshakes > before[i];
        if (done == n)
            return 0;
        if (bench_now_us() >= give_up)
            return -1;
        run_for_ms(loop, 2);
    }
}

/* CLIENT KILL TYPE normal on every server, over its plain port: the TLS client's connections go,
 * and it reconnects. */
static int kill_connections(const bench_config *cfg)
{
    for (unsigned i = 0; i < cfg->n_nodes; i++) {
        redlock_url u;
        if (redlock_url_parse(&u, cfg->urls[i], NULL, 0) != 0 || u.is_unix) {
            redlock_url_free(&u);
            return -1;
        }
        struct timeval tv = {1, 0};
        redisContext *rc = redisConnectWithTimeout(u.host, u.port, tv);
        redlock_url_free(&u);
        if (rc == NULL || rc->err) {
            if (rc != NULL)
                redisFree(rc);
            return -1;
        }
        redisReply *r = redisCommand(rc, "CLIENT KILL TYPE normal");
        if (r != NULL)
            freeReplyObject(r);
        redisFree(rc);
    }
    return 0;
}

static int measure_handshakes(bench_config *cfg, uv_loop_t *loop)
{
    unsigned rounds = cfg->quick ? 5 : 20;
    unsigned n = cfg->n_tls;
    samples full = {0}, resumed = {0};
    unsigned not_resumed = 0, zero[REDLOCK_MAX_NODES] = {0}, before[REDLOCK_MAX_NODES];
    int rc = 0;
    /* Full: a new client has no session. */
    for (unsigned k = 0; k < rounds && rc == 0; k++) {
        redlock_client *c = tls_client(cfg, loop);
        rc = wait_handshakes(loop, c, n, zero);
        for (unsigned i = 0; rc == 0 && i < n; i++)
            samples_add(&full, stats_of(c, i)->last_handshake_us);
        bench_close(loop, c);
    }
    /* Resumed: one client, its connections dropped by the servers again and again. */
    redlock_client *c = rc == 0 ? tls_client(cfg, loop) : NULL;
    if (c != NULL)
        rc = wait_handshakes(loop, c, n, zero);
    for (unsigned k = 0; k < rounds && rc == 0; k++) {
        for (unsigned i = 0; i < n; i++)
            before[i] = stats_of(c, i)->tls_handshakes;
        rc = kill_connections(cfg);
        if (rc == 0)
            rc = wait_handshakes(loop, c, n, before);
        for (unsigned i = 0; rc == 0 && i < n; i++) {
            const redlock__stream_stats *st = stats_of(c, i);
            if (st->last_resumed)
                samples_add(&resumed, st->last_handshake_us);
            else
                not_resumed++;
        }
    }
    if (c != NULL)
        bench_close(loop, c);
    percentiles pf = samples_percentiles(&full), pr = samples_percentiles(&resumed);
    double ratio = pf.p50 != 0 ? (double)pr.p50 / (double)pf.p50 : 0;
    printf("%-11s handshake full p50 %5llu us p99 %6llu | resumed p50 %5llu p99 %6llu | ratio "
           "%.2f%s\n",
           "tls", (unsigned long long)pf.p50, (unsigned long long)pf.p99,
           (unsigned long long)pr.p50, (unsigned long long)pr.p99, ratio, rc != 0 ? " FAILED" : "");
    if (cfg->json != NULL) {
        json_begin(cfg->json, "tls_handshake");
        fprintf(cfg->json, ",\"full_us\":");
        json_percentiles(cfg->json, &pf);
        fprintf(cfg->json, ",\"resumed_us\":");
        json_percentiles(cfg->json, &pr);
        fprintf(cfg->json, ",\"ratio_p50\":%.3f,\"not_resumed\":%u}\n", ratio, not_resumed);
        fflush(cfg->json);
    }
    samples_free(&full);
    samples_free(&resumed);
    return rc == 0 && pr.n > 0 ? 0 : -1;
}

int bench_tls(bench_config *cfg)
{
    if (cfg->n_tls == 0) {
        printf("%-11s skipped: no --tls-nodes (bench/run starts TLS servers when it can)\n", "tls");
        return 1;
    }
    if (cfg->n_tls != cfg->n_nodes) {
        fprintf(stderr, "redlock-bench: --tls-nodes must name the --nodes servers' TLS ports\n");
        return -1;
    }
    static const unsigned levels[LEVELS] = {1, 16, 64, 256};
    uv_loop_t loop;
    uv_loop_init(&loop);
    redlock_client *plain = bench_client(cfg, &loop, NULL, 0, NULL);
    redlock_client *tls = tls_client(cfg, &loop);
    int rc = 0;
    if (wait_ready(&loop, plain) != 0 || wait_ready(&loop, tls) != 0) {
        fprintf(stderr, "redlock-bench: tls: the nodes do not answer\n");
        rc = -1;
    }
    uint64_t warm = 0;
    if (rc == 0) {
        bench_chain(&loop, plain, 1, 0.2, NULL, &warm);
        bench_chain(&loop, tls, 1, 0.2, NULL, &warm);
        bench_causes_clear(); /* a warm-up's failures are no row's */
    }
    for (unsigned l = 0; l < LEVELS && rc == 0; l++) {
        samples tls_cyc = {0}, plain_cyc = {0};
        double slice = cfg->duration_s / (2 * SLICES);
        double tls_rate = 0, plain_rate = 0;
        uint64_t failures = 0, cycles = 0;
        for (int i = 0; i < SLICES; i++) {
            plain_rate += bench_chain_spec_count(&loop, plain, levels[l], slice, NULL, NULL,
                                                 &plain_cyc, &failures, &cycles, NULL) /
                          SLICES;
            tls_rate += bench_chain_spec_count(&loop, tls, levels[l], slice, NULL, NULL, &tls_cyc,
                                               &failures, &cycles, NULL) /
                        SLICES;
        }
        percentiles pt = samples_percentiles(&tls_cyc), pp = samples_percentiles(&plain_cyc);
        double ratio = ratio_of(tls_rate, plain_rate);
        printf("%-11s %3u in flight: %7.0f cycles/s, plain %7.0f: ratio %.2f | p50 %5llu us "
               "(plain %5llu)\n",
               "tls", levels[l], tls_rate, plain_rate, ratio, (unsigned long long)pt.p50,
               (unsigned long long)pp.p50);
        char row[48];
        snprintf(row, sizeof(row), "%u in flight", levels[l]);
        bench_row_failures(cfg, "tls", row, failures, cycles);
        if (cfg->json != NULL) {
            json_begin(cfg->json, "tls");
            fprintf(cfg->json,
                    ",\"concurrency\":%u,\"cycles_per_s\":%.1f,"
                    "\"plain_cycles_per_s\":%.1f,\"ratio\":%.3f,\"cycle_us\":",
                    levels[l], tls_rate, plain_rate, ratio);
            json_percentiles(cfg->json, &pt);
            fprintf(cfg->json, ",\"plain_cycle_us\":");
            json_percentiles(cfg->json, &pp);
            fprintf(cfg->json, ",\"failures\":%llu}\n", (unsigned long long)failures);
            fflush(cfg->json);
        }
        samples_free(&tls_cyc);
        samples_free(&plain_cyc);
    }
    bench_close(&loop, plain);
    bench_close(&loop, tls);
    if (rc == 0)
        rc = measure_handshakes(cfg, &loop);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return rc;
}
