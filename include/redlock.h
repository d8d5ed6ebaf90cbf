/* SPDX-License-Identifier: MIT */
/*
 * redlock.h - distributed locks over N independent Redis masters (the Redlock algorithm).
 *
 * This is the only public header of libredlock. It has four parts:
 *
 *   1. error codes                   (redlock_strerror, redlock_err_name)
 *   2. the quorum core               (redlock_round_*): the decision logic of one round, with no
 *                                    IO, no allocation and no clock of its own, so a caller's
 *                                    tests can drive it vote by vote
 *   3. node URLs                     (redlock_url_*)
 *   4. the async client on libuv     (redlock_client_*, redlock_acquire, redlock_extend,
 *                                    redlock_release)
 *
 * Conventions (as in libuv): errors are negative ints; a call that fails at once returns the
 * error and never calls back; a call that returns 0 calls back exactly once. Borrowed data
 * handed to a callback (results, error texts) is valid only while the callback runs.
 * See docs/api.md for the full contract and docs/algorithm.md for the round.
 *
 * ABI (docs/api.md, "ABI policy"): a struct the caller allocates and the library reads or fills
 * (redlock_options, redlock_lock_opts, redlock_auto_opts, redlock_report, redlock_node_info,
 * redlock_stats) starts with a `size` member that its init macro sets to the struct's size as
 * the caller was compiled, so a program built against an older header keeps working with a newer
 * library: the library reads and writes only the bytes the caller has, and gives the members the
 * caller does not know their defaults. New members are only ever appended. Structs the library
 * hands out (redlock_result) may grow at the end; redlock_node_result, redlock_round and
 * redlock_url have a frozen size with reserved room.
 */
#ifndef REDLOCK_H
#define REDLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Only the loop's type is needed, so uv.h (which wants POSIX feature macros) is not included:
 * this header compiles under plain -std=c99 and -std=c11. The loop is named by its struct tag,
 * struct uv_loop_s, which is what uv.h's uv_loop_t stands for: a typedef here would clash with
 * uv.h's under C99 (a typedef may appear twice only from C11 on). */
struct uv_loop_s;

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built for POSIX systems with symbols hidden by default; only these are
 * exported. */
#if defined(__GNUC__)
#define REDLOCK_EXTERN __attribute__((visibility("default")))
#else
#define REDLOCK_EXTERN
#endif

#define REDLOCK_VERSION_MAJOR 0
#define REDLOCK_VERSION_MINOR 2
#define REDLOCK_VERSION_PATCH 0
#define REDLOCK_VERSION_STRING "0.2.0"

/* ---------------------------------------------------------------------------------------------
 * 1. Errors
 * ------------------------------------------------------------------------------------------- */

/* XX(name, value, message). Values are negative and stable across releases; they do not collide
 * with libuv's or errno's (all below -30000). Failures of single nodes (refused connection,
 * error reply, timeout) are not codes but votes with an error text, in each result's per-node
 * outcome; a code says what happened to the whole operation. */
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

/* A static English message for any code this library returns ("unknown error" for others). */
REDLOCK_EXTERN const char *redlock_strerror(int err);
/* The code's name, e.g. "REDLOCK_EBUSY" ("REDLOCK_UNKNOWN" for others). */
REDLOCK_EXTERN const char *redlock_err_name(int err);

/* The library version as "MAJOR.MINOR.PATCH". */
REDLOCK_EXTERN const char *redlock_version_string(void);

/* The TLS library rediss:// nodes use, e.g. "OpenSSL 3.0.19 1 Jul 2025", or NULL when the
 * library was built without TLS (a client then refuses rediss:// URLs). */
REDLOCK_EXTERN const char *redlock_tls_backend(void);

/* Monotonic time in microseconds, on the same clock as uv_hrtime() (uv_hrtime() / 1000). Lock
 * deadlines are on this clock. */
REDLOCK_EXTERN uint64_t redlock_now_us(void);

/* ---------------------------------------------------------------------------------------------
 * 2. The quorum core
 *
 * One round (acquire, extend or release) over N nodes. Feed it one vote per node with the time
 * the vote arrived; it answers pending / won / lost as soon as that is known:
 *   won   as soon as votes_yes >= quorum (quorum = N/2 + 1), provided the validity left,
 *         validity = ttl - elapsed - drift, drift = ttl * drift_factor + 2 ms,
 *         is > 0 and >= min_validity;
 *   lost  as soon as votes_no + votes_error + votes_timeout > N - quorum, or when a quorum is
 *         reached with too little validity left.
 * The decision never changes once made; votes after it are still recorded (so a caller can
 * report every node) but count for nothing. Time is whatever clock the caller uses, in
 * microseconds; elapsed is clamped at 0 if the clock goes backwards.
 * ------------------------------------------------------------------------------------------- */

#define REDLOCK_MAX_NODES 64
/* The largest ttl accepted anywhere (about 139 years): ttl_ms * 1000 and drift never overflow. */
#define REDLOCK_TTL_MAX_MS (UINT64_C(1) << 42)
#define REDLOCK_DRIFT_FIXED_US 2000 /* the "+ 2 ms" of the drift allowance */

typedef enum {
    REDLOCK_VOTE_NONE = 0, /* no vote yet (or the round was decided before this node answered) */
    REDLOCK_VOTE_YES,      /* OK / 1: the node did what was asked */
    REDLOCK_VOTE_NO,       /* nil / 0: held by someone else, or not ours any more */
    REDLOCK_VOTE_ERROR,    /* error reply, connection down, protocol garbage */
    REDLOCK_VOTE_TIMEOUT   /* no answer before the node's deadline */
} redlock_vote;

typedef enum { REDLOCK_ROUND_PENDING = 0, REDLOCK_ROUND_WON, REDLOCK_ROUND_LOST } redlock_decision;

/* A round. The caller owns the memory (stack, embedded, anything); the core never allocates.
 * Read the members through the functions below; they are public only so the struct can live on
 * the caller's stack. */
typedef struct redlock_round {
    unsigned n_nodes;
    unsigned quorum;
    unsigned votes_yes, votes_no, votes_error, votes_timeout;
    uint64_t ttl_us;
    uint64_t drift_us;
    uint64_t min_validity_us;
    uint64_t start_us;
    uint64_t decided_us; /* time of the deciding vote (check the decision, not this, for pending) */
    uint64_t validity_us; /* on a win: validity left at decided_us; else 0 */
    uint64_t voted_mask;  /* bit i set once node i voted */
    redlock_decision decision;
    int status;                             /* see redlock_round_status */
    unsigned char votes[REDLOCK_MAX_NODES]; /* redlock_vote per node */
    /* Fencing (below), in place of the first two reserved slots: 1 + the largest counter among
     * the yes votes counted so far (frozen at the decision), 0 for a round that is not fenced;
     * and what the round is: REDLOCK_ROUND_PLAIN, _FENCED or _COMMIT. */
    uint64_t fence;
    uint64_t fence_kind;
    /* Zeroed by redlock_round_init. Room for state a minor release adds without changing the
     * struct's size. */
    uint64_t reserved[2];
} redlock_round;

/* Start a round over n_nodes (1..REDLOCK_MAX_NODES) at time start_us (first command not yet
 * written). ttl_ms in 1..REDLOCK_TTL_MAX_MS; drift_factor finite in [0, 1); min_validity_ms may be
 * 0 (a value above the ttl simply makes every win count as lost). The drift allowance is
 * floor(ttl_us * drift_factor) + 2000 us, computed exactly. Returns 0 or REDLOCK_EINVAL (the
 * round is then zeroed and unusable: its status reads REDLOCK_EINVAL). */
REDLOCK_EXTERN int redlock_round_init(redlock_round *round, unsigned n_nodes, uint64_t ttl_ms,
                                      double drift_factor, uint64_t min_validity_ms,
                                      uint64_t start_us);

