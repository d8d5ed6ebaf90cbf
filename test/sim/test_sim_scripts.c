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
 * channel or not, and a user whose ACL refuses PUBSUB NUMSUB or PUBLISH. After every command the
 * test requires:
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
#include "fixture.h"
#include "scripts.h"
#include "sim_scripts.h"

#define DEFAULT_SEEDS 300u
#define STEPS 40
#define TOL_MS 250
#define N_KEYS 3
#define N_TOKENS 4
#define N_WAITERS 3
#define MAX_ARGS 32
#define MAX_PUBS 32
#define MAX_LISTEN 8

enum { USER_DEFAULT, USER_NO_NUMSUB, USER_NO_PUBLISH, N_USERS };

typedef struct pub {
    char channel[128];
    size_t channel_len;
    char msg[SIM_REPLY_TEXT];
    size_t msg_len;
} pub;

typedef struct pubs {
    unsigned n;
    bool overflow;
    pub v[MAX_PUBS];
} pubs;

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
    char token[N_TOKENS][40];
    char waiter[N_WAITERS][20];
    char channel[N_WAITERS][64]; /* its first key's queue name, ":" and its id */
    uint64_t place[N_WAITERS];
    unsigned n_wkeys[N_WAITERS];
    unsigned wkeys[N_WAITERS][N_KEYS]; /* a waiter's keys, in the order its lock names them */
    unsigned wtoken[N_WAITERS];
} world;

/* What the sequences exercised (counted on the model's side of each step that matched). */
typedef struct coverage {
    unsigned grants, cut_grants, fenced_grants, woken, woken_on_queue, told_key, queued_waits,
        taken_by_head, fence_errors, raised, refused;
} coverage;

typedef struct diff {
    fixture_cluster fx;
    coverage cov;
    redisContext *conn[N_USERS];
    redisContext *sub; /* the listeners: SUBSCRIBEd to the channels in listen[] */
    redisContext *mon; /* MONITOR: every PUBLISH a script makes */
    sim_db db;
    unsigned user;
    unsigned breaks;
    char listen[MAX_LISTEN][64];
    unsigned n_listen;
    pubs model_pubs;
    uint64_t mark;
    bool trace;
    redlock__alloc alloc;
    /* the command of this step, for messages */
    char what[1024];
} diff;

/* ---- the model's pub/sub: the same listeners, the same refusals ---------------------------- */

static bool listening(const diff *d, const char *ch, size_t len)
{
    for (unsigned i = 0; i < d->n_listen; i++)
        if (strlen(d->listen[i]) == len && memcmp(d->listen[i], ch, len) == 0)
            return true;
    return false;
}

static long long model_numsub(void *ctx, const char *ch, size_t len)
{
    diff *d = ctx;
    if (d->user == USER_NO_NUMSUB) {
        d->cov.refused++;
        return -1;
    }
    return listening(d, ch, len) ? 1 : 0;
}

static long long model_publish(void *ctx, const char *ch, size_t len, const char *msg,
                               size_t msg_len)
{
    diff *d = ctx;
    if (d->user == USER_NO_PUBLISH) {
        d->cov.refused++;
        return -1;
    }
    pubs *p = &d->model_pubs;
    if (p->n == MAX_PUBS || len >= sizeof(p->v[0].channel) || msg_len >= sizeof(p->v[0].msg)) {
        p->overflow = true;
    } else {
        pub *e = &p->v[p->n++];
        memcpy(e->channel, ch, len);
        e->channel_len = len;
        memcpy(e->msg, msg, msg_len);
        e->msg_len = msg_len;
    }
    return listening(d, ch, len) ? 1 : 0;
}

static const sim_server_hooks hooks_template = {model_numsub, model_publish, NULL, NULL};

/* ---- the server ------------------------------------------------------------------------------ */

