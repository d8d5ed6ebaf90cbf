/* SPDX-License-Identifier: MIT */
/* stats.h - what the client counts and tells: the counters of redlock_client_stats, the log
 * callback's plumbing, and the node state query. The operations report to it with one call per
 * round outcome (redlock__stats_round), per acquire won by grants (redlock__stats_granted) and
 * per lost lock (redlock__stats_lost); nothing here takes part in a decision. Nothing here is
 * public. */
#ifndef REDLOCK_STATS_H
#define REDLOCK_STATS_H

#include <stdint.h>

#include "command.h"
#include "redlock.h"

typedef struct redlock__stats {
    uint64_t rounds_won, rounds_busy, rounds_broken, rounds_expired;
    uint64_t extensions_ok, extensions_failed;
    uint64_t locks_lost;
    uint64_t releases_ok, releases_lapsed, releases_unknown;
    uint64_t slow_rounds;
    uint64_t acquires_granted;
} redlock__stats;

/* A round of an operation ended: an acquire round with the round's own status, an extend with
 * its final status, a release with the release's (redlock_release). Counts it, and logs it when
 * it took longer than slow_round_ms. results: the round's per-node outcome. */
void redlock__stats_round(redlock_client *c, redlock__cmd_kind kind, int status,
                          const redlock_round *q, const redlock_node_result *results);

/* The text of a failed operation's outcome, for the caller who reads no per-node result
 * (redlock_client_last_error, a report's message): status's text, then each node that failed
 * and why, briefly, e.g. "no quorum: too many nodes failed or timed out: redis://a:6379
 * timeout (no answer within 200 ms); redis://b:6379 error (node down: connect: connection
 * refused)". Nodes not answered when the round was decided are left out. */
void redlock__stats_failure_text(char *out, size_t out_len, int status, const redlock_result *res);

/* An acquire was won by grants (ops.c, grant_win): counted beside its round. */
void redlock__stats_granted(redlock_client *c);

/* An auto-extended lock was reported lost with reason. */
void redlock__stats_lost(redlock_client *c, int reason);

#endif
