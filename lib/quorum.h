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

#endif /* REDLOCK_QUORUM_H */
