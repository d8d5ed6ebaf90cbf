/* SPDX-License-Identifier: MIT */
/* ops.c - operations (acquire, extend, release, inspect) and the rounds they run.
 *
 * An operation runs one or more rounds. A round sends one command to every node through the io
 * interface and feeds the votes to the quorum core; the operation acts as soon as the core
 * decides (acquire, extend) or every node has answered (release, inspect). A round lives until
 * its last node answers or times out, even after its operation moved on, so late replies always
 * land in valid memory and are ignored.
 *
 * Callbacks never run inside a public call: a completion that happens there (every node down)
 * is delivered from the timer queue on the next loop turn.
 *
 * An operation's life (op_state):
 *
 *     OP_RUNNING --round decided, retry due--> OP_RETRYING --timer--> OP_RUNNING
 *     OP_RUNNING, OP_RETRYING --outcome known, or redlock_cancel--> OP_DECIDED --> delivered
 *
 * OP_DECIDED waits only for its delivery: at once, on the next loop turn (decided inside a public
 * call), or at the close (a closing client delivers everything with REDLOCK_ECANCELED).
 *
 * A round's life (round_state):
 *
 *     ROUND_SENDING --written to every node--> ROUND_OPEN or ROUND_DONE
 *     ROUND_OPEN --a vote--> ROUND_CHECKING --> ROUND_OPEN or ROUND_DONE
 *     ROUND_OPEN --its operation canceled--> ROUND_DONE
 *
 * Votes are counted in every state. Only ROUND_OPEN acts on them: in ROUND_SENDING the round acts
 * once every node has its command (a node that is down answers at once, and a release must not
 * overtake an acquire still to be written); in ROUND_CHECKING a completion nested in the check (a
 * callback closed the client) is counted and nothing more. ROUND_DONE means its operation has
 * acted, or none listens (a release of a lost attempt, a canceled operation's round): the round
 * waits for its last answers, then is freed - unless its operation still holds it for the
 * per-node results it hands its callback (`held`, an ownership, not a stage of life). */
#include "client.h"

#include <stdio.h>

#include "abi.h"
#include "quorum.h"
#include "slot.h"

typedef enum { OP_LOCK, OP_EXTEND, OP_UNLOCK, OP_INSPECT } op_kind;

typedef enum { OP_RUNNING, OP_RETRYING, OP_DECIDED } op_state;

typedef enum { ROUND_SENDING, ROUND_OPEN, ROUND_CHECKING, ROUND_DONE } round_state;

typedef struct round round;

/* What a node's grants told a waiter (waiter.nodes). */
typedef struct waiter_node {
    unsigned keys;      /* keys of the lock the node's grants set for its token */
    uint64_t oldest_us; /* the oldest stamp among them: the earliest attempt they answer */
    uint64_t counter;   /* a fenced lock's: the counter the grant read (its yes's counter) */
} waiter_node;

/* The state of an acquire that waits (wait_ms): only such an operation carries one. */
typedef struct waiter {
    bool watching;       /* the io says when its keys are released (notify.h) */
    bool woken;          /* its retry timer was moved up by a notification */
    bool notified;       /* a notification came while an attempt was out: retry at once if lost */
    unsigned collisions; /* its attempts lost in a split vote (notify_jitter_us) */
    /* Handoff by grant (docs/algorithm.md): a queued waiter's attempt that loses with neither a
     * yes nor a timeout (no node may hold its key) keeps its token and sends no release, and a
     * node's release may then set its keys for it: a grant, heard on its own channel, counts as
     * the yes of the node whose connection sent the attempt it names (its tag) for that attempt,
     * valid from that attempt's send. */
    bool token_kept;         /* the last attempt lost so: its token stands */
    uint64_t grant_after_us; /* the stamps of this token's attempts: after this ... */
    uint64_t grant_until_us; /* ... up to the last one sent (0: none) */
    uint64_t granted;        /* the nodes whose grants set every key of the lock (bit i: node i) */
    unsigned n_keys;         /* the lock's keys */
    waiter_node *nodes;      /* per node */
    unsigned char *key_bits; /* a set's: per node, which of its keys a grant set (n_keys bits) */
} waiter;

typedef struct op {
    op_kind kind;
    op_state state;
    bool cancelable; /* redlock_cancel may name it (not the auto-extension's own extends) */
    redlock_client *client;
    redlock_lock *lock;
    redlock_cb cb;
    void *data;
    redlock__list link;   /* client->ops */
    redlock__timer timer; /* retry delay, or deferred delivery */
    round *round;         /* the latest round: its per-node outcome goes to the callback */
    uint64_t call_us;
    uint64_t ttl_ms;
    unsigned flags;
    unsigned attempts;
    int retries_left;
    uint64_t wait_deadline_us; /* 0: none */
    uint64_t prev_deadline_us; /* extend: the validity the round must beat */
    int status;                /* final in OP_DECIDED */
    bool has_auto;             /* acquire: start auto-extension on success */
    bool after_lost;           /* extend: called after the lock was reported lost */
    bool late;                 /* release: called when the lock's validity had already run out */
    waiter *w;                 /* an acquire with a wait; NULL for any other */
    redlock_auto_opts auto_opts;
    redlock_lost_cb lost_cb;
    void *lost_data;
} op;

typedef struct round_req {
    redlock__req req;
    round *round;
    unsigned node;
    /* A waiter's attempt that this node said no to: how long (ms) until the node could let it
     * in without a release (lib/lua/acquire_queued.lua; -1 no end, -2 not said). Read only for
     * such a no, which always sets it. */
    int64_t wait_ms;
} round_req;

struct round {
    redlock_client *client;
    op *op; /* NULL once no operation listens */
    redlock_lock *lock;
    redlock__cmd cmd;
    redlock_round q;
    unsigned outstanding; /* requests not yet completed */
    round_state state;
    bool held;       /* the operation keeps it for its callback's result */
    bool close_wait; /* a release whose answers a closing client waits for (its last answer is a
                        step of the close: redlock__client_close_step) */
    redlock__list release_link; /* a release's: client->releases, while it lives */
    redlock_node_result *results;
    char *errors; /* n_nodes * REDLOCK_ERROR_TEXT_MAX */
    char *values; /* INSPECT: n_nodes * REDLOCK_TOKEN_MAX */
    /* The token as it was when the round started: the lock's token changes between acquire
     * attempts, and this round's late commands (a NOSCRIPT resend) must keep its own. */
    char token[REDLOCK_TOKEN_MAX + 1];
    round_req reqs[];
};

static bool round_check(round *r);
static void op_deliver(op *o);
static void op_wake(redlock_client *c, op *o, uint64_t delay_us);
static void attempt_late_yes(op *o);

/* ---- rounds ---------------------------------------------------------------------------------- */

static void round_maybe_free(round *r)
{
    if (r->outstanding > 0 || r->held || r->state == ROUND_SENDING || r->state == ROUND_CHECKING)
        return;
    redlock_client *c = r->client;
    redlock_lock *lock = r->lock;
    if (r->cmd.kind == REDLOCK__CMD_RELEASE)
        redlock__list_remove(&r->release_link);
    c->live_rounds--;
    if (r->values == NULL)
        redlock__spares_put(&c->spare_rounds, &c->alloc, r,
                            REDLOCK__MAX(c->live_rounds, REDLOCK__SPARES_KEPT));
    else
        redlock__free(&c->alloc, r);
    redlock__lock_unref(lock);
}

/* Leave ROUND_SENDING or ROUND_CHECKING: done when its operation acted (or none listens - a
 * cancel may have detached it meanwhile). Frees it if that was all. */
static void round_settle(round *r, bool done)
{
    r->state = done || r->op == NULL ? ROUND_DONE : ROUND_OPEN;
    round_maybe_free(r);
}

/* How long a node keeps a waiter's place in a resource's queue after each attempt: long enough
 * that a live waiter asks again before it runs out (its fallback retry delay at most, plus a
 * round at the slowest node's deadline), twice over, but at most PLACE_TTL_MAX_MS: a waiter that
 * vanished (a crashed process) stalls the queue for that long at worst. A waiter that asks less
 * often than that loses its place between attempts and gets it back (the same place) with the
 * next one: others may go first meanwhile, nothing worse. */
#define PLACE_TTL_MAX_MS 10000

static uint64_t place_ttl_ms(const redlock_client *c)
{
    uint64_t slowest = c->opts.node_timeout_ms;
    for (unsigned i = 0; i < c->n_nodes; i++) {
        if (c->urls[i].timeout_ms > 0 && (uint64_t)c->urls[i].timeout_ms > slowest)
            slowest = (uint64_t)c->urls[i].timeout_ms;
    }
    uint64_t ttl = 2 * (c->opts.retry_delay_ms + c->opts.retry_jitter_ms + slowest) + 100;
    return REDLOCK__MIN(ttl, (uint64_t)PLACE_TTL_MAX_MS);
}

/* A waiter's channels in lock->channels (queue_join): the queue's channel (its first key's queue
 * name), then its own (that name, ":" and the waiter's id), each NUL-terminated. */
static const char *queue_channel(const redlock_lock *lock, size_t *len)
{
    *len = lock->key_len + REDLOCK__QUEUE_SUFFIX_LEN;
    return lock->channels;
}

