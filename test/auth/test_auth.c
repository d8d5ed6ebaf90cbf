/* SPDX-License-Identifier: MIT */
/* test_auth.c - nodes that require a password: requirepass and an ACL user.
 *
 * The lock works with the right credentials in the URL; with wrong or missing ones every node
 * fails with an error that names the node (its redacted URL) and says why (WRONGPASS/NOAUTH),
 * and the operation ends in REDLOCK_ENOQUORUM. No password ever appears in anything a user can
 * see: per-node errors, redlock_client_last_error, redlock_client_node_url, URL parse errors,
 * or the output of the redlock tool, not even when a server repeats it in an error. The
 * process's stderr goes to a log file from the start, so whatever the test, the harness or the
 * library print is captured; everything the test reads (results, errors, URLs, the tool's
 * output) is written there too, and the last test searches the log for every password used,
 * then copies it to the real stderr. */
#include "harness.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PASS "s3cret-P4ss"
#define ACL_PASS "L0ck-Pw"
#define ENC_PASS "p@ss:w/rd"           /* the ACL user "enc"'s password ... */
#define ENC_PASS_URL "p%40ss%3Aw%2Frd" /* ... as it is written in a URL */
#define WRONG_PASS "wr0ng-Pw"

static const char *const secrets[] = {PASS,         ACL_PASS,   ENC_PASS,
                                      ENC_PASS_URL, WRONG_PASS, "40ss%3A"};

static char log_path[256];
static int real_stderr = -1;
static const char *tool_path;

/* Write to the log (stderr is the log). */
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
}

static void log_result(const char *what, int status, const redlock_result *r)
{
    say("%s: %s, yes %u no %u error %u timeout %u", what, redlock_err_name(status), r->votes_yes,
        r->votes_no, r->votes_error, r->votes_timeout);
    for (unsigned i = 0; i < r->n_nodes; i++)
        say("  node %u url=%s vote=%s error=%s", i, r->nodes[i].url,
            redlock_vote_name(r->nodes[i].vote),
            r->nodes[i].error != NULL ? r->nodes[i].error : "(none)");
}

static bool contains_secret(const char *text)
{
    for (size_t i = 0; i < sizeof(secrets) / sizeof(secrets[0]); i++) {
        if (strstr(text, secrets[i]) != NULL)
            return true;
    }
    return false;
}

/* ---- one acquire, inspected in the callback ----------------------------------------------- */

typedef struct seen {
    int calls;
    int status;
    redlock_lock *lock;
    unsigned n_nodes, votes_yes, votes_error;
    bool url_ok;     /* every node's url is the client's redacted URL, without a password */
    bool errors_ok;  /* every error is free of passwords */
    bool auth_named; /* every node that failed says WRONGPASS / NOAUTH / auth */
    bool all_failed_have_error;
} seen;

/* What every failed node's error must say (refused sets it), else any mention of auth. */
static const char *want_said;

static bool names_auth(const char *e)
{
    if (want_said != NULL)
        return strstr(e, want_said) != NULL;
    return strstr(e, "WRONGPASS") != NULL || strstr(e, "NOAUTH") != NULL ||
           strstr(e, "AUTH") != NULL || strstr(e, "auth") != NULL;
}

static void on_op(redlock_lock *lock, int status, const redlock_result *r, void *data)
{
    seen *s = data;
    s->calls++;
    s->status = status;
    s->lock = lock;
    s->n_nodes = r->n_nodes;
    s->votes_yes = r->votes_yes;
    s->votes_error = r->votes_error;
    s->url_ok = s->errors_ok = s->auth_named = s->all_failed_have_error = true;
    log_result("operation", status, r);
    redlock_client *c = lock != NULL ? redlock_lock_client(lock) : NULL;
    for (unsigned i = 0; i < r->n_nodes; i++) {
        const redlock_node_result *n = &r->nodes[i];
        if (n->url == NULL || contains_secret(n->url) ||
            (c != NULL && strcmp(n->url, redlock_client_node_url(c, i)) != 0))
            s->url_ok = false;
        if (n->error != NULL && contains_secret(n->error))
            s->errors_ok = false;
        if (n->vote == REDLOCK_VOTE_ERROR) {
            if (n->error == NULL || n->error[0] == '\0')
                s->all_failed_have_error = false;
            else if (!names_auth(n->error))
                s->auth_named = false;
        }
    }
}

