/* SPDX-License-Identifier: MIT */
/* test_fence.c - the fencing part of the quorum core (redlock_round_fencing,
 * redlock_round_vote_counter, redlock_round_fence, redlock_round_commit_init), driven by a fake
 * clock, exactly.
 *
 * Besides the rules one by one, two model checks: the fence against an oracle over random vote
 * orders, and the property fencing exists for - on a model of N nodes each keeping a counter,
 * every later grant's fence is larger than every earlier one's, for every commit set of the
 * required size and every quorum of the later acquire; and the same with nodes that lose their
 * counter, where commit_acks = quorum + f is what keeps it (and the quorum alone does not). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "redlock.h"

#define T0_US UINT64_C(1000000)
#define TTL_MS 10000
#define DRIFT_US (TTL_MS * 10 + 2000) /* drift_factor 0.01 */

static void fenced_round(redlock_round *r, unsigned n)
{
    assert_int_equal(redlock_round_init(r, n, TTL_MS, 0.01, 0, T0_US), 0);
    assert_int_equal(redlock_round_fencing(r), 0);
    assert_int_equal(r->fence_kind, REDLOCK_ROUND_FENCED);
}

static void yes(redlock_round *r, unsigned node, uint64_t counter, uint64_t at, int expect)
{
    assert_int_equal(redlock_round_vote_counter(r, node, REDLOCK_VOTE_YES, counter, at), expect);
}

/* A won fenced round over n nodes: the first q nodes say yes with the given counters. */
static void won_round(redlock_round *r, unsigned n, const uint64_t *counters, uint64_t at)
{
    fenced_round(r, n);
    unsigned q = n / 2 + 1;
    for (unsigned i = 0; i < q; i++)
        yes(r, i, counters[i], at, i + 1 < q ? REDLOCK_ROUND_PENDING : REDLOCK_ROUND_WON);
}

/* ---- the acquire round ---------------------------------------------------------------------- */

/* The fence is 1 + the largest counter among the yes votes up to the deciding one; yes votes
 * after the decision are recorded but do not move it. */
static void fence_is_one_more_than_the_largest_deciding_counter(void **state)
{
    (void)state;
    redlock_round r;
    fenced_round(&r, 5);
    assert_true(redlock_round_fence(&r) == 0); /* pending: no fence yet */
    yes(&r, 0, 3, T0_US + 10, REDLOCK_ROUND_PENDING);
    assert_int_equal(redlock_round_vote_counter(&r, 1, REDLOCK_VOTE_NO, 99, T0_US + 20),
                     REDLOCK_ROUND_PENDING); /* a no's counter counts for nothing */
    yes(&r, 2, 7, T0_US + 30, REDLOCK_ROUND_PENDING);
    yes(&r, 3, 2, T0_US + 40, REDLOCK_ROUND_WON);
    assert_true(redlock_round_fence(&r) == 8);
    yes(&r, 4, 100, T0_US + 50, REDLOCK_ROUND_WON); /* after the decision */
    assert_true(redlock_round_fence(&r) == 8);
    assert_int_equal(r.votes_yes, 4);
    assert_int_equal(redlock_round_status(&r), 0);
    assert_true(redlock_round_validity_us(&r) == TTL_MS * 1000 - 40 - DRIFT_US);

    /* Nodes without a counter: the first fence is 1. */
    fenced_round(&r, 3);
    yes(&r, 2, 0, T0_US, REDLOCK_ROUND_PENDING);
    yes(&r, 0, 0, T0_US, REDLOCK_ROUND_WON);
    assert_true(redlock_round_fence(&r) == 1);

    /* The largest counter a fence can come from. */
    fenced_round(&r, 1);
    yes(&r, 0, UINT64_MAX - 1, T0_US, REDLOCK_ROUND_WON);
    assert_true(redlock_round_fence(&r) == UINT64_MAX);
}

