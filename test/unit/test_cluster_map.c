/* SPDX-License-Identifier: MIT */
/* test_cluster_map.c - the slot map of a Redis Cluster node (lib/core/cluster_map.c): CLUSTER
 * SHARDS and CLUSTER SLOTS replies in, which master owns which slot out; malformed replies refused
 * with a message and the map left as it was; MOVED updates; MOVED / ASK texts.
 *
 * Inputs are RESP text, parsed with hiredis's own reader as a node's bytes would be. In the
 * hand-made ones a line "$=text" stands for the bulk string "text" (resp() writes its length),
 * so they stay readable. The real_* replies are what redis-server 7.0.15 sent: a cluster of
 * three masters with a replica each (ports 21300..21305 on 127.0.0.1, --cluster-node-timeout
 * 1000, --cluster-replica-no-failover yes, made with redis-cli --cluster create, 100 slots then
 * resharded from the first master to the third so that it owns two ranges) was asked CLUSTER
 * SHARDS and CLUSTER SLOTS over a plain socket and the bytes kept as they came; real_shards_failed
 * was taken after the third master (127.0.0.1:21302) was stopped and marked failed (CLUSTER
 * SLOTS then answered exactly real_slots). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "cluster_map.h"

#define ERR_LEN 256

/* ---- helpers ------------------------------------------------------------------------------ */

/* RESP text -> one reply, "$=text" lines expanded to bulk strings. Fails the test unless the
 * text is exactly one complete reply. */
static redisReply *resp(const char *text)
{
    size_t cap = strlen(text) * 2 + 64, n = 0;
    char *raw = malloc(cap);
    assert_non_null(raw);
    const char *p = text;
    while (*p != '\0') {
        const char *eol = strstr(p, "\r\n");
        assert_non_null(eol);
        size_t line = (size_t)(eol - p);
        if (line >= 2 && p[0] == '$' && p[1] == '=')
            n += (size_t)snprintf(raw + n, cap - n, "$%zu\r\n%.*s\r\n", line - 2, (int)(line - 2),
                                  p + 2);
        else
            n += (size_t)snprintf(raw + n, cap - n, "%.*s\r\n", (int)line, p);
        assert_true(n < cap);
        p = eol + 2;
    }
    redisReader *r = redisReaderCreate();
    assert_non_null(r);
    assert_int_equal(redisReaderFeed(r, raw, n), REDIS_OK);
    void *reply = NULL;
    assert_int_equal(redisReaderGetReply(r, &reply), REDIS_OK);
    assert_non_null(reply);
    void *more = NULL;
    assert_int_equal(redisReaderGetReply(r, &more), REDIS_OK);
    assert_null(more);
    redisReaderFree(r);
    free(raw);
    return reply;
}

static redlock__cluster_map *new_map(void)
{
    redlock__cluster_map *map = malloc(sizeof(*map));
    assert_non_null(map);
    redlock__alloc a;
    redlock__alloc_init(&a, NULL, NULL);
    redlock__cluster_map_init(map, &a);
    return map;
}

static void drop_map(redlock__cluster_map *map)
{
    redlock__cluster_map_free(map);
    free(map);
}

enum { SHARDS, SLOTS };

static int load_text(redlock__cluster_map *map, int kind, const char *text, char *err,
                     size_t err_len)
{
    redisReply *reply = resp(text);
    int rc = kind == SHARDS ? redlock__cluster_map_load_shards(map, reply, NULL, err, err_len)
                            : redlock__cluster_map_load_slots(map, reply, NULL, err, err_len);
    freeReplyObject(reply);
    return rc;
}

static void load_ok(redlock__cluster_map *map, int kind, const char *text)
{
    char err[ERR_LEN] = "";
    int rc = load_text(map, kind, text, err, sizeof(err));
    if (rc != 0)
        fail_msg("load failed (%d): %s", rc, err);
}

/* Everything a caller can see of a map, hashed: "unchanged" is "same digest". */
static uint64_t digest(const redlock__cluster_map *map)
{
    uint64_t h = redlock__hash(map->owner, sizeof(map->owner)) ^ map->masters_len;
    for (size_t i = 0; i < map->masters_len; i++) {
        const redlock__cluster_master *m = &map->masters[i];
        h = h * 31 + redlock__hash(m->host, strlen(m->host));
        h = h * 31 + (m->id != NULL ? redlock__hash(m->id, strlen(m->id)) : 7);
        h = h * 31 + (uint64_t)m->port * 65536 + (uint64_t)m->tls_port;
        h = h * 31 + (uint64_t)m->online * 100000 + m->slots;
    }
    return h;
}

/* The master owning slot, checked to be at host:port. */
static const redlock__cluster_master *owner_of(const redlock__cluster_map *map, unsigned slot)
{
    int i = redlock__cluster_map_master(map, slot);
    if (i < 0)
        fail_msg("slot %u has no master", slot);
    return &map->masters[i];
}

static void expect_range(const redlock__cluster_map *map, unsigned start, unsigned end,
                         const char *host, int port)
{
    for (unsigned s = start; s <= end; s++) {
        const redlock__cluster_master *m = owner_of(map, s);
        if (strcmp(m->host, host) != 0 || m->port != port)
            fail_msg("slot %u is at %s:%d, expected %s:%d", s, m->host, m->port, host, port);
    }
}

/* Whole-map check of the captured cluster: 0-99 and 10923-16383 on 21302, 100-5460 on 21300,
 * 5461-10922 on 21301, replicas nowhere. */
static void expect_captured_cluster(const redlock__cluster_map *map, int third_online)
{
    assert_int_equal(map->masters_len, 3);
    expect_range(map, 0, 99, "127.0.0.1", 21302);
    expect_range(map, 100, 5460, "127.0.0.1", 21300);
    expect_range(map, 5461, 10922, "127.0.0.1", 21301);
    expect_range(map, 10923, 16383, "127.0.0.1", 21302);
    const redlock__cluster_master *a = owner_of(map, 100), *b = owner_of(map, 5461),
                                  *c = owner_of(map, 0);
    assert_int_equal(a->slots, 5361);
    assert_int_equal(b->slots, 5462);
    assert_int_equal(c->slots, 5561);
    assert_int_equal(a->slots + b->slots + c->slots, REDLOCK__CLUSTER_SLOTS);
    assert_true(a->online && b->online);
    assert_int_equal(c->online, third_online);
    assert_int_equal(c->tls_port, 0);
    assert_string_equal(c->id, "6ae377c72f56bd0972b9de174f5d16079db1832b");
    assert_string_equal(a->id, "d7459e2e6e8db10c25146d90d292d10a23bb7766");
    assert_string_equal(b->id, "44b8f93ce158cfae7a6a391e24e21c4bf4e48243");
}

