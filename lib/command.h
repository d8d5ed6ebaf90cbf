/* command.h - what a round sends to one node and what the answer means.
 *
 * A command is described by its kind and arguments; this file turns it into RESP (with
 * hiredis's redisFormatCommandArgv) and turns a reply into a vote. No IO. */
#ifndef REDLOCK_COMMAND_H
#define REDLOCK_COMMAND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "common.h"

typedef enum {
    REDLOCK__CMD_ACQUIRE, /* SET key token NX PX ttl */
    REDLOCK__CMD_EXTEND,  /* compare-and-pexpire script (optionally re-take) */
    REDLOCK__CMD_RELEASE, /* compare-and-delete script */
    REDLOCK__CMD_INSPECT  /* read value and PTTL (script) */
} redlock__cmd_kind;

/* What an INSPECT reply carried; value points into the reply (valid while it lives). */
typedef struct redlock__reply_data {
    const char *value; /* NULL: no key */
    size_t value_len;
    int64_t pttl_ms;
} redlock__reply_data;

typedef struct redlock__cmd {
    redlock__cmd_kind kind;
    bool retake; /* EXTEND only */
    const char *key;
    size_t key_len;
    const char *token;
    size_t token_len;
    uint64_t ttl_ms;
    uint64_t key_hash; /* redlock__hash(key) */
} redlock__cmd;

/* Append the RESP encoding of cmd to out. Scripts go as EVALSHA, or as EVAL when use_eval (the
 * NOSCRIPT fallback). Returns 0 or REDLOCK_ENOMEM (out unchanged). */
int redlock__cmd_append(const redlock__cmd *cmd, bool use_eval, redlock__buf *out,
                        const redlock__alloc *alloc);

/* What kind of answer a reply is, beyond its vote. */
typedef enum {
    REDLOCK__REPLY_ANSWER,   /* a reply Redis gives to this command (an error reply included) */
    REDLOCK__REPLY_NOSCRIPT, /* a NOSCRIPT error to an EVALSHA: the caller resends with EVAL */
    /* A reply no Redis gives to this command (a SET answered with an integer, a release with
     * nil): the replies on this connection are out of step with the requests, or the peer is
     * not Redis. The caller must drop the connection: no later reply on it can be trusted. */
    REDLOCK__REPLY_MISMATCH
} redlock__reply_kind;

/* What the reply means for cmd: YES / NO / ERROR (for INSPECT: YES the key exists, NO it does
 * not, and *data is filled). On ERROR a message (the server's text, or what was wrong with the
 * reply) goes to err. *kind says whether the reply fits the command at all (see above); a
 * NOSCRIPT or a mismatch always comes with ERROR. */
redlock_vote redlock__cmd_vote(const redlock__cmd *cmd, const redisReply *reply, char *err,
                               size_t err_len, redlock__reply_kind *kind,
                               redlock__reply_data *data);

/* "SET", "extend", "release": for messages. */
const char *redlock__cmd_name(redlock__cmd_kind kind);

#endif
