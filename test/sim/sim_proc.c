/* SPDX-License-Identifier: MIT */
/* sim_proc.c - the client processes' program, and the promises of auto-extension checked as it
 * runs.
 *
 * Each process loops: acquire, hold, release. A plain hold works for up to 1.5 ttl (often past
 * the deadline, where it must stop), sometimes with one extend. An auto-extended hold is kept
 * for longer than the ttl; the holder works only up to the deadline the library reports at each
 * moment (it looks again when the deadline it knew comes), and stops at once when the lost
 * callback fires. It ends the hold as users do: release, mostly; or stop auto-extension and
 * finish before the deadline; or free the handle (also from inside the lost callback); or close
 * the client while holding (with or without a release just before). What it worked becomes one
 * interval of true time for the checker; holes are impossible, since an extension counts only if
 * won before the deadline it replaces.
 *
 * The promises (include/redlock.h, docs/api.md), each a broken promise when not kept:
 *   - the lost callback fires at most once per hold, never after a release, never for a lock
 *     the process was not handed, with ECANCELED only when the client closes;
 *   - it fires at the latest lost_margin before the deadline (or at once if a round left less
 *     validity than that), unless the process was paused past that moment;
 *   - a hold whose deadline passes without a release gets its lost callback (an expired hold
 *     with no lost callback, on time or ever, is a broken promise), and is never renewed;
 *   - no extension is sent after a release, a stop, a free or a lost callback, and no lost
 *     callback comes after any of them;
 *   - with max_extensions, no more are won, and the hold ends through the lost callback with
 *     REDLOCK_ELIMIT exactly when the cap was reached (or REDLOCK_ELOST at the cap, when a check
 *     after a node lost its keys found it lost: lib/lock/recheck.c);
 *   - closing the client while holding gives the lost callback (ECANCELED) before the close
 *     callback; releasing and closing at once gives none.
 *
 * And for every hold: a release that completes with 0, or an extend that is won, reports the
 * hold as continuous; sim_check_no_gap holds it against the nodes' record. With
 * old_release_status the release's status is read as the library gave it before issue 17 (0
 * whenever a quorum answered): the negative control of that property. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"
#include "waiter.h"

/* A wake-up lands on the first microsecond at or after its due time on the process's clock. */
#define LOST_SLACK_US 10

enum { STEP_ACQUIRE = 1, STEP_EXTEND, STEP_DONE, STEP_CHECK, STEP_SNIPE };

static void end_hold(sim_proc *p);

static void step_at(sim_proc *p, uint64_t local_us, unsigned step)
{
    sim_world *w = p->w;
    sim_push(w, sim_clock_true(w, p->rate_ppm, p->offset_us, local_us), EV_PROC_STEP, p->id, 0,
             (p->hold_gen << 8) | step, NULL);
}

void sim_proc_start(sim_proc *p)
{
    step_at(p, sim_proc_now(p) + sim_rng_range(&p->rng, 0, p->w->cfg.ttl_ms * 500), STEP_ACQUIRE);
}

static void on_client_closed(redlock_client *client, void *data)
{
    (void)client;
    sim_proc *p = data;
    if (p->client_closed)
        sim_contract(p->w, "close callback of process %u ran twice", p->id);
    p->client_closed = true;
    sim_auto_hold *h = p->autoh;
    if (h != NULL && h->ended == AUTO_CLOSED && h->lost != 1)
        sim_promise(p->w,
                    "p%u closed its client holding an auto-extended lock: %u lost callbacks "
                    "before the close callback, not 1",
                    p->id, h->lost);
}

static void close_client(sim_proc *p)
{
    p->state = PROC_DONE;
    sim_trace(p->w, "p%u closes its client", p->id);
    redlock_stats stats;
    redlock_stats_init(&stats);
    if (redlock_client_stats(p->client, &stats) == 0)
        p->w->res->grants += (unsigned)stats.acquires_granted;
    if (redlock_client_close(p->client, on_client_closed, p) != 0)
        sim_contract(p->w, "process %u could not close its client", p->id);
}

void sim_proc_vanish(sim_proc *p)
{
    sim_world *w = p->w;
    if (p->vanished || p->state == PROC_DONE || p->io.closing)
        return;
    sim_trace(w, "p%u vanishes%s", p->id, p->state == PROC_ACQUIRING ? " while it waits" : "");
    end_hold(p); /* a holder's work ends with it */
    p->vanished = true;
    p->vanished_at = w->now;
    w->res->vanished++;
}

void sim_proc_close_vanished(sim_proc *p)
{
    sim_io_vanished(p);
    close_client(p);
}

