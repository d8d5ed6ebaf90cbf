/* SPDX-License-Identifier: MIT */
/* sim_world.c - the simulation's event loop in virtual time (on the kit's queue,
 * lib/sim/sim_queue.h), the faults, the mutual-exclusion checker, and the scenarios. The
 * processes' program is in sim_proc.c.
 *
 * True time is global and only the checker reads it. Each process sees only its own clock,
 * local = offset + t * rate, through its io; its events (replies, timeouts, timers, its own
 * program) wait while it is paused, as a stopped process's would. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

#define MAX_EVENTS_PER_RUN 5000000u

/* ---- clocks -----------------------------------------------------------------------------------
 */

uint64_t sim_clock(uint64_t rate_ppm, uint64_t offset_us, uint64_t t)
{
    return offset_us + t * rate_ppm / SIM_PPM; /* t < 2^44 and rate < 2^21: no overflow */
}

/* The first true time at which the clock reads at least local. */
uint64_t sim_clock_true_raw(uint64_t rate_ppm, uint64_t offset_us, uint64_t local)
{
    if (local <= offset_us)
        return 0;
    return ((local - offset_us) * SIM_PPM + rate_ppm - 1) / rate_ppm;
}

uint64_t sim_clock_true(sim_world *w, uint64_t rate_ppm, uint64_t offset_us, uint64_t local)
{
    return REDLOCK__MAX(w->now, sim_clock_true_raw(rate_ppm, offset_us, local));
}

uint64_t sim_proc_now(sim_proc *p)
{
    return sim_clock(p->rate_ppm, p->offset_us, p->w->now);
}

void sim_push(sim_world *w, uint64_t at, sim_ev_kind kind, unsigned proc, unsigned node,
              uint64_t arg, sim_msg *msg)
{
    sim_event ev = {REDLOCK__MAX(at, w->now), 0, (int)kind, proc, node, arg, msg, false};
    if (!sim_queue_push(&w->queue, ev)) {
        w->oom = true;
        sim_msg_free(msg);
    }
}

/* ---- trace, hash, contract --------------------------------------------------------------------
 */

void sim_hash(sim_world *w, uint64_t x)
{
    uint64_t h = w->res->trace_hash;
    for (int i = 0; i < 8; i++) {
        h ^= (x >> (8 * i)) & 0xff;
        h *= 0x100000001b3ull;
    }
    w->res->trace_hash = h;
}

void sim_trace(sim_world *w, const char *fmt, ...)
{
    if (!w->cfg.trace)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%12.3f ms  ", (double)w->now / 1000.0);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void sim_contract(sim_world *w, const char *fmt, ...)
{
    sim_result *r = w->res;
    if (r->contract_broken)
        return;
    r->contract_broken = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->what, sizeof(r->what), fmt, ap);
    va_end(ap);
}

void sim_promise(sim_world *w, const char *fmt, ...)
{
    sim_result *r = w->res;
    if (r->promise_broken)
        return;
    r->promise_broken = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->promise, sizeof(r->promise), fmt, ap);
    va_end(ap);
    sim_trace(w, "BROKEN PROMISE: %s", r->promise);
}

/* ---- the checker ------------------------------------------------------------------------------
 */

