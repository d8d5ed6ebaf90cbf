/* SPDX-License-Identifier: MIT */
/* autoextend.h - a lock's auto-extension (autoextend.c): its extension rounds, planned from
 * each won one, and the guard that reports the lock lost when none renewed it in time. Above the
 * operations (it runs extends through hold.c): an acquire that won starts it (won.c, through
 * redlock_auto_extend), and from then on it follows the lock through the callbacks it sets on it
 * (lock.h's on_moved, on_ended) until it stops. Nothing here is public. */
#ifndef REDLOCK_AUTOEXTEND_H
#define REDLOCK_AUTOEXTEND_H

#include "client.h"

/* Auto-extension state of one lock (autoextend.c): lock->autox. */
typedef struct redlock__auto {
    redlock_lock *lock; /* whose it is */
    bool active;
    bool extending;      /* an extend round is in flight */
    uint64_t started_us; /* ... and when it began */
    redlock_auto_opts opts;
    uint64_t margin_us;
    redlock_lost_cb lost_cb;
    void *lost_data;
    redlock__timer extend_timer; /* the next extension (or retry) */
    redlock__timer guard_timer;  /* deadline - margin: "lost" if nothing renewed the lock */
    redlock__closer closer;      /* in client->closing_lost while active: the close tells it */
    unsigned extensions;
    int last_failure; /* status of the last failed extension, 0 if none */
} redlock__auto;

/* Whether a (a lock's autox, NULL until its first auto-extension) runs. */
static inline bool redlock__auto_is_active(const redlock__auto *a)
{
    return a != NULL && a->active;
}

/* Make lock's auto-extension state (kept until the lock is freed), so that starting one later
 * cannot run out of memory: 0, or REDLOCK_ENOMEM with the client's last error set. */
int redlock__auto_reserve(redlock_lock *lock);

/* Check auto-extension options for a lock of ttl_ms; sets the client's last error. */
int redlock__auto_check(redlock_client *c, const redlock_auto_opts *opts, uint64_t ttl_ms,
                        redlock_lost_cb lost_cb);
/* A node reached a new server (recheck.c): extend lock at once unless an extension is in flight
 * (its win is followed by another at once, since it started before the change). Returns false,
 * doing nothing, when auto-extension cannot extend it (not active, or at its cap). */
bool redlock__auto_recheck(redlock_lock *lock);
/* Report an auto-extended lock lost with reason (the lost callback, once); harmless when not
 * active. */
void redlock__auto_lost(redlock_lock *lock, int reason);

#endif
