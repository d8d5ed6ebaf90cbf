/* SPDX-License-Identifier: MIT */
/* test_fencing_order.c - fences only grow (issue 12), on real servers: 8 clients take one
 * resource 1,000 times in turn, each releasing at once; every fence must be strictly greater
 * than the one granted before it. Three times: healthy nodes; nodes killed and restarted with
 * their data (AOF, appendfsync always); nodes restarted empty, one at a time, with
 * fence_commit = quorum + 1, which is what keeps fences growing when a node may forget its
 * counter (docs/safety.md).
 *
 * All clients share one loop, so the order in which their acquire callbacks run is the order of
 * the grants. A restart runs inside a grant's callback, so at most one happens between two grants:
 * "one node at a time". Node timeouts are seconds; acquires wait up to 60 s for their turn. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 5
#define CLIENTS 8
#define GRANTS 1000
#define RESTART_EVERY 100 /* grants between two restarts */

#define RESOURCE "fence:order"

typedef struct run run;

typedef struct worker {
    run *r;
    redlock_client *client;
} worker;

struct run {
    h_env *env;
    redlock_lock_opts lo;
    bool restarts;
    worker workers[CLIENTS];
    int grants;
    int failures; /* acquires that gave up (they are started again) */
    int idle;     /* workers that stopped */
    uint64_t last_fence;
    unsigned restarted;
    char violation[256];
};

static void start_acquire(worker *w);

static void on_released(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)status; /* a release after a restart may find fewer keys: not the subject here */
    (void)result;
    worker *w = data;
    redlock_lock_free(lock);
    start_acquire(w);
}

static void on_acquired(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    worker *w = data;
    run *r = w->r;
    if (status != 0) {
        r->failures++;
        start_acquire(w);
        return;
    }
    uint64_t fence = redlock_lock_fence(lock);
    if (fence != result->fence && r->violation[0] == '\0')
        snprintf(r->violation, sizeof(r->violation), "grant %d: result fence %llu, lock %llu",
                 r->grants, (unsigned long long)result->fence, (unsigned long long)fence);
    if (fence <= r->last_fence && r->violation[0] == '\0')
        snprintf(r->violation, sizeof(r->violation),
                 "grant %d: fence %llu after fence %llu (client %d)", r->grants,
                 (unsigned long long)fence, (unsigned long long)r->last_fence,
                 (int)(w - r->workers));
    r->last_fence = fence;
    r->grants++;
    if (r->restarts && r->grants % RESTART_EVERY == 0) {
        unsigned node = r->restarted++ % N;
        assert_int_equal(fixture_restart(&r->env->cluster, node), 0);
    }
    if (redlock_release(lock, on_released, w) != 0) {
        redlock_lock_free(lock);
        start_acquire(w);
    }
}

static void start_acquire(worker *w)
{
    run *r = w->r;
    if (r->grants >= GRANTS || r->violation[0] != '\0') {
        r->idle++;
        return;
    }
    int rc = redlock_acquire(w->client, RESOURCE, strlen(RESOURCE), 5000, &r->lo, on_acquired, w);
    assert_int_equal(rc, 0);
}

static void run_grants(const char *extra_conf, bool restarts, unsigned fence_commit)
{
    h_env env;
    h_env_start(&env, N, extra_conf);
    run *r = calloc(1, sizeof(*r));
    assert_non_null(r);
    r->env = &env;
    r->restarts = restarts;
    redlock_lock_opts_init(&r->lo);
    r->lo.fencing = true;
    r->lo.fence_commit = fence_commit;
    r->lo.wait_ms = 60000;
    redlock_options o;
    h_test_options(&o);
    o.retry_delay_ms = 3;
    o.retry_jitter_ms = 2;
    o.reconnect_min_ms = 10;
    o.reconnect_max_ms = 100;
    for (unsigned i = 0; i < CLIENTS; i++) {
        r->workers[i].r = r;
        assert_int_equal(
            h_client_urls(&env, env.cluster.urls, N, &o, &r->workers[i].client, NULL, 0), 0);
        h_wait_ready(&env, r->workers[i].client);
    }
    uint64_t t0 = redlock_now_us();
    for (unsigned i = 0; i < CLIENTS; i++)
        start_acquire(&r->workers[i]);
    bool done = h_run_until(&env.loop, &r->idle, CLIENTS, 240000);
    if (r->violation[0] != '\0')
        fail_msg("%s", r->violation);
    assert_true(done);
    assert_true(r->grants >= GRANTS); /* those in flight at the 1000th end too */
    fprintf(stderr, "# %d grants in %.1f s, last fence %llu, %d acquires gave up, %u restarts\n",
            r->grants, (double)h_since_us(t0) / 1e6, (unsigned long long)r->last_fence, r->failures,
            r->restarted);
    for (unsigned i = 0; i < CLIENTS; i++)
        if (r->workers[i].client != env.client)
            h_close_client(&env, r->workers[i].client);
    free(r);
    h_env_stop(&env);
}

static void fences_grow_in_grant_order(void **state)
{
    (void)state;
    run_grants(NULL, false, 0);
}

static void fences_grow_across_restarts_with_data(void **state)
{
    (void)state;
    run_grants("appendonly yes\nappendfsync always\n", true, 0);
}

static void fences_grow_across_empty_restarts_with_one_more_ack(void **state)
{
    (void)state;
    run_grants(NULL, true, N / 2 + 2);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        H_TEST(fences_grow_in_grant_order),
        H_TEST(fences_grow_across_restarts_with_data),
        H_TEST(fences_grow_across_empty_restarts_with_one_more_ack),
    };
    return cmocka_run_group_tests_name("fencing_order", tests, NULL, NULL);
}
