/* SPDX-License-Identifier: MIT */
/* redlock-bench - how fast libredlock takes and releases locks, next to the raw limit measured
 * in the same run on the same nodes.
 *
 *   redlock-bench --nodes URL,URL,... [--scenario NAME]... [--duration S] [--json FILE]
 *                 [--quick] [--pids PID,PID,...] [--proxy PATH] [--node-timeout MS]
 *                 [--tls-nodes URL,URL,... --tls-ca FILE [--tls-cert FILE --tls-key FILE]]
 *                 [--scale-nodes URL,URL,...] [--cluster-former PATH] [--then CMD]
 *                 [--break-lock]
 *
 * Scenarios: latency, limit (the servers' own capacity: the lock cycle's commands pipelined with
 * no lock logic), throughput (with the fraction of the limit it reaches), scale (1 to 9 nodes:
 * the first N of --scale-nodes, or of --nodes without it), contention, faults (needs --pids of
 * the node servers), wan (needs --proxy, the delay proxy program), memory, tls (needs
 * --tls-nodes: the same servers' TLS ports, in the order of --nodes), fencing (plain against
 * fenced locks), multi (locks on 1, 2, 4 and 8 resources at once), cluster (every node a Redis
 * Cluster of 1, 2 and 3 masters beside the plain nodes; needs --cluster-former, the program that
 * forms them, bench/clusters.sh). Default: all that can run.
 * Every scenario prints a table row and, with --json, one JSON object per line; a row with
 * failed cycles says how many and why on a line under it, and the run ends with a closing line
 * (outcome.c): exit 0 when every correctness check passed (failed cycles are figures), 1 when
 * one failed, 2 when a scenario could not be made. With --then, a command runs after each
 * scenario (bench/run --peers runs another implementation's workload
 * that way, right after the library's, on the same servers). */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <uv.h>

#include "bench.h"
#include "redlock.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: redlock-bench --nodes URL[,URL...] [--scenario NAME]... [--duration S]\n"
               "                     [--json FILE] [--quick] [--pids PID,...] [--proxy PATH]\n"
               "                     [--node-timeout MS]\n"
               "                     [--tls-nodes URL,... --tls-ca FILE [--tls-cert FILE\n"
               "                      --tls-key FILE]]\n"
               "                     [--scale-nodes URL,... (up to nine, for scale)]\n"
               "                     [--cluster-former PATH (forms the clusters, for cluster)]\n"
               "                     [--then CMD (run after each scenario)]\n"
               "                     [--break-lock (contention without its lock: must fail)]\n"
               "scenarios: latency limit throughput scale contention faults wan memory tls\n"
               "           fencing multi cluster (default: all that can run)\n");
}

static unsigned split_list(char *list, const char **out, unsigned max)
{
    unsigned n = 0;
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok != NULL && n < max;
         tok = strtok_r(NULL, ",", &save))
        out[n++] = tok;
    return n;
}

static void cpu_model(char *out, size_t len)
{
    snprintf(out, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL)
        return;
    char line[512];
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "model name", 10) == 0) {
            char *colon = strchr(line, ':');
            if (colon != NULL) {
                snprintf(out, len, "%s", colon + 2);
                out[strcspn(out, "\n")] = '\0';
            }
            break;
        }
    }
    fclose(f);
}

static void redis_version(const bench_config *cfg, char *out, size_t len)
{
    snprintf(out, len, "unknown");
    redlock_url u;
    if (redlock_url_parse(&u, cfg->urls[0], NULL, 0) != 0) {
        redlock_url_free(&u);
        return;
    }
    struct timeval tv = {1, 0};
    redisContext *c = u.is_unix ? redisConnectUnixWithTimeout(u.path, tv)
                                : redisConnectWithTimeout(u.host, u.port, tv);
    if (c != NULL && !c->err) {
        if (u.password != NULL) {
            redisReply *a = u.user != NULL ? redisCommand(c, "AUTH %s %s", u.user, u.password)
                                           : redisCommand(c, "AUTH %s", u.password);
            if (a != NULL)
                freeReplyObject(a);
        }
        redisReply *r = redisCommand(c, "INFO server");
        if (r != NULL && r->type == REDIS_REPLY_STRING) {
            const char *v = strstr(r->str, "redis_version:");
            if (v != NULL) {
                snprintf(out, len, "%s", v + 14);
                out[strcspn(out, "\r\n")] = '\0';
            }
        }
        if (r != NULL)
            freeReplyObject(r);
    }
    if (c != NULL)
        redisFree(c);
    redlock_url_free(&u);
}

