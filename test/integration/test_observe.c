/* SPDX-License-Identifier: MIT */
/* test_observe.c - what the client tells about itself, against real redis-server processes: the
 * log callback (connects, lost connections, failed attempts with their backoff, refused
 * handshakes, two URLs of one server, silent nodes dropped, slow rounds, lost locks; passwords
 * redacted), the per-node state query, the client's counters, and auto-extension's callback per
 * extension round. Servers are stopped, killed and paused on purpose; only a paused node ever
 * gets a short timeout. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SECRET "0bs3rve-Pw"

/* ---- the log, recorded ---------------------------------------------------------------------- */

#define MAX_LINES 512

typedef struct log_line {
    redlock_log_level level;
    char url[160]; /* "" for the client's own lines */
    char message[400];
} log_line;

typedef struct log_book {
    unsigned n;
    log_line lines[MAX_LINES];
    redlock_client *client; /* the client the callback was given, first time */
    unsigned calls_with_other_client;
} log_book;

static log_book book;

static void on_log(redlock_client *client, redlock_log_level level, const char *url,
                   const char *message, void *data)
{
    log_book *b = data;
    if (b->client == NULL)
        b->client = client;
    else if (b->client != client)
        b->calls_with_other_client++;
    /* The read-only queries are allowed from here. */
    redlock_stats st;
    redlock_stats_init(&st);
    assert_int_equal(redlock_client_stats(client, &st), 0);
    if (url != NULL) {
        for (unsigned i = 0; i < redlock_client_node_count(client); i++) {
            if (strcmp(url, redlock_client_node_url(client, i)) == 0) {
                redlock_node_info info;
                redlock_node_info_init(&info);
                assert_int_equal(redlock_client_node_info(client, i, &info), 0);
            }
        }
    }
    assert_null(strchr(message, '\n'));
    if (b->n == MAX_LINES)
        return;
    log_line *l = &b->lines[b->n++];
    l->level = level;
    snprintf(l->url, sizeof(l->url), "%s", url != NULL ? url : "");
    snprintf(l->message, sizeof(l->message), "%s", message);
}

static void book_reset(void)
{
    memset(&book, 0, sizeof(book));
}

/* The index of the first line from `from` on, about url ("" for the client), at level (0: any),
 * whose message contains text; -1 if none. */
static int find_line(unsigned from, const char *url, redlock_log_level level, const char *text)
{
    for (unsigned i = from; i < book.n; i++) {
        const log_line *l = &book.lines[i];
        if ((url == NULL || strcmp(l->url, url) == 0) && (level == 0 || l->level == level) &&
            strstr(l->message, text) != NULL)
            return (int)i;
    }
    return -1;
}

/* Run the loop until such a line shows (at most H_WAIT_MS); its index. */
static int wait_line(h_env *env, unsigned from, const char *url, redlock_log_level level,
                     const char *text)
{
    uint64_t give_up = redlock_now_us() + H_WAIT_MS * 1000;
    int at;
    while ((at = find_line(from, url, level, text)) < 0 && redlock_now_us() < give_up)
        h_run_for(&env->loop, 10);
    if (at < 0) {
        for (unsigned i = 0; i < book.n; i++)
            fprintf(stderr, "  log %u: %s %s %s\n", i, redlock_log_level_name(book.lines[i].level),
                    book.lines[i].url, book.lines[i].message);
        fail_msg("no %s line \"%s\" about %s", level != 0 ? redlock_log_level_name(level) : "",
                 text, url != NULL ? url : "(any)");
    }
    return at;
}

static void expect_no_secret_logged(void)
{
    for (unsigned i = 0; i < book.n; i++) {
        assert_null(strstr(book.lines[i].url, SECRET));
        assert_null(strstr(book.lines[i].message, SECRET));
    }
}

static redlock_client *logged_client(h_env *env, const char *const *urls, unsigned n,
                                     redlock_options *o)
{
    o->log_fn = on_log;
    o->log_data = &book;
    redlock_client *c = NULL;
    char err[256];
    int rc = h_client_urls(env, urls, n, o, &c, err, sizeof(err));
    if (rc != 0)
        fail_msg("client: %s", err);
    return c;
}

static redlock_node_info node_info(redlock_client *c, unsigned i)
{
    redlock_node_info info;
    redlock_node_info_init(&info);
    assert_int_equal(redlock_client_node_info(c, i, &info), 0);
    return info;
}

