/* SPDX-License-Identifier: MIT */
/* test_url.c - node URLs: what parses into what, what is refused and how it is explained, that
 * no password ever shows in redacted text or in a message, and which URLs name the same node. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

#include "cluster_allow.h"
#include "redlock.h"
#include "url.h"

#define ERR_LEN 512

/* NULL-safe string equality, reported with the case that failed. */
static void expect_str(const char *text, const char *field, const char *want, const char *got)
{
    if (want == NULL && got == NULL)
        return;
    if (want == NULL || got == NULL || strcmp(want, got) != 0)
        fail_msg("\"%.120s\": %s is \"%s\", expected \"%s\"", text, field, got ? got : "(null)",
                 want ? want : "(null)");
}

static void expect_int(const char *text, const char *field, long want, long got)
{
    if (want != got)
        fail_msg("\"%.120s\": %s is %ld, expected %ld", text, field, got, want);
}

static void expect_no_secret(const char *text, const char *where, const char *haystack,
                             const char *secret)
{
    if (secret != NULL && haystack != NULL && strstr(haystack, secret) != NULL)
        fail_msg("\"%.120s\": %s \"%s\" contains the password \"%s\"", text, where, haystack,
                 secret);
}

static void expect_zeroed(const char *text, const redlock_url *u)
{
    if (u->is_unix || u->host || u->port || u->path || u->user || u->password || u->db ||
        u->timeout_ms || u->redacted || u->tls)
        fail_msg("\"%.120s\": url not zeroed after failure", text);
}

/* ---- valid URLs ---------------------------------------------------------------------------- */

typedef struct valid_case {
    const char *text;
    bool is_unix;
    const char *host;
    int port;
    const char *path;
    const char *user;
    const char *password;
    int db;
    int timeout_ms;
    const char *redacted;
    const char *secret; /* the password as written in text; must not be in redacted */
} valid_case;

static const valid_case valid_cases[] = {
    {"redis://127.0.0.1:6380", false, "127.0.0.1", 6380, NULL, NULL, NULL, -1, -1,
     "redis://127.0.0.1:6380", NULL},
    {"redis://[::1]", false, "::1", 6379, NULL, NULL, NULL, -1, -1, "redis://[::1]", NULL},
    {"redis://[2001:db8::1]:7000", false, "2001:db8::1", 7000, NULL, NULL, NULL, -1, -1,
     "redis://[2001:db8::1]:7000", NULL},
    {"redis://[::ffff:10.1.2.3]:1", false, "::ffff:10.1.2.3", 1, NULL, NULL, NULL, -1, -1,
     "redis://[::ffff:10.1.2.3]:1", NULL},
    {"redis://redis-1.example.com/3", false, "redis-1.example.com", 6379, NULL, NULL, NULL, 3, -1,
     "redis://redis-1.example.com/3", NULL},
    {"redis://localhost", false, "localhost", 6379, NULL, NULL, NULL, -1, -1, "redis://localhost",
     NULL},
    {"redis://docker_redis_1:6379", false, "docker_redis_1", 6379, NULL, NULL, NULL, -1, -1,
     "redis://docker_redis_1:6379", NULL},
    {"redis://h:1/0?timeout_ms=250", false, "h", 1, NULL, NULL, NULL, 0, 250,
     "redis://h:1/0?timeout_ms=250", NULL},
    {"redis://h/?timeout_ms=3600000", false, "h", 6379, NULL, NULL, NULL, -1, 3600000,
     "redis://h/?timeout_ms=3600000", NULL},
    {"redis://h:65535/2147483647", false, "h", 65535, NULL, NULL, NULL, 2147483647, -1,
     "redis://h:65535/2147483647", NULL},
    {"redis://h:00080/007", false, "h", 80, NULL, NULL, NULL, 7, -1, "redis://h:00080/007", NULL},
    {"redis://alice:s3cret@db.local:6390/2", false, "db.local", 6390, NULL, "alice", "s3cret", 2,
     -1, "redis://alice:***@db.local:6390/2", "s3cret"},
    {"redis://:hunter2@10.0.0.1", false, "10.0.0.1", 6379, NULL, NULL, "hunter2", -1, -1,
     "redis://:***@10.0.0.1", "hunter2"},
    {"redis://bob:p%40ss%3Aw%2fd@h", false, "h", 6379, NULL, "bob", "p@ss:w/d", -1, -1,
     "redis://bob:***@h", "p%40ss%3Aw%2fd"},
    {"redis://b%6Fb:x%25y@[::1]:6379/1?timeout_ms=5", false, "::1", 6379, NULL, "bob", "x%y", 1, 5,
     "redis://b%6Fb:***@[::1]:6379/1?timeout_ms=5", "x%25y"},
    {"redis://:sl/sh?qu#ha@h:1", false, "h", 1, NULL, NULL, "sl/sh?qu#ha", -1, -1,
     "redis://:***@h:1", "sl/sh?qu#ha"},
    {"REDIS://Host.Example:6379", false, "Host.Example", 6379, NULL, NULL, NULL, -1, -1,
     "REDIS://Host.Example:6379", NULL},
    {"unix:///var/run/redis.sock", true, NULL, 0, "/var/run/redis.sock", NULL, NULL, -1, -1,
     "unix:///var/run/redis.sock", NULL},
    {"unix:///tmp/r.sock?db=5&timeout_ms=100", true, NULL, 0, "/tmp/r.sock", NULL, NULL, 5, 100,
     "unix:///tmp/r.sock?db=5&timeout_ms=100", NULL},
    {"UNIX:///tmp/r.sock?timeout_ms=9&db=0", true, NULL, 0, "/tmp/r.sock", NULL, NULL, 0, 9,
     "UNIX:///tmp/r.sock?timeout_ms=9&db=0", NULL},
    {"unix:///tmp/a@b.sock", true, NULL, 0, "/tmp/a@b.sock", NULL, NULL, -1, -1,
     "unix:///tmp/a@b.sock", NULL},
    {"unix://u:pw%20x@/tmp/r.sock?timeout_ms=7", true, NULL, 0, "/tmp/r.sock", "u", "pw x", -1, 7,
     "unix://u:***@/tmp/r.sock?timeout_ms=7", "pw%20x"},
    {"rediss://127.0.0.1:6380", false, "127.0.0.1", 6380, NULL, NULL, NULL, -1, -1,
     "rediss://127.0.0.1:6380", NULL},
    {"rediss://alice:s3cret@redis-1.example.com:6390/2?timeout_ms=40", false, "redis-1.example.com",
     6390, NULL, "alice", "s3cret", 2, 40,
     "rediss://alice:***@redis-1.example.com:6390/2?timeout_ms=40", "s3cret"},
    {"REDISS://:pw@[::1]", false, "::1", 6379, NULL, NULL, "pw", -1, -1, "REDISS://:***@[::1]",
     "pw"},
};