void sim_record_hold(sim_world *w, sim_proc *p, uint64_t deadline)
{
    if (w->n_holds == w->cap_holds) {
        size_t cap = w->cap_holds != 0 ? w->cap_holds * 2 : 64;
        sim_hold *v = realloc(w->holds, cap * sizeof(*v));
        if (v == NULL) {
            w->oom = true;
            return;
        }
        w->holds = v;
        w->cap_holds = cap;
    }
    bool auto_extended = p->autoh != NULL && p->autoh->started;
    sim_hold *h = &w->holds[w->n_holds++];
    *h = (sim_hold){p->id, p->resource, p->hold_start, w->now, deadline, p->lost_at, auto_extended};
    sim_trace(w, "p%u held res-%u over [%llu, %llu) us%s", p->id, p->resource,
              (unsigned long long)h->start, (unsigned long long)sim_hold_end(h),
              auto_extended ? " (auto-extended)" : "");
    /* A set's hold is a hold of each of its resources: two holders of overlapping sets hold
     * one resource at once. */
    sim_hold first = *h;
    for (unsigned i = 1; i < p->n_res && !w->oom; i++) {
        sim_hold more = first;
        more.resource = p->res[i];
        if (w->n_holds == w->cap_holds) {
            size_t cap = w->cap_holds * 2;
            sim_hold *v = realloc(w->holds, cap * sizeof(*v));
            if (v == NULL) {
                w->oom = true;
                return;
            }
            w->holds = v;
            w->cap_holds = cap;
        }
        w->holds[w->n_holds++] = more;
    }
}

/* No two holds of one resource overlap in true time (sim_check.h). */
static void check_exclusion(sim_world *w)
{
    sim_result *r = w->res;
    sim_exclusion ex;
    unsigned bad = sim_check_exclusion(w->holds, w->n_holds, w->cfg.ttl_ms * 1000, &ex);
    r->holds = ex.holds;
    r->handovers = ex.handovers;
    if (bad == 0)
        return;
    r->violation = true;
    if (!r->contract_broken)
        snprintf(r->what, sizeof(r->what), "%s", ex.what);
}

/* ---- setup and the loop -----------------------------------------------------------------------
 */

/* A clock rate within 1 +/- spread, in ppm; edge < 0: the slow edge, > 0: the fast one. */
static uint64_t pick_rate(sim_rng *r, double spread, int edge)
{
    uint64_t span = (uint64_t)(spread * SIM_PPM);
    if (edge != 0)
        return edge < 0 ? SIM_PPM - span : SIM_PPM + span;
    /* Half the clocks sit at an edge of the allowance: the worst case is the interesting one. */
    uint64_t off =
        sim_rng_chance(r, 0.5) ? span * sim_rng_range(r, 0, 1) * 2 : sim_rng_range(r, 0, 2 * span);
    return SIM_PPM - span + off;
}

static void schedule_faults(sim_world *w)
{
    const sim_config *cfg = &w->cfg;
    for (unsigned i = 0; i < cfg->restarts; i++)
        sim_push(w, sim_rng_range(&w->rng, 0, cfg->horizon_us), EV_NODE_CRASH, 0,
                 (unsigned)sim_rng_range(&w->rng, 0, cfg->n_nodes - 1),
                 sim_rng_range(&w->rng, REDLOCK__MAX(cfg->restart_down_min_us, 1000),
                               cfg->restart_down_max_us),
                 NULL); /* a cluster node fails over instead (sim_cluster.c) */
    for (unsigned i = 0; i < cfg->partitions; i++)
        sim_push(w, sim_rng_range(&w->rng, 0, cfg->horizon_us), EV_PARTITION,
                 (unsigned)sim_rng_range(&w->rng, 0, cfg->n_procs - 1),
                 (unsigned)sim_rng_range(&w->rng, 0, cfg->n_nodes - 1),
                 sim_rng_range(&w->rng, 1000, cfg->partition_max_us), NULL);
    for (unsigned i = 0; i < cfg->pauses; i++)
        sim_push(w, sim_rng_range(&w->rng, 0, cfg->horizon_us), EV_PAUSE,
                 (unsigned)sim_rng_range(&w->rng, 0, cfg->n_procs - 1), 0,
                 sim_rng_range(&w->rng, 1000, cfg->pause_max_us), NULL);
    for (unsigned i = 0; i < cfg->clock_jumps; i++)
        sim_push(w, sim_rng_range(&w->rng, 0, cfg->horizon_us), EV_CLOCK_JUMP, 0,
                 (unsigned)sim_rng_range(&w->rng, 0, cfg->n_nodes - 1),
                 sim_rng_range(&w->rng, cfg->clock_jump_min_us, cfg->clock_jump_max_us), NULL);
    for (unsigned i = 0; i < cfg->n_procs; i++)
        if (sim_rng_chance(&w->rng, cfg->vanish_prob))
            sim_push(w, sim_rng_range(&w->rng, 0, cfg->horizon_us), EV_VANISH, i, 0, 0, NULL);
    sim_pubsub_schedule(w);
    sim_hostile_schedule(w);
    sim_cluster_schedule(w);
}

