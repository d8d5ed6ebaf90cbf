/* SPDX-License-Identifier: MIT */
/* check.c - "redlock check [PREFIX]": is this deployment fit to hold locks?
 *
 * Each node is checked against what the algorithm assumes of it (docs/operations.md): it is
 * reachable and takes the password, it is a master, it does not evict keys that carry an
 * expiry, it keeps its keys across a restart (AOF with appendfsync always) unless restarts are
 * delayed, the user may run every command the library sends (tried one by one on a probe key of
 * its own: PREFIX + "redlock-check-" + 16 random hex digits, set with a 10 s ttl and deleted at
 * the end), and no two URLs reach one server. The node's clock (TIME, or INFO's
 * server_time_usec) is compared with the local one and the round trip measured; both are
 * reported. A cluster:// node is checked as a cluster (its state, its slots' coverage) and each
 * of its masters that own slots as a server of its own (check_cluster.c), with a probe key that
 * lands in that master's slots (each server's checks are check_server.c's); the run_id check
 * covers those masters too.
 *
 * The check talks to the nodes with connections of its own (check_conn.c), one node after the
 * other, each command bounded by --node-timeout: it needs raw commands the library's public API
 * does not offer, and the library's client is not widened for a tool. rediss:// and clusters://
 * nodes are checked in TLS through the library's own TLS layer, with the --tls-* options: a
 * server whose certificate the client would refuse fails the check the same way.
 *
 * Output: one JSON line on stdout, {"status":"ok|warn|error","warnings":[..],"nodes":[{"url":..,
 * "ok":bool,"warnings":[..],"errors":[..],...}]} (a cluster node's entry has "masters":[..], one
 * such entry per master), and a table on stderr. Exit 0 when all is
 * well, 1 with warnings only, 69 when a node cannot serve locks, 64 for a usage error. */
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- the deployment ------------------------------------------------------------------------ */

/* "node 2 (redis://...)" or "master 127.0.0.1:7001 of node 2 (cluster://...)". */
static void describe(const checker *ck, unsigned node, unsigned server, char *out, size_t len)
{
    const node_check *nc = &ck->nodes[node];
    if (nc->url.cluster)
        snprintf(out, len, "master %s of node %u (%s)", nc->servers[server].address, node,
                 nc->url.redacted);
    else
        snprintf(out, len, "node %u (%s)", node, nc->url.redacted);
}

/* The first server before (node i, server k) in command-line order with this run_id: true and
 * *node, *server set. */
static bool earlier_twin(const checker *ck, unsigned i, unsigned k, unsigned *node,
                         unsigned *server)
{
    const char *run_id = ck->nodes[i].servers[k].run_id;
    for (unsigned j = 0; j <= i; j++) {
        const node_check *b = &ck->nodes[j];
        for (unsigned l = 0; l < (j < i ? b->n_servers : k); l++) {
            if (strcmp(b->servers[l].run_id, run_id) == 0) {
                *node = j;
                *server = l;
                return true;
            }
        }
    }
    return false;
}

/* Two URLs that reach one server (a host name and its address, two proxies, a plain node that is
 * also a cluster's master, two clusters that share one) would let it count twice toward a
 * quorum: the library keeps the second one down; here both are named. Every server counts: the
 * plain nodes and each master of every cluster node. */
static void find_twins(checker *ck, unsigned n)
{
    unsigned servers = 0, unknown = 0;
    for (unsigned i = 0; i < n; i++) {
        node_check *a = &ck->nodes[i];
        for (unsigned k = 0; k < a->n_servers; k++) {
            server_check *sc = &a->servers[k];
            servers++;
            unknown += sc->run_id[0] == '\0' && sc->errors.n == 0;
            unsigned j, l;
            if (sc->run_id[0] == '\0' || !earlier_twin(ck, i, k, &j, &l))
                continue;
            char twin[CHECK_ADDRESS_LEN + 300];
            describe(ck, j, l, twin, sizeof(twin));
            check_note(&sc->errors,
                       "same server as %s, run_id %.8s...: it would count twice toward the quorum",
                       twin, sc->run_id);
        }
    }
    if (unknown > 0 && servers > 1)
        check_note(&ck->warnings,
                   "%u server(s) did not tell their run_id (INFO): two URLs reaching one "
                   "server cannot be ruled out",
                   unknown);
    if (n < 3)
        check_note(&ck->warnings,
                   "%u node(s): a quorum of %u leaves no node that may fail; use 5 (or "
                   "at least 3) independent masters or clusters",
                   n, redlock_quorum_of(n));
    else if (n % 2 == 0)
        check_note(&ck->warnings,
                   "%u nodes: an even count adds a node that may fail without adding "
                   "tolerance (%u may fail, as with %u)",
                   n, (n - 1) / 2, n - 1);
}

