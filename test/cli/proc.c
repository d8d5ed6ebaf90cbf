/* SPDX-License-Identifier: MIT */
/* proc.c - run the redlock tool as a child process (see proc.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pipe2, prctl */
#endif

#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void child_env(const char *const *env)
{
    if (env == NULL)
        return;
    for (const char *const *e = env; *e != NULL; e++) {
        const char *eq = strchr(*e, '=');
        if (eq == NULL) {
            unsetenv(*e);
            continue;
        }
        char name[256];
        size_t n = (size_t)(eq - *e);
        if (n >= sizeof(name))
            _exit(126);
        memcpy(name, *e, n);
        name[n] = '\0';
        setenv(name, eq + 1, 1);
    }
}

void proc_start(proc *p, const char *program, const char *const *argv, const char *const *env)
{
    memset(p, 0, sizeof(*p));
    p->status = -1;
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
        perror("pipe2");
        abort();
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        abort();
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(125);
        int null_fd = open("/dev/null", O_RDONLY);
        if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0)
            _exit(125);
        /* The test may have signals ignored or blocked; the tool starts from defaults. Ignored
         * ones are inherited across exec: a suite started in the background by a script has
         * SIGINT and SIGQUIT ignored, and a shell loop run from it would then outlive Ctrl-C. */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        for (int sig = 1; sig < NSIG; sig++)
            if (sig != SIGKILL && sig != SIGSTOP)
                signal(sig, SIG_DFL);
        child_env(env);
        execv(program, (char *const *)argv);
        fprintf(stderr, "exec %s: %s\n", program, strerror(errno));
        _exit(124);
    }
    close(out[1]);
    close(err[1]);
    p->pid = pid;
    p->out_fd = out[0];
    p->err_fd = err[0];
    fcntl(p->out_fd, F_SETFL, O_NONBLOCK);
    fcntl(p->err_fd, F_SETFL, O_NONBLOCK);
    p->out = calloc(1, 1);
    p->err = calloc(1, 1);
}

/* Read what is there; at end of file close the pipe (poll then skips it). */
static void drain(int *fd, char **buf, size_t *len)
{
    if (*fd < 0)
        return;
    char chunk[4096];
    for (;;) {
        ssize_t n = read(*fd, chunk, sizeof(chunk));
        if (n == 0) {
            close(*fd);
            *fd = -1;
            return;
        }
        if (n < 0)
            return;
        *buf = realloc(*buf, *len + (size_t)n + 1);
        if (*buf == NULL)
            abort();
        memcpy(*buf + *len, chunk, (size_t)n);
        *len += (size_t)n;
        (*buf)[*len] = '\0';
    }
}

static void reap(proc *p)
{
    if (p->exited)
        return;
    int st;
    pid_t r;
    do {
        r = waitpid(p->pid, &st, WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == p->pid) {
        p->exited = true;
        p->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        p->term_signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    }
}

/* One step: wait up to slice_ms for output, read it, check for exit. */
static void step(proc *p, int slice_ms)
{
    struct pollfd fds[2] = {{p->out_fd, POLLIN, 0}, {p->err_fd, POLLIN, 0}};
    if (p->out_fd < 0 && p->err_fd < 0) {
        struct timespec ts = {0, (long)slice_ms * 1000000};
        nanosleep(&ts, NULL);
    } else {
        poll(fds, 2, slice_ms);
    }
    drain(&p->out_fd, &p->out, &p->out_len);
    drain(&p->err_fd, &p->err, &p->err_len);
    reap(p);
    if (p->exited) {
        /* Everything the tool wrote is in the pipes by now. */
        drain(&p->out_fd, &p->out, &p->out_len);
        drain(&p->err_fd, &p->err, &p->err_len);
    }
}

bool proc_wait(proc *p, int timeout_ms)
{
    long long deadline = now_ms() + timeout_ms;
    while (!p->exited) {
        long long left = deadline - now_ms();
        if (left <= 0)
            break;
        step(p, left < 10 ? (int)left : 10);
    }
    return p->exited;
}

bool proc_wait_for_output(proc *p, const char *needle, bool from_stderr, int timeout_ms)
{
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        if (strstr(from_stderr ? p->err : p->out, needle) != NULL)
            return true;
        long long left = deadline - now_ms();
        if (left <= 0 || p->exited)
            return strstr(from_stderr ? p->err : p->out, needle) != NULL;
        step(p, left < 10 ? (int)left : 10);
    }
}

void proc_signal(proc *p, int sig)
{
    reap(p);
    if (!p->exited)
        kill(p->pid, sig);
}

void proc_free(proc *p)
{
    if (p->pid > 0 && !p->exited) {
        kill(p->pid, SIGKILL);
        int st;
        while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR) {
        }
        p->exited = true;
    }
    if (p->pid > 0 && p->out_fd >= 0)
        close(p->out_fd);
    if (p->pid > 0 && p->err_fd >= 0)
        close(p->err_fd);
    free(p->out);
    free(p->err);
    memset(p, 0, sizeof(*p));
}

unsigned text_lines(const char *text)
{
    unsigned n = 0;
    const char *p = text;
    while (*p != '\0') {
        const char *nl = strchr(p, '\n');
        n++;
        if (nl == NULL)
            break;
        p = nl + 1;
    }
    return n;
}
