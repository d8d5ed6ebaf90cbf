/* SPDX-License-Identifier: MIT */
/* test_tls_faults.c - TLS nodes when things go wrong: a TLS client on a plain port and a plain
 * client on a TLS port fail within their deadlines; a server that accepts TCP and never answers
 * the TLS handshake fails within the connect timeout; the fault proxy delays, blackholes and
 * resets a TLS node's traffic in flight; a dropped connection comes back with a resumed TLS
 * session (and a restarted server, whose tickets died with it, with a full handshake first);
 * and a short torture of contending clients over TLS nodes under proxy faults keeps mutual
 * exclusion. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy.h"
#include "tls_harness.h"

#define SLACK_US 5000000ull /* a loaded machine, or valgrind: bounds, never speed */

/* A TLS client on a plain port, a plain client on a TLS port: each fails within its own
 * deadline with its reason, and the other nodes decide. */
static void wrong_port_kinds_fail_bounded(void **state)
{
    (void)state;
    t_env env;
    fixture_tls_conf conf = t_conf("server", false);
    t_start(&env, 5, &conf, true);
    char tls_to_plain[160], plain_to_tls[160];
    snprintf(tls_to_plain, sizeof(tls_to_plain), "rediss://127.0.0.1:%d",
             env.tls->servers[0].cluster.servers[0].port);
    snprintf(plain_to_tls, sizeof(plain_to_tls), "redis://127.0.0.1:%d",
             env.tls->servers[1].tls_port);
    const char *urls[5] = {tls_to_plain, plain_to_tls, env.tls->urls[2], env.tls->urls[3],
                           env.tls->urls[4]};
    redlock_options o;
    t_options(&o);
    o.connect_timeout_ms = 5000;
    redlock_client *c = t_client(&env, urls, 5, &o);
    uint64_t bound_us = o.node_timeout_ms * 1000 + SLACK_US;
    h_record rec, rel;
    assert_int_equal(h_acquire(&env.h, c, "tls-wrong-ports", 10000, NULL, &rec), 0);
    assert_true(rec.elapsed_us <= bound_us);
    assert_int_equal(h_release(&env.h, rec.lock, &rel), 0);
    redlock_lock_free(rec.lock);
    assert_true(rel.elapsed_us <= bound_us);
    assert_int_equal(rel.votes_yes, 3);
    for (unsigned i = 0; i < 2; i++)
        assert_true(rel.node_vote[i] == REDLOCK_VOTE_ERROR ||
                    rel.node_vote[i] == REDLOCK_VOTE_TIMEOUT);
    char last[160];
    if (!t_wait_node_error(&env, c, 0, "tls: ", 30000, last))
        fail_msg("TLS to a plain port: node error \"%s\"", last);
    fprintf(stderr, "# TLS to a plain port: %s\n", last);
    if (!t_wait_node_error(&env, c, 1, "a TLS port? use rediss://", 30000, last))
        fail_msg("plain to a TLS port: node error \"%s\"", last);
    fprintf(stderr, "# plain to a TLS port: %s\n", last);
    t_stop(&env);
}

/* A new user's rediss:// URL naming a real Redis's plain port, with the default options: the
 * acquire's failure names the mistake (as a plain URL on a TLS port gets "use rediss://"),
 * whether the server answered the ClientHello with plain text or not at all yet. */
static void tls_to_plain_port_says_so(void **state)
{
    (void)state;
    t_env env;
    fixture_tls_conf conf = t_conf("server", false);
    t_start(&env, 1, &conf, true);
    char url[160];
    snprintf(url, sizeof(url), "rediss://127.0.0.1:%d",
             env.tls->servers[0].cluster.servers[0].port);
    const char *urls[1] = {url};
    redlock_options o;
    redlock_options_init(&o);
    o.tls_ca_file = t_path("ca.crt");
    o.retry_count = 0; /* the first attempt's answer */
    redlock_client *c = t_client(&env, urls, 1, &o);
    h_record rec;
    assert_int_equal(h_acquire(&env.h, c, "tls-to-plain", 10000, NULL, &rec), REDLOCK_ENOQUORUM);
    fprintf(stderr, "# rediss:// on a plain port: %s\n", rec.node_error[0]);
    assert_non_null(strstr(rec.node_error[0], "a plain port? use redis://"));
    t_stop(&env);
}

