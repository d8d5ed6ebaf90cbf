/* SPDX-License-Identifier: MIT */
/* test_cli_signals.c - the tool's safety around waits, signals and secrets, against real
 * redis-server processes and real child processes: every --wait attempt has a token of its own
 * (seen on a server with MONITOR), every catchable signal reaches COMMAND, a tool interrupted
 * while waiting cleans up and dies of the signal (so a shell loop stops on Ctrl-C), COMMAND does
 * not see $REDLOCK_NODES, and --nodes-file keeps URLs out of argv. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "cli_harness.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

/* A signal ends a wait well before the 30 s the tests wait for the lock: half of that, however
 * slow the machine. */
#define SIGNAL_BOUND_MS 15000

/* A shell loop that waits until the file $1 exists (at most 30 s). */
#define UNTIL_MARKER "i=0; while [ ! -e \"$1\" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done"

static void touch_marker(const char *path)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
}

static void reset_stats(fixture_cluster *c, unsigned i)
{
    redisReply *r = fixture_command(c, i, "CONFIG RESETSTAT");
    assert_non_null(r);
    freeReplyObject(r);
}

/* Wait (bounded) until server i has run a SET since reset_stats: the tool is then waiting for
 * the lock (its signal handlers are in place before it connects). */
static void wait_for_set(fixture_cluster *c, unsigned i)
{
    long long until = now_ms() + TOOL_TIMEOUT_MS;
    for (;;) {
        redisReply *r = fixture_command(c, i, "INFO commandstats");
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_STRING);
        bool seen = strstr(r->str, "cmdstat_set:") != NULL;
        freeReplyObject(r);
        if (seen)
            return;
        if (now_ms() >= until)
            fail_msg("no SET reached node %u within %d ms", i, TOOL_TIMEOUT_MS);
        sleep_ms(10);
    }
}

/* ---- MONITOR: the commands a server ran ---------------------------------------------------- */

#define MAX_ARGS 8
#define MAX_LINES 256

typedef struct monitored {
    unsigned n_args;
    char args[MAX_ARGS][128]; /* each cut at 127 bytes */
} monitored;

/* The quoted arguments of a MONITOR line ("+1700000000.123 [0 127.0.0.1:5] "SET" "k" ..."). */
static void parse_monitor_line(const char *line, monitored *m)
{
    memset(m, 0, sizeof(*m));
    const char *p = strchr(line, ']');
    if (p == NULL)
        return;
    while ((p = strchr(p, '"')) != NULL && m->n_args < MAX_ARGS) {
        p++;
        size_t o = 0;
        char *out = m->args[m->n_args];
        while (*p != '\0' && *p != '"') {
            if (*p == '\\' && p[1] != '\0')
                p++; /* an escaped byte: kept as its escape letter, enough to compare tokens */
            if (o < sizeof(m->args[0]) - 1)
                out[o++] = *p;
            p++;
        }
        out[o] = '\0';
        m->n_args++;
        if (*p == '"')
            p++;
    }
}

/* Start MONITOR on server i of c; the caller reads it with monitor_collect. */
static redisContext *monitor_start(fixture_cluster *c, unsigned i)
{
    redisContext *ctx = fixture_connect(c, i);
    assert_non_null(ctx);
    assert_int_equal(ctx->err, 0);
    redisReply *r = redisCommand(ctx, "MONITOR");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    return ctx;
}

/* Every command server i ran since monitor_start, up to an ECHO sent now on another connection:
 * MONITOR shows commands in the order the server ran them, so once the ECHO shows, everything
 * run before it was read. Returns the number of lines kept in lines[]. */
static unsigned monitor_collect(redisContext *ctx, fixture_cluster *c, unsigned i, monitored *lines)
{
    char mark[64];
    snprintf(mark, sizeof(mark), "monitor-end-%d", (int)getpid());
    redisReply *e = fixture_command(c, i, "ECHO %s", mark);
    assert_non_null(e);
    freeReplyObject(e);
    unsigned n = 0;
    for (;;) {
        void *reply = NULL;
        if (redisGetReply(ctx, &reply) != REDIS_OK)
            fail_msg("MONITOR connection failed: %s", ctx->errstr);
        redisReply *r = reply;
        assert_int_equal(r->type, REDIS_REPLY_STATUS);
        bool end = strstr(r->str, mark) != NULL;
        if (!end) {
            assert_true(n < MAX_LINES);
            parse_monitor_line(r->str, &lines[n++]);
        }
        freeReplyObject(r);
        if (end)
            return n;
    }
}

