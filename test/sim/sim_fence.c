/* SPDX-License-Identifier: MIT */
/* sim_fence.c - fencing in the simulation (sim_fence.h): the nodes' counters, the grants and
 * the writes of fenced holds, the fenced store, and the checker.
 *
 * Each fenced hold writes to a store a few times, each write after the holder's own check that
 * it still holds the lock; between the check and the store a write may be delayed (the network)
 * or held back up to two ttls (a pause after the check: the case fencing exists for). The store
 * accepts a write only if its fence is at least the largest it accepted for that resource, as a
 * real one would (examples/fenced_store.c).
 *
 * Two properties, checked with the true time only the simulator knows:
 *   - order: for each resource, fences strictly increase in the true-time order of grants
 *     (except where more nodes restarted empty between two grants than fence_commit covers);
 *   - the store never accepts a stale write: one from a hold granted before another hold whose
 *     write it already accepted. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

/* ---- the checker ----------------------------------------------------------------------------- */

typedef struct fence_grant {
    unsigned proc, resource;
    uint64_t fence;
    uint64_t at;  /* true time of the acquire callback */
    uint64_t seq; /* order of grants at the same instant */
} fence_grant;

typedef struct fence_write {
    unsigned proc, resource;
    uint64_t fence;
    uint64_t granted_at;    /* true time its hold was granted */
    uint64_t deadline_true; /* its hold's deadline, as the holder knew it at its check */
} fence_write;

/* The fenced store, per resource: the largest fence it accepted, and the latest grant among the
 * holds whose writes it accepted. */
typedef struct store_slot {
    bool any;
    uint64_t last_fence;
    uint64_t newest_grant;
    unsigned newest_proc;
} store_slot;

struct sim_fence_world {
    fence_grant *grants;
    size_t n_grants, cap_grants;
    fence_write *writes;
    size_t n_writes, cap_writes;
    store_slot store[SIM_MAX_RESOURCES];
};

static void fence_problem(sim_world *w, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void fence_problem(sim_world *w, const char *fmt, ...)
{
    sim_result *r = w->res;
    if (r->fence_broken)
        return;
    r->fence_broken = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->fence_what, sizeof(r->fence_what), fmt, ap);
    va_end(ap);
    sim_trace(w, "FENCING: %s", r->fence_what);
}

/* Room for one more element of an array of size bytes each; false (and oom) if none. */
static bool grow(sim_world *w, void **v, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return true;
    size_t next = *cap != 0 ? *cap * 2 : 64;
    void *bigger = realloc(*v, next * size);
    if (bigger == NULL) {
        w->oom = true;
        return false;
    }
    *v = bigger;
    *cap = next;
    return true;
}

int sim_fence_start(sim_world *w)
{
    w->fence = calloc(1, sizeof(*w->fence));
    return w->fence != NULL ? 0 : -1;
}

void sim_fence_granted(sim_proc *p, redlock_lock *lock)
{
    sim_world *w = p->w;
    struct sim_fence_world *f = w->fence;
    if (!p->fenced)
        return;
    uint64_t fence = redlock_lock_fence(lock);
    if (fence == 0)
        sim_contract(w, "p%u was handed a fenced lock without a fence", p->id);
    if (!grow(w, (void **)&f->grants, &f->cap_grants, f->n_grants, sizeof(*f->grants)))
        return;
    f->grants[f->n_grants] = (fence_grant){p->id, p->resource, fence, w->now, f->n_grants};
    f->n_grants++;
    w->res->fence.grants++;
    sim_trace(w, "p%u granted res-%u with fence %llu", p->id, p->resource,
              (unsigned long long)fence);
    /* Up to three writes at random moments of the hold as planned (a plain hold works up to 1.5
     * ttl, an auto-extended one longer): each checks the lock first and skips if it is over. */
    uint64_t span_us = w->cfg.ttl_ms * 1000 * 3 / 2;
    if (p->autoh != NULL)
        span_us = REDLOCK__MAX(span_us, w->cfg.auto_hold_max_ms * 1000);
    unsigned n = (unsigned)sim_rng_range(&p->rng, 0, 3);
    for (unsigned i = 0; i < n; i++) {
        uint64_t local = sim_proc_now(p) + sim_rng_range(&p->rng, 0, span_us);
        sim_push(w, sim_clock_true(w, p->rate_ppm, p->offset_us, local), EV_PROC_STEP, p->id, 0,
                 (p->hold_gen << 8) | SIM_STEP_WRITE, NULL);
    }
}

