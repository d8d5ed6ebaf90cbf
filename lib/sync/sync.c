/* SPDX-License-Identifier: MIT */
/* sync.c - the blocking, thread-safe client: a loop thread that runs an async client, and calls
 * from any thread that hand it requests and wait for their outcome.
 *
 * A call fills a request on its own stack, pushes it onto the queue under the mutex, wakes the
 * loop with uv_async_send and waits on the request's condition variable. The loop thread drains
 * the whole queue on each wake-up (uv_async_send coalesces wake-ups), starts the async
 * operations and, from their callbacks, copies the outcome into the request and signals it.
 *
 * What lives where:
 *   - the queue, `closing` and `callers` are guarded by sync->mutex;
 *   - the client, the lock list and each handle's async lock are touched by the loop thread
 *     only (and, after the thread is joined, by redlock_sync_free);
 *   - a handle's resource and token are written before the acquiring caller is woken and never
 *     again, so any thread reads them without locking; its validity, deadline and status are
 *     C11 atomics, stored by the loop thread.
 * The allocator hook is called by the loop thread only, and by the thread in redlock_sync_new
 * and redlock_sync_free before the loop thread starts and after it has ended: never by two
 * threads at once.
 *
 * Closing: redlock_sync_free sets `closing` under the mutex (from then on calls return
 * REDLOCK_ECLOSING without queueing anything) and wakes the loop. The loop cancels what is still
 * queued, closes the client (which completes every operation in flight with REDLOCK_ECANCELED
 * and gives auto-extended locks their lost callback), then closes its own handles, so uv_run
 * returns and the thread ends. redlock_sync_free joins it, waits until every woken caller has
 * left the mutex, and frees the rest. */
#include "sync_lock.h"

#include <assert.h>
#ifndef _WIN32
#include <signal.h>
#endif

#include "abi.h"

typedef enum {
    REQ_ACQUIRE,
    REQ_ATTACH,
    REQ_INSPECT,
    REQ_EXTEND,
    REQ_RELEASE,
    REQ_LOCK_FREE,
    REQ_QUERY, /* redlock_sync_node_info, redlock_sync_stats */
    REQ_CANCEL /* redlock_sync_cancel */
} req_kind;

/* One blocking call. It lives on the caller's stack, which stays put until the loop thread
 * has set `done`; the loop thread does not touch it after that. */
typedef struct sync_req {
    req_kind kind;
    redlock_sync *sync; /* set by submit */
    redlock__list link; /* sync->queue; then sync->started while its async operation runs */
    uv_cond_t cond;
    bool done;
    int status;
    redlock_report *report;  /* the caller's, or NULL */
    redlock_sync_lock *lock; /* the target; for acquire and attach, the new handle on success */
    /* acquire, attach, inspect: borrowed from the caller until the async call has copied them;
     * count of them (one but for the calls on a set) */
    const void *const *resources;
    const size_t *lens;
    unsigned count;
    const void *token; /* attach */
    size_t token_len;
    redlock_lock_opts opts; /* acquire: the caller's, read by its size (abi.h) */
    uint64_t ttl_ms;
    unsigned flags;
    /* query: one of these is set, the caller's */
    redlock_node_info *node_info;
    unsigned node;
    redlock_stats *stats;
    const redlock_report *target; /* cancel: the report of the call to cancel */
} sync_req;

struct redlock_sync {
    uv_loop_t loop;
    uv_async_t async;
    uv_check_t check; /* copies auto-extended locks' new deadlines once per loop iteration */
    uv_thread_t thread;
    redlock__alloc alloc;
    redlock_client *client;

    uv_mutex_t mutex;
    uv_cond_t idle;      /* signalled when `callers` drops to 0 while closing */
    redlock__list queue; /* sync_req, guarded by mutex */
    bool closing;        /* guarded by mutex */
    unsigned callers;    /* calls between queueing and return, guarded by mutex */

    /* Loop thread only. */
    redlock__list locks;      /* every handle not yet freed */
    redlock__list auto_locks; /* handles being auto-extended */
    redlock__list started;    /* calls whose async operation runs (redlock_sync_cancel) */
    bool close_started;
    unsigned close_flags; /* redlock_sync_free_ex's, written before `closing` under the mutex */
    char last_error[256]; /* redlock_sync_last_error's, guarded by mutex */
};

/* ---- reports --------------------------------------------------------------------------------- */

/* Every public call checks its report with redlock__report_ok before anything else, and
 * refuses a bad one: from then on a non-NULL report is the caller's, set up and at least as
 * large as the first layout (REDLOCK__REPORT_MIN). Members appended after it are written only
 * where REDLOCK__HAS(report->size, ...) says the caller has them.
 *
 * A call that ended before any round: its status, and why in words (message NULL or "": the
 * status's own text). */
