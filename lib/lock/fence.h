/* SPDX-License-Identifier: MIT */
/* fence.h - a lock's fencing (docs/operations.md, "Fences"): whether its acquire takes a fence,
 * the counter it takes it from, and the fence it was granted. A fenced acquire's round reads and
 * raises the counter on every node (acquire.c, waiter.c for a grant's), its commit round makes the
 * fence the lock's (won.c); a retake restores it (round.c), a fence domain names the counter
 * (lock.c). Nothing here is public. */
#ifndef REDLOCK_FENCE_H
#define REDLOCK_FENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "command.h"

typedef struct redlock__fencing {
    bool wanted;     /* acquire with a fence (redlock_lock_opts.fencing) */
    unsigned commit; /* commit acks a fenced acquire needs (0: the quorum) */
    uint64_t fence;  /* the fence the lock was granted with; 0: none */
    /* The counter's key: the lock key's bytes with REDLOCK__FENCE_SUFFIX after them (in the
     * lock's key buffer), or those of a fence domain (redlock__lock_set_fence_domain). */
    const char *key;
    size_t key_len;
} redlock__fencing;

/* The command of an acquire attempt: a fenced one reads and raises the counter; a plain one stays
 * a plain SET NX PX. */
static inline redlock__cmd_kind redlock__fencing_acquire_kind(const redlock__fencing *f)
{
    return f->wanted ? REDLOCK__CMD_ACQUIRE_FENCED : REDLOCK__CMD_ACQUIRE;
}

#endif