/* ---- real replies ------------------------------------------------------------------------- */

static const char real_shards[] =
    "*3\r\n"
    "*4\r\n$5\r\nslots\r\n"
    "*2\r\n:100\r\n:5460\r\n$5\r\nnodes\r\n"
    "*2\r\n"
    "*14\r\n$2\r\nid\r\n$40\r\nd7459e2e6e8db10c25146d90d292d10a23bb7766\r\n$4\r\nport\r\n"
    ":21300\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n"
    "$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:42\r\n$6\r\nhealth\r\n"
    "$6\r\nonline\r\n"
    "*14\r\n$2\r\nid\r\n$40\r\n843632a22104fb93bc9e215572d0911004b7c5db\r\n$4\r\nport\r\n"
    ":21303\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n"
    "$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-offset\r\n:42\r\n$6\r\nhealth\r\n"
    "$6\r\nonline\r\n"
    "*4\r\n$5\r\nslots\r\n"
    "*4\r\n:0\r\n:99\r\n:10923\r\n:16383\r\n$5\r\nnodes\r\n"
    "*2\r\n"
    "*14\r\n$2\r\nid\r\n$40\r\n6ae377c72f56bd0972b9de174f5d16079db1832b\r\n$4\r\nport\r\n"
    ":21302\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n"
    "$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:42\r\n$6\r\nhealth\r\n"
    "$6\r\nonline\r\n"
    "*14\r\n$2\r\nid\r\n$40\r\n6a26b36612d6c7e97bf4b6baa5f11eb0df0c6fa5\r\n$4\r\nport\r\n"
    ":21305\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n"
    "$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-offset\r\n:42\r\n$6\r\nhealth\r\n"
    "$6\r\nonline\r\n"
    "*4\r\n$5\r\nslots\r\n"
    "*2\r\n:5461\r\n:10922\r\n$5\r\nnodes\r\n"
    "*2\r\n"
    "*14\r\n$2\r\nid\r\n$40\r\n44b8f93ce158cfae7a6a391e24e21c4bf4e48243\r\n$4\r\nport\r\n"
    ":21301\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n"
    "$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:42\r\n$6\r\nhealth\r\n"
    "$6\r\nonline\r\n"
    "*14\r\n$2\r\nid\r\n$40\r\nab18d3909dff5adf06d55ac5bd859ec8706497e7\r\n$4\r\nport\r\n"
    ":21304\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n"
    "$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-offset\r\n:42\r\n$6\r\nhealth\r\n"
    "$6\r\nonline\r\n";

static const char real_slots[] =
    "*4\r\n"
    "*4\r\n:0\r\n:99\r\n"
    "*4\r\n$9\r\n127.0.0.1\r\n:21302\r\n$40\r\n6ae377c72f56bd0972b9de174f5d16079db1832b\r\n"
    "*0\r\n"
    "*4\r\n$9\r\n127.0.0.1\r\n:21305\r\n$40\r\n6a26b36612d6c7e97bf4b6baa5f11eb0df0c6fa5\r\n"
    "*0\r\n"
    "*4\r\n:100\r\n:5460\r\n"
    "*4\r\n$9\r\n127.0.0.1\r\n:21300\r\n$40\r\nd7459e2e6e8db10c25146d90d292d10a23bb7766\r\n"
    "*0\r\n"
    "*4\r\n$9\r\n127.0.0.1\r\n:21303\r\n$40\r\n843632a22104fb93bc9e215572d0911004b7c5db\r\n"
    "*0\r\n"
    "*4\r\n:5461\r\n:10922\r\n"
    "*4\r\n$9\r\n127.0.0.1\r\n:21301\r\n$40\r\n44b8f93ce158cfae7a6a391e24e21c4bf4e48243\r\n"
    "*0\r\n"
    "*4\r\n$9\r\n127.0.0.1\r\n:21304\r\n$40\r\nab18d3909dff5adf06d55ac5bd859ec8706497e7\r\n"
    "*0\r\n"
    "*4\r\n:10923\r\n:16383\r\n"
    "*4\r\n$9\r\n127.0.0.1\r\n:21302\r\n$40\r\n6ae377c72f56bd0972b9de174f5d16079db1832b\r\n"
    "*0\r\n"
    "*4\r\n$9\r\n127.0.0.1\r\n:21305\r\n$40\r\n6a26b36612d6c7e97bf4b6baa5f11eb0df0c6fa5\r\n"
    "*0\r\n";

static const char real_shards_failed[] =
    "*3\r\n"
    "*4\r\n$5\r\nslots\r\n"
    "*2\r\n:100\r\n:5460\r\n$5\r\nnodes\r\n"
    "*2\r\n"
    "*14\r\n$2\r\nid\r\n$40\r\nd7459e2e6e8db10c25146d90d292d10a23bb7766\r\n$4\r\nport\r\n"
    ":21300\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n"
    "$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:42\r\n$6\r\nhealth\r\n"
    "$6\r\nonline\r\n"
    "*14\r\n$2\r\nid\r\n$40\r\n843632a22104fb93bc9e215572d0911004b7c5db\r\n$4\r\nport\r\n"
    ":21303\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n"
    "$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-offset\r\n:42\r\n$6\r\nhealth\r\n"
    "$6\r\nonline\r\n"
    "*4\r\n$5\r\nslots\r\n"
    "*4\r\n:0\r\n:99\r\n:10923\r\n:16383\r\n$5\r\nnodes\r\n"
    "*2\r\n"
    "*14\r\n$2\r\nid\r\n$40\r\n6ae377c72f56bd0972b9de174f5d16079db1832b\r\n$4\r\nport\r\n"
    ":21302\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n"
    "$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:42\r\n$6\r\nhealth\r\n"
    "$4\r\nfail\r\n"
    "*14\r\n$2\r\nid\r\n$40\r\n6a26b36612d6c7e97bf4b6baa5f11eb0df0c6fa5\r\n$4\r\nport\r\n"
    ":21305\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n"
    "$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-offset\r\n:42\r\n$6\r\nhealth\r\n"
    "$6\r\nonline\r\n"
    "*4\r\n$5\r\nslots\r\n"
    "*2\r\n:5461\r\n:10922\r\n$5\r\nnodes\r\n"
    "*2\r\n"
    "*14\r\n$2\r\nid\r\n$40\r\n44b8f93ce158cfae7a6a391e24e21c4bf4e48243\r\n$4\r\nport\r\n"
    ":21301\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n"
    "$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:42\r\n$6\r\nhealth\r\n"
    "$6\r\nonline\r\n"
    "*14\r\n$2\r\nid\r\n$40\r\nab18d3909dff5adf06d55ac5bd859ec8706497e7\r\n$4\r\nport\r\n"
    ":21304\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n"
    "$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-offset\r\n:42\r\n$6\r\nhealth\r\n"
    "$6\r\nonline\r\n";

