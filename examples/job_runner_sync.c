/* SPDX-License-Identifier: MIT */
/* job_runner_sync.c - a job runner on the blocking API: several processes run it at once, and
 * each job is done by one of them, holding the lock (redlock_sync_with).
 *
 *   job_runner_sync --nodes redis://10.0.1.5:6379,redis://10.0.2.5:6379,... \
 *                   --store redis://10.0.9.5:6379 --jobs 10
 *
 * Each job is one hold of the lock on job:nightly-report (--resource): wait for the lock with a
 * fence, read the next job's number from the store (job_store.h), do the work (--work-ms)
 * while the library keeps the lock alive, commit the job with the fence (the store refuses a
 * fence older than one it accepted), release. The options are in job_config.h.
 *
 * SIGTERM or SIGINT stops it cleanly. They are blocked in every thread and taken by sigwait on
 * a thread of this program's, which fires a canceler (a wait for the lock in progress, or
 * about to start, ends at once, leaving nothing held) and wakes the work, which returns
 * unfinished, so redlock_sync_with releases the lock at once.
 *
 * Output on stdout, one line each: "holding job=J fence=F token=T" when a hold begins, then
 * "done job=J fence=F" (the record of a job done), "refused job=J fence=F: REASON" or
 * "abandoned job=J: WHY", then "ended HOW: STATUS" when the hold is over; last "finished: N jobs
 * done" or "stopped: N jobs done" (after a signal).
 * Exit status: 0 when the jobs are done or a signal stopped it, 1 on a failure (the lock nodes or
 * the store), 2 on bad usage.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <redlock.h>

#include "job_config.h"
#include "job_store.h"

typedef struct runner {
    const job_config *cfg;
    job_store *store;
    redlock_canceler *cancel; /* fired by a signal: ends the wait for the lock */
    int stop_pipe[2];         /* readable once a signal came: ends the work */
    atomic_bool stopping;
    unsigned done; /* jobs committed */
    bool failed;
} runner;

/* ---- stopping on a signal ------------------------------------------------------------------ */

/* SIGTERM and SIGINT stop the runner; SIGUSR1 (sent by main) ends this thread. */
static void stop_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGUSR1);
}

static void *signal_thread(void *arg)
{
    runner *r = arg;
    sigset_t set;
    stop_signals(&set);
    for (;;) {
        int sig;
        if (sigwait(&set, &sig) != 0 || sig == SIGUSR1)
            return NULL;
        if (!atomic_exchange(&r->stopping, true)) {
            redlock_canceler_fire(r->cancel);
            ssize_t n = write(r->stop_pipe[1], "x", 1);
            (void)n; /* the pipe is empty: the byte fits */
        }
    }
}

/* ---- one job, holding the lock ------------------------------------------------------------- */

/* The work itself (here it only takes work_ms), cut short by a loss of the lock or by a signal.
 * Returns NULL once it is done, else why not. */
static const char *work(runner *r, redlock_sync_lock *lock)
{
    struct pollfd fds[2] = {
        {.fd = redlock_sync_lock_fd(lock), .events = POLLIN}, /* -1 (none) is ignored */
        {.fd = r->stop_pipe[0], .events = POLLIN},
    };
    uint64_t end_us = redlock_now_us() + r->cfg->work_ms * 1000;
    for (uint64_t now_us; (now_us = redlock_now_us()) < end_us;) {
        if (poll(fds, 2, (int)((end_us - now_us + 999) / 1000)) < 0 && errno != EINTR)
            return "poll failed";
        if (fds[1].revents != 0)
            return "stopping";
        if (redlock_sync_lock_lost(lock))
            return "the lock was lost";
    }
    /* The last check before the side effect; a pause after it is the store's fence check's. */
    return redlock_sync_lock_lost(lock) ? "the lock was lost" : NULL;
}

/* redlock_sync_with's work: it runs holding the lock, which the library keeps alive. */
static void do_job(redlock_sync_lock *lock, void *data)
{
    runner *r = data;
    uint64_t job, fence = redlock_sync_lock_fence(lock);
    if (job_store_next(r->store, &job) != 0) {
        r->failed = true;
        return;
    }
    printf("holding job=%" PRIu64 " fence=%" PRIu64 " token=%s\n", job, fence,
           redlock_sync_lock_token(lock, NULL));
    const char *unfinished = work(r, lock);
    if (unfinished != NULL) {
        printf("abandoned job=%" PRIu64 ": %s\n", job, unfinished);
        return;
    }
    char why[256];
    int rc = job_store_commit(r->store, job, fence, why, sizeof(why));
    if (rc == 0) {
        printf("done job=%" PRIu64 " fence=%" PRIu64 "\n", job, fence);
        r->done++;
    } else if (rc == JOB_STORE_STALE) {
        printf("refused job=%" PRIu64 " fence=%" PRIu64 ": %s\n", job, fence, why);
    } else {
        r->failed = true;
    }
}

