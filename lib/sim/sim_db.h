/* SPDX-License-Identifier: MIT */
/* sim_db.h - a simulated Redis server's keyspace: strings, sorted sets and hashes, each key with
 * an optional expiry on the server's clock, expired lazily on access as Redis does.
 *
 * No IO and no clock of its own: every call that may meet an expired key takes the server's time.
 * Expiries are kept in microseconds (a key set with PX ttl lives exactly ttl: a real server keeps
 * milliseconds, which lets a key live up to 1 ms longer, the safe side); scripts see the time as
 * TIME gives it (sim_scripts.h). An aggregate key that loses its last member or field is deleted,
 * as Redis does. */
#ifndef SIM_DB_H
#define SIM_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_DB_PERSIST UINT64_MAX /* expire_us of a key without an expiry */

typedef enum { SIM_DB_STRING = 1, SIM_DB_ZSET, SIM_DB_HASH } sim_db_type;

/* A sorted set's member (name, score) or a hash's field (name, value). */
typedef struct sim_db_item {
    char *name;
    size_t name_len;
    char *value;
    size_t value_len;
    double score;
} sim_db_item;

typedef struct sim_db_key {
    char *name;
    size_t name_len;
    sim_db_type type;
    char *value; /* a string's */
    size_t value_len;
    sim_db_item *items; /* a zset's, by (score, name) ascending; a hash's, in insertion order */
    size_t n_items, cap_items;
    uint64_t expire_us; /* on the server's clock; SIM_DB_PERSIST: none */
    size_t mark;        /* the owner's (the simulation keeps its presence record here) */
    bool moved;         /* the owner's: set by a slot migration, cleared by the next SET */
} sim_db_key;

typedef struct sim_db sim_db;

/* Called when a command sets a string key (gone false: its value or expiry is new) or deletes
 * one (gone true). Not called for lazy expiry, sim_db_clear or sim_db_copy. */
typedef void (*sim_db_observer)(void *ctx, sim_db *db, sim_db_key *key, bool gone);

struct sim_db {
    sim_db_key **keys; /* each key on the heap: a key's address is stable while it lives */
    size_t n, cap;
    bool oom; /* an allocation failed: the keyspace may have lost a write */
    sim_db_observer observer;
    void *observer_ctx;
};

void sim_db_init(sim_db *db);
/* Forget every key (a restart without data, or before a copy); the observer is not called. */
void sim_db_clear(sim_db *db);
void sim_db_free(sim_db *db);
/* dst becomes a copy of src's keys (a replica's full sync); dst keeps its own observer. Returns
 * false without memory (dst then empty, oom set). */
bool sim_db_copy(sim_db *dst, const sim_db *src);

/* A copy of key (its type, content and expiry) into dst, replacing any key of its name there (a
 * slot migration's RESTORE); the observer sees a string. Returns false without memory. */
bool sim_db_restore(sim_db *dst, const sim_db_key *key);

/* The key named name, or NULL: absent, or expired at now_us (then removed). */
sim_db_key *sim_db_find(sim_db *db, const char *name, size_t len, uint64_t now_us);
/* The same without expiring anything (NULL only when absent). */
sim_db_key *sim_db_peek(const sim_db *db, const char *name, size_t len);

/* SET name value [expiry]: replaces whatever name was. Returns the key, or NULL without memory. */
sim_db_key *sim_db_set(sim_db *db, const char *name, size_t len, const char *value,
                       size_t value_len, uint64_t expire_us);
/* A new empty zset or hash named name (which must be absent); NULL without memory. Its first
 * member or field must follow: an empty aggregate does not exist in Redis. */
sim_db_key *sim_db_create(sim_db *db, const char *name, size_t len, sim_db_type type);
void sim_db_delete(sim_db *db, sim_db_key *key);
void sim_db_expire(sim_db *db, sim_db_key *key, uint64_t expire_us);
/* PTTL: -1 without an expiry, else the whole milliseconds left. */
int64_t sim_db_pttl(const sim_db_key *key, uint64_t now_us);

/* ZADD NX: adds member with score unless it is there. Returns false without memory. */
bool sim_db_zadd_nx(sim_db *db, sim_db_key *key, const char *member, size_t len, double score);
/* ZREM: removes member if there (the key goes with its last member). Returns whether it was. */
bool sim_db_zrem(sim_db *db, sim_db_key *key, const char *member, size_t len);

/* HGET: the field, or NULL. */
const sim_db_item *sim_db_hget(const sim_db_key *key, const char *field, size_t len);
/* HSET: returns false without memory. */
bool sim_db_hset(sim_db *db, sim_db_key *key, const char *field, size_t len, const char *value,
                 size_t value_len);
/* HDEL: returns whether it was there (the key goes with its last field). */
bool sim_db_hdel(sim_db *db, sim_db_key *key, const char *field, size_t len);

#endif
