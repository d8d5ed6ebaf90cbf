/* SPDX-License-Identifier: MIT */
/* test_network.c - network faults on a minority of nodes, made by a fault proxy in front of each
 * server (the client only knows the proxies' ports): traffic held (blackhole), connections
 * reset mid-traffic, replies delayed past the node timeout. Three healthy nodes keep deciding,
 * as fast as ever, and the faulty ones come back once healed.
 *
 * Only the nodes a test makes faulty get a short deadline (in their URLs); the healthy ones
 * have seconds, so however loaded the machine, the only nodes that can time out are the ones
 * the test made slow. Where a test shows that a round did not wait for a faulty node, the bound
 * is that node's deadline (a round that waited took at least that long), and the deadline is
 * long enough to leave a loaded machine a second or more. */
#include "proxy.h"
#include "traffic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 5
#define MS 1000ull /* microseconds per millisecond */
#define SLOTS 16

#define HEALTHY_TIMEOUT_MS 10000

typedef struct net_env {
    h_env env;
    proxy *proxies[N];
    char urls_buf[N][96];
    const char *urls[N];
    redlock_client *client;
} net_env;

/* File-level, so that the teardown can stop what a failed check left running. */
static net_env net;

/* The nodes whose bit is set in faulty get faulty_timeout_ms as their deadline; the others
 * HEALTHY_TIMEOUT_MS. */
static void net_start(net_env *ne, unsigned faulty, uint64_t faulty_timeout_ms)
{
    memset(ne, 0, sizeof(*ne));
    h_env_start(&ne->env, N, NULL);
    for (unsigned i = 0; i < N; i++) {
        ne->proxies[i] =
            proxy_start(fixture_free_port(), "127.0.0.1", ne->env.cluster.servers[i].port);
        assert_non_null(ne->proxies[i]);
        if (faulty & (1u << i))
            snprintf(ne->urls_buf[i], sizeof(ne->urls_buf[i]),
                     "redis://127.0.0.1:%d?timeout_ms=%llu", proxy_port(ne->proxies[i]),
                     (unsigned long long)faulty_timeout_ms);
        else
            snprintf(ne->urls_buf[i], sizeof(ne->urls_buf[i]), "redis://127.0.0.1:%d",
                     proxy_port(ne->proxies[i]));
        ne->urls[i] = ne->urls_buf[i];
    }
    redlock_options o;
    h_test_options(&o);
    o.node_timeout_ms = HEALTHY_TIMEOUT_MS;
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
    for (unsigned i = 0; i < N; i++) {
        proxy_stop(ne->proxies[i]);
        ne->proxies[i] = NULL;
    }
    h_env_stop(&ne->env);
}

/* After every test, passed or failed: no proxy and no server is left for the next one. (After
 * a failure the client is abandoned with its loop; nothing runs it any more.) */
