/* SPDX-License-Identifier: MIT */
/* test_peers.c - misbehaving peers: a fake Redis (fake_redis.h) in place of one or two of five
 * nodes answers garbage, half a reply, an error to everything (NOAUTH, READONLY, OOM, LOADING)
 * or well-formed replies of the wrong type. Each fake surfaces as a per-node error vote that
 * carries the server's text (or says what was wrong with the bytes), and the round is decided
 * by the real servers.
 *
 * A fake answers at once (or its connection fails at once), so no round here waits for a
 * deadline: the node timeout is seconds, far more than a loaded machine needs, and "no deadline
 * waited" is checked as "less than half a node timeout". */
#include "fake_redis.h"
#include "harness.h"

#include <stdio.h>
#include <string.h>

#define N 5
#define MS 1000ull /* microseconds per millisecond */
#define NODE_TIMEOUT_MS 10000
/* A round that waited for no deadline is far quicker than this; one that waited is slower. */
#define NO_DEADLINE_US (NODE_TIMEOUT_MS / 2 * MS)

typedef struct peer_env {
    h_env env;
    fake_redis *fakes[N];
    unsigned n_real;
    char fake_urls[N][64];
    const char *urls[N];
    redlock_client *client;
} peer_env;

/* File-level, so that the teardown can stop what a failed check left running. */
static peer_env peers;

/* n_real real servers first, then one fake per modes[k] (k < N - n_real). */
static void peers_start(peer_env *pe, unsigned n_real, const fake_mode *modes,
                        const char *const *texts)
{
    memset(pe, 0, sizeof(*pe));
    pe->n_real = n_real;
    h_env_start(&pe->env, n_real, NULL);
    for (unsigned i = 0; i < N; i++) {
        if (i < n_real) {
            pe->urls[i] = pe->env.cluster.urls[i];
            continue;
        }
        pe->fakes[i] = fake_redis_start(modes[i - n_real], texts[i - n_real]);
        assert_non_null(pe->fakes[i]);
        snprintf(pe->fake_urls[i], sizeof(pe->fake_urls[i]), "redis://127.0.0.1:%d",
                 fake_redis_port(pe->fakes[i]));
        pe->urls[i] = pe->fake_urls[i];
    }
    redlock_options o;
    h_test_options(&o);
    o.node_timeout_ms = NODE_TIMEOUT_MS;
    char err[256] = "";
    int rc = h_client_urls(&pe->env, pe->urls, N, &o, &pe->client, err, sizeof(err));
    if (rc != 0)
        fprintf(stderr, "client: %s\n", err);
    assert_int_equal(rc, 0);
    /* Let every connection and handshake happen (or fail) before the first round. */
    h_run_for(&pe->env.loop, 200);
}

static void peers_stop(peer_env *pe)
{
    h_close_client(&pe->env, pe->client);
    for (unsigned i = 0; i < N; i++) {
        fake_redis_stop(pe->fakes[i]);
        pe->fakes[i] = NULL;
    }
    h_env_stop(&pe->env);
}

/* After every test, passed or failed: no fake and no server is left for the next one. (After a
 * failure the client is abandoned with its loop; nothing runs it any more.) */
static int teardown(void **state)
{
    (void)state;
    for (unsigned i = 0; i < N; i++) {
        fake_redis_stop(peers.fakes[i]);
        peers.fakes[i] = NULL;
    }
    fixture_stop(&peers.env.cluster);
    return 0;
}

/* Node i of rec must be an error vote whose text contains want. */
static void assert_error_vote(const char *what, const h_record *rec, unsigned i, const char *want)
{
    if (rec->node_vote[i] != REDLOCK_VOTE_ERROR || strstr(rec->node_error[i], want) == NULL) {
        fprintf(stderr, "node %u: want an error vote with \"%s\"\n", i, want);
        h_dump_record(what, rec);
    }
    assert_int_equal(rec->node_vote[i], REDLOCK_VOTE_ERROR);
    assert_non_null(strstr(rec->node_error[i], want));
}

/* Acquire, inspect and release with the fakes in place, several times (a fake that closes its
 * connection is reconnected in between). The acquire is decided by the real servers (it may be
 * decided before a fake answered: then that fake has no vote, else an error vote); the release
 * and the inspect wait for every node, so there each fake's error vote and text are certain. */
