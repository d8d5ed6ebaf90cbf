/* SPDX-License-Identifier: MIT */
/* test_reader.c - the bounded reader (lib/core/reader.h): what a server may send on each kind of
 * connection, refused as soon as its header says it is more, and everything the library's
 * commands can legitimately be answered let through. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "reader.h"

static redlock__alloc alloc;

/* Feed text in chunks of chunk bytes (0: whole), taking replies as they come: how many came
 * whole, -1 when the reader failed (its message then in why). Replies are freed. */
static int feed(redlock__reader *rd, const char *text, size_t len, size_t chunk, char *why,
                size_t why_len)
{
    int replies = 0;
    for (size_t pos = 0; pos < len;) {
        size_t n = chunk == 0 || chunk > len - pos ? len - pos : chunk;
        int rc = redlock__reader_feed(rd, text + pos, n);
        pos += n;
        redisReply *r = NULL;
        while (rc == 0 && (rc = redlock__reader_get(rd, &r)) == 0 && r != NULL) {
            replies++;
            freeReplyObject(r);
        }
        if (rc != 0) {
            snprintf(why, why_len, "%s", redlock__reader_error(rd));
            return -1;
        }
    }
    return replies;
}

static void expect_refused(redlock__reader *rd, const char *text, size_t len, size_t chunk,
                           const char *want)
{
    char why[200] = "";
    int rc = feed(rd, text, len, chunk, why, sizeof(why));
    if (rc != -1 || strstr(why, want) == NULL)
        fprintf(stderr, "want a refusal with \"%s\", got %d (%s)\n", want, rc, why);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(why, want));
    /* It stays failed: nothing more is read. */
    redisReply *r = NULL;
    assert_int_equal(redlock__reader_feed(rd, ":1\r\n", 4), -1);
    assert_int_equal(redlock__reader_get(rd, &r), -1);
    assert_null(r);
}

static redlock__reader *small(size_t bulk, size_t elements, unsigned depth, size_t objects)
{
    redlock__reader_limits lim = {bulk, elements, depth, objects};
    redlock__reader *rd = redlock__reader_new_limits(&lim, &alloc);
    assert_non_null(rd);
    return rd;
}

/* The header alone is refused: nothing of its 2^31 slots is ever reserved or walked. */
static void huge_array_refused_at_its_header(void **state)
{
    (void)state;
    redlock__reader *rd = redlock__reader_new(REDLOCK__READER_NODE, &alloc);
    const char *text = "*2147483647\r\n";
    expect_refused(rd, text, strlen(text), 0, "an array of 2147483647 elements (at most 16");
    redlock__reader_free(rd);
}

/* A bulk string announced longer than the limit is refused once its length is read, whether
 * its bytes come with it or not; a bulk string of the limit itself passes. */
static void long_bulk_refused_at_its_header(void **state)
{
    (void)state;
    redlock__reader *rd = redlock__reader_new(REDLOCK__READER_NODE, &alloc);
    const char *text = "$1000000000\r\nabc";
    expect_refused(rd, text, strlen(text), 0, "a bulk string of 1000000000 bytes");
    redlock__reader_free(rd);
    /* The header in pieces of 3 bytes: refused as soon as the length is whole. */
    rd = redlock__reader_new(REDLOCK__READER_NODE, &alloc);
    expect_refused(rd, text, strlen(text), 3, "1000000000 bytes");
    redlock__reader_free(rd);
    /* A length of more digits than any: refused before it ends. */
    rd = redlock__reader_new(REDLOCK__READER_NODE, &alloc);
    char digits[64];
    memset(digits, '9', sizeof(digits));
    digits[0] = '$';
    expect_refused(rd, digits, sizeof(digits), 5, "a length of more than 22 bytes");
    redlock__reader_free(rd);

    rd = small(100, 4, 2, 16);
    char ok[200];
    int n = snprintf(ok, sizeof(ok), "$100\r\n%0100d\r\n", 7);
    char why[200];
    assert_int_equal(feed(rd, ok, (size_t)n, 7, why, sizeof(why)), 1);
    n = snprintf(ok, sizeof(ok), "$101\r\n%0101d\r\n", 7);
    expect_refused(rd, ok, (size_t)n, 7, "a bulk string of 101 bytes (at most 100");
    redlock__reader_free(rd);
}

