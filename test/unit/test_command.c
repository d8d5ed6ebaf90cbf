/* SPDX-License-Identifier: MIT */
/* test_command.c - RESP encoding of every command and the meaning of every reply. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include <hiredis/hiredis.h>

#include "command.h"
#include "scripts.h"

static redlock__alloc alloc;

static redlock__cmd make(redlock__cmd_kind kind, const char *key, size_t key_len)
{
    redlock__cmd c = {.kind = kind,
                      .key = key,
                      .key_len = key_len,
                      .token = "tok",
                      .token_len = 3,
                      .ttl_ms = 1500,
                      .fence_key = "k:fence",
                      .fence_key_len = 7};
    return c;
}

/* Parse what was encoded with hiredis's reader: the bytes must be one RESP array. */
static redisReply *decode(const redlock__buf *b)
{
    redisReader *r = redisReaderCreate();
    assert_int_equal(redisReaderFeed(r, b->data, b->len), REDIS_OK);
    void *reply = NULL;
    assert_int_equal(redisReaderGetReply(r, &reply), REDIS_OK);
    assert_non_null(reply);
    void *more = NULL;
    assert_int_equal(redisReaderGetReply(r, &more), REDIS_OK);
    assert_null(more); /* exactly one command */
    redisReaderFree(r);
    return reply;
}

static void assert_arg(const redisReply *a, size_t i, const void *s, size_t n)
{
    assert_true(i < a->elements);
    assert_int_equal(a->element[i]->len, n);
    assert_memory_equal(a->element[i]->str, s, n);
}

static void encodes_set_nx_px(void **state)
{
    (void)state;
    const char key[] = {'a', 0, ' ', 'b'};
    redlock__cmd c = make(REDLOCK__CMD_ACQUIRE, key, sizeof(key));
    redlock__buf b = {0};
    assert_int_equal(redlock__cmd_append(&c, false, &b, &alloc), 0);
    redisReply *a = decode(&b);
    assert_int_equal(a->elements, 6);
    assert_arg(a, 0, "SET", 3);
    assert_arg(a, 1, key, sizeof(key)); /* binary-safe */
    assert_arg(a, 2, "tok", 3);
    assert_arg(a, 3, "NX", 2);
    assert_arg(a, 4, "PX", 2);
    assert_arg(a, 5, "1500", 4);
    freeReplyObject(a);
    redlock__buf_free(&b, &alloc);
}

static void encodes_scripts_as_evalsha_or_eval(void **state)
{
    (void)state;
    redlock__cmd c = make(REDLOCK__CMD_EXTEND, "k", 1);
    c.retake = true;
    redlock__buf b = {0};
    assert_int_equal(redlock__cmd_append(&c, false, &b, &alloc), 0);
    redisReply *a = decode(&b);
    assert_int_equal(a->elements, 7);
    assert_arg(a, 0, "EVALSHA", 7);
    assert_arg(a, 1, redlock__script_extend.sha1, 40);
    assert_arg(a, 2, "1", 1);
    assert_arg(a, 3, "k", 1);
    assert_arg(a, 4, "tok", 3);
    assert_arg(a, 5, "1500", 4);
    assert_arg(a, 6, "1", 1);
    freeReplyObject(a);
    b.len = 0;

    c = make(REDLOCK__CMD_RELEASE, "k", 1);
    assert_int_equal(redlock__cmd_append(&c, true, &b, &alloc), 0);
    a = decode(&b);
    assert_int_equal(a->elements, 6);
    assert_arg(a, 0, "EVAL", 4);
    assert_arg(a, 1, redlock__script_release.source, redlock__script_release.source_len);
    assert_arg(a, 3, "k", 1);
    assert_arg(a, 4, "tok", 3);
    assert_arg(a, 5, "0", 1); /* the release of a lost attempt: it tells nobody */
    freeReplyObject(a);
    b.len = 0;
    c.tell = true;
    assert_int_equal(redlock__cmd_append(&c, false, &b, &alloc), 0);
    a = decode(&b);
    assert_arg(a, 5, "1", 1); /* a holder's */
    freeReplyObject(a);
    redlock__buf_free(&b, &alloc);
}

/* A waiter's commands (lib/core/lua/acquire_queued.lua, release_queued.lua): the acquire names
 * every key of the lock, its place, its channel and, per node, its attempt's stamp and the node's
 * tag (empty where no grant may be made, and without a stamp: no grant record); the release the
 * waiter, whether it leaves the queues and whether it tells. */
