/* SPDX-License-Identifier: MIT */
/* test_tokens.c - the tokens the library makes are 128 random bits: 2,000 acquires in flight on
 * three real servers give 2,000 different tokens, and every one of the 128 bits is set in
 * about half of them. (A token with fewer random bits - 16, say - repeats within a few hundred
 * locks, and a fixed bit shows at once; test/mutants has such a build.) */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 3
#define LOCKS 2000
#define TOKEN_BITS 128

typedef struct taken {
    int calls;
    int failed;
    redlock_lock *locks[LOCKS];
    char tokens[LOCKS][33];
} taken;

static void on_acquired(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)result;
    taken *t = data;
    int i = t->calls++;
    if (status != 0) {
        fprintf(stderr, "acquire %d: %s\n", i, redlock_err_name(status));
        t->failed++;
        return;
    }
    size_t len = 0;
    const char *token = redlock_lock_token(lock, &len);
    assert_int_equal(len, 32);
    memcpy(t->tokens[i], token, 33);
    t->locks[i] = lock;
}

static int compare_tokens(const void *a, const void *b)
{
    return memcmp(a, b, 33);
}

static int hex_value(char c)
{
    return c <= '9' ? c - '0' : c - 'a' + 10;
}

static void tokens_are_128_random_bits(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_options o;
    h_test_options(&o);
    o.node_timeout_ms = 10000; /* 2,000 SETs at once on a loaded machine: no deadline is tested */
    redlock_client *c = h_client(&env, &o);
    taken *t = calloc(1, sizeof(*t));
    assert_non_null(t);
    for (int i = 0; i < LOCKS; i++) {
        char key[32];
        int len = snprintf(key, sizeof(key), "tokens:%d", i);
        assert_int_equal(redlock_acquire(c, key, (size_t)len, 60000, NULL, on_acquired, t), 0);
    }
    assert_true(h_run_until(&env.loop, &t->calls, LOCKS, 60000));
    assert_int_equal(t->failed, 0);

    unsigned ones[TOKEN_BITS] = {0};
    for (int i = 0; i < LOCKS; i++) {
        assert_int_equal(strspn(t->tokens[i], "0123456789abcdef"), 32);
        for (int bit = 0; bit < TOKEN_BITS; bit++)
            ones[bit] += (unsigned)(hex_value(t->tokens[i][bit / 4]) >> (3 - bit % 4)) & 1u;
    }
    /* Each bit of a random token is set in LOCKS/2 = 1000 of them, give or take 22 (one standard
     * deviation); outside 700..1300 is more than 13 deviations away: not chance. */
    for (int bit = 0; bit < TOKEN_BITS; bit++) {
        if (ones[bit] < 700 || ones[bit] > 1300)
            fail_msg("token bit %d is set in %u of %d tokens", bit, ones[bit], LOCKS);
    }
    qsort(t->tokens, LOCKS, sizeof(t->tokens[0]), compare_tokens);
    for (int i = 1; i < LOCKS; i++) {
        if (strcmp(t->tokens[i - 1], t->tokens[i]) == 0)
            fail_msg("token %s was given twice among %d locks", t->tokens[i], LOCKS);
    }
    for (int i = 0; i < LOCKS; i++)
        redlock_lock_free(t->locks[i]);
    free(t);
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        H_TEST(tokens_are_128_random_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
