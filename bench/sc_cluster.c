/* SPDX-License-Identifier: MIT */
/* sc_cluster.c - the cluster scenario: lock cycles (acquire + release, a fresh resource per
 * cycle, as in the throughput scenario; names without a hash tag, so they spread over the slots)
 * per second over as many nodes as --nodes names, each of them a Redis Cluster of M = 1, 2 and 3
 * masters (no replicas), at 64 and 256 in flight. Each row runs beside the plain nodes (--nodes)
 * of the same run, in balanced alternating slices (plain, cluster, cluster, plain, ...), so a
 * machine whose speed drifts favours neither: of_plain is what a cluster node costs or gives
 * against a plain server at the same concurrency, and at M = 1 it is the cost of cluster routing
 * (the library's slot routing and the servers' cluster mode), the one node being one server in
 * both.
 *
 * The clusters come from the --cluster-former program (bench/clusters.sh), one M at a time: run
 * as `PROGRAM NODES M`, it forms them, prints their cluster:// URLs on one line, comma-separated,
 * and keeps its servers until its standard input closes, which this file does when it is done
 * with that M. So one M's servers run at a time, and a bench that dies takes them down with it
 * (the former reads end-of-file). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "bench.h"

#define SLICES 4 /* per side */
#define M_POINTS 3
#define C_POINTS 2
#define UP_WAIT_S 10.0 /* for the client to have every cluster's slot map */

static const unsigned masters_values[M_POINTS] = {1, 2, 3};
static const unsigned levels[C_POINTS] = {64, 256};

extern char **environ;

/* ---- the former: a child that keeps one M's clusters while its standard input is open ------- */

typedef struct former {
    pid_t pid;
    int to_child; /* its standard input; closing it stops the clusters */
} former;

/* Close the former's input and wait for it: 0 when it exited 0, -1 (said) otherwise. */
static int former_stop(const bench_config *cfg, former *f)
{
    close(f->to_child);
    int status;
    while (waitpid(f->pid, &status, 0) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "redlock-bench: cluster former: %s\n", strerror(errno));
            return -1;
        }
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    fprintf(stderr, "redlock-bench: cluster former %s: %s %d\n", cfg->cluster_former,
            WIFEXITED(status) ? "exit status" : "killed by signal",
            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return -1;
}

/* Run the former for n_nodes clusters of masters masters and read its line of URLs into *line
 * (malloc'ed, no newline; the caller frees it). 0, or -1 (said; nothing is left running). */
static int former_start(const bench_config *cfg, unsigned masters, former *f, char **line)
{
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0) {
        fprintf(stderr, "redlock-bench: cluster former: pipe: %s\n", strerror(errno));
        return -1;
    }
    if (pipe2(out, O_CLOEXEC) != 0) {
        fprintf(stderr, "redlock-bench: cluster former: pipe: %s\n", strerror(errno));
        close(in[0]);
        close(in[1]);
        return -1;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    /* The bench ignores SIGPIPE; the former and its servers get the default back. */
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t dfl;
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGPIPE);
    posix_spawnattr_setsigdefault(&attr, &dfl);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
    char nodes_arg[16], masters_arg[16];
    snprintf(nodes_arg, sizeof(nodes_arg), "%u", cfg->n_nodes);
    snprintf(masters_arg, sizeof(masters_arg), "%u", masters);
    char *argv[] = {(char *)cfg->cluster_former, nodes_arg, masters_arg, NULL};
    int err = posix_spawn(&f->pid, cfg->cluster_former, &actions, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    close(in[0]);
    close(out[1]);
    if (err != 0) {
        fprintf(stderr, "redlock-bench: cannot run the cluster former %s: %s\n",
                cfg->cluster_former, strerror(err));
        close(in[1]);
        close(out[0]);
        return -1;
    }
    f->to_child = in[1];
    FILE *from = fdopen(out[0], "r");
    if (from == NULL) {
        close(out[0]);
        former_stop(cfg, f);
        return -1;
    }
    size_t cap = 0;
    *line = NULL;
    ssize_t len = getline(line, &cap, from);
    fclose(from);
    if (len <= 1) {
        fprintf(stderr, "redlock-bench: the cluster former %s gave no URLs for %u masters\n",
                cfg->cluster_former, masters);
        free(*line);
        *line = NULL;
        former_stop(cfg, f);
        return -1;
    }
    (*line)[strcspn(*line, "\n")] = '\0';
    return 0;
}

/* ---- what the servers did ------------------------------------------------------------------ */