static void encodes_a_waiters_commands(void **state)
{
    (void)state;
    redlock__cmd c = make(REDLOCK__CMD_ACQUIRE, "k", 1);
    redlock__span more[1] = {{"m", 1}};
    c.more = more;
    c.n_more = 1;
    redlock__cmd_place place = {"w1", 2, "k:queue:w1", 10, 123, 800};
    c.place = &place;
    c.stamp_us = 4567;
    assert_true(redlock__cmd_per_node(&c));
    assert_true(redlock__cmd_has_data(&c)); /* a lost attempt says how long to wait */
    redlock__buf b = {0};
    assert_int_equal(redlock__cmd_append_tagged(&c, 3, false, &b, &alloc), 0);
    redisReply *a = decode(&b);
    assert_int_equal(a->elements, 14);
    assert_arg(a, 1, redlock__script_acquire_queued.sha1, 40);
    assert_arg(a, 2, "2", 1);
    assert_arg(a, 3, "k", 1);
    assert_arg(a, 4, "m", 1);
    assert_arg(a, 5, "tok", 3);
    assert_arg(a, 6, "1500", 4);
    assert_arg(a, 7, "w1", 2);
    assert_arg(a, 8, "123", 3);
    assert_arg(a, 9, "800", 3);
    assert_arg(a, 10, "4567", 4);
    assert_arg(a, 11, "2", 1); /* tag 3: node 2 */
    assert_arg(a, 12, "0", 1); /* not fenced */
    assert_arg(a, 13, "k:queue:w1", 10);
    freeReplyObject(a);
    b.len = 0;
    /* No tag (a node that waits for replicas): no grant there. */
    assert_int_equal(redlock__cmd_append_tagged(&c, 0, false, &b, &alloc), 0);
    a = decode(&b);
    assert_arg(a, 10, "", 0);
    assert_arg(a, 11, "", 0);
    freeReplyObject(a);
    b.len = 0;
    c.kind = REDLOCK__CMD_ACQUIRE_FENCED;
    c.n_more = 0;
    assert_int_equal(redlock__cmd_append_tagged(&c, 1, false, &b, &alloc), 0);
    a = decode(&b);
    assert_int_equal(a->elements, 13);
    assert_arg(a, 1, redlock__script_acquire_queued.sha1, 40);
    assert_arg(a, 9, "4567", 4);
    assert_arg(a, 10, "0", 1);
    assert_arg(a, 11, "1", 1); /* fenced */
    freeReplyObject(a);
    b.len = 0;

    c.kind = REDLOCK__CMD_RELEASE;
    c.leave = true;
    c.tell = true;
    assert_false(redlock__cmd_per_node(&c));
    assert_int_equal(redlock__cmd_append(&c, false, &b, &alloc), 0);
    a = decode(&b);
    assert_int_equal(a->elements, 8);
    assert_arg(a, 1, redlock__script_release_queued.sha1, 40);
    assert_arg(a, 2, "1", 1);
    assert_arg(a, 4, "tok", 3);
    assert_arg(a, 5, "w1", 2);
    assert_arg(a, 6, "1", 1);
    assert_arg(a, 7, "1", 1);
    freeReplyObject(a);
    b.len = 0;
    c.leave = false;
    c.tell = false;
    assert_int_equal(redlock__cmd_append(&c, false, &b, &alloc), 0);
    a = decode(&b);
    assert_arg(a, 6, "0", 1);
    assert_arg(a, 7, "0", 1);
    freeReplyObject(a);
    redlock__buf_free(&b, &alloc);
}

static void appends_after_existing_bytes(void **state)
{
    (void)state;
    redlock__cmd c = make(REDLOCK__CMD_ACQUIRE, "k", 1);
    redlock__buf b = {0};
    assert_int_equal(redlock__cmd_append(&c, false, &b, &alloc), 0);
    size_t one = b.len;
    assert_int_equal(redlock__cmd_append(&c, false, &b, &alloc), 0);
    assert_int_equal(b.len, 2 * one);
    assert_memory_equal(b.data, b.data + one, one);
    redlock__buf_free(&b, &alloc);
}

