/* SPDX-License-Identifier: MIT */
/* checker.h - the torture run's independent checker: it reads what the lock holders logged and
 * decides, without trusting the library, whether mutual exclusion held.
 *
 * Every worker process appends one line per lock attempt to its own log file; the driver loads
 * all of them into one history and reads the counters back from the data server. The checker
 * then asserts:
 *   1. no two holds of one resource overlap, a hold being [acquire_done, min(release, deadline)]
 *      on CLOCK_MONOTONIC microseconds (the redlock_now_us() clock, shared by every process on
 *      the host);
 *   2. every resource's counter equals the number of holds that incremented it;
 *   and it warns (without failing) about a write that finished after its hold's deadline: that
 *   is the gap only a fence closes, hit when a process stalls after its last check.
 *
 * Log lines (text, one per attempt, fields separated by one space):
 *   H resource process thread token acquire_start acquire_done deadline release write_done
 *     incremented release_status
 *   F resource process thread status acquire_start acquire_done
 * A line that does not parse makes the whole history invalid: logs are written with one
 * write(2) per line, so a torn line means something is wrong with the harness itself. */
#ifndef REDLOCK_TEST_TORTURE_CHECKER_H
#define REDLOCK_TEST_TORTURE_CHECKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TORTURE_MAX_RESOURCES 64
#define TORTURE_TOKEN_MAX 64 /* the library's random tokens are 32 hex digits */
#define TORTURE_LINE_MAX 512 /* a formatted line, newline and NUL included, fits in this */

/* One successful acquisition, from the holder's point of view. */
typedef struct torture_hold {
    unsigned resource; /* 0..TORTURE_MAX_RESOURCES-1 */
    unsigned process;  /* which worker process and thread held it (for reports) */
    unsigned thread;
    char token[TORTURE_TOKEN_MAX + 1];
    uint64_t acquire_start_us; /* just before redlock_sync_acquire */
    uint64_t acquire_done_us;  /* just after it returned 0 */
    uint64_t deadline_us;      /* redlock_sync_lock_deadline_us() */
    uint64_t release_us;       /* just before redlock_sync_release: the hold ends here at latest */
    uint64_t write_done_us;    /* when the SET returned; 0 when nothing was written */
    bool incremented;          /* the counter was written (GET, pause, SET value + 1) */
    int release_status;        /* what redlock_sync_release returned */
} torture_hold;

/* A failed acquisition (wait ran out with the resource busy, or no quorum). */
typedef struct torture_failure {
    unsigned resource;
    unsigned process;
    unsigned thread;
    int status;
    uint64_t acquire_start_us;
    uint64_t acquire_done_us;
} torture_failure;

/* All the logs of one run. Zero-initialise it; release with torture_history_free. */
typedef struct torture_history {
    torture_hold *holds;
    size_t n_holds, cap_holds;
    unsigned long failures;          /* failed acquisitions, all statuses */
    unsigned long failures_busy;     /* of which REDLOCK_EBUSY */
    unsigned long failures_noquorum; /* of which REDLOCK_ENOQUORUM */
} torture_history;

/* What torture_check found. */
typedef struct torture_verdict {
    unsigned long holds;
    unsigned long increments;         /* holds that wrote the counter */
    unsigned long skipped;            /* holds that skipped the write: too close to the deadline */
    unsigned long release_failures;   /* holds whose release returned an error */
    unsigned long overlaps;           /* pairs of overlapping holds (violation) */
    unsigned long counter_mismatches; /* resources whose counter is off (violation) */
    unsigned long bad_records;        /* impossible timestamps, resource out of range (violation) */
    unsigned long late_writes;        /* writes that ended after the deadline (warning only) */
    unsigned long at_deadline;        /* holds released at or after their deadline: the
                                         deadline, not the release, ended them */
    unsigned long increments_per_resource[TORTURE_MAX_RESOURCES];
} torture_verdict;

/* Format hold or failure as one log line, newline included, into buf (at least
 * TORTURE_LINE_MAX bytes). Returns the length, or -1 if it does not fit. */
int torture_hold_format(const torture_hold *hold, char *buf, size_t len);
int torture_failure_format(const torture_failure *failure, char *buf, size_t len);

/* Add a hold (copied). Returns 0, or -1 when memory ran out. */
int torture_history_add(torture_history *history, const torture_hold *hold);

/* Parse one log line (with or without its newline) into history. Empty lines are ignored.
 * Returns 0, or -1 for a line that does not parse (or out of memory). */
int torture_history_parse_line(torture_history *history, const char *line);

/* Append every line of the file at path. Returns 0, or -1 after printing the file, line number
 * and reason on diag (if not NULL). */
int torture_history_load(torture_history *history, const char *path, FILE *diag);

void torture_history_free(torture_history *history);

/* Check history against the counters read back from the data server (counters[r] for resource
 * r in 0..n_resources-1). Fills verdict and prints every violation and warning on out (if not
 * NULL), each line starting with "# " so the output can sit inside TAP. Returns the number of
 * violations: overlaps + counter_mismatches + bad_records; 0 means the history is valid. */
unsigned long torture_check(const torture_history *history, const long long *counters,
                            unsigned n_resources, torture_verdict *verdict, FILE *out);

#endif /* REDLOCK_TEST_TORTURE_CHECKER_H */
