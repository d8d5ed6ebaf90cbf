/* command.c - RESP encoding of the three commands and the meaning of their replies. */
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
    }
    return "?";
}

int redlock__cmd_append(const redlock__cmd *cmd, bool use_eval, redlock__buf *out,
                        const redlock__alloc *alloc)
{
    const char *argv[8];
    size_t argvlen[8];
    int argc = 0;
    char ttl[24];
    int ttl_len = snprintf(ttl, sizeof(ttl), "%" PRIu64, cmd->ttl_ms);

#define ARG(s, n) (argv[argc] = (s), argvlen[argc] = (n), argc++)
    if (cmd->kind == REDLOCK__CMD_ACQUIRE) {
        ARG("SET", 3);
        ARG(cmd->key, cmd->key_len);
        ARG(cmd->token, cmd->token_len);
        ARG("NX", 2);
        ARG("PX", 2);
        ARG(ttl, (size_t)ttl_len);
    } else {
        const redlock__script *s = cmd->kind == REDLOCK__CMD_EXTEND    ? &redlock__script_extend
                                   : cmd->kind == REDLOCK__CMD_RELEASE ? &redlock__script_release
                                                                       : &redlock__script_inspect;
        if (use_eval) {
            ARG("EVAL", 4);
            ARG(s->source, s->source_len);
        } else {
            ARG("EVALSHA", 7);
            ARG(s->sha1, 40);
        }
        ARG("1", 1);
        ARG(cmd->key, cmd->key_len);
        if (cmd->kind != REDLOCK__CMD_INSPECT)
            ARG(cmd->token, cmd->token_len);
        if (cmd->kind == REDLOCK__CMD_EXTEND) {
            ARG(ttl, (size_t)ttl_len);
            ARG(cmd->retake ? "1" : "0", 1);
        }
    }
#undef ARG

    char *resp = NULL;
    int len = redisFormatCommandArgv(&resp, argc, argv, argvlen);
    if (len < 0 || resp == NULL)
        return REDLOCK_ENOMEM;
    int rc = redlock__buf_append(out, alloc, resp, (size_t)len);
    redisFreeCommand(resp);
    return rc;
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

static redlock_vote inspect_vote(const redlock__cmd *cmd, const redisReply *reply, char *err,
                                 size_t err_len, redlock__reply_kind *kind,
                                 redlock__reply_data *data)
{
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        (reply->element[0]->type != REDIS_REPLY_STRING &&
         reply->element[0]->type != REDIS_REPLY_NIL) ||
        reply->element[1]->type != REDIS_REPLY_INTEGER)
        return mismatch(cmd, reply, err, err_len, kind);
    const redisReply *value = reply->element[0];
    data->value = value->type == REDIS_REPLY_STRING ? value->str : NULL;
    data->value_len = value->type == REDIS_REPLY_STRING ? value->len : 0;
    data->pttl_ms = reply->element[1]->integer;
    return data->value != NULL ? REDLOCK_VOTE_YES : REDLOCK_VOTE_NO;
}

redlock_vote redlock__cmd_vote(const redlock__cmd *cmd, const redisReply *reply, char *err,
                               size_t err_len, redlock__reply_kind *kind, redlock__reply_data *data)
{
    *kind = REDLOCK__REPLY_ANSWER;
    data->value = NULL;
    data->value_len = 0;
    data->pttl_ms = -2;
    if (reply->type == REDIS_REPLY_ERROR) {
        if (cmd->kind != REDLOCK__CMD_ACQUIRE && reply->len >= 8 &&
            memcmp(reply->str, "NOSCRIPT", 8) == 0)
            *kind = REDLOCK__REPLY_NOSCRIPT;
        redlock__fmt(err, err_len, "%.*s", (int)REDLOCK__MIN(reply->len, (size_t)200), reply->str);
        return REDLOCK_VOTE_ERROR;
    }
    if (cmd->kind == REDLOCK__CMD_ACQUIRE) {
        if (reply->type == REDIS_REPLY_STATUS && reply->len == 2 &&
            memcmp(reply->str, "OK", 2) == 0)
            return REDLOCK_VOTE_YES;
        if (reply->type == REDIS_REPLY_NIL)
            return REDLOCK_VOTE_NO;
    } else if (cmd->kind == REDLOCK__CMD_INSPECT) {
        return inspect_vote(cmd, reply, err, err_len, kind, data);
    } else if (reply->type == REDIS_REPLY_INTEGER) {
        if (reply->integer == 1)
            return REDLOCK_VOTE_YES;
        if (reply->integer == 0)
            return REDLOCK_VOTE_NO;
    }
    return mismatch(cmd, reply, err, err_len, kind);
}
