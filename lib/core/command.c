/* SPDX-License-Identifier: MIT */
/* command.c - RESP encoding of the commands and the meaning of their replies. */
#include "command.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "scripts.h"

const char *redlock__cmd_name(redlock__cmd_kind kind)
{
    switch (kind) {
    case REDLOCK__CMD_ACQUIRE:
        return "SET";
    case REDLOCK__CMD_EXTEND:
        return "extend";
    case REDLOCK__CMD_RELEASE:
        return "release";
    case REDLOCK__CMD_INSPECT:
        return "inspect";
    case REDLOCK__CMD_ACQUIRE_FENCED:
        return "fenced acquire";
    case REDLOCK__CMD_COMMIT:
        return "fence commit";
    case REDLOCK__CMD_CLUSTER_SHARDS:
        return "CLUSTER SHARDS";
    case REDLOCK__CMD_CLUSTER_SLOTS:
        return "CLUSTER SLOTS";
    case REDLOCK__CMD_WAIT:
        return "WAIT";
    case REDLOCK__CMD_TIME:
        return "TIME";
    }
    return "?";
}

/* The script cmd runs (redlock__cmd_is_script). */
static const redlock__script *cmd_script(const redlock__cmd *cmd)
{
    if (cmd->place != NULL) /* a waiter's: only its acquires and releases are ever sent queued */
        return cmd->kind == REDLOCK__CMD_RELEASE ? &redlock__script_release_queued
                                                 : &redlock__script_acquire_queued;
    if (cmd->n_more > 0) { /* a set: only these four kinds are ever sent for one */
        switch (cmd->kind) {
        case REDLOCK__CMD_ACQUIRE:
            return &redlock__script_acquire_multi;
        case REDLOCK__CMD_EXTEND:
            return &redlock__script_extend_multi;
        case REDLOCK__CMD_INSPECT:
            return &redlock__script_inspect_multi;
        default:
            return &redlock__script_release_multi;
        }
    }
    switch (cmd->kind) {
    case REDLOCK__CMD_EXTEND:
        /* Only a retake of a fenced lock touches the counter; every other extend stays the
         * plain compare-and-pexpire. */
        return cmd->fence != 0 && cmd->retake ? &redlock__script_extend_fenced
                                              : &redlock__script_extend;
    case REDLOCK__CMD_RELEASE:
        return &redlock__script_release;
    case REDLOCK__CMD_INSPECT:
        return &redlock__script_inspect;
    case REDLOCK__CMD_ACQUIRE_FENCED:
        return &redlock__script_acquire_fenced;
    case REDLOCK__CMD_COMMIT:
    default:
        return &redlock__script_commit;
    }
}

/* v in decimal into buf (at least 20 bytes, no NUL); returns the length. Every command carries
 * one or two numbers and a length per argument: cheaper than snprintf, which is a visible share
 * of a lock cycle, and the one- and two-digit lengths take no division loop. */
