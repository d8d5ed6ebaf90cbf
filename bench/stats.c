/* SPDX-License-Identifier: MIT */
/* stats.c - see stats.h. */
#include "stats.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static void *grow(void *p, size_t bytes)
{
    void *q = realloc(p, bytes);
    if (q == NULL) {
        fprintf(stderr, "redlock-bench: out of memory\n");
        exit(1);
    }
    return q;
}

void samples_add(samples *s, uint64_t value)
{
    if (s->n == s->cap) {
        s->cap = s->cap != 0 ? s->cap * 2 : 4096;
        s->v = grow(s->v, s->cap * sizeof(*s->v));
    }
    s->v[s->n++] = value;
}

void samples_append(samples *to, const samples *from)
{
    for (size_t i = 0; i < from->n; i++)
        samples_add(to, from->v[i]);
}

void samples_free(samples *s)
{
    free(s->v);
    memset(s, 0, sizeof(*s));
}

int bench_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

size_t percentile_index(size_t n, unsigned per_mille)
{
    if (n == 0)
        return 0;
    if (per_mille > 1000)
        per_mille = 1000;
    /* rank = ceil(per_mille * n / 1000), 1-based; n is far below SIZE_MAX / 1000 here. */
    size_t rank = ((size_t)per_mille * n + 999) / 1000;
    return rank > 0 ? rank - 1 : 0;
}

percentiles samples_percentiles(samples *s)
{
    percentiles p;
    memset(&p, 0, sizeof(p));
    if (s->n == 0)
        return p;
    qsort(s->v, s->n, sizeof(s->v[0]), bench_cmp_u64);
    p.p50 = s->v[percentile_index(s->n, 500)];
    p.p90 = s->v[percentile_index(s->n, 900)];
    p.p99 = s->v[percentile_index(s->n, 990)];
    p.p999 = s->v[percentile_index(s->n, 999)];
    p.max = s->v[s->n - 1];
    p.n = s->n;
    return p;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double median_of(double *v, size_t n)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof(v[0]), cmp_double);
    return v[percentile_index(n, 500)];
}

double ratio_of(double a, double b)
{
    return b > 0 ? a / b : 0;
}

void json_percentiles(FILE *f, const percentiles *p)
{
    fprintf(f, "{\"p50\":%llu,\"p90\":%llu,\"p99\":%llu,\"p999\":%llu,\"max\":%llu,\"n\":%zu}",
            (unsigned long long)p->p50, (unsigned long long)p->p90, (unsigned long long)p->p99,
            (unsigned long long)p->p999, (unsigned long long)p->max, p->n);
}

void json_doubles(FILE *f, const double *v, size_t n)
{
    fputc('[', f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%.1f", i > 0 ? "," : "", v[i]);
    fputc(']', f);
}

void json_begin(FILE *f, const char *scenario)
{
    fprintf(f, "{\"schema\":%d,\"scenario\":", BENCH_SCHEMA);
    json_string(f, scenario);
}

void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c != '\0'; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(f, "\\%c", *c);
        else if (*c < 0x20 || *c >= 0x7f)
            fprintf(f, "\\u%04x", *c);
        else
            fputc(*c, f);
    }
    fputc('"', f);
}

uint64_t bench_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t bench_cpu_us(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}
