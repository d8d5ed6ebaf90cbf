/* SPDX-License-Identifier: MIT */
/*
 * redlock.h - libredlock: distributed locks over N independent Redis masters (the Redlock
 * algorithm), on the caller's libuv loop or, through redlock/sync.h, from any thread.
 *
 * This header says in one line what each declaration does; docs/api.md is the reference (every
 * argument, status and contract), in the order of this file:
 *
 *   versions and errors     redlock_strerror, redlock_err_name, redlock_version_string
 *   limits
 *   the quorum core         redlock/quorum.h: redlock_round_* (no IO, no clock, no allocation)
 *   node URLs               redlock_url_*
 *   the client's types      options, results, callbacks
 *   the client              redlock_client_new, redlock_client_close, redlock_cancel
 *   cancelers               redlock_canceler_* (first named redlock_cancel_token_*: aliases)
 *   locks                   redlock_acquire, redlock_extend, redlock_release, redlock_lock_*
 *   auto-extension          redlock_auto_extend
 *   holding for a work      redlock_using, redlock_using_done
 *   observing a client      the log callback, redlock_client_node_info, redlock_client_stats
 *   locks taken elsewhere   redlock_lock_attach, redlock_inspect
 *   the blocking API        redlock/sync.h: redlock_sync_*
 *
 * Conventions (libuv's): errors are negative ints; a call that fails at once returns the error
 * and never calls back; a call that returns 0 calls back exactly once, on the loop thread, never
 * from inside the call. Data handed to a callback is valid only while it runs. A struct the
 * caller allocates is set up by its init macro, which records the struct's size so that the
 * program keeps working with a newer library (docs/api.md, "ABI policy").
 */
#ifndef REDLOCK_H
#define REDLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The loop is named by its struct tag, which uv.h's uv_loop_t stands for: this header does not
 * include uv.h (which wants POSIX feature macros), and a typedef would clash with uv.h's under
 * C99. */
struct uv_loop_s;

