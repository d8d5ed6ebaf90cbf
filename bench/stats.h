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
void samples_free(samples *s);
/* Sorts s in place. Nearest-rank percentiles; all zero when empty. */
percentiles samples_percentiles(samples *s);

/* {"p50":..,"p90":..,"p99":..,"p999":..,"max":..} */
void json_percentiles(FILE *f, const percentiles *p);
/* A JSON string with escapes. */
void json_string(FILE *f, const char *s);

/* The bench's clock: monotonic microseconds. */
uint64_t bench_now_us(void);

#endif
