/* SPDX-License-Identifier: MIT */
/* test_quorum.c - the quorum core (redlock_round_*) and the error table, driven by a fake clock.
 *
 * The core is pure, so every test here is exact: no sleeps, no tolerance on time. The
 * exhaustive tests compare the core with an oracle written independently below: it recounts the
 * votes from scratch after every arrival and applies the rules of DESIGN.md literally, in signed
 * arithmetic. One cmocka group, so the TAP output has a single plan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <uv.h>

#include "redlock.h"

#define T0_US UINT64_C(1000000) /* the fake clock's start: not 0, so decided_us 0 means pending */

/* ---------------------------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------------------------- */

static void init_ok(redlock_round *round, unsigned n, uint64_t ttl_ms, double drift_factor,
                    uint64_t min_validity_ms, uint64_t start_us)
{
    assert_int_equal(redlock_round_init(round, n, ttl_ms, drift_factor, min_validity_ms, start_us),
                     0);
    assert_int_equal(redlock_round_decision(round), REDLOCK_ROUND_PENDING);
    assert_int_equal(redlock_round_status(round), REDLOCK_EAGAIN);
}

/* Vote and check the returned decision. */
static void vote_expect(redlock_round *round, unsigned node, redlock_vote vote, uint64_t now_us,
                        int expected)
{
    assert_int_equal(redlock_round_vote(round, node, vote, now_us), expected);
}

/* The smallest q with 2q > n, found by counting rather than by the formula the core uses. */
static unsigned oracle_quorum(unsigned n)
{
    unsigned q = 0;
    while (2 * q <= n)
        q++;
    return q;
}

/* splitmix64: a seeded, reproducible shuffle source with no global state. */
static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static void shuffle(unsigned *order, unsigned n, uint64_t seed)
{
    for (unsigned i = n; i > 1; i--) {
        unsigned j = (unsigned)(splitmix64(&seed) % i);
        unsigned tmp = order[i - 1];
        order[i - 1] = order[j];
        order[j] = tmp;
    }
}

/* Next permutation in lexicographic order; false after the last one. */
static bool next_permutation(unsigned *a, unsigned n)
{
    if (n < 2)
        return false;
    unsigned i = n - 1;
    while (i > 0 && a[i - 1] >= a[i])
        i--;
    if (i == 0)
        return false;
    unsigned j = n - 1;
    while (a[j] <= a[i - 1])
        j--;
    unsigned tmp = a[i - 1];
    a[i - 1] = a[j];
    a[j] = tmp;
    for (unsigned lo = i, hi = n - 1; lo < hi; lo++, hi--) {
        tmp = a[lo];
        a[lo] = a[hi];
        a[hi] = tmp;
    }
    return true;
}

/* ---------------------------------------------------------------------------------------------
 * Exhaustive: every vote vector for N = 1..9, in many arrival orders, against the oracle
 * ------------------------------------------------------------------------------------------- */

/* The exhaustive rounds: ttl 10 ms, drift_factor 0 (drift 2 ms), so the validity at the k-th
 * arrival (k from 1, one arrival every step_us) is 8000 - k * step_us. The steps used make some
 * wins come too late (EEXPIRED), one of them exactly at validity 0. */
#define EX_TTL_MS 10
#define EX_TTL_US 10000
#define EX_DRIFT_US 2000

typedef struct oracle_state {
    bool decided;
    redlock_decision decision;
    int status;
    uint64_t decided_us, validity_us;
} oracle_state;

#define EX_CHECK(cond, what)                                                                       \
    do {                                                                                           \
        if (!(cond))                                                                               \
            fail_msg("%s: n=%u vector=0x%x step=%u arrival=%u", what, n, (unsigned)vector,         \
                     (unsigned)step_us, k);                                                        \
    } while (0)

/* Feed the votes of `vector` (2 bits per node: 0 yes, 1 no, 2 error, 3 timeout) in `order` and
 * check every step against the oracle. */
static int check_order(unsigned n, uint32_t vector, const unsigned *order, uint64_t step_us)
{
    redlock_vote votes[16];
    for (unsigned i = 0; i < n; i++)
        votes[i] = (redlock_vote)(REDLOCK_VOTE_YES + ((vector >> (2 * i)) & 3));

    redlock_round round;
    unsigned k = 0;
    EX_CHECK(redlock_round_init(&round, n, EX_TTL_MS, 0.0, 0, T0_US) == 0, "init");
    const unsigned quorum = oracle_quorum(n);
    oracle_state want = {false, REDLOCK_ROUND_PENDING, REDLOCK_EAGAIN, 0, 0};

    for (k = 1; k <= n; k++) {
        uint64_t now_us = T0_US + k * step_us;
        int got = redlock_round_vote(&round, order[k - 1], votes[order[k - 1]], now_us);

        /* Oracle: recount the first k arrivals from scratch. */
        unsigned yes = 0, no = 0, error = 0, timeout = 0;
        for (unsigned j = 0; j < k; j++) {
            switch (votes[order[j]]) {
            case REDLOCK_VOTE_YES:
                yes++;
                break;
            case REDLOCK_VOTE_NO:
                no++;
                break;
            case REDLOCK_VOTE_ERROR:
                error++;
                break;
            case REDLOCK_VOTE_TIMEOUT:
                timeout++;
                break;
            case REDLOCK_VOTE_NONE:
                fail_msg("vector decoding produced no vote");
            }
        }
        if (!want.decided) {
            if (yes >= quorum) {
                int64_t validity = (int64_t)EX_TTL_US - (int64_t)(k * step_us) - EX_DRIFT_US;
                want.decided = true;
                want.decided_us = now_us;
                if (validity > 0) {
                    want.decision = REDLOCK_ROUND_WON;
                    want.status = 0;
                    want.validity_us = (uint64_t)validity;
                } else {
                    want.decision = REDLOCK_ROUND_LOST;
                    want.status = REDLOCK_EEXPIRED;
                }
            } else if (no + error + timeout > n - quorum) {
                want.decided = true;
                want.decided_us = now_us;
                want.decision = REDLOCK_ROUND_LOST;
                want.status = no >= error + timeout ? REDLOCK_EBUSY : REDLOCK_ENOQUORUM;
            }
        }

        EX_CHECK(got == (int)want.decision, "returned decision");
        EX_CHECK(redlock_round_decision(&round) == want.decision, "decision");
        EX_CHECK(redlock_round_status(&round) == want.status, "status");
        EX_CHECK(redlock_round_validity_us(&round) == want.validity_us, "validity");
        EX_CHECK(round.decided_us == want.decided_us, "decided_us");
        EX_CHECK(round.votes_yes == yes && round.votes_no == no && round.votes_error == error &&
                     round.votes_timeout == timeout,
                 "counters");
    }
    k = n;
    /* The last vote decides at the latest: a full round is never left pending. */
    EX_CHECK(want.decided, "oracle decided");
    EX_CHECK(round.voted_mask == (UINT64_C(1) << n) - 1, "voted_mask");
    for (unsigned i = 0; i < n; i++)
        EX_CHECK(redlock_round_node_vote(&round, i) == votes[i], "node vote");
    return want.status;
}

