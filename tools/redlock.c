/* SPDX-License-Identifier: MIT */
/* redlock.c - the command-line tool: flock(1) for a fleet.
 *
 *   redlock [options] run KEY -- COMMAND [ARG...]
 *   redlock [options] acquire KEY
 *   redlock [options] release KEY TOKEN
 *   redlock [options] extend KEY TOKEN
 *   redlock [options] status KEY
 *   redlock [options] check [PREFIX]        (check.c)
 *
 * Everything is checked before the first lock command leaves: the command line (args.c), then
 * the node URLs by creating the client (which connects, but sends no lock command), then the
 * operation's own arguments, which the library refuses at once without sending anything. See
 * docs/cli.md for the interface and the JSON results; the exit statuses and --help are args.c's. */
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* The command line is checked without the library (args.h): its copies of the limits. */
_Static_assert(CLI_MAX_NODES == REDLOCK_MAX_NODES, "args.h follows redlock.h");
_Static_assert(CLI_KEY_MAX == REDLOCK_RESOURCE_MAX, "args.h follows redlock.h");

/* A call on the client failed at once (nothing was sent): say why, and end. */
static void failed_at_once(tool *t, int rc)
{
    fprintf(stderr, "redlock: %s\n",
            redlock_client_last_error(t->client)[0] != '\0' ? redlock_client_last_error(t->client)
                                                            : redlock_strerror(rc));
    t->exit_code = tool_exit_for(rc);
    tool_close_client(t);
}

/* ---- draining: let a won round reach every node ------------------------------------------- */

static void on_drained(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)lock;
    (void)status;
    (void)result;
    tool_close_client(data);
}

/* An acquire or extend is decided at a quorum, so its command to a slower node may still sit
 * behind a connection that is being set up, and closing the client now would drop it: the lock
 * would live on a bare majority, and one node restart could hand it to someone else. A read
 * round on every node ends only when each one answered (after the command queued before it:
 * replies come in order) or timed out, so the tool exits once the command reached every node
 * that can take it. The result is printed before: this is at most one node timeout more. */
static void drain_then_close(tool *t)
{
    t->phase = PHASE_DRAINING;
    if (redlock_inspect(t->client, t->args.key, t->args.key_len, on_drained, t) != 0)
        tool_close_client(t);
}

/* ---- signals -------------------------------------------------------------------------------- */

/* SIGWINCH and SIGCONT end nothing by default: run forwards them, the rest ignores them. */
static bool ends_process(int signum)
{
    return signum != SIGWINCH && signum != SIGCONT;
}

static void on_signal(uv_signal_t *handle, int signum)
{
    tool *t = handle->data;
    char buf[32];
    const char *name = tool_signal_name(signum, buf, sizeof(buf));
    switch (t->phase) {
    case PHASE_ACQUIRING:
    case PHASE_ONESHOT:
        if (!ends_process(signum) || t->interrupted != 0)
            break;
        tool_say(t, "got %s: giving up", name);
        t->interrupted = signum;
        t->exit_code = EXIT_SIGNAL_BASE + signum;
        t->die_signal = signum;
        /* A canceled acquire leaves nothing held: the library releases its attempt on every
         * node (after the attempt's own commands, on each ordered connection), and its
         * callback, with REDLOCK_ECANCELED, closes the client, which waits for that release. */
        if (t->phase == PHASE_ACQUIRING && t->attempt_inflight && redlock_cancel(t->client, t) == 0)
            break;
        tool_close_client(t);
        break;
    case PHASE_CHILD:
        if (ends_process(signum) && signum < 32)
            t->received |= 1u << signum;
        run_forward_signal(t, signum);
        break;
    case PHASE_RELEASING:
        if (ends_process(signum) && t->release_signal == 0) {
            tool_say(t, "got %s: dying of it once the release is done (within the node timeout)",
                     name);
            run_die_after_release(t, signum);
        }
        break;
    default:
        break; /* a drain is finishing: at most one node timeout */
    }
}

