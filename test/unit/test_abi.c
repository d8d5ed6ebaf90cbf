/* SPDX-License-Identifier: MIT */
/* test_abi.c - the caller's structs are read and written by the caller's size (lib/core/abi.h,
 * docs/api.md "ABI policy"): an older program's smaller struct is never written past and its
 * missing members get defaults; a newer program's extra members are refused when set; a struct
 * that was never set up by its init macro is refused with REDLOCK_EINVAL. No server is needed:
 * every refusal comes before anything is sent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "abi.h"

#define CANARY 0xa5

static void assert_bytes(const void *p, size_t from, size_t to, unsigned char value)
{
    const unsigned char *b = p;
    for (size_t i = from; i < to; i++)
        if (b[i] != value)
            fail_msg("byte %zu is 0x%02x, expected 0x%02x", i, b[i], value);
}

/* ---- the mechanism, on two layouts of one made-up struct ------------------------------------ */

/* What a release appends: v2 is v1 with one more member. */
typedef struct v1 {
    size_t size;
    uint64_t a;
} v1;
typedef struct v2 {
    size_t size;
    uint64_t a;
    uint64_t b; /* added in "v2"; default 7 */
} v2;

static const v2 v2_defaults = {sizeof(v2), 1, 7};

static void older_caller_gets_defaults_for_what_it_lacks(void **state)
{
    (void)state;
    /* An older program: its init call reaches a newer library with its own, smaller size. */
    _Alignas(16) unsigned char buf[sizeof(v1) + 16];
    memset(buf, CANARY, sizeof(buf));
    redlock__struct_init(buf, sizeof(v1), &v2_defaults, sizeof(v2));
    assert_bytes(buf, sizeof(v1), sizeof(buf), CANARY); /* nothing written past the caller's */
    v1 old;
    memcpy(&old, buf, sizeof(old));
    assert_int_equal(old.size, sizeof(v1));
    assert_int_equal(old.a, 1);
    old.a = 5;

    v2 lib = v2_defaults;
    char err[256];
    assert_int_equal(
        redlock__struct_in(&lib, sizeof(lib), &old, sizeof(v1), "v", "v_init", err, sizeof(err)),
        0);
    assert_int_equal(lib.size, sizeof(v2)); /* the library's copy keeps its own size */
    assert_int_equal(lib.a, 5);
    assert_int_equal(lib.b, 7); /* the member the caller does not have: its default */
}

static void newer_caller_is_refused_only_when_it_sets_what_the_library_lacks(void **state)
{
    (void)state;
    char err[256];
    v2 newer = {sizeof(v2), 5, 0};
    v1 lib = {sizeof(v1), 1};
    assert_int_equal(
        redlock__struct_in(&lib, sizeof(lib), &newer, sizeof(v1), "v", "v_init", err, sizeof(err)),
        0);
    assert_int_equal(lib.a, 5);

    newer.b = 3; /* asks for something this "library" does not know */
    lib = (v1){sizeof(v1), 1};
    assert_int_equal(
        redlock__struct_in(&lib, sizeof(lib), &newer, sizeof(v1), "v", "v_init", err, sizeof(err)),
        REDLOCK_EINVAL);
    assert_non_null(strstr(err, "newer redlock.h"));
    assert_int_equal(lib.a, 1); /* unchanged on failure */
}

static void a_newer_callers_init_zeroes_its_extra_bytes(void **state)
{
    (void)state;
    _Alignas(16) unsigned char buf[sizeof(v2) + 8];
    memset(buf, CANARY, sizeof(buf));
    v1 defaults = {sizeof(v1), 1};
    redlock__struct_init(buf, sizeof(v2), &defaults, sizeof(defaults));
    assert_bytes(buf, sizeof(v1), sizeof(v2), 0);
    assert_bytes(buf, sizeof(v2), sizeof(buf), CANARY);
    size_t size;
    memcpy(&size, buf, sizeof(size));
    assert_int_equal(size, sizeof(v2)); /* the caller's size, not the library's */
}

