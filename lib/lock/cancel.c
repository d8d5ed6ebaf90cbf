/* SPDX-License-Identifier: MIT */
/* cancel.c - cancel tokens (cancel.h; docs/api.md, "Cancel tokens"). */
#include "cancel.h"

#include <stdatomic.h>
#include <stdlib.h>

struct redlock_cancel_token {
    atomic_bool fired;
    atomic_uint refs; /* the caller's (until redlock_cancel_token_free) and each registration's */
    uv_mutex_t mutex;
    redlock__list regs; /* under mutex */
};

int redlock_cancel_token_new(redlock_cancel_token **token_out)
{
    if (token_out == NULL)
        return REDLOCK_EINVAL;
    *token_out = NULL;
    /* libc's allocator: a token belongs to no client, so to no client's realloc_fn. */
    redlock_cancel_token *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return REDLOCK_ENOMEM;
    if (uv_mutex_init(&t->mutex) != 0) {
        free(t);
        return REDLOCK_ENOMEM;
    }
    atomic_init(&t->fired, false);
    atomic_init(&t->refs, 1);
    redlock__list_init(&t->regs);
    *token_out = t;
    return 0;
}

static void token_unref(redlock_cancel_token *t)
{
    if (atomic_fetch_sub(&t->refs, 1) == 1) {
        uv_mutex_destroy(&t->mutex);
        free(t);
    }
}

void redlock_cancel_token_free(redlock_cancel_token *token)
{
    if (token != NULL)
        token_unref(token);
}

void redlock_cancel_token_fire(redlock_cancel_token *token)
{
    if (token == NULL)
        return;
    atomic_store(&token->fired, true);
    /* Every operation registered now is woken; one that registers later sees the flag. */
    uv_mutex_lock(&token->mutex);
    for (redlock__list *it = token->regs.next; it != &token->regs; it = it->next) {
        redlock__cancel_reg *reg = REDLOCK__CONTAINER_OF(it, redlock__cancel_reg, link);
        reg->notify(reg);
    }
    uv_mutex_unlock(&token->mutex);
}

bool redlock_cancel_token_fired(const redlock_cancel_token *token)
{
    /* C11's atomic_load takes a non-const pointer; the load does not write. */
    return token != NULL && atomic_load(&((redlock_cancel_token *)token)->fired);
}

int redlock__cancel_register(redlock_cancel_token *token, redlock__cancel_reg *reg,
                             redlock__cancel_notify notify)
{
    reg->token = NULL;
    uv_mutex_lock(&token->mutex);
    if (atomic_load(&token->fired)) {
        uv_mutex_unlock(&token->mutex);
        return REDLOCK_ECANCELED;
    }
    atomic_fetch_add(&token->refs, 1);
    reg->token = token;
    reg->notify = notify;
    redlock__list_push(&token->regs, &reg->link);
    uv_mutex_unlock(&token->mutex);
    return 0;
}

void redlock__cancel_unregister(redlock__cancel_reg *reg)
{
    redlock_cancel_token *t = reg->token;
    if (t == NULL)
        return;
    uv_mutex_lock(&t->mutex);
    redlock__list_remove(&reg->link);
    uv_mutex_unlock(&t->mutex);
    reg->token = NULL;
    token_unref(t);
}

bool redlock__cancel_reg_fired(const redlock__cancel_reg *reg)
{
    return reg->token != NULL && redlock_cancel_token_fired(reg->token);
}
