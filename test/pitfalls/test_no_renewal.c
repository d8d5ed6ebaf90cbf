/* SPDX-License-Identifier: MIT */
/* test_no_renewal.c - pitfall 5 (docs/pitfalls.md): a lock without renewal around work longer
 * than its ttl.
 *
 * The legacy lock is the right single-server lock (SET key token NX PX, compare-and-delete), but
 * its ttl is a guess at how long the work takes, and here the work takes longer: A's key expires
 * mid-work, B (polling for the lock) takes it and works too; A's compare-and-delete at the end
 * finds the key is not its own any more - too late. A's work is long on purpose: it ends only
 * once B has entered.
 *
 * libredlock with auto-extension (redlock_lock_opts.auto_extend): A keeps the lock for as long
 * as it works, B waits two and a half ttls and is refused. And when it cannot keep it - three
 * of five nodes stopped (SIGSTOP, fixture_pause), so no extension can win - it says so: the lost
 * callback fires before the deadline, A stops working there, and B gets the lock only after
 * that deadline. */
#include "pitfalls.h"

#include <stdio.h>
#include <string.h>

#define N 5
#define KEY "pitfall:no-renewal"
/* The ttl the work outlasts. libredlock's extension rounds must each be decided within about
 * half of it (extended at a third, lost a tenth before the deadline, less the drift): 1.5 s,
 * where a loaded machine's loopback rounds take milliseconds. */
#define TTL_MS 3000

typedef struct lost_record {
    int calls;
    int reason;
    uint64_t at_us;
    uint64_t deadline_us; /* the lock's deadline when "lost" fired */
} lost_record;

static void on_lost(redlock_lock *lock, int reason, void *data)
{
    lost_record *l = data;
    l->calls++;
    l->reason = reason;
    l->at_us = redlock_now_us();
    l->deadline_us = redlock_lock_deadline_us(lock);
}

static void auto_opts(redlock_lock_opts *lo, redlock_auto_opts *ao, lost_record *lost)
{
    redlock_auto_opts_init(ao);
    redlock_lock_opts_init(lo);
    lo->auto_extend = ao;
    lo->lost_cb = on_lost;
    lo->lost_data = lost;
}

static void work_outlasts_the_ttl(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redisContext *a = pf_connect(&env.cluster, 0), *b = pf_connect(&env.cluster, 0);
    pf_history h;
    pf_history_init(&h, "legacy lock without renewal, work longer than the ttl");
    char token_a[33], token_b[33];
    assert_true(pf_random_token(token_a, sizeof(token_a)));
    assert_true(pf_random_token(token_b, sizeof(token_b)));
    assert_true(pf_token_lock(a, KEY, token_a, TTL_MS));
    const uint64_t a_from = redlock_now_us();
    /* A works. B polls for the lock and gets it once A's key expired. */
    assert_true(pf_token_lock_wait(b, KEY, token_b, PF_LONG_TTL_MS, TTL_MS + H_WAIT_MS));
    const uint64_t b_from = redlock_now_us();
    /* A's work ends: its unlock finds B's token. */
    assert_int_equal(pf_token_unlock(a, KEY, token_a), 0);
    pf_history_add(&h, "A", a_from, redlock_now_us());
    assert_int_equal(pf_token_unlock(b, KEY, token_b), 1);
    pf_history_add(&h, "B", b_from, redlock_now_us());
    pf_report(&h);
    assert_true(pf_overlap_between(&h, "A", "B"));
    redisFree(a);
    redisFree(b);

    /* libredlock, auto-extended: A works 2.5 ttls while B waits for the lock. */
    redlock_client *ca = pf_client(&env), *cb = pf_client(&env);
    pf_history_init(&h, "libredlock with auto-extension, the same work");
    redlock_lock_opts lo;
    redlock_auto_opts ao;
    lost_record lost = {0};
    auto_opts(&lo, &ao, &lost);
    h_record ra;
    assert_int_equal(h_acquire(&env, ca, KEY, TTL_MS, &lo, &ra), 0);
    redlock_lock_opts wait;
    redlock_lock_opts_init(&wait);
    wait.wait_ms = 5 * TTL_MS / 2;
    h_record rb;
    int rc = h_acquire(&env, cb, KEY, TTL_MS, &wait, &rb);
    if (rc != REDLOCK_EBUSY)
        h_dump_record("B's acquire", &rb);
    assert_int_equal(rc, REDLOCK_EBUSY);
    assert_true(rb.attempts > 1);
    /* A's work ends: still held, never reported lost, extended at least twice (without an
     * extension its keys would have expired a ttl after the acquire; with one, a ttl after it). */
    const uint64_t a_end = redlock_now_us();
    assert_int_equal(lost.calls, 0);
    assert_true(redlock_lock_is_held(ra.lock, a_end));
    assert_true(a_end - ra.at_us > 2 * TTL_MS * 1000ull);
    assert_true(redlock_lock_extensions(ra.lock) >= 2);
    printf("# A was extended %u times; B tried %u times and was refused\n",
           redlock_lock_extensions(ra.lock), rb.attempts);
    /* Its release: 0, the library's word that a quorum still held A's token and the hold was
     * continuous. (Not every node need still hold it: a node that ran one extension late, after
     * its key expired, answered "not ours" to that one and every later one. The per-node
     * outcome is printed then.) */
    h_record rel;
    int rc_rel = h_release(&env, ra.lock, &rel);
    if (rc_rel != 0 || rel.votes_yes != N)
        h_dump_record("A's release", &rel);
    assert_int_equal(rc_rel, 0);
    assert_true(rel.votes_yes >= N / 2 + 1);
    pf_history_add(&h, "A", ra.at_us, a_end);
    assert_int_equal(pf_report(&h), 0);
    redlock_lock_free(ra.lock);
    h_close_client(&env, ca);
    h_close_client(&env, cb);
    h_env_stop(&env);
}

