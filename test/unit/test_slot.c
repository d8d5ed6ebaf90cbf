/* SPDX-License-Identifier: MIT */
/* test_slot.c - the hash slot of a key (lib/core/slot.c) against what a real Redis server says.
 *
 * Every expected slot below was given by redis-server 7.0.15 itself: a cluster of six servers
 * (--cluster-enabled yes, on free loopback ports, started and stopped by pid in a temp dir) was
 * asked CLUSTER KEYSLOT <key> for each key, the key sent as a RESP bulk string over a plain
 * socket so that any byte could be in it. They are hard-coded, not computed, so the test needs
 * no server and a wrong CRC or a wrong hash-tag rule cannot agree with itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "slot.h"

typedef struct slot_case {
    const char *key;
    size_t len;
    unsigned slot; /* CLUSTER KEYSLOT's answer */
} slot_case;

#define K(s) s, sizeof(s) - 1

static const slot_case cases[] = {
    {K(""), 0},
    {K("a"), 15495},
    {K("foo"), 12182},
    {K("bar"), 5061},
    {K("123456789"), 12739}, /* CRC16/XMODEM's check value 0x31c3 */
    {K("user1000"), 3443},
    {K("{user1000}.following"), 3443}, /* the tag alone is hashed */
    {K("{user1000}.followers"), 3443},
    {K("foo{}{bar}"), 8363},    /* empty first tag: the whole key, not "bar" */
    {K("foo{{bar}}zap"), 4015}, /* "{bar": from the first '{' to the first '}' */
    {K("foo{bar}{zap}"), 5061}, /* "bar", as the key "bar" */
    {K("{}"), 15257},           /* empty tag: the whole key */
    {K("{"), 4092},
    {K("}"), 12090},
    {K("}{"), 12793}, /* a '}' before the '{' closes nothing */
    {K("{a"), 10276},
    {K("a}"), 5921},
    {K("{a}"), 15495}, /* as "a" */
    {K("a{b}c"), 3300},
    {K("{{}}"), 4092}, /* "{", as the key "{" */
    {K("}{a}"), 15495},
    {K("{}a}"), 4370}, /* the first '}' after '{' ends an empty tag, so the whole key */
    {K("abc{"), 3048},
    {K("lock:orders{42}"), 8000},
    {K("lock:orders{42}:fence"), 8000}, /* a fence counter shares its lock's tag */
    {K("{42}"), 8000},
    {K("42"), 8000},
    {K("resource"), 10348},
    {K("resource:fence"), 4333}, /* without a tag, lock and counter land apart */
    {K("\x00"), 0},
    {K("\x00\x01\xff"), 11713},
    {K("{\x00}x"), 0},
    {K("\xff{\xfe\x80}"), 8518},
    {K("\xff\xfe\x80"), 11813},
    {K("x{\x00\x00}{y}"), 0},
};

static void test_server_values(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        unsigned got = redlock__slot_of_key(cases[i].key, cases[i].len);
        if (got != cases[i].slot)
            fail_msg("case %zu (%zu bytes): slot %u, the server says %u", i, cases[i].len, got,
                     cases[i].slot);
    }
}

/* Long keys, built the same way as those sent to the server: byte i is (i * 7 + 3) % 256. That
 * key holds a '}' at 54 and 310 and a '{' at 200, so its tag runs from 201 to 309. */
static void test_long_keys(void **state)
{
    (void)state;
    char key[1002];
    for (size_t i = 0; i < 1000; i++)
        key[i] = (char)((i * 7 + 3) % 256);
    assert_int_equal(redlock__slot_of_key(key, 1000), 1533);
    size_t start, len;
    assert_int_equal(redlock__slot_hash_tag(key, 1000, &start, &len), 1);
    assert_int_equal(start, 201);
    assert_int_equal(len, 109);

    /* "{" + that key + "}": the tag is bytes 1..54 (the key's own '}' is byte 55 there). */
    char tagged[1002];
    tagged[0] = '{';
    memcpy(tagged + 1, key, 1000);
    tagged[1001] = '}';
    assert_int_equal(redlock__slot_of_key(tagged, 1002), 1256);

    memset(key, 'k', 1000);
    assert_int_equal(redlock__slot_of_key(key, 1000), 15858);
}

static void test_hash_tag(void **state)
{
    (void)state;
    size_t start = 99, len = 99;
    assert_int_equal(redlock__slot_hash_tag(NULL, 0, &start, &len), 0);
    assert_int_equal(start, 0);
    assert_int_equal(len, 0);
    assert_int_equal(redlock__slot_hash_tag("ab{cd}ef", 8, &start, &len), 1);
    assert_int_equal(start, 3);
    assert_int_equal(len, 2);
    /* The length bounds the search: a '}' past it is not seen. */
    assert_int_equal(redlock__slot_hash_tag("ab{cd}ef", 5, &start, &len), 0);
    assert_int_equal(start, 0);
    assert_int_equal(len, 5);
    assert_int_equal(redlock__slot_of_key("ab{cd}ef", 5), redlock__slot_of_key("ab{cd", 5));
    /* Only the tag counts: keys with the same tag share a slot whatever surrounds it. */
    assert_int_equal(redlock__slot_of_key("x{t}y", 5), redlock__slot_of_key("{t}", 3));
    assert_int_equal(redlock__slot_of_key("x{t}y", 5), redlock__slot_of_key("t", 1));
}

static void test_crc16(void **state)
{
    (void)state;
    assert_int_equal(redlock__slot_crc16(NULL, 0), 0);
    assert_int_equal(redlock__slot_crc16("123456789", 9), 0x31c3);
    /* Slots are the low 14 bits, never 16384 or more. */
    char key[2];
    for (unsigned i = 0; i < 65536; i++) {
        key[0] = (char)(i >> 8);
        key[1] = (char)i;
        assert_true(redlock__slot_of_key(key, 2) < REDLOCK__CLUSTER_SLOTS);
        assert_int_equal(redlock__slot_of_key(key, 2), redlock__slot_crc16(key, 2) & 0x3fff);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_server_values),
        cmocka_unit_test(test_long_keys),
        cmocka_unit_test(test_hash_tag),
        cmocka_unit_test(test_crc16),
    };
    return cmocka_run_group_tests_name("slot", tests, NULL, NULL);
}
