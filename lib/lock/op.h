/* SPDX-License-Identifier: MIT */
/* op.h - operations and the rounds they run: what round.c, op.c, acquire.c, hold.c and waiter.c
 * share. Nothing here is public.
 *
 * An operation (acquire, extend, release, inspect) runs one or more rounds. A round sends one
 * command to every node through the io (io.h) and feeds the votes to the quorum core
 * (quorum.h); the operation acts as soon as its kind says the round is decided (op_kind_def).
 * A round lives until its last node answers or times out, even after its operation moved on, so
 * late replies always land in valid memory and are ignored.
 *
 * Callbacks never run inside a public call: a completion that happens there (every node down)
 * is delivered from the timer queue on the next loop turn.
 *
 * An operation's life (op_state):
 *
 *     OP_RUNNING --round decided, retry due--> OP_RETRYING --timer--> OP_RUNNING
 *     OP_RUNNING, OP_RETRYING --outcome known, or redlock_cancel--> OP_DECIDED --> delivered
 *
 * OP_DECIDED waits only for its delivery: at once, on the next loop turn (decided inside a public
 * call), or at the close (a closing client delivers everything with REDLOCK_ECANCELED).
 *
 * A round's life (round_state):
 *
 *     ROUND_SENDING --written to every node--> ROUND_OPEN or ROUND_DONE
 *     ROUND_OPEN --a vote--> ROUND_CHECKING --> ROUND_OPEN or ROUND_DONE
 *     ROUND_OPEN --its operation canceled--> ROUND_DONE
 *
 * Votes are counted in every state. Only ROUND_OPEN acts on them: in ROUND_SENDING the round acts
 * once every node has its command (a node that is down answers at once, and a release must not
 * overtake an acquire still to be written); in ROUND_CHECKING a completion nested in the check (a
 * callback closed the client) is counted and nothing more. ROUND_DONE means its operation has
 * acted, or none listens (a release of a lost attempt, a canceled operation's round): the round
 * waits for its last answers, then is freed - unless its operation still holds it for the
 * per-node results it hands its callback (`held`, an ownership, not a stage of life).
 *
 * Layers: round.c (rounds) and op.c (an operation's life) know the kinds only through their
 * op_kind_def; acquire.c (with waiter.c, the waiting) and hold.c (extend, release, inspect) are the
 * kinds. They call down only: the client core (client.h), lock handles (lock.h), the counters
 * (stats.h), the quorum core and the io; a won acquire starts the auto-extension it asked for
 * (won.c, redlock_auto_extend: built on extends, it calls nothing back here). What follows a hold
 * hears of a deadline that moved, or of the hold's end, through the callbacks it set on the lock
 * (lock.h). */
#ifndef REDLOCK_OP_H
#define REDLOCK_OP_H

#include "canceler.h"
#include "client.h"
#include "lock.h"
#include "quorum.h"

typedef enum { OP_RUNNING, OP_RETRYING, OP_DECIDED } op_state;

typedef enum { ROUND_SENDING, ROUND_OPEN, ROUND_CHECKING, ROUND_DONE } round_state;

typedef struct redlock__round redlock__round;
typedef struct redlock__op redlock__op;
typedef struct redlock__waiter redlock__waiter; /* waiter.h */

/* What a kind of operation does with the machinery of rounds and operations (one table per
 * kind: acquire.c, hold.c). */
typedef struct op_kind_def {
    /* The command of o's next round. */
    redlock__cmd_kind (*command)(const redlock__op *o);
    /* What the kind adds to a fresh round before it is sent (NULL: nothing). */
    void (*prepare)(redlock__op *o, redlock__round *r);
    /* A round of o was sent or got a vote: act if it is decided. Returns whether the round is
     * done (acted on), or waits for more votes. */
    bool (*check)(redlock__op *o, redlock__round *r);
    /* A late vote, after r was decided while o still holds it (NULL: nothing). */
    void (*late_vote)(redlock__op *o, redlock__round *r, redlock_vote vote);
    /* The handle o's callback is handed (NULL: none), and what follows the callback. */
    redlock_lock *(*handed)(redlock__op *o);
    void (*delivered)(redlock__op *o);
    /* o is canceled before its delivery (its state says where it was; NULL: nothing to undo). */
    void (*cancel)(redlock__op *o);
    /* o's outcome is known (o->status): true when the kind holds its delivery back, to call
     * redlock__op_complete again once it is ready (NULL: deliver now). */
    bool (*hold_back)(redlock__op *o);
    /* o is being delivered, held back or not: nothing the kind started for it in hold_back
     * writes into it any more (NULL: nothing to detach). */
    void (*detach)(redlock__op *o);
    /* A closing client releases what o may have taken (an acquire in flight or won). */
    bool release_on_close;
} op_kind_def;

