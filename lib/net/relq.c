/* SPDX-License-Identifier: MIT */
/* relq.c - the bounded queue of releases a node keeps until it reconnects (relq.h). */
#include "relq.h"

#include <string.h>

redlock__relq_entry *redlock__relq_pop(redlock__relq *q)
{
    redlock__relq_entry *e = q->head;
    if (e == NULL)
        return NULL;
    q->head = e->next;
    if (q->head == NULL)
        q->tail = NULL;
    e->next = NULL;
    q->len--;
    return e;
}

void redlock__relq_entry_free(const redlock__alloc *alloc, redlock__relq_entry *e)
{
    redlock__free(alloc, e->more);
    redlock__free(alloc, e);
}

int redlock__relq_put(redlock__relq *q, const redlock__alloc *alloc, redlock__relq_entry *e)
{
    int dropped = 0;
    if (q->len >= REDLOCK__RELQ_MAX) {
        redlock__relq_entry_free(alloc, redlock__relq_pop(q));
        dropped = 1;
    }
    e->next = NULL;
    if (q->tail != NULL)
        q->tail->next = e;
    else
        q->head = e;
    q->tail = e;
    q->len++;
    return dropped;
}

int redlock__relq_keep(redlock__relq *q, const redlock__alloc *alloc, const redlock__cmd *cmd,
                       uint64_t expires_us, void *owner)
{
    /* A waiter's last release (it leaves the queues) keeps its id too: the node would otherwise
     * keep the waiter at its queue's head, in everybody's way, until its place deadline. */
    size_t waiter_len = cmd->place != NULL && cmd->leave ? cmd->place->waiter_len : 0;
    redlock__relq_entry *e =
        redlock__calloc(alloc, 1, sizeof(*e) + cmd->key_len + cmd->token_len + waiter_len);
    if (e == NULL)
        return REDLOCK_ENOMEM;
    e->owner = owner;
    e->expires_us = expires_us;
    e->cmd.kind = REDLOCK__CMD_RELEASE;
    e->cmd.key = e->bytes;
    e->cmd.key_len = cmd->key_len;
    e->cmd.key_hash = cmd->key_hash;
    e->cmd.token = e->bytes + cmd->key_len;
    e->cmd.token_len = cmd->token_len;
    e->cmd.ttl_ms = cmd->ttl_ms;
    memcpy(e->bytes, cmd->key, cmd->key_len);
    memcpy(e->bytes + cmd->key_len, cmd->token, cmd->token_len);
    if (waiter_len > 0) { /* sent late, it wakes nobody (tell stays false) */
        e->place.waiter = e->bytes + cmd->key_len + cmd->token_len;
        e->place.waiter_len = waiter_len;
        memcpy(e->bytes + cmd->key_len + cmd->token_len, cmd->place->waiter, waiter_len);
        e->cmd.place = &e->place;
        e->cmd.leave = true;
    }
    if (cmd->n_more > 0) { /* a set's release: its other keys, spans then bytes */
        size_t size = cmd->n_more * sizeof(redlock__span);
        for (unsigned i = 0; i < cmd->n_more; i++)
            size += cmd->more[i].len;
        e->more = redlock__malloc(alloc, size);
        if (e->more == NULL) {
            redlock__free(alloc, e);
            return REDLOCK_ENOMEM;
        }
        char *bytes = (char *)(e->more + cmd->n_more);
        for (unsigned i = 0; i < cmd->n_more; i++) {
            memcpy(bytes, cmd->more[i].ptr, cmd->more[i].len);
            e->more[i].ptr = bytes;
            e->more[i].len = cmd->more[i].len;
            bytes += cmd->more[i].len;
        }
        e->cmd.more = e->more;
        e->cmd.n_more = cmd->n_more;
    }
    e->req.cmd = &e->cmd;
    return redlock__relq_put(q, alloc, e);
}

void redlock__relq_clear(redlock__relq *q, const redlock__alloc *alloc)
{
    redlock__relq_entry *e;
    while ((e = redlock__relq_pop(q)) != NULL)
        redlock__relq_entry_free(alloc, e);
}
