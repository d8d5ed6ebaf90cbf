/* SPDX-License-Identifier: MIT */
/* sim_node.c - the simulated servers: each node's keyspace (sim_db.h) run by the models of the
 * library's commands (sim_scripts.h), its crashes, restarts and clock jumps, and the true-time
 * record of every lock key it held (sim_check.h), from which the properties are read.
 *
 * A key's record is opened whenever a command sets it (a SET, a grant, a renewal: a new record
 * that follows the last without a hole) and closed when a command deletes it, the node forgets
 * it, or its expiry comes (the record's end is its expiry, mapped to true time through the node's
 * clock, until something else ends it sooner). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scripts.h"
#include "sim_internal.h"

size_t sim_resource_key(const sim_world *w, unsigned r, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, w->cfg.cluster_mask != 0 ? "{res-%u}" : "res-%u", r);
    return n < 0 ? 0 : (size_t)n;
}

/* Whether key is a resource's key. */
static bool is_lock_key(const sim_world *w, const char *key, size_t len)
{
    for (unsigned r = 0; r < w->cfg.n_resources; r++) {
        char name[32];
        size_t n = sim_resource_key(w, r, name, sizeof(name));
        if (n == len && memcmp(name, key, len) == 0)
            return true;
    }
    return false;
}

uint64_t sim_node_now(const sim_world *w, const sim_node *n)
{
    return sim_clock(n->rate_ppm, n->offset_us, w->now);
}

/* The first true time at which n's clock is past expire_us: the key is gone from then. */
static uint64_t expiry_true(const sim_node *n, uint64_t expire_us)
{
    if (expire_us == SIM_DB_PERSIST)
        return SIM_NEVER;
    return sim_clock_true_raw(n->rate_ppm, n->offset_us, expire_us + 1);
}

/* ---- the record of the lock keys ------------------------------------------------------------ */

static void presence_open(sim_world *w, sim_node *n, sim_db_key *k)
{
    int rc = sim_nodelog_open(&w->log, n->index, k, w->now, expiry_true(n, k->expire_us));
    if (rc > 0)
        sim_contract(w, "a lock key or token too long for the record");
    else if (rc < 0)
        w->oom = true;
}

/* A grant set k for a waiter whose process had vanished: the key may live no longer than that
 * waiter's place on the node (its last attempt that queued there, and the place ttl it gave). */
static void check_overstay(sim_world *w, sim_node *n, const sim_db_key *k)
{
    for (unsigned i = 0; i < w->cfg.n_procs; i++) {
        const sim_proc *q = &w->procs[i];
        if (!q->vanished)
            continue;
        for (unsigned t = 0; t < q->n_tokens && t < 8; t++) {
            if (strlen(q->tokens[t]) != k->value_len ||
                memcmp(q->tokens[t], k->value, k->value_len) != 0)
                continue;
            uint64_t due_ms = q->queued_ms[n->index] + q->place_ttl_ms[n->index];
            if (q->queued_ms[n->index] != 0 && k->expire_us <= (due_ms + 1) * 1000)
                return;
            sim_result *res = w->res;
            res->overstays++;
            if (res->overstay)
                return;
            res->overstay = true;
            snprintf(res->overstay_what, sizeof(res->overstay_what),
                     "n%u granted %.*s to p%u, which vanished at %llu us, until %llu ms of the "
                     "node's clock: past its place deadline there (%llu ms)",
                     n->index, (int)k->name_len, k->name, q->id, (unsigned long long)q->vanished_at,
                     (unsigned long long)(k->expire_us / 1000), (unsigned long long)due_ms);
            sim_trace(w, "OVERSTAY: %s", res->overstay_what);
            return;
        }
    }
}

/* A waiter's keys were taken for it on node n now (turns: sim_proc.c's check_turn). */
static void note_taken(sim_world *w, const sim_node *n, const sim_db_key *k)
{
    for (unsigned i = 0; i < w->cfg.n_procs; i++) {
        sim_proc *q = &w->procs[i];
        for (unsigned t = 0; q->state == PROC_ACQUIRING && t < q->n_tokens && t < 8; t++) {
            if (strlen(q->tokens[t]) == k->value_len &&
                memcmp(q->tokens[t], k->value, k->value_len) == 0) {
                q->took_at[n->index] = w->now;
                return;
            }
        }
    }
}

