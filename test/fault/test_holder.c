/* SPDX-License-Identifier: MIT */
/* test_holder.c - the lock's ttl runs out while its holder is paused: a child process takes the
 * lock and is stopped (SIGSTOP) while holding it; a client in the parent waits for the resource
 * and gets it, but only after the child's validity deadline. When the child continues, its
 * release does not touch the new holder's keys. Both processes read the same CLOCK_MONOTONIC
 * (redlock_now_us), so their deadlines compare directly.
 *
 * The only thing slow here is the child, stopped on purpose: every client has a node timeout of
 * seconds, and every bound is derived from the lock's own numbers (its ttl, drift and reported
 * deadline) and times measured around the calls, never from how fast the machine is. */
#include "harness.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 5
#define MS 1000ull /* microseconds per millisecond */
#define RESOURCE "fault:holder"
#define NODE_TIMEOUT_MS 10000 /* nothing but the holder is ever slow */

/* The test's cluster and child, file-level so that the teardown can stop them after a failed
 * check (which longjmps past the test's own cleanup). */
static h_env env;
static pid_t child_pid;

/* What the child reports: after its acquire, then after its release. */
typedef struct child_report {
    int status; /* of the acquire, then of the release */
    uint64_t deadline_us;
    uint64_t validity_ms;
    uint64_t before_us;   /* redlock_now_us() just before redlock_acquire */
    uint64_t acquired_us; /* ... when its callback had run */
    unsigned votes_yes;
    bool held_at_wakeup; /* redlock_lock_is_held when it continued */
    char token[REDLOCK_TOKEN_MAX + 1];
} child_report;

typedef struct child_state {
    int calls;
    int status;
    unsigned votes_yes;
    redlock_lock *lock;
} child_state;

static void child_cb(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    child_state *cs = data;
    cs->calls++;
    cs->status = status;
    cs->votes_yes = result->votes_yes;
    cs->lock = lock;
}

