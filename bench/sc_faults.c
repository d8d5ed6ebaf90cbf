/* SPDX-License-Identifier: MIT */
/* sc_faults.c - latency when nodes stop answering (faults) and across added network delay
 * (wan). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "bench.h"
#include "raw.h"

/* ---- faults -------------------------------------------------------------------------------- */

/* One acquire + release on a fresh resource, with what the release said of node 0. */
typedef struct detail {
    bool done;
    int status;
    redlock_lock *lock;
    redlock_vote node0;
    unsigned votes_yes, votes_timeout, votes_error;
    char cause[BENCH_CAUSE_LEN]; /* why it failed (bench_cause_of) */
} detail;

static void on_detail(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    detail *d = data;
    d->done = true;
    d->status = status;
    d->lock = lock;
    d->votes_yes = result != NULL ? result->votes_yes : 0;
    d->node0 = result != NULL && result->n_nodes > 0 ? result->nodes[0].vote : REDLOCK_VOTE_NONE;
    d->votes_timeout = result != NULL ? result->votes_timeout : 0;
    d->votes_error = result != NULL ? result->votes_error : 0;
    if (status != 0)
        bench_cause_of(status, result, d->cause, sizeof(d->cause));
}

/* Returns the acquire status; *release_us is 0 and *node0_deleted false when it lost. With
 * all_deleted, whether every node deleted the key on the release (every node was used). With
 * acquired, what the acquire's callback said (its timeouts and cause). */
static int cycle_detail(uv_loop_t *loop, redlock_client *c, const char *name, uint64_t *acquire_us,
                        uint64_t *release_us, bool *node0_deleted, bool *all_deleted,
                        detail *acquired)
{
    if (all_deleted != NULL)
        *all_deleted = false;
    detail a = {0};
    *release_us = 0;
    *node0_deleted = false;
    uint64_t t0 = bench_now_us();
    if (redlock_acquire(c, name, strlen(name), 0, NULL, on_detail, &a) != 0)
        return -1;
    bench_run_until(loop, &a.done, t0 + 60000000);
    uint64_t t1 = bench_now_us();
    *acquire_us = t1 - t0;
    if (acquired != NULL)
        *acquired = a;
    if (a.status != 0)
        return a.status;
    detail r = {0};
    if (redlock_release(a.lock, on_detail, &r) == 0) {
        bench_run_until(loop, &r.done, t1 + 60000000);
        *release_us = bench_now_us() - t1;
        *node0_deleted = r.node0 == REDLOCK_VOTE_YES; /* node 0 had the key: it was used */
        if (all_deleted != NULL)
            *all_deleted = r.votes_yes == redlock_client_node_count(c);
    }
    redlock_lock_free(a.lock);
    return 0;
}

/* Cycles until one whose release deleted the key on every node, at most seconds. */
static int wait_all_used(uv_loop_t *loop, redlock_client *c, double seconds)
{
    uint64_t until = bench_now_us() + (uint64_t)(seconds * 1e6);
    for (unsigned seq = 0; bench_now_us() < until; seq++) {
        char name[64];
        snprintf(name, sizeof(name), "bench:faults-resume:%u", seq);
        uint64_t acq, rel;
        bool used, all;
        if (cycle_detail(loop, c, name, &acq, &rel, &used, &all, NULL) == 0 && all)
            return 0;
    }
    return -1;
}

typedef struct phase {
    const char *name;
    samples acquire, release; /* of the won rounds; acquire of the lost ones when want_fail */
    unsigned down;       /* servers stopped or killed in the phase: their failed votes are due */
    unsigned unexpected; /* a lost round where a win was due, or the other way round */
    unsigned timing_failures; /* a lost round where more nodes timed out than were stopped */
    unsigned node0_used;
} phase;

/* A round lost where a win was due: to the machine's load (true) when more votes failed than
 * servers were down and those of running nodes were timeouts (or connections dropped for not
 * answering); else an unexpected result. */