/* Record node's vote, arrived at now_us. Returns the decision after this vote
 * (REDLOCK_ROUND_PENDING / _WON / _LOST, all >= 0), or REDLOCK_EINVAL if node is out of range,
 * the node already voted, or vote is not YES/NO/ERROR/TIMEOUT - such a vote is not counted. */
REDLOCK_EXTERN int redlock_round_vote(redlock_round *round, unsigned node, redlock_vote vote,
                                      uint64_t now_us);

/* The decision so far. */
REDLOCK_EXTERN redlock_decision redlock_round_decision(const redlock_round *round);

/* The status of the round as an error code: 0 won; REDLOCK_EAGAIN still pending; REDLOCK_EINVAL
 * for a round whose init failed; when lost,
 * REDLOCK_EEXPIRED if a quorum said yes but too little validity was left, otherwise
 * REDLOCK_EBUSY if at the decision the "no" votes were at least as many as the errors and
 * timeouts together (the resource is held elsewhere), else REDLOCK_ENOQUORUM (nodes failed). */
REDLOCK_EXTERN int redlock_round_status(const redlock_round *round);

/* Validity left at the winning vote, in microseconds (0 unless won). */
REDLOCK_EXTERN uint64_t redlock_round_validity_us(const redlock_round *round);

/* The drift allowance of the round in microseconds: ttl * drift_factor + 2 ms. */
REDLOCK_EXTERN uint64_t redlock_round_drift_us(const redlock_round *round);

/* The vote recorded for node (REDLOCK_VOTE_NONE if none or out of range). */
REDLOCK_EXTERN redlock_vote redlock_round_node_vote(const redlock_round *round, unsigned node);

/* "none", "yes", "no", "error", "timeout". */
REDLOCK_EXTERN const char *redlock_vote_name(redlock_vote vote);

/* Fencing tokens (docs/algorithm.md, "Fencing tokens"). A fenced acquisition is two rounds:
 *   1. the acquire round, made fenced by redlock_round_fencing: each yes vote comes with the
 *      node's counter for the resource (read in the same atomic step as its SET NX), fed with
 *      redlock_round_vote_counter. When it is won, fence = 1 + the largest counter among the yes
 *      votes up to the deciding one (redlock_round_fence);
 *   2. the commit round (redlock_round_commit_init from the won acquire round): every node is
 *      asked to raise its counter to the fence where the lock key still holds the token; a yes
 *      is "raised (or already higher)". It is won once commit_acks nodes said yes (the quorum by
 *      default; quorum + f tolerates f nodes that restart without their data) while validity is
 *      left, validity being measured from the acquire round's start, so both rounds are paid
 *      for; it is lost as soon as more than N - commit_acks nodes failed, or when the acks came
 *      too late (REDLOCK_EEXPIRED). Only a won commit round grants the lock with its fence.
 * Feed the commit round with redlock_round_vote; every other function above works on both.
 * The library's acquire step also raises the counter by one where it set the key: a node whose
 * yes read fence - 1 has then written the fence while its key stood, so the library votes it yes
 * in the commit round at once and sends it no commit (and none at all when those votes win the
 * commit round). An I/O layer of your own may do the same only if its acquire step writes
 * counter + 1 atomically with the SET. */
#define REDLOCK_ROUND_PLAIN 0u  /* fence_kind of a round from redlock_round_init */
#define REDLOCK_ROUND_FENCED 1u /* an acquire round made fenced by redlock_round_fencing */
#define REDLOCK_ROUND_COMMIT 2u /* a commit round from redlock_round_commit_init */

/* Make round, initialised and without any vote yet, the acquire round of a fenced acquisition:
 * from now on its yes votes must carry the node's counter (redlock_round_vote refuses them).
 * Returns 0, or REDLOCK_EINVAL (NULL, a round whose init failed, one already fenced or a commit
 * round, one that has a vote already). */
REDLOCK_EXTERN int redlock_round_fencing(redlock_round *round);

/* As redlock_round_vote, for a fenced acquire round: a yes vote comes with counter, the node's
 * fencing counter as it was when its key was set (0 when the node had none); the counter of any
 * other vote is ignored. A yes counted before the decision raises the fence to counter + 1 if
 * that is higher; later ones are recorded but change nothing. Returns the decision after this
 * vote, or REDLOCK_EINVAL (as redlock_round_vote; also a round that is not a fenced acquire
 * round, and a yes with counter UINT64_MAX, which leaves no fence above it) and counts nothing. */
REDLOCK_EXTERN int redlock_round_vote_counter(redlock_round *round, unsigned node,
                                              redlock_vote vote, uint64_t counter, uint64_t now_us);

/* The fence. A fenced acquire round: 1 + the largest counter among its deciding yes votes once
 * it is won, else 0. A commit round: the fence it commits (from its acquire round), whatever its
 * decision - the lock has it only if the commit round is won. A plain round: 0. */
REDLOCK_EXTERN uint64_t redlock_round_fence(const redlock_round *round);

/* Start commit, the commit round of acquire (a fenced acquire round that was won), over the same
 * nodes with the same ttl, drift, min_validity and start time. commit_acks is the number of yes
 * votes it needs: 0 means the quorum; otherwise quorum..n_nodes. The acquire round is not
 * changed (commit may not be the same struct). Returns 0, or REDLOCK_EINVAL (acquire not a won
 * fenced acquire round, commit_acks out of range; commit is then zeroed, as after a failed
 * init, unless it is acquire itself, which is left as it was). */
REDLOCK_EXTERN int redlock_round_commit_init(redlock_round *commit, const redlock_round *acquire,
                                             unsigned commit_acks);

/* ---------------------------------------------------------------------------------------------
 * 3. Node URLs
 *
 *   redis://[[user]:password@]host[:port][/db][?timeout_ms=N]
 *   rediss://[[user]:password@]host[:port][/db][?timeout_ms=N]     (TLS)
 *   unix://[[user]:password@]/path/to.sock[?db=N&timeout_ms=N]
 *   cluster://[[user]:password@]host[:port][?timeout_ms=N&seed=host:port...&wait_replicas=N
 *                                            &allow=host|address[/prefix]...]
 *   clusters://...                                                      (the same over TLS)
 *
 * host is an IPv4 address, an IPv6 address in brackets ([::1]) or a host name (resolved at
 * connect time). port defaults to 6379; without a db the connection stays on the server's
 * default (db 0). timeout_ms overrides the client's node timeout for this node. user and
 * password may be percent-encoded ('@' must be, as %40); "user@" without a password is an
 * error. rediss:// parses in every build; a client refuses it when the library was built
 * without TLS (see redlock_tls_backend).
 *
 * A cluster:// node is a whole Redis Cluster that counts as one vote: host:port and every seed=
 * (repeat the parameter for more; a seed is host:port or [v6]:port, port 6379 by default) are
 * asked for the topology, and each key goes to the master owning its hash slot (docs/cluster.md).
 * With allow= (repeated), the client connects only to servers on the URL's host, a seed's, or an
 * allowed host name or network. A cluster has no db: a path is an error.
 * ------------------------------------------------------------------------------------------- */

/* A cluster's seed, besides the URL's own host and port. */
typedef struct redlock_url_seed {
    char *host; /* brackets removed; NULL ends the list */
    int port;
} redlock_url_seed;

