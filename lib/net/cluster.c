/* SPDX-License-Identifier: MIT */
/* cluster.c - a node that is a whole Redis Cluster: slot routing, redirects, topology refresh,
 * the replica wait. See cluster.h for the model. */
#include "cluster.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cluster_allow.h"
#include "cluster_map.h"
#include "command.h"
#include "rto.h"
#include "slot.h"

#define ERR_LEN REDLOCK_ERROR_TEXT_MAX
/* Redirects one request follows in a row: past them (servers that disagree about a slot) it
 * pauses as for TRYAGAIN, and starts counting again. */
#define HOPS_MAX 16
/* The pause before a request answered TRYAGAIN or CLUSTERDOWN (or routed to no master) goes
 * again. */
#define RETRY_PAUSE_US 10000
/* Finished requests a cluster keeps for reuse. */
#define SPARE_MAX 256
/* The least time between two topology requests, and the pause after every seed failed. */
#define REFRESH_MIN_US 100000

typedef struct conn {
    redlock_url url; /* host owned here; user, password and the rest borrowed from the cluster's */
    char *name;      /* "<cluster url> @ host:port", owned */
    char *endpoint;  /* "host:port", owned: what results say answered */
    redlock__node *node;
} conn;

typedef struct creq creq;
struct creq {
    redlock__req inner; /* the command, on one connection */
    redlock__cmd cmd;   /* outer's, or a copy naming another counter (cmd_for_cluster) */
    char *counter;      /* that counter's name, owned */
    redlock__req wait;  /* the replica wait after it (cluster.h), when asked for */
    redlock__cmd wait_cmd;
    redlock__req *outer; /* the rounds' request; NULL once it was completed */
    redlock__cluster *cl;
    creq *prev, *next;    /* the deadline list, while outer is pending */
    creq *parked;         /* the waiting list (no map yet, or a pause before a retry) */
    uint64_t retry_at_us; /* parked for a retry: when */
    unsigned pending;     /* requests of this creq still in a node: 0..2 */
    unsigned hops;
    /* What to do once the wait of this dispatch is back (a request is never sent again while
     * one of its two is still in a node): nothing, send again, or pause and send again. */
    enum { THEN_NOTHING, THEN_DISPATCH, THEN_RETRY } then;
    char then_why[ERR_LEN]; /* THEN_RETRY: the vote's text if it cannot be sent again */
    int ask_conn;           /* >= 0: the next dispatch goes there, after ASKING */
    uint16_t slot;
    bool is_parked;
    bool has_answer; /* the command answered yes and its wait is pending: its counter below */
    uint64_t answer_counter;
    bool answer_anew; /* ... and whether it set a key anew (an extend's retake) */
    const char *answered_by;
};

typedef enum { CL_STARTING, CL_READY, CL_DOWN, CL_CLOSING } cl_state;

struct redlock__cluster {
    uv_loop_t *loop;
    redlock__node_config cfg; /* cfg.url: the cluster's URL */
    cl_state state;
    unsigned replica_wait;

    conn **conns; /* seeds first (the URL's host, then seed=), then servers the map names */
    unsigned n_conns, cap_conns;
    int *conn_of_master; /* per map master: its conn, -1 not looked up yet */
    size_t conn_of_master_len;
    bool have_map;

    /* The topology request: one at a time. */
    redlock__req topo_req;
    redlock__cmd topo_cmd;
    bool fetching, use_slots;
    unsigned fetch_conn;  /* the conn asked */
    unsigned fetch_tries; /* conns asked in this refresh */
    uint64_t last_fetch_us;
    bool refresh_wanted;

    creq *head, *tail; /* outstanding requests, in deadline order (deadlines grow: one timeout) */
    creq *parked;      /* waiting for a map or for a retry */
    redlock__spares spare; /* finished requests kept for the next ones, up to SPARE_MAX: no
                              allocation per request on the lock path */
    unsigned inflight;
    uv_timer_t deadline_timer, retry_timer;

    redlock__closing closing; /* its connections, its two timers */

    /* Its counters (its last_failure also says why it is down, or has no map) */
    redlock__tally tally;

    redlock__cluster_map map; /* about 32 KiB: last */
};

static void set_state(redlock__cluster *cl, cl_state state)
{
    if (cl->state != state)
        redlock__node_tally_state(&cl->tally);
    cl->state = state;
}

#define cl_log(cl, ...) redlock__node_cfg_log(&(cl)->cfg, __VA_ARGS__)

/* ---- connections --------------------------------------------------------------------------- */

static const char *conn_twin_of(void *ctx, const redlock__node *node, const char *run_id)
{
    redlock__cluster *cl = ctx;
    return cl->cfg.twin_of != NULL ? cl->cfg.twin_of(cl->cfg.twin_ctx, node, run_id) : NULL;
}

static bool same_host(const char *a, const char *b)
{
    return strcasecmp(a, b) == 0;
}

static void conn_free(redlock__cluster *cl, conn *k)
{
    const redlock__alloc *a = cl->cfg.alloc;
    redlock__free(a, k->url.host);
    redlock__free(a, k->name);
    redlock__free(a, k->endpoint);
    redlock__free(a, k);
}