static void sizes_that_no_init_wrote_are_refused(void **state)
{
    (void)state;
    char err[256];
    v1 lib = {sizeof(v1), 1};
    v1 zero = {0, 5};
    assert_int_equal(
        redlock__struct_in(&lib, sizeof(lib), &zero, sizeof(v1), "v", "v_init", err, sizeof(err)),
        REDLOCK_EINVAL);
    assert_non_null(strstr(err, "not set up by v_init"));
    v1 small = {sizeof(size_t), 5};
    assert_int_equal(
        redlock__struct_in(&lib, sizeof(lib), &small, sizeof(v1), "v", "v_init", err, sizeof(err)),
        REDLOCK_EINVAL);
    v1 huge = {(size_t)1 << 40, 5};
    assert_int_equal(
        redlock__struct_in(&lib, sizeof(lib), &huge, sizeof(v1), "v", "v_init", err, sizeof(err)),
        REDLOCK_EINVAL);
    assert_int_equal(lib.a, 1);
}

/* ---- the public structs ---------------------------------------------------------------------- */

static void init_macros_set_the_callers_size_and_the_defaults(void **state)
{
    (void)state;
    redlock_options o;
    redlock_options_init(&o);
    assert_int_equal(o.size, sizeof(redlock_options));
    assert_int_equal(o.ttl_ms, 10000);
    assert_int_equal(o.retry_count, 3);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    assert_int_equal(lo.size, sizeof(redlock_lock_opts));
    assert_int_equal(lo.retry_count, -1);
    redlock_auto_opts ao;
    redlock_auto_opts_init(&ao);
    assert_int_equal(ao.size, sizeof(redlock_auto_opts));
    assert_true(ao.extend_at > 0.33 && ao.extend_at < 0.34);

    redlock_report *r = malloc(sizeof(*r) + 64);
    assert_non_null(r);
    memset(r, CANARY, sizeof(*r) + 64);
    redlock_report_init(r);
    assert_int_equal(r->size, sizeof(redlock_report));
    assert_int_equal(r->status, 0);
    assert_int_equal(r->n_nodes, 0);
    assert_bytes(r, sizeof(*r), sizeof(*r) + 64, CANARY);
    free(r);
}

static void inits_never_write_past_the_size_they_are_given(void **state)
{
    (void)state;
    _Alignas(16) unsigned char buf[sizeof(redlock_report) + 64];
    memset(buf, CANARY, sizeof(buf));
    redlock_options_init_sized((redlock_options *)(void *)buf, 16);
    assert_bytes(buf, 16, sizeof(buf), CANARY);
    memset(buf, CANARY, sizeof(buf));
    redlock_lock_opts_init_sized((redlock_lock_opts *)(void *)buf, 16);
    assert_bytes(buf, 16, sizeof(buf), CANARY);
    memset(buf, CANARY, sizeof(buf));
    redlock_auto_opts_init_sized((redlock_auto_opts *)(void *)buf, 16);
    assert_bytes(buf, 16, sizeof(buf), CANARY);
    memset(buf, CANARY, sizeof(buf));
    redlock_report_init_sized((redlock_report *)(void *)buf, 16);
    assert_bytes(buf, 16, sizeof(buf), CANARY);
    /* Less than the size member itself: nothing at all. */
    memset(buf, CANARY, sizeof(buf));
    redlock_options_init_sized((redlock_options *)(void *)buf, 4);
    assert_bytes(buf, 0, sizeof(buf), CANARY);
}

/* A newer program's redlock_options: this library's members and one it does not know. */
typedef struct newer_options {
    redlock_options known;
    uint64_t unknown;
} newer_options;

static void options_from_a_newer_program(void **state)
{
    (void)state;
    newer_options n;
    redlock_options_init_sized(&n.known, sizeof(n));
    assert_int_equal(n.known.size, sizeof(n));
    assert_int_equal(n.unknown, 0); /* zeroed by the init: "default" */
    n.known.ttl_ms = 777;
    redlock_options o;
    char err[256] = "";
    assert_int_equal(redlock__options_in(&o, &n.known, err, sizeof(err)), 0);
    assert_int_equal(o.ttl_ms, 777);
    assert_int_equal(o.size, sizeof(redlock_options));

    n.unknown = 1;
    assert_int_equal(redlock__options_in(&o, &n.known, err, sizeof(err)), REDLOCK_EINVAL);
    assert_non_null(strstr(err, "does not know"));
}

static void on_closed(redlock_client *client, void *data)
{
    (void)client;
    *(int *)data = 1;
}

static void on_never(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)lock, (void)status, (void)result, (void)data;
    fail_msg("no operation should have started");
}

static void on_lost_never(redlock_lock *lock, int reason, void *data)
{
    (void)lock, (void)reason, (void)data;
}

