/* SPDX-License-Identifier: MIT */
/* test_multi.c - a lock on several resources at once (redlock_acquire_multi): one token, all or
 * none of the set on each node, a round won only with a quorum of nodes that granted the whole
 * set; extend, release, inspect, auto-extension, waiting, the close and the blocking API cover the
 * set; bad sets are refused before anything is sent. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 5
#define K 3

static const char *const names[K] = {"multi:a", "multi:b", "multi:c"};

static void set_of(const char *const *keys, unsigned k, const void **res, size_t *lens)
{
    for (unsigned i = 0; i < k; i++) {
        res[i] = keys[i];
        lens[i] = strlen(keys[i]);
    }
}

/* Acquire keys[0..k) with c and wait for the callback. */
static int acquire_set(h_env *env, redlock_client *c, const char *const *keys, unsigned k,
                       uint64_t ttl_ms, const redlock_lock_opts *opts, h_record *rec)
{
    const void *res[8];
    size_t lens[8];
    set_of(keys, k, res, lens);
    memset(rec, 0, sizeof(*rec));
    int rc = redlock_acquire_multi(c, res, lens, k, ttl_ms, opts, h_record_cb, rec);
    if (rc != 0)
        return rc;
    assert_true(h_run_until(&env->loop, &rec->calls, 1, 30000));
    return rec->status;
}

/* Whether server i holds key with the lock's token. */
static bool holds(h_env *env, unsigned i, const char *key, const redlock_lock *lock)
{
    size_t token_len = 0, len = 0;
    const char *token = redlock_lock_token(lock, &token_len);
    char *v = h_get(env, i, key, strlen(key), &len);
    bool yes = v != NULL && len == token_len && memcmp(v, token, len) == 0;
    free(v);
    return yes;
}

static bool exists(h_env *env, unsigned i, const char *key)
{
    return h_pttl(env, i, key, strlen(key)) != -2;
}

/* 1. The set is taken on every node with one token, the handle names every resource in order,
 * and the release deletes every key everywhere. */
static void set_taken_and_released_everywhere(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_record rec, rel;
    assert_int_equal(acquire_set(&env, c, names, K, 10000, NULL, &rec), 0);
    assert_true(rec.votes_yes >= 3);
    h_drain(&env, c);
    for (unsigned i = 0; i < N; i++) {
        for (unsigned k = 0; k < K; k++) {
            assert_true(holds(&env, i, names[k], rec.lock));
            long long pttl = h_pttl(&env, i, names[k], strlen(names[k]));
            assert_true(pttl > 0 && pttl <= 10000);
        }
    }
    assert_int_equal(redlock_lock_resource_count(rec.lock), K);
    for (unsigned k = 0; k < K; k++) {
        size_t len = 0;
        const char *r = redlock_lock_resource_at(rec.lock, k, &len);
        assert_int_equal(len, strlen(names[k]));
        assert_memory_equal(r, names[k], len);
    }
    size_t len = 99;
    assert_null(redlock_lock_resource_at(rec.lock, K, &len));
    assert_int_equal(len, 0);
    assert_non_null(redlock_lock_resource(rec.lock, &len));
    assert_int_equal(len, strlen(names[0]));

    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, N);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(h_dbsize(&env, i), 0);
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

/* 2. All or none on each node: a node where one key of the set is held votes no and gets none of
 * the others; the round is won by the nodes that granted the whole set. When too few can, the
 * round is lost, released everywhere, and the other holder's key is left alone. */
static void all_or_none_per_node(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_set(&env, 0, "multi:b", 7, "someone-else");
    h_set(&env, 1, "multi:b", 7, "someone-else");
    h_record rec;
    assert_int_equal(acquire_set(&env, c, names, K, 10000, NULL, &rec), 0);
    h_drain(&env, c);
    /* Nodes 0 and 1 may answer after the decision (their votes are then not in the result):
     * what they did is read from them. */
    for (unsigned i = 0; i < 2; i++) {
        assert_false(exists(&env, i, "multi:a"));
        assert_false(exists(&env, i, "multi:c"));
        assert_false(holds(&env, i, "multi:b", rec.lock));
    }
    for (unsigned i = 2; i < N; i++) {
        assert_int_equal(rec.node_vote[i], REDLOCK_VOTE_YES);
        for (unsigned k = 0; k < K; k++)
            assert_true(holds(&env, i, names[k], rec.lock));
    }
    h_record rel;
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, N - 2);
    redlock_lock_free(rec.lock);

    /* A third node holds b: no quorum can grant the set. */
    h_set(&env, 2, "multi:b", 7, "someone-else");
    assert_int_equal(acquire_set(&env, c, names, K, 10000, NULL, &rec), REDLOCK_EBUSY);
    assert_int_equal(rec.votes_no, 3);
    h_drain(&env, c); /* the lost round's release has run everywhere */
    for (unsigned i = 0; i < N; i++) {
        assert_false(exists(&env, i, "multi:a"));
        assert_false(exists(&env, i, "multi:c"));
        size_t len = 0;
        char *v = h_get(&env, i, "multi:b", 7, &len);
        if (i < 3) {
            assert_non_null(v);
            assert_memory_equal(v, "someone-else", len);
        } else {
            assert_null(v);
        }
        free(v);
    }
    h_env_stop(&env);
}