static int start_procs(sim_world *w)
{
    const sim_config *cfg = &w->cfg;
    char url_text[SIM_MAX_NODES][64];
    const char *urls[SIM_MAX_NODES];
    for (unsigned i = 0; i < SIM_MAX_NODES; i++) {
        if ((cfg->cluster_mask >> i & 1) != 0)
            snprintf(url_text[i], sizeof(url_text[i]), "cluster://sim-%u:7000?wait_replicas=%u", i,
                     cfg->wait_replicas);
        else
            snprintf(url_text[i], sizeof(url_text[i]), "redis://sim-%u:6379", i);
        urls[i] = url_text[i];
    }
    redlock_options opts;
    redlock_options_init(&opts);
    opts.ttl_ms = cfg->ttl_ms;
    opts.node_timeout_ms = cfg->node_timeout_ms;
    opts.drift_factor = cfg->drift_factor;
    opts.retry_count = cfg->retry_count;
    opts.retry_delay_ms = cfg->retry_delay_ms;
    opts.retry_jitter_ms = cfg->retry_jitter_ms;
    for (unsigned i = 0; i < cfg->n_procs; i++) {
        sim_proc *p = &w->procs[i];
        p->w = w;
        p->id = i;
        sim_rng_seed(&p->rng, sim_rng_next(&w->rng));
        p->rate_ppm = pick_rate(&w->rng, cfg->rate_spread, cfg->opposite_clocks ? -1 : 0);
        if (i == 0 && cfg->bad_rate > 0)
            p->rate_ppm = (uint64_t)(cfg->bad_rate * SIM_PPM);
        p->offset_us = sim_rng_range(&w->rng, 1000000, 1000000000000ull);
        /* Its wall clock (places in the queues), within a millisecond of true time as NTP keeps
         * it; from a stream of its own, so that the worlds without queues keep their seeds. */
        sim_rng wall;
        sim_rng_seed(&wall, cfg->seed * 0x9E3779B97F4A7C15ull + i);
        p->wall_offset_us = (int64_t)sim_rng_range(&wall, 0, 1000);
        char err[256];
        int rc = redlock__client_new_io(NULL, urls, cfg->n_nodes, &opts, sim_io_factory, p,
                                        &p->client, err, sizeof(err));
        if (rc != 0) {
            sim_contract(w, "client %u: %s", i, err);
            return -1;
        }
        sim_proc_start(p);
    }
    return 0;
}

static bool is_proc_event(sim_ev_kind kind)
{
    return kind == EV_CLIENT_RECV || kind == EV_REQ_TIMEOUT || kind == EV_CONN_LOST ||
           kind == EV_WAKE || kind == EV_IO_CLOSED || kind == EV_PROC_STEP ||
           kind == EV_NEW_SERVER || kind == EV_SUB_RECV;
}

static void dispatch(sim_world *w, const sim_event *ev)
{
    sim_proc *p = &w->procs[ev->proc];
    switch (ev->kind) {
    case EV_WAKE:
        if (ev->arg == p->wake_gen && !p->io.closing)
            p->io.base.on_wake(&p->io.base);
        break;
    case EV_PROC_STEP:
        if (!p->io.closing)
            sim_proc_step(p, ev->arg);
        break;
    case EV_PAUSE:
        p->paused_until = REDLOCK__MAX(p->paused_until, w->now + ev->arg);
        sim_trace(w, "p%u paused for %llu us", ev->proc, (unsigned long long)ev->arg);
        break;
    case EV_STORE:
        sim_fence_store(w, ev);
        break;
    case EV_VANISH:
        sim_proc_vanish(p);
        break;
    case EV_FORGE:
        sim_hostile_event(w, ev);
        break;
    default:
        sim_io_event(w, ev);
        break;
    }
}

