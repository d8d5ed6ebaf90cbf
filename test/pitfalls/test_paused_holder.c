/* SPDX-License-Identifier: MIT */
/* test_paused_holder.c - pitfall 6 (docs/pitfalls.md): a holder paused past its validity, the
 * GC pause of the classic critique of Redlock.
 *
 * A holder checks that it still holds the lock, then writes to the protected store. A process
 * stopped between the check and the write (SIGSTOP here: a GC pause, a page fault storm, a VM
 * migration) resumes after its lock expired and someone else took it, and writes anyway: its
 * stale write lands after the new holder's and overwrites it. No lock can stop this by itself,
 * Redlock included: the pause is after the last moment the lock could say anything.
 *
 * Both locks run the same scenario: holder A in a child process takes the lock, checks it (the
 * legacy one by its own ttl arithmetic, libredlock's by redlock_sync_lock_status and the
 * deadline), reports, and is stopped right there; B takes the lock once A's has expired and
 * writes the store; A is continued and writes it too. The checker records A's hold up to the end
 * of its write, and finds it overlapping B's, for both locks. What libredlock adds is that it
 * says so afterwards: A's release returns REDLOCK_ELOST (the hold had lapsed).
 *
 * What closes the gap is a fence the store checks: the same pause is run a third time
 * with libredlock's fencing, A and B writing through a fenced store (a Lua check, as
 * examples/fenced_store.c does); the store refuses A's late write, B's value survives and the
 * checker finds no overlap (docs/pitfalls.md). */
#include "pitfalls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 5
#define KEY "pitfall:paused"
#define STORE "pitfall:paused:store" /* the protected data, on server 0 */
/* Long enough that a loaded machine's delay between the acquire and the check never uses it up
 * (the check must pass: the pause is after it); B waits for it to expire. */
#define TTL_MS 3000

/* LEGACY: a single-server lock; REDLOCK: libredlock; FENCED: libredlock with fences,
 * every write going through the fenced store below. */
typedef enum { LEGACY, REDLOCK, FENCED } lock_kind;

#define STORE_FENCE STORE ":fence" /* the largest fence the store accepted */
/* The store's side of fencing, as examples/fenced_store.c does it: a write whose fence is below
 * the largest one accepted is refused. KEYS[1] = the data, KEYS[2] = that fence; ARGV[1] = the
 * value, ARGV[2] = the writer's fence. */
static const char fenced_write_lua[] =
    "local last = redis.call('get', KEYS[2])\n"
    "if last and tonumber(ARGV[2]) < tonumber(last) then\n"
    "    return redis.error_reply('STALE fence ' .. ARGV[2] .. ' is below ' .. last)\n"
    "end\n"
    "redis.call('set', KEYS[2], ARGV[2])\n"
    "redis.call('set', KEYS[1], ARGV[1])\n"
    "return 1\n";

typedef struct report {
    int status;           /* of the step reported (legacy unlock: the keys it deleted) */
    uint64_t at_us;       /* when the step ended */
    uint64_t deadline_us; /* lock: the holder's own idea of its deadline */
    bool still_valid;     /* check: what the check said */
    uint64_t fence;       /* lock, FENCED: the lock's fence */
} report;

typedef struct holder_arg {
    fixture_cluster *cluster;
    lock_kind kind;
} holder_arg;

/* The write to the protected store, by the holder's name: a plain SET, or with a fence (not 0)
 * through the fenced store. 0 written, 1 refused as stale, -1 no answer or another error. */
static int store_write(redisContext *ctx, const char *who, uint64_t fence)
{
    redisReply *r = fence == 0 ? redisCommand(ctx, "SET %s %s", STORE, who)
                               : redisCommand(ctx, "EVAL %s 2 %s %s %s %llu", fenced_write_lua,
                                              STORE, STORE_FENCE, who, (unsigned long long)fence);
    int rc = -1;
    if (r != NULL && (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_INTEGER))
        rc = 0;
    else if (r != NULL && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "STALE", 5) == 0)
        rc = 1;
    freeReplyObject(r);
    return rc;
}

