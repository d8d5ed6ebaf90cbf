/* SPDX-License-Identifier: MIT */
/* job_runner_async.c - a job runner on a libuv loop: several processes run it at once, and each
 * job is done by one of them, holding the lock (redlock_using).
 *
 *   job_runner_async --nodes redis://10.0.1.5:6379,redis://10.0.2.5:6379,... \
 *                    --store redis://10.0.9.5:6379 --jobs 10
 *
 * Each job is one hold of the lock on job:nightly-report (--resource): wait for the lock with a
 * fence, read the next job's number from the store (job_store.h), do the work (a timer of
 * --work-ms here) while the library keeps the lock alive, commit the job with the fence (the
 * store refuses a fence older than one it accepted), release. The options are in job_config.h.
 *
 * SIGTERM or SIGINT (a uv_signal) stops it cleanly: it fires a canceler, which ends a wait
 * for the lock in progress (leaving nothing held), and ends a work in progress unfinished, which
 * releases the lock at once. Then the client closes and the loop ends.
 *
 * The store's calls block the loop for one round trip each (job_store.h is shared with the
 * blocking runner); a service would use hiredis's async API on the same loop instead.
 *
 * Output and exit status: as job_runner_sync.c's.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#include <redlock.h>
#include <uv.h>

#include "job_config.h"
#include "job_store.h"

typedef struct runner {
    const job_config *cfg;
    job_store *store;
    redlock_client *client;
    redlock_lock_opts lock_opts;
    redlock_canceler *cancel; /* fired by a signal: ends the wait for the lock */
    uv_signal_t sigterm, sigint;
    uv_timer_t work;       /* the work in progress: it takes work_ms */
    redlock_lock *holding; /* the lock while a work runs, else NULL */
    uint64_t job, fence;   /* the work's */
    unsigned done;         /* jobs committed */
    bool stopping, failed, closing;
} runner;

static void next_hold(runner *r);

static void shut_down(runner *r)
{
    if (r->closing)
        return;
    r->closing = true;
    uv_close((uv_handle_t *)&r->sigterm, NULL);
    uv_close((uv_handle_t *)&r->sigint, NULL);
    uv_close((uv_handle_t *)&r->work, NULL);
    redlock_client_close(r->client, NULL, NULL); /* releases what it still holds: nothing here */
}

/* ---- one job, holding the lock ------------------------------------------------------------- */

/* The work is over (unfinished: why not): release the lock; the hold's ended follows. */
static void end_work(runner *r, const char *unfinished)
{
    redlock_lock *lock = r->holding;
    if (lock == NULL)
        return;
    r->holding = NULL;
    uv_timer_stop(&r->work);
    if (unfinished != NULL)
        printf("abandoned job=%" PRIu64 ": %s\n", r->job, unfinished);
    int rc = redlock_using_done(lock);
    if (rc != 0) { /* out of memory: the close releases the lock and ends the hold */
        fprintf(stderr, "redlock_using_done: %s\n", redlock_strerror(rc));
        r->failed = true;
        shut_down(r);
    }
}

/* The work's time is up: commit the job with the lock's fence. */
static void on_work_done(uv_timer_t *timer)
{
    runner *r = timer->data;
    /* The last check before the side effect; a pause after it is the store's fence check's. */
    if (!redlock_lock_is_held(r->holding, redlock_now_us())) {
        end_work(r, "the lock was lost");
        return;
    }
    char why[256];
    int rc = job_store_commit(r->store, r->job, r->fence, why, sizeof(why));
    if (rc == 0) {
        printf("done job=%" PRIu64 " fence=%" PRIu64 "\n", r->job, r->fence);
        r->done++;
    } else if (rc == JOB_STORE_STALE) {
        printf("refused job=%" PRIu64 " fence=%" PRIu64 ": %s\n", r->job, r->fence, why);
    } else {
        r->failed = true;
    }
    end_work(r, NULL);
}

/* redlock_using's work: it starts holding the lock, which the library keeps alive. */
static void work(redlock_lock *lock, void *data)
{
    runner *r = data;
    r->holding = lock;
    r->fence = redlock_lock_fence(lock);
    if (job_store_next(r->store, &r->job) != 0) {
        r->failed = true;
        end_work(r, "the store failed");
        return;
    }
    printf("holding job=%" PRIu64 " fence=%" PRIu64 " token=%s\n", r->job, r->fence,
           redlock_lock_token(lock, NULL));
    uv_timer_start(&r->work, on_work_done, r->cfg->work_ms, 0);
}