static bool lost_to_load(const detail *d, unsigned down)
{
    return d->votes_timeout > down ||
           (d->votes_timeout + d->votes_error > down && strstr(d->cause, "no answer") != NULL);
}

/* Back-to-back cycles for seconds. want_fail: every round must fail (no quorum). A round lost
 * to the load (lost_to_load) is a failed cycle of the row, not an unexpected result. */
static void run_phase(uv_loop_t *loop, redlock_client *c, double seconds, phase *p, bool want_fail)
{
    uint64_t until = bench_now_us() + (uint64_t)(seconds * 1e6);
    for (unsigned seq = 0; bench_now_us() < until; seq++) {
        char name[64];
        snprintf(name, sizeof(name), "bench:faults-%s:%u", p->name, seq);
        uint64_t acq, rel;
        bool used;
        detail d = {0};
        int rc = cycle_detail(loop, c, name, &acq, &rel, &used, NULL, &d);
        if (!want_fail && rc != 0 && lost_to_load(&d, p->down)) {
            p->timing_failures++;
            bench_cause_text(d.cause);
            continue;
        }
        if (want_fail ? rc != REDLOCK_ENOQUORUM : rc != 0) {
            if (p->unexpected++ == 0)
                fprintf(stderr, "redlock-bench: faults: %s: a round ended %s\n", p->name,
                        redlock_err_name(rc));
            continue;
        }
        samples_add(&p->acquire, acq);
        if (rc == 0)
            samples_add(&p->release, rel);
        p->node0_used += used;
    }
}

static void phase_report(bench_config *cfg, phase *p, const char *extra)
{
    percentiles pa = samples_percentiles(&p->acquire), pr = samples_percentiles(&p->release);
    printf("%-11s %-13s acquire p50 %5llu us p99 %6llu | release p50 %5llu us | %u unexpected%s\n",
           "faults", p->name, (unsigned long long)pa.p50, (unsigned long long)pa.p99,
           (unsigned long long)pr.p50, p->unexpected, extra);
    bench_row_failures(cfg, "faults", p->name, p->timing_failures, pa.n);
    if (p->unexpected > 0)
        bench_broken(cfg, "faults",
                     "%s: %u of %zu rounds ended otherwise than due (the first "
                     "said above)",
                     p->name, p->unexpected, pa.n + p->unexpected);
    if (cfg->json != NULL) {
        FILE *f = cfg->json;
        json_begin(f, "faults");
        fprintf(f, ",\"phase\":\"%s\",\"acquire_us\":", p->name);
        json_percentiles(f, &pa);
        fprintf(f, ",\"release_us\":");
        json_percentiles(f, &pr);
        fprintf(f, ",\"node_timeout_ms\":%llu,\"unexpected\":%u,\"failures\":%u",
                (unsigned long long)cfg->node_timeout_ms, p->unexpected, p->timing_failures);
    }
}

static void phase_end(bench_config *cfg, phase *p)
{
    if (cfg->json != NULL) {
        fprintf(cfg->json, "}\n");
        fflush(cfg->json);
    }
    samples_free(&p->acquire);
    samples_free(&p->release);
}

/* The configuration a redis-server runs with, read from it (its command line cannot be: the
 * server rewrites its process title), as arguments to start it again the same way. */
#define RESTART_ARGS 40
static const char *const carried[] = {
    "port",
    "bind",
    "dir",
    "logfile",
    "save",
    "appendonly",
    "requirepass",
    "tls-port",
    "tls-cert-file",
    "tls-key-file",
    "tls-ca-cert-file",
    "tls-auth-clients",
};

typedef struct restart {
    char exe[4096];
    char *argv[RESTART_ARGS];
    unsigned argc;
} restart;

static void restart_free(restart *r)
{
    for (unsigned i = 0; i < r->argc; i++)
        free(r->argv[i]);
    r->argc = 0;
}