/* The encoder's exact bytes (RESP: an array of bulk strings, lengths in decimal), numbers at
 * their edges, and a command too long for its stack buffer. */
static void encodes_exact_resp_bytes(void **state)
{
    (void)state;
    redlock__cmd c = make(REDLOCK__CMD_ACQUIRE, "k", 1);
    c.ttl_ms = 0;
    redlock__buf b = {0};
    assert_int_equal(redlock__cmd_append(&c, false, &b, &alloc), 0);
    static const char want[] =
        "*6\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\ntok\r\n$2\r\nNX\r\n$2\r\nPX\r\n$1\r\n0\r\n";
    assert_int_equal(b.len, sizeof(want) - 1);
    assert_memory_equal(b.data, want, sizeof(want) - 1);
    b.len = 0;

    c = make(REDLOCK__CMD_COMMIT, "k", 1);
    c.fence = UINT64_MAX;
    assert_int_equal(redlock__cmd_append(&c, false, &b, &alloc), 0);
    redisReply *a = decode(&b);
    assert_int_equal(a->elements, 7);
    assert_arg(a, 6, "18446744073709551615", 20);
    freeReplyObject(a);
    b.len = 0;

    static char key[5000];
    memset(key, 'x', sizeof(key));
    c = make(REDLOCK__CMD_ACQUIRE_FENCED, key, sizeof(key));
    c.ttl_ms = 1234567890123;
    assert_int_equal(redlock__cmd_append(&c, true, &b, &alloc), 0);
    a = decode(&b);
    assert_int_equal(a->elements, 7);
    assert_arg(a, 0, "EVAL", 4);
    assert_arg(a, 1, redlock__script_acquire_fenced.source,
               redlock__script_acquire_fenced.source_len);
    assert_arg(a, 2, "2", 1);
    assert_arg(a, 3, key, sizeof(key));
    assert_arg(a, 4, "k:fence", 7);
    assert_arg(a, 5, "tok", 3);
    assert_arg(a, 6, "1234567890123", 13);
    freeReplyObject(a);
    redlock__buf_free(&b, &alloc);
}

/* A reply as the reader would build it. */
static redisReply *reply_of(const char *resp)
{
    redisReader *r = redisReaderCreate();
    assert_int_equal(redisReaderFeed(r, resp, strlen(resp)), REDIS_OK);
    void *reply = NULL;
    assert_int_equal(redisReaderGetReply(r, &reply), REDIS_OK);
    assert_non_null(reply);
    redisReaderFree(r);
    return reply;
}

typedef struct vote_case {
    redlock__cmd_kind kind;
    const char *resp;
    redlock_vote vote;
    redlock__reply_kind reply_kind;
    const char *error_has; /* substring of the error text, or NULL for no error */
} vote_case;

#define A REDLOCK__REPLY_ANSWER
#define S REDLOCK__REPLY_NOSCRIPT
#define M REDLOCK__REPLY_MISMATCH

