/* SPDX-License-Identifier: MIT */
/* sim_diff.h - one real redis-server and the models of the scripts side by side
 * (test_sim_scripts.c): a command run on both, and everything compared - the reply, the
 * publications (the server's MONITOR shows each one a script makes), every key. */
#ifndef SIM_DIFF_H
#define SIM_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "fixture.h"
#include "sim_scripts.h"

#define TOL_MS                                                                                     \
    250 /* a time-derived number (a wait, a PTTL, a place deadline) may differ this much */
#define MAX_ARGS 32
#define MAX_PUBS 32
#define MAX_LISTEN 8

/* Who runs the scripts: the default user, or one whose ACL refuses PUBSUB NUMSUB, or PUBLISH. */
enum { USER_DEFAULT, USER_NO_NUMSUB, USER_NO_PUBLISH, N_USERS };

typedef struct pub {
    char channel[128];
    size_t channel_len;
    char msg[SIM_REPLY_TEXT];
    size_t msg_len;
} pub;

typedef struct pubs {
    unsigned n;
    bool overflow;
    pub v[MAX_PUBS];
} pubs;

/* What the sequences exercised (counted on the model's side of each step that matched). */
typedef struct coverage {
    unsigned grants, cut_grants, fenced_grants, woken, woken_on_queue, told_key, queued_waits,
        taken_by_head, fence_errors, raised, refused;
    /* steps that raised the fence domain's counter shared by every key (test_sim_scripts.c): by
     * a grant (a queued release), by a waiter's attempt, by any other command */
    unsigned domain_grants, domain_queued, domain_other;
} coverage;

typedef struct diff {
    fixture_cluster fx;
    coverage cov;
    redisContext *conn[N_USERS];
    redisContext *sub; /* the listeners: SUBSCRIBEd to the channels in listen[] */
    redisContext *mon; /* MONITOR: every PUBLISH a script makes */
    sim_db db;
    unsigned user;
    unsigned breaks;
    char listen[MAX_LISTEN][64];
    unsigned n_listen;
    pubs model_pubs;
    uint64_t mark;
    bool trace;
    redlock__alloc alloc;
    /* the command of this step, for messages */
    char what[1024];
} diff;

typedef struct step_ctx {
    uint64_t seed;
    unsigned step;
    bool quiet; /* a broken model is expected to differ: say nothing */
} step_ctx;

void diff_start(diff *d);
void diff_stop(diff *d);
uint64_t server_time_us(diff *d);
void command_ok(redisContext *c, const char *fmt, ...);
/* Whether the listeners' connection is SUBSCRIBEd to ch; (un)subscribe it. */
bool listening(const diff *d, const char *ch, size_t len);
void set_listening(diff *d, const char *ch, bool on);
/* Run the encoded command (buf) on both and compare everything; timed: its reply is a number
 * from the server's clock. False (with the difference printed, unless s->quiet) if they differ. */
bool run_both(diff *d, const step_ctx *s, const redlock__buf *buf, bool timed);
/* Every live key on both. */
bool same_keys(diff *d, const step_ctx *s);
/* A write made by hand (an edge case), on both. */
void raw_set(diff *d, const char *key, const char *value);
void raw_hset(diff *d, const char *key, const char *field, const char *value);
void raw_del(diff *d, const char *key);

#endif
