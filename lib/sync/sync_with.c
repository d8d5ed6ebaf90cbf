/* SPDX-License-Identifier: MIT */
/* sync_with.c - a blocking hold for a piece of work (redlock_sync_with): acquire, the caller's
 * function, release, on the blocking client's calls (sync.c). */
#include "sync_lock.h"

#include "abi.h"

int redlock_sync_with(redlock_sync *sync, const void *resource, size_t len, uint64_t ttl_ms,
                      const redlock_lock_opts *opts, redlock_sync_fn fn, void *data,
                      redlock_hold_end *end, redlock_report *report)
{
    redlock_hold_end scratch;
    if (end == NULL)
        end = &scratch;
    *end = REDLOCK_HOLD_NOT_ACQUIRED;
    if (report != NULL && !redlock__report_ok(report))
        return REDLOCK_EINVAL;
    if (fn == NULL) {
        redlock__sync_report_status(report, REDLOCK_EINVAL, "fn is NULL");
        return REDLOCK_EINVAL;
    }
    redlock_lock_opts lo;
    redlock_auto_opts defaults;
    char why[256];
    if (redlock__lock_opts_in(&lo, opts, why, sizeof(why)) != 0) {
        redlock__sync_report_status(report, REDLOCK_EINVAL, why);
        return REDLOCK_EINVAL;
    }
    if (lo.auto_extend == NULL) {
        redlock_auto_opts_init(&defaults);
        lo.auto_extend = &defaults;
    }
    redlock_sync_lock *lock = NULL;
    int rc = redlock_sync_acquire(sync, resource, len, ttl_ms, &lo, &lock, report);
    if (rc != 0) {
        *end = rc == REDLOCK_ECANCELED ? REDLOCK_HOLD_CANCELED : REDLOCK_HOLD_NOT_ACQUIRED;
        return rc;
    }
    atomic_store(&lock->scoped, true);
    fn(lock, data);
    atomic_store(&lock->scoped, false);
    /* What the function could see when it returned; the release then stops the extension. */
    int lost = atomic_load(&lock->status);
    rc = redlock_sync_release(lock, report);
    if (rc == REDLOCK_ECANCELED) {
        *end = REDLOCK_HOLD_CANCELED;
    } else if (redlock__sync_status_lost(lost)) {
        *end = REDLOCK_HOLD_LOST;
        rc = lost;
    } else {
        *end = rc == 0 ? REDLOCK_HOLD_RELEASED : REDLOCK_HOLD_LAPSED;
    }
    redlock_sync_lock_free(lock);
    return rc;
}
