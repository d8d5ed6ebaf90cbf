/* SPDX-License-Identifier: MIT */
/* sim_cluster.c - nodes that are Redis Clusters, as far as the lock's safety goes.
 *
 * lib/net/cluster.c runs on lib/net/node.c's connections (libuv sockets), below io.h, so it cannot
 * run under the simulator; what the rounds see of a cluster node is modelled here instead, from
 * both sides: the cluster's servers, and the routing lib/net/cluster.c does for a request
 * (test/sim/README.md says so).
 *
 *   - Two shards, each a master and a replica with their own keyspaces (sim_db.h) on the node's
 *     clock. Every write on a master reaches its replica after a lag (a snapshot of the master,
 *     in order), now and then a long one.
 *   - Slots: each resource's key (with its hash tag: its queue, due hash and counter share the
 *     slot) belongs to a shard. A migration moves a slot's keys one by one to the other shard,
 *     then gives it the slot. Meanwhile the source runs a command whose declared keys it has,
 *     answers ASK when it has none of them and TRYAGAIN when it has some; the target runs a
 *     command sent after ASKING (TRYAGAIN for several keys it does not all have). A script run by
 *     the source may touch no key it does not have ("a non local key", as Redis 7 refuses); one
 *     run by the target after ASKING may (it reads what has not arrived yet as absent).
 *   - A master that does not own the slot answers MOVED; the process's view of the slots (what
 *     lib/net/cluster.c's map would be) learns the owner from it. Redirects cost a round trip each;
 *     TRYAGAIN and CLUSTERDOWN a 10 ms pause, or the request's error once its deadline is near.
 *   - A failover: the replica takes over with what it had, losing what its master wrote since;
 *     the shard answers CLUSTERDOWN for a moment, every connection to the node drops (the client
 *     reconnects to a new server: io.h's on_node_changed), and the shard has no replica until one
 *     has synced. Failovers come at random, and (up to three a node) right after a write that
 *     is not yet on the replica: with chance failover_prob, and always after a grant's.
 *   - The replica wait (wait_replicas): a write's yes counts only when WAIT says the replica has
 *     it within three quarters of the time left to the request's deadline (else ERROR, as
 *     lib/net/cluster.c's on_wait); a node with the replica wait takes no grant record (the grant
 *     tag is cleared: sim_io.c).
 * Subscribers connect to shard 0's master; a PUBLISH reaches every server's subscribers, and
 * PUBSUB NUMSUB counts only the executing server's (sim_pubsub.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"
#include "slot.h"

#define SHARDS 2
#define HOPS_MAX 16             /* lib/net/cluster.c's */
#define RETRY_PAUSE_US 10000    /* lib/net/cluster.c's */
#define ADVERSARIAL_FAILOVERS 3 /* per cluster node and run, right after a write */

typedef struct snapshot {
    struct snapshot *next;
    sim_db db;
} snapshot;

typedef struct shard {
    sim_db master, replica;
    uint64_t gen; /* its master's run_id: new at each failover */
    bool has_replica;
    uint64_t last_rep_at;  /* true time at which the replica will have every write so far */
    uint64_t down_until;   /* failing over: CLUSTERDOWN until then */
    snapshot *head, *tail; /* writes on their way to the replica */
} shard;

/* A resource's slot. Resources whose keys share a slot share its owner (slot_of). */
typedef struct slot_state {
    uint16_t slot;
    unsigned owner;
    int migrating_to; /* -1: none */
} slot_state;

struct sim_cluster {
    shard shards[SHARDS];
    slot_state slots[SIM_MAX_RESOURCES];
    uint64_t gen; /* the run_id its clients see: changes with every failover */
    unsigned adversarial_left;
};

/* ---- slots ---------------------------------------------------------------------------------- */

/* The state of slot (the first resource of that slot's), or NULL for a slot no resource has. */
static slot_state *slot_of(struct sim_cluster *cl, const sim_world *w, uint16_t slot)
{
    for (unsigned r = 0; r < w->cfg.n_resources; r++)
        if (cl->slots[r].slot == slot)
            return &cl->slots[r];
    return NULL;
}

