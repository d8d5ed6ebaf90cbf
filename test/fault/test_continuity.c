/* SPDX-License-Identifier: MIT */
/* test_continuity.c - a hold is reported continuous only when a quorum of the nodes that kept its
 * token can be shown to have held it at every moment (issue 39, docs/safety.md: "A hold is
 * continuous while a quorum kept it"), on three real redis-servers:
 *   - a retake's yes that comes late, from a node whose key expired while it was stopped, is a
 *     key set anew, not a renewal: it vouches for no moment before it was set;
 *   - a key a retake re-created on a node back empty vouches for nothing until the other nodes
 *     were heard after it: another restart before that is a loss, whatever the next retake wins;
 *   - and the other side, so that a library too strict fails as well: with every key renewed by
 *     an extend, one node back empty keeps the lock, and so do rolling restarts, one node at a
 *     time, with the retake that restores each and an extend heard after it in between.
 * Every check is on what the library reports (the extend's and the release's status, the lost
 * callback, redlock_lock_is_held), never on how long anything took. The ordering is made by the
 * test, not by the machine's speed: a node stopped (SIGSTOP) owes its answer until it is
 * continued, and a node restarted while the client's loop does not run is unheard until the
 * loop runs. */
#include "harness.h"

#include <stdio.h>
#include <string.h>

#define N 3
#define A 0
#define B 1
#define C 2
#define TTL_MS 30000 /* every lock's ttl but the short one: its planned extension is 10 s away */
/* The first ttl of the lock of late_retake_yes_is_no_confirmation: node C is stopped longer than
 * this, so its key expires while it is stopped; long enough for the acquire, a drain and the
 * extend before it runs out on A and B (checked). */
#define SHORT_TTL_MS 2000
/* Node C's deadline there: it is stopped for about SHORT_TTL_MS with the extend in flight, and its
 * late answer is the subject, so it must not time out first. */
#define C_TIMEOUT_MS 20000
#define RECONNECT_MAX_MS 1000

typedef struct lost_record {
    int calls;
    int reason;
    bool held_in_cb;
} lost_record;

static void on_lost(redlock_lock *lock, int reason, void *data)
{
    lost_record *l = data;
    l->calls++;
    l->reason = reason;
    l->held_in_cb = redlock_lock_is_held(lock, redlock_now_us());
}

static redlock_client *client_on(h_env *env, const char *const *urls)
{
    redlock_options o;
    h_test_options(&o);
    o.reconnect_max_ms = RECONNECT_MAX_MS;
    redlock_client *c = NULL;
    if (urls == NULL) {
        c = h_client(env, &o);
    } else {
        char err[256] = "";
        assert_int_equal(h_client_urls(env, urls, N, &o, &c, err, sizeof(err)), 0);
    }
    h_wait_ready(env, c);
    return c;
}

/* Acquire name for ttl_ms (no auto-extension), wait until every node holds it and the client has
 * read every vote, then drain: every node was heard on a request sent after the acquire's last
 * yes, so every key is known to be kept (none is fresh). */
static redlock_lock *hold_kept(h_env *env, redlock_client *c, const char *name, uint64_t ttl_ms)
{
    h_record rec;
    assert_int_equal(h_acquire(env, c, name, ttl_ms, NULL, &rec), 0);
    size_t len;
    const char *token = redlock_lock_token(rec.lock, &len);
    assert_true(h_wait_holding(env, name, strlen(name), token, len, N, H_WAIT_MS));
    h_settle(env, c);
    h_drain(env, c);
    return rec.lock;
}

static void auto_extend(redlock_lock *lock, unsigned flags, lost_record *lost)
{
    redlock_auto_opts ao;
    redlock_auto_opts_init(&ao);
    ao.extend_flags = flags;
    assert_int_equal(redlock_auto_extend(lock, &ao, on_lost, lost), 0);
}

/* Run the loop until the auto-extended lock was reported lost or won extensions auto-extensions
 * (the check a node's return sets off), at most H_WAIT_MS. */
static void wait_lost_or_extended(h_env *env, redlock_lock *lock, const lost_record *lost,
                                  unsigned extensions)
{
    uint64_t t0 = redlock_now_us();
    while (lost->calls == 0 && redlock_lock_extensions(lock) < extensions &&
           h_since_us(t0) < H_WAIT_MS * 1000ull)
        h_run_for(&env->loop, 5);
}

static unsigned holding(h_env *env, const char *name, redlock_lock *lock)
{
    size_t len;
    const char *token = redlock_lock_token(lock, &len);
    return h_count_holding(env, name, strlen(name), token, len);
}

