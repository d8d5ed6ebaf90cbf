/* SPDX-License-Identifier: MIT */
/* handshake.h - what a new connection to a node says first, and what it must hear back.
 *
 * On every new connection, before any lock command: AUTH and SELECT when the URL asks for them,
 * SCRIPT LOAD of the scripts (so EVALSHA finds them), INFO server for the server's run_id
 * (so one server reached under two URLs is caught: it must count only once), and INFO
 * replication for its role (a replica is not a node of its own: it would vote a second time with
 * its master's data; node.c refuses it). All of them are written at once, one round trip. Each
 * reply is checked against its step: an error to AUTH or SELECT, or a refusal of the credentials at
 * any step (NOAUTH), makes the node unusable; any other error to SCRIPT LOAD or INFO is tolerated
 * (an ACL may forbid them: EVALSHA then falls back to EVAL, and the duplicate-server check is
 * skipped); a reply of the wrong shape means the replies are out of step with the commands, and the
 * connection must go. No IO. */
#ifndef REDLOCK_HANDSHAKE_H
#define REDLOCK_HANDSHAKE_H

#include <stdbool.h>
#include <stddef.h>

#include <hiredis/hiredis.h>

#include "common.h"
#include "scripts.h"
#include "url.h"

#define REDLOCK__HANDSHAKE_MAX_STEPS 20
#define REDLOCK__RUN_ID_LEN 40 /* a Redis server's run_id: 40 hex digits, new at every start */

typedef enum {
    REDLOCK__HANDSHAKE_STATUS, /* AUTH, SELECT: +OK */
    REDLOCK__HANDSHAKE_SCRIPT, /* SCRIPT LOAD: the script's SHA1 */
    REDLOCK__HANDSHAKE_INFO,   /* INFO server: a bulk string, with run_id */
    REDLOCK__HANDSHAKE_ROLE /* INFO replication: a bulk string, with role (and master_host/port) */
} redlock__handshake_kind;

typedef struct redlock__handshake_step {
    redlock__handshake_kind kind;
    const redlock__script *script; /* REDLOCK__HANDSHAKE_SCRIPT only */
} redlock__handshake_step;

#define REDLOCK__HANDSHAKE_REFUSED_MAX 100 /* room for the text of a tolerated error reply */
#define REDLOCK__HANDSHAKE_MASTER_MAX                                                              \
    280 /* a replica's master, "host:port" (a host name is <= 255) */

typedef struct redlock__handshake {
    redlock__handshake_step steps[REDLOCK__HANDSHAKE_MAX_STEPS];
    unsigned n_steps;
    unsigned answered;                    /* replies checked so far */
    char run_id[REDLOCK__RUN_ID_LEN + 1]; /* from INFO; "" if unknown */
    /* From INFO replication: "" for a master (or if INFO was refused), else the replica's master
     * as "host:port" (its printable bytes only; "?" for a part it did not say). */
    char replica_of[REDLOCK__HANDSHAKE_MASTER_MAX];
    /* The first error reply that was tolerated (to SCRIPT LOAD or INFO), truncated; "" if none.
     * A server that refuses the connection itself (at its maxclients) answers the first command
     * with an error and closes: this is then the only place its reason is found. */
    char refused[REDLOCK__HANDSHAKE_REFUSED_MAX];
    /* Which steps an ACL refused (no +script|load, no +info), for the node's log. */
    bool script_refused, info_refused;
} redlock__handshake;

/* The AUTH command for url into argv/argvlen (room for 3): returns its argc, 0 when the URL has
 * no password. Said first on every connection to the node: the handshake's and the
 * subscriber's (subscriber.h). */
int redlock__handshake_auth_argv(const redlock_url *url, const char *argv[3], size_t argvlen[3]);

/* What to fix, when a server's error text (len bytes) refuses the URL's credentials: NOAUTH (a
 * password the URL does not give) or WRONGPASS (a wrong one). NULL for any other text. */
const char *redlock__handshake_auth_refusal(const char *text, size_t len);

/* The "run_id:<40 hex digits>" line of an INFO reply (len bytes), copied into out (41 bytes) if
 * there is one; out is left as it was otherwise. Anything else (shorter, binary, upper case: no
 * Redis sends it) is no run_id at all, so two nodes are never taken for one server on a partial
 * match. */
void redlock__handshake_run_id(const char *info, size_t len, char *out);

/* Start a handshake for url: its steps go into hs (reset) and their RESP encoding is appended
 * to out. Returns 0 or REDLOCK_ENOMEM (out may then hold part of it: discard it). */
int redlock__handshake_start(redlock__handshake *hs, const redlock_url *url, redlock__buf *out,
                             const redlock__alloc *alloc);

/* Forget the handshake (the connection it was for is gone): nothing is pending. */
void redlock__handshake_reset(redlock__handshake *hs);

/* true while replies are still owed to the handshake (asked for every reply: inline). */
static inline bool redlock__handshake_pending(const redlock__handshake *hs)
{
    return hs->answered < hs->n_steps;
}

/* Check the reply to the next step. Returns true if the connection may go on (the reply is the
 * step's success, or a tolerated error); false with a message in why (the server's text, or what
 * was wrong with the reply) if it must be failed. */
bool redlock__handshake_reply(redlock__handshake *hs, const redisReply *r, char *why,
                              size_t why_len);

/* Why a connection failed, as a node reports it: why itself, or, when the handshake is not done
 * and the server had answered a step with an error it tolerated, why followed by ", after
 * answering the handshake: " and that answer (written into buf, truncated to buf_len). Returns
 * why or buf. */
const char *redlock__handshake_why(const redlock__handshake *hs, const char *why, char *buf,
                                   size_t buf_len);

#endif