static bool is_cmd(const monitored *m, const char *name)
{
    return m->n_args > 0 && strcasecmp(m->args[0], name) == 0;
}

/* The old tool passed its own token together with --wait, so every attempt reused it, and a
 * delayed release of a lost attempt could delete the key of the attempt that won. Every attempt
 * must write a token of its own, and release with that same token. */
static void wait_uses_a_fresh_token_per_attempt(void **state)
{
    (void)state;
    const char *key = "cli:wait-tokens";
    char *holder = acquire_shared(key, "30s");
    redisContext *mon = monitor_start(&shared, 0);
    proc p;
    TOOL(&p, NULL, "-n", shared_nodes, "--wait", "2s", "acquire", key);
    expect_status(&p, 75);
    jv *v = json_line(&p);
    int64_t attempts = jint(v, "attempts");
    jv_free(v);
    proc_free(&p);
    /* The first attempt ends in milliseconds (every node answers "no"); the wait is 2 s. */
    assert_true(attempts >= 2);

    static monitored lines[MAX_LINES];
    unsigned n = monitor_collect(mon, &shared, 0, lines);
    redisFree(mon);
    char tokens[MAX_LINES][128];
    unsigned n_sets = 0;
    for (unsigned k = 0; k < n; k++) {
        const monitored *m = &lines[k];
        if (!is_cmd(m, "SET") || m->n_args < 3 || strcmp(m->args[1], key) != 0)
            continue;
        assert_true(is_hex_token(m->args[2]));
        assert_string_not_equal(m->args[2], holder);
        for (unsigned j = 0; j < n_sets; j++)
            if (strcmp(tokens[j], m->args[2]) == 0)
                fail_msg("attempts %u and %u both used token %s", j + 1, n_sets + 1, tokens[j]);
        snprintf(tokens[n_sets++], sizeof(tokens[0]), "%s", m->args[2]);
    }
    assert_int_equal(n_sets, attempts); /* one SET per attempt reached this node */
    /* Each lost attempt released its own token: the script's key and token arguments. */
    for (unsigned j = 0; j < n_sets; j++) {
        bool released = false;
        for (unsigned k = 0; k < n && !released; k++) {
            const monitored *m = &lines[k];
            released = (is_cmd(m, "EVALSHA") || is_cmd(m, "EVAL")) && m->n_args >= 5 &&
                       strcmp(m->args[3], key) == 0 && strcmp(m->args[4], tokens[j]) == 0;
        }
        if (!released)
            fail_msg("attempt %u's token %s was never released", j + 1, tokens[j]);
    }
    expect_key_everywhere(&shared, key, holder); /* the holder is untouched */
    for (unsigned i = 0; i < shared.n; i++)
        server_del(&shared, i, key);
    free(holder);
}

/* ---- signals while COMMAND runs ------------------------------------------------------------ */

static const struct {
    int signum;
    const char *name; /* as sh's trap names it */
} forwarded[] = {
    {SIGHUP, "HUP"},   {SIGINT, "INT"},   {SIGQUIT, "QUIT"},   {SIGTERM, "TERM"}, {SIGUSR1, "USR1"},
    {SIGUSR2, "USR2"}, {SIGALRM, "ALRM"}, {SIGWINCH, "WINCH"}, {SIGCONT, "CONT"},
};
#define N_FORWARDED (sizeof(forwarded) / sizeof(forwarded[0]))

