/* SPDX-License-Identifier: MIT */
/* test_lapsed.c - a lapsed hold is never hidden (issue 17): a release says REDLOCK_ELOST when
 * fewer than a quorum of nodes still held the token (its validity ran out, a majority of nodes
 * restarted without persistence, another value took its place), REDLOCK_ENOQUORUM when too few
 * nodes answered to tell, 0 only when a quorum deleted it; and no extend re-creates keys over a
 * possible gap (RETAKE through an attached handle, or after the lock was found lost).
 *
 * Node timeouts are seconds: no assertion here depends on a node answering fast. The short ttls
 * are waited out by watching the keys disappear, never by assuming a deadline was met. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MS 1000ull

static redlock_client *patient_client(h_env *env)
{
    redlock_options o;
    h_test_options(&o);
    o.node_timeout_ms = 3000;
    redlock_client *c = h_client(env, &o);
    h_wait_ready(env, c);
    return c;
}

/* A caller's token, and retries for up to 10 s: a 100 ms ttl leaves a loaded machine (or
 * valgrind) little room to win a round with validity left, so a round that came too late is
 * simply tried again. */
static void lock_opts(redlock_lock_opts *lo, const char *token)
{
    redlock_lock_opts_init(lo);
    lo->token = token;
    lo->token_len = strlen(token);
    lo->wait_ms = 10000;
}

/* Run the loop until no node holds key with token and the lock's deadline passed (at most
 * 10 s, else fail). */
static void wait_lapsed(h_env *env, redlock_lock *lock, const char *key, const char *token)
{
    uint64_t t0 = redlock_now_us();
    while (h_count_holding(env, key, strlen(key), token, strlen(token)) > 0 ||
           redlock_lock_is_held(lock, redlock_now_us())) {
        if (h_since_us(t0) > 10000 * MS)
            fail_msg("the keys of %s never expired", key);
        h_run_for(&env->loop, 20);
    }
}

static void assert_key_nowhere(h_env *env, const char *key)
{
    for (unsigned i = 0; i < env->cluster.n; i++)
        if (env->cluster.servers[i].pid != 0)
            assert_int_equal(h_pttl(env, i, key, strlen(key)), -2);
}

/* ttl 100 ms, wait past it, release: the hold had lapsed. */
static void release_after_ttl_is_lost(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, NULL);
    redlock_client *c = patient_client(&env);
    redlock_lock_opts lo;
    lock_opts(&lo, "tok-ttl");
    h_record rec, rel;
    assert_int_equal(h_acquire(&env, c, "lapsed:ttl", 100, &lo, &rec), 0);
    wait_lapsed(&env, rec.lock, "lapsed:ttl", "tok-ttl");
    int rc = h_release(&env, rec.lock, &rel);
    if (rc != REDLOCK_ELOST)
        h_dump_record("release after the ttl", &rel);
    assert_int_equal(rc, REDLOCK_ELOST);
    assert_int_equal(rel.votes_yes, 0);
    assert_int_equal(rel.votes_no, 3);
    assert_true(rel.lock == rec.lock);
    assert_false(redlock_lock_is_held(rec.lock, redlock_now_us()));
    /* Released all the same: a second release is refused. */
    assert_int_equal(redlock_release(rec.lock, h_record_cb, &rel), REDLOCK_ERELEASED);
    redlock_lock_free(rec.lock);
    assert_key_nowhere(&env, "lapsed:ttl");
    h_env_stop(&env);
}

/* A majority of nodes restarts without persistence while the lock is held (well within its
 * validity): the handle reads as lost, and the release finds the token on one node of three,
 * deletes it there, and says the hold lapsed. */