/* A lost fenced round has no fence, whatever its yes votes read. */
static void lost_round_has_no_fence(void **state)
{
    (void)state;
    redlock_round r;
    fenced_round(&r, 3);
    yes(&r, 0, 41, T0_US, REDLOCK_ROUND_PENDING);
    assert_int_equal(redlock_round_vote(&r, 1, REDLOCK_VOTE_NO, T0_US), REDLOCK_ROUND_PENDING);
    assert_int_equal(redlock_round_vote(&r, 2, REDLOCK_VOTE_TIMEOUT, T0_US), REDLOCK_ROUND_LOST);
    assert_true(redlock_round_fence(&r) == 0);
    assert_int_equal(redlock_round_status(&r), REDLOCK_EBUSY);

    /* A quorum too late is lost too (REDLOCK_EEXPIRED), without a fence. */
    fenced_round(&r, 3);
    yes(&r, 0, 5, T0_US, REDLOCK_ROUND_PENDING);
    yes(&r, 1, 5, T0_US + TTL_MS * 1000 - DRIFT_US, REDLOCK_ROUND_LOST);
    assert_int_equal(redlock_round_status(&r), REDLOCK_EEXPIRED);
    assert_true(redlock_round_fence(&r) == 0);
}

/* A yes without its counter would let the fence miss that node's counter: refused, uncounted;
 * the other votes may come without one. */
static void fenced_round_refuses_a_yes_without_its_counter(void **state)
{
    (void)state;
    redlock_round r;
    fenced_round(&r, 3);
    assert_int_equal(redlock_round_vote(&r, 0, REDLOCK_VOTE_YES, T0_US), REDLOCK_EINVAL);
    assert_int_equal(r.votes_yes, 0);
    assert_int_equal(redlock_round_node_vote(&r, 0), REDLOCK_VOTE_NONE);
    assert_int_equal(redlock_round_vote(&r, 0, REDLOCK_VOTE_ERROR, T0_US), REDLOCK_ROUND_PENDING);
    assert_int_equal(redlock_round_vote(&r, 1, REDLOCK_VOTE_NO, T0_US), REDLOCK_ROUND_LOST);

    /* No fence above UINT64_MAX: such a yes is refused, and the node may vote again. */
    fenced_round(&r, 3);
    yes(&r, 0, UINT64_MAX, T0_US, REDLOCK_EINVAL);
    assert_int_equal(r.votes_yes, 0);
    yes(&r, 0, 1, T0_US, REDLOCK_ROUND_PENDING);
    /* The usual refusals hold too: a second vote, a node out of range, a non-vote. */
    yes(&r, 0, 1, T0_US, REDLOCK_EINVAL);
    yes(&r, 3, 1, T0_US, REDLOCK_EINVAL);
    assert_int_equal(redlock_round_vote_counter(&r, 1, REDLOCK_VOTE_NONE, 1, T0_US),
                     REDLOCK_EINVAL);
    assert_int_equal(r.votes_yes, 1);
}

static void fencing_and_counter_votes_only_where_they_belong(void **state)
{
    (void)state;
    redlock_round r;
    /* A plain round takes no counter vote, and has no fence. */
    assert_int_equal(redlock_round_init(&r, 3, TTL_MS, 0.01, 0, T0_US), 0);
    assert_int_equal(r.fence_kind, REDLOCK_ROUND_PLAIN);
    yes(&r, 0, 1, T0_US, REDLOCK_EINVAL);
    assert_int_equal(redlock_round_vote(&r, 0, REDLOCK_VOTE_YES, T0_US), REDLOCK_ROUND_PENDING);
    assert_int_equal(redlock_round_vote(&r, 1, REDLOCK_VOTE_YES, T0_US), REDLOCK_ROUND_WON);
    assert_true(redlock_round_fence(&r) == 0);
    /* Fencing is for a fresh round: not after a vote, not twice, not on a failed init. */
    assert_int_equal(redlock_round_fencing(&r), REDLOCK_EINVAL);
    fenced_round(&r, 3);
    assert_int_equal(redlock_round_fencing(&r), REDLOCK_EINVAL);
    assert_int_equal(redlock_round_init(&r, 0, TTL_MS, 0.01, 0, T0_US), REDLOCK_EINVAL);
    assert_int_equal(redlock_round_fencing(&r), REDLOCK_EINVAL);
    assert_int_equal(redlock_round_fencing(NULL), REDLOCK_EINVAL);
    assert_int_equal(redlock_round_vote_counter(NULL, 0, REDLOCK_VOTE_YES, 1, T0_US),
                     REDLOCK_EINVAL);
}

