/* SPDX-License-Identifier: MIT */
/*
 * redlock/sync.h - the blocking API: a redlock_sync owns a loop thread with an async client on
 * it; any thread may call it at once, and each call blocks until its operation completes, with
 * the status the async call would give. Lock handles (redlock_sync_lock) are safe to read from
 * any thread. Every call that takes a redlock_report * accepts NULL. Included by redlock.h;
 * include that. The reference is docs/api.md, "The blocking API".
 */
#ifndef REDLOCK_REDLOCK_SYNC_H
#define REDLOCK_REDLOCK_SYNC_H

#ifndef REDLOCK_H
#error "include <redlock.h>, not <redlock/sync.h>"
#endif

typedef struct redlock_sync redlock_sync;
typedef struct redlock_sync_lock redlock_sync_lock;

#define REDLOCK_MESSAGE_MAX 256 /* redlock_report.message, NUL included */

/* An owned, deep copy of a redlock_result (about 30 KB), set up by redlock_report_init; the
 * library fills only the `size` bytes the caller has. */
typedef struct redlock_report {
    size_t size; /* set by redlock_report_init; do not change */
    int status;
    unsigned n_nodes;
    unsigned votes_yes, votes_no, votes_error, votes_timeout;
    unsigned attempts;
    uint64_t elapsed_us;
    /* Why the call failed before any round ran (redlock_client_last_error's text); "" after one. */
    char message[REDLOCK_MESSAGE_MAX];
    /* url points to the client's copy, error into errors[], value into values[]. */
    redlock_node_result nodes[REDLOCK_MAX_NODES];
    char errors[REDLOCK_MAX_NODES][REDLOCK_ERROR_TEXT_MAX];
    char values[REDLOCK_MAX_NODES][REDLOCK_TOKEN_MAX + 1];
    uint64_t fence; /* as redlock_result.fence */
    /* New members are appended here (docs/api.md, "ABI policy"). */
} redlock_report;

/* Set report up as empty and record its size (a macro). */
REDLOCK_EXTERN void redlock_report_init_sized(redlock_report *report, size_t size);
#define redlock_report_init(report) redlock_report_init_sized((report), sizeof(redlock_report))
/* Copy result deeply into report (from any async callback too). */
REDLOCK_EXTERN int redlock_report_copy(redlock_report *report, const redlock_result *result);

/* Start the loop thread and a client on it (arguments as redlock_client_new). */
REDLOCK_EXTERN int redlock_sync_new(const char *const *node_urls, unsigned n_nodes,
                                    const redlock_options *opts, redlock_sync **sync_out, char *err,
                                    size_t err_len);
/* Close as redlock_client_close does, join the thread, free everything (every handle too). Only
 * once no other thread will call; never from a lost callback. NULL is allowed. */
REDLOCK_EXTERN void redlock_sync_free(redlock_sync *sync);
/* redlock_sync_free with flags: 0 or REDLOCK_CLOSE_FAST. */
REDLOCK_EXTERN void redlock_sync_free_ex(redlock_sync *sync, unsigned flags);
/* Make the blocking call that was given report (on another thread) return REDLOCK_ECANCELED. */
REDLOCK_EXTERN int redlock_sync_cancel(redlock_sync *sync, const redlock_report *report);

/* As redlock_acquire, blocking; *lock_out set on success. With auto_extend, a loss shows in
 * redlock_sync_lock_lost and redlock_sync_lock_fd; an optional lost callback runs on the
 * library's thread with the inner async handle (redlock_lock_get_data: the redlock_sync_lock). */
REDLOCK_EXTERN int redlock_sync_acquire(redlock_sync *sync, const void *resource, size_t len,
                                        uint64_t ttl_ms, const redlock_lock_opts *opts,
                                        redlock_sync_lock **lock_out, redlock_report *report);
/* As redlock_acquire_multi, blocking; the handle covers the set. */
REDLOCK_EXTERN int redlock_sync_acquire_multi(redlock_sync *sync, const void *const *resources,
                                              const size_t *lens, unsigned count, uint64_t ttl_ms,
                                              const redlock_lock_opts *opts,
                                              redlock_sync_lock **lock_out, redlock_report *report);
