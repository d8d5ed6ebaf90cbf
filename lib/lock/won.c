/* SPDX-License-Identifier: MIT */
/* won.c - an acquire's won round: the lock is granted (its validity, deadline and fence set from
 * the round, auto-extension started, the operation completed), and a fenced acquire's commit
 * round. Both an acquire's own round (acquire.c) and a waiter's round won by grants (waiter.c) end
 * here. Calls down only: rounds and operations, lock handles and the nodes that kept them, the
 * auto-extension (started through redlock_auto_extend, which builds on extends and never calls
 * back here), the quorum core. */
#include "op.h"

#include "autoextend.h"

/* The attempt's last round was won (the acquire, or a fenced acquire's commit): the lock is
 * granted. Returns 0, or why it is not worth handing out after all. */
int redlock__lock_grant(redlock__op *o, redlock__round *r)
{
    redlock_lock *lock = o->lock;
    uint64_t validity = redlock_round_validity_us(&r->q);
    lock->validity_ms = validity / 1000;
    lock->deadline_us = redlock__round_deadline_us(&r->q);
    lock->won_start_us = redlock__round_start_us(&r->q); /* a commit round's is its acquire's */
    /* A yes of a node that reached a new server during the round is the old server's: without
     * it, fewer than a quorum may hold the keys. */
    if (!redlock__kept_won(lock, &r->q))
        return REDLOCK_ENOQUORUM;
    lock->fencing.fence = redlock_round_fence(&r->q);
    /* Auto-extension starts before the caller hears of the lock, so no window is left
     * unguarded. Its options were checked by redlock_acquire; what is left to fail is a
     * validity already gone, and then the lock is not worth handing out. */
    int rc = o->has_auto ? redlock_auto_extend(lock, &o->auto_opts, o->lost_cb, o->lost_data) : 0;
    if (rc == 0) {
        redlock__op_complete(o, 0);
        return 0;
    }
    lock->fencing.fence = 0;
    return rc;
}

/* A fenced acquire round was won: commit its fence on every node (docs/algorithm.md). The lock
 * is granted only if the commit round is won too. by_grants: its yes votes are grants, whose
 * counters are what a message said, not what the node answered: every node's commit is sent.
 * Returns 0, or REDLOCK_ENOMEM. */
int redlock__commit_start(redlock__op *o, redlock__round *acquire, bool by_grants)
{
    redlock_client *c = o->client;
    redlock__round *r = redlock__round_new(c, o, o->lock, REDLOCK__CMD_COMMIT, o->ttl_ms, false);
    if (r == NULL)
        return REDLOCK_ENOMEM;
    int rc = redlock_round_commit_init(&r->q, &acquire->q, o->lock->fencing.commit);
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
         * key, while the key stood: what the commit would do there, done. Its ack counts now -
         * when the node answered so on its own connection; a grant's counter is only a hint. */
        if (!by_grants && redlock_round_node_vote(&acquire->q, i) == REDLOCK_VOTE_YES &&
            a->fence + 1 == fence) {
            r->results[i].vote = REDLOCK_VOTE_YES;
            r->results[i].latency_us = a->latency_us;
            redlock_round_vote(&r->q, i, REDLOCK_VOTE_YES, now);
        }
    }
    redlock__op_hold_round(o, r);
    redlock__round_send(r, false); /* q was set up from the acquire round */
    return 0;
}
