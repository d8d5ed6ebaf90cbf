/* SPDX-License-Identifier: MIT */
/* test_scripts.c - the Lua scripts of extend and release: their SHA1s match what a real server
 * computes, and a server that lost its script cache (SCRIPT FLUSH, restart) is served with EVAL. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scripts.h"

#define N 5

/* 1 if server i has the script cached, 0 if not, -1 on error. */
static int script_exists(h_env *env, unsigned i, const char *sha1)
{
    redisReply *r = fixture_command(&env->cluster, i, "SCRIPT EXISTS %s", sha1);
    int v = -1;
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
        r->element[0]->type == REDIS_REPLY_INTEGER)
        v = (int)r->element[0]->integer;
    if (r != NULL)
        freeReplyObject(r);
    return v;
}

static void flush_scripts(h_env *env)
{
    for (unsigned i = 0; i < env->cluster.n; i++) {
        redisReply *r = fixture_command(&env->cluster, i, "SCRIPT FLUSH");
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_STATUS);
        freeReplyObject(r);
        for (size_t k = 0; k < REDLOCK__SCRIPTS; k++)
            assert_int_equal(script_exists(env, i, redlock__scripts[k]->sha1), 0);
    }
}

/* 6. each script's SHA1 is what SCRIPT LOAD of its source returns. */
static void script_sha1s_match_the_server(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 1, NULL);
    for (size_t k = 0; k < REDLOCK__SCRIPTS; k++) {
        const redlock__script *s = redlock__scripts[k];
        assert_int_equal(strlen(s->source), s->source_len);
        assert_int_equal(strlen(s->sha1), 40);
        const char *argv[3] = {"SCRIPT", "LOAD", s->source};
        size_t argvlen[3] = {6, 4, s->source_len};
        redisReply *r = fixture_command_argv(&env.cluster, 0, 3, argv, argvlen);
        assert_non_null(r);
        if (r->type != REDIS_REPLY_STRING)
            fprintf(stderr, "SCRIPT LOAD %s: %.*s\n", s->name, (int)r->len, r->str);
        assert_int_equal(r->type, REDIS_REPLY_STRING);
        if (strcmp(r->str, s->sha1) != 0)
            fprintf(stderr, "script %s: server says %s, scripts.c says %s\n", s->name, r->str,
                    s->sha1);
        assert_string_equal(r->str, s->sha1);
        freeReplyObject(r);
        assert_int_equal(script_exists(&env, 0, s->sha1), 1);
    }
    h_env_stop(&env);
}

/* 6. SCRIPT FLUSH between acquire and release / extend: the NOSCRIPT fallback still gets the
 * job done on every node. */
static void script_flush_before_release_and_extend(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_record rec, ext, rel;
    /* One full cycle with the scripts cached first, so EVALSHA is what goes out. */
    h_load_scripts(&env);
    assert_int_equal(h_acquire(&env, c, "scripts:warm", 5000, NULL, &rec), 0);
    assert_int_equal(h_extend(&env, rec.lock, 5000, 0, &ext), 0);
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, N);
    redlock_lock_free(rec.lock);
    for (unsigned i = 0; i < N; i++) {
        assert_int_equal(script_exists(&env, i, redlock__script_release.sha1), 1);
        assert_int_equal(script_exists(&env, i, redlock__script_extend.sha1), 1);
    }

    assert_int_equal(h_acquire(&env, c, "scripts:flush", 1000, NULL, &rec), 0);
    size_t token_len = 0;
    const char *token = redlock_lock_token(rec.lock, &token_len);
    assert_true(h_wait_holding(&env, "scripts:flush", 13, token, token_len, N, H_WAIT_MS));

    flush_scripts(&env);
    assert_int_equal(h_extend(&env, rec.lock, 8000, 0, &ext), 0);
    assert_true(ext.votes_yes >= 3);
    assert_int_equal(ext.votes_error, 0);
    /* Decided at the quorum: the other nodes' extends land a moment later. */
    h_drain(&env, c);
    for (unsigned i = 0; i < N; i++) {
        long long pttl = h_pttl(&env, i, "scripts:flush", 13);
        assert_true(pttl > 1000 && pttl <= 8000); /* renewed beyond the first ttl everywhere */
        assert_int_equal(script_exists(&env, i, redlock__script_extend.sha1), 1);
    }

    flush_scripts(&env);
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, N);
    assert_int_equal(rel.votes_error, 0);
    for (unsigned i = 0; i < N; i++) {
        assert_int_equal(h_pttl(&env, i, "scripts:flush", 13), -2);
        assert_int_equal(script_exists(&env, i, redlock__script_release.sha1), 1);
    }
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