static void proc_next(sim_proc *p)
{
    sim_world *w = p->w;
    p->lock = NULL;
    p->autoh = NULL;
    if (++p->cycles_done >= w->cfg.cycles) {
        close_client(p);
        return;
    }
    p->state = PROC_IDLE;
    step_at(p, sim_proc_now(p) + sim_rng_range(&p->rng, 0, w->cfg.ttl_ms * 500), STEP_ACQUIRE);
}

/* The deadline the library reports now; the holder's view only moves forward (an extension
 * counts only if won before the deadline it replaces). */
static void refresh_deadline(sim_proc *p)
{
    uint64_t deadline = redlock_lock_deadline_us(p->lock);
    if (deadline > p->deadline_us)
        p->deadline_us = deadline;
}

/* The holder stops using the lock now, or stopped at its deadline if that came first. */
static void end_hold(sim_proc *p)
{
    if (!p->using_lock)
        return;
    p->using_lock = false;
    sim_world *w = p->w;
    uint64_t deadline = sim_clock_true_raw(p->rate_ppm, p->offset_us, p->deadline_us);
    uint64_t end = REDLOCK__MIN(w->now, deadline);
    sim_record_hold(w, p, deadline);
    sim_note_forgotten(w, p, end);
    sim_auto_hold *h = p->autoh;
    if (h == NULL)
        return;
    w->res->auto_extensions += redlock_lock_extensions(p->lock);
    if (end > p->hold_start && end - p->hold_start > w->cfg.ttl_ms * 1000)
        w->res->auto_long_holds++;
}

/* From now on no extension may carry this lock's token (checked by the io's send). */
static void bury_token(sim_proc *p)
{
    size_t len;
    const char *token = redlock_lock_token(p->lock, &len);
    p->dead_token_len = REDLOCK__MIN(len, sizeof(p->dead_token));
    memcpy(p->dead_token, token, p->dead_token_len);
}

/* An extension of p's lock still waits for a node's answer. */
static bool extension_in_flight(sim_proc *p)
{
    size_t len;
    const char *token = redlock_lock_token(p->lock, &len);
    for (unsigned i = 0; i < p->w->cfg.n_nodes; i++) {
        for (const sim_pending *q = p->conns[i].link.head; q != NULL; q = q->next) {
            const redlock__cmd *cmd = q->req->cmd;
            if (cmd->kind == REDLOCK__CMD_EXTEND && cmd->token_len == len &&
                memcmp(cmd->token, token, len) == 0)
                return true;
        }
    }
    return false;
}

/* The release's status as the caller reads it: the library's, or with old_release_status the one
 * the library gave before issue 17 (0 whenever a quorum answered, whatever it deleted). */
static int release_status_seen(const sim_world *w, int status, const redlock_result *result)
{
    if (!w->cfg.old_release_status || status == REDLOCK_ECANCELED)
        return status;
    unsigned quorum = result->n_nodes / 2 + 1;
    return result->votes_yes + result->votes_no >= quorum ? 0 : REDLOCK_ENOQUORUM;
}

static void on_released(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    sim_proc *p = data;
    sim_world *w = p->w;
    if (p->vanished)
        return; /* its client's close: the process is gone */
    sim_hash(w, (uint64_t)(int64_t)status);
    sim_trace(w, "p%u released: %s (%u deleted)", p->id, status ? redlock_err_name(status) : "ok",
              result->votes_yes);
    w->res->releases_lapsed += status == REDLOCK_ELOST;
    if (release_status_seen(w, status, result) == 0)
        sim_check_no_gap(w, p, lock, p->granted_at, p->release_at, "released with status 0");
    redlock_lock_free(lock);
    if (p->state == PROC_DONE)
        return; /* released as the client closes: the release was canceled */
    proc_next(p);
}

static void release_lock(sim_proc *p)
{
    sim_world *w = p->w;
    sim_auto_hold *h = p->autoh;
    if (h != NULL) {
        if (h->ended == AUTO_RUNNING)
            h->ended = AUTO_RELEASED;
        if (extension_in_flight(p))
            w->res->release_races++;
    }
    bury_token(p);
    p->state = PROC_RELEASING;
    p->release_at = w->now;
    int rc = redlock_release(p->lock, on_released, p);
    if (rc != 0) {
        sim_contract(w, "release by process %u failed at once: %s", p->id, redlock_err_name(rc));
        redlock_lock_free(p->lock);
        proc_next(p);
    }
}