/* 1. A late retake yes is no confirmation. The lock's keys were all kept (SHORT_TTL_MS each). C is
 * stopped; a retake extend to TTL_MS wins on A and B (renewals) while C's request waits in C's
 * socket. B is restarted empty while the loop does not run (the client has not heard it). C's
 * old key expires while C is stopped; continued, C runs the late retake, which sets the key anew.
 * Between C's expiry and that SET only A held the token (B had restarted), so the hold had a gap:
 * C's late yes is a re-created key, vouching for nothing before it, and once the client hears B
 * back empty, fewer than a quorum are known to have kept the token. The loss is reported (the
 * lost callback, ELOST) and the release says ELOST. A library that takes the late yes for a
 * renewal keeps C among the kept nodes and reports the hold continuous (release 0). */
static void late_retake_yes_is_no_confirmation(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    static char buf[N][160];
    const char *urls[N];
    h_urls_with_timeout(&env, 1u << C, C_TIMEOUT_MS, buf, urls);
    redlock_client *c = client_on(&env, urls);
    const char *name = "continuity:late-retake";
    redlock_lock *lock = hold_kept(&env, c, name, SHORT_TTL_MS);
    long long pttl_c = h_pttl(&env, C, name, strlen(name));
    uint64_t read_at = redlock_now_us();
    assert_true(pttl_c > 0);
    assert_int_equal(fixture_pause(&env.cluster, C), 0);

    h_record ext;
    int ext_status = h_extend(&env, lock, TTL_MS, REDLOCK_EXTEND_RETAKE, &ext);
    if (ext_status != 0 || ext.node_vote[A] != REDLOCK_VOTE_YES ||
        ext.node_vote[B] != REDLOCK_VOTE_YES)
        h_dump_record("the retake extend", &ext);
    assert_int_equal(ext_status, 0);
    assert_int_equal(ext.node_vote[A], REDLOCK_VOTE_YES);
    assert_int_equal(ext.node_vote[B], REDLOCK_VOTE_YES);
    /* Renewed there, not re-created: the short ttl had not run out on A and B. */
    assert_true(h_pttl(&env, A, name, strlen(name)) > SHORT_TTL_MS);
    assert_true(h_pttl(&env, B, name, strlen(name)) > SHORT_TTL_MS);
    lost_record lost = {0};
    auto_extend(lock, REDLOCK_EXTEND_RETAKE, &lost);

    assert_int_equal(fixture_restart(&env.cluster, B), 0);
    /* C's old key runs out while it is stopped (the loop does not run meanwhile). */
    uint64_t expired_at = read_at + (uint64_t)pttl_c * 1000 + 100000;
    while (redlock_now_us() < expired_at)
        fixture_sleep_ms((int)((expired_at - redlock_now_us()) / 1000) + 1);
    assert_int_equal(fixture_resume(&env.cluster, C), 0);

    /* C's late answer, B's new server and the check it sets off. */
    wait_lost_or_extended(&env, lock, &lost, 1);
    h_drain(&env, c);
    /* A's key, and C's set anew by the late retake (B's is retaken only if no loss was seen) */
    assert_true(holding(&env, name, lock) >= 2);
    bool held = redlock_lock_is_held(lock, redlock_now_us());
    int lost_calls = lost.calls, lost_reason = lost.reason;
    h_record rel;
    int rel_status = h_release(&env, lock, &rel);
    printf("# lost callbacks %d (reason %d), held %d, release %d (want 1, %d, 0, %d)\n", lost_calls,
           lost_reason, held, rel_status, REDLOCK_ELOST, REDLOCK_ELOST);
    assert_int_equal(lost_calls, 1);
    assert_int_equal(lost_reason, REDLOCK_ELOST);
    assert_false(lost.held_in_cb);
    assert_false(held);
    assert_int_equal(rel_status, REDLOCK_ELOST);
    redlock_lock_free(lock);
    h_env_stop(&env);
}

/* 2. A retake on a fresh node is no proof. C comes back empty and the client hears it (a quorum
 * of kept nodes is left, A and B); a retake extend re-creates C's key (C stopped until A and B
 * renewed theirs and were stopped in turn, so no answer of theirs, not even to the client's probe,
 * comes after C's). Then B is restarted empty, and a retake extend wins on A and C. B's last answer
 * came in the round that re-created C's key: B may have lost the key (its restart) before C's was
 * set, when only A held it. C's key vouches for nothing before it was set, so of the nodes known to
 * have kept the token only A is left: the extend is not continuous (ELOST, or the lock reads as
 * lost), and the release says ELOST. A library that counts C as kept as soon as a retake set its
 * key reports a continuous hold (extend 0, release 0). */