static bool write_all(int fd, const void *p, size_t len)
{
    const char *b = p;
    while (len > 0) {
        ssize_t n = write(fd, b, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        b += n;
        len -= (size_t)n;
    }
    return true;
}

static bool read_all(int fd, void *p, size_t len)
{
    char *b = p;
    while (len > 0) {
        ssize_t n = read(fd, b, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        b += n;
        len -= (size_t)n;
    }
    return true;
}

/* read_all, giving up when nothing came for timeout_ms (a child that hangs must not hang us). */
static bool read_all_within(int fd, void *p, size_t len, int timeout_ms)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int n;
    do
        n = poll(&pfd, 1, timeout_ms);
    while (n < 0 && errno == EINTR);
    return n == 1 && read_all(fd, p, len);
}

/* The child: no cmocka here (a failed assertion would unwind into the parent's copy of the
 * stack); every problem is an exit code. */
static int child_main(const char *const *urls, int report_fd, int go_fd, uint64_t ttl_ms)
{
    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0)
        return 10;
    redlock_options o;
    redlock_options_init(&o);
    o.node_timeout_ms = NODE_TIMEOUT_MS;
    o.retry_count = 0;
    redlock_client *c = NULL;
    if (redlock_client_new(&loop, urls, N, &o, &c, NULL, 0) != 0)
        return 11;
    child_state cs = {0};
    child_report rep;
    memset(&rep, 0, sizeof(rep));
    rep.before_us = redlock_now_us();
    if (redlock_acquire(c, RESOURCE, strlen(RESOURCE), ttl_ms, NULL, child_cb, &cs) != 0)
        return 12;
    if (!h_run_until(&loop, &cs.calls, 1, 60000))
        return 18;
    rep.status = cs.status;
    rep.acquired_us = redlock_now_us();
    if (cs.status == 0) {
        size_t len = 0;
        const char *token = redlock_lock_token(cs.lock, &len);
        snprintf(rep.token, sizeof(rep.token), "%.*s", (int)len, token);
        rep.deadline_us = redlock_lock_deadline_us(cs.lock);
        rep.validity_ms = redlock_lock_validity_ms(cs.lock);
    }
    if (!write_all(report_fd, &rep, sizeof(rep)))
        return 13;
    if (cs.status != 0)
        return 14;
    /* Held. The parent stops this process here and continues it once the lock changed hands. */
    char go;
    if (!read_all(go_fd, &go, 1))
        return 15;
    rep.held_at_wakeup = redlock_lock_is_held(cs.lock, redlock_now_us());
    redlock_lock *lock = cs.lock;
    cs.calls = 0;
    if (redlock_release(lock, child_cb, &cs) != 0)
        return 16;
    if (!h_run_until(&loop, &cs.calls, 1, 60000))
        return 18;
    rep.status = cs.status;
    rep.votes_yes = cs.votes_yes;
    if (!write_all(report_fd, &rep, sizeof(rep)))
        return 17;
    redlock_lock_free(lock);
    redlock_client_close(c, NULL, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    return uv_loop_close(&loop) == 0 ? 0 : 18;
}

static void ttl_runs_out_while_holder_is_paused(void **state)
{
    (void)state;
    h_env_start(&env, N, NULL);
    const uint64_t ttl_ms = 1000;
    int report[2], go[2];
    assert_int_equal(pipe(report), 0);
    assert_int_equal(pipe(go), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(report[0]);
        close(go[1]);
        _exit(child_main(env.cluster.urls, report[1], go[0], ttl_ms));
    }
    child_pid = pid;
    close(report[1]);
    close(go[0]);

    child_report rep;
    bool got = read_all_within(report[0], &rep, sizeof(rep), 10000);
    /* Stop the holder at once, lock in hand. */
    assert_int_equal(kill(pid, SIGSTOP), 0);
    if (!got)
        fail_msg("the child reported nothing");
    assert_int_equal(rep.status, 0);
    size_t token_len = strlen(rep.token);
    assert_true(token_len > 0);
    /* The deadline is the one Redlock promises: the round's start (before its first SET was
     * written, so before any key's expiry began) + ttl - drift, drift being 1% of the ttl + 2 ms
     * (the default drift_factor). The start lies between the call and the callback. */
    const uint64_t ttl_us = ttl_ms * MS, drift_us = ttl_us / 100 + 2 * MS;
    if (rep.deadline_us < rep.before_us + ttl_us - drift_us ||
        rep.deadline_us > rep.acquired_us + ttl_us - drift_us)
        fail_msg("deadline %llu us after the call, %llu us after the callback; promised: ttl - "
                 "drift = %llu us after the round's start, which lies between them",
                 (unsigned long long)(rep.deadline_us - rep.before_us),
                 (unsigned long long)(rep.deadline_us - rep.acquired_us),
                 (unsigned long long)(ttl_us - drift_us));
    /* The validity reported is what was left of it when the round was decided, also between the
     * call and the callback (whole ms, rounded down). */
    assert_true(rep.validity_ms * MS <= rep.deadline_us - rep.before_us);
    assert_true(rep.validity_ms * MS + MS > rep.deadline_us - rep.acquired_us);
    assert_true(h_count_holding(&env, RESOURCE, strlen(RESOURCE), rep.token, token_len) >= 3);

    /* Another client waits for the resource, retrying every ~50 ms. */
    redlock_options o;
    h_test_options(&o);
    o.node_timeout_ms = NODE_TIMEOUT_MS;
    o.retry_delay_ms = 50;
    o.retry_jitter_ms = 20;
    redlock_client *c = h_client(&env, &o);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.wait_ms = 5000;
    h_record rec;
    uint64_t wait_from_us = redlock_now_us();
    int rc = h_acquire(&env, c, RESOURCE, 5000, &lo, &rec);
    if (rc != 0)
        h_dump_record("waiting acquire", &rec);
    assert_int_equal(rc, 0);
    /* Not before the paused holder's validity ran out (its keys outlive it by the drift at
     * least), and not long after a majority of its keys expired: the SETs that made its quorum
     * all ran before its callback, so those keys were gone a ttl later, and the waiter tries
     * again every retry delay + jitter; the rest is seconds of slack for a loaded machine. */
    if (rec.at_us < rep.deadline_us)
        fail_msg("acquired %llu us before the paused holder's deadline",
                 (unsigned long long)(rep.deadline_us - rec.at_us));
    const uint64_t keys_gone_us = rep.acquired_us + ttl_us;
    assert_true(rec.at_us < keys_gone_us + (o.retry_delay_ms + o.retry_jitter_ms + 2000) * MS);
    /* It was refused at first: a wait that began half a ttl before the deadline cannot win its
     * first round (that round's SETs would have to reach the servers half a ttl late). */
    if (wait_from_us + ttl_us / 2 < rep.deadline_us)
        assert_true(rec.attempts > 1);
    size_t new_len = 0;
    const char *new_token = redlock_lock_token(rec.lock, &new_len);
    /* Won at the quorum; the last SETs land a moment later (h_drain), on every node whose old
     * key had expired by then. A node where it had not (the old keys expire at the times their
     * SETs arrived, a fraction of a ms apart) said no and is left without a key: the promise is
     * a quorum, not every node. */
    h_drain(&env, c);
    const unsigned held = h_count_holding(&env, RESOURCE, strlen(RESOURCE), new_token, new_len);
    assert_true(held >= N / 2 + 1);
    for (unsigned i = 0; i < N; i++) {
        size_t len = 0;
        char *v = h_get(&env, i, RESOURCE, strlen(RESOURCE), &len);
        assert_true(v == NULL || (len == new_len && memcmp(v, new_token, len) == 0));
        free(v);
    }

    /* The old holder continues: its lock is no longer held, and its release deletes nothing of
     * the new holder's. */
    assert_int_equal(kill(pid, SIGCONT), 0);
    assert_int_equal(write(go[1], "g", 1), 1);
    got = read_all_within(report[0], &rep, sizeof(rep), 10000);
    if (!got)
        kill(pid, SIGKILL);
    int wstatus = 0;
    assert_int_equal(waitpid(pid, &wstatus, 0), pid);
    child_pid = 0;
    close(report[0]);
    close(go[1]);
    assert_true(got);
    assert_true(WIFEXITED(wstatus));
    assert_int_equal(WEXITSTATUS(wstatus), 0);
    assert_false(rep.held_at_wakeup);
    assert_int_equal(rep.status, REDLOCK_ELOST); /* every node answered: "not ours" */
    assert_int_equal(rep.votes_yes, 0);
    assert_int_equal(h_count_holding(&env, RESOURCE, strlen(RESOURCE), new_token, new_len), held);

    h_record rel;
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, held);
    redlock_lock_free(rec.lock);
    h_env_stop(&env);
}

/* After the test, passed or failed: no child and no server is left for the next program. */
static int teardown(void **state)
{
    (void)state;
    if (child_pid > 0) {
        kill(child_pid, SIGKILL);
        waitpid(child_pid, NULL, 0);
        child_pid = 0;
    }
    fixture_stop(&env.cluster);
    return 0;
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(ttl_runs_out_while_holder_is_paused, teardown),
    };
    return cmocka_run_group_tests_name("fault-holder", tests, NULL, NULL);
}
