/* SPDX-License-Identifier: MIT */
/* test_proxy.c - the fault proxy (proxy.h) in front of one real redis-server, seen through
 * hiredis blocking connections the way a client would see it: replies, timeouts, refused
 * connects, EOF and resets, round-trip times. The last tests drive the redlock-proxy program,
 * whose path is argv[1] (they are skipped without it).
 *
 * Lower bounds on times are exact, since the proxy never forwards early. Upper bounds leave a
 * loaded machine (or valgrind) a second or so: where one must tell two behaviours apart ("not
 * delayed" from "delayed", "held" from "delivered"), the delay is made long enough for that.
 * Likewise a check that something has not arrived yet happens long before it is due, and a
 * check that it never arrives waits until well after. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <uv.h>

#include "fixture.h"
#include "proxy.h"

#define TEST_TIMEOUT_S 30 /* per test, by SIGALRM: nothing can hang the suite */

static fixture_cluster cluster;
static const char *program_path; /* redlock-proxy, or NULL */

static int redis_port(void)
{
    return cluster.servers[0].port;
}

static uint64_t now_ms(void)
{
    return uv_hrtime() / 1000000;
}

/* A loaded machine's worst plausible stall, as slack on upper bounds. */
#define SLACK_MS 1000
/* The delay that holds data back while the test takes its next step, which must come before the
 * data is due (run_before_due doubles it when a stall made the step late). */
#define DUE_MS 500

/* Sleep until at_ms on the now_ms() clock (if it is still ahead). */
static void sleep_until(uint64_t at_ms)
{
    uint64_t now = now_ms();
    if (at_ms > now)
        uv_sleep((unsigned)(at_ms - now));
}

static void wait_connections(proxy *p, unsigned want, uint64_t timeout_ms)
{
    uint64_t deadline = now_ms() + timeout_ms;
    while (proxy_connections(p) != want && now_ms() < deadline)
        uv_sleep(5);
    assert_int_equal(proxy_connections(p), want);
}

/* A hiredis connection to port with timeout_ms for the connect and every command; may carry an
 * error (the caller checks ->err and frees it). */
static redisContext *try_connect(int port, unsigned timeout_ms)
{
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    assert_non_null(c);
    if (c->err == 0)
        assert_int_equal(redisSetTimeout(c, tv), REDIS_OK);
    return c;
}

static redisContext *connect_ok(int port, unsigned timeout_ms)
{
    redisContext *c = try_connect(port, timeout_ms);
    if (c->err != 0)
        fprintf(stderr, "connect to %d: %s\n", port, c->errstr);
    assert_int_equal(c->err, 0);
    return c;
}

static void expect_status(redisReply *r, const char *status)
{
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    assert_string_equal(r->str, status);
    freeReplyObject(r);
}

static void ping_ok(redisContext *c)
{
    redisReply *r = redisCommand(c, "PING");
    if (r == NULL)
        fprintf(stderr, "PING: %s\n", c->errstr);
    expect_status(r, "PONG");
}

/* One PING round trip in ms. */
static uint64_t ping_ms(redisContext *c)
{
    uint64_t t0 = uv_hrtime();
    ping_ok(c);
    return (uv_hrtime() - t0) / 1000000;
}

/* Tries of a timed step whose upper bound is checked: the fastest counts, so one stall of a loaded
 * machine is not read as a slow proxy, while a proxy that is slow makes every try slow. */
#define TRIES 3

/* The fastest of TRIES PING round trips, in ms. */
static uint64_t ping_fastest_ms(redisContext *c)
{
    uint64_t fastest = UINT64_MAX;
    for (int i = 0; i < TRIES; i++) {
        uint64_t ms = ping_ms(c);
        if (ms < fastest)
            fastest = ms;
    }
    return fastest;
}

/* The connection was closed under c: an EOF, or a reset when the proxy closed its socket with
 * bytes from c still unread (the kernel then sends an RST instead of a FIN). */
static void expect_closed(redisContext *c)
{
    if (c->err == REDIS_ERR_IO)
        assert_non_null(strstr(c->errstr, "reset"));
    else
        assert_int_equal(c->err, REDIS_ERR_EOF);
}