static void retake_on_a_fresh_node_is_no_proof(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = client_on(&env, NULL);
    const char *name = "continuity:fresh";
    redlock_lock *lock = hold_kept(&env, c, name, TTL_MS);

    assert_int_equal(fixture_restart(&env.cluster, C), 0);
    h_drain(&env, c);  /* the client reconnected to C and heard its new run_id */
    h_settle(&env, c); /* and the check (an inspect) is answered */
    assert_true(redlock_lock_is_held(lock, redlock_now_us())); /* A and B kept it */
    h_record ext;
    assert_int_equal(fixture_pause(&env.cluster, C), 0);
    int ext_status = h_extend(&env, lock, 0, REDLOCK_EXTEND_RETAKE, &ext);
    if (ext_status != 0)
        h_dump_record("the retake that restores C", &ext);
    assert_int_equal(ext_status, 0); /* A and B renewed */
    h_settle_node(&env, c, A);
    h_settle_node(&env, c, B);
    assert_int_equal(fixture_pause(&env.cluster, A), 0);
    assert_int_equal(fixture_pause(&env.cluster, B), 0);
    assert_int_equal(fixture_resume(&env.cluster, C), 0);
    h_settle_node(&env, c, C); /* C's key set anew, read; A and B owe the probe */
    assert_int_equal(h_pttl(&env, C, name, strlen(name)) > 0, 1);

    assert_int_equal(fixture_restart(&env.cluster, B), 0);
    assert_int_equal(fixture_resume(&env.cluster, A), 0);
    ext_status = h_extend(&env, lock, 0, REDLOCK_EXTEND_RETAKE, &ext);
    h_drain(&env, c); /* B's new server heard, every answer read */
    bool held = redlock_lock_is_held(lock, redlock_now_us());
    h_record rel;
    int rel_status = h_release(&env, lock, &rel);
    printf("# retake extend %d (A %s, B %s, C %s), held %d, release %d (want extend %d or held 0, "
           "release %d)\n",
           ext_status, redlock_vote_name(ext.node_vote[A]), redlock_vote_name(ext.node_vote[B]),
           redlock_vote_name(ext.node_vote[C]), held, rel_status, REDLOCK_ELOST, REDLOCK_ELOST);
    assert_true(ext_status == REDLOCK_ELOST || !held);
    assert_int_equal(rel_status, REDLOCK_ELOST);
    redlock_lock_free(lock);
    h_env_stop(&env);
}

/* 3. The rule's other side. Every key renewed by an extend (the client read all three renewals),
 * then B back empty: A and C kept the token, a quorum, so the lock goes on - the check (a plain
 * auto-extension) wins, no lost callback, and the release is 0. A library that takes any node
 * back empty for a loss fails here. */
static void one_back_empty_after_an_extend_keeps_the_lock(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = client_on(&env, NULL);
    const char *name = "continuity:one";
    h_record rec;
    assert_int_equal(h_acquire(&env, c, name, TTL_MS, NULL, &rec), 0);
    redlock_lock *lock = rec.lock;
    h_settle(&env, c);
    h_record ext;
    assert_int_equal(h_extend(&env, lock, 0, 0, &ext), 0);
    h_settle(&env, c); /* all three renewals read */
    assert_int_equal(holding(&env, name, lock), 3);
    lost_record lost = {0};
    auto_extend(lock, 0, &lost);

    assert_int_equal(fixture_restart(&env.cluster, B), 0);
    wait_lost_or_extended(&env, lock, &lost, 1);
    h_drain(&env, c);
    printf("# lost callbacks %d, extensions %u (want 0, 1)\n", lost.calls,
           redlock_lock_extensions(lock));
    assert_int_equal(lost.calls, 0);
    assert_int_equal(redlock_lock_extensions(lock), 1);
    assert_true(redlock_lock_is_held(lock, redlock_now_us()));
    assert_int_equal(holding(&env, name, lock), 2); /* a plain extend leaves B empty */
    h_release_ok(&env, lock, NULL);
    h_env_stop(&env);
}

/* 3b. Rolling restarts, each node in turn, twice round: a node back empty (heard), the retake
 * extend that restores its key, then a plain extend, whose renewals on the other two come after
 * the re-created key was read, so it is kept from then on. A quorum kept the token at every
 * moment, and the client was shown it: every extend is 0, the lock stays held, the release is 0,
 * however many nodes restarted in all. */