static int restart_read(const bench_config *cfg, pid_t pid, restart *r)
{
    memset(r, 0, sizeof(*r));
    char link[64];
    snprintf(link, sizeof(link), "/proc/%ld/exe", (long)pid);
    ssize_t len = readlink(link, r->exe, sizeof(r->exe) - 1);
    if (len <= 0)
        return -1;
    r->exe[len] = '\0';
    redlock_url u;
    if (redlock_url_parse(&u, cfg->urls[0], NULL, 0) != 0 || u.is_unix) {
        redlock_url_free(&u);
        return -1;
    }
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout(u.host, u.port, tv);
    int rc = c != NULL && !c->err ? 0 : -1;
    if (rc == 0 && u.password != NULL) {
        redisReply *a = u.user != NULL ? redisCommand(c, "AUTH %s %s", u.user, u.password)
                                       : redisCommand(c, "AUTH %s", u.password);
        if (a == NULL || a->type == REDIS_REPLY_ERROR)
            rc = -1;
        if (a != NULL)
            freeReplyObject(a);
    }
    /* argv[0] picks the mode (the same binary is redis-check-rdb and redis-check-aof). */
    r->argv[r->argc++] = strdup("redis-server");
    for (size_t i = 0; rc == 0 && i < sizeof(carried) / sizeof(carried[0]); i++) {
        redisReply *rep = redisCommand(c, "CONFIG GET %s", carried[i]);
        if (rep == NULL) {
            rc = -1;
            break;
        }
        if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
            rep->element[1]->type == REDIS_REPLY_STRING &&
            (rep->element[1]->len > 0 || strcmp(carried[i], "save") == 0)) {
            char opt[64];
            snprintf(opt, sizeof(opt), "--%s", carried[i]);
            r->argv[r->argc++] = strdup(opt);
            r->argv[r->argc++] = strdup(rep->element[1]->str);
        }
        freeReplyObject(rep);
    }
    if (c != NULL)
        redisFree(c);
    redlock_url_free(&u);
    return rc;
}

/* Starts it again, as a child that dies with the bench (PR_SET_PDEATHSIG): no server outlives the
 * run. */
static pid_t restart_start(const restart *r)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1)
        _exit(127);
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
    }
    execv(r->exe, r->argv);
    _exit(127);
}

/* Waits until the server at url answers PING, at most seconds; 0 when it does. */
static int wait_answering(const char *url, double seconds)
{
    redlock_url u;
    if (redlock_url_parse(&u, url, NULL, 0) != 0 || u.is_unix) {
        redlock_url_free(&u);
        return -1;
    }
    int rc = -1;
    uint64_t until = bench_now_us() + (uint64_t)(seconds * 1e6);
    while (rc != 0 && bench_now_us() < until) {
        struct timeval tv = {0, 200000};
        redisContext *c = redisConnectWithTimeout(u.host, u.port, tv);
        if (c != NULL && !c->err) {
            redisReply *rep = redisCommand(c, "PING");
            rc = rep != NULL && (rep->type == REDIS_REPLY_STATUS ||
                                 (rep->type == REDIS_REPLY_ERROR && u.password != NULL))
                     ? 0
                     : -1;
            if (rep != NULL)
                freeReplyObject(rep);
        }
        if (c != NULL)
            redisFree(c);
        if (rc != 0)
            usleep(10000);
    }
    redlock_url_free(&u);
    return rc;
}

