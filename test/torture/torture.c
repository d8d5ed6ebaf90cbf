/* torture.c - mutual-exclusion torture: P worker processes x T threads contend for R Redlock
 * locks over 5 real redis-servers while the driver kills, restarts, pauses and resumes a
 * minority of them; an independent checker (checker.h) then reads what every holder logged.
 *
 *   torture [--seconds S] [--procs P] [--threads T] [--resources R] [--seed N]
 *           [--hold-ms MS] [--unsafe-wipe] [--verbose] [--keep-logs]
 *
 * S defaults to $TORTURE_SECONDS, else 20 (the CI run); a long run is TORTURE_SECONDS=600 or
 * --seconds 600. The seed defaults to $TORTURE_SEED, else time and pid; it is printed, and
 * passing it back repeats the same chaos schedule and choices (not the same timings).
 *
 * Output is TAP, five tests:
 *   1 no two holds of one resource overlap        (checker)
 *   2 every counter equals its increments         (checker)
 *   3 no lock key is left on the lock nodes, ttl after the last release
 *   4 every worker exited 0 within S + wait + 30 s (hung ones are SIGKILLed and reported)
 *   5 every resource was held at least once       (liveness under a minority of faults)
 * --hold-ms adds MS between the GET and the SET (a longer critical section). --unsafe-wipe is
 * the negative control: instead of a minority's faults, the chaos FLUSHALLs a majority of the
 * nodes (a restart with data loss and no delay, which Redlock does not survive); tests 1 and 2
 * are then inverted and pass only if the checker sees overlapping holds and lost updates, which
 * shows the torture can see a broken lock at all.
 * The logs stay in a temp directory (printed) when anything fails, or with --keep-logs.
 *
 * The chaos keeps Redlock's assumptions, so any violation is the library's (or the harness's):
 *   - at most 2 of the 5 lock nodes are down, paused or just back (restarted or resumed, the
 *     clients may not have reconnected yet: reconnect_max_ms + 50% jitter) at any time, so a
 *     quorum of 3 is there (a node killed in the middle of a round still costs that round);
 *   - a killed node loses its data (the fixture runs without persistence), which Redlock only
 *     tolerates if the node stays down for a ttl: every lock it voted for has expired by then.
 *     So a killed node is restarted no sooner than ttl + 50 ms after its kill ("delayed
 *     restart", antirez's answer to the crash-recovery problem). A paused node keeps its data
 *     and its keys expire on the wall clock, so it may resume at any time.
 * The chaos runs on the driver's main thread, between polls of the workers: the fixture is not
 * thread-safe and the servers die when the thread that forked them exits.
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

#include "checker.h"
#include "fixture.h"
#include "redlock.h"
#include "worker.h"

#define N_LOCK_NODES 5
#define MAX_FAULTY 2        /* a minority of N_LOCK_NODES */
#define CHAOS_MIN_GAP_MS 50 /* between chaos events: uniform in [min, max] */
#define CHAOS_MAX_GAP_MS 400
#define RESTART_SLACK_MS 50 /* a killed node stays down ttl + this */
#define HANG_SLACK_S 30     /* beyond S + wait, a worker still running is hung */
#define MAX_PROCS 64
#define MAX_THREADS 64

/* A restarted node is up, but until the clients have reconnected to it (within their longest
 * backoff, reconnect_max_ms + 50% jitter) they see it down: it still counts as faulty then. So
 * does a resumed one: a client drops a connection that owes answers for too long, and a pause
 * of a few hundred ms is enough. */
typedef enum { NODE_UP, NODE_KILLED, NODE_PAUSED, NODE_RECOVERING } node_state;

