/* SPDX-License-Identifier: MIT */
/* traffic.c - see traffic.h. */
#include "traffic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void issue_acquire(traffic_slot *s);

static void count(traffic_slot *s, bool is_acquire, int status, const redlock_result *result)
{
    traffic *t = s->t;
    t->completed++;
    s->busy = false;
    traffic_stats *st = s->epoch == t->epoch ? &t->by_epoch[s->epoch] : &t->straddle[s->epoch];
    uint64_t latency = redlock_now_us() - s->issued_us;
    st->calls++;
    if (status == 0)
        st->ok++;
    else if (status == REDLOCK_ENOQUORUM)
        st->enoquorum++;
    else if (st->other++ == 0)
        st->other_status = status;
    if (latency > st->max_latency_us)
        st->max_latency_us = latency;
    if (is_acquire && latency > st->max_acquire_latency_us)
        st->max_acquire_latency_us = latency;
    if (is_acquire && status == 0)
        st->acquires_ok++;
    if (!is_acquire && status == REDLOCK_ENOQUORUM &&
        result->votes_yes >= redlock_quorum_of(result->n_nodes))
        st->releases_unproven++;
    if (!is_acquire && status == 0) {
        st->releases_ok++;
        if (result->votes_yes < st->min_release_votes_yes)
            st->min_release_votes_yes = result->votes_yes;
        if (result->votes_yes == result->n_nodes)
            st->releases_full++;
    }
    if (result->votes_timeout > st->max_votes_timeout)
        st->max_votes_timeout = result->votes_timeout;
    if (result->votes_error > st->max_votes_error)
        st->max_votes_error = result->votes_error;
    if (result->votes_timeout + result->votes_error > st->max_votes_failed)
        st->max_votes_failed = result->votes_timeout + result->votes_error;
    for (unsigned i = 0; i < result->n_nodes && i < H_MAX_NODES; i++) {
        if (result->nodes[i].error != NULL)
            snprintf(st->last_error[i], sizeof(st->last_error[i]), "%s", result->nodes[i].error);
    }
}

static void refused_at_once(traffic_slot *s)
{
    /* No callback comes for a call refused at once: count it so the test sees it. */
    s->busy = false;
    s->t->by_epoch[s->t->epoch].immediate_errors++;
}

static void on_released(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    traffic_slot *s = data;
    count(s, false, status, result);
    redlock_lock_free(lock);
    s->lock = NULL;
    if (!s->t->stopping)
        issue_acquire(s);
}

static void on_acquired(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    traffic_slot *s = data;
    count(s, true, status, result);
    if (status != 0) {
        if (!s->t->stopping)
            issue_acquire(s);
        return;
    }
    /* Always release a won lock, even when stopping, so no key outlives the test. */
    s->lock = lock;
    s->issued_us = redlock_now_us(); /* s->epoch stays the acquire's */
    s->busy = true;
    s->t->issued++;
    if (redlock_release(lock, on_released, s) != 0) {
        s->t->issued--;
        refused_at_once(s);
        redlock_lock_free(lock);
        s->lock = NULL;
    }
}

static void issue_acquire(traffic_slot *s)
{
    traffic *t = s->t;
    s->issued_us = redlock_now_us();
    s->epoch = t->epoch;
    s->busy = true;
    t->issued++;
    if (redlock_acquire(t->client, s->resource, strlen(s->resource), t->ttl_ms, NULL, on_acquired,
                        s) != 0) {
        t->issued--;
        refused_at_once(s);
    }
}

void traffic_start(traffic *t, h_env *env, redlock_client *client, unsigned n_slots,
                   const char *prefix, uint64_t ttl_ms)
{
    assert_true(n_slots > 0 && n_slots <= TRAFFIC_MAX_SLOTS);
    memset(t, 0, sizeof(*t));
    t->env = env;
    t->client = client;
    t->n_slots = n_slots;
    t->ttl_ms = ttl_ms;
    for (unsigned e = 0; e < TRAFFIC_MAX_EPOCHS; e++) {
        t->by_epoch[e].min_release_votes_yes = REDLOCK_MAX_NODES;
        t->straddle[e].min_release_votes_yes = REDLOCK_MAX_NODES;
    }
    for (unsigned i = 0; i < n_slots; i++) {
        traffic_slot *s = &t->slots[i];
        s->t = t;
        s->index = i;
        snprintf(s->resource, sizeof(s->resource), "%s:%u", prefix, i);
        issue_acquire(s);
    }
}

void traffic_set_epoch(traffic *t, unsigned epoch)
{
    assert_true(epoch < TRAFFIC_MAX_EPOCHS);
    t->epoch = epoch;
}

bool traffic_stop(traffic *t, uint64_t timeout_ms)
{
    const char *verbose = getenv("FAULT_VERBOSE");
    if (verbose != NULL && verbose[0] != '\0') {
        for (unsigned e = 0; e <= t->epoch; e++)
            traffic_dump(t, e);
    }
    t->stopping = true;
    /* issued only grows while a won acquire turns into its release; completed catches up. */
    uint64_t deadline = redlock_now_us() + timeout_ms * 1000;
    while (t->completed < t->issued && redlock_now_us() < deadline)
        h_run_for(&t->env->loop, 10);
    return t->completed == t->issued;
}

void traffic_dump(const traffic *t, unsigned epoch)
{
    const traffic_stats *sets[2] = {&t->by_epoch[epoch], &t->straddle[epoch]};
    for (int k = 0; k < 2; k++) {
        const traffic_stats *st = sets[k];
        fprintf(
            stderr,
            "epoch %u %s: calls %d ok %d enoquorum %d other %d (%s) acquires_ok %d "
            "releases_ok %d releases_full %d immediate %d max_latency %llu us max_acquire %llu us "
            "min_release_yes %u max_timeouts %u max_errors %u max_failed %u\n",
            epoch, k == 0 ? "clean" : "straddling", st->calls, st->ok, st->enoquorum, st->other,
            st->other != 0 ? redlock_err_name(st->other_status) : "-", st->acquires_ok,
            st->releases_ok, st->releases_full, st->immediate_errors,
            (unsigned long long)st->max_latency_us, (unsigned long long)st->max_acquire_latency_us,
            st->min_release_votes_yes, st->max_votes_timeout, st->max_votes_error,
            st->max_votes_failed);
        for (unsigned i = 0; i < H_MAX_NODES; i++) {
            if (st->last_error[i][0] != '\0')
                fprintf(stderr, "  node %u last error: %s\n", i, st->last_error[i]);
        }
    }
}
