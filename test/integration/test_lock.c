/* SPDX-License-Identifier: MIT */
/* test_lock.c - acquire and release against five real redis-server processes: what lands on the
 * nodes, contention between clients, expiry, binary resource names, key prefixes, many locks at
 * once, client creation errors, passwords and unix sockets. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 5

/* Every node holds key with exactly token and a ttl in (0, ttl_ms]. */
static void assert_token_everywhere(h_env *env, const void *key, size_t key_len, const char *token,
                                    size_t token_len, uint64_t ttl_ms)
{
    assert_true(h_wait_holding(env, key, key_len, token, token_len, env->cluster.n, H_WAIT_MS));
    for (unsigned i = 0; i < env->cluster.n; i++) {
        long long pttl = h_pttl(env, i, key, key_len);
        assert_true(pttl > 0);
        assert_true(pttl <= (long long)ttl_ms);
    }
}

static void assert_key_nowhere(h_env *env, const void *key, size_t key_len)
{
    for (unsigned i = 0; i < env->cluster.n; i++)
        assert_int_equal(h_pttl(env, i, key, key_len), -2);
}

/* 1. acquire writes the token with the ttl everywhere; release deletes it everywhere. */
static void acquire_sets_token_and_release_deletes_it(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_record rec;
    assert_int_equal(h_acquire(&env, c, "lock:1", 3000, NULL, &rec), 0);
    assert_non_null(rec.lock);
    assert_int_equal(rec.attempts, 1);
    assert_int_equal(rec.n_nodes, N);
    assert_true(rec.votes_yes >= 3);
    assert_int_equal(rec.votes_no + rec.votes_error + rec.votes_timeout, 0);
    size_t token_len = 0;
    const char *token = redlock_lock_token(rec.lock, &token_len);
    assert_int_equal(token_len, 32);
    assert_int_equal(strspn(token, "0123456789abcdef"), 32);
    assert_int_equal(redlock_lock_ttl_ms(rec.lock), 3000);
    assert_true(redlock_lock_is_held(rec.lock, redlock_now_us()));
    assert_token_everywhere(&env, "lock:1", 6, token, token_len, 3000);

    h_record rel;
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, N);
    assert_int_equal(rel.votes_no, 0);
    assert_true(rel.lock == rec.lock);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(rel.node_vote[i], REDLOCK_VOTE_YES);
    assert_key_nowhere(&env, "lock:1", 6);
    assert_false(redlock_lock_is_held(rec.lock, redlock_now_us()));
    /* The handle outlives the release: its token is still readable. */
    assert_memory_equal(redlock_lock_token(rec.lock, NULL), token, token_len);
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

