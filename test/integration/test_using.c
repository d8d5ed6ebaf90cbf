/* SPDX-License-Identifier: MIT */
/* test_using.c - the common case in a few lines (issue 33): redlock_using (a work run holding an
 * auto-extended lock, told of a loss, one completion saying how the hold ended), cancelers
 * (fired before the call, during a wait, during the work, shared by two clients), and
 * REDLOCK_STRLEN on every entry point that takes a (pointer, length) pair, the blocking ones
 * included. Every check looks at the servers: the keys the work holds, the keys left after. */
#include "harness.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 5

/* What one redlock_using saw. Static where a callback may write after a failed check. */
typedef struct hold_rec {
    int works;                      /* the work ran */
    redlock_lock *lock;             /* the work's lock */
    char token[64];                 /* its token, as the work saw it */
    bool held_in_work;              /* redlock_lock_is_held in the work */
    bool done_in_work;              /* the work calls redlock_using_done at once */
    uint64_t sleep_in_work_ms;      /* the work sleeps this long before its done (a pause) */
    redlock_canceler *fire_in_work; /* the work fires this canceler */
    int losts;                      /* the caller's lost callback ran */
    int lost_reason;
    uint64_t lost_at_us, lost_deadline_us;
    bool held_at_loss; /* redlock_lock_is_held in the lost callback */
    int ends;          /* the completion ran */
    redlock_hold_end end;
    int status;
    unsigned votes_yes, votes_no, n_nodes;
} hold_rec;

static void on_work(redlock_lock *lock, void *data)
{
    hold_rec *h = data;
    h->works++;
    h->lock = lock;
    size_t len = 0;
    const char *token = redlock_lock_token(lock, &len);
    snprintf(h->token, sizeof(h->token), "%.*s", (int)len, token);
    h->held_in_work = redlock_lock_is_held(lock, redlock_now_us());
    if (h->fire_in_work != NULL)
        redlock_canceler_fire(h->fire_in_work);
    if (h->sleep_in_work_ms > 0)
        uv_sleep((unsigned)h->sleep_in_work_ms);
    if (h->done_in_work)
        assert_int_equal(redlock_using_done(lock), 0);
}

static void on_lost(redlock_lock *lock, int reason, void *data)
{
    hold_rec *h = data;
    h->losts++;
    h->lost_reason = reason;
    h->lost_at_us = redlock_now_us();
    h->lost_deadline_us = redlock_lock_deadline_us(lock);
    h->held_at_loss = redlock_lock_is_held(lock, redlock_now_us());
}

static void on_ended(redlock_hold_end end, int status, const redlock_result *result, void *data)
{
    hold_rec *h = data;
    h->ends++;
    h->end = end;
    h->status = status;
    h->votes_yes = result->votes_yes;
    h->votes_no = result->votes_no;
    h->n_nodes = result->n_nodes;
}

/* redlock_using on resource with opts (NULL: with the caller's lost callback, which every test
 * here wants). */
static int using(redlock_client *c, const char *resource, uint64_t ttl_ms, redlock_lock_opts *opts,
                 hold_rec *h)
{
    redlock_lock_opts own;
    if (opts == NULL) {
        redlock_lock_opts_init(&own);
        opts = &own;
    }
    opts->lost_cb = on_lost;
    opts->lost_data = h;
    return redlock_using(c, resource, REDLOCK_STRLEN, ttl_ms, opts, on_work, on_ended, h);
}

static void assert_no_keys(h_env *env, redlock_client *c)
{
    h_drain(env, c);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(h_dbsize(env, i), 0);
}

/* 1. The work runs holding the lock: every node holds its token while it runs, the lock is kept
 * alive past its ttl, the caller cannot release or free it behind the helper's back, and its
 * done releases it everywhere: the completion says released, 0, and no key is left. */
