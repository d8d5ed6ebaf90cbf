/* SPDX-License-Identifier: MIT */
/* test_notify.c - waiting without polling: a waiter (an acquire with wait_ms) wakes when the
 * holder releases, not when its retry delay runs out.
 *
 * Every waiter here has a retry delay of 60 s without jitter, and its first attempt has been
 * lost before the release: so if it gets the lock within the test's bound (H_WAIT_MS, 10 s),
 * something other than its retry timer woke it - the notification. The control (no_notify) shows
 * the same waiter asleep for as long as the test looks: timers are never early, so that check
 * cannot depend on the machine's speed either. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#define N 5
#define SLEEP_MS 60000 /* a waiter's retry delay: far longer than any bound of the test */

/* A client on the env's servers whose waiters sleep SLEEP_MS between attempts. */
static redlock_client *sleepy_client(h_env *env, bool no_notify)
{
    redlock_options opts;
    h_test_options(&opts);
    opts.retry_delay_ms = SLEEP_MS;
    opts.retry_jitter_ms = 0;
    opts.no_notify = no_notify;
    return h_own_client(env, &opts);
}

/* A sleepy waiter's place in a queue lasts 10 s after each attempt (ops.c, place_ttl_ms: its
 * retry delay is longer than that cap). A grant sets the key for the whole ttl only for a ttl
 * within what is left of the place. */
#define PLACE_MS 10000
#define GRANT_TTL_MS 5000

/* Start a waiting acquire of key on c for ttl_ms. */
static void start_waiter_for(redlock_client *c, const char *key, uint64_t ttl_ms, h_record *rec)
{
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.wait_ms = 2 * SLEEP_MS;
    assert_int_equal(redlock_acquire(c, key, strlen(key), ttl_ms, &lo, h_record_cb, rec), 0);
}

static void start_waiter(redlock_client *c, const char *key, h_record *rec)
{
    start_waiter_for(c, key, 30000, rec);
}

/* Subscribers to the channel key on server i (PUBSUB NUMSUB). */
static long long numsub(h_env *env, unsigned i, const char *key)
{
    redisReply *r = fixture_command(&env->cluster, i, "PUBSUB NUMSUB %s", key);
    long long n = -1;
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_INTEGER)
        n = r->element[1]->integer;
    if (r != NULL)
        freeReplyObject(r);
    return n;
}

/* Run the loop until every server has want subscribers on key's channel (bounded). */
static void wait_subscribed(h_env *env, const char *key, long long want)
{
    uint64_t t0 = redlock_now_us();
    for (;;) {
        unsigned ok = 0;
        for (unsigned i = 0; i < N; i++)
            ok += numsub(env, i, key) == want;
        if (ok == N)
            return;
        assert_true(h_since_us(t0) < H_WAIT_MS * 1000ull);
        h_run_for(&env->loop, 10);
    }
}

/* 1. A waiter whose attempt lost wakes on the holder's release and takes the lock, on its second
 * attempt, long before its 60 s retry delay; once it has it, its subscription is gone. */
static void waiter_wakes_on_release(void **state)
{
    (void)state;
    h_env env;
    h_record held;
    h_start_holding(&env, N, "notify:one", 30000, &held);

    redlock_client *w = sleepy_client(&env, false);
    h_record rec = {0};
    start_waiter(w, "notify:one", &rec);
    wait_subscribed(&env, "notify:one", 1);
    h_wait_busy_rounds(&env, w, 1);
    assert_int_equal(rec.calls, 0);

    h_release_ok(&env, held.lock, NULL);
    assert_true(h_run_until(&env.loop, &rec.calls, 1, H_WAIT_MS));
    if (rec.status != 0)
        h_dump_record("the waiter", &rec);
    assert_int_equal(rec.status, 0);
    assert_int_equal(rec.attempts, 2);
    wait_subscribed(&env, "notify:one", 0); /* no waiter left: unsubscribed */
    h_release_ok(&env, rec.lock, NULL);
    h_close_client(&env, w);
    h_env_stop(&env);
}

