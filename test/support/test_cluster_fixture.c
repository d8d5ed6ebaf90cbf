/* SPDX-License-Identifier: MIT */
/* The Redis Cluster fixture (cluster_fixture.h) against real servers: three clusters formed side
 * by side, then routing, replicas, a failover, a slot migration (half way and finished) and a
 * stopped master.
 *
 * The clusters are formed once for the whole group (forming is what costs time) and each test
 * uses its own: a (3 masters with a replica each: replicas, failover), b (3 masters: migration),
 * c (3 masters: a stopped master, last). Every check reads the servers with commands of its own
 * (CLUSTER SLOTS, ROLE, plain GETs and their MOVED and ASK errors), never the fixture's parse of
 * CLUSTER SHARDS, so the fixture is checked by something other than itself.
 */
#include "cluster_fixture.h"
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_CLUSTERS 3
#define MASTERS 3

typedef struct world {
    fixture_redis_cluster clusters[N_CLUSTERS]; /* a, b, c */
} world;

enum { A, B, C };

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static int group_teardown(void **state)
{
    world *w = *state;
    for (unsigned k = 0; w && k < N_CLUSTERS; k++)
        fixture_cluster_stop(&w->clusters[k]);
    free(w);
    fixture_stop_all(); // whatever a failed check left
    return 0;
}

static int group_setup(void **state)
{
    world *w = calloc(1, sizeof(*w));
    if (!w)
        return -1;
    *state = w;
    long long t0_ms = now_ms();
    // Started together, the clusters form at once: one node start-up delay, not three.
    bool formed = true;
    for (unsigned k = 0; formed && k < N_CLUSTERS; k++)
        formed = fixture_cluster_start(&w->clusters[k], MASTERS, k == A ? 1 : 0, NULL) == 0;
    for (unsigned k = 0; formed && k < N_CLUSTERS; k++)
        formed = fixture_cluster_wait_formed(&w->clusters[k]) == 0;
    if (!formed) {
        // Whether cmocka runs the group teardown after a failed setup or not, nothing is left.
        group_teardown(state);
        *state = NULL;
        return -1;
    }
    printf("# three clusters formed in %lld ms\n", now_ms() - t0_ms);
    return 0;
}

/* The master the fixture's layout gives slot: master m owns slots m * 16384 / MASTERS up to the
 * next one's first slot. */
static int layout_owner(unsigned slot)
{
    int m = MASTERS - 1;
    while (slot < (unsigned)m * FIXTURE_CLUSTER_SLOTS / MASTERS)
        m--;
    return m;
}

/* ---- independent readers -------------------------------------------------------------------- */

/* The node of rc listening on port, or -1. */
static int node_at(const fixture_redis_cluster *rc, long long port)
{
    for (unsigned i = 0; i < rc->n; i++) {
        if (fixture_cluster_port(rc, i) == port)
            return (int)i;
    }
    return -1;
}

/* Node i's CLUSTER SLOTS: owner[slot] = the node serving it as master (-1: none). Fails the test
 * on a slot listed twice or a master that is not one of rc's nodes. */
static void slots_view(fixture_redis_cluster *rc, unsigned i, int *owner)
{
    for (unsigned s = 0; s < FIXTURE_CLUSTER_SLOTS; s++)
        owner[s] = -1;
    redisReply *r = fixture_cluster_command(rc, i, "CLUSTER SLOTS");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    for (size_t k = 0; k < r->elements; k++) {
        const redisReply *range = r->element[k];
        assert_true(range->elements >= 3);
        const redisReply *master = range->element[2];
        int node = node_at(rc, master->element[1]->integer);
        assert_true(node >= 0);
        for (long long s = range->element[0]->integer; s <= range->element[1]->integer; s++) {
            assert_int_equal(owner[s], -1);
            owner[s] = node;
        }
    }
    freeReplyObject(r);
}

/* Every node of rc (running ones) says slot is served by node `want` as master. */
static void assert_slot_owner_everywhere(fixture_redis_cluster *rc, unsigned slot, int want)
{
    int *owner = malloc(FIXTURE_CLUSTER_SLOTS * sizeof(*owner));
    assert_non_null(owner);
    for (unsigned i = 0; i < rc->n; i++) {
        if (rc->nodes[i].servers[0].pid <= 0)
            continue;
        slots_view(rc, i, owner);
        if (owner[slot] != want)
            fprintf(stderr, "node %u says slot %u is node %d's, not node %d's\n", i, slot,
                    owner[slot], want);
        assert_int_equal(owner[slot], want);
    }
    free(owner);
}

