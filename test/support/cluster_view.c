/* SPDX-License-Identifier: MIT */
/* What each node of a cluster says (see cluster_view.h), and the bounded wait until they agree. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "cluster_view.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Each poll asks every node a few commands over fresh connections: not too often. */
#define POLL_MS 50

/* Running and answering: started, not killed, not paused. */
bool cluster_view_node_up(const fixture_redis_cluster *rc, unsigned i)
{
    const fixture_server *s = &rc->nodes[i].servers[0];
    return s->pid > 0 && !s->paused;
}

int cluster_view_first_up(const fixture_redis_cluster *rc)
{
    for (unsigned i = 0; i < rc->n; i++) {
        if (cluster_view_node_up(rc, i))
            return (int)i;
    }
    fprintf(stderr, "fixture: no node of the cluster is running\n");
    return -1;
}

static int node_index(const fixture_redis_cluster *rc, const char *id, size_t len)
{
    for (unsigned i = 0; i < rc->n; i++) {
        if (len == 40 && memcmp(rc->ids[i], id, 40) == 0)
            return (int)i;
    }
    return -1;
}

/* ---- reading a node's view ------------------------------------------------------------------ */

/* The value under key in a RESP2 map (a flat array of key, value, ...), or NULL. */
static const redisReply *map_get(const redisReply *map, const char *key)
{
    if (!map || map->type != REDIS_REPLY_ARRAY)
        return NULL;
    for (size_t k = 0; k + 1 < map->elements; k += 2) {
        const redisReply *name = map->element[k];
        if (name->type == REDIS_REPLY_STRING && strcmp(name->str, key) == 0)
            return map->element[k + 1];
    }
    return NULL;
}

static bool is_string(const redisReply *r, const char *s)
{
    return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) &&
           strcmp(r->str, s) == 0;
}

/* One shard's nodes into v; returns its master's index (-1: none), or -2 on a malformed reply
 * or a node this cluster does not have. */
static int parse_shard_nodes(const fixture_redis_cluster *rc, const redisReply *nodes,
                             cluster_view *v, char *why, size_t why_len)
{
    if (!nodes || nodes->type != REDIS_REPLY_ARRAY) {
        snprintf(why, why_len, "a shard without nodes");
        return -2;
    }
    int master = -1;
    for (size_t k = 0; k < nodes->elements; k++) {
        const redisReply *id = map_get(nodes->element[k], "id");
        int idx = id && id->type == REDIS_REPLY_STRING ? node_index(rc, id->str, id->len) : -1;
        if (idx < 0) {
            snprintf(why, why_len, "a node that is not one of this cluster's (%s)",
                     id && id->str ? id->str : "no id");
            return -2;
        }
        v->listed[idx] = true;
        v->failed[idx] = is_string(map_get(nodes->element[k], "health"), "fail");
        if (is_string(map_get(nodes->element[k], "role"), "master")) {
            if (master >= 0) {
                snprintf(why, why_len, "a shard with two masters");
                return -2;
            }
            master = idx;
        }
    }
    for (size_t k = 0; k < nodes->elements; k++) {
        const redisReply *id = map_get(nodes->element[k], "id");
        v->master_of[node_index(rc, id->str, id->len)] = (signed char)master;
    }
    return master;
}

static int parse_shard_slots(const redisReply *slots, int master, cluster_view *v, char *why,
                             size_t why_len)
{
    if (!slots || slots->type != REDIS_REPLY_ARRAY || slots->elements % 2 != 0) {
        snprintf(why, why_len, "a shard without a slot list");
        return -1;
    }
    for (size_t k = 0; k < slots->elements; k += 2) {
        const redisReply *from = slots->element[k], *to = slots->element[k + 1];
        if (from->type != REDIS_REPLY_INTEGER || to->type != REDIS_REPLY_INTEGER ||
            from->integer < 0 || to->integer >= FIXTURE_CLUSTER_SLOTS ||
            from->integer > to->integer) {
            snprintf(why, why_len, "a malformed slot range");
            return -1;
        }
        for (long long slot = from->integer; slot <= to->integer; slot++) {
            if (v->slot_owner[slot] != -1) {
                snprintf(why, why_len, "slot %lld in two shards", slot);
                return -1;
            }
            v->slot_owner[slot] = (signed char)master;
        }
    }
    return 0;
}