/* 1b. The same on the longest key (REDLOCK_RESOURCE_MAX bytes): the subscriber's connection lets a
 * channel as long as the keys it subscribed to through (its replies are bounded by what it asked
 * for), so the confirmation and the release's message on it come in, and the waiter wakes. */
static void waiter_on_a_long_key_wakes(void **state)
{
    (void)state;
    size_t len = REDLOCK_RESOURCE_MAX;
    char *key = malloc(len + 1);
    assert_non_null(key);
    memset(key, 'k', len);
    key[len] = '\0';
    h_env env;
    h_record held;
    h_start_holding(&env, N, key, 30000, &held);
    redlock_client *w = sleepy_client(&env, false);
    h_record rec = {0};
    start_waiter(w, key, &rec);
    wait_subscribed(&env, key, 1);
    h_wait_busy_rounds(&env, w, 1);
    h_release_ok(&env, held.lock, NULL);
    assert_true(h_run_until(&env.loop, &rec.calls, 1, H_WAIT_MS));
    assert_int_equal(rec.status, 0);
    assert_int_equal(rec.attempts, 2);
    h_release_ok(&env, rec.lock, NULL);
    h_close_client(&env, w);
    h_env_stop(&env);
    free(key);
}

/* 2. The control: the same waiter with no_notify subscribes to nothing and sleeps through the
 * release (3 s watched, of its 60 s delay); canceled, it leaves nothing held. */
static void no_notify_polls(void **state)
{
    (void)state;
    h_env env;
    h_record held;
    h_start_holding(&env, N, "notify:off", 30000, &held);

    redlock_client *w = sleepy_client(&env, true);
    h_record rec = {0};
    start_waiter(w, "notify:off", &rec);
    h_wait_busy_rounds(&env, w, 1);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(numsub(&env, i, "notify:off"), 0);
    h_release_ok(&env, held.lock, NULL);
    h_run_for(&env.loop, 3000);
    assert_int_equal(rec.calls, 0);
    assert_int_equal(redlock_cancel(w, &rec), 0);
    assert_true(h_run_until(&env.loop, &rec.calls, 1, H_WAIT_MS));
    assert_int_equal(rec.status, REDLOCK_ECANCELED);
    h_drain(&env, w);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(h_dbsize(&env, i), 0);
    h_close_client(&env, w);
    h_env_stop(&env);
}

/* 3. Turns among one client's waiters: a release wakes the one that has waited longest. Three
 * waiters of one client, started in order, get the lock in that order, one release each. */
static void longest_waiting_first(void **state)
{
    (void)state;
    h_env env;
    h_record held;
    h_start_holding(&env, N, "notify:turns", 30000, &held);

    redlock_client *w = sleepy_client(&env, false);
    h_record rec[3];
    memset(rec, 0, sizeof(rec));
    for (int i = 0; i < 3; i++) {
        start_waiter(w, "notify:turns", &rec[i]);
        h_run_for(&env.loop, 50); /* they start, and lose, in this order */
    }
    wait_subscribed(&env, "notify:turns", 1); /* one subscription for the client */
    h_wait_busy_rounds(&env, w, 3);

    redlock_lock *current = held.lock;
    for (int turn = 0; turn < 3; turn++) {
        h_release_ok(&env, current, NULL);
        assert_true(h_run_until(&env.loop, &rec[turn].calls, 1, H_WAIT_MS));
        assert_int_equal(rec[turn].status, 0);
        for (int later = turn + 1; later < 3; later++)
            assert_int_equal(rec[later].calls, 0);
        current = rec[turn].lock;
    }
    h_release_ok(&env, current, NULL);
    h_close_client(&env, w);
    h_env_stop(&env);
}

/* 4. A client's own lost attempts do not wake it. Every node holds the key for someone else (set
 * directly, no ttl), so the waiter's first attempt gets no yes and sleeps. Then the foreign key
 * goes from nodes 3 and 4 (a plain DEL: no message) and a message from elsewhere wakes the
 * waiter: its second attempt wins nodes 3 and 4, loses the round, and releases its keys there,
 * which publishes with its own token. That message must not wake it again: a client that woke
 * on it would retry at once, lose the same way, and spin. Two rounds in 2 s, no more. */
