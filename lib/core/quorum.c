/* SPDX-License-Identifier: MIT */
/* quorum.c - the decision logic of one round (acquire, extend or release) over N nodes, and
 * every decision the operations take over rounds' votes and times (quorum.h, the internal side).
 *
 * Sans-IO, like hiredis' reader: the caller feeds one vote per node together with the time it
 * arrived, and the round answers pending / won / lost as soon as that is known. No allocation,
 * no clock, no IO, no global state, so every rule below can be tested with a fake clock.
 *
 * All arithmetic is on unsigned 64-bit microseconds. The only floating point is the drift
 * allowance, computed once in redlock_round_init. */
#include "quorum.h"

#include <math.h>
#include <stdbool.h>

/* The ACSL below (comments, so the build does not see them) is what `test/model/run wp` proves
 * with Frama-C WP (docs/safety.md, "What the proofs cover"). Rounds are zeroed by assignment, not
 * memset: the same bytes (redlock_round has no padding), and a proof can follow it. */
/*@ // The one fact the provers are given unproved: 1 << k is 2^k, at most 2^63 for k < 64.
    axiomatic Shift {
        axiom one_shifted: \forall integer k; 0 <= k < 64 ==> 1 <= (1 << k) <= 0x8000000000000000;
    }

    predicate vote_ok(integer v) = REDLOCK_VOTE_YES <= v <= REDLOCK_VOTE_TIMEOUT;

    logic integer failures(redlock_round *r) = r->votes_no + r->votes_error + r->votes_timeout;

    // A round as redlock_round_init and redlock_round_commit_init leave it: a strict majority
    // to win, a ttl in range, at most one vote per node counted (the voted mask's rule).
    predicate round_ok(redlock_round *r) =
        1 <= r->n_nodes <= REDLOCK_MAX_NODES && 2 * r->quorum > r->n_nodes &&
        r->quorum <= r->n_nodes && r->ttl_us <= REDLOCK_TTL_MAX_MS * 1000 &&
        r->votes_yes + failures(r) <= r->n_nodes &&
        REDLOCK_ROUND_PENDING <= r->decision <= REDLOCK_ROUND_LOST;

    logic integer elapsed_at(redlock_round *r, integer now) =
        now > r->start_us ? now - r->start_us : 0;

    // ttl - elapsed - drift, or 0 when that is <= 0.
    logic integer validity_at(redlock_round *r, integer now) =
        elapsed_at(r, now) + r->drift_us < r->ttl_us ?
            r->ttl_us - elapsed_at(r, now) - r->drift_us : 0;

    // The rules of a decision made at now (docs/algorithm.md, "Deciding").
    predicate decided_by_rules(redlock_round *r, integer now) =
        (r->decision == REDLOCK_ROUND_WON <==>
            r->votes_yes >= r->quorum && validity_at(r, now) > 0 &&
            validity_at(r, now) >= r->min_validity_us) &&
        (r->decision == REDLOCK_ROUND_PENDING <==>
            r->votes_yes < r->quorum && failures(r) <= r->n_nodes - r->quorum) &&
        (r->decision == REDLOCK_ROUND_WON ==> r->validity_us == validity_at(r, now)) &&
        REDLOCK_ROUND_PENDING <= r->decision <= REDLOCK_ROUND_LOST;
*/

/* ttl_us * drift_factor, truncated toward zero, exactly: floor of the real product of the two
 * given numbers (drift_factor being the double the caller passed, so 0.03, which is stored as
 * 0.0299999999999999989, gives 299999 us for a 10 s ttl). Exact (0) for a factor of 0, and
 * monotonic in both arguments, because floor is.
 *
 * ttl_us <= REDLOCK_TTL_MAX_MS * 1000 < 2^53 converts to double without loss. The product rounded
 * to the nearest double has the integer part of the real product, except when the rounding
 * carried it up onto an integer. fma(ttl, factor, -whole) is the real product minus that integer
 * with a single rounding, so its sign is exact and says which case it is. The product is below
 * ttl_us (factor < 1), so the conversion back to uint64_t is always defined. */
/*@ requires ttl_us <= REDLOCK_TTL_MAX_MS * 1000;
    requires 0.0 <= drift_factor < 1.0;
    assigns \nothing;
    ensures below_ttl: \result <= ttl_us;
*/
static uint64_t drift_product_us(uint64_t ttl_us, double drift_factor)
{
    double ttl = (double)ttl_us;
    double whole = trunc(ttl * drift_factor);
    if (fma(ttl, drift_factor, -whole) < 0)
        whole -= 1; /* rounded up onto an integer: the real product is just below it */
    return (uint64_t)whole;
}

/*@ assigns \nothing;
    ensures exact: \result == n_nodes / 2 + 1;
*/
unsigned redlock_quorum_of(unsigned n_nodes)
{
    return redlock__quorum_of(n_nodes);
}

