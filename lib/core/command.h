/* SPDX-License-Identifier: MIT */
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
    REDLOCK__CMD_ACQUIRE,        /* SET key token NX PX ttl */
    REDLOCK__CMD_EXTEND,         /* compare-and-pexpire script (optionally re-take) */
    REDLOCK__CMD_RELEASE,        /* compare-and-delete script */
    REDLOCK__CMD_INSPECT,        /* read value, PTTL and fence counter (script) */
    REDLOCK__CMD_ACQUIRE_FENCED, /* SET NX PX and read the counter, atomically (script) */
    REDLOCK__CMD_COMMIT,         /* counter = max(counter, fence) where the token stands */
    /* A Redis Cluster's topology (cluster.c): CLUSTER SHARDS, or CLUSTER SLOTS on servers older
     * than 7. YES with the array in data->raw; no key. */
    REDLOCK__CMD_CLUSTER_SHARDS,
    REDLOCK__CMD_CLUSTER_SLOTS,
    /* WAIT <fence> <ttl_ms>: how many replicas have the writes so far (cluster.c, the replica
     * wait); YES with the count in data->counter. No key. */
    REDLOCK__CMD_WAIT,
    /* TIME, asked only as a sign of life (kept.c's probe): YES for the server's answer. No key. */
    REDLOCK__CMD_TIME
} redlock__cmd_kind;

/* The name of a lock key's fencing counter: the lock key with this appended. It keeps the lock
 * key's prefix (ACL key patterns, SCAN) and its Redis Cluster hash tag, if any. */
#define REDLOCK__FENCE_SUFFIX ":fence"
#define REDLOCK__FENCE_SUFFIX_LEN 6
/* The names of a key's queue of waiters, of their deadlines and grant records, and (with ":"
 * and a waiter's id after it) of a waiter's own channel: the lock key with these appended (the
 * same prefix and hash tag, as the counter's). The queued scripts derive them
 * (lib/core/lua/queue.lua); the client names only its channels. */
#define REDLOCK__QUEUE_SUFFIX ":queue"
#define REDLOCK__QUEUE_SUFFIX_LEN 6
#define REDLOCK__DUE_SUFFIX ":queue-due"
#define REDLOCK__DUE_SUFFIX_LEN 10

/* What a reply carried beyond its vote: INSPECT's value, PTTL and counter, ACQUIRE_FENCED's
 * counter (on a yes), a waiter's lost attempt's wait (pttl_ms: how long until the node could let
 * it in without a release, -1 no end; -2 when the reply says nothing of it). value points into
 * the reply (valid while it lives). */
typedef struct redlock__reply_data {
    const char *value; /* NULL: no key */
    size_t value_len;
    int64_t pttl_ms;
    uint64_t counter;      /* the fence counter; 0 when the node has none (WAIT: replicas) */
    bool anew;             /* EXTEND with retake: the yes set a missing key anew (kept.c) */
    const redisReply *raw; /* the reply itself, for the CLUSTER kinds (NULL otherwise) */
    /* A cluster node's: "host:port" of the master that answered (cluster.c); NULL otherwise.
     * Valid while the client lives. */
    const char *answered_by;
} redlock__reply_data;

/* A waiter's part of a queued command: its id (waiter_len 0: none, for a RELEASE), its own
 * channel, which a grant record names, and, for an ACQUIRE, its place (when it began to wait, on
 * the wall clock) and how long a node keeps the place after an attempt. The waiting state owns
 * it (waiter.h); a command only points at it. */
typedef struct redlock__cmd_place {
    const char *waiter;
    size_t waiter_len;
    const char *channel;
    size_t channel_len;
    uint64_t place_us;
    uint64_t place_ttl_ms;
} redlock__cmd_place;

typedef struct redlock__cmd {
    redlock__cmd_kind kind;
    bool retake; /* EXTEND only */
    const char *key;
    size_t key_len;
    const char *token;
    size_t token_len;
    uint64_t ttl_ms;
    uint64_t key_hash; /* redlock__hash(key) */
    /* The counter's key (INSPECT, the fenced kinds, EXTEND of a fenced lock) and the fence to
     * commit (COMMIT) or to restore with a retake (EXTEND; 0: a lock without a fence). */
    const char *fence_key;
    size_t fence_key_len;
    uint64_t fence;
    /* A lock on several resources (redlock_acquire_multi): the keys after key. Then ACQUIRE,
     * EXTEND, RELEASE and INSPECT run the scripts of a set (scripts.h), all or none per node. */
    const redlock__span *more;
    unsigned n_more;
    /* A holder's RELEASE: tell the waiters (the scripts publish the release); false for the
     * release of a lost attempt, which wakes nobody. */
    bool tell;
    /* Fair turns (lib/core/lua/queue.lua): a waiter's ACQUIRE or ACQUIRE_FENCED, and the RELEASEs
     * of its attempts and its lock, run the queued scripts on every key of the lock: place is the
     * waiter's part (NULL: not queued); leave: a RELEASE that takes it out of the queues. */
    const redlock__cmd_place *place;
    bool leave;
    /* ACQUIRE: its round's send time, which a grant names (0: no grant anywhere). A node gets
     * it only with a grant tag (redlock__cmd_append_tagged). */
    uint64_t stamp_us;
    /* The command already encoded (not the EVAL form), which redlock__cmd_append copies instead
     * of encoding again; NULL: encode it. A round sets it only while it sends to its nodes. */
    const char *wire;
    size_t wire_len;
} redlock__cmd;

