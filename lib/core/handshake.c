/* SPDX-License-Identifier: MIT */
/* handshake.c - see handshake.h. */
#include "handshake.h"

#include <stdio.h>
#include <string.h>

static int append_step(redlock__handshake *hs, redlock__buf *out, const redlock__alloc *alloc,
                       int argc, const char **argv, const size_t *argvlen,
                       redlock__handshake_kind kind, const redlock__script *script)
{
    char *cmd;
    int len = redisFormatCommandArgv(&cmd, argc, argv, argvlen);
    if (len < 0)
        return REDLOCK_ENOMEM;
    int rc = redlock__buf_append(out, alloc, cmd, (size_t)len);
    redisFreeCommand(cmd);
    if (rc != 0)
        return rc;
    hs->steps[hs->n_steps++] = (redlock__handshake_step){kind, script};
    return 0;
}

int redlock__handshake_auth_argv(const redlock_url *u, const char *argv[3], size_t argvlen[3])
{
    if (u->password == NULL)
        return 0;
    int argc = 0;
    argv[argc] = "AUTH", argvlen[argc++] = 4;
    if (u->user != NULL)
        argv[argc] = u->user, argvlen[argc] = strlen(u->user), argc++;
    argv[argc] = u->password, argvlen[argc] = strlen(u->password), argc++;
    return argc;
}

int redlock__handshake_start(redlock__handshake *hs, const redlock_url *u, redlock__buf *out,
                             const redlock__alloc *alloc)
{
    const char *argv[3];
    size_t argvlen[3];
    int rc = 0;
    redlock__handshake_reset(hs);
    int argc = redlock__handshake_auth_argv(u, argv, argvlen);
    if (argc > 0)
        rc = append_step(hs, out, alloc, argc, argv, argvlen, REDLOCK__HANDSHAKE_STATUS, NULL);
    if (rc == 0 && u->db > 0) {
        char db[16];
        int len = snprintf(db, sizeof(db), "%d", u->db);
        argv[0] = "SELECT", argvlen[0] = 6;
        argv[1] = db, argvlen[1] = (size_t)len;
        rc = append_step(hs, out, alloc, 2, argv, argvlen, REDLOCK__HANDSHAKE_STATUS, NULL);
    }
    /* Every script, the fenced ones, those of a set and a waiter's too: a client that takes
     * such a lock on a connection made before finds them cached (one round trip per script saved
     * on its first use). */
    for (size_t i = 0; rc == 0 && i < REDLOCK__SCRIPTS; i++) {
        argv[0] = "SCRIPT", argvlen[0] = 6;
        argv[1] = "LOAD", argvlen[1] = 4;
        argv[2] = redlock__scripts[i]->source, argvlen[2] = redlock__scripts[i]->source_len;
        rc = append_step(hs, out, alloc, 3, argv, argvlen, REDLOCK__HANDSHAKE_SCRIPT,
                         redlock__scripts[i]);
    }
    if (rc == 0) {
        argv[0] = "INFO", argvlen[0] = 4;
        argv[1] = "server", argvlen[1] = 6;
        rc = append_step(hs, out, alloc, 2, argv, argvlen, REDLOCK__HANDSHAKE_INFO, NULL);
    }
    /* A second INFO, not "INFO server replication": Redis 6 takes one section only. */
    if (rc == 0) {
        argv[0] = "INFO", argvlen[0] = 4;
        argv[1] = "replication", argvlen[1] = 11;
        rc = append_step(hs, out, alloc, 2, argv, argvlen, REDLOCK__HANDSHAKE_ROLE, NULL);
    }
    return rc;
}

void redlock__handshake_reset(redlock__handshake *hs)
{
    hs->n_steps = 0;
    hs->answered = 0;
    hs->run_id[0] = '\0';
    hs->replica_of[0] = '\0';
    hs->script_refused = hs->info_refused = false;
    hs->refused[0] = '\0';
}

