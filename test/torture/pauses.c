/* SPDX-License-Identifier: MIT */
/* pauses.c - see pauses.h. */
#include "pauses.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#define GAP_MIN_MS 1000 /* between the end of a pause and the next: uniform in [min, max] */
#define GAP_MAX_MS 4000
#define SHORT_MIN_MS 10 /* a fifth of the pauses are short: uniform in [min, max] */
#define SHORT_MAX_MS 100
/* The others last 0.3 to 1.5 ttl: many outlast the validity of the holds they stop. */
#define LONG_MIN_TTL_PCT 30
#define LONG_MAX_TTL_PCT 150

static uint64_t draw_ms(pauses *ps, unsigned min_ms, unsigned max_ms)
{
    return (uint64_t)(min_ms + (unsigned)rand_r(&ps->seed) % (max_ms - min_ms + 1));
}

static uint64_t draw_gap_us(pauses *ps)
{
    return draw_ms(ps, GAP_MIN_MS, GAP_MAX_MS) * 1000;
}

void pauses_init(pauses *ps, const pid_t *pids, unsigned n_pids, unsigned seed, uint64_t ttl_ms,
                 uint64_t now_us, bool verbose, void (*exited)(void *ctx, pid_t pid, int status),
                 void *ctx)
{
    *ps = (pauses){.pids = pids,
                   .n_pids = n_pids,
                   .seed = seed ^ 0x9a05e5u, /* a stream of its own, apart from the chaos' */
                   .ttl_us = ttl_ms * 1000,
                   .verbose = verbose,
                   .exited = exited,
                   .exited_ctx = ctx};
    ps->next_us = now_us + draw_gap_us(ps);
}

bool pauses_busy(const pauses *ps)
{
    return ps->state != PAUSE_NONE;
}

static void say(const pauses *ps, const char *what, uint64_t now_us)
{
    if (ps->verbose)
        fprintf(stderr, "pauses %.3f: %s worker %u (pid %d)\n", (double)now_us / 1e6, what,
                ps->worker, (int)ps->pids[ps->worker]);
}

/* Has the asked worker stopped (or gone)? */
static void poll_asked(pauses *ps, uint64_t now_us)
{
    pid_t pid = ps->pids[ps->worker];
    int status = 0;
    pid_t got = pid != 0 ? waitpid(pid, &status, WNOHANG | WUNTRACED) : -1;
    if (got == 0)
        return; /* not yet: it waits for a write to end, or the scheduler */
    if (got == pid && WIFSTOPPED(status)) {
        ps->state = PAUSE_STOPPED;
        ps->stopped_us = now_us;
        ps->paused++;
        say(ps, "stopped", now_us);
        return;
    }
    /* It exited before it stopped (its pause thread was gone: the run is over), or the driver
     * reaped it already. */
    if (got == pid && ps->exited != NULL)
        ps->exited(ps->exited_ctx, pid, status);
    ps->state = PAUSE_NONE;
    ps->next_us = now_us + draw_gap_us(ps);
}

static void resume(pauses *ps, uint64_t now_us)
{
    pid_t pid = ps->pids[ps->worker];
    if (pid != 0 && kill(pid, SIGCONT) != 0 && errno != ESRCH)
        ps->errors++;
    ps->resumed++;
    uint64_t length_us = now_us - ps->stopped_us;
    ps->paused_us += length_us;
    ps->over_ttl += length_us > ps->ttl_us;
    say(ps, "resumed", now_us);
    ps->state = PAUSE_NONE;
    ps->next_us = now_us + draw_gap_us(ps);
}

static void ask(pauses *ps, uint64_t now_us)
{
    unsigned start = (unsigned)rand_r(&ps->seed) % ps->n_pids;
    bool is_short = rand_r(&ps->seed) % 5 == 0;
    uint64_t ttl_ms = ps->ttl_us / 1000;
    uint64_t length_ms = is_short ? draw_ms(ps, SHORT_MIN_MS, SHORT_MAX_MS)
                                  : draw_ms(ps, (unsigned)(ttl_ms * LONG_MIN_TTL_PCT / 100),
                                            (unsigned)(ttl_ms * LONG_MAX_TTL_PCT / 100));
    for (unsigned k = 0; k < ps->n_pids; k++) {
        unsigned i = (start + k) % ps->n_pids;
        if (ps->pids[i] == 0)
            continue;
        ps->worker = i;
        if (kill(ps->pids[i], SIGUSR1) != 0) {
            ps->errors += errno != ESRCH;
            continue;
        }
        ps->state = PAUSE_ASKED;
        ps->asked_us = now_us;
        ps->length_us = length_ms * 1000;
        say(ps, "asked to stop", now_us);
        return;
    }
    ps->next_us = now_us + draw_gap_us(ps); /* no worker left */
}

void pauses_step(pauses *ps, uint64_t now_us, uint64_t end_us)
{
    switch (ps->state) {
    case PAUSE_ASKED:
        poll_asked(ps, now_us);
        break;
    case PAUSE_STOPPED:
        if (now_us >= ps->stopped_us + ps->length_us)
            resume(ps, now_us);
        break;
    case PAUSE_NONE:
        if (now_us >= ps->next_us && now_us < end_us)
            ask(ps, now_us);
        break;
    }
}

void pauses_print_summary(const pauses *ps, FILE *out)
{
    fprintf(out,
            "# worker pauses: %lu (%lu longer than a ttl, %.1f s in all), %lu resumed, %lu "
            "signal errors\n",
            ps->paused, ps->over_ttl, (double)ps->paused_us / 1e6, ps->resumed, ps->errors);
}