static void run_forwards_every_signal(void **state)
{
    (void)state;
    char marker[512];
    marker_path(marker, sizeof(marker), "sig-marker");
    unlink(marker);
    char script[2048];
    size_t o = 0;
    for (size_t i = 0; i < N_FORWARDED; i++)
        o += (size_t)snprintf(script + o, sizeof(script) - o, "trap 'echo got-%s' %s; ",
                              forwarded[i].name, forwarded[i].name);
    snprintf(script + o, sizeof(script) - o, "echo ready; %s", UNTIL_MARKER);
    proc p;
    tool_start(
        &p, NULL,
        ARGS("-n", shared_nodes, "run", "cli:sig-all", "--", "sh", "-c", script, "sh", marker));
    assert_true(proc_wait_for_output(&p, "ready\n", false, TOOL_TIMEOUT_MS));
    for (size_t i = 0; i < N_FORWARDED; i++) {
        char got[32];
        snprintf(got, sizeof(got), "got-%s\n", forwarded[i].name);
        proc_signal(&p, forwarded[i].signum);
        if (!proc_wait_for_output(&p, got, false, TOOL_TIMEOUT_MS))
            fail_msg("COMMAND never got SIG%s; stdout:\n%s\nstderr:\n%s", forwarded[i].name, p.out,
                     p.err);
        proc_wait(&p, 1);
        assert_false(p.exited);
    }
    touch_marker(marker);
    tool_finish(&p, TOOL_TIMEOUT_MS);
    expect_status(&p, 0);
    assert_int_equal(p.term_signal, 0);
    proc_free(&p);
    expect_key_everywhere(&shared, "cli:sig-all", NULL);
    unlink(marker);
}

/* A COMMAND that does not handle a signal dies of it; the tool releases the lock, then dies of
 * the same signal (it forwarded it: the signal was meant for the whole job). The old tool died of
 * SIGUSR1 at once, leaving COMMAND to run on without the lock. */
static void run_dies_of_forwarded_signal_after_release(void **state)
{
    (void)state;
    static const int sigs[] = {SIGUSR1, SIGINT, SIGALRM};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        proc p;
        tool_start(&p, NULL, ARGS("-n", shared_nodes, "run", "cli:sig-die", "--", "sleep", "30"));
        assert_true(proc_wait_for_output(&p, "acquired", true, TOOL_TIMEOUT_MS));
        long long sent = now_ms();
        proc_signal(&p, sigs[i]);
        tool_finish(&p, TOOL_TIMEOUT_MS);
        assert_true(now_ms() - sent < SIGNAL_BOUND_MS);
        if (p.term_signal != sigs[i])
            fail_msg("signal %d: the tool ended with status %d (signal %d); stderr:\n%s", sigs[i],
                     p.status, p.term_signal, p.err);
        assert_non_null(strstr(p.err, "forwarding it to pid"));
        assert_non_null(strstr(p.err, "released cli:sig-die"));
        proc_free(&p);
        expect_key_everywhere(&shared, "cli:sig-die", NULL);
    }
}

/* ---- signals while waiting ----------------------------------------------------------------- */

/* Interrupted while waiting for the lock, the tool gives up, releases what its attempt may have
 * set, prints its result, and dies of the signal; the holder is untouched and COMMAND never
 * runs. Old tool: exit 130 for SIGINT (a shell loop went on), death without a word for SIGUSR1. */
static void interrupted_wait_dies_of_the_signal(void **state)
{
    (void)state;
    const char *key = "cli:sig-wait";
    char *holder = acquire_shared(key, "30s");
    char marker[512];
    marker_path(marker, sizeof(marker), "wait-marker");
    static const int sigs[] = {SIGINT, SIGUSR1, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        bool run = i % 2 == 0;
        reset_stats(&shared, 0);
        proc p;
        if (run)
            tool_start(
                &p, NULL,
                ARGS("-n", shared_nodes, "-w", "30s", "--json", "run", key, "--", "touch", marker));
        else
            tool_start(&p, NULL, ARGS("-n", shared_nodes, "-w", "30s", "acquire", key));
        wait_for_set(&shared, 0);
        long long sent = now_ms();
        proc_signal(&p, sigs[i]);
        tool_finish(&p, TOOL_TIMEOUT_MS);
        assert_true(now_ms() - sent < SIGNAL_BOUND_MS);
        if (p.term_signal != sigs[i])
            fail_msg("signal %d: the tool ended with status %d (signal %d); stderr:\n%s", sigs[i],
                     p.status, p.term_signal, p.err);
        char said[64];
        char buf[32];
        snprintf(said, sizeof(said), "got %s: giving up",
                 sigs[i] == SIGINT    ? "SIGINT"
                 : sigs[i] == SIGUSR1 ? "SIGUSR1"
                 : sigs[i] == SIGTERM ? "SIGTERM"
                 : sigs[i] == SIGHUP  ? "SIGHUP"
                                      : (snprintf(buf, sizeof(buf), "%d", sigs[i]), buf));
        assert_non_null(strstr(p.err, said));
        /* Its result is printed before it dies, whether an attempt was out or it was between
         * two. */
        jv *v = json_line(&p);
        assert_string_equal(jstr(v, "status"), "REDLOCK_ECANCELED");
        jv_free(v);
        proc_free(&p);
        assert_false(file_exists(marker));
        expect_key_everywhere(&shared, key, holder);
    }
    for (unsigned i = 0; i < shared.n; i++)
        server_del(&shared, i, key);
    free(holder);
}