static void rolling_restarts_with_an_extend_between_keep_the_lock(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = client_on(&env, NULL);
    const char *name = "continuity:rolling";
    redlock_lock *lock = hold_kept(&env, c, name, TTL_MS);
    for (unsigned round = 0; round < 2; round++) {
        for (unsigned i = 0; i < N; i++) {
            assert_int_equal(fixture_restart(&env.cluster, i), 0);
            h_drain(&env, c); /* node i's new run_id heard */
            h_settle(&env, c);
            assert_true(redlock_lock_is_held(lock, redlock_now_us()));
            h_record ext;
            int rc = h_extend(&env, lock, 0, REDLOCK_EXTEND_RETAKE, &ext);
            if (rc != 0)
                h_dump_record("the retake extend", &ext);
            assert_int_equal(rc, 0);
            h_settle(&env, c);
            assert_int_equal(holding(&env, name, lock), 3);
            rc = h_extend(&env, lock, 0, 0, &ext);
            if (rc != 0)
                h_dump_record("the extend after it", &ext);
            assert_int_equal(rc, 0);
            h_settle(&env, c);
            assert_true(redlock_lock_is_held(lock, redlock_now_us()));
        }
    }
    h_release_ok(&env, lock, NULL);
    h_env_stop(&env);
}

/* 4. Fresh keys speak for nothing, even when nothing was lost. C comes back empty (heard), and
 * a retake sets its key anew while A and B, which renewed theirs, are stopped before C's answer
 * is read (so no answer of theirs comes after it). A continues; B stays stopped, silent (a short
 * node timeout). A plain extend then renews on A and C, and B times out: of the kept nodes only A
 * renewed, so the extend is not won (ENOQUORUM) and the lock is still held; the release deletes
 * on A and C and cannot tell either (ENOQUORUM). A library that takes any quorum of yes votes for
 * continuity wins the extend and releases with 0. */
static void fresh_keys_prove_nothing(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    static char buf[N][160];
    const char *urls[N];
    h_urls_with_timeout(&env, 1u << B, 400, buf, urls);
    redlock_client *c = client_on(&env, urls);
    const char *name = "continuity:silent";
    redlock_lock *lock = hold_kept(&env, c, name, TTL_MS);

    assert_int_equal(fixture_restart(&env.cluster, C), 0);
    h_drain(&env, c);  /* the client reconnected to C and heard its new run_id */
    h_settle(&env, c); /* and the check (an inspect) is answered */
    h_record ext;
    assert_int_equal(fixture_pause(&env.cluster, C), 0);
    assert_int_equal(h_extend(&env, lock, 0, REDLOCK_EXTEND_RETAKE, &ext), 0);
    h_settle_node(&env, c, A);
    h_settle_node(&env, c, B);
    assert_int_equal(fixture_pause(&env.cluster, A), 0);
    assert_int_equal(fixture_pause(&env.cluster, B), 0);
    assert_int_equal(fixture_resume(&env.cluster, C), 0);
    h_settle_node(&env, c, C); /* C's key set anew, read */
    assert_int_equal(fixture_resume(&env.cluster, A), 0);

    int ext_status = h_extend(&env, lock, 0, 0, &ext);
    bool held = redlock_lock_is_held(lock, redlock_now_us());
    h_record rel;
    int rel_status = h_release(&env, lock, &rel);
    printf("# plain extend %d (A %s, B %s, C %s), held %d, release %d (want %d, 1, %d)\n",
           ext_status, redlock_vote_name(ext.node_vote[A]), redlock_vote_name(ext.node_vote[B]),
           redlock_vote_name(ext.node_vote[C]), held, rel_status, REDLOCK_ENOQUORUM,
           REDLOCK_ENOQUORUM);
    assert_int_equal(ext.node_vote[A], REDLOCK_VOTE_YES);
    assert_int_equal(ext.node_vote[C], REDLOCK_VOTE_YES);
    assert_int_equal(ext_status, REDLOCK_ENOQUORUM);
    assert_true(held);
    assert_int_equal(rel_status, REDLOCK_ENOQUORUM);
    assert_int_equal(rel.votes_yes, 2);
    assert_int_equal(fixture_resume(&env.cluster, B), 0);
    redlock_lock_free(lock);
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        H_TEST(late_retake_yes_is_no_confirmation),
        H_TEST(retake_on_a_fresh_node_is_no_proof),
        H_TEST(one_back_empty_after_an_extend_keeps_the_lock),
        H_TEST(rolling_restarts_with_an_extend_between_keep_the_lock),
        H_TEST(fresh_keys_prove_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
