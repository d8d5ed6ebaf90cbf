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

/* Continuity of a hold (docs/safety.md, "A hold is continuous while a quorum kept it"; quorum.c,
 * proved). Masks have bit i for node i, among nodes 0 .. n_nodes - 1. */
/* The nodes in mask. */
unsigned redlock__count_nodes(uint64_t mask, unsigned n_nodes);
/* Whether the nodes in mask are a quorum (of the nodes that kept a token, or granted a lock). */
bool redlock__mask_quorum(uint64_t mask, unsigned n_nodes);
typedef enum redlock__cont {
    REDLOCK__CONT_PENDING, /* more answers may still prove it */
    REDLOCK__CONT_PROVEN,  /* a quorum of kept nodes gave evidence */
    REDLOCK__CONT_BROKEN   /* that quorum is out of reach */
} redlock__cont;
/* A round's continuity: proven once a quorum of the kept nodes gave evidence that they still hold
 * the key they kept (an extend's renewal, a release's delete); broken once that quorum is out of
 * reach, with unanswered the nodes still to answer; pending otherwise. */
redlock__cont redlock__continuity(uint64_t kept, uint64_t evidence, uint64_t unanswered,
                                  unsigned n_nodes);

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
/* Whether a quorum of q's nodes said yes so far. */
bool redlock__round_has_quorum(const redlock_round *q);
/* The same for the release of a held lock whose continuity is cont (redlock__continuity over
 * its kept nodes): it waits while cont is pending, and its status is 0 only when cont is proven
 * (deleted on a quorum but not shown continuous: REDLOCK_ENOQUORUM). */
bool redlock__release_decided_cont(const redlock_round *q, unsigned out, bool lapsed,
                                   redlock__cont cont, int *status);
/* An inspect is a picture of the nodes: 0 when a quorum answered at all, else ENOQUORUM. */
int redlock__inspect_status(const redlock_round *q);
/* An extend won too late: its quorum renewed keys whose validity (up to prev_deadline_us) had run
 * out by the deciding vote. */
bool redlock__won_too_late(const redlock_round *q, uint64_t prev_deadline_us);
/* A lost round left no key anywhere: no yes and no timeout (an error is a command not run, or a
 * script that stopped before its writes). */
bool redlock__round_left_nothing(const redlock_round *q);

/* A round that is lost got a yes somewhere: others took keys while it was out (a split vote). */
bool redlock__round_any_yes(const redlock_round *q);
/* free_nodes of n_nodes (>= 1) no longer hold a lock's token: too many for any quorum to. */
bool redlock__quorum_gone(unsigned free_nodes, unsigned n_nodes);
/* How long, in ms, until a quorum of the nodes of a waiter's lost round q could let it in without
 * a release: the least wait at which a quorum of them would (a node that said yes, 0; one that
 * said no, wait_ms[node] when that is >= 0: its key's ttl, or the deadlines of the queue's heads
 * before it), or -1 when no wait is one (fewer than a quorum said). */
int64_t redlock__quorum_wait_ms(const redlock_round *q, const int64_t *wait_ms);

/* What the layers above read of a round, so that none reads its members. */
/* Its votes so far, into res's counters. */
void redlock__round_tally(const redlock_round *q, redlock_result *res);
/* When it started (the time given to redlock_round_init). */
uint64_t redlock__round_start_us(const redlock_round *q);
/* When it was decided: the deciding vote's time (check the decision first). */
uint64_t redlock__round_decided_us(const redlock_round *q);
/* A won round's deadline: the deciding vote's time plus the validity left then. */
uint64_t redlock__round_deadline_us(const redlock_round *q);

#endif /* REDLOCK_QUORUM_H */
