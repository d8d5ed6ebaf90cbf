/* SPDX-License-Identifier: MIT */
/* io_uv.h - the real implementation of io.h: N libuv nodes, one uv_timer_t for the client's
 * timer queue, uv_random for tokens. */
#ifndef REDLOCK_IO_UV_H
#define REDLOCK_IO_UV_H

#include <stdbool.h>

#include <uv.h>

#include "io.h"
#include "node.h"

/* Create the io for n nodes (configs copied; the urls and names they point to must outlive the
 * io). Nodes start connecting at once. Returns 0 or REDLOCK_ENOMEM (nothing left allocated). */
int redlock__io_uv_new(uv_loop_t *loop, const redlock__node_config *cfgs, unsigned n,
                       const redlock__alloc *alloc, redlock__io **out);
/* Node i of an io made by redlock__io_uv_new, or NULL (another io, such as the simulator's, or
 * i out of range, or a node that is a Redis Cluster). For tests and the bench. */
redlock__node *redlock__io_uv_node(redlock__io *io, unsigned i);

#endif
