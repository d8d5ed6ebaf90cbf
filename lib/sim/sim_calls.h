/* SPDX-License-Identifier: MIT */
/* sim_calls.h - what the C models of the scripts (sim_scripts.c, sim_queued.c) are made of: a
 * script's run (its KEYS, ARGV, clock, server and reply), the Redis calls it makes with their
 * errors (a failed redis.call raises: the run stops there and keeps what it wrote), Lua's and
 * Redis's numbers, and fence.lua. Internal to the models (sim_calls.c). */
#ifndef SIM_CALLS_H
#define SIM_CALLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim_scripts.h"

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

typedef struct name {
    char p[NAME_MAX_LEN];
    size_t len;
} name;

/* KEYS[i + 1] (a key the script was not given raises), ARGV[i + 1] ("" when absent). */
str key_of(sx *x, int i);
str arg_of(const sx *x, int i);
bool str_eq(str a, str b);
bool str_is(str a, const char *lit);

/* The reply; a returned error (redis.error_reply), or one raised by a call or Lua itself. */
void set_val(sim_rval *v, sim_rtype type, const char *p, size_t len);
void reply_int(sx *x, long long n);
void reply_nil(sx *x);
void reply_ok(sx *x);
void reply_bulk(sx *x, const char *p, size_t len);
void reply_error(sx *x, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void raise_error(sx *x, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Numbers: Lua's tonumber and its own formatting, a number passed to redis.call, Redis's
 * integers. */
double lua_tonumber(str s, bool *ok);
str num_arg(double v, char *buf, size_t cap);
size_t lua_num_text(double v, char *buf, size_t cap);
bool redis_ll(str s, long long *out);

/* a .. b .. c into out (raises when too long). */
bool cat(sx *x, name *out, str a, str b, str c);
str name_str(const name *n);

/* The Redis calls: GET, EXISTS, SET (PX, NX), DEL, PEXPIRE, PTTL, HGET, HSET, HDEL (one or two
 * fields: field2.p NULL for one), ZADD NX, ZRANGE 0 0, ZREM; and redis.pcall("publish") (-1: the
 * error a refusal gives). */
void r_get(sx *x, str key, sbuf *v);
bool r_exists(sx *x, str key);
bool r_set_px(sx *x, str key, str value, str ttl, bool nx);
void r_set(sx *x, str key, str value);
void r_del(sx *x, str key);
long long r_pexpire(sx *x, str key, str ms_text);
long long r_pttl(sx *x, str key);
void r_hget(sx *x, str key, str field, sbuf *v);
void r_hset(sx *x, str key, str field, str value);
void r_hdel(sx *x, str key, str field, str field2);
void r_zadd_nx(sx *x, str key, str score_text, str member);
void r_zfirst(sx *x, str key, sbuf *v);
void r_zrem(sx *x, str key, str member);
long long p_publish(sx *x, str ch, str msg);

/* fence.lua: read (false: not a decimal number; c->absent: none), bump, raise. */
extern const char FENCE_BAD[];
bool fence_read(sx *x, str ck, sbuf *c);
void fence_bump(sx *x, str ck, const sbuf *c, sbuf *old);
void fence_raise(sx *x, str ck, const sbuf *c, str f);

/* The queued scripts (sim_queued.c). */
void s_acquire_queued(sx *x);
void s_release_queued(sx *x);

#endif