/* conn_get's answer for a host the URL does not allow (cluster_allow.h). */
#define CONN_NOT_ALLOWED (-4)

/* The conn to host:port, made (and started, unless the cluster is not yet) if there is none.
 * Returns its index, -1 when memory runs out, or CONN_NOT_ALLOWED: no connection is made to a
 * host outside the URL's allow= (its credentials would go there). */
static int conn_get(redlock__cluster *cl, const char *host, int port, bool start)
{
    for (unsigned i = 0; i < cl->n_conns; i++)
        if (cl->conns[i]->url.port == port && same_host(cl->conns[i]->url.host, host))
            return (int)i;
    if (!redlock__cluster_allow_has(cl->cfg.url, host))
        return CONN_NOT_ALLOWED;
    if (cl->n_conns == cl->cap_conns) {
        unsigned cap = cl->cap_conns == 0 ? 8 : cl->cap_conns * 2;
        conn **grown = redlock__realloc(cl->cfg.alloc, cl->conns, cap * sizeof(grown[0]));
        if (grown == NULL)
            return -1;
        cl->conns = grown;
        cl->cap_conns = cap;
    }
    const redlock__alloc *a = cl->cfg.alloc;
    conn *k = redlock__calloc(a, 1, sizeof(*k));
    if (k == NULL)
        return -1;
    const redlock_url *u = cl->cfg.url;
    k->url = (redlock_url){
        .host = redlock__strdup(a, host),
        .port = port,
        .user = u->user,
        .password = u->password,
        .db = -1,
        .timeout_ms = u->timeout_ms,
        .tls = u->tls,
    };
    bool v6 = strchr(host, ':') != NULL;
    size_t elen = strlen(host) + 10;
    k->endpoint = redlock__malloc(a, elen);
    if (k->endpoint != NULL)
        snprintf(k->endpoint, elen, v6 ? "[%s]:%d" : "%s:%d", host, port);
    size_t nlen = strlen(cl->cfg.name) + elen + 4;
    k->name = redlock__malloc(a, nlen);
    if (k->name != NULL && k->endpoint != NULL)
        snprintf(k->name, nlen, "%s @ %s", cl->cfg.name, k->endpoint);
    k->url.redacted = k->name;
    redlock__node_config cfg = cl->cfg;
    cfg.url = &k->url;
    cfg.name = k->name;
    cfg.twin_of = conn_twin_of;
    cfg.twin_ctx = cl;
    cfg.replies = REDLOCK__READER_CLUSTER; /* CLUSTER SHARDS / SLOTS may go on any of them */
    if (k->url.host == NULL || k->endpoint == NULL || k->name == NULL ||
        redlock__node_new(cl->loop, &cfg, &k->node) != 0) {
        conn_free(cl, k);
        return -1;
    }
    cl->conns[cl->n_conns++] = k;
    if (start)
        redlock__node_start(k->node);
    return (int)cl->n_conns - 1;
}

/* The conn of the master owning slot: its index, -1 when no master owns it, -2 out of memory,
 * -3 when the map has no port for this kind of connection (redlock__cluster_map_master_port),
 * CONN_NOT_ALLOWED when the URL does not allow its host. */
static int conn_of_slot(redlock__cluster *cl, unsigned slot)
{
    int m = redlock__cluster_map_master(&cl->map, slot);
    if (m < 0)
        return -1;
    if ((size_t)m >= cl->conn_of_master_len) {
        size_t len = cl->map.masters_len;
        int *grown = redlock__realloc(cl->cfg.alloc, cl->conn_of_master, len * sizeof(int));
        if (grown == NULL)
            return -2;
        for (size_t i = cl->conn_of_master_len; i < len; i++)
            grown[i] = -1;
        cl->conn_of_master = grown;
        cl->conn_of_master_len = len;
    }
    if (cl->conn_of_master[m] < 0) {
        const redlock__cluster_master *master = &cl->map.masters[m];
        int port = redlock__cluster_map_master_port(master, cl->cfg.url->tls, cl->use_slots);
        if (port == 0)
            return -3;
        int k = conn_get(cl, master->host, port, true);
        if (k < 0)
            return k == CONN_NOT_ALLOWED ? k : -2;
        cl->conn_of_master[m] = k;
    }
    return cl->conn_of_master[m];
}

static void forget_masters(redlock__cluster *cl)
{
    for (size_t i = 0; i < cl->conn_of_master_len; i++)
        cl->conn_of_master[i] = -1;
}

/* ---- completing ---------------------------------------------------------------------------- */

/* A request's memory: a spare one, zeroed, or a new one. */
static creq *creq_new(redlock__cluster *cl)
{
    creq *cr = redlock__spares_take(&cl->spare);
    if (cr == NULL)
        return redlock__calloc(cl->cfg.alloc, 1, sizeof(*cr));
    memset(cr, 0, sizeof(*cr));
    return cr;
}