unsigned sim_cluster_owner(const sim_node *n, unsigned r)
{
    const struct sim_cluster *cl = n->cluster;
    return slot_of((struct sim_cluster *)cl, n->w, cl->slots[r].slot)->owner;
}

static void set_owner(struct sim_cluster *cl, const sim_world *w, uint16_t slot, unsigned owner,
                      int migrating_to)
{
    for (unsigned r = 0; r < w->cfg.n_resources; r++) {
        if (cl->slots[r].slot == slot) {
            cl->slots[r].owner = owner;
            cl->slots[r].migrating_to = migrating_to;
        }
    }
}

static uint16_t key_slot(const char *key, size_t len)
{
    return redlock__slot_of_key(key, len);
}

/* ---- the cluster ---------------------------------------------------------------------------- */

int sim_cluster_new(sim_world *w, unsigned node)
{
    sim_node *n = &w->nodes[node];
    struct sim_cluster *cl = calloc(1, sizeof(*cl));
    if (cl == NULL)
        return -1;
    n->cluster = cl;
    cl->gen = 1;
    cl->adversarial_left = ADVERSARIAL_FAILOVERS;
    for (unsigned s = 0; s < SHARDS; s++) {
        shard *sh = &cl->shards[s];
        sim_db_init(&sh->master);
        sim_db_init(&sh->replica);
        sim_node_db_opened(w, n, &sh->master);
        sh->gen = 1000 * (node + 1) + s;
        sh->has_replica = true;
    }
    for (unsigned r = 0; r < w->cfg.n_resources; r++) {
        char key[32];
        size_t len = sim_resource_key(w, r, key, sizeof(key));
        uint16_t slot = key_slot(key, len);
        cl->slots[r] = (slot_state){slot, slot < 8192 ? 0 : 1, -1};
    }
    return 0;
}

static void drop_pending(shard *sh)
{
    while (sh->head != NULL) {
        snapshot *s = sh->head;
        sh->head = s->next;
        sim_db_free(&s->db);
        free(s);
    }
    sh->tail = NULL;
}

void sim_cluster_free(sim_node *n)
{
    struct sim_cluster *cl = n->cluster;
    for (unsigned s = 0; s < SHARDS; s++) {
        drop_pending(&cl->shards[s]);
        sim_db_free(&cl->shards[s].master);
        sim_db_free(&cl->shards[s].replica);
    }
    free(cl);
    n->cluster = NULL;
}

const sim_db_key *sim_cluster_find(sim_node *n, const char *key, size_t len, uint64_t now_us)
{
    for (unsigned s = 0; s < SHARDS; s++) {
        const sim_db_key *k = sim_db_find(&n->cluster->shards[s].master, key, len, now_us);
        if (k != NULL)
            return k;
    }
    return NULL;
}

bool sim_cluster_holds(sim_node *n, const char *key, size_t len, const char *value,
                       size_t value_len, bool replicated, uint64_t now_us)
{
    for (unsigned s = 0; s < SHARDS; s++) {
        shard *sh = &n->cluster->shards[s];
        const sim_db_key *k = sim_db_find(&sh->master, key, len, now_us);
        if (k == NULL || k->type != SIM_DB_STRING || k->value_len != value_len ||
            memcmp(k->value, value, value_len) != 0)
            continue;
        /* A shard without a replica (since its failover, until one syncs) cannot fail over:
         * what its master holds stays. A key a migration moved here reaches the replica as
         * the cluster's own write, which no WAIT of the library's covers: counted. */
        if (!replicated || !sh->has_replica || k->moved)
            return true;
        const sim_db_key *r = sim_db_find(&sh->replica, key, len, now_us);
        return r != NULL && r->type == SIM_DB_STRING && r->value_len == value_len &&
               memcmp(r->value, value, value_len) == 0;
    }
    return false;
}

uint64_t sim_cluster_run_id(const sim_node *n)
{
    return n->cluster->gen;
}