/* The observer of a node's keys (sim_db.h): a lock key was set (a new record) or deleted. */
static void on_key(void *ctx, sim_db *db, sim_db_key *k, bool gone)
{
    (void)db;
    sim_node *n = ctx;
    sim_world *w = n->w;
    if (!is_lock_key(w, k->name, k->name_len))
        return;
    /* Set again with the value it holds: renewed, not taken. */
    const sim_presence *last = sim_nodelog_find(&w->log, k);
    bool renewed = !gone && last != NULL && last->until >= w->now &&
                   last->value_len == k->value_len &&
                   memcmp(last->value, k->value, k->value_len) == 0;
    sim_nodelog_close(&w->log, k, w->now);
    if (gone)
        return;
    presence_open(w, n, k);
    if (w->exec_release) {
        w->exec_granted = true;
        check_overstay(w, n, k);
    }
    if (!renewed)
        note_taken(w, n, k);
}

void sim_node_db_opened(sim_world *w, sim_node *n, sim_db *db)
{
    db->observer = on_key;
    db->observer_ctx = n;
    uint64_t now = sim_node_now(w, n);
    for (size_t i = 0; i < db->n; i++) {
        sim_db_key *k = db->keys[i];
        k->mark = SIZE_MAX;
        bool live = k->expire_us == SIM_DB_PERSIST || now <= k->expire_us;
        if (live && k->type == SIM_DB_STRING && is_lock_key(w, k->name, k->name_len))
            presence_open(w, n, k);
    }
}

void sim_node_db_closed(sim_world *w, sim_db *db)
{
    for (size_t i = 0; i < db->n; i++)
        sim_nodelog_close(&w->log, db->keys[i], w->now);
    db->observer = NULL;
    db->observer_ctx = NULL;
}

int sim_node_init(sim_world *w, unsigned i)
{
    if (i >= SIM_MAX_NODES)
        return -1;
    sim_node *n = &w->nodes[i];
    n->w = w;
    n->index = i;
    sim_db_init(&n->db);
    n->db.observer = on_key;
    n->db.observer_ctx = n;
    n->refuse_pubsub = (w->cfg.refuse_pubsub_mask >> i & 1) != 0;
    if ((w->cfg.cluster_mask >> i & 1) != 0)
        return sim_cluster_new(w, i);
    return 0;
}

void sim_node_free(sim_world *w, unsigned i)
{
    sim_node *n = &w->nodes[i];
    sim_db_free(&n->db);
    if (n->cluster != NULL)
        sim_cluster_free(n);
}

/* ---- running a command ---------------------------------------------------------------------- */

typedef struct exec_ctx {
    sim_world *w;
    unsigned node;
    int shard;
    uint64_t gen;
    const char *(*refuse)(void *ctx, const char *key, size_t len);
    void *refuse_ctx;
} exec_ctx;

static long long hook_numsub(void *ctx, const char *ch, size_t len)
{
    exec_ctx *x = ctx;
    if (x->w->nodes[x->node].refuse_pubsub)
        return -1;
    return sim_pubsub_numsub(x->w, x->node, x->shard, x->gen, ch, len);
}

static long long hook_publish(void *ctx, const char *ch, size_t len, const char *msg,
                              size_t msg_len)
{
    exec_ctx *x = ctx;
    if (x->w->nodes[x->node].refuse_pubsub)
        return -1;
    return sim_pubsub_publish(x->w, x->node, ch, len, msg, msg_len);
}

static const char *hook_refuse(void *ctx, const char *key, size_t len)
{
    exec_ctx *x = ctx;
    return x->refuse != NULL ? x->refuse(x->refuse_ctx, key, len) : NULL;
}

