/* SPDX-License-Identifier: MIT */
/* quorum.h - the quorum core (redlock_round_*), internal side.
 *
 * The core is public (see part 2 of redlock.h) so that a caller's tests can drive it vote by
 * vote; this header only gives the library's own files one place to include it from. The core
 * is sans-IO: no allocation, no clock, no IO, no global state. Votes and timestamps in,
 * decisions out. */
#ifndef REDLOCK_QUORUM_H
#define REDLOCK_QUORUM_H

#include "redlock.h"

/* The votes that decide among n nodes: a strict majority, so two rounds can never both win. */
/*@ assigns \nothing;
    ensures exact: \result == n / 2 + 1;
    ensures majority: 2 * \result > n;
    ensures reachable: n >= 1 ==> \result <= n;
*/
static inline unsigned redlock__quorum_of(unsigned n)
{
    return n / 2 + 1;
}

/* Whether a hold whose kept nodes are kept (bit i: node i) is still continuous among n_nodes: a
 * quorum of them kept its token since its last won round (quorum.c). */
bool redlock__kept_quorum(uint64_t kept, unsigned n_nodes);

/* The decisions of the operations beyond one round's won or lost (quorum.c, proved with it). */

/* A release's status, which speaks for the whole hold (docs/api.md, redlock_release): lapsed (the
 * hold is known to have lapsed: released late, or found lost) is REDLOCK_ELOST whatever the nodes
 * say; else 0 when a quorum deleted the token, REDLOCK_ELOST when more than N - quorum said "not
 * ours", REDLOCK_ENOQUORUM when it cannot be told. */
int redlock__release_status(const redlock_round *q, bool lapsed);
/* Whether that status is known with out nodes still to answer, whatever they say (set in
 * *status): every node answered; a lapsed hold once a quorum answered (so its result says what
 * they deleted); or a quorum of yes or of no is reached, or neither is in reach any more. */
bool redlock__release_decided(const redlock_round *q, unsigned out, bool lapsed, int *status);
/* An inspect is a picture of the nodes: 0 when a quorum answered at all, else ENOQUORUM. */
int redlock__inspect_status(const redlock_round *q);
/* An extend won too late: its quorum renewed keys whose validity (up to prev_deadline_us) had run
 * out by the deciding vote. */
bool redlock__won_too_late(const redlock_round *q, uint64_t prev_deadline_us);
/* A lost round left no key anywhere: no yes and no timeout (an error is a command not run, or a
 * script that stopped before its writes). */
bool redlock__round_left_nothing(const redlock_round *q);

#endif /* REDLOCK_QUORUM_H */