/* Send a command without waiting for its reply. */
static void send_only(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = redisvAppendCommand(c, fmt, ap);
    va_end(ap);
    assert_int_equal(rc, REDIS_OK);
    int done = 0;
    while (!done)
        assert_int_equal(redisBufferWrite(c, &done), REDIS_OK);
}

/* GET key straight from the server (not through the proxy); NULL if nil. Caller frees. */
static char *server_get(const char *key)
{
    redisReply *r = fixture_command(&cluster, 0, "GET %s", key);
    assert_non_null(r);
    char *value = NULL;
    if (r->type == REDIS_REPLY_STRING)
        value = strdup(r->str);
    else
        assert_int_equal(r->type, REDIS_REPLY_NIL);
    freeReplyObject(r);
    return value;
}

static void server_del(const char *key)
{
    redisReply *r = fixture_command(&cluster, 0, "DEL %s", key);
    assert_non_null(r);
    freeReplyObject(r);
}

/* ---- fixtures -------------------------------------------------------------------------------- */

static int group_setup(void **state)
{
    signal(SIGPIPE, SIG_IGN); /* writes to sockets the proxy closed must fail, not kill */
    return fixture_start(&cluster, 1, NULL);
}

static int group_teardown(void **state)
{
    fixture_stop(&cluster);
    return 0;
}

static int proxy_setup(void **state)
{
    alarm(TEST_TIMEOUT_S);
    proxy *p = proxy_start(fixture_free_port(), "127.0.0.1", redis_port());
    *state = p;
    return p != NULL ? 0 : -1;
}

static int proxy_teardown(void **state)
{
    proxy_stop(*state);
    /* A test that failed with the server stopped (backpressure_bounds_buffering) must not leave
     * it stopped for the next one. */
    if (cluster.servers[0].paused)
        fixture_resume(&cluster, 0);
    alarm(0);
    return 0;
}

/* ---- forwarding and delay -------------------------------------------------------------------- */

static void set_get_big_value(redisContext *c, const char *key)
{
    size_t len = 1 << 20;
    char *value = malloc(len);
    assert_non_null(value);
    for (size_t i = 0; i < len; i++)
        value[i] = (char)('a' + (i * 7 + i / 4096) % 26);
    expect_status(redisCommand(c, "SET %s %b", key, value, len), "OK");
    redisReply *r = redisCommand(c, "GET %s", key);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_int_equal(r->len, len);
    assert_memory_equal(r->str, value, len);
    freeReplyObject(r);
    free(value);
    server_del(key);
}

static void pass_through(void **state)
{
    proxy *p = *state;
    assert_int_not_equal(proxy_port(p), redis_port());
    redisContext *c = connect_ok(proxy_port(p), 2000);
    ping_ok(c);
    assert_int_equal(proxy_connections(p), 1);
    set_get_big_value(c, "proxy:big");
    redisFree(c);
    wait_connections(p, 0, 5000);
}

static void big_value_through_delay_queue(void **state)
{
    proxy *p = *state;
    proxy_set_delay_ms(p, 5);
    redisContext *c = connect_ok(proxy_port(p), 5000);
    set_get_big_value(c, "proxy:big-delayed");
    redisFree(c);
}

static void delay_is_one_way_each_direction(void **state)
{
    proxy *p = *state;
    proxy_set_delay_ms(p, 50);
    redisContext *c = connect_ok(proxy_port(p), 5000);
    assert_in_range(ping_fastest_ms(c), 100, 100 + SLACK_MS);

    /* A pipeline costs one round trip, not ten (1 s, which the bound stays under): the proxy does
     * not serialize requests. */
    uint64_t fastest = UINT64_MAX;
    for (int try = 0; try < TRIES; try++) {
        for (int i = 0; i < 10; i++)
            assert_int_equal(redisAppendCommand(c, "PING"), REDIS_OK);
        uint64_t t0 = now_ms();
        for (int i = 0; i < 10; i++) {
            void *reply = NULL;
            assert_int_equal(redisGetReply(c, &reply), REDIS_OK);
            expect_status(reply, "PONG");
        }
        uint64_t ms = now_ms() - t0;
        assert_true(ms >= 100); /* every try pays the round trip */
        if (ms < fastest)
            fastest = ms;
    }
    assert_in_range(fastest, 100, 999);
    redisFree(c);
}