/*@ requires round == \null || \valid(round);
    assigns *round;
    ensures \result == 0 || \result == REDLOCK_EINVAL;
    ensures ok: \result == 0 ==>
        round->n_nodes == n_nodes && round->quorum == n_nodes / 2 + 1 &&
        round->ttl_us == ttl_ms * 1000 && round->drift_us >= REDLOCK_DRIFT_FIXED_US &&
        round->drift_us <= round->ttl_us + REDLOCK_DRIFT_FIXED_US &&
        round->start_us == start_us && round->decision == REDLOCK_ROUND_PENDING;
*/
int redlock_round_init(redlock_round *round, unsigned n_nodes, uint64_t ttl_ms, double drift_factor,
                       uint64_t min_validity_ms, uint64_t start_us)
{
    if (round == NULL)
        return REDLOCK_EINVAL;
    /* Zero first: a rejected round is then inert (no node is in range, so every vote is
     * refused) instead of holding whatever the caller's stack had. */
    *round = (redlock_round){0};

    /* !(x >= 0 && x < 1) also rejects NaN, which fails every comparison; +-inf fail the range. */
    if (n_nodes < 1 || n_nodes > REDLOCK_MAX_NODES || ttl_ms < 1 || ttl_ms > REDLOCK_TTL_MAX_MS ||
        !(drift_factor >= 0.0 && drift_factor < 1.0))
        return REDLOCK_EINVAL;

    round->n_nodes = n_nodes;
    round->quorum = redlock__quorum_of(n_nodes);
    round->ttl_us = ttl_ms * 1000; /* cannot overflow: ttl_ms <= 2^42 */
    round->drift_us = drift_product_us(round->ttl_us, drift_factor) + REDLOCK_DRIFT_FIXED_US;
    /* The contract puts no bound on min_validity_ms. Saturate instead of wrapping: any minimum
     * above the ttl already means "never won", so the exact value no longer matters. */
    round->min_validity_us =
        min_validity_ms > UINT64_MAX / 1000 ? UINT64_MAX : min_validity_ms * 1000;
    round->start_us = start_us;
    round->decision = REDLOCK_ROUND_PENDING;
    round->status = REDLOCK_EAGAIN;
    return 0;
}

/* The counter a vote adds to, or NULL for a value that is not a vote. */
/*@ requires \valid_read(round);
    assigns \nothing;
    ensures vote == REDLOCK_VOTE_YES ==> \result == &round->votes_yes;
    ensures vote == REDLOCK_VOTE_NO ==> \result == &round->votes_no;
    ensures vote == REDLOCK_VOTE_ERROR ==> \result == &round->votes_error;
    ensures vote == REDLOCK_VOTE_TIMEOUT ==> \result == &round->votes_timeout;
    ensures !vote_ok(vote) ==> \result == \null;
*/
static unsigned *vote_counter(redlock_round *round, redlock_vote vote)
{
    switch (vote) {
    case REDLOCK_VOTE_YES:
        return &round->votes_yes;
    case REDLOCK_VOTE_NO:
        return &round->votes_no;
    case REDLOCK_VOTE_ERROR:
        return &round->votes_error;
    case REDLOCK_VOTE_TIMEOUT:
        return &round->votes_timeout;
    case REDLOCK_VOTE_NONE:
    default:
        return NULL;
    }
}

/* Validity left at now_us: ttl - elapsed - drift, or 0 when that is <= 0. Written so that no
 * step can wrap: elapsed may be anything up to 2^64 - 1 (a caller's clock is a caller's). */
/*@ requires \valid_read(round);
    assigns \nothing;
    ensures exact: \result == validity_at(round, now_us);
    ensures bounded: \result + round->drift_us <= round->ttl_us || \result == 0;
*/
static uint64_t validity_left_us(const redlock_round *round, uint64_t now_us)
{
    /* A monotonic clock never goes back, but a caller's fake or mixed clock might; a negative
     * elapsed would grant more validity than the ttl, so clamp it at 0. */
    uint64_t elapsed_us = now_us > round->start_us ? now_us - round->start_us : 0;
    if (elapsed_us >= round->ttl_us)
        return 0;
    uint64_t left_us = round->ttl_us - elapsed_us;
    return left_us > round->drift_us ? left_us - round->drift_us : 0;
}

/* Decide a pending round if its counts allow it. Only called while pending: a decision, once
 * made, is final - the caller may already have acted on it (released, handed out the lock). */