static void work_runs_holding_the_lock(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_wait_ready(&env, c);
    static hold_rec h;
    memset(&h, 0, sizeof(h));
    /* Extended every third of the ttl, lost a tenth before the deadline: a ttl of 2 s leaves an
     * extension more than a second to be late by on a loaded machine. */
    const uint64_t ttl_ms = 2000;
    assert_int_equal(using(c, "using:held", ttl_ms, NULL, &h), 0);
    assert_true(h_run_until(&env.loop, &h.works, 1, H_WAIT_MS));
    assert_true(h.held_in_work);
    assert_true(h_wait_holding(&env, "using:held", 10, h.token, strlen(h.token), N, H_WAIT_MS));
    /* Kept alive: past its ttl every node still holds it, renewed by auto-extension. */
    h_run_for(&env.loop, ttl_ms + 500);
    assert_true(redlock_lock_extensions(h.lock) >= 2);
    assert_true(h_wait_holding(&env, "using:held", 10, h.token, strlen(h.token), N, H_WAIT_MS));
    assert_true(redlock_lock_is_held(h.lock, redlock_now_us()));
    /* The hold is the helper's: the caller's release is refused, its free ignored. */
    h_record rel = {0};
    assert_int_equal(redlock_release(h.lock, h_record_cb, &rel), REDLOCK_EINVAL);
    assert_non_null(strstr(redlock_client_last_error(c), "redlock_using_done"));
    redlock_lock_free(h.lock); /* ignored: the done below uses the handle */

    assert_int_equal(redlock_using_done(h.lock), 0);
    assert_int_equal(redlock_using_done(h.lock), REDLOCK_EINVAL); /* once */
    assert_int_equal(h.ends, 0);                                  /* never inside the call */
    assert_true(h_run_until(&env.loop, &h.ends, 1, H_WAIT_MS));
    assert_int_equal(h.end, REDLOCK_HOLD_RELEASED);
    assert_int_equal(h.status, 0);
    assert_int_equal(h.votes_yes, N);
    assert_int_equal(h.losts, 0);
    assert_no_keys(&env, c);
    h_run_for(&env.loop, 100);
    assert_int_equal(h.ends, 1);
    assert_int_equal(h.works, 1);
    h_env_stop(&env);
}

/* 2. The lock is lost during the work (another holder took the keys on every node): the work is
 * told at once by its lost callback, before the validity runs out, and the lock reads as not held
 * from then on; its done then ends the hold as lost, with the reason, and the other holder's keys
 * are left alone. */
static void loss_during_the_work_is_told(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_wait_ready(&env, c);
    static hold_rec h;
    memset(&h, 0, sizeof(h));
    assert_int_equal(using(c, "using:lost", 3000, NULL, &h), 0);
    assert_true(h_run_until(&env.loop, &h.works, 1, H_WAIT_MS));
    assert_true(h_wait_holding(&env, "using:lost", 10, h.token, strlen(h.token), N, H_WAIT_MS));
    for (unsigned i = 0; i < N; i++)
        h_set(&env, i, "using:lost", 10, "intruder");
    assert_true(h_run_until(&env.loop, &h.losts, 1, H_WAIT_MS));
    assert_int_equal(h.lost_reason, REDLOCK_ELOST);
    assert_true(h.lost_at_us < h.lost_deadline_us);
    assert_false(h.held_at_loss);
    assert_false(redlock_lock_is_held(h.lock, redlock_now_us()));
    h_run_for(&env.loop, 200);
    assert_int_equal(h.ends, 0); /* the hold ends at the work's done */

    assert_int_equal(redlock_using_done(h.lock), 0);
    assert_true(h_run_until(&env.loop, &h.ends, 1, H_WAIT_MS));
    assert_int_equal(h.end, REDLOCK_HOLD_LOST);
    assert_int_equal(h.status, REDLOCK_ELOST);
    assert_int_equal(h.losts, 1);
    assert_int_equal(h_count_holding(&env, "using:lost", 10, "intruder", 8), N);
    h_env_stop(&env);
}

/* 3. A lapsed hold is never reported released: a work paused past the validity (its loop
 * blocked, as by a long GC) whose done comes after the deadline, and a work whose keys a quorum
 * lost between two extensions, both end lapsed with the release's REDLOCK_ELOST. */
static void lapsed_hold_is_reported(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_wait_ready(&env, c);
    static hold_rec h;
    memset(&h, 0, sizeof(h));
    h.done_in_work = true;
    h.sleep_in_work_ms = 800; /* past the 500 ms ttl: nothing runs on the loop meanwhile */
    assert_int_equal(using(c, "using:paused", 500, NULL, &h), 0);
    assert_true(h_run_until(&env.loop, &h.ends, 1, H_WAIT_MS));
    assert_int_equal(h.end, REDLOCK_HOLD_LAPSED);
    assert_int_equal(h.status, REDLOCK_ELOST);
    assert_int_equal(h.losts, 0); /* the work was never told: it was paused */

    static hold_rec g;
    memset(&g, 0, sizeof(g));
    assert_int_equal(using(c, "using:gone", 30000, NULL, &g), 0);
    assert_true(h_run_until(&env.loop, &g.works, 1, H_WAIT_MS));
    assert_true(h_wait_holding(&env, "using:gone", 10, g.token, strlen(g.token), N, H_WAIT_MS));
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(h_del(&env, i, "using:gone", 10), 1);
    assert_int_equal(redlock_using_done(g.lock), 0); /* long before the first extension */
    assert_true(h_run_until(&env.loop, &g.ends, 1, H_WAIT_MS));
    assert_int_equal(g.end, REDLOCK_HOLD_LAPSED);
    assert_int_equal(g.status, REDLOCK_ELOST);
    assert_int_equal(g.votes_no, 3);
    assert_no_keys(&env, c);
    h_env_stop(&env);
}

