/* SPDX-License-Identifier: MIT */
/* test_checker.c - the pitfall tests' overlap check (pf_history) on hand-made histories: it must
 * see an overlap wherever two holds share an instant, and none where one ends as the next
 * begins, or every "the legacy lock overlaps, libredlock does not" in this suite means nothing. */
#include "pitfalls.h"

static void disjoint_and_touching_holds_do_not_overlap(void **state)
{
    (void)state;
    pf_history h;
    pf_history_init(&h, "disjoint");
    pf_history_add(&h, "A", 100, 200);
    pf_history_add(&h, "B", 200, 300); /* begins as A ends */
    pf_history_add(&h, "C", 400, 400); /* empty */
    pf_history_add(&h, "D", 500, 900);
    assert_int_equal(pf_overlaps(&h), 0);
    assert_false(pf_overlap_between(&h, "A", "B"));
    assert_int_equal(pf_report(&h), 0);
}

static void shared_instants_overlap(void **state)
{
    (void)state;
    pf_history h;
    pf_history_init(&h, "overlapping");
    pf_history_add(&h, "A", 100, 201); /* one microsecond into B */
    pf_history_add(&h, "B", 200, 300);
    pf_history_add(&h, "C", 150, 160); /* inside A */
    pf_history_add(&h, "D", 50, 1000); /* around all of them */
    assert_true(pf_overlap_between(&h, "A", "B"));
    assert_true(pf_overlap_between(&h, "B", "A"));
    assert_true(pf_overlap_between(&h, "A", "C"));
    assert_false(pf_overlap_between(&h, "B", "C"));
    /* A-B, A-C, A-D, B-D, C-D */
    assert_int_equal(pf_overlaps(&h), 5);
    assert_int_equal(pf_report(&h), 5);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(disjoint_and_touching_holds_do_not_overlap),
        cmocka_unit_test(shared_instants_overlap),
    };
    return cmocka_run_group_tests_name("pitfall-checker", tests, NULL, NULL);
}