/* The lock was lost while the work ran: stop the work now. */
static void on_lost(redlock_lock *lock, int reason, void *data)
{
    (void)lock;
    end_work(data, redlock_strerror(reason));
}

static void print_nodes(const redlock_result *result)
{
    for (unsigned i = 0; i < result->n_nodes; i++) {
        const redlock_node_result *node = &result->nodes[i];
        fprintf(stderr, "  %s: %s%s%s\n", node->url, redlock_vote_name(node->vote),
                node->error != NULL ? ", " : "", node->error != NULL ? node->error : "");
    }
}

/* The hold is over, whichever way: the next job, or the end. */
static void ended(redlock_hold_end end, int status, const redlock_result *result, void *data)
{
    runner *r = data;
    printf("ended %s: %s\n", redlock_hold_end_name(end), redlock_strerror(status));
    /* Busy all along (or won too late): wait again. Anything else is the nodes failing. */
    if (end == REDLOCK_HOLD_NOT_ACQUIRED && status != REDLOCK_EBUSY && status != REDLOCK_EEXPIRED) {
        fprintf(stderr, "no lock: %s\n", redlock_strerror(status));
        print_nodes(result);
        r->failed = true;
    }
    next_hold(r);
}

static void next_hold(runner *r)
{
    if (r->done == r->cfg->jobs || r->stopping || r->failed) {
        printf("%s: %u jobs done\n", r->stopping ? "stopped" : "finished", r->done);
        shut_down(r);
        return;
    }
    int rc = redlock_using(r->client, r->cfg->resource, REDLOCK_STRLEN, r->cfg->ttl_ms,
                           &r->lock_opts, work, ended, r);
    if (rc != 0) {
        fprintf(stderr, "redlock_using: %s\n", redlock_client_last_error(r->client));
        r->failed = true;
        shut_down(r);
    }
}

/* ---- stopping on a signal ------------------------------------------------------------------ */

static void on_signal(uv_signal_t *handle, int signum)
{
    runner *r = handle->data;
    (void)signum;
    if (r->stopping)
        return;
    r->stopping = true;
    redlock_canceler_fire(r->cancel); /* a wait in progress ends: ended "canceled" */
    end_work(r, "stopping");          /* a work in progress ends: ended "released" */
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
    signal(SIGPIPE, SIG_IGN); /* a write to a node that just died must not kill the process */

    uv_loop_t *loop = uv_default_loop();
    runner r = {.cfg = &cfg};
    int status = 1;
    char err[256];
    redlock_options opts;
    job_config_client_options(&cfg, &opts);
    if (redlock_canceler_new(&r.cancel) != 0) {
        fprintf(stderr, "out of memory\n");
    } else if ((r.store = job_store_open(cfg.store_url, cfg.resource)) == NULL) {
        /* said why */
    } else if ((rc = redlock_client_new(loop, cfg.node_urls, cfg.n_nodes, &opts, &r.client, err,
                                        sizeof(err))) != 0) {
        fprintf(stderr, "%s: %s\n", redlock_err_name(rc), err);
        status = rc == REDLOCK_ENOMEM ? 1 : 2; /* a bad node URL is bad usage */
    } else {
        redlock_lock_opts_init(&r.lock_opts);
        r.lock_opts.wait_ms = cfg.wait_ms; /* wait in the resource's queue for our turn */
        r.lock_opts.fencing = true;
        r.lock_opts.cancel = r.cancel;
        r.lock_opts.lost_cb = on_lost;
        r.lock_opts.lost_data = &r;
        uv_signal_init(loop, &r.sigterm);
        uv_signal_init(loop, &r.sigint);
        uv_timer_init(loop, &r.work);
        r.sigterm.data = r.sigint.data = r.work.data = &r;
        uv_signal_start(&r.sigterm, on_signal, SIGTERM);
        uv_signal_start(&r.sigint, on_signal, SIGINT);
        next_hold(&r);
        uv_run(loop, UV_RUN_DEFAULT); /* until the client and the handles are closed */
        status = r.failed ? 1 : 0;
    }
    uv_loop_close(loop);
    job_store_close(r.store);
    redlock_canceler_free(r.cancel);
    job_config_free(&cfg);
    return status;
}