static void run_rounds(peer_env *pe, const char *const *want_texts)
{
    const unsigned n_fake = N - pe->n_real;
    for (int k = 0; k < 3; k++) {
        h_record rec, rel, ins;
        uint64_t t0 = redlock_now_us();
        if (h_acquire(&pe->env, pe->client, "fault:peer", 5000, NULL, &rec) != 0)
            h_dump_record("acquire", &rec);
        assert_int_equal(rec.status, 0);
        assert_true(h_since_us(t0) < NO_DEADLINE_US);
        /* Decided at the third yes; a fourth real server may not have been counted. */
        assert_true(rec.votes_yes >= N / 2 + 1 && rec.votes_yes <= pe->n_real);
        assert_int_equal(rec.votes_no, 0);
        assert_int_equal(rec.votes_timeout, 0);
        for (unsigned i = pe->n_real; i < N; i++) {
            if (rec.node_vote[i] != REDLOCK_VOTE_NONE)
                assert_error_vote("acquire", &rec, i, want_texts[i - pe->n_real]);
        }
        size_t token_len = 0;
        const char *token = redlock_lock_token(rec.lock, &token_len);
        /* Won at the quorum; the last real server's SET may land a moment later. */
        assert_true(
            h_wait_holding(&pe->env, "fault:peer", 10, token, token_len, pe->n_real, 10000));

        memset(&ins, 0, sizeof(ins));
        assert_int_equal(redlock_inspect(pe->client, "fault:peer", 10, h_record_cb, &ins), 0);
        assert_true(h_run_until(&pe->env.loop, &ins.calls, 1, 2 * NODE_TIMEOUT_MS));
        assert_int_equal(ins.status, 0);
        assert_int_equal(ins.votes_yes, pe->n_real);
        assert_int_equal(ins.votes_error, n_fake);
        for (unsigned i = pe->n_real; i < N; i++)
            assert_error_vote("inspect", &ins, i, want_texts[i - pe->n_real]);

        uint64_t t1 = redlock_now_us();
        assert_int_equal(h_release(&pe->env, rec.lock, &rel), 0);
        /* Every fake answered at once (or its connection failed at once): no deadline waited. */
        assert_true(h_since_us(t1) < NO_DEADLINE_US);
        assert_int_equal(rel.votes_yes, pe->n_real);
        assert_int_equal(rel.votes_error, n_fake);
        for (unsigned i = pe->n_real; i < N; i++)
            assert_error_vote("release", &rel, i, want_texts[i - pe->n_real]);
        assert_int_equal(h_count_holding(&pe->env, "fault:peer", 10, token, token_len), 0);
        redlock_lock_free(rec.lock);
    }
}

/* A fake whose connection is dropped (garbage, half a reply, a reply of the wrong type) is
 * only asked again after the reconnect backoff (meanwhile its requests fail fast with the
 * reason), so it sees at least one command; a fake that keeps its connection sees every inspect
 * and release (six), at least. One that refuses the handshake (NOAUTH: a password missing) sees
 * none: its requests all fail fast. */
static void one_fake(fake_mode mode, const char *error_text, const char *want_text)
{
    bool noauth = error_text != NULL && strncmp(error_text, "NOAUTH", 6) == 0;
    const unsigned min_commands = noauth ? 0 : mode == FAKE_ERROR ? 6 : 1;
    peer_env *pe = &peers;
    const fake_mode modes[1] = {mode};
    const char *texts[1] = {error_text};
    const char *wants[1] = {want_text};
    peers_start(pe, N - 1, modes, texts);
    run_rounds(pe, wants);
    /* The fake really was asked (its answers, not a refused connect, made the votes). */
    assert_true(fake_redis_commands(pe->fakes[N - 1]) >= min_commands);
    assert_true(fake_redis_scripts(pe->fakes[N - 1]) > 0);
    peers_stop(pe);
}

static void garbage_bytes(void **state)
{
    (void)state;
    one_fake(FAKE_GARBAGE, NULL, "protocol error");
}

static void half_reply_then_close(void **state)
{
    (void)state;
    one_fake(FAKE_HALF_REPLY, NULL, "closed");
}

static void noauth_error(void **state)
{
    (void)state;
    one_fake(FAKE_ERROR, "NOAUTH Authentication required.", "the server wants a password (NOAUTH)");
}

static void readonly_error(void **state)
{
    (void)state;
    one_fake(FAKE_ERROR, "READONLY You can't write against a read only replica.",
             "READONLY You can't write against a read only replica.");
}

static void oom_error(void **state)
{
    (void)state;
    one_fake(FAKE_ERROR, "OOM command not allowed when used memory > 'maxmemory'.",
             "OOM command not allowed when used memory > 'maxmemory'.");
}