static const vote_case vote_cases[] = {
    {REDLOCK__CMD_ACQUIRE, "+OK\r\n", REDLOCK_VOTE_YES, A, NULL},
    {REDLOCK__CMD_ACQUIRE, "$-1\r\n", REDLOCK_VOTE_NO, A, NULL},
    {REDLOCK__CMD_ACQUIRE, "+QUEUED\r\n", REDLOCK_VOTE_ERROR, M, "unexpected status"},
    {REDLOCK__CMD_ACQUIRE, ":1\r\n", REDLOCK_VOTE_ERROR, M, "unexpected integer 1 reply to SET"},
    {REDLOCK__CMD_ACQUIRE, "$2\r\nOK\r\n", REDLOCK_VOTE_ERROR, M, "bulk string"},
    {REDLOCK__CMD_ACQUIRE, "-READONLY You can't write against a read only replica.\r\n",
     REDLOCK_VOTE_ERROR, A, "READONLY You can't write"},
    {REDLOCK__CMD_ACQUIRE, "-NOSCRIPT x\r\n", REDLOCK_VOTE_ERROR, A, "NOSCRIPT"},
    {REDLOCK__CMD_ACQUIRE, "-OOM command not allowed\r\n", REDLOCK_VOTE_ERROR, A, "OOM"},
    {REDLOCK__CMD_EXTEND, ":1\r\n", REDLOCK_VOTE_YES, A, NULL},
    {REDLOCK__CMD_EXTEND, ":0\r\n", REDLOCK_VOTE_NO, A, NULL},
    {REDLOCK__CMD_EXTEND, ":2\r\n", REDLOCK_VOTE_ERROR, M, "unexpected integer 2"},
    {REDLOCK__CMD_EXTEND, "$-1\r\n", REDLOCK_VOTE_ERROR, M, "unexpected nil"},
    {REDLOCK__CMD_EXTEND, "-NOSCRIPT No matching script.\r\n", REDLOCK_VOTE_ERROR, S, "NOSCRIPT"},
    {REDLOCK__CMD_RELEASE, ":1\r\n", REDLOCK_VOTE_YES, A, NULL},
    {REDLOCK__CMD_RELEASE, ":0\r\n", REDLOCK_VOTE_NO, A, NULL},
    {REDLOCK__CMD_RELEASE, ":-1\r\n", REDLOCK_VOTE_ERROR, M, "unexpected integer -1"},
    {REDLOCK__CMD_RELEASE, "*0\r\n", REDLOCK_VOTE_ERROR, M, "unexpected array"},
    {REDLOCK__CMD_RELEASE, "+OK\r\n", REDLOCK_VOTE_ERROR, M, "unexpected status"},
    {REDLOCK__CMD_RELEASE, "-NOSCRIPT\r\n", REDLOCK_VOTE_ERROR, S, "NOSCRIPT"},
    {REDLOCK__CMD_RELEASE, "-LOADING Redis is loading the dataset in memory\r\n",
     REDLOCK_VOTE_ERROR, A, "LOADING"},
    {REDLOCK__CMD_RELEASE, "-NOAUTH Authentication required.\r\n", REDLOCK_VOTE_ERROR, A, "NOAUTH"},
    {REDLOCK__CMD_INSPECT, "*3\r\n$3\r\nabc\r\n:1500\r\n$-1\r\n", REDLOCK_VOTE_YES, A, NULL},
    {REDLOCK__CMD_INSPECT, "*3\r\n$-1\r\n:-2\r\n$1\r\n7\r\n", REDLOCK_VOTE_NO, A, NULL},
    {REDLOCK__CMD_INSPECT, "*1\r\n:1\r\n", REDLOCK_VOTE_ERROR, M, "unexpected array"},
    {REDLOCK__CMD_INSPECT, "*2\r\n$-1\r\n:-2\r\n", REDLOCK_VOTE_ERROR, M, "unexpected array"},
    {REDLOCK__CMD_INSPECT, "*3\r\n:1\r\n:1\r\n$-1\r\n", REDLOCK_VOTE_ERROR, M, "unexpected"},
    {REDLOCK__CMD_INSPECT, "*3\r\n$-1\r\n:1\r\n:1\r\n", REDLOCK_VOTE_ERROR, M, "unexpected"},
    {REDLOCK__CMD_INSPECT, ":1\r\n", REDLOCK_VOTE_ERROR, M, "unexpected integer"},
    {REDLOCK__CMD_INSPECT, "-NOSCRIPT x\r\n", REDLOCK_VOTE_ERROR, S, "NOSCRIPT"},
    {REDLOCK__CMD_ACQUIRE_FENCED, "$1\r\n0\r\n", REDLOCK_VOTE_YES, A, NULL},
    {REDLOCK__CMD_ACQUIRE_FENCED, "$2\r\n41\r\n", REDLOCK_VOTE_YES, A, NULL},
    {REDLOCK__CMD_ACQUIRE_FENCED, "$20\r\n18446744073709551614\r\n", REDLOCK_VOTE_YES, A, NULL},
    {REDLOCK__CMD_ACQUIRE_FENCED, "$-1\r\n", REDLOCK_VOTE_NO, A, NULL},
    /* No fence above UINT64_MAX: a node that holds it cannot vote yes. */
    {REDLOCK__CMD_ACQUIRE_FENCED, "$20\r\n18446744073709551615\r\n", REDLOCK_VOTE_ERROR, A,
     "out of range"},
    {REDLOCK__CMD_ACQUIRE_FENCED, "$21\r\n100000000000000000000\r\n", REDLOCK_VOTE_ERROR, A,
     "out of range"},
    {REDLOCK__CMD_ACQUIRE_FENCED, "$2\r\n07\r\n", REDLOCK_VOTE_ERROR, A, "out of range"},
    {REDLOCK__CMD_ACQUIRE_FENCED, "$2\r\n-1\r\n", REDLOCK_VOTE_ERROR, A, "out of range"},
    {REDLOCK__CMD_ACQUIRE_FENCED, "$0\r\n\r\n", REDLOCK_VOTE_ERROR, A, "out of range"},
    {REDLOCK__CMD_ACQUIRE_FENCED, "-ERR fence counter is not a decimal number\r\n",
     REDLOCK_VOTE_ERROR, A, "not a decimal number"},
    {REDLOCK__CMD_ACQUIRE_FENCED, "+OK\r\n", REDLOCK_VOTE_ERROR, M, "unexpected status"},
    {REDLOCK__CMD_ACQUIRE_FENCED, ":1\r\n", REDLOCK_VOTE_ERROR, M, "unexpected integer"},
    {REDLOCK__CMD_ACQUIRE_FENCED, "-NOSCRIPT x\r\n", REDLOCK_VOTE_ERROR, S, "NOSCRIPT"},
    {REDLOCK__CMD_COMMIT, ":1\r\n", REDLOCK_VOTE_YES, A, NULL},
    {REDLOCK__CMD_COMMIT, ":0\r\n", REDLOCK_VOTE_NO, A, NULL},
    {REDLOCK__CMD_COMMIT, "$1\r\n1\r\n", REDLOCK_VOTE_ERROR, M, "unexpected bulk string"},
    {REDLOCK__CMD_COMMIT, "-NOSCRIPT x\r\n", REDLOCK_VOTE_ERROR, S, "NOSCRIPT"},
};

