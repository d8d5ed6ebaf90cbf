/* SPDX-License-Identifier: MIT */
/* test_cli_args.c - the tool's pure parts: durations, node lists, the command line, the JSON
 * writer (checked against the strict parser the other cli tests use), and the docs of all of it:
 * --help, docs/cli.md and the man page (docs/redlock.1.scd, from $REDLOCK_DOCS) list the same
 * options (those the parser takes), environment variables, URL schemes and exit statuses (those
 * of CLI_EXIT_MAP). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "args.h"
#include "json.h"
#include "jsonp.h"

/* ---- durations ----------------------------------------------------------------------------- */

static void durations_accepted(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        uint64_t ms;
    } ok[] = {
        {"0", 0},
        {"10", 10000},
        {"500ms", 500},
        {"10s", 10000},
        {"2m", 120000},
        {"1h", 3600000},
        {"1.5s", 1500},
        {"0.25", 250},
        {"1.5m", 90000},
        {"0.001s", 1},
        {"1.000000000s", 1000},
        {"2.5h", 9000000},
        {"007s", 7000},
        {"4398046511104ms", UINT64_C(1) << 42},
        {"1221679h", UINT64_C(1221679) * 3600000},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        uint64_t ms = 12345;
        char err[200] = "";
        if (cli_parse_duration(ok[i].text, &ms, err, sizeof(err)) != 0)
            fail_msg("'%s' refused: %s", ok[i].text, err);
        if (ms != ok[i].ms)
            fail_msg("'%s' = %llu ms, expected %llu", ok[i].text, (unsigned long long)ms,
                     (unsigned long long)ok[i].ms);
    }
}

static void durations_refused(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        const char *why;
    } bad[] = {
        {"", "empty"},
        {"-1s", "negative"},
        {"-0", "negative"},
        {"+1s", "not a duration"},
        {" 1s", "not a duration"},
        {"1s ", "unknown unit"},
        {"s", "not a duration"},
        {".5s", "not a duration"},
        {"1.s", "digits after"},
        {"1.5ms", "whole number"},
        {"0.0001s", "whole number"},
        {"1.0000000001s", "more than 9 digits"},
        {"10x", "unknown unit"},
        {"10S", "unknown unit"},
        {"10sec", "unknown unit"},
        {"1e3", "unknown unit"},
        {"1,5s", "unknown unit"},
        {"0x10", "unknown unit"},
        {"4398046511105ms", "too long"},
        {"1221680h", "too long"},
        {"18446744073709551616", "too long"},
        {"99999999999999999999999999999h", "too long"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t ms = 777;
        char err[200] = "";
        if (cli_parse_duration(bad[i].text, &ms, err, sizeof(err)) == 0)
            fail_msg("'%s' accepted as %llu ms", bad[i].text, (unsigned long long)ms);
        assert_int_equal(ms, 777);
        if (strstr(err, bad[i].why) == NULL)
            fail_msg("'%s': message \"%s\" lacks \"%s\"", bad[i].text, err, bad[i].why);
    }
}

static void durations_formatted(void **state)
{
    (void)state;
    char out[32];
    cli_format_duration(0, out, sizeof(out));
    assert_string_equal(out, "0s");
    cli_format_duration(500, out, sizeof(out));
    assert_string_equal(out, "500ms");
    cli_format_duration(10000, out, sizeof(out));
    assert_string_equal(out, "10s");
    cli_format_duration(120000, out, sizeof(out));
    assert_string_equal(out, "2m");
    cli_format_duration(7200000, out, sizeof(out));
    assert_string_equal(out, "2h");
    cli_format_duration(1500, out, sizeof(out));
    assert_string_equal(out, "1500ms");
}

/* ---- the command line ---------------------------------------------------------------------- */

#define ARGV(...) ((char *[]){"redlock", __VA_ARGS__, NULL})
#define ARGC(...) ((int)(sizeof((char *[]){"redlock", __VA_ARGS__}) / sizeof(char *)))
#define PARSE(a, env, err, ...)                                                                    \
    cli_parse((a), ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), (env), (err), sizeof(err))

