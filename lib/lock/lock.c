/* SPDX-License-Identifier: MIT */
/* lock.c - the lock handle: memory, reference counting and accessors.
 *
 * A handle is referenced by the user (once a lock callback handed it out), by each operation on
 * it and by each round still waiting for replies (late replies read the key and token), and is
 * freed when the last reference goes - or by its closer at the end of the client's close. */
#include "lock.h"

#include <stdarg.h>
#include <stdio.h>

static void on_close(redlock__closer *closer);

redlock_lock *redlock__lock_new(redlock_client *c, const void *resource, size_t len)
{
    redlock_lock *lock = redlock__calloc(&c->alloc, 1, sizeof(*lock));
    if (lock == NULL)
        return NULL;
    /* The key, then the suffix that makes it the fence counter's key: both are in one buffer,
     * so a fenced round, or an inspect, names the counter at no cost of its own. */
    size_t key_len = c->key_prefix_len + len;
    lock->key = redlock__malloc(&c->alloc, key_len + REDLOCK__FENCE_SUFFIX_LEN + 1);
    if (lock->key == NULL) {
        redlock__free(&c->alloc, lock);
        return NULL;
    }
    memcpy(lock->key, c->key_prefix, c->key_prefix_len);
    memcpy(lock->key + c->key_prefix_len, resource, len);
    memcpy(lock->key + key_len, REDLOCK__FENCE_SUFFIX, REDLOCK__FENCE_SUFFIX_LEN + 1);
    lock->key_len = key_len;
    lock->fencing.key = lock->key;
    lock->fencing.key_len = key_len + REDLOCK__FENCE_SUFFIX_LEN;
    lock->prefix_len = c->key_prefix_len;
    lock->key_hash = redlock__hash(lock->key, lock->key_len);
    lock->client = c;
    lock->refs = 1;
    lock->token = lock->token_small;
    redlock__closer_link(&c->locks, &lock->closer, on_close);
    return lock;
}

int redlock__lock_set_token(redlock_lock *lock, const char *token, size_t len)
{
    char *to = lock->token_small;
    if (len > REDLOCK__TOKEN_INLINE &&
        (to = redlock__malloc(&lock->client->alloc, len + 1)) == NULL)
        return REDLOCK_ENOMEM;
    if (lock->token != lock->token_small)
        redlock__free(&lock->client->alloc, lock->token);
    memcpy(to, token, len);
    to[len] = '\0';
    lock->token = to;
    lock->token_len = len;
    return 0;
}

redlock_lock *redlock__lock_new_set(redlock_client *c, const void *const *resources,
                                    const size_t *lens, unsigned count)
{
    redlock_lock *lock = redlock__lock_new(c, resources[0], redlock__len(resources[0], lens[0]));
    if (lock == NULL || count == 1)
        return lock;
    /* The spans, then the keys' bytes they point at. */
    size_t n_more = count - 1;
    size_t size = n_more * sizeof(redlock__span);
    for (unsigned i = 1; i < count; i++)
        size += c->key_prefix_len + redlock__len(resources[i], lens[i]);
    lock->more = redlock__malloc(&c->alloc, size);
    if (lock->more == NULL) {
        redlock__lock_unref(lock);
        return NULL;
    }
    char *bytes = (char *)(lock->more + n_more);
    for (unsigned i = 1; i < count; i++) {
        size_t len = redlock__len(resources[i], lens[i]);
        memcpy(bytes, c->key_prefix, c->key_prefix_len);
        memcpy(bytes + c->key_prefix_len, resources[i], len);
        lock->more[i - 1].ptr = bytes;
        lock->more[i - 1].len = c->key_prefix_len + len;
        bytes += lock->more[i - 1].len;
    }
    lock->n_more = count - 1;
    return lock;
}

int redlock__lock_set_fence_domain(redlock_lock *lock, const char *domain)
{
    redlock_client *c = lock->client;
    size_t len = c->key_prefix_len + strlen(domain) + REDLOCK__FENCE_SUFFIX_LEN;
    char *key = redlock__malloc(&c->alloc, len + 1);
    if (key == NULL)
        return REDLOCK_ENOMEM;
    memcpy(key, c->key_prefix, c->key_prefix_len);
    memcpy(key + c->key_prefix_len, domain, strlen(domain));
    memcpy(key + len - REDLOCK__FENCE_SUFFIX_LEN, REDLOCK__FENCE_SUFFIX,
           REDLOCK__FENCE_SUFFIX_LEN + 1);
    if (lock->fencing.key != lock->key)
        redlock__free(&c->alloc, (char *)lock->fencing.key);
    lock->fencing.key = key;
    lock->fencing.key_len = len;
    return 0;
}

const char *redlock__lock_key(const redlock_lock *lock, unsigned i, size_t *len)
{
    *len = i == 0 ? lock->key_len : lock->more[i - 1].len;
    return i == 0 ? lock->key : lock->more[i - 1].ptr;
}

bool redlock__lock_has_key(const redlock_lock *lock, const char *key, size_t len)
{
    for (unsigned i = 0; i <= lock->n_more; i++) {
        size_t key_len;
        const char *k = redlock__lock_key(lock, i, &key_len);
        if (key_len == len && memcmp(k, key, len) == 0)
            return true;
    }
    return false;
}