struct redlock__op {
    const op_kind_def *def;
    op_state state;
    bool cancelable; /* redlock_cancel may name it (not the auto-extension's own extends) */
    redlock_client *client;
    redlock_lock *lock;
    redlock_cb cb;
    void *data;
    redlock__closer closer; /* in client->ops until delivered (or freed): the close delivers it */
    redlock__timer timer;   /* retry delay, or deferred delivery */
    redlock__round *round;  /* the latest round: its per-node outcome goes to the callback */
    uint64_t call_us;
    uint64_t ttl_ms;
    unsigned flags;
    unsigned attempts;
    int retries_left;
    uint64_t wait_deadline_us; /* 0: none */
    uint64_t prev_deadline_us; /* extend: the validity the round must beat */
    int status;                /* final in OP_DECIDED */
    bool after_lost;           /* extend: called after the lock was reported lost */
    bool late;                 /* release: called when the lock's validity had already run out */
    redlock__waiter *w;        /* an acquire with a wait; NULL for any other */
    /* An acquire that asked for auto-extension: started when it wins (won.c). */
    bool has_auto;
    redlock_auto_opts auto_opts;
    redlock_lost_cb lost_cb;
    void *lost_data;
    /* An acquire's canceler (redlock_lock_opts.cancel), registered until it is delivered
     * (canceler.h); not registered for any other. */
    redlock__canceler_reg cancel;
    /* A refused acquire asks why before its delivery (busy.h): once, while probe is set. */
    bool probed;
    struct busy_probe *probe;
};

typedef struct round_req {
    redlock__req req;
    redlock__round *round;
    unsigned node;
    /* A waiter's attempt that this node said no to: how long (ms) until the node could let it
     * in without a release (lib/core/lua/acquire_queued.lua; -1 no end, -2 not said). Read only for
     * such a no, which always sets it. */
    int64_t wait_ms;
} round_req;

struct redlock__round {
    redlock_client *client;
    redlock__op *op; /* NULL once no operation listens */
    redlock_lock *lock;
    redlock__cmd cmd;
    redlock_round q;
    unsigned outstanding; /* requests not yet completed */
    /* The nodes whose answer shows the key held the lock's token without a break: an extend's
     * renewals (not a key set anew), a release's deletes (kept.c, redlock__continuity). */
    uint64_t evidence;
    bool proven; /* an extend shown continuous by them (hold.c) */
    round_state state;
    bool held;       /* the operation keeps it for its callback's result */
    bool close_wait; /* a release whose answers a closing client waits for (its last answer is a
                        step of the close: redlock__client_close_step) */
    redlock__list release_link; /* a release's: client->releases, while it lives */
    redlock_node_result *results;
    char *errors; /* n_nodes * REDLOCK_ERROR_TEXT_MAX */
    char *values; /* INSPECT: n_nodes * REDLOCK_TOKEN_MAX */
    /* The token as it was when the round started: the lock's token changes between acquire
     * attempts, and this round's late commands (a NOSCRIPT resend) must keep its own. */
    char token[REDLOCK_TOKEN_MAX + 1];
    round_req reqs[];
};

/* ---- round.c: rounds ---------------------------------------------------------------------- */

/* A round of o (NULL: nobody listens) on lock's keys, not yet sent. NULL without memory. */
redlock__round *redlock__round_new(redlock_client *c, redlock__op *o, redlock_lock *lock,
                                   redlock__cmd_kind kind, uint64_t ttl_ms, bool retake);
/* Write r's command to every node that has not voted yet (init_q: start its quorum round now),
 * then let its operation act on what is known. */
void redlock__round_send(redlock__round *r, bool init_q);
/* Whether r (an extend or the release of a held lock) shows the hold continuous: its evidence
 * from the lock's kept nodes, with the nodes still to answer (redlock__continuity). */
redlock__cont redlock__round_continuity(const redlock__round *r);
/* Free r if nothing holds it any more (its answers are in, nobody keeps its results). */
void redlock__round_maybe_free(redlock__round *r);
/* Release the lock's keys on every node; nobody waits for the answers (docs/algorithm.md, "A
 * lost acquire releases on every node"). leave: the waiter leaves the queues; tell: a holder's
 * release, which wakes the waiters (a lost attempt's wakes nobody). */
