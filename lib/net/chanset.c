/* SPDX-License-Identifier: MIT */
/* chanset.c - the set of wanted channels (chanset.h). */
#include "chanset.h"

#include <string.h>

static redlock__chan *chan_find(const redlock__chanset *set, const char *name, size_t len)
{
    for (unsigned i = 0; i < set->n; i++) {
        if (set->v[i].len == len && memcmp(set->v[i].name, name, len) == 0)
            return &set->v[i];
    }
    return NULL;
}

int redlock__chanset_ref(redlock__chanset *set, const redlock__alloc *alloc, const char *name,
                         size_t len)
{
    redlock__chan *c = chan_find(set, name, len);
    if (c != NULL) {
        c->refs++;
        return 0;
    }
    if (set->n == set->cap) {
        unsigned cap = set->cap != 0 ? 2 * set->cap : 8;
        redlock__chan *v = redlock__realloc(alloc, set->v, cap * sizeof(*v));
        if (v == NULL)
            return REDLOCK_ENOMEM;
        set->v = v;
        set->cap = cap;
    }
    char *copy = redlock__malloc(alloc, len + 1);
    if (copy == NULL)
        return REDLOCK_ENOMEM;
    memcpy(copy, name, len);
    copy[len] = '\0';
    set->v[set->n++] = (redlock__chan){copy, len, 1};
    return 1;
}

int redlock__chanset_unref(redlock__chanset *set, const redlock__alloc *alloc, const char *name,
                           size_t len)
{
    redlock__chan *c = chan_find(set, name, len);
    if (c == NULL || --c->refs > 0)
        return 0;
    redlock__free(alloc, c->name);
    *c = set->v[--set->n];
    return 1;
}

void redlock__chanset_free(redlock__chanset *set, const redlock__alloc *alloc)
{
    for (unsigned i = 0; i < set->n; i++)
        redlock__free(alloc, set->v[i].name);
    redlock__free(alloc, set->v);
    memset(set, 0, sizeof(*set));
}