static int start_signals(tool *t)
{
    static const int signums[TOOL_N_SIGNALS] = {SIGHUP,  SIGINT,  SIGQUIT,  SIGTERM, SIGUSR1,
                                                SIGUSR2, SIGALRM, SIGWINCH, SIGCONT};
    for (unsigned i = 0; i < TOOL_N_SIGNALS; i++) {
        uv_signal_t *h = &t->signals[i];
        int rc = uv_signal_init(&t->loop, h);
        if (rc != 0)
            return rc;
        t->n_signals++;
        h->data = t;
        rc = uv_signal_start(h, on_signal, signums[i]);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* End the way the signal would have ended the tool, had it not cleaned up first: a shell
 * waiting for it then acts on the signal too (bash stops a loop on Ctrl-C only when the
 * command it ran died of SIGINT). Returns if the signal does not end the process. */
static void die_of(int signum)
{
    fflush(stdout);
    fflush(stderr);
    if (signum == SIGQUIT) {
        /* Dying of SIGQUIT dumps core by default: a deliberate exit is no crash to debug. */
        struct rlimit none = {0, 0};
        setrlimit(RLIMIT_CORE, &none);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(signum, &sa, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signum);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(signum);
}

/* ---- acquire (also run's first step) -------------------------------------------------------- */

static void say_acquire_failure(tool *t, int status, const redlock_result *result)
{
    char key[160];
    tool_printable(t->args.key, t->args.key_len, key, sizeof(key));
    tool_warn_app_data(t, result); /* a hash under the lock's name, say: the real news */
    switch (status) {
    case REDLOCK_EBUSY:
        tool_say(t, "%s is locked by another holder (%u of %u nodes said no; %u attempt%s)", key,
                 result->votes_no, result->n_nodes, t->attempts, t->attempts == 1 ? "" : "s");
        /* What a node said beyond "no" (application data under the lock's key, say). */
        for (unsigned i = 0; i < result->n_nodes; i++)
            if (result->nodes[i].error != NULL)
                tool_say(t, "  %s: %s", result->nodes[i].url, result->nodes[i].error);
        break;
    case REDLOCK_ENOQUORUM:
        tool_warn(t, "no quorum for %s: %u of %u nodes failed or timed out", key,
                  result->votes_error + result->votes_timeout, result->n_nodes);
        tool_say_nodes(t, result, true);
        break;
    case REDLOCK_EEXPIRED:
        tool_warn(t,
                  "%s: a quorum said yes, but too late to leave any validity (nodes too slow "
                  "for the ttl)",
                  key);
        tool_say_nodes(t, result, true);
        break;
    default:
        tool_warn(t, "cannot acquire %s: %s", key, redlock_strerror(status));
        break;
    }
}

static void on_acquired(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    tool *t = data;
    t->attempt_inflight = false;
    t->attempts = result != NULL ? result->attempts : 0;
    progress_stop(t);
    if (status == REDLOCK_ECANCELED && t->interrupted != 0) {
        if (t->args.command == CLI_CMD_ACQUIRE)
            report_lock_result(t, lock, status, result);
        report_run_result(t, NULL, status, result);
        tool_close_client(t); /* it waits for the release of the canceled attempt */
        return;
    }
    if (t->args.command == CLI_CMD_ACQUIRE)
        report_lock_result(t, lock, status, result);
    if (status != 0) {
        say_acquire_failure(t, status, result);
        t->exit_code = tool_exit_for(status);
        if (t->args.command == CLI_CMD_RUN)
            report_run_result(t, NULL, status, result);
        tool_close_client(t);
        return;
    }
    size_t token_len;
    const char *token = redlock_lock_token(lock, &token_len);
    snprintf(t->token, sizeof(t->token), "%.*s", (int)token_len, token);
    char key[160];
    tool_printable(t->args.key, t->args.key_len, key, sizeof(key));
    tool_say(t, "acquired %s (validity %llu ms)", key,
             (unsigned long long)redlock_lock_validity_ms(lock));
    if (t->args.command == CLI_CMD_RUN) {
        run_start(t, lock);
        return;
    }
    /* acquire: the lock stays held for its ttl; closing the client releases nothing. */
    t->exit_code = 0;
    redlock_lock_free(lock);
    drain_then_close(t);
}

/* The acquire: one round, or with --wait the library's wait in the resource's queue on every
 * node (docs/operations.md, "Waiting for a lock"): woken by a release, in turn with the other
 * waiters, the tool's and the library's alike. Every attempt has a token of the library's own,
 * fresh (a caller's token would be reused by each attempt: docs/api.md, redlock_acquire); a
 * signal cancels the acquire, which releases its attempt. */
static int start_acquire(tool *t)
{
    t->phase = PHASE_ACQUIRING;
    redlock_lock_opts opts;
    redlock_lock_opts_init(&opts);
    opts.fencing = t->args.fence;
    opts.fence_domain = t->args.fence_domain;
    opts.retry_count = 0;
    opts.wait_ms = t->args.wait_ms; /* 0: one round */
    redlock_auto_opts auto_opts;
    if (t->args.command == CLI_CMD_RUN) {
        redlock_auto_opts_init(&auto_opts);
        /* A node that restarted (and lost the key) while the lock is still valid gets it back,
         * so a long COMMAND survives rolling restarts of the nodes. */
        auto_opts.extend_flags = REDLOCK_EXTEND_RETAKE;
        opts.auto_extend = &auto_opts;
        opts.lost_cb = run_on_lost;
        opts.lost_data = t;
    }
    int rc = redlock_acquire(t->client, t->args.key, t->args.key_len, t->args.ttl_ms, &opts,
                             on_acquired, t);
    if (rc != 0) {
        failed_at_once(t, rc);
        return rc;
    }
    t->attempt_inflight = true;
    if (t->args.wait_ms > 0)
        progress_start(t);
    return 0;
}

/* ---- release, extend, status ---------------------------------------------------------------- */

static void on_released(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    tool *t = data;
    report_lock_result(t, lock, status, result);
    char key[160];
    tool_printable(t->args.key, t->args.key_len, key, sizeof(key));
    if (status == 0) {
        tool_say(t, "released %s (deleted on %u of %u nodes)", key, result->votes_yes,
                 result->n_nodes);
    } else if (status == REDLOCK_ELOST) {
        tool_warn(t,
                  "%s had lapsed: only %u of %u nodes still held this token (it expired, was "
                  "taken over, or is not yours): the work under it may not have been exclusive",
                  key, result->votes_yes, result->n_nodes);
    } else if (status != REDLOCK_ECANCELED) {
        tool_warn(t,
                  "release of %s failed: %s (deleted on %u of %u nodes; the rest expire "
                  "within the ttl)",
                  key, redlock_strerror(status), result->votes_yes, result->n_nodes);
        tool_say_nodes(t, result, true);
    }
    if (t->interrupted == 0)
        t->exit_code = tool_exit_for(status);
    redlock_lock_free(lock);
    tool_close_client(t);
}

static void on_extended(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    tool *t = data;
    report_lock_result(t, lock, status, result);
    char key[160];
    tool_printable(t->args.key, t->args.key_len, key, sizeof(key));
    if (status == 0) {
        tool_say(t, "extended %s (validity %llu ms)", key,
                 (unsigned long long)redlock_lock_validity_ms(lock));
    } else if (status == REDLOCK_ELOST) {
        tool_warn(t,
                  "%s is lost: a quorum of nodes no longer holds this token (%u of %u still "
                  "do)",
                  key, result->votes_yes, result->n_nodes);
    } else if (status != REDLOCK_ECANCELED) {
        tool_warn(t, "extend of %s failed: %s", key, redlock_strerror(status));
        tool_say_nodes(t, result, true);
    }
    if (t->interrupted == 0)
        t->exit_code = tool_exit_for(status);
    redlock_lock_free(lock);
    if (status == 0)
        drain_then_close(t);
    else
        tool_close_client(t);
}

static void on_inspected(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)lock;
    tool *t = data;
    report_status(t, status, result);
    if (t->interrupted == 0)
        t->exit_code = tool_exit_for(status);
    tool_close_client(t);
}

static void start_oneshot(tool *t)
{
    cli_args *a = &t->args;
    t->phase = PHASE_ONESHOT;
    int rc;
    if (a->command == CLI_CMD_STATUS) {
        rc = redlock_inspect(t->client, a->key, a->key_len, on_inspected, t);
    } else {
        redlock_lock *lock;
        rc = redlock_lock_attach(t->client, a->key, a->key_len, a->token, a->token_len, a->ttl_ms,
                                 &lock);
        if (rc == 0) {
            if (a->command == CLI_CMD_RELEASE)
                rc = redlock_release(lock, on_released, t);
            else
                rc = redlock_extend(lock, a->ttl_ms, 0, on_extended, t);
            if (rc != 0) {
                failed_at_once(t, rc);
                redlock_lock_free(lock);
                return;
            }
        }
    }
    if (rc != 0)
        failed_at_once(t, rc);
}

/* ---- main ----------------------------------------------------------------------------------- */

/* The client, then the command's first operation; on a failure, say why and end. */
static void start_client(tool *t)
{
    redlock_options_init(&t->opts);
    t->opts.ttl_ms = t->args.ttl_ms;
    t->opts.node_timeout_ms = t->args.node_timeout_ms; /* 0: the library's, adaptive */
    if (t->args.node_timeout_ms != 0)
        t->opts.connect_timeout_ms =
            t->args.node_timeout_ms > 1000 ? t->args.node_timeout_ms : 1000;
    t->opts.retry_count = 0;
    t->opts.release_waits_all = t->args.release_all;
    char err[512];
    if (tool_tls_options(t, err, sizeof(err)) != 0) {
        fprintf(stderr, "redlock: %s\n", err);
        t->exit_code = EXIT_USAGE;
        tool_finish(t);
        return;
    }
    int rc = redlock_client_new(&t->loop, (const char *const *)t->args.nodes, t->args.n_nodes,
                                &t->opts, &t->client, err, sizeof(err));
    if (rc != 0) {
        tool_tls_message(err, sizeof(err));
        /* The library's message names the node by index and redacts any password. */
        fprintf(stderr, "redlock: %s%s\n", t->args.nodes_from_env ? "REDLOCK_NODES: " : "", err);
        t->exit_code = tool_exit_for(rc);
        tool_finish(t);
    } else if (t->args.command == CLI_CMD_ACQUIRE || t->args.command == CLI_CMD_RUN) {
        start_acquire(t);
    } else {
        start_oneshot(t);
    }
}

static int tool_main(tool *t)
{
    int rc = uv_loop_init(&t->loop);
    if (rc != 0) {
        fprintf(stderr, "redlock: cannot start the event loop: %s\n", uv_strerror(rc));
        return EXIT_OSERR;
    }
    t->exit_code = EXIT_OSERR; /* until an outcome says otherwise */
    rc = start_signals(t);
    if (rc != 0) {
        fprintf(stderr, "redlock: cannot handle signals: %s\n", uv_strerror(rc));
        tool_finish(t);
    } else {
        start_client(t);
    }
    uv_run(&t->loop, UV_RUN_DEFAULT);
    rc = uv_loop_close(&t->loop);
    if (rc != 0)
        fprintf(stderr, "redlock: internal error: the event loop still has open handles\n");
    if (t->output_failed && t->exit_code == 0)
        t->exit_code = EXIT_OSERR;
    return t->exit_code;
}

/* Started with stdin, stdout or stderr closed, the first socket would get that descriptor: the
 * result would go to a node, and libuv aborts when it closes a descriptor below 3. Fill the gaps
 * with /dev/null; stdout read-only, so that writing the result fails (exit 71) as it would have,
 * instead of vanishing. */
static void ensure_stdio(void)
{
    static const int modes[3] = {O_RDONLY, O_RDONLY, O_WRONLY};
    for (int fd = 0; fd < 3; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
            continue;
        int got = open("/dev/null", modes[fd]);
        if (got >= 0 && got != fd)
            close(got); /* cannot happen: open returns the lowest free descriptor */
    }
}

#define NODES_FILE_MAX (1024 * 1024)

/* --nodes-file: its URLs join those of --nodes. Messages name the file and a line, and quote a
 * bad URL only as the library does, its password masked. Returns CLI_PARSE_OK, CLI_PARSE_USAGE
 * with err set, or CLI_PARSE_NOMEM. */
static int read_nodes_file(cli_args *a, char *err, size_t err_len)
{
    char name[200];
    tool_printable(a->nodes_file, strlen(a->nodes_file), name, sizeof(name));
    char what[256];
    snprintf(what, sizeof(what), "--nodes-file %s", name);
    if (tool_regular_file("--nodes-file", a->nodes_file, err, err_len) != 0)
        return CLI_PARSE_USAGE;
    /* O_NONBLOCK: a FIFO put there since the check opens at once, and is refused below. */
    int fd = open(a->nodes_file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        snprintf(err, err_len, "%s: %s", what, strerror(errno));
        return CLI_PARSE_USAGE;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        snprintf(err, err_len, "%s: not a regular file", what);
        return CLI_PARSE_USAGE;
    }
    char *text = malloc(NODES_FILE_MAX);
    if (text == NULL) {
        close(fd);
        return CLI_PARSE_NOMEM;
    }
    size_t len = 0;
    int rc = CLI_PARSE_OK;
    for (;;) {
        ssize_t n = read(fd, text + len, NODES_FILE_MAX - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, err_len, "%s: %s", what, strerror(errno));
            rc = CLI_PARSE_USAGE;
            break;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len == NODES_FILE_MAX) {
            snprintf(err, err_len, "%s: larger than %d bytes", what, NODES_FILE_MAX);
            rc = CLI_PARSE_USAGE;
            break;
        }
    }
    close(fd);
    unsigned before = a->n_nodes;
    if (rc == CLI_PARSE_OK)
        rc = cli_add_node_lines(a, text, len, what, err, err_len);
    if (rc == CLI_PARSE_OK && a->n_nodes == before) {
        snprintf(err, err_len, "%s: no node URL in it", what);
        rc = CLI_PARSE_USAGE;
    }
    /* Each URL is checked here, where its line is known (the library's message would name the
     * node by its index); the message is the library's, password redacted. */
    bool has_password = false;
    for (unsigned i = before; rc == CLI_PARSE_OK && i < a->n_nodes; i++) {
        redlock_url url;
        char why[256];
        if (redlock_url_parse(&url, a->nodes[i], why, sizeof(why)) != 0) {
            snprintf(err, err_len, "%.200s, line %u: %.250s", what, a->node_line[i], why);
            rc = CLI_PARSE_USAGE;
        }
        has_password = has_password || url.password != NULL;
        redlock_url_free(&url);
    }
    /* As ssh and libpq do of their secrets: a password that others may read (or change the
     * nodes it goes to) is one the tool cannot keep. A warning, not a refusal: docs/cli.md. */
    if (rc == CLI_PARSE_OK && has_password && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0)
        fprintf(stderr,
                "redlock: warning: %s holds a password and others can access it (mode %04o): "
                "chmod 600 it\n",
                what, (unsigned)(st.st_mode & 07777));
    volatile char *wipe = text; /* passwords */
    for (size_t k = 0; k < len; k++)
        wipe[k] = '\0';
    free(text);
    return rc;
}

int main(int argc, char **argv)
{
    ensure_stdio();
    /* A write to a node that has just closed must fail with EPIPE, not kill the tool (the
     * child gets the default disposition back: libuv resets signals in uv_spawn). */
    signal(SIGPIPE, SIG_IGN);
    tool t;
    memset(&t, 0, sizeof(t));
    char err[512];
    int rc = cli_parse(&t.args, argc, argv, getenv("REDLOCK_NODES"), err, sizeof(err));
    if (rc == CLI_PARSE_OK && !t.args.help && !t.args.version && t.args.nodes_file != NULL)
        rc = read_nodes_file(&t.args, err, sizeof(err));
    int code;
    if (rc == CLI_PARSE_NOMEM) {
        fprintf(stderr, "redlock: out of memory\n");
        code = EXIT_OSERR;
    } else if (rc != CLI_PARSE_OK) {
        fprintf(stderr, "redlock: %s\n", err);
        code = EXIT_USAGE;
    } else if (t.args.help) {
        code = cli_write_help(stdout) == 0 && fflush(stdout) == 0 ? 0 : EXIT_OSERR;
    } else if (t.args.version) {
        const char *tls = redlock_tls_backend();
        printf("redlock %s (libredlock %s, libuv %s, TLS: %s)\n", REDLOCK_VERSION_STRING,
               redlock_version_string(), uv_version_string(), tls != NULL ? tls : "not built in");
        code = fflush(stdout) == 0 ? 0 : EXIT_OSERR;
    } else if (t.args.command == CLI_CMD_CHECK) {
        redlock_options_init(&t.opts);
        if (tool_tls_options(&t, err, sizeof(err)) != 0) {
            fprintf(stderr, "redlock: %s\n", err);
            code = EXIT_USAGE;
        } else {
            code = check_main(&t.args, &t.opts);
        }
    } else {
        code = tool_main(&t);
    }
    cli_args_free(&t.args);
    if (t.die_signal != 0 && code == EXIT_SIGNAL_BASE + t.die_signal)
        die_of(t.die_signal);
    return code;
}
