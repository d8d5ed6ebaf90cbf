/* SPDX-License-Identifier: MIT */
/* test_fencing.c - fences on real servers (issue 12): a fenced acquire reads each node's
 * counter with its SET NX (and raises it by one), takes 1 + the largest, and commits it where its
 * key still stands and the counter is still below it; the lock is granted only when
 * fence_commit nodes confirmed. Also: the counter's key, the
 * options' checks, a commit that loses, extend (keeps the fence; a retake restores a node's
 * counter), inspect and the blocking API, release after the hold lapsed, and plain acquires
 * that never touch a counter.
 *
 * Node timeouts are seconds; the commit set is waited for with h_drain (the other nodes' commits
 * land a moment after the decision). */
#include "harness.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 5

static redlock_client *ready_client(h_env *env)
{
    redlock_client *c = h_client(env, NULL);
    h_wait_ready(env, c);
    return c;
}

static void fenced(redlock_lock_opts *lo, unsigned fence_commit)
{
    redlock_lock_opts_init(lo);
    lo->fencing = true;
    lo->fence_commit = fence_commit;
}

/* The counter of lock key key on server i: 0 when absent; fails on anything but a number. */
static uint64_t counter(h_env *env, unsigned i, const char *key)
{
    char name[128];
    snprintf(name, sizeof(name), "%s:fence", key);
    size_t len = 0;
    char *v = h_get(env, i, name, strlen(name), &len);
    if (v == NULL)
        return 0;
    char *end = NULL;
    uint64_t n = strtoull(v, &end, 10);
    assert_true(len > 0 && end == v + len);
    free(v);
    assert_int_equal(h_pttl(env, i, name, strlen(name)), -1); /* never expires */
    return n;
}

static void set_counter(h_env *env, unsigned i, const char *key, const char *value)
{
    char name[128];
    snprintf(name, sizeof(name), "%s:fence", key);
    h_set(env, i, name, strlen(name), value);
}

/* A fresh resource gets fence 1, the next holder 2; each commits it on every node (where every
 * SET landed); the result, the handle and the counters agree; each node's result entry shows
 * the counter its yes read. */