bool sim_cluster_sub_server(const sim_world *w, const sim_node *n, uint64_t *gen)
{
    const shard *sh = &n->cluster->shards[0];
    *gen = sh->gen;
    return w->now >= sh->down_until;
}

/* ---- replication ---------------------------------------------------------------------------- */

/* The master of shard s wrote: its replica has a copy of it after a lag, in order. */
static void replicate(sim_world *w, unsigned node, unsigned s)
{
    shard *sh = &w->nodes[node].cluster->shards[s];
    if (!sh->has_replica)
        return;
    snapshot *snap = calloc(1, sizeof(*snap));
    if (snap == NULL || !sim_db_copy(&snap->db, &sh->master)) {
        if (snap != NULL)
            sim_db_free(&snap->db);
        free(snap);
        w->oom = true;
        return;
    }
    uint64_t lag = sim_rng_range(&w->rng, 100, 1500);
    if (sim_rng_chance(&w->rng, 0.05))
        lag += sim_rng_range(&w->rng, 0, 20000); /* a slow replica */
    sh->last_rep_at = REDLOCK__MAX(w->now + lag, sh->last_rep_at);
    if (sh->tail != NULL)
        sh->tail->next = snap;
    else
        sh->head = snap;
    sh->tail = snap;
    sim_push(w, sh->last_rep_at, EV_REPLICATE, 0, node, (sh->gen << 8) | s, NULL);
}

static void on_replicate(sim_world *w, unsigned node, unsigned s, uint64_t gen)
{
    shard *sh = &w->nodes[node].cluster->shards[s];
    if (gen != sh->gen || sh->head == NULL)
        return; /* a failover dropped what was on its way */
    snapshot *snap = sh->head;
    sh->head = snap->next;
    if (sh->head == NULL)
        sh->tail = NULL;
    sim_db_free(&sh->replica);
    sh->replica = snap->db;
    free(snap);
}

/* ---- failover ------------------------------------------------------------------------------- */

static void failover(sim_world *w, unsigned node, unsigned s)
{
    sim_node *n = &w->nodes[node];
    struct sim_cluster *cl = n->cluster;
    shard *sh = &cl->shards[s];
    if (!sh->has_replica || w->now < sh->down_until)
        return; /* no replica to promote (or failing over already) */
    w->res->failovers++;
    sim_trace(w, "n%u: shard %u fails over, losing %s", node, s,
              sh->head != NULL ? "writes not yet replicated" : "nothing");
    sim_node_db_closed(w, &sh->master);
    sim_db tmp = sh->master;
    sh->master = sh->replica;
    sh->replica = tmp;
    sim_db_clear(&sh->replica);
    sh->replica.observer = NULL;
    sim_node_db_opened(w, n, &sh->master);
    drop_pending(sh);
    sh->gen += 10;
    cl->gen++;
    sh->has_replica = false;
    sh->down_until = w->now + sim_rng_range(&w->rng, 1000, 5000);
    sim_push(w, w->now + sim_rng_range(&w->rng, 20000, 60000), EV_RESYNC, 0, node,
             (sh->gen << 8) | s, NULL);
    sim_conns_die(w, node);
    sim_pubsub_server_gone(w, node, (int)s);
}

static void on_resync(sim_world *w, unsigned node, unsigned s, uint64_t gen)
{
    shard *sh = &w->nodes[node].cluster->shards[s];
    if (gen != sh->gen)
        return;
    if (!sim_db_copy(&sh->replica, &sh->master))
        w->oom = true;
    sh->replica.observer = NULL;
    sh->has_replica = true;
    sh->last_rep_at = w->now;
}

/* ---- migration ------------------------------------------------------------------------------ */