static void command_line_parsed(void **state)
{
    (void)state;
    cli_args a;
    char err[300];
    assert_int_equal(PARSE(&a, NULL, err, "-n", "redis://a,redis://b", "-t", "2m", "-w", "30s",
                           "-T", "1s", "-g", "1s", "-q", "run", "job", "--", "cmd", "-x", "--"),
                     CLI_PARSE_OK);
    assert_int_equal(a.command, CLI_CMD_RUN);
    assert_string_equal(a.key, "job");
    assert_int_equal(a.n_nodes, 2);
    assert_string_equal(a.nodes[0], "redis://a");
    assert_string_equal(a.nodes[1], "redis://b");
    assert_false(a.nodes_from_env);
    assert_int_equal(a.ttl_ms, 120000);
    assert_int_equal(a.wait_ms, 30000);
    assert_int_equal(a.node_timeout_ms, 1000);
    assert_int_equal(a.grace_ms, 1000);
    assert_true(a.quiet);
    assert_string_equal(a.child_argv[0], "cmd");
    assert_string_equal(a.child_argv[1], "-x");
    assert_string_equal(a.child_argv[2], "--");
    assert_null(a.child_argv[3]);
    cli_args_free(&a);

    /* Defaults, nodes from the environment (trimmed), options after the command. */
    assert_int_equal(PARSE(&a, " redis://a , redis://b\n", err, "release", "--ttl=1.5s",
                           "-qTT" /* -q, then -T with value "T" */, "k", "tok"),
                     CLI_PARSE_USAGE);
    assert_non_null(strstr(err, "--node-timeout: 'T'"));
    cli_args_free(&a);
    assert_int_equal(
        PARSE(&a, " redis://a , redis://b\n", err, "release", "--ttl=1.5s", "k", "tok"),
        CLI_PARSE_OK);
    assert_int_equal(a.command, CLI_CMD_RELEASE);
    assert_true(a.nodes_from_env);
    assert_int_equal(a.n_nodes, 2);
    assert_string_equal(a.nodes[1], "redis://b");
    assert_int_equal(a.ttl_ms, 1500);
    assert_int_equal(a.wait_ms, 0);
    assert_int_equal(a.node_timeout_ms, CLI_DEFAULT_NODE_TIMEOUT_MS);
    assert_int_equal(a.grace_ms, CLI_DEFAULT_GRACE_MS);
    assert_string_equal(a.token, "tok");
    assert_int_equal(a.token_len, 3);
    cli_args_free(&a);

    /* Clustered short options with an attached value; repeated -n adds up; a KEY after "--". */
    assert_int_equal(PARSE(&a, "redis://ignored", err, "-qt500ms", "-n", "redis://a", "status",
                           "--nodes", "redis://b", "--", "-k"),
                     CLI_PARSE_OK);
    assert_true(a.quiet);
    assert_int_equal(a.ttl_ms, 500);
    assert_int_equal(a.n_nodes, 2);
    assert_string_equal(a.key, "-k");
    assert_int_equal(a.command, CLI_CMD_STATUS);
    cli_args_free(&a);

    /* --help and --version stop checking. */
    assert_int_equal(PARSE(&a, NULL, err, "run", "--help", "garbage"), CLI_PARSE_OK);
    assert_true(a.help);
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, NULL, err, "--version"), CLI_PARSE_OK);
    assert_true(a.version);
    cli_args_free(&a);
}

/* --json (-j): run's JSON line at its end; accepted (and without effect) for the others. */
static void json_option_parsed(void **state)
{
    (void)state;
    cli_args a;
    char err[300];
    assert_int_equal(PARSE(&a, "redis://a", err, "run", "job", "--", "cmd"), CLI_PARSE_OK);
    assert_false(a.json);
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, "redis://a", err, "--json", "run", "job", "--", "cmd"),
                     CLI_PARSE_OK);
    assert_true(a.json);
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, "redis://a", err, "release", "-qj", "k", "tok"), CLI_PARSE_OK);
    assert_true(a.json);
    assert_true(a.quiet);
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, "redis://a", err, "--json=1", "status", "k"), CLI_PARSE_USAGE);
    assert_non_null(strstr(err, "--json takes no value"));
    cli_args_free(&a);
}