/* Two acquires of one resource on one client get different random tokens. */
static void tokens_are_random(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_record a, b, rel;
    assert_int_equal(h_acquire(&env, c, "lock:tok", 3000, NULL, &a), 0);
    char first[64];
    snprintf(first, sizeof(first), "%s", redlock_lock_token(a.lock, NULL));
    assert_int_equal(h_release(&env, a.lock, &rel), 0);
    assert_int_equal(h_acquire(&env, c, "lock:tok", 3000, NULL, &b), 0);
    assert_string_not_equal(first, redlock_lock_token(b.lock, NULL));
    assert_int_equal(h_release(&env, b.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, N);
    redlock_lock_free(a.lock);
    redlock_lock_free(b.lock);
    h_env_stop(&env);
}

/* 1. release with a token that is no longer on the nodes deletes nothing. */
static void release_with_wrong_token_deletes_nothing(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.token = "my-token-1";
    lo.token_len = strlen(lo.token);
    h_record rec;
    assert_int_equal(h_acquire(&env, c, "lock:wrong", 5000, &lo, &rec), 0);
    size_t token_len = 0;
    assert_string_equal(redlock_lock_token(rec.lock, &token_len), "my-token-1");
    assert_int_equal(token_len, 10);
    assert_token_everywhere(&env, "lock:wrong", 10, "my-token-1", 10, 5000);
    /* Someone else's value takes the key's place on every node. */
    for (unsigned i = 0; i < N; i++)
        h_set(&env, i, "lock:wrong", 10, "other-holder");
    h_record rel;
    assert_int_equal(h_release(&env, rec.lock, &rel), REDLOCK_ELOST); /* every node: not ours */
    assert_int_equal(rel.votes_yes, 0);
    assert_int_equal(rel.votes_no, N);
    assert_int_equal(h_count_holding(&env, "lock:wrong", 10, "other-holder", 12), N);
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

/* A token with NUL bytes is stored byte for byte. */
static void binary_token_is_stored_exactly(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    static const char token[] = {'t', '\0', 'o', ' ', 'k', '\xff', '\n'};
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.token = token;
    lo.token_len = sizeof(token);
    h_record rec, rel;
    assert_int_equal(h_acquire(&env, c, "lock:bintok", 5000, &lo, &rec), 0);
    size_t len = 0;
    assert_memory_equal(redlock_lock_token(rec.lock, &len), token, sizeof(token));
    assert_int_equal(len, sizeof(token));
    assert_token_everywhere(&env, "lock:bintok", 11, token, sizeof(token), 5000);
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, N);
    assert_key_nowhere(&env, "lock:bintok", 11);
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

/* Tokens longer than the lock keeps inline (48 bytes and REDLOCK_TOKEN_MAX, the longest) are
 * stored byte for byte, renewed and released, and a handle attached by another client with the
 * same long token releases the key. */
static void long_tokens_are_stored_exactly(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *a = h_client(&env, NULL);
    redlock_client *b = h_client(&env, NULL);
    static const size_t lens[] = {48, REDLOCK_TOKEN_MAX};
    for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
        char token[REDLOCK_TOKEN_MAX];
        for (size_t i = 0; i < lens[k]; i++)
            token[i] = (char)('a' + (i * 7 + k) % 26);
        redlock_lock_opts lo;
        redlock_lock_opts_init(&lo);
        lo.token = token;
        lo.token_len = lens[k];
        h_record rec, ext, rel;
        assert_int_equal(h_acquire(&env, a, "lock:longtok", 5000, &lo, &rec), 0);
        size_t len = 0;
        assert_memory_equal(redlock_lock_token(rec.lock, &len), token, lens[k]);
        assert_int_equal(len, lens[k]);
        assert_int_equal(redlock_lock_token(rec.lock, NULL)[len], '\0');
        assert_token_everywhere(&env, "lock:longtok", 12, token, lens[k], 5000);
        /* The extend's script compares the whole token on each node (it decides at a quorum;
         * the release below waits for every node). */
        assert_int_equal(h_extend(&env, rec.lock, 8000, 0, &ext), 0);
        assert_true(ext.votes_yes >= N / 2 + 1);
        /* Another client's handle on the same token. */
        redlock_lock *attached = NULL;
        assert_int_equal(redlock_lock_attach(b, "lock:longtok", 12, token, lens[k], 0, &attached),
                         0);
        assert_memory_equal(redlock_lock_token(attached, NULL), token, lens[k]);
        assert_int_equal(h_release(&env, attached, &rel), 0);
        assert_int_equal(rel.votes_yes, N);
        assert_key_nowhere(&env, "lock:longtok", 12);
        redlock_lock_free(attached);
        redlock_lock_free(rec.lock);
    }
    h_close_client(&env, b);
    h_env_stop(&env);
}

/* 2. a held lock refuses a second client until released. */
static void held_lock_refuses_second_client_until_release(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *a = h_client(&env, NULL);
    redlock_client *b = h_client(&env, NULL);
    h_record ra, rb, rel;
    assert_int_equal(h_acquire(&env, a, "lock:2", 5000, NULL, &ra), 0);
    size_t token_len = 0;
    const char *token = redlock_lock_token(ra.lock, &token_len);
    assert_true(h_wait_holding(&env, "lock:2", 6, token, token_len, N, H_WAIT_MS));
    assert_int_equal(h_acquire(&env, b, "lock:2", 5000, NULL, &rb), REDLOCK_EBUSY);
    assert_null(rb.lock);
    assert_true(rb.votes_no >= 3);
    assert_int_equal(rb.votes_yes, 0);
    /* b's lost round released nothing of a's: once the nodes ran what b sent (its SET, then its
     * release everywhere), a's token is still on every node. */
    h_drain(&env, b);
    assert_int_equal(h_count_holding(&env, "lock:2", 6, token, token_len), N);

    assert_int_equal(h_release(&env, ra.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, N);
    assert_int_equal(h_acquire(&env, b, "lock:2", 5000, NULL, &rb), 0);
    assert_non_null(rb.lock);
    /* Decided at the quorum: b's last SET may still be on its way, and a's attempt could reach
     * that node first. Once b holds every node, a is refused everywhere. */
    token = redlock_lock_token(rb.lock, &token_len);
    assert_true(h_wait_holding(&env, "lock:2", 6, token, token_len, N, H_WAIT_MS));
    /* Now a is the one refused. */
    h_record ra2;
    assert_int_equal(h_acquire(&env, a, "lock:2", 5000, NULL, &ra2), REDLOCK_EBUSY);
    assert_int_equal(h_release(&env, rb.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, N);
    redlock_lock_free(ra.lock);
    redlock_lock_free(rb.lock);
    h_close_client(&env, b);
    h_env_stop(&env);
}

/* 2. a lock nobody releases frees itself when its ttl runs out. */
static void lock_is_free_again_after_ttl(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *a = h_client(&env, NULL);
    redlock_client *b = h_client(&env, NULL);
    h_record ra, rb;
    assert_int_equal(h_acquire(&env, a, "lock:ttl", 300, NULL, &ra), 0);
    /* validity = ttl - elapsed - (ttl * 0.01 + 2 ms) */
    h_assert_validity(&ra, 300, redlock_lock_validity_ms(ra.lock));
    assert_true(redlock_lock_validity_ms(ra.lock) > 0);
    /* While a's lock is valid, b is refused (checked only when b's round ended in time: on a
     * machine too slow for that, the keys may have run out, as they should). */
    int rc_b = h_acquire(&env, b, "lock:ttl", 300, NULL, &rb);
    if (rb.at_us < redlock_lock_deadline_us(ra.lock))
        assert_int_equal(rc_b, REDLOCK_EBUSY);
    else
        fprintf(stderr, "# b's acquire ended after a's validity: refusal not checked\n");
    if (rc_b == 0) {
        h_record rel_b;
        assert_int_equal(h_release(&env, rb.lock, &rel_b), 0);
        redlock_lock_free(rb.lock);
    }
    /* Nobody releases a's keys: they run out with the ttl (every one of them, once every node
     * ran a's SET), then b gets the lock. */
    h_drain(&env, a);
    const char *token_a = redlock_lock_token(ra.lock, NULL);
    assert_true(h_wait_holding(&env, "lock:ttl", 8, token_a, 32, 0, H_WAIT_MS));
    assert_false(redlock_lock_is_held(ra.lock, redlock_now_us()));
    assert_int_equal(h_acquire(&env, b, "lock:ttl", 5000, NULL, &rb), 0);
    size_t token_len = 0;
    const char *token = redlock_lock_token(rb.lock, &token_len);
    assert_true(h_wait_holding(&env, "lock:ttl", 8, token, token_len, N, H_WAIT_MS));
    /* a's late release must not delete b's key; it says a's hold had lapsed. */
    h_record rel;
    assert_int_equal(h_release(&env, ra.lock, &rel), REDLOCK_ELOST);
    assert_int_equal(rel.votes_yes, 0);
    assert_int_equal(h_count_holding(&env, "lock:ttl", 8, token, token_len), N);
    assert_int_equal(h_release(&env, rb.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, N);
    redlock_lock_free(ra.lock);
    redlock_lock_free(rb.lock);
    h_close_client(&env, b);
    h_env_stop(&env);
}

/* 8. resources are binary-safe: NUL bytes, spaces, 4 KiB. */
static void resource_names_are_binary_safe(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);

    static const char with_nul[] = {'a', '\0', 'b', ' ', 'c', '\0', '\r', '\n', '\xfe'};
    char *big = malloc(4096);
    assert_non_null(big);
    for (size_t i = 0; i < 4096; i++)
        big[i] = (char)(i % 251); /* every byte value but a few, including NUL */
    struct {
        const void *res;
        size_t len;
    } cases[] = {
        {with_nul, sizeof(with_nul)},
        {"with spaces in it ", 18},
        {big, 4096},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        h_record rec, rel;
        assert_int_equal(h_acquire_bin(&env, c, cases[k].res, cases[k].len, 5000, NULL, &rec), 0);
        size_t len = 0;
        const void *res = redlock_lock_resource(rec.lock, &len);
        assert_int_equal(len, cases[k].len);
        assert_memory_equal(res, cases[k].res, len);
        size_t token_len = 0;
        const char *token = redlock_lock_token(rec.lock, &token_len);
        assert_token_everywhere(&env, cases[k].res, cases[k].len, token, token_len, 5000);
        /* Only that exact key was written: the NUL did not cut it short. */
        if (k == 0)
            assert_int_equal(h_pttl(&env, 0, "a", 1), -2);
        for (unsigned i = 0; i < N; i++)
            assert_int_equal(h_dbsize(&env, i), 1);
        /* A second holder of the same bytes is refused. */
        h_record other;
        assert_int_equal(h_acquire_bin(&env, c, cases[k].res, cases[k].len, 5000, NULL, &other),
                         REDLOCK_EBUSY);
        assert_int_equal(h_release(&env, rec.lock, &rel), 0);
        assert_int_equal(rel.votes_yes, N);
        assert_key_nowhere(&env, cases[k].res, cases[k].len);
        redlock_lock_free(rec.lock);
    }
    free(big);
    h_env_stop(&env);
}

/* 8. key_prefix is on the nodes' keys, not in the resource the handle reports. */
static void key_prefix_is_applied_on_nodes_only(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_options o;
    h_test_options(&o);
    char prefix[] = "app:";
    o.key_prefix = prefix;
    redlock_client *c = h_client(&env, &o);
    prefix[0] = 'X'; /* the option was copied */
    static const char res[] = {'r', '\0', 's'};
    h_record rec, rel;
    assert_int_equal(h_acquire_bin(&env, c, res, sizeof(res), 5000, NULL, &rec), 0);
    size_t len = 0;
    const void *got = redlock_lock_resource(rec.lock, &len);
    assert_int_equal(len, sizeof(res));
    assert_memory_equal(got, res, sizeof(res));
    size_t token_len = 0;
    const char *token = redlock_lock_token(rec.lock, &token_len);
    static const char key[] = {'a', 'p', 'p', ':', 'r', '\0', 's'};
    assert_token_everywhere(&env, key, sizeof(key), token, token_len, 5000);
    for (unsigned i = 0; i < N; i++) {
        assert_int_equal(h_pttl(&env, i, res, sizeof(res)), -2);
        assert_int_equal(h_dbsize(&env, i), 1);
    }
    /* A client without the prefix locks a different key. */
    redlock_client *plain = h_client(&env, NULL);
    h_record other;
    assert_int_equal(h_acquire_bin(&env, plain, res, sizeof(res), 5000, NULL, &other), 0);
    assert_int_equal(h_release(&env, other.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, N);
    redlock_lock_free(other.lock);
    h_close_client(&env, plain);

    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, N);
    assert_key_nowhere(&env, key, sizeof(key));
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

/* 10. many locks at once on one client. */
#define MANY 200

typedef struct many_ctx {
    int acquired, released;
    int bad_status;
    int bad_votes;
    int calls[MANY];
    redlock_lock *locks[MANY];
} many_ctx;

typedef struct many_slot {
    many_ctx *ctx;
    int index;
} many_slot;

static void many_acquired(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    many_slot *s = data;
    s->ctx->acquired++;
    s->ctx->calls[s->index]++;
    if (status != 0 || lock == NULL || result->votes_yes < 3)
        s->ctx->bad_status++;
    s->ctx->locks[s->index] = lock;
}

static void many_released(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    many_slot *s = data;
    s->ctx->released++;
    s->ctx->calls[s->index]++;
    if (status != 0 || lock != s->ctx->locks[s->index])
        s->ctx->bad_status++;
    if (result->votes_yes != N)
        s->ctx->bad_votes++;
}

static void many_concurrent_locks_on_one_client(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_wait_ready(&env, c);
    many_ctx *ctx = calloc(1, sizeof(*ctx));
    many_slot slots[MANY];
    assert_non_null(ctx);
    for (int i = 0; i < MANY; i++) {
        char name[32];
        int len = snprintf(name, sizeof(name), "many:%d", i);
        slots[i] = (many_slot){ctx, i};
        assert_int_equal(
            redlock_acquire(c, name, (size_t)len, 10000, NULL, many_acquired, &slots[i]), 0);
    }
    assert_int_equal(ctx->acquired, 0);
    assert_true(h_run_until(&env.loop, &ctx->acquired, MANY, 30000));
    assert_int_equal(ctx->bad_status, 0);
    for (int i = 0; i < MANY; i++)
        assert_int_equal(ctx->calls[i], 1);
    /* Every SET has landed everywhere, once the nodes ran everything sent so far. */
    h_drain(&env, c);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(h_dbsize(&env, i), MANY);

    for (int i = 0; i < MANY; i++)
        assert_int_equal(redlock_release(ctx->locks[i], many_released, &slots[i]), 0);
    assert_true(h_run_until(&env.loop, &ctx->released, MANY, 30000));
    assert_int_equal(ctx->bad_status, 0);
    assert_int_equal(ctx->bad_votes, 0);
    for (int i = 0; i < MANY; i++) {
        assert_int_equal(ctx->calls[i], 2);
        redlock_lock_free(ctx->locks[i]);
    }
    h_run_for(&env.loop, 20);
    assert_int_equal(ctx->acquired, MANY); /* nothing fired twice */
    assert_int_equal(ctx->released, MANY);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(h_dbsize(&env, i), 0);
    free(ctx);
    h_env_stop(&env);
}

/* 13. client creation errors, with nothing left open on the loop. */
static void client_creation_errors(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 2, NULL);
    char err[256];
    redlock_client *c = NULL;

    /* The same host:port twice, also spelled differently. */
    const char *dup[3] = {env.cluster.urls[0], env.cluster.urls[1], env.cluster.urls[0]};
    err[0] = '\0';
    assert_int_equal(h_client_urls(&env, dup, 3, NULL, &c, err, sizeof(err)), REDLOCK_EDUPNODE);
    assert_null(c);
    char endpoint[64];
    snprintf(endpoint, sizeof(endpoint), "127.0.0.1:%d", env.cluster.servers[0].port);
    assert_non_null(strstr(err, endpoint));
    char dup_db[160];
    snprintf(dup_db, sizeof(dup_db), "redis://127.0.0.1:%d/3?timeout_ms=100",
             env.cluster.servers[1].port);
    const char *dup2[2] = {env.cluster.urls[1], dup_db};
    assert_int_equal(h_client_urls(&env, dup2, 2, NULL, &c, err, sizeof(err)), REDLOCK_EDUPNODE);
    assert_null(c);
    /* A password in a duplicate is not echoed. */
    char dup_pw[160];
    snprintf(dup_pw, sizeof(dup_pw), "redis://:hunter2@127.0.0.1:%d", env.cluster.servers[0].port);
    const char *dup3[2] = {dup_pw, env.cluster.urls[0]};
    assert_int_equal(h_client_urls(&env, dup3, 2, NULL, &c, err, sizeof(err)), REDLOCK_EDUPNODE);
    assert_null(strstr(err, "hunter2"));

    /* A URL that does not parse. */
    const char *bad[2] = {env.cluster.urls[0], "redis://127.0.0.1:notaport"};
    err[0] = '\0';
    assert_int_equal(h_client_urls(&env, bad, 2, NULL, &c, err, sizeof(err)), REDLOCK_EURL);
    assert_null(c);
    assert_true(strlen(err) > 0);
    const char *bad_pw[1] = {"redis://:hunter2@127.0.0.1:99999"};
    assert_int_equal(h_client_urls(&env, bad_pw, 1, NULL, &c, err, sizeof(err)), REDLOCK_EURL);
    assert_null(strstr(err, "hunter2"));
    const char *bad_scheme[1] = {"http://127.0.0.1:6379"};
    assert_int_equal(h_client_urls(&env, bad_scheme, 1, NULL, &c, err, sizeof(err)), REDLOCK_EURL);

    /* No nodes, bad options. */
    err[0] = '\0';
    assert_int_equal(h_client_urls(&env, env.cluster.urls, 0, NULL, &c, err, sizeof(err)),
                     REDLOCK_EINVAL);
    assert_null(c);
    assert_true(strlen(err) > 0);
    redlock_options o;
    h_test_options(&o);
    o.node_timeout_ms = 3600001; /* 0 is adaptive, the default */
    assert_int_equal(h_client_urls(&env, env.cluster.urls, 2, &o, &c, err, sizeof(err)),
                     REDLOCK_EINVAL);
    assert_null(c);
    /* err may be NULL. */
    assert_int_equal(h_client_urls(&env, dup, 3, NULL, &c, NULL, 0), REDLOCK_EDUPNODE);

    /* Every failure left nothing on the loop; h_env_stop checks uv_loop_close() == 0. */
    assert_null(env.client);
    h_env_stop(&env);
}

/* 14. a password-protected cluster. */
static void password_protected_cluster(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, "requirepass s3cret\n");
    char good[N][160], wrong[N][160], none[N][160];
    const char *good_urls[N], *wrong_urls[N], *none_urls[N];
    for (unsigned i = 0; i < N; i++) {
        int port = env.cluster.servers[i].port;
        /* Both the password-only form and the ACL form with the default user. */
        if (i % 2 == 0)
            snprintf(good[i], sizeof(good[i]), "redis://:s3cret@127.0.0.1:%d", port);
        else
            snprintf(good[i], sizeof(good[i]), "redis://default:s3cret@127.0.0.1:%d", port);
        snprintf(wrong[i], sizeof(wrong[i]), "redis://:Wr0ngPw@127.0.0.1:%d", port);
        snprintf(none[i], sizeof(none[i]), "redis://127.0.0.1:%d", port);
        good_urls[i] = good[i];
        wrong_urls[i] = wrong[i];
        none_urls[i] = none[i];
    }

    redlock_client *c = NULL;
    assert_int_equal(h_client_urls(&env, good_urls, N, NULL, &c, NULL, 0), 0);
    for (unsigned i = 0; i < N; i++) {
        const char *url = redlock_client_node_url(c, i);
        assert_non_null(url);
        assert_null(strstr(url, "s3cret"));
        assert_non_null(strstr(url, "***"));
    }
    assert_null(redlock_client_node_url(c, N));
    h_record rec, rel;
    assert_int_equal(h_acquire(&env, c, "lock:pw", 5000, NULL, &rec), 0);
    size_t token_len = 0;
    const char *token = redlock_lock_token(rec.lock, &token_len);
    /* h_get does not AUTH, so check with AUTH on a raw connection. */
    for (unsigned i = 0; i < N; i++) {
        redisContext *ctx = fixture_connect(&env.cluster, i);
        assert_non_null(ctx);
        assert_int_equal(ctx->err, 0);
        redisReply *r = redisCommand(ctx, "AUTH s3cret");
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_STATUS);
        freeReplyObject(r);
        uint64_t deadline = redlock_now_us() + H_WAIT_MS * 1000;
        for (;;) {
            r = redisCommand(ctx, "GET lock:pw");
            assert_non_null(r);
            bool ok = r->type == REDIS_REPLY_STRING && r->len == token_len &&
                      memcmp(r->str, token, token_len) == 0;
            freeReplyObject(r);
            if (ok)
                break;
            assert_true(redlock_now_us() < deadline);
            h_run_for(&env.loop, 10);
        }
        redisFree(ctx);
    }
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, N);
    redlock_lock_free(rec.lock);

    /* A wrong password: no quorum, the error says why but never shows the password. */
    redlock_client *w = NULL;
    assert_int_equal(h_client_urls(&env, wrong_urls, N, NULL, &w, NULL, 0), 0);
    for (unsigned i = 0; i < N; i++) {
        assert_null(strstr(redlock_client_node_url(w, i), "Wr0ngPw"));
        assert_non_null(strstr(redlock_client_node_url(w, i), "***"));
    }
    assert_int_equal(h_acquire(&env, w, "lock:pw2", 5000, NULL, &rec), REDLOCK_ENOQUORUM);
    assert_true(rec.votes_error >= 3);
    assert_int_equal(rec.votes_yes, 0);
    for (unsigned i = 0; i < N; i++) {
        if (rec.node_vote[i] == REDLOCK_VOTE_NONE)
            continue;
        assert_int_equal(rec.node_vote[i], REDLOCK_VOTE_ERROR);
        const char *e = rec.node_error[i];
        assert_true(strstr(e, "WRONGPASS") != NULL || strstr(e, "auth") != NULL ||
                    strstr(e, "AUTH") != NULL || strstr(e, "password") != NULL);
        assert_null(strstr(e, "Wr0ngPw"));
        assert_null(strstr(rec.node_url[i], "Wr0ngPw"));
    }
    /* Again, now that the nodes are known to refuse (the fast-fail path). */
    assert_int_equal(h_acquire(&env, w, "lock:pw2", 5000, NULL, &rec), REDLOCK_ENOQUORUM);
    for (unsigned i = 0; i < N; i++)
        assert_null(strstr(rec.node_error[i], "Wr0ngPw"));
    assert_null(strstr(redlock_client_last_error(w), "Wr0ngPw"));
    h_close_client(&env, w);

    /* No password at all: the server's NOAUTH comes back as an error vote. */
    redlock_client *n = NULL;
    assert_int_equal(h_client_urls(&env, none_urls, N, NULL, &n, NULL, 0), 0);
    assert_int_equal(h_acquire(&env, n, "lock:pw3", 5000, NULL, &rec), REDLOCK_ENOQUORUM);
    assert_true(rec.votes_error >= 3);
    bool saw_noauth = false;
    for (unsigned i = 0; i < N; i++)
        saw_noauth = saw_noauth || strstr(rec.node_error[i], "NOAUTH") != NULL;
    assert_true(saw_noauth);
    h_close_client(&env, n);
    h_env_stop(&env);
}

