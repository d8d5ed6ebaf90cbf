/* SPDX-License-Identifier: MIT */
/* sim_check.c - see sim_check.h. Pure: histories in, verdicts out. */
#include "sim_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- mutual exclusion -------------------------------------------------------------------------
 */

uint64_t sim_hold_end(const sim_hold *hold)
{
    return hold->stop < hold->deadline ? hold->stop : hold->deadline;
}

static int hold_cmp(const void *a, const void *b)
{
    const sim_hold *x = a, *y = b;
    if (x->resource != y->resource)
        return x->resource < y->resource ? -1 : 1;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->proc < y->proc ? -1 : x->proc > y->proc;
}

static const char *auto_note(const sim_hold *hold)
{
    return hold->auto_extended ? " (auto-extended)" : "";
}

/* A record that cannot be: the holder stopped before it began, or went on using the lock after
 * its lost callback (the holder's model stops there at once). */
static bool bad_record(const sim_hold *h, sim_exclusion *out)
{
    const char *why = NULL;
    if (h->stop < h->start)
        why = "stopped before it began";
    else if (h->lost_at != SIM_NEVER && sim_hold_end(h) > h->lost_at)
        why = "was used after its lost callback";
    if (why == NULL)
        return false;
    if (out->overlaps + out->bad_records == 0)
        snprintf(out->what, sizeof(out->what),
                 "process %u's hold of res-%u%s over [%llu, %llu) us (deadline %llu, lost "
                 "callback %lld) %s",
                 h->proc, h->resource, auto_note(h), (unsigned long long)h->start,
                 (unsigned long long)h->stop, (unsigned long long)h->deadline,
                 h->lost_at == SIM_NEVER ? -1LL : (long long)h->lost_at, why);
    out->bad_records++;
    return true;
}

unsigned sim_check_exclusion(sim_hold *holds, size_t n, uint64_t handover_us, sim_exclusion *out)
{
    memset(out, 0, sizeof(*out));
    qsort(holds, n, sizeof(holds[0]), hold_cmp);
    const sim_hold *last = NULL; /* the hold of the current resource that ends latest */
    for (size_t i = 0; i < n; i++) {
        const sim_hold *v = &holds[i];
        if (bad_record(v, out))
            continue;
        uint64_t end = sim_hold_end(v);
        if (end <= v->start)
            continue; /* never used */
        out->holds++;
        if (last != NULL && last->resource != v->resource)
            last = NULL;
        uint64_t last_end = last != NULL ? sim_hold_end(last) : 0;
        if (last != NULL && v->start < last_end) {
            if (out->overlaps + out->bad_records == 0)
                snprintf(out->what, sizeof(out->what),
                         "res-%u held by process %u%s over [%llu, %llu) us and by process %u%s "
                         "over [%llu, %llu) us (true time): %llu us of overlap",
                         v->resource, last->proc, auto_note(last), (unsigned long long)last->start,
                         (unsigned long long)last_end, v->proc, auto_note(v),
                         (unsigned long long)v->start, (unsigned long long)end,
                         (unsigned long long)((last_end < end ? last_end : end) - v->start));
            out->overlaps++;
        } else if (last != NULL && v->start - last_end < handover_us) {
            out->handovers++;
        }
        if (last == NULL || end > last_end)
            last = v;
    }
    return out->overlaps + out->bad_records;
}

/* ---- no hold reported without its gap ---------------------------------------------------------
 */

/* The nodes that could not have granted the key to anyone else at t: those that held the token
 * (the records in idx) and those that were down. */
static unsigned taken_at(const sim_record *rec, const size_t *idx, size_t n_idx, uint64_t t)
{
    bool taken[REDLOCK_MAX_NODES] = {false};
    for (size_t i = 0; i < n_idx; i++) {
        const sim_presence *r = &rec->presence[idx[i]];
        if (r->from <= t && t < r->until && r->node < REDLOCK_MAX_NODES)
            taken[r->node] = true;
    }
    for (size_t i = 0; i < rec->n_downtimes; i++) {
        const sim_downtime *d = &rec->downtimes[i];
        if (d->from <= t && t < d->until && d->node < REDLOCK_MAX_NODES)
            taken[d->node] = true;
    }
    unsigned count = 0;
    for (unsigned i = 0; i < rec->n_nodes && i < REDLOCK_MAX_NODES; i++)
        count += taken[i];
    return count;
}

