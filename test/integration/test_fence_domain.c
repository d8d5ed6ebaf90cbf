/* SPDX-License-Identifier: MIT */
/* test_fence_domain.c - fence domains on real servers (issue 33): resources that name one
 * redlock_lock_opts.fence_domain take their fences from one counter, "<key prefix><domain>:fence",
 * so one key serves any number of resources. Fences grow across every resource of the domain,
 * held one after the other or at once; a waiter granted the key by a release (its record names
 * the domain's counter) and a retake on a node that lost both keys keep the order; no resource
 * gets a counter of its own; bad options are refused at once.
 *
 * Node timeouts are seconds; what the nodes decided after the quorum is waited for with h_drain. */
#include "harness.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 5
#define PREFIX "app:"
#define DOMAIN "users"
#define COUNTER PREFIX DOMAIN ":fence"

static redlock_client *prefixed_client(h_env *env, const redlock_options *base)
{
    redlock_options o;
    if (base != NULL)
        o = *base;
    else
        h_test_options(&o);
    o.key_prefix = PREFIX;
    return h_own_client(env, &o);
}

static void in_domain(redlock_lock_opts *lo)
{
    redlock_lock_opts_init(lo);
    lo->fencing = true;
    lo->fence_domain = DOMAIN;
}

/* Server i's counter key as a number (0: absent). */
static uint64_t counter_on(h_env *env, unsigned i)
{
    size_t len = 0;
    char *v = h_get(env, i, COUNTER, strlen(COUNTER), &len);
    if (v == NULL)
        return 0;
    uint64_t n = strtoull(v, NULL, 10);
    free(v);
    return n;
}

/* The keys ending in ":fence" on every server are exactly the domain's counter: no resource left
 * one of its own. */
static void only_the_domain_counter(h_env *env)
{
    for (unsigned i = 0; i < N; i++) {
        redisReply *r = fixture_command(&env->cluster, i, "KEYS *:fence");
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_ARRAY);
        for (size_t k = 0; k < r->elements; k++)
            if (strcmp(r->element[k]->str, COUNTER) != 0)
                fail_msg("server %u has the counter %s", i, r->element[k]->str);
        assert_int_equal(r->elements, 1);
        freeReplyObject(r);
    }
}

/* Resources of one domain, one after the other and two held at once: every fence is larger than
 * every earlier one, whichever resource; each node's counter is the last fence. */
static void fences_grow_across_resources(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = prefixed_client(&env, NULL);
    redlock_lock_opts lo;
    in_domain(&lo);
    static const char *const order[] = {"user:1", "user:2", "user:3", "user:1", "user:2"};
    uint64_t last = 0;
    for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++) {
        h_record rec;
        assert_int_equal(h_acquire(&env, c, order[k], 10000, &lo, &rec), 0);
        assert_true(rec.fence > last);
        assert_true(redlock_lock_fence(rec.lock) == rec.fence);
        last = rec.fence;
        h_release_ok(&env, rec.lock, NULL);
    }
    assert_true(last == 5); /* fresh servers: 1, 2, ... from the one counter */
    /* Two held at once: the later acquisition's fence is the larger. */
    h_record one, two;
    assert_int_equal(h_acquire(&env, c, "user:1", 10000, &lo, &one), 0);
    assert_int_equal(h_acquire(&env, c, "user:2", 10000, &lo, &two), 0);
    assert_true(one.fence > last && two.fence > one.fence);
    h_release_ok(&env, one.lock, NULL);
    h_release_ok(&env, two.lock, NULL);
    h_drain(&env, c);
    for (unsigned i = 0; i < N; i++)
        assert_true(counter_on(&env, i) == two.fence);
    only_the_domain_counter(&env);
    h_close_client(&env, c);
    h_env_stop(&env);
}

/* Whether every server counts a subscriber on a channel that matches pattern. */
static bool all_subscribed(h_env *env, const char *pattern)
{
    for (unsigned i = 0; i < N; i++) {
        redisReply *r = fixture_command(&env->cluster, i, "PUBSUB CHANNELS %s", pattern);
        bool there = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0;
        if (r != NULL)
            freeReplyObject(r);
        if (!there)
            return false;
    }
    return true;
}

/* A waiter in the domain, queued behind the holder and listening, is handed the key by the
 * holder's release on every node (release_queued.lua: its grant record names the domain's
 * counter, which the grant raises), or takes it itself once woken: either way its fence is larger
 * than the holder's, and every node's counter, the domain's, is at its fence. */
