/* SPDX-License-Identifier: MIT */
/* sim_db.c - a simulated Redis server's keyspace (sim_db.h). */
#include "sim_db.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void sim_db_init(sim_db *db)
{
    memset(db, 0, sizeof(*db));
}

static void free_items(sim_db_key *k)
{
    for (size_t i = 0; i < k->n_items; i++) {
        free(k->items[i].name);
        free(k->items[i].value);
    }
    free(k->items);
    k->items = NULL;
    k->n_items = k->cap_items = 0;
}

static void free_key(sim_db_key *k)
{
    free_items(k);
    free(k->name);
    free(k->value);
    free(k);
}

void sim_db_clear(sim_db *db)
{
    for (size_t i = 0; i < db->n; i++)
        free_key(db->keys[i]);
    db->n = 0;
}

void sim_db_free(sim_db *db)
{
    sim_db_clear(db);
    free(db->keys);
    db->keys = NULL;
    db->cap = 0;
}

static char *dup_bytes(const char *p, size_t len)
{
    char *d = malloc(len + 1);
    if (d != NULL) {
        if (len > 0)
            memcpy(d, p, len);
        d[len] = '\0';
    }
    return d;
}

static size_t index_of(const sim_db *db, const sim_db_key *k)
{
    for (size_t i = 0; i < db->n; i++)
        if (db->keys[i] == k)
            return i;
    return SIZE_MAX;
}

/* Drop k from the keyspace (no observer). */
static void unlink_key(sim_db *db, sim_db_key *k)
{
    size_t i = index_of(db, k);
    if (i == SIZE_MAX)
        return;
    db->keys[i] = db->keys[--db->n];
    free_key(k);
}

sim_db_key *sim_db_peek(const sim_db *db, const char *name, size_t len)
{
    for (size_t i = 0; i < db->n; i++) {
        sim_db_key *k = db->keys[i];
        if (k->name_len == len && memcmp(k->name, name, len) == 0)
            return k;
    }
    return NULL;
}

sim_db_key *sim_db_find(sim_db *db, const char *name, size_t len, uint64_t now_us)
{
    sim_db_key *k = sim_db_peek(db, name, len);
    if (k != NULL && k->expire_us != SIM_DB_PERSIST && now_us > k->expire_us) {
        unlink_key(db, k);
        return NULL;
    }
    return k;
}

static sim_db_key *new_key(sim_db *db, const char *name, size_t len, sim_db_type type)
{
    if (db->n == db->cap) {
        size_t cap = db->cap != 0 ? db->cap * 2 : 16;
        sim_db_key **v = realloc(db->keys, cap * sizeof(*v));
        if (v == NULL) {
            db->oom = true;
            return NULL;
        }
        db->keys = v;
        db->cap = cap;
    }
    sim_db_key *k = calloc(1, sizeof(*k));
    char *copy = dup_bytes(name, len);
    if (k == NULL || copy == NULL) {
        free(k);
        free(copy);
        db->oom = true;
        return NULL;
    }
    k->name = copy;
    k->name_len = len;
    k->type = type;
    k->expire_us = SIM_DB_PERSIST;
    k->mark = SIZE_MAX;
    db->keys[db->n++] = k;
    return k;
}

sim_db_key *sim_db_create(sim_db *db, const char *name, size_t len, sim_db_type type)
{
    return new_key(db, name, len, type);
}

sim_db_key *sim_db_set(sim_db *db, const char *name, size_t len, const char *value,
                       size_t value_len, uint64_t expire_us)
{
    char *v = dup_bytes(value, value_len);
    if (v == NULL) {
        db->oom = true;
        return NULL;
    }
    sim_db_key *k = sim_db_peek(db, name, len);
    if (k == NULL) {
        k = new_key(db, name, len, SIM_DB_STRING);
        if (k == NULL) {
            free(v);
            return NULL;
        }
    }
    free_items(k); /* a SET replaces a key of any type */
    free(k->value);
    k->type = SIM_DB_STRING;
    k->value = v;
    k->value_len = value_len;
    k->expire_us = expire_us;
    k->moved = false;
    if (db->observer != NULL)
        db->observer(db->observer_ctx, db, k, false);
    return k;
}

void sim_db_delete(sim_db *db, sim_db_key *k)
{
    if (k->type == SIM_DB_STRING && db->observer != NULL)
        db->observer(db->observer_ctx, db, k, true);
    unlink_key(db, k);
}

void sim_db_expire(sim_db *db, sim_db_key *k, uint64_t expire_us)
{
    k->expire_us = expire_us;
    if (k->type == SIM_DB_STRING && db->observer != NULL)
        db->observer(db->observer_ctx, db, k, false);
}

int64_t sim_db_pttl(const sim_db_key *k, uint64_t now_us)
{
    if (k->expire_us == SIM_DB_PERSIST)
        return -1;
    return k->expire_us > now_us ? (int64_t)((k->expire_us - now_us) / 1000) : 0;
}

/* Redis orders a sorted set by score, then by member as bytes (the shorter first on a tie). */
static int member_cmp(const sim_db_item *a, double score, const char *name, size_t len)
{
    if (a->score != score)
        return a->score < score ? -1 : 1;
    size_t n = a->name_len < len ? a->name_len : len;
    int c = n > 0 ? memcmp(a->name, name, n) : 0;
    if (c != 0)
        return c;
    return a->name_len < len ? -1 : a->name_len > len;
}