/* How often each outcome came up: proves the sweep reaches every branch of the rules. */
typedef struct outcome_tally {
    unsigned long won, busy, noquorum, expired;
} outcome_tally;

static void tally(outcome_tally *t, int status)
{
    switch (status) {
    case 0:
        t->won++;
        break;
    case REDLOCK_EBUSY:
        t->busy++;
        break;
    case REDLOCK_ENOQUORUM:
        t->noquorum++;
        break;
    case REDLOCK_EEXPIRED:
        t->expired++;
        break;
    default:
        fail_msg("unexpected final status %d", status);
    }
}

static void assert_all_outcomes(const outcome_tally *t)
{
    assert_true(t->won > 0);
    assert_true(t->busy > 0);
    assert_true(t->noquorum > 0);
    assert_true(t->expired > 0);
}

/* Steps between arrivals: with 2000 us a win at the 4th arrival has validity exactly 0. */
static uint64_t step_for(unsigned order_index)
{
    return 500 + 500 * (uint64_t)(order_index % 4); /* 500, 1000, 1500, 2000 */
}

static void test_exhaustive_all_orders(void **state)
{
    (void)state;
    unsigned long rounds = 0;
    outcome_tally outcomes = {0, 0, 0, 0};
    for (unsigned n = 1; n <= 5; n++) {
        for (uint32_t vector = 0; vector < (UINT32_C(1) << (2 * n)); vector++) {
            unsigned order[5] = {0, 1, 2, 3, 4};
            unsigned index = 0;
            do {
                tally(&outcomes, check_order(n, vector, order, step_for(index++)));
                rounds++;
            } while (next_permutation(order, n));
        }
    }
    /* sum over n = 1..5 of 4^n * n! */
    assert_int_equal(rounds, 4 * 1 + 16 * 2 + 64 * 6 + 256 * 24 + 1024 * 120);
    assert_all_outcomes(&outcomes);
}

static void test_exhaustive_sampled_orders(void **state)
{
    (void)state;
    outcome_tally outcomes = {0, 0, 0, 0};
    for (unsigned n = 6; n <= 9; n++) {
        for (uint32_t vector = 0; vector < (UINT32_C(1) << (2 * n)); vector++) {
            unsigned order[9];
            for (unsigned i = 0; i < n; i++)
                order[i] = i;
            tally(&outcomes, check_order(n, vector, order, step_for(vector))); /* forward */
            for (unsigned i = 0; i < n; i++)
                order[i] = n - 1 - i;
            tally(&outcomes, check_order(n, vector, order, step_for(vector + 1))); /* reverse */
            for (unsigned s = 0; s < 3; s++) {
                uint64_t seed = ((uint64_t)n << 40) ^ ((uint64_t)vector << 8) ^ s;
                shuffle(order, n, seed);
                tally(&outcomes, check_order(n, vector, order, step_for(vector + 2 + s)));
            }
        }
    }
    assert_all_outcomes(&outcomes);
}

/* ---------------------------------------------------------------------------------------------
 * Early decisions and the status classification
 * ------------------------------------------------------------------------------------------- */

static void test_early_win(void **state)
{
    (void)state;
    redlock_round r;
    init_ok(&r, 5, 1000, 0.01, 0, T0_US);
    vote_expect(&r, 4, REDLOCK_VOTE_YES, T0_US + 100, REDLOCK_ROUND_PENDING);
    vote_expect(&r, 0, REDLOCK_VOTE_YES, T0_US + 200, REDLOCK_ROUND_PENDING);
    vote_expect(&r, 2, REDLOCK_VOTE_YES, T0_US + 300, REDLOCK_ROUND_WON);
    /* won with two votes still missing */
    assert_int_equal(redlock_round_status(&r), 0);
    assert_int_equal(r.decided_us, T0_US + 300);
    /* ttl 1e6 us, drift 10000 + 2000 */
    assert_int_equal(redlock_round_drift_us(&r), 12000);
    assert_int_equal(redlock_round_validity_us(&r), 1000000 - 300 - 12000);
    assert_int_equal(redlock_round_node_vote(&r, 1), REDLOCK_VOTE_NONE);
    assert_int_equal(redlock_round_node_vote(&r, 3), REDLOCK_VOTE_NONE);
}