/* A line (error, status, number) that grows past the limit before its end is refused, without
 * waiting for the end; one of the limit passes. */
static void long_line_refused_before_its_end(void **state)
{
    (void)state;
    redlock__reader *rd = small(100, 4, 2, 16);
    char line[300];
    line[0] = '-';
    memset(line + 1, 'e', 100);
    memcpy(line + 101, "\r\n", 2);
    char why[200];
    assert_int_equal(feed(rd, line, 103, 10, why, sizeof(why)), 1);
    memset(line + 1, 'e', 200); /* no end yet */
    expect_refused(rd, line, 201, 10, "a line of more than 100 bytes");
    redlock__reader_free(rd);
    /* The end comes with the rest in one read: the string is refused whole. */
    rd = small(100, 4, 2, 16);
    memcpy(line + 201, "\r\n", 2);
    expect_refused(rd, line, 203, 0, "a string of 200 bytes");
    redlock__reader_free(rd);
}

static void deep_nesting_refused(void **state)
{
    (void)state;
    redlock__reader *rd = small(100, 4, 2, 16);
    char why[200];
    const char *two = "*1\r\n*1\r\n:1\r\n";
    assert_int_equal(feed(rd, two, strlen(two), 1, why, sizeof(why)), 1);
    const char *three = "*1\r\n*1\r\n*1\r\n:1\r\n";
    expect_refused(rd, three, strlen(three), 1, "arrays nested 3 deep (at most 2");
    redlock__reader_free(rd);
}

/* A reply's objects and array slots are counted against its budget; the count starts again with
 * the next reply. */
static void objects_per_reply_bounded(void **state)
{
    (void)state;
    redlock__reader *rd = small(100, 8, 2, 10);
    char why[200];
    /* 1 + 4 slots + 4 integers = 9: fits, twice in a row. */
    const char *nine = "*4\r\n:1\r\n:2\r\n:3\r\n:4\r\n*4\r\n:1\r\n:2\r\n:3\r\n:4\r\n";
    assert_int_equal(feed(rd, nine, strlen(nine), 2, why, sizeof(why)), 2);
    /* 1 + 2 slots + 1 + 2 slots + ... : the nested one goes over. */
    const char *over = "*2\r\n*3\r\n:1\r\n:2\r\n:3\r\n:4\r\n";
    expect_refused(rd, over, strlen(over), 0, "a reply of more than 10 objects");
    redlock__reader_free(rd);
}

static void idle_between_replies(void **state)
{
    (void)state;
    redlock__reader *rd = redlock__reader_new(REDLOCK__READER_NODE, &alloc);
    assert_true(redlock__reader_idle(rd));
    redisReply *r = NULL;
    assert_int_equal(redlock__reader_feed(rd, "*3\r\n$1\r\nx\r\n", 11), 0);
    assert_int_equal(redlock__reader_get(rd, &r), 0);
    assert_null(r);
    assert_false(redlock__reader_idle(rd));
    assert_int_equal(redlock__reader_feed(rd, ":5\r\n$-1\r\n", 9), 0);
    assert_int_equal(redlock__reader_get(rd, &r), 0);
    assert_non_null(r);
    assert_int_equal(r->elements, 3);
    freeReplyObject(r);
    assert_true(redlock__reader_idle(rd));
    redlock__reader_free(rd);
}

/* Append to a growing text. */
typedef struct text {
    char *s;
    size_t len, cap;
} text;

static void add(text *t, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (t->len + (size_t)n + 1 > t->cap) {
        t->cap = (t->cap + (size_t)n + 1) * 2;
        t->s = realloc(t->s, t->cap);
        assert_non_null(t->s);
    }
    memcpy(t->s + t->len, buf, (size_t)n + 1);
    t->len += (size_t)n;
}

/* What the library's commands are answered passes on their connections: INFO server, INSPECT's
 * array, and on a cluster's, the largest CLUSTER SLOTS a cluster can give (16384 ranges, one
 * slot each, a master and a replica each with a host name) and a CLUSTER SHARDS with a shard of
 * 16384 ranges. */