/* Back to the spares (or freed): cr is done with. */
static void creq_free(creq *cr)
{
    redlock__cluster *cl = cr->cl;
    redlock__free(cl->cfg.alloc, cr->counter);
    cr->counter = NULL;
    redlock__spares_put(&cl->spare, cl->cfg.alloc, cr, cl->state != CL_CLOSING ? SPARE_MAX : 0);
}

static void creq_maybe_free(creq *cr)
{
    if (cr->outer == NULL && cr->pending == 0 && !cr->is_parked)
        creq_free(cr);
}

static void unlink_deadline(redlock__cluster *cl, creq *cr)
{
    if (cr->prev != NULL)
        cr->prev->next = cr->next;
    else
        cl->head = cr->next;
    if (cr->next != NULL)
        cr->next->prev = cr->prev;
    else
        cl->tail = cr->prev;
    cr->prev = cr->next = NULL;
    cl->inflight--;
}

static void unpark(redlock__cluster *cl, creq *cr)
{
    for (creq **p = &cl->parked; *p != NULL; p = &(*p)->parked) {
        if (*p == cr) {
            *p = cr->parked;
            break;
        }
    }
    cr->parked = NULL;
    cr->is_parked = false;
}

/* The rounds get their vote; cr lives on while its requests are still in a node. */
static void finish(creq *cr, redlock_vote vote, const char *error, const redlock__reply_data *data,
                   uint64_t now)
{
    redlock__cluster *cl = cr->cl;
    redlock__req *outer = cr->outer;
    if (outer == NULL)
        return;
    cr->outer = NULL;
    unlink_deadline(cl, cr);
    if (cr->is_parked)
        unpark(cl, cr);
    if (vote == REDLOCK_VOTE_YES || vote == REDLOCK_VOTE_NO)
        redlock__node_tally_answer(&cl->tally, now > outer->sent_us ? now - outer->sent_us : 1);
    redlock__node_tally_vote(&cl->tally, vote, error);
    redlock__reply_data mine;
    if (data == NULL) {
        mine = (redlock__reply_data){.pttl_ms = -2};
        data = &mine;
    }
    redlock__reply_data with = *data;
    with.answered_by = cr->answered_by;
    outer->cb(outer, vote, error, &with, now);
    creq_maybe_free(cr);
}

/* ---- deadlines and pauses ------------------------------------------------------------------ */

static void on_deadline(uv_timer_t *t);

static void arm_deadline(redlock__cluster *cl, uint64_t now)
{
    if (cl->head == NULL || cl->state == CL_CLOSING)
        return;
    redlock__timer_at(&cl->deadline_timer, on_deadline, cl->head->outer->deadline_us, now);
}

static void on_deadline(uv_timer_t *t)
{
    redlock__cluster *cl = REDLOCK__CONTAINER_OF(t, redlock__cluster, deadline_timer);
    uint64_t now = redlock__now_us();
    char why[ERR_LEN];
    redlock__node_cfg_timeout_why(&cl->cfg, why, sizeof(why));
    while (cl->head != NULL && cl->head->outer->deadline_us <= now && cl->state != CL_CLOSING)
        finish(cl->head, REDLOCK_VOTE_TIMEOUT, why, NULL, now);
    arm_deadline(cl, now);
}

static void dispatch(creq *cr, uint64_t now);

/* Take off the parked list the requests waiting for the map (for_map), or those whose pause
 * ends by now: returned as a list of their own, linked by parked. */
static creq *take_parked(redlock__cluster *cl, bool for_map, uint64_t now)
{
    creq *taken = NULL;
    for (creq **p = &cl->parked; *p != NULL;) {
        creq *cr = *p;
        bool take = for_map ? cr->retry_at_us == 0 : cr->retry_at_us != 0 && cr->retry_at_us <= now;
        if (!take) {
            p = &cr->parked;
            continue;
        }
        *p = cr->parked;
        cr->is_parked = false;
        cr->parked = taken;
        taken = cr;
    }
    return taken;
}

static void on_retry(uv_timer_t *t)
{
    redlock__cluster *cl = REDLOCK__CONTAINER_OF(t, redlock__cluster, retry_timer);
    uint64_t now = redlock__now_us();
    /* Taken off the list first: a dispatch may park again. */
    creq *due = take_parked(cl, false, now);
    uint64_t next = UINT64_MAX;
    for (const creq *cr = cl->parked; cr != NULL; cr = cr->parked)
        if (cr->retry_at_us != 0)
            next = REDLOCK__MIN(next, cr->retry_at_us);
    if (next != UINT64_MAX)
        redlock__timer_at(&cl->retry_timer, on_retry, next, now);
    while (due != NULL) {
        creq *cr = due;
        due = cr->parked;
        cr->parked = NULL;
        dispatch(cr, now);
    }
}

/* Wait: for the map (retry_at 0), or until retry_at. */
static void park(redlock__cluster *cl, creq *cr, uint64_t retry_at)
{
    cr->retry_at_us = retry_at;
    cr->is_parked = true;
    cr->parked = cl->parked;
    cl->parked = cr;
    if (retry_at != 0) {
        uint64_t now = redlock__now_us();
        uint64_t due = uv_is_active((uv_handle_t *)&cl->retry_timer)
                           ? now + uv_timer_get_due_in(&cl->retry_timer) * 1000
                           : UINT64_MAX;
        if (retry_at < due)
            redlock__timer_at(&cl->retry_timer, on_retry, retry_at, now);
    }
}

