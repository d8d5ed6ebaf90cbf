/* SPDX-License-Identifier: MIT */
/* test_cluster.c - a node that is a whole Redis Cluster (cluster:// URLs, lib/net/cluster.c)
 * against real clusters: five nodes, three of them clusters of three masters (a with a replica for
 * each master) and two plain servers. Keys go to their slot's master; locks are taken, extended,
 * auto-extended and released over all five; a slot migrates under a loop of locks; a replica is
 * promoted under traffic; a stopped master makes its cluster vote timeout; keys of one request
 * in two slots are refused; masters that restart empty are noticed at once.
 *
 * The clusters are formed once for the group (forming is what costs time); a test that changes
 * one (migration, failover, a paused master) uses its own: b for the migration, a for the
 * failover, c for the paused master; b and c lose a master's data last. Every check reads the
 * servers with plain commands of its own (GET on the master that CLUSTER KEYSLOT and CLUSTER SHARDS
 * name). */
#include "cluster_fixture.h"
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_CLUSTERS 3
#define MASTERS 3
#define N_PLAIN 2
#define N (N_CLUSTERS + N_PLAIN)

enum { A, B, C };

static fixture_redis_cluster *clusters; /* a, b, c: formed by the group setup */

static int group_teardown(void **state)
{
    (void)state;
    for (unsigned k = 0; clusters != NULL && k < N_CLUSTERS; k++)
        fixture_cluster_stop(&clusters[k]);
    free(clusters);
    clusters = NULL;
    fixture_stop_all();
    return 0;
}

static int group_setup(void **state)
{
    clusters = calloc(N_CLUSTERS, sizeof(*clusters));
    if (clusters == NULL)
        return -1;
    bool formed = true;
    for (unsigned k = 0; formed && k < N_CLUSTERS; k++)
        formed = fixture_cluster_start(&clusters[k], MASTERS, k == A ? 1 : 0, NULL) == 0;
    for (unsigned k = 0; formed && k < N_CLUSTERS; k++)
        formed = fixture_cluster_wait_formed(&clusters[k]) == 0;
    if (!formed) {
        group_teardown(state);
        return -1;
    }
    return 0;
}

/* "cluster://127.0.0.1:P0?seed=127.0.0.1:P1&seed=..." over rc's first `masters` nodes, with
 * extra ("&k=v", may be "") appended. */
static void cluster_url(const fixture_redis_cluster *rc, const char *extra, char *out, size_t len)
{
    int n = snprintf(out, len, "cluster://127.0.0.1:%d?timeout_ms=%d", fixture_cluster_port(rc, 0),
                     H_NODE_TIMEOUT_MS);
    for (unsigned i = 1; i < rc->masters && n > 0 && (size_t)n < len; i++)
        n += snprintf(out + n, len - (size_t)n, "&seed=127.0.0.1:%d", fixture_cluster_port(rc, i));
    if (n > 0 && (size_t)n < len)
        snprintf(out + n, len - (size_t)n, "%s", extra);
}

/* The env's two plain servers and the three clusters, in the order c's nodes are: a, b, c,
 * plain 0, plain 1. extra[k] (NULL: none) goes at the end of cluster k's URL. */
static redlock_client *client_over_all(h_env *env, const redlock_options *opts,
                                       const char *const extra[N_CLUSTERS])
{
    static char urls[N][512];
    const char *list[N];
    for (unsigned k = 0; k < N_CLUSTERS; k++) {
        cluster_url(&clusters[k], extra != NULL && extra[k] != NULL ? extra[k] : "", urls[k],
                    sizeof(urls[k]));
        list[k] = urls[k];
    }
    for (unsigned i = 0; i < N_PLAIN; i++) {
        snprintf(urls[N_CLUSTERS + i], sizeof(urls[0]), "redis://127.0.0.1:%d",
                 env->cluster.servers[i].port);
        list[N_CLUSTERS + i] = urls[N_CLUSTERS + i];
    }
    redlock_options o;
    if (opts == NULL) {
        h_test_options(&o);
        opts = &o;
    }
    redlock_client *c = NULL;
    char err[256] = "";
    int rc = h_client_urls(env, list, N, opts, &c, err, sizeof(err));
    if (rc != 0)
        fprintf(stderr, "client: %s\n", err);
    assert_int_equal(rc, 0);
    return c;
}

/* The env's two plain servers and a client over them and the three clusters. */
static redlock_client *start(h_env *env)
{
    h_env_start(env, N_PLAIN, NULL);
    return client_over_all(env, NULL, NULL);
}

/* A loop (and one plain server, unused) and a client on cluster b alone (quorum 1: its rounds are
 * that cluster's votes), as "cluster://USERINFO127.0.0.1:PORT" + params. */
/* A client (the test's options) on the one node url: its rounds are that node's votes alone. */
static redlock_client *solo_client(h_env *env, const char *url)
{
    const char *urls[1] = {url};
    redlock_options o;
    h_test_options(&o);
    redlock_client *c = NULL;
    assert_int_equal(h_client_urls(env, urls, 1, &o, &c, NULL, 0), 0);
    return c;
}

static redlock_client *solo_on_b(h_env *env, const char *userinfo, const char *params)
{
    h_env_start(env, 1, NULL);
    char url[256];
    snprintf(url, sizeof(url), "cluster://%s127.0.0.1:%d%s", userinfo,
             fixture_cluster_port(&clusters[B], 0), params);
    return solo_client(env, url);
}