static void command_line_refused(void **state)
{
    (void)state;
    cli_args a;
    char err[300];
    static const char secret[] = "hunter2";
    /* Passwords in stray words are never repeated. */
    assert_int_equal(PARSE(&a, "redis://a", err, "redis://:hunter2@h", "acquire", "k"),
                     CLI_PARSE_USAGE);
    assert_null(strstr(err, secret));
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, "redis://a", err, "acquire", "k", "redis://:hunter2@h"),
                     CLI_PARSE_USAGE);
    assert_null(strstr(err, secret));
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, "redis://a", err, "--node=redis://:hunter2@h", "acquire", "k"),
                     CLI_PARSE_USAGE);
    assert_null(strstr(err, secret));
    assert_non_null(strstr(err, "'--node'"));
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, NULL, err, "-n", "redis://:hunter2@h,,redis://b", "acquire", "k"),
                     CLI_PARSE_USAGE);
    assert_null(strstr(err, secret));
    assert_non_null(strstr(err, "URL 2"));
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, "redis://:hunter2@h, ", err, "acquire", "k"), CLI_PARSE_USAGE);
    assert_null(strstr(err, secret));
    assert_non_null(strstr(err, "REDLOCK_NODES"));
    cli_args_free(&a);

    assert_int_equal(PARSE(&a, NULL, err, "acquire", "k"), CLI_PARSE_USAGE);
    assert_non_null(strstr(err, "no nodes"));
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, "redis://a", err, "run", "k", "--"), CLI_PARSE_USAGE);
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, "redis://a", err, "run", "k", "--", ""), CLI_PARSE_USAGE);
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, "redis://a", err, "release", "k", "t", "extra"), CLI_PARSE_USAGE);
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, "redis://a", err, "-t", "9ms", "acquire", "k"), CLI_PARSE_USAGE);
    assert_non_null(strstr(err, "at least 10ms"));
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, "redis://a", err, "-\x01", "acquire", "k"), CLI_PARSE_USAGE);
    assert_non_null(strstr(err, "0x01"));
    cli_args_free(&a);
    /* The message is one line whatever is quoted in it (found by fuzz_args). */
    assert_int_equal(PARSE(&a, "redis://a", err, "line\none"), CLI_PARSE_USAGE);
    assert_null(strchr(err, '\n'));
    assert_non_null(strstr(err, "'line?one'"));
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, "redis://a", err, "-t", "1\r\x1b", "acquire", "k"), CLI_PARSE_USAGE);
    assert_null(strpbrk(err, "\r\x1b"));
    cli_args_free(&a);

    /* A list is split where a URL ends: at a comma before the next URL's scheme (or another
     * comma, or the end), so a comma in a password stays in its URL. */
    assert_int_equal(
        PARSE(&a, NULL, err, "-n", "redis://u:se,cret@h, rediss://v:a,b,c@i:7,", "acquire", "k"),
        CLI_PARSE_USAGE);
    assert_non_null(strstr(err, "URL 3 of the list is empty"));
    assert_null(strstr(err, "cret"));
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, NULL, err, "-n", "redis://u:se,cret@h, rediss://v:a,b,c@i:7", "-n",
                           "redis://u:secret,x", "acquire", "k"),
                     CLI_PARSE_OK);
    assert_int_equal(a.n_nodes, 3);
    assert_string_equal(a.nodes[0], "redis://u:se,cret@h");
    assert_string_equal(a.nodes[1], "rediss://v:a,b,c@i:7");
    assert_string_equal(a.nodes[2], "redis://u:secret,x"); /* one URL: the library refuses it */
    cli_args_free(&a);

    /* A KEY over REDLOCK_RESOURCE_MAX is refused before anything is sent, as the library would
     * refuse it (the same words: lib/lock/client.h). */
    static char key[CLI_KEY_MAX + 2];
    memset(key, 'k', CLI_KEY_MAX + 1);
    assert_int_equal(PARSE(&a, "redis://a", err, "run", key, "--", "true"), CLI_PARSE_USAGE);
    assert_string_equal(err, "run: KEY is 16385 bytes, over REDLOCK_RESOURCE_MAX (16384): lock a "
                             "digest of it instead");
    cli_args_free(&a);
    key[CLI_KEY_MAX] = '\0';
    assert_int_equal(PARSE(&a, "redis://a", err, "acquire", key), CLI_PARSE_OK);
    assert_int_equal(a.key_len, CLI_KEY_MAX);
    cli_args_free(&a);

    /* --fence-domain: --fence from a shared counter, for acquire and run only. */
    assert_int_equal(PARSE(&a, "redis://a", err, "--fence-domain", "users", "acquire", "u:1"),
                     CLI_PARSE_OK);
    assert_true(a.fence);
    assert_string_equal(a.fence_domain, "users");
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, "redis://a", err, "--fence-domain=users", "status", "u:1"),
                     CLI_PARSE_USAGE);
    assert_non_null(strstr(err, "--fence-domain is for acquire and run"));
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, "redis://a", err, "--fence-domain=", "acquire", "u:1"),
                     CLI_PARSE_USAGE);
    assert_non_null(strstr(err, "--fence-domain: empty value"));
    cli_args_free(&a);

    /* 64 nodes are fine, 65 are not. */
    char list[65 * 24] = "";
    for (int i = 0; i < 65; i++)
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%sredis://h%d", i ? "," : "",
                 i);
    assert_int_equal(PARSE(&a, list, err, "acquire", "k"), CLI_PARSE_USAGE);
    assert_non_null(strstr(err, "more than 64"));
    cli_args_free(&a);
    *strrchr(list, ',') = '\0';
    assert_int_equal(PARSE(&a, list, err, "acquire", "k"), CLI_PARSE_OK);
    assert_int_equal(a.n_nodes, 64);
    cli_args_free(&a);
}

