/* SPDX-License-Identifier: MIT */
/* test_sim_scripts.c - the simulator's C models of the scripts (sim_scripts.h) against the real
 * scripts on a real redis-server: the models cannot drift from the Lua.
 *
 * Each seed builds a small world (three lock keys, tokens, three waiters with a key or a set of
 * keys each, places, ttls) and runs a sequence of commands drawn from it, each encoded as the
 * library encodes it (redlock__cmd_encode, grant tags included), on the server (EVALSHA) and on
 * the model (sim_server_exec). Among them, the error and edge cases: fence counters that are not
 * decimal numbers (or are, but longer than any fence), places whose deadline has passed, a grant
 * record that is not one, sets, attempts without a stamp (tag ""), heads that listen on their
 * channel or not, a user whose ACL refuses PUBSUB NUMSUB or PUBLISH, and fenced commands that
 * name a fence domain's counter, one shared by every key, in place of the key's own (waiters'
 * attempts and the grants their records make included). After every command the test requires:
 *   - the same reply (a time-derived number - a waiter's wait, a PTTL - within TOL_MS; an error
 *     that a script raised may differ in its text, one it returned may not);
 *   - the same PUBLISHes in the same order (the server's MONITOR shows each one a script makes);
 *   - the same keys: types, values, members with their scores, fields with their values (a place
 *     deadline within TOL_MS) and PTTLs within TOL_MS.
 * The model's clock is the server's TIME read just before each command, and every deadline the
 * sequences set lies seconds from any comparison a script makes with it, so the few milliseconds
 * between the read and the script's own TIME never change a decision.
 *
 * Not vacuous: each broken model (SIM_BREAK_*: the simulation's controls) is told apart from the
 * scripts within the same seeds.
 *
 * SIM_DIFF_SEEDS=N sets the number of seeds; a failing one prints its replay:
 * SIM_DIFF_SEED=N build/test/sim/test-sim-scripts (with a trace of every command). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "command.h"
#include "scripts.h"
#include "sim_diff.h"

#define DEFAULT_SEEDS 300u
#define STEPS 40
#define N_KEYS 3
#define N_TOKENS 4
#define N_WAITERS 3

/* xorshift64*: the sequences' randomness. */
typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rnd(rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1Dull;
}

static unsigned pick(rng *r, unsigned n)
{
    return (unsigned)(rnd(r) % n);
}

static bool coin(rng *r, unsigned percent)
{
    return pick(r, 100) < percent;
}

typedef struct world {
    char key[N_KEYS][24];
    char fence_key[N_KEYS][32];
    char domain_key[32]; /* a fence domain's counter, shared by every key */
    char token[N_TOKENS][40];
    char waiter[N_WAITERS][20];
    char channel[N_WAITERS][64]; /* its first key's queue name, ":" and its id */
    uint64_t place[N_WAITERS];
    unsigned n_wkeys[N_WAITERS];
    unsigned wkeys[N_WAITERS][N_KEYS]; /* a waiter's keys, in the order its lock names them */
    unsigned wtoken[N_WAITERS];
} world;

/* ---- the sequences -------------------------------------------------------------------------- */

static void make_world(world *w, rng *r, uint64_t seed)
{
    memset(w, 0, sizeof(*w));
    for (unsigned i = 0; i < N_KEYS; i++) {
        snprintf(w->key[i], sizeof(w->key[i]), "d%" PRIu64 ":%c", seed % 97, 'a' + i);
        snprintf(w->fence_key[i], sizeof(w->fence_key[i]), "%s%s", w->key[i],
                 REDLOCK__FENCE_SUFFIX);
    }
    snprintf(w->domain_key, sizeof(w->domain_key), "d%" PRIu64 ":dom%s", seed % 97,
             REDLOCK__FENCE_SUFFIX);
    for (unsigned i = 0; i < N_TOKENS; i++)
        snprintf(w->token[i], sizeof(w->token[i]), "%016" PRIx64 "%04x", rnd(r), i);
    uint64_t base = 1700000000000000ull + rnd(r) % 1000000000000ull;
    for (unsigned i = 0; i < N_WAITERS; i++) {
        snprintf(w->waiter[i], sizeof(w->waiter[i]), "%016" PRIx64, rnd(r));
        /* Places apart, or now and then the same (ties go by id). */
        w->place[i] = coin(r, 15) && i > 0 ? w->place[i - 1] : base + rnd(r) % 5000000;
        w->n_wkeys[i] = coin(r, 40) ? 2 + pick(r, N_KEYS - 1) : 1;
        unsigned first = pick(r, N_KEYS);
        for (unsigned j = 0; j < w->n_wkeys[i]; j++)
            w->wkeys[i][j] = (first + j) % N_KEYS;
        snprintf(w->channel[i], sizeof(w->channel[i]), "%s%s:%s", w->key[w->wkeys[i][0]],
                 REDLOCK__QUEUE_SUFFIX, w->waiter[i]);
        w->wtoken[i] = i;
    }
}