static void test_real_shards(void **state)
{
    (void)state;
    redlock__cluster_map *map = new_map();
    load_ok(map, SHARDS, real_shards);
    expect_captured_cluster(map, 1);
    drop_map(map);
}

static void test_real_slots(void **state)
{
    (void)state;
    redlock__cluster_map *from_shards = new_map(), *from_slots = new_map();
    load_ok(from_shards, SHARDS, real_shards);
    load_ok(from_slots, SLOTS, real_slots);
    expect_captured_cluster(from_slots, 1);
    /* The same owner for every slot (the masters' order may differ: compare their ids). */
    for (unsigned s = 0; s < REDLOCK__CLUSTER_SLOTS; s++)
        assert_string_equal(owner_of(from_shards, s)->id, owner_of(from_slots, s)->id);
    drop_map(from_shards);
    drop_map(from_slots);
}

/* A stopped master keeps its slots (nobody took them over), marked not online in SHARDS; SLOTS
 * does not say, so it stays online there. */
static void test_real_failed_master(void **state)
{
    (void)state;
    redlock__cluster_map *map = new_map();
    load_ok(map, SHARDS, real_shards_failed);
    expect_captured_cluster(map, 0);
    /* The server's CLUSTER SLOTS reply then was byte for byte the one before the stop. */
    load_ok(map, SLOTS, real_slots);
    expect_captured_cluster(map, 1);
    drop_map(map);
}

/* What the same cluster answered to a write of "foo" on the wrong master, and to a key of slot
 * 50 while that slot was migrating from 21302 to 21301. */
static void test_real_redirects(void **state)
{
    (void)state;
    redisReply *moved = resp("-MOVED 12182 127.0.0.1:21302\r\n");
    redisReply *ask = resp("-ASK 50 127.0.0.1:21301\r\n");
    redlock__redirect r;
    assert_int_equal(redlock__cluster_map_parse_redirect(moved->str, moved->len, &r), 1);
    assert_int_equal(r.kind, REDLOCK__REDIRECT_MOVED);
    assert_int_equal(r.slot, 12182);
    assert_int_equal(r.slot, redlock__slot_of_key("foo", 3));
    assert_string_equal(r.host, "127.0.0.1");
    assert_int_equal(r.port, 21302);

    redlock__cluster_map *map = new_map();
    load_ok(map, SHARDS, real_shards);
    assert_int_equal(redlock__cluster_map_moved(map, r.slot, r.host, r.port),
                     redlock__cluster_map_master(map, 12182)); /* already there: no change */
    assert_int_equal(map->masters_len, 3);

    assert_int_equal(redlock__cluster_map_parse_redirect(ask->str, ask->len, &r), 1);
    assert_int_equal(r.kind, REDLOCK__REDIRECT_ASK);
    assert_int_equal(r.slot, 50);
    assert_string_equal(r.host, "127.0.0.1");
    assert_int_equal(r.port, 21301);
    drop_map(map);
    freeReplyObject(moved);
    freeReplyObject(ask);
}

/* ---- hand-made CLUSTER SHARDS ------------------------------------------------------------- */

#define NODE(id, port, ip, endpoint, role, health)                                                 \
    "*14\r\n$=id\r\n$=" id "\r\n$=port\r\n:" port "\r\n$=ip\r\n$=" ip                              \
    "\r\n$=endpoint\r\n$=" endpoint "\r\n$=role\r\n$=" role                                        \
    "\r\n$=replication-offset\r\n:1\r\n$=health\r\n$=" health "\r\n"
#define MASTER(id, port) NODE(id, port, "127.0.0.1", "127.0.0.1", "master", "online")
#define REPLICA(id, port) NODE(id, port, "127.0.0.1", "127.0.0.1", "replica", "online")
/* A shard: slots (count of numbers, then the numbers), nodes (count, then the nodes). */
#define SHARD(n_slots, slots, n_nodes, nodes)                                                      \
    "*4\r\n$=slots\r\n*" n_slots "\r\n" slots "$=nodes\r\n*" n_nodes "\r\n" nodes

static void test_shards_shapes(void **state)
{
    (void)state;
    redlock__cluster_map *map = new_map();
    char err[ERR_LEN];
    /* Three ranges in one shard; a replica; a shard of replicas only; a master with no slots;
     * a hostname endpoint; slots sent as strings; a master loading, with a failed replica; slots 50
     * and up unowned. */
    /* clang-format off */
    const char *text = "*5\r\n"
        SHARD("6", ":0\r\n:9\r\n:20\r\n:29\r\n$=40\r\n$=49\r\n",
              "2", MASTER("aaaa", "7000") REPLICA("bbbb", "7001"))
        SHARD("0", "", "1", REPLICA("cccc", "7002"))
        SHARD("0", "", "1", MASTER("dddd", "7003"))
        SHARD("2", ":10\r\n:19\r\n",
              "1", NODE("eeee", "7004", "127.0.0.2", "redis-e.example", "master", "online"))
        SHARD("2", ":30\r\n:39\r\n",
              "2", NODE("ffff", "7005", "127.0.0.3", "127.0.0.3", "master", "loading")
                   NODE("gggg", "7006", "127.0.0.3", "127.0.0.3", "slave", "fail"));
    /* clang-format on */
    assert_int_equal(load_text(map, SHARDS, text, err, sizeof(err)), 0);
    assert_int_equal(map->masters_len, 3);
    expect_range(map, 0, 9, "127.0.0.1", 7000);
    expect_range(map, 20, 29, "127.0.0.1", 7000);
    expect_range(map, 40, 49, "127.0.0.1", 7000);
    expect_range(map, 10, 19, "redis-e.example", 7004);
    expect_range(map, 30, 39, "127.0.0.3", 7005);
    assert_int_equal(owner_of(map, 0)->slots, 30);
    assert_int_equal(owner_of(map, 30)->online, 0);
    assert_int_equal(owner_of(map, 10)->online, 1);
    assert_string_equal(owner_of(map, 10)->id, "eeee");
    for (unsigned s = 50; s < REDLOCK__CLUSTER_SLOTS; s++)
        assert_int_equal(redlock__cluster_map_master(map, s), -1);
    assert_int_equal(redlock__cluster_map_master(map, REDLOCK__CLUSTER_SLOTS), -1);
    drop_map(map);
}

