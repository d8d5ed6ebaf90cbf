/* sc_faults.c - latency when nodes stop answering (faults), across added network delay (wan),
 * and memory per held lock (memory). */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "bench.h"

/* ---- faults -------------------------------------------------------------------------------- */

static percentiles acquire_latency(uv_loop_t *loop, redlock_client *c, double seconds,
                                   const char *tag, unsigned *failures)
{
    samples s = {0};
    uint64_t until = bench_now_us() + (uint64_t)(seconds * 1e6);
    unsigned seq = 0;
    while (bench_now_us() < until) {
        char name[64];
        snprintf(name, sizeof(name), "bench:%s:%u", tag, seq++);
        uint64_t acq, rel;
        if (bench_cycle_once(loop, c, name, &acq, &rel) == 0)
            samples_add(&s, acq);
        else
            (*failures)++;
    }
    percentiles p = samples_percentiles(&s);
    samples_free(&s);
    return p;
}

int bench_faults(bench_config *cfg)
{
    if (cfg->n_pids < cfg->n_nodes || cfg->n_nodes < 5) {
        printf("%-11s skipped: needs 5 nodes and their --pids (bench/run passes them)\n", "faults");
        return 1;
    }
    uv_loop_t loop;
    uv_loop_init(&loop);
    redlock_client *c = bench_client(cfg, &loop, NULL, 0, NULL);
    unsigned failures = 0;
    double slice = cfg->duration_s / 3;
    acquire_latency(&loop, c, 0.2, "faults-warm", &failures);
    failures = 0;
    percentiles healthy = acquire_latency(&loop, c, slice, "faults-0", &failures);
    kill(cfg->pids[0], SIGSTOP);
    percentiles one = acquire_latency(&loop, c, slice, "faults-1", &failures);
    kill(cfg->pids[1], SIGSTOP);
    percentiles two = acquire_latency(&loop, c, slice, "faults-2", &failures);
    unsigned unexpected = failures;

    /* Three stopped: every round must fail, in about one node timeout. */
    kill(cfg->pids[2], SIGSTOP);
    samples fail = {0};
    unsigned wrong = 0;
    uint64_t until = bench_now_us() + (uint64_t)(slice * 1e6);
    for (unsigned seq = 0; bench_now_us() < until; seq++) {
        char name[64];
        snprintf(name, sizeof(name), "bench:faults-3:%u", seq);
        uint64_t acq, rel;
        int rc = bench_cycle_once(&loop, c, name, &acq, &rel);
        if (rc == REDLOCK_ENOQUORUM)
            samples_add(&fail, acq);
        else
            wrong++;
    }
    for (unsigned i = 0; i < 3; i++)
        kill(cfg->pids[i], SIGCONT);
    percentiles pf = samples_percentiles(&fail);
    double ratio2 = healthy.p50 != 0 ? (double)two.p50 / (double)healthy.p50 : 0;
    printf("%-11s acquire p50: healthy %llu us, 1 stopped %llu, 2 stopped %llu (x%.2f)  |  3 "
           "stopped: fails in p50 %llu us p99 %llu (node timeout %llu ms)  (%u unexpected)\n",
           "faults", (unsigned long long)healthy.p50, (unsigned long long)one.p50,
           (unsigned long long)two.p50, ratio2, (unsigned long long)pf.p50,
           (unsigned long long)pf.p99, (unsigned long long)cfg->node_timeout_ms,
           unexpected + wrong);
    if (cfg->json != NULL) {
        FILE *f = cfg->json;
        fprintf(f, "{\"scenario\":\"faults\",\"healthy_acquire_us\":");
        json_percentiles(f, &healthy);
        fprintf(f, ",\"one_stopped_acquire_us\":");
        json_percentiles(f, &one);
        fprintf(f, ",\"two_stopped_acquire_us\":");
        json_percentiles(f, &two);
        fprintf(f, ",\"two_stopped_ratio_p50\":%.3f,\"three_stopped_fail_us\":", ratio2);
        json_percentiles(f, &pf);
        fprintf(f, ",\"node_timeout_ms\":%llu,\"unexpected\":%u}\n",
                (unsigned long long)cfg->node_timeout_ms, unexpected + wrong);
        fflush(f);
    }
    samples_free(&fail);
    bench_close(&loop, c);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    /* Let the resumed servers catch up before the next scenario. */
    usleep(200000);
    return unexpected + wrong == 0 ? 0 : -1;
}