/* The ttls and place ttls lie seconds apart, so a grant's choice (ttl against what is left of
 * the place) never depends on the milliseconds between the model's clock and the script's. */
static const uint64_t ttls[] = {5000, 9000, 21000, 60000};
static const uint64_t place_ttls[] = {3000, 14000, 40000};

typedef struct cmd_build {
    redlock__cmd cmd;
    redlock__cmd_place place; /* a queued command's (cmd.place) */
    redlock__span more[N_KEYS];
    unsigned tag;
} cmd_build;

/* A waiter's lock keys into b (key + more). */
static void waiter_keys(const world *w, unsigned i, cmd_build *b)
{
    unsigned k0 = w->wkeys[i][0];
    b->cmd.key = w->key[k0];
    b->cmd.key_len = strlen(w->key[k0]);
    b->cmd.fence_key = w->fence_key[k0]; /* as a round names it (ops.c, round_new) */
    b->cmd.fence_key_len = strlen(w->fence_key[k0]);
    for (unsigned j = 1; j < w->n_wkeys[i]; j++) {
        const char *k = w->key[w->wkeys[i][j]];
        b->more[j - 1] = (redlock__span){k, strlen(k)};
    }
    b->cmd.more = b->more;
    b->cmd.n_more = w->n_wkeys[i] - 1;
}

static void one_key(const world *w, unsigned k, cmd_build *b)
{
    b->cmd.key = w->key[k];
    b->cmd.key_len = strlen(w->key[k]);
    b->cmd.fence_key = w->fence_key[k];
    b->cmd.fence_key_len = strlen(w->fence_key[k]);
}

static const char *tok_of(const world *w, rng *r, unsigned waiter)
{
    return w->token[coin(r, 80) ? w->wtoken[waiter] : pick(r, N_TOKENS)];
}

/* A token for a command on key: half the time the one the key holds (on the model: the same as
 * the server's, or the step before failed), so that compare-and-X finds its token. */
static const char *held_or_any(diff *d, const world *w, rng *r, const char *key)
{
    if (coin(r, 50)) {
        sim_db_key *k = sim_db_peek(&d->db, key, strlen(key));
        for (unsigned i = 0; k != NULL && k->type == SIM_DB_STRING && i < N_TOKENS; i++)
            if (k->value_len == strlen(w->token[i]) &&
                memcmp(k->value, w->token[i], k->value_len) == 0)
                return w->token[i];
    }
    return w->token[pick(r, N_TOKENS)];
}

