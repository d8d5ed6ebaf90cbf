/* SPDX-License-Identifier: MIT */
/* tool.h - the state of one redlock tool invocation, shared by its parts:
 *
 *   redlock.c   main, the client, signals, acquire/release/extend/status
 *   run.c       the run command: the child process, signal forwarding, the lost lock
 *   close.c     the end: exit statuses, the client's close, run's release again, the handles
 *   progress.c  --wait: a line on stderr now and then on what the nodes say while it waits
 *   report.c    JSON results on stdout and human messages on stderr
 *   args.c      the command line (pure)
 *   json.c      the JSON writer (pure)
 *
 * Everything runs on one uv loop in one thread. The client is always the last thing closed: its
 * close callback closes the tool's own handles, and then uv_run returns. */
#ifndef REDLOCK_TOOL_H
#define REDLOCK_TOOL_H

#define _POSIX_C_SOURCE 200809L /* before any include: uv.h needs POSIX types under -std=c11 */

#include <stdbool.h>
#include <stdint.h>

#include <redlock.h>
#include <uv.h>

#include "args.h"
#include "json.h"

#define TOOL_TOKEN_BYTES 16 /* 128 random bits, printed as 32 hex digits */
/* Every catchable signal whose default action ends the process (SIGHUP, SIGINT, SIGQUIT,
 * SIGTERM, SIGUSR1, SIGUSR2, SIGALRM), and SIGWINCH and SIGCONT, which run forwards too. */
#define TOOL_N_SIGNALS 9

typedef enum {
    PHASE_STARTING,  /* before the first operation */
    PHASE_ACQUIRING, /* acquire or run: waiting for the lock (a signal gives up) */
    PHASE_ONESHOT,   /* release, extend, status: one round (a signal gives up) */
    PHASE_CHILD,     /* run: COMMAND is running (signals are forwarded to it) */
    PHASE_RELEASING, /* run: COMMAND exited, the release round is out */
    PHASE_CLEANUP,   /* run: its release again, for the nodes that were down */
    PHASE_DRAINING,  /* acquire, extend won: waiting for the slower nodes before closing */
    PHASE_DONE       /* the client is closing or closed */
} tool_phase;

typedef struct tool {
    cli_args args;
    uv_loop_t loop;
    redlock_options opts;
    redlock_client *client;
    bool client_closing;
    tool_phase phase;
    int exit_code;
    bool output_failed; /* stdout could not be written */

    uv_signal_t signals[TOOL_N_SIGNALS];
    unsigned n_signals;  /* initialized signal handles */
    int interrupted;     /* the signal that made the tool give up (0: none) */
    bool cleanup_needed; /* run's release found a node down: release again (close.c) */
    /* The tool ends by dying of this signal (after cleaning up) when its exit status is still
     * 128 + it: a shell loop around it then stops on Ctrl-C, as it does around flock(1). */
    int die_signal;
    unsigned received; /* run: bit N set once signal N was forwarded to COMMAND */
    /* run: a signal that came once COMMAND had exited; the tool dies of it after the release */
    int release_signal;
    /* acquire and run: the won lock's token (each attempt of the library's has its own) */
    char token[REDLOCK_TOKEN_MAX + 1];
    unsigned attempts;     /* the acquire's rounds (redlock_result.attempts) */
    bool attempt_inflight; /* the acquire call is out (its keys may be on the nodes) */

    /* --wait: progress.c's line on what the nodes say while the acquire waits */
    struct tool_progress {
        uv_timer_t timer;
        bool timer_init;
        bool inspecting;      /* its read round is out (at most one) */
        uint64_t started_ms;  /* uv_now when the wait began */
        uint64_t interval_ms; /* until the next line */
    } progress;

    /* run */
    redlock_lock *lock;
    uv_process_t child;
    bool child_running;
    uv_timer_t grace_timer;
    bool grace_timer_init;
    bool lost;
    bool command_ran;   /* COMMAND was started */
    int command_status; /* its exit status (128+N for signal N), once it exited */
} tool;

/* ---- close.c ---- */

/* Close the client (once); its close callback finishes the tool (run's release again first, when
 * t->cleanup_needed). */
void tool_close_client(tool *t);
/* The exit status for an operation's status code. */
int tool_exit_for(int status);
/* The tool ends with no client open (none was made, or it is closed): every handle of the tool
 * is closed, so that the loop ends. */
void tool_finish(tool *t);

/* ---- run.c ---- */