static void release_after_majority_restarted_is_lost(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, NULL);
    redlock_client *c = patient_client(&env);
    redlock_lock_opts lo;
    lock_opts(&lo, "tok-restart");
    h_record rec, rel;
    assert_int_equal(h_acquire(&env, c, "lapsed:restart", 60000, &lo, &rec), 0);
    assert_true(h_wait_holding(&env, "lapsed:restart", 14, "tok-restart", 11, 3, 5000));
    assert_int_equal(fixture_restart(&env.cluster, 1), 0);
    assert_int_equal(fixture_restart(&env.cluster, 2), 0);
    h_wait_ready(&env, c); /* reconnected to both: they answer "not ours", not an error */
    /* The check the client ran on reaching the new servers (test_amnesia.c) says so already. */
    uint64_t until = redlock_now_us() + H_WAIT_MS * 1000;
    while (redlock_lock_is_held(rec.lock, redlock_now_us()) && redlock_now_us() < until)
        h_run_for(&env.loop, 5);
    assert_false(redlock_lock_is_held(rec.lock, redlock_now_us()));
    assert_true(redlock_now_us() < redlock_lock_deadline_us(rec.lock));
    int rc = h_release(&env, rec.lock, &rel);
    if (rc != REDLOCK_ELOST)
        h_dump_record("release after the restarts", &rel);
    assert_int_equal(rc, REDLOCK_ELOST);
    assert_int_equal(rel.votes_yes, 1);
    assert_int_equal(rel.votes_no, 2);
    assert_key_nowhere(&env, "lapsed:restart"); /* deleted where our token still was */
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

static redlock_lock *hold_everywhere(h_env *env, redlock_client *c, const char *key,
                                     const char *token);

/* PEXPIRE key on server i (the key must exist). */
static void set_pttl(h_env *env, unsigned i, const char *key, long long ms)
{
    redisReply *r = fixture_command(&env->cluster, i, "PEXPIRE %s %lld", key, ms);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);
}

/* Keys that outlive the lock's validity (a node's clock runs slow, say) prove nothing about the
 * time after it: a release called after the deadline says the hold lapsed even though every node
 * still had the token (and deletes it everywhere). */
static void release_after_deadline_is_lost_even_with_the_keys(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, NULL);
    redlock_client *c = patient_client(&env);
    redlock_lock_opts lo;
    lock_opts(&lo, "tok-late");
    h_record rec, rel;
    /* 2 s: time enough to lengthen the keys before they expire, however loaded the machine. */
    assert_int_equal(h_acquire(&env, c, "lapsed:late", 2000, &lo, &rec), 0);
    assert_true(h_wait_holding(&env, "lapsed:late", 11, "tok-late", 8, 3, 5000));
    for (unsigned i = 0; i < 3; i++)
        set_pttl(&env, i, "lapsed:late", 60000);
    while (redlock_lock_is_held(rec.lock, redlock_now_us()))
        h_run_for(&env.loop, 20);
    assert_int_equal(h_release(&env, rec.lock, &rel), REDLOCK_ELOST);
    assert_int_equal(rel.votes_yes, 3);
    assert_key_nowhere(&env, "lapsed:late");
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

/* Once an extend has said REDLOCK_ELOST, the release does not take it back, even if the token is
 * on every node again by then (here put back by hand, as a retake still on the wire would). */
static void release_after_extend_found_it_lost_is_lost(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, NULL);
    redlock_client *c = patient_client(&env);
    redlock_lock *lock = hold_everywhere(&env, c, "lapsed:ext", "tok-ext");
    h_set(&env, 0, "lapsed:ext", 10, "foreign");
    h_set(&env, 1, "lapsed:ext", 10, "foreign");
    h_record ext, rel;
    assert_int_equal(h_extend(&env, lock, 0, 0, &ext), REDLOCK_ELOST);
    h_set(&env, 0, "lapsed:ext", 10, "tok-ext");
    h_set(&env, 1, "lapsed:ext", 10, "tok-ext");
    /* The deadline is still ahead (whether the lock still reads as held depends on whether the
     * check after the extend's "no" votes has finished: issue 36). */
    assert_true(redlock_lock_deadline_us(lock) > redlock_now_us());
    assert_int_equal(h_release(&env, lock, &rel), REDLOCK_ELOST);
    assert_int_equal(rel.votes_yes, 3);
    assert_key_nowhere(&env, "lapsed:ext");
    redlock_lock_free(lock);
    h_env_stop(&env);
}

