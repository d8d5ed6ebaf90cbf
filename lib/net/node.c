/* SPDX-License-Identifier: MIT */
/* node.c - one Redis master's request queue: FIFO, deadlines, reply matching, skipped replies,
 * the connection handshake; its bytes travel on a stream (stream.h). See node.h for the
 * model. */
#include "node.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "command.h"
#include "handshake.h"
#include "reader.h"
#include "relq.h"
#include "rto.h"
#include "scrub.h"
#include "stream.h"

#define ERR_LEN REDLOCK_ERROR_TEXT_MAX /* messages end up in per-node error slots */
/* A node that owes replies and has answered nothing for this many timeouts is dropped. */
#define DROP_AFTER_TIMEOUTS 3

/* How the node treats requests; where its connection stands is the stream's state alone. */
typedef enum {
    NODE_STARTING, /* no connection has become ready and none has failed yet: requests wait for
                      the first one, each within its deadline */
    NODE_READY,    /* the current connection's handshake succeeded (its stream is ESTABLISHED):
                      requests are written */
    NODE_DOWN,     /* a connection failed and no new one has become ready since: requests fail
                      fast while the stream reconnects (a stopped server still accepts TCP
                      connections and never answers, so waiting for an attempt could hang) */
    NODE_CLOSING
} node_state;

struct redlock__node {
    uv_loop_t *loop;
    redlock__node_config cfg;
    node_state state;
    redlock__stream stream;
    redlock__reader *reader; /* of the current connection: made new at every open */

    uv_timer_t deadline_timer; /* armed at or before the FIFO head's deadline */
    redlock__buf held;         /* commands sent while STARTING: written once the first
                                  handshake has succeeded, so nothing runs on a server that
                                  refused AUTH or SELECT... */
    unsigned held_others;      /* ...unless all of them are releases (held_others 0): those go
                                  right behind the handshake (see early_releases) */
    redlock__req *head, *tail; /* requests whose replies are awaited, in write order */
    unsigned fifo_len;
    unsigned skip_replies; /* replies owed to requests that already timed out */
    /* The handshake of the current connection (handshake.h): requests are written only once
     * it has succeeded. */
    redlock__handshake handshake;
    /* The run_id of the server the last ready connection reached ("": none yet, or INFO was
     * refused): a new connection to another one means the server restarted (changed). */
    char server_run_id[REDLOCK__RUN_ID_LEN + 1];
    uint64_t last_reply_us;  /* last reply (or connect) time */
    uint64_t ready_since_us; /* when the current connection became ready: only requests sent
                                since are round-trip samples (the others waited for it) */
    redlock__rto rto;        /* the timeout a request gets, fixed or adaptive (rto.h) */
    uint64_t owing_since_us; /* when the node last went from owing nothing to owing a reply */
    uint64_t handshake_us;   /* when the current connection's handshake was written */
    char last_error[ERR_LEN];
    /* Releases that found the node down, sent when it is up again (relq.h). */
    redlock__relq kept;
    /* Releases that timed out on this connection, until their late answers come (each is the
     * reply_seq-th reply skipped): if the connection goes first, they join kept. */
    redlock__relq owed;
    uint64_t skips_owed, skips_read; /* replies of timed-out requests: owed, and read */

    redlock__closing closing; /* the deadline timer and the stream */

    /* What redlock_client_node_info reports (counted here, never used for decisions). */
    redlock__tally tally;
    uint64_t connects, disconnects;
    unsigned connect_failures;
};

static void node_fail(redlock__node *n, redlock_log_level level, const char *why);

/* ---- what it tells ------------------------------------------------------------------------- */

void redlock__node_tally_request(redlock__tally *t, const redlock__req *req)
{
    t->requests++;
    if (req->cmd->kind == REDLOCK__CMD_TIME)
        t->probes++;
}

void redlock__node_tally_answer(redlock__tally *t, uint64_t sample_us)
{
    t->answers++;
    t->rtt_us = redlock__rtt_average(t->rtt_us, sample_us);
}

void redlock__node_tally_vote(redlock__tally *t, redlock_vote vote, const char *error)
{
    if (vote == REDLOCK_VOTE_YES || vote == REDLOCK_VOTE_NO) {
        t->consecutive_failures = 0;
        return;
    }
    t->consecutive_failures++;
    if (vote == REDLOCK_VOTE_TIMEOUT)
        t->timeouts++;
    else
        t->errors++;
    if (error != NULL)
        redlock__fmt(t->last_failure, sizeof(t->last_failure), "%s", error);
}

void redlock__node_tally_state(redlock__tally *t)
{
    t->state_since_us = redlock__now_us();
}

void redlock__node_tally_info(const redlock__tally *t, redlock_node_info *out)
{
    out->requests = t->requests;
    out->probes = t->probes;
    out->answers = t->answers;
    out->errors = t->errors;
    out->timeouts = t->timeouts;
    out->rtt_us = t->rtt_us;
    out->consecutive_failures = t->consecutive_failures;
    out->state_since_us = t->state_since_us;
    redlock__fmt(out->last_error, sizeof(out->last_error), "%s", t->last_failure);
}

void redlock__node_cfg_vlog(const redlock__node_config *cfg, redlock_log_level level,
                            const char *prefix, const char *fmt, va_list ap)
{
    if (cfg->log != NULL)
        redlock__vlog(cfg->log, cfg->log_ctx, level, cfg->name, prefix, fmt, ap);
}