/* Node i's CLUSTER SHARDS into v. Returns 0, or -1 with the reason in why. */
int cluster_view_read(fixture_redis_cluster *rc, unsigned i, cluster_view *v, char *why,
                      size_t why_len)
{
    memset(v, 0, sizeof(*v));
    memset(v->slot_owner, -1, sizeof(v->slot_owner));
    memset(v->master_of, -1, sizeof(v->master_of));
    redisReply *reply = fixture_cluster_command(rc, i, "CLUSTER SHARDS");
    int rc_parse = -1;
    if (!reply || reply->type != REDIS_REPLY_ARRAY) {
        snprintf(why, why_len, "no CLUSTER SHARDS answer (%s)",
                 reply && reply->str ? reply->str : "no reply");
        goto out;
    }
    for (size_t k = 0; k < reply->elements; k++) {
        const redisReply *shard = reply->element[k];
        int master = parse_shard_nodes(rc, map_get(shard, "nodes"), v, why, why_len);
        if (master == -2 || parse_shard_slots(map_get(shard, "slots"), master, v, why, why_len))
            goto out;
    }
    rc_parse = 0;
out:
    freeReplyObject(reply);
    if (rc_parse != 0) {
        char tail[200];
        snprintf(tail, sizeof(tail), "%s", why);
        snprintf(why, why_len, "node %u's CLUSTER SHARDS: %s", i, tail);
    }
    return rc_parse;
}

/* The value of "field:" in an INFO-style reply, copied into buf; -1 if absent. */
static int reply_field(const redisReply *reply, const char *field, char *buf, size_t size)
{
    if (!reply || reply->type != REDIS_REPLY_STRING)
        return -1;
    size_t field_len = strlen(field);
    for (const char *line = reply->str; line && *line; line = strchr(line, '\n')) {
        if (*line == '\n')
            line++;
        if (strncmp(line, field, field_len) == 0 && line[field_len] == ':') {
            const char *value = line + field_len + 1;
            snprintf(buf, size, "%.*s", (int)strcspn(value, "\r\n"), value);
            return 0;
        }
    }
    return -1;
}

/* Whether field of node i's answer to command (INFO-style) is value. */
bool cluster_view_field_is(fixture_redis_cluster *rc, unsigned i, const char *command,
                           const char *field, const char *value)
{
    redisReply *reply = fixture_cluster_command(rc, i, command);
    char buf[64];
    bool is = reply_field(reply, field, buf, sizeof(buf)) == 0 && strcmp(buf, value) == 0;
    freeReplyObject(reply);
    return is;
}

/* ---- waiting for convergence ---------------------------------------------------------------- */

/* Node i's CLUSTER INFO says cluster_state:ok and (first >= 0) the same epoch as node first's;
 * its epoch goes into epoch. */
static bool info_agrees(const redisReply *info, unsigned i, int first, const char *first_epoch,
                        char *epoch, size_t epoch_size, char *why, size_t why_len)
{
    char state[16];
    if (reply_field(info, "cluster_state", state, sizeof(state)) != 0 || strcmp(state, "ok")) {
        snprintf(why, why_len, "node %u: cluster_state is not ok", i);
        return false;
    }
    if (reply_field(info, "cluster_current_epoch", epoch, epoch_size) != 0) {
        snprintf(why, why_len, "node %u: no cluster_current_epoch", i);
        return false;
    }
    if (first >= 0 && strcmp(epoch, first_epoch) != 0) {
        snprintf(why, why_len, "node %u: epoch %s, node %d: %s", i, epoch, first, first_epoch);
        return false;
    }
    return true;
}

/* Every running node's own answers: cluster_state:ok, one epoch, one view (into ref). */
static bool nodes_agree(fixture_redis_cluster *rc, cluster_view *ref, cluster_view *cur, char *why,
                        size_t why_len)
{
    int first = -1;
    char first_epoch[32] = "", value[32];
    for (unsigned i = 0; i < rc->n; i++) {
        if (!cluster_view_node_up(rc, i))
            continue;
        if (cluster_view_read(rc, i, first < 0 ? ref : cur, why, why_len) != 0)
            return false;
        if (first >= 0 && memcmp(ref, cur, sizeof(*ref)) != 0) {
            snprintf(why, why_len, "node %u's CLUSTER SHARDS differs from node %d's", i, first);
            return false;
        }
        redisReply *info = fixture_cluster_command(rc, i, "CLUSTER INFO");
        bool ok = info_agrees(info, i, first, first_epoch, value, sizeof(value), why, why_len);
        freeReplyObject(info);
        if (!ok)
            return false;
        if (first < 0) {
            first = (int)i;
            snprintf(first_epoch, sizeof(first_epoch), "%s", value);
        }
    }
    if (first < 0)
        snprintf(why, why_len, "no node is running");
    return first >= 0;
}