void redlock__sync_report_status(redlock_report *report, int status, const char *message)
{
    if (report == NULL)
        return;
    report->status = status;
    redlock__fmt(report->message, sizeof(report->message), "%s",
                 message != NULL && message[0] != '\0' ? message : redlock_strerror(status));
    report->n_nodes = 0;
    report->votes_yes = report->votes_no = report->votes_error = report->votes_timeout = 0;
    report->attempts = 0;
    report->elapsed_us = 0;
    if (REDLOCK__HAS(report->size, redlock_report, fence))
        report->fence = 0;
}

void redlock_report_init_sized(redlock_report *report, size_t size)
{
    if (size < sizeof(size_t))
        return;
    /* Empty: zeros, except the size. Written in place (the struct is large). */
    memset(report, 0, size);
    report->size = size;
}

int redlock_report_copy(redlock_report *report, const redlock_result *result)
{
    if (report == NULL)
        return 0;
    if (!redlock__report_ok(report))
        return REDLOCK_EINVAL;
    if (result == NULL) {
        redlock__sync_report_status(report, 0, NULL);
        return 0;
    }
    report->status = result->status;
    report->message[0] = '\0';
    report->votes_yes = result->votes_yes;
    report->votes_no = result->votes_no;
    report->votes_error = result->votes_error;
    report->votes_timeout = result->votes_timeout;
    report->attempts = result->attempts;
    report->elapsed_us = result->elapsed_us;
    if (REDLOCK__HAS(report->size, redlock_report, fence))
        report->fence = result->fence;
    unsigned n = result->nodes != NULL ? REDLOCK__MIN(result->n_nodes, REDLOCK_MAX_NODES) : 0;
    report->n_nodes = n;
    for (unsigned i = 0; i < n; i++) {
        const redlock_node_result *src = &result->nodes[i];
        redlock_node_result *dst = &report->nodes[i];
        *dst = *src;
        if (src->error != NULL) {
            redlock__fmt(report->errors[i], sizeof(report->errors[i]), "%s", src->error);
            dst->error = report->errors[i];
        }
        if (src->value != NULL) {
            size_t len = REDLOCK__MIN(src->value_len, (size_t)REDLOCK_TOKEN_MAX);
            memcpy(report->values[i], src->value, len);
            report->values[i][len] = '\0';
            dst->value = report->values[i];
            dst->value_len = len;
        }
    }
    return 0;
}

/* ---- the caller's side ----------------------------------------------------------------------- */

static bool on_loop_thread(const redlock_sync *s)
{
    /* s->thread was written by uv_thread_create before redlock_sync_new returned; the loop
     * thread runs user code (lost callbacks) only for locks acquired through the mutex since. */
    uv_thread_t self = uv_thread_self();
    return uv_thread_equal(&self, &s->thread) != 0;
}

/* req never reached the loop thread: its report (if any) says why. */
static int refuse(sync_req *req, int status, const char *message)
{
    redlock__sync_report_status(req->report, status, message);
    return status;
}

/* Queue req, wake the loop and wait until the loop thread is done with it (it fills the report).
 * Returns its status, or at once REDLOCK_ECLOSING (free has started), REDLOCK_EINVAL (called on
 * the loop thread, from a lost callback: it would wait for itself) or REDLOCK_ENOMEM. */
static int submit(redlock_sync *s, sync_req *req)
{
    if (on_loop_thread(s))
        return refuse(req, REDLOCK_EINVAL,
                      "a blocking call from a lost callback would wait for the library's own "
                      "thread");
    if (uv_cond_init(&req->cond) != 0)
        return refuse(req, REDLOCK_ENOMEM, "cannot create a condition variable");
    req->done = false;
    req->sync = s;
    uv_mutex_lock(&s->mutex);
    if (s->closing) {
        uv_mutex_unlock(&s->mutex);
        uv_cond_destroy(&req->cond);
        return refuse(req, REDLOCK_ECLOSING, "the client is being freed");
    }
    redlock__list_push(&s->queue, &req->link);
    s->callers++;
    /* Under the mutex: free cannot close the async handle between our check of `closing` and
     * this send. */
    uv_async_send(&s->async);
    while (!req->done)
        uv_cond_wait(&req->cond, &s->mutex);
    if (--s->callers == 0 && s->closing)
        uv_cond_signal(&s->idle);
    uv_mutex_unlock(&s->mutex);
    uv_cond_destroy(&req->cond);
    return req->status;
}

/* ---- the loop thread ------------------------------------------------------------------------- */

/* Hand req's outcome to its caller. req must not be touched afterwards. */
static void complete(redlock_sync *s, sync_req *req, int status)
{
    redlock__list_remove(&req->link); /* from sync->started, if there */
    uv_mutex_lock(&s->mutex);
    if (status != 0) { /* the client's text of it (its failed nodes), cleared before each call */
        const char *text = s->client != NULL ? s->client->last_error : "";
        redlock__fmt(s->last_error, sizeof(s->last_error), "%s",
                     text[0] != '\0' ? text : redlock_strerror(status));
    }
    req->status = status;
    req->done = true;
    uv_cond_signal(&req->cond);
    uv_mutex_unlock(&s->mutex);
}

