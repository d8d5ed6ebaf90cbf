/* SPDX-License-Identifier: MIT */
/* worker.h - one torture worker process: T threads on one redlock_sync client, each taking
 * random resources' locks and incrementing their counters on the data server inside them, and
 * logging every attempt for the checker (checker.h). A share of the holds run on to the
 * deadline the library reported before they release.
 *
 * The driver pauses whole worker processes (pauses.h): SIGUSR1 asks one to stop, and a thread of
 * its own stops it (SIGSTOP) at once, except inside the step from the last look at the deadline
 * to the end of the counter's write: that step is where only a fence helps (a holder
 * stopped there writes after its lock is gone), and the torture checks the lock, not that. The
 * driver resumes it with SIGCONT. */
#ifndef REDLOCK_TEST_TORTURE_WORKER_H
#define REDLOCK_TEST_TORTURE_WORKER_H

#include <stdbool.h>
#include <stdint.h>

typedef struct torture_config {
    unsigned procs;              /* worker processes */
    unsigned threads;            /* threads per worker process */
    unsigned resources;          /* lock resources, each with its own counter */
    unsigned seconds;            /* how long the workers keep taking locks (and chaos runs) */
    unsigned seed;               /* for the chaos and the workers' choices; printed, settable */
    bool verbose;                /* print every chaos event */
    bool keep_logs;              /* keep the log directory even when the run passes */
    bool unsafe;                 /* negative control: the chaos wipes a majority (breaks Redlock) */
    bool no_pauses;              /* the driver pauses no worker process (pauses.h) */
    unsigned hold_ms;            /* extra time spent between GET and SET, to widen the race */
    uint64_t ttl_ms;             /* lock ttl; also the wait before a killed node may come back */
    uint64_t wait_ms;            /* how long one acquire keeps retrying */
    uint64_t margin_ms;          /* write only while at least this much validity is left
                                    (scaled down with the ttl for a hold with a shorter one) */
    unsigned deadline_per_mille; /* holds in 1000 that run on to their deadline before the
                                    release, each with ttl deadline_ttl_ms */
    uint64_t deadline_ttl_ms;
    uint64_t node_timeout_ms;     /* per-request deadline on each lock node */
    uint64_t reconnect_max_ms;    /* the clients' longest reconnect backoff (+/- 50% jitter) */
    uint64_t connect_timeout_ms;  /* the clients' connect + handshake deadline */
    const char *const *node_urls; /* the lock nodes as the workers reach them (the proxies) */
    unsigned n_nodes;
    int data_port;     /* the data server, 127.0.0.1 */
    char log_dir[256]; /* worker P logs to log_dir/worker-P.log */
    uint64_t end_us;   /* no acquisition starts after this (redlock_now_us clock) */
} torture_config;

/* Run worker process number process until cfg->end_us; returns its exit status: 0, or 1 after
 * printing on stderr why (the data server failed, a log write failed, the client could not be
 * made). Failed acquisitions are logged and counted, not fatal. */
int torture_worker_run(const torture_config *cfg, unsigned process);

#endif /* REDLOCK_TEST_TORTURE_WORKER_H */