static void inspect_reply_carries_value_and_pttl(void **state)
{
    (void)state;
    redlock__cmd c = make(REDLOCK__CMD_INSPECT, "k", 1);
    redisReply *r = reply_of("*3\r\n$5\r\ntoken\r\n:1234\r\n$2\r\n42\r\n");
    char err[64];
    redlock__reply_kind kind;
    redlock__reply_data data;
    assert_int_equal(redlock__cmd_vote(&c, r, err, sizeof(err), &kind, &data), REDLOCK_VOTE_YES);
    assert_int_equal(data.value_len, 5);
    assert_memory_equal(data.value, "token", 5);
    assert_int_equal(data.pttl_ms, 1234);
    assert_int_equal(data.counter, 42);
    freeReplyObject(r);
    r = reply_of("*3\r\n$-1\r\n:-2\r\n$-1\r\n");
    assert_int_equal(redlock__cmd_vote(&c, r, err, sizeof(err), &kind, &data), REDLOCK_VOTE_NO);
    assert_null(data.value);
    assert_int_equal(data.pttl_ms, -2);
    assert_int_equal(data.counter, 0);
    freeReplyObject(r);
    /* A counter no fence can come from reads as 0; the key's state is still reported. */
    r = reply_of("*3\r\n$1\r\nt\r\n:5\r\n$3\r\nabc\r\n");
    assert_int_equal(redlock__cmd_vote(&c, r, err, sizeof(err), &kind, &data), REDLOCK_VOTE_YES);
    assert_int_equal(kind, REDLOCK__REPLY_ANSWER);
    assert_int_equal(data.counter, 0);
    freeReplyObject(r);
    /* Encoded as EVALSHA of the inspect script with the key, its counter's key and no token. */
    redlock__buf b = {0};
    assert_int_equal(redlock__cmd_append(&c, false, &b, &alloc), 0);
    redisReply *a = decode(&b);
    assert_int_equal(a->elements, 5);
    assert_arg(a, 0, "EVALSHA", 7);
    assert_arg(a, 1, redlock__script_inspect.sha1, 40);
    assert_arg(a, 2, "2", 1);
    assert_arg(a, 3, "k", 1);
    assert_arg(a, 4, "k:fence", 7);
    freeReplyObject(a);
    redlock__buf_free(&b, &alloc);
}

