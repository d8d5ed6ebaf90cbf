/* SPDX-License-Identifier: MIT */
/* bench.h - what the scenarios share: the run's settings, a client on its own loop, and the
 * figures kept for the plot. */
#ifndef BENCH_H
#define BENCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <uv.h>

#include "redlock.h"
#include "stats.h"

#define BENCH_TP_POINTS 5
#define BENCH_SCALE_POINTS 5

struct raw;

/* What went wrong in the run (outcome.c): rows with failed cycles (timing: the run goes on and
 * exits 0), correctness checks that failed (exit 1), scenarios that could not be made (exit 2). */
#define BENCH_CAUSES_MAX 4
#define BENCH_CAUSE_LEN 96
#define BENCH_FAILED_ROWS_MAX 64
#define BENCH_NOTES_MAX 16
#define BENCH_NOTE_LEN 256
typedef struct bench_failed_row {
    char scenario[16], row[48];
    char causes[BENCH_CAUSES_MAX * (BENCH_CAUSE_LEN + 24) + 32];
    char top[BENCH_CAUSE_LEN]; /* the most frequent cause */
    uint64_t failed, cycles;
    double load; /* the 1-minute load average at the row's end */
} bench_failed_row;
typedef struct bench_outcome {
    bench_failed_row failed_rows[BENCH_FAILED_ROWS_MAX];
    unsigned n_failed_rows, failed_rows_total; /* kept, and all */
    uint64_t failed_cycles;
    char broken[BENCH_NOTES_MAX][BENCH_NOTE_LEN];
    unsigned n_broken;
    char not_made[BENCH_NOTES_MAX][BENCH_NOTE_LEN];
    unsigned n_not_made;
} bench_outcome;

typedef struct bench_config {
    const char *urls[REDLOCK_MAX_NODES];
    unsigned n_nodes;
    pid_t pids[REDLOCK_MAX_NODES]; /* the node servers' pids, for the faults scenario */
    unsigned n_pids;
    double duration_s;
    bool quick;
    uint64_t ttl_ms;
    uint64_t node_timeout_ms;
    double drift_factor;
    const char *proxy_path;
    const char *plot_path;
    /* The tls scenario: the same servers' TLS ports (rediss://), and what verifies them. */
    const char *tls_urls[REDLOCK_MAX_NODES];
    unsigned n_tls;
    const char *tls_ca;
    const char *tls_cert, *tls_key;
    /* The scale scenario's nodes (--scale-nodes; bench/run starts nine, the first five being
     * --nodes). None: the scale scenario uses --nodes. */
    const char *scale_urls[REDLOCK_MAX_NODES];
    unsigned n_scale;
    /* The cluster scenario's former (--cluster-former; bench/clusters.sh): run as `PATH NODES M`,
     * it prints NODES cluster:// URLs of M masters each and keeps them until its input closes.
     * NULL: the cluster scenario is skipped. */
    const char *cluster_former;
    /* The servers' own capacity in lock cycles per second (the limit scenario, sc_limit.c): 0
     * when it did not run. For the plot; the throughput rows measure their own, slice by slice
     * beside their lock and raw slices. */
    double limit_cycles_per_s;
    FILE *json;
    /* --break-lock: the contention rows do their read-modify-write without the lock, so that
     * their lost-update check must fail (the smoke test's correctness failure). */
    bool break_lock;
    bench_outcome outcome;
    /* Kept for --plot. */
    samples plot_cycle, plot_raw_cycle;
    unsigned tp_concurrency[BENCH_TP_POINTS];
    double tp_lock[BENCH_TP_POINTS], tp_raw[BENCH_TP_POINTS];
    double tp_limit[BENCH_TP_POINTS]; /* the limit measured beside each row; 0: not measured */
    unsigned tp_points;
    unsigned scale_nodes[BENCH_SCALE_POINTS];
    double scale_lock[BENCH_SCALE_POINTS], scale_raw[BENCH_SCALE_POINTS];
    unsigned scale_points;
} bench_config;

/* The limit's pipelined connections (sc_limit.c), for measuring it slice by slice beside other
 * slices: open (warmed up; NULL with *rc 1 when skipped with a reason printed, -1 on error), one
 * slice of seconds at a time (the pipeline filled, run, then drained so that the servers are idle
 * again; returns lock cycles per second, < 0 on error; adds the process's cpu time and the
 * commands answered), close. */
typedef struct limit_run limit_run;
limit_run *bench_limit_open(const bench_config *cfg, int *rc);
double bench_limit_slice(limit_run *L, double seconds, uint64_t *cpu_us, uint64_t *commands);
void bench_limit_close(limit_run *L);

/* Each returns 0, 1 when skipped (with a reason printed), or -1 on failure. */
int bench_latency(bench_config *cfg);
/* Measures the servers' limit and keeps it in cfg->limit_cycles_per_s. */
int bench_limit(bench_config *cfg);
int bench_throughput(bench_config *cfg);
int bench_scale(bench_config *cfg);
int bench_contention(bench_config *cfg);
int bench_faults(bench_config *cfg);
int bench_wan(bench_config *cfg);
int bench_memory(bench_config *cfg);
int bench_tls(bench_config *cfg);
int bench_fencing(bench_config *cfg);
int bench_multi(bench_config *cfg);
int bench_cluster(bench_config *cfg);
void bench_plot(const bench_config *cfg);
void bench_results_free(bench_config *cfg);