static const char *own_channel(const redlock_lock *lock, size_t *len)
{
    size_t queue_len;
    const char *queue = queue_channel(lock, &queue_len);
    *len = queue_len + 1 + lock->waiter_len;
    return queue + queue_len + 1;
}

static round *round_new(redlock_client *c, op *o, redlock_lock *lock, redlock__cmd_kind kind,
                        uint64_t ttl_ms, bool retake)
{
    unsigned n = c->n_nodes;
    size_t values = kind == REDLOCK__CMD_INSPECT ? (size_t)n * REDLOCK_TOKEN_MAX : 0;
    size_t zeroed = sizeof(round) + n * sizeof(round_req) + n * sizeof(redlock_node_result);
    size_t size = zeroed + (size_t)n * REDLOCK_ERROR_TEXT_MAX + values;
    round *r = values == 0 ? redlock__spares_take(&c->spare_rounds) : NULL;
    if (r == NULL)
        r = redlock__malloc(&c->alloc, size);
    if (r == NULL)
        return NULL;
    c->live_rounds++;
    /* The error texts and values are written before anything points at them: only the rest
     * starts zeroed (the texts are a third of a five-node round). */
    memset(r, 0, zeroed);
    r->client = c;
    r->op = o;
    r->state = ROUND_SENDING;
    r->lock = lock;
    redlock__lock_ref(lock);
    r->results = (redlock_node_result *)(void *)((char *)r + sizeof(round) + n * sizeof(round_req));
    r->errors = (char *)(r->results + n);
    r->values = values != 0 ? r->errors + (size_t)n * REDLOCK_ERROR_TEXT_MAX : NULL;
    r->cmd.kind = kind;
    r->cmd.retake = retake;
    r->cmd.key = lock->key;
    r->cmd.key_len = lock->key_len;
    r->cmd.key_hash = lock->key_hash;
    r->cmd.more = lock->more;
    r->cmd.n_more = lock->n_more;
    memcpy(r->token, lock->token, lock->token_len);
    r->cmd.token = r->token;
    r->cmd.token_len = lock->token_len;
    r->cmd.ttl_ms = ttl_ms;
    r->cmd.fence_key = lock->key;
    r->cmd.fence_key_len = lock->key_len + REDLOCK__FENCE_SUFFIX_LEN;
    r->cmd.fence = lock->fence; /* what a retake restores; a commit round sets its own */
    /* A waiter's attempts and releases go through its keys' queues; a release leaves them only
     * when its caller says so (round_leave_queue). */
    if (lock->queued && (kind == REDLOCK__CMD_ACQUIRE || kind == REDLOCK__CMD_ACQUIRE_FENCED ||
                         kind == REDLOCK__CMD_RELEASE)) {
        r->cmd.queued = true;
        r->cmd.waiter = lock->waiter;
        r->cmd.waiter_len = lock->waiter_len;
        r->cmd.channel = own_channel(lock, &r->cmd.channel_len);
        r->cmd.place_us = lock->place_us;
        r->cmd.place_ttl_ms = lock->place_ttl_ms;
    }
    for (unsigned i = 0; i < n; i++) {
        r->results[i].url = c->urls[i].redacted;
        r->results[i].pttl_ms = -2;
    }
    if (kind == REDLOCK__CMD_RELEASE) /* a closing client waits for its answers */
        redlock__list_push(&c->releases, &r->release_link);
    return r;
}

static void round_answer(round *r, unsigned i, redlock__req *req, redlock_vote vote,
                         const char *error, const redlock__reply_data *data, uint64_t now_us);

static void on_req_done(redlock__req *req, redlock_vote vote, const char *error,
                        const redlock__reply_data *data, uint64_t now_us)
{
    round_req *rr = (round_req *)req;
    round *r = rr->round;
    redlock_client *c = r->client;
    bool close_step = r->close_wait && r->outstanding == 1;    /* its last answer */
    round_answer(r, rr->node, req, vote, error, data, now_us); /* may free r */
    if (close_step)
        redlock__client_close_step(c);
}

/* Node i answered r (vote, ...): record it, and act if r is open. */
static void round_answer(round *r, unsigned i, redlock__req *req, redlock_vote vote,
                         const char *error, const redlock__reply_data *data, uint64_t now_us)
{
    round_req *rr = &r->reqs[i];
    redlock_node_result *res = &r->results[i];
    res->vote = vote;
    res->latency_us = now_us > req->sent_us ? now_us - req->sent_us : 0;
    if (error != NULL) {
        char *slot = r->errors + (size_t)i * REDLOCK_ERROR_TEXT_MAX;
        redlock__fmt(slot, REDLOCK_ERROR_TEXT_MAX, "%s", error);
        res->error = slot;
    }
    if (data != NULL) /* a cluster node's: which master answered */
        res->answered_by = data->answered_by;
    /* The counter a fenced acquire's yes read, or the one inspect saw (0 otherwise). */
    if (data != NULL && (vote == REDLOCK_VOTE_YES || r->cmd.kind == REDLOCK__CMD_INSPECT))
        res->fence = data->counter;
    if (data != NULL && r->cmd.queued && r->cmd.kind != REDLOCK__CMD_RELEASE)
        rr->wait_ms = data->pttl_ms;
    if (data != NULL && r->values != NULL) {
        res->pttl_ms = data->pttl_ms;
        if (data->value != NULL) {
            char *slot = r->values + (size_t)i * REDLOCK_TOKEN_MAX;
            res->value_len = REDLOCK__MIN(data->value_len, (size_t)REDLOCK_TOKEN_MAX);
            memcpy(slot, data->value, res->value_len);
            res->value = slot;
        }
    }
    r->outstanding--;
    if (r->cmd.kind == REDLOCK__CMD_ACQUIRE_FENCED)
        redlock_round_vote_counter(&r->q, i, vote, data != NULL ? data->counter : 0, now_us);
    else
        redlock_round_vote(&r->q, i, vote, now_us);
    /* A late yes to a waiter's attempt that lost keeping its token: the node set its key after
     * the round was decided, so a quorum may be in reach sooner than its retry was planned. */
    op *o = r->op;
    if (r->state == ROUND_DONE && o != NULL && o->round == r && o->w != NULL && o->w->token_kept &&
        o->state == OP_RETRYING && vote == REDLOCK_VOTE_YES)
        attempt_late_yes(o);
    /* Completions can nest (a callback closes the client, which fails every request): only the
     * outermost one acts on the round and may free it. */
    if (r->state != ROUND_OPEN) {
        round_maybe_free(r); /* ROUND_DONE: this may have been its last answer */
        return;
    }
    r->state = ROUND_CHECKING;
    round_settle(r, round_check(r));
}

/* Write the round's command to every node. Completions may arrive during the loop (a node that
 * is down fails at once); the round acts only after the loop, so a release never overtakes an
 * acquire that is still to be written. */
static void round_send(round *r, bool init_q)
{
    redlock_client *c = r->client;
    unsigned n = c->n_nodes;
    double drift = c->opts.drift_factor;
    uint64_t ttl = r->cmd.ttl_ms;
    uint64_t now = redlock__client_now(c); /* one clock reading for the round and its sends */
    if (r->cmd.queued && r->cmd.kind != REDLOCK__CMD_RELEASE && r->op != NULL) {
        r->cmd.stamp_us = now; /* what a grant for this attempt names */
        r->op->w->grant_until_us = now;
    }
    if (init_q) {
        int rc = redlock_round_init(&r->q, n, ttl, drift, c->opts.min_validity_ms, now);
        if (rc == 0 && r->cmd.kind == REDLOCK__CMD_ACQUIRE_FENCED)
            rc = redlock_round_fencing(&r->q);
        (void)rc; /* arguments were checked by the caller */
    }
    /* A node that voted already (a commit ack its fenced acquire gave, commit_start) gets
     * nothing, and a round those votes decided gets nothing at all. Counted before sending: a
     * completion may come during the loop. */
    bool pending = redlock_round_decision(&r->q) == REDLOCK_ROUND_PENDING;
    uint64_t to_send = 0;
    r->outstanding = 0;
    for (unsigned i = 0; pending && i < n; i++) {
        if (redlock_round_node_vote(&r->q, i) == REDLOCK_VOTE_NONE) {
            to_send |= UINT64_C(1) << i; /* i < n <= REDLOCK_MAX_NODES = 64 */
            r->outstanding++;
        }
    }
    /* Every node gets the same bytes: encode them once (the nodes copy them). A failure here
     * only leaves each node to encode, and to fail, on its own. */
    bool per_node = redlock__cmd_per_node(&r->cmd);
    bool shared = to_send != 0 && !c->wire_busy && !per_node &&
                  redlock__cmd_append(&r->cmd, false, &c->wire, &c->alloc) == 0;
    if (shared) {
        c->wire_busy = true;
        r->cmd.wire = c->wire.data;
        r->cmd.wire_len = c->wire.len;
    }
    for (unsigned i = 0; i < n; i++) {
        if ((to_send & (UINT64_C(1) << i)) == 0)
            continue;
        round_req *rr = &r->reqs[i];
        rr->round = r;
        rr->node = i;
        rr->req.cmd = &r->cmd;
        rr->req.cb = on_req_done;
        rr->req.sent_us = now;
        if (per_node)
            rr->req.grant_tag = i + 1;
        c->io->ops->send(c->io, i, &rr->req);
    }
    if (shared) {
        r->cmd.wire = NULL;
        c->wire.len = 0;
        redlock__buf_trim(&c->wire, &c->alloc); /* a huge set's command does not stay */
        c->wire_busy = false;
    }
    round_settle(r, round_check(r));
}