static void run_loop(sim_world *w)
{
    while (w->queue.len > 0 && !w->oom) {
        sim_event ev = sim_queue_pop(&w->queue);
        w->now = ev.at;
        bool proc_event = is_proc_event(ev.kind);
        if (proc_event && w->procs[ev.proc].vanished && ev.kind != EV_IO_CLOSED) {
            sim_msg_free(ev.msg); /* it handles nothing any more */
            continue;
        }
        if (proc_event && w->procs[ev.proc].paused_until > ev.at) {
            if (!sim_queue_defer(&w->queue, ev, w->procs[ev.proc].paused_until)) {
                w->oom = true;
                sim_msg_free(ev.msg);
            }
            continue;
        }
        w->res->events++;
        sim_hash(w, ev.at);
        sim_hash(w, ((uint64_t)ev.kind << 32) | ((uint64_t)ev.proc << 16) | ev.node);
        w->ev_deferred = ev.deferred;
        dispatch(w, &ev);
        if (proc_event && !w->procs[ev.proc].io.closed && !w->procs[ev.proc].vanished)
            sim_proc_observe(&w->procs[ev.proc]);
        if (w->res->events > MAX_EVENTS_PER_RUN) {
            sim_contract(w, "runaway: over %u events", MAX_EVENTS_PER_RUN);
            break;
        }
    }
    w->res->end_us = w->now;
    for (unsigned i = 0; i < w->cfg.n_procs; i++)
        w->res->requests += w->procs[i].sent;
}

static void check_contract(sim_world *w)
{
    for (unsigned i = 0; i < w->cfg.n_procs; i++) {
        sim_proc *p = &w->procs[i];
        sim_proc_finish(p);
        if (!p->client_closed || !p->io.closed)
            sim_contract(w, "process %u: client not closed at the end", i);
        if (p->sent != p->completed)
            sim_contract(w, "process %u: %llu requests sent, %llu completed", i,
                         (unsigned long long)p->sent, (unsigned long long)p->completed);
    }
}

int sim_run(const sim_config *cfg, sim_result *res)
{
    memset(res, 0, sizeof(*res));
    res->trace_hash = 0xcbf29ce484222325ull;
    if (cfg->n_nodes == 0 || cfg->n_nodes > SIM_MAX_NODES || cfg->dead_nodes >= cfg->n_nodes ||
        cfg->n_procs == 0 || cfg->n_procs > SIM_MAX_PROCS || cfg->n_resources == 0 ||
        cfg->n_resources > SIM_MAX_RESOURCES) {
        res->contract_broken = true;
        snprintf(res->what, sizeof(res->what), "bad configuration");
        return -1;
    }
    sim_world *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return -1;
    w->cfg = *cfg;
    w->res = res;
    redlock__alloc_init(&w->alloc, NULL, NULL);
    sim_rng_seed(&w->rng, cfg->seed);
    int rc = 0;
    for (unsigned i = 0; i < cfg->n_nodes; i++) {
        w->nodes[i].up = true;
        w->nodes[i].run_id = 1;
        w->nodes[i].rate_ppm = pick_rate(&w->rng, cfg->rate_spread, cfg->opposite_clocks ? 1 : 0);
        w->nodes[i].offset_us = sim_rng_range(&w->rng, 1000000, 1000000000000ull);
        if (sim_node_init(w, i) != 0)
            rc = -1;
    }
    for (unsigned i = 0; i < cfg->dead_nodes && i < cfg->n_nodes; i++)
        sim_node_down(w, i);
    if (rc == 0)
        rc = sim_fence_start(w);
    if (rc == 0)
        rc = start_procs(w);
    schedule_faults(w);
    run_loop(w);
    /* The processes that vanished are closed now (their sends fail at once). */
    for (unsigned i = 0; rc == 0 && i < cfg->n_procs; i++)
        if (w->procs[i].vanished && w->procs[i].client != NULL && !w->procs[i].client_closed)
            sim_proc_close_vanished(&w->procs[i]);
    run_loop(w);
    if (rc == 0 && !w->oom && !res->contract_broken)
        check_contract(w);
    check_exclusion(w);
    sim_fence_finish(w);
    sim_io_teardown(w);
    while (w->queue.len > 0)
        sim_msg_free(sim_queue_pop(&w->queue).msg);
    for (unsigned i = 0; i < cfg->n_nodes; i++)
        sim_node_free(w, i);
    sim_pubsub_free(w);
    int ok = w->oom ? -1 : 0;
    while (w->auto_holds != NULL) {
        sim_auto_hold *h = w->auto_holds;
        w->auto_holds = h->next;
        free(h);
    }
    sim_queue_free(&w->queue);
    free(w->holds);
    sim_nodelog_free(&w->log);
    free(w);
    return rc != 0 ? rc : ok;
}