static void handle_destroy(redlock_sync *s, redlock_sync_lock *sl)
{
    redlock__sync_lock_fd_close(sl);
    redlock__list_remove(&sl->link);
    redlock__list_remove(&sl->auto_link);
    redlock__free(&s->alloc, sl);
}

/* Free a handle on the loop thread: forget the async lock (which stops its auto-extension) and
 * free the handle, or mark it so the last call in flight on it frees it. */
static void handle_free(redlock_sync *s, redlock_sync_lock *sl)
{
    redlock__list_remove(&sl->auto_link);
    if (sl->lock != NULL) {
        redlock_lock_set_data(sl->lock, NULL); /* a late lost callback finds no handle */
        redlock_lock_free(sl->lock);
        sl->lock = NULL;
    }
    if (sl->inflight > 0) {
        sl->free_pending = true;
        return;
    }
    handle_destroy(s, sl);
}

/* A call on sl has completed: free sl if it was freed meanwhile. */
static void handle_call_done(redlock_sync *s, redlock_sync_lock *sl)
{
    sl->inflight--;
    if (sl->inflight == 0 && sl->free_pending)
        handle_destroy(s, sl);
}

static void store_validity(redlock_sync_lock *sl)
{
    atomic_store(&sl->validity_ms, redlock_lock_validity_ms(sl->lock));
    atomic_store(&sl->deadline_us, redlock_lock_deadline_us(sl->lock));
}

/* The wrapper around the caller's lost callback (if any): the handle's status becomes the reason,
 * and its loss descriptor readable, before the caller's callback runs. */
static void on_lost(redlock_lock *lock, int reason, void *data)
{
    (void)data;
    redlock_sync_lock *sl = redlock_lock_get_data(lock);
    if (sl == NULL)
        return; /* the handle was freed, or never handed out (its acquire was canceled) */
    redlock__list_remove(&sl->auto_link);
    atomic_store(&sl->status, reason);
    redlock__sync_lock_signal(sl);
    if (sl->lost_cb != NULL)
        sl->lost_cb(lock, reason, sl->lost_data); /* may free sl */
}

/* A check after a node's restart found a lock without auto-extension lost (recheck.c): its
 * handle's status says so from now on. */
static void on_checked_lost(redlock_lock *lock)
{
    redlock_sync_lock *sl = redlock_lock_get_data(lock);
    if (sl != NULL) {
        atomic_store(&sl->status, REDLOCK_ELOST);
        redlock__sync_lock_signal(sl);
    }
}

/* A new handle for req's resources (checked by the caller), not yet tied to an async lock. */
static redlock_sync_lock *handle_new(redlock_sync *s, const sync_req *req)
{
    /* The struct, the spans (aligned: the struct's size is a multiple of its 8-byte alignment),
     * then the bytes. */
    size_t size = sizeof(redlock_sync_lock) + req->count * sizeof(redlock__span);
    for (unsigned i = 0; i < req->count; i++)
        size += redlock__len(req->resources[i], req->lens[i]) + 1;
    redlock_sync_lock *sl = redlock__calloc(&s->alloc, 1, size);
    if (sl == NULL)
        return NULL;
    sl->sync = s;
    sl->mutex = &s->mutex;
    redlock__list_init(&sl->link);
    redlock__list_init(&sl->auto_link);
    atomic_init(&sl->validity_ms, 0);
    atomic_init(&sl->deadline_us, 0);
    atomic_init(&sl->status, 0);
    atomic_init(&sl->lost_fd, -1);
    atomic_init(&sl->lost_wfd, -1);
    atomic_init(&sl->scoped, false);
    sl->resources = (redlock__span *)(void *)(sl + 1);
    sl->n_resources = req->count;
    char *bytes = (char *)(sl->resources + req->count);
    for (unsigned i = 0; i < req->count; i++) {
        size_t len = redlock__len(req->resources[i], req->lens[i]);
        memcpy(bytes, req->resources[i], len);
        bytes[len] = '\0';
        sl->resources[i].ptr = bytes;
        sl->resources[i].len = len;
        bytes += len + 1;
    }
    return sl;
}

/* Tie sl to the async lock it stands for (acquired or attached) and hand it out. */
static void handle_adopt(redlock_sync *s, redlock_sync_lock *sl, redlock_lock *lock)
{
    sl->lock = lock;
    redlock_lock_set_data(lock, sl);
    const char *token = redlock_lock_token(lock, &sl->token_len);
    memcpy(sl->token, token, sl->token_len);
    sl->token[sl->token_len] = '\0';
    sl->fence = redlock_lock_fence(lock);
    store_validity(sl);
    atomic_store(&sl->status, 0);
    redlock__list_push(&s->locks, &sl->link);
}