static void assert_info_field(fixture_redis_cluster *rc, unsigned i, const char *command,
                              const char *line)
{
    redisReply *r = fixture_cluster_command(rc, i, command);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    if (!strstr(r->str, line))
        fprintf(stderr, "node %u: no \"%s\" in %s:\n%s\n", i, line, command, r->str);
    assert_non_null(strstr(r->str, line));
    freeReplyObject(r);
}

/* The reply of node i to one command is the error "KIND slot 127.0.0.1:port of node want". */
static void assert_redirect(redisReply *r, const char *kind, int slot,
                            const fixture_redis_cluster *rc, unsigned want)
{
    char expected[64];
    snprintf(expected, sizeof(expected), "%s %d 127.0.0.1:%d", kind, slot,
             fixture_cluster_port(rc, want));
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ERROR);
    assert_string_equal(r->str, expected);
    freeReplyObject(r);
}

static void assert_get(fixture_redis_cluster *rc, unsigned i, const char *key, const char *want)
{
    redisReply *r = fixture_cluster_command(rc, i, "GET %s", key);
    assert_non_null(r);
    if (r->type != REDIS_REPLY_STRING)
        fprintf(stderr, "GET %s on node %u: %s\n", key, i, r->str ? r->str : "(nil)");
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, want);
    freeReplyObject(r);
}

static void assert_set(fixture_redis_cluster *rc, unsigned i, const char *key, const char *value)
{
    redisReply *r = fixture_cluster_command(rc, i, "SET %s %s", key, value);
    assert_non_null(r);
    if (r->type != REDIS_REPLY_STATUS)
        fprintf(stderr, "SET %s on node %u: %s\n", key, i, r->str ? r->str : "?");
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
}

/* A key whose slot master `owner` of rc serves, into buf. */
static void key_owned_by(fixture_redis_cluster *rc, unsigned owner, char *buf, size_t size)
{
    for (unsigned k = 0; k < 1000; k++) {
        snprintf(buf, size, "fixture:key:%u", k);
        if (fixture_cluster_key_owner(rc, buf, strlen(buf)) == (int)owner)
            return;
    }
    fail_msg("no key of node %u in 1000 tries", owner);
}

/* A write reaches a replica a moment after its master answered: wait until replica serves key
 * with value (READONLY), bounded and generously. */
static void wait_on_replica(fixture_redis_cluster *rc, unsigned replica, const char *key,
                            const char *value)
{
    redisContext *ctx = fixture_cluster_connect(rc, replica);
    assert_non_null(ctx);
    assert_int_equal(ctx->err, 0);
    freeReplyObject(redisCommand(ctx, "READONLY"));
    bool seen = false;
    for (long long deadline = now_ms() + H_WAIT_MS; !seen && now_ms() < deadline;) {
        redisReply *r = redisCommand(ctx, "GET %s", key);
        assert_non_null(r);
        seen = r->type == REDIS_REPLY_STRING && strcmp(r->str, value) == 0;
        freeReplyObject(r);
        if (!seen)
            sleep_ms(20);
    }
    redisFree(ctx);
    assert_true(seen);
}

/* ---- tests ---------------------------------------------------------------------------------- */

/* Three clusters, each its own processes and ports, each complete in every node's view and
 * knowing only its own nodes. */
