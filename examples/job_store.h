/* SPDX-License-Identifier: MIT */
/* job_store.h - the store the job runners write to (job_runner_async.c, job_runner_sync.c): a
 * plain Redis server that keeps, under NAME (the lock's resource name):
 *
 *   NAME:done        the number of the last job done (0: none)
 *   NAME:last-fence  the largest fence it accepted
 *   NAME:log         one entry per job done, in the store's order: "JOB FENCE"
 *
 * A runner reads the next job's number when its hold begins and commits the job with its fence
 * when the work is over. The commit is a compare-and-set on the fence, one Lua script: a fence
 * below the last accepted one is refused (its holder was paused past its lock, and a newer holder
 * wrote meanwhile), as in examples/fenced_store.c and docs/safety.md, "Fences".
 *
 * The calls block (hiredis, 5 s timeouts): one round trip each. */
#ifndef JOB_STORE_H
#define JOB_STORE_H

#include <stddef.h>
#include <stdint.h>

/* job_store_commit's refusal: a newer holder's fence was accepted first. */
#define JOB_STORE_STALE 1

typedef struct job_store job_store;

/* Connect to the store's URL (redis://[:password@]host:port[/db] or unix://path) for the jobs of
 * name (copied). Returns NULL after printing why on stderr. */
job_store *job_store_open(const char *url, const char *name);
/* Close the connection and free the store; NULL is allowed. */
void job_store_close(job_store *store);
/* The next job to do: the last one done, plus 1. Returns 0, or -1 after printing why. */
int job_store_next(job_store *store, uint64_t *job);
/* Record job as done by the holder of fence. Returns 0 (recorded), JOB_STORE_STALE with the
 * store's reason in why (nothing recorded), or -1 after printing why on stderr. */
int job_store_commit(job_store *store, uint64_t job, uint64_t fence, char *why, size_t why_len);

#endif /* JOB_STORE_H */