static void test_early_loss_busy(void **state)
{
    (void)state;
    redlock_round r;
    init_ok(&r, 5, 1000, 0.01, 0, T0_US);
    vote_expect(&r, 1, REDLOCK_VOTE_NO, T0_US + 10, REDLOCK_ROUND_PENDING);
    vote_expect(&r, 3, REDLOCK_VOTE_YES, T0_US + 20, REDLOCK_ROUND_PENDING);
    vote_expect(&r, 0, REDLOCK_VOTE_NO, T0_US + 30, REDLOCK_ROUND_PENDING);
    vote_expect(&r, 2, REDLOCK_VOTE_TIMEOUT, T0_US + 40, REDLOCK_ROUND_LOST);
    /* 3 failures > 5 - 3 with one vote missing; no (2) >= error + timeout (1) */
    assert_int_equal(redlock_round_status(&r), REDLOCK_EBUSY);
    assert_int_equal(r.decided_us, T0_US + 40);
    assert_int_equal(redlock_round_validity_us(&r), 0);
}

static void test_early_loss_noquorum(void **state)
{
    (void)state;
    redlock_round r;
    init_ok(&r, 5, 1000, 0.01, 0, T0_US);
    vote_expect(&r, 0, REDLOCK_VOTE_ERROR, T0_US + 10, REDLOCK_ROUND_PENDING);
    vote_expect(&r, 1, REDLOCK_VOTE_NO, T0_US + 20, REDLOCK_ROUND_PENDING);
    vote_expect(&r, 2, REDLOCK_VOTE_TIMEOUT, T0_US + 30, REDLOCK_ROUND_LOST);
    /* no (1) < error + timeout (2) */
    assert_int_equal(redlock_round_status(&r), REDLOCK_ENOQUORUM);
    assert_int_equal(redlock_round_validity_us(&r), 0);
}

static void test_status_tie_is_busy(void **state)
{
    (void)state;
    redlock_round r;
    /* N = 3: quorum 2, lost at the second failure. no 1 == error 1: held elsewhere wins ties. */
    init_ok(&r, 3, 1000, 0.01, 0, T0_US);
    vote_expect(&r, 0, REDLOCK_VOTE_ERROR, T0_US + 1, REDLOCK_ROUND_PENDING);
    vote_expect(&r, 1, REDLOCK_VOTE_NO, T0_US + 2, REDLOCK_ROUND_LOST);
    assert_int_equal(redlock_round_status(&r), REDLOCK_EBUSY);
    /* Status is classified at the decision: later timeouts do not turn it into ENOQUORUM. */
    vote_expect(&r, 2, REDLOCK_VOTE_TIMEOUT, T0_US + 3, REDLOCK_ROUND_LOST);
    assert_int_equal(redlock_round_status(&r), REDLOCK_EBUSY);
    assert_int_equal(r.votes_timeout, 1);
}

/* ---------------------------------------------------------------------------------------------
 * Validity, drift, clock
 * ------------------------------------------------------------------------------------------- */

/* A single-node round (quorum 1) decided by one yes at start + elapsed_us. */
static redlock_round one_yes(uint64_t ttl_ms, double drift_factor, uint64_t min_validity_ms,
                             uint64_t start_us, uint64_t now_us)
{
    redlock_round r;
    init_ok(&r, 1, ttl_ms, drift_factor, min_validity_ms, start_us);
    assert_true(redlock_round_vote(&r, 0, REDLOCK_VOTE_YES, now_us) != REDLOCK_ROUND_PENDING);
    assert_int_equal(r.decided_us, now_us);
    return r;
}

static void test_worked_example(void **state)
{
    (void)state;
    /* docs/algorithm.md: ttl 10000 ms, drift 0.01 -> drift 102 ms; elapsed 3 ms -> 9895 ms. */
    redlock_round r = one_yes(10000, 0.01, 0, T0_US, T0_US + 3000);
    assert_int_equal(redlock_round_drift_us(&r), 102000);
    assert_int_equal(redlock_round_decision(&r), REDLOCK_ROUND_WON);
    assert_int_equal(redlock_round_validity_us(&r), 9895000);
}

static void test_validity_edges(void **state)
{
    (void)state;
    const uint64_t ttl_us = 10000000, drift_us = 102000;

    redlock_round r = one_yes(10000, 0.01, 0, T0_US, T0_US + ttl_us - drift_us - 1);
    assert_int_equal(redlock_round_decision(&r), REDLOCK_ROUND_WON);
    assert_int_equal(redlock_round_status(&r), 0);
    assert_int_equal(redlock_round_validity_us(&r), 1);

    r = one_yes(10000, 0.01, 0, T0_US, T0_US + ttl_us - drift_us);
    assert_int_equal(redlock_round_decision(&r), REDLOCK_ROUND_LOST);
    assert_int_equal(redlock_round_status(&r), REDLOCK_EEXPIRED);
    assert_int_equal(redlock_round_validity_us(&r), 0);

    r = one_yes(10000, 0.01, 0, T0_US, T0_US + ttl_us - drift_us + 1);
    assert_int_equal(redlock_round_status(&r), REDLOCK_EEXPIRED);
    assert_int_equal(redlock_round_validity_us(&r), 0);

    /* elapsed past the ttl itself, and past ttl + drift (no wrap-around into a huge validity) */
    r = one_yes(10000, 0.01, 0, T0_US, T0_US + ttl_us + 5);
    assert_int_equal(redlock_round_status(&r), REDLOCK_EEXPIRED);
    r = one_yes(10000, 0.01, 0, T0_US, T0_US + ttl_us + drift_us + 5);
    assert_int_equal(redlock_round_status(&r), REDLOCK_EEXPIRED);
    /* the largest elapsed a uint64 clock can express */
    r = one_yes(10000, 0.01, 0, 0, UINT64_MAX);
    assert_int_equal(redlock_round_status(&r), REDLOCK_EEXPIRED);
    assert_int_equal(redlock_round_validity_us(&r), 0);
}

