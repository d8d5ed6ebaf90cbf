/* SPDX-License-Identifier: MIT */
/* test_stall.c - two of five nodes stopped (SIGSTOP) for five seconds under heavy lock traffic:
 * no call waits longer than one node timeout for them, nothing piles up in memory behind the
 * silent connections, and once they continue (SIGCONT) the client uses them again.
 *
 * Only the two stopped nodes have a short deadline (100 ms, in their URLs); the three others
 * have seconds, so a loaded machine can never make one of them time out: every call succeeds
 * because three nodes always answer, not because the machine was fast enough. */
#include "traffic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 5
#define MS 1000ull /* microseconds per millisecond */
#define SLOTS 64

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

#ifdef UNDER_ASAN
/* From the ASan runtime (sanitizer/allocator_interface.h, not installed everywhere): the bytes
 * the program has allocated and not freed. */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

enum { E_ALL_UP, E_STOPPED, E_LATE_STOP, E_CONTINUED, E_RECOVERED };

static h_env env; /* file-level: the teardown stops (and resumes) its servers after a failure */

/* This process's resident set size in KiB, from /proc/self/status (0 if unreadable). Under
 * ASan, freed memory sits in quarantine and inflates the RSS with every allocation made, so
 * there the sanitizer's count of live heap bytes stands in for it. */
