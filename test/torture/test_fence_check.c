/* SPDX-License-Identifier: MIT */
/* test_fence_check.c - the torture's fence checker (fence_check.h) on hand-made logs: it must
 * pass a valid history and catch each kind of violation, or the torture's test 7 could not
 * fail. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fence_check.h"

static char dir[64];

/* Write the lines as process 0's fence log (and none for process 1). */
static void write_log(const char *text)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/worker-0.fence.log", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static unsigned long check(const char *text, const uint64_t *forgot, unsigned n_forgot,
                           torture_fence_verdict *v)
{
    write_log(text);
    return torture_fence_check(dir, 2, forgot, n_forgot, false, v, NULL);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/fence-check-XXXXXX");
    return mkdtemp(dir) != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    torture_fence_remove_logs(dir, 2);
    return rmdir(dir);
}

/* Lines: X resource process thread fence acquire_start acquire_done write_start outcome seq */

static void valid_history_passes(void **state)
{
    (void)state;
    torture_fence_verdict v;
    /* Two resources, in any line order; a refused write, a hold without a write. */
    assert_int_equal(check("X 0 0 1 1 100 110 111 a 1\n"
                           "X 1 0 2 1 100 105 106 a 1\n"
                           "X 0 0 2 2 120 130 131 a 2\n"
                           "X 0 0 3 4 140 150 0 n 0\n"
                           "X 1 0 1 7 140 160 161 a 2\n"
                           "X 0 0 1 5 160 170 171 r 0\n",
                           NULL, 0, &v),
                     0);
    assert_int_equal(v.holds, 6);
    assert_int_equal(v.order_checks, 4);
    assert_int_equal(v.accepted, 4);
    assert_int_equal(v.refused, 1);
}

static void fence_that_does_not_grow_is_caught(void **state)
{
    (void)state;
    torture_fence_verdict v;
    const char *log = "X 0 0 1 3 100 110 111 a 1\n"
                      "X 0 0 2 3 120 130 131 a 2\n";
    assert_int_equal(check(log, NULL, 0, &v), 1);
    assert_int_equal(v.order_broken, 1);
    /* ... unless a node lost its data between the two (from the first's acquire start). */
    uint64_t forgot = 100;
    assert_int_equal(check(log, &forgot, 1, &v), 0);
    assert_int_equal(v.order_excused, 1);
    forgot = 131; /* after the second grant: no excuse */
    assert_int_equal(check(log, &forgot, 1, &v), 1);
}

static void stale_write_accepted_is_caught(void **state)
{
    (void)state;
    torture_fence_verdict v;
    /* The store applied the older hold's write (granted at 110) after the newer one's (130). */
    assert_int_equal(check("X 0 0 1 1 100 110 200 a 2\n"
                           "X 0 0 2 2 120 130 131 a 1\n",
                           NULL, 0, &v),
                     1);
    assert_int_equal(v.stale_accepted, 1);
    assert_int_equal(v.order_broken, 0);
}

static void bad_lines_are_caught(void **state)
{
    (void)state;
    torture_fence_verdict v;
    assert_int_equal(check("X 0 0 1 0 100 110 111 a 1\n", NULL, 0, &v), 1); /* fence 0 */
    assert_int_equal(check("X 0 0 1 1 100 110 111 q 1\n", NULL, 0, &v), 1); /* outcome */
    assert_int_equal(check("X 0 0 1\n", NULL, 0, &v), 1);
    assert_int_equal(v.bad_records, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(valid_history_passes),
        cmocka_unit_test(fence_that_does_not_grow_is_caught),
        cmocka_unit_test(stale_write_accepted_is_caught),
        cmocka_unit_test(bad_lines_are_caught),
    };
    return cmocka_run_group_tests_name("torture-fence-check", tests, setup, teardown);
}
