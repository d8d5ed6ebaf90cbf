/* SPDX-License-Identifier: MIT */
/* test_storm.c - a reconnect storm: 200 clients on one loop lose a node at once, keep trying
 * while it is away, and all come back when it returns; none of them spins.
 *
 * Three real servers; 200 clients (one process, one loop), each with the default reconnect
 * backoff (50 ms, doubled up to 5 s, each delay +/- 50%). Server 0 is killed, kept away for
 * DOWN_MS, and started again. Then:
 *
 *   - all recover: a round on each client (acquire, release) is repeated until its release is
 *     confirmed by server 0 again, within a generous bound of seconds;
 *   - none spins. A spinning client is one that retries without waiting: it would make connect
 *     attempts as fast as the loop turns, reconnect over and over once the node is back, or keep
 *     the loop turning with nothing to do. Each is counted, not timed, so the verdict does not
 *     depend on the machine's speed:
 *       * connect() calls to server 0's port while it is away (this program interposes connect
 *         and counts them): at most what the documented backoff allows, attempt k coming no
 *         sooner than 0.5 * 50 ms * (2^k - 1) after the loss; a busy retry makes thousands;
 *       * connections the restarted server received (INFO total_connections_received): one per
 *         client, plus the fixture's readiness probes; and in a quiet window after recovery, not
 *         one more (only this test's own INFO connection);
 *       * turns of the loop in that quiet window (a check handle counts them): a handful, where
 *         a timer polling every millisecond makes a thousand (one re-armed at 0 never lets the
 *         turn end, which the test's timeout catches).
 *   Process CPU time (getrusage) of each phase is printed; in the quiet window it must be a small
 *   fraction of the wall time (an idle loop uses none; a spinning one all it is given). */
#include "harness.h"
#include "procstat.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define N 3
#define CLIENTS 200
/* Seconds, as everywhere (healthy nodes on a loaded machine answer well within it); short
 * enough that the deadline timers of the last rounds have fired before the quiet window. */
#define NODE_TIMEOUT_MS 2000
#define DOWN_MS 3000
#define QUIET_MS 2000
/* Turns of an idle loop in QUIET_MS: h_run_for's guard timer, repeated every 1 ms once due. */
#define QUIET_TURNS_MAX 20
/* Every client back within this long after the restart: the backoff reached while away is
 * at most 5 s * 1.5, plus seconds of slack for a loaded machine. */
#define RECOVER_MS 30000

/* ---- connect() counting -------------------------------------------------------------------- */

/* Shared libraries (libuv, hiredis) call connect() through the dynamic linker, which finds this
 * definition in the executable first; it counts calls to the watched port and passes every call
 * on to the next definition (libc's). Only touched from the test's one thread. */
static int watched_port;
static bool counting;
static unsigned long connects_seen;

#ifdef __USE_GNU /* glibc declares the address as a transparent union under _GNU_SOURCE */
#define SOCKADDR_PTR(arg) ((arg).__sockaddr__)
#else
#define SOCKADDR_PTR(arg) (arg)
#endif

int connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
    static int (*next)(int, __CONST_SOCKADDR_ARG, socklen_t);
    if (next == NULL) {
        void *sym = dlsym(RTLD_NEXT, "connect");
        memcpy(&next, &sym, sizeof(sym));
    }
    const struct sockaddr *sa = SOCKADDR_PTR(addr);
    if (counting && sa != NULL && sa->sa_family == AF_INET &&
        ntohs(((const struct sockaddr_in *)(const void *)sa)->sin_port) == watched_port)
        connects_seen++;
    return next(fd, addr, len);
}

/* ---- rounds on every client ---------------------------------------------------------------- */

typedef struct storm storm;

typedef struct member {
    storm *st;
    unsigned index;
    char resource[32];
    size_t resource_len;
    redlock_client *client;
    bool busy;
    bool done;
    unsigned rounds;
} member;

struct storm {
    h_env env;
    member members[CLIENTS];
    uv_check_t turns_check;
    uint64_t turns;
    unsigned want_yes_mask; /* a round is done when these nodes confirmed the release */
    int closed;
    bool finished; /* the test body finished: the state may be freed */
};

static void on_turn(uv_check_t *h)
{
    storm *st = h->data;
    st->turns++;
}

static void on_released(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    member *m = data;
    bool all = status == 0;
    for (unsigned i = 0; i < N; i++) {
        if (m->st->want_yes_mask & (1u << i))
            all = all && result->nodes[i].vote == REDLOCK_VOTE_YES;
    }
    redlock_lock_free(lock);
    m->busy = false;
    m->done = all;
}

static void on_acquired(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)result;
    member *m = data;
    if (status != 0) {
        m->busy = false;
        return;
    }
    int rc = redlock_release(lock, on_released, m);
    if (rc != 0)
        fail_msg("client %u: release refused: %s", m->index, redlock_err_name(rc));
}

/* Run rounds on every client until each one's release was confirmed by every node in
 * want_yes_mask, at most timeout_ms. Returns how many clients are done. */
