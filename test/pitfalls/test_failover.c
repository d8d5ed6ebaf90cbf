/* SPDX-License-Identifier: MIT */
/* test_failover.c - pitfall 4 (docs/pitfalls.md): one master with a replica, and a failover.
 *
 * The legacy lock is the right single-server lock (SET key token NX PX, compare-and-delete), on
 * a master that replicates to a replica. Replication is asynchronous: the master answers OK
 * before the replica has the key. The test makes the window happen: the replica's repl_link to the
 * master goes through the fault proxy, which holds everything (PROXY_BLACKHOLE, a partition TCP
 * survives) from just before A takes the lock; the master is killed, the held bytes are dropped
 * with the connection, and the replica is promoted (REPLICAOF NO ONE) without the key. B takes
 * the same lock on the new master while A works: two holders.
 *
 * libredlock on five independent masters: one loses A's key the same way (killed and back
 * empty, as a promoted replica that never got the write would be); B is refused by the other
 * four. And where Redlock cannot hold, said honestly: when a majority of the nodes lose the key
 * at once (assumption 2 of docs/safety.md: nodes keep their keys for their ttl, by persistence
 * or a delayed restart), C gets the lock while A holds it, and the library tells A as soon as
 * A's client reaches the restarted servers: its handle reads as lost, its release says
 * REDLOCK_ELOST. */
#include "pitfalls.h"

#include "proxy.h"

#include <stdio.h>
#include <string.h>

#define N 5
#define KEY "pitfall:failover"
#define PROBE "pitfall:failover:probe"
#define A_RECONNECT_MS 3000

/* The replica's link, file-level so that the teardown stops it after a failed check. */
static proxy *repl_link;

static int teardown(void **state)
{
    proxy_stop(repl_link);
    repl_link = NULL;
    return pf_teardown(state);
}

/* GET key on server i of c: true if it holds value. */
static bool server_has(fixture_cluster *c, unsigned i, const char *key, const char *value)
{
    redisReply *r = fixture_command(c, i, "GET %s", key);
    assert_non_null(r);
    bool has = r->type == REDIS_REPLY_STRING && strcmp(r->str, value) == 0;
    freeReplyObject(r);
    return has;
}

static void failover_before_replication_gives_two_holders(void **state)
{
    (void)state;
    fixture_cluster pair; /* server 0 the master, 1 its replica */
    assert_int_equal(fixture_start(&pair, 2, NULL), 0);
    repl_link = proxy_start(fixture_free_port(), "127.0.0.1", pair.servers[0].port);
    assert_non_null(repl_link);
    redisReply *r = fixture_command(&pair, 1, "REPLICAOF 127.0.0.1 %d", proxy_port(repl_link));
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    /* Replicating: a probe written on the master shows up on the replica. */
    redisContext *a = pf_connect(&pair, 0);
    freeReplyObject(pf_cmd(a, "SET %s 1", PROBE));
    uint64_t give_up = redlock_now_us() + 2 * H_WAIT_MS * 1000ull;
    while (!server_has(&pair, 1, PROBE, "1")) {
        if (redlock_now_us() >= give_up)
            fail_msg("the replica did not get the probe within %d ms", 2 * H_WAIT_MS);
        pf_sleep_ms(20);
    }

    pf_history h;
    pf_history_init(&h, "legacy lock on a master with a replica, failover");
    /* The replica's link holds everything from now on; A takes the lock on the master. */
    proxy_set_mode(repl_link, PROXY_BLACKHOLE);
    char token_a[33], token_b[33];
    assert_true(pf_random_token(token_a, sizeof(token_a)));
    assert_true(pf_random_token(token_b, sizeof(token_b)));
    assert_true(pf_token_lock(a, KEY, token_a, PF_LONG_TTL_MS));
    const uint64_t a_from = redlock_now_us();
    /* The master dies before the replica got the key; the bytes in flight die with the repl_link.
     */
    assert_int_equal(fixture_kill(&pair, 0), 0);
    proxy_reset_all(repl_link);
    proxy_stop(repl_link);
    repl_link = NULL;
    /* Failover: the replica is promoted, without A's key. B takes the same lock there. */
    r = fixture_command(&pair, 1, "REPLICAOF NO ONE");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    assert_false(pf_exists(&pair, 1, KEY));
    redisContext *b = pf_connect(&pair, 1);
    assert_true(pf_token_lock(b, KEY, token_b, PF_LONG_TTL_MS));
    const uint64_t b_from = redlock_now_us();
    /* A's work ends (its unlock goes to the dead master: no answer), then B's. */
    assert_int_equal(pf_token_unlock(a, KEY, token_a), -1);
    pf_history_add(&h, "A", a_from, redlock_now_us());
    assert_int_equal(pf_token_unlock(b, KEY, token_b), 1);
    pf_history_add(&h, "B", b_from, redlock_now_us());
    pf_report(&h);
    assert_true(pf_overlap_between(&h, "A", "B"));
    redisFree(a);
    redisFree(b);
    fixture_stop(&pair);

    /* libredlock on five masters: node 0 loses A's key (killed, back empty). */
    h_env env;
    h_env_start(&env, N, NULL);
    redlock_client *ca = pf_client(&env);
    pf_history_init(&h, "libredlock on five masters, one loses the key");
    h_record ra;
    assert_int_equal(h_acquire(&env, ca, KEY, PF_LONG_TTL_MS, NULL, &ra), 0);
    size_t token_len = 0;
    const char *token = redlock_lock_token(ra.lock, &token_len);
    assert_true(h_wait_holding(&env, KEY, strlen(KEY), token, token_len, N, H_WAIT_MS));
    h_hear_all(&env, ca); /* every key kept: node 0's loss costs its own vote only */
    assert_int_equal(fixture_kill(&env.cluster, 0), 0);
    assert_int_equal(fixture_restart(&env.cluster, 0), 0);
    assert_false(pf_exists(&env.cluster, 0, KEY));
    /* B: node 0 says yes, the other four no. Refused, and its lost round leaves no key. */
    redlock_client *cb = pf_client(&env);
    h_record rb;
    int rc = h_acquire(&env, cb, KEY, PF_LONG_TTL_MS, NULL, &rb);
    if (rc != REDLOCK_EBUSY)
        h_dump_record("B's acquire", &rb);
    assert_int_equal(rc, REDLOCK_EBUSY);
    h_drain(&env, cb);
    assert_false(pf_exists(&env.cluster, 0, KEY));
    assert_int_equal(h_count_holding(&env, KEY, strlen(KEY), token, token_len), N - 1);
    /* A's work ends: still held, released by the four nodes that kept the key. */
    const uint64_t a_end = redlock_now_us();
    assert_true(redlock_lock_is_held(ra.lock, a_end));
    h_record rel;
    rc = h_release(&env, ra.lock, &rel);
    if (rc != 0)
        h_dump_record("A's release", &rel);
    assert_int_equal(rc, 0);
    assert_int_equal(rel.votes_yes, N - 1);
    pf_history_add(&h, "A", ra.at_us, a_end);
    unsigned overlaps = pf_report(&h);
    printf("#   B's acquire: REDLOCK_EBUSY (%u yes, %u no)\n", rb.votes_yes, rb.votes_no);
    assert_int_equal(overlaps, 0);
    redlock_lock_free(ra.lock);
    h_close_client(&env, ca);
    h_close_client(&env, cb);
    h_env_stop(&env);
}