/* 3. Bad sets are refused at once, with a message, and nothing reaches a node. */
static void bad_sets_are_refused(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_record rec = {0};
    const void *res[4] = {"x", "y", "x", "z"};
    size_t lens[4] = {1, 1, 1, 1};
    assert_int_equal(redlock_acquire_multi(c, res, lens, 4, 0, NULL, h_record_cb, &rec),
                     REDLOCK_EINVAL);
    assert_non_null(strstr(redlock_client_last_error(c), "resources 0 and 2 are the same"));
    assert_int_equal(redlock_inspect_multi(c, res, lens, 4, h_record_cb, &rec), REDLOCK_EINVAL);
    /* The same bytes in different lengths are different resources; an empty one is not one. */
    const void *prefix[2] = {"ab", "abc"};
    size_t prefix_lens[2] = {2, 3};
    lens[1] = 0;
    assert_int_equal(redlock_acquire_multi(c, res, lens, 2, 0, NULL, h_record_cb, &rec),
                     REDLOCK_EINVAL);
    assert_non_null(strstr(redlock_client_last_error(c), "resource 1 is empty"));
    assert_int_equal(redlock_acquire_multi(c, res, lens, 0, 0, NULL, h_record_cb, &rec),
                     REDLOCK_EINVAL);
    assert_int_equal(redlock_acquire_multi(c, NULL, lens, 2, 0, NULL, h_record_cb, &rec),
                     REDLOCK_EINVAL);
    assert_int_equal(redlock_acquire_multi(c, res, NULL, 2, 0, NULL, h_record_cb, &rec),
                     REDLOCK_EINVAL);
    assert_int_equal(redlock_acquire_multi(c, prefix, prefix_lens, REDLOCK_RESOURCES_MAX + 1, 0,
                                           NULL, h_record_cb, &rec),
                     REDLOCK_EINVAL);
    assert_int_equal(redlock_acquire_multi(c, prefix, prefix_lens, 2, 0, NULL, NULL, &rec),
                     REDLOCK_EINVAL);
    /* REDLOCK_RESOURCE_MAX bounds a set's bytes in all: two resources of 2/3 of it are over. */
    static char two_thirds[2][REDLOCK_RESOURCE_MAX * 2 / 3];
    memset(two_thirds, 't', sizeof(two_thirds));
    two_thirds[1][0] = 'u';
    const void *halves[2] = {two_thirds[0], two_thirds[1]};
    size_t halves_lens[2] = {sizeof(two_thirds[0]), sizeof(two_thirds[1])};
    assert_int_equal(redlock_acquire_multi(c, halves, halves_lens, 2, 0, NULL, h_record_cb, &rec),
                     REDLOCK_EINVAL);
    assert_non_null(strstr(redlock_client_last_error(c), "over REDLOCK_RESOURCE_MAX (16384)"));
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.fencing = true;
    assert_int_equal(redlock_acquire_multi(c, prefix, prefix_lens, 2, 0, &lo, h_record_cb, &rec),
                     REDLOCK_EINVAL);
    assert_non_null(strstr(redlock_client_last_error(c), "fencing is for one resource"));
    h_run_for(&env.loop, 50);
    assert_int_equal(rec.calls, 0);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(h_dbsize(&env, i), 0);

    /* A large set is fine: every key, in one script per node. */
    enum { BIG = 200 };
    char(*keys)[16] = calloc(BIG, sizeof(*keys));
    const void **big = calloc(BIG, sizeof(*big));
    size_t *big_lens = calloc(BIG, sizeof(*big_lens));
    assert_non_null(keys);
    assert_non_null(big);
    assert_non_null(big_lens);
    for (unsigned k = 0; k < BIG; k++) {
        big_lens[k] = (size_t)snprintf(keys[k], sizeof(keys[k]), "multi:big:%u", k);
        big[k] = keys[k];
    }
    assert_int_equal(redlock_acquire_multi(c, big, big_lens, BIG, 10000, NULL, h_record_cb, &rec),
                     0);
    assert_true(h_run_until(&env.loop, &rec.calls, 1, 30000));
    assert_int_equal(rec.status, 0);
    h_drain(&env, c);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(h_dbsize(&env, i), BIG);
    h_release_ok(&env, rec.lock, NULL);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(h_dbsize(&env, i), 0);
    free(keys);
    free(big);
    free(big_lens);
    h_env_stop(&env);
}