/* ---- the commit round ----------------------------------------------------------------------- */

static void commit_init_checks_its_acquire_round(void **state)
{
    (void)state;
    const uint64_t counters[] = {4, 9, 1};
    redlock_round acq, commit;
    /* A plain round, a pending or lost fenced round: no commit. The commit is left zeroed. */
    assert_int_equal(redlock_round_init(&acq, 5, TTL_MS, 0.01, 0, T0_US), 0);
    memset(&commit, 0xab, sizeof(commit));
    assert_int_equal(redlock_round_commit_init(&commit, &acq, 0), REDLOCK_EINVAL);
    assert_int_equal(redlock_round_status(&commit), REDLOCK_EINVAL);
    assert_int_equal(commit.n_nodes, 0);
    fenced_round(&acq, 5);
    assert_int_equal(redlock_round_commit_init(&commit, &acq, 0), REDLOCK_EINVAL);
    assert_int_equal(redlock_round_vote(&acq, 0, REDLOCK_VOTE_NO, T0_US), REDLOCK_ROUND_PENDING);
    assert_int_equal(redlock_round_vote(&acq, 1, REDLOCK_VOTE_NO, T0_US), REDLOCK_ROUND_PENDING);
    assert_int_equal(redlock_round_vote(&acq, 2, REDLOCK_VOTE_NO, T0_US), REDLOCK_ROUND_LOST);
    assert_int_equal(redlock_round_commit_init(&commit, &acq, 0), REDLOCK_EINVAL);
    /* A won one: acks from the quorum (3 of 5) to N; not itself; NULLs refused. */
    won_round(&acq, 5, counters, T0_US + 100);
    assert_int_equal(redlock_round_commit_init(&commit, &acq, 2), REDLOCK_EINVAL);
    assert_int_equal(redlock_round_commit_init(&commit, &acq, 6), REDLOCK_EINVAL);
    assert_int_equal(redlock_round_commit_init(&acq, &acq, 0), REDLOCK_EINVAL);
    assert_int_equal(redlock_round_commit_init(&commit, NULL, 0), REDLOCK_EINVAL);
    assert_int_equal(redlock_round_commit_init(NULL, &acq, 0), REDLOCK_EINVAL);
    for (unsigned acks = 0; acks <= 5; acks = acks == 0 ? 3 : acks + 1) {
        assert_int_equal(redlock_round_commit_init(&commit, &acq, acks), 0);
        assert_int_equal(commit.fence_kind, REDLOCK_ROUND_COMMIT);
        assert_int_equal(commit.quorum, acks == 0 ? 3 : acks);
        assert_int_equal(redlock_round_decision(&commit), REDLOCK_ROUND_PENDING);
        assert_int_equal(redlock_round_status(&commit), REDLOCK_EAGAIN);
        /* The fence to commit is known before any vote; the acquire round is unchanged. */
        assert_true(redlock_round_fence(&commit) == 10);
        assert_true(redlock_round_fence(&acq) == 10);
        assert_int_equal(acq.votes_yes, 3);
    }
    /* The commit round takes plain votes. */
    yes(&commit, 0, 1, T0_US, REDLOCK_EINVAL);
    assert_int_equal(redlock_round_fencing(&commit), REDLOCK_EINVAL);
}

