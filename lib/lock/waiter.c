/* SPDX-License-Identifier: MIT */
/* waiter.c - waiting for a lock (docs/operations.md, "Waiting for a lock"): the releases watched
 * through the io, the queue on every node (a waiter's place and channels), the wake-ups, and the
 * handoff by grant (docs/algorithm.md): the grants counted as the yes votes of the attempts they
 * answer. Called by acquire.c for an acquire that waits, and by the io's notifications, whose
 * callback (io.h's on_notify) a waiter sets when it starts to watch. Calls down only: rounds and
 * operations, the client core, lock handles, the counters, the quorum core. Its one object is
 * the waiter (an acquire's waiting state), and every name it exports is redlock__waiter_. */
#include "waiter.h"

#include <string.h>

#include "slot.h"
#include "stats.h"

/* A woken waiter retries at once (on the loop's next turn) the first time. Each of its attempts
 * that then loses in a split vote (some nodes said yes: other waiters tried at the same time)
 * doubles the window its next wake-up is drawn from, in whole milliseconds (the loop's timers
 * have no finer grain): 0 or 1 ms, then up to 0..3 ms, never beyond the retry delay. So
 * the waiters of many clients, all woken by one release, spread out instead of splitting the
 * votes again and again (the backoff of a shared medium). */
#define NOTIFY_MAX_DOUBLINGS 2

/* A waiter that heard a grant from fewer nodes than a quorum waits for the others' (they follow
 * within a round trip, as a rule) before it runs a round of its own: as long as its last attempt
 * took to be decided (a quorum's round trip, which a round of its own would cost too), between
 * these bounds. */
#define GRANT_GRACE_MIN_US 1000
#define GRANT_GRACE_MAX_US 250000

/* How long a node keeps a waiter's place in a resource's queue after each attempt: long enough
 * that a live waiter asks again before it runs out (its fallback retry delay at most, plus a
 * round at the slowest node's deadline), twice over, but at most PLACE_TTL_MAX_MS: a waiter that
 * vanished (a crashed process) stalls the queue for that long at worst. A waiter that asks less
 * often than that loses its place between attempts and gets it back (the same place) with the
 * next one: others may go first meanwhile, nothing worse. */
#define PLACE_TTL_MAX_MS 10000

static uint64_t place_ttl_ms(const redlock_client *c)
{
    uint64_t slowest = redlock__client_slowest_timeout_ms(c);
    uint64_t ttl = 2 * (c->opts.retry_delay_ms + c->opts.retry_jitter_ms + slowest) + 100;
    return REDLOCK__MIN(ttl, (uint64_t)PLACE_TTL_MAX_MS);
}

/* Stop watching the first n of the lock's keys. */
static void lock_unwatch(redlock_client *c, const redlock_lock *lock, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        size_t len;
        const char *key = redlock__lock_key(lock, i, &len);
        c->io->ops->watch(c->io, key, len, false);
    }
}

/* Watch every key of the lock (a set's waiter is woken by the release of any of them). Returns
 * 0, or REDLOCK_ENOMEM with nothing watched. */
static int lock_watch(redlock_client *c, const redlock_lock *lock)
{
    for (unsigned i = 0; i <= lock->n_more; i++) {
        size_t len;
        const char *key = redlock__lock_key(lock, i, &len);
        if (c->io->ops->watch(c->io, key, len, true) != 0) {
            lock_unwatch(c, lock, i);
            return REDLOCK_ENOMEM;
        }
    }
    return 0;
}

/* Make lock a waiter in its keys' queues: a random id, its place (now, on the wall clock: the
 * same number for every node, comparable between clients on machines whose clocks agree; one
 * place in every queue of a set), and its channels: its own (its first key's queue name, ":" and
 * its id), on which a release tells it alone that it is the next head or that a key was set for
 * it (a grant), and that queue's, where such a release names it when it did not listen on its
 * own yet. Without memory or randomness it waits outside the queues, as before. */
