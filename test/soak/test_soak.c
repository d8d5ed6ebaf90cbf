/* SPDX-License-Identifier: MIT */
/* test_soak.c - a long run: 64 locks in flight over five real servers, one server restarted
 * every few seconds, and the process's resident memory and open descriptors must stay flat.
 *
 * 64 slots each cycle acquire -> hold -> extend -> hold -> release on a resource of their own,
 * on one client. Every SOAK_RESTART_MS one server, in turn, is killed, left away for 0.1-1 s
 * (the client's reconnects are refused meanwhile) and started again empty, but only once every
 * slot has completed a cycle since the last restart, so each window between restarts is one in
 * which work was provably done, whatever the machine's speed. At most one of five servers is
 * ever away, so the library promises that every operation succeeds (a quorum of three is always
 * there, node timeouts are seconds), and that every callback comes.
 *
 * After a warm-up, the resident set size, its anonymous part and the descriptor count are
 * sampled every second. Before each reading the allocator hands back what it keeps free for
 * reuse (malloc_trim), so the figure is the memory in use, not a high-water mark of the heap.
 *
 * The samples are cut in thirds. Memory: the median of the last third against the median of the
 * first third; the anonymous resident memory (heap, stacks: what a leak grows) may grow by at
 * most 5% of the RSS. The rest of the RSS is pages of the program and its libraries, which grows
 * once, by a page or sixteen, when a path of code runs for the first time (late in a run, say),
 * and is no leak. Medians, because single samples catch transients: the read buffer of a
 * connection being remade, the operations in flight at that moment, a restart's burst of failed
 * requests (over 100 KiB at times, 5% of the 3 MiB the process has); a leak moves every sample,
 * so it moves the median. Thirds rather than two samples, so the verdict never hangs on one
 * moment. Under AddressSanitizer the growth of the live heap, as its allocator counts it, is
 * checked instead, against 5% of what the RSS would be without ASan (the program's pages and the
 * live heap): the RSS there also holds ASan's shadow memory and its quarantine of freed blocks,
 * which fills up over minutes by design. (Against 5% of the live heap alone it would be flaky:
 * the operations in flight, a third of it, move its median by up to 8% with the machine's load.)
 * Descriptors move the other way: a node being reconnected has no socket for a moment, so the
 * steady state is the largest count, and the largest of the last third must not exceed the largest
 * of the first (whole descriptors: 5% of the 16 or so the process has is less than one).
 *
 * Quiet readings, with nothing in flight and every node connected, are taken right after the
 * warm-up (the traffic is drained for it, then resumed) and at the end: what the client keeps
 * between operations. Their live heap (the allocator's count) may grow by no more than 5% of the
 * RSS (under ASan, of the program's pages and the live heap), and their descriptor counts must be
 * equal, and equal to the steady state above: one socket per node.
 *
 * SOAK_SECONDS (default 60, at least 30) sets the length; SOAK_RESTART_MS (default 3000) the
 * spacing of restarts; SOAK_VERBOSE prints every sample. The figures are printed on stderr. */
#include "harness.h"
#include "procstat.h"

#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 5
#define SLOTS 64
#define TTL_MS 10000
#define NODE_TIMEOUT_MS 5000
/* A window with a slot that made no progress for this long fails the test: a cycle is three
 * operations, each of which must call back within a node timeout of the write. */
#define STALL_MS (6 * NODE_TIMEOUT_MS)
#define HOLD_MAX_MS 20
/* How long a killed server stays away before it is started again. */
#define DOWN_MIN_MS 100
#define DOWN_MAX_MS 1000
#define FLAT_PERCENT 5

typedef enum { OP_ACQUIRE, OP_EXTEND, OP_RELEASE, OP_KINDS } op_kind;
static const char *const op_names[OP_KINDS] = {"acquire", "extend", "release"};

typedef enum { SLOT_IDLE, SLOT_BUSY, SLOT_HOLDING } slot_state;

typedef struct soak soak;

