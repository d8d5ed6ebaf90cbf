/* SPDX-License-Identifier: MIT */
/* test_text.c - texts cut to fit their buffers (lib/core/common.h, redlock__text_fit and
 * redlock__fmt): whole when they fit; else after the last whole word, marked "...", never
 * splitting a word that fits or a UTF-8 character, never overrunning. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common.h"

/* text fitted into size bytes must read want; a byte past the buffer stays untouched. */
static void expect(const char *text, size_t size, const char *want)
{
    char out[256];
    assert_true(size < sizeof(out));
    memset(out, 'Z', sizeof(out));
    size_t got = redlock__text_fit(out, size, text, strlen(text));
    assert_string_equal(out, want);
    assert_int_equal(got, strlen(want));
    assert_true(got < size);
    assert_int_equal(out[size], 'Z');
}

static void whole_when_it_fits(void **state)
{
    (void)state;
    expect("node down", 10, "node down");
    expect("", 1, "");
    expect("a b", 4, "a b");
}

static void cut_after_a_word(void **state)
{
    (void)state;
    /* 15 bytes of room, 12 before the mark: "the server wants" does not fit. */
    expect("the server wants a password", 16, "the server...");
    /* A cut that lands on a space keeps every word before it. */
    expect("abc defgh ijk", 13, "abc defgh...");
    /* Spaces and separators before the cut go: "node down:..." reads "node down...". */
    expect("node down: connect: connection refused", 18, "node down...");
    expect("one, two, three", 13, "one, two...");
}

/* A word longer than the room is cut inside, between two characters, never in one. */
static void long_word_cut_on_a_character(void **state)
{
    (void)state;
    expect("abcdefghijkl", 8, "abcd...");
    /* "é" is 2 bytes, "€" 3: a cut that would land inside one moves before it. */
    expect("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 7, "\xc3\xa9...");
    expect("a\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac", 9, "a\xe2\x82\xac...");
    expect("\xe2\x82\xac\xe2\x82\xac", 6, "...");
    /* A word with spaces only past the room is one word here. */
    expect("abcdefghij klm", 8, "abcd...");
    /* A word that would leave less than half the room used is cut inside too: "ERR..." would
     * say nothing of a long key. */
    expect("ERR key:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 24, "ERR key:aaaaaaaaaaaa...");
    expect("ERR lots of keys:aaaaaaaaaaaaaaaaaaaaaaaaa", 24, "ERR lots of...");
}

/* Too little room for the mark: the cut alone, still on a character. */
static void tiny_buffers(void **state)
{
    (void)state;
    expect("abcdef", 4, "...");
    expect("abcdef", 3, "ab");
    expect("a\xc3\xa9", 3, "a");
    expect("abc", 1, "");
    /* Never nothing: no whole word or character fits the room, yet something is said. */
    expect(":abcdef", 3, ":a");
    expect("\xe2\x82\xac", 3, "\xe2\x82");
    expect("abc", 2, "a");
    expect("\xc3\xa9x", 2, "\xc3");
    char none = 'Z';
    assert_int_equal(redlock__text_fit(&none, 0, "abc", 3), 0);
    assert_int_equal(none, 'Z');
}

/* redlock__fmt cuts what vsnprintf cut mid-word the same way; in place, reading only its buffer. */
static void fmt_cuts_on_words(void **state)
{
    (void)state;
    char out[REDLOCK_ERROR_TEXT_MAX];
    char big[400];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    redlock__fmt(out, sizeof(out), "ERR %s",
                 "Error running script (call to f_0123): user_script:1: "
                 "Script attempted to access nonexistent global "
                 "variable 'redis_undefined_function_name_long' "
                 "script: 0123456789abcdef");
    assert_true(strlen(out) < sizeof(out));
    assert_string_equal(out + strlen(out) - 3, "...");
    assert_string_equal(out, "ERR Error running script (call to f_0123): user_script:1: Script "
                             "attempted to access nonexistent global variable "
                             "'redis_undefined_function_name_long'...");
    /* A cut exactly where a word ends: the word stays, the mark follows. */
    redlock__fmt(out, 12, "%s %s", "abcdefgh", "ijklmnop");
    assert_string_equal(out, "abcdefgh...");
    /* One long word. */
    redlock__fmt(out, sizeof(out), "%s", big);
    assert_int_equal(strlen(out), sizeof(out) - 1);
    assert_string_equal(out + sizeof(out) - 4, "...");
    /* Fits: untouched. */
    redlock__fmt(out, sizeof(out), "%s %d", "node", 3);
    assert_string_equal(out, "node 3");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(whole_when_it_fits),
        cmocka_unit_test(cut_after_a_word),
        cmocka_unit_test(long_word_cut_on_a_character),
        cmocka_unit_test(tiny_buffers),
        cmocka_unit_test(fmt_cuts_on_words),
    };
    return cmocka_run_group_tests_name("text", tests, NULL, NULL);
}