static void test_valid(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(valid_cases) / sizeof(valid_cases[0]); i++) {
        const valid_case *c = &valid_cases[i];
        redlock_url u;
        char err[ERR_LEN] = "not cleared";
        int rc = redlock_url_parse(&u, c->text, err, sizeof(err));
        if (rc != 0)
            fail_msg("\"%.120s\": rc %d: %s", c->text, rc, err);
        expect_str(c->text, "err", "", err);
        expect_int(c->text, "is_unix", c->is_unix, u.is_unix);
        expect_str(c->text, "host", c->host, u.host);
        expect_int(c->text, "port", c->port, u.port);
        expect_str(c->text, "path", c->path, u.path);
        expect_str(c->text, "user", c->user, u.user);
        expect_str(c->text, "password", c->password, u.password);
        expect_int(c->text, "db", c->db, u.db);
        expect_int(c->text, "timeout_ms", c->timeout_ms, u.timeout_ms);
        expect_int(c->text, "tls", strncasecmp(c->text, "rediss://", 9) == 0, u.tls);
        expect_str(c->text, "redacted", c->redacted, u.redacted);
        expect_no_secret(c->text, "redacted", u.redacted, c->secret);
        expect_no_secret(c->text, "redacted", u.redacted, c->password);
        redlock_url_free(&u);
    }
}

/* The longest socket path that fits sun_path parses; one byte more does not. */
static void test_unix_path_length(void **state)
{
    (void)state;
    char text[8 + REDLOCK__URL_UNIX_PATH_MAX + 2];
    strcpy(text, "unix://");
    memset(text + 7, 'a', REDLOCK__URL_UNIX_PATH_MAX);
    text[7] = '/';
    text[7 + REDLOCK__URL_UNIX_PATH_MAX] = '\0';

    redlock_url u;
    char err[ERR_LEN];
    assert_int_equal(redlock_url_parse(&u, text, err, sizeof(err)), 0);
    assert_int_equal(strlen(u.path), REDLOCK__URL_UNIX_PATH_MAX);
    redlock_url_free(&u);

    strcat(text, "a");
    assert_int_equal(redlock_url_parse(&u, text, err, sizeof(err)), REDLOCK_EURL);
    assert_non_null(strstr(err, "too long"));
    expect_zeroed(text, &u);
}