/* Holder A: lock, check, (stopped here by the parent), write, unlock; one report per step. */
static int holder_a(int report_fd, int go_fd, void *data)
{
    holder_arg *arg = data;
    redisContext *store = fixture_connect(arg->cluster, 0);
    if (store == NULL || store->err != 0)
        return 10;
    char token[33];
    if (!pf_random_token(token, sizeof(token)))
        return 11;
    redlock_sync *sync = NULL;
    redlock_sync_lock *lock = NULL;
    report rep = {0};

    /* Lock. */
    if (arg->kind == LEGACY) {
        /* A careful holder's deadline: the ttl from before the SET, less 2 ms for the
         * server's millisecond clock (Redlock's fixed drift allowance). */
        const uint64_t before_us = redlock_now_us();
        rep.status = pf_token_lock(store, KEY, token, TTL_MS) ? 0 : REDLOCK_EBUSY;
        rep.at_us = redlock_now_us();
        rep.deadline_us = before_us + (TTL_MS - 2) * 1000ull;
    } else {
        redlock_options o;
        h_test_options(&o);
        if (redlock_sync_new(arg->cluster->urls, N, &o, &sync, NULL, 0) != 0)
            return 12;
        redlock_lock_opts lo;
        redlock_lock_opts_init(&lo);
        lo.fencing = arg->kind == FENCED;
        rep.status = redlock_sync_acquire(sync, KEY, strlen(KEY), TTL_MS, &lo, &lock, NULL);
        rep.at_us = redlock_now_us();
        rep.deadline_us = rep.status == 0 ? redlock_sync_lock_deadline_us(lock) : 0;
        rep.fence = rep.status == 0 ? redlock_sync_lock_fence(lock) : 0;
    }
    const uint64_t deadline_us = rep.deadline_us;
    const uint64_t fence = rep.fence;
    if (!pf_tell(report_fd, &rep, sizeof(rep)) || rep.status != 0)
        return 13;

    /* Check, as a careful holder does before it writes. */
    rep = (report){0};
    rep.at_us = redlock_now_us();
    rep.still_valid = rep.at_us < deadline_us;
    if (arg->kind != LEGACY)
        rep.still_valid = rep.still_valid && redlock_sync_lock_status(lock) == 0;
    if (!pf_tell(report_fd, &rep, sizeof(rep)) || !rep.still_valid)
        return 14;
    /* The parent stops this process here, and lets it go on long after. */
    if (!pf_await_go(go_fd))
        return 15;

    /* Write: the check said yes. */
    rep = (report){0};
    rep.status = store_write(store, "A", fence);
    rep.at_us = redlock_now_us();
    if (!pf_tell(report_fd, &rep, sizeof(rep)))
        return 16;

    /* Unlock. */
    rep = (report){0};
    if (arg->kind == LEGACY) {
        rep.status = (int)pf_token_unlock(store, KEY, token); /* keys deleted, -1: no answer */
    } else {
        rep.status = redlock_sync_release(lock, NULL);
        redlock_sync_free(sync);
    }
    rep.at_us = redlock_now_us();
    if (!pf_tell(report_fd, &rep, sizeof(rep)))
        return 17;
    redisFree(store);
    return 0;
}

static char *store_value(h_env *env)
{
    size_t len;
    return h_get(env, 0, STORE, strlen(STORE), &len);
}