/* A release round of a waiter's lock also takes the waiter out of the resource's queue. */
static void round_leave_queue(round *r)
{
    r->cmd.leave = true;
}

/* Release the lock's key on every node; nobody waits for the answers. Written after the
 * acquire on each ordered connection, so it runs after it even where the SET's reply is still
 * on its way. leave: the waiter is done (it holds nothing and waits no more), so it leaves the
 * resource's queue too. tell: a holder's release, which wakes the waiters; the release of an
 * attempt that lost (or was canceled) wakes nobody: it freed nothing that was anybody's turn. */
static void release_everywhere(redlock_client *c, redlock_lock *lock, bool leave, bool tell)
{
    round *r = round_new(c, NULL, lock, REDLOCK__CMD_RELEASE, lock->ttl_ms, false);
    if (r == NULL)
        return; /* out of memory: the keys expire with their ttl, a queue place with its own */
    r->cmd.tell = tell;
    if (leave)
        round_leave_queue(r);
    if (c->closing) {
        r->close_wait = true; /* the close waits for its answers */
        c->close_rounds++;
    }
    round_send(r, true);
}

/* ---- operations ------------------------------------------------------------------------------ */

static void op_hold_round(op *o, round *r)
{
    if (o->round == r)
        return;
    if (o->round != NULL) {
        round *old = o->round;
        old->held = false;
        if (old->op == o)
            old->op = NULL;
        round_maybe_free(old);
    }
    o->round = r;
    if (r != NULL)
        r->held = true;
}

/* An operation's memory, kept for the next one (client.h, spare_ops) or freed. */
static void op_free(op *o)
{
    redlock_client *c = o->client;
    redlock__free(&c->alloc, o->w);
    o->w = NULL;
    c->live_ops--;
    redlock__spares_put(&c->spare_ops, &c->alloc, o,
                        REDLOCK__MAX(c->live_ops, REDLOCK__SPARES_KEPT));
}

static void on_deliver_timer(redlock__timer *t)
{
    op_deliver(REDLOCK__CONTAINER_OF(t, op, timer));
}

/* The operation's outcome is known: deliver it now, or on the next loop turn when inside a
 * public call, or at close. */
static void op_complete(op *o, int status)
{
    redlock_client *c = o->client;
    o->status = status;
    o->state = OP_DECIDED;
    if (c->closing)
        return; /* delivered by the close, with REDLOCK_ECANCELED */
    if (c->api_depth > 0) {
        redlock__client_timer_start(c, &o->timer, 0, on_deliver_timer);
        return;
    }
    op_deliver(o);
}

/* Stop watching the first n of the lock's keys. */
static void lock_unwatch(redlock_client *c, const redlock_lock *lock, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        size_t len;
        const char *key = redlock__lock_key(lock, i, &len);
        c->io->ops->watch(c->io, key, len, false);
    }
}

/* Watch every key of the lock (a set's waiter is woken by the release of any of them). Returns
 * 0, or REDLOCK_ENOMEM with nothing watched. */
static int lock_watch(redlock_client *c, const redlock_lock *lock)
{
    for (unsigned i = 0; i <= lock->n_more; i++) {
        size_t len;
        const char *key = redlock__lock_key(lock, i, &len);
        if (c->io->ops->watch(c->io, key, len, true) != 0) {
            lock_unwatch(c, lock, i);
            return REDLOCK_ENOMEM;
        }
    }
    return 0;
}

static void op_deliver(op *o)
{
    redlock_client *c = o->client;
    redlock__list_remove(&o->link);
    redlock__client_timer_stop(c, &o->timer);
    redlock_lock *lock = o->lock;
    round *r = o->round;

    redlock_node_result none[1];
    redlock_result res;
    memset(&res, 0, sizeof(res));
    res.status = o->status;
    res.n_nodes = c->n_nodes;
    res.attempts = o->attempts;
    uint64_t now = redlock__client_now(c);
    res.elapsed_us = now > o->call_us ? now - o->call_us : 0;
    res.fence = o->kind != OP_INSPECT && o->status == 0 ? lock->fence : 0;
    if (r != NULL) {
        res.votes_yes = r->q.votes_yes;
        res.votes_no = r->q.votes_no;
        res.votes_error = r->q.votes_error;
        res.votes_timeout = r->q.votes_timeout;
        res.nodes = r->results;
    } else {
        memset(none, 0, sizeof(none));
        res.nodes = none;
        res.n_nodes = 0;
    }

    redlock_lock *handed = lock;
    if (o->kind == OP_LOCK) {
        if (o->status == 0) {
            lock->user_owned = true;
            redlock__lock_ref(lock);
        } else {
            /* Won but canceled by a close before delivery: the caller never sees this lock, so
             * its auto-extension must not report on it either. */
            redlock__auto_stop(lock);
            handed = NULL;
        }
    } else if (o->kind == OP_INSPECT) {
        handed = NULL;
    }
    o->cb(handed, o->status, &res, o->data);

    op_hold_round(o, NULL);
    /* A closing client's io drops every watch itself. */
    if (o->w != NULL && o->w->watching && !c->closing) {
        lock_unwatch(c, lock, lock->n_more + 1);
        size_t len;
        const char *channel;
        if (lock->channel_watched) {
            channel = own_channel(lock, &len);
            c->io->ops->watch(c->io, channel, len, false);
        }
        if (lock->queue_channel_watched) {
            channel = queue_channel(lock, &len);
            c->io->ops->watch(c->io, channel, len, false);
        }
    }
    lock->channel_watched = false;
    lock->queue_channel_watched = false;
    redlock__lock_unref(lock);
    op_free(o);
}

static bool op_may_retry(op *o, uint64_t now)
{
    if (o->wait_deadline_us != 0)
        return now < o->wait_deadline_us;
    if (o->retries_left > 0) {
        o->retries_left--;
        return true;
    }
    return false;
}

static uint64_t retry_delay_us(redlock_client *c)
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

static int op_start_round(op *o);

/* A woken waiter retries at once (on the loop's next turn) the first time. Each of its attempts
 * that then loses in a split vote (some nodes said yes: other waiters tried at the same time)
 * doubles the window its next wake-up is drawn from, in whole milliseconds (the loop's timers
 * have no finer grain): 0 or 1 ms, then up to 0..3 ms, never beyond the retry delay. So
 * the waiters of many clients, all woken by one release, spread out instead of splitting the
 * votes again and again (the backoff of a shared medium). */
#define NOTIFY_MAX_DOUBLINGS 2

/* A waiter that heard a grant from fewer nodes than a quorum waits this long for the others'
 * (they follow within a round trip, as a rule) before it runs a round of its own. */
#define GRANT_GRACE_US 1000

static uint64_t notify_jitter_us(redlock_client *c, const op *o)
{
    uint64_t window_ms = (uint64_t)1
                         << REDLOCK__MIN(o->w->collisions, (unsigned)NOTIFY_MAX_DOUBLINGS);
    if (c->opts.retry_delay_ms > 0 && window_ms > c->opts.retry_delay_ms)
        window_ms = c->opts.retry_delay_ms;
    if (window_ms <= 1)
        return 0;
    uint64_t r = 0;
    if (c->io->ops->random(c->io, &r, sizeof(r)) != 0)
        r = redlock__client_now(c);
    return (r % window_ms) * 1000;
}

static void on_retry_timer(redlock__timer *t)
{
    op *o = REDLOCK__CONTAINER_OF(t, op, timer);
    o->state = OP_RUNNING;
    if (o->w != NULL)
        o->w->woken = false;
    int rc = op_start_round(o);
    if (rc != 0)
        op_complete(o, rc);
}