/* As redlock_extend, blocking. */
REDLOCK_EXTERN int redlock_sync_extend(redlock_sync_lock *lock, uint64_t ttl_ms, unsigned flags,
                                       redlock_report *report);
/* As redlock_release, blocking; returns the release's status (0, REDLOCK_ELOST, ...). */
REDLOCK_EXTERN int redlock_sync_release(redlock_sync_lock *lock, redlock_report *report);
/* Free the handle without releasing anything (stops auto-extension). NULL is allowed. */
REDLOCK_EXTERN void redlock_sync_lock_free(redlock_sync_lock *lock);
/* As redlock_lock_attach: a handle for a lock taken elsewhere, without network traffic. */
REDLOCK_EXTERN int redlock_sync_attach(redlock_sync *sync, const void *resource, size_t len,
                                       const void *token, size_t token_len, uint64_t ttl_ms,
                                       redlock_sync_lock **lock_out);
/* As redlock_inspect, blocking: each node's value and PTTL land in report. */
REDLOCK_EXTERN int redlock_sync_inspect(redlock_sync *sync, const void *resource, size_t len,
                                        redlock_report *report);
/* As redlock_inspect_multi, blocking. */
REDLOCK_EXTERN int redlock_sync_inspect_multi(redlock_sync *sync, const void *const *resources,
                                              const size_t *lens, unsigned count,
                                              redlock_report *report);
/* redlock_client_node_info and redlock_client_stats of the inner client, from any thread. */
REDLOCK_EXTERN int redlock_sync_node_info(redlock_sync *sync, unsigned i, redlock_node_info *info);
REDLOCK_EXTERN int redlock_sync_stats(redlock_sync *sync, redlock_stats *stats);
/* Copy into out (cut to out_len, NUL included) the text of the last call on sync that failed,
 * from any thread (as redlock_client_last_error: each failed node and why), for a caller who
 * passed no report; returns its length ("": none yet; 0 when out is NULL). */
REDLOCK_EXTERN size_t redlock_sync_last_error(redlock_sync *sync, char *out, size_t out_len);

/* Thread-safe reads of a handle, as their redlock_lock_* counterparts (NULL reads as empty). */
REDLOCK_EXTERN const void *redlock_sync_lock_resource(const redlock_sync_lock *lock, size_t *len);
REDLOCK_EXTERN unsigned redlock_sync_lock_resource_count(const redlock_sync_lock *lock);
REDLOCK_EXTERN const void *redlock_sync_lock_resource_at(const redlock_sync_lock *lock, unsigned i,
                                                         size_t *len);
REDLOCK_EXTERN const char *redlock_sync_lock_token(const redlock_sync_lock *lock, size_t *len);
REDLOCK_EXTERN uint64_t redlock_sync_lock_validity_ms(const redlock_sync_lock *lock);
REDLOCK_EXTERN uint64_t redlock_sync_lock_deadline_us(const redlock_sync_lock *lock);
REDLOCK_EXTERN uint64_t redlock_sync_lock_fence(const redlock_sync_lock *lock);
/* 0 while held; else why not: the lost reason, REDLOCK_ERELEASED, REDLOCK_EEXPIRED, ... */
REDLOCK_EXTERN int redlock_sync_lock_status(const redlock_sync_lock *lock);
/* Whether the lock was lost (an atomic read: no clock, no lock, no system call). */
REDLOCK_EXTERN bool redlock_sync_lock_lost(const redlock_sync_lock *lock);
/* A descriptor that becomes readable once the lock is lost; the handle owns it (-1: error). */
REDLOCK_EXTERN int redlock_sync_lock_fd(redlock_sync_lock *lock);

/* The work of redlock_sync_with: it runs on the calling thread, holding lock. */
typedef void (*redlock_sync_fn)(redlock_sync_lock *lock, void *data);
/* Acquire, run fn holding the lock (auto-extended), release; returns the status of *end. */
REDLOCK_EXTERN int redlock_sync_with(redlock_sync *sync, const void *resource, size_t len,
                                     uint64_t ttl_ms, const redlock_lock_opts *opts,
                                     redlock_sync_fn fn, void *data, redlock_hold_end *end,
                                     redlock_report *report);

#endif /* REDLOCK_REDLOCK_SYNC_H */