/* --nodes-file's text: one URL (or one comma-separated list) per line; comments and blank lines
 * skipped; a bad line is named by its number, never quoted. */
static void node_lines_parsed(void **state)
{
    (void)state;
    cli_args a;
    char err[300];
    memset(&a, 0, sizeof(a));
    static const char text[] = "# nodes\n\n  redis://a:1  \r\n\t# indented comment\n"
                               "redis://b:2,redis://c:3\nredis://d:4";
    assert_int_equal(cli_add_node_lines(&a, text, sizeof(text) - 1, "f", err, sizeof(err)),
                     CLI_PARSE_OK);
    assert_int_equal(a.n_nodes, 4);
    assert_string_equal(a.nodes[0], "redis://a:1");
    assert_string_equal(a.nodes[1], "redis://b:2");
    assert_string_equal(a.nodes[2], "redis://c:3");
    assert_string_equal(a.nodes[3], "redis://d:4");
    assert_int_equal(a.node_line[0], 3);
    assert_int_equal(a.node_line[1], 5);
    assert_int_equal(a.node_line[2], 5);
    assert_int_equal(a.node_line[3], 6);
    cli_args_free(&a);

    memset(&a, 0, sizeof(a));
    static const char bad[] = "redis://a\nredis://:hunter2@h,,x\n";
    assert_int_equal(
        cli_add_node_lines(&a, bad, sizeof(bad) - 1, "--nodes-file f", err, sizeof(err)),
        CLI_PARSE_USAGE);
    assert_null(strstr(err, "hunter2"));
    assert_non_null(strstr(err, "--nodes-file f, line 2"));
    cli_args_free(&a);
    memset(&a, 0, sizeof(a));
    static const char nul[] = "redis://a\0b\n";
    assert_int_equal(cli_add_node_lines(&a, nul, sizeof(nul) - 1, "f", err, sizeof(err)),
                     CLI_PARSE_USAGE);
    assert_non_null(strstr(err, "line 1 holds a NUL"));
    cli_args_free(&a);

    /* --nodes-file counts as nodes given: $REDLOCK_NODES is not read; the tool reads the file. */
    assert_int_equal(PARSE(&a, "redis://env", err, "--nodes-file", "/f", "acquire", "k"),
                     CLI_PARSE_OK);
    assert_int_equal(a.n_nodes, 0);
    assert_string_equal(a.nodes_file, "/f");
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, NULL, err, "--nodes-file=/f", "--nodes-file=/g", "acquire", "k"),
                     CLI_PARSE_USAGE);
    assert_non_null(strstr(err, "given twice"));
    cli_args_free(&a);
}

/* check [PREFIX]: the prefix is optional, nothing may follow it. */
static void check_command_parsed(void **state)
{
    (void)state;
    cli_args a;
    char err[300];
    assert_int_equal(PARSE(&a, "redis://a", err, "check"), CLI_PARSE_OK);
    assert_int_equal(a.command, CLI_CMD_CHECK);
    assert_string_equal(a.prefix, "");
    assert_false(a.delayed_restart);
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, "redis://a", err, "check", "--delayed-restart", "locks:"),
                     CLI_PARSE_OK);
    assert_string_equal(a.prefix, "locks:");
    assert_true(a.delayed_restart);
    cli_args_free(&a);
    assert_int_equal(PARSE(&a, "redis://a", err, "check", "locks:", "more"), CLI_PARSE_USAGE);
    assert_non_null(strstr(err, "unexpected argument 'more'"));
    cli_args_free(&a);
}

/* ---- JSON ---------------------------------------------------------------------------------- */

static char *write_string(const void *bytes, size_t len)
{
    jw w;
    jw_init(&w);
    jw_string(&w, bytes, len);
    assert_true(jw_ok(&w));
    char *out = strdup(w.buf);
    jw_free(&w);
    return out;
}

