/* SPDX-License-Identifier: MIT */
/* test_node.c - how a node behaves when its server is slow, stopped, dead or far: fail fast,
 * queue behind a connect, drop and reconnect a node that stopped answering, bound the requests
 * a node may owe, resolve host names. */
#include "harness.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Operations issued before any node is connected wait for the connection within their
 * deadline, instead of failing: a client is usable right after redlock_client_new. */
static void acquire_right_after_create_waits_for_connect(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 5, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_record rec;
    assert_int_equal(h_acquire(&env, c, "node:early", 5000, NULL, &rec), 0);
    h_run_for(&env.loop, 20);
    h_record rel;
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, 5);
    h_env_stop(&env);
}

/* A dead node answers at once with an error vote, not at its deadline. */
static void dead_node_fails_fast(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 5, NULL);
    redlock_client *c = h_client(&env, NULL);
    h_wait_connected(&env, c);
    assert_int_equal(fixture_kill(&env.cluster, 4), 0);
    /* The client sees the connection close: the server's end was closed when it died, before
     * fixture_kill returned, so the first loop turn reads the EOF. */
    h_run_for(&env.loop, 100);
    /* Far from the node timeout (H_NODE_TIMEOUT_MS): no deadline was waited for. */
    const uint64_t far_us = H_NODE_TIMEOUT_MS * 1000 / 2;
    for (int round = 0; round < 3; round++) {
        h_record rec;
        assert_int_equal(h_acquire(&env, c, "node:dead", 5000, NULL, &rec), 0);
        /* The round was decided at quorum; by the time it is, node 4 already answered. */
        assert_int_equal(rec.node_vote[4], REDLOCK_VOTE_ERROR);
        assert_true(rec.node_latency_us[4] < far_us);
        assert_non_null(strstr(rec.node_error[4], "node down"));
        h_record rel;
        assert_int_equal(h_release(&env, rec.lock, &rel), 0);
        assert_true(rel.elapsed_us < far_us); /* release does not wait for a deadline either */
        redlock_lock_free(rec.lock);
    }
    h_env_stop(&env);
}

/* A stopped server keeps its TCP connection open and never answers: requests time out; once it
 * owes answers and has been silent for three node timeouts its connection is dropped, and from
 * then on it fails fast while down (its reconnect attempts are accepted by the kernel and hang in
 * the handshake: requests must not wait for them), and once it answers again it is used again.
 * Only node 0, the one stopped, has the short node timeout. */
