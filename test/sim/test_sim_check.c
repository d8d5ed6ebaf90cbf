/* SPDX-License-Identifier: MIT */
/* test_sim_check.c - the simulation's checkers (sim_check.h) must tell a broken history from a
 * valid one: hand-made holds that overlap, that outlive their deadline into another's, that go
 * on after their lost callback or that cannot be, and nodes' records that hide a gap behind a
 * release or an extend, are flagged; valid ones (holds that only touch, a hold cut at its
 * deadline before its late release, a node that was down, records that meet end to end) pass. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "sim_check.h"

#define TTL_US 100000

/* A hold of resource by proc over [start, stop), deadline far away, no lost callback. */
static sim_hold hold_at(unsigned proc, unsigned resource, uint64_t start, uint64_t stop)
{
    return (sim_hold){.proc = proc,
                      .resource = resource,
                      .start = start,
                      .stop = stop,
                      .deadline = start + TTL_US,
                      .lost_at = SIM_NEVER};
}

static unsigned check(sim_hold *holds, size_t n, sim_exclusion *ex)
{
    unsigned bad = sim_check_exclusion(holds, n, TTL_US, ex);
    printf("# %u holds, %u overlaps, %u bad records, %u handovers%s%s\n", ex->holds, ex->overlaps,
           ex->bad_records, ex->handovers, bad != 0 ? ": " : "", bad != 0 ? ex->what : "");
    return bad;
}

static void valid_holds_pass(void **state)
{
    (void)state;
    sim_hold holds[] = {
        hold_at(0, 0, 1000, 2000),
        hold_at(1, 0, 2000, 3000), /* begins exactly where the previous one ended */
        hold_at(2, 1, 1500, 2500), /* another resource may overlap freely */
        hold_at(2, 0, 9000, 9000), /* handed out, never used: not a hold */
    };
    sim_exclusion ex;
    assert_int_equal(check(holds, 4, &ex), 0);
    assert_int_equal(ex.holds, 3);
    assert_int_equal(ex.handovers, 1);
}

static void overlap_is_flagged(void **state)
{
    (void)state;
    sim_hold holds[] = {hold_at(1, 0, 2999, 4000), hold_at(0, 0, 1000, 3000)}; /* 1 us */
    sim_exclusion ex;
    assert_int_equal(check(holds, 2, &ex), 1);
    assert_int_equal(ex.overlaps, 1);
    assert_non_null(strstr(ex.what, "1 us of overlap"));
}

/* A long hold that covers two later ones: both overlap it, though not each other. */
static void overlap_with_a_long_hold_is_flagged(void **state)
{
    (void)state;
    sim_hold holds[] = {hold_at(0, 0, 1000, 9000), hold_at(1, 0, 2000, 3000),
                        hold_at(2, 0, 4000, 5000)};
    holds[0].deadline = 10000;
    sim_exclusion ex;
    assert_int_equal(check(holds, 3, &ex), 2);
    assert_int_equal(ex.overlaps, 2);
}

/* A holder that works past its deadline (a pause, a slow step) stops trusting the lock there: the
 * next holder may begin at the deadline, before the late stop, but not before the deadline. */
static void hold_is_cut_at_its_deadline(void **state)
{
    (void)state;
    sim_hold late = hold_at(0, 0, 1000, 500000);
    late.deadline = 98000;
    sim_hold holds[] = {late, hold_at(1, 0, 98000, 99000)};
    sim_exclusion ex;
    assert_int_equal(check(holds, 2, &ex), 0);
    assert_int_equal(sim_hold_end(&late), 98000);

    sim_hold early[] = {late, hold_at(1, 0, 97999, 99000)};
    assert_int_equal(check(early, 2, &ex), 1);
    assert_int_equal(ex.overlaps, 1);
}

/* An auto-extended hold: its deadline is the last one the library reported. The next holder
 * begins after the first deadline but before the renewed one: an overlap. */