/* flock(1)'s promise: `while ...; do flock ... ; done` stops on Ctrl-C. bash stops a loop on
 * SIGINT only when the command it waited for died of SIGINT (an exit status of 130 reads as "the
 * command handled it"), so the tool must die of it. The terminal's Ctrl-C signals the whole
 * foreground process group: here a group of its own, made by setsid(1). */
static void shell_loop_stops_on_ctrl_c(void **state)
{
    (void)state;
    if (access("/bin/bash", X_OK) != 0 || access("/usr/bin/setsid", X_OK) != 0) {
        printf("# SKIP needs /bin/bash and /usr/bin/setsid\n");
        return;
    }
    const char *key = "cli:sig-loop";
    char *holder = acquire_shared(key, "30s");
    reset_stats(&shared, 0);
    char nodes_arg[1100];
    snprintf(nodes_arg, sizeof(nodes_arg), "--nodes=%s", shared_nodes);
    proc p;
    const char *argv[] = {
        "setsid",
        "/bin/bash",
        "-c",
        "for i in 1 2 3; do \"$0\" \"$1\" -T 10s -w 30s acquire \"$2\" >/dev/null; "
        "echo \"next $?\"; done",
        tool_path,
        nodes_arg,
        key,
        NULL,
    };
    proc_start(&p, "/usr/bin/setsid", argv, ARGS("REDLOCK_NODES"));
    wait_for_set(&shared, 0);
    kill(-p.pid, SIGINT); /* the whole group, as a terminal does */
    bool ended = proc_wait(&p, TOOL_TIMEOUT_MS);
    kill(-p.pid, SIGKILL); /* whatever a failed check left of the group */
    if (!ended)
        fail_msg("the loop went on after Ctrl-C; stdout:\n%s\nstderr:\n%s", p.out, p.err);
    assert_int_equal(p.term_signal, SIGINT);
    assert_null(strstr(p.out, "next"));
    proc_free(&p);
    expect_key_everywhere(&shared, key, holder);
    for (unsigned i = 0; i < shared.n; i++)
        server_del(&shared, i, key);
    free(holder);
}

/* ---- secrets ------------------------------------------------------------------------------- */