static size_t u64_decimal(char *buf, uint64_t v)
{
    if (v < 10) {
        buf[0] = (char)('0' + v);
        return 1;
    }
    if (v < 100) {
        buf[0] = (char)('0' + v / 10);
        buf[1] = (char)('0' + v % 10);
        return 2;
    }
    char tmp[20];
    size_t n = sizeof(tmp);
    do {
        tmp[--n] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    memcpy(buf, tmp + n, sizeof(tmp) - n);
    return sizeof(tmp) - n;
}

/* The widest RESP header: a type byte, 20 digits, CRLF. */
#define RESP_HEADER_MAX 23

static char *resp_header(char *w, char type, uint64_t n)
{
    *w++ = type;
    w += u64_decimal(w, n);
    *w++ = '\r';
    *w++ = '\n';
    return w;
}

/* The command in RESP (an array of bulk strings) onto out, through the library's allocator,
 * written in place: room for every header at its widest is made first, so each length is
 * formatted once and nothing is copied twice. hiredis's redisFormatCommandArgv wrote each
 * length with sprintf into memory of its own malloc: over half of a lock cycle's instructions
 * (bench/HISTORY.md). */
int redlock__resp_append(int argc, const char *const *argv, const size_t *argvlen,
                         redlock__buf *out, const redlock__alloc *alloc)
{
    size_t max = RESP_HEADER_MAX;
    for (int i = 0; i < argc; i++) {
        if (argvlen[i] > SIZE_MAX / 2 - max)
            return REDLOCK_ENOMEM;
        max += RESP_HEADER_MAX + argvlen[i] + 2;
    }
    if (redlock__buf_reserve(out, alloc, max) != 0)
        return REDLOCK_ENOMEM;
    char *w = resp_header(out->data + out->len, '*', (uint64_t)argc);
    for (int i = 0; i < argc; i++) {
        w = resp_header(w, '$', argvlen[i]);
        memcpy(w, argv[i], argvlen[i]);
        w += argvlen[i];
        *w++ = '\r';
        *w++ = '\n';
    }
    out->len = (size_t)(w - out->data);
    return 0;
}

/* Whether cmd's counter is its key's own (the key and REDLOCK__FENCE_SUFFIX), which the queued
 * script derives, rather than a fence domain's, which it is given. */
static bool own_counter(const redlock__cmd *cmd)
{
    return cmd->fence_key_len == cmd->key_len + REDLOCK__FENCE_SUFFIX_LEN &&
           memcmp(cmd->fence_key, cmd->key, cmd->key_len) == 0 &&
           memcmp(cmd->fence_key + cmd->key_len, REDLOCK__FENCE_SUFFIX,
                  REDLOCK__FENCE_SUFFIX_LEN) == 0;
}

/* A set's command, or a waiter's (queued, of one key or a set): EVALSHA sha k key... then
 * token [ttl [retake]] (a set's: acquire, extend, release with its tell flag, inspect), or the
 * queued scripts' ARGV (lib/core/lua/acquire_queued.lua, release_queued.lua). Its argv is as long
 * as the set, so it lives on the heap. */
static int keys_cmd_append(const redlock__cmd *cmd, unsigned grant_tag, bool use_eval,
                           redlock__buf *out, const redlock__alloc *alloc)
{
    const redlock__script *s = cmd_script(cmd);
    unsigned n_keys = cmd->n_more + 1;
    size_t max = (size_t)n_keys + 13;
    const char **argv = redlock__malloc(alloc, max * sizeof(*argv));
    size_t *argvlen = redlock__malloc(alloc, max * sizeof(*argvlen));
    if (argv == NULL || argvlen == NULL) {
        redlock__free(alloc, argv);
        redlock__free(alloc, argvlen);
        return REDLOCK_ENOMEM;
    }
    int argc = 0;
    char ttl[24], numkeys[24], place[24], place_ttl[24], stamp[24], tag[24];
    bool stamped = grant_tag != 0 && cmd->stamp_us != 0;
#define ARG(p, n) (argv[argc] = (p), argvlen[argc] = (n), argc++)
    ARG(use_eval ? "EVAL" : "EVALSHA", use_eval ? 4u : 7u);
    ARG(use_eval ? s->source : s->sha1, use_eval ? s->source_len : 40u);
    ARG(numkeys, u64_decimal(numkeys, n_keys));
    ARG(cmd->key, cmd->key_len);
    for (unsigned i = 0; i < cmd->n_more; i++)
        ARG(cmd->more[i].ptr, cmd->more[i].len);
    if (cmd->kind != REDLOCK__CMD_INSPECT)
        ARG(cmd->token, cmd->token_len);
    if (cmd->place != NULL && cmd->kind == REDLOCK__CMD_RELEASE) {
        ARG(cmd->place->waiter_len > 0 ? cmd->place->waiter : "", cmd->place->waiter_len);
        ARG(cmd->leave ? "1" : "0", 1);
        ARG(cmd->tell ? "1" : "0", 1);
    } else if (cmd->place != NULL) {
        ARG(ttl, u64_decimal(ttl, cmd->ttl_ms));
        ARG(cmd->place->waiter, cmd->place->waiter_len);
        ARG(place, u64_decimal(place, cmd->place->place_us));
        ARG(place_ttl, u64_decimal(place_ttl, cmd->place->place_ttl_ms));
        ARG(stamp, stamped ? u64_decimal(stamp, cmd->stamp_us) : 0);
        ARG(tag, stamped ? u64_decimal(tag, grant_tag - 1) : 0);
        bool fenced = cmd->kind == REDLOCK__CMD_ACQUIRE_FENCED;
        bool domain = fenced && !own_counter(cmd);
        ARG(!fenced ? "0" : domain ? "2" : "1", 1);
        ARG(cmd->place->channel, cmd->place->channel_len);
        if (domain)
            ARG(cmd->fence_key, cmd->fence_key_len);
    } else if (cmd->kind == REDLOCK__CMD_RELEASE) {
        ARG(cmd->tell ? "1" : "0", 1);
    } else if (cmd->kind == REDLOCK__CMD_ACQUIRE || cmd->kind == REDLOCK__CMD_EXTEND) {
        ARG(ttl, u64_decimal(ttl, cmd->ttl_ms));
    }
    if (cmd->place == NULL && cmd->kind == REDLOCK__CMD_EXTEND)
        ARG(cmd->retake ? "1" : "0", 1);
#undef ARG
    int rc = redlock__resp_append(argc, argv, argvlen, out, alloc);
    redlock__free(alloc, argv);
    redlock__free(alloc, argvlen);
    return rc;
}

bool redlock__cmd_uses_fence_key(const redlock__cmd *cmd)
{
    if (!redlock__cmd_is_script(cmd) || cmd->place != NULL || cmd->n_more > 0)
        return false;
    const redlock__script *s = cmd_script(cmd);
    return s != &redlock__script_extend && s != &redlock__script_release;
}

int redlock__cmd_encode(const redlock__cmd *cmd, unsigned grant_tag, bool use_eval,
                        redlock__buf *out, const redlock__alloc *alloc)
{
    if (cmd->place != NULL || cmd->n_more > 0)
        return keys_cmd_append(cmd, grant_tag, use_eval, out, alloc);
    const char *argv[10];
    size_t argvlen[10];
    int argc = 0;
    char ttl[24], fence[24];

#define ARG(s, n) (argv[argc] = (s), argvlen[argc] = (n), argc++)
    if (cmd->kind == REDLOCK__CMD_CLUSTER_SHARDS || cmd->kind == REDLOCK__CMD_CLUSTER_SLOTS) {
        ARG("CLUSTER", 7);
        ARG(cmd->kind == REDLOCK__CMD_CLUSTER_SHARDS ? "SHARDS" : "SLOTS",
            cmd->kind == REDLOCK__CMD_CLUSTER_SHARDS ? 6 : 5);
    } else if (cmd->kind == REDLOCK__CMD_TIME) {
        ARG("TIME", 4);
    } else if (cmd->kind == REDLOCK__CMD_WAIT) {
        ARG("WAIT", 4);
        ARG(fence, u64_decimal(fence, cmd->fence));
        ARG(ttl, u64_decimal(ttl, cmd->ttl_ms));
    } else if (cmd->kind == REDLOCK__CMD_ACQUIRE) {
        ARG("SET", 3);
        ARG(cmd->key, cmd->key_len);
        ARG(cmd->token, cmd->token_len);
        ARG("NX", 2);
        ARG("PX", 2);
        ARG(ttl, u64_decimal(ttl, cmd->ttl_ms));
    } else {
        const redlock__script *s = cmd_script(cmd);
        bool two_keys = redlock__cmd_uses_fence_key(cmd);
        if (use_eval) {
            ARG("EVAL", 4);
            ARG(s->source, s->source_len);
        } else {
            ARG("EVALSHA", 7);
            ARG(s->sha1, 40);
        }
        ARG(two_keys ? "2" : "1", 1);
        ARG(cmd->key, cmd->key_len);
        if (two_keys)
            ARG(cmd->fence_key, cmd->fence_key_len);
        if (cmd->kind != REDLOCK__CMD_INSPECT)
            ARG(cmd->token, cmd->token_len);
        if (cmd->kind == REDLOCK__CMD_RELEASE)
            ARG(cmd->tell ? "1" : "0", 1);
        if (cmd->kind == REDLOCK__CMD_EXTEND || cmd->kind == REDLOCK__CMD_ACQUIRE_FENCED)
            ARG(ttl, u64_decimal(ttl, cmd->ttl_ms));
        if (cmd->kind == REDLOCK__CMD_EXTEND)
            ARG(cmd->retake ? "1" : "0", 1);
        if (s == &redlock__script_extend_fenced || cmd->kind == REDLOCK__CMD_COMMIT)
            ARG(fence, u64_decimal(fence, cmd->fence));
    }
#undef ARG

    return redlock__resp_append(argc, argv, argvlen, out, alloc);
}

size_t redlock__resp_simple(const char *data, size_t len, redisReply *out,
                            char text[REDLOCK__RESP_SIMPLE_TEXT])
{
    if (len < 3) /* the shortest is "+\r\n" */
        return 0;
    /* A lock cycle's own replies are first recognised whole, as they come: the general way
     * below (a scan for the line's end, the status text copied) cost about a hundred
     * instructions each, ten replies a cycle. */
    if (len >= 4 && data[0] == ':' && (data[1] == '0' || data[1] == '1') && data[2] == '\r' &&
        data[3] == '\n') {
        memset(out, 0, sizeof(*out));
        out->type = REDIS_REPLY_INTEGER;
        out->integer = data[1] - '0';
        return 4;
    }
    if (len >= 5 && memcmp(data, "+OK\r\n", 5) == 0) {
        memset(out, 0, sizeof(*out));
        memcpy(text, "OK", 3);
        out->type = REDIS_REPLY_STATUS;
        out->str = text;
        out->len = 2;
        return 5;
    }
    size_t max = REDLOCK__MIN(len, (size_t)REDLOCK__RESP_SIMPLE_TEXT + 2);
    const char *cr = memchr(data, '\r', max);
    if (cr == NULL || (size_t)(cr - data) + 1 >= len || cr[1] != '\n')
        return 0;
    size_t line = (size_t)(cr - data); /* the type byte and what follows it, before CRLF */
    memset(out, 0, sizeof(*out));
    switch (data[0]) {
    case '+':
        if (line - 1 >= REDLOCK__RESP_SIMPLE_TEXT || memchr(data + 1, '\n', line - 1) != NULL)
            return 0;
        memcpy(text, data + 1, line - 1);
        text[line - 1] = '\0';
        out->type = REDIS_REPLY_STATUS;
        out->str = text;
        out->len = line - 1;
        break;
    case ':': {
        size_t i = 1;
        bool negative = line > 1 && data[1] == '-';
        i += negative;
        if (i == line || line - i > 18)
            return 0;
        long long v = 0;
        for (; i < line; i++) {
            if (data[i] < '0' || data[i] > '9')
                return 0;
            v = v * 10 + (data[i] - '0');
        }
        out->type = REDIS_REPLY_INTEGER;
        out->integer = negative ? -v : v;
        break;
    }
    case '$':
        if (line != 3 || data[1] != '-' || data[2] != '1')
            return 0;
        out->type = REDIS_REPLY_NIL;
        break;
    default:
        return 0;
    }
    return line + 2;
}

static const char *reply_type_name(int type)
{
    switch (type) {
    case REDIS_REPLY_STRING:
        return "bulk string";
    case REDIS_REPLY_ARRAY:
        return "array";
    case REDIS_REPLY_INTEGER:
        return "integer";
    case REDIS_REPLY_NIL:
        return "nil";
    case REDIS_REPLY_STATUS:
        return "status";
    case REDIS_REPLY_ERROR:
        return "error";
    default:
        return "unknown type";
    }
}

static redlock_vote mismatch(const redlock__cmd *cmd, const redisReply *reply, char *err,
                             size_t err_len, redlock__reply_kind *kind)
{
    *kind = REDLOCK__REPLY_MISMATCH;
    if (reply->type == REDIS_REPLY_INTEGER)
        redlock__fmt(err, err_len, "unexpected integer %lld reply to %s", reply->integer,
                     redlock__cmd_name(cmd->kind));
    else
        redlock__fmt(err, err_len, "unexpected %s reply to %s", reply_type_name(reply->type),
                     redlock__cmd_name(cmd->kind));
    return REDLOCK_VOTE_ERROR;
}

/* A counter as the scripts keep it: decimal digits without leading zeros, "0" included, at most
 * UINT64_MAX - 1 (a fence is 1 + a counter). */
static bool parse_counter(const char *s, size_t len, uint64_t *out)
{
    if (len == 0 || len > 20 || (s[0] == '0' && len > 1))
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - 1 - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

static redlock_vote bad_counter(char *err, size_t err_len, const char *s, size_t len)
{
    char quoted[28];
    redlock__text_fit(quoted, sizeof(quoted), s, len);
    redlock__fmt(err, err_len, "fence counter \"%s\" is out of range (at most %" PRIu64 ")", quoted,
                 UINT64_MAX - 1);
    return REDLOCK_VOTE_ERROR;
}

static redlock_vote inspect_vote(const redlock__cmd *cmd, const redisReply *reply, char *err,
                                 size_t err_len, redlock__reply_kind *kind,
                                 redlock__reply_data *data)
{
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 ||
        (reply->element[0]->type != REDIS_REPLY_STRING &&
         reply->element[0]->type != REDIS_REPLY_NIL) ||
        reply->element[1]->type != REDIS_REPLY_INTEGER ||
        (reply->element[2]->type != REDIS_REPLY_STRING &&
         reply->element[2]->type != REDIS_REPLY_NIL))
        return mismatch(cmd, reply, err, err_len, kind);
    const redisReply *value = reply->element[0];
    data->value = value->type == REDIS_REPLY_STRING ? value->str : NULL;
    data->value_len = value->type == REDIS_REPLY_STRING ? value->len : 0;
    data->pttl_ms = reply->element[1]->integer;
    const redisReply *counter = reply->element[2];
    /* A counter no fence can come from (not a number, too large) reads as 0: inspect is a
     * picture, and the key's own state is still worth seeing. */
    if (counter->type != REDIS_REPLY_STRING ||
        !parse_counter(counter->str, counter->len, &data->counter))
        data->counter = 0;
    return data->value != NULL ? REDLOCK_VOTE_YES : REDLOCK_VOTE_NO;
}

/* A queued release whose queue upkeep failed (lib/core/lua/release_queued.lua): {0 or 1, the
 * upkeep's error}. The release's vote stands; the error becomes the note beside it (err). NONE for
 * any other shape. */
static redlock_vote release_with_note(const redisReply *reply, char *err, size_t err_len)
{
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER ||
        (reply->element[0]->integer != 0 && reply->element[0]->integer != 1) ||
        (reply->element[1]->type != REDIS_REPLY_STRING &&
         reply->element[1]->type != REDIS_REPLY_STATUS &&
         reply->element[1]->type != REDIS_REPLY_ERROR))
        return REDLOCK_VOTE_NONE;
    const redisReply *why = reply->element[1];
    redlock__fmt(err, err_len, "the queue's upkeep failed (the release stands): %.*s",
                 (int)why->len, why->str);
    return reply->element[0]->integer == 1 ? REDLOCK_VOTE_YES : REDLOCK_VOTE_NO;
}

