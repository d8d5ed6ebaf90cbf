/* SPDX-License-Identifier: MIT */
/* counter.c - P processes add 1 to a shared counter M times each, under one Redlock lock.
 *
 *   counter --nodes redis://127.0.0.1:7001,redis://127.0.0.1:7002,redis://127.0.0.1:7003 \
 *           --data redis://127.0.0.1:7000 --procs 4 --incr 250 --reset
 *
 * The counter is a plain string key on a separate Redis server, the "data" server. Each
 * increment is a deliberately non-atomic read-modify-write: GET, a short pause, SET value + 1.
 * When two processes interleave there, both write the same value and one increment is lost.
 * Taking the lock (on the lock nodes) around every read-modify-write makes the processes take
 * turns, so the final count is exactly P * M; --no-lock skips the lock and shows lost updates.
 *
 * (A real counter would use INCR, which is atomic on one server. The lock is for work that
 * cannot be made atomic: read, compute, then write somewhere else.)
 *
 * Options:
 *   --nodes URL,URL,...  the lock nodes, independent Redis masters (not needed with --no-lock)
 *   --data URL           the server that holds the counter
 *   --procs P            worker processes (4)
 *   --incr M             increments per worker (250)
 *   --key NAME           the counter's key on the data server ("counter"); the lock's resource
 *                        is NAME:lock, so one server can serve as both for a quick try
 *   --reset              set the counter to 0 before the workers start
 *   --no-lock            do not lock
 *   --tls-ca FILE, --tls-ca-dir DIR, --tls-cert FILE, --tls-key FILE, --tls-server-name NAME,
 *   --tls-insecure       TLS for rediss:// lock nodes, as for the redlock tool (the first four
 *                        also from $REDLOCK_TLS_CA, _CA_DIR, _CERT, _KEY). The data server is
 *                        reached with hiredis, plain TCP or a unix socket.
 *
 * Exit status: 0 when the final count is the expected one (always, with --no-lock), 1 when it
 * is not or a worker failed, 2 on bad usage.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <redlock.h>

/* The lock is held for about a millisecond, so a short ttl is plenty. It only matters when a
 * worker dies holding the lock: the others then wait at most this long. */
#define LOCK_TTL_MS 2000
/* How long a worker keeps trying for its turn before it gives up: far more than it needs (a
 * turn comes within tens of milliseconds), but bounded, so a broken lock service is reported. */
#define LOCK_WAIT_MS 10000
/* A contender that lost a round tries again after 2 ms +/- 1 ms: short, so the lock changes
 * hands quickly; random, so two contenders that split the votes do not collide again. */
#define RETRY_DELAY_MS 2
#define RETRY_JITTER_MS 1
/* The pause between GET and SET is random, up to this long: it widens the race window. */
#define MAX_PAUSE_US 500

#define MAX_PROCS 1000
#define MAX_INCR 1000000

typedef struct config {
    const char *node_urls[REDLOCK_MAX_NODES];
    unsigned n_nodes;
    const char *data_url;
    unsigned procs;
    unsigned incr;
    const char *key;
    char lock_resource[256]; /* key + ":lock" */
    bool reset;
    bool use_lock;
    /* TLS for rediss:// lock nodes (NULL: not given). */
    const char *tls_ca, *tls_ca_dir, *tls_cert, *tls_key, *tls_server_name;
    bool tls_insecure;
} config;

/* One worker process's state. */
typedef struct worker {
    unsigned id;
    const config *cfg;
    redisContext *data; /* its own connection to the data server */
    redlock_sync *sync; /* its own lock client; NULL with --no-lock */
    unsigned seed;      /* for the random pause */
    uint64_t called_us; /* when the current increment asked for the lock */
    uint64_t longest_wait_us;
    int result; /* of the current increment (increment_holding) */
} worker;

/* ---- the data server: plain blocking hiredis ----------------------------------------------- */

/* Connect to the data server, given as a URL like a lock node's (the library's parser reads it),
 * with a 1 s timeout on the connect and on every command. Returns NULL after printing why. */
