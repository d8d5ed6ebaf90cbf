/* SPDX-License-Identifier: MIT */
/* report.c - what the tool tells: one JSON line on stdout for acquire, release, extend and
 * status, and human messages on stderr. Node URLs come from the library, passwords redacted;
 * resources and tokens are any bytes, so they are escaped in JSON and made printable for the
 * terminal. */
#include "tool.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void say(const char *fmt, va_list ap)
{
    char line[1024];
    vsnprintf(line, sizeof(line), fmt, ap);
    /* Whatever it quotes (a server's text), the terminal gets printable ASCII only: a key or a
     * token is escaped by tool_printable before, anything else unexpected becomes '?'. */
    for (char *c = line; *c != '\0'; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
            *c = '?';
    fprintf(stderr, "redlock: %s\n", line);
}

void tool_say(const tool *t, const char *fmt, ...)
{
    if (t->args.quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    say(fmt, ap);
    va_end(ap);
}

void tool_warn(const tool *t, const char *fmt, ...)
{
    (void)t;
    va_list ap;
    va_start(ap, fmt);
    say(fmt, ap);
    va_end(ap);
}

char *tool_printable(const void *bytes, size_t len, char *out, size_t out_len)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *s = bytes;
    size_t o = 0;
    if (out_len < 8) {
        if (out_len > 0)
            out[0] = '\0';
        return out;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = s[i];
        size_t need = (c >= 0x20 && c < 0x7f && c != '\\') ? 1 : (c == '\\' ? 2 : 4);
        if (o + need + 4 > out_len) { /* room for "..." and the NUL */
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (need == 1) {
            out[o++] = (char)c;
        } else if (c == '\\') {
            out[o++] = '\\';
            out[o++] = '\\';
        } else {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = digits[c >> 4];
            out[o++] = digits[c & 15];
        }
    }
    out[o] = '\0';
    return out;
}

const char *tool_signal_name(int signum, char *buf, size_t buf_len)
{
    static const struct {
        int signum;
        const char *name;
    } names[] = {
        {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
        {SIGABRT, "SIGABRT"}, {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"}, {SIGSEGV, "SIGSEGV"},
        {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGUSR1, "SIGUSR1"},
        {SIGUSR2, "SIGUSR2"}, {SIGBUS, "SIGBUS"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (names[i].signum == signum)
            return names[i].name;
    snprintf(buf, buf_len, "signal %d", signum);
    return buf;
}

/* A node's vote in words, when it came with no error text (the text says it better). */
static const char *vote_words(redlock_vote vote)
{
    switch (vote) {
    case REDLOCK_VOTE_YES:
        return "said yes";
    case REDLOCK_VOTE_NO:
        return "said no";
    case REDLOCK_VOTE_TIMEOUT:
        return "no answer in time";
    default:
        return "failed";
    }
}

void tool_say_nodes(const tool *t, const redlock_result *result, bool warn)
{
    void (*out)(const tool *, const char *, ...) = warn ? tool_warn : tool_say;
    char unasked[900]; /* the nodes the round was decided without, on one line */
    size_t o = 0;
    unsigned n_unasked = 0;
    unasked[0] = '\0';
    for (unsigned i = 0; i < result->n_nodes; i++) {
        const redlock_node_result *n = &result->nodes[i];
        if (n->error != NULL) {
            out(t, "  %s: %s", n->url, n->error);
        } else if (n->vote != REDLOCK_VOTE_NONE) {
            out(t, "  %s: %s", n->url, vote_words(n->vote));
        } else {
            int w = snprintf(unasked + o, sizeof(unasked) - o, "%s%s", n_unasked > 0 ? ", " : "",
                             n->url);
            if (w > 0 && (size_t)w < sizeof(unasked) - o)
                o += (size_t)w;
            n_unasked++;
        }
    }
    if (n_unasked > 0)
        out(t, "  %s: not waited for (the round was decided before %s answered)", unasked,
            n_unasked == 1 ? "it" : "they");
}

const char *tool_deleted_on(const redlock_result *result, char *buf, size_t len)
{
    unsigned pending = 0;
    for (unsigned i = 0; i < result->n_nodes; i++)
        pending += result->nodes[i].vote == REDLOCK_VOTE_NONE;
    int w = snprintf(buf, len, "deleted on %u of %u nodes", result->votes_yes, result->n_nodes);
    if (pending > 0 && w > 0 && (size_t)w < len)
        snprintf(buf + w, len - (size_t)w, "; %u had not answered yet", pending);
    return buf;
}

bool tool_app_data(const redlock_node_result *n)
{
    /* A lock key always has a ttl; GET on a hash, a list, ... fails with WRONGTYPE. */
    return (n->value != NULL && n->pttl_ms == -1) ||
           (n->error != NULL && strstr(n->error, "WRONGTYPE") != NULL);
}

unsigned tool_warn_app_data(const tool *t, const redlock_result *result)
{
    unsigned app = 0;
    for (unsigned i = 0; i < result->n_nodes; i++)
        app += tool_app_data(&result->nodes[i]);
    if (app == 0)
        return 0;
    /* Not a lock at all: no acquire can ever win there, and waiting does not help. */
    char key[160];
    tool_printable(t->args.key, t->args.key_len, key, sizeof(key));
    tool_warn(t,
              "%s holds application data on %u of %u nodes (a value without a ttl, or not a "
              "string), not a lock: lock another name, or give the locks keys of their own with "
              "--prefix (key_prefix)",
              key, app, result->n_nodes);
    return app;
}

/* Write the finished line to stdout at once (a script may be waiting for it). */
static void print_line(tool *t, jw *w)
{
    if (!jw_ok(w)) {
        fprintf(stderr, "redlock: out of memory\n");
        t->output_failed = true;
        return;
    }
    if (fputs(w->buf, stdout) == EOF || fputc('\n', stdout) == EOF || fflush(stdout) != 0) {
        fprintf(stderr, "redlock: cannot write the result to stdout\n");
        t->output_failed = true;
    }
}

/* result NULL: no round to show (an acquire interrupted between two attempts). */
static void json_nodes(jw *w, const redlock_result *result)
{
    jw_key(w, "nodes");
    jw_array_begin(w);
    for (unsigned i = 0; result != NULL && i < result->n_nodes; i++) {
        const redlock_node_result *n = &result->nodes[i];
        jw_object_begin(w);
        jw_key(w, "url");
        jw_cstring(w, n->url);
        jw_key(w, "vote");
        jw_cstring(w, redlock_vote_name(n->vote));
        jw_key(w, "latency_us");
        jw_u64(w, n->latency_us);
        jw_key(w, "error");
        jw_cstring(w, n->error);
        if (n->answered_by != NULL) { /* a cluster node: the master that voted */
            jw_key(w, "answered_by");
            jw_cstring(w, n->answered_by);
        }
        jw_object_end(w);
    }
    jw_array_end(w);
}

static void json_head(jw *w, const tool *t, int status)
{
    jw_object_begin(w);
    jw_key(w, "resource");
    jw_string(w, t->args.key, t->args.key_len);
    jw_key(w, "status");
    jw_cstring(w, redlock_err_name(status));
    if (status != 0) {
        jw_key(w, "error");
        jw_cstring(w, redlock_strerror(status));
    }
}

/* With --fence: "fence": the lock's fence, or null without a lock. */
static void json_fence(jw *w, const tool *t, redlock_lock *lock)
{
    if (!t->args.fence)
        return;
    jw_key(w, "fence");
    if (lock != NULL)
        jw_u64(w, redlock_lock_fence(lock));
    else
        jw_null(w);
}

void report_lock_result(tool *t, redlock_lock *lock, int status, const redlock_result *result)
{
    jw w;
    jw_init(&w);
    json_head(&w, t, status);
    if (lock != NULL) {
        size_t token_len;
        const char *token = redlock_lock_token(lock, &token_len);
        jw_key(&w, "token");
        jw_string(&w, token, token_len);
    }
    switch (t->args.command) {
    case CLI_CMD_ACQUIRE:
        if (status == 0) {
            jw_key(&w, "validity_ms");
            jw_u64(&w, redlock_lock_validity_ms(lock));
        }
        jw_key(&w, "attempts"); /* the tool's own attempts (each one round, its own token) */
        jw_u64(&w, t->attempts);
        json_fence(&w, t, status == 0 ? lock : NULL);
        break;
    case CLI_CMD_EXTEND:
        if (status == 0) {
            jw_key(&w, "validity_ms");
            jw_u64(&w, redlock_lock_validity_ms(lock));
        }
        break;
    case CLI_CMD_RELEASE:
        jw_key(&w, "released");
        jw_u64(&w, result->votes_yes);
        /* The release's verdict on the whole hold: fewer than a quorum still held the token. */
        jw_key(&w, "lapsed");
        jw_bool(&w, status == REDLOCK_ELOST);
        break;
    default:
        break;
    }
    json_nodes(&w, result);
    jw_object_end(&w);
    print_line(t, &w);
    jw_free(&w);
}

void report_run_result(tool *t, redlock_lock *lock, int status, const redlock_result *result)
{
    if (!t->args.json || t->args.command != CLI_CMD_RUN)
        return;
    jw w;
    jw_init(&w);
    json_head(&w, t, status);
    if (lock != NULL) {
        size_t token_len;
        const char *token = redlock_lock_token(lock, &token_len);
        jw_key(&w, "token");
        jw_string(&w, token, token_len);
    }
    json_fence(&w, t, lock);
    jw_key(&w, "command_status");
    if (t->command_ran)
        jw_i64(&w, t->command_status);
    else
        jw_null(&w);
    jw_key(&w, "lost");
    jw_bool(&w, t->lost);
    jw_key(&w, "lapsed");
    jw_bool(&w, lock != NULL && status == REDLOCK_ELOST);
    jw_key(&w, "released");
    if (lock != NULL && result != NULL)
        jw_u64(&w, result->votes_yes);
    else
        jw_null(&w);
    jw_key(&w, "exit");
    jw_i64(&w, t->exit_code);
    json_nodes(&w, result);
    jw_object_end(&w);
    print_line(t, &w);
    jw_free(&w);
}

/* The value held by a quorum of nodes, if any (index of a node holding it, or -1). */
static int quorum_holder(const redlock_result *result)
{
    unsigned quorum = redlock_quorum_of(result->n_nodes);
    for (unsigned i = 0; i < result->n_nodes; i++) {
        const redlock_node_result *a = &result->nodes[i];
        if (a->value == NULL)
            continue;
        unsigned same = 0;
        for (unsigned j = 0; j < result->n_nodes; j++) {
            const redlock_node_result *b = &result->nodes[j];
            if (b->value != NULL && b->value_len == a->value_len &&
                memcmp(a->value, b->value, a->value_len) == 0)
                same++;
        }
        if (same >= quorum)
            return (int)i;
    }
    return -1;
}

void report_status(tool *t, int status, const redlock_result *result)
{
    int holder = quorum_holder(result);
    unsigned held = 0, answered = 0;
    jw w;
    jw_init(&w);
    json_head(&w, t, status);
    jw_key(&w, "holder");
    if (holder >= 0)
        jw_string(&w, result->nodes[holder].value, result->nodes[holder].value_len);
    else
        jw_null(&w);
    jw_key(&w, "nodes");
    jw_array_begin(&w);
    for (unsigned i = 0; i < result->n_nodes; i++) {
        const redlock_node_result *n = &result->nodes[i];
        bool ok = n->vote == REDLOCK_VOTE_YES || n->vote == REDLOCK_VOTE_NO;
        answered += ok;
        held += n->value != NULL;
        jw_object_begin(&w);
        jw_key(&w, "url");
        jw_cstring(&w, n->url);
        jw_key(&w, "holder");
        if (n->value != NULL)
            jw_string(&w, n->value, n->value_len);
        else
            jw_null(&w);
        jw_key(&w, "pttl_ms");
        if (ok)
            jw_i64(&w, n->pttl_ms);
        else
            jw_null(&w);
        if (t->args.fence) { /* the node's fencing counter (0: none) */
            jw_key(&w, "fence");
            if (ok)
                jw_u64(&w, n->fence);
            else
                jw_null(&w);
        }
        jw_key(&w, "error");
        if (ok)
            jw_null(&w);
        else
            jw_cstring(&w, n->error != NULL ? n->error : "no answer");
        if (n->answered_by != NULL) { /* a cluster node: the master that answered */
            jw_key(&w, "answered_by");
            jw_cstring(&w, n->answered_by);
        }
        jw_object_end(&w);
    }
    jw_array_end(&w);
    jw_object_end(&w);
    print_line(t, &w);
    jw_free(&w);

    char key[160], token[120];
    tool_printable(t->args.key, t->args.key_len, key, sizeof(key));
    if (tool_warn_app_data(t, result) > 0) {
        if (status != 0)
            tool_say_nodes(t, result, true);
    } else if (status != 0) {
        tool_warn(t, "no quorum for %s: only %u of %u nodes answered", key, answered,
                  result->n_nodes);
        tool_say_nodes(t, result, true);
    } else if (holder >= 0) {
        tool_printable(result->nodes[holder].value, result->nodes[holder].value_len, token,
                       sizeof(token));
        tool_say(t, "%s is held by %s on %u of %u nodes", key, token, held, result->n_nodes);
    } else if (held > 0) {
        tool_say(t, "%s is not held by a quorum (a key is on %u of %u nodes)", key, held,
                 result->n_nodes);
    } else {
        tool_say(t, "%s is free (%u of %u nodes answered)", key, answered, result->n_nodes);
    }
}