static void test_shards_endpoints(void **state)
{
    (void)state;
    redlock__cluster_map *map = new_map();
    char err[ERR_LEN];
    /* endpoint "?" falls back to ip; a TLS-only master; unknown fields (with an aggregate value)
     * and the hostname field are ignored. */
    const char *text = "*2\r\n" SHARD("2", ":0\r\n:0\r\n", "1",
                                      NODE("aaaa", "7000", "127.0.0.7", "?", "master", "online"))
        SHARD("2", ":1\r\n:1\r\n", "1",
              "*14\r\n$=id\r\n$=bbbb\r\n$=tls-port\r\n:7443\r\n$=hostname\r\n$=b.example\r\n"
              "$=future\r\n*2\r\n:1\r\n$=x\r\n$=endpoint\r\n$=127.0.0.8\r\n$=role\r\n$=master\r\n"
              "$=health\r\n$=online\r\n");
    assert_int_equal(load_text(map, SHARDS, text, err, sizeof(err)), 0);
    assert_string_equal(owner_of(map, 0)->host, "127.0.0.7");
    assert_string_equal(owner_of(map, 1)->host, "127.0.0.8");
    assert_int_equal(owner_of(map, 1)->port, 0);
    assert_int_equal(owner_of(map, 1)->tls_port, 7443);

    /* No endpoint and no ip: the host the reply came from, when the caller gives one. */
    const char *unknown =
        "*1\r\n" SHARD("2", ":5\r\n:5\r\n", "1", NODE("aaaa", "7000", "", "?", "master", "online"));
    assert_int_equal(load_text(map, SHARDS, unknown, err, sizeof(err)), REDLOCK_EINVAL);
    assert_non_null(strstr(err, "no valid endpoint"));
    redisReply *reply = resp(unknown);
    assert_int_equal(redlock__cluster_map_load_shards(map, reply, "seed.example", err, sizeof(err)),
                     0);
    assert_string_equal(owner_of(map, 5)->host, "seed.example");
    assert_int_equal(redlock__cluster_map_master(map, 0), -1); /* the old map is gone */
    freeReplyObject(reply);
    drop_map(map);
}

typedef struct bad_case {
    const char *text;
    const char *message; /* a piece of the expected message */
} bad_case;