typedef struct redlock_url {
    bool is_unix;
    char *host;     /* host name or address, brackets removed; NULL for unix */
    int port;       /* 1..65535; 0 for unix */
    char *path;     /* socket path for unix; NULL for TCP */
    char *user;     /* NULL when none */
    char *password; /* NULL when none */
    int db;         /* -1 when not given */
    int timeout_ms; /* -1 when not given */
    char *redacted; /* the URL with the password replaced by "***", for logs and errors */
    bool tls;     /* rediss:// or clusters:// (TLS over TCP); in place of the first reserved slot */
    bool cluster; /* cluster:// or clusters://; in the padding after tls */
    /* cluster: the seed= parameters in order, ended by an entry whose host is NULL; NULL when
     * there are none (and for every other scheme). In place of the second reserved slot. */
    redlock_url_seed *seeds;
    /* cluster: wait_replicas=N, how many replicas a write (acquire, extend, fence commit) must
     * reach (WAIT, within the node's deadline) before the master's yes counts; 0 when not given.
     * In place of the third reserved slot (an int in a pointer-sized slot). */
    int wait_replicas;
    /* Zeroed by redlock_url_parse. Room for members a minor release adds without changing the
     * struct's size, each in place of one slot. */
    uintptr_t reserved[1];
} redlock_url;

/* Parse text into url (all strings malloc'ed; release with redlock_url_free, also after a
 * failure, which leaves url zeroed). On REDLOCK_EURL, err (if not NULL) receives a message that
 * says what is wrong, with any password redacted, truncated to err_len. */
REDLOCK_EXTERN int redlock_url_parse(redlock_url *url, const char *text, char *err, size_t err_len);
REDLOCK_EXTERN void redlock_url_free(redlock_url *url);
/* Write text with any password replaced by "***" into out (always NUL-terminated when
 * out_len > 0); works on text that does not parse too (without an '@', what follows the host's
 * ':' when it is no port is hidden: a password whose "@host" is missing). Returns the length it
 * would have written, like snprintf. */
REDLOCK_EXTERN size_t redlock_url_redact(const char *text, char *out, size_t out_len);

/* ---------------------------------------------------------------------------------------------
 * 4. The async client
 *
 * A client holds one ordered connection per node on a caller's uv_loop_t and is used from the
 * loop's thread only (like a libuv handle). Every callback fires exactly once, on the loop
 * thread, never from inside the call that started the operation. Calling back into the client
 * from a callback is allowed (acquire or release from an acquire callback, close from any
 * callback).
 * ------------------------------------------------------------------------------------------- */

typedef struct redlock_client redlock_client;
typedef struct redlock_lock redlock_lock;

/* Memory for the library's own allocations: ptr NULL allocates, size 0 frees (returns NULL),
 * otherwise reallocates; like realloc(3). hiredis and libuv keep their own allocators. */
typedef void *(*redlock_realloc_fn)(void *ud, void *ptr, size_t size);

/* How much a log message matters; a lower value is more severe. */
typedef enum redlock_log_level {
    REDLOCK_LOG_ERROR = 1, /* a node cannot be used as configured: the password or the database
                              is refused, two URLs reach one server, protocol errors */
    REDLOCK_LOG_WARN = 2,  /* a connection lost or dropped for silence, the first failed
                              connection attempt in a row, a slow round, a lock lost, a right the
                              user lacks (SCRIPT LOAD, INFO) */
    REDLOCK_LOG_INFO = 3,  /* a connection made (the handshake succeeded) */
    REDLOCK_LOG_DEBUG = 4  /* every further failed connection attempt, with the backoff */
} redlock_log_level;

/* "error", "warn", "info", "debug" ("?" for others). */
REDLOCK_EXTERN const char *redlock_log_level_name(redlock_log_level level);

/* A log callback (redlock_options.log_fn). url is the node's URL with its password redacted
 * ("***"), or NULL for a message about the client as a whole; message is one line without a
 * newline, and never holds a password. Both are valid only during the call. It runs on the
 * client's loop thread (a redlock_sync's own thread), from inside the library: it must not call
 * any function of this client except the read-only ones (redlock_client_node_count,
 * redlock_client_node_url, redlock_client_node_info, redlock_client_stats,
 * redlock_client_last_error, redlock_client_loop), and it may run during redlock_client_new,
 * before the client is handed out. When log_fn is NULL nothing is formatted. */
typedef void (*redlock_log_fn)(redlock_client *client, redlock_log_level level, const char *url,
                               const char *message, void *data);

typedef struct redlock_options {
    size_t size;              /* set by redlock_options_init; do not change */
    uint64_t ttl_ms;          /* default lock ttl (10000) */
    uint64_t node_timeout_ms; /* per-request deadline on each node (50); a URL's timeout_ms wins */
    uint64_t connect_timeout_ms;    /* TCP connect, TLS handshake, AUTH/SELECT (1000) */
    double drift_factor;            /* clock drift allowance per ms of ttl (0.01) */
    uint64_t min_validity_ms;       /* a win with less validity left counts as lost (0) */
    int retry_count;                /* retries after the first attempt when no wait is given (3) */
    uint64_t retry_delay_ms;        /* base delay between attempts (200) */
    uint64_t retry_jitter_ms;       /* the delay varies uniformly by +/- this much (100) */
    const char *key_prefix;         /* prepended to every resource (""); copied */
    uint64_t reconnect_min_ms;      /* first reconnect backoff (50), doubled up to ... */
    uint64_t reconnect_max_ms;      /* ... this (5000), each with +/- 50% jitter */
    unsigned max_inflight_per_node; /* answers a node may owe (65536); while it owes that many,
                                       new requests to it are refused (an error vote): the node
                                       is not dropped */
    redlock_realloc_fn realloc_fn;  /* NULL: libc realloc/free. Covers the client, its rounds and
                                       lock handles; parsed URL strings use malloc */
    void *realloc_ud;
    /* TLS, for rediss:// nodes (plain nodes ignore it); every path is only read during
     * redlock_client_new. Verification is on unless tls_insecure says otherwise. */
    const char *tls_ca_file;        /* PEM CA certificates to verify servers with (NULL) */
    const char *tls_ca_dir;         /* a directory of hashed CA certificates (NULL); with neither
                                       this nor tls_ca_file, the system's CA store */
    const char *tls_cert_file;      /* client certificate chain (PEM) for mutual TLS (NULL) ... */
    const char *tls_key_file;       /* ... and its private key (PEM, no passphrase) (NULL) */
    const char *tls_server_name;    /* the name to verify and send as SNI instead of each URL's
                                       host (NULL) */
    bool tls_insecure;              /* skip certificate and name verification (false). Never do
                                       this in production: every node error says it is on */
    unsigned char reserved_tls_[7]; /* zero; keeps the struct free of tail padding (ABI) */
    /* Logging (NULL: none). See redlock_log_fn for what the callback may do. */
    redlock_log_fn log_fn;
    void *log_data;
    uint64_t slow_round_ms; /* log a round that took longer than this (0: half node_timeout_ms)
                               and count it in redlock_stats.slow_rounds */
    /* Waiters (acquires with wait_ms) wake when a node says the key was released, through one
     * subscriber connection per node (docs/operations.md); true: they only poll, every
     * retry_delay_ms (false). */
    bool no_notify;
    unsigned char reserved_notify_[7]; /* zero; keeps the struct free of tail padding (ABI) */
    /* A release is decided as soon as its status is known: a quorum deleted the token, or can
     * no longer (docs/algorithm.md, "Extend and release rounds"); the other nodes' deletes go
     * on, and a close waits for them. true: a release waits for every node's answer or deadline
     * (false; since 0.2.0). */
    bool release_waits_all;
    unsigned char reserved_release_[7]; /* zero; keeps the struct free of tail padding (ABI) */
    /* New members are appended here, with 0 / NULL as their default (docs/api.md, "ABI
     * policy"). */
} redlock_options;

/* Fill opts with the defaults above and set opts->size. Always call it before setting fields: a
 * struct whose size was not set this way is refused with REDLOCK_EINVAL. It is a macro, so that
 * the size of redlock_options as the caller was compiled reaches the library with the call:
 * redlock_options_init_sized writes exactly `size` bytes (zeros past the members it knows) and
 * never more. */
REDLOCK_EXTERN void redlock_options_init_sized(redlock_options *opts, size_t size);
#define redlock_options_init(opts) redlock_options_init_sized((opts), sizeof(redlock_options))