/* 4. The acquire fails (another holder): the work never runs, and the completion says not
 * acquired with the acquire's status and per-node result. Bad arguments fail at once. */
static void acquire_failure_is_reported(void **state)
{
    (void)state;
    h_env env;
    h_record held;
    redlock_client *c = h_start_holding(&env, N, "using:busy", 30000, &held);
    /* Decided at the quorum: every node holds it before anyone else tries. */
    assert_true(h_wait_holding(&env, "using:busy", strlen("using:busy"),
                               redlock_lock_token(held.lock, NULL),
                               strlen(redlock_lock_token(held.lock, NULL)), N, H_WAIT_MS));
    static hold_rec h;
    memset(&h, 0, sizeof(h));
    assert_int_equal(using(c, "using:busy", 30000, NULL, &h), 0);
    assert_true(h_run_until(&env.loop, &h.ends, 1, H_WAIT_MS));
    assert_int_equal(h.end, REDLOCK_HOLD_NOT_ACQUIRED);
    assert_int_equal(h.status, REDLOCK_EBUSY);
    assert_true(h.votes_no >= 3); /* decided at the quorum's no */
    assert_int_equal(h.n_nodes, N);
    assert_int_equal(h.works, 0);

    assert_int_equal(redlock_using(c, "x", 1, 0, NULL, NULL, on_ended, &h), REDLOCK_EINVAL);
    assert_int_equal(redlock_using(c, "x", 1, 0, NULL, on_work, NULL, &h), REDLOCK_EINVAL);
    assert_int_equal(redlock_using(c, "", REDLOCK_STRLEN, 0, NULL, on_work, on_ended, &h),
                     REDLOCK_EINVAL);
    assert_int_equal(redlock_using_done(held.lock), REDLOCK_EINVAL); /* not a using lock */
    assert_int_equal(redlock_using_done(NULL), REDLOCK_EINVAL);
    h_run_for(&env.loop, 100);
    assert_int_equal(h.ends, 1);
    h_release_ok(&env, held.lock, NULL);
    assert_no_keys(&env, c);
    h_env_stop(&env);
}

/* A thread that fires a canceler after a pause: a canceler is fired from any thread. */
typedef struct firer {
    redlock_canceler *canceler;
    unsigned after_ms;
} firer;

static void *fire_later(void *arg)
{
    firer *f = arg;
    uv_sleep(f->after_ms);
    redlock_canceler_fire(f->canceler);
    return NULL;
}

/* 5. A canceler fired before the call: the call fails at once with REDLOCK_ECANCELED and a message,
 * calls nothing back, and sends nothing (no key on any node). A fresh token cancels nothing. */
static void canceler_fired_before_the_call(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_wait_ready(&env, c);
    redlock_canceler *canceler = NULL;
    assert_int_equal(redlock_canceler_new(&canceler), 0);
    assert_false(redlock_canceler_fired(canceler));
    redlock_canceler_fire(canceler);
    assert_true(redlock_canceler_fired(canceler));
    redlock_canceler_fire(canceler); /* twice is harmless */

    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.cancel = canceler;
    static hold_rec h;
    memset(&h, 0, sizeof(h));
    assert_int_equal(using(c, "tok:before", 30000, &lo, &h), REDLOCK_ECANCELED);
    assert_non_null(strstr(redlock_client_last_error(c), "canceler"));
    static h_record rec;
    memset(&rec, 0, sizeof(rec));
    lo.wait_ms = 5000;
    assert_int_equal(redlock_acquire(c, "tok:before", 10, 0, &lo, h_record_cb, &rec),
                     REDLOCK_ECANCELED);
    h_run_for(&env.loop, 200);
    assert_int_equal(h.works + h.ends + rec.calls, 0);
    assert_no_keys(&env, c);
    redlock_canceler_free(canceler);
    redlock_canceler_free(NULL);
    assert_int_equal(redlock_canceler_new(NULL), REDLOCK_EINVAL);
    h_env_stop(&env);
}