static redisReply *must(redisContext *c, redisReply *r, const char *what)
{
    if (r == NULL)
        fprintf(stderr, "# %s: %s\n", what, c->errstr);
    assert_non_null(r);
    return r;
}

static void command_ok(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    must(c, r, fmt);
    if (r->type == REDIS_REPLY_ERROR)
        fprintf(stderr, "# %s: %s\n", fmt, r->str);
    assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
}

static uint64_t server_time_us(diff *d)
{
    redisReply *r = must(d->conn[0], redisCommand(d->conn[0], "TIME"), "TIME");
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    uint64_t us =
        strtoull(r->element[0]->str, NULL, 10) * 1000000 + strtoull(r->element[1]->str, NULL, 10);
    freeReplyObject(r);
    return us;
}

static redisContext *connect_as(diff *d, const char *user)
{
    redisContext *c = fixture_connect(&d->fx, 0);
    assert_non_null(c);
    assert_int_equal(c->err, 0);
    if (user != NULL)
        command_ok(c, "AUTH %s x", user);
    return c;
}

static void diff_start(diff *d)
{
    memset(d, 0, sizeof(*d));
    redlock__alloc_init(&d->alloc, NULL, NULL);
    assert_int_equal(fixture_start(&d->fx, 1, NULL), 0);
    d->conn[0] = connect_as(d, NULL);
    command_ok(d->conn[0], "ACL SETUSER diff-nonumsub on nopass ~* &* +@all -pubsub|numsub");
    command_ok(d->conn[0], "ACL SETUSER diff-nopublish on nopass ~* &* +@all -publish");
    d->conn[USER_NO_NUMSUB] = connect_as(d, "diff-nonumsub");
    d->conn[USER_NO_PUBLISH] = connect_as(d, "diff-nopublish");
    d->sub = connect_as(d, NULL);
    d->mon = connect_as(d, NULL);
    command_ok(d->mon, "MONITOR");
    for (size_t i = 0; i < REDLOCK__SCRIPTS; i++) {
        const redlock__script *s = redlock__scripts[i];
        redisReply *r =
            must(d->conn[0], redisCommand(d->conn[0], "SCRIPT LOAD %b", s->source, s->source_len),
                 "SCRIPT LOAD");
        assert_int_equal(r->type, REDIS_REPLY_STRING);
        assert_string_equal(r->str, s->sha1);
        freeReplyObject(r);
    }
    sim_db_init(&d->db);
    const char *trace = getenv("SIM_DIFF_TRACE");
    d->trace = trace != NULL && *trace != '\0';
}

static void diff_stop(diff *d)
{
    for (unsigned i = 0; i < N_USERS; i++)
        redisFree(d->conn[i]);
    redisFree(d->sub);
    redisFree(d->mon);
    sim_db_free(&d->db);
    fixture_stop(&d->fx);
}

/* SUBSCRIBE or UNSUBSCRIBE ch on the listeners' connection, reading past any message. */
static void sub_change(diff *d, const char *verb, const char *ch)
{
    redisAppendCommand(d->sub, "%s %s", verb, ch);
    for (;;) {
        redisReply *r = NULL;
        assert_int_equal(redisGetReply(d->sub, (void **)&r), REDIS_OK);
        bool done = r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
                    r->element[0]->type == REDIS_REPLY_STRING &&
                    strcasecmp(r->element[0]->str, verb) == 0;
        freeReplyObject(r);
        if (done)
            return;
    }
}

static void set_listening(diff *d, const char *ch, bool on)
{
    bool now = listening(d, ch, strlen(ch));
    if (now == on)
        return;
    sub_change(d, on ? "SUBSCRIBE" : "UNSUBSCRIBE", ch);
    if (on) {
        snprintf(d->listen[d->n_listen++], sizeof(d->listen[0]), "%s", ch);
        return;
    }
    for (unsigned i = 0; i < d->n_listen; i++) {
        if (strcmp(d->listen[i], ch) == 0) {
            memcpy(d->listen[i], d->listen[--d->n_listen], sizeof(d->listen[0]));
            return;
        }
    }
}

