/* SPDX-License-Identifier: MIT */
/* sim_scripts.c - the C models of the library's commands (sim_scripts.h).
 *
 * Each model below is its script of lib/lua/ line by line; the Lua is quoted where a line is not
 * obvious. A Redis call inside a script that fails (a key of the wrong type, a bad number, a key
 * a cluster's master may not touch) raises, as redis.call does: the script stops there and keeps
 * what it wrote (sx.raised; every step checks it first). */
#include "sim_scripts.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "scripts.h"

typedef struct str {
    const char *p;
    size_t len;
} str;

#define STR(lit) ((str){(lit), sizeof(lit) - 1})

/* A copy of a string the script holds on to while it writes (a Lua string is a value; a key's
 * bytes in the keyspace are not). */
typedef struct sbuf {
    bool absent; /* Lua's false: no such key */
    size_t len;
    char p[SIM_REPLY_TEXT];
} sbuf;

#define NAME_MAX_LEN 600 /* a key's name with a suffix, a channel */

typedef struct sx {
    sim_db *db;
    uint64_t now_us;
    double now; /* queue.lua's now: TIME in milliseconds */
    const sim_server_hooks *h;
    unsigned breaks;
    sim_reply *out;
    bool in_script; /* a Redis call's error raises (else it is the command's reply) */
    bool raised;
    int nk; /* KEYS */
    const char *const *k;
    const size_t *kl;
    int na; /* ARGV */
    const char *const *a;
    const size_t *al;
} sx;

static void raise_error(sx *x, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* KEYS[i + 1]; a script that names a key it was not given fails, as redis.call(nil) does. */
static str key_of(sx *x, int i)
{
    if (i >= x->nk) {
        raise_error(x, "Lua redis() command arguments must be strings or integers");
        return (str){"", 0};
    }
    return (str){x->k[i], x->kl[i]};
}

static str arg_of(const sx *x, int i)
{
    return i < x->na ? (str){x->a[i], x->al[i]} : (str){"", 0};
}

static bool str_eq(str a, str b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.p, b.p, a.len) == 0);
}

static bool str_is(str a, const char *lit)
{
    return str_eq(a, (str){lit, strlen(lit)});
}

/* ---- replies -------------------------------------------------------------------------------- */

static void set_val(sim_rval *v, sim_rtype type, const char *p, size_t len)
{
    v->type = type;
    v->len = len < SIM_REPLY_TEXT ? len : SIM_REPLY_TEXT - 1;
    if (v->len > 0)
        memcpy(v->str, p, v->len);
    v->str[v->len] = '\0';
}

static void reply_int(sx *x, long long n)
{
    x->out->v.type = SIM_R_INT;
    x->out->v.integer = n;
}

static void reply_nil(sx *x)
{
    x->out->v.type = SIM_R_NIL;
}

static void reply_ok(sx *x)
{
    set_val(&x->out->v, SIM_R_STATUS, "OK", 2);
}

static void reply_bulk(sx *x, const char *p, size_t len)
{
    set_val(&x->out->v, SIM_R_BULK, p, len);
}

/* redis.error_reply(text): the script returns an error. */
static void reply_error(sx *x, const char *fmt, ...)
{
    char text[SIM_REPLY_TEXT];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    set_val(&x->out->v, SIM_R_ERROR, text, n < 0 ? 0 : (size_t)n);
}