static void json_strings_escaped(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        size_t len;
        const char *out;
    } cases[] = {
        {"plain", 5, "\"plain\""},
        {"q\"b\\s/", 6, "\"q\\\"b\\\\s/\""},
        {"\b\f\n\r\t", 5, "\"\\b\\f\\n\\r\\t\""},
        {"\x00\x01\x1f\x7f", 4, "\"\\u0000\\u0001\\u001f\\u007f\""},
        {"\xc3\xa9", 2, "\"\xc3\xa9\""},                             /* e-acute: valid, copied */
        {"\xe2\x82\xac", 3, "\"\xe2\x82\xac\""},                     /* euro sign */
        {"\xf0\x9f\x94\x92", 4, "\"\xf0\x9f\x94\x92\""},             /* U+1F512 */
        {"\xff\xfe", 2, "\"\\u00ff\\u00fe\""},                       /* never valid */
        {"\xc0\xaf", 2, "\"\\u00c0\\u00af\""},                       /* overlong '/' */
        {"\xe0\x80\xaf", 3, "\"\\u00e0\\u0080\\u00af\""},            /* overlong */
        {"\xed\xa0\x80", 3, "\"\\u00ed\\u00a0\\u0080\""},            /* surrogate U+D800 */
        {"\xf4\x90\x80\x80", 4, "\"\\u00f4\\u0090\\u0080\\u0080\""}, /* above U+10FFFF */
        {"\xe2\x82", 2, "\"\\u00e2\\u0082\""},                       /* truncated */
        {"a\xc3", 2, "\"a\\u00c3\""},                                /* truncated at the end */
        {"\x80z", 2, "\"\\u0080z\""},                                /* lone continuation */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *out = write_string(cases[i].in, cases[i].len);
        if (strcmp(out, cases[i].out) != 0)
            fail_msg("case %zu: %s, expected %s", i, out, cases[i].out);
        /* And a strict parser takes it. */
        char err[200];
        jv *v = jv_parse(out, strlen(out), err, sizeof(err));
        if (v == NULL)
            fail_msg("case %zu: not valid JSON: %s", i, err);
        jv_free(v);
        free(out);
    }
}

static void json_every_byte_round_trips(void **state)
{
    (void)state;
    /* All 256 bytes: the output parses, and every byte reads back as its code point. */
    unsigned char all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (unsigned char)i;
    char *out = write_string(all, sizeof(all));
    char err[200];
    jv *v = jv_parse(out, strlen(out), err, sizeof(err));
    if (v == NULL)
        fail_msg("not valid JSON: %s", err);
    assert_int_equal(v->type, JV_STRING);
    assert_int_equal(v->len, 128 + 2 * 128);
    for (int i = 0; i < 128; i++)
        assert_int_equal((unsigned char)v->str[i], i);
    for (int i = 128; i < 256; i++) {
        size_t at = 128 + 2 * (size_t)(i - 128);
        assert_int_equal((unsigned char)v->str[at], 0xc0 | (i >> 6));
        assert_int_equal((unsigned char)v->str[at + 1], 0x80 | (i & 0x3f));
    }
    jv_free(v);
    free(out);
}

static void json_document_shape(void **state)
{
    (void)state;
    jw w;
    jw_init(&w);
    jw_object_begin(&w);
    jw_key(&w, "s");
    jw_cstring(&w, "x");
    jw_key(&w, "n");
    jw_cstring(&w, NULL);
    jw_key(&w, "u");
    jw_u64(&w, UINT64_C(18446744073709551615));
    jw_key(&w, "i");
    jw_i64(&w, -2);
    jw_key(&w, "b");
    jw_bool(&w, true);
    jw_key(&w, "a");
    jw_array_begin(&w);
    jw_object_begin(&w);
    jw_object_end(&w);
    jw_array_begin(&w);
    jw_array_end(&w);
    jw_null(&w);
    jw_u64(&w, 1);
    jw_array_end(&w);
    jw_object_end(&w);
    assert_true(jw_ok(&w));
    assert_string_equal(w.buf, "{\"s\":\"x\",\"n\":null,\"u\":18446744073709551615,\"i\":-2,"
                               "\"b\":true,\"a\":[{},[],null,1]}");
    jw_free(&w);
}

/* ---- the docs: --help, docs/cli.md and the man page agree ----------------------------------- */

#define MAX_WORDS 64

typedef struct words {
    char w[MAX_WORDS][64];
    int n;
} words;

static bool has_word(const words *ws, const char *w)
{
    for (int i = 0; i < ws->n; i++)
        if (strcmp(ws->w[i], w) == 0)
            return true;
    return false;
}

static void add_word(words *ws, const char *w, size_t len)
{
    char buf[64];
    snprintf(buf, sizeof(buf), "%.*s", (int)len, w);
    if (!has_word(ws, buf)) {
        assert_true(ws->n < MAX_WORDS);
        snprintf(ws->w[ws->n++], sizeof(ws->w[0]), "%s", buf);
    }
}