uint64_t sim_wait_bound_us(const sim_config *cfg, unsigned vanished)
{
    uint64_t ttl_us = cfg->ttl_ms * 1000, round_us = cfg->node_timeout_ms * 1000;
    uint64_t hold_us = ttl_us * 3 / 2 + round_us;
    uint64_t handoff_us = (cfg->retry_delay_ms + cfg->retry_jitter_ms) * 1000 + 2 * round_us;
    /* ops.c's place_ttl_ms: twice (retry delay + jitter + the slowest timeout) + 100 ms */
    uint64_t place_ms =
        2 * (cfg->retry_delay_ms + cfg->retry_jitter_ms + cfg->node_timeout_ms) + 100;
    uint64_t place_us = REDLOCK__MIN(place_ms, 10000) * 1000;
    uint64_t others = cfg->n_procs > 0 ? cfg->n_procs - 1 : 0;
    return others * (hold_us + handoff_us) + handoff_us + vanished * (place_us + handoff_us);
}

/* ---- scenarios --------------------------------------------------------------------------------
 */

static void base_config(sim_config *c, uint64_t seed)
{
    memset(c, 0, sizeof(*c));
    c->seed = seed;
    c->n_nodes = 3;
    c->n_procs = 3;
    c->n_resources = 1;
    c->cycles = 6;
    c->ttl_ms = 100;
    c->node_timeout_ms = 10;
    c->drift_factor = 0.01;
    c->retry_count = 3;
    c->retry_delay_ms = 20;
    c->retry_jitter_ms = 10;
    c->extend_prob = 0.3;
    c->rate_spread = c->drift_factor / 2;
    c->delay_min_us = 100;
    c->delay_max_us = 2000;
    c->stall_prob = 0.02;
    c->stall_max_us = 30000;
    c->drop_prob = 0.01;
    c->horizon_us = c->cycles * c->ttl_ms * 2000;
    c->partition_max_us = 50000;
    c->pause_max_us = 200000;
    c->restart_down_max_us = 50000;
}

/* The worlds of waiting holds (queues, grants, notifications), mixed with fenced holds and sets:
 * "grants" (the safe world's faults on 3 or 5 nodes, lagging and dropping subscribers, processes
 * that vanish, now and then a node whose ACL refuses pub/sub), "grants-alias" (the same on 5
 * nodes, the last being node 0 listed again), "cluster" (3 nodes, the first, the first two or
 * all Redis Clusters with wait_replicas=1, failovers and slot migrations; no sets: a cluster needs
 * one slot per request), "turns" (liveness: no faults but lagging and dropping subscribers and
 * processes that vanish; every acquire waits, and must be served in time), "hostile" ("grants"
 * with its last node forging messages of every kind: sim_hostile.c). */
