/* SPDX-License-Identifier: MIT */
/* test_real_peers.c - real servers that refuse, where test_peers.c uses a fake: a server at its
 * maxclients and a real out-of-memory server (maxmemory with noeviction, filled by the test),
 * each the fifth of five nodes, next to four healthy masters; and a real replica (replicaof a
 * listed master, read-only or not), which the handshake refuses (at the end). The first two:
 *
 *   - its node votes error with the server's own text (asserted word for word);
 *   - the lock is still decided, by the four others;
 *   - release and inspect report that node for what it is;
 *   - when the cause goes away (a client slot frees, the memory is freed), the node votes yes
 *     again, on the same client.
 *
 * A won acquire is decided at the third yes and need not wait for the fifth node, so to see
 * that node's vote for certain, two of the masters are stopped (SIGSTOP) while the acquire is
 * written: the round cannot be decided until they continue, and they are continued only once
 * the fifth server has counted its error reply (INFO errorstats) and the loop has had time to
 * read it. No check depends on the machine's speed: node timeouts are seconds, and every wait
 * is for an outcome, bounded generously. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 5
#define ODD 4 /* the node under test */
#define NODE_TIMEOUT_MS 5000
#define WAIT_MS 20000

#define MAXCLIENTS_TEXT "ERR max number of clients reached"
#define OOM_TEXT "OOM command not allowed when used memory > 'maxmemory'."

typedef struct peers {
    h_env env;           /* the four masters */
    fixture_cluster odd; /* the fifth server */
    const char *urls[N]; /* masters 0..3, then the odd one */
    redlock_client *client;
    redisContext *slots[64]; /* maxclients: the connections that fill the server */
    unsigned n_slots;
    bool done;
} peers;

static int setup(void **state)
{
    peers *p = calloc(1, sizeof(*p));
    assert_non_null(p);
    *state = p;
    h_env_start(&p->env, N - 1, NULL);
    return 0;
}

static int teardown(void **state)
{
    peers *p = *state;
    if (p == NULL)
        return 0;
    for (unsigned i = 0; i < p->n_slots; i++)
        redisFree(p->slots[i]);
    fixture_stop(&p->odd);
    if (p->done) {
        h_env_stop(&p->env);
        free(p);
    } else {
        fixture_stop(&p->env.cluster); /* the loop and client are left: see test/soak/test_fds.c */
    }
    return 0;
}

/* Start the odd server with extra_conf and a client on the five nodes. */
static void start_odd(peers *p, const char *extra_conf)
{
    assert_int_equal(fixture_start(&p->odd, 1, extra_conf), 0);
    for (unsigned i = 0; i < N - 1; i++)
        p->urls[i] = p->env.cluster.urls[i];
    p->urls[ODD] = p->odd.urls[0];
}

static void new_client(peers *p)
{
    redlock_options o;
    redlock_options_init(&o);
    o.node_timeout_ms = NODE_TIMEOUT_MS;
    o.connect_timeout_ms = NODE_TIMEOUT_MS;
    o.retry_count = 0;
    o.reconnect_max_ms = 500;   /* a node that comes good is back within a second */
    o.release_waits_all = true; /* the release reports the odd node for what it is */
    char err[256] = "";
    int rc = h_client_urls(&p->env, p->urls, N, &o, &p->client, err, sizeof(err));
    if (rc != 0)
        fprintf(stderr, "redlock_client_new: %s\n", err);
    assert_int_equal(rc, 0);
}

/* Node i of rec voted error, and its text carries the server's answer word for word (after any
 * prefix the library puts before it, such as "node down: "; a script's error goes on with
 * " script: <sha1>, on @user_script:<line>."). */
static void assert_error_text(const char *what, const h_record *rec, unsigned i, const char *text)
{
    fprintf(stderr, "real peers: %s: node %u: %s: %s\n", what, i,
            redlock_vote_name(rec->node_vote[i]), rec->node_error[i]);
    bool ok = rec->node_vote[i] == REDLOCK_VOTE_ERROR && strstr(rec->node_error[i], text) != NULL;
    if (!ok) {
        fprintf(stderr, "%s: node %u should vote error with \"%s\"\n", what, i, text);
        h_dump_record(what, rec);
    }
    assert_true(ok);
}

/* errorstat_<prefix> count of the odd server (0 when absent), -1 if INFO cannot be read. */
static long long error_count(peers *p, const char *prefix)
{
    redisReply *r = fixture_command(&p->odd, 0, "INFO errorstats");
    long long v = -1;
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        char key[64];
        snprintf(key, sizeof(key), "errorstat_%s:count=", prefix);
        const char *at = strstr(r->str, key);
        v = at != NULL ? strtoll(at + strlen(key), NULL, 10) : 0;
    }
    if (r != NULL)
        freeReplyObject(r);
    return v;
}

