/* SPDX-License-Identifier: MIT */
/* lock.h - a lock handle (lock.c): its keys, token, validity, the state the layers above keep
 * on it (an auto-extension's, a waiter's), and its references. Nothing here is public. Above the
 * client core (client.h); the operations (op.h), the auto-extension and the check after a
 * restart use it. */
#ifndef REDLOCK_LOCK_H
#define REDLOCK_LOCK_H

#include "autoextend.h"
#include "client.h"
#include "fence.h"
#include "kept.h"
#include "recheck.h"

#define REDLOCK__TOKEN_BYTES 16 /* 128 random bits, printed as 32 hex digits */
#define REDLOCK__WAITER_BYTES 8 /* a waiter's id in a resource's queue: 64 random bits, in hex */
/* A lock's token up to this many bytes is kept in the lock itself (the library's own, 32 hex
 * digits, and a caller's UUID fit); a longer caller's token gets an allocation of its own. */
#define REDLOCK__TOKEN_INLINE 47
_Static_assert(2 * REDLOCK__TOKEN_BYTES <= REDLOCK__TOKEN_INLINE,
               "the library's tokens fit inline");

/* A lock's place in its keys' queues (waiter.h). */
typedef struct redlock__place redlock__place;

/* A hold of redlock_using (using.c). */
typedef struct redlock__using redlock__using;

struct redlock_lock {
    redlock_client *client;
    redlock__closer closer; /* in client->locks while it lives: the close frees it */
    unsigned refs;          /* the user's (once handed out), each operation's, each round's */
    bool user_owned;
    bool released; /* unlock was called */
    bool lost;     /* auto-extension reported it lost; only an extend called since clears it */
    bool attached; /* made by redlock_lock_attach: validity unknown until an extend wins */
    bool lapsed;   /* an extend ended REDLOCK_ELOST: RETAKE refused until a plain one wins */
    /* Fewer than a quorum may have kept the token at some moment of the hold (kept.c): it had a
     * gap, whatever a later round wins; set once, never cleared. */
    bool gap;
    bool caller_token; /* the caller chose the token: retries reuse it */
    uint64_t ttl_ms;
    uint64_t validity_ms;
    uint64_t deadline_us;
    uint64_t won_start_us;     /* start of the last won round (acquire or extend) */
    redlock__lock_check check; /* recheck.h */
    redlock__kept cont;        /* the nodes that vouch for the hold's continuity (kept.c) */
    redlock__auto *autox; /* autoextend.h: NULL until its first auto-extension; freed with it */
    /* What follows the hold hears of it here: an auto-extension sets both when it starts and
     * clears them when it stops (autoextend.c); NULL: nothing follows it. on_moved: an extend
     * won, the deadline moved (hold.c); on_ended: the hold ended for the caller (released,
     * freed, or its acquire canceled: redlock__lock_ended). */
    void (*on_moved)(redlock_lock *lock);
    void (*on_ended)(redlock_lock *lock);
    redlock__using *using; /* the hold of a redlock_using work, until its done: the caller's
                              release and free are refused */
    void *data;
    redlock__fencing fencing; /* fence.h */
    /* key prefix + resource; the resource starts at key + prefix length, the fence counter's key
     * may follow it (fence.h). */
    char *key;
    size_t key_len;
    size_t prefix_len;
    uint64_t key_hash;
    /* A lock on several resources (redlock_acquire_multi): the keys after the first (prefix +
     * resource each), in one allocation with their bytes; NULL and 0 for one resource. */
    redlock__span *more;
    unsigned n_more;
    /* Fair turns: its place in its keys' queues, set while an acquire with a wait (and
     * notifications) takes it through them, and kept for the lock's release (waiter.h; freed with
     * the lock); NULL: not queued. */
    redlock__place *place;
    size_t token_len;
    char *token; /* NUL-terminated: token_small, or its own allocation (redlock__lock_set_token) */
    char token_small[REDLOCK__TOKEN_INLINE + 1];
};

/* Lock handles (lock.c). */
redlock_lock *redlock__lock_new(redlock_client *c, const void *resource, size_t len);
/* A handle for a set of count >= 1 resources (checked by redlock__client_check_resources). */
redlock_lock *redlock__lock_new_set(redlock_client *c, const void *const *resources,
                                    const size_t *lens, unsigned count);
/* Key i (0..n_more) of the lock, prefix included. */
const char *redlock__lock_key(const redlock_lock *lock, unsigned i, size_t *len);
/* Whether key is one of the lock's keys. */
bool redlock__lock_has_key(const redlock_lock *lock, const char *key, size_t len);
void redlock__lock_ref(redlock_lock *lock);
void redlock__lock_unref(redlock_lock *lock);
/* Set the lock's token (1..REDLOCK_TOKEN_MAX bytes, NUL-terminated in the lock). Returns 0, or
 * REDLOCK_ENOMEM (the token unchanged). */
int redlock__lock_set_token(redlock_lock *lock, const char *token, size_t len);
/* Take the lock's fences from the counter of fence domain (NUL-terminated, 1 or more bytes):
 * "<key prefix><domain>:fence", shared by every resource of the domain. Returns 0, or
 * REDLOCK_ENOMEM (the lock keeps its own counter). */
int redlock__lock_set_fence_domain(redlock_lock *lock, const char *domain);
/* The hold ended for the caller (released, freed, or its acquire canceled): whatever follows it
 * (an auto-extension) stops. */
static inline void redlock__lock_ended(redlock_lock *lock)
{
    if (lock->on_ended != NULL)
        lock->on_ended(lock);
}

#endif