static void lock_destroy(redlock_lock *lock)
{
    redlock_client *c = lock->client;
    redlock__closer_unlink(&lock->closer);
    redlock__free(&c->alloc, lock->more);
    redlock__free(&c->alloc, lock->place); /* one allocation (waiter.h) */
    redlock__free(&c->alloc, lock->autox); /* stopped: nothing follows a freed lock */
    if (lock->fencing.key != lock->key)
        redlock__free(&c->alloc, (char *)lock->fencing.key);
    redlock__free(&c->alloc, lock->key);
    if (lock->token != lock->token_small)
        redlock__free(&c->alloc, lock->token);
    redlock__free(&c->alloc, lock);
}

void redlock__lock_ref(redlock_lock *lock)
{
    lock->refs++;
}

void redlock__lock_unref(redlock_lock *lock)
{
    if (--lock->refs == 0)
        lock_destroy(lock);
}

/* The io of a closing client has closed, and every operation, auto-extension and hold of
 * redlock_using has ended (client.h's closers): the handle is freed, whoever still holds it. */
static void on_close(redlock__closer *closer)
{
    lock_destroy(REDLOCK__CONTAINER_OF(closer, redlock_lock, closer));
}

void redlock_lock_free(redlock_lock *lock)
{
    if (lock == NULL || !lock->user_owned || lock->using != NULL)
        return;
    redlock__lock_ended(lock); /* its auto-extension stops */
    lock->user_owned = false;
    redlock__lock_unref(lock);
}

/* The accessors read a NULL handle as empty, so a caller's error path cannot crash on them. */

const void *redlock_lock_resource(const redlock_lock *lock, size_t *len)
{
    if (len != NULL)
        *len = lock != NULL ? lock->key_len - lock->prefix_len : 0;
    return lock != NULL ? lock->key + lock->prefix_len : NULL;
}

unsigned redlock_lock_resource_count(const redlock_lock *lock)
{
    return lock != NULL ? lock->n_more + 1 : 0;
}

const void *redlock_lock_resource_at(const redlock_lock *lock, unsigned i, size_t *len)
{
    if (lock == NULL || i > lock->n_more) {
        if (len != NULL)
            *len = 0;
        return NULL;
    }
    size_t key_len;
    const char *key = redlock__lock_key(lock, i, &key_len);
    if (len != NULL)
        *len = key_len - lock->prefix_len;
    return key + lock->prefix_len;
}

const char *redlock_lock_token(const redlock_lock *lock, size_t *len)
{
    if (len != NULL)
        *len = lock != NULL ? lock->token_len : 0;
    return lock != NULL ? lock->token : NULL;
}

uint64_t redlock_lock_validity_ms(const redlock_lock *lock)
{
    return lock != NULL ? lock->validity_ms : 0;
}

uint64_t redlock_lock_deadline_us(const redlock_lock *lock)
{
    return lock != NULL ? lock->deadline_us : 0;
}

uint64_t redlock_lock_ttl_ms(const redlock_lock *lock)
{
    return lock != NULL ? lock->ttl_ms : 0;
}

uint64_t redlock_lock_fence(const redlock_lock *lock)
{
    return lock != NULL ? lock->fencing.fence : 0;
}

bool redlock_lock_is_held(const redlock_lock *lock, uint64_t now_us)
{
    return lock != NULL && !lock->released && !lock->lost && now_us < lock->deadline_us;
}

redlock_client *redlock_lock_client(const redlock_lock *lock)
{
    return lock != NULL ? lock->client : NULL;
}

void redlock_lock_set_data(redlock_lock *lock, void *data)
{
    if (lock != NULL)
        lock->data = data;
}

void *redlock_lock_get_data(const redlock_lock *lock)
{
    return lock != NULL ? lock->data : NULL;
}

int redlock_lock_attach(redlock_client *c, const void *resource, size_t len, const void *token,
                        size_t token_len, uint64_t ttl_ms, redlock_lock **lock_out)
{
    if (c == NULL || lock_out == NULL)
        return REDLOCK_EINVAL;
    *lock_out = NULL;
    len = redlock__len(resource, len);
    token_len = redlock__len(token, token_len);
    int rc = redlock__client_check_resource(c, resource, len);
    if (rc != 0)
        return rc;
    if (token == NULL || token_len == 0 || token_len > REDLOCK_TOKEN_MAX)
        return redlock__client_error(c, REDLOCK_EINVAL, "token must be 1..%d bytes",
                                     REDLOCK_TOKEN_MAX);
    if (ttl_ms == 0)
        ttl_ms = c->opts.ttl_ms;
    if (ttl_ms > REDLOCK_TTL_MAX_MS)
        return redlock__client_error(c, REDLOCK_EINVAL, "ttl_ms is out of range");
    redlock_lock *lock = redlock__lock_new(c, resource, len);
    if (lock == NULL || redlock__lock_set_token(lock, token, token_len) != 0) {
        if (lock != NULL)
            redlock__lock_unref(lock);
        return redlock__client_error(c, REDLOCK_ENOMEM, "out of memory");
    }
    lock->ttl_ms = ttl_ms;
    lock->attached = true;
    lock->deadline_us = UINT64_MAX; /* unknown: extend is not refused as expired */
    lock->user_owned = true;        /* the creation reference is the caller's */
    *lock_out = lock;
    return 0;
}
