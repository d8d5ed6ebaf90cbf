/* SPDX-License-Identifier: MIT */
/* fuzz_handshake.c - libFuzzer target: the connection handshake (lib/core/handshake.c) against
 * arbitrary bytes from a "server".
 *
 * The first byte picks the URL (with or without user, password and db), so the handshake has
 * 4 to 6 steps; the rest is fed to hiredis's reader in chunks whose sizes come from the input,
 * and every reply is checked against the next step, as lib/net/node.c does until the handshake is
 * over or a reply fails it. Checks, beyond "no crash, no leak, no UB":
 *   - the commands the handshake wrote are one RESP array per step, in order (AUTH, SELECT,
 *     SCRIPT LOAD x3, INFO server, INFO replication), and the password is sent only inside AUTH;
 *   - each reply moves the handshake one step on; a failure comes with a non-empty message,
 *     terminated within why_len and never written past it, that never quotes the password;
 *   - a step is passed only by its success (+OK; the script's own SHA1; a bulk string) or, for
 *     SCRIPT LOAD and INFO, an error reply (an ACL may forbid them); AUTH/SELECT errors fail;
 *   - the run_id taken from INFO is empty or exactly 40 lowercase hex digits (one server under
 *     two URLs is found by comparing them: no shorter, binary or partial id may count);
 *   - a reply after the last step fails the connection. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "fuzz_resp.h"
#include "handshake.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            __builtin_trap();                                                                      \
    } while (0)

#define PASSWORD "s3cret-pw"

static const char *const urls[] = {
    "redis://127.0.0.1:6379",
    "redis://:" PASSWORD "@127.0.0.1:6379",
    "redis://user:" PASSWORD "@127.0.0.1:6379/3",
    "redis://127.0.0.1:6379/15",
};

static bool is_lower_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* The commands hs wrote into out: one array per step, the step's command first. */
static void check_commands(const redlock__handshake *hs, const redlock__buf *out,
                           const redlock_url *u)
{
    redisReader *r = redisReaderCreate();
    CHECK(r != NULL);
    CHECK(redisReaderFeed(r, out->data, out->len) == REDIS_OK);
    for (unsigned i = 0; i < hs->n_steps; i++) {
        void *v = NULL;
        CHECK(redisReaderGetReply(r, &v) == REDIS_OK && v != NULL);
        redisReply *cmd = v;
        CHECK(cmd->type == REDIS_REPLY_ARRAY && cmd->elements >= 2);
        const char *name = cmd->element[0]->str;
        switch (hs->steps[i].kind) {
        case REDLOCK__HANDSHAKE_STATUS:
            CHECK(strcmp(name, "AUTH") == 0 || strcmp(name, "SELECT") == 0);
            break;
        case REDLOCK__HANDSHAKE_SCRIPT:
            CHECK(strcmp(name, "SCRIPT") == 0 && cmd->elements == 3);
            break;
        case REDLOCK__HANDSHAKE_INFO:
            CHECK(strcmp(name, "INFO") == 0 && i == hs->n_steps - 2);
            break;
        case REDLOCK__HANDSHAKE_ROLE:
            CHECK(strcmp(name, "INFO") == 0 && i == hs->n_steps - 1);
            break;
        }
        for (size_t k = 1; k < cmd->elements; k++)
            if (u->password != NULL && strcmp(cmd->element[k]->str, u->password) == 0)
                CHECK(strcmp(name, "AUTH") == 0);
        freeReplyObject(v);
    }
    void *extra = NULL;
    CHECK(redisReaderGetReply(r, &extra) == REDIS_OK && extra == NULL);
    redisReaderFree(r);
}