/* Per-node outcome of one round, as handed to a callback. */
typedef struct redlock_node_result {
    const char *url;     /* the node's URL, password redacted */
    redlock_vote vote;   /* REDLOCK_VOTE_NONE: not answered when the round was decided */
    uint64_t latency_us; /* from queueing the request on the node (before its write, and any
                            wait for a connection) to the answer or the deadline; 0 if no
                            vote */
    const char *error;   /* what went wrong (server text, connection error), or NULL */
    /* redlock_inspect only (NULL / 0 / -2 otherwise): the key's value on this node (binary, not
     * NUL-terminated; NULL when the key does not exist) and its PTTL in ms (-2 no key, -1 no
     * ttl). */
    const char *value;
    size_t value_len;
    int64_t pttl_ms;
    /* The node's fencing counter for the resource (in place of the first reserved slot): for a
     * fenced acquire, the counter the node had when it took the key (0: it had none, or did not
     * vote yes); for redlock_inspect, the counter now (0: none); 0 otherwise. */
    uint64_t fence;
    /* Zeroed by the library. Callers index arrays of this struct (result->nodes[i]), so its size
     * never changes within a soversion: the per-node members of coming releases take these
     * slots, each planned in docs/api.md ("ABI policy"): reserved_u64[0] TLS flags (session
     * resumed), reserved_ptr[0] and [1] the TLS version and cipher. */
    uint64_t reserved_u64[3];
    /* A node that is a Redis Cluster (cluster://): "host:port" of the master that gave this
     * vote, after any redirect (NULL when no master answered, and for any other node). In place
     * of the first reserved pointer. */
    const char *answered_by;
    const void *reserved_ptr[3];
} redlock_node_result;

#define REDLOCK_ERROR_TEXT_MAX 160 /* per-node error texts are at most this long, NUL included */

/* The outcome of one operation; valid only while the callback runs. The library allocates it,
 * so members may be appended in a minor release (a program reads only those it knows). */
typedef struct redlock_result {
    int status; /* same as the callback's status */
    unsigned n_nodes;
    unsigned votes_yes, votes_no, votes_error, votes_timeout; /* of the last round */
    unsigned attempts;                /* rounds made (acquire retries + 1) */
    uint64_t elapsed_us;              /* from the call to the callback */
    const redlock_node_result *nodes; /* n_nodes entries, last round (a fenced acquire's
                                         commit round, once one ran) */
    uint64_t fence; /* the lock's fence (acquire, extend, release of a fenced lock), else 0 */
} redlock_result;

/* One callback type for acquire, extend and release.
 *   acquire: status 0 and lock set on success; lock NULL on failure.
 *   extend:  lock is the extended lock, status 0 if its validity was renewed.
 *   release: lock is the released lock; result->votes_yes is the number of nodes that deleted
 *            the key; status as redlock_release says (0: a quorum held the token and deleted
 *            it).
 * The result and everything it points to are valid only during the call. */
typedef void (*redlock_cb)(redlock_lock *lock, int status, const redlock_result *result,
                           void *data);
typedef void (*redlock_close_cb)(redlock_client *client, void *data);

/* Create a client on loop for n_nodes node URLs (1..REDLOCK_MAX_NODES). opts may be NULL for the
 * defaults; it and the URLs are copied. The client starts connecting at once; operations issued
 * before a node is connected wait for the connection within their deadline. Returns 0 and sets
 * *client_out, or REDLOCK_EINVAL / REDLOCK_EURL / REDLOCK_EDUPNODE / REDLOCK_ENOMEM with a message
 * in err (if not NULL), passwords redacted. Nothing is left allocated on failure. If the process
 * has closed descriptor 0, 1 or 2, they are reopened on /dev/null: libuv aborts when it closes a
 * socket that landed there. (A program that closes stdio must do the same before uv_loop_init,
 * for the loop's own descriptors; redlock_sync_new does it.) */
REDLOCK_EXTERN int redlock_client_new(struct uv_loop_s *loop, const char *const *node_urls,
                                      unsigned n_nodes, const redlock_options *opts,
                                      redlock_client **client_out, char *err, size_t err_len);

/* Close the client, releasing what it holds: first every lock the caller has a handle to and
 * has neither released nor freed (attached handles excepted: redlock_lock_attach), and every
 * acquire still in flight, is released on every node (one compare-and-delete round each, bounded
 * by the node timeout; a node that is down is skipped). Then every pending operation completes
 * with REDLOCK_ECANCELED, auto-extended locks get their lost callback with REDLOCK_ECANCELED,
 * every libuv handle is closed, every lock handle the client gave out is freed, close_cb runs
 * (may be NULL) and the client is freed. No new operation is accepted from the call on
 * (REDLOCK_ECLOSING). Returns REDLOCK_ECLOSING if already closing, REDLOCK_EINVAL for NULL.
 * Same as redlock_client_close_ex with flags 0. */
REDLOCK_EXTERN int redlock_client_close(redlock_client *client, redlock_close_cb close_cb,
                                        void *data);

/* Flags of redlock_client_close_ex and redlock_sync_free_ex. */
#define REDLOCK_CLOSE_FAST                                                                         \
    1u /* release nothing: held locks and acquires in flight keep their                            \
          keys until their ttl (a process that hands its locks on) */

/* redlock_client_close with flags: 0 or REDLOCK_CLOSE_FAST. Returns as redlock_client_close, or
 * REDLOCK_EINVAL for unknown flags (the client is not closed then). */
REDLOCK_EXTERN int redlock_client_close_ex(redlock_client *client, unsigned flags,
                                           redlock_close_cb close_cb, void *data);

/* Cancel every pending operation of this client whose callback data is data (the pointer given
 * to redlock_acquire, redlock_extend, redlock_release or redlock_inspect; give an operation a
 * data pointer of its own to cancel it alone). Each one's callback comes once, from the loop
 * (never from inside this call), with REDLOCK_ECANCELED and the per-node results so far. A
 * canceled acquire - waiting between attempts, with a round in flight, or won but not yet handed
 * out - leaves nothing held: its attempt is released on every node. A canceled extend's keys may
 * have been renewed on some nodes; the lock keeps the validity it had. A canceled release's
 * commands still run. The auto-extension's own extends are never canceled here
 * (redlock_auto_extend_stop). Allowed from any callback of the client. Returns 0 when at least
 * one was canceled, REDLOCK_ENOTFOUND when none is pending with this data (its callback has run,
 * or it was canceled already), REDLOCK_ECLOSING, or REDLOCK_EINVAL for a NULL client. */
REDLOCK_EXTERN int redlock_cancel(redlock_client *client, const void *data);

/* The message of the last error returned at once by a call on this client (the reason behind a
 * REDLOCK_EINVAL, say). Valid until the next call on the client. "" if none. */
REDLOCK_EXTERN const char *redlock_client_last_error(const redlock_client *client);

REDLOCK_EXTERN unsigned redlock_client_node_count(const redlock_client *client);
/* Node i's URL with the password redacted (NULL if out of range). */
REDLOCK_EXTERN const char *redlock_client_node_url(const redlock_client *client, unsigned i);
REDLOCK_EXTERN struct uv_loop_s *redlock_client_loop(const redlock_client *client);

/* Where a node's connection stands. */
typedef enum redlock_node_state {
    REDLOCK_NODE_CONNECTING = 0, /* its first connection is being made: requests wait for it */
    REDLOCK_NODE_UP,             /* connected and its handshake done: requests are written */
    REDLOCK_NODE_DOWN,           /* a connection failed and no new one is up yet: requests fail
                                    at once while it reconnects with backoff */
    REDLOCK_NODE_CLOSED          /* the client is closing */
} redlock_node_state;

/* "connecting", "up", "down", "closed" ("?" for others). */
REDLOCK_EXTERN const char *redlock_node_state_name(redlock_node_state state);