/* Forget the handle without releasing (the keys live out their ttl). */
static void free_lock(sim_proc *p)
{
    sim_auto_hold *h = p->autoh;
    if (h != NULL && h->ended == AUTO_RUNNING)
        h->ended = AUTO_FREED;
    p->w->res->auto_freed += h != NULL;
    bury_token(p);
    sim_trace(p->w, "p%u frees its lock without releasing it", p->id);
    redlock_lock_free(p->lock);
    proc_next(p);
}

/* ---- auto-extended holds ---------------------------------------------------------------------
 */

/* The holder finds its deadline passed with no extension: it stopped there, and the lost
 * callback is owed. Unless a pause held this event back, the guard (lost_margin before the
 * deadline) must already have fired. */
static void auto_expired(sim_proc *p)
{
    sim_world *w = p->w;
    sim_auto_hold *h = p->autoh;
    end_hold(p);
    h->expired = true;
    sim_trace(w, "p%u: the validity of its auto-extended lock ran out", p->id);
    if (!w->ev_deferred)
        sim_promise(w,
                    "p%u: its auto-extended lock on res-%u ran out of validity at %llu us of its "
                    "clock with no lost callback (true time %llu us)",
                    p->id, p->resource, (unsigned long long)p->deadline_us,
                    (unsigned long long)w->now);
}

/* Whether a lost callback may come for h now, judged only from the record (the lock may be gone
 * if the callback is wrong); a callback that may not is a broken promise. */
static bool lost_may_come(sim_auto_hold *h, redlock_lock *lock, int reason)
{
    sim_proc *p = h->proc;
    sim_world *w = p->w;
    const char *why = redlock_err_name(reason);
    if (++h->lost > 1) {
        sim_promise(w, "p%u: lost callback (%s) fired %u times for one hold", p->id, why, h->lost);
        return false;
    }
    if (!h->started) {
        sim_promise(w, "p%u: lost callback (%s) for a lock it was not handed as auto-extended",
                    p->id, why);
        return false;
    }
    if (h->ended == AUTO_CLOSED) {
        w->res->lost_canceled += reason == REDLOCK_ECANCELED;
        if (reason != REDLOCK_ECANCELED)
            sim_promise(w, "p%u: lost callback said %s at close, not REDLOCK_ECANCELED", p->id,
                        why);
        return false; /* the close goes on; nothing left to do */
    }
    if (h->ended != AUTO_RUNNING) {
        static const char *const how[] = {
            [AUTO_RELEASED] = "released the lock",
            [AUTO_STOPPED] = "stopped auto-extension",
            [AUTO_FREED] = "freed the lock",
        };
        sim_promise(w, "p%u: lost callback (%s) after it %s", p->id, why, how[h->ended]);
        return false;
    }
    if (lock != p->lock) {
        sim_promise(w, "p%u: lost callback with a handle that is not its lock", p->id);
        return false;
    }
    if (reason == REDLOCK_ECANCELED) {
        sim_promise(w, "p%u: lost callback said REDLOCK_ECANCELED with the client open", p->id);
        return false;
    }
    return true;
}

/* The reason agrees with the cap, and the callback came in time. */
static void check_lost(sim_auto_hold *h, redlock_lock *lock, int reason)
{
    sim_proc *p = h->proc;
    sim_world *w = p->w;
    const char *why = redlock_err_name(reason);
    uint64_t now = sim_proc_now(p);
    uint64_t deadline = redlock_lock_deadline_us(lock);
    if (deadline != h->seen_deadline_us) { /* renewed during this very event */
        h->seen_deadline_us = deadline;
        h->renewed_us = now;
    }
    unsigned ext = redlock_lock_extensions(lock), cap = h->opts.max_extensions;
    w->res->lost_limit += reason == REDLOCK_ELIMIT;
    w->res->lost_lost += reason == REDLOCK_ELOST;
    w->res->lost_noquorum += reason == REDLOCK_ENOQUORUM;
    w->res->lost_expired += reason == REDLOCK_EEXPIRED;
    if (reason != REDLOCK_ELIMIT && reason != REDLOCK_ELOST && reason != REDLOCK_ENOQUORUM &&
        reason != REDLOCK_EEXPIRED)
        sim_promise(w, "p%u: lost callback with reason %s", p->id, why);
    /* At the cap, a check after a node's restart may find the lock lost first: ELOST. */
    bool capped = cap != 0 && ext == cap;
    if (cap != 0 && ext > cap)
        sim_promise(w, "p%u: %u extensions won with max_extensions %u", p->id, ext, cap);
    else if (reason == REDLOCK_ELIMIT ? !capped : capped && reason != REDLOCK_ELOST)
        sim_promise(w, "p%u: lost callback said %s after %u extensions (max_extensions %u)", p->id,
                    why, ext, cap);
    /* At the latest lost_margin before the deadline, or at once after a round that left less
     * validity than that; later only if a pause held the process back. */
    uint64_t guard = deadline > h->margin_us ? deadline - h->margin_us : 0;
    uint64_t due = REDLOCK__MAX(guard, h->renewed_us);
    if (!w->ev_deferred && now > due + LOST_SLACK_US)
        sim_promise(w,
                    "p%u: lost callback (%s) at %llu us of its clock, %llu us after deadline %llu "
                    "us - lost_margin %llu us",
                    p->id, why, (unsigned long long)now, (unsigned long long)(now - due),
                    (unsigned long long)deadline, (unsigned long long)h->margin_us);
}