/* ---- MONITOR: what the scripts published ----------------------------------------------------- */

/* The next quoted argument of a MONITOR line (sdscatrepr's escapes) into out; advances *p. */
static bool monitor_arg(const char **p, char *out, size_t cap, size_t *len)
{
    const char *s = *p;
    while (*s == ' ')
        s++;
    if (*s != '"')
        return false;
    s++;
    size_t n = 0;
    while (*s != '\0' && *s != '"') {
        char c = *s++;
        if (c == '\\') {
            char e = *s++;
            switch (e) {
            case 'n':
                c = '\n';
                break;
            case 'r':
                c = '\r';
                break;
            case 't':
                c = '\t';
                break;
            case 'a':
                c = '\a';
                break;
            case 'b':
                c = '\b';
                break;
            case 'x': {
                char hex[3] = {s[0], s[1], '\0'};
                c = (char)strtoul(hex, NULL, 16);
                s += 2;
                break;
            }
            default:
                c = e; /* \\ and \" */
                break;
            }
        }
        if (n + 1 < cap)
            out[n++] = c;
    }
    if (*s != '"')
        return false;
    out[n] = '\0';
    *len = n;
    *p = s + 1;
    return true;
}

/* Read MONITOR up to this step's mark, keeping each PUBLISH a script made. */
static void server_pubs(diff *d, pubs *out)
{
    memset(out, 0, sizeof(*out));
    char mark[32];
    snprintf(mark, sizeof(mark), "diffmark-%" PRIu64, ++d->mark);
    redisReply *r = must(d->conn[0], redisCommand(d->conn[0], "ECHO %s", mark), "ECHO");
    freeReplyObject(r);
    for (;;) {
        redisReply *line = NULL;
        assert_int_equal(redisGetReply(d->mon, (void **)&line), REDIS_OK);
        assert_int_equal(line->type, REDIS_REPLY_STATUS);
        bool at_mark = strstr(line->str, mark) != NULL;
        const char *src = strchr(line->str, '[');
        const char *p = src != NULL ? strchr(src, ']') : NULL;
        char cmd[16];
        size_t cmd_len;
        const char *q = p != NULL ? p + 1 : NULL;
        if (!at_mark && q != NULL && strncmp(src, "[0 lua]", 7) == 0 &&
            monitor_arg(&q, cmd, sizeof(cmd), &cmd_len)) {
            if (strcasecmp(cmd, "publish") == 0) {
                if (out->n == MAX_PUBS) {
                    out->overflow = true;
                } else {
                    pub *e = &out->v[out->n++];
                    assert_true(monitor_arg(&q, e->channel, sizeof(e->channel), &e->channel_len));
                    assert_true(monitor_arg(&q, e->msg, sizeof(e->msg), &e->msg_len));
                }
            }
        }
        freeReplyObject(line);
        if (at_mark)
            return;
    }
}

/* ---- comparing ------------------------------------------------------------------------------ */

