/* SPDX-License-Identifier: MIT */
/* reader.c - see reader.h.
 *
 * hiredis calls a reply object function for every object of a reply once its header (an
 * array's) or its whole bytes (a string's) are read, before it allocates anything for it: ours
 * check the limits there and hand over to hiredis's own functions, which build the usual
 * redisReply (freeReplyObject frees it). A refusal returns NULL, which hiredis takes for a
 * failed allocation: the reader fails and frees the reply cut off; the reason is kept here. A
 * bulk string is only handed over whole, so its announced length is checked from the reader's
 * buffer after each read (check_pending), before its bytes pile up. */
#include "reader.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* A line or bulk string any connection may be sent: INFO server (its paths included, a few
 * KiB), an error's text, a token (REDLOCK_TOKEN_MAX), a fence counter, a host name. */
#define TEXT_MAX (64u * 1024)
/* The check's INFO has every default section: a line per replica, per error type, per db. */
#define CHECK_TEXT_MAX (1024u * 1024)
/* CLUSTER SHARDS lists a shard's slot ranges flat (start, end, ...), CLUSTER SLOTS one entry per
 * range: 16384 slots make at most 16384 ranges. */
#define CLUSTER_ELEMENTS_MAX (2u * 16384)
/* A CLUSTER SLOTS reply of 16384 ranges (each slot its own: the worst a cluster can get to) with
 * three replicas per master is about 10^6 objects; CLUSTER SHARDS of a thousand servers is less
 * than a tenth of that. */
#define CLUSTER_OBJECTS_MAX (1u << 20)
/* A digit count no length needs, with its sign and CRLF: a header longer than this never ends. */
#define HEADER_MAX 24

redlock__reader_limits redlock__reader_limits_of(redlock__reader_use use)
{
    switch (use) {
    case REDLOCK__READER_NODE:
        /* The scripts answer a number, a status, an error or INSPECT's {value, pttl, counter}. */
        return (redlock__reader_limits){TEXT_MAX, 16, 2, 64};
    case REDLOCK__READER_CLUSTER:
        /* SLOTS: [[start, end, [ip, port, id, {hostname...}], ...]]; SHARDS: [{slots: [...],
         * nodes: [{id: ...}, ...]}]: four deep. */
        return (redlock__reader_limits){TEXT_MAX, CLUSTER_ELEMENTS_MAX, 5, CLUSTER_OBJECTS_MAX};
    case REDLOCK__READER_SUBSCRIBER:
        /* [message, channel, payload], [subscribe, channel, count]; channels are keys, whose
         * length the subscriber allows as it subscribes (redlock__reader_allow_bulk). */
        return (redlock__reader_limits){TEXT_MAX, 4, 1, 16};
    case REDLOCK__READER_CHECK:
        return (redlock__reader_limits){CHECK_TEXT_MAX, CLUSTER_ELEMENTS_MAX, 5,
                                        CLUSTER_OBJECTS_MAX};
    }
    return (redlock__reader_limits){0, 0, 0, 0};
}

struct redlock__reader {
    redisReader *r;
    redisReplyObjectFunctions fn;   /* ours: each checks, then calls base's */
    redisReplyObjectFunctions base; /* hiredis's own */
    redlock__reader_limits limits;
    size_t objects; /* of the reply being read */
    const redlock__alloc *alloc;
    char why[120]; /* what was refused; "" while nothing was */
};

#if HIREDIS_MAJOR >= 1
typedef size_t array_len; /* hiredis 1.x counts an array's elements in size_t */
#define CURRENT_TASK(r) ((r)->task[(r)->ridx])
#else
typedef int array_len; /* 0.14: int, at most INT_MAX (its reader refuses more) */
#define CURRENT_TASK(r) (&(r)->rstack[(r)->ridx])
#endif

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void *
refuse(redlock__reader *rd, const char *fmt, ...)
{
    if (rd->why[0] == '\0') {
        va_list ap;
        va_start(ap, fmt);
        redlock__vfmt(rd->why, sizeof(rd->why), fmt, ap);
        va_end(ap);
    }
    return NULL;
}

/* Count n more objects of the reply; false when that is more than it may hold. */
static bool take(redlock__reader *rd, size_t n)
{
    if (n > rd->limits.max_objects - rd->objects) {
        refuse(rd, "a reply of more than %zu objects (at most that on this connection)",
               rd->limits.max_objects);
        return false;
    }
    rd->objects += n;
    return true;
}

