/* SPDX-License-Identifier: MIT */
/* acquire_call.c - redlock_acquire and redlock_acquire_multi, and the lock options they read: an
 * acquire is checked here, its options read once by their size (abi.h), and its operation started
 * with what it asked for (a wait, auto-extension). Calls down only: the lock layer. */
#include "op.h"

#include <string.h>

#include "abi.h"
#include "autoextend.h"
#include "slot.h"
#include "waiter.h"

/* ---- acquire --------------------------------------------------------------------------------- */

static void lock_opts_defaults(redlock_lock_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
    o->retry_count = -1;
}

void redlock_lock_opts_init_sized(redlock_lock_opts *o, size_t size)
{
    redlock_lock_opts defaults;
    lock_opts_defaults(&defaults);
    redlock__struct_init(o, size, &defaults, sizeof(defaults));
}

int redlock__lock_opts_in(redlock_lock_opts *dst, const redlock_lock_opts *src, char *err,
                          size_t err_len)
{
    lock_opts_defaults(dst);
    if (src == NULL)
        return 0;
    return redlock__struct_in(dst, sizeof(*dst), src, REDLOCK__LOCK_OPTS_MIN, "opts",
                              "redlock_lock_opts_init", err, err_len);
}

/* On a client with a cluster node, every key of one script must lie in one hash slot (the
 * cluster refuses it otherwise): the keys of a set, and a fenced lock's key and counter. The
 * library never renames keys (plain nodes keep theirs), so the caller gives the resources a hash
 * tag. Returns 0 or REDLOCK_EINVAL with a message. */
static int check_cluster_slots(redlock_client *c, const redlock_lock *lock, bool fencing)
{
    size_t len = 0;
    const char *key = redlock__lock_key(lock, 0, &len);
    unsigned slot = redlock__slot_of_key(key, len);
    for (unsigned i = 1; i < redlock_lock_resource_count(lock); i++) {
        size_t other_len = 0;
        const char *other = redlock__lock_key(lock, i, &other_len);
        if (redlock__slot_of_key(other, other_len) != slot)
            return redlock__client_error(
                c, REDLOCK_EINVAL,
                "resources 0 and %u lie in different hash slots of a cluster node: give them one "
                "hash tag, as in {orders}:a and {orders}:b (docs/cluster.md)",
                i);
    }
    if (fencing &&
        lock->fencing.key != lock->key) { /* a fence domain's counter, named by the caller */
        if (redlock__slot_of_key(lock->fencing.key, lock->fencing.key_len) == slot)
            return 0;
        return redlock__client_error(
            c, REDLOCK_EINVAL,
            "the fence domain's counter lies in another hash slot of a cluster node than the "
            "resource: give both one hash tag, as in {users}:42 in the domain {users} "
            "(docs/cluster.md)");
    }
    size_t tag_start = 0, tag_len = 0;
    if (fencing && !redlock__slot_hash_tag(key, len, &tag_start, &tag_len)) /* the counter's slot
                                                                                is the tag's */
        return redlock__client_error(
            c, REDLOCK_EINVAL,
            "a fenced lock on a cluster node needs a resource with a hash tag, as in "
            "{orders}, so that its counter (<resource>%s) lies in the same slot "
            "(docs/cluster.md)",
            REDLOCK__FENCE_SUFFIX);
    return 0;
}

int redlock_acquire(redlock_client *c, const void *resource, size_t len, uint64_t ttl_ms,
                    const redlock_lock_opts *opts, redlock_cb cb, void *data)
{
    return redlock_acquire_multi(c, &resource, &len, 1, ttl_ms, opts, cb, data);
}