static void on_lost(redlock_lock *lock, int reason, void *data)
{
    sim_auto_hold *h = data;
    sim_proc *p = h->proc;
    if (p->vanished)
        return;
    sim_hash(p->w, (uint64_t)(int64_t)reason);
    sim_trace(p->w, "p%u lost callback: %s", p->id, redlock_err_name(reason));
    p->w->res->lost++;
    if (!lost_may_come(h, lock, reason))
        return;
    p->lost_at = p->w->now;
    p->reported = true;
    check_lost(h, lock, reason);
    /* Stop at once (a deadline already passed ended the work there), and give the lock back or,
     * now and then, just forget it from inside the callback (allowed: the keys expire). */
    refresh_deadline(p);
    end_hold(p);
    if (sim_rng_chance(&p->rng, 0.25))
        free_lock(p);
    else
        release_lock(p);
}

static uint64_t margin_us(const redlock_auto_opts *opts, uint64_t ttl_ms)
{
    /* As the API defines it: lost_margin_ms, or ttl / 10, at least 5 ms. */
    uint64_t margin = opts->lost_margin_ms != 0 ? opts->lost_margin_ms * 1000 : ttl_ms * 100;
    return REDLOCK__MAX(margin, 5000);
}

/* Draw the auto-extension of the next hold, or none. */
static sim_auto_hold *auto_plan(sim_proc *p)
{
    sim_world *w = p->w;
    const sim_config *cfg = &w->cfg;
    if (!sim_rng_chance(&p->rng, cfg->auto_prob))
        return NULL;
    sim_auto_hold *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        w->oom = true;
        return NULL;
    }
    h->next = w->auto_holds;
    w->auto_holds = h;
    h->proc = p;
    h->via_opts = sim_rng_chance(&p->rng, 0.5);
    redlock_auto_opts_init(&h->opts);
    uint64_t margin_max_ms = REDLOCK__MAX(cfg->ttl_ms / 4, 5);
    h->opts.lost_margin_ms =
        sim_rng_chance(&p->rng, 0.5) ? 0 : sim_rng_range(&p->rng, 5, margin_max_ms);
    h->opts.extend_flags = sim_rng_chance(&p->rng, 0.5) ? REDLOCK_EXTEND_RETAKE : 0;
    if (sim_rng_chance(&p->rng, cfg->auto_cap_prob))
        h->opts.max_extensions = (unsigned)sim_rng_range(&p->rng, 1, cfg->auto_cap_max);
    h->margin_us = margin_us(&h->opts, cfg->ttl_ms);
    /* extend_at in [0.2, 0.7], leaving two node timeouts between the extension and the guard
     * (deadline - margin): the library accepts settings that leave none, but every hold would
     * then be reported lost before its first extension. */
    uint64_t ttl_us = cfg->ttl_ms * 1000;
    uint64_t drift_us = (uint64_t)((double)ttl_us * cfg->drift_factor) + REDLOCK_DRIFT_FIXED_US;
    uint64_t room_us =
        ttl_us - REDLOCK__MIN(ttl_us, drift_us + h->margin_us + 2 * cfg->node_timeout_ms * 1000);
    uint64_t at_pct = sim_rng_range(&p->rng, 20, 70);
    h->opts.extend_at = (double)REDLOCK__MIN(at_pct * ttl_us / 100, room_us) / (double)ttl_us;
    if (!(h->opts.extend_at > 0))
        h->opts.extend_at = 0.01;
    return h;
}