int bench_faults(bench_config *cfg)
{
    if (cfg->n_pids < cfg->n_nodes || cfg->n_nodes != 5) {
        printf("%-11s skipped: needs 5 nodes and their --pids (bench/run passes them)\n", "faults");
        return 1;
    }
    restart rs;
    if (restart_read(cfg, cfg->pids[0], &rs) != 0) {
        restart_free(&rs);
        printf("%-11s skipped: cannot read node 0's server (pid %ld) to restart it (needs a "
               "local redis:// node and /proc)\n",
               "faults", (long)cfg->pids[0]);
        return 1;
    }
    uv_loop_t loop;
    uv_loop_init(&loop);
    /* Its releases wait for every node: what each node did (node 0's delete, every node used
     * again) is what this scenario reads, and its release rows keep that meaning. */
    redlock_options o;
    redlock_options_init(&o);
    o.ttl_ms = cfg->ttl_ms;
    o.node_timeout_ms = cfg->node_timeout_ms;
    o.drift_factor = cfg->drift_factor;
    o.retry_count = 0;
    o.release_waits_all = true;
    redlock_client *c = bench_client(cfg, &loop, NULL, 0, &o);
    double slice = cfg->duration_s / 4;
    phase warm = {.name = "warm"};
    run_phase(&loop, c, 0.2, &warm, false);
    bench_causes_clear(); /* a warm-up's failures are no row's */
    phase_end(&(bench_config){0}, &warm);
    int rc = 0;

    phase healthy = {.name = "healthy"};
    run_phase(&loop, c, slice, &healthy, false);
    uint64_t healthy_p50 = samples_percentiles(&healthy.acquire).p50;
    phase_report(cfg, &healthy, "");
    phase_end(cfg, &healthy);

    /* SIGSTOP: the server holds its connections and answers nothing. */
    static const char *const stopped_names[3] = {"one_stopped", "two_stopped", "three_stopped"};
    for (unsigned k = 0; k < 3; k++) {
        kill(cfg->pids[k], SIGSTOP);
        phase p = {.name = stopped_names[k], .down = k + 1};
        run_phase(&loop, c, slice, &p, k == 2);
        char extra[96] = "";
        double ratio = 0;
        if (k < 2 && healthy_p50 > 0) {
            ratio = (double)samples_percentiles(&p.acquire).p50 / (double)healthy_p50;
            snprintf(extra, sizeof(extra), " | x%.2f healthy", ratio);
        } else if (k == 2) {
            snprintf(extra, sizeof(extra), " | must fail: time to fail");
        }
        phase_report(cfg, &p, extra);
        if (cfg->json != NULL && k < 2)
            fprintf(cfg->json, ",\"acquire_p50_vs_healthy\":%.3f", ratio);
        phase_end(cfg, &p);
    }
    for (unsigned k = 0; k < 3; k++)
        kill(cfg->pids[k], SIGCONT);
    /* The client dropped the silent connections: wait until it uses every node again. */
    if (wait_all_used(&loop, c, 30) != 0)
        bench_broken(cfg, "faults", "the resumed nodes were not used again within 30 s");

    /* SIGKILL: the server is gone for good; connects are refused. */
    kill(cfg->pids[0], SIGKILL);
    phase killed = {.name = "killed", .down = 1};
    run_phase(&loop, c, slice, &killed, false);
    phase_report(cfg, &killed, "");
    if (killed.node0_used != 0)
        bench_broken(cfg, "faults",
                     "killed: node 0 counted as used %u times after its server "
                     "was killed",
                     killed.node0_used);
    phase_end(cfg, &killed);

    /* Started again, empty: how long until the client uses it again (a release deletes the key
     * there, so the acquire had set it). */
    uint64_t t_start = bench_now_us();
    pid_t child = restart_start(&rs);
    double up_ms = -1, back_ms = -1;
    phase restarted = {.name = "restarted"};
    if (child < 0 || wait_answering(cfg->urls[0], 10) != 0) {
        fprintf(stderr, "redlock-bench: faults: node 0's server did not start again:");
        for (unsigned i = 0; i < rs.argc; i++)
            fprintf(stderr, " '%s'", rs.argv[i]);
        fprintf(stderr, "\n");
        rc = -1;
    } else {
        uint64_t t_up = bench_now_us();
        up_ms = (double)(t_up - t_start) / 1000.0;
        uint64_t until = t_up + 30000000;
        for (unsigned seq = 0; bench_now_us() < until; seq++) {
            char name[64];
            snprintf(name, sizeof(name), "bench:faults-back:%u", seq);
            uint64_t acq, rel;
            bool used;
            detail d = {0};
            int st = cycle_detail(&loop, c, name, &acq, &rel, &used, NULL, &d);
            if (st != 0 && lost_to_load(&d, 1)) { /* node 0 is not back in use yet */
                restarted.timing_failures++;
                bench_cause_text(d.cause);
            } else if (st != 0) {
                restarted.unexpected++;
            }
            if (used) {
                back_ms = (double)(bench_now_us() - t_up) / 1000.0;
                break;
            }
        }
        if (back_ms < 0)
            bench_broken(cfg, "faults",
                         "restarted: node 0 not used again within 30 s of its "
                         "server answering");
        run_phase(&loop, c, slice, &restarted, false);
    }
    char extra[128];
    snprintf(extra, sizeof(extra), " | up %.0f ms, used %.0f ms later", up_ms, back_ms);
    phase_report(cfg, &restarted, extra);
    if (cfg->json != NULL)
        fprintf(cfg->json, ",\"up_after_ms\":%.1f,\"back_after_ms\":%.1f", up_ms, back_ms);
    phase_end(cfg, &restarted);
    restart_free(&rs);
    bench_close(&loop, c);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return rc;
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

/* One raw fan-out cycle through the proxies, waited for. */
typedef struct raw_once {
    bool done;
    int won;
    uint64_t set_us, release_us;
} raw_once;

static void on_raw_once(void *data, int won, uint64_t set_us, uint64_t release_us)
{
    raw_once *o = data;
    o->done = true;
    o->won = won;
    o->set_us = set_us;
    o->release_us = release_us;
}

/* Per-node one-way delays (ms) of each wan setting: equal ones first (the proxies' own cost, and
 * the case where waiting for a quorum and waiting for all look the same), then unequal ones,
 * where a decision at the quorum waits for the third-fastest node, not the slowest; the last
 * spans a continent (a 300 ms round trip). */
#define WAN_SETTINGS 4
static const unsigned wan_delays[WAN_SETTINGS][5] = {
    {0, 0, 0, 0, 0},
    {1, 1, 5, 20, 50},
    {5, 20, 20, 50, 50},
    {1, 5, 20, 50, 150},
};

typedef struct wan_once {
    bool done;
    int status;
    redlock_lock *lock;
} wan_once;

static void on_wan_once(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)result;
    wan_once *o = data;
    o->done = true;
    o->status = status;
    o->lock = lock;
}

