/* SPDX-License-Identifier: MIT */
/* url.c - node URLs: parse, redact, compare.
 *
 *   redis://[[user]:password@]host[:port][/db][?timeout_ms=N]
 *   rediss://[[user]:password@]host[:port][/db][?timeout_ms=N]    (TLS)
 *   unix://[[user]:password@]/absolute/path.sock[?db=N&timeout_ms=N]
 *   cluster://[[user]:password@]host[:port][?timeout_ms=N&seed=host:port...&wait_replicas=N
 *                                            &allow=host|address[/prefix]...]
 *   clusters://...                                                (a Redis Cluster over TLS)
 *
 * The one rule that matters most: a password never leaves this file except in url->password.
 * Every message quotes the input through redlock_url_redact(), and the pieces of the input that
 * messages quote (scheme, host, port, db, query) all lie outside the span that redaction hides.
 * Parsing splits userinfo off where redaction ends it (userinfo_end), so the two cannot disagree
 * about where a password stops. */
#include "url.h"

#include "cluster_allow.h"
#include "common.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h> /* uv_inet_pton: portable, and strict (no "1.2.3" or leading zeros) */

typedef struct span {
    const char *s;
    size_t n;
} span;

/* One parse: the input, the input redacted for messages, and where messages go. */
typedef struct parser {
    const char *text;
    const char *redacted;
    char *err;
    size_t err_len;
    size_t pw_start, pw_end; /* offsets of the raw password in text, valid when has_password */
    int has_password;
    bool userinfo; /* the text has userinfo: what follows the host's ':' is no password */
} parser;

/* ---- small helpers ------------------------------------------------------------------------ */