/* One reply; returns false once the connection must go. */
static bool answer(redlock__handshake *hs, const redisReply *reply, size_t why_len)
{
    bool pending = redlock__handshake_pending(hs);
    unsigned before = hs->answered;
    redlock__handshake_kind kind = pending ? hs->steps[before].kind : REDLOCK__HANDSHAKE_STATUS;
    char why[REDLOCK_ERROR_TEXT_MAX];
    memset(why, 0x55, sizeof(why));
    bool ok = redlock__handshake_reply(hs, reply, why, why_len);
    for (size_t i = why_len; i < sizeof(why); i++)
        CHECK((unsigned char)why[i] == 0x55);
    if (!pending) {
        CHECK(!ok && hs->answered == before);
    } else {
        CHECK(hs->answered == before + 1);
        if (reply->type == REDIS_REPLY_ERROR) /* a refused password ends it at any step */
            CHECK(ok == (kind != REDLOCK__HANDSHAKE_STATUS &&
                         redlock__handshake_auth_refusal(reply->str, reply->len) == NULL));
        else if (ok && kind == REDLOCK__HANDSHAKE_STATUS)
            CHECK(reply->type == REDIS_REPLY_STATUS && reply->len == 2 &&
                  memcmp(reply->str, "OK", 2) == 0);
        else if (ok && kind == REDLOCK__HANDSHAKE_SCRIPT)
            CHECK(reply->type == REDIS_REPLY_STRING && reply->len == 40);
        else if (ok && (kind == REDLOCK__HANDSHAKE_INFO || kind == REDLOCK__HANDSHAKE_ROLE))
            CHECK(reply->type == REDIS_REPLY_STRING);
    }
    if (!ok && why_len > 0) {
        CHECK(memchr(why, '\0', why_len) != NULL);
        CHECK(why_len == 1 || why[0] != '\0');
        CHECK(strstr(why, PASSWORD) == NULL);
    }
    /* A replica's master, as the refusal quotes it: printable, and within its room. */
    size_t master_len = strnlen(hs->replica_of, sizeof(hs->replica_of));
    CHECK(master_len < sizeof(hs->replica_of));
    for (size_t i = 0; i < master_len; i++)
        CHECK(hs->replica_of[i] >= 0x20 && hs->replica_of[i] < 0x7f);
    size_t id_len = strlen(hs->run_id);
    CHECK(id_len == 0 || id_len == REDLOCK__RUN_ID_LEN);
    for (size_t i = 0; i < id_len; i++)
        CHECK(is_lower_hex(hs->run_id[i]));
    return ok;
}

/* What answer needs besides the reply. */
typedef struct answer_run {
    redlock__handshake *hs;
    size_t why_len;
} answer_run;

static int on_reply(const redisReply *reply, void *ud)
{
    answer_run *run = ud;
    return answer(run->hs, reply, run->why_len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    const char *text = urls[data[0] % (sizeof(urls) / sizeof(urls[0]))];
    size_t why_len = (data[0] & 0x80) ? (size_t)(data[1] % REDLOCK_ERROR_TEXT_MAX) : 160;
    data += 2;
    size -= 2;
    if (memmem(data, size, PASSWORD, sizeof(PASSWORD) - 1) != NULL)
        return 0; /* a server that echoes the password back is not what is checked here */

    redlock_url u;
    CHECK(redlock_url_parse(&u, text, NULL, 0) == 0);
    redlock__alloc alloc;
    redlock__alloc_init(&alloc, NULL, NULL);
    redlock__handshake hs;
    redlock__buf out = {0};
    CHECK(redlock__handshake_start(&hs, &u, &out, &alloc) == 0);
    /* AUTH, SELECT, SCRIPT LOAD of the twelve scripts (three plain, three fenced, four of a set,
     * two of a waiter), INFO server, INFO replication */
    CHECK(hs.n_steps == 14 + (u.password != NULL) + (u.db > 0));
    check_commands(&hs, &out, &u);

    answer_run run = {.hs = &hs, .why_len = why_len};
    fuzz_replies(data, size, REDLOCK__READER_NODE, on_reply, &run);
    redlock__buf_free(&out, &alloc);
    redlock_url_free(&u);
    return 0;
}