static int teardown(void **state)
{
    (void)state;
    for (unsigned i = 0; i < N; i++) {
        proxy_stop(net.proxies[i]);
        net.proxies[i] = NULL;
    }
    fixture_stop(&net.env.cluster);
    return 0;
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

/* As assert_clean_ok, but a release may also be deleted on a quorum and yet unproven: a reset
 * node may have been one of the few kept nodes of a lock acquired just before (its late yes
 * votes not yet known to lie inside the hold), and then too few kept nodes answered to tell. */
static void assert_ok_or_unproven(const traffic *t, unsigned epoch)
{
    const traffic_stats *st = &t->by_epoch[epoch];
    if (st->ok + st->releases_unproven != st->calls || st->immediate_errors != 0 || st->calls == 0)
        traffic_dump(t, epoch);
    printf("# epoch %u: %d of %d releases unproven\n", epoch, st->releases_unproven,
           st->calls - st->acquires_ok);
    assert_true(st->calls > 0);
    assert_int_equal(st->ok + st->releases_unproven, st->calls);
    assert_int_equal(st->immediate_errors, 0);
    assert_int_equal(t->straddle[epoch].ok + t->straddle[epoch].releases_unproven,
                     t->straddle[epoch].calls);
}

/* Two of five proxies hold everything: acquires are decided by the other three, at their
 * speed (not the node timeout's); releases wait for the silent two until their deadline. */
static void blackholed_minority_does_not_slow_acquires(void **state)
{
    (void)state;
    const uint64_t timeout_ms = 2000; /* the blackholed two's */
    net_start(&net, 1u << 0 | 1u << 2, timeout_ms);
    traffic t;
    traffic_start(&t, &net.env, net.client, SLOTS, "fault:blackhole", 5000);
    h_run_for(&net.env.loop, 200);
    proxy_set_mode(net.proxies[0], PROXY_BLACKHOLE);
    proxy_set_mode(net.proxies[2], PROXY_BLACKHOLE);
    traffic_set_epoch(&t, 1);
    /* Until there were as many acquires and releases within the blackhole as slots (each release
     * waits one deadline for the silent two), bounded. */
    uint64_t until = redlock_now_us() + (4 * timeout_ms + 10000) * MS;
    while ((t.by_epoch[1].acquires_ok < SLOTS || t.by_epoch[1].releases_ok < SLOTS) &&
           redlock_now_us() < until)
        h_run_for(&net.env.loop, 50);
    if (t.by_epoch[1].releases_ok < SLOTS)
        traffic_dump(&t, 1);
    proxy_set_mode(net.proxies[0], PROXY_PASS);
    proxy_set_mode(net.proxies[2], PROXY_PASS);
    traffic_set_epoch(&t, 2);
    /* Healed: both deliver what they held and confirm again. */
    bool back = h_wait_release_votes(&net.env, net.client, N, 10000);
    assert_true(traffic_stop(&t, 20000));

    assert_ok_or_unproven(&t, 0); /* the straddling releases of locks they kept */
    assert_clean_ok(&t, 1);
    const traffic_stats *bh = &t.by_epoch[1];
    /* An acquire that waited for the silent two would take their whole deadline at least. */
    if (bh->max_acquire_latency_us >= timeout_ms * MS)
        traffic_dump(&t, 1);
    assert_true(bh->max_acquire_latency_us < timeout_ms * MS);
    assert_true(bh->acquires_ok >= SLOTS);
    assert_true(bh->releases_ok >= SLOTS);
    assert_int_equal(bh->min_release_votes_yes, 3);
    assert_true(bh->max_votes_timeout >= 1); /* the silent two were waited for, then timed out */
    /* ... but no longer than their deadline (+ seconds of slack). */
    assert_true(bh->max_latency_us < (timeout_ms + 2000) * MS);
    assert_true(back);
    net_stop(&net);
}

/* Every connection of two proxies reset (RST) in the middle of the traffic: no call fails, and
 * the two nodes are reconnected and confirm again. */
static void reset_minority_mid_traffic_reconnects(void **state)
{
    (void)state;
    const uint64_t timeout_ms = 500; /* the reset two's (a reset fails at once anyway) */
    net_start(&net, 1u << 1 | 1u << 4, timeout_ms);
    traffic t;
    traffic_start(&t, &net.env, net.client, SLOTS, "fault:reset", 5000);
    h_run_for(&net.env.loop, 200);
    for (int round = 0; round < 3; round++) {
        proxy_reset_all(net.proxies[1]);
        proxy_reset_all(net.proxies[4]);
        h_run_for(&net.env.loop, 200);
    }
    /* Every slot got through the resets (bounded, not a fixed time a slow machine may not fill). */
    if (!h_run_until(&net.env.loop, &t.by_epoch[0].acquires_ok, SLOTS, 10000))
        traffic_dump(&t, 0);
    traffic_set_epoch(&t, 1);
    bool back = h_wait_release_votes(&net.env, net.client, N, 10000);
    h_run_for(&net.env.loop, 300);
    assert_true(traffic_stop(&t, 20000));

    assert_ok_or_unproven(&t, 0);
    assert_clean_ok(&t, 1);
    /* A reset node fails at once, or at worst at its deadline; nobody waits for the healthy
     * nodes' 10 s. */
    assert_true(t.by_epoch[0].max_latency_us < (timeout_ms + 2000) * MS);
    assert_true(t.by_epoch[0].acquires_ok >= SLOTS);
    assert_true(back);
    /* Reconnected through the same proxies (the old connections are gone). */
    assert_true(proxy_connections(net.proxies[1]) >= 1);
    assert_true(proxy_connections(net.proxies[4]) >= 1);
    net_stop(&net);
}

/* Two proxies delay every byte so that each round trip (1 s) takes longer than their node
 * timeout (700 ms), though less than the three timeouts after which a silent node is dropped:
 * the others decide, and in a release (which waits for every node) the slow two vote timeout. */
static void delayed_minority_votes_timeout(void **state)
{
    (void)state;
    const uint64_t timeout_ms = 700, delay_ms = 500;
    net_start(&net, 1u << 1 | 1u << 3, timeout_ms);
    proxy_set_delay_ms(net.proxies[1], (unsigned)delay_ms);
    proxy_set_delay_ms(net.proxies[3], (unsigned)delay_ms);
    for (int k = 0; k < 4; k++) {
        h_record rec, rel;
        uint64_t t0 = redlock_now_us();
        if (h_acquire(&net.env, net.client, "fault:delay", 5000, NULL, &rec) != 0)
            h_dump_record("acquire", &rec);
        assert_int_equal(rec.status, 0);
        /* Decided by the three fast nodes: a round that waited for a slow one would have taken
         * its deadline at least (its answer comes later still). */
        assert_true(h_since_us(t0) < timeout_ms * MS);
        assert_true(rec.votes_yes >= 3);
        assert_int_equal(h_release(&net.env, rec.lock, &rel), 0);
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
    proxy_set_delay_ms(net.proxies[1], 0);
    proxy_set_delay_ms(net.proxies[3], 0);
    assert_true(h_wait_release_votes(&net.env, net.client, N, 10000));
    net_stop(&net);
}

/* A node that owes nothing for a while and then answers one request late (after one node
 * timeout, well before three) votes timeout and keeps its connection: silence counts from when
 * it started to owe a reply, not from its last reply (idle time is not silence). This test
 * caught the earlier rule, which dropped the connection after every idle spell. */
static void slow_node_after_idle_votes_timeout_not_dropped(void **state)
{
    (void)state;
    const uint64_t timeout_ms = 400; /* node 1's; its round trip is 600 ms, under 3 x 400 */
    net_start(&net, 1u << 1, timeout_ms);
    proxy_set_delay_ms(net.proxies[1], 300); /* round trip 600 ms: late, not silent */
    h_run_for(&net.env.loop, 1500);          /* idle: nothing owed by anyone */
    h_record rec, rel;
    assert_int_equal(h_acquire(&net.env, net.client, "fault:idle", 5000, NULL, &rec), 0);
    assert_int_equal(h_release(&net.env, rec.lock, &rel), 0);
    redlock_lock_free(rec.lock);
    if (rel.node_vote[1] != REDLOCK_VOTE_TIMEOUT)
        h_dump_record("release after idle", &rel);
    assert_int_equal(rel.node_vote[1], REDLOCK_VOTE_TIMEOUT);
    assert_null(strstr(rel.node_error[1], "dropped"));
    net_stop(&net);
}

/* Two nodes far away (the proxy delays each way by 80 ms and by 150 ms: round trips of 160 and
 * 300 ms) and one local: with the default options (an adaptive node timeout) a new client's
 * acquire, extend and release succeed, decided at the quorum. The control, the fixed 50 ms that
 * was the default before, cannot hear a far node in time (no reply crosses the proxy in under
 * 160 ms), so its acquire fails for want of a quorum. */
static void far_nodes_work_with_default_options(void **state)
{
    (void)state;
    static const unsigned delays_ms[2] = {80, 150};
    memset(&net, 0, sizeof(net));
    h_env_start(&net.env, 3, NULL);
    for (unsigned i = 0; i < 3; i++) {
        int port = net.env.cluster.servers[i].port;
        if (i < 2) {
            net.proxies[i] = proxy_start(fixture_free_port(), "127.0.0.1", port);
            assert_non_null(net.proxies[i]);
            proxy_set_delay_ms(net.proxies[i], delays_ms[i]);
            port = proxy_port(net.proxies[i]);
        }
        snprintf(net.urls_buf[i], sizeof(net.urls_buf[i]), "redis://127.0.0.1:%d", port);
        net.urls[i] = net.urls_buf[i];
    }
    redlock_options o;
    redlock_options_init(&o); /* the defaults, as a new user has them */
    char err[256] = "";
    int rc = h_client_urls(&net.env, net.urls, 3, &o, &net.client, err, sizeof(err));
    if (rc != 0)
        fprintf(stderr, "client: %s\n", err);
    assert_int_equal(rc, 0);
    h_record acq, ext, rel;
    rc = h_acquire(&net.env, net.client, "fault:far", 10000, NULL, &acq);
    if (rc != 0)
        h_dump_record("far acquire", &acq);
    assert_int_equal(rc, 0);
    assert_true(acq.votes_yes >= 2); /* a far node among them: the quorum is 2 of 3 */
    rc = h_extend(&net.env, acq.lock, 10000, 0, &ext);
    if (rc != 0)
        h_dump_record("far extend", &ext);
    assert_int_equal(rc, 0);
    rc = h_release(&net.env, acq.lock, &rel);
    if (rc != 0)
        h_dump_record("far release", &rel);
    assert_int_equal(rc, 0);
    redlock_lock_free(acq.lock);
    h_close_client(&net.env, net.client);

    redlock_options fixed;
    redlock_options_init(&fixed);
    fixed.node_timeout_ms = 50; /* the old default */
    fixed.retry_count = 0;
    assert_int_equal(h_client_urls(&net.env, net.urls, 3, &fixed, &net.client, err, sizeof(err)),
                     0);
    h_wait_connected(&net.env, net.client);
    assert_int_equal(h_acquire(&net.env, net.client, "fault:far:fixed", 10000, NULL, &acq),
                     REDLOCK_ENOQUORUM);
    assert_int_equal(acq.node_vote[0], REDLOCK_VOTE_TIMEOUT);
    assert_non_null(strstr(acq.node_error[0], "no answer within 50 ms"));
    h_close_client(&net.env, net.client);
    for (unsigned i = 0; i < 2; i++) {
        proxy_stop(net.proxies[i]);
        net.proxies[i] = NULL;
    }
    h_env_stop(&net.env);
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(blackholed_minority_does_not_slow_acquires, teardown),
        cmocka_unit_test_teardown(reset_minority_mid_traffic_reconnects, teardown),
        cmocka_unit_test_teardown(delayed_minority_votes_timeout, teardown),
        cmocka_unit_test_teardown(slow_node_after_idle_votes_timeout_not_dropped, teardown),
        cmocka_unit_test_teardown(far_nodes_work_with_default_options, teardown),
    };
    return cmocka_run_group_tests_name("fault-network", tests, NULL, NULL);
}
