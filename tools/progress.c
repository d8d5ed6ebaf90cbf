/* SPDX-License-Identifier: MIT */
/* progress.c - --wait: while the acquire waits in the resource's queue, a line on stderr now and
 * then (after 2 s, then at doubling intervals up to 30 s; never with --quiet) on what the nodes
 * say about the key: held by another, free, down (no answer or an error, with the first one's
 * text), or application data under the lock's name. The nodes' own word comes from a read round
 * (redlock_inspect: it changes nothing, and at most one is out), the attempts so far from the
 * client's counters. */
#include "tool.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define PROGRESS_FIRST_MS 2000
#define PROGRESS_MAX_MS 30000

static tool *tool_of(struct tool_progress *p)
{
    return (tool *)(void *)((char *)p - offsetof(tool, progress));
}

/* Append ", " (unless first) and the formatted part to line. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void
part(char *line, size_t len, const char *fmt, ...);

static void part(char *line, size_t len, const char *fmt, ...)
{
    size_t o = strlen(line);
    if (o > 0 && o + 2 < len) {
        memcpy(line + o, ", ", 3);
        o += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + o, len - o, fmt, ap);
    va_end(ap);
}

static void say_progress(tool *t, const redlock_result *result)
{
    unsigned held = 0, free_ = 0, down = 0, app = 0;
    const redlock_node_result *first_down = NULL;
    for (unsigned i = 0; i < result->n_nodes; i++) {
        const redlock_node_result *n = &result->nodes[i];
        if (tool_app_data(n)) {
            app++;
        } else if (n->vote != REDLOCK_VOTE_YES && n->vote != REDLOCK_VOTE_NO) {
            if (down++ == 0)
                first_down = n;
        } else if (n->value != NULL) {
            held++;
        } else {
            free_++;
        }
    }
    char parts[600] = "";
    if (held > 0)
        part(parts, sizeof(parts), "%u busy (held by another)", held);
    if (down > 0)
        part(parts, sizeof(parts), "%u down (%s: %s)", down, first_down->url,
             first_down->error != NULL ? first_down->error : "no answer in time");
    if (app > 0)
        part(parts, sizeof(parts), "%u hold application data, not a lock (see --prefix)", app);
    if (free_ > 0)
        part(parts, sizeof(parts), "%u free", free_);
    redlock_stats stats;
    redlock_stats_init(&stats);
    redlock_client_stats(t->client, &stats);
    unsigned long long attempts = stats.rounds_busy + stats.rounds_broken + stats.rounds_expired;
    char key[160], waited[32], limit[32];
    tool_printable(t->args.key, t->args.key_len, key, sizeof(key));
    uint64_t waited_ms = uv_now(&t->loop) - t->progress.started_ms;
    cli_format_duration(waited_ms - waited_ms % 1000, waited, sizeof(waited));
    cli_format_duration(t->args.wait_ms, limit, sizeof(limit));
    tool_say(t, "waiting for %s (%s of %s, %llu attempt%s so far); of %u nodes: %s", key, waited,
             limit, attempts, attempts == 1 ? "" : "s", result->n_nodes, parts);
}

static void on_inspected(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)lock;
    (void)status; /* even without a quorum of answers, what the nodes said is the news */
    struct tool_progress *p = data;
    tool *t = tool_of(p);
    p->inspecting = false;
    if (status == REDLOCK_ECANCELED || t->phase != PHASE_ACQUIRING || !t->attempt_inflight ||
        t->interrupted != 0 || t->client_closing)
        return;
    say_progress(t, result);
}

static void on_timer(uv_timer_t *timer)
{
    struct tool_progress *p = timer->data;
    tool *t = tool_of(p);
    if (t->phase != PHASE_ACQUIRING || !t->attempt_inflight || t->client_closing)
        return;
    if (!p->inspecting &&
        redlock_inspect(t->client, t->args.key, t->args.key_len, on_inspected, p) == 0)
        p->inspecting = true;
    p->interval_ms = p->interval_ms * 2 < PROGRESS_MAX_MS ? p->interval_ms * 2 : PROGRESS_MAX_MS;
    uv_timer_start(&p->timer, on_timer, p->interval_ms, 0);
}

void progress_start(tool *t)
{
    struct tool_progress *p = &t->progress;
    if (t->args.quiet)
        return;
    if (!p->timer_init) {
        if (uv_timer_init(&t->loop, &p->timer) != 0)
            return; /* no progress lines: the wait itself goes on */
        p->timer.data = p;
        p->timer_init = true;
    }
    p->started_ms = uv_now(&t->loop);
    p->interval_ms = PROGRESS_FIRST_MS;
    uv_timer_start(&p->timer, on_timer, p->interval_ms, 0);
}

void progress_stop(tool *t)
{
    if (t->progress.timer_init)
        uv_timer_stop(&t->progress.timer);
}
