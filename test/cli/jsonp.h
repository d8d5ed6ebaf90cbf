/* SPDX-License-Identifier: MIT */
/* jsonp.h - a strict little JSON parser for the cli tests: the tool's output must be valid JSON
 * (RFC 8259) to pass, and the tests read fields out of it.
 *
 * Strings are decoded: escapes are resolved and \uXXXX (with surrogate pairs) becomes UTF-8, so
 * the tool's \u00ff for a raw byte 0xff reads back as the two bytes c3 bf. Raw bytes in the text
 * must be valid UTF-8 and no control characters. Numbers must be integers (the tool prints no
 * other kind). */
#ifndef REDLOCK_TEST_JSONP_H
#define REDLOCK_TEST_JSONP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { JV_NULL, JV_BOOL, JV_INT, JV_STRING, JV_ARRAY, JV_OBJECT } jv_type;

typedef struct jv {
    jv_type type;
    bool boolean;
    int64_t integer;
    char *str; /* JV_STRING: decoded bytes, NUL-terminated (may hold NULs: use len) */
    size_t len;
    struct jv *items; /* JV_ARRAY, JV_OBJECT: n values */
    char **keys;      /* JV_OBJECT: n decoded member names */
    size_t n;
} jv;

/* Parse text (len bytes) as exactly one JSON value, optionally followed by one "\n". Returns a
 * tree to free with jv_free, or NULL with a message in err. */
jv *jv_parse(const char *text, size_t len, char *err, size_t err_len);
void jv_free(jv *v);

/* The member named key of an object (NULL if v is not an object or has no such member). */
const jv *jv_get(const jv *v, const char *key);
/* Item i of an array (NULL if out of range or v is not an array). */
const jv *jv_at(const jv *v, size_t i);
/* v is a string equal to s. */
bool jv_is_str(const jv *v, const char *s);

#endif /* REDLOCK_TEST_JSONP_H */