static bool is_script(const char *const *argv, const size_t *lens, int argc,
                      const redlock__script *s)
{
    return argc > 1 && lens[1] == 40 && memcmp(argv[1], s->sha1, 40) == 0;
}

static uint64_t arg_u64(const char *p, size_t len)
{
    char buf[24];
    size_t n = len < sizeof(buf) - 1 ? len : sizeof(buf) - 1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return strtoull(buf, NULL, 10);
}

/* A waiter's attempt reached node: its token and place (a grant to it, or its keys taken, are
 * known by them); and if it queued there (queued), when, and its place there (queued_ms, the
 * place ttl), which check_overstay holds a grant to it against once it vanished. */
static void note_attempt(sim_world *w, sim_proc *p, unsigned node, uint64_t now_us,
                         const char *const *argv, const size_t *lens, int argc, bool queued)
{
    /* EVALSHA sha numkeys key... token ttl waiter place place_ttl stamp tag fenced channel */
    long nk = strtol(argv[2], NULL, 10);
    int a = 3 + (int)nk;
    if (a + 8 >= argc)
        return;
    char token[sizeof(p->tokens[0])];
    size_t len = lens[a] < sizeof(token) - 1 ? lens[a] : sizeof(token) - 1;
    memcpy(token, argv[a], len);
    token[len] = '\0';
    bool known = false;
    for (unsigned t = 0; t < p->n_tokens && t < 8; t++)
        known |= strcmp(p->tokens[t], token) == 0;
    if (!known)
        memcpy(p->tokens[p->n_tokens++ % 8], token, len + 1);
    p->place_us = arg_u64(argv[a + 3], lens[a + 3]);
    if (!queued)
        return;
    p->queued_ms[node] = now_us / 1000;
    p->place_ttl_ms[node] = arg_u64(argv[a + 4], lens[a + 4]);
    if (p->first_queued_at[node] == 0)
        p->first_queued_at[node] = w->now;
}

void sim_node_exec(sim_world *w, sim_proc *p, unsigned node, sim_db *db, int shard, uint64_t gen,
                   const char *(*refuse)(void *ctx, const char *key, size_t len), void *refuse_ctx,
                   sim_msg *m)
{
    const char *argv[64];
    size_t lens[64];
    int argc = sim_resp_argv(m->wire, m->wire_len, argv, lens, 64);
    if (argc <= 0) {
        sim_contract(w, "a request the simulated node cannot read");
        memset(&m->reply, 0, sizeof(m->reply));
        m->reply.v.type = SIM_R_ERROR;
        return;
    }
    exec_ctx x = {w, node, shard, gen, refuse, refuse_ctx};
    sim_server_hooks hooks = {hook_numsub, hook_publish,     refuse != NULL ? hook_refuse : NULL,
                              &x,          redlock__scripts, REDLOCK__SCRIPTS};
    sim_node *n = &w->nodes[node];
    uint64_t now = sim_node_now(w, n);
    bool attempt = is_script(argv, lens, argc, &redlock__script_acquire_queued);
    if (attempt) /* before it runs: its keys taken are noted by their token */
        note_attempt(w, p, node, now, argv, lens, argc, false);
    w->exec_release = is_script(argv, lens, argc, &redlock__script_release_queued);
    w->exec_granted = false;
    sim_server_exec(db, now, &hooks, w->cfg.breaks, argc, argv, lens, &m->reply);
    w->exec_release = false;
    if (db->oom)
        w->oom = true;
    if (attempt && m->reply.v.type == SIM_R_INT) {
        w->res->queued_waits++;
        note_attempt(w, p, node, now, argv, lens, argc, true);
    }
    if (m->reply.v.type == SIM_R_ERROR && m->reply.v.str[0] == 'N')
        sim_contract(w, "n%u: %s", node, m->reply.v.str); /* NOSCRIPT: the model lacks a script */
}

/* ---- the "no gap" property ------------------------------------------------------------------ */