/* Whether the master of key's slot in cluster k holds key with token. */
static bool cluster_holds(unsigned k, const char *key, const char *token, size_t token_len)
{
    int owner = fixture_cluster_key_owner(&clusters[k], key, strlen(key));
    assert_true(owner >= 0);
    redisReply *r = fixture_cluster_command(&clusters[k], (unsigned)owner, "GET %s", key);
    assert_non_null(r);
    bool yes = r->type == REDIS_REPLY_STRING && r->len == token_len &&
               memcmp(r->str, token, token_len) == 0;
    freeReplyObject(r);
    return yes;
}

/* How many of the five nodes hold key with token now. */
static unsigned holders(h_env *env, const char *key, const char *token)
{
    size_t token_len = strlen(token);
    unsigned n = h_count_holding(env, key, strlen(key), token, token_len);
    for (unsigned k = 0; k < N_CLUSTERS; k++)
        n += cluster_holds(k, key, token, token_len) ? 1 : 0;
    return n;
}

/* Run the loop until all five nodes hold key with lock's token (the round decided at three). */
static void wait_all_hold(h_env *env, const char *key, const redlock_lock *lock)
{
    size_t token_len = 0;
    const char *token = redlock_lock_token(lock, &token_len); /* a random token: hex digits */
    uint64_t t0 = redlock_now_us();
    while (holders(env, key, token) < N && h_since_us(t0) < H_WAIT_MS * 1000ULL)
        h_run_for(&env->loop, 10);
    assert_int_equal(holders(env, key, token), N);
}

/* token: a copy, the lock is freed by then. */
static void wait_none_hold(h_env *env, const char *key, const char *token)
{
    uint64_t t0 = redlock_now_us();
    while (holders(env, key, token) > 0 && h_since_us(t0) < H_WAIT_MS * 1000ULL)
        h_run_for(&env->loop, 10);
    assert_int_equal(holders(env, key, token), 0);
}

/* Resources whose slots fall on each of the three masters of a cluster (the fixture's layout
 * splits the slots evenly; these names were picked for it, and the test checks the spread). */
static const char *const spread[] = {"cl:alpha", "cl:bravo",   "cl:charlie", "cl:delta",
                                     "cl:echo",  "cl:foxtrot", "cl:golf",    "cl:hotel"};
#define N_SPREAD (sizeof(spread) / sizeof(spread[0]))

/* 1. Locks over three clusters and two servers: every cluster's vote is its slot master's; the
 * key lands on that master only, the extend renews it there, the release deletes it there. */
static void locks_over_clusters_and_servers(void **state)
{
    (void)state;
    h_env env;
    redlock_client *c = start(&env);
    bool master_used[MASTERS] = {false};
    for (unsigned r = 0; r < N_SPREAD; r++) {
        const char *key = spread[r];
        int owner = fixture_cluster_key_owner(&clusters[B], key, strlen(key));
        assert_true(owner >= 0 && owner < MASTERS);
        master_used[owner] = true;
        h_record rec, ext, rel;
        assert_int_equal(h_acquire(&env, c, key, 10000, NULL, &rec), 0);
        wait_all_hold(&env, key, rec.lock);
        assert_int_equal(h_extend(&env, rec.lock, 20000, 0, &ext), 0);
        assert_int_equal(ext.votes_yes + ext.votes_no + ext.votes_error + ext.votes_timeout >= 3,
                         1);
        for (unsigned k = 0; k < N_CLUSTERS; k++) {
            int o = fixture_cluster_key_owner(&clusters[k], key, strlen(key));
            redisReply *pt = fixture_cluster_command(&clusters[k], (unsigned)o, "PTTL %s", key);
            assert_non_null(pt);
            if (pt->integer <= 10000) /* the extend may still be on its way there */
                h_run_for(&env.loop, 50);
            freeReplyObject(pt);
        }
        char token[REDLOCK_TOKEN_MAX + 1];
        snprintf(token, sizeof(token), "%s", redlock_lock_token(rec.lock, NULL));
        h_release_ok(&env, rec.lock, &rel);
        assert_int_equal(rel.votes_yes, N);
        wait_none_hold(&env, key, token);
    }
    for (unsigned m = 0; m < MASTERS; m++)
        assert_true(master_used[m]); /* the names do reach every master */
    /* Each cluster counts as one node, up, whatever its number of masters. */
    for (unsigned k = 0; k < N; k++) {
        redlock_node_info info;
        redlock_node_info_init(&info);
        assert_int_equal(redlock_client_node_info(c, k, &info), 0);
        assert_int_equal(info.state, REDLOCK_NODE_UP);
        if (k < N_CLUSTERS)
            assert_non_null(strstr(info.url, "cluster://"));
    }
    h_env_stop(&env);
}

static int lost_calls;
static void on_lost(redlock_lock *lock, int reason, void *data)
{
    (void)lock;
    (void)reason;
    (void)data;
    lost_calls++;
}

/* 2. Auto-extension renews the key on every cluster's master past several ttls. */
static void auto_extension_over_clusters(void **state)
{
    (void)state;
    h_env env;
    redlock_client *c = start(&env);
    redlock_auto_opts ao;
    redlock_auto_opts_init(&ao);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.auto_extend = &ao;
    lo.lost_cb = on_lost;
    lost_calls = 0;
    h_record rec;
    assert_int_equal(h_acquire(&env, c, "cl:auto", 600, &lo, &rec), 0);
    h_run_for(&env.loop, 2000); /* more than three ttls */
    assert_int_equal(lost_calls, 0);
    wait_all_hold(&env, "cl:auto", rec.lock);
    assert_true(redlock_lock_validity_ms(rec.lock) > 0);
    h_release_ok(&env, rec.lock, NULL);
    assert_int_equal(lost_calls, 0);
    h_env_stop(&env);
}

