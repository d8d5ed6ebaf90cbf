/* SPDX-License-Identifier: MIT */
/* test_handshake.c - what a new connection sends first (handshake.h), and which replies let it
 * go on: every step's success, tolerated refusals, and replies out of step. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "handshake.h"

static redlock__alloc alloc;

static redlock_url parse(const char *text)
{
    redlock_url u;
    char err[256];
    if (redlock_url_parse(&u, text, err, sizeof(err)) != 0)
        fail_msg("%s: %s", text, err);
    return u;
}

/* The commands in out, decoded one by one; returns how many, their names in names[]. */
static unsigned decode_all(const redlock__buf *out, char names[][16], unsigned max)
{
    redisReader *r = redisReaderCreate();
    assert_int_equal(redisReaderFeed(r, out->data, out->len), REDIS_OK);
    unsigned n = 0;
    for (;;) {
        void *v = NULL;
        assert_int_equal(redisReaderGetReply(r, &v), REDIS_OK);
        if (v == NULL)
            break;
        redisReply *a = v;
        assert_int_equal(a->type, REDIS_REPLY_ARRAY);
        assert_true(n < max);
        snprintf(names[n], 16, "%s", a->element[0]->str);
        if (strcmp(names[n], "SCRIPT") == 0) /* "SCRIPT LOAD" */
            snprintf(names[n], 16, "SCRIPT %s", a->element[1]->str);
        n++;
        freeReplyObject(a);
    }
    redisReaderFree(r);
    return n;
}

static redisReply *reply_of(const char *resp, size_t len)
{
    redisReader *r = redisReaderCreate();
    assert_int_equal(redisReaderFeed(r, resp, len), REDIS_OK);
    void *reply = NULL;
    assert_int_equal(redisReaderGetReply(r, &reply), REDIS_OK);
    assert_non_null(reply);
    redisReaderFree(r);
    return reply;
}

/* Feed the reply resp to the next step; returns what redlock__handshake_reply said. */
static bool feed(redlock__handshake *hs, const char *resp, char *why, size_t why_len)
{
    redisReply *r = reply_of(resp, strlen(resp));
    bool ok = redlock__handshake_reply(hs, r, why, why_len);
    freeReplyObject(r);
    return ok;
}

static void bulk(char *out, size_t len, const char *s)
{
    snprintf(out, len, "$%zu\r\n%s\r\n", strlen(s), s);
}

/* Feed every SCRIPT LOAD step its right SHA1, INFO server a body, and INFO replication a
 * master's. */
static void feed_scripts_and_info(redlock__handshake *hs, const char *info_body)
{
    char resp[512], why[128];
    while (hs->answered < hs->n_steps &&
           hs->steps[hs->answered].kind == REDLOCK__HANDSHAKE_SCRIPT) {
        bulk(resp, sizeof(resp), hs->steps[hs->answered].script->sha1);
        assert_true(feed(hs, resp, why, sizeof(why)));
    }
    assert_int_equal(hs->steps[hs->answered].kind, REDLOCK__HANDSHAKE_INFO);
    bulk(resp, sizeof(resp), info_body);
    assert_true(feed(hs, resp, why, sizeof(why)));
    assert_int_equal(hs->steps[hs->answered].kind, REDLOCK__HANDSHAKE_ROLE);
    bulk(resp, sizeof(resp), "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n");
    assert_true(feed(hs, resp, why, sizeof(why)));
    assert_string_equal(hs->replica_of, "");
}

static const char *const RUN_ID = "0123456789abcdef0123456789abcdef01234567";

