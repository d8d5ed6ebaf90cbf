/* SPDX-License-Identifier: MIT */
/* scripts.h - the Lua scripts of extend and release, and their SHA1s for EVALSHA.
 *
 * The SHA1s are computed offline from the exact source text below; test/integration checks them
 * against SCRIPT LOAD on a real server, so an edit to a script without its SHA1 fails the suite. */
#ifndef REDLOCK_SCRIPTS_H
#define REDLOCK_SCRIPTS_H

#include <stddef.h>

typedef struct redlock__script {
    const char *name;
    const char *source;
    size_t source_len;
    const char *sha1; /* 40 lowercase hex digits */
} redlock__script;

/* KEYS[1] = key, ARGV[1] = token, ARGV[2] = ttl in ms, ARGV[3] = "1" to re-take a missing key.
 * 1 if the key holds the token (its ttl is reset) or was re-taken, else 0. */
extern const redlock__script redlock__script_extend;
/* KEYS[1] = key, ARGV[1] = token. 1 if the key held the token and was deleted, else 0. */
extern const redlock__script redlock__script_release;
/* KEYS[1] = key, KEYS[2] = its fence counter key. {value or nil, PTTL, counter or nil}:
 * read-only. */
extern const redlock__script redlock__script_inspect;

/* Fencing (docs/algorithm.md). KEYS[2] is always the lock key's counter (redlock__fence_key). */
/* KEYS[1] = key, ARGV[1] = token, ARGV[2] = ttl in ms. SET NX PX, and if it set the key the
 * counter as it was (a decimal string, "0" when absent) in the same atomic step; nil when the key
 * exists; an error, before anything is written, when the counter is not a decimal number. */
extern const redlock__script redlock__script_acquire_fenced;
/* KEYS[1] = key, ARGV[1] = token, ARGV[2] = fence. If the key holds the token: counter =
 * max(counter, fence), 1; else 0. */
extern const redlock__script redlock__script_commit;
/* As extend, with ARGV[4] = the lock's fence: a re-taken key also raises the counter to the fence
 * (a node that came back empty gets both back). */
extern const redlock__script redlock__script_extend_fenced;

/* Several resources (redlock_acquire_multi): KEYS[1..k] are the set's keys; each script checks
 * every key before it changes any, so on one node the set is granted, renewed or left whole. */
/* ARGV[1] = token, ARGV[2] = ttl in ms. SET every key PX if none exists (+OK), else nil and
 * nothing written. */
extern const redlock__script redlock__script_acquire_multi;
/* ARGV as extend. If every key holds the token (or, with ARGV[3] = "1", holds it or is missing),
 * every key is set to the token with the new ttl: 1; else nothing changes: 0. */
extern const redlock__script redlock__script_extend_multi;
/* ARGV[1] = token. Deletes (and announces) each key that holds the token; 1 if all of them did,
 * else 0. */
extern const redlock__script redlock__script_release_multi;
/* No ARGV. {value or nil, smallest PTTL, nil} when every key holds the same value or none
 * exists; an error reply naming the first key that differs otherwise. Read-only. */
extern const redlock__script redlock__script_inspect_multi;

/* Fair turns (scripts.c): KEYS[2] = the resource's queue, KEYS[3] = its waiters' deadlines. */
/* ARGV[1] = token, ARGV[2] = ttl ms, ARGV[3] = waiter id, ARGV[4] = its place, ARGV[5] = how long
 * the place is kept (ms). +OK when the key was set for the queue's head (or anyone when nobody
 * waits); nil, with the waiter queued, otherwise. */
extern const redlock__script redlock__script_acquire_queued;
/* ARGV[1] = token, ARGV[2] = the waiter id leaving the queue, or "". 1 if the key held the token
 * and was deleted (the notification names the queue's next head), else 0. */
extern const redlock__script redlock__script_release_queued;

/* Every script above, in the order the handshake loads them (handshake.c, and the tool's check). */
#define REDLOCK__SCRIPTS 12
extern const redlock__script *const redlock__scripts[REDLOCK__SCRIPTS];

#endif
