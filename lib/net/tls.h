/* SPDX-License-Identifier: MIT */
/* tls.h - TLS for a node's stream: OpenSSL on memory BIOs, with no IO of its own.
 *
 * Bytes read from the socket go in with redlock__tls_feed; plaintext comes out of
 * redlock__tls_read; plaintext goes in with redlock__tls_write; the ciphertext to send waits
 * until redlock__tls_take moves it into a buffer for the socket. The stream (stream.c) does
 * the IO on libuv; the request queue above it never knows the bytes were encrypted. Any hiredis
 * version works: hiredis only ever sees plaintext RESP.
 *
 * One context per client (redlock__tls_ctx: CA, client certificate, verification policy), one
 * redlock__tls per connection, one redlock__tls_resume per node: the session of the node's last
 * successful handshake, offered again on the next connection so a reconnect costs an
 * abbreviated handshake. TLS 1.3 tickets arrive after the handshake, in the first records read;
 * they are taken whenever they come.
 *
 * Verification, unless the caller asked explicitly for none: the chain against the CA file or
 * directory (the system store when neither is given), the URL's host name or IP address (or the
 * server-name override) against the certificate's names, TLS 1.2 or newer. SNI is sent for host
 * names, never for IP addresses.
 *
 * Every failure is a "tls: ..." text meant for a node's error slot; it never contains a key
 * path or a password.
 *
 * Without OpenSSL (meson -Dtls=disabled, or no libssl-dev) the same functions exist: creating a
 * context fails with a message saying TLS is not built in. */
#ifndef REDLOCK_TLS_H
#define REDLOCK_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include "common.h"

typedef struct redlock__tls_ctx redlock__tls_ctx;
typedef struct redlock__tls redlock__tls;

/* The session a node resumes on its next connection (an SSL_SESSION, or NULL). */
typedef struct redlock__tls_resume {
    void *session;
} redlock__tls_resume;

/* The text of a node's error when TLS with verification off is involved. */
#define REDLOCK__TLS_INSECURE_NOTE " [tls verification off]"
/* What a TLS connection that a plain port met says to do (the reverse of node.c's hint). */
#define REDLOCK__TLS_PLAIN_HINT "a plain port? use redis://"

/* true when the library was built with TLS. */
bool redlock__tls_built_in(void);

/* Make the client's context from opts' tls_* fields; alloc (for the library's own memory) must
 * outlive it. Returns 0, REDLOCK_EINVAL with a message
 * in err (TLS not built in, a file that cannot be loaded, a key that does not match its
 * certificate), or REDLOCK_ENOMEM. */
int redlock__tls_ctx_new(const redlock_options *opts, const redlock__alloc *alloc,
                         redlock__tls_ctx **out, char *err, size_t err_len);
/* Free the context (connections hold their own reference to OpenSSL's part). NULL allowed. */
void redlock__tls_ctx_free(redlock__tls_ctx *ctx);
/* true when the caller turned verification off. */
bool redlock__tls_ctx_insecure(const redlock__tls_ctx *ctx);

/* A client connection to host (the URL's host: a name or an IP address; the context's
 * server-name override wins), resuming resume's session if it has one; resume must outlive the
 * connection, and receives the sessions the server hands out. Returns 0, or REDLOCK_ENOMEM with
 * a message in why. */
int redlock__tls_new(redlock__tls_ctx *ctx, const char *host, redlock__tls_resume *resume,
                     redlock__tls **out, char *why, size_t why_len);
void redlock__tls_free(redlock__tls *t);

/* Bytes read from the socket. Returns 0 or REDLOCK_ENOMEM. */
int redlock__tls_feed(redlock__tls *t, const char *data, size_t len);

/* Drive the handshake with what was fed: 1 done, 0 needs more bytes from the server (send what
 * redlock__tls_take gives first), -1 failed with the reason in why. */
int redlock__tls_handshake(redlock__tls *t, char *why, size_t why_len);

/* Decrypt what was fed: 1 with *data / *len set to plaintext (valid until the next call on t),
 * 0 when nothing more can be decrypted for now, -1 when the connection failed or the server
 * closed it (reason in why). */
int redlock__tls_read(redlock__tls *t, const char **data, size_t *len, char *why, size_t why_len);

/* Encrypt len bytes (all of them, in one SSL_write: as few records as their size needs).
 * Returns 0, or -1 with the reason in why. */
int redlock__tls_write(redlock__tls *t, const void *data, size_t len, char *why, size_t why_len);

/* Ciphertext waiting for the socket, in bytes. */
size_t redlock__tls_pending(const redlock__tls *t);
/* Append all waiting ciphertext to out. Returns 0 or REDLOCK_ENOMEM. */
int redlock__tls_take(redlock__tls *t, redlock__buf *out, const redlock__alloc *alloc);

/* The connection broke right after the handshake, before the server answered anything (a
 * reset, an end of file, a failed write): with TLS 1.3 a server that refuses the client's
 * certificate, or wants one that was not sent, says so with an alert after the client has
 * finished its handshake, then closes, and the reset may overtake the alert. If the server had
 * asked for a certificate, write what most likely happened into why and return true. */
bool redlock__tls_explain_drop(const redlock__tls *t, char *why, size_t why_len);

/* true once the handshake is done if it resumed a session. */
bool redlock__tls_resumed(const redlock__tls *t);
/* The protocol version in use, e.g. "TLSv1.3" ("" before the handshake). */
const char *redlock__tls_version(const redlock__tls *t);

/* Forget a node's session. */
void redlock__tls_resume_clear(redlock__tls_resume *r);

#endif