/* Run the loop until node i is in state (at most H_WAIT_MS). */
static void wait_state(h_env *env, redlock_client *c, unsigned i, redlock_node_state state)
{
    uint64_t give_up = redlock_now_us() + H_WAIT_MS * 1000;
    while (node_info(c, i).state != state && redlock_now_us() < give_up)
        h_run_for(&env->loop, 10);
    redlock_node_info info = node_info(c, i);
    if (info.state != state)
        fail_msg("node %u is %s, expected %s (last error: %s)", i,
                 redlock_node_state_name(info.state), redlock_node_state_name(state),
                 info.last_error);
}

static redlock_stats stats_of(redlock_client *c)
{
    redlock_stats st;
    redlock_stats_init(&st);
    assert_int_equal(redlock_client_stats(c, &st), 0);
    return st;
}

/* ---- connections ---------------------------------------------------------------------------- */

/* A node's life in the log and in its state: connected, lost, failed attempts (the first warns,
 * the next ones are debug, each with its backoff), connected again; no password anywhere. */
static void log_and_state_follow_a_node(void **state)
{
    (void)state;
    book_reset();
    h_env env;
    h_env_start(&env, 3, "requirepass " SECRET "\n");
    char text[3][256];
    const char *urls[3];
    for (unsigned i = 0; i < 3; i++) {
        snprintf(text[i], sizeof(text[i]), "redis://:%s@127.0.0.1:%d", SECRET,
                 env.cluster.servers[i].port);
        urls[i] = text[i];
    }
    redlock_options o;
    h_test_options(&o);
    o.reconnect_min_ms = 20;
    o.reconnect_max_ms = 40; /* attempts come fast while node 2 is gone */
    redlock_client *c = logged_client(&env, urls, 3, &o);
    const char *url2 = redlock_client_node_url(c, 2);
    for (unsigned i = 0; i < 3; i++) {
        wait_state(&env, c, i, REDLOCK_NODE_UP);
        wait_line(&env, 0, redlock_client_node_url(c, i), REDLOCK_LOG_INFO, "connected");
        redlock_node_info info = node_info(c, i);
        assert_string_equal(info.url, redlock_client_node_url(c, i));
        assert_int_equal(info.connects, 1);
        assert_int_equal(info.connect_failures, 0);
        assert_string_equal(info.last_error, "");
    }
    assert_true(book.client == c);
    assert_int_equal(book.calls_with_other_client, 0);

    /* Requests are counted, and answered ones give a round-trip estimate. */
    h_record rec;
    assert_int_equal(h_acquire(&env, c, "obs:node", 10000, NULL, &rec), 0);
    redlock_lock *lock = rec.lock;
    assert_int_equal(h_release(&env, lock, &rec), 0);
    redlock_lock_free(lock);
    h_settle(&env, c);
    for (unsigned i = 0; i < 3; i++) {
        redlock_node_info info = node_info(c, i);
        /* The acquire and the release, and the client's probe after the acquire's late yes when
         * the release came more than its 5 ms later (a slow run: docs/safety.md). */
        assert_int_equal(info.requests - info.probes, 2);
        assert_true(info.probes <= 1);
        assert_int_equal(info.answers, info.requests);
        assert_int_equal(info.inflight, 0);
        assert_true(info.rtt_us > 0);
        assert_int_equal(info.consecutive_failures, 0);
    }

    unsigned mark = book.n;
    uint64_t before_kill = redlock_now_us();
    assert_int_equal(fixture_kill(&env.cluster, 2), 0);
    int lost = wait_line(&env, mark, url2, REDLOCK_LOG_WARN, "connection lost: ");
    int first = wait_line(&env, (unsigned)lost, url2, REDLOCK_LOG_WARN,
                          "connection attempt failed (1 in a row)");
    assert_non_null(strstr(book.lines[first].message, "next attempt in"));
    wait_line(&env, (unsigned)first, url2, REDLOCK_LOG_DEBUG,
              "connection attempt failed (2 in a row)");
    redlock_node_info down = node_info(c, 2);
    assert_int_equal(down.state, REDLOCK_NODE_DOWN);
    assert_int_equal(down.disconnects, 1);
    assert_true(down.connect_failures >= 2);
    assert_true(down.state_since_us >= before_kill);
    assert_true(strlen(down.last_error) > 0);
    /* A request to a node that is down fails at once, and counts. */
    assert_int_equal(h_acquire(&env, c, "obs:node", 10000, NULL, &rec), 0);
    lock = rec.lock;
    assert_int_equal(rec.node_vote[2], REDLOCK_VOTE_ERROR);
    assert_non_null(strstr(rec.node_error[2], "node down"));
    assert_int_equal(h_release(&env, lock, &rec), 0);
    redlock_lock_free(lock);
    down = node_info(c, 2);
    assert_true(down.errors >= 2);
    assert_true(down.consecutive_failures >= 2);
    /* The release's "node down", or a reconnect attempt's failure after it (a slow run). */
    assert_true(strstr(down.last_error, "node down") != NULL ||
                strstr(down.last_error, "connect") != NULL);

    mark = book.n;
    assert_int_equal(fixture_restart(&env.cluster, 2), 0);
    int back = wait_line(&env, mark, url2, REDLOCK_LOG_INFO, "connected after ");
    assert_non_null(strstr(book.lines[back].message, "failed attempt"));
    wait_state(&env, c, 2, REDLOCK_NODE_UP);
    redlock_node_info up = node_info(c, 2);
    assert_int_equal(up.connects, 2);
    assert_int_equal(up.connect_failures, 0);
    assert_true(strlen(up.last_error) > 0); /* the last failure is still told */
    expect_no_secret_logged();
    h_env_stop(&env);
}

