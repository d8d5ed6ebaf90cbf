/* SPDX-License-Identifier: MIT */
/* torture.c - mutual-exclusion torture: P worker processes x T threads contend for R Redlock
 * locks over 5 real redis-servers, each behind a loopback fault proxy (test/proxy/proxy.h) that
 * the workers connect through, while the driver makes faults on a minority of the nodes: it
 * kills, restarts, pauses and resumes servers, and flips proxy faults (blackhole, a delay above
 * the node timeout, a reset of every connection, refused connections). It also pauses whole
 * worker processes (pauses.h: SIGSTOP, then SIGCONT 10 ms to 1.5 ttl later), and a share of the
 * holds run on to the deadline the library reported before they release (worker.h), so that
 * the deadline, not the release, ends those holds. An independent checker (checker.h) then
 * reads what every holder logged.
 *
 *   torture [--seconds S] [--procs P] [--threads T] [--resources R] [--seed N]
 *           [--hold-ms MS] [--unsafe-wipe] [--no-pauses] [--deadline-holds PERMILLE]
 *           [--verbose] [--keep-logs]
 *
 * S defaults to $TORTURE_SECONDS, else 60 (the CI run); a long run is TORTURE_SECONDS=600 or
 * --seconds 600, a shorter one (a sanitizer build) TORTURE_SECONDS=20. The seed defaults to
 * $TORTURE_SEED, else time and pid; it is printed, and passing it back repeats the same chaos
 * schedule and choices (not the same timings).
 *
 * Output is TAP, seven tests:
 *   1 no two holds of one resource overlap        (checker; a hold ends at min(release,
 *                                                  deadline), so this holds the deadline too)
 *   2 every counter equals its increments         (checker)
 *   3 no lock key is left on the lock nodes, ttl after the last release
 *   4 every worker exited 0 within S + wait + 30 s (hung ones are SIGKILLed and reported)
 *   5 every resource was held at least once       (liveness under a minority of faults)
 *   6 every fault kind was made at least once, and healed (skipped below 10 s)
 *   7 workers were paused and resumed, and holds ended at their deadline (skipped below 10 s)
 *   8 fences of successive holds grow, and the fenced store accepted no stale write
 *     (fence_check.h; the even resources' locks are fenced, the odd ones' plain waiters handed
 *     the lock by grants; skipped in the negative control, whose writes are not fenced)
 * --hold-ms adds MS between the GET and the SET (a longer critical section). --no-pauses stops
 * the worker pauses; --deadline-holds sets how many holds in 1000 run on to their deadline (5;
 * each with a ttl of 100 ms, so it keeps its resource from the others only that long).
 * --unsafe-wipe is the negative control: instead of a minority's faults, the chaos FLUSHALLs a
 * majority of the nodes (a restart with data loss and no delay, which Redlock does not
 * survive); tests 1 and 2 are then inverted and pass only if the checker sees overlapping holds
 * and lost updates, which shows the torture can see a broken lock at all.
 * The logs stay in a temp directory (printed) when anything fails, or with --keep-logs.
 *
 * The chaos (chaos.h) keeps Redlock's assumptions, so any violation is the library's (or the
 * harness's):
 *   - at most 2 of the 5 lock nodes are faulty at any time, so a quorum of 3 is there (a fault
 *     made in the middle of a round still costs that round). Faulty is: killed, paused, behind
 *     a proxy that blackholes, delays or refuses, or just back (restarted, resumed, healed or
 *     reset: the clients may not have reconnected yet, within reconnect_max_ms + 50% jitter,
 *     plus a round trip of the old delay, or a connect timeout after a blackhole);
 *   - a killed node loses its data (the fixture runs without persistence), which Redlock only
 *     tolerates if the node stays down for a ttl: every lock it voted for has expired by then.
 *     So a killed node is restarted no sooner than ttl + 50 ms after its kill ("delayed
 *     restart", antirez's answer to the crash-recovery problem). A paused node keeps its data
 *     and its keys expire on the wall clock, so it may resume at any time;
 *   - a proxy fault loses no data. A blackhole holds what it swallows and passes it on when
 *     healed (a delay, likewise, later): a command can reach its node after its deadline, after
 *     its sender's release, even after its sender exited. Its reply no longer counts as a vote,
 *     so a late SET only makes a key that refuses others for a ttl; a late release or extend
 *     compares the token first. Neither can give two holders a quorum. (The final key check
 *     closes every proxied connection first, so no late SET lands after it starts counting.)
 *   - a paused worker is a holder that cannot look at its clock: its hold ends at its deadline
 *     (the checker's rule), and it writes nothing after it, because no pause falls between its
 *     last look at the deadline and the end of its write (worker.h: that step is the gap only
 *     a fence closes, and a pause there would lose counter updates by design).
 * The chaos runs on the driver's main thread, between polls of the workers: the fixture is not
 * thread-safe and the servers die when the thread that forked them exits. The proxies run
 * their own threads, started after the workers are forked (see start_workers).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "chaos.h"
#include "checker.h"
#include "fence_check.h"
#include "fixture.h"
#include "pauses.h"
#include "proxy.h"
#include "redlock.h"
#include "worker.h"

#define N_LOCK_NODES CHAOS_NODES
#define HANG_SLACK_S 30 /* beyond S + wait, a worker still running is hung */
#define MAX_PROCS 64
#define MAX_THREADS 64
#define ALL_KINDS_MIN_S 10 /* a run this long makes every fault kind (test 6) */

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ---- the worker processes -------------------------------------------------------------------- */