/* ---- topology ------------------------------------------------------------------------------ */

static void fetch(redlock__cluster *cl);
static void fetch_send(redlock__cluster *cl);

/* Every request waiting for a map: dispatched (a map came) or failed (none could be had). */
static void release_waiting(redlock__cluster *cl, const char *why)
{
    uint64_t now = redlock__now_us();
    creq *list = take_parked(cl, true, now);
    while (list != NULL) {
        creq *cr = list;
        list = cr->parked;
        cr->parked = NULL;
        if (why == NULL)
            dispatch(cr, now);
        else
            finish(cr, REDLOCK_VOTE_ERROR, why, NULL, now);
    }
}

/* The topology request was answered (or failed). */
static void on_topology(redlock__req *req, redlock_vote vote, const char *error,
                        const redlock__reply_data *data, uint64_t now)
{
    redlock__cluster *cl = REDLOCK__CONTAINER_OF(req, redlock__cluster, topo_req);
    cl->fetching = false;
    if (cl->state == CL_CLOSING)
        return;
    conn *asked = cl->conns[cl->fetch_conn];
    char why[ERR_LEN];
    if (vote == REDLOCK_VOTE_YES && data != NULL && data->raw != NULL) {
        int rc = cl->use_slots ? redlock__cluster_map_load_slots(&cl->map, data->raw,
                                                                 asked->url.host, why, sizeof(why))
                               : redlock__cluster_map_load_shards(
                                     &cl->map, data->raw, asked->url.host, why, sizeof(why));
        if (rc == 0) {
            bool first = !cl->have_map;
            cl->have_map = true;
            forget_masters(cl);
            set_state(cl, CL_READY);
            cl_log(cl, first ? REDLOCK_LOG_INFO : REDLOCK_LOG_DEBUG,
                   "topology from %s: %zu master%s", asked->endpoint, cl->map.masters_len,
                   cl->map.masters_len == 1 ? "" : "s");
            release_waiting(cl, NULL);
            if (cl->refresh_wanted)
                fetch(cl);
            return;
        }
    } else if (!cl->use_slots && vote == REDLOCK_VOTE_ERROR && req->fail == REDLOCK__FAIL_SERVER) {
        /* A server older than 7 (unknown subcommand), or a user not allowed cluster|shards: ask
         * the same one again, the old way, from now on. */
        cl_log(cl, REDLOCK_LOG_INFO, "CLUSTER SHARDS refused by %s (%s): asking CLUSTER SLOTS",
               asked->endpoint, error);
        cl->use_slots = true;
        fetch_send(cl);
        return;
    } else {
        redlock__fmt(why, sizeof(why), "%s", error != NULL ? error : "no answer");
    }
    cl_log(cl, REDLOCK_LOG_WARN, "no topology from %s: %s", asked->endpoint, why);
    /* The next conn, unless every one was asked in this refresh. */
    if (++cl->fetch_tries < cl->n_conns) {
        cl->fetch_conn = (cl->fetch_conn + 1) % cl->n_conns;
        fetch_send(cl);
        return;
    }
    if (!cl->have_map) {
        char msg[ERR_LEN];
        redlock__fmt(msg, sizeof(msg), "cluster topology unknown: %s", why);
        redlock__fmt(cl->tally.last_failure, sizeof(cl->tally.last_failure), "%s", msg);
        set_state(cl, CL_DOWN);
        release_waiting(cl, msg);
    }
    (void)now;
}

/* Send the topology request to the conn fetch_conn. */
static void fetch_send(redlock__cluster *cl)
{
    cl->fetching = true;
    cl->refresh_wanted = false;
    cl->last_fetch_us = redlock__now_us();
    cl->topo_cmd = (redlock__cmd){.kind = cl->use_slots ? REDLOCK__CMD_CLUSTER_SLOTS
                                                        : REDLOCK__CMD_CLUSTER_SHARDS};
    cl->topo_req =
        (redlock__req){.cmd = &cl->topo_cmd, .cb = on_topology, .sent_us = cl->last_fetch_us};
    redlock__node_send(cl->conns[cl->fetch_conn]->node, &cl->topo_req); /* may end at once */
}

/* Ask for the map, unless a request is out already, or the last went less than REFRESH_MIN ago
 * (then the next request sent asks again). The conn that answered last is asked first. */
static void fetch(redlock__cluster *cl)
{
    if (cl->fetching || cl->state == CL_CLOSING)
        return;
    if (cl->last_fetch_us != 0 && redlock__now_us() - cl->last_fetch_us < REFRESH_MIN_US) {
        cl->refresh_wanted = true;
        return;
    }
    cl->fetch_tries = 0;
    fetch_send(cl);
}

/* After MOVED, a lost master, CLUSTERDOWN: the map may be stale. */
static void want_refresh(redlock__cluster *cl)
{
    if (cl->fetching)
        cl->refresh_wanted = true;
    else
        fetch(cl);
}