static void hex(char *out, const unsigned char *in, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

/* A fresh token: 128 bits from the io's CSPRNG, as 32 hex digits. */
static int new_token(redlock_client *c, redlock_lock *lock)
{
    unsigned char raw[REDLOCK__TOKEN_BYTES];
    char text[2 * REDLOCK__TOKEN_BYTES + 1];
    int rc = c->io->ops->random(c->io, raw, sizeof(raw));
    if (rc != 0)
        return REDLOCK_ENOMEM;
    hex(text, raw, sizeof(raw));
    return redlock__lock_set_token(lock, text, 2 * sizeof(raw)); /* inline: never fails */
}

/* The attempt's last round was won (the acquire, or a fenced acquire's commit): the lock is
 * granted. Returns 0, or why it is not worth handing out after all. */
static int lock_grant(op *o, round *r)
{
    redlock_lock *lock = o->lock;
    uint64_t validity = redlock_round_validity_us(&r->q);
    lock->validity_ms = validity / 1000;
    lock->deadline_us = r->q.decided_us + validity;
    lock->won_start_us = r->q.start_us; /* a commit round's is its acquire's */
    redlock__recheck_votes(lock, &r->q, true);
    lock->fence = redlock_round_fence(&r->q);
    /* Auto-extension starts before the caller hears of the lock, so no window is left
     * unguarded. Its options were checked by redlock_acquire; what is left to fail is a
     * validity already gone, and then the lock is not worth handing out. */
    int rc = o->has_auto ? redlock_auto_extend(lock, &o->auto_opts, o->lost_cb, o->lost_data) : 0;
    if (rc == 0) {
        op_complete(o, 0);
        return 0;
    }
    lock->fence = 0;
    return rc;
}

/* A fenced acquire round was won: commit its fence on every node (docs/algorithm.md). The lock
 * is granted only if the commit round is won too. Returns 0, or REDLOCK_ENOMEM. */
static int commit_start(op *o, round *acquire)
{
    redlock_client *c = o->client;
    round *r = round_new(c, o, o->lock, REDLOCK__CMD_COMMIT, o->ttl_ms, false);
    if (r == NULL)
        return REDLOCK_ENOMEM;
    int rc = redlock_round_commit_init(&r->q, &acquire->q, o->lock->fence_commit);
    (void)rc; /* acquire is a won fenced round; fence_commit was checked by redlock_acquire */
    uint64_t fence = redlock_round_fence(&r->q);
    r->cmd.fence = fence;
    uint64_t now = redlock__client_now(c);
    for (unsigned i = 0; i < c->n_nodes; i++) {
        const redlock_node_result *a = &acquire->results[i];
        /* The commit round's result is the one the caller sees: it keeps what each node's
         * counter was when its key was set. */
        r->results[i].fence = a->fence;
        /* A yes that read fence - 1 raised its counter to the fence in the script that set the
         * key, while the key stood: what the commit would do there, done. Its ack counts now. */
        if (redlock_round_node_vote(&acquire->q, i) == REDLOCK_VOTE_YES && a->fence + 1 == fence) {
            r->results[i].vote = REDLOCK_VOTE_YES;
            r->results[i].latency_us = a->latency_us;
            redlock_round_vote(&r->q, i, REDLOCK_VOTE_YES, now);
        }
    }
    op_hold_round(o, r);
    round_send(r, false); /* q was set up from the acquire round */
    return 0;
}

static bool grant_check(op *o);

/* Forget the grants heard so far: they were of keys a release deletes, or of a token given up. */
static void waiter_forget_grants(waiter *w, unsigned n_nodes)
{
    w->granted = 0;
    memset(w->nodes, 0, n_nodes * sizeof(w->nodes[0]));
    if (w->key_bits != NULL)
        memset(w->key_bits, 0, n_nodes * ((w->n_keys + 7) / 8));
}

/* Whether a waiter's lost attempt r may keep its token: no node said yes or timed out, so none
 * holds its key (an error is a command that was not run, or a script that stopped before any
 * write), and nothing is released. Nodes yet to answer may still say yes: on_req_done. */
static bool attempt_clean(const op *o, const round *r, int status, bool retry)
{
    return retry && o->lock->queued && status == REDLOCK_EBUSY && r != NULL &&
           r->q.votes_yes == 0 && r->q.votes_timeout == 0;
}

/* How long until a quorum of the nodes of a waiter's lost attempt r could let it in without a
 * release (their keys' holders' ttls, or the deadlines of the heads before it, run out): the
 * quorum-th shortest of the waits they gave (a node that said yes had let it in: 0), or
 * UINT64_MAX when fewer than a quorum said. */
static uint64_t attempt_wait_us(const round *r)
{
    int64_t waits[REDLOCK_MAX_NODES];
    unsigned n = 0;
    for (unsigned i = 0; i < r->client->n_nodes; i++) {
        redlock_vote vote = redlock_round_node_vote(&r->q, i);
        if (vote == REDLOCK_VOTE_YES)
            waits[n++] = 0;
        else if (vote == REDLOCK_VOTE_NO && r->reqs[i].wait_ms >= 0)
            waits[n++] = r->reqs[i].wait_ms;
    }
    if (n < r->q.quorum)
        return UINT64_MAX;
    for (unsigned i = 1; i < n; i++) { /* at most 64: insertion sort */
        int64_t v = waits[i];
        unsigned j = i;
        for (; j > 0 && waits[j - 1] > v; j--)
            waits[j] = waits[j - 1];
        waits[j] = v;
    }
    return (uint64_t)waits[r->q.quorum - 1] * 1000;
}

/* When a waiter's lost attempt retries: at once (on a short jitter) if a notification came while
 * it was out; else after the retry delay, or as soon as the nodes say a quorum of them could let
 * it in (attempt_wait_us: the holder's keys run out), whichever is sooner, plus a millisecond of
 * the servers' clock; never after the wait's deadline. */
static uint64_t retry_due_us(op *o, uint64_t now)
{
    redlock_client *c = o->client;
    waiter *w = o->w;
    uint64_t delay = w != NULL && w->notified ? notify_jitter_us(c, o) : retry_delay_us(c);
    const round *r = o->round;
    if (w != NULL && !w->notified && r != NULL && r->cmd.queued) {
        uint64_t wait = attempt_wait_us(r);
        if (wait < delay && delay - wait > 1000)
            delay = wait + 1000;
    }
    if (w != NULL)
        w->notified = false;
    uint64_t due = now + delay;
    return o->wait_deadline_us != 0 && due > o->wait_deadline_us ? o->wait_deadline_us : due;
}

/* Release the keys of o's lost attempt everywhere (the release of a lost attempt: it wakes
 * nobody; leave: o waits no more) and forget what grants told of them; then o's next attempt
 * gets a token of its own: the release of a lost attempt can reach a node late (written on a
 * connection that was then dropped, it may be applied after the next attempt's SET on the new
 * one); with the same token it would delete the winner's key. Returns 0, or the error of a token
 * that could not be made (o then waits no more: it has left the queues). */
static int attempt_release(op *o, uint64_t now, bool leave, bool new_token_wanted)
{
    redlock_client *c = o->client;
    redlock_lock *lock = o->lock;
    if (o->w != NULL) {
        o->w->token_kept = false;
        waiter_forget_grants(o->w, c->n_nodes);
        o->w->grant_after_us = now;
    }
    release_everywhere(c, lock, leave, false);
    if (lock->caller_token || !new_token_wanted)
        return 0;
    int rc = new_token(c, lock);
    if (rc != 0 && !leave) /* it waits no more: out of the queue too (nothing to delete) */
        release_everywhere(c, lock, true, false);
    return rc;
}

/* The waiter o, asleep after an attempt that lost keeping its token, heard a late yes to it: the
 * node set its key after the round was decided, so the attempt did not leave nothing behind
 * after all. It is released as any lost attempt that held keys (o sleeps on as planned). */
static void attempt_late_yes(op *o)
{
    uint64_t now = redlock__client_now(o->client);
    int rc = attempt_release(o, now, false, true);
    if (rc != 0) {
        redlock__client_timer_stop(o->client, &o->timer);
        op_complete(o, rc);
    }
}

/* The attempt is lost (status): release its key everywhere (unless it keeps its token), then
 * retry or give up. */
static void lock_attempt_lost(op *o, int status)
{
    redlock_client *c = o->client;
    waiter *w = o->w;
    uint64_t now = redlock__client_now(c);
    bool retry = !c->closing && op_may_retry(o, now);
    bool kept = w != NULL && attempt_clean(o, o->round, status, retry);
    if (w != NULL)
        w->token_kept = kept;
    if (kept) {
        if (grant_check(o)) /* grants heard while the attempt was out: a quorum, won */
            return;
    } else {
        int rc = attempt_release(o, now, !retry, status != REDLOCK_ENOMEM);
        if (rc != 0) {
            op_complete(o, rc);
            return;
        }
    }
    if (retry) {
        /* Others took keys while this attempt was out (a split vote): spread the next wake-ups. */
        if (w != NULL && w->watching && o->round != NULL && o->round->q.votes_yes > 0)
            w->collisions++;
        o->state = OP_RETRYING;
        redlock__client_timer_start(c, &o->timer, retry_due_us(o, now), on_retry_timer);
        return;
    }
    op_complete(o, status);
}

/* An acquire's round (the acquire round, or a fenced acquire's commit round) is decided. A lost
 * commit is a lost attempt like a lost acquire: released everywhere, retried per policy. */
static void lock_round_done(op *o, round *r)
{
    int status = redlock_round_status(&r->q);
    /* An attempt counts once: a won fenced acquire round is counted with its commit round. */
    if (status != 0 || r->cmd.kind != REDLOCK__CMD_ACQUIRE_FENCED)
        redlock__stats_round(o->client, r->cmd.kind, status, &r->q, r->results);
    if (status == 0)
        status = r->cmd.kind == REDLOCK__CMD_ACQUIRE_FENCED ? commit_start(o, r) : lock_grant(o, r);
    if (status != 0)
        lock_attempt_lost(o, status);
}

static void extend_round_done(op *o, round *r)
{
    redlock_lock *lock = o->lock;
    int status = redlock_round_status(&r->q);
    /* Won too late: the quorum renewed keys that had already run out of validity. */
    if (status == 0 && r->q.decided_us >= o->prev_deadline_us)
        status = REDLOCK_EEXPIRED;
    if (status == REDLOCK_EBUSY)
        status = REDLOCK_ELOST;
    /* A retake that won after another extend of this lock found it lost (two rounds in flight at
     * once) may have set keys again over a gap: not a continuous hold, so not a win. */
    if (status == 0 && (o->flags & REDLOCK_EXTEND_RETAKE) != 0 && lock->lapsed)
        status = REDLOCK_ELOST;
    if (status == REDLOCK_ELOST)
        lock->lapsed = true; /* the hold may have had a gap: no retake from now on */
    redlock__stats_round(o->client, REDLOCK__CMD_EXTEND, status, &r->q, r->results);
    redlock__recheck_votes(lock, &r->q, status == 0);
    if (status == 0) {
        uint64_t validity = redlock_round_validity_us(&r->q);
        lock->ttl_ms = o->ttl_ms;
        lock->validity_ms = validity / 1000;
        lock->deadline_us = r->q.decided_us + validity;
        lock->won_start_us = r->q.start_us;
        /* From here the deadline is known and the hold continuous: a plain compare-and-pexpire
         * wins only where the token still stands, and a retake runs only on a lock known to be. */
        lock->attached = false;
        lock->lapsed = false;
        /* A win of a round started before "lost" was said (the auto-extension's, in flight)
         * renews the keys but does not take the word back; the caller's own extend since does. */
        if (o->after_lost)
            lock->lost = false;
        redlock__auto_moved(lock); /* a caller's own extend moves the auto-extension's plan */
    }
    op_complete(o, status);
}

/* A release speaks for the whole hold, from the acquire to the release, not only for its own
 * round. REDLOCK_ELOST when the hold is known to have lapsed: the release was called after the
 * validity ran out (a key that outlived it proves nothing: a retake or SET still on the wire can
 * set it again after a gap), or an extend found the lock lost and none has won since (the
 * library said so already), or more than N - quorum nodes said "not ours" (even if every node
 * that did not answer had held it, fewer than a quorum did). 0 when a quorum still held the token
 * and deleted it. Anything between (say yes 2, no 1, error 2 of 5) cannot be told apart:
 * REDLOCK_ENOQUORUM. */
static int release_status(const op *o, const redlock_round *q)
{
    if (o->late || o->lock->lapsed)
        return REDLOCK_ELOST;
    if (q->votes_yes >= q->quorum)
        return 0;
    if (q->votes_no > q->n_nodes - q->quorum)
        return REDLOCK_ELOST;
    return REDLOCK_ENOQUORUM;
}

/* Whether a release's status (release_status) is known, whatever the nodes still out answer: a
 * quorum deleted the token (0), or more than N - quorum said "not ours" (REDLOCK_ELOST), or
 * neither can happen any more (REDLOCK_ENOQUORUM). A hold known to have lapsed is REDLOCK_ELOST
 * whatever the nodes say; it is reported once a quorum of them answered, so that its result
 * says what they deleted. With the client's release_waits_all, only when every node has answered
 * or timed out. */
static bool release_decided(const op *o, const round *r, int *status)
{
    const redlock_round *q = &r->q;
    unsigned out = r->outstanding;
    if (out > 0 && o->client->opts.release_waits_all)
        return false;
    *status = release_status(o, q);
    if (out == 0)
        return true;
    if (o->late || o->lock->lapsed)
        return q->n_nodes - out >= q->quorum;
    if (*status != REDLOCK_ENOQUORUM)
        return true;
    /* No quorum of yes nor of no yet: decided only if neither is in reach any more. */
    return q->votes_yes + out < q->quorum && q->votes_no + out <= q->n_nodes - q->quorum;
}

/* An inspect is a picture of the nodes: it succeeds when a quorum answered at all. */
static int inspect_status(const redlock_round *q)
{
    return q->votes_yes + q->votes_no >= q->quorum ? 0 : REDLOCK_ENOQUORUM;
}

/* The round was sent, or got a vote: its operation acts if it can. Returns whether the round is
 * done (acted on, or nobody listens), or waits for more votes. Runs in ROUND_SENDING or
 * ROUND_CHECKING, so nothing nested in the action frees the round. */
static bool round_check(round *r)
{
    op *o = r->op;
    if (o == NULL)
        return true;
    if (o->kind == OP_UNLOCK || o->kind == OP_INSPECT) {
        /* An inspect is a picture of every node: it waits for each answer or deadline. A
         * release is decided as soon as its status is (release_decided); the other nodes'
         * deletes go on (a closing client waits for them). */
        int status = 0;
        if (o->kind == OP_INSPECT ? r->outstanding > 0 : !release_decided(o, r, &status))
            return false;
        if (o->kind == OP_INSPECT)
            status = inspect_status(&r->q);
        redlock__stats_round(o->client, r->cmd.kind, status, &r->q, r->results);
        op_complete(o, status);
        return true;
    }
    if (redlock_round_decision(&r->q) == REDLOCK_ROUND_PENDING)
        return false;
    if (o->client->closing)
        op_complete(o, REDLOCK_ECANCELED);
    else if (o->kind == OP_LOCK)
        lock_round_done(o, r);
    else
        extend_round_done(o, r);
    return true;
}

static int op_start_round(op *o)
{
    redlock_client *c = o->client;
    static const redlock__cmd_kind kinds[] = {
        [OP_LOCK] = REDLOCK__CMD_ACQUIRE,
        [OP_EXTEND] = REDLOCK__CMD_EXTEND,
        [OP_UNLOCK] = REDLOCK__CMD_RELEASE,
        [OP_INSPECT] = REDLOCK__CMD_INSPECT,
    };
    redlock__cmd_kind kind = kinds[o->kind];
    if (o->kind == OP_LOCK && o->lock->fencing)
        kind = REDLOCK__CMD_ACQUIRE_FENCED; /* a plain acquire stays a plain SET NX PX */
    round *r = round_new(c, o, o->lock, kind, o->ttl_ms, (o->flags & REDLOCK_EXTEND_RETAKE) != 0);
    if (r == NULL)
        return REDLOCK_ENOMEM;
    if (o->kind == OP_UNLOCK) {
        round_leave_queue(r); /* the holder is done with the resource */
        r->cmd.tell = true;
    }
    o->attempts++;
    o->state = OP_RUNNING;
    op_hold_round(o, r);
    round_send(r, true);
    return 0;
}

static op *op_new(redlock_client *c, op_kind kind, redlock_lock *lock, redlock_cb cb, void *data)
{
    op *o = redlock__spares_take(&c->spare_ops);
    if (o == NULL)
        o = redlock__malloc(&c->alloc, sizeof(*o));
    if (o == NULL)
        return NULL;
    c->live_ops++;
    memset(o, 0, sizeof(*o));
    o->kind = kind;
    o->cancelable = true;
    o->client = c;
    o->lock = lock;
    o->cb = cb;
    o->data = data;
    o->call_us = redlock__client_now(c);
    redlock__list_push(&c->ops, &o->link);
    return o;
}

/* Start o's first round from inside a public call; a failure to start leaves nothing behind. */
static int op_launch(op *o)
{
    redlock_client *c = o->client;
    c->api_depth++;
    int rc = op_start_round(o);
    c->api_depth--;
    if (rc != 0) {
        redlock__list_remove(&o->link);
        redlock__lock_unref(o->lock);
        op_free(o);
        return redlock__client_error(c, rc, "out of memory");
    }
    return 0;
}

/* ---- cancel, and the close's releases ---------------------------------------------------------
 */

/* Cancel o, which has not been delivered: it will be, with REDLOCK_ECANCELED. An acquire's attempt
 * in flight, or its lock won but not yet handed out, is released on every node (written after the
 * attempt's commands on each ordered connection). A canceled extend's keys may have been renewed
 * on some nodes: the lock keeps the validity it had, which is the safe side. A canceled release's
 * commands still run. */
static void op_cancel(op *o)
{
    redlock_client *c = o->client;
    redlock_lock *lock = o->lock;
    switch (o->state) {
    case OP_DECIDED:                                /* its delivery is due already */
        if (o->kind == OP_LOCK && o->status == 0) { /* won: a holder's release */
            redlock__auto_stop(lock);
            release_everywhere(c, lock, true, true);
        }
        o->status = REDLOCK_ECANCELED;
        return;
    case OP_RETRYING: /* the last attempt was released when it was lost, or kept its token */
        redlock__client_timer_stop(c, &o->timer);
        if (lock->queued) /* its place in the queue, and what a release granted it */
            release_everywhere(c, lock, true, false);
        break;
    case OP_RUNNING: {
        round *r = o->round;
        r->op = NULL; /* its votes are counted, and nobody acts on them */
        if (r->state == ROUND_OPEN)
            r->state = ROUND_DONE;
        if (o->kind == OP_LOCK)
            release_everywhere(c, lock, true, false);
        break;
    }
    }
    op_complete(o, REDLOCK_ECANCELED);
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
        op *o = REDLOCK__CONTAINER_OF(it, op, link);
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

static bool same_bytes(const char *a, size_t a_len, const char *b, size_t b_len)
{
    return a_len == b_len && memcmp(a, b, a_len) == 0;
}

/* The waiter of this client that is id (id_len bytes) in the queue of of's first key, or NULL. */
static op *queue_head_op(redlock_client *c, const redlock_lock *of, const char *id, size_t id_len)
{
    for (redlock__list *it = c->ops.next; it != &c->ops; it = it->next) {
        op *o = REDLOCK__CONTAINER_OF(it, op, link);
        if (o->w != NULL && o->w->watching && o->state != OP_DECIDED && o->lock->queued &&
            same_bytes(o->lock->waiter, o->lock->waiter_len, id, id_len) &&
            same_bytes(o->lock->key, o->lock->key_len, of->key, of->key_len))
            return o;
    }
    return NULL;
}

/* Wake o for a notification: after delay_us if it sleeps (the first notification sets its wake-up:
 * each node sends one), or, if its attempt is in flight, retry at once should that attempt
 * lose. */
static void op_wake(redlock_client *c, op *o, uint64_t delay_us)
{
    waiter *w = o->w;
    if (o->state == OP_RUNNING) {
        w->notified = true;
    } else if (!w->woken) {
        w->woken = true;
        uint64_t due = redlock__client_now(c) + delay_us;
        if (due > o->wait_deadline_us)
            due = o->wait_deadline_us;
        redlock__client_timer_start(c, &o->timer, due, on_retry_timer);
    }
}

/* The grants the waiter o heard, from each node of w->granted, won: the lock is o's, as if an
 * attempt sent when the oldest of the attempts they answer was sent had won on those nodes (each
 * node set the keys after that attempt reached it, with the attempt's ttl): the validity counts
 * from that send, never from the grant. A fenced lock's grants carry the counters they read and
 * raised, as a fenced acquire's yes votes do, and its fence is committed as after such a round
 * (commit_start). Not when that attempt is more than half a ttl old (the lock would have little
 * validity left), nor when less than the client's min_validity_ms is left: then o retries at once,
 * and its round renews the granted keys (lib/lua/acquire_queued.lua). Returns whether o is
 * decided (won, or its commit round started). */
static bool grant_win(op *o)
{
    redlock_client *c = o->client;
    redlock_lock *lock = o->lock;
    waiter *w = o->w;
    uint64_t now = redlock__client_now(c);
    uint64_t oldest = UINT64_MAX;
    for (unsigned i = 0; i < c->n_nodes; i++) {
        if ((w->granted & (UINT64_C(1) << i)) != 0 && w->nodes[i].oldest_us < oldest)
            oldest = w->nodes[i].oldest_us;
    }
    bool fresh = now - oldest <= o->ttl_ms * 1000 / 2;
    redlock__cmd_kind kind = lock->fencing ? REDLOCK__CMD_ACQUIRE_FENCED : REDLOCK__CMD_ACQUIRE;
    round *r = fresh ? round_new(c, o, lock, kind, o->ttl_ms, false) : NULL;
    if (r != NULL) {
        int rc = redlock_round_init(&r->q, c->n_nodes, o->ttl_ms, c->opts.drift_factor,
                                    c->opts.min_validity_ms, oldest);
        if (rc == 0 && lock->fencing)
            rc = redlock_round_fencing(&r->q);
        for (unsigned i = 0; rc == 0 && i < c->n_nodes; i++) {
            if ((w->granted & (UINT64_C(1) << i)) == 0)
                continue;
            r->results[i].vote = REDLOCK_VOTE_YES;
            r->results[i].latency_us = now - w->nodes[i].oldest_us;
            r->results[i].fence = lock->fencing ? w->nodes[i].counter : 0;
            if (lock->fencing)
                redlock_round_vote_counter(&r->q, i, REDLOCK_VOTE_YES, w->nodes[i].counter, now);
            else
                redlock_round_vote(&r->q, i, REDLOCK_VOTE_YES, now);
        }
        r->state = ROUND_DONE; /* nothing to send: the nodes have acted */
        op_hold_round(o, r);
        int status = redlock_round_status(&r->q);
        if (status == 0 && lock->fencing) {
            /* The commit round runs now: o is an attempt in flight again. */
            redlock__client_timer_stop(c, &o->timer);
            o->state = OP_RUNNING;
            w->woken = false;
            status = commit_start(o, r);
        } else {
            redlock__stats_round(c, kind, status, &r->q, r->results);
            if (status == 0)
                status = lock_grant(o, r);
        }
        if (status == 0) {
            redlock__stats_granted(c);
            return true;
        }
    }
    waiter_forget_grants(w, c->n_nodes);
    w->woken = false; /* a sleeping waiter now, not after the grace */
    op_wake(c, o, 0); /* one whose attempt just lost retries at once */
    return false;
}

/* Whether o has heard of grants from a quorum of nodes, and if so won with them (grant_win). */
static bool grant_check(op *o)
{
    unsigned n = 0;
    for (uint64_t m = o->w->granted; m != 0; m &= m - 1)
        n++;
    return n >= o->client->n_nodes / 2 + 1 && grant_win(o);
}

/* The next field of a grant message: a decimal number up to the next ':' (or, empty_ok, an
 * empty one: *out 0, *empty true). Advances *p past the ':'. */
static bool grant_field(const char **p, const char *end, uint64_t *out, bool *empty)
{
    uint64_t v = 0;
    const char *s = *p;
    while (s < end && *s >= '0' && *s <= '9' && v < UINT64_MAX / 10)
        v = v * 10 + (uint64_t)(*s++ - '0');
    if (s == end || *s != ':' || (s == *p && empty == NULL))
        return false;
    if (empty != NULL)
        *empty = s == *p;
    *out = v;
    *p = s + 1;
    return true;
}

/* "g:<stamp>:<tag>:<j>:<full>:<counter>:<token>", a grant (lib/lua/release_queued.lua): node tag
 * (the index of the node whose connection sent the attempt) set key j of o's lock to token for
 * the attempt sent at stamp, with that attempt's ttl if full is 1, else only until o's place
 * deadline there; a fenced lock's counter is what the node's counter was before the grant raised
 * it. A grant counts as that node's yes whichever subscriber heard it (a server listed twice, a
 * cluster heard through two connections, a replica that forwards its master's messages: still one
 * node); one for an earlier token (released since), or a stamp that is not one of this token's
 * attempts, is ignored. */
static void op_granted(op *o, const char *message, size_t len)
{
    redlock_client *c = o->client;
    waiter *w = o->w;
    const char *p = message + 2, *end = message + len;
    uint64_t stamp, tag, key, full, counter;
    bool no_counter;
    if (!grant_field(&p, end, &stamp, NULL) || !grant_field(&p, end, &tag, NULL) ||
        !grant_field(&p, end, &key, NULL) || !grant_field(&p, end, &full, NULL) ||
        !grant_field(&p, end, &counter, &no_counter))
        return;
    const redlock_lock *lock = o->lock;
    if (!same_bytes(lock->token, lock->token_len, p, (size_t)(end - p)) ||
        stamp <= w->grant_after_us || stamp > w->grant_until_us || tag >= c->n_nodes ||
        key >= w->n_keys)
        return;
    bool as_asked = full == 1 && (lock->fencing ? !no_counter : no_counter);
    if (!as_asked) {
        /* Set only until o's place deadline there (or not as o's attempts asked): o claims the
         * keys with a round of its own at once, which renews them with its ttl. */
        op_wake(c, o, 0);
        return;
    }
    waiter_node *node = &w->nodes[tag];
    if (w->key_bits != NULL) {
        unsigned char *bits = w->key_bits + (size_t)tag * ((w->n_keys + 7) / 8);
        unsigned char bit = (unsigned char)(1u << (key % 8));
        if ((bits[key / 8] & bit) != 0)
            return; /* heard already */
        bits[key / 8] |= bit;
    } else if (node->keys > 0) {
        return;
    }
    if (node->keys == 0 || stamp < node->oldest_us)
        node->oldest_us = stamp;
    node->counter = counter;
    if (++node->keys == w->n_keys)
        w->granted |= UINT64_C(1) << tag;
    /* An attempt in flight claims the granted keys itself, and one that lost keeping its token
     * looks at the grants first (lock_attempt_lost). A sleeping waiter wins with a quorum, or
     * else waits a short grace for the other nodes' grants, which come right behind as a rule,
     * before it runs a round. */
    if (o->state == OP_RUNNING || !grant_check(o))
        op_wake(c, o, GRANT_GRACE_US);
}

/* Whether channel is o's own (its first key's queue name, ":" and its id), or that queue's. */
static bool is_own_channel(const op *o, const char *channel, size_t len)
{
    size_t own_len;
    const char *own = own_channel(o->lock, &own_len);
    return o->lock->channel_watched && same_bytes(own, own_len, channel, len);
}

static bool is_queue_channel(const op *o, const char *channel, size_t len)
{
    size_t queue_len;
    const char *queue = queue_channel(o->lock, &queue_len);
    return o->lock->queue_channel_watched && same_bytes(queue, queue_len, channel, len);
}

/* A node says a key was released, on one of three channels (lib/lua/release_queued.lua):
 *   - a waiter's own: a grant ("g:...", op_granted), or "w:<token>" when the release names it as
 *     the queue's next head without setting the key for it;
 *   - the waiter's queue's: "head:token", for a head that did not listen on its own channel yet;
 *   - the key's: a release with nobody queued, or of a lock taken outside the queue; the message
 *     is the token. It wakes the waiter of this client that has waited longest (c->ops is in
 *     start order); the others sleep on until the next release or their fallback retry.
 * Only holders' releases say anything: the release of a lost attempt wakes nobody. */
void redlock__ops_notified(redlock_client *c, unsigned node, const char *channel, size_t len,
                           const char *message, size_t message_len)
{
    (void)node; /* a grant names its node itself; a wake-up is the same from any */
    if (c->closing)
        return;
    for (redlock__list *it = c->ops.next; it != &c->ops; it = it->next) {
        op *o = REDLOCK__CONTAINER_OF(it, op, link);
        if (o->w == NULL || !o->w->watching || o->state == OP_DECIDED || !o->lock->queued)
            continue;
        if (is_own_channel(o, channel, len)) {
            if (message_len >= 2 && message[0] == 'g' && message[1] == ':')
                op_granted(o, message, message_len);
            else if (message_len >= 2 && message[0] == 'w' && message[1] == ':')
                op_wake(c, o, 0); /* the queue's designated head: no jitter */
            return;
        }
        if (is_queue_channel(o, channel, len)) {
            const char *colon = memchr(message, ':', message_len);
            op *head = colon != NULL ? queue_head_op(c, o->lock, message, (size_t)(colon - message))
                                     : NULL;
            if (head != NULL) /* else another client's waiter is next */
                op_wake(c, head, 0);
            return;
        }
    }
    for (redlock__list *it = c->ops.next; it != &c->ops; it = it->next) {
        op *o = REDLOCK__CONTAINER_OF(it, op, link);
        if (o->w == NULL || !o->w->watching || o->state == OP_DECIDED ||
            !redlock__lock_has_key(o->lock, channel, len))
            continue;
        op_wake(c, o, notify_jitter_us(c, o));
        return;
    }
}

void redlock__ops_close_waits(redlock_client *c)
{
    for (redlock__list *it = c->releases.next; it != &c->releases; it = it->next) {
        round *r = REDLOCK__CONTAINER_OF(it, round, release_link);
        if (r->outstanding > 0 && !r->close_wait) {
            r->close_wait = true;
            c->close_rounds++;
        }
    }
}

void redlock__ops_release_all(redlock_client *c)
{
    /* Acquires first: in flight, or won and not yet handed out (those locks are not the
     * caller's yet, so the walk over handles below does not see them). */
    for (redlock__list *it = c->ops.next; it != &c->ops; it = it->next) {
        op *o = REDLOCK__CONTAINER_OF(it, op, link);
        if (o->kind == OP_LOCK && (o->state != OP_DECIDED || o->status == 0))
            op_cancel(o);
    }
    /* Then every lock the caller holds a handle to and has not released. An attached handle
     * speaks for a hold that belongs to whoever acquired it (redlock extend in the CLI, say):
     * it is left alone. */
    for (redlock__list *it = c->locks.next; it != &c->locks; it = it->next) {
        redlock_lock *lock = REDLOCK__CONTAINER_OF(it, redlock_lock, link);
        if (lock->user_owned && !lock->released && !lock->attached)
            release_everywhere(c, lock, true, true);
    }
}

void redlock__ops_cancel_all(redlock_client *c)
{
    while (!redlock__list_empty(&c->ops)) {
        op *o = REDLOCK__CONTAINER_OF(c->ops.next, op, link);
        o->status = REDLOCK_ECANCELED;
        op_deliver(o);
    }
}

/* ---- public operations ----------------------------------------------------------------------- */

static int check_ttl(redlock_client *c, uint64_t ttl_ms)
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

/* What acquire and inspect check before anything is allocated. */
static int check_call(redlock_client *c, const void *resource, size_t len, redlock_cb cb)
{
    if (c == NULL)
        return REDLOCK_EINVAL;
    int rc = redlock__check_resource(c, resource, len);
    if (rc != 0)
        return rc;
    if (cb == NULL)
        return redlock__client_error(c, REDLOCK_EINVAL, "callback is NULL");
    return 0;
}

static void lock_opts_defaults(redlock_lock_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
    o->retry_count = -1;
}

void redlock_lock_opts_init_sized(redlock_lock_opts *o, size_t size)
{
    redlock_lock_opts defaults;
    lock_opts_defaults(&defaults);
    redlock__struct_init(o, size, &defaults, sizeof(defaults));
}

int redlock__lock_opts_in(redlock_lock_opts *dst, const redlock_lock_opts *src, char *err,
                          size_t err_len)
{
    lock_opts_defaults(dst);
    if (src == NULL)
        return 0;
    return redlock__struct_in(dst, sizeof(*dst), src, REDLOCK__LOCK_OPTS_MIN, "opts",
                              "redlock_lock_opts_init", err, err_len);
}

/* Make lock a waiter in its keys' queues: a random id, its place (now, on the wall clock: the
 * same number for every node, comparable between clients on machines whose clocks agree; one
 * place in every queue of a set), and its channels: its own (its first key's queue name, ":" and
 * its id), on which a release tells it alone that it is the next head or that a key was set for
 * it (a grant), and that queue's, where such a release names it when it did not listen on its
 * own yet. Without memory or randomness it waits outside the queues, as before. */
static void queue_join(redlock_client *c, redlock_lock *lock)
{
    unsigned char raw[REDLOCK__WAITER_BYTES];
    uv_timeval64_t tv = {0, 0};
    if (c->io->ops->random(c->io, raw, sizeof(raw)) != 0 ||
        (c->io->ops->wall_us == NULL && uv_gettimeofday(&tv) != 0))
        return;
    size_t queue_len = lock->key_len + REDLOCK__QUEUE_SUFFIX_LEN;
    size_t own_len = queue_len + 1 + 2 * sizeof(raw);
    char *names = redlock__malloc(&c->alloc, queue_len + 1 + own_len + 1);
    if (names == NULL)
        return;
    char *queue = names, *own = names + queue_len + 1;
    memcpy(queue, lock->key, lock->key_len);
    memcpy(queue + lock->key_len, REDLOCK__QUEUE_SUFFIX, REDLOCK__QUEUE_SUFFIX_LEN + 1);
    hex(lock->waiter, raw, sizeof(raw));
    lock->waiter_len = 2 * sizeof(raw);
    memcpy(own, queue, queue_len);
    own[queue_len] = ':';
    memcpy(own + queue_len + 1, lock->waiter, lock->waiter_len + 1);
    lock->channels = names;
    lock->place_us = c->io->ops->wall_us != NULL
                         ? c->io->ops->wall_us(c->io)
                         : (uint64_t)tv.tv_sec * 1000000 + (uint64_t)tv.tv_usec;
    lock->place_ttl_ms = place_ttl_ms(c);
    lock->queued = true;
    lock->queue_channel_watched = c->io->ops->watch(c->io, queue, queue_len, true) == 0;
    lock->channel_watched = c->io->ops->watch(c->io, own, own_len, true) == 0;
}

/* On a client with a cluster node, every key of one script must lie in one hash slot (the
 * cluster refuses it otherwise): the keys of a set, and a fenced lock's key and counter. The
 * library never renames keys (plain nodes keep theirs), so the caller gives the resources a hash
 * tag. Returns 0 or REDLOCK_EINVAL with a message. */
static int check_cluster_slots(redlock_client *c, const redlock_lock *lock, bool fencing)
{
    size_t len = 0;
    const char *key = redlock__lock_key(lock, 0, &len);
    unsigned slot = redlock__key_slot(key, len);
    for (unsigned i = 1; i < redlock_lock_resource_count(lock); i++) {
        size_t other_len = 0;
        const char *other = redlock__lock_key(lock, i, &other_len);
        if (redlock__key_slot(other, other_len) != slot)
            return redlock__client_error(
                c, REDLOCK_EINVAL,
                "resources 0 and %u lie in different hash slots of a cluster node: give them one "
                "hash tag, as in {orders}:a and {orders}:b (docs/cluster.md)",
                i);
    }
    size_t tag_start = 0, tag_len = 0;
    if (fencing && !redlock__key_hash_tag(key, len, &tag_start, &tag_len)) /* the counter's slot
                                                                                is the tag's */
        return redlock__client_error(
            c, REDLOCK_EINVAL,
            "a fenced lock on a cluster node needs a resource with a hash tag, as in "
            "{orders}, so that its counter (<resource>%s) lies in the same slot "
            "(docs/cluster.md)",
            REDLOCK__FENCE_SUFFIX);
    return 0;
}

/* Whether the queues of a waiter's keys lie in their keys' slot (always, without a cluster):
 * the queued scripts name them without declaring them (lib/lua/queue.lua). */
static bool queue_fits(const redlock_client *c, const redlock_lock *lock)
{
    for (unsigned i = 0; c->has_cluster && i <= lock->n_more; i++) {
        size_t len = 0, start = 0, tag_len = 0;
        const char *key = redlock__lock_key(lock, i, &len);
        if (!redlock__key_hash_tag(key, len, &start, &tag_len))
            return false;
    }
    return true;
}

/* The state of a waiting acquire of lock on c's nodes, or NULL without memory. */
static waiter *waiter_new(redlock_client *c, const redlock_lock *lock)
{
    unsigned n_keys = lock->n_more + 1;
    size_t bits = n_keys > 1 ? (size_t)c->n_nodes * ((n_keys + 7) / 8) : 0;
    size_t nodes = (size_t)c->n_nodes * sizeof(waiter_node);
    waiter *w = redlock__calloc(&c->alloc, 1, sizeof(*w) + nodes + bits);
    if (w == NULL)
        return NULL;
    w->n_keys = n_keys;
    w->nodes = (waiter_node *)(void *)(w + 1);
    w->key_bits = bits != 0 ? (unsigned char *)w->nodes + nodes : NULL;
    return w;
}

/* The checks of an acquire's or an inspect's resources: one (the messages of the calls for one
 * resource), or a set. */
static int check_set_call(redlock_client *c, const void *const *resources, const size_t *lens,
                          unsigned count, redlock_cb cb)
{
    if (count == 1 && resources != NULL && lens != NULL)
        return check_call(c, resources[0], lens[0], cb);
    if (c == NULL)
        return REDLOCK_EINVAL;
    int rc = redlock__check_resources(c, resources, lens, count);
    if (rc != 0)
        return rc;
    if (cb == NULL)
        return redlock__client_error(c, REDLOCK_EINVAL, "callback is NULL");
    return 0;
}

int redlock_acquire(redlock_client *c, const void *resource, size_t len, uint64_t ttl_ms,
                    const redlock_lock_opts *opts, redlock_cb cb, void *data)
{
    return redlock_acquire_multi(c, &resource, &len, 1, ttl_ms, opts, cb, data);
}

int redlock_acquire_multi(redlock_client *c, const void *const *resources, const size_t *lens,
                          unsigned count, uint64_t ttl_ms, const redlock_lock_opts *caller_opts,
                          redlock_cb cb, void *data)
{
    int rc = check_set_call(c, resources, lens, count, cb);
    if (rc != 0)
        return rc;
    if (ttl_ms == 0)
        ttl_ms = c->opts.ttl_ms;
    rc = check_ttl(c, ttl_ms);
    if (rc != 0)
        return rc;
    /* The caller's structs are read once, by their size (abi.h); only the copies are used. */
    redlock_lock_opts lock_opts;
    redlock_auto_opts auto_opts;
    char why[256];
    rc = redlock__lock_opts_in(&lock_opts, caller_opts, why, sizeof(why));
    if (rc == 0 && lock_opts.auto_extend != NULL)
        rc = redlock__auto_opts_in(&auto_opts, lock_opts.auto_extend, why, sizeof(why));
    if (rc != 0)
        return redlock__client_error(c, rc, "%s", why);
    const redlock_lock_opts *opts = &lock_opts;
    if (opts->token != NULL && (opts->token_len == 0 || opts->token_len > REDLOCK_TOKEN_MAX))
        return redlock__client_error(c, REDLOCK_EINVAL, "token length must be 1..%d",
                                     REDLOCK_TOKEN_MAX);
    if (opts->retry_count < -1)
        return redlock__client_error(c, REDLOCK_EINVAL, "retry_count must be >= -1");
    if (opts->wait_ms > REDLOCK_TTL_MAX_MS)
        return redlock__client_error(c, REDLOCK_EINVAL, "wait_ms is out of range");
    unsigned quorum = c->n_nodes / 2 + 1;
    if (opts->fencing && count > 1)
        return redlock__client_error(c, REDLOCK_EINVAL,
                                     "fencing is for one resource: a lock on %u resources has no "
                                     "fence (take a fenced lock per resource that needs one)",
                                     count);
    if (opts->fence_commit != 0 && !opts->fencing)
        return redlock__client_error(c, REDLOCK_EINVAL, "fence_commit is set without fencing");
    if (opts->fence_commit != 0 && (opts->fence_commit < quorum || opts->fence_commit > c->n_nodes))
        return redlock__client_error(c, REDLOCK_EINVAL,
                                     "fence_commit %u is out of range %u..%u (the quorum..the "
                                     "number of nodes)",
                                     opts->fence_commit, quorum, c->n_nodes);
    if (opts->auto_extend != NULL) {
        rc = redlock__auto_check(c, &auto_opts, ttl_ms, opts->lost_cb);
        if (rc != 0)
            return rc;
    }

    redlock_lock *lock = redlock__lock_new_set(c, resources, lens, count);
    if (lock == NULL)
        return redlock__client_error(c, REDLOCK_ENOMEM, "out of memory");
    if (c->has_cluster && (rc = check_cluster_slots(c, lock, opts->fencing)) != 0) {
        redlock__lock_unref(lock);
        return rc;
    }
    lock->ttl_ms = ttl_ms;
    lock->fencing = opts->fencing;
    lock->fence_commit = opts->fence_commit;
    if (opts->token != NULL) {
        if ((rc = redlock__lock_set_token(lock, opts->token, opts->token_len)) != 0) {
            redlock__lock_unref(lock);
            return redlock__client_error(c, rc, "out of memory");
        }
        lock->caller_token = true;
    } else if ((rc = new_token(c, lock)) != 0) {
        redlock__lock_unref(lock);
        return redlock__client_error(c, REDLOCK_ENOMEM, "no randomness for the token");
    }

    op *o = op_new(c, OP_LOCK, lock, cb, data);
    if (o == NULL) {
        redlock__lock_unref(lock);
        return redlock__client_error(c, REDLOCK_ENOMEM, "out of memory");
    }
    o->ttl_ms = ttl_ms;
    o->retries_left = opts->retry_count >= 0 ? opts->retry_count : c->opts.retry_count;
    if (opts->wait_ms > 0) {
        o->wait_deadline_us = o->call_us + opts->wait_ms * 1000;
        o->w = waiter_new(c, lock);
        if (o->w == NULL) {
            redlock__list_remove(&o->link);
            redlock__lock_unref(lock);
            op_free(o);
            return redlock__client_error(c, REDLOCK_ENOMEM, "out of memory");
        }
        /* Before the first attempt, so a release during it is heard. Without memory for it the
         * waiter only polls. */
        if (!c->opts.no_notify && c->io->ops->watch != NULL && lock_watch(c, lock) == 0)
            o->w->watching = true;
        /* Fair turns, in every key's queue (plain, fenced and sets alike). */
        if (o->w->watching && queue_fits(c, lock))
            queue_join(c, lock);
    }
    if (opts->auto_extend != NULL) {
        o->has_auto = true;
        o->auto_opts = auto_opts;
        o->lost_cb = opts->lost_cb;
        o->lost_data = opts->lost_data;
    }
    return op_launch(o); /* the op holds the lock's first reference */
}

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

int redlock__check_retake(redlock_lock *lock)
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
    if ((flags & REDLOCK_EXTEND_RETAKE) != 0 && (rc = redlock__check_retake(lock)) != 0)
        return rc;
    if (ttl_ms == 0)
        ttl_ms = lock->ttl_ms;
    rc = check_ttl(c, ttl_ms);
    if (rc != 0)
        return rc;
    uint64_t now = redlock__client_now(c);
    if (now >= lock->deadline_us)
        return redlock__client_error(c, REDLOCK_EEXPIRED, "lock validity ran out %llu ms ago",
                                     (unsigned long long)((now - lock->deadline_us) / 1000));
    op *o = op_new(c, OP_EXTEND, lock, cb, data);
    if (o == NULL)
        return redlock__client_error(c, REDLOCK_ENOMEM, "out of memory");
    redlock__lock_ref(lock);
    o->cancelable = cancelable;
    o->ttl_ms = ttl_ms;
    o->flags = flags;
    o->prev_deadline_us = lock->deadline_us;
    o->after_lost = lock->lost;
    return op_launch(o);
}

int redlock_release(redlock_lock *lock, redlock_cb cb, void *data)
{
    if (lock == NULL)
        return REDLOCK_EINVAL;
    redlock_client *c = lock->client;
    int rc = check_lock_call(lock, cb);
    if (rc != 0)
        return rc;
    op *o = op_new(c, OP_UNLOCK, lock, cb, data);
    if (o == NULL)
        return redlock__client_error(c, REDLOCK_ENOMEM, "out of memory");
    redlock__lock_ref(lock);
    o->ttl_ms = lock->ttl_ms;
    o->late = o->call_us >= lock->deadline_us; /* never for an attached lock: UINT64_MAX */
    rc = op_launch(o);
    if (rc == 0) {
        lock->released = true;
        redlock__auto_stop(lock); /* nothing is extended after release */
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
    int rc = check_set_call(c, resources, lens, count, cb);
    if (rc != 0)
        return rc;
    /* A handle nobody sees carries the keys for the round. */
    redlock_lock *lock = redlock__lock_new_set(c, resources, lens, count);
    if (lock == NULL)
        return redlock__client_error(c, REDLOCK_ENOMEM, "out of memory");
    lock->ttl_ms = c->opts.ttl_ms;
    op *o = op_new(c, OP_INSPECT, lock, cb, data);
    if (o == NULL) {
        redlock__lock_unref(lock);
        return redlock__client_error(c, REDLOCK_ENOMEM, "out of memory");
    }
    o->ttl_ms = lock->ttl_ms;
    return op_launch(o);
}