static void unset_structs_are_refused_by_the_api(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    const char *urls[] = {"redis://127.0.0.1:1"};
    char err[256] = "";
    redlock_client *c = NULL;

    redlock_options bad;
    memset(&bad, 0, sizeof(bad)); /* never set up: size 0 */
    bad.ttl_ms = 1000;
    assert_int_equal(redlock_client_new(&loop, urls, 1, &bad, &c, err, sizeof(err)),
                     REDLOCK_EINVAL);
    assert_null(c);
    assert_non_null(strstr(err, "redlock_options_init"));

    assert_int_equal(redlock_client_new(&loop, urls, 1, NULL, &c, err, sizeof(err)), 0);
    redlock_lock_opts lo;
    memset(&lo, 0, sizeof(lo));
    assert_int_equal(redlock_acquire(c, "r", 1, 0, &lo, on_never, NULL), REDLOCK_EINVAL);
    assert_non_null(strstr(redlock_client_last_error(c), "redlock_lock_opts_init"));

    redlock_auto_opts ao;
    memset(&ao, 0, sizeof(ao));
    redlock_lock_opts_init(&lo);
    lo.auto_extend = &ao;
    lo.lost_cb = on_lost_never;
    assert_int_equal(redlock_acquire(c, "r", 1, 0, &lo, on_never, NULL), REDLOCK_EINVAL);
    assert_non_null(strstr(redlock_client_last_error(c), "redlock_auto_opts_init"));

    int closed = 0;
    assert_int_equal(redlock_client_close(c, on_closed, &closed), 0);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_true(closed);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void reports_not_set_up_are_refused_and_left_alone(void **state)
{
    (void)state;
    redlock_report *r = malloc(sizeof(*r));
    assert_non_null(r);
    memset(r, CANARY, sizeof(*r));
    r->size = 0;
    redlock_result result = {.status = REDLOCK_EBUSY};
    assert_int_equal(redlock_report_copy(r, &result), REDLOCK_EINVAL);
    assert_bytes(r, sizeof(r->size), sizeof(*r), CANARY);
    assert_int_equal(redlock_report_copy(NULL, &result), 0);

    const char *urls[] = {"redis://127.0.0.1:1"};
    char err[256] = "";
    redlock_sync *sync = NULL;
    assert_int_equal(redlock_sync_new(urls, 1, NULL, &sync, err, sizeof(err)), 0);
    redlock_sync_lock *lock = NULL;
    assert_int_equal(redlock_sync_acquire(sync, "r", 1, 0, NULL, &lock, r), REDLOCK_EINVAL);
    assert_null(lock);
    assert_int_equal(redlock_sync_inspect(sync, "r", 1, r), REDLOCK_EINVAL);
    assert_int_equal(redlock_sync_release(NULL, r), REDLOCK_EINVAL);
    assert_bytes(r, sizeof(r->size), sizeof(*r), CANARY);

    /* Set up, the same report is filled. */
    redlock_report_init(r);
    memset(r->errors, CANARY, sizeof(r->errors));
    assert_int_equal(redlock_sync_release(NULL, r), REDLOCK_EINVAL);
    assert_int_equal(r->status, REDLOCK_EINVAL);
    redlock_lock_opts lo;
    memset(&lo, 0, sizeof(lo));
    assert_int_equal(redlock_sync_acquire(sync, "r", 1, 0, &lo, &lock, r), REDLOCK_EINVAL);
    assert_int_equal(r->status, REDLOCK_EINVAL);
    redlock_sync_free(sync);
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(older_caller_gets_defaults_for_what_it_lacks),
        cmocka_unit_test(newer_caller_is_refused_only_when_it_sets_what_the_library_lacks),
        cmocka_unit_test(a_newer_callers_init_zeroes_its_extra_bytes),
        cmocka_unit_test(sizes_that_no_init_wrote_are_refused),
        cmocka_unit_test(init_macros_set_the_callers_size_and_the_defaults),
        cmocka_unit_test(inits_never_write_past_the_size_they_are_given),
        cmocka_unit_test(options_from_a_newer_program),
        cmocka_unit_test(unset_structs_are_refused_by_the_api),
        cmocka_unit_test(reports_not_set_up_are_refused_and_left_alone),
    };
    return cmocka_run_group_tests_name("abi", tests, NULL, NULL);
}
