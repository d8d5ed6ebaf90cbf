/* SPDX-License-Identifier: MIT */
/* raw.h - the baseline: the same commands to the same nodes as a lock cycle, with no lock logic.
 *
 * A cycle writes SET key token NX PX ttl to every node at once and decides exactly as the
 * library does: at the quorum-th (N/2+1) OK, or as soon as a quorum can no longer be reached;
 * then it writes the library's release script (compare-and-delete, EVALSHA) to every node and
 * decides it as the library's release does, at the quorum. What it leaves out is everything else
 * the library does: validity arithmetic, per-node deadlines, retries, tokens from a CSPRNG, result
 * objects, handles, callbacks per operation.
 *
 * Its IO is what a careful user would write, and the library's own shape: libuv owns the sockets
 * (TCP_NODELAY), hiredis only encodes (redisFormatCommandArgv, which the library used too before it
 * got an encoder of its own, lib/core/command.c: cheaper, bench/HISTORY.md) and parses
 * (redisReader); each node has one output buffer that goes out at once when no write is in flight
 * and otherwise rides with the next write; replies are matched to requests by a FIFO per
 * connection. So `lock / raw` says what the lock logic adds, not how two kinds of glue differ.
 *
 * RAW_WAIT_ALL (waiting for every SET answer before the release) is kept as a labelled second
 * baseline: it shows what deciding at the quorum is worth. */
#ifndef BENCH_RAW_H
#define BENCH_RAW_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

typedef struct raw raw;

typedef enum raw_wait {
    RAW_WAIT_QUORUM, /* the SET is decided at N/2+1 OK answers (the library's rule) */
    RAW_WAIT_ALL,    /* ... only when every node has answered */
} raw_wait;

/* The SHA1 of the release script as the servers loaded it (40 hex digits): the library's. */
const char *raw_release_sha1(const raw *r);

/* "quorum" or "all", for the rows. */
const char *raw_wait_name(raw_wait wait);

/* Connect to every node URL (redis://host:port or unix://, with AUTH and SELECT as the URL says)
 * and load the release script; runs the loop until ready. NULL with a message in err on
 * failure (nothing left open). */
raw *raw_new(uv_loop_t *loop, const char *const *urls, unsigned n, char *err, size_t err_len);
/* Runs the loop until no node owes a cycle an answer, then closes the connections; run the loop
 * afterwards to let the handles close. No cycle may be waiting for its callback. */
void raw_free(raw *r);

/* won: the SET reached a quorum. set_us: from the first write to the decision; release_us: from
 * the decision to the release's (at the quorum of deletes, or the last answer with RAW_WAIT_ALL).
 */
typedef void (*raw_done_cb)(void *data, int won, uint64_t set_us, uint64_t release_us);

/* One cycle on key (len bytes, copied): the SET to every node, the decision per wait, then the
 * release to every node; cb once the release is decided. A connection that fails ends
 * the program with a message (the baseline runs on healthy nodes only). */
void raw_cycle(raw *r, const char *key, size_t key_len, uint64_t ttl_ms, raw_wait wait,
               raw_done_cb cb, void *data);

#endif
