/* SPDX-License-Identifier: MIT */
/* check_server.c - the checks of one server for "redlock check" (check.c): a plain node, or one
 * master of a cluster node (check_cluster.c) alike. Its INFO (role, version, eviction policy,
 * persistence, clock), whether the user may run every command the library sends (tried one by
 * one on the server's probe key) and the verdict on what it said; and the helpers the other
 * parts share: notes, one command with its scrubbed reply, the connection and the login. It
 * calls no other part of the check. */
#include "check.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>

#include "command.h" /* REDLOCK__FENCE_SUFFIX */
#include "scripts.h"
#include "scrub.h"

#define PROBE_TTL_MS 10000

/* ---- small helpers ------------------------------------------------------------------------- */

void check_note(notes *n, const char *fmt, ...)
{
    if (n->n == CHECK_MAX_NOTES)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *text = n->text[n->n++];
    vsnprintf(text, CHECK_NOTE_LEN, fmt, ap);
    va_end(ap);
    redlock__scrub(text, strlen(text), NULL); /* it may quote a server: no control byte */
}

static uint64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static uint64_t wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static bool is_error(const redisReply *r, const char *prefix)
{
    return r != NULL && r->type == REDIS_REPLY_ERROR &&
           strncmp(r->str, prefix, strlen(prefix)) == 0;
}

/* A server's text for a message: one line, at most 200 bytes. */
const char *check_reply_text(const redisReply *r, char *buf, size_t len)
{
    snprintf(buf, len, "%.200s", r->str != NULL ? r->str : "");
    for (char *p = buf; *p != '\0'; p++)
        if ((unsigned char)*p < 0x20)
            *p = ' ';
    return buf;
}

/* One command on the node, timed; NULL when the connection failed or timed out (an error is
 * then noted and the node's check ends). argv strings are NUL-terminated except where lens is
 * given. */
redisReply *check_command(server_check *sc, check_conn *ctx, int argc, const char **argv,
                          const size_t *lens)
{
    size_t own[8];
    if (lens == NULL) {
        for (int i = 0; i < argc; i++)
            own[i] = strlen(argv[i]);
        lens = own;
    }
    uint64_t start = mono_us();
    redisReply *r;
    char why[256];
    int rc = check_conn_command(ctx, argc, argv, lens, sc->timeout_ms, &r, why, sizeof(why));
    uint64_t took = mono_us() - start;
    if (rc == CHECK_CONN_TIMEOUT) {
        check_note(&sc->errors, "no answer to %s within %llu ms", argv[0],
                   (unsigned long long)sc->timeout_ms);
        return NULL;
    }
    if (rc != CHECK_CONN_OK) {
        check_note(&sc->errors, "connection failed during %s: %s", argv[0], why);
        return NULL;
    }
    if (took < sc->rtt_us)
        sc->rtt_us = took;
    redlock__scrub_error(r, sc->password); /* before any note quotes it */
    return r;
}

