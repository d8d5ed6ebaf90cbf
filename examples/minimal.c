/* SPDX-License-Identifier: MIT */
/* minimal.c - lock, work, release: the README's first example. */
#include <redlock.h>
#include <stdio.h>

static void work(redlock_sync_lock *lock, void *job) /* runs holding the lock, kept alive */
{
    printf("%s: locked, token %s\n", (const char *)job, redlock_sync_lock_token(lock, NULL));
    /* ... the work; stop at once when redlock_sync_lock_lost(lock) says true ... */
}

int main(int argc, char **argv) /* minimal redis://10.0.1.5:6379 redis://10.0.2.5:6379 ... */
{
    char job[] = "nightly-report", err[256];
    redlock_sync *sync;
    if (redlock_sync_new((const char *const *)argv + 1, (unsigned)argc - 1, NULL, &sync, err,
                         sizeof(err)) != 0)
        return fprintf(stderr, "%s\n", err), 2;
    redlock_hold_end end;
    int rc = redlock_sync_with(sync, job, REDLOCK_STRLEN, 0, NULL, work, job, &end, NULL);
    printf("%s: %s (%s)\n", job, redlock_hold_end_name(end), redlock_strerror(rc));
    redlock_sync_free(sync);
    return rc != 0;
}