/* 4. An extend renews the set only where every key still holds the token; RETAKE gives a node
 * that lost one key all of them back. */
static void extend_covers_the_set(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_record rec, ext;
    assert_int_equal(acquire_set(&env, c, names, K, 5000, NULL, &rec), 0);
    h_hear_all(&env, c); /* every node's keys kept */
    assert_int_equal(h_del(&env, 0, "multi:b", 7), 1);

    assert_int_equal(h_extend(&env, rec.lock, 60000, 0, &ext), 0);
    h_drain(&env, c); /* node 0 may answer after the decision: read what it did */
    /* Node 0 changed nothing: its keys keep the acquire's ttl. */
    assert_true(h_pttl(&env, 0, "multi:a", 7) <= 5000);
    assert_false(exists(&env, 0, "multi:b"));
    for (unsigned i = 1; i < N; i++) {
        for (unsigned k = 0; k < K; k++)
            assert_true(h_pttl(&env, i, names[k], strlen(names[k])) > 5000);
    }

    assert_int_equal(h_extend(&env, rec.lock, 60000, REDLOCK_EXTEND_RETAKE, &ext), 0);
    h_drain(&env, c);
    for (unsigned i = 0; i < N; i++) {
        for (unsigned k = 0; k < K; k++) {
            assert_true(holds(&env, i, names[k], rec.lock));
            assert_true(h_pttl(&env, i, names[k], strlen(names[k])) > 5000);
        }
    }
    /* A key another holder took is never retaken over: that node votes no. */
    h_set(&env, 1, "multi:c", 7, "someone-else");
    assert_int_equal(h_extend(&env, rec.lock, 60000, REDLOCK_EXTEND_RETAKE, &ext), 0);
    h_drain(&env, c);
    size_t len = 0;
    char *v = h_get(&env, 1, "multi:c", 7, &len);
    assert_non_null(v);
    assert_memory_equal(v, "someone-else", len);
    free(v);
    h_release_ok(&env, rec.lock, NULL);
    h_env_stop(&env);
}

/* 5. The release deletes every key that still holds the token, even where the set is no longer
 * whole; such a node does not count as a holder. */
static void release_deletes_what_is_ours(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_record rec, rel;
    assert_int_equal(acquire_set(&env, c, names, K, 10000, NULL, &rec), 0);
    h_hear_all(&env, c); /* every node's keys kept: the one taken costs its own vote only */
    h_set(&env, 0, "multi:b", 7, "someone-else");
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, N - 1);
    assert_int_equal(rel.node_vote[0], REDLOCK_VOTE_NO);
    assert_false(exists(&env, 0, "multi:a"));
    assert_false(exists(&env, 0, "multi:c"));
    size_t len = 0;
    char *v = h_get(&env, 0, "multi:b", 7, &len);
    assert_non_null(v);
    assert_memory_equal(v, "someone-else", len);
    free(v);
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

typedef struct inspect_seen {
    int calls, status;
    unsigned votes_yes, votes_no, votes_error;
    redlock_vote vote[N];
    char value[N][64];
    long long pttl[N];
    char error[N][REDLOCK_ERROR_TEXT_MAX];
} inspect_seen;

static void on_inspect(redlock_lock *lock, int status, const redlock_result *r, void *data)
{
    inspect_seen *s = data;
    assert_null(lock);
    s->calls++;
    s->status = status;
    s->votes_yes = r->votes_yes;
    s->votes_no = r->votes_no;
    s->votes_error = r->votes_error;
    for (unsigned i = 0; i < r->n_nodes && i < N; i++) {
        s->vote[i] = r->nodes[i].vote;
        s->pttl[i] = r->nodes[i].pttl_ms;
        snprintf(s->value[i], sizeof(s->value[i]), "%.*s", (int)r->nodes[i].value_len,
                 r->nodes[i].value != NULL ? r->nodes[i].value : "");
        snprintf(s->error[i], sizeof(s->error[i]), "%s",
                 r->nodes[i].error != NULL ? r->nodes[i].error : "");
    }
}