static void steps_follow_the_url(void **state)
{
    (void)state;
    const struct {
        const char *url;
        const char *want[20];
    } cases[] = {
#define TWELVE_SCRIPTS                                                                             \
    "SCRIPT LOAD", "SCRIPT LOAD", "SCRIPT LOAD", "SCRIPT LOAD", "SCRIPT LOAD", "SCRIPT LOAD",      \
        "SCRIPT LOAD", "SCRIPT LOAD", "SCRIPT LOAD", "SCRIPT LOAD", "SCRIPT LOAD", "SCRIPT LOAD"
        {"redis://127.0.0.1:6379", {TWELVE_SCRIPTS, "INFO", "INFO", NULL}},
        {"redis://:pw@127.0.0.1:6379/3", {"AUTH", "SELECT", TWELVE_SCRIPTS, "INFO", "INFO", NULL}},
        {"redis://user:pw@127.0.0.1:6379", {"AUTH", TWELVE_SCRIPTS, "INFO", "INFO", NULL}},
        {"unix:///tmp/r.sock?db=2", {"SELECT", TWELVE_SCRIPTS, "INFO", "INFO", NULL}},
#undef TWELVE_SCRIPTS
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        redlock_url u = parse(cases[i].url);
        redlock__handshake hs;
        redlock__buf out = {0};
        assert_int_equal(redlock__handshake_start(&hs, &u, &out, &alloc), 0);
        char names[20][16];
        unsigned n = decode_all(&out, names, 20);
        assert_int_equal(n, hs.n_steps);
        for (unsigned k = 0; k < n; k++)
            assert_string_equal(names[k], cases[i].want[k]);
        assert_null(cases[i].want[n]);
        assert_true(redlock__handshake_pending(&hs));
        redlock__buf_free(&out, &alloc);
        redlock_url_free(&u);
    }
}

static void success_takes_the_run_id(void **state)
{
    (void)state;
    redlock_url u = parse("redis://user:pw@127.0.0.1:6379/1");
    redlock__handshake hs;
    redlock__buf out = {0};
    assert_int_equal(redlock__handshake_start(&hs, &u, &out, &alloc), 0);
    char why[128] = "";
    assert_true(feed(&hs, "+OK\r\n", why, sizeof(why))); /* AUTH */
    assert_true(feed(&hs, "+OK\r\n", why, sizeof(why))); /* SELECT */
    char info[256];
    snprintf(info, sizeof(info), "# Server\r\nredis_version:7.0.15\r\nrun_id:%s\r\ntcp_port:6379",
             RUN_ID);
    feed_scripts_and_info(&hs, info);
    assert_false(redlock__handshake_pending(&hs));
    assert_string_equal(hs.run_id, RUN_ID);
    /* A reply past the last step is out of step. */
    assert_false(feed(&hs, "+OK\r\n", why, sizeof(why)));
    assert_non_null(strstr(why, "protocol error"));
    redlock__buf_free(&out, &alloc);
    redlock_url_free(&u);
}

static void run_id_only_from_its_own_line(void **state)
{
    (void)state;
    const struct {
        const char *body;
        bool found;
    } cases[] = {
        {"run_id:0123456789abcdef0123456789abcdef01234567", true},      /* first line */
        {"x\nrun_id:0123456789abcdef0123456789abcdef01234567\n", true}, /* a later line */
        {"x\nmaster_run_id:0123456789abcdef0123456789abcdef01234567", false},
        {"run_id:0123456789", false}, /* too short: not taken */
        /* not 40 lowercase hex digits: no Redis sends it, and a partial id must not match */
        {"run_id:0123456789ABCDEF0123456789abcdef01234567", false},
        {"run_id:0123456789abcdef0123456789abcdef0123456\r\n", false},
        {"run_id:0123456789abcdef 123456789abcdef01234567", false},
        {"# Server\r\nredis_version:7.0.15", false},
        {"", false},
    };
    redlock_url u = parse("redis://127.0.0.1:6379");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        redlock__handshake hs;
        redlock__buf out = {0};
        assert_int_equal(redlock__handshake_start(&hs, &u, &out, &alloc), 0);
        feed_scripts_and_info(&hs, cases[i].body);
        assert_false(redlock__handshake_pending(&hs));
        if (cases[i].found)
            assert_string_equal(hs.run_id, RUN_ID);
        else
            assert_string_equal(hs.run_id, "");
        redlock__buf_free(&out, &alloc);
    }
    redlock_url_free(&u);
}

/* Each step's failure: refused AUTH/SELECT, refused credentials (NOAUTH: the URL gives no
 * password, so the first refusal comes to SCRIPT LOAD) and any reply of the wrong shape end the
 * connection, saying what to fix; an ACL's refusal of SCRIPT LOAD or INFO does not. */
