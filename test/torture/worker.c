/* SPDX-License-Identifier: MIT */
/* worker.c - see worker.h. */
#include "worker.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "checker.h"
#include "fence_check.h"
#include "redlock.h"

/* The pause between GET and SET is random, up to this long: it widens the race window. */
#define MAX_PAUSE_US 1000
/* A contender that lost a round tries again after 5 ms +/- 4 ms. */
#define RETRY_DELAY_MS 5
#define RETRY_JITTER_MS 4

typedef struct worker_thread {
    pthread_t tid;
    const torture_config *cfg;
    unsigned process, index;
    redlock_sync *sync; /* shared by the process's threads: the API is thread-safe */
    int log_fd;         /* shared too: one write(2) per line, O_APPEND */
    /* Shared too: held for reading from the last look at the deadline to the end of the
     * write, for writing by the pause thread while the process is stopped (worker.h). */
    pthread_rwlock_t *write_window;
    redisContext *data; /* this thread's own */
    unsigned seed;
    unsigned long holds, increments, skipped, failures;
    unsigned long to_deadline; /* holds that ran on to their deadline on purpose */
    int error;                 /* set when the thread stopped on a harness failure */
    redlock_report report;     /* of the last release, printed when it failed */
    /* Fencing (fence_check.h; not in the negative control): the last write's fate. */
    bool fencing;
    unsigned long refused;
    char fence_outcome; /* 'a' accepted, 'r' refused, 'n' no write */
    uint64_t fence_seq, write_start_us;
} worker_thread;

static int write_line(worker_thread *w, const char *line, int len)
{
    /* One write per line: the threads of the process share the descriptor, and O_APPEND makes
     * every line land whole at the end. */
    ssize_t n;
    do {
        n = write(w->log_fd, line, (size_t)len);
    } while (n < 0 && errno == EINTR);
    if (n != len) {
        fprintf(stderr, "worker %u.%u: log write: %s\n", w->process, w->index,
                n < 0 ? strerror(errno) : "short write");
        return -1;
    }
    return 0;
}

static int data_get(worker_thread *w, unsigned resource, long long *value)
{
    redisReply *reply = redisCommand(w->data, "GET torture:counter:%u", resource);
    int rc = -1;
    if (reply == NULL) {
        fprintf(stderr, "worker %u.%u: GET: %s\n", w->process, w->index, w->data->errstr);
        return -1;
    }
    if (reply->type == REDIS_REPLY_NIL) {
        *value = 0;
        rc = 0;
    } else if (reply->type == REDIS_REPLY_STRING) {
        char *end;
        *value = strtoll(reply->str, &end, 10);
        rc = *end == '\0' ? 0 : -1;
    }
    if (rc != 0)
        fprintf(stderr, "worker %u.%u: GET: unexpected reply\n", w->process, w->index);
    freeReplyObject(reply);
    return rc;
}

static int data_set(worker_thread *w, unsigned resource, long long value)
{
    redisReply *reply = redisCommand(w->data, "SET torture:counter:%u %lld", resource, value);
    if (reply == NULL || reply->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "worker %u.%u: SET: %s\n", w->process, w->index,
                reply != NULL ? reply->str : w->data->errstr);
        freeReplyObject(reply);
        return -1;
    }
    freeReplyObject(reply);
    return 0;
}

static int log_failure(worker_thread *w, unsigned resource, int status, uint64_t start_us,
                       uint64_t done_us)
{
    w->failures++;
    if (status != REDLOCK_EBUSY && status != REDLOCK_ENOQUORUM && status != REDLOCK_EEXPIRED) {
        fprintf(stderr, "worker %u.%u: acquire: %s\n", w->process, w->index,
                redlock_err_name(status));
        return -1;
    }
    torture_failure failure = {.resource = resource,
                               .process = w->process,
                               .thread = w->index,
                               .status = status,
                               .acquire_start_us = start_us,
                               .acquire_done_us = done_us};
    char line[TORTURE_LINE_MAX];
    int len = torture_failure_format(&failure, line, sizeof(line));
    return len < 0 ? -1 : write_line(w, line, len);
}

/* Whether the worker's locks of resource are fenced: the even resources', unless fencing is off
 * (the negative control). The odd ones are plain waiters, which take turns in the resource's
 * queue and are handed the lock by grants (docs/algorithm.md, "Handoff by grant"), so the
 * checker sees both kinds through the same faults. */
static bool fenced(const worker_thread *w, unsigned resource)
{
    return w->fencing && resource % 2 == 0;
}

/* The critical section's SET: through the fenced store when fenced (which may refuse it: a newer
 * holder wrote), else a plain SET. Returns 0 or -1 (data server failed). */