void redlock__round_release_everywhere(redlock_client *c, redlock_lock *lock, bool leave,
                                       bool tell);

/* ---- op.c: an operation's life -------------------------------------------------------------- */

/* A new operation of kind def on lock (not referenced: the caller gives it one). NULL without
 * memory. */
redlock__op *redlock__op_new(redlock_client *c, const op_kind_def *def, redlock_lock *lock,
                             redlock_cb cb, void *data);
/* Give o's memory back (its round released first); it leaves client->ops. */
void redlock__op_free(redlock__op *o);
/* Start o's first round from inside a public call; a failure to start leaves nothing behind and
 * returns the error (the client's last error set). */
int redlock__op_launch(redlock__op *o);
/* Run o's next round. Returns 0 or REDLOCK_ENOMEM. */
int redlock__op_start_round(redlock__op *o);
/* o keeps r for its callback's results (NULL: none); the round it kept before is let go. */
void redlock__op_hold_round(redlock__op *o, redlock__round *r);
/* o's outcome is known: deliver it now, or on the next loop turn when inside a public call, or
 * at the close. */
void redlock__op_complete(redlock__op *o, int status);
/* Whether o may try again (its wait deadline, or retries left: one is used). */
bool redlock__op_may_retry(redlock__op *o, uint64_t now_us);
/* The retry delay, retry_delay_ms +/- retry_jitter_ms. */
uint64_t redlock__op_retry_delay_us(redlock_client *c);
/* The timer callback of a retry: o runs its next round. */
void redlock__op_on_retry_timer(redlock__timer *t);
/* What a call that names a ttl checks; sets the client's last error. */
int redlock__op_check_ttl(redlock_client *c, uint64_t ttl_ms);
/* The close has begun (api.c, after redlock__client_close_begin): every operation lets go of its
 * canceler; every release still out (decided at the quorum, or in flight) counts in the
 * client's close steps until its last node answered or timed out, so the close completes after
 * their deletes; then, unless flags has REDLOCK_CLOSE_FAST, each acquire in flight or won and not
 * handed out, and each lock the caller holds (handed out, not released, not attached), is
 * released on every node, each release a close step; then the step the close's begin counted is
 * done. Once the io is closed, every operation still pending is delivered with REDLOCK_ECANCELED
 * through its closer (client.h). */
void redlock__ops_close(redlock_client *c, unsigned flags);
/* o (not launched yet) carries token: canceled when it fires. Returns 0, REDLOCK_ECANCELED (it
 * has fired), REDLOCK_ENOMEM (no wake-up handle) or REDLOCK_EINVAL (an io no other thread can
 * wake); sets the client's last error. */
int redlock__op_carry_canceler(redlock__op *o, redlock_canceler *token);

/* ---- acquire.c, hold.c: the kinds ------------------------------------------------------------ */

extern const op_kind_def redlock__acquire_kind;
extern const op_kind_def redlock__extend_kind;
extern const op_kind_def redlock__release_kind;
extern const op_kind_def redlock__inspect_kind;

/* A fresh token for lock: 128 bits from the io's CSPRNG, as 32 hex digits. 0 or REDLOCK_ENOMEM. */
int redlock__acquire_new_token(redlock_client *c, redlock_lock *lock);
/* The acquire round r of o was won, or its commit round (won.c): the lock is granted.
 * Returns 0, or why it is not worth handing out after all. */
int redlock__lock_grant(redlock__op *o, redlock__round *r);
/* The fenced acquire round of o was won (by_grants: with grants): commit its fence on every
 * node. 0 or REDLOCK_ENOMEM. */
int redlock__commit_start(redlock__op *o, redlock__round *acquire, bool by_grants);

/* redlock_extend (hold.c); the auto-extension's own extends are not cancelable by
 * redlock_cancel. */
int redlock__extend(redlock_lock *lock, uint64_t ttl_ms, unsigned flags, redlock_cb cb, void *data,
                    bool cancelable);
/* May an extend of lock use REDLOCK_EXTEND_RETAKE (hold.c)? Not while the lock is not known to
 * have been held without a gap since its last won round: an attached lock before its first won
 * extend, a lock an extend found lost. Returns 0 or REDLOCK_EINVAL with the client's last error
 * set. */
int redlock__extend_check_retake(redlock_lock *lock);

#endif