static void test_min_validity_edges(void **state)
{
    (void)state;
    /* ttl 1000 ms, drift 0 -> 2000 us; min 5 ms. validity = 998000 - elapsed. */
    redlock_round r = one_yes(1000, 0.0, 5, T0_US, T0_US + 998000 - 5000);
    assert_int_equal(redlock_round_status(&r), 0); /* validity == min */
    assert_int_equal(redlock_round_validity_us(&r), 5000);

    r = one_yes(1000, 0.0, 5, T0_US, T0_US + 998000 - 5000 + 1);
    assert_int_equal(redlock_round_status(&r), REDLOCK_EEXPIRED); /* validity == min - 1 */
    assert_int_equal(redlock_round_validity_us(&r), 0);

    /* a minimum above the ttl can never be met; a huge one must not wrap to a small one */
    r = one_yes(1000, 0.0, 2000, T0_US, T0_US);
    assert_int_equal(redlock_round_status(&r), REDLOCK_EEXPIRED);
    r = one_yes(1000, 0.0, UINT64_MAX / 1000 + 1, T0_US, T0_US);
    assert_int_equal(redlock_round_status(&r), REDLOCK_EEXPIRED);
    r = one_yes(1000, 0.0, UINT64_MAX, T0_US, T0_US);
    assert_int_equal(redlock_round_status(&r), REDLOCK_EEXPIRED);
}

static void test_drift_factor_zero(void **state)
{
    (void)state;
    const uint64_t ttls_ms[] = {1, 2, 3, 10, 1000, 10000, 123456789, REDLOCK_TTL_MAX_MS};
    for (size_t i = 0; i < sizeof(ttls_ms) / sizeof(ttls_ms[0]); i++) {
        redlock_round r;
        init_ok(&r, 3, ttls_ms[i], 0.0, 0, T0_US);
        assert_int_equal(redlock_round_drift_us(&r), REDLOCK_DRIFT_FIXED_US);
        init_ok(&r, 3, ttls_ms[i], -0.0, 0, T0_US); /* -0 is 0, not negative */
        assert_int_equal(redlock_round_drift_us(&r), REDLOCK_DRIFT_FIXED_US);
    }
    /* ttl 3 ms, drift 0, elapsed 0: 3000 - 2000 */
    redlock_round r = one_yes(3, 0.0, 0, T0_US, T0_US);
    assert_int_equal(redlock_round_validity_us(&r), 1000);
    /* ttl 2 ms is exactly used up by the drift */
    r = one_yes(2, 0.0, 0, T0_US, T0_US);
    assert_int_equal(redlock_round_status(&r), REDLOCK_EEXPIRED);
}

static void test_ttl_one_ms_always_lost(void **state)
{
    (void)state;
    /* drift >= 2 ms > ttl 1 ms: even an instant unanimous quorum cannot win */
    const double factors[] = {0.0, 0.01, 0.5};
    for (size_t i = 0; i < sizeof(factors) / sizeof(factors[0]); i++) {
        redlock_round r;
        init_ok(&r, 3, 1, factors[i], 0, T0_US);
        vote_expect(&r, 0, REDLOCK_VOTE_YES, T0_US, REDLOCK_ROUND_PENDING);
        vote_expect(&r, 1, REDLOCK_VOTE_YES, T0_US, REDLOCK_ROUND_LOST);
        assert_int_equal(redlock_round_status(&r), REDLOCK_EEXPIRED);
        assert_int_equal(redlock_round_validity_us(&r), 0);
    }
}

static uint64_t expected_drift_ld(uint64_t ttl_ms, double drift_factor)
{
    long double product = truncl((long double)(ttl_ms * 1000) * (long double)drift_factor);
    return (uint64_t)product + REDLOCK_DRIFT_FIXED_US;
}

static void test_huge_ttl(void **state)
{
    (void)state;
    const uint64_t ttl_us = REDLOCK_TTL_MAX_MS * 1000;
    redlock_round r;

    /* 0.5 is exact in binary: the drift is exactly half the ttl */
    init_ok(&r, 1, REDLOCK_TTL_MAX_MS, 0.5, 0, 0);
    assert_int_equal(redlock_round_drift_us(&r), ttl_us / 2 + REDLOCK_DRIFT_FIXED_US);
    assert_int_equal(redlock_round_drift_us(&r), expected_drift_ld(REDLOCK_TTL_MAX_MS, 0.5));
    vote_expect(&r, 0, REDLOCK_VOTE_YES, 7, REDLOCK_ROUND_WON);
    assert_int_equal(redlock_round_validity_us(&r), ttl_us - 7 - (ttl_us / 2 + 2000));

    /* 0.999: the real product ttl_us * 0.999 (the double) has 8 fractional bits and fits a
     * 64-bit mantissa, so an x87 long double computes it exactly; with a shorter long double
     * allow the last microsecond. The core truncates the real product toward zero. */
    init_ok(&r, 1, REDLOCK_TTL_MAX_MS, 0.999, 0, 0);
    uint64_t want = expected_drift_ld(REDLOCK_TTL_MAX_MS, 0.999);
    uint64_t got = redlock_round_drift_us(&r);
    if (LDBL_MANT_DIG >= 64)
        assert_int_equal(got, want);
    else
        assert_in_range(got, want - 1, want + 1);
    assert_true(got < ttl_us); /* no wrap-around */
    assert_true(got > ttl_us / 1000 * 998);
    vote_expect(&r, 0, REDLOCK_VOTE_YES, 0, REDLOCK_ROUND_WON);
    assert_int_equal(redlock_round_validity_us(&r), ttl_us - got);

    /* the largest factor below 1: the drift swallows the whole ttl, without overflow */
    init_ok(&r, 1, REDLOCK_TTL_MAX_MS, nextafter(1.0, 0.0), 0, 0);
    assert_true(redlock_round_drift_us(&r) >= ttl_us - 1 + REDLOCK_DRIFT_FIXED_US);
    assert_true(redlock_round_drift_us(&r) <= ttl_us + REDLOCK_DRIFT_FIXED_US);
    vote_expect(&r, 0, REDLOCK_VOTE_YES, 0, REDLOCK_ROUND_LOST);
    assert_int_equal(redlock_round_status(&r), REDLOCK_EEXPIRED);
}

