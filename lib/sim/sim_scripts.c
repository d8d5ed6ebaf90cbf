/* SPDX-License-Identifier: MIT */
/* sim_scripts.c - the C models of the library's commands (sim_scripts.h): SET NX PX, the plain
 * and the set scripts, and the dispatch of a command to its model (the waiters' scripts are
 * sim_queued.c's; the calls they are made of, sim_calls.c's).
 *
 * Each model is its script of lib/core/lua/ line by line; the Lua is quoted where a line is not
 * obvious. A Redis call inside a script that fails (a key of the wrong type, a bad number, a key
 * a cluster's master may not touch) raises, as redis.call does: the script stops there and keeps
 * what it wrote (sx.raised; every step checks it first). */
#include "sim_scripts.h"

#include <string.h>
#include <strings.h>

#include "scripts.h"
#include "sim_calls.h"

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
    reply_int(x, 2); /* set anew */
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
    bool anew = false;
    for (int i = 0; i < x->nk; i++) {
        sbuf v;
        r_get(x, key_of(x, i), &v);
        if (x->raised)
            return;
        if (v.absent && retake) {
            anew = true;
        } else if (!(!v.absent && str_eq((str){v.p, v.len}, tok))) {
            reply_int(x, 0);
            return;
        }
    }
    for (int i = 0; i < x->nk && !x->raised; i++)
        r_set_px(x, key_of(x, i), tok, arg_of(x, 1), false);
    if (!x->raised)
        reply_int(x, anew ? 2 : 1);
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

/* Each model by its script's name (lib/core/lua/<name>.lua); the scripts themselves (their
 * SHA-1s and sources) are the library's, which the caller hands over (sim_server_hooks). */
static const struct {
    const char *name;
    script_fn fn;
} models[] = {
    {"extend", s_extend_plain},
    {"release", s_release},
    {"inspect", s_inspect},
    {"acquire_fenced", s_acquire_fenced},
    {"commit", s_commit},
    {"extend_fenced", s_extend_fenced},
    {"acquire_multi", s_acquire_multi},
    {"extend_multi", s_extend_multi},
    {"release_multi", s_release_multi},
    {"inspect_multi", s_inspect_multi},
    {"acquire_queued", s_acquire_queued},
    {"release_queued", s_release_queued},
};

static script_fn model_named(const char *script_name)
{
    for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++)
        if (strcmp(models[i].name, script_name) == 0)
            return models[i].fn;
    return NULL;
}

static script_fn find_model(const sim_server_hooks *hooks, str which, bool by_source)
{
    for (unsigned i = 0; i < hooks->n_scripts; i++) {
        const redlock__script *s = hooks->scripts[i];
        str id = by_source ? (str){s->source, s->source_len} : (str){s->sha1, 40};
        if (by_source ? str_eq(which, id)
                      : which.len == 40 && strncasecmp(which.p, s->sha1, 40) == 0)
            return model_named(s->name);
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
    if (argc == 1 && word_is(argv[0], lens[0], "TIME")) { /* the library's probe: seconds, us */
        out->v.type = SIM_R_ARRAY;
        out->n = 2;
        out->elem[0].type = out->elem[1].type = SIM_R_BULK;
        out->elem[0].len = (size_t)snprintf(out->elem[0].str, sizeof(out->elem[0].str), "%llu",
                                            (unsigned long long)(now_us / 1000000));
        out->elem[1].len = (size_t)snprintf(out->elem[1].str, sizeof(out->elem[1].str), "%llu",
                                            (unsigned long long)(now_us % 1000000));
        return;
    }
    bool eval = argc >= 1 && word_is(argv[0], lens[0], "EVAL");
    if (argc < 3 || (!eval && !word_is(argv[0], lens[0], "EVALSHA"))) {
        reply_error(&x, "ERR unknown command for the model");
        return;
    }
    script_fn fn = find_model(hooks, (str){argv[1], lens[1]}, eval);
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