/*@ requires \valid(round) && round_ok(round);
    requires round->decision == REDLOCK_ROUND_PENDING;
    assigns round->decision, round->status, round->validity_us, round->decided_us;
    ensures won: round->decision == REDLOCK_ROUND_WON <==>
        round->votes_yes >= round->quorum && validity_at(round, now_us) > 0 &&
        validity_at(round, now_us) >= round->min_validity_us;
    ensures pending: round->decision == REDLOCK_ROUND_PENDING <==>
        round->votes_yes < round->quorum && failures(round) <= round->n_nodes - round->quorum;
    ensures validity: round->decision == REDLOCK_ROUND_WON ==>
        round->validity_us == validity_at(round, now_us);
    ensures range: REDLOCK_ROUND_PENDING <= round->decision <= REDLOCK_ROUND_LOST;
    ensures round->decision == REDLOCK_ROUND_LOST ==> round->status != 0;
*/
static void decide(redlock_round *round, uint64_t now_us)
{
    unsigned failures = round->votes_no + round->votes_error + round->votes_timeout;

    /* Both rules cannot hold at once: yes >= quorum and failures > n - quorum would need more
     * than n votes. */
    if (round->votes_yes >= round->quorum) {
        uint64_t validity_us = validity_left_us(round, now_us);
        if (validity_us > 0 && validity_us >= round->min_validity_us) {
            round->decision = REDLOCK_ROUND_WON;
            round->status = 0;
            round->validity_us = validity_us;
        } else {
            /* A quorum that came too late: the keys may expire before the caller could use the
             * lock, so it is not a lock. */
            round->decision = REDLOCK_ROUND_LOST;
            round->status = REDLOCK_EEXPIRED;
        }
    } else if (failures > round->n_nodes - round->quorum) {
        /* Even if every missing vote were yes, the quorum is out of reach: stop waiting. Name the
         * cause by the majority of failures at this moment: mostly "held elsewhere" is worth
         * retrying later, mostly errors/timeouts means the nodes are in trouble. */
        round->decision = REDLOCK_ROUND_LOST;
        round->status = round->votes_no >= round->votes_error + round->votes_timeout
                            ? REDLOCK_EBUSY
                            : REDLOCK_ENOQUORUM;
    } else {
        return;
    }
    round->decided_us = now_us;
}

/* Whether node may vote vote in round now (everything but the fencing rules). */
/*@ requires round == \null || (\valid_read(round) && round_ok(round));
    assigns \nothing;
    ensures \result <==> round != \null && node < round->n_nodes &&
        (round->voted_mask & ((uint64_t)1 << node)) == 0 && vote_ok(vote);
*/
static bool vote_allowed(const redlock_round *round, unsigned node, redlock_vote vote)
{
    if (round == NULL || node >= round->n_nodes)
        return false;
    if (round->voted_mask & (UINT64_C(1) << node)) /* node < n_nodes <= 64 */
        return false; /* one vote per node, or a node could make the quorum alone */
    return vote_counter((redlock_round *)round, vote) != NULL;
}

/* Record an allowed vote and decide if still pending. */
/*@ requires \valid(round) && round_ok(round);
    requires node < round->n_nodes && vote_ok(vote);
    requires (round->voted_mask & ((uint64_t)1 << node)) == 0;
    requires round->votes_yes + failures(round) < round->n_nodes;
    assigns round->voted_mask, round->votes[node], round->votes_yes, round->votes_no,
        round->votes_error, round->votes_timeout, round->decision, round->status,
        round->validity_us, round->decided_us;
    ensures ok: round_ok(round);
    ensures mask: round->voted_mask == (\old(round->voted_mask) | ((uint64_t)1 << node));
    ensures recorded: round->votes[node] == vote;
    ensures yes: round->votes_yes == \old(round->votes_yes) + (vote == REDLOCK_VOTE_YES ? 1 : 0);
    ensures fail: failures(round) == \old(failures(round)) + (vote == REDLOCK_VOTE_YES ? 0 : 1);
    ensures kept: \old(round->decision) != REDLOCK_ROUND_PENDING ==>
        round->decision == \old(round->decision) && round->validity_us == \old(round->validity_us);
    ensures decided: \old(round->decision) == REDLOCK_ROUND_PENDING ==>
        decided_by_rules(round, now_us);
    ensures result: \result == round->decision;
*/
static int vote_record(redlock_round *round, unsigned node, redlock_vote vote, uint64_t now_us)
{
    /* Recorded even after the decision, so the caller can report every node's answer. */
    round->voted_mask |= UINT64_C(1) << node;
    round->votes[node] = (unsigned char)vote;
    ++*vote_counter(round, vote);

    if (round->decision == REDLOCK_ROUND_PENDING)
        decide(round, now_us);
    return (int)round->decision;
}