void redlock__node_cfg_timeout_why(const redlock__node_config *cfg, char *out, size_t out_len)
{
    redlock__fmt(out, out_len, "no answer within %llu ms",
                 (unsigned long long)(redlock__rto_bound_us(cfg->timeout_us) / 1000));
}

void redlock__node_cfg_log(const redlock__node_config *cfg, redlock_log_level level,
                           const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redlock__node_cfg_vlog(cfg, level, "", fmt, ap);
    va_end(ap);
}

#define node_log(n, ...) redlock__node_cfg_log(&(n)->cfg, __VA_ARGS__)

/* Nothing is formatted unless someone listens. */
#define NODE_LOG(n, level, ...)                                                                    \
    do {                                                                                           \
        if ((n)->cfg.log != NULL)                                                                  \
            node_log((n), (level), __VA_ARGS__);                                                   \
    } while (0)

static void set_state(redlock__node *n, node_state state)
{
    if (n->state != state)
        redlock__node_tally_state(&n->tally);
    n->state = state;
}

static void kept_done(redlock__req *req, redlock_vote vote, const char *error,
                      const redlock__reply_data *data, uint64_t now);
static void owed_to_kept(redlock__node *n);

static void keep_logged(redlock__node *n, int rc)
{
    if (rc == 1)
        NODE_LOG(n, REDLOCK_LOG_WARN,
                 "%u releases kept for the reconnection already: the oldest was dropped (its key "
                 "expires with its ttl)",
                 (unsigned)REDLOCK__RELQ_MAX);
}

/* Until when a release is worth sending: while its key may live or, for a waiter leaving the
 * queues, while its place may. */
static uint64_t release_lives_until(const redlock__cmd *cmd, uint64_t now)
{
    uint64_t lives_ms = cmd->ttl_ms;
    if (cmd->place != NULL && cmd->leave && cmd->place->place_ttl_ms > lives_ms)
        lives_ms = cmd->place->place_ttl_ms;
    return now + lives_ms * 1000;
}

/* A release that failed because the node is down (it failed fast, or its connection was lost
 * before the answer): keep a copy to send once the node is up again. */

static void maybe_keep(redlock__node *n, const redlock__req *req, uint64_t now)
{
    const redlock__cmd *cmd = req->cmd;
    if (n->state != NODE_DOWN || cmd->kind != REDLOCK__CMD_RELEASE || req->cb == kept_done)
        return;
    keep_logged(n,
                redlock__relq_keep(&n->kept, n->cfg.alloc, cmd, release_lives_until(cmd, now), n));
}

/* A release that timed out may still be unread by a stopped or partitioned server: a copy waits
 * for its late answer (owed), and is sent again if the connection goes first. */
static void maybe_owe(redlock__node *n, const redlock__req *req, uint64_t now)
{
    const redlock__cmd *cmd = req->cmd;
    if (cmd->kind != REDLOCK__CMD_RELEASE || req->cb == kept_done)
        return;
    int rc = redlock__relq_keep(&n->owed, n->cfg.alloc, cmd, release_lives_until(cmd, now), n);
    if (rc >= 0)
        n->owed.tail->reply_seq = n->skips_owed;
    keep_logged(n, rc);
}

/* Every request ends here: counted, then completed. */
static void complete(redlock__node *n, redlock__req *req, redlock_vote vote, redlock__fail fail,
                     const char *error, const redlock__reply_data *data, uint64_t now)
{
    req->fail = vote == REDLOCK_VOTE_ERROR ? fail : REDLOCK__FAIL_NONE;
    if (vote == REDLOCK_VOTE_ERROR)
        maybe_keep(n, req, now);
    if (vote == REDLOCK_VOTE_TIMEOUT)
        maybe_owe(n, req, now);
    redlock__node_tally_vote(&n->tally, vote, error);
    req->cb(req, vote, error, data, now);
}

/* ---- FIFO ---------------------------------------------------------------------------------- */

static void fifo_push(redlock__node *n, redlock__req *req)
{
    req->next = NULL;
    if (n->tail != NULL)
        n->tail->next = req;
    else
        n->head = req;
    n->tail = req;
    n->fifo_len++;
}

static redlock__req *fifo_pop(redlock__node *n)
{
    redlock__req *req = n->head;
    if (req == NULL)
        return NULL;
    n->head = req->next;
    if (n->head == NULL)
        n->tail = NULL;
    req->next = NULL;
    n->fifo_len--;
    return req;
}

/* Complete every request in the FIFO with an error. Completions may re-enter (send again), so
 * the FIFO is detached first: anything sent from a callback belongs to the new state. */
static void fail_all(redlock__node *n, redlock__fail fail, const char *why)
{
    redlock__req *req = n->head;
    n->head = n->tail = NULL;
    n->fifo_len = 0;
    uint64_t now = redlock__now_us();
    while (req != NULL) {
        redlock__req *next = req->next;
        req->next = NULL;
        complete(n, req, REDLOCK_VOTE_ERROR, fail, why, NULL, now);
        req = next;
    }
}

/* ---- deadlines ----------------------------------------------------------------------------- */

static void on_deadline(uv_timer_t *t);