static void on_acquired(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    sync_req *req = data;
    redlock_sync_lock *sl = req->lock;
    redlock_sync *s = sl->sync;
    redlock_report_copy(req->report, result);
    if (status != 0) {
        redlock__free(&s->alloc, sl);
        req->lock = NULL;
        complete(s, req, status);
        return;
    }
    handle_adopt(s, sl, lock);
    if (req->opts.auto_extend != NULL)
        redlock__list_push(&s->auto_locks, &sl->auto_link);
    complete(s, req, 0);
}

static void on_inspected(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)lock;
    sync_req *req = data;
    redlock_report_copy(req->report, result);
    complete(req->sync, req, status);
}

static void on_extended(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)lock;
    sync_req *req = data;
    redlock_sync_lock *sl = req->lock;
    redlock_sync *s = sl->sync;
    redlock_report_copy(req->report, result);
    if (status == 0 && sl->lock != NULL) {
        store_validity(sl);
        /* Held again after a loss (an extend called since won): the status says so too. */
        if (redlock_lock_is_held(sl->lock, redlock_now_us()))
            atomic_store(&sl->status, 0);
    }
    handle_call_done(s, sl);
    complete(s, req, status);
}

static void on_released(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)lock;
    sync_req *req = data;
    redlock_sync_lock *sl = req->lock;
    redlock_sync *s = sl->sync;
    redlock_report_copy(req->report, result);
    handle_call_done(s, sl);
    complete(s, req, status);
}

static int start_acquire(redlock_sync *s, sync_req *req)
{
    redlock_sync_lock *sl = handle_new(s, req);
    if (sl == NULL)
        return REDLOCK_ENOMEM;

    redlock_lock_opts opts = req->opts;
    if (opts.auto_extend != NULL) { /* the caller's lost callback is optional here */
        sl->lost_cb = opts.lost_cb;
        sl->lost_data = opts.lost_data;
        opts.lost_cb = on_lost;
        opts.lost_data = s;
    }
    req->lock = sl;
    int rc = redlock_acquire_multi(s->client, req->resources, req->lens, req->count, req->ttl_ms,
                                   &opts, on_acquired, req);
    if (rc != 0) {
        req->lock = NULL;
        redlock__free(&s->alloc, sl);
    }
    return rc;
}

/* Attach completes at once (no round): the handle is made and handed out here. */
static int start_attach(redlock_sync *s, sync_req *req)
{
    redlock_sync_lock *sl = handle_new(s, req);
    if (sl == NULL)
        return REDLOCK_ENOMEM;
    redlock_lock *lock = NULL;
    int rc = redlock_lock_attach(s->client, sl->resources[0].ptr, sl->resources[0].len, req->token,
                                 req->token_len, req->ttl_ms, &lock);
    if (rc != 0) {
        redlock__free(&s->alloc, sl);
        return rc;
    }
    handle_adopt(s, sl, lock);
    req->lock = sl;
    complete(s, req, 0);
    return 0;
}

static int start_call(redlock_sync *s, sync_req *req)
{
    redlock_sync_lock *sl = req->lock;
    if (sl->lock == NULL)
        return REDLOCK_ECANCELED; /* the client is gone (cannot happen before free) */
    int rc;
    if (req->kind == REQ_EXTEND) {
        rc = redlock_extend(sl->lock, req->ttl_ms, req->flags, on_extended, req);
    } else {
        rc = redlock_release(sl->lock, on_released, req);
        if (rc == 0) {
            /* Released from the call on, as the async handle counts it; auto-extension ends. */
            atomic_store(&sl->status, REDLOCK_ERELEASED);
            redlock__list_remove(&sl->auto_link);
        }
    }
    if (rc == 0)
        sl->inflight++;
    return rc;
}

static void on_client_closed(redlock_client *client, void *data)
{
    (void)client;
    redlock_sync *s = data;
    /* The client has freed every async lock: handles keep only what they copied. */
    for (redlock__list *it = s->locks.next; it != &s->locks; it = it->next) {
        redlock_sync_lock *sl = REDLOCK__CONTAINER_OF(it, redlock_sync_lock, link);
        sl->lock = NULL;
        redlock__list_remove(&sl->auto_link);
    }
    s->client = NULL;
    uv_check_stop(&s->check);
    uv_close((uv_handle_t *)&s->check, NULL);
    uv_close((uv_handle_t *)&s->async, NULL); /* no handle left: uv_run returns */
}

/* redlock_sync_cancel on the loop thread: cancel the async operation of the started call whose
 * report is target (its callback data is the call's request). */
static int cancel_started(redlock_sync *s, const redlock_report *target)
{
    for (redlock__list *it = s->started.next; it != &s->started; it = it->next) {
        sync_req *req = REDLOCK__CONTAINER_OF(it, sync_req, link);
        if (req->report == target)
            return redlock_cancel(s->client, req);
    }
    return REDLOCK_ENOTFOUND;
}

