/* SPDX-License-Identifier: MIT */
/* fuzz_reader.c - libFuzzer target: bytes from a server -> the bounded reader (lib/core/reader.h).
 *
 * The first byte picks the limits: one of the connections' own, or small ones from the next four
 * bytes (so that every limit is hit); the rest is fed in chunks of 1..64 bytes, each size taken
 * from the byte before it, as a socket would deliver them. Checks, whatever the bytes: every
 * reply the reader hands over is within the limits (no array longer than max_elements, no nesting
 * deeper than max_depth, no string longer than max_bulk, no more than max_objects objects and
 * slots); what it holds between reads never exceeds the longest item it may still take
 * (max_bulk and a header); a failed reader stays failed. Unlike the other targets that read RESP,
 * this one skips no input: a header of any size must be refused before anything is allocated for
 * it, which libFuzzer's malloc limit (run.sh: -rss_limit_mb) would catch. */
#include <stdint.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "reader.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            __builtin_trap();                                                                      \
    } while (0)

/* A header's digits, sign and CRLF: the reader refuses a longer one (reader.c). */
#define HEADER_SLACK 32

/* Walk r at depth, counting its objects (an array's slots too) into *objects. */
static void walk(const redisReply *r, const redlock__reader_limits *lim, unsigned depth,
                 size_t *objects)
{
    *objects += 1;
    if (r->type == REDIS_REPLY_ARRAY
#ifdef REDIS_REPLY_MAP
        || r->type == REDIS_REPLY_MAP || r->type == REDIS_REPLY_SET ||
        r->type == REDIS_REPLY_PUSH || r->type == REDIS_REPLY_ATTR
#endif
    ) {
        CHECK(depth + 1 <= lim->max_depth);
        CHECK(r->elements <= lim->max_elements);
        *objects += r->elements;
        for (size_t i = 0; i < r->elements; i++)
            walk(r->element[i], lim, depth + 1, objects);
        return;
    }
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ||
        r->type == REDIS_REPLY_ERROR)
        CHECK(r->len <= lim->max_bulk);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5)
        return 0;
    redlock__reader_limits lim;
    if (data[0] < 4) {
        lim = redlock__reader_limits_of((redlock__reader_use)data[0]);
    } else {
        lim = (redlock__reader_limits){.max_bulk = 1 + (size_t)data[1] * 4,
                                       .max_elements = data[2] % 40,
                                       .max_depth = 1 + data[3] % 7,
                                       .max_objects = 1 + (size_t)data[4] * 4};
    }
    data += 5;
    size -= 5;
    redlock__alloc alloc;
    redlock__alloc_init(&alloc, NULL, NULL);
    redlock__reader *rd = redlock__reader_new_limits(&lim, &alloc);
    CHECK(rd != NULL);
    bool failed = false;
    for (size_t pos = 0; pos < size && !failed;) {
        size_t chunk = 1 + data[pos] % 64;
        pos++;
        if (chunk > size - pos)
            chunk = size - pos;
        failed = redlock__reader_feed(rd, (const char *)data + pos, chunk) != 0;
        pos += chunk;
        redisReply *reply = NULL;
        while (!failed && !(failed = redlock__reader_get(rd, &reply) != 0) && reply != NULL) {
            size_t objects = 0;
            walk(reply, &lim, 0, &objects);
            CHECK(objects <= lim.max_objects);
            freeReplyObject(reply);
            reply = NULL;
        }
        CHECK(reply == NULL);
        if (!failed)
            CHECK(redlock__reader_buffered(rd) <= lim.max_bulk + HEADER_SLACK);
    }
    if (failed) { /* it stays failed */
        redisReply *reply = NULL;
        CHECK(redlock__reader_feed(rd, ":1\r\n", 4) != 0);
        CHECK(redlock__reader_get(rd, &reply) != 0 && reply == NULL);
        CHECK(redlock__reader_error(rd)[0] != '\0');
    }
    redlock__reader_free(rd);
    return 0;
}