/* Parse every URL first: nothing is sent before the whole command line is known to be good. */
static int parse_urls(checker *ck, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        node_check *nc = &ck->nodes[i];
        nc->url_text = ck->args->nodes[i];
        char why[256];
        if (redlock_url_parse(&nc->url, nc->url_text, why, sizeof(why)) != 0) {
            fprintf(stderr, "redlock: node %u: %s\n", i, why);
            return EXIT_USAGE;
        }
        for (unsigned j = 0; j < i; j++) {
            const redlock_url *a = &nc->url, *b = &ck->nodes[j].url;
            bool same =
                a->is_unix ? b->is_unix && strcmp(a->path, b->path) == 0
                           : !b->is_unix && a->port == b->port && strcasecmp(a->host, b->host) == 0;
            if (same) {
                fprintf(stderr,
                        "redlock: node %u (%s) is the same as node %u: it would count twice "
                        "toward the quorum\n",
                        i, nc->url.redacted, j);
                return EXIT_USAGE;
            }
        }
    }
    return 0;
}

/* A plain node: its one server, as its URL says. */
static int check_plain(checker *ck, node_check *nc)
{
    nc->servers = calloc(1, sizeof(*nc->servers));
    if (nc->servers == NULL) {
        fprintf(stderr, "redlock: out of memory\n");
        return -1;
    }
    nc->n_servers = 1;
    server_check *sc = nc->servers;
    const redlock_url *u = &nc->url;
    uint64_t t = ck->args->node_timeout_ms != 0 ? ck->args->node_timeout_ms : CLI_CHECK_TIMEOUT_MS;
    check_server_init(sc, u->timeout_ms > 0 ? (uint64_t)u->timeout_ms : t);
    sc->is_unix = u->is_unix;
    sc->host = u->host;
    sc->port = u->port;
    sc->path = u->path;
    sc->user = u->user;
    sc->password = u->password;
    sc->db = u->db;
    sc->tls = u->tls ? ck->tls : NULL;
    snprintf(sc->probe_key, sizeof(sc->probe_key), "%s", ck->probe_key);
    check_server(ck, sc);
    return 0;
}

/* The TLS context of the check's TLS nodes, from the --tls-* options; 0, or a usage error said
 * on stderr (a file that cannot be loaded, TLS not built in). */
static int make_tls(checker *ck, unsigned n, const redlock_options *tls_opts)
{
    bool any = false;
    for (unsigned i = 0; i < n; i++)
        any = any || ck->nodes[i].url.tls;
    if (!any)
        return 0;
    redlock__alloc_init(&ck->tls_alloc, NULL, NULL);
    char err[512];
    int rc = redlock__tls_ctx_new(tls_opts, &ck->tls_alloc, &ck->tls, err, sizeof(err));
    if (rc == REDLOCK_ENOMEM) {
        fprintf(stderr, "redlock: out of memory\n");
        return EXIT_OSERR;
    }
    if (rc != 0) {
        tool_tls_message(err, sizeof(err));
        fprintf(stderr, "redlock: %s\n", err);
        return EXIT_USAGE;
    }
    return 0;
}

int check_main(const cli_args *args, const redlock_options *tls_opts)
{
    checker ck;
    memset(&ck, 0, sizeof(ck));
    ck.args = args;
    unsigned n = args->n_nodes;
    ck.nodes = calloc(n, sizeof(*ck.nodes));
    if (ck.nodes == NULL) {
        fprintf(stderr, "redlock: out of memory\n");
        return EXIT_OSERR;
    }
    int code = parse_urls(&ck, n);
    if (code == 0)
        code = make_tls(&ck, n, tls_opts);
    if (code == 0 && ck.tls != NULL && redlock__tls_ctx_insecure(ck.tls))
        check_note(&ck.warnings,
                   "TLS verification is off (--tls-insecure): the nodes' certificates were not "
                   "checked, and whoever is on the path can read and forge the lock traffic");
    unsigned char raw[TOOL_TOKEN_BYTES];
    if (code == 0 && uv_random(NULL, NULL, raw, sizeof(raw), 0, NULL) != 0) {
        fprintf(stderr, "redlock: no randomness for the probe\n");
        code = EXIT_OSERR;
    }
    if (code == 0) {
        static const char digits[] = "0123456789abcdef";
        for (size_t i = 0; i < sizeof(raw); i++) {
            ck.probe_token[2 * i] = digits[raw[i] >> 4];
            ck.probe_token[2 * i + 1] = digits[raw[i] & 15];
        }
        /* The key: PREFIX + "redlock-check-" + the token's first 16 digits. */
        snprintf(ck.probe_key, sizeof(ck.probe_key), "%.256sredlock-check-%.16s", args->prefix,
                 ck.probe_token);
        for (unsigned i = 0; i < n && code == 0; i++) {
            node_check *nc = &ck.nodes[i];
            if ((nc->url.cluster ? check_cluster(&ck, nc) : check_plain(&ck, nc)) != 0)
                code = EXIT_OSERR;
        }
    }
    if (code == 0) {
        find_twins(&ck, n);
        bool printed = check_print_json(&ck, n);
        check_print_table(&ck, n);
        const char *v = check_verdict(&ck, n);
        code = !printed                  ? EXIT_OSERR
               : strcmp(v, "error") == 0 ? EXIT_UNAVAILABLE
               : strcmp(v, "warn") == 0  ? EXIT_CHECK_WARN
                                         : 0;
    }
    for (unsigned i = 0; i < n; i++) {
        redlock_url_free(&ck.nodes[i].url);
        free(ck.nodes[i].servers);
    }
    free(ck.nodes);
    redlock__tls_ctx_free(ck.tls);
    return code;
}