typedef struct slot {
    soak *sk;
    unsigned index;
    char resource[32];
    size_t resource_len;
    redlock_lock *lock;
    uv_timer_t timer; /* holds and pauses between operations */
    slot_state state;
    op_kind next; /* what the timer starts */
    op_kind in_flight;
    uint64_t started_us; /* of the operation in flight */
    uint64_t cycles;     /* releases called back */
    uint64_t cycles_at_window;
} slot;

typedef struct sample {
    double t_s;
    long rss_kib;
    long anon_kib;
    int fds;
    long long heap_bytes;
} sample;

struct soak {
    h_env *env;
    redlock_client *client;
    bool stopping;
    uint64_t rng;
    uint64_t issued[OP_KINDS], completed[OP_KINDS], ok[OP_KINDS];
    /* Extends and releases that could not show the hold continuous (ENOQUORUM, ELOST): a lock a
     * restart reached among its few kept nodes before they were heard after its late votes. */
    uint64_t unproven[OP_KINDS];
    uint64_t failed; /* operations whose status was not 0 */
    h_record first_failure;
    op_kind first_failure_kind;
    uint64_t window_acquires; /* acquires won in the current window */
    slot slots[SLOTS];
};

/* The test's state, on the heap so that the teardown finds the servers after a failed check. */
typedef struct soak_state {
    h_env env;
    soak sk;
    sample *samples;
    bool done;
} soak_state;

static uint64_t next_rand(soak *sk)
{
    sk->rng ^= sk->rng << 13;
    sk->rng ^= sk->rng >> 7;
    sk->rng ^= sk->rng << 17;
    return sk->rng;
}

static void slot_start_op(slot *s);

static void on_slot_timer(uv_timer_t *t)
{
    slot_start_op(t->data);
}

/* The next operation after a pause of 0..max_ms (a hold, or the gap between cycles). */
static void slot_after(slot *s, op_kind next, unsigned max_ms)
{
    s->next = next;
    s->state = SLOT_HOLDING;
    uv_timer_start(&s->timer, on_slot_timer, next_rand(s->sk) % (max_ms + 1), 0);
}

static void record_outcome(slot *s, int status, const redlock_result *result)
{
    soak *sk = s->sk;
    sk->completed[s->in_flight]++;
    if (status == 0) {
        sk->ok[s->in_flight]++;
        return;
    }
    if (s->in_flight != OP_ACQUIRE && (status == REDLOCK_ENOQUORUM || status == REDLOCK_ELOST)) {
        sk->unproven[s->in_flight]++;
        return;
    }
    if (sk->failed++ == 0) {
        h_record_cb(NULL, status, result, &sk->first_failure);
        sk->first_failure_kind = s->in_flight;
    }
}

static void on_op(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    slot *s = data;
    soak *sk = s->sk;
    record_outcome(s, status, result);
    s->state = SLOT_IDLE;
    switch (s->in_flight) {
    case OP_ACQUIRE:
        if (status != 0) {
            slot_after(s, OP_ACQUIRE, HOLD_MAX_MS);
            return;
        }
        s->lock = lock;
        sk->window_acquires++;
        slot_after(s, sk->stopping ? OP_RELEASE : OP_EXTEND, HOLD_MAX_MS);
        return;
    case OP_EXTEND:
        slot_after(s, OP_RELEASE, HOLD_MAX_MS);
        return;
    case OP_RELEASE:
        redlock_lock_free(s->lock);
        s->lock = NULL;
        s->cycles++;
        if (!sk->stopping)
            slot_after(s, OP_ACQUIRE, HOLD_MAX_MS / 2);
        return;
    case OP_KINDS:
        break;
    }
}

static void slot_start_op(slot *s)
{
    soak *sk = s->sk;
    op_kind op = s->next;
    if (sk->stopping && op == OP_ACQUIRE) {
        s->state = SLOT_IDLE;
        return;
    }
    if (sk->stopping && op == OP_EXTEND)
        op = OP_RELEASE;
    int rc;
    switch (op) {
    case OP_ACQUIRE:
        rc = redlock_acquire(sk->client, s->resource, s->resource_len, TTL_MS, NULL, on_op, s);
        break;
    case OP_EXTEND:
        rc = redlock_extend(s->lock, TTL_MS, 0, on_op, s);
        break;
    default:
        rc = redlock_release(s->lock, on_op, s);
        break;
    }
    if (rc != 0)
        fail_msg("slot %u: %s refused at once: %s (%s)", s->index, op_names[op],
                 redlock_err_name(rc), redlock_client_last_error(sk->client));
    s->in_flight = op;
    s->state = SLOT_BUSY;
    s->started_us = redlock_now_us();
    sk->issued[op]++;
}

