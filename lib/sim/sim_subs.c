/* SPDX-License-Identifier: MIT */
/* sim_subs.c - the servers' subscriptions of the simulators' publish/subscribe (sim_subs.h). */
#include "sim_subs.h"

#include <stdlib.h>
#include <string.h>

bool sim_subs_same_channel(const sim_subscription *s, const char *ch, size_t len)
{
    return s->channel_len == len && memcmp(s->channel, ch, len) == 0;
}

int sim_subs_add(sim_subs *t, unsigned proc, unsigned node, const sim_sub *sub, const char *ch,
                 size_t len)
{
    for (size_t i = 0; i < t->n; i++) {
        const sim_subscription *s = &t->v[i];
        if (s->proc == proc && s->sub_node == node && s->epoch == sub->epoch &&
            sim_subs_same_channel(s, ch, len))
            return 0;
    }
    if (len > SIM_CHANNEL_MAX)
        return -2;
    if (t->n == t->cap) {
        size_t cap = t->cap != 0 ? t->cap * 2 : 32;
        sim_subscription *v = realloc(t->v, cap * sizeof(*v));
        if (v == NULL)
            return -1;
        t->v = v;
        t->cap = cap;
    }
    sim_subscription *s = &t->v[t->n++];
    *s = (sim_subscription){
        proc, node, sub->epoch, sub->server_node, sub->server_shard, sub->server_gen, len, {0}};
    memcpy(s->channel, ch, len);
    return 0;
}

void sim_subs_remove(sim_subs *t, unsigned proc, int node, const char *ch, size_t len)
{
    for (size_t i = 0; i < t->n;) {
        sim_subscription *s = &t->v[i];
        if (s->proc == proc && (node < 0 || s->sub_node == (unsigned)node) &&
            (ch == NULL || sim_subs_same_channel(s, ch, len)))
            *s = t->v[--t->n];
        else
            i++;
    }
}

long long sim_subs_numsub(const sim_subs *t, unsigned node, int shard, uint64_t gen, const char *ch,
                          size_t len)
{
    long long n = 0;
    for (size_t i = 0; i < t->n; i++) {
        const sim_subscription *s = &t->v[i];
        n += s->server_node == node && s->server_shard == shard && s->server_gen == gen &&
             sim_subs_same_channel(s, ch, len);
    }
    return n;
}

void sim_subs_server_gone(sim_subs *t, unsigned node, int shard)
{
    for (size_t i = 0; i < t->n;) {
        sim_subscription *s = &t->v[i];
        if (s->server_node == node && (shard < 0 || s->server_shard == shard))
            *s = t->v[--t->n];
        else
            i++;
    }
}

void sim_subs_free(sim_subs *t)
{
    free(t->v);
    *t = (sim_subs){0};
}