static const bad_case bad_shards[] = {
    {":1\r\n", "CLUSTER SHARDS: the reply is not a list of shards"},
    {"-ERR unknown subcommand 'SHARDS'\r\n", "answered with an error: ERR unknown subcommand"},
    {"*1\r\n*3\r\n$=slots\r\n*0\r\n$=nodes\r\n", "shard 0 is not a list of fields and values"},
    {"*1\r\n:1\r\n", "shard 0 is not a list"},
    {"*1\r\n*4\r\n:1\r\n*0\r\n$=nodes\r\n*0\r\n", "shard 0: a field name is not a string"},
    {"*1\r\n*2\r\n$=slots\r\n*0\r\n", "shard 0 has no nodes"},
    {"*1\r\n*2\r\n$=nodes\r\n*0\r\n", "shard 0 has no slots"},
    {"*1\r\n*6\r\n$=slots\r\n*0\r\n$=slots\r\n*0\r\n$=nodes\r\n*0\r\n", "field slots twice"},
    {"*1\r\n*4\r\n$=slots\r\n$=0-99\r\n$=nodes\r\n*0\r\n", "slots is not a list of start, end"},
    {"*1\r\n" SHARD("3", ":0\r\n:1\r\n:2\r\n", "1", MASTER("aaaa", "7000")),
     "slots is not a list of start, end pairs"},
    {"*1\r\n*4\r\n$=slots\r\n*0\r\n$=nodes\r\n:1\r\n", "nodes is not a list"},
    {"*1\r\n" SHARD("2", "$=a\r\n:5\r\n", "1", MASTER("aaaa", "7000")), "a slot is not a number"},
    {"*1\r\n" SHARD("2", "*0\r\n:5\r\n", "1", MASTER("aaaa", "7000")), "a slot is not a number"},
    {"*1\r\n" SHARD("2", ":10\r\n:5\r\n", "1", MASTER("aaaa", "7000")),
     "slot range 10-5 ends before it starts"},
    {"*1\r\n" SHARD("2", ":0\r\n:16384\r\n", "1", MASTER("aaaa", "7000")),
     "slot range 0-16384 is outside 0-16383"},
    {"*1\r\n" SHARD("2", ":-1\r\n:5\r\n", "1", MASTER("aaaa", "7000")), "is outside 0-16383"},
    {"*1\r\n" SHARD("2", ":16384\r\n:16384\r\n", "1", MASTER("aaaa", "7000")), "is outside"},
    {"*1\r\n" SHARD("4", ":100\r\n:200\r\n:0\r\n:50\r\n", "1", MASTER("aaaa", "7000")),
     "shard 0: slot range 0-50 is out of order"},
    {"*1\r\n" SHARD("4", ":0\r\n:100\r\n:50\r\n:150\r\n", "1", MASTER("aaaa", "7000")),
     "slot range 50-150 is out of order"},
    {"*2\r\n" SHARD("2", ":0\r\n:100\r\n", "1", MASTER("aaaa", "7000"))
         SHARD("2", ":100\r\n:200\r\n", "1", MASTER("bbbb", "7001")),
     "slot 100 is owned twice"},
    {"*1\r\n" SHARD("2", ":0\r\n:1\r\n", "1", REPLICA("aaaa", "7000")),
     "shard 0 owns slots but has no master"},
    {"*1\r\n" SHARD("2", ":0\r\n:1\r\n", "2", MASTER("aaaa", "7000") MASTER("bbbb", "7001")),
     "more than one master"},
    {"*1\r\n" SHARD("2", ":0\r\n:1\r\n", "1",
                    "*6\r\n$=port\r\n:7000\r\n$=role\r\n$=master\r\n$=health\r\n$=online\r\n"),
     "the master has no valid id"},
    {"*1\r\n" SHARD("2", ":0\r\n:1\r\n", "1",
                    MASTER("0123456789012345678901234567890123456789012345678901234567890123"
                           "4",
                           "7000")),
     "the master has no valid id"},
    {"*1\r\n" SHARD("2", ":0\r\n:1\r\n", "1", MASTER("aa aa", "7000")), "no valid id"},
    {"*1\r\n" SHARD("2", ":0\r\n:1\r\n", "1",
                    "*8\r\n$=id\r\n$=a\r\n$=port\r\n:1\r\n$=ip\r\n$=h\r\n$=role\r\n$=master\r\n"),
     "the master has no health"},
    {"*1\r\n" SHARD("2", ":0\r\n:1\r\n", "1",
                    "*8\r\n$=id\r\n$=a\r\n$=ip\r\n$=h\r\n$=health\r\n$=online\r\n"
                    "$=role\r\n$=master\r\n"),
     "the master has no port"},
    {"*1\r\n" SHARD("2", ":0\r\n:1\r\n", "1", MASTER("aaaa", "0")), "the master has no port"},
    {"*1\r\n" SHARD("2", ":0\r\n:1\r\n", "1", NODE("a", "70000", "h", "h", "master", "online")),
     "shard 0: node 0: field port is not a port number"},
    {"*1\r\n" SHARD("2", ":0\r\n:1\r\n", "1", "*4\r\n$=id\r\n$=a\r\n$=tls-port\r\n$=x\r\n"),
     "field tls-port is not a port number"},
    {"*1\r\n" SHARD("2", ":0\r\n:1\r\n", "1", NODE("a", "7000", "", "?", "master", "online")),
     "the master has no valid endpoint or ip"},
    {"*1\r\n" SHARD("2", ":0\r\n:1\r\n", "1", NODE("a", "7000", "h", "a b", "master", "online")),
     "no valid endpoint or ip"},
    {"*1\r\n" SHARD("2", ":0\r\n:1\r\n", "1", "*3\r\n$=id\r\n$=a\r\n$=role\r\n"),
     "shard 0: node 0 is not a list of fields and values"},
    {"*1\r\n" SHARD("2", ":0\r\n:1\r\n", "1", "*2\r\n:1\r\n$=a\r\n"),
     "node 0: a field name is not a string"},
    {"*1\r\n" SHARD("2", ":0\r\n:1\r\n", "1", "*2\r\n$=id\r\n$=a\r\n"), "node 0 has no role"},
    {"*1\r\n" SHARD("2", ":0\r\n:1\r\n", "1", "*2\r\n$=role\r\n:1\r\n"),
     "field role is not a string"},
    {"*1\r\n" SHARD("2", ":0\r\n:1\r\n", "1", "*2\r\n$=id\r\n*0\r\n"), "field id is not a string"},
    {"*2\r\n" SHARD("2", ":0\r\n:1\r\n", "1", MASTER("aaaa", "7000"))
         SHARD("2", ":2\r\n:3\r\n", "1", MASTER("aaaa", "7000")),
     "shard 1: its master masters another shard too"},
    {"*2\r\n" SHARD("2", ":0\r\n:1\r\n", "1", MASTER("aaaa", "7000"))
         SHARD("2", ":2\r\n:3\r\n", "1", MASTER("bbbb", "7000")),
     "masters another shard too"},
};

/* Every malformed reply: refused with its message, the map as it was. */
static void check_bad(const bad_case *cases, size_t n, int kind)
{
    redlock__cluster_map *map = new_map();
    load_ok(map, SHARDS, real_shards);
    uint64_t before = digest(map);
    for (size_t i = 0; i < n; i++) {
        char err[ERR_LEN] = "";
        int rc = load_text(map, kind, cases[i].text, err, sizeof(err));
        if (rc != REDLOCK_EINVAL)
            fail_msg("case %zu: %d, expected REDLOCK_EINVAL (message \"%s\")", i, rc, err);
        if (strstr(err, cases[i].message) == NULL)
            fail_msg("case %zu: message \"%s\", expected it to contain \"%s\"", i, err,
                     cases[i].message);
        if (digest(map) != before)
            fail_msg("case %zu: the map changed", i);
    }
    expect_captured_cluster(map, 1);
    drop_map(map);
}

static void test_shards_malformed(void **state)
{
    (void)state;
    check_bad(bad_shards, sizeof(bad_shards) / sizeof(bad_shards[0]), SHARDS);
}

/* ---- hand-made CLUSTER SLOTS -------------------------------------------------------------- */

static void test_slots_shapes(void **state)
{
    (void)state;
    redlock__cluster_map *map = new_map();
    char err[ERR_LEN];
    /* One master in two entries; a master with no id; a master whose host is NIL (unknown
     * endpoint); metadata after the id; a replica. */
    const char *text = "*4\r\n"
                       "*4\r\n:0\r\n:9\r\n*4\r\n$=127.0.0.1\r\n:7000\r\n$=aaaa\r\n*0\r\n"
                       "*3\r\n$=127.0.0.1\r\n:7001\r\n$=bbbb\r\n"
                       "*3\r\n:20\r\n:29\r\n*2\r\n$=host-c.example\r\n:7002\r\n"
                       "*3\r\n:10\r\n:19\r\n*3\r\n$=127.0.0.1\r\n:7000\r\n$=aaaa\r\n"
                       "*3\r\n:30\r\n:30\r\n*3\r\n$-1\r\n:7003\r\n$=dddd\r\n";
    assert_int_equal(load_text(map, SLOTS, text, err, sizeof(err)), REDLOCK_EINVAL);
    assert_non_null(strstr(err, "entry 3: the master has no valid host"));
    redisReply *reply = resp(text);
    assert_int_equal(redlock__cluster_map_load_slots(map, reply, "127.0.0.9", err, sizeof(err)), 0);
    freeReplyObject(reply);
    assert_int_equal(map->masters_len, 3);
    expect_range(map, 0, 19, "127.0.0.1", 7000);
    expect_range(map, 20, 29, "host-c.example", 7002);
    expect_range(map, 30, 30, "127.0.0.9", 7003);
    assert_int_equal(owner_of(map, 0)->slots, 20);
    assert_null(owner_of(map, 20)->id);
    assert_string_equal(owner_of(map, 30)->id, "dddd");
    assert_int_equal(redlock__cluster_map_master(map, 31), -1);
    drop_map(map);
}