/* A peer that answers whatever it reads with a plain-text Redis error, as a Redis port that gets
 * a line would: what a TLS client hears from a server that does not speak TLS. */
typedef struct plain_peer {
    int listen_fd;
    int port;
    pthread_t thread;
} plain_peer;

static void *plain_peer_main(void *arg)
{
    plain_peer *pp = arg;
    for (;;) {
        int fd = accept(pp->listen_fd, NULL, NULL);
        if (fd < 0)
            return NULL; /* the listener was shut down */
        char buf[4096];
        if (read(fd, buf, sizeof(buf)) > 0) {
            static const char reply[] = "-ERR unknown command '\\x16\\x03\\x01'\r\n";
            ssize_t ignored = write(fd, reply, sizeof(reply) - 1);
            (void)ignored;
        }
        close(fd);
    }
}

static void plain_peer_start(plain_peer *pp)
{
    pp->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(pp->listen_fd >= 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    assert_int_equal(bind(pp->listen_fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    assert_int_equal(listen(pp->listen_fd, 16), 0);
    assert_int_equal(getsockname(pp->listen_fd, (struct sockaddr *)&addr, &len), 0);
    pp->port = ntohs(addr.sin_port);
    assert_int_equal(pthread_create(&pp->thread, NULL, plain_peer_main, pp), 0);
}

static void plain_peer_stop(plain_peer *pp)
{
    shutdown(pp->listen_fd, SHUT_RDWR); /* wakes the accept() */
    pthread_join(pp->thread, NULL);
    close(pp->listen_fd);
}

/* A peer that answers the ClientHello in plain text: "server does not speak TLS", at once. */
static void plain_answer_is_not_tls(void **state)
{
    (void)state;
    t_env env;
    fixture_tls_conf conf = t_conf("server", false);
    t_start(&env, 2, &conf, true);
    plain_peer pp;
    plain_peer_start(&pp);
    char url[64];
    snprintf(url, sizeof(url), "rediss://127.0.0.1:%d", pp.port);
    const char *urls[3] = {url, env.tls->urls[0], env.tls->urls[1]};
    redlock_options o;
    t_options(&o);
    redlock_client *c = t_client(&env, urls, 3, &o);
    char last[160];
    if (!t_wait_node_error(&env, c, 0, "tls: server does not speak TLS", 30000, last))
        fail_msg("node 0 error \"%s\"", last);
    h_close_client(&env.h, c);
    plain_peer_stop(&pp);
    t_stop(&env);
}

/* A stopped server completes the TCP connect (the kernel's backlog) and never answers the
 * ClientHello: the handshake counts inside connect_timeout_ms, and the node says so. */
static void handshake_counts_in_connect_timeout(void **state)
{
    (void)state;
    t_env env;
    fixture_tls_conf conf = t_conf("server", false);
    t_start(&env, 3, &conf, true);
    assert_int_equal(fixture_pause(&env.tls->servers[0].cluster, 0), 0);
    redlock_options o;
    t_options(&o);
    o.connect_timeout_ms = 3000;
    redlock_client *c = t_client(&env, env.tls->urls, 3, &o);
    char last[160];
    if (!t_wait_node_error(&env, c, 0,
                           "tls: no answer to the TLS handshake within 3000 ms (server stopped, "
                           "or a plain port? use redis://)",
                           30000, last))
        fail_msg("node 0 error \"%s\"", last);
    assert_int_equal(fixture_resume(&env.tls->servers[0].cluster, 0), 0);
    assert_true(t_wait_votes(&env, c, 3, 30000));
    t_stop(&env);
}

typedef struct burst {
    int done;
    int ok;
} burst;

static void on_burst(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)result;
    burst *b = data;
    b->done++;
    b->ok += status == 0;
    redlock_lock_free(lock);
}

/* The fault proxy between the client and TLS node 0: a delay shows in its latency, a blackhole
 * makes it time out and it comes back when healed, and a reset while megabytes of records are
 * in flight (so TLS records are cut in the middle) fails it, completes every request exactly
 * once, and it reconnects with a resumed session. */
static void proxy_faults(void **state)
{
    (void)state;
    t_env env;
    fixture_tls_conf conf = t_conf("server", false);
    t_start(&env, 3, &conf, true);
    proxy *p = proxy_start(fixture_free_port(), "127.0.0.1", env.tls->servers[0].tls_port);
    assert_non_null(p);
    char via_proxy[160];
    snprintf(via_proxy, sizeof(via_proxy), "rediss://127.0.0.1:%d", proxy_port(p));
    const char *urls[3] = {via_proxy, env.tls->urls[1], env.tls->urls[2]};
    redlock_options o;
    t_options(&o);
    o.node_timeout_ms = 3000; /* the blackhole's timeouts */
    redlock_client *c = t_client(&env, urls, 3, &o);
    assert_true(t_wait_votes(&env, c, 3, 30000));

    /* delay */
    proxy_set_delay_ms(p, 150);
    h_record rec, rel;
    assert_int_equal(h_acquire(&env.h, c, "tls-proxy-delay", 10000, NULL, &rec), 0);
    assert_int_equal(h_release(&env.h, rec.lock, &rel), 0);
    redlock_lock_free(rec.lock);
    assert_int_equal(rel.node_vote[0], REDLOCK_VOTE_YES);
    assert_true(rel.node_latency_us[0] >= 300000);
    proxy_set_delay_ms(p, 0);

    /* blackhole */
    proxy_set_mode(p, PROXY_BLACKHOLE);
    assert_int_equal(h_acquire(&env.h, c, "tls-proxy-hole", 10000, NULL, &rec), 0);
    assert_int_equal(h_release(&env.h, rec.lock, &rel), 0);
    redlock_lock_free(rec.lock);
    assert_int_equal(rel.node_vote[0], REDLOCK_VOTE_TIMEOUT);
    assert_int_equal(rel.votes_yes, 2);
    proxy_set_mode(p, PROXY_PASS);
    assert_true(t_wait_votes(&env, c, 3, 30000));

    /* reset with records in flight */
    unsigned handshakes = t_stats(c, 0)->tls_handshakes;
    proxy_set_delay_ms(p, 20);
    enum { N = 300, NAME = 3000 };
    burst b = {0, 0};
    char *name = malloc(NAME + 16);
    assert_non_null(name);
    memset(name, 'r', NAME);
    for (int k = 0; k < N; k++) {
        int len = snprintf(name + NAME, 16, "%d", k) + NAME;
        assert_int_equal(redlock_acquire(c, name, (size_t)len, 10000, NULL, on_burst, &b), 0);
    }
    free(name);
    h_run_for(&env.h.loop, 5); /* some bytes through the proxy, most still on their way */
    proxy_reset_all(p);
    proxy_set_delay_ms(p, 0);
    assert_true(h_run_until(&env.h.loop, &b.done, N, 60000));
    h_run_for(&env.h.loop, 100);
    assert_int_equal(b.done, N); /* every request completed, and only once */
    fprintf(stderr, "# reset with records in flight: %d of %d acquires won\n", b.ok, N);
    assert_true(t_wait_votes(&env, c, 3, 30000));
    const redlock__stream_stats *st = t_stats(c, 0);
    assert_true(st->tls_handshakes > handshakes);
    assert_true(st->last_resumed);
    proxy_stop(p);
    t_stop(&env);
}

static void client_kill(t_env *env, unsigned i)
{
    redisReply *r = fixture_command(&env->tls->servers[i].cluster, 0, "CLIENT KILL TYPE normal");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    assert_true(r->integer >= 1);
    freeReplyObject(r);
}

/* Wait until node i has completed more than `than` handshakes and answers again. */
static void wait_rehandshake(t_env *env, redlock_client *c, unsigned i, unsigned than)
{
    uint64_t deadline = redlock_now_us() + 30000000;
    while (t_stats(c, i)->tls_handshakes <= than) {
        if (redlock_now_us() >= deadline)
            fail_msg("node %u: no new TLS handshake", i);
        h_run_for(&env->h.loop, 20);
    }
    assert_true(t_wait_votes(env, c, env->tls->n, 30000));
}

/* A dropped connection reconnects with an abbreviated handshake: the node's last session is
 * offered and the server takes it. A killed and restarted server lost its ticket keys, so its
 * first reconnect is a full handshake; the next blip resumes again. */
static void reconnect_resumes_session(void **state)
{
    (void)state;
    t_env env;
    fixture_tls_conf conf = t_conf("server", false);
    t_start(&env, 3, &conf, true);
    redlock_options o;
    t_options(&o);
    redlock_client *c = t_client(&env, env.tls->urls, 3, &o);
    assert_true(t_wait_votes(&env, c, 3, 30000));
    assert_int_equal(t_stats(c, 0)->tls_handshakes, 1);

    client_kill(&env, 0);
    wait_rehandshake(&env, c, 0, 1);
    assert_true(t_stats(c, 0)->last_resumed);
    assert_int_equal(t_stats(c, 0)->tls_resumed, 1);

    unsigned before = t_stats(c, 1)->tls_handshakes;
    assert_int_equal(fixture_kill(&env.tls->servers[1].cluster, 0), 0);
    assert_int_equal(fixture_restart(&env.tls->servers[1].cluster, 0), 0);
    wait_rehandshake(&env, c, 1, before);
    fprintf(stderr, "# after a server restart: %s handshake\n",
            t_stats(c, 1)->last_resumed ? "resumed" : "full");
    before = t_stats(c, 1)->tls_handshakes;
    client_kill(&env, 1);
    wait_rehandshake(&env, c, 1, before);
    assert_true(t_stats(c, 1)->last_resumed);
    t_stop(&env);
}

/* ---- a short torture ----------------------------------------------------------------------- */

#define T_CLIENTS 4
#define T_RESOURCES 3
#define T_TTL_MS 3000

typedef struct torture torture;

typedef struct worker {
    torture *t;
    redlock_client *client;
    uv_timer_t hold_timer;
    redlock_lock *lock;
    unsigned resource;
    unsigned rng;
    bool stopping;
    bool idle; /* no operation in flight */
} worker;

typedef struct holder {
    const worker *w;
    uint64_t deadline_us;
} holder;

struct torture {
    worker workers[T_CLIENTS];
    holder holders[T_RESOURCES];
    unsigned holds[T_RESOURCES];
    unsigned violations;
    unsigned idle;
};

static const char *resource_name(unsigned r)
{
    static const char *names[T_RESOURCES] = {"tls-torture-a", "tls-torture-b", "tls-torture-c"};
    return names[r];
}

static void next_acquire(worker *w);

static void on_release(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)status, (void)result;
    worker *w = data;
    redlock_lock_free(lock);
    next_acquire(w);
}

static void on_hold_done(uv_timer_t *timer)
{
    worker *w = timer->data;
    holder *h = &w->t->holders[w->resource];
    if (h->w == w)
        h->w = NULL; /* from here on the worker no longer acts under the lock */
    redlock_lock *lock = w->lock;
    w->lock = NULL;
    if (redlock_release(lock, on_release, w) != 0) {
        redlock_lock_free(lock);
        next_acquire(w);
    }
}

static void on_acquire(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)result;
    worker *w = data;
    if (status != 0) {
        next_acquire(w);
        return;
    }
    uint64_t now = redlock_now_us();
    holder *h = &w->t->holders[w->resource];
    if (h->w != NULL && now < h->deadline_us) {
        w->t->violations++;
        fprintf(stderr, "# violation on %s: two holders\n", resource_name(w->resource));
    }
    h->w = w;
    h->deadline_us = redlock_lock_deadline_us(lock);
    w->t->holds[w->resource]++;
    w->lock = lock;
    w->rng = w->rng * 1103515245u + 12345u;
    uv_timer_start(&w->hold_timer, on_hold_done, 2 + (w->rng >> 16) % 15, 0);
}

