/* SPDX-License-Identifier: MIT */
/* check_report.c - what "redlock check" found, told: the verdict, one JSON line on stdout and a
 * table on stderr (docs/cli.md, "Checking a deployment"). A plain node's entry carries its
 * server's findings; a cluster node's entry carries the cluster's own and one entry per master
 * under "masters". */
#include "check.h"

#include <stdio.h>
#include <string.h>

#include "slot.h" /* REDLOCK__CLUSTER_SLOTS */

bool check_node_ok(const node_check *nc)
{
    bool ok = nc->errors.n == 0;
    for (unsigned k = 0; k < nc->n_servers; k++)
        ok = ok && nc->servers[k].errors.n == 0;
    return ok;
}

static unsigned node_warnings(const node_check *nc)
{
    unsigned n = nc->warnings.n;
    for (unsigned k = 0; k < nc->n_servers; k++)
        n += nc->servers[k].warnings.n;
    return n;
}

const char *check_verdict(const checker *ck, unsigned n)
{
    bool warn = ck->warnings.n > 0;
    for (unsigned i = 0; i < n; i++) {
        if (!check_node_ok(&ck->nodes[i]))
            return "error";
        warn = warn || node_warnings(&ck->nodes[i]) > 0;
    }
    return warn ? "warn" : "ok";
}

/* ---- JSON ---------------------------------------------------------------------------------- */

static void json_notes(jw *w, const char *name, const notes *n)
{
    jw_key(w, name);
    jw_array_begin(w);
    for (unsigned i = 0; i < n->n; i++)
        jw_cstring(w, n->text[i]);
    jw_array_end(w);
}

static void json_str_or_null(jw *w, const char *name, const char *value)
{
    jw_key(w, name);
    jw_cstring(w, value[0] != '\0' ? value : NULL);
}

/* What a server said, as members of the object being written. */
static void json_server(jw *w, const server_check *sc)
{
    json_str_or_null(w, "version", sc->version);
    json_str_or_null(w, "role", sc->role);
    json_str_or_null(w, "run_id", sc->run_id);
    json_str_or_null(w, "maxmemory_policy", sc->policy);
    jw_key(w, "aof");
    if (sc->aof < 0)
        jw_null(w);
    else
        jw_bool(w, sc->aof == 1);
    json_str_or_null(w, "appendfsync", sc->appendfsync);
    jw_key(w, "denied");
    jw_array_begin(w);
    for (const char *p = sc->denied; *p != '\0';) {
        size_t len = strcspn(p, " ");
        jw_string(w, p, len);
        p += len + (p[len] == ' ');
    }
    jw_array_end(w);
    jw_key(w, "rtt_us");
    if (sc->rtt_us == UINT64_MAX)
        jw_null(w);
    else
        jw_u64(w, sc->rtt_us);
    jw_key(w, "clock_offset_ms");
    if (sc->have_clock)
        jw_i64(w, sc->clock_offset_ms);
    else
        jw_null(w);
}

static void json_masters(jw *w, const node_check *nc)
{
    json_str_or_null(w, "asked", nc->asked);
    json_str_or_null(w, "cluster_state", nc->cluster_state);
    jw_key(w, "slots_covered");
    jw_u64(w, nc->slots_covered);
    jw_key(w, "wait_replicas");
    jw_u64(w, (uint64_t)nc->url.wait_replicas);
    jw_key(w, "masters");
    jw_array_begin(w);
    for (unsigned k = 0; k < nc->n_servers; k++) {
        const server_check *sc = &nc->servers[k];
        jw_object_begin(w);
        jw_key(w, "address");
        jw_cstring(w, sc->address);
        jw_key(w, "ok");
        jw_bool(w, sc->errors.n == 0);
        json_notes(w, "warnings", &sc->warnings);
        json_notes(w, "errors", &sc->errors);
        jw_key(w, "slots");
        jw_u64(w, sc->slots);
        json_str_or_null(w, "probe_key", sc->probe_key);
        jw_key(w, "connected_replicas");
        if (sc->connected_replicas < 0)
            jw_null(w);
        else
            jw_u64(w, (uint64_t)sc->connected_replicas);
        json_server(w, sc);
        jw_object_end(w);
    }
    jw_array_end(w);
}

bool check_print_json(const checker *ck, unsigned n)
{
    jw w;
    jw_init(&w);
    jw_object_begin(&w);
    jw_key(&w, "status");
    jw_cstring(&w, check_verdict(ck, n));
    jw_key(&w, "probe_key");
    jw_cstring(&w, ck->probe_key);
    json_notes(&w, "warnings", &ck->warnings);
    jw_key(&w, "nodes");
    jw_array_begin(&w);
    for (unsigned i = 0; i < n; i++) {
        const node_check *nc = &ck->nodes[i];
        jw_object_begin(&w);
        jw_key(&w, "url");
        jw_cstring(&w, nc->url.redacted);
        jw_key(&w, "ok");
        jw_bool(&w, check_node_ok(nc));
        if (nc->url.cluster) {
            /* The cluster's own notes here; each master's in its entry. */
            json_notes(&w, "warnings", &nc->warnings);
            json_notes(&w, "errors", &nc->errors);
            json_masters(&w, nc);
        } else {
            json_notes(&w, "warnings", &nc->servers[0].warnings);
            json_notes(&w, "errors", &nc->servers[0].errors);
            json_server(&w, &nc->servers[0]);
        }
        jw_object_end(&w);
    }
    jw_array_end(&w);
    jw_object_end(&w);
    bool ok = jw_ok(&w) && fputs(w.buf, stdout) != EOF && fputc('\n', stdout) != EOF &&
              fflush(stdout) == 0;
    jw_free(&w);
    if (!ok)
        fprintf(stderr, "redlock: cannot write the result to stdout\n");
    return ok;
}