static void loading_error(void **state)
{
    (void)state;
    one_fake(FAKE_ERROR, "LOADING Redis is loading the dataset in memory",
             "LOADING Redis is loading the dataset in memory");
}

/* Well-formed replies of the wrong type: the vote is an error naming the reply and the command,
 * and the connection is dropped (no later reply on it could be trusted). */
static void wrong_reply_types(void **state)
{
    (void)state;
    one_fake(FAKE_WRONG_TYPE, NULL, "unexpected");
}

/* A SCRIPT LOAD answered with another SHA1 (what replies out of step look like at the start of a
 * connection): the handshake fails, the node counts as down, and no lock command is ever written
 * to it, since requests wait for the handshake to succeed. */
static void bad_handshake_sends_no_command(void **state)
{
    (void)state;
    peer_env *pe = &peers;
    const fake_mode modes[1] = {FAKE_BAD_HANDSHAKE};
    const char *texts[1] = {NULL};
    const char *wants[1] = {"unexpected reply to SCRIPT LOAD in the handshake"};
    peers_start(pe, N - 1, modes, texts);
    run_rounds(pe, wants);
    assert_true(fake_redis_scripts(pe->fakes[N - 1]) >= 1);
    assert_int_equal(fake_redis_commands(pe->fakes[N - 1]), 0);
    peers_stop(pe);
}

/* Two different fakes of five: the three real servers still decide every round. */
static void two_fakes_minority_still_decides(void **state)
{
    (void)state;
    peer_env *pe = &peers;
    const fake_mode modes[2] = {FAKE_GARBAGE, FAKE_ERROR};
    const char *texts[2] = {NULL, "READONLY You can't write against a read only replica."};
    const char *wants[2] = {"protocol error", "READONLY"};
    peers_start(pe, 3, modes, texts);
    run_rounds(pe, wants);
    peers_stop(pe);
}

/* Three fakes of five: their error votes count against the quorum, so the round is lost at once
 * with REDLOCK_ENOQUORUM (a fake's answer never counts as a yes). */
static void three_fakes_no_quorum(void **state)
{
    (void)state;
    peer_env *pe = &peers;
    const fake_mode modes[3] = {FAKE_WRONG_TYPE, FAKE_ERROR, FAKE_ERROR};
    const char *texts[3] = {NULL, "OOM command not allowed when used memory > 'maxmemory'.",
                            "LOADING Redis is loading the dataset in memory"};
    peers_start(pe, 2, modes, texts);
    h_record rec;
    uint64_t t0 = redlock_now_us();
    assert_int_equal(h_acquire(&pe->env, pe->client, "fault:peer3", 5000, NULL, &rec),
                     REDLOCK_ENOQUORUM);
    assert_true(h_since_us(t0) < NO_DEADLINE_US);
    assert_null(rec.lock);
    assert_int_equal(rec.votes_error, 3);
    assert_error_vote("acquire", &rec, 2, "unexpected");
    assert_error_vote("acquire", &rec, 3, "OOM");
    assert_error_vote("acquire", &rec, 4, "LOADING");
    /* The lost round's keys were released on the two real servers. An inspect goes after that
     * release on each connection (replies come in order), so once it has its answers the
     * servers have run both the SET and the release; the 5 s ttl is far from over. */
    h_record ins;
    memset(&ins, 0, sizeof(ins));
    assert_int_equal(redlock_inspect(pe->client, "fault:peer3", 11, h_record_cb, &ins), 0);
    assert_true(h_run_until(&pe->env.loop, &ins.calls, 1, 2 * NODE_TIMEOUT_MS));
    assert_int_equal(ins.votes_yes + ins.votes_no, 2);
    assert_int_equal(h_dbsize(&pe->env, 0), 0);
    assert_int_equal(h_dbsize(&pe->env, 1), 0);
    peers_stop(pe);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(garbage_bytes, teardown),
        cmocka_unit_test_teardown(half_reply_then_close, teardown),
        cmocka_unit_test_teardown(noauth_error, teardown),
        cmocka_unit_test_teardown(readonly_error, teardown),
        cmocka_unit_test_teardown(oom_error, teardown),
        cmocka_unit_test_teardown(loading_error, teardown),
        cmocka_unit_test_teardown(wrong_reply_types, teardown),
        cmocka_unit_test_teardown(bad_handshake_sends_no_command, teardown),
        cmocka_unit_test_teardown(two_fakes_minority_still_decides, teardown),
        cmocka_unit_test_teardown(three_fakes_no_quorum, teardown),
    };
    return cmocka_run_group_tests_name("fault-peers", tests, NULL, NULL);
}