static void delay_change_takes_effect(void **state)
{
    /* Long enough that "not delayed" (under one delay) leaves a loaded machine half a second. */
    const unsigned delay_ms = 500;
    proxy *p = *state;
    redisContext *c = connect_ok(proxy_port(p), 5000);
    assert_in_range(ping_fastest_ms(c), 0, delay_ms - 1);
    proxy_set_delay_ms(p, delay_ms);
    assert_in_range(ping_fastest_ms(c), 2 * delay_ms, 2 * delay_ms + SLACK_MS);
    proxy_set_delay_ms(p, 0);
    assert_in_range(ping_fastest_ms(c), 0, delay_ms - 1);
    redisFree(c);
}

/* Data read after a drop in delay never overtakes data still queued with the old delay. */
static void delay_drop_keeps_byte_order(void **state)
{
    proxy *p = *state;
    proxy_set_delay_ms(p, 200);
    redisContext *c = connect_ok(proxy_port(p), 2000);
    send_only(c, "SET proxy:order first");
    uv_sleep(30); /* let the proxy read the SET under the 200 ms delay */
    proxy_set_delay_ms(p, 0);
    redisReply *get = NULL, *set = NULL;
    assert_int_equal(redisAppendCommand(c, "GET proxy:order"), REDIS_OK);
    assert_int_equal(redisGetReply(c, (void **)&set), REDIS_OK);
    expect_status(set, "OK");
    assert_int_equal(redisGetReply(c, (void **)&get), REDIS_OK);
    assert_non_null(get);
    assert_int_equal(get->type, REDIS_REPLY_STRING);
    assert_string_equal(get->str, "first");
    freeReplyObject(get);
    redisFree(c);
    server_del("proxy:order");
}

/* ---- data held back under a delay ------------------------------------------------------------ */

/* One try of a case whose step must come before its delayed data is due, with that delay. It
 * returns false, having cleaned up, when a stall of the machine made the step late: that try shows
 * nothing either way. */
typedef bool (*due_try)(proxy *p, unsigned delay_ms);

/* Runs a due_try with DUE_MS, and again with twice the delay while its step comes late: a stall
 * gives another try, never a pass, and a proxy that breaks the case fails the first try in time. */
static void run_before_due(proxy *p, due_try try)
{
    const unsigned most_ms = DUE_MS * 16;
    for (unsigned delay_ms = DUE_MS; delay_ms <= most_ms; delay_ms *= 2) {
        if (try(p, delay_ms))
            return;
        fprintf(stderr, "the step came after data delayed %u ms was due: again, with twice that\n",
                delay_ms);
    }
    fail_msg("every try's step came after its data was due, up to a delay of %u ms", most_ms);
}

/* A late try's cleanup: c closed, everything queued or held dropped, the key gone. */
static void due_try_late(proxy *p, redisContext *c, const char *key)
{
    redisFree(c);
    proxy_reset_all(p);
    proxy_set_mode(p, PROXY_PASS);
    server_del(key);
}

/* ---- modes ----------------------------------------------------------------------------------- */

/* Wait up to timeout_ms for key to hold value on the server; returns whether it did. */
static bool wait_value(const char *key, const char *value, uint64_t timeout_ms)
{
    uint64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        char *got = server_get(key);
        bool same = got != NULL && strcmp(got, value) == 0;
        free(got);
        if (same || now_ms() >= deadline)
            return same;
        uv_sleep(5);
    }
}

static void expect_reply_status(redisContext *c, const char *status)
{
    void *reply = NULL;
    if (redisGetReply(c, &reply) != REDIS_OK)
        fprintf(stderr, "reply: %s\n", c->errstr);
    expect_status(reply, status);
}

/* A blackhole is a partition TCP survives: nothing arrives while it lasts (a client times out,
 * the connection stays open), new connections are accepted and held too, and once it heals
 * everything held is delivered in order, both ways, on the same connections. */
