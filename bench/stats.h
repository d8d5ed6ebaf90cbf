/* SPDX-License-Identifier: MIT */
/* stats.h - latency samples and their percentiles, and the few JSON helpers the bench needs. */
#ifndef BENCH_STATS_H
#define BENCH_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct samples {
    uint64_t *v;
    size_t n, cap;
} samples;

typedef struct percentiles {
    uint64_t p50, p90, p99, p999, max;
    size_t n;
} percentiles;

void samples_add(samples *s, uint64_t value);
/* qsort's comparison of two uint64_t, ascending. */
int bench_cmp_u64(const void *a, const void *b);
/* Appends every value of from to to. */
void samples_append(samples *to, const samples *from);
void samples_free(samples *s);

/* The nearest-rank percentile: the index, in n sorted values (n >= 1), of the smallest value
 * that at least per_mille/1000 of the values are less than or equal to, that is
 * ceil(per_mille * n / 1000) - 1, computed in integers (no rounding error can move it a rank).
 * per_mille 0 gives 0, 1000 gives n - 1. The one place the bench ranks values. */
size_t percentile_index(size_t n, unsigned per_mille);
/* Sorts s in place. p50, p90, p99, p999 by percentile_index; all zero when empty. */
percentiles samples_percentiles(samples *s);

/* The median of n doubles (the lower middle one when n is even: a value that was measured);
 * sorts v in place; 0 when n is 0. */
double median_of(double *v, size_t n);

/* a / b, or 0 when b is not positive (nothing measured on that side). */
double ratio_of(double a, double b);

/* {"p50":..,"p90":..,"p99":..,"p999":..,"max":..,"n":..} */
void json_percentiles(FILE *f, const percentiles *p);
/* [a,b,...] with one decimal. */
void json_doubles(FILE *f, const double *v, size_t n);
/* The JSON lines' schema version: every line carries it as "schema". 2: nearest-rank
 * percentiles, a quorum-waiting raw fan-out, slices, the fields of bench/README.md. */
#define BENCH_SCHEMA 2
/* Starts a line: {"schema":BENCH_SCHEMA,"scenario":"name" (the caller adds ,... and }\n). */
void json_begin(FILE *f, const char *scenario);
/* A JSON string with escapes. */
void json_string(FILE *f, const char *s);

/* The bench's clock: monotonic microseconds. */
uint64_t bench_now_us(void);
/* The CPU time this process has used, user + system (getrusage RUSAGE_SELF), in microseconds:
 * the difference over a stretch of work is what the bench itself spent on it. */
uint64_t bench_cpu_us(void);

#endif