static void fences_grow_from_one(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = ready_client(&env);
    redlock_lock_opts lo;
    fenced(&lo, 0);
    h_record rec, rel;
    for (uint64_t want = 1; want <= 3; want++) {
        assert_int_equal(h_acquire(&env, c, "fence:grow", 10000, &lo, &rec), 0);
        assert_true(rec.fence == want);
        assert_true(redlock_lock_fence(rec.lock) == want);
        assert_int_equal(rec.attempts, 1);
        h_assert_validity(&rec, 10000, redlock_lock_validity_ms(rec.lock));
        /* The commit round's result: the quorum confirmed at least; each node's counter as its
         * yes read it (the previous fence, or 0 where the node did not vote yes). */
        assert_true(rec.votes_yes >= N / 2 + 1);
        for (unsigned i = 0; i < N; i++)
            assert_true(rec.node_fence[i] == want - 1 || rec.node_fence[i] == 0);
        h_drain(&env, c);
        for (unsigned i = 0; i < N; i++)
            assert_true(counter(&env, i, "fence:grow") == want);
        assert_int_equal(h_release(&env, rec.lock, &rel), 0);
        assert_true(rel.fence == want); /* the release's result names the lock's fence */
        redlock_lock_free(rec.lock);
    }
    /* A plain acquire neither reads nor writes a counter, and has no fence. */
    assert_int_equal(h_acquire(&env, c, "fence:grow", 10000, NULL, &rec), 0);
    assert_true(rec.fence == 0);
    assert_true(redlock_lock_fence(rec.lock) == 0);
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    redlock_lock_free(rec.lock);
    assert_int_equal(h_acquire(&env, c, "fence:plain-only", 10000, NULL, &rec), 0);
    h_drain(&env, c);
    for (unsigned i = 0; i < N; i++) {
        assert_true(counter(&env, i, "fence:grow") == 3);
        assert_true(counter(&env, i, "fence:plain-only") == 0);
    }
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

/* Requests the client has sent to node i so far, less its probes (a late yes makes one). */
static uint64_t requests_sent(redlock_client *c, unsigned i)
{
    redlock_node_info info;
    redlock_node_info_init(&info);
    assert_int_equal(redlock_client_node_info(c, i, &info), 0);
    return info.requests - info.probes;
}

/* The commit goes only where the fence is missing. The acquire's script raises each yes-voter's
 * counter by one: where that makes the fence (the node read the largest counter), the node has
 * confirmed already and gets no commit. Counters that agree: no commit at all. Counters 41 on
 * three nodes and 40 on two (any quorum has one of the three, so the fence is 42), with
 * fence_commit = 5 so that the commit round cannot end on the acquire's answers: the two behind,
 * at 41 after their acquire, each get the commit, and the lock is granted only once all five
 * hold 42. */
static void commit_only_where_the_fence_is_missing(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = ready_client(&env);
    redlock_lock_opts lo;
    fenced(&lo, 0);
    uint64_t before[N];
    h_record rec, rel;

    for (unsigned i = 0; i < N; i++)
        before[i] = requests_sent(c, i);
    assert_int_equal(h_acquire(&env, c, "fence:agree", 10000, &lo, &rec), 0);
    assert_true(rec.fence == 1);
    assert_true(rec.votes_yes >= N / 2 + 1);
    for (unsigned i = 0; i < N; i++) /* a commit would have been sent before the grant */
        assert_true(requests_sent(c, i) - before[i] == 1);
    h_drain(&env, c);
    for (unsigned i = 0; i < N; i++)
        assert_true(counter(&env, i, "fence:agree") == 1);
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    redlock_lock_free(rec.lock);

    /* Three nodes ahead: first 0-2, then 2-4 (answers tend to come in the order of sending, so
     * in one of the two the nodes behind are among the deciding yes votes). */
    fenced(&lo, N);
    for (unsigned first = 0; first <= 2; first += 2) {
        char key[32];
        snprintf(key, sizeof(key), "fence:ahead-%u", first);
        bool ahead[N];
        for (unsigned i = 0; i < N; i++) {
            ahead[i] = i >= first && i < first + 3;
            set_counter(&env, i, key, ahead[i] ? "41" : "40");
            before[i] = requests_sent(c, i);
        }
        assert_int_equal(h_acquire(&env, c, key, 10000, &lo, &rec), 0);
        assert_true(rec.fence == 42);
        for (unsigned i = 0; i < N; i++) /* granted once all five confirmed */
            assert_true(counter(&env, i, key) == 42);
        /* A node ahead confirmed with its acquire, unless that answered after the decision (then
         * a commit went too); a node behind read 40, so it got the commit. */
        unsigned confirmed_by_acquire = 0;
        for (unsigned i = 0; i < N; i++) {
            uint64_t sent = requests_sent(c, i) - before[i];
            if (ahead[i]) {
                assert_true(sent == 1 || sent == 2);
                confirmed_by_acquire += sent == 1;
            } else {
                assert_true(sent == 2); /* the acquire, then the commit */
            }
        }
        assert_true(confirmed_by_acquire >= 1);
        h_drain(&env, c);
        for (unsigned i = 0; i < N; i++)
            assert_true(counter(&env, i, key) == 42);
        assert_int_equal(h_release(&env, rec.lock, &rel), 0);
        redlock_lock_free(rec.lock);
    }
    h_env_stop(&env);
}

/* The acquire's script writes counter + 1 itself, digits carried by hand (no Lua number holds
 * every counter): with counters that agree, no commit goes and the counters are the script's. */
static void acquire_raises_the_counter_by_one(void **state)
{
    (void)state;
    static const struct {
        const char *from, *to;
    } cases[] = {{"0", "1"},
                 {"9", "10"},
                 {"199", "200"},
                 {"1099", "1100"},
                 {"4294967295", "4294967296"},
                 {"9007199254740993", "9007199254740994"}}; /* above 2^53: no double */
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = ready_client(&env);
    redlock_lock_opts lo;
    fenced(&lo, 0);
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        char key[32], name[48];
        snprintf(key, sizeof(key), "fence:plus-%zu", k);
        snprintf(name, sizeof(name), "%s:fence", key);
        for (unsigned i = 0; i < N; i++)
            set_counter(&env, i, key, cases[k].from);
        uint64_t before[N];
        for (unsigned i = 0; i < N; i++)
            before[i] = requests_sent(c, i);
        h_record rec, rel;
        assert_int_equal(h_acquire(&env, c, key, 10000, &lo, &rec), 0);
        assert_true(rec.fence == strtoull(cases[k].to, NULL, 10));
        for (unsigned i = 0; i < N; i++)
            assert_true(requests_sent(c, i) - before[i] == 1); /* no commit */
        h_drain(&env, c);
        for (unsigned i = 0; i < N; i++) {
            size_t len = 0;
            char *v = h_get(&env, i, name, strlen(name), &len);
            assert_non_null(v);
            assert_string_equal(v, cases[k].to);
            free(v);
        }
        assert_int_equal(h_release(&env, rec.lock, &rel), 0);
        redlock_lock_free(rec.lock);
    }
    h_env_stop(&env);
}