/* a == b as sets, or the test fails naming what one has and the other lacks. */
static void expect_same(const char *what, const char *a_name, const words *a, const char *b_name,
                        const words *b)
{
    for (int i = 0; i < a->n; i++)
        if (!has_word(b, a->w[i]))
            fail_msg("%s: %s has %s, %s does not", what, a_name, a->w[i], b_name);
    for (int i = 0; i < b->n; i++)
        if (!has_word(a, b->w[i]))
            fail_msg("%s: %s has %s, %s does not", what, b_name, b->w[i], a_name);
}

/* A file of docs/, malloc'ed; scdoc's escapes (\_, \*) are dropped, so the man page reads as it
 * renders. */
static char *read_doc(const char *name)
{
    const char *dir = getenv("REDLOCK_DOCS");
    if (dir == NULL)
        fail_msg("REDLOCK_DOCS is not set (meson sets it to the source's docs/)");
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("cannot read %s", path);
    char *text = malloc(1 << 20);
    assert_non_null(text);
    size_t len = fread(text, 1, (1 << 20) - 1, f);
    fclose(f);
    text[len] = '\0';
    size_t o = 0;
    for (size_t i = 0; i < len; i++)
        if (!(text[i] == '\\' && (text[i + 1] == '_' || text[i + 1] == '*')))
            text[o++] = text[i];
    text[o] = '\0';
    return text;
}

/* The lines of the section that starts with the line heading, up to the next line starting with
 * stop (NUL-terminated in place; text is modified). */
static char *section(char *text, const char *heading, const char *stop, const char *file)
{
    char *at = text;
    size_t hl = strlen(heading);
    while ((at = strstr(at, heading)) != NULL &&
           !((at == text || at[-1] == '\n') && (at[hl] == '\n' || at[hl] == '\0')))
        at += hl;
    if (at == NULL)
        fail_msg("%s has no line \"%s\"", file, heading);
    at += hl;
    char *end = at;
    while ((end = strstr(end, stop)) != NULL && end[-1] != '\n')
        end++;
    if (end != NULL)
        *end = '\0';
    return at;
}

/* Every "--name" in text, into ws (a lone "--" is no option). */
static void long_options_in(const char *text, size_t len, words *ws)
{
    for (size_t i = 0; i + 2 < len; i++) {
        if (text[i] == '-' && text[i + 1] == '-' && text[i + 2] >= 'a' && text[i + 2] <= 'z' &&
            (i == 0 || (text[i - 1] != '-' && (text[i - 1] < 'a' || text[i - 1] > 'z')))) {
            size_t j = i + 2;
            while (j < len && ((text[j] >= 'a' && text[j] <= 'z') || text[j] == '-'))
                j++;
            add_word(ws, text + i, j - i);
            i = j;
        }
    }
}

/* Every word of the form prefix[A-Z_]* in text (REDLOCK_NODES, ...), or [a-z]+:// (schemes). */
static void names_in(const char *text, const char *prefix, words *ws)
{
    size_t pl = strlen(prefix);
    for (const char *p = strstr(text, prefix); p != NULL; p = strstr(p + 1, prefix)) {
        size_t j = pl;
        while ((p[j] >= 'A' && p[j] <= 'Z') || p[j] == '_')
            j++;
        add_word(ws, p, j);
    }
}

static void schemes_in(const char *text, words *ws)
{
    for (const char *p = strstr(text, "://"); p != NULL; p = strstr(p + 3, "://")) {
        const char *s = p;
        while (s > text && s[-1] >= 'a' && s[-1] <= 'z')
            s--;
        if (s < p)
            add_word(ws, s, (size_t)(p - s) + 3);
    }
}

/* Each line of a section that starts with start (after blanks), from its first occurrence of
 * needle on: the lines' first cells. */
typedef void (*line_fn)(const char *line, size_t len, words *ws);

static void each_line(const char *text, const char *start, line_fn fn, words *ws)
{
    size_t sl = strlen(start);
    for (const char *p = text; *p != '\0';) {
        const char *eol = strchr(p, '\n');
        size_t len = eol != NULL ? (size_t)(eol - p) : strlen(p);
        if (len >= sl && strncmp(p, start, sl) == 0)
            fn(p, len, ws);
        if (eol == NULL)
            break;
        p = eol + 1;
    }
}

/* The first cell of a markdown table row. */
static size_t first_cell(const char *line, size_t len)
{
    const char *bar = memchr(line + 1, '|', len - 1);
    return bar != NULL ? (size_t)(bar - line) : len;
}