/* ---- requests ------------------------------------------------------------------------------ */

static void on_inner(redlock__req *req, redlock_vote vote, const char *error,
                     const redlock__reply_data *data, uint64_t now);
static void on_wait(redlock__req *req, redlock_vote vote, const char *error,
                    const redlock__reply_data *data, uint64_t now);

static bool is_write(redlock__cmd_kind kind)
{
    return kind == REDLOCK__CMD_ACQUIRE || kind == REDLOCK__CMD_ACQUIRE_FENCED ||
           kind == REDLOCK__CMD_EXTEND || kind == REDLOCK__CMD_COMMIT;
}

/* Send cr again after a pause, unless the pause would end past its deadline: then the vote is
 * the error that asked for it (TRYAGAIN, CLUSTERDOWN, a redirect too many). */
static void retry_later(creq *cr, const char *why, uint64_t now)
{
    redlock__cluster *cl = cr->cl;
    uint64_t at = now + RETRY_PAUSE_US;
    if (at >= cr->outer->deadline_us) {
        finish(cr, REDLOCK_VOTE_ERROR, why, NULL, now);
        return;
    }
    cr->hops = 0;
    park(cl, cr, at);
}

static void not_allowed(char *why, size_t len, const char *what, const char *host)
{
    redlock__fmt(why, len, "%s %s is not among the hosts this cluster URL allows (allow=)", what,
                 host);
}

/* Send cr to the master of its slot (or where an ASK said). */
static void dispatch(creq *cr, uint64_t now)
{
    redlock__cluster *cl = cr->cl;
    if (cl->state == CL_CLOSING) {
        finish(cr, REDLOCK_VOTE_ERROR, "canceled: client closing", NULL, now);
        return;
    }
    int k = cr->ask_conn;
    cr->ask_conn = -1;
    bool asking = k >= 0;
    if (!asking) {
        if (!cl->have_map) {
            if (cl->state == CL_DOWN && !cl->fetching && now - cl->last_fetch_us < REFRESH_MIN_US) {
                char why[ERR_LEN + 16];
                redlock__fmt(why, sizeof(why), "node down: %s", cl->tally.last_failure);
                finish(cr, REDLOCK_VOTE_ERROR, why, NULL, now);
                return;
            }
            park(cl, cr, 0);
            fetch(cl);
            return;
        }
        k = conn_of_slot(cl, cr->slot);
        if (k == -1) {
            char why[64];
            redlock__fmt(why, sizeof(why), "CLUSTERDOWN slot %u is served by no master",
                         (unsigned)cr->slot);
            want_refresh(cl);
            retry_later(cr, why, now);
            return;
        }
        if (k == -3 || k == CONN_NOT_ALLOWED) {
            char why[ERR_LEN];
            const redlock__cluster_master *m =
                &cl->map.masters[redlock__cluster_map_master(&cl->map, cr->slot)];
            if (k == -3)
                redlock__fmt(why, sizeof(why),
                             "the cluster names no TLS port for master %s:%d (its servers need "
                             "tls-cluster yes)",
                             m->host, m->port);
            else
                not_allowed(why, sizeof(why), "master", m->host);
            finish(cr, REDLOCK_VOTE_ERROR, why, NULL, now);
            return;
        }
        if (k < 0) {
            finish(cr, REDLOCK_VOTE_ERROR, "out of memory", NULL, now);
            return;
        }
    }
    conn *target = cl->conns[k];
    cr->then = THEN_NOTHING;
    cr->answered_by = target->endpoint;
    cr->has_answer = false;
    bool wait = cl->replica_wait > 0 && is_write(cr->outer->cmd->kind);
    /* No grant where a write counts only with its replicas' acks: the grant's SET would be the
     * releaser's, which no WAIT follows (io.h, grant_tag). */
    cr->inner = (redlock__req){.cmd = &cr->cmd,
                               .cb = on_inner,
                               .sent_us = now,
                               .asking = asking,
                               .grant_tag = cl->replica_wait > 0 ? 0 : cr->outer->grant_tag};
    cr->pending += wait ? 2 : 1;
    if (wait) {
        /* WAIT's own timeout: three quarters of what is left, so that its count comes back
         * before the deadline and says how many replicas had it. */
        uint64_t left = cr->outer->deadline_us > now ? cr->outer->deadline_us - now : 1000;
        left = REDLOCK__MIN(left, redlock__node_timeout_us(target->node)); /* it may adapt */
        cr->wait_cmd = (redlock__cmd){.kind = REDLOCK__CMD_WAIT,
                                      .fence = cl->replica_wait,
                                      .ttl_ms = REDLOCK__MAX(left * 3 / 4 / 1000, 1)};
        cr->wait = (redlock__req){.cmd = &cr->wait_cmd, .cb = on_wait, .sent_us = now};
    }
    redlock__node_send(target->node, &cr->inner); /* may complete at once */
    if (wait)
        redlock__node_send(target->node, &cr->wait);
}