static void on_async(uv_async_t *async)
{
    redlock_sync *s = REDLOCK__CONTAINER_OF(async, redlock_sync, async);
    redlock__list batch;
    redlock__list_init(&batch);
    uv_mutex_lock(&s->mutex);
    bool closing = s->closing;
    if (!redlock__list_empty(&s->queue)) {
        /* Move the whole queue: wake-ups coalesce, so one wake-up may stand for many calls. */
        batch.next = s->queue.next;
        batch.prev = s->queue.prev;
        batch.next->prev = &batch;
        batch.prev->next = &batch;
        redlock__list_init(&s->queue);
    }
    uv_mutex_unlock(&s->mutex);

    while (!redlock__list_empty(&batch)) {
        sync_req *req = REDLOCK__CONTAINER_OF(batch.next, sync_req, link);
        redlock__list_remove(&req->link);
        bool async_op = req->kind == REQ_ACQUIRE || req->kind == REQ_INSPECT ||
                        req->kind == REQ_EXTEND || req->kind == REQ_RELEASE;
        int rc;
        if (s->client != NULL)
            s->client->last_error[0] = '\0'; /* so a failure below finds only its own reason */
        switch (req->kind) {
        case REQ_LOCK_FREE:
            handle_free(s, req->lock);
            complete(s, req, 0);
            continue;
        case REQ_QUERY: /* the client lives until the close below: it can still tell */
            complete(s, req,
                     req->node_info != NULL
                         ? redlock_client_node_info(s->client, req->node, req->node_info)
                         : redlock_client_stats(s->client, req->stats));
            continue;
        case REQ_CANCEL:
            complete(s, req, closing ? REDLOCK_ECLOSING : cancel_started(s, req->target));
            continue;
        case REQ_ACQUIRE:
            rc = closing ? REDLOCK_ECANCELED : start_acquire(s, req);
            break;
        case REQ_ATTACH:
            rc = closing ? REDLOCK_ECANCELED : start_attach(s, req);
            break;
        case REQ_INSPECT:
            rc = closing ? REDLOCK_ECANCELED
                         : redlock_inspect_multi(s->client, req->resources, req->lens, req->count,
                                                 on_inspected, req);
            break;
        default:
            rc = closing ? REDLOCK_ECANCELED : start_call(s, req);
            break;
        }
        if (rc != 0) {
            /* The async call's reason (a REDLOCK_EINVAL's, say), or the status's own text. */
            redlock__sync_report_status(
                req->report, rc, closing ? "the client is being freed" : s->client->last_error);
            complete(s, req, rc);
        } else if (async_op) {
            redlock__list_push(&s->started, &req->link); /* until its callback completes it */
        }
    }

    if (closing && !s->close_started) {
        s->close_started = true;
        int rc = redlock_client_close_ex(s->client, s->close_flags, on_client_closed, s);
        assert(rc == 0); /* only this thread closes it, once */
        (void)rc;
    }
}

/* Once per loop iteration, after IO callbacks: an auto-extension won in this iteration moved
 * the async lock's deadline; publish it to readers on other threads. */
static void on_check(uv_check_t *check)
{
    redlock_sync *s = REDLOCK__CONTAINER_OF(check, redlock_sync, check);
    for (redlock__list *it = s->auto_locks.next; it != &s->auto_locks; it = it->next) {
        redlock_sync_lock *sl = REDLOCK__CONTAINER_OF(it, redlock_sync_lock, auto_link);
        if (atomic_load_explicit(&sl->deadline_us, memory_order_relaxed) !=
            redlock_lock_deadline_us(sl->lock))
            store_validity(sl);
    }
}

static void loop_main(void *arg)
{
    redlock_sync *s = arg;
    uv_run(&s->loop, UV_RUN_DEFAULT); /* returns once on_client_closed closed the last handle */
}

/* ---- the sync client ------------------------------------------------------------------------- */

/* Undo a redlock_sync_new that got as far as the handles (and maybe the client), on the calling
 * thread: no loop thread runs. */
static void unwind_new(redlock_sync *s)
{
    if (s->client != NULL)
        redlock_client_close(s->client, NULL, NULL);
    uv_close((uv_handle_t *)&s->check, NULL);
    uv_close((uv_handle_t *)&s->async, NULL);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    int rc = uv_loop_close(&s->loop);
    assert(rc == 0);
    (void)rc;
    uv_cond_destroy(&s->idle);
    uv_mutex_destroy(&s->mutex);
    redlock__alloc alloc = s->alloc;
    redlock__free(&alloc, s);
}

/* The loop, the mutex and the two handles. On failure nothing is left initialized. Everything
 * here fails only when the system is out of descriptors or memory, hence REDLOCK_ENOMEM. */