/* Acquire key on every node of the env with token, and wait until all of them hold it. */
static redlock_lock *hold_everywhere(h_env *env, redlock_client *c, const char *key,
                                     const char *token)
{
    redlock_lock_opts lo;
    lock_opts(&lo, token);
    h_record rec;
    assert_int_equal(h_acquire(env, c, key, 60000, &lo, &rec), 0);
    assert_true(h_wait_holding(env, key, strlen(key), token, strlen(token), env->cluster.n, 5000));
    return rec.lock;
}

static int release_votes(h_env *env, redlock_lock *lock, unsigned yes, unsigned no)
{
    h_record rel;
    int rc = h_release(env, lock, &rel);
    if (rel.votes_yes != yes || rel.votes_no != no)
        h_dump_record("release", &rel);
    assert_int_equal(rel.votes_yes, yes);
    assert_int_equal(rel.votes_no, no);
    assert_int_equal(rel.votes_error + rel.votes_timeout, env->cluster.n - yes - no);
    redlock_lock_free(lock);
    return rc;
}

/* The rule with nodes that do not answer (5 nodes, quorum 3, two of them killed): ELOST only
 * when the "no" answers alone rule out a quorum of holders; when the silent nodes could have
 * made one, the release cannot tell (ENOQUORUM); 0 whenever a quorum deleted the token. */
static void release_mixed_votes(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 5, NULL);
    redlock_client *c = patient_client(&env);
    redlock_lock *held = hold_everywhere(&env, c, "mixed:held", "tok-m");
    redlock_lock *one_gone = hold_everywhere(&env, c, "mixed:one", "tok-m");
    redlock_lock *two_gone = hold_everywhere(&env, c, "mixed:two", "tok-m");
    redlock_lock *taken = hold_everywhere(&env, c, "mixed:taken", "tok-m");
    h_hear_all(&env, c); /* every key kept: each lost one costs its own vote only */
    assert_int_equal(h_del(&env, 2, "mixed:one", 9), 1);
    assert_int_equal(h_del(&env, 0, "mixed:two", 9), 1);
    assert_int_equal(h_del(&env, 1, "mixed:two", 9), 1);
    for (unsigned i = 0; i < 3; i++)
        h_set(&env, i, "mixed:taken", 11, "foreign");
    assert_int_equal(fixture_kill(&env.cluster, 3), 0);
    assert_int_equal(fixture_kill(&env.cluster, 4), 0);

    /* yes 3, 2 silent: a quorum deleted it. */
    assert_int_equal(release_votes(&env, held, 3, 0), 0);
    /* yes 2, no 1, 2 silent: the silent two may have held it (2 + 2 >= 3): cannot tell. */
    assert_int_equal(release_votes(&env, one_gone, 2, 1), REDLOCK_ENOQUORUM);
    /* yes 1, no 2, 2 silent: still 1 + 2 >= 3 possible holders. */
    assert_int_equal(release_votes(&env, two_gone, 1, 2), REDLOCK_ENOQUORUM);
    /* no 3 > 5 - 3: at most 2 holders even counting the silent ones. */
    assert_int_equal(release_votes(&env, taken, 0, 3), REDLOCK_ELOST);
    assert_int_equal(h_count_holding(&env, "mixed:taken", 11, "foreign", 7), 3);
    for (unsigned i = 0; i < 3; i++) {
        assert_int_equal(h_pttl(&env, i, "mixed:held", 10), -2);
        assert_int_equal(h_pttl(&env, i, "mixed:one", 9), -2);
        assert_int_equal(h_pttl(&env, i, "mixed:two", 9), -2);
    }
    h_env_stop(&env);
}

/* An even node count (4, quorum 3): two "no" and two silent nodes leave at most 2 holders, so
 * the hold provably lapsed, although only half of the nodes answered. */