static void forms_side_by_side(void **state)
{
    world *w = *state;
    int *owner = malloc(FIXTURE_CLUSTER_SLOTS * sizeof(*owner));
    assert_non_null(owner);
    for (unsigned k = 0; k < N_CLUSTERS; k++) {
        fixture_redis_cluster *rc = &w->clusters[k];
        assert_int_equal(rc->n, k == A ? 2 * MASTERS : MASTERS);
        char known[64];
        snprintf(known, sizeof(known), "cluster_known_nodes:%u\r\n", rc->n);
        for (unsigned i = 0; i < rc->n; i++) {
            assert_info_field(rc, i, "CLUSTER INFO", "cluster_state:ok\r\n");
            assert_info_field(rc, i, "CLUSTER INFO", known);
            assert_info_field(rc, i, "CLUSTER INFO", "cluster_slots_assigned:16384\r\n");
            // Every slot served by exactly one master (slots_view fails on a repeat), and each
            // master by the fixture's layout: master m the m-th third.
            slots_view(rc, i, owner);
            for (unsigned s = 0; s < FIXTURE_CLUSTER_SLOTS; s++)
                assert_int_equal(owner[s], layout_owner(s));
            char url[64];
            snprintf(url, sizeof(url), "redis://127.0.0.1:%d", fixture_cluster_port(rc, i));
            assert_string_equal(fixture_cluster_url(rc, i), url);
            // Nothing is shared with another cluster: no port, no process, no node id.
            for (unsigned k2 = 0; k2 < N_CLUSTERS; k2++) {
                for (unsigned j = 0; j < w->clusters[k2].n; j++) {
                    if (k2 == k && j == i)
                        continue;
                    const fixture_redis_cluster *other = &w->clusters[k2];
                    assert_int_not_equal(fixture_cluster_port(rc, i),
                                         fixture_cluster_port(other, j));
                    assert_int_not_equal(rc->nodes[i].servers[0].pid,
                                         other->nodes[j].servers[0].pid);
                    assert_string_not_equal(rc->ids[i], other->ids[j]);
                }
            }
        }
    }
    free(owner);
}

/* A key is served by its slot's master; every other master redirects with MOVED. */
static void routes_by_slot(void **state)
{
    world *w = *state;
    for (unsigned k = 0; k < N_CLUSTERS; k++) {
        fixture_redis_cluster *rc = &w->clusters[k];
        const char *key = "fixture:routing";
        int slot = fixture_cluster_keyslot(rc, key, strlen(key));
        assert_int_equal(slot, 14002); // CRC16("fixture:routing") % 16384
        int owner = fixture_cluster_key_owner(rc, key, strlen(key));
        assert_int_equal(owner, layout_owner((unsigned)slot));
        assert_slot_owner_everywhere(rc, (unsigned)slot, owner);
        assert_set(rc, (unsigned)owner, key, "v1");
        assert_get(rc, (unsigned)owner, key, "v1");
        for (unsigned m = 0; m < MASTERS; m++) {
            if ((int)m != owner)
                assert_redirect(fixture_cluster_command(rc, m, "GET %s", key), "MOVED", slot, rc,
                                (unsigned)owner);
        }
    }
}

/* Each replica of a follows its master, with its link up and the master's writes on it. */
static void replicas_follow(void **state)
{
    world *w = *state;
    fixture_redis_cluster *rc = &w->clusters[A];
    for (unsigned m = 0; m < MASTERS; m++) {
        int replica = fixture_cluster_replica_of(rc, m);
        assert_int_equal(replica, MASTERS + (int)m);
        assert_int_equal(fixture_cluster_master_of(rc, (unsigned)replica), (int)m);
        assert_info_field(rc, (unsigned)replica, "INFO replication", "master_link_status:up");
        char expected_port[64];
        snprintf(expected_port, sizeof(expected_port), "master_port:%d\r\n",
                 fixture_cluster_port(rc, m));
        assert_info_field(rc, (unsigned)replica, "INFO replication", expected_port);

        char key[64];
        key_owned_by(rc, m, key, sizeof(key));
        assert_set(rc, m, key, "replicated");
        wait_on_replica(rc, (unsigned)replica, key, "replicated");
    }
}

/* CLUSTER FAILOVER on a replica: it serves the old master's slots in every node's view, with
 * the data, and the old master follows it. */