static void own_releases_do_not_wake(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    for (unsigned i = 0; i < N; i++)
        h_set(&env, i, "notify:self", 11, "someone-else");
    redlock_client *w = sleepy_client(&env, false);
    h_record rec = {0};
    start_waiter(w, "notify:self", &rec);
    wait_subscribed(&env, "notify:self", 1);
    h_wait_busy_rounds(&env, w, 1);
    h_del(&env, 3, "notify:self", 11);
    h_del(&env, 4, "notify:self", 11);
    redisReply *r = fixture_command(&env.cluster, 0, "PUBLISH notify:self elsewhere");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);
    h_wait_busy_rounds(&env, w, 2);
    h_run_for(&env.loop, 2000);
    redlock_stats st;
    redlock_stats_init(&st);
    assert_int_equal(redlock_client_stats(w, &st), 0);
    assert_int_equal(st.rounds_busy + st.rounds_broken, 2);
    assert_int_equal(rec.calls, 0);
    /* Its keys on nodes 3 and 4 were released, as after any lost attempt. */
    h_drain(&env, w);
    assert_int_equal(h_pttl(&env, 3, "notify:self", 11), -2);
    assert_int_equal(h_pttl(&env, 4, "notify:self", 11), -2);
    assert_int_equal(redlock_cancel(w, &rec), 0);
    assert_true(h_run_until(&env.loop, &rec.calls, 1, H_WAIT_MS));
    h_close_client(&env, w);
    h_env_stop(&env);
}

/* 4b. The release of another client's lost attempt wakes nobody either: it freed nothing that
 * was anybody's turn. The waiter is queued behind a foreign key on every node; the key goes from
 * nodes 3 and 4 (a plain DEL: no message); a plain acquire of another client takes those two,
 * loses the round, and releases them. The waiter must sleep on: one round in 2 s. (Before the
 * rule, that release published, and the waiter woke to lose again.) */
static void lost_attempts_wake_nobody(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    for (unsigned i = 0; i < N; i++)
        h_set(&env, i, "notify:lost", 11, "someone-else");
    redlock_client *w = sleepy_client(&env, false);
    h_record rec = {0};
    start_waiter(w, "notify:lost", &rec);
    wait_subscribed(&env, "notify:lost", 1);
    h_wait_busy_rounds(&env, w, 1);
    h_del(&env, 3, "notify:lost", 11);
    h_del(&env, 4, "notify:lost", 11);
    redlock_client *other = h_own_client(&env, NULL);
    h_record lost;
    assert_int_equal(h_acquire(&env, other, "notify:lost", 30000, NULL, &lost), REDLOCK_EBUSY);
    h_drain(&env, other); /* its SETs on nodes 3 and 4 (after the decision, as a rule) ran */
    assert_int_equal(h_pttl(&env, 3, "notify:lost", 11), -2); /* released */
    h_run_for(&env.loop, 2000);
    redlock_stats st;
    redlock_stats_init(&st);
    assert_int_equal(redlock_client_stats(w, &st), 0);
    assert_int_equal(st.rounds_busy + st.rounds_broken, 1);
    assert_int_equal(rec.calls, 0);
    assert_int_equal(redlock_cancel(w, &rec), 0);
    assert_true(h_run_until(&env.loop, &rec.calls, 1, H_WAIT_MS));
    h_close_client(&env, other);
    h_close_client(&env, w);
    h_env_stop(&env);
}

/* The client's counters of lost acquire rounds (busy + broken). */
static uint64_t lost_rounds(redlock_client *c)
{
    redlock_stats st;
    redlock_stats_init(&st);
    assert_int_equal(redlock_client_stats(c, &st), 0);
    return st.rounds_busy + st.rounds_broken;
}

/* 5. Fair turns across clients: three waiters of three clients, started in order, form the
 * resource's queue on every node. Each release of a lock taken through the queue (with a wait)
 * names the queue's head, so only that waiter's client retries (the other clients' waiters stay
 * asleep: no attempt of theirs follows), and the lock goes to the waiters in the order they began
 * to wait. */