/*@ requires round == \null || (\valid(round) && round_ok(round));
    // The counts are the mask's bits: a node whose bit is clear leaves room for its vote.
    requires room: round != \null && node < round->n_nodes &&
        (round->voted_mask & ((uint64_t)1 << node)) == 0 ==>
        round->votes_yes + failures(round) < round->n_nodes;
    assigns *round;
    behavior refused:
        assumes round == \null || !(node < round->n_nodes) || !vote_ok(vote) ||
            (round->voted_mask & ((uint64_t)1 << node)) != 0 ||
            (round->fence_kind == REDLOCK_ROUND_FENCED && vote == REDLOCK_VOTE_YES);
        assigns \nothing;
        ensures \result == REDLOCK_EINVAL;
    behavior counted:
        assumes round != \null && node < round->n_nodes && vote_ok(vote) &&
            (round->voted_mask & ((uint64_t)1 << node)) == 0 &&
            !(round->fence_kind == REDLOCK_ROUND_FENCED && vote == REDLOCK_VOTE_YES);
        ensures round_ok(round);
        ensures one_per_node: (round->voted_mask & ((uint64_t)1 << node)) != 0;
        ensures round->votes_yes == \old(round->votes_yes) + (vote == REDLOCK_VOTE_YES ? 1 : 0);
        ensures kept: \old(round->decision) != REDLOCK_ROUND_PENDING ==>
            round->decision == \old(round->decision);
        ensures won_by_majority: \old(round->decision) == REDLOCK_ROUND_PENDING &&
            round->decision == REDLOCK_ROUND_WON ==>
            round->votes_yes >= round->quorum && 2 * round->votes_yes > round->n_nodes &&
            0 < round->validity_us && round->validity_us + round->drift_us <= round->ttl_us;
        ensures lost_when_out_of_reach: \old(round->decision) == REDLOCK_ROUND_PENDING &&
            round->votes_yes < round->quorum && failures(round) > round->n_nodes - round->quorum ==>
            round->decision == REDLOCK_ROUND_LOST;
        ensures \result == round->decision;
    complete behaviors;
    disjoint behaviors;
*/
int redlock_round_vote(redlock_round *round, unsigned node, redlock_vote vote, uint64_t now_us)
{
    /* Check everything before touching anything: a refused vote leaves the round as it was. */
    if (!vote_allowed(round, node, vote))
        return REDLOCK_EINVAL;
    /* A yes of a fenced acquire round without its counter would let the fence miss a node's
     * counter: the one place where the fence's guarantee comes from. */
    if (round->fence_kind == REDLOCK_ROUND_FENCED && vote == REDLOCK_VOTE_YES)
        return REDLOCK_EINVAL;
    return vote_record(round, node, vote, now_us);
}

/* ---- fencing ----------------------------------------------------------------------------------
 *
 * Why the fence only grows from one grant to the next (docs/safety.md has the whole argument):
 * a lock is granted only when its commit round raised the counter to its fence on commit_acks >=
 * quorum nodes, each while its key still stood there; a later holder's acquire round needs a
 * quorum of yes votes, each node's yes being a SET NX that read the counter in the same atomic
 * step. Two quorums share a node, where the later SET NX could only succeed after the earlier
 * key was gone, so after the earlier commit: the later holder reads a counter >= the earlier
 * fence there, and its fence, 1 + the largest counter it read, is larger. */

/*@ requires round == \null || \valid(round);
    assigns round->fence_kind, round->fence;
*/
int redlock_round_fencing(redlock_round *round)
{
    if (round == NULL || round->n_nodes == 0 || round->fence_kind != REDLOCK_ROUND_PLAIN ||
        round->voted_mask != 0)
        return REDLOCK_EINVAL;
    round->fence_kind = REDLOCK_ROUND_FENCED;
    round->fence = 1; /* 1 + the largest counter seen: none yet, so 1 + 0 */
    return 0;
}

/*@ requires round == \null || (\valid(round) && round_ok(round));
    requires room: round != \null && node < round->n_nodes &&
        (round->voted_mask & ((uint64_t)1 << node)) == 0 ==>
        round->votes_yes + failures(round) < round->n_nodes;
    assigns *round;
    ensures round != \null && \result >= 0 ==> round_ok(round);
    ensures kept: round != \null && \old(round->decision) != REDLOCK_ROUND_PENDING ==>
        round->decision == \old(round->decision);
    ensures won_by_majority: round != \null && \result >= 0 &&
        \old(round->decision) == REDLOCK_ROUND_PENDING && round->decision == REDLOCK_ROUND_WON ==>
        round->votes_yes >= round->quorum && 2 * round->votes_yes > round->n_nodes &&
        0 < round->validity_us && round->validity_us + round->drift_us <= round->ttl_us;
    ensures fence_grows: round != \null && \result >= 0 && vote == REDLOCK_VOTE_YES &&
        \old(round->decision) == REDLOCK_ROUND_PENDING ==> round->fence > counter;
*/
int redlock_round_vote_counter(redlock_round *round, unsigned node, redlock_vote vote,
                               uint64_t counter, uint64_t now_us)
{
    if (!vote_allowed(round, node, vote) || round->fence_kind != REDLOCK_ROUND_FENCED)
        return REDLOCK_EINVAL;
    if (vote == REDLOCK_VOTE_YES) {
        if (counter == UINT64_MAX)
            return REDLOCK_EINVAL;
        /* Only the yes votes up to the decision make the fence: the commit round writes the
         * fence as it was decided, and a later yes changes nothing about who was granted. */
        if (round->decision == REDLOCK_ROUND_PENDING && counter + 1 > round->fence)
            round->fence = counter + 1;
    }
    return vote_record(round, node, vote, now_us);
}