static void blackhole_holds_then_delivers(void **state)
{
    proxy *p = *state;
    redisContext *old = connect_ok(proxy_port(p), 3000);
    redisContext *probe = connect_ok(proxy_port(p), 3000);
    ping_ok(old);
    ping_ok(probe);
    proxy_set_mode(p, PROXY_BLACKHOLE);

    /* The probe gives up after 300 ms (set only now: its PING above may take longer). */
    struct timeval short_tv = {.tv_sec = 0, .tv_usec = 300 * 1000};
    assert_int_equal(redisSetTimeout(probe, short_tv), REDIS_OK);
    uint64_t t0 = now_ms();
    assert_null(redisCommand(probe, "PING"));
    assert_int_equal(probe->err, REDIS_ERR_IO); /* a timeout (EAGAIN), not EOF */
    assert_true(now_ms() - t0 >= 250);
    redisFree(probe);

    send_only(old, "SET proxy:held old");
    redisContext *during = connect_ok(proxy_port(p), 3000); /* accepted, and held too */
    send_only(during, "SET proxy:held-new during");
    wait_connections(p, 3, 5000); /* old, during, and the probe the proxy has not seen close */
    uv_sleep(200);
    assert_false(wait_value("proxy:held", "old", 0));
    assert_false(wait_value("proxy:held-new", "during", 0));

    proxy_set_mode(p, PROXY_PASS);
    assert_true(wait_value("proxy:held", "old", 5000));
    assert_true(wait_value("proxy:held-new", "during", 5000));
    expect_reply_status(old, "OK"); /* the replies come back on the same connections */
    expect_reply_status(during, "OK");
    ping_ok(old);
    redisContext *fresh = connect_ok(proxy_port(p), 2000);
    ping_ok(fresh);
    redisFree(fresh);
    redisFree(during);
    redisFree(old);
    server_del("proxy:held");
    server_del("proxy:held-new");
    wait_connections(p, 0, 5000);
}

/* Data still queued for its delay when the blackhole starts is held, not lost: it arrives once
 * the blackhole ends, and the replies keep their order behind it. */
static bool blackhole_holds_delayed_data_try(proxy *p, unsigned delay_ms)
{
    proxy_set_delay_ms(p, delay_ms);
    redisContext *c = connect_ok(proxy_port(p), 5000);
    send_only(c, "SET proxy:delayed first");
    uint64_t sent = now_ms();
    uv_sleep(30); /* let the proxy read it under the delay */
    proxy_set_mode(p, PROXY_BLACKHOLE);
    /* Late: the first SET may have gone through before the blackhole. */
    if (now_ms() >= sent + delay_ms) {
        due_try_late(p, c, "proxy:delayed");
        return false;
    }
    send_only(c, "SET proxy:delayed second");
    sleep_until(sent + delay_ms + 200); /* the first SET is overdue now, and held */
    assert_false(wait_value("proxy:delayed", "first", 0));
    proxy_set_delay_ms(p, 0);
    proxy_set_mode(p, PROXY_PASS);
    /* Both overdue: delivered at once and in order, so the second SET wins. */
    assert_true(wait_value("proxy:delayed", "second", 5000));
    expect_reply_status(c, "OK");
    expect_reply_status(c, "OK");
    redisFree(c);
    server_del("proxy:delayed");
    return true;
}

/* The blackhole starts before the first SET is due. */
static void blackhole_holds_delayed_data(void **state)
{
    run_before_due(*state, blackhole_holds_delayed_data_try);
}

static void refuse_then_pass(void **state)
{
    proxy *p = *state;
    redisContext *old = connect_ok(proxy_port(p), 2000);
    ping_ok(old);
    proxy_set_mode(p, PROXY_REFUSE);

    redisContext *refused = try_connect(proxy_port(p), 1000);
    assert_int_equal(refused->err, REDIS_ERR_IO);
    assert_non_null(strstr(refused->errstr, "refused"));
    redisFree(refused);
    /* Existing connections keep forwarding. */
    ping_ok(old);
    proxy_set_mode(p, PROXY_REFUSE); /* again: nothing changes */

    proxy_set_mode(p, PROXY_PASS);
    redisContext *fresh = connect_ok(proxy_port(p), 2000);
    ping_ok(fresh);
    redisFree(fresh);
    redisFree(old);
}

