/* SPDX-License-Identifier: MIT */
/* async_lock.c - take a lock over N Redis masters, print it, release it, exit; with the client's
 * log on stderr and every node's state and the client's counters at the end.
 *
 *   async_lock redis://10.0.1.5:6379 redis://10.0.2.5:6379 redis://10.0.3.5:6379
 *
 * Exit status: 0 when the lock was taken and released, 1 when it was not, 2 on bad usage. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>

#include <redlock.h>
#include <uv.h>

typedef struct app {
    redlock_client *client;
    int exit_code;
} app;

/* The client's log: connections made and lost, failed attempts, refused handshakes, slow
 * rounds. It runs inside the library, so it only prints (and may read the client's state). The
 * URL comes with its password redacted. */
static void on_log(redlock_client *client, redlock_log_level level, const char *url,
                   const char *message, void *data)
{
    (void)client;
    (void)data;
    fprintf(stderr, "[redlock %s] %s%s%s\n", redlock_log_level_name(level), url != NULL ? url : "",
            url != NULL ? ": " : "", message);
}

/* What a metrics exporter would read every second. */
static void print_state(redlock_client *client)
{
    for (unsigned i = 0; i < redlock_client_node_count(client); i++) {
        redlock_node_info info;
        redlock_node_info_init(&info);
        if (redlock_client_node_info(client, i, &info) != 0)
            continue;
        printf("node %s: %s, rtt %llu us, %llu requests, %llu errors, %llu timeouts%s%s\n",
               info.url, redlock_node_state_name(info.state), (unsigned long long)info.rtt_us,
               (unsigned long long)info.requests, (unsigned long long)info.errors,
               (unsigned long long)info.timeouts,
               info.last_error[0] != '\0' ? ", last error: " : "", info.last_error);
    }
    redlock_stats st;
    redlock_stats_init(&st);
    if (redlock_client_stats(client, &st) == 0)
        printf("rounds: %llu won, %llu busy, %llu broken; releases: %llu ok, %llu lapsed\n",
               (unsigned long long)st.rounds_won, (unsigned long long)st.rounds_busy,
               (unsigned long long)st.rounds_broken, (unsigned long long)st.releases_ok,
               (unsigned long long)st.releases_lapsed);
}

/* A release is decided at the quorum: the other nodes' deletes go on, and the close waits for
 * them. */
static void on_released(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    app *a = data;
    printf("released: %s (deleted on %u of %u nodes when decided)\n", redlock_strerror(status),
           result->votes_yes, result->n_nodes);
    a->exit_code = status != 0;
    print_state(a->client);
    redlock_lock_free(lock);                     /* freed once this callback returns */
    redlock_client_close(a->client, NULL, NULL); /* frees the client when the loop runs on */
}

static void on_acquired(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    app *a = data;
    if (status != 0) { /* lock is NULL: say why, node by node */
        fprintf(stderr, "lock failed after %u attempts: %s\n", result->attempts,
                redlock_strerror(status));
        for (unsigned i = 0; i < result->n_nodes; i++) {
            const redlock_node_result *node = &result->nodes[i];
            fprintf(stderr, "  %s: %s%s%s\n", node->url, redlock_vote_name(node->vote),
                    node->error != NULL ? ", " : "", node->error != NULL ? node->error : "");
        }
        print_state(a->client);
        redlock_client_close(a->client, NULL, NULL);
        return;
    }
    printf("locked, token %s, valid for %llu ms\n", redlock_lock_token(lock, NULL),
           (unsigned long long)redlock_lock_validity_ms(lock));
    /* ... work that must finish before redlock_lock_deadline_us(lock) ... */
    if (redlock_release(lock, on_released, a) != 0)
        redlock_client_close(a->client, NULL, NULL);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s redis://host:port ... (one URL per Redis master)\n", argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN); /* a write to a node that just died must not kill the process */
    uv_loop_t *loop = uv_default_loop();
    app a = {NULL, 1};
    redlock_options opts;
    redlock_options_init(&opts);
    opts.log_fn = on_log;
    char err[256];
    int rc = redlock_client_new(loop, (const char *const *)(argv + 1), (unsigned)(argc - 1), &opts,
                                &a.client, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "%s: %s\n", redlock_err_name(rc), err);
        return 2;
    }
    rc = redlock_acquire(a.client, "my-resource", REDLOCK_STRLEN, 0, NULL, on_acquired, &a);
    if (rc != 0) {
        fprintf(stderr, "acquire: %s\n", redlock_client_last_error(a.client));
        redlock_client_close(a.client, NULL, NULL);
    }
    uv_run(loop, UV_RUN_DEFAULT); /* returns once the client is closed */
    uv_loop_close(loop);
    return a.exit_code;
}
