/* SPDX-License-Identifier: MIT */
/* ports.c - loopback ports for test servers, shared out among all the test processes of a
 * machine (ports.h).
 *
 * A port the kernel hands out for bind(127.0.0.1:0) is free only at that moment: a server the
 * fixture kills and starts again on the same port (a node that restarts) leaves the port unbound
 * in between, and another test process running beside it (meson's parallel tests, the mutants
 * beside the valgrind pass) may be handed that very port for a server of its own, or for a
 * socket's local end. The restart then fails, or the first test's client reaches the other
 * test's server.
 *
 * So the ports come from below the kernel's ephemeral range (ip_local_port_range), which neither
 * bind(port 0) nor connect() ever hands out, and each is claimed in a file named after it in a
 * directory of the user's, /tmp/redlock-fixture-ports-UID, holding the claiming process's pid.
 * A claim or a release happens under an flock of the directory's .lock file, so two processes
 * never claim one port; a file whose process is gone (killed) is a free port. A port something
 * else is bound to is skipped. Where the range cannot be had (no such directory, a range that
 * starts too low), the caller falls back to asking the kernel. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* kill */
#endif

#include "ports.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RANGE_SIZE 10000
#define LOWEST_PORT 1024
#define MAX_TRIES 500

static bool port_range(int *first, int *count)
{
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    int lo = 32768, hi = 60999; /* Linux's default, should the file be missing */
    if (f != NULL) {
        if (fscanf(f, "%d %d", &lo, &hi) != 2)
            lo = hi = 0;
        fclose(f);
    }
    if (lo - RANGE_SIZE >= LOWEST_PORT) {
        *first = lo - RANGE_SIZE;
        *count = RANGE_SIZE;
        return true;
    }
    if (hi > 0 && 65535 - hi >= RANGE_SIZE / 5) {
        *first = hi + 1;
        *count = 65535 - hi;
        return true;
    }
    return false;
}

/* The directory, made if missing; it must be the user's own and no one else's to write. */
static bool claims_dir(char *dir, size_t size)
{
    snprintf(dir, size, "/tmp/redlock-fixture-ports-%u", (unsigned)getuid());
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return false;
    struct stat st;
    return lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid() &&
           (st.st_mode & 0022) == 0;
}

static int lock_dir(const char *dir)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    while (flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR) {
            close(fd);
            return -1;
        }
    }
    return fd; /* closing it unlocks */
}

/* The pid in port's claim file, 0 when there is none (or it cannot be read). */
static pid_t claim_owner(const char *dir, int port)
{
    char path[256], text[32] = {0};
    snprintf(path, sizeof(path), "%s/%d", dir, port);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t got = read(fd, text, sizeof(text) - 1);
    close(fd);
    return got > 0 ? (pid_t)atol(text) : 0;
}

static bool alive(pid_t pid)
{
    return kill(pid, 0) == 0 || errno == EPERM;
}

static bool bindable(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)); /* as redis-server binds */
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = bind(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0;
    close(fd);
    return ok;
}

static bool write_claim(const char *dir, int port)
{
    char path[256], text[32];
    snprintf(path, sizeof(path), "%s/%d", dir, port);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return false;
    int len = snprintf(text, sizeof(text), "%ld\n", (long)getpid());
    bool ok = write(fd, text, (size_t)len) == len;
    close(fd);
    return ok;
}

int fixture_port_claim(void)
{
    int first, count;
    char dir[128];
    if (!port_range(&first, &count) || !claims_dir(dir, sizeof(dir)))
        return -1;
    int lock = lock_dir(dir);
    if (lock < 0)
        return -1;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    unsigned start = (unsigned)getpid() * 2654435761u ^ (unsigned)ts.tv_nsec;
    int port = -1;
    for (int i = 0; i < MAX_TRIES && port < 0; i++) {
        int candidate = first + (int)((start + (unsigned)i * 7919u) % (unsigned)count);
        pid_t owner = claim_owner(dir, candidate);
        if (owner != 0 && alive(owner))
            continue; /* ours or a live process's (a reused pid: skipped all the same) */
        if (bindable(candidate) && write_claim(dir, candidate))
            port = candidate;
    }
    close(lock);
    return port;
}

void fixture_port_release(int port)
{
    char dir[128];
    if (port <= 0 || !claims_dir(dir, sizeof(dir)))
        return;
    int lock = lock_dir(dir);
    if (lock < 0)
        return;
    if (claim_owner(dir, port) == getpid()) {
        char path[256];
        snprintf(path, sizeof(path), "%s/%d", dir, port);
        unlink(path);
    }
    close(lock);
}