/* A refused password is an error line (the node cannot be used as configured), without the
 * password. */
static void refused_handshake_is_an_error(void **state)
{
    (void)state;
    book_reset();
    h_env env;
    h_env_start(&env, 3, "requirepass " SECRET "\n");
    char text[256];
    snprintf(text, sizeof(text), "redis://:wrong-%s@127.0.0.1:%d", SECRET,
             env.cluster.servers[0].port);
    const char *urls[1] = {text};
    redlock_options o;
    h_test_options(&o);
    redlock_client *c = logged_client(&env, urls, 1, &o);
    wait_line(&env, 0, redlock_client_node_url(c, 0), REDLOCK_LOG_ERROR, "WRONGPASS");
    wait_state(&env, c, 0, REDLOCK_NODE_DOWN);
    assert_non_null(strstr(node_info(c, 0).last_error, "WRONGPASS"));
    expect_no_secret_logged();
    h_env_stop(&env);
}

/* An ACL user without +info and +script|load: the client goes on, and warns what it loses. */
static void handshake_refusals_warn(void **state)
{
    (void)state;
    book_reset();
    h_env env;
    h_env_start(&env, 1, "user narrow on >" SECRET " ~* +set +get +pexpire +del +eval +evalsha\n");
    char text[256];
    snprintf(text, sizeof(text), "redis://narrow:%s@127.0.0.1:%d", SECRET,
             env.cluster.servers[0].port);
    const char *urls[1] = {text};
    redlock_options o;
    h_test_options(&o);
    redlock_client *c = logged_client(&env, urls, 1, &o);
    const char *url = redlock_client_node_url(c, 0);
    wait_line(&env, 0, url, REDLOCK_LOG_INFO, "connected");
    wait_line(&env, 0, url, REDLOCK_LOG_WARN, "SCRIPT LOAD refused (NOPERM");
    wait_line(&env, 0, url, REDLOCK_LOG_WARN, "INFO refused (NOPERM");
    assert_int_equal(node_info(c, 0).state, REDLOCK_NODE_UP);
    expect_no_secret_logged();
    h_env_stop(&env);
}

static void duplicate_server_is_an_error(void **state)
{
    (void)state;
    book_reset();
    h_env env;
    h_env_start(&env, 2, NULL);
    char twin[128];
    snprintf(twin, sizeof(twin), "redis://localhost:%d", env.cluster.servers[0].port);
    const char *urls[3] = {env.cluster.urls[0], twin, env.cluster.urls[1]};
    redlock_options o;
    h_test_options(&o);
    redlock_client *c = logged_client(&env, urls, 3, &o);
    int at = wait_line(&env, 0, NULL, REDLOCK_LOG_ERROR, "same server as");
    /* Whichever of the two connected second stays down. */
    assert_true(strcmp(book.lines[at].url, urls[0]) == 0 || strcmp(book.lines[at].url, twin) == 0);
    h_env_stop(&env);
    (void)c;
}

/* A stopped node with a short timeout: its requests time out and stay owed; after three timeouts
 * of silence its connection is dropped, and the log says so. */