static void inspect_set(h_env *env, redlock_client *c, inspect_seen *s)
{
    const void *res[K];
    size_t lens[K];
    set_of(names, K, res, lens);
    memset(s, 0, sizeof(*s));
    assert_int_equal(redlock_inspect_multi(c, res, lens, K, on_inspect, s), 0);
    assert_true(h_run_until(&env->loop, &s->calls, 1, 30000));
}

/* 6. Inspect reads the set in one script per node: free, held whole (the token and the smallest
 * PTTL), or split (an error naming the resource that differs). */
static void inspect_reads_the_set(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    inspect_seen s;
    inspect_set(&env, c, &s);
    assert_int_equal(s.status, 0);
    assert_int_equal(s.votes_no, N);

    h_record rec;
    assert_int_equal(acquire_set(&env, c, names, K, 10000, NULL, &rec), 0);
    h_hear_all(&env, c); /* every node's keys kept */
    /* A shorter ttl on one key of node 2: its PTTL is the set's. */
    redisReply *r = fixture_command(&env.cluster, 2, "PEXPIRE multi:c 3000");
    assert_non_null(r);
    freeReplyObject(r);
    assert_int_equal(h_del(&env, 1, "multi:b", 7), 1);
    inspect_set(&env, c, &s);
    assert_int_equal(s.status, 0);
    assert_int_equal(s.votes_yes, N - 1);
    assert_int_equal(s.votes_error, 1);
    size_t token_len = 0;
    const char *token = redlock_lock_token(rec.lock, &token_len);
    for (unsigned i = 0; i < N; i++) {
        if (i == 1)
            continue;
        assert_int_equal(s.vote[i], REDLOCK_VOTE_YES);
        assert_string_equal(s.value[i], token);
        assert_true(s.pttl[i] > (i == 2 ? 0 : 3000) && s.pttl[i] <= (i == 2 ? 3000 : 10000));
    }
    assert_int_equal(s.vote[1], REDLOCK_VOTE_ERROR);
    assert_non_null(strstr(s.error[1], "resource 2 of 3 is free"));
    h_release_ok(&env, rec.lock, NULL);
    h_env_stop(&env);
}

static void on_lost(redlock_lock *lock, int reason, void *data)
{
    (void)lock;
    *(int *)data = reason;
}

/* 7. Auto-extension keeps the whole set held past its ttl; closing the client releases it. */
static void auto_extension_and_close_cover_the_set(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_own_client(&env, NULL);
    redlock_auto_opts ao;
    redlock_auto_opts_init(&ao);
    int lost = 0;
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.auto_extend = &ao;
    lo.lost_cb = on_lost;
    lo.lost_data = &lost;
    h_record rec;
    assert_int_equal(acquire_set(&env, c, names, K, 1000, &lo, &rec), 0);
    h_run_for(&env.loop, 2500); /* two and a half ttls: only extensions keep the keys */
    assert_int_equal(lost, 0);
    assert_true(redlock_lock_extensions(rec.lock) >= 2);
    size_t token_len = 0;
    const char *token = redlock_lock_token(rec.lock, &token_len);
    for (unsigned k = 0; k < K; k++)
        assert_true(h_count_holding(&env, names[k], strlen(names[k]), token, token_len) >= 3);
    h_close_client(&env, c); /* releases the set on every node */
    assert_int_equal(lost, REDLOCK_ECANCELED);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(h_dbsize(&env, i), 0);
    h_env_stop(&env);
}

/* 8. A waiter for a set is woken by the release of a resource of it (here the only one held),
 * long before its 60 s retry delay. */
static void waiter_wakes_on_release_of_one(void **state)
{
    (void)state;
    h_env env;
    h_record held;
    h_start_holding(&env, N, "multi:b", 30000, &held);
    redlock_options opts;
    h_test_options(&opts);
    opts.retry_delay_ms = 60000;
    opts.retry_jitter_ms = 0;
    redlock_client *w = h_own_client(&env, &opts);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.wait_ms = 120000;
    const void *res[K];
    size_t lens[K];
    set_of(names, K, res, lens);
    h_record rec = {0};
    assert_int_equal(redlock_acquire_multi(w, res, lens, K, 30000, &lo, h_record_cb, &rec), 0);
    /* Its first attempt is lost (b is held), and its release runs everywhere. */
    h_wait_busy_rounds(&env, w, 1);
    h_drain(&env, w);
    assert_int_equal(rec.calls, 0);
    h_release_ok(&env, held.lock, NULL);
    assert_true(h_run_until(&env.loop, &rec.calls, 1, H_WAIT_MS));
    if (rec.status != 0)
        h_dump_record("the set's waiter", &rec);
    assert_int_equal(rec.status, 0);
    assert_int_equal(rec.attempts, 2);
    h_release_ok(&env, rec.lock, NULL);
    h_close_client(&env, w);
    h_env_stop(&env);
}