static void release_even_node_count(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 4, NULL);
    redlock_client *c = patient_client(&env);
    redlock_lock *two_no = hold_everywhere(&env, c, "even:two", "tok-e");
    redlock_lock *one_no = hold_everywhere(&env, c, "even:one", "tok-e");
    h_hear_all(&env, c); /* every key kept: each lost one costs its own vote only */
    assert_int_equal(h_del(&env, 0, "even:two", 8), 1);
    assert_int_equal(h_del(&env, 1, "even:two", 8), 1);
    assert_int_equal(h_del(&env, 0, "even:one", 8), 1);
    assert_int_equal(fixture_kill(&env.cluster, 2), 0);
    assert_int_equal(fixture_kill(&env.cluster, 3), 0);
    assert_int_equal(release_votes(&env, two_no, 0, 2), REDLOCK_ELOST);
    assert_int_equal(release_votes(&env, one_no, 1, 1), REDLOCK_ENOQUORUM);
    assert_int_equal(h_pttl(&env, 1, "even:one", 8), -2);
    h_env_stop(&env);
}

/* The blocking API says the same, and the handle then reads as released. */
static void sync_release_after_ttl_is_lost(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, NULL);
    redlock_options o;
    h_test_options(&o);
    o.node_timeout_ms = 3000;
    char err[256];
    redlock_sync *sync = NULL;
    assert_int_equal(redlock_sync_new(env.cluster.urls, 3, &o, &sync, err, sizeof(err)), 0);
    redlock_lock_opts lo;
    lock_opts(&lo, "tok-sync");
    redlock_report *report = calloc(1, sizeof(*report));
    assert_non_null(report);
    redlock_report_init(report);
    redlock_sync_lock *lock = NULL;
    assert_int_equal(redlock_sync_acquire(sync, "lapsed:sync", 11, 100, &lo, &lock, report), 0);
    uint64_t t0 = redlock_now_us();
    while (h_count_holding(&env, "lapsed:sync", 11, "tok-sync", 8) > 0 ||
           redlock_sync_lock_status(lock) == 0) {
        if (h_since_us(t0) > 10000 * MS)
            fail_msg("the keys never expired");
        h_run_for(&env.loop, 20);
    }
    assert_int_equal(redlock_sync_release(lock, report), REDLOCK_ELOST);
    assert_int_equal(report->status, REDLOCK_ELOST);
    assert_int_equal(report->votes_yes, 0);
    assert_int_equal(report->votes_no, 3);
    assert_int_equal(redlock_sync_lock_status(lock), REDLOCK_ERELEASED);
    redlock_sync_lock_free(lock);
    redlock_sync_free(sync);
    free(report);
    h_env_stop(&env);
}

/* The second case: a's lock expires, b takes and releases it, and a handle attached to
 * a's token asks for RETAKE. It used to set the keys again and report a won extend, as if a had
 * held the lock all along. Now it is refused at once, and nothing comes back on the nodes. */