/* ---- invalid URLs -------------------------------------------------------------------------- */

typedef struct invalid_case {
    const char *text;
    const char *keyword; /* must appear in the message */
    const char *secret;  /* must not appear in the message (nor in the redacted text) */
} invalid_case;

static const invalid_case invalid_cases[] = {
    {"", "empty URL", NULL},
    {"localhost:6379", "missing scheme", NULL},
    {"redis:/h", "missing scheme", NULL},
    {":pw0@h:6379", "missing scheme", "pw0"},
    {"http://h", "unsupported scheme \"http\"", NULL},
    {"rediss://:pw1@", "empty host", "pw1"},
    {"rediss:///tmp/r.sock", "empty host", NULL},
    {"rediss://:pw8@h:0", "invalid port \"0\"", "pw8"},
    {"redisss://h",
     "unsupported scheme \"redisss\" (expected redis://, rediss://, unix://, cluster:// or "
     "clusters://)",
     NULL},
    {"cluster://h/1", "a cluster has no db", NULL},
    {"cluster://h?db=1", "a cluster has no db", NULL},
    {"cluster://h?seed=", "empty seed", NULL},
    {"cluster://h?seed=h2:0", "invalid port \"0\"", NULL},
    {"cluster://h?seed=h2:1/x", "invalid port \"1/x\"", NULL},
    {"cluster://h?seed=[::1", "unclosed '['", NULL},
    {"cluster://h?allow=", "invalid allow \"\"", NULL},
    {"cluster://h?allow=10.0.0.0/33", "invalid allow \"10.0.0.0/33\"", NULL},
    {"cluster://h?allow=::1/129", "invalid allow", NULL},
    {"cluster://h?allow=10.0.0.0/", "invalid allow", NULL},
    {"cluster://h?allow=name/8", "invalid allow", NULL},
    {"cluster://h?allow=bad_host-", "invalid host name", NULL},
    {"redis://h?allow=10.0.0.1", "unknown query parameter \"allow\"", NULL},
    {"cluster://:pw9@h?seed=bad_host-", "invalid host name", "pw9"},
    {"cluster://h?wait_replicas=65", "invalid wait_replicas \"65\"", NULL},
    {"cluster://h?wait_replicas=1&wait_replicas=1", "duplicate query parameter", NULL},
    {"redis://h?seed=h2", "unknown query parameter \"seed\"", NULL},
    {"redis://h?wait_replicas=1", "unknown query parameter \"wait_replicas\"", NULL},
    {"redis://", "empty host", NULL},
    {"redis://:pw2@", "empty host", "pw2"},
    {"redis://:6379", "empty host", NULL},
    {"redis://256.1.1.1", "invalid IPv4 address \"256.1.1.1\"", NULL},
    {"redis://1.2.3", "invalid IPv4", NULL},
    {"redis://:s3cr/t?x#y@256.0.0.1", "invalid IPv4", "s3cr/t?x#y"},
    {"redis://[::1", "unclosed '['", NULL},
    {"redis://[::1]x", "after IPv6", NULL},
    {"redis://[::g]", "invalid IPv6", NULL},
    {"redis://[]", "empty host", NULL},
    {"redis://[fe80::1%25eth0]:6379", "zone", NULL},
    {"redis://-h", "'-'", NULL},
    {"redis://a..b", "1..63", NULL},
    {"redis://a.b.", "1..63", NULL},
    {"redis://h$x", "invalid character in host", NULL},
    {"redis://h:0", "invalid port, not shown", "h:0"},
    {"redis://h:65536", "invalid port, not shown", "65536"},
    {"redis://h:abc", "invalid port, not shown", "abc"},
    {"redis://h:-1", "invalid port", NULL},
    {"redis://h:+1", "invalid port", NULL},
    {"redis://h:99999999999", "invalid port", NULL},
    {"redis://h:", "empty port", NULL},
    {"redis://h:/0", "empty port", NULL},
    {"redis://:pw3@h:70000", "invalid port \"70000\" (expected 1..65535) in redis://:***@h:70000",
     "pw3"},
    {"redis://h:6379x", "invalid port, not shown", "6379x"},
    /* A password that lost its "@host" reads as a port: never shown, nor what follows it. */
    {"redis://user:secret", "invalid port, not shown", "secret"},
    {"redis://u:secret,x", "invalid port, not shown", "secret"},
    {"redis://user:s/cr?t", "invalid port, not shown", "s/cr?t"},
    {"rediss://user:99999", "invalid port, not shown", "99999"},
    {"redis://:hunter2", "empty host", "hunter2"},
    {"redis://[::1]:s3kr1t", "invalid port, not shown", "s3kr1t"},
    {"user:secret", "missing scheme", "secret"},
    {"unix://user:secret/tmp/s.sock", "absolute", "secret"},
    {"cluster://u:p4ss?seed=h:1", "invalid port, not shown", "p4ss"},
    {"redis://h/-1", "invalid db \"-1\"", NULL},
    {"redis://h/abc", "invalid db \"abc\"", NULL},
    {"redis://h/2147483648", "invalid db \"2147483648\"", NULL},
    {"redis://h:6379/0/x", "invalid db \"0/x\"", NULL},
    {"redis://h?timeout_ms=0", "invalid timeout_ms \"0\"", NULL},
    {"redis://h?timeout_ms=abc", "invalid timeout_ms \"abc\"", NULL},
    {"redis://h?timeout_ms=3600001", "invalid timeout_ms", NULL},
    {"redis://h?timeout_ms=", "invalid timeout_ms \"\"", NULL},
    {"redis://h?foo=1", "unknown query parameter \"foo\"", NULL},
    {"redis://:pw4@h?foo=1", "unknown query parameter \"foo\"", "pw4"},
    {"redis://h?db=1", "unknown query parameter \"db\"", NULL},
    {"redis://h?timeout_ms=1&timeout_ms=2", "duplicate query parameter \"timeout_ms\"", NULL},
    {"redis://h?", "empty query", NULL},
    {"redis://h?timeout_ms=1&", "empty query parameter", NULL},
    {"redis://h?timeout_ms", "has no value", NULL},
    {"redis://h#frag", "'#'", NULL},
    {"unix:///s.sock?db=1&db=2", "duplicate query parameter \"db\"", NULL},
    {"unix:///s.sock?db=x", "invalid db \"x\"", NULL},
    {"unix:///s.sock?db=-1", "invalid db", NULL},
    {"unix:///s.sock?timeout_ms=0", "invalid timeout_ms", NULL},
    {"unix:///s.sock?bar=1", "unknown query parameter \"bar\"", NULL},
    {"unix://tmp/r.sock", "absolute", NULL},
    {"unix://", "absolute", NULL},
    {"unix://?db=1", "absolute", NULL},
    {"unix:///", "directory", NULL},
    {"unix:///tmp/", "directory", NULL},
    {"unix://:pw5@tmp/r.sock", "absolute", "pw5"},
    {"redis://:bad%zzpass@h", "invalid percent escape in password", "bad%zzpass"},
    {"redis://:abc%4@h", "invalid percent escape in password", "abc%4"},
    {"redis://:abc%@h", "invalid percent escape in password", "abc%"},
    {"redis://:x%00y@h", "%00", "x%00y"},
    {"redis://b%zzob:pw6@h", "invalid percent escape in user", "pw6"},
    {"redis://alice@h", "user without password", "alice"},
    {"redis://@h", "empty userinfo", NULL},
    {"redis://alice:@h", "empty password", NULL},
    {"redis://:p@ss@h", "unencoded '@' in password", "p@ss"},
    {"redis://:a@b/c@h", "unencoded '@' in password", "a@b/c"},
    {"unix://:q@rs@/tmp/s.sock", "unencoded '@' in password", "q@rs"},
    {"redis://h:6379 ", "unexpected space at offset 14", NULL},
    {"redis://h :6379", "unexpected space at offset 9", NULL},
    {" redis://h", "unexpected space at offset 0", NULL},
    {"redis://:pw7@h :1", "unexpected space at offset 14", "pw7"},
    {"redis://:pass word@h", "in the password", "pass word"},
    {"redis://:pass\tword@h", "in the password", "pass\tword"},
    {"redis://h\n", "control character 0x0a", NULL},
    {"redis://h\t", "unexpected tab", NULL},
};

