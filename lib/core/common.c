/* SPDX-License-Identifier: MIT */
/* common.c - allocation through the caller's hook, buffers, formatting. */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void *default_realloc(void *ud, void *ptr, size_t size)
{
    (void)ud;
    if (size == 0) {
        free(ptr);
        return NULL;
    }
    return realloc(ptr, size);
}

void redlock__alloc_init(redlock__alloc *a, redlock_realloc_fn fn, void *ud)
{
    a->fn = fn != NULL ? fn : default_realloc;
    a->ud = fn != NULL ? ud : NULL;
}

void *redlock__malloc(const redlock__alloc *a, size_t size)
{
    return a->fn(a->ud, NULL, size == 0 ? 1 : size);
}

void *redlock__calloc(const redlock__alloc *a, size_t n, size_t size)
{
    if (size != 0 && n > SIZE_MAX / size)
        return NULL;
    void *p = redlock__malloc(a, n * size);
    if (p != NULL)
        memset(p, 0, n * size);
    return p;
}

void *redlock__realloc(const redlock__alloc *a, void *ptr, size_t size)
{
    return a->fn(a->ud, ptr, size == 0 ? 1 : size);
}

void redlock__free(const redlock__alloc *a, void *ptr)
{
    if (ptr != NULL)
        a->fn(a->ud, ptr, 0);
}

void *redlock__spares_take(redlock__spares *s)
{
    void *block = s->head;
    if (block != NULL) {
        memcpy(&s->head, block, sizeof(s->head));
        s->len--;
    }
    return block;
}

void redlock__spares_put(redlock__spares *s, const redlock__alloc *a, void *block, unsigned keep)
{
    if (s->len < keep) {
        memcpy(block, &s->head, sizeof(s->head));
        s->head = block;
        s->len++;
        return;
    }
    redlock__free(a, block);
    if (s->len > keep)
        redlock__free(a, redlock__spares_take(s));
}

void redlock__spares_free(redlock__spares *s, const redlock__alloc *a)
{
    void *block;
    while ((block = redlock__spares_take(s)) != NULL)
        redlock__free(a, block);
}

char *redlock__strdup(const redlock__alloc *a, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = redlock__malloc(a, n);
    if (p != NULL)
        memcpy(p, s, n);
    return p;
}

int redlock__buf_reserve(redlock__buf *b, const redlock__alloc *a, size_t n)
{
    if (n > SIZE_MAX - b->len)
        return REDLOCK_ENOMEM;
    if (b->len + n <= b->cap)
        return 0;
    size_t cap = b->cap != 0 ? b->cap : 256;
    while (cap < b->len + n)
        cap = cap > SIZE_MAX / 2 ? b->len + n : cap * 2;
    char *p = redlock__realloc(a, b->data, cap);
    if (p == NULL)
        return REDLOCK_ENOMEM;
    b->data = p;
    b->cap = cap;
    return 0;
}

int redlock__buf_append_grow(redlock__buf *b, const redlock__alloc *a, const void *src, size_t n)
{
    if (redlock__buf_reserve(b, a, n) != 0)
        return REDLOCK_ENOMEM;
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

void redlock__buf_trim(redlock__buf *b, const redlock__alloc *a)
{
    if (b->len == 0 && b->cap > REDLOCK__BUF_KEEP)
        redlock__buf_free(b, a);
}

void redlock__buf_free(redlock__buf *b, const redlock__alloc *a)
{
    redlock__free(a, b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void redlock__vlog(redlock__log_sink sink, void *ctx, redlock_log_level level, const char *url,
                   const char *prefix, const char *fmt, va_list ap)
{
    char msg[400];
    size_t used = redlock__text_fit(msg, sizeof(msg), prefix, strlen(prefix));
    redlock__vfmt(msg + used, sizeof(msg) - used, fmt, ap);
    sink(ctx, level, url, msg);
}

/* Whether byte c continues a UTF-8 sequence (0x80-0xBF): a cut before it would split one. */
static bool utf8_continues(char c)
{
    return ((unsigned char)c & 0xc0) == 0x80;
}

size_t redlock__text_fit(char *out, size_t size, const char *text, size_t len)
{
    if (size == 0)
        return 0;
    size_t room = size - 1; /* bytes of text, the NUL after them */
    if (len <= room) {
        memmove(out, text, len);
        out[len] = '\0';
        return len;
    }
    size_t mark = room >= REDLOCK__CUT_MARK_LEN ? REDLOCK__CUT_MARK_LEN : 0;
    size_t max = room - mark; /* text[max] is read: max < room <= what text holds */
    /* The last word that fits: text[0..cut) before a space. */
    size_t cut = max;
    while (cut > 0 && text[cut] != ' ')
        cut--;
    while (cut > 0 && memchr(" ,;:", text[cut - 1], 4) != NULL)
        cut--;                       /* "node down:..." reads as "node down..." */
    if (cut == 0 || cut < max / 2) { /* a word longer than half the room (a key, a path), or
                                        no whole word fits: cut it inside */
        cut = max;
        while (cut > 0 && utf8_continues(text[cut]))
            cut--;
        if (cut == 0 && mark == 0) /* no room for the mark, no whole character: the bytes
                                      that fit rather than nothing */
            cut = max;
    }
    memmove(out, text, cut);
    memcpy(out + cut, REDLOCK__CUT_MARK, mark);
    out[cut + mark] = '\0';
    return cut + mark;
}

void redlock__vfmt(char *out, size_t out_len, const char *fmt, va_list ap)
{
    if (out_len == 0)
        return;
    int n = vsnprintf(out, out_len, fmt, ap);
    if (n < 0)
        out[0] = '\0';
    else if ((size_t)n >= out_len) /* cut mid-word: cut again where a word ends */
        redlock__text_fit(out, out_len, out, (size_t)n);
}

void redlock__fmt(char *out, size_t out_len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redlock__vfmt(out, out_len, fmt, ap);
    va_end(ap);
}

void redlock__err_start(char **err, size_t *err_len, char *scratch, size_t scratch_len)
{
    if (*err == NULL) {
        *err = scratch;
        *err_len = scratch_len;
    }
    if (*err_len > 0)
        (*err)[0] = '\0';
}

/* libuv aborts when it closes a descriptor <= 2, and a process that closed its stdin (a
 * daemon, a CI runner) hands the next socket fd 0. Keep 0..2 taken, on /dev/null, so sockets
 * never land there. Opening returns the lowest free descriptor: exactly the missing one. */
void redlock__keep_stdio_taken(void)
{
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
            continue;
        int got = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
        if (got >= 0 && got != fd)
            close(got); /* another thread took the slot first; it is taken either way */
    }
}

uint64_t redlock__hash(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = UINT64_C(14695981039346656037);
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= UINT64_C(1099511628211);
    }
    return h;
}

void redlock__hex(char *out, const unsigned char *in, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}
