/* sim_fence.c - see sim_fence.h. */
#include <stdbool.h>
#include <string.h>

#include "sim_fence.h"

static sim_counter *find(const sim_counters *cs, const char *key, size_t len)
{
    for (unsigned i = 0; i < cs->n; i++) {
        const sim_counter *c = &cs->c[i];
        if (c->key_len == len && memcmp(c->key, key, len) == 0)
            return (sim_counter *)c;
    }
    return NULL;
}

uint64_t sim_counter_get(const sim_counters *cs, const char *key, size_t len)
{
    const sim_counter *c = find(cs, key, len);
    return c != NULL ? c->value : 0;
}

bool sim_counter_raise(sim_counters *cs, const char *key, size_t len, uint64_t value)
{
    sim_counter *c = find(cs, key, len);
    if (c == NULL) {
        if (cs->n == SIM_FENCE_COUNTERS || len > SIM_FENCE_KEY_MAX)
            return false;
        c = &cs->c[cs->n++];
        c->key_len = len;
        memcpy(c->key, key, len);
        c->value = 0;
    }
    if (value > c->value)
        c->value = value;
    return true;
}