/* 3. Keys of one request must share a slot on a cluster node: a fenced lock on a resource whose
 * counter lies in another slot, or a set over several slots, is refused at once with a message
 * that names the hash tag; with a tag, both work and the counter lives beside the key. */
static void keys_of_one_request_share_a_slot(void **state)
{
    (void)state;
    h_env env;
    redlock_client *c = start(&env);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.fencing = true;
    h_record rec;
    assert_int_equal(redlock_acquire(c, "resource", 8, 5000, &lo, h_record_cb, &rec),
                     REDLOCK_EINVAL);
    assert_non_null(strstr(redlock_client_last_error(c), "hash tag"));
    assert_int_equal(h_acquire(&env, c, "{cl:fenced}", 5000, &lo, &rec), 0);
    assert_true(redlock_lock_fence(rec.lock) >= 1);
    unsigned slot = (unsigned)fixture_cluster_keyslot(&clusters[C], "{cl:fenced}", 11);
    assert_int_equal(fixture_cluster_keyslot(&clusters[C], "{cl:fenced}:fence", 17), (int)slot);
    h_release_ok(&env, rec.lock, NULL);

    const void *set[2] = {"cl:one", "cl:two"};
    size_t lens[2] = {6, 6};
    assert_int_equal(redlock_acquire_multi(c, set, lens, 2, 5000, NULL, h_record_cb, &rec),
                     REDLOCK_EINVAL);
    assert_non_null(strstr(redlock_client_last_error(c), "hash tag"));
    const void *tagged[2] = {"{cl:set}one", "{cl:set}two"};
    size_t tlens[2] = {11, 11};
    memset(&rec, 0, sizeof(rec));
    assert_int_equal(redlock_acquire_multi(c, tagged, tlens, 2, 5000, NULL, h_record_cb, &rec), 0);
    assert_true(h_run_until(&env.loop, &rec.calls, 1, 30000));
    assert_int_equal(rec.status, 0);
    h_release_ok(&env, rec.lock, NULL);

    /* Waiters: with a hash tag in the resource's queue (its keys share the slot), without one
     * outside it; either way the release hands the lock over. */
    redlock_client *other = client_over_all(&env, NULL, NULL);
    static const char *const waited[2] = {"{cl:queued}", "cl:unqueued"};
    for (unsigned w = 0; w < 2; w++) {
        h_record held, waiter;
        assert_int_equal(h_acquire(&env, c, waited[w], 10000, NULL, &held), 0);
        redlock_lock_opts wo;
        redlock_lock_opts_init(&wo);
        wo.wait_ms = 10000;
        memset(&waiter, 0, sizeof(waiter));
        assert_int_equal(
            redlock_acquire(other, waited[w], strlen(waited[w]), 10000, &wo, h_record_cb, &waiter),
            0);
        h_wait_busy_rounds(&env, other, w + 1); /* it waits now */
        char queue[64];
        snprintf(queue, sizeof(queue), "%s:queue", waited[w]);
        int owner = fixture_cluster_key_owner(&clusters[A], queue, strlen(queue));
        redisReply *r = fixture_cluster_command(&clusters[A], (unsigned)owner, "EXISTS %s", queue);
        assert_non_null(r);
        assert_int_equal(r->integer, w == 0 ? 1 : 0); /* a place in the queue only with a tag */
        freeReplyObject(r);
        assert_int_equal(h_pttl(&env, 0, queue, strlen(queue)) != -2, w == 0);
        h_release_ok(&env, held.lock, NULL);
        assert_true(h_run_until(&env.loop, &waiter.calls, 1, H_WAIT_MS));
        if (waiter.status != 0)
            h_dump_record("waiter", &waiter);
        assert_int_equal(waiter.status, 0);
        h_release_ok(&env, waiter.lock, NULL);
    }
    h_close_client(&env, other);
    h_env_stop(&env);
}

/* GET key on cluster k's master of its slot, as a number: 0 when absent. */
static unsigned long long cluster_number(unsigned k, const char *key)
{
    int owner = fixture_cluster_key_owner(&clusters[k], key, strlen(key));
    assert_true(owner >= 0);
    redisReply *r = fixture_cluster_command(&clusters[k], (unsigned)owner, "GET %s", key);
    assert_non_null(r);
    unsigned long long n = r->type == REDIS_REPLY_STRING ? strtoull(r->str, NULL, 10) : 0;
    freeReplyObject(r);
    return n;
}

/* How many of the five nodes hold counter key at value (0: absent). */
static unsigned counters_at(h_env *env, const char *key, unsigned long long value)
{
    unsigned n = 0;
    for (unsigned k = 0; k < N_CLUSTERS; k++)
        n += cluster_number(k, key) == value;
    for (unsigned i = 0; i < N_PLAIN; i++) {
        char *v = h_get(env, i, key, strlen(key), NULL);
        n += (v != NULL ? strtoull(v, NULL, 10) : 0) == value;
        free(v);
    }
    return n;
}

/* 3c. A fence domain on a cluster node: its counter, "<domain>:fence", must lie in the resources'
 * slot, which one hash tag gives both; fences then grow across the resources, and every node
 * (a cluster's master of that slot) holds the one counter, none of each resource's own. A domain
 * in another slot is refused at once. */