void sim_fence_write(sim_proc *p)
{
    sim_world *w = p->w;
    struct sim_fence_world *f = w->fence;
    /* The holder's last check: it writes only while it believes it holds the lock. */
    if (!p->using_lock || !redlock_lock_is_held(p->lock, sim_proc_now(p)))
        return;
    if (!grow(w, (void **)&f->writes, &f->cap_writes, f->n_writes, sizeof(*f->writes)))
        return;
    uint64_t deadline = redlock_lock_deadline_us(p->lock);
    f->writes[f->n_writes] =
        (fence_write){p->id, p->resource, redlock_lock_fence(p->lock), p->granted_at,
                      sim_clock_true_raw(p->rate_ppm, p->offset_us, deadline)};
    /* Between the check and the write reaching the store: a network's delay, or now and then a
     * pause (GC, SIGSTOP) of up to two ttls, which may take the write past the hold. */
    uint64_t delay = sim_rng_chance(&p->rng, 0.25)
                         ? sim_rng_range(&p->rng, 0, 2 * w->cfg.ttl_ms * 1000)
                         : sim_rng_range(&p->rng, w->cfg.delay_min_us, w->cfg.delay_max_us);
    sim_push(w, w->now + delay, EV_STORE, p->id, 0, f->n_writes, NULL);
    f->n_writes++;
    w->res->fence.writes++;
}

void sim_fence_store(sim_world *w, const sim_event *ev)
{
    struct sim_fence_world *f = w->fence;
    if (ev->arg >= f->n_writes) {
        sim_contract(w, "a store event for write %llu of %zu", (unsigned long long)ev->arg,
                     f->n_writes);
        return;
    }
    const fence_write *wr = &f->writes[ev->arg];
    sim_fence_stats *s = &w->res->fence;
    store_slot *slot = &f->store[wr->resource];
    bool late = w->now >= wr->deadline_true;
    s->late_writes += late;
    /* The store's check: a fence below the last accepted one is refused. */
    if (slot->any && wr->fence < slot->last_fence) {
        s->refused++;
        sim_trace(w, "store refuses p%u's write to res-%u: fence %llu < %llu%s", wr->proc,
                  wr->resource, (unsigned long long)wr->fence, (unsigned long long)slot->last_fence,
                  late ? " (late)" : "");
        return;
    }
    s->accepted++;
    sim_trace(w, "store accepts p%u's write to res-%u with fence %llu%s", wr->proc, wr->resource,
              (unsigned long long)wr->fence, late ? " (late)" : "");
    /* Stale: a hold granted later has already written here. */
    if (slot->any && wr->granted_at < slot->newest_grant) {
        s->stale_accepted++;
        fence_problem(w,
                      "the store accepted p%u's write to res-%u (fence %llu, granted at %llu us) "
                      "after a write of p%u's hold granted later, at %llu us (last fence %llu)",
                      wr->proc, wr->resource, (unsigned long long)wr->fence,
                      (unsigned long long)wr->granted_at, slot->newest_proc,
                      (unsigned long long)slot->newest_grant, (unsigned long long)slot->last_fence);
    }
    slot->any = true;
    slot->last_fence = REDLOCK__MAX(slot->last_fence, wr->fence);
    if (wr->granted_at >= slot->newest_grant) {
        slot->newest_grant = wr->granted_at;
        slot->newest_proc = wr->proc;
    }
}

