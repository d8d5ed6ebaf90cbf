/* SPDX-License-Identifier: MIT */
/* jsonp.c - a strict little JSON parser for the cli tests (see jsonp.h). */
#include "jsonp.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
    const unsigned char *s;
    size_t len, pos;
    char *err;
    size_t err_len;
    bool failed;
    unsigned depth;
} parser;

#define MAX_DEPTH 32

static void fail(parser *p, const char *fmt, ...)
{
    if (p->failed)
        return;
    p->failed = true;
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(p->err, p->err_len, "at byte %zu: %s", p->pos, msg);
}

static void skip_ws(parser *p)
{
    while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
                               p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
        p->pos++;
}

static bool literal(parser *p, const char *word)
{
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
        return false;
    p->pos += n;
    return true;
}

typedef struct sbuf {
    char *b;
    size_t len, cap;
} sbuf;

static void sb_put(sbuf *sb, const void *bytes, size_t n)
{
    if (sb->len + n + 1 > sb->cap) {
        sb->cap = (sb->len + n + 1) * 2;
        sb->b = realloc(sb->b, sb->cap);
        if (sb->b == NULL)
            abort();
    }
    memcpy(sb->b + sb->len, bytes, n);
    sb->len += n;
    sb->b[sb->len] = '\0';
}