/* ---- wan ----------------------------------------------------------------------------------- */

typedef struct proxies {
    pid_t pid;
    FILE *out; /* its stdout */
    FILE *in;  /* its stdin */
    int ports[REDLOCK_MAX_NODES];
} proxies;

static int proxies_start(const bench_config *cfg, unsigned delay_ms, const int *upstream,
                         unsigned n, proxies *p)
{
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(to_child[0], 0);
        dup2(from_child[1], 1);
        close(to_child[1]);
        close(from_child[0]);
        char delay[16];
        snprintf(delay, sizeof(delay), "%u", delay_ms);
        char *argv[REDLOCK_MAX_NODES + 4];
        char ports[REDLOCK_MAX_NODES][16];
        unsigned a = 0;
        argv[a++] = (char *)cfg->proxy_path;
        argv[a++] = "--delay-ms";
        argv[a++] = delay;
        for (unsigned i = 0; i < n; i++) {
            snprintf(ports[i], sizeof(ports[i]), "%d", upstream[i]);
            argv[a++] = ports[i];
        }
        argv[a] = NULL;
        execv(cfg->proxy_path, argv);
        _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    p->pid = pid;
    p->in = fdopen(to_child[1], "w");
    p->out = fdopen(from_child[0], "r");
    char line[128];
    unsigned got = 0;
    while (fgets(line, sizeof(line), p->out) != NULL) {
        if (strncmp(line, "ready", 5) == 0)
            return got == n ? 0 : -1;
        int pp, up;
        if (sscanf(line, "%d %d", &pp, &up) == 2 && got < n)
            p->ports[got++] = pp;
    }
    return -1;
}

static void proxies_stop(proxies *p)
{
    if (p->in != NULL) {
        fputs("quit\n", p->in);
        fclose(p->in);
    }
    if (p->out != NULL)
        fclose(p->out);
    int status;
    while (waitpid(p->pid, &status, 0) < 0 && errno == EINTR)
        ;
}

/* Median PING round trip through one proxy. */
static uint64_t ping_rtt_us(int port)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c == NULL || c->err) {
        if (c != NULL)
            redisFree(c);
        return UINT64_MAX;
    }
    samples s = {0};
    for (int i = 0; i < 7; i++) {
        uint64_t t0 = bench_now_us();
        redisReply *r = redisCommand(c, "PING");
        if (r != NULL)
            freeReplyObject(r);
        samples_add(&s, bench_now_us() - t0);
    }
    redisFree(c);
    percentiles p = samples_percentiles(&s);
    samples_free(&s);
    return p.p50;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int bench_wan(bench_config *cfg)
{
    static const unsigned delays[] = {0, 1, 5, 20, 50};
    if (cfg->proxy_path == NULL || access(cfg->proxy_path, X_OK) != 0) {
        printf("%-11s skipped: needs the delay proxy program (--proxy PATH)\n", "wan");
        return 1;
    }
    int upstream[REDLOCK_MAX_NODES];
    for (unsigned i = 0; i < cfg->n_nodes; i++) {
        redlock_url u;
        int ok = redlock_url_parse(&u, cfg->urls[i], NULL, 0) == 0 && !u.is_unix &&
                 u.password == NULL && strcmp(u.host, "127.0.0.1") == 0;
        upstream[i] = ok ? u.port : 0;
        redlock_url_free(&u);
        if (!ok) {
            printf("%-11s skipped: needs plain redis://127.0.0.1:PORT nodes\n", "wan");
            return 1;
        }
    }
    int rc = 0;
    for (size_t d = 0; d < sizeof(delays) / sizeof(delays[0]); d++) {
        proxies p;
        memset(&p, 0, sizeof(p));
        if (proxies_start(cfg, delays[d], upstream, cfg->n_nodes, &p) != 0) {
            fprintf(stderr, "redlock-bench: wan: cannot start %s\n", cfg->proxy_path);
            if (p.pid > 0)
                proxies_stop(&p);
            return -1;
        }
        char urls[REDLOCK_MAX_NODES][64];
        const char *list[REDLOCK_MAX_NODES];
        uint64_t rtt[REDLOCK_MAX_NODES];
        for (unsigned i = 0; i < cfg->n_nodes; i++) {
            snprintf(urls[i], sizeof(urls[i]), "redis://127.0.0.1:%d", p.ports[i]);
            list[i] = urls[i];
            rtt[i] = ping_rtt_us(p.ports[i]);
        }
        qsort(rtt, cfg->n_nodes, sizeof(rtt[0]), cmp_u64);
        uint64_t floor_us = rtt[cfg->n_nodes / 2]; /* the quorum-th smallest round trip */

        uv_loop_t loop;
        uv_loop_init(&loop);
        redlock_options o;
        redlock_options_init(&o);
        o.ttl_ms = cfg->ttl_ms;
        o.node_timeout_ms = cfg->node_timeout_ms + 4 * delays[d];
        o.retry_count = 0;
        redlock_client *c = bench_client(cfg, &loop, list, cfg->n_nodes, &o);
        unsigned failures = 0;
        acquire_latency(&loop, c, 0.2, "wan-warm", &failures);
        failures = 0;
        percentiles pa = acquire_latency(&loop, c, cfg->duration_s / 5, "wan", &failures);
        double over_ms = ((double)pa.p50 - (double)floor_us) / 1000.0;
        printf("%-11s delay %2u ms: acquire p50 %6llu us p99 %6llu  |  floor (3rd RTT) %6llu us  "
               "|  p50 - floor %+.2f ms  (%u failed)\n",
               "wan", delays[d], (unsigned long long)pa.p50, (unsigned long long)pa.p99,
               (unsigned long long)floor_us, over_ms, failures);
        if (cfg->json != NULL) {
            fprintf(cfg->json, "{\"scenario\":\"wan\",\"delay_ms\":%u,\"acquire_us\":", delays[d]);
            json_percentiles(cfg->json, &pa);
            fprintf(cfg->json, ",\"floor_us\":%llu,\"p50_minus_floor_ms\":%.3f,\"failures\":%u}\n",
                    (unsigned long long)floor_us, over_ms, failures);
            fflush(cfg->json);
        }
        if (failures != 0)
            rc = -1;
        bench_close(&loop, c);
        uv_run(&loop, UV_RUN_DEFAULT);
        uv_loop_close(&loop);
        proxies_stop(&p);
    }
    return rc;
}