static void migrate_step(sim_world *w, unsigned node, unsigned r)
{
    sim_node *n = &w->nodes[node];
    struct sim_cluster *cl = n->cluster;
    slot_state *st = slot_of(cl, w, cl->slots[r].slot);
    if (st->migrating_to < 0)
        return;
    shard *src = &cl->shards[st->owner], *dst = &cl->shards[st->migrating_to];
    uint64_t now = sim_node_now(w, n);
    uint64_t next = w->now + sim_rng_range(&w->rng, 300, 2000);
    if (w->now < src->down_until || w->now < dst->down_until) {
        sim_push(w, next, EV_MIGRATE, 0, node, 1 | (r << 8), NULL);
        return;
    }
    for (size_t i = 0; i < src->master.n; i++) {
        sim_db_key *k = src->master.keys[i];
        if (key_slot(k->name, k->name_len) != st->slot)
            continue;
        /* MIGRATE: the key with its ttl onto the target, then off the source (a key that has
         * expired is only gone from the source). */
        if (sim_db_find(&src->master, k->name, k->name_len, now) != NULL) {
            if (!sim_db_restore(&dst->master, k))
                w->oom = true;
            sim_db_key *moved = sim_db_peek(&dst->master, k->name, k->name_len);
            if (moved != NULL)
                moved->moved = true;
            sim_db_delete(&src->master, k);
            replicate(w, node, (unsigned)st->migrating_to);
        }
        replicate(w, node, st->owner);
        sim_push(w, next, EV_MIGRATE, 0, node, 1 | (r << 8), NULL);
        return;
    }
    /* Every key moved: the target owns the slot (CLUSTER SETSLOT NODE). */
    sim_trace(w, "n%u: slot %u now on shard %d", node, st->slot, st->migrating_to);
    set_owner(cl, w, st->slot, (unsigned)st->migrating_to, -1);
}

static void migrate_start(sim_world *w, unsigned node, unsigned r)
{
    struct sim_cluster *cl = w->nodes[node].cluster;
    slot_state *st = slot_of(cl, w, cl->slots[r].slot);
    if (st->migrating_to >= 0)
        return;
    w->res->migrations++;
    sim_trace(w, "n%u: slot %u migrates from shard %u", node, st->slot, st->owner);
    set_owner(cl, w, st->slot, st->owner, (int)(1 - st->owner));
    migrate_step(w, node, r);
}

/* ---- requests ------------------------------------------------------------------------------- */

static bool is_write(redlock__cmd_kind kind)
{
    return kind == REDLOCK__CMD_ACQUIRE || kind == REDLOCK__CMD_ACQUIRE_FENCED ||
           kind == REDLOCK__CMD_EXTEND || kind == REDLOCK__CMD_COMMIT;
}

/* The resource of key's slot (its entry in a process's view), or -1. */
static int resource_of(const struct sim_cluster *cl, const sim_world *w, const char *key,
                       size_t len)
{
    uint16_t slot = key_slot(key, len);
    for (unsigned r = 0; r < w->cfg.n_resources; r++)
        if (cl->slots[r].slot == slot)
            return (int)r;
    return -1;
}

/* The request goes again: to shard s (after ASKING), after the answer came back and a pause. */
static void resend(sim_world *w, sim_proc *p, unsigned node, sim_msg *m, unsigned s, bool asking,
                   uint64_t pause_us)
{
    m->shard = s;
    m->asking = asking;
    uint64_t back = sim_net_delay(w), out = sim_net_delay(w);
    sim_net_resend(w, p, node, m, w->now + back + pause_us + out);
}

/* TRYAGAIN, CLUSTERDOWN, or too many redirects: again after a pause, unless the pause would
 * end past the request's deadline: then the vote is that error (lib/net/cluster.c, retry_later). */
static void retry(sim_world *w, sim_proc *p, unsigned node, sim_msg *m, unsigned view_shard,
                  const char *why)
{
    if (sim_proc_now(p) + RETRY_PAUSE_US >= m->deadline_local) {
        memset(&m->reply, 0, sizeof(m->reply));
        m->reply.v.type = SIM_R_ERROR;
        snprintf(m->reply.v.str, sizeof(m->reply.v.str), "%s", why);
        m->reply.v.len = strlen(m->reply.v.str);
        sim_net_reply(w, p, node, m, w->now);
        return;
    }
    m->hops = 0;
    resend(w, p, node, m, view_shard, false, RETRY_PAUSE_US);
}

