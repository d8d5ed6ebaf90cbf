/* SPDX-License-Identifier: MIT */
/* proc.h - run the redlock tool as a child process and collect what it says.
 *
 * The tool's stdout and stderr go to pipes read while it runs; stdin is /dev/null. Output is
 * collected until the tool itself exits, not until the pipes close (a grandchild such as an
 * orphaned `sleep` may hold them open). The child dies with the test (PR_SET_PDEATHSIG). */
#ifndef REDLOCK_TEST_PROC_H
#define REDLOCK_TEST_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct proc {
    pid_t pid;
    int out_fd, err_fd;
    char *out, *err; /* everything read so far, NUL-terminated */
    size_t out_len, err_len;
    bool exited;
    int status;      /* exit code, or 128 + signal; -1 while running */
    int term_signal; /* the signal it died of; 0 if it exited (with status 128 + N, say) */
} proc;

/* Start program with argv (NULL-terminated; argv[0] is passed as is). env: "NAME=VALUE" entries
 * to set, or "NAME" alone to unset, applied to a copy of the test's environment (NULL: none).
 * Aborts the test process on failure to fork. */
void proc_start(proc *p, const char *program, const char *const *argv, const char *const *env);
/* Read output and reap for up to timeout_ms. Returns true once the process has exited. */
bool proc_wait(proc *p, int timeout_ms);
/* Read output for up to timeout_ms or until needle appears in stdout (from_stderr false) or
 * stderr. Returns true if it appeared. */
bool proc_wait_for_output(proc *p, const char *needle, bool from_stderr, int timeout_ms);
/* Send sig to the process (only if it still runs). */
void proc_signal(proc *p, int sig);
/* Kill (SIGKILL) if still running, reap, close the pipes, free the output. */
void proc_free(proc *p);

/* Count the lines of text (a last line without "\n" counts too). */
unsigned text_lines(const char *text);

#endif /* REDLOCK_TEST_PROC_H */
