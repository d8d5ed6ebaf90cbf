/* SPDX-License-Identifier: MIT */
/* Redis Cluster fixture (see cluster_fixture.h): forms clusters from one-server fixture clusters
 * with blocking hiredis commands, and waits by polling what every node says (cluster_view.c).
 *
 * Every check reads the servers: a node's view is its CLUSTER SHARDS, parsed into which node
 * owns each slot and which master each node follows. The fixture never assumes a command took
 * effect everywhere; it waits (bounded) until every running node's view says so.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "cluster_fixture.h"
#include "cluster_view.h"
#include "ports.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How often a wait of this file (a replica hearing of its master, a failover) asks again. */
#define POLL_MS 50
/* A manual failover the servers gave up on (loaded machine, lost vote) is asked for again. */
#define FAILOVER_ATTEMPT_MS 10000
#define FAILOVER_ATTEMPTS 3
#define MIGRATE_BATCH 100

static bool in_range(const fixture_redis_cluster *rc, unsigned i, const char *what)
{
    if (rc && i < rc->n)
        return true;
    fprintf(stderr, "fixture: %s: node %u out of range (n = %u)\n", what, i, rc ? rc->n : 0);
    return false;
}

redisContext *fixture_cluster_connect(fixture_redis_cluster *rc, unsigned i)
{
    if (!in_range(rc, i, "fixture_cluster_connect"))
        return NULL;
    return fixture_connect(&rc->nodes[i], 0);
}

static redisReply *vcommand(fixture_redis_cluster *rc, unsigned i, const char *fmt, va_list ap)
{
    redisContext *ctx = fixture_cluster_connect(rc, i);
    if (!ctx)
        return NULL;
    redisReply *reply = NULL;
    if (ctx->err)
        fprintf(stderr, "fixture: connect to node %u (port %d): %s\n", i,
                rc->nodes[i].servers[0].port, ctx->errstr);
    else
        reply = redisvCommand(ctx, fmt, ap);
    if (!reply && !ctx->err)
        fprintf(stderr, "fixture: command on node %u failed: no reply\n", i);
    else if (!reply)
        fprintf(stderr, "fixture: command on node %u failed: %s\n", i, ctx->errstr);
    redisFree(ctx);
    return reply;
}

redisReply *fixture_cluster_command(fixture_redis_cluster *rc, unsigned i, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *reply = vcommand(rc, i, fmt, ap);
    va_end(ap);
    return reply;
}

/* Run a command that must answer +OK; -1 with the answer on stderr otherwise. */
static int command_ok(fixture_redis_cluster *rc, unsigned i, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *reply = vcommand(rc, i, fmt, ap);
    va_end(ap);
    bool ok = reply && reply->type == REDIS_REPLY_STATUS && strcmp(reply->str, "OK") == 0;
    if (reply && !ok)
        fprintf(stderr, "fixture: node %u answered \"%s\" to \"%s\"\n", i,
                reply->str ? reply->str : "(not a string)", fmt);
    freeReplyObject(reply);
    return ok ? 0 : -1;
}

/* ---- forming -------------------------------------------------------------------------------- */

/* Start node i: its own fixture cluster, with a claimed bus port. */
static int start_node(fixture_redis_cluster *rc, unsigned i, const char *extra_conf,
                      const char *tls_files)
{
    int bus_port = fixture_free_port();
    if (bus_port < 0)
        return -1;
    rc->bus_ports[i] = bus_port;
    char tls[768] = "";
    if (tls_files != NULL) {
        int tls_port = fixture_free_port();
        if (tls_port < 0)
            return -1;
        rc->tls_ports[i] = tls_port;
        if ((size_t)snprintf(tls, sizeof(tls), "tls-port %d\n%s", tls_port, tls_files) >=
            sizeof(tls)) {
            fprintf(stderr, "fixture: fixture_cluster_start_tls: tls_files too long\n");
            return -1;
        }
    }
    char conf[1024];
    // The config file name is relative to the node's dir: redis chdirs there at "dir".
    int written = snprintf(conf, sizeof(conf),
                           "cluster-enabled yes\n"
                           "cluster-config-file nodes.conf\n"
                           "cluster-port %d\n"
                           "cluster-node-timeout 2000\n"
                           "cluster-require-full-coverage no\n"
                           "cluster-replica-validity-factor 0\n"
                           "cluster-allow-replica-migration no\n"
                           "repl-diskless-sync-delay 0\n"
                           "%s%s",
                           bus_port, tls, extra_conf ? extra_conf : "");
    if (written < 0 || (size_t)written >= sizeof(conf)) {
        fprintf(stderr, "fixture: fixture_cluster_start: extra_conf too long\n");
        return -1;
    }
    if (fixture_start(&rc->nodes[i], 1, conf) != 0)
        return -1;
    redisReply *id = fixture_cluster_command(rc, i, "CLUSTER MYID");
    bool ok = id && id->type == REDIS_REPLY_STRING && id->len == 40;
    if (ok)
        memcpy(rc->ids[i], id->str, 41);
    else
        fprintf(stderr, "fixture: node %u: no CLUSTER MYID (%s)\n", i,
                id && id->str ? id->str : "no reply");
    freeReplyObject(id);
    // Distinct epochs from the start spare the nodes the collision dance (as redis-cli does).
    return ok ? command_ok(rc, i, "CLUSTER SET-CONFIG-EPOCH %u", i + 1) : -1;
}