static void fence_domain_in_the_resources_slot(void **state)
{
    (void)state;
    h_env env;
    redlock_client *c = start(&env);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.fencing = true;
    lo.fence_domain = "cl:users";
    h_record rec;
    assert_int_equal(redlock_acquire(c, "{cl:users}:1", 12, 5000, &lo, h_record_cb, &rec),
                     REDLOCK_EINVAL);
    assert_non_null(strstr(redlock_client_last_error(c), "another hash slot"));
    lo.fence_domain = "{cl:users}";
    static const char *const resources[] = {"{cl:users}:1", "{cl:users}:2", "{cl:users}:1"};
    uint64_t last = 0;
    for (size_t k = 0; k < sizeof(resources) / sizeof(resources[0]); k++) {
        assert_int_equal(h_acquire(&env, c, resources[k], 10000, &lo, &rec), 0);
        assert_true(rec.fence > last);
        last = rec.fence;
        h_release_ok(&env, rec.lock, NULL);
    }
    uint64_t t0 = redlock_now_us(); /* the last nodes' scripts land after the decision */
    while (counters_at(&env, "{cl:users}:fence", last) < N && h_since_us(t0) < H_WAIT_MS * 1000ULL)
        h_run_for(&env.loop, 10);
    assert_int_equal(counters_at(&env, "{cl:users}:fence", last), N);
    assert_int_equal(counters_at(&env, "{cl:users}:1:fence", 0), N);
    assert_int_equal(counters_at(&env, "{cl:users}:2:fence", 0), N);
    h_env_stop(&env);
}

/* 3b. A user that may not run CLUSTER SHARDS (as on a server older than 7, which does not know
 * it) gets the map from CLUSTER SLOTS: a client on cluster b alone (quorum 1) takes and releases
 * locks on keys of every master with it. */
static void slots_when_shards_refused(void **state)
{
    (void)state;
    fixture_redis_cluster *rc = &clusters[B];
    for (unsigned i = 0; i < rc->n; i++) {
        redisReply *r = fixture_cluster_command(
            rc, i, "ACL SETUSER slotsonly on >pw ~* &* +@all -cluster|shards");
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_STATUS);
        freeReplyObject(r);
    }
    h_env env;
    redlock_client *c = solo_on_b(&env, "slotsonly:pw@", "");
    bool used[MASTERS] = {false};
    for (unsigned r = 0; r < N_SPREAD; r++) {
        h_record rec;
        int rc_acq = h_acquire(&env, c, spread[r], 10000, NULL, &rec);
        if (rc_acq != 0)
            h_dump_record("acquire with CLUSTER SLOTS", &rec);
        assert_int_equal(rc_acq, 0);
        used[fixture_cluster_key_owner(rc, spread[r], strlen(spread[r]))] = true;
        h_release_ok(&env, rec.lock, NULL);
    }
    for (unsigned m = 0; m < MASTERS; m++)
        assert_true(used[m]);
    h_env_stop(&env);
}

/* Connections cluster b's master i has accepted so far (each fixture command is one more). */
static long long connections_received(unsigned i)
{
    redisReply *r = fixture_cluster_command(&clusters[B], i, "INFO stats");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    const char *at = strstr(r->str, "total_connections_received:");
    assert_non_null(at);
    long long n = atoll(at + strlen("total_connections_received:"));
    freeReplyObject(r);
    return n;
}

/* 3b. allow= keeps the client's connections (and its credentials) within the hosts named. The
 * URL names cluster b by "localhost"; its masters call themselves 127.0.0.1. allow=127.0.0.2:
 * no master is allowed, so every request is an error vote that says why, and no master but the
 * one reached as "localhost" (the URL's own) ever sees a connection from the client. A network
 * that holds them, or a seed on their host, lets the locks through. */
static void masters_kept_within_allow(void **state)
{
    (void)state;
    fixture_redis_cluster *rc = &clusters[B];
    h_env env;
    h_env_start(&env, 1, NULL);
    long long before[MASTERS];
    for (unsigned i = 1; i < MASTERS; i++)
        before[i] = connections_received(i);
    char url[256];
    snprintf(url, sizeof(url), "cluster://localhost:%d?allow=127.0.0.2",
             fixture_cluster_port(rc, 0));
    redlock_client *c = solo_client(&env, url);
    for (unsigned r = 0; r < N_SPREAD; r++) {
        h_record rec;
        assert_int_equal(h_acquire(&env, c, spread[r], 10000, NULL, &rec), REDLOCK_ENOQUORUM);
        assert_int_equal(rec.node_vote[0], REDLOCK_VOTE_ERROR);
        assert_non_null(strstr(rec.node_error[0], "master 127.0.0.1 is not among the hosts this "
                                                  "cluster URL allows (allow=)"));
    }
    h_close_client(&env, c);
    for (unsigned i = 1; i < MASTERS; i++) /* only this query's own connection */
        assert_int_equal(connections_received(i), before[i] + 1);

    static const char *const allowing[] = {"?allow=127.0.0.0/8", "?allow=::ffff:127.0.0.1/128",
                                           "?allow=10.0.0.1&seed=127.0.0.1:%d"};
    for (size_t k = 0; k < sizeof(allowing) / sizeof(allowing[0]); k++) {
        char params[96];
        snprintf(params, sizeof(params), allowing[k], fixture_cluster_port(rc, 1));
        snprintf(url, sizeof(url), "cluster://localhost:%d%s", fixture_cluster_port(rc, 0), params);
        c = solo_client(&env, url);
        for (unsigned r = 0; r < N_SPREAD; r++) {
            h_record rec;
            if (h_acquire(&env, c, spread[r], 10000, NULL, &rec) != 0)
                h_dump_record(url, &rec);
            assert_int_equal(rec.status, 0);
            h_release_ok(&env, rec.lock, NULL);
        }
        h_close_client(&env, c);
    }
    h_env_stop(&env);
}

