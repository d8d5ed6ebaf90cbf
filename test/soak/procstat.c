/* SPDX-License-Identifier: MIT */
/* procstat.c - see procstat.h. */
#include "procstat.h"

#include <dirent.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define PS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PS_ASAN 1
#endif
#endif

#ifdef PS_ASAN
/* From <sanitizer/allocator_interface.h>, which gcc 12 does not install. */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

int ps_fd_count(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    int self = dirfd(d);
    int n = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        if (ent->d_name[0] == '.')
            continue;
        if (atoi(ent->d_name) != self)
            n++;
    }
    closedir(d);
    return n;
}

void ps_fd_dump(FILE *out, const char *prefix)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL) {
        fprintf(out, "%scannot read /proc/self/fd\n", prefix);
        return;
    }
    int self = dirfd(d);
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        if (ent->d_name[0] == '.' || atoi(ent->d_name) == self)
            continue;
        char path[300], target[256];
        snprintf(path, sizeof(path), "/proc/self/fd/%s", ent->d_name);
        ssize_t len = readlink(path, target, sizeof(target) - 1);
        target[len > 0 ? len : 0] = '\0';
        fprintf(out, "%sfd %s -> %s\n", prefix, ent->d_name, target);
    }
    closedir(d);
}

long ps_rss_kib(void)
{
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[128];
    ssize_t got = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (got <= 0)
        return -1;
    buf[got] = '\0';
    unsigned long size_pages = 0, resident_pages = 0;
    if (sscanf(buf, "%lu %lu", &size_pages, &resident_pages) != 2)
        return -1;
    return (long)(resident_pages * (unsigned long)sysconf(_SC_PAGESIZE) / 1024);
}

long ps_rss_anon_kib(void)
{
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[4096];
    ssize_t got = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (got <= 0)
        return -1;
    buf[got] = '\0';
    const char *at = strstr(buf, "\nRssAnon:");
    long kib = -1;
    if (at == NULL || sscanf(at + 1, "RssAnon: %ld kB", &kib) != 1)
        return -1;
    return kib;
}

long long ps_heap_bytes(void)
{
#if defined(PS_ASAN)
    return (long long)__sanitizer_get_current_allocated_bytes();
#elif defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 mi = mallinfo2();
    return (long long)(mi.uordblks + mi.hblkhd);
#else
    return -1;
#endif
}

bool ps_asan(void)
{
#ifdef PS_ASAN
    return true;
#else
    return false;
#endif
}

uint64_t ps_cpu_us(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (uint64_t)ru.ru_utime.tv_sec * 1000000 + (uint64_t)ru.ru_utime.tv_usec +
           (uint64_t)ru.ru_stime.tv_sec * 1000000 + (uint64_t)ru.ru_stime.tv_usec;
}