/* Run the loop until o is done (bounded by a minute: a hung node is a failed cycle). */
static int wan_wait(uv_loop_t *loop, wan_once *o, uint64_t t0)
{
    bench_run_until(loop, &o->done, t0 + 60000000);
    return o->done ? o->status : -1;
}

/* One acquire, extend and release, each timed; 0 when all three succeeded. */
static int wan_cycle(uv_loop_t *loop, redlock_client *c, const char *resource, uint64_t ttl_ms,
                     uint64_t *acquire_us, uint64_t *extend_us, uint64_t *release_us)
{
    wan_once a = {0}, e = {0}, r = {0};
    uint64_t t0 = bench_now_us();
    if (redlock_acquire(c, resource, strlen(resource), 0, NULL, on_wan_once, &a) != 0)
        return -1;
    int rc = wan_wait(loop, &a, t0);
    uint64_t t1 = bench_now_us();
    *acquire_us = t1 - t0;
    if (rc != 0)
        return rc;
    rc = redlock_extend(a.lock, ttl_ms, 0, on_wan_once, &e) != 0 ? -1 : wan_wait(loop, &e, t1);
    uint64_t t2 = bench_now_us();
    *extend_us = t2 - t1;
    int rrc = redlock_release(a.lock, on_wan_once, &r) != 0 ? -1 : wan_wait(loop, &r, t2);
    *release_us = bench_now_us() - t2;
    redlock_lock_free(a.lock);
    return rc != 0 ? rc : rrc;
}