static int run_acquire(h_env *env, redlock_client *c, const char *resource, seen *s)
{
    memset(s, 0, sizeof(*s));
    assert_int_equal(redlock_acquire(c, resource, strlen(resource), 5000, NULL, on_op, s), 0);
    assert_true(h_run_until(&env->loop, &s->calls, 1, 20000));
    return s->status;
}

static int run_release(h_env *env, redlock_lock *lock, seen *s)
{
    memset(s, 0, sizeof(*s));
    assert_int_equal(redlock_release(lock, on_op, s), 0);
    assert_true(h_run_until(&env->loop, &s->calls, 1, 20000));
    return s->status;
}

/* ---- servers and clients ------------------------------------------------------------------ */

/* A reply from server i, after AUTH as user (NULL: default user) with password. */
static redisReply *authed(h_env *env, unsigned i, const char *user, const char *password,
                          const char *cmd, const char *arg)
{
    redisContext *ctx = fixture_connect(&env->cluster, i);
    assert_non_null(ctx);
    assert_int_equal(ctx->err, 0);
    redisReply *r = user != NULL ? redisCommand(ctx, "AUTH %s %s", user, password)
                                 : redisCommand(ctx, "AUTH %s", password);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    r = arg != NULL ? redisCommand(ctx, "%s %s", cmd, arg) : redisCommand(ctx, "%s", cmd);
    redisFree(ctx);
    assert_non_null(r);
    return r;
}

static long long dbsize_all(h_env *env, const char *user, const char *password)
{
    long long total = 0;
    for (unsigned i = 0; i < env->cluster.n; i++) {
        redisReply *r = authed(env, i, user, password, "DBSIZE", NULL);
        assert_int_equal(r->type, REDIS_REPLY_INTEGER);
        total += r->integer;
        freeReplyObject(r);
    }
    return total;
}

static unsigned holding(h_env *env, const char *user, const char *password, const char *key,
                        const char *token)
{
    unsigned n = 0;
    for (unsigned i = 0; i < env->cluster.n; i++) {
        redisReply *r = authed(env, i, user, password, "GET", key);
        n += r->type == REDIS_REPLY_STRING && strcmp(r->str, token) == 0;
        freeReplyObject(r);
    }
    return n;
}

/* URLs "redis://<userinfo>@127.0.0.1:PORT" (userinfo NULL: none) for every server. */
typedef struct urlset {
    char text[FIXTURE_MAX_SERVERS][512];
    const char *ptrs[FIXTURE_MAX_SERVERS];
} urlset;

static const char *const *make_urls(urlset *u, h_env *env, const char *userinfo, bool unix_socket)
{
    for (unsigned i = 0; i < env->cluster.n; i++) {
        if (unix_socket)
            snprintf(u->text[i], sizeof(u->text[i]), "unix://%s@%s", userinfo,
                     env->cluster.servers[i].unix_path);
        else if (userinfo != NULL)
            snprintf(u->text[i], sizeof(u->text[i]), "redis://%s@127.0.0.1:%d", userinfo,
                     env->cluster.servers[i].port);
        else
            snprintf(u->text[i], sizeof(u->text[i]), "redis://127.0.0.1:%d",
                     env->cluster.servers[i].port);
        u->ptrs[i] = u->text[i];
    }
    return u->ptrs;
}

static redlock_client *client_for(h_env *env, const char *userinfo, bool unix_socket)
{
    urlset u;
    redlock_options o;
    h_test_options(&o);
    redlock_client *c = NULL;
    char err[256];
    int rc = h_client_urls(env, make_urls(&u, env, userinfo, unix_socket), env->cluster.n, &o, &c,
                           err, sizeof(err));
    if (rc != 0)
        say("client_new: %s: %s", redlock_err_name(rc), err);
    assert_int_equal(rc, 0);
    for (unsigned i = 0; i < redlock_client_node_count(c); i++) {
        const char *url = redlock_client_node_url(c, i);
        say("client node %u: %s", i, url);
        assert_false(contains_secret(url));
        if (userinfo != NULL && strchr(userinfo, ':') != NULL)
            assert_non_null(strstr(url, "***"));
    }
    return c;
}