static int sync_init(redlock_sync *s, char *err, size_t err_len)
{
    redlock__list_init(&s->queue);
    redlock__list_init(&s->locks);
    redlock__list_init(&s->auto_locks);
    redlock__list_init(&s->started);
    redlock__keep_stdio_taken(); /* before the loop takes descriptors */
    int uvrc = uv_loop_init(&s->loop);
    if (uvrc != 0) {
        redlock__fmt(err, err_len, "cannot create the loop: %s", uv_strerror(uvrc));
        return REDLOCK_ENOMEM;
    }
    uvrc = uv_mutex_init(&s->mutex);
    if (uvrc == 0) {
        uvrc = uv_cond_init(&s->idle);
        if (uvrc != 0)
            uv_mutex_destroy(&s->mutex);
    }
    if (uvrc != 0) {
        redlock__fmt(err, err_len, "cannot create a mutex: %s", uv_strerror(uvrc));
        uv_loop_close(&s->loop);
        return REDLOCK_ENOMEM;
    }
    uv_check_init(&s->loop, &s->check);
    uv_check_start(&s->check, on_check);
    uvrc = uv_async_init(&s->loop, &s->async, on_async);
    if (uvrc != 0) {
        redlock__fmt(err, err_len, "cannot create the wake-up handle: %s", uv_strerror(uvrc));
        uv_close((uv_handle_t *)&s->check, NULL); /* the async handle was never initialized */
        uv_run(&s->loop, UV_RUN_DEFAULT);
        uv_loop_close(&s->loop);
        uv_cond_destroy(&s->idle);
        uv_mutex_destroy(&s->mutex);
        return REDLOCK_ENOMEM;
    }
    return 0;
}

/* Start the loop thread. From here the loop belongs to it; creating it orders everything done
 * before anything the thread does. The thread starts with every signal but faults blocked (it
 * inherits our mask for the moment): a write to a node that closed its end then fails with
 * EPIPE instead of killing the process with SIGPIPE, and the caller's signal handlers run on
 * the caller's threads. No disposition is changed. */
static int start_thread(redlock_sync *s)
{
#ifndef _WIN32
    sigset_t blocked, saved;
    sigfillset(&blocked);
    /* Faults stay deliverable, so a crash on the thread is reported (sanitizers, core dumps). */
    static const int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT};
    for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
        sigdelset(&blocked, faults[i]);
    pthread_sigmask(SIG_SETMASK, &blocked, &saved);
#endif
    int uvrc = uv_thread_create(&s->thread, loop_main, s);
#ifndef _WIN32
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
#endif
    return uvrc;
}

int redlock_sync_new(const char *const *node_urls, unsigned n_nodes, const redlock_options *opts,
                     redlock_sync **sync_out, char *err, size_t err_len)
{
    char scratch[1];
    redlock__err_start(&err, &err_len, scratch, sizeof(scratch));
    if (sync_out == NULL) {
        redlock__fmt(err, err_len, "sync_out must not be NULL");
        return REDLOCK_EINVAL;
    }
    *sync_out = NULL;
    redlock_options o;
    int rc = redlock__options_in(&o, opts, err, err_len);
    if (rc != 0)
        return rc;
    redlock__alloc alloc;
    redlock__alloc_init(&alloc, o.realloc_fn, o.realloc_ud);
    redlock_sync *s = redlock__calloc(&alloc, 1, sizeof(*s));
    if (s == NULL) {
        redlock__fmt(err, err_len, "out of memory");
        return REDLOCK_ENOMEM;
    }
    s->alloc = alloc;
    rc = sync_init(s, err, err_len);
    if (rc != 0) {
        redlock__free(&alloc, s);
        return rc;
    }
    /* The client is created here, before the thread exists, so its errors (a bad URL, the same
     * node twice) come back from this call with their message, and a failure starts nothing. */
    rc = redlock_client_new(&s->loop, node_urls, n_nodes, &o, &s->client, err, err_len);
    if (rc != 0) {
        s->client = NULL;
        unwind_new(s);
        return rc;
    }
    s->client->on_checked_lost = on_checked_lost;
    int uvrc = start_thread(s);
    if (uvrc != 0) {
        redlock__fmt(err, err_len, "cannot start the loop thread: %s", uv_strerror(uvrc));
        unwind_new(s);
        return REDLOCK_ENOMEM;
    }
    *sync_out = s;
    return 0;
}

void redlock_sync_free(redlock_sync *s)
{
    redlock_sync_free_ex(s, 0);
}

void redlock_sync_free_ex(redlock_sync *s, unsigned flags)
{
    if (s == NULL)
        return;
    /* From a lost callback the loop thread would have to join itself: refused (documented). */
    if (on_loop_thread(s))
        return;
    uv_mutex_lock(&s->mutex);
    if (s->closing) { /* a second free: a caller bug, but do not hang */
        uv_mutex_unlock(&s->mutex);
        return;
    }
    s->close_flags = flags & REDLOCK_CLOSE_FAST;
    s->closing = true;
    uv_async_send(&s->async);
    uv_mutex_unlock(&s->mutex);

    uv_thread_join(&s->thread);

    /* Every call has been completed; wait until the woken callers have left the mutex. */
    uv_mutex_lock(&s->mutex);
    while (s->callers > 0)
        uv_cond_wait(&s->idle, &s->mutex);
    uv_mutex_unlock(&s->mutex);

    while (!redlock__list_empty(&s->locks))
        handle_destroy(s, REDLOCK__CONTAINER_OF(s->locks.next, redlock_sync_lock, link));
    int rc = uv_loop_close(&s->loop);
    assert(rc == 0); /* the client closed every handle it had, and so did we */
    (void)rc;
    uv_cond_destroy(&s->idle);
    uv_mutex_destroy(&s->mutex);
    redlock__alloc alloc = s->alloc;
    redlock__free(&alloc, s);
}

