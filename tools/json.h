/* SPDX-License-Identifier: MIT */
/* json.h - a small JSON writer for the tool's one-line results.
 *
 * Values are appended to a growing buffer; commas are placed by the writer. Strings are any bytes
 * (binary-safe): '"', '\\' and control characters are escaped, valid UTF-8 is copied as is, and
 * every byte that is not part of a valid UTF-8 sequence is written as \u00XX (so the output is
 * always valid JSON, and bytes 0x80..0xff read back as U+0080..U+00FF). An allocation failure
 * is sticky: later calls do nothing and jw_ok() is false. */
#ifndef REDLOCK_TOOL_JSON_H
#define REDLOCK_TOOL_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct jw {
    char *buf; /* NUL-terminated when jw_ok() */
    size_t len, cap;
    bool oom;
    bool need_comma;
} jw;

void jw_init(jw *w);
void jw_free(jw *w);
bool jw_ok(const jw *w);

void jw_object_begin(jw *w);
void jw_object_end(jw *w);
void jw_array_begin(jw *w);
void jw_array_end(jw *w);
/* An object member's name (a plain ASCII literal); the value follows. */
void jw_key(jw *w, const char *name);
void jw_string(jw *w, const void *bytes, size_t len);
/* A NUL-terminated string, or null for NULL. */
void jw_cstring(jw *w, const char *s);
void jw_u64(jw *w, uint64_t v);
void jw_i64(jw *w, int64_t v);
void jw_null(jw *w);
void jw_bool(jw *w, bool v);

/* The length of the valid UTF-8 sequence (RFC 3629: no overlongs, no surrogates, at most
 * U+10FFFF) starting at s, of at most n bytes; 0 if s does not start one. */
size_t json_utf8_sequence(const unsigned char *s, size_t n);

#endif /* REDLOCK_TOOL_JSON_H */
