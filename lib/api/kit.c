/* SPDX-License-Identifier: MIT */
/* kit.c - the test kit's entry point (kit.h). */
#include "kit.h"

#include <string.h>

#include "abi.h"

static int kit_client_new(const char *const *node_urls, unsigned n_nodes,
                          const redlock_options *opts, redlock__io_factory make_io, void *make_ctx,
                          redlock_client **client_out, char *err, size_t err_len)
{
    return redlock__client_new_io(NULL, node_urls, n_nodes, opts, make_io, make_ctx, client_out,
                                  err, err_len);
}

static int kit_encode(const redlock__cmd *cmd, unsigned grant_tag, redlock__buf *out,
                      const redlock__alloc *alloc)
{
    return redlock__cmd_append_tagged(cmd, grant_tag, false, out, alloc);
}

static const redlock__kit kit = {
    kit_client_new,   kit_encode,       redlock__buf_free,    redlock__cmd_vote,  redlock__cmd_name,
    redlock__scripts, REDLOCK__SCRIPTS, redlock__struct_init, redlock__struct_in,
};

const redlock__kit *redlock__kit_get(const char *version, uint64_t layout)
{
    if (version == NULL || strcmp(version, REDLOCK_VERSION_STRING) != 0 ||
        layout != REDLOCK__KIT_LAYOUT)
        return NULL;
    return &kit;
}