static void check_invalid(const char *text, const char *keyword, const char *secret)
{
    redlock_url u;
    memset(&u, 0xa5, sizeof(u)); /* garbage in: the parser must not read it */
    char err[ERR_LEN] = "";
    int rc = redlock_url_parse(&u, text, err, sizeof(err));
    if (rc != REDLOCK_EURL)
        fail_msg("\"%.120s\": rc %d, expected REDLOCK_EURL (%s)", text, rc, err);
    if (strstr(err, keyword) == NULL)
        fail_msg("\"%.120s\": message \"%s\" lacks \"%s\"", text, err, keyword);
    expect_no_secret(text, "message", err, secret);
    expect_zeroed(text, &u);

    char redacted[ERR_LEN * 8];
    redlock_url_redact(text, redacted, sizeof(redacted));
    expect_no_secret(text, "redacted text", redacted, secret);
    /* The message says where: it ends with the redacted URL (unless cut at ERR_LEN). */
    char where[ERR_LEN * 8 + 8];
    snprintf(where, sizeof(where), " in %s", redacted);
    size_t err_len = strlen(err), where_len = strlen(where);
    if (text[0] != '\0' && err_len + 1 < sizeof(err) &&
        (err_len < where_len || strcmp(err + err_len - where_len, where) != 0))
        fail_msg("\"%.120s\": message \"%s\" does not end with \"%s\"", text, err, where);
    redlock_url_free(&u); /* after a failure: harmless */
    expect_zeroed(text, &u);
}