static void failover_promotes_replica(void **state)
{
    world *w = *state;
    fixture_redis_cluster *rc = &w->clusters[A];
    const char *key = "fixture:failover";
    int slot = fixture_cluster_keyslot(rc, key, strlen(key));
    int old = fixture_cluster_key_owner(rc, key, strlen(key));
    assert_true(old >= 0);
    assert_set(rc, (unsigned)old, key, "before");
    int replica = fixture_cluster_replica_of(rc, (unsigned)old);
    assert_true(replica >= 0);

    assert_int_equal(fixture_cluster_failover(rc, (unsigned)replica, NULL), 0);

    assert_slot_owner_everywhere(rc, (unsigned)slot, replica);
    assert_int_equal(fixture_cluster_key_owner(rc, key, strlen(key)), replica);
    assert_int_equal(fixture_cluster_master_of(rc, (unsigned)old), replica);
    redisReply *role = fixture_cluster_command(rc, (unsigned)old, "ROLE");
    assert_non_null(role);
    assert_int_equal(role->type, REDIS_REPLY_ARRAY);
    assert_string_equal(role->element[0]->str, "slave");
    freeReplyObject(role);
    // A manual failover waits for the replica to catch up: the write is there.
    assert_get(rc, (unsigned)replica, key, "before");
    assert_set(rc, (unsigned)replica, key, "after");
    assert_redirect(fixture_cluster_command(rc, (unsigned)old, "GET %s", key), "MOVED", slot, rc,
                    (unsigned)replica);
    assert_info_field(rc, (unsigned)old, "INFO replication", "master_link_status:up");
}

/* A master stopped: CLUSTER FAILOVER FORCE on its replica makes the replica serve its slots, with
 * the data it had; restarted, the old master comes back as the new master's replica. */
static void forced_failover_after_stop(void **state)
{
    world *w = *state;
    fixture_redis_cluster *rc = &w->clusters[A];
    // An original master failover_promotes_replica left alone (it demoted one of them).
    unsigned master = 0;
    while (master < MASTERS && fixture_cluster_master_of(rc, master) != (int)master)
        master++;
    assert_true(master < MASTERS);
    int replica = fixture_cluster_replica_of(rc, master);
    assert_true(replica >= 0);
    char key[64];
    key_owned_by(rc, master, key, sizeof(key));
    int slot = fixture_cluster_keyslot(rc, key, strlen(key));
    assert_set(rc, master, key, "survives");
    wait_on_replica(rc, (unsigned)replica, key, "survives");

    assert_int_equal(fixture_cluster_kill(rc, master), 0);
    assert_int_equal(fixture_cluster_failover(rc, (unsigned)replica, "FORCE"), 0);
    assert_slot_owner_everywhere(rc, (unsigned)slot, replica);
    assert_get(rc, (unsigned)replica, key, "survives");
    assert_set(rc, (unsigned)replica, key, "new");

    assert_int_equal(fixture_cluster_restart(rc, master), 0);
    assert_int_equal(fixture_cluster_master_of(rc, master), replica);
    assert_info_field(rc, master, "INFO replication", "role:slave\r\n");
    assert_info_field(rc, master, "INFO replication", "master_link_status:up");
    assert_redirect(fixture_cluster_command(rc, master, "GET %s", key), "MOVED", slot, rc,
                    (unsigned)replica);
    wait_on_replica(rc, master, key, "new");
}

/* Half way, the source answers ASK for a key it handed over and the target MOVED unless ASKING;
 * finished, the old owner answers MOVED and the new one serves the key. */
static void migration_asks_then_moves(void **state)
{
    world *w = *state;
    fixture_redis_cluster *rc = &w->clusters[B];
    const char *key = "{fixture:migrate}:a";
    const char *absent = "{fixture:migrate}:absent";
    int slot = fixture_cluster_keyslot(rc, key, strlen(key));
    int from = fixture_cluster_key_owner(rc, key, strlen(key));
    assert_true(from >= 0);
    unsigned to = ((unsigned)from + 1) % MASTERS;
    assert_set(rc, (unsigned)from, key, "moving");

    assert_int_equal(
        fixture_cluster_migrate_slot(rc, (unsigned)slot, (unsigned)from, to, FIXTURE_MIGRATE_HALF),
        0);
    assert_redirect(fixture_cluster_command(rc, (unsigned)from, "GET %s", key), "ASK", slot, rc,
                    to);
    assert_redirect(fixture_cluster_command(rc, (unsigned)from, "GET %s", absent), "ASK", slot, rc,
                    to);
    assert_redirect(fixture_cluster_command(rc, to, "GET %s", key), "MOVED", slot, rc,
                    (unsigned)from);
    redisContext *ctx = fixture_cluster_connect(rc, to);
    assert_non_null(ctx);
    assert_int_equal(ctx->err, 0);
    redisReply *r = redisCommand(ctx, "ASKING");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    r = redisCommand(ctx, "GET %s", key);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, "moving");
    freeReplyObject(r);
    redisFree(ctx);
    assert_slot_owner_everywhere(rc, (unsigned)slot, from); // not reassigned yet

    assert_int_equal(fixture_cluster_migrate_slot(rc, (unsigned)slot, (unsigned)from, to,
                                                  FIXTURE_MIGRATE_FINISH),
                     0);
    assert_redirect(fixture_cluster_command(rc, (unsigned)from, "GET %s", key), "MOVED", slot, rc,
                    to);
    assert_get(rc, to, key, "moving");
    assert_slot_owner_everywhere(rc, (unsigned)slot, (int)to);
    assert_int_equal(fixture_cluster_key_owner(rc, key, strlen(key)), (int)to);

    // And a whole migration in one call, back again.
    assert_int_equal(
        fixture_cluster_migrate_slot(rc, (unsigned)slot, to, (unsigned)from, FIXTURE_MIGRATE_FULL),
        0);
    assert_get(rc, (unsigned)from, key, "moving");
    assert_slot_owner_everywhere(rc, (unsigned)slot, from);
}