/* ---- the table ----------------------------------------------------------------------------- */

static const char *status_word(unsigned errors, unsigned warnings)
{
    return errors > 0 ? "ERROR" : warnings > 0 ? "warn" : "ok";
}

static void table_notes(const notes *errors, const notes *warnings, const char *indent)
{
    for (unsigned k = 0; k < errors->n; k++)
        fprintf(stderr, "%serror: %s\n", indent, errors->text[k]);
    for (unsigned k = 0; k < warnings->n; k++)
        fprintf(stderr, "%swarning: %s\n", indent, warnings->text[k]);
}

/* One server's line: name, version, role, round trip, clock, status; its notes under it. */
static void table_server(const server_check *sc, const char *name, int width, const char *indent)
{
    char rtt[32] = "-", clock[32] = "-";
    if (sc->rtt_us != UINT64_MAX && sc->rtt_us < 1000)
        snprintf(rtt, sizeof(rtt), "%lluus", (unsigned long long)sc->rtt_us);
    else if (sc->rtt_us != UINT64_MAX)
        snprintf(rtt, sizeof(rtt), "%.1fms", (double)sc->rtt_us / 1000.0);
    if (sc->have_clock)
        snprintf(clock, sizeof(clock), "%+lldms", (long long)sc->clock_offset_ms);
    fprintf(stderr, "%s%-*s %-8s %-7s rtt %-8s clock %-9s %s\n", indent, width, name,
            sc->version[0] != '\0' ? sc->version : "?", sc->role[0] != '\0' ? sc->role : "?", rtt,
            clock, status_word(sc->errors.n, sc->warnings.n));
}

/* A cluster node: its own line and notes, then each master's (--quiet: those with something to
 * say). */
static void table_cluster(const node_check *nc, bool quiet)
{
    fprintf(stderr, "  %-36s cluster: %u master%s, %u/%u slots, state %s    %s\n", nc->url.redacted,
            nc->n_servers, nc->n_servers == 1 ? "" : "s", nc->slots_covered, REDLOCK__CLUSTER_SLOTS,
            nc->cluster_state[0] != '\0' ? nc->cluster_state : "?",
            status_word(check_node_ok(nc) ? 0 : 1, node_warnings(nc)));
    table_notes(&nc->errors, &nc->warnings, "      ");
    for (unsigned k = 0; k < nc->n_servers; k++) {
        const server_check *sc = &nc->servers[k];
        if (quiet && sc->errors.n == 0 && sc->warnings.n == 0)
            continue;
        char name[CHECK_ADDRESS_LEN + 8];
        snprintf(name, sizeof(name), "master %s", sc->address);
        table_server(sc, name, 34, "    ");
        table_notes(&sc->errors, &sc->warnings, "        ");
    }
}

/* The table on stderr: one line per node (and per master of a cluster), its warnings and errors
 * under it. --quiet leaves out what is fine. */
void check_print_table(const checker *ck, unsigned n)
{
    bool quiet = ck->args->quiet;
    unsigned errors = 0, warnings = ck->warnings.n;
    for (unsigned i = 0; i < n; i++) {
        errors += !check_node_ok(&ck->nodes[i]);
        warnings += node_warnings(&ck->nodes[i]);
    }
    if (!quiet)
        fprintf(stderr, "redlock: check of %u node%s (probe key %s)\n", n, n == 1 ? "" : "s",
                ck->probe_key);
    for (unsigned i = 0; i < n; i++) {
        const node_check *nc = &ck->nodes[i];
        if (quiet && check_node_ok(nc) && node_warnings(nc) == 0)
            continue;
        if (nc->url.cluster) {
            table_cluster(nc, quiet);
            continue;
        }
        const server_check *sc = &nc->servers[0];
        table_server(sc, nc->url.redacted, 36, "  ");
        table_notes(&sc->errors, &sc->warnings, "      ");
    }
    for (unsigned k = 0; k < ck->warnings.n; k++)
        fprintf(stderr, "  warning: %s\n", ck->warnings.text[k]);
    if (errors > 0)
        fprintf(stderr, "redlock: %u of %u node%s cannot serve locks\n", errors, n,
                n == 1 ? "" : "s");
    else if (!quiet || warnings > 0)
        fprintf(stderr, "redlock: every node can serve locks%s\n",
                warnings > 0 ? ", with warnings" : "");
}
