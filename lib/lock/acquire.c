/* SPDX-License-Identifier: MIT */
/* acquire.c - an acquire's attempts (op.h): a fresh token for each, a won round handed to won.c
 * (the grant, the fencing commit), and a lost attempt released everywhere (or kept, for a
 * waiter's grants) and retried per policy; the acquire kind's table. The waiting (queue,
 * notifications, grants) is waiter.c's. Calls down only: won.c, waiter.c, rounds and operations,
 * the client core, lock handles, the counters, the quorum core. */
#include "busy.h"
#include "op.h"
#include "waiter.h"

#include "stats.h"

int redlock__acquire_new_token(redlock_client *c, redlock_lock *lock)
{
    unsigned char raw[REDLOCK__TOKEN_BYTES];
    char text[2 * REDLOCK__TOKEN_BYTES + 1];
    int rc = c->io->ops->random(c->io, raw, sizeof(raw));
    if (rc != 0)
        return REDLOCK_ENOMEM;
    redlock__hex(text, raw, sizeof(raw));
    return redlock__lock_set_token(lock, text, 2 * sizeof(raw)); /* inline: never fails */
}

/* Whether a waiter's lost attempt r may keep its token: no node said yes or timed out, so none
 * holds its key (an error is a command that was not run, or a script that stopped before any
 * write), and nothing is released. Nodes yet to answer may still say yes: on_req_done. */
static bool attempt_clean(const redlock__op *o, const redlock__round *r, int status, bool retry)
{
    return retry && o->lock->place != NULL && status == REDLOCK_EBUSY && r != NULL &&
           redlock__round_left_nothing(&r->q);
}

/* How long until a quorum of the nodes of a waiter's lost attempt r could let it in without a
 * release (their keys' holders' ttls, or the deadlines of the heads before it, run out): the
 * quorum-th shortest of the waits they gave (a node that said yes had let it in: 0), or
 * UINT64_MAX when fewer than a quorum said. */
static uint64_t attempt_wait_us(const redlock__round *r)
{
    int64_t waits[REDLOCK_MAX_NODES];
    for (unsigned i = 0; i < r->client->n_nodes; i++)
        waits[i] = r->reqs[i].wait_ms;
    int64_t ms = redlock__quorum_wait_ms(&r->q, waits);
    return ms < 0 ? UINT64_MAX : (uint64_t)ms * 1000;
}

/* When a waiter's lost attempt retries: at once (on a short jitter) if a notification came while
 * it was out, within the notifications' budget (redlock__waiter_wake_due); else after the retry
 * delay, or as soon as the nodes say a quorum of them could let it in (attempt_wait_us: the
 * holder's keys run out), whichever is sooner, plus a millisecond of the servers' clock; never
 * after the wait's deadline. */
static uint64_t retry_due_us(redlock__op *o, uint64_t now)
{
    redlock_client *c = o->client;
    redlock__waiter *w = o->w;
    uint64_t delay =
        w != NULL && w->notified ? redlock__waiter_jitter_us(c, o) : redlock__op_retry_delay_us(c);
    const redlock__round *r = o->round;
    if (w != NULL && !w->notified && r != NULL && r->cmd.place != NULL) {
        uint64_t wait = attempt_wait_us(r);
        if (wait < delay && delay - wait > 1000)
            delay = wait + 1000;
    }
    uint64_t due = now + delay;
    if (w != NULL && w->claim) {
        due = now; /* evidence, not a hint: a quorum granted (waiter.c, grant_win) */
    } else if (w != NULL && w->notified) {
        uint64_t later = now + redlock__op_retry_delay_us(c);
        due = redlock__waiter_wake_due(c, w, due);
        due = due < later ? due : later;
    }
    if (w != NULL)
        w->notified = w->claim = false;
    return o->wait_deadline_us != 0 && due > o->wait_deadline_us ? o->wait_deadline_us : due;
}

/* Release the keys of o's lost attempt everywhere (the release of a lost attempt: it wakes
 * nobody; leave: o waits no more) and forget what grants told of them; then o's next attempt
 * gets a token of its own: the release of a lost attempt can reach a node late (written on a
 * connection that was then dropped, it may be applied after the next attempt's SET on the new
 * one); with the same token it would delete the winner's key. Returns 0, or the error of a token
 * that could not be made (o then waits no more: it has left the queues). */
static int attempt_release(redlock__op *o, uint64_t now, bool leave, bool new_token_wanted)
{
    redlock_client *c = o->client;
    redlock_lock *lock = o->lock;
    if (o->w != NULL) {
        o->w->token_kept = false;
        redlock__waiter_forget_grants(o->w, c->n_nodes);
        o->w->grant_after_us = now;
    }
    redlock__round_release_everywhere(c, lock, leave, false);
    if (lock->caller_token || !new_token_wanted)
        return 0;
    int rc = redlock__acquire_new_token(c, lock);
    if (rc != 0 && !leave) /* it waits no more: out of the queue too (nothing to delete) */
        redlock__round_release_everywhere(c, lock, true, false);
    return rc;
}

/* A late vote to o's last round: a late yes to a waiter's attempt that lost keeping its token
 * (asleep now) means the node set its key after the round was decided, so the attempt did not
 * leave nothing behind after all. It is released as any lost attempt that held keys (o sleeps on
 * as planned). */
