/* SPDX-License-Identifier: MIT */
/* fence_check.c - see fence_check.h. */
#include "fence_check.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LINE_MAX_LEN 256

/* KEYS[1] the counter, KEYS[2] the largest fence accepted for it, KEYS[3] the store's count of
 * applied writes; ARGV[1] the value, ARGV[2] the writer's fence. The order of applied writes,
 * or -1 for a write refused (its fence is below the last accepted one). */
static const char fenced_set_lua[] = "local last = redis.call('get', KEYS[2])\n"
                                     "if last and tonumber(ARGV[2]) < tonumber(last) then\n"
                                     "    return -1\n"
                                     "end\n"
                                     "redis.call('set', KEYS[2], ARGV[2])\n"
                                     "redis.call('set', KEYS[1], ARGV[1])\n"
                                     "return redis.call('incr', KEYS[3])\n";

static int log_fd = -1; /* one per worker process; its threads share it (O_APPEND) */

static void log_path(char *out, size_t len, const char *log_dir, unsigned process)
{
    snprintf(out, len, "%s/worker-%u.fence.log", log_dir, process);
}

int torture_fence_open(const char *log_dir, unsigned process)
{
    char path[512];
    log_path(path, sizeof(path), log_dir, process);
    log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        fprintf(stderr, "worker %u: %s: %s\n", process, path, strerror(errno));
        return -1;
    }
    return 0;
}

void torture_fence_close(void)
{
    if (log_fd >= 0)
        close(log_fd);
    log_fd = -1;
}

int torture_fence_set(redisContext *data, unsigned resource, long long value, uint64_t fence,
                      bool *accepted, uint64_t *seq)
{
    char counter[64], last[64], applied[64], val[32], fence_text[32];
    snprintf(counter, sizeof(counter), "torture:counter:%u", resource);
    snprintf(last, sizeof(last), "torture:fence:%u", resource);
    snprintf(applied, sizeof(applied), "torture:applied:%u", resource);
    snprintf(val, sizeof(val), "%lld", value);
    snprintf(fence_text, sizeof(fence_text), "%" PRIu64, fence);
    redisReply *r = redisCommand(data, "EVAL %s 3 %s %s %s %s %s", fenced_set_lua, counter, last,
                                 applied, val, fence_text);
    if (r == NULL || r->type != REDIS_REPLY_INTEGER) {
        fprintf(stderr, "fenced SET of resource %u: %s\n", resource,
                r == NULL                      ? data->errstr
                : r->type == REDIS_REPLY_ERROR ? r->str
                                               : "bad reply");
        if (r != NULL)
            freeReplyObject(r);
        return -1;
    }
    *accepted = r->integer > 0;
    *seq = r->integer > 0 ? (uint64_t)r->integer : 0;
    freeReplyObject(r);
    return 0;
}

int torture_fence_log(unsigned resource, unsigned process, unsigned thread, uint64_t fence,
                      uint64_t acquire_start_us, uint64_t acquire_done_us, uint64_t write_start_us,
                      char outcome, uint64_t seq)
{
    char line[LINE_MAX_LEN];
    int len = snprintf(
        line, sizeof(line),
        "X %u %u %u %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %c %" PRIu64 "\n", resource,
        process, thread, fence, acquire_start_us, acquire_done_us, write_start_us, outcome, seq);
    if (len < 0 || (size_t)len >= sizeof(line) || log_fd < 0)
        return -1;
    ssize_t n;
    do {
        n = write(log_fd, line, (size_t)len);
    } while (n < 0 && errno == EINTR);
    return n == len ? 0 : -1;
}

/* ---- the check ------------------------------------------------------------------------------- */

typedef struct record {
    unsigned resource, process, thread;
    uint64_t fence, acquire_start_us, acquire_done_us, write_start_us, seq;
    char outcome;
} record;

typedef struct records {
    record *v;
    size_t n, cap;
} records;

static int load(records *rs, const char *path, torture_fence_verdict *v, FILE *out)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return errno == ENOENT ? 0 : -1;
    char line[LINE_MAX_LEN];
    unsigned lineno = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        lineno++;
        record r;
        if (sscanf(line, "X %u %u %u %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %c %" SCNu64,
                   &r.resource, &r.process, &r.thread, &r.fence, &r.acquire_start_us,
                   &r.acquire_done_us, &r.write_start_us, &r.outcome, &r.seq) != 9 ||
            r.fence == 0 || (r.outcome != 'a' && r.outcome != 'r' && r.outcome != 'n')) {
            v->bad_records++;
            if (out != NULL)
                fprintf(out, "# %s:%u: a bad fence record: %s", path, lineno, line);
            continue;
        }
        if (rs->n == rs->cap) {
            size_t cap = rs->cap != 0 ? rs->cap * 2 : 1024;
            record *bigger = realloc(rs->v, cap * sizeof(*bigger));
            if (bigger == NULL) {
                fclose(f);
                return -1;
            }
            rs->v = bigger;
            rs->cap = cap;
        }
        rs->v[rs->n++] = r;
    }
    fclose(f);
    return 0;
}

