/* SPDX-License-Identifier: MIT */
/* url.h - internal helpers around node URLs (the public parser is redlock_url_* in redlock.h).
 *
 * Parsing rules beyond the public header, so callers know what they can rely on:
 *   - a URL is at most REDLOCK__URL_MAX_LEN bytes;
 *   - userinfo is "user:password@" or ":password@"; "user@" alone is an error, as is an empty
 *     password; the LAST '@' separates it from the host (unix: the last "@/"), so an unencoded
 *     '@', '/', '?' or '#' in a password still parses, but '@' should be written %40;
 *   - unix URLs accept the same userinfo: unix://:password@/path.sock (Redis can require a
 *     password on its unix socket too);
 *   - host names are letters, digits, '-' and '_' (for Docker service names) and '.', labels of
 *     1..63 bytes not starting or ending with '-', at most 253 bytes, no trailing dot; a host of
 *     only digits and dots must be a valid IPv4 address; IPv6 zone ids are rejected.
 * Strings in redlock_url come from plain malloc and go back with plain free (redlock_url_free):
 * a URL is parsed before any client, and so before any allocator hook, exists. */
#ifndef REDLOCK_URL_H
#define REDLOCK_URL_H

#include <stddef.h>

#include "redlock.h"

#define REDLOCK__URL_MAX_LEN 1024
#define REDLOCK__URL_DEFAULT_PORT 6379
#define REDLOCK__URL_TIMEOUT_MAX_MS 3600000
#define REDLOCK__URL_REPLICAS_MAX 64 /* a cluster's wait_replicas */
/* sizeof(((struct sockaddr_un *)0)->sun_path) - 1 on Linux: the longest path that fits. */
#define REDLOCK__URL_UNIX_PATH_MAX 107

/* 1 when a and b name the same Redis server, so that counting both would fake a quorum: the same
 * unix socket path (compared byte for byte), or the same host and port. Hosts compare as
 * addresses when both are IP literals ("::1" == "0:0::1", "::ffff:127.0.0.1" == "127.0.0.1"),
 * otherwise case-insensitively; names are never resolved, so "localhost" != "127.0.0.1". The db
 * is ignored: two dbs of one server share its fate. 0 otherwise, and when either is NULL. */
int redlock__url_same_node(const redlock_url *a, const redlock_url *b);

/* Write the node's endpoint for messages into out: "host:port", "[v6]:port", or the unix socket
 * path. NUL-terminated when len > 0; returns the length it would have written, like snprintf.
 * Never contains a user or password. */
size_t redlock__url_endpoint(const redlock_url *u, char *out, size_t len);

#endif
