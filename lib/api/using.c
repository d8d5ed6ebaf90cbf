/* SPDX-License-Identifier: MIT */
/* using.c - redlock_using: a lock held for the caller's work, kept alive, released at its done:
 * acquire with auto-extension, hand the lock to the caller's work, tell it of a loss through its
 * lost callback (the lock reads as not held from then on), release at its done, and say once how
 * the hold ended (a close ends it through the hold's closer, client.h). Calls down only:
 * redlock_acquire, redlock_release, redlock_lock_free, and the lock's `using` link, which makes
 * the caller's own release or free of the lock refused while the hold is the helper's. */
#include "lock.h"

#include "abi.h"

struct redlock__using {
    redlock_client *client;
    /* In client->closing_ended while the work holds the lock (from the work's start to its done):
     * the close ends the hold. */
    redlock__closer closer;
    redlock_lock *lock; /* the work's, once acquired */
    redlock_work_cb work;
    redlock_ended_cb ended;
    void *data;
    redlock_lost_cb lost_cb; /* the caller's (opts->lost_cb), NULL: none */
    void *lost_data;
    int lost_reason; /* 0 until auto-extension reported the lock lost */
};

const char *redlock_hold_end_name(redlock_hold_end end)
{
    switch (end) {
    case REDLOCK_HOLD_RELEASED:
        return "released";
    case REDLOCK_HOLD_LOST:
        return "lost";
    case REDLOCK_HOLD_LAPSED:
        return "lapsed";
    case REDLOCK_HOLD_NOT_ACQUIRED:
        return "not acquired";
    case REDLOCK_HOLD_CANCELED:
        return "canceled";
    }
    return "?";
}

/* The end: the completion, then the handle (if any) and the hold are given back. */
static void finish(redlock__using *u, redlock_lock *lock, redlock_hold_end end, int status,
                   const redlock_result *result)
{
    redlock_result none;
    if (result == NULL) {
        memset(&none, 0, sizeof(none));
        none.status = status;
        result = &none;
    }
    redlock_client *c = u->client;
    redlock__closer_unlink(&u->closer);
    if (lock != NULL)
        lock->using = NULL;
    u->ended(end, status, result, u->data);
    if (lock != NULL)
        redlock_lock_free(lock);
    redlock__free(&c->alloc, u);
}

/* The io of a closing client has closed, every operation was delivered and every auto-extension
 * told (client.h's closers): the hold ends, canceled. */
static void on_close(redlock__closer *closer)
{
    redlock__using *u = REDLOCK__CONTAINER_OF(closer, redlock__using, closer);
    finish(u, u->lock, REDLOCK_HOLD_CANCELED, REDLOCK_ECANCELED, NULL);
}

static void on_lost(redlock_lock *lock, int reason, void *data)
{
    redlock__using *u = data;
    u->lost_reason = reason; /* lock->lost is set: redlock_lock_is_held says false already */
    if (u->lost_cb != NULL)
        u->lost_cb(lock, reason, u->lost_data);
}

static void on_acquired(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    redlock__using *u = data;
    if (status != 0) {
        finish(u, NULL,
               status == REDLOCK_ECANCELED ? REDLOCK_HOLD_CANCELED : REDLOCK_HOLD_NOT_ACQUIRED,
               status, result);
        return;
    }
    lock->using = u;
    u->lock = lock;
    redlock__closer_link(&u->client->closing_ended, &u->closer, on_close);
    u->work(lock, u->data);
}

static void on_released(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    redlock__using *u = data;
    redlock_hold_end end;
    if (status == REDLOCK_ECANCELED) {
        end = REDLOCK_HOLD_CANCELED; /* the client closed: its close released the keys */
    } else if (u->lost_reason != 0) {
        end = REDLOCK_HOLD_LOST; /* the work was told; the release deleted what was left */
        status = u->lost_reason;
    } else {
        end = status == 0 ? REDLOCK_HOLD_RELEASED : REDLOCK_HOLD_LAPSED;
    }
    finish(u, lock, end, status, result);
}

int redlock_using(redlock_client *c, const void *resource, size_t len, uint64_t ttl_ms,
                  const redlock_lock_opts *opts, redlock_work_cb work, redlock_ended_cb ended,
                  void *data)
{
    if (c == NULL)
        return REDLOCK_EINVAL;
    if (work == NULL || ended == NULL)
        return redlock__client_error(c, REDLOCK_EINVAL, "work and ended must not be NULL");
    redlock_lock_opts lo;
    redlock_auto_opts defaults;
    char why[256];
    int rc = redlock__lock_opts_in(&lo, opts, why, sizeof(why));
    if (rc != 0)
        return redlock__client_error(c, rc, "%s", why);
    if (lo.auto_extend == NULL) {
        redlock_auto_opts_init(&defaults);
        lo.auto_extend = &defaults;
    }
    redlock__using *u = redlock__calloc(&c->alloc, 1, sizeof(*u));
    if (u == NULL)
        return redlock__client_error(c, REDLOCK_ENOMEM, "out of memory");
    *u = (redlock__using){
        .client = c,
        .work = work,
        .ended = ended,
        .data = data,
        .lost_cb = lo.lost_cb,
        .lost_data = lo.lost_data,
    };
    redlock__list_init(&u->closer.link);
    lo.lost_cb = on_lost;
    lo.lost_data = u;
    rc = redlock_acquire(c, resource, len, ttl_ms, &lo, on_acquired, u);
    if (rc != 0)
        redlock__free(&c->alloc, u);
    return rc;
}

int redlock_using_done(redlock_lock *lock)
{
    if (lock == NULL)
        return REDLOCK_EINVAL;
    redlock__using *u = lock->using;
    if (u == NULL)
        return redlock__client_error(lock->client, REDLOCK_EINVAL,
                                     "not the lock of a redlock_using work, or done already");
    lock->using = NULL; /* the release is the helper's own */
    int rc = redlock_release(lock, on_released, u);
    if (rc != 0)
        lock->using = u; /* REDLOCK_ECLOSING: the close ends the hold; else call done again */
    else
        redlock__closer_unlink(&u->closer); /* the release's callback ends the hold */
    return rc;
}