/* Retry CLUSTER REPLICATE until the replica has heard of its master through gossip. */
static int replicate(fixture_redis_cluster *rc, unsigned replica, unsigned master)
{
    long long deadline_ms = fixture_now_ms() + FIXTURE_CLUSTER_WAIT_MS;
    for (;;) {
        redisReply *r =
            fixture_cluster_command(rc, replica, "CLUSTER REPLICATE %s", rc->ids[master]);
        bool ok = r && r->type == REDIS_REPLY_STATUS;
        bool unknown = r && r->type == REDIS_REPLY_ERROR && strstr(r->str, "Unknown node");
        if (!ok && (!unknown || fixture_now_ms() >= deadline_ms))
            fprintf(stderr, "fixture: CLUSTER REPLICATE on node %u: %s\n", replica,
                    r && r->str ? r->str : "no reply");
        freeReplyObject(r);
        if (ok)
            return 0;
        if (!unknown || fixture_now_ms() >= deadline_ms)
            return -1;
        fixture_sleep_ms(POLL_MS);
    }
}

/* The view fixture_cluster_start's layout ends in: master m owns the m-th of `masters` even
 * slot ranges, and its replicas are nodes masters + m * replicas_per_master + r. */
static void layout_view(const fixture_redis_cluster *rc, cluster_view *v)
{
    memset(v, 0, sizeof(*v));
    memset(v->master_of, -1, sizeof(v->master_of));
    for (unsigned m = 0; m < rc->masters; m++) {
        unsigned from = m * FIXTURE_CLUSTER_SLOTS / rc->masters;
        unsigned to = (m + 1) * FIXTURE_CLUSTER_SLOTS / rc->masters - 1;
        memset(&v->slot_owner[from], (int)m, to - from + 1);
        v->master_of[m] = (signed char)m;
    }
    for (unsigned i = rc->masters; i < rc->n; i++)
        v->master_of[i] = (signed char)((i - rc->masters) / rc->replicas_per_master);
}

static int start_cluster(fixture_redis_cluster *rc, const char *extra_conf, const char *tls_files)
{
    for (unsigned i = 0; i < rc->n; i++) {
        if (start_node(rc, i, extra_conf, tls_files) != 0)
            return -1;
    }
    for (unsigned m = 0; m < rc->masters; m++) {
        unsigned from = m * FIXTURE_CLUSTER_SLOTS / rc->masters;
        unsigned to = (m + 1) * FIXTURE_CLUSTER_SLOTS / rc->masters - 1;
        if (command_ok(rc, m, "CLUSTER ADDSLOTSRANGE %u %u", from, to) != 0)
            return -1;
    }
    for (unsigned i = 1; i < rc->n; i++) {
        if (command_ok(rc, 0, "CLUSTER MEET 127.0.0.1 %d %d", rc->nodes[i].servers[0].port,
                       rc->bus_ports[i]) != 0)
            return -1;
    }
    // A replica would hear of its master through gossip from node 0 in a second or so; meeting
    // it directly takes one handshake.
    for (unsigned i = rc->masters; i < rc->n; i++) {
        unsigned master = (i - rc->masters) / rc->replicas_per_master;
        if (master != 0 && command_ok(rc, i, "CLUSTER MEET 127.0.0.1 %d %d",
                                      rc->nodes[master].servers[0].port, rc->bus_ports[master]))
            return -1;
    }
    for (unsigned i = rc->masters; i < rc->n; i++) {
        if (replicate(rc, i, (i - rc->masters) / rc->replicas_per_master) != 0)
            return -1;
    }
    return 0;
}

