/* SPDX-License-Identifier: MIT */
/* check.h - what the parts of "redlock check" share:
 *
 *   check.c          the deployment: its nodes one after the other, run_id twins, node count
 *   check_server.c   the per-server checks (a plain node, or a master of a cluster node)
 *   check_cluster.c  a cluster:// node: its slot map, state and coverage, one probe key per
 *                    master, and the per-server checks on every master that owns slots
 *   check_report.c   the verdict, the JSON line on stdout and the table on stderr
 *   check_conn.c     the connection to one server (plain or TLS), one command at a time
 *
 * A node is one server (redis://) or the masters of a cluster (cluster://): the per-server
 * checks run on each of them alike. One thread, one connection at a time (check_conn.h: plain or
 * TLS, each wait bounded), nothing global. */
#ifndef REDLOCK_TOOL_CHECK_H
#define REDLOCK_TOOL_CHECK_H

#include "tool.h"

#include <hiredis/hiredis.h>

#include "check_conn.h"

#define CHECK_MAX_NOTES 16
#define CHECK_NOTE_LEN 320
#define CHECK_KEY_LEN 300     /* a probe key: a prefix of at most 256 bytes and our part */
#define CHECK_ADDRESS_LEN 300 /* "host:port" or "[v6]:port" */

typedef struct notes {
    unsigned n;
    char text[CHECK_MAX_NOTES][CHECK_NOTE_LEN];
} notes;

/* What one server said: a plain node, or one master of a cluster node. Strings are "" when
 * unknown. */
typedef struct server_check {
    /* Where and as whom: borrowed from the node's URL, or (a master's host) from the cluster's
     * slot map, which outlives the server's check. */
    bool is_unix;
    const char *host; /* TCP */
    int port;
    const char *path; /* unix */
    const char *user, *password;
    int db;                /* SELECT it when > 0 */
    redlock__tls_ctx *tls; /* the checker's, for a TLS node (rediss://, clusters://); else NULL */
    uint64_t timeout_ms;   /* the URL's timeout_ms, else --node-timeout */
    /* The key its commands are tried on; "" when none was chosen (they are not tried). */
    char probe_key[CHECK_KEY_LEN];
    /* A master of a cluster node: cluster mode is expected, its replicas are judged against the
     * URL's wait_replicas, and it is named by its address. */
    bool in_cluster;
    int wait_replicas;
    char address[CHECK_ADDRESS_LEN];
    unsigned slots; /* how many slots it owns */
    bool online;    /* CLUSTER SHARDS called its health "online" (always for CLUSTER SLOTS) */

    notes warnings, errors;
    char denied[256]; /* commands refused for this user, space-separated */
    char version[32];
    char role[16];
    char run_id[41];
    char policy[32];
    int aof; /* -1 unknown, 0 off, 1 on */
    char appendfsync[16];
    long long maxmemory;    /* -1 unknown */
    int connected_replicas; /* -1 unknown */
    bool cluster;
    bool loading;
    int64_t server_time_us; /* INFO's server_time_usec, 0 if none */
    uint64_t info_local_us; /* local wall time halfway through the INFO call */
    bool have_clock;
    int64_t clock_offset_ms;
    uint64_t rtt_us;    /* UINT64_MAX until a command came back */
    bool key_refused;   /* the probe key is outside the user's key patterns */
    bool probe_stopped; /* MOVED, ASK, CLUSTERDOWN or TRYAGAIN: the probe ended there */
    bool logged_in;     /* AUTH and SELECT went through */
} server_check;

/* What one node of the command line said. */
typedef struct node_check {
    const char *url_text; /* borrowed from the command line */
    redlock_url url;
    /* A plain node's one server, or a cluster's masters that own slots (in the order its
     * topology reply gave them); calloc'ed. */
    server_check *servers;
    unsigned n_servers;
    /* A cluster node: what concerns the cluster itself (no server answered the topology, its
     * state, the slots no master owns). */
    notes warnings, errors;
    char asked[CHECK_ADDRESS_LEN]; /* the server that gave the slot map, "" if none did */
    char cluster_state[16];        /* CLUSTER INFO's cluster_state, "" unknown */
    unsigned slots_covered;        /* slots that have a master in the map */
} node_check;

typedef struct checker {
    const cli_args *args;
    char probe_key[CHECK_KEY_LEN]; /* the plain nodes' */
    char probe_token[2 * TOOL_TOKEN_BYTES + 1];
    node_check *nodes;
    notes warnings;           /* about the deployment as a whole */
    redlock__tls_ctx *tls;    /* made from the --tls-* options when a node is TLS; else NULL */
    redlock__alloc tls_alloc; /* the context's memory (the library's allocator, libc's) */
} checker;

/* Add a sentence to n (dropped once n has CHECK_MAX_NOTES). */
void check_note(notes *n, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Defaults of a server's findings (unknown everywhere), its timeout set. */
void check_server_init(server_check *sc, uint64_t timeout_ms);

/* A connection to sc's host and port (or path), in TLS when sc->tls is set; each command is
 * bounded by sc's timeout. NULL with an error noted in sc when it cannot be made. Close with
 * check_conn_close. */
check_conn *check_connect(server_check *sc);

/* AUTH (and SELECT), as the library's handshake sends them; false with an error noted when
 * refused or the connection failed. */
bool check_log_in(checker *ck, server_check *sc, check_conn *ctx);

/* One command on sc's connection, timed (sc->rtt_us keeps the fastest); NULL when the
 * connection failed or timed out, with an error noted. argv strings are NUL-terminated except
 * where lens is given; argc at most 8. The reply is the caller's to free. */
redisReply *check_command(server_check *sc, check_conn *ctx, int argc, const char **argv,
                          const size_t *lens);

/* A server's text for a message: one line, at most 200 bytes, in buf. */
const char *check_reply_text(const redisReply *r, char *buf, size_t len);

/* Every per-server check on sc (connect, log in, INFO, persistence, clock, the commands on its
 * probe key when it has one), then what its answers mean (check_server.c). */
void check_server(checker *ck, server_check *sc);

/* A cluster:// node (check_cluster.c): the slot map from the URL's host or a seed, the
 * cluster's state and coverage, then check_server on every master that owns slots, each with a
 * probe key of one of its slots. Fills nc->servers; returns 0, or -1 when memory ran out (said
 * on stderr). */
int check_cluster(checker *ck, node_check *nc);

/* check_report.c: the verdict, "ok", "warn" or "error", over n nodes; whether a node can serve
 * locks (no errors of its own or of its servers); the JSON line on stdout (false, said on
 * stderr, when it cannot be written); the table on stderr. */
const char *check_verdict(const checker *ck, unsigned n);
bool check_node_ok(const node_check *nc);
bool check_print_json(const checker *ck, unsigned n);
void check_print_table(const checker *ck, unsigned n);

#endif /* REDLOCK_TOOL_CHECK_H */