static void test_invalid(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(invalid_cases) / sizeof(invalid_cases[0]); i++)
        check_invalid(invalid_cases[i].text, invalid_cases[i].keyword, invalid_cases[i].secret);
}

static void test_too_long(void **state)
{
    (void)state;
    char text[2048 + 1];
    strcpy(text, "redis://:");
    memset(text + 9, 'x', sizeof(text) - 9);
    text[2048 - 2] = '@';
    text[2048 - 1] = 'h';
    text[2048] = '\0';
    check_invalid(text, "URL too long (2048 bytes, at most 1024)", "xxxxxxxx");

    /* A host name over 253 bytes, and a label over 63, inside the length limit. */
    char host[300];
    strcpy(host, "redis://");
    for (size_t i = 0; i < 254; i++)
        host[8 + i] = (i % 60 == 59) ? '.' : 'a';
    host[8 + 254] = '\0';
    check_invalid(host, "host name too long (254 bytes", NULL);
    strcpy(host, "redis://");
    memset(host + 8, 'b', 64);
    host[8 + 64] = '\0';
    check_invalid(host, "1..63", NULL);
    host[8 + 63] = '\0'; /* 63 is fine */
    redlock_url u;
    assert_int_equal(redlock_url_parse(&u, host, NULL, 0), 0);
    redlock_url_free(&u);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    redlock_url u;
    char err[ERR_LEN] = "";
    assert_int_equal(redlock_url_parse(NULL, "redis://h", err, sizeof(err)), REDLOCK_EINVAL);
    assert_non_null(strstr(err, "url is NULL"));
    memset(&u, 0xa5, sizeof(u));
    assert_int_equal(redlock_url_parse(&u, NULL, err, sizeof(err)), REDLOCK_EINVAL);
    assert_non_null(strstr(err, "text is NULL"));
    expect_zeroed("(null)", &u);
    /* No err buffer, or a tiny one: still the right code, never an overflow. */
    assert_int_equal(redlock_url_parse(&u, "redis://h:0", NULL, 0), REDLOCK_EURL);
    char tiny[8];
    assert_int_equal(redlock_url_parse(&u, "redis://:pw@h:0", tiny, sizeof(tiny)), REDLOCK_EURL);
    assert_string_equal(tiny, "inva...");
}

/* ---- redaction ----------------------------------------------------------------------------- */

static const struct {
    const char *text;
    const char *redacted;
} redact_cases[] = {
    {"redis://:pw@h", "redis://:***@h"},
    {"redis://u:pw@h:1/2?timeout_ms=3", "redis://u:***@h:1/2?timeout_ms=3"},
    {"redis://pw@h", "redis://***@h"},
    {"redis://:@h", "redis://:***@h"},
    {"redis://:a/b@h", "redis://:***@h"},
    {"redis://:a?b@h", "redis://:***@h"},
    {"redis://:a#b@h", "redis://:***@h"},
    {"redis://:a@b@h", "redis://:***@h"},
    {"redis://:a%40b@h", "redis://:***@h"},
    {"redis://u:a:b@h", "redis://u:***@h"},
    {"redis://u:a/b?c#d@e@[::1]:7/0", "redis://u:***@[::1]:7/0"},
    {"rediss://:pw@h", "rediss://:***@h"},
    {"garbage+x://x:y@z", "garbage+x://x:***@z"},
    {"unix://:pw@/tmp/s.sock", "unix://:***@/tmp/s.sock"},
    /* unix: an '@' in the socket path is not userinfo, as the parser reads it (userinfo ends at
     * the last "@/", and there is none when the path follows "unix://" directly) ... */
    {"unix:///tmp/re@host.sock", "unix:///tmp/re@host.sock"},
    {"UNIX:///tmp/a@b@c.sock", "UNIX:///tmp/a@b@c.sock"},
    {"unix://:pw@/tmp/a@b.sock", "unix://:***@/tmp/a@b.sock"},
    {"unix://:p@/w@/tmp/s.sock", "unix://:***@/tmp/s.sock"},
    /* ... and text with an '@' but no "@/" (it cannot parse) is hidden up to its last '@'. */
    {"unix://:pw@tmp/s.sock", "unix://:***@tmp/s.sock"},
    {":pw@h", ":***@h"},
    {":pa://ss@h", ":***@h"},
    {"pw@h", "***@h"},
    {"redis://h:6379/0", "redis://h:6379/0"},
    /* No userinfo, and what follows the host's ':' is no port: a password that lost its '@'. */
    {"redis://user:secret", "redis://user:***"},
    {"redis://user:s/cr?t#x", "redis://user:***"},
    {"redis://[::1]:p", "redis://[::1]:***"},
    {"redis://h:0", "redis://h:***"},
    {"user:secret", "user:***"},
    {"unix://u:secret/tmp/s.sock", "unix://u:***"},
    {"redis://h:6379?timeout_ms=1", "redis://h:6379?timeout_ms=1"},
    {"redis://h:/0", "redis://h:/0"},
    {"unix:///tmp/s.sock", "unix:///tmp/s.sock"},
    {"not a url", "not a url"},
    {"", ""},
};