static void print_nodes(const redlock_report *report)
{
    for (unsigned i = 0; i < report->n_nodes; i++) {
        const redlock_node_result *node = &report->nodes[i];
        fprintf(stderr, "  %s: %s%s%s\n", node->url, redlock_vote_name(node->vote),
                node->error != NULL ? ", " : "", node->error != NULL ? node->error : "");
    }
}

/* Hold the lock once per job until the jobs are done, a signal came, or something failed. */
static void run(runner *r, redlock_sync *sync)
{
    redlock_lock_opts lock_opts;
    redlock_lock_opts_init(&lock_opts);
    lock_opts.wait_ms = r->cfg->wait_ms; /* wait in the resource's queue for our turn */
    lock_opts.fencing = true;
    lock_opts.cancel = r->cancel;
    static redlock_report report; /* about 30 KB: off the stack */
    redlock_report_init(&report);
    while (r->done < r->cfg->jobs && !r->failed && !atomic_load(&r->stopping)) {
        redlock_hold_end end;
        int rc = redlock_sync_with(sync, r->cfg->resource, REDLOCK_STRLEN, r->cfg->ttl_ms,
                                   &lock_opts, do_job, r, &end, &report);
        printf("ended %s: %s\n", redlock_hold_end_name(end), redlock_strerror(rc));
        /* Busy all along (or won too late): wait again. Anything else is the nodes failing. */
        if (end == REDLOCK_HOLD_NOT_ACQUIRED && rc != REDLOCK_EBUSY && rc != REDLOCK_EEXPIRED) {
            fprintf(stderr, "no lock: %s%s%s\n", redlock_strerror(rc),
                    report.message[0] ? ": " : "", report.message);
            print_nodes(&report);
            r->failed = true;
        }
    }
}

int main(int argc, char **argv)
{
    job_config cfg;
    int rc = job_config_parse(&cfg, argc, argv);
    if (rc != 0) {
        job_config_free(&cfg);
        return rc;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN); /* a write to a store that just died must not kill the process */
    /* Blocked before any thread starts, so that every thread (the library's too) inherits the
     * mask and only sigwait takes them. */
    sigset_t set;
    stop_signals(&set);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    runner r = {.cfg = &cfg, .stop_pipe = {-1, -1}};
    int status = 1;
    redlock_sync *sync = NULL;
    pthread_t signals;
    bool signals_started = false;
    char err[256];
    redlock_options opts;
    job_config_client_options(&cfg, &opts);
    if (redlock_canceler_new(&r.cancel) != 0 || pipe(r.stop_pipe) != 0) {
        fprintf(stderr, "out of memory or descriptors\n");
    } else if ((r.store = job_store_open(cfg.store_url, cfg.resource)) == NULL) {
        /* said why */
    } else if ((rc = redlock_sync_new(cfg.node_urls, cfg.n_nodes, &opts, &sync, err,
                                      sizeof(err))) != 0) {
        fprintf(stderr, "%s: %s\n", redlock_err_name(rc), err);
        status = rc == REDLOCK_ENOMEM ? 1 : 2; /* a bad node URL is bad usage */
    } else if (pthread_create(&signals, NULL, signal_thread, &r) != 0) {
        fprintf(stderr, "cannot start the signal thread\n");
    } else {
        signals_started = true;
        run(&r, sync);
        printf("%s: %u jobs done\n", atomic_load(&r.stopping) ? "stopped" : "finished", r.done);
        status = r.failed ? 1 : 0;
    }

    redlock_sync_free(sync); /* releases whatever it still holds (nothing, here) */
    if (signals_started) {
        pthread_kill(signals, SIGUSR1);
        pthread_join(signals, NULL);
    }
    job_store_close(r.store);
    redlock_canceler_free(r.cancel);
    for (int i = 0; i < 2; i++)
        if (r.stop_pipe[i] >= 0)
            close(r.stop_pipe[i]);
    job_config_free(&cfg);
    return status;
}
