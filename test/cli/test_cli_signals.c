/* SPDX-License-Identifier: MIT */
/* test_cli_signals.c - the tool's safety around waits, signals and secrets, against real
 * redis-server processes and real child processes: every catchable signal reaches COMMAND, a tool
 * interrupted while waiting cleans up and dies of the signal (so a shell loop stops on Ctrl-C),
 * COMMAND does not see $REDLOCK_NODES, and --nodes-file keeps URLs out of argv. */
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
        /* A waiting acquire's attempts are the queue's script. */
        bool seen = strstr(r->str, "cmdstat_set:") != NULL ||
                    strstr(r->str, "cmdstat_evalsha:") != NULL ||
                    strstr(r->str, "cmdstat_eval:") != NULL;
        freeReplyObject(r);
        if (seen)
            return;
        if (now_ms() >= until)
            fail_msg("no attempt reached node %u within %d ms", i, TOOL_TIMEOUT_MS);
        sleep_ms(10);
    }
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

/* COMMAND has exited and the release waits for a node that is stopped: a SIGTERM then is not
 * ignored (the old tool exited 3, COMMAND's status, a node timeout later); the tool dies of it
 * once the release is done, which the node timeout bounds. */
static void signal_during_final_release_ends_the_tool(void **state)
{
    (void)state;
    const char *key = "cli:sig-release";
    assert_int_equal(fixture_start(&extra, 3, NULL), 0);
    char nodes[1024];
    node_list(&extra, NULL, nodes, sizeof(nodes));
    char marker[512];
    marker_path(marker, sizeof(marker), "sig-marker");
    unlink(marker);
    proc p;
    tool_start(&p, NULL,
               ARGS("-n", nodes, "-T", "5s", "run", key, "--", "sh", "-c",
                    "echo ready; " UNTIL_MARKER "; exit 3", "sh", marker));
    assert_true(proc_wait_for_output(&p, "ready", false, TOOL_TIMEOUT_MS));
    /* The tool hears every node after the acquire's late yes first (its probe, 5 ms after it): a
     * kept node stopped before that leaves the hold unproven (docs/safety.md). */
    usleep(300 * 1000);
    assert_int_equal(fixture_pause(&extra, 0), 0);
    touch_marker(marker);
    /* Decided by the two others; the tool still waits for node 0's answer before it exits. */
    if (!proc_wait_for_output(&p, "released cli:sig-release", true, TOOL_TIMEOUT_MS))
        fail_msg("no release; stderr:\n%s", p.err);
    proc_signal(&p, SIGTERM);
    tool_finish(&p, TOOL_TIMEOUT_MS);
    if (p.term_signal != SIGTERM)
        fail_msg("the tool ended with status %d (signal %d); stderr:\n%s", p.status, p.term_signal,
                 p.err);
    assert_non_null(strstr(p.err, "got SIGTERM: dying of it once the release is done"));
    proc_free(&p);
    assert_int_equal(fixture_resume(&extra, 0), 0);
    expect_key_everywhere(&extra, key, NULL);
    unlink(marker);
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
 * argv (ps) and the environment. Errors name the file and the line, never the password. */
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

    /* A bad line: the file and the line number, and its URL as the library quotes it, the
     * password masked. */
    snprintf(text, sizeof(text), "redis://:%s@127.0.0.1:%d\nredis://:%s@127.0.0.1:99999\n", secret,
             extra.servers[0].port, secret);
    write_file(path, text);
    TOOL(&p, NULL, "--nodes-file", path, "acquire", "cli:nodes-file");
    expect_status(&p, 64);
    expect_no_secret(&p, secret);
    assert_non_null(strstr(p.err, "--nodes-file"));
    assert_non_null(strstr(p.err, "line 2"));
    assert_non_null(strstr(p.err, "redis://:***@127.0.0.1:99999"));
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

/* --tls-ca, --tls-cert, --tls-key (or their variables) and --nodes-file naming a FIFO: open(2)
 * would block until someone writes to it, where no signal handler runs (the old tool hung until
 * SIGKILL). Refused at once, exit 64, the path and what it is named. */
static void non_regular_files_are_refused(void **state)
{
    (void)state;
    char fifo[512], dir[512], env[600];
    marker_path(fifo, sizeof(fifo), "fifo");
    unlink(fifo);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    marker_path(dir, sizeof(dir), "");
    snprintf(env, sizeof(env), "REDLOCK_TLS_CA=%s", fifo);
    static const char *const options[] = {"--tls-ca", "--tls-cert", "--tls-key", "--nodes-file"};
    for (size_t i = 0; i < sizeof(options) / sizeof(options[0]); i++) {
        for (int k = 0; k < 2; k++) { /* a lock command, and check */
            proc p;
            TOOL(&p, NULL, "-n", "rediss://127.0.0.1:1", options[i], fifo,
                 k == 0 ? "status" : "check", "cli:fifo");
            expect_status(&p, 64);
            char said[700];
            snprintf(said, sizeof(said), "redlock: %s %s: not a regular file (a FIFO)", options[i],
                     fifo);
            if (strstr(p.err, said) == NULL)
                fail_msg("%s FIFO: stderr:\n%s", options[i], p.err);
            proc_free(&p);
        }
    }
    proc p;
    TOOL(&p, ARGS(env), "-n", "rediss://127.0.0.1:1", "status", "cli:fifo");
    expect_status(&p, 64);
    assert_non_null(strstr(p.err, "REDLOCK_TLS_CA"));
    assert_non_null(strstr(p.err, "not a regular file (a FIFO)"));
    proc_free(&p);
    TOOL(&p, NULL, "--nodes-file", dir, "status", "cli:fifo");
    expect_status(&p, 64);
    assert_non_null(strstr(p.err, "not a regular file (a directory)"));
    proc_free(&p);
    unlink(fifo);
}

int main(void)
{
    static const struct CMUnitTest tests[] = {
        cmocka_unit_test(run_forwards_every_signal),
        cmocka_unit_test(run_dies_of_forwarded_signal_after_release),
        cmocka_unit_test(interrupted_wait_dies_of_the_signal),
        cmocka_unit_test(shell_loop_stops_on_ctrl_c),
        cmocka_unit_test(command_does_not_see_redlock_nodes),
        cmocka_unit_test(nodes_file_keeps_urls_out_of_argv),
        cmocka_unit_test(signal_during_final_release_ends_the_tool),
        cmocka_unit_test(non_regular_files_are_refused),
    };
    static const char *const temp_files[] = {"sig-marker",       "wait-marker", "nodes-file",
                                             "nodes-file-plain", "fifo",        NULL};
    return cli_main("cli-signals", tests, sizeof(tests) / sizeof(tests[0]), temp_files);
}
