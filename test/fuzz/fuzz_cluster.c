/* SPDX-License-Identifier: MIT */
/* fuzz_cluster.c - libFuzzer target: bytes from a cluster node -> the library's reader -> the
 * slot map's loaders (CLUSTER SHARDS and CLUSTER SLOTS), the MOVED / ASK parser and MOVED
 * updates (lib/core/cluster_map.c).
 *
 * The first byte sets whether the loads get a reply host and how long the message buffer is;
 * the rest is fed to the reader in chunks. One map lives through the whole input, so that each
 * reply meets whatever the earlier ones left (up to 8 replies an input). Every reply is loaded both
 * ways; an error or status reply's text is also parsed as a redirect and, when it is one, applied
 * as MOVED. The input as a whole is parsed as a redirect text too. Checks after every step: each
 * slot's owner is a master of the map and each master's count of slots is right, hosts and ids are
 * within their bounds; a refused load leaves the map exactly as it was, with a NUL-terminated
 * message inside err_len; a parsed redirect's fields are in range. Leaks are found by ASan. */
#include <stdint.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "cluster_map.h"
#include "fuzz_resp.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            __builtin_trap();                                                                      \
    } while (0)

typedef struct run {
    redlock__cluster_map *map;
    const char *reply_host;
    size_t err_len;
    int replies_left; /* each reply costs a few passes over the 16384 slots: keep inputs quick */
} run;

static void check_map(const redlock__cluster_map *map)
{
    static uint32_t counts[REDLOCK__CLUSTER_MASTERS_MAX];
    CHECK(map->masters_len <= REDLOCK__CLUSTER_MASTERS_MAX);
    CHECK(map->masters_len <= map->masters_cap);
    memset(counts, 0, sizeof(counts));
    for (size_t s = 0; s < REDLOCK__CLUSTER_SLOTS; s++) {
        if (map->owner[s] == REDLOCK__CLUSTER_NO_MASTER) {
            CHECK(redlock__cluster_map_master(map, (unsigned)s) == -1);
            continue;
        }
        CHECK(map->owner[s] < map->masters_len);
        CHECK(redlock__cluster_map_master(map, (unsigned)s) == map->owner[s]);
        counts[map->owner[s]]++;
    }
    for (size_t i = 0; i < map->masters_len; i++) {
        const redlock__cluster_master *m = &map->masters[i];
        CHECK(counts[i] == m->slots);
        size_t host_len = strlen(m->host);
        CHECK(host_len >= 1 && host_len <= REDLOCK__CLUSTER_HOST_MAX);
        CHECK(m->id == NULL || (strlen(m->id) >= 1 && strlen(m->id) <= REDLOCK__CLUSTER_ID_MAX));
        CHECK(m->port >= 0 && m->port <= 65535 && m->tls_port >= 0 && m->tls_port <= 65535);
        CHECK(m->port != 0 || m->tls_port != 0);
    }
}

/* What a refused load must leave as it was, copied with libc (not instrumented: quick). */
typedef struct snapshot {
    uint16_t owner[REDLOCK__CLUSTER_SLOTS];
    redlock__cluster_master masters[REDLOCK__CLUSTER_MASTERS_MAX];
    const redlock__cluster_master *masters_at;
    size_t masters_len;
} snapshot;

static void take(snapshot *snap, const redlock__cluster_map *map)
{
    memcpy(snap->owner, map->owner, sizeof(snap->owner));
    if (map->masters_len > 0) /* masters may be NULL */
        memcpy(snap->masters, map->masters, map->masters_len * sizeof(map->masters[0]));
    snap->masters_at = map->masters;
    snap->masters_len = map->masters_len;
}

static int same(const snapshot *snap, const redlock__cluster_map *map)
{
    return snap->masters_at == map->masters && snap->masters_len == map->masters_len &&
           memcmp(snap->owner, map->owner, sizeof(snap->owner)) == 0 &&
           (map->masters_len == 0 ||
            memcmp(snap->masters, map->masters, map->masters_len * sizeof(map->masters[0])) == 0);
}

static void load(run *r, const redisReply *reply, int shards)
{
    char err[REDLOCK_ERROR_TEXT_MAX * 2];
    memset(err, 0x55, sizeof(err));
    static snapshot before;
    take(&before, r->map);
    int rc = shards
                 ? redlock__cluster_map_load_shards(r->map, reply, r->reply_host, err, r->err_len)
                 : redlock__cluster_map_load_slots(r->map, reply, r->reply_host, err, r->err_len);
    CHECK(rc == 0 || rc == REDLOCK_EINVAL || rc == REDLOCK_ENOMEM);
    if (rc != 0) {
        CHECK(same(&before, r->map));
        if (r->err_len > 0) {
            CHECK(memchr(err, '\0', r->err_len) != NULL);
            CHECK(r->err_len == 1 || err[0] != '\0');
        }
    }
    for (size_t i = r->err_len; i < sizeof(err); i++)
        CHECK((unsigned char)err[i] == 0x55); /* never written past err_len */
    if (rc == 0)
        check_map(r->map);
}

static void redirect(run *r, const char *text, size_t len)
{
    redlock__redirect to;
    int rc = redlock__cluster_map_parse_redirect(text, len, &to);
    CHECK(rc == 1 || rc == 0 || rc == REDLOCK_EINVAL);
    if (rc != 1) {
        CHECK(to.kind == 0 && to.port == 0 && to.host[0] == '\0');
        return;
    }
    CHECK(to.kind == REDLOCK__REDIRECT_MOVED || to.kind == REDLOCK__REDIRECT_ASK);
    CHECK(to.slot < REDLOCK__CLUSTER_SLOTS && to.port >= 1 && to.port <= 65535);
    CHECK(strlen(to.host) <= REDLOCK__CLUSTER_HOST_MAX);
    CHECK(len >= strlen(to.host)); /* the host came from the text */
    /* The empty host means the connection's own: the caller fills it in. */
    int i =
        redlock__cluster_map_moved(r->map, to.slot, to.host[0] ? to.host : "127.0.0.1", to.port);
    CHECK(i == REDLOCK_ENOMEM || (i >= 0 && (size_t)i < r->map->masters_len &&
                                  redlock__cluster_map_master(r->map, to.slot) == i));
    check_map(r->map);
}

static int on_reply(const redisReply *reply, void *ud)
{
    run *r = ud;
    load(r, reply, 1);
    load(r, reply, 0);
    if ((reply->type == REDIS_REPLY_ERROR || reply->type == REDIS_REPLY_STATUS ||
         reply->type == REDIS_REPLY_STRING) &&
        reply->str != NULL)
        redirect(r, reply->str, reply->len);
    return --r->replies_left > 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    redlock__alloc alloc;
    redlock__alloc_init(&alloc, NULL, NULL);
    static redlock__cluster_map map; /* 32 KiB: not on the stack */
    redlock__cluster_map_init(&map, &alloc);
    run r = {.map = &map,
             .reply_host = (data[0] & 1) ? "seed.example" : NULL,
             .err_len = (data[0] & 2) ? (size_t)(data[1] % REDLOCK_ERROR_TEXT_MAX) : 160,
             .replies_left = 8};
    data += 2;
    size -= 2;
    redirect(&r, (const char *)data, size);
    fuzz_replies(data, size, REDLOCK__READER_CLUSTER, on_reply, &r);
    redlock__cluster_map_free(&map);
    return 0;
}