/* A redirect that comes after other rounds were sent: the source of a half-migrated slot is
 * paused, so the lock on key is won without it; a lock on another key goes out meanwhile; then
 * the source answers ASK and the request is sent again to the target. It must be key's own SET
 * (encoded again, not the bytes the client's last round left): the target has key, and the
 * four other nodes hold it. */
static bool target_has(unsigned target, unsigned slot, const char *key)
{
    redisReply *r =
        fixture_cluster_command(&clusters[B], target, "CLUSTER GETKEYSINSLOT %u 100", slot);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    bool has = false;
    for (size_t i = 0; i < r->elements; i++)
        has = has || (r->element[i]->len == strlen(key) &&
                      memcmp(r->element[i]->str, key, strlen(key)) == 0);
    freeReplyObject(r);
    return has;
}

static void late_redirect(h_env *env, redlock_client *c, const char *key, unsigned source,
                          unsigned target)
{
    unsigned slot = (unsigned)fixture_cluster_keyslot(&clusters[B], key, strlen(key));
    const char *other = NULL;
    for (unsigned i = 0; i < N_SPREAD && other == NULL; i++)
        if (fixture_cluster_key_owner(&clusters[B], spread[i], strlen(spread[i])) != (int)source)
            other = spread[i];
    assert_non_null(other);
    assert_int_equal(fixture_cluster_pause(&clusters[B], source), 0);
    h_record rec, meanwhile;
    int rc = h_acquire(env, c, key, 10000, NULL, &rec);
    int rc2 = h_acquire(env, c, other, 10000, NULL, &meanwhile);
    assert_int_equal(fixture_cluster_resume(&clusters[B], source), 0);
    assert_int_equal(rc, 0);
    assert_int_equal(rc2, 0);
    /* The source lacks key (ASK): the target's keys in the slot tell where the SET went. */
    uint64_t t0 = redlock_now_us();
    while (!target_has(target, slot, key) && h_since_us(t0) < H_WAIT_MS * 1000ULL)
        h_run_for(&env->loop, 10);
    assert_true(target_has(target, slot, key));
    size_t token_len = 0;
    const char *token = redlock_lock_token(rec.lock, &token_len);
    assert_int_equal(holders(env, key, token), N - 1);
    h_release_ok(env, meanwhile.lock, NULL);
    h_release_ok(env, rec.lock, NULL);
}

/* 4. A slot migrates (half way: the source answers ASK for keys it no longer has; then
 * finished: MOVED) while a loop takes and releases a lock on a key of that slot and bumps a
 * counter on a plain server under it: every round is won, no update is lost. */
static void slot_migrating_under_a_lock_loop(void **state)
{
    (void)state;
    h_env env;
    redlock_client *c = start(&env);
    const char *key = "cl:migrating";
    unsigned slot = (unsigned)fixture_cluster_keyslot(&clusters[B], key, strlen(key));
    int from = fixture_cluster_slot_owner(&clusters[B], slot);
    assert_true(from >= 0);
    unsigned to = ((unsigned)from + 1) % MASTERS;
    int done = 0;
    for (unsigned phase = 0; phase < 3; phase++) {
        if (phase == 1) {
            assert_int_equal(fixture_cluster_migrate_slot(&clusters[B], slot, (unsigned)from, to,
                                                          FIXTURE_MIGRATE_HALF),
                             0);
            /* The source owns the slot still, and answers ASK for the key it lacks. */
            redisReply *r = fixture_cluster_command(&clusters[B], (unsigned)from, "GET %s", key);
            assert_non_null(r);
            assert_int_equal(r->type, REDIS_REPLY_ERROR);
            assert_memory_equal(r->str, "ASK ", 4);
            freeReplyObject(r);
            late_redirect(&env, c, key, (unsigned)from, to);
        }
        if (phase == 2)
            assert_int_equal(fixture_cluster_migrate_slot(&clusters[B], slot, (unsigned)from, to,
                                                          FIXTURE_MIGRATE_FINISH),
                             0);
        for (unsigned i = 0; i < 20; i++) {
            h_record rec;
            int rc = h_acquire(&env, c, key, 10000, NULL, &rec);
            if (rc != 0)
                h_dump_record("acquire during migration", &rec);
            assert_int_equal(rc, 0);
            /* the critical section: a read-modify-write on plain server 0 */
            size_t len = 0;
            char *v = h_get(&env, 0, "cl:counter", 10, &len);
            char next[32];
            snprintf(next, sizeof(next), "%ld", (v != NULL ? strtol(v, NULL, 10) : 0) + 1);
            free(v);
            h_set(&env, 0, "cl:counter", 10, next);
            done++;
            /* A release waits for every node: cluster b found the key where the SET put it
             * (half way: on the target, through ASK; after: through MOVED). */
            h_record rel;
            assert_int_equal(h_release(&env, rec.lock, &rel), 0);
            if (rel.votes_yes != N)
                h_dump_record("release during migration", &rel);
            assert_int_equal(rel.votes_yes, N);
            redlock_lock_free(rec.lock);
        }
    }
    size_t len = 0;
    char *v = h_get(&env, 0, "cl:counter", 10, &len);
    assert_non_null(v);
    assert_int_equal(strtol(v, NULL, 10), done);
    free(v);
    assert_int_equal(fixture_cluster_slot_owner(&clusters[B], slot), (int)to);
    /* The client followed: a lock now lands on the new owner. */
    h_record rec;
    assert_int_equal(h_acquire(&env, c, key, 10000, NULL, &rec), 0);
    wait_all_hold(&env, key, rec.lock);
    h_release_ok(&env, rec.lock, NULL);
    h_env_stop(&env);
}