/* A script missing on only some nodes: those fall back, the others run EVALSHA. */
static void script_flush_on_some_nodes(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_load_scripts(&env);
    h_record rec, rel;
    assert_int_equal(h_acquire(&env, c, "scripts:some", 5000, NULL, &rec), 0);
    size_t token_len = 0;
    const char *token = redlock_lock_token(rec.lock, &token_len);
    assert_true(h_wait_holding(&env, "scripts:some", 12, token, token_len, N, H_WAIT_MS));
    for (unsigned i = 0; i < N; i += 2) {
        redisReply *r = fixture_command(&env.cluster, i, "SCRIPT FLUSH");
        assert_non_null(r);
        freeReplyObject(r);
    }
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, N);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(rel.node_vote[i], REDLOCK_VOTE_YES);
    assert_int_equal(h_count_holding(&env, "scripts:some", 12, token, token_len), 0);
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

/* Extend and release written back to back after a SCRIPT FLUSH: whatever the extend's fate, the
 * release must still delete the key everywhere, and nothing may bring it back. */
static void script_flush_then_extend_and_release_back_to_back(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_wait_ready(&env, c);
    h_record rec, ext, rel;
    assert_int_equal(h_acquire(&env, c, "scripts:b2b", 5000, NULL, &rec), 0);
    size_t token_len = 0;
    const char *token = redlock_lock_token(rec.lock, &token_len);
    assert_true(h_wait_holding(&env, "scripts:b2b", 11, token, token_len, N, H_WAIT_MS));
    flush_scripts(&env);
    memset(&ext, 0, sizeof(ext));
    memset(&rel, 0, sizeof(rel));
    assert_int_equal(redlock_extend(rec.lock, 5000, REDLOCK_EXTEND_RETAKE, h_record_cb, &ext), 0);
    assert_int_equal(redlock_release(rec.lock, h_record_cb, &rel), 0);
    assert_true(h_run_until(&env.loop, &rel.calls, 1, 10000));
    assert_true(h_run_until(&env.loop, &ext.calls, 1, 10000));
    h_drain(&env, c); /* whatever else was sent ran too */
    assert_int_equal(ext.calls, 1);
    assert_int_equal(rel.calls, 1);
    assert_int_equal(rel.status, 0);
    assert_int_equal(rel.votes_yes, N);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(h_pttl(&env, i, "scripts:b2b", 11), -2);
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

/* The common "unlock, then lock again" pattern on servers that have not cached the release
 * script yet (fresh start, restart, SCRIPT FLUSH): the release is written, then the acquire of
 * the same resource right behind it on the same connections. Written in that order, the release
 * must free the resource and the acquire must get it. */
static void release_then_reacquire_on_cold_script_cache(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL); /* no warm-up: nothing cached on the servers */
    h_record rec, rel, again;
    assert_int_equal(h_acquire(&env, c, "scripts:again", 10000, NULL, &rec), 0);
    size_t token_len = 0;
    const char *token = redlock_lock_token(rec.lock, &token_len);
    assert_true(h_wait_holding(&env, "scripts:again", 13, token, token_len, N, H_WAIT_MS));

    memset(&rel, 0, sizeof(rel));
    memset(&again, 0, sizeof(again));
    assert_int_equal(redlock_release(rec.lock, h_record_cb, &rel), 0);
    assert_int_equal(redlock_acquire(c, "scripts:again", 13, 10000, NULL, h_record_cb, &again), 0);
    assert_true(h_run_until(&env.loop, &rel.calls, 1, 10000));
    assert_true(h_run_until(&env.loop, &again.calls, 1, 10000));
    h_run_for(&env.loop, 50);
    for (unsigned i = 0; i < N; i++) {
        if (rel.node_vote[i] != REDLOCK_VOTE_YES)
            fprintf(stderr, "release on node %u: %s: %s\n", i, redlock_vote_name(rel.node_vote[i]),
                    rel.node_error[i]);
    }
    if (again.status != 0)
        fprintf(stderr, "second acquire: %s\n", redlock_err_name(again.status));
    assert_int_equal(rel.status, 0);
    assert_int_equal(rel.votes_yes, N);
    assert_int_equal(again.status, 0);
    /* The old token is gone from every node. */
    assert_int_equal(h_count_holding(&env, "scripts:again", 13, token, token_len), 0);
    h_record rel2;
    assert_int_equal(h_release(&env, again.lock, &rel2), 0);
    assert_int_equal(rel2.votes_yes, N);
    redlock_lock_free(again.lock);
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

/* A waiter's attempt on server 0 (EVAL of lib/core/lua/acquire_queued.lua) for the keys of a lock,
 * with ttl 10000 ms and tag 0, its channel "<first key>:queue:<waiter>". */
typedef struct queued_attempt {
    const char *const *keys; /* NULL: the one key q:k */
    int n_keys;
    const char *token, *waiter, *place, *place_ttl;
    const char *stamp;  /* "": no grant record */
    const char *fenced; /* "1" or "0" (NULL: "0") */
    const char *ttl;    /* NULL: "10000" */
} queued_attempt;

/* What the attempt's reply says: "OK" (plain: taken), "c:<counter>" (fenced: taken, the counter
 * it read), "w:<ms>" (not taken: the wait it gave), "other" (printed). The text lives in buf. */
static const char *queued_try(h_env *env, const queued_attempt *a, char *buf, size_t len)
{
    static const char *const one[] = {"q:k"};
    const char *const *keys = a->keys != NULL ? a->keys : one;
    int n_keys = a->keys != NULL ? a->n_keys : 1;
    char numkeys[8], channel[128];
    snprintf(numkeys, sizeof(numkeys), "%d", n_keys);
    snprintf(channel, sizeof(channel), "%s:queue:%s", keys[0], a->waiter);
    const redlock__script *sc = &redlock__script_acquire_queued;
    const char *argv[32] = {"EVAL", sc->source, numkeys};
    int argc = 3;
    for (int i = 0; i < n_keys; i++)
        argv[argc++] = keys[i];
    const char *args[] = {a->token,
                          a->ttl != NULL ? a->ttl : "10000",
                          a->waiter,
                          a->place,
                          a->place_ttl,
                          a->stamp,
                          a->stamp[0] != '\0' ? "0" : "",
                          a->fenced != NULL ? a->fenced : "0",
                          channel};
    for (size_t i = 0; i < sizeof(args) / sizeof(args[0]); i++)
        argv[argc++] = args[i];
    size_t argvlen[32];
    for (int i = 0; i < argc; i++)
        argvlen[i] = strlen(argv[i]);
    redisReply *r = fixture_command_argv(&env->cluster, 0, argc, argv, argvlen);
    assert_non_null(r);
    if (r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0)
        snprintf(buf, len, "OK");
    else if (r->type == REDIS_REPLY_STRING)
        snprintf(buf, len, "c:%s", r->str);
    else if (r->type == REDIS_REPLY_INTEGER)
        snprintf(buf, len, "w:%lld", r->integer);
    else {
        fprintf(stderr, "acquire_queued: type %d %s\n", r->type, r->str != NULL ? r->str : "");
        snprintf(buf, len, "other");
    }
    freeReplyObject(r);
    return buf;
}

/* Whether a plain attempt of q:k by waiter (stamp: "" for none) took the key ("OK"), or was
 * queued ("queued": any wait). */
static const char *queued_acquire_stamped(h_env *env, const char *token, const char *waiter,
                                          const char *place, const char *place_ttl,
                                          const char *stamp)
{
    queued_attempt a = {NULL, 0, token, waiter, place, place_ttl, stamp, NULL, NULL};
    static char buf[64];
    const char *what = queued_try(env, &a, buf, sizeof(buf));
    return strncmp(what, "w:", 2) == 0 ? "queued" : what;
}

static const char *queued_acquire(h_env *env, const char *token, const char *waiter,
                                  const char *place, const char *place_ttl)
{
    return queued_acquire_stamped(env, token, waiter, place, place_ttl, "");
}

/* The release of token from the keys (NULL: q:k) by waiter ("": none), which leaves the queues
 * when leave is "1" and tells the next waiter when tell is "1". */
static long long queued_release_keys(h_env *env, const char *const *keys, int n_keys,
                                     const char *token, const char *waiter, const char *leave,
                                     const char *tell)
{
    static const char *const one[] = {"q:k"};
    if (keys == NULL) {
        keys = one;
        n_keys = 1;
    }
    char numkeys[8];
    snprintf(numkeys, sizeof(numkeys), "%d", n_keys);
    const redlock__script *sc = &redlock__script_release_queued;
    const char *argv[32] = {"EVAL", sc->source, numkeys};
    int argc = 3;
    for (int i = 0; i < n_keys; i++)
        argv[argc++] = keys[i];
    argv[argc++] = token;
    argv[argc++] = waiter;
    argv[argc++] = leave;
    argv[argc++] = tell;
    size_t argvlen[32];
    for (int i = 0; i < argc; i++)
        argvlen[i] = strlen(argv[i]);
    redisReply *r = fixture_command_argv(&env->cluster, 0, argc, argv, argvlen);
    assert_non_null(r);
    if (r->type != REDIS_REPLY_INTEGER)
        fprintf(stderr, "release_queued: type %d %s\n", r->type, r->str != NULL ? r->str : "");
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

static long long queued_release_by(h_env *env, const char *token, const char *waiter,
                                   const char *leave)
{
    return queued_release_keys(env, NULL, 0, token, waiter, leave, "1");
}

/* The release of a holder that leaves the queue (leaving: its id, or "" for one outside it). */
static long long queued_release(h_env *env, const char *token, const char *leaving)
{
    return queued_release_by(env, token, leaving, "1");
}

/* A connection to server 0 subscribed to the n channels, confirmations read. */
static redisContext *subscriber(h_env *env, const char *const *channels, int n)
{
    redisContext *sub = fixture_connect(&env->cluster, 0);
    assert_non_null(sub);
    assert_int_equal(sub->err, 0);
    const char *argv[4] = {"SUBSCRIBE"};
    assert_true(n >= 1 && n <= 3);
    for (int i = 0; i < n; i++)
        argv[i + 1] = channels[i];
    redisReply *r = redisCommandArgv(sub, n + 1, argv, NULL);
    assert_non_null(r);
    freeReplyObject(r);
    for (int i = 1; i < n; i++) {
        assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);
        freeReplyObject(r);
    }
    return sub;
}

/* The next message on a subscribed connection is channel / text. */
static void expect_message(redisContext *sub, const char *channel, const char *text)
{
    redisReply *r = NULL;
    assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 3);
    assert_string_equal(r->element[0]->str, "message");
    assert_string_equal(r->element[1]->str, channel);
    assert_string_equal(r->element[2]->str, text);
    freeReplyObject(r);
}

