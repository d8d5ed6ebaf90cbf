/* SPDX-License-Identifier: MIT */
/* history.c - the checkers over the holds and the store writes the user reports
 * (<redlock/sim.h>, "checking your holds"): mutual exclusion through sim_check.h's checker (a
 * hold being [handed out, last used)), no hold used after a quorum forgot it (sim_first_gap over
 * the nodes' record, record.c), and fences that never go backwards at the store. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet.h"

typedef struct kit_fence {
    size_t resource;
    uint64_t highest;
} kit_fence;

/* The index of resource in the fleet's list (added if new), or SIZE_MAX without memory. */
static size_t resource_index(redlock_sim *sim, const char *resource, size_t len)
{
    for (size_t i = 0; i < sim->n_resources; i++)
        if (sim->resource_lens[i] == len && memcmp(sim->resources[i], resource, len) == 0)
            return i;
    if (sim->n_resources == sim->cap_resources) {
        size_t cap = sim->cap_resources > 0 ? sim->cap_resources * 2 : 8;
        char **names = realloc(sim->resources, cap * sizeof(*names));
        if (names == NULL)
            return SIZE_MAX;
        sim->resources = names;
        size_t *lens = realloc(sim->resource_lens, cap * sizeof(*lens));
        if (lens == NULL)
            return SIZE_MAX;
        sim->resource_lens = lens;
        sim->cap_resources = cap;
    }
    char *copy = malloc(len > 0 ? len : 1);
    if (copy == NULL)
        return SIZE_MAX;
    if (len > 0)
        memcpy(copy, resource, len);
    sim->resources[sim->n_resources] = copy;
    sim->resource_lens[sim->n_resources] = len;
    return sim->n_resources++;
}

int redlock_sim_hold_begin(redlock_sim *sim, unsigned client, const redlock_lock *lock)
{
    size_t len;
    const char *resource = redlock_lock_resource(lock, &len);
    size_t r = resource_index(sim, resource, len);
    if (r == SIZE_MAX || sim->n_holds > (size_t)INT32_MAX) {
        sim->oom = true;
        return -1;
    }
    if (sim->n_holds == sim->cap_holds) {
        size_t cap = sim->cap_holds > 0 ? sim->cap_holds * 2 : 64;
        kit_hold *h = realloc(sim->holds, cap * sizeof(*h));
        if (h == NULL) {
            sim->oom = true;
            return -1;
        }
        sim->holds = h;
        sim->cap_holds = cap;
    }
    kit_hold *h = &sim->holds[sim->n_holds];
    memset(h, 0, sizeof(*h));
    h->h = (sim_hold){.proc = client,
                      .resource = (unsigned)r,
                      .start = sim->now,
                      .stop = sim->now,      /* empty until used */
                      .deadline = SIM_NEVER, /* the hold is what the user reports */
                      .lost_at = SIM_NEVER};
    size_t token_len;
    const char *token = redlock_lock_token(lock, &token_len);
    h->key_len = REDLOCK__MIN(len, sizeof(h->key));
    memcpy(h->key, resource, h->key_len);
    h->token_len = REDLOCK__MIN(token_len, sizeof(h->token));
    memcpy(h->token, token, h->token_len);
    kit_trace(sim, "c%u holds %.*s (hold %zu)", client, (int)REDLOCK__MIN(len, 60), resource,
              sim->n_holds);
    return (int)sim->n_holds++;
}

void redlock_sim_hold_use(redlock_sim *sim, int hold)
{
    if (hold < 0 || (size_t)hold >= sim->n_holds)
        return;
    sim_hold *h = &sim->holds[hold].h;
    h->stop = sim->now;
    kit_trace(sim, "c%u uses hold %d", h->proc, hold);
}