int fixture_cluster_start(fixture_redis_cluster *rc, unsigned masters, unsigned replicas_per_master,
                          const char *extra_conf)
{
    return fixture_cluster_start_tls(rc, masters, replicas_per_master, extra_conf, NULL);
}

int fixture_cluster_start_tls(fixture_redis_cluster *rc, unsigned masters,
                              unsigned replicas_per_master, const char *extra_conf,
                              const char *tls_files)
{
    if (!rc) {
        fprintf(stderr, "fixture: fixture_cluster_start: NULL cluster\n");
        return -1;
    }
    for (unsigned i = 0; i < FIXTURE_CLUSTER_MAX_NODES; i++)
        fixture_stop(&rc->nodes[i]); // by address: a struct never started is left alone
    memset(rc, 0, sizeof(*rc));
    unsigned n = masters * (1 + replicas_per_master);
    if (masters == 0 || replicas_per_master >= FIXTURE_CLUSTER_MAX_NODES ||
        n > FIXTURE_CLUSTER_MAX_NODES) {
        fprintf(stderr,
                "fixture: fixture_cluster_start: %u masters with %u replicas each is not "
                "1..%d nodes\n",
                masters, replicas_per_master, FIXTURE_CLUSTER_MAX_NODES);
        return -1;
    }
    rc->n = n;
    rc->masters = masters;
    rc->replicas_per_master = replicas_per_master;
    if (start_cluster(rc, extra_conf, tls_files) != 0) {
        fixture_cluster_stop(rc);
        return -1;
    }
    return 0;
}

int fixture_cluster_wait_formed(fixture_redis_cluster *rc)
{
    cluster_view *layout = rc && rc->n > 0 ? malloc(sizeof(*layout)) : NULL;
    if (!layout) {
        fprintf(stderr, "fixture: fixture_cluster_wait_formed: no cluster, or out of memory\n");
        return -1;
    }
    layout_view(rc, layout);
    int result =
        cluster_view_wait(rc, layout, FIXTURE_CLUSTER_WAIT_MS, "fixture_cluster_wait_formed");
    free(layout);
    return result;
}

int fixture_cluster_form(fixture_redis_cluster *rc, unsigned masters, unsigned replicas_per_master,
                         const char *extra_conf)
{
    if (fixture_cluster_start(rc, masters, replicas_per_master, extra_conf) != 0)
        return -1;
    if (fixture_cluster_wait_formed(rc) != 0) {
        fixture_cluster_stop(rc);
        return -1;
    }
    return 0;
}

void fixture_cluster_stop(fixture_redis_cluster *rc)
{
    if (!rc)
        return;
    for (unsigned i = 0; i < rc->n && i < FIXTURE_CLUSTER_MAX_NODES; i++) {
        fixture_stop(&rc->nodes[i]);
        if (rc->bus_ports[i] > 0)
            fixture_port_release(rc->bus_ports[i]);
        rc->bus_ports[i] = 0;
        if (rc->tls_ports[i] > 0)
            fixture_port_release(rc->tls_ports[i]);
        rc->tls_ports[i] = 0;
    }
}

/* ---- nodes ---------------------------------------------------------------------------------- */

const char *fixture_cluster_url(const fixture_redis_cluster *rc, unsigned i)
{
    return rc && i < rc->n ? rc->nodes[i].servers[0].url : NULL;
}

int fixture_cluster_port(const fixture_redis_cluster *rc, unsigned i)
{
    return rc && i < rc->n ? rc->nodes[i].servers[0].port : -1;
}

int fixture_cluster_kill(fixture_redis_cluster *rc, unsigned i)
{
    return in_range(rc, i, "fixture_cluster_kill") ? fixture_kill(&rc->nodes[i], 0) : -1;
}

int fixture_cluster_pause(fixture_redis_cluster *rc, unsigned i)
{
    return in_range(rc, i, "fixture_cluster_pause") ? fixture_pause(&rc->nodes[i], 0) : -1;
}

int fixture_cluster_resume(fixture_redis_cluster *rc, unsigned i)
{
    return in_range(rc, i, "fixture_cluster_resume") ? fixture_resume(&rc->nodes[i], 0) : -1;
}

int fixture_cluster_restart(fixture_redis_cluster *rc, unsigned i)
{
    if (!in_range(rc, i, "fixture_cluster_restart") || fixture_restart(&rc->nodes[i], 0) != 0)
        return -1;
    return cluster_view_wait(rc, NULL, FIXTURE_CLUSTER_WAIT_MS, "fixture_cluster_restart");
}

