/* SPDX-License-Identifier: MIT */
/* cancel.h - cancel tokens (cancel.c): made by the caller before a call, fired from any thread.
 * Nothing here is public.
 *
 * A token is a flag, a reference count and the list of what carries it now: each registration
 * stands for one operation in flight on some client (op.c), and names how to wake that client's
 * loop (its io's signal, thread-safe). Firing sets the flag, then wakes every registered loop
 * under the token's mutex; each loop cancels its own operations that carry a fired token.
 * Registering checks the flag under the same mutex, so an operation is either refused (the token
 * fired first) or registered in time to be woken (it fired later): none is missed. A registration
 * is removed on the loop thread under the mutex, before the operation's memory goes, and every
 * registration of a client before its io (and its wake-up handle) closes; so a firing thread never
 * reaches an operation or a client that is gone. The token's memory lives until the caller's
 * reference and every registration's are given back. */
#ifndef REDLOCK_CANCEL_H
#define REDLOCK_CANCEL_H

#include "common.h"

typedef struct redlock__cancel_reg redlock__cancel_reg;

/* Called by the firing thread, under the token's mutex: it may only wake a loop. */
typedef void (*redlock__cancel_notify)(redlock__cancel_reg *reg);

struct redlock__cancel_reg {
    redlock__list link;          /* token->regs while registered */
    redlock_cancel_token *token; /* NULL: not registered */
    redlock__cancel_notify notify;
};

/* Register reg (not registered) with token: 0, or REDLOCK_ECANCELED when the token has fired
 * (reg is left unregistered). The registration holds a reference to the token. */
int redlock__cancel_register(redlock_cancel_token *token, redlock__cancel_reg *reg,
                             redlock__cancel_notify notify);
/* Remove reg if registered (harmless otherwise) and give its reference back. */
void redlock__cancel_unregister(redlock__cancel_reg *reg);
/* Whether reg's token has fired (false when not registered). */
bool redlock__cancel_reg_fired(const redlock__cancel_reg *reg);

#endif