/* The deadline of a request sent at now: now plus the node's timeout, but never before the
 * FIFO's last one, so that deadlines grow in FIFO order and one timer at the head serves them
 * all even when an adaptive timeout has shrunk (a request then gets a little more). */
static uint64_t deadline_at(const redlock__node *n, uint64_t now)
{
    uint64_t d = now + redlock__rto_us(&n->rto);
    return n->tail != NULL && n->tail->deadline_us > d ? n->tail->deadline_us : d;
}

/* Why req timed out: how long it was given, and, if the connection never became ready, what
 * it is waiting for (stream.h). */
static void timeout_why(const redlock__node *n, const redlock__req *req, char *out, size_t len)
{
    char connecting[ERR_LEN] = "";
    if (n->state == NODE_STARTING)
        redlock__stream_pending_why(&n->stream, connecting, sizeof(connecting));
    redlock__fmt(out, len, "no answer within %llu ms%s%s%s",
                 (unsigned long long)((req->deadline_us - req->sent_us) / 1000),
                 connecting[0] != '\0' ? " (not connected yet: " : "", connecting,
                 connecting[0] != '\0' ? ")" : "");
}

static void start_deadline_timer(redlock__node *n, uint64_t now)
{
    if (n->head == NULL || n->state == NODE_CLOSING)
        return;
    redlock__timer_at(&n->deadline_timer, on_deadline, n->head->deadline_us, now);
}

static void on_deadline(uv_timer_t *t)
{
    redlock__node *n = REDLOCK__CONTAINER_OF(t, redlock__node, deadline_timer);
    uint64_t now = redlock__now_us();
    uint64_t silence_us = DROP_AFTER_TIMEOUTS * redlock__rto_base_us(&n->rto);
    if (n->head != NULL && n->head->deadline_us <= now)
        redlock__rto_timeout(&n->rto); /* once for the batch: they timed out together */
    while (n->head != NULL && n->head->deadline_us <= now && n->state != NODE_CLOSING) {
        redlock__req *req = fifo_pop(n);
        n->skips_owed += req->asking ? 2 : 1;   /* its reply is the skips_owed-th skipped */
        n->skip_replies += req->asking ? 2 : 1; /* its replies, if they ever come, are dropped */
        req->asking = false;
        char why[ERR_LEN];
        timeout_why(n, req, why, sizeof(why));
        complete(n, req, REDLOCK_VOTE_TIMEOUT, REDLOCK__FAIL_NONE, why, NULL, now);
    }
    if (n->state == NODE_CLOSING)
        return;
    bool owes = n->skip_replies > 0;
    /* Silence counts from the later of the last reply and the moment the node started to owe
     * one: an idle spell is not silence. */
    uint64_t quiet_since = REDLOCK__MAX(n->last_reply_us, n->owing_since_us);
    bool silent = now - quiet_since >= silence_us;
    if (owes && silent && redlock__stream_is_open(&n->stream)) {
        char drop[ERR_LEN];
        redlock__fmt(drop, sizeof(drop), "connection dropped: no answer for %llu ms",
                     (unsigned long long)((now - quiet_since) / 1000));
        node_fail(n, REDLOCK_LOG_WARN, drop);
        return;
    }
    start_deadline_timer(n, now);
}

/* ---- going down ---------------------------------------------------------------------------- */

/* The connection is gone (the stream failed, or the node gave it up): fail what waits; until a
 * new connection is ready, requests fail fast. level: how much it matters to the log (0: a lost
 * connection warns, as does the first failed attempt in a row; later ones are debug). */
static void node_down(redlock__node *n, redlock_log_level level, const char *why)
{
    if (n->state == NODE_CLOSING)
        return;
    char full[ERR_LEN]; /* with the server's answer, if it refused the handshake and closed */
    why = redlock__handshake_why(&n->handshake, why, full, sizeof(full));
    /* A connection that skipped verification says so in every error it causes. */
    bool note = redlock__tls_ctx_insecure(n->cfg.tls) && n->cfg.url->tls &&
                strstr(why, REDLOCK__TLS_INSECURE_NOTE) == NULL;
    redlock__fmt(n->last_error, sizeof(n->last_error), "%s%s", why,
                 note ? REDLOCK__TLS_INSECURE_NOTE : "");
    memcpy(n->tally.last_failure, n->last_error, sizeof(n->tally.last_failure));
    bool was_up = n->state == NODE_READY;
    if (was_up)
        n->disconnects++;
    else
        n->connect_failures++;
    set_state(n, NODE_DOWN);
    unsigned long long next_ms =
        (unsigned long long)redlock__ms_ceil(n->stream.stats.next_attempt_us);
    if (was_up)
        NODE_LOG(n, level != 0 ? level : REDLOCK_LOG_WARN,
                 "connection lost: %s (reconnecting in %llu ms)", n->last_error, next_ms);
    else
        NODE_LOG(n,
                 level != 0                 ? level
                 : n->connect_failures == 1 ? REDLOCK_LOG_WARN
                                            : REDLOCK_LOG_DEBUG,
                 "connection attempt failed (%u in a row): %s (next attempt in %llu ms)",
                 n->connect_failures, n->last_error, next_ms);
    n->held.len = 0;
    n->held_others = 0;
    redlock__buf_trim(&n->held, n->cfg.alloc);
    owed_to_kept(n);
    n->skip_replies = 0;
    redlock__handshake_reset(&n->handshake);
    uv_timer_stop(&n->deadline_timer);
    char msg[ERR_LEN];
    redlock__fmt(msg, sizeof(msg), "%s", n->last_error); /* last_error may change meanwhile */
    fail_all(n, REDLOCK__FAIL_LINK, msg);
}

