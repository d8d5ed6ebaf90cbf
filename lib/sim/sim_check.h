/* SPDX-License-Identifier: MIT */
/* sim_check.h - the simulation's checkers, pure: a history in, a verdict out (no world, no
 * clock), so that test_sim_check.c can feed them hand-made histories, as the torture's checker
 * is tested (test/torture/test_checker.c).
 *
 * Two histories, both in true (global) time, microseconds:
 *   - the holds: what each process did with each lock it was handed (when it was handed out,
 *     when the holder stopped using it, the deadline the library last reported, mapped to true
 *     time, and when the lost callback came). Mutual exclusion: no two holds of one resource
 *     overlap, a hold being [start, min(stop, deadline)) - the holder trusts the lock up to
 *     its deadline and never past it - and a holder stops at its lost callback.
 *   - the nodes' record: every interval over which a node held a key with a value, and every
 *     interval over which a node was down. No hold reported without its gap: a release with
 *     status 0 or a won extend says the hold was continuous from its acquire; the record must
 *     show that at no moment of it was a quorum of nodes up without the hold's token. */
#ifndef SIM_CHECK_H
#define SIM_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "redlock.h"

#define SIM_KEY_MAX 64
#define SIM_VALUE_MAX REDLOCK_TOKEN_MAX
#define SIM_NEVER UINT64_MAX

/* One hold, as the holder lived it. */
typedef struct sim_hold {
    unsigned proc, resource;
    uint64_t start;    /* the acquire callback handed the lock out */
    uint64_t stop;     /* the holder stopped using it (released it, freed it, gave up) */
    uint64_t deadline; /* the last deadline the library reported, in true time */
    uint64_t lost_at;  /* the lost callback, or SIM_NEVER */
    bool auto_extended;
} sim_hold;

/* The end of a hold's use: its stop, or its deadline if that came first. */
uint64_t sim_hold_end(const sim_hold *hold);

/* What sim_check_exclusion found. */
typedef struct sim_exclusion {
    unsigned holds;       /* non-empty holds */
    unsigned overlaps;    /* holds that began before another of their resource had ended */
    unsigned bad_records; /* holds that cannot be: stopped before they started, or used after
                             their lost callback */
    unsigned handovers;   /* a hold that began within handover_us of another's end */
    char what[512];       /* the first violation, described */
} sim_exclusion;

/* Check holds (sorted in place by resource and start). Empty holds (end <= start) are not
 * counted. Returns overlaps + bad_records: 0 means mutual exclusion held. */
unsigned sim_check_exclusion(sim_hold *holds, size_t n, uint64_t handover_us, sim_exclusion *out);

/* A node held key with value over [from, until) of true time (until is its expiry while it
 * lives; a pexpire moves it, a delete, a restart without data or an early expiry cuts it). */
typedef struct sim_presence {
    unsigned node;
    size_t key_len, value_len;
    char key[SIM_KEY_MAX];
    char value[SIM_VALUE_MAX];
    uint64_t from, until;
} sim_presence;

/* A node was down (crashed, not yet back) over [from, until): it granted nobody anything. */
typedef struct sim_downtime {
    unsigned node;
    uint64_t from, until; /* until SIM_NEVER while it is down */
} sim_downtime;

/* The nodes' record of one run. */
typedef struct sim_record {
    unsigned n_nodes;
    const sim_presence *presence;
    size_t n_presence;
    const sim_downtime *downtimes;
    size_t n_downtimes;
} sim_record;

/* The "no gap" property for a hold of key with token, reported continuous over [from, to):
 * was there a moment of it at which a quorum (n_nodes / 2 + 1) of nodes was up without the
 * token, so that another holder could have been granted? A node that is down grants nobody: it
 * counts as taken. Returns 1 for such a gap, with the moment at which most nodes were free in
 * *at and their number in *free_nodes; 0 for none; -1 when memory ran out. */
int sim_find_gap(const sim_record *record, const char *key, size_t key_len, const char *token,
                 size_t token_len, uint64_t from, uint64_t to, uint64_t *at, unsigned *free_nodes);
/* The same question, answered with the first moment of [from, to) at which a quorum of nodes was
 * up without the token (in *at): 1, or 0 when there was none, -1 when memory ran out. */
int sim_first_gap(const sim_record *record, const char *key, size_t key_len, const char *token,
                  size_t token_len, uint64_t from, uint64_t to, uint64_t *at);

#endif