static void queue_join(redlock_client *c, redlock_lock *lock)
{
    unsigned char raw[REDLOCK__WAITER_BYTES];
    uv_timeval64_t tv = {0, 0};
    if (lock->place != NULL || c->io->ops->random(c->io, raw, sizeof(raw)) != 0 ||
        (c->io->ops->wall_us == NULL && uv_gettimeofday(&tv) != 0))
        return;
    size_t queue_len = lock->key_len + REDLOCK__QUEUE_SUFFIX_LEN;
    size_t own_len = queue_len + 1 + 2 * sizeof(raw);
    redlock__place *p = redlock__calloc(&c->alloc, 1, sizeof(*p) + queue_len + 1 + own_len + 1);
    if (p == NULL)
        return;
    char *queue = p->channels, *own = p->channels + queue_len + 1;
    memcpy(queue, lock->key, lock->key_len);
    memcpy(queue + lock->key_len, REDLOCK__QUEUE_SUFFIX, REDLOCK__QUEUE_SUFFIX_LEN + 1);
    redlock__hex(p->waiter, raw, sizeof(raw));
    memcpy(own, queue, queue_len);
    own[queue_len] = ':';
    memcpy(own + queue_len + 1, p->waiter, 2 * sizeof(raw) + 1);
    p->queue_len = queue_len;
    p->cmd.waiter = p->waiter;
    p->cmd.waiter_len = 2 * sizeof(raw);
    p->cmd.channel = own;
    p->cmd.channel_len = own_len;
    p->cmd.place_us = c->io->ops->wall_us != NULL
                          ? c->io->ops->wall_us(c->io)
                          : (uint64_t)tv.tv_sec * 1000000 + (uint64_t)tv.tv_usec;
    p->cmd.place_ttl_ms = place_ttl_ms(c);
    lock->place = p;
    p->queue_channel_watched = c->io->ops->watch(c->io, queue, queue_len, true) == 0;
    p->channel_watched = c->io->ops->watch(c->io, own, own_len, true) == 0;
}

/* Whether the queues of a waiter's keys lie in their keys' slot (always, without a cluster):
 * the queued scripts name them without declaring them (lib/core/lua/queue.lua). */
static bool queue_fits(const redlock_client *c, const redlock_lock *lock)
{
    for (unsigned i = 0; c->has_cluster && i <= lock->n_more; i++) {
        size_t len = 0, start = 0, tag_len = 0;
        const char *key = redlock__lock_key(lock, i, &len);
        if (!redlock__slot_hash_tag(key, len, &start, &tag_len))
            return false;
    }
    return true;
}

static void on_notify(redlock__io *io, unsigned node, const char *channel, size_t len,
                      const char *message, size_t message_len);

void redlock__waiter_start(redlock__op *o)
{
    redlock_client *c = o->client;
    redlock_lock *lock = o->lock;
    if (c->opts.no_notify || c->io->ops->watch == NULL)
        return;
    c->io->on_notify = on_notify; /* the releases it watches are told there */
    if (lock_watch(c, lock) != 0)
        return;
    o->w->watching = true;
    /* Fair turns, in every key's queue (plain, fenced and sets alike). */
    if (queue_fits(c, lock))
        queue_join(c, lock);
}

void redlock__waiter_end(redlock__op *o)
{
    redlock_client *c = o->client;
    redlock_lock *lock = o->lock;
    redlock__place *p = lock->place;
    /* A closing client's io drops every watch itself. */
    if (o->w->watching && !c->closing) {
        lock_unwatch(c, lock, lock->n_more + 1);
        if (p != NULL && p->channel_watched)
            c->io->ops->watch(c->io, p->cmd.channel, p->cmd.channel_len, false);
        if (p != NULL && p->queue_channel_watched)
            c->io->ops->watch(c->io, p->channels, p->queue_len, false);
    }
    if (p != NULL) {
        p->channel_watched = false;
        p->queue_channel_watched = false;
    }
}