/* The lock is held (auto-extended, lost callback run_on_lost): start COMMAND. */
void run_start(tool *t, redlock_lock *lock);
/* A signal came while COMMAND runs: forward it. */
void run_forward_signal(tool *t, int signum);
/* The lost callback of run's auto-extension. */
void run_on_lost(redlock_lock *lock, int reason, void *data);

/* Die of signum after the release, unless the lock was lost (t->exit_code EXIT_LOST). */
void run_die_after_release(tool *t, int signum);

/* ---- progress.c ---- */

/* The acquire of --wait is out: print a line now and then until progress_stop (not with -q). */
void progress_start(tool *t);
/* The wait is over: no more lines (the read round still out ends with the client). */
void progress_stop(tool *t);

/* ---- check.c ---- */

/* "redlock check [PREFIX]": check every node and print the verdict; TLS nodes with tls_opts'
 * tls_* settings (tool_tls_options). Returns the exit status. */
int check_main(const cli_args *args, const redlock_options *tls_opts);

/* ---- tls.c ---- */

/* Fill t->opts' TLS fields from the --tls-* options, else $REDLOCK_TLS_CA, $REDLOCK_TLS_CA_DIR,
 * $REDLOCK_TLS_CERT, $REDLOCK_TLS_KEY. A file given that exists but is not a regular file (a
 * FIFO would block the open) is refused: returns -1 with err set, else 0. */
int tool_tls_options(tool *t, char *err, size_t err_len);
/* 0 if path names no file at all or a regular file (opening it cannot block); else -1 with err
 * "WHAT PATH: not a regular file (a FIFO)". */
int tool_regular_file(const char *what, const char *path, char *err, size_t err_len);
/* Rewrite the library's option names in msg (tls_ca_file: ...) as the tool's (--tls-ca: ...). */
void tool_tls_message(char *msg, size_t len);

/* ---- report.c ---- */

/* A human message on stderr, "redlock: " + text + "\n": tool_say for progress and outcomes
 * (silenced by --quiet), tool_warn for what went wrong (a lost lock, failing nodes, a failed
 * release): --quiet means "nothing unless something is wrong". A busy lock is not wrong. */
#if defined(__GNUC__)
#define TOOL_PRINTF __attribute__((format(printf, 2, 3)))
#else
#define TOOL_PRINTF
#endif
TOOL_PRINTF void tool_say(const tool *t, const char *fmt, ...);
TOOL_PRINTF void tool_warn(const tool *t, const char *fmt, ...);
/* bytes made safe for a terminal: printable ASCII as is, the rest as \xHH; long texts are cut
 * with "...". Returns out. */
char *tool_printable(const void *bytes, size_t len, char *out, size_t out_len);
/* "SIGTERM", or "signal 42". Returns a static string or buf. */
const char *tool_signal_name(int signum, char *buf, size_t buf_len);
/* Per-node lines on stderr ("redlock:   URL: TEXT"), as tool_warn or tool_say: what each node
 * said, once, and the nodes the round did not wait for on one line. */
void tool_say_nodes(const tool *t, const redlock_result *result, bool warn);

/* The JSON line of an acquire, release or extend (see docs/cli.md); lock may be NULL, and so
 * may result (an acquire interrupted between attempts: no nodes to show). */
void report_lock_result(tool *t, redlock_lock *lock, int status, const redlock_result *result);
/* The JSON line of run --json, at its end: lock is the held lock (NULL if it was never taken),
 * status the last operation's (the acquire's if it failed, else the release's), result its
 * outcome (NULL if the release could not even start). */
void report_run_result(tool *t, redlock_lock *lock, int status, const redlock_result *result);
/* "deleted on Y of N nodes", plus "; K had not answered yet" when the release was decided
 * before every node answered (the release still reaches them). Returns buf. */
const char *tool_deleted_on(const redlock_result *result, char *buf, size_t len);
/* A node of an inspect holds application data under the lock's key: a string without a ttl, or
 * a value of another type (the node's WRONGTYPE error). */
bool tool_app_data(const redlock_node_result *n);
/* If nodes of result hold application data (tool_app_data), say so with the fix (tool_warn).
 * Returns how many do. */
unsigned tool_warn_app_data(const tool *t, const redlock_result *result);
/* The JSON line of status (redlock_inspect's result). */
void report_status(tool *t, int status, const redlock_result *result);

#endif /* REDLOCK_TOOL_H */