/* A blocking connection to every server of a side's nodes (a cluster node's URL host and seeds,
 * which the former makes all its masters), to read their counters between slices. */
typedef struct servers {
    redisContext **conns;
    unsigned n;
    bool broken; /* a reading failed: no server CPU figure for this side */
} servers;

static void servers_add(servers *s, const redlock_url *u, const char *host, int port)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout(host, port, tv);
    if (c != NULL && !c->err && u->password != NULL) {
        redisReply *r = u->user != NULL ? redisCommand(c, "AUTH %s %s", u->user, u->password)
                                        : redisCommand(c, "AUTH %s", u->password);
        if (r != NULL)
            freeReplyObject(r);
    }
    if (c == NULL || c->err) {
        s->broken = true;
        if (c != NULL)
            redisFree(c);
        return;
    }
    s->conns[s->n++] = c;
}

/* Connect to the servers of nodes urls (plain or cluster://; TLS nodes are not read). */
static void servers_open(servers *s, const char *const *urls, unsigned n, unsigned max_servers)
{
    s->n = 0;
    s->broken = false;
    s->conns = calloc(max_servers, sizeof(s->conns[0]));
    if (s->conns == NULL) {
        s->broken = true;
        return;
    }
    for (unsigned i = 0; i < n; i++) {
        redlock_url u;
        if (redlock_url_parse(&u, urls[i], NULL, 0) != 0 || u.host == NULL || u.tls) {
            s->broken = true;
            redlock_url_free(&u);
            continue;
        }
        if (s->n < max_servers)
            servers_add(s, &u, u.host, u.port);
        for (const redlock_url_seed *e = u.seeds; e != NULL && e->host != NULL; e++)
            if (s->n < max_servers)
                servers_add(s, &u, e->host, e->port);
        redlock_url_free(&u);
    }
}

static void servers_close(servers *s)
{
    for (unsigned i = 0; i < s->n; i++)
        redisFree(s->conns[i]);
    free(s->conns);
    s->conns = NULL;
    s->n = 0;
}

/* The number after name in INFO section's text of server i, or -1. */
static double info_field(servers *s, unsigned i, const char *section, const char *name)
{
    redisReply *r = redisCommand(s->conns[i], "INFO %s", section);
    double v = -1;
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        const char *at = strstr(r->str, name);
        v = at != NULL ? strtod(at + strlen(name), NULL) : 0;
    }
    if (r != NULL)
        freeReplyObject(r);
    return v;
}

/* The CPU time the servers have used, user + system, in microseconds (INFO cpu); -1 once a
 * reading failed. */
static double servers_cpu_us(servers *s)
{
    if (s->broken)
        return -1;
    double sum = 0;
    for (unsigned i = 0; i < s->n; i++) {
        double user = info_field(s, i, "cpu", "used_cpu_user:");
        double sys = info_field(s, i, "cpu", "used_cpu_sys:");
        if (user < 0 || sys < 0) {
            s->broken = true;
            return -1;
        }
        sum += (user + sys) * 1e6;
    }
    return sum;
}

/* How many of the servers have run a SET (INFO commandstats): for a cluster side every master,
 * when the fresh names spread over the slots and the library routed them. */
static unsigned servers_with_sets(servers *s)
{
    unsigned used = 0;
    for (unsigned i = 0; i < s->n; i++)
        used += info_field(s, i, "commandstats", "cmdstat_set:calls=") > 0;
    return used;
}

/* ---- the slices ---------------------------------------------------------------------------- */

/* The warm-up before a client's first slice, in seconds. */
static double warm_s(const bench_config *cfg)
{
    return cfg->quick ? 0.1 : 0.3;
}

/* One side of a row: the plain nodes or the clusters. */
typedef struct side {
    redlock_client *client;
    const char *tag; /* in the resources' names */
    servers servers; /* its nodes' servers */
    samples cycle;   /* every finished cycle's time */
    double rates[SLICES];
    unsigned slices;
    uint64_t cycles, failures, cpu_us;
    double server_cpu_us; /* < 0: not known */
} side;

/* One slice; the servers' CPU is read before and after it, outside its time. */
static void side_slice(uv_loop_t *loop, side *s, unsigned width, double seconds)
{
    bench_chain_spec spec = {.tag = s->tag};
    size_t before = s->cycle.n;
    double server0 = servers_cpu_us(&s->servers);
    uint64_t cpu0 = bench_cpu_us();
    double rate =
        bench_chain_spec_run(loop, s->client, width, seconds, &spec, NULL, &s->cycle, &s->failures);
    s->cpu_us += bench_cpu_us() - cpu0;
    double server1 = servers_cpu_us(&s->servers);
    if (server0 < 0 || server1 < 0 || s->server_cpu_us < 0)
        s->server_cpu_us = -1;
    else
        s->server_cpu_us += server1 - server0;
    s->cycles += s->cycle.n - before;
    s->rates[s->slices++] = rate;
}

