/* SPDX-License-Identifier: MIT */
/* test_checker.c - the torture checker must tell a broken history from a valid one: handcrafted
 * histories with overlapping holds, a wrong counter or an impossible record fail; valid ones,
 * including holds that only touch or that end at the deadline before the release, pass. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "checker.h"
#include "redlock.h"

/* A hold of resource from done_us to release_us, deadline 1 s after acquiring, incremented. */
static torture_hold hold_at(unsigned resource, uint64_t done_us, uint64_t release_us)
{
    torture_hold hold = {
        .resource = resource,
        .acquire_start_us = done_us - 100,
        .acquire_done_us = done_us,
        .deadline_us = done_us + 1000000,
        .release_us = release_us,
        .write_done_us = release_us - 10,
        .incremented = true,
    };
    snprintf(hold.token, sizeof(hold.token), "token-%u-%llu", resource,
             (unsigned long long)done_us);
    return hold;
}

static void add(torture_history *history, torture_hold hold)
{
    assert_int_equal(torture_history_add(history, &hold), 0);
}

static void test_valid_history_passes(void **state)
{
    torture_history history = {0};
    add(&history, hold_at(0, 1000, 2000));
    add(&history, hold_at(0, 2000, 3000)); /* starts exactly where the previous one ended */
    add(&history, hold_at(1, 1500, 2500)); /* another resource may overlap freely */
    torture_hold skipped = hold_at(0, 5000, 6000);
    skipped.incremented = false;
    skipped.write_done_us = 0;
    add(&history, skipped);
    const long long counters[2] = {2, 1};
    torture_verdict v;
    assert_int_equal(torture_check(&history, counters, 2, &v, stdout), 0);
    assert_int_equal(v.holds, 4);
    assert_int_equal(v.increments, 3);
    assert_int_equal(v.skipped, 1);
    assert_int_equal(v.at_deadline, 0);
    assert_int_equal(v.overlaps, 0);
    assert_int_equal(v.counter_mismatches, 0);
    torture_history_free(&history);
}

static void test_overlap_fails(void **state)
{
    torture_history history = {0};
    add(&history, hold_at(0, 1000, 3000));
    add(&history, hold_at(0, 2999, 4000)); /* 1 us of overlap */
    const long long counters[1] = {2};
    torture_verdict v;
    assert_int_equal(torture_check(&history, counters, 1, &v, stdout), 1);
    assert_int_equal(v.overlaps, 1);
    assert_int_equal(v.counter_mismatches, 0);
    torture_history_free(&history);
}

/* A long hold that covers two later ones: both overlap it, though not each other. */
static void test_overlap_with_long_hold_fails(void **state)
{
    torture_history history = {0};
    add(&history, hold_at(0, 1000, 9000));
    add(&history, hold_at(0, 2000, 3000));
    add(&history, hold_at(0, 4000, 5000));
    const long long counters[1] = {3};
    torture_verdict v;
    assert_int_equal(torture_check(&history, counters, 1, &v, stdout), 2);
    assert_int_equal(v.overlaps, 2);
    torture_history_free(&history);
}

/* A holder that stalls past its deadline releases late; the next holder may start after the
 * deadline, before that release. */
static void test_hold_ends_at_deadline(void **state)
{
    torture_history history = {0};
    torture_hold stalled = hold_at(0, 1000, 5000000);
    stalled.incremented = false;
    add(&history, stalled);
    add(&history, hold_at(0, stalled.deadline_us, stalled.deadline_us + 500));
    const long long counters[1] = {1};
    torture_verdict v;
    assert_int_equal(torture_check(&history, counters, 1, &v, stdout), 0);
    assert_int_equal(v.at_deadline, 1); /* the stalled one, not the second */

    /* ... but not before the deadline. */
    add(&history, hold_at(0, stalled.deadline_us - 1, stalled.deadline_us + 100));
    const long long counters2[1] = {2};
    assert_int_not_equal(torture_check(&history, counters2, 1, &v, stdout), 0);
    assert_true(v.overlaps >= 1);
    torture_history_free(&history);
}

static void test_wrong_counter_fails(void **state)
{
    torture_history history = {0};
    add(&history, hold_at(0, 1000, 2000));
    add(&history, hold_at(0, 3000, 4000));
    const long long lost_update[1] = {1};
    torture_verdict v;
    assert_int_equal(torture_check(&history, lost_update, 1, &v, stdout), 1);
    assert_int_equal(v.counter_mismatches, 1);
    const long long too_many[1] = {3};
    assert_int_equal(torture_check(&history, too_many, 1, &v, stdout), 1);
    const long long right[1] = {2};
    assert_int_equal(torture_check(&history, right, 1, &v, stdout), 0);
    torture_history_free(&history);
}