static void turns_across_clients_follow_the_queue(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *holder = h_client(&env, NULL);
    redlock_lock_opts wait;
    redlock_lock_opts_init(&wait);
    wait.wait_ms = 10000;
    h_record held;
    assert_int_equal(h_acquire(&env, holder, "notify:queue", 30000, &wait, &held), 0);
    redlock_client *w[3];
    h_record rec[3];
    memset(rec, 0, sizeof(rec));
    for (int i = 0; i < 3; i++) {
        w[i] = sleepy_client(&env, false);
        start_waiter(w[i], "notify:queue", &rec[i]);
        h_wait_busy_rounds(&env, w[i], 1); /* queued on every node before the next one starts */
        h_drain(&env, w[i]);
    }
    wait_subscribed(&env, "notify:queue", 3);
    redisReply *r = fixture_command(&env.cluster, 0, "ZCARD notify:queue:queue");
    assert_non_null(r);
    assert_int_equal(r->integer, 3);
    freeReplyObject(r);

    redlock_lock *current = held.lock;
    for (int turn = 0; turn < 3; turn++) {
        uint64_t before[3];
        for (int i = 0; i < 3; i++)
            before[i] = lost_rounds(w[i]);
        h_release_ok(&env, current, NULL);
        assert_true(h_run_until(&env.loop, &rec[turn].calls, 1, H_WAIT_MS));
        if (rec[turn].status != 0)
            h_dump_record("the head of the queue", &rec[turn]);
        assert_int_equal(rec[turn].status, 0);
        h_run_for(&env.loop, 200); /* room for a wrong wake-up to show */
        for (int later = turn + 1; later < 3; later++) {
            assert_int_equal(rec[later].calls, 0);
            assert_int_equal(lost_rounds(w[later]), before[later]);
        }
        current = rec[turn].lock;
    }
    h_release_ok(&env, current, NULL);
    for (unsigned i = 0; i < N; i++) /* the queue is empty, and gone */
        assert_int_equal(h_dbsize(&env, i), 0);
    for (int i = 0; i < 3; i++)
        h_close_client(&env, w[i]);
    h_env_stop(&env);
}

/* 6. A waiter that gives up (its wait ran out) leaves the queue: the next one is the head, and
 * the next release wakes it at once. Were its place kept, every release would name a waiter that
 * no longer exists, and the next one would sleep out its 60 s retry delay. */
static void waiter_that_gives_up_leaves_the_queue(void **state)
{
    (void)state;
    h_env env;
    h_record held;
    h_start_holding(&env, N, "notify:leave", 30000, &held);
    redlock_client *quitter = sleepy_client(&env, false);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.wait_ms = 500;
    h_record gave_up = {0};
    assert_int_equal(
        redlock_acquire(quitter, "notify:leave", 12, 30000, &lo, h_record_cb, &gave_up), 0);
    h_wait_busy_rounds(&env, quitter, 1);
    h_drain(&env, quitter);
    redlock_client *w = sleepy_client(&env, false);
    h_record rec = {0};
    start_waiter(w, "notify:leave", &rec);
    h_wait_busy_rounds(&env, w, 1);
    assert_true(h_run_until(&env.loop, &gave_up.calls, 1, H_WAIT_MS));
    assert_int_equal(gave_up.status, REDLOCK_EBUSY);
    h_drain(&env, quitter); /* its leaving has reached every node */
    h_release_ok(&env, held.lock, NULL);
    assert_true(h_run_until(&env.loop, &rec.calls, 1, H_WAIT_MS));
    assert_int_equal(rec.status, 0);
    h_release_ok(&env, rec.lock, NULL);
    h_close_client(&env, quitter);
    h_close_client(&env, w);
    h_env_stop(&env);
}