static void which_replies_end_the_connection(void **state)
{
    (void)state;
    const struct {
        unsigned step; /* 0 AUTH, 1 SELECT, 2 the first SCRIPT LOAD, 14 INFO, 15 its role */
        const char *resp;
        bool goes_on;
        const char *why_has;
    } cases[] = {
        {0, "-WRONGPASS invalid username-password pair\r\n", false,
         "authentication failed (WRONGPASS): the URL's user name or password is wrong"},
        {0, "-ERR invalid password\r\n", false, "authentication failed (WRONGPASS)"},
        {0, "-ERR invalid passwords\r\n", false, "handshake: ERR invalid passwords"},
        {0, "+QUEUED\r\n", false, "unexpected reply to AUTH or SELECT"},
        {0, ":1\r\n", false, "unexpected reply to AUTH or SELECT"},
        {1, "-ERR DB index is out of range\r\n", false, "handshake: ERR DB index"},
        {1, "$2\r\nOK\r\n", false, "unexpected reply to AUTH or SELECT"},
        {2, "-NOPERM this user has no permissions to run the 'script' command\r\n", true, NULL},
        {2, "-NOAUTH Authentication required.\r\n", false,
         "the server wants a password (NOAUTH): give it in the URL"},
        {14, "-NOAUTH Authentication required.\r\n", false, "wants a password (NOAUTH)"},
        {2, "-NOAUTHX something else\r\n", true, NULL},
        {2, "$40\r\n0123456789abcdef0123456789abcdef01234567\r\n", false,
         "unexpected reply to SCRIPT LOAD"},
        {2, "+OK\r\n", false, "unexpected reply to SCRIPT LOAD"},
        {2, "$-1\r\n", false, "unexpected reply to SCRIPT LOAD"},
        {14, "-NOPERM this user has no permissions to run the 'info' command\r\n", true, NULL},
        {14, "+OK\r\n", false, "unexpected reply to INFO"},
        {14, "*0\r\n", false, "unexpected reply to INFO"},
        {15, "-NOPERM this user has no permissions to run the 'info' command\r\n", true, NULL},
        {15, ":1\r\n", false, "unexpected reply to INFO replication"},
    };
    redlock_url u = parse("redis://:pw@127.0.0.1:6379/2");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        redlock__handshake hs;
        redlock__buf out = {0};
        assert_int_equal(redlock__handshake_start(&hs, &u, &out, &alloc), 0);
        assert_int_equal(hs.n_steps, 16);
        char why[REDLOCK_ERROR_TEXT_MAX] = "";
        for (unsigned k = 0; k < cases[i].step; k++) { /* the steps before succeed */
            char resp[128] = "+OK\r\n";
            if (hs.steps[k].kind == REDLOCK__HANDSHAKE_SCRIPT)
                bulk(resp, sizeof(resp), hs.steps[k].script->sha1);
            else if (hs.steps[k].kind == REDLOCK__HANDSHAKE_INFO)
                bulk(resp, sizeof(resp), "run_id:x\n");
            assert_true(feed(&hs, resp, why, sizeof(why)));
        }
        bool goes_on = feed(&hs, cases[i].resp, why, sizeof(why));
        if (goes_on != cases[i].goes_on ||
            (cases[i].why_has != NULL && strstr(why, cases[i].why_has) == NULL))
            fail_msg("case %zu (%s): goes_on %d, why \"%s\"", i, cases[i].resp, goes_on, why);
        redlock__buf_free(&out, &alloc);
    }
    redlock_url_free(&u);
}

/* INFO replication: a replica's master is taken from its own lines, printable bytes only; a
 * master, or a reply without a role, is no replica. */
static void role_names_the_master(void **state)
{
    (void)state;
    const struct {
        const char *body;
        const char *replica_of;
    } cases[] = {
        {"# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:6380\r\n"
         "master_link_status:up\r\n",
         "127.0.0.1:6380"},
        {"role:slave\nmaster_port:7000\nmaster_host:db-1.example\n", "db-1.example:7000"},
        {"role:slave\r\n", "?:?"},
        {"role:slave\r\nmaster_host:a\x1b[2Jb\r\nmaster_port:1\r\n", "a[2Jb:1"},
        {"role:master\r\nslave0:ip=127.0.0.1,port=6381\r\n", ""},
        {"xrole:slave\r\n", ""},
        {"role:slaves\r\n", ""},
        {"", ""},
    };
    redlock_url u = parse("redis://127.0.0.1:6379");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        redlock__handshake hs;
        redlock__buf out = {0};
        assert_int_equal(redlock__handshake_start(&hs, &u, &out, &alloc), 0);
        char resp[512], why[128];
        while (hs.steps[hs.answered].kind != REDLOCK__HANDSHAKE_ROLE) {
            bulk(resp, sizeof(resp),
                 hs.steps[hs.answered].kind == REDLOCK__HANDSHAKE_SCRIPT
                     ? hs.steps[hs.answered].script->sha1
                     : "run_id:x\n");
            assert_true(feed(&hs, resp, why, sizeof(why)));
        }
        bulk(resp, sizeof(resp), cases[i].body);
        assert_true(feed(&hs, resp, why, sizeof(why)));
        assert_false(redlock__handshake_pending(&hs));
        if (strcmp(hs.replica_of, cases[i].replica_of) != 0)
            fail_msg("case %zu: replica_of \"%s\", want \"%s\"", i, hs.replica_of,
                     cases[i].replica_of);
        redlock__handshake_reset(&hs);
        assert_string_equal(hs.replica_of, "");
        redlock__buf_free(&out, &alloc);
    }
    redlock_url_free(&u);
}

