/* SPDX-License-Identifier: MIT */
/* rto.h - a node's request timeout: fixed, or adapted to the round trips it measures as TCP's
 * retransmission timeout is (RFC 6298): the smoothed round trip plus four times its mean
 * deviation, between a floor and a cap, with a generous first value before anything is measured
 * and a doubling at each timeout (a path that became slower is measured again, since answers
 * that came after their deadline are never sampled). Sans-IO: samples in, a timeout out.
 *
 * Safety never depends on it: a vote's time is when its answer was read, and a won round's
 * validity counts the time elapsed since the round's start (docs/safety.md). */
#ifndef REDLOCK_RTO_H
#define REDLOCK_RTO_H

#include <stdint.h>

#define REDLOCK__RTO_INITIAL_US 1000000u /* before the first sample: 1 s, as RFC 6298 */
#define REDLOCK__RTO_MIN_US 200000u      /* the floor: 200 ms, as Linux's TCP_RTO_MIN */
#define REDLOCK__RTO_MAX_US 2000000u     /* the cap: 2 s */

typedef struct redlock__rto {
    uint64_t fixed_us;  /* non-zero: every timeout is this, nothing adapts */
    uint64_t srtt_us;   /* smoothed round trip (0: nothing measured yet) */
    uint64_t rttvar_us; /* its mean deviation */
    uint64_t base_us;   /* the timeout the samples give (or the first, or the fixed one) */
    uint64_t rto_us;    /* the current timeout: base_us, doubled at each timeout since the last
                           sample, up to the cap */
} redlock__rto;

/* fixed_us 0: adaptive, from REDLOCK__RTO_INITIAL_US. */
void redlock__rto_init(redlock__rto *r, uint64_t fixed_us);
/* An answer came sample_us after its request was written on a ready connection. */
void redlock__rto_sample(redlock__rto *r, uint64_t sample_us);
/* A request reached its deadline unanswered: the timeout doubles, up to the cap. */
void redlock__rto_timeout(redlock__rto *r);

/* The timeout a request sent now gets. */
static inline uint64_t redlock__rto_us(const redlock__rto *r)
{
    return r->rto_us;
}

/* The timeout without the doublings: what the node's silence is measured in before it is
 * dropped (node.h), so a stopped server is not waited for longer with each of its timeouts. */
static inline uint64_t redlock__rto_base_us(const redlock__rto *r)
{
    return r->base_us;
}

/* The longest timeout a node whose config says timeout_us (0: adaptive) may give a request: what
 * a cluster node's requests get as a whole, across their redirects (each master's connection
 * adapts on its own within it). */
static inline uint64_t redlock__rto_bound_us(uint64_t timeout_us)
{
    return timeout_us != 0 ? timeout_us : REDLOCK__RTO_MAX_US;
}

#endif