typedef struct step_ctx {
    uint64_t seed;
    unsigned step;
    bool quiet; /* a broken model is expected to differ: say nothing */
} step_ctx;

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static bool
differ(const diff *d, const step_ctx *s, const char *fmt, ...)
{
    if (s->quiet)
        return false;
    char text[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    printf("# seed %" PRIu64 " step %u (%s): %s\n#   replay: SIM_DIFF_SEED=%" PRIu64
           " test-sim-scripts\n",
           s->seed, s->step, d->what, text, s->seed);
    return false;
}

static bool close_ms(long long a, long long b)
{
    return a == b || (a >= 0 && b >= 0 && llabs(a - b) <= TOL_MS);
}

static const char *rtype_name(sim_rtype t)
{
    static const char *const names[] = {"nil", "status", "error", "integer", "bulk", "array"};
    return names[t];
}

static bool same_val(const sim_rval *m, const redisReply *r, bool timed, bool raised)
{
    switch (m->type) {
    case SIM_R_NIL:
        return r->type == REDIS_REPLY_NIL;
    case SIM_R_INT:
        return r->type == REDIS_REPLY_INTEGER &&
               (timed ? close_ms(m->integer, r->integer) : m->integer == r->integer);
    case SIM_R_STATUS:
    case SIM_R_BULK:
        return r->type == (m->type == SIM_R_STATUS ? REDIS_REPLY_STATUS : REDIS_REPLY_STRING) &&
               r->len == m->len && memcmp(r->str, m->str, m->len) == 0;
    case SIM_R_ERROR:
        /* A raised error's text names the script and its line: only its kind must agree. */
        return r->type == REDIS_REPLY_ERROR &&
               (raised ? strncmp(r->str, "ERR", 3) == 0
                       : r->len == m->len && memcmp(r->str, m->str, m->len) == 0);
    case SIM_R_ARRAY:
        return false;
    }
    return false;
}

/* timed: the reply is a number derived from the server's clock (a waiter's wait). */
static bool same_reply(const diff *d, const step_ctx *s, const sim_reply *m, const redisReply *r,
                       bool timed)
{
    if (m->v.type == SIM_R_ARRAY) {
        bool ok = r->type == REDIS_REPLY_ARRAY && r->elements == m->n;
        for (unsigned i = 0; ok && i < m->n; i++)
            ok = same_val(&m->elem[i], r->element[i], i == 1, false);
        if (!ok)
            return differ(d, s, "reply: model an array of %u, server type %d (%zu elements)", m->n,
                          r->type, r->type == REDIS_REPLY_ARRAY ? r->elements : 0);
        return true;
    }
    if (!same_val(&m->v, r, timed, m->raised))
        return differ(d, s, "reply: model %s %lld \"%s\", server type %d %lld \"%s\"",
                      rtype_name(m->v.type), m->v.integer, m->v.str, r->type, r->integer,
                      r->str != NULL ? r->str : "");
    return true;
}

static bool same_pubs(const diff *d, const step_ctx *s, const pubs *m, const pubs *r)
{
    if (m->overflow || r->overflow)
        return differ(d, s, "more than %d PUBLISHes in one step", MAX_PUBS);
    for (unsigned i = 0; i < m->n || i < r->n; i++) {
        const pub *a = i < m->n ? &m->v[i] : NULL, *b = i < r->n ? &r->v[i] : NULL;
        if (a != NULL && b != NULL && a->channel_len == b->channel_len &&
            memcmp(a->channel, b->channel, a->channel_len) == 0 && a->msg_len == b->msg_len &&
            memcmp(a->msg, b->msg, a->msg_len) == 0)
            continue;
        return differ(d, s, "PUBLISH %u: model %s \"%.*s\" \"%.*s\", server %s \"%.*s\" \"%.*s\"",
                      i, a != NULL ? "" : "(none)", a != NULL ? (int)a->channel_len : 0,
                      a != NULL ? a->channel : "", a != NULL ? (int)a->msg_len : 0,
                      a != NULL ? a->msg : "", b != NULL ? "" : "(none)",
                      b != NULL ? (int)b->channel_len : 0, b != NULL ? b->channel : "",
                      b != NULL ? (int)b->msg_len : 0, b != NULL ? b->msg : "");
    }
    return true;
}

static int name_cmp(const void *a, const void *b)
{
    const sim_db_key *x = *(sim_db_key *const *)a, *y = *(sim_db_key *const *)b;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);
    return c != 0 ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool ends_with(const char *s, size_t len, const char *suffix)
{
    size_t n = strlen(suffix);
    return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

/* One key on both sides: type, PTTL, content. */
static bool same_key(diff *d, const step_ctx *s, const sim_db_key *k, uint64_t now_us)
{
    redisContext *c = d->conn[0];
    redisReply *t = must(c, redisCommand(c, "TYPE %b", k->name, k->name_len), "TYPE");
    static const char *const types[] = {"", "string", "zset", "hash"};
    bool ok = t->type == REDIS_REPLY_STATUS && strcmp(t->str, types[k->type]) == 0;
    if (!ok)
        differ(d, s, "key %s: model %s, server %s", k->name, types[k->type], t->str);
    freeReplyObject(t);
    if (!ok)
        return false;
    redisReply *p = must(c, redisCommand(c, "PTTL %b", k->name, k->name_len), "PTTL");
    long long mp = sim_db_pttl(k, now_us);
    if (!close_ms(mp, p->integer))
        ok = differ(d, s, "key %s: PTTL model %lld, server %lld", k->name, mp, p->integer);
    freeReplyObject(p);
    if (!ok)
        return false;
    redisReply *v = NULL;
    if (k->type == SIM_DB_STRING) {
        v = must(c, redisCommand(c, "GET %b", k->name, k->name_len), "GET");
        ok = v->type == REDIS_REPLY_STRING && v->len == k->value_len &&
             memcmp(v->str, k->value, v->len) == 0;
        if (!ok)
            differ(d, s, "key %s: model \"%.*s\", server \"%s\"", k->name, (int)k->value_len,
                   k->value, v->str != NULL ? v->str : "(nil)");
        freeReplyObject(v);
        return ok;
    }
    bool zset = k->type == SIM_DB_ZSET;
    v = zset ? redisCommand(c, "ZRANGE %b 0 -1 WITHSCORES", k->name, k->name_len)
             : redisCommand(c, "HGETALL %b", k->name, k->name_len);
    must(c, v, "ZRANGE/HGETALL");
    ok = v->type == REDIS_REPLY_ARRAY && v->elements == 2 * k->n_items;
    if (!ok) {
        differ(d, s, "key %s: model %zu members, server %zu", k->name, k->n_items, v->elements / 2);
        freeReplyObject(v);
        return false;
    }
    bool due = ends_with(k->name, k->name_len, ":queue-due");
    for (size_t i = 0; ok && i < k->n_items; i++) {
        const redisReply *f = v->element[2 * i], *x = v->element[2 * i + 1];
        const sim_db_item *it = NULL;
        if (zset) {
            it = &k->items[i]; /* both in order */
            ok = f->len == it->name_len && memcmp(f->str, it->name, f->len) == 0 &&
                 strtod(x->str, NULL) == it->score;
        } else {
            it = sim_db_hget(k, f->str, f->len);
            ok = it != NULL;
            if (ok && due && !ends_with(it->name, it->name_len, ":g")) /* a place deadline */
                ok = close_ms(strtoll(x->str, NULL, 10), strtoll(it->value, NULL, 10));
            else if (ok)
                ok = x->len == it->value_len && memcmp(x->str, it->value, x->len) == 0;
        }
        if (!ok)
            differ(d, s, "key %s: member/field %zu: server \"%s\" = \"%s\", model \"%s\" = %s",
                   k->name, i, f->str, x->str, it != NULL ? it->name : "(none)",
                   it == NULL ? ""
                   : zset     ? "(score)"
                              : it->value);
    }
    freeReplyObject(v);
    return ok;
}

/* Every live key, on both sides. */
static bool same_keys(diff *d, const step_ctx *s)
{
    uint64_t now = server_time_us(d);
    redisContext *c = d->conn[0];
    redisReply *all = must(c, redisCommand(c, "KEYS *"), "KEYS");
    sim_db_key *mine[64];
    size_t n = 0;
    for (size_t i = 0; i < d->db.n && n < 64; i++) {
        sim_db_key *k = d->db.keys[i];
        if (k->expire_us == SIM_DB_PERSIST || now <= k->expire_us)
            mine[n++] = k;
    }
    qsort(mine, n, sizeof(mine[0]), name_cmp);
    const char *theirs[64];
    size_t m = all->elements < 64 ? all->elements : 64;
    for (size_t i = 0; i < m; i++)
        theirs[i] = all->element[i]->str;
    qsort(theirs, m, sizeof(theirs[0]), str_cmp);
    bool ok = n == m;
    for (size_t i = 0; ok && i < n; i++)
        ok = strlen(theirs[i]) == mine[i]->name_len &&
             memcmp(theirs[i], mine[i]->name, mine[i]->name_len) == 0;
    if (!ok) {
        char a[400] = "", b[400] = "";
        for (size_t i = 0; i < n; i++)
            snprintf(a + strlen(a), sizeof(a) - strlen(a), " %s", mine[i]->name);
        for (size_t i = 0; i < m; i++)
            snprintf(b + strlen(b), sizeof(b) - strlen(b), " %s", theirs[i]);
        freeReplyObject(all);
        return differ(d, s, "keys: model {%s }, server {%s }", a, b);
    }
    freeReplyObject(all);
    for (size_t i = 0; i < n; i++)
        if (!same_key(d, s, mine[i], now))
            return false;
    return true;
}

/* What a matched step exercised. */
static void count(diff *d, int argc, const char *const *argv, const size_t *lens,
                  const sim_reply *m)
{
    coverage *c = &d->cov;
    bool queued_acquire =
        argc > 1 && lens[1] == 40 && memcmp(argv[1], redlock__script_acquire_queued.sha1, 40) == 0;
    c->queued_waits += queued_acquire && m->v.type == SIM_R_INT;
    c->taken_by_head += queued_acquire && m->v.type != SIM_R_INT && m->v.type != SIM_R_ERROR;
    c->fence_errors += m->v.type == SIM_R_ERROR && !m->raised;
    c->raised += m->raised;
    for (unsigned i = 0; i < d->model_pubs.n; i++) {
        const pub *p = &d->model_pubs.v[i];
        if (strncmp(p->msg, "g:", 2) == 0) {
            c->grants++;
            /* g:stamp:tag:j:full:counter:token */
            const char *f = p->msg;
            for (int colons = 0; colons < 4 && f != NULL; colons++)
                f = strchr(f + 1, ':');
            c->cut_grants += f != NULL && f[1] == '0';
            c->fenced_grants += f != NULL && f[2] == ':' && f[3] != ':';
        } else if (strncmp(p->msg, "w:", 2) == 0) {
            c->woken++;
        } else if (ends_with(p->channel, p->channel_len, REDLOCK__QUEUE_SUFFIX)) {
            c->woken_on_queue++;
        } else {
            c->told_key++;
        }
    }
}

/* ---- one command on both ----------------------------------------------------------------------
 */

/* Run the encoded command (buf) on both and compare everything. timed: its reply is a wait. */
static bool run_both(diff *d, const step_ctx *s, const redlock__buf *buf, bool timed)
{
    const char *argv[MAX_ARGS];
    size_t lens[MAX_ARGS];
    int argc = sim_resp_argv(buf->data, buf->len, argv, lens, MAX_ARGS);
    assert_true(argc > 0);
    uint64_t now = server_time_us(d);
    memset(&d->model_pubs, 0, sizeof(d->model_pubs));
    sim_server_hooks hooks = hooks_template;
    hooks.ctx = d;
    sim_reply m;
    sim_server_exec(&d->db, now, &hooks, d->breaks, argc, argv, lens, &m);
    redisContext *c = d->conn[d->user];
    redisReply *r = must(c, redisCommandArgv(c, argc, argv, lens), "command");
    if (d->trace)
        printf("# step %u (%s, user %u): server type %d %lld \"%s\"\n", s->step, d->what, d->user,
               r->type, r->integer, r->str != NULL ? r->str : "");
    bool ok = same_reply(d, s, &m, r, timed);
    freeReplyObject(r);
    pubs theirs;
    server_pubs(d, &theirs);
    ok = ok && same_pubs(d, s, &d->model_pubs, &theirs) && same_keys(d, s);
    if (ok)
        count(d, argc, argv, lens, &m);
    return ok;
}

/* A write the sequence makes outside the scripts (an edge case set up by hand), on both. */
static void raw_set(diff *d, const char *key, const char *value)
{
    command_ok(d->conn[0], "SET %s %s", key, value);
    sim_db_set(&d->db, key, strlen(key), value, strlen(value), SIM_DB_PERSIST);
}

static void raw_hset(diff *d, const char *key, const char *field, const char *value)
{
    command_ok(d->conn[0], "HSET %s %s %s", key, field, value);
    sim_db_key *k = sim_db_find(&d->db, key, strlen(key), server_time_us(d));
    if (k == NULL)
        k = sim_db_create(&d->db, key, strlen(key), SIM_DB_HASH);
    assert_non_null(k);
    assert_int_equal(k->type, SIM_DB_HASH);
    assert_true(sim_db_hset(&d->db, k, field, strlen(field), value, strlen(value)));
}

static void raw_del(diff *d, const char *key)
{
    command_ok(d->conn[0], "DEL %s", key);
    sim_db_key *k = sim_db_peek(&d->db, key, strlen(key));
    if (k != NULL)
        sim_db_delete(&d->db, k);
}

/* ---- the sequences -------------------------------------------------------------------------- */

static void make_world(world *w, rng *r, uint64_t seed)
{
    memset(w, 0, sizeof(*w));
    for (unsigned i = 0; i < N_KEYS; i++) {
        snprintf(w->key[i], sizeof(w->key[i]), "d%" PRIu64 ":%c", seed % 97, 'a' + i);
        snprintf(w->fence_key[i], sizeof(w->fence_key[i]), "%s%s", w->key[i],
                 REDLOCK__FENCE_SUFFIX);
    }
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
        c->queued = true;
        c->token = tok_of(w, r, wi);
        c->waiter = w->waiter[wi];
        c->waiter_len = strlen(w->waiter[wi]);
        c->channel = w->channel[wi];
        c->channel_len = strlen(w->channel[wi]);
        c->place_us = coin(r, 90) ? w->place[wi] : w->place[wi] + 1 + pick(r, 1000);
        c->place_ttl_ms = place_ttls[pick(r, 3)];
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
        c->queued = true;
        c->token = coin(r, 50) ? tok_of(w, r, wi) : held_or_any(d, w, r, c->key);
        bool named = coin(r, 85);
        c->waiter = named ? w->waiter[wi] : "";
        c->waiter_len = named ? strlen(w->waiter[wi]) : 0;
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
        snprintf(d->what, sizeof(d->what), "counter %s = \"%s\"", w->fence_key[k], v);
        raw_set(d, w->fence_key[k], v);
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
        static const char *const bad[] = {"garbage", "100:1:2:0:2:3:abcdef",
                                          "100:1:2:0:0:", "x:1:2:0:0:3:abcdef"};
        snprintf(d->what, sizeof(d->what), "record of w%u in %s = bad", wi, due);
        raw_hset(d, due, field, bad[pick(r, 4)]);
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
        if (!run_both(d, &s, &buf, timed))
            bad = step;
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
           "counters refused, %u errors raised, %u pubsub refusals\n",
           c->grants, c->cut_grants, c->fenced_grants, c->woken, c->woken_on_queue, c->told_key,
           c->queued_waits, c->taken_by_head, c->fence_errors, c->raised, c->refused);
    bool all = c->grants && c->cut_grants && c->fenced_grants && c->woken && c->woken_on_queue &&
               c->told_key && c->queued_waits && c->taken_by_head && c->fence_errors && c->refused;
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