static void acquire_late_vote(redlock__op *o, redlock__round *r, redlock_vote vote)
{
    (void)r;
    if (o->w == NULL || !o->w->token_kept || o->state != OP_RETRYING || vote != REDLOCK_VOTE_YES)
        return;
    uint64_t now = redlock__client_now(o->client);
    int rc = attempt_release(o, now, false, true);
    if (rc != 0) {
        redlock__client_timer_stop(o->client, &o->timer);
        redlock__op_complete(o, rc);
    }
}

/* The attempt is lost (status): release its key everywhere (unless it keeps its token), then
 * retry or give up. */
static void lock_attempt_lost(redlock__op *o, int status)
{
    redlock_client *c = o->client;
    redlock__waiter *w = o->w;
    uint64_t now = redlock__client_now(c);
    bool retry = !c->closing && redlock__op_may_retry(o, now);
    bool kept = w != NULL && attempt_clean(o, o->round, status, retry);
    if (w != NULL) {
        w->token_kept = kept;
        if (o->round != NULL)
            redlock__waiter_attempt_took(w, &o->round->q);
    }
    if (kept) {
        /* grants heard while the attempt was out: a quorum, won */
        if (redlock__waiter_grant_check(o))
            return;
    } else {
        int rc = attempt_release(o, now, !retry, status != REDLOCK_ENOMEM);
        if (rc != 0) {
            redlock__op_complete(o, rc);
            return;
        }
    }
    if (retry) {
        /* Others took keys while this attempt was out (a split vote): spread the next wake-ups. */
        if (w != NULL && w->watching && o->round != NULL && redlock__round_any_yes(&o->round->q))
            w->collisions++;
        o->state = OP_RETRYING;
        redlock__client_timer_start(c, &o->timer, retry_due_us(o, now), redlock__op_on_retry_timer);
        return;
    }
    redlock__op_complete(o, status);
}

/* An acquire's round (the acquire round, or a fenced acquire's commit round) is decided. A lost
 * commit is a lost attempt like a lost acquire: released everywhere, retried per policy. */
static void lock_round_done(redlock__op *o, redlock__round *r)
{
    int status = redlock_round_status(&r->q);
    /* An attempt counts once: a won fenced acquire round is counted with its commit round. */
    if (status != 0 || r->cmd.kind != REDLOCK__CMD_ACQUIRE_FENCED)
        redlock__stats_round(o->client, r->cmd.kind, status, &r->q, r->results);
    if (status == 0)
        status = r->cmd.kind == REDLOCK__CMD_ACQUIRE_FENCED ? redlock__commit_start(o, r, false)
                                                            : redlock__lock_grant(o, r);
    if (status != 0)
        lock_attempt_lost(o, status);
}

/* ---- the kind ------------------------------------------------------------------------------ */

/* A plain acquire stays a plain SET NX PX; a fenced one reads and raises the counter. */
static redlock__cmd_kind acquire_command(const redlock__op *o)
{
    return redlock__fencing_acquire_kind(&o->lock->fencing);
}

/* Decided at the quorum (won, or a quorum out of reach), the acquire round and the commit round
 * alike. */
static bool acquire_check(redlock__op *o, redlock__round *r)
{
    /* A waiter's attempt just sent (the first check comes right after the send): the grants it
     * takes run up to the stamp its command names (op_granted in waiter.c). */
    if (o->w != NULL && r->cmd.stamp_us > o->w->grant_until_us)
        o->w->grant_until_us = r->cmd.stamp_us;
    if (redlock_round_decision(&r->q) == REDLOCK_ROUND_PENDING)
        return false;
    if (o->client->closing)
        redlock__op_complete(o, REDLOCK_ECANCELED);
    else
        lock_round_done(o, r);
    return true;
}

/* The won lock, now the caller's too; none for a lost or canceled acquire. */
static redlock_lock *acquire_handed(redlock__op *o)
{
    redlock_lock *lock = o->lock;
    if (o->status == 0) {
        lock->user_owned = true;
        redlock__lock_ref(lock);
        return lock;
    }
    /* Won but canceled by a close before delivery: the caller never sees this lock, so its
     * auto-extension must not report on it either. */
    redlock__lock_ended(lock);
    return NULL;
}

static void acquire_delivered(redlock__op *o)
{
    if (o->w != NULL)
        redlock__waiter_end(o);
}

/* An acquire's attempt in flight, or its lock won but not yet handed out, is released on every
 * node (written after the attempt's commands on each ordered connection); a waiter asleep gives
 * back its place in the queue and what a release may have granted it. */
static void acquire_cancel(redlock__op *o)
{
    redlock_client *c = o->client;
    redlock_lock *lock = o->lock;
    switch (o->state) {
    case OP_DECIDED:
        if (o->status == 0) { /* won: a holder's release */
            redlock__lock_ended(lock);
            redlock__round_release_everywhere(c, lock, true, true);
        }
        break;
    case OP_RETRYING: /* the last attempt was released when it was lost, or kept its token */
        if (lock->place != NULL)
            redlock__round_release_everywhere(c, lock, true, false);
        break;
    case OP_RUNNING:
        redlock__round_release_everywhere(c, lock, true, false);
        break;
    }
}

/* Refused: ask the nodes that said no why, before the delivery (busy.h). */
static bool acquire_hold_back(redlock__op *o)
{
    return o->status == REDLOCK_EBUSY && redlock__busy_probe(o);
}

const op_kind_def redlock__acquire_kind = {
    .command = acquire_command,
    .check = acquire_check,
    .late_vote = acquire_late_vote,
    .handed = acquire_handed,
    .delivered = acquire_delivered,
    .cancel = acquire_cancel,
    .hold_back = acquire_hold_back,
    .detach = redlock__busy_detach,
    .release_on_close = true,
};