/* Scripts server i has run (EVALSHA and EVAL calls, INFO commandstats). */
static long long script_calls(h_env *env, unsigned i)
{
    redisReply *r = fixture_command(&env->cluster, i, "INFO commandstats");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    long long n = 0;
    const char *names[] = {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="};
    for (int k = 0; k < 2; k++) {
        const char *at = strstr(r->str, names[k]);
        if (at != NULL)
            n += atoll(at + strlen(names[k]));
    }
    freeReplyObject(r);
    return n;
}

/* Run the loop until every server has want channels matching pattern (bounded). */
static void wait_channels(h_env *env, const char *pattern, size_t want)
{
    uint64_t t0 = redlock_now_us();
    for (;;) {
        unsigned ok = 0;
        for (unsigned i = 0; i < N; i++) {
            redisReply *r = fixture_command(&env->cluster, i, "PUBSUB CHANNELS %s", pattern);
            assert_non_null(r);
            ok += r->type == REDIS_REPLY_ARRAY && r->elements == want;
            freeReplyObject(r);
        }
        if (ok == N)
            return;
        assert_true(h_since_us(t0) < H_WAIT_MS * 1000ull);
        h_run_for(&env->loop, 10);
    }
}

/* A holder of key that took it through the queue (an acquire with a wait), so its release runs
 * the queue's script; and a sleepy waiter of another client, queued on every node behind it and
 * listening on its own channel. */
static redlock_client *queued_pair(h_env *env, const char *key, uint64_t ttl_ms, h_record *held,
                                   h_record *rec)
{
    h_env_start(env, N, NULL);
    redlock_client *holder = h_client(env, NULL);
    redlock_lock_opts wait;
    redlock_lock_opts_init(&wait);
    wait.wait_ms = 10000;
    assert_int_equal(h_acquire(env, holder, key, 30000, &wait, held), 0);
    char pattern[64];
    snprintf(pattern, sizeof(pattern), "%s:queue:*", key);
    wait_channels(env, pattern, 0); /* the holder no longer listens on its own channel */
    redlock_client *w = sleepy_client(env, false);
    start_waiter_for(w, key, ttl_ms, rec);
    h_wait_busy_rounds(env, w, 1);
    h_drain(env, w);
    wait_channels(env, pattern, 1);
    return w;
}

/* 7. Handoff by grant: the holder's release sets the key for the queue's head on every node and
 * tells it so, and the head has the lock without a round of its own - each server ran one script
 * after the waiter's lost attempt, the release's. The grant counts as the yes of that attempt,
 * so the lock's validity is measured from when the attempt was sent, a second before the
 * release: never from when the grant was heard. */
static void release_grants_the_head_without_a_round(void **state)
{
    (void)state;
    h_env env;
    h_record held, rec = {0};
    redlock_client *w = queued_pair(&env, "notify:grant", GRANT_TTL_MS, &held, &rec);
    uint64_t attempt_sent_before = redlock_now_us();
    long long calls[N];
    for (unsigned i = 0; i < N; i++)
        calls[i] = script_calls(&env, i);
    h_run_for(&env.loop, 1000);
    h_release_ok(&env, held.lock, NULL);
    assert_true(h_run_until(&env.loop, &rec.calls, 1, H_WAIT_MS));
    if (rec.status != 0)
        h_dump_record("the head", &rec);
    assert_int_equal(rec.status, 0);
    assert_int_equal(rec.attempts, 1);
    assert_true(rec.votes_yes >= N / 2 + 1);
    uint64_t since_attempt_ms = (rec.at_us - attempt_sent_before) / 1000;
    uint64_t validity = redlock_lock_validity_ms(rec.lock);
    if (validity + since_attempt_ms > GRANT_TTL_MS)
        fail_msg("validity %llu ms, %llu ms after the attempt was sent, of a %d ms ttl",
                 (unsigned long long)validity, (unsigned long long)since_attempt_ms, GRANT_TTL_MS);
    size_t token_len = 0;
    const char *token = redlock_lock_token(rec.lock, &token_len);
    assert_true(h_wait_holding(&env, "notify:grant", 12, token, token_len, N, H_WAIT_MS));
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(script_calls(&env, i) - calls[i], 1);
    h_release_ok(&env, rec.lock, NULL);
    for (unsigned i = 0; i < N; i++) /* the queue is empty, and gone */
        assert_int_equal(h_dbsize(&env, i), 0);
    h_close_client(&env, w);
    h_env_stop(&env);
}

/* 7b. A grant cut at the head's place deadline (its ttl, 30 s, is longer than what is left of
 * its 10 s place) is not a lock yet: the head claims the keys with a round of its own at once,
 * which renews them for its whole ttl, and its validity is that round's. */
static void grant_cut_at_the_place_is_claimed(void **state)
{
    (void)state;
    enum { TTL_MS = 30000 };
    h_env env;
    h_record held, rec = {0};
    redlock_client *w = queued_pair(&env, "notify:cut", TTL_MS, &held, &rec);
    h_release_ok(&env, held.lock, NULL);
    uint64_t released = redlock_now_us();
    assert_true(h_run_until(&env.loop, &rec.calls, 1, H_WAIT_MS));
    if (rec.status != 0)
        h_dump_record("the head", &rec);
    assert_int_equal(rec.status, 0);
    assert_int_equal(rec.attempts, 2); /* the one the grant answered, and the claim */
    h_assert_validity(&rec, TTL_MS, redlock_lock_validity_ms(rec.lock));
    size_t token_len = 0;
    const char *token = redlock_lock_token(rec.lock, &token_len);
    assert_true(h_wait_holding(&env, "notify:cut", 10, token, token_len, N, H_WAIT_MS));
    for (unsigned i = 0; i < N; i++) {
        long long pttl = h_pttl(&env, i, "notify:cut", 10);
        uint64_t since_ms = h_since_us(released) / 1000;
        if (pttl <= PLACE_MS || (uint64_t)pttl + since_ms < TTL_MS / 2)
            fail_msg("server %u: the key holds %lld ms more, %llu ms after the release", i, pttl,
                     (unsigned long long)since_ms);
    }
    h_release_ok(&env, rec.lock, NULL);
    h_close_client(&env, w);
    h_env_stop(&env);
}

/* 8. Grants from fewer nodes than a quorum are no lock. An earlier waiter that nobody listens for
 * (as if its client had vanished) heads the queue on nodes 0..2, so the release grants the key to
 * the waiter on nodes 3 and 4 only. The waiter must not report a lock: its round (run after the
 * grants' short grace) loses on nodes 0..2, and it releases what it was granted - nothing stays
 * held for it anywhere. */
static void grants_from_a_minority_are_no_lock(void **state)
{
    (void)state;
    h_env env;
    h_record held, rec = {0};
    redlock_client *w = queued_pair(&env, "notify:minority", GRANT_TTL_MS, &held, &rec);
    for (unsigned i = 0; i < 3; i++) {
        redisReply *r = fixture_command(&env.cluster, i, "ZADD notify:minority:queue 1 gone");
        assert_non_null(r);
        freeReplyObject(r);
        r = fixture_command(&env.cluster, i, "HSET notify:minority:queue-due gone 99999999999999");
        assert_non_null(r);
        freeReplyObject(r);
    }
    h_release_ok(&env, held.lock, NULL);
    h_run_for(&env.loop, 1000);
    assert_int_equal(rec.calls, 0);
    /* No node holds the key for the waiter, nor for anyone. */
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(h_pttl(&env, i, "notify:minority", 15), -2);
    assert_int_equal(redlock_cancel(w, &rec), 0);
    assert_true(h_run_until(&env.loop, &rec.calls, 1, H_WAIT_MS));
    assert_int_equal(rec.status, REDLOCK_ECANCELED);
    h_close_client(&env, w);
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        H_TEST(waiter_wakes_on_release),
        H_TEST(waiter_on_a_long_key_wakes),
        H_TEST(no_notify_polls),
        H_TEST(longest_waiting_first),
        H_TEST(own_releases_do_not_wake),
        H_TEST(lost_attempts_wake_nobody),
        H_TEST(turns_across_clients_follow_the_queue),
        H_TEST(waiter_that_gives_up_leaves_the_queue),
        H_TEST(release_grants_the_head_without_a_round),
        H_TEST(grant_cut_at_the_place_is_claimed),
        H_TEST(grants_from_a_minority_are_no_lock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