/* ---- closing --------------------------------------------------------------------------------- */

static void close_all_gives_eof(void **state)
{
    proxy *p = *state;
    redisContext *a = connect_ok(proxy_port(p), 2000);
    redisContext *b = connect_ok(proxy_port(p), 2000);
    ping_ok(a);
    ping_ok(b);
    proxy_close_all(p);
    assert_int_equal(proxy_connections(p), 0);
    assert_null(redisCommand(a, "PING"));
    assert_int_equal(a->err, REDIS_ERR_EOF);
    assert_null(redisCommand(b, "PING"));
    assert_int_equal(b->err, REDIS_ERR_EOF);
    redisFree(a);
    redisFree(b);

    redisContext *fresh = connect_ok(proxy_port(p), 2000); /* the listener is untouched */
    ping_ok(fresh);
    redisFree(fresh);
}

static bool reset_all_gives_reset_try(proxy *p, unsigned delay_ms)
{
    redisContext *c = connect_ok(proxy_port(p), 5000);
    ping_ok(c);
    proxy_set_delay_ms(p, delay_ms);
    send_only(c, "SET proxy:reset queued");
    uint64_t sent = now_ms();
    uv_sleep(20);
    proxy_reset_all(p);
    bool in_time = now_ms() < sent + delay_ms;
    assert_int_equal(proxy_connections(p), 0);
    assert_null(redisCommand(c, "PING"));
    assert_int_equal(c->err, REDIS_ERR_IO);
    assert_non_null(strstr(c->errstr, "reset"));
    redisFree(c);
    if (!in_time) { /* the SET may have been delivered before the reset */
        server_del("proxy:reset");
        return false;
    }
    sleep_until(sent + delay_ms + 200); /* it would have been delivered by now */
    assert_null(server_get("proxy:reset"));
    return true;
}

/* With data queued, not yet due: an RST does not wait for it. */
static void reset_all_gives_reset(void **state)
{
    run_before_due(*state, reset_all_gives_reset_try);
}

static void connections_are_counted(void **state)
{
    proxy *p = *state;
    assert_int_equal(proxy_connections(p), 0);
    redisContext *c[3];
    for (int i = 0; i < 3; i++) {
        c[i] = connect_ok(proxy_port(p), 2000);
        ping_ok(c[i]); /* the proxy has accepted and connected upstream */
    }
    assert_int_equal(proxy_connections(p), 3);
    redisFree(c[1]);
    wait_connections(p, 2, 2000);
    redisFree(c[0]);
    redisFree(c[2]);
    wait_connections(p, 0, 2000);
}

static bool fin_flushes_delayed_data_try(proxy *p, unsigned delay_ms)
{
    proxy_set_delay_ms(p, delay_ms);
    redisContext *c = connect_ok(proxy_port(p), 5000);
    send_only(c, "SET proxy:fin flushed");
    uint64_t sent = now_ms();
    redisFree(c);
    uv_sleep(50);
    char *early = server_get("proxy:fin");
    if (now_ms() >= sent + delay_ms) { /* the look came after the SET was due */
        free(early);
        wait_connections(p, 0, delay_ms + 5000);
        server_del("proxy:fin");
        return false;
    }
    assert_null(early); /* still delayed */
    wait_connections(p, 0, delay_ms + 5000);
    char *value = server_get("proxy:fin");
    assert_non_null(value);
    assert_string_equal(value, "flushed");
    free(value);
    server_del("proxy:fin");
    return true;
}

/* A client's FIN waits for its delayed data: what it sent still reaches the server. */
static void fin_flushes_delayed_data(void **state)
{
    run_before_due(*state, fin_flushes_delayed_data_try);
}