/* 9. The blocking API: acquire, read, inspect and release a set. */
static void blocking_api_covers_the_set(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_options opts;
    h_test_options(&opts);
    redlock_sync *sync = NULL;
    char err[256];
    assert_int_equal(redlock_sync_new(env.cluster.urls, N, &opts, &sync, err, sizeof(err)), 0);
    const void *res[K];
    size_t lens[K];
    set_of(names, K, res, lens);
    redlock_report rep;
    redlock_report_init(&rep);
    redlock_sync_lock *lock = NULL;
    assert_int_equal(redlock_sync_acquire_multi(sync, res, lens, K, 10000, NULL, &lock, &rep), 0);
    assert_int_equal(redlock_sync_lock_resource_count(lock), K);
    for (unsigned k = 0; k < K; k++) {
        size_t len = 0;
        const char *r = redlock_sync_lock_resource_at(lock, k, &len);
        assert_int_equal(len, strlen(names[k]));
        assert_string_equal(r, names[k]); /* NUL-terminated copies */
    }
    assert_null(redlock_sync_lock_resource_at(lock, K, NULL));
    assert_int_equal(redlock_sync_inspect_multi(sync, res, lens, K, &rep), 0);
    assert_true(rep.votes_yes >= 3);
    assert_int_equal(redlock_sync_extend(lock, 20000, 0, &rep), 0);
    assert_int_equal(redlock_sync_release(lock, &rep), 0);
    assert_int_equal(rep.votes_yes, N);
    redlock_sync_lock_free(lock);
    lens[1] = lens[0];
    res[1] = res[0];
    assert_int_equal(redlock_sync_acquire_multi(sync, res, lens, K, 10000, NULL, &lock, &rep),
                     REDLOCK_EINVAL);
    assert_non_null(strstr(rep.message, "resources 0 and 1 are the same"));
    assert_null(lock);
    redlock_sync_free(sync);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(h_dbsize(&env, i), 0);
    h_env_stop(&env);
}

/* 10. A set's release that finds its node down is kept with every key of the set, and sent
 * when the node is back (its data kept by an fsynced AOF): all the keys go there too. */
static void release_of_a_set_kept_until_node_returns(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, "appendonly yes\nappendfsync always\n");
    redlock_client *c = h_client(&env, NULL);
    h_wait_ready(&env, c);
    h_record rec;
    assert_int_equal(acquire_set(&env, c, names, K, 60000, NULL, &rec), 0);
    h_hear_all(&env, c); /* every node's keys kept: the one killed costs its own vote only */
    assert_int_equal(fixture_kill(&env.cluster, 0), 0);
    h_record rel;
    h_release_ok(&env, rec.lock, &rel);
    assert_int_equal(rel.votes_yes, N - 1);
    assert_int_equal(rel.node_vote[0], REDLOCK_VOTE_ERROR);
    assert_int_equal(fixture_restart(&env.cluster, 0), 0);
    /* The AOF brings the keys back (the server answers -LOADING until it has read them). */
    uint64_t t0 = redlock_now_us();
    while (h_dbsize(&env, 0) != K && h_since_us(t0) < H_WAIT_MS * 1000ull)
        uv_sleep(10);
    assert_int_equal(h_dbsize(&env, 0), K);
    t0 = redlock_now_us();
    while (h_dbsize(&env, 0) != 0 && h_since_us(t0) < H_WAIT_MS * 1000ull)
        h_run_for(&env.loop, 20);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(h_dbsize(&env, i), 0);
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        H_TEST(set_taken_and_released_everywhere),
        H_TEST(all_or_none_per_node),
        H_TEST(bad_sets_are_refused),
        H_TEST(extend_covers_the_set),
        H_TEST(release_deletes_what_is_ours),
        H_TEST(inspect_reads_the_set),
        H_TEST(auto_extension_and_close_cover_the_set),
        H_TEST(waiter_wakes_on_release_of_one),
        H_TEST(blocking_api_covers_the_set),
        H_TEST(release_of_a_set_kept_until_node_returns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
