/* redlock.c - the command-line tool: flock(1) for a fleet.
 *
 *   redlock [options] run KEY -- COMMAND [ARG...]
 *   redlock [options] acquire KEY
 *   redlock [options] release KEY TOKEN
 *   redlock [options] extend KEY TOKEN
 *   redlock [options] status KEY
 *
 * Everything is checked before the first lock command leaves: the command line (args.c), then
 * the node URLs by creating the client (which connects, but sends no lock command), then the
 * operation's own arguments, which the library refuses at once without sending anything. See
 * docs/cli.md for the interface, the JSON results and the exit codes. */
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char help_text[] =
    "usage: redlock [options] run KEY -- COMMAND [ARG...]\n"
    "       redlock [options] acquire KEY\n"
    "       redlock [options] release KEY TOKEN\n"
    "       redlock [options] extend KEY TOKEN\n"
    "       redlock [options] status KEY\n"
    "\n"
    "A distributed lock over N Redis masters (Redlock): flock(1) for a fleet.\n"
    "\n"
    "commands:\n"
    "  run      take the lock, keep it alive while COMMAND runs, release it when COMMAND exits;\n"
    "           exit with COMMAND's status (128+N if it died of signal N), or 70 if the lock was\n"
    "           lost or the release finds it had lapsed. COMMAND gets\n"
    "           REDLOCK_KEY and REDLOCK_TOKEN (and REDLOCK_FENCE with --fence) in its\n"
    "           environment. If the lock is lost, COMMAND\n"
    "           gets SIGTERM, then SIGKILL after --grace. SIGINT, SIGTERM and SIGHUP are\n"
    "           forwarded to COMMAND.\n"
    "  acquire  take the lock and leave it held for its ttl; print one JSON line with the token\n"
    "  release  release a lock taken with acquire (compare-and-delete: only with its token);\n"
    "           exit 70 if the lock had lapsed (fewer than a quorum still held the token)\n"
    "  extend   extend a held lock to --ttl from now (compare-and-pexpire)\n"
    "  status   show who holds KEY on every node, and its remaining ttl\n"
    "\n"
    "options (before KEY; '--' ends them, so a KEY may start with '-'):\n"
    "  -n, --nodes URL[,URL...]    Redis masters, e.g. redis://:secret@10.0.1.5:6379/0;\n"
    "                              default $REDLOCK_NODES; may be repeated\n"
    "  -t, --ttl DURATION          lock ttl, also for extend (default 10s, at least 10ms)\n"
    "  -w, --wait DURATION         keep retrying while the lock is busy for up to this long\n"
    "                              (default 0: one try)\n"
    "  -T, --node-timeout DURATION per-request deadline on each node, including connection\n"
    "                              setup on the first request (default 500ms, at most 1h)\n"
    "  -g, --grace DURATION        run: time between SIGTERM and SIGKILL when the lock is\n"
    "                              lost (default 5s)\n"
    "  -q, --quiet                 nothing on stderr unless something is wrong (a busy lock\n"
    "                              is not: it is silent)\n"
    "  -j, --json                  run: print one JSON line on stdout at the end, after\n"
    "                              COMMAND exited (the other commands always print one)\n"
    "  -f, --fence                 take a fencing token with the lock, a number that grows\n"
    "                              with every holder: acquire prints it (\"fence\"), run\n"
    "                              exports REDLOCK_FENCE; status shows each node's counter\n"
    "  --tls-ca FILE               rediss:// nodes: CA certificates (PEM) to verify them with;\n"
    "                              default $REDLOCK_TLS_CA, else the system's CA store\n"
    "  --tls-ca-dir DIR            a directory of hashed CA certificates ($REDLOCK_TLS_CA_DIR)\n"
    "  --tls-cert FILE             client certificate for mutual TLS ($REDLOCK_TLS_CERT) ...\n"
    "  --tls-key FILE              ... and its key, without a passphrase ($REDLOCK_TLS_KEY)\n"
    "  --tls-server-name NAME      verify this name (and send it as SNI) instead of each host\n"
    "  --tls-insecure              do not verify the nodes' certificates (never in production)\n"
    "  -h, --help                  this text\n"
    "  -V, --version               versions of the tool, the library, libuv and TLS\n"
    "\n";
