/* SPDX-License-Identifier: MIT */
/* test_grants.c - the handoff by grant keeps every promise a won round keeps (docs/algorithm.md,
 * "Handoff by grant"), against deployments that try to break it:
 *   - one server listed twice (once through a proxy): its grant counts once;
 *   - a waiter whose connections went half-open (a blackhole): the key it was granted holds no
 *     longer than its place deadline, so the next waiter is served in about that time;
 *   - a holder that crashed: the waiter wakes at its key's expiry, told by the nodes how long the
 *     key has left, not after its retry delay;
 *   - fenced waiters and waiters of sets: they take turns in the queue and are handed the lock by
 *     grants, so turns cost about one attempt and one fence each, and no lost attempt wakes
 *     anyone (the servers' PUBLISH counts).
 * Every waiter that must not be woken by its timer sleeps SLEEP_MS between attempts, far longer
 * than any bound here: what serves it within the bound is a grant, a wake-up, or the nodes' word
 * on how long to wait. */
#include "harness.h"
#include "proxy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#define SLEEP_MS 60000
#define MAX_PROXIES 3

/* File-level, so that the teardown can stop what a failed check left running. */
static proxy *proxies[MAX_PROXIES];

static int teardown(void **state)
{
    for (unsigned i = 0; i < MAX_PROXIES; i++) {
        proxy_stop(proxies[i]);
        proxies[i] = NULL;
    }
    return h_teardown(state);
}

#define G_TEST(f) cmocka_unit_test_teardown(f, teardown)

static void stop_proxies(void)
{
    for (unsigned i = 0; i < MAX_PROXIES; i++) {
        proxy_stop(proxies[i]);
        proxies[i] = NULL;
    }
}

/* Client options of a waiter that sleeps SLEEP_MS between attempts. */
static void sleepy_options(redlock_options *o)
{
    h_test_options(o);
    o->retry_delay_ms = SLEEP_MS;
    o->retry_jitter_ms = 0;
}

/* Start a waiting acquire of key for ttl_ms on c. */
static void start_waiter(redlock_client *c, const char *key, uint64_t ttl_ms, h_record *rec)
{
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.wait_ms = 2 * SLEEP_MS;
    assert_int_equal(redlock_acquire(c, key, strlen(key), ttl_ms, &lo, h_record_cb, rec), 0);
}

/* The number of subscribers, on server i, to the one channel matching pattern (0 when none). */
static long long channel_subscribers(h_env *env, unsigned i, const char *pattern)
{
    redisReply *r = fixture_command(&env->cluster, i, "PUBSUB CHANNELS %s", pattern);
    assert_non_null(r);
    long long n = 0;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 1) {
        redisReply *s = fixture_command(&env->cluster, i, "PUBSUB NUMSUB %s", r->element[0]->str);
        assert_non_null(s);
        if (s->type == REDIS_REPLY_ARRAY && s->elements == 2)
            n = s->element[1]->integer;
        freeReplyObject(s);
    }
    freeReplyObject(r);
    return n;
}

/* Run the loop until server i has want subscribers on the one channel matching pattern. */
static void wait_channel_subscribers(h_env *env, unsigned i, const char *pattern, long long want)
{
    uint64_t t0 = redlock_now_us();
    while (channel_subscribers(env, i, pattern) != want) {
        if (h_since_us(t0) > H_WAIT_MS * 1000ull)
            fail_msg("server %u: %lld subscribers on %s, not %lld", i,
                     channel_subscribers(env, i, pattern), pattern, want);
        h_run_for(&env->loop, 10);
    }
}

/* PUBLISH calls server i has run (commandstats: scripts' calls included). */
static long long publish_calls(h_env *env, unsigned i)
{
    redisReply *r = fixture_command(&env->cluster, i, "INFO commandstats");
    assert_non_null(r);
    const char *at = strstr(r->str, "cmdstat_publish:calls=");
    long long n = at != NULL ? atoll(at + strlen("cmdstat_publish:calls=")) : 0;
    freeReplyObject(r);
    return n;
}