redlock__waiter *redlock__waiter_new(redlock_client *c, const redlock_lock *lock)
{
    unsigned n_keys = lock->n_more + 1;
    size_t bits = n_keys > 1 ? (size_t)c->n_nodes * ((n_keys + 7) / 8) : 0;
    size_t nodes = (size_t)c->n_nodes * sizeof(waiter_node);
    redlock__waiter *w = redlock__calloc(&c->alloc, 1, sizeof(*w) + nodes + bits);
    if (w == NULL)
        return NULL;
    w->n_keys = n_keys;
    w->nodes = (waiter_node *)(void *)(w + 1);
    w->key_bits = bits != 0 ? (unsigned char *)w->nodes + nodes : NULL;
    return w;
}

void redlock__waiter_attempt_took(redlock__waiter *w, const redlock_round *q)
{
    if (redlock_round_decision(q) == REDLOCK_ROUND_PENDING)
        return;
    uint64_t start = redlock__round_start_us(q), decided = redlock__round_decided_us(q);
    uint64_t took = decided > start ? decided - start : 0;
    w->grace_us = took < GRANT_GRACE_MIN_US   ? GRANT_GRACE_MIN_US
                  : took > GRANT_GRACE_MAX_US ? GRANT_GRACE_MAX_US
                                              : took;
}

uint64_t redlock__waiter_jitter_us(redlock_client *c, const redlock__op *o)
{
    uint64_t window_ms = (uint64_t)1
                         << REDLOCK__MIN(o->w->collisions, (unsigned)NOTIFY_MAX_DOUBLINGS);
    if (c->opts.retry_delay_ms > 0 && window_ms > c->opts.retry_delay_ms)
        window_ms = c->opts.retry_delay_ms;
    if (window_ms <= 1)
        return 0;
    uint64_t r = 0;
    if (c->io->ops->random(c->io, &r, sizeof(r)) != 0)
        r = redlock__client_now(c);
    return (r % window_ms) * 1000;
}

void redlock__waiter_forget_grants(redlock__waiter *w, unsigned n_nodes)
{
    w->granted = 0;
    memset(w->nodes, 0, n_nodes * sizeof(w->nodes[0]));
    if (w->key_bits != NULL)
        memset(w->key_bits, 0, n_nodes * ((w->n_keys + 7) / 8));
}

static bool same_bytes(const char *a, size_t a_len, const char *b, size_t b_len)
{
    return a_len == b_len && memcmp(a, b, a_len) == 0;
}

/* The waiter of this client that is id (id_len bytes) in the queue of of's first key, or NULL. */
static redlock__op *queue_head_op(redlock_client *c, const redlock_lock *of, const char *id,
                                  size_t id_len)
{
    for (redlock__list *it = c->ops.next; it != &c->ops; it = it->next) {
        redlock__op *o = REDLOCK__CONTAINER_OF(it, redlock__op, closer.link);
        if (o->w != NULL && o->w->watching && o->state != OP_DECIDED && o->lock->place != NULL &&
            same_bytes(o->lock->place->cmd.waiter, o->lock->place->cmd.waiter_len, id, id_len) &&
            same_bytes(o->lock->key, o->lock->key_len, of->key, of->key_len))
            return o;
    }
    return NULL;
}

uint64_t redlock__waiter_wake_due(redlock_client *c, redlock__waiter *w, uint64_t due_us)
{
    if (due_us < w->wake_free_us)
        due_us = w->wake_free_us;
    w->wake_free_us = due_us + redlock__op_retry_delay_us(c);
    return due_us;
}

/* Wake o for a notification: after delay_us if it sleeps (the first notification sets its wake-up:
 * each node sends one), or, if its attempt is in flight, retry at once should that attempt
 * lose. A notification is a hint: it moves o's next attempt up at most once per retry period
 * (redlock__waiter_wake_due), and never later than it was due anyway. Grants are not budgeted:
 * each node's count once per token (op_granted), so they bring at most one attempt per node and
 * token, whatever is published. */