/* What a scan of a hold's span found: the lowest count of taken nodes and its moment, and the
 * first moment at which at most `limit` nodes were taken (a quorum free), SIM_NEVER if none. */
typedef struct gap_scan {
    unsigned worst, limit;
    uint64_t worst_at, first_at;
} gap_scan;

/* Look at t if it is inside (from, to): the lowest count seen so far wins. */
static void probe(const sim_record *rec, const size_t *idx, size_t n_idx, uint64_t from,
                  uint64_t to, uint64_t t, gap_scan *g)
{
    if (t <= from || t >= to)
        return;
    unsigned count = taken_at(rec, idx, n_idx, t);
    if (count < g->worst) {
        g->worst = count;
        g->worst_at = t;
    }
    if (count <= g->limit && t < g->first_at)
        g->first_at = t;
}

/* Scan [from, to) for key's records with token; false when memory ran out. */
static bool scan_gap(const sim_record *rec, const char *key, size_t key_len, const char *token,
                     size_t token_len, uint64_t from, uint64_t to, gap_scan *g)
{
    size_t *idx = calloc(rec->n_presence + 1, sizeof(*idx));
    if (idx == NULL)
        return false;
    size_t n_idx = 0;
    for (size_t i = 0; i < rec->n_presence; i++) {
        const sim_presence *r = &rec->presence[i];
        if (r->key_len == key_len && memcmp(r->key, key, key_len) == 0 &&
            r->value_len == token_len && memcmp(r->value, token, token_len) == 0 &&
            r->until > from && r->from < to)
            idx[n_idx++] = i;
    }
    g->limit = rec->n_nodes - (rec->n_nodes / 2 + 1);
    g->worst = taken_at(rec, idx, n_idx, from);
    g->worst_at = from;
    g->first_at = g->worst <= g->limit ? from : SIM_NEVER;
    /* The count changes only where a record or a downtime starts or ends: look there. */
    for (size_t i = 0; i < n_idx; i++) {
        probe(rec, idx, n_idx, from, to, rec->presence[idx[i]].from, g);
        probe(rec, idx, n_idx, from, to, rec->presence[idx[i]].until, g);
    }
    for (size_t i = 0; i < rec->n_downtimes; i++) {
        probe(rec, idx, n_idx, from, to, rec->downtimes[i].from, g);
        probe(rec, idx, n_idx, from, to, rec->downtimes[i].until, g);
    }
    free(idx);
    return true;
}

int sim_first_gap(const sim_record *rec, const char *key, size_t key_len, const char *token,
                  size_t token_len, uint64_t from, uint64_t to, uint64_t *at)
{
    if (to <= from)
        return 0;
    gap_scan g;
    if (!scan_gap(rec, key, key_len, token, token_len, from, to, &g))
        return -1;
    if (g.first_at == SIM_NEVER)
        return 0;
    *at = g.first_at;
    return 1;
}

int sim_find_gap(const sim_record *rec, const char *key, size_t key_len, const char *token,
                 size_t token_len, uint64_t from, uint64_t to, uint64_t *at, unsigned *free_nodes)
{
    if (to <= from)
        return 0;
    gap_scan g;
    if (!scan_gap(rec, key, key_len, token, token_len, from, to, &g))
        return -1;
    unsigned worst = g.worst;
    uint64_t worst_at = g.worst_at;
    unsigned n = rec->n_nodes, quorum = n / 2 + 1;
    if (n - worst < quorum)
        return 0; /* fewer than a quorum of nodes were ever free for another holder */
    *at = worst_at;
    *free_nodes = n - worst;
    return 1;
}