static void command_does_not_see_redlock_nodes(void **state)
{
    (void)state;
    char env_nodes[1100];
    snprintf(env_nodes, sizeof(env_nodes), "REDLOCK_NODES=%s", shared_nodes);
    proc p;
    TOOL(&p, ARGS(env_nodes), "run", "cli:sig-env", "--", "sh", "-c",
         "echo \"nodes=${REDLOCK_NODES-unset} key=$REDLOCK_KEY\"");
    expect_status(&p, 0);
    assert_string_equal(p.out, "nodes=unset key=cli:sig-env\n");
    proc_free(&p);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void expect_no_secret(const proc *p, const char *secret)
{
    assert_null(strstr(p->out, secret));
    assert_null(strstr(p->err, secret));
}

/* --nodes-file reads URLs one per line (comments and blank lines skipped): passwords stay out of
 * argv (ps) and the environment. Errors name the file and the line, never the URL. */
static void nodes_file_keeps_urls_out_of_argv(void **state)
{
    (void)state;
    const char *secret = "s3cret-in-file";
    char conf[128];
    snprintf(conf, sizeof(conf), "requirepass %s\n", secret);
    assert_int_equal(fixture_start(&extra, 3, conf), 0);
    char path[512];
    marker_path(path, sizeof(path), "nodes-file");
    char text[2048];
    size_t o = (size_t)snprintf(text, sizeof(text), "# lock nodes\n\n");
    for (unsigned i = 0; i < extra.n; i++)
        o += (size_t)snprintf(text + o, sizeof(text) - o, "  redis://:%s@127.0.0.1:%d  \n", secret,
                              extra.servers[i].port);
    write_file(path, text);

    /* $REDLOCK_NODES is not read when a file is given (it names the shared cluster here). */
    char env_nodes[1100];
    snprintf(env_nodes, sizeof(env_nodes), "REDLOCK_NODES=%s", shared_nodes);
    proc p;
    assert_int_equal(chmod(path, 0600), 0);
    TOOL(&p, ARGS(env_nodes), "--nodes-file", path, "acquire", "cli:nodes-file");
    expect_status(&p, 0);
    expect_no_secret(&p, secret);
    assert_null(strstr(p.err, "warning"));
    jv *v = json_line(&p);
    char *token = strdup(jstr(v, "token"));
    jv_free(v);
    proc_free(&p);
    /* Others may read it: a warning (the file named, the password not), and the lock is taken as
     * before. Without a password in it the mode does not matter. */
    assert_int_equal(chmod(path, 0640), 0);
    TOOL(&p, NULL, "--nodes-file", path, "status", "cli:nodes-file");
    expect_status(&p, 0);
    expect_no_secret(&p, secret);
    assert_non_null(strstr(p.err, "redlock: warning: --nodes-file "));
    assert_non_null(strstr(p.err, "holds a password and others can access it (mode 0640)"));
    proc_free(&p);
    char plain[512];
    marker_path(plain, sizeof(plain), "nodes-file-plain");
    write_file(plain, shared_nodes);
    assert_int_equal(chmod(plain, 0644), 0);
    TOOL(&p, NULL, "--nodes-file", plain, "status", "cli:nodes-file");
    expect_status(&p, 0);
    assert_null(strstr(p.err, "warning"));
    proc_free(&p);
    unlink(plain);
    for (unsigned i = 0; i < extra.n; i++) {
        char *got = server_get_pw(&extra, i, secret, "cli:nodes-file", NULL);
        assert_non_null(got);
        assert_string_equal(got, token);
        free(got);
    }
    free(token);

    /* A bad line: the file and the line number, not the line. */
    snprintf(text, sizeof(text), "redis://:%s@127.0.0.1:%d\nredis://:%s@127.0.0.1:99999\n", secret,
             extra.servers[0].port, secret);
    write_file(path, text);
    TOOL(&p, NULL, "--nodes-file", path, "acquire", "cli:nodes-file");
    expect_status(&p, 64);
    expect_no_secret(&p, secret);
    assert_non_null(strstr(p.err, "--nodes-file"));
    assert_non_null(strstr(p.err, "line 2"));
    proc_free(&p);

    write_file(path, "# nothing but a comment\n\n");
    TOOL(&p, NULL, "--nodes-file", path, "acquire", "cli:nodes-file");
    expect_status(&p, 64);
    assert_non_null(strstr(p.err, "no node URL"));
    proc_free(&p);

    unlink(path);
    TOOL(&p, NULL, "--nodes-file", path, "acquire", "cli:nodes-file");
    expect_status(&p, 64);
    assert_non_null(strstr(p.err, "No such file"));
    proc_free(&p);
    fixture_stop(&extra);
}

int main(void)
{
    static const struct CMUnitTest tests[] = {
        cmocka_unit_test(wait_uses_a_fresh_token_per_attempt),
        cmocka_unit_test(run_forwards_every_signal),
        cmocka_unit_test(run_dies_of_forwarded_signal_after_release),
        cmocka_unit_test(interrupted_wait_dies_of_the_signal),
        cmocka_unit_test(shell_loop_stops_on_ctrl_c),
        cmocka_unit_test(command_does_not_see_redlock_nodes),
        cmocka_unit_test(nodes_file_keeps_urls_out_of_argv),
    };
    static const char *const temp_files[] = {"sig-marker", "wait-marker", "nodes-file",
                                             "nodes-file-plain", NULL};
    return cli_main("cli-signals", tests, sizeof(tests) / sizeof(tests[0]), temp_files);
}
