/* SPDX-License-Identifier: MIT */
/* check_cluster.c - "redlock check" of a cluster:// node (issue 14, docs/cluster.md).
 *
 * A cluster is one vote, cast by whichever master owns the lock key's slot, so every master that
 * owns slots must be fit to hold locks: the check asks the URL's host for the slot map (CLUSTER
 * SHARDS, or CLUSTER SLOTS before Redis 7, loaded by lib/core/cluster_map.c as the library loads
 * it), else each seed in turn, reads the cluster's state on the same connection (CLUSTER INFO),
 * counts the slots no master owns, and runs the per-server checks of check.c on every master with a
 * probe key in one of its slots, so that none of its commands is answered MOVED. With
 * wait_replicas=N in the URL each master must have N connected replicas. */
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_allow.h"
#include "cluster_map.h"
#include "command.h" /* the suffixes of a lock's other keys */
#include "scrub.h"
#include "slot.h"

/* The most candidate keys tried for the masters' probe keys. A master owning one slot of 16384
 * is missed after 2^20 tries with probability e^-64; an even split of 3 masters needs about
 * 16384 * ln 3 / 3. */
#define KEY_TRIES (1u << 20)

static void format_address(char *out, size_t len, const char *host, int port)
{
    if (strchr(host, ':') != NULL) /* IPv6 */
        snprintf(out, len, "[%s]:%d", host, port);
    else
        snprintf(out, len, "%s:%d", host, port);
}

/* ---- the cluster itself -------------------------------------------------------------------- */

static bool unknown_command(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && (strstr(r->str, "nknown subcommand") != NULL ||
                                            strstr(r->str, "nknown command") != NULL);
}

/* CLUSTER SHARDS (CLUSTER SLOTS on a server that does not know it, as the library does) on ctx,
 * loaded into map. false with an error noted in asked. */
static bool load_map(server_check *asked, check_conn *ctx, redlock__cluster_map *map,
                     bool *used_slots)
{
    const char *shards[] = {"CLUSTER", "SHARDS"}, *slots[] = {"CLUSTER", "SLOTS"};
    bool old = false;
    redisReply *r = check_command(asked, ctx, 2, shards, NULL);
    if (r != NULL && unknown_command(r)) {
        freeReplyObject(r);
        old = true;
        r = check_command(asked, ctx, 2, slots, NULL);
    }
    if (r == NULL)
        return false;
    const char *what = old ? "CLUSTER SLOTS" : "CLUSTER SHARDS";
    char text[256], why[256];
    bool ok = false;
    if (r->type == REDIS_REPLY_ERROR) {
        check_reply_text(r, text, sizeof(text));
        if (strncmp(r->str, "NOPERM", 6) == 0)
            check_note(&asked->errors,
                       "%s is not allowed for this user: the client learns the cluster's slots "
                       "with it (allow +cluster|shards +cluster|slots)",
                       what);
        else if (strncmp(r->str, "NOAUTH", 6) == 0)
            check_note(&asked->errors, "the server wants a password (NOAUTH): give it in the URL");
        else if (strstr(r->str, "cluster support disabled") != NULL)
            check_note(&asked->errors,
                       "is not in cluster mode (%s: %s): give a standalone master as redis://",
                       what, text);
        else
            check_note(&asked->errors, "%s failed: %s", what, text);
    } else {
        int rc = old ? redlock__cluster_map_load_slots(map, r, asked->host, why, sizeof(why))
                     : redlock__cluster_map_load_shards(map, r, asked->host, why, sizeof(why));
        ok = rc == 0;
        if (rc == REDLOCK_ENOMEM)
            check_note(&asked->errors, "out of memory for the slot map");
        else if (rc != 0)
            check_note(&asked->errors, "its %s reply does not parse: %s", what, why);
    }
    freeReplyObject(r);
    *used_slots = old;
    return ok;
}

/* cluster_state from CLUSTER INFO on the connection that gave the map. Not ok: the cluster
 * refuses commands. CLUSTER INFO is not a right the library needs, so a refusal is a warning. */
