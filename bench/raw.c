/* raw.c - see raw.h. */
#include "raw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "redlock.h"
#include "stats.h"

#define RELEASE_LUA                                                                                \
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"

struct raw {
    uv_loop_t *loop;
    unsigned n;
    unsigned ready;
    unsigned failed;
    char sha[41];
    uint64_t next_token;
    redisAsyncContext *ctx[REDLOCK_MAX_NODES];
};

typedef struct cycle {
    raw *r;
    raw_done_cb cb;
    void *data;
    unsigned pending;
    uint64_t start_us, set_us;
    char token[24];
    char key[];
} cycle;

static void on_setup_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
    raw *r = privdata;
    redisReply *rep = reply;
    (void)ac;
    if (rep == NULL || rep->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "redlock-bench: raw setup: %s\n", rep != NULL ? rep->str : "no reply");
        r->failed++;
    } else if (rep->type == REDIS_REPLY_STRING && rep->len == 40) {
        memcpy(r->sha, rep->str, 40);
        r->sha[40] = '\0';
    }
    r->ready++;
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    raw *r = ac->data;
    if (status != REDIS_OK) {
        fprintf(stderr, "redlock-bench: raw connect: %s\n", ac->errstr);
        r->failed++;
        r->ready += 1;
    }
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    (void)ac;
    (void)status;
}

raw *raw_new(uv_loop_t *loop, const char *const *urls, unsigned n)
{
    raw *r = calloc(1, sizeof(*r));
    if (r == NULL || n > REDLOCK_MAX_NODES)
        return NULL;
    r->loop = loop;
    r->n = n;
    unsigned expected = 0;
    for (unsigned i = 0; i < n; i++) {
        redlock_url u;
        char err[256];
        if (redlock_url_parse(&u, urls[i], err, sizeof(err)) != 0) {
            fprintf(stderr, "redlock-bench: %s\n", err);
            redlock_url_free(&u);
            raw_free(r);
            return NULL;
        }
        redisAsyncContext *ac =
            u.is_unix ? redisAsyncConnectUnix(u.path) : redisAsyncConnect(u.host, u.port);
        if (ac == NULL || ac->err) {
            fprintf(stderr, "redlock-bench: raw connect %s: %s\n", u.redacted,
                    ac != NULL ? ac->errstr : "out of memory");
            redlock_url_free(&u);
            raw_free(r);
            return NULL;
        }
        ac->data = r;
        r->ctx[i] = ac;
        redisLibuvAttach(ac, loop);
        redisAsyncSetConnectCallback(ac, on_connect);
        redisAsyncSetDisconnectCallback(ac, on_disconnect);
        if (u.password != NULL) {
            if (u.user != NULL)
                redisAsyncCommand(ac, on_setup_reply, r, "AUTH %s %s", u.user, u.password);
            else
                redisAsyncCommand(ac, on_setup_reply, r, "AUTH %s", u.password);
            expected++;
        }
        if (u.db > 0) {
            redisAsyncCommand(ac, on_setup_reply, r, "SELECT %d", u.db);
            expected++;
        }
        redisAsyncCommand(ac, on_setup_reply, r, "SCRIPT LOAD %s", RELEASE_LUA);
        expected++;
        redlock_url_free(&u);
    }
    while (r->ready < expected && r->failed == 0)
        uv_run(loop, UV_RUN_ONCE);
    if (r->failed != 0) {
        raw_free(r);
        return NULL;
    }
    return r;
}

void raw_free(raw *r)
{
    if (r == NULL)
        return;
    for (unsigned i = 0; i < r->n; i++)
        if (r->ctx[i] != NULL)
            redisAsyncDisconnect(r->ctx[i]);
    free(r);
}

static void on_release(redisAsyncContext *ac, void *reply, void *privdata)
{
    cycle *c = privdata;
    (void)ac;
    (void)reply;
    if (--c->pending > 0)
        return;
    uint64_t now = bench_now_us();
    c->cb(c->data, c->set_us - c->start_us, now - c->start_us);
    free(c);
}

static void on_set(redisAsyncContext *ac, void *reply, void *privdata)
{
    cycle *c = privdata;
    (void)ac;
    (void)reply;
    if (--c->pending > 0)
        return;
    c->set_us = bench_now_us();
    raw *r = c->r;
    c->pending = r->n;
    size_t key_len = strlen(c->key);
    for (unsigned i = 0; i < r->n; i++) {
        const char *argv[5] = {"EVALSHA", r->sha, "1", c->key, c->token};
        size_t argvlen[5] = {7, 40, 1, key_len, strlen(c->token)};
        redisAsyncCommandArgv(r->ctx[i], on_release, c, 5, argv, argvlen);
    }
}

void raw_cycle(raw *r, const char *key, uint64_t ttl_ms, raw_done_cb cb, void *data)
{
    size_t key_len = strlen(key);
    cycle *c = malloc(sizeof(*c) + key_len + 1);
    if (c == NULL) {
        fprintf(stderr, "redlock-bench: out of memory\n");
        exit(1);
    }
    c->r = r;
    c->cb = cb;
    c->data = data;
    c->pending = r->n;
    memcpy(c->key, key, key_len + 1);
    snprintf(c->token, sizeof(c->token), "%016llx", (unsigned long long)++r->next_token);
    char ttl[24];
    snprintf(ttl, sizeof(ttl), "%llu", (unsigned long long)ttl_ms);
    c->start_us = bench_now_us();
    for (unsigned i = 0; i < r->n; i++) {
        const char *argv[6] = {"SET", c->key, c->token, "NX", "PX", ttl};
        size_t argvlen[6] = {3, key_len, strlen(c->token), 2, 2, strlen(ttl)};
        redisAsyncCommandArgv(r->ctx[i], on_set, c, 6, argv, argvlen);
    }
}