/* 1. A server listed twice - A, and A again through a proxy - counts once through a grant, as it
 * does in a round (the command connections refuse the second: the same run_id). The waiter's
 * nodes are [A, A', B]; the holder's [A, B, C], where B holds a foreign key, so the holder's
 * release frees the key on A (and C) only. A's grant is heard on both of the waiter's
 * subscribers, A's own and A''s: one node's yes, not two. The waiter must not report a lock
 * while B still holds the foreign key, so while only A holds its token. (Before the rule, it won
 * at once: two grants from one PUBLISH, a quorum of three.) */
static void server_listed_twice_counts_once(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, NULL);
    const char *key = "grants:twice";
    redisReply *r = fixture_command(&env.cluster, 1, "SET %s foreign PX 60000", key);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redlock_client *holder = h_client(&env, NULL);
    redlock_lock_opts wait;
    redlock_lock_opts_init(&wait);
    wait.wait_ms = 10000;
    h_record held;
    assert_int_equal(h_acquire(&env, holder, key, 30000, &wait, &held), 0);
    assert_int_equal(held.votes_yes, 2);

    proxies[0] = proxy_start(fixture_free_port(), "127.0.0.1", env.cluster.servers[0].port);
    assert_non_null(proxies[0]);
    char urls_buf[3][96];
    snprintf(urls_buf[0], sizeof(urls_buf[0]), "redis://127.0.0.1:%d", env.cluster.servers[0].port);
    snprintf(urls_buf[1], sizeof(urls_buf[1]), "redis://127.0.0.1:%d", proxy_port(proxies[0]));
    snprintf(urls_buf[2], sizeof(urls_buf[2]), "redis://127.0.0.1:%d", env.cluster.servers[1].port);
    const char *urls[3] = {urls_buf[0], urls_buf[1], urls_buf[2]};
    redlock_options o;
    sleepy_options(&o);
    redlock_client *w = NULL;
    char err[256] = "";
    assert_int_equal(h_client_urls(&env, urls, 3, &o, &w, err, sizeof(err)), 0);
    h_record rec = {0};
    start_waiter(w, key, 5000, &rec);
    h_wait_busy_rounds(&env, w, 1);
    /* Both of the waiter's subscribers listen on its own channel on A: its own and A''s. */
    wait_channel_subscribers(&env, 0, "grants:twice:queue:*", 2);

    h_release_ok(&env, held.lock, NULL);
    h_run_for(&env.loop, 2000);
    if (rec.calls != 0)
        h_dump_record("the waiter", &rec);
    assert_int_equal(rec.calls, 0);
    /* The window was real: B still held the foreign key all along. */
    assert_true(h_pttl(&env, 1, key, strlen(key)) > 0);
    assert_int_equal(redlock_cancel(w, &rec), 0);
    assert_true(h_run_until(&env.loop, &rec.calls, 1, H_WAIT_MS));
    assert_int_equal(rec.status, REDLOCK_ECANCELED);
    h_close_client(&env, w);
    stop_proxies();
    h_env_stop(&env);
}

/* 2. A waiter whose connections went half-open (its proxies blackhole: the servers still count
 * its subscriber, so PUBSUB NUMSUB says it listens) is granted the key by the holder's release,
 * but only until its place deadline there (its options give it 3.1 s: ops.c, place_ttl_ms), not
 * for its 30 s ttl; the next waiter is then served within about that, not after 30 s. */
