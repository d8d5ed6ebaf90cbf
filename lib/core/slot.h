/* SPDX-License-Identifier: MIT */
/* slot.h - the Redis Cluster hash slot of a key (issue 14: a node may be a whole cluster).
 *
 * A cluster splits its key space into 16384 slots; a key's slot is CRC16 (the XMODEM variant:
 * polynomial 0x1021, initial value 0, no reflection, no final xor) of the key modulo 16384. A
 * hash tag narrows what is hashed, so that related keys share a slot: when the key holds a '{'
 * and, somewhere after the FIRST '{', a '}', and at least one byte lies between that '{' and the
 * first '}' after it, only those bytes are hashed. Otherwise (no '{', no '}' after it, or the
 * empty tag "{}") the whole key is hashed. So "{user1000}.following" hashes "user1000",
 * "foo{}{bar}" hashes the whole key, "foo{{bar}}zap" hashes "{bar" and "foo{bar}{zap}" hashes
 * "bar". This is what the server computes (CLUSTER KEYSLOT); test/unit/test_slot.c checks it
 * against values a real server gave. Pure functions: no allocation, no state. */
#ifndef REDLOCK_SLOT_H
#define REDLOCK_SLOT_H

#include <stddef.h>
#include <stdint.h>

#define REDLOCK__CLUSTER_SLOTS 16384

/* CRC16/XMODEM of len bytes at data (any bytes; data may be NULL when len is 0). */
uint16_t redlock__slot_crc16(const void *data, size_t len);

/* The hash slot, 0..16383, of the key of len bytes at key (binary-safe; key may be NULL when
 * len is 0), hash tags respected as described above. */
uint16_t redlock__slot_of_key(const char *key, size_t len);

/* Where the hashed part of the key starts and how long it is: the hash tag's content when the key
 * has a non-empty tag, else the whole key. 1 when a tag was found, 0 otherwise. */
int redlock__slot_hash_tag(const char *key, size_t len, size_t *start, size_t *tag_len);

#endif /* REDLOCK_SLOT_H */
