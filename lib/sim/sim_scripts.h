/* SPDX-License-Identifier: MIT */
/* sim_scripts.h - what a simulated Redis server does with each command the library sends: the C
 * models of SET NX PX and of every script of lib/core/lua/ (scripts.h), run on a sim_db keyspace.
 *
 * A model follows its script line by line, side effects included: the order of writes, what a
 * script that stops with an error has already written (a server does not roll a script back),
 * the queues' upkeep, every PUBLISH with its channel and text, and the answers of PUBSUB NUMSUB
 * and PUBLISH, which the caller gives (the simulated pub/sub). The differential test
 * (test_sim_scripts.c) runs seeded command sequences through the models and through the real
 * scripts on a real redis-server and requires the same replies, publications and keys, so a
 * model cannot drift from its script.
 *
 * The commands come as the library encodes them (redlock__cmd_encode): an argv of SET, or of
 * EVALSHA / EVAL with the script's SHA-1 or source. */
#ifndef SIM_SCRIPTS_H
#define SIM_SCRIPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "scripts.h"
#include "sim_db.h"

#define SIM_REPLY_TEXT 320 /* a token (at most 256 bytes), a counter, an error's text */

typedef enum { SIM_R_NIL, SIM_R_STATUS, SIM_R_ERROR, SIM_R_INT, SIM_R_BULK, SIM_R_ARRAY } sim_rtype;

typedef struct sim_rval {
    sim_rtype type;
    long long integer;
    size_t len;
    char str[SIM_REPLY_TEXT];
} sim_rval;

typedef struct sim_reply {
    sim_rval v; /* SIM_R_ARRAY: its elements are elem[0..n) */
    unsigned n;
    sim_rval elem[3];
    bool raised;    /* the error was raised while the script ran (not returned by it) */
    bool wrote;     /* the command changed the keyspace (what a replica must copy) */
    unsigned freed; /* a release: keys it deleted because they held its token */
} sim_reply;

/* What a server around the keyspace answers: pub/sub, and (for a Redis Cluster's master during a
 * slot migration) whether a script may touch a key it did not declare. */
typedef struct sim_server_hooks {
    /* PUBSUB NUMSUB channel: the subscribers this server counts, or -1: refused (an ACL). */
    long long (*numsub)(void *ctx, const char *channel, size_t len);
    /* PUBLISH: how many received it, or -1: refused. */
    long long (*publish)(void *ctx, const char *channel, size_t len, const char *msg,
                         size_t msg_len);
    /* NULL, or an error's text when a script may not touch key here (NULL hook: every key). */
    const char *(*refuse_key)(void *ctx, const char *key, size_t len);
    void *ctx;
    /* The library's scripts (redlock__scripts, REDLOCK__SCRIPTS of them: scripts.h), by which
     * an EVALSHA's SHA-1 or an EVAL's source finds its model; a script not among them is
     * NOSCRIPT. */
    const redlock__script *const *scripts;
    unsigned n_scripts;
} sim_server_hooks;

/* Broken variants of the scripts, the simulation's controls (each a rule the grants issue found
 * broken, or an old rule): */
enum {
    /* release_queued.lua grants the head's whole ttl whatever is left of its place */
    SIM_BREAK_GRANT_FULL_TTL = 1,
    /* queue.lua's listens() compares what a refused PUBSUB NUMSUB gave: a Lua error after the
     * release deleted the key */
    SIM_BREAK_NUMSUB_RAISES = 2,
    /* acquire_queued.lua places a waiter by its attempt's arrival (the server's clock), not by
     * when it began to wait */
    SIM_BREAK_QUEUE_BY_ARRIVAL = 4,
};

/* Run argv (argc strings) on db at now_us (the server's clock, microseconds; TIME gives it) as a
 * server would, into *out. breaks: SIM_BREAK_* flags (0: the scripts as they are). */
void sim_server_exec(sim_db *db, uint64_t now_us, const sim_server_hooks *hooks, unsigned breaks,
                     int argc, const char *const *argv, const size_t *lens, sim_reply *out);

/* The keys a command declares (SET's key, a script's KEYS), pointing into argv: their count. */
int sim_command_keys(int argc, const char *const *argv, const size_t *lens, const char **keys,
                     size_t *key_lens, int max);

/* The library's RESP encoding of a command (an array of bulk strings) as argv pointing into buf:
 * the count, or -1 when buf is not one whole such array of at most max strings. */
int sim_resp_argv(const char *buf, size_t len, const char **argv, size_t *lens, int max);

/* A waiter's grant record, as release_queued.lua reads it (the value of field "<id>:g" of
 * "<key>:queue-due": "ttl:stamp:tag:j:fenced[:klen:ck]:clen:<channel><token>"): its fields,
 * pointing into the value. */
typedef struct sim_grant_record {
    double ttl;
    const char *stamp, *tag, *j, *ck, *ch, *token;
    size_t stamp_len, tag_len, j_len, ck_len, ch_len, token_len;
    bool fenced;
    bool has_ck; /* a fence domain's counter, ck (fenced "2") */
} sim_grant_record;

/* Read a grant record's value (len bytes) into *out: false if the script would not take it. */
bool sim_grant_record_parse(const char *value, size_t len, sim_grant_record *out);

/* *out (and elems, ptrs: room for three elements) as hiredis would have parsed reply, for
 * redlock__cmd_vote. Valid while reply is. */
void sim_reply_to_redis(const sim_reply *reply, redisReply *out, redisReply elems[3],
                        redisReply *ptrs[3]);

#endif