static void options_of_row(const char *line, size_t len, words *ws)
{
    long_options_in(line, first_cell(line, len), ws);
}

static void options_of_entry(const char *line, size_t len, words *ws)
{
    long_options_in(line, len, ws);
}

/* --help, written by the tool's own function. */
static char *help_text(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(cli_write_help(f), 0);
    fclose(f);
    return buf;
}

static void docs_list_every_option(void **state)
{
    (void)state;
    words parser = {0}, help = {0}, man = {0}, md = {0};
    for (unsigned i = 0; cli_option_name(i) != NULL; i++) {
        char name[64];
        snprintf(name, sizeof(name), "--%s", cli_option_name(i));
        add_word(&parser, name, strlen(name));
    }
    char *h = help_text();
    char *opts = section(
        h, "options (before KEY; '--' ends them, so a KEY may start with '-'):", "\n", "--help");
    each_line(opts, "  -", options_of_entry, &help);
    free(h);
    char *scd = read_doc("redlock.1.scd");
    each_line(section(scd, "# OPTIONS", "# ", "redlock.1.scd"), "*-", options_of_entry, &man);
    free(scd);
    char *cli = read_doc("cli.md");
    each_line(section(cli, "## Options", "## ", "cli.md"), "| `-", options_of_row, &md);
    free(cli);
    expect_same("options", "the parser", &parser, "--help", &help);
    expect_same("options", "--help", &help, "the man page's OPTIONS", &man);
    expect_same("options", "--help", &help, "docs/cli.md's options table", &md);
}

static void env_of_entry(const char *line, size_t len, words *ws)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%.*s", (int)len, line);
    names_in(buf, "REDLOCK_", ws);
}

static void env_of_row(const char *line, size_t len, words *ws)
{
    env_of_entry(line, first_cell(line, len), ws);
}

static void docs_list_every_variable_and_scheme(void **state)
{
    (void)state;
    words help = {0}, man = {0}, md = {0};
    char *h = help_text();
    names_in(h, "REDLOCK_", &help);
    words help_schemes = {0}, man_schemes = {0}, md_schemes = {0};
    schemes_in(h, &help_schemes);
    free(h);
    char *scd = read_doc("redlock.1.scd");
    char *scd2 = read_doc("redlock.1.scd");
    each_line(section(scd, "# ENVIRONMENT", "# ", "redlock.1.scd"), "*REDLOCK_", env_of_entry,
              &man);
    schemes_in(section(scd2, "# NODES", "# ", "redlock.1.scd"), &man_schemes);
    free(scd);
    free(scd2);
    char *cli = read_doc("cli.md");
    char *cli2 = read_doc("cli.md");
    each_line(section(cli, "## Nodes and the environment", "## ", "cli.md"), "| `REDLOCK_",
              env_of_row, &md);
    schemes_in(section(cli2, "## Nodes and the environment", "## ", "cli.md"), &md_schemes);
    free(cli);
    free(cli2);
    expect_same("environment variables", "--help", &help, "the man page's ENVIRONMENT", &man);
    expect_same("environment variables", "--help", &help, "docs/cli.md's variables table", &md);
    for (int i = 0; i < help_schemes.n; i++) {
        if (!has_word(&man_schemes, help_schemes.w[i]))
            fail_msg("the man page's NODES lacks %s, which --help lists", help_schemes.w[i]);
        if (!has_word(&md_schemes, help_schemes.w[i]))
            fail_msg("docs/cli.md's nodes section lacks %s, which --help lists", help_schemes.w[i]);
    }
    assert_true(help_schemes.n >= 5); /* redis, rediss, unix, cluster, clusters */
}

/* "*64*" or "*128+N*" at the start of a man page line; "| 64 |" in cli.md's table. */
static void status_of_entry(const char *line, size_t len, words *ws)
{
    if (len < 2 || line[1] < '0' || line[1] > '9')
        return;
    size_t j = 1;
    while (j < len && line[j] != '*')
        j++;
    add_word(ws, line + 1, j - 1);
}

static void status_of_row(const char *line, size_t len, words *ws)
{
    size_t cell = first_cell(line, len);
    size_t a = 1;
    while (a < cell && line[a] == ' ')
        a++;
    size_t b = cell;
    while (b > a && line[b - 1] == ' ')
        b--;
    if (b > a && line[a] >= '0' && line[a] <= '9')
        add_word(ws, line + a, b - a);
}