static void op_wake(redlock_client *c, redlock__op *o, uint64_t delay_us, bool budgeted)
{
    redlock__waiter *w = o->w;
    if (o->state == OP_RUNNING) {
        w->notified = true;
        w->claim = w->claim || !budgeted;
        return;
    }
    if (w->woken)
        return;
    uint64_t due = redlock__client_now(c) + delay_us;
    if (due > o->wait_deadline_us)
        due = o->wait_deadline_us;
    if (budgeted && due < w->wake_free_us && o->timer.active && o->timer.due_us <= w->wake_free_us)
        return; /* the attempt comes no later anyway: nothing to move up */
    if (budgeted)
        due = redlock__waiter_wake_due(c, w, due);
    w->woken = true;
    redlock__client_timer_start(c, &o->timer, due, redlock__op_on_retry_timer);
}

/* The grants the waiter o heard, from each node of w->granted, won: the lock is o's, as if an
 * attempt sent when the oldest of the attempts they answer was sent had won on those nodes (each
 * node set the keys after that attempt reached it, with the attempt's ttl): the validity counts
 * from that send, never from the grant. A fenced lock's grants carry the counters they read and
 * raised, as a fenced acquire's yes votes do, and its fence is committed as after such a round
 * (redlock__commit_start). Not when a grant set a key only until o's place deadline, nor when that
 * attempt is more than half a ttl old (the lock would have little validity left), nor when less
 * than the client's min_validity_ms is left: then o retries at once, and its round renews the
 * granted keys (lib/core/lua/acquire_queued.lua). Returns whether o is
 * decided (won, or its commit round started). */
static bool grant_win(redlock__op *o)
{
    redlock_client *c = o->client;
    redlock_lock *lock = o->lock;
    redlock__waiter *w = o->w;
    uint64_t now = redlock__client_now(c);
    uint64_t oldest = UINT64_MAX;
    bool partial = false;
    for (unsigned i = 0; i < c->n_nodes; i++) {
        if ((w->granted & (UINT64_C(1) << i)) == 0)
            continue;
        oldest = REDLOCK__MIN(oldest, w->nodes[i].oldest_us);
        partial = partial || w->nodes[i].partial;
    }
    bool fresh = !partial && now - oldest <= o->ttl_ms * 1000 / 2;
    redlock__cmd_kind kind = redlock__fencing_acquire_kind(&lock->fencing);
    redlock__round *r = fresh ? redlock__round_new(c, o, lock, kind, o->ttl_ms, false) : NULL;
    if (r != NULL) {
        int rc = redlock_round_init(&r->q, c->n_nodes, o->ttl_ms, c->opts.drift_factor,
                                    c->opts.min_validity_ms, oldest);
        if (rc == 0 && lock->fencing.wanted)
            rc = redlock_round_fencing(&r->q);
        for (unsigned i = 0; rc == 0 && i < c->n_nodes; i++) {
            if ((w->granted & (UINT64_C(1) << i)) == 0)
                continue;
            r->results[i].vote = REDLOCK_VOTE_YES;
            r->results[i].latency_us = now - w->nodes[i].oldest_us;
            r->results[i].fence = lock->fencing.wanted ? w->nodes[i].counter : 0;
            if (lock->fencing.wanted)
                redlock_round_vote_counter(&r->q, i, REDLOCK_VOTE_YES, w->nodes[i].counter, now);
            else
                redlock_round_vote(&r->q, i, REDLOCK_VOTE_YES, now);
        }
        r->state = ROUND_DONE; /* nothing to send: the nodes have acted */
        redlock__op_hold_round(o, r);
        int status = redlock_round_status(&r->q);
        if (status == 0 && lock->fencing.wanted) {
            /* The commit round runs now: o is an attempt in flight again. */
            redlock__client_timer_stop(c, &o->timer);
            o->state = OP_RUNNING;
            w->woken = false;
            status = redlock__commit_start(o, r, true);
        } else {
            redlock__stats_round(c, kind, status, &r->q, r->results);
            if (status == 0)
                status = redlock__lock_grant(o, r);
        }
        if (status == 0) {
            redlock__stats_granted(c);
            return true;
        }
    }
    redlock__waiter_forget_grants(w, c->n_nodes);
    w->woken = false;        /* a sleeping waiter now, not after the grace */
    op_wake(c, o, 0, false); /* one whose attempt just lost retries at once */
    return false;
}