static void silent_node_is_dropped_and_comes_back(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 5, NULL);
    redlock_options o;
    h_test_options(&o);
    /* Client-wide, but only node 0 reconnects: the others connect once, before the pause
     * (h_wait_ready retries a connect that was too slow). */
    o.connect_timeout_ms = 300;
    o.reconnect_max_ms = 200;
    const uint64_t timeout_ms = 100; /* node 0's */
    char buf[5][160];
    const char *urls[5];
    h_urls_with_timeout(&env, 1u << 0, timeout_ms, buf, urls);
    redlock_client *c = NULL;
    assert_int_equal(h_client_urls(&env, urls, 5, &o, &c, NULL, 0), 0);
    h_wait_ready(&env, c);
    assert_int_equal(fixture_pause(&env.cluster, 0), 0);
    /* Rounds go on until the node has been seen down, then for 800 ms more: long enough for
     * reconnect attempts (backoff <= 200 ms, each hanging until its 300 ms connect timeout),
     * during which it must fail fast too. No upper bound on the wall time of the first part: how
     * many rounds fit in a given time depends on the machine (valgrind, a loaded CI box), what
     * must happen in them does not. */
    bool saw_timeout = false, saw_dropped_or_down = false, slow = false;
    int timeouts_after_down = 0;
    uint64_t down_at = 0;
    char trace[8192] = ""; /* each round, printed if an assertion below fails */
    size_t trace_len = 0;
    uint64_t paused_at = redlock_now_us(), give_up = paused_at + 10000000;
    while (redlock_now_us() < give_up && (down_at == 0 || h_since_us(down_at) < 800000)) {
        h_record rec;
        uint64_t t0 = redlock_now_us();
        assert_int_equal(h_acquire(&env, c, "node:silent", 5000, NULL, &rec), 0);
        uint64_t t1 = redlock_now_us();
        h_record rel;
        h_release(&env, rec.lock, &rel);
        redlock_lock_free(rec.lock);
        uint64_t t2 = redlock_now_us();
        if (trace_len < sizeof(trace) - 1)
            trace_len +=
                (size_t)snprintf(trace + trace_len, sizeof(trace) - trace_len,
                                 "  +%llu ms: acquire %llu us (elapsed %llu), release %llu us "
                                 "(elapsed %llu): %s %s\n",
                                 (unsigned long long)(t0 - paused_at) / 1000,
                                 (unsigned long long)(t1 - t0), (unsigned long long)rec.elapsed_us,
                                 (unsigned long long)(t2 - t1), (unsigned long long)rel.elapsed_us,
                                 redlock_vote_name(rel.node_vote[0]), rel.node_error[0]);
        if (rel.node_vote[0] == REDLOCK_VOTE_TIMEOUT) {
            saw_timeout = true;
            if (saw_dropped_or_down)
                timeouts_after_down++;
        }
        if (rel.node_vote[0] == REDLOCK_VOTE_ERROR &&
            (strstr(rel.node_error[0], "dropped") != NULL ||
             strstr(rel.node_error[0], "node down") != NULL ||
             strstr(rel.node_error[0], "connect") != NULL) &&
            !saw_dropped_or_down) {
            saw_dropped_or_down = true;
            down_at = t2;
        }
        /* A round never waits for the paused node beyond its deadline (generous slack): the
         * acquire is decided by the other four, the release waits at most node 0's timeout.
         * Measured as the library reports it (call to callback), not around the harness's own
         * loop, which a loaded machine may deschedule for seconds. */
        const uint64_t bound_us = (timeout_ms + H_SLACK_MS) * 1000;
        if (rec.elapsed_us >= bound_us || rel.elapsed_us >= bound_us) {
            slow = true;
            h_dump_record("slow acquire", &rec);
            h_dump_record("slow release", &rel);
            break;
        }
        if (saw_dropped_or_down)
            h_run_for(&env.loop, 10); /* failing fast, rounds are quick: let attempts happen */
    }
    if (slow || !saw_timeout || !saw_dropped_or_down || timeouts_after_down != 0)
        fprintf(stderr, "rounds after node 0's pause (its release vote):\n%s", trace);
    assert_false(slow);
    assert_true(saw_timeout);
    assert_true(saw_dropped_or_down);
    assert_int_equal(timeouts_after_down, 0);
    assert_int_equal(fixture_resume(&env.cluster, 0), 0);
    bool back = false;
    uint64_t until = redlock_now_us() + H_WAIT_MS * 1000;
    while (!back && redlock_now_us() < until) {
        h_record rec;
        assert_int_equal(h_acquire(&env, c, "node:silent", 5000, NULL, &rec), 0);
        h_record rel;
        h_release(&env, rec.lock, &rel);
        redlock_lock_free(rec.lock);
        back = rel.votes_yes == 5;
        if (!back)
            h_run_for(&env.loop, 50);
    }
    assert_true(back);
    h_env_stop(&env);
}

/* A node may owe at most max_inflight_per_node answers; past that it fails at once, so a
 * stopped server cannot make the client queue without bound. */
static void inflight_cap_bounds_a_stopped_node(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 5, NULL);
    redlock_options o;
    h_test_options(&o);
    o.max_inflight_per_node = 4;
    redlock_client *c = h_client(&env, &o);
    h_wait_ready(&env, c);
    assert_int_equal(fixture_pause(&env.cluster, 2), 0);
    /* One at a time, so healthy nodes owe at most one answer while the paused one piles up. */
    enum { K = 10 };
    h_record recs[K];
    uint64_t t0 = redlock_now_us();
    int capped = 0;
    for (int i = 0; i < K; i++) {
        char name[32];
        snprintf(name, sizeof(name), "node:cap:%d", i);
        assert_int_equal(h_acquire(&env, c, name, 5000, NULL, &recs[i]), 0);
        /* Decided at quorum, not at node 2's deadline. */
        assert_int_equal(recs[i].votes_timeout, 0);
        if (recs[i].node_vote[2] == REDLOCK_VOTE_ERROR &&
            strstr(recs[i].node_error[2], "too many requests") != NULL)
            capped++;
        else
            assert_int_equal(recs[i].node_vote[2], REDLOCK_VOTE_NONE);
    }
    /* All ten before the first request to node 2 timed out (else it would owe fewer). */
    assert_true(h_since_us(t0) < H_NODE_TIMEOUT_MS * 1000);
    /* The first 4 wait for the paused node; the other 6 were refused at once (or 7: one of the
     * 4 requests node 2 holds may be the client's probe after a late yes, on a slow run). */
    assert_true(capped == K - 4 || capped == K - 3);
    fixture_resume(&env.cluster, 2);
    h_env_stop(&env);
}

/* Host names are resolved; every address is tried ("localhost" may give ::1 first while the
 * server listens on 127.0.0.1 only). */