static void silent_node_dropped_is_logged(void **state)
{
    (void)state;
    book_reset();
    h_env env;
    h_env_start(&env, 3, NULL);
    char buf[H_MAX_NODES][160];
    const char *urls[H_MAX_NODES];
    h_urls_with_timeout(&env, 1u << 2, 300, buf, urls);
    redlock_options o;
    h_test_options(&o);
    redlock_client *c = logged_client(&env, urls, 3, &o);
    for (unsigned i = 0; i < 3; i++)
        wait_state(&env, c, i, REDLOCK_NODE_UP);
    assert_int_equal(fixture_pause(&env.cluster, 2), 0);
    const char *url2 = redlock_client_node_url(c, 2);
    uint64_t give_up = redlock_now_us() + H_WAIT_MS * 1000;
    unsigned k = 0;
    while (find_line(0, url2, REDLOCK_LOG_WARN, "no answer for") < 0 &&
           redlock_now_us() < give_up) {
        char name[32];
        snprintf(name, sizeof(name), "obs:silent-%u", k++);
        h_record rec;
        if (h_acquire(&env, c, name, 10000, NULL, &rec) == 0) {
            redlock_lock *lock = rec.lock;
            h_release(&env, lock, &rec);
            redlock_lock_free(lock);
        }
        redlock_node_info info = node_info(c, 2);
        if (info.state == REDLOCK_NODE_UP && info.timeouts > 0)
            assert_true(info.owed > 0 || info.inflight > 0);
    }
    int at = wait_line(&env, 0, url2, REDLOCK_LOG_WARN, "connection lost: connection dropped");
    assert_non_null(strstr(book.lines[at].message, "no answer for"));
    redlock_node_info info = node_info(c, 2);
    assert_true(info.timeouts >= 2);
    assert_int_equal(info.disconnects, 1);
    fixture_resume(&env.cluster, 2);
    h_env_stop(&env);
}

/* ---- counters ------------------------------------------------------------------------------- */

static void stats_count_every_outcome(void **state)
{
    (void)state;
    book_reset();
    h_env env;
    h_env_start(&env, 3, NULL);
    char buf[H_MAX_NODES][160];
    const char *urls[H_MAX_NODES];
    h_urls_with_timeout(&env, 1u << 2, 300, buf, urls);
    redlock_options o;
    h_test_options(&o);
    o.slow_round_ms = 100;
    redlock_client *c = logged_client(&env, urls, 3, &o);
    h_wait_ready(&env, c);
    redlock_stats base = stats_of(c);
    assert_int_equal(base.pending, 0);
    assert_int_equal(base.locks, 0);
    assert_int_equal(base.locks_held, 0);

    h_record rec, other;
    assert_int_equal(h_acquire(&env, c, "obs:stats", 10000, NULL, &rec), 0);
    redlock_lock *lock = rec.lock;
    h_drain(&env, c);
    assert_int_equal(h_acquire(&env, c, "obs:stats", 10000, NULL, &other), REDLOCK_EBUSY);
    assert_int_equal(h_extend(&env, lock, 10000, 0, &other), 0);
    redlock_stats st = stats_of(c);
    assert_int_equal(st.rounds_won - base.rounds_won, 1);
    assert_int_equal(st.rounds_busy - base.rounds_busy, 1);
    assert_int_equal(st.extensions_ok - base.extensions_ok, 1);
    assert_int_equal(st.locks, 1); /* the handle the caller holds (not the busy attempt's) */
    assert_int_equal(st.locks_held, 1);
    assert_int_equal(st.locks_auto, 0);

    /* Lapsed: a quorum no longer holds the token. */
    h_drain(&env, c);
    for (unsigned i = 0; i < 3; i++)
        h_del(&env, i, "obs:stats", 9);
    assert_int_equal(h_extend(&env, lock, 10000, 0, &other), REDLOCK_ELOST);
    assert_int_equal(h_release(&env, lock, &other), REDLOCK_ELOST);
    redlock_lock_free(lock);
    st = stats_of(c);
    assert_int_equal(st.extensions_failed - base.extensions_failed, 1);
    assert_int_equal(st.releases_lapsed - base.releases_lapsed, 1);
    assert_int_equal(st.locks, 0);
    assert_int_equal(st.locks_held, 0);

    /* A release waits for every node: with node 2 stopped it takes its 300 ms timeout, slower
     * than slow_round_ms; the acquire, decided by the other two, need not be. */
    assert_int_equal(fixture_pause(&env.cluster, 2), 0);
    unsigned mark = book.n;
    uint64_t slow_before = stats_of(c).slow_rounds;
    assert_int_equal(h_acquire(&env, c, "obs:slow", 10000, NULL, &rec), 0);
    lock = rec.lock;
    assert_int_equal(h_release(&env, lock, &other), 0);
    redlock_lock_free(lock);
    st = stats_of(c);
    assert_int_equal(st.releases_ok - base.releases_ok, 1);
    assert_true(st.slow_rounds - slow_before >= 1);
    int at = wait_line(&env, mark, "", REDLOCK_LOG_WARN, "slow release round");
    assert_non_null(strstr(book.lines[at].message, redlock_client_node_url(c, 2)));
    assert_non_null(strstr(book.lines[at].message, "timeout after"));
    fixture_resume(&env.cluster, 2);

    /* Broken: two of three nodes gone. */
    assert_int_equal(fixture_kill(&env.cluster, 0), 0);
    assert_int_equal(fixture_kill(&env.cluster, 1), 0);
    wait_state(&env, c, 0, REDLOCK_NODE_DOWN);
    wait_state(&env, c, 1, REDLOCK_NODE_DOWN);
    assert_int_equal(h_acquire(&env, c, "obs:broken", 10000, NULL, &rec), REDLOCK_ENOQUORUM);
    st = stats_of(c);
    assert_int_equal(st.rounds_broken - base.rounds_broken, 1);
    assert_int_equal(st.pending, 0);
    h_env_stop(&env);
}