static int write_value(worker_thread *w, redlock_sync_lock *lock, torture_hold *hold,
                       long long value)
{
    if (fenced(w, hold->resource)) {
        bool accepted;
        w->write_start_us = redlock_now_us();
        if (torture_fence_set(w->data, hold->resource, value, redlock_sync_lock_fence(lock),
                              &accepted, &w->fence_seq) != 0)
            return -1;
        w->fence_outcome = accepted ? 'a' : 'r';
        if (!accepted) { /* a newer holder wrote: the store refused this stale write */
            w->refused++;
            return 0;
        }
    } else if (data_set(w, hold->resource, value) != 0) {
        return -1;
    }
    hold->write_done_us = redlock_now_us();
    hold->incremented = true;
    w->increments++;
    return 0;
}

/* The critical section: GET, pause, SET value + 1, but the SET only while at least margin_us
 * of validity is left. No pause of the process falls between that look at the deadline and the
 * end of the SET (worker.h). Returns 0 or -1 (data server failed). */
static int read_modify_write(worker_thread *w, redlock_sync_lock *lock, torture_hold *hold,
                             uint64_t margin_us)
{
    long long value;
    if (data_get(w, hold->resource, &value) != 0)
        return -1;
    long pause_us = (long)(rand_r(&w->seed) % MAX_PAUSE_US) + (long)w->cfg->hold_ms * 1000;
    struct timespec pause = {pause_us / 1000000, (pause_us % 1000000) * 1000};
    nanosleep(&pause, NULL);
    int rc = 0;
    pthread_rwlock_rdlock(w->write_window);
    if (redlock_now_us() + margin_us >= redlock_sync_lock_deadline_us(lock))
        w->skipped++;
    else
        rc = write_value(w, lock, hold, value + 1);
    pthread_rwlock_unlock(w->write_window);
    return rc;
}

/* Hold on until the deadline has passed on the redlock_now_us() clock (sleeps are never
 * early, but do not rely on nanosleep and the library reading the same clock). */
static void sleep_until(uint64_t deadline_us)
{
    for (;;) {
        uint64_t now_us = redlock_now_us();
        if (now_us >= deadline_us)
            return;
        uint64_t left_us = deadline_us - now_us;
        struct timespec ts = {(time_t)(left_us / 1000000), (long)(left_us % 1000000) * 1000};
        nanosleep(&ts, NULL);
    }
}

/* A failed release is allowed (the keys expire), but it is rare with a quorum of nodes up, so
 * say what each node answered. */
static void print_release_failure(const worker_thread *w, const torture_hold *hold)
{
    const redlock_report *report = &w->report;
    fprintf(stderr,
            "worker %u.%u: %.3f: release of resource %u: %s (%u yes, %u no, %u error, %u "
            "timeout after %llu us)\n",
            w->process, w->index, (double)hold->release_us / 1e6, hold->resource,
            redlock_err_name(hold->release_status), report->votes_yes, report->votes_no,
            report->votes_error, report->votes_timeout, (unsigned long long)report->elapsed_us);
    for (unsigned i = 0; i < report->n_nodes; i++)
        fprintf(stderr, "  %s: %s %llu us%s%s\n", report->nodes[i].url,
                redlock_vote_name(report->nodes[i].vote),
                (unsigned long long)report->nodes[i].latency_us,
                report->nodes[i].error != NULL ? ", " : "",
                report->nodes[i].error != NULL ? report->nodes[i].error : "");
}

/* The other resource of a set, or resource itself for a lock of one: a third of the plain
 * (odd) resources' locks take two of them at once (redlock_acquire_multi), waiting in both
 * queues, so overlapping sets, single locks and grants meet under the same faults. */
static unsigned set_partner(worker_thread *w, unsigned resource)
{
    unsigned odd = w->cfg->resources / 2;
    if (fenced(w, resource) || resource % 2 == 0 || odd < 2 || rand_r(&w->seed) % 3 != 0)
        return resource;
    unsigned other = 2 * (unsigned)(rand_r(&w->seed) % (odd - 1)) + 1;
    return other >= resource ? other + 2 : other; /* an odd resource other than this one */
}

/* One attempt on resource (and, for a set, its partner): acquire, write each, (now and then hold
 * on to the deadline,) release, log a hold per resource. Returns 0, or -1 to stop. */