/* Acquire resource with the odd node's vote certain in the result: masters 2 and 3 are stopped
 * while it is written, and continued once the odd server has counted one more error with this
 * prefix (then the loop runs a little more, so the reply already in the socket is read). The
 * acquire is then decided by the masters. */
static int acquire_hearing_odd(peers *p, const char *resource, const char *prefix, h_record *rec)
{
    long long before = error_count(p, prefix);
    assert_true(before >= 0);
    assert_int_equal(fixture_pause(&p->env.cluster, 2), 0);
    assert_int_equal(fixture_pause(&p->env.cluster, 3), 0);
    memset(rec, 0, sizeof(*rec));
    assert_int_equal(
        redlock_acquire(p->client, resource, strlen(resource), 10000, NULL, h_record_cb, rec), 0);
    uint64_t deadline = redlock_now_us() + WAIT_MS * 1000ull;
    while (error_count(p, prefix) <= before) {
        if (redlock_now_us() > deadline)
            fail_msg("the odd server never answered the acquire with %s", prefix);
        h_run_for(&p->env.loop, 10);
    }
    h_run_for(&p->env.loop, 200);
    assert_int_equal(rec->calls, 0); /* two masters stopped: no quorum yet */
    assert_int_equal(fixture_resume(&p->env.cluster, 2), 0);
    assert_int_equal(fixture_resume(&p->env.cluster, 3), 0);
    assert_true(h_run_until(&p->env.loop, &rec->calls, 1, WAIT_MS));
    return rec->status;
}

/* What an inspect saw on the odd node. */
typedef struct odd_view {
    int calls;
    int status;
    redlock_vote vote;
    char value[REDLOCK_TOKEN_MAX + 1];
    bool has_value;
    int64_t pttl_ms;
    char error[REDLOCK_ERROR_TEXT_MAX];
} odd_view;

static void on_inspect(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)lock;
    odd_view *v = data;
    const redlock_node_result *n = &result->nodes[ODD];
    v->calls++;
    v->status = status;
    v->vote = n->vote;
    v->has_value = n->value != NULL;
    snprintf(v->value, sizeof(v->value), "%.*s", (int)n->value_len, n->value ? n->value : "");
    v->pttl_ms = n->pttl_ms;
    snprintf(v->error, sizeof(v->error), "%s", n->error ? n->error : "");
}

static odd_view inspect_odd(peers *p, const char *resource)
{
    odd_view v;
    memset(&v, 0, sizeof(v));
    assert_int_equal(redlock_inspect(p->client, resource, strlen(resource), on_inspect, &v), 0);
    assert_true(h_run_until(&p->env.loop, &v.calls, 1, WAIT_MS));
    return v;
}

/* Every master holds the token (the fourth may have been counted after the decision). */
static void assert_masters_hold(peers *p, const char *resource, redlock_lock *lock)
{
    size_t token_len = 0;
    const char *token = redlock_lock_token(lock, &token_len);
    assert_true(
        h_wait_holding(&p->env, resource, strlen(resource), token, token_len, N - 1, WAIT_MS));
}

/* Rounds on the client until a release is confirmed by all five nodes (the odd one is good
 * again), at most WAIT_MS. */
static void assert_odd_recovers(peers *p)
{
    if (!h_wait_release_votes(&p->env, p->client, N, WAIT_MS))
        fail_msg("node %d did not vote yes again within %d ms", ODD, WAIT_MS);
}

/* ---- maxclients ----------------------------------------------------------------------------- */

/* A server at its maxclients accepts the connection, answers its first command with an error
 * and closes it. The client's node is down with that text (its requests fail fast), the four
 * masters decide, and once a slot frees, the reconnect succeeds and the node votes yes again. */
