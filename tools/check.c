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
 * reported.
 *
 * The check talks to the nodes with blocking hiredis connections of its own, one node after the
 * other, each command bounded by --node-timeout: it needs raw commands the library's public API
 * does not offer, and the library's client is not widened for a tool. hiredis here has no TLS,
 * so rediss:// nodes are refused (a later release can check them through the library's TLS).
 *
 * Output: one JSON line on stdout, {"status":"ok|warn|error","warnings":[..],"nodes":[{"url":..,
 * "ok":bool,"warnings":[..],"errors":[..],...}]}, and a table on stderr. Exit 0 when all is
 * well, 1 with warnings only, 69 when a node cannot serve locks, 64 for a usage error. */
#include "tool.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "command.h" /* REDLOCK__FENCE_SUFFIX */
#include "scripts.h"

#define MAX_NOTES 16
#define NOTE_LEN 320
#define PROBE_TTL_MS 10000
#define EXIT_CHECK_WARN 1

typedef struct notes {
    unsigned n;
    char text[MAX_NOTES][NOTE_LEN];
} notes;

/* What one node said. Strings are "" when unknown. */
typedef struct node_check {
    const char *url_text; /* borrowed from the command line */
    redlock_url url;
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
    uint64_t rtt_us;     /* UINT64_MAX until a command came back */
    uint64_t timeout_ms; /* the URL's timeout_ms, else --node-timeout */
    bool key_refused;    /* the probe key is outside the user's key patterns */
    bool logged_in;      /* AUTH and SELECT went through */
} node_check;

typedef struct checker {
    const cli_args *args;
    char probe_key[300];
    char probe_token[2 * TOOL_TOKEN_BYTES + 1];
    node_check *nodes;
    notes warnings; /* about the deployment as a whole */
} checker;

/* ---- small helpers ------------------------------------------------------------------------- */