/* The fence is 1 + the largest counter among the yes voters: counters left by earlier holders
 * (or set by an operator) are respected; and the counter's key has the key prefix. */
static void fence_follows_the_counters(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_options o;
    h_test_options(&o);
    o.key_prefix = "app:";
    redlock_client *c = h_client(&env, &o);
    h_wait_ready(&env, c);
    for (unsigned i = 0; i < N; i++)
        set_counter(&env, i, "app:fence:res", "41");
    redlock_lock_opts lo;
    fenced(&lo, 0);
    h_record rec, rel;
    assert_int_equal(h_acquire(&env, c, "fence:res", 10000, &lo, &rec), 0);
    assert_true(rec.fence == 42);
    h_drain(&env, c);
    for (unsigned i = 0; i < N; i++)
        assert_true(counter(&env, i, "app:fence:res") == 42);
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    redlock_lock_free(rec.lock);

    /* Counters near the top: 2^64 - 2 is the largest a fence can come from. */
    for (unsigned i = 0; i < N; i++)
        set_counter(&env, i, "app:fence:top", "18446744073709551614");
    assert_int_equal(h_acquire(&env, c, "fence:top", 10000, &lo, &rec), 0);
    assert_true(rec.fence == UINT64_MAX);
    h_drain(&env, c);
    for (unsigned i = 0; i < N; i++)
        assert_true(counter(&env, i, "app:fence:top") == UINT64_MAX);
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    redlock_lock_free(rec.lock);
    /* ... and no fence is above 2^64 - 1: the acquire cannot be fenced any more. */
    assert_int_equal(h_acquire(&env, c, "fence:top", 10000, &lo, &rec), REDLOCK_ENOQUORUM);
    unsigned refused = 0;
    for (unsigned i = 0; i < N; i++)
        refused += strstr(rec.node_error[i], "out of range") != NULL;
    assert_true(refused >= N / 2 + 1);
    h_drain(&env, c);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(h_pttl(&env, i, "app:fence:top", 13), -2); /* released everywhere */
    h_env_stop(&env);
}

/* A counter that is not a number: the fenced acquire script refuses before it writes anything
 * (an error vote with the reason); plain acquires do not care. */