static void next_acquire(worker *w)
{
    if (w->stopping) {
        w->idle = true;
        w->t->idle++;
        return;
    }
    w->rng = w->rng * 1103515245u + 12345u;
    w->resource = (w->rng >> 16) % T_RESOURCES;
    const char *name = resource_name(w->resource);
    if (redlock_acquire(w->client, name, strlen(name), T_TTL_MS, NULL, on_acquire, w) != 0) {
        w->idle = true;
        w->t->idle++;
    }
}

static void torture_over_tls(void **state)
{
    (void)state;
    t_env env;
    fixture_tls_conf conf = t_conf("server", false);
    t_start(&env, 5, &conf, true);
    proxy *proxies[2];
    char via[2][160];
    const char *urls[5];
    for (unsigned i = 0; i < 5; i++)
        urls[i] = env.tls->urls[i];
    for (unsigned k = 0; k < 2; k++) {
        proxies[k] = proxy_start(fixture_free_port(), "127.0.0.1", env.tls->servers[k].tls_port);
        assert_non_null(proxies[k]);
        snprintf(via[k], sizeof(via[k]), "rediss://127.0.0.1:%d", proxy_port(proxies[k]));
        urls[k] = via[k];
    }
    redlock_options o;
    t_options(&o);
    o.node_timeout_ms = 3000;
    o.retry_count = 0;
    o.reconnect_max_ms = 500;
    torture *t = calloc(1, sizeof(*t));
    assert_non_null(t);
    for (unsigned i = 0; i < T_CLIENTS; i++) {
        worker *w = &t->workers[i];
        w->t = t;
        w->rng = 7919u * (i + 1);
        redlock_client *c = NULL;
        char err[256];
        assert_int_equal(redlock_client_new(&env.h.loop, urls, 5, &o, &c, err, sizeof(err)), 0);
        w->client = c;
        uv_timer_init(&env.h.loop, &w->hold_timer);
        w->hold_timer.data = w;
        next_acquire(w);
    }
    /* The chaos: every 200 ms one of the two proxied nodes (a minority) gets a fault or heals. */
    unsigned rng = 12345;
    uint64_t end = redlock_now_us() + 6000000;
    unsigned faults = 0;
    while (redlock_now_us() < end) {
        h_run_for(&env.h.loop, 200);
        rng = rng * 1103515245u + 12345u;
        proxy *p = proxies[(rng >> 16) % 2];
        switch ((rng >> 20) % 5) {
        case 0:
            proxy_set_mode(p, PROXY_BLACKHOLE);
            break;
        case 1:
            proxy_set_delay_ms(p, 30);
            break;
        case 2:
            proxy_reset_all(p);
            break;
        case 3:
            proxy_set_mode(p, PROXY_REFUSE);
            break;
        default:
            proxy_set_mode(p, PROXY_PASS);
            proxy_set_delay_ms(p, 0);
            break;
        }
        faults++;
    }
    for (unsigned k = 0; k < 2; k++) {
        proxy_set_mode(proxies[k], PROXY_PASS);
        proxy_set_delay_ms(proxies[k], 0);
    }
    for (unsigned i = 0; i < T_CLIENTS; i++)
        t->workers[i].stopping = true;
    assert_true(h_run_until(&env.h.loop, (const int *)&t->idle, T_CLIENTS, 60000));
    for (unsigned i = 0; i < T_CLIENTS; i++) {
        uv_close((uv_handle_t *)&t->workers[i].hold_timer, NULL);
        h_close_client(&env.h, t->workers[i].client);
    }
    fprintf(stderr, "# %u faults; holds %u %u %u\n", faults, t->holds[0], t->holds[1], t->holds[2]);
    assert_int_equal(t->violations, 0);
    for (unsigned r = 0; r < T_RESOURCES; r++)
        assert_true(t->holds[r] > 0);
    for (unsigned k = 0; k < 2; k++)
        proxy_stop(proxies[k]);
    /* Every key was released, or expires within its ttl (a lost round's late SET). */
    h_run_for(&env.h.loop, T_TTL_MS + 500);
    for (unsigned i = 0; i < 5; i++) {
        redisReply *r = fixture_command(&env.tls->servers[i].cluster, 0, "DBSIZE");
        assert_non_null(r);
        assert_int_equal(r->integer, 0);
        freeReplyObject(r);
    }
    free(t);
    t_stop(&env);
}

int main(void)
{
    t_main_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(wrong_port_kinds_fail_bounded),
        cmocka_unit_test(tls_to_plain_port_says_so),
        cmocka_unit_test(plain_answer_is_not_tls),
        cmocka_unit_test(handshake_counts_in_connect_timeout),
        cmocka_unit_test(proxy_faults),
        cmocka_unit_test(reconnect_resumes_session),
        cmocka_unit_test(torture_over_tls),
    };
    return cmocka_run_group_tests_name("tls-faults", tests, NULL, NULL);
}