/* Take, check on the servers, release: the keys are gone. */
static void lock_cycle(h_env *env, redlock_client *c, const char *user, const char *password)
{
    seen s, rel;
    assert_int_equal(run_acquire(env, c, "auth:res", &s), 0);
    assert_true(s.url_ok);
    assert_true(s.errors_ok);
    const char *token = redlock_lock_token(s.lock, NULL);
    /* Won at the quorum: a node that connected last may take its SET a moment later. */
    uint64_t deadline = redlock_now_us() + H_WAIT_MS * 1000;
    while (holding(env, user, password, "auth:res", token) != env->cluster.n &&
           redlock_now_us() < deadline)
        h_run_for(&env->loop, 10);
    assert_int_equal(holding(env, user, password, "auth:res", token), env->cluster.n);
    assert_int_equal(run_release(env, s.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, env->cluster.n);
    redlock_lock_free(s.lock);
    assert_int_equal(dbsize_all(env, user, password), 0);
}

/* Every node refuses the credentials: no quorum, each node's error says why (says, in it). */
static void refused(h_env *env, redlock_client *c, const char *says)
{
    seen s;
    want_said = says;
    assert_int_equal(run_acquire(env, c, "auth:res", &s), REDLOCK_ENOQUORUM);
    want_said = NULL;
    /* Decided as soon as too many failed: the rest may not have answered (vote NONE). */
    assert_int_equal(s.votes_yes, 0);
    assert_true(s.votes_error >= env->cluster.n - (env->cluster.n / 2 + 1) + 1);
    assert_true(s.url_ok);
    assert_true(s.errors_ok);
    assert_true(s.all_failed_have_error);
    assert_true(s.auth_named);
    /* A refused call on the same client: its message carries no password either. */
    assert_int_equal(redlock_acquire(c, "x", 1, UINT64_MAX, NULL, on_op, &s), REDLOCK_EINVAL);
    say("last_error: %s", redlock_client_last_error(c));
    assert_false(contains_secret(redlock_client_last_error(c)));
}

#define REQUIREPASS_CONF "requirepass " PASS "\n"
#define ACL_CONF                                                                                   \
    "user locker on >" ACL_PASS " ~* +@all\n"                                                      \
    "user enc on >" ENC_PASS " ~* +@all\n"                                                         \
    "user default off\n"

/* ---- tests ---------------------------------------------------------------------------------- */

static void requirepass_right_password(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, REQUIREPASS_CONF);
    redlock_client *c = client_for(&env, ":" PASS, false);
    lock_cycle(&env, c, NULL, PASS);
    h_close_client(&env, c);
    c = client_for(&env, "default:" PASS, false); /* the same, with the user spelled out */
    lock_cycle(&env, c, NULL, PASS);
    h_close_client(&env, c);
    c = client_for(&env, ":" PASS, true); /* over the unix socket */
    lock_cycle(&env, c, NULL, PASS);
    h_env_stop(&env);
}

static void requirepass_wrong_or_missing(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, REQUIREPASS_CONF);
    redlock_client *c = client_for(&env, ":" WRONG_PASS, false);
    refused(&env, c, "authentication failed (WRONGPASS): the URL's user name or password is wrong");
    h_close_client(&env, c);
    c = client_for(&env, NULL, false); /* no password at all: NOAUTH */
    refused(&env, c, "the server wants a password (NOAUTH): give it in the URL");
    h_close_client(&env, c);
    assert_int_equal(dbsize_all(&env, NULL, PASS), 0);
    h_env_stop(&env);
}

/* What a client's log said about a missing password. */
typedef struct auth_log {
    bool clean;         /* no password in it */
    bool says_password; /* "the server wants a password" */
    bool blames_acl;    /* a refusal read as missing ACL rights ("allow +script|load") */
} auth_log;

static void on_auth_log(redlock_client *client, redlock_log_level level, const char *url,
                        const char *message, void *data)
{
    (void)client;
    auth_log *seen_log = data;
    say("log %s %s: %s", redlock_log_level_name(level), url != NULL ? url : "-", message);
    seen_log->clean = seen_log->clean && !contains_secret(message);
    seen_log->says_password |= strstr(message, "the server wants a password (NOAUTH)") != NULL;
    seen_log->blames_acl |= strstr(message, "allow +") != NULL;
}

/* A URL without the password the servers want: the node's error, its info and the log say that
 * a password is missing, never that an ACL refused SCRIPT LOAD or INFO; nothing is written. */
