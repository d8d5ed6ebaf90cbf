/* SPDX-License-Identifier: MIT */
/* test_docs.c - docs/api.md says what the library does: its error table lists exactly the codes,
 * values and messages of REDLOCK_ERRNO_MAP, in order, and its tables of redlock_options,
 * redlock_lock_opts and redlock_auto_opts list every member with the default its init macro sets.
 * The header's X-macro and the init functions are the sources; the page is checked against them,
 * so it cannot drift. Reads the page from $REDLOCK_DOCS (meson sets it to the source's docs/). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "redlock.h"

/* ---- reading the page ------------------------------------------------------------------------ */

/* docs/api.md, malloc'ed and NUL-terminated (fails the test when it cannot be read). */
static char *read_api_md(void)
{
    const char *dir = getenv("REDLOCK_DOCS");
    if (dir == NULL)
        fail_msg("REDLOCK_DOCS is not set (meson sets it to the source's docs/)");
    char path[1024];
    snprintf(path, sizeof(path), "%s/api.md", dir);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("cannot read %s", path);
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    size_t n;
    while ((n = fread(text + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 == cap) {
            cap *= 2;
            text = realloc(text, cap);
            assert_non_null(text);
        }
    }
    fclose(f);
    text[len] = '\0';
    return text;
}

#define MAX_ROWS 64
#define MAX_CELLS 6
#define CELL_LEN 512

typedef struct row {
    char cell[MAX_CELLS][CELL_LEN];
    int n_cells;
    int line; /* in the page, for messages */
} row;

/* The rows of the first table after the line that is exactly heading (header and rule rows
 * skipped). Cells are trimmed; a `\|` inside a cell is kept as "|". */
static int table_after(const char *text, const char *heading, row *rows)
{
    const char *at = text;
    size_t hl = strlen(heading);
    for (;;) {
        at = strstr(at, heading);
        if (at == NULL)
            fail_msg("docs/api.md has no line \"%s\"", heading);
        if ((at == text || at[-1] == '\n') && (at[hl] == '\n' || at[hl] == '\0'))
            break;
        at += hl;
    }
    int line = 1;
    for (const char *p = text; p < at; p++)
        line += *p == '\n';
    const char *p = at;
    int n = 0, seen = 0;
    while (*p != '\0') {
        const char *eol = strchr(p, '\n');
        size_t len = eol != NULL ? (size_t)(eol - p) : strlen(p);
        if (len > 0 && p[0] == '|') {
            seen++;
            if (seen > 2) { /* skip the header and the --- rule */
                assert_true(n < MAX_ROWS);
                row *r = &rows[n++];
                memset(r, 0, sizeof(*r));
                r->line = line;
                size_t i = 1;
                char *out = r->cell[0];
                size_t o = 0;
                while (i < len) {
                    if (p[i] == '\\' && i + 1 < len && p[i + 1] == '|') {
                        if (o + 1 < CELL_LEN)
                            out[o++] = '|';
                        i += 2;
                    } else if (p[i] == '|') {
                        while (o > 0 && out[o - 1] == ' ')
                            o--;
                        out[o] = '\0';
                        r->n_cells++;
                        if (r->n_cells == MAX_CELLS)
                            break;
                        out = r->cell[r->n_cells];
                        o = 0;
                        i++;
                        while (i < len && p[i] == ' ')
                            i++;
                    } else {
                        if (o + 1 < CELL_LEN)
                            out[o++] = p[i];
                        i++;
                    }
                }
                /* a leading blank of the first cell */
                memmove(r->cell[0], r->cell[0] + strspn(r->cell[0], " "),
                        strlen(r->cell[0] + strspn(r->cell[0], " ")) + 1);
            }
        } else if (seen > 0) {
            break; /* the table ended */
        }
        if (eol == NULL)
            break;
        p = eol + 1;
        line++;
    }
    if (n == 0)
        fail_msg("docs/api.md line %d: no table after \"%s\"", line, heading);
    return n;
}

/* A cell that is exactly one code span `x`: x into out; else the cell itself. */
static void unquote(const char *cell, char *out, size_t out_len)
{
    size_t len = strlen(cell);
    if (len >= 2 && cell[0] == '`' && cell[len - 1] == '`' &&
        memchr(cell + 1, '`', len - 2) == NULL)
        snprintf(out, out_len, "%.*s", (int)(len - 2), cell + 1);
    else
        snprintf(out, out_len, "%s", cell);
}

/* ---- the error table ------------------------------------------------------------------------- */

typedef struct code {
    const char *name;
    int value;
    const char *message;
} code;

static const code codes[] = {
#define CODE_(name, value, msg) {"REDLOCK_" #name, value, msg},
    REDLOCK_ERRNO_MAP(CODE_)
#undef CODE_
};
#define N_CODES (sizeof(codes) / sizeof(codes[0]))

static void error_table_is_the_x_macro(void **state)
{
    (void)state;
    char *text = read_api_md();
    static row rows[MAX_ROWS];
    int n = table_after(text, "#### `redlock_errno`", rows);
    for (int i = 0; i < n && (size_t)i < N_CODES; i++) {
        char name[CELL_LEN];
        unquote(rows[i].cell[0], name, sizeof(name));
        if (strcmp(name, codes[i].name) != 0)
            fail_msg("docs/api.md line %d: row %d is %s, the X-macro's is %s", rows[i].line, i + 1,
                     name, codes[i].name);
        char *end;
        long value = strtol(rows[i].cell[1], &end, 10);
        if (*rows[i].cell[1] == '\0' || *end != '\0' || value != codes[i].value)
            fail_msg("docs/api.md line %d: %s is \"%s\", the X-macro says %d", rows[i].line, name,
                     rows[i].cell[1], codes[i].value);
        if (strcmp(rows[i].cell[2], codes[i].message) != 0)
            fail_msg("docs/api.md line %d: %s's message is \"%s\", the X-macro's \"%s\"",
                     rows[i].line, name, rows[i].cell[2], codes[i].message);
        if (strcmp(redlock_strerror(codes[i].value), codes[i].message) != 0 ||
            strcmp(redlock_err_name(codes[i].value), codes[i].name) != 0)
            fail_msg("%s: redlock_strerror or redlock_err_name disagree with the X-macro", name);
    }
    if ((size_t)n != N_CODES)
        fail_msg("docs/api.md's error table has %d rows, the X-macro %zu codes", n, N_CODES);
    free(text);
}

/* ---- the defaults tables --------------------------------------------------------------------- */

typedef enum { K_SIZE, K_U64, K_INT, K_UNSIGNED, K_DOUBLE, K_BOOL, K_PTR, K_STR, K_BYTES } kind;

typedef struct member {
    const char *name;
    size_t offset, size;
    kind kind;
} member;

#define M(type, name, kind)                                                                        \
    {                                                                                              \
#name, offsetof(type, name), sizeof(((type *)0)->name), kind                               \
    }

/* Every member of each struct, in order; contiguity is checked, so one added to the struct and
 * forgotten here fails the test. */
static const member options_members[] = {
    M(redlock_options, size, K_SIZE),
    M(redlock_options, ttl_ms, K_U64),
    M(redlock_options, node_timeout_ms, K_U64),
    M(redlock_options, connect_timeout_ms, K_U64),
    M(redlock_options, drift_factor, K_DOUBLE),
    M(redlock_options, min_validity_ms, K_U64),
    M(redlock_options, retry_count, K_INT),
    M(redlock_options, retry_delay_ms, K_U64),
    M(redlock_options, retry_jitter_ms, K_U64),
    M(redlock_options, key_prefix, K_STR),
    M(redlock_options, reconnect_min_ms, K_U64),
    M(redlock_options, reconnect_max_ms, K_U64),
    M(redlock_options, max_inflight_per_node, K_UNSIGNED),
    M(redlock_options, realloc_fn, K_PTR),
    M(redlock_options, realloc_ud, K_PTR),
    M(redlock_options, tls_ca_file, K_PTR),
    M(redlock_options, tls_ca_dir, K_PTR),
    M(redlock_options, tls_cert_file, K_PTR),
    M(redlock_options, tls_key_file, K_PTR),
    M(redlock_options, tls_server_name, K_PTR),
    M(redlock_options, tls_insecure, K_BOOL),
    M(redlock_options, reserved_tls_, K_BYTES),
    M(redlock_options, log_fn, K_PTR),
    M(redlock_options, log_data, K_PTR),
    M(redlock_options, slow_round_ms, K_U64),
    M(redlock_options, no_notify, K_BOOL),
    M(redlock_options, reserved_notify_, K_BYTES),
    M(redlock_options, release_waits_all, K_BOOL),
    M(redlock_options, reserved_release_, K_BYTES),
};

static const member lock_opts_members[] = {
    M(redlock_lock_opts, size, K_SIZE),
    M(redlock_lock_opts, token, K_PTR),
    M(redlock_lock_opts, token_len, K_SIZE),
    M(redlock_lock_opts, retry_count, K_INT),
    M(redlock_lock_opts, wait_ms, K_U64),
    M(redlock_lock_opts, auto_extend, K_PTR),
    M(redlock_lock_opts, lost_cb, K_PTR),
    M(redlock_lock_opts, lost_data, K_PTR),
    M(redlock_lock_opts, fencing, K_BOOL),
    M(redlock_lock_opts, reserved_fencing_, K_BYTES),
    M(redlock_lock_opts, fence_commit, K_UNSIGNED),
    M(redlock_lock_opts, cancel, K_PTR),
    M(redlock_lock_opts, fence_domain, K_PTR),
};

static const member auto_opts_members[] = {
    M(redlock_auto_opts, size, K_SIZE),
    M(redlock_auto_opts, extend_at, K_DOUBLE),
    M(redlock_auto_opts, max_extensions, K_UNSIGNED),
    M(redlock_auto_opts, extend_flags, K_UNSIGNED),
    M(redlock_auto_opts, lost_margin_ms, K_U64),
    M(redlock_auto_opts, extended_cb, K_PTR),
    M(redlock_auto_opts, extended_data, K_PTR),
};

/* The members cover the struct: in order, and no gap a member could hide in. */
static void expect_complete(const char *what, const member *m, size_t n, size_t struct_size)
{
    size_t end = 0;
    for (size_t i = 0; i < n; i++) {
        if (m[i].offset < end || m[i].offset - end >= 8)
            fail_msg("%s: member %s at offset %zu does not follow the one before (ends at %zu): "
                     "update this test's list of members",
                     what, m[i].name, m[i].offset, end);
        end = m[i].offset + m[i].size;
    }
    if (struct_size - end >= 8)
        fail_msg("%s: the members listed end at %zu of %zu bytes: update this test's list", what,
                 end, struct_size);
}

/* The names of a table's first cell: the last identifier of each code span
 * (`const char *tls_ca_file`, `unsigned char reserved_tls_[7]`, `void *lost_data`). */
static int names_in(const char *cell, char names[][64], int max)
{
    int n = 0;
    const char *p = cell;
    while ((p = strchr(p, '`')) != NULL) {
        const char *end = strchr(p + 1, '`');
        if (end == NULL)
            break;
        const char *q = end;
        if (q > p + 1 && q[-1] == ']') { /* an array: back over [N] */
            while (q > p + 1 && q[-1] != '[')
                q--;
            if (q > p + 1)
                q--;
        }
        const char *s = q;
        while (s > p + 1 &&
               (s[-1] == '_' || (s[-1] >= 'a' && s[-1] <= 'z') || (s[-1] >= '0' && s[-1] <= '9')))
            s--;
        if (s < q && n < max) {
            snprintf(names[n], 64, "%.*s", (int)(q - s), s);
            n++;
        }
        p = end + 1;
    }
    return n;
}

/* Whether the page's default text says what the struct holds. */
static bool default_matches(const char *doc, const member *m, const unsigned char *base,
                            size_t struct_size, char *actual, size_t actual_len)
{
    const unsigned char *at = base + m->offset;
    char text[CELL_LEN];
    unquote(doc, text, sizeof(text));
    switch (m->kind) {
    case K_SIZE: {
        size_t v;
        memcpy(&v, at, sizeof(v));
        snprintf(actual, actual_len, "%zu", v);
        if (strncmp(text, "sizeof(", 7) == 0)
            return v == struct_size;
        return strtoull(text, NULL, 10) == v && text[0] >= '0' && text[0] <= '9';
    }
    case K_U64: {
        uint64_t v;
        memcpy(&v, at, sizeof(v));
        snprintf(actual, actual_len, "%llu", (unsigned long long)v);
        break;
    }
    case K_INT: {
        int v;
        memcpy(&v, at, sizeof(v));
        snprintf(actual, actual_len, "%d", v);
        break;
    }
    case K_UNSIGNED: {
        unsigned v;
        memcpy(&v, at, sizeof(v));
        snprintf(actual, actual_len, "%u", v);
        break;
    }
    case K_DOUBLE: {
        double v;
        memcpy(&v, at, sizeof(v));
        snprintf(actual, actual_len, "%.17g", v);
        char *slash = strchr(text, '/');
        double want =
            slash != NULL ? strtod(text, NULL) / strtod(slash + 1, NULL) : strtod(text, NULL);
        return v == want;
    }
    case K_BOOL: {
        bool v;
        memcpy(&v, at, sizeof(v));
        snprintf(actual, actual_len, "%s", v ? "true" : "false");
        break;
    }
    case K_PTR: {
        void *v;
        memcpy(&v, at, sizeof(v));
        snprintf(actual, actual_len, "%s", v == NULL ? "NULL" : "non-NULL");
        break;
    }
    case K_STR: {
        const char *v;
        memcpy(&v, at, sizeof(v));
        snprintf(actual, actual_len, v == NULL ? "NULL" : "\"%s\"", v);
        break;
    }
    case K_BYTES: {
        bool zero = true;
        for (size_t i = 0; i < m->size; i++)
            zero = zero && at[i] == 0;
        snprintf(actual, actual_len, "%s", zero ? "zero" : "not zero");
        break;
    }
    }
    return strcmp(text, actual) == 0;
}

/* The table after heading lists exactly the members, each with the default at base. */
static void expect_defaults(const char *heading, const member *members, size_t n_members,
                            const void *base, size_t struct_size)
{
    char *text = read_api_md();
    static row rows[MAX_ROWS];
    int n = table_after(text, heading, rows);
    bool documented[64] = {false};
    assert_true(n_members <= 64);
    for (int r = 0; r < n; r++) {
        char names[4][64];
        int k = names_in(rows[r].cell[0], names, 4);
        if (k == 0)
            fail_msg("docs/api.md line %d: no member named in \"%s\"", rows[r].line,
                     rows[r].cell[0]);
        for (int j = 0; j < k; j++) {
            size_t i = 0;
            while (i < n_members && strcmp(members[i].name, names[j]) != 0)
                i++;
            if (i == n_members)
                fail_msg("docs/api.md line %d: %s is no member of the struct", rows[r].line,
                         names[j]);
            documented[i] = true;
            char actual[128];
            if (!default_matches(rows[r].cell[1], &members[i], base, struct_size, actual,
                                 sizeof(actual)))
                fail_msg("docs/api.md line %d: %s's default is \"%s\", the init macro sets %s",
                         rows[r].line, names[j], rows[r].cell[1], actual);
        }
    }
    for (size_t i = 0; i < n_members; i++)
        if (!documented[i])
            fail_msg("docs/api.md: the table after \"%s\" lacks %s", heading, members[i].name);
    free(text);
}

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static void options_defaults_are_the_init(void **state)
{
    (void)state;
    expect_complete("redlock_options", options_members, N_OF(options_members),
                    sizeof(redlock_options));
    redlock_options o;
    memset(&o, 0xa5, sizeof(o));
    redlock_options_init(&o);
    expect_defaults("#### `redlock_options`", options_members, N_OF(options_members), &o,
                    sizeof(o));
}

static void lock_opts_defaults_are_the_init(void **state)
{
    (void)state;
    expect_complete("redlock_lock_opts", lock_opts_members, N_OF(lock_opts_members),
                    sizeof(redlock_lock_opts));
    redlock_lock_opts o;
    memset(&o, 0xa5, sizeof(o));
    redlock_lock_opts_init(&o);
    expect_defaults("#### `redlock_lock_opts`", lock_opts_members, N_OF(lock_opts_members), &o,
                    sizeof(o));
}

static void auto_opts_defaults_are_the_init(void **state)
{
    (void)state;
    expect_complete("redlock_auto_opts", auto_opts_members, N_OF(auto_opts_members),
                    sizeof(redlock_auto_opts));
    redlock_auto_opts o;
    memset(&o, 0xa5, sizeof(o));
    redlock_auto_opts_init(&o);
    expect_defaults("#### `redlock_auto_opts`", auto_opts_members, N_OF(auto_opts_members), &o,
                    sizeof(o));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(error_table_is_the_x_macro),
        cmocka_unit_test(options_defaults_are_the_init),
        cmocka_unit_test(lock_opts_defaults_are_the_init),
        cmocka_unit_test(auto_opts_defaults_are_the_init),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
