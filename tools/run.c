/* SPDX-License-Identifier: MIT */
/* run.c - "redlock run KEY -- COMMAND": hold the lock exactly while COMMAND runs.
 *
 * The lock is auto-extended by the library (extend rounds at a third of the ttl), so the ttl is
 * a heartbeat: if this process dies, the lock ends within one ttl. If the library reports the
 * lock lost, COMMAND is told with SIGTERM at once (before the validity runs out: the lost
 * callback fires a margin ahead of it), then SIGKILL after the grace period. When COMMAND exits
 * the lock is released and the tool exits with COMMAND's status, or 70 if the lock was lost, or
 * if the release finds that it had lapsed (fewer than a quorum still held the token: COMMAND ran
 * without the lock for part of its time, whatever its own status says). */
#include "tool.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

/* environ without REDLOCK_KEY / REDLOCK_TOKEN, plus ours, and without REDLOCK_NODES: its URLs
 * may hold passwords, and COMMAND needs none of them to do its work under the lock. With --fence,
 * REDLOCK_FENCE too (without it, an inherited REDLOCK_FENCE is left as it is). The array and the
 * strings it adds (added[0..2], NULL when not added) are allocated; free with free_env. */
static char **build_env(const tool *t, char **added)
{
    size_t n = 0;
    for (char **e = environ; *e != NULL; e++)
        n++;
    char **env = malloc((n + 4) * sizeof(*env));
    size_t key_size = strlen("REDLOCK_KEY=") + t->args.key_len + 1;
    size_t token_size = strlen("REDLOCK_TOKEN=") + strlen(t->token) + 1;
    size_t fence_size = strlen("REDLOCK_FENCE=") + 21;
    added[0] = malloc(key_size);
    added[1] = malloc(token_size);
    added[2] = t->args.fence ? malloc(fence_size) : NULL;
    if (env == NULL || added[0] == NULL || added[1] == NULL ||
        (t->args.fence && added[2] == NULL)) {
        free(env);
        free(added[0]);
        free(added[1]);
        free(added[2]);
        return NULL;
    }
    snprintf(added[0], key_size, "REDLOCK_KEY=%s", t->args.key);
    snprintf(added[1], token_size, "REDLOCK_TOKEN=%s", t->token);
    if (added[2] != NULL)
        snprintf(added[2], fence_size, "REDLOCK_FENCE=%llu",
                 (unsigned long long)redlock_lock_fence(t->lock));
    size_t k = 0;
    for (char **e = environ; *e != NULL; e++) {
        if (strncmp(*e, "REDLOCK_KEY=", 12) == 0 || strncmp(*e, "REDLOCK_TOKEN=", 14) == 0 ||
            strncmp(*e, "REDLOCK_NODES=", 14) == 0 ||
            (added[2] != NULL && strncmp(*e, "REDLOCK_FENCE=", 14) == 0))
            continue;
        env[k++] = *e;
    }
    for (int i = 0; i < 3; i++)
        if (added[i] != NULL)
            env[k++] = added[i];
    env[k] = NULL;
    return env;
}

static void on_run_released(redlock_lock *lock, int status, const redlock_result *result,
                            void *data)
{
    tool *t = data;
    char key[160], deleted[96];
    tool_printable(t->args.key, t->args.key_len, key, sizeof(key));
    /* A release is reported once its outcome is known, which can be before every node answered
     * (a lapsed one once a quorum did): the count says so, and the rest still get it. */
    tool_deleted_on(result, deleted, sizeof(deleted));
    if (status == 0) {
        tool_say(t, "released %s (%s)", key, deleted);
    } else if (status == REDLOCK_ELOST && t->lost) {
        /* Already said, and already exiting 70: this only cleans up. */
        tool_say(t, "released what was left of the lost lock on %s (%s)", key, deleted);
    } else if (status == REDLOCK_ELOST && t->command_ran) {
        /* Nothing reported a loss while COMMAND ran, but the hold lapsed before it ended (the
         * nodes lost the key, or someone else took it): its work may not have been exclusive. */
        tool_warn(t,
                  "the lock on %s had lapsed before COMMAND ended (%s): COMMAND ran without the "
                  "lock for part of its time; exiting %d",
                  key, deleted, EXIT_LOST);
        t->exit_code = EXIT_LOST;
    } else if (status == REDLOCK_ELOST) {
        tool_warn(t, "the lock on %s had lapsed (%s)", key, deleted);
    } else {
        tool_warn(t, "release of %s failed: %s (the key expires within the ttl)", key,
                  redlock_strerror(status));
    }
    if (t->release_signal != 0)
        run_die_after_release(t, t->release_signal);
    report_run_result(t, lock, status, result);
    /* A node that was down (reconnecting) kept the release, but the close drops it: a fresh
     * client sends it again, with each connection's handshake, so a node that is stopped takes
     * it when it continues (at most one node timeout more). */
    for (unsigned i = 0; result != NULL && i < result->n_nodes; i++)
        if (result->nodes[i].vote == REDLOCK_VOTE_ERROR)
            t->cleanup_needed = true;
    redlock_lock_free(lock);
    t->lock = NULL;
    tool_close_client(t);
}