static void run(h_env *env, lock_kind kind, const char *title)
{
    pf_history h;
    pf_history_init(&h, title);
    holder_arg arg = {.cluster = &env->cluster, .kind = kind};
    pf_child a;
    pf_child_start(&a, holder_a, &arg);
    report locked, checked, wrote, unlocked;
    assert_true(pf_child_read(&a, &locked, sizeof(locked)));
    assert_int_equal(locked.status, 0);
    assert_true(pf_child_read(&a, &checked, sizeof(checked)));
    assert_true(checked.still_valid);
    /* The pause: between the check and the write. */
    pf_child_stop(&a);

    /* B takes the lock once A's expired, and writes. */
    char token_b[33];
    redisContext *b_ctx = NULL;
    redlock_client *cb = NULL;
    h_record rb;
    uint64_t b_from;
    if (kind == LEGACY) {
        b_ctx = pf_connect(&env->cluster, 0);
        assert_true(pf_random_token(token_b, sizeof(token_b)));
        assert_true(pf_token_lock_wait(b_ctx, KEY, token_b, PF_LONG_TTL_MS, TTL_MS + H_WAIT_MS));
        b_from = redlock_now_us();
    } else {
        cb = pf_client(env);
        redlock_lock_opts lo;
        redlock_lock_opts_init(&lo);
        lo.wait_ms = TTL_MS + H_WAIT_MS;
        lo.fencing = kind == FENCED;
        int rc = h_acquire(env, cb, KEY, PF_LONG_TTL_MS, &lo, &rb);
        if (rc != 0)
            h_dump_record("B's acquire", &rb);
        assert_int_equal(rc, 0);
        b_from = rb.at_us;
    }
    assert_true(b_from >= locked.deadline_us);
    uint64_t fence_b = 0;
    if (kind == FENCED) {
        fence_b = redlock_lock_fence(rb.lock);
        assert_true(locked.fence > 0 &&
                    fence_b > locked.fence); /* a newer holder, a larger fence */
    }
    redisContext *store_b = pf_connect(&env->cluster, 0);
    assert_int_equal(store_write(store_b, "B", fence_b), 0);
    redisFree(store_b);

    /* A resumes: its write lands after B's. */
    pf_child_cont(&a);
    pf_child_go(&a);
    assert_true(pf_child_read(&a, &wrote, sizeof(wrote)));
    /* Without fencing A's write lands (its hold, as the store sees it, runs to the end of that
     * write); with it the store refuses the write, and A's last effect on the store is from
     * before its check, inside its validity. */
    assert_int_equal(wrote.status, kind == FENCED ? 1 : 0);
    pf_history_add(&h, "A", locked.at_us, kind == FENCED ? checked.at_us : wrote.at_us);
    char *value = store_value(env);
    assert_non_null(value);
    assert_string_equal(value, kind == FENCED ? "B" : "A"); /* unfenced: B's write is lost */
    free(value);
    assert_true(pf_child_read(&a, &unlocked, sizeof(unlocked)));
    assert_int_equal(pf_child_wait(&a), 0);

    /* B's work ends. */
    const uint64_t b_end = redlock_now_us();
    if (kind == LEGACY) {
        assert_int_equal(pf_token_unlock(b_ctx, KEY, token_b), 1);
        redisFree(b_ctx);
    } else {
        h_record rel;
        assert_true(redlock_lock_is_held(rb.lock, b_end));
        assert_int_equal(h_release(env, rb.lock, &rel), 0);
        redlock_lock_free(rb.lock);
        h_close_client(env, cb);
    }
    pf_history_add(&h, "B", b_from, b_end);
    pf_report(&h);
    printf("#   A checked its lock %.3f ms before its deadline, was paused, wrote %.3f ms after "
           "it; %s; A's unlock: %s\n",
           (double)(locked.deadline_us - checked.at_us) / 1e3,
           (double)(wrote.at_us - locked.deadline_us) / 1e3,
           kind == FENCED ? "the fenced store refused A's stale write (fence below B's)"
                          : "the store kept A's stale write",
           kind == LEGACY ? (unlocked.status == 0 ? "deleted nothing" : "?")
                          : redlock_err_name(unlocked.status));
    /* The checker sees the overlap, unless the store refused the stale write. */
    assert_true(pf_overlap_between(&h, "A", "B") == (kind != FENCED));
    assert_true(wrote.at_us > locked.deadline_us);
    /* Both locks notice afterwards that A's key was not its own any more: the legacy unlock
     * deletes nothing (and says nothing unless its caller looks); libredlock's release returns
     * REDLOCK_ELOST, its promise for a hold that had lapsed. */
    assert_int_equal(unlocked.status, kind == LEGACY ? 0 : REDLOCK_ELOST);
}

static void paused_holder_writes_after_the_next_one(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    run(&env, LEGACY, "legacy lock, holder paused between its check and its write");
    run(&env, REDLOCK, "libredlock, the same pause (no lock with a ttl prevents it)");
    run(&env, FENCED,
        "libredlock with fences, the same pause: the fenced store refuses the late write");
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        PF_TEST(paused_holder_writes_after_the_next_one),
    };
    return cmocka_run_group_tests_name("pitfall-paused-holder", tests, NULL, NULL);
}