static void maxclients_reached(void **state)
{
    peers *p = *state;
    start_odd(p, "maxclients 12\n");
    /* Take every slot: connect until the server refuses. */
    for (;;) {
        assert_true(p->n_slots < sizeof(p->slots) / sizeof(p->slots[0]));
        redisContext *ctx = fixture_connect(&p->odd, 0);
        assert_non_null(ctx);
        assert_int_equal(ctx->err, 0);
        redisReply *r = redisCommand(ctx, "PING");
        bool refused = r == NULL || r->type == REDIS_REPLY_ERROR;
        if (r != NULL && r->type == REDIS_REPLY_ERROR)
            assert_string_equal(r->str, MAXCLIENTS_TEXT);
        if (r != NULL)
            freeReplyObject(r);
        if (refused) {
            redisFree(ctx);
            break;
        }
        p->slots[p->n_slots++] = ctx;
    }
    assert_true(p->n_slots >= 1);
    new_client(p);

    /* Its connection refused, the node is down: its vote comes at once, with the reason. */
    h_record rec, rel;
    uint64_t deadline = redlock_now_us() + WAIT_MS * 1000ull;
    for (;;) {
        assert_int_equal(h_acquire(&p->env, p->client, "real:maxclients", 10000, NULL, &rec), 0);
        if (rec.node_vote[ODD] == REDLOCK_VOTE_ERROR || redlock_now_us() > deadline)
            break;
        /* The first round may be written before the server's refusal was read. */
        assert_int_equal(h_release(&p->env, rec.lock, &rel), 0);
        redlock_lock_free(rec.lock);
        h_run_for(&p->env.loop, 50);
    }
    assert_error_text("acquire", &rec, ODD, MAXCLIENTS_TEXT);
    assert_true(rec.votes_yes >= 3);
    assert_masters_hold(p, "real:maxclients", rec.lock);

    odd_view v = inspect_odd(p, "real:maxclients");
    assert_int_equal(v.status, 0);
    assert_int_equal(v.vote, REDLOCK_VOTE_ERROR);
    assert_non_null(strstr(v.error, MAXCLIENTS_TEXT));

    assert_int_equal(h_release(&p->env, rec.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, N - 1);
    assert_error_text("release", &rel, ODD, MAXCLIENTS_TEXT);
    redlock_lock_free(rec.lock);

    /* A slot frees: the next reconnect gets it. */
    redisFree(p->slots[--p->n_slots]);
    assert_odd_recovers(p);
    p->done = true;
}

/* ---- a replica ------------------------------------------------------------------------------ */

static bool replica_link_up(peers *p)
{
    redisReply *r = fixture_command(&p->odd, 0, "INFO replication");
    bool up = r != NULL && r->type == REDIS_REPLY_STRING &&
              strstr(r->str, "master_link_status:up") != NULL;
    if (r != NULL)
        freeReplyObject(r);
    return up;
}

/* The odd server is a replica of master 0 (a node listed by mistake, or left a replica by a
 * failover). It is no node of its own: a writable one (replica-read-only no) would take our SET
 * and vote yes beside its master, two votes from one failure domain. Nodes [master 0, replica,
 * master 1] with master 1 stopped: the acquire must not win with master 0 and its replica; the
 * handshake refuses the replica, and its error names its master. */
static void replica_is_refused(peers *p, bool read_only)
{
    char conf[128];
    int master_port = p->env.cluster.servers[0].port;
    snprintf(conf, sizeof(conf), "replicaof 127.0.0.1 %d\nreplica-read-only %s\n", master_port,
             read_only ? "yes" : "no");
    assert_int_equal(fixture_start(&p->odd, 1, conf), 0);
    uint64_t deadline = redlock_now_us() + WAIT_MS * 1000ull;
    while (!replica_link_up(p)) {
        if (redlock_now_us() > deadline)
            fail_msg("the replica's link to master 0 never came up");
        h_run_for(&p->env.loop, 20);
    }
    char b_url[160];
    snprintf(b_url, sizeof(b_url), "redis://127.0.0.1:%d?timeout_ms=500",
             p->env.cluster.servers[1].port);
    const char *urls[3] = {p->env.cluster.urls[0], p->odd.urls[0], b_url};
    redlock_options o;
    redlock_options_init(&o);
    o.node_timeout_ms = NODE_TIMEOUT_MS;
    o.connect_timeout_ms = NODE_TIMEOUT_MS;
    o.retry_count = 0;
    char err[256] = "";
    assert_int_equal(h_client_urls(&p->env, urls, 3, &o, &p->client, err, sizeof(err)), 0);
    h_wait_connected(&p->env, p->client); /* every connection made; then master 1 stops */
    assert_int_equal(fixture_pause(&p->env.cluster, 1), 0);
    h_record rec = {0};
    assert_int_equal(redlock_acquire(p->client, "real:replica", 12, 10000, NULL, h_record_cb, &rec),
                     0);
    assert_true(h_run_until(&p->env.loop, &rec.calls, 1, WAIT_MS));
    char want[64];
    snprintf(want, sizeof(want), "a replica of 127.0.0.1:%d", master_port);
    fprintf(stderr, "real peers: replica (read-only %s): %s: %s\n", read_only ? "yes" : "no",
            redlock_vote_name(rec.node_vote[1]), rec.node_error[1]);
    if (rec.status == 0 || rec.node_vote[1] != REDLOCK_VOTE_ERROR ||
        strstr(rec.node_error[1], want) == NULL)
        h_dump_record("the acquire", &rec);
    assert_int_not_equal(rec.status, 0);
    assert_int_equal(rec.votes_yes, 1);
    assert_int_equal(rec.node_vote[1], REDLOCK_VOTE_ERROR);
    assert_non_null(strstr(rec.node_error[1], want));
    /* Nothing of ours is left there (a lost acquire releases everywhere): the key master 0 took
     * may reach the replica by replication, and its release follows the same way. */
    uint64_t gone_by = redlock_now_us() + WAIT_MS * 1000ull;
    for (;;) {
        redisReply *r = fixture_command(&p->odd, 0, "EXISTS real:replica");
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_INTEGER);
        long long exists = r->integer;
        freeReplyObject(r);
        if (exists == 0)
            break;
        assert_true(redlock_now_us() < gone_by);
        h_run_for(&p->env.loop, 20);
    }
    assert_int_equal(fixture_resume(&p->env.cluster, 1), 0);
    p->done = true;
}

