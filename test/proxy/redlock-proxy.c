/* SPDX-License-Identifier: MIT */
/* redlock-proxy - the fault proxy (proxy.h) as a program, for the bench and for manual runs.
 *
 *   redlock-proxy [--delay-ms D] UPSTREAM_PORT [UPSTREAM_PORT...]
 *
 * Starts one proxy per upstream port, each on a free port of 127.0.0.1 forwarding to
 * 127.0.0.1:UPSTREAM_PORT with a one-way delay of D ms (default 0) in each direction. Prints
 * one line "PROXY_PORT UPSTREAM_PORT" per proxy, in argument order, then "ready".
 *
 * Then reads control lines on stdin, each applied to every proxy before the answer "ok" (or
 * "error: ..." for a line it does not understand) is printed:
 *   delay N      one-way delay of N ms from now on
 *   pass         forward (and listen again after refuse)
 *   blackhole    keep connections open, hold everything until pass (nothing is lost)
 *   refuse       stop listening: new connects get ECONNREFUSED
 *   close        close every proxied connection (FIN)
 *   reset        reset every proxied connection (RST)
 *   quit         exit
 * Exits 0 on "quit", end of stdin, SIGTERM or SIGINT, after closing everything; 2 on bad
 * arguments, 1 if a proxy cannot start. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proxy.h"

#define MAX_PROXIES 64

static int signal_pipe[2] = {-1, -1}; /* written by the signal handler, polled by main */

static void on_signal(int signo)
{
    int saved = errno;
    unsigned char b = (unsigned char)signo;
    ssize_t n = write(signal_pipe[1], &b, 1);
    (void)n;
    errno = saved;
}

static int usage(void)
{
    fprintf(stderr, "usage: redlock-proxy [--delay-ms D] UPSTREAM_PORT [UPSTREAM_PORT...]\n");
    return 2;
}

static bool parse_uint(const char *s, unsigned long max, unsigned long *out)
{
    if (*s < '0' || *s > '9')
        return false;
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > max)
        return false;
    *out = v;
    return true;
}

static int install_signals(void)
{
    if (pipe(signal_pipe) != 0)
        return -1;
    for (int i = 0; i < 2; i++) {
        fcntl(signal_pipe[i], F_SETFD, FD_CLOEXEC);
        fcntl(signal_pipe[i], F_SETFL, O_NONBLOCK);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0)
        return -1;
    signal(SIGPIPE, SIG_IGN); /* a reader of stdout that went away is not fatal */
    return 0;
}

typedef struct proxies {
    proxy *list[MAX_PROXIES];
    int n;
} proxies;

/* Apply one control line. Returns false on "quit". */
static bool control(proxies *ps, char *line)
{
    size_t len = strlen(line);
    while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
        line[--len] = '\0';
    while (*line == ' ' || *line == '\t')
        line++;
    if (*line == '\0')
        return true;
    if (strcmp(line, "quit") == 0)
        return false;

    bool ok = true;
    if (strncmp(line, "delay ", 6) == 0) {
        unsigned long ms;
        ok = parse_uint(line + 6, UINT_MAX, &ms);
        for (int i = 0; ok && i < ps->n; i++)
            proxy_set_delay_ms(ps->list[i], (unsigned)ms);
    } else if (strcmp(line, "pass") == 0 || strcmp(line, "blackhole") == 0 ||
               strcmp(line, "refuse") == 0) {
        proxy_mode mode = PROXY_REFUSE;
        if (line[0] == 'p')
            mode = PROXY_PASS;
        else if (line[0] == 'b')
            mode = PROXY_BLACKHOLE;
        for (int i = 0; i < ps->n; i++)
            proxy_set_mode(ps->list[i], mode);
    } else if (strcmp(line, "close") == 0) {
        for (int i = 0; i < ps->n; i++)
            proxy_close_all(ps->list[i]);
    } else if (strcmp(line, "reset") == 0) {
        for (int i = 0; i < ps->n; i++)
            proxy_reset_all(ps->list[i]);
    } else {
        ok = false;
    }
    if (ok)
        printf("ok\n");
    else
        printf("error: unknown command: %s\n", line);
    fflush(stdout);
    return true;
}

/* Read control lines until quit, end of stdin or a signal. */
static void serve(proxies *ps)
{
    char buf[4096];
    size_t used = 0;
    for (;;) {
        struct pollfd fds[2] = {{.fd = STDIN_FILENO, .events = POLLIN},
                                {.fd = signal_pipe[0], .events = POLLIN}};
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            perror("redlock-proxy: poll");
            return;
        }
        if (fds[1].revents != 0)
            return;
        if (fds[0].revents == 0)
            continue;
        ssize_t n = read(STDIN_FILENO, buf + used, sizeof(buf) - 1 - used);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            return; /* end of stdin (an unterminated last line is ignored) or an error */
        used += (size_t)n;
        buf[used] = '\0';
        char *start = buf, *nl;
        while ((nl = strchr(start, '\n')) != NULL) {
            *nl = '\0';
            if (!control(ps, start))
                return;
            start = nl + 1;
        }
        used = (size_t)(buf + used - start);
        memmove(buf, start, used);
        if (used == sizeof(buf) - 1) {
            fprintf(stderr, "redlock-proxy: control line too long\n");
            used = 0;
        }
    }
}

int main(int argc, char **argv)
{
    unsigned long delay_ms = 0;
    unsigned long ports[MAX_PROXIES];
    int n_ports = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--delay-ms") == 0 && i + 1 < argc) {
            if (!parse_uint(argv[++i], UINT_MAX, &delay_ms))
                return usage();
        } else if (strncmp(arg, "--delay-ms=", 11) == 0) {
            if (!parse_uint(arg + 11, UINT_MAX, &delay_ms))
                return usage();
        } else if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            usage();
            return 0;
        } else if (n_ports < MAX_PROXIES && parse_uint(arg, 65535, &ports[n_ports]) &&
                   ports[n_ports] > 0) {
            n_ports++;
        } else {
            return usage();
        }
    }
    if (n_ports == 0)
        return usage();
    if (install_signals() != 0) {
        perror("redlock-proxy: signals");
        return 1;
    }

    proxies ps = {.n = 0};
    int status = 0;
    for (int i = 0; i < n_ports; i++) {
        proxy *p = proxy_start(0, "127.0.0.1", (int)ports[i]);
        if (p == NULL) {
            status = 1;
            break;
        }
        ps.list[ps.n++] = p;
        proxy_set_delay_ms(p, (unsigned)delay_ms);
    }
    if (status == 0) {
        for (int i = 0; i < ps.n; i++)
            printf("%d %lu\n", proxy_port(ps.list[i]), ports[i]);
        printf("ready\n");
        fflush(stdout);
        serve(&ps);
    }
    for (int i = 0; i < ps.n; i++)
        proxy_stop(ps.list[i]);
    return status;
}
