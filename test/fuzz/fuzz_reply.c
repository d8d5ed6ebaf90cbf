/* SPDX-License-Identifier: MIT */
/* fuzz_reply.c - libFuzzer target: bytes from a node -> the library's reader (lib/core/reader.h) ->
 * the vote of each round type (redlock__cmd_vote).
 *
 * The first byte picks the command kind (and EXTEND's retake flag); the rest is fed to the
 * reader in chunks whose sizes come from the input too, as a socket would deliver it. Every
 * reply the reader produces is voted on; a protocol error ends the input. Checks: the vote is
 * YES, NO or ERROR; on ERROR the text is NUL-terminated within err_len and not empty; NOSCRIPT
 * is only ever reported for an error reply to a script; INSPECT's value lies inside the reply. */
#include <stdint.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "command.h"
#include "fuzz_resp.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            __builtin_trap();                                                                      \
    } while (0)

static void vote_on(const redlock__cmd *cmd, const redisReply *reply, size_t err_len)
{
    char err[REDLOCK_ERROR_TEXT_MAX];
    memset(err, 0x55, sizeof(err));
    redlock__reply_kind kind = (redlock__reply_kind)-1;
    redlock__reply_data d;
    memset(&d, 0x55, sizeof(d));
    redlock_vote v = redlock__cmd_vote(cmd, reply, err, err_len, &kind, &d);
    CHECK(v == REDLOCK_VOTE_YES || v == REDLOCK_VOTE_NO || v == REDLOCK_VOTE_ERROR);
    if (v == REDLOCK_VOTE_ERROR && err_len > 0) {
        CHECK(memchr(err, '\0', err_len) != NULL);
        CHECK(err_len == 1 || err[0] != '\0' || reply->type == REDIS_REPLY_ERROR);
    }
    for (size_t i = err_len; i < sizeof(err); i++)
        CHECK((unsigned char)err[i] == 0x55); /* never written past err_len */
    CHECK(kind == REDLOCK__REPLY_ANSWER || kind == REDLOCK__REPLY_NOSCRIPT ||
          kind == REDLOCK__REPLY_MISMATCH);
    if (kind == REDLOCK__REPLY_NOSCRIPT)
        CHECK(reply->type == REDIS_REPLY_ERROR && cmd->kind != REDLOCK__CMD_ACQUIRE);
    if (kind != REDLOCK__REPLY_ANSWER)
        CHECK(v == REDLOCK_VOTE_ERROR);
    if (reply->type == REDIS_REPLY_ERROR) /* an error reply always fits: the server said it */
        CHECK(kind != REDLOCK__REPLY_MISMATCH);
    if (cmd->kind == REDLOCK__CMD_INSPECT && d.value != NULL) {
        CHECK(v == REDLOCK_VOTE_YES);
        (void)d.value[d.value_len > 0 ? d.value_len - 1 : 0]; /* ASan: inside the reply */
    }
}

/* What vote_on needs besides the reply. */
typedef struct vote_run {
    const redlock__cmd *cmd;
    size_t err_len;
} vote_run;

static int on_reply(const redisReply *reply, void *ud)
{
    const vote_run *run = ud;
    vote_on(run->cmd, reply, run->err_len);
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    static const char key[] = "lock:key", token[] = "0123456789abcdef";
    redlock__cmd cmd = {.kind = (redlock__cmd_kind)(data[0] & 3),
                        .retake = (data[0] & 4) != 0,
                        .key = key,
                        .key_len = sizeof(key) - 1,
                        .token = token,
                        .token_len = sizeof(token) - 1,
                        .ttl_ms = 10000,
                        .key_hash = 1};
    size_t err_len = (data[0] & 8) ? (size_t)(data[1] % REDLOCK_ERROR_TEXT_MAX) : 160;
    data += 2;
    size -= 2;

    vote_run run = {.cmd = &cmd, .err_len = err_len};
    fuzz_replies(data, size, REDLOCK__READER_NODE, on_reply, &run);
    return 0;
}
