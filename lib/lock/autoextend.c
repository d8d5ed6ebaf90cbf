/* SPDX-License-Identifier: MIT */
/* autoextend.c - keep a held lock alive with extend rounds until it is released.
 *
 * Two timers per lock: the extension timer, at won_start + ttl * extend_at (or sooner, to retry a
 * failed extension), and the guard, at deadline - margin. Every won extension moves both. If the
 * guard fires, nothing renewed the lock in time and it is reported lost, before its validity
 * runs out: the holder hears of it while it is still safe to stop. */
#include "autoextend.h"

#include "op.h"

#include "abi.h"

#define MIN_MARGIN_US 5000

static void auto_opts_defaults(redlock_auto_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
    o->extend_at = 1.0 / 3.0;
}

void redlock_auto_opts_init_sized(redlock_auto_opts *o, size_t size)
{
    redlock_auto_opts defaults;
    auto_opts_defaults(&defaults);
    redlock__struct_init(o, size, &defaults, sizeof(defaults));
}

int redlock__auto_opts_in(redlock_auto_opts *dst, const redlock_auto_opts *src, char *err,
                          size_t err_len)
{
    auto_opts_defaults(dst);
    if (src == NULL)
        return 0;
    return redlock__struct_in(dst, sizeof(*dst), src, REDLOCK__AUTO_OPTS_MIN, "auto_opts",
                              "redlock_auto_opts_init", err, err_len);
}

unsigned redlock_lock_extensions(const redlock_lock *lock)
{
    return lock != NULL && lock->autox != NULL ? lock->autox->extensions : 0;
}

int redlock__auto_reserve(redlock_lock *lock)
{
    if (lock->autox != NULL)
        return 0;
    redlock_client *c = lock->client;
    lock->autox = redlock__calloc(&c->alloc, 1, sizeof(*lock->autox));
    if (lock->autox == NULL)
        return redlock__client_error(c, REDLOCK_ENOMEM, "out of memory for the auto-extension");
    lock->autox->lock = lock;
    return 0;
}

static uint64_t margin_us(const redlock_auto_opts *opts, uint64_t ttl_ms)
{
    uint64_t margin = opts->lost_margin_ms != 0 ? opts->lost_margin_ms * 1000 : ttl_ms * 100;
    return REDLOCK__MAX(margin, MIN_MARGIN_US);
}

/* The auto-extension is over: its timers stop, and it no longer follows the lock nor waits for
 * the close. */
static void unfollow(redlock_lock *lock)
{
    lock->autox->active = false;
    lock->on_moved = NULL;
    lock->on_ended = NULL;
    redlock__closer_unlink(&lock->autox->closer);
    redlock__client_timer_stop(lock->client, &lock->autox->extend_timer);
    redlock__client_timer_stop(lock->client, &lock->autox->guard_timer);
}

/* Stop without a callback (the hold ended for the caller: the lock's on_ended). */
static void auto_stop(redlock_lock *lock)
{
    if (redlock__auto_is_active(lock->autox))
        unfollow(lock);
}

/* The hold ended badly: tell the caller, exactly once. */
static void fire_lost(redlock_lock *lock, int reason)
{
    redlock__auto *a = lock->autox;
    if (!redlock__auto_is_active(a))
        return;
    unfollow(lock);
    lock->lost = true; /* not held any more, whatever an extension in flight still does */
    redlock__stats_lost(lock->client, reason);
    a->lost_cb(lock, reason, a->lost_data);
}

static void on_extend_timer(redlock__timer *t);
static void on_guard_timer(redlock__timer *t);

/* The io of a closing client has closed, and every operation was delivered (client.h's closers):
 * the lock is lost to its holder, who hears it before the close callback. */
static void on_close(redlock__closer *closer)
{
    fire_lost(REDLOCK__CONTAINER_OF(closer, redlock__auto, closer)->lock, REDLOCK_ECANCELED);
}

static bool at_cap(const redlock__auto *a)
{
    return a->opts.max_extensions != 0 && a->extensions >= a->opts.max_extensions;
}

static uint64_t guard_due(const redlock_lock *lock)
{
    uint64_t margin = lock->autox->margin_us;
    return lock->deadline_us > margin ? lock->deadline_us - margin : 0;
}