static bool rst_drops_delayed_data_try(proxy *p, unsigned delay_ms)
{
    proxy_set_delay_ms(p, delay_ms);
    redisContext *c = connect_ok(proxy_port(p), 5000);
    send_only(c, "SET proxy:rst dropped");
    uint64_t sent = now_ms();
    uv_sleep(20);
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    assert_int_equal(setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
    redisFree(c);
    wait_connections(p, 0, delay_ms + 5000); /* a proxy that flushes first closes after the delay */
    /* Late: closed after the data was due, so it may have gone. */
    if (now_ms() >= sent + delay_ms) {
        server_del("proxy:rst");
        return false;
    }
    sleep_until(sent + delay_ms + 200); /* it would have been delivered by now */
    assert_null(server_get("proxy:rst"));
    return true;
}

/* A client's RST goes through at once and drops its delayed data. */
static void rst_drops_delayed_data(void **state)
{
    run_before_due(*state, rst_drops_delayed_data_try);
}

/* With the server stopped, a client writing as fast as it can is held back: the proxy stops
 * reading once its buffer is full, instead of buffering without bound. */
static void backpressure_bounds_buffering(void **state)
{
    proxy *p = *state;
    assert_int_equal(fixture_pause(&cluster, 0), 0);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(proxy_port(p))};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);

    const size_t limit = (size_t)64 << 20;
    static char junk[1 << 16];
    memset(junk, 'x', sizeof(junk));
    size_t sent = 0;
    uint64_t blocked_since = 0;
    while (sent < limit) {
        ssize_t n = send(fd, junk, sizeof(junk), 0);
        if (n > 0) {
            sent += (size_t)n;
            blocked_since = 0;
            continue;
        }
        assert_true(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
        if (blocked_since == 0)
            blocked_since = now_ms();
        else if (now_ms() - blocked_since >= SLACK_MS)
            break; /* the proxy stopped reading (not merely paused by a loaded machine) */
        uv_sleep(2);
    }
    /* Socket buffers on both hops plus the proxy's 4 MiB, far below the limit. */
    assert_true(sent < limit);
    assert_true(sent > ((size_t)4 << 20));

    close(fd);
    assert_int_equal(fixture_resume(&cluster, 0), 0);
    wait_connections(p, 0, 5000);
    redisContext *c = connect_ok(proxy_port(p), 2000);
    ping_ok(c);
    redisFree(c);
}

/* Stopping with connections open (delayed data queued, a blackholed one, one mid-pipeline)
 * closes them all and leaves nothing behind (ASan / valgrind check the rest). */
static void stop_with_connections_open(void **state)
{
    proxy *p = *state;
    proxy_set_delay_ms(p, 100);
    redisContext *c[3];
    for (int i = 0; i < 3; i++) {
        c[i] = connect_ok(proxy_port(p), 2000);
        ping_ok(c[i]);
    }
    send_only(c[0], "SET proxy:stop queued");
    proxy_set_mode(p, PROXY_BLACKHOLE);
    send_only(c[1], "PING");
    proxy_set_mode(p, PROXY_PASS);
    proxy_set_delay_ms(p, 0);
    send_only(c[2], "PING");
    uv_sleep(50); /* let the proxy read it all: unread bytes would turn its FIN into an RST */
    proxy_stop(p);
    *state = NULL;
    for (int i = 0; i < 3; i++) {
        void *reply = NULL;
        redisGetReply(c[i], &reply); /* c[2] may get its PONG first */
        if (reply != NULL) {
            expect_status(reply, "PONG");
            assert_int_equal(redisGetReply(c[i], &reply), REDIS_ERR);
        }
        expect_closed(c[i]);
        redisFree(c[i]);
    }
}

static void only_loopback_is_accepted(void **state)
{
    const char *refused[] = {"10.0.0.1",       "8.8.8.8",     "0.0.0.0", "::",       "192.168.1.1",
                             "::ffff:8.8.8.8", "example.com", "",        "128.0.0.1"};
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
        assert_null(proxy_start(0, refused[i], 6379));
    assert_null(proxy_start(0, NULL, 6379));
    assert_null(proxy_start(0, "127.0.0.1", 0));
    assert_null(proxy_start(0, "127.0.0.1", 65536));
    assert_null(proxy_start(-1, "127.0.0.1", 6379));
    assert_null(proxy_start(70000, "127.0.0.1", 6379));

    const char *accepted[] = {"127.0.0.1", "127.0.0.2", "127.255.255.254", "::1", "localhost"};
    for (size_t i = 0; i < sizeof(accepted) / sizeof(accepted[0]); i++) {
        proxy *p = proxy_start(0, accepted[i], 6379);
        assert_non_null(p);
        assert_true(proxy_port(p) > 0);
        proxy_stop(p);
    }
}

