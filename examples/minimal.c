/* SPDX-License-Identifier: MIT */
/* minimal.c - lock, work, release, exit: the README's example. */
#define _POSIX_C_SOURCE 200809L
#include <redlock.h>
#include <signal.h>
#include <stdio.h>
#include <uv.h>

static int exit_code = 1;

static void on_released(redlock_lock *lock, int status, const redlock_result *res, void *data)
{
    printf("released on %u of %u nodes\n", res->votes_yes, res->n_nodes);
    exit_code = status != 0;
    redlock_client_close(redlock_lock_client(lock), NULL, NULL);
}

static void on_acquired(redlock_lock *lock, int status, const redlock_result *res, void *data)
{
    if (status != 0) { /* busy (REDLOCK_EBUSY) or broken (REDLOCK_ENOQUORUM): see each node */
        for (unsigned i = 0; i < res->n_nodes; i++)
            fprintf(stderr, "%s: %s %s\n", res->nodes[i].url, redlock_vote_name(res->nodes[i].vote),
                    res->nodes[i].error != NULL ? res->nodes[i].error : "");
        fprintf(stderr, "not locked: %s\n", redlock_strerror(status));
        redlock_client_close(data, NULL, NULL);
        return;
    }
    printf("locked: token %s, valid for %llu ms\n", redlock_lock_token(lock, NULL),
           (unsigned long long)redlock_lock_validity_ms(lock));
    /* ... the work, finished before redlock_lock_deadline_us(lock) ... */
    if (redlock_release(lock, on_released, NULL) != 0)
        redlock_client_close(data, NULL, NULL);
}

int main(int argc, char **argv) /* minimal redis://10.0.1.5:6379 redis://10.0.2.5:6379 ... */
{
    redlock_client *client;
    char err[256];
    signal(SIGPIPE, SIG_IGN);
    if (redlock_client_new(uv_default_loop(), (const char *const *)argv + 1, (unsigned)argc - 1,
                           NULL, &client, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    redlock_acquire(client, "my-resource", 11, 0, NULL, on_acquired, client);
    uv_run(uv_default_loop(), UV_RUN_DEFAULT); /* returns once the client is closed */
    return exit_code;
}