static bool waiting_scenario(sim_config *c, const char *name, sim_rng *r)
{
    bool alias = strcmp(name, "grants-alias") == 0;
    bool cluster = strcmp(name, "cluster") == 0;
    bool turns = strcmp(name, "turns") == 0;
    bool hostile = strcmp(name, "hostile") == 0;
    if (!alias && !cluster && !turns && !hostile && strcmp(name, "grants") != 0)
        return false;
    if (hostile)
        c->forges = 400; /* the last node forges (sim_hostile.c); the rest as in "grants" */
    c->n_nodes = alias ? 5 : cluster || sim_rng_chance(r, 0.5) ? 3 : 5;
    c->n_procs = (unsigned)sim_rng_range(r, 3, 5);
    c->n_resources = cluster ? 2 : 3;
    c->wait_ms = 30 * c->ttl_ms;
    c->wait_prob = 0.7;
    c->fenced_prob = 0.3;
    c->set_prob = cluster ? 0 : 0.3;
    c->set_max = 3;
    c->vanish_prob = 0.25;
    c->sub_stall_prob = 0.05;
    c->sub_stall_max_us = 30000;
    c->sub_drops = (unsigned)sim_rng_range(r, 0, 4);
    if (turns) {
        /* Every holder releases, nothing else fails: the bound of sim_wait_bound_us. */
        c->n_procs = (unsigned)sim_rng_range(r, 4, 6);
        c->n_resources = 1;
        c->cycles = 5;
        c->wait_ms = 60 * c->ttl_ms;
        c->wait_prob = 0;
        c->vanish_prob = 0.15;
        c->stall_prob = 0;
        c->drop_prob = 0;
        c->sub_stall_max_us = 20000;
        c->check_liveness = true;
        return true;
    }
    c->partitions = (unsigned)sim_rng_range(r, 0, 3);
    c->pauses = (unsigned)sim_rng_range(r, 0, 3);
    c->restarts = cluster ? 0 : (unsigned)sim_rng_range(r, 0, 2);
    c->drop_prob = (double)sim_rng_range(r, 0, 20) / 1000.0;
    c->stall_prob = (double)sim_rng_range(r, 0, 30) / 1000.0;
    c->snipe_prob = 0.2;
    c->round_pause_prob = 0.1;
    if (sim_rng_chance(r, 1.0 / 3)) { /* the edge of the allowance, as in "safe" */
        c->opposite_clocks = true;
        c->delay_min_us = 50;
        c->delay_max_us = 300;
        c->snipe_prob = 0.5;
    }
    if (sim_rng_chance(r, 1.0 / 3)) /* one node's ACL refuses PUBSUB NUMSUB and PUBLISH */
        c->refuse_pubsub_mask = 1u << sim_rng_range(r, 0, c->n_nodes - 1);
    if (sim_rng_chance(r, 0.25)) {
        /* A ttl longer than a waiter's place (ops.c: 180 ms here): a grant is then cut at the
         * head's place deadline, and its head must claim the keys with a round. */
        c->ttl_ms = 300;
        c->horizon_us = c->cycles * c->ttl_ms * 2000;
    }
    if (alias)
        c->alias_node = c->n_nodes; /* node 4 is node 0 */
    if (cluster) {
        c->cluster_mask = (1u << sim_rng_range(r, 1, 3)) - 1; /* node 0, 0 and 1, or all */
        c->wait_replicas = 1;
        c->failovers = (unsigned)sim_rng_range(r, 0, 3);
        c->failover_prob = 0.3;
        c->migrations = (unsigned)sim_rng_range(r, 1, 4);
    }
    return true;
}

