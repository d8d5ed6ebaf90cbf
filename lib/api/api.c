/* SPDX-License-Identifier: MIT */
/* api.c - the top of the library: where the layers are put together. Making a client makes its
 * core (client.c) on the io, then starts what listens on it (the recheck, which sets its own
 * callbacks); closing one begins the close (client.c) and hands it to the operations (op.c: the
 * releases still out waited for, what the caller holds released). Once the io has closed, the
 * client core ends every object still open through the closer each one linked in itself
 * (client.h): every operation delivered, every auto-extension told, every hold of redlock_using
 * ended, every handle freed. An acquire's call is acquire_call.c's. Everything below calls down
 * only. */
#include "op.h"

#include "io_uv.h"
#include "recheck.h"

/* ---- the client ------------------------------------------------------------------------------ */

/* A client core with the io make_io makes, and the features that listen on it started: the recheck
 * sets its callbacks on the client and its io (recheck.h). */
static int client_make(uv_loop_t *loop, const char *const *node_urls, unsigned n_nodes,
                       const redlock_options *opts, redlock__io_factory make_io, void *make_ctx,
                       redlock_client **client_out, char *err, size_t err_len)
{
    int rc = redlock__client_create(loop, node_urls, n_nodes, opts, make_io, make_ctx, client_out,
                                    err, err_len);
    if (rc == 0)
        redlock__recheck_start(*client_out);
    return rc;
}

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
    return client_make(loop, node_urls, n_nodes, opts, make_uv_io, loop, client_out, err, err_len);
}

int redlock__client_new_io(uv_loop_t *loop, const char *const *node_urls, unsigned n_nodes,
                           const redlock_options *opts, redlock__io_factory make_io, void *make_ctx,
                           redlock_client **client_out, char *err, size_t err_len)
{
    return client_make(loop, node_urls, n_nodes, opts, make_io, make_ctx, client_out, err, err_len);
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
    redlock__ops_close(c, flags);
    return 0;
}