/* ---- blocking calls -------------------------------------------------------------------------- */

int redlock_sync_cancel(redlock_sync *sync, const redlock_report *report)
{
    if (sync == NULL || report == NULL)
        return REDLOCK_EINVAL;
    sync_req req = {.kind = REQ_CANCEL, .target = report};
    return submit(sync, &req);
}

int redlock_sync_acquire(redlock_sync *sync, const void *resource, size_t len, uint64_t ttl_ms,
                         const redlock_lock_opts *opts, redlock_sync_lock **lock_out,
                         redlock_report *report)
{
    return redlock_sync_acquire_multi(sync, &resource, &len, 1, ttl_ms, opts, lock_out, report);
}

int redlock_sync_acquire_multi(redlock_sync *sync, const void *const *resources, const size_t *lens,
                               unsigned count, uint64_t ttl_ms, const redlock_lock_opts *opts,
                               redlock_sync_lock **lock_out, redlock_report *report)
{
    if (lock_out != NULL)
        *lock_out = NULL;
    if (report != NULL && !redlock__report_ok(report))
        return REDLOCK_EINVAL;
    sync_req req = {
        .kind = REQ_ACQUIRE,
        .report = report,
        .resources = resources,
        .lens = lens,
        .count = count,
        .ttl_ms = ttl_ms,
    };
    char why[256];
    if (sync == NULL || lock_out == NULL) {
        redlock__sync_report_status(report, REDLOCK_EINVAL, "sync or lock_out is NULL");
        return REDLOCK_EINVAL;
    }
    /* Checked before the loop thread sees them (the async call checks them again): the handle
     * copies them first. */
    if (redlock__client_resources_valid(resources, lens, count, why, sizeof(why)) != 0) {
        redlock__sync_report_status(report, REDLOCK_EINVAL, why);
        return REDLOCK_EINVAL;
    }
    if (redlock__lock_opts_in(&req.opts, opts, why, sizeof(why)) != 0) {
        redlock__sync_report_status(report, REDLOCK_EINVAL, why);
        return REDLOCK_EINVAL;
    }
    if (redlock_canceler_fired(req.opts.cancel)) {
        redlock__sync_report_status(report, REDLOCK_ECANCELED, "the canceler has fired");
        return REDLOCK_ECANCELED;
    }
    int rc = submit(sync, &req);
    if (rc == 0)
        *lock_out = req.lock;
    return rc;
}

int redlock_sync_attach(redlock_sync *sync, const void *resource, size_t len, const void *token,
                        size_t token_len, uint64_t ttl_ms, redlock_sync_lock **lock_out)
{
    if (lock_out != NULL)
        *lock_out = NULL;
    /* The resource is copied into the handle before redlock_lock_attach checks it; the token
     * and the ttl are checked there. */
    len = redlock__len(resource, len);
    if (sync == NULL || lock_out == NULL || resource == NULL || len == 0 ||
        len > REDLOCK_RESOURCE_MAX)
        return REDLOCK_EINVAL;
    sync_req req = {
        .kind = REQ_ATTACH,
        .resources = &resource,
        .lens = &len,
        .count = 1,
        .token = token,
        .token_len = token_len,
        .ttl_ms = ttl_ms,
    };
    int rc = submit(sync, &req);
    if (rc == 0)
        *lock_out = req.lock;
    return rc;
}

int redlock_sync_inspect(redlock_sync *sync, const void *resource, size_t len,
                         redlock_report *report)
{
    return redlock_sync_inspect_multi(sync, &resource, &len, 1, report);
}

int redlock_sync_inspect_multi(redlock_sync *sync, const void *const *resources, const size_t *lens,
                               unsigned count, redlock_report *report)
{
    if (report != NULL && !redlock__report_ok(report))
        return REDLOCK_EINVAL;
    char why[256];
    if (sync == NULL) {
        redlock__sync_report_status(report, REDLOCK_EINVAL, "sync is NULL");
        return REDLOCK_EINVAL;
    }
    if (redlock__client_resources_valid(resources, lens, count, why, sizeof(why)) != 0) {
        redlock__sync_report_status(report, REDLOCK_EINVAL, why);
        return REDLOCK_EINVAL;
    }
    sync_req req = {
        .kind = REQ_INSPECT,
        .report = report,
        .resources = resources,
        .lens = lens,
        .count = count,
    };
    return submit(sync, &req);
}