/* The checkout the bench binary sits in (build dirs live in the source tree): its commit, with
 * "-dirty" when files differ from it. "unknown" outside a git checkout. */
static void source_commit(char *out, size_t len)
{
    snprintf(out, len, "unknown");
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash != NULL)
        *slash = '\0';
    if (strchr(exe, '\'') != NULL)
        return;
    char cmd[4200];
    snprintf(cmd, sizeof(cmd),
             "git -C '%s' describe --always --dirty --abbrev=12 --match=none 2>/dev/null", exe);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return;
    char line[128];
    if (fgets(line, sizeof(line), p) != NULL && line[0] != '\0' && line[0] != '\n') {
        line[strcspn(line, "\n")] = '\0';
        snprintf(out, len, "%s", line);
    }
    pclose(p);
}

typedef struct machine {
    long cores;
    char cpu[256], redis[64], commit[128], utc[32];
    double load_start[3];
} machine;

static void print_machine(const bench_config *cfg, machine *m)
{
    cpu_model(m->cpu, sizeof(m->cpu));
    redis_version(cfg, m->redis, sizeof(m->redis));
    source_commit(m->commit, sizeof(m->commit));
    time_t now = time(NULL);
    strftime(m->utc, sizeof(m->utc), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    if (getloadavg(m->load_start, 3) != 3)
        m->load_start[0] = m->load_start[1] = m->load_start[2] = -1;
    m->cores = sysconf(_SC_NPROCESSORS_ONLN);
    printf("machine: %ld cores, %s; load average %.2f %.2f %.2f at the start\n", m->cores, m->cpu,
           m->load_start[0], m->load_start[1], m->load_start[2]);
    if (m->load_start[0] > (double)m->cores / 2)
        printf("WARNING: the load average at the start (%.2f) exceeds half the cores (%ld): other "
               "work is running, every figure is slower and noisier than this machine alone "
               "would give; compare ratios of one run, not absolute figures\n",
               m->load_start[0], m->cores);
    printf("source: %s, %s\n", m->commit, m->utc);
    printf("versions: redis-server %s, hiredis %d.%d.%d, libuv %s, libredlock %s\n", m->redis,
           HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH, uv_version_string(),
           redlock_version_string());
    printf("settings: %u nodes, duration %.1f s per scenario%s, ttl %llu ms, node timeout %llu "
           "ms, drift %.3f\n",
           cfg->n_nodes, cfg->duration_s, cfg->quick ? " (quick)" : "",
           (unsigned long long)cfg->ttl_ms, (unsigned long long)cfg->node_timeout_ms,
           cfg->drift_factor);
    fflush(stdout);
}

/* The machine line comes after every scenario's (before the outcome line): it carries the load
 * average at the end too. */
static void json_machine(const bench_config *cfg, const machine *m)
{
    double end[3];
    if (getloadavg(end, 3) != 3)
        end[0] = end[1] = end[2] = -1;
    printf("machine: load average %.2f %.2f %.2f at the end\n", end[0], end[1], end[2]);
    if (cfg->json == NULL)
        return;
    FILE *f = cfg->json;
    json_begin(f, "machine");
    fprintf(f, ",\"cores\":%ld,\"cpu\":", m->cores);
    json_string(f, m->cpu);
    fprintf(f, ",\"commit\":");
    json_string(f, m->commit);
    fprintf(f, ",\"utc\":");
    json_string(f, m->utc);
    fprintf(f, ",\"loadavg_start\":[%.2f,%.2f,%.2f],\"loadavg_end\":[%.2f,%.2f,%.2f]",
            m->load_start[0], m->load_start[1], m->load_start[2], end[0], end[1], end[2]);
    if (m->load_start[0] > (double)m->cores / 2)
        fprintf(f, ",\"warning\":\"load average at the start above half the cores\"");
    fprintf(f, ",\"redis_server\":");
    json_string(f, m->redis);
    fprintf(f,
            ",\"hiredis\":\"%d.%d.%d\",\"libuv\":\"%s\",\"libredlock\":\"%s\",\"nodes\":%u,"
            "\"duration_s\":%.1f,\"quick\":%s,\"ttl_ms\":%llu,\"node_timeout_ms\":%llu,"
            "\"drift_factor\":%.3f}\n",
            HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH, uv_version_string(),
            redlock_version_string(), cfg->n_nodes, cfg->duration_s, cfg->quick ? "true" : "false",
            (unsigned long long)cfg->ttl_ms, (unsigned long long)cfg->node_timeout_ms,
            cfg->drift_factor);
    fflush(f);
}

/* Every node answers before anything is measured: 0, or 69 (EX_UNAVAILABLE) with a message.
 * TLS nodes are only connected to (TCP); their handshake is the tls scenario's business. */
static int probe_node(const char *url)
{
    redlock_url u;
    char err[256];
    if (redlock_url_parse(&u, url, err, sizeof(err)) != 0) {
        fprintf(stderr, "redlock-bench: %s\n", err);
        redlock_url_free(&u);
        return 64;
    }
    struct timeval tv = {2, 0};
    redisContext *c = u.is_unix ? redisConnectUnixWithTimeout(u.path, tv)
                                : redisConnectWithTimeout(u.host, u.port, tv);
    int rc = 0;
    if (c == NULL || c->err) {
        fprintf(stderr, "redlock-bench: cannot reach node %s: %s\n", u.redacted,
                c != NULL ? c->errstr : "out of memory");
        rc = 69;
    } else if (!u.tls) {
        redisReply *r = NULL;
        if (u.password != NULL) {
            r = u.user != NULL ? redisCommand(c, "AUTH %s %s", u.user, u.password)
                               : redisCommand(c, "AUTH %s", u.password);
            if (r != NULL && r->type != REDIS_REPLY_ERROR) {
                freeReplyObject(r);
                r = NULL;
            }
        }
        if (r == NULL)
            r = redisCommand(c, "PING");
        if (r == NULL || r->type == REDIS_REPLY_ERROR) {
            fprintf(stderr, "redlock-bench: node %s does not answer: %s\n", u.redacted,
                    r != NULL ? r->str : c->errstr);
            rc = 69;
        }
        if (r != NULL)
            freeReplyObject(r);
    }
    if (c != NULL)
        redisFree(c);
    redlock_url_free(&u);
    return rc;
}

/* Bad input is refused before any figure: 64 (EX_USAGE) for arguments, 69 for what they name
 * that is not there. */
static int check_input(const bench_config *cfg, unsigned n_pid_args)
{
    if (cfg->n_nodes == 0) {
        fprintf(stderr, "redlock-bench: no nodes\n");
        return 64;
    }
    if (n_pid_args != 0 && cfg->n_pids != cfg->n_nodes) {
        fprintf(stderr, "redlock-bench: --pids names %u pids for %u nodes\n", cfg->n_pids,
                cfg->n_nodes);
        return 64;
    }
    if (cfg->n_tls != 0 && (cfg->n_tls != cfg->n_nodes || cfg->tls_ca == NULL)) {
        fprintf(stderr, "redlock-bench: --tls-nodes needs one URL per node and --tls-ca\n");
        return 64;
    }
    if (cfg->proxy_path != NULL && access(cfg->proxy_path, X_OK) != 0) {
        fprintf(stderr, "redlock-bench: --proxy %s: %s\n", cfg->proxy_path, strerror(errno));
        return 64;
    }
    if (cfg->cluster_former != NULL && access(cfg->cluster_former, X_OK) != 0) {
        fprintf(stderr, "redlock-bench: --cluster-former %s: %s\n", cfg->cluster_former,
                strerror(errno));
        return 64;
    }
    for (unsigned i = 0; i < cfg->n_pids; i++) {
        if (kill(cfg->pids[i], 0) != 0 && errno == ESRCH) {
            fprintf(stderr, "redlock-bench: --pids: no process %ld\n", (long)cfg->pids[i]);
            return 69;
        }
    }
    for (unsigned i = 0; i < cfg->n_nodes; i++) {
        int rc = probe_node(cfg->urls[i]);
        if (rc != 0)
            return rc;
    }
    for (unsigned i = 0; i < cfg->n_tls; i++) {
        int rc = probe_node(cfg->tls_urls[i]);
        if (rc != 0)
            return rc;
    }
    for (unsigned i = 0; i < cfg->n_scale; i++) {
        int rc = probe_node(cfg->scale_urls[i]);
        if (rc != 0)
            return rc;
    }
    return 0;
}

extern char **environ;

/* --then: after a scenario, cmd runs through /bin/sh with the scenario's settings as its
 * arguments (--scenario NAME --nodes URL,... --duration S, and --quick in a quick run), and the
 * bench waits for it. Output already printed is flushed first, so the two stay in order. Returns
 * 0, or -1 (said) when it could not run or exited non-zero. */
static int run_then(const char *cmd, const char *scenario, const char *nodes,
                    const bench_config *cfg)
{
    fflush(stdout);
    if (cfg->json != NULL)
        fflush(cfg->json);
    size_t len = strlen(cmd) + sizeof(" \"$@\"");
    char *script = malloc(len);
    if (script == NULL) {
        fprintf(stderr, "redlock-bench: --then: out of memory\n");
        return -1;
    }
    snprintf(script, len, "%s \"$@\"", cmd);
    char duration_s[32];
    snprintf(duration_s, sizeof(duration_s), "%g", cfg->duration_s);
    char *quick = cfg->quick ? "--quick" : NULL; /* the end of the list when not quick */
    char *argv[] = {
        "sh",      "-c",          script,       "sh",       "--scenario", (char *)scenario,
        "--nodes", (char *)nodes, "--duration", duration_s, quick,        NULL};
    pid_t pid;
    int err = posix_spawn(&pid, "/bin/sh", NULL, NULL, argv, environ);
    free(script);
    if (err != 0) {
        fprintf(stderr, "redlock-bench: --then: cannot run /bin/sh: %s\n", strerror(err));
        return -1;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "redlock-bench: --then: %s\n", strerror(errno));
            return -1;
        }
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    fprintf(stderr, "redlock-bench: --then after %s: %s %d\n", scenario,
            WIFEXITED(status) ? "exit status" : "killed by signal",
            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return -1;
}

typedef struct scenario {
    const char *name;
    int (*run)(bench_config *cfg);
} scenario;

/* In the order they run (limit before throughput, which reads its figure), one a line. */
/* clang-format off */
static const scenario scenarios[] = {
    {"latency", bench_latency},
    {"limit", bench_limit},
    {"throughput", bench_throughput},
    {"scale", bench_scale},
    {"contention", bench_contention},
    {"faults", bench_faults},
    {"wan", bench_wan},
    {"memory", bench_memory},
    {"tls", bench_tls},
    {"fencing", bench_fencing},
    {"multi", bench_multi},
    {"cluster", bench_cluster},
};
/* clang-format on */
#define N_SCENARIOS (sizeof(scenarios) / sizeof(scenarios[0]))

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    bench_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.duration_s = 5;
    cfg.ttl_ms = 10000;
    cfg.node_timeout_ms = 50;
    cfg.drift_factor = 0.01;
    bool wanted[N_SCENARIOS] = {false};
    bool any_wanted = false;
    char *nodes = getenv("REDLOCK_NODES");
    char *pids = NULL;
    char *tls_nodes = NULL;
    char *scale_nodes = NULL;
    const char *json_path = NULL;
    const char *then_cmd = NULL;
    unsigned n_pid_args = 0;

    static const struct option longopts[] = {
        {"nodes", required_argument, NULL, 'n'},
        {"scenario", required_argument, NULL, 's'},
        {"duration", required_argument, NULL, 'd'},
        {"json", required_argument, NULL, 'j'},
        {"quick", no_argument, NULL, 'q'},
        {"pids", required_argument, NULL, 'p'},
        {"proxy", required_argument, NULL, 'x'},
        {"plot", required_argument, NULL, 'P'},
        {"node-timeout", required_argument, NULL, 'T'},
        {"tls-nodes", required_argument, NULL, 'S'},
        {"tls-ca", required_argument, NULL, 'A'},
        {"tls-cert", required_argument, NULL, 'C'},
        {"tls-key", required_argument, NULL, 'K'},
        {"scale-nodes", required_argument, NULL, 'N'},
        {"cluster-former", required_argument, NULL, 'F'},
        {"then", required_argument, NULL, 'W'},
        {"break-lock", no_argument, NULL, 'B'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "n:s:d:j:qp:x:P:T:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'n':
            nodes = optarg;
            break;
        case 's': {
            bool found = false;
            for (size_t i = 0; i < N_SCENARIOS; i++)
                if (strcmp(optarg, scenarios[i].name) == 0)
                    wanted[i] = found = true;
            if (!found) {
                fprintf(stderr, "redlock-bench: unknown scenario \"%s\"\n", optarg);
                usage(stderr);
                return 64;
            }
            any_wanted = true;
            break;
        }
        case 'd': {
            char *end;
            errno = 0;
            cfg.duration_s = strtod(optarg, &end);
            if (errno != 0 || *end != '\0' || !(cfg.duration_s > 0 && cfg.duration_s <= 3600)) {
                fprintf(stderr, "redlock-bench: bad duration \"%s\" (seconds, 0..3600)\n", optarg);
                return 64;
            }
            break;
        }
        case 'j':
            json_path = optarg;
            break;
        case 'q':
            cfg.quick = true;
            break;
        case 'p':
            pids = optarg;
            break;
        case 'x':
            cfg.proxy_path = optarg;
            break;
        case 'P':
            cfg.plot_path = optarg;
            break;
        case 'T': {
            char *end;
            errno = 0;
            unsigned long long ms = strtoull(optarg, &end, 10);
            if (errno != 0 || *end != '\0' || optarg[0] == '-' || ms < 1 || ms > 3600000) {
                fprintf(stderr, "redlock-bench: bad node timeout \"%s\" (ms, 1..3600000)\n",
                        optarg);
                return 64;
            }
            cfg.node_timeout_ms = ms;
            break;
        }
        case 'S':
            tls_nodes = optarg;
            break;
        case 'A':
            cfg.tls_ca = optarg;
            break;
        case 'C':
            cfg.tls_cert = optarg;
            break;
        case 'K':
            cfg.tls_key = optarg;
            break;
        case 'N':
            scale_nodes = optarg;
            break;
        case 'F':
            cfg.cluster_former = optarg;
            break;
        case 'W':
            then_cmd = optarg;
            break;
        case 'B':
            cfg.break_lock = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 64;
        }
    }
    if (optind != argc || nodes == NULL) {
        fprintf(stderr, "redlock-bench: %s\n",
                nodes == NULL ? "no nodes: give --nodes or $REDLOCK_NODES" : "stray argument");
        usage(stderr);
        return 64;
    }
    char *nodes_copy = strdup(nodes);
    cfg.n_nodes = split_list(nodes_copy, cfg.urls, REDLOCK_MAX_NODES);
    if (pids != NULL) {
        char *pids_copy = strdup(pids);
        const char *list[REDLOCK_MAX_NODES];
        unsigned n = split_list(pids_copy, list, REDLOCK_MAX_NODES);
        for (unsigned i = 0; i < n; i++) {
            char *end;
            errno = 0;
            long v = strtol(list[i], &end, 10);
            if (errno != 0 || *end != '\0' || v <= 0) {
                fprintf(stderr, "redlock-bench: bad pid \"%s\" in --pids\n", list[i]);
                free(pids_copy);
                return 64;
            }
            cfg.pids[i] = (pid_t)v;
        }
        cfg.n_pids = n;
        n_pid_args = n;
        free(pids_copy);
    }
    char *tls_copy = NULL;
    if (tls_nodes != NULL) {
        tls_copy = strdup(tls_nodes);
        cfg.n_tls = split_list(tls_copy, cfg.tls_urls, REDLOCK_MAX_NODES);
    }
    char *scale_copy = NULL;
    if (scale_nodes != NULL) {
        scale_copy = strdup(scale_nodes);
        cfg.n_scale = split_list(scale_copy, cfg.scale_urls, REDLOCK_MAX_NODES);
    }
    if (cfg.quick && cfg.duration_s > 1)
        cfg.duration_s = 1;
    int bad = check_input(&cfg, n_pid_args);
    if (bad != 0) {
        free(nodes_copy);
        free(tls_copy);
        free(scale_copy);
        return bad;
    }
    if (json_path != NULL) {
        cfg.json = fopen(json_path, "w");
        if (cfg.json == NULL) {
            fprintf(stderr, "redlock-bench: cannot write %s: %s\n", json_path, strerror(errno));
            return 73;
        }
    }

    machine m;
    print_machine(&cfg, &m);
    for (size_t i = 0; i < N_SCENARIOS; i++) {
        if (any_wanted && !wanted[i])
            continue;
        unsigned notes = cfg.outcome.n_broken + cfg.outcome.n_not_made;
        int rc = scenarios[i].run(&cfg);
        /* A scenario says what failed itself; one that returns -1 without a word was not made. */
        if (rc < 0 && cfg.outcome.n_broken + cfg.outcome.n_not_made == notes)
            bench_not_made(&cfg, scenarios[i].name, "stopped with an error (said above)");
        if (then_cmd != NULL && run_then(then_cmd, scenarios[i].name, nodes, &cfg) != 0)
            bench_not_made(&cfg, scenarios[i].name, "--then failed (said above)");
    }
    json_machine(&cfg, &m);
    if (cfg.plot_path != NULL)
        bench_plot(&cfg);
    int status = bench_outcome_end(&cfg);
    if (cfg.json != NULL)
        fclose(cfg.json);
    free(nodes_copy);
    free(tls_copy);
    free(scale_copy);
    bench_results_free(&cfg);
    return status;
}
