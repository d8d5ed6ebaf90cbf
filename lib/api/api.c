/* SPDX-License-Identifier: MIT */
/* api.c - the top of the library: where the layers are put together. Making a client installs
 * the hooks through which the client core reaches the layers above it (client.h); closing one
 * runs the close in order (the releases still out waited for, what the caller holds released,
 * then, once the io is closed, every operation delivered, every auto-extension told, every handle
 * freed). An acquire's call is acquire_call.c's. Everything below calls down only. */
#include "op.h"

#include "autoextend.h"
#include "io_uv.h"
#include "recheck.h"
#include "using.h"

/* ---- the client ------------------------------------------------------------------------------ */

/* The io closed: every operation delivered (canceled), then every auto-extension told, then
 * every handle freed, before the close callback. */
static void io_closed(redlock_client *c)
{
    redlock__ops_cancel_all(c);
    redlock__auto_cancel_all(c);
    redlock__using_cancel_all(c);
    redlock__lock_free_all(c);
}

static const redlock__hooks hooks = {
    .notified = redlock__waiter_notified,
    .node_changed = redlock__recheck_node,
    .io_closed = io_closed,
    .kept_lost = redlock__recheck_kept_lost,
    .auto_start = redlock_auto_extend,
    .deadline_moved = redlock__auto_moved,
    .lock_ended = redlock__auto_stop,
    .signaled = redlock__ops_cancel_fired,
};

static int make_uv_io(void *ctx, const redlock__node_config *cfgs, unsigned n,
                      const redlock__alloc *alloc, redlock__io **out)
{
    return redlock__io_uv_new(ctx, cfgs, n, alloc, out);
}

int redlock_client_new(uv_loop_t *loop, const char *const *node_urls, unsigned n_nodes,
                       const redlock_options *opts, redlock_client **client_out, char *err,
                       size_t err_len)
{
    if (loop == NULL) {
        char scratch[1];
        redlock__err_start(&err, &err_len, scratch, sizeof(scratch));
        redlock__fmt(err, err_len, "loop must not be NULL");
        return REDLOCK_EINVAL;
    }
    return redlock__client_create(loop, node_urls, n_nodes, opts, make_uv_io, loop, &hooks,
                                  client_out, err, err_len);
}

int redlock__client_new_io(uv_loop_t *loop, const char *const *node_urls, unsigned n_nodes,
                           const redlock_options *opts, redlock__io_factory make_io, void *make_ctx,
                           redlock_client **client_out, char *err, size_t err_len)
{
    return redlock__client_create(loop, node_urls, n_nodes, opts, make_io, make_ctx, &hooks,
                                  client_out, err, err_len);
}

int redlock_client_close(redlock_client *c, redlock_close_cb close_cb, void *data)
{
    return redlock_client_close_ex(c, 0, close_cb, data);
}

int redlock_client_close_ex(redlock_client *c, unsigned flags, redlock_close_cb close_cb,
                            void *data)
{
    int rc = redlock__client_close_begin(c, flags, close_cb, data);
    if (rc != 0)
        return rc;
    redlock__ops_cancelers_detach(c); /* before the io (and its wake-up handle) may close */
    redlock__ops_close_waits(c);
    if ((flags & REDLOCK_CLOSE_FAST) == 0)
        redlock__ops_release_all(c);
    redlock__client_close_step(c); /* the step begin counted: the releases are started */
    return 0;
}