/* The waiter's scripts on one server: a free key goes to the queue's head, in the order of the
 * waiters' places whatever the order they asked in; the head keeps its place while it holds the
 * key and leaves with its release; a waiter whose deadline passed is dropped from the head. */
static void queued_scripts_grant_the_head_only(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 1, NULL);
    h_set(&env, 0, "q:k", 3, "someone-else");
    assert_string_equal(queued_acquire(&env, "t2", "w2", "200", "60000"), "queued");
    uv_sleep(5); /* w1 reaches the node later (a queue by arrival would put it second) */
    assert_string_equal(queued_acquire(&env, "t1", "w1", "100", "60000"), "queued");
    assert_int_equal(h_del(&env, 0, "q:k", 3), 1);
    assert_string_equal(queued_acquire(&env, "t2", "w2", "200", "60000"), "queued"); /* w1 next */
    assert_string_equal(queued_acquire(&env, "t1", "w1", "100", "60000"), "OK");
    assert_string_equal(queued_acquire(&env, "t2", "w2", "200", "60000"), "queued"); /* held */
    /* The releases' notifications: to the next head on its own channel when it listens there,
     * else on the queue's channel naming it, and with nobody queued the token alone on the key's
     * channel. */
    const char *channels[] = {"q:k", "q:k:queue", "q:k:queue:w2"};
    redisContext *sub = subscriber(&env, channels, 3);
    assert_int_equal(queued_release(&env, "t1", "w1"), 1);
    expect_message(sub, "q:k:queue:w2", "w:t1");
    assert_string_equal(queued_acquire(&env, "t2", "w2", "200", "60000"), "OK");
    assert_string_equal(queued_acquire(&env, "t5", "w5", "500", "60000"), "queued");
    assert_int_equal(queued_release(&env, "t2", "w2"), 1);
    expect_message(sub, "q:k:queue", "w5:t2"); /* w5 does not listen on its channel */
    assert_string_equal(queued_acquire(&env, "t5", "w5", "500", "60000"), "OK");
    assert_int_equal(queued_release(&env, "t5", "w5"), 1);
    expect_message(sub, "q:k", "t5");
    redisFree(sub);
    assert_int_equal(h_dbsize(&env, 0), 0); /* no queue left behind */

    /* w3 waits with a 1 ms deadline and stops asking: once it has passed, w4 is the head. */
    h_set(&env, 0, "q:k", 3, "someone-else");
    assert_string_equal(queued_acquire(&env, "t3", "w3", "300", "1"), "queued");
    assert_string_equal(queued_acquire(&env, "t4", "w4", "400", "60000"), "queued");
    assert_int_equal(h_del(&env, 0, "q:k", 3), 1);
    uv_sleep(20);
    assert_string_equal(queued_acquire(&env, "t4", "w4", "400", "60000"), "OK");
    /* A release that leaves nothing (another token) deletes nothing. */
    assert_int_equal(queued_release(&env, "t3", "w3"), 0);
    assert_int_equal(h_pttl(&env, 0, "q:k", 3) > 0, 1);
    h_env_stop(&env);
}