/* Send again now (a redirect) or after a pause, once the wait of this dispatch is back. */
static void again(creq *cr, bool pause, const char *why, uint64_t now)
{
    if (cr->pending > 0) {
        cr->then = pause ? THEN_RETRY : THEN_DISPATCH;
        redlock__fmt(cr->then_why, sizeof(cr->then_why), "%s", why);
        return;
    }
    if (pause)
        retry_later(cr, why, now);
    else
        dispatch(cr, now);
}

/* A redirect, a pause or the answer. */
static void on_inner(redlock__req *req, redlock_vote vote, const char *error,
                     const redlock__reply_data *data, uint64_t now)
{
    creq *cr = REDLOCK__CONTAINER_OF(req, creq, inner);
    redlock__cluster *cl = cr->cl;
    cr->pending--;
    if (cr->outer == NULL || cl->state == CL_CLOSING) {
        finish(cr, REDLOCK_VOTE_ERROR, "canceled: client closing", NULL, now); /* if pending */
        creq_maybe_free(cr);
        return;
    }
    if (vote == REDLOCK_VOTE_ERROR && error != NULL) {
        redlock__redirect rd;
        if (redlock__cluster_map_parse_redirect(error, strlen(error), &rd) == 1) {
            if (++cr->hops > HOPS_MAX) {
                again(cr, true, error, now);
                return;
            }
            const char *host = rd.host;
            for (unsigned i = 0; host[0] == '\0' && i < cl->n_conns; i++)
                if (strcmp(cl->conns[i]->endpoint, cr->answered_by) == 0)
                    host = cl->conns[i]->url.host; /* "" is the host it came from */
            if (rd.kind == REDLOCK__REDIRECT_MOVED) {
                int m = redlock__cluster_map_moved(&cl->map, rd.slot, host, rd.port);
                if (m >= 0 && (size_t)m < cl->conn_of_master_len)
                    cl->conn_of_master[m] = -1; /* looked up again: it may have a new port */
                want_refresh(cl);
            } else if ((cr->ask_conn = conn_get(cl, host, rd.port, true)) == CONN_NOT_ALLOWED) {
                char why[ERR_LEN];
                not_allowed(why, sizeof(why), "ASK to", host);
                finish(cr, REDLOCK_VOTE_ERROR, why, NULL, now);
                return;
            }
            again(cr, false, error, now);
            return;
        }
        if (strncmp(error, "TRYAGAIN", 8) == 0 || strncmp(error, "CLUSTERDOWN", 11) == 0) {
            if (error[0] == 'C')
                want_refresh(cl);
            again(cr, true, error, now);
            return;
        }
        if (req->fail == REDLOCK__FAIL_LINK)
            want_refresh(cl); /* a failover, maybe: the next round sees it */
    }
    if (vote == REDLOCK_VOTE_YES && cr->pending > 0) { /* the vote waits for the replicas */
        cr->has_answer = true;
        cr->answer_counter = data != NULL ? data->counter : 0;
        cr->answer_anew = data != NULL && data->anew;
        return;
    }
    finish(cr, vote, error, data, now);
}

static void on_wait(redlock__req *req, redlock_vote vote, const char *error,
                    const redlock__reply_data *data, uint64_t now)
{
    creq *cr = REDLOCK__CONTAINER_OF(req, creq, wait);
    redlock__cluster *cl = cr->cl;
    cr->pending--;
    if (cr->outer != NULL && cl->state != CL_CLOSING && cr->then != THEN_NOTHING) {
        bool pause = cr->then == THEN_RETRY;
        cr->then = THEN_NOTHING;
        again(cr, pause, cr->then_why, now);
        return;
    }
    if (cr->outer == NULL || !cr->has_answer) { /* its command's answer was the vote */
        creq_maybe_free(cr);
        return;
    }
    if (vote == REDLOCK_VOTE_YES && data != NULL && data->counter >= cl->replica_wait) {
        redlock__reply_data d = {
            .pttl_ms = -2, .counter = cr->answer_counter, .anew = cr->answer_anew};
        finish(cr, REDLOCK_VOTE_YES, NULL, &d, now);
        return;
    }
    char why[ERR_LEN];
    if (vote == REDLOCK_VOTE_YES)
        redlock__fmt(why, sizeof(why), "written, but %llu of %u replicas acknowledged it in time",
                     (unsigned long long)(data != NULL ? data->counter : 0), cl->replica_wait);
    else
        redlock__fmt(why, sizeof(why), "WAIT: %s", error != NULL ? error : "no answer");
    finish(cr, REDLOCK_VOTE_ERROR, why, NULL, now);
}

/* The one slot of every key cmd names (command.h), or -1 with why filled when they lie in
 * several. */
