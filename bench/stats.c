/* stats.c - see stats.h. */
#include "stats.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

void samples_add(samples *s, uint64_t value)
{
    if (s->n == s->cap) {
        size_t cap = s->cap != 0 ? s->cap * 2 : 4096;
        uint64_t *v = realloc(s->v, cap * sizeof(*v));
        if (v == NULL) {
            fprintf(stderr, "redlock-bench: out of memory\n");
            exit(1);
        }
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = value;
}

void samples_free(samples *s)
{
    free(s->v);
    memset(s, 0, sizeof(*s));
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t rank(const samples *s, double q)
{
    size_t i = (size_t)(q * (double)s->n);
    if (i >= s->n)
        i = s->n - 1;
    return s->v[i];
}

percentiles samples_percentiles(samples *s)
{
    percentiles p;
    memset(&p, 0, sizeof(p));
    if (s->n == 0)
        return p;
    qsort(s->v, s->n, sizeof(s->v[0]), cmp_u64);
    p.p50 = rank(s, 0.50);
    p.p90 = rank(s, 0.90);
    p.p99 = rank(s, 0.99);
    p.p999 = rank(s, 0.999);
    p.max = s->v[s->n - 1];
    p.n = s->n;
    return p;
}

void json_percentiles(FILE *f, const percentiles *p)
{
    fprintf(f, "{\"p50\":%llu,\"p90\":%llu,\"p99\":%llu,\"p999\":%llu,\"max\":%llu,\"n\":%zu}",
            (unsigned long long)p->p50, (unsigned long long)p->p90, (unsigned long long)p->p99,
            (unsigned long long)p->p999, (unsigned long long)p->max, p->n);
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
