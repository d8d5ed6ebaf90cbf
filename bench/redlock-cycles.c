/* SPDX-License-Identifier: MIT */
/* redlock-cycles - a fixed loop of lock cycles, for instruction counts.
 *
 *   redlock-cycles --nodes URL,URL,... [--cycles N] [--inflight K] [--tls-ca FILE] [--fencing]
 * [--raw]
 *
 * --raw runs the bench's raw fan-out (raw.h: the same commands, the decision at the quorum, no
 * lock logic) instead of the library, so the two counts say in instructions what the lock logic
 * adds. --fencing takes fenced locks.
 *
 * Takes and releases N locks on distinct resources, K at a time (each slot starts its next
 * acquire from its release callback), then closes the client. Nothing is timed: run it under
 * `valgrind --tool=callgrind` twice with different N, and (Ir(N2) - Ir(N1)) / (N2 - N1) is the
 * instructions one acquire + release costs, with start-up and shutdown cancelled out. Exits 0
 * when every acquire and release succeeded, 1 otherwise. With --fencing every lock is fenced
 * (redlock_lock_opts.fencing: the acquire, the commit and the release). */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "raw.h"
#include "redlock.h"

typedef struct loop_state {
    redlock_client *client;
    const redlock_lock_opts *lock_opts;
    raw *raw; /* --raw: cycles on it instead */
    unsigned long cycles, started, done;
    unsigned long failures;
} loop_state;

static void start_one(loop_state *st);

static void on_release(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    loop_state *st = data;
    (void)result;
    if (status != 0)
        st->failures++;
    redlock_lock_free(lock);
    st->done++;
    start_one(st);
}

static void on_acquire(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    loop_state *st = data;
    (void)result;
    if (status != 0) {
        st->failures++;
        st->done++;
        start_one(st);
        return;
    }
    if (redlock_release(lock, on_release, st) != 0) {
        st->failures++;
        st->done++;
        redlock_lock_free(lock);
        start_one(st);
    }
}

static void on_raw(void *data, int won, uint64_t set_us, uint64_t release_us)
{
    loop_state *st = data;
    (void)set_us;
    (void)release_us;
    if (!won)
        st->failures++;
    st->done++;
    start_one(st);
}

static void start_one(loop_state *st)
{
    if (st->started >= st->cycles) {
        if (st->done == st->cycles) {
            if (st->raw != NULL)
                raw_free(st->raw);
            else
                redlock_client_close(st->client, NULL, NULL);
            st->raw = NULL;
        }
        return;
    }
    char resource[64];
    int len = snprintf(resource, sizeof(resource), "cycles:%lu", st->started++);
    if (st->raw != NULL) {
        raw_cycle(st->raw, resource, (size_t)len, 10000, RAW_WAIT_QUORUM, on_raw, st);
        return;
    }
    if (redlock_acquire(st->client, resource, (size_t)len, 0, st->lock_opts, on_acquire, st) != 0) {
        st->failures++;
        st->done++;
        start_one(st);
    }
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {{"nodes", required_argument, NULL, 'n'},
                                             {"cycles", required_argument, NULL, 'c'},
                                             {"inflight", required_argument, NULL, 'k'},
                                             {"tls-ca", required_argument, NULL, 'A'},
                                             {"fencing", no_argument, NULL, 'f'},
                                             {"raw", no_argument, NULL, 'r'},
                                             {NULL, 0, NULL, 0}};
    char *nodes = NULL;
    unsigned long cycles = 1000, inflight = 1;
    const char *tls_ca = NULL;
    bool fencing = false, use_raw = false;
    int opt;
    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (opt == 'n')
            nodes = optarg;
        else if (opt == 'c')
            cycles = strtoul(optarg, NULL, 10);
        else if (opt == 'k')
            inflight = strtoul(optarg, NULL, 10);
        else if (opt == 'A')
            tls_ca = optarg;
        else if (opt == 'f')
            fencing = true;
        else if (opt == 'r')
            use_raw = true;
        else
            return 64;
    }
    if (nodes == NULL || cycles == 0 || inflight == 0) {
        fprintf(stderr, "usage: redlock-cycles --nodes URL,URL,... [--cycles N] [--inflight K] "
                        "[--tls-ca FILE] [--fencing] [--raw]\n");
        return 64;
    }
    const char *urls[REDLOCK_MAX_NODES];
    unsigned n = 0;
    for (char *save = NULL, *tok = strtok_r(nodes, ",", &save);
         tok != NULL && n < REDLOCK_MAX_NODES; tok = strtok_r(NULL, ",", &save))
        urls[n++] = tok;

    uv_loop_t loop;
    uv_loop_init(&loop);
    redlock_options opts;
    redlock_options_init(&opts);
    opts.node_timeout_ms = 5000; /* valgrind is slow: no vote may time out */
    opts.connect_timeout_ms = 10000;
    opts.retry_count = 0;
    opts.tls_ca_file = tls_ca;
    redlock_lock_opts lock_opts;
    redlock_lock_opts_init(&lock_opts);
    lock_opts.fencing = fencing;
    loop_state st = {.cycles = cycles, .lock_opts = &lock_opts};
    char err[256];
    if (use_raw) {
        st.raw = raw_new(&loop, urls, n, err, sizeof(err));
        if (st.raw == NULL) {
            fprintf(stderr, "redlock-cycles: %s\n", err);
            return 1;
        }
    } else if (redlock_client_new(&loop, urls, n, &opts, &st.client, err, sizeof(err)) != 0) {
        fprintf(stderr, "redlock-cycles: %s\n", err);
        return 1;
    }
    for (unsigned long i = 0; i < inflight; i++)
        start_one(&st);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    printf("cycles %lu failures %lu\n", st.done, st.failures);
    return st.failures == 0 && st.done == cycles ? 0 : 1;
}
