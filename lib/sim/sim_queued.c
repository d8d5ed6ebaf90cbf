/* SPDX-License-Identifier: MIT */
/* sim_queued.c - the C models of the waiters' scripts: queue.lua, acquire_queued.lua and
 * release_queued.lua (sim_scripts.h), line by line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_calls.h"

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
        /* ttl .. ":" .. ARGV[6] .. ":" .. ARGV[7] .. ":" .. (i - 1) .. ":" .. ARGV[8], then for
         * "2" ":" .. #ck .. ":" .. ck, then ":" .. #ARGV[9] .. ":" .. ARGV[9] .. tok */
        str ttl = arg_of(x, 1), tag = arg_of(x, 6), fenced = arg_of(x, 7), ch = arg_of(x, 8);
        str ck = str_is(fenced, "2") ? arg_of(x, 9) : (str){"", 0};
        char rec[2 * NAME_MAX_LEN + SIM_REPLY_TEXT];
        char j[32], clen[32], klen[32];
        lua_num_text((double)i, j, sizeof(j));
        lua_num_text((double)ch.len, clen, sizeof(clen));
        lua_num_text((double)ck.len, klen, sizeof(klen));
        int n =
            snprintf(rec, sizeof(rec), "%.*s:%.*s:%.*s:%s:%.*s", (int)ttl.len, ttl.p,
                     (int)stamp.len, stamp.p, (int)tag.len, tag.p, j, (int)fenced.len, fenced.p);
        if (n >= 0 && str_is(fenced, "2") && (size_t)n + ck.len + 32 < sizeof(rec))
            n += snprintf(rec + n, sizeof(rec) - (size_t)n, ":%s:%.*s", klen, (int)ck.len, ck.p);
        if (n >= 0 && (size_t)n + 32 < sizeof(rec))
            n += snprintf(rec + n, sizeof(rec) - (size_t)n, ":%s:", clen);
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

void s_acquire_queued(sx *x)
{
    str tok = arg_of(x, 0), ttl = arg_of(x, 1), me = arg_of(x, 2);
    /* local fenced = ARGV[8] == "1" or ARGV[8] == "2"; local ck = KEYS[1] .. ":fence", or
     * ARGV[10] for "2" */
    bool fenced = str_is(arg_of(x, 7), "1") || str_is(arg_of(x, 7), "2");
    name ck;
    if (!cat(x, &ck, key_of(x, 0), STR(":fence"), STR("")))
        return;
    if (str_is(arg_of(x, 7), "2") && !cat(x, &ck, arg_of(x, 9), STR(""), STR("")))
        return;
    sbuf c;
    if (fenced) {
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

/* A grant record's fields: "^(%d+):(%d+):(%d+):(%d+):([012]):(.*)$", for "2" the counter's
 * "^(%d+):" and as many bytes and ":" after them, then "^(%d+):(.*)$". */
typedef struct record {
    double ttl;
    str stamp, tag, j, ch, token;
    bool fenced;
    bool has_ck; /* a fence domain's counter, ck ("2") */
    str ck;
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
    if (end - p < 2 || p[0] < '0' || p[0] > '2' || p[1] != ':')
        return false;
    fenced = (str){p, 1};
    p += 2;
    r->has_ck = fenced.p[0] == '2';
    if (r->has_ck) {
        /* if string.sub(after, klen + 1, klen + 1) ~= ":" then return nil end */
        str klen;
        bool ok;
        if (!rec_digits(&p, end, &klen))
            return false;
        double k = lua_tonumber(klen, &ok);
        if (!(k < (double)(end - p)) || p[(size_t)k] != ':')
            return false;
        r->ck = (str){p, (size_t)k};
        p += (size_t)k + 1;
    }
    if (!rec_digits(&p, end, &clen))
        return false;
    bool ok;
    r->ttl = lua_tonumber(ttl, &ok);
    double n = lua_tonumber(clen, &ok);
    size_t rest = (size_t)(end - p);
    size_t cl = n < (double)rest ? (size_t)n : rest;
    r->ch = (str){p, cl};
    r->token = (str){p + cl, rest - cl};
    r->fenced = fenced.p[0] != '0';
    return true;
}

bool sim_grant_record_parse(const char *value, size_t len, sim_grant_record *out)
{
    record r = {0};
    if (!parse_record((str){value, len}, &r))
        return false;
    *out = (sim_grant_record){.ttl = r.ttl, .fenced = r.fenced, .has_ck = r.has_ck};
    out->stamp = r.stamp.p, out->stamp_len = r.stamp.len;
    out->tag = r.tag.p, out->tag_len = r.tag.len;
    out->j = r.j.p, out->j_len = r.j.len;
    out->ck = r.ck.p, out->ck_len = r.ck.len;
    out->ch = r.ch.p, out->ch_len = r.ch.len;
    out->token = r.token.p, out->token_len = r.token.len;
    return true;
}

/* grant(key, h, r): set key for head h as its record says, if h listens. */
static bool grant(sx *x, str key, str h, const record *r)
{
    if (!listens(x, r->ch))
        return false;
    /* local ck = r.ck or key .. ":fence" */
    name ck, d;
    if (!cat(x, &ck, r->has_ck ? r->ck : key, r->has_ck ? STR("") : STR(":fence"), STR("")) ||
        !cat(x, &d, key, STR(":queue-due"), STR("")))
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

void s_release_queued(sx *x)
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