static h_env *resume_env;

static void resume_node_1(uv_timer_t *t)
{
    fixture_resume(&resume_env->cluster, 1);
    uv_close((uv_handle_t *)t, NULL);
}

/* A quorum that says yes too late for min_validity_ms: an expired round. Node 1 is stopped and
 * resumed 200 ms into the round, node 2 stays stopped (its short timeout ends its vote), so the
 * quorum's second yes comes after at least 200 ms: 1000 - 200 - 12 ms of validity is below
 * min_validity_ms. */
static void stats_count_expired_rounds(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, NULL);
    char buf[H_MAX_NODES][160];
    const char *urls[H_MAX_NODES];
    h_urls_with_timeout(&env, 1u << 2, 300, buf, urls);
    redlock_options o;
    h_test_options(&o);
    o.min_validity_ms = 900;
    redlock_client *c = NULL;
    assert_int_equal(h_client_urls(&env, urls, 3, &o, &c, NULL, 0), 0);
    h_wait_ready(&env, c);
    redlock_stats base = stats_of(c);
    assert_int_equal(fixture_pause(&env.cluster, 1), 0);
    assert_int_equal(fixture_pause(&env.cluster, 2), 0);
    static uv_timer_t timer;
    resume_env = &env;
    uv_timer_init(&env.loop, &timer);
    uv_timer_start(&timer, resume_node_1, 200, 0);
    h_record rec;
    assert_int_equal(h_acquire(&env, c, "obs:expired", 1000, NULL, &rec), REDLOCK_EEXPIRED);
    fixture_resume(&env.cluster, 2);
    redlock_stats st = stats_of(c);
    assert_int_equal(st.rounds_expired - base.rounds_expired, 1);
    assert_int_equal(st.rounds_won - base.rounds_won, 0);
    h_env_stop(&env);
}

/* ---- auto-extension ------------------------------------------------------------------------- */

#define MAX_EVENTS 64

typedef struct auto_events {
    unsigned n;
    char kind[MAX_EVENTS];    /* 'x' an extension round, 'l' lost */
    int status[MAX_EVENTS];   /* its status or reason */
    unsigned yes[MAX_EVENTS]; /* extension rounds: the result's yes votes */
    bool release_on_first;    /* release the lock from the first extension callback */
    bool released;
    int release_status;
} auto_events;

static void on_release_from_cb(redlock_lock *lock, int status, const redlock_result *result,
                               void *data)
{
    (void)lock;
    (void)result;
    auto_events *ev = data;
    ev->release_status = status;
    ev->released = true;
}

static void on_extended_event(redlock_lock *lock, int status, const redlock_result *result,
                              void *data)
{
    auto_events *ev = data;
    assert_non_null(result);
    if (ev->n < MAX_EVENTS) {
        ev->kind[ev->n] = 'x';
        ev->status[ev->n] = status;
        ev->yes[ev->n] = result->votes_yes;
        ev->n++;
    }
    if (ev->release_on_first && ev->n == 1)
        assert_int_equal(redlock_release(lock, on_release_from_cb, ev), 0);
}

