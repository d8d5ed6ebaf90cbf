/* client.h - the client's internals shared by client.c (rounds, operations) and lock.c (the
 * lock handle). Nothing here is public. */
#ifndef REDLOCK_CLIENT_H
#define REDLOCK_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "io.h"
#include "timerq.h"

#define REDLOCK__ERR_LEN 160
#define REDLOCK__TOKEN_BYTES 16 /* 128 random bits, printed as 32 hex digits */

struct redlock_client {
    uv_loop_t *loop;
    redlock__alloc alloc;
    redlock__io *io;
    redlock_options opts;
    char *key_prefix;
    size_t key_prefix_len;
    unsigned n_nodes;
    redlock_url *urls;

    redlock__timerq timers;
    uint64_t wake_due; /* what the io's wake-up is armed for (UINT64_MAX: nothing) */
    bool in_wake;

    redlock__list ops;   /* operations whose callback has not run */
    redlock__list locks; /* every live lock handle */
    unsigned api_depth;  /* > 0 while inside a public call: completions are deferred */
    bool closing;
    redlock_close_cb close_cb;
    void *close_data;
    char last_error[256];
};

struct redlock_lock {
    redlock_client *client;
    redlock__list link; /* client->locks */
    unsigned refs;      /* the user's (once handed out), each operation's, each round's */
    bool user_owned;
    bool released; /* unlock was called */
    uint64_t ttl_ms;
    uint64_t validity_ms;
    uint64_t deadline_us;
    void *data;
    char *key; /* key prefix + resource; the resource starts at key + prefix length */
    size_t key_len;
    size_t prefix_len;
    uint64_t key_hash;
    size_t token_len;
    char token[REDLOCK_TOKEN_MAX + 1];
};

/* Set client->last_error (printf-style) and return err. */
int redlock__client_error(redlock_client *c, int err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Lock handles (lock.c). */
redlock_lock *redlock__lock_new(redlock_client *c, const void *resource, size_t len);
void redlock__lock_ref(redlock_lock *lock);
void redlock__lock_unref(redlock_lock *lock);
/* Free every handle still alive; the client is going away. */
void redlock__lock_free_all(redlock_client *c);

#endif