/* 5b. The canceler's first names (redlock_cancel_token and its four functions) are aliases kept
 * within the soversion: the same type and the same functions, mixed freely with the new ones. */
static void cancel_token_names_still_work(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_wait_ready(&env, c);
    redlock_cancel_token *token = NULL;
    assert_int_equal(redlock_cancel_token_new(&token), 0);
    redlock_canceler *same = token; /* a typedef of the new type */
    assert_false(redlock_cancel_token_fired(token));
    redlock_canceler_fire(same);
    assert_true(redlock_cancel_token_fired(token));
    redlock_cancel_token_fire(token); /* twice is harmless */
    assert_true(redlock_canceler_fired(same));

    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.cancel = token;
    lo.wait_ms = 5000;
    static h_record rec;
    memset(&rec, 0, sizeof(rec));
    assert_int_equal(redlock_acquire(c, "tok:alias", 9, 0, &lo, h_record_cb, &rec),
                     REDLOCK_ECANCELED);
    h_run_for(&env.loop, 200);
    assert_int_equal(rec.calls, 0);
    assert_no_keys(&env, c);
    redlock_cancel_token_free(token);
    redlock_cancel_token_free(NULL);
    assert_int_equal(redlock_cancel_token_new(NULL), REDLOCK_EINVAL);
    h_env_stop(&env);
}

/* Start env with a client holding resource, and wait until every node holds it (the acquire is
 * decided at the quorum), so that a waiter finds it everywhere. */
static void hold_everywhere(h_env *env, const char *resource, h_record *held)
{
    h_start_holding(env, N, resource, 30000, held);
    const char *token = redlock_lock_token(held->lock, NULL);
    assert_true(
        h_wait_holding(env, resource, strlen(resource), token, strlen(token), N, H_WAIT_MS));
}

/* 6. A canceler fired from another thread while the work waits behind another holder: the wait
 * ends canceled, the work never runs, the holder's keys are untouched, and once it releases
 * nothing of the waiter is left on the nodes. */
static void canceler_cancels_a_wait(void **state)
{
    (void)state;
    h_env env;
    h_record held;
    hold_everywhere(&env, "tok:wait", &held);
    redlock_client *w = h_own_client(&env, NULL);
    redlock_canceler *canceler = NULL;
    assert_int_equal(redlock_canceler_new(&canceler), 0);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.wait_ms = 30000;
    lo.cancel = canceler;
    static hold_rec h;
    memset(&h, 0, sizeof(h));
    assert_int_equal(using(w, "tok:wait", 30000, &lo, &h), 0);
    redlock_canceler_free(canceler); /* the waiting acquire keeps it alive */
    h_wait_busy_rounds(&env, w, 1);
    static firer f;
    f = (firer){canceler, 50};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, fire_later, &f), 0);
    assert_true(h_run_until(&env.loop, &h.ends, 1, H_WAIT_MS));
    pthread_join(t, NULL);
    assert_int_equal(h.end, REDLOCK_HOLD_CANCELED);
    assert_int_equal(h.status, REDLOCK_ECANCELED);
    assert_int_equal(h.works, 0);
    const char *held_token = redlock_lock_token(held.lock, NULL);
    assert_int_equal(h_count_holding(&env, "tok:wait", 8, held_token, strlen(held_token)), N);
    h_release_ok(&env, held.lock, NULL);
    assert_no_keys(&env, w);
    h_run_for(&env.loop, 100);
    assert_int_equal(h.ends, 1);
    h_close_client(&env, w);
    h_env_stop(&env);
}

/* 7. A canceler fired during the work does not end the hold: a canceler cancels what is not held
 * yet, never a lock's extension or its release (which would leave its keys until the ttl). The work
 * sees the canceler fired; the lock stays alive on every node past its ttl; done releases it. */
