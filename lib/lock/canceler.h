/* SPDX-License-Identifier: MIT */
/* canceler.h - cancelers (canceler.c): made by the caller before a call, fired from any thread.
 * Nothing here is public. (They were first named "cancel tokens"; "token" is the lock's value
 * alone now.)
 *
 * A canceler is a flag, a reference count and the list of what carries it now: each registration
 * stands for one operation in flight on some client (op.c), and names how to wake that client's
 * loop (its io's signal, thread-safe). Firing sets the flag, then wakes every registered loop
 * under the canceler's mutex; each loop cancels its own operations that carry a fired canceler.
 * Registering checks the flag under the same mutex, so an operation is either refused (the canceler
 * fired first) or registered in time to be woken (it fired later): none is missed. A registration
 * is removed on the loop thread under the mutex, before the operation's memory goes, and every
 * registration of a client before its io (and its wake-up handle) closes; so a firing thread never
 * reaches an operation or a client that is gone. The canceler's memory lives until the caller's
 * reference and every registration's are given back. */
#ifndef REDLOCK_CANCELER_H
#define REDLOCK_CANCELER_H

#include "common.h"

typedef struct redlock__canceler_reg redlock__canceler_reg;

/* Called by the firing thread, under the canceler's mutex: it may only wake a loop. */
typedef void (*redlock__canceler_notify)(redlock__canceler_reg *reg);

struct redlock__canceler_reg {
    redlock__list link;         /* canceler->regs while registered */
    redlock_canceler *canceler; /* NULL: not registered */
    redlock__canceler_notify notify;
};

/* Register reg (not registered) with canceler: 0, or REDLOCK_ECANCELED when it has fired (reg is
 * left unregistered). The registration holds a reference to the canceler. */
int redlock__canceler_register(redlock_canceler *canceler, redlock__canceler_reg *reg,
                               redlock__canceler_notify notify);
/* Remove reg if registered (harmless otherwise) and give its reference back. */
void redlock__canceler_unregister(redlock__canceler_reg *reg);
/* Whether reg's canceler has fired (false when not registered). */
bool redlock__canceler_reg_fired(const redlock__canceler_reg *reg);

#endif