static void attached_retake_after_another_holder_is_refused(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, NULL);
    redlock_client *a = patient_client(&env);
    redlock_client *b = patient_client(&env);
    redlock_lock_opts lo;
    lock_opts(&lo, "tok-a");
    h_record rec, rb, rel, ext;
    assert_int_equal(h_acquire(&env, a, "lapsed:attach", 100, &lo, &rec), 0);
    redlock_lock *attached = NULL;
    assert_int_equal(redlock_lock_attach(b, "lapsed:attach", 13, "tok-a", 5, 5000, &attached), 0);
    wait_lapsed(&env, rec.lock, "lapsed:attach", "tok-a");
    /* Another holder takes the lock and gives it back. */
    lock_opts(&lo, "tok-b");
    assert_int_equal(h_acquire(&env, b, "lapsed:attach", 5000, &lo, &rb), 0);
    assert_true(h_wait_holding(&env, "lapsed:attach", 13, "tok-b", 5, 3, 5000));
    assert_int_equal(h_release(&env, rb.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, 3);
    redlock_lock_free(rb.lock);

    memset(&ext, 0, sizeof(ext));
    assert_int_equal(redlock_extend(attached, 5000, REDLOCK_EXTEND_RETAKE, h_record_cb, &ext),
                     REDLOCK_EINVAL);
    assert_non_null(strstr(redlock_client_last_error(b), "attached"));
    h_run_for(&env.loop, 100);
    assert_int_equal(ext.calls, 0); /* refused at once: no callback */
    assert_key_nowhere(&env, "lapsed:attach");
    /* A plain extend runs, and finds the lock gone; a retake stays refused after that. */
    assert_int_equal(h_extend(&env, attached, 5000, 0, &ext), REDLOCK_ELOST);
    assert_true(ext.votes_no >= 2); /* decided as soon as a quorum is out of reach */
    assert_int_equal(redlock_extend(attached, 5000, REDLOCK_EXTEND_RETAKE, h_record_cb, &ext),
                     REDLOCK_EINVAL);
    assert_non_null(strstr(redlock_client_last_error(b), "REDLOCK_ELOST"));
    assert_key_nowhere(&env, "lapsed:attach");
    assert_int_equal(h_release(&env, attached, &rel), REDLOCK_ELOST);
    redlock_lock_free(attached);
    assert_int_equal(h_release(&env, rec.lock, &rel), REDLOCK_ELOST);
    redlock_lock_free(rec.lock);
    h_close_client(&env, b);
    h_env_stop(&env);
}

/* The same through the blocking API: the refusal and its reason reach the caller. */
static void sync_attached_retake_is_refused(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, NULL);
    redlock_options o;
    h_test_options(&o);
    o.node_timeout_ms = 3000;
    char err[256];
    redlock_sync *sync = NULL;
    assert_int_equal(redlock_sync_new(env.cluster.urls, 3, &o, &sync, err, sizeof(err)), 0);
    redlock_report *report = calloc(1, sizeof(*report));
    assert_non_null(report);
    redlock_report_init(report);
    redlock_sync_lock *lock = NULL;
    assert_int_equal(
        redlock_sync_attach(sync, "lapsed:sync-attach", 18, "tok-gone", 8, 5000, &lock), 0);
    assert_int_equal(redlock_sync_extend(lock, 5000, REDLOCK_EXTEND_RETAKE, report),
                     REDLOCK_EINVAL);
    assert_int_equal(report->status, REDLOCK_EINVAL);
    assert_int_equal(report->n_nodes, 0);
    assert_non_null(strstr(report->message, "attached"));
    assert_key_nowhere(&env, "lapsed:sync-attach");
    /* The message belongs to that call: a round's report has none. */
    assert_int_equal(redlock_sync_extend(lock, 5000, 0, report), REDLOCK_ELOST);
    assert_string_equal(report->message, "");
    assert_true(report->votes_no >= 2);
    redlock_sync_lock_free(lock);
    redlock_sync_free(sync);
    free(report);
    h_env_stop(&env);
}

/* An attached handle to a live lock: a plain extend wins and fixes its deadline, and from then
 * on RETAKE works as for an acquired lock (it restores a node that lost the key). */
static void attached_retake_after_a_plain_extend_won(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, NULL);
    redlock_client *c = patient_client(&env);
    redlock_lock *held = hold_everywhere(&env, c, "lapsed:live", "tok-live");
    redlock_lock *attached = NULL;
    assert_int_equal(redlock_lock_attach(c, "lapsed:live", 11, "tok-live", 8, 60000, &attached), 0);
    h_record ext, rel;
    assert_int_equal(redlock_extend(attached, 0, REDLOCK_EXTEND_RETAKE, h_record_cb, &ext),
                     REDLOCK_EINVAL);
    assert_int_equal(h_extend(&env, attached, 0, 0, &ext), 0);
    assert_true(redlock_lock_deadline_us(attached) != UINT64_MAX);
    h_hear_all(&env, c); /* the extend's late yes, if any, lies inside the hold */
    assert_int_equal(h_del(&env, 0, "lapsed:live", 11), 1); /* node 0 "restarted" */
    assert_int_equal(h_extend(&env, attached, 0, REDLOCK_EXTEND_RETAKE, &ext), 0);
    assert_true(h_wait_holding(&env, "lapsed:live", 11, "tok-live", 8, 3, 5000));
    assert_int_equal(h_release(&env, attached, &rel), 0);
    assert_int_equal(rel.votes_yes, 3);
    redlock_lock_free(attached);
    redlock_lock_free(held);
    h_env_stop(&env);
}