static void half_open_waiter_delays_no_longer_than_its_place(void **state)
{
    (void)state;
    enum { PLACE_MS = 2 * (500 + 0 + 1000) + 100, TTL_MS = 30000, W2_RETRY_MS = 1000 };
    h_env env;
    h_env_start(&env, 3, NULL);
    const char *key = "grants:halfopen";
    redlock_client *holder = h_client(&env, NULL);
    redlock_lock_opts wait;
    redlock_lock_opts_init(&wait);
    wait.wait_ms = 10000;
    h_record held;
    assert_int_equal(h_acquire(&env, holder, key, TTL_MS, &wait, &held), 0);

    /* W1, the head, behind proxies; W2 behind it. */
    char urls_buf[3][96];
    const char *urls[3];
    for (unsigned i = 0; i < 3; i++) {
        proxies[i] = proxy_start(fixture_free_port(), "127.0.0.1", env.cluster.servers[i].port);
        assert_non_null(proxies[i]);
        snprintf(urls_buf[i], sizeof(urls_buf[i]), "redis://127.0.0.1:%d", proxy_port(proxies[i]));
        urls[i] = urls_buf[i];
    }
    redlock_options o1;
    h_test_options(&o1);
    o1.node_timeout_ms = 1000;
    o1.retry_delay_ms = 500;
    o1.retry_jitter_ms = 0;
    redlock_client *w1 = NULL;
    char err[256] = "";
    assert_int_equal(h_client_urls(&env, urls, 3, &o1, &w1, err, sizeof(err)), 0);
    h_wait_ready(&env, w1);
    h_record rec1 = {0};
    start_waiter(w1, key, TTL_MS, &rec1);
    h_wait_busy_rounds(&env, w1, 1);
    for (unsigned i = 0; i < 3; i++)
        wait_channel_subscribers(&env, i, "grants:halfopen:queue:*", 1);
    redlock_options o2;
    h_test_options(&o2);
    o2.retry_delay_ms = W2_RETRY_MS;
    o2.retry_jitter_ms = 0;
    redlock_client *w2 = h_own_client(&env, &o2);
    h_record rec2 = {0};
    start_waiter(w2, key, TTL_MS, &rec2);
    h_wait_busy_rounds(&env, w2, 1);

    for (unsigned i = 0; i < 3; i++)
        proxy_set_mode(proxies[i], PROXY_BLACKHOLE);
    h_release_ok(&env, held.lock, NULL);
    uint64_t released = redlock_now_us();
    /* The grant: W1's token, for no longer than its place. */
    unsigned granted = 0;
    for (unsigned i = 0; i < 3; i++) {
        long long pttl = h_pttl(&env, i, key, strlen(key));
        if (pttl > 0) {
            granted++;
            if (pttl > PLACE_MS)
                fail_msg("server %u granted the key for %lld ms, past the waiter's %d ms place", i,
                         pttl, PLACE_MS);
        }
    }
    assert_int_equal(granted, 3);
    assert_true(h_run_until(&env.loop, &rec2.calls, 1, H_WAIT_MS));
    if (rec2.status != 0)
        h_dump_record("W2", &rec2);
    assert_int_equal(rec2.status, 0);
    uint64_t served_ms = (rec2.at_us - released) / 1000;
    if (served_ms > PLACE_MS + W2_RETRY_MS + H_SLACK_MS)
        fail_msg("W2 served %llu ms after the release: past W1's place (%d ms) and its own retry",
                 (unsigned long long)served_ms, PLACE_MS);
    assert_int_equal(rec1.calls, 0);
    for (unsigned i = 0; i < 3; i++)
        proxy_set_mode(proxies[i], PROXY_PASS);
    h_release_ok(&env, rec2.lock, NULL);
    h_close_client(&env, w1); /* whatever W1 has come to by now: canceled, or released */
    h_close_client(&env, w2);
    stop_proxies();
    h_env_stop(&env);
}

/* 3. A holder that crashed (closed without releasing: its keys wait for their ttl) does not
 * leave its waiter asleep for its retry delay: the waiter's lost attempt was told how long the
 * key had left, and it tries again then. */
static void waiter_wakes_when_a_crashed_holders_key_runs_out(void **state)
{
    (void)state;
    enum { HOLD_TTL_MS = 3000 };
    h_env env;
    h_env_start(&env, 3, NULL);
    const char *key = "grants:crash";
    redlock_client *holder = h_own_client(&env, NULL);
    h_record held;
    assert_int_equal(h_acquire(&env, holder, key, HOLD_TTL_MS, NULL, &held), 0);
    uint64_t acquired = redlock_now_us();
    redlock_options o;
    sleepy_options(&o);
    redlock_client *w = h_own_client(&env, &o);
    h_record rec = {0};
    start_waiter(w, key, 5000, &rec);
    h_wait_busy_rounds(&env, w, 1);
    h_close_client_ex(&env, holder, REDLOCK_CLOSE_FAST);
    assert_true(h_run_until(&env.loop, &rec.calls, 1, HOLD_TTL_MS + H_WAIT_MS));
    if (rec.status != 0)
        h_dump_record("the waiter", &rec);
    assert_int_equal(rec.status, 0);
    uint64_t after_ms = (rec.at_us - acquired) / 1000;
    if (after_ms > HOLD_TTL_MS + H_SLACK_MS)
        fail_msg("served %llu ms after the holder's acquire of a %d ms ttl",
                 (unsigned long long)after_ms, HOLD_TTL_MS);
    h_release_ok(&env, rec.lock, NULL);
    h_close_client(&env, w);
    h_env_stop(&env);
}