static void missing_password_is_named(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, REQUIREPASS_CONF);
    urlset u;
    redlock_options o;
    h_test_options(&o);
    auth_log seen_log = {.clean = true};
    o.log_fn = on_auth_log;
    o.log_data = &seen_log;
    redlock_client *c = NULL;
    assert_int_equal(
        h_client_urls(&env, make_urls(&u, &env, NULL, false), env.cluster.n, &o, &c, NULL, 0), 0);
    refused(&env, c, "the server wants a password (NOAUTH): give it in the URL");
    seen s; /* the nodes are down now: their errors say why at once */
    want_said = "node down: the server wants a password (NOAUTH)";
    assert_int_equal(run_acquire(&env, c, "auth:res", &s), REDLOCK_ENOQUORUM);
    want_said = NULL;
    assert_true(s.auth_named);
    for (unsigned i = 0; i < redlock_client_node_count(c); i++) {
        redlock_node_info info;
        redlock_node_info_init(&info);
        assert_int_equal(redlock_client_node_info(c, i, &info), 0);
        if (info.last_error[0] != '\0') /* the node that the round did not wait for */
            assert_non_null(strstr(info.last_error, "wants a password (NOAUTH)"));
    }
    assert_true(seen_log.says_password);
    assert_false(seen_log.blames_acl);
    assert_true(seen_log.clean);
    h_close_client(&env, c);
    assert_int_equal(dbsize_all(&env, NULL, PASS), 0);
    h_env_stop(&env);
}

static void acl_user(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, ACL_CONF);
    redlock_client *c = client_for(&env, "locker:" ACL_PASS, false);
    lock_cycle(&env, c, "locker", ACL_PASS);
    h_close_client(&env, c);
    c = client_for(&env, "enc:" ENC_PASS_URL, false); /* percent-encoded password */
    lock_cycle(&env, c, "enc", ENC_PASS);
    h_close_client(&env, c);
    c = client_for(&env, "locker:" WRONG_PASS, false);
    refused(&env, c, "authentication failed (WRONGPASS)");
    h_close_client(&env, c);
    c = client_for(&env, ":" ACL_PASS, false); /* the default user is off */
    refused(&env, c, "or the user is disabled");
    h_close_client(&env, c);
    assert_int_equal(dbsize_all(&env, "locker", ACL_PASS), 0);
    h_env_stop(&env);
}

static void parse_errors_redacted(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "redis://:" PASS "@127.0.0.1:99999",
        "redis://:" PASS "@bad host:6379",
        "redis://locker:" ACL_PASS "@[::1:6379",
        "redis://:" PASS "@127.0.0.1:6379/notadb",
        "redis://:" PASS "@127.0.0.1:6379?timeout_ms=x",
        "redis://:" PASS "@",
        "redis://:" PASS "@@host",
        "unix://:" PASS "@relative/path",
        "http://:" PASS "@127.0.0.1",
        "redis://enc:" ENC_PASS_URL "@-host-",
        "redis://:" WRONG_PASS "%zz@127.0.0.1",
    };
    h_env env;
    h_env_start(&env, 1, NULL);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        redlock_url u;
        char err[256] = "";
        int rc = redlock_url_parse(&u, bad[i], err, sizeof(err));
        redlock_url_free(&u);
        char red[512];
        redlock_url_redact(bad[i], red, sizeof(red));
        say("parse %s: %s: %s", red, redlock_err_name(rc), err);
        assert_int_equal(rc, REDLOCK_EURL);
        assert_true(err[0] != '\0');
        assert_false(contains_secret(err));
        assert_false(contains_secret(red));
        /* The same through the constructor (node 1 is the bad one). */
        const char *urls[2] = {env.cluster.urls[0], bad[i]};
        redlock_client *c = NULL;
        char cerr[256] = "";
        rc = h_client_urls(&env, urls, 2, NULL, &c, cerr, sizeof(cerr));
        say("client_new: %s: %s", redlock_err_name(rc), cerr);
        assert_int_equal(rc, REDLOCK_EURL);
        assert_false(contains_secret(cerr));
    }
    /* A duplicate node's message names the endpoint, never the credentials. */
    char a[128], b[128];
    snprintf(a, sizeof(a), "redis://:%s@127.0.0.1:%d", PASS, env.cluster.servers[0].port);
    snprintf(b, sizeof(b), "redis://locker:%s@127.0.0.1:%d/2", ACL_PASS,
             env.cluster.servers[0].port);
    const char *urls[2] = {a, b};
    redlock_client *c = NULL;
    char cerr[256] = "";
    assert_int_equal(h_client_urls(&env, urls, 2, NULL, &c, cerr, sizeof(cerr)), REDLOCK_EDUPNODE);
    say("client_new dup: %s", cerr);
    assert_false(contains_secret(cerr));
    h_env_stop(&env);
}

/* ---- the redlock tool --------------------------------------------------------------------- */