static void *create_string(const redisReadTask *task, char *str, size_t len)
{
    redlock__reader *rd = task->privdata;
    if (len > rd->limits.max_bulk)
        return refuse(rd, "a string of %zu bytes (at most %zu on this connection)", len,
                      rd->limits.max_bulk);
    return take(rd, 1) ? rd->base.createString(task, str, len) : NULL;
}

static void *create_array(const redisReadTask *task, array_len elements)
{
    redlock__reader *rd = task->privdata;
    unsigned depth = 1;
    for (const redisReadTask *t = task->parent; t != NULL; t = t->parent)
        depth++;
    if ((size_t)elements > rd->limits.max_elements)
        return refuse(rd, "an array of %zu elements (at most %zu on this connection)",
                      (size_t)elements, rd->limits.max_elements);
    if (depth > rd->limits.max_depth)
        return refuse(rd, "arrays nested %u deep (at most %u on this connection)", depth,
                      rd->limits.max_depth);
    return take(rd, 1 + (size_t)elements) ? rd->base.createArray(task, elements) : NULL;
}

static void *create_integer(const redisReadTask *task, long long value)
{
    redlock__reader *rd = task->privdata;
    return take(rd, 1) ? rd->base.createInteger(task, value) : NULL;
}

static void *create_nil(const redisReadTask *task)
{
    redlock__reader *rd = task->privdata;
    return take(rd, 1) ? rd->base.createNil(task) : NULL;
}

#if HIREDIS_MAJOR >= 1
static void *create_double(const redisReadTask *task, double value, char *str, size_t len)
{
    redlock__reader *rd = task->privdata;
    return take(rd, 1) ? rd->base.createDouble(task, value, str, len) : NULL;
}

static void *create_bool(const redisReadTask *task, int value)
{
    redlock__reader *rd = task->privdata;
    return take(rd, 1) ? rd->base.createBool(task, value) : NULL;
}
#endif

redlock__reader *redlock__reader_new_limits(const redlock__reader_limits *limits,
                                            const redlock__alloc *alloc)
{
    redlock__reader *rd = redlock__calloc(alloc, 1, sizeof(*rd));
    if (rd == NULL)
        return NULL;
    rd->r = redisReaderCreate();
    if (rd->r == NULL || rd->r->fn == NULL) {
        redisReaderFree(rd->r);
        redlock__free(alloc, rd);
        return NULL;
    }
    rd->alloc = alloc;
    rd->limits = *limits;
    rd->base = *rd->r->fn;
    rd->fn = rd->base; /* freeObject stays hiredis's */
    rd->fn.createString = create_string;
    rd->fn.createArray = create_array;
    rd->fn.createInteger = create_integer;
    rd->fn.createNil = create_nil;
#if HIREDIS_MAJOR >= 1
    rd->fn.createDouble = create_double;
    rd->fn.createBool = create_bool;
#endif
    rd->r->fn = &rd->fn;
    rd->r->privdata = rd; /* every read task carries it to the functions above */
    return rd;
}

redlock__reader *redlock__reader_new(redlock__reader_use use, const redlock__alloc *alloc)
{
    redlock__reader_limits limits = redlock__reader_limits_of(use);
    return redlock__reader_new_limits(&limits, alloc);
}

void redlock__reader_free(redlock__reader *rd)
{
    if (rd == NULL)
        return;
    redisReaderFree(rd->r); /* calls rd->fn.freeObject: rd lives until after */
    redlock__free(rd->alloc, rd);
}

/* A limit was passed outside hiredis's calls: the reader fails as hiredis's own errors make it
 * fail (it then refuses every feed), and the reply cut off is freed now. */
static int fail_now(redlock__reader *rd)
{
    redisReader *r = rd->r;
    if (r->reply != NULL) {
        rd->fn.freeObject(r->reply);
        r->reply = NULL;
    }
    r->ridx = -1;
    r->err = REDIS_ERR_PROTOCOL;
    redlock__fmt(r->errstr, sizeof(r->errstr), "%s", rd->why);
    return -1;
}

static bool is_bulk(int type)
{
#ifdef REDIS_REPLY_VERB
    if (type == REDIS_REPLY_VERB)
        return true;
#endif
    return type == REDIS_REPLY_STRING;
}