static int attempt(worker_thread *w, unsigned resource)
{
    unsigned resources[2] = {resource, set_partner(w, resource)};
    unsigned count = resources[1] != resource ? 2 : 1;
    char names[2][64];
    const void *name_ptrs[2];
    size_t name_lens[2];
    for (unsigned i = 0; i < count; i++) {
        name_lens[i] =
            (size_t)snprintf(names[i], sizeof(names[i]), "torture:lock:%u", resources[i]);
        name_ptrs[i] = names[i];
    }
    redlock_lock_opts opts;
    redlock_lock_opts_init(&opts);
    opts.wait_ms = w->cfg->wait_ms;
    /* A hold that runs on to its deadline has a shorter ttl, so that it keeps its resource from
     * the others for a while, not for a whole ttl. */
    bool to_deadline = (unsigned)(rand_r(&w->seed) % 1000) < w->cfg->deadline_per_mille;
    uint64_t ttl_ms = to_deadline ? w->cfg->deadline_ttl_ms : w->cfg->ttl_ms;
    opts.fencing = fenced(w, resource);
    redlock_sync_lock *lock = NULL;
    uint64_t start_us = redlock_now_us();
    int rc = redlock_sync_acquire_multi(w->sync, name_ptrs, name_lens, count, ttl_ms, &opts, &lock,
                                        NULL);
    uint64_t done_us = redlock_now_us();
    if (rc != 0) {
        for (unsigned i = 0; i < count; i++)
            if (log_failure(w, resources[i], rc, start_us, done_us) != 0)
                return -1;
        return 0;
    }

    w->holds++;
    torture_hold holds[2];
    for (unsigned i = 0; i < count; i++) {
        holds[i] = (torture_hold){.resource = resources[i],
                                  .process = w->process,
                                  .thread = w->index,
                                  .acquire_start_us = start_us,
                                  .acquire_done_us = done_us,
                                  .deadline_us = redlock_sync_lock_deadline_us(lock)};
        snprintf(holds[i].token, sizeof(holds[i].token), "%s", redlock_sync_lock_token(lock, NULL));
    }
    uint64_t fence = redlock_sync_lock_fence(lock);
    w->fence_outcome = 'n';
    w->fence_seq = w->write_start_us = 0;
    int result = 0;
    for (unsigned i = 0; result == 0 && i < count; i++)
        result = read_modify_write(w, lock, &holds[i],
                                   w->cfg->margin_ms * 1000 * ttl_ms / w->cfg->ttl_ms);
    if (result == 0 && to_deadline) {
        /* The release comes after the deadline: the deadline is what ends this hold, and the
         * others may take the lock from there on (once its keys expired). */
        sleep_until(holds[0].deadline_us);
        w->to_deadline++;
    }
    uint64_t release_us = redlock_now_us();
    int release_status = redlock_sync_release(lock, &w->report);
    for (unsigned i = 0; i < count; i++) {
        holds[i].release_us = release_us;
        holds[i].release_status = release_status;
    }
    if (release_status != 0 && !(to_deadline && release_status == REDLOCK_ELOST))
        print_release_failure(w, &holds[0]);
    redlock_sync_lock_free(lock);

    for (unsigned i = 0; i < count; i++) {
        char line[TORTURE_LINE_MAX];
        int len = torture_hold_format(&holds[i], line, sizeof(line));
        if (len < 0 || write_line(w, line, len) != 0)
            return -1;
    }
    /* The fence checker orders holds by their grant. The library granted this one before its
     * deadline; a process paused between that grant and the call's return (SIGSTOP by the
     * chaos) sees the return after the deadline, and another holder may have been granted in
     * between: the grant is then no later than the deadline, not at the return. */
    uint64_t granted_us = done_us < holds[0].deadline_us ? done_us : holds[0].deadline_us;
    if (fenced(w, resource) &&
        torture_fence_log(resource, w->process, w->index, fence, start_us, granted_us,
                          w->write_start_us, w->fence_outcome, w->fence_seq) != 0)
        return -1;
    return result;
}

static void *thread_main(void *arg)
{
    worker_thread *w = arg;
    const struct timeval timeout = {5, 0}; /* generous: sanitizer builds are slow */
    w->data = redisConnectWithTimeout("127.0.0.1", w->cfg->data_port, timeout);
    if (w->data == NULL || w->data->err) {
        fprintf(stderr, "worker %u.%u: data server: %s\n", w->process, w->index,
                w->data != NULL ? w->data->errstr : "out of memory");
        w->error = 1;
        return NULL;
    }
    redisSetTimeout(w->data, timeout);
    while (redlock_now_us() < w->cfg->end_us) {
        if (attempt(w, (unsigned)rand_r(&w->seed) % w->cfg->resources) != 0) {
            w->error = 1;
            break;
        }
    }
    return NULL;
}

