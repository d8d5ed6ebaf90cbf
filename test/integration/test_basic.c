/* SPDX-License-Identifier: MIT */
/* test_basic.c - acquire, release and extend against five real redis-server processes. */
#include "harness.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

static void lock_sets_token_everywhere(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 5, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_record rec;
    assert_int_equal(h_acquire(&env, c, "basic:1", 5000, NULL, &rec), 0);
    redlock_lock *lock = rec.lock;
    assert_non_null(lock);
    assert_true(rec.votes_yes >= 3);
    size_t token_len = 0;
    const char *token = redlock_lock_token(lock, &token_len);
    assert_int_equal(token_len, 32);
    h_assert_validity(&rec, 5000, redlock_lock_validity_ms(lock));
    assert_true(redlock_lock_deadline_us(lock) > redlock_now_us());
    /* Once the slower nodes' SETs landed, every node holds the token with a ttl <= 5000. */
    assert_true(h_wait_holding(&env, "basic:1", 7, token, token_len, 5, H_WAIT_MS));
    for (unsigned i = 0; i < 5; i++) {
        size_t len = 0;
        char *v = h_get(&env, i, "basic:1", 7, &len);
        assert_non_null(v);
        assert_int_equal(len, token_len);
        assert_memory_equal(v, token, len);
        free(v);
        long long pttl = h_pttl(&env, i, "basic:1", 7);
        assert_true(pttl > 0 && pttl <= 5000);
    }
    h_record rel;
    assert_int_equal(h_release(&env, lock, &rel), 0);
    assert_int_equal(rel.votes_yes, 5);
    for (unsigned i = 0; i < 5; i++)
        assert_int_equal(h_pttl(&env, i, "basic:1", 7), -2);
    /* Releasing twice is refused at once. */
    assert_int_equal(redlock_release(lock, h_record_cb, &rel), REDLOCK_ERELEASED);
    redlock_lock_free(lock);
    h_env_stop(&env);
}

static void second_client_is_refused_until_release(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 5, NULL);
    redlock_client *a = h_client(&env, NULL);
    redlock_client *b = h_client(&env, NULL);
    h_record ra, rb;
    assert_int_equal(h_acquire(&env, a, "basic:2", 5000, NULL, &ra), 0);
    assert_int_equal(h_acquire(&env, b, "basic:2", 5000, NULL, &rb), REDLOCK_EBUSY);
    assert_null(rb.lock);
    assert_true(rb.votes_no >= 3);
    h_record rel;
    assert_int_equal(h_release(&env, ra.lock, &rel), 0);
    assert_int_equal(h_acquire(&env, b, "basic:2", 5000, NULL, &rb), 0);
    assert_int_equal(h_release(&env, rb.lock, &rel), 0);
    h_close_client(&env, b);
    h_env_stop(&env);
}

static void three_down_is_no_quorum(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 5, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_wait_connected(&env, c);
    assert_int_equal(fixture_kill(&env.cluster, 0), 0);
    assert_int_equal(fixture_kill(&env.cluster, 1), 0);
    h_record rec;
    assert_int_equal(h_acquire(&env, c, "basic:3", 5000, NULL, &rec), 0);
    h_record rel;
    h_release(&env, rec.lock, &rel);
    assert_int_equal(fixture_kill(&env.cluster, 2), 0);
    uint64_t t0 = redlock_now_us();
    assert_int_equal(h_acquire(&env, c, "basic:4", 5000, NULL, &rec), REDLOCK_ENOQUORUM);
    /* Dead nodes fail fast: decided long before any node's deadline. */
    assert_true(h_since_us(t0) < H_NODE_TIMEOUT_MS * 1000 / 2);
    assert_true(rec.votes_error >= 3);
    assert_true(strlen(rec.node_error[0]) > 0);
    /* The live nodes ran the SET and then the release of the lost round. */
    h_drain(&env, c);
    assert_int_equal(h_pttl(&env, 3, "basic:4", 7), -2);
    assert_int_equal(h_pttl(&env, 4, "basic:4", 7), -2);
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        H_TEST(lock_sets_token_everywhere),
        H_TEST(second_client_is_refused_until_release),
        H_TEST(three_down_is_no_quorum),
    };
    return cmocka_run_group_tests_name("basic", tests, NULL, NULL);
}
