/* SPDX-License-Identifier: MIT */
/* test_setnx_expire.c - pitfall 1 (docs/pitfalls.md): SETNX, then EXPIRE, as two commands.
 *
 * The legacy lock takes the key with SETNX and, if that won, gives it a ttl with EXPIRE. A holder
 * that dies between the two leaves a key without a ttl: nobody ever gets the lock again. The
 * test runs the holder in a child process and SIGKILLs it at exactly that point (it reports
 * after the SETNX and waits there), then checks the key's PTTL (-1: no expiry) and that the
 * lock still cannot be taken two ttls later.
 *
 * libredlock sends SET key token NX PX ttl, one command: there is no point between taking the
 * key and giving it a ttl. The same scenario: a child takes the lock and is SIGKILLed as soon as
 * its acquire returned. Every key it left has a ttl, and another client waiting for the lock
 * gets it once they expired. */
#include "pitfalls.h"

#include <stdio.h>
#include <string.h>

#define N 5
#define KEY "pitfall:setnx-expire"
#define TTL_MS                                                                                     \
    1000 /* the legacy lock's expiry (whole seconds: EXPIRE); the waits derive from it             \
          */
/* libredlock's: long enough that the dead holder's keys outlive the checks made on them on a
 * loaded machine; the next client waits for them to expire. */
#define RL_TTL_MS 3000

/* ---- the legacy lock, as it is written -------------------------------------------------- */

/* Take the lock: SETNX, and if that won, EXPIRE. between(arg), when not NULL, runs between the
 * two commands: the test's sync point. Returns true when locked. */
static bool setnx_expire_lock(redisContext *ctx, const char *key, unsigned ttl_s,
                              void (*between)(void *), void *arg)
{
    redisReply *r = redisCommand(ctx, "SETNX %s %s", key, "locked");
    bool won = r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    if (!won)
        return false;
    if (between != NULL)
        between(arg);
    r = redisCommand(ctx, "EXPIRE %s %u", key, ttl_s);
    freeReplyObject(r);
    return true;
}

/* ---- the children: a holder that reports at the sync point and is killed there ------------- */

typedef struct child_report {
    int status;           /* 0: locked */
    uint64_t acquired_us; /* when the lock call returned (libredlock) or SETNX won (legacy) */
    uint64_t deadline_us; /* libredlock: the lock's deadline */
    char token[REDLOCK_TOKEN_MAX + 1];
} child_report;

typedef struct child_arg {
    fixture_cluster *cluster;
    int report_fd, go_fd;
} child_arg;

/* Between SETNX and EXPIRE: tell the parent, and wait for a "go" that never comes. */
static void legacy_sync_point(void *data)
{
    child_arg *a = data;
    child_report rep = {.status = 0, .acquired_us = redlock_now_us()};
    if (!pf_tell(a->report_fd, &rep, sizeof(rep)))
        _exit(20);
    pf_await_go(a->go_fd);
}

static int legacy_holder(int report_fd, int go_fd, void *arg)
{
    child_arg a = {.cluster = arg, .report_fd = report_fd, .go_fd = go_fd};
    redisContext *ctx = fixture_connect(a.cluster, 0);
    if (ctx == NULL || ctx->err != 0)
        return 10;
    if (!setnx_expire_lock(ctx, KEY, TTL_MS / 1000, legacy_sync_point, &a))
        return 11;
    /* Not reached when the parent kills us at the sync point. */
    redisFree(ctx);
    return 0;
}

static int libredlock_holder(int report_fd, int go_fd, void *arg)
{
    fixture_cluster *cluster = arg;
    redlock_options o;
    h_test_options(&o);
    redlock_sync *sync = NULL;
    if (redlock_sync_new(cluster->urls, N, &o, &sync, NULL, 0) != 0)
        return 10;
    redlock_sync_lock *lock = NULL;
    child_report rep;
    memset(&rep, 0, sizeof(rep));
    rep.status = redlock_sync_acquire(sync, KEY, strlen(KEY), RL_TTL_MS, NULL, &lock, NULL);
    rep.acquired_us = redlock_now_us();
    if (rep.status == 0) {
        snprintf(rep.token, sizeof(rep.token), "%s", redlock_sync_lock_token(lock, NULL));
        rep.deadline_us = redlock_sync_lock_deadline_us(lock);
    }
    /* The same point: the lock call returned, nothing else happened yet. */
    if (!pf_tell(report_fd, &rep, sizeof(rep)))
        return 11;
    pf_await_go(go_fd);
    redlock_sync_free(sync);
    return 0;
}