static redlock_sync *make_client(const torture_config *cfg, unsigned process)
{
    redlock_options opts;
    redlock_options_init(&opts);
    opts.ttl_ms = cfg->ttl_ms;
    opts.node_timeout_ms = cfg->node_timeout_ms;
    opts.retry_delay_ms = RETRY_DELAY_MS;
    opts.retry_jitter_ms = RETRY_JITTER_MS;
    opts.reconnect_max_ms = cfg->reconnect_max_ms; /* come back soon after a node restarts */
    opts.connect_timeout_ms = cfg->connect_timeout_ms;
    redlock_sync *sync = NULL;
    char err[256];
    int rc = redlock_sync_new(cfg->node_urls, cfg->n_nodes, &opts, &sync, err, sizeof(err));
    if (rc != 0)
        fprintf(stderr, "worker %u: %s: %s\n", process, redlock_err_name(rc), err);
    return sync;
}

/* The pause thread: SIGUSR1 stops the whole process (SIGSTOP) once no thread is inside its
 * write window, until the driver's SIGCONT; SIGUSR2 ends the thread. Both signals are blocked
 * in every thread of the process (the driver forks it with them blocked), so only sigwait
 * takes them. */
static void *pause_main(void *arg)
{
    pthread_rwlock_t *write_window = arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    for (;;) {
        int sig = 0;
        if (sigwait(&set, &sig) != 0)
            continue;
        if (sig == SIGUSR2)
            return NULL;
        pthread_rwlock_wrlock(write_window);
        kill(getpid(), SIGSTOP); /* returns once the driver sent SIGCONT */
        pthread_rwlock_unlock(write_window);
    }
}

int torture_worker_run(const torture_config *cfg, unsigned process)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/worker-%u.log", cfg->log_dir, process);
    int log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        fprintf(stderr, "worker %u: %s: %s\n", process, path, strerror(errno));
        return 1;
    }
    /* Made here, after fork(): a client owns a thread, which a forked child would not get. */
    redlock_sync *sync = make_client(cfg, process);
    /* Fenced locks and a fenced store, except in the negative control, whose lost updates the
     * store's check would refuse (and the control must see them). */
    bool fencing = !cfg->unsafe;
    if (sync == NULL || (fencing && torture_fence_open(cfg->log_dir, process) != 0)) {
        redlock_sync_free(sync);
        close(log_fd);
        return 1;
    }

    pthread_rwlock_t write_window;
    pthread_t pause_tid;
    if (pthread_rwlock_init(&write_window, NULL) != 0 ||
        pthread_create(&pause_tid, NULL, pause_main, &write_window) != 0) {
        fprintf(stderr, "worker %u: cannot start the pause thread\n", process);
        redlock_sync_free(sync);
        close(log_fd);
        return 1;
    }
    worker_thread *threads = calloc(cfg->threads, sizeof(*threads));
    unsigned started = 0;
    for (; threads != NULL && started < cfg->threads; started++) {
        worker_thread *w = &threads[started];
        *w = (worker_thread){.cfg = cfg,
                             .process = process,
                             .index = started,
                             .sync = sync,
                             .log_fd = log_fd,
                             .write_window = &write_window,
                             .fencing = fencing,
                             .seed = cfg->seed * 1000003u + process * 1009u + started};
        redlock_report_init(&w->report);
        if (pthread_create(&w->tid, NULL, thread_main, w) != 0) {
            fprintf(stderr, "worker %u: pthread_create failed\n", process);
            break;
        }
    }
    int exit_code = threads == NULL || started < cfg->threads ? 1 : 0;
    unsigned long holds = 0, increments = 0, skipped = 0, failures = 0, to_deadline = 0,
                  refused = 0;
    for (unsigned i = 0; i < started; i++) {
        worker_thread *w = &threads[i];
        pthread_join(w->tid, NULL);
        if (w->data != NULL)
            redisFree(w->data);
        exit_code |= w->error;
        holds += w->holds;
        increments += w->increments;
        skipped += w->skipped;
        failures += w->failures;
        to_deadline += w->to_deadline;
        refused += w->refused;
    }
    free(threads);
    redlock_stats st; /* how many holds the queue's grants handed over (the odd resources') */
    redlock_stats_init(&st);
    if (redlock_sync_stats(sync, &st) != 0)
        st.acquires_granted = 0;
    pthread_kill(pause_tid, SIGUSR2);
    pthread_join(pause_tid, NULL);
    pthread_rwlock_destroy(&write_window);
    redlock_sync_free(sync);
    close(log_fd);
    torture_fence_close();
    fprintf(stderr,
            "worker %u: %lu holds (%lu run on to their deadline, %llu handed over by grants), %lu "
            "increments, %lu skipped, %lu refused by the store, %lu failed acquires%s\n",
            process, holds, to_deadline, (unsigned long long)st.acquires_granted, increments,
            skipped, refused, failures, exit_code != 0 ? ", FAILED" : "");
    return exit_code;
}
