/* SPDX-License-Identifier: MIT */
/* sc_memory.c - memory per held lock, at 10,000 and at 100,000 held locks, and per operation in
 * flight (memory). */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* The RSS of what is in use: free heap pages go back first (malloc_trim), else memory the earlier
 * scenarios of this process freed is reused without showing in the RSS (a whole run measured
 * +0 KiB for 5,000 locks where this scenario alone measured 3.4 MiB). */
static long rss_kb(void)
{
    malloc_trim(0);
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL)
        return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

typedef struct holder {
    redlock_client *c;
    redlock_lock **locks;
    unsigned target, started, finished, failures, inflight_max;
    bool done;
} holder;

static void take_more(holder *h);

static void on_held(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    holder *h = data;
    if (status == 0) {
        h->locks[h->finished] = lock;
    } else {
        h->failures++;
        bench_cause(status, result);
    }
    h->finished++;
    take_more(h);
}

static void take_more(holder *h)
{
    while (h->started < h->target && h->started - h->finished < h->inflight_max) {
        char name[64];
        int len = snprintf(name, sizeof(name), "bench:mem:%u", h->started++);
        if (redlock_acquire(h->c, name, (size_t)len, 60000, NULL, on_held, h) != 0) {
            h->failures++;
            h->finished++;
        }
    }
    if (h->finished == h->target)
        h->done = true;
}

static void on_dropped(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)result;
    (void)status;
    unsigned *left = data;
    redlock_lock_free(lock);
    (*left)--;
}

/* The library's allocator hook: every block carries its size in front, so the live bytes the
 * library holds are known exactly (hiredis and libuv keep their own allocators). */
typedef struct counting {
    size_t live, blocks;
} counting;

#define HEADER 16 /* keeps the blocks aligned as malloc's are */

static void *counting_realloc(void *ud, void *ptr, size_t size)
{
    counting *k = ud;
    size_t old = 0;
    char *base = NULL;
    if (ptr != NULL) {
        base = (char *)ptr - HEADER;
        memcpy(&old, base, sizeof(old));
    }
    if (size == 0) {
        free(base);
        if (ptr != NULL) {
            k->live -= old;
            k->blocks--;
        }
        return NULL;
    }
    char *q = realloc(base, size + HEADER);
    if (q == NULL)
        return NULL;
    memcpy(q, &size, sizeof(size));
    k->live += size - old;
    if (ptr == NULL)
        k->blocks++;
    return q + HEADER;
}

/* Runs the loop for 200 ms: the rounds decided at the quorum read their late answers and go. */
static void settle(uv_loop_t *loop)
{
    bool never = false;
    bench_run_until(loop, &never, bench_now_us() + 200000);
}

/* Releases every lock h holds, a bounded number at a time, and waits for all. */
static void release_all(uv_loop_t *loop, holder *h)
{
    unsigned left = 0;
    for (unsigned i = 0; i < h->target; i++) {
        if (h->locks[i] == NULL)
            continue;
        if (redlock_release(h->locks[i], on_dropped, &left) == 0)
            left++;
        h->locks[i] = NULL;
        if (left >= 256)
            while (left > 128)
                uv_run(loop, UV_RUN_ONCE);
    }
    while (left > 0)
        uv_run(loop, UV_RUN_ONCE);
}