static void test_drift_rounding_monotonic(void **state)
{
    (void)state;
    const uint64_t ttls_ms[] = {1, 3, 7, 1000, 10000, 86400000, 123456789, REDLOCK_TTL_MAX_MS};
    for (size_t t = 0; t < sizeof(ttls_ms) / sizeof(ttls_ms[0]); t++) {
        uint64_t previous = 0;
        /* a grid of factors, each followed by its next double up: increasing throughout */
        for (int i = 0; i < 1000; i++) {
            double base = i / 1000.0;
            double pair[2] = {base, nextafter(base, 1.0)};
            for (int p = 0; p < 2; p++) {
                redlock_round r;
                init_ok(&r, 1, ttls_ms[t], pair[p], 0, 0);
                uint64_t drift = redlock_round_drift_us(&r);
                assert_true(drift >= previous);
                previous = drift;
                uint64_t want = expected_drift_ld(ttls_ms[t], pair[p]);
                assert_in_range(drift, want - 1, want + 1);
                /* truncation never adds: drift - 2 ms <= the real product */
                assert_true((long double)(drift - REDLOCK_DRIFT_FIXED_US) <=
                            (long double)(ttls_ms[t] * 1000) * (long double)pair[p]);
            }
        }
    }
    /* dyadic factors are exact in binary, so the product is exact too */
    redlock_round r;
    init_ok(&r, 1, 1000, 0.25, 0, 0);
    assert_int_equal(redlock_round_drift_us(&r), 250000 + 2000);
    init_ok(&r, 1, 7, 0.125, 0, 0);
    assert_int_equal(redlock_round_drift_us(&r), 875 + 2000);
    /* the default 0.01 (a double slightly above 0.01) gives the decimal result */
    init_ok(&r, 1, 10000, 0.01, 0, 0);
    assert_int_equal(redlock_round_drift_us(&r), 102000);
}

static void test_clock_backwards(void **state)
{
    (void)state;
    /* A vote stamped before the start counts as elapsed 0, never as extra validity. */
    redlock_round r = one_yes(10000, 0.01, 0, T0_US, T0_US - 500000);
    assert_int_equal(redlock_round_status(&r), 0);
    assert_int_equal(redlock_round_validity_us(&r), 10000000 - 102000);
    assert_int_equal(r.decided_us, T0_US - 500000);

    r = one_yes(10000, 0.01, 0, UINT64_MAX, 0);
    assert_int_equal(redlock_round_validity_us(&r), 10000000 - 102000);

    /* and for a round that is too short even at elapsed 0, backwards time does not save it */
    r = one_yes(2, 0.0, 0, T0_US, 0);
    assert_int_equal(redlock_round_status(&r), REDLOCK_EEXPIRED);
}

/* ---------------------------------------------------------------------------------------------
 * Rejections
 * ------------------------------------------------------------------------------------------- */

/* A refused vote returns EINVAL and leaves every byte of the round as it was. */
static void vote_refused(redlock_round *r, unsigned node, redlock_vote vote, uint64_t now_us)
{
    redlock_round before;
    memcpy(&before, r, sizeof(before));
    assert_int_equal(redlock_round_vote(r, node, vote, now_us), REDLOCK_EINVAL);
    assert_memory_equal(&before, r, sizeof(before));
}

static void test_reject_node_out_of_range(void **state)
{
    (void)state;
    redlock_round r;
    init_ok(&r, 5, 1000, 0.01, 0, T0_US);
    vote_refused(&r, 5, REDLOCK_VOTE_YES, T0_US + 1);
    vote_refused(&r, 63, REDLOCK_VOTE_YES, T0_US + 1);
    vote_refused(&r, 64, REDLOCK_VOTE_YES, T0_US + 1);
    vote_refused(&r, 65, REDLOCK_VOTE_YES, T0_US + 1);
    vote_refused(&r, UINT_MAX, REDLOCK_VOTE_YES, T0_US + 1);
    assert_int_equal(redlock_round_node_vote(&r, 5), REDLOCK_VOTE_NONE);
    assert_int_equal(redlock_round_node_vote(&r, UINT_MAX), REDLOCK_VOTE_NONE);

    init_ok(&r, 64, 1000, 0.01, 0, T0_US);
    vote_refused(&r, 64, REDLOCK_VOTE_YES, T0_US + 1);
    vote_refused(&r, UINT_MAX, REDLOCK_VOTE_NO, T0_US + 1);
    vote_expect(&r, 63, REDLOCK_VOTE_YES, T0_US + 1, REDLOCK_ROUND_PENDING);
    assert_int_equal(r.votes_yes, 1);
}

