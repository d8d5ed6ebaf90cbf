/* SPDX-License-Identifier: MIT */
/* reader.h - hiredis's RESP reader with bounds: what a server may send on one kind of
 * connection, checked before anything is allocated or buffered for it.
 *
 * hiredis reserves an array's element table as soon as it reads the header ("*2147483647" asks
 * for 16 GiB of slots, which freeReplyObject then walks one by one, seconds on the loop), and
 * buffers a bulk string whole, whatever length it announces, before handing it over. This reader
 * refuses, as a protocol error:
 *   - an array of more than max_elements elements, or nested deeper than max_depth, before
 *     hiredis allocates it (its reply object functions are ours, and run first);
 *   - a bulk string announced longer than max_bulk, as soon as its header is read, and a line
 *     (status, error, number) that grows past max_bulk before it ends;
 *   - a reply of more than max_objects objects and array slots in all.
 * So one reply costs at most the limits to hold and to free, the reader buffers at most max_bulk
 * and the chunk fed last, and a refused reply is freed at once. The limits of each kind of
 * connection are sized from the replies its commands can get (reader.c). Works with hiredis 0.14
 * and 1.x. No IO. */
#ifndef REDLOCK_READER_H
#define REDLOCK_READER_H

#include <stdbool.h>
#include <stddef.h>

#include <hiredis/hiredis.h>

#include "common.h"

typedef struct redlock__reader_limits {
    size_t max_bulk;     /* bytes of one bulk string, or of one line */
    size_t max_elements; /* of one array (a RESP3 map's keys and values count apart) */
    unsigned max_depth;  /* arrays in arrays: a flat array is depth 1 */
    size_t max_objects;  /* of one reply, each array's slots counted as objects too */
} redlock__reader_limits;

/* Who reads: what that connection's commands are answered. */
typedef enum redlock__reader_use {
    REDLOCK__READER_NODE,       /* a plain node: the handshake (INFO server) and lock scripts */
    REDLOCK__READER_CLUSTER,    /* a cluster's server: the node's, plus CLUSTER SHARDS / SLOTS */
    REDLOCK__READER_SUBSCRIBER, /* pubsub messages on the keys' channels (allow_bulk) */
    REDLOCK__READER_CHECK       /* redlock check: INFO (every default section), CLUSTER ... */
} redlock__reader_use;

typedef struct redlock__reader redlock__reader;

/* The limits of a use. */
redlock__reader_limits redlock__reader_limits_of(redlock__reader_use use);

/* A reader with the limits of use, or NULL when memory runs out. */
redlock__reader *redlock__reader_new(redlock__reader_use use, const redlock__alloc *alloc);
/* The same with limits of the caller's (the tests, the fuzzer). */
redlock__reader *redlock__reader_new_limits(const redlock__reader_limits *limits,
                                            const redlock__alloc *alloc);
/* Free it and whatever it holds (a reply cut off: bounded by the limits). NULL is allowed. */
void redlock__reader_free(redlock__reader *rd);

/* Give it bytes a server sent. 0, or -1: the reader failed (redlock__reader_error). */
int redlock__reader_feed(redlock__reader *rd, const char *data, size_t len);
/* The next whole reply into *reply (the caller frees it with freeReplyObject), or NULL when the
 * bytes fed so far end inside one. 0, or -1 with *reply NULL: the bytes are not RESP, or exceed a
 * limit (what the reply held is freed by then); the reader stays failed. */
int redlock__reader_get(redlock__reader *rd, redisReply **reply);
/* Give it data, then each whole reply in turn to on (the reply is freed after it returns) until
 * on returns false or none is whole. 0, or -1: the reader failed (redlock__reader_error). */
int redlock__reader_each(redlock__reader *rd, const char *data, size_t len,
                         bool (*on)(void *ctx, redisReply *reply), void *ctx);
/* Why it failed, for "protocol error: <why>". */
const char *redlock__reader_error(const redlock__reader *rd);
/* Whether it holds nothing: no byte of a reply it has not returned yet. */
bool redlock__reader_idle(const redlock__reader *rd);
/* Bytes it holds that no reply of it was made from yet (the fuzzer checks their bound). */
size_t redlock__reader_buffered(const redlock__reader *rd);
/* Let bulk strings of len bytes through (a subscriber's channel: a key, of any length). */
void redlock__reader_allow_bulk(redlock__reader *rd, size_t len);

#endif