/* Whether the field exists in key's waiters' deadlines (HEXISTS <key>:queue-due field). */
static bool due_field_of(h_env *env, const char *key, const char *field)
{
    redisReply *r = fixture_command(&env->cluster, 0, "HEXISTS %s:queue-due %s", key, field);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    bool exists = r->integer == 1;
    freeReplyObject(r);
    return exists;
}

static bool due_field(h_env *env, const char *field)
{
    return due_field_of(env, "q:k", field);
}

/* Whether key holds value on server 0. */
static bool holds(h_env *env, const char *key, const char *value)
{
    size_t len = 0;
    char *v = h_get(env, 0, key, strlen(key), &len);
    bool same = v != NULL && len == strlen(value) && memcmp(v, value, len) == 0;
    free(v);
    return same;
}

/* Handoff by grant on one server: a release sets the freed key for the queue's head, from the
 * head's grant record (its last attempt's token, ttl, stamp and the node's tag), and tells it
 * "g:stamp:tag:key:full:counter:token" on its own channel - only while someone listens there: a
 * head nobody listens for (a vanished client) gets a message and no key. The head's next attempt
 * with that token is a yes (the key is renewed), and the release of a lost attempt of its drops
 * its record and tells nobody. */
static void queued_release_grants_a_listening_head(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 1, NULL);
    h_set(&env, 0, "q:k", 3, "t0");
    assert_string_equal(queued_acquire_stamped(&env, "t1", "w1", "100", "60000", "123"), "queued");
    assert_true(due_field(&env, "w1:g"));
    const char *queue_channel[] = {"q:k:queue"};
    redisContext *sub = subscriber(&env, queue_channel, 1);
    /* Nobody listens on w1's channel: no grant, the queue's channel names w1. */
    assert_int_equal(queued_release(&env, "t0", ""), 1);
    assert_int_equal(h_pttl(&env, 0, "q:k", 3), -2);
    expect_message(sub, "q:k:queue", "w1:t0");
    assert_true(due_field(&env, "w1:g"));
    /* w1 listens: the release sets the key to its token, with its ttl, and tells it. */
    redisReply *r = redisCommand(sub, "SUBSCRIBE q:k:queue:w1");
    assert_non_null(r);
    freeReplyObject(r);
    h_set(&env, 0, "q:k", 3, "t0");
    assert_int_equal(queued_release(&env, "t0", ""), 1);
    expect_message(sub, "q:k:queue:w1", "g:123:0:0:1::t1");
    assert_true(holds(&env, "q:k", "t1"));
    long long pttl = h_pttl(&env, 0, "q:k", 3);
    assert_true(pttl > 9000 && pttl <= 10000);
    assert_false(due_field(&env, "w1:g")); /* one grant per record */
    /* Its next attempt with that token renews the key. */
    assert_string_equal(queued_acquire_stamped(&env, "t1", "w1", "100", "60000", "456"), "OK");
    /* A lost attempt's release (w1 waits on) drops its record, keeps its place and tells
     * nobody (the next message is the test's own). */
    h_set(&env, 0, "q:k", 3, "t2");
    assert_string_equal(queued_acquire_stamped(&env, "t2", "w1", "100", "60000", "789"), "OK");
    h_set(&env, 0, "q:k", 3, "t3");
    assert_int_equal(queued_release_keys(&env, NULL, 0, "t3", "w1", "0", "0"), 1);
    h_set(&env, 0, "q:k", 3, "t0");
    assert_string_equal(queued_acquire_stamped(&env, "t3", "w1", "100", "60000", "790"), "queued");
    assert_true(due_field(&env, "w1:g"));
    assert_int_equal(queued_release_by(&env, "t3", "w1", "0"), 0);
    assert_false(due_field(&env, "w1:g"));
    assert_true(due_field(&env, "w1"));
    /* So the holder's release only tells it. */
    assert_int_equal(queued_release(&env, "t0", ""), 1);
    expect_message(sub, "q:k:queue:w1", "w:t0");
    assert_int_equal(h_pttl(&env, 0, "q:k", 3), -2);
    redisFree(sub);
    h_env_stop(&env);
}