/* One memory row: target locks held at once, on a client of its own. */
static int memory_held(bench_config *cfg, unsigned target)
{
    const unsigned inflight = 1000;
    uv_loop_t loop;
    uv_loop_init(&loop);
    counting k = {0, 0};
    redlock_options o;
    redlock_options_init(&o);
    o.ttl_ms = cfg->ttl_ms;
    o.node_timeout_ms = 10000; /* nothing here is timed: 1,000 acquires at once must not fail */
    o.drift_factor = cfg->drift_factor;
    o.retry_count = 0;
    o.realloc_fn = counting_realloc;
    o.realloc_ud = &k;
    redlock_client *c = bench_client(cfg, &loop, NULL, 0, &o);
    uint64_t a, r;
    bench_cycle_once(&loop, c, "bench:mem:warm", &a, &r); /* connections and buffers exist */
    holder h;
    memset(&h, 0, sizeof(h));
    h.c = c;
    h.target = target;
    h.inflight_max = 256;
    h.locks = calloc(target, sizeof(*h.locks));
    memset(h.locks, 0xff, target * sizeof(*h.locks)); /* its pages are in the RSS before */
    memset(h.locks, 0, target * sizeof(*h.locks));
    /* RSS: two readings, at half the locks and at all of them, so the slope leaves out what grows
     * once (buffers sized by the first 256 in flight). */
    h.target = target / 2;
    take_more(&h);
    bench_run_until(&loop, &h.done, bench_now_us() + 120000000);
    unsigned held_half = h.finished - h.failures;
    long before = rss_kb();
    h.target = target;
    h.done = false;
    take_more(&h);
    bench_run_until(&loop, &h.done, bench_now_us() + 120000000);
    long after = rss_kb();
    unsigned held = h.finished - h.failures, added = held - held_half;
    double per_lock = added > 0 ? (double)(after - before) * 1024.0 / added : 0;

    /* Operations in flight: `inflight` acquires issued in one loop turn, counted before the loop
     * runs again (each has its round, its lock handle and its commands queued on every node). */
    holder f;
    memset(&f, 0, sizeof(f));
    f.c = c;
    f.target = inflight;
    f.inflight_max = inflight;
    f.locks = calloc(inflight, sizeof(*f.locks));
    size_t live_idle = k.live;
    f.started = 0;
    for (unsigned i = 0; i < inflight; i++) {
        char name[64];
        int len = snprintf(name, sizeof(name), "bench:mem:op:%u", f.started++);
        if (redlock_acquire(c, name, (size_t)len, 60000, NULL, on_held, &f) != 0) {
            f.failures++;
            f.finished++;
        }
    }
    size_t live_inflight = k.live;
    bench_run_until(&loop, &f.done, bench_now_us() + 120000000);
    double live_per_op = (double)(live_inflight - live_idle) / inflight;

    /* Exact: what the library frees when the held locks are released and freed (its buffers
     * stay as they are, so the drop is the locks' own memory). */
    settle(&loop);
    size_t live_held = k.live;
    release_all(&loop, &h);
    settle(&loop);
    size_t live_released = k.live;
    double live_per_lock = held > 0 ? ((double)live_held - (double)live_released) / held : 0;
    release_all(&loop, &f);

    printf("%-11s %6u locks held: %4.0f live bytes each (exact), RSS %4.0f | in flight: %4.0f\n",
           "memory", held, live_per_lock, per_lock, live_per_op);
    char row[48];
    snprintf(row, sizeof(row), "%u locks held", held);
    bench_row_failures(cfg, "memory", row, h.failures + f.failures, h.finished + f.finished);
    if (cfg->json != NULL) {
        FILE *j = cfg->json;
        json_begin(j, "memory");
        fprintf(j,
                ",\"held_locks\":%u,\"live_bytes_per_lock\":%.1f,\"live_bytes_held\":%zu,"
                "\"live_bytes_released\":%zu,\"in_flight\":%u,\"live_bytes_per_inflight\":%.1f,"
                "\"rss_from_locks\":%u,\"rss_before_kb\":%ld,\"rss_after_kb\":%ld,"
                "\"rss_bytes_per_lock\":%.0f,\"failures\":%u}\n",
                held, live_per_lock, live_held, live_released, inflight, live_per_op, held_half,
                before, after, per_lock, h.failures + f.failures);
        fflush(j);
    }
    free(h.locks);
    free(f.locks);
    bench_close(&loop, c);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    if (k.live != 0 || k.blocks != 0)
        bench_broken(cfg, "memory", "%zu bytes in %zu blocks left after the client's close", k.live,
                     k.blocks);
    return 0;
}

int bench_memory(bench_config *cfg)
{
    /* Does the cost per held lock stay flat from 10,000 to 100,000 (issue 13)? */
    static const unsigned targets[] = {10000, 100000}, quick_targets[] = {2000, 10000};
    int rc = 0;
    for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++)
        if (memory_held(cfg, cfg->quick ? quick_targets[i] : targets[i]) != 0)
            rc = -1;
    return rc;
}