static unsigned round_all(storm *st, unsigned want_yes_mask, uint64_t timeout_ms)
{
    st->want_yes_mask = want_yes_mask;
    for (unsigned i = 0; i < CLIENTS; i++)
        st->members[i].done = false;
    uint64_t deadline = redlock_now_us() + timeout_ms * 1000;
    unsigned done = 0;
    for (;;) {
        done = 0;
        for (unsigned i = 0; i < CLIENTS; i++) {
            member *m = &st->members[i];
            done += m->done;
            if (m->done || m->busy)
                continue;
            m->busy = true;
            m->rounds++;
            int rc = redlock_acquire(m->client, m->resource, m->resource_len, 10000, NULL,
                                     on_acquired, m);
            if (rc != 0)
                fail_msg("client %u: acquire refused: %s", i, redlock_err_name(rc));
        }
        if (done == CLIENTS || redlock_now_us() >= deadline)
            break;
        h_run_for(&st->env.loop, 20);
    }
    /* Rounds still in flight finish before anything else is measured. */
    uint64_t drain = redlock_now_us() + 2 * NODE_TIMEOUT_MS * 1000;
    for (;;) {
        bool busy = false;
        for (unsigned i = 0; i < CLIENTS; i++)
            busy = busy || st->members[i].busy;
        if (!busy || redlock_now_us() >= drain)
            break;
        h_run_for(&st->env.loop, 20);
    }
    return done;
}

/* Fields of server i's INFO stats (one connection to it), -1 where one cannot be read. */
static void info_stats(h_env *env, unsigned i, long long *received, long long *rejected)
{
    const char *fields[2] = {"total_connections_received", "rejected_connections"};
    long long *out[2] = {received, rejected};
    bool was_counting = counting;
    counting = false;
    redisReply *r = fixture_command(&env->cluster, i, "INFO stats");
    counting = was_counting;
    for (int k = 0; k < 2; k++) {
        *out[k] = -1;
        char key[64];
        snprintf(key, sizeof(key), "\n%s:", fields[k]);
        const char *p = r != NULL && r->type == REDIS_REPLY_STRING ? strstr(r->str, key) : NULL;
        if (p != NULL)
            *out[k] = strtoll(p + strlen(key), NULL, 10);
    }
    if (r != NULL)
        freeReplyObject(r);
}

typedef struct phase {
    uint64_t wall_us, cpu_us, turns;
    unsigned long connects;
} phase;

static phase phase_begin(storm *st)
{
    return (phase){redlock_now_us(), ps_cpu_us(), st->turns, connects_seen};
}

static phase phase_end(storm *st, phase start)
{
    return (phase){redlock_now_us() - start.wall_us, ps_cpu_us() - start.cpu_us,
                   st->turns - start.turns, connects_seen - start.connects};
}

static void print_phase(const char *name, phase p)
{
    fprintf(stderr,
            "storm: %-22s %6.2f s wall, %6.3f s CPU (%4.1f%%), %8" PRIu64 " loop turns, %6lu "
            "connects to node 0\n",
            name, (double)p.wall_us / 1e6, (double)p.cpu_us / 1e6,
            100.0 * (double)p.cpu_us / (double)p.wall_us, p.turns, p.connects);
}

/* The most connect attempts one client may make in window_ms after losing a working connection,
 * with the documented backoff: delays min, 2 min, 4 min, ... (capped at max), each at least half
 * its nominal value, so attempt k comes at 0.5 * (min + 2 min + ... ) or later. One more is
 * allowed: libuv counts a timer from the loop's cached time, which may lag behind the moment
 * the delay was chosen by as long as the loop's turn took so far. */
static unsigned max_attempts(uint64_t window_ms, uint64_t min_ms, uint64_t max_ms)
{
    unsigned k = 1;
    uint64_t at = 0, nominal = min_ms;
    for (;;) {
        at += nominal / 2;
        if (at > window_ms)
            return k;
        k++;
        nominal = nominal * 2 > max_ms ? max_ms : nominal * 2;
    }
}

static void on_client_closed(redlock_client *client, void *data)
{
    (void)client;
    ((storm *)data)->closed++;
}

static int setup(void **state)
{
    storm *st = calloc(1, sizeof(*st));
    assert_non_null(st);
    *state = st;
    h_env_start(&st->env, N, NULL);
    return 0;
}

static int teardown(void **state)
{
    storm *st = *state;
    if (st == NULL)
        return 0;
    counting = false;
    if (st->finished) {
        h_env_stop(&st->env);
        free(st);
    } else {
        fixture_stop(&st->env.cluster); /* the loop and clients are left: see test_fds.c */
    }
    return 0;
}

