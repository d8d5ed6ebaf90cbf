/* SPDX-License-Identifier: MIT */
/* job_store.c - the job runners' store on a Redis server (job_store.h). */
#define _POSIX_C_SOURCE 200809L
#include "job_store.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>
#include <redlock.h>

/* KEYS[1] = NAME:done, KEYS[2] = NAME:last-fence, KEYS[3] = NAME:log; ARGV[1] = the job,
 * ARGV[2] = the writer's fence. The check and the writes are one atomic step on the server.
 * tonumber is exact for fences below 2^53. */
static const char commit_lua[] =
    "local last = redis.call('get', KEYS[2])\n"
    "if last and tonumber(ARGV[2]) < tonumber(last) then\n"
    "    return redis.error_reply('STALE fence ' .. ARGV[2] .. ' is below ' .. last ..\n"
    "        ', the last accepted: the lock has a newer holder')\n"
    "end\n"
    "redis.call('set', KEYS[2], ARGV[2])\n"
    "redis.call('set', KEYS[1], ARGV[1])\n"
    "redis.call('rpush', KEYS[3], ARGV[1] .. ' ' .. ARGV[2])\n"
    "return 1\n";

struct job_store {
    redisContext *redis;
    char *done_key, *fence_key, *log_key;
};

/* name + suffix (malloc'ed), or NULL. */
static char *key_of(const char *name, const char *suffix)
{
    size_t len = strlen(name) + strlen(suffix) + 1;
    char *key = malloc(len);
    if (key != NULL)
        snprintf(key, len, "%s%s", name, suffix);
    return key;
}

/* A command that must not fail (AUTH, SELECT). Returns 0, or -1 after printing why. */
static int setup_command(redisContext *redis, const char *what, redisReply *reply)
{
    int rc = reply != NULL && reply->type != REDIS_REPLY_ERROR ? 0 : -1;
    if (rc != 0)
        fprintf(stderr, "job store: %s: %s\n", what, reply != NULL ? reply->str : redis->errstr);
    freeReplyObject(reply);
    return rc;
}

static redisContext *store_connect(const redlock_url *url)
{
    const struct timeval timeout = {5, 0};
    redisContext *redis = url->is_unix ? redisConnectUnixWithTimeout(url->path, timeout)
                                       : redisConnectWithTimeout(url->host, url->port, timeout);
    if (redis == NULL || redis->err) {
        fprintf(stderr, "job store: %s: %s\n", url->redacted,
                redis != NULL ? redis->errstr : "out of memory");
        redisFree(redis);
        return NULL;
    }
    redisSetTimeout(redis, timeout);
    if ((url->password != NULL &&
         setup_command(redis, "AUTH",
                       url->user != NULL
                           ? redisCommand(redis, "AUTH %s %s", url->user, url->password)
                           : redisCommand(redis, "AUTH %s", url->password)) != 0) ||
        (url->db >= 0 &&
         setup_command(redis, "SELECT", redisCommand(redis, "SELECT %d", url->db)) != 0)) {
        redisFree(redis);
        return NULL;
    }
    return redis;
}

job_store *job_store_open(const char *url_text, const char *name)
{
    redlock_url url;
    char err[256];
    if (redlock_url_parse(&url, url_text, err, sizeof(err)) != 0 || url.tls || url.cluster) {
        fprintf(stderr, "job store: %s\n",
                url.tls || url.cluster ? "redis:// or unix:// only (plain hiredis)" : err);
        redlock_url_free(&url);
        return NULL;
    }
    job_store *store = calloc(1, sizeof(*store));
    if (store != NULL) {
        store->done_key = key_of(name, ":done");
        store->fence_key = key_of(name, ":last-fence");
        store->log_key = key_of(name, ":log");
    }
    if (store == NULL || store->done_key == NULL || store->fence_key == NULL ||
        store->log_key == NULL) {
        fprintf(stderr, "job store: out of memory\n");
    } else {
        store->redis = store_connect(&url);
    }
    redlock_url_free(&url);
    if (store == NULL || store->redis == NULL) {
        job_store_close(store);
        return NULL;
    }
    return store;
}

void job_store_close(job_store *store)
{
    if (store == NULL)
        return;
    redisFree(store->redis);
    free(store->done_key);
    free(store->fence_key);
    free(store->log_key);
    free(store);
}

int job_store_next(job_store *store, uint64_t *job)
{
    redisReply *reply = redisCommand(store->redis, "GET %s", store->done_key);
    if (reply == NULL || (reply->type != REDIS_REPLY_STRING && reply->type != REDIS_REPLY_NIL)) {
        fprintf(stderr, "job store: GET %s: %s\n", store->done_key,
                reply == NULL                      ? store->redis->errstr
                : reply->type == REDIS_REPLY_ERROR ? reply->str
                                                   : "not a string");
        freeReplyObject(reply);
        return -1;
    }
    uint64_t last = 0;
    if (reply->type == REDIS_REPLY_STRING) {
        char *end;
        errno = 0;
        last = strtoull(reply->str, &end, 10);
        if (errno != 0 || end == reply->str || *end != '\0') {
            fprintf(stderr, "job store: %s is not a number: \"%s\"\n", store->done_key, reply->str);
            freeReplyObject(reply);
            return -1;
        }
    }
    freeReplyObject(reply);
    *job = last + 1;
    return 0;
}

int job_store_commit(job_store *store, uint64_t job, uint64_t fence, char *why, size_t why_len)
{
    char job_text[24], fence_text[24];
    snprintf(job_text, sizeof(job_text), "%" PRIu64, job);
    snprintf(fence_text, sizeof(fence_text), "%" PRIu64, fence);
    redisReply *reply =
        redisCommand(store->redis, "EVAL %s 3 %s %s %s %s %s", commit_lua, store->done_key,
                     store->fence_key, store->log_key, job_text, fence_text);
    if (reply == NULL) {
        fprintf(stderr, "job store: %s\n", store->redis->errstr);
        return -1;
    }
    int rc = 0;
    if (reply->type == REDIS_REPLY_ERROR && strncmp(reply->str, "STALE", 5) == 0) {
        snprintf(why, why_len, "%s", reply->str);
        rc = JOB_STORE_STALE;
    } else if (reply->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "job store: %s\n", reply->str);
        rc = -1;
    }
    freeReplyObject(reply);
    return rc;
}