static void on_lost_event(redlock_lock *lock, int reason, void *data)
{
    (void)lock;
    auto_events *ev = data;
    if (ev->n < MAX_EVENTS) {
        ev->kind[ev->n] = 'l';
        ev->status[ev->n] = reason;
        ev->n++;
    }
}

static int acquire_auto(h_env *env, redlock_client *c, const char *name, auto_events *ev,
                        h_record *rec)
{
    redlock_auto_opts ao;
    redlock_auto_opts_init(&ao);
    ao.extended_cb = on_extended_event;
    ao.extended_data = ev;
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.auto_extend = &ao;
    lo.lost_cb = on_lost_event;
    lo.lost_data = ev;
    return h_acquire(env, c, name, 3000, &lo, rec);
}

/* Every extension round is told, with its result; a failing one before the lost callback it
 * leads to; nothing after that. */
static void extension_rounds_are_told(void **state)
{
    (void)state;
    book_reset();
    h_env env;
    h_env_start(&env, 3, NULL);
    redlock_options o;
    h_test_options(&o);
    redlock_client *c = logged_client(&env, env.cluster.urls, 3, &o);
    static auto_events ev;
    memset(&ev, 0, sizeof(ev));
    h_record rec;
    assert_int_equal(acquire_auto(&env, c, "obs:auto", &ev, &rec), 0);
    redlock_lock *lock = rec.lock;
    uint64_t give_up = redlock_now_us() + H_WAIT_MS * 1000;
    while (redlock_lock_extensions(lock) < 2 && ev.n < MAX_EVENTS && redlock_now_us() < give_up)
        h_run_for(&env.loop, 20);
    assert_true(redlock_lock_extensions(lock) >= 2);
    unsigned won = 0;
    for (unsigned i = 0; i < ev.n; i++) {
        assert_int_equal(ev.kind[i], 'x');
        won += ev.status[i] == 0;
        if (ev.status[i] == 0)
            assert_true(ev.yes[i] >= 2);
    }
    assert_int_equal(won, redlock_lock_extensions(lock));
    assert_int_equal(stats_of(c).extensions_ok, won);
    assert_int_equal(stats_of(c).locks_auto, 1);

    /* Two nodes gone: extensions fail, each is told, then the lock is lost. */
    unsigned before = ev.n;
    assert_int_equal(fixture_kill(&env.cluster, 0), 0);
    assert_int_equal(fixture_kill(&env.cluster, 1), 0);
    give_up = redlock_now_us() + H_WAIT_MS * 1000;
    while ((ev.n == before || ev.kind[ev.n - 1] != 'l') && redlock_now_us() < give_up)
        h_run_for(&env.loop, 20);
    assert_true(ev.n >= before + 2);
    assert_int_equal(ev.kind[ev.n - 1], 'l');
    assert_int_equal(ev.kind[ev.n - 2], 'x');
    assert_int_not_equal(ev.status[ev.n - 2], 0);
    unsigned lost_at = ev.n;
    h_run_for(&env.loop, 3500); /* past the ttl: no callback after the lost one */
    assert_int_equal(ev.n, lost_at);
    assert_int_equal(stats_of(c).locks_lost, 1);
    wait_line(&env, 0, "", REDLOCK_LOG_WARN, "an auto-extended lock was lost");
    redlock_lock_free(lock);
    h_env_stop(&env);
}

/* The callback may release the lock: the release runs, and nothing more is told. */
static void extension_callback_may_release(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, NULL);
    redlock_client *c = h_client(&env, NULL);
    static auto_events ev;
    memset(&ev, 0, sizeof(ev));
    ev.release_on_first = true;
    h_record rec;
    assert_int_equal(acquire_auto(&env, c, "obs:auto-rel", &ev, &rec), 0);
    redlock_lock *lock = rec.lock;
    uint64_t give_up = redlock_now_us() + H_WAIT_MS * 1000;
    while (!ev.released && redlock_now_us() < give_up)
        h_run_for(&env.loop, 20);
    assert_true(ev.released);
    assert_int_equal(ev.release_status, 0);
    h_run_for(&env.loop, 2500); /* more than an extension period: nothing more */
    assert_int_equal(ev.n, 1);
    assert_int_equal(h_count_holding(&env, "obs:auto-rel", 12, redlock_lock_token(lock, NULL),
                                     strlen(redlock_lock_token(lock, NULL))),
                     0);
    redlock_lock_free(lock);
    h_env_stop(&env);
}