/* A grant never sets a key for longer than its head's place deadline there: a head that cannot
 * act on it (its process gone, its connections half-open, so PUBSUB NUMSUB still counts it)
 * delays the next waiter no longer than its place would have. The message says the ttl was cut
 * (full 0), and the head's client claims the key with a round of its own (ops.c). */
static void grant_lasts_no_longer_than_the_place(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 1, NULL);
    h_set(&env, 0, "q:k", 3, "t0");
    assert_string_equal(queued_acquire_stamped(&env, "t1", "w1", "100", "3000", "123"), "queued");
    const char *channel[] = {"q:k:queue:w1"};
    redisContext *sub = subscriber(&env, channel, 1);
    assert_int_equal(queued_release(&env, "t0", ""), 1);
    expect_message(sub, "q:k:queue:w1", "g:123:0:0:0::t1");
    assert_true(holds(&env, "q:k", "t1"));
    long long pttl = h_pttl(&env, 0, "q:k", 3);
    assert_true(pttl > 0 && pttl <= 3000);
    redisFree(sub);
    h_env_stop(&env);
}

/* A fenced waiter's grant reads and raises the counter as the fenced acquire's yes does, and the
 * message carries what it read; a fenced waiter's attempt that takes (or renews) its key reads
 * and raises it too. */
