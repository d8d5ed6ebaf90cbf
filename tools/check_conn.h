/* SPDX-License-Identifier: MIT */
/* check_conn.h - the connection "redlock check" has to one server: TCP or a unix socket,
 * plaintext or TLS (the library's TLS layer, lib/net/tls.c, with the client's verification), one
 * command at a time, each wait bounded by a deadline. hiredis encodes and parses, nothing more. */
#ifndef REDLOCK_TOOL_CHECK_CONN_H
#define REDLOCK_TOOL_CHECK_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "tls.h"

enum { CHECK_CONN_OK = 0, CHECK_CONN_TIMEOUT = 1, CHECK_CONN_FAILED = 2 };

typedef struct check_conn check_conn;

/* Where to connect: a unix socket's path, or a TCP host (a name or an address) and port; with
 * tls (not NULL) a TLS handshake follows, verified against the context's CA and host (the
 * context's server-name override wins), as the client does it. */
typedef struct check_conn_target {
    bool is_unix;
    const char *path;
    const char *host;
    int port;
    redlock__tls_ctx *tls;
} check_conn_target;

/* Connect (and handshake) within timeout_ms: CHECK_CONN_OK with *out set, else
 * CHECK_CONN_FAILED with the reason in why ("no connection within N ms", "no TLS handshake
 * within N ms", the system's text, or a TLS failure's, which starts "tls: "). */
int check_conn_open(const check_conn_target *t, uint64_t timeout_ms, check_conn **out, char *why,
                    size_t why_len);

/* Send one command (argv with lens) and read its reply, within timeout_ms: CHECK_CONN_OK with
 * *reply (the caller frees it with freeReplyObject), CHECK_CONN_TIMEOUT, or CHECK_CONN_FAILED
 * with the reason in why. After a timeout or a failure the connection is not to be used again. */
int check_conn_command(check_conn *c, int argc, const char **argv, const size_t *lens,
                       uint64_t timeout_ms, redisReply **reply, char *why, size_t why_len);

/* Close and free; NULL allowed. */
void check_conn_close(check_conn *c);

#endif
