/* SPDX-License-Identifier: MIT */
/* scrub.h - a server's text made fit to keep and show: the password it may repeat hidden, its
 * control bytes replaced.
 *
 * A server (or a proxy) may repeat a command's arguments in an error, AUTH's included ("unknown
 * command 'AUTH', with args beginning with: 'app' 'secret'"), and may put any byte in it (an
 * escape sequence for the terminal that shows it). Every error text that comes from a server is
 * scrubbed as it is read (node.c, subscriber.c, the check's connection), before anything stores,
 * logs or prints it. No IO. */
#ifndef REDLOCK_SCRUB_H
#define REDLOCK_SCRUB_H

#include <stddef.h>

#include <hiredis/hiredis.h>

/* An error's text is cut to this before it is scrubbed (no message quotes more of it). */
#define REDLOCK__SCRUB_MAX 512

/* Rewrite the len bytes of text in place: every occurrence of secret (NULL or "": none) becomes
 * "***", and so does a start of it quoted on its own ('sec' or a trailing 'sec: a server cuts
 * long arguments); a part of fewer than three bytes becomes as many stars, so the text never
 * grows. Every byte outside printable ASCII becomes '?'. Returns the new length and writes a NUL
 * after it (text has room for len + 1 bytes). */
size_t redlock__scrub(char *text, size_t len, const char *secret);

/* The same on an error reply (anything else is left alone), cut to REDLOCK__SCRUB_MAX first. Its
 * first word, the error's code (NOSCRIPT, MOVED, ...), only loses its control bytes, and so does
 * a redirect (MOVED, ASK): it names a server, never an argument, and must stay whole to be
 * followed. */
void redlock__scrub_error(redisReply *reply, const char *secret);

#endif