static void fenced_grant_raises_the_counter(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 1, NULL);
    char buf[64];
    h_set(&env, 0, "q:k", 3, "t0");
    h_set(&env, 0, "q:k:fence", 9, "41");
    queued_attempt a = {NULL, 0, "t1", "w1", "100", "60000", "123", "1", NULL};
    assert_true(strncmp(queued_try(&env, &a, buf, sizeof(buf)), "w:", 2) == 0);
    const char *channel[] = {"q:k:queue:w1"};
    redisContext *sub = subscriber(&env, channel, 1);
    assert_int_equal(queued_release(&env, "t0", ""), 1);
    expect_message(sub, "q:k:queue:w1", "g:123:0:0:1:41:t1");
    assert_true(holds(&env, "q:k", "t1"));
    assert_true(holds(&env, "q:k:fence", "42"));
    assert_string_equal(queued_try(&env, &a, buf, sizeof(buf)), "c:42"); /* renewed */
    assert_true(holds(&env, "q:k:fence", "43"));
    /* A counter that is not a number: no grant (and the attempt is refused). */
    assert_int_equal(queued_release(&env, "t1", "w1"), 1);
    h_set(&env, 0, "q:k", 3, "t0");
    h_set(&env, 0, "q:k:fence", 9, "x");
    assert_int_equal(queued_release(&env, "t0", ""), 1);
    assert_int_equal(h_pttl(&env, 0, "q:k", 3), -2);
    assert_string_equal(queued_try(&env, &a, buf, sizeof(buf)), "other");
    redisFree(sub);
    h_env_stop(&env);
}