static void fixed_port_and_port_in_use(void **state)
{
    proxy *p = *state;
    assert_null(proxy_start(proxy_port(p), "127.0.0.1", redis_port())); /* taken */
    int port = fixture_free_port();
    assert_true(port > 0);
    proxy *fixed = proxy_start(port, "127.0.0.1", redis_port());
    assert_non_null(fixed);
    assert_int_equal(proxy_port(fixed), port);
    redisContext *c = connect_ok(port, 2000);
    ping_ok(c);
    redisFree(c);
    proxy_stop(fixed);
}

/* An upstream that is down: the client's connection is accepted, then closed (reset if the
 * PING reached the proxy first: it never reads before the upstream is connected). */
static void upstream_down_closes_client(void **state)
{
    int port = fixture_free_port();
    assert_true(port > 0);
    proxy *p = proxy_start(0, "127.0.0.1", port);
    assert_non_null(p);
    redisContext *c = connect_ok(proxy_port(p), 2000);
    assert_null(redisCommand(c, "PING"));
    expect_closed(c);
    redisFree(c);
    wait_connections(p, 0, 2000);
    proxy_stop(p);
}

/* ---- the redlock-proxy program --------------------------------------------------------------- */

typedef struct child {
    pid_t pid;
    FILE *in;  /* its stdin */
    FILE *out; /* its stdout */
} child;

static void spawn(child *ch, const char *delay_ms, int upstream_a, int upstream_b)
{
    int to_child[2], from_child[2];
    assert_int_equal(pipe(to_child), 0);
    assert_int_equal(pipe(from_child), 0);
    char a[16], b[16];
    snprintf(a, sizeof(a), "%d", upstream_a);
    snprintf(b, sizeof(b), "%d", upstream_b);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(to_child[0], STDIN_FILENO);
        dup2(from_child[1], STDOUT_FILENO);
        close(to_child[0]);
        close(to_child[1]);
        close(from_child[0]);
        close(from_child[1]);
        signal(SIGPIPE, SIG_DFL);
        execl(program_path, program_path, "--delay-ms", delay_ms, a, b, (char *)NULL);
        _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    ch->pid = pid;
    ch->in = fdopen(to_child[1], "w");
    ch->out = fdopen(from_child[0], "r");
    assert_non_null(ch->in);
    assert_non_null(ch->out);
}

static void read_line(child *ch, char *line, size_t size)
{
    assert_non_null(fgets(line, (int)size, ch->out));
    line[strcspn(line, "\n")] = '\0';
}

static void say(child *ch, const char *command, const char *expect_prefix)
{
    fprintf(ch->in, "%s\n", command);
    fflush(ch->in);
    char line[256];
    read_line(ch, line, sizeof(line));
    assert_int_equal(strncmp(line, expect_prefix, strlen(expect_prefix)), 0);
}

static int wait_exit(child *ch)
{
    int status = 0;
    assert_int_equal(waitpid(ch->pid, &status, 0), ch->pid);
    if (ch->in != NULL)
        fclose(ch->in);
    fclose(ch->out);
    return status;
}