/* Won with the quorum of acks by default, validity counted from the acquire's start. */
static void commit_won_by_the_quorum_with_validity_from_the_acquire_start(void **state)
{
    (void)state;
    const uint64_t counters[] = {4, 9, 1};
    redlock_round acq, commit;
    won_round(&acq, 5, counters, T0_US + 100);
    assert_int_equal(redlock_round_commit_init(&commit, &acq, 0), 0);
    const uint64_t t = T0_US + 2500; /* both rounds took 2.5 ms */
    assert_int_equal(redlock_round_vote(&commit, 4, REDLOCK_VOTE_NO, t), REDLOCK_ROUND_PENDING);
    assert_int_equal(redlock_round_vote(&commit, 0, REDLOCK_VOTE_YES, t), REDLOCK_ROUND_PENDING);
    assert_int_equal(redlock_round_vote(&commit, 1, REDLOCK_VOTE_YES, t), REDLOCK_ROUND_PENDING);
    assert_int_equal(redlock_round_vote(&commit, 2, REDLOCK_VOTE_YES, t), REDLOCK_ROUND_WON);
    assert_int_equal(redlock_round_status(&commit), 0);
    assert_true(redlock_round_validity_us(&commit) == TTL_MS * 1000 - 2500 - DRIFT_US);
    assert_true(redlock_round_fence(&commit) == 10);
    assert_true(commit.decided_us == t);
}

/* fence_commit above the quorum: won only with that many acks, lost as soon as they are out of
 * reach. */
static void commit_needs_fence_commit_acks(void **state)
{
    (void)state;
    const uint64_t counters[] = {0, 0, 0};
    redlock_round acq, commit;
    won_round(&acq, 5, counters, T0_US);
    assert_int_equal(redlock_round_commit_init(&commit, &acq, 4), 0);
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(redlock_round_vote(&commit, i, REDLOCK_VOTE_YES, T0_US + 1),
                         REDLOCK_ROUND_PENDING); /* the quorum is not enough */
    assert_int_equal(redlock_round_vote(&commit, 3, REDLOCK_VOTE_YES, T0_US + 2),
                     REDLOCK_ROUND_WON);

    assert_int_equal(redlock_round_commit_init(&commit, &acq, 4), 0);
    assert_int_equal(redlock_round_vote(&commit, 0, REDLOCK_VOTE_YES, T0_US),
                     REDLOCK_ROUND_PENDING);
    assert_int_equal(redlock_round_vote(&commit, 1, REDLOCK_VOTE_TIMEOUT, T0_US),
                     REDLOCK_ROUND_PENDING); /* one failure of 5 leaves 4 possible */
    assert_int_equal(redlock_round_vote(&commit, 2, REDLOCK_VOTE_NO, T0_US), REDLOCK_ROUND_LOST);
    assert_int_equal(redlock_round_status(&commit), REDLOCK_EBUSY); /* a tie counts as busy */

    /* All N: any failure loses it. */
    assert_int_equal(redlock_round_commit_init(&commit, &acq, 5), 0);
    assert_int_equal(redlock_round_vote(&commit, 0, REDLOCK_VOTE_ERROR, T0_US), REDLOCK_ROUND_LOST);
    assert_int_equal(redlock_round_status(&commit), REDLOCK_ENOQUORUM);
}

/* The validity covers both rounds: a commit that completes after the acquire's start + ttl -
 * drift is lost (REDLOCK_EEXPIRED), even though the acquire round was won in time; and
 * min_validity applies to the commit's win. */
