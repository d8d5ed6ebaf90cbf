/* SPDX-License-Identifier: MIT */
/* slot.c - CRC16/XMODEM and the hash slot of a key, as Redis Cluster computes them (slot.h). */
#include "slot.h"

#include <string.h>

/* The CRC of each 4-bit value shifted into the top of the register: the remainder of i * x^16
 * by the polynomial 0x1021, for i = 0..15. Working a nibble at a time needs 16 entries instead
 * of a byte table's 256 and costs two lookups a byte; keys are short, so that is plenty. */
static const uint16_t nibble_crc[16] = {
    0x0000, 0x1021, 0x2042, 0x3063, 0x4084, 0x50a5, 0x60c6, 0x70e7,
    0x8108, 0x9129, 0xa14a, 0xb16b, 0xc18c, 0xd1ad, 0xe1ce, 0xf1ef,
};

uint16_t redlock__crc16(const void *data, size_t len)
{
    const unsigned char *p = data;
    unsigned crc = 0;
    for (size_t i = 0; i < len; i++) {
        /* Feed the byte's high nibble, then its low nibble, most significant bit first. */
        crc = (crc << 4) ^ nibble_crc[((crc >> 12) ^ (p[i] >> 4)) & 0x0f];
        crc = (crc << 4) ^ nibble_crc[((crc >> 12) ^ (p[i] & 0x0f)) & 0x0f];
        crc &= 0xffff;
    }
    return (uint16_t)crc;
}

int redlock__key_hash_tag(const char *key, size_t len, size_t *start, size_t *tag_len)
{
    *start = 0;
    *tag_len = len;
    if (len == 0)
        return 0;
    const char *open = memchr(key, '{', len);
    if (open == NULL)
        return 0;
    size_t from = (size_t)(open - key) + 1;
    const char *close = memchr(key + from, '}', len - from);
    /* No '}' after the first '{', or "{}": the whole key counts, later braces are not looked
     * at (so "foo{}{bar}" is not tagged "bar"). */
    if (close == NULL || close == key + from)
        return 0;
    *start = from;
    *tag_len = (size_t)(close - (key + from));
    return 1;
}

uint16_t redlock__key_slot(const char *key, size_t len)
{
    size_t start, n;
    redlock__key_hash_tag(key, len, &start, &n);
    return (uint16_t)(redlock__crc16(n > 0 ? key + start : NULL, n) & (REDLOCK__CLUSTER_SLOTS - 1));
}
