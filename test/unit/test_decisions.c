/* SPDX-License-Identifier: MIT */
/* test_decisions.c - the decisions of the quorum core beyond one round's won or lost
 * (lib/core/quorum.h, the internal side): a waiter's wait, a quorum of nodes in a mask, a quorum
 * gone, and what the layers above read of a round. Each against an oracle written the obvious
 * way (a sort, a bit count), over every small case and random large ones; the proofs
 * (test/model/run wp) say the same for every case. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "quorum.h"

#define T0_US UINT64_C(1000000)

/* xorshift64: the same cases on every run. */
static uint64_t rng_state = UINT64_C(0x9e3779b97f4a7c15);
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The oracle: the quorum-th shortest of the waits the nodes gave (a yes: 0; a no with a wait:
 * that wait), or -1 when fewer than a quorum gave one. */
static int64_t oracle_wait_ms(const redlock_round *q, const int64_t *wait_ms, unsigned n)
{
    int64_t given[REDLOCK_MAX_NODES];
    unsigned k = 0;
    for (unsigned i = 0; i < n; i++) {
        redlock_vote v = redlock_round_node_vote(q, i);
        if (v == REDLOCK_VOTE_YES)
            given[k++] = 0;
        else if (v == REDLOCK_VOTE_NO && wait_ms[i] >= 0)
            given[k++] = wait_ms[i];
    }
    unsigned quorum = redlock_quorum_of(n);
    if (k < quorum)
        return -1;
    qsort(given, k, sizeof(given[0]), cmp_i64);
    return given[quorum - 1];
}

/* A round over n nodes that took votes[i] from node i (REDLOCK_VOTE_NONE: no vote), in order;
 * votes after the decision are still recorded per node. */
static void voted_round(redlock_round *q, unsigned n, const redlock_vote *votes)
{
    assert_int_equal(redlock_round_init(q, n, 10000, 0.01, 0, T0_US), 0);
    for (unsigned i = 0; i < n; i++)
        if (votes[i] != REDLOCK_VOTE_NONE)
            assert_true(redlock_round_vote(q, i, votes[i], T0_US + 10 + i) >= 0);
}

/* Every vote and wait of up to 5 nodes, waits from {-1, 0, 5, 9} (ties among nodes included). */
static void wait_is_the_quorum_th_shortest_every_small_case(void **state)
{
    (void)state;
    static const int64_t choices[] = {-1, 0, 5, 9};
    unsigned cases = 0;
    for (unsigned n = 1; n <= 5; n++) {
        unsigned per_node = 5 * 4; /* vote (5 kinds) x wait (4 choices) */
        unsigned total = 1;
        for (unsigned i = 0; i < n; i++)
            total *= per_node;
        for (unsigned c = 0; c < total; c++) {
            redlock_vote votes[5];
            int64_t waits[5];
            unsigned x = c;
            for (unsigned i = 0; i < n; i++) {
                votes[i] = (redlock_vote)(x % 5);
                waits[i] = choices[(x / 5) % 4];
                x /= per_node;
            }
            redlock_round q;
            voted_round(&q, n, votes);
            assert_true(redlock__quorum_wait_ms(&q, waits) == oracle_wait_ms(&q, waits, n));
            cases++;
        }
    }
    assert_true(cases > 3000000u);
}

static void wait_is_the_quorum_th_shortest_random_large(void **state)
{
    (void)state;
    for (unsigned t = 0; t < 20000; t++) {
        unsigned n = 1 + (unsigned)(rng() % REDLOCK_MAX_NODES);
        redlock_vote votes[REDLOCK_MAX_NODES];
        int64_t waits[REDLOCK_MAX_NODES];
        for (unsigned i = 0; i < n; i++) {
            votes[i] = (redlock_vote)(rng() % 5);
            uint64_t r = rng();
            waits[i] = r % 7 == 0 ? -1 : (int64_t)(r % 40000);
        }
        redlock_round q;
        voted_round(&q, n, votes);
        assert_true(redlock__quorum_wait_ms(&q, waits) == oracle_wait_ms(&q, waits, n));
    }
}