typedef struct lost_seen {
    int calls;
    int reason;
} lost_seen;

static void on_lost(redlock_lock *lock, int reason, void *data)
{
    (void)lock;
    lost_seen *seen = data;
    seen->calls++;
    seen->reason = reason;
}

/* Auto-extension (with RETAKE) finds another value on every node and reports the lock lost
 * with REDLOCK_ELOST: from then on no retake may run through the handle, by hand or by a new
 * auto-extension; a plain extend still may (it can only win where the token still stands). */
static void retake_refused_after_auto_extension_lost(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, NULL);
    redlock_client *c = patient_client(&env);
    redlock_auto_opts ao;
    redlock_auto_opts_init(&ao);
    ao.extend_at = 0.1; /* the first extension 1 s after the acquire; the deadline 10 s */
    ao.extend_flags = REDLOCK_EXTEND_RETAKE;
    lost_seen seen = {0, 0};
    redlock_lock_opts lo;
    lock_opts(&lo, "tok-auto");
    lo.auto_extend = &ao;
    lo.lost_cb = on_lost;
    lo.lost_data = &seen;
    h_record rec, ext, rel;
    assert_int_equal(h_acquire(&env, c, "lapsed:auto", 10000, &lo, &rec), 0);
    assert_true(h_wait_holding(&env, "lapsed:auto", 11, "tok-auto", 8, 3, 5000));
    for (unsigned i = 0; i < 3; i++)
        h_set(&env, i, "lapsed:auto", 11, "foreign");
    assert_true(h_run_until(&env.loop, &seen.calls, 1, 30000));
    assert_int_equal(seen.reason, REDLOCK_ELOST);

    memset(&ext, 0, sizeof(ext));
    assert_int_equal(redlock_extend(rec.lock, 0, REDLOCK_EXTEND_RETAKE, h_record_cb, &ext),
                     REDLOCK_EINVAL);
    assert_non_null(strstr(redlock_client_last_error(c), "REDLOCK_ELOST"));
    assert_int_equal(redlock_auto_extend(rec.lock, &ao, on_lost, &seen), REDLOCK_EINVAL);
    /* A plain extend is started (or refused only because the validity ran out meanwhile). */
    int rc = redlock_extend(rec.lock, 0, 0, h_record_cb, &ext);
    if (rc == 0) {
        assert_true(h_run_until(&env.loop, &ext.calls, 1, 30000));
        assert_int_equal(ext.status, REDLOCK_ELOST);
    } else {
        assert_int_equal(rc, REDLOCK_EEXPIRED);
    }
    assert_int_equal(h_count_holding(&env, "lapsed:auto", 11, "foreign", 7), 3);
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(h_pttl(&env, i, "lapsed:auto", 11), -1); /* untouched */
    assert_int_equal(h_release(&env, rec.lock, &rel), REDLOCK_ELOST);
    assert_int_equal(seen.calls, 1);
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        H_TEST(release_after_ttl_is_lost),
        H_TEST(release_after_majority_restarted_is_lost),
        H_TEST(release_after_deadline_is_lost_even_with_the_keys),
        H_TEST(release_after_extend_found_it_lost_is_lost),
        H_TEST(release_mixed_votes),
        H_TEST(release_even_node_count),
        H_TEST(sync_release_after_ttl_is_lost),
        H_TEST(attached_retake_after_another_holder_is_refused),
        H_TEST(sync_attached_retake_is_refused),
        H_TEST(attached_retake_after_a_plain_extend_won),
        H_TEST(retake_refused_after_auto_extension_lost),
    };
    return cmocka_run_group_tests_name("lapsed", tests, NULL, NULL);
}