/* ---- topology questions --------------------------------------------------------------------- */

int fixture_cluster_keyslot(fixture_redis_cluster *rc, const void *key, size_t key_len)
{
    int first = rc ? cluster_view_first_up(rc) : -1;
    if (first < 0)
        return -1;
    redisReply *r =
        fixture_cluster_command(rc, (unsigned)first, "CLUSTER KEYSLOT %b", key, key_len);
    int slot = r && r->type == REDIS_REPLY_INTEGER ? (int)r->integer : -1;
    freeReplyObject(r);
    return slot;
}

int fixture_cluster_slot_owner(fixture_redis_cluster *rc, unsigned slot)
{
    if (!rc || slot >= FIXTURE_CLUSTER_SLOTS)
        return -1;
    cluster_view *v = cluster_view_current(rc);
    int owner = v ? v->slot_owner[slot] : -1;
    free(v);
    return owner;
}

int fixture_cluster_key_owner(fixture_redis_cluster *rc, const void *key, size_t key_len)
{
    int slot = fixture_cluster_keyslot(rc, key, key_len);
    return slot < 0 ? -1 : fixture_cluster_slot_owner(rc, (unsigned)slot);
}

int fixture_cluster_replica_of(fixture_redis_cluster *rc, unsigned master)
{
    if (!in_range(rc, master, "fixture_cluster_replica_of"))
        return -1;
    cluster_view *v = cluster_view_current(rc);
    int replica = -1;
    for (unsigned j = 0; v && j < rc->n && replica < 0; j++) {
        if (j != master && v->master_of[j] == (signed char)master)
            replica = (int)j;
    }
    free(v);
    return replica;
}

int fixture_cluster_master_of(fixture_redis_cluster *rc, unsigned i)
{
    if (!in_range(rc, i, "fixture_cluster_master_of"))
        return -1;
    cluster_view *v = cluster_view_current(rc);
    int master = v ? v->master_of[i] : -1;
    free(v);
    return master;
}

/* ---- failover ------------------------------------------------------------------------------- */

static bool says_master(fixture_redis_cluster *rc, unsigned i)
{
    return cluster_view_field_is(rc, i, "INFO replication", "role", "master");
}

/* The view a failover of replica (now following old) must end in. */
static void expect_failover(const fixture_redis_cluster *rc, cluster_view *v, unsigned replica,
                            int old)
{
    for (unsigned slot = 0; slot < FIXTURE_CLUSTER_SLOTS; slot++) {
        if (v->slot_owner[slot] == old)
            v->slot_owner[slot] = (signed char)replica;
    }
    for (unsigned j = 0; j < rc->n; j++) {
        if (v->master_of[j] == old)
            v->master_of[j] = (signed char)replica;
    }
    // A stopped old master stays a master without slots until it comes back as a replica.
    if (!cluster_view_node_up(rc, (unsigned)old))
        v->master_of[old] = (signed char)old;
}

int fixture_cluster_failover(fixture_redis_cluster *rc, unsigned replica, const char *how)
{
    if (!in_range(rc, replica, "fixture_cluster_failover"))
        return -1;
    cluster_view *expect = cluster_view_current(rc);
    if (!expect)
        return -1;
    int old = expect->master_of[replica];
    int result = -1;
    if (old < 0 || old == (int)replica) {
        fprintf(stderr, "fixture: fixture_cluster_failover: node %u is not a replica\n", replica);
        goto out;
    }
    expect_failover(rc, expect, replica, old);
    for (int attempt = 1; attempt <= FAILOVER_ATTEMPTS && result != 0; attempt++) {
        int asked = how ? command_ok(rc, replica, "CLUSTER FAILOVER %s", how)
                        : command_ok(rc, replica, "CLUSTER FAILOVER");
        // Refused because it took over by itself meanwhile (its master stopped): as good.
        if (asked != 0 && !says_master(rc, replica))
            goto out;
        // The servers give up a manual failover after a few seconds: ask again if so.
        long long deadline_ms = fixture_now_ms() + FAILOVER_ATTEMPT_MS;
        while (!says_master(rc, replica) && fixture_now_ms() < deadline_ms)
            fixture_sleep_ms(POLL_MS);
        if (says_master(rc, replica))
            result = 0;
    }
    if (result != 0) {
        fprintf(stderr, "fixture: fixture_cluster_failover: node %u never became master\n",
                replica);
        goto out;
    }
    result = cluster_view_wait(rc, expect, FIXTURE_CLUSTER_WAIT_MS, "fixture_cluster_failover");
out:
    free(expect);
    return result;
}