#ifdef __cplusplus
extern "C" {
#endif

/* Symbols are hidden by default; only these are exported. */
#if defined(__GNUC__)
#define REDLOCK_EXTERN __attribute__((visibility("default")))
#else
#define REDLOCK_EXTERN
#endif

/* ---- Versions and errors (docs/api.md, "Errors") --------------------------------------------- */

#define REDLOCK_VERSION_MAJOR 0
#define REDLOCK_VERSION_MINOR 2
#define REDLOCK_VERSION_PATCH 0
#define REDLOCK_VERSION_STRING "0.2.0"

/* XX(name, value, message): every error code, negative and stable across releases, below -30000.
 * What happened on one node is its vote and error text in a result, never a code. */
#define REDLOCK_ERRNO_MAP(XX)                                                                      \
    XX(EINVAL, -30001, "invalid argument")                                                         \
    XX(ENOMEM, -30002, "out of memory")                                                            \
    XX(EBUSY, -30003, "resource is locked by another holder")                                      \
    XX(ENOQUORUM, -30004, "no quorum: too many nodes failed or timed out")                         \
    XX(EEXPIRED, -30005, "lock validity ran out")                                                  \
    XX(ELOST, -30006, "lock lost: a quorum of nodes no longer holds its token")                    \
    XX(ECANCELED, -30007, "operation canceled")                                                    \
    XX(ECLOSING, -30008, "client is closing")                                                      \
    XX(ERELEASED, -30009, "lock was already released")                                             \
    XX(EURL, -30010, "invalid node URL")                                                           \
    XX(EDUPNODE, -30011, "the same node is given twice")                                           \
    XX(EAGAIN, -30012, "round still pending")                                                      \
    XX(ELIMIT, -30013, "auto-extension reached its maximum number of extensions")                  \
    XX(ENOTFOUND, -30014, "no pending operation matches")

typedef enum {
#define REDLOCK_XX_(name, value, msg) REDLOCK_##name = (value),
    REDLOCK_ERRNO_MAP(REDLOCK_XX_)
#undef REDLOCK_XX_
} redlock_errno;

/* A static English message for a code ("unknown error" for others). */
REDLOCK_EXTERN const char *redlock_strerror(int err);
/* The code's name, e.g. "REDLOCK_EBUSY" ("REDLOCK_UNKNOWN" for others). */
REDLOCK_EXTERN const char *redlock_err_name(int err);
/* The library's version, "MAJOR.MINOR.PATCH". */
REDLOCK_EXTERN const char *redlock_version_string(void);
/* The TLS library rediss:// nodes use, or NULL when built without TLS. */
REDLOCK_EXTERN const char *redlock_tls_backend(void);
/* Monotonic time in microseconds, uv_hrtime() / 1000: the clock of lock deadlines. */
REDLOCK_EXTERN uint64_t redlock_now_us(void);

/* ---- Limits ---------------------------------------------------------------------------------- */

#define REDLOCK_MAX_NODES 64                   /* nodes of a client or a round */
#define REDLOCK_TTL_MAX_MS (UINT64_C(1) << 42) /* the largest ttl (about 139 years) */
#define REDLOCK_TOKEN_MAX 256                  /* bytes of a caller's token */
#define REDLOCK_RESOURCE_MAX (16u * 1024)      /* bytes of a resource (of a set, in all) */
#define REDLOCK_RESOURCES_MAX 1024u            /* resources of one redlock_acquire_multi */
#define REDLOCK_ERROR_TEXT_MAX 160             /* a per-node error text, NUL included */
/* A length that means "up to the NUL": a resource's, a token's, wherever the API takes one. */
#define REDLOCK_STRLEN ((size_t)-1)

/* ---- The quorum core (docs/api.md, "The quorum core") ---------------------------------------- */

#include "redlock/quorum.h"

/* ---- Node URLs (docs/api.md, "Node URLs") ---------------------------------------------------- */

/* redis://, rediss:// (TLS), unix://, cluster:// and clusters:// (a Redis Cluster as one node). */

/* A cluster's seed, besides the URL's own host and port. */
typedef struct redlock_url_seed {
    char *host; /* brackets removed; NULL ends the list */
    int port;
} redlock_url_seed;

/* A parsed URL; its strings are malloc'ed. Its size is frozen within a soversion. */
typedef struct redlock_url {
    bool is_unix;
    char *host;              /* host name or address, brackets removed; NULL for unix */
    int port;                /* 1..65535; 0 for unix */
    char *path;              /* socket path for unix; NULL for TCP */
    char *user;              /* NULL when none */
    char *password;          /* NULL when none */
    int db;                  /* -1 when not given */
    int timeout_ms;          /* -1 when not given */
    char *redacted;          /* the URL with the password replaced by "***", for logs and errors */
    bool tls;                /* rediss:// or clusters://; in place of the first reserved slot */
    bool cluster;            /* cluster:// or clusters://; in the padding after tls */
    redlock_url_seed *seeds; /* cluster: seed= in order, NULL-host-ended; in place of a slot */
    int wait_replicas;       /* cluster: wait_replicas=N (0 when not given); in place of a slot */
    uintptr_t reserved[1];   /* zeroed; room for a minor release */
} redlock_url;

/* Parse text into url (release it with redlock_url_free in every case); err says why not. */
REDLOCK_EXTERN int redlock_url_parse(redlock_url *url, const char *text, char *err, size_t err_len);
/* Free url's strings (the password zeroed first) and zero it. */
REDLOCK_EXTERN void redlock_url_free(redlock_url *url);
/* Write text with any password as "***" into out; returns the length needed, like snprintf. */
REDLOCK_EXTERN size_t redlock_url_redact(const char *text, char *out, size_t out_len);

/* ---- The client's types (docs/api.md, "The client") ------------------------------------------ */

/* A client: one ordered connection per node on the caller's loop, used from its thread only. */
typedef struct redlock_client redlock_client;
/* A lock, handed to the acquire callback; the caller's until redlock_lock_free or the close. */
typedef struct redlock_lock redlock_lock;
/* Cancels every acquire that carries it, from any thread (redlock_canceler_new). */
typedef struct redlock_cancel_token redlock_canceler;
/* The canceler's first name (a "cancel token"): the same type, kept within the soversion
 * (docs/api.md, "Cancelers"). The struct's tag and the lock options' member keep the first name:
 * they are the ABI's record (abi/redlock.abi), and the type is one. */
typedef struct redlock_cancel_token redlock_cancel_token;

/* The library's allocator, with realloc(3) semantics (size 0 frees). */
typedef void *(*redlock_realloc_fn)(void *ud, void *ptr, size_t size);

/* How much a log line matters; lower is more severe. */
typedef enum redlock_log_level {
    REDLOCK_LOG_ERROR = 1, /* a node cannot be used as configured */
    REDLOCK_LOG_WARN = 2,  /* a connection lost, a failed attempt, a slow round, a lock lost */
    REDLOCK_LOG_INFO = 3,  /* a connection made */
    REDLOCK_LOG_DEBUG = 4  /* each further failed connection attempt, with the backoff */
} redlock_log_level;

/* A log line (url NULL for the client as a whole; no password in either). It runs on the loop
 * thread, inside the library: it may call only the client's read-only functions. */
typedef void (*redlock_log_fn)(redlock_client *client, redlock_log_level level, const char *url,
                               const char *message, void *data);

/* A client's settings, copied by redlock_client_new; defaults: redlock_options_init.
 *
 * node_timeout_ms, each request's deadline on a node: 0 (the default) adapts it per node, as
 * TCP's retransmission timeout: the node's smoothed round trip plus 4 times its deviation, within
 * 200 ms..2 s, 1 s before it has measured one, doubled after each timeout; N fixes it at N ms. A
 * URL's timeout_ms=N fixes that node's. (Tuning of the adaptive one would come as new members, 0
 * by default, never as new meanings of this one.) */
typedef struct redlock_options {
    size_t size;                 /* set by redlock_options_init; do not change */
    uint64_t ttl_ms;             /* the ttl of an acquire given 0 */
    uint64_t node_timeout_ms;    /* a request's deadline on a node: 0 adaptive, N fixed (above) */
    uint64_t connect_timeout_ms; /* a connection's set-up: TCP, TLS, AUTH, SELECT, ... */
    double drift_factor;         /* clock drift allowance per ms of ttl */
    uint64_t min_validity_ms;    /* a win with less validity left counts as lost */
    int retry_count;             /* acquire retries after the first attempt, without wait_ms */
    uint64_t retry_delay_ms;     /* base delay between attempts ... */
    uint64_t retry_jitter_ms;    /* ... varied uniformly by +/- this much */
    const char *key_prefix;      /* prepended to every resource; copied */
    uint64_t reconnect_min_ms;   /* first reconnect delay, doubled up to ... */
    uint64_t reconnect_max_ms;   /* ... this */
    unsigned max_inflight_per_node; /* answers a node may owe; beyond, new requests fail at once */
    redlock_realloc_fn realloc_fn;  /* NULL: libc */
    void *realloc_ud;
    /* TLS, for rediss:// and clusters:// nodes; paths are read only in redlock_client_new. */
    const char *tls_ca_file;        /* CA certificates (PEM); with no CA, the system's store */
    const char *tls_ca_dir;         /* a directory of hashed CA certificates */
    const char *tls_cert_file;      /* client certificate chain (PEM) for mutual TLS ... */
    const char *tls_key_file;       /* ... and its key (PEM, no passphrase) */
    const char *tls_server_name;    /* the name to verify and send as SNI, instead of each host */
    bool tls_insecure;              /* skip verification: never in production */
    unsigned char reserved_tls_[7]; /* zero; keeps the struct free of tail padding (ABI) */
    redlock_log_fn log_fn;          /* NULL: nothing is logged, or formatted */
    void *log_data;
    uint64_t slow_round_ms; /* log and count a round longer than this (0: the default) */
    bool no_notify;         /* waiters only poll: no subscriber connections, queue or grants */
    unsigned char reserved_notify_[7];  /* zero; keeps the struct free of tail padding (ABI) */
    bool release_waits_all;             /* a release waits for every node (since 0.2.0) */
    unsigned char reserved_release_[7]; /* zero; keeps the struct free of tail padding (ABI) */
    /* New members are appended here, with 0 / NULL as their default (docs/api.md, "ABI
     * policy"). */
} redlock_options;

/* Fill opts with the defaults and record its size (a macro: always call it first). */
REDLOCK_EXTERN void redlock_options_init_sized(redlock_options *opts, size_t size);
#define redlock_options_init(opts) redlock_options_init_sized((opts), sizeof(redlock_options))

/* One node's outcome of a round. Callers index arrays of it: its size is frozen. */
typedef struct redlock_node_result {
    const char *url;          /* the node's URL, password redacted */
    redlock_vote vote;        /* REDLOCK_VOTE_NONE: not answered when the round was decided */
    uint64_t latency_us;      /* from queueing the request to the answer or the deadline */
    const char *error;        /* what went wrong on this node (beside a yes or no: a note,
                                 docs/algorithm.md#evidence-and-hints), or NULL */
    const char *value;        /* inspect: the key's value (binary; NULL: no key) ... */
    size_t value_len;         /* ... its length */
    int64_t pttl_ms;          /* inspect: the key's PTTL (-2 no key, -1 no ttl); else -2 */
    uint64_t fence;           /* the node's fence counter; in place of the first reserved slot */
    uint64_t reserved_u64[3]; /* zeroed; planned members: abi/README.md */
    const char *answered_by;  /* cluster://: the master that gave the vote; in place of a slot */
    const void *reserved_ptr[3];
} redlock_node_result;

/* An operation's outcome, valid only while its callback runs. It may grow at the end. */
typedef struct redlock_result {
    int status; /* the callback's status */
    unsigned n_nodes;
    unsigned votes_yes, votes_no, votes_error, votes_timeout; /* of the last round */
    unsigned attempts;                /* rounds made (acquire retries + 1) */
    uint64_t elapsed_us;              /* from the call to the callback */
    const redlock_node_result *nodes; /* n_nodes entries, last round */
    uint64_t fence; /* the lock's fence (acquire, extend, release of a fenced lock), else 0 */
} redlock_result;

/* The callback of every operation: lock is its handle (an acquire's, when status is 0). */
typedef void (*redlock_cb)(redlock_lock *lock, int status, const redlock_result *result,
                           void *data);
/* The end of a close: the client is freed right after it returns. */
typedef void (*redlock_close_cb)(redlock_client *client, void *data);

/* Auto-extension ended other than by release, stop or free; fires exactly once, with why. */
typedef void (*redlock_lost_cb)(redlock_lock *lock, int reason, void *data);

/* Auto-extension's settings, copied; defaults: redlock_auto_opts_init. */
typedef struct redlock_auto_opts {
    size_t size;             /* set by redlock_auto_opts_init; do not change */
    double extend_at;        /* extend when this fraction of the ttl has passed */
    unsigned max_extensions; /* 0: no cap; else lost with REDLOCK_ELIMIT after this many */
    unsigned extend_flags;   /* passed to every extend: REDLOCK_EXTEND_RETAKE or 0 */
    uint64_t lost_margin_ms; /* report a loss this long before the deadline (0: the default) */
    redlock_cb extended_cb;  /* after every extension round (NULL: none) */
    void *extended_data;
    /* New members are appended here (docs/api.md, "ABI policy"). */
} redlock_auto_opts;

/* Fill opts with the defaults and record its size (a macro). */
REDLOCK_EXTERN void redlock_auto_opts_init_sized(redlock_auto_opts *opts, size_t size);
#define redlock_auto_opts_init(opts) redlock_auto_opts_init_sized((opts), sizeof(redlock_auto_opts))

/* Per-call settings of an acquire, read during the call; defaults: redlock_lock_opts_init. */
typedef struct redlock_lock_opts {
    size_t size;       /* set by redlock_lock_opts_init; do not change */
    const char *token; /* the caller's token (copied); NULL: 128 random bits per attempt */
    size_t token_len;  /* 1..REDLOCK_TOKEN_MAX when token is set */
    int retry_count;   /* -1: the client's; used when wait_ms is 0 */
    uint64_t wait_ms;  /* > 0: keep trying this long, in the resource's queue */
    const redlock_auto_opts *auto_extend; /* non-NULL: auto-extend the lock once taken */
    redlock_lost_cb lost_cb;              /* required with auto_extend */
    void *lost_data;
    bool fencing;                       /* take a fence with the lock */
    unsigned char reserved_fencing_[3]; /* zero; keeps the struct free of tail padding (ABI) */
    unsigned fence_commit;              /* commit acks of a fenced acquisition (0: the quorum) */
    redlock_cancel_token *cancel;       /* a redlock_canceler: fired, the acquire ends ECANCELED */
    const char *fence_domain; /* with fencing: a counter shared by resources (NULL: their own) */
    /* New members are appended here (docs/api.md, "ABI policy"). */
} redlock_lock_opts;

/* Fill opts with the defaults and record its size (a macro). */
REDLOCK_EXTERN void redlock_lock_opts_init_sized(redlock_lock_opts *opts, size_t size);
#define redlock_lock_opts_init(opts) redlock_lock_opts_init_sized((opts), sizeof(redlock_lock_opts))

/* ---- The client (docs/api.md, "The client") -------------------------------------------------- */

/* Create a client on loop for n_nodes URLs (opts NULL: defaults; all copied) and start connecting.
 * On failure nothing is left and err says why. */
REDLOCK_EXTERN int redlock_client_new(struct uv_loop_s *loop, const char *const *node_urls,
                                      unsigned n_nodes, const redlock_options *opts,
                                      redlock_client **client_out, char *err, size_t err_len);

/* Close the client: release what it holds on every node, cancel what is pending, free every
 * handle, then call close_cb (may be NULL) and free the client. */
REDLOCK_EXTERN int redlock_client_close(redlock_client *client, redlock_close_cb close_cb,
                                        void *data);

/* A flag of redlock_client_close_ex and redlock_sync_free_ex: release nothing. */
#define REDLOCK_CLOSE_FAST 1u

/* redlock_client_close with flags: 0 or REDLOCK_CLOSE_FAST. */
REDLOCK_EXTERN int redlock_client_close_ex(redlock_client *client, unsigned flags,
                                           redlock_close_cb close_cb, void *data);
/* Cancel every pending operation whose callback data is data (a canceler is simpler). */
REDLOCK_EXTERN int redlock_cancel(redlock_client *client, const void *data);
/* The reason behind the last error a call returned at once ("" if none), or of the last
 * operation whose callback got a failure: each failed node and why ("no quorum: ...: URL
 * timeout (no answer within 200 ms); ..."), from the start of that callback. */
REDLOCK_EXTERN const char *redlock_client_last_error(const redlock_client *client);
REDLOCK_EXTERN unsigned redlock_client_node_count(const redlock_client *client);
/* Node i's URL, password redacted (NULL out of range). */
REDLOCK_EXTERN const char *redlock_client_node_url(const redlock_client *client, unsigned i);
REDLOCK_EXTERN struct uv_loop_s *redlock_client_loop(const redlock_client *client);

/* ---- Cancelers (docs/api.md, "Cancelers") ---------------------------------------------------- */

/* A new canceler, not fired (malloc'ed; free it with redlock_canceler_free). */
REDLOCK_EXTERN int redlock_canceler_new(redlock_canceler **canceler_out);
/* Cancel every acquire that carries the canceler, in flight or started later; any thread. */
REDLOCK_EXTERN void redlock_canceler_fire(redlock_canceler *canceler);
/* Whether the canceler was fired (an atomic read). */
REDLOCK_EXTERN bool redlock_canceler_fired(const redlock_canceler *canceler);
/* Give the caller's canceler back; acquires still carrying it keep it alive. NULL is ok. */
REDLOCK_EXTERN void redlock_canceler_free(redlock_canceler *canceler);
/* The same four under their first names, aliases kept within the soversion (exported symbols
 * of libredlock.so.1; gone with the next soversion). */
REDLOCK_EXTERN int redlock_cancel_token_new(redlock_cancel_token **token_out);
REDLOCK_EXTERN void redlock_cancel_token_fire(redlock_cancel_token *token);
REDLOCK_EXTERN bool redlock_cancel_token_fired(const redlock_cancel_token *token);
REDLOCK_EXTERN void redlock_cancel_token_free(redlock_cancel_token *token);

/* ---- Locks (docs/api.md, "The client" and "The lock handle") --------------------------------- */

/* Acquire resource (len bytes, copied) for ttl_ms (0: the client's); cb fires once, with a new
 * handle on success. Retries by the client's or opts' policy. */
REDLOCK_EXTERN int redlock_acquire(redlock_client *client, const void *resource, size_t len,
                                   uint64_t ttl_ms, const redlock_lock_opts *opts, redlock_cb cb,
                                   void *data);
/* Acquire count resources at once, all or none on each node; one handle covers the set. */
REDLOCK_EXTERN int redlock_acquire_multi(redlock_client *client, const void *const *resources,
                                         const size_t *lens, unsigned count, uint64_t ttl_ms,
                                         const redlock_lock_opts *opts, redlock_cb cb, void *data);

/* A flag of redlock_extend: on a node where the key is gone, SET it again (NX). */
#define REDLOCK_EXTEND_RETAKE 1u

/* Extend the lock to ttl_ms (0: its ttl) from now; won only before its current deadline. */
REDLOCK_EXTERN int redlock_extend(redlock_lock *lock, uint64_t ttl_ms, unsigned flags,
                                  redlock_cb cb, void *data);
/* Release the lock on every node; the status says whether the whole hold was continuous. */
REDLOCK_EXTERN int redlock_release(redlock_lock *lock, redlock_cb cb, void *data);
/* Forget the handle, releasing nothing (freed after a callback still in flight). NULL is ok. */
REDLOCK_EXTERN void redlock_lock_free(redlock_lock *lock);

/* Accessors; pointers live as long as the handle, and a NULL lock reads as empty. */
/* The resource (the first of a set). */
REDLOCK_EXTERN const void *redlock_lock_resource(const redlock_lock *lock, size_t *len);
/* How many resources the lock covers. */
REDLOCK_EXTERN unsigned redlock_lock_resource_count(const redlock_lock *lock);
/* Resource i, in the order given (NULL out of range). */
REDLOCK_EXTERN const void *redlock_lock_resource_at(const redlock_lock *lock, unsigned i,
                                                    size_t *len);
/* The token, NUL-terminated (a caller's may hold NULs: use len). */
REDLOCK_EXTERN const char *redlock_lock_token(const redlock_lock *lock, size_t *len);
/* Validity left at the last won round, in ms (it does not count down). */
REDLOCK_EXTERN uint64_t redlock_lock_validity_ms(const redlock_lock *lock);
/* When that validity runs out, on the redlock_now_us() clock. */
REDLOCK_EXTERN uint64_t redlock_lock_deadline_us(const redlock_lock *lock);
REDLOCK_EXTERN uint64_t redlock_lock_ttl_ms(const redlock_lock *lock);
/* The fence (0 without fencing): larger than every earlier holder's. */
REDLOCK_EXTERN uint64_t redlock_lock_fence(const redlock_lock *lock);
/* True before the deadline, until released or reported lost. */
REDLOCK_EXTERN bool redlock_lock_is_held(const redlock_lock *lock, uint64_t now_us);
REDLOCK_EXTERN redlock_client *redlock_lock_client(const redlock_lock *lock);
/* A pointer for the caller; the library never touches it. */
REDLOCK_EXTERN void redlock_lock_set_data(redlock_lock *lock, void *data);
REDLOCK_EXTERN void *redlock_lock_get_data(const redlock_lock *lock);

/* ---- Auto-extension (docs/api.md, "Auto-extension") ------------------------------------------ */

/* Keep a held lock alive until it is released (opts NULL: defaults); lost_cb fires once if not. */
REDLOCK_EXTERN int redlock_auto_extend(redlock_lock *lock, const redlock_auto_opts *opts,
                                       redlock_lost_cb lost_cb, void *data);
/* Stop auto-extension, with no lost callback. */
REDLOCK_EXTERN void redlock_auto_extend_stop(redlock_lock *lock);
/* Extensions won by auto-extension so far. */
REDLOCK_EXTERN unsigned redlock_lock_extensions(const redlock_lock *lock);

/* ---- Holding a lock for a piece of work (docs/api.md, "Holding a lock for a work") ----------- */

/* How the hold of redlock_using or redlock_sync_with ended. */
typedef enum redlock_hold_end {
    REDLOCK_HOLD_RELEASED = 0,     /* held throughout, then released (status 0) */
    REDLOCK_HOLD_LOST = 1,         /* lost during the work, which was told (status: why) */
    REDLOCK_HOLD_LAPSED = 2,       /* released, not shown held throughout (the release's status) */
    REDLOCK_HOLD_NOT_ACQUIRED = 3, /* never held (status: the acquire's) */
    REDLOCK_HOLD_CANCELED = 4      /* the token fired, or the client closed (REDLOCK_ECANCELED) */
} redlock_hold_end;

/* "released", "lost", "lapsed", "not acquired", "canceled" ("?" for others). */
REDLOCK_EXTERN const char *redlock_hold_end_name(redlock_hold_end end);
/* The work: it runs holding lock (auto-extended) and calls redlock_using_done(lock) once. */
typedef void (*redlock_work_cb)(redlock_lock *lock, void *data);
/* The end of redlock_using, exactly once; result is the last operation's (never NULL). */
typedef void (*redlock_ended_cb)(redlock_hold_end end, int status, const redlock_result *result,
                                 void *data);
/* Acquire (opts as redlock_acquire's), run work holding the lock, release at its done. */
REDLOCK_EXTERN int redlock_using(redlock_client *client, const void *resource, size_t len,
                                 uint64_t ttl_ms, const redlock_lock_opts *opts,
                                 redlock_work_cb work, redlock_ended_cb ended, void *data);
/* The work is over: release the lock; ended follows. */
REDLOCK_EXTERN int redlock_using_done(redlock_lock *lock);

/* ---- Observing a client (docs/api.md, "Observing a client") ---------------------------------- */

/* "error", "warn", "info", "debug" ("?" for others). */
REDLOCK_EXTERN const char *redlock_log_level_name(redlock_log_level level);

/* Where a node's connection stands. */
typedef enum redlock_node_state {
    REDLOCK_NODE_CONNECTING = 0, /* its first connection is being made: requests wait for it */
    REDLOCK_NODE_UP,             /* connected and its handshake done */
    REDLOCK_NODE_DOWN,           /* no connection: requests fail at once while it reconnects */
    REDLOCK_NODE_CLOSED          /* the client is closing */
} redlock_node_state;

/* "connecting", "up", "down", "closed" ("?" for others). */
REDLOCK_EXTERN const char *redlock_node_state_name(redlock_node_state state);

/* One node's state and counters (since the client's creation); it may grow at the end. */
typedef struct redlock_node_info {
    size_t size;     /* set by redlock_node_info_init; do not change */
    const char *url; /* password redacted; valid while the client lives */
    redlock_node_state state;
    unsigned inflight;             /* requests waiting for their answer */
    unsigned owed;                 /* answers still owed to requests that timed out */
    unsigned consecutive_failures; /* requests in a row that ended in an error or a timeout */
    unsigned connect_failures;     /* connection attempts failed since it was last up */
    unsigned reserved_;            /* zero */
    uint64_t connects;             /* connections that came up */
    uint64_t disconnects;          /* connections lost or dropped after they came up */
    uint64_t requests;             /* requests sent to it */
    uint64_t answers;              /* requests the server answered */
    uint64_t errors;               /* requests that ended with an error vote */
    uint64_t timeouts;             /* requests that ended at their deadline */
    uint64_t rtt_us;               /* moving average of the answered requests' latency_us */
    uint64_t state_since_us;       /* when it entered its state (redlock_now_us clock) */
    char last_error[REDLOCK_ERROR_TEXT_MAX]; /* the last error, also after recovery ("": none) */
    uint64_t probes; /* of the requests, the client's own signs of life (TIME), asked of it */
    /* New members are appended here (docs/api.md, "ABI policy"). */
} redlock_node_info;

/* Zero info and record its size (a macro). */
REDLOCK_EXTERN void redlock_node_info_init_sized(redlock_node_info *info, size_t size);
#define redlock_node_info_init(info) redlock_node_info_init_sized((info), sizeof(redlock_node_info))
/* Fill info with node i's state and counters: no IO, loop thread only (a log callback too). */
REDLOCK_EXTERN int redlock_client_node_info(const redlock_client *client, unsigned i,
                                            redlock_node_info *info);

/* The client's counters (since its creation); it may grow at the end. An acquire attempt is one
 * round. */
typedef struct redlock_stats {
    size_t size;                /* set by redlock_stats_init; do not change */
    uint64_t rounds_won;        /* acquire rounds won */
    uint64_t rounds_busy;       /* acquire rounds lost to another holder (EBUSY) */
    uint64_t rounds_broken;     /* acquire rounds lost to failing or slow nodes (ENOQUORUM) */
    uint64_t rounds_expired;    /* acquire rounds a quorum won too late (EEXPIRED) */
    uint64_t extensions_ok;     /* extend rounds won */
    uint64_t extensions_failed; /* extend rounds lost */
    uint64_t locks_lost;        /* auto-extended locks reported lost (the close's aside) */
    uint64_t releases_ok;       /* releases that completed 0 */
    uint64_t releases_lapsed;   /* ... REDLOCK_ELOST: the hold had lapsed */
    uint64_t releases_unknown;  /* ... REDLOCK_ENOQUORUM: too few nodes answered to tell */
    uint64_t slow_rounds;       /* rounds longer than slow_round_ms */
    unsigned pending;           /* operations whose callback has not run */
    unsigned locks;             /* lock handles the caller has not freed */
    unsigned locks_held;        /* ... of which held now */
    unsigned locks_auto;        /* ... of which auto-extended */
    uint64_t acquires_granted;  /* acquires won by a grant, no round of their own (since 0.2.0) */
    /* New members are appended here (docs/api.md, "ABI policy"). */
} redlock_stats;

/* Zero stats and record its size (a macro). */
REDLOCK_EXTERN void redlock_stats_init_sized(redlock_stats *stats, size_t size);
#define redlock_stats_init(stats) redlock_stats_init_sized((stats), sizeof(redlock_stats))
/* Fill stats with the client's counters: no IO, loop thread only (a log callback too). */
REDLOCK_EXTERN int redlock_client_stats(const redlock_client *client, redlock_stats *stats);

/* ---- Locks taken elsewhere, inspecting (docs/api.md) ----------------------------------------- */

/* A handle for a lock another process took (resource and token copied), to extend or release;
 * its validity is unknown until an extend wins. */
REDLOCK_EXTERN int redlock_lock_attach(redlock_client *client, const void *resource, size_t len,
                                       const void *token, size_t token_len, uint64_t ttl_ms,
                                       redlock_lock **lock_out);
/* Read the resource's key on every node (value, PTTL, fence counter), changing nothing. */
REDLOCK_EXTERN int redlock_inspect(redlock_client *client, const void *resource, size_t len,
                                   redlock_cb cb, void *data);
/* Read a set of resources on every node; a node whose keys differ votes error. */
REDLOCK_EXTERN int redlock_inspect_multi(redlock_client *client, const void *const *resources,
                                         const size_t *lens, unsigned count, redlock_cb cb,
                                         void *data);

/* ---- The blocking API (docs/api.md, "The blocking API") -------------------------------------- */

#include "redlock/sync.h"

#ifdef __cplusplus
}
#endif

#endif /* REDLOCK_H */