static void test_redact(void **state)
{
    (void)state;
    char out[256];
    for (size_t i = 0; i < sizeof(redact_cases) / sizeof(redact_cases[0]); i++) {
        const char *text = redact_cases[i].text;
        size_t n = redlock_url_redact(text, out, sizeof(out));
        expect_str(text, "redacted", redact_cases[i].redacted, out);
        expect_int(text, "length", (long)strlen(redact_cases[i].redacted), (long)n);
        expect_int(text, "length without buffer", (long)n, (long)redlock_url_redact(text, NULL, 0));
    }
}

/* Every password in the valid and invalid tables is hidden by redlock_url_redact too. */
static void test_redact_tables(void **state)
{
    (void)state;
    char out[256];
    for (size_t i = 0; i < sizeof(valid_cases) / sizeof(valid_cases[0]); i++) {
        redlock_url_redact(valid_cases[i].text, out, sizeof(out));
        expect_no_secret(valid_cases[i].text, "redacted", out, valid_cases[i].secret);
        if (valid_cases[i].secret != NULL && strstr(out, "***") == NULL)
            fail_msg("\"%.120s\": nothing redacted", valid_cases[i].text);
    }
    for (size_t i = 0; i < sizeof(invalid_cases) / sizeof(invalid_cases[0]); i++) {
        redlock_url_redact(invalid_cases[i].text, out, sizeof(out));
        expect_no_secret(invalid_cases[i].text, "redacted", out, invalid_cases[i].secret);
    }
}

static void test_redact_truncation(void **state)
{
    (void)state;
    char out[8];
    memset(out, 'z', sizeof(out));
    assert_int_equal(redlock_url_redact("redis://:pw@h", out, 5), strlen("redis://:***@h"));
    assert_string_equal(out, "redi");
    assert_int_equal(out[5], 'z'); /* nothing written past out_len */
    /* Cut inside the "***": the password is still not there. */
    assert_int_equal(redlock_url_redact("redis://:pw@h", out, sizeof(out)), 14);
    assert_string_equal(out, "redis:/");
    out[0] = 'q';
    assert_int_equal(redlock_url_redact("redis://:pw@h", out, 0), 14);
    assert_int_equal(out[0], 'q');
    assert_int_equal(redlock_url_redact(NULL, out, sizeof(out)), 0);
    assert_string_equal(out, "");
    char big[32];
    assert_int_equal(redlock_url_redact("redis://:secretpw@h", big, 13), 14);
    assert_string_equal(big, "redis://:***");
}

/* ---- same node, endpoint, free ------------------------------------------------------------- */