/* Whether cmd goes as a script (EVALSHA, or EVAL after a NOSCRIPT). */
static inline bool redlock__cmd_is_script(const redlock__cmd *cmd)
{
    if (cmd->kind >= REDLOCK__CMD_CLUSTER_SHARDS)
        return false;
    return cmd->kind != REDLOCK__CMD_ACQUIRE || cmd->n_more > 0 || cmd->place != NULL;
}

/* Whether a reply to cmd carries data (redlock__reply_data) for the caller. */
static inline bool redlock__cmd_has_data(const redlock__cmd *cmd)
{
    return cmd->kind == REDLOCK__CMD_INSPECT || cmd->kind == REDLOCK__CMD_ACQUIRE_FENCED ||
           cmd->kind >= REDLOCK__CMD_CLUSTER_SHARDS ||
           (cmd->place != NULL && cmd->kind == REDLOCK__CMD_ACQUIRE) ||
           (cmd->retake && cmd->kind == REDLOCK__CMD_EXTEND);
}

/* Whether cmd's script names the fence counter (fence_key) as its second key: INSPECT, the fenced
 * acquire, the commit and a fenced retake. Keys a command names: key; fence_key when this says
 * so; more[] (a set). The queued scripts derive the names of their queues and counter. */
bool redlock__cmd_uses_fence_key(const redlock__cmd *cmd);

/* Whether cmd's bytes differ by node: a waiter's acquire that a grant may answer names the node
 * (its grant tag), so it is encoded for each node instead of once for all. */
static inline bool redlock__cmd_per_node(const redlock__cmd *cmd)
{
    return cmd->place != NULL && cmd->stamp_us != 0 &&
           (cmd->kind == REDLOCK__CMD_ACQUIRE || cmd->kind == REDLOCK__CMD_ACQUIRE_FENCED);
}

/* Append the RESP encoding of cmd to out, always encoding it (redlock__cmd_append copies
 * cmd->wire instead when it can). grant_tag: for a waiter's acquire (redlock__cmd_per_node), 1 +
 * the node's index, which a grant on that node names, or 0 for a node where no grant may be made
 * (the record is then not written: lib/core/lua/acquire_queued.lua); ignored for any other command.
 */
int redlock__cmd_encode(const redlock__cmd *cmd, unsigned grant_tag, bool use_eval,
                        redlock__buf *out, const redlock__alloc *alloc);

/* Append the RESP encoding of cmd to out. Scripts go as EVALSHA, or as EVAL when use_eval (the
 * NOSCRIPT fallback). Returns 0 or REDLOCK_ENOMEM (out unchanged). Inline: a round's shared
 * encoding is copied at every node of every round, and the encoder's frame cost as much as the
 * copy. */
static inline int redlock__cmd_append_tagged(const redlock__cmd *cmd, unsigned grant_tag,
                                             bool use_eval, redlock__buf *out,
                                             const redlock__alloc *alloc)
{
    if (cmd->wire != NULL && !use_eval)
        return redlock__buf_append(out, alloc, cmd->wire, cmd->wire_len);
    return redlock__cmd_encode(cmd, grant_tag, use_eval, out, alloc);
}

/* The same for a command no grant answers. */
static inline int redlock__cmd_append(const redlock__cmd *cmd, bool use_eval, redlock__buf *out,
                                      const redlock__alloc *alloc)
{
    return redlock__cmd_append_tagged(cmd, 0, use_eval, out, alloc);
}

/* Append argv (argc strings of argvlen bytes) as one RESP command (an array of bulk strings) to
 * out. Returns 0 or REDLOCK_ENOMEM (out unchanged). */
int redlock__resp_append(int argc, const char *const *argv, const size_t *argvlen,
                         redlock__buf *out, const redlock__alloc *alloc);

/* The room redlock__resp_simple needs for a status line's text (its NUL included). */
#define REDLOCK__RESP_SIMPLE_TEXT 64

/* Take one reply from the start of data (len bytes) if it is one of the three simple kinds a lock
 * cycle gets (a status line such as +OK of at most REDLOCK__RESP_SIMPLE_TEXT - 1 bytes, an
 * integer of at most 18 digits, a nil bulk string $-1): fill *out as hiredis's reader would
 * (elements none; a status's text copied into text, NUL-terminated, and out->str pointing
 * there) and return the bytes it took. Anything else, or a reply not complete within len,
 * returns 0 and leaves it to hiredis's reader, which also reports malformed input: a fast path
 * with no allocation, never a second parser's opinion. */
size_t redlock__resp_simple(const char *data, size_t len, redisReply *out,
                            char text[REDLOCK__RESP_SIMPLE_TEXT]);

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
 * not, and *data is filled; for ACQUIRE_FENCED, a yes fills data->counter; for an EXTEND with
 * retake, data->anew says whether its yes set the key anew; a counter that is not
 * a decimal number below 2^64 - 1 is an ERROR). On ERROR a message (the server's text, or what was
 * wrong with the reply) goes to err; a queued release's YES or NO may come with a note in err
 * (its queue upkeep failed), which is otherwise left as it was. *kind says whether the reply fits
 * the command at all (see above); a NOSCRIPT or a mismatch always comes with ERROR. */
redlock_vote redlock__cmd_vote(const redlock__cmd *cmd, const redisReply *reply, char *err,
                               size_t err_len, redlock__reply_kind *kind,
                               redlock__reply_data *data);

/* "SET", "extend", "release", ...: for messages. */
const char *redlock__cmd_name(redlock__cmd_kind kind);

#endif