/* What a migrating source refuses a script: a key it does not have. */
typedef struct locality {
    sim_db *db;
    uint64_t now_us;
} locality;

static const char *refuse_missing(void *ctx, const char *key, size_t len)
{
    locality *l = ctx;
    if (sim_db_find(l->db, key, len, l->now_us) != NULL)
        return NULL;
    return "Script attempted to access a non local key in a cluster node";
}

/* Run m on shard s's master, with the replica wait, and answer. */
static void run(sim_world *w, sim_proc *p, unsigned node, sim_msg *m, unsigned s, bool source)
{
    sim_node *n = &w->nodes[node];
    struct sim_cluster *cl = n->cluster;
    shard *sh = &cl->shards[s];
    locality loc = {&sh->master, sim_node_now(w, n)};
    sim_node_exec(w, p, node, &sh->master, (int)s, sh->gen, source ? refuse_missing : NULL, &loc,
                  m);
    if (m->reply.wrote)
        replicate(w, node, s);
    uint64_t leave_at = w->now;
    if (w->cfg.wait_replicas > 0 && is_write(m->kind)) {
        /* The vote the command's answer is (as cluster.c reads it, before its WAIT's answer). */
        static const redlock__cmd_place queued = {0};
        redlock__cmd cmd = {
            .kind = m->kind, .place = m->queued ? &queued : NULL, .n_more = m->n_keys - 1};
        redisReply reply, elems[3], *ptrs[3];
        sim_reply_to_redis(&m->reply, &reply, elems, ptrs);
        char err[REDLOCK_ERROR_TEXT_MAX];
        redlock__reply_kind kind;
        redlock__reply_data data;
        uint64_t now_local = sim_proc_now(p);
        uint64_t left = m->deadline_local > now_local ? m->deadline_local - now_local : 1000;
        uint64_t timeout = REDLOCK__MAX(left * 3 / 4, 1000);
        bool acked = sh->has_replica && sh->last_rep_at <= w->now + timeout;
        m->wait_count = acked ? 1 : 0;
        if (redlock__cmd_vote(&cmd, &reply, err, sizeof(err), &kind, &data) == REDLOCK_VOTE_YES)
            leave_at = acked ? REDLOCK__MAX(w->now, sh->last_rep_at) : w->now + timeout;
    }
    /* The adversary: fail over before this write reaches the replica - always after a grant,
     * whose write no WAIT follows. */
    if (m->reply.wrote && sh->has_replica && sh->last_rep_at > w->now + 1 &&
        cl->adversarial_left > 0 &&
        (w->exec_granted || sim_rng_chance(&w->rng, w->cfg.failover_prob))) {
        cl->adversarial_left--;
        sim_push(w, w->now + sim_rng_range(&w->rng, 1, sh->last_rep_at - w->now - 1), EV_FAILOVER,
                 0, node, s, NULL);
    }
    sim_net_reply(w, p, node, m, leave_at);
}