/* A Redis call or a Lua operation failed: the script stops with this error, keeping its writes. */
static void raise_error(sx *x, const char *fmt, ...)
{
    if (x->raised)
        return;
    x->raised = true;
    x->out->raised = x->in_script;
    char text[SIM_REPLY_TEXT - 32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (x->in_script)
        reply_error(x, "ERR user_script: %s", text);
    else
        reply_error(x, "%s", text);
}

/* ---- numbers as Lua and Redis read and write them ------------------------------------------- */

/* Lua 5.1's tonumber(s) for a string: strtod, or a hex integer, with blanks around; false when
 * it is not a number (*ok false). */
static double lua_tonumber(str s, bool *ok)
{
    char buf[128];
    size_t n = 0;
    while (n < s.len && n < sizeof(buf) - 1 && s.p[n] != '\0')
        n++;
    *ok = false;
    if (n == sizeof(buf) - 1)
        return 0; /* longer than any number the scripts meet: not one */
    memcpy(buf, s.p, n);
    buf[n] = '\0';
    char *end;
    double v = strtod(buf, &end);
    if (end == buf)
        return 0;
    if (*end == 'x' || *end == 'X')
        v = (double)strtoul(buf, &end, 16);
    while (isspace((unsigned char)*end))
        end++;
    if (*end != '\0')
        return 0;
    *ok = true;
    return v;
}

/* A number passed to redis.call (Redis formats it with %.17g). */
static str num_arg(double v, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%.17g", v);
    return (str){buf, n < 0 ? 0 : (size_t)n};
}

/* Lua's own number to string (a concatenation): %.14g. */
static size_t lua_num_text(double v, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%.14g", v);
    return n < 0 ? 0 : (size_t)n;
}

/* Redis's string2ll: an optional '-', then digits without a leading zero (or "0"). */
static bool redis_ll(str s, long long *out)
{
    if (s.len == 0 || s.len > 20)
        return false;
    if (s.len == 1 && s.p[0] == '0') {
        *out = 0;
        return true;
    }
    size_t i = 0;
    bool neg = s.p[0] == '-';
    i += neg;
    if (i >= s.len || s.p[i] < '1' || s.p[i] > '9')
        return false;
    unsigned long long v = 0;
    for (; i < s.len; i++) {
        if (s.p[i] < '0' || s.p[i] > '9')
            return false;
        unsigned long long d = (unsigned long long)(s.p[i] - '0');
        if (v > (ULLONG_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    if (v > (unsigned long long)LLONG_MAX + neg)
        return false;
    *out = neg ? (long long)(0 - v) : (long long)v;
    return true;
}

/* Redis's parse of a score (ZADD). */
static bool redis_double(str s, double *out)
{
    char buf[128];
    if (s.len == 0 || s.len >= sizeof(buf) || isspace((unsigned char)s.p[0]))
        return false;
    memcpy(buf, s.p, s.len);
    buf[s.len] = '\0';
    char *end;
    double v = strtod(buf, &end);
    if ((size_t)(end - buf) != s.len || isnan(v))
        return false;
    *out = v;
    return true;
}

/* ---- names ---------------------------------------------------------------------------------- */

typedef struct name {
    char p[NAME_MAX_LEN];
    size_t len;
} name;

/* a .. b (.. c): a key's queue, due hash, counter or channel. Raises when too long. */
static bool cat(sx *x, name *out, str a, str b, str c)
{
    if (a.len + b.len + c.len > sizeof(out->p)) {
        raise_error(x, "name too long for the model");
        return false;
    }
    memcpy(out->p, a.p, a.len);
    if (b.len > 0)
        memcpy(out->p + a.len, b.p, b.len);
    if (c.len > 0)
        memcpy(out->p + a.len + b.len, c.p, c.len);
    out->len = a.len + b.len + c.len;
    return true;
}

static str name_str(const name *n)
{
    return (str){n->p, n->len};
}

/* ---- the Redis calls a script makes --------------------------------------------------------- */

/* May the script touch key here (a cluster's master during a migration)? Raises if not. */
static bool touch(sx *x, str key)
{
    if (x->raised)
        return false;
    if (x->h != NULL && x->h->refuse_key != NULL) {
        const char *why = x->h->refuse_key(x->h->ctx, key.p, key.len);
        if (why != NULL) {
            raise_error(x, "%s", why);
            return false;
        }
    }
    return true;
}

/* The live key of type want, NULL when absent; raises (and NULL) on another type. */
static sim_db_key *lookup(sx *x, str key, sim_db_type want)
{
    if (!touch(x, key))
        return NULL;
    sim_db_key *k = sim_db_find(x->db, key.p, key.len, x->now_us);
    if (k != NULL && k->type != want) {
        raise_error(x, "WRONGTYPE Operation against a key holding the wrong kind of value");
        return NULL;
    }
    return k;
}

static void wrote(sx *x)
{
    x->out->wrote = true;
    if (x->db->oom)
        raise_error(x, "OOM in the model");
}

/* GET: into *v (absent: v->absent). */
static void r_get(sx *x, str key, sbuf *v)
{
    v->absent = true;
    v->len = 0;
    sim_db_key *k = lookup(x, key, SIM_DB_STRING);
    if (k == NULL)
        return;
    if (k->value_len >= sizeof(v->p)) {
        raise_error(x, "value too long for the model");
        return;
    }
    v->absent = false;
    v->len = k->value_len;
    memcpy(v->p, k->value, k->value_len);
}

static bool r_exists(sx *x, str key)
{
    if (!touch(x, key))
        return false;
    return sim_db_find(x->db, key.p, key.len, x->now_us) != NULL;
}

/* SET key value PX ttl [NX]: returns whether it set. ttl as Redis reads the argument. */
static bool r_set_px(sx *x, str key, str value, str ttl, bool nx)
{
    if (!touch(x, key))
        return false;
    long long ms;
    if (!redis_ll(ttl, &ms)) {
        raise_error(x, "ERR value is not an integer or out of range");
        return false;
    }
    if (ms <= 0) {
        raise_error(x, "ERR invalid expire time in 'set' command");
        return false;
    }
    if (nx && sim_db_find(x->db, key.p, key.len, x->now_us) != NULL)
        return false;
    sim_db_set(x->db, key.p, key.len, value.p, value.len, x->now_us + (uint64_t)ms * 1000);
    wrote(x);
    return !x->raised;
}

/* SET key value (no expiry): a counter. */
static void r_set(sx *x, str key, str value)
{
    if (!touch(x, key))
        return;
    sim_db_set(x->db, key.p, key.len, value.p, value.len, SIM_DB_PERSIST);
    wrote(x);
}

static void r_del(sx *x, str key)
{
    if (!touch(x, key))
        return;
    sim_db_key *k = sim_db_find(x->db, key.p, key.len, x->now_us);
    if (k != NULL) {
        sim_db_delete(x->db, k);
        wrote(x);
    }
}

/* PEXPIRE key ms: 1 if the key exists (a non-positive ms deletes it), else 0. */
static long long r_pexpire(sx *x, str key, str ms_text)
{
    if (!touch(x, key))
        return 0;
    long long ms;
    if (!redis_ll(ms_text, &ms)) {
        raise_error(x, "ERR value is not an integer or out of range");
        return 0;
    }
    sim_db_key *k = sim_db_find(x->db, key.p, key.len, x->now_us);
    if (k == NULL)
        return 0;
    if (ms <= 0)
        sim_db_delete(x->db, k);
    else
        sim_db_expire(x->db, k, x->now_us + (uint64_t)ms * 1000);
    wrote(x);
    return 1;
}

static long long r_pttl(sx *x, str key)
{
    if (!touch(x, key))
        return 0;
    sim_db_key *k = sim_db_find(x->db, key.p, key.len, x->now_us);
    return k == NULL ? -2 : sim_db_pttl(k, x->now_us);
}

/* HGET: into *v. */
static void r_hget(sx *x, str key, str field, sbuf *v)
{
    v->absent = true;
    v->len = 0;
    sim_db_key *k = lookup(x, key, SIM_DB_HASH);
    const sim_db_item *it = k != NULL ? sim_db_hget(k, field.p, field.len) : NULL;
    if (it == NULL)
        return;
    if (it->value_len >= sizeof(v->p)) {
        raise_error(x, "value too long for the model");
        return;
    }
    v->absent = false;
    v->len = it->value_len;
    memcpy(v->p, it->value, it->value_len);
}

static void r_hset(sx *x, str key, str field, str value)
{
    sim_db_key *k = lookup(x, key, SIM_DB_HASH);
    if (x->raised)
        return;
    if (k == NULL)
        k = sim_db_create(x->db, key.p, key.len, SIM_DB_HASH);
    if (k != NULL)
        sim_db_hset(x->db, k, field.p, field.len, value.p, value.len);
    wrote(x);
}

/* HDEL key field [field2] (field2.p NULL: one field). */
static void r_hdel(sx *x, str key, str field, str field2)
{
    sim_db_key *k = lookup(x, key, SIM_DB_HASH);
    if (k == NULL)
        return;
    bool any = sim_db_hdel(x->db, k, field.p, field.len);
    /* The key may be gone with its last field: look again. */
    k = field2.p != NULL ? sim_db_find(x->db, key.p, key.len, x->now_us) : NULL;
    if (k != NULL)
        any |= sim_db_hdel(x->db, k, field2.p, field2.len);
    if (any)
        wrote(x);
}

static void r_zadd_nx(sx *x, str key, str score_text, str member)
{
    sim_db_key *k = lookup(x, key, SIM_DB_ZSET);
    if (x->raised)
        return;
    double score;
    if (!redis_double(score_text, &score)) {
        raise_error(x, "ERR value is not a valid float");
        return;
    }
    if (k == NULL)
        k = sim_db_create(x->db, key.p, key.len, SIM_DB_ZSET);
    if (k != NULL)
        sim_db_zadd_nx(x->db, k, member.p, member.len, score);
    wrote(x);
}

/* ZRANGE key 0 0: the first member into *v. */
static void r_zfirst(sx *x, str key, sbuf *v)
{
    v->absent = true;
    v->len = 0;
    sim_db_key *k = lookup(x, key, SIM_DB_ZSET);
    if (k == NULL || k->n_items == 0)
        return;
    if (k->items[0].name_len >= sizeof(v->p)) {
        raise_error(x, "member too long for the model");
        return;
    }
    v->absent = false;
    v->len = k->items[0].name_len;
    memcpy(v->p, k->items[0].name, v->len);
}

static void r_zrem(sx *x, str key, str member)
{
    sim_db_key *k = lookup(x, key, SIM_DB_ZSET);
    if (k != NULL && sim_db_zrem(x->db, k, member.p, member.len))
        wrote(x);
}

/* redis.pcall("publish", ch, msg): receivers, or -1 for the error a refusal gives. */
static long long p_publish(sx *x, str ch, str msg)
{
    if (x->raised || x->h == NULL || x->h->publish == NULL)
        return x->raised ? -1 : 0;
    return x->h->publish(x->h->ctx, ch.p, ch.len, msg.p, msg.len);
}

/* ---- fence.lua ------------------------------------------------------------------------------ */

static const char FENCE_BAD[] = "fence counter is not a decimal number";

/* fence_read(ck): the counter's digits into *c (c->absent: none); false (Lua's nil) when it is
 * not a decimal number: c == "0" or c matches ^[1-9]%d*$. */
static bool fence_read(sx *x, str ck, sbuf *c)
{
    r_get(x, ck, c);
    if (x->raised || c->absent)
        return !x->raised;
    if (c->len == 1 && c->p[0] == '0')
        return true;
    if (c->len == 0 || c->p[0] < '1' || c->p[0] > '9')
        return false;
    for (size_t i = 1; i < c->len; i++)
        if (c->p[i] < '0' || c->p[i] > '9')
            return false;
    return true;
}

/* fence_bump(ck, c): ck = c + 1 (c absent: "0"); *old = c as it was ("0" when absent). */
static void fence_bump(sx *x, str ck, const sbuf *c, sbuf *old)
{
    *old = *c;
    if (c->absent) {
        old->absent = false;
        old->len = 1;
        old->p[0] = '0';
    }
    char up[SIM_REPLY_TEXT + 1];
    size_t n = old->len;
    size_t i = n; /* the last digit that is not a 9, counted from 1 (0: all nines) */
    while (i > 0 && old->p[i - 1] == '9')
        i--;
    size_t len = 0;
    if (i > 0) {
        memcpy(up, old->p, i - 1);
        up[i - 1] = (char)(old->p[i - 1] + 1);
        len = i;
    } else {
        up[0] = '1';
        len = 1;
    }
    for (size_t z = 0; z < n - i; z++)
        up[len++] = '0';
    r_set(x, ck, (str){up, len});
}

/* fence_raise(ck, c, f): ck = max(c, f), by length then digit by digit. */
static void fence_raise(sx *x, str ck, const sbuf *c, str f)
{
    bool below = c->absent || c->len < f.len;
    if (!c->absent && c->len == f.len) {
        for (size_t i = 0; i < f.len; i++) {
            unsigned char a = (unsigned char)c->p[i], b = (unsigned char)f.p[i];
            if (a != b) {
                below = a < b;
                break;
            }
        }
    }
    if (below)
        r_set(x, ck, f);
}

/* ---- queue.lua ------------------------------------------------------------------------------ */

/* queue_head(key, me): the head of key's queue into *h (absent: nobody), dropping those whose
 * deadline has passed; me (me.p NULL: none) is the head if first, whatever its deadline. */
static void queue_head(sx *x, str key, str me, sbuf *h)
{
    name q, d;
    if (!cat(x, &q, key, STR(":queue"), STR("")) || !cat(x, &d, key, STR(":queue-due"), STR("")))
        return;
    for (;;) {
        r_zfirst(x, name_str(&q), h);
        if (x->raised || h->absent)
            return;
        str hs = {h->p, h->len};
        if (me.p != NULL && str_eq(hs, me))
            return;
        sbuf due;
        r_hget(x, name_str(&d), hs, &due);
        if (x->raised)
            return;
        bool ok = false;
        double v = due.absent ? 0 : lua_tonumber((str){due.p, due.len}, &ok);
        if (ok && v > x->now)
            return;
        r_zrem(x, name_str(&q), hs);
        name g;
        if (!cat(x, &g, hs, STR(":g"), STR("")))
            return;
        r_hdel(x, name_str(&d), hs, name_str(&g));
        if (x->raised)
            return;
    }
}

/* listens(ch): whether PUBSUB NUMSUB says anybody listens; a refusal reads as nobody (or, broken,
 * raises: SIM_BREAK_NUMSUB_RAISES). */
static bool listens(sx *x, str ch)
{
    if (x->raised)
        return false;
    long long subs =
        x->h != NULL && x->h->numsub != NULL ? x->h->numsub(x->h->ctx, ch.p, ch.len) : 0;
    if (subs < 0 && (x->breaks & SIM_BREAK_NUMSUB_RAISES) != 0) {
        raise_error(x, "attempt to compare number with nil");
        return false;
    }
    return subs > 0;
}

/* ---- the plain scripts ---------------------------------------------------------------------- */

/* extend.lua, and extend_fenced.lua (fenced: KEYS[2] the counter, ARGV[4] the fence). */
static void s_extend(sx *x, bool fenced)
{
    str key = key_of(x, 0), tok = arg_of(x, 0), ttl = arg_of(x, 1);
    sbuf v;
    r_get(x, key, &v);
    if (x->raised)
        return;
    if (!v.absent && str_eq((str){v.p, v.len}, tok)) {
        reply_int(x, r_pexpire(x, key, ttl));
        return;
    }
    if (!v.absent || !str_is(arg_of(x, 2), "1")) {
        reply_int(x, 0);
        return;
    }
    sbuf c;
    if (fenced && !fence_read(x, key_of(x, 1), &c)) {
        if (!x->raised)
            reply_error(x, "%s", FENCE_BAD);
        return;
    }
    r_set_px(x, key, tok, ttl, false);
    if (fenced)
        fence_raise(x, key_of(x, 1), &c, arg_of(x, 3));
    reply_int(x, 1);
}

/* release.lua */
static void s_release(sx *x)
{
    str key = key_of(x, 0), tok = arg_of(x, 0);
    sbuf v;
    r_get(x, key, &v);
    if (x->raised)
        return;
    if (v.absent || !str_eq((str){v.p, v.len}, tok)) {
        reply_int(x, 0);
        return;
    }
    r_del(x, key);
    x->out->freed++;
    if (str_is(arg_of(x, 1), "1"))
        p_publish(x, key, tok);
    reply_int(x, 1);
}

static void elem_string(sim_rval *e, const sbuf *v)
{
    if (v->absent)
        e->type = SIM_R_NIL;
    else
        set_val(e, SIM_R_BULK, v->p, v->len);
}

/* inspect.lua: {GET key, PTTL key, GET counter}. */
static void s_inspect(sx *x)
{
    sbuf v, c;
    r_get(x, key_of(x, 0), &v);
    long long pttl = r_pttl(x, key_of(x, 0));
    r_get(x, key_of(x, 1), &c);
    if (x->raised)
        return;
    sim_reply *o = x->out;
    o->v.type = SIM_R_ARRAY;
    o->n = 3;
    elem_string(&o->elem[0], &v);
    o->elem[1].type = SIM_R_INT;
    o->elem[1].integer = pttl;
    elem_string(&o->elem[2], &c);
}

/* acquire_fenced.lua */
static void s_acquire_fenced(sx *x)
{
    str ck = key_of(x, 1);
    sbuf c, old;
    if (!fence_read(x, ck, &c)) {
        if (!x->raised)
            reply_error(x, "%s", FENCE_BAD);
        return;
    }
    if (!r_set_px(x, key_of(x, 0), arg_of(x, 0), arg_of(x, 1), true)) {
        if (!x->raised)
            reply_nil(x);
        return;
    }
    fence_bump(x, ck, &c, &old);
    if (!x->raised)
        reply_bulk(x, old.p, old.len);
}

/* commit.lua */
static void s_commit(sx *x)
{
    sbuf v, c;
    r_get(x, key_of(x, 0), &v);
    if (x->raised)
        return;
    if (v.absent || !str_eq((str){v.p, v.len}, arg_of(x, 0))) {
        reply_int(x, 0);
        return;
    }
    if (!fence_read(x, key_of(x, 1), &c)) {
        if (!x->raised)
            reply_error(x, "%s", FENCE_BAD);
        return;
    }
    fence_raise(x, key_of(x, 1), &c, arg_of(x, 1));
    reply_int(x, 1);
}

/* ---- the scripts of a set ------------------------------------------------------------------- */

/* acquire_multi.lua */
static void s_acquire_multi(sx *x)
{
    for (int i = 0; i < x->nk; i++) {
        if (r_exists(x, key_of(x, i))) {
            reply_nil(x);
            return;
        }
        if (x->raised)
            return;
    }
    for (int i = 0; i < x->nk && !x->raised; i++)
        r_set_px(x, key_of(x, i), arg_of(x, 0), arg_of(x, 1), false);
    if (!x->raised)
        reply_ok(x);
}

/* extend_multi.lua */
static void s_extend_multi(sx *x)
{
    str tok = arg_of(x, 0);
    bool retake = str_is(arg_of(x, 2), "1");
    for (int i = 0; i < x->nk; i++) {
        sbuf v;
        r_get(x, key_of(x, i), &v);
        if (x->raised)
            return;
        if (!(!v.absent && str_eq((str){v.p, v.len}, tok)) && !(v.absent && retake)) {
            reply_int(x, 0);
            return;
        }
    }
    for (int i = 0; i < x->nk && !x->raised; i++)
        r_set_px(x, key_of(x, i), tok, arg_of(x, 1), false);
    if (!x->raised)
        reply_int(x, 1);
}

/* release_multi.lua */
static void s_release_multi(sx *x)
{
    str tok = arg_of(x, 0);
    bool tell = str_is(arg_of(x, 1), "1");
    int n = 0;
    for (int i = 0; i < x->nk; i++) {
        sbuf v;
        r_get(x, key_of(x, i), &v);
        if (x->raised)
            return;
        if (!v.absent && str_eq((str){v.p, v.len}, tok)) {
            r_del(x, key_of(x, i));
            x->out->freed++;
            if (tell)
                p_publish(x, key_of(x, i), tok);
            n++;
        }
    }
    if (!x->raised)
        reply_int(x, n == x->nk ? 1 : 0);
}

/* inspect_multi.lua */
static void s_inspect_multi(sx *x)
{
    sbuf v;
    r_get(x, key_of(x, 0), &v);
    long long t = r_pttl(x, key_of(x, 0));
    for (int i = 1; i < x->nk; i++) {
        sbuf w;
        r_get(x, key_of(x, i), &w);
        if (x->raised)
            return;
        bool same =
            w.absent == v.absent && (v.absent || str_eq((str){w.p, w.len}, (str){v.p, v.len}));
        if (!same) {
            const char *what = w.absent ? "is free" : v.absent ? "is held" : "holds another value";
            reply_error(x, "resources disagree: resource %d of %d %s (resource 1 %s)", i + 1, x->nk,
                        what, v.absent ? "is free" : "is held");
            return;
        }
        long long p = r_pttl(x, key_of(x, i));
        if (p < t)
            t = p;
    }
    if (x->raised)
        return;
    sim_reply *o = x->out;
    o->v.type = SIM_R_ARRAY;
    o->n = 3;
    elem_string(&o->elem[0], &v);
    o->elem[1].type = SIM_R_INT;
    o->elem[1].integer = t;
    o->elem[2].type = SIM_R_NIL;
}

/* ---- acquire_queued.lua --------------------------------------------------------------------- */

/* One key's part of a lost attempt (the second loop of the script). */
static void queue_in(sx *x, int i, const bool *mine, double place_ttl)
{
    str key = key_of(x, i), me = arg_of(x, 2), tok = arg_of(x, 0);
    name q, d;
    if (!cat(x, &q, key, STR(":queue"), STR("")) || !cat(x, &d, key, STR(":queue-due"), STR("")))
        return;
    char num[64];
    str place = arg_of(x, 3);
    if ((x->breaks & SIM_BREAK_QUEUE_BY_ARRIVAL) != 0)
        place = num_arg(x->now, num, sizeof(num));
    r_zadd_nx(x, name_str(&q), place, me);
    r_hset(x, name_str(&d), me, num_arg(x->now + place_ttl, num, sizeof(num)));
    str stamp = arg_of(x, 5);
    if (stamp.len > 0 && !mine[i]) {
        /* ttl .. ":" .. ARGV[6] .. ":" .. ARGV[7] .. ":" .. (i - 1) .. ":" .. ARGV[8] .. ":" ..
         * #ARGV[9] .. ":" .. ARGV[9] .. tok */
        str ttl = arg_of(x, 1), tag = arg_of(x, 6), fenced = arg_of(x, 7), ch = arg_of(x, 8);
        char rec[NAME_MAX_LEN + SIM_REPLY_TEXT];
        char j[32], clen[32];
        lua_num_text((double)i, j, sizeof(j));
        lua_num_text((double)ch.len, clen, sizeof(clen));
        int n = snprintf(rec, sizeof(rec), "%.*s:%.*s:%.*s:%s:%.*s:%s:", (int)ttl.len, ttl.p,
                         (int)stamp.len, stamp.p, (int)tag.len, tag.p, j, (int)fenced.len, fenced.p,
                         clen);
        if (n < 0 || (size_t)n + ch.len + tok.len > sizeof(rec)) {
            raise_error(x, "record too long for the model");
            return;
        }
        memcpy(rec + n, ch.p, ch.len);
        memcpy(rec + n + ch.len, tok.p, tok.len);
        name field;
        if (!cat(x, &field, me, STR(":g"), STR("")))
            return;
        r_hset(x, name_str(&d), name_str(&field), (str){rec, (size_t)n + ch.len + tok.len});
    }
    if (x->raised)
        return;
    if ((double)r_pttl(x, name_str(&q)) < place_ttl) {
        str ms = num_arg(place_ttl, num, sizeof(num));
        r_pexpire(x, name_str(&q), ms);
        r_pexpire(x, name_str(&d), ms);
    }
}

static void s_acquire_queued(sx *x)
{
    str tok = arg_of(x, 0), ttl = arg_of(x, 1), me = arg_of(x, 2);
    bool fenced = str_is(arg_of(x, 7), "1");
    name ck;
    sbuf c;
    if (fenced) {
        if (!cat(x, &ck, key_of(x, 0), STR(":fence"), STR("")))
            return;
        if (!fence_read(x, name_str(&ck), &c)) {
            if (!x->raised)
                reply_error(x, "%s", FENCE_BAD);
            return;
        }
    }
    bool mine[64];
    if (x->nk > 64) {
        raise_error(x, "too many keys for the model");
        return;
    }
    bool is_free = true;
    double wait = 0;
    for (int i = 0; i < x->nk; i++) {
        str key = key_of(x, i);
        sbuf v;
        r_get(x, key, &v);
        if (x->raised)
            return;
        mine[i] = !v.absent && str_eq((str){v.p, v.len}, tok);
        if (mine[i])
            continue;
        sbuf h;
        queue_head(x, key, me, &h);
        if (x->raised)
            return;
        if (v.absent && (h.absent || str_eq((str){h.p, h.len}, me)))
            continue;
        is_free = false;
        double left;
        if (!v.absent) {
            left = (double)r_pttl(x, key);
        } else {
            /* tonumber(redis.call("hget", KEYS[i] .. ":queue-due", h)) - now */
            name d;
            sbuf due;
            if (!cat(x, &d, key, STR(":queue-due"), STR("")))
                return;
            r_hget(x, name_str(&d), (str){h.p, h.len}, &due);
            bool ok = false;
            double dv = due.absent ? 0 : lua_tonumber((str){due.p, due.len}, &ok);
            if (!ok) {
                raise_error(x, "attempt to perform arithmetic on a nil value");
                return;
            }
            left = dv - x->now;
        }
        if (x->raised)
            return;
        if (left < 0 || wait < 0)
            wait = -1;
        else if (left > wait)
            wait = left;
    }
    if (is_free) {
        for (int i = 0; i < x->nk && !x->raised; i++)
            r_set_px(x, key_of(x, i), tok, ttl, false);
        if (x->raised)
            return;
        if (fenced) {
            sbuf old;
            fence_bump(x, name_str(&ck), &c, &old);
            if (!x->raised)
                reply_bulk(x, old.p, old.len);
            return;
        }
        reply_ok(x);
        return;
    }
    bool ok = false;
    double place_ttl = lua_tonumber(arg_of(x, 4), &ok);
    if (!ok) {
        raise_error(x, "attempt to perform arithmetic on a nil value");
        return;
    }
    for (int i = 0; i < x->nk && !x->raised; i++)
        queue_in(x, i, mine, place_ttl);
    if (!x->raised)
        reply_int(x, (long long)wait);
}

/* ---- release_queued.lua --------------------------------------------------------------------- */

/* A grant record's fields: "^(%d+):(%d+):(%d+):(%d+):([01]):(%d+):(.*)$". */
typedef struct record {
    double ttl;
    str stamp, tag, j, ch, token;
    bool fenced;
} record;

/* The next run of digits then ':' from *p (at least one digit). */
static bool rec_digits(const char **p, const char *end, str *out)
{
    const char *s = *p;
    while (s < end && *s >= '0' && *s <= '9')
        s++;
    if (s == *p || s == end || *s != ':')
        return false;
    *out = (str){*p, (size_t)(s - *p)};
    *p = s + 1;
    return true;
}

static bool parse_record(str g, record *r)
{
    const char *p = g.p, *end = g.p + g.len;
    str ttl, fenced, clen;
    if (!rec_digits(&p, end, &ttl) || !rec_digits(&p, end, &r->stamp) ||
        !rec_digits(&p, end, &r->tag) || !rec_digits(&p, end, &r->j))
        return false;
    if (end - p < 2 || (p[0] != '0' && p[0] != '1') || p[1] != ':')
        return false;
    fenced = (str){p, 1};
    p += 2;
    if (!rec_digits(&p, end, &clen))
        return false;
    bool ok;
    r->ttl = lua_tonumber(ttl, &ok);
    double n = lua_tonumber(clen, &ok);
    size_t rest = (size_t)(end - p);
    size_t cl = n < (double)rest ? (size_t)n : rest;
    r->ch = (str){p, cl};
    r->token = (str){p + cl, rest - cl};
    r->fenced = fenced.p[0] == '1';
    return true;
}

/* grant(key, h, r): set key for head h as its record says, if h listens. */
static bool grant(sx *x, str key, str h, const record *r)
{
    if (!listens(x, r->ch))
        return false;
    name ck, d;
    if (!cat(x, &ck, key, STR(":fence"), STR("")) || !cat(x, &d, key, STR(":queue-due"), STR("")))
        return false;
    sbuf c = {.absent = false, .len = 0};
    if (r->fenced && !fence_read(x, name_str(&ck), &c))
        return false;
    sbuf due;
    r_hget(x, name_str(&d), h, &due);
    if (x->raised)
        return false;
    bool ok = false;
    double dv = due.absent ? 0 : lua_tonumber((str){due.p, due.len}, &ok);
    if (!ok) {
        raise_error(x, "attempt to perform arithmetic on a nil value");
        return false;
    }
    double left = dv - x->now;
    bool full = r->ttl <= left || (x->breaks & SIM_BREAK_GRANT_FULL_TTL) != 0;
    char num[64];
    r_set_px(x, key, r->token, num_arg(full ? r->ttl : left, num, sizeof(num)), false);
    name field;
    if (!cat(x, &field, h, STR(":g"), STR("")))
        return false;
    r_hdel(x, name_str(&d), name_str(&field), (str){NULL, 0});
    sbuf counter = c; /* "" unless fenced */
    if (r->fenced)
        fence_bump(x, name_str(&ck), &c, &counter);
    if (x->raised)
        return false;
    char msg[NAME_MAX_LEN + SIM_REPLY_TEXT];
    int n = snprintf(msg, sizeof(msg), "g:%.*s:%.*s:%.*s:%c:%.*s:%.*s", (int)r->stamp.len,
                     r->stamp.p, (int)r->tag.len, r->tag.p, (int)r->j.len, r->j.p, full ? '1' : '0',
                     (int)counter.len, counter.p, (int)r->token.len, r->token.p);
    size_t msg_len = n < 0 ? 0 : (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1;
    p_publish(x, r->ch, (str){msg, msg_len});
    return true;
}

/* hand_on(key): key was deleted: hand it to its queue's head, or tell. */
static void hand_on(sx *x, str key, str tok, bool tell)
{
    sbuf h;
    queue_head(x, key, (str){NULL, 0}, &h);
    if (x->raised)
        return;
    if (h.absent) {
        if (tell)
            p_publish(x, key, tok);
        return;
    }
    str hs = {h.p, h.len};
    name ch, d, field;
    if (!cat(x, &ch, key, STR(":queue:"), hs) || !cat(x, &d, key, STR(":queue-due"), STR("")) ||
        !cat(x, &field, hs, STR(":g"), STR("")))
        return;
    sbuf g;
    r_hget(x, name_str(&d), name_str(&field), &g);
    if (x->raised)
        return;
    record r;
    if (!g.absent && parse_record((str){g.p, g.len}, &r)) {
        /* r points into g, a copy: it stays while the grant writes */
        if (grant(x, key, hs, &r) || x->raised)
            return;
        if (!cat(x, &ch, r.ch, STR(""), STR("")))
            return;
    }
    if (!tell)
        return;
    char msg[SIM_REPLY_TEXT + 8];
    int n = snprintf(msg, sizeof(msg), "w:%.*s", (int)tok.len, tok.p);
    long long told = p_publish(x, name_str(&ch), (str){msg, (size_t)n});
    if (told <= 0) {
        name qch;
        if (!cat(x, &qch, key, STR(":queue"), STR("")))
            return;
        n = snprintf(msg, sizeof(msg), "%.*s:%.*s", (int)h.len, h.p, (int)tok.len, tok.p);
        p_publish(x, name_str(&qch), (str){msg, (size_t)n});
    }
}

static void s_release_queued(sx *x)
{
    str tok = arg_of(x, 0), me = arg_of(x, 1);
    bool leave = str_is(arg_of(x, 2), "1"), tell = str_is(arg_of(x, 3), "1");
    int n = 0;
    for (int i = 0; i < x->nk && !x->raised; i++) {
        str key = key_of(x, i);
        name q, d, field;
        if (!cat(x, &q, key, STR(":queue"), STR("")) ||
            !cat(x, &d, key, STR(":queue-due"), STR("")) || !cat(x, &field, me, STR(":g"), STR("")))
            return;
        if (me.len > 0) {
            if (leave) {
                r_zrem(x, name_str(&q), me);
                r_hdel(x, name_str(&d), me, (str){NULL, 0});
            }
            r_hdel(x, name_str(&d), name_str(&field), (str){NULL, 0});
        }
        sbuf v;
        r_get(x, key, &v);
        if (x->raised)
            return;
        if (!v.absent && str_eq((str){v.p, v.len}, tok)) {
            r_del(x, key);
            x->out->freed++;
            n++;
            hand_on(x, key, tok, tell);
        }
    }
    if (!x->raised)
        reply_int(x, n == x->nk ? 1 : 0);
}

/* ---- dispatch ------------------------------------------------------------------------------- */

typedef void (*script_fn)(sx *x);

static void s_extend_plain(sx *x)
{
    s_extend(x, false);
}

static void s_extend_fenced(sx *x)
{
    s_extend(x, true);
}

static const struct {
    const redlock__script *script;
    script_fn fn;
} models[] = {
    {&redlock__script_extend, s_extend_plain},
    {&redlock__script_release, s_release},
    {&redlock__script_inspect, s_inspect},
    {&redlock__script_acquire_fenced, s_acquire_fenced},
    {&redlock__script_commit, s_commit},
    {&redlock__script_extend_fenced, s_extend_fenced},
    {&redlock__script_acquire_multi, s_acquire_multi},
    {&redlock__script_extend_multi, s_extend_multi},
    {&redlock__script_release_multi, s_release_multi},
    {&redlock__script_inspect_multi, s_inspect_multi},
    {&redlock__script_acquire_queued, s_acquire_queued},
    {&redlock__script_release_queued, s_release_queued},
};

static script_fn find_model(str which, bool by_source)
{
    for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
        const redlock__script *s = models[i].script;
        str id = by_source ? (str){s->source, s->source_len} : (str){s->sha1, 40};
        if (by_source ? str_eq(which, id)
                      : which.len == 40 && strncasecmp(which.p, s->sha1, 40) == 0)
            return models[i].fn;
    }
    return NULL;
}

static bool word_is(const char *p, size_t len, const char *w)
{
    return len == strlen(w) && strncasecmp(p, w, len) == 0;
}

/* SET key value NX PX ttl: the plain acquire. */
static void c_set(sx *x, int argc, const char *const *argv, const size_t *lens)
{
    if (argc != 6 || !word_is(argv[3], lens[3], "NX") || !word_is(argv[4], lens[4], "PX")) {
        reply_error(x, "ERR the model runs only SET key value NX PX ttl");
        return;
    }
    if (r_set_px(x, (str){argv[1], lens[1]}, (str){argv[2], lens[2]}, (str){argv[5], lens[5]},
                 true))
        reply_ok(x);
    else if (!x->raised) /* an error is the reply already */
        reply_nil(x);
}

void sim_server_exec(sim_db *db, uint64_t now_us, const sim_server_hooks *hooks, unsigned breaks,
                     int argc, const char *const *argv, const size_t *lens, sim_reply *out)
{
    memset(out, 0, sizeof(*out));
    sx x = {.db = db, .now_us = now_us, .h = hooks, .breaks = breaks, .out = out};
    /* local t = redis.call("time"); now = t[1] * 1000 + math.floor(t[2] / 1000) */
    x.now = (double)(now_us / 1000000) * 1000 + (double)(now_us % 1000000 / 1000);
    if (argc >= 1 && word_is(argv[0], lens[0], "SET")) {
        c_set(&x, argc, argv, lens);
        return;
    }
    bool eval = argc >= 1 && word_is(argv[0], lens[0], "EVAL");
    if (argc < 3 || (!eval && !word_is(argv[0], lens[0], "EVALSHA"))) {
        reply_error(&x, "ERR unknown command for the model");
        return;
    }
    script_fn fn = find_model((str){argv[1], lens[1]}, eval);
    long long nk;
    if (fn == NULL) {
        reply_error(&x, "NOSCRIPT No matching script. Please use EVAL.");
        return;
    }
    if (!redis_ll((str){argv[2], lens[2]}, &nk) || nk < 0 || nk > argc - 3) {
        reply_error(&x, "ERR Number of keys can't be greater than number of args");
        return;
    }
    x.nk = (int)nk;
    x.k = argv + 3;
    x.kl = lens + 3;
    x.na = argc - 3 - (int)nk;
    x.a = argv + 3 + nk;
    x.al = lens + 3 + nk;
    x.in_script = true;
    fn(&x);
}

int sim_command_keys(int argc, const char *const *argv, const size_t *lens, const char **keys,
                     size_t *key_lens, int max)
{
    if (argc >= 2 && word_is(argv[0], lens[0], "SET") && max >= 1) {
        keys[0] = argv[1];
        key_lens[0] = lens[1];
        return 1;
    }
    long long nk;
    if (argc < 3 || !redis_ll((str){argv[2], lens[2]}, &nk) || nk < 0 || nk > argc - 3)
        return 0;
    int n = (int)(nk < max ? nk : max);
    for (int i = 0; i < n; i++) {
        keys[i] = argv[3 + i];
        key_lens[i] = lens[3 + i];
    }
    return n;
}

/* ---- RESP ----------------------------------------------------------------------------------- */

/* A "<type><decimal>\r\n" header at *p; advances past it. */
static bool resp_header(const char **p, const char *end, char type, size_t *n)
{
    const char *s = *p;
    if (s >= end || *s != type)
        return false;
    s++;
    size_t v = 0;
    const char *digits = s;
    while (s < end && *s >= '0' && *s <= '9')
        v = v * 10 + (size_t)(*s++ - '0');
    if (s == digits || end - s < 2 || s[0] != '\r' || s[1] != '\n')
        return false;
    *n = v;
    *p = s + 2;
    return true;
}

int sim_resp_argv(const char *buf, size_t len, const char **argv, size_t *lens, int max)
{
    const char *p = buf, *end = buf + len;
    size_t n;
    if (!resp_header(&p, end, '*', &n) || n > (size_t)max)
        return -1;
    for (size_t i = 0; i < n; i++) {
        size_t l;
        if (!resp_header(&p, end, '$', &l) || (size_t)(end - p) < l + 2 || p[l] != '\r' ||
            p[l + 1] != '\n')
            return -1;
        argv[i] = p;
        lens[i] = l;
        p += l + 2;
    }
    return p == end ? (int)n : -1;
}

static void to_redis(const sim_rval *v, redisReply *r)
{
    memset(r, 0, sizeof(*r));
    switch (v->type) {
    case SIM_R_NIL:
        r->type = REDIS_REPLY_NIL;
        break;
    case SIM_R_STATUS:
        r->type = REDIS_REPLY_STATUS;
        break;
    case SIM_R_ERROR:
        r->type = REDIS_REPLY_ERROR;
        break;
    case SIM_R_INT:
        r->type = REDIS_REPLY_INTEGER;
        r->integer = v->integer;
        break;
    case SIM_R_BULK:
        r->type = REDIS_REPLY_STRING;
        break;
    case SIM_R_ARRAY:
        r->type = REDIS_REPLY_ARRAY;
        break;
    }
    if (v->type == SIM_R_STATUS || v->type == SIM_R_ERROR || v->type == SIM_R_BULK) {
        r->str = (char *)v->str;
        r->len = v->len;
    }
}

void sim_reply_to_redis(const sim_reply *reply, redisReply *out, redisReply elems[3],
                        redisReply *ptrs[3])
{
    to_redis(&reply->v, out);
    if (reply->v.type != SIM_R_ARRAY)
        return;
    for (unsigned i = 0; i < reply->n && i < 3; i++) {
        to_redis(&reply->elem[i], &elems[i]);
        ptrs[i] = &elems[i];
    }
    out->elements = reply->n;
    out->element = ptrs;
}