/* ---- the scenario -----------------------------------------------------------------------------
 */

static void holder_killed_between_setnx_and_expire(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);

    /* Legacy: the holder dies between SETNX and EXPIRE. */
    pf_child ch;
    pf_child_start(&ch, legacy_holder, &env.cluster);
    child_report rep;
    assert_true(pf_child_read(&ch, &rep, sizeof(rep)));
    assert_int_equal(rep.status, 0);
    pf_child_kill(&ch);
    /* The key has no ttl: it will never expire. */
    assert_int_equal(h_pttl(&env, 0, KEY, strlen(KEY)), -1);
    /* Two ttls after the holder took it, the next client still cannot take the lock, and never
     * will: the key has no ttl. */
    pf_sleep_ms(2 * TTL_MS);
    redisContext *next = pf_connect(&env.cluster, 0);
    assert_false(setnx_expire_lock(next, KEY, TTL_MS / 1000, NULL, NULL));
    assert_int_equal(h_pttl(&env, 0, KEY, strlen(KEY)), -1);
    printf("# legacy SETNX + EXPIRE: the holder was killed between them; %.1f s later the key "
           "still has no ttl (PTTL -1) and the lock cannot be taken: stuck for good\n",
           (double)h_since_us(rep.acquired_us) / 1e6);
    /* Only a person can free it: DEL by hand. */
    redisReply *r = pf_cmd(next, "DEL %s", KEY);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);
    redisFree(next);

    /* libredlock: the same kill, right after the lock call returned. */
    pf_child_start(&ch, libredlock_holder, &env.cluster);
    assert_true(pf_child_read(&ch, &rep, sizeof(rep)));
    assert_int_equal(rep.status, 0);
    pf_child_kill(&ch);
    const char *key = KEY;
    size_t token_len = strlen(rep.token);
    assert_true(h_count_holding(&env, key, strlen(key), rep.token, token_len) >= N / 2 + 1);
    /* Every key the dead holder left carries its ttl (each was set by one SET ... NX PX). */
    unsigned with_key = 0;
    for (unsigned i = 0; i < N; i++) {
        long long pttl = h_pttl(&env, i, key, strlen(key));
        if (pttl == -2)
            continue; /* no key: its SET never ran, or the key already expired */
        with_key++;
        if (pttl < 0 || pttl > RL_TTL_MS)
            fail_msg("node %u: PTTL %lld of the dead holder's key, not in [0, %d]", i, pttl,
                     RL_TTL_MS);
    }
    assert_true(with_key >= N / 2 + 1);
    /* Another client waits for the lock and gets it once the keys expired: not before the dead
     * holder's validity ran out. */
    redlock_client *c = h_client(&env, NULL);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.wait_ms = RL_TTL_MS + H_WAIT_MS;
    h_record rec;
    int rc = h_acquire(&env, c, KEY, RL_TTL_MS, &lo, &rec);
    if (rc != 0)
        h_dump_record("the next client's acquire", &rec);
    assert_int_equal(rc, 0);
    assert_true(rec.at_us >= rep.deadline_us);
    printf("# libredlock: the holder was killed right after its acquire; every key it left had "
           "a ttl, and the next client got the lock %.3f s after the dead one's deadline\n",
           (double)(rec.at_us - rep.deadline_us) / 1e6);
    h_record rel;
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        PF_TEST(holder_killed_between_setnx_and_expire),
    };
    return cmocka_run_group_tests_name("pitfall-setnx-expire", tests, NULL, NULL);
}