/* The acquire callback handed p an auto-extended hold (or one to auto-extend now). */
static void auto_begin(sim_proc *p)
{
    sim_world *w = p->w;
    sim_auto_hold *h = p->autoh;
    uint64_t now = sim_proc_now(p);
    p->deadline_us = redlock_lock_deadline_us(p->lock);
    if (!h->via_opts) {
        int rc = redlock_auto_extend(p->lock, &h->opts, on_lost, h);
        if (rc != 0) {
            /* A pause ate the validity before the callback: a plain hold, never used. */
            if (rc != REDLOCK_EEXPIRED || now < p->deadline_us)
                sim_contract(w, "redlock_auto_extend by process %u failed: %s", p->id,
                             redlock_err_name(rc));
            p->autoh = NULL;
            step_at(p, now, STEP_DONE);
            return;
        }
    }
    h->started = true;
    h->seen_deadline_us = p->deadline_us;
    h->renewed_us = now;
    w->res->auto_holds++;
    sim_trace(w, "p%u auto-extends res-%u (%s, extend_at %.2f, margin %llu us, cap %u%s)", p->id,
              p->resource, h->via_opts ? "acquire option" : "redlock_auto_extend",
              h->opts.extend_at, (unsigned long long)h->margin_us, h->opts.max_extensions,
              h->opts.extend_flags ? ", retake" : "");
    p->using_lock = true;
    p->hold_start = w->now;
    if (now >= p->deadline_us) {
        auto_expired(p);
        return;
    }
    uint64_t ttl_us = w->cfg.ttl_ms * 1000;
    uint64_t hold_max_us = REDLOCK__MAX(w->cfg.auto_hold_max_ms * 1000, ttl_us + 1);
    step_at(p, now + sim_rng_range(&p->rng, ttl_us + 1, hold_max_us), STEP_DONE);
    step_at(p, p->deadline_us, STEP_CHECK);
}

/* The deadline the holder knew has come: keep working up to a renewed one, or stop. */
static void auto_check(sim_proc *p)
{
    if (!p->using_lock || p->autoh->ended == AUTO_STOPPED)
        return;
    refresh_deadline(p);
    if (sim_proc_now(p) < p->deadline_us) {
        step_at(p, p->deadline_us, STEP_CHECK);
        return;
    }
    auto_expired(p);
}

/* The holder's planned end: release; or close the client (on its last cycle); or stop
 * auto-extension and finish its work before the deadline, then release; or free the handle. */
static void auto_done(sim_proc *p)
{
    sim_world *w = p->w;
    sim_auto_hold *h = p->autoh;
    if (h->ended == AUTO_STOPPED) { /* the work after the stop is over */
        end_hold(p);
        release_lock(p);
        return;
    }
    if (!p->using_lock)
        return; /* expired: it waits for the lost callback, which releases */
    refresh_deadline(p);
    uint64_t now = sim_proc_now(p);
    if (now >= p->deadline_us) {
        auto_expired(p);
        return;
    }
    w->res->auto_planned++;
    if (p->cycles_done + 1 >= w->cfg.cycles && sim_rng_chance(&p->rng, w->cfg.auto_close_prob)) {
        /* Close while holding (the lost callback says ECANCELED), or release and close at once
         * (the close cancels the release; no lost callback at all). */
        end_hold(p);
        p->cycles_done = w->cfg.cycles;
        if (sim_rng_chance(&p->rng, 0.5)) {
            release_lock(p);
        } else {
            h->ended = AUTO_CLOSED;
            bury_token(p);
        }
        close_client(p);
        return;
    }
    uint64_t pick = sim_rng_range(&p->rng, 0, 99);
    if (pick < 15) {
        /* Nothing is extended from here on: the work must end by the deadline as it stands. */
        h->ended = AUTO_STOPPED;
        w->res->auto_stopped++;
        bury_token(p);
        redlock_auto_extend_stop(p->lock);
        sim_trace(w, "p%u stops auto-extension", p->id);
        step_at(p, now + sim_rng_range(&p->rng, 0, p->deadline_us - now), STEP_DONE);
        return;
    }
    end_hold(p);
    if (pick < 25)
        free_lock(p);
    else
        release_lock(p);
}

/* A plain hold the library now reads as not held before its deadline: a check after a node's
 * restart found it lost (recheck.c). The holder stops at once and gives it back. */
static void observe_plain(sim_proc *p)
{
    uint64_t now = sim_proc_now(p);
    if (p->state != PROC_HOLDING || !p->using_lock || now >= p->deadline_us ||
        redlock_lock_is_held(p->lock, now))
        return;
    sim_trace(p->w, "p%u: its lock reads as lost", p->id);
    p->reported = true;
    end_hold(p);
    release_lock(p);
}