static redisContext *data_connect(const char *url_text)
{
    redlock_url url;
    char err[256];
    if (redlock_url_parse(&url, url_text, err, sizeof(err)) != 0) {
        fprintf(stderr, "--data: %s\n", err);
        redlock_url_free(&url);
        return NULL;
    }
    if (url.tls) {
        fprintf(stderr, "--data: %s: the data server is reached with plain hiredis (no TLS)\n",
                url.redacted);
        redlock_url_free(&url);
        return NULL;
    }
    const struct timeval timeout = {1, 0};
    redisContext *ctx = url.is_unix ? redisConnectUnixWithTimeout(url.path, timeout)
                                    : redisConnectWithTimeout(url.host, url.port, timeout);
    if (ctx == NULL || ctx->err) {
        fprintf(stderr, "%s: %s\n", url.redacted, ctx != NULL ? ctx->errstr : "out of memory");
        goto fail;
    }
    redisSetTimeout(ctx, timeout);

    redisReply *reply = NULL;
    if (url.password != NULL && url.user != NULL)
        reply = redisCommand(ctx, "AUTH %s %s", url.user, url.password);
    else if (url.password != NULL)
        reply = redisCommand(ctx, "AUTH %s", url.password);
    if (url.password != NULL && (reply == NULL || reply->type == REDIS_REPLY_ERROR)) {
        fprintf(stderr, "%s: AUTH: %s\n", url.redacted, reply != NULL ? reply->str : ctx->errstr);
        freeReplyObject(reply);
        goto fail;
    }
    freeReplyObject(reply);
    if (url.db >= 0) {
        reply = redisCommand(ctx, "SELECT %d", url.db);
        if (reply == NULL || reply->type == REDIS_REPLY_ERROR) {
            fprintf(stderr, "%s: SELECT: %s\n", url.redacted,
                    reply != NULL ? reply->str : ctx->errstr);
            freeReplyObject(reply);
            goto fail;
        }
        freeReplyObject(reply);
    }
    redlock_url_free(&url);
    return ctx;

fail:
    if (ctx != NULL)
        redisFree(ctx);
    redlock_url_free(&url);
    return NULL;
}

/* GET key as a number; a missing key counts as 0. Returns 0, or -1 after printing why. */
static int data_get(redisContext *ctx, const char *key, long long *value)
{
    redisReply *reply = redisCommand(ctx, "GET %s", key);
    int rc = 0;
    if (reply == NULL) {
        fprintf(stderr, "GET %s: %s\n", key, ctx->errstr);
        return -1;
    }
    if (reply->type == REDIS_REPLY_NIL) {
        *value = 0;
    } else if (reply->type == REDIS_REPLY_STRING) {
        char *end;
        errno = 0;
        *value = strtoll(reply->str, &end, 10);
        if (errno != 0 || end == reply->str || *end != '\0') {
            fprintf(stderr, "GET %s: not a number: \"%s\"\n", key, reply->str);
            rc = -1;
        }
    } else {
        fprintf(stderr, "GET %s: %s\n", key,
                reply->type == REDIS_REPLY_ERROR ? reply->str : "unexpected reply");
        rc = -1;
    }
    freeReplyObject(reply);
    return rc;
}

/* SET key to value. Returns 0, or -1 after printing why. */
static int data_set(redisContext *ctx, const char *key, long long value)
{
    redisReply *reply = redisCommand(ctx, "SET %s %lld", key, value);
    if (reply == NULL || reply->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "SET %s: %s\n", key, reply != NULL ? reply->str : ctx->errstr);
        freeReplyObject(reply);
        return -1;
    }
    freeReplyObject(reply);
    return 0;
}

/* ---- one worker process -------------------------------------------------------------------- */

static void pause_briefly(unsigned *seed)
{
    struct timespec pause = {0, (long)(rand_r(seed) % MAX_PAUSE_US) * 1000};
    nanosleep(&pause, NULL);
}

/* The read-modify-write that must not interleave with another worker's. */
static int read_modify_write(worker *w)
{
    long long value;
    if (data_get(w->data, w->cfg->key, &value) != 0)
        return -1;
    pause_briefly(&w->seed); /* "compute": another worker can GET the same value meanwhile */
    return data_set(w->data, w->cfg->key, value + 1);
}