/* Plan the next extension after a won round. */
static void schedule(redlock_lock *lock)
{
    redlock__auto *a = lock->autox;
    redlock_client *c = lock->client;
    redlock__client_timer_start(c, &a->guard_timer, guard_due(lock), on_guard_timer);
    if (at_cap(a)) {
        redlock__client_timer_stop(c, &a->extend_timer);
        return; /* the guard ends the hold with REDLOCK_ELIMIT */
    }
    uint64_t after = (uint64_t)((double)lock->ttl_ms * 1000.0 * a->opts.extend_at);
    uint64_t due = lock->won_start_us + after;
    /* A round that began before a node reached a new server may count the old server's vote:
     * whether a quorum still holds the lock is known only from a round after the change. */
    if (lock->won_start_us < c->node_changed_us)
        due = redlock__client_now(c);
    redlock__client_timer_start(c, &a->extend_timer, due, on_extend_timer);
}

bool redlock__auto_recheck(redlock_lock *lock)
{
    redlock__auto *a = lock->autox;
    if (!redlock__auto_is_active(a) || at_cap(a))
        return false;
    if (!a->extending)
        redlock__client_timer_start(lock->client, &a->extend_timer,
                                    redlock__client_now(lock->client), on_extend_timer);
    return true;
}

void redlock__auto_lost(redlock_lock *lock, int reason)
{
    fire_lost(lock, reason);
}

/* The lock's deadline moved (an extend won: the lock's on_moved): plan from the new one. */
static void on_moved(redlock_lock *lock)
{
    redlock__auto *a = lock->autox;
    if (a->extending) {
        /* The auto-extension's own round (on_extended plans the rest), or the caller's while
         * ours is in flight: only the guard follows the deadline now. */
        redlock__client_timer_start(lock->client, &a->guard_timer, guard_due(lock), on_guard_timer);
        return;
    }
    schedule(lock);
}

static void on_extended(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)result;
    (void)data;
    redlock__auto *a = lock->autox;
    a->extending = false;
    if (a->active && a->opts.extended_cb != NULL)
        a->opts.extended_cb(lock, status, result, a->opts.extended_data);
    if (!a->active)
        return; /* released, stopped or already lost meanwhile (also from extended_cb) */
    if (status == 0) {
        a->extensions++;
        a->last_failure = 0;
        schedule(lock);
        return;
    }
    if (status == REDLOCK_ELOST || status == REDLOCK_ECANCELED) {
        fire_lost(lock, status); /* definitive: the keys are gone, or the client is closing */
        return;
    }
    /* Too few nodes answered in time: try again while the validity allows; the guard reports
     * the loss if no attempt wins before it. */
    a->last_failure = status;
    uint64_t now = redlock__client_now(lock->client);
    uint64_t guard = guard_due(lock);
    if (now >= guard) {
        fire_lost(lock, status);
        return;
    }
    uint64_t wait = REDLOCK__MIN(lock->client->opts.retry_delay_ms * 1000, (guard - now) / 2);
    /* Begun before a node reached a new server: the next round, after it, is due at once. */
    if (a->started_us < lock->client->node_changed_us)
        wait = 0;
    redlock__client_timer_start(lock->client, &a->extend_timer, now + REDLOCK__MAX(wait, 1000),
                                on_extend_timer);
}

static void on_extend_timer(redlock__timer *t)
{
    redlock__auto *a = REDLOCK__CONTAINER_OF(t, redlock__auto, extend_timer);
    redlock_lock *lock = a->lock;
    if (!a->active || a->extending)
        return;
    a->extending = true;
    a->started_us = redlock__client_now(lock->client);
    int rc = redlock__extend(lock, lock->ttl_ms, a->opts.extend_flags, on_extended, NULL, false);
    if (rc != 0) {
        a->extending = false;
        /* A retake refused because the caller's own extend found the lock lost: that is why. */
        fire_lost(lock, lock->lapsed ? REDLOCK_ELOST : rc);
    }
}