/* The node gives up its connection (a protocol error, a refused handshake, silence): the stream
 * reconnects after its backoff. */
static void node_fail(redlock__node *n, redlock_log_level level, const char *why)
{
    redlock__stream_drop(&n->stream);
    node_down(n, level, why);
}

static void on_stream_down(redlock__stream *s, const char *why)
{
    redlock__node *n = REDLOCK__CONTAINER_OF(s, redlock__node, stream);
    /* A TLS port resets a plain client as soon as its first bytes arrive. */
    char hint[ERR_LEN];
    if (!n->cfg.url->tls && !n->cfg.url->is_unix && n->handshake.n_steps > 0 &&
        n->handshake.answered == 0 && strstr(why, "reset") != NULL) {
        redlock__fmt(hint, sizeof(hint), "%s (before any answer: a TLS port? use rediss://)", why);
        why = hint;
    }
    node_down(n, 0, why);
}

/* ---- releases kept while down ------------------------------------------------------------- */

/* A kept release was answered, or failed again: put it back while the node is down and its key
 * may live, else it is done. */
static void kept_done(redlock__req *req, redlock_vote vote, const char *error,
                      const redlock__reply_data *data, uint64_t now)
{
    (void)error;
    (void)data;
    redlock__relq_entry *e = (redlock__relq_entry *)req;
    redlock__node *n = e->owner;
    if (vote == REDLOCK_VOTE_TIMEOUT && now < e->expires_us) { /* its answer may come late */
        e->reply_seq = n->skips_owed;
        keep_logged(n, redlock__relq_put(&n->owed, n->cfg.alloc, e));
        return;
    }
    if (vote == REDLOCK_VOTE_ERROR && n->state == NODE_DOWN && now < e->expires_us) {
        keep_logged(n, redlock__relq_put(&n->kept, n->cfg.alloc, e));
        return;
    }
    redlock__relq_entry_free(n->cfg.alloc, e);
}

/* A reply owed to a timed-out request came (r): a release that waited for it is done, unless the
 * server refused it (an error: NOSCRIPT, LOADING, ...), then it is kept for the next connection. */
static void owed_answered(redlock__node *n, const redisReply *r, uint64_t now)
{
    n->skips_read++;
    while (n->owed.head != NULL && n->owed.head->reply_seq <= n->skips_read) {
        redlock__relq_entry *e = redlock__relq_pop(&n->owed);
        if (e->reply_seq == n->skips_read && r->type == REDIS_REPLY_ERROR && now < e->expires_us)
            keep_logged(n, redlock__relq_put(&n->kept, n->cfg.alloc, e));
        else
            redlock__relq_entry_free(n->cfg.alloc, e);
    }
}

/* The connection went with late answers still owed: the releases that waited for them are kept
 * for the next one, as if they had been in flight. */
static void owed_to_kept(redlock__node *n)
{
    redlock__relq_entry *e;
    while ((e = redlock__relq_pop(&n->owed)) != NULL) {
        e->reply_seq = 0;
        keep_logged(n, redlock__relq_put(&n->kept, n->cfg.alloc, e));
    }
    n->skips_owed = n->skips_read = 0;
}

/* The next kept release of pending (oldest first) whose key may still live at now, or NULL; those
 * before it, past their key's ttl, are gone already: freed and counted in *expired. */
static redlock__relq_entry *kept_next(redlock__node *n, redlock__relq *pending, uint64_t now,
                                      unsigned *expired)
{
    redlock__relq_entry *e;
    while ((e = redlock__relq_pop(pending)) != NULL && now >= e->expires_us) {
        redlock__relq_entry_free(n->cfg.alloc, e);
        (*expired)++;
    }
    return e;
}

/* Send what n kept, oldest first, each through send at now (false: not sent, and kept again for
 * the next time); a key past its ttl is gone already. What is put back meanwhile waits for the
 * next time too. */
static void flush_kept(redlock__node *n, uint64_t now,
                       bool (*send)(redlock__node *n, redlock__relq_entry *e, uint64_t now))
{
    unsigned sent = 0, expired = 0;
    redlock__relq pending = n->kept;
    memset(&n->kept, 0, sizeof(n->kept));
    redlock__relq_entry *e;
    while ((e = kept_next(n, &pending, now, &expired)) != NULL) {
        e->req.cb = kept_done;
        e->req.sent_us = now;
        if (send(n, e, now))
            sent++;
        else
            keep_logged(n, redlock__relq_put(&n->kept, n->cfg.alloc, e));
    }
    NODE_LOG(n, REDLOCK_LOG_INFO, "sent %u release%s kept while the node was down (%u had expired)",
             sent, sent == 1 ? "" : "s", expired);
}

static bool send_ready(redlock__node *n, redlock__relq_entry *e, uint64_t now)
{
    (void)now;
    redlock__node_send(n, &e->req);
    return true;
}

/* The node is up: send what it kept. */
static void send_kept(redlock__node *n)
{
    if (n->kept.len > 0)
        flush_kept(n, redlock__now_us(), send_ready);
}

