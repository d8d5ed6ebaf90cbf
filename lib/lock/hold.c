/* SPDX-License-Identifier: MIT */
/* hold.c - what is done with a lock once held, and with a resource: extend, release, inspect
 * (op.h): their rounds' decisions, their statuses, their kinds' tables and their calls. Calls down
 * only: rounds and operations, the client core, lock handles (what follows a hold hears of its
 * new deadline and its end through the callbacks it set on the lock), the counters, the quorum
 * core. */
#include "op.h"

#include "stats.h"

static void extend_round_done(redlock__op *o, redlock__round *r)
{
    redlock_lock *lock = o->lock;
    int status = redlock_round_status(&r->q);
    /* Won too late: the quorum renewed keys that had already run out of validity. */
    if (status == 0 && redlock__won_too_late(&r->q, o->prev_deadline_us))
        status = REDLOCK_EEXPIRED;
    if (status == REDLOCK_EBUSY)
        status = REDLOCK_ELOST;
    /* A retake that won after another extend of this lock found it lost (two rounds in flight at
     * once) may have set keys again over a gap: not a continuous hold, so not a win. */
    if (status == 0 && (o->flags & REDLOCK_EXTEND_RETAKE) != 0 && lock->lapsed)
        status = REDLOCK_ELOST;
    /* Continuity is what a quorum kept, never what this round set anew (kept.c): shown by
     * extend_check's wait (r->proven). The first won extend of an attached lock starts its hold,
     * as an acquire does. */
    if (status == 0 && lock->attached && !redlock__kept_won(lock, &r->q))
        status = REDLOCK_ELOST;
    else if (status == 0 && !lock->attached && (!r->proven || lock->gap))
        status = lock->gap ? REDLOCK_ELOST : REDLOCK_ENOQUORUM; /* too few kept nodes renewed */
    else if (status == 0)
        redlock__kept_proven(lock, r->evidence, o->prev_deadline_us);
    if (status == REDLOCK_ELOST)
        lock->lapsed = true; /* the hold may have had a gap: no retake from now on */
    redlock__stats_round(o->client, REDLOCK__CMD_EXTEND, status, &r->q, r->results);
    if (status == 0) {
        uint64_t validity = redlock_round_validity_us(&r->q);
        lock->ttl_ms = o->ttl_ms;
        lock->validity_ms = validity / 1000;
        lock->deadline_us = redlock__round_deadline_us(&r->q);
        lock->won_start_us = redlock__round_start_us(&r->q);
        /* From here the deadline is known and the hold continuous: a plain compare-and-pexpire
         * wins only where the token still stands, and a retake runs only on a lock known to be. */
        lock->attached = false;
        lock->lapsed = false;
        /* A win of a round started before "lost" was said (the auto-extension's, in flight)
         * renews the keys but does not take the word back; the caller's own extend since does. */
        if (o->after_lost)
            lock->lost = false;
        /* A caller's own extend moves the auto-extension's plan. */
        if (lock->on_moved != NULL)
            lock->on_moved(lock);
    }
    redlock__op_complete(o, status);
}

/* A release speaks for the whole hold, from the acquire to the release, not only for its own
 * round: known to have lapsed when it was called after the validity ran out (a key that outlived
 * it proves nothing: a retake or SET still on the wire can set it again after a gap), or an extend
 * found the lock lost and none has won since (the library said so already), or the hold had a gap
 * (recheck.c). The decision is the core's (redlock__release_status); with the client's
 * release_waits_all, it is made only when every node has answered or timed out. */
static bool release_decided(const redlock__op *o, const redlock__round *r, int *status)
{
    if (r->outstanding > 0 && o->client->opts.release_waits_all)
        return false;
    const redlock_lock *lock = o->lock;
    bool lapsed = o->late || lock->lapsed || lock->gap;
    /* An attached lock that no extend won has no hold of its own to speak for; and below a quorum
     * of deletes the status is not 0 whatever the continuity. */
    bool shown = lapsed || lock->attached || !redlock__round_has_quorum(&r->q);
    redlock__cont cont = shown ? REDLOCK__CONT_PROVEN : redlock__round_continuity(r);
    return redlock__release_decided_cont(&r->q, r->outstanding, lapsed, cont, status);
}