void sim_check_no_gap(sim_world *w, sim_proc *p, redlock_lock *lock, uint64_t from, uint64_t to,
                      const char *what)
{
    sim_result *res = w->res;
    res->gap_checks++;
    size_t token_len;
    const char *token = redlock_lock_token(lock, &token_len);
    sim_record record = sim_nodelog_record(&w->log, w->cfg.n_nodes);
    for (unsigned i = 0; i < p->n_res; i++) {
        char key[32];
        size_t key_len = sim_resource_key(w, p->res[i], key, sizeof(key));
        uint64_t at = 0;
        unsigned free_nodes = 0;
        int gap = sim_find_gap(&record, key, key_len, token, token_len, from, to, &at, &free_nodes);
        if (gap < 0)
            w->oom = true;
        if (gap <= 0)
            continue;
        if (strncmp(what, "released", 8) == 0)
            res->gap_releases++;
        else
            res->gap_extends++;
        if (res->gap_found)
            return;
        res->gap_found = true;
        snprintf(res->gap, sizeof(res->gap),
                 "p%u %s on %s as held over [%llu, %llu) us (true time), but at %llu us %u of "
                 "%u nodes were up without its token: a quorum for another holder",
                 p->id, what, key, (unsigned long long)from, (unsigned long long)to,
                 (unsigned long long)at, free_nodes, w->cfg.n_nodes);
        sim_trace(w, "HOLD WITH A GAP: %s", res->gap);
        return;
    }
}

void sim_check_handed_out(sim_world *w, sim_proc *p, redlock_lock *lock)
{
    sim_result *res = w->res;
    res->gap_checks++;
    size_t token_len;
    const char *token = redlock_lock_token(lock, &token_len);
    for (unsigned i = 0; i < p->n_res; i++) {
        char key[32];
        size_t key_len = sim_resource_key(w, p->res[i], key, sizeof(key));
        unsigned free_nodes = 0;
        for (unsigned j = 0; j < w->cfg.n_nodes; j++) {
            sim_node *n = &w->nodes[j];
            if (!n->up)
                continue; /* grants nobody */
            uint64_t now = sim_node_now(w, n);
            bool holds;
            if (n->cluster != NULL) {
                holds = sim_cluster_holds(n, key, key_len, token, token_len,
                                          w->cfg.wait_replicas > 0, now);
            } else {
                const sim_db_key *k = sim_db_find(&n->db, key, key_len, now);
                holds = k != NULL && k->type == SIM_DB_STRING && k->value_len == token_len &&
                        memcmp(k->value, token, token_len) == 0;
            }
            free_nodes += !holds;
        }
        if (free_nodes < w->cfg.n_nodes / 2 + 1)
            continue;
        res->gap_grants++;
        if (res->gap_found)
            return;
        res->gap_found = true;
        snprintf(res->gap, sizeof(res->gap),
                 "p%u was handed %s at %llu us (true time) while %u of %u nodes were up without "
                 "its token%s",
                 p->id, key, (unsigned long long)w->now, free_nodes, w->cfg.n_nodes,
                 w->cfg.cluster_mask != 0 && w->cfg.wait_replicas > 0
                     ? " (on a cluster node with the replica wait: on its replica)"
                     : "");
        sim_trace(w, "HANDED OUT WITHOUT A QUORUM: %s", res->gap);
        return;
    }
}

void sim_note_forgotten(sim_world *w, sim_proc *p, uint64_t end)
{
    char key[32];
    size_t key_len = sim_resource_key(w, p->resource, key, sizeof(key));
    size_t token_len;
    const char *token = redlock_lock_token(p->lock, &token_len);
    sim_record record = sim_nodelog_record(&w->log, w->cfg.n_nodes);
    uint64_t at = 0;
    int gap = sim_first_gap(&record, key, key_len, token, token_len, p->hold_start, end, &at);
    if (gap < 0)
        w->oom = true;
    if (gap <= 0)
        return;
    sim_result *res = w->res;
    res->forgotten++;
    res->unaware_us_total += end - at;
    if (!p->reported)
        return;
    uint64_t took = w->now - at;
    res->forgotten_reported++;
    res->report_us_total += took;
    res->report_us_max = REDLOCK__MAX(res->report_us_max, took);
    /* The promise: the next reconnection attempt, then one round (each way a message's delay,
     * the node's timeout at most). */
    uint64_t bound = SIM_RETRY_MAX_US + 2 * w->cfg.delay_max_us + w->cfg.node_timeout_ms * 1000;
    res->reported_in_time += took <= bound;
    sim_trace(w, "p%u: reported lost %llu us after a quorum forgot its lock", p->id,
              (unsigned long long)took);
}

