/* test_network.c - network faults on a minority of nodes, made by a fault proxy in front of each
 * server (the client only knows the proxies' ports): traffic held (blackhole), connections
 * reset mid-traffic, replies delayed past the node timeout. Three healthy nodes keep deciding,
 * as fast as ever, and the faulty ones come back once healed. */
#include "proxy.h"
#include "traffic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 5
#define MS 1000ull /* microseconds per millisecond */
#define SLOTS 16

typedef struct net_env {
    h_env env;
    proxy *proxies[N];
    char urls_buf[N][64];
    const char *urls[N];
    redlock_client *client;
} net_env;

static void net_start(net_env *ne, uint64_t node_timeout_ms)
{
    memset(ne, 0, sizeof(*ne));
    h_env_start(&ne->env, N, NULL);
    for (unsigned i = 0; i < N; i++) {
        ne->proxies[i] = proxy_start(0, "127.0.0.1", ne->env.cluster.servers[i].port);
        assert_non_null(ne->proxies[i]);
        snprintf(ne->urls_buf[i], sizeof(ne->urls_buf[i]), "redis://127.0.0.1:%d",
                 proxy_port(ne->proxies[i]));
        ne->urls[i] = ne->urls_buf[i];
    }
    redlock_options o;
    h_test_options(&o);
    o.node_timeout_ms = node_timeout_ms;
    o.connect_timeout_ms = 300;
    o.reconnect_min_ms = 20;
    o.reconnect_max_ms = 300;
    char err[256] = "";
    int rc = h_client_urls(&ne->env, ne->urls, N, &o, &ne->client, err, sizeof(err));
    if (rc != 0)
        fprintf(stderr, "client: %s\n", err);
    assert_int_equal(rc, 0);
    h_wait_ready(&ne->env, ne->client);
}

static void net_stop(net_env *ne)
{
    /* The client goes first, so the proxies never see a reconnect storm while stopping. */
    h_close_client(&ne->env, ne->client);
    for (unsigned i = 0; i < N; i++)
        proxy_stop(ne->proxies[i]);
    h_env_stop(&ne->env);
}

static void assert_clean_ok(const traffic *t, unsigned epoch)
{
    const traffic_stats *st = &t->by_epoch[epoch];
    if (st->ok != st->calls || st->immediate_errors != 0 || st->calls == 0)
        traffic_dump(t, epoch);
    assert_true(st->calls > 0);
    assert_int_equal(st->ok, st->calls);
    assert_int_equal(st->immediate_errors, 0);
    assert_int_equal(t->straddle[epoch].ok, t->straddle[epoch].calls);
}

/* Two of five proxies hold everything: acquires are decided by the other three, at their
 * speed (not the node timeout's); releases wait for the silent two until their deadline. */
static void blackholed_minority_does_not_slow_acquires(void **state)
{
    (void)state;
    net_env ne;
    const uint64_t timeout_ms = 500;
    net_start(&ne, timeout_ms);
    traffic t;
    traffic_start(&t, &ne.env, ne.client, SLOTS, "fault:blackhole", 5000);
    h_run_for(&ne.env.loop, 200);
    proxy_set_mode(ne.proxies[0], PROXY_BLACKHOLE);
    proxy_set_mode(ne.proxies[2], PROXY_BLACKHOLE);
    traffic_set_epoch(&t, 1);
    h_run_for(&ne.env.loop, 2000);
    proxy_set_mode(ne.proxies[0], PROXY_PASS);
    proxy_set_mode(ne.proxies[2], PROXY_PASS);
    traffic_set_epoch(&t, 2);
    /* Healed: both reconnect (the held connections were given up) and confirm again. */
    bool back = h_wait_release_votes(&ne.env, ne.client, N, 5000);
    assert_true(traffic_stop(&t, 10000));

    assert_clean_ok(&t, 0);
    assert_clean_ok(&t, 1);
    const traffic_stats *bh = &t.by_epoch[1];
    /* Well under the node timeout, ASan and a loaded machine included. */
    if (bh->max_acquire_latency_us >= timeout_ms * MS / 2)
        traffic_dump(&t, 1);
    assert_true(bh->max_acquire_latency_us < timeout_ms * MS / 2);
    assert_true(bh->acquires_ok >= SLOTS);
    assert_int_equal(bh->min_release_votes_yes, 3);
    assert_true(bh->max_votes_timeout >= 1); /* the silent two were waited for, then timed out */
    assert_true(bh->max_latency_us < (timeout_ms + 1000) * MS);
    assert_true(back);
    net_stop(&ne);
}

/* Every connection of two proxies reset (RST) in the middle of the traffic: no call fails, and
 * the two nodes are reconnected and confirm again. */