/* One node's state and counters, filled by redlock_client_node_info. The caller allocates it and
 * sets it up with redlock_node_info_init; the library fills only the `size` bytes the caller
 * has, so members may be appended. Counters count from the client's creation. */
typedef struct redlock_node_info {
    size_t size;     /* set by redlock_node_info_init; do not change */
    const char *url; /* password redacted; the client's copy (valid while the client lives) */
    redlock_node_state state;
    unsigned inflight;             /* requests waiting for their answer */
    unsigned owed;                 /* answers still owed to requests that timed out */
    unsigned consecutive_failures; /* requests in a row that ended in an error or a timeout
                                      (0 once a request is answered yes or no) */
    unsigned connect_failures;     /* connection attempts failed since it was last up */
    unsigned reserved_;            /* zero */
    uint64_t connects;             /* connections that came up (handshake done) */
    uint64_t disconnects;          /* connections lost or dropped after they came up */
    uint64_t requests;             /* requests sent to it */
    uint64_t answers;              /* requests answered by the server (any reply) */
    uint64_t errors;               /* requests that ended with an error vote (an error reply, the
                                      connection down or lost) */
    uint64_t timeouts;             /* requests that ended at their deadline */
    uint64_t rtt_us;               /* a moving average of the answered requests' latencies
                                      (from queueing to the answer, as latency_us), weight 1/8;
                                      0 before the first answer */
    uint64_t state_since_us;       /* when it entered its state, on the redlock_now_us() clock */
    char last_error[REDLOCK_ERROR_TEXT_MAX]; /* the last error of a request or of the
                                                connection, also after it recovered ("" if
                                                none yet); never holds a password */
    /* New members are appended here (docs/api.md, "ABI policy"). */
} redlock_node_info;

REDLOCK_EXTERN void redlock_node_info_init_sized(redlock_node_info *info, size_t size);
#define redlock_node_info_init(info) redlock_node_info_init_sized((info), sizeof(redlock_node_info))

/* Fill info (set up by redlock_node_info_init) with node i's state and counters. Cheap (no IO,
 * no allocation): read it every second and export it. Loop thread only, like every async call;
 * allowed from a log callback. Returns 0, or REDLOCK_EINVAL (NULL client or info, i out of
 * range, info not set up by redlock_node_info_init: nothing is written). */
REDLOCK_EXTERN int redlock_client_node_info(const redlock_client *client, unsigned i,
                                            redlock_node_info *info);

/* The client's counters, since its creation, filled by redlock_client_stats (set up by
 * redlock_stats_init; members may be appended, as for redlock_node_info). An acquire attempt is
 * one round; rounds_* count them by outcome. */
typedef struct redlock_stats {
    size_t size;                /* set by redlock_stats_init; do not change */
    uint64_t rounds_won;        /* acquire rounds won */
    uint64_t rounds_busy;       /* acquire rounds lost to another holder (REDLOCK_EBUSY) */
    uint64_t rounds_broken;     /* acquire rounds lost to failing or slow nodes (ENOQUORUM) */
    uint64_t rounds_expired;    /* acquire rounds a quorum won too late (EEXPIRED) */
    uint64_t extensions_ok;     /* extend rounds won (the caller's and auto-extension's) */
    uint64_t extensions_failed; /* extend rounds lost, whatever the reason */
    uint64_t locks_lost;        /* auto-extended locks reported lost (any reason but the
                                   client's close) */
    uint64_t releases_ok;       /* releases that completed 0 */
    uint64_t releases_lapsed;   /* ... REDLOCK_ELOST: the hold had lapsed */
    uint64_t releases_unknown;  /* ... REDLOCK_ENOQUORUM: too few nodes answered to tell */
    uint64_t slow_rounds;       /* rounds that took longer than slow_round_ms */
    unsigned pending;           /* operations whose callback has not run */
    unsigned locks;             /* lock handles the caller has and has not freed */
    unsigned locks_held;        /* ... of which held now (redlock_lock_is_held) */
    unsigned locks_auto;        /* ... of which auto-extended */
    /* Since 0.2.0: acquires won by grants, the queue's handoff (docs/algorithm.md, "Handoff by
     * grant"), with no round of their own; also counted in rounds_won. */
    uint64_t acquires_granted;
    /* New members are appended here (docs/api.md, "ABI policy"). */
} redlock_stats;

REDLOCK_EXTERN void redlock_stats_init_sized(redlock_stats *stats, size_t size);
#define redlock_stats_init(stats) redlock_stats_init_sized((stats), sizeof(redlock_stats))

/* Fill stats (set up by redlock_stats_init) with the client's counters. Cheap, loop thread only,
 * allowed from a log callback. Returns 0 or REDLOCK_EINVAL (as redlock_client_node_info). */
REDLOCK_EXTERN int redlock_client_stats(const redlock_client *client, redlock_stats *stats);

/* Auto-extension: the client keeps a held lock alive with extend rounds until it is released.
 * If it cannot (the keys were taken, too few nodes answer in time, the cap is reached, the
 * client closes), the lost callback fires exactly once, never silently, at the latest
 * lost_margin before the validity deadline - later only if the process itself was paused past
 * that moment (then on resume; no extension is reported won after the deadline all the same).
 * A node that comes back as a new server (a restart) triggers an extension at once. */
typedef void (*redlock_lost_cb)(redlock_lock *lock, int reason, void *data);

typedef struct redlock_auto_opts {
    size_t size;             /* set by redlock_auto_opts_init; do not change */
    double extend_at;        /* extend when this fraction of the ttl has passed (1/3), (0, 1) */
    unsigned max_extensions; /* 0: no cap; else "lost" with REDLOCK_ELIMIT after this many */
    unsigned extend_flags;   /* passed to every extend: REDLOCK_EXTEND_RETAKE or 0 */
    uint64_t lost_margin_ms; /* 0: ttl / 10 (at least 5 ms). Must be below the ttl */
    /* Called after every extension round the auto-extension ran, with its status and result
     * (as redlock_extend's callback: 0 renewed, or why not), before any lost callback that
     * follows from it; never after redlock_release, redlock_auto_extend_stop or the lost
     * callback. It may call redlock_release, redlock_auto_extend_stop or redlock_lock_free on
     * the lock. NULL: none. */
    redlock_cb extended_cb;
    void *extended_data;
    /* New members are appended here (docs/api.md, "ABI policy"). */
} redlock_auto_opts;

/* Fill opts with the defaults above and set opts->size (a macro, as redlock_options_init). */
REDLOCK_EXTERN void redlock_auto_opts_init_sized(redlock_auto_opts *opts, size_t size);
#define redlock_auto_opts_init(opts) redlock_auto_opts_init_sized((opts), sizeof(redlock_auto_opts))

/* Optional per-call settings of redlock_acquire; NULL means all defaults. */
typedef struct redlock_lock_opts {
    size_t size;       /* set by redlock_lock_opts_init; do not change */
    const char *token; /* caller's token (copied), NULL: 128 random bits as 32 hex digits,
                          fresh for every attempt. A caller's token is reused by retries, and a
                          lost attempt's release delayed by a reconnect could then delete the
                          winning attempt's key: with a caller token, prefer no retries */
    size_t token_len;  /* 1..REDLOCK_TOKEN_MAX bytes when token is set */
    int retry_count;   /* -1: the client's retry_count; used when wait_ms is 0 */
    uint64_t wait_ms;  /* > 0: keep retrying until this long after the call (retry_count is
                          then not consulted). Unless the client's no_notify, a release wakes the
                          waiter, and a waiter of one resource (not fenced) waits in the
                          resource's queue on every node: turns go in the order the waiters
                          began to wait, across clients (docs/operations.md) */
    /* Non-NULL: auto-extend the lock once taken (copied), as redlock_auto_extend would, started
     * before the acquire callback runs. */
    const redlock_auto_opts *auto_extend;
    redlock_lost_cb lost_cb; /* required with auto_extend */
    void *lost_data;
    /* Take a fencing token with the lock (false): a number that grows with every new holder of
     * the resource, for the protected store to check (redlock_lock_fence, docs/safety.md). It
     * costs a script instead of a SET on each node, and one more round (the commit) when the
     * nodes' counters disagree (contention, a node that was behind). */
    bool fencing;
    unsigned char reserved_fencing_[3]; /* zero; keeps the struct free of tail padding (ABI) */
    /* Commit acks a fenced acquisition needs (0: the quorum; else quorum..N). quorum + f keeps
     * fences growing while up to f nodes at a time may come back empty from a restart. Only with
     * fencing. */
    unsigned fence_commit;
    /* New members are appended here (docs/api.md, "ABI policy"). */
} redlock_lock_opts;