/* ---- turns: workers that acquire, hold a moment and release, over and over ------------------ */

#define WORKERS 3
#define TURNS 30
#define HOLD_MS 2

typedef struct turns turns;

typedef struct worker {
    turns *t;
    unsigned id;
    redlock_client *c;
    const char *keys[2];
    size_t lens[2];
    unsigned n_keys;
    uv_timer_t hold;
    redlock_lock *lock;
    unsigned done;
    bool stopped;
} worker;

struct turns {
    h_env *env;
    bool fencing;
    unsigned attempts_per_turn; /* the most a turn may cost, on average */
    worker w[WORKERS];
    unsigned turns, attempts, failures;
    uint64_t first_fence, last_fence;
    bool fences_out_of_order;
    int holders[3]; /* per key (sets: a, b, c): holders the test knows of */
    bool overlap;
    int finished; /* workers that stopped */
};

static void worker_acquire(worker *wk);

static void on_released(redlock_lock *lock, int status, const redlock_result *res, void *data)
{
    (void)lock;
    (void)res;
    worker *wk = data;
    if (status != 0)
        wk->t->failures++;
    worker_acquire(wk);
}

static void on_hold_done(uv_timer_t *timer)
{
    worker *wk = timer->data;
    for (unsigned k = 0; k < wk->n_keys; k++)
        wk->t->holders[wk->keys[k][strlen(wk->keys[k]) - 1] - 'a']--;
    redlock_lock *lock = wk->lock;
    wk->lock = NULL;
    assert_int_equal(redlock_release(lock, on_released, wk), 0);
    redlock_lock_free(lock);
}

static void on_acquired(redlock_lock *lock, int status, const redlock_result *res, void *data)
{
    worker *wk = data;
    turns *t = wk->t;
    t->attempts += res->attempts;
    if (status != 0) {
        t->failures++;
        wk->stopped = true;
        t->finished++;
        return;
    }
    t->turns++;
    wk->done++;
    if (t->fencing) {
        if (t->turns == 1)
            t->first_fence = res->fence;
        else if (res->fence <= t->last_fence)
            t->fences_out_of_order = true;
        t->last_fence = res->fence;
    }
    for (unsigned k = 0; k < wk->n_keys; k++) {
        int *h = &t->holders[wk->keys[k][strlen(wk->keys[k]) - 1] - 'a'];
        if (*h != 0)
            t->overlap = true;
        (*h)++;
    }
    wk->lock = lock;
    uv_timer_start(&wk->hold, on_hold_done, HOLD_MS, 0);
}

static void worker_acquire(worker *wk)
{
    turns *t = wk->t;
    if (t->turns >= TURNS) {
        wk->stopped = true;
        t->finished++;
        return;
    }
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.wait_ms = 20000;
    lo.fencing = t->fencing;
    assert_int_equal(redlock_acquire_multi(wk->c, (const void *const *)wk->keys, wk->lens,
                                           wk->n_keys, 5000, &lo, on_acquired, wk),
                     0);
}