static void read_state(node_check *nc, server_check *asked, check_conn *ctx)
{
    const char *argv[] = {"CLUSTER", "INFO"};
    redisReply *r = check_command(asked, ctx, 2, argv, NULL);
    if (r == NULL) {
        check_note(&nc->errors, "%s: %s", asked->address,
                   asked->errors.n > 0 ? asked->errors.text[asked->errors.n - 1] : "no answer");
        return;
    }
    char text[256];
    const char *at = r->type == REDIS_REPLY_STRING ? strstr(r->str, "cluster_state:") : NULL;
    if (at != NULL) {
        at += strlen("cluster_state:");
        snprintf(nc->cluster_state, sizeof(nc->cluster_state), "%.*s", (int)strcspn(at, "\r\n"),
                 at);
        redlock__scrub(nc->cluster_state, strlen(nc->cluster_state), NULL);
    } else if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOPERM", 6) == 0) {
        check_note(&nc->warnings,
                   "CLUSTER INFO is not allowed for this user: the check cannot tell the "
                   "cluster's state (the library does not need it)");
    } else {
        check_note(&nc->warnings, "CLUSTER INFO on %s answered %s", asked->address,
                   r->type == REDIS_REPLY_ERROR ? check_reply_text(r, text, sizeof(text))
                                                : "without a cluster_state");
    }
    freeReplyObject(r);
    if (nc->cluster_state[0] != '\0' && strcmp(nc->cluster_state, "ok") != 0)
        check_note(&nc->errors,
                   "cluster_state is %s (CLUSTER INFO on %s): the cluster refuses commands "
                   "until it is ok again",
                   nc->cluster_state, asked->address);
}

/* The slot map from the URL's host, else from each seed in turn, as the client asks them; then
 * the cluster's state from the same server. Returns true when a map was loaded (*used_slots:
 * from CLUSTER SLOTS). Servers that did not give one are warnings when another did, errors when
 * none did. */
static bool ask_cluster(checker *ck, node_check *nc, redlock__cluster_map *map, uint64_t timeout_ms,
                        bool *used_slots)
{
    const redlock_url *u = &nc->url;
    unsigned n_seeds = 0;
    while (u->seeds != NULL && u->seeds[n_seeds].host != NULL)
        n_seeds++;
    server_check *asked = malloc(sizeof(*asked));
    notes *failed = calloc(1, sizeof(*failed));
    bool loaded = false;
    for (unsigned i = 0; asked != NULL && failed != NULL && i <= n_seeds && !loaded; i++) {
        memset(asked, 0, sizeof(*asked));
        check_server_init(asked, timeout_ms);
        asked->host = i == 0 ? u->host : u->seeds[i - 1].host;
        asked->port = i == 0 ? u->port : u->seeds[i - 1].port;
        asked->user = u->user;
        asked->password = u->password;
        asked->tls = u->tls ? ck->tls : NULL;
        format_address(asked->address, sizeof(asked->address), asked->host, asked->port);
        check_conn *ctx = check_connect(asked);
        loaded =
            ctx != NULL && check_log_in(ck, asked, ctx) && load_map(asked, ctx, map, used_slots);
        if (loaded) {
            snprintf(nc->asked, sizeof(nc->asked), "%s", asked->address);
            read_state(nc, asked, ctx);
        } else {
            check_note(failed, "%s: %s", asked->address,
                       asked->errors.n > 0 ? asked->errors.text[0] : "no answer");
        }
        check_conn_close(ctx);
    }
    if (asked == NULL || failed == NULL)
        check_note(&nc->errors, "out of memory");
    for (unsigned k = 0; failed != NULL && k < failed->n; k++) {
        if (loaded)
            check_note(&nc->warnings,
                       "no slot map from %s; the next server gave one, as the client would ask it",
                       failed->text[k]);
        else
            check_note(&nc->errors, "no slot map from %s", failed->text[k]);
    }
    free(asked);
    free(failed);
    return loaded;
}