static unsigned env_unsigned(const char *name, unsigned fallback, unsigned min)
{
    const char *v = getenv(name);
    if (v == NULL || v[0] == '\0')
        return fallback;
    unsigned long x = strtoul(v, NULL, 10);
    return x < min ? min : (unsigned)x;
}

static int setup(void **state)
{
    soak_state *st = calloc(1, sizeof(*st));
    assert_non_null(st);
    *state = st;
    h_env_start(&st->env, N, NULL);
    return 0;
}

static int teardown(void **state)
{
    soak_state *st = *state;
    if (st == NULL)
        return 0;
    if (st->done) {
        h_env_stop(&st->env);
        free(st->samples);
        free(st);
    } else {
        fixture_stop(&st->env.cluster); /* the loop and client are left: see test_fds.c */
    }
    return 0;
}

static bool every_slot_progressed(const soak *sk)
{
    for (unsigned i = 0; i < SLOTS; i++) {
        if (sk->slots[i].cycles == sk->slots[i].cycles_at_window)
            return false;
    }
    return true;
}

static void dump_stuck(const soak *sk)
{
    uint64_t now = redlock_now_us();
    for (unsigned i = 0; i < SLOTS; i++) {
        const slot *s = &sk->slots[i];
        if (s->cycles != s->cycles_at_window)
            continue;
        fprintf(stderr, "  slot %u: %s, %s started %" PRIu64 " ms ago, %" PRIu64 " cycles\n", i,
                s->state == SLOT_BUSY      ? "in flight"
                : s->state == SLOT_HOLDING ? "holding"
                                           : "idle",
                op_names[s->in_flight], (now - s->started_us) / 1000, s->cycles);
    }
}

static void take_sample(sample *out, double t_s)
{
    malloc_trim(0);
    out->t_s = t_s;
    out->rss_kib = ps_rss_kib();
    out->anon_kib = ps_rss_anon_kib();
    out->fds = ps_fd_count();
    out->heap_bytes = ps_heap_bytes();
}

/* Stop the traffic and run the loop until every slot is idle: held locks released, every
 * callback come (at most STALL_MS, else the test fails). */
static void drain(h_env *env, soak *sk)
{
    sk->stopping = true;
    uint64_t deadline = redlock_now_us() + (uint64_t)STALL_MS * 1000;
    for (;;) {
        bool idle = true;
        for (unsigned i = 0; i < SLOTS; i++)
            idle = idle && sk->slots[i].state == SLOT_IDLE;
        if (idle)
            return;
        if (redlock_now_us() > deadline) {
            dump_stuck(sk);
            fail_msg("operations still in flight %d ms after the stop", STALL_MS);
        }
        h_run_for(&env->loop, 20);
    }
}

/* A reading with nothing in flight and every node connected: what the client keeps between
 * operations. Taken after the warm-up and at the end, it is the steadiest view of a leak. */
static void quiet_reading(h_env *env, soak *sk, sample *out)
{
    drain(env, sk);
    h_wait_ready(env, sk->client);
    h_run_for(&env->loop, 100); /* the probe's late answers */
    take_sample(out, 0);
}

static void resume(soak *sk)
{
    sk->stopping = false;
    for (unsigned i = 0; i < SLOTS; i++)
        slot_after(&sk->slots[i], OP_ACQUIRE, HOLD_MAX_MS / 2);
}

/* The median and the largest value of the first and of the last third of n values. */
typedef struct thirds {
    long long first_median, last_median, first_max, last_max;
} thirds;

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

static void third_stats(const sample *s, size_t n, long long (*get)(const sample *),
                        long long *median, long long *max)
{
    long long *v = malloc(n * sizeof(*v));
    assert_non_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = get(&s[i]);
    qsort(v, n, sizeof(v[0]), cmp_ll);
    *median = v[n / 2];
    *max = v[n - 1];
    free(v);
}