static void test_impossible_record_fails(void **state)
{
    torture_history history = {0};
    torture_hold backwards = hold_at(0, 1000, 2000);
    backwards.release_us = 500; /* released before it was acquired */
    add(&history, backwards);
    add(&history, hold_at(3, 1000, 2000)); /* resource out of range */
    const long long counters[1] = {0};
    torture_verdict v;
    assert_int_equal(torture_check(&history, counters, 1, &v, stdout), 2);
    assert_int_equal(v.bad_records, 2);
    torture_history_free(&history);
}

static void test_late_write_warns_only(void **state)
{
    torture_history history = {0};
    torture_hold late = hold_at(0, 1000, 2000000);
    late.write_done_us = late.deadline_us + 5;
    add(&history, late);
    const long long counters[1] = {1};
    torture_verdict v;
    assert_int_equal(torture_check(&history, counters, 1, &v, stdout), 0);
    assert_int_equal(v.late_writes, 1);
    torture_history_free(&history);
}

static void test_lines_round_trip(void **state)
{
    torture_hold hold = hold_at(2, 123456789, 123456999);
    hold.process = 4;
    hold.thread = 7;
    hold.release_status = REDLOCK_ENOQUORUM;
    torture_failure failure = {.resource = 1,
                               .process = 2,
                               .thread = 3,
                               .status = REDLOCK_EBUSY,
                               .acquire_start_us = 10,
                               .acquire_done_us = 20};
    char line[TORTURE_LINE_MAX];
    torture_history history = {0};
    assert_true(torture_hold_format(&hold, line, sizeof(line)) > 0);
    assert_int_equal(torture_history_parse_line(&history, line), 0);
    assert_true(torture_failure_format(&failure, line, sizeof(line)) > 0);
    assert_int_equal(torture_history_parse_line(&history, line), 0);
    assert_int_equal(torture_history_parse_line(&history, "\n"), 0);

    assert_int_equal(history.n_holds, 1);
    const torture_hold *parsed = &history.holds[0];
    assert_int_equal(parsed->resource, 2);
    assert_int_equal(parsed->process, 4);
    assert_int_equal(parsed->thread, 7);
    assert_string_equal(parsed->token, hold.token);
    assert_int_equal(parsed->acquire_start_us, hold.acquire_start_us);
    assert_int_equal(parsed->acquire_done_us, hold.acquire_done_us);
    assert_int_equal(parsed->deadline_us, hold.deadline_us);
    assert_int_equal(parsed->release_us, hold.release_us);
    assert_int_equal(parsed->write_done_us, hold.write_done_us);
    assert_true(parsed->incremented);
    assert_int_equal(parsed->release_status, REDLOCK_ENOQUORUM);
    assert_int_equal(history.failures, 1);
    assert_int_equal(history.failures_busy, 1);

    assert_int_equal(torture_history_parse_line(&history, "H 1 2 3 tok 1 2 3\n"), -1);
    assert_int_equal(torture_history_parse_line(&history, "H 1 2 3 t 1 2 3 4 5 1 0 extra\n"), -1);
    assert_int_equal(torture_history_parse_line(&history, "H 1 2 3 t 1 2 3 4 5 2 0\n"), -1);
    assert_int_equal(torture_history_parse_line(&history, "X\n"), -1);
    assert_int_equal(history.n_holds, 1);
    torture_history_free(&history);
}

static void test_load_rejects_torn_line(void **state)
{
    char path[] = "/tmp/torture-checker-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    char line[TORTURE_LINE_MAX];
    torture_hold hold = hold_at(0, 1000, 2000);
    int len = torture_hold_format(&hold, line, sizeof(line));
    assert_true(len > 0);
    assert_int_equal(write(fd, line, (size_t)len), len);
    close(fd);

    torture_history history = {0};
    assert_int_equal(torture_history_load(&history, path, stdout), 0);
    assert_int_equal(history.n_holds, 1);

    fd = open(path, O_WRONLY | O_APPEND);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, line, 10), 10); /* a line cut short, as by a crash mid-write */
    close(fd);
    torture_history_free(&history);
    assert_int_equal(torture_history_load(&history, path, stdout), -1);
    torture_history_free(&history);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_history_passes),
        cmocka_unit_test(test_overlap_fails),
        cmocka_unit_test(test_overlap_with_long_hold_fails),
        cmocka_unit_test(test_hold_ends_at_deadline),
        cmocka_unit_test(test_wrong_counter_fails),
        cmocka_unit_test(test_impossible_record_fails),
        cmocka_unit_test(test_late_write_warns_only),
        cmocka_unit_test(test_lines_round_trip),
        cmocka_unit_test(test_load_rejects_torn_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