static void waiter_in_the_domain_follows_the_holder(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *holder = prefixed_client(&env, NULL);
    redlock_options slow;
    h_test_options(&slow);
    slow.retry_delay_ms = 60000; /* it gets the lock by the grant, or woken by the release */
    slow.retry_jitter_ms = 0;
    redlock_client *waiter = prefixed_client(&env, &slow);
    redlock_lock_opts lo;
    in_domain(&lo);
    lo.wait_ms = 30000;
    h_record held;
    assert_int_equal(h_acquire(&env, holder, "user:7", 20000, &lo, &held), 0);
    h_record got = {0};
    assert_int_equal(redlock_acquire(waiter, "user:7", 6, 20000, &lo, h_record_cb, &got), 0);
    h_wait_busy_rounds(&env, waiter, 1);
    uint64_t t0 = redlock_now_us();
    while (!all_subscribed(&env, PREFIX "user:7:queue:*")) {
        assert_true(h_since_us(t0) < H_WAIT_MS * 1000ull);
        h_run_for(&env.loop, 10);
    }
    h_release_ok(&env, held.lock, NULL);
    assert_true(h_run_until(&env.loop, &got.calls, 1, H_WAIT_MS));
    if (got.status != 0)
        h_dump_record("waiter", &got);
    assert_int_equal(got.status, 0);
    if (got.fence <= held.fence)
        fail_msg("fences: held %" PRIu64 ", then %" PRIu64, held.fence, got.fence);
    h_release_ok(&env, got.lock, NULL);
    h_drain(&env, waiter);
    for (unsigned i = 0; i < N; i++)
        assert_true(counter_on(&env, i) == got.fence);
    only_the_domain_counter(&env);
    h_close_client(&env, waiter);
    h_close_client(&env, holder);
    h_env_stop(&env);
}

/* A node that lost the lock's key and the domain's counter (as after a restart without
 * persistence) gets both back from a retake: the counter at least the lock's fence, so the next
 * holder of any resource of the domain takes a larger one. */
static void retake_restores_the_domain_counter(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = prefixed_client(&env, NULL);
    redlock_lock_opts lo;
    in_domain(&lo);
    h_record prev, rec, ext;
    assert_int_equal(h_acquire(&env, c, "user:8", 10000, &lo, &prev), 0);
    h_release_ok(&env, prev.lock, NULL);
    assert_int_equal(h_acquire(&env, c, "user:9", 10000, &lo, &rec), 0);
    h_hear_all(&env, c); /* every key kept: one node's loss costs its own vote only */
    assert_int_equal(h_del(&env, 0, PREFIX "user:9", strlen(PREFIX "user:9")), 1);
    assert_int_equal(h_del(&env, 0, COUNTER, strlen(COUNTER)), 1);
    assert_int_equal(h_extend(&env, rec.lock, 10000, REDLOCK_EXTEND_RETAKE, &ext), 0);
    h_drain(&env, c);
    assert_true(counter_on(&env, 0) == rec.fence);
    assert_true(redlock_lock_fence(rec.lock) == rec.fence);
    h_release_ok(&env, rec.lock, NULL);
    h_record next;
    assert_int_equal(h_acquire(&env, c, "user:8", 10000, &lo, &next), 0);
    assert_true(next.fence == rec.fence + 1);
    h_release_ok(&env, next.lock, NULL);
    only_the_domain_counter(&env);
    h_close_client(&env, c);
    h_env_stop(&env);
}

/* A domain without fencing, an empty one or one over REDLOCK_RESOURCE_MAX is refused at once,
 * with a message, and writes nothing. */
static void options_are_checked(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = prefixed_client(&env, NULL);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.fence_domain = DOMAIN;
    h_record rec = {0};
    assert_int_equal(redlock_acquire(c, "user:1", 6, 5000, &lo, h_record_cb, &rec), REDLOCK_EINVAL);
    assert_string_equal(redlock_client_last_error(c), "fence_domain is set without fencing");
    lo.fencing = true;
    lo.fence_domain = "";
    assert_int_equal(redlock_acquire(c, "user:1", 6, 5000, &lo, h_record_cb, &rec), REDLOCK_EINVAL);
    assert_string_equal(redlock_client_last_error(c), "fence_domain must be 1..16384 bytes");
    static char long_domain[REDLOCK_RESOURCE_MAX + 2];
    memset(long_domain, 'd', REDLOCK_RESOURCE_MAX + 1);
    lo.fence_domain = long_domain;
    assert_int_equal(redlock_acquire(c, "user:1", 6, 5000, &lo, h_record_cb, &rec), REDLOCK_EINVAL);
    h_run_for(&env.loop, 50);
    assert_int_equal(rec.calls, 0);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(h_dbsize(&env, i), 0);
    h_close_client(&env, c);
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        H_TEST(fences_grow_across_resources),
        H_TEST(waiter_in_the_domain_follows_the_holder),
        H_TEST(retake_restores_the_domain_counter),
        H_TEST(options_are_checked),
    };
    return cmocka_run_group_tests_name("fence_domain", tests, NULL, NULL);
}
