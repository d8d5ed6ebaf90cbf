/* SPDX-License-Identifier: MIT */
/* test_filters.h - the cmocka test filters every test program takes from its environment:
 * H_TEST_FILTER runs only the tests whose names match it, H_TEST_SKIP leaves out those that
 * match it (globs, cmocka's). The mutants pick their killers' cases this way. Include after
 * cmocka.h. */
#ifndef REDLOCK_TEST_FILTERS_H
#define REDLOCK_TEST_FILTERS_H

#include <stdlib.h>

static inline void test_filters_from_env(void)
{
    const char *filter = getenv("H_TEST_FILTER");
    if (filter != NULL && filter[0] != '\0')
        cmocka_set_test_filter(filter);
    const char *skip = getenv("H_TEST_SKIP");
    if (skip != NULL && skip[0] != '\0')
        cmocka_set_skip_filter(skip);
}

#endif
