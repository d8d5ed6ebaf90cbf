/* SPDX-License-Identifier: MIT */
/* op.c - an operation's life (op.h): made, its rounds started and retried, decided, delivered
 * once to its callback, canceled (by redlock_cancel, or by a canceler, whose wake-up lands in
 * the callback it set on the io); the operations' part of a close: what the close's start
 * releases, and each operation's closer, which delivers it once the io has closed. An operation
 * knows its kind only through its op_kind_def. Calls down only: rounds (round.c), the client
 * core, lock handles, the quorum core. */
#include "op.h"
#include "waiter.h"

#include <string.h>

static void op_deliver(redlock__op *o);

/* The io of a closing client has closed (client.h's closers): o is delivered, canceled. */
static void on_close(redlock__closer *closer)
{
    redlock__op *o = REDLOCK__CONTAINER_OF(closer, redlock__op, closer);
    o->status = REDLOCK_ECANCELED;
    op_deliver(o);
}

void redlock__op_hold_round(redlock__op *o, redlock__round *r)
{
    if (o->round == r)
        return;
    if (o->round != NULL) {
        redlock__round *old = o->round;
        old->held = false;
        if (old->op == o)
            old->op = NULL;
        redlock__round_maybe_free(old);
    }
    o->round = r;
    if (r != NULL)
        r->held = true;
}

/* An operation's memory, kept for the next one (client.h, spare_ops) or freed. */
void redlock__op_free(redlock__op *o)
{
    redlock_client *c = o->client;
    redlock__closer_unlink(&o->closer);
    redlock__canceler_unregister(&o->cancel);
    redlock__free(&c->alloc, o->w);
    o->w = NULL;
    c->live_ops--;
    redlock__spares_put(&c->spare_ops, &c->alloc, o,
                        REDLOCK__MAX(c->live_ops, REDLOCK__SPARES_KEPT));
}

static void on_deliver_timer(redlock__timer *t)
{
    op_deliver(REDLOCK__CONTAINER_OF(t, redlock__op, timer));
}

/* The operation's outcome is known: deliver it now, or on the next loop turn when inside a
 * public call, or at close. */
void redlock__op_complete(redlock__op *o, int status)
{
    redlock_client *c = o->client;
    o->status = status;
    o->state = OP_DECIDED;
    if (c->closing)
        return; /* delivered by the close, with REDLOCK_ECANCELED */
    if (o->def->hold_back != NULL && o->def->hold_back(o))
        return; /* the kind delivers it once ready (an acquire refused: busy.h) */
    if (c->api_depth > 0) {
        redlock__client_timer_start(c, &o->timer, 0, on_deliver_timer);
        return;
    }
    op_deliver(o);
}

static void op_deliver(redlock__op *o)
{
    redlock_client *c = o->client;
    redlock__closer_unlink(&o->closer);
    redlock__client_timer_stop(c, &o->timer);
    if (o->def->detach != NULL)
        o->def->detach(o);
    redlock_lock *lock = o->lock;
    redlock__round *r = o->round;

    redlock_node_result none[1];
    redlock_result res;
    memset(&res, 0, sizeof(res));
    res.status = o->status;
    res.n_nodes = c->n_nodes;
    res.attempts = o->attempts;
    uint64_t now = redlock__client_now(c);
    res.elapsed_us = now > o->call_us ? now - o->call_us : 0;
    redlock_lock *handed = o->def->handed != NULL ? o->def->handed(o) : lock;
    res.fence = handed != NULL && o->status == 0 ? lock->fencing.fence : 0;
    if (r != NULL) {
        redlock__round_tally(&r->q, &res);
        res.nodes = r->results;
    } else {
        memset(none, 0, sizeof(none));
        res.nodes = none;
        res.n_nodes = 0;
    }

    if (o->status != 0 && o->status != REDLOCK_ECANCELED) /* for a caller who reads no result */
        redlock__stats_failure_text(c->last_error, sizeof(c->last_error), o->status, &res);
    o->cb(handed, o->status, &res, o->data);

    redlock__op_hold_round(o, NULL);
    if (o->def->delivered != NULL)
        o->def->delivered(o);
    redlock__lock_unref(lock);
    redlock__op_free(o);
}

bool redlock__op_may_retry(redlock__op *o, uint64_t now)
{
    if (o->wait_deadline_us != 0)
        return now < o->wait_deadline_us;
    if (o->retries_left > 0) {
        o->retries_left--;
        return true;
    }
    return false;
}