static void canceler_during_the_work_keeps_the_hold(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_wait_ready(&env, c);
    redlock_canceler *canceler = NULL;
    assert_int_equal(redlock_canceler_new(&canceler), 0);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.cancel = canceler;
    static hold_rec h;
    memset(&h, 0, sizeof(h));
    h.fire_in_work = canceler;
    const uint64_t ttl_ms = 2000;
    assert_int_equal(using(c, "tok:work", ttl_ms, &lo, &h), 0);
    assert_true(h_run_until(&env.loop, &h.works, 1, H_WAIT_MS));
    assert_true(redlock_canceler_fired(canceler));
    h_run_for(&env.loop, ttl_ms + 500);
    assert_true(redlock_lock_extensions(h.lock) >= 2);
    assert_true(h_wait_holding(&env, "tok:work", 8, h.token, strlen(h.token), N, H_WAIT_MS));
    assert_int_equal(h.losts + h.ends, 0);
    assert_int_equal(redlock_using_done(h.lock), 0);
    assert_true(h_run_until(&env.loop, &h.ends, 1, H_WAIT_MS));
    assert_int_equal(h.end, REDLOCK_HOLD_RELEASED);
    assert_int_equal(h.status, 0);
    assert_no_keys(&env, c);
    redlock_canceler_free(canceler);
    h_env_stop(&env);
}

/* 8. One canceler shared by two clients, both waiting behind a holder: one fire cancels both; a
 * third wait without the canceler goes on and gets the lock when the holder releases. */
static void canceler_shared_by_two_clients(void **state)
{
    (void)state;
    h_env env;
    h_record held;
    hold_everywhere(&env, "tok:shared", &held);
    redlock_client *a = h_own_client(&env, NULL);
    redlock_client *b = h_own_client(&env, NULL);
    redlock_canceler *canceler = NULL;
    assert_int_equal(redlock_canceler_new(&canceler), 0);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.wait_ms = 30000;
    lo.cancel = canceler;
    static hold_rec ha, hb;
    memset(&ha, 0, sizeof(ha));
    memset(&hb, 0, sizeof(hb));
    static h_record other;
    memset(&other, 0, sizeof(other));
    assert_int_equal(using(a, "tok:shared", 30000, &lo, &ha), 0);
    assert_int_equal(using(b, "tok:shared", 30000, &lo, &hb), 0);
    redlock_lock_opts plain;
    redlock_lock_opts_init(&plain);
    plain.wait_ms = 30000;
    assert_int_equal(
        redlock_acquire(b, "tok:shared", REDLOCK_STRLEN, 30000, &plain, h_record_cb, &other), 0);
    h_wait_busy_rounds(&env, a, 1);
    h_wait_busy_rounds(&env, b, 2);
    static firer f;
    f = (firer){canceler, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, fire_later, &f), 0);
    assert_true(h_run_until(&env.loop, &ha.ends, 1, H_WAIT_MS));
    assert_true(h_run_until(&env.loop, &hb.ends, 1, H_WAIT_MS));
    pthread_join(t, NULL);
    assert_int_equal(ha.end, REDLOCK_HOLD_CANCELED);
    assert_int_equal(hb.end, REDLOCK_HOLD_CANCELED);
    assert_int_equal(ha.works + hb.works, 0);
    assert_int_equal(other.calls, 0); /* not carrying the canceler: still waiting */
    h_release_ok(&env, held.lock, NULL);
    assert_true(h_run_until(&env.loop, &other.calls, 1, H_WAIT_MS));
    assert_int_equal(other.status, 0);
    h_release_ok(&env, other.lock, NULL);
    assert_no_keys(&env, b);
    redlock_canceler_free(canceler);
    h_close_client(&env, a);
    h_close_client(&env, b);
    h_env_stop(&env);
}

/* 9. Closing the client during the work ends the hold canceled (the close releases the lock),
 * after the lost callback, before the close callback. */
static void close_during_the_work_cancels(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_own_client(&env, NULL);
    static hold_rec h;
    memset(&h, 0, sizeof(h));
    assert_int_equal(using(c, "using:close", 30000, NULL, &h), 0);
    assert_true(h_run_until(&env.loop, &h.works, 1, H_WAIT_MS));
    h_close_client(&env, c);
    assert_int_equal(h.ends, 1);
    assert_int_equal(h.end, REDLOCK_HOLD_CANCELED);
    assert_int_equal(h.status, REDLOCK_ECANCELED);
    assert_int_equal(h.losts, 1);
    assert_int_equal(h.lost_reason, REDLOCK_ECANCELED);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(h_dbsize(&env, i), 0);
    h_env_stop(&env);
}

/* ---- REDLOCK_STRLEN on every entry point ------------------------------------------------------
 */

typedef struct strlen_env {
    h_env *env;
    redlock_client *c;
    redlock_sync *sync;
} strlen_env;