static void side_reset(side *s)
{
    samples_free(&s->cycle);
    s->slices = 0;
    s->cycles = s->failures = s->cpu_us = 0;
    s->server_cpu_us = 0;
}

/* Run loop until every node of c is up (a cluster: its slot map known), at most seconds. */
static bool wait_up(uv_loop_t *loop, redlock_client *c, unsigned n, double seconds)
{
    uint64_t until = bench_now_us() + (uint64_t)(seconds * 1e6);
    const bool never = false;
    for (;;) {
        unsigned up = 0;
        for (unsigned i = 0; i < n; i++) {
            redlock_node_info info;
            redlock_node_info_init(&info);
            if (redlock_client_node_info(c, i, &info) == 0 && info.state == REDLOCK_NODE_UP)
                up++;
        }
        if (up == n)
            return true;
        if (bench_now_us() >= until)
            return false;
        bench_run_until(loop, &never, bench_now_us() + 10000);
    }
}

typedef struct row {
    unsigned masters, masters_named, masters_used, concurrency;
} row;

static void report(bench_config *cfg, const row *w, side *plain, side *cl)
{
    double sorted[2][SLICES];
    memcpy(sorted[0], plain->rates, sizeof(sorted[0]));
    memcpy(sorted[1], cl->rates, sizeof(sorted[1]));
    double plain_rate = median_of(sorted[0], SLICES), rate = median_of(sorted[1], SLICES);
    double of_plain = ratio_of(rate, plain_rate);
    double cpu = ratio_of((double)cl->cpu_us, (double)cl->cycles);
    double plain_cpu = ratio_of((double)plain->cpu_us, (double)plain->cycles);
    /* The servers' CPU per cycle, all nodes' servers together; < 0 when not read. */
    double server_cpu =
        cl->server_cpu_us < 0 ? -1 : ratio_of(cl->server_cpu_us, (double)cl->cycles);
    double plain_server_cpu =
        plain->server_cpu_us < 0 ? -1 : ratio_of(plain->server_cpu_us, (double)plain->cycles);
    percentiles pc = samples_percentiles(&cl->cycle), pp = samples_percentiles(&plain->cycle);
    printf("%-11s %u master%s/node, %3u in flight: %6.0f cycles/s, plain %6.0f: of plain %.2f "
           "| masters %u/%u\n",
           "cluster", w->masters, w->masters == 1 ? "" : "s", w->concurrency, rate, plain_rate,
           of_plain, w->masters_used, w->masters_named);
    char name[48];
    snprintf(name, sizeof(name), "%u masters/node %u in flight", w->masters, w->concurrency);
    bench_row_failures(cfg, "cluster", name, cl->failures + plain->failures,
                       cl->cycles + plain->cycles);
    if (w->masters_used != w->masters_named)
        bench_broken(cfg, "cluster", "%u masters/node, %u in flight: locks on %u of the %u masters",
                     w->masters, w->concurrency, w->masters_used, w->masters_named);
    if (cfg->json == NULL)
        return;
    FILE *f = cfg->json;
    json_begin(f, "cluster");
    fprintf(f,
            ",\"masters_per_node\":%u,\"nodes\":%u,\"concurrency\":%u,\"cycles_per_s\":%.1f,"
            "\"slices\":",
            w->masters, cfg->n_nodes, w->concurrency, rate);
    json_doubles(f, cl->rates, SLICES);
    fprintf(f, ",\"cycle_us\":");
    json_percentiles(f, &pc);
    fprintf(f, ",\"plain_cycles_per_s\":%.1f,\"plain_slices\":", plain_rate);
    json_doubles(f, plain->rates, SLICES);
    fprintf(f, ",\"plain_cycle_us\":");
    json_percentiles(f, &pp);
    fprintf(f, ",\"of_plain\":%.3f,\"cpu_us_per_cycle\":%.2f,\"plain_cpu_us_per_cycle\":%.2f",
            of_plain, cpu, plain_cpu);
    if (server_cpu >= 0 && plain_server_cpu >= 0)
        fprintf(f, ",\"server_cpu_us_per_cycle\":%.2f,\"plain_server_cpu_us_per_cycle\":%.2f",
                server_cpu, plain_server_cpu);
    else
        fprintf(f, ",\"server_cpu_us_per_cycle\":null,\"plain_server_cpu_us_per_cycle\":null");
    fprintf(f, ",\"masters\":%u,\"masters_used\":%u,\"failures\":%llu,\"plain_failures\":%llu}\n",
            w->masters_named, w->masters_used, (unsigned long long)cl->failures,
            (unsigned long long)plain->failures);
    fflush(f);
}