/* The fenced commands: which script, which keys, which arguments. */
static void encodes_fenced_commands(void **state)
{
    (void)state;
    redlock__buf b = {0};
    redlock__cmd c = make(REDLOCK__CMD_ACQUIRE_FENCED, "k", 1);
    assert_int_equal(redlock__cmd_append(&c, false, &b, &alloc), 0);
    redisReply *a = decode(&b);
    assert_int_equal(a->elements, 7);
    assert_arg(a, 0, "EVALSHA", 7);
    assert_arg(a, 1, redlock__script_acquire_fenced.sha1, 40);
    assert_arg(a, 2, "2", 1);
    assert_arg(a, 3, "k", 1);
    assert_arg(a, 4, "k:fence", 7);
    assert_arg(a, 5, "tok", 3);
    assert_arg(a, 6, "1500", 4);
    freeReplyObject(a);
    b.len = 0;

    c = make(REDLOCK__CMD_COMMIT, "k", 1);
    c.fence = UINT64_C(18446744073709551615);
    assert_int_equal(redlock__cmd_append(&c, true, &b, &alloc), 0);
    a = decode(&b);
    assert_int_equal(a->elements, 7);
    assert_arg(a, 0, "EVAL", 4);
    assert_arg(a, 1, redlock__script_commit.source, redlock__script_commit.source_len);
    assert_arg(a, 2, "2", 1);
    assert_arg(a, 3, "k", 1);
    assert_arg(a, 4, "k:fence", 7);
    assert_arg(a, 5, "tok", 3);
    assert_arg(a, 6, "18446744073709551615", 20);
    freeReplyObject(a);
    b.len = 0;

    /* A retake of a fenced lock restores the counter too ... */
    c = make(REDLOCK__CMD_EXTEND, "k", 1);
    c.retake = true;
    c.fence = 9;
    assert_int_equal(redlock__cmd_append(&c, false, &b, &alloc), 0);
    a = decode(&b);
    assert_int_equal(a->elements, 9);
    assert_arg(a, 1, redlock__script_extend_fenced.sha1, 40);
    assert_arg(a, 2, "2", 1);
    assert_arg(a, 4, "k:fence", 7);
    assert_arg(a, 5, "tok", 3);
    assert_arg(a, 6, "1500", 4);
    assert_arg(a, 7, "1", 1);
    assert_arg(a, 8, "9", 1);
    freeReplyObject(a);
    b.len = 0;

    /* ... every other extend of it is the plain compare-and-pexpire. */
    c.retake = false;
    assert_int_equal(redlock__cmd_append(&c, false, &b, &alloc), 0);
    a = decode(&b);
    assert_int_equal(a->elements, 7);
    assert_arg(a, 1, redlock__script_extend.sha1, 40);
    assert_arg(a, 2, "1", 1);
    freeReplyObject(a);
    redlock__buf_free(&b, &alloc);
}

/* A fenced acquire's yes carries the node's counter. */
static void fenced_acquire_reply_carries_the_counter(void **state)
{
    (void)state;
    redlock__cmd c = make(REDLOCK__CMD_ACQUIRE_FENCED, "k", 1);
    char err[64];
    redlock__reply_kind kind;
    redlock__reply_data data;
    redisReply *r = reply_of("$20\r\n18446744073709551614\r\n");
    assert_int_equal(redlock__cmd_vote(&c, r, err, sizeof(err), &kind, &data), REDLOCK_VOTE_YES);
    assert_true(data.counter == UINT64_C(18446744073709551614));
    freeReplyObject(r);
    r = reply_of("$-1\r\n");
    assert_int_equal(redlock__cmd_vote(&c, r, err, sizeof(err), &kind, &data), REDLOCK_VOTE_NO);
    assert_int_equal(data.counter, 0);
    freeReplyObject(r);
    assert_true(redlock__cmd_has_data(&c));
    c.kind = REDLOCK__CMD_INSPECT;
    assert_true(redlock__cmd_has_data(&c));
    c.kind = REDLOCK__CMD_ACQUIRE;
    assert_false(redlock__cmd_has_data(&c));
    c.kind = REDLOCK__CMD_COMMIT;
    assert_false(redlock__cmd_has_data(&c));
}

static void maps_every_reply_to_a_vote(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(vote_cases) / sizeof(vote_cases[0]); i++) {
        const vote_case *vc = &vote_cases[i];
        redlock__cmd c = make(vc->kind, "k", 1);
        redisReply *r = reply_of(vc->resp);
        char err[160] = "";
        /* must be overwritten */
        redlock__reply_kind kind = vc->reply_kind == M ? REDLOCK__REPLY_ANSWER : M;
        redlock__reply_data data;
        redlock_vote v = redlock__cmd_vote(&c, r, err, sizeof(err), &kind, &data);
        if (v != vc->vote || kind != vc->reply_kind ||
            (vc->error_has != NULL && strstr(err, vc->error_has) == NULL))
            fail_msg("case %zu (%s): vote %d kind %d err \"%s\"", i, vc->resp, v, (int)kind, err);
        freeReplyObject(r);
    }
}