static unsigned long rss_kib(void)
{
#ifdef UNDER_ASAN
    return (unsigned long)(__sanitizer_get_current_allocated_bytes() / 1024) + 1;
#endif
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL)
        return 0;
    char line[256];
    unsigned long kib = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "VmRSS:", 6) == 0) {
            kib = strtoul(line + 6, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kib;
}

static void two_nodes_stopped_five_seconds_under_load(void **state)
{
    (void)state;
    h_env_start(&env, N, NULL);
    /* Nodes 1 and 3 are the ones stopped: only they have the short deadline. */
    const uint64_t timeout_ms = 100;
    char urls_buf[N][96];
    const char *urls[N];
    for (unsigned i = 0; i < N; i++) {
        if (i == 1 || i == 3)
            snprintf(urls_buf[i], sizeof(urls_buf[i]), "%s?timeout_ms=%llu", env.cluster.urls[i],
                     (unsigned long long)timeout_ms);
        else
            snprintf(urls_buf[i], sizeof(urls_buf[i]), "%s", env.cluster.urls[i]);
        urls[i] = urls_buf[i];
    }
    redlock_options o;
    h_test_options(&o);
    o.node_timeout_ms = 10000;
    o.retry_count = 0;
    o.connect_timeout_ms = 300;
    o.reconnect_min_ms = 20;
    o.reconnect_max_ms = 500;
    redlock_client *c = NULL;
    char err[256] = "";
    if (h_client_urls(&env, urls, N, &o, &c, err, sizeof(err)) != 0)
        fail_msg("client: %s", err);
    h_wait_ready(&env, c);
    /* A call waits for a stopped node one node timeout at most (retry_count 0). The bound adds
     * seconds of slack for a loaded machine under ASan with 64 calls in flight, and stays under
     * the five seconds the nodes are stopped: a call that waited for them would exceed it. */
    const uint64_t bound_us = (timeout_ms + 3000) * MS;

    /* Far longer than any call takes, even on a machine that stalls us for seconds (a won round
     * that took longer than the ttl is refused: REDLOCK_EEXPIRED). */
    const uint64_t ttl_ms = 10000;
    traffic t;
    traffic_start(&t, &env, c, SLOTS, "fault:stall", ttl_ms);
    h_run_for(&env.loop, 500);
    assert_int_equal(fixture_pause(&env.cluster, 1), 0);
    assert_int_equal(fixture_pause(&env.cluster, 3), 0);
    traffic_set_epoch(&t, E_STOPPED);
    /* Let the client settle into the stopped state (requests timing out, the silent connections
     * dropped and retried), then watch memory over the rest of the five seconds. */
    h_run_for(&env.loop, 1000);
    traffic_set_epoch(&t, E_LATE_STOP);
    unsigned long rss_before = rss_kib();
    h_run_for(&env.loop, 4000);
    unsigned long rss_after = rss_kib();
    uint64_t resumed_us = redlock_now_us();
    assert_int_equal(fixture_resume(&env.cluster, 1), 0);
    assert_int_equal(fixture_resume(&env.cluster, 3), 0);
    traffic_set_epoch(&t, E_CONTINUED);
    /* The resumed nodes are used again: a lock on a fresh resource is confirmed by all five while
     * the traffic goes on. (The traffic's own resources may still be held on the resumed nodes by
     * SETs they received before the stop and ran after it: see the end of the test.) */
    uint64_t t0 = redlock_now_us();
    bool back = h_wait_release_votes(&env, c, N, 10000);
    uint64_t back_us = h_since_us(t0);
    traffic_set_epoch(&t, E_RECOVERED);
    h_run_for(&env.loop, 500);
    h_run_until(&env.loop, &t.by_epoch[E_RECOVERED].acquires_ok, SLOTS, 10000);
    assert_true(traffic_stop(&t, 10000));

    if (getenv("FAULT_VERBOSE") != NULL)
        fprintf(stderr, "rss %lu KiB -> %lu KiB; back after %llu ms\n", rss_before, rss_after,
                (unsigned long long)(back_us / MS));
    for (unsigned e = E_ALL_UP; e <= E_RECOVERED; e++) {
        const traffic_stats *sets[2] = {&t.by_epoch[e], &t.straddle[e]};
        for (int k = 0; k < 2; k++) {
            const traffic_stats *st = sets[k];
            if (st->ok + (k == 1 ? st->releases_unproven : 0) != st->calls ||
                st->max_latency_us >= bound_us || st->immediate_errors)
                traffic_dump(&t, e);
            /* Three nodes always answer: every call succeeds, stopped nodes or not - but a
             * release of a lock acquired just before the stop may be unproven (ENOQUORUM): a
             * stopped node was one of its few kept nodes (docs/safety.md). */
            assert_int_equal(st->ok + (k == 1 ? st->releases_unproven : 0), st->calls);
            assert_int_equal(st->immediate_errors, 0);
            /* No callback later than one node timeout after its call. */
            assert_true(st->max_latency_us < bound_us);
        }
    }
    /* The client kept working all along (not one call per timeout: acquires are decided by the
     * three live nodes without waiting for the stopped ones). */
    assert_true(t.by_epoch[E_LATE_STOP].acquires_ok >= 4 * SLOTS);
    assert_true(t.by_epoch[E_LATE_STOP].max_acquire_latency_us < bound_us);
    /* The stopped nodes were really waited for (releases wait for every node). */
    assert_true(t.by_epoch[E_STOPPED].max_votes_timeout >= 1);
    assert_int_equal(t.by_epoch[E_LATE_STOP].min_release_votes_yes, 3);
    /* Memory stays bounded while requests to the stopped nodes go unanswered. */
    const unsigned long max_growth_kib = 4 * 1024;
    assert_true(rss_before > 0);
    if (rss_after > rss_before + max_growth_kib)
        fail_msg("RSS grew from %lu KiB to %lu KiB while two nodes were stopped", rss_before,
                 rss_after);
    /* After SIGCONT every node answers again (reconnects back off to 500 ms at most; the bound
     * is seconds of slack on that), and none counts as down any more. The resumed two keep
     * their 100 ms deadline, which a loaded machine may now and then miss (a timeout vote, not
     * an error). */
    if (!back)
        traffic_dump(&t, E_CONTINUED);
    assert_true(back);
    if (t.by_epoch[E_RECOVERED].max_votes_error != 0)
        traffic_dump(&t, E_RECOVERED);
    assert_int_equal(t.by_epoch[E_RECOVERED].max_votes_error, 0);
    assert_true(t.by_epoch[E_RECOVERED].acquires_ok >= SLOTS);
    /* SETs that reached the stopped nodes' sockets before their connections were given up run
     * at SIGCONT, with no release behind them: they hold those keys for one ttl from then, and
     * not longer. Any other key left is the traffic's own, set after the resume with its
     * release queued behind it on the same connection: that one is gone within moments (a lost
     * round's release is sent without anyone waiting for it, so it may still be on its way when
     * the traffic ends). So every key that outlives a few seconds of waiting expires within a
     * ttl counted from the resume: its PTTL is at most what is left of that ttl, plus the time
     * the resumed servers take to work off the backlog of every connection (SETs written before
     * the stop are applied some ms after SIGCONT, more on a loaded machine: a second allowed). */
    const uint64_t BACKLOG_MS = 1000;
    size_t keys_left = 0;
    uint64_t wait_from_us = redlock_now_us();
    for (;;) {
        char bad[256] = "";
        keys_left = 0;
        for (unsigned i = 0; i < N && bad[0] == '\0'; i++) {
            redisReply *keys = fixture_command(&env.cluster, i, "KEYS *");
            assert_non_null(keys);
            assert_int_equal(keys->type, REDIS_REPLY_ARRAY);
            for (size_t k = 0; k < keys->elements && bad[0] == '\0'; k++) {
                const redisReply *key = keys->element[k];
                uint64_t since_resume_ms = h_since_us(resumed_us) / MS; /* before the PTTL */
                long long pttl = h_pttl(&env, i, key->str, key->len);
                if (pttl == -1 ||
                    (pttl >= 0 && (uint64_t)pttl > ttl_ms - since_resume_ms + BACKLOG_MS))
                    snprintf(bad, sizeof(bad),
                             "node %u: %s has a PTTL of %lld ms, %llu ms after "
                             "the resume",
                             i, key->str, pttl, (unsigned long long)since_resume_ms);
            }
            keys_left += keys->elements;
            freeReplyObject(keys);
        }
        if (bad[0] == '\0')
            break;
        if (h_since_us(wait_from_us) > 5000 * MS)
            fail_msg("%s (and still there after 5 s)", bad);
        h_run_for(&env.loop, 100);
    }
    if (getenv("FAULT_VERBOSE") != NULL)
        fprintf(stderr, "%zu keys left after the traffic, each expiring within the ttl\n",
                keys_left);
    h_env_stop(&env);
}

/* After the test, passed or failed: no server is left for the next program (fixture_stop
 * continues the stopped ones first). */
static int teardown(void **state)
{
    (void)state;
    fixture_stop(&env.cluster);
    return 0;
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(two_nodes_stopped_five_seconds_under_load, teardown),
    };
    return cmocka_run_group_tests_name("fault-stall", tests, NULL, NULL);
}