/* Every node holds key with token: the entry point took the lock under the string's name. */
static void assert_held(strlen_env *e, const char *key, const char *token)
{
    assert_true(h_wait_holding(e->env, key, strlen(key), token, strlen(token), N, H_WAIT_MS));
}

static redlock_lock *async_acquire(strlen_env *e, const redlock_lock_opts *lo, const char *res)
{
    static h_record rec;
    memset(&rec, 0, sizeof(rec));
    assert_int_equal(redlock_acquire(e->c, res, REDLOCK_STRLEN, 30000, lo, h_record_cb, &rec), 0);
    assert_true(h_run_until(&e->env->loop, &rec.calls, 1, H_WAIT_MS));
    assert_int_equal(rec.status, 0);
    return rec.lock;
}

static void row_acquire(strlen_env *e)
{
    redlock_lock *lock = async_acquire(e, NULL, "nul:acquire");
    size_t len = 0;
    redlock_lock_resource(lock, &len);
    assert_int_equal(len, strlen("nul:acquire"));
    assert_held(e, "nul:acquire", redlock_lock_token(lock, NULL));
    h_release_ok(e->env, lock, NULL);
}

static void row_acquire_multi(strlen_env *e)
{
    const void *res[2] = {"nul:multi:a", "nul:multi:bb"};
    size_t lens[2] = {REDLOCK_STRLEN, 12};
    static h_record rec;
    memset(&rec, 0, sizeof(rec));
    assert_int_equal(redlock_acquire_multi(e->c, res, lens, 2, 30000, NULL, h_record_cb, &rec), 0);
    assert_true(h_run_until(&e->env->loop, &rec.calls, 1, H_WAIT_MS));
    assert_int_equal(rec.status, 0);
    assert_held(e, "nul:multi:a", redlock_lock_token(rec.lock, NULL));
    assert_held(e, "nul:multi:bb", redlock_lock_token(rec.lock, NULL));
    h_release_ok(e->env, rec.lock, NULL);
}

static void row_opts_token(strlen_env *e)
{
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.token = "my-own-token";
    lo.token_len = REDLOCK_STRLEN;
    redlock_lock *lock = async_acquire(e, &lo, "nul:token");
    size_t len = 0;
    redlock_lock_token(lock, &len);
    assert_int_equal(len, strlen("my-own-token"));
    assert_held(e, "nul:token", "my-own-token");
    h_release_ok(e->env, lock, NULL);
}

static void row_attach(strlen_env *e)
{
    redlock_lock *taken = async_acquire(e, NULL, "nul:attach");
    redlock_lock *lock = NULL;
    assert_int_equal(redlock_lock_attach(e->c, "nul:attach", REDLOCK_STRLEN,
                                         redlock_lock_token(taken, NULL), REDLOCK_STRLEN, 30000,
                                         &lock),
                     0);
    redlock_lock_free(taken);
    h_record rec;
    assert_int_equal(h_extend(e->env, lock, 0, 0, &rec), 0); /* its key and token are right */
    h_release_ok(e->env, lock, NULL);
}

static void row_inspect(strlen_env *e)
{
    redlock_lock *lock = async_acquire(e, NULL, "nul:inspect");
    static h_record rec;
    memset(&rec, 0, sizeof(rec));
    assert_int_equal(redlock_inspect(e->c, "nul:inspect", REDLOCK_STRLEN, h_record_cb, &rec), 0);
    assert_true(h_run_until(&e->env->loop, &rec.calls, 1, H_WAIT_MS));
    assert_int_equal(rec.votes_yes, N);
    const void *res[2] = {"nul:inspect", "nul:none"};
    size_t lens[2] = {REDLOCK_STRLEN, REDLOCK_STRLEN};
    memset(&rec, 0, sizeof(rec));
    assert_int_equal(redlock_inspect_multi(e->c, res, lens, 1, h_record_cb, &rec), 0);
    assert_true(h_run_until(&e->env->loop, &rec.calls, 1, H_WAIT_MS));
    assert_int_equal(rec.votes_yes, N);
    memset(&rec, 0, sizeof(rec));
    assert_int_equal(redlock_inspect_multi(e->c, res, lens, 2, h_record_cb, &rec), 0);
    assert_true(h_run_until(&e->env->loop, &rec.calls, 1, H_WAIT_MS));
    assert_int_equal(rec.votes_error, N); /* one held, one free: they disagree on each node */
    h_release_ok(e->env, lock, NULL);
}