static void long_error_text_is_truncated_safely(void **state)
{
    (void)state;
    char resp[1200] = "-ERR ";
    memset(resp + 5, 'x', 1000);
    strcpy(resp + 1005, "\r\n");
    redisReply *r = reply_of(resp);
    redlock__cmd c = make(REDLOCK__CMD_ACQUIRE, "k", 1);
    char err[64];
    redlock__reply_kind kind;
    redlock__reply_data data;
    assert_int_equal(redlock__cmd_vote(&c, r, err, sizeof(err), &kind, &data), REDLOCK_VOTE_ERROR);
    assert_int_equal(strlen(err), sizeof(err) - 1);
    assert_memory_equal(err, "ERR xxx", 7);
    assert_string_equal(err + sizeof(err) - 4, "..."); /* one long word: cut inside, marked */
    freeReplyObject(r);
}

/* The fast path takes the lock cycle's replies exactly as hiredis's reader parses them, one at a
 * time, and leaves everything else (and anything cut off) to the reader. */
static void simple_replies_match_the_reader(void **state)
{
    (void)state;
    static const char *const taken[] = {
        "+OK\r\n",
        ":1\r\n",
        ":0\r\n",
        ":-42\r\n",
        "$-1\r\n",
        "+QUEUED\r\n",
        ":999999999999999999\r\n",
        "+\r\n",
    };
    for (size_t i = 0; i < sizeof(taken) / sizeof(taken[0]); i++) {
        const char *in = taken[i];
        size_t len = strlen(in);
        char bytes[64];
        memcpy(bytes, in, len);
        memcpy(bytes + len, ":7\r\n", 4); /* a next reply right behind */
        redisReply got;
        char text[REDLOCK__RESP_SIMPLE_TEXT];
        assert_int_equal(redlock__resp_simple(bytes, len + 4, &got, text), len);
        redisReader *r = redisReaderCreate();
        assert_int_equal(redisReaderFeed(r, in, len), REDIS_OK);
        void *want_obj = NULL;
        assert_int_equal(redisReaderGetReply(r, &want_obj), REDIS_OK);
        const redisReply *want = want_obj;
        assert_int_equal(got.type, want->type);
        assert_int_equal(got.integer, want->integer);
        assert_int_equal(got.len, want->len);
        assert_int_equal(got.elements, 0);
        if (want->type == REDIS_REPLY_STATUS)
            assert_string_equal(got.str, want->str);
        freeReplyObject(want_obj);
        redisReaderFree(r);
        for (size_t cut = 0; cut < len; cut++) /* cut off: left to the reader */
            assert_int_equal(redlock__resp_simple(in, cut, &got, text), 0);
    }
    static const char *const left[] = {
        "$3\r\nabc\r\n",
        "*1\r\n:1\r\n",
        "-NOSCRIPT No matching script\r\n",
        ":1234567890123456789\r\n",
        ":\r\n",
        ":1x\r\n",
        "$-2\r\n",
        "+O\rK\r\n",
        "+a status line far longer than the sixty-three bytes the fast path copies\r\n",
        "?\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(left) / sizeof(left[0]); i++) {
        redisReply got;
        char text[REDLOCK__RESP_SIMPLE_TEXT];
        assert_int_equal(redlock__resp_simple(left[i], strlen(left[i]), &got, text), 0);
    }
}

/* A set's commands: one script per node naming every key, the set's script for each kind, and a
 * NOSCRIPT to its EVALSHA is told apart from an acquire's error (it is a script too). */