static void print_nodes(const redlock_report *report)
{
    for (unsigned i = 0; i < report->n_nodes; i++) {
        const redlock_node_result *node = &report->nodes[i];
        fprintf(stderr, "  %s: %s%s%s\n", node->url, redlock_vote_name(node->vote),
                node->error != NULL ? ", " : "", node->error != NULL ? node->error : "");
    }
}

/* The read-modify-write, run by redlock_sync_with holding the lock (kept alive meanwhile). Sets
 * w->result: 0 when done; 1 when nothing was written because the lock ran out first (the caller
 * does the increment again); -1 on failure. */
static void increment_holding(redlock_sync_lock *lock, void *data)
{
    worker *w = data;
    uint64_t waited_us = redlock_now_us() - w->called_us;
    if (waited_us > w->longest_wait_us)
        w->longest_wait_us = waited_us;
    long long value;
    w->result = data_get(w->data, w->cfg->key, &value);
    if (w->result != 0)
        return;
    pause_briefly(&w->seed);
    /* Write only while the lock is still ours. This narrows, but cannot close, the window in
     * which a process that stalls right here writes after its lock expired: protecting against
     * that needs a fence checked by the data store itself (examples/fenced_store.c). */
    if (redlock_sync_lock_lost(lock) || redlock_now_us() >= redlock_sync_lock_deadline_us(lock)) {
        fprintf(stderr, "worker %u: the lock ran out before the write; trying again\n", w->id);
        w->result = 1;
        return;
    }
    w->result = data_set(w->data, w->cfg->key, value + 1);
}

/* One increment inside the lock: 0 when done, 1 to do it again, -1 on failure. */
static int locked_increment(worker *w, redlock_report *report)
{
    redlock_lock_opts lock_opts;
    redlock_lock_opts_init(&lock_opts);
    lock_opts.wait_ms = LOCK_WAIT_MS; /* busy: wait in the resource's queue for our turn */

    w->called_us = redlock_now_us();
    w->result = -1;
    redlock_hold_end end;
    int rc = redlock_sync_with(w->sync, w->cfg->lock_resource, REDLOCK_STRLEN, LOCK_TTL_MS,
                               &lock_opts, increment_holding, w, &end, report);
    if (end == REDLOCK_HOLD_NOT_ACQUIRED) {
        fprintf(stderr, "worker %u: no lock after %llu ms: %s\n", w->id,
                (unsigned long long)((redlock_now_us() - w->called_us) / 1000),
                redlock_strerror(rc));
        print_nodes(report);
        return -1;
    }
    /* A hold that ended otherwise than released (lost, lapsed: the lock was not ours all along)
     * is reported: the increment it wrote, if any, was not protected throughout. */
    if (rc != 0)
        fprintf(stderr, "worker %u: the hold ended %s: %s\n", w->id, redlock_hold_end_name(end),
                redlock_strerror(rc));
    return w->result;
}

/* A worker's whole life; the return value is its exit status. */
static int run_worker(const config *cfg, unsigned id)
{
    worker w = {.id = id, .cfg = cfg, .seed = (unsigned)getpid()};
    w.data = data_connect(cfg->data_url);
    if (w.data == NULL)
        return 1;

    if (cfg->use_lock) {
        /* Made here, after fork(): a client owns a thread, and a forked child would get a copy
         * of its memory but not the thread. */
        redlock_options opts;
        redlock_options_init(&opts);
        opts.ttl_ms = LOCK_TTL_MS;
        opts.retry_delay_ms = RETRY_DELAY_MS;
        opts.retry_jitter_ms = RETRY_JITTER_MS;
        opts.tls_ca_file = cfg->tls_ca;
        opts.tls_ca_dir = cfg->tls_ca_dir;
        opts.tls_cert_file = cfg->tls_cert;
        opts.tls_key_file = cfg->tls_key;
        opts.tls_server_name = cfg->tls_server_name;
        opts.tls_insecure = cfg->tls_insecure;
        char err[256];
        int rc = redlock_sync_new(cfg->node_urls, cfg->n_nodes, &opts, &w.sync, err, sizeof(err));
        if (rc != 0) {
            fprintf(stderr, "worker %u: %s: %s\n", id, redlock_err_name(rc), err);
            redisFree(w.data);
            return 1;
        }
    }

    static redlock_report report; /* what the last call saw, node by node (about 30 KB) */
    redlock_report_init(&report);
    int exit_code = 0;
    for (unsigned done = 0; done < cfg->incr;) {
        int rc = cfg->use_lock ? locked_increment(&w, &report) : read_modify_write(&w);
        if (rc < 0) {
            exit_code = 1;
            break;
        }
        if (rc == 0)
            done++;
    }

    redlock_stats stats; /* the client's counters: an acquire's attempt is one round */
    redlock_stats_init(&stats);
    if (exit_code == 0 && cfg->use_lock && redlock_sync_stats(w.sync, &stats) == 0)
        printf("worker %u: %u increments, %llu lock rounds, longest wait %llu ms\n", id, cfg->incr,
               (unsigned long long)(stats.rounds_won + stats.rounds_busy + stats.rounds_broken +
                                    stats.rounds_expired),
               (unsigned long long)(w.longest_wait_us / 1000));
    else if (exit_code == 0)
        printf("worker %u: %u increments\n", id, cfg->incr);
    redlock_sync_free(w.sync);
    redisFree(w.data);
    return exit_code;
}