static bool base_scenario(sim_config *c, const char *name, uint64_t seed)
{
    base_config(c, seed);
    /* The mix of faults varies with the seed too, from a stream of its own. */
    sim_rng r;
    sim_rng_seed(&r, seed ^ 0x5eed5eed5eed5eedull);
    if (strcmp(name, "safe") == 0) {
        c->n_nodes = sim_rng_chance(&r, 0.5) ? 3 : 5;
        c->n_procs = (unsigned)sim_rng_range(&r, 2, 4);
        c->n_resources = (unsigned)sim_rng_range(&r, 1, 2);
        c->partitions = (unsigned)sim_rng_range(&r, 0, 4);
        c->pauses = (unsigned)sim_rng_range(&r, 0, 4);
        c->restarts = (unsigned)sim_rng_range(&r, 0, 3);
        c->drop_prob = (double)sim_rng_range(&r, 0, 30) / 1000.0;
        c->stall_prob = (double)sim_rng_range(&r, 0, 50) / 1000.0;
        /* The edge of the allowance in a third of the seeds: every process's clock slow and
         * every node's fast by as much as drift_factor allows, a fast network (the contender's
         * round is short), and many contenders timed to land as the holder's keys expire; the
         * holders, as everywhere, often work up to their deadline. Removing the drift allowance
         * from the validity, or measuring it from the decision, overlaps holds here. */
        c->snipe_prob = 0.2;
        c->round_pause_prob = 0.1;
        if (sim_rng_chance(&r, 1.0 / 3)) {
            c->opposite_clocks = true;
            c->delay_min_us = 50;
            c->delay_max_us = 300;
            c->snipe_prob = 0.5;
        }
        return true;
    }
    if (strcmp(name, "calm") == 0) {
        c->n_nodes = 5;
        c->n_procs = 4;
        c->stall_prob = 0;
        c->drop_prob = 0;
        c->wait_ms = 30 * c->ttl_ms;
        return true;
    }
    if (strcmp(name, "slow-clock") == 0) {
        c->bad_rate = 0.7; /* 30% slow: far beyond drift_factor 0.01 */
        return true;
    }
    if (strcmp(name, "reconnect") == 0) {
        c->drop_silent_conns = true;
        c->stall_prob = 0.03;
        c->stall_max_us = 200000;
        return true;
    }
    if (strcmp(name, "clock-jump") == 0) {
        c->clock_jumps = 4;
        c->clock_jump_min_us = c->ttl_ms * 300;
        c->clock_jump_max_us = c->ttl_ms * 800;
        c->snipe_prob = 0.5;
        return true;
    }
    if (strcmp(name, "amnesia") == 0) {
        c->restarts = 8;
        c->restart_loses_data = true;
        c->restart_down_max_us = 20000;
        c->partitions = 2;
        return true;
    }
    return waiting_scenario(c, name, &r);
}

/* Auto-extended holds in a named world. Holds last several ttls, so the run lasts longer: the
 * faults are spread over a longer horizon, with their count scaled to keep their density. */
static void add_auto_extension(sim_config *c, double auto_prob)
{
    c->auto_prob = auto_prob;
    c->auto_hold_max_ms = 5 * c->ttl_ms;
    c->auto_cap_prob = 0.25;
    c->auto_cap_max = 8;
    c->auto_close_prob = 0.3;
    c->horizon_us *= 2;
    c->partitions *= 2;
    c->pauses *= 2;
    c->restarts *= 2;
}

bool sim_config_scenario(sim_config *c, const char *name, uint64_t seed)
{
    static const char suffix[] = "-auto";
    size_t len = strlen(name), suffix_len = sizeof(suffix) - 1;
    if (len <= suffix_len || strcmp(name + len - suffix_len, suffix) != 0)
        return base_scenario(c, name, seed);
    char base[32];
    if (len - suffix_len >= sizeof(base))
        return false;
    memcpy(base, name, len - suffix_len);
    base[len - suffix_len] = '\0';
    if (!base_scenario(c, base, seed))
        return false;
    /* Where an assumption is broken on purpose, every hold is auto-extended (what breaks is then
     * an extended hold) and half of them are capped: the cap's lost callback, at lost_margin
     * before the deadline on a slow clock, comes after the keys expired. */
    bool broken = strcmp(base, "slow-clock") == 0 || strcmp(base, "amnesia") == 0;
    add_auto_extension(c, broken ? 1.0 : 0.7);
    if (broken)
        c->auto_cap_prob = 0.5;
    return true;
}