static void program_controls_all_proxies(void **state)
{
    if (program_path == NULL) {
        printf("# SKIP no proxy program given (argv[1])\n"); /* test/run counts it as skipped */
        return;
    }
    child ch;
    spawn(&ch, "500", redis_port(), redis_port()); /* as in delay_change_takes_effect */
    int ports[2];
    char line[256];
    for (int i = 0; i < 2; i++) {
        read_line(&ch, line, sizeof(line));
        int upstream = 0;
        assert_int_equal(sscanf(line, "%d %d", &ports[i], &upstream), 2);
        assert_int_equal(upstream, redis_port());
    }
    read_line(&ch, line, sizeof(line));
    assert_string_equal(line, "ready");

    redisContext *c = connect_ok(ports[1], 5000);
    assert_in_range(ping_ms(c), 1000, 1000 + SLACK_MS);
    say(&ch, "delay 0", "ok");
    assert_in_range(ping_ms(c), 0, 499);
    say(&ch, "refuse", "ok");
    redisContext *refused = try_connect(ports[0], 1000);
    assert_non_null(strstr(refused->errstr, "refused"));
    redisFree(refused);
    say(&ch, "pass", "ok");
    say(&ch, "bogus", "error");
    say(&ch, "delay x", "error");
    say(&ch, "blackhole", "ok");
    say(&ch, "pass", "ok");
    say(&ch, "reset", "ok");
    assert_null(redisCommand(c, "PING"));
    assert_int_equal(c->err, REDIS_ERR_IO);
    redisFree(c);
    redisContext *fresh = connect_ok(ports[0], 2000);
    ping_ok(fresh);
    say(&ch, "close", "ok");
    assert_null(redisCommand(fresh, "PING"));
    assert_int_equal(fresh->err, REDIS_ERR_EOF);
    redisFree(fresh);

    fprintf(ch.in, "quit\n");
    fflush(ch.in);
    int status = wait_exit(&ch);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void program_exits_on_eof_and_signals(void **state)
{
    if (program_path == NULL) {
        printf("# SKIP no proxy program given (argv[1])\n"); /* test/run counts it as skipped */
        return;
    }
    int signals[] = {0, SIGTERM, SIGINT}; /* 0: end of stdin */
    for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++) {
        child ch;
        spawn(&ch, "0", redis_port(), redis_port());
        char line[256];
        read_line(&ch, line, sizeof(line));
        int port = 0;
        assert_int_equal(sscanf(line, "%d", &port), 1);
        do
            read_line(&ch, line, sizeof(line));
        while (strcmp(line, "ready") != 0);
        redisContext *c = connect_ok(port, 2000); /* open while it exits */
        ping_ok(c);
        if (signals[i] == 0) {
            fclose(ch.in);
            ch.in = NULL;
        } else {
            kill(ch.pid, signals[i]);
        }
        int status = wait_exit(&ch);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        assert_null(redisCommand(c, "PING"));
        assert_int_equal(c->err, REDIS_ERR_EOF);
        redisFree(c);
    }
}

static void program_rejects_bad_arguments(void **state)
{
    if (program_path == NULL) {
        printf("# SKIP no proxy program given (argv[1])\n"); /* test/run counts it as skipped */
        return;
    }
    const char *bad[][3] = {{"--delay-ms", "x", "6379"},
                            {"0", NULL, NULL},
                            {"70000", NULL, NULL},
                            {"--delay-ms", "5", NULL},
                            {"abc", NULL, NULL}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            int devnull = open("/dev/null", O_RDWR);
            dup2(devnull, STDOUT_FILENO);
            dup2(devnull, STDERR_FILENO);
            execl(program_path, program_path, bad[i][0], bad[i][1], bad[i][2], (char *)NULL);
            _exit(127);
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 2);
    }
}

int main(int argc, char **argv)
{
    program_path = argc > 1 ? argv[1] : NULL;
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, proxy_setup, proxy_teardown)
        T(pass_through),
        T(big_value_through_delay_queue),
        T(delay_is_one_way_each_direction),
        T(delay_change_takes_effect),
        T(delay_drop_keeps_byte_order),
        T(blackhole_holds_then_delivers),
        T(blackhole_holds_delayed_data),
        T(refuse_then_pass),
        T(close_all_gives_eof),
        T(reset_all_gives_reset),
        T(connections_are_counted),
        T(fin_flushes_delayed_data),
        T(rst_drops_delayed_data),
        T(backpressure_bounds_buffering),
        T(stop_with_connections_open),
        T(only_loopback_is_accepted),
        T(fixed_port_and_port_in_use),
        T(upstream_down_closes_client),
        T(program_controls_all_proxies),
        T(program_exits_on_eof_and_signals),
        T(program_rejects_bad_arguments),
#undef T
    };
    return cmocka_run_group_tests_name("fault proxy", tests, group_setup, group_teardown);
}