static void test_reject_duplicate(void **state)
{
    (void)state;
    redlock_round r;
    init_ok(&r, 3, 1000, 0.01, 0, T0_US);
    vote_expect(&r, 1, REDLOCK_VOTE_YES, T0_US + 1, REDLOCK_ROUND_PENDING);
    /* the same node again, same or other value: not counted, so no quorum of one node */
    vote_refused(&r, 1, REDLOCK_VOTE_YES, T0_US + 2);
    vote_refused(&r, 1, REDLOCK_VOTE_NO, T0_US + 2);
    assert_int_equal(r.votes_yes, 1);
    assert_int_equal(r.votes_no, 0);
    assert_int_equal(redlock_round_node_vote(&r, 1), REDLOCK_VOTE_YES);
    assert_int_equal(redlock_round_decision(&r), REDLOCK_ROUND_PENDING);

    vote_expect(&r, 0, REDLOCK_VOTE_NO, T0_US + 3, REDLOCK_ROUND_PENDING);
    vote_refused(&r, 0, REDLOCK_VOTE_NO, T0_US + 4); /* a second "no" must not lose the round */
    vote_expect(&r, 2, REDLOCK_VOTE_YES, T0_US + 5, REDLOCK_ROUND_WON);
    /* a duplicate after the decision: refused, decision unchanged */
    vote_refused(&r, 2, REDLOCK_VOTE_NO, T0_US + 6);
    assert_int_equal(redlock_round_decision(&r), REDLOCK_ROUND_WON);
}

static void test_reject_invalid_vote_value(void **state)
{
    (void)state;
    redlock_round r;
    init_ok(&r, 1, 1000, 0.01, 0, T0_US);
    vote_refused(&r, 0, REDLOCK_VOTE_NONE, T0_US + 1);
    vote_refused(&r, 0, (redlock_vote)99, T0_US + 1);
    vote_refused(&r, 0, (redlock_vote)(REDLOCK_VOTE_TIMEOUT + 1), T0_US + 1);
    vote_refused(&r, 0, (redlock_vote)-1, T0_US + 1);
    /* the node can still vote properly afterwards */
    vote_expect(&r, 0, REDLOCK_VOTE_TIMEOUT, T0_US + 2, REDLOCK_ROUND_LOST);
    assert_int_equal(redlock_round_status(&r), REDLOCK_ENOQUORUM);
}

/* init must fail with EINVAL and leave the round zeroed and inert. */
static void init_refused(unsigned n, uint64_t ttl_ms, double drift_factor)
{
    redlock_round r, zero;
    memset(&r, 0xA5, sizeof(r));
    memset(&zero, 0, sizeof(zero));
    assert_int_equal(redlock_round_init(&r, n, ttl_ms, drift_factor, 0, T0_US), REDLOCK_EINVAL);
    assert_memory_equal(&r, &zero, sizeof(r));
    assert_int_equal(redlock_round_vote(&r, 0, REDLOCK_VOTE_YES, T0_US), REDLOCK_EINVAL);
    assert_int_equal(r.votes_yes, 0);
    /* status must not read as "won" (0) on an unusable round */
    assert_int_equal(redlock_round_status(&r), REDLOCK_EINVAL);
    assert_int_equal(redlock_round_decision(&r), REDLOCK_ROUND_PENDING);
}

static void test_init_rejections(void **state)
{
    (void)state;
    init_refused(0, 1000, 0.01);
    init_refused(REDLOCK_MAX_NODES + 1, 1000, 0.01);
    init_refused(UINT_MAX, 1000, 0.01);
    init_refused(3, 0, 0.01);
    init_refused(3, REDLOCK_TTL_MAX_MS + 1, 0.01);
    init_refused(3, UINT64_MAX, 0.01);
    init_refused(3, 1000, (double)NAN);
    init_refused(3, 1000, -(double)NAN);
    init_refused(3, 1000, -0.1);
    init_refused(3, 1000, -DBL_MIN);
    init_refused(3, 1000, 1.0);
    init_refused(3, 1000, 1.5);
    init_refused(3, 1000, (double)INFINITY);
    init_refused(3, 1000, -(double)INFINITY);
    assert_int_equal(redlock_round_init(NULL, 3, 1000, 0.01, 0, 0), REDLOCK_EINVAL);
}

static void test_init_accepts_bounds(void **state)
{
    (void)state;
    redlock_round r;
    init_ok(&r, 1, 1, 0.0, 0, 0);
    init_ok(&r, REDLOCK_MAX_NODES, REDLOCK_TTL_MAX_MS, nextafter(1.0, 0.0), UINT64_MAX, UINT64_MAX);
    init_ok(&r, 2, 1000, DBL_MIN, 0, 0);
    assert_int_equal(redlock_round_drift_us(&r), REDLOCK_DRIFT_FIXED_US);
    assert_int_equal(redlock_round_validity_us(&r), 0);
    assert_int_equal(r.decided_us, 0);
    assert_int_equal(r.voted_mask, 0);
}

/* ---------------------------------------------------------------------------------------------
 * Large rounds, late votes, names
 * ------------------------------------------------------------------------------------------- */

