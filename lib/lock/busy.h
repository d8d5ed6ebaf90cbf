/* SPDX-License-Identifier: MIT */
/* busy.h - why an acquire was refused, asked only once it was: a key that holds application data
 * (a value without a ttl, or another type, under the lock's name) looks busy forever to SET NX,
 * and the caller is told so with the fix (key_prefix), in the refusing nodes' results.
 *
 * An acquire about to be delivered REDLOCK_EBUSY first reads its key on each node that said no
 * (and on each that had not answered when the round was decided) with the inspect script (value,
 * PTTL; a key of another type fails it with WRONGTYPE); a lock's key always has a ttl, so a
 * PTTL of -1 or WRONGTYPE is application data. It costs one round trip on a refused acquire only
 * (nothing on a won one, nothing on a retried attempt), bounded by the node timeouts. The status
 * stays REDLOCK_EBUSY. Calls down only: the io. */
#ifndef REDLOCK_BUSY_H
#define REDLOCK_BUSY_H

#include <stdbool.h>

#include "op.h"

/* o (an acquire) is about to be delivered REDLOCK_EBUSY: start reading its key on the nodes
 * that said no. Returns true when it did: o is delivered (redlock__op_complete with o->status)
 * once every read is back, unless something else delivers it first (the acquire kind's detach
 * then calls redlock__busy_detach); false: nothing to ask (a set, no "no" vote, no memory),
 * deliver now. The acquire kind's hold_back calls it (op.h). */
bool redlock__busy_probe(redlock__op *o);

/* o is delivered: its probe, if any, no longer writes into it. */
void redlock__busy_detach(redlock__op *o);

#endif