/* ---- the parent ---------------------------------------------------------------------------- */

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s --nodes URL,URL,... --data URL [--procs P] [--incr M] [--key NAME]\n"
            "       [--reset] [--no-lock] [--tls-ca FILE] [--tls-ca-dir DIR] [--tls-cert FILE]\n"
            "       [--tls-key FILE] [--tls-server-name NAME] [--tls-insecure]\n",
            prog);
}

/* Parse a whole number in 1..max. */
static bool parse_count(const char *text, unsigned max, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long n = strtoul(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || n < 1 || n > max)
        return false;
    *out = (unsigned)n;
    return true;
}

/* Split "URL,URL,..." in place into cfg->node_urls. */
static bool parse_nodes(char *list, config *cfg)
{
    char *saveptr = NULL;
    for (char *url = strtok_r(list, ",", &saveptr); url != NULL;
         url = strtok_r(NULL, ",", &saveptr)) {
        if (cfg->n_nodes == REDLOCK_MAX_NODES) {
            fprintf(stderr, "--nodes: at most %d nodes\n", REDLOCK_MAX_NODES);
            return false;
        }
        /* Checked here so a typo is reported once, not by every worker. */
        redlock_url parsed;
        char err[256];
        int rc = redlock_url_parse(&parsed, url, err, sizeof(err));
        redlock_url_free(&parsed);
        if (rc != 0) {
            fprintf(stderr, "--nodes: %s\n", err);
            return false;
        }
        cfg->node_urls[cfg->n_nodes++] = url;
    }
    return true;
}

/* An environment variable's value, NULL when unset or empty. */
static const char *env_value(const char *name)
{
    const char *value = getenv(name);
    return value != NULL && value[0] != '\0' ? value : NULL;
}

