/* SPDX-License-Identifier: MIT */
/* canceler.c - cancelers (canceler.h; docs/api.md, "Cancelers"): redlock_canceler_, and
 * redlock__canceler_ for the operations that carry one; the four functions of its first name
 * (redlock_cancel_token_*) are aliases at the end. */
#include "canceler.h"

#include <stdatomic.h>
#include <stdlib.h>

/* Its tag keeps the first name: the ABI's record (include/redlock.h). */
struct redlock_cancel_token {
    atomic_bool fired;
    atomic_uint refs; /* the caller's (until redlock_canceler_free) and each registration's */
    uv_mutex_t mutex;
    redlock__list regs; /* under mutex */
};

int redlock_canceler_new(redlock_canceler **canceler_out)
{
    if (canceler_out == NULL)
        return REDLOCK_EINVAL;
    *canceler_out = NULL;
    /* libc's allocator: a canceler belongs to no client, so to no client's realloc_fn. */
    redlock_canceler *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return REDLOCK_ENOMEM;
    if (uv_mutex_init(&t->mutex) != 0) {
        free(t);
        return REDLOCK_ENOMEM;
    }
    atomic_init(&t->fired, false);
    atomic_init(&t->refs, 1);
    redlock__list_init(&t->regs);
    *canceler_out = t;
    return 0;
}

static void canceler_unref(redlock_canceler *t)
{
    if (atomic_fetch_sub(&t->refs, 1) == 1) {
        uv_mutex_destroy(&t->mutex);
        free(t);
    }
}

void redlock_canceler_free(redlock_canceler *canceler)
{
    if (canceler != NULL)
        canceler_unref(canceler);
}

void redlock_canceler_fire(redlock_canceler *canceler)
{
    if (canceler == NULL)
        return;
    atomic_store(&canceler->fired, true);
    /* Every operation registered now is woken; one that registers later sees the flag. */
    uv_mutex_lock(&canceler->mutex);
    for (redlock__list *it = canceler->regs.next; it != &canceler->regs; it = it->next) {
        redlock__canceler_reg *reg = REDLOCK__CONTAINER_OF(it, redlock__canceler_reg, link);
        reg->notify(reg);
    }
    uv_mutex_unlock(&canceler->mutex);
}

bool redlock_canceler_fired(const redlock_canceler *canceler)
{
    /* C11's atomic_load takes a non-const pointer; the load does not write. */
    return canceler != NULL && atomic_load(&((redlock_canceler *)canceler)->fired);
}

int redlock__canceler_register(redlock_canceler *canceler, redlock__canceler_reg *reg,
                               redlock__canceler_notify notify)
{
    reg->canceler = NULL;
    uv_mutex_lock(&canceler->mutex);
    if (atomic_load(&canceler->fired)) {
        uv_mutex_unlock(&canceler->mutex);
        return REDLOCK_ECANCELED;
    }
    atomic_fetch_add(&canceler->refs, 1);
    reg->canceler = canceler;
    reg->notify = notify;
    redlock__list_push(&canceler->regs, &reg->link);
    uv_mutex_unlock(&canceler->mutex);
    return 0;
}

void redlock__canceler_unregister(redlock__canceler_reg *reg)
{
    redlock_canceler *t = reg->canceler;
    if (t == NULL)
        return;
    uv_mutex_lock(&t->mutex);
    redlock__list_remove(&reg->link);
    uv_mutex_unlock(&t->mutex);
    reg->canceler = NULL;
    canceler_unref(t);
}

bool redlock__canceler_reg_fired(const redlock__canceler_reg *reg)
{
    return reg->canceler != NULL && redlock_canceler_fired(reg->canceler);
}

/* ---- the first names (include/redlock.h): aliases within the soversion --------------------------
 */

int redlock_cancel_token_new(redlock_cancel_token **token_out)
{
    return redlock_canceler_new(token_out);
}

void redlock_cancel_token_fire(redlock_cancel_token *token)
{
    redlock_canceler_fire(token);
}

bool redlock_cancel_token_fired(const redlock_cancel_token *token)
{
    return redlock_canceler_fired(token);
}

void redlock_cancel_token_free(redlock_cancel_token *token)
{
    redlock_canceler_free(token);
}