/* In two parts: C compilers need only take string literals up to 4095 bytes. */
static const char help_text_more[] =
    "DURATION is an integer or decimal with a unit: ms, s, m or h (500ms, 1.5s, 2m, 1h);\n"
    "a bare number is seconds.\n"
    "\n"
    "exit status:\n"
    "    0  success (run: COMMAND's own status, 128+N if it died of signal N)\n"
    "   64  usage error: bad option, duration, key, node URL, duplicate node; nothing sent\n"
    "   69  no quorum: too many nodes failed or were too slow (ENOQUORUM, EEXPIRED)\n"
    "   70  the lock was lost or had lapsed (ELOST): run: lost while COMMAND ran, or found\n"
    "       lapsed by the final release; release: it had lapsed; extend: it is gone\n"
    "   71  system error (out of memory, cannot write the result)\n"
    "   75  the lock is held by someone else (EBUSY), also after --wait\n"
    "  126  run: COMMAND could not be executed\n"
    "  127  run: COMMAND not found\n"
    "  128+N  interrupted by signal N while waiting for the lock or a node\n"
    "\n"
    "rediss:// nodes use TLS (see the --tls-* options); a node whose TLS handshake fails votes\n"
    "error with the reason, and too many such nodes exit 69.\n"
    "\n"
    "acquire, release and extend print one JSON line on stdout, also when they fail; status\n"
    "prints one too. Passwords in node URLs never appear in any output. See docs/cli.md.\n";

/* ---- the end -------------------------------------------------------------------------------- */

int tool_exit_for(int status)
{
    switch (status) {
    case 0:
        return 0;
    case REDLOCK_EBUSY:
        return EXIT_BUSY;
    case REDLOCK_ENOQUORUM:
    case REDLOCK_EEXPIRED:
        return EXIT_UNAVAILABLE;
    case REDLOCK_ELOST:
        return EXIT_LOST;
    case REDLOCK_EINVAL:
    case REDLOCK_EURL:
    case REDLOCK_EDUPNODE:
        return EXIT_USAGE;
    default:
        return EXIT_OSERR;
    }
}

static void finish(tool *t)
{
    t->phase = PHASE_DONE;
    for (unsigned i = 0; i < t->n_signals; i++)
        uv_close((uv_handle_t *)&t->signals[i], NULL);
    t->n_signals = 0;
    run_close_handles(t);
}

static void start_cleanup(tool *t);

static void on_client_closed(redlock_client *client, void *data)
{
    (void)client;
    tool *t = data;
    t->client = NULL;
    t->client_closing = false;
    if (t->cleanup_needed) {
        t->cleanup_needed = false;
        start_cleanup(t);
        return;
    }
    finish(t);
}

void tool_close_client(tool *t)
{
    if (t->client == NULL || t->client_closing)
        return;
    t->client_closing = true;
    redlock_client_close(t->client, on_client_closed, t);
}

/* A call on the client failed at once (nothing was sent): say why, and end. */
static void failed_at_once(tool *t, int rc)
{
    fprintf(stderr, "redlock: %s\n",
            redlock_client_last_error(t->client)[0] != '\0' ? redlock_client_last_error(t->client)
                                                            : redlock_strerror(rc));
    t->exit_code = tool_exit_for(rc);
    tool_close_client(t);
}

/* ---- interrupted acquire: release what it may have set ------------------------------------- */

/* The acquire was canceled by closing its client; a round may already have set the key with our
 * token on some nodes (even a quorum, won but not yet delivered). A fresh client releases it
 * everywhere, so nobody waits a whole ttl for a lock nobody holds. */
static void on_cleanup_released(redlock_lock *lock, int status, const redlock_result *result,
                                void *data)
{
    tool *t = data;
    /* REDLOCK_ELOST only says the attempt had not set the key on a quorum: nothing was held. */
    if ((status == 0 || status == REDLOCK_ELOST) && result->votes_yes > 0)
        tool_say(t, "released the key the interrupted attempt had set on %u node(s)",
                 result->votes_yes);
    else if (status != 0 && status != REDLOCK_ELOST)
        tool_warn(t,
                  "could not clean up after the interrupted attempt: %s (any key it set "
                  "expires within the ttl)",
                  redlock_strerror(status));
    redlock_lock_free(lock);
    tool_close_client(t);
}