static void reset_minority_mid_traffic_reconnects(void **state)
{
    (void)state;
    net_env ne;
    const uint64_t timeout_ms = 500;
    net_start(&ne, timeout_ms);
    traffic t;
    traffic_start(&t, &ne.env, ne.client, SLOTS, "fault:reset", 5000);
    h_run_for(&ne.env.loop, 200);
    for (int round = 0; round < 3; round++) {
        proxy_reset_all(ne.proxies[1]);
        proxy_reset_all(ne.proxies[4]);
        h_run_for(&ne.env.loop, 200);
    }
    traffic_set_epoch(&t, 1);
    uint64_t t0 = redlock_now_us();
    bool back = h_wait_release_votes(&ne.env, ne.client, N, 5000);
    uint64_t back_us = h_since_us(t0);
    h_run_for(&ne.env.loop, 300);
    assert_true(traffic_stop(&t, 10000));

    assert_clean_ok(&t, 0);
    assert_clean_ok(&t, 1);
    assert_true(t.by_epoch[0].max_latency_us < (timeout_ms + 1000) * MS);
    assert_true(t.by_epoch[0].acquires_ok >= SLOTS);
    assert_true(back);
    assert_true(back_us < 5000 * MS);
    /* Reconnected through the same proxies (the old connections are gone). */
    assert_true(proxy_connections(ne.proxies[1]) >= 1);
    assert_true(proxy_connections(ne.proxies[4]) >= 1);
    net_stop(&ne);
}

/* Two proxies delay every byte so that each round trip (300 ms) takes longer than the node
 * timeout (200 ms), though less than the three timeouts after which a silent node is dropped:
 * the others decide, and in a release (which waits for every node) the slow two vote timeout. */
static void delayed_minority_votes_timeout(void **state)
{
    (void)state;
    net_env ne;
    const uint64_t timeout_ms = 200;
    net_start(&ne, timeout_ms);
    proxy_set_delay_ms(ne.proxies[1], 150);
    proxy_set_delay_ms(ne.proxies[3], 150);
    for (int k = 0; k < 5; k++) {
        h_record rec, rel;
        uint64_t t0 = redlock_now_us();
        if (h_acquire(&ne.env, ne.client, "fault:delay", 5000, NULL, &rec) != 0)
            h_dump_record("acquire", &rec);
        assert_int_equal(rec.status, 0);
        /* Decided by the three fast nodes, long before the slow ones could answer. */
        assert_true(h_since_us(t0) < timeout_ms * MS / 2 + 100 * MS);
        assert_true(rec.votes_yes >= 3);
        assert_int_equal(h_release(&ne.env, rec.lock, &rel), 0);
        if (rel.votes_yes != 3 || rel.votes_timeout != 2)
            h_dump_record("release", &rel);
        assert_int_equal(rel.votes_yes, 3);
        assert_int_equal(rel.votes_timeout, 2);
        for (unsigned i = 1; i < N; i += 2) {
            assert_int_equal(rel.node_vote[i], REDLOCK_VOTE_TIMEOUT);
            assert_non_null(strstr(rel.node_error[i], "no answer"));
            assert_true(rel.node_latency_us[i] >= timeout_ms * MS * 8 / 10);
        }
        redlock_lock_free(rec.lock);
    }
    /* Without the delay both confirm again. */
    proxy_set_delay_ms(ne.proxies[1], 0);
    proxy_set_delay_ms(ne.proxies[3], 0);
    assert_true(h_wait_release_votes(&ne.env, ne.client, N, 5000));
    net_stop(&ne);
}

/* A node that owes nothing for a while and then answers one request late (after one node
 * timeout, well before three) votes timeout and keeps its connection: silence counts from when
 * it started to owe a reply, not from its last reply (idle time is not silence). This test
 * caught the earlier rule, which dropped the connection after every idle spell. */
static void slow_node_after_idle_votes_timeout_not_dropped(void **state)
{
    (void)state;
    net_env ne;
    const uint64_t timeout_ms = 200;
    net_start(&ne, timeout_ms);
    proxy_set_delay_ms(ne.proxies[1], 150); /* round trip 300 ms: late, not silent */
    h_run_for(&ne.env.loop, 1000);          /* idle: nothing owed by anyone */
    h_record rec, rel;
    assert_int_equal(h_acquire(&ne.env, ne.client, "fault:idle", 5000, NULL, &rec), 0);
    assert_int_equal(h_release(&ne.env, rec.lock, &rel), 0);
    redlock_lock_free(rec.lock);
    if (rel.node_vote[1] != REDLOCK_VOTE_TIMEOUT)
        h_dump_record("release after idle", &rel);
    assert_int_equal(rel.node_vote[1], REDLOCK_VOTE_TIMEOUT);
    assert_null(strstr(rel.node_error[1], "dropped"));
    net_stop(&ne);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(blackholed_minority_does_not_slow_acquires),
        cmocka_unit_test(reset_minority_mid_traffic_reconnects),
        cmocka_unit_test(delayed_minority_votes_timeout),
        cmocka_unit_test(slow_node_after_idle_votes_timeout_not_dropped),
    };
    return cmocka_run_group_tests_name("fault-network", tests, NULL, NULL);
}