static void row_using(strlen_env *e)
{
    static hold_rec h;
    memset(&h, 0, sizeof(h));
    assert_int_equal(using(e->c, "nul:using", 30000, NULL, &h), 0);
    assert_true(h_run_until(&e->env->loop, &h.works, 1, H_WAIT_MS));
    assert_held(e, "nul:using", h.token);
    assert_int_equal(redlock_using_done(h.lock), 0);
    assert_true(h_run_until(&e->env->loop, &h.ends, 1, H_WAIT_MS));
    assert_int_equal(h.end, REDLOCK_HOLD_RELEASED);
}

static void row_sync_acquire(strlen_env *e)
{
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.token = "sync-token";
    lo.token_len = REDLOCK_STRLEN;
    redlock_sync_lock *lock = NULL;
    assert_int_equal(
        redlock_sync_acquire(e->sync, "nul:sync", REDLOCK_STRLEN, 30000, &lo, &lock, NULL), 0);
    size_t len = 0;
    assert_string_equal(redlock_sync_lock_resource(lock, &len), "nul:sync");
    assert_int_equal(len, strlen("nul:sync"));
    assert_held(e, "nul:sync", "sync-token");
    assert_int_equal(redlock_sync_release(lock, NULL), 0);
    redlock_sync_lock_free(lock);
}

static void row_sync_multi(strlen_env *e)
{
    const void *res[2] = {"nul:sync:a", "nul:sync:b"};
    size_t lens[2] = {REDLOCK_STRLEN, REDLOCK_STRLEN};
    redlock_sync_lock *lock = NULL;
    assert_int_equal(redlock_sync_acquire_multi(e->sync, res, lens, 2, 30000, NULL, &lock, NULL),
                     0);
    assert_string_equal(redlock_sync_lock_resource_at(lock, 1, NULL), "nul:sync:b");
    assert_held(e, "nul:sync:a", redlock_sync_lock_token(lock, NULL));
    assert_held(e, "nul:sync:b", redlock_sync_lock_token(lock, NULL));
    static redlock_report report;
    redlock_report_init(&report);
    assert_int_equal(redlock_sync_inspect_multi(e->sync, res, lens, 2, &report), 0);
    assert_int_equal(report.votes_yes, N);
    assert_int_equal(redlock_sync_inspect(e->sync, "nul:sync:b", REDLOCK_STRLEN, &report), 0);
    assert_int_equal(report.votes_yes, N);
    redlock_sync_lock *attached = NULL;
    assert_int_equal(redlock_sync_attach(e->sync, "nul:sync:a", REDLOCK_STRLEN,
                                         redlock_sync_lock_token(lock, NULL), REDLOCK_STRLEN, 30000,
                                         &attached),
                     0);
    assert_string_equal(redlock_sync_lock_resource(attached, NULL), "nul:sync:a");
    assert_int_equal(redlock_sync_extend(attached, 0, 0, NULL), 0); /* key and token right */
    redlock_sync_lock_free(attached);
    assert_int_equal(redlock_sync_release(lock, NULL), 0);
    redlock_sync_lock_free(lock);
}

static void with_fn(redlock_sync_lock *lock, void *data)
{
    strlen_env *e = data;
    assert_held(e, "nul:with", redlock_sync_lock_token(lock, NULL));
}

static void row_sync_with(strlen_env *e)
{
    redlock_hold_end end = REDLOCK_HOLD_CANCELED;
    assert_int_equal(
        redlock_sync_with(e->sync, "nul:with", REDLOCK_STRLEN, 30000, NULL, with_fn, e, &end, NULL),
        0);
    assert_int_equal(end, REDLOCK_HOLD_RELEASED);
}

/* Bad input with the sentinel: a NULL pointer or an empty string is REDLOCK_EINVAL, with a
 * message saying which, on each entry point; nothing is sent. */