void sim_proc_observe(sim_proc *p)
{
    sim_auto_hold *h = p->autoh;
    if (h == NULL) {
        observe_plain(p);
        return;
    }
    if (h == NULL || !h->started || h->ended != AUTO_RUNNING || h->lost != 0)
        return;
    uint64_t deadline = redlock_lock_deadline_us(p->lock);
    if (deadline == h->seen_deadline_us)
        return;
    h->seen_deadline_us = deadline;
    h->renewed_us = sim_proc_now(p);
    sim_check_no_gap(p->w, p, p->lock, p->granted_at, p->w->now, "won an auto-extension");
    if (h->expired && deadline > p->deadline_us) {
        /* An extension won after the deadline it replaced: the hold would have a hole. Give the
         * lock back, or the holder would wait for a lost callback while it is kept alive. */
        sim_promise(p->w, "p%u: its lock was renewed after its validity ran out at %llu us", p->id,
                    (unsigned long long)p->deadline_us);
        release_lock(p);
    }
}

void sim_proc_finish(sim_proc *p)
{
    sim_auto_hold *h = p->autoh;
    if (h != NULL && !p->vanished && h->started && h->ended == AUTO_RUNNING && h->lost == 0)
        sim_promise(p->w, "p%u: its auto-extended hold of res-%u %s and no lost callback ever came",
                    p->id, p->resource,
                    h->expired ? "ran out of validity" : "was never released or lost");
}

/* ---- the program ------------------------------------------------------------------------------
 */

static void on_extended(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)result;
    sim_proc *p = data;
    if (p->vanished)
        return;
    sim_hash(p->w, (uint64_t)(int64_t)status);
    sim_trace(p->w, "p%u extend: %s", p->id, status ? redlock_err_name(status) : "ok");
    if (status == 0 && p->lock == lock && p->state == PROC_HOLDING)
        sim_check_no_gap(p->w, p, lock, p->granted_at, p->w->now, "won an extend");
    if (status != 0 || p->lock != lock || p->state != PROC_HOLDING || !p->using_lock)
        return;
    p->w->res->extended++;
    p->deadline_us = redlock_lock_deadline_us(lock);
}

/* Liveness (sim_config.check_liveness): a waiter is served within sim_wait_bound_us of its call,
 * counting the processes that vanished so far. */
static void check_served(sim_proc *p, int status)
{
    sim_world *w = p->w;
    if (!w->cfg.check_liveness || !p->queued)
        return;
    sim_result *res = w->res;
    uint64_t waited = w->now - p->acquire_at;
    sim_config cfg = w->cfg;
    uint64_t bound = sim_wait_bound_us(&cfg, res->vanished);
    res->served += status == 0;
    res->wait_max_us = REDLOCK__MAX(res->wait_max_us, waited);
    unsigned permille = (unsigned)(waited * 1000 / (bound != 0 ? bound : 1));
    res->wait_bound_permille = REDLOCK__MAX(res->wait_bound_permille, permille);
    if ((status == 0 && waited <= bound) || res->starved)
        return;
    res->starved = true;
    snprintf(res->starved_what, sizeof(res->starved_what),
             "p%u's waiter of res-%u called at %llu us was %s after %llu us (the bound: %llu us)",
             p->id, p->resource, (unsigned long long)p->acquire_at,
             status == 0 ? "served" : redlock_err_name(status), (unsigned long long)waited,
             (unsigned long long)bound);
    sim_trace(w, "STARVED: %s", res->starved_what);
}

/* Turns: p's waiter was served. On no node where its keys were taken for it may another live
 * waiter with a smaller place (it began to wait first) have queued before the take: it would
 * have been ahead in that queue, and the key its to take. */
static void check_turn(sim_proc *p, const redlock_lock *lock)
{
    sim_world *w = p->w;
    if (!w->cfg.check_liveness || lock->place == NULL)
        return;
    sim_result *res = w->res;
    res->turn_checks++;
    for (unsigned i = 0; i < w->cfg.n_procs && !res->out_of_turn; i++) {
        const sim_proc *q = &w->procs[i];
        if (q == p || q->vanished || q->state != PROC_ACQUIRING || !q->queued || q->place_us == 0 ||
            q->place_us >= lock->place->cmd.place_us || q->res[0] != p->res[0])
            continue;
        for (unsigned n = 0; n < w->cfg.n_nodes; n++) {
            if (p->took_at[n] == 0 || q->first_queued_at[n] == 0 ||
                q->first_queued_at[n] >= p->took_at[n])
                continue;
            res->out_of_turn = true;
            snprintf(res->out_of_turn_what, sizeof(res->out_of_turn_what),
                     "p%u (place %llu us) took res-%u on n%u at %llu us, where p%u (place %llu us) "
                     "had queued at %llu us",
                     p->id, (unsigned long long)lock->place->cmd.place_us, p->resource, n,
                     (unsigned long long)p->took_at[n], q->id, (unsigned long long)q->place_us,
                     (unsigned long long)q->first_queued_at[n]);
            sim_trace(w, "OUT OF TURN: %s", res->out_of_turn_what);
            break;
        }
    }
}

