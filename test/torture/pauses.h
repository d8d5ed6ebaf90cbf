/* SPDX-License-Identifier: MIT */
/* pauses.h - the torture's worker pauses: whole worker processes stopped for a while and resumed,
 * as a GC pause, a VM stall or SIGSTOP would stop a lock holder. A paused holder's deadline
 * passes while it cannot look: when it resumes its hold has ended at the deadline the library
 * reported, and the checker's overlap rule (a hold ends at min(release, deadline)) then proves
 * that deadline against the next holder's acquire.
 *
 * The driver asks a worker to stop with SIGUSR1; the worker's pause thread stops the process
 * with SIGSTOP (outside its write windows: worker.h), the driver sees it stopped (waitpid
 * WUNTRACED) and sends SIGCONT when the pause is over. One worker is paused at a time. Every
 * choice (which worker, how long, when) comes from the seed with rand_r.
 *
 * Not thread-safe: the driver's main thread runs it, between polls of the workers. */
#ifndef REDLOCK_TEST_TORTURE_PAUSES_H
#define REDLOCK_TEST_TORTURE_PAUSES_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

typedef enum { PAUSE_NONE, PAUSE_ASKED, PAUSE_STOPPED } pause_state;

typedef struct pauses {
    const pid_t *pids; /* the workers' pids (borrowed; 0 once reaped) */
    unsigned n_pids;
    unsigned seed;   /* rand_r state */
    uint64_t ttl_us; /* pauses are drawn around it */
    bool verbose;
    /* The pause under way, if any. */
    pause_state state;
    unsigned worker;
    uint64_t asked_us, stopped_us, length_us;
    uint64_t next_us; /* when the next pause may be asked for */
    /* A worker that exited while it was asked to stop: its status, for the driver's reaping. */
    void (*exited)(void *ctx, pid_t pid, int status);
    void *exited_ctx;
    unsigned long paused, resumed; /* pauses made and ended */
    unsigned long over_ttl;        /* pauses longer than a ttl */
    uint64_t paused_us;            /* their total length */
    unsigned long errors;          /* signals that could not be sent */
} pauses;

/* Set ps up for the n_pids workers in pids (borrowed), the first pause coming a while after
 * now_us. exited is called with the status of a worker that the pauses reaped (waitpid reports
 * an exit too), so the driver can count it. */
void pauses_init(pauses *ps, const pid_t *pids, unsigned n_pids, unsigned seed, uint64_t ttl_ms,
                 uint64_t now_us, bool verbose, void (*exited)(void *ctx, pid_t pid, int status),
                 void *ctx);

/* Poll: resume the paused worker when its pause is over, notice that an asked worker has
 * stopped, and, while now_us < end_us and no pause is under way, ask the next one to stop when
 * its time has come. Call it every few milliseconds. */
void pauses_step(pauses *ps, uint64_t now_us, uint64_t end_us);

/* True while a pause is under way (asked or stopped). */
bool pauses_busy(const pauses *ps);

/* Print the counts as one "# worker pauses: ..." line. */
void pauses_print_summary(const pauses *ps, FILE *out);

#endif /* REDLOCK_TEST_TORTURE_PAUSES_H */