/* Draw this step's command into b (or make an edge case by hand: returns false). */
static bool draw_command(diff *d, world *w, rng *r, cmd_build *b, bool *timed)
{
    memset(b, 0, sizeof(*b));
    redlock__cmd *c = &b->cmd;
    unsigned wi = pick(r, N_WAITERS), k = pick(r, N_KEYS);
    c->ttl_ms = ttls[pick(r, 4)];
    *timed = false;
    switch (pick(r, 12)) {
    case 0: /* SET NX PX */
        c->kind = REDLOCK__CMD_ACQUIRE;
        one_key(w, k, b);
        c->token = w->token[pick(r, N_TOKENS)];
        snprintf(d->what, sizeof(d->what), "SET %s NX", c->key);
        break;
    case 1:
    case 2:
    case 3: { /* a waiter's attempt */
        waiter_keys(w, wi, b);
        c->kind =
            w->n_wkeys[wi] == 1 && coin(r, 30) ? REDLOCK__CMD_ACQUIRE_FENCED : REDLOCK__CMD_ACQUIRE;
        c->place = &b->place;
        c->token = tok_of(w, r, wi);
        b->place.waiter = w->waiter[wi];
        b->place.waiter_len = strlen(w->waiter[wi]);
        b->place.channel = w->channel[wi];
        b->place.channel_len = strlen(w->channel[wi]);
        b->place.place_us = coin(r, 90) ? w->place[wi] : w->place[wi] + 1 + pick(r, 1000);
        b->place.place_ttl_ms = place_ttls[pick(r, 3)];
        c->stamp_us = 1000000000 + rnd(r) % 1000000000;
        b->tag = coin(r, 20) ? 0 : 1 + pick(r, 5); /* 0: no record on this node */
        *timed = true;
        snprintf(d->what, sizeof(d->what), "queued %sacquire by w%u of %u keys (tag %u)",
                 c->kind == REDLOCK__CMD_ACQUIRE_FENCED ? "fenced " : "", wi, c->n_more + 1,
                 b->tag);
        break;
    }
    case 4:
    case 5: { /* a waiter's release, a holder's or a lost attempt's */
        waiter_keys(w, wi, b);
        c->kind = REDLOCK__CMD_RELEASE;
        c->place = &b->place;
        c->token = coin(r, 50) ? tok_of(w, r, wi) : held_or_any(d, w, r, c->key);
        bool named = coin(r, 85);
        b->place.waiter = named ? w->waiter[wi] : "";
        b->place.waiter_len = named ? strlen(w->waiter[wi]) : 0;
        c->leave = coin(r, 50);
        c->tell = coin(r, 70);
        if (coin(r, 30)) /* the releaser takes a new token afterwards */
            w->wtoken[wi] = pick(r, N_TOKENS);
        snprintf(d->what, sizeof(d->what), "queued release by %s of %u keys (leave %d tell %d)",
                 named ? w->waiter[wi] : "nobody", c->n_more + 1, c->leave, c->tell);
        break;
    }
    case 6: /* plain and set releases */
        c->kind = REDLOCK__CMD_RELEASE;
        c->tell = coin(r, 50);
        if (coin(r, 50))
            waiter_keys(w, wi, b);
        else
            one_key(w, k, b);
        c->token = held_or_any(d, w, r, c->key);
        snprintf(d->what, sizeof(d->what), "release of %u keys (tell %d)", c->n_more + 1, c->tell);
        break;
    case 7: /* extends: plain, retake, fenced retake, a set's */
        c->kind = REDLOCK__CMD_EXTEND;
        c->retake = coin(r, 50);
        if (coin(r, 30)) {
            waiter_keys(w, wi, b);
        } else {
            one_key(w, k, b);
            c->fence = coin(r, 40) ? 1 + pick(r, 12) : 0;
        }
        c->token = held_or_any(d, w, r, c->key);
        snprintf(d->what, sizeof(d->what), "extend of %u keys (retake %d, fence %" PRIu64 ")",
                 c->n_more + 1, c->retake, c->fence);
        break;
    case 8: /* the fenced acquire and its commit */
        one_key(w, k, b);
        c->token = held_or_any(d, w, r, c->key);
        c->kind = coin(r, 50) ? REDLOCK__CMD_ACQUIRE_FENCED : REDLOCK__CMD_COMMIT;
        c->fence = 1 + pick(r, 12);
        snprintf(d->what, sizeof(d->what), "%s of %s", redlock__cmd_name(c->kind), c->key);
        break;
    case 9: /* inspect, of one key or a set */
        c->kind = REDLOCK__CMD_INSPECT;
        if (coin(r, 50))
            waiter_keys(w, wi, b);
        else
            one_key(w, k, b);
        *timed = true;
        snprintf(d->what, sizeof(d->what), "inspect of %u keys", c->n_more + 1);
        break;
    case 10: /* a set's acquire */
        waiter_keys(w, wi, b);
        if (c->n_more == 0) { /* a set of two: key k and the next */
            one_key(w, k, b);
            const char *next = w->key[(k + 1) % N_KEYS];
            b->more[0] = (redlock__span){next, strlen(next)};
            c->n_more = 1;
        }
        c->kind = REDLOCK__CMD_ACQUIRE;
        c->token = w->token[pick(r, N_TOKENS)];
        snprintf(d->what, sizeof(d->what), "acquire of %u keys", c->n_more + 1);
        break;
    default: /* an edge case, or a change of who listens or who runs the scripts */
        return false;
    }
    c->token_len = c->token != NULL ? strlen(c->token) : 0;
    /* A fenced command of one key names the fence domain's counter now and then (a waiter's
     * attempt then carries it to the server, and its record to the release that grants). */
    if (c->n_more == 0 && coin(r, 40)) {
        c->fence_key = w->domain_key;
        c->fence_key_len = strlen(w->domain_key);
    }
    return true;
}

