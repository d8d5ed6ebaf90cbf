/* SPDX-License-Identifier: MIT */
/* round.c - a round: one command to every node, its votes to the quorum core, and its
 * operation told when it may act (op.h has the life of a round). A round knows its operation's
 * kind only through its op_kind_def. Calls down only: the io, the quorum core, the client core,
 * lock handles. */
#include "op.h"
#include "waiter.h"

#include <string.h>

static bool round_check(redlock__round *r);

void redlock__round_maybe_free(redlock__round *r)
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
static void round_settle(redlock__round *r, bool done)
{
    r->state = done || r->op == NULL ? ROUND_DONE : ROUND_OPEN;
    redlock__round_maybe_free(r);
}

redlock__round *redlock__round_new(redlock_client *c, redlock__op *o, redlock_lock *lock,
                                   redlock__cmd_kind kind, uint64_t ttl_ms, bool retake)
{
    unsigned n = c->n_nodes;
    size_t values = kind == REDLOCK__CMD_INSPECT ? (size_t)n * REDLOCK_TOKEN_MAX : 0;
    size_t zeroed =
        sizeof(redlock__round) + n * sizeof(round_req) + n * sizeof(redlock_node_result);
    size_t size = zeroed + (size_t)n * REDLOCK_ERROR_TEXT_MAX + values;
    redlock__round *r = values == 0 ? redlock__spares_take(&c->spare_rounds) : NULL;
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
    r->results =
        (redlock_node_result *)(void *)((char *)r + sizeof(redlock__round) + n * sizeof(round_req));
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
    r->cmd.fence_key = lock->fencing.key;
    r->cmd.fence_key_len = lock->fencing.key_len;
    r->cmd.fence = lock->fencing.fence; /* what a retake restores; a commit round sets its own */
    /* A waiter's attempts and releases go through its keys' queues; a release leaves them only
     * when its caller says so (cmd.leave). */
    if (lock->place != NULL &&
        (kind == REDLOCK__CMD_ACQUIRE || kind == REDLOCK__CMD_ACQUIRE_FENCED ||
         kind == REDLOCK__CMD_RELEASE))
        r->cmd.place = redlock__place_cmd(lock->place); /* it lives as long as the lock */
    for (unsigned i = 0; i < n; i++) {
        r->results[i].url = c->urls[i].redacted;
        r->results[i].pttl_ms = -2;
    }
    if (kind == REDLOCK__CMD_RELEASE) /* a closing client waits for its answers */
        redlock__list_push(&c->releases, &r->release_link);
    return r;
}

static void round_answer(redlock__round *r, unsigned i, redlock__req *req, redlock_vote vote,
                         const char *error, const redlock__reply_data *data, uint64_t now_us);

static void on_req_done(redlock__req *req, redlock_vote vote, const char *error,
                        const redlock__reply_data *data, uint64_t now_us)
{
    round_req *rr = (round_req *)req;
    redlock__round *r = rr->round;
    redlock_client *c = r->client;
    bool close_step = r->close_wait && r->outstanding == 1;    /* its last answer */
    round_answer(r, rr->node, req, vote, error, data, now_us); /* may free r */
    if (close_step)
        redlock__client_close_step(c);
}

/* Whether a request that got vote may still have run, or run later: sent, and neither answered
 * nor refused by the server (an error reply is a script that did not run, or stopped before its
 * writes). */
static bool outcome_unknown(const redlock__req *req, redlock_vote vote)
{
    return vote == REDLOCK_VOTE_TIMEOUT ||
           (vote == REDLOCK_VOTE_ERROR && req->fail == REDLOCK__FAIL_LINK && !req->unsent);
}

/* What node i's answer to r says of the keys of r's lock (kept.c): a yes or no shows its server
 * held what it held when the request was sent; a late yes to the round that won the hold, a key
 * an extend set anew or one it renewed that was not known to hold the token, is fresh; a no, a
 * key set anew, a retake that may have set it anew (no answer), is a loss of a kept node. An
 * answer of a server the node left since the round began says nothing. */
static void kept_vote(redlock__round *r, unsigned i, const redlock__req *req, redlock_vote vote,
                      bool anew, uint64_t now);

static void kept_answer(redlock__round *r, unsigned i, const redlock__req *req, redlock_vote vote,
                        bool anew, uint64_t now)
{
    redlock_client *c = r->client;
    /* After what follows, so that a no is not taken for its own key's last sign. */
    bool heard =
        (vote == REDLOCK_VOTE_YES || vote == REDLOCK_VOTE_NO) && req->sent_us > c->heard_us[i];
    if (r->lock != NULL && c->node_changed_at_us[i] < redlock__round_start_us(&r->q))
        kept_vote(r, i, req, vote, anew, now);
    if (heard)
        c->heard_us[i] = req->sent_us; /* any round's: the server's */
}