/* ---- the caller's struct sizes, and the blocking client ------------------------------------ */

static void queries_respect_the_callers_size(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 1, NULL);
    redlock_client *c = h_client(&env, NULL);
    /* A caller built against a newer header: a larger struct, whose extra bytes stay its own. */
    unsigned char big[sizeof(redlock_node_info) + 32];
    memset(big, 0xa5, sizeof(big));
    redlock_node_info_init_sized((redlock_node_info *)(void *)big, sizeof(big));
    for (size_t k = sizeof(redlock_node_info); k < sizeof(big); k++)
        assert_int_equal(big[k], 0);
    memset(big + sizeof(redlock_node_info), 0x5a, 32);
    assert_int_equal(redlock_client_node_info(c, 0, (redlock_node_info *)(void *)big), 0);
    for (size_t k = sizeof(redlock_node_info); k < sizeof(big); k++)
        assert_int_equal(big[k], 0x5a);
    redlock_node_info info;
    memset(&info, 0, sizeof(info)); /* not set up: refused, untouched */
    assert_int_equal(redlock_client_node_info(c, 0, &info), REDLOCK_EINVAL);
    assert_null(info.url);
    redlock_node_info_init(&info);
    assert_int_equal(redlock_client_node_info(c, 1, &info), REDLOCK_EINVAL);
    assert_int_equal(redlock_client_node_info(NULL, 0, &info), REDLOCK_EINVAL);
    redlock_stats st;
    memset(&st, 0, sizeof(st));
    assert_int_equal(redlock_client_stats(c, &st), REDLOCK_EINVAL);
    assert_string_equal(redlock_node_state_name(REDLOCK_NODE_DOWN), "down");
    assert_string_equal(redlock_log_level_name(REDLOCK_LOG_WARN), "warn");
    h_env_stop(&env);
}

static void sync_client_tells_too(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, NULL);
    redlock_options o;
    h_test_options(&o);
    redlock_sync *sync = NULL;
    char err[256];
    assert_int_equal(redlock_sync_new(env.cluster.urls, 3, &o, &sync, err, sizeof(err)), 0);
    redlock_sync_lock *lock = NULL;
    assert_int_equal(redlock_sync_acquire(sync, "obs:sync", 8, 10000, NULL, &lock, NULL), 0);
    assert_int_equal(redlock_sync_release(lock, NULL), 0);
    redlock_sync_lock_free(lock);
    redlock_stats st;
    redlock_stats_init(&st);
    assert_int_equal(redlock_sync_stats(sync, &st), 0);
    assert_int_equal(st.rounds_won, 1);
    assert_int_equal(st.releases_ok, 1);
    unsigned answered = 0;
    for (unsigned i = 0; i < 3; i++) {
        redlock_node_info info;
        redlock_node_info_init(&info);
        assert_int_equal(redlock_sync_node_info(sync, i, &info), 0);
        assert_string_equal(info.url, env.cluster.urls[i]);
        answered += info.answers >= 1;
    }
    assert_true(answered >= 2); /* a quorum at least; the release waited for all of them */
    redlock_node_info info;
    redlock_node_info_init(&info);
    assert_int_equal(redlock_sync_node_info(sync, 3, &info), REDLOCK_EINVAL);
    redlock_sync_free(sync);
    h_env_stop(&env);
}

/* A caller who reads no per-node result still learns which nodes failed and why: after a failed
 * acquire, redlock_client_last_error names each of them with its reason (before: "" ). */