static void writable_replica_is_refused(void **state)
{
    replica_is_refused(*state, false);
}

static void read_only_replica_is_refused(void **state)
{
    replica_is_refused(*state, true);
}

/* ---- out of memory -------------------------------------------------------------------------- */

/* Fill the odd server with 64 KiB values until a write is refused; returns the keys written. */
static unsigned fill_until_oom(peers *p)
{
    static char value[64 * 1024];
    memset(value, 'x', sizeof(value));
    for (unsigned k = 0; k < 1000; k++) {
        char key[32];
        snprintf(key, sizeof(key), "fill:%u", k);
        redisReply *r = fixture_command(&p->odd, 0, "SET %s %b", key, value, sizeof(value));
        assert_non_null(r);
        bool refused = r->type == REDIS_REPLY_ERROR;
        if (refused)
            assert_string_equal(r->str, OOM_TEXT);
        freeReplyObject(r);
        if (refused)
            return k;
    }
    fail_msg("the server took 1000 values of 64 KiB under maxmemory");
    return 0;
}

/* The odd node at maxmemory with noeviction: SET answers OOM, so it votes error with that text
 * and the masters decide; its release finds no key (DEL is allowed under OOM) and inspect reads
 * none; once the memory is freed it votes yes again. */
static void out_of_memory(void **state)
{
    peers *p = *state;
    start_odd(p, "maxmemory 4mb\nmaxmemory-policy noeviction\n");
    new_client(p);
    assert_true(h_wait_release_votes(&p->env, p->client, N, WAIT_MS)); /* all connected */
    unsigned filled = fill_until_oom(p);
    /* Right after the refused write the server is over its limit by less than that write, and
     * its background work (shrinking idle clients' buffers) can bring it back under: lower the
     * limit by 1 MiB, so it stays out of memory until the test frees some. */
    redisReply *r = fixture_command(&p->odd, 0, "CONFIG SET maxmemory 3mb");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    fprintf(stderr, "real peers: OOM after %u values of 64 KiB\n", filled);

    h_record rec, rel;
    assert_int_equal(acquire_hearing_odd(p, "real:oom", "OOM", &rec), 0);
    assert_error_text("acquire", &rec, ODD, OOM_TEXT);
    assert_true(rec.votes_yes >= 3);
    assert_masters_hold(p, "real:oom", rec.lock);

    odd_view v = inspect_odd(p, "real:oom"); /* answered: no key there */
    assert_int_equal(v.status, 0);
    assert_int_equal(v.vote, REDLOCK_VOTE_NO);
    assert_false(v.has_value);
    assert_int_equal(v.pttl_ms, -2);

    assert_int_equal(h_release(&p->env, rec.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, N - 1);
    assert_int_equal(rel.node_vote[ODD], REDLOCK_VOTE_NO);
    redlock_lock_free(rec.lock);

    r = fixture_command(&p->odd, 0, "FLUSHALL");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    assert_odd_recovers(p);
    p->done = true;
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(maxclients_reached, setup, teardown),
        cmocka_unit_test_setup_teardown(writable_replica_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(read_only_replica_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(out_of_memory, setup, teardown),
    };
    return cmocka_run_group_tests_name("fault-real-peers", tests, NULL, NULL);
}
