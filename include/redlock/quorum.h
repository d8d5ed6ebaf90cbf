/* SPDX-License-Identifier: MIT */
/*
 * redlock/quorum.h - the quorum core: the decision of one round over N nodes, with no IO, no
 * allocation and no clock of its own, so a caller's tests can drive it vote by vote with a fake
 * clock. Included by redlock.h; include that. The rules it applies are docs/algorithm.md's
 * ("Deciding", "Fences"); the reference is docs/api.md, "The quorum core".
 */
#ifndef REDLOCK_REDLOCK_QUORUM_H
#define REDLOCK_REDLOCK_QUORUM_H

#ifndef REDLOCK_H
#error "include <redlock.h>, not <redlock/quorum.h>"
#endif

#define REDLOCK_DRIFT_FIXED_US 2000 /* the fixed part of the drift allowance */

/* A node's answer in a round. */
typedef enum {
    REDLOCK_VOTE_NONE = 0, /* no vote yet (or the round was decided before this node answered) */
    REDLOCK_VOTE_YES,      /* OK / 1: the node did what was asked */
    REDLOCK_VOTE_NO,       /* nil / 0: held by someone else, or not ours any more */
    REDLOCK_VOTE_ERROR,    /* error reply, connection down, protocol garbage */
    REDLOCK_VOTE_TIMEOUT   /* no answer before the node's deadline */
} redlock_vote;

typedef enum { REDLOCK_ROUND_PENDING = 0, REDLOCK_ROUND_WON, REDLOCK_ROUND_LOST } redlock_decision;

/* What a round is (redlock_round.fence_kind). */
#define REDLOCK_ROUND_PLAIN 0u  /* from redlock_round_init */
#define REDLOCK_ROUND_FENCED 1u /* an acquire round made fenced by redlock_round_fencing */
#define REDLOCK_ROUND_COMMIT 2u /* a commit round from redlock_round_commit_init */

/* One round, in the caller's memory; read it through the functions below (its members are public
 * only so that it can live on the stack). Its size is frozen within a soversion. */
typedef struct redlock_round {
    unsigned n_nodes;
    unsigned quorum; /* of a commit round: the acks it needs */
    unsigned votes_yes, votes_no, votes_error, votes_timeout;
    uint64_t ttl_us;
    uint64_t drift_us;
    uint64_t min_validity_us;
    uint64_t start_us;
    uint64_t decided_us;  /* time of the deciding vote (check the decision, not this) */
    uint64_t validity_us; /* on a win: validity left at decided_us; else 0 */
    uint64_t voted_mask;  /* bit i set once node i voted */
    redlock_decision decision;
    int status;                             /* see redlock_round_status */
    unsigned char votes[REDLOCK_MAX_NODES]; /* redlock_vote per node */
    /* In place of the first two reserved slots: the fence (redlock_round_fence) and what the
     * round is (REDLOCK_ROUND_PLAIN, _FENCED or _COMMIT). */
    uint64_t fence;
    uint64_t fence_kind;
    uint64_t reserved[2]; /* zeroed by redlock_round_init; room for a minor release */
} redlock_round;

/* The votes that decide among n_nodes: n_nodes / 2 + 1, a strict majority (so two rounds never
 * both win); 1 for 0. */
REDLOCK_EXTERN unsigned redlock_quorum_of(unsigned n_nodes);
/* Start a round over n_nodes at start_us (taken before the first command is written). Returns 0,
 * or REDLOCK_EINVAL with the round zeroed and refusing every vote. */
REDLOCK_EXTERN int redlock_round_init(redlock_round *round, unsigned n_nodes, uint64_t ttl_ms,
                                      double drift_factor, uint64_t min_validity_ms,
                                      uint64_t start_us);
/* Record node's vote, arrived at now_us. Returns the decision after it (>= 0), or REDLOCK_EINVAL
 * and counts nothing. */
REDLOCK_EXTERN int redlock_round_vote(redlock_round *round, unsigned node, redlock_vote vote,
                                      uint64_t now_us);
/* The decision so far. */
REDLOCK_EXTERN redlock_decision redlock_round_decision(const redlock_round *round);
/* The round as an error code: 0 won, REDLOCK_EAGAIN pending, else why it was lost. */
REDLOCK_EXTERN int redlock_round_status(const redlock_round *round);
/* Validity left at the winning vote, in microseconds (0 unless won). */
REDLOCK_EXTERN uint64_t redlock_round_validity_us(const redlock_round *round);
/* The round's drift allowance, in microseconds. */
REDLOCK_EXTERN uint64_t redlock_round_drift_us(const redlock_round *round);
/* The vote recorded for node (REDLOCK_VOTE_NONE if none or out of range). */
REDLOCK_EXTERN redlock_vote redlock_round_node_vote(const redlock_round *round, unsigned node);
/* "none", "yes", "no", "error", "timeout". */
REDLOCK_EXTERN const char *redlock_vote_name(redlock_vote vote);

/* Fencing (docs/algorithm.md, "Fences"): an acquire round made fenced, whose yes votes
 * carry each node's counter, then a commit round. */

/* Make a fresh round (no vote yet) the acquire round of a fenced acquisition. */
REDLOCK_EXTERN int redlock_round_fencing(redlock_round *round);
/* Vote on a fenced acquire round; counter (the node's, when its key was set) is read for a yes. */
REDLOCK_EXTERN int redlock_round_vote_counter(redlock_round *round, unsigned node,
                                              redlock_vote vote, uint64_t counter, uint64_t now_us);
/* The fence: of a won fenced acquire round, or the one a commit round commits; else 0. */
REDLOCK_EXTERN uint64_t redlock_round_fence(const redlock_round *round);
/* Start the commit round of acquire, a won fenced acquire round; commit_acks 0 is the quorum. */
REDLOCK_EXTERN int redlock_round_commit_init(redlock_round *commit, const redlock_round *acquire,
                                             unsigned commit_acks);

#endif /* REDLOCK_REDLOCK_QUORUM_H */
