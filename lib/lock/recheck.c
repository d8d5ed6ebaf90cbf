/* SPDX-License-Identifier: MIT */
/* recheck.c - a node came back as a new server, or lost its keys: check every held lock at once.
 *
 * A server that restarted without persistence has lost its keys, and a majority of such restarts
 * hands the lock to anyone (assumption 2 of docs/safety.md). The node layer notices the new
 * run_id at the reconnection's handshake (node.c); from there, on the next loop turn, every lock
 * the caller holds is checked with one round instead of at its next planned extension:
 *
 *   - an auto-extended lock is extended at once, with its own flags (autoextend.c): a retake puts
 *     the key back where nobody took it, a plain extend finds it gone, and a lost round reports
 *     the loss through the lost callback as any extension does;
 *   - any other held lock (and one whose auto-extension reached its cap: no extension may be
 *     added) gets an inspect round, which changes nothing: when more than N - quorum nodes
 *     answer that they do not hold its token, fewer than a quorum can, and the lock is lost -
 *     redlock_lock_is_held says so from then on, a release says REDLOCK_ELOST, a retake is
 *     refused (the hold had a gap), and a capped auto-extended lock gets its lost callback.
 *
 * A node that answers "no" where a lock's last won round had its "yes" (its keys are gone
 * without a restart: a flush, a proxy in front of a restarted server, an eviction) sets off the
 * same checks. A check that began before a later change may have heard the older server: it is
 * run again.
 *
 * Before any check, the change itself decides continuity (docs/safety.md, "A hold is continuous
 * while a quorum kept it"): the changed node no longer keeps any lock's token (kept.c), and a held
 * lock left with fewer than a quorum of nodes that kept it had a gap (lock->gap) and is reported
 * lost on the next loop turn - keys a retake re-creates afterwards restore redundancy, never
 * continuity. */
#include "recheck.h"

#include "autoextend.h"
#include "lock.h"
#include "quorum.h"
#include "stats.h"

static void check_start(redlock_lock *lock);

/* A lock the caller was handed and holds, whose validity is known. */
static bool held(const redlock_lock *lock, uint64_t now)
{
    return lock->user_owned && !lock->released && !lock->lost && !lock->attached &&
           now < lock->deadline_us;
}

static void found_lost(redlock_lock *lock, unsigned free_nodes, unsigned n_nodes);

/* Report every held lock that had a gap lost. A report calls the caller back, who may release
 * or close anything: the list is walked again from its head after each. */
static void report_gaps(redlock_client *c)
{
    while (!c->closing) {
        uint64_t now = redlock__client_now(c);
        redlock_lock *gone = NULL;
        for (redlock__list *it = c->locks.next; it != &c->locks && gone == NULL; it = it->next) {
            redlock_lock *lock = REDLOCK__CONTAINER_OF(it, redlock_lock, closer.link);
            if (lock->gap && held(lock, now))
                gone = lock;
        }
        if (gone == NULL)
            return;
        redlock__lock_ref(gone);
        found_lost(gone, 0, c->n_nodes);
        redlock__lock_unref(gone);
    }
}

static void on_recheck_timer(redlock__timer *t)
{
    redlock_client *c = REDLOCK__CONTAINER_OF(t, redlock_client, recheck_timer);
    report_gaps(c);
    if (c->closing)
        return;
    uint64_t now = redlock__client_now(c);
    /* Starting a round calls nothing back from inside (ops.c defers), so the list holds still;
     * an inspect's own handle joins it, never handed out, so skipped. */
    for (redlock__list *it = c->locks.next; it != &c->locks; it = it->next) {
        redlock_lock *lock = REDLOCK__CONTAINER_OF(it, redlock_lock, closer.link);
        if (held(lock, now) && !redlock__auto_recheck(lock) && lock->check.started_us == 0)
            check_start(lock);
    }
}

/* Check every held lock on the next loop turn (on_recheck_timer). */
static void checks_due(redlock_client *c)
{
    c->node_changed_us = redlock__client_now(c);
    redlock__client_timer_start(c, &c->recheck_timer, c->node_changed_us, on_recheck_timer);
}

static void on_gap_timer(redlock__timer *t)
{
    report_gaps(REDLOCK__CONTAINER_OF(t, redlock_client, gap_timer));
}

/* Node node reached a new server (io.h's on_node_changed). */
static void on_node_changed(redlock__io *io, unsigned node)
{
    redlock_client *c = io->owner;
    if (c->closing)
        return;
    uint64_t now = redlock__client_now(c);
    if (node < REDLOCK_MAX_NODES) {
        c->node_changed_at_us[node] = now;
        /* It may have lost every key at any moment since its old server was last heard. */
        for (redlock__list *it = c->locks.next; it != &c->locks; it = it->next)
            (void)redlock__kept_lose(REDLOCK__CONTAINER_OF(it, redlock_lock, closer.link), node,
                                     now);
    }
    checks_due(c);
}

