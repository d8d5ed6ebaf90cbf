/* SPDX-License-Identifier: MIT */
/* fenced_store.c - a worker that writes to a store under a Redlock lock, and a store that
 * refuses writes from a holder whose lock has been taken over: fences (docs/safety.md).
 *
 *   fenced_store --nodes redis://127.0.0.1:7001,redis://127.0.0.1:7002,redis://127.0.0.1:7003 \
 *                --data redis://127.0.0.1:7000 --key report --value "from worker 7"
 *
 * The worker takes the lock on KEY:lock with a fence (redlock_lock_opts.fencing), checks
 * that it still holds it, and writes VALUE to KEY on the data server together with its fence.
 * The data server is a plain Redis: the write goes through a small Lua script that keeps, next
 * to the data, the largest fence it accepted (KEY:last-fence) and refuses a write whose fence is
 * below it. So a worker that was paused after its last check (a GC or VM pause, SIGSTOP) and
 * writes after another worker took the lock and wrote is refused, and the newer value survives.
 * The check and the write are one atomic step on the data server, as they must be.
 *
 * The same pattern in SQL is one statement: UPDATE t SET v = $2, fence = $1 WHERE id = $3 AND
 * fence <= $1 (no row updated: refused). See docs/safety.md, "Fences".
 *
 * Options:
 *   --nodes URL,URL,...  the lock nodes, independent Redis masters
 *   --data URL           the data server (redis://host:port or unix:///path)
 *   --key NAME           the data's key ("data"); the lock's resource is NAME:lock
 *   --value TEXT         what to write (required)
 *   --ttl MS             the lock's ttl in ms (10000)
 *   --no-fence           take the lock without a fence and write with a plain SET: what
 *                        happens without fencing (a late write overwrites a newer one)
 *   --wait-for FILE      after the last check of the lock and before the write, wait until FILE
 *                        exists: a stand-in for a long pause at the worst moment, for tests and
 *                        demonstrations (stop the worker meanwhile, let another one write)
 *
 * Output on stdout, one line each: "acquired fence=F validity_ms=V", "checked: the lock is held,
 * writing" (the last check passed), then "wrote fence=F" or "refused: TEXT" (the store's reason),
 * then "released" or "released: the lock had lapsed".
 * Exit status: 0 written, 3 refused by the store (someone newer wrote: stop the work), 1 on any
 * other failure (the lock could not be taken, the data server failed), 2 on bad usage.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <hiredis/hiredis.h>
#include <redlock.h>

#define EXIT_REFUSED 3

/* KEYS[1] = the data, KEYS[2] = the largest fence accepted for it; ARGV[1] = the value,
 * ARGV[2] = the writer's fence. tonumber is exact for fences below 2^53. */
static const char fenced_write_lua[] =
    "local last = redis.call('get', KEYS[2])\n"
    "if last and tonumber(ARGV[2]) < tonumber(last) then\n"
    "    return redis.error_reply('STALE fence ' .. ARGV[2] .. ' is below ' .. last ..\n"
    "        ', the last accepted: the lock has a newer holder')\n"
    "end\n"
    "redis.call('set', KEYS[2], ARGV[2])\n"
    "redis.call('set', KEYS[1], ARGV[1])\n"
    "return 1\n";

typedef struct config {
    const char *node_urls[REDLOCK_MAX_NODES];
    unsigned n_nodes;
    char *nodes_copy;
    const char *data_url;
    const char *key;
    const char *value;
    uint64_t ttl_ms;
    bool fencing;
    const char *wait_for;
} config;

static void usage(const char *why)
{
    fprintf(stderr,
            "fenced_store: %s\n"
            "usage: fenced_store --nodes URL,URL,... --data URL --value TEXT [--key NAME] "
            "[--ttl MS] [--no-fence] [--wait-for FILE]\n",
            why);
    exit(2);
}

static void parse(config *cfg, int argc, char **argv)
{
    static const struct option longs[] = {
        {"nodes", required_argument, NULL, 'n'},    {"data", required_argument, NULL, 'd'},
        {"key", required_argument, NULL, 'k'},      {"value", required_argument, NULL, 'v'},
        {"ttl", required_argument, NULL, 't'},      {"no-fence", no_argument, NULL, 'F'},
        {"wait-for", required_argument, NULL, 'w'}, {NULL, 0, NULL, 0},
    };
    memset(cfg, 0, sizeof(*cfg));
    cfg->key = "data";
    cfg->ttl_ms = 10000;
    cfg->fencing = true;
    int c;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'n':
            free(cfg->nodes_copy);
            cfg->nodes_copy = strdup(optarg);
            if (cfg->nodes_copy == NULL)
                usage("out of memory");
            cfg->n_nodes = 0;
            for (char *save = NULL, *u = strtok_r(cfg->nodes_copy, ",", &save); u != NULL;
                 u = strtok_r(NULL, ",", &save)) {
                if (cfg->n_nodes == REDLOCK_MAX_NODES)
                    usage("too many nodes");
                cfg->node_urls[cfg->n_nodes++] = u;
            }
            break;
        case 'd':
            cfg->data_url = optarg;
            break;
        case 'k':
            cfg->key = optarg;
            break;
        case 'v':
            cfg->value = optarg;
            break;
        case 't': {
            char *end = NULL;
            errno = 0;
            unsigned long long ms = strtoull(optarg, &end, 10);
            if (errno != 0 || end == optarg || *end != '\0' || ms == 0)
                usage("--ttl takes a number of milliseconds");
            cfg->ttl_ms = ms;
            break;
        }
        case 'F':
            cfg->fencing = false;
            break;
        case 'w':
            cfg->wait_for = optarg;
            break;
        default:
            usage("unknown option");
        }
    }
    if (cfg->n_nodes == 0 || cfg->data_url == NULL || cfg->value == NULL)
        usage("--nodes, --data and --value are required");
}