static void host_names_are_resolved(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, NULL);
    char urls[3][64];
    const char *list[3];
    for (unsigned i = 0; i < 3; i++) {
        snprintf(urls[i], sizeof(urls[i]), "redis://localhost:%d", env.cluster.servers[i].port);
        list[i] = urls[i];
    }
    redlock_options o;
    h_test_options(&o);
    redlock_client *c = NULL;
    char err[256];
    assert_int_equal(redlock_client_new(&env.loop, list, 3, &o, &c, err, sizeof(err)), 0);
    env.client = c;
    h_record rec;
    assert_int_equal(h_acquire(&env, c, "node:dns", 5000, NULL, &rec), 0);
    h_record rel;
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, 3);
    h_env_stop(&env);
}

/* Requests made while a connection is being made wait for the whole handshake: a server that
 * refuses SELECT never sees them (they would run in database 0), it counts as down with the
 * server's text, and the other nodes decide. */
static void refused_select_runs_nothing(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, NULL);
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d/9999", env.cluster.servers[2].port);
    const char *list[3] = {env.cluster.urls[0], env.cluster.urls[1], url};
    redlock_options o;
    h_test_options(&o);
    redlock_client *c = NULL;
    assert_int_equal(h_client_urls(&env, list, 3, &o, &c, NULL, 0), 0);
    h_record rec; /* at once: every request waits for its connection */
    assert_int_equal(h_acquire(&env, c, "node:select", 5000, NULL, &rec), 0);
    h_record rel;
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    redlock_lock_free(rec.lock);
    if (rec.node_vote[2] != REDLOCK_VOTE_NONE) {
        assert_int_equal(rec.node_vote[2], REDLOCK_VOTE_ERROR);
        assert_non_null(strstr(rec.node_error[2], "DB index is out of range"));
    }
    assert_int_equal(rel.votes_yes, 2);
    assert_int_equal(rel.node_vote[2], REDLOCK_VOTE_ERROR);
    assert_non_null(strstr(rel.node_error[2], "DB index is out of range"));
    assert_int_equal(h_dbsize(&env, 2), 0);
    h_env_stop(&env);
}

/* Make server i refuse every write with its long MISCONF error (over 300 bytes): a snapshot
 * that cannot be renamed into place (a directory holds its name, which stops root too) fails, and
 * with a save point set the server refuses writes until one succeeds. Returns that error's text
 * as the server gives it to a plain SET (malloc'ed). */
static char *refuse_writes_at_length(h_env *env, unsigned i)
{
    redisReply *r = fixture_command(&env->cluster, i, "CONFIG GET dir");
    redisReply *name = fixture_command(&env->cluster, i, "CONFIG GET dbfilename");
    assert_true(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    assert_true(name != NULL && name->type == REDIS_REPLY_ARRAY && name->elements == 2);
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", r->element[1]->str, name->element[1]->str);
    freeReplyObject(r);
    freeReplyObject(name);
    assert_int_equal(mkdir(path, 0700), 0);
    freeReplyObject(fixture_command(&env->cluster, i, "CONFIG SET save %s", "3600 1"));
    freeReplyObject(fixture_command(&env->cluster, i, "BGSAVE"));
    char *text = NULL;
    for (long long until = fixture_now_ms() + H_WAIT_MS; text == NULL;) {
        r = fixture_command(&env->cluster, i, "SET node:probe x");
        assert_non_null(r);
        if (r->type == REDIS_REPLY_ERROR)
            text = strdup(r->str);
        freeReplyObject(r);
        assert_true(text != NULL || fixture_now_ms() < until);
        if (text == NULL)
            fixture_sleep_ms(20);
    }
    assert_true(strlen(text) >= 2 * REDLOCK_ERROR_TEXT_MAX);
    return text;
}

/* A server's error too long for a node's error text is cut after a whole word, with "...": every
 * word kept is the server's, none is cut in two. */
static void long_server_error_is_cut_after_a_word(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, NULL);
    char *text[3];
    for (unsigned i = 0; i < 3; i++)
        text[i] = refuse_writes_at_length(&env, i);
    redlock_client *c = h_client(&env, NULL);
    h_record rec;
    assert_int_equal(h_acquire(&env, c, "node:misconf", 5000, NULL, &rec), REDLOCK_ENOQUORUM);
    unsigned checked = 0;
    for (unsigned i = 0; i < 3; i++) {
        if (rec.node_vote[i] == REDLOCK_VOTE_NONE) /* decided before its answer came */
            continue;
        assert_int_equal(rec.node_vote[i], REDLOCK_VOTE_ERROR);
        const char *e = rec.node_error[i];
        size_t kept = strlen(e) - 3;
        assert_true(strlen(e) < REDLOCK_ERROR_TEXT_MAX && strlen(e) > REDLOCK_ERROR_TEXT_MAX / 2);
        assert_string_equal(e + kept, "...");
        assert_memory_equal(e, text[i], kept);
        assert_int_equal(text[i][kept], ' '); /* the server's next byte: the word was whole */
        assert_true(e[kept - 1] != ' ');
        checked++;
    }
    assert_true(checked >= 2);
    for (unsigned i = 0; i < 3; i++)
        free(text[i]);
    h_env_stop(&env);
}