static int wan_setting(bench_config *cfg, const int *upstream, const unsigned *delays)
{
    unsigned n = cfg->n_nodes;
    proxies p[REDLOCK_MAX_NODES];
    memset(p, 0, sizeof(p));
    int rc = 0;
    unsigned started = 0;
    for (unsigned i = 0; i < n; i++) {
        if (proxies_start(cfg, delays[i], &upstream[i], 1, &p[i]) != 0) {
            fprintf(stderr, "redlock-bench: wan: cannot start %s\n", cfg->proxy_path);
            if (p[i].pid > 0)
                proxies_stop(&p[i]);
            rc = -1;
            break;
        }
        started++;
    }
    char urls[REDLOCK_MAX_NODES][64];
    const char *list[REDLOCK_MAX_NODES];
    uint64_t rtt[REDLOCK_MAX_NODES];
    for (unsigned i = 0; rc == 0 && i < n; i++) {
        snprintf(urls[i], sizeof(urls[i]), "redis://127.0.0.1:%d", p[i].ports[0]);
        list[i] = urls[i];
        rtt[i] = ping_rtt_us(p[i].ports[0]);
    }
    uv_loop_t loop;
    uv_loop_init(&loop);
    redlock_client *c = NULL;
    raw *r = NULL;
    if (rc == 0) {
        qsort(rtt, n, sizeof(rtt[0]), bench_cmp_u64);
        /* The library's default timeouts (adaptive: not --node-timeout), as a new user has them
         * across datacenters; no retry, so a round that timed out counts as a failure. */
        redlock_options o;
        redlock_options_init(&o);
        o.ttl_ms = cfg->ttl_ms;
        o.drift_factor = cfg->drift_factor;
        o.retry_count = 0;
        c = bench_client(cfg, &loop, list, n, &o);
        char err[256];
        r = raw_new(&loop, list, n, err, sizeof(err));
        if (r == NULL) {
            fprintf(stderr, "redlock-bench: wan: raw fan-out: %s\n", err);
            rc = -1;
        }
    }
    if (rc == 0) {
        uint64_t floor_us = rtt[n / 2]; /* the quorum-th smallest round trip */
        samples acq = {0}, ext = {0}, rel = {0}, cyc = {0}, raw_set = {0}, raw_rel = {0};
        unsigned failures = 0, seq = 0;
        double slice = cfg->duration_s / (WAN_SETTINGS * 4);
        /* Slices L R R L after a warm-up of each. */
        for (int k = -2; k < 4; k++) {
            bool lock_side = k < 0 ? k == -2 : (k == 0 || k == 3);
            uint64_t until = bench_now_us() + (uint64_t)((k < 0 ? 0.2 : slice) * 1e6);
            while (bench_now_us() < until) {
                char name[64];
                int len = snprintf(name, sizeof(name), "bench:wan:%u", seq++);
                if (lock_side) {
                    uint64_t a = 0, x = 0, rl = 0;
                    if (wan_cycle(&loop, c, name, cfg->ttl_ms, &a, &x, &rl) != 0) {
                        failures += k >= 0;
                        continue;
                    }
                    if (k >= 0) {
                        samples_add(&acq, a);
                        samples_add(&ext, x);
                        samples_add(&rel, rl);
                        samples_add(&cyc, a + rl);
                    }
                } else {
                    raw_once o = {0};
                    raw_cycle(r, name, (size_t)len, cfg->ttl_ms, RAW_WAIT_QUORUM, on_raw_once, &o);
                    while (!o.done)
                        uv_run(&loop, UV_RUN_ONCE);
                    if (k >= 0) {
                        samples_add(&raw_set, o.set_us);
                        samples_add(&raw_rel, o.release_us);
                    }
                }
            }
        }
        percentiles pa = samples_percentiles(&acq), px = samples_percentiles(&ext),
                    pr = samples_percentiles(&rel), pc = samples_percentiles(&cyc),
                    prs = samples_percentiles(&raw_set), prr = samples_percentiles(&raw_rel);
        /* Acquire and release are both decided at the quorum: each one's floor is the
         * quorum-th round trip, a cycle's the sum of the two. */
        double over_ms = ((double)pa.p50 - (double)floor_us) / 1000.0;
        double release_over_ms = ((double)pr.p50 - (double)floor_us) / 1000.0;
        double cycle_over_ms = ((double)pc.p50 - 2.0 * (double)floor_us) / 1000.0;
        printf("%-11s delays", "wan");
        for (unsigned i = 0; i < n; i++)
            printf("%s%u", i == 0 ? " " : ",", delays[i]);
        printf(" ms: acquire p50 %6llu us p99 %6llu  |  floor (3rd RTT) %6llu us, raw (quorum) "
               "%6llu us  |  p50 - floor %+.2f ms  |  extend p50 %llu us  |  release p50 %llu us "
               "(- floor %+.2f ms), raw %llu  |  cycle p50 %llu us (- 2 floors %+.2f ms)  (%u "
               "failed, default timeouts)\n",
               (unsigned long long)pa.p50, (unsigned long long)pa.p99, (unsigned long long)floor_us,
               (unsigned long long)prs.p50, over_ms, (unsigned long long)px.p50,
               (unsigned long long)pr.p50, release_over_ms, (unsigned long long)prr.p50,
               (unsigned long long)pc.p50, cycle_over_ms, failures);
        if (cfg->json != NULL) {
            FILE *f = cfg->json;
            json_begin(f, "wan");
            fprintf(f, ",\"raw_wait\":\"%s\",\"delays_ms\":[", raw_wait_name(RAW_WAIT_QUORUM));
            for (unsigned i = 0; i < n; i++)
                fprintf(f, "%s%u", i == 0 ? "" : ",", delays[i]);
            fprintf(f, "],\"rtt_us\":[");
            for (unsigned i = 0; i < n; i++)
                fprintf(f, "%s%llu", i == 0 ? "" : ",", (unsigned long long)rtt[i]);
            fprintf(f, "],\"acquire_us\":");
            json_percentiles(f, &pa);
            fprintf(f, ",\"extend_us\":");
            json_percentiles(f, &px);
            fprintf(f, ",\"release_us\":");
            json_percentiles(f, &pr);
            fprintf(f, ",\"cycle_us\":");
            json_percentiles(f, &pc);
            fprintf(f, ",\"raw_set_us\":");
            json_percentiles(f, &prs);
            fprintf(f, ",\"raw_release_us\":");
            json_percentiles(f, &prr);
            fprintf(f,
                    ",\"floor_us\":%llu,\"raw_us\":%llu,\"p50_minus_floor_ms\":%.3f,"
                    "\"p50_minus_raw_ms\":%.3f,\"release_p50_minus_floor_ms\":%.3f,"
                    "\"cycle_p50_minus_floors_ms\":%.3f,\"failures\":%u}\n",
                    (unsigned long long)floor_us, (unsigned long long)prs.p50, over_ms,
                    ((double)pa.p50 - (double)prs.p50) / 1000.0, release_over_ms, cycle_over_ms,
                    failures);
            fflush(f);
        }
        char row[48] = "delays";
        for (unsigned i = 0, used = 6; i < n && used < sizeof(row); i++)
            used += (unsigned)snprintf(row + used, sizeof(row) - used, "%s%u", i == 0 ? " " : ",",
                                       delays[i]);
        bench_row_failures(cfg, "wan", row, failures, cyc.n + failures);
        samples_free(&acq);
        samples_free(&ext);
        samples_free(&rel);
        samples_free(&cyc);
        samples_free(&raw_set);
        samples_free(&raw_rel);
    }
    raw_free(r);
    if (c != NULL)
        bench_close(&loop, c);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    for (unsigned i = 0; i < started; i++)
        proxies_stop(&p[i]);
    return rc;
}

int bench_wan(bench_config *cfg)
{
    if (cfg->proxy_path == NULL) {
        printf("%-11s skipped: needs the delay proxy program (--proxy PATH)\n", "wan");
        return 1;
    }
    if (cfg->n_nodes != 5) {
        printf("%-11s skipped: its delays are set for 5 nodes\n", "wan");
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
    for (unsigned d = 0; d < WAN_SETTINGS; d++)
        if (wan_setting(cfg, upstream, wan_delays[d]) != 0)
            rc = -1;
    return rc;
}