typedef struct workers {
    pid_t pids[MAX_PROCS]; /* 0 once reaped */
    unsigned running;
    unsigned failed; /* exited non-zero or by a signal */
    unsigned hung;   /* still running at the hang deadline: SIGKILLed */
} workers;

static void reaped(workers *ws, pid_t pid, int status)
{
    for (unsigned i = 0; i < MAX_PROCS; i++) {
        if (ws->pids[i] != pid || pid == 0)
            continue;
        ws->pids[i] = 0;
        ws->running--;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            ws->failed++;
            fprintf(stderr, "worker %u (pid %d) %s %d\n", i, (int)pid,
                    WIFEXITED(status) ? "exited with" : "died of signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        }
    }
}

static void reaped_by_pauses(void *ctx, pid_t pid, int status)
{
    reaped(ctx, pid, status);
}

static void reap(workers *ws)
{
    int status;
    pid_t pid;
    while (ws->running > 0 && (pid = waitpid(-1, &status, WNOHANG)) > 0)
        reaped(ws, pid, status);
}

static void kill_hung(workers *ws, uint64_t start_us)
{
    for (unsigned i = 0; i < MAX_PROCS; i++) {
        if (ws->pids[i] == 0)
            continue;
        printf("# worker %u (pid %d) hung: still running %.1f s after the start; SIGKILL\n", i,
               (int)ws->pids[i], (double)(redlock_now_us() - start_us) / 1e6);
        kill(ws->pids[i], SIGKILL);
        int status;
        waitpid(ws->pids[i], &status, 0);
        ws->pids[i] = 0;
        ws->running--;
        ws->hung++;
    }
}

/* The lock nodes' ports (the proxies'), sent to every worker once the proxies listen. */
typedef struct gate_msg {
    int ports[N_LOCK_NODES];
} gate_msg;

/* A worker process: wait at the gate for the proxies' ports, then run. */
static int worker_process(const torture_config *parent_cfg, unsigned process, int gate_fd)
{
    gate_msg msg;
    size_t got = 0;
    while (got < sizeof(msg)) {
        ssize_t n = read(gate_fd, (char *)&msg + got, sizeof(msg) - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            fprintf(stderr, "worker %u: no proxy ports: the driver gave up\n", process);
            return 1;
        }
        got += (size_t)n;
    }
    close(gate_fd);
    char urls_buf[N_LOCK_NODES][64];
    const char *urls[N_LOCK_NODES];
    for (unsigned i = 0; i < N_LOCK_NODES; i++) {
        snprintf(urls_buf[i], sizeof(urls_buf[i]), "redis://127.0.0.1:%d", msg.ports[i]);
        urls[i] = urls_buf[i];
    }
    torture_config cfg = *parent_cfg;
    cfg.node_urls = urls;
    cfg.n_nodes = N_LOCK_NODES;
    return torture_worker_run(&cfg, process);
}

/* Fork the workers; each waits on the read end of gate for the proxies' ports (open_gate).
 * The proxies are started only after every worker is forked: a child forked later would hold
 * copies of the proxies' sockets, and a socket closes only with its last descriptor, so a reset
 * or a refusal would not close anything (nor stop the listener accepting). */
static unsigned start_workers(const torture_config *cfg, workers *ws, const int gate[2])
{
    fflush(stdout); /* or every child would print a copy of what is still buffered */
    fflush(stderr);
    /* The workers are born with the pause signals blocked, so that only their pause thread
     * takes them (worker.h), even one sent before they set anything up. */
    sigset_t pause_signals, old_mask;
    sigemptyset(&pause_signals);
    sigaddset(&pause_signals, SIGUSR1);
    sigaddset(&pause_signals, SIGUSR2);
    sigprocmask(SIG_BLOCK, &pause_signals, &old_mask);
    for (unsigned p = 0; p < cfg->procs; p++) {
        pid_t pid = fork();
        if (pid == 0) { /* exit(), not _exit(): flushes; the fixture's atexit only forgets */
            close(gate[1]);
            exit(worker_process(cfg, p, gate[0]));
        }
        if (pid < 0) {
            perror("fork");
            break;
        }
        ws->pids[p] = pid;
        ws->running++;
    }
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    close(gate[0]);
    return ws->running;
}

/* Send every worker the proxies' ports, then close the gate (a worker that finds it closed
 * without its message exits 1). One message per worker: a pipe write of at most PIPE_BUF bytes
 * is atomic, and a read of one message's size takes one whole message. */
static int open_gate(int gate_fd, proxy *const *proxies, unsigned procs)
{
    gate_msg msg;
    for (unsigned i = 0; i < N_LOCK_NODES; i++)
        msg.ports[i] = proxy_port(proxies[i]);
    int rc = 0;
    for (unsigned p = 0; p < procs && rc == 0; p++) {
        ssize_t n;
        do {
            n = write(gate_fd, &msg, sizeof(msg));
        } while (n < 0 && errno == EINTR);
        rc = n == (ssize_t)sizeof(msg) ? 0 : -1;
    }
    close(gate_fd);
    return rc;
}

/* Wait for the workers while the chaos and the worker pauses run until cfg->end_us; then heal
 * every node (a paused worker is resumed when its pause is over). */
static void run_chaos(const torture_config *cfg, workers *ws, chaos *ch, pauses *ps,
                      uint64_t start_us)
{
    uint64_t hang_deadline_us = cfg->end_us + (cfg->wait_ms + HANG_SLACK_S * 1000) * 1000;
    uint64_t next_event_us = redlock_now_us() + chaos_gap_us(ch);
    bool healed = false;
    while (ws->running > 0) {
        reap(ws);
        uint64_t now_us = redlock_now_us();
        pauses_step(ps, now_us, cfg->no_pauses ? 0 : cfg->end_us);
        if (now_us < cfg->end_us && now_us >= next_event_us) {
            chaos_step(ch);
            next_event_us = redlock_now_us() + chaos_gap_us(ch);
        } else if (now_us >= cfg->end_us && !healed) {
            chaos_heal_all(ch);
            healed = true;
        }
        if (now_us > hang_deadline_us)
            kill_hung(ws, start_us);
        sleep_ms(5);
    }
    if (!healed)
        chaos_heal_all(ch);
}

/* ---- checks on the servers ------------------------------------------------------------------- */

static int read_counters(fixture_cluster *data, unsigned n, long long *counters)
{
    for (unsigned r = 0; r < n; r++) {
        redisReply *reply = fixture_command(data, 0, "GET torture:counter:%u", r);
        if (reply == NULL)
            return -1;
        counters[r] = reply->type == REDIS_REPLY_STRING ? strtoll(reply->str, NULL, 10) : 0;
        int rc = reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_NIL ? 0 : -1;
        freeReplyObject(reply);
        if (rc != 0)
            return -1;
    }
    return 0;
}

/* Keys on the lock nodes (-1 if a node does not answer). */
static long long lock_keys(fixture_cluster *nodes)
{
    long long total = 0;
    for (unsigned i = 0; i < nodes->n; i++) {
        redisReply *reply = fixture_command(nodes, i, "DBSIZE");
        if (reply == NULL || reply->type != REDIS_REPLY_INTEGER) {
            freeReplyObject(reply);
            return -1;
        }
        total += reply->integer;
        freeReplyObject(reply);
        /* Fence counters (<key>:fence) never expire, by design: they are not lock keys. */
        reply = fixture_command(nodes, i, "KEYS *:fence");
        if (reply == NULL || reply->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(reply);
            return -1;
        }
        total -= (long long)reply->elements;
        freeReplyObject(reply);
    }
    return total;
}

static void print_lock_keys(fixture_cluster *nodes)
{
    for (unsigned i = 0; i < nodes->n; i++) {
        redisReply *keys = fixture_command(nodes, i, "KEYS *");
        for (size_t k = 0; keys != NULL && keys->type == REDIS_REPLY_ARRAY && k < keys->elements;
             k++) {
            size_t len = keys->element[k]->len;
            if (len >= 6 && strcmp(keys->element[k]->str + len - 6, ":fence") == 0)
                continue; /* a fence counter */
            redisReply *pttl = fixture_command(nodes, i, "PTTL %s", keys->element[k]->str);
            printf("#   node %u: %s pttl %lld\n", i, keys->element[k]->str,
                   pttl != NULL && pttl->type == REDIS_REPLY_INTEGER ? pttl->integer : -3);
            freeReplyObject(pttl);
        }
        freeReplyObject(keys);
    }
}

/* Every worker has exited and every node and proxy is healed: a ttl later no key may be left,
 * whatever happened to the releases, once no command of theirs can still reach a server. One
 * could: a blackhole holds what it swallows and passes it on, in order, when healed (a delay
 * queues it), which can be after its sender released or even exited; a held SET then makes a
 * key that lives a ttl from its late arrival (it only refuses others: Redlock stays safe). So
 * close every proxied connection first: a proxy drops what it still holds, and the servers (all
 * running again) read what it already handed to the kernel within milliseconds. No key is made
 * after that, and the ttl is counted from then. DBSIZE also counts expired keys the server has
 * not swept yet, so allow the active expiry a few of its cycles. */
static bool check_no_keys_left(fixture_cluster *nodes, proxy *const *proxies, uint64_t ttl_ms)
{
    for (unsigned i = 0; i < N_LOCK_NODES; i++)
        proxy_close_all(proxies[i]);
    sleep_ms(50);
    long long right_after = lock_keys(nodes);
    printf("# lock keys right after the run: %lld (each must expire within the ttl)\n",
           right_after);
    sleep_ms((unsigned)ttl_ms + 100);
    long long left = -1;
    for (int tries = 0; tries < 30 && left != 0; tries++) {
        if (tries > 0)
            sleep_ms(100);
        left = lock_keys(nodes);
    }
    if (left != 0) {
        printf("# %lld lock keys left a ttl after the run:\n", left);
        print_lock_keys(nodes);
    }
    return left == 0;
}

/* ---- the driver ------------------------------------------------------------------------------ */

static bool parse_count(const char *text, unsigned max, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long n = strtoul(text, &end, 10);
    if (text == NULL || errno != 0 || end == text || *end != '\0' || text[0] == '-' || n < 1 ||
        n > max)
        return false;
    *out = (unsigned)n;
    return true;
}

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [--seconds S] [--procs P] [--threads T] [--resources R] [--seed N]\n"
            "       [--hold-ms MS] [--unsafe-wipe] [--no-pauses] [--deadline-holds PERMILLE]\n"
            "       [--verbose] [--keep-logs]\n"
            "S defaults to $TORTURE_SECONDS or 60, the seed to $TORTURE_SEED or a random one.\n",
            prog);
}