static bool is_aggregate(int type)
{
#ifdef REDIS_REPLY_MAP
    if (type == REDIS_REPLY_MAP || type == REDIS_REPLY_SET || type == REDIS_REPLY_ATTR ||
        type == REDIS_REPLY_PUSH)
        return true;
#endif
    return type == REDIS_REPLY_ARRAY;
}

/* The reader stopped inside an item: hiredis has taken its type byte, and what is left in its
 * buffer (from r->pos) is that item's rest, so far. Refuse it while it is still short. */
static int check_pending(redlock__reader *rd)
{
    redisReader *r = rd->r;
    size_t pending = r->len - r->pos;
    if (pending == 0 || r->ridx < 0)
        return 0;
    int type = CURRENT_TASK(r)->type;
    const char *p = r->buf + r->pos;
    if (is_bulk(type) || is_aggregate(type)) {
        /* A whole header would have been taken, unless a bulk string's bytes are still due. */
        const char *end = memmem(p, REDLOCK__MIN(pending, (size_t)HEADER_MAX), "\r\n", 2);
        if (end == NULL && pending >= HEADER_MAX)
            refuse(rd, "a length of more than %d bytes", HEADER_MAX - 2);
        if (end != NULL && is_bulk(type)) {
            size_t len = 0; /* hiredis read the header: decimal digits */
            for (const char *d = p; d < end && *d >= '0' && *d <= '9'; d++)
                len = len * 10 + (size_t)(*d - '0');
            if (end - p > 18) /* 19 digits may wrap round */
                refuse(rd, "a bulk string length of %d digits", (int)(end - p));
            else if (len > rd->limits.max_bulk)
                refuse(rd, "a bulk string of %zu bytes (at most %zu on this connection)", len,
                       rd->limits.max_bulk);
        }
    } else if (pending > rd->limits.max_bulk) {
        refuse(rd, "a line of more than %zu bytes (at most that on this connection)",
               rd->limits.max_bulk);
    }
    return rd->why[0] != '\0' ? fail_now(rd) : 0;
}

int redlock__reader_feed(redlock__reader *rd, const char *data, size_t len)
{
    if (rd->why[0] != '\0' || redisReaderFeed(rd->r, data, len) != REDIS_OK)
        return -1;
    return 0;
}

int redlock__reader_get(redlock__reader *rd, redisReply **reply)
{
    *reply = NULL;
    if (rd->why[0] != '\0')
        return -1;
    void *got = NULL;
    if (redisReaderGetReply(rd->r, &got) != REDIS_OK)
        return -1;
    if (got != NULL) {
        rd->objects = 0;
        *reply = got;
        return 0;
    }
    return check_pending(rd);
}

int redlock__reader_each(redlock__reader *rd, const char *data, size_t len,
                         bool (*on)(void *ctx, redisReply *reply), void *ctx)
{
    if (redlock__reader_feed(rd, data, len) != 0)
        return -1;
    for (;;) {
        redisReply *reply = NULL;
        if (redlock__reader_get(rd, &reply) != 0)
            return -1;
        if (reply == NULL)
            return 0;
        bool go_on = on(ctx, reply);
        freeReplyObject(reply);
        if (!go_on)
            return 0;
    }
}

const char *redlock__reader_error(const redlock__reader *rd)
{
    if (rd->why[0] != '\0')
        return rd->why;
    return rd->r->errstr[0] != '\0' ? rd->r->errstr : "out of memory";
}

bool redlock__reader_idle(const redlock__reader *rd)
{
    const redisReader *r = rd->r;
    if (r->pos != r->len)
        return false;
        /* A call that found no byte to read leaves the stack's first task set up but not begun
         * (type -1): as idle as an empty stack. Without this the fast path of node.c was taken or
         * not by chance, until hiredis trimmed its buffer. */
#if HIREDIS_MAJOR >= 1
    return r->ridx == -1 || (r->ridx == 0 && r->task[0]->type == -1);
#else
    return r->ridx == -1 || (r->ridx == 0 && r->rstack[0].type == -1);
#endif
}

size_t redlock__reader_buffered(const redlock__reader *rd)
{
    return rd->r->len - rd->r->pos;
}

void redlock__reader_allow_bulk(redlock__reader *rd, size_t len)
{
    rd->limits.max_bulk = REDLOCK__MAX(rd->limits.max_bulk, len);
}
