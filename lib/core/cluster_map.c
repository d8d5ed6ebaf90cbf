/* SPDX-License-Identifier: MIT */
/* cluster_map.c - the slot map of a Redis Cluster node: loading CLUSTER SHARDS and CLUSTER SLOTS
 * replies, MOVED updates, MOVED / ASK texts (cluster_map.h).
 *
 * A load builds a whole new map beside the caller's and swaps it in only when the reply was
 * read to its end without a fault, so that a malformed reply can never leave half a topology
 * behind. Every reply element is checked for its type before it is read, and every string is
 * taken by its length, never by a NUL: the reply comes from the network. */
#include "cluster_map.h"

#include <stdarg.h>
#include <stdio.h>

/* ---- reply access that holds for hiredis 0.14 (RESP2) and 1.x (RESP3 too) ----------------- */

static int is_array(const redisReply *r)
{
    return r != NULL && r->type == REDIS_REPLY_ARRAY;
}

/* A key/value aggregate: RESP2 sends a flat array, RESP3 a map (hiredis 1.x flattens it the same
 * way: key, value, key, value). */
static int is_pairs(const redisReply *r)
{
    if (r == NULL)
        return 0;
#ifdef REDIS_REPLY_MAP
    if (r->type == REDIS_REPLY_MAP)
        return r->elements % 2 == 0;
#endif
    return r->type == REDIS_REPLY_ARRAY && r->elements % 2 == 0;
}

static int is_text(const redisReply *r)
{
    return r != NULL && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) &&
           (r->str != NULL || r->len == 0);
}

static int text_is(const redisReply *r, const char *s)
{
    size_t n = strlen(s);
    return is_text(r) && (size_t)r->len == n && memcmp(r->str, s, n) == 0;
}

/* An integer reply, or a string of 1..9 decimal digits (what some servers send for numbers). */
static int get_int(const redisReply *r, long long *out)
{
    if (r != NULL && r->type == REDIS_REPLY_INTEGER) {
        *out = r->integer;
        return 1;
    }
    if (!is_text(r) || r->len == 0 || r->len > 9)
        return 0;
    long long v = 0;
    for (size_t i = 0; i < (size_t)r->len; i++) {
        if (r->str[i] < '0' || r->str[i] > '9')
            return 0;
        v = v * 10 + (r->str[i] - '0');
    }
    *out = v;
    return 1;
}

/* Host names and node ids: printable ASCII, no space, within max bytes. */
static int printable(const char *s, size_t n, size_t max)
{
    if (n == 0 || n > max)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] > '~')
            return 0;
    return 1;
}

/* An endpoint the server knows: not NIL, not "", not "?". */
static int known_endpoint(const redisReply *r)
{
    return is_text(r) && r->len > 0 && !(r->len == 1 && r->str[0] == '?');
}

static int equal_nocase(const char *a, size_t a_len, const char *b)
{
    if (a_len != strlen(b))
        return 0;
    for (size_t i = 0; i < a_len; i++) {
        int x = (unsigned char)a[i], y = (unsigned char)b[i];
        if (x >= 'A' && x <= 'Z')
            x += 'a' - 'A';
        if (y >= 'A' && y <= 'Z')
            y += 'a' - 'A';
        if (x != y)
            return 0;
    }
    return 1;
}

/* ---- the map ------------------------------------------------------------------------------ */

void redlock__cluster_map_init(redlock__cluster_map *map, const redlock__alloc *a)
{
    map->alloc = *a;
    map->masters = NULL;
    map->masters_len = map->masters_cap = 0;
    memset(map->owner, 0xff, sizeof(map->owner)); /* every slot REDLOCK__CLUSTER_NO_MASTER */
}

void redlock__cluster_map_free(redlock__cluster_map *map)
{
    for (size_t i = 0; i < map->masters_len; i++) {
        redlock__free(&map->alloc, map->masters[i].host);
        redlock__free(&map->alloc, map->masters[i].id);
    }
    redlock__free(&map->alloc, map->masters);
    redlock__alloc a = map->alloc;
    redlock__cluster_map_init(map, &a);
}

int redlock__cluster_map_master(const redlock__cluster_map *map, unsigned slot)
{
    if (slot >= REDLOCK__CLUSTER_SLOTS || map->owner[slot] == REDLOCK__CLUSTER_NO_MASTER)
        return -1;
    return map->owner[slot];
}