bool redlock__waiter_grant_check(redlock__op *o)
{
    return redlock__mask_quorum(o->w->granted, o->client->n_nodes) && grant_win(o);
}

/* The next field of a grant message: a decimal number up to the next ':' (or, empty_ok, an
 * empty one: *out 0, *empty true). Advances *p past the ':'. */
static bool grant_field(const char **p, const char *end, uint64_t *out, bool *empty)
{
    uint64_t v = 0;
    const char *s = *p;
    while (s < end && *s >= '0' && *s <= '9' && v < UINT64_MAX / 10)
        v = v * 10 + (uint64_t)(*s++ - '0');
    if (s == end || *s != ':' || (s == *p && empty == NULL))
        return false;
    if (empty != NULL)
        *empty = s == *p;
    *out = v;
    *p = s + 1;
    return true;
}

/* "g:<stamp>:<tag>:<j>:<full>:<counter>:<token>", a grant (lib/core/lua/release_queued.lua): node
 * tag (the index of the node whose connection sent the attempt) set key j of o's lock to token for
 * the attempt sent at stamp, with that attempt's ttl if full is 1, else only until o's place
 * deadline there; a fenced lock's counter is what the node's counter was before the grant raised
 * it. A grant is a vote of the server that delivered it, and of no other (docs/algorithm.md,
 * "Evidence and hints"): it counts as the yes of node from only when the io vouches that node's own
 * server sent it (from, not REDLOCK__IO_NO_NODE) and its tag names that same node, so a message
 * forged on one server, whatever it says, costs that server's vote and nothing more. One for an
 * earlier token (released since), or a stamp that is not one of this token's attempts, is
 * ignored; its counter is a candidate for the fence, which only the commit round makes the
 * lock's (redlock__commit_start). */
static void op_granted(redlock__op *o, unsigned from, const char *message, size_t len)
{
    redlock_client *c = o->client;
    redlock__waiter *w = o->w;
    const char *p = message + 2, *end = message + len;
    uint64_t stamp, tag, key, full, counter;
    bool no_counter;
    if (!grant_field(&p, end, &stamp, NULL) || !grant_field(&p, end, &tag, NULL) ||
        !grant_field(&p, end, &key, NULL) || !grant_field(&p, end, &full, NULL) ||
        !grant_field(&p, end, &counter, &no_counter))
        return;
    const redlock_lock *lock = o->lock;
    if (!same_bytes(lock->token, lock->token_len, p, (size_t)(end - p)) ||
        stamp <= w->grant_after_us || stamp > w->grant_until_us || tag != from ||
        from >= c->n_nodes || key >= w->n_keys)
        return;
    waiter_node *node = &w->nodes[tag];
    if (w->key_bits != NULL) {
        unsigned char *bits = w->key_bits + (size_t)tag * ((w->n_keys + 7) / 8);
        unsigned char bit = (unsigned char)(1u << (key % 8));
        if ((bits[key / 8] & bit) != 0)
            return; /* heard already */
        bits[key / 8] |= bit;
    } else if (node->keys > 0) {
        return;
    }
    if (node->keys == 0 || stamp < node->oldest_us)
        node->oldest_us = stamp;
    node->counter = counter;
    /* Set only until o's place deadline there (or not as o's attempts asked): once a quorum
     * granted, o claims the keys with a round of its own at once, which renews them with its ttl
     * (grant_win). */
    if (!(full == 1 && (lock->fencing.wanted ? !no_counter : no_counter)))
        node->partial = true;
    if (++node->keys == w->n_keys)
        w->granted |= UINT64_C(1) << tag;
    /* An attempt in flight claims the granted keys itself, and one that lost keeping its token
     * looks at the grants first (lock_attempt_lost). A sleeping waiter wins with a quorum, or
     * else waits a short grace for the other nodes' grants, which come right behind as a rule,
     * before it runs a round. */
    if (o->state == OP_RUNNING || !redlock__waiter_grant_check(o))
        op_wake(c, o, w->grace_us != 0 ? w->grace_us : GRANT_GRACE_MIN_US, false);
}