typedef struct chaos {
    fixture_cluster *nodes;
    unsigned seed;
    uint64_t ttl_us;
    uint64_t recovery_us; /* how long a restarted node counts as faulty */
    bool verbose;
    bool unsafe; /* negative control: wipe a majority instead of a minority's faults */
    node_state state[N_LOCK_NODES];
    uint64_t since_us[N_LOCK_NODES]; /* when the node went down or was paused */
    unsigned long kills, restarts, pauses, resumes, wipes, errors;
} chaos;

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static unsigned count_faulty(chaos *ch)
{
    uint64_t now_us = redlock_now_us();
    unsigned n = 0;
    for (unsigned i = 0; i < N_LOCK_NODES; i++) {
        if (ch->state[i] == NODE_RECOVERING && now_us >= ch->since_us[i] + ch->recovery_us)
            ch->state[i] = NODE_UP;
        n += ch->state[i] != NODE_UP;
    }
    return n;
}

/* A random node in state want, or -1 if none. */
static int pick_node(chaos *ch, node_state want)
{
    unsigned start = (unsigned)rand_r(&ch->seed) % N_LOCK_NODES;
    for (unsigned k = 0; k < N_LOCK_NODES; k++) {
        unsigned i = (start + k) % N_LOCK_NODES;
        if (ch->state[i] == want)
            return (int)i;
    }
    return -1;
}

static void chaos_note(chaos *ch, const char *what, unsigned node, int rc)
{
    if (rc != 0)
        ch->errors++;
    if (ch->verbose || rc != 0)
        fprintf(stderr, "chaos %.3f: %s node %u%s\n", (double)redlock_now_us() / 1e6, what, node,
                rc != 0 ? " FAILED" : "");
}

static void chaos_bring_back(chaos *ch, unsigned node)
{
    int rc;
    if (ch->state[node] == NODE_PAUSED) {
        rc = fixture_resume(ch->nodes, node);
        ch->resumes++;
        chaos_note(ch, "resume", node, rc);
    } else {
        rc = fixture_restart(ch->nodes, node);
        ch->restarts++;
        chaos_note(ch, "restart", node, rc);
    }
    if (rc == 0) {
        ch->state[node] = NODE_RECOVERING;
        ch->since_us[node] = redlock_now_us();
    }
}

/* The negative control: FLUSHALL a majority of the nodes at once, i.e. restart them with data
 * loss and no delay, which Redlock does not survive. A run with this must fail the checker;
 * otherwise the torture could not see a broken lock. */
static void chaos_wipe_majority(chaos *ch)
{
    unsigned first = (unsigned)rand_r(&ch->seed) % N_LOCK_NODES;
    for (unsigned k = 0; k < N_LOCK_NODES / 2 + 1; k++) {
        unsigned node = (first + k) % N_LOCK_NODES;
        redisReply *reply = fixture_command(ch->nodes, node, "FLUSHALL");
        chaos_note(ch, "wipe", node, reply == NULL || reply->type == REDIS_REPLY_ERROR);
        freeReplyObject(reply);
    }
    ch->wipes++;
}

/* One chaos event: take a healthy node down (kill or pause) while fewer than MAX_FAULTY are,
 * else (or at random) bring one back, if it is allowed to come back yet. */
static void chaos_step(chaos *ch)
{
    if (ch->unsafe) {
        chaos_wipe_majority(ch);
        return;
    }
    uint64_t now_us = redlock_now_us();
    unsigned faulty = count_faulty(ch);
    bool inject = faulty == 0 || (faulty < MAX_FAULTY && rand_r(&ch->seed) % 2 == 0);
    if (inject) {
        int node = pick_node(ch, NODE_UP);
        bool kill = rand_r(&ch->seed) % 2 == 0;
        int rc = kill ? fixture_kill(ch->nodes, (unsigned)node)
                      : fixture_pause(ch->nodes, (unsigned)node);
        chaos_note(ch, kill ? "kill" : "pause", (unsigned)node, rc);
        if (rc == 0) {
            ch->state[node] = kill ? NODE_KILLED : NODE_PAUSED;
            ch->since_us[node] = now_us;
            *(kill ? &ch->kills : &ch->pauses) += 1;
        }
        return;
    }
    int node = pick_node(ch, rand_r(&ch->seed) % 2 == 0 ? NODE_PAUSED : NODE_KILLED);
    if (node < 0)
        node = pick_node(ch, NODE_PAUSED);
    if (node < 0)
        node = pick_node(ch, NODE_KILLED);
    if (node < 0)
        return; /* only recovering nodes: they heal by themselves */
    if (ch->state[node] == NODE_KILLED &&
        now_us < ch->since_us[node] + ch->ttl_us + RESTART_SLACK_MS * 1000)
        return; /* too early: it could vote for a lock a live holder still has */
    chaos_bring_back(ch, (unsigned)node);
}