redlock_vote redlock__cmd_vote(const redlock__cmd *cmd, const redisReply *reply, char *err,
                               size_t err_len, redlock__reply_kind *kind, redlock__reply_data *data)
{
    *kind = REDLOCK__REPLY_ANSWER;
    data->value = NULL;
    data->value_len = 0;
    data->pttl_ms = -2;
    data->counter = 0;
    data->anew = false;
    data->raw = NULL;
    data->answered_by = NULL;
    if (reply->type == REDIS_REPLY_ERROR) {
        if (redlock__cmd_is_script(cmd) && reply->len >= 8 &&
            memcmp(reply->str, "NOSCRIPT", 8) == 0)
            *kind = REDLOCK__REPLY_NOSCRIPT;
        redlock__fmt(err, err_len, "%.*s", (int)reply->len, reply->str);
        return REDLOCK_VOTE_ERROR;
    }
    if (cmd->kind == REDLOCK__CMD_CLUSTER_SHARDS || cmd->kind == REDLOCK__CMD_CLUSTER_SLOTS) {
        if (reply->type == REDIS_REPLY_ARRAY) { /* what it holds is cluster_map.c's to judge */
            data->raw = reply;
            return REDLOCK_VOTE_YES;
        }
    } else if (cmd->kind == REDLOCK__CMD_TIME) {
        if (reply->type == REDIS_REPLY_ARRAY)
            return REDLOCK_VOTE_YES;
    } else if (cmd->kind == REDLOCK__CMD_WAIT) {
        if (reply->type == REDIS_REPLY_INTEGER && reply->integer >= 0) {
            data->counter = (uint64_t)reply->integer;
            return REDLOCK_VOTE_YES;
        }
    } else if (cmd->place != NULL && cmd->kind != REDLOCK__CMD_RELEASE &&
               reply->type == REDIS_REPLY_INTEGER) {
        /* A waiter's lost attempt: how long until the node could let it in. */
        data->pttl_ms = reply->integer >= 0 ? reply->integer : -1;
        return REDLOCK_VOTE_NO;
    } else if (cmd->kind == REDLOCK__CMD_ACQUIRE) {
        if (reply->type == REDIS_REPLY_STATUS && reply->len == 2 &&
            memcmp(reply->str, "OK", 2) == 0)
            return REDLOCK_VOTE_YES;
        if (reply->type == REDIS_REPLY_NIL)
            return REDLOCK_VOTE_NO;
    } else if (cmd->kind == REDLOCK__CMD_INSPECT) {
        return inspect_vote(cmd, reply, err, err_len, kind, data);
    } else if (cmd->kind == REDLOCK__CMD_ACQUIRE_FENCED) {
        if (reply->type == REDIS_REPLY_NIL)
            return REDLOCK_VOTE_NO;
        if (reply->type == REDIS_REPLY_STRING) {
            /* The key is set here, but the fence cannot count this node's counter: not a yes.
             * (The script refuses any other form before the SET; only a number too large for a
             * fence gets this far.) */
            if (!parse_counter(reply->str, reply->len, &data->counter))
                return bad_counter(err, err_len, reply->str, reply->len);
            return REDLOCK_VOTE_YES;
        }
    } else if (reply->type == REDIS_REPLY_INTEGER) {
        if (reply->integer == 1)
            return REDLOCK_VOTE_YES;
        if (reply->integer == 2 && cmd->kind == REDLOCK__CMD_EXTEND && cmd->retake) {
            data->anew = true; /* the retake set a missing key anew */
            return REDLOCK_VOTE_YES;
        }
        if (reply->integer == 0)
            return REDLOCK_VOTE_NO;
    } else if (cmd->kind == REDLOCK__CMD_RELEASE && cmd->place != NULL) {
        redlock_vote vote = release_with_note(reply, err, err_len);
        if (vote != REDLOCK_VOTE_NONE)
            return vote;
    }
    return mismatch(cmd, reply, err, err_len, kind);
}
