/* SPDX-License-Identifier: MIT */
/* scrub.c - see scrub.h. */
#include "scrub.h"

#include <stdbool.h>
#include <string.h>

static bool is_quote(char c)
{
    return c == '\'' || c == '"';
}

/* redlock__scrub without the NUL: the new length. */
static size_t scrub_span(char *text, size_t len, const char *secret)
{
    size_t secret_len = secret != NULL ? strlen(secret) : 0;
    size_t w = 0;    /* w <= i: the text is rewritten in place */
    char prev = ' '; /* the byte read before text[i], as it was */
    for (size_t i = 0; i < len;) {
        size_t m = 0;
        while (m < secret_len && i + m < len && text[i + m] == secret[m])
            m++;
        bool quoted = m > 0 && is_quote(prev) && (i + m == len || is_quote(text[i + m]));
        if (secret_len > 0 && (m == secret_len || quoted)) {
            size_t stars = m < 3 ? m : 3;
            prev = text[i + m - 1];
            memset(text + w, '*', stars);
            w += stars;
            i += m;
            continue;
        }
        prev = text[i];
        unsigned char c = (unsigned char)text[i++];
        text[w++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    return w;
}

size_t redlock__scrub(char *text, size_t len, const char *secret)
{
    size_t w = scrub_span(text, len, secret);
    text[w] = '\0';
    return w;
}

void redlock__scrub_error(redisReply *reply, const char *secret)
{
    if (reply->type != REDIS_REPLY_ERROR || reply->str == NULL)
        return;
    size_t len = reply->len < REDLOCK__SCRUB_MAX ? reply->len : REDLOCK__SCRUB_MAX;
    size_t code = 0; /* the error's first word */
    while (code < len && reply->str[code] != ' ')
        code++;
    bool redirect = (code == 5 && memcmp(reply->str, "MOVED", 5) == 0) ||
                    (code == 3 && memcmp(reply->str, "ASK", 3) == 0);
    scrub_span(reply->str, code, NULL); /* never shorter without a secret */
    size_t rest = scrub_span(reply->str + code, len - code, redirect ? NULL : secret);
    reply->len = code + rest;
    reply->str[reply->len] = '\0';
}