/*@ requires \valid_read(round);
    assigns \nothing;
*/
uint64_t redlock_round_fence(const redlock_round *round)
{
    switch (round->fence_kind) {
    case REDLOCK_ROUND_FENCED:
        return round->decision == REDLOCK_ROUND_WON ? round->fence : 0;
    case REDLOCK_ROUND_COMMIT:
        return round->fence;
    default:
        return 0;
    }
}

/*@ requires commit == \null || \valid(commit);
    requires acquire == \null || (\valid_read(acquire) && round_ok(acquire));
    assigns *commit;
*/
int redlock_round_commit_init(redlock_round *commit, const redlock_round *acquire,
                              unsigned commit_acks)
{
    if (commit == NULL || commit == acquire)
        return REDLOCK_EINVAL; /* nothing to zero: the acquire round stays as it was */
    if (acquire == NULL || acquire->fence_kind != REDLOCK_ROUND_FENCED ||
        acquire->decision != REDLOCK_ROUND_WON) {
        *commit = (redlock_round){0};
        return REDLOCK_EINVAL;
    }
    unsigned acks = commit_acks != 0 ? commit_acks : acquire->quorum;
    if (acks < acquire->quorum || acks > acquire->n_nodes) {
        *commit = (redlock_round){0};
        return REDLOCK_EINVAL;
    }
    /* Read everything from acquire before writing commit: the caller may have them overlap. */
    redlock_round next = {0};
    next.n_nodes = acquire->n_nodes;
    /* "quorum" is what this round needs: the same rules then give its win (acks yes votes with
     * validity left) and its loss (more than N - acks failures: the acks are out of reach). */
    next.quorum = acks;
    next.ttl_us = acquire->ttl_us;
    next.drift_us = acquire->drift_us;
    next.min_validity_us = acquire->min_validity_us;
    next.start_us = acquire->start_us; /* validity counts from the acquire's start */
    next.decision = REDLOCK_ROUND_PENDING;
    next.status = REDLOCK_EAGAIN;
    next.fence = acquire->fence;
    next.fence_kind = REDLOCK_ROUND_COMMIT;
    *commit = next;
    return 0;
}

/*@ requires \valid_read(round);
    assigns \nothing;
*/
redlock_decision redlock_round_decision(const redlock_round *round)
{
    return round->decision;
}

/*@ requires \valid_read(round);
    assigns \nothing;
*/
int redlock_round_status(const redlock_round *round)
{
    /* A round whose init failed is all zeros; status 0 would read as "won". */
    if (round->n_nodes == 0)
        return REDLOCK_EINVAL;
    return round->status;
}

/*@ requires \valid_read(round);
    assigns \nothing;
*/
uint64_t redlock_round_validity_us(const redlock_round *round)
{
    return round->validity_us;
}

/*@ requires \valid_read(round);
    assigns \nothing;
*/
uint64_t redlock_round_drift_us(const redlock_round *round)
{
    return round->drift_us;
}

/*@ requires \valid_read(round) && round->n_nodes <= REDLOCK_MAX_NODES;
    assigns \nothing;
*/
redlock_vote redlock_round_node_vote(const redlock_round *round, unsigned node)
{
    if (node >= round->n_nodes)
        return REDLOCK_VOTE_NONE;
    return (redlock_vote)round->votes[node];
}

const char *redlock_vote_name(redlock_vote vote)
{
    switch (vote) {
    case REDLOCK_VOTE_NONE:
        return "none";
    case REDLOCK_VOTE_YES:
        return "yes";
    case REDLOCK_VOTE_NO:
        return "no";
    case REDLOCK_VOTE_ERROR:
        return "error";
    case REDLOCK_VOTE_TIMEOUT:
        return "timeout";
    default:
        return "unknown";
    }
}

/* ---- continuity (docs/safety.md, "A hold is continuous while a quorum kept it") ----------- */