static const struct {
    const char *a, *b;
    int same;
} same_cases[] = {
    {"redis://[::1]", "redis://[0:0::1]", 1},
    {"redis://[::1]:6379", "redis://[::1]:6380", 0},
    {"redis://[2001:db8::1]:7000", "redis://[2001:DB8:0::1]:7000", 1},
    {"redis://[2001:db8::1]:7000", "redis://[2001:db8::2]:7000", 0},
    {"redis://Host.Example", "redis://host.example:6379", 1},
    {"redis://host.example:1", "redis://host.example:2", 0},
    {"redis://a", "redis://b", 0},
    {"redis://h/1", "redis://h/2", 1},
    {"redis://h?timeout_ms=1", "redis://h:6379/0?timeout_ms=2", 1},
    {"redis://:a@h", "redis://u:b@h", 1},
    {"redis://10.0.0.1", "redis://10.0.0.2", 0},
    {"redis://10.0.0.1:7000", "redis://10.0.0.1:7000/3", 1},
    {"redis://127.0.0.1", "redis://localhost", 0},
    {"redis://127.0.0.1", "redis://[::ffff:127.0.0.1]", 1},
    {"redis://127.0.0.1", "redis://[::1]", 0},
    {"unix:///tmp/a.sock", "unix:///tmp/a.sock?db=3", 1},
    {"unix:///tmp/a.sock", "unix:///tmp/b.sock", 0},
    {"unix:///tmp/a.sock", "unix:///tmp/A.sock", 0},
    {"unix:///tmp/a.sock", "redis://127.0.0.1", 0},
    /* One server behind its plain and its TLS port is two ports: two nodes. The same port
     * under both schemes is one server. */
    {"rediss://10.0.0.1:6379", "redis://10.0.0.1:6379", 1},
    {"rediss://10.0.0.1:6380", "redis://10.0.0.1:6379", 0},
};

static void test_same_node(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(same_cases) / sizeof(same_cases[0]); i++) {
        redlock_url a, b;
        char err[ERR_LEN];
        if (redlock_url_parse(&a, same_cases[i].a, err, sizeof(err)) != 0 ||
            redlock_url_parse(&b, same_cases[i].b, err, sizeof(err)) != 0)
            fail_msg("parse: %s", err);
        if (redlock__url_same_node(&a, &b) != same_cases[i].same ||
            redlock__url_same_node(&b, &a) != same_cases[i].same)
            fail_msg("same_node(\"%s\", \"%s\") != %d", same_cases[i].a, same_cases[i].b,
                     same_cases[i].same);
        assert_int_equal(redlock__url_same_node(&a, &a), 1);
        assert_int_equal(redlock__url_same_node(&a, NULL), 0);
        redlock_url_free(&a);
        redlock_url_free(&b);
    }
}