/* Whether channel is o's own (its first key's queue name, ":" and its id), or that queue's. */
static bool is_own_channel(const redlock__op *o, const char *channel, size_t len)
{
    const redlock__place *p = o->lock->place;
    return p != NULL && p->channel_watched &&
           same_bytes(p->cmd.channel, p->cmd.channel_len, channel, len);
}

static bool is_queue_channel(const redlock__op *o, const char *channel, size_t len)
{
    const redlock__place *p = o->lock->place;
    return p != NULL && p->queue_channel_watched &&
           same_bytes(p->channels, p->queue_len, channel, len);
}

/* A node says a key was released, on one of three channels (lib/core/lua/release_queued.lua):
 *   - a waiter's own: a grant ("g:...", op_granted), or "w:<token>" when the release names it as
 *     the queue's next head without setting the key for it;
 *   - the waiter's queue's: "head:token", for a head that did not listen on its own channel yet;
 *   - the key's: a release with nobody queued, or of a lock taken outside the queue; the message
 *     is the token. It wakes the waiter of this client that has waited longest (c->ops is in
 *     start order); the others sleep on until the next release or their fallback retry.
 * Only holders' releases say anything: the release of a lost attempt wakes nobody. A wake-up is a
 * hint from any server (node may be REDLOCK__IO_NO_NODE); a grant counts only for node. */
static void on_notify(redlock__io *io, unsigned node, const char *channel, size_t len,
                      const char *message, size_t message_len)
{
    redlock_client *c = io->owner;
    if (c->closing)
        return;
    for (redlock__list *it = c->ops.next; it != &c->ops; it = it->next) {
        redlock__op *o = REDLOCK__CONTAINER_OF(it, redlock__op, closer.link);
        if (o->w == NULL || !o->w->watching || o->state == OP_DECIDED || o->lock->place == NULL)
            continue;
        if (is_own_channel(o, channel, len)) {
            if (message_len >= 2 && message[0] == 'g' && message[1] == ':')
                op_granted(o, node, message, message_len);
            else if (message_len >= 2 && message[0] == 'w' && message[1] == ':')
                op_wake(c, o, 0, true); /* the queue's designated head: no jitter */
            return;
        }
        if (is_queue_channel(o, channel, len)) {
            const char *colon = memchr(message, ':', message_len);
            redlock__op *head = colon != NULL
                                    ? queue_head_op(c, o->lock, message, (size_t)(colon - message))
                                    : NULL;
            if (head != NULL) /* else another client's waiter is next */
                op_wake(c, head, 0, true);
            return;
        }
    }
    for (redlock__list *it = c->ops.next; it != &c->ops; it = it->next) {
        redlock__op *o = REDLOCK__CONTAINER_OF(it, redlock__op, closer.link);
        if (o->w == NULL || !o->w->watching || o->state == OP_DECIDED ||
            !redlock__lock_has_key(o->lock, channel, len))
            continue;
        op_wake(c, o, redlock__waiter_jitter_us(c, o), true);
        return;
    }
}
