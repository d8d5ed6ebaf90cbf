/* SPDX-License-Identifier: MIT */
/* fuzz_resp.h - what the fuzz targets that read a node's bytes share: the feeding of bytes to the
 * library's reader in chunks as a socket would deliver them. Header-only: each target is built
 * from one .c file (run.sh). */
#ifndef REDLOCK_FUZZ_RESP_H
#define REDLOCK_FUZZ_RESP_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "reader.h"

/* Feed data to a new reader with the limits of use (the library's bounded reader,
 * lib/core/reader.h: a header of any size is refused before anything is allocated for it, so no
 * input needs skipping), each chunk's size (1..64) taken from the byte before it, and call on_reply
 * for every reply the reader completes (the reply is freed after it returns). Ends at the input's
 * end, at a protocol error or a refusal, or when on_reply returns 0. */
static inline void fuzz_replies(const uint8_t *data, size_t size, redlock__reader_use use,
                                int (*on_reply)(const redisReply *reply, void *ud), void *ud)
{
    redlock__alloc alloc;
    redlock__alloc_init(&alloc, NULL, NULL);
    redlock__reader *r = redlock__reader_new(use, &alloc);
    if (r == NULL)
        __builtin_trap();
    int alive = 1;
    size_t pos = 0;
    while (alive && pos < size) {
        size_t chunk = 1 + data[pos] % 64;
        pos++;
        if (chunk > size - pos)
            chunk = size - pos;
        if (redlock__reader_feed(r, (const char *)data + pos, chunk) != 0)
            break;
        pos += chunk;
        redisReply *reply = NULL;
        int rc = 0;
        while (alive && (rc = redlock__reader_get(r, &reply)) == 0 && reply != NULL) {
            alive = on_reply(reply, ud);
            freeReplyObject(reply);
            reply = NULL;
        }
        if (rc != 0)
            break;
    }
    redlock__reader_free(r);
}

#endif /* REDLOCK_FUZZ_RESP_H */
