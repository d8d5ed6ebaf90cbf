/* SPDX-License-Identifier: MIT */
/* sim_calls.c - the Redis calls a script's model makes, with their errors, Lua's and Redis's
 * numbers, and fence.lua (sim_calls.h). */
#include "sim_calls.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* KEYS[i + 1]; a script that names a key it was not given fails, as redis.call(nil) does. */
str key_of(sx *x, int i)
{
    if (i >= x->nk) {
        raise_error(x, "Lua redis() command arguments must be strings or integers");
        return (str){"", 0};
    }
    return (str){x->k[i], x->kl[i]};
}

str arg_of(const sx *x, int i)
{
    return i < x->na ? (str){x->a[i], x->al[i]} : (str){"", 0};
}

bool str_eq(str a, str b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.p, b.p, a.len) == 0);
}

bool str_is(str a, const char *lit)
{
    return str_eq(a, (str){lit, strlen(lit)});
}

/* ---- replies -------------------------------------------------------------------------------- */

void set_val(sim_rval *v, sim_rtype type, const char *p, size_t len)
{
    v->type = type;
    v->len = len < SIM_REPLY_TEXT ? len : SIM_REPLY_TEXT - 1;
    if (v->len > 0)
        memcpy(v->str, p, v->len);
    v->str[v->len] = '\0';
}

void reply_int(sx *x, long long n)
{
    x->out->v.type = SIM_R_INT;
    x->out->v.integer = n;
}

void reply_nil(sx *x)
{
    x->out->v.type = SIM_R_NIL;
}

void reply_ok(sx *x)
{
    set_val(&x->out->v, SIM_R_STATUS, "OK", 2);
}

void reply_bulk(sx *x, const char *p, size_t len)
{
    set_val(&x->out->v, SIM_R_BULK, p, len);
}

/* redis.error_reply(text): the script returns an error. */
void reply_error(sx *x, const char *fmt, ...)
{
    char text[SIM_REPLY_TEXT];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    set_val(&x->out->v, SIM_R_ERROR, text, n < 0 ? 0 : (size_t)n);
}

/* A Redis call or a Lua operation failed: the script stops with this error, keeping its writes. */
void raise_error(sx *x, const char *fmt, ...)
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
double lua_tonumber(str s, bool *ok)
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
str num_arg(double v, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%.17g", v);
    return (str){buf, n < 0 ? 0 : (size_t)n};
}

/* Lua's own number to string (a concatenation): %.14g. */
size_t lua_num_text(double v, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%.14g", v);
    return n < 0 ? 0 : (size_t)n;
}

/* Redis's string2ll: an optional '-', then digits without a leading zero (or "0"). */
bool redis_ll(str s, long long *out)
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

/* a .. b (.. c): a key's queue, due hash, counter or channel. Raises when too long. */
bool cat(sx *x, name *out, str a, str b, str c)
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

str name_str(const name *n)
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
void r_get(sx *x, str key, sbuf *v)
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

bool r_exists(sx *x, str key)
{
    if (!touch(x, key))
        return false;
    return sim_db_find(x->db, key.p, key.len, x->now_us) != NULL;
}

/* SET key value PX ttl [NX]: returns whether it set. ttl as Redis reads the argument. */
bool r_set_px(sx *x, str key, str value, str ttl, bool nx)
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
void r_set(sx *x, str key, str value)
{
    if (!touch(x, key))
        return;
    sim_db_set(x->db, key.p, key.len, value.p, value.len, SIM_DB_PERSIST);
    wrote(x);
}

void r_del(sx *x, str key)
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
long long r_pexpire(sx *x, str key, str ms_text)
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

long long r_pttl(sx *x, str key)
{
    if (!touch(x, key))
        return 0;
    sim_db_key *k = sim_db_find(x->db, key.p, key.len, x->now_us);
    return k == NULL ? -2 : sim_db_pttl(k, x->now_us);
}

/* HGET: into *v. */
void r_hget(sx *x, str key, str field, sbuf *v)
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

void r_hset(sx *x, str key, str field, str value)
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
void r_hdel(sx *x, str key, str field, str field2)
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

void r_zadd_nx(sx *x, str key, str score_text, str member)
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
void r_zfirst(sx *x, str key, sbuf *v)
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

void r_zrem(sx *x, str key, str member)
{
    sim_db_key *k = lookup(x, key, SIM_DB_ZSET);
    if (k != NULL && sim_db_zrem(x->db, k, member.p, member.len))
        wrote(x);
}

/* redis.pcall("publish", ch, msg): receivers, or -1 for the error a refusal gives. */
long long p_publish(sx *x, str ch, str msg)
{
    if (x->raised || x->h == NULL || x->h->publish == NULL)
        return x->raised ? -1 : 0;
    return x->h->publish(x->h->ctx, ch.p, ch.len, msg.p, msg.len);
}

/* ---- fence.lua ------------------------------------------------------------------------------ */

const char FENCE_BAD[] = "fence counter is not a decimal number";

/* fence_read(ck): the counter's digits into *c (c->absent: none); false (Lua's nil) when it is
 * not a decimal number: c == "0" or c matches ^[1-9]%d*$. */
bool fence_read(sx *x, str ck, sbuf *c)
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
void fence_bump(sx *x, str ck, const sbuf *c, sbuf *old)
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
void fence_raise(sx *x, str ck, const sbuf *c, str f)
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