static void legitimate_replies_pass(void **state)
{
    (void)state;
    char why[200];
    text t = {0};
    char info[6000];
    memset(info, 'i', sizeof(info));
    add(&t, "$%zu\r\n", sizeof(info));
    redlock__reader *rd = redlock__reader_new(REDLOCK__READER_NODE, &alloc);
    assert_int_equal(feed(rd, t.s, t.len, 0, why, sizeof(why)), 0);
    assert_int_equal(redlock__reader_feed(rd, info, sizeof(info)), 0);
    const char *inspect =
        "\r\n*3\r\n$32\r\n0123456789abcdef0123456789abcdef\r\n:9000\r\n$2\r\n41\r\n";
    assert_int_equal(feed(rd, inspect, strlen(inspect), 5, why, sizeof(why)), 2);
    redlock__reader_free(rd);

    t.len = 0;
    add(&t, "*16384\r\n");
    for (int s = 0; s < 16384; s++) {
        add(&t, "*4\r\n:%d\r\n:%d\r\n", s, s);
        for (int k = 0; k < 2; k++)
            add(&t,
                "*4\r\n$8\r\n10.0.0.%d\r\n:7000\r\n$40\r\n%040d\r\n*2\r\n$8\r\nhostname\r\n$12\r\n"
                "node-%d.local\r\n",
                k + 1, k, k + 1);
    }
    rd = redlock__reader_new(REDLOCK__READER_CLUSTER, &alloc);
    assert_int_equal(feed(rd, t.s, t.len, 16384, why, sizeof(why)), 1);
    redlock__reader_free(rd);

    t.len = 0;
    add(&t, "*1\r\n*4\r\n$5\r\nslots\r\n*32768\r\n");
    for (int s = 0; s < 16384; s++)
        add(&t, ":%d\r\n:%d\r\n", s, s);
    add(&t, "$5\r\nnodes\r\n*1\r\n*4\r\n$2\r\nid\r\n$40\r\n%040d\r\n$4\r\nport\r\n:7000\r\n", 1);
    rd = redlock__reader_new(REDLOCK__READER_CLUSTER, &alloc);
    assert_int_equal(feed(rd, t.s, t.len, 0, why, sizeof(why)), 1);
    redlock__reader_free(rd);
    /* Not on a plain node's connection, which is never asked for it. */
    rd = redlock__reader_new(REDLOCK__READER_NODE, &alloc);
    expect_refused(rd, t.s, t.len, 0, "an array of 32768 elements");
    redlock__reader_free(rd);
    free(t.s);
}

/* A subscriber's channels are keys of any length: a message on a long one passes once the
 * subscriber allowed it, and not before. */
static void subscriber_allows_its_channels(void **state)
{
    (void)state;
    size_t channel_len = 200000;
    text t = {0};
    add(&t, "*3\r\n$7\r\nmessage\r\n$%zu\r\n", channel_len);
    char *msg = malloc(t.len + channel_len + 32);
    assert_non_null(msg);
    memcpy(msg, t.s, t.len);
    memset(msg + t.len, 'k', channel_len);
    size_t len = t.len + channel_len;
    memcpy(msg + len, "\r\n$3\r\nabc\r\n", 11);
    len += 11;
    char why[200];
    redlock__reader *rd = redlock__reader_new(REDLOCK__READER_SUBSCRIBER, &alloc);
    expect_refused(rd, msg, len, 4096, "a bulk string of 200000 bytes");
    redlock__reader_free(rd);
    rd = redlock__reader_new(REDLOCK__READER_SUBSCRIBER, &alloc);
    redlock__reader_allow_bulk(rd, channel_len);
    assert_int_equal(feed(rd, msg, len, 4096, why, sizeof(why)), 1);
    redlock__reader_free(rd);
    free(msg);
    free(t.s);
}

int main(void)
{
    redlock__alloc_init(&alloc, NULL, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(huge_array_refused_at_its_header),
        cmocka_unit_test(long_bulk_refused_at_its_header),
        cmocka_unit_test(long_line_refused_before_its_end),
        cmocka_unit_test(deep_nesting_refused),
        cmocka_unit_test(objects_per_reply_bounded),
        cmocka_unit_test(idle_between_replies),
        cmocka_unit_test(legitimate_replies_pass),
        cmocka_unit_test(subscriber_allows_its_channels),
    };
    return cmocka_run_group_tests_name("reader", tests, NULL, NULL);
}