static void rows_refused(strlen_env *e)
{
    static h_record rec;
    memset(&rec, 0, sizeof(rec));
    redlock_client *c = e->c;
    assert_int_equal(redlock_acquire(c, NULL, REDLOCK_STRLEN, 0, NULL, h_record_cb, &rec),
                     REDLOCK_EINVAL);
    assert_string_equal(redlock_client_last_error(c), "resource is NULL");
    assert_int_equal(redlock_acquire(c, "", REDLOCK_STRLEN, 0, NULL, h_record_cb, &rec),
                     REDLOCK_EINVAL);
    assert_string_equal(redlock_client_last_error(c), "resource is empty");
    const void *res[2] = {"a", ""};
    size_t lens[2] = {REDLOCK_STRLEN, REDLOCK_STRLEN};
    assert_int_equal(redlock_acquire_multi(c, res, lens, 2, 0, NULL, h_record_cb, &rec),
                     REDLOCK_EINVAL);
    assert_string_equal(redlock_client_last_error(c), "resource 1 is empty");
    assert_int_equal(redlock_inspect_multi(c, res, lens, 2, h_record_cb, &rec), REDLOCK_EINVAL);
    assert_int_equal(redlock_inspect(c, NULL, REDLOCK_STRLEN, h_record_cb, &rec), REDLOCK_EINVAL);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.token = "";
    lo.token_len = REDLOCK_STRLEN;
    assert_int_equal(redlock_acquire(c, "a", REDLOCK_STRLEN, 0, &lo, h_record_cb, &rec),
                     REDLOCK_EINVAL);
    assert_non_null(strstr(redlock_client_last_error(c), "token length"));
    redlock_lock *lock = NULL;
    assert_int_equal(redlock_lock_attach(c, "a", REDLOCK_STRLEN, "", REDLOCK_STRLEN, 0, &lock),
                     REDLOCK_EINVAL);
    assert_int_equal(redlock_lock_attach(c, NULL, REDLOCK_STRLEN, "t", REDLOCK_STRLEN, 0, &lock),
                     REDLOCK_EINVAL);
    assert_null(lock);

    static redlock_report report;
    redlock_report_init(&report);
    redlock_sync_lock *sl = NULL;
    assert_int_equal(redlock_sync_acquire(e->sync, "", REDLOCK_STRLEN, 0, NULL, &sl, &report),
                     REDLOCK_EINVAL);
    assert_non_null(strstr(report.message, "empty"));
    assert_int_equal(redlock_sync_acquire_multi(e->sync, res, lens, 2, 0, NULL, &sl, &report),
                     REDLOCK_EINVAL);
    assert_int_equal(redlock_sync_inspect(e->sync, NULL, REDLOCK_STRLEN, &report), REDLOCK_EINVAL);
    assert_int_equal(redlock_sync_attach(e->sync, "", REDLOCK_STRLEN, "t", REDLOCK_STRLEN, 0, &sl),
                     REDLOCK_EINVAL);
    redlock_hold_end end = REDLOCK_HOLD_RELEASED;
    assert_int_equal(
        redlock_sync_with(e->sync, NULL, REDLOCK_STRLEN, 0, NULL, with_fn, e, &end, &report),
        REDLOCK_EINVAL);
    assert_int_equal(end, REDLOCK_HOLD_NOT_ACQUIRED);
    assert_null(sl);
    h_run_for(&e->env->loop, 100);
    assert_int_equal(rec.calls, 0);
}

static void strlen_on_every_entry_point(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_wait_ready(&env, c);
    redlock_options opts;
    h_test_options(&opts);
    static strlen_env e;
    e = (strlen_env){.env = &env, .c = c};
    char err[256];
    assert_int_equal(redlock_sync_new(env.cluster.urls, N, &opts, &e.sync, err, sizeof(err)), 0);
    static const struct {
        const char *name;
        void (*run)(strlen_env *e);
    } rows[] = {
        {"redlock_acquire", row_acquire},
        {"redlock_acquire_multi", row_acquire_multi},
        {"redlock_lock_opts.token_len", row_opts_token},
        {"redlock_lock_attach", row_attach},
        {"redlock_inspect, redlock_inspect_multi", row_inspect},
        {"redlock_using", row_using},
        {"redlock_sync_acquire", row_sync_acquire},
        {"redlock_sync_acquire_multi, _inspect, _inspect_multi, _attach", row_sync_multi},
        {"redlock_sync_with", row_sync_with},
        {"bad input", rows_refused},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        printf("# REDLOCK_STRLEN: %s\n", rows[i].name);
        rows[i].run(&e);
    }
    redlock_sync_free(e.sync);
    assert_no_keys(&env, c);
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        H_TEST(work_runs_holding_the_lock),     H_TEST(loss_during_the_work_is_told),
        H_TEST(lapsed_hold_is_reported),        H_TEST(acquire_failure_is_reported),
        H_TEST(canceler_fired_before_the_call), H_TEST(cancel_token_names_still_work),
        H_TEST(canceler_cancels_a_wait),        H_TEST(canceler_during_the_work_keeps_the_hold),
        H_TEST(canceler_shared_by_two_clients), H_TEST(close_during_the_work_cancels),
        H_TEST(strlen_on_every_entry_point),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