static const bad_case bad_slots[] = {
    {"$=x\r\n", "CLUSTER SLOTS: the reply is not a list of slot ranges"},
    {"*1\r\n:1\r\n", "entry 0 is not a list of start, end, master"},
    {"*1\r\n*2\r\n:0\r\n:1\r\n", "entry 0 is not a list of start, end, master"},
    {"*1\r\n*3\r\n$=x\r\n:1\r\n*2\r\n$=h\r\n:1\r\n", "entry 0: a slot is not a number"},
    {"*1\r\n*3\r\n:5\r\n:1\r\n*2\r\n$=h\r\n:1\r\n", "slot range 5-1 ends before it starts"},
    {"*1\r\n*3\r\n:5\r\n:99999\r\n*2\r\n$=h\r\n:1\r\n", "slot range 5-99999 is outside"},
    {"*2\r\n*3\r\n:0\r\n:5\r\n*2\r\n$=h\r\n:1\r\n*3\r\n:5\r\n:6\r\n*2\r\n$=g\r\n:1\r\n",
     "slot 5 is owned twice"},
    {"*1\r\n*3\r\n:0\r\n:5\r\n:1\r\n", "entry 0: the master is not a list of host, port"},
    {"*1\r\n*3\r\n:0\r\n:5\r\n*1\r\n$=h\r\n", "the master is not a list of host, port"},
    {"*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n$=h\r\n:0\r\n", "the master's port is not a port number"},
    {"*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n$=h\r\n$=x\r\n", "the master's port is not a port number"},
    {"*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n:1\r\n:1\r\n", "the master's host is not a string"},
    {"*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n$=?\r\n:1\r\n", "the master has no valid host"},
    {"*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n$=a\tb\r\n:1\r\n", "the master has no valid host"},
    {"*1\r\n*3\r\n:0\r\n:5\r\n*3\r\n$=h\r\n:1\r\n:7\r\n", "the master's id is not valid"},
    {"*1\r\n*4\r\n:0\r\n:5\r\n*2\r\n$=h\r\n:1\r\n:1\r\n", "entry 0: replica 0 is not a list"},
    {"*2\r\n*3\r\n:0\r\n:5\r\n*3\r\n$=h\r\n:1\r\n$=a\r\n*3\r\n:6\r\n:7\r\n*3\r\n$=g\r\n:1\r\n$="
     "a\r\n",
     "one node id at two addresses"},
    {"*2\r\n*3\r\n:0\r\n:5\r\n*3\r\n$=h\r\n:1\r\n$=a\r\n*3\r\n:6\r\n:7\r\n*3\r\n$=h\r\n:1\r\n$="
     "b\r\n",
     "two ids at one address"},
};

static void test_slots_malformed(void **state)
{
    (void)state;
    check_bad(bad_slots, sizeof(bad_slots) / sizeof(bad_slots[0]), SLOTS);
}

/* A CLUSTER SLOTS reply of n masters, each owning one slot. */
static char *many_masters(unsigned n)
{
    size_t cap = 64 + (size_t)n * 64, len = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    len += (size_t)snprintf(text, cap, "*%u\r\n", n);
    for (unsigned i = 0; i < n; i++)
        len +=
            (size_t)snprintf(text + len, cap - len,
                             "*3\r\n:%u\r\n:%u\r\n*2\r\n$=127.0.0.1\r\n:%u\r\n", i, i, 10000 + i);
    assert_true(len < cap);
    return text;
}

static void test_masters_bound(void **state)
{
    (void)state;
    redlock__cluster_map *map = new_map();
    char err[ERR_LEN];
    char *text = many_masters(REDLOCK__CLUSTER_MASTERS_MAX + 1);
    assert_int_equal(load_text(map, SLOTS, text, err, sizeof(err)), REDLOCK_EINVAL);
    assert_non_null(strstr(err, "more than 1024 masters"));
    assert_int_equal(map->masters_len, 0);
    free(text);

    text = many_masters(REDLOCK__CLUSTER_MASTERS_MAX);
    load_ok(map, SLOTS, text);
    free(text);
    assert_int_equal(map->masters_len, REDLOCK__CLUSTER_MASTERS_MAX);
    /* Full: MOVED to a master the map does not know is refused, to one it knows is applied. */
    uint64_t before = digest(map);
    assert_int_equal(redlock__cluster_map_moved(map, 5000, "127.0.0.1", 9999), REDLOCK_ENOMEM);
    assert_int_equal(digest(map), before);
    assert_int_equal(redlock__cluster_map_moved(map, 5000, "127.0.0.1", 10000), 0);
    assert_int_equal(map->masters[0].slots, 2);
    drop_map(map);
}

/* ---- MOVED -------------------------------------------------------------------------------- */