/* One M: form its clusters, run both levels' slices beside the plain nodes, report, stop them.
 * 0, or -1 (said). */
static int run_masters(bench_config *cfg, uv_loop_t *loop, side *plain, unsigned masters)
{
    former f;
    char *line;
    if (former_start(cfg, masters, &f, &line) != 0)
        return -1;
    const char *urls[REDLOCK_MAX_NODES];
    unsigned n = 0;
    for (char *save = NULL, *tok = strtok_r(line, ",", &save); tok != NULL && n < REDLOCK_MAX_NODES;
         tok = strtok_r(NULL, ",", &save))
        urls[n++] = tok;
    if (n != cfg->n_nodes) {
        fprintf(stderr, "redlock-bench: the cluster former gave %u URLs for %u nodes\n", n,
                cfg->n_nodes);
        free(line);
        former_stop(cfg, &f);
        return -1;
    }
    side cl = {.client = bench_client(cfg, loop, urls, n, NULL), .tag = "cluster"};
    servers_open(&cl.servers, urls, n, n * masters);
    int rc = 0;
    bool up = wait_up(loop, cl.client, n, UP_WAIT_S);
    if (!up) {
        fprintf(stderr,
                "redlock-bench: the clusters of %u master%s: no slot map from every node "
                "within %.0f s\n",
                masters, masters == 1 ? "" : "s", UP_WAIT_S);
        rc = -1;
    }
    /* Connections to every master, scripts loaded; its failures do not count. */
    uint64_t warm = 0;
    bench_chain_spec warm_spec = {.tag = "cluster:warm"};
    if (up)
        bench_chain_spec_run(loop, cl.client, levels[0], warm_s(cfg), &warm_spec, NULL, NULL,
                             &warm);
    bench_causes_clear(); /* a warm-up's failures are no row's */
    /* Each row the duration, as a throughput row; half of it in a quick run, where forming the
     * clusters (about 2 s per M: a new cluster master waits that long before it says ok) is
     * most of the time. */
    double slice = cfg->duration_s / (2 * SLICES) / (cfg->quick ? 2 : 1);
    /* A failed cycle (a node past its deadline on a loaded machine) is a figure of its row. */
    for (unsigned l = 0; up && l < C_POINTS; l++) {
        side_reset(plain);
        side_reset(&cl);
        for (unsigned k = 0; k < 2 * SLICES; k++)
            side_slice(loop, bench_slice_side(k, 2) == 0 ? plain : &cl, levels[l], slice);
        row w = {.masters = masters,
                 .concurrency = levels[l],
                 .masters_named = n * masters,
                 .masters_used = servers_with_sets(&cl.servers)};
        report(cfg, &w, plain, &cl);
    }
    side_reset(&cl);
    servers_close(&cl.servers);
    bench_close(loop, cl.client); /* before its servers go */
    if (former_stop(cfg, &f) != 0)
        rc = -1;
    free(line);
    return rc;
}

int bench_cluster(bench_config *cfg)
{
    if (cfg->cluster_former == NULL) {
        printf("%-11s skipped: needs the cluster former program (--cluster-former PATH; bench/run "
               "--scenario cluster passes it)\n",
               "cluster");
        return 1;
    }
    uv_loop_t loop;
    uv_loop_init(&loop);
    side plain = {.client = bench_client(cfg, &loop, NULL, 0, NULL), .tag = "cluster:plain"};
    servers_open(&plain.servers, cfg->urls, cfg->n_nodes, cfg->n_nodes);
    uint64_t warm = 0;
    bench_chain_spec warm_spec = {.tag = "cluster:plain:warm"};
    bench_chain_spec_run(&loop, plain.client, levels[0], warm_s(cfg), &warm_spec, NULL, NULL,
                         &warm);
    bench_causes_clear();
    int rc = 0;
    for (unsigned i = 0; i < M_POINTS; i++)
        if (run_masters(cfg, &loop, &plain, masters_values[i]) != 0)
            rc = -1;
    side_reset(&plain);
    servers_close(&plain.servers);
    bench_close(&loop, plain.client);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return rc;
}