static void extended_hold_counts_to_its_last_deadline(void **state)
{
    (void)state;
    sim_hold extended = hold_at(0, 0, 1000, 300000);
    extended.deadline = 250000;
    extended.auto_extended = true;
    sim_hold holds[] = {extended, hold_at(1, 0, 200000, 210000)};
    sim_exclusion ex;
    assert_int_equal(check(holds, 2, &ex), 1);
    assert_non_null(strstr(ex.what, "(auto-extended)"));
}

/* The holder's model stops at its lost callback: a record that goes on is flagged, whatever
 * the other holds; one that stops there passes, and so does one whose deadline came first. */
static void hold_after_its_lost_callback_is_flagged(void **state)
{
    (void)state;
    sim_hold lost = hold_at(0, 0, 1000, 60000);
    lost.lost_at = 50000;
    sim_exclusion ex;
    assert_int_equal(check(&lost, 1, &ex), 1);
    assert_int_equal(ex.bad_records, 1);
    assert_non_null(strstr(ex.what, "after its lost callback"));

    lost.stop = 50000;
    assert_int_equal(check(&lost, 1, &ex), 0);
    lost.stop = 60000;
    lost.deadline = 45000; /* a pause held the callback back past the deadline */
    assert_int_equal(check(&lost, 1, &ex), 0);
}

static void impossible_hold_is_flagged(void **state)
{
    (void)state;
    sim_hold backwards = hold_at(0, 0, 2000, 1000);
    sim_hold holds[] = {backwards, hold_at(1, 0, 5000, 6000)};
    sim_exclusion ex;
    assert_int_equal(check(holds, 2, &ex), 1);
    assert_int_equal(ex.bad_records, 1);
    assert_non_null(strstr(ex.what, "stopped before it began"));
}

/* ---- no hold reported without its gap ------------------------------------------------------ */

#define KEY "res-0"
#define TOKEN "token-a"

static sim_presence present(unsigned node, const char *value, uint64_t from, uint64_t until)
{
    sim_presence r = {.node = node, .from = from, .until = until};
    r.key_len = strlen(KEY);
    memcpy(r.key, KEY, r.key_len);
    r.value_len = strlen(value);
    memcpy(r.value, value, r.value_len);
    return r;
}

/* Is the hold of TOKEN reported continuous over [from, to) a lie, on n_nodes nodes? */
static int gap(unsigned n_nodes, const sim_presence *presence, size_t n_presence,
               const sim_downtime *downtimes, size_t n_downtimes, uint64_t from, uint64_t to,
               uint64_t *at, unsigned *free_nodes)
{
    sim_record rec = {n_nodes, presence, n_presence, downtimes, n_downtimes};
    int rc = sim_find_gap(&rec, KEY, strlen(KEY), TOKEN, strlen(TOKEN), from, to, at, free_nodes);
    if (rc == 1)
        printf("# gap: at %llu us %u of %u nodes were up without the token\n",
               (unsigned long long)*at, *free_nodes, n_nodes);
    return rc;
}

/* A quorum of nodes held the token throughout: a release with status 0 tells the truth. */
static void continuous_hold_has_no_gap(void **state)
{
    (void)state;
    const sim_presence rec[] = {
        present(0, TOKEN, 0, 100000), present(1, TOKEN, 0, 50000),
        present(1, TOKEN, 50000, 100000), /* renewed end to end: no moment without it */
        present(2, "token-b", 0, 100000), /* another holder's key on the third node */
    };
    uint64_t at;
    unsigned free_nodes;
    assert_int_equal(gap(3, rec, 4, NULL, 0, 10000, 90000, &at, &free_nodes), 0);
}

/* The key expired on a node and came back (a retake): for 10 ms one node of three held it, and
 * the release that says the hold was continuous hides that gap. */
static void gap_hidden_by_a_release_is_flagged(void **state)
{
    (void)state;
    const sim_presence rec[] = {
        present(0, TOKEN, 0, 100000),
        present(1, TOKEN, 0, 50000),
        present(1, TOKEN, 60000, 100000),
    };
    uint64_t at = 0;
    unsigned free_nodes = 0;
    assert_int_equal(gap(3, rec, 3, NULL, 0, 10000, 90000, &at, &free_nodes), 1);
    assert_int_equal(at, 50000);
    assert_int_equal(free_nodes, 2);
    /* Before the gap, or from its end on, the hold was continuous. */
    assert_int_equal(gap(3, rec, 3, NULL, 0, 10000, 50000, &at, &free_nodes), 0);
    assert_int_equal(gap(3, rec, 3, NULL, 0, 60000, 90000, &at, &free_nodes), 0);
}