static void docs_list_every_exit_status(void **state)
{
    (void)state;
    words source = {0}, man = {0}, md = {0};
#define CLI_EXIT_SHOWN_(name, status, shown, help) add_word(&source, shown, strlen(shown));
    CLI_EXIT_MAP(CLI_EXIT_SHOWN_)
#undef CLI_EXIT_SHOWN_
    char *scd = read_doc("redlock.1.scd");
    each_line(section(scd, "# EXIT STATUS", "# ", "redlock.1.scd"), "*", status_of_entry, &man);
    free(scd);
    char *cli = read_doc("cli.md");
    each_line(section(cli, "## Exit status", "## ", "cli.md"), "| ", status_of_row, &md);
    free(cli);
    expect_same("exit statuses", "CLI_EXIT_MAP", &source, "the man page's EXIT STATUS", &man);
    expect_same("exit statuses", "CLI_EXIT_MAP", &source, "docs/cli.md's exit status table", &md);
    char *h = help_text();
#define CLI_EXIT_HELP_(name, status, shown, help)                                                  \
    if (strstr(h, help) == NULL && strstr(h, shown "  ") == NULL)                                  \
        fail_msg("--help lacks exit status %s", shown);
    CLI_EXIT_MAP(CLI_EXIT_HELP_)
#undef CLI_EXIT_HELP_
    free(h);
}

/* The text of an option's entry: in --help, from its line to the next option's; in the man page,
 * from its "*-x*, *--name*" line to the next blank line; in cli.md, its table row. NULL if none. */
static char *entry_of(char *text, const char *start_prefix, const char *name, const char *stop)
{
    char needle[80];
    snprintf(needle, sizeof(needle), "--%s", name);
    for (char *p = text; (p = strstr(p, needle)) != NULL; p++) {
        char *line = p;
        while (line > text && line[-1] != '\n')
            line--;
        char after = p[strlen(needle)];
        if (strncmp(line, start_prefix, strlen(start_prefix)) != 0 ||
            (after >= 'a' && after <= 'z') || after == '-')
            continue;
        char *end = strstr(p, stop);
        size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
        char *out = malloc(len + 1);
        assert_non_null(out);
        memcpy(out, line, len);
        out[len] = '\0';
        return out;
    }
    return NULL;
}

static void docs_give_the_tools_defaults(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        uint64_t ms;
    } defaults[] = {{"ttl", CLI_DEFAULT_TTL_MS},
                    {"node-timeout", CLI_DEFAULT_NODE_TIMEOUT_MS},
                    {"grace", CLI_DEFAULT_GRACE_MS},
                    {"wait", 0}};
    char *h = help_text();
    char *scd = read_doc("redlock.1.scd");
    char *cli = read_doc("cli.md");
    for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++) {
        char text[32], want[64];
        if (defaults[i].ms == 0)
            snprintf(text, sizeof(text), "0");
        else
            cli_format_duration(defaults[i].ms, text, sizeof(text));
        char *e = entry_of(h, "  -", defaults[i].name, "\n  -");
        snprintf(want, sizeof(want), "(default %s", text);
        if (e == NULL || strstr(e, want) == NULL)
            fail_msg("--help's --%s does not say \"%s\"", defaults[i].name, want);
        free(e);
        e = entry_of(scd, "*-", defaults[i].name, "\n\n");
        snprintf(want, sizeof(want), "(default *%s*", text);
        if (e == NULL || strstr(e, want) == NULL)
            fail_msg("the man page's --%s does not say \"%s\"", defaults[i].name, want);
        free(e);
        e = entry_of(cli, "| `-", defaults[i].name, "\n");
        snprintf(want, sizeof(want), "| `%s` |", text);
        if (e == NULL || strstr(e, want) == NULL)
            fail_msg("docs/cli.md's --%s row does not give the default `%s`", defaults[i].name,
                     text);
        free(e);
    }
    free(h);
    free(scd);
    free(cli);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(durations_accepted),
        cmocka_unit_test(durations_refused),
        cmocka_unit_test(durations_formatted),
        cmocka_unit_test(command_line_parsed),
        cmocka_unit_test(command_line_refused),
        cmocka_unit_test(json_option_parsed),
        cmocka_unit_test(json_strings_escaped),
        cmocka_unit_test(json_every_byte_round_trips),
        cmocka_unit_test(json_document_shape),
        cmocka_unit_test(node_lines_parsed),
        cmocka_unit_test(check_command_parsed),
        cmocka_unit_test(docs_list_every_option),
        cmocka_unit_test(docs_list_every_variable_and_scheme),
        cmocka_unit_test(docs_list_every_exit_status),
        cmocka_unit_test(docs_give_the_tools_defaults),
    };
    return cmocka_run_group_tests_name("cli-args", tests, NULL, NULL);
}