/* What the agreed view must say whatever the expectation: all slots owned by masters, every
 * node listed, the running ones online and the stopped ones failed, replicas linked. */
static bool view_complete(fixture_redis_cluster *rc, const cluster_view *v, char *why,
                          size_t why_len)
{
    for (unsigned slot = 0; slot < FIXTURE_CLUSTER_SLOTS; slot++) {
        int owner = v->slot_owner[slot];
        if (owner < 0 || v->master_of[owner] != owner) {
            snprintf(why, why_len, "slot %u has no master", slot);
            return false;
        }
    }
    for (unsigned j = 0; j < rc->n; j++) {
        const fixture_server *node = &rc->nodes[j].servers[0];
        bool running = node->pid > 0;
        if (!v->listed[j] || v->master_of[j] < 0) {
            snprintf(why, why_len, "node %u is not in the cluster (yet)", j);
            return false;
        }
        if (!node->paused && running == v->failed[j]) { // a paused node may be either
            snprintf(why, why_len, "node %u is %s but seen %s", j, running ? "running" : "stopped",
                     v->failed[j] ? "failed" : "online");
            return false;
        }
        if (cluster_view_node_up(rc, j) && v->master_of[j] != (signed char)j &&
            !cluster_view_field_is(rc, j, "INFO replication", "master_link_status", "up")) {
            snprintf(why, why_len, "replica %u: master link not up", j);
            return false;
        }
    }
    return true;
}

static bool view_as_expected(const cluster_view *v, const cluster_view *expect, char *why,
                             size_t why_len)
{
    if (!expect)
        return true;
    for (unsigned slot = 0; slot < FIXTURE_CLUSTER_SLOTS; slot++) {
        if (v->slot_owner[slot] != expect->slot_owner[slot]) {
            snprintf(why, why_len, "slot %u owned by node %d, not node %d", slot,
                     v->slot_owner[slot], expect->slot_owner[slot]);
            return false;
        }
    }
    for (unsigned j = 0; j < FIXTURE_CLUSTER_MAX_NODES; j++) {
        if (v->master_of[j] != expect->master_of[j]) {
            snprintf(why, why_len, "node %u follows node %d, not node %d", j, v->master_of[j],
                     expect->master_of[j]);
            return false;
        }
    }
    return true;
}

/* Poll until converged and (expect != NULL) the agreed view has expect's slot owners and
 * masters; at most timeout_ms. */
int cluster_view_wait(fixture_redis_cluster *rc, const cluster_view *expect, long long timeout_ms,
                      const char *what)
{
    cluster_view *ref = malloc(sizeof(*ref)), *cur = malloc(sizeof(*cur));
    if (!ref || !cur) {
        free(ref);
        free(cur);
        fprintf(stderr, "fixture: %s: out of memory\n", what);
        return -1;
    }
    long long deadline_ms = fixture_now_ms() + timeout_ms;
    char why[256] = "";
    int result = -1;
    for (;;) {
        if (nodes_agree(rc, ref, cur, why, sizeof(why)) &&
            view_complete(rc, ref, why, sizeof(why)) &&
            view_as_expected(ref, expect, why, sizeof(why))) {
            result = 0;
            break;
        }
        if (fixture_now_ms() >= deadline_ms) {
            fprintf(stderr, "fixture: %s: not converged after %lld ms: %s\n", what, timeout_ms,
                    why);
            break;
        }
        fixture_sleep_ms(POLL_MS);
    }
    free(ref);
    free(cur);
    return result;
}

int fixture_cluster_wait_converged(fixture_redis_cluster *rc)
{
    if (!rc || rc->n == 0) {
        fprintf(stderr, "fixture: fixture_cluster_wait_converged: no cluster\n");
        return -1;
    }
    return cluster_view_wait(rc, NULL, FIXTURE_CLUSTER_WAIT_MS, "fixture_cluster_wait_converged");
}

/* The first running node's view, on the heap (the caller frees it), or NULL. */
cluster_view *cluster_view_current(fixture_redis_cluster *rc)
{
    int first = cluster_view_first_up(rc);
    cluster_view *v = first >= 0 ? malloc(sizeof(*v)) : NULL;
    char why[256];
    if (v && cluster_view_read(rc, (unsigned)first, v, why, sizeof(why)) != 0) {
        fprintf(stderr, "fixture: %s\n", why);
        free(v);
        return NULL;
    }
    return v;
}
