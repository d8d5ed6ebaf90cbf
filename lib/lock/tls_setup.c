/* SPDX-License-Identifier: MIT */
/* tls_setup.c - the client's TLS context, made at client creation when a node is rediss://.
 * Kept out of client.c so the client's life reads the same with or without TLS. */
#include "client.h"

int redlock__client_tls_setup(redlock_client *c, char *err, size_t err_len)
{
    const redlock_options *o = &c->opts;
    unsigned first_tls = c->n_nodes;
    for (unsigned i = 0; i < c->n_nodes && first_tls == c->n_nodes; i++) {
        if (c->urls[i].tls)
            first_tls = i;
    }
    if (first_tls == c->n_nodes)
        return 0; /* no TLS node: the tls_* options are not even looked at */
    if (!redlock__tls_built_in()) {
        redlock__fmt(err, err_len,
                     "node %u (%s): TLS (rediss://) is not built into this library (it was built "
                     "without OpenSSL)",
                     first_tls, c->urls[first_tls].redacted);
        return REDLOCK_EINVAL;
    }
    return redlock__tls_ctx_new(o, &c->alloc, &c->tls, err, err_len);
}