/* A set waits in the queue of every key, at one place: a release of one key hands that key to
 * the set's waiter when it heads that key's queue (the message names the key's index in the set,
 * on the channel the record names), and the waiter takes the set once every key is its own. */
static void set_waits_in_every_queue(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 1, NULL);
    char buf[64];
    static const char *const keys[] = {"q:a", "q:b"};
    h_set(&env, 0, "q:a", 3, "x");
    h_set(&env, 0, "q:b", 3, "y");
    queued_attempt a = {keys, 2, "tH", "H", "100", "60000", "55", NULL, NULL};
    assert_true(strncmp(queued_try(&env, &a, buf, sizeof(buf)), "w:", 2) == 0);
    assert_true(due_field_of(&env, "q:a", "H:g") && due_field_of(&env, "q:b", "H:g"));
    const char *channel[] = {"q:a:queue:H"};
    redisContext *sub = subscriber(&env, channel, 1);
    static const char *const first[] = {"q:a"}, *const second[] = {"q:b"};
    assert_int_equal(queued_release_keys(&env, first, 1, "x", "", "1", "1"), 1);
    expect_message(sub, "q:a:queue:H", "g:55:0:0:1::tH");
    assert_true(holds(&env, "q:a", "tH"));
    a.stamp = "66";
    assert_true(strncmp(queued_try(&env, &a, buf, sizeof(buf)), "w:", 2) == 0); /* q:b held */
    assert_false(due_field_of(&env, "q:a", "H:g")); /* no record for a key it holds */
    assert_int_equal(queued_release_keys(&env, second, 1, "y", "", "1", "1"), 1);
    expect_message(sub, "q:a:queue:H", "g:66:0:1:1::tH");
    assert_true(holds(&env, "q:b", "tH"));
    assert_string_equal(queued_try(&env, &a, buf, sizeof(buf)), "OK");
    /* Its release frees both and leaves both queues. */
    assert_int_equal(queued_release_keys(&env, keys, 2, "tH", "H", "1", "1"), 1);
    redisFree(sub);
    assert_int_equal(h_dbsize(&env, 0), 0);
    h_env_stop(&env);
}

