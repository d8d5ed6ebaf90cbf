/* SPDX-License-Identifier: MIT */
/* kit.h - the one semi-public entry point of libredlock: what the test kit (lib/sim/,
 * libredlock-sim, <redlock/sim.h>) takes of the library's internals.
 *
 * The kit links libredlock instead of carrying a copy of it (docs/testing.md, "How the kit is
 * built"), so it cannot call the library's hidden functions by name. It asks for this table
 * instead, once per fleet, with the version and struct layout it was compiled with; the table
 * is handed only to a kit of this very build's version and layout, because the kit reads the
 * library's internal structs (the io, its requests, the commands). Not part of the ABI: any
 * release may change it, and the pin is what makes that safe. */
#ifndef REDLOCK_KIT_H
#define REDLOCK_KIT_H

#include <stddef.h>
#include <stdint.h>

#include "client.h"
#include "command.h"
#include "io.h"
#include "scripts.h"

/* The layout the kit was compiled against: the sizes of the internal structs it reads or fills,
 * folded into one number. */
#define REDLOCK__KIT_LAYOUT                                                                        \
    ((((((((uint64_t)sizeof(redlock__cmd) * 1009u + sizeof(redlock__req)) * 1009u +                \
          sizeof(redlock__io)) *                                                                   \
             1009u +                                                                               \
         sizeof(redlock__io_ops)) *                                                                \
            1009u +                                                                                \
        sizeof(redlock__reply_data)) *                                                             \
           1009u +                                                                                 \
       sizeof(redlock__node_config)) *                                                             \
          1009u +                                                                                  \
      sizeof(redlock__buf)) *                                                                      \
         1009u +                                                                                   \
     sizeof(redlock__script))

typedef struct redlock__kit {
    /* A client on the io that make_io makes (redlock__client_new_io, without a loop). */
    int (*client_new)(const char *const *node_urls, unsigned n_nodes, const redlock_options *opts,
                      redlock__io_factory make_io, void *make_ctx, redlock_client **client_out,
                      char *err, size_t err_len);
    /* cmd's RESP encoding, grant tag and all, appended to out (redlock__cmd_append_tagged). */
    int (*encode)(const redlock__cmd *cmd, unsigned grant_tag, redlock__buf *out,
                  const redlock__alloc *alloc);
    void (*buf_free)(redlock__buf *b, const redlock__alloc *a);
    /* A reply read as lib/net/node.c reads it (redlock__cmd_vote). */
    redlock_vote (*vote)(const redlock__cmd *cmd, const redisReply *reply, char *err,
                         size_t err_len, redlock__reply_kind *kind, redlock__reply_data *data);
    const char *(*cmd_name)(redlock__cmd_kind kind);
    /* The scripts the library sends (redlock__scripts), which the simulated servers run. */
    const redlock__script *const *scripts;
    unsigned n_scripts;
    /* The sized-struct rules of lib/core/abi.h, for the kit's own public structs. */
    void (*struct_init)(void *dst, size_t size, const void *defaults, size_t defaults_size);
    int (*struct_in)(void *dst, size_t dst_size, const void *src, size_t min_size, const char *what,
                     const char *init_name, char *err, size_t err_len);
} redlock__kit;

/* The table, for a kit compiled with version (REDLOCK_VERSION_STRING) and layout
 * (REDLOCK__KIT_LAYOUT) equal to this library's; NULL otherwise. Static data: never freed. */
REDLOCK_EXTERN const redlock__kit *redlock__kit_get(const char *version, uint64_t layout);

#endif