static void commit_too_late_is_expired(void **state)
{
    (void)state;
    const uint64_t counters[] = {2, 2, 2};
    redlock_round acq, commit;
    const uint64_t end = T0_US + TTL_MS * 1000 - DRIFT_US; /* validity is 0 from here */
    won_round(&acq, 5, counters, T0_US + 1000);
    assert_int_equal(redlock_round_commit_init(&commit, &acq, 0), 0);
    assert_int_equal(redlock_round_vote(&commit, 0, REDLOCK_VOTE_YES, end - 2),
                     REDLOCK_ROUND_PENDING);
    assert_int_equal(redlock_round_vote(&commit, 1, REDLOCK_VOTE_YES, end - 2),
                     REDLOCK_ROUND_PENDING);
    assert_int_equal(redlock_round_vote(&commit, 2, REDLOCK_VOTE_YES, end - 1), REDLOCK_ROUND_WON);
    assert_true(redlock_round_validity_us(&commit) == 1);

    assert_int_equal(redlock_round_commit_init(&commit, &acq, 0), 0);
    assert_int_equal(redlock_round_vote(&commit, 0, REDLOCK_VOTE_YES, end), REDLOCK_ROUND_PENDING);
    assert_int_equal(redlock_round_vote(&commit, 1, REDLOCK_VOTE_YES, end), REDLOCK_ROUND_PENDING);
    assert_int_equal(redlock_round_vote(&commit, 2, REDLOCK_VOTE_YES, end), REDLOCK_ROUND_LOST);
    assert_int_equal(redlock_round_status(&commit), REDLOCK_EEXPIRED);
    assert_true(redlock_round_validity_us(&commit) == 0);

    /* min_validity 5 s: the acquire round (validity 9.897 s at 1 ms) is won, the commit 4.9 s
     * after the start (validity 4.998 s) is not. */
    assert_int_equal(redlock_round_init(&acq, 3, TTL_MS, 0.01, 5000, T0_US), 0);
    assert_int_equal(redlock_round_fencing(&acq), 0);
    yes(&acq, 0, 1, T0_US + 1000, REDLOCK_ROUND_PENDING);
    yes(&acq, 1, 1, T0_US + 1000, REDLOCK_ROUND_WON);
    assert_int_equal(redlock_round_commit_init(&commit, &acq, 0), 0);
    assert_int_equal(redlock_round_vote(&commit, 0, REDLOCK_VOTE_YES, T0_US + 4900000),
                     REDLOCK_ROUND_PENDING);
    assert_int_equal(redlock_round_vote(&commit, 1, REDLOCK_VOTE_YES, T0_US + 4900000),
                     REDLOCK_ROUND_LOST);
    assert_int_equal(redlock_round_status(&commit), REDLOCK_EEXPIRED);
}

/* A commit that loses on errors and timeouts: ENOQUORUM; on "not ours" votes: EBUSY. */
static void commit_lost(void **state)
{
    (void)state;
    const uint64_t counters[] = {1, 1, 1, 1};
    redlock_round acq, commit;
    won_round(&acq, 7, counters, T0_US);
    assert_int_equal(redlock_round_commit_init(&commit, &acq, 0), 0);
    assert_int_equal(redlock_round_vote(&commit, 0, REDLOCK_VOTE_YES, T0_US),
                     REDLOCK_ROUND_PENDING);
    assert_int_equal(redlock_round_vote(&commit, 1, REDLOCK_VOTE_ERROR, T0_US),
                     REDLOCK_ROUND_PENDING);
    assert_int_equal(redlock_round_vote(&commit, 2, REDLOCK_VOTE_TIMEOUT, T0_US),
                     REDLOCK_ROUND_PENDING);
    assert_int_equal(redlock_round_vote(&commit, 3, REDLOCK_VOTE_NO, T0_US), REDLOCK_ROUND_PENDING);
    assert_int_equal(redlock_round_vote(&commit, 4, REDLOCK_VOTE_ERROR, T0_US), REDLOCK_ROUND_LOST);
    assert_int_equal(redlock_round_status(&commit), REDLOCK_ENOQUORUM);
    /* The fence stays what it was to be; the caller must not use it: the round is lost. */
    assert_true(redlock_round_fence(&commit) == 2);
    /* Votes after the decision are recorded, count for nothing. */
    assert_int_equal(redlock_round_vote(&commit, 5, REDLOCK_VOTE_YES, T0_US), REDLOCK_ROUND_LOST);
    assert_int_equal(commit.votes_yes, 2);
}