uint64_t redlock__op_retry_delay_us(redlock_client *c)
{
    uint64_t base = c->opts.retry_delay_ms * 1000;
    uint64_t jitter = c->opts.retry_jitter_ms * 1000;
    if (jitter == 0)
        return base;
    uint64_t r = 0;
    if (c->io->ops->random(c->io, &r, sizeof(r)) != 0)
        r = redlock__client_now(c);
    uint64_t span = 2 * jitter + 1;
    uint64_t offset = r % span; /* base - jitter .. base + jitter */
    return base + offset > jitter ? base + offset - jitter : 0;
}

void redlock__op_on_retry_timer(redlock__timer *t)
{
    redlock__op *o = REDLOCK__CONTAINER_OF(t, redlock__op, timer);
    o->state = OP_RUNNING;
    if (o->w != NULL)
        o->w->woken = false;
    int rc = redlock__op_start_round(o);
    if (rc != 0)
        redlock__op_complete(o, rc);
}

int redlock__op_start_round(redlock__op *o)
{
    redlock__round *r = redlock__round_new(o->client, o, o->lock, o->def->command(o), o->ttl_ms,
                                           (o->flags & REDLOCK_EXTEND_RETAKE) != 0);
    if (r == NULL)
        return REDLOCK_ENOMEM;
    if (o->def->prepare != NULL)
        o->def->prepare(o, r);
    o->attempts++;
    o->state = OP_RUNNING;
    redlock__op_hold_round(o, r);
    redlock__round_send(r, true);
    return 0;
}

redlock__op *redlock__op_new(redlock_client *c, const op_kind_def *def, redlock_lock *lock,
                             redlock_cb cb, void *data)
{
    redlock__op *o = redlock__spares_take(&c->spare_ops);
    if (o == NULL)
        o = redlock__malloc(&c->alloc, sizeof(*o));
    if (o == NULL)
        return NULL;
    c->live_ops++;
    memset(o, 0, sizeof(*o));
    o->def = def;
    o->cancelable = true;
    o->client = c;
    o->lock = lock;
    o->cb = cb;
    o->data = data;
    o->call_us = redlock__client_now(c);
    redlock__closer_link(&c->ops, &o->closer, on_close);
    return o;
}

int redlock__op_launch(redlock__op *o)
{
    redlock_client *c = o->client;
    c->api_depth++;
    int rc = redlock__op_start_round(o);
    c->api_depth--;
    if (rc != 0) {
        redlock__lock_unref(o->lock);
        redlock__op_free(o);
        return redlock__client_error(c, rc, "out of memory");
    }
    return 0;
}

/* Cancel o, which has not been delivered: it will be, with REDLOCK_ECANCELED. What its kind had
 * taken is undone first (its cancel: an acquire's attempt is released). A canceled extend's keys
 * may have been renewed on some nodes: the lock keeps the validity it had, which is the safe
 * side. A canceled release's commands still run. */
static void op_cancel(redlock__op *o)
{
    if (o->def->cancel != NULL)
        o->def->cancel(o);
    switch (o->state) {
    case OP_DECIDED: /* its delivery is due already */
        o->status = REDLOCK_ECANCELED;
        return;
    case OP_RETRYING:
        redlock__client_timer_stop(o->client, &o->timer);
        break;
    case OP_RUNNING: {
        redlock__round *r = o->round;
        r->op = NULL; /* its votes are counted, and nobody acts on them */
        if (r->state == ROUND_OPEN)
            r->state = ROUND_DONE;
        break;
    }
    }
    redlock__op_complete(o, REDLOCK_ECANCELED);
}

int redlock_cancel(redlock_client *c, const void *data)
{
    if (c == NULL)
        return REDLOCK_EINVAL;
    if (c->closing)
        return redlock__client_error(c, REDLOCK_ECLOSING, "client is closing");
    unsigned n = 0;
    c->api_depth++; /* the callbacks come from the loop, not from inside this call */
    for (redlock__list *it = c->ops.next; it != &c->ops; it = it->next) {
        redlock__op *o = REDLOCK__CONTAINER_OF(it, redlock__op, closer.link);
        if (!o->cancelable || o->data != data)
            continue;
        if (o->state == OP_DECIDED && o->status == REDLOCK_ECANCELED)
            continue; /* canceled already: its callback comes once */
        op_cancel(o);
        n++;
    }
    c->api_depth--;
    if (n == 0)
        return redlock__client_error(c, REDLOCK_ENOTFOUND,
                                     "no pending operation of this client has this callback data "
                                     "(its callback has run, or it was canceled already)");
    return 0;
}

/* The firing thread: wake the loop of o's client (under the canceler's mutex: o is alive). */
static void on_canceler_fired(redlock__canceler_reg *reg)
{
    redlock__op *o = REDLOCK__CONTAINER_OF(reg, redlock__op, cancel);
    redlock__io *io = o->client->io;
    io->ops->signal(io);
}

static void on_signal(redlock__io *io);

