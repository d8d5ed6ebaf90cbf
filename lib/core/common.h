/* SPDX-License-Identifier: MIT */
/* common.h - small internal helpers shared by the library's files: allocation through the
 * caller's hook, intrusive lists, string buffers. Nothing here is public. */
#ifndef REDLOCK_COMMON_H
#define REDLOCK_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <uv.h>

#include "redlock.h"

#define REDLOCK__CONTAINER_OF(ptr, type, member)                                                   \
    ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

#define REDLOCK__MIN(a, b) ((a) < (b) ? (a) : (b))
#define REDLOCK__MAX(a, b) ((a) > (b) ? (a) : (b))

/* The library's clock: monotonic microseconds (redlock_now_us is the same, for callers). */
static inline uint64_t redlock__now_us(void)
{
    return uv_hrtime() / 1000;
}

/* Microseconds as whole milliseconds, rounded up: a timer armed for them never fires early. */
static inline uint64_t redlock__ms_ceil(uint64_t us)
{
    return us / 1000 + (us % 1000 != 0);
}

/* Arm the one-shot timer t to fire cb at due_us (the monotonic clock of redlock_now_us), now
 * being now_us; a due time already past fires on the loop's next turn. */
static inline void redlock__timer_at(uv_timer_t *t, uv_timer_cb cb, uint64_t due_us,
                                     uint64_t now_us)
{
    uv_timer_start(t, cb, due_us > now_us ? redlock__ms_ceil(due_us - now_us) : 0, 0);
}

/* A close that waits for several handles (uv_close is asynchronous) before its owner frees itself
 * and tells whoever asked (cb may be NULL). */
typedef struct redlock__closing {
    unsigned pending; /* closes started and not yet complete */
    void (*cb)(void *data);
    void *data;
} redlock__closing;

/* n more closes started. */
static inline void redlock__closing_add(redlock__closing *c, unsigned n)
{
    c->pending += n;
}

/* One close completed: whether it was the last one pending. */
static inline bool redlock__closing_done(redlock__closing *c)
{
    return --c->pending == 0;
}

/* Tell whoever asked (a copy taken before the owner freed itself). */
static inline void redlock__closing_tell(redlock__closing told)
{
    if (told.cb != NULL)
        told.cb(told.data);
}

/* A node's moving average of answer latencies (weight 1/8), with sample the next one; 0 means
 * none yet, so the first sample counts at least 1. */
static inline uint64_t redlock__rtt_average(uint64_t avg, uint64_t sample)
{
    return avg == 0 ? REDLOCK__MAX(sample, 1) : avg - avg / 8 + sample / 8;
}

/* The library's allocator: a realloc-like hook (see redlock_realloc_fn) and its user data. */
typedef struct redlock__alloc {
    redlock_realloc_fn fn;
    void *ud;
} redlock__alloc;

void redlock__alloc_init(redlock__alloc *a, redlock_realloc_fn fn, void *ud);
void *redlock__malloc(const redlock__alloc *a, size_t size);
void *redlock__calloc(const redlock__alloc *a, size_t n, size_t size);
void *redlock__realloc(const redlock__alloc *a, void *ptr, size_t size);
void redlock__free(const redlock__alloc *a, void *ptr);
char *redlock__strdup(const redlock__alloc *a, const char *s);

/* Doubly linked intrusive list with a sentinel head. */
typedef struct redlock__list {
    struct redlock__list *prev, *next;
} redlock__list;

static inline void redlock__list_init(redlock__list *head)
{
    head->prev = head->next = head;
}

static inline int redlock__list_empty(const redlock__list *head)
{
    return head->next == head;
}

static inline void redlock__list_push(redlock__list *head, redlock__list *item)
{
    item->prev = head->prev;
    item->next = head;
    head->prev->next = item;
    head->prev = item;
}

static inline void redlock__list_remove(redlock__list *item)
{
    item->prev->next = item->next;
    item->next->prev = item->prev;
    item->prev = item->next = item;
}

/* Bytes somebody else owns: a key of a lock on several resources, say. */
typedef struct redlock__span {
    const char *ptr;
    size_t len;
} redlock__span;

/* A growable byte buffer. */
typedef struct redlock__buf {
    char *data;
    size_t len, cap;
} redlock__buf;

/* Make room for n more bytes after b->len (b->len unchanged); returns 0 or REDLOCK_ENOMEM
 * (buffer unchanged). */
