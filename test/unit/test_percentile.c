/* SPDX-License-Identifier: MIT */
/* test_percentile.c - the bench's percentiles (bench/stats.c): nearest rank, index
 * ceil(q * n) - 1, on inputs whose answer is known by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "../../bench/stats.h"

/* The definition, spelled out: the smallest value v such that at least q of the values are
 * <= v. An oracle by counting, independent of the index formula. */
static uint64_t by_definition(const uint64_t *sorted, size_t n, unsigned per_mille)
{
    for (size_t i = 0; i < n; i++)
        if ((i + 1) * 1000 >= (size_t)per_mille * n)
            return sorted[i];
    return sorted[n - 1];
}

static void hundred_values(void **state)
{
    (void)state;
    samples s = {0};
    for (uint64_t v = 100; v >= 1; v--) /* given in reverse: percentiles sort */
        samples_add(&s, v);
    percentiles p = samples_percentiles(&s);
    assert_int_equal(p.n, 100);
    assert_int_equal(p.p50, 50);
    assert_int_equal(p.p90, 90);
    assert_int_equal(p.p99, 99); /* not the maximum: one rank below it */
    assert_int_equal(p.p999, 100);
    assert_int_equal(p.max, 100);
    samples_free(&s);
}

static void thousand_values(void **state)
{
    (void)state;
    samples s = {0};
    for (uint64_t v = 1; v <= 1000; v++)
        samples_add(&s, v * 10);
    percentiles p = samples_percentiles(&s);
    assert_int_equal(p.p50, 5000);
    assert_int_equal(p.p99, 9900);
    assert_int_equal(p.p999, 9990);
    assert_int_equal(p.max, 10000);
    samples_free(&s);
}

static void small_counts(void **state)
{
    (void)state;
    /* One value: every percentile is it. */
    assert_int_equal(percentile_index(1, 500), 0);
    assert_int_equal(percentile_index(1, 999), 0);
    /* Two: the median is the lower one (rank ceil(1.0) = 1), p90 the upper. */
    assert_int_equal(percentile_index(2, 500), 0);
    assert_int_equal(percentile_index(2, 900), 1);
    /* Ten: p50 rank 5, p90 rank 9, p99 rank ceil(9.9) = 10. */
    assert_int_equal(percentile_index(10, 500), 4);
    assert_int_equal(percentile_index(10, 900), 8);
    assert_int_equal(percentile_index(10, 990), 9);
    /* Three: p50 rank ceil(1.5) = 2. */
    assert_int_equal(percentile_index(3, 500), 1);
    /* The ends. */
    assert_int_equal(percentile_index(7, 0), 0);
    assert_int_equal(percentile_index(7, 1000), 6);
    assert_int_equal(percentile_index(0, 500), 0);
}

static void empty_is_zero(void **state)
{
    (void)state;
    samples s = {0};
    percentiles p = samples_percentiles(&s);
    assert_int_equal(p.n, 0);
    assert_int_equal(p.p50, 0);
    assert_int_equal(p.p999, 0);
    assert_int_equal(p.max, 0);
}

/* Every n up to 2,000 and every per-mille: the index formula agrees with the definition. */
static void matches_definition(void **state)
{
    (void)state;
    static uint64_t sorted[2000];
    for (size_t i = 0; i < 2000; i++)
        sorted[i] = i;
    for (size_t n = 1; n <= 2000; n++)
        for (unsigned q = 0; q <= 1000; q++)
            if (sorted[percentile_index(n, q)] != by_definition(sorted, n, q))
                fail_msg("n %zu, per mille %u: index %zu, definition %llu", n, q,
                         percentile_index(n, q), (unsigned long long)by_definition(sorted, n, q));
}

static void median_of_slices(void **state)
{
    (void)state;
    double odd[] = {30, 10, 20};
    assert_true(median_of(odd, 3) == 20);
    double even[] = {40, 10, 30, 20};
    assert_true(median_of(even, 4) == 20); /* the lower middle: a measured value */
    assert_true(median_of(NULL, 0) == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hundred_values),     cmocka_unit_test(thousand_values),
        cmocka_unit_test(small_counts),       cmocka_unit_test(empty_is_zero),
        cmocka_unit_test(matches_definition), cmocka_unit_test(median_of_slices),
    };
    return cmocka_run_group_tests_name("percentile", tests, NULL, NULL);
}