int redlock__op_carry_canceler(redlock__op *o, redlock_canceler *canceler)
{
    redlock_client *c = o->client;
    redlock__io *io = c->io;
    if (io->ops->signal_start == NULL)
        return redlock__client_error(c, REDLOCK_EINVAL, "this client takes no cancelers");
    io->on_signal = on_signal; /* where the firing thread's wake-up lands */
    if (io->ops->signal_start(io) != 0)
        return redlock__client_error(c, REDLOCK_ENOMEM, "no wake-up handle for a canceler");
    if (redlock__canceler_register(canceler, &o->cancel, on_canceler_fired) != 0)
        return redlock__client_error(c, REDLOCK_ECANCELED, "the canceler has fired");
    return 0;
}

/* The loop thread, woken by a canceler that fired: cancel each operation that carries one that has
 * fired (a closing client cancels them all anyway). */
static void on_signal(redlock__io *io)
{
    redlock_client *c = io->owner;
    if (c->closing)
        return;
    c->api_depth++; /* the callbacks come from the loop's next turn, after this walk */
    for (redlock__list *it = c->ops.next; it != &c->ops; it = it->next) {
        redlock__op *o = REDLOCK__CONTAINER_OF(it, redlock__op, closer.link);
        if (!redlock__canceler_reg_fired(&o->cancel))
            continue;
        if (o->state == OP_DECIDED && o->status == REDLOCK_ECANCELED)
            continue; /* canceled already: its callback comes once */
        op_cancel(o);
    }
    c->api_depth--;
}

/* Every operation lets go of its canceler, so no firing thread reaches the client again (its
 * operations are canceled by the close anyway). */
static void cancelers_detach(redlock_client *c)
{
    for (redlock__list *it = c->ops.next; it != &c->ops; it = it->next)
        redlock__canceler_unregister(&REDLOCK__CONTAINER_OF(it, redlock__op, closer.link)->cancel);
}

/* Every release still out (decided at the quorum, or in flight) counts in the client's close
 * steps until its last node answered or timed out, so the close completes after their deletes. */
static void close_waits(redlock_client *c)
{
    for (redlock__list *it = c->releases.next; it != &c->releases; it = it->next) {
        redlock__round *r = REDLOCK__CONTAINER_OF(it, redlock__round, release_link);
        if (r->outstanding > 0 && !r->close_wait) {
            r->close_wait = true;
            c->close_rounds++;
        }
    }
}

/* Each acquire in flight or won and not handed out, and each lock the caller holds (handed out,
 * not released, not attached), is released on every node, each release a close step. */
static void release_all(redlock_client *c)
{
    /* Acquires first: in flight, or won and not yet handed out (those locks are not the
     * caller's yet, so the walk over handles below does not see them). */
    for (redlock__list *it = c->ops.next; it != &c->ops; it = it->next) {
        redlock__op *o = REDLOCK__CONTAINER_OF(it, redlock__op, closer.link);
        if (o->def->release_on_close && (o->state != OP_DECIDED || o->status == 0))
            op_cancel(o);
    }
    /* Then every lock the caller holds a handle to and has not released. An attached handle
     * speaks for a hold that belongs to whoever acquired it (redlock extend in the CLI, say):
     * it is left alone. */
    for (redlock__list *it = c->locks.next; it != &c->locks; it = it->next) {
        redlock_lock *lock = REDLOCK__CONTAINER_OF(it, redlock_lock, closer.link);
        if (lock->user_owned && !lock->released && !lock->attached)
            redlock__round_release_everywhere(c, lock, true, true);
    }
}

void redlock__ops_close(redlock_client *c, unsigned flags)
{
    cancelers_detach(c); /* before the io (and its wake-up handle) may close */
    close_waits(c);
    if ((flags & REDLOCK_CLOSE_FAST) == 0)
        release_all(c);
    redlock__client_close_step(c); /* the step the close's begin counted: the releases are out */
}

int redlock__op_check_ttl(redlock_client *c, uint64_t ttl_ms)
{
    if (ttl_ms == 0 || ttl_ms > REDLOCK_TTL_MAX_MS)
        return redlock__client_error(c, REDLOCK_EINVAL, "ttl_ms %llu is out of range 1..%llu",
                                     (unsigned long long)ttl_ms,
                                     (unsigned long long)REDLOCK_TTL_MAX_MS);
    redlock_round probe;
    redlock_round_init(&probe, 1, ttl_ms, c->opts.drift_factor, 0, 0);
    uint64_t need = redlock_round_drift_us(&probe) + c->opts.min_validity_ms * 1000;
    if (ttl_ms * 1000 <= need)
        return redlock__client_error(c, REDLOCK_EINVAL,
                                     "ttl_ms %llu leaves no validity after the drift allowance "
                                     "and min_validity_ms",
                                     (unsigned long long)ttl_ms);
    return 0;
}