void redlock_sim_store_accepted(redlock_sim *sim, const char *resource, size_t len, uint64_t fence)
{
    size_t r = resource_index(sim, resource, len);
    if (r == SIZE_MAX) {
        sim->oom = true;
        return;
    }
    kit_trace(sim, "store accepts %.*s fence %llu", (int)REDLOCK__MIN(len, 60), resource,
              (unsigned long long)fence);
    kit_fence *f = NULL;
    for (size_t i = 0; i < sim->n_fences && f == NULL; i++)
        if (sim->fences[i].resource == r)
            f = &sim->fences[i];
    if (f == NULL) {
        if (sim->n_fences == sim->cap_fences) {
            size_t cap = sim->cap_fences > 0 ? sim->cap_fences * 2 : 8;
            kit_fence *p = realloc(sim->fences, cap * sizeof(*p));
            if (p == NULL) {
                sim->oom = true;
                return;
            }
            sim->fences = p;
            sim->cap_fences = cap;
        }
        f = &sim->fences[sim->n_fences++];
        *f = (kit_fence){r, fence};
        return;
    }
    if (fence < f->highest && sim->store_what[0] == '\0')
        snprintf(sim->store_what, sizeof(sim->store_what),
                 "the store accepted a write to %.*s with fence %llu after one with fence %llu, "
                 "at %llu us",
                 (int)REDLOCK__MIN(len, 60), resource, (unsigned long long)fence,
                 (unsigned long long)f->highest, (unsigned long long)sim->now);
    if (fence > f->highest)
        f->highest = fence;
}

/* Whether hold was used (up to its last use) from a moment at which a quorum of the nodes was
 * up without its token: the lock was lost then, another client could have taken it. Describes it
 * in text. */
static int used_when_lost(redlock_sim *sim, const kit_hold *hold, char *text, size_t cap)
{
    if (hold->h.stop <= hold->h.start)
        return 0; /* never used */
    sim_record record = sim_nodelog_record(&sim->log, sim->opts.n_nodes);
    uint64_t at = 0;
    int gap = sim_first_gap(&record, hold->key, hold->key_len, hold->token, hold->token_len,
                            hold->h.start, hold->h.stop, &at);
    if (gap < 0) {
        snprintf(text, cap, "out of memory: the holds are not checked");
        return 1;
    }
    if (gap == 0)
        return 0;
    snprintf(text, cap,
             "a lost lock used: client %u used its hold of %.*s until %llu us, but from %llu us a "
             "quorum of the nodes was up without its token (another client could take it)",
             hold->h.proc, (int)REDLOCK__MIN(hold->key_len, 60), hold->key,
             (unsigned long long)hold->h.stop, (unsigned long long)at);
    return 1;
}

int redlock_sim_verdict(redlock_sim *sim, char *what, size_t what_len)
{
    char text[768] = "";
    int bad = 0;
    if (sim->oom) {
        snprintf(text, sizeof(text), "out of memory: the run is not complete");
        bad = 1;
    }
    sim_hold *copy = sim->n_holds > 0 ? malloc(sim->n_holds * sizeof(*copy)) : NULL;
    if (!bad && sim->n_holds > 0 && copy == NULL) {
        snprintf(text, sizeof(text), "out of memory: the holds are not checked");
        bad = 1;
    }
    if (!bad && copy != NULL) {
        for (size_t i = 0; i < sim->n_holds; i++)
            copy[i] = sim->holds[i].h;
        sim_exclusion ex;
        if (sim_check_exclusion(copy, sim->n_holds, 0, &ex) > 0) {
            bad = 1;
            int n = snprintf(text, sizeof(text), "two holders at once: %s", ex.what);
            for (size_t i = 0; i < sim->n_resources && n > 0 && (size_t)n < sizeof(text); i++)
                n += snprintf(text + n, sizeof(text) - (size_t)n, "%s res-%zu is %.*s",
                              i == 0 ? " (" : ",", i, (int)REDLOCK__MIN(sim->resource_lens[i], 40),
                              sim->resources[i]);
            if (n > 0 && (size_t)n < sizeof(text) - 1)
                snprintf(text + n, sizeof(text) - (size_t)n, ")");
        }
    }
    free(copy);
    for (size_t i = 0; !bad && i < sim->n_holds; i++)
        bad = used_when_lost(sim, &sim->holds[i], text, sizeof(text));
    if (!bad && sim->store_what[0] != '\0') {
        snprintf(text, sizeof(text), "a fence went backwards: %s", sim->store_what);
        bad = 1;
    }
    if (what != NULL && what_len > 0)
        snprintf(what, what_len, "%s", text);
    return bad;
}

void kit_history_free(redlock_sim *sim)
{
    for (size_t i = 0; i < sim->n_resources; i++)
        free(sim->resources[i]);
    free(sim->resources);
    free(sim->resource_lens);
    free(sim->holds);
    free(sim->fences);
}