static void on_acquired(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    sim_proc *p = data;
    sim_world *w = p->w;
    if (p->vanished)
        return; /* its client's close */
    sim_hash(w, (uint64_t)(int64_t)status);
    sim_trace(w, "p%u acquire res-%u%s: %s after %u attempts (yes %u no %u err %u timeout %u)",
              p->id, p->resource, p->n_res > 1 ? " (a set)" : "",
              status ? redlock_err_name(status) : "ok", result->attempts, result->votes_yes,
              result->votes_no, result->votes_error, result->votes_timeout);
    check_served(p, status);
    if (status != 0) {
        proc_next(p);
        return;
    }
    check_turn(p, lock);
    w->res->acquired[p->id]++;
    w->res->multi_holds += p->n_res > 1;
    w->res->fenced_holds += p->fenced;
    p->lock = lock;
    p->lost_at = SIM_NEVER;
    p->reported = false;
    p->granted_at = w->now;
    p->hold_gen++;
    p->state = PROC_HOLDING;
    /* Handed out: at this moment a quorum holds its keys (the no-gap property at the grant). */
    if (sim_proc_now(p) < redlock_lock_deadline_us(lock))
        sim_check_handed_out(w, p, lock);
    sim_fence_granted(p, lock);
    if (p->autoh != NULL) {
        auto_begin(p);
        return;
    }
    p->deadline_us = redlock_lock_deadline_us(lock);
    uint64_t now = sim_proc_now(p);
    uint64_t ttl_us = w->cfg.ttl_ms * 1000;
    if (now >= p->deadline_us) { /* a pause ate the validity: never use it */
        step_at(p, now, STEP_DONE);
        return;
    }
    p->using_lock = true;
    p->hold_start = w->now;
    /* Work for up to 1.5 ttl: often past the deadline, where the holder must stop. */
    step_at(p, now + sim_rng_range(&p->rng, 0, ttl_us * 3 / 2), STEP_DONE);
    if (sim_rng_chance(&p->rng, w->cfg.extend_prob))
        step_at(p, now + sim_rng_range(&p->rng, 0, p->deadline_us - now), STEP_EXTEND);
}

static void send_acquire(sim_proc *p)
{
    sim_world *w = p->w;
    char keys[SIM_MAX_RESOURCES][32];
    const void *names[SIM_MAX_RESOURCES];
    size_t lens[SIM_MAX_RESOURCES];
    for (unsigned i = 0; i < p->n_res; i++) {
        lens[i] = sim_resource_key(w, p->res[i], keys[i], sizeof(keys[i]));
        names[i] = keys[i];
    }
    redlock_lock_opts opts;
    redlock_lock_opts_init(&opts);
    opts.retry_count = w->cfg.retry_count;
    opts.wait_ms = p->queued ? w->cfg.wait_ms : 0;
    opts.fencing = p->fenced;
    opts.fence_commit = p->fenced ? w->cfg.fence_commit : 0;
    if (p->autoh != NULL && p->autoh->via_opts) {
        opts.auto_extend = &p->autoh->opts;
        opts.lost_cb = on_lost;
        opts.lost_data = p->autoh;
    }
    p->state = PROC_ACQUIRING;
    p->acquire_at = w->now;
    p->place_us = 0; /* this acquire's waiter is new: its place and its queues too */
    memset(p->queued_ms, 0, sizeof(p->queued_ms));
    memset(p->first_queued_at, 0, sizeof(p->first_queued_at));
    memset(p->took_at, 0, sizeof(p->took_at));
    int rc = redlock_acquire_multi(p->client, names, lens, p->n_res, w->cfg.ttl_ms, &opts,
                                   on_acquired, p);
    if (rc != 0) {
        sim_contract(w, "acquire by process %u failed at once: %s", p->id, redlock_err_name(rc));
        proc_next(p);
        return;
    }
    uint64_t timeout_us = w->cfg.node_timeout_ms * 1000;
    if (timeout_us > 2000 && sim_rng_chance(&p->rng, w->cfg.round_pause_prob)) {
        uint64_t pause_us = sim_rng_range(&p->rng, 1000, timeout_us - 1000);
        p->paused_until = REDLOCK__MAX(p->paused_until, w->now + pause_us);
        sim_trace(w, "p%u paused for %llu us with its acquire on the wire", p->id,
                  (unsigned long long)pause_us);
    }
}