static void encodes_a_set(void **state)
{
    (void)state;
    const redlock__span more[2] = {{"k2", 2}, {"key-3", 5}};
    const struct {
        redlock__cmd_kind kind;
        const redlock__script *script;
        size_t argc;
    } cases[] = {
        {REDLOCK__CMD_ACQUIRE, &redlock__script_acquire_multi, 8},
        {REDLOCK__CMD_EXTEND, &redlock__script_extend_multi, 9},
        {REDLOCK__CMD_RELEASE, &redlock__script_release_multi, 8},
        {REDLOCK__CMD_INSPECT, &redlock__script_inspect_multi, 6},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        redlock__cmd c = make(cases[i].kind, "k", 1);
        c.more = more;
        c.n_more = 2;
        assert_true(redlock__cmd_is_script(&c));
        for (int eval = 0; eval < 2; eval++) {
            redlock__buf b = {0};
            assert_int_equal(redlock__cmd_append(&c, eval, &b, &alloc), 0);
            redisReply *a = decode(&b);
            assert_int_equal(a->elements, cases[i].argc);
            if (eval) {
                assert_arg(a, 0, "EVAL", 4);
                assert_arg(a, 1, cases[i].script->source, cases[i].script->source_len);
            } else {
                assert_arg(a, 0, "EVALSHA", 7);
                assert_arg(a, 1, cases[i].script->sha1, 40);
            }
            assert_arg(a, 2, "3", 1);
            assert_arg(a, 3, "k", 1);
            assert_arg(a, 4, "k2", 2);
            assert_arg(a, 5, "key-3", 5);
            if (cases[i].kind != REDLOCK__CMD_INSPECT)
                assert_arg(a, 6, "tok", 3);
            if (cases[i].kind == REDLOCK__CMD_ACQUIRE || cases[i].kind == REDLOCK__CMD_EXTEND)
                assert_arg(a, 7, "1500", 4);
            if (cases[i].kind == REDLOCK__CMD_EXTEND)
                assert_arg(a, 8, "0", 1);
            if (cases[i].kind == REDLOCK__CMD_RELEASE)
                assert_arg(a, 7, "0", 1); /* a lost attempt's: it tells nobody */
            freeReplyObject(a);
            redlock__buf_free(&b, &alloc);
        }
    }
    /* The set's acquire answers as a SET does: +OK yes, nil no; NOSCRIPT asks for EVAL. */
    redlock__cmd c = make(REDLOCK__CMD_ACQUIRE, "k", 1);
    c.more = more;
    c.n_more = 2;
    redisReply ok = {.type = REDIS_REPLY_STATUS, .str = "OK", .len = 2};
    redisReply nil = {.type = REDIS_REPLY_NIL};
    redisReply noscript = {
        .type = REDIS_REPLY_ERROR, .str = "NOSCRIPT No matching script.", .len = 28};
    char err[64];
    redlock__reply_kind kind;
    redlock__reply_data data;
    assert_int_equal(redlock__cmd_vote(&c, &ok, err, sizeof(err), &kind, &data), REDLOCK_VOTE_YES);
    assert_int_equal(redlock__cmd_vote(&c, &nil, err, sizeof(err), &kind, &data), REDLOCK_VOTE_NO);
    assert_int_equal(redlock__cmd_vote(&c, &noscript, err, sizeof(err), &kind, &data),
                     REDLOCK_VOTE_ERROR);
    assert_int_equal(kind, REDLOCK__REPLY_NOSCRIPT);
    c.n_more = 0; /* a plain SET never gets NOSCRIPT: an error like any other */
    assert_false(redlock__cmd_is_script(&c));
    assert_int_equal(redlock__cmd_vote(&c, &noscript, err, sizeof(err), &kind, &data),
                     REDLOCK_VOTE_ERROR);
    assert_int_equal(kind, REDLOCK__REPLY_ANSWER);
}

int main(void)
{
    redlock__alloc_init(&alloc, NULL, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(encodes_set_nx_px),
        cmocka_unit_test(encodes_scripts_as_evalsha_or_eval),
        cmocka_unit_test(encodes_a_waiters_commands),
        cmocka_unit_test(appends_after_existing_bytes),
        cmocka_unit_test(encodes_exact_resp_bytes),
        cmocka_unit_test(maps_every_reply_to_a_vote),
        cmocka_unit_test(long_error_text_is_truncated_safely),
        cmocka_unit_test(inspect_reply_carries_value_and_pttl),
        cmocka_unit_test(encodes_fenced_commands),
        cmocka_unit_test(fenced_acquire_reply_carries_the_counter),
        cmocka_unit_test(encodes_a_set),
        cmocka_unit_test(simple_replies_match_the_reader),
    };
    return cmocka_run_group_tests_name("command", tests, NULL, NULL);
}