int redlock_sync_node_info(redlock_sync *sync, unsigned i, redlock_node_info *info)
{
    if (sync == NULL || info == NULL)
        return REDLOCK_EINVAL;
    sync_req req = {.kind = REQ_QUERY, .node_info = info, .node = i};
    return submit(sync, &req);
}

size_t redlock_sync_last_error(redlock_sync *sync, char *out, size_t out_len)
{
    if (sync == NULL || out == NULL || out_len == 0)
        return 0;
    uv_mutex_lock(&sync->mutex);
    redlock__fmt(out, out_len, "%s", sync->last_error);
    uv_mutex_unlock(&sync->mutex);
    return strlen(out);
}

int redlock_sync_stats(redlock_sync *sync, redlock_stats *stats)
{
    if (sync == NULL || stats == NULL)
        return REDLOCK_EINVAL;
    sync_req req = {.kind = REQ_QUERY, .stats = stats};
    return submit(sync, &req);
}

static int lock_call(redlock_sync_lock *lock, req_kind kind, uint64_t ttl_ms, unsigned flags,
                     redlock_report *report)
{
    if (report != NULL && !redlock__report_ok(report))
        return REDLOCK_EINVAL;
    if (lock == NULL) {
        redlock__sync_report_status(report, REDLOCK_EINVAL, "lock is NULL");
        return REDLOCK_EINVAL;
    }
    if (kind == REQ_RELEASE && atomic_load(&lock->scoped)) {
        redlock__sync_report_status(
            report, REDLOCK_EINVAL,
            "the lock is held by redlock_sync_with: return from its function "
            "to release it");
        return REDLOCK_EINVAL;
    }
    sync_req req = {
        .kind = kind,
        .report = report,
        .lock = lock,
        .ttl_ms = ttl_ms,
        .flags = flags,
    };
    return submit(lock->sync, &req);
}

int redlock_sync_extend(redlock_sync_lock *lock, uint64_t ttl_ms, unsigned flags,
                        redlock_report *report)
{
    return lock_call(lock, REQ_EXTEND, ttl_ms, flags, report);
}

int redlock_sync_release(redlock_sync_lock *lock, redlock_report *report)
{
    return lock_call(lock, REQ_RELEASE, 0, 0, report);
}

void redlock_sync_lock_free(redlock_sync_lock *lock)
{
    if (lock == NULL || atomic_load(&lock->scoped))
        return; /* redlock_sync_with frees it */
    redlock_sync *s = lock->sync;
    if (on_loop_thread(s)) { /* from a lost callback: we are the loop thread */
        handle_free(s, lock);
        return;
    }
    sync_req req = {.kind = REQ_LOCK_FREE, .lock = lock};
    /* REDLOCK_ECLOSING: free has started and frees the handle itself. REDLOCK_ENOMEM (no
     * condition variable): the handle stays until redlock_sync_free. */
    (void)submit(s, &req);
}

/* ---- thread-safe reads ----------------------------------------------------------------------- */

/* C11's atomic_load takes a non-const pointer; the load does not write. */
#define LOAD(lock, field) atomic_load(&((redlock_sync_lock *)(lock))->field)

/* The accessors read a NULL handle as empty, like the async ones. */

const void *redlock_sync_lock_resource(const redlock_sync_lock *lock, size_t *len)
{
    return redlock_sync_lock_resource_at(lock, 0, len);
}

unsigned redlock_sync_lock_resource_count(const redlock_sync_lock *lock)
{
    return lock != NULL ? lock->n_resources : 0;
}

const void *redlock_sync_lock_resource_at(const redlock_sync_lock *lock, unsigned i, size_t *len)
{
    bool in = lock != NULL && i < lock->n_resources;
    if (len != NULL)
        *len = in ? lock->resources[i].len : 0;
    return in ? lock->resources[i].ptr : NULL;
}

const char *redlock_sync_lock_token(const redlock_sync_lock *lock, size_t *len)
{
    if (len != NULL)
        *len = lock != NULL ? lock->token_len : 0;
    return lock != NULL ? lock->token : NULL;
}

uint64_t redlock_sync_lock_validity_ms(const redlock_sync_lock *lock)
{
    return lock != NULL ? LOAD(lock, validity_ms) : 0;
}

uint64_t redlock_sync_lock_deadline_us(const redlock_sync_lock *lock)
{
    return lock != NULL ? LOAD(lock, deadline_us) : 0;
}

uint64_t redlock_sync_lock_fence(const redlock_sync_lock *lock)
{
    return lock != NULL ? lock->fence : 0; /* immutable once handed out */
}

int redlock_sync_lock_status(const redlock_sync_lock *lock)
{
    if (lock == NULL)
        return REDLOCK_EINVAL;
    int status = LOAD(lock, status);
    if (status == 0 && redlock_now_us() >= LOAD(lock, deadline_us))
        return REDLOCK_EEXPIRED; /* not lost, not released, but no longer held either */
    return status;
}