/* A round's answer showed node no longer keeps lock's token (the client's on_kept_lost). */
static void on_kept_lost(redlock_lock *lock, unsigned node, bool said_no, bool gap)
{
    redlock_client *c = lock->client;
    if (c->closing)
        return;
    if (said_no) {
        redlock__client_log(c, REDLOCK_LOG_WARN, c->urls[node].redacted,
                            "a key it held is gone (restarted, flushed, evicted?): held locks "
                            "are checked now");
        checks_due(c);
    } else if (gap) {
        redlock__client_timer_start(c, &c->gap_timer, redlock__client_now(c), on_gap_timer);
    }
}

void redlock__recheck_start(redlock_client *c)
{
    c->io->on_node_changed = on_node_changed;
    c->on_kept_lost = on_kept_lost;
}

/* Nodes that answered that they do not hold the lock's token (no key, another holder's). */
static unsigned count_free(const redlock_lock *lock, const redlock_result *result)
{
    unsigned n = 0;
    for (unsigned i = 0; i < result->n_nodes; i++) {
        const redlock_node_result *r = &result->nodes[i];
        if (r->vote == REDLOCK_VOTE_NO)
            n++;
        else if (r->vote == REDLOCK_VOTE_YES &&
                 (r->value_len != lock->token_len ||
                  memcmp(r->value, lock->token, lock->token_len) != 0))
            n++;
    }
    return n;
}

static void found_lost(redlock_lock *lock, unsigned free_nodes, unsigned n_nodes)
{
    redlock_client *c = lock->client;
    lock->lapsed = true;                        /* the hold had a gap: a retake would hide it */
    if (redlock__auto_is_active(lock->autox)) { /* at its cap: the lost callback says it */
        redlock__auto_lost(lock, REDLOCK_ELOST);
        return;
    }
    lock->lost = true;
    if (lock->gap)
        redlock__client_log(c, REDLOCK_LOG_WARN, NULL,
                            "a lock was lost: fewer than a quorum of %u nodes kept its token since "
                            "its last won round (nodes came back as new servers or lost its key)",
                            n_nodes);
    else
        redlock__client_log(c, REDLOCK_LOG_WARN, NULL,
                            "a lock was lost: %u of %u nodes no longer hold its token (checked "
                            "after a node lost its keys)",
                            free_nodes, n_nodes);
    if (c->on_checked_lost != NULL)
        c->on_checked_lost(lock);
}

static void on_checked(redlock_lock *unused, int status, const redlock_result *result, void *data)
{
    (void)unused;
    redlock_lock *lock = data;
    redlock_client *c = lock->client;
    uint64_t started = lock->check.started_us;
    lock->check.started_us = 0;
    bool stale = lock->won_start_us >= started; /* a round won since says more */
    if (status != REDLOCK_ECANCELED && !c->closing && !stale &&
        held(lock, redlock__client_now(c))) {
        unsigned free_nodes = count_free(lock, result);
        if (redlock__quorum_gone(free_nodes, result->n_nodes))
            found_lost(lock, free_nodes, result->n_nodes);
        else if (started < c->node_changed_us)
            check_start(lock); /* another node changed meanwhile: ask again */
    }
    redlock__lock_unref(lock);
}

static void check_start(redlock_lock *lock)
{
    redlock_client *c = lock->client;
    unsigned count = lock->n_more + 1;
    const void *stack_res[8];
    size_t stack_lens[8];
    const void **resources = stack_res;
    size_t *lens = stack_lens;
    if (count > 8) { /* a set: its keys are copied by the inspect anyway */
        resources = redlock__malloc(&c->alloc, count * sizeof(*resources));
        lens = redlock__malloc(&c->alloc, count * sizeof(*lens));
    }
    int rc = REDLOCK_ENOMEM;
    if (resources != NULL && lens != NULL) {
        for (unsigned i = 0; i < count; i++)
            resources[i] = redlock_lock_resource_at(lock, i, &lens[i]);
        lock->check.started_us = redlock__client_now(c);
        redlock__lock_ref(lock);
        rc = redlock_inspect_multi(c, resources, lens, count, on_checked, lock);
    }
    if (resources != stack_res) {
        redlock__free(&c->alloc, resources);
        redlock__free(&c->alloc, lens);
    }
    if (rc != 0 && lock->check.started_us != 0) {
        /* Out of memory: the lock stays as it was; its next round (an extend, the release)
         * still tells. */
        lock->check.started_us = 0;
        redlock__lock_unref(lock);
    }
}