static int by_grant(const void *a, const void *b)
{
    const record *x = a, *y = b;
    if (x->resource != y->resource)
        return x->resource < y->resource ? -1 : 1;
    if (x->acquire_done_us != y->acquire_done_us)
        return x->acquire_done_us < y->acquire_done_us ? -1 : 1;
    return 0;
}

static int by_store_order(const void *a, const void *b)
{
    const record *x = a, *y = b;
    bool xa = x->outcome == 'a', ya = y->outcome == 'a';
    if (xa != ya)
        return xa ? -1 : 1;
    if (x->resource != y->resource)
        return x->resource < y->resource ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static bool forgot_between(const uint64_t *forgot_us, unsigned n, bool any_time, uint64_t from,
                           uint64_t to)
{
    if (any_time)
        return true;
    for (unsigned i = 0; i < n; i++)
        if (forgot_us[i] >= from && forgot_us[i] <= to)
            return true;
    return false;
}

unsigned long torture_fence_check(const char *log_dir, unsigned procs, const uint64_t *forgot_us,
                                  unsigned n_forgot, bool any_time_forgot, torture_fence_verdict *v,
                                  FILE *out)
{
    memset(v, 0, sizeof(*v));
    records rs = {0};
    for (unsigned p = 0; p < procs; p++) {
        char path[512];
        log_path(path, sizeof(path), log_dir, p);
        if (load(&rs, path, v, out) != 0) {
            v->bad_records++;
            if (out != NULL)
                fprintf(out, "# %s: cannot read\n", path);
        }
    }
    v->holds = rs.n;

    /* 1. Successive holds of a resource, in the order they were granted. Without overlapping
     * holds (the checker's first test) a hold is granted after the one before it released, so
     * its acquire returned later too. */
    if (rs.n > 1) /* qsort's array may not be NULL, even empty */
        qsort(rs.v, rs.n, sizeof(rs.v[0]), by_grant);
    for (size_t i = 1; i < rs.n; i++) {
        const record *a = &rs.v[i - 1], *b = &rs.v[i];
        if (a->resource != b->resource)
            continue;
        v->order_checks++;
        if (b->fence > a->fence)
            continue;
        if (forgot_between(forgot_us, n_forgot, any_time_forgot, a->acquire_start_us,
                           b->acquire_done_us)) {
            v->order_excused++;
            continue;
        }
        v->order_broken++;
        if (out != NULL && v->order_broken <= 10)
            fprintf(out,
                    "# resource %u: fence %" PRIu64 " (process %u.%u, granted at %.6f s) after "
                    "fence %" PRIu64 " (process %u.%u, granted at %.6f s): fences must grow\n",
                    b->resource, b->fence, b->process, b->thread, (double)b->acquire_done_us / 1e6,
                    a->fence, a->process, a->thread, (double)a->acquire_done_us / 1e6);
    }

    /* 2. The store's applied writes, in its own order: their holds were granted in order. */
    if (rs.n > 1)
        qsort(rs.v, rs.n, sizeof(rs.v[0]), by_store_order);
    for (size_t i = 0; i < rs.n; i++) {
        const record *r = &rs.v[i];
        v->accepted += r->outcome == 'a';
        v->refused += r->outcome == 'r';
        if (i == 0 || r->outcome != 'a')
            continue;
        const record *before = &rs.v[i - 1];
        if (before->outcome != 'a' || before->resource != r->resource ||
            r->acquire_done_us >= before->acquire_done_us)
            continue;
        v->stale_accepted++;
        if (out != NULL && v->stale_accepted <= 10)
            fprintf(out,
                    "# resource %u: the store applied a write of process %u.%u (fence %" PRIu64
                    ", granted at %.6f s) after one of process %u.%u (fence %" PRIu64
                    ", granted later, at %.6f s): a stale write accepted\n",
                    r->resource, r->process, r->thread, r->fence, (double)r->acquire_done_us / 1e6,
                    before->process, before->thread, before->fence,
                    (double)before->acquire_done_us / 1e6);
    }
    free(rs.v);
    return v->order_broken + v->stale_accepted + v->bad_records;
}

void torture_fence_remove_logs(const char *log_dir, unsigned procs)
{
    for (unsigned p = 0; p < procs; p++) {
        char path[512];
        log_path(path, sizeof(path), log_dir, p);
        unlink(path);
    }
}
