/* SPDX-License-Identifier: MIT */
/* sync_lock.h - what sync.c (the blocking client), sync_lost.c (a handle's loss descriptor) and
 * sync_with.c (redlock_sync_with) share. Nothing here is public. */
#ifndef REDLOCK_SYNC_LOCK_H
#define REDLOCK_SYNC_LOCK_H

#include <stdatomic.h>

#include "lock.h"

struct redlock_sync_lock {
    redlock_sync *sync;
    uv_mutex_t *mutex; /* the sync client's, which guards the making of the loss descriptor */
    /* Loop thread only. */
    redlock_lock *lock;      /* the async handle; NULL once the client has freed it */
    redlock__list link;      /* sync->locks */
    redlock__list auto_link; /* sync->auto_locks while auto-extended (else linked to itself) */
    unsigned inflight;       /* extend and release calls started on it */
    bool free_pending;       /* freed while a call was in flight: free after it */
    redlock_lost_cb lost_cb; /* the caller's, for auto-extension */
    void *lost_data;
    /* Written by the loop thread, read by any. */
    _Atomic uint64_t validity_ms;
    _Atomic uint64_t deadline_us;
    _Atomic int status;
    /* The loss descriptor (sync_lost.c): -1 until redlock_sync_lock_fd made it (under the sync's
     * mutex, the write end first); read by the loop thread, which writes to it on a loss. */
    _Atomic int lost_fd;
    _Atomic int lost_wfd; /* the write end: lost_fd itself for an eventfd */
    /* Inside redlock_sync_with's function: the caller's release and free are refused. */
    atomic_bool scoped;
    /* Immutable once the acquire returned. */
    uint64_t fence;
    size_t token_len;
    char token[REDLOCK_TOKEN_MAX + 1];
    /* The resources (one but for redlock_sync_acquire_multi), in the handle's allocation after
     * it, each with a NUL after its bytes. */
    unsigned n_resources;
    redlock__span *resources;
};

/* The handle's status says it was lost (not 0, not REDLOCK_ERELEASED). */
static inline bool redlock__sync_status_lost(int status)
{
    return status != 0 && status != REDLOCK_ERELEASED;
}

/* sync.c: a call that ended before any round: its status and why (message NULL or "": the
 * status's own text) in report (NULL: nothing). */
void redlock__sync_report_status(redlock_report *report, int status, const char *message);

/* sync_lost.c, on the loop thread: the handle's status was just set to a loss; make its
 * descriptor readable if it has one. */
void redlock__sync_lock_signal(redlock_sync_lock *sl);
/* sync_lost.c: close the handle's descriptor (the handle is being freed). */
void redlock__sync_lock_fd_close(redlock_sync_lock *sl);

#endif