/* One server under two URLs (an address and a host name) must not count twice toward a quorum:
 * the URLs differ, so only the server's run_id (INFO, in the handshake) shows it. The node that
 * connects second stays down with an error naming the first. */
static void one_server_under_two_urls_counts_once(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, NULL);
    char twin[64];
    snprintf(twin, sizeof(twin), "redis://localhost:%d", env.cluster.servers[0].port);
    const char *list[4] = {env.cluster.urls[0], twin, env.cluster.urls[1], env.cluster.urls[2]};
    redlock_options o;
    h_test_options(&o);
    redlock_client *c = NULL;
    char err[256] = "";
    assert_int_equal(h_client_urls(&env, list, 4, &o, &c, err, sizeof(err)), 0);
    h_run_for(&env.loop, 300); /* both connect; the second to finish its handshake is refused */
    for (int k = 0; k < 3; k++) {
        h_record rec, rel;
        assert_int_equal(h_acquire(&env, c, "node:twin", 5000, NULL, &rec), 0);
        assert_int_equal(h_release(&env, rec.lock, &rel), 0);
        redlock_lock_free(rec.lock);
        if (rel.votes_yes != 3 || rel.votes_error != 1)
            h_dump_record("release", &rel);
        assert_int_equal(rel.votes_yes, 3);
        assert_int_equal(rel.votes_error, 1);
        unsigned down = rel.node_vote[0] == REDLOCK_VOTE_ERROR ? 0 : 1;
        assert_int_equal(rel.node_vote[down], REDLOCK_VOTE_ERROR);
        assert_int_equal(rel.node_vote[1 - down], REDLOCK_VOTE_YES);
        assert_non_null(strstr(rel.node_error[down], "same server as"));
        assert_non_null(strstr(rel.node_error[down], down == 0 ? "localhost" : "127.0.0.1"));
    }
    h_env_stop(&env);
}

/* A name that does not resolve is an error vote naming the host, not a hang. */
static void unresolvable_host_is_an_error(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, NULL);
    char url[64];
    snprintf(url, sizeof(url), "redis://no-such-host.invalid:6379");
    const char *list[3] = {env.cluster.urls[0], env.cluster.urls[1], url};
    redlock_options o;
    h_test_options(&o);
    o.connect_timeout_ms = 3000;
    redlock_client *c = NULL;
    assert_int_equal(redlock_client_new(&env.loop, list, 3, &o, &c, NULL, 0), 0);
    env.client = c;
    h_record rec;
    assert_int_equal(h_acquire(&env, c, "node:nxdomain", 5000, NULL, &rec), 0);
    h_run_for(&env.loop, 300);
    h_record rel;
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    assert_int_equal(rel.node_vote[2], REDLOCK_VOTE_ERROR);
    assert_non_null(strstr(rel.node_error[2], "no-such-host.invalid"));
    h_env_stop(&env);
}

/* A process that closed its stdin (a daemon, a CI runner): the client keeps fd 0 taken so no
 * socket lands there (libuv aborts when it closes a descriptor <= 2). */
static void closed_stdin_is_survived(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, NULL);
    int saved = dup(0);
    assert_true(saved > 2);
    close(0);
    redlock_client *c = h_client(&env, NULL);
    assert_int_not_equal(fcntl(0, F_GETFD), -1); /* reopened on /dev/null */
    h_record rec;
    assert_int_equal(h_acquire(&env, c, "node:stdin", 5000, NULL, &rec), 0);
    h_record rel;
    assert_int_equal(h_release(&env, rec.lock, &rel), 0);
    h_env_stop(&env); /* closes every socket: would abort if one were fd 0 */
    dup2(saved, 0);
    close(saved);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        H_TEST(acquire_right_after_create_waits_for_connect),
        H_TEST(dead_node_fails_fast),
        H_TEST(silent_node_is_dropped_and_comes_back),
        H_TEST(inflight_cap_bounds_a_stopped_node),
        H_TEST(host_names_are_resolved),
        H_TEST(refused_select_runs_nothing),
        H_TEST(one_server_under_two_urls_counts_once),
        H_TEST(long_server_error_is_cut_after_a_word),
        H_TEST(unresolvable_host_is_an_error),
        H_TEST(closed_stdin_is_survived),
    };
    return cmocka_run_group_tests_name("node", tests, NULL, NULL);
}