/* ---- replies ------------------------------------------------------------------------------- */

static void set_ready(redlock__node *n)
{
    set_state(n, NODE_READY);
    n->last_error[0] = '\0';
    n->last_reply_us = n->ready_since_us = redlock__now_us();
    n->connects++;
    if (n->cfg.log != NULL) {
        const redlock__stream_stats *st = &n->stream.stats;
        bool tls = n->cfg.url->tls && st->tls_handshakes > 0;
        char failed[48] = "";
        if (n->connect_failures > 0)
            redlock__fmt(failed, sizeof(failed), " after %u failed attempt%s", n->connect_failures,
                         n->connect_failures == 1 ? "" : "s");
        node_log(n, REDLOCK_LOG_INFO, "connected%s%s", failed,
                 !tls               ? ""
                 : st->last_resumed ? " (TLS session resumed)"
                                    : " (TLS, full handshake)");
        if (n->handshake.script_refused)
            node_log(n, REDLOCK_LOG_WARN,
                     "SCRIPT LOAD refused (%s): every script is first refused NOSCRIPT, then sent "
                     "as EVAL (allow +script|load)",
                     n->handshake.refused);
        if (n->handshake.info_refused)
            node_log(n, REDLOCK_LOG_WARN,
                     "INFO refused (%s): two URLs that reach this server, or a replica and a "
                     "master, cannot be told apart (allow +info)",
                     n->handshake.refused);
    }
    n->connect_failures = 0;
    redlock__stream_established(&n->stream);
    redlock__buf *out = redlock__stream_out(&n->stream);
    if (n->held.len > 0) { /* the requests held behind the first handshake */
        if (out->len == 0) {
            redlock__buf tmp = *out;
            *out = n->held;
            n->held = tmp;
        } else if (redlock__buf_append(out, n->cfg.alloc, n->held.data, n->held.len) != 0) {
            node_fail(n, 0, "out of memory");
            return;
        }
        n->held.len = 0;
        redlock__buf_trim(&n->held, n->cfg.alloc);
    }
    n->held_others = 0;
    redlock__stream_flush(&n->stream);
    send_kept(n);
}

/* A ready connection reached the server with run_id: if the last one reached another, the
 * server restarted (or the address leads elsewhere now) and may have lost every key it held. */
static void note_server(redlock__node *n, const char *run_id)
{
    bool changed = n->server_run_id[0] != '\0' && strcmp(n->server_run_id, run_id) != 0;
    if (changed)
        NODE_LOG(n, REDLOCK_LOG_WARN,
                 "a new server (run_id %.8s..., was %.8s...): it restarted and may have lost its "
                 "keys; held locks are checked now",
                 run_id, n->server_run_id);
    bool same = n->server_run_id[0] != '\0' && !changed;
    memcpy(n->server_run_id, run_id, sizeof(n->server_run_id));
    if (changed && n->cfg.changed != NULL)
        n->cfg.changed(n->cfg.changed_ctx, n->cfg.index);
    if (same && n->cfg.same != NULL)
        n->cfg.same(n->cfg.changed_ctx, n->cfg.index, n->handshake_us);
}

/* Every handshake reply came: the node is ready unless its server is a replica, or another node
 * already reached the same server (then it stays down, and tries again after its backoff in case
 * that changes). A cluster's connections take replicas too: its map says which are masters. */
static void handshake_done(redlock__node *n)
{
    if (n->handshake.replica_of[0] != '\0' && n->cfg.replies == REDLOCK__READER_NODE) {
        char why[ERR_LEN];
        redlock__fmt(why, sizeof(why),
                     "a replica of %s, not a master: a replica must not vote beside its master "
                     "(list masters only)",
                     n->handshake.replica_of);
        node_fail(n, REDLOCK_LOG_ERROR, why);
        return;
    }
    const char *twin = NULL;
    const char *run_id = n->handshake.run_id;
    if (run_id[0] != '\0' && n->cfg.twin_of != NULL)
        twin = n->cfg.twin_of(n->cfg.twin_ctx, n, run_id);
    if (twin != NULL) {
        char why[ERR_LEN];
        redlock__fmt(why, sizeof(why),
                     "same server as %s (run_id %.8s...): a server must count only once", twin,
                     run_id);
        node_fail(n, REDLOCK_LOG_ERROR, why);
        return;
    }
    set_ready(n);
    if (n->state == NODE_READY && run_id[0] != '\0')
        note_server(n, run_id);
}

static void handshake_reply(redlock__node *n, const redisReply *r)
{
    char why[ERR_LEN];
    if (!redlock__handshake_reply(&n->handshake, r, why, sizeof(why))) {
        node_fail(n, REDLOCK_LOG_ERROR, why);
        return;
    }
    if (!redlock__handshake_pending(&n->handshake))
        handshake_done(n);
}

static bool same_lock(const redlock__cmd *a, const redlock__cmd *b)
{
    return a->key_hash == b->key_hash && a->key_len == b->key_len && a->token_len == b->token_len &&
           memcmp(a->token, b->token, a->token_len) == 0 && memcmp(a->key, b->key, a->key_len) == 0;
}

