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

#endif /* REDLOCK_QUORUM_H */
