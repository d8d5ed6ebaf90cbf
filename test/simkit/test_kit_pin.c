/* SPDX-License-Identifier: MIT */
/* test_kit_pin.c - the test kit's entry point (lib/api/kit.h) hands its table only to a kit of
 * the library's own version and struct layout: another version, or the same version built with
 * other internal structs, gets NULL (and redlock_sim_new then fails with REDLOCK_EINVAL). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "kit.h"

static void the_same_build_gets_the_table(void **state)
{
    (void)state;
    const redlock__kit *kit = redlock__kit_get(REDLOCK_VERSION_STRING, REDLOCK__KIT_LAYOUT);
    assert_non_null(kit);
    assert_int_equal(kit->n_scripts, REDLOCK__SCRIPTS);
    assert_non_null(kit->client_new);
}

static void another_version_or_layout_gets_nothing(void **state)
{
    (void)state;
    assert_null(redlock__kit_get("0.1.0", REDLOCK__KIT_LAYOUT));
    assert_null(redlock__kit_get(REDLOCK_VERSION_STRING "-rc1", REDLOCK__KIT_LAYOUT));
    assert_null(redlock__kit_get(NULL, REDLOCK__KIT_LAYOUT));
    assert_null(redlock__kit_get(REDLOCK_VERSION_STRING, REDLOCK__KIT_LAYOUT + 1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_same_build_gets_the_table),
        cmocka_unit_test(another_version_or_layout_gets_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