/* 4b. TRYAGAIN: half way through a migration, a fenced lock's counter has moved to the
 * importing master but its key does not exist anywhere, so the importing master answers the
 * script (two keys, one missing) TRYAGAIN. The request is sent again every few ms within its
 * deadline; once the migration is finished it goes to the new owner (MOVED) and is won, with the
 * fence after the one the counter held before it moved. */
static void tryagain_while_a_slot_is_split(void **state)
{
    (void)state;
    fixture_redis_cluster *rc = &clusters[B];
    char params[64];
    snprintf(params, sizeof(params), "?timeout_ms=%d", 4 * H_NODE_TIMEOUT_MS);
    h_env env;
    redlock_client *c = solo_on_b(&env, "", params);
    const char *key = "{cl:split}";
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.fencing = true;
    h_record rec;
    assert_int_equal(h_acquire(&env, c, key, 10000, &lo, &rec), 0);
    uint64_t first = redlock_lock_fence(rec.lock);
    h_release_ok(&env, rec.lock, NULL); /* the counter stays, the key goes */

    unsigned slot = (unsigned)fixture_cluster_keyslot(rc, key, strlen(key));
    int from = fixture_cluster_slot_owner(rc, slot);
    assert_true(from >= 0);
    unsigned to = ((unsigned)from + 1) % MASTERS;
    assert_int_equal(
        fixture_cluster_migrate_slot(rc, slot, (unsigned)from, to, FIXTURE_MIGRATE_HALF), 0);
    /* The importing master itself says TRYAGAIN to the script after ASKING. */
    redisContext *ctx = fixture_cluster_connect(rc, to);
    assert_non_null(ctx);
    redisReply *r = redisCommand(ctx, "ASKING");
    freeReplyObject(r);
    r = redisCommand(ctx, "EVAL %s 2 %s %s:fence", "return redis.call('get', KEYS[1])", key, key);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ERROR);
    assert_memory_equal(r->str, "TRYAGAIN", 8);
    freeReplyObject(r);
    redisFree(ctx);

    memset(&rec, 0, sizeof(rec));
    assert_int_equal(redlock_acquire(c, key, strlen(key), 10000, &lo, h_record_cb, &rec), 0);
    h_run_for(&env.loop, 300); /* TRYAGAIN, again and again */
    if (rec.calls != 0)
        h_dump_record("fenced acquire while the slot is split", &rec);
    assert_int_equal(rec.calls, 0);
    assert_int_equal(
        fixture_cluster_migrate_slot(rc, slot, (unsigned)from, to, FIXTURE_MIGRATE_FINISH), 0);
    assert_true(h_run_until(&env.loop, &rec.calls, 1, H_WAIT_MS));
    if (rec.status != 0)
        h_dump_record("fenced acquire across TRYAGAIN", &rec);
    assert_int_equal(rec.status, 0);
    assert_int_equal(redlock_lock_fence(rec.lock), first + 1);
    h_release_ok(&env, rec.lock, NULL);
    h_env_stop(&env);
}

/* 5. A replica is promoted (CLUSTER FAILOVER) while locks are taken: rounds keep deciding, and
 * with wait_replicas=1 a lock held across the failover is still on the new master. */
static void failover_under_traffic(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N_PLAIN, NULL);
    const char *extra[N_CLUSTERS] = {"&wait_replicas=1", NULL, NULL};
    redlock_client *c = client_over_all(&env, NULL, extra);
    const char *held_key = "cl:held";
    h_record held;
    assert_int_equal(h_acquire(&env, c, held_key, 60000, NULL, &held), 0);
    wait_all_hold(&env, held_key, held.lock);
    int master = fixture_cluster_key_owner(&clusters[A], held_key, strlen(held_key));
    int replica = fixture_cluster_replica_of(&clusters[A], (unsigned)master);
    assert_true(replica >= 0);
    /* A client on cluster a alone (quorum 1): its rounds are cluster a's votes. */
    char solo_url[512];
    cluster_url(&clusters[A], "&wait_replicas=1", solo_url, sizeof(solo_url));
    redlock_client *solo = solo_client(&env, solo_url);
    /* The failover starts (CLUSTER FAILOVER answers at once) while rounds run on keys of the
     * same slot ({cl:held}...): every round decides (won, or lost while the slot changes hands),
     * none hangs past its deadline. */
    redisReply *r = fixture_cluster_command(&clusters[A], (unsigned)replica, "CLUSTER FAILOVER");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    unsigned won = 0, rounds = 0;
    uint64_t t0 = redlock_now_us();
    while (fixture_cluster_key_owner(&clusters[A], held_key, strlen(held_key)) != replica &&
           h_since_us(t0) < H_WAIT_MS * 1000ULL) {
        for (unsigned k = 0; k < 5; k++) { /* five rounds per look at the owner */
            char key[32];
            snprintf(key, sizeof(key), "{cl:held}:%u", rounds++);
            h_record rec;
            int rc = h_acquire(&env, solo, key, 10000, NULL, &rec);
            assert_int_equal(rec.calls, 1);
            if (rc == 0) {
                won++;
                h_record rel;
                assert_int_equal(h_release(&env, rec.lock, &rel), 0);
                redlock_lock_free(rec.lock);
            }
        }
    }
    assert_int_equal(fixture_cluster_wait_converged(&clusters[A]), 0);
    assert_int_equal(fixture_cluster_key_owner(&clusters[A], held_key, strlen(held_key)), replica);
    printf("# %u of %u rounds won while the failover ran\n", won, rounds);
    /* Once it is done, the solo client follows the new master: every round is won there. */
    for (unsigned i = 0; i < 10; i++) {
        char key[32];
        snprintf(key, sizeof(key), "{cl:held}:after%u", i);
        h_record rec;
        int rc = h_acquire(&env, solo, key, 10000, NULL, &rec);
        if (rc != 0)
            h_dump_record("after the failover", &rec);
        assert_int_equal(rc, 0);
        h_release_ok(&env, rec.lock, NULL);
    }
    h_close_client(&env, solo);
    size_t token_len = 0;
    const char *token = redlock_lock_token(held.lock, &token_len);
    assert_true(cluster_holds(A, held_key, token, token_len));
    /* Rounds keep deciding on every node after the failover. */
    for (unsigned i = 0; i < 10; i++) {
        h_record rec;
        assert_int_equal(h_acquire(&env, c, "cl:after-failover", 10000, NULL, &rec), 0);
        h_release_ok(&env, rec.lock, NULL);
    }
    h_record ext;
    assert_int_equal(h_extend(&env, held.lock, 60000, 0, &ext), 0);
    h_release_ok(&env, held.lock, NULL);
    h_env_stop(&env);
}