/* ---- crashes, restarts, clocks ------------------------------------------------------------- */

void sim_node_down(sim_world *w, unsigned node)
{
    w->nodes[node].up = false;
    if (sim_nodelog_down(&w->log, node, w->now) < 0)
        w->oom = true;
}

static void on_crash(sim_world *w, const sim_event *ev)
{
    sim_node *n = &w->nodes[ev->node];
    if (!n->up || n->cluster != NULL)
        return;
    n->up = false;
    n->run_id++; /* the server that comes back is a new one */
    if (w->cfg.restart_loses_data) {
        sim_node_db_closed(w, &n->db);
        sim_db_clear(&n->db);
        n->db.observer = on_key;
        n->db.observer_ctx = n;
    }
    sim_trace(w, "n%u crashes for %llu us%s", ev->node, (unsigned long long)ev->arg,
              w->cfg.restart_loses_data ? ", losing its data" : "");
    sim_conns_die(w, ev->node);
    sim_pubsub_server_gone(w, ev->node, -1);
    sim_push(w, w->now + ev->arg, EV_NODE_UP, 0, ev->node, 0, NULL);
    sim_node_down(w, ev->node);
}

/* The node's clock jumps forward: every key it holds expires that much early in true time. */
static void on_clock_jump(sim_world *w, const sim_event *ev)
{
    sim_node *n = &w->nodes[ev->node];
    n->offset_us += ev->arg;
    w->res->clock_jumps++;
    sim_trace(w, "n%u's clock jumps %llu us forward", ev->node, (unsigned long long)ev->arg);
    for (size_t i = 0; i < n->db.n; i++) {
        const sim_db_key *k = n->db.keys[i];
        sim_nodelog_cut(&w->log, k, REDLOCK__MAX(w->now, expiry_true(n, k->expire_us)));
    }
}

uint64_t sim_quorum_free_at(sim_world *w, const char *key, size_t key_len)
{
    uint64_t free_at[SIM_MAX_NODES];
    unsigned n_up = 0;
    for (unsigned i = 0; i < w->cfg.n_nodes; i++) {
        sim_node *n = &w->nodes[i];
        if (!n->up)
            continue;
        uint64_t now = sim_node_now(w, n);
        const sim_db_key *k = n->cluster != NULL ? sim_cluster_find(n, key, key_len, now)
                                                 : sim_db_find(&n->db, key, key_len, now);
        uint64_t at = k != NULL ? expiry_true(n, k->expire_us) : w->now;
        /* insertion sort: a handful of nodes */
        unsigned j = n_up++;
        while (j > 0 && free_at[j - 1] > at) {
            free_at[j] = free_at[j - 1];
            j--;
        }
        free_at[j] = at;
    }
    unsigned quorum = w->cfg.n_nodes / 2 + 1;
    return n_up < quorum ? SIM_NEVER : free_at[quorum - 1];
}

void sim_node_event(sim_world *w, const sim_event *ev)
{
    switch (ev->kind) {
    case EV_NODE_CRASH:
        on_crash(w, ev);
        break;
    case EV_CLOCK_JUMP:
        on_clock_jump(w, ev);
        break;
    case EV_NODE_UP: {
        w->nodes[ev->node].up = true;
        sim_nodelog_up(&w->log, ev->node, w->now);
        sim_trace(w, "n%u is back with %zu keys", ev->node, w->nodes[ev->node].db.n);
        break;
    }
    default:
        sim_contract(w, "event %d reached the nodes", (int)ev->kind);
        break;
    }
}