/* A NOSCRIPT answer to EVALSHA: resend as EVAL, which also loads the script. The resend goes to
 * the FIFO's tail, so it runs after commands written since. For another token that is harmless
 * (the script only touches a key holding its own token), but a later command of the same lock
 * (an acquire retry's SET, a release after an extend) could be undone by replaying the script
 * after it, so then the request fails instead. */
static void resend_with_eval(redlock__node *n, redlock__req *req, uint64_t now)
{
    for (redlock__req *r = n->head; r != NULL; r = r->next) {
        if (same_lock(r->cmd, req->cmd)) {
            complete(n, req, REDLOCK_VOTE_ERROR, REDLOCK__FAIL_LOCAL,
                     "NOSCRIPT, and a later command of the same lock is already queued", NULL, now);
            return;
        }
    }
    if (redlock__cmd_append_tagged(req->cmd, req->grant_tag, true, redlock__stream_out(&n->stream),
                                   n->cfg.alloc) != 0) {
        complete(n, req, REDLOCK_VOTE_ERROR, REDLOCK__FAIL_LOCAL, "out of memory", NULL, now);
        return;
    }
    req->deadline_us = deadline_at(n, now);
    bool was_empty = n->head == NULL;
    fifo_push(n, req);
    if (was_empty)
        start_deadline_timer(n, now);
    redlock__stream_flush(&n->stream);
}

/* One reply, read at now. An error's text is scrubbed first (scrub.h): whatever a vote, the
 * handshake or a log then quotes of it holds no password and no control byte. */
static void handle_reply(redlock__node *n, redisReply *r, uint64_t now)
{
    n->last_reply_us = now;
    redlock__scrub_error(r, n->cfg.url->password);
    if (redlock__handshake_pending(&n->handshake)) {
        handshake_reply(n, r);
        return;
    }
    if (n->skip_replies > 0) {
        n->skip_replies--;
        owed_answered(n, r, now);
        return;
    }
    if (n->head != NULL && n->head->asking) { /* the reply to ASKING: the command's follows */
        n->head->asking = false;
        return;
    }
    redlock__req *req = fifo_pop(n);
    if (req == NULL) {
        node_fail(n, REDLOCK_LOG_ERROR, "protocol error: reply without a request");
        return;
    }
    uint64_t rtt_us = now > req->sent_us ? now - req->sent_us : 0;
    redlock__node_tally_answer(&n->tally, rtt_us);
    if (req->sent_us >= n->ready_since_us)
        redlock__rto_sample(&n->rto, rtt_us);
    char err[ERR_LEN];
    err[0] = '\0';
    redlock__reply_kind kind;
    redlock__reply_data data;
    redlock_vote vote = redlock__cmd_vote(req->cmd, r, err, sizeof(err), &kind, &data);
    if (err[0] != '\0') /* it may quote a reply that is not an error */
        redlock__scrub(err, strlen(err), n->cfg.url->password);
    if (kind == REDLOCK__REPLY_NOSCRIPT) {
        resend_with_eval(n, req, now);
        return;
    }
    if (kind == REDLOCK__REPLY_MISMATCH) {
        /* Out of step: this reply may belong to another request, and so may every later one.
         * Nothing on this connection is believed any more. */
        char why[ERR_LEN];
        redlock__fmt(why, sizeof(why), "protocol error: %s (connection dropped)", err);
        node_fail(n, REDLOCK_LOG_ERROR, why);
        complete(n, req, REDLOCK_VOTE_ERROR, REDLOCK__FAIL_LINK, why, NULL, now);
        return;
    }
    redlock__fail fail = r->type == REDIS_REPLY_ERROR ? REDLOCK__FAIL_SERVER : REDLOCK__FAIL_LOCAL;
    complete(n, req, vote, fail, err[0] != '\0' ? err : NULL, /* an error, or a note (io.h) */
             redlock__cmd_has_data(req->cmd) ? &data : NULL, now);
}

/* The server's bytes are not RESP, or more than its commands can be answered (reader.h). */
static void reader_failed(redlock__node *n)
{
    char why[ERR_LEN];
    redlock__fmt(why, sizeof(why), "protocol error: %s", redlock__reader_error(n->reader));
    node_fail(n, REDLOCK_LOG_ERROR, why);
}

/* The replies of one read, handled at the clock reading taken for all of them. */
struct read_batch {
    redlock__node *n;
    uint64_t now;
};

static bool batch_reply(void *ctx, redisReply *reply)
{
    struct read_batch *batch = ctx;
    handle_reply(batch->n, reply, batch->now);
    /* A callback may have dropped this connection or closed the client; a new connection never
     * opens from inside one, so the stream's state tells. */
    return redlock__stream_is_open(&batch->n->stream);
}