static int cmd_slot(const redlock__cmd *cmd, char *why, size_t why_len)
{
    if (cmd->kind >= REDLOCK__CMD_CLUSTER_SHARDS)
        return 0;
    unsigned slot = redlock__slot_of_key(cmd->key, cmd->key_len);
    /* The queued scripts' own keys (lib/core/lua/queue.lua) share their key's hash tag: ops.c
     * queues only keys that have one on a cluster. */
    redlock__span fence = {NULL, 0};
    if (redlock__cmd_uses_fence_key(cmd))
        fence = (redlock__span){cmd->fence_key, cmd->fence_key_len};
    for (unsigned i = 0; i < 1 + cmd->n_more; i++) {
        redlock__span k = i == 0 ? fence : cmd->more[i - 1];
        if (k.ptr == NULL)
            continue;
        unsigned other = redlock__slot_of_key(k.ptr, k.len);
        if (other != slot) {
            char a[44], b[44];
            redlock__text_fit(a, sizeof(a), cmd->key, cmd->key_len);
            redlock__text_fit(b, sizeof(b), k.ptr, k.len);
            redlock__fmt(why, why_len,
                         "CROSSSLOT: key \"%s\" is in slot %u, \"%s\" in slot %u (give the "
                         "resource a hash tag, see docs/cluster.md)",
                         a, slot, b, other);
            return -1;
        }
    }
    return (int)slot;
}

/* The command cr sends: outer's, except an inspect of a resource without a hash tag, whose
 * counter lies in another slot. No fenced lock on a cluster has such a resource (ops.c refuses
 * it), so its counter is read as "{<key>}:fence" instead, a name in the key's slot that the
 * library never writes: the inspect reads no counter, as on a node that has none. */
static void cmd_for_cluster(redlock__cluster *cl, creq *cr)
{
    const redlock__cmd *cmd = cr->outer->cmd;
    cr->cmd = *cmd;
    /* A round's encoding for its nodes lives only while it sends (ops.c); this copy may be sent
     * again later (a redirect), so it is encoded each time. */
    cr->cmd.wire = NULL;
    cr->cmd.wire_len = 0;
    if (cmd->kind != REDLOCK__CMD_INSPECT || cmd->n_more > 0 ||
        redlock__slot_of_key(cmd->fence_key, cmd->fence_key_len) ==
            redlock__slot_of_key(cmd->key, cmd->key_len))
        return;
    size_t len = cmd->key_len + 2 + REDLOCK__FENCE_SUFFIX_LEN;
    cr->counter = redlock__malloc(cl->cfg.alloc, len);
    if (cr->counter == NULL)
        return; /* the inspect then votes CROSSSLOT */
    cr->counter[0] = '{';
    memcpy(cr->counter + 1, cmd->key, cmd->key_len);
    cr->counter[cmd->key_len + 1] = '}';
    memcpy(cr->counter + cmd->key_len + 2, REDLOCK__FENCE_SUFFIX, REDLOCK__FENCE_SUFFIX_LEN);
    cr->cmd.fence_key = cr->counter;
    cr->cmd.fence_key_len = len;
}

void redlock__cluster_send(redlock__cluster *cl, redlock__req *req)
{
    uint64_t now = req->sent_us; /* the caller's clock (io.h), as a node's */
    redlock__node_tally_request(&cl->tally, req);
    req->deadline_us = now + redlock__rto_bound_us(cl->cfg.timeout_us);
    if (cl->state == CL_CLOSING) {
        req->cb(req, REDLOCK_VOTE_ERROR, "canceled: client closing", NULL, now);
        return;
    }
    if (cl->refresh_wanted)
        fetch(cl);
    if (cl->inflight >= cl->cfg.max_inflight) {
        cl->tally.errors++;
        req->cb(req, REDLOCK_VOTE_ERROR, "too many requests in flight on this node", NULL, now);
        return;
    }
    creq *cr = creq_new(cl);
    if (cr == NULL) {
        cl->tally.errors++;
        req->cb(req, REDLOCK_VOTE_ERROR, "out of memory", NULL, now);
        return;
    }
    cr->cl = cl;
    cr->outer = req;
    cmd_for_cluster(cl, cr);
    char why[ERR_LEN];
    int slot = cmd_slot(&cr->cmd, why, sizeof(why));
    if (slot < 0) {
        cl->tally.errors++;
        creq_free(cr);
        req->cb(req, REDLOCK_VOTE_ERROR, why, NULL, now);
        return;
    }
    cr->slot = (uint16_t)slot;
    cr->ask_conn = -1;
    cr->prev = cl->tail;
    if (cl->tail != NULL)
        cl->tail->next = cr;
    else
        cl->head = cr;
    cl->tail = cr;
    cl->inflight++;
    if (cr->prev == NULL)
        arm_deadline(cl, now);
    dispatch(cr, now);
}

/* ---- life ---------------------------------------------------------------------------------- */

int redlock__cluster_new(uv_loop_t *loop, const redlock__node_config *cfg, redlock__cluster **out)
{
    redlock__cluster *cl = redlock__calloc(cfg->alloc, 1, sizeof(*cl));
    if (cl == NULL)
        return REDLOCK_ENOMEM;
    cl->loop = loop;
    cl->cfg = *cfg;
    cl->state = CL_STARTING;
    redlock__node_tally_state(&cl->tally);
    cl->replica_wait = cfg->url->wait_replicas > 0 ? (unsigned)cfg->url->wait_replicas : 0;
    redlock__cluster_map_init(&cl->map, cfg->alloc);
    const redlock_url *u = cfg->url;
    bool ok = conn_get(cl, u->host, u->port, false) >= 0;
    for (size_t i = 0; ok && u->seeds != NULL && u->seeds[i].host != NULL; i++)
        ok = conn_get(cl, u->seeds[i].host, u->seeds[i].port, false) >= 0;
    if (!ok) {
        redlock__cluster_free_unstarted(cl);
        return REDLOCK_ENOMEM;
    }
    *out = cl;
    return 0;
}