static void note(notes *n, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void note(notes *n, const char *fmt, ...)
{
    if (n->n == MAX_NOTES)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n->text[n->n++], NOTE_LEN, fmt, ap);
    va_end(ap);
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
static const char *reply_text(const redisReply *r, char *buf, size_t len)
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
static redisReply *command(checker *ck, node_check *nc, redisContext *ctx, int argc,
                           const char **argv, const size_t *lens)
{
    size_t own[8];
    if (lens == NULL) {
        for (int i = 0; i < argc; i++)
            own[i] = strlen(argv[i]);
        lens = own;
    }
    uint64_t start = mono_us();
    redisReply *r = redisCommandArgv(ctx, argc, argv, lens);
    uint64_t took = mono_us() - start;
    if (r == NULL) {
        if (ctx->err == REDIS_ERR_IO &&
            (errno == EAGAIN || errno == ETIMEDOUT || strstr(ctx->errstr, "temporarily") != NULL))
            note(&nc->errors, "no answer to %s within %llu ms", argv[0],
                 (unsigned long long)nc->timeout_ms);
        else
            note(&nc->errors, "connection failed during %s: %s", argv[0], ctx->errstr);
        return NULL;
    }
    if (took < nc->rtt_us)
        nc->rtt_us = took;
    return r;
}

/* Whether what is in the node's list of refused commands. */
static bool was_denied(const node_check *nc, const char *what)
{
    size_t n = strlen(what);
    for (const char *p = nc->denied; (p = strstr(p, what)) != NULL; p += n)
        if ((p == nc->denied || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return true;
    return false;
}

static void add_denied(node_check *nc, const char *what)
{
    size_t len = strlen(nc->denied);
    snprintf(nc->denied + len, sizeof(nc->denied) - len, "%s%s", len > 0 ? " " : "", what);
}

/* A NOPERM reply: the user may not run the command, or not on the probe key. Returns true when
 * r was one (and says so). */
static bool denied(checker *ck, node_check *nc, const redisReply *r, const char *what,
                   bool required)
{
    if (!is_error(r, "NOPERM"))
        return false;
    if (strstr(r->str, "keys") != NULL) {
        if (nc->key_refused)
            return true;
        nc->key_refused = true;
        note(&nc->errors,
             "this user may not use the probe key %s: give check the start of your lock keys, "
             "the one the ACL's key pattern allows (redlock check locks:)",
             ck->probe_key);
        return true;
    }
    if (was_denied(nc, what))
        return true; /* said already */
    add_denied(nc, what);
    if (required)
        note(&nc->errors, "%s is not allowed for this user (the library needs it: allow +%s)", what,
             what);
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
            return;
        }
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
}

static void read_info(checker *ck, node_check *nc, redisContext *ctx, bool *ok)
{
    const char *argv[] = {"INFO"};
    uint64_t before = wall_us();
    redisReply *r = command(ck, nc, ctx, 1, argv, NULL);
    uint64_t after = wall_us();
    if (r == NULL) {
        *ok = false;
        return;
    }
    char text[256];
    if (is_error(r, "NOAUTH")) {
        note(&nc->errors, "the server wants a password (NOAUTH): give it in the URL");
        *ok = false;
    } else if (denied(ck, nc, r, "info", false)) {
        note(&nc->warnings,
             "INFO is not allowed for this user: the client cannot tell two URLs that reach one "
             "server apart (allow +info), and this check cannot read the version, role, "
             "eviction policy or persistence");
    } else if (r->type != REDIS_REPLY_STRING) {
        note(&nc->warnings, "INFO answered %s",
             r->type == REDIS_REPLY_ERROR ? reply_text(r, text, sizeof(text))
                                          : "something other than text");
    } else {
        const char *info = r->str;
        char v[64];
        info_field(info, "redis_version", nc->version, sizeof(nc->version));
        info_field(info, "run_id", nc->run_id, sizeof(nc->run_id));
        info_field(info, "role", nc->role, sizeof(nc->role));
        info_field(info, "maxmemory_policy", nc->policy, sizeof(nc->policy));
        info_field(info, "maxmemory", v, sizeof(v));
        nc->maxmemory = v[0] != '\0' ? atoll(v) : -1;
        info_field(info, "aof_enabled", v, sizeof(v));
        nc->aof = v[0] != '\0' ? atoi(v) != 0 : -1;
        info_field(info, "connected_slaves", v, sizeof(v));
        nc->connected_replicas = v[0] != '\0' ? atoi(v) : -1;
        info_field(info, "cluster_enabled", v, sizeof(v));
        nc->cluster = atoi(v) != 0;
        info_field(info, "loading", v, sizeof(v));
        nc->loading = atoi(v) != 0;
        info_field(info, "server_time_usec", v, sizeof(v));
        nc->server_time_us = atoll(v);
        nc->info_local_us = before + (after - before) / 2;
    }
    freeReplyObject(r);
}

/* appendfsync is not in INFO; CONFIG GET needs more than a lock user is given. */
static void read_appendfsync(checker *ck, node_check *nc, redisContext *ctx, bool *ok)
{
    const char *argv[] = {"CONFIG", "GET", "appendfsync"};
    redisReply *r = command(ck, nc, ctx, 3, argv, NULL);
    if (r == NULL) {
        *ok = false;
        return;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_STRING)
        snprintf(nc->appendfsync, sizeof(nc->appendfsync), "%.15s", r->element[1]->str);
    freeReplyObject(r);
}

/* The node's wall clock against ours: TIME if allowed, else INFO's server_time_usec. The
 * reading is taken halfway through the call, so it is off by at most half the round trip. */
static void read_clock(checker *ck, node_check *nc, redisContext *ctx, bool *ok)
{
    const char *argv[] = {"TIME"};
    uint64_t before = wall_us();
    redisReply *r = command(ck, nc, ctx, 1, argv, NULL);
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
    } else if (nc->server_time_us > 0) {
        server_us = nc->server_time_us;
        local_us = (int64_t)nc->info_local_us;
    }
    freeReplyObject(r);
    if (server_us > 0) {
        nc->have_clock = true;
        nc->clock_offset_ms = (server_us - local_us) / 1000;
    }
}

/* ---- the commands of a lock ---------------------------------------------------------------- */

typedef enum { EXPECT_OK, EXPECT_INT, EXPECT_ANY } expect;

/* Run one probe command; a refusal or an unexpected answer is noted. Returns the reply (NULL
 * when the connection is gone, *ok then false) for the caller to free. */
static redisReply *probe(checker *ck, node_check *nc, redisContext *ctx, const char *what,
                         bool required, int argc, const char **argv, bool *ok)
{
    if (nc->key_refused) { /* every other command on the key would be refused the same way */
        *ok = false;
        return NULL;
    }
    redisReply *r = command(ck, nc, ctx, argc, argv, NULL);
    if (r == NULL) {
        *ok = false;
        return NULL;
    }
    char text[256];
    if (denied(ck, nc, r, what, required))
        return r;
    if (is_error(r, "READONLY")) {
        note(&nc->errors, "is a read-only replica (%s answered READONLY): locks need masters",
             argv[0]);
        return r;
    }
    /* A script that cannot run a command it calls: said already when that command itself was
     * refused above. */
    bool in_script = r->type == REDIS_REPLY_ERROR && strstr(r->str, "script") != NULL &&
                     strstr(r->str, "can't run this command") != NULL;
    if (in_script && nc->denied[0] != '\0')
        return r;
    if (r->type == REDIS_REPLY_ERROR && !is_error(r, "NOSCRIPT"))
        note(&nc->errors, "%s failed: %s", what, reply_text(r, text, sizeof(text)));
    return r;
}

static void try_commands(checker *ck, node_check *nc, redisContext *ctx, bool *ok)
{
    const char *key = ck->probe_key, *token = ck->probe_token;
    char ttl[32];
    snprintf(ttl, sizeof(ttl), "%d", PROBE_TTL_MS);
    char fence_key[sizeof(ck->probe_key) + REDLOCK__FENCE_SUFFIX_LEN];
    snprintf(fence_key, sizeof(fence_key), "%s" REDLOCK__FENCE_SUFFIX, key);
    redisReply *r;
    bool readonly = false;

    const char *set[] = {"SET", key, token, "NX", "PX", ttl};
    if ((r = probe(ck, nc, ctx, "set", true, 6, set, ok)) == NULL)
        return;
    readonly = is_error(r, "READONLY");
    if (r->type == REDIS_REPLY_NIL)
        note(&nc->warnings, "the probe key %s already existed: the check did not change it", key);
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
        if ((r = probe(ck, nc, ctx, plain[i].what, true, plain[i].argc, plain[i].argv, ok)) == NULL)
            return;
        freeReplyObject(r);
    }

    bool loaded = true;
    for (size_t i = 0; i < REDLOCK__SCRIPTS; i++) { /* every script the handshake loads */
        const char *load[] = {"SCRIPT", "LOAD", redlock__scripts[i]->source};
        if ((r = probe(ck, nc, ctx, "script|load", false, 3, load, ok)) == NULL)
            return;
        if (r->type != REDIS_REPLY_STRING)
            loaded = false;
        freeReplyObject(r);
    }
    if (!loaded && was_denied(nc, "script|load"))
        note(&nc->warnings, "SCRIPT LOAD is not allowed for this user: every extend and release "
                            "first gets NOSCRIPT and is sent again as EVAL (allow +script|load)");

    /* The scripts as the library sends them: EVALSHA (read-only inspect first, then extend),
     * and EVAL, which also deletes the probe key (release). */
    const char *inspect[] = {"EVALSHA", redlock__script_inspect.sha1, "2", key, fence_key};
    if ((r = probe(ck, nc, ctx, "evalsha", true, 5, inspect, ok)) == NULL)
        return;
    freeReplyObject(r);
    const char *extend[] = {"EVALSHA", redlock__script_extend.sha1, "1", key, token, ttl, "0"};
    if (loaded) {
        if ((r = probe(ck, nc, ctx, "evalsha", true, 7, extend, ok)) == NULL)
            return;
        if (r->type == REDIS_REPLY_INTEGER && r->integer != 1 && !was_denied(nc, "set"))
            note(&nc->errors, "the extend script did not renew the probe key (answered %lld)",
                 r->integer);
        freeReplyObject(r);
    }
    const char *release[] = {"EVAL", redlock__script_release.source, "1", key, token};
    if ((r = probe(ck, nc, ctx, "eval", true, 5, release, ok)) == NULL)
        return;
    freeReplyObject(r);
    /* DEL: what the release script calls, tried directly; it also clears the probe key if the
     * release could not. */
    const char *del[] = {"DEL", key};
    if ((r = probe(ck, nc, ctx, "del", true, 2, del, ok)) == NULL)
        return;
    freeReplyObject(r);
    /* Notifications: the release script PUBLISHes on a channel named like the key, and waiting
     * clients SUBSCRIBE to it. Optional: without them waiters poll. (SUBSCRIBE itself is not
     * tried: it would turn this connection into a subscriber's.) */
    const char *publish[] = {"PUBLISH", key, "check"};
    if ((r = probe(ck, nc, ctx, "publish", false, 3, publish, ok)) == NULL)
        return;
    freeReplyObject(r);
    if (was_denied(nc, "publish"))
        note(&nc->warnings,
             "PUBLISH on the lock keys' channels is not allowed for this user: releases do not "
             "wake waiting clients, which poll every retry_delay_ms instead (allow +publish "
             "+subscribe and the channels, e.g. &locks:*)");

    /* What the scripts of a set (EXISTS) and of a waiter's queue (KEY:queue, KEY:queue-due:
     * TIME and the sorted set's and the hash's commands) call, tried directly so that a refusal
     * names its command. Without them an acquire of several resources, or one that waits,
     * gets an error vote from this node. The probe's entries are removed again. */
    char queue_key[sizeof(ck->probe_key) + REDLOCK__QUEUE_SUFFIX_LEN];
    char due_key[sizeof(ck->probe_key) + REDLOCK__DUE_SUFFIX_LEN];
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
        if ((r = probe(ck, nc, ctx, queued[i].what, true, queued[i].argc, queued[i].argv, ok)) ==
            NULL)
            return;
        freeReplyObject(r);
    }
}