static void test_quorum_sizes(void **state)
{
    (void)state;
    /* n -> quorum, from a table rather than the core's formula. q - 1 yes votes and n - q
     * failures leave a round pending and the q-th yes wins it; n - q + 1 failures lose it. */
    const unsigned table[][2] = {{1, 1},   {2, 2},   {3, 2},   {4, 3},   {5, 3},
                                 {6, 4},   {7, 4},   {8, 5},   {9, 5},   {10, 6},
                                 {31, 16}, {32, 17}, {33, 17}, {63, 32}, {64, 33}};
    for (size_t t = 0; t < sizeof(table) / sizeof(table[0]); t++) {
        unsigned n = table[t][0], q = table[t][1];
        redlock_round r;
        init_ok(&r, n, 1000, 0.01, 0, T0_US);
        unsigned node = 0;
        for (; node < q - 1; node++)
            vote_expect(&r, node, REDLOCK_VOTE_YES, T0_US + 1, REDLOCK_ROUND_PENDING);
        for (unsigned f = 0; f < n - q; f++, node++)
            vote_expect(&r, node, REDLOCK_VOTE_NO, T0_US + 1, REDLOCK_ROUND_PENDING);
        vote_expect(&r, node, REDLOCK_VOTE_YES, T0_US + 1, REDLOCK_ROUND_WON);

        /* and n - q + 1 failures are not */
        init_ok(&r, n, 1000, 0.01, 0, T0_US);
        for (node = 0; node < n - q; node++)
            vote_expect(&r, node, REDLOCK_VOTE_TIMEOUT, T0_US + 1, REDLOCK_ROUND_PENDING);
        vote_expect(&r, node, REDLOCK_VOTE_ERROR, T0_US + 1, REDLOCK_ROUND_LOST);
        assert_int_equal(redlock_round_status(&r), REDLOCK_ENOQUORUM);
    }
}

static void test_n64(void **state)
{
    (void)state;
    redlock_round r;
    init_ok(&r, 64, 10000, 0.01, 0, T0_US);
    /* 31 no, then 32 yes: pending (31 failures == 64 - 33 still allow a quorum) */
    unsigned node = 63;
    for (unsigned i = 0; i < 31; i++, node--)
        vote_expect(&r, node, REDLOCK_VOTE_NO, T0_US + i, REDLOCK_ROUND_PENDING);
    for (unsigned i = 0; i < 32; i++, node--)
        vote_expect(&r, node, REDLOCK_VOTE_YES, T0_US + 100 + i, REDLOCK_ROUND_PENDING);
    assert_int_equal(node, 0);
    vote_expect(&r, 0, REDLOCK_VOTE_YES, T0_US + 1000, REDLOCK_ROUND_WON);
    assert_int_equal(r.votes_yes, 33);
    assert_int_equal(r.votes_no, 31);
    assert_true(r.voted_mask == UINT64_MAX);
    assert_int_equal(redlock_round_validity_us(&r), 10000000 - 1000 - 102000);
    for (unsigned i = 0; i < 64; i++)
        assert_int_equal(redlock_round_node_vote(&r, i),
                         i <= 32 ? REDLOCK_VOTE_YES : REDLOCK_VOTE_NO);
}

static void test_votes_after_decision(void **state)
{
    (void)state;
    redlock_round r;
    init_ok(&r, 5, 1000, 0.0, 0, T0_US);
    vote_expect(&r, 0, REDLOCK_VOTE_NO, T0_US + 1, REDLOCK_ROUND_PENDING);
    vote_expect(&r, 1, REDLOCK_VOTE_NO, T0_US + 2, REDLOCK_ROUND_PENDING);
    vote_expect(&r, 2, REDLOCK_VOTE_NO, T0_US + 3, REDLOCK_ROUND_LOST);
    /* late yes votes are recorded but cannot turn the loss into a win */
    vote_expect(&r, 3, REDLOCK_VOTE_YES, T0_US + 4, REDLOCK_ROUND_LOST);
    vote_expect(&r, 4, REDLOCK_VOTE_YES, T0_US + 5, REDLOCK_ROUND_LOST);
    assert_int_equal(redlock_round_status(&r), REDLOCK_EBUSY);
    assert_int_equal(r.decided_us, T0_US + 3);
    assert_int_equal(redlock_round_validity_us(&r), 0);
    assert_int_equal(r.votes_yes, 2);
    assert_int_equal(r.votes_no, 3);
    assert_int_equal(r.voted_mask, 0x1f);
    assert_int_equal(redlock_round_node_vote(&r, 4), REDLOCK_VOTE_YES);

    /* and late failures cannot turn a win into a loss, nor change its validity */
    init_ok(&r, 3, 1000, 0.0, 0, T0_US);
    vote_expect(&r, 2, REDLOCK_VOTE_YES, T0_US + 10, REDLOCK_ROUND_PENDING);
    vote_expect(&r, 0, REDLOCK_VOTE_YES, T0_US + 20, REDLOCK_ROUND_WON);
    vote_expect(&r, 1, REDLOCK_VOTE_ERROR, T0_US + 999999, REDLOCK_ROUND_WON);
    assert_int_equal(redlock_round_status(&r), 0);
    assert_int_equal(redlock_round_validity_us(&r), 1000000 - 20 - 2000);
    assert_int_equal(r.decided_us, T0_US + 20);
    assert_int_equal(r.votes_error, 1);
    assert_int_equal(redlock_round_node_vote(&r, 1), REDLOCK_VOTE_ERROR);
}