/* Fill cfg from the command line. Returns false after printing why. */
static bool parse_args(int argc, char **argv, config *cfg)
{
    static const struct option options[] = {
        {"nodes", required_argument, NULL, 'n'},
        {"data", required_argument, NULL, 'd'},
        {"procs", required_argument, NULL, 'p'},
        {"incr", required_argument, NULL, 'i'},
        {"key", required_argument, NULL, 'k'},
        {"reset", no_argument, NULL, 'r'},
        {"no-lock", no_argument, NULL, 'N'},
        {"help", no_argument, NULL, 'h'},
        {"tls-ca", required_argument, NULL, 'A'},
        {"tls-ca-dir", required_argument, NULL, 'D'},
        {"tls-cert", required_argument, NULL, 'C'},
        {"tls-key", required_argument, NULL, 'K'},
        {"tls-server-name", required_argument, NULL, 'S'},
        {"tls-insecure", no_argument, NULL, 'I'},
        {NULL, 0, NULL, 0},
    };
    *cfg = (config){.procs = 4, .incr = 250, .key = "counter", .use_lock = true};
    /* As for the redlock tool: the environment, unless the command line says otherwise. */
    cfg->tls_ca = env_value("REDLOCK_TLS_CA");
    cfg->tls_ca_dir = env_value("REDLOCK_TLS_CA_DIR");
    cfg->tls_cert = env_value("REDLOCK_TLS_CERT");
    cfg->tls_key = env_value("REDLOCK_TLS_KEY");
    int opt;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (opt) {
        case 'n':
            if (!parse_nodes(optarg, cfg))
                return false;
            break;
        case 'd':
            cfg->data_url = optarg;
            break;
        case 'p':
            if (!parse_count(optarg, MAX_PROCS, &cfg->procs)) {
                fprintf(stderr, "--procs: a number from 1 to %d\n", MAX_PROCS);
                return false;
            }
            break;
        case 'i':
            if (!parse_count(optarg, MAX_INCR, &cfg->incr)) {
                fprintf(stderr, "--incr: a number from 1 to %d\n", MAX_INCR);
                return false;
            }
            break;
        case 'k':
            cfg->key = optarg;
            break;
        case 'r':
            cfg->reset = true;
            break;
        case 'N':
            cfg->use_lock = false;
            break;
        case 'A':
            cfg->tls_ca = optarg;
            break;
        case 'D':
            cfg->tls_ca_dir = optarg;
            break;
        case 'C':
            cfg->tls_cert = optarg;
            break;
        case 'K':
            cfg->tls_key = optarg;
            break;
        case 'S':
            cfg->tls_server_name = optarg;
            break;
        case 'I':
            cfg->tls_insecure = true;
            break;
        default:
            usage(argv[0]);
            return false;
        }
    }
    if (optind != argc || cfg->data_url == NULL || (cfg->use_lock && cfg->n_nodes == 0)) {
        usage(argv[0]);
        return false;
    }
    int len = snprintf(cfg->lock_resource, sizeof(cfg->lock_resource), "%s:lock", cfg->key);
    if (cfg->key[0] == '\0' || len < 0 || (size_t)len >= sizeof(cfg->lock_resource)) {
        fprintf(stderr, "--key: 1 to %zu characters\n", sizeof(cfg->lock_resource) - 6);
        return false;
    }
    return true;
}

int main(int argc, char **argv)
{
    config cfg;
    if (!parse_args(argc, argv, &cfg))
        return 2;
    signal(SIGPIPE, SIG_IGN); /* a write to a server that just died must not kill the process */

    /* The parent only reads (or resets) the counter. Its connection is closed before fork():
     * a socket shared by several processes would mix up their replies. */
    redisContext *data = data_connect(cfg.data_url);
    if (data == NULL)
        return 1;
    long long start = 0;
    int rc = cfg.reset ? data_set(data, cfg.key, 0) : data_get(data, cfg.key, &start);
    redisFree(data);
    if (rc != 0)
        return 1;
    long long expected = start + (long long)cfg.procs * cfg.incr;

    printf("%u workers x %u increments of \"%s\" from %lld, %s\n", cfg.procs, cfg.incr, cfg.key,
           start, cfg.use_lock ? "each inside the lock" : "without the lock");
    fflush(stdout); /* or every child would print a copy of what is still buffered */

    uint64_t start_us = redlock_now_us();
    unsigned started = 0, failed = 0;
    for (; started < cfg.procs; started++) {
        pid_t pid = fork();
        if (pid == 0) /* the child: exit(), not _exit(), so its output is flushed */
            exit(run_worker(&cfg, started));
        if (pid < 0) {
            perror("fork");
            failed++;
            break;
        }
    }
    for (unsigned i = 0; i < started; i++) {
        int status;
        if (wait(&status) < 0) {
            perror("wait");
            return 1;
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            failed++;
    }
    double elapsed_s = (double)(redlock_now_us() - start_us) / 1e6;

    long long final = 0;
    data = data_connect(cfg.data_url);
    if (data == NULL)
        return 1;
    rc = data_get(data, cfg.key, &final);
    redisFree(data);
    if (rc != 0)
        return 1;

    printf("%u workers done in %.2f s\n", started, elapsed_s);
    printf("final count: %lld (expected %lld)", final, expected);
    if (failed > 0) {
        printf("\n");
        fprintf(stderr, "%u of %u workers failed\n", failed, cfg.procs);
        return 1;
    }
    if (final < expected)
        printf(", %lld updates lost", expected - final);
    printf("\n");
    return cfg.use_lock && final != expected ? 1 : 0;
}