static bool is_run_id(const char *s)
{
    for (size_t i = 0; i < REDLOCK__RUN_ID_LEN; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

void redlock__handshake_run_id(const char *info, size_t len, char *out)
{
    static const char key[] = "run_id:";
    const size_t key_len = sizeof(key) - 1;
    for (size_t i = 0; i + key_len + REDLOCK__RUN_ID_LEN <= len; i++) {
        if ((i == 0 || info[i - 1] == '\n') && memcmp(info + i, key, key_len) == 0) {
            const char *id = info + i + key_len;
            if (!is_run_id(id))
                return;
            memcpy(out, id, REDLOCK__RUN_ID_LEN);
            out[REDLOCK__RUN_ID_LEN] = '\0';
            return;
        }
    }
}

/* The value of the "<key>:" line of an INFO reply (up to its line's end), or NULL. */
static const char *info_field(const char *info, size_t len, const char *key, size_t *value_len)
{
    size_t key_len = strlen(key);
    for (size_t i = 0; i + key_len < len; i++) {
        if ((i == 0 || info[i - 1] == '\n') && memcmp(info + i, key, key_len) == 0 &&
            info[i + key_len] == ':') {
            const char *v = info + i + key_len + 1;
            const char *end = memchr(v, '\r', len - (size_t)(v - info));
            const char *nl = memchr(v, '\n', len - (size_t)(v - info));
            if (end == NULL || (nl != NULL && nl < end))
                end = nl != NULL ? nl : info + len;
            *value_len = (size_t)(end - v);
            return v;
        }
    }
    return NULL;
}

/* Append the printable bytes of v (n bytes) to out (at *at, room for size), or "?" if none. */
static void put_printable(char *out, size_t size, size_t *at, const char *v, size_t n)
{
    size_t start = *at;
    for (size_t i = 0; v != NULL && i < n && *at + 1 < size; i++)
        if (v[i] > ' ' && v[i] < 0x7f)
            out[(*at)++] = v[i];
    if (*at == start && *at + 1 < size)
        out[(*at)++] = '?';
    out[*at] = '\0';
}

/* role:slave in an INFO replication reply: the replica's master into hs->replica_of. A reply
 * without a role line says nothing (an old or odd server): the node is taken for a master. */
static void take_role(redlock__handshake *hs, const char *info, size_t len)
{
    size_t n = 0;
    const char *role = info_field(info, len, "role", &n);
    if (role == NULL || n != 5 || memcmp(role, "slave", 5) != 0)
        return;
    size_t at = 0, host_len = 0, port_len = 0;
    const char *host = info_field(info, len, "master_host", &host_len);
    const char *port = info_field(info, len, "master_port", &port_len);
    put_printable(hs->replica_of, sizeof(hs->replica_of), &at, host, host_len);
    put_printable(hs->replica_of, sizeof(hs->replica_of), &at, ":", 1);
    put_printable(hs->replica_of, sizeof(hs->replica_of), &at, port, port_len);
}

/* Is r what a server answers to step when it succeeds? */
static bool step_succeeded(redlock__handshake *hs, const redlock__handshake_step *step,
                           const redisReply *r)
{
    switch (step->kind) {
    case REDLOCK__HANDSHAKE_STATUS:
        return r->type == REDIS_REPLY_STATUS && r->len == 2 && memcmp(r->str, "OK", 2) == 0;
    case REDLOCK__HANDSHAKE_SCRIPT:
        return r->type == REDIS_REPLY_STRING && r->len == 40 &&
               memcmp(r->str, step->script->sha1, 40) == 0;
    case REDLOCK__HANDSHAKE_INFO:
        if (r->type != REDIS_REPLY_STRING)
            return false;
        redlock__handshake_run_id(r->str, r->len, hs->run_id);
        return true;
    case REDLOCK__HANDSHAKE_ROLE:
        if (r->type != REDIS_REPLY_STRING)
            return false;
        take_role(hs, r->str, r->len);
        return true;
    }
    return false;
}

static const char *step_name(redlock__handshake_kind kind)
{
    switch (kind) {
    case REDLOCK__HANDSHAKE_STATUS:
        return "AUTH or SELECT";
    case REDLOCK__HANDSHAKE_SCRIPT:
        return "SCRIPT LOAD";
    case REDLOCK__HANDSHAKE_INFO:
        return "INFO";
    case REDLOCK__HANDSHAKE_ROLE:
        return "INFO replication";
    }
    return "?";
}

/* Whether text (len bytes) starts with the error code code. */
static bool has_code(const char *text, size_t len, const char *code)
{
    size_t n = strlen(code);
    return len >= n && memcmp(text, code, n) == 0 && (len == n || text[n] == ' ');
}

const char *redlock__handshake_auth_refusal(const char *text, size_t len)
{
    if (has_code(text, len, "NOAUTH"))
        return "the server wants a password (NOAUTH): give it in the URL, as "
               "redis://:password@host or redis://user:password@host";
    /* Redis 6 and later say WRONGPASS; older ones "ERR invalid password". */
    if (has_code(text, len, "WRONGPASS") ||
        (has_code(text, len, "ERR") && len == 20 && memcmp(text + 4, "invalid password", 16) == 0))
        return "authentication failed (WRONGPASS): the URL's user name or password is wrong, or "
               "the user is disabled";
    return NULL;
}

bool redlock__handshake_reply(redlock__handshake *hs, const redisReply *r, char *why,
                              size_t why_len)
{
    if (!redlock__handshake_pending(hs)) {
        redlock__fmt(why, why_len, "protocol error: a reply after the handshake's last");
        return false;
    }
    const redlock__handshake_step *step = &hs->steps[hs->answered++];
    if (r->type == REDIS_REPLY_ERROR) {
        /* A missing password is refused as NOAUTH at the first step after the AUTH the URL did
         * not ask for (SCRIPT LOAD): never an ACL's refusal to put up with. */
        const char *auth = redlock__handshake_auth_refusal(r->str, r->len);
        if (auth != NULL) {
            redlock__fmt(why, why_len, "%s", auth);
            return false;
        }
        if (step->kind != REDLOCK__HANDSHAKE_STATUS) {
            /* SCRIPT or INFO refused (an ACL): go on without, but keep the reason in case the
             * connection goes next (a server at its maxclients says so, then closes). */
            if (hs->refused[0] == '\0')
                redlock__fmt(hs->refused, sizeof(hs->refused), "%.*s", (int)r->len, r->str);
            if (step->kind == REDLOCK__HANDSHAKE_SCRIPT)
                hs->script_refused = true;
            else
                hs->info_refused = true;
            return true;
        }
        redlock__fmt(why, why_len, "handshake: %.*s", (int)r->len, r->str);
        return false;
    }
    if (step_succeeded(hs, step, r))
        return true;
    redlock__fmt(why, why_len, "protocol error: unexpected reply to %s in the handshake",
                 step_name(step->kind));
    return false;
}

const char *redlock__handshake_why(const redlock__handshake *hs, const char *why, char *buf,
                                   size_t buf_len)
{
    if (!redlock__handshake_pending(hs) || hs->refused[0] == '\0')
        return why;
    redlock__fmt(buf, buf_len, "%s, after answering the handshake: %s", why, hs->refused);
    return buf;
}
