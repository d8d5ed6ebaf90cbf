/* SPDX-License-Identifier: MIT */
/* Integration-test fixture: real redis-server processes on loopback.
 *
 * Each cluster lives in its own mkdtemp() directory (config, log and unix socket per server) and
 * runs without persistence, so every start and restart begins with an empty data set. (Each
 * server's RDB and AOF files have names of their own, so a cluster started with extra_conf
 * "appendonly yes\nappendfsync always\n" keeps each server's data across fixture_kill and
 * fixture_restart.) The
 * fixture only ever signals the pids it forked itself; servers die with the test process even
 * when it crashes (PR_SET_PDEATHSIG), and an atexit handler stops every cluster a test forgot.
 *
 * Not thread-safe: call every function from one thread, and keep that thread alive as long as
 * the servers (PR_SET_PDEATHSIG fires when the *thread* that forked them exits). The main thread
 * is the natural choice. Functions that fail print a line starting with "fixture:" on stderr.
 */
#ifndef REDLOCK_TEST_FIXTURE_H
#define REDLOCK_TEST_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

#define FIXTURE_MAX_SERVERS 16
/* How long fixture_connect and fixture_command wait for a connect or a reply: a loaded machine
 * may take seconds to answer one command, and only a stopped server should time out. */
#define FIXTURE_COMMAND_TIMEOUT_MS 5000

typedef struct fixture_server {
    int port;            /* loopback TCP port, 127.0.0.1 */
    pid_t pid;           /* 0 when not running */
    bool paused;         /* SIGSTOPped */
    char url[128];       /* "redis://127.0.0.1:PORT" */
    char unix_path[256]; /* unix socket path inside the temp dir */
    char unix_url[300];  /* "unix://" + unix_path */
} fixture_server;

typedef struct fixture_cluster {
    unsigned n;
    char dir[256];         /* mkdtemp() temp dir, removed at stop */
    char extra_conf[1024]; /* extra redis.conf lines, e.g. "requirepass secret\n" */
    fixture_server servers[FIXTURE_MAX_SERVERS];
    const char *urls[FIXTURE_MAX_SERVERS]; /* servers[i].url, for passing to the library */
} fixture_cluster;

/* Start n (1..FIXTURE_MAX_SERVERS) redis-server processes on free loopback ports, without
 * persistence (save "", appendonly no), each also listening on servers[i].unix_path, and wait
 * until each answers PING (any reply, including -NOAUTH or -LOADING, counts as up).
 *
 * c is caller-owned and overwritten entirely; it must stay at the same address until
 * fixture_stop(), because the fixture tracks live clusters by address. Calling this again on an
 * address whose cluster is still running stops that old cluster first. c->urls[i] points into
 * c itself, so a copy of the struct must not be used with the fixture.
 * extra_conf (may be NULL) is copied; it holds extra redis.conf lines, under 1024 bytes, and is
 * applied after the fixture's own settings, so it can override them.
 * The redis-server binary is taken from $FIXTURE_REDIS_SERVER, else looked up in $PATH.
 *
 * Returns 0, or -1 with a message (and the server's log tail) on stderr; on failure nothing is
 * left running, the temp dir is gone and c is in the stopped state. */
int fixture_start(fixture_cluster *c, unsigned n, const char *extra_conf);

/* Stop every server of c still running (SIGCONT paused ones, then SIGKILL by pid and waitpid)
 * and remove the temp dir. Safe to call twice, on a failed start, or on a zeroed struct; a
 * struct the fixture never started is left alone (no pid in it is ever signalled). Called from a
 * forked child process, it only forgets the cluster and leaves the parent's servers running. */
void fixture_stop(fixture_cluster *c);

/* Stop every cluster this process started and has not stopped yet (as fixture_stop() does each
 * of them), using the fixture's own record of the pids and temp dirs, never the callers' structs:
 * those may be gone, e.g. in a dead stack frame after a failed test check longjmped past its
 * fixture_stop(). Meant for a test's teardown, so one failed test never leaves servers running
 * into the next. The structs of the clusters it stopped still list their old pids; start them
 * again (fixture_start) before any other use. Returns how many clusters it stopped. */
unsigned fixture_stop_all(void);

/* SIGKILL server i and reap it. Its port stays recorded in servers[i] for fixture_restart(),
 * but nothing holds the port meanwhile. Returns 0, or -1 if i is out of range, c is not a
 * started cluster, or the server is not running. */
int fixture_kill(fixture_cluster *c, unsigned i);

/* SIGSTOP server i and wait until it has actually stopped, so a request sent afterwards is
 * guaranteed to hang: the kernel still completes TCP connects into the listen backlog, but no
 * reply comes. Pausing a paused server does nothing. Returns 0, or -1 as fixture_kill(). */
int fixture_pause(fixture_cluster *c, unsigned i);

/* SIGCONT server i; requests queued while it was paused are then served. Resuming a server
 * that is not paused does nothing. Returns 0, or -1 as fixture_kill(). */
int fixture_resume(fixture_cluster *c, unsigned i);

/* Start server i again on the same port and unix socket, with an empty data set (unless the
 * cluster's extra_conf turned persistence on: then with what the server persisted), and wait for
 * PING. A server still running (or paused) is killed first. Returns 0, or -1 with a message on
 * stderr if the server cannot start (e.g. another process took the port meanwhile). */
int fixture_restart(fixture_cluster *c, unsigned i);

/* Open a blocking hiredis connection to 127.0.0.1:servers[i].port with a timeout of
 * FIXTURE_COMMAND_TIMEOUT_MS for the connect and for every later command. Follows the hiredis
 * convention: a failed connect still returns a context with ->err and ->errstr set (e.g.
 * "Connection refused" after fixture_kill). The caller owns the context and frees it with
 * redisFree() in every case. Returns NULL only if i is out of range or memory ran out. Does not
 * AUTH even when extra_conf set requirepass. */
redisContext *fixture_connect(fixture_cluster *c, unsigned i);

/* Run one command (hiredis format, e.g. "SET %s %b") on server i over a fresh connection made
 * as fixture_connect() makes it, then close that connection. Returns the reply, which the caller
 * frees with freeReplyObject() (a Redis error is a REDIS_REPLY_ERROR reply, not NULL), or NULL
 * with a message on stderr if connecting, sending or receiving failed or timed out. */
redisReply *fixture_command(fixture_cluster *c, unsigned i, const char *fmt, ...);

/* As fixture_command(), with the command given as argc arguments; argv[k] has argvlen[k] bytes
 * (binary-safe), or is NUL-terminated when argvlen is NULL. The arrays are only read. */
redisReply *fixture_command_argv(fixture_cluster *c, unsigned i, int argc, const char **argv,
                                 const size_t *argvlen);

/* Return a loopback TCP port for a server of the caller's, or -1 with a message on stderr: one
 * claimed for this process until it exits (below the kernel's ephemeral range, handed to no
 * other test process meanwhile, see ports.h), else one the kernel says is free at this moment
 * (which another process may then take). Nothing listens on it until the caller binds it. */
int fixture_free_port(void);

/* The monotonic clock in ms, and a sleep that EINTR does not cut short (for the fixtures' bounded
 * waits). */
long long fixture_now_ms(void);
void fixture_sleep_ms(int ms);

#endif /* REDLOCK_TEST_FIXTURE_H */