/*@ // The nodes of mask m among nodes 0 .. n - 1: the number of its low n bits that are set.
    logic integer bits(integer m, integer n) = n <= 0 ? 0 : bits(m, n - 1) + ((m >> (n - 1)) & 1);
*/

/*@ requires n_nodes <= REDLOCK_MAX_NODES;
    assigns \nothing;
    ensures \result == bits(mask, n_nodes);
    ensures \result <= n_nodes;
*/
unsigned redlock__count_nodes(uint64_t mask, unsigned n_nodes)
{
    unsigned n = 0;
    /*@ loop invariant 0 <= i <= n_nodes && n == bits(mask, i) && n <= i;
        loop assigns i, n;
        loop variant n_nodes - i;
    */
    for (unsigned i = 0; i < n_nodes; i++)
        n += (unsigned)((mask >> i) & 1u);
    return n;
}

/*@ requires n_nodes <= REDLOCK_MAX_NODES;
    assigns \nothing;
    ensures \result == 1 <==> bits(mask, n_nodes) >= n_nodes / 2 + 1;
*/
bool redlock__mask_quorum(uint64_t mask, unsigned n_nodes)
{
    return redlock__count_nodes(mask, n_nodes) >= redlock__quorum_of(n_nodes);
}

/*@ requires n_nodes <= REDLOCK_MAX_NODES;
    assigns \nothing;
    behavior proven:
        assumes bits(kept & evidence, n_nodes) >= n_nodes / 2 + 1;
        ensures \result == REDLOCK__CONT_PROVEN;
    behavior broken:
        assumes bits(kept & evidence, n_nodes) < n_nodes / 2 + 1;
        assumes bits(kept & (evidence | unanswered), n_nodes) < n_nodes / 2 + 1;
        ensures \result == REDLOCK__CONT_BROKEN;
    behavior pending:
        assumes bits(kept & evidence, n_nodes) < n_nodes / 2 + 1;
        assumes bits(kept & (evidence | unanswered), n_nodes) >= n_nodes / 2 + 1;
        ensures \result == REDLOCK__CONT_PENDING;
    complete behaviors;
    disjoint behaviors;
*/
redlock__cont redlock__continuity(uint64_t kept, uint64_t evidence, uint64_t unanswered,
                                  unsigned n_nodes)
{
    unsigned quorum = redlock__quorum_of(n_nodes);
    if (redlock__count_nodes(kept & evidence, n_nodes) >= quorum)
        return REDLOCK__CONT_PROVEN;
    if (redlock__count_nodes(kept & (evidence | unanswered), n_nodes) < quorum)
        return REDLOCK__CONT_BROKEN;
    return REDLOCK__CONT_PENDING;
}

/* ---- the decisions of the operations that are not one round's won/lost -------------------- */

/*@ // A release's status (docs/api.md, redlock_release): the whole hold's, not one round's.
    logic integer release_status_of(redlock_round *r, integer lapsed) =
        lapsed != 0 ? REDLOCK_ELOST :
        r->votes_yes >= r->quorum ? 0 :
        r->votes_no > r->n_nodes - r->quorum ? REDLOCK_ELOST : REDLOCK_ENOQUORUM;
*/

/*@ requires \valid_read(q) && round_ok(q);
    assigns \nothing;
    ensures spec: \result == release_status_of(q, lapsed);
    ensures lapsed: lapsed ==> \result == REDLOCK_ELOST;
    ensures deleted: !lapsed && q->votes_yes >= q->quorum ==> \result == 0;
    ensures lost: !lapsed && q->votes_yes < q->quorum && q->votes_no > q->n_nodes - q->quorum ==>
                  \result == REDLOCK_ELOST;
    ensures unknown: !lapsed && q->votes_yes < q->quorum && q->votes_no <= q->n_nodes - q->quorum
                     ==> \result == REDLOCK_ENOQUORUM;
*/
int redlock__release_status(const redlock_round *q, bool lapsed)
{
    if (lapsed)
        return REDLOCK_ELOST;
    if (q->votes_yes >= q->quorum)
        return 0;
    if (q->votes_no > q->n_nodes - q->quorum)
        return REDLOCK_ELOST;
    return REDLOCK_ENOQUORUM;
}

/*@ requires \valid_read(q) && round_ok(q) && \valid(status);
    requires out <= q->n_nodes - q->votes_yes - failures(q);
    assigns *status;
    ensures *status == release_status_of(q, lapsed);
    ensures all_in: out == 0 ==> \result == 1;
    ensures lapsed_at_quorum: out > 0 && lapsed ==> (\result == 1 <==> q->n_nodes - out >=
   q->quorum); ensures settled: out > 0 && !lapsed && *status != REDLOCK_ENOQUORUM ==> \result == 1;
    ensures out_of_reach: out > 0 && !lapsed && *status == REDLOCK_ENOQUORUM ==>
        (\result == 1 <==> q->votes_yes + out < q->quorum &&
                           q->votes_no + out <= q->n_nodes - q->quorum);
*/
bool redlock__release_decided(const redlock_round *q, unsigned out, bool lapsed, int *status)
{
    *status = redlock__release_status(q, lapsed);
    if (out == 0)
        return true;
    if (lapsed)
        return q->n_nodes - out >= q->quorum;
    if (*status != REDLOCK_ENOQUORUM)
        return true;
    /* No quorum of yes nor of no yet: decided only if neither is in reach any more. */
    return q->votes_yes + out < q->quorum && q->votes_no + out <= q->n_nodes - q->quorum;
}