/* An edge case set up by hand (on both sides), or a change of listeners or of user. */
static void edge_case(diff *d, const world *w, rng *r)
{
    unsigned k = pick(r, N_KEYS), wi = pick(r, N_WAITERS);
    char due[64], value[64];
    snprintf(due, sizeof(due), "%s%s", w->key[k], REDLOCK__DUE_SUFFIX);
    switch (pick(r, 7)) {
    case 0: { /* a counter that is not a decimal number, or is one longer than any fence */
        static const char *const bad[] = {
            "abc", "007", "-1", " 5", "18446744073709551615", "99999999999999999999", "9", "0"};
        const char *v = bad[pick(r, 8)];
        const char *ck = coin(r, 30) ? w->domain_key : w->fence_key[k];
        snprintf(d->what, sizeof(d->what), "counter %s = \"%s\"", ck, v);
        raw_set(d, ck, v);
        break;
    }
    case 1: { /* a place whose deadline passed, or one that is no number */
        uint64_t now_ms = server_time_us(d) / 1000;
        if (coin(r, 75))
            snprintf(value, sizeof(value), "%" PRIu64, now_ms - 5000 - pick(r, 1000));
        else
            snprintf(value, sizeof(value), "x%u", pick(r, 10));
        snprintf(d->what, sizeof(d->what), "place of w%u in %s = %s", wi, due, value);
        raw_hset(d, due, w->waiter[wi], value);
        break;
    }
    case 2: { /* a grant record that is not one */
        char field[40];
        snprintf(field, sizeof(field), "%s:g", w->waiter[wi]);
        /* Among them records that name a domain's counter ("2"), broken, and whole. */
        static const char *const bad[] = {"garbage",
                                          "100:1:2:0:3:3:abcdef",
                                          "100:1:2:0:0:",
                                          "x:1:2:0:0:3:abcdef",
                                          "100:1:2:0:2:3:ab:5:abcdef",
                                          "100:1:2:0:2:99:x:3:abc",
                                          "100:1:2:0:2:3:xyz3:abcdef",
                                          "100:1:2:0:2:0::3:abcTOKEN",
                                          "100:1:2:0:2:2:zz:3:abc"};
        const char *g = bad[pick(r, 9)];
        snprintf(d->what, sizeof(d->what), "record of w%u in %s = \"%s\"", wi, due, g);
        raw_hset(d, due, field, g);
        break;
    }
    case 3: /* a key gone (as if it expired) */
        snprintf(d->what, sizeof(d->what), "DEL %s", w->key[k]);
        raw_del(d, w->key[k]);
        break;
    case 4:
    case 5: /* a head starts or stops listening */
        snprintf(d->what, sizeof(d->what), "w%u listens: toggled", wi);
        set_listening(d, w->channel[wi], !listening(d, w->channel[wi], strlen(w->channel[wi])));
        break;
    default: /* the scripts run as another user from now on */
        d->user = pick(r, 10) < 6 ? USER_DEFAULT : 1 + pick(r, 2);
        snprintf(d->what, sizeof(d->what), "user %u", d->user);
        break;
    }
}

/* The model's value of key ("" when absent), into out. */
static void model_value(diff *d, const char *key, char *out, size_t size)
{
    sim_db_key *k = sim_db_peek(&d->db, key, strlen(key));
    size_t n = k != NULL && k->type == SIM_DB_STRING ? k->value_len : 0;
    n = n < size - 1 ? n : size - 1;
    memcpy(out, n > 0 ? k->value : "", n);
    out[n] = '\0';
}

/* Run seed's sequence; returns the step that differed (0: none). */
static unsigned run_seed(diff *d, uint64_t seed, bool quiet)
{
    command_ok(d->conn[0], "FLUSHALL");
    sim_db_clear(&d->db);
    while (d->n_listen > 0)
        set_listening(d, d->listen[0], false);
    d->user = USER_DEFAULT;
    rng r = {seed * 0x9E3779B97F4A7C15ull + 1};
    world w;
    make_world(&w, &r, seed);
    for (unsigned i = 0; i < N_WAITERS; i++)
        if (coin(&r, 60))
            set_listening(d, w.channel[i], true);
    redlock__buf buf = {0};
    unsigned bad = 0;
    for (unsigned step = 1; step <= STEPS && bad == 0; step++) {
        step_ctx s = {seed, step, quiet};
        cmd_build b;
        bool timed;
        if (!draw_command(d, &w, &r, &b, &timed)) {
            edge_case(d, &w, &r);
            if (d->trace)
                printf("# step %u: %s\n", step, d->what);
            if (!same_keys(d, &s))
                bad = step;
            continue;
        }
        buf.len = 0;
        assert_int_equal(redlock__cmd_encode(&b.cmd, b.tag, false, &buf, &d->alloc), 0);
        char before[64], after[64];
        model_value(d, w.domain_key, before, sizeof(before));
        if (!run_both(d, &s, &buf, timed))
            bad = step;
        model_value(d, w.domain_key, after, sizeof(after));
        if (bad == 0 && strcmp(before, after) != 0) {
            bool release = b.cmd.kind == REDLOCK__CMD_RELEASE;
            d->cov.domain_grants += (b.cmd.place != NULL) && release;
            d->cov.domain_queued += (b.cmd.place != NULL) && !release;
            d->cov.domain_other += !(b.cmd.place != NULL);
        }
    }
    redlock__buf_free(&buf, &d->alloc);
    return bad;
}

