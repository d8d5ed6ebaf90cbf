/* SPDX-License-Identifier: MIT */
/* json.c - a small JSON writer (see json.h). */
#include "json.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void jw_init(jw *w)
{
    memset(w, 0, sizeof(*w));
}

void jw_free(jw *w)
{
    free(w->buf);
    memset(w, 0, sizeof(*w));
}

bool jw_ok(const jw *w)
{
    return !w->oom;
}

static void put(jw *w, const char *s, size_t n)
{
    if (w->oom)
        return;
    if (w->len + n + 1 > w->cap) {
        size_t cap = w->cap != 0 ? w->cap : 256;
        while (cap < w->len + n + 1)
            cap *= 2;
        char *grown = realloc(w->buf, cap);
        if (grown == NULL) {
            w->oom = true;
            return;
        }
        w->buf = grown;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = '\0';
}

static void puts_(jw *w, const char *s)
{
    put(w, s, strlen(s));
}

/* Before any value or member: the comma that separates it from the previous one. */
static void separate(jw *w)
{
    if (w->need_comma)
        put(w, ",", 1);
    w->need_comma = false;
}

void jw_object_begin(jw *w)
{
    separate(w);
    put(w, "{", 1);
}

void jw_object_end(jw *w)
{
    put(w, "}", 1);
    w->need_comma = true;
}

void jw_array_begin(jw *w)
{
    separate(w);
    put(w, "[", 1);
}

void jw_array_end(jw *w)
{
    put(w, "]", 1);
    w->need_comma = true;
}

size_t json_utf8_sequence(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf; /* the allowed range of the second byte */
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0; /* no overlongs */
        else if (c == 0xed)
            hi = 0x9f; /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90; /* no overlongs */
        else if (c == 0xf4)
            hi = 0x8f; /* nothing above U+10FFFF */
    } else {
        return 0; /* a continuation byte, 0xc0, 0xc1, 0xf5..0xff */
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < len; k++)
        if (s[k] < 0x80 || s[k] > 0xbf)
            return 0;
    return len;
}

void jw_string(jw *w, const void *bytes, size_t len)
{
    separate(w);
    const unsigned char *s = bytes;
    put(w, "\"", 1);
    size_t i = 0;
    while (i < len) {
        /* Copy the longest run that needs no escaping in one go. */
        size_t run = i;
        while (run < len && s[run] >= 0x20 && s[run] < 0x7f && s[run] != '"' && s[run] != '\\')
            run++;
        put(w, (const char *)s + i, run - i);
        i = run;
        if (i == len)
            break;
        unsigned char c = s[i];
        char esc[8];
        switch (c) {
        case '"':
            puts_(w, "\\\"");
            break;
        case '\\':
            puts_(w, "\\\\");
            break;
        case '\b':
            puts_(w, "\\b");
            break;
        case '\f':
            puts_(w, "\\f");
            break;
        case '\n':
            puts_(w, "\\n");
            break;
        case '\r':
            puts_(w, "\\r");
            break;
        case '\t':
            puts_(w, "\\t");
            break;
        default:
            if (c >= 0x80) {
                size_t seq = json_utf8_sequence(s + i, len - i);
                if (seq > 0) {
                    put(w, (const char *)s + i, seq);
                    i += seq;
                    continue;
                }
            }
            /* Control characters, DEL, and bytes outside valid UTF-8. */
            snprintf(esc, sizeof(esc), "\\u%04x", (unsigned)c);
            puts_(w, esc);
            break;
        }
        i++;
    }
    put(w, "\"", 1);
    w->need_comma = true;
}

void jw_cstring(jw *w, const char *s)
{
    if (s == NULL)
        jw_null(w);
    else
        jw_string(w, s, strlen(s));
}

void jw_key(jw *w, const char *name)
{
    jw_string(w, name, strlen(name));
    put(w, ":", 1);
    w->need_comma = false;
}

void jw_u64(jw *w, uint64_t v)
{
    char num[24];
    separate(w);
    snprintf(num, sizeof(num), "%" PRIu64, v);
    puts_(w, num);
    w->need_comma = true;
}

void jw_i64(jw *w, int64_t v)
{
    char num[24];
    separate(w);
    snprintf(num, sizeof(num), "%" PRId64, v);
    puts_(w, num);
    w->need_comma = true;
}

void jw_null(jw *w)
{
    separate(w);
    puts_(w, "null");
    w->need_comma = true;
}

void jw_bool(jw *w, bool v)
{
    separate(w);
    puts_(w, v ? "true" : "false");
    w->need_comma = true;
}