/* ---- model checks --------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Random vote orders: the core's fence equals 1 + the largest counter among the yes votes up to
 * the one that made the yes count reach the quorum (recounted here from scratch). */
static void fence_matches_an_oracle(void **state)
{
    (void)state;
    uint64_t seed = 12;
    for (unsigned iter = 0; iter < 20000; iter++) {
        unsigned n = 1 + (unsigned)(splitmix64(&seed) % 9);
        redlock_round r;
        fenced_round(&r, n);
        unsigned q = n / 2 + 1, yes_seen = 0, fails = 0;
        uint64_t oracle_max = 0;
        bool decided = false, won = false;
        unsigned order[9];
        for (unsigned i = 0; i < n; i++)
            order[i] = i;
        for (unsigned i = n; i > 1; i--) {
            unsigned j = (unsigned)(splitmix64(&seed) % i), t = order[i - 1];
            order[i - 1] = order[j];
            order[j] = t;
        }
        for (unsigned k = 0; k < n; k++) {
            uint64_t draw = splitmix64(&seed);
            redlock_vote v = (redlock_vote)(REDLOCK_VOTE_YES + draw % 4);
            if (draw % 3 == 0)
                v = REDLOCK_VOTE_YES; /* more wins */
            uint64_t counter = (draw >> 8) % 1000;
            if (draw % 97 == 0)
                counter = UINT64_MAX - 1 - (draw >> 60); /* near the top */
            int got = redlock_round_vote_counter(&r, order[k], v, counter, T0_US + k);
            assert_true(got >= 0);
            if (!decided) {
                if (v == REDLOCK_VOTE_YES) {
                    yes_seen++;
                    if (counter > oracle_max)
                        oracle_max = counter;
                } else {
                    fails++;
                }
                if (yes_seen >= q)
                    decided = won = true;
                else if (fails > n - q)
                    decided = true;
            }
        }
        assert_int_equal(redlock_round_decision(&r), won ? REDLOCK_ROUND_WON : REDLOCK_ROUND_LOST);
        if (redlock_round_fence(&r) != (won ? oracle_max + 1 : 0))
            fail_msg("iteration %u, n %u: fence %llu, oracle %llu", iter, n,
                     (unsigned long long)redlock_round_fence(&r),
                     (unsigned long long)(won ? oracle_max + 1 : 0));
    }
}

/* One grant on the model: a fenced acquire whose yes voters are the nodes of yes_mask (in node
 * order) reading counters[], then a commit acked by the nodes of commit_mask (which must be
 * among those that hold the key: the yes voters), which raise their counters. Returns the
 * fence granted, or 0 if the core did not grant it. */
static uint64_t grant(unsigned n, uint64_t *counters, unsigned yes_mask, unsigned commit_mask,
                      unsigned acks)
{
    redlock_round acq, commit;
    fenced_round(&acq, n);
    for (unsigned i = 0; i < n; i++)
        redlock_round_vote_counter(&acq, i, yes_mask >> i & 1 ? REDLOCK_VOTE_YES : REDLOCK_VOTE_NO,
                                   counters[i], T0_US);
    if (redlock_round_decision(&acq) != REDLOCK_ROUND_WON)
        return 0;
    assert_int_equal(redlock_round_commit_init(&commit, &acq, acks), 0);
    uint64_t fence = redlock_round_fence(&commit);
    for (unsigned i = 0; i < n; i++) {
        bool acked = (commit_mask >> i & 1) != 0;
        if (acked && fence > counters[i])
            counters[i] = fence; /* what the commit script does where the token stands */
        redlock_round_vote(&commit, i, acked ? REDLOCK_VOTE_YES : REDLOCK_VOTE_NO, T0_US + 1);
    }
    return redlock_round_decision(&commit) == REDLOCK_ROUND_WON ? redlock_round_fence(&commit) : 0;
}

static unsigned popcount(unsigned x)
{
    unsigned c = 0;
    for (; x != 0; x &= x - 1)
        c++;
    return c;
}