/* ---- the kinds ----------------------------------------------------------------------------- */

static redlock__cmd_kind extend_command(const redlock__op *o)
{
    (void)o;
    return REDLOCK__CMD_EXTEND;
}

/* Decided at the quorum, as an acquire, once its continuity is known too: a won round waits for
 * the answers of kept nodes while a quorum of them may still renew the keys they kept. */
static bool extend_check(redlock__op *o, redlock__round *r)
{
    redlock_decision decision = redlock_round_decision(&r->q);
    if (decision == REDLOCK_ROUND_PENDING)
        return false;
    if (decision == REDLOCK_ROUND_WON && !o->client->closing && !o->lock->attached) {
        redlock__cont cont = redlock__round_continuity(r);
        if (cont == REDLOCK__CONT_PENDING)
            return false;
        r->proven = cont == REDLOCK__CONT_PROVEN;
    }
    if (o->client->closing)
        redlock__op_complete(o, REDLOCK_ECANCELED);
    else
        extend_round_done(o, r);
    return true;
}

const op_kind_def redlock__extend_kind = {
    .command = extend_command,
    .check = extend_check,
};

static redlock__cmd_kind release_command(const redlock__op *o)
{
    (void)o;
    return REDLOCK__CMD_RELEASE;
}

/* The holder is done with the resource: it leaves the queues, and its release wakes the next
 * waiter. */
static void release_prepare(redlock__op *o, redlock__round *r)
{
    (void)o;
    r->cmd.leave = true;
    r->cmd.tell = true;
}

/* Decided as soon as its status is (release_decided); the other nodes' deletes go on (a closing
 * client waits for them). */
static bool release_check(redlock__op *o, redlock__round *r)
{
    int status = 0;
    if (!release_decided(o, r, &status))
        return false;
    redlock__stats_round(o->client, r->cmd.kind, status, &r->q, r->results);
    redlock__op_complete(o, status);
    return true;
}

const op_kind_def redlock__release_kind = {
    .command = release_command,
    .prepare = release_prepare,
    .check = release_check,
};

static redlock__cmd_kind inspect_command(const redlock__op *o)
{
    (void)o;
    return REDLOCK__CMD_INSPECT;
}

/* A picture of every node: it waits for each answer or deadline. */
static bool inspect_check(redlock__op *o, redlock__round *r)
{
    if (r->outstanding > 0)
        return false;
    int status = redlock__inspect_status(&r->q);
    redlock__stats_round(o->client, r->cmd.kind, status, &r->q, r->results);
    redlock__op_complete(o, status);
    return true;
}

/* The callback gets no handle: the one that carried the keys is the library's own. */
static redlock_lock *inspect_handed(redlock__op *o)
{
    (void)o;
    return NULL;
}

const op_kind_def redlock__inspect_kind = {
    .command = inspect_command,
    .check = inspect_check,
    .handed = inspect_handed,
};

/* ---- the calls ----------------------------------------------------------------------------- */

/* What extend and release check of the lock they act on. */
static int check_lock_call(redlock_lock *lock, redlock_cb cb)
{
    redlock_client *c = lock->client;
    if (c->closing)
        return redlock__client_error(c, REDLOCK_ECLOSING, "client is closing");
    if (cb == NULL)
        return redlock__client_error(c, REDLOCK_EINVAL, "callback is NULL");
    if (lock->released)
        return redlock__client_error(c, REDLOCK_ERELEASED, "lock was already released");
    return 0;
}

/* What release checks besides: the hold of a redlock_using work ends by its done. */
static int check_release(redlock_lock *lock, redlock_cb cb)
{
    if (lock->using != NULL)
        return redlock__client_error(lock->client, REDLOCK_EINVAL,
                                     "the lock is held by redlock_using: end the work with "
                                     "redlock_using_done");
    return check_lock_call(lock, cb);
}