int redlock_acquire_multi(redlock_client *c, const void *const *resources, const size_t *lens,
                          unsigned count, uint64_t ttl_ms, const redlock_lock_opts *caller_opts,
                          redlock_cb cb, void *data)
{
    int rc = redlock__client_check_call(c, resources, lens, count, cb);
    if (rc != 0)
        return rc;
    if (ttl_ms == 0)
        ttl_ms = c->opts.ttl_ms;
    rc = redlock__op_check_ttl(c, ttl_ms);
    if (rc != 0)
        return rc;
    /* The caller's structs are read once, by their size (abi.h); only the copies are used. */
    redlock_lock_opts lock_opts;
    redlock_auto_opts auto_opts;
    char why[256];
    rc = redlock__lock_opts_in(&lock_opts, caller_opts, why, sizeof(why));
    if (rc == 0 && lock_opts.auto_extend != NULL)
        rc = redlock__auto_opts_in(&auto_opts, lock_opts.auto_extend, why, sizeof(why));
    if (rc != 0)
        return redlock__client_error(c, rc, "%s", why);
    lock_opts.token_len = redlock__len(lock_opts.token, lock_opts.token_len);
    const redlock_lock_opts *opts = &lock_opts;
    if (redlock_canceler_fired(opts->cancel))
        return redlock__client_error(c, REDLOCK_ECANCELED, "the canceler has fired");
    if (opts->token != NULL && (opts->token_len == 0 || opts->token_len > REDLOCK_TOKEN_MAX))
        return redlock__client_error(c, REDLOCK_EINVAL, "token length must be 1..%d",
                                     REDLOCK_TOKEN_MAX);
    if (opts->retry_count < -1)
        return redlock__client_error(c, REDLOCK_EINVAL, "retry_count must be >= -1");
    if (opts->wait_ms > REDLOCK_TTL_MAX_MS)
        return redlock__client_error(c, REDLOCK_EINVAL, "wait_ms is out of range");
    unsigned quorum = redlock__quorum_of(c->n_nodes);
    if (opts->fencing && count > 1)
        return redlock__client_error(c, REDLOCK_EINVAL,
                                     "fencing is for one resource: a lock on %u resources has no "
                                     "fence (take a fenced lock per resource that needs one)",
                                     count);
    if (opts->fence_commit != 0 && !opts->fencing)
        return redlock__client_error(c, REDLOCK_EINVAL, "fence_commit is set without fencing");
    if (opts->fence_commit != 0 && (opts->fence_commit < quorum || opts->fence_commit > c->n_nodes))
        return redlock__client_error(c, REDLOCK_EINVAL,
                                     "fence_commit %u is out of range %u..%u (the quorum..the "
                                     "number of nodes)",
                                     opts->fence_commit, quorum, c->n_nodes);
    if (opts->fence_domain != NULL && !opts->fencing)
        return redlock__client_error(c, REDLOCK_EINVAL, "fence_domain is set without fencing");
    if (opts->fence_domain != NULL &&
        (opts->fence_domain[0] == '\0' ||
         strnlen(opts->fence_domain, REDLOCK_RESOURCE_MAX + 1) > REDLOCK_RESOURCE_MAX))
        return redlock__client_error(c, REDLOCK_EINVAL, "fence_domain must be 1..%u bytes",
                                     (unsigned)REDLOCK_RESOURCE_MAX);
    if (opts->auto_extend != NULL) {
        rc = redlock__auto_check(c, &auto_opts, ttl_ms, opts->lost_cb);
        if (rc != 0)
            return rc;
    }

    redlock_lock *lock = redlock__lock_new_set(c, resources, lens, count);
    if (lock == NULL)
        return redlock__client_error(c, REDLOCK_ENOMEM, "out of memory");
    if (opts->fence_domain != NULL &&
        redlock__lock_set_fence_domain(lock, opts->fence_domain) != 0) {
        redlock__lock_unref(lock);
        return redlock__client_error(c, REDLOCK_ENOMEM, "out of memory");
    }
    if (c->has_cluster && (rc = check_cluster_slots(c, lock, opts->fencing)) != 0) {
        redlock__lock_unref(lock);
        return rc;
    }
    if (opts->auto_extend != NULL && (rc = redlock__auto_reserve(lock)) != 0) {
        redlock__lock_unref(lock); /* started once won, it then has its memory */
        return rc;
    }
    lock->ttl_ms = ttl_ms;
    lock->fencing.wanted = opts->fencing;
    lock->fencing.commit = opts->fence_commit;
    if (opts->token != NULL) {
        if ((rc = redlock__lock_set_token(lock, opts->token, opts->token_len)) != 0) {
            redlock__lock_unref(lock);
            return redlock__client_error(c, rc, "out of memory");
        }
        lock->caller_token = true;
    } else if ((rc = redlock__acquire_new_token(c, lock)) != 0) {
        redlock__lock_unref(lock);
        return redlock__client_error(c, REDLOCK_ENOMEM, "no randomness for the token");
    }

    redlock__op *o = redlock__op_new(c, &redlock__acquire_kind, lock, cb, data);
    if (o == NULL) {
        redlock__lock_unref(lock);
        return redlock__client_error(c, REDLOCK_ENOMEM, "out of memory");
    }
    if (opts->cancel != NULL && (rc = redlock__op_carry_canceler(o, opts->cancel)) != 0) {
        redlock__lock_unref(lock);
        redlock__op_free(o);
        return rc;
    }
    o->ttl_ms = ttl_ms;
    o->retries_left = opts->retry_count >= 0 ? opts->retry_count : c->opts.retry_count;
    if (opts->wait_ms > 0) {
        o->wait_deadline_us = o->call_us + opts->wait_ms * 1000;
        o->w = redlock__waiter_new(c, lock);
        if (o->w == NULL) {
            redlock__lock_unref(lock);
            redlock__op_free(o);
            return redlock__client_error(c, REDLOCK_ENOMEM, "out of memory");
        }
        redlock__waiter_start(o);
    }
    if (opts->auto_extend != NULL) {
        o->has_auto = true;
        o->auto_opts = auto_opts;
        o->lost_cb = opts->lost_cb;
        o->lost_data = opts->lost_data;
    }
    return redlock__op_launch(o); /* the op holds the lock's first reference */
}