/* A failed cycle's cause (the status, and what a timed-out or failed node said), counted for
 * the row being measured; bench_cause_text: a cause given as text (the raw side's). */
void bench_cause(int status, const redlock_result *result);
/* The cause as bench_cause counts it, into out (for a caller that decides later). */
void bench_cause_of(int status, const redlock_result *result, char *out, size_t len);
void bench_cause_text(const char *cause);
/* Forget the causes noted so far (a warm-up's). */
void bench_causes_clear(void);
/* The end of a row: when failed > 0, prints "  failed: N cycles (M completed): causes; load
 * average L" under the row and keeps it for the closing line and the JSON. Empties the causes
 * either way. */
void bench_row_failures(bench_config *cfg, const char *scenario, const char *row, uint64_t failed,
                        uint64_t cycles);
/* A correctness check failed (exit 1), or a scenario could not be made (exit 2): said at once
 * in a line of its own, named in the closing line. */
void bench_broken(bench_config *cfg, const char *scenario, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void bench_not_made(bench_config *cfg, const char *scenario, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The run's end: the JSON's "outcome" line and the closing line; returns the exit status (0,
 * 1 correctness, 2 not made). */
int bench_outcome_end(bench_config *cfg);

/* A client on loop with the run's settings (urls NULL: the run's nodes). Exits on error. */
redlock_client *bench_client(const bench_config *cfg, uv_loop_t *loop, const char *const *urls,
                             unsigned n, const redlock_options *opts);
/* Close client and run the loop until it is closed. */
void bench_close(uv_loop_t *loop, redlock_client *client);
/* Run loop until *flag or the time is up (absolute, bench_now_us clock). */
void bench_run_until(uv_loop_t *loop, const bool *flag, uint64_t until_us);
/* width lock cycles in flight on client for seconds (sc_speed.c): cycles per second; each
 * cycle's time goes to cycle (may be NULL), failed cycles are added to *failures. */
double bench_chain(uv_loop_t *loop, redlock_client *client, unsigned width, double seconds,
                   samples *cycle, uint64_t *failures);
/* What the cycles of bench_chain_spec_run lock. Zero: one fresh resource, default options. */
#define BENCH_CHAIN_RESOURCES_MAX 8
typedef struct bench_chain_spec {
    const redlock_lock_opts *opts; /* NULL: defaults; with fencing, a lock without a fence fails */
    unsigned resources; /* per lock (redlock_acquire_multi), 1..BENCH_CHAIN_RESOURCES_MAX (0: 1) */
    unsigned reuse;     /* 0: fresh names for every cycle; n: each worker's n names in turn */
    const char *tag;    /* in the names (NULL: none), so that two workloads never share one */
} bench_chain_spec;
/* bench_chain with spec (NULL: as bench_chain); each acquire's time goes to acquire (may be
 * NULL). */
double bench_chain_spec_run(uv_loop_t *loop, redlock_client *client, unsigned width, double seconds,
                            const bench_chain_spec *spec, samples *acquire, samples *cycle,
                            uint64_t *failures);
/* bench_chain_spec_run, also adding the cycles made to *cycles and the fenced locks granted
 * without a fence (a correctness failure, counted in *failures too) to *fence_missing; either
 * may be NULL. */
double bench_chain_spec_count(uv_loop_t *loop, redlock_client *client, unsigned width,
                              double seconds, const bench_chain_spec *spec, samples *acquire,
                              samples *cycle, uint64_t *failures, uint64_t *cycles,
                              uint64_t *fence_missing);
/* One side of a comparison for a scenario that runs its own slices (sc_speed.c): the library
 * (client), or with client NULL the raw fan-out (raw, raw.h, deciding at the quorum). The slices
 * run on it add up here. */
typedef struct bench_side {
    redlock_client *client;
    struct raw *raw;
    samples *acquire, *cycle; /* each cycle's acquire (raw: its SET's decision) and whole time;
                               * either may be NULL */
    uint64_t cycles, failures;
    uint64_t cpu_us; /* the process's CPU time, user + system, over the slices (bench_cpu_us) */
} bench_side;
/* One slice on side: width cycles in flight, each on a fresh resource, for seconds; returns the
 * slice's cycles per second. */
double bench_side_run(uv_loop_t *loop, bench_side *side, unsigned width, double seconds);
/* Which of sides sides runs slice k of a balanced alternation (L R, R L, L R, ...). */
unsigned bench_slice_side(unsigned k, unsigned sides);
/* One sequential acquire + release on a fresh resource; returns the acquire status, and the
 * times taken. Used for warm-up and for latencies under faults. */
int bench_cycle_once(uv_loop_t *loop, redlock_client *c, const char *resource, uint64_t *acquire_us,
                     uint64_t *release_us);

#endif