static unsigned seed_count(void)
{
    const char *s = getenv("SIM_DIFF_SEEDS");
    return s != NULL && *s != '\0' ? (unsigned)strtoul(s, NULL, 10) : DEFAULT_SEEDS;
}

/* Every seed's every step: the same replies, publications and keys. */
static void models_match_the_scripts(void **state)
{
    (void)state;
    diff *d = calloc(1, sizeof(*d));
    assert_non_null(d);
    diff_start(d);
    unsigned seeds = seed_count(), failed = 0;
    for (uint64_t seed = 1; seed <= seeds && failed < 3; seed++)
        failed += run_seed(d, seed, false) != 0;
    printf("# %u seeds of %d commands: %u differed\n", seeds, STEPS, failed);
    const coverage *c = &d->cov;
    printf("# exercised: %u grants (%u cut at the place, %u fenced), %u heads woken (%u on the "
           "queue's channel), %u keys told, %u queued waits, %u keys taken by their head, %u "
           "counters refused, %u errors raised, %u pubsub refusals; the domain's counter raised "
           "by %u grants, %u waiters' attempts, %u other commands\n",
           c->grants, c->cut_grants, c->fenced_grants, c->woken, c->woken_on_queue, c->told_key,
           c->queued_waits, c->taken_by_head, c->fence_errors, c->raised, c->refused,
           c->domain_grants, c->domain_queued, c->domain_other);
    bool all = c->grants && c->cut_grants && c->fenced_grants && c->woken && c->woken_on_queue &&
               c->told_key && c->queued_waits && c->taken_by_head && c->fence_errors &&
               c->refused && c->domain_grants && c->domain_queued && c->domain_other;
    diff_stop(d);
    free(d);
    assert_int_equal(failed, 0);
    if (seeds >= DEFAULT_SEEDS)
        assert_true(all);
}

/* Not vacuous: each broken model (the simulation's controls) differs from the scripts. */
static void broken_models_differ(void **state)
{
    (void)state;
    static const struct {
        unsigned flag;
        const char *name;
    } breaks[] = {
        {SIM_BREAK_GRANT_FULL_TTL, "a grant for the full ttl"},
        {SIM_BREAK_NUMSUB_RAISES, "a refused NUMSUB raising after the DEL"},
        {SIM_BREAK_QUEUE_BY_ARRIVAL, "places by arrival"},
    };
    diff *d = calloc(1, sizeof(*d));
    assert_non_null(d);
    diff_start(d);
    unsigned seeds = seed_count();
    for (size_t i = 0; i < sizeof(breaks) / sizeof(breaks[0]); i++) {
        d->breaks = breaks[i].flag;
        uint64_t found = 0;
        unsigned step = 0;
        for (uint64_t seed = 1; seed <= seeds && found == 0; seed++) {
            step = run_seed(d, seed, true);
            if (step != 0)
                found = seed;
        }
        printf("# broken model (%s): %s at seed %" PRIu64 " step %u\n", breaks[i].name,
               found != 0 ? "told apart" : "NOT told apart", found, step);
        assert_true(found != 0);
    }
    diff_stop(d);
    free(d);
}

/* SIM_DIFF_SEED=N: one seed, with a trace of its commands. */
static int replay(const char *text)
{
    diff *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return 1;
    diff_start(d);
    d->trace = true;
    uint64_t seed = strtoull(text, NULL, 10);
    unsigned bad = run_seed(d, seed, false);
    printf("seed %" PRIu64 ": %s\n", seed, bad == 0 ? "the models match" : "differs");
    diff_stop(d);
    free(d);
    return bad == 0 ? 0 : 1;
}

int main(void)
{
    const char *seed = getenv("SIM_DIFF_SEED");
    if (seed != NULL && *seed != '\0')
        return replay(seed);
    const char *filter = getenv("SIM_TEST_FILTER");
    if (filter != NULL && *filter != '\0')
        cmocka_set_test_filter(filter);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(models_match_the_scripts),
        cmocka_unit_test(broken_models_differ),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