/* Run the tool with args (NULL-terminated); its stdout and stderr together into out. Returns
 * its exit status. */
static int run_tool(const char *const *args, char *out, size_t out_len)
{
    char path[300];
    snprintf(path, sizeof(path), "%s.tool", log_path);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0)
            _exit(111);
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
        const char *argv[16];
        size_t n = 0;
        argv[n++] = tool_path;
        while (args[n - 1] != NULL && n < 15) {
            argv[n] = args[n - 1];
            n++;
        }
        argv[n] = NULL;
        unsetenv("REDLOCK_NODES");
        execv(tool_path, (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(out, 1, out_len - 1, f);
    out[n] = '\0';
    fclose(f);
    unlink(path);
    /* args[4]: the command, after "-T", TOOL_T, "-n", nodes (never print nodes: passwords). */
    say("tool %s -> status %d:\n%s", args[4], WIFEXITED(st) ? WEXITSTATUS(st) : -1, out);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The tool's node timeout in seconds too (its default is 500 ms). */
#define TOOL_T "5s"
#define ARGS_ACQ(nodes)                                                                            \
    ((const char *const[]){"-T", TOOL_T, "-n", (nodes), "acquire", "auth:tool", NULL})

static void nodes_arg(h_env *env, const char *userinfo, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (unsigned i = 0; i < env->cluster.n; i++)
        used += (size_t)snprintf(out + used, len - used, "%sredis://%s@127.0.0.1:%d",
                                 i > 0 ? "," : "", userinfo, env->cluster.servers[i].port);
}

static void tool_with_password(void **state)
{
    (void)state;
    if (tool_path == NULL || access(tool_path, X_OK) != 0)
        h_skip("no redlock tool (REDLOCK_TOOL unset)");
    h_env env;
    h_env_start(&env, 3, REQUIREPASS_CONF);
    char nodes[1024], out[8192];
    nodes_arg(&env, ":" PASS, nodes, sizeof(nodes));

    assert_int_equal(run_tool(ARGS_ACQ(nodes), out, sizeof(out)), 0);
    assert_false(contains_secret(out));
    char *tok = strstr(out, "\"token\":\"");
    assert_non_null(tok);
    char token[128];
    tok += strlen("\"token\":\"");
    size_t tlen = strcspn(tok, "\"");
    assert_true(tlen > 0 && tlen < sizeof(token));
    memcpy(token, tok, tlen);
    token[tlen] = '\0';
    assert_int_equal(holding(&env, NULL, PASS, "auth:tool", token), 3);

    assert_int_equal(
        run_tool((const char *const[]){"-T", TOOL_T, "-n", nodes, "status", "auth:tool", NULL}, out,
                 sizeof(out)),
        0);
    assert_false(contains_secret(out));
    assert_non_null(strstr(out, token));

    assert_int_equal(run_tool((const char *const[]){"-T", TOOL_T, "-n", nodes, "release",
                                                    "auth:tool", token, NULL},
                              out, sizeof(out)),
                     0);
    assert_false(contains_secret(out));
    assert_int_equal(dbsize_all(&env, NULL, PASS), 0);

    /* Wrong password: no quorum (69), output names the failure, never the password. */
    nodes_arg(&env, ":" WRONG_PASS, nodes, sizeof(nodes));
    assert_int_equal(run_tool(ARGS_ACQ(nodes), out, sizeof(out)), 69);
    assert_false(contains_secret(out));
    assert_true(strstr(out, "WRONGPASS") != NULL || strstr(out, "NOAUTH") != NULL);

    /* A URL that does not parse: usage error (64), still redacted. */
    snprintf(nodes, sizeof(nodes), "redis://:%s@127.0.0.1:99999", PASS);
    assert_int_equal(run_tool(ARGS_ACQ(nodes), out, sizeof(out)), 64);
    assert_false(contains_secret(out));
    assert_int_equal(dbsize_all(&env, NULL, PASS), 0);
    h_env_stop(&env);
}

/* Every log line of a client, to the log (which the last test searches) and checked here. */
static void on_log(redlock_client *client, redlock_log_level level, const char *url,
                   const char *message, void *data)
{
    (void)client;
    bool *clean = data;
    say("log %s %s: %s", redlock_log_level_name(level), url != NULL ? url : "-", message);
    if (contains_secret(message) || (url != NULL && contains_secret(url)))
        *clean = false;
}

/* A server that repeats a command's arguments in its error, AUTH's included (here AUTH renamed
 * away: "unknown command 'AUTH', with args beginning with: 'app' '<password>'"): the node fails,
 * and the password is in none of its error, its node info, the client's log, the tool's output
 * (acquire and check). */
static void server_repeating_the_password(void **state)
{
    (void)state;
    h_env env;
    h_env_start(&env, 3, "rename-command AUTH \"\"\n");
    urlset u;
    redlock_options o;
    h_test_options(&o);
    bool clean = true;
    o.log_fn = on_log;
    o.log_data = &clean;
    redlock_client *c = NULL;
    assert_int_equal(h_client_urls(&env, make_urls(&u, &env, "app:" PASS, false), env.cluster.n, &o,
                                   &c, NULL, 0),
                     0);
    seen s;
    assert_int_equal(run_acquire(&env, c, "auth:echo", &s), REDLOCK_ENOQUORUM);
    assert_true(s.errors_ok);
    assert_true(s.all_failed_have_error);
    /* The round was decided at its second error: the third node's comes a moment later. */
    unsigned scrubbed = 0;
    uint64_t deadline = redlock_now_us() + H_WAIT_MS * 1000;
    for (unsigned i = 0; i < redlock_client_node_count(c); i++) {
        redlock_node_info info;
        redlock_node_info_init(&info);
        while (redlock_client_node_info(c, i, &info) == 0 && info.connect_failures == 0 &&
               redlock_now_us() < deadline)
            h_run_for(&env.loop, 10);
    }
    for (unsigned i = 0; i < redlock_client_node_count(c); i++) {
        redlock_node_info info;
        redlock_node_info_init(&info);
        assert_int_equal(redlock_client_node_info(c, i, &info), 0);
        say("node %u last_error: %s", i, info.last_error);
        assert_false(contains_secret(info.last_error));
        /* The server did repeat it: the error shows where it was hidden. */
        scrubbed += strstr(info.last_error, "unknown command") != NULL &&
                    strstr(info.last_error, "'***'") != NULL;
    }
    assert_int_equal(scrubbed, env.cluster.n);
    assert_true(clean);

    if (tool_path != NULL && access(tool_path, X_OK) == 0) {
        char nodes[1024], out[16384];
        nodes_arg(&env, "app:" PASS, nodes, sizeof(nodes));
        assert_int_equal(run_tool(ARGS_ACQ(nodes), out, sizeof(out)), 69);
        assert_false(contains_secret(out));
        assert_non_null(strstr(out, "'***'"));
        assert_int_equal(run_tool((const char *const[]){"-T", TOOL_T, "-n", nodes, "check", NULL},
                                  out, sizeof(out)),
                         69);
        assert_false(contains_secret(out));
        assert_non_null(strstr(out, "'***'"));
    }
    h_env_stop(&env);
}

/* Last: nothing the whole program printed on stderr (the log) holds a password. */
static void log_has_no_password(void **state)
{
    (void)state;
    fflush(stderr);
    FILE *f = fopen(log_path, "r");
    assert_non_null(f);
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    text[n] = '\0';
    fclose(f);
    if (real_stderr >= 0) { /* show the log where a test log would be */
        ssize_t w = write(real_stderr, text, n);
        (void)w;
    }
    assert_true(n > 1000); /* the earlier tests did write it */
    for (size_t i = 0; i < sizeof(secrets) / sizeof(secrets[0]); i++) {
        if (strstr(text, secrets[i]) != NULL)
            fprintf(stdout, "# password \"%s\" found in the log\n", secrets[i]);
    }
    assert_false(contains_secret(text));
    unlink(log_path);
}

int main(void)
{
    h_test_main_init();
    tool_path = getenv("REDLOCK_TOOL");
    /* From here on everything printed on stderr, by anyone in this process, goes to the log. */
    snprintf(log_path, sizeof(log_path), "%s/redlock-auth-%ld.log",
             getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp", (long)getpid());
    int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        perror(log_path);
        return 1;
    }
    real_stderr = dup(2);
    dup2(fd, 2);
    close(fd);
    const struct CMUnitTest tests[] = {
        H_TEST(requirepass_right_password),    H_TEST(requirepass_wrong_or_missing),
        H_TEST(missing_password_is_named),     H_TEST(acl_user),
        H_TEST(parse_errors_redacted),         H_TEST(tool_with_password),
        H_TEST(server_repeating_the_password), H_TEST(log_has_no_password),
    };
    return cmocka_run_group_tests_name("auth", tests, NULL, NULL);
}