static void test_moved(void **state)
{
    (void)state;
    redlock__cluster_map *map = new_map();
    load_ok(map, SHARDS, real_shards);
    int a = redlock__cluster_map_master(map, 100), b = redlock__cluster_map_master(map, 5461);

    /* To a known master: the slot changes hands, the counts follow. */
    assert_int_equal(redlock__cluster_map_moved(map, 100, "127.0.0.1", 21301), b);
    assert_int_equal(redlock__cluster_map_master(map, 100), b);
    assert_int_equal(map->masters[a].slots, 5360);
    assert_int_equal(map->masters[b].slots, 5463);
    /* Again: nothing more changes. */
    assert_int_equal(redlock__cluster_map_moved(map, 100, "127.0.0.1", 21301), b);
    assert_int_equal(map->masters[b].slots, 5463);

    /* To a master it does not know: added, without an id. */
    int c = redlock__cluster_map_moved(map, 101, "LocalHost", 21399);
    assert_int_equal(c, 3);
    assert_int_equal(map->masters_len, 4);
    assert_string_equal(map->masters[c].host, "LocalHost");
    assert_null(map->masters[c].id);
    assert_int_equal(map->masters[c].slots, 1);
    assert_int_equal(map->masters[c].online, 1);
    /* Host names compare without case. */
    assert_int_equal(redlock__cluster_map_moved(map, 102, "localhost", 21399), c);
    assert_int_equal(map->masters[a].slots, 5358);

    /* An unowned slot gains a master. */
    redlock__cluster_map *empty = new_map();
    assert_int_equal(redlock__cluster_map_moved(empty, 16383, "::1", 7000), 0);
    assert_int_equal(redlock__cluster_map_master(empty, 16383), 0);
    assert_int_equal(redlock__cluster_map_master(empty, 0), -1);
    drop_map(empty);

    /* Bad arguments change nothing. */
    uint64_t before = digest(map);
    assert_int_equal(redlock__cluster_map_moved(map, 16384, "127.0.0.1", 21301), REDLOCK_EINVAL);
    assert_int_equal(redlock__cluster_map_moved(map, 1, "127.0.0.1", 0), REDLOCK_EINVAL);
    assert_int_equal(redlock__cluster_map_moved(map, 1, "127.0.0.1", 65536), REDLOCK_EINVAL);
    assert_int_equal(redlock__cluster_map_moved(map, 1, "", 7000), REDLOCK_EINVAL);
    assert_int_equal(redlock__cluster_map_moved(map, 1, NULL, 7000), REDLOCK_EINVAL);
    assert_int_equal(redlock__cluster_map_moved(map, 1, "a b", 7000), REDLOCK_EINVAL);
    char long_host[REDLOCK__CLUSTER_HOST_MAX + 2];
    memset(long_host, 'h', sizeof(long_host) - 1);
    long_host[sizeof(long_host) - 1] = '\0';
    assert_int_equal(redlock__cluster_map_moved(map, 1, long_host, 7000), REDLOCK_EINVAL);
    assert_int_equal(digest(map), before);
    long_host[REDLOCK__CLUSTER_HOST_MAX] = '\0'; /* at the bound: fine */
    assert_true(redlock__cluster_map_moved(map, 1, long_host, 7000) >= 0);
    drop_map(map);
}

/* A MOVED naming a master's TLS port finds that master. */
static void test_moved_tls_port(void **state)
{
    (void)state;
    redlock__cluster_map *map = new_map();
    load_ok(map, SHARDS,
            "*1\r\n" SHARD("2", ":0\r\n:9\r\n", "1",
                           "*12\r\n$=id\r\n$=aaaa\r\n$=port\r\n:7000\r\n$=tls-port\r\n:7443\r\n"
                           "$=endpoint\r\n$=127.0.0.1\r\n$=role\r\n$=master\r\n"
                           "$=health\r\n$=online\r\n"));
    assert_int_equal(redlock__cluster_map_moved(map, 10, "127.0.0.1", 7443), 0);
    assert_int_equal(redlock__cluster_map_moved(map, 11, "127.0.0.1", 7000), 0);
    assert_int_equal(map->masters_len, 1);
    assert_int_equal(map->masters[0].slots, 12);
    drop_map(map);
}

/* ---- MOVED / ASK texts -------------------------------------------------------------------- */

typedef struct redirect_case {
    const char *text;
    int rc;
    redlock__redirect_kind kind;
    unsigned slot;
    const char *host;
    int port;
} redirect_case;

static const redirect_case redirects[] = {
    {"MOVED 3999 127.0.0.1:6381", 1, REDLOCK__REDIRECT_MOVED, 3999, "127.0.0.1", 6381},
    {"ASK 3999 127.0.0.1:6381", 1, REDLOCK__REDIRECT_ASK, 3999, "127.0.0.1", 6381},
    {"MOVED 1 ::1:7000", 1, REDLOCK__REDIRECT_MOVED, 1, "::1", 7000},
    {"MOVED 1 2001:db8::5:7000", 1, REDLOCK__REDIRECT_MOVED, 1, "2001:db8::5", 7000},
    {"MOVED 1 [::1]:7000", 1, REDLOCK__REDIRECT_MOVED, 1, "::1", 7000},
    {"MOVED 16383 redis-1.example:65535", 1, REDLOCK__REDIRECT_MOVED, 16383, "redis-1.example",
     65535},
    {"MOVED 0 :6380", 1, REDLOCK__REDIRECT_MOVED, 0, "", 6380}, /* unknown endpoint */
    {"MOVED 00042 h:1", 1, REDLOCK__REDIRECT_MOVED, 42, "h", 1},
    {"ERR unknown command", 0, 0, 0, "", 0},
    {"MOVEDX 1 h:1", 0, 0, 0, "", 0},
    {"ASK", 0, 0, 0, "", 0},
    {"moved 1 h:1", 0, 0, 0, "", 0},
    {"", 0, 0, 0, "", 0},
    {"MOVED ", REDLOCK_EINVAL, 0, 0, "", 0},
    {"MOVED 16384 h:1", REDLOCK_EINVAL, 0, 0, "", 0},
    {"MOVED 100000 h:1", REDLOCK_EINVAL, 0, 0, "", 0},
    {"MOVED -1 h:1", REDLOCK_EINVAL, 0, 0, "", 0},
    {"MOVED  1 h:1", REDLOCK_EINVAL, 0, 0, "", 0},
    {"MOVED 1", REDLOCK_EINVAL, 0, 0, "", 0},
    {"MOVED 1 h", REDLOCK_EINVAL, 0, 0, "", 0},
    {"MOVED 1 h:", REDLOCK_EINVAL, 0, 0, "", 0},
    {"MOVED 1 h:0", REDLOCK_EINVAL, 0, 0, "", 0},
    {"MOVED 1 h:65536", REDLOCK_EINVAL, 0, 0, "", 0},
    {"MOVED 1 h:123456", REDLOCK_EINVAL, 0, 0, "", 0},
    {"MOVED 1 h:1 x", REDLOCK_EINVAL, 0, 0, "", 0},
    {"MOVED 1 h:1\r\n", REDLOCK_EINVAL, 0, 0, "", 0},
    {"MOVED 1 a b:1", REDLOCK_EINVAL, 0, 0, "", 0},
    {"MOVED 1x h:1", REDLOCK_EINVAL, 0, 0, "", 0},
    {"ASK 1 h:+1", REDLOCK_EINVAL, 0, 0, "", 0},
};