/* Two grants in a row, with `forget` nodes losing their counter between them (a restart without
 * data), over every choice of the first grant's yes and commit sets, the forgetting nodes and
 * the second grant's quorum of yes voters. Returns how many of those choices gave the second
 * grant a fence not above the first's. */
static unsigned count_fences_that_do_not_grow(unsigned n, unsigned acks, unsigned forget)
{
    unsigned q = n / 2 + 1, bad = 0;
    unsigned all = (1u << n) - 1;
    for (unsigned yes1 = 0; yes1 <= all; yes1++) {
        if (popcount(yes1) < q)
            continue;
        for (unsigned commit1 = yes1;; commit1 = (commit1 - 1) & yes1) { /* subsets of yes1 */
            if (popcount(commit1) >= acks) {
                for (unsigned lost = 0; lost <= all; lost++) {
                    if (popcount(lost) != forget)
                        continue;
                    for (unsigned yes2 = 0; yes2 <= all; yes2++) {
                        if (popcount(yes2) != q)
                            continue;
                        uint64_t counters[8];
                        for (unsigned i = 0; i < n; i++)
                            counters[i] = 5 + i % 3; /* some history */
                        uint64_t f1 = grant(n, counters, yes1, commit1, acks);
                        assert_true(f1 != 0);
                        for (unsigned i = 0; i < n; i++)
                            if (lost >> i & 1)
                                counters[i] = 0;
                        uint64_t f2 = grant(n, counters, yes2, yes2, 0);
                        assert_true(f2 != 0);
                        if (f2 <= f1)
                            bad++;
                    }
                }
            }
            if (commit1 == 0)
                break;
        }
    }
    return bad;
}

/* The property, on the model: with counters kept, every quorum of a later acquire reads the
 * earlier fence somewhere. With f nodes losing theirs, a commit set and a later quorum must
 * share f + 1 nodes: commit_acks >= N - quorum + f + 1, which quorum + f always is (for an even
 * N, one less would do); one ack fewer than that shows the broken assumption. */
static void later_grants_get_larger_fences(void **state)
{
    (void)state;
    for (unsigned n = 1; n <= 7; n++) {
        unsigned q = n / 2 + 1;
        if (count_fences_that_do_not_grow(n, q, 0) != 0)
            fail_msg("n %u: a later grant got a fence not above an earlier one", n);
        for (unsigned f = 1; q + f <= n; f++) {
            unsigned need = n - q + f + 1 > q ? n - q + f + 1 : q;
            if (count_fences_that_do_not_grow(n, q + f, f) != 0 ||
                count_fences_that_do_not_grow(n, need, f) != 0)
                fail_msg("n %u, %u forgetting nodes, commit_acks %u or %u: a fence did not grow", n,
                         f, q + f, need);
            if (need - 1 >= q && count_fences_that_do_not_grow(n, need - 1, f) == 0)
                fail_msg("n %u, %u forgetting nodes, commit_acks %u: expected a fence that does "
                         "not grow (the negative control)",
                         n, f, need - 1);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fence_is_one_more_than_the_largest_deciding_counter),
        cmocka_unit_test(lost_round_has_no_fence),
        cmocka_unit_test(fenced_round_refuses_a_yes_without_its_counter),
        cmocka_unit_test(fencing_and_counter_votes_only_where_they_belong),
        cmocka_unit_test(commit_init_checks_its_acquire_round),
        cmocka_unit_test(commit_won_by_the_quorum_with_validity_from_the_acquire_start),
        cmocka_unit_test(commit_needs_fence_commit_acks),
        cmocka_unit_test(commit_too_late_is_expired),
        cmocka_unit_test(commit_lost),
        cmocka_unit_test(fence_matches_an_oracle),
        cmocka_unit_test(later_grants_get_larger_fences),
    };
    return cmocka_run_group_tests_name("fence", tests, NULL, NULL);
}