static void test_node_vote_each_node(void **state)
{
    (void)state;
    redlock_round r;
    init_ok(&r, 9, 1000, 0.01, 0, T0_US);
    const redlock_vote kinds[] = {REDLOCK_VOTE_YES, REDLOCK_VOTE_NO, REDLOCK_VOTE_ERROR,
                                  REDLOCK_VOTE_TIMEOUT};
    for (unsigned i = 0; i < 9; i++)
        assert_int_equal(redlock_round_node_vote(&r, i), REDLOCK_VOTE_NONE);
    for (unsigned i = 0; i < 9; i += 2) /* even nodes only */
        assert_true(redlock_round_vote(&r, i, kinds[(i / 2) % 4], T0_US + i) >= 0);
    for (unsigned i = 0; i < 9; i++)
        assert_int_equal(redlock_round_node_vote(&r, i),
                         i % 2 ? REDLOCK_VOTE_NONE : kinds[(i / 2) % 4]);
    assert_int_equal(redlock_round_node_vote(&r, 9), REDLOCK_VOTE_NONE);
}

static void test_vote_name(void **state)
{
    (void)state;
    assert_string_equal(redlock_vote_name(REDLOCK_VOTE_NONE), "none");
    assert_string_equal(redlock_vote_name(REDLOCK_VOTE_YES), "yes");
    assert_string_equal(redlock_vote_name(REDLOCK_VOTE_NO), "no");
    assert_string_equal(redlock_vote_name(REDLOCK_VOTE_ERROR), "error");
    assert_string_equal(redlock_vote_name(REDLOCK_VOTE_TIMEOUT), "timeout");
    assert_string_equal(redlock_vote_name((redlock_vote)5), "unknown");
    assert_string_equal(redlock_vote_name((redlock_vote)99), "unknown");
    assert_string_equal(redlock_vote_name((redlock_vote)-1), "unknown");
}

/* ---------------------------------------------------------------------------------------------
 * Errors, version, clock
 * ------------------------------------------------------------------------------------------- */

typedef struct err_entry {
    int code;
    const char *name;
    const char *message;
} err_entry;

static const err_entry all_errors[] = {
#define XX(name, value, msg) {REDLOCK_##name, "REDLOCK_" #name, msg},
    REDLOCK_ERRNO_MAP(XX)
#undef XX
};
#define N_ERRORS (sizeof(all_errors) / sizeof(all_errors[0]))

static void test_error_names_and_messages(void **state)
{
    (void)state;
    assert_true(N_ERRORS >= 12); /* the table really came from the macro */
    for (size_t i = 0; i < N_ERRORS; i++) {
        assert_string_equal(redlock_err_name(all_errors[i].code), all_errors[i].name);
        assert_string_equal(redlock_strerror(all_errors[i].code), all_errors[i].message);
        assert_true(all_errors[i].code < 0);
        assert_true(all_errors[i].code < -30000); /* clear of libuv's and errno's codes */
        for (size_t j = 0; j < i; j++)
            assert_int_not_equal(all_errors[i].code, all_errors[j].code);
    }
}

static void test_error_unknown_codes(void **state)
{
    (void)state;
    assert_string_equal(redlock_strerror(0), "success");
    assert_string_equal(redlock_err_name(0), "REDLOCK_OK");
    const int unknown[] = {1, -1, -22, -30000, -30018, -40000, INT_MIN, INT_MAX};
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        for (size_t j = 0; j < N_ERRORS; j++)
            assert_int_not_equal(unknown[i], all_errors[j].code); /* the list is really unknown */
        assert_string_equal(redlock_strerror(unknown[i]), "unknown error");
        assert_string_equal(redlock_err_name(unknown[i]), "REDLOCK_UNKNOWN");
    }
}

static void test_version_and_clock(void **state)
{
    (void)state;
    char want[32];
    snprintf(want, sizeof(want), "%d.%d.%d", REDLOCK_VERSION_MAJOR, REDLOCK_VERSION_MINOR,
             REDLOCK_VERSION_PATCH);
    assert_string_equal(redlock_version_string(), want);

    /* same clock as uv_hrtime, in microseconds, and monotonic */
    uint64_t before_us = uv_hrtime() / 1000;
    uint64_t a_us = redlock_now_us();
    uint64_t b_us = redlock_now_us();
    uint64_t after_us = uv_hrtime() / 1000;
    assert_true(before_us <= a_us);
    assert_true(a_us <= b_us);
    assert_true(b_us <= after_us);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exhaustive_all_orders),
        cmocka_unit_test(test_exhaustive_sampled_orders),
        cmocka_unit_test(test_early_win),
        cmocka_unit_test(test_early_loss_busy),
        cmocka_unit_test(test_early_loss_noquorum),
        cmocka_unit_test(test_status_tie_is_busy),
        cmocka_unit_test(test_worked_example),
        cmocka_unit_test(test_validity_edges),
        cmocka_unit_test(test_min_validity_edges),
        cmocka_unit_test(test_drift_factor_zero),
        cmocka_unit_test(test_ttl_one_ms_always_lost),
        cmocka_unit_test(test_huge_ttl),
        cmocka_unit_test(test_drift_rounding_monotonic),
        cmocka_unit_test(test_clock_backwards),
        cmocka_unit_test(test_reject_node_out_of_range),
        cmocka_unit_test(test_reject_duplicate),
        cmocka_unit_test(test_reject_invalid_vote_value),
        cmocka_unit_test(test_init_rejections),
        cmocka_unit_test(test_init_accepts_bounds),
        cmocka_unit_test(test_quorum_sizes),
        cmocka_unit_test(test_n64),
        cmocka_unit_test(test_votes_after_decision),
        cmocka_unit_test(test_node_vote_each_node),
        cmocka_unit_test(test_vote_name),
        cmocka_unit_test(test_error_names_and_messages),
        cmocka_unit_test(test_error_unknown_codes),
        cmocka_unit_test(test_version_and_clock),
    };
    return cmocka_run_group_tests_name("quorum", tests, NULL, NULL);
}