#define REDLOCK_TOKEN_MAX 256
#define REDLOCK_RESOURCE_MAX (64u * 1024 * 1024)
#define REDLOCK_RESOURCES_MAX 1024u /* resources of one redlock_acquire_multi */

/* Fill opts with the defaults above and set opts->size (a macro, as redlock_options_init). */
REDLOCK_EXTERN void redlock_lock_opts_init_sized(redlock_lock_opts *opts, size_t size);
#define redlock_lock_opts_init(opts) redlock_lock_opts_init_sized((opts), sizeof(redlock_lock_opts))

/* Acquire the lock on resource (len bytes, binary-safe, 1..REDLOCK_RESOURCE_MAX, copied) for
 * ttl_ms (0: the client's ttl). Rounds are retried after retry_delay +/- jitter while the retry
 * count or wait deadline allows; after each lost round the key is released on every node.
 * cb fires once: status 0 with a lock handle, or REDLOCK_EBUSY (held by others),
 * REDLOCK_ENOQUORUM (nodes failed), REDLOCK_EEXPIRED (quorum came too late for the validity),
 * REDLOCK_ECANCELED (client closed), REDLOCK_ENOMEM (a retry could not be allocated). Returns 0,
 * or REDLOCK_EINVAL / REDLOCK_ECLOSING / REDLOCK_ENOMEM at once (no callback). */
REDLOCK_EXTERN int redlock_acquire(redlock_client *client, const void *resource, size_t len,
                                   uint64_t ttl_ms, const redlock_lock_opts *opts, redlock_cb cb,
                                   void *data);

/* Acquire the lock on count resources at once (resources[i] of lens[i] bytes each, as
 * redlock_acquire's resource; copied): one token, and on each node one script that sets every
 * resource's key or none (none when any of them exists). A node votes yes only when it set them
 * all, so the round is won only with a quorum of nodes that granted the whole set; a lost round
 * is released everywhere as for one resource. 1..REDLOCK_RESOURCES_MAX resources, at most
 * REDLOCK_RESOURCE_MAX bytes in all, no two alike (REDLOCK_EINVAL, naming the pair). The lock
 * handle covers the set: redlock_extend renews all of them (a node votes yes only if every key
 * still holds the token; with REDLOCK_EXTEND_RETAKE a missing key is set again when the others
 * hold it), redlock_release deletes every key that still holds the token (a node votes yes only
 * if all of them did), auto-extension and the lost callback as for one resource. A waiter
 * (opts->wait_ms) is woken by the release of any resource of the set. Fencing is for one
 * resource: opts->fencing with count > 1 is REDLOCK_EINVAL. In a Redis Cluster a node's keys
 * must share one hash slot (a hash tag). count 1 is redlock_acquire. Callback and returns as
 * redlock_acquire. */
REDLOCK_EXTERN int redlock_acquire_multi(redlock_client *client, const void *const *resources,
                                         const size_t *lens, unsigned count, uint64_t ttl_ms,
                                         const redlock_lock_opts *opts, redlock_cb cb, void *data);

/* Flags of redlock_extend. */
#define REDLOCK_EXTEND_RETAKE 1u /* on a node where the key is gone, SET it again (NX) */

/* Extend the lock to ttl_ms (0: the lock's ttl) from now with a compare-and-pexpire round. Won
 * only if a quorum renews it before the current validity runs out; then the lock's validity and
 * deadline are updated. With REDLOCK_EXTEND_RETAKE a node that lost the key (restarted) gets it
 * back with SET NX and counts toward the quorum. No extend re-creates a key unless the lock is
 * known to have been held without a gap since its last won round, so RETAKE is refused
 * (REDLOCK_EINVAL, with a message) on an attached lock until an extend without it has won, and
 * on a lock an extend found lost (REDLOCK_ELOST, also auto-extension's) until an extend without
 * it wins again. cb: 0, REDLOCK_ELOST (a quorum no longer holds our token), REDLOCK_ENOQUORUM,
 * REDLOCK_EEXPIRED (validity ran out during the round), REDLOCK_ECANCELED. Returns at once
 * REDLOCK_EEXPIRED if the validity already ran out, REDLOCK_ERELEASED after release,
 * REDLOCK_EINVAL, REDLOCK_ECLOSING or REDLOCK_ENOMEM. */
REDLOCK_EXTERN int redlock_extend(redlock_lock *lock, uint64_t ttl_ms, unsigned flags,
                                  redlock_cb cb, void *data);

/* Release the lock on every node with a compare-and-delete round (waits for every node's answer
 * or deadline so the count is exact); the key is deleted wherever it still holds our token. The
 * status is a statement about the whole hold, from the acquire to this call, decided from what
 * the library knows and the votes of N nodes (quorum = N/2 + 1):
 *   REDLOCK_ELOST      the hold had lapsed or was taken over before the release: the work done
 *                      under it may not have been exclusive. Either the call came at or after
 *                      the lock's deadline (its validity ran out; never for an attached lock,
 *                      whose deadline is unknown), or an extend had found the lock lost
 *                      (REDLOCK_ELOST) and none has won since, or votes_no > N - quorum: even
 *                      counting every node that did not answer as a holder, fewer than a quorum
 *                      held the token;
 *   0                  otherwise, when votes_yes >= quorum: a quorum still held our token;
 *   REDLOCK_ENOQUORUM  otherwise: too few nodes answered to tell (the key may live on some
 *                      nodes until its ttl);
 *   REDLOCK_ECANCELED  the client was closed first.
 * The handle stays valid (for its token, say) until redlock_lock_free or the client's close.
 * Returns at once REDLOCK_ERELEASED if already released, REDLOCK_EINVAL (NULL lock or cb),
 * REDLOCK_ECLOSING or REDLOCK_ENOMEM. Allowed while an extend is in flight: on each node the
 * release runs after it. */
REDLOCK_EXTERN int redlock_release(redlock_lock *lock, redlock_cb cb, void *data);

/* Forget the handle (without releasing anything on the nodes). If an operation on it is still in
 * flight, its callback still fires and the handle is freed after it. NULL is allowed. */
REDLOCK_EXTERN void redlock_lock_free(redlock_lock *lock);

/* Accessors. Returned pointers live as long as the handle. A NULL lock is allowed and reads as
 * empty: NULL pointers (with *len = 0), zero numbers, not held; set_data then does nothing. */
/* The resource (the first one of a lock on several, redlock_acquire_multi). */
REDLOCK_EXTERN const void *redlock_lock_resource(const redlock_lock *lock, size_t *len);
/* How many resources the lock covers (1 unless taken by redlock_acquire_multi; 0 for NULL). */
REDLOCK_EXTERN unsigned redlock_lock_resource_count(const redlock_lock *lock);
/* Resource i (0..count - 1) of the lock, in the order they were given; NULL with *len = 0 when i
 * is out of range. */
REDLOCK_EXTERN const void *redlock_lock_resource_at(const redlock_lock *lock, unsigned i,
                                                    size_t *len);