static bool parse_args(int argc, char **argv, torture_config *cfg)
{
    static const struct option options[] = {
        {"seconds", required_argument, NULL, 's'},
        {"procs", required_argument, NULL, 'p'},
        {"threads", required_argument, NULL, 't'},
        {"resources", required_argument, NULL, 'r'},
        {"seed", required_argument, NULL, 'S'},
        {"verbose", no_argument, NULL, 'v'},
        {"keep-logs", no_argument, NULL, 'k'},
        {"hold-ms", required_argument, NULL, 'h'},
        {"unsafe-wipe", no_argument, NULL, 'u'},
        {"no-pauses", no_argument, NULL, 'P'},
        {"deadline-holds", required_argument, NULL, 'd'},
        {NULL, 0, NULL, 0},
    };
    *cfg = (torture_config){.procs = 3,
                            .threads = 4,
                            .resources = 4,
                            .seconds = 60,
                            .seed = (unsigned)time(NULL) ^ ((unsigned)getpid() << 16),
                            .ttl_ms = 1000,
                            .wait_ms = 3000,
                            .margin_ms = 250,
                            .deadline_per_mille = 5,
                            .deadline_ttl_ms = 100,
                            .node_timeout_ms = 100,
                            .reconnect_max_ms = 200,
                            .connect_timeout_ms = 500};
    const char *env = getenv("TORTURE_SECONDS");
    if (env != NULL && !parse_count(env, 1000000, &cfg->seconds)) {
        fprintf(stderr, "TORTURE_SECONDS: a whole number of seconds\n");
        return false;
    }
    env = getenv("TORTURE_SEED");
    if (env != NULL && !parse_count(env, ~0u, &cfg->seed)) {
        fprintf(stderr, "TORTURE_SEED: a positive number\n");
        return false;
    }
    int opt;
    bool ok = true;
    while (ok && (opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (opt) {
        case 's':
            ok = parse_count(optarg, 1000000, &cfg->seconds);
            break;
        case 'p':
            ok = parse_count(optarg, MAX_PROCS, &cfg->procs);
            break;
        case 't':
            ok = parse_count(optarg, MAX_THREADS, &cfg->threads);
            break;
        case 'r':
            ok = parse_count(optarg, TORTURE_MAX_RESOURCES, &cfg->resources);
            break;
        case 'S':
            ok = parse_count(optarg, ~0u, &cfg->seed);
            break;
        case 'v':
            cfg->verbose = true;
            break;
        case 'k':
            cfg->keep_logs = true;
            break;
        case 'h':
            ok = parse_count(optarg, 10000, &cfg->hold_ms);
            break;
        case 'u':
            cfg->unsafe = true;
            break;
        case 'P':
            cfg->no_pauses = true;
            break;
        case 'd':
            ok = parse_count(optarg, 1000, &cfg->deadline_per_mille) || strcmp(optarg, "0") == 0;
            if (strcmp(optarg, "0") == 0)
                cfg->deadline_per_mille = 0;
            break;
        default:
            ok = false;
        }
    }
    if (!ok || optind != argc) {
        usage(argv[0]);
        return false;
    }
    return true;
}

static int load_logs(const torture_config *cfg, torture_history *history)
{
    int rc = 0;
    for (unsigned p = 0; p < cfg->procs; p++) {
        char path[512];
        snprintf(path, sizeof(path), "%s/worker-%u.log", cfg->log_dir, p);
        if (access(path, F_OK) == 0 && torture_history_load(history, path, stdout) != 0)
            rc = -1;
    }
    return rc;
}

static void remove_logs(const torture_config *cfg)
{
    for (unsigned p = 0; p < cfg->procs; p++) {
        char path[512];
        snprintf(path, sizeof(path), "%s/worker-%u.log", cfg->log_dir, p);
        unlink(path);
    }
    torture_fence_remove_logs(cfg->log_dir, cfg->procs);
    rmdir(cfg->log_dir);
}

static unsigned tap(unsigned number, bool ok, const char *what)
{
    printf("%sok %u - %s\n", ok ? "" : "not ", number, what);
    return ok ? 0 : 1;
}

/* Test 6: the run made every kind of fault, and healed each one, so the torture cannot quietly
 * stop exercising one. A short run may not get to all of them; the negative control makes none. */
static unsigned check_fault_kinds(const torture_config *cfg, const chaos *ch)
{
    const char *what = "every fault kind was made and healed: kill, pause, blackhole, delay, "
                       "reset, refuse";
    if (cfg->unsafe) {
        printf("ok 6 - %s # SKIP the negative control makes no minority faults\n", what);
        return 0;
    }
    if (cfg->seconds < ALL_KINDS_MIN_S) {
        printf("ok 6 - %s # SKIP a run shorter than %u s\n", what, ALL_KINDS_MIN_S);
        return 0;
    }
    bool every_kind = true;
    for (unsigned k = 0; k < CHAOS_FAULT_KINDS; k++) {
        if (ch->injected[k] == 0) {
            printf("# no %s fault in the whole run\n", chaos_fault_name((chaos_fault)k));
            every_kind = false;
        }
    }
    unsigned long proxy_faults =
        ch->injected[CHAOS_BLACKHOLE] + ch->injected[CHAOS_DELAY] + ch->injected[CHAOS_REFUSE];
    bool healed = ch->restarts == ch->injected[CHAOS_KILL] &&
                  ch->resumes == ch->injected[CHAOS_PAUSE] && ch->proxy_heals == proxy_faults;
    if (!healed)
        printf("# not every fault was healed\n");
    return tap(6, every_kind && healed, what);
}

/* Test 7: workers were paused and resumed, and holds ended at the deadline the library
 * reported rather than at their release, so test 1 held the deadline itself against the next
 * holder's acquire. A short run may not get to it. */
static unsigned check_deadlines(const torture_config *cfg, const pauses *ps,
                                const torture_verdict *v)
{
    const char *what = "workers were paused and resumed, and holds ended at their deadline";
    if (cfg->seconds < ALL_KINDS_MIN_S) {
        printf("ok 7 - %s # SKIP a run shorter than %u s\n", what, ALL_KINDS_MIN_S);
        return 0;
    }
    bool paused = ps->paused > 0 && ps->resumed == ps->paused && ps->errors == 0;
    if (!paused)
        printf("# no worker was paused, or not every pause ended\n");
    if (v->at_deadline == 0)
        printf("# no hold ended at its deadline\n");
    return tap(7, paused && v->at_deadline > 0, what);
}

/* Test 8: fencing (fence_check.h). */
static unsigned check_fences(const torture_config *cfg, const chaos *ch)
{
    const char *what = "fences of successive holds grow, and the store accepted no stale write";
    if (cfg->unsafe) {
        printf("ok 8 - %s # SKIP the negative control does not fence its writes\n", what);
        return 0;
    }
    torture_fence_verdict fv;
    unsigned long bad = torture_fence_check(cfg->log_dir, cfg->procs, ch->forgot_us, ch->n_forgot,
                                            ch->forgot_overflow, &fv, stdout);
    printf("# fencing: %lu fenced holds, %lu successive pairs, %lu fences not growing (%lu across "
           "a node that lost its data), %lu writes accepted, %lu refused, %lu stale accepted\n",
           fv.holds, fv.order_checks, fv.order_broken + fv.order_excused, fv.order_excused,
           fv.accepted, fv.refused, fv.stale_accepted);
    return tap(8, bad == 0 && fv.holds > 0, what);
}

/* The checks after the run; returns the number of failed TAP tests. */
static unsigned report(const torture_config *cfg, fixture_cluster *nodes, fixture_cluster *data,
                       const workers *ws, const chaos *ch, const pauses *ps, double elapsed_s)
{
    long long counters[TORTURE_MAX_RESOURCES] = {0};
    torture_history history = {0};
    bool logs_ok = load_logs(cfg, &history) == 0;
    bool counters_ok = read_counters(data, cfg->resources, counters) == 0;
    torture_verdict v;
    torture_check(&history, counters, cfg->resources, &v, stdout);
    unsigned held_resources = 0;
    for (unsigned r = 0; r < cfg->resources; r++)
        held_resources += v.increments_per_resource[r] > 0;
    printf("# %.1f s: %lu holds, %lu increments, %lu skipped writes (margin), %lu late writes, "
           "%lu failed releases; %lu failed acquires (%lu busy, %lu no quorum)\n",
           elapsed_s, v.holds, v.increments, v.skipped, v.late_writes, v.release_failures,
           history.failures, history.failures_busy, history.failures_noquorum);
    printf("# %lu holds (%.2f%%) ended at the deadline the library reported, not at their "
           "release: paused past it, or run on to it on purpose\n",
           v.at_deadline, 100.0 * (double)v.at_deadline / (double)(v.holds ? v.holds : 1));
    chaos_print_summary(ch, stdout);
    pauses_print_summary(ps, stdout);

    unsigned failed = 0;
    if (cfg->unsafe) { /* the negative control: the violations must be seen */
        failed += tap(1, logs_ok && v.overlaps > 0 && v.bad_records == 0,
                      "with a majority wiped, the checker sees overlapping holds");
        failed += tap(2, logs_ok && counters_ok && v.counter_mismatches > 0,
                      "with a majority wiped, the checker sees lost updates");
    } else {
        failed += tap(1, logs_ok && v.overlaps == 0 && v.bad_records == 0,
                      "no two holds of one resource overlap");
        failed += tap(2, logs_ok && counters_ok && v.counter_mismatches == 0,
                      "every counter equals the increments made under its lock");
    }
    failed += tap(3, check_no_keys_left(nodes, ch->proxies, cfg->ttl_ms),
                  "no lock key left on the lock nodes a ttl after the run");
    if (ws->hung > 0 || ws->failed > 0)
        printf("# %u workers hung, %u failed (see stderr)\n", ws->hung, ws->failed);
    failed += tap(4, ws->hung == 0 && ws->failed == 0 && ch->errors == 0,
                  "every worker exited 0 in time");
    failed += tap(5, held_resources == cfg->resources, "every resource was held and written");
    failed += check_fault_kinds(cfg, ch);
    failed += check_deadlines(cfg, ps, &v);
    failed += check_fences(cfg, ch);
    torture_history_free(&history);
    return failed;
}

/* Start a proxy in front of each lock node (after the workers are forked: start_workers). */
static int start_proxies(fixture_cluster *nodes, proxy **proxies)
{
    for (unsigned i = 0; i < N_LOCK_NODES; i++) {
        proxies[i] = proxy_start(fixture_free_port(), "127.0.0.1", nodes->servers[i].port);
        if (proxies[i] == NULL)
            return -1;
    }
    return 0;
}

static void stop_proxies(proxy **proxies)
{
    for (unsigned i = 0; i < N_LOCK_NODES; i++) {
        proxy_stop(proxies[i]);
        proxies[i] = NULL;
    }
}

int main(int argc, char **argv)
{
    torture_config cfg;
    if (!parse_args(argc, argv, &cfg))
        return 2;
    signal(SIGPIPE, SIG_IGN); /* a write to a server that just died must not kill the process */
    setvbuf(stdout, NULL, _IOLBF, 0);

    printf("1..8\n");
    static fixture_cluster nodes, data; /* fixed addresses, as the fixture requires */
    if (fixture_start(&nodes, N_LOCK_NODES, NULL) != 0 || fixture_start(&data, 1, NULL) != 0) {
        printf("Bail out! cannot start redis-server\n");
        return 1;
    }
    snprintf(cfg.log_dir, sizeof(cfg.log_dir), "%s/redlock-torture-XXXXXX",
             getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp");
    if (mkdtemp(cfg.log_dir) == NULL) {
        printf("Bail out! mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    cfg.n_nodes = N_LOCK_NODES; /* node_urls: the proxies', made in each worker */
    cfg.data_port = data.servers[0].port;
    printf("# %u s, %u processes x %u threads on %u resources, ttl %llu ms, seed %u "
           "(TORTURE_SEED=%u repeats the choices), logs in %s\n",
           cfg.seconds, cfg.procs, cfg.threads, cfg.resources, (unsigned long long)cfg.ttl_ms,
           cfg.seed, cfg.seed, cfg.log_dir);

    int gate[2];
    if (pipe(gate) != 0) {
        printf("Bail out! pipe: %s\n", strerror(errno));
        return 1;
    }
    workers ws = {0};
    uint64_t start_us = redlock_now_us();
    cfg.end_us = start_us + (uint64_t)cfg.seconds * 1000000;
    unsigned started = start_workers(&cfg, &ws, gate);
    static proxy *proxies[N_LOCK_NODES];
    bool ok = started == cfg.procs && start_proxies(&nodes, proxies) == 0;
    if (ok)
        ok = open_gate(gate[1], proxies, cfg.procs) == 0; /* closes gate[1] */
    else
        close(gate[1]); /* the workers find it closed and exit */
    if (!ok) {
        kill_hung(&ws, start_us);
        stop_proxies(proxies);
        printf("Bail out! cannot fork the workers or start the proxies\n");
        return 1;
    }
    printf("# the workers reach the lock nodes through fault proxies on ports %d %d %d %d %d\n",
           proxy_port(proxies[0]), proxy_port(proxies[1]), proxy_port(proxies[2]),
           proxy_port(proxies[3]), proxy_port(proxies[4]));

    chaos ch;
    chaos_init(&ch, &nodes, proxies, cfg.seed, cfg.ttl_ms, cfg.node_timeout_ms,
               cfg.reconnect_max_ms, cfg.connect_timeout_ms, cfg.verbose, cfg.unsafe);
    pauses ps;
    pauses_init(&ps, ws.pids, cfg.procs, cfg.seed, cfg.ttl_ms, redlock_now_us(), cfg.verbose,
                reaped_by_pauses, &ws);
    run_chaos(&cfg, &ws, &ch, &ps, start_us);
    double elapsed_s = (double)(redlock_now_us() - start_us) / 1e6;

    unsigned failed = report(&cfg, &nodes, &data, &ws, &ch, &ps, elapsed_s);
    if (failed == 0 && !cfg.keep_logs)
        remove_logs(&cfg);
    else
        printf("# logs kept in %s\n", cfg.log_dir);
    stop_proxies(proxies);
    fixture_stop(&nodes);
    fixture_stop(&data);
    return failed == 0 ? 0 : 1;
}