/* Run the workers until TURNS turns were taken; check what every turn promised. */
static void run_turns(turns *t)
{
    h_env *env = t->env;
    for (unsigned i = 0; i < WORKERS; i++) {
        worker *wk = &t->w[i];
        wk->t = t;
        wk->id = i;
        redlock_options o;
        h_test_options(&o);
        o.retry_delay_ms = SLEEP_MS / 10; /* 6 s: more than the run takes, if grants work */
        o.retry_jitter_ms = 0;
        wk->c = h_own_client(env, &o);
        uv_timer_init(&env->loop, &wk->hold);
        wk->hold.data = wk;
    }
    long long publishes[3];
    for (unsigned i = 0; i < 3; i++)
        publishes[i] = publish_calls(env, i);
    for (unsigned i = 0; i < WORKERS; i++)
        worker_acquire(&t->w[i]);
    assert_true(h_run_until(&env->loop, &t->finished, WORKERS, 4 * H_WAIT_MS));
    for (unsigned i = 0; i < WORKERS; i++) {
        uv_close((uv_handle_t *)&t->w[i].hold, NULL);
        h_close_client(env, t->w[i].c);
    }
    long long published[3];
    for (unsigned i = 0; i < 3; i++)
        published[i] = publish_calls(env, i) - publishes[i];
    printf("# %u turns: %u attempts, fences %llu..%llu, PUBLISH %lld %lld %lld\n", t->turns,
           t->attempts, (unsigned long long)t->first_fence, (unsigned long long)t->last_fence,
           published[0], published[1], published[2]);
    assert_int_equal(t->failures, 0);
    assert_false(t->overlap);
    assert_true(t->turns >= TURNS);
    for (unsigned i = 0; i < WORKERS; i++)
        assert_true(t->w[i].done >= 1);
    /* Each waiter's attempt loses once, then a grant answers it (a set's waiter may claim the
     * keys a grant did not set with a round of its own). Before the queue took fenced waiters and
     * sets, their lost attempts woke each other into 4 attempts a turn. */
    if (t->attempts > t->attempts_per_turn * t->turns)
        fail_msg("%u attempts for %u turns", t->attempts, t->turns);
    if (t->fencing) {
        assert_false(t->fences_out_of_order);
        /* About one fence a turn: no lost attempt raises the counters. */
        if (t->last_fence - t->first_fence > 2 * (uint64_t)(t->turns - 1))
            fail_msg("fences %llu..%llu over %u turns", (unsigned long long)t->first_fence,
                     (unsigned long long)t->last_fence, t->turns);
    }
    /* Each holder's release publishes once a key (a grant, or a wake-up: twice when the head
     * does not listen yet), and the releases of lost attempts publish nothing. */
    for (unsigned i = 0; i < 3; i++) {
        long long most = (long long)t->w[0].n_keys * t->turns + WORKERS;
        if (published[i] > most)
            fail_msg("server %u ran %lld PUBLISH for %u turns (at most %lld)", i, published[i],
                     t->turns, most);
    }
}

/* 4. Fenced waiters take turns in the queue: about one attempt and one fence a turn, fences
 * strictly increasing, no storm of wake-ups. */
static void fenced_waiters_take_turns(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, NULL);
    static turns t;
    memset(&t, 0, sizeof(t));
    t.env = &env;
    t.fencing = true;
    t.attempts_per_turn = 2;
    for (unsigned i = 0; i < WORKERS; i++) {
        t.w[i].keys[0] = "{grants}:a";
        t.w[i].lens[0] = strlen(t.w[i].keys[0]);
        t.w[i].n_keys = 1;
    }
    run_turns(&t);
    h_env_stop(&env);
}

/* 5. Waiters of overlapping sets ({a,b}, {b,c}, {c,a}) take turns in every key's queue: no two
 * holders of a key at once, every worker served, about one attempt a turn. */
static void set_waiters_take_turns(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, NULL);
    static turns t;
    memset(&t, 0, sizeof(t));
    t.env = &env;
    t.attempts_per_turn = 3;
    static const char *const names[3] = {"{grants}:a", "{grants}:b", "{grants}:c"};
    for (unsigned i = 0; i < WORKERS; i++) {
        t.w[i].keys[0] = names[i];
        t.w[i].keys[1] = names[(i + 1) % 3];
        t.w[i].lens[0] = strlen(names[i]);
        t.w[i].lens[1] = strlen(names[(i + 1) % 3]);
        t.w[i].n_keys = 2;
    }
    run_turns(&t);
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        G_TEST(server_listed_twice_counts_once),
        G_TEST(half_open_waiter_delays_no_longer_than_its_place),
        G_TEST(waiter_wakes_when_a_crashed_holders_key_runs_out),
        G_TEST(fenced_waiters_take_turns),
        G_TEST(set_waiters_take_turns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