/* The contender at the worst moment (sim_config.snipe_prob): if p's resource is held, wait
 * until a quorum of the nodes will have let the key go, and send the acquire so that its
 * commands land there just then (a command is never faster than delay_min_us). Returns true if
 * the acquire waits. */
static bool snipe(sim_proc *p)
{
    sim_world *w = p->w;
    if (p->n_res > 1 || !sim_rng_chance(&p->rng, w->cfg.snipe_prob))
        return false;
    char key[32];
    size_t len = sim_resource_key(w, p->resource, key, sizeof(key));
    uint64_t free_at = sim_quorum_free_at(w, key, len);
    uint64_t lead_us = w->cfg.delay_min_us;
    if (free_at == SIM_NEVER || free_at <= w->now + lead_us + 2)
        return false;
    /* 2 us late: a true time maps to the process's clock and back within 1 us. */
    uint64_t send_at = free_at - lead_us + 2;
    w->res->snipes++;
    sim_trace(w, "p%u will acquire res-%u at %llu us, as a quorum lets it go at %llu us", p->id,
              p->resource, (unsigned long long)send_at, (unsigned long long)free_at);
    p->state = PROC_ACQUIRING;
    step_at(p, sim_clock(p->rate_ppm, p->offset_us, send_at) + 1, STEP_SNIPE);
    return true;
}

/* The next hold's resources: one, or with chance set_prob a set of 2..set_max. */
static void pick_resources(sim_proc *p)
{
    const sim_config *cfg = &p->w->cfg;
    p->n_res = 1;
    p->res[0] = (unsigned)sim_rng_range(&p->rng, 0, cfg->n_resources - 1);
    if (cfg->n_resources < 2 || !sim_rng_chance(&p->rng, cfg->set_prob))
        return;
    unsigned max = REDLOCK__MIN(REDLOCK__MAX(cfg->set_max, 2), cfg->n_resources);
    p->n_res = (unsigned)sim_rng_range(&p->rng, 2, max);
    for (unsigned i = 1; i < p->n_res; i++) {
        unsigned r;
        bool taken;
        do { /* a resource not in the set yet */
            r = (unsigned)sim_rng_range(&p->rng, 0, cfg->n_resources - 1);
            taken = false;
            for (unsigned j = 0; j < i; j++)
                taken |= p->res[j] == r;
        } while (taken);
        p->res[i] = r;
    }
}

static void start_acquire(sim_proc *p)
{
    sim_world *w = p->w;
    const sim_config *cfg = &w->cfg;
    pick_resources(p);
    p->resource = p->res[0];
    p->fenced = cfg->fencing || (p->n_res == 1 && sim_rng_chance(&p->rng, cfg->fenced_prob));
    p->queued =
        cfg->wait_ms > 0 && (cfg->wait_prob <= 0 || sim_rng_chance(&p->rng, cfg->wait_prob));
    p->autoh = p->n_res == 1 ? auto_plan(p) : NULL;
    if (!snipe(p))
        send_acquire(p);
}

void sim_proc_step(sim_proc *p, uint64_t arg)
{
    sim_world *w = p->w;
    unsigned step = (unsigned)(arg & 0xff);
    if (step != STEP_ACQUIRE && (arg >> 8) != p->hold_gen)
        return; /* about a hold that is over */
    if (step == STEP_ACQUIRE) {
        if (p->state == PROC_IDLE)
            start_acquire(p);
        return;
    }
    if (step == STEP_SNIPE) {
        if (p->state == PROC_ACQUIRING) /* waiting for its moment (snipe) */
            send_acquire(p);
        return;
    }
    if (p->state != PROC_HOLDING)
        return;
    if (step == SIM_STEP_WRITE) {
        sim_fence_write(p);
        return;
    }
    if (p->autoh != NULL) {
        if (step == STEP_CHECK)
            auto_check(p);
        else if (step == STEP_DONE)
            auto_done(p);
        return;
    }
    if (step == STEP_EXTEND) {
        if (!p->using_lock)
            return;
        unsigned flags = sim_rng_chance(&p->rng, 0.5) ? REDLOCK_EXTEND_RETAKE : 0;
        int rc = redlock_extend(p->lock, 0, flags, on_extended, p);
        if (rc != 0 && rc != REDLOCK_EEXPIRED)
            sim_contract(w, "extend by process %u failed at once: %s", p->id, redlock_err_name(rc));
        return;
    }
    end_hold(p);
    release_lock(p);
}