/* Bring every node back, waiting out the ttl of killed ones. */
static void chaos_heal_all(chaos *ch)
{
    for (unsigned i = 0; i < N_LOCK_NODES; i++) {
        if (ch->state[i] == NODE_KILLED) {
            uint64_t allowed_us = ch->since_us[i] + ch->ttl_us + RESTART_SLACK_MS * 1000;
            uint64_t now_us = redlock_now_us();
            if (now_us < allowed_us)
                sleep_ms((unsigned)((allowed_us - now_us) / 1000 + 1));
        }
        if (ch->state[i] == NODE_KILLED || ch->state[i] == NODE_PAUSED)
            chaos_bring_back(ch, i);
    }
}

static uint64_t chaos_gap_us(chaos *ch)
{
    unsigned span = CHAOS_MAX_GAP_MS - CHAOS_MIN_GAP_MS + 1;
    return (uint64_t)(CHAOS_MIN_GAP_MS + (unsigned)rand_r(&ch->seed) % span) * 1000;
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

static unsigned start_workers(const torture_config *cfg, workers *ws)
{
    fflush(stdout); /* or every child would print a copy of what is still buffered */
    fflush(stderr);
    for (unsigned p = 0; p < cfg->procs; p++) {
        pid_t pid = fork();
        if (pid == 0) /* exit(), not _exit(): flushes; the fixture's atexit only forgets */
            exit(torture_worker_run(cfg, p));
        if (pid < 0) {
            perror("fork");
            break;
        }
        ws->pids[p] = pid;
        ws->running++;
    }
    return ws->running;
}

/* Wait for the workers while the chaos runs until cfg->end_us; then heal every node. */
static void run_chaos(const torture_config *cfg, workers *ws, chaos *ch, uint64_t start_us)
{
    uint64_t hang_deadline_us = cfg->end_us + (cfg->wait_ms + HANG_SLACK_S * 1000) * 1000;
    uint64_t next_event_us = redlock_now_us() + chaos_gap_us(ch);
    bool healed = false;
    while (ws->running > 0) {
        reap(ws);
        uint64_t now_us = redlock_now_us();
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
    }
    return total;
}

static void print_lock_keys(fixture_cluster *nodes)
{
    for (unsigned i = 0; i < nodes->n; i++) {
        redisReply *keys = fixture_command(nodes, i, "KEYS *");
        for (size_t k = 0; keys != NULL && keys->type == REDIS_REPLY_ARRAY && k < keys->elements;
             k++) {
            redisReply *pttl = fixture_command(nodes, i, "PTTL %s", keys->element[k]->str);
            printf("#   node %u: %s pttl %lld\n", i, keys->element[k]->str,
                   pttl != NULL && pttl->type == REDIS_REPLY_INTEGER ? pttl->integer : -3);
            freeReplyObject(pttl);
        }
        freeReplyObject(keys);
    }
}

/* Every holder has released (or died) and every node is back: a ttl later no key may be left,
 * whatever happened to the releases. DBSIZE also counts expired keys the server has not swept
 * yet, so allow the active expiry a few of its cycles. */
static bool check_no_keys_left(fixture_cluster *nodes, uint64_t ttl_ms)
{
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
            "       [--hold-ms MS] [--unsafe-wipe] [--verbose] [--keep-logs]\n"
            "S defaults to $TORTURE_SECONDS or 20, the seed to $TORTURE_SEED or a random one.\n",
            prog);
}