void sim_cluster_recv(sim_world *w, sim_proc *p, unsigned node, sim_msg *m)
{
    sim_node *n = &w->nodes[node];
    struct sim_cluster *cl = n->cluster;
    const char *argv[64], *keys[64];
    size_t lens[64], key_lens[64];
    int argc = sim_resp_argv(m->wire, m->wire_len, argv, lens, 64);
    int nk = argc > 0 ? sim_command_keys(argc, argv, lens, keys, key_lens, 64) : 0;
    if (nk == 0) {
        sim_contract(w, "a request without a key reached cluster node n%u", node);
        sim_msg_free(m);
        return;
    }
    int r = resource_of(cl, w, keys[0], key_lens[0]);
    slot_state *st = r >= 0 ? slot_of(cl, w, cl->slots[r].slot) : NULL;
    if (st == NULL) {
        sim_contract(w, "a key of no resource reached cluster node n%u", node);
        sim_msg_free(m);
        return;
    }
    unsigned s = m->shard;
    shard *sh = &cl->shards[s];
    uint64_t now = sim_node_now(w, n);
    bool asking = m->asking;
    m->asking = false;
    if (w->now < sh->down_until) {
        retry(w, p, node, m, p->view[node][r], "CLUSTERDOWN The cluster is down");
        return;
    }
    unsigned present = 0;
    for (int i = 0; i < nk; i++)
        present += sim_db_find(&sh->master, keys[i], key_lens[i], now) != NULL;
    if (s != st->owner) {
        if (!(asking && st->migrating_to == (int)s)) { /* MOVED slot owner */
            w->res->cluster_redirects++;
            for (unsigned i = 0; i < w->cfg.n_resources; i++)
                if (cl->slots[i].slot == st->slot)
                    p->view[node][i] = (unsigned char)st->owner;
            if (++m->hops > HOPS_MAX)
                retry(w, p, node, m, st->owner, "MOVED: too many redirects");
            else
                resend(w, p, node, m, st->owner, false, 0);
            return;
        }
        if (nk > 1 && present < (unsigned)nk) {
            retry(w, p, node, m, p->view[node][r],
                  "TRYAGAIN Multiple keys request during rehashing");
            return;
        }
        m->mid_migration = true;
        run(w, p, node, m, s, false); /* importing, after ASKING: every key is local */
        return;
    }
    if (st->migrating_to >= 0) {
        if (present == 0) { /* ASK the target */
            w->res->cluster_redirects++;
            if (++m->hops > HOPS_MAX)
                retry(w, p, node, m, p->view[node][r], "ASK: too many redirects");
            else
                resend(w, p, node, m, (unsigned)st->migrating_to, true, 0);
            return;
        }
        if (present < (unsigned)nk) {
            retry(w, p, node, m, p->view[node][r],
                  "TRYAGAIN Multiple keys request during rehashing");
            return;
        }
        m->mid_migration = true;
        run(w, p, node, m, s, true);
        return;
    }
    run(w, p, node, m, s, false);
}

/* ---- faults --------------------------------------------------------------------------------- */

void sim_cluster_schedule(sim_world *w)
{
    const sim_config *cfg = &w->cfg;
    unsigned clusters[SIM_MAX_NODES], n = 0;
    for (unsigned i = 0; i < cfg->n_nodes; i++)
        if (w->nodes[i].cluster != NULL)
            clusters[n++] = i;
    if (n == 0)
        return;
    for (unsigned i = 0; i < cfg->failovers; i++)
        sim_push(w, sim_rng_range(&w->rng, 0, cfg->horizon_us), EV_FAILOVER, 0,
                 clusters[sim_rng_range(&w->rng, 0, n - 1)], sim_rng_range(&w->rng, 0, SHARDS - 1),
                 NULL);
    for (unsigned i = 0; i < cfg->migrations; i++)
        sim_push(w, sim_rng_range(&w->rng, 0, cfg->horizon_us), EV_MIGRATE, 0,
                 clusters[sim_rng_range(&w->rng, 0, n - 1)],
                 sim_rng_range(&w->rng, 0, cfg->n_resources - 1) << 8, NULL);
}

void sim_cluster_event(sim_world *w, const sim_event *ev)
{
    if (w->nodes[ev->node].cluster == NULL) {
        sim_contract(w, "a cluster event for n%u, not a cluster", ev->node);
        return;
    }
    unsigned s = (unsigned)(ev->arg & 0xff);
    switch (ev->kind) {
    case EV_REPLICATE:
        on_replicate(w, ev->node, s, ev->arg >> 8);
        break;
    case EV_RESYNC:
        on_resync(w, ev->node, s, ev->arg >> 8);
        break;
    case EV_FAILOVER:
        failover(w, ev->node, s);
        break;
    case EV_MIGRATE:
        if (s == 0)
            migrate_start(w, ev->node, (unsigned)(ev->arg >> 8));
        else
            migrate_step(w, ev->node, (unsigned)(ev->arg >> 8));
        break;
    default:
        sim_contract(w, "event %d reached a cluster", (int)ev->kind);
        break;
    }
}