/* 5b. The replica wait can fail: cluster a has one replica per master, so waiting for two makes
 * every write vote error (the key was written, the yes does not count). */
static void replica_wait_counts_replicas(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 1, NULL); /* its loop; the server stays unused */
    char url[512];
    cluster_url(&clusters[A], "&wait_replicas=2", url, sizeof(url));
    redlock_client *strict = solo_client(&env, url);
    h_record rec;
    assert_int_equal(h_acquire(&env, strict, "cl:two-replicas", 10000, NULL, &rec),
                     REDLOCK_ENOQUORUM);
    assert_int_equal(rec.node_vote[0], REDLOCK_VOTE_ERROR);
    if (strstr(rec.node_error[0], "1 of 2 replicas") == NULL)
        h_dump_record("wait_replicas=2", &rec);
    assert_non_null(strstr(rec.node_error[0], "1 of 2 replicas"));
    h_close_client(&env, strict);
    h_env_stop(&env);
}

/* 5c. A grant meets the replica wait, or is not made: on a node with wait_replicas, a waiter's
 * attempt leaves no grant record (the grant's SET would be the releaser's, which no WAIT
 * follows), so the holder's release only wakes it, and its own round waits for the replica. With
 * the replica stopped, the waiter has no lock (before the rule, the grant won at once, on the
 * master alone, and a failover could lose it); once the replica is back, it does. */
static void grant_waits_for_replicas(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 1, NULL); /* its loop; the server stays unused */
    const char *key = "{cl:grant}";
    int master = fixture_cluster_key_owner(&clusters[A], key, strlen(key));
    int replica = fixture_cluster_replica_of(&clusters[A], (unsigned)master);
    assert_true(replica >= 0);
    /* The URL names the key's master first: the client's subscriber connects there, where a
     * release's PUBSUB NUMSUB sees it (a cluster counts subscribers per server). */
    char url[512];
    snprintf(url, sizeof(url), "cluster://127.0.0.1:%d?timeout_ms=%d&wait_replicas=1",
             fixture_cluster_port(&clusters[A], (unsigned)master), H_NODE_TIMEOUT_MS);
    redlock_client *holder = solo_client(&env, url);
    redlock_lock_opts wait;
    redlock_lock_opts_init(&wait);
    wait.wait_ms = 60000;
    h_record held;
    assert_int_equal(h_acquire(&env, holder, key, 30000, &wait, &held), 0);
    const char *urls[1] = {url};
    redlock_options o;
    h_test_options(&o);
    o.retry_delay_ms = 500;
    o.retry_jitter_ms = 0;
    redlock_client *w = NULL;
    assert_int_equal(h_client_urls(&env, urls, 1, &o, &w, NULL, 0), 0);
    h_record rec = {0};
    assert_int_equal(redlock_acquire(w, key, strlen(key), 5000, &wait, h_record_cb, &rec), 0);
    h_wait_busy_rounds(&env, w, 1);
    /* It listens on its own channel on the master, so a release could grant it the key there. */
    uint64_t t0 = redlock_now_us();
    for (;;) {
        redisReply *r = fixture_cluster_command(&clusters[A], (unsigned)master,
                                                "PUBSUB CHANNELS {cl:grant}:queue:*");
        assert_non_null(r);
        size_t n = r->type == REDIS_REPLY_ARRAY ? r->elements : 0;
        freeReplyObject(r);
        if (n == 1)
            break;
        assert_true(h_since_us(t0) < H_WAIT_MS * 1000ull);
        h_run_for(&env.loop, 10);
    }
    assert_int_equal(fixture_cluster_pause(&clusters[A], (unsigned)replica), 0);
    h_release_ok(&env, held.lock, NULL);
    h_run_for(&env.loop, 2000);
    if (rec.calls != 0)
        h_dump_record("the waiter, with the replica stopped", &rec);
    assert_int_equal(rec.calls, 0);
    assert_int_equal(fixture_cluster_resume(&clusters[A], (unsigned)replica), 0);
    assert_true(h_run_until(&env.loop, &rec.calls, 1, 2 * H_WAIT_MS));
    if (rec.status != 0)
        h_dump_record("the waiter, with the replica back", &rec);
    assert_int_equal(rec.status, 0);
    h_release_ok(&env, rec.lock, NULL);
    assert_int_equal(fixture_cluster_wait_converged(&clusters[A]), 0);
    h_close_client(&env, w);
    h_close_client(&env, holder);
    h_env_stop(&env);
}

/* 6. The master of the key's slot is stopped (SIGSTOP): that cluster votes timeout at its
 * deadline, as a plain node would, and the quorum of the other four decides. Runs last: the
 * cluster is left as it was by resuming the master. */