static void on_guard_timer(redlock__timer *t)
{
    redlock__auto *a = REDLOCK__CONTAINER_OF(t, redlock__auto, guard_timer);
    redlock_lock *lock = a->lock;
    int reason;
    if (at_cap(a))
        reason = REDLOCK_ELIMIT;
    else if (a->last_failure != 0)
        reason = a->last_failure;
    else
        reason = REDLOCK_EEXPIRED; /* the extension in flight did not come back in time */
    fire_lost(lock, reason);
}

int redlock__auto_check(redlock_client *c, const redlock_auto_opts *opts, uint64_t ttl_ms,
                        redlock_lost_cb lost_cb)
{
    if (lost_cb == NULL)
        return redlock__client_error(c, REDLOCK_EINVAL, "lost callback is NULL");
    if (!(opts->extend_at > 0 && opts->extend_at < 1))
        return redlock__client_error(c, REDLOCK_EINVAL, "extend_at must be in (0, 1)");
    if ((opts->extend_flags & ~REDLOCK_EXTEND_RETAKE) != 0)
        return redlock__client_error(c, REDLOCK_EINVAL, "unknown extend_flags 0x%x",
                                     opts->extend_flags);
    uint64_t ttl_us = ttl_ms * 1000;
    if (margin_us(opts, ttl_ms) >= ttl_us)
        return redlock__client_error(c, REDLOCK_EINVAL,
                                     "lost_margin_ms must be below the ttl (%llu ms)",
                                     (unsigned long long)ttl_ms);
    /* The first extension must start before the guard could fire even on a round won at once:
     * its validity is at most ttl minus the drift allowance. */
    double drift_us = (double)ttl_us * c->opts.drift_factor + 2000.0;
    double guard_us = (double)ttl_us - drift_us - (double)margin_us(opts, ttl_ms);
    if ((double)ttl_us * opts->extend_at >= guard_us)
        return redlock__client_error(c, REDLOCK_EINVAL,
                                     "extend_at %.2f of a %llu ms ttl leaves no time to extend "
                                     "before the lost margin: lower extend_at or lost_margin_ms",
                                     opts->extend_at, (unsigned long long)ttl_ms);
    return 0;
}

int redlock_auto_extend(redlock_lock *lock, const redlock_auto_opts *caller_opts,
                        redlock_lost_cb lost_cb, void *data)
{
    if (lock == NULL)
        return REDLOCK_EINVAL;
    redlock_client *c = lock->client;
    if (c->closing)
        return redlock__client_error(c, REDLOCK_ECLOSING, "client is closing");
    if (lock->released)
        return redlock__client_error(c, REDLOCK_ERELEASED, "lock was already released");
    if (redlock__auto_is_active(lock->autox))
        return redlock__client_error(c, REDLOCK_EINVAL, "lock is already auto-extended");
    if (lock->attached)
        return redlock__client_error(c, REDLOCK_EINVAL,
                                     "validity of an attached lock is unknown: extend it first");
    redlock_auto_opts copy;
    char why[256];
    int rc = redlock__auto_opts_in(&copy, caller_opts, why, sizeof(why));
    if (rc != 0)
        return redlock__client_error(c, rc, "%s", why);
    const redlock_auto_opts *opts = &copy;
    rc = redlock__auto_check(c, opts, lock->ttl_ms, lost_cb);
    if (rc != 0)
        return rc;
    if ((opts->extend_flags & REDLOCK_EXTEND_RETAKE) != 0 &&
        (rc = redlock__extend_check_retake(lock)) != 0)
        return rc;
    uint64_t now = redlock__client_now(c);
    if (now >= lock->deadline_us)
        return redlock__client_error(c, REDLOCK_EEXPIRED, "lock validity already ran out");

    rc = redlock__auto_reserve(lock);
    if (rc != 0)
        return rc;
    redlock__auto *a = lock->autox;
    memset(a, 0, sizeof(*a));
    a->lock = lock;
    a->active = true;
    a->opts = *opts;
    a->margin_us = margin_us(opts, lock->ttl_ms);
    a->lost_cb = lost_cb;
    a->lost_data = data;
    lock->on_moved = on_moved;
    lock->on_ended = auto_stop;
    redlock__closer_link(&c->closing_lost, &a->closer, on_close);
    schedule(lock);
    return 0;
}

void redlock_auto_extend_stop(redlock_lock *lock)
{
    if (lock != NULL)
        auto_stop(lock);
}