/* A no that gave no wait (an old server's reply, a script's error) lets nobody in: with two of
 * three nodes so, no wait is known. */
static void wait_unknown_without_a_quorum_of_waits(void **state)
{
    (void)state;
    redlock_round q;
    const redlock_vote votes[3] = {REDLOCK_VOTE_NO, REDLOCK_VOTE_NO, REDLOCK_VOTE_TIMEOUT};
    voted_round(&q, 3, votes);
    const int64_t waits[3] = {700, -1, 5};
    assert_true(redlock__quorum_wait_ms(&q, waits) == -1);
    const int64_t waits2[3] = {700, 300, 5};
    assert_true(redlock__quorum_wait_ms(&q, waits2) == 700);
}

static void mask_quorum_is_a_majority_of_the_low_bits(void **state)
{
    (void)state;
    for (unsigned t = 0; t < 100000; t++) {
        unsigned n = (unsigned)(rng() % (REDLOCK_MAX_NODES + 1));
        uint64_t mask = rng();
        unsigned bits = 0;
        for (unsigned i = 0; i < n; i++)
            bits += (unsigned)((mask >> i) & 1u);
        assert_int_equal(redlock__count_nodes(mask, n), bits);
        assert_int_equal(redlock__mask_quorum(mask, n), bits >= n / 2 + 1);
    }
    /* Bits above n count for nothing: a grant of a node the client does not have. */
    assert_false(redlock__mask_quorum(UINT64_C(0xF8), 5));
    assert_true(redlock__mask_quorum(UINT64_C(0x07), 5));
}

static void quorum_gone_when_more_than_n_minus_quorum_are_free(void **state)
{
    (void)state;
    for (unsigned n = 1; n <= REDLOCK_MAX_NODES; n++)
        for (unsigned f = 0; f <= n; f++)
            /* Gone exactly when those still holding are fewer than a quorum. */
            assert_int_equal(redlock__quorum_gone(f, n), n - f < redlock_quorum_of(n));
    assert_false(redlock__quorum_gone(2, 5));
    assert_true(redlock__quorum_gone(3, 5));
}

static void round_readers_say_what_the_round_holds(void **state)
{
    (void)state;
    redlock_round q;
    const redlock_vote votes[5] = {REDLOCK_VOTE_YES, REDLOCK_VOTE_NO, REDLOCK_VOTE_YES,
                                   REDLOCK_VOTE_ERROR, REDLOCK_VOTE_YES};
    voted_round(&q, 5, votes);
    assert_int_equal(redlock_round_decision(&q), REDLOCK_ROUND_WON);
    assert_true(redlock__round_start_us(&q) == T0_US);
    assert_true(redlock__round_decided_us(&q) == T0_US + 14); /* node 4's vote decided it */
    assert_true(redlock__round_deadline_us(&q) ==
                redlock__round_decided_us(&q) + redlock_round_validity_us(&q));
    redlock_result res;
    memset(&res, 0xff, sizeof(res));
    redlock__round_tally(&q, &res);
    assert_int_equal(res.votes_yes, 3);
    assert_int_equal(res.votes_no, 1);
    assert_int_equal(res.votes_error, 1);
    assert_int_equal(res.votes_timeout, 0);
    assert_true(redlock__round_any_yes(&q));

    const redlock_vote nos[3] = {REDLOCK_VOTE_NO, REDLOCK_VOTE_NO, REDLOCK_VOTE_NONE};
    voted_round(&q, 3, nos);
    assert_false(redlock__round_any_yes(&q));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(wait_is_the_quorum_th_shortest_every_small_case),
        cmocka_unit_test(wait_is_the_quorum_th_shortest_random_large),
        cmocka_unit_test(wait_unknown_without_a_quorum_of_waits),
        cmocka_unit_test(mask_quorum_is_a_majority_of_the_low_bits),
        cmocka_unit_test(quorum_gone_when_more_than_n_minus_quorum_are_free),
        cmocka_unit_test(round_readers_say_what_the_round_holds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