static void start_cleanup(tool *t)
{
    t->phase = PHASE_CLEANUP;
    char err[512];
    int rc = redlock_client_new(&t->loop, (const char *const *)t->args.nodes, t->args.n_nodes,
                                &t->opts, &t->client, err, sizeof(err));
    if (rc != 0) {
        finish(t);
        return;
    }
    redlock_lock *lock;
    rc = redlock_lock_attach(t->client, t->args.key, t->args.key_len, t->token, strlen(t->token),
                             t->args.ttl_ms, &lock);
    if (rc == 0) {
        rc = redlock_release(lock, on_cleanup_released, t);
        if (rc != 0)
            redlock_lock_free(lock);
    }
    if (rc != 0)
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

static void on_signal(uv_signal_t *handle, int signum)
{
    tool *t = handle->data;
    char buf[32];
    const char *name = tool_signal_name(signum, buf, sizeof(buf));
    switch (t->phase) {
    case PHASE_ACQUIRING:
        t->cleanup_needed = true;
        /* fall through */
    case PHASE_ONESHOT:
        tool_say(t, "got %s: giving up", name);
        t->interrupted = signum;
        t->exit_code = EXIT_SIGNAL_BASE + signum;
        tool_close_client(t);
        break;
    case PHASE_CHILD:
        run_forward_signal(t, signum);
        break;
    default:
        break; /* a release or a drain is finishing: at most one node timeout */
    }
}

static int start_signals(tool *t)
{
    static const int signums[TOOL_N_SIGNALS] = {SIGINT, SIGTERM, SIGHUP};
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

/* ---- acquire (also run's first step) -------------------------------------------------------- */

static void say_acquire_failure(tool *t, int status, const redlock_result *result)
{
    char key[160];
    tool_printable(t->args.key, t->args.key_len, key, sizeof(key));
    switch (status) {
    case REDLOCK_EBUSY:
        tool_say(t, "%s is locked by another holder (%u of %u nodes said no; %u attempt%s)", key,
                 result->votes_no, result->n_nodes, result->attempts,
                 result->attempts == 1 ? "" : "s");
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
    if (t->args.command == CLI_CMD_ACQUIRE)
        report_lock_result(t, lock, status, result);
    if (status == REDLOCK_ECANCELED && t->interrupted != 0) {
        report_run_result(t, NULL, status, result);
        return; /* we closed the client; the cleanup follows */
    }
    if (status != 0) {
        say_acquire_failure(t, status, result);
        t->exit_code = tool_exit_for(status);
        if (t->args.command == CLI_CMD_RUN)
            report_run_result(t, NULL, status, result);
        tool_close_client(t);
        return;
    }
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

static int start_acquire(tool *t)
{
    /* Our own token, so an interrupted attempt can be cleaned up by a fresh client. */
    unsigned char raw[TOOL_TOKEN_BYTES];
    int rc = uv_random(NULL, NULL, raw, sizeof(raw), 0, NULL);
    if (rc != 0) {
        fprintf(stderr, "redlock: no randomness for the token: %s\n", uv_strerror(rc));
        t->exit_code = EXIT_OSERR;
        tool_close_client(t);
        return rc;
    }
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof(raw); i++) {
        t->token[2 * i] = digits[raw[i] >> 4];
        t->token[2 * i + 1] = digits[raw[i] & 15];
    }
    t->token[2 * sizeof(raw)] = '\0';

    redlock_lock_opts opts;
    redlock_lock_opts_init(&opts);
    opts.token = t->token;
    opts.token_len = strlen(t->token);
    opts.fencing = t->args.fence;
    if (t->args.wait_ms > 0)
        opts.wait_ms = t->args.wait_ms;
    else
        opts.retry_count = 0; /* one try */
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
    t->phase = PHASE_ACQUIRING;
    rc = redlock_acquire(t->client, t->args.key, t->args.key_len, t->args.ttl_ms, &opts,
                         on_acquired, t);
    if (rc != 0)
        failed_at_once(t, rc);
    return rc;
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
        finish(t);
    } else {
        redlock_options_init(&t->opts);
        t->opts.ttl_ms = t->args.ttl_ms;
        t->opts.node_timeout_ms = t->args.node_timeout_ms;
        t->opts.connect_timeout_ms =
            t->args.node_timeout_ms > 1000 ? t->args.node_timeout_ms : 1000;
        t->opts.retry_count = 0;
        tool_tls_options(t);
        char err[512];
        rc = redlock_client_new(&t->loop, (const char *const *)t->args.nodes, t->args.n_nodes,
                                &t->opts, &t->client, err, sizeof(err));
        if (rc != 0) {
            tool_tls_message(err, sizeof(err));
            /* The library's message names the node by index and redacts any password. */
            fprintf(stderr, "redlock: %s%s\n", t->args.nodes_from_env ? "REDLOCK_NODES: " : "",
                    err);
            t->exit_code = tool_exit_for(rc);
            finish(t);
        } else if (t->args.command == CLI_CMD_ACQUIRE || t->args.command == CLI_CMD_RUN) {
            start_acquire(t);
        } else {
            start_oneshot(t);
        }
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
    int code;
    if (rc == CLI_PARSE_NOMEM) {
        fprintf(stderr, "redlock: out of memory\n");
        code = EXIT_OSERR;
    } else if (rc != CLI_PARSE_OK) {
        fprintf(stderr, "redlock: %s\n", err);
        code = EXIT_USAGE;
    } else if (t.args.help) {
        fputs(help_text, stdout);
        fputs(help_text_more, stdout);
        code = fflush(stdout) == 0 ? 0 : EXIT_OSERR;
    } else if (t.args.version) {
        const char *tls = redlock_tls_backend();
        printf("redlock %s (libredlock %s, libuv %s, TLS: %s)\n", REDLOCK_VERSION_STRING,
               redlock_version_string(), uv_version_string(), tls != NULL ? tls : "not built in");
        code = fflush(stdout) == 0 ? 0 : EXIT_OSERR;
    } else {
        code = tool_main(&t);
    }
    cli_args_free(&t.args);
    return code;
}