static thirds stats_of_thirds(const sample *s, size_t n, long long (*get)(const sample *))
{
    thirds t;
    size_t third = n / 3;
    third_stats(s, third, get, &t.first_median, &t.first_max);
    third_stats(s + n - third, third, get, &t.last_median, &t.last_max);
    return t;
}

static long long get_rss(const sample *s)
{
    return s->rss_kib;
}

static long long get_anon(const sample *s)
{
    return s->anon_kib;
}

static long long get_file(const sample *s)
{
    return s->rss_kib - s->anon_kib;
}

static long long get_heap(const sample *s)
{
    return s->heap_bytes;
}

static long long get_fds(const sample *s)
{
    return s->fds;
}

static void soak_run(void **state)
{
    soak_state *st = *state;
    h_env *env = &st->env;
    soak *sk = &st->sk;
    const unsigned seconds = env_unsigned("SOAK_SECONDS", 60, 30);
    const unsigned restart_ms = env_unsigned("SOAK_RESTART_MS", 3000, 100);
    const bool verbose = getenv("SOAK_VERBOSE") != NULL;
    unsigned warmup_s = seconds / 4;
    warmup_s = warmup_s < 10 ? 10 : warmup_s > 120 ? 120 : warmup_s;
    st->samples = calloc(seconds + 16, sizeof(sample));
    assert_non_null(st->samples);
    /* Touch every page of the array now: filled in as the run goes, it would add its pages to
     * the RSS one by one (40 bytes a second, 140 KiB in an hour) and look like a leak. */
    for (unsigned i = 0; i < seconds + 16; i++)
        st->samples[i].t_s = -1;

    redlock_options o;
    redlock_options_init(&o);
    o.node_timeout_ms = NODE_TIMEOUT_MS;
    o.connect_timeout_ms = NODE_TIMEOUT_MS;
    o.retry_count = 0;
    o.reconnect_max_ms = 1000;
    sk->env = env;
    sk->client = h_client(env, &o);
    sk->rng = 0x9e3779b97f4a7c15ull;
    h_wait_ready(env, sk->client);
    for (unsigned i = 0; i < SLOTS; i++) {
        slot *s = &sk->slots[i];
        s->sk = sk;
        s->index = i;
        s->resource_len = (size_t)snprintf(s->resource, sizeof(s->resource), "soak:%u", i);
        assert_int_equal(uv_timer_init(&env->loop, &s->timer), 0);
        s->timer.data = s;
        s->next = OP_ACQUIRE;
        slot_start_op(s);
    }

    const uint64_t t0 = redlock_now_us();
    const uint64_t end_us = t0 + (uint64_t)seconds * 1000000;
    const uint64_t warm_us = t0 + (uint64_t)warmup_s * 1000000;
    uint64_t window_start = t0, next_sample = warm_us, next_report = t0 + 60000000;
    unsigned restarts = 0, next_node = 0;
    uint64_t min_window_acquires = UINT64_MAX;
    size_t n_samples = 0;
    sample quiet_start;
    bool quiet_taken = false;
    uint64_t cpu0 = ps_cpu_us();
    fprintf(stderr, "soak: %u s (warm-up %u s), %u slots over %u nodes, a restart every %u ms\n",
            seconds, warmup_s, SLOTS, N, restart_ms);
    for (;;) {
        h_run_for(&env->loop, 50);
        uint64_t now = redlock_now_us();
        if (now >= warm_us && !quiet_taken) {
            quiet_reading(env, sk, &quiet_start);
            quiet_taken = true;
            resume(sk);
            continue;
        }
        if (now >= next_sample && n_samples < seconds + 16) {
            sample *smp = &st->samples[n_samples++];
            take_sample(smp, (double)(now - t0) / 1e6);
            if (verbose)
                fprintf(stderr, "soak: sample %5.1f s rss %ld KiB anon %ld KiB heap %lld fds %d\n",
                        smp->t_s, smp->rss_kib, smp->anon_kib, smp->heap_bytes, smp->fds);
            next_sample += 1000000;
        }
        if (now >= next_report) {
            fprintf(stderr, "soak: %4.0f s: rss %ld KiB, %d fds, %u restarts, %" PRIu64 " locks\n",
                    (double)(now - t0) / 1e6, ps_rss_kib(), ps_fd_count(), restarts,
                    sk->ok[OP_ACQUIRE]);
            next_report += 60000000;
        }
        if (now >= end_us)
            break;
        if (!every_slot_progressed(sk)) {
            if (now - window_start > (uint64_t)STALL_MS * 1000) {
                fprintf(stderr, "soak: window %u: slots without a cycle for %d ms:\n", restarts,
                        STALL_MS);
                dump_stuck(sk);
                fail_msg("a slot made no progress");
            }
            continue;
        }
        if (now - window_start < (uint64_t)restart_ms * 1000)
            continue;
        /* Every slot took, extended and released its lock since the last restart. */
        if (sk->window_acquires < min_window_acquires)
            min_window_acquires = sk->window_acquires;
        /* Killed, away for a while (the client's reconnects are refused, its requests to the
         * node fail fast), then started again empty. */
        assert_int_equal(fixture_kill(&env->cluster, next_node), 0);
        h_run_for(&env->loop, DOWN_MIN_MS + next_rand(sk) % (DOWN_MAX_MS - DOWN_MIN_MS + 1));
        assert_int_equal(fixture_restart(&env->cluster, next_node), 0);
        next_node = (next_node + 1) % N;
        restarts++;
        sk->window_acquires = 0;
        for (unsigned i = 0; i < SLOTS; i++)
            sk->slots[i].cycles_at_window = sk->slots[i].cycles;
        window_start = redlock_now_us();
    }
    const double run_cpu_s = (double)(ps_cpu_us() - cpu0) / 1e6;

    /* Stop: held locks are released, nothing new starts; every callback must come. */
    drain(env, sk);
    for (int k = 0; k < OP_KINDS; k++) {
        fprintf(stderr,
                "soak: %-7s issued %" PRIu64 ", called back %" PRIu64 ", ok %" PRIu64
                ", unproven %" PRIu64 "\n",
                op_names[k], sk->issued[k], sk->completed[k], sk->ok[k], sk->unproven[k]);
    }
    fprintf(stderr, "soak: %u restarts, fewest locks taken in a window %" PRIu64 ", CPU %.1f s\n",
            restarts, min_window_acquires, run_cpu_s);
    if (sk->failed > 0) {
        fprintf(stderr, "soak: %" PRIu64 " operations failed; the first, a%s %s:\n", sk->failed,
                sk->first_failure_kind == OP_ACQUIRE ? "n" : "", op_names[sk->first_failure_kind]);
        h_dump_record("  ", &sk->first_failure);
    }
    uint64_t unproven = 0;
    for (int k = 0; k < OP_KINDS; k++) {
        assert_int_equal(sk->completed[k], sk->issued[k]); /* no callback missing */
        /* at most one node of five away: every call succeeds, but a restarted node may have been
         * one of a lock's few kept nodes (docs/safety.md): only the locks in flight then */
        assert_int_equal(sk->ok[k] + sk->unproven[k], sk->issued[k]);
        unproven += sk->unproven[k];
    }
    assert_true(unproven <= (uint64_t)SLOTS * restarts);
    assert_true(restarts >= 3);
    assert_true(min_window_acquires >= SLOTS);

    /* Flat after the warm-up. Plain build: the growth of the anonymous part of the RSS, median
     * to median, against 5% of the RSS. Under ASan: the live heap, median to median. */
    const sample *smp = st->samples;
    const sample *last = &smp[n_samples - 1];
    assert_true(n_samples >= 9);
    const bool asan = ps_asan();
    thirds rss = stats_of_thirds(smp, n_samples, get_rss);
    thirds anon = stats_of_thirds(smp, n_samples, get_anon);
    thirds heap = stats_of_thirds(smp, n_samples, get_heap);
    thirds fds = stats_of_thirds(smp, n_samples, get_fds);
    fprintf(stderr,
            "soak: after warm-up: RSS %ld KiB (anonymous %ld) at %.0f s, %ld KiB (%ld) at %.0f "
            "s; fds %d, %d\n",
            smp[0].rss_kib, smp[0].anon_kib, smp[0].t_s, last->rss_kib, last->anon_kib, last->t_s,
            smp[0].fds, last->fds);
    fprintf(stderr,
            "soak: %zu samples; medians of the first and last thirds: RSS %lld, %lld KiB "
            "(%+.2f%%), anonymous %lld, %lld KiB (%+lld KiB, %+.2f%% of the RSS); largest RSS "
            "%lld, %lld KiB\n",
            n_samples, rss.first_median, rss.last_median,
            100.0 * (double)(rss.last_median - rss.first_median) / (double)rss.first_median,
            anon.first_median, anon.last_median, anon.last_median - anon.first_median,
            100.0 * (double)(anon.last_median - anon.first_median) / (double)rss.first_median,
            rss.first_max, rss.last_max);
    fprintf(stderr, "soak: live heap medians %lld, %lld B (%+.2f%%)%s\n", heap.first_median,
            heap.last_median,
            100.0 * (double)(heap.last_median - heap.first_median) / (double)heap.first_median,
            asan ? "; under ASan this is checked instead of the anonymous RSS" : "");
    fprintf(stderr, "soak: fds largest in the first third %lld, in the last third %lld\n",
            fds.first_max, fds.last_max);
    /* Under ASan the RSS is what it would be without ASan (the program's pages and the live
     * heap) plus ASan's shadow memory and quarantine: the 5% is taken of the former. */
    thirds file = stats_of_thirds(smp, n_samples, get_file);
    const long long basis_kib =
        asan ? file.first_median + heap.first_median / 1024 : rss.first_median;
    const long long growth_kib =
        asan ? (heap.last_median - heap.first_median) / 1024 : anon.last_median - anon.first_median;
    if (asan)
        fprintf(stderr,
                "soak: ASan: live heap grew %+lld KiB, %+.2f%% of the %lld KiB the RSS would be "
                "without ASan (program pages %lld KiB + live heap)\n",
                growth_kib, 100.0 * (double)growth_kib / (double)basis_kib, basis_kib,
                file.first_median);
    const bool mem_flat = basis_kib > 0 && growth_kib * 100 <= basis_kib * FLAT_PERCENT;
    const bool fds_flat = fds.last_max <= fds.first_max;
    if (!mem_flat || !fds_flat)
        fprintf(stderr, "soak: not flat:%s%s\n", mem_flat ? "" : " memory grew",
                fds_flat ? "" : " descriptors grew");
    assert_true(mem_flat);
    assert_true(fds_flat);

    /* Quiet again, every node connected: what the client keeps between operations is what it
     * kept after the warm-up, and one socket per node, as at the peaks. */
    sample quiet_end;
    quiet_reading(env, sk, &quiet_end);
    const long long quiet_basis_kib =
        asan ? (quiet_start.rss_kib - quiet_start.anon_kib) + quiet_start.heap_bytes / 1024
             : quiet_start.rss_kib;
    fprintf(stderr,
            "soak: quiet (nothing in flight, every node connected) after the warm-up and at the "
            "end: live heap %lld, %lld B (%+lld B); anonymous %ld, %ld KiB; RSS %ld, %ld KiB; fds "
            "%d, %d\n",
            quiet_start.heap_bytes, quiet_end.heap_bytes,
            quiet_end.heap_bytes - quiet_start.heap_bytes, quiet_start.anon_kib, quiet_end.anon_kib,
            quiet_start.rss_kib, quiet_end.rss_kib, quiet_start.fds, quiet_end.fds);
    if (quiet_start.heap_bytes >= 0)
        assert_true((quiet_end.heap_bytes - quiet_start.heap_bytes) / 1024 * 100 <=
                    quiet_basis_kib * FLAT_PERCENT);
    assert_int_equal(quiet_end.fds, quiet_start.fds);
    assert_int_equal(quiet_end.fds, fds.first_max);

    for (unsigned i = 0; i < SLOTS; i++)
        uv_close((uv_handle_t *)&sk->slots[i].timer, NULL);
    st->done = true;
}

int main(void)
{
    h_test_main_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(soak_run, setup, teardown),
    };
    return cmocka_run_group_tests_name("soak", tests, NULL, NULL);
}
