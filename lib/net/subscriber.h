/* SPDX-License-Identifier: MIT */
/* subscriber.h - a node's subscriber connection: the "freed" notifications that wake waiters.
 *
 * A release that deletes a lock's key on a node also PUBLISHes on that node, on a channel named
 * like the key (lib/core/lua/release.lua). A client whose acquires wait (wait_ms) keeps one
 * subscriber connection per node, SUBSCRIBEd to the keys its waiters wait for, and hands each
 * message's channel and text to its owner, which retries the waiter the message names as the head
 * of the resource's queue, or else its longest-waiting waiter of that key, at once (ops.c).
 *
 * The connection is opened when the first channel is wanted and closed once none has been
 * wanted for REDLOCK__SUB_IDLE_MS. It uses the node's URL, TLS and connect timeout, and
 * reconnects with the same backoff (stream.h); it says AUTH when the URL has a password, and
 * SUBSCRIBE to every wanted channel on each new connection, after INFO server (the run_id that
 * tells which server the messages come from). Pub/sub ignores databases, so no SELECT. A
 * notification is a hint: it is never a vote, and one that is lost (a connection
 * down, an ACL without +subscribe or channel access, a key that expired instead of being
 * released) costs a waiter the fallback retry delay, nothing more.
 *
 * The file's one object is the subscriber, and its one prefix redlock__sub_. The set of channels
 * the subscribers follow is a second object with another owner (the io keeps one for all of a
 * client's subscribers), so it has its own file and prefix (chanset.h). */
#ifndef REDLOCK_SUBSCRIBER_H
#define REDLOCK_SUBSCRIBER_H

#include <stdbool.h>
#include <stddef.h>

#include <uv.h>

#include "chanset.h"
#include "common.h"
#include "node.h"

#define REDLOCK__SUB_IDLE_MS 10000

typedef struct redlock__sub redlock__sub;

/* A message arrived from the subscriber of node on channel (len bytes), saying message
 * (message_len bytes); both valid during the call. run_id: the server the subscriber reached
 * (INFO server), "" when it did not say. */
typedef void (*redlock__sub_msg_cb)(void *ctx, unsigned node, const char *run_id,
                                    const char *channel, size_t len, const char *message,
                                    size_t message_len);

/* A subscriber for the node cfg describes (copied; its url, name, tls and alloc must outlive
 * it), following set; its messages go to cb with node, the node's index. Memory only: nothing
 * connects until a channel is wanted. Returns 0 or REDLOCK_ENOMEM. */
int redlock__sub_new(uv_loop_t *loop, const redlock__node_config *cfg, unsigned node,
                     const redlock__chanset *set, redlock__sub_msg_cb cb, void *ctx,
                     redlock__sub **out);
/* Initialise its timer (call once, before anything else on it but close). */
void redlock__sub_start(redlock__sub *sub);
/* The channel joined the set (joined) or left it: tell the server when connected, connect when
 * something is wanted and nothing runs, plan the idle close when nothing is wanted. */
void redlock__sub_changed(redlock__sub *sub, const char *name, size_t len, bool joined);
/* Close every handle, then call cb and free the subscriber. */
void redlock__sub_close(redlock__sub *sub, void (*cb)(void *data), void *data);
/* Free a subscriber that was never started. */
void redlock__sub_free_unstarted(redlock__sub *sub);

#endif
