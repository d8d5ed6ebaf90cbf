/* SPDX-License-Identifier: MIT */
/* fence_check.h - fences in the torture (issue 12): every lock is taken with a fence,
 * every counter write goes through a store that refuses a fence below the last one it accepted,
 * and each hold logs its fence and what the store did with its write, one "X" line per hold in
 * its own file (worker-P.fence.log, beside the checker's log). After the run the checker
 * verifies, without trusting the library:
 *   1. the fences of successive holds of a resource (in the order they were granted) strictly
 *      increase, except across a moment a lock node lost its data (a kill, or the negative
 *      control's wipe): fence_commit is the quorum, which covers no node that forgets;
 *   2. the store accepted no stale write: in the order the store applied them, the accepted
 *      writes of a resource come from holds granted in order (a write of an older hold after a
 *      newer hold's write is a stale write, and must have been refused).
 *
 * Log line: X resource process thread fence acquire_start acquire_done write_start outcome seq
 *   outcome: a (accepted; seq is the store's order of applied writes), r (refused), n (none). */
#ifndef REDLOCK_TEST_TORTURE_FENCE_CHECK_H
#define REDLOCK_TEST_TORTURE_FENCE_CHECK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <hiredis/hiredis.h>

/* ---- in the worker processes ---- */

/* Open (append) log_dir/worker-P.fence.log for this process; 0 or -1. */
int torture_fence_open(const char *log_dir, unsigned process);
void torture_fence_close(void);

/* Write value as resource's counter through the fenced store (an EVAL on the data server).
 * Returns 0 with *accepted and *seq set (seq: the store's order of applied writes), or -1 after
 * printing why on stderr (the data server failed). */
int torture_fence_set(redisContext *data, unsigned resource, long long value, uint64_t fence,
                      bool *accepted, uint64_t *seq);

/* One hold's line: outcome 'a', 'r' or 'n' (no write). Thread-safe (one write(2) per line).
 * Returns 0 or -1. */
int torture_fence_log(unsigned resource, unsigned process, unsigned thread, uint64_t fence,
                      uint64_t acquire_start_us, uint64_t acquire_done_us, uint64_t write_start_us,
                      char outcome, uint64_t seq);

/* ---- in the driver ---- */

typedef struct torture_fence_verdict {
    unsigned long holds;         /* X lines read */
    unsigned long order_checks;  /* successive pairs of holds of a resource */
    unsigned long order_broken;  /* ... whose fence did not increase, no node having forgotten */
    unsigned long order_excused; /* ... that did not, across a node losing its data */
    unsigned long accepted, refused;
    unsigned long stale_accepted; /* accepted writes of an older hold after a newer one's */
    unsigned long bad_records;    /* lines that do not parse, fences of 0 */
} torture_fence_verdict;

/* Read the fence logs of processes 0..procs-1 in log_dir and check them. forgot_us: the moments
 * (redlock_now_us clock) at which a lock node lost its data; any_time_forgot: too many to list,
 * every pair is then across one. Prints every violation on out ("# " lines). Returns the number
 * of violations (order_broken + stale_accepted + bad_records). */
unsigned long torture_fence_check(const char *log_dir, unsigned procs, const uint64_t *forgot_us,
                                  unsigned n_forgot, bool any_time_forgot, torture_fence_verdict *v,
                                  FILE *out);

/* Remove the fence logs. */
void torture_fence_remove_logs(const char *log_dir, unsigned procs);

#endif