static void majority_losing_the_key_breaks_redlock_too_and_release_says_so(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, N, NULL);
    /* A's client comes back to restarted nodes 1.5-4.5 s after it sees them go (its reconnect
     * backoff): the window in which it cannot know, and C takes the lock. */
    redlock_options slow;
    h_test_options(&slow);
    slow.reconnect_min_ms = slow.reconnect_max_ms = A_RECONNECT_MS;
    redlock_client *ca = NULL, *cc = pf_client(&env);
    assert_int_equal(h_client_urls(&env, env.cluster.urls, N, &slow, &ca, NULL, 0), 0);
    pf_history h;
    pf_history_init(&h, "libredlock, three of five nodes lose the key at once (not supported)");
    h_record ra;
    assert_int_equal(h_acquire(&env, ca, KEY, PF_LONG_TTL_MS, NULL, &ra), 0);
    size_t token_len = 0;
    const char *token = redlock_lock_token(ra.lock, &token_len);
    assert_true(h_wait_holding(&env, KEY, strlen(KEY), token, token_len, N, H_WAIT_MS));
    for (unsigned i = 0; i < 3; i++) {
        assert_int_equal(fixture_kill(&env.cluster, i), 0);
        assert_int_equal(fixture_restart(&env.cluster, i), 0);
    }
    /* C gets the lock on the three empty nodes while A holds it. */
    h_wait_ready(&env, cc);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.wait_ms = H_WAIT_MS;
    h_record rc_rec;
    int rc = h_acquire(&env, cc, KEY, PF_LONG_TTL_MS, &lo, &rc_rec);
    if (rc != 0)
        h_dump_record("C's acquire", &rc_rec);
    assert_int_equal(rc, 0);
    /* A's handle learns it as soon as A's client reaches the restarted servers (new run_ids):
     * a check finds three nodes without its token, and A stops there, long before its deadline.
     * Its release tells too: three nodes say "not ours", so the hold was not exclusive. */
    assert_true(redlock_lock_is_held(ra.lock, redlock_now_us()));
    uint64_t until =
        redlock_now_us() + (A_RECONNECT_MS * 3 / 2 + H_NODE_TIMEOUT_MS + H_SLACK_MS) * 1000ull;
    while (redlock_lock_is_held(ra.lock, redlock_now_us()) && redlock_now_us() < until)
        h_run_for(&env.loop, 5);
    const uint64_t a_end = redlock_now_us();
    assert_false(redlock_lock_is_held(ra.lock, a_end));
    assert_true(a_end < redlock_lock_deadline_us(ra.lock));
    h_wait_ready(&env, ca);
    h_record rel;
    rc = h_release(&env, ra.lock, &rel);
    if (rc != REDLOCK_ELOST)
        h_dump_record("A's release", &rel);
    assert_int_equal(rc, REDLOCK_ELOST);
    pf_history_add(&h, "A", ra.at_us, a_end);
    const uint64_t c_end = redlock_now_us();
    assert_int_equal(h_release(&env, rc_rec.lock, &rel), 0);
    pf_history_add(&h, "C", rc_rec.at_us, c_end);
    pf_report(&h);
    printf("#   A's release: REDLOCK_ELOST: the library says the hold was not exclusive\n");
    assert_true(pf_overlap_between(&h, "A", "C"));
    redlock_lock_free(ra.lock);
    redlock_lock_free(rc_rec.lock);
    h_close_client(&env, cc);
    h_env_stop(&env); /* closes ca, the env's client */
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(failover_before_replication_gives_two_holders, teardown),
        cmocka_unit_test_teardown(majority_losing_the_key_breaks_redlock_too_and_release_says_so,
                                  teardown),
    };
    return cmocka_run_group_tests_name("pitfall-failover", tests, NULL, NULL);
}
