/* SPDX-License-Identifier: MIT */
/* fuzz_url.c - libFuzzer target: redlock_url_parse and redlock_url_redact on arbitrary text.
 *
 * Checks, beyond "no crash, no leak, no UB": the redacted text is NUL-terminated and the same
 * from both functions; redact's return value is the full length whatever the buffer; and on a
 * successful parse with a password, the redacted URL is the input with exactly one span replaced
 * by "***", a span that percent-decodes to the parsed password - so the password itself is gone.
 * (Inputs containing '*' skip that last check: the span's edges are then ambiguous.)
 * This holds for unix URLs too, whose socket path may contain '@' (lib/core/url.c userinfo_end). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "redlock.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            __builtin_trap();                                                                      \
    } while (0)

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decode span into out (at least len + 1 bytes); returns the decoded length. */
static size_t decode(const char *span, size_t len, char *out)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (span[i] == '%' && i + 2 < len && hexval(span[i + 1]) >= 0 && hexval(span[i + 2]) >= 0) {
            out[n++] = (char)(hexval(span[i + 1]) * 16 + hexval(span[i + 2]));
            i += 2;
        } else {
            out[n++] = span[i];
        }
    }
    out[n] = '\0';
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *text = malloc(size + 1);
    CHECK(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    size_t tlen = strlen(text); /* stop at an embedded NUL, as a C caller would */

    /* redact: the length does not depend on the buffer, the output is always terminated. */
    size_t want = redlock_url_redact(text, NULL, 0);
    char *red = malloc(want + 1);
    CHECK(red != NULL);
    CHECK(redlock_url_redact(text, red, want + 1) == want);
    CHECK(strlen(red) == want);
    char small[7];
    memset(small, 'x', sizeof(small));
    CHECK(redlock_url_redact(text, small, sizeof(small)) == want);
    CHECK(memchr(small, '\0', sizeof(small)) != NULL);

    redlock_url u;
    char err[128];
    memset(err, 'x', sizeof(err));
    int rc = redlock_url_parse(&u, text, err, sizeof(err));
    if (rc != 0) {
        CHECK(rc == REDLOCK_EURL || rc == REDLOCK_ENOMEM);
        CHECK(memchr(err, '\0', sizeof(err)) != NULL);
        CHECK(err[0] != '\0');
    } else {
        CHECK(u.redacted != NULL);
        CHECK(strcmp(u.redacted, red) == 0);
        /* From here on: the redaction the client uses. */
        free(red);
        want = strlen(u.redacted);
        red = malloc(want + 1);
        CHECK(red != NULL);
        memcpy(red, u.redacted, want + 1);
        CHECK(u.is_unix ? (u.path != NULL && u.host == NULL && u.port == 0)
                        : (u.host != NULL && u.path == NULL && u.port >= 1 && u.port <= 65535));
        /* TLS exactly for the rediss scheme (any case), and never over a unix socket. */
        CHECK(u.tls == (strncasecmp(text, "rediss://", 9) == 0));
        CHECK(!(u.tls && u.is_unix));
        if (u.password != NULL) {
            CHECK(u.password[0] != '\0');
            if (strchr(text, '*') == NULL) {
                size_t p = 0;
                while (p < tlen && p < want && text[p] == red[p])
                    p++;
                size_t q = 0;
                while (q < tlen - p && q < want - p && text[tlen - 1 - q] == red[want - 1 - q])
                    q++;
                CHECK(want - p - q == 3 && memcmp(red + p, "***", 3) == 0);
                char *dec = malloc(tlen + 1);
                CHECK(dec != NULL);
                size_t dlen = decode(text + p, tlen - p - q, dec);
                CHECK(dlen == strlen(u.password) && memcmp(dec, u.password, dlen) == 0);
                free(dec);
            }
        }
    }
    redlock_url_free(&u);
    redlock_url_free(&u); /* freeing twice is harmless: the struct is zeroed */
    free(red);
    free(text);
    return 0;
}