static int is_alpha(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static int to_lower(int c)
{
    return (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c;
}

/* ASCII case-insensitive comparison, independent of the locale. */
static int equal_nocase(const char *a, size_t a_len, const char *b)
{
    size_t b_len = strlen(b);
    if (a_len != b_len)
        return 0;
    for (size_t i = 0; i < a_len; i++)
        if (to_lower((unsigned char)a[i]) != to_lower((unsigned char)b[i]))
            return 0;
    return 1;
}

static int span_is(span s, const char *word)
{
    return s.n == strlen(word) && memcmp(s.s, word, s.n) == 0;
}

static char *dup_span(span s)
{
    char *copy = malloc(s.n + 1);
    if (copy != NULL) {
        memcpy(copy, s.s, s.n);
        copy[s.n] = '\0';
    }
    return copy;
}

/* Length of a leading "scheme://" (RFC 3986 scheme characters), or 0 when text has none. */
static size_t scheme_prefix_len(const char *text)
{
    size_t i = 0;
    if (!is_alpha((unsigned char)text[0]))
        return 0;
    while (is_alpha((unsigned char)text[i]) || is_digit((unsigned char)text[i]) || text[i] == '+' ||
           text[i] == '-' || text[i] == '.')
        i++;
    return strncmp(text + i, "://", 3) == 0 ? i + 3 : 0;
}

/* Where the userinfo of text + authority ends: the '@' that parsing splits at, or NULL.
 *   - any scheme but unix (and no scheme at all): the LAST '@', which hides a password with
 *     unencoded '@', '/', '?' or '#' too;
 *   - unix: a socket path may hold an '@' itself, so there is no userinfo when the text after
 *     "unix://" starts with the path's '/', and otherwise it ends at the last "@/". Text that
 *     has an '@' but no "@/" cannot parse as a unix URL; it is redacted up to its last '@' anyway
 *     (over-redaction never leaks), so its error message cannot quote a password either.
 * Parsing and redlock_url_redact both call this, so they cannot disagree about where a
 * password stops. */
static const char *userinfo_end(const char *text, size_t authority)
{
    const char *rest = text + authority;
    bool is_unix = authority == 7 && equal_nocase(text, 4, "unix");
    if (!is_unix)
        return strrchr(rest, '@');
    if (rest[0] == '/')
        return NULL;
    const char *at = NULL;
    for (const char *s = strstr(rest, "@/"); s != NULL; s = strstr(s + 1, "@/"))
        at = s;
    return at != NULL ? at : strrchr(rest, '@');
}

static int parse_decimal(span s, long min, long max, int *out);

/* A password in text without userinfo: a URL that lost its "@host" ("redis://user:secret", or
 * "redis://u:secret,x@h" cut at a comma) reads as host "user" and port "secret". So what follows
 * the host's ':', when it is not a valid port, is hidden to the end of the text (a password may
 * hold '/' or '?'); for unix://, whatever follows a ':' of text that is no absolute path. */
static int stray_span(const char *text, size_t authority, size_t *start, size_t *end)
{
    const char *rest = text + authority;
    const char *colon;
    if (authority == 7 && equal_nocase(text, 4, "unix")) {
        if (rest[0] == '/' || (colon = strchr(rest, ':')) == NULL)
            return 0;
    } else {
        if (rest[0] == '[') {
            colon = strchr(rest, ']');
            colon = colon != NULL ? colon + 1 : NULL;
        } else {
            colon = rest + strcspn(rest, ":/?");
        }
        if (colon == NULL || *colon != ':')
            return 0;
        size_t n = 0;
        while (colon[1 + n] > ' ' && colon[1 + n] != '/' && colon[1 + n] != '?')
            n++;
        int port;
        if (n == 0 || parse_decimal((span){colon + 1, n}, 1, 65535, &port) == 0)
            return 0;
    }
    *start = (size_t)(colon + 1 - text);
    *end = strlen(text);
    return 1;
}

/* The bytes redaction hides: the userinfo (see userinfo_end), from after its first ':' when
 * there is one (the user stays), else the whole of it (it may be a password given without ':').
 * Without userinfo, a password that lost its '@' (stray_span). Returns 0 when there is none. */
static int redact_span(const char *text, size_t *start, size_t *end)
{
    size_t authority = scheme_prefix_len(text);
    const char *at = userinfo_end(text, authority);
    if (at == NULL)
        return stray_span(text, authority, start, end);
    const char *colon = memchr(text + authority, ':', (size_t)(at - (text + authority)));
    *start = colon != NULL ? (size_t)(colon + 1 - text) : authority;
    *end = (size_t)(at - text);
    return 1;
}

/* ---- errors ------------------------------------------------------------------------------- */

#if defined(__GNUC__)
#define PRINTF_LIKE(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#define PRINTF_LIKE(fmt_index, first_arg)
#endif

/* Write "<what is wrong> in <redacted URL>" into the caller's err; returns REDLOCK_EURL. */
static int fail(const parser *p, const char *fmt, ...) PRINTF_LIKE(2, 3);

static int fail(const parser *p, const char *fmt, ...)
{
    if (p->err == NULL || p->err_len == 0)
        return REDLOCK_EURL;
    va_list ap;
    va_start(ap, fmt);
    redlock__vfmt(p->err, p->err_len, fmt, ap);
    va_end(ap);
    size_t n = strlen(p->err);
    if (n + 1 < p->err_len && p->redacted[0] != '\0')
        redlock__fmt(p->err + n, p->err_len - n, " in %s", p->redacted);
    return REDLOCK_EURL;
}

static void set_err(char *err, size_t err_len, const char *msg)
{
    if (err != NULL && err_len > 0)
        redlock__fmt(err, err_len, "%s", msg);
}

/* ---- pieces ------------------------------------------------------------------------------- */

/* Reject spaces and control characters anywhere. The offset given is into the redacted text
 * that the message shows, so it neither misleads nor measures the password. */
static int check_characters(const parser *p)
{
    for (size_t i = 0; p->text[i] != '\0'; i++) {
        unsigned char c = (unsigned char)p->text[i];
        if (c > 0x20 && c != 0x7f)
            continue;
        size_t start, end;
        int has_span = redact_span(p->text, &start, &end);
        if (has_span && i >= start && i < end)
            return fail(p, "space or control character in the password (percent-encode it)");
        size_t shown = has_span && i >= end ? i - (end - start) + 3 : i;
        if (c == ' ')
            return fail(p, "unexpected space at offset %zu", shown);
        if (c == '\t')
            return fail(p, "unexpected tab at offset %zu", shown);
        return fail(p, "unexpected control character 0x%02x at offset %zu", c, shown);
    }
    return 0;
}

/* Decimal digits only (no sign, no spaces), value in min..max. */
static int parse_decimal(span s, long min, long max, int *out)
{
    if (s.n == 0 || s.n > 10)
        return -1;
    long long value = 0;
    for (size_t i = 0; i < s.n; i++) {
        if (!is_digit((unsigned char)s.s[i]))
            return -1;
        value = value * 10 + (s.s[i] - '0');
    }
    if (value < min || value > max)
        return -1;
    *out = (int)value;
    return 0;
}

static int hex_value(int c)
{
    if (is_digit(c))
        return c - '0';
    c = to_lower(c);
    return (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
}

/* Percent-decode s into a new string. what names the field for messages; its content is never
 * quoted (it may be a password). */
static int decode_field(const parser *p, span s, const char *what, char **out)
{
    char *decoded = malloc(s.n + 1);
    if (decoded == NULL)
        return REDLOCK_ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < s.n; i++) {
        if (s.s[i] == '@') {
            free(decoded);
            return fail(p, "unencoded '@' in %s (write it as %%40)", what);
        }
        if (s.s[i] != '%') {
            decoded[n++] = s.s[i];
            continue;
        }
        int hi = i + 2 < s.n ? hex_value((unsigned char)s.s[i + 1]) : -1;
        int lo = i + 2 < s.n ? hex_value((unsigned char)s.s[i + 2]) : -1;
        if (hi < 0 || lo < 0) {
            free(decoded);
            return fail(p, "invalid percent escape in %s (expected %%XX with hex digits)", what);
        }
        if (hi == 0 && lo == 0) {
            free(decoded);
            return fail(p, "%%00 is not allowed in %s", what);
        }
        decoded[n++] = (char)(hi * 16 + lo);
        i += 2;
    }
    decoded[n] = '\0';
    *out = decoded;
    return 0;
}

/* userinfo is the text between "://" and the '@' that ends it: "user:password" or ":password". */
static int parse_userinfo(parser *p, redlock_url *url, span userinfo)
{
    const char *colon = memchr(userinfo.s, ':', userinfo.n);
    if (colon == NULL) {
        if (userinfo.n == 0)
            return fail(p, "empty userinfo before '@'");
        return fail(p, "user without password (write user:password@ or :password@)");
    }
    span user = {userinfo.s, (size_t)(colon - userinfo.s)};
    span password = {colon + 1, userinfo.n - user.n - 1};
    if (password.n == 0)
        return fail(p, "empty password (leave out \"user:@\" to connect without one)");
    p->has_password = 1;
    p->pw_start = (size_t)(password.s - p->text);
    p->pw_end = p->pw_start + password.n;
    int rc;
    if (user.n > 0 && (rc = decode_field(p, user, "user", &url->user)) != 0)
        return rc;
    return decode_field(p, password, "password", &url->password);
}

static int check_host_name(const parser *p, span host)
{
    if (host.n > 253)
        return fail(p, "host name too long (%zu bytes, at most 253)", host.n);
    int only_digits_and_dots = 1;
    size_t label_len = 0;
    for (size_t i = 0; i <= host.n; i++) {
        int c = i < host.n ? (unsigned char)host.s[i] : '.';
        if (c == '.') {
            if (label_len == 0 || label_len > 63)
                return fail(p, "invalid host name \"%.*s\" (labels must be 1..63 bytes)",
                            (int)host.n, host.s);
            if (host.s[i - 1] == '-' || host.s[i - label_len] == '-')
                return fail(p, "invalid host name \"%.*s\" (a label starts or ends with '-')",
                            (int)host.n, host.s);
            label_len = 0;
            continue;
        }
        if (!is_alpha(c) && !is_digit(c) && c != '-' && c != '_')
            return fail(p, "invalid character in host name \"%.*s\"", (int)host.n, host.s);
        if (!is_digit(c))
            only_digits_and_dots = 0;
        label_len++;
    }
    if (only_digits_and_dots) { /* "256.1.1.1" or "1.2.3" is a broken address, not a name */
        char buf[16];
        struct in_addr addr;
        if (host.n >= sizeof(buf))
            return fail(p, "invalid IPv4 address \"%.*s\"", (int)host.n, host.s);
        memcpy(buf, host.s, host.n);
        buf[host.n] = '\0';
        if (uv_inet_pton(AF_INET, buf, &addr) != 0)
            return fail(p, "invalid IPv4 address \"%.*s\"", (int)host.n, host.s);
    }
    return 0;
}

static int check_ipv6(const parser *p, span inner)
{
    if (inner.n == 0)
        return fail(p, "empty host");
    if (memchr(inner.s, '%', inner.n) != NULL)
        return fail(p, "IPv6 zone id in \"[%.*s]\" is not supported", (int)inner.n, inner.s);
    char buf[64];
    struct in6_addr addr;
    if (inner.n >= sizeof(buf))
        return fail(p, "invalid IPv6 address \"[%.*s]\"", (int)inner.n, inner.s);
    memcpy(buf, inner.s, inner.n);
    buf[inner.n] = '\0';
    if (uv_inet_pton(AF_INET6, buf, &addr) != 0)
        return fail(p, "invalid IPv6 address \"[%.*s]\"", (int)inner.n, inner.s);
    return 0;
}

static int add_seed(const parser *p, redlock_url *url, span value);

/* A cluster's allow=HOST|ADDRESS[/PREFIX] (cluster_allow.h), checked only: it is read again from
 * the redacted URL where it is used. */
static int check_allow(const parser *p, span value)
{
    redlock__allow a;
    if (value.n == 0 || redlock__cluster_allow_parse(value.s, value.n, &a) != 0)
        return fail(p,
                    "invalid allow \"%.*s\" (expected a host name, an address or "
                    "address/prefix)",
                    (int)value.n, value.s);
    return a.is_address ? 0 : check_host_name(p, (span){a.name, a.name_len});
}

/* "?k=v&k=v": timeout_ms everywhere, db only for unix (redis:// gives the db in the path), seed
 * and allow (repeated) only for a cluster. */
static int parse_query(const parser *p, redlock_url *url, span query)
{
    if (query.n == 0)
        return fail(p, "empty query after '?'");
    int seen_db = 0, seen_timeout = 0, seen_replicas = 0;
    const char *end = query.s + query.n;
    for (const char *cur = query.s; cur <= end;) {
        const char *amp = memchr(cur, '&', (size_t)(end - cur));
        span param = {cur, (size_t)((amp != NULL ? amp : end) - cur)};
        cur = (amp != NULL ? amp : end) + 1;
        if (param.n == 0)
            return fail(p, "empty query parameter");
        const char *eq = memchr(param.s, '=', param.n);
        if (eq == NULL)
            return fail(p, "query parameter \"%.*s\" has no value", (int)param.n, param.s);
        span key = {param.s, (size_t)(eq - param.s)};
        span value = {eq + 1, param.n - key.n - 1};
        if (span_is(key, "timeout_ms")) {
            if (seen_timeout++)
                return fail(p, "duplicate query parameter \"timeout_ms\"");
            if (parse_decimal(value, 1, REDLOCK__URL_TIMEOUT_MAX_MS, &url->timeout_ms) != 0)
                return fail(p, "invalid timeout_ms \"%.*s\" (expected 1..%d)", (int)value.n,
                            value.s, REDLOCK__URL_TIMEOUT_MAX_MS);
        } else if (span_is(key, "db") && url->is_unix) {
            if (seen_db++)
                return fail(p, "duplicate query parameter \"db\"");
            if (parse_decimal(value, 0, INT_MAX, &url->db) != 0)
                return fail(p, "invalid db \"%.*s\" (expected 0..%d)", (int)value.n, value.s,
                            INT_MAX);
        } else if (span_is(key, "db") && url->cluster) {
            return fail(p, "a cluster has no db (db 0 is its only one)");
        } else if (span_is(key, "db")) {
            return fail(p, "unknown query parameter \"db\" (give it as a path: redis://host/db)");
        } else if (span_is(key, "wait_replicas") && url->cluster) {
            if (seen_replicas++)
                return fail(p, "duplicate query parameter \"wait_replicas\"");
            if (parse_decimal(value, 0, REDLOCK__URL_REPLICAS_MAX, &url->wait_replicas) != 0)
                return fail(p, "invalid wait_replicas \"%.*s\" (expected 0..%d)", (int)value.n,
                            value.s, REDLOCK__URL_REPLICAS_MAX);
        } else if (span_is(key, "allow") && url->cluster) {
            int rc = check_allow(p, value);
            if (rc != 0)
                return rc;
        } else if (span_is(key, "seed") && url->cluster) {
            int rc = add_seed(p, url, value);
            if (rc != 0)
                return rc;
        } else {
            return fail(p, "unknown query parameter \"%.*s\"", (int)key.n, key.s);
        }
    }
    return 0;
}

/* host[:port] at the start of rest, up to the first byte of stop (or the end): the host into
 * *host, the port (6379 when not given) into *port, what follows into *after. */
static int parse_host_port(const parser *p, const char *rest, const char *stop, bool quote_port,
                           span *host_out, int *port, const char **after_out)
{
    span host;
    const char *after;
    if (rest[0] == '[') {
        const char *close = strchr(rest, ']');
        if (close == NULL)
            return fail(p, "unclosed '[' in host");
        host = (span){rest + 1, (size_t)(close - rest - 1)};
        after = close + 1;
        int rc = check_ipv6(p, host);
        if (rc != 0)
            return rc;
        if (*after != '\0' && *after != ':' && strchr(stop, *after) == NULL)
            return fail(p, "unexpected \"%s\" after IPv6 address", after);
    } else {
        char reject[8] = ":";
        strcat(reject, stop);
        host = (span){rest, strcspn(rest, reject)};
        after = rest + host.n;
        if (host.n == 0 && *after == ':')
            return fail(p, "empty host (IPv6 addresses go in brackets: redis://[::1]:6379)");
        if (host.n == 0)
            return fail(p, "empty host");
        int rc = check_host_name(p, host);
        if (rc != 0)
            return rc;
    }

    *port = REDLOCK__URL_DEFAULT_PORT;
    if (*after == ':') {
        span digits = {after + 1, strcspn(after + 1, stop)};
        after = digits.s + digits.n;
        if (digits.n == 0)
            return fail(p, "empty port after ':'");
        if (parse_decimal(digits, 1, 65535, port) != 0) {
            if (!quote_port) /* without userinfo, "redis://user:secret" lands here */
                return fail(p, "invalid port, not shown: it may be a password that lost its "
                               "'@' (expected 1..65535, or user:password@host)");
            return fail(p, "invalid port \"%.*s\" (expected 1..65535)", (int)digits.n, digits.s);
        }
    }
    *host_out = host;
    *after_out = after;
    return 0;
}

/* A cluster's seed=host:port (the value of one parameter), appended to url->seeds. */
static int add_seed(const parser *p, redlock_url *url, span value)
{
    if (value.n == 0)
        return fail(p, "empty seed (expected seed=host:port)");
    char text[REDLOCK__URL_MAX_LEN + 1];
    memcpy(text, value.s, value.n); /* value lies inside the URL, so it fits */
    text[value.n] = '\0';
    span host;
    int port;
    const char *after;
    int rc = parse_host_port(p, text, "", true, &host, &port, &after);
    if (rc != 0)
        return rc;
    if (*after != '\0')
        return fail(p, "unexpected \"%s\" in seed \"%s\"", after, text);
    size_t n = 0;
    while (url->seeds != NULL && url->seeds[n].host != NULL)
        n++;
    redlock_url_seed *seeds = realloc(url->seeds, (n + 2) * sizeof(seeds[0]));
    if (seeds == NULL)
        return REDLOCK_ENOMEM;
    url->seeds = seeds;
    seeds[n + 1] = (redlock_url_seed){NULL, 0};
    seeds[n] = (redlock_url_seed){dup_span(host), port};
    return seeds[n].host == NULL ? REDLOCK_ENOMEM : 0;
}

/* After the userinfo: host[:port][/db][?query]. */
static int parse_tcp_rest(const parser *p, redlock_url *url, const char *rest)
{
    span host;
    const char *after;
    int rc = parse_host_port(p, rest, "/?", p->userinfo, &host, &url->port, &after);
    if (rc != 0)
        return rc;
    if (*after == '/' && url->cluster && after[1] != '\0' && after[1] != '?')
        return fail(p, "a cluster has no db (db 0 is its only one): no path after the port");
    if (*after == '/') {
        span db = {after + 1, strcspn(after + 1, "?")};
        after = db.s + db.n;
        if (db.n > 0 && parse_decimal(db, 0, INT_MAX, &url->db) != 0)
            return fail(p, "invalid db \"%.*s\" (expected 0..%d)", (int)db.n, db.s, INT_MAX);
    }
    if (*after == '?') {
        rc = parse_query(p, url, (span){after + 1, strlen(after + 1)});
        if (rc != 0)
            return rc;
    }
    if ((url->host = dup_span(host)) == NULL)
        return REDLOCK_ENOMEM;
    return 0;
}

/* After the userinfo: /absolute/path[?query]. */
static int parse_unix_rest(const parser *p, redlock_url *url, const char *rest)
{
    span path = {rest, strcspn(rest, "?")};
    if (path.n == 0 || path.s[0] != '/')
        return fail(p, "unix socket path must be absolute (unix:///path/to.sock)");
    if (path.s[path.n - 1] == '/')
        return fail(p, "unix socket path must name a file, not a directory");
    if (path.n > REDLOCK__URL_UNIX_PATH_MAX)
        return fail(p, "unix socket path too long (%zu bytes, at most %d)", path.n,
                    REDLOCK__URL_UNIX_PATH_MAX);
    if (rest[path.n] == '?') {
        int rc = parse_query(p, url, (span){rest + path.n + 1, strlen(rest + path.n + 1)});
        if (rc != 0)
            return rc;
    }
    if ((url->path = dup_span(path)) == NULL)
        return REDLOCK_ENOMEM;
    return 0;
}

static int parse_url(parser *p, redlock_url *url)
{
    const char *text = p->text;
    size_t len = strlen(text);
    if (len == 0)
        return fail(p, "empty URL");
    if (len > REDLOCK__URL_MAX_LEN)
        return fail(p, "URL too long (%zu bytes, at most %d)", len, REDLOCK__URL_MAX_LEN);
    int rc = check_characters(p);
    if (rc != 0)
        return rc;

    size_t prefix = scheme_prefix_len(text);
    if (prefix == 0)
        return fail(p, "missing scheme (expected redis://host:port, rediss://host:port or "
                       "unix:///path)");
    span scheme = {text, prefix - 3};
    if (equal_nocase(scheme.s, scheme.n, "unix"))
        url->is_unix = true;
    else if (equal_nocase(scheme.s, scheme.n, "rediss"))
        url->tls = true;
    else if (equal_nocase(scheme.s, scheme.n, "cluster"))
        url->cluster = true;
    else if (equal_nocase(scheme.s, scheme.n, "clusters"))
        url->cluster = url->tls = true;
    else if (!equal_nocase(scheme.s, scheme.n, "redis"))
        return fail(p,
                    "unsupported scheme \"%.*s\" (expected redis://, rediss://, unix://, "
                    "cluster:// or clusters://)",
                    (int)scheme.n, scheme.s);

    /* Split the userinfo off where redact_span() ends it. */
    const char *rest = text + prefix;
    const char *at = userinfo_end(text, prefix);
    if (at != NULL) {
        if ((rc = parse_userinfo(p, url, (span){rest, (size_t)(at - rest)})) != 0)
            return rc;
        rest = at + 1;
        p->userinfo = true;
    }
    if (strchr(rest, '#') != NULL)
        return fail(p, "unexpected '#' (fragments are not allowed)");
    return url->is_unix ? parse_unix_rest(p, url, rest) : parse_tcp_rest(p, url, rest);
}

/* url->redacted for a URL that parsed: the password's place is known, so only it is replaced
 * (the same text redlock_url_redact gives; fuzz_url checks that they agree). */
static char *redacted_copy(const parser *p)
{
    size_t len = strlen(p->text);
    if (!p->has_password)
        return dup_span((span){p->text, len});
    size_t out_len = len - (p->pw_end - p->pw_start) + 3;
    char *out = malloc(out_len + 1);
    if (out == NULL)
        return NULL;
    memcpy(out, p->text, p->pw_start);
    memcpy(out + p->pw_start, "***", 3);
    memcpy(out + p->pw_start + 3, p->text + p->pw_end, len - p->pw_end + 1);
    return out;
}

/* ---- public ------------------------------------------------------------------------------- */

int redlock_url_parse(redlock_url *url, const char *text, char *err, size_t err_len)
{
    if (url == NULL || text == NULL) {
        set_err(err, err_len,
                url == NULL ? "redlock_url_parse: url is NULL" : "redlock_url_parse: text is NULL");
        if (url != NULL)
            memset(url, 0, sizeof(*url));
        return REDLOCK_EINVAL;
    }
    memset(url, 0, sizeof(*url));
    url->db = -1;
    url->timeout_ms = -1;

    size_t redacted_len = redlock_url_redact(text, NULL, 0);
    char *redacted = malloc(redacted_len + 1);
    if (redacted == NULL) {
        set_err(err, err_len, "out of memory");
        memset(url, 0, sizeof(*url));
        return REDLOCK_ENOMEM;
    }
    redlock_url_redact(text, redacted, redacted_len + 1);

    parser p = {.text = text, .redacted = redacted, .err = err, .err_len = err_len};
    int rc = parse_url(&p, url);
    if (rc == 0 && (url->redacted = redacted_copy(&p)) == NULL)
        rc = REDLOCK_ENOMEM;
    if (rc == REDLOCK_ENOMEM)
        set_err(err, err_len, "out of memory");
    free(redacted);
    if (rc != 0)
        redlock_url_free(url);
    else if (err != NULL && err_len > 0)
        err[0] = '\0';
    return rc;
}

void redlock_url_free(redlock_url *url)
{
    if (url == NULL)
        return;
    free(url->host);
    free(url->path);
    free(url->user);
    if (url->password != NULL) { /* do not leave the secret in freed memory; volatile so the
                                  * stores are not dropped as dead before free() */
        for (volatile char *c = url->password; *c != '\0'; c++)
            *c = '\0';
    }
    free(url->password);
    free(url->redacted);
    for (size_t i = 0; url->seeds != NULL && url->seeds[i].host != NULL; i++)
        free(url->seeds[i].host);
    free(url->seeds);
    memset(url, 0, sizeof(*url));
}

/* Appends to a bounded buffer, counting what does not fit, like snprintf. */
typedef struct writer {
    char *out;
    size_t cap;
    size_t len;
} writer;

static void write_bytes(writer *w, const char *s, size_t n)
{
    if (w->len < w->cap) {
        size_t room = w->cap - w->len;
        memcpy(w->out + w->len, s, n < room ? n : room);
    }
    w->len += n;
}

size_t redlock_url_redact(const char *text, char *out, size_t out_len)
{
    if (text == NULL)
        text = "";
    writer w = {out, out_len > 0 ? out_len - 1 : 0, 0};
    size_t start, end;
    if (redact_span(text, &start, &end)) {
        write_bytes(&w, text, start);
        write_bytes(&w, "***", 3);
        write_bytes(&w, text + end, strlen(text + end));
    } else {
        write_bytes(&w, text, strlen(text));
    }
    if (out != NULL && out_len > 0)
        out[w.len < w.cap ? w.len : w.cap] = '\0';
    return w.len;
}

/* ---- internal ----------------------------------------------------------------------------- */

/* The host as a 16-byte IPv6 address (IPv4 mapped to ::ffff:a.b.c.d), or 0 if not an IP. */
static int host_address(const char *host, unsigned char addr[16])
{
    if (uv_inet_pton(AF_INET6, host, addr) == 0)
        return 1;
    unsigned char v4[4];
    if (uv_inet_pton(AF_INET, host, v4) != 0)
        return 0;
    memset(addr, 0, 10);
    addr[10] = addr[11] = 0xff;
    memcpy(addr + 12, v4, 4);
    return 1;
}

int redlock__url_same_node(const redlock_url *a, const redlock_url *b)
{
    if (a == NULL || b == NULL || a->is_unix != b->is_unix)
        return 0;
    if (a->is_unix)
        return a->path != NULL && b->path != NULL && strcmp(a->path, b->path) == 0;
    if (a->host == NULL || b->host == NULL || a->port != b->port)
        return 0;
    unsigned char addr_a[16], addr_b[16];
    int ip_a = host_address(a->host, addr_a);
    int ip_b = host_address(b->host, addr_b);
    if (ip_a || ip_b)
        return ip_a && ip_b && memcmp(addr_a, addr_b, sizeof(addr_a)) == 0;
    return equal_nocase(a->host, strlen(a->host), b->host);
}

size_t redlock__url_endpoint(const redlock_url *u, char *out, size_t len)
{
    int n;
    if (u == NULL)
        n = snprintf(out, len, "%s", "");
    else if (u->is_unix)
        n = snprintf(out, len, "%s", u->path != NULL ? u->path : "");
    else if (u->host != NULL && strchr(u->host, ':') != NULL)
        n = snprintf(out, len, "[%s]:%d", u->host, u->port);
    else
        n = snprintf(out, len, "%s:%d", u->host != NULL ? u->host : "", u->port);
    return n < 0 ? 0 : (size_t)n;
}