/* The token, NUL-terminated (a caller's token may contain NULs; use len). */
REDLOCK_EXTERN const char *redlock_lock_token(const redlock_lock *lock, size_t *len);
/* Validity left at the last won round (acquire or extend), in ms. */
REDLOCK_EXTERN uint64_t redlock_lock_validity_ms(const redlock_lock *lock);
/* When that validity runs out, on the redlock_now_us() clock. */
REDLOCK_EXTERN uint64_t redlock_lock_deadline_us(const redlock_lock *lock);
REDLOCK_EXTERN uint64_t redlock_lock_ttl_ms(const redlock_lock *lock);
/* The lock's fencing token: a number larger than that of every earlier holder of the resource
 * that took one (redlock_lock_opts.fencing), and smaller than every later one's. Hand it to the
 * protected store with each write; the store refuses a write whose fence is below the largest it
 * has accepted (docs/safety.md). 0 for a lock taken without fencing, and for an attached one.
 * Extensions keep it. */
REDLOCK_EXTERN uint64_t redlock_lock_fence(const redlock_lock *lock);
/* true while now < deadline, until release is called or the lock is reported lost: by
 * auto-extension, or by the check of every held lock after a node came back as a new server
 * (a restart), which finds fewer than a quorum holding its token (an extend the caller starts
 * after that, if won, makes it held again). */
REDLOCK_EXTERN bool redlock_lock_is_held(const redlock_lock *lock, uint64_t now_us);
REDLOCK_EXTERN redlock_client *redlock_lock_client(const redlock_lock *lock);
/* A pointer for the caller; the library never touches it. */
REDLOCK_EXTERN void redlock_lock_set_data(redlock_lock *lock, void *data);
REDLOCK_EXTERN void *redlock_lock_get_data(const redlock_lock *lock);

/* Start auto-extension of a held lock (opts NULL: defaults; copied). lost_cb is required and
 * fires exactly once if the hold ends other than by redlock_release, redlock_auto_extend_stop
 * or redlock_lock_free, with reason REDLOCK_ELOST (a quorum no longer holds the token),
 * REDLOCK_ENOQUORUM or REDLOCK_EEXPIRED (no extension could be won in time), REDLOCK_ELIMIT
 * (max_extensions reached) or REDLOCK_ECANCELED (the client is closing; fires before the
 * close callback). Returns 0, REDLOCK_EEXPIRED (validity already ran out), REDLOCK_ERELEASED,
 * REDLOCK_EINVAL (bad opts, NULL lost_cb, already auto-extended, an attached lock no extend has
 * won yet, extend_flags with REDLOCK_EXTEND_RETAKE on a lock an extend found lost) or
 * REDLOCK_ECLOSING. */
REDLOCK_EXTERN int redlock_auto_extend(redlock_lock *lock, const redlock_auto_opts *opts,
                                       redlock_lost_cb lost_cb, void *data);
/* Stop auto-extension (no lost callback). Harmless when not auto-extended. */
REDLOCK_EXTERN void redlock_auto_extend_stop(redlock_lock *lock);
/* Extensions won by auto-extension so far. */
REDLOCK_EXTERN unsigned redlock_lock_extensions(const redlock_lock *lock);

/* A handle for a lock taken elsewhere (another process: the command-line tool's "release KEY
 * TOKEN"), so it can be extended or released. resource and token are copied. Its validity is
 * unknown until an extend wins: redlock_lock_validity_ms() is 0, extend is not refused as
 * expired, and an extend with REDLOCK_EXTEND_RETAKE is refused (REDLOCK_EINVAL): the keys may
 * have expired and been taken and released by another holder since, and retaking them would
 * report that gap as a continuous hold. Extend it without the flag first: a win proves a quorum
 * still holds the token and fixes the deadline. Free it with redlock_lock_free. Returns 0,
 * REDLOCK_EINVAL, REDLOCK_ECLOSING or REDLOCK_ENOMEM. */
REDLOCK_EXTERN int redlock_lock_attach(redlock_client *client, const void *resource, size_t len,
                                       const void *token, size_t token_len, uint64_t ttl_ms,
                                       redlock_lock **lock_out);

/* Read the resource's key on every node: its value (the holder's token) and PTTL, in each
 * node's result entry (value, value_len, pttl_ms). One round, decided when every node answered
 * or timed out; it never changes anything. cb gets lock NULL and status 0 when a quorum
 * answered, else REDLOCK_ENOQUORUM. Returns at once REDLOCK_EINVAL, REDLOCK_ECLOSING or
 * REDLOCK_ENOMEM. */
REDLOCK_EXTERN int redlock_inspect(redlock_client *client, const void *resource, size_t len,
                                   redlock_cb cb, void *data);
/* Inspect a set of resources (checked as by redlock_acquire_multi) in one script per node. A
 * node where every key holds the same value (one holder has the whole set) votes yes with that
 * value and the smallest PTTL of the set; where none exists, no; where they differ (the set is
 * split, which a live lock of this library never leaves behind, or different locks hold its
 * parts), error, with a text naming the first resource that differs. Status as redlock_inspect
 * (errors do not count as answers). */
REDLOCK_EXTERN int redlock_inspect_multi(redlock_client *client, const void *const *resources,
                                         const size_t *lens, unsigned count, redlock_cb cb,
                                         void *data);

/* ---------------------------------------------------------------------------------------------
 * 5. The blocking, thread-safe client
 *
 * A redlock_sync owns a loop thread with an async client on it; any thread may call it at
 * once. Each call blocks until its operation completes. Lock handles of a sync client are
 * redlock_sync_lock, safe to read from any thread. Every call that takes a redlock_report *
 * accepts NULL; any other report must have been set up by redlock_report_init, else the call
 * returns REDLOCK_EINVAL at once and does nothing.
 * ------------------------------------------------------------------------------------------- */

typedef struct redlock_sync redlock_sync;
typedef struct redlock_sync_lock redlock_sync_lock;

#define REDLOCK_MESSAGE_MAX 256 /* redlock_report.message, NUL included */

/* An owned copy of a redlock_result, for callers that outlive a callback. The caller allocates
 * it and sets it up with redlock_report_init; the library fills only the `size` bytes the
 * caller has. */
typedef struct redlock_report {
    size_t size; /* set by redlock_report_init; do not change */
    int status;
    unsigned n_nodes;
    unsigned votes_yes, votes_no, votes_error, votes_timeout;
    unsigned attempts;
    uint64_t elapsed_us;
    /* Why the call failed before any round ran (the reason behind a REDLOCK_EINVAL, say: what
     * redlock_client_last_error says for the async call), NUL-terminated; "" after a round. */
    char message[REDLOCK_MESSAGE_MAX];
    /* url points to the client's copy (valid while the client lives), error into errors[],
     * value into values[] (truncated to REDLOCK_TOKEN_MAX bytes). */
    redlock_node_result nodes[REDLOCK_MAX_NODES];
    char errors[REDLOCK_MAX_NODES][REDLOCK_ERROR_TEXT_MAX];
    char values[REDLOCK_MAX_NODES][REDLOCK_TOKEN_MAX + 1];
    uint64_t fence; /* as redlock_result.fence */
    /* New members are appended here (docs/api.md, "ABI policy"). */
} redlock_report;

/* Set report up as empty (status 0, no nodes) and set report->size (a macro, as
 * redlock_options_init). Every function that fills a report refuses one whose size was not set
 * this way: with REDLOCK_EINVAL, before doing anything else. */
REDLOCK_EXTERN void redlock_report_init_sized(redlock_report *report, size_t size);
#define redlock_report_init(report) redlock_report_init_sized((report), sizeof(redlock_report))

/* Copy result into report (deep: error texts and values are copied). Returns 0, or
 * REDLOCK_EINVAL (report not set up by redlock_report_init: nothing is written). NULL report:
 * nothing to do, 0. */
REDLOCK_EXTERN int redlock_report_copy(redlock_report *report, const redlock_result *result);

/* Start the loop thread and a client on it (arguments as redlock_client_new). Returns 0 and
 * *sync_out, or an error with a message in err. */