static void test_parse_redirect(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(redirects) / sizeof(redirects[0]); i++) {
        const redirect_case *c = &redirects[i];
        redlock__redirect r;
        memset(&r, 0x5a, sizeof(r));
        int rc = redlock__cluster_map_parse_redirect(c->text, strlen(c->text), &r);
        if (rc != c->rc)
            fail_msg("\"%s\": %d, expected %d", c->text, rc, c->rc);
        if ((int)r.kind != (int)c->kind || r.slot != c->slot || strcmp(r.host, c->host) != 0 ||
            r.port != c->port)
            fail_msg("\"%s\": %d %u %s:%d, expected %d %u %s:%d", c->text, (int)r.kind, r.slot,
                     r.host, r.port, (int)c->kind, c->slot, c->host, c->port);
    }

    /* Only len bytes are read: a longer buffer's tail is not part of the text. */
    redlock__redirect r;
    assert_int_equal(redlock__cluster_map_parse_redirect("MOVED 1 h:12345", 13, &r), 1);
    assert_int_equal(r.port, 123);
    assert_int_equal(redlock__cluster_map_parse_redirect("MOVED 1 h\0x:1", 13, &r), REDLOCK_EINVAL);
    assert_int_equal(redlock__cluster_map_parse_redirect(NULL, 0, &r), 0);

    /* The longest host fits, one more byte does not. */
    char text[300];
    int n = snprintf(text, sizeof(text), "ASK 7 %0*d:9", REDLOCK__CLUSTER_HOST_MAX, 0);
    assert_int_equal(redlock__cluster_map_parse_redirect(text, (size_t)n, &r), 1);
    assert_int_equal(strlen(r.host), REDLOCK__CLUSTER_HOST_MAX);
    n = snprintf(text, sizeof(text), "ASK 7 %0*d:9", REDLOCK__CLUSTER_HOST_MAX + 1, 0);
    assert_int_equal(redlock__cluster_map_parse_redirect(text, (size_t)n, &r), REDLOCK_EINVAL);
}

/* ---- errors and memory -------------------------------------------------------------------- */

static void test_err_buffer(void **state)
{
    (void)state;
    redlock__cluster_map *map = new_map();
    redisReply *reply = resp(":1\r\n");
    assert_int_equal(redlock__cluster_map_load_shards(map, reply, NULL, NULL, 0), REDLOCK_EINVAL);
    assert_int_equal(redlock__cluster_map_load_slots(map, reply, NULL, NULL, 99), REDLOCK_EINVAL);
    char err[12];
    memset(err, 'x', sizeof(err));
    assert_int_equal(redlock__cluster_map_load_shards(map, reply, NULL, err, 1), REDLOCK_EINVAL);
    assert_int_equal(err[0], '\0');
    assert_int_equal(err[1], 'x');
    assert_int_equal(redlock__cluster_map_load_shards(map, reply, NULL, err, 10), REDLOCK_EINVAL);
    assert_string_equal(err, "CLUSTE...");
    assert_int_equal(err[10], 'x');
    assert_int_equal(redlock__cluster_map_load_shards(map, NULL, NULL, err, sizeof(err)),
                     REDLOCK_EINVAL);
    freeReplyObject(reply);
    drop_map(map);
}

/* An allocator that fails from its fail_at-th allocation on and counts what is live. */
typedef struct counting {
    long calls, fail_at, live;
} counting;

static void *counting_realloc(void *ud, void *ptr, size_t size)
{
    counting *c = ud;
    if (size == 0) {
        if (ptr != NULL)
            c->live--;
        free(ptr);
        return NULL;
    }
    if (c->calls++ >= c->fail_at)
        return NULL;
    void *p = realloc(ptr, size);
    if (p != NULL && ptr == NULL)
        c->live++;
    return p;
}

/* Every allocation that can fail, failing: REDLOCK_ENOMEM, the map unchanged, nothing leaked. */
static void test_out_of_memory(void **state)
{
    (void)state;
    redisReply *shards = resp(real_shards), *slots = resp(real_slots);
    for (int kind = SHARDS; kind <= SLOTS; kind++) {
        int loaded = 0;
        for (long fail_at = 0; !loaded; fail_at++) {
            counting c = {.fail_at = 1000000};
            redlock__alloc a;
            redlock__alloc_init(&a, counting_realloc, &c);
            redlock__cluster_map *map = malloc(sizeof(*map));
            assert_non_null(map);
            redlock__cluster_map_init(map, &a);
            assert_int_equal(redlock__cluster_map_moved(map, 7, "127.0.0.1", 1), 0);
            uint64_t before = digest(map);
            c.calls = 0;
            c.fail_at = fail_at;
            char err[ERR_LEN] = "";
            int rc = kind == SHARDS
                         ? redlock__cluster_map_load_shards(map, shards, NULL, err, sizeof(err))
                         : redlock__cluster_map_load_slots(map, slots, NULL, err, sizeof(err));
            if (rc == 0) {
                expect_captured_cluster(map, 1);
                loaded = 1;
            } else {
                assert_int_equal(rc, REDLOCK_ENOMEM);
                assert_non_null(strstr(err, "out of memory"));
                assert_int_equal(digest(map), before);
                /* A MOVED that must add a master fails alike. */
                c.calls = 0;
                c.fail_at = 0;
                assert_int_equal(redlock__cluster_map_moved(map, 8, "127.0.0.2", 1),
                                 REDLOCK_ENOMEM);
                assert_int_equal(digest(map), before);
            }
            redlock__cluster_map_free(map);
            free(map);
            assert_int_equal(c.live, 0);
            assert_true(fail_at < 100);
        }
    }
    freeReplyObject(shards);
    freeReplyObject(slots);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_shards),
        cmocka_unit_test(test_real_slots),
        cmocka_unit_test(test_real_failed_master),
        cmocka_unit_test(test_real_redirects),
        cmocka_unit_test(test_shards_shapes),
        cmocka_unit_test(test_shards_endpoints),
        cmocka_unit_test(test_shards_malformed),
        cmocka_unit_test(test_slots_shapes),
        cmocka_unit_test(test_slots_malformed),
        cmocka_unit_test(test_masters_bound),
        cmocka_unit_test(test_moved),
        cmocka_unit_test(test_moved_tls_port),
        cmocka_unit_test(test_parse_redirect),
        cmocka_unit_test(test_err_buffer),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests_name("cluster_map", tests, NULL, NULL);
}