int redlock__extend_check_retake(redlock_lock *lock)
{
    redlock_client *c = lock->client;
    if (lock->lapsed)
        return redlock__client_error(
            c, REDLOCK_EINVAL,
            "REDLOCK_EXTEND_RETAKE after an extend found the lock lost (REDLOCK_ELOST): its hold "
            "may have had a gap that retaking would hide; only an extend without the flag is "
            "allowed");
    if (lock->attached)
        return redlock__client_error(
            c, REDLOCK_EINVAL,
            "REDLOCK_EXTEND_RETAKE on an attached lock: its validity is unknown, so its keys may "
            "have expired and been taken and released by another holder meanwhile; extend it "
            "without the flag first (a won extend fixes its deadline)");
    return 0;
}

int redlock_extend(redlock_lock *lock, uint64_t ttl_ms, unsigned flags, redlock_cb cb, void *data)
{
    return redlock__extend(lock, ttl_ms, flags, cb, data, true);
}

int redlock__extend(redlock_lock *lock, uint64_t ttl_ms, unsigned flags, redlock_cb cb, void *data,
                    bool cancelable)
{
    if (lock == NULL)
        return REDLOCK_EINVAL;
    redlock_client *c = lock->client;
    int rc = check_lock_call(lock, cb);
    if (rc != 0)
        return rc;
    if ((flags & ~REDLOCK_EXTEND_RETAKE) != 0)
        return redlock__client_error(c, REDLOCK_EINVAL, "unknown flags 0x%x", flags);
    if ((flags & REDLOCK_EXTEND_RETAKE) != 0 && (rc = redlock__extend_check_retake(lock)) != 0)
        return rc;
    if (ttl_ms == 0)
        ttl_ms = lock->ttl_ms;
    rc = redlock__op_check_ttl(c, ttl_ms);
    if (rc != 0)
        return rc;
    uint64_t now = redlock__client_now(c);
    if (now >= lock->deadline_us)
        return redlock__client_error(c, REDLOCK_EEXPIRED, "lock validity ran out %llu ms ago",
                                     (unsigned long long)((now - lock->deadline_us) / 1000));
    redlock__op *o = redlock__op_new(c, &redlock__extend_kind, lock, cb, data);
    if (o == NULL)
        return redlock__client_error(c, REDLOCK_ENOMEM, "out of memory");
    redlock__lock_ref(lock);
    o->cancelable = cancelable;
    o->ttl_ms = ttl_ms;
    o->flags = flags;
    o->prev_deadline_us = lock->deadline_us;
    o->after_lost = lock->lost;
    return redlock__op_launch(o);
}

int redlock_release(redlock_lock *lock, redlock_cb cb, void *data)
{
    if (lock == NULL)
        return REDLOCK_EINVAL;
    redlock_client *c = lock->client;
    int rc = check_release(lock, cb);
    if (rc != 0)
        return rc;
    redlock__op *o = redlock__op_new(c, &redlock__release_kind, lock, cb, data);
    if (o == NULL)
        return redlock__client_error(c, REDLOCK_ENOMEM, "out of memory");
    redlock__lock_ref(lock);
    o->ttl_ms = lock->ttl_ms;
    o->late = o->call_us >= lock->deadline_us; /* never for an attached lock: UINT64_MAX */
    rc = redlock__op_launch(o);
    if (rc == 0) {
        lock->released = true;
        redlock__lock_ended(lock); /* nothing is extended after release */
    }
    return rc;
}

int redlock_inspect(redlock_client *c, const void *resource, size_t len, redlock_cb cb, void *data)
{
    return redlock_inspect_multi(c, &resource, &len, 1, cb, data);
}

int redlock_inspect_multi(redlock_client *c, const void *const *resources, const size_t *lens,
                          unsigned count, redlock_cb cb, void *data)
{
    int rc = redlock__client_check_call(c, resources, lens, count, cb);
    if (rc != 0)
        return rc;
    /* A handle nobody sees carries the keys for the round. */
    redlock_lock *lock = redlock__lock_new_set(c, resources, lens, count);
    if (lock == NULL)
        return redlock__client_error(c, REDLOCK_ENOMEM, "out of memory");
    lock->ttl_ms = c->opts.ttl_ms;
    redlock__op *o = redlock__op_new(c, &redlock__inspect_kind, lock, cb, data);
    if (o == NULL) {
        redlock__lock_unref(lock);
        return redlock__client_error(c, REDLOCK_ENOMEM, "out of memory");
    }
    o->ttl_ms = lock->ttl_ms;
    return redlock__op_launch(o);
}