static void counter_not_a_number(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = ready_client(&env);
    for (unsigned i = 0; i < 3; i++)
        set_counter(&env, i, "fence:bad", i == 0 ? "abc" : i == 1 ? "007" : "-1");
    redlock_lock_opts lo;
    fenced(&lo, 0);
    h_record rec, rel;
    assert_int_equal(h_acquire(&env, c, "fence:bad", 10000, &lo, &rec), REDLOCK_ENOQUORUM);
    h_drain(&env, c);
    for (unsigned i = 0; i < N; i++) {
        if (i < 3) {
            assert_int_equal(rec.node_vote[i], REDLOCK_VOTE_ERROR);
            assert_non_null(strstr(rec.node_error[i], "fence counter is not a decimal number"));
        }
        assert_int_equal(h_pttl(&env, i, "fence:bad", 9), -2); /* never set, or released */
    }
    assert_int_equal(h_acquire(&env, c, "fence:bad", 10000, NULL, &rec), 0);
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

static void options_are_checked(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = h_client(&env, NULL);
    redlock_lock_opts lo;
    h_record rec;
    fenced(&lo, 2); /* below the quorum of 5 */
    assert_int_equal(h_acquire(&env, c, "fence:opts", 1000, &lo, &rec), REDLOCK_EINVAL);
    assert_non_null(strstr(redlock_client_last_error(c), "fence_commit 2 is out of range 3..5"));
    fenced(&lo, 6);
    assert_int_equal(h_acquire(&env, c, "fence:opts", 1000, &lo, &rec), REDLOCK_EINVAL);
    redlock_lock_opts_init(&lo);
    lo.fence_commit = 3; /* without fencing */
    assert_int_equal(h_acquire(&env, c, "fence:opts", 1000, &lo, &rec), REDLOCK_EINVAL);
    assert_non_null(strstr(redlock_client_last_error(c), "without fencing"));
    assert_int_equal(rec.calls, 0);
    assert_true(redlock_lock_fence(NULL) == 0);
    h_env_stop(&env);
}

/* fence_commit above the quorum: with one node down, 4 acks of 5 still come, 5 cannot (the
 * commit is lost on the down node's error: REDLOCK_ENOQUORUM, and the attempt's keys are
 * released everywhere). */
static void fence_commit_counts_acks(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = ready_client(&env);
    assert_int_equal(fixture_kill(&env.cluster, 4), 0);
    redlock_lock_opts lo;
    fenced(&lo, 4);
    h_record rec, rel;
    assert_int_equal(h_acquire(&env, c, "fence:acks", 10000, &lo, &rec), 0);
    assert_true(rec.fence == 1);
    assert_int_equal(rec.votes_yes, 4);
    assert_true(rec.node_vote[4] != REDLOCK_VOTE_YES);
    for (unsigned i = 0; i < 4; i++)
        assert_true(counter(&env, i, "fence:acks") == 1); /* all four were needed */
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    redlock_lock_free(rec.lock);

    fenced(&lo, 5);
    int rc = h_acquire(&env, c, "fence:acks", 10000, &lo, &rec);
    if (rc != REDLOCK_ENOQUORUM)
        h_dump_record("fence_commit 5 with a node down", &rec);
    assert_int_equal(rc, REDLOCK_ENOQUORUM);
    assert_null(rec.lock);
    assert_true(rec.fence == 0);
    h_drain(&env, c);
    for (unsigned i = 0; i < 4; i++)
        assert_int_equal(h_pttl(&env, i, "fence:acks", 10), -2); /* released everywhere */
    h_env_stop(&env);
}

/* The acquire round is won, the commit is not: two nodes hold the key for someone else, so with
 * fence_commit = 5 the commit gets 3 yes and 2 "not ours" (REDLOCK_EBUSY, the commit round's
 * per-node result); our keys are released everywhere, the other holder's stay. */
static void commit_lost_releases_everywhere(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = ready_client(&env);
    h_set(&env, 3, "fence:lost", 10, "someone-else");
    h_set(&env, 4, "fence:lost", 10, "someone-else");
    redlock_lock_opts lo;
    fenced(&lo, 5);
    h_record rec;
    int rc = h_acquire(&env, c, "fence:lost", 10000, &lo, &rec);
    if (rc != REDLOCK_EBUSY)
        h_dump_record("commit with two foreign keys", &rec);
    assert_int_equal(rc, REDLOCK_EBUSY);
    assert_int_equal(rec.attempts, 1);
    assert_null(rec.lock);
    /* The commit round's answer: decided as soon as the 5 acks were out of reach. */
    assert_int_equal(rec.node_vote[3] == REDLOCK_VOTE_NO || rec.node_vote[4] == REDLOCK_VOTE_NO,
                     true);
    h_drain(&env, c);
    for (unsigned i = 0; i < 3; i++) {
        assert_int_equal(h_pttl(&env, i, "fence:lost", 10), -2);
        assert_true(counter(&env, i, "fence:lost") == 1); /* committed there, never taken back */
    }
    assert_int_equal(h_count_holding(&env, "fence:lost", 10, "someone-else", 12), 2);
    assert_true(counter(&env, 3, "fence:lost") == 0); /* not ours: no commit there */
    /* With the default fence_commit the same attempt is granted. */
    fenced(&lo, 0);
    assert_int_equal(h_acquire(&env, c, "fence:lost", 10000, &lo, &rec), 0);
    assert_true(rec.fence == 2);
    h_record rel;
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

/* Extend keeps the fence. A node that restarts empty loses key and counter; an extend with
 * REDLOCK_EXTEND_RETAKE puts both back there. */
static void extend_keeps_fence_and_retake_restores_counter(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = ready_client(&env);
    for (unsigned i = 0; i < N; i++)
        set_counter(&env, i, "fence:ext", "6");
    redlock_lock_opts lo;
    fenced(&lo, 0);
    h_record rec, ext, rel;
    assert_int_equal(h_acquire(&env, c, "fence:ext", 20000, &lo, &rec), 0);
    assert_true(rec.fence == 7);
    assert_int_equal(h_extend(&env, rec.lock, 20000, 0, &ext), 0);
    assert_true(redlock_lock_fence(rec.lock) == 7);
    assert_true(ext.fence == 7);
    h_hear_all(&env, c); /* every key kept: node 0 back empty costs its own vote only */
    assert_int_equal(fixture_restart(&env.cluster, 0), 0);
    assert_true(counter(&env, 0, "fence:ext") == 0);
    h_wait_ready(&env, c);
    /* A plain extend leaves node 0 as it is ... */
    assert_int_equal(h_extend(&env, rec.lock, 20000, 0, &ext), 0);
    h_drain(&env, c);
    assert_int_equal(h_pttl(&env, 0, "fence:ext", 9), -2);
    assert_true(counter(&env, 0, "fence:ext") == 0);
    /* ... a retake restores key and counter there. */
    assert_int_equal(h_extend(&env, rec.lock, 20000, REDLOCK_EXTEND_RETAKE, &ext), 0);
    h_drain(&env, c);
    size_t token_len;
    const char *token = redlock_lock_token(rec.lock, &token_len);
    assert_int_equal(h_count_holding(&env, "fence:ext", 9, token, token_len), N);
    assert_true(counter(&env, 0, "fence:ext") == 7);
    /* A retake never lowers a counter: node 1's is raised by someone meanwhile. */
    set_counter(&env, 1, "fence:ext", "90");
    h_del(&env, 1, "fence:ext", 9);
    assert_int_equal(h_extend(&env, rec.lock, 20000, REDLOCK_EXTEND_RETAKE, &ext), 0);
    h_drain(&env, c);
    assert_true(counter(&env, 1, "fence:ext") == 90);
    assert_true(redlock_lock_fence(rec.lock) == 7);
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

typedef struct inspect_seen {
    int calls, status;
    uint64_t fence[N];
    uint64_t result_fence;
} inspect_seen;

static void on_inspect(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)lock;
    inspect_seen *seen = data;
    seen->calls++;
    seen->status = status;
    seen->result_fence = result->fence;
    for (unsigned i = 0; i < result->n_nodes && i < N; i++)
        seen->fence[i] = result->nodes[i].fence;
}

/* Inspect shows each node's counter, held or not; so does the blocking API, whose report and
 * handle carry the fence. */
static void inspect_and_sync_show_fences(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *c = ready_client(&env);
    for (unsigned i = 0; i < N; i++)
        set_counter(&env, i, "fence:look", i == 2 ? "12" : "3");
    inspect_seen seen = {0};
    assert_int_equal(redlock_inspect(c, "fence:look", 10, on_inspect, &seen), 0);
    assert_true(h_run_until(&env.loop, &seen.calls, 1, H_WAIT_MS));
    assert_int_equal(seen.status, 0);
    for (unsigned i = 0; i < N; i++)
        assert_true(seen.fence[i] == (i == 2 ? 12u : 3u));
    assert_true(seen.result_fence == 0);

    char err[256];
    redlock_sync *sync = NULL;
    redlock_options o;
    h_test_options(&o);
    assert_int_equal(redlock_sync_new(env.cluster.urls, N, &o, &sync, err, sizeof(err)), 0);
    redlock_lock_opts lo;
    fenced(&lo, 0);
    redlock_report *report = malloc(sizeof(*report));
    assert_non_null(report);
    redlock_report_init(report);
    redlock_sync_lock *lock = NULL;
    assert_int_equal(redlock_sync_acquire(sync, "fence:look", 10, 10000, &lo, &lock, report), 0);
    uint64_t fence = redlock_sync_lock_fence(lock);
    assert_true(fence == 4 || fence == 13); /* which nodes decided is up to the network */
    assert_true(report->fence == fence);
    assert_int_equal(redlock_sync_inspect(sync, "fence:look", 10, report), 0);
    assert_int_equal(report->n_nodes, N);
    unsigned at_fence = 0;
    for (unsigned i = 0; i < N; i++) {
        assert_true(report->nodes[i].fence >= (i == 2 ? 12u : 3u));
        at_fence += report->nodes[i].fence == fence;
    }
    assert_true(at_fence >= N / 2 + 1); /* at least the commit's quorum */
    assert_int_equal(redlock_sync_release(lock, report), 0);
    assert_true(report->fence == fence);
    redlock_sync_lock_free(lock);
    assert_true(redlock_sync_lock_fence(NULL) == 0);
    free(report);
    redlock_sync_free(sync);
    h_env_stop(&env);
}

/* A fenced lock released after its validity ran out: REDLOCK_ELOST, as any lock's (issue 17). */
static void release_of_lapsed_fenced_lock_is_lost(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, NULL);
    redlock_client *c = ready_client(&env);
    redlock_lock_opts lo;
    fenced(&lo, 0);
    lo.wait_ms = 10000; /* a 200 ms ttl: a loaded machine may need another attempt */
    h_record rec, rel;
    assert_int_equal(h_acquire(&env, c, "fence:lapsed", 200, &lo, &rec), 0);
    assert_true(rec.fence >= 1);
    while (redlock_lock_is_held(rec.lock, redlock_now_us()))
        h_run_for(&env.loop, 20);
    assert_int_equal(h_release(&env, rec.lock, &rel), REDLOCK_ELOST);
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        H_TEST(fences_grow_from_one),
        H_TEST(fence_follows_the_counters),
        H_TEST(commit_only_where_the_fence_is_missing),
        H_TEST(acquire_raises_the_counter_by_one),
        H_TEST(counter_not_a_number),
        H_TEST(options_are_checked),
        H_TEST(fence_commit_counts_acks),
        H_TEST(commit_lost_releases_everywhere),
        H_TEST(extend_keeps_fence_and_retake_restores_counter),
        H_TEST(inspect_and_sync_show_fences),
        H_TEST(release_of_lapsed_fenced_lock_is_lost),
    };
    return cmocka_run_group_tests_name("fencing", tests, NULL, NULL);
}