REDLOCK_EXTERN int redlock_sync_new(const char *const *node_urls, unsigned n_nodes,
                                    const redlock_options *opts, redlock_sync **sync_out, char *err,
                                    size_t err_len);

/* Close: as redlock_client_close, every lock held through a redlock_sync_lock not yet freed or
 * released (attached ones excepted) and every acquire in flight is released on every node first
 * (bounded by the node timeout); calls in flight on other threads return REDLOCK_ECANCELED,
 * auto-extended locks get their lost callback with REDLOCK_ECANCELED, the thread is joined,
 * everything is freed (including every redlock_sync_lock not yet freed). Must not be called from
 * a lost callback. NULL is allowed. Same as redlock_sync_free_ex with flags 0. */
REDLOCK_EXTERN void redlock_sync_free(redlock_sync *sync);
/* redlock_sync_free with flags: 0 or REDLOCK_CLOSE_FAST (release nothing); unknown flags are
 * ignored as if 0. */
REDLOCK_EXTERN void redlock_sync_free_ex(redlock_sync *sync, unsigned flags);

/* Abandon a blocking call in progress on another thread: the call that was given report (its
 * redlock_report, which identifies it: give each call you may cancel a report of its own) returns
 * REDLOCK_ECANCELED promptly, as redlock_cancel describes (a canceled acquire leaves nothing
 * held). From any thread but the library's (not from a lost or log callback: REDLOCK_EINVAL).
 * Returns 0, REDLOCK_ENOTFOUND when no call with this report is in progress (it has returned,
 * or has not been made yet), REDLOCK_ECLOSING, or REDLOCK_EINVAL (NULL sync or report). */
REDLOCK_EXTERN int redlock_sync_cancel(redlock_sync *sync, const redlock_report *report);

/* Acquire (as redlock_acquire; opts may ask for wait_ms and auto_extend). The lost callback then
 * runs on the library's thread and gets the inner async handle, whose redlock_lock_get_data()
 * is the redlock_sync_lock (do not overwrite it); blocking calls from it return REDLOCK_EINVAL.
 * On success *lock_out is set. report may be NULL. Returns the operation's status. */
REDLOCK_EXTERN int redlock_sync_acquire(redlock_sync *sync, const void *resource, size_t len,
                                        uint64_t ttl_ms, const redlock_lock_opts *opts,
                                        redlock_sync_lock **lock_out, redlock_report *report);
/* Acquire several resources at once (as redlock_acquire_multi), blocking; the handle covers
 * the set (extend, release, free as for one resource). */
REDLOCK_EXTERN int redlock_sync_acquire_multi(redlock_sync *sync, const void *const *resources,
                                              const size_t *lens, unsigned count, uint64_t ttl_ms,
                                              const redlock_lock_opts *opts,
                                              redlock_sync_lock **lock_out, redlock_report *report);
/* Extend and release as redlock_extend and redlock_release, blocking, with the same statuses:
 * release returns 0 only when the hold was valid at the call and a quorum deleted our token,
 * REDLOCK_ELOST when the hold had lapsed, REDLOCK_ENOQUORUM when too few nodes answered to tell.
 * An extend refused at once (RETAKE on an attached or lost lock, say) returns REDLOCK_EINVAL with
 * the reason in report->message. */
REDLOCK_EXTERN int redlock_sync_extend(redlock_sync_lock *lock, uint64_t ttl_ms, unsigned flags,
                                       redlock_report *report);
REDLOCK_EXTERN int redlock_sync_release(redlock_sync_lock *lock, redlock_report *report);
/* Free the handle (without releasing; stops auto-extension). NULL is allowed. */
REDLOCK_EXTERN void redlock_sync_lock_free(redlock_sync_lock *lock);

/* A handle for a lock taken elsewhere (as redlock_lock_attach): resource and token are copied,
 * no round is run, and the validity is unknown until an extend wins (validity 0, deadline
 * UINT64_MAX, status 0). Extend, release and free it like an acquired one, except that an extend
 * with REDLOCK_EXTEND_RETAKE is refused (REDLOCK_EINVAL) until one without it has won. Returns 0
 * and *lock_out, REDLOCK_EINVAL (NULL or empty arguments, a token over REDLOCK_TOKEN_MAX bytes, a
 * ttl over REDLOCK_TTL_MAX_MS), REDLOCK_ECLOSING or REDLOCK_ENOMEM. */
REDLOCK_EXTERN int redlock_sync_attach(redlock_sync *sync, const void *resource, size_t len,
                                       const void *token, size_t token_len, uint64_t ttl_ms,
                                       redlock_sync_lock **lock_out);

/* Read the resource's key on every node (as redlock_inspect): each node's value (the holder's
 * token, in report->values) and PTTL land in report->nodes[i]. Changes nothing. Returns 0 when
 * a quorum answered, REDLOCK_ENOQUORUM, or REDLOCK_EINVAL, REDLOCK_ECLOSING, REDLOCK_ENOMEM.
 * report may be NULL (then only the status is learnt). */
REDLOCK_EXTERN int redlock_sync_inspect(redlock_sync *sync, const void *resource, size_t len,
                                        redlock_report *report);
/* Inspect a set of resources (as redlock_inspect_multi), blocking; report as redlock_sync_inspect
 * (a node whose keys differ has its text in report->errors). */
REDLOCK_EXTERN int redlock_sync_inspect_multi(redlock_sync *sync, const void *const *resources,
                                              const size_t *lens, unsigned count,
                                              redlock_report *report);

/* redlock_client_node_info and redlock_client_stats of the sync client's inner client, from any
 * thread: the call waits for the library's thread to fill the caller's struct (one wake-up, no
 * IO). Returns as those do, or REDLOCK_ECLOSING (redlock_sync_free has started), REDLOCK_EINVAL
 * from a lost or log callback (use the async client those get, with redlock_client_node_info),
 * REDLOCK_ENOMEM. */
REDLOCK_EXTERN int redlock_sync_node_info(redlock_sync *sync, unsigned i, redlock_node_info *info);
REDLOCK_EXTERN int redlock_sync_stats(redlock_sync *sync, redlock_stats *stats);

/* Thread-safe reads. The token is NUL-terminated; resource and token live with the handle. A
 * NULL lock reads as empty (NULL pointers with *len = 0, zero numbers). */
REDLOCK_EXTERN const void *redlock_sync_lock_resource(const redlock_sync_lock *lock, size_t *len);
/* As redlock_lock_resource_count and redlock_lock_resource_at. */
REDLOCK_EXTERN unsigned redlock_sync_lock_resource_count(const redlock_sync_lock *lock);
REDLOCK_EXTERN const void *redlock_sync_lock_resource_at(const redlock_sync_lock *lock, unsigned i,
                                                         size_t *len);
REDLOCK_EXTERN const char *redlock_sync_lock_token(const redlock_sync_lock *lock, size_t *len);
REDLOCK_EXTERN uint64_t redlock_sync_lock_validity_ms(const redlock_sync_lock *lock);
REDLOCK_EXTERN uint64_t redlock_sync_lock_deadline_us(const redlock_sync_lock *lock);
/* The lock's fencing token (as redlock_lock_fence; 0 without fencing). */
REDLOCK_EXTERN uint64_t redlock_sync_lock_fence(const redlock_sync_lock *lock);
/* 0 while held; after an auto-extended lock was lost, the reason given to its lost callback;
 * REDLOCK_ELOST once the check after a node's restart found a lock without it lost;
 * REDLOCK_ERELEASED after release, whatever the release found (whether the hold had lapsed is
 * the release's own return value); REDLOCK_EEXPIRED once the deadline passed otherwise;
 * REDLOCK_EINVAL for a NULL lock. */
REDLOCK_EXTERN int redlock_sync_lock_status(const redlock_sync_lock *lock);

#ifdef __cplusplus
}
#endif

#endif /* REDLOCK_H */