/* Whether what is in the node's list of refused commands. */
static bool was_denied(const server_check *sc, const char *what)
{
    size_t n = strlen(what);
    for (const char *p = sc->denied; (p = strstr(p, what)) != NULL; p += n)
        if ((p == sc->denied || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return true;
    return false;
}

static void add_denied(server_check *sc, const char *what)
{
    size_t len = strlen(sc->denied);
    snprintf(sc->denied + len, sizeof(sc->denied) - len, "%s%s", len > 0 ? " " : "", what);
}

/* A NOPERM reply: the user may not run the command, or not on the probe key. Returns true when
 * r was one (and says so). */
static bool denied(checker *ck, server_check *sc, const redisReply *r, const char *what,
                   bool required)
{
    if (!is_error(r, "NOPERM"))
        return false;
    if (strstr(r->str, "keys") != NULL) {
        if (sc->key_refused)
            return true;
        sc->key_refused = true;
        check_note(
            &sc->errors,
            "this user may not use the probe key %s: give check the start of your lock keys, "
            "the one the ACL's key pattern allows (redlock check locks:)",
            sc->probe_key);
        return true;
    }
    if (was_denied(sc, what))
        return true; /* said already */
    add_denied(sc, what);
    if (required)
        check_note(&sc->errors, "%s is not allowed for this user (the library needs it: allow +%s)",
                   what, what);
    return true;
}

/* ---- INFO ---------------------------------------------------------------------------------- */

/* The value of "name:" in an INFO text, copied into out ("" if absent). */
static void info_field(const char *info, const char *name, char *out, size_t len)
{
    out[0] = '\0';
    size_t name_len = strlen(name);
    for (const char *p = info; p != NULL && *p != '\0';) {
        if (strncmp(p, name, name_len) == 0 && p[name_len] == ':') {
            const char *v = p + name_len + 1;
            size_t n = strcspn(v, "\r\n");
            snprintf(out, len, "%.*s", (int)n, v);
            redlock__scrub(out, strlen(out), NULL); /* shown in the table */
            return;
        }
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
}

static void read_info(checker *ck, server_check *sc, check_conn *ctx, bool *ok)
{
    const char *argv[] = {"INFO"};
    uint64_t before = wall_us();
    redisReply *r = check_command(sc, ctx, 1, argv, NULL);
    uint64_t after = wall_us();
    if (r == NULL) {
        *ok = false;
        return;
    }
    char text[256];
    if (is_error(r, "NOAUTH")) {
        check_note(&sc->errors, "the server wants a password (NOAUTH): give it in the URL");
        *ok = false;
    } else if (denied(ck, sc, r, "info", false)) {
        check_note(
            &sc->warnings,
            "INFO is not allowed for this user: the client cannot tell two URLs that reach one "
            "server apart (allow +info), and this check cannot read the version, role, "
            "eviction policy or persistence");
    } else if (r->type != REDIS_REPLY_STRING) {
        check_note(&sc->warnings, "INFO answered %s",
                   r->type == REDIS_REPLY_ERROR ? check_reply_text(r, text, sizeof(text))
                                                : "something other than text");
    } else {
        const char *info = r->str;
        char v[64];
        info_field(info, "redis_version", sc->version, sizeof(sc->version));
        info_field(info, "run_id", sc->run_id, sizeof(sc->run_id));
        info_field(info, "role", sc->role, sizeof(sc->role));
        info_field(info, "maxmemory_policy", sc->policy, sizeof(sc->policy));
        info_field(info, "maxmemory", v, sizeof(v));
        sc->maxmemory = v[0] != '\0' ? atoll(v) : -1;
        info_field(info, "aof_enabled", v, sizeof(v));
        sc->aof = v[0] != '\0' ? atoi(v) != 0 : -1;
        info_field(info, "connected_slaves", v, sizeof(v));
        sc->connected_replicas = v[0] != '\0' ? atoi(v) : -1;
        info_field(info, "cluster_enabled", v, sizeof(v));
        sc->cluster = atoi(v) != 0;
        info_field(info, "loading", v, sizeof(v));
        sc->loading = atoi(v) != 0;
        info_field(info, "server_time_usec", v, sizeof(v));
        sc->server_time_us = atoll(v);
        sc->info_local_us = before + (after - before) / 2;
    }
    freeReplyObject(r);
}

/* appendfsync is not in INFO; CONFIG GET needs more than a lock user is given. */
static void read_appendfsync(checker *ck, server_check *sc, check_conn *ctx, bool *ok)
{
    const char *argv[] = {"CONFIG", "GET", "appendfsync"};
    redisReply *r = check_command(sc, ctx, 3, argv, NULL);
    if (r == NULL) {
        *ok = false;
        return;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_STRING)
        snprintf(sc->appendfsync, sizeof(sc->appendfsync), "%.15s", r->element[1]->str);
    redlock__scrub(sc->appendfsync, strlen(sc->appendfsync), NULL);
    freeReplyObject(r);
}

/* The node's wall clock against ours: TIME if allowed, else INFO's server_time_usec. The
 * reading is taken halfway through the call, so it is off by at most half the round trip. */
static void read_clock(checker *ck, server_check *sc, check_conn *ctx, bool *ok)
{
    const char *argv[] = {"TIME"};
    uint64_t before = wall_us();
    redisReply *r = check_command(sc, ctx, 1, argv, NULL);
    uint64_t after = wall_us();
    if (r == NULL) {
        *ok = false;
        return;
    }
    int64_t server_us = 0, local_us = 0;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_STRING) {
        server_us = atoll(r->element[0]->str) * 1000000 + atoll(r->element[1]->str);
        local_us = (int64_t)(before + (after - before) / 2);
    } else if (sc->server_time_us > 0) {
        server_us = sc->server_time_us;
        local_us = (int64_t)sc->info_local_us;
    }
    freeReplyObject(r);
    if (server_us > 0) {
        sc->have_clock = true;
        sc->clock_offset_ms = (server_us - local_us) / 1000;
    }
}

/* ---- the commands of a lock ---------------------------------------------------------------- */

typedef enum { EXPECT_OK, EXPECT_INT, EXPECT_ANY } expect;

/* Run one probe command; a refusal or an unexpected answer is noted. Returns the reply (NULL
 * when the connection is gone, *ok then false) for the caller to free. */
static redisReply *probe(checker *ck, server_check *sc, check_conn *ctx, const char *what,
                         bool required, int argc, const char **argv, bool *ok)
{
    /* Every other command on the key would be refused the same way. */
    if (sc->key_refused || sc->probe_stopped) {
        *ok = false;
        return NULL;
    }
    redisReply *r = check_command(sc, ctx, argc, argv, NULL);
    if (r == NULL) {
        *ok = false;
        return NULL;
    }
    char text[256];
    if (denied(ck, sc, r, what, required))
        return r;
    if (is_error(r, "READONLY")) {
        check_note(&sc->errors, "is a read-only replica (%s answered READONLY): locks need masters",
                   argv[0]);
        return r;
    }
    /* A cluster's answers about the key's slot rather than the command: said once. */
    if (is_error(r, "MOVED") || is_error(r, "ASK ") || is_error(r, "CLUSTERDOWN") ||
        is_error(r, "TRYAGAIN")) {
        check_note(&sc->errors,
                   "%s failed: %s (the other commands on the probe key were not tried)", what,
                   check_reply_text(r, text, sizeof(text)));
        sc->probe_stopped = true;
        return r;
    }
    /* A script that cannot run a command it calls: said already when that command itself was
     * refused above. */
    bool in_script = r->type == REDIS_REPLY_ERROR && strstr(r->str, "script") != NULL &&
                     strstr(r->str, "can't run this command") != NULL;
    if (in_script && sc->denied[0] != '\0')
        return r;
    if (r->type == REDIS_REPLY_ERROR && !is_error(r, "NOSCRIPT"))
        check_note(&sc->errors, "%s failed: %s", what, check_reply_text(r, text, sizeof(text)));
    return r;
}

static void try_commands(checker *ck, server_check *sc, check_conn *ctx, bool *ok)
{
    const char *key = sc->probe_key, *token = ck->probe_token;
    char ttl[32];
    snprintf(ttl, sizeof(ttl), "%d", PROBE_TTL_MS);
    char fence_key[sizeof(sc->probe_key) + REDLOCK__FENCE_SUFFIX_LEN];
    snprintf(fence_key, sizeof(fence_key), "%s" REDLOCK__FENCE_SUFFIX, key);
    redisReply *r;
    bool readonly = false;

    const char *set[] = {"SET", key, token, "NX", "PX", ttl};
    if ((r = probe(ck, sc, ctx, "set", true, 6, set, ok)) == NULL)
        return;
    readonly = is_error(r, "READONLY");
    if (r->type == REDIS_REPLY_NIL)
        check_note(&sc->warnings, "the probe key %s already existed: the check did not change it",
                   key);
    freeReplyObject(r);
    if (readonly)
        return; /* nothing more to learn from a replica */

    const char *get[] = {"GET", key};
    const char *pttl[] = {"PTTL", key};
    const char *pexpire[] = {"PEXPIRE", key, ttl};
    struct {
        const char *what;
        const char **argv;
        int argc;
    } plain[] = {{"get", get, 2}, {"pttl", pttl, 2}, {"pexpire", pexpire, 3}};
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
        if ((r = probe(ck, sc, ctx, plain[i].what, true, plain[i].argc, plain[i].argv, ok)) == NULL)
            return;
        freeReplyObject(r);
    }

    bool loaded = true;
    for (size_t i = 0; i < REDLOCK__SCRIPTS; i++) { /* every script the handshake loads */
        const char *load[] = {"SCRIPT", "LOAD", redlock__scripts[i]->source};
        if ((r = probe(ck, sc, ctx, "script|load", false, 3, load, ok)) == NULL)
            return;
        if (r->type != REDIS_REPLY_STRING)
            loaded = false;
        freeReplyObject(r);
    }
    if (!loaded && was_denied(sc, "script|load"))
        check_note(&sc->warnings,
                   "SCRIPT LOAD is not allowed for this user: every extend and release "
                   "first gets NOSCRIPT and is sent again as EVAL (allow +script|load)");

    /* The scripts as the library sends them: EVALSHA (read-only inspect first, then extend),
     * and EVAL, which also deletes the probe key (release). */
    const char *inspect[] = {"EVALSHA", redlock__script_inspect.sha1, "2", key, fence_key};
    if ((r = probe(ck, sc, ctx, "evalsha", true, 5, inspect, ok)) == NULL)
        return;
    freeReplyObject(r);
    const char *extend[] = {"EVALSHA", redlock__script_extend.sha1, "1", key, token, ttl, "0"};
    if (loaded) {
        if ((r = probe(ck, sc, ctx, "evalsha", true, 7, extend, ok)) == NULL)
            return;
        if (r->type == REDIS_REPLY_INTEGER && r->integer != 1 && !was_denied(sc, "set"))
            check_note(&sc->errors, "the extend script did not renew the probe key (answered %lld)",
                       r->integer);
        freeReplyObject(r);
    }
    const char *release[] = {"EVAL", redlock__script_release.source, "1", key, token};
    if ((r = probe(ck, sc, ctx, "eval", true, 5, release, ok)) == NULL)
        return;
    freeReplyObject(r);
    /* DEL: what the release script calls, tried directly; it also clears the probe key if the
     * release could not. */
    const char *del[] = {"DEL", key};
    if ((r = probe(ck, sc, ctx, "del", true, 2, del, ok)) == NULL)
        return;
    freeReplyObject(r);
    /* Notifications: the release script PUBLISHes on a channel named like the key, and waiting
     * clients SUBSCRIBE to it. Optional: without them waiters poll. (SUBSCRIBE itself is not
     * tried: it would turn this connection into a subscriber's.) */
    const char *publish[] = {"PUBLISH", key, "check"};
    if ((r = probe(ck, sc, ctx, "publish", false, 3, publish, ok)) == NULL)
        return;
    freeReplyObject(r);
    if (was_denied(sc, "publish"))
        check_note(
            &sc->warnings,
            "PUBLISH on the lock keys' channels is not allowed for this user: releases do not "
            "wake waiting clients, which poll every retry_delay_ms instead (allow +publish "
            "+subscribe and the channels, e.g. &locks:*)");
    /* The queue's release asks PUBSUB NUMSUB whether the next waiter listens before it hands
     * it the key (a grant). Optional: without it the waiter takes the key with a round. */
    const char *numsub[] = {"PUBSUB", "NUMSUB", key};
    if ((r = probe(ck, sc, ctx, "pubsub|numsub", false, 3, numsub, ok)) == NULL)
        return;
    freeReplyObject(r);
    if (was_denied(sc, "pubsub|numsub"))
        check_note(&sc->warnings,
                   "PUBSUB NUMSUB is not allowed for this user: a release does not hand the lock "
                   "to the next waiter in the queue, which takes it with a round of its own "
                   "instead (allow +pubsub|numsub)");

    /* What the scripts of a set (EXISTS) and of a waiter's queue (KEY:queue, KEY:queue-due:
     * TIME and the sorted set's and the hash's commands) call, tried directly so that a refusal
     * names its command. Without them an acquire of several resources, or one that waits,
     * gets an error vote from this node. The probe's entries are removed again. */
    char queue_key[sizeof(sc->probe_key) + REDLOCK__QUEUE_SUFFIX_LEN];
    char due_key[sizeof(sc->probe_key) + REDLOCK__DUE_SUFFIX_LEN];
    snprintf(queue_key, sizeof(queue_key), "%s" REDLOCK__QUEUE_SUFFIX, key);
    snprintf(due_key, sizeof(due_key), "%s" REDLOCK__DUE_SUFFIX, key);
    const char *exists[] = {"EXISTS", key};
    const char *time_now[] = {"TIME"};
    const char *zadd[] = {"ZADD", queue_key, "NX", "1", token};
    const char *zrange[] = {"ZRANGE", queue_key, "0", "0"};
    const char *zrem[] = {"ZREM", queue_key, token};
    const char *hset[] = {"HSET", due_key, token, "1"};
    const char *hget[] = {"HGET", due_key, token};
    const char *hdel[] = {"HDEL", due_key, token};
    struct {
        const char *what;
        const char **argv;
        int argc;
    } queued[] = {{"exists", exists, 2}, {"time", time_now, 1}, {"zadd", zadd, 5},
                  {"zrange", zrange, 4}, {"zrem", zrem, 3},     {"hset", hset, 4},
                  {"hget", hget, 3},     {"hdel", hdel, 3}};
    for (size_t i = 0; i < sizeof(queued) / sizeof(queued[0]); i++) {
        if ((r = probe(ck, sc, ctx, queued[i].what, true, queued[i].argc, queued[i].argv, ok)) ==
            NULL)
            return;
        freeReplyObject(r);
    }
}

/* What a cluster's master is sent besides (lib/net/cluster.c): ASKING before a command redirected
 * by ASK while a slot migrates, and with wait_replicas, WAIT behind every write (here WAIT 0 1,
 * which returns at once). */
static void try_cluster_commands(checker *ck, server_check *sc, check_conn *ctx, bool *ok)
{
    const char *asking[] = {"ASKING"};
    redisReply *r = probe(ck, sc, ctx, "asking", false, 1, asking, ok);
    if (r == NULL)
        return;
    freeReplyObject(r);
    if (was_denied(sc, "asking"))
        check_note(&sc->warnings,
                   "ASKING is not allowed for this user: while a slot migrates, locks on it get "
                   "an error vote from this cluster (allow +asking)");
    if (sc->wait_replicas == 0)
        return;
    const char *wait[] = {"WAIT", "0", "1"};
    if ((r = probe(ck, sc, ctx, "wait", true, 3, wait, ok)) != NULL)
        freeReplyObject(r);
}

/* ---- one node ------------------------------------------------------------------------------ */

check_conn *check_connect(server_check *sc)
{
    uint64_t connect_ms = sc->timeout_ms > 1000 ? sc->timeout_ms : 1000;
    check_conn_target t = {sc->is_unix, sc->path, sc->host, sc->port, sc->tls};
    check_conn *ctx;
    char why[256];
    if (check_conn_open(&t, connect_ms, &ctx, why, sizeof(why)) != CHECK_CONN_OK) {
        check_note(&sc->errors, "cannot connect: %s", why);
        return NULL;
    }
    return ctx;
}

/* AUTH and SELECT, as the library's handshake sends them. */
bool check_log_in(checker *ck, server_check *sc, check_conn *ctx)
{
    char text[256];
    if (sc->password != NULL) {
        const char *argv[3] = {"AUTH"};
        int argc = 1;
        if (sc->user != NULL)
            argv[argc++] = sc->user;
        argv[argc++] = sc->password;
        redisReply *r = check_command(sc, ctx, argc, argv, NULL);
        if (r == NULL)
            return false;
        bool ok = r->type == REDIS_REPLY_STATUS;
        if (!ok)
            check_note(&sc->errors, "authentication failed: %s",
                       check_reply_text(r, text, sizeof(text)));
        freeReplyObject(r);
        if (!ok)
            return false;
    }
    if (sc->db > 0) {
        char db[16];
        snprintf(db, sizeof(db), "%d", sc->db);
        const char *argv[] = {"SELECT", db};
        redisReply *r = check_command(sc, ctx, 2, argv, NULL);
        if (r == NULL)
            return false;
        bool ok = r->type == REDIS_REPLY_STATUS;
        if (!ok && !denied(ck, sc, r, "select", true))
            check_note(&sc->errors, "SELECT %d failed: %s", sc->db,
                       check_reply_text(r, text, sizeof(text)));
        freeReplyObject(r);
        if (!ok)
            return false;
    }
    return true;
}

/* Nothing below 2.6.12 has SET ... NX PX and scripts. */
static bool version_too_old(const char *v)
{
    int major = 0, minor = 0, patch = 0;
    if (sscanf(v, "%d.%d.%d", &major, &minor, &patch) < 2)
        return false;
    return major < 2 || (major == 2 && (minor < 6 || (minor == 6 && patch < 12)));
}

static bool evicts_volatile_keys(const char *policy)
{
    return strncmp(policy, "allkeys-", 8) == 0 || strncmp(policy, "volatile-", 9) == 0;
}

/* A cluster's master (docs/cluster.md): with wait_replicas=N a write counts only once N replicas
 * acknowledged it, so fewer connected replicas make every write on its slots an error vote;
 * without it, a replica is what a failover promotes, perhaps without a held lock. */
static void judge_cluster_replicas(server_check *sc)
{
    int have = sc->connected_replicas, want = sc->wait_replicas;
    if (want > 0 && have >= 0 && have < want)
        check_note(&sc->errors,
                   "has %d connected replica(s), fewer than wait_replicas=%d: its writes could "
                   "never count (every lock on its slots gets an error vote)",
                   have, want);
    else if (want > 0 && have < 0)
        check_note(&sc->warnings,
                   "cannot tell how many replicas it has (INFO is not allowed for this user): "
                   "wait_replicas=%d needs that many connected",
                   want);
    else if (want == 0 && have > 0)
        check_note(&sc->warnings,
                   "has %d replica(s): replication is asynchronous, so a replica a failover "
                   "promotes may lack a held lock (wait_replicas=N in the URL narrows that "
                   "window: docs/cluster.md)",
                   have);
}

/* What INFO and CONFIG said, against docs/operations.md. */
static void judge(checker *ck, server_check *sc)
{
    if (sc->version[0] != '\0' && version_too_old(sc->version))
        check_note(&sc->errors, "Redis %s is too old: SET NX PX and scripts need 2.6.12 or newer",
                   sc->version);
    if (strcmp(sc->role, "slave") == 0 || strcmp(sc->role, "replica") == 0) {
        bool said = false;
        for (unsigned i = 0; i < sc->errors.n; i++)
            said = said || strstr(sc->errors.text[i], "replica") != NULL;
        if (!said)
            check_note(&sc->errors, "is a replica (role %s): locks need masters", sc->role);
    } else if (sc->in_cluster) {
        judge_cluster_replicas(sc);
    } else if (sc->connected_replicas > 0) {
        check_note(&sc->warnings,
                   "has %d replica(s): replication is asynchronous, so a replica promoted after a "
                   "failover may lack a held lock (use standalone masters, no failover)",
                   sc->connected_replicas);
    }
    if (sc->policy[0] != '\0' && evicts_volatile_keys(sc->policy))
        check_note(&sc->warnings,
                   "maxmemory-policy %s may evict a held lock's key under memory pressure%s (use "
                   "noeviction)",
                   sc->policy, sc->maxmemory == 0 ? " once a maxmemory is set" : "");
    if (sc->cluster && !sc->in_cluster)
        check_note(
            &sc->warnings,
            "runs in cluster mode: each URL must be one standalone master, and keys of other "
            "slots are refused (MOVED)");
    if (sc->loading)
        check_note(&sc->warnings, "is still loading its data set");
    if (ck->args->delayed_restart)
        return;
    if (sc->aof == 1 && strcmp(sc->appendfsync, "always") == 0)
        return;
    if (sc->aof == 0)
        check_note(
            &sc->warnings,
            "no AOF: a restart loses every lock key, and another client may take a held lock: "
            "keep a restarted node out for longer than the longest ttl (the delayed restart "
            "of docs/operations.md, then pass --delayed-restart) or use appendonly yes with "
            "appendfsync always");
    else if (sc->aof == 1 && sc->appendfsync[0] != '\0')
        check_note(&sc->warnings,
                   "appendfsync %s: a crash may lose the last second of lock keys; use appendfsync "
                   "always, or delay restarts (docs/operations.md) and pass --delayed-restart",
                   sc->appendfsync);
    else
        check_note(
            &sc->warnings,
            "cannot tell whether this node keeps its keys across a restart (%s): make sure it "
            "runs AOF with appendfsync always, or delay restarts (docs/operations.md) and pass "
            "--delayed-restart",
            sc->aof == 1 ? "CONFIG GET appendfsync is not allowed for this user"
                         : "INFO is not allowed for this user");
}

void check_server(checker *ck, server_check *sc)
{
    check_conn *ctx = check_connect(sc);
    if (ctx == NULL)
        return;
    bool ok = check_log_in(ck, sc, ctx);
    sc->logged_in = ok;
    if (ok)
        read_info(ck, sc, ctx, &ok);
    if (ok && sc->errors.n == 0)
        read_appendfsync(ck, sc, ctx, &ok);
    if (ok && sc->errors.n == 0)
        read_clock(ck, sc, ctx, &ok);
    if (ok && sc->errors.n == 0 && sc->probe_key[0] != '\0')
        try_commands(ck, sc, ctx, &ok);
    if (ok && sc->errors.n == 0 && sc->in_cluster)
        try_cluster_commands(ck, sc, ctx, &ok);
    check_conn_close(ctx);
    if (sc->logged_in)
        judge(ck, sc);
    if (sc->rtt_us != UINT64_MAX && sc->rtt_us * 2 > sc->timeout_ms * 1000)
        check_note(&sc->warnings,
                   "its round trip (%llu us) is more than half the node timeout (%llu ms): rounds "
                   "will see timeouts",
                   (unsigned long long)sc->rtt_us, (unsigned long long)sc->timeout_ms);
}

void check_server_init(server_check *sc, uint64_t timeout_ms)
{
    sc->timeout_ms = timeout_ms;
    sc->db = -1;
    sc->online = true;
    sc->aof = -1;
    sc->maxmemory = -1;
    sc->connected_replicas = -1;
    sc->rtt_us = UINT64_MAX;
}
