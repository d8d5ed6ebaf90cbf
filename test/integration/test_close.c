/* SPDX-License-Identifier: MIT */
/* test_close.c - closing a client with operations in flight, and calling back into the client
 * from its own callbacks: every callback fires exactly once, the close callback comes last, and
 * nothing is left open on the loop. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 5
#define OPS 50

typedef struct close_ctx {
    int calls[OPS];
    int total;
    int canceled;
    int succeeded;
    int other;
    int null_lock_on_failure;
    int close_calls;
    int calls_at_close; /* total when the close callback ran */
    redlock_client *closed_client;
} close_ctx;

typedef struct slot {
    close_ctx *ctx;
    int index;
} slot;

static void on_op(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    slot *s = data;
    s->ctx->calls[s->index]++;
    s->ctx->total++;
    assert_int_equal(result->status, status);
    if (status == REDLOCK_ECANCELED)
        s->ctx->canceled++;
    else if (status == 0)
        s->ctx->succeeded++;
    else
        s->ctx->other++;
    if (status != 0 && lock == NULL)
        s->ctx->null_lock_on_failure++;
}

static void on_close(redlock_client *client, void *data)
{
    close_ctx *ctx = data;
    ctx->close_calls++;
    ctx->calls_at_close = ctx->total;
    ctx->closed_client = client;
}

static void start_ops(redlock_client *c, close_ctx *ctx, slot *slots, int n)
{
    for (int i = 0; i < n; i++) {
        char name[32];
        int len = snprintf(name, sizeof(name), "close:%d", i);
        slots[i] = (slot){ctx, i};
        assert_int_equal(redlock_acquire(c, name, (size_t)len, 10000, NULL, on_op, &slots[i]), 0);
    }
}

static void run_until_closed(h_env *env, close_ctx *ctx)
{
    assert_true(h_run_until(&env->loop, &ctx->close_calls, 1, 10000));
    h_run_for(&env->loop, 20); /* nothing fires after the close callback */
    assert_int_equal(ctx->close_calls, 1);
}

/* 11. close right after starting 50 acquires, on a client that is connected and on one that is
 * still connecting: every callback fires once with ECANCELED, then the close callback. */
static void close_with_acquires_in_flight(void **state)
{
    (void)state;
    for (int connected = 0; connected < 2; connected++) {
        h_env env;
        h_env_start(&env, N, NULL);
        redlock_client *c = h_client(&env, NULL);
        if (connected)
            h_wait_ready(&env, c);
        close_ctx ctx;
        memset(&ctx, 0, sizeof(ctx));
        slot slots[OPS];
        start_ops(c, &ctx, slots, OPS);
        assert_int_equal(redlock_client_close(c, on_close, &ctx), 0);
        env.client = NULL;
        /* Closing twice, or starting anything on a closing client, is refused at once. */
        assert_int_equal(redlock_client_close(c, on_close, &ctx), REDLOCK_ECLOSING);
        assert_int_equal(redlock_acquire(c, "late", 4, 1000, NULL, on_op, &slots[0]),
                         REDLOCK_ECLOSING);
        run_until_closed(&env, &ctx);
        assert_int_equal(ctx.total, OPS);
        assert_int_equal(ctx.calls_at_close, OPS);
        assert_int_equal(ctx.canceled, OPS);
        assert_int_equal(ctx.null_lock_on_failure, OPS);
        for (int i = 0; i < OPS; i++)
            assert_int_equal(ctx.calls[i], 1);
        assert_true(ctx.closed_client == c);
        h_env_stop(&env); /* uv_loop_close() == 0: nothing left open */
    }
}

/* Close with locks held and a release, an extend and acquires in flight; the held locks'
 * handles go away with the client. */
static void close_with_mixed_operations(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_record held1, held2;
    assert_int_equal(h_acquire(&env, c, "close:held1", 10000, NULL, &held1), 0);
    assert_int_equal(h_acquire(&env, c, "close:held2", 10000, NULL, &held2), 0);
    close_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    slot slots[OPS];
    start_ops(c, &ctx, slots, 10);
    slots[10] = (slot){&ctx, 10};
    slots[11] = (slot){&ctx, 11};
    assert_int_equal(redlock_release(held1.lock, on_op, &slots[10]), 0);
    assert_int_equal(redlock_extend(held2.lock, 10000, 0, on_op, &slots[11]), 0);
    /* held2's handle is never freed by the test: the close frees it (ASan would see a leak). */
    redlock_lock_free(held1.lock); /* freed after its release's callback */
    assert_int_equal(redlock_client_close(c, on_close, &ctx), 0);
    env.client = NULL;
    run_until_closed(&env, &ctx);
    assert_int_equal(ctx.total, 12);
    assert_int_equal(ctx.calls_at_close, 12);
    assert_int_equal(ctx.canceled, 12);
    for (int i = 0; i < 12; i++)
        assert_int_equal(ctx.calls[i], 1);
    h_env_stop(&env);
}

