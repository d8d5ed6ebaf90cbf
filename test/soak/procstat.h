/* SPDX-License-Identifier: MIT */
/* procstat.h - what a long run must not grow, read from the process itself: open descriptors,
 * resident memory, live heap, CPU time. Linux only (/proc/self). Every function may be called
 * from any thread; none allocates on the heap, so reading a figure does not move it. */
#ifndef REDLOCK_TEST_PROCSTAT_H
#define REDLOCK_TEST_PROCSTAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* How many descriptors the process has open: the entries of /proc/self/fd, not counting the one
 * used to read that directory. -1 if /proc cannot be read. */
int ps_fd_count(void);

/* Print every open descriptor and what it points at ("socket:[123]", "anon_inode:[eventpoll]",
 * a path) to out, one per line, each prefixed by prefix. For failure messages. */
void ps_fd_dump(FILE *out, const char *prefix);

/* Resident set size in KiB (/proc/self/statm), -1 on error. */
long ps_rss_kib(void);

/* The anonymous part of the resident set in KiB (RssAnon in /proc/self/status: heap, stacks,
 * anonymous mappings), -1 on error. The rest, RssFile, is pages of the program and its
 * libraries, which grows once as code runs for the first time (a rarely taken path late in a
 * long run faults in its page) and says nothing about leaks. */
long ps_rss_anon_kib(void);

/* Bytes the process has allocated and not freed, as the allocator counts them (ASan's allocator,
 * or glibc's mallinfo2), -1 when the build cannot tell. Unlike the RSS it does not move with
 * pages first touched or left fragmented. Under ASan the RSS also holds the quarantine of freed
 * blocks (up to 256 MiB, filled over minutes) and shadow memory, which grow with the work done
 * and say nothing about leaks; this figure does not. */
long long ps_heap_bytes(void);

/* True when built with AddressSanitizer. */
bool ps_asan(void);

/* User + system CPU time of the whole process so far, in microseconds (getrusage). */
uint64_t ps_cpu_us(void);

#endif