static int grant_cmp(const void *a, const void *b)
{
    const fence_grant *x = a, *y = b;
    if (x->resource != y->resource)
        return x->resource < y->resource ? -1 : 1;
    if (x->at != y->at)
        return x->at < y->at ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Nodes restarted without their data over [from, to] of true time. */
static unsigned forgetting_nodes(const sim_world *w, uint64_t from, uint64_t to)
{
    if (!w->cfg.restart_loses_data)
        return 0;
    bool forgot[SIM_MAX_NODES] = {false};
    for (size_t i = 0; i < w->log.n_downtimes; i++)
        if (w->log.downtimes[i].from >= from && w->log.downtimes[i].from <= to)
            forgot[w->log.downtimes[i].node] = true;
    unsigned n = 0;
    for (unsigned i = 0; i < w->cfg.n_nodes; i++)
        n += forgot[i];
    return n;
}

/* Fences strictly increase in the true-time order of grants of each resource. A counter can be
 * forgotten between an earlier grant's commit (after its attempt started, at most a ttl before
 * its grant) and a later grant's read (before that grant); fence_commit - quorum such nodes are
 * covered. A pair with more is an assumption broken on purpose: counted apart. */
static void check_order(sim_world *w)
{
    struct sim_fence_world *f = w->fence;
    sim_fence_stats *s = &w->res->fence;
    if (f->n_grants > 1)
        qsort(f->grants, f->n_grants, sizeof(f->grants[0]), grant_cmp);
    unsigned quorum = w->cfg.n_nodes / 2 + 1;
    unsigned covered = w->cfg.fence_commit > quorum ? w->cfg.fence_commit - quorum : 0;
    uint64_t reach_us = w->cfg.ttl_ms * 1100; /* a ttl, and the clocks' spread */
    for (size_t i = 1; i < f->n_grants; i++) {
        const fence_grant *a = &f->grants[i - 1], *b = &f->grants[i];
        if (a->resource != b->resource)
            continue;
        s->order_checks++;
        unsigned forgot = forgetting_nodes(w, a->at > reach_us ? a->at - reach_us : 0, b->at);
        s->amnesia_pairs += forgot > 0;
        if (b->fence > a->fence)
            continue;
        if (forgot > covered) {
            s->order_excused++;
            continue;
        }
        s->order_broken++;
        fence_problem(w,
                      "res-%u: p%u was granted fence %llu at %llu us, after p%u was granted fence "
                      "%llu at %llu us (true time; %u nodes restarted empty in between)",
                      b->resource, b->proc, (unsigned long long)b->fence, (unsigned long long)b->at,
                      a->proc, (unsigned long long)a->fence, (unsigned long long)a->at, forgot);
    }
}

void sim_fence_finish(sim_world *w)
{
    struct sim_fence_world *f = w->fence;
    if (f == NULL)
        return;
    check_order(w);
    free(f->grants);
    free(f->writes);
    free(f);
    w->fence = NULL;
}

/* ---- scenarios ------------------------------------------------------------------------------- */

bool sim_fence_scenario(sim_config *c, const char *name, uint64_t seed)
{
    static const char prefix[] = "fence";
    size_t plen = sizeof(prefix) - 1;
    if (strncmp(name, prefix, plen) != 0)
        return false;
    const char *rest = name + plen; /* "", "-auto", "-amnesia", "-amnesia-q1-auto", ... */
    char base[48];
    bool q1 = false;
    if (strncmp(rest, "-amnesia", 8) == 0) {
        q1 = strncmp(rest + 8, "-q1", 3) == 0;
        snprintf(base, sizeof(base), "amnesia%s", rest + 8 + (q1 ? 3 : 0));
    } else if (strncmp(rest, "-clock", 6) == 0) {
        snprintf(base, sizeof(base), "slow-clock%s", rest + 6);
    } else {
        snprintf(base, sizeof(base), "safe%s", rest);
    }
    if (!sim_config_scenario(c, base, seed))
        return false;
    c->fencing = true;
    if (strncmp(base, "amnesia", 7) == 0) {
        /* Five nodes: with three, quorum + 1 is every node, and a node that is down stops every
         * grant. Restarts about a ttl apart and brief: one node forgets at a time. */
        c->n_nodes = 5;
        c->fence_commit = q1 ? c->n_nodes / 2 + 2 : 0;
    }
    return true;
}