void redlock__cluster_free_unstarted(redlock__cluster *cl)
{
    for (unsigned i = 0; i < cl->n_conns; i++) {
        redlock__node_free_unstarted(cl->conns[i]->node);
        conn_free(cl, cl->conns[i]);
    }
    redlock__free(cl->cfg.alloc, cl->conns);
    redlock__cluster_map_free(&cl->map);
    redlock__free(cl->cfg.alloc, cl);
}

void redlock__cluster_start(redlock__cluster *cl)
{
    uv_timer_init(cl->loop, &cl->deadline_timer);
    uv_timer_init(cl->loop, &cl->retry_timer);
    redlock__fmt(cl->tally.last_failure, sizeof(cl->tally.last_failure), "not connected yet");
    for (unsigned i = 0; i < cl->n_conns; i++) /* the seeds */
        redlock__node_start(cl->conns[i]->node);
    fetch(cl);
}

static void maybe_closed(redlock__cluster *cl)
{
    if (!redlock__closing_done(&cl->closing))
        return;
    redlock__closing told = cl->closing;
    for (unsigned i = 0; i < cl->n_conns; i++)
        conn_free(cl, cl->conns[i]);
    redlock__free(cl->cfg.alloc, cl->conns);
    redlock__free(cl->cfg.alloc, cl->conn_of_master);
    redlock__spares_free(&cl->spare, cl->cfg.alloc);
    redlock__cluster_map_free(&cl->map);
    redlock__free(cl->cfg.alloc, cl);
    redlock__closing_tell(told);
}

static void on_part_closed(void *data)
{
    maybe_closed(data);
}

static void on_timer_closed(uv_handle_t *h)
{
    maybe_closed(h->data);
}

void redlock__cluster_close(redlock__cluster *cl, void (*cb)(void *data), void *data)
{
    set_state(cl, CL_CLOSING);
    cl->closing = (redlock__closing){.pending = cl->n_conns + 2, .cb = cb, .data = data};
    uint64_t now = redlock__now_us();
    while (cl->head != NULL) /* parked ones are freed here, in-flight ones when their node ends
                                them */
        finish(cl->head, REDLOCK_VOTE_ERROR, "canceled: client closing", NULL, now);
    cl->deadline_timer.data = cl;
    cl->retry_timer.data = cl;
    uv_close((uv_handle_t *)&cl->deadline_timer, on_timer_closed);
    uv_close((uv_handle_t *)&cl->retry_timer, on_timer_closed);
    unsigned n = cl->n_conns; /* a callback cannot add conns any more: the state is CLOSING */
    for (unsigned i = 0; i < n; i++)
        redlock__node_close(cl->conns[i]->node, on_part_closed, cl);
}

/* ---- what it tells ------------------------------------------------------------------------- */

const char *redlock__cluster_twin(const redlock__cluster *cl, const redlock__node *node,
                                  const char *run_id)
{
    for (unsigned i = 0; i < cl->n_conns; i++)
        if (cl->conns[i]->node == node)
            return NULL;
    for (unsigned i = 0; i < cl->n_conns; i++) {
        const char *other = redlock__node_run_id(cl->conns[i]->node);
        if (other != NULL && strcmp(other, run_id) == 0)
            return cl->conns[i]->name;
    }
    return NULL;
}

void redlock__cluster_info(const redlock__cluster *cl, redlock_node_info *out)
{
    static const redlock_node_state states[] = {
        [CL_STARTING] = REDLOCK_NODE_CONNECTING,
        [CL_READY] = REDLOCK_NODE_UP,
        [CL_DOWN] = REDLOCK_NODE_DOWN,
        [CL_CLOSING] = REDLOCK_NODE_CLOSED,
    };
    out->url = cl->cfg.name;
    out->state = states[cl->state];
    out->inflight = cl->inflight;
    out->owed = 0;
    out->connect_failures = 0;
    out->connects = out->disconnects = 0;
    for (unsigned i = 0; i < cl->n_conns; i++) {
        redlock_node_info one = {.size = sizeof(one)};
        redlock__node_info(cl->conns[i]->node, &one);
        out->owed += one.owed;
        out->connects += one.connects;
        out->disconnects += one.disconnects;
        out->connect_failures += one.connect_failures;
    }
    redlock__node_tally_info(&cl->tally, out);
    if (cl->state == CL_STARTING) /* "not connected yet" is no failure */
        out->last_error[0] = '\0';
}

uint64_t redlock__cluster_timeout_us(const redlock__cluster *cl)
{
    return redlock__rto_bound_us(cl->cfg.timeout_us);
}
