/* SPDX-License-Identifier: MIT */
/* chanset.h - a set of channel names, each with the number of waiters that want it: what a
 * client's subscribers SUBSCRIBE to (subscriber.h). The io owns one set for all of a client's
 * subscribers (io_uv.c; the simulator keeps its own); each subscriber reads it on every new
 * connection, and is told when a name joins or leaves it. Memory only: no IO.
 *
 * Its own file and prefix (redlock__chanset_), apart from the subscriber's (redlock__sub_): it is
 * a second object with an owner of its own (the io, not a subscriber), and a file's exported
 * names share the one prefix of its object. */
#ifndef REDLOCK_CHANSET_H
#define REDLOCK_CHANSET_H

#include <stddef.h>

#include "common.h"

typedef struct redlock__chan {
    char *name;
    size_t len;
    unsigned refs;
} redlock__chan;

/* Zeroed is empty. */
typedef struct redlock__chanset {
    redlock__chan *v;
    unsigned n, cap;
} redlock__chanset;

/* One more waiter wants name. Returns 1 if the channel is new in the set, 0 if it was there,
 * or REDLOCK_ENOMEM (nothing changed). */
int redlock__chanset_ref(redlock__chanset *set, const redlock__alloc *alloc, const char *name,
                         size_t len);
/* One waiter less. Returns 1 if the channel left the set, 0 otherwise (also when absent). */
int redlock__chanset_unref(redlock__chanset *set, const redlock__alloc *alloc, const char *name,
                           size_t len);
/* Free every name and the array; the set is empty (zeroed) again. */
void redlock__chanset_free(redlock__chanset *set, const redlock__alloc *alloc);

#endif