/* A key of the same token on another resource, or another token on this one, is no cover. */
static void only_the_holds_own_key_counts(void **state)
{
    (void)state;
    sim_presence other_key = present(1, TOKEN, 0, 100000);
    memcpy(other_key.key, "res-1", 5);
    const sim_presence rec[] = {present(0, TOKEN, 0, 100000), other_key,
                                present(2, "token-b", 0, 100000)};
    uint64_t at;
    unsigned free_nodes;
    assert_int_equal(gap(3, rec, 3, NULL, 0, 10000, 90000, &at, &free_nodes), 1);
    assert_int_equal(at, 10000);
}

/* A node that is down grants nobody anything: while node 1 was down, the key on node 0 and the
 * down node 1 kept any other holder from a quorum. The same record without the downtime is a
 * gap. */
static void node_down_is_no_gap(void **state)
{
    (void)state;
    const sim_presence rec[] = {
        present(0, TOKEN, 0, 100000),
        present(1, TOKEN, 0, 40000), /* lost in a restart without data */
        present(1, TOKEN, 70000, 100000),
    };
    const sim_downtime down[] = {{1, 40000, 70000}};
    uint64_t at;
    unsigned free_nodes;
    assert_int_equal(gap(3, rec, 3, down, 1, 10000, 90000, &at, &free_nodes), 0);
    assert_int_equal(gap(3, rec, 3, NULL, 0, 10000, 90000, &at, &free_nodes), 1);
    const sim_downtime short_down[] = {{1, 40000, 69999}}; /* back 1 us before the retake */
    assert_int_equal(gap(3, rec, 3, short_down, 1, 10000, 90000, &at, &free_nodes), 1);
    assert_int_equal(at, 69999);
}

/* The quorum depends on N: with 2 nodes both must be free, with 4 three, with 1 the one. */
static void quorum_follows_the_node_count(void **state)
{
    (void)state;
    const sim_presence one[] = {present(0, TOKEN, 0, 100000)};
    uint64_t at;
    unsigned free_nodes;
    assert_int_equal(gap(1, one, 1, NULL, 0, 10000, 90000, &at, &free_nodes), 0);
    assert_int_equal(gap(1, one, 1, NULL, 0, 10000, 100001, &at, &free_nodes), 1);
    assert_int_equal(gap(2, one, 1, NULL, 0, 10000, 90000, &at, &free_nodes), 0);
    assert_int_equal(gap(4, one, 1, NULL, 0, 10000, 90000, &at, &free_nodes), 1);
    assert_int_equal(free_nodes, 3);
    const sim_presence two[] = {present(0, TOKEN, 0, 100000), present(3, TOKEN, 0, 100000)};
    assert_int_equal(gap(4, two, 2, NULL, 0, 10000, 90000, &at, &free_nodes), 0);
    assert_int_equal(gap(5, two, 2, NULL, 0, 10000, 90000, &at, &free_nodes), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(valid_holds_pass),
        cmocka_unit_test(overlap_is_flagged),
        cmocka_unit_test(overlap_with_a_long_hold_is_flagged),
        cmocka_unit_test(hold_is_cut_at_its_deadline),
        cmocka_unit_test(extended_hold_counts_to_its_last_deadline),
        cmocka_unit_test(hold_after_its_lost_callback_is_flagged),
        cmocka_unit_test(impossible_hold_is_flagged),
        cmocka_unit_test(continuous_hold_has_no_gap),
        cmocka_unit_test(gap_hidden_by_a_release_is_flagged),
        cmocka_unit_test(only_the_holds_own_key_counts),
        cmocka_unit_test(node_down_is_no_gap),
        cmocka_unit_test(quorum_follows_the_node_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