void run_die_after_release(tool *t, int signum)
{
    t->release_signal = signum;
    if (t->exit_code == EXIT_LOST)
        return; /* the lost lock is the news: 70, as documented */
    t->exit_code = EXIT_SIGNAL_BASE + signum;
    t->die_signal = signum;
}

/* Release the lock (also a lost one: keys left on some nodes go at once), then close. */
static void release_and_close(tool *t)
{
    t->phase = PHASE_RELEASING;
    int rc = redlock_release(t->lock, on_run_released, t);
    if (rc != 0) {
        tool_warn(t, "cannot release: %s", redlock_client_last_error(t->client));
        report_run_result(t, t->lock, rc, NULL);
        redlock_lock_free(t->lock);
        t->lock = NULL;
        tool_close_client(t);
    }
}

static void on_child_exit(uv_process_t *process, int64_t exit_status, int term_signal)
{
    tool *t = process->data;
    t->child_running = false;
    uv_close((uv_handle_t *)process, NULL);
    if (t->grace_timer_init)
        uv_timer_stop(&t->grace_timer);
    int status = term_signal != 0 ? EXIT_SIGNAL_BASE + term_signal : (int)exit_status;
    t->command_status = status;
    /* COMMAND died of a signal the tool got and forwarded (Ctrl-C): once the lock is released,
     * the tool dies of it too, unless a lost or lapsed lock gives another status. */
    if (term_signal > 0 && term_signal < 32 && (t->received & (1u << term_signal)) != 0)
        t->die_signal = term_signal;
    if (term_signal != 0) {
        char buf[32];
        tool_say(t, "command (pid %d) died of %s", process->pid,
                 tool_signal_name(term_signal, buf, sizeof(buf)));
    }
    if (t->lost) {
        tool_warn(t, "command ended (status %d) after the lock was lost: exiting %d", status,
                  EXIT_LOST);
        t->exit_code = EXIT_LOST;
    } else {
        t->exit_code = status;
    }
    release_and_close(t);
}

void run_start(tool *t, redlock_lock *lock)
{
    t->lock = lock;
    t->phase = PHASE_CHILD;
    char **argv = t->args.child_argv;
    char *added[3] = {NULL, NULL, NULL};
    char **env = build_env(t, added);
    if (env == NULL) {
        fprintf(stderr, "redlock: out of memory\n");
        t->exit_code = EXIT_OSERR;
        release_and_close(t);
        return;
    }
    uv_stdio_container_t stdio[3];
    for (int fd = 0; fd < 3; fd++) {
        stdio[fd].flags = UV_INHERIT_FD;
        stdio[fd].data.fd = fd;
    }
    uv_process_options_t options;
    memset(&options, 0, sizeof(options));
    options.exit_cb = on_child_exit;
    options.file = argv[0];
    options.args = argv;
    options.env = env;
    options.stdio_count = 3;
    options.stdio = stdio;
    int rc = uv_spawn(&t->loop, &t->child, &options);
    free(env);
    free(added[0]);
    free(added[1]);
    free(added[2]);
    t->child.data = t;
    if (rc != 0) {
        uv_close((uv_handle_t *)&t->child, NULL); /* initialized even when the spawn failed */
        char name[160];
        fprintf(stderr, "redlock: cannot run %s: %s\n",
                tool_printable(argv[0], strlen(argv[0]), name, sizeof(name)), uv_strerror(rc));
        t->exit_code = rc == UV_ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC;
        release_and_close(t);
        return;
    }
    t->child_running = true;
    t->command_ran = true;
}

void run_forward_signal(tool *t, int signum)
{
    if (!t->child_running)
        return;
    char buf[32];
    tool_say(t, "got %s, forwarding it to pid %d", tool_signal_name(signum, buf, sizeof(buf)),
             t->child.pid);
    uv_process_kill(&t->child, signum);
}

static void on_grace_over(uv_timer_t *timer)
{
    tool *t = timer->data;
    if (!t->child_running)
        return;
    char grace[32];
    cli_format_duration(t->args.grace_ms, grace, sizeof(grace));
    tool_warn(t, "pid %d still running %s after SIGTERM, sending SIGKILL", t->child.pid, grace);
    uv_process_kill(&t->child, SIGKILL);
}

void run_on_lost(redlock_lock *lock, int reason, void *data)
{
    (void)lock;
    tool *t = data;
    if (reason == REDLOCK_ECANCELED)
        return; /* our own close, after COMMAND is gone */
    t->lost = true;
    if (!t->child_running)
        return;
    /* REDLOCK_ELOST's own text begins "lock lost: ". */
    tool_warn(t, "%s%s, sending SIGTERM to pid %d",
              reason == REDLOCK_ELOST ? "" : "lock lost: ", redlock_strerror(reason), t->child.pid);
    uv_process_kill(&t->child, SIGTERM);
    if (!t->grace_timer_init) {
        uv_timer_init(&t->loop, &t->grace_timer);
        t->grace_timer.data = t;
        t->grace_timer_init = true;
    }
    uv_timer_start(&t->grace_timer, on_grace_over, t->args.grace_ms, 0);
}