/* A hiredis connection to the data server's URL (redis://host:port or unix:///path; no
 * password, no db: this is an example). */
static redisContext *connect_data(const char *url_text)
{
    redlock_url url;
    char err[256];
    if (redlock_url_parse(&url, url_text, err, sizeof(err)) != 0) {
        fprintf(stderr, "fenced_store: --data: %s\n", err);
        redlock_url_free(&url);
        return NULL;
    }
    struct timeval tv = {5, 0};
    redisContext *ctx = url.is_unix ? redisConnectUnixWithTimeout(url.path, tv)
                                    : redisConnectWithTimeout(url.host, url.port, tv);
    redlock_url_free(&url);
    if (ctx == NULL || ctx->err) {
        fprintf(stderr, "fenced_store: cannot reach the data server: %s\n",
                ctx != NULL ? ctx->errstr : "out of memory");
        redisFree(ctx);
        return NULL;
    }
    redisSetTimeout(ctx, tv);
    return ctx;
}

static void wait_for_file(const char *path)
{
    struct stat st;
    struct timespec tick = {0, 10 * 1000 * 1000};
    while (stat(path, &st) != 0)
        nanosleep(&tick, NULL);
}

/* Write value to the data server: through the fenced script, or (without fencing) as a plain
 * SET. Returns 0 written, EXIT_REFUSED with the store's reason in why, or 1. */
static int store_write(redisContext *data, const config *cfg, uint64_t fence, char *why,
                       size_t why_len)
{
    redisReply *r;
    if (cfg->fencing) {
        char fence_text[24], last_key[512];
        snprintf(fence_text, sizeof(fence_text), "%" PRIu64, fence);
        snprintf(last_key, sizeof(last_key), "%s:last-fence", cfg->key);
        r = redisCommand(data, "EVAL %s 2 %s %s %s %s", fenced_write_lua, cfg->key, last_key,
                         cfg->value, fence_text);
    } else {
        r = redisCommand(data, "SET %s %s", cfg->key, cfg->value);
    }
    if (r == NULL) {
        snprintf(why, why_len, "data server: %s", data->errstr);
        return 1;
    }
    int rc = 0;
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(why, why_len, "%s", r->str);
        rc = strncmp(r->str, "STALE", 5) == 0 ? EXIT_REFUSED : 1;
    }
    freeReplyObject(r);
    return rc;
}

int main(int argc, char **argv)
{
    config cfg;
    parse(&cfg, argc, argv);
    setvbuf(stdout, NULL, _IOLBF, 0);

    redlock_options opts;
    redlock_options_init(&opts);
    opts.node_timeout_ms = 5000; /* an example on any machine: seconds, fixed */
    opts.connect_timeout_ms = 5000;
    char err[256];
    redlock_sync *sync = NULL;
    if (redlock_sync_new(cfg.node_urls, cfg.n_nodes, &opts, &sync, err, sizeof(err)) != 0) {
        fprintf(stderr, "fenced_store: %s\n", err);
        return 2;
    }
    redisContext *data = connect_data(cfg.data_url);
    if (data == NULL) {
        redlock_sync_free(sync);
        return 1;
    }

    char resource[512];
    snprintf(resource, sizeof(resource), "%s:lock", cfg.key);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.fencing = cfg.fencing;
    lo.wait_ms = 30000; /* wait for our turn */
    redlock_sync_lock *lock = NULL;
    int rc = redlock_sync_acquire(sync, resource, REDLOCK_STRLEN, cfg.ttl_ms, &lo, &lock, NULL);
    if (rc != 0) {
        fprintf(stderr, "fenced_store: cannot take the lock: %s\n", redlock_strerror(rc));
        redisFree(data);
        redlock_sync_free(sync);
        return 1;
    }
    uint64_t fence = redlock_sync_lock_fence(lock);
    printf("acquired fence=%" PRIu64 " validity_ms=%" PRIu64 "\n", fence,
           redlock_sync_lock_validity_ms(lock));

    /* ... the work under the lock would be here ... */
    int status = 0;
    if (redlock_now_us() >= redlock_sync_lock_deadline_us(lock)) {
        /* The last check: past the deadline, the lock may be someone else's. */
        printf("refused: the lock's validity ran out before the write\n");
        status = EXIT_REFUSED;
    } else {
        /* The worst moment for a pause: after the check, before the write. Only the store's
         * fence check can catch a pause here. */
        printf("checked: the lock is held, writing\n");
        if (cfg.wait_for != NULL)
            wait_for_file(cfg.wait_for);
        char why[512] = "";
        status = store_write(data, &cfg, fence, why, sizeof(why));
        if (status == 0)
            printf("wrote fence=%" PRIu64 "\n", fence);
        else if (status == EXIT_REFUSED)
            printf("refused: %s\n", why);
        else
            fprintf(stderr, "fenced_store: the write failed: %s\n", why);
    }

    rc = redlock_sync_release(lock, NULL);
    if (rc == 0)
        printf("released\n");
    else if (rc == REDLOCK_ELOST)
        printf("released: the lock had lapsed\n");
    else
        printf("released: %s\n", redlock_strerror(rc));
    redlock_sync_lock_free(lock);
    redisFree(data);
    redlock_sync_free(sync);
    free(cfg.nodes_copy);
    return status;
}