static void on_stream_read(redlock__stream *s, const char *data, size_t len)
{
    redlock__node *n = REDLOCK__CONTAINER_OF(s, redlock__node, stream);
    /* One clock reading for every reply of these bytes, taken after they were read: each of
     * them had arrived by then, and its node had acted before it sent it, so this time is an
     * upper bound of both for all of them, which is what a vote's time must be (the rounds'
     * deadlines count from their start; an extend is won in time only if the time of its
     * deciding vote is before the old deadline). A reply handled later in the batch (behind a
     * callback that ran long) is not made later by the wait. */
    uint64_t now = redlock__now_us();
    /* A lock cycle's replies (+OK, :1, :0, $-1) are taken straight from the bytes while the
     * reader holds nothing, with no reply object to allocate and free; the rest of the bytes,
     * from the first reply that is not one of those (or is cut off), go through the reader. */
    while (len > 0 && !redlock__handshake_pending(&n->handshake) &&
           redlock__reader_idle(n->reader)) {
        redisReply simple;
        char text[REDLOCK__RESP_SIMPLE_TEXT];
        size_t used = redlock__resp_simple(data, len, &simple, text);
        if (used == 0)
            break;
        data += used;
        len -= used;
        handle_reply(n, &simple, now);
        if (!redlock__stream_is_open(&n->stream)) /* as below */
            return;
    }
    if (len == 0)
        return;
    struct read_batch batch = {n, now};
    if (redlock__reader_each(n->reader, data, len, batch_reply, &batch) != 0)
        reader_failed(n);
}

/* A kept release written behind the handshake, as EVAL (early_releases), and queued for its
 * answer; false when the FIFO is full or without memory. */
static bool send_early(redlock__node *n, redlock__relq_entry *e, uint64_t now)
{
    if (n->fifo_len + n->skip_replies >= n->cfg.max_inflight ||
        redlock__cmd_append_tagged(&e->cmd, 0, true, redlock__stream_out(&n->stream),
                                   n->cfg.alloc) != 0)
        return false;
    e->req.deadline_us = deadline_at(n, now);
    n->tally.requests++;
    if (n->head == NULL && n->skip_replies == 0)
        n->owing_since_us = now;
    fifo_push(n, &e->req);
    return true;
}

/* Releases go right behind a new connection's handshake, without waiting for its answers: a
 * server that is stopped (its kernel still accepts the connection) runs them when it continues,
 * though the client may be gone by then (the CLI's one-shot release). That is safe before the
 * handshake's checks: a compare-and-delete only deletes a key that holds its own token, so on a
 * server that refuses the password it is refused too, and on a replica or a twin it deletes at
 * most that server's copy. So the first connection's held requests go at once if all of them are
 * releases, and a later connection's kept releases (as EVAL: the SCRIPT LOAD before them may be
 * refused, and nobody may be left to resend them); the node is still not ready until the
 * handshake succeeded. Their answers come after the handshake's, in the FIFO's order. */
static void early_releases(redlock__node *n)
{
    redlock__buf *out = redlock__stream_out(&n->stream);
    if (n->state == NODE_STARTING && n->held.len > 0 && n->held_others == 0) {
        if (redlock__buf_append(out, n->cfg.alloc, n->held.data, n->held.len) != 0)
            return; /* they wait for the handshake, as the others do */
        n->held.len = 0;
        redlock__buf_trim(&n->held, n->cfg.alloc);
    }
    if (n->state != NODE_DOWN || n->kept.len == 0)
        return;
    uint64_t now = redlock__now_us();
    flush_kept(n, now, send_early);
    start_deadline_timer(n, now);
}

/* A new connection: it says its handshake first; requests follow once every answer came. */
static void on_stream_open(redlock__stream *s)
{
    redlock__node *n = REDLOCK__CONTAINER_OF(s, redlock__node, stream);
    redlock__reader_free(n->reader); /* what a reply cut off held: bounded (reader.h) */
    n->reader = redlock__reader_new(n->cfg.replies, n->cfg.alloc);
    n->skip_replies = 0;
    n->last_reply_us = redlock__now_us();
    n->handshake_us = n->last_reply_us;
    if (n->reader == NULL || redlock__handshake_start(&n->handshake, n->cfg.url,
                                                      redlock__stream_out(s), n->cfg.alloc) != 0) {
        node_fail(n, 0, "connect: out of memory");
        return;
    }
    if (!redlock__handshake_pending(&n->handshake)) {
        handshake_done(n);
        return;
    }
    early_releases(n);
    redlock__stream_flush(s);
}

/* ---- public (internal) API ----------------------------------------------------------------- */

static void part_closed(redlock__node *n)
{
    if (!redlock__closing_done(&n->closing))
        return;
    redlock__closing told = n->closing;
    redlock__reader_free(n->reader);
    redlock__buf_free(&n->held, n->cfg.alloc);
    redlock__relq_clear(&n->kept, n->cfg.alloc);
    redlock__relq_clear(&n->owed, n->cfg.alloc);
    redlock__free(n->cfg.alloc, n);
    redlock__closing_tell(told);
}

static void on_stream_closed(redlock__stream *s)
{
    part_closed(REDLOCK__CONTAINER_OF(s, redlock__node, stream));
}

int redlock__node_new(uv_loop_t *loop, const redlock__node_config *cfg, redlock__node **out)
{
    redlock__node *n = redlock__calloc(cfg->alloc, 1, sizeof(*n));
    if (n == NULL)
        return REDLOCK_ENOMEM;
    n->loop = loop;
    n->cfg = *cfg;
    n->state = NODE_STARTING;
    redlock__rto_init(&n->rto, cfg->timeout_us);
    redlock__node_tally_state(&n->tally);
    redlock__stream_config scfg = {
        .url = cfg->url,
        .connect_timeout_us = cfg->connect_timeout_us,
        .reconnect_min_us = cfg->reconnect_min_us,
        .reconnect_max_us = cfg->reconnect_max_us,
        .alloc = cfg->alloc,
        .tls = cfg->tls,
        .on_open = on_stream_open,
        .on_read = on_stream_read,
        .on_down = on_stream_down,
        .on_closed = on_stream_closed,
    };
    redlock__stream_init(&n->stream, loop, &scfg);
    *out = n;
    return 0;
}