static void sb_utf8(sbuf *sb, unsigned long cp)
{
    unsigned char out[4];
    size_t n;
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        n = 1;
    } else if (cp < 0x800) {
        out[0] = (unsigned char)(0xc0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        out[0] = (unsigned char)(0xe0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (unsigned char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        out[0] = (unsigned char)(0xf0 | (cp >> 18));
        out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
        out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        out[3] = (unsigned char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    sb_put(sb, out, n);
}

static long hex4(parser *p)
{
    if (p->len - p->pos < 4) {
        fail(p, "short \\u escape");
        return -1;
    }
    long v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p->s[p->pos++];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= c - '0';
        else if (c >= 'a' && c <= 'f')
            v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v |= c - 'A' + 10;
        else {
            fail(p, "bad hex digit in \\u escape");
            return -1;
        }
    }
    return v;
}

/* Length of a valid UTF-8 sequence at s (RFC 3629), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        lo = c == 0xe0 ? 0xa0 : 0x80;
        hi = c == 0xed ? 0x9f : 0xbf;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        lo = c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xf4 ? 0x8f : 0xbf;
    } else
        return 0;
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < len; k++)
        if (s[k] < 0x80 || s[k] > 0xbf)
            return 0;
    return len;
}

static bool parse_string(parser *p, char **out, size_t *out_len)
{
    sbuf sb = {NULL, 0, 0};
    sb_put(&sb, "", 0);
    p->pos++; /* the opening quote */
    for (;;) {
        if (p->pos >= p->len) {
            fail(p, "unterminated string");
            break;
        }
        unsigned char c = p->s[p->pos];
        if (c == '"') {
            p->pos++;
            *out = sb.b;
            *out_len = sb.len;
            return true;
        }
        if (c < 0x20) {
            fail(p, "raw control character 0x%02x in a string", c);
            break;
        }
        if (c != '\\') {
            size_t n = utf8_len(p->s + p->pos, p->len - p->pos);
            if (n == 0) {
                fail(p, "invalid UTF-8 byte 0x%02x in a string", c);
                break;
            }
            sb_put(&sb, p->s + p->pos, n);
            p->pos += n;
            continue;
        }
        p->pos++;
        if (p->pos >= p->len) {
            fail(p, "unterminated escape");
            break;
        }
        char e = (char)p->s[p->pos++];
        const char *simple = NULL;
        switch (e) {
        case '"':
            simple = "\"";
            break;
        case '\\':
            simple = "\\";
            break;
        case '/':
            simple = "/";
            break;
        case 'b':
            simple = "\b";
            break;
        case 'f':
            simple = "\f";
            break;
        case 'n':
            simple = "\n";
            break;
        case 'r':
            simple = "\r";
            break;
        case 't':
            simple = "\t";
            break;
        case 'u':
            break;
        default:
            fail(p, "bad escape \\%c", e);
            break;
        }
        if (p->failed)
            break;
        if (simple != NULL) {
            sb_put(&sb, simple, 1);
            continue;
        }
        long cp = hex4(p);
        if (cp < 0)
            break;
        if (cp >= 0xd800 && cp <= 0xdbff) {
            if (!literal(p, "\\u")) {
                fail(p, "lone high surrogate");
                break;
            }
            long lo = hex4(p);
            if (lo < 0xdc00 || lo > 0xdfff) {
                fail(p, "bad low surrogate");
                break;
            }
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        } else if (cp >= 0xdc00 && cp <= 0xdfff) {
            fail(p, "lone low surrogate");
            break;
        }
        sb_utf8(&sb, (unsigned long)cp);
    }
    free(sb.b);
    return false;
}

static bool parse_value(parser *p, jv *v);

static bool parse_container(parser *p, jv *v, bool object)
{
    if (++p->depth > MAX_DEPTH) {
        fail(p, "nested too deep");
        return false;
    }
    v->type = object ? JV_OBJECT : JV_ARRAY;
    p->pos++;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == (object ? '}' : ']')) {
        p->pos++;
        p->depth--;
        return true;
    }
    for (;;) {
        v->items = realloc(v->items, (v->n + 1) * sizeof(*v->items));
        if (object)
            v->keys = realloc(v->keys, (v->n + 1) * sizeof(*v->keys));
        if (v->items == NULL || (object && v->keys == NULL))
            abort();
        memset(&v->items[v->n], 0, sizeof(*v->items));
        if (object) {
            v->keys[v->n] = NULL;
            skip_ws(p);
            size_t klen;
            if (p->pos >= p->len || p->s[p->pos] != '"') {
                fail(p, "expected a member name");
                v->n++;
                return false;
            }
            if (!parse_string(p, &v->keys[v->n], &klen)) {
                v->n++;
                return false;
            }
            for (size_t k = 0; k < v->n; k++) {
                if (strcmp(v->keys[k], v->keys[v->n]) == 0) {
                    fail(p, "duplicate member \"%s\"", v->keys[k]);
                    v->n++;
                    return false;
                }
            }
            skip_ws(p);
            if (!literal(p, ":")) {
                fail(p, "expected ':'");
                v->n++;
                return false;
            }
        }
        bool ok = parse_value(p, &v->items[v->n]);
        v->n++;
        if (!ok)
            return false;
        skip_ws(p);
        if (literal(p, ","))
            continue;
        if (literal(p, object ? "}" : "]")) {
            p->depth--;
            return true;
        }
        fail(p, "expected ',' or '%c'", object ? '}' : ']');
        return false;
    }
}

static bool parse_value(parser *p, jv *v)
{
    skip_ws(p);
    if (p->pos >= p->len) {
        fail(p, "unexpected end");
        return false;
    }
    unsigned char c = p->s[p->pos];
    if (c == '{' || c == '[')
        return parse_container(p, v, c == '{');
    if (c == '"') {
        v->type = JV_STRING;
        return parse_string(p, &v->str, &v->len);
    }
    if (literal(p, "null")) {
        v->type = JV_NULL;
        return true;
    }
    if (literal(p, "true") || literal(p, "false")) {
        v->type = JV_BOOL;
        v->boolean = p->s[p->pos - 1] == 'e' && p->s[p->pos - 2] == 'u';
        return true;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        bool neg = c == '-';
        if (neg)
            p->pos++;
        size_t start = p->pos;
        uint64_t n = 0;
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
            if (n > (UINT64_MAX - 9) / 10) {
                fail(p, "integer too large");
                return false;
            }
            n = n * 10 + (p->s[p->pos++] - '0');
        }
        size_t digits = p->pos - start;
        if (digits == 0 || (digits > 1 && p->s[start] == '0')) {
            fail(p, "bad number");
            return false;
        }
        if (p->pos < p->len &&
            (p->s[p->pos] == '.' || p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
            fail(p, "non-integer number (the tool prints integers only)");
            return false;
        }
        if (n > (uint64_t)INT64_MAX) {
            fail(p, "integer too large");
            return false;
        }
        v->type = JV_INT;
        v->integer = neg ? -(int64_t)n : (int64_t)n;
        return true;
    }
    fail(p, "unexpected byte 0x%02x", c);
    return false;
}

jv *jv_parse(const char *text, size_t len, char *err, size_t err_len)
{
    parser p = {(const unsigned char *)text, len, 0, err, err_len, false, 0};
    jv *v = calloc(1, sizeof(*v));
    if (v == NULL)
        abort();
    if (len > 0 && text[len - 1] == '\n')
        p.len--;
    if (parse_value(&p, v)) {
        skip_ws(&p);
        if (p.pos != p.len)
            fail(&p, "trailing bytes after the value");
    }
    if (p.failed) {
        jv_free(v);
        return NULL;
    }
    return v;
}

static void jv_clear(jv *v)
{
    free(v->str);
    for (size_t i = 0; i < v->n; i++) {
        jv_clear(&v->items[i]);
        if (v->keys != NULL)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
}

void jv_free(jv *v)
{
    if (v == NULL)
        return;
    jv_clear(v);
    free(v);
}

const jv *jv_get(const jv *v, const char *key)
{
    if (v == NULL || v->type != JV_OBJECT)
        return NULL;
    for (size_t i = 0; i < v->n; i++)
        if (v->keys[i] != NULL && strcmp(v->keys[i], key) == 0)
            return &v->items[i];
    return NULL;
}

const jv *jv_at(const jv *v, size_t i)
{
    if (v == NULL || v->type != JV_ARRAY || i >= v->n)
        return NULL;
    return &v->items[i];
}

bool jv_is_str(const jv *v, const char *s)
{
    return v != NULL && v->type == JV_STRING && v->len == strlen(s) &&
           memcmp(v->str, s, v->len) == 0;
}