/* ---- slot migration ------------------------------------------------------------------------- */

/* MIGRATE every key of slot from `from` to `to`, a batch at a time. */
static int move_keys(fixture_redis_cluster *rc, unsigned slot, unsigned from, unsigned to)
{
    char port[16], timeout[16];
    snprintf(port, sizeof(port), "%d", rc->nodes[to].servers[0].port);
    snprintf(timeout, sizeof(timeout), "%d", FIXTURE_COMMAND_TIMEOUT_MS);
    for (;;) {
        redisReply *keys =
            fixture_cluster_command(rc, from, "CLUSTER GETKEYSINSLOT %u %d", slot, MIGRATE_BATCH);
        if (!keys || keys->type != REDIS_REPLY_ARRAY) {
            fprintf(stderr, "fixture: CLUSTER GETKEYSINSLOT on node %u: %s\n", from,
                    keys && keys->str ? keys->str : "no reply");
            freeReplyObject(keys);
            return -1;
        }
        if (keys->elements == 0) {
            freeReplyObject(keys);
            return 0;
        }
        // MIGRATE host port "" db timeout KEYS key...
        const char *argv[6 + MIGRATE_BATCH + 1] = {"MIGRATE", "127.0.0.1", port,  "",
                                                   "0",       timeout,     "KEYS"};
        size_t argvlen[6 + MIGRATE_BATCH + 1];
        int argc = 7;
        for (size_t k = 0; k < keys->elements && k < MIGRATE_BATCH; k++) {
            argv[argc] = keys->element[k]->str;
            argvlen[argc++] = keys->element[k]->len;
        }
        for (int k = 0; k < 7; k++)
            argvlen[k] = strlen(argv[k]);
        redisReply *r = fixture_command_argv(&rc->nodes[from], 0, argc, argv, argvlen);
        bool ok = r && r->type == REDIS_REPLY_STATUS;
        if (!ok)
            fprintf(stderr, "fixture: MIGRATE from node %u to node %u: %s\n", from, to,
                    r && r->str ? r->str : "no reply");
        freeReplyObject(r);
        freeReplyObject(keys);
        if (!ok)
            return -1;
    }
}

/* SETSLOT NODE on the target, then the source, then every other running master (the order
 * the Redis documentation gives), and wait until every view has the target owning the slot. */
static int assign_slot(fixture_redis_cluster *rc, unsigned slot, unsigned from, unsigned to)
{
    cluster_view *expect = cluster_view_current(rc);
    if (!expect)
        return -1;
    expect->slot_owner[slot] = (signed char)to;
    int result = -1;
    if (command_ok(rc, to, "CLUSTER SETSLOT %u NODE %s", slot, rc->ids[to]) != 0 ||
        command_ok(rc, from, "CLUSTER SETSLOT %u NODE %s", slot, rc->ids[to]) != 0)
        goto out;
    for (unsigned j = 0; j < rc->n; j++) {
        if (j != from && j != to && cluster_view_node_up(rc, j) &&
            expect->master_of[j] == (signed char)j &&
            command_ok(rc, j, "CLUSTER SETSLOT %u NODE %s", slot, rc->ids[to]) != 0)
            goto out;
    }
    result = cluster_view_wait(rc, expect, FIXTURE_CLUSTER_WAIT_MS, "fixture_cluster_migrate_slot");
out:
    free(expect);
    return result;
}

int fixture_cluster_migrate_slot(fixture_redis_cluster *rc, unsigned slot, unsigned from,
                                 unsigned to, fixture_migrate_mode mode)
{
    if (!in_range(rc, from, "fixture_cluster_migrate_slot") ||
        !in_range(rc, to, "fixture_cluster_migrate_slot"))
        return -1;
    if (slot >= FIXTURE_CLUSTER_SLOTS || from == to) {
        fprintf(stderr, "fixture: fixture_cluster_migrate_slot: slot %u from %u to %u\n", slot,
                from, to);
        return -1;
    }
    if (mode != FIXTURE_MIGRATE_FINISH &&
        (command_ok(rc, to, "CLUSTER SETSLOT %u IMPORTING %s", slot, rc->ids[from]) != 0 ||
         command_ok(rc, from, "CLUSTER SETSLOT %u MIGRATING %s", slot, rc->ids[to]) != 0))
        return -1;
    if (move_keys(rc, slot, from, to) != 0)
        return -1;
    if (mode == FIXTURE_MIGRATE_HALF)
        return 0;
    return assign_slot(rc, slot, from, to);
}
