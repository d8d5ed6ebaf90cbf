/* SPDX-License-Identifier: MIT */
/* fake_redis.h - a tiny misbehaving Redis peer for the fault tests: a plain-socket server on
 * 127.0.0.1 (any free port) run by its own thread, which reads RESP commands and answers each
 * according to its mode. The handshake's SCRIPT LOAD gets the script's real SHA1 and INFO a
 * run_id of its own in every mode but FAKE_ERROR (whose reply to everything is the error, which
 * the handshake tolerates) and FAKE_BAD_HANDSHAKE (a wrong SHA1). */
#ifndef REDLOCK_TEST_FAKE_REDIS_H
#define REDLOCK_TEST_FAKE_REDIS_H

typedef enum {
    FAKE_GARBAGE,    /* answers commands with bytes that are not RESP */
    FAKE_HALF_REPLY, /* sends half a reply to a lock command, then closes the connection */
    FAKE_ERROR,      /* answers every command with the error text given */
    FAKE_WRONG_TYPE, /* ":42" to SET, "+OK" to EVALSHA / EVAL: well-formed, wrong type */
    /* A SHA1 to SCRIPT LOAD that is not the script's (what a client sees when its replies are
     * out of step with its commands), "+OK" to the rest. */
    FAKE_BAD_HANDSHAKE,
    /* "*2147483647" and 100,000 ":1" to a lock command: an array no command of the library is
     * answered, which never ends (hiredis alone reserves 2^31 slots for it). */
    FAKE_HUGE_ARRAY,
    /* "$1000000000" to a lock command, then 4 KiB of it every 10 ms while the connection lasts. */
    FAKE_TRICKLE_BULK,
} fake_mode;

typedef struct fake_redis fake_redis;

/* Start the fake; error_text (FAKE_ERROR only, without the leading '-') is copied. Returns NULL
 * with a message on stderr on failure. */
fake_redis *fake_redis_start(fake_mode mode, const char *error_text);
/* The port it listens on. */
int fake_redis_port(const fake_redis *f);
/* Lock commands (not SCRIPT) answered so far. */
unsigned fake_redis_commands(const fake_redis *f);
/* Handshake commands (SCRIPT, INFO) answered so far. */
unsigned fake_redis_scripts(const fake_redis *f);
/* Close every connection and the listener, join the thread, free f. NULL is allowed. */
void fake_redis_stop(fake_redis *f);

#endif