static bool parse_args(int argc, char **argv, torture_config *cfg)
{
    static const struct option options[] = {
        {"seconds", required_argument, NULL, 's'}, {"procs", required_argument, NULL, 'p'},
        {"threads", required_argument, NULL, 't'}, {"resources", required_argument, NULL, 'r'},
        {"seed", required_argument, NULL, 'S'},    {"verbose", no_argument, NULL, 'v'},
        {"keep-logs", no_argument, NULL, 'k'},     {"hold-ms", required_argument, NULL, 'h'},
        {"unsafe-wipe", no_argument, NULL, 'u'},   {NULL, 0, NULL, 0},
    };
    *cfg = (torture_config){.procs = 3,
                            .threads = 4,
                            .resources = 4,
                            .seconds = 20,
                            .seed = (unsigned)time(NULL) ^ ((unsigned)getpid() << 16),
                            .ttl_ms = 1000,
                            .wait_ms = 3000,
                            .margin_ms = 250,
                            .node_timeout_ms = 100,
                            .reconnect_max_ms = 200};
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
    rmdir(cfg->log_dir);
}

static unsigned tap(unsigned number, bool ok, const char *what)
{
    printf("%sok %u - %s\n", ok ? "" : "not ", number, what);
    return ok ? 0 : 1;
}

/* The checks after the run; returns the number of failed TAP tests. */
static unsigned report(const torture_config *cfg, fixture_cluster *nodes, fixture_cluster *data,
                       const workers *ws, const chaos *ch, double elapsed_s)
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
    printf("# chaos: %lu kills, %lu restarts, %lu pauses, %lu resumes, %lu majority wipes, "
           "%lu fixture errors\n",
           ch->kills, ch->restarts, ch->pauses, ch->resumes, ch->wipes, ch->errors);

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
    failed += tap(3, check_no_keys_left(nodes, cfg->ttl_ms),
                  "no lock key left on the lock nodes a ttl after the run");
    if (ws->hung > 0 || ws->failed > 0)
        printf("# %u workers hung, %u failed (see stderr)\n", ws->hung, ws->failed);
    failed += tap(4, ws->hung == 0 && ws->failed == 0 && ch->errors == 0,
                  "every worker exited 0 in time");
    failed += tap(5, held_resources == cfg->resources, "every resource was held and written");
    torture_history_free(&history);
    return failed;
}

int main(int argc, char **argv)
{
    torture_config cfg;
    if (!parse_args(argc, argv, &cfg))
        return 2;
    signal(SIGPIPE, SIG_IGN); /* a write to a server that just died must not kill the process */
    setvbuf(stdout, NULL, _IOLBF, 0);

    printf("1..5\n");
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
    cfg.node_urls = nodes.urls;
    cfg.n_nodes = nodes.n;
    cfg.data_port = data.servers[0].port;
    printf("# %u s, %u processes x %u threads on %u resources, ttl %llu ms, seed %u "
           "(TORTURE_SEED=%u repeats the choices), logs in %s\n",
           cfg.seconds, cfg.procs, cfg.threads, cfg.resources, (unsigned long long)cfg.ttl_ms,
           cfg.seed, cfg.seed, cfg.log_dir);

    chaos ch = {.nodes = &nodes,
                .seed = cfg.seed,
                .ttl_us = cfg.ttl_ms * 1000,
                .recovery_us = cfg.reconnect_max_ms * 1500 + 100000,
                .verbose = cfg.verbose,
                .unsafe = cfg.unsafe};
    workers ws = {0};
    uint64_t start_us = redlock_now_us();
    cfg.end_us = start_us + (uint64_t)cfg.seconds * 1000000;
    if (start_workers(&cfg, &ws) < cfg.procs) {
        kill_hung(&ws, start_us);
        printf("Bail out! cannot fork the workers\n");
        return 1;
    }
    run_chaos(&cfg, &ws, &ch, start_us);
    double elapsed_s = (double)(redlock_now_us() - start_us) / 1e6;

    unsigned failed = report(&cfg, &nodes, &data, &ws, &ch, elapsed_s);
    if (failed == 0 && !cfg.keep_logs)
        remove_logs(&cfg);
    else
        printf("# logs kept in %s\n", cfg.log_dir);
    fixture_stop(&nodes);
    fixture_stop(&data);
    return failed == 0 ? 0 : 1;
}