static void stopped_master_votes_timeout(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N_PLAIN, NULL);
    const char *extra[N_CLUSTERS] = {NULL, NULL, NULL};
    char urls[N][512];
    const char *list[N];
    for (unsigned k = 0; k < N_CLUSTERS; k++) {
        cluster_url(&clusters[k], extra[k] != NULL ? extra[k] : "", urls[k], sizeof(urls[k]));
        list[k] = urls[k];
    }
    /* cluster c gets a short deadline of its own */
    snprintf(urls[C], sizeof(urls[C]), "cluster://127.0.0.1:%d?timeout_ms=300&seed=127.0.0.1:%d",
             fixture_cluster_port(&clusters[C], 0), fixture_cluster_port(&clusters[C], 1));
    for (unsigned i = 0; i < N_PLAIN; i++) {
        snprintf(urls[N_CLUSTERS + i], sizeof(urls[0]), "redis://127.0.0.1:%d",
                 env.cluster.servers[i].port);
        list[N_CLUSTERS + i] = urls[N_CLUSTERS + i];
    }
    redlock_options o;
    h_test_options(&o);
    redlock_client *c = NULL;
    assert_int_equal(h_client_urls(&env, list, N, &o, &c, NULL, 0), 0);
    const char *key = "cl:paused";
    h_record warm;
    assert_int_equal(h_acquire(&env, c, "cl:warm", 5000, NULL, &warm), 0); /* map known */
    h_release_ok(&env, warm.lock, NULL);
    int owner = fixture_cluster_key_owner(&clusters[C], key, strlen(key));
    assert_true(owner >= 0);
    assert_int_equal(fixture_cluster_pause(&clusters[C], (unsigned)owner), 0);
    h_record rec, rel;
    int rc = h_acquire(&env, c, key, 10000, NULL, &rec);
    /* A release waits for every node's vote: the paused cluster's is a timeout. */
    int rel_rc = rc == 0 ? h_release(&env, rec.lock, &rel) : -1;
    assert_int_equal(fixture_cluster_resume(&clusters[C], (unsigned)owner), 0);
    assert_int_equal(rc, 0);
    assert_true(rec.node_vote[C] == REDLOCK_VOTE_TIMEOUT || rec.node_vote[C] == REDLOCK_VOTE_NONE);
    assert_int_equal(rel_rc, 0);
    assert_int_equal(rel.votes_yes, 4);
    assert_int_equal(rel.node_vote[C], REDLOCK_VOTE_TIMEOUT);
    assert_non_null(strstr(rel.node_error[C], "no answer within 300 ms"));
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

static int lost_reason;
static void on_lost_reason(redlock_lock *lock, int reason, void *data)
{
    (void)lock;
    (void)data;
    lost_calls++;
    lost_reason = reason;
}

/* 7. The masters of the key's slot in clusters b and c restart empty (they rejoin with their
 * identity, without their data), and plain server 0 loses the key too: three of five nodes
 * forgot the lock. The clusters' connections reach new servers (new run_ids) as a plain node's
 * does, and the auto-extended lock (a 60 s ttl: its first extension 20 s away) is reported lost
 * within the reconnect backoff (1.5 s at most here) and a round. Runs last: it empties two
 * masters. */
static void masters_back_empty_are_noticed(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N_PLAIN, NULL);
    redlock_options o;
    h_test_options(&o);
    o.reconnect_max_ms = 1000;
    redlock_client *c = client_over_all(&env, &o, NULL);
    const char *key = "cl:amnesia";
    redlock_auto_opts ao;
    redlock_auto_opts_init(&ao);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.auto_extend = &ao;
    lo.lost_cb = on_lost_reason;
    lost_calls = 0;
    h_record rec;
    assert_int_equal(h_acquire(&env, c, key, 60000, &lo, &rec), 0);
    wait_all_hold(&env, key, rec.lock);
    for (unsigned k = B; k <= C; k++) {
        int owner = fixture_cluster_key_owner(&clusters[k], key, strlen(key));
        assert_true(owner >= 0);
        assert_int_equal(fixture_cluster_restart(&clusters[k], (unsigned)owner), 0);
    }
    /* Only the clusters' reconnections can tell: the plain server loses the key without a
     * restart. */
    assert_int_equal(h_del(&env, 0, key, strlen(key)), 1);
    uint64_t back = redlock_now_us();
    const int bound_ms = 1500 + H_NODE_TIMEOUT_MS + H_SLACK_MS;
    assert_true(h_run_until(&env.loop, &lost_calls, 1, bound_ms));
    printf("# lost %llu ms after the masters were back\n",
           (unsigned long long)(h_since_us(back) / 1000));
    assert_int_equal(lost_calls, 1);
    assert_int_equal(lost_reason, REDLOCK_ELOST);
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(locks_over_clusters_and_servers),
        cmocka_unit_test(auto_extension_over_clusters),
        cmocka_unit_test(keys_of_one_request_share_a_slot),
        cmocka_unit_test(fence_domain_in_the_resources_slot),
        cmocka_unit_test(slots_when_shards_refused),
        cmocka_unit_test(masters_kept_within_allow),
        cmocka_unit_test(slot_migrating_under_a_lock_loop),
        cmocka_unit_test(tryagain_while_a_slot_is_split),
        cmocka_unit_test(failover_under_traffic),
        cmocka_unit_test(replica_wait_counts_replicas),
        cmocka_unit_test(grant_waits_for_replicas),
        cmocka_unit_test(stopped_master_votes_timeout),
        cmocka_unit_test(masters_back_empty_are_noticed),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
