/* SPDX-License-Identifier: MIT */
/* sim_diff.c - see sim_diff.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "command.h"
#include "scripts.h"
#include "sim_diff.h"

/* ---- the model's pub/sub: the same listeners, the same refusals ---------------------------- */

bool listening(const diff *d, const char *ch, size_t len)
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

static const sim_server_hooks hooks_template = {model_numsub, model_publish,    NULL,
                                                NULL,         redlock__scripts, REDLOCK__SCRIPTS};

/* ---- the server ------------------------------------------------------------------------------ */

static redisReply *must(redisContext *c, redisReply *r, const char *what)
{
    if (r == NULL)
        fprintf(stderr, "# %s: %s\n", what, c->errstr);
    assert_non_null(r);
    return r;
}

void command_ok(redisContext *c, const char *fmt, ...)
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

uint64_t server_time_us(diff *d)
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

void diff_start(diff *d)
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

void diff_stop(diff *d)
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

void set_listening(diff *d, const char *ch, bool on)
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
bool same_keys(diff *d, const step_ctx *s)
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
bool run_both(diff *d, const step_ctx *s, const redlock__buf *buf, bool timed)
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
void raw_set(diff *d, const char *key, const char *value)
{
    command_ok(d->conn[0], "SET %s %s", key, value);
    sim_db_set(&d->db, key, strlen(key), value, strlen(value), SIM_DB_PERSIST);
}

void raw_hset(diff *d, const char *key, const char *field, const char *value)
{
    command_ok(d->conn[0], "HSET %s %s %s", key, field, value);
    sim_db_key *k = sim_db_find(&d->db, key, strlen(key), server_time_us(d));
    if (k == NULL)
        k = sim_db_create(&d->db, key, strlen(key), SIM_DB_HASH);
    assert_non_null(k);
    assert_int_equal(k->type, SIM_DB_HASH);
    assert_true(sim_db_hset(&d->db, k, field, strlen(field), value, strlen(value)));
}

void raw_del(diff *d, const char *key)
{
    command_ok(d->conn[0], "DEL %s", key);
    sim_db_key *k = sim_db_peek(&d->db, key, strlen(key));
    if (k != NULL)
        sim_db_delete(&d->db, k);
}
