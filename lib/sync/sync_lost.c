/* SPDX-License-Identifier: MIT */
/* sync_lost.c - how the caller's threads learn that a blocking lock was lost without a callback on
 * the library's thread: the handle's lost flag (its status, an atomic) and its loss descriptor.
 *
 * The descriptor is made on the first redlock_sync_lock_fd, by the caller's thread, under the
 * sync client's mutex (two threads asking at once get one); the loop thread, which sets the
 * status on a loss, writes to it. Both orders are covered without a lock on the loop thread's
 * side: the loop thread stores the status and then reads the descriptor, the maker stores the
 * descriptor and then reads the status (sequentially consistent atomics), so at least one of them
 * sees the other's store and writes. A second write is harmless: readable is readable. Calls
 * nothing of the sync client: sync.c calls it. */
#include "sync_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/eventfd.h>
#endif

/* Make lost_fd readable: eventfd's counter, or a byte in the pipe (full: readable already). */
static void fd_poke(int wfd)
{
    ssize_t n;
#ifdef __linux__
    uint64_t one = 1;
    do
        n = write(wfd, &one, sizeof(one));
    while (n < 0 && errno == EINTR);
#else
    char one = 1;
    do
        n = write(wfd, &one, 1);
    while (n < 0 && errno == EINTR);
#endif
    (void)n; /* EAGAIN: the counter (or the pipe) is full, so readable already */
}

void redlock__sync_lock_signal(redlock_sync_lock *sl)
{
    if (atomic_load(&sl->lost_fd) >= 0)
        fd_poke(atomic_load(&sl->lost_wfd));
}

void redlock__sync_lock_fd_close(redlock_sync_lock *sl)
{
    int fd = atomic_load(&sl->lost_fd);
    int wfd = atomic_load(&sl->lost_wfd);
    if (fd >= 0)
        close(fd);
    if (wfd >= 0 && wfd != fd)
        close(wfd);
}

/* A nonblocking, close-on-exec eventfd (or pipe): fds[0] to read, fds[1] to write. */
static int fd_make(int fds[2])
{
#ifdef __linux__
    int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    fds[0] = fds[1] = fd;
    return fd >= 0 ? 0 : -1;
#else
    if (pipe(fds) != 0)
        return -1;
    for (int i = 0; i < 2; i++) {
        if (fcntl(fds[i], F_SETFD, FD_CLOEXEC) != 0 ||
            fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK) != 0) {
            close(fds[0]);
            close(fds[1]);
            return -1;
        }
    }
    return 0;
#endif
}

int redlock_sync_lock_fd(redlock_sync_lock *lock)
{
    if (lock == NULL)
        return -1;
    int fd = atomic_load(&lock->lost_fd);
    if (fd >= 0)
        return fd;
    uv_mutex_lock(lock->mutex);
    fd = atomic_load(&lock->lost_fd);
    int fds[2];
    if (fd < 0 && fd_make(fds) == 0) {
        atomic_store(&lock->lost_wfd, fds[1]);
        atomic_store(&lock->lost_fd, fds[0]); /* from here the loop thread writes on a loss */
        fd = fds[0];
        if (redlock__sync_status_lost(atomic_load(&lock->status)))
            fd_poke(fds[1]); /* lost before: the loop thread may not have seen the descriptor */
    }
    uv_mutex_unlock(lock->mutex);
    return fd;
}

bool redlock_sync_lock_lost(const redlock_sync_lock *lock)
{
    return lock != NULL &&
           redlock__sync_status_lost(atomic_load(&((redlock_sync_lock *)lock)->status));
}
