/* SPDX-License-Identifier: MIT */
/* close.c - the tool's end: the exit status of an operation's status, the client's close (fast:
 * the tool releases what it means to release itself), and what runs once it is closed - run's
 * release again from a fresh client when a node was down for the first, then every handle of
 * the tool closed, so that the loop ends. Every command ends here; this file calls none of
 * them. */
#include "tool.h"

#include <stdlib.h>
#include <string.h>

/* ---- the exit status and the handles -------------------------------------------------------- */

int tool_exit_for(int status)
{
    switch (status) {
    case 0:
        return 0;
    case REDLOCK_EBUSY:
        return EXIT_BUSY;
    case REDLOCK_ENOQUORUM:
    case REDLOCK_EEXPIRED:
        return EXIT_UNAVAILABLE;
    case REDLOCK_ELOST:
        return EXIT_LOST;
    case REDLOCK_EINVAL:
    case REDLOCK_EURL:
    case REDLOCK_EDUPNODE:
        return EXIT_USAGE;
    default:
        return EXIT_OSERR;
    }
}

void tool_finish(tool *t)
{
    t->phase = PHASE_DONE;
    for (unsigned i = 0; i < t->n_signals; i++)
        uv_close((uv_handle_t *)&t->signals[i], NULL);
    t->n_signals = 0;
    progress_stop(t);
    if (t->progress.timer_init) {
        uv_close((uv_handle_t *)&t->progress.timer, NULL);
        t->progress.timer_init = false;
    }
    if (t->grace_timer_init) { /* run's */
        uv_close((uv_handle_t *)&t->grace_timer, NULL);
        t->grace_timer_init = false;
    }
}

/* ---- run's release again, for the nodes that were down ------------------------------------ */

/* Run's release found a node down (run.c): that client kept the release for the node, but its
 * close drops it. A fresh client releases again; each connection writes the release with its
 * handshake, so a stopped node takes it when it continues (at most one node timeout more). */
static void on_cleanup_released(redlock_lock *lock, int status, const redlock_result *result,
                                void *data)
{
    tool *t = data;
    tool_say(t, "released again for the nodes that were down (deleted on %u more)",
             status == 0 || status == REDLOCK_ELOST ? result->votes_yes : 0);
    redlock_lock_free(lock);
    tool_close_client(t);
}

static void start_cleanup(tool *t)
{
    t->phase = PHASE_CLEANUP;
    char err[512];
    int rc = redlock_client_new(&t->loop, (const char *const *)t->args.nodes, t->args.n_nodes,
                                &t->opts, &t->client, err, sizeof(err));
    if (rc != 0) {
        tool_finish(t);
        return;
    }
    redlock_lock *lock;
    rc = redlock_lock_attach(t->client, t->args.key, t->args.key_len, t->token, strlen(t->token),
                             t->args.ttl_ms, &lock);
    if (rc == 0) {
        rc = redlock_release(lock, on_cleanup_released, t);
        if (rc != 0)
            redlock_lock_free(lock);
    }
    if (rc != 0)
        tool_close_client(t);
}

static void on_client_closed(redlock_client *client, void *data)
{
    (void)client;
    tool *t = data;
    t->client = NULL;
    t->client_closing = false;
    if (t->cleanup_needed) {
        t->cleanup_needed = false;
        start_cleanup(t);
        return;
    }
    tool_finish(t);
}

void tool_close_client(tool *t)
{
    if (t->client == NULL || t->client_closing)
        return;
    t->client_closing = true;
    /* Fast: the tool releases what it means to release itself; "acquire" hands its lock on to
     * a later "release" or "extend" and must leave it held. */
    redlock_client_close_ex(t->client, REDLOCK_CLOSE_FAST, on_client_closed, t);
}