static sim_db_item *find_item(const sim_db_key *k, const char *name, size_t len)
{
    for (size_t i = 0; i < k->n_items; i++)
        if (k->items[i].name_len == len && memcmp(k->items[i].name, name, len) == 0)
            return &k->items[i];
    return NULL;
}

static bool grow_items(sim_db *db, sim_db_key *k)
{
    if (k->n_items < k->cap_items)
        return true;
    size_t cap = k->cap_items != 0 ? k->cap_items * 2 : 4;
    sim_db_item *v = realloc(k->items, cap * sizeof(*v));
    if (v == NULL) {
        db->oom = true;
        return false;
    }
    k->items = v;
    k->cap_items = cap;
    return true;
}

bool sim_db_zadd_nx(sim_db *db, sim_db_key *k, const char *member, size_t len, double score)
{
    if (find_item(k, member, len) != NULL)
        return true;
    char *name = dup_bytes(member, len);
    if (name == NULL || !grow_items(db, k)) {
        free(name);
        db->oom = true;
        return false;
    }
    size_t at = 0;
    while (at < k->n_items && member_cmp(&k->items[at], score, member, len) < 0)
        at++;
    memmove(&k->items[at + 1], &k->items[at], (k->n_items - at) * sizeof(k->items[0]));
    k->items[at] = (sim_db_item){name, len, NULL, 0, score};
    k->n_items++;
    return true;
}

/* Remove item i of k; k goes with its last item. */
static void remove_item(sim_db *db, sim_db_key *k, size_t i)
{
    free(k->items[i].name);
    free(k->items[i].value);
    memmove(&k->items[i], &k->items[i + 1], (k->n_items - i - 1) * sizeof(k->items[0]));
    k->n_items--;
    if (k->n_items == 0)
        unlink_key(db, k);
}

bool sim_db_zrem(sim_db *db, sim_db_key *k, const char *member, size_t len)
{
    sim_db_item *it = find_item(k, member, len);
    if (it == NULL)
        return false;
    remove_item(db, k, (size_t)(it - k->items));
    return true;
}

const sim_db_item *sim_db_hget(const sim_db_key *k, const char *field, size_t len)
{
    return find_item(k, field, len);
}

bool sim_db_hset(sim_db *db, sim_db_key *k, const char *field, size_t len, const char *value,
                 size_t value_len)
{
    char *v = dup_bytes(value, value_len);
    if (v == NULL) {
        db->oom = true;
        return false;
    }
    sim_db_item *it = find_item(k, field, len);
    if (it != NULL) {
        free(it->value);
        it->value = v;
        it->value_len = value_len;
        return true;
    }
    char *name = dup_bytes(field, len);
    if (name == NULL || !grow_items(db, k)) {
        free(name);
        free(v);
        db->oom = true;
        return false;
    }
    k->items[k->n_items++] = (sim_db_item){name, len, v, value_len, 0};
    return true;
}

bool sim_db_hdel(sim_db *db, sim_db_key *k, const char *field, size_t len)
{
    sim_db_item *it = find_item(k, field, len);
    if (it == NULL)
        return false;
    remove_item(db, k, (size_t)(it - k->items));
    return true;
}

/* A copy of s in dst (which has no key of that name), without the observer. */
static bool copy_key(sim_db *dst, const sim_db_key *s)
{
    sim_db_key *k = new_key(dst, s->name, s->name_len, s->type);
    if (k == NULL)
        return false;
    k->expire_us = s->expire_us;
    if (s->type == SIM_DB_STRING) {
        k->value = dup_bytes(s->value, s->value_len);
        k->value_len = s->value_len;
        return k->value != NULL;
    }
    for (size_t j = 0; j < s->n_items; j++) {
        const sim_db_item *it = &s->items[j];
        if (!grow_items(dst, k))
            return false;
        sim_db_item copy = {dup_bytes(it->name, it->name_len), it->name_len, NULL, 0, it->score};
        if (it->value != NULL) {
            copy.value = dup_bytes(it->value, it->value_len);
            copy.value_len = it->value_len;
        }
        k->items[k->n_items++] = copy;
        if (copy.name == NULL || (it->value != NULL && copy.value == NULL))
            return false;
    }
    return true;
}

bool sim_db_copy(sim_db *dst, const sim_db *src)
{
    sim_db_clear(dst);
    for (size_t i = 0; i < src->n; i++) {
        if (!copy_key(dst, src->keys[i])) {
            sim_db_clear(dst);
            dst->oom = true;
            return false;
        }
    }
    return true;
}

bool sim_db_restore(sim_db *dst, const sim_db_key *key)
{
    sim_db_key *old = sim_db_peek(dst, key->name, key->name_len);
    if (old != NULL)
        sim_db_delete(dst, old);
    if (key->type == SIM_DB_STRING)
        return sim_db_set(dst, key->name, key->name_len, key->value, key->value_len,
                          key->expire_us) != NULL;
    if (!copy_key(dst, key)) {
        dst->oom = true;
        return false;
    }
    return true;
}
