/* SPDX-License-Identifier: MIT */
/* test_scrub.c - a server's text made fit to keep and show (lib/core/scrub.h): the password it
 * repeats, whole or cut, hidden; control bytes replaced; an error's code and a redirect kept
 * whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "scrub.h"

/* text scrubbed with secret must read want. */
static void expect(const char *text, const char *secret, const char *want)
{
    char buf[512];
    size_t len = strlen(text);
    memcpy(buf, text, len + 1);
    size_t got = redlock__scrub(buf, len, secret);
    assert_string_equal(buf, want);
    assert_int_equal(got, strlen(want));
}

static void password_hidden_whole_and_cut(void **state)
{
    (void)state;
    /* What Redis says when AUTH is renamed away. */
    expect("ERR unknown command 'AUTH', with args beginning with: 'app' 'secret' ", "secret",
           "ERR unknown command 'AUTH', with args beginning with: 'app' '***' ");
    /* Cut by the server (its arguments are quoted up to a length): the start is hidden too, with
     * a closing quote or at the very end. */
    expect("with args beginning with: 'app' 'sec' ", "secret",
           "with args beginning with: 'app' '***' ");
    expect("with args beginning with: 'app' 'se", "secret", "with args beginning with: 'app' '**");
    expect("args: \"s\"", "secret", "args: \"*\"");
    /* Anywhere, as often as it comes. */
    expect("secretsecret and xsecretx", "secret", "****** and x***x");
    /* A start that is not quoted alone is just text: "section" is not the password. */
    expect("see section 'sections'", "secret", "see section 'sections'");
    /* No password: nothing to hide. */
    expect("ERR 'secret'", NULL, "ERR 'secret'");
    expect("ERR 'secret'", "", "ERR 'secret'");
}

static void control_bytes_replaced(void **state)
{
    (void)state;
    expect("ERR \x1b[31mred\x1b[0m\ttab\x7f", NULL, "ERR ?[31mred?[0m?tab?");
    expect("caf\xc3\xa9 \x9b"
           "2J",
           "x", "caf?? ?2J");
}

/* An error reply: cut to REDLOCK__SCRUB_MAX, its code and a redirect's target kept. */
static void error_replies(void **state)
{
    (void)state;
    char text[1024];
    redisReply r = {.type = REDIS_REPLY_ERROR, .str = text};

    snprintf(text, sizeof(text), "WRONGPASS secret is wrong");
    r.len = strlen(text);
    redlock__scrub_error(&r, "WRONGPASS");
    assert_string_equal(text, "WRONGPASS secret is wrong"); /* the code stays */
    redlock__scrub_error(&r, "secret");
    assert_string_equal(text, "WRONGPASS *** is wrong");
    assert_int_equal(r.len, strlen(text));

    /* A redirect names a server: it is followed, so it stays whole, even where it reads like
     * the password; its control bytes still go. */
    snprintf(text, sizeof(text), "MOVED 3999 redis-1:6381");
    r.len = strlen(text);
    redlock__scrub_error(&r, "redis");
    assert_string_equal(text, "MOVED 3999 redis-1:6381");
    snprintf(text, sizeof(text), "ASK 3999 redis\x1b:6381");
    r.len = strlen(text);
    redlock__scrub_error(&r, "redis");
    assert_string_equal(text, "ASK 3999 redis?:6381");

    memset(text, 'e', sizeof(text) - 1);
    text[sizeof(text) - 1] = '\0';
    r.len = sizeof(text) - 1;
    redlock__scrub_error(&r, "secret");
    assert_int_equal(r.len, REDLOCK__SCRUB_MAX);
    assert_int_equal(strlen(text), REDLOCK__SCRUB_MAX);

    /* Anything but an error is left alone (a bulk string is data: a token, a key). */
    snprintf(text, sizeof(text), "secret\x1b");
    redisReply bulk = {.type = REDIS_REPLY_STRING, .str = text, .len = 7};
    redlock__scrub_error(&bulk, "secret");
    assert_string_equal(text, "secret\x1b");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(password_hidden_whole_and_cut),
        cmocka_unit_test(control_bytes_replaced),
        cmocka_unit_test(error_replies),
    };
    return cmocka_run_group_tests_name("scrub", tests, NULL, NULL);
}