static void failure_text_names_the_nodes(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 1, NULL);
    char down[2][64];
    const char *urls[3] = {env.cluster.urls[0], down[0], down[1]};
    for (unsigned i = 0; i < 2; i++)
        snprintf(down[i], sizeof(down[i]), "redis://127.0.0.1:%d", fixture_free_port());
    redlock_options o;
    h_test_options(&o);
    redlock_client *c = NULL;
    char err[256];
    assert_int_equal(h_client_urls(&env, urls, 3, &o, &c, err, sizeof(err)), 0);
    h_record rec;
    assert_int_equal(h_acquire(&env, c, "observe:failure-text", 5000, NULL, &rec),
                     REDLOCK_ENOQUORUM);
    const char *text = redlock_client_last_error(c);
    fprintf(stderr, "# %s\n", text);
    assert_non_null(strstr(text, redlock_strerror(REDLOCK_ENOQUORUM)));
    for (unsigned i = 0; i < 2; i++) {
        assert_non_null(strstr(text, down[i]));
        assert_true(rec.node_vote[i + 1] == REDLOCK_VOTE_ERROR);
        assert_non_null(strstr(text, rec.node_error[i + 1]));
    }
    assert_null(strstr(text, env.cluster.urls[0])); /* it said yes */
    h_close_client(&env, c);

    /* The blocking API, called without a report: redlock_sync_last_error says the same. */
    redlock_sync *sync = NULL;
    assert_int_equal(redlock_sync_new(urls, 3, &o, &sync, err, sizeof(err)), 0);
    char sync_text[256];
    assert_int_equal(redlock_sync_last_error(sync, sync_text, sizeof(sync_text)), 0);
    redlock_sync_lock *lock = NULL;
    assert_int_equal(
        redlock_sync_acquire(sync, "observe:failure-text", REDLOCK_STRLEN, 5000, NULL, &lock, NULL),
        REDLOCK_ENOQUORUM);
    assert_true(redlock_sync_last_error(sync, sync_text, sizeof(sync_text)) > 0);
    fprintf(stderr, "# sync: %s\n", sync_text);
    for (unsigned i = 0; i < 2; i++)
        assert_non_null(strstr(sync_text, down[i]));
    redlock_sync_free(sync);
    h_env_stop(&env);
}

/* A lock key that holds application data (a value without a ttl, a hash) is busy forever: the
 * refused acquire says so on each node, with the fix, in its result and its text; a key that a
 * real holder holds says nothing of the kind. */
static void application_data_is_named(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, NULL);
    for (unsigned i = 0; i < 3; i++) {
        h_set(&env, i, "observe:app-string", 18, "42");
        redisReply *r = fixture_command(&env.cluster, i, "HSET observe:app-hash field value");
        assert_non_null(r);
        freeReplyObject(r);
    }
    redlock_client *c = h_client(&env, NULL);
    static const struct {
        const char *key, *why;
    } cases[] = {{"observe:app-string", "a value without a ttl"},
                 {"observe:app-hash", "a key of another type"}};
    for (unsigned k = 0; k < 2; k++) {
        h_record rec;
        assert_int_equal(h_acquire(&env, c, cases[k].key, 5000, NULL, &rec), REDLOCK_EBUSY);
        for (unsigned i = 0; i < 3; i++) {
            if (rec.node_vote[i] != REDLOCK_VOTE_NO)
                continue;
            if (strstr(rec.node_error[i], "holds application data") == NULL ||
                strstr(rec.node_error[i], cases[k].why) == NULL ||
                strstr(rec.node_error[i], "key_prefix") == NULL)
                fail_msg("%s on node %u: \"%s\"", cases[k].key, i, rec.node_error[i]);
        }
        assert_true(rec.votes_no >= 2);
        assert_non_null(strstr(redlock_client_last_error(c), "holds application data"));
        /* Nothing was written: the data is as it was. */
        assert_int_equal(h_pttl(&env, 0, cases[k].key, strlen(cases[k].key)), -1);
    }
    /* A lock held by another client: busy, and nothing said of application data. */
    redlock_client *other = h_own_client(&env, NULL);
    h_record held, busy;
    assert_int_equal(h_acquire(&env, other, "observe:held", 5000, NULL, &held), 0);
    assert_int_equal(h_acquire(&env, c, "observe:held", 5000, NULL, &busy), REDLOCK_EBUSY);
    for (unsigned i = 0; i < 3; i++)
        assert_null(strstr(busy.node_error[i], "application data"));
    h_release_ok(&env, held.lock, &held); /* frees the handle */
    h_close_client(&env, other);
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    static const struct CMUnitTest tests[] = {
        H_TEST(log_and_state_follow_a_node),    H_TEST(refused_handshake_is_an_error),
        H_TEST(handshake_refusals_warn),        H_TEST(duplicate_server_is_an_error),
        H_TEST(silent_node_dropped_is_logged),  H_TEST(stats_count_every_outcome),
        H_TEST(stats_count_expired_rounds),     H_TEST(extension_rounds_are_told),
        H_TEST(extension_callback_may_release), H_TEST(queries_respect_the_callers_size),
        H_TEST(sync_client_tells_too),          H_TEST(failure_text_names_the_nodes),
        H_TEST(application_data_is_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
