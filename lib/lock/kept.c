/* SPDX-License-Identifier: MIT */
/* kept.c - which nodes of a held lock vouch for its continuity (docs/safety.md, "A hold is
 * continuous while a quorum kept it").
 *
 * A hold is continuous while at every moment a quorum of nodes held its token. The client sees
 * moments only through answers, so it keeps, per lock, the nodes whose key it knows to have held
 * the token without a break (kept) apart from those that hold it in a key that may have been set
 * later (fresh: a late yes to the acquire, a key a retake set anew): a fresh key vouches for no
 * moment before it was set. The decisions over these sets are the core's (quorum.c,
 * redlock__continuity and redlock__mask_quorum); this file only keeps them. */
#include "kept.h"

#include <string.h>

#include "lock.h"

bool redlock__kept_won(redlock_lock *lock, const redlock_round *q)
{
    redlock_client *c = lock->client;
    uint64_t yes = 0;
    uint64_t start = redlock__round_start_us(q);
    for (unsigned i = 0; i < c->n_nodes; i++) {
        /* A yes from before the node reached a new server is the old server's. */
        if (redlock_round_node_vote(q, i) == REDLOCK_VOTE_YES && c->node_changed_at_us[i] < start)
            yes |= UINT64_C(1) << i;
    }
    lock->cont = (redlock__kept){.kept = yes};
    return redlock__mask_quorum(yes, c->n_nodes);
}

/* ---- the probe: a quiet client hears its nodes after a fresh key ------------------------- */

static const redlock__cmd probe_cmd = {.kind = REDLOCK__CMD_TIME};

static void on_probe_answer(redlock__req *req, redlock_vote vote, const char *error,
                            const redlock__reply_data *data, uint64_t now_us)
{
    (void)error;
    (void)data;
    (void)now_us;
    struct redlock__probe *p = REDLOCK__CONTAINER_OF(req, struct redlock__probe, req);
    redlock_client *c = p->client;
    p->busy = false;
    if (vote == REDLOCK_VOTE_YES && req->sent_us > c->heard_us[p->node])
        c->heard_us[p->node] = req->sent_us;
}

static void on_probe_timer(redlock__timer *t)
{
    redlock_client *c = REDLOCK__CONTAINER_OF(t, redlock_client, probe_timer);
    c->probe_armed = false;
    uint64_t now = redlock__client_now(c);
    for (unsigned i = 0; i < c->n_nodes && !c->closing; i++) {
        struct redlock__probe *p = &c->probes[i];
        /* A round written since, or a cluster (one TIME says nothing of its other masters). */
        if (p->busy || c->urls[i].cluster || c->sent_us[i] > c->probe_for_us ||
            c->heard_us[i] > c->probe_for_us)
            continue;
        memset(&p->req, 0, sizeof(p->req));
        p->req.cmd = &probe_cmd;
        p->req.cb = on_probe_answer;
        p->req.sent_us = now;
        p->client = c;
        p->node = i;
        p->busy = true;
        c->sent_us[i] = now;
        c->io->ops->send(c->io, i, &p->req);
    }
}

/* How long the client waits for its own traffic to reach the nodes after a fresh key before it
 * asks them: a busy client never sends a probe, a quiet one leaves a fresh key unconfirmed for
 * this long plus a round trip. */
#define PROBE_QUIET_US 5000

/* A key became fresh at now_us: PROBE_QUIET_US later, each node the client wrote nothing to since
 * is asked for a sign of life. */
static void probe_after(redlock_client *c, uint64_t now_us)
{
    if (now_us > c->probe_for_us)
        c->probe_for_us = now_us;
    if (c->probe_armed || c->closing)
        return;
    c->probe_armed = true;
    redlock__client_timer_start(c, &c->probe_timer, now_us + PROBE_QUIET_US, on_probe_timer);
}

/* ---- the sets ----------------------------------------------------------------------------- */

void redlock__kept_fresh(redlock_lock *lock, unsigned i, uint64_t now_us)
{
    uint64_t bit = UINT64_C(1) << i;
    if ((lock->cont.kept & bit) != 0)
        return;
    lock->cont.fresh |= bit;
    if (now_us > lock->cont.fresh_since_us)
        lock->cont.fresh_since_us = now_us;
    probe_after(lock->client, now_us);
}

uint64_t redlock__kept_now(redlock_lock *lock)
{
    redlock__kept *k = &lock->cont;
    if (k->fresh != 0) {
        redlock_client *c = lock->client;
        uint64_t heard = 0; /* kept nodes that answered a request sent after the newest fresh key */
        for (unsigned i = 0; i < c->n_nodes; i++) {
            if (c->heard_us[i] > k->fresh_since_us)
                heard |= UINT64_C(1) << i;
        }
        if (redlock__mask_quorum(k->kept & ~k->pending & heard, c->n_nodes)) {
            k->kept |= k->fresh;
            k->fresh = 0;
        }
    }
    return k->kept;
}

/* The nodes that may still hold the token in a kept key at now_us: pending ones only before
 * their keys may end. */
static bool kept_enough(const redlock_lock *lock, uint64_t now_us)
{
    const redlock__kept *k = &lock->cont;
    uint64_t holding = now_us < k->pending_until_us ? k->kept : k->kept & ~k->pending;
    return redlock__mask_quorum(holding, lock->client->n_nodes);
}

bool redlock__kept_lose(redlock_lock *lock, unsigned i, uint64_t now_us)
{
    redlock__kept *k = &lock->cont;
    uint64_t bit = UINT64_C(1) << i;
    /* With its own answers until now: they show its server, and the key on it, were there then
     * (a key lost without a restart, a flush or a delete, is taken to be lost after that). */
    (void)redlock__kept_now(lock);
    k->fresh &= ~bit;
    if ((k->kept & bit) == 0)
        return false;
    k->kept &= ~bit;
    k->pending &= ~bit;
    if (lock->gap || kept_enough(lock, now_us))
        return false;
    lock->gap = true;
    lock->lapsed = true; /* no retake from now on: it would hide the gap */
    return true;
}

void redlock__kept_proven(redlock_lock *lock, uint64_t renewed, uint64_t prev_deadline_us)
{
    redlock__kept *k = &lock->cont;
    /* Silent through two extends: its key may have ended at a deadline older than the last. */
    k->kept &= ~(k->pending & ~renewed);
    k->pending = k->kept & ~renewed;
    k->pending_until_us = prev_deadline_us;
    (void)redlock__kept_now(lock); /* its renewals may be the answers that let fresh keys in */
}

void redlock__kept_renewed(redlock_lock *lock, unsigned i, uint64_t now_us)
{
    uint64_t bit = UINT64_C(1) << i;
    lock->cont.pending &= ~bit;
    if (((lock->cont.kept | lock->cont.fresh) & bit) == 0)
        redlock__kept_fresh(lock, i, now_us); /* a key it was not known to hold */
}
