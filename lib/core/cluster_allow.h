/* SPDX-License-Identifier: MIT */
/* cluster_allow.h - the servers a cluster:// URL lets the client connect to.
 *
 * A cluster names its masters itself (CLUSTER SHARDS, MOVED, ASK), and the client sends each the
 * URL's credentials. By default any master goes; with one or more allow= parameters, only a
 * server whose host is the URL's own, a seed's, or matches an allow= (docs/cluster.md):
 *   allow=10.1.0.0/16   an address within a network (IPv4 /0..32, IPv6 /0..128)
 *   allow=10.1.0.7      an address (an IPv6 one with or without brackets)
 *   allow=redis-7.prod  a host name, compared case-insensitively
 * Names are never resolved: a master the cluster names by address matches addresses and
 * networks only, one it names by host name matches names only. redlock_url keeps no list of
 * them (no ABI change): they are read again from the query of url->redacted, which keeps it
 * whole. No IO. */
#ifndef REDLOCK_CLUSTER_ALLOW_H
#define REDLOCK_CLUSTER_ALLOW_H

#include <stdbool.h>
#include <stddef.h>

#include "redlock.h"

typedef struct redlock__allow {
    bool is_address;
    unsigned char addr[16]; /* IPv4 as ::ffff:a.b.c.d */
    unsigned prefix_bits;   /* of addr, 0..128 */
    const char *name;       /* !is_address: the host name, name_len bytes */
    size_t name_len;
} redlock__allow;

/* Read one allow= value (len bytes at value) into *out: an address, with or without /prefix, or
 * else a name (whose syntax url.c checks). -1 when it is an address with a bad prefix, or a
 * /prefix after something that is no address. */
int redlock__cluster_allow_parse(const char *value, size_t len, redlock__allow *out);

/* Whether the cluster URL u (parsed by redlock_url_parse) lets the client connect to host. */
bool redlock__cluster_allow_has(const redlock_url *u, const char *host);

#endif