static void reset_forgets_everything(void **state)
{
    (void)state;
    redlock_url u = parse("redis://127.0.0.1:6379");
    redlock__handshake hs;
    redlock__buf out = {0};
    assert_int_equal(redlock__handshake_start(&hs, &u, &out, &alloc), 0);
    char info[128];
    snprintf(info, sizeof(info), "run_id:%s\n", RUN_ID);
    feed_scripts_and_info(&hs, info);
    assert_string_equal(hs.run_id, RUN_ID);
    redlock__handshake_reset(&hs);
    assert_false(redlock__handshake_pending(&hs));
    assert_string_equal(hs.run_id, "");
    redlock__buf_free(&out, &alloc);
    redlock_url_free(&u);
}

/* A tolerated refusal is kept: a connection that then fails before the handshake is done says
 * what the server answered (a server at its maxclients answers the first command and closes);
 * once the handshake is done, or without a refusal, the reason is left as it is. */
static void a_refusal_explains_a_close(void **state)
{
    (void)state;
    redlock_url u = parse("redis://127.0.0.1:6379");
    redlock__handshake hs;
    redlock__buf out = {0};
    assert_int_equal(redlock__handshake_start(&hs, &u, &out, &alloc), 0);
    char why[128], buf[160];
    const char *closed = "connection closed by the node";
    assert_ptr_equal(redlock__handshake_why(&hs, closed, buf, sizeof(buf)), closed);
    assert_true(feed(&hs, "-ERR max number of clients reached\r\n", why, sizeof(why)));
    assert_true(redlock__handshake_pending(&hs));
    assert_string_equal(redlock__handshake_why(&hs, closed, buf, sizeof(buf)),
                        "connection closed by the node, after answering the handshake: ERR max "
                        "number of clients reached");
    /* Only the first refusal is kept. */
    assert_true(feed(&hs, "-NOPERM no permissions\r\n", why, sizeof(why)));
    assert_non_null(strstr(redlock__handshake_why(&hs, closed, buf, sizeof(buf)), "ERR max"));
    /* A long answer is cut after a word, never overrun. */
    char small[40];
    assert_string_equal(redlock__handshake_why(&hs, closed, small, sizeof(small)),
                        "connection closed by the node, after...");
    /* Done (the rest answered): a later failure is not the handshake's. */
    while (redlock__handshake_pending(&hs)) {
        char resp[128];
        bulk(resp, sizeof(resp),
             hs.steps[hs.answered].kind == REDLOCK__HANDSHAKE_SCRIPT
                 ? hs.steps[hs.answered].script->sha1
                 : "run_id:x\n");
        assert_true(feed(&hs, resp, why, sizeof(why)));
    }
    assert_ptr_equal(redlock__handshake_why(&hs, closed, buf, sizeof(buf)), closed);
    redlock__handshake_reset(&hs);
    assert_string_equal(hs.refused, "");
    redlock__buf_free(&out, &alloc);
    redlock_url_free(&u);
}

int main(void)
{
    redlock__alloc_init(&alloc, NULL, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(steps_follow_the_url),
        cmocka_unit_test(role_names_the_master),
        cmocka_unit_test(success_takes_the_run_id),
        cmocka_unit_test(run_id_only_from_its_own_line),
        cmocka_unit_test(which_replies_end_the_connection),
        cmocka_unit_test(reset_forgets_everything),
        cmocka_unit_test(a_refusal_explains_a_close),
    };
    return cmocka_run_group_tests_name("handshake", tests, NULL, NULL);
}