static void test_endpoint(void **state)
{
    (void)state;
    static const struct {
        const char *text, *endpoint;
    } cases[] = {
        {"redis://:pw@h:1/2?timeout_ms=3", "h:1"},
        {"redis://u:pw@10.0.0.1", "10.0.0.1:6379"},
        {"redis://[::1]", "[::1]:6379"},
        {"redis://[2001:db8::1]:7000/1", "[2001:db8::1]:7000"},
        {"unix://:pw@/tmp/r.sock?db=1", "/tmp/r.sock"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        redlock_url u;
        char out[64];
        assert_int_equal(redlock_url_parse(&u, cases[i].text, NULL, 0), 0);
        size_t n = redlock__url_endpoint(&u, out, sizeof(out));
        expect_str(cases[i].text, "endpoint", cases[i].endpoint, out);
        expect_int(cases[i].text, "length", (long)strlen(cases[i].endpoint), (long)n);
        expect_no_secret(cases[i].text, "endpoint", out, "pw");
        redlock_url_free(&u);
    }
    redlock_url u;
    char out[4];
    assert_int_equal(redlock_url_parse(&u, "redis://host:6379", NULL, 0), 0);
    assert_int_equal(redlock__url_endpoint(&u, out, sizeof(out)), 9);
    assert_string_equal(out, "hos");
    redlock_url_free(&u);
}

/* cluster:// and clusters://: the first seed is host:port, the others come in order from
 * repeated seed= parameters (IPv6 in brackets, 6379 by default), each a string of its own. */
/* allow=: which hosts a cluster URL lets the client connect to (cluster_allow.h). */
static void test_cluster_allow(void **state)
{
    (void)state;
    redlock_url u;
    char err[ERR_LEN];
    /* None: any host, the default. */
    assert_int_equal(redlock_url_parse(&u, "cluster://:pw@10.0.0.1:7000", err, sizeof(err)), 0);
    assert_true(redlock__cluster_allow_has(&u, "203.0.113.9"));
    assert_true(redlock__cluster_allow_has(&u, "evil.example"));
    redlock_url_free(&u);

    /* The password may hold what looks like a query: only the real one counts. */
    assert_int_equal(redlock_url_parse(&u,
                                       "cluster://u:p?allow=0.0.0.0/0@Redis-1.Example:7000?seed="
                                       "10.0.0.2:7001&allow=10.1.0.0/16&allow=192.0.2.7&allow=["
                                       "fd00::]/8&allow=node-9.example",
                                       err, sizeof(err)),
                     0);
    static const struct {
        const char *host;
        bool allowed;
    } cases[] = {
        {"redis-1.example", true}, /* the URL's own host */
        {"10.0.0.2", true},        /* a seed's */
        {"10.1.255.255", true},
        {"10.2.0.1", false},
        {"192.0.2.7", true},
        {"192.0.2.8", false},
        {"fd12::1", true},
        {"fe80::1", false},
        {"::ffff:10.1.0.9", true},
        {"NODE-9.example", true},
        {"node-9.example.evil", false}, /* names are whole */
        {"10.1.0.1.evil", false},
        {"203.0.113.9", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (redlock__cluster_allow_has(&u, cases[i].host) != cases[i].allowed)
            fail_msg("%s: allowed should be %d", cases[i].host, cases[i].allowed);
    redlock_url_free(&u);
    /* Names are not resolved: a name matches no address, an address no name. */
    assert_int_equal(redlock_url_parse(&u, "cluster://localhost?allow=127.0.0.2", err, sizeof(err)),
                     0);
    assert_true(redlock__cluster_allow_has(&u, "LOCALHOST"));
    assert_false(redlock__cluster_allow_has(&u, "127.0.0.1"));
    assert_true(redlock__cluster_allow_has(&u, "127.0.0.2"));
    redlock_url_free(&u);
}

static void test_cluster(void **state)
{
    (void)state;
    redlock_url u;
    char err[ERR_LEN];
    assert_int_equal(redlock_url_parse(&u,
                                       "cluster://:pw@10.0.0.1:7000?timeout_ms=50&seed=10.0.0.2:"
                                       "7001&seed=[::1]:7002&seed=redis-3.example&wait_replicas=1",
                                       err, sizeof(err)),
                     0);
    assert_true(u.cluster);
    assert_false(u.tls);
    assert_string_equal(u.host, "10.0.0.1");
    assert_int_equal(u.port, 7000);
    assert_int_equal(u.timeout_ms, 50);
    assert_int_equal(u.db, -1);
    assert_int_equal(u.wait_replicas, 1);
    assert_string_equal(u.password, "pw");
    assert_non_null(u.seeds);
    assert_string_equal(u.seeds[0].host, "10.0.0.2");
    assert_int_equal(u.seeds[0].port, 7001);
    assert_string_equal(u.seeds[1].host, "::1");
    assert_int_equal(u.seeds[1].port, 7002);
    assert_string_equal(u.seeds[2].host, "redis-3.example");
    assert_int_equal(u.seeds[2].port, 6379);
    assert_null(u.seeds[3].host);
    assert_non_null(strstr(u.redacted, ":***@"));
    redlock_url_free(&u);
    expect_zeroed("cluster after free", &u);

    assert_int_equal(redlock_url_parse(&u, "CLUSTERS://h", err, sizeof(err)), 0);
    assert_true(u.cluster);
    assert_true(u.tls);
    assert_null(u.seeds);
    assert_int_equal(u.wait_replicas, 0);
    assert_int_equal(u.port, 6379);
    redlock_url_free(&u);
    assert_int_equal(redlock_url_parse(&u, "cluster://h/", err, sizeof(err)), 0); /* no db */
    redlock_url_free(&u);
    assert_int_equal(redlock_url_parse(&u, "redis://h:1", err, sizeof(err)), 0);
    assert_false(u.cluster);
    assert_null(u.seeds);
    redlock_url_free(&u);
}

static void test_url_free(void **state)
{
    (void)state;
    redlock_url u;
    assert_int_equal(redlock_url_parse(&u, "redis://u:pw@h/1", NULL, 0), 0);
    redlock_url_free(&u);
    expect_zeroed("after free", &u);
    redlock_url_free(&u); /* twice */
    expect_zeroed("after second free", &u);
    redlock_url_free(NULL);
    redlock_url zero;
    memset(&zero, 0, sizeof(zero));
    redlock_url_free(&zero);
    expect_zeroed("zeroed struct", &zero);
    /* A struct reused for a second parse after free. */
    assert_int_equal(redlock_url_parse(&u, "unix:///tmp/x.sock", NULL, 0), 0);
    assert_string_equal(u.path, "/tmp/x.sock");
    redlock_url_free(&u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),         cmocka_unit_test(test_unix_path_length),
        cmocka_unit_test(test_invalid),       cmocka_unit_test(test_too_long),
        cmocka_unit_test(test_bad_arguments), cmocka_unit_test(test_redact),
        cmocka_unit_test(test_redact_tables), cmocka_unit_test(test_redact_truncation),
        cmocka_unit_test(test_same_node),     cmocka_unit_test(test_endpoint),
        cmocka_unit_test(test_url_free),      cmocka_unit_test(test_cluster),
        cmocka_unit_test(test_cluster_allow),
    };
    return cmocka_run_group_tests_name("url", tests, NULL, NULL);
}
