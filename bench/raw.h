/* raw.h - the baseline: the same SET NX PX and compare-and-delete fanned out to the same nodes
 * over the same transport (hiredis async on the same libuv loop), with no lock logic at all:
 * no quorum, no validity, no retries, no per-node deadlines. Every lock figure is shown next to
 * this one, measured in the same run, so it means something on any machine. */
#ifndef BENCH_RAW_H
#define BENCH_RAW_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

typedef struct raw raw;

/* Connect to every node URL (redis:// or unix://, with AUTH and SELECT as the URL says) and load
 * the release script; runs the loop until ready. NULL with a message on stderr on failure. */
raw *raw_new(uv_loop_t *loop, const char *const *urls, unsigned n);
void raw_free(raw *r); /* disconnects; run the loop afterwards to let the handles close */

typedef void (*raw_done_cb)(void *data, uint64_t set_us, uint64_t cycle_us);

/* One cycle on key: SET key token NX PX ttl to every node, wait for every answer, then the
 * compare-and-delete to every node, wait for every answer, then cb (set_us: time to the last
 * SET answer; cycle_us: the whole cycle). The key is copied. */
void raw_cycle(raw *r, const char *key, uint64_t ttl_ms, raw_done_cb cb, void *data);

#endif
