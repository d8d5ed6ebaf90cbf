/* SPDX-License-Identifier: MIT */
/* fuzz_resp.h - what the fuzz targets that read a node's bytes share: the guard against reply
 * headers no server sends, and the feeding of bytes to hiredis's reader in chunks as a socket
 * would deliver them. Header-only: each target is built from one .c file (run.sh). */
#ifndef REDLOCK_FUZZ_RESP_H
#define REDLOCK_FUZZ_RESP_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

/* An aggregate or bulk header ('*' or '$' then digits) over a million. hiredis 0.14's reader
 * allocates an array's element table as soon as it reads the header, so "*11111111111\r\n" asks
 * calloc for 88 GB: a property of hiredis (nodes are trusted Redis servers), not of the code
 * under test. Targets skip such inputs. */
static inline int fuzz_huge_header(const uint8_t *data, size_t size)
{
    for (size_t i = 0; i < size; i++) {
        if (data[i] != '*' && data[i] != '$')
            continue;
        size_t digits = 0;
        while (i + 1 + digits < size && data[i + 1 + digits] >= '0' && data[i + 1 + digits] <= '9')
            digits++;
        if (digits > 6)
            return 1;
    }
    return 0;
}

/* Feed data to a new reader, each chunk's size (1..64) taken from the byte before it, and call
 * on_reply for every reply the reader completes (the reply is freed after it returns). Ends at
 * the input's end, at a protocol error, or when on_reply returns 0. */
static inline void fuzz_replies(const uint8_t *data, size_t size,
                                int (*on_reply)(const redisReply *reply, void *ud), void *ud)
{
    redisReader *r = redisReaderCreate();
    if (r == NULL)
        __builtin_trap();
    int alive = 1;
    size_t pos = 0;
    while (alive && pos < size) {
        size_t chunk = 1 + data[pos] % 64;
        pos++;
        if (chunk > size - pos)
            chunk = size - pos;
        if (redisReaderFeed(r, (const char *)data + pos, chunk) != REDIS_OK)
            break;
        pos += chunk;
        void *reply = NULL;
        int rc = REDIS_OK;
        while (alive && (rc = redisReaderGetReply(r, &reply)) == REDIS_OK && reply != NULL) {
            alive = on_reply(reply, ud);
            freeReplyObject(reply);
            reply = NULL;
        }
        if (rc != REDIS_OK)
            break;
    }
    redisReaderFree(r);
}

#endif /* REDLOCK_FUZZ_RESP_H */