/* 15. unix socket URLs. */
static void unix_socket_urls(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    const char *urls[N];
    for (unsigned i = 0; i < N; i++)
        urls[i] = env.cluster.servers[i].unix_url;
    redlock_client *c = NULL;
    char err[256];
    assert_int_equal(h_client_urls(&env, urls, N, NULL, &c, err, sizeof(err)), 0);
    for (unsigned i = 0; i < N; i++)
        assert_string_equal(redlock_client_node_url(c, i), urls[i]);
    h_record rec, rel;
    assert_int_equal(h_acquire(&env, c, "lock:unix", 5000, NULL, &rec), 0);
    size_t token_len = 0;
    const char *token = redlock_lock_token(rec.lock, &token_len);
    assert_token_everywhere(&env, "lock:unix", 9, token, token_len, 5000);
    /* A TCP client sees the lock the unix client holds. */
    redlock_client *tcp = h_client(&env, NULL);
    h_record other;
    assert_int_equal(h_acquire(&env, tcp, "lock:unix", 5000, NULL, &other), REDLOCK_EBUSY);
    h_close_client(&env, tcp);
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, N);
    assert_key_nowhere(&env, "lock:unix", 9);
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        H_TEST(acquire_sets_token_and_release_deletes_it),
        H_TEST(tokens_are_random),
        H_TEST(release_with_wrong_token_deletes_nothing),
        H_TEST(binary_token_is_stored_exactly),
        H_TEST(long_tokens_are_stored_exactly),
        H_TEST(held_lock_refuses_second_client_until_release),
        H_TEST(lock_is_free_again_after_ttl),
        H_TEST(resource_names_are_binary_safe),
        H_TEST(key_prefix_is_applied_on_nodes_only),
        H_TEST(many_concurrent_locks_on_one_client),
        H_TEST(client_creation_errors),
        H_TEST(password_protected_cluster),
        H_TEST(unix_socket_urls),
    };
    return cmocka_run_group_tests_name("lock", tests, NULL, NULL);
}