void redlock__node_free_unstarted(redlock__node *n)
{
    redlock__free(n->cfg.alloc, n);
}

void redlock__node_start(redlock__node *n)
{
    uv_timer_init(n->loop, &n->deadline_timer);
    redlock__fmt(n->last_error, sizeof(n->last_error), "not connected yet");
    redlock__stream_start(&n->stream);
}

void redlock__node_send(redlock__node *n, redlock__req *req)
{
    uint64_t now = req->sent_us; /* the caller's clock: one reading for a round's nodes */
    redlock__node_tally_request(&n->tally, req);
    req->deadline_us = now + redlock__rto_us(&n->rto); /* final below, once it is queued */
    req->unsent = n->state == NODE_CLOSING || n->state == NODE_DOWN ||
                  n->fifo_len + n->skip_replies >= n->cfg.max_inflight;
    if (n->state == NODE_CLOSING) {
        complete(n, req, REDLOCK_VOTE_ERROR, REDLOCK__FAIL_LOCAL, "canceled: client closing", NULL,
                 now);
        return;
    }
    if (n->state == NODE_DOWN) { /* reconnecting: fail fast */
        char why[ERR_LEN + 16];
        redlock__fmt(why, sizeof(why), "node down: %s", n->last_error);
        complete(n, req, REDLOCK_VOTE_ERROR, REDLOCK__FAIL_LINK, why, NULL, now);
        return;
    }
    if (n->fifo_len + n->skip_replies >= n->cfg.max_inflight) {
        complete(n, req, REDLOCK_VOTE_ERROR, REDLOCK__FAIL_LOCAL,
                 "too many requests in flight on this node", NULL, now);
        return;
    }
    bool ready = n->state == NODE_READY;
    /* A release behind the first connection's handshake, like those held before it opened. */
    bool early = !ready && req->cmd->kind == REDLOCK__CMD_RELEASE && n->held.len == 0 &&
                 n->held_others == 0 && redlock__stream_is_open(&n->stream) &&
                 redlock__handshake_pending(&n->handshake);
    redlock__buf *out = ready || early ? redlock__stream_out(&n->stream) : &n->held;
    if (!ready && req->cmd->kind != REDLOCK__CMD_RELEASE)
        n->held_others++;
    size_t before = out->len;
    static const char asking[] = "*1\r\n$6\r\nASKING\r\n";
    if ((req->asking && redlock__buf_append(out, n->cfg.alloc, asking, sizeof(asking) - 1) != 0) ||
        redlock__cmd_append_tagged(req->cmd, req->grant_tag, false, out, n->cfg.alloc) != 0) {
        out->len = before;
        req->asking = false;
        complete(n, req, REDLOCK_VOTE_ERROR, REDLOCK__FAIL_LOCAL, "out of memory", NULL, now);
        return;
    }
    if (n->head == NULL && n->skip_replies == 0)
        n->owing_since_us = now;
    bool was_empty = n->head == NULL;
    req->deadline_us = deadline_at(n, now);
    fifo_push(n, req);
    if (was_empty && !uv_is_active((uv_handle_t *)&n->deadline_timer))
        start_deadline_timer(n, now);
    if (ready || early)
        redlock__stream_flush(&n->stream);
}

uint64_t redlock__node_timeout_us(const redlock__node *n)
{
    return redlock__rto_us(&n->rto);
}

const char *redlock__node_name(const redlock__node *n)
{
    return n->cfg.name;
}

const redlock__stream_stats *redlock__node_stream_stats(const redlock__node *n)
{
    return &n->stream.stats;
}

const char *redlock__node_run_id(const redlock__node *n)
{
    return n->state == NODE_READY && n->handshake.run_id[0] != '\0' ? n->handshake.run_id : NULL;
}

static void on_timer_closed(uv_handle_t *h)
{
    part_closed(h->data);
}

void redlock__node_info(const redlock__node *n, redlock_node_info *out)
{
    static const redlock_node_state states[] = {
        [NODE_STARTING] = REDLOCK_NODE_CONNECTING,
        [NODE_READY] = REDLOCK_NODE_UP,
        [NODE_DOWN] = REDLOCK_NODE_DOWN,
        [NODE_CLOSING] = REDLOCK_NODE_CLOSED,
    };
    out->url = n->cfg.name;
    out->state = states[n->state];
    out->inflight = n->fifo_len;
    out->owed = n->skip_replies;
    out->connect_failures = n->connect_failures;
    out->connects = n->connects;
    out->disconnects = n->disconnects;
    redlock__node_tally_info(&n->tally, out);
}

void redlock__node_close(redlock__node *n, void (*cb)(void *data), void *data)
{
    set_state(n, NODE_CLOSING);
    n->closing = (redlock__closing){.pending = 2, .cb = cb, .data = data}; /* timer, stream */
    n->skip_replies = 0;
    fail_all(n, REDLOCK__FAIL_LOCAL, "canceled: client closing");
    redlock__stream_close(&n->stream);
    n->deadline_timer.data = n;
    uv_close((uv_handle_t *)&n->deadline_timer, on_timer_closed);
}