/* A stopped master refuses connections; the other masters go on serving their slots. Restarted,
 * it serves its slots again (with an empty data set). */
static void stopped_master_refuses(void **state)
{
    world *w = *state;
    fixture_redis_cluster *rc = &w->clusters[C];
    char keys[MASTERS][64];
    for (unsigned m = 0; m < MASTERS; m++) {
        key_owned_by(rc, m, keys[m], sizeof(keys[m]));
        assert_set(rc, m, keys[m], "kept");
    }
    const unsigned stopped = 1;
    assert_int_equal(fixture_cluster_kill(rc, stopped), 0);

    redisContext *ctx = fixture_cluster_connect(rc, stopped);
    assert_non_null(ctx);
    assert_int_not_equal(ctx->err, 0); // connection refused: nothing listens there
    redisFree(ctx);
    for (unsigned m = 0; m < MASTERS; m++) {
        if (m == stopped)
            continue;
        assert_get(rc, m, keys[m], "kept");
        assert_set(rc, m, keys[m], "still");
        assert_info_field(rc, m, "CLUSTER INFO", "cluster_state:ok\r\n");
    }
    // The others' views converge on it failed; its slots stay its own (no replica to promote).
    assert_int_equal(fixture_cluster_wait_converged(rc), 0);
    assert_int_equal(fixture_cluster_key_owner(rc, keys[stopped], strlen(keys[stopped])),
                     (int)stopped);

    assert_int_equal(fixture_cluster_restart(rc, stopped), 0);
    assert_slot_owner_everywhere(
        rc, (unsigned)fixture_cluster_keyslot(rc, keys[stopped], strlen(keys[stopped])),
        (int)stopped);
    redisReply *r = fixture_cluster_command(rc, stopped, "GET %s", keys[stopped]);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_NIL);
    freeReplyObject(r);
    assert_set(rc, stopped, keys[stopped], "again");
    assert_get(rc, stopped, keys[stopped], "again");
}

/* Layouts the fixture cannot make are refused before anything starts. */
static void refuses_impossible_layouts(void **state)
{
    (void)state;
    fixture_redis_cluster *rc = calloc(1, sizeof(*rc));
    assert_non_null(rc);
    assert_int_equal(fixture_cluster_form(rc, 0, 0, NULL), -1);
    assert_int_equal(fixture_cluster_form(rc, FIXTURE_CLUSTER_MAX_NODES / 2 + 1, 1, NULL), -1);
    assert_int_equal(rc->n, 0);
    assert_null(fixture_cluster_url(rc, 0));
    fixture_cluster_stop(rc);
    free(rc);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(forms_side_by_side),
        cmocka_unit_test(routes_by_slot),
        cmocka_unit_test(replicas_follow),
        cmocka_unit_test(failover_promotes_replica),
        cmocka_unit_test(forced_failover_after_stop),
        cmocka_unit_test(migration_asks_then_moves),
        cmocka_unit_test(stopped_master_refuses),
        cmocka_unit_test(refuses_impossible_layouts),
    };
    return cmocka_run_group_tests_name("cluster_fixture", tests, group_setup, group_teardown);
}