/* ---- one node ------------------------------------------------------------------------------ */

static redisContext *connect_node(checker *ck, node_check *nc)
{
    const redlock_url *u = &nc->url;
    uint64_t connect_ms = nc->timeout_ms > 1000 ? nc->timeout_ms : 1000;
    struct timeval tv = {(time_t)(connect_ms / 1000), (suseconds_t)(connect_ms % 1000) * 1000};
    redisContext *ctx = u->is_unix ? redisConnectUnixWithTimeout(u->path, tv)
                                   : redisConnectWithTimeout(u->host, u->port, tv);
    if (ctx == NULL) {
        note(&nc->errors, "cannot connect: out of memory");
        return NULL;
    }
    if (ctx->err != 0) {
        note(&nc->errors, "cannot connect: %s", ctx->errstr);
        redisFree(ctx);
        return NULL;
    }
    struct timeval each = {(time_t)(nc->timeout_ms / 1000),
                           (suseconds_t)(nc->timeout_ms % 1000) * 1000};
    redisSetTimeout(ctx, each);
    return ctx;
}

/* AUTH and SELECT, as the library's handshake sends them. */
static bool log_in(checker *ck, node_check *nc, redisContext *ctx)
{
    const redlock_url *u = &nc->url;
    char text[256];
    if (u->password != NULL) {
        const char *argv[3] = {"AUTH"};
        int argc = 1;
        if (u->user != NULL)
            argv[argc++] = u->user;
        argv[argc++] = u->password;
        redisReply *r = command(ck, nc, ctx, argc, argv, NULL);
        if (r == NULL)
            return false;
        bool ok = r->type == REDIS_REPLY_STATUS;
        if (!ok)
            note(&nc->errors, "authentication failed: %s", reply_text(r, text, sizeof(text)));
        freeReplyObject(r);
        if (!ok)
            return false;
    }
    if (u->db > 0) {
        char db[16];
        snprintf(db, sizeof(db), "%d", u->db);
        const char *argv[] = {"SELECT", db};
        redisReply *r = command(ck, nc, ctx, 2, argv, NULL);
        if (r == NULL)
            return false;
        bool ok = r->type == REDIS_REPLY_STATUS;
        if (!ok && !denied(ck, nc, r, "select", true))
            note(&nc->errors, "SELECT %d failed: %s", u->db, reply_text(r, text, sizeof(text)));
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

/* What INFO and CONFIG said, against docs/operations.md. */
static void judge(checker *ck, node_check *nc)
{
    if (nc->version[0] != '\0' && version_too_old(nc->version))
        note(&nc->errors, "Redis %s is too old: SET NX PX and scripts need 2.6.12 or newer",
             nc->version);
    if (strcmp(nc->role, "slave") == 0 || strcmp(nc->role, "replica") == 0) {
        bool said = false;
        for (unsigned i = 0; i < nc->errors.n; i++)
            said = said || strstr(nc->errors.text[i], "replica") != NULL;
        if (!said)
            note(&nc->errors, "is a replica (role %s): locks need masters", nc->role);
    } else if (nc->connected_replicas > 0) {
        note(&nc->warnings,
             "has %d replica(s): replication is asynchronous, so a replica promoted after a "
             "failover may lack a held lock (use standalone masters, no failover)",
             nc->connected_replicas);
    }
    if (nc->policy[0] != '\0' && evicts_volatile_keys(nc->policy))
        note(&nc->warnings,
             "maxmemory-policy %s may evict a held lock's key under memory pressure%s (use "
             "noeviction)",
             nc->policy, nc->maxmemory == 0 ? " once a maxmemory is set" : "");
    if (nc->cluster)
        note(&nc->warnings,
             "runs in cluster mode: each URL must be one standalone master, and keys of other "
             "slots are refused (MOVED)");
    if (nc->loading)
        note(&nc->warnings, "is still loading its data set");
    if (ck->args->delayed_restart)
        return;
    if (nc->aof == 1 && strcmp(nc->appendfsync, "always") == 0)
        return;
    if (nc->aof == 0)
        note(&nc->warnings,
             "no AOF: a restart loses every lock key, and another client may take a held lock: "
             "keep a restarted node out for longer than the longest ttl (the delayed restart "
             "of docs/operations.md, then pass --delayed-restart) or use appendonly yes with "
             "appendfsync always");
    else if (nc->aof == 1 && nc->appendfsync[0] != '\0')
        note(&nc->warnings,
             "appendfsync %s: a crash may lose the last second of lock keys; use appendfsync "
             "always, or delay restarts (docs/operations.md) and pass --delayed-restart",
             nc->appendfsync);
    else
        note(&nc->warnings,
             "cannot tell whether this node keeps its keys across a restart (%s): make sure it "
             "runs AOF with appendfsync always, or delay restarts (docs/operations.md) and pass "
             "--delayed-restart",
             nc->aof == 1 ? "CONFIG GET appendfsync is not allowed for this user"
                          : "INFO is not allowed for this user");
}

static void check_node(checker *ck, node_check *nc)
{
    redisContext *ctx = connect_node(ck, nc);
    if (ctx == NULL)
        return;
    bool ok = log_in(ck, nc, ctx);
    nc->logged_in = ok;
    if (ok)
        read_info(ck, nc, ctx, &ok);
    if (ok && nc->errors.n == 0)
        read_appendfsync(ck, nc, ctx, &ok);
    if (ok && nc->errors.n == 0)
        read_clock(ck, nc, ctx, &ok);
    if (ok && nc->errors.n == 0)
        try_commands(ck, nc, ctx, &ok);
    redisFree(ctx);
    if (nc->logged_in)
        judge(ck, nc);
    if (nc->rtt_us != UINT64_MAX && nc->rtt_us * 2 > nc->timeout_ms * 1000)
        note(&nc->warnings,
             "its round trip (%llu us) is more than half the node timeout (%llu ms): rounds "
             "will see timeouts",
             (unsigned long long)nc->rtt_us, (unsigned long long)nc->timeout_ms);
}

/* ---- the deployment ------------------------------------------------------------------------ */

/* Two URLs that reach one server (a host name and its address, two proxies) would let it count
 * twice toward a quorum: the library keeps the second one down; here both are named. */
static void find_twins(checker *ck, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        node_check *a = &ck->nodes[i];
        for (unsigned j = 0; j < i && a->run_id[0] != '\0'; j++) {
            if (strcmp(ck->nodes[j].run_id, a->run_id) == 0) {
                note(&a->errors,
                     "same server as node %u (%s, run_id %.8s...): it would count twice toward "
                     "the quorum",
                     j, ck->nodes[j].url.redacted, a->run_id);
                break;
            }
        }
    }
    unsigned unknown = 0;
    for (unsigned i = 0; i < n; i++)
        unknown += ck->nodes[i].run_id[0] == '\0' && ck->nodes[i].errors.n == 0;
    if (unknown > 0 && n > 1)
        note(&ck->warnings,
             "%u node(s) did not tell their run_id (INFO): two URLs reaching one "
             "server cannot be ruled out",
             unknown);
    if (n < 3)
        note(&ck->warnings,
             "%u node(s): a quorum of %u leaves no node that may fail; use 5 (or "
             "at least 3) independent masters",
             n, n / 2 + 1);
    else if (n % 2 == 0)
        note(&ck->warnings,
             "%u nodes: an even count adds a node that may fail without adding "
             "tolerance (%u may fail, as with %u)",
             n, (n - 1) / 2, n - 1);
}

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

static const char *verdict(const checker *ck, unsigned n)
{
    bool warn = ck->warnings.n > 0;
    for (unsigned i = 0; i < n; i++) {
        if (ck->nodes[i].errors.n > 0)
            return "error";
        warn = warn || ck->nodes[i].warnings.n > 0;
    }
    return warn ? "warn" : "ok";
}

static bool print_json(const checker *ck, unsigned n)
{
    jw w;
    jw_init(&w);
    jw_object_begin(&w);
    jw_key(&w, "status");
    jw_cstring(&w, verdict(ck, n));
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
        jw_bool(&w, nc->errors.n == 0);
        json_notes(&w, "warnings", &nc->warnings);
        json_notes(&w, "errors", &nc->errors);
        json_str_or_null(&w, "version", nc->version);
        json_str_or_null(&w, "role", nc->role);
        json_str_or_null(&w, "run_id", nc->run_id);
        json_str_or_null(&w, "maxmemory_policy", nc->policy);
        jw_key(&w, "aof");
        if (nc->aof < 0)
            jw_null(&w);
        else
            jw_bool(&w, nc->aof == 1);
        json_str_or_null(&w, "appendfsync", nc->appendfsync);
        jw_key(&w, "denied");
        jw_array_begin(&w);
        for (const char *p = nc->denied; *p != '\0';) {
            size_t len = strcspn(p, " ");
            jw_string(&w, p, len);
            p += len + (p[len] == ' ');
        }
        jw_array_end(&w);
        jw_key(&w, "rtt_us");
        if (nc->rtt_us == UINT64_MAX)
            jw_null(&w);
        else
            jw_u64(&w, nc->rtt_us);
        jw_key(&w, "clock_offset_ms");
        if (nc->have_clock)
            jw_i64(&w, nc->clock_offset_ms);
        else
            jw_null(&w);
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

/* The table on stderr: one line per node, its warnings and errors under it. --quiet leaves out
 * the nodes that are fine. */
static void print_table(const checker *ck, unsigned n)
{
    bool quiet = ck->args->quiet;
    unsigned errors = 0, warnings = ck->warnings.n;
    for (unsigned i = 0; i < n; i++) {
        errors += ck->nodes[i].errors.n > 0;
        warnings += ck->nodes[i].warnings.n;
    }
    if (!quiet)
        fprintf(stderr, "redlock: check of %u node%s (probe key %s)\n", n, n == 1 ? "" : "s",
                ck->probe_key);
    for (unsigned i = 0; i < n; i++) {
        const node_check *nc = &ck->nodes[i];
        if (quiet && nc->errors.n == 0 && nc->warnings.n == 0)
            continue;
        char rtt[32] = "-", clock[32] = "-";
        if (nc->rtt_us != UINT64_MAX && nc->rtt_us < 1000)
            snprintf(rtt, sizeof(rtt), "%lluus", (unsigned long long)nc->rtt_us);
        else if (nc->rtt_us != UINT64_MAX)
            snprintf(rtt, sizeof(rtt), "%.1fms", (double)nc->rtt_us / 1000.0);
        if (nc->have_clock)
            snprintf(clock, sizeof(clock), "%+lldms", (long long)nc->clock_offset_ms);
        fprintf(stderr, "  %-36s %-8s %-7s rtt %-8s clock %-9s %s\n", nc->url.redacted,
                nc->version[0] != '\0' ? nc->version : "?", nc->role[0] != '\0' ? nc->role : "?",
                rtt, clock,
                nc->errors.n > 0     ? "ERROR"
                : nc->warnings.n > 0 ? "warn"
                                     : "ok");
        for (unsigned k = 0; k < nc->errors.n; k++)
            fprintf(stderr, "      error: %s\n", nc->errors.text[k]);
        for (unsigned k = 0; k < nc->warnings.n; k++)
            fprintf(stderr, "      warning: %s\n", nc->warnings.text[k]);
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

/* Parse every URL first: nothing is sent before the whole command line is known to be good. */
static int parse_urls(checker *ck, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        node_check *nc = &ck->nodes[i];
        nc->url_text = ck->args->nodes[i];
        nc->aof = -1;
        nc->maxmemory = -1;
        nc->connected_replicas = -1;
        nc->rtt_us = UINT64_MAX;
        char why[256];
        if (redlock_url_parse(&nc->url, nc->url_text, why, sizeof(why)) != 0) {
            fprintf(stderr, "redlock: node %u: %s\n", i, why);
            return EXIT_USAGE;
        }
        nc->timeout_ms =
            nc->url.timeout_ms > 0 ? (uint64_t)nc->url.timeout_ms : ck->args->node_timeout_ms;
        if (nc->url.cluster) {
            fprintf(stderr,
                    "redlock: node %u (%s): check does not support cluster:// nodes yet; check "
                    "each master of the cluster as a redis:// node\n",
                    i, nc->url.redacted);
            return EXIT_USAGE;
        }
        if (nc->url.tls) {
            fprintf(stderr,
                    "redlock: node %u (%s): check does not support rediss:// (TLS) nodes yet; "
                    "check their plain port from a trusted network, or leave them out\n",
                    i, nc->url.redacted);
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

int check_main(const cli_args *args)
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
        for (unsigned i = 0; i < n; i++)
            check_node(&ck, &ck.nodes[i]);
        find_twins(&ck, n);
        bool printed = print_json(&ck, n);
        print_table(&ck, n);
        const char *v = verdict(&ck, n);
        code = !printed                  ? EXIT_OSERR
               : strcmp(v, "error") == 0 ? EXIT_UNAVAILABLE
               : strcmp(v, "warn") == 0  ? EXIT_CHECK_WARN
                                         : 0;
    }
    for (unsigned i = 0; i < n; i++)
        redlock_url_free(&ck.nodes[i].url);
    free(ck.nodes);
    return code;
}