/* A waiter's lost attempt says how long until the node could let it in without a release: the
 * holder's PTTL, or the deadline of a head before it. */
static void lost_attempt_says_how_long(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 1, NULL);
    char buf[64];
    redisReply *r = fixture_command(&env.cluster, 0, "SET q:k t0 PX 5000");
    freeReplyObject(r);
    queued_attempt a = {NULL, 0, "t1", "w1", "100", "60000", "", NULL, NULL};
    long long wait = atoll(queued_try(&env, &a, buf, sizeof(buf)) + 2);
    assert_true(wait > 0 && wait <= 5000);
    assert_int_equal(h_del(&env, 0, "q:k", 3), 1);
    queued_attempt b = {NULL, 0, "t2", "w2", "200", "60000", "", NULL, NULL};
    wait = atoll(queued_try(&env, &b, buf, sizeof(buf)) + 2); /* w1 is the head */
    assert_true(wait > 50000 && wait <= 60000);
    r = fixture_command(&env.cluster, 0, "SET q:k t0");
    freeReplyObject(r);
    assert_string_equal(queued_try(&env, &b, buf, sizeof(buf)), "w:-1"); /* no end */
    h_env_stop(&env);
}

/* A server that refuses PUBSUB (an ACL without +pubsub, or without +publish) is a server where
 * nobody listens: the release of a waiter's lock still deletes the key and says so (1), and no
 * grant is made. */
static void release_without_pubsub_rights(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 1, NULL);
    redisReply *r = fixture_command(&env.cluster, 0,
                                    "ACL SETUSER nopubsub on >pw ~* &* +@all -pubsub -publish");
    assert_non_null(r);
    freeReplyObject(r);
    redisContext *limited = fixture_connect(&env.cluster, 0);
    r = redisCommand(limited, "AUTH nopubsub pw");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    h_set(&env, 0, "q:k", 3, "t0");
    assert_string_equal(queued_acquire_stamped(&env, "t1", "w1", "100", "60000", "123"), "queued");
    const redlock__script *sc = &redlock__script_release_queued;
    const char *argv[] = {"EVAL", sc->source, "1", "q:k", "t0", "", "1", "1"};
    size_t argvlen[8];
    for (int i = 0; i < 8; i++)
        argvlen[i] = strlen(argv[i]);
    r = redisCommandArgv(limited, 8, argv, argvlen);
    assert_non_null(r);
    if (r->type != REDIS_REPLY_INTEGER)
        fprintf(stderr, "release_queued as nopubsub: type %d %s\n", r->type,
                r->str != NULL ? r->str : "");
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);
    assert_int_equal(h_pttl(&env, 0, "q:k", 3), -2); /* deleted, and granted to nobody */
    redisFree(limited);
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        H_TEST(script_sha1s_match_the_server),
        H_TEST(script_flush_before_release_and_extend),
        H_TEST(script_flush_on_some_nodes),
        H_TEST(script_flush_then_extend_and_release_back_to_back),
        H_TEST(release_then_reacquire_on_cold_script_cache),
        H_TEST(queued_scripts_grant_the_head_only),
        H_TEST(queued_release_grants_a_listening_head),
        H_TEST(grant_lasts_no_longer_than_the_place),
        H_TEST(fenced_grant_raises_the_counter),
        H_TEST(set_waits_in_every_queue),
        H_TEST(lost_attempt_says_how_long),
        H_TEST(release_without_pubsub_rights),
    };
    return cmocka_run_group_tests_name("scripts", tests, NULL, NULL);
}
