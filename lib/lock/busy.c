/* SPDX-License-Identifier: MIT */
/* busy.c - why an acquire was refused (busy.h). */
#include "busy.h"

#include <string.h>

#include "command.h"

#define APP_DATA_FIX "keep locks apart from data with key_prefix (redlock --prefix)"

typedef struct busy_probe busy_probe;

typedef struct probe_req {
    redlock__req req;
    busy_probe *probe;
    unsigned node;
} probe_req;

struct busy_probe {
    redlock__op *o; /* NULL once o was delivered without it */
    redlock__alloc alloc;
    unsigned pending;
    redlock__cmd cmd;
    char *keys; /* the key, then its counter's key */
    probe_req reqs[];
};

/* Node i's refusal is explained by why: in its result's error, which a "no" leaves NULL. (Its
 * acquire was written before the read on the same connection, so its vote is in by now.) */
static void explain(redlock__op *o, unsigned i, const char *why)
{
    redlock__round *r = o->round;
    if (r->results[i].vote != REDLOCK_VOTE_NO)
        return;
    char *slot = r->errors + (size_t)i * REDLOCK_ERROR_TEXT_MAX;
    redlock__fmt(slot, REDLOCK_ERROR_TEXT_MAX, "holds application data, not a lock (%s): %s", why,
                 APP_DATA_FIX);
    r->results[i].error = slot;
}

static void on_probe(redlock__req *req, redlock_vote vote, const char *error,
                     const redlock__reply_data *data, uint64_t now)
{
    (void)now;
    probe_req *pr = REDLOCK__CONTAINER_OF(req, probe_req, req);
    busy_probe *p = pr->probe;
    redlock__op *o = p->o;
    if (o != NULL && o->round != NULL) {
        if (vote == REDLOCK_VOTE_YES && data != NULL && data->value != NULL && data->pttl_ms == -1)
            explain(o, pr->node, "a value without a ttl");
        else if (vote == REDLOCK_VOTE_ERROR && error != NULL && strstr(error, "WRONGTYPE") != NULL)
            explain(o, pr->node, "a key of another type");
    }
    if (--p->pending > 0)
        return;
    redlock__free(&p->alloc, p->keys);
    redlock__free(&p->alloc, p);
    if (o != NULL) {
        o->probe = NULL;
        redlock__op_complete(o, o->status);
    }
}

/* The nodes asked: those that said no, and those whose answer was not in when the round was
 * decided (it comes before the read's). */
static bool asked(const redlock__round *r, unsigned i)
{
    return r->results[i].vote == REDLOCK_VOTE_NO || r->results[i].vote == REDLOCK_VOTE_NONE;
}

bool redlock__busy_probe(redlock__op *o)
{
    redlock_client *c = o->client;
    redlock__round *r = o->round;
    if (o->probed || r == NULL || r->cmd.n_more > 0 || r->results == NULL)
        return false;
    o->probed = true;
    unsigned n = 0;
    for (unsigned i = 0; i < c->n_nodes; i++)
        n += asked(r, i);
    if (n == 0)
        return false;
    busy_probe *p = redlock__calloc(&c->alloc, 1, sizeof(*p) + n * sizeof(p->reqs[0]));
    size_t klen = r->cmd.key_len;
    char *keys =
        p != NULL ? redlock__malloc(&c->alloc, 2 * klen + REDLOCK__FENCE_SUFFIX_LEN) : NULL;
    if (keys == NULL) {
        redlock__free(&c->alloc, p);
        return false;
    }
    memcpy(keys, r->cmd.key, klen);
    memcpy(keys + klen, r->cmd.key, klen);
    memcpy(keys + 2 * klen, REDLOCK__FENCE_SUFFIX, REDLOCK__FENCE_SUFFIX_LEN);
    p->o = o;
    p->alloc = c->alloc;
    p->keys = keys;
    p->cmd = (redlock__cmd){.kind = REDLOCK__CMD_INSPECT,
                            .key = keys,
                            .key_len = klen,
                            .key_hash = r->cmd.key_hash,
                            .fence_key = keys + klen,
                            .fence_key_len = klen + REDLOCK__FENCE_SUFFIX_LEN};
    p->pending = n + 1; /* one for the sending below: a read may complete inside its send */
    o->probe = p;
    uint64_t now = redlock__client_now(c);
    unsigned k = 0;
    for (unsigned i = 0; i < c->n_nodes; i++) {
        if (!asked(r, i))
            continue;
        probe_req *pr = &p->reqs[k++];
        pr->probe = p;
        pr->node = i;
        pr->req = (redlock__req){.cmd = &p->cmd, .cb = on_probe, .sent_us = now};
        c->io->ops->send(c->io, i, &pr->req);
    }
    probe_req last = {.probe = p}; /* the sending's own count */
    on_probe(&last.req, REDLOCK_VOTE_NONE, NULL, NULL, now);
    return true;
}

void redlock__busy_detach(redlock__op *o)
{
    if (o->probe != NULL)
        o->probe->o = NULL;
    o->probe = NULL;
}