/* Slots no master owns: a lock whose key lies there gets an error vote from this cluster. */
static void judge_coverage(node_check *nc, const redlock__cluster_map *map)
{
    unsigned covered = 0, gap_start = REDLOCK__CLUSTER_SLOTS, gap_end = 0;
    for (unsigned slot = 0; slot < REDLOCK__CLUSTER_SLOTS; slot++) {
        if (map->owner[slot] != REDLOCK__CLUSTER_NO_MASTER)
            covered++;
        else if (gap_start == REDLOCK__CLUSTER_SLOTS)
            gap_start = gap_end = slot;
        else if (gap_end == slot - 1)
            gap_end = slot;
    }
    nc->slots_covered = covered;
    if (covered == 0)
        check_note(&nc->errors, "no master owns a slot: the cluster cannot hold a lock");
    else if (covered < REDLOCK__CLUSTER_SLOTS)
        check_note(&nc->warnings,
                   "%u of %u slots have no master (the first: %u-%u): a lock whose key lies "
                   "there gets an error vote from this cluster (assign them: CLUSTER ADDSLOTS)",
                   REDLOCK__CLUSTER_SLOTS - covered, REDLOCK__CLUSTER_SLOTS, gap_start, gap_end);
}

/* ---- its masters --------------------------------------------------------------------------- */

/* The lock's other keys (its fencing counter, a waiter's queue and deadlines) in key's slot. */
static bool suffixes_share_slot(const char *key, size_t len, unsigned slot)
{
    static const char *const suffixes[] = {REDLOCK__FENCE_SUFFIX, REDLOCK__QUEUE_SUFFIX,
                                           REDLOCK__DUE_SUFFIX};
    for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
        char other[CHECK_KEY_LEN + 16];
        int n = snprintf(other, sizeof(other), "%.*s%s", (int)len, key, suffixes[i]);
        if (n < 0 || (size_t)n >= sizeof(other) || redlock__slot_of_key(other, (size_t)n) != slot)
            return false;
    }
    return true;
}

/* One probe key per master, in one of its slots: PREFIX + "redlock-check-{" + 16 hex digits +
 * "}". The hash tag keeps the key's :fence, :queue and :queue-due keys in its slot, as the
 * cluster requires of the scripts and commands tried on them; the digits (the token's first 8,
 * then a counter) change until every master has a key. A prefix with a hash tag of its own puts
 * every key under it in one slot: only that slot's master gets a key, and the others, which
 * hold none of those locks, are not probed (their probe_key stays null). index: the server of
 * each map master, or -1. */
static void choose_probe_keys(const checker *ck, node_check *nc, const redlock__cluster_map *map,
                              const int *index)
{
    char key[CHECK_KEY_LEN];
    int head = snprintf(key, sizeof(key), "%.256sredlock-check-{", ck->args->prefix);
    size_t fixed = (size_t)head;
    unsigned left = nc->n_servers;
    uint32_t tries = KEY_TRIES;
    for (uint32_t i = 0; i < tries && left > 0; i++) {
        int tail =
            snprintf(key + fixed, sizeof(key) - fixed, "%.8s%08x}", ck->probe_token, (unsigned)i);
        size_t len = fixed + (size_t)tail, tag_start, tag_len;
        if (i == 0 && redlock__slot_hash_tag(key, len, &tag_start, &tag_len) &&
            tag_start + tag_len < fixed)
            tries = 1; /* the prefix's tag decides the slot */
        unsigned slot = redlock__slot_of_key(key, len);
        int m = redlock__cluster_map_master(map, slot);
        if (m < 0 || index[m] < 0 || nc->servers[index[m]].probe_key[0] != '\0' ||
            !suffixes_share_slot(key, len, slot))
            continue;
        memcpy(nc->servers[index[m]].probe_key, key, len + 1);
        left--;
    }
    for (unsigned k = 0; k < nc->n_servers && tries > 1; k++)
        if (nc->servers[k].probe_key[0] == '\0')
            check_note(&nc->servers[k].warnings,
                       "no probe key in its slots was found in %u tries: its commands were not "
                       "tried",
                       (unsigned)tries);
}