/*@ requires \valid_read(q);
    assigns \nothing;
    ensures \result == 1 <==> q->votes_yes >= q->quorum;
*/
bool redlock__round_has_quorum(const redlock_round *q)
{
    return q->votes_yes >= q->quorum;
}

/*@ requires \valid_read(q) && round_ok(q) && \valid(status);
    requires out <= q->n_nodes - q->votes_yes - failures(q);
    requires REDLOCK__CONT_PENDING <= cont <= REDLOCK__CONT_BROKEN;
    assigns *status;
    ensures waits: !lapsed && cont == REDLOCK__CONT_PENDING && out > 0 ==> \result == 0;
    ensures as_before: lapsed || cont == REDLOCK__CONT_PROVEN ==>
        *status == release_status_of(q, lapsed);
    ensures continuity: *status == 0 ==> !lapsed && cont == REDLOCK__CONT_PROVEN;
    ensures unproven: !lapsed && cont != REDLOCK__CONT_PROVEN ==>
        (*status == REDLOCK_ENOQUORUM || *status == REDLOCK_ELOST);
*/
bool redlock__release_decided_cont(const redlock_round *q, unsigned out, bool lapsed,
                                   redlock__cont cont, int *status)
{
    if (!lapsed && cont == REDLOCK__CONT_PENDING && out > 0) {
        *status = REDLOCK_ENOQUORUM;
        return false;
    }
    bool decided = redlock__release_decided(q, out, lapsed, status);
    /* Deleted on a quorum, but not shown by a quorum of nodes that kept the token: too few of
     * them answered to tell that the hold was continuous. */
    if (!lapsed && cont != REDLOCK__CONT_PROVEN && *status == 0)
        *status = REDLOCK_ENOQUORUM;
    return decided;
}

/*@ requires \valid_read(q) && round_ok(q);
    assigns \nothing;
    ensures \result == 0 <==> q->votes_yes + q->votes_no >= q->quorum;
    ensures \result == 0 || \result == REDLOCK_ENOQUORUM;
*/
int redlock__inspect_status(const redlock_round *q)
{
    return q->votes_yes + q->votes_no >= q->quorum ? 0 : REDLOCK_ENOQUORUM;
}

/*@ requires \valid_read(q);
    assigns \nothing;
    ensures \result == 1 <==> q->decided_us >= prev_deadline_us;
*/
bool redlock__won_too_late(const redlock_round *q, uint64_t prev_deadline_us)
{
    return q->decided_us >= prev_deadline_us;
}

/*@ requires \valid_read(q);
    assigns \nothing;
    ensures \result == 1 <==> q->votes_yes == 0 && q->votes_timeout == 0;
*/
bool redlock__round_left_nothing(const redlock_round *q)
{
    return q->votes_yes == 0 && q->votes_timeout == 0;
}

/*@ requires \valid_read(q);
    assigns \nothing;
    ensures \result == 1 <==> q->votes_yes > 0;
*/
bool redlock__round_any_yes(const redlock_round *q)
{
    return q->votes_yes > 0;
}

/*@ requires 1 <= n_nodes <= REDLOCK_MAX_NODES;
    assigns \nothing;
    ensures \result == 1 <==> free_nodes > n_nodes - (n_nodes / 2 + 1);
    ensures \result == 1 <==> n_nodes - free_nodes < n_nodes / 2 + 1 || free_nodes > n_nodes;
*/
bool redlock__quorum_gone(unsigned free_nodes, unsigned n_nodes)
{
    return free_nodes > n_nodes - redlock__quorum_of(n_nodes);
}

/* ---- a waiter's wait --------------------------------------------------------------------- */

/*@ // What node i said of the wait for a key (redlock__quorum_wait_ms): 0 when it said yes, its
    // wait when it said no with one, -1 when it said nothing of it.
    logic integer node_wait(redlock_round *q, int64_t *w, integer i) =
        q->votes[i] == REDLOCK_VOTE_YES ? 0 :
        q->votes[i] == REDLOCK_VOTE_NO && w[i] >= 0 ? w[i] : -1;

    // How many of nodes 0 .. n - 1 would let the waiter in within v ms.
    logic integer within(redlock_round *q, int64_t *w, integer v, integer n) =
        n <= 0 ? 0 :
        within(q, w, v, n - 1) + (0 <= node_wait(q, w, n - 1) <= v ? 1 : 0);
*/