static void auto_extension_reports_a_loss_it_cannot_prevent(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *ca = pf_client(&env), *cb = pf_client(&env);
    pf_history h;
    pf_history_init(&h, "libredlock with auto-extension, three of five nodes stopped");
    redlock_lock_opts lo;
    redlock_auto_opts ao;
    lost_record lost = {0};
    auto_opts(&lo, &ao, &lost);
    h_record ra;
    assert_int_equal(h_acquire(&env, ca, KEY, TTL_MS, &lo, &ra), 0);
    size_t token_len = 0;
    const char *token = redlock_lock_token(ra.lock, &token_len);
    assert_true(h_wait_holding(&env, KEY, strlen(KEY), token, token_len, N, H_WAIT_MS));
    /* No extension can win now. A works until it is told. */
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(fixture_pause(&env.cluster, i), 0);
    assert_true(h_run_until(&env.loop, &lost.calls, 1, TTL_MS + H_WAIT_MS));
    assert_int_equal(lost.calls, 1);
    if (lost.reason != REDLOCK_ENOQUORUM && lost.reason != REDLOCK_EEXPIRED)
        fail_msg("lost with %s", redlock_err_name(lost.reason));
    /* Before the deadline, never after it. A stops working there. */
    assert_true(lost.at_us < lost.deadline_us);
    assert_false(redlock_lock_is_held(ra.lock, redlock_now_us()));
    pf_history_add(&h, "A", ra.at_us, lost.at_us);
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(fixture_resume(&env.cluster, i), 0);
    /* B waits for the lock and gets it, after A's deadline. */
    redlock_lock_opts wait;
    redlock_lock_opts_init(&wait);
    wait.wait_ms = 2 * TTL_MS + 2 * H_WAIT_MS;
    h_record rb;
    int rc = h_acquire(&env, cb, KEY, PF_LONG_TTL_MS, &wait, &rb);
    if (rc != 0)
        h_dump_record("B's acquire", &rb);
    assert_int_equal(rc, 0);
    assert_true(rb.at_us >= lost.deadline_us);
    const uint64_t b_end = redlock_now_us();
    h_record rel;
    assert_int_equal(h_release(&env, rb.lock, &rel), 0);
    pf_history_add(&h, "B", rb.at_us, b_end);
    unsigned overlaps = pf_report(&h);
    printf("#   A's lost callback: %s, %.3f ms before its deadline\n",
           redlock_err_name(lost.reason), (double)(lost.deadline_us - lost.at_us) / 1e3);
    assert_int_equal(overlaps, 0);
    /* A's release: the hold had lapsed (it was told so). */
    assert_int_equal(h_release(&env, ra.lock, &rel), REDLOCK_ELOST);
    redlock_lock_free(ra.lock);
    redlock_lock_free(rb.lock);
    h_close_client(&env, ca);
    h_close_client(&env, cb);
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        PF_TEST(work_outlasts_the_ttl),
        PF_TEST(auto_extension_reports_a_loss_it_cannot_prevent),
    };
    return cmocka_run_group_tests_name("pitfall-no-renewal", tests, NULL, NULL);
}