/* ---- memory -------------------------------------------------------------------------------- */

static long rss_kb(void)
{
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
    (void)result;
    holder *h = data;
    if (status == 0)
        h->locks[h->finished] = lock;
    else
        h->failures++;
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

int bench_memory(bench_config *cfg)
{
    const unsigned target = cfg->quick ? 2000 : 10000;
    uv_loop_t loop;
    uv_loop_init(&loop);
    redlock_client *c = bench_client(cfg, &loop, NULL, 0, NULL);
    uint64_t a, r;
    bench_cycle_once(&loop, c, "bench:mem:warm", &a, &r); /* connections and buffers exist */
    long before = rss_kb();
    holder h;
    memset(&h, 0, sizeof(h));
    h.c = c;
    h.target = target;
    h.inflight_max = 256;
    h.locks = calloc(target, sizeof(*h.locks));
    take_more(&h);
    bench_run_until(&loop, &h.done, bench_now_us() + 120000000);
    long after = rss_kb();
    unsigned held = h.finished - h.failures;
    double per_lock = held > 0 ? (double)(after - before) * 1024.0 / held : 0;
    printf("%-11s %u locks held: RSS +%ld KiB, %.0f bytes per held lock  (%u failed)\n", "memory",
           held, after - before, per_lock, h.failures);
    if (cfg->json != NULL) {
        fprintf(cfg->json,
                "{\"scenario\":\"memory\",\"held_locks\":%u,\"rss_before_kb\":%ld,"
                "\"rss_after_kb\":%ld,\"bytes_per_lock\":%.0f,\"failures\":%u}\n",
                held, before, after, per_lock, h.failures);
        fflush(cfg->json);
    }
    /* Release everything, a bounded number at a time. */
    unsigned left = 0;
    for (unsigned i = 0; i < target; i++) {
        if (h.locks[i] == NULL)
            continue;
        if (redlock_release(h.locks[i], on_dropped, &left) == 0)
            left++;
        if (left >= 256)
            while (left > 128)
                uv_run(&loop, UV_RUN_ONCE);
    }
    while (left > 0)
        uv_run(&loop, UV_RUN_ONCE);
    free(h.locks);
    bench_close(&loop, c);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return h.failures == 0 ? 0 : -1;
}