/*@ requires \valid_read(q) && round_ok(q) && i < q->n_nodes;
    requires \valid_read(wait_ms + (0 .. q->n_nodes - 1));
    assigns \nothing;
    ensures \result == node_wait(q, wait_ms, i);
*/
static int64_t node_wait_ms(const redlock_round *q, const int64_t *wait_ms, unsigned i)
{
    if (q->votes[i] == REDLOCK_VOTE_YES)
        return 0;
    return q->votes[i] == REDLOCK_VOTE_NO && wait_ms[i] >= 0 ? wait_ms[i] : -1;
}

/*@ requires \valid_read(q) && round_ok(q);
    requires \valid_read(wait_ms + (0 .. q->n_nodes - 1));
    assigns \nothing;
    ensures \result >= -1;
    ensures given: \result >= 0 ==> \exists integer i; 0 <= i < q->n_nodes &&
                                                       node_wait(q, wait_ms, i) == \result;
    ensures quorum: \result >= 0 ==> within(q, wait_ms, \result, q->n_nodes) >= q->quorum;
    ensures least: \forall integer i; 0 <= i < q->n_nodes && 0 <= node_wait(q, wait_ms, i) &&
                   (\result < 0 || node_wait(q, wait_ms, i) < \result) ==>
                   within(q, wait_ms, node_wait(q, wait_ms, i), q->n_nodes) < q->quorum;
*/
int64_t redlock__quorum_wait_ms(const redlock_round *q, const int64_t *wait_ms)
{
    int64_t best = -1;
    /*@ loop invariant 0 <= i <= q->n_nodes;
        loop invariant best >= -1;
        loop invariant best >= 0 ==> \exists integer k; 0 <= k < i &&
                                                      node_wait(q, wait_ms, k) == best;
        loop invariant best >= 0 ==> within(q, wait_ms, best, q->n_nodes) >= q->quorum;
        loop invariant \forall integer k; 0 <= k < i && 0 <= node_wait(q, wait_ms, k) &&
                       (best < 0 || node_wait(q, wait_ms, k) < best) ==>
                       within(q, wait_ms, node_wait(q, wait_ms, k), q->n_nodes) < q->quorum;
        loop assigns i, best;
        loop variant q->n_nodes - i;
    */
    for (unsigned i = 0; i < q->n_nodes; i++) {
        int64_t v = node_wait_ms(q, wait_ms, i);
        if (v < 0 || (best >= 0 && v >= best))
            continue;
        unsigned n = 0;
        /*@ loop invariant 0 <= j <= q->n_nodes;
            loop invariant n == within(q, wait_ms, v, j) && n <= j;
            loop assigns j, n;
            loop variant q->n_nodes - j;
        */
        for (unsigned j = 0; j < q->n_nodes; j++) {
            int64_t u = node_wait_ms(q, wait_ms, j);
            if (u >= 0 && u <= v)
                n++;
        }
        if (n >= q->quorum)
            best = v;
    }
    return best;
}

/* ---- what a round's caller reads of it --------------------------------------------------- */

/*@ requires \valid_read(q) && \valid(res) && \separated(q, res);
    assigns res->votes_yes, res->votes_no, res->votes_error, res->votes_timeout;
    ensures res->votes_yes == q->votes_yes && res->votes_no == q->votes_no &&
            res->votes_error == q->votes_error && res->votes_timeout == q->votes_timeout;
*/
void redlock__round_tally(const redlock_round *q, redlock_result *res)
{
    res->votes_yes = q->votes_yes;
    res->votes_no = q->votes_no;
    res->votes_error = q->votes_error;
    res->votes_timeout = q->votes_timeout;
}

/*@ requires \valid_read(q);
    assigns \nothing;
    ensures \result == q->start_us;
*/
uint64_t redlock__round_start_us(const redlock_round *q)
{
    return q->start_us;
}

/*@ requires \valid_read(q);
    assigns \nothing;
    ensures \result == q->decided_us;
*/
uint64_t redlock__round_decided_us(const redlock_round *q)
{
    return q->decided_us;
}

/*@ requires \valid_read(q);
    requires q->decision == REDLOCK_ROUND_WON;
    requires q->decided_us + q->validity_us <= UINT64_MAX;
    assigns \nothing;
    ensures \result == q->decided_us + q->validity_us;
    ensures \result > q->decided_us || q->validity_us == 0;
*/
uint64_t redlock__round_deadline_us(const redlock_round *q)
{
    return q->decided_us + q->validity_us;
}