static char *copy_text(const redlock__alloc *a, const char *s, size_t n)
{
    char *p = redlock__malloc(a, n + 1);
    if (p != NULL) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

static int find_by_address(const redlock__cluster_map *map, const char *host, size_t host_len,
                           int port)
{
    for (size_t i = 0; i < map->masters_len; i++) {
        const redlock__cluster_master *m = &map->masters[i];
        if (equal_nocase(host, host_len, m->host) &&
            (port == m->port || (m->tls_port != 0 && port == m->tls_port)))
            return (int)i;
    }
    return -1;
}

static int find_by_id(const redlock__cluster_map *map, const char *id, size_t id_len)
{
    for (size_t i = 0; i < map->masters_len; i++) {
        const char *m = map->masters[i].id;
        if (m != NULL && strlen(m) == id_len && memcmp(m, id, id_len) == 0)
            return (int)i;
    }
    return -1;
}

/* Append a master (host and id copied; id may be NULL). Returns its index or REDLOCK_ENOMEM; the
 * caller has checked the bound and that it is new. */
static int push_master(redlock__cluster_map *map, const char *host, size_t host_len, const char *id,
                       size_t id_len, int port, int tls_port, int online)
{
    if (map->masters_len == map->masters_cap) {
        size_t cap = map->masters_cap != 0 ? map->masters_cap * 2 : 4;
        cap = REDLOCK__MIN(cap, (size_t)REDLOCK__CLUSTER_MASTERS_MAX);
        redlock__cluster_master *p = redlock__realloc(&map->alloc, map->masters, cap * sizeof(*p));
        if (p == NULL)
            return REDLOCK_ENOMEM;
        map->masters = p;
        map->masters_cap = cap;
    }
    redlock__cluster_master m = {.port = port, .tls_port = tls_port, .online = online};
    m.host = copy_text(&map->alloc, host, host_len);
    m.id = id != NULL ? copy_text(&map->alloc, id, id_len) : NULL;
    if (m.host == NULL || (id != NULL && m.id == NULL)) {
        redlock__free(&map->alloc, m.host);
        redlock__free(&map->alloc, m.id);
        return REDLOCK_ENOMEM;
    }
    map->masters[map->masters_len] = m;
    return (int)map->masters_len++;
}

/* ---- loading ------------------------------------------------------------------------------ */

/* One load: the map being built, where messages go, and what names the reply in them. */
typedef struct loader {
    redlock__cluster_map *map;
    const char *what; /* "CLUSTER SHARDS" or "CLUSTER SLOTS" */
    const char *reply_host;
    char *err;
    size_t err_len;
} loader;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int
fail(loader *l, const char *fmt, ...)
{
    if (l->err_len > 0) {
        size_t n = redlock__text_fit(l->err, l->err_len, l->what, strlen(l->what));
        n += redlock__text_fit(l->err + n, l->err_len - n, ": ", 2);
        va_list ap;
        va_start(ap, fmt);
        redlock__vfmt(l->err + n, l->err_len - n, fmt, ap);
        va_end(ap);
    }
    return REDLOCK_EINVAL;
}

/* Where to connect to a master: its endpoint if known, else its ip, else the reply's host. */
static int pick_host(loader *l, const redisReply *endpoint, const redisReply *ip, const char **host,
                     size_t *host_len)
{
    const redisReply *r = known_endpoint(endpoint) ? endpoint : known_endpoint(ip) ? ip : NULL;
    if (r != NULL) {
        *host = r->str;
        *host_len = (size_t)r->len;
    } else if (l->reply_host != NULL) {
        *host = l->reply_host;
        *host_len = strlen(l->reply_host);
    } else {
        return 0;
    }
    return printable(*host, *host_len, REDLOCK__CLUSTER_HOST_MAX);
}

/* The master with this id and address, added when new. A master appears once per range in
 * CLUSTER SLOTS, so finding it again is normal; finding its id at another address, or its
 * address under another id, is not. */
static int master_index(loader *l, const char *host, size_t host_len, const char *id, size_t id_len,
                        int port, int tls_port, int online)
{
    redlock__cluster_map *map = l->map;
    int by_id = id != NULL ? find_by_id(map, id, id_len) : -1;
    int by_address = find_by_address(map, host, host_len, port != 0 ? port : tls_port);
    if (by_id >= 0 || by_address >= 0) {
        if (by_id != by_address && (id != NULL || by_address < 0))
            return fail(l, "one node id at two addresses, or two ids at one address (port %d)",
                        port != 0 ? port : tls_port);
        return by_address;
    }
    if (map->masters_len >= REDLOCK__CLUSTER_MASTERS_MAX)
        return fail(l, "more than %d masters", REDLOCK__CLUSTER_MASTERS_MAX);
    int i = push_master(map, host, host_len, id, id_len, port, tls_port, online);
    if (i < 0 && l->err_len > 0)
        redlock__fmt(l->err, l->err_len, "%s: out of memory", l->what);
    return i;
}

/* Give slots start..end to master i; a slot may be given once per load. */
static int own(loader *l, long long start, long long end, int i)
{
    if (start < 0 || end < 0 || start >= REDLOCK__CLUSTER_SLOTS || end >= REDLOCK__CLUSTER_SLOTS)
        return fail(l, "slot range %lld-%lld is outside 0-%d", start, end,
                    REDLOCK__CLUSTER_SLOTS - 1);
    if (end < start)
        return fail(l, "slot range %lld-%lld ends before it starts", start, end);
    for (long long s = start; s <= end; s++) {
        if (l->map->owner[s] != REDLOCK__CLUSTER_NO_MASTER)
            return fail(l, "slot %lld is owned twice", s);
        l->map->owner[s] = (uint16_t)i;
    }
    l->map->masters[i].slots += (uint32_t)(end - start + 1);
    return 0;
}

/* The fields of one CLUSTER SHARDS node that matter here; NULL when absent. */
typedef struct shard_node {
    const redisReply *id, *ip, *endpoint, *role, *health;
    long long port, tls_port;
} shard_node;

static int read_node(loader *l, size_t shard, size_t n, const redisReply *r, shard_node *node)
{
    memset(node, 0, sizeof(*node));
    if (!is_pairs(r))
        return fail(l, "shard %zu: node %zu is not a list of fields and values", shard, n);
    for (size_t k = 0; k + 1 < r->elements; k += 2) {
        const redisReply *key = r->element[k], *value = r->element[k + 1];
        if (!is_text(key))
            return fail(l, "shard %zu: node %zu: a field name is not a string", shard, n);
        const redisReply **text = NULL;
        long long *number = NULL;
        if (text_is(key, "id"))
            text = &node->id;
        else if (text_is(key, "ip"))
            text = &node->ip;
        else if (text_is(key, "endpoint"))
            text = &node->endpoint;
        else if (text_is(key, "role"))
            text = &node->role;
        else if (text_is(key, "health"))
            text = &node->health;
        else if (text_is(key, "port"))
            number = &node->port;
        else if (text_is(key, "tls-port"))
            number = &node->tls_port;
        if (text != NULL && !is_text(value))
            return fail(l, "shard %zu: node %zu: field %.*s is not a string", shard, n,
                        (int)key->len, key->str);
        if (text != NULL)
            *text = value;
        if (number != NULL && (!get_int(value, number) || *number < 0 || *number > 65535))
            return fail(l, "shard %zu: node %zu: field %.*s is not a port number", shard, n,
                        (int)key->len, key->str);
    }
    return 0;
}

static int load_shard(loader *l, size_t shard, const redisReply *r)
{
    if (!is_pairs(r))
        return fail(l, "shard %zu is not a list of fields and values", shard);
    const redisReply *slots = NULL, *nodes = NULL;
    for (size_t k = 0; k + 1 < r->elements; k += 2) {
        const redisReply *key = r->element[k];
        if (!is_text(key))
            return fail(l, "shard %zu: a field name is not a string", shard);
        const redisReply **field = text_is(key, "slots")   ? &slots
                                   : text_is(key, "nodes") ? &nodes
                                                           : NULL;
        if (field != NULL && *field != NULL)
            return fail(l, "shard %zu: field %.*s twice", shard, (int)key->len, key->str);
        if (field != NULL)
            *field = r->element[k + 1];
    }
    if (slots == NULL || nodes == NULL)
        return fail(l, "shard %zu has no %s", shard, slots == NULL ? "slots" : "nodes");
    if (!is_array(slots) || slots->elements % 2 != 0)
        return fail(l, "shard %zu: slots is not a list of start, end pairs", shard);
    if (!is_array(nodes))
        return fail(l, "shard %zu: nodes is not a list", shard);

    shard_node master = {0};
    int masters = 0;
    for (size_t n = 0; n < nodes->elements; n++) {
        shard_node node;
        int rc = read_node(l, shard, n, nodes->element[n], &node);
        if (rc != 0)
            return rc;
        if (node.role == NULL)
            return fail(l, "shard %zu: node %zu has no role", shard, n);
        if (text_is(node.role, "master")) {
            master = node;
            masters++;
        }
    }
    if (slots->elements == 0)
        return 0; /* nothing to route there */
    if (masters != 1)
        return fail(l, "shard %zu owns slots but has %s", shard,
                    masters == 0 ? "no master" : "more than one master");
    if (master.id == NULL || !printable(master.id->str, master.id->len, REDLOCK__CLUSTER_ID_MAX))
        return fail(l, "shard %zu: the master has no valid id", shard);
    if (master.health == NULL)
        return fail(l, "shard %zu: the master has no health", shard);
    if (master.port == 0 && master.tls_port == 0)
        return fail(l, "shard %zu: the master has no port", shard);
    const char *host;
    size_t host_len;
    if (!pick_host(l, master.endpoint, master.ip, &host, &host_len))
        return fail(l, "shard %zu: the master has no valid endpoint or ip", shard);

    /* A node masters one shard: met again, the reply contradicts itself. */
    int port = (int)(master.port != 0 ? master.port : master.tls_port);
    if (find_by_id(l->map, master.id->str, master.id->len) >= 0 ||
        find_by_address(l->map, host, host_len, port) >= 0)
        return fail(l, "shard %zu: its master masters another shard too", shard);
    int i = master_index(l, host, host_len, master.id->str, master.id->len, (int)master.port,
                         (int)master.tls_port, text_is(master.health, "online"));
    if (i < 0)
        return i;
    long long previous_end = -1;
    for (size_t k = 0; k < slots->elements; k += 2) {
        long long start, end;
        if (!get_int(slots->element[k], &start) || !get_int(slots->element[k + 1], &end))
            return fail(l, "shard %zu: a slot is not a number", shard);
        if (start <= previous_end && start >= 0)
            return fail(l, "shard %zu: slot range %lld-%lld is out of order", shard, start, end);
        int rc = own(l, start, end, i);
        if (rc != 0)
            return rc;
        previous_end = end;
    }
    return 0;
}

/* One CLUSTER SLOTS entry: start, end, master [host, port, id, ...], replicas... */
static int load_slot_range(loader *l, size_t e, const redisReply *r)
{
    long long start, end, port;
    if (!is_array(r) || r->elements < 3)
        return fail(l, "entry %zu is not a list of start, end, master", e);
    if (!get_int(r->element[0], &start) || !get_int(r->element[1], &end))
        return fail(l, "entry %zu: a slot is not a number", e);
    for (size_t k = 3; k < r->elements; k++)
        if (!is_array(r->element[k]))
            return fail(l, "entry %zu: replica %zu is not a list", e, k - 3);
    const redisReply *m = r->element[2];
    if (!is_array(m) || m->elements < 2)
        return fail(l, "entry %zu: the master is not a list of host, port", e);
    if (!get_int(m->element[1], &port) || port < 1 || port > 65535)
        return fail(l, "entry %zu: the master's port is not a port number", e);
    const redisReply *host_reply = m->element[0];
    if (host_reply == NULL || (host_reply->type != REDIS_REPLY_NIL && !is_text(host_reply)))
        return fail(l, "entry %zu: the master's host is not a string", e);
    const char *id = NULL;
    size_t id_len = 0;
    if (m->elements >= 3) {
        if (!is_text(m->element[2]) ||
            !printable(m->element[2]->str, m->element[2]->len, REDLOCK__CLUSTER_ID_MAX))
            return fail(l, "entry %zu: the master's id is not valid", e);
        id = m->element[2]->str;
        id_len = m->element[2]->len;
    }
    const char *host;
    size_t host_len;
    if (!pick_host(l, host_reply, NULL, &host, &host_len))
        return fail(l, "entry %zu: the master has no valid host", e);
    int i = master_index(l, host, host_len, id, id_len, (int)port, 0, 1);
    return i < 0 ? i : own(l, start, end, i);
}

/* Both replies are a list whose elements are read one by one. */
static int load_each(loader *l, const redisReply *reply, const char *what,
                     int (*one)(loader *, size_t, const redisReply *))
{
    if (!is_array(reply))
        return fail(l, "the reply is not a list of %s (type %d)", what, reply->type);
    for (size_t i = 0; i < reply->elements; i++) {
        int rc = one(l, i, reply->element[i]);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int load(redlock__cluster_map *map, const redisReply *reply, const char *reply_host,
                char *err, size_t err_len, int shards)
{
    char scratch[1];
    redlock__err_start(&err, &err_len, scratch, sizeof(scratch));
    loader l = {.what = shards ? "CLUSTER SHARDS" : "CLUSTER SLOTS",
                .reply_host = reply_host,
                .err = err,
                .err_len = err_len};
    if (reply == NULL)
        return fail(&l, "no reply");
    if (reply->type == REDIS_REPLY_ERROR)
        return fail(&l, "the server answered with an error: %.*s", (int)reply->len,
                    reply->str != NULL ? reply->str : "");
    l.map = redlock__malloc(&map->alloc, sizeof(*l.map));
    if (l.map == NULL) {
        fail(&l, "out of memory");
        return REDLOCK_ENOMEM;
    }
    redlock__cluster_map_init(l.map, &map->alloc);
    int rc = shards ? load_each(&l, reply, "shards", load_shard)
                    : load_each(&l, reply, "slot ranges", load_slot_range);
    if (rc == 0) {
        redlock__cluster_map_free(map);
        memcpy(map, l.map, sizeof(*map));
    } else {
        redlock__cluster_map_free(l.map);
    }
    redlock__free(&map->alloc, l.map);
    return rc;
}

int redlock__cluster_map_load_shards(redlock__cluster_map *map, const redisReply *reply,
                                     const char *reply_host, char *err, size_t err_len)
{
    return load(map, reply, reply_host, err, err_len, 1);
}

int redlock__cluster_map_load_slots(redlock__cluster_map *map, const redisReply *reply,
                                    const char *reply_host, char *err, size_t err_len)
{
    return load(map, reply, reply_host, err, err_len, 0);
}

/* ---- redirects ---------------------------------------------------------------------------- */

int redlock__cluster_map_moved(redlock__cluster_map *map, unsigned slot, const char *host, int port)
{
    if (slot >= REDLOCK__CLUSTER_SLOTS || port < 1 || port > 65535 || host == NULL)
        return REDLOCK_EINVAL;
    size_t host_len = strlen(host);
    if (!printable(host, host_len, REDLOCK__CLUSTER_HOST_MAX))
        return REDLOCK_EINVAL;
    int i = find_by_address(map, host, host_len, port);
    if (i < 0) {
        if (map->masters_len >= REDLOCK__CLUSTER_MASTERS_MAX)
            return REDLOCK_ENOMEM;
        i = push_master(map, host, host_len, NULL, 0, port, 0, 1);
        if (i < 0)
            return i;
    }
    uint16_t old = map->owner[slot];
    if (old != REDLOCK__CLUSTER_NO_MASTER)
        map->masters[old].slots--;
    map->owner[slot] = (uint16_t)i;
    map->masters[i].slots++;
    return i;
}

/* Decimal digits at *p (at most max_digits, no sign), value into *out. */
static int parse_number(const char **p, const char *end, size_t max_digits, long *out)
{
    const char *s = *p;
    long v = 0;
    size_t digits = 0;
    while (s < end && *s >= '0' && *s <= '9' && digits < max_digits) {
        v = v * 10 + (*s - '0');
        s++;
        digits++;
    }
    if (digits == 0 || (s < end && *s >= '0' && *s <= '9'))
        return 0;
    *p = s;
    *out = v;
    return 1;
}

int redlock__cluster_map_parse_redirect(const char *text, size_t len, redlock__redirect *out)
{
    memset(out, 0, sizeof(*out));
    if (text == NULL)
        return 0;
    redlock__redirect_kind kind;
    size_t skip;
    if (len >= 6 && memcmp(text, "MOVED ", 6) == 0) {
        kind = REDLOCK__REDIRECT_MOVED;
        skip = 6;
    } else if (len >= 4 && memcmp(text, "ASK ", 4) == 0) {
        kind = REDLOCK__REDIRECT_ASK;
        skip = 4;
    } else {
        return 0;
    }
    const char *p = text + skip, *end = text + len;
    long slot, port;
    if (!parse_number(&p, end, 5, &slot) || slot >= REDLOCK__CLUSTER_SLOTS || p == end || *p != ' ')
        return REDLOCK_EINVAL;
    p++;
    const char *colon = NULL;
    for (const char *c = p; c < end; c++)
        if (*c == ':')
            colon = c;
    if (colon == NULL)
        return REDLOCK_EINVAL;
    const char *q = colon + 1;
    if (!parse_number(&q, end, 5, &port) || q != end || port < 1 || port > 65535)
        return REDLOCK_EINVAL;
    const char *host = p;
    size_t host_len = (size_t)(colon - p);
    if (host_len >= 2 && host[0] == '[' && host[host_len - 1] == ']') {
        host++;
        host_len -= 2;
    }
    if (host_len > 0 && !printable(host, host_len, REDLOCK__CLUSTER_HOST_MAX))
        return REDLOCK_EINVAL;
    out->kind = kind;
    out->slot = (uint16_t)slot;
    out->port = (int)port;
    memcpy(out->host, host, host_len);
    out->host[host_len] = '\0';
    return 1;
}

int redlock__cluster_map_master_port(const redlock__cluster_master *m, bool tls, bool from_slots)
{
    if (!tls)
        return m->port;
    if (m->tls_port != 0)
        return m->tls_port;
    return from_slots || m->id == NULL ? m->port : 0;
}