int redlock__buf_reserve(redlock__buf *b, const redlock__alloc *a, size_t n);
/* Append n bytes with b's room made first (redlock__buf_append's way when the room is short). */
int redlock__buf_append_grow(redlock__buf *b, const redlock__alloc *a, const void *src, size_t n);
/* Append n bytes; returns 0 or REDLOCK_ENOMEM (buffer unchanged). Inline: every command goes
 * through it onto a node's buffer, which has room almost always. */
static inline int redlock__buf_append(redlock__buf *b, const redlock__alloc *a, const void *src,
                                      size_t n)
{
    if (n > b->cap - b->len)
        return redlock__buf_append_grow(b, a, src, n);
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}
void redlock__buf_free(redlock__buf *b, const redlock__alloc *a);
/* An empty buffer whose capacity a burst raised above this is freed (redlock__buf_trim): an idle
 * client does not keep its largest write's worth of memory per node. Steady traffic of up to
 * this much per write keeps its buffer. */
#define REDLOCK__BUF_KEEP (64u * 1024)
/* Free b's memory if it is empty and holds more than REDLOCK__BUF_KEEP bytes. */
void redlock__buf_trim(redlock__buf *b, const redlock__alloc *a);

/* Freed blocks of one size, kept for the next allocations of that size instead of a trip
 * through the allocator each (glibc's per-thread cache holds a few blocks a size, and a burst
 * of frees, then one of allocations, overflows it). A free list through the blocks' first
 * bytes: each is at least a pointer wide. */
typedef struct redlock__spares {
    void *head;
    unsigned len;
} redlock__spares;

/* A kept block (its bytes as they were left, but for the first pointer's worth), or NULL. */
void *redlock__spares_take(redlock__spares *s);
/* Keep block while fewer than keep are kept, else free it, and one kept block with it while
 * more than keep are: a caller that gives the number of blocks it still has in use gets a list
 * that follows its bursts and shrinks back with them, never above max(keep) of the moment. */
void redlock__spares_put(redlock__spares *s, const redlock__alloc *a, void *block, unsigned keep);
/* Free every kept block. */
void redlock__spares_free(redlock__spares *s, const redlock__alloc *a);

/* n bytes of in as 2n lowercase hex digits into out, NUL-terminated (out holds 2n + 1). */
void redlock__hex(char *out, const unsigned char *in, size_t n);

/* Where a layer's log lines go: a node's, a cluster's or a subscriber's config (node.h), or the
 * client's (stats.h), which hands them to the caller's redlock_options.log_fn. */
typedef void (*redlock__log_sink)(void *ctx, redlock_log_level level, const char *url,
                                  const char *message);

/* Format prefix and fmt into one line (truncated at 400 bytes) and hand it to sink. The callers
 * check first that someone listens: nothing is formatted otherwise. */
#if defined(__GNUC__)
__attribute__((format(printf, 6, 0)))
#endif
void redlock__vlog(redlock__log_sink sink, void *ctx, redlock_log_level level, const char *url,
                   const char *prefix, const char *fmt, va_list ap);

/* What ends a text that was cut to fit its buffer. */
#define REDLOCK__CUT_MARK "..."
#define REDLOCK__CUT_MARK_LEN 3

/* Every text the library cuts to fit a buffer (a node's error, a log line, a message) is cut
 * here: text (len bytes) into out (size bytes, NUL included), whole when it fits; else cut after
 * the last whole word that fits, with REDLOCK__CUT_MARK. Only a word that would leave less than
 * half the room used (a long key, path or token) is cut inside it, between two UTF-8
 * characters. Reads at most size bytes of text; out may be text. Returns the length written. */
size_t redlock__text_fit(char *out, size_t size, const char *text, size_t len);

/* snprintf into a fixed buffer that never fails: a text too long is cut by redlock__text_fit. */
void redlock__fmt(char *out, size_t out_len, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
#if defined(__GNUC__)
__attribute__((format(printf, 3, 0)))
#endif
void redlock__vfmt(char *out, size_t out_len, const char *fmt, va_list ap);

/* For calls whose err buffer may be NULL: point *err at scratch then, and start it empty. */
void redlock__err_start(char **err, size_t *err_len, char *scratch, size_t scratch_len);

/* Reopen any of descriptors 0..2 that the process closed on /dev/null (see common.c). Called
 * before the library creates a loop or a socket. */
void redlock__keep_stdio_taken(void);

/* FNV-1a 64 of bytes: cheap identity for "same key" checks (a collision only makes a check
 * conservative). */
uint64_t redlock__hash(const void *data, size_t len);

#endif
