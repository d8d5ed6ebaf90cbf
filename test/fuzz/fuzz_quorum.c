/* SPDX-License-Identifier: MIT */
/* fuzz_quorum.c - libFuzzer target: the quorum core (redlock_round_*) under any sequence of
 * votes and timestamps, including clocks that go backwards and invalid votes.
 *
 * Input: n_nodes, ttl, drift factor, min validity, then (node, vote, time step) triples.
 * Checks: init fails only for out-of-range arguments and then reads REDLOCK_EINVAL; an invalid
 * vote (node out of range, already voted, unknown kind) returns EINVAL and changes nothing; a
 * valid one returns the decision; the decision never changes once made; the counts add up to
 * the votes accepted and match the per-node record; a win has votes_yes >= quorum and
 * 0 < validity <= ttl with validity >= min_validity; a loss has a reason; the status agrees
 * with the decision. */
#include <stdint.h>
#include <string.h>

#include "redlock.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            __builtin_trap();                                                                      \
    } while (0)

static uint64_t take(const uint8_t **p, size_t *left, unsigned bytes)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < bytes; i++) {
        v = v << 8 | (*left > 0 ? **p : 0);
        if (*left > 0)
            (*p)++, (*left)--;
    }
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data;
    size_t left = size;
    unsigned n = (unsigned)take(&p, &left, 1) % 66; /* 0 and 65 are invalid */
    uint64_t ttl_ms = take(&p, &left, 3);
    if (ttl_ms & 0x800000)
        ttl_ms = UINT64_MAX - (ttl_ms & 0xff);         /* the overflow edge */
    double drift = (double)take(&p, &left, 1) / 200.0; /* 0 .. 1.275: >= 1 is invalid */
    uint64_t min_validity_ms = take(&p, &left, 2);
    uint64_t now = take(&p, &left, 4);

    redlock_round r;
    int rc = redlock_round_init(&r, n, ttl_ms, drift, min_validity_ms, now);
    bool valid = n >= 1 && n <= REDLOCK_MAX_NODES && ttl_ms >= 1 && ttl_ms <= REDLOCK_TTL_MAX_MS &&
                 drift >= 0 && drift < 1;
    if (!valid) {
        CHECK(rc == REDLOCK_EINVAL);
        CHECK(redlock_round_status(&r) == REDLOCK_EINVAL);
        CHECK(redlock_round_vote(&r, 0, REDLOCK_VOTE_YES, now) == REDLOCK_EINVAL ||
              redlock_round_decision(&r) != REDLOCK_ROUND_WON);
        return 0;
    }
    CHECK(rc == 0);
    unsigned quorum = n / 2 + 1;
    CHECK(redlock_round_decision(&r) == REDLOCK_ROUND_PENDING);
    CHECK(redlock_round_status(&r) == REDLOCK_EAGAIN);
    CHECK(redlock_round_drift_us(&r) >= REDLOCK_DRIFT_FIXED_US);

    unsigned accepted = 0;
    unsigned char seen[REDLOCK_MAX_NODES] = {0};
    redlock_decision decided = REDLOCK_ROUND_PENDING;
    uint64_t decided_validity = 0;
    int decided_status = REDLOCK_EAGAIN;
    while (left >= 3) {
        unsigned node = (unsigned)take(&p, &left, 1) % 70;
        unsigned kind = (unsigned)take(&p, &left, 1);
        int step_ms = (int8_t)take(&p, &left, 1); /* -128 .. 127 ms: the clock may go back */
        redlock_vote vote = (redlock_vote)(kind % 6);
        if (step_ms < 0 && now < (uint64_t)(-step_ms) * 1000)
            now = 0;
        else
            now += (uint64_t)((int64_t)step_ms * 1000);
        if (kind & 0x80)
            now += (uint64_t)kind * 100000; /* big jumps, to reach expiry */

        redlock_round before = r;
        int got = redlock_round_vote(&r, node, vote, now);
        bool ok_vote =
            node < n && !seen[node] && vote >= REDLOCK_VOTE_YES && vote <= REDLOCK_VOTE_TIMEOUT;
        if (!ok_vote) {
            CHECK(got == REDLOCK_EINVAL);
            CHECK(memcmp(&before, &r, sizeof(r)) == 0);
            continue;
        }
        seen[node] = 1;
        accepted++;
        CHECK(got == (int)redlock_round_decision(&r));
        CHECK(redlock_round_node_vote(&r, node) == vote);
        CHECK(r.votes_yes + r.votes_no + r.votes_error + r.votes_timeout == accepted);
        CHECK((unsigned)__builtin_popcountll(r.voted_mask) == accepted);
        if (decided != REDLOCK_ROUND_PENDING) {
            CHECK(redlock_round_decision(&r) == decided); /* never changes */
            CHECK(redlock_round_validity_us(&r) == decided_validity);
            CHECK(redlock_round_status(&r) == decided_status);
            continue;
        }
        decided = redlock_round_decision(&r);
        decided_validity = redlock_round_validity_us(&r);
        decided_status = redlock_round_status(&r);
        unsigned fails = r.votes_no + r.votes_error + r.votes_timeout;
        if (decided == REDLOCK_ROUND_WON) {
            CHECK(decided_status == 0);
            CHECK(r.votes_yes >= quorum);
            CHECK(decided_validity > 0);
            CHECK(decided_validity <= ttl_ms * 1000);
            CHECK(decided_validity >= min_validity_ms * 1000);
        } else if (decided == REDLOCK_ROUND_LOST) {
            CHECK(decided_validity == 0);
            CHECK(fails > n - quorum || r.votes_yes >= quorum);
            if (decided_status == REDLOCK_EEXPIRED)
                CHECK(r.votes_yes >= quorum);
            else
                CHECK(decided_status == (r.votes_no >= r.votes_error + r.votes_timeout
                                             ? REDLOCK_EBUSY
                                             : REDLOCK_ENOQUORUM));
        } else {
            CHECK(decided_status == REDLOCK_EAGAIN);
            CHECK(r.votes_yes < quorum && fails <= n - quorum);
        }
    }
    return 0;
}