/* Close from inside an acquire callback. */
typedef struct inside_ctx {
    close_ctx base;
    redlock_client *client;
    int close_rc;
    int closed_in_call; /* which callback closed */
} inside_ctx;

static void on_op_then_close(redlock_lock *lock, int status, const redlock_result *result,
                             void *data)
{
    slot *s = data;
    inside_ctx *ctx = (inside_ctx *)s->ctx;
    on_op(lock, status, result, data);
    if (ctx->closed_in_call == 0) {
        ctx->closed_in_call = ctx->base.total;
        ctx->close_rc = redlock_client_close(ctx->client, on_close, &ctx->base);
        /* The lock handed to us stays readable until this callback returns. */
        if (lock != NULL)
            assert_non_null(redlock_lock_token(lock, NULL));
    }
}

static void close_from_inside_acquire_callback(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_wait_ready(&env, c);
    inside_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    ctx.client = c;
    slot slots[OPS];
    for (int i = 0; i < 20; i++) {
        char name[32];
        int len = snprintf(name, sizeof(name), "inside:%d", i);
        slots[i] = (slot){&ctx.base, i};
        assert_int_equal(
            redlock_acquire(c, name, (size_t)len, 10000, NULL, on_op_then_close, &slots[i]), 0);
    }
    env.client = NULL;
    run_until_closed(&env, &ctx.base);
    assert_int_equal(ctx.close_rc, 0);
    assert_int_equal(ctx.closed_in_call, 1);
    assert_int_equal(ctx.base.total, 20);
    assert_int_equal(ctx.base.calls_at_close, 20);
    assert_int_equal(ctx.base.succeeded, 1); /* the one that closed */
    assert_int_equal(ctx.base.succeeded + ctx.base.canceled, 20);
    for (int i = 0; i < 20; i++)
        assert_int_equal(ctx.base.calls[i], 1);
    h_env_stop(&env);
}

/* A release (and a second acquire) started from inside an acquire callback, with the handle
 * freed right there too. */
typedef struct chain_ctx {
    h_env *env;
    h_record acquired;
    h_record released;
    h_record second;
    int release_rc, acquire_rc;
    char token[64];
} chain_ctx;

static void on_chain_acquired(redlock_lock *lock, int status, const redlock_result *result,
                              void *data)
{
    chain_ctx *ctx = data;
    h_record_cb(lock, status, result, &ctx->acquired);
    if (status != 0)
        return;
    snprintf(ctx->token, sizeof(ctx->token), "%s", redlock_lock_token(lock, NULL));
    ctx->release_rc = redlock_release(lock, h_record_cb, &ctx->released);
    /* The same resource again, from the callback: it may only be taken after the release. */
    ctx->acquire_rc = redlock_acquire(redlock_lock_client(lock), "chain:1", 7, 10000, NULL,
                                      h_record_cb, &ctx->second);
    redlock_lock_free(lock); /* the release in flight keeps it alive until its callback */
    assert_int_equal(ctx->released.calls, 0); /* never called back from inside the call */
}