/* check_server on every master that owns slots, as the client reaches it: its address from the
 * map (the port for the URL's kind of connection), the URL's user and password, TLS for a
 * clusters:// URL, the cluster's timeout. They are listed in slot order (the master of the
 * lowest slot first), whatever order the topology reply had. */
static int check_masters(checker *ck, node_check *nc, const redlock__cluster_map *map,
                         uint64_t timeout_ms, bool used_slots)
{
    unsigned n = 0;
    for (size_t m = 0; m < map->masters_len; m++)
        n += map->masters[m].slots > 0;
    if (n == 0)
        return 0; /* judge_coverage said so */
    int *index = malloc(map->masters_len * sizeof(*index));
    nc->servers = calloc(n, sizeof(*nc->servers));
    if (index == NULL || nc->servers == NULL) {
        free(index);
        fprintf(stderr, "redlock: out of memory\n");
        return -1;
    }
    nc->n_servers = n;
    for (size_t m = 0; m < map->masters_len; m++)
        index[m] = -1;
    unsigned k = 0;
    for (unsigned slot = 0; slot < REDLOCK__CLUSTER_SLOTS && k < n; slot++) {
        int m = redlock__cluster_map_master(map, slot);
        if (m < 0 || index[m] >= 0)
            continue;
        const redlock__cluster_master *master = &map->masters[m];
        index[m] = (int)k;
        server_check *sc = &nc->servers[k++];
        check_server_init(sc, timeout_ms);
        sc->host = master->host;
        sc->port = redlock__cluster_map_master_port(master, nc->url.tls, used_slots);
        sc->user = nc->url.user;
        sc->password = nc->url.password;
        sc->tls = nc->url.tls ? ck->tls : NULL;
        sc->in_cluster = true;
        sc->wait_replicas = nc->url.wait_replicas;
        sc->slots = master->slots;
        sc->online = master->online != 0;
        format_address(sc->address, sizeof(sc->address), master->host,
                       sc->port != 0       ? sc->port
                       : master->port != 0 ? master->port
                                           : master->tls_port);
    }
    choose_probe_keys(ck, nc, map, index);
    free(index);
    for (k = 0; k < n; k++) {
        server_check *sc = &nc->servers[k];
        if (!sc->online)
            check_note(&sc->warnings, "CLUSTER SHARDS on %s says its health is not online",
                       nc->asked);
        if (sc->port == 0 && nc->url.tls)
            check_note(&sc->errors, "the cluster gives it no TLS port: Redis 7 reports a "
                                    "master's tls-port only with tls-cluster yes");
        else if (sc->port == 0)
            check_note(&sc->errors, "the cluster gives it no plain TCP port (TLS only?): give "
                                    "the cluster as clusters://");
        else if (!redlock__cluster_allow_has(&nc->url, sc->host))
            check_note(&sc->errors, "its host is not among those the URL allows (allow=): the "
                                    "client does not connect to it, and neither does the check");
        else
            check_server(ck, sc);
    }
    return 0;
}

int check_cluster(checker *ck, node_check *nc)
{
    const redlock_url *u = &nc->url;
    uint64_t timeout_ms = u->timeout_ms > 0                ? (uint64_t)u->timeout_ms
                          : ck->args->node_timeout_ms != 0 ? ck->args->node_timeout_ms
                                                           : CLI_CHECK_TIMEOUT_MS;
    redlock__alloc alloc;
    redlock__alloc_init(&alloc, NULL, NULL);
    redlock__cluster_map *map = malloc(sizeof(*map));
    if (map == NULL) {
        fprintf(stderr, "redlock: out of memory\n");
        return -1;
    }
    redlock__cluster_map_init(map, &alloc);
    int rc = 0;
    bool used_slots = false;
    if (ask_cluster(ck, nc, map, timeout_ms, &used_slots)) {
        judge_coverage(nc, map);
        rc = check_masters(ck, nc, map, timeout_ms, used_slots);
    }
    redlock__cluster_map_free(map);
    free(map);
    return rc;
}
