/* SPDX-License-Identifier: MIT */
/* using.h - redlock_using (using.c): a lock held for the caller's work, kept alive, released at
 * its done, with one completion that says how the hold ended. Above the operations and the
 * auto-extension, which it reaches through the public calls; the top of the library (api.c) tells
 * it of a close. Nothing here is public. */
#ifndef REDLOCK_USING_H
#define REDLOCK_USING_H

#include "lock.h"

/* The io closed (api.c): every hold whose work has not called done ends with
 * REDLOCK_HOLD_CANCELED, before the handles are freed. */
void redlock__using_cancel_all(redlock_client *c);

#endif