static void release_from_inside_acquire_callback(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    /* A cold script cache is test_scripts.c's business. */
    h_load_scripts(&env);
    chain_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    ctx.env = &env;
    assert_int_equal(redlock_acquire(c, "chain:1", 7, 10000, NULL, on_chain_acquired, &ctx), 0);
    assert_true(h_run_until(&env.loop, &ctx.acquired.calls, 1, 10000));
    assert_int_equal(ctx.acquired.status, 0);
    assert_int_equal(ctx.release_rc, 0);
    assert_int_equal(ctx.acquire_rc, 0);
    assert_true(h_run_until(&env.loop, &ctx.released.calls, 1, 10000));
    assert_true(h_run_until(&env.loop, &ctx.second.calls, 1, 10000));
    h_run_for(&env.loop, 50);
    assert_int_equal(ctx.acquired.calls, 1);
    assert_int_equal(ctx.released.calls, 1);
    assert_int_equal(ctx.released.status, 0);
    assert_int_equal(ctx.released.votes_yes, N);
    assert_int_equal(ctx.second.calls, 1);
    /* Written after the release on every connection, the second acquire finds the key free
     * everywhere. */
    assert_int_equal(ctx.second.status, 0);
    size_t token_len = 0;
    const char *token = redlock_lock_token(ctx.second.lock, &token_len);
    assert_string_not_equal(token, ctx.token);
    assert_true(h_wait_holding(&env, "chain:1", 7, token, token_len, N, H_WAIT_MS));
    h_record rel;
    assert_int_equal(h_release(&env, ctx.second.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, N);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(h_dbsize(&env, i), 0);
    redlock_lock_free(ctx.second.lock);
    h_env_stop(&env);
}

/* Close from a release callback and from an extend callback. */
typedef struct later_close {
    redlock_client *client;
    h_record rec;
    int close_rc;
    close_ctx closing;
} later_close;

static void record_then_close(redlock_lock *lock, int status, const redlock_result *result,
                              void *data)
{
    later_close *lc = data;
    h_record_cb(lock, status, result, &lc->rec);
    lc->close_rc = redlock_client_close(lc->client, on_close, &lc->closing);
}

static void close_from_release_and_extend_callbacks(void **state)
{
    (void)state;
    for (int use_extend = 0; use_extend < 2; use_extend++) {
        h_env env;
        h_env_start(&env, N, NULL);
        redlock_client *c = h_client(&env, NULL);
        h_record rec;
        assert_int_equal(h_acquire(&env, c, "close:cb", 10000, NULL, &rec), 0);
        later_close lc;
        memset(&lc, 0, sizeof(lc));
        lc.client = c;
        if (use_extend)
            assert_int_equal(redlock_extend(rec.lock, 10000, 0, record_then_close, &lc), 0);
        else
            assert_int_equal(redlock_release(rec.lock, record_then_close, &lc), 0);
        env.client = NULL;
        run_until_closed(&env, &lc.closing);
        assert_int_equal(lc.rec.calls, 1);
        assert_int_equal(lc.rec.status, 0);
        assert_int_equal(lc.close_rc, 0);
        if (!use_extend)
            assert_int_equal(lc.rec.votes_yes, N);
        h_env_stop(&env);
    }
}

/* What the close tells comes in the order docs/api.md promises (redlock_client_close, steps 3
 * and 4): every pending operation (REDLOCK_ECANCELED), then every auto-extended lock's lost
 * callback, the handle still valid there, then every hold of redlock_using its ended, then the
 * close callback; and what the client held is released. */
#define ORDER_EVENTS 16
static struct {
    const char *event[ORDER_EVENTS];
    int n;
    bool closed;
} order;

static void order_add(const char *event)
{
    assert_true(order.n < ORDER_EVENTS);
    order.event[order.n++] = event;
}

static void order_op(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)result;
    assert_null(lock);
    assert_int_equal(status, REDLOCK_ECANCELED);
    order_add(data);
}

static void order_lost(redlock_lock *lock, int reason, void *data)
{
    assert_int_equal(reason, REDLOCK_ECANCELED);
    size_t len = 0;
    assert_non_null(redlock_lock_resource(lock, &len));
    assert_int_equal(len, strlen("order:x")); /* a, b or c */
    order_add(data);
}

static void order_work(redlock_lock *lock, void *data)
{
    (void)lock;
    (void)data;
    order_add("work c");
}

static void order_ended(redlock_hold_end end, int status, const redlock_result *result, void *data)
{
    (void)result;
    (void)data;
    assert_int_equal(end, REDLOCK_HOLD_CANCELED);
    assert_int_equal(status, REDLOCK_ECANCELED);
    order_add("ended c");
}

static void order_closed(redlock_client *client, void *data)
{
    (void)client;
    (void)data;
    order_add("closed");
    order.closed = true;
}

static void close_tells_in_the_documented_order(void **state)
{
    (void)state;
    memset(&order, 0, sizeof(order));
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    redlock_auto_opts ao;
    redlock_auto_opts_init(&ao);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.auto_extend = &ao;
    lo.lost_cb = order_lost;
    h_record a, b;
    lo.lost_data = "lost a";
    assert_int_equal(h_acquire(&env, c, "order:a", 10000, &lo, &a), 0);
    lo.lost_data = "lost b";
    assert_int_equal(h_acquire(&env, c, "order:b", 10000, &lo, &b), 0);
    lo.lost_data = "lost c";
    assert_int_equal(
        redlock_using(c, "order:c", REDLOCK_STRLEN, 10000, &lo, order_work, order_ended, NULL), 0);
    assert_true(h_run_until(&env.loop, &order.n, 1, H_WAIT_MS)); /* the work runs */
    assert_int_equal(redlock_acquire(c, "order:d", REDLOCK_STRLEN, 10000, NULL, order_op, "op d"),
                     0);
    assert_int_equal(redlock_client_close(c, order_closed, NULL), 0);
    env.client = NULL;
    assert_true(h_run_until_true(&env.loop, &order.closed, H_WAIT_MS));
    const char *want[] = {"work c", "op d", "lost a", "lost b", "lost c", "ended c", "closed"};
    assert_int_equal(order.n, sizeof(want) / sizeof(want[0]));
    for (int i = 0; i < order.n; i++)
        assert_string_equal(order.event[i], want[i]);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(h_dbsize(&env, i), 0);
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        H_TEST(close_with_acquires_in_flight),
        H_TEST(close_with_mixed_operations),
        H_TEST(close_from_inside_acquire_callback),
        H_TEST(release_from_inside_acquire_callback),
        H_TEST(close_from_release_and_extend_callbacks),
        H_TEST(close_tells_in_the_documented_order),
    };
    return cmocka_run_group_tests_name("close", tests, NULL, NULL);
}