static void kept_vote(redlock__round *r, unsigned i, const redlock__req *req, redlock_vote vote,
                      bool anew, uint64_t now)
{
    redlock_lock *lock = r->lock;
    redlock__cmd_kind kind = r->cmd.kind;
    bool lost = false;
    bool was_kept = ((lock->cont.kept >> i) & 1u) != 0;
    if (kind == REDLOCK__CMD_EXTEND) {
        if (vote == REDLOCK_VOTE_YES && !anew) {
            r->evidence |= UINT64_C(1) << i;
            redlock__kept_renewed(lock, i, now);
        } else if (vote == REDLOCK_VOTE_YES) {
            lost = redlock__kept_lose(lock, i, now);
            redlock__kept_fresh(lock, i, now);
        } else if (vote == REDLOCK_VOTE_NO || (r->cmd.retake && outcome_unknown(req, vote))) {
            lost = redlock__kept_lose(lock, i, now); /* a retake may have set it anew */
        }
    } else if (kind == REDLOCK__CMD_RELEASE) {
        if (vote == REDLOCK_VOTE_YES)
            r->evidence |= UINT64_C(1) << i;
        else if (vote == REDLOCK_VOTE_NO)
            lost = redlock__kept_lose(lock, i, now);
    } else if ((kind == REDLOCK__CMD_ACQUIRE || kind == REDLOCK__CMD_ACQUIRE_FENCED ||
                kind == REDLOCK__CMD_COMMIT) &&
               vote == REDLOCK_VOTE_YES && r->state == ROUND_DONE &&
               lock->won_start_us == redlock__round_start_us(&r->q) &&
               redlock_round_decision(&r->q) == REDLOCK_ROUND_WON) {
        redlock__kept_fresh(lock, i, now); /* set after the decision, perhaps */
        return;
    }
    if (((vote == REDLOCK_VOTE_NO && was_kept) || lost) && r->client->on_kept_lost != NULL)
        r->client->on_kept_lost(lock, i, vote == REDLOCK_VOTE_NO && was_kept, lost);
}

redlock__cont redlock__round_continuity(const redlock__round *r)
{
    unsigned n = r->client->n_nodes;
    uint64_t unanswered = 0;
    for (unsigned i = 0; i < n; i++) {
        if (r->results[i].vote == REDLOCK_VOTE_NONE)
            unanswered |= UINT64_C(1) << i;
    }
    return redlock__continuity(redlock__kept_now(r->lock), r->evidence, unanswered, n);
}

/* Node i answered r (vote, ...): record it, and act if r is open. */
static void round_answer(redlock__round *r, unsigned i, redlock__req *req, redlock_vote vote,
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
    if (data != NULL && r->cmd.place != NULL && r->cmd.kind != REDLOCK__CMD_RELEASE)
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
    /* A late vote to a round its operation acted on and still holds (an acquire's attempt it
     * lost keeping its token: acquire.c). */
    redlock__op *o = r->op;
    if (r->state == ROUND_DONE && o != NULL && o->round == r && o->def->late_vote != NULL)
        o->def->late_vote(o, r, vote);
    kept_answer(r, i, req, vote, data != NULL && data->anew, now_us);
    /* Completions can nest (a callback closes the client, which fails every request): only the
     * outermost one acts on the round and may free it. */
    if (r->state != ROUND_OPEN) {
        redlock__round_maybe_free(r); /* ROUND_DONE: this may have been its last answer */
        return;
    }
    r->state = ROUND_CHECKING;
    round_settle(r, round_check(r));
}

/* The round was sent, or got a vote: its operation acts if it can (its kind's check). Returns
 * whether the round is done (acted on, or nobody listens), or waits for more votes. Runs in
 * ROUND_SENDING or ROUND_CHECKING, so nothing nested in the action frees the round. */
static bool round_check(redlock__round *r)
{
    redlock__op *o = r->op;
    return o == NULL || o->def->check(o, r);
}

/* Write the round's command to every node. Completions may arrive during the loop (a node that
 * is down fails at once); the round acts only after the loop, so a release never overtakes an
 * acquire that is still to be written. */
void redlock__round_send(redlock__round *r, bool init_q)
{
    redlock_client *c = r->client;
    unsigned n = c->n_nodes;
    double drift = c->opts.drift_factor;
    uint64_t ttl = r->cmd.ttl_ms;
    uint64_t now = redlock__client_now(c); /* one clock reading for the round and its sends */
    if (r->cmd.place != NULL && r->cmd.kind != REDLOCK__CMD_RELEASE && r->op != NULL)
        r->cmd.stamp_us = now; /* what a grant for this attempt names */
    if (init_q) {
        int rc = redlock_round_init(&r->q, n, ttl, drift, c->opts.min_validity_ms, now);
        if (rc == 0 && r->cmd.kind == REDLOCK__CMD_ACQUIRE_FENCED)
            rc = redlock_round_fencing(&r->q);
        (void)rc; /* arguments were checked by the caller */
    }
    /* A node that voted already (a commit ack its fenced acquire gave, redlock__commit_start) gets
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
        c->sent_us[i] = now;
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

/* Release the lock's key on every node; nobody waits for the answers. Written after the
 * acquire on each ordered connection, so it runs after it even where the SET's reply is still
 * on its way. leave: the waiter is done (it holds nothing and waits no more), so it leaves the
 * resource's queue too. tell: a holder's release, which wakes the waiters; the release of an
 * attempt that lost (or was canceled) wakes nobody: it freed nothing that was anybody's turn. */
void redlock__round_release_everywhere(redlock_client *c, redlock_lock *lock, bool leave, bool tell)
{
    redlock__round *r =
        redlock__round_new(c, NULL, lock, REDLOCK__CMD_RELEASE, lock->ttl_ms, false);
    if (r == NULL)
        return; /* out of memory: the keys expire with their ttl, a queue place with its own */
    r->cmd.tell = tell;
    r->cmd.leave = leave; /* a waiter's: it leaves the queues too */
    if (c->closing) {
        r->close_wait = true; /* the close waits for its answers */
        c->close_rounds++;
    }
    redlock__round_send(r, true);
}