static void reconnect_storm(void **state)
{
    storm *st = *state;
    h_env *env = &st->env;
    redlock_options o;
    redlock_options_init(&o);
    o.node_timeout_ms = NODE_TIMEOUT_MS;
    o.connect_timeout_ms = NODE_TIMEOUT_MS;
    o.retry_count = 0;
    o.release_waits_all = true; /* a round reads every node's release answer */
    for (unsigned i = 0; i < CLIENTS; i++) {
        member *m = &st->members[i];
        m->st = st;
        m->index = i;
        m->resource_len = (size_t)snprintf(m->resource, sizeof(m->resource), "storm:%u", i);
        char err[256] = "";
        int rc =
            redlock_client_new(&env->loop, env->cluster.urls, N, &o, &m->client, err, sizeof(err));
        if (rc != 0)
            fail_msg("client %u: %s: %s", i, redlock_err_name(rc), err);
    }
    assert_int_equal(uv_check_init(&env->loop, &st->turns_check), 0);
    st->turns_check.data = st;
    uv_check_start(&st->turns_check, on_turn);
    uv_unref((uv_handle_t *)&st->turns_check);
    watched_port = env->cluster.servers[0].port;

    unsigned ready = round_all(st, 0x7, RECOVER_MS);
    if (ready != CLIENTS)
        fail_msg("only %u of %d clients ready", ready, CLIENTS);
    phase before = phase_begin(st);
    h_run_for(&env->loop, QUIET_MS);
    print_phase("quiet, before", phase_end(st, before));

    /* Node 0 away: every client lost its connection at once and retries with its backoff. */
    assert_int_equal(fixture_kill(&env->cluster, 0), 0);
    counting = true;
    phase down = phase_begin(st);
    h_run_for(&env->loop, DOWN_MS);
    phase down_p = phase_end(st, down);
    counting = false;
    print_phase("node 0 away", down_p);

    assert_int_equal(fixture_restart(&env->cluster, 0), 0);
    counting = true;
    phase up = phase_begin(st);
    unsigned recovered = round_all(st, 0x1, RECOVER_MS);
    phase up_p = phase_end(st, up);
    counting = false;
    print_phase("back until recovered", up_p);
    long long received, rejected;
    info_stats(env, 0, &received, &rejected);

    /* A node leaves its deadline timer armed at the oldest deadline instead of re-arming it on
     * every reply, so each node's timer fires once, with nothing due, a node timeout after the
     * last round: let those pass, then nothing at all may wake the loop. */
    h_run_for(&env->loop, NODE_TIMEOUT_MS + 500);
    phase quiet = phase_begin(st);
    h_run_for(&env->loop, QUIET_MS);
    phase quiet_p = phase_end(st, quiet);
    print_phase("quiet, after", quiet_p);
    long long received_after_quiet, rejected_after_quiet;
    info_stats(env, 0, &received_after_quiet, &rejected_after_quiet);

    unsigned per_client =
        max_attempts(down_p.wall_us / 1000, o.reconnect_min_ms, o.reconnect_max_ms);
    unsigned long rounds = 0;
    for (unsigned i = 0; i < CLIENTS; i++)
        rounds += st->members[i].rounds;
    fprintf(stderr,
            "storm: %u of %d clients recovered in %.2f s (%lu rounds in all); the restarted "
            "server received %lld connections (%lld rejected), %lld more in the quiet window "
            "(the test's own INFO is one)\n",
            recovered, CLIENTS, (double)up_p.wall_us / 1e6, rounds, received, rejected,
            received_after_quiet - received);
    fprintf(stderr,
            "storm: connects while away %lu, at most %u per client by the backoff (%u in all); "
            "a linear bound clients x window / reconnect_min would be %llu\n",
            down_p.connects, per_client, per_client * CLIENTS,
            (unsigned long long)CLIENTS * (down_p.wall_us / 1000) / o.reconnect_min_ms);

    assert_int_equal(recovered, CLIENTS);
    /* Away: each client at most what its backoff allows, and every client did try. */
    assert_true(down_p.connects <= (unsigned long)per_client * CLIENTS);
    assert_true(down_p.connects >= CLIENTS);
    /* Back: one connection per client (a refused or reset attempt is not counted by the server),
     * and connects to the port at most one more per client than the backoff allows. */
    assert_true(received >= CLIENTS);
    assert_true(received <= CLIENTS + 10); /* + the fixture's probes and this test's INFO */
    assert_true(up_p.connects <= 2ul * CLIENTS);
    /* Quiet: no reconnects, the loop asleep (the few turns are h_run_for's own guard timer). */
    assert_int_equal(received_after_quiet - received, 1);
    assert_true(quiet_p.turns <= QUIET_TURNS_MAX);
    assert_true(quiet_p.cpu_us * 10 <= quiet_p.wall_us);

    uv_close((uv_handle_t *)&st->turns_check, NULL);
    for (unsigned i = 0; i < CLIENTS; i++)
        assert_int_equal(redlock_client_close(st->members[i].client, on_client_closed, st), 0);
    assert_true(h_run_until(&env->loop, &st->closed, CLIENTS, 30000));
    st->finished = true;
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(reconnect_storm, setup, teardown),
    };
    return cmocka_run_group_tests_name("soak-storm", tests, NULL, NULL);
}
