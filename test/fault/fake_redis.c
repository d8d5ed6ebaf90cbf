/* SPDX-License-Identifier: MIT */
/* fake_redis.c - see fake_redis.h. One thread, poll(2), blocking-free sockets. */
#include "fake_redis.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "scripts.h"

#define MAX_CONNS 32

typedef struct fake_conn {
    int fd; /* -1 when free */
    char *buf;
    size_t len, cap;
    bool trickling; /* FAKE_TRICKLE_BULK: a bulk string is being sent, a little at a time */
} fake_conn;

#define TRICKLE_BYTES 4096
#define TRICKLE_EVERY_MS 10

struct fake_redis {
    fake_mode mode;
    char error_text[200];
    int listen_fd;
    int port;
    int wake[2]; /* a byte on wake[1] stops the thread */
    pthread_t thread;
    atomic_uint commands;
    atomic_uint scripts;
    char run_id[41]; /* what INFO says: distinct per fake */
    fake_conn conns[MAX_CONNS];
};

static void conn_close(fake_conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    free(c->buf);
    c->buf = NULL;
    c->len = c->cap = 0;
    c->trickling = false;
}

static void send_all(int fd, const char *data, size_t len)
{
    /* Replies are tiny and the client reads them at once: a short write is not expected, and a
     * failed one only means the client went away. */
    while (len > 0) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        data += n;
        len -= (size_t)n;
    }
}

/* Parse one "<prefix><number>\r\n" at p (end e). Returns the position after it, NULL if
 * incomplete, or e + 1 if malformed. */
static const char *parse_line_num(const char *p, const char *e, char prefix, long *out)
{
    if (p >= e)
        return NULL;
    if (*p != prefix)
        return e + 1;
    const char *nl = memchr(p, '\n', (size_t)(e - p));
    if (nl == NULL)
        return NULL;
    *out = strtol(p + 1, NULL, 10);
    return nl + 1;
}

/* One complete command at the start of buf: its length in bytes and its name (first argument,
 * up to 15 bytes). Returns 0 if incomplete, -1 if malformed, else the length. */
static long parse_command(const char *buf, size_t len, char name[16])
{
    const char *p = buf, *e = buf + len;
    long argc = 0;
    p = parse_line_num(p, e, '*', &argc);
    if (p == NULL)
        return 0;
    if (p > e || argc < 1)
        return -1;
    name[0] = '\0';
    for (long i = 0; i < argc; i++) {
        long arg_len = 0;
        p = parse_line_num(p, e, '$', &arg_len);
        if (p == NULL)
            return 0;
        if (p > e || arg_len < 0)
            return -1;
        if ((size_t)(e - p) < (size_t)arg_len + 2)
            return 0;
        if (i == 0) {
            size_t n = (size_t)arg_len < 15 ? (size_t)arg_len : 15;
            memcpy(name, p, n);
            name[n] = '\0';
        }
        p += arg_len + 2;
    }
    return (long)(p - buf);
}

/* The reply of a real server to the SCRIPT LOAD command cmd: the SHA1 of the script it carries. */
static void answer_script_load(fake_conn *c, const char *cmd, size_t cmd_len)
{
    const redlock__script *scripts[3] = {&redlock__script_extend, &redlock__script_release,
                                         &redlock__script_inspect};
    for (int i = 0; i < 3; i++) {
        if (memmem(cmd, cmd_len, scripts[i]->source, scripts[i]->source_len) != NULL) {
            char reply[64];
            int n = snprintf(reply, sizeof(reply), "$40\r\n%s\r\n", scripts[i]->sha1);
            send_all(c->fd, reply, (size_t)n);
            return;
        }
    }
    const char *unknown = "-ERR fake: unknown script\r\n";
    send_all(c->fd, unknown, strlen(unknown));
}

/* Answer one command (cmd_len bytes at cmd, named name). Returns false when the connection must
 * be closed now. */
static bool answer(fake_redis *f, fake_conn *c, const char *name, const char *cmd, size_t cmd_len)
{
    char reply[256];
    bool is_script = strcasecmp(name, "SCRIPT") == 0 || strcasecmp(name, "INFO") == 0;
    atomic_fetch_add(is_script ? &f->scripts : &f->commands, 1);
    if (f->mode == FAKE_ERROR) {
        int n = snprintf(reply, sizeof(reply), "-%s\r\n", f->error_text);
        send_all(c->fd, reply, (size_t)n);
        return true;
    }
    if (is_script && f->mode == FAKE_BAD_HANDSHAKE) {
        const char *sha = "$40\r\n0123456789abcdef0123456789abcdef01234567\r\n";
        send_all(c->fd, sha, strlen(sha));
        return true;
    }
    if (is_script && strcasecmp(name, "INFO") == 0) {
        int n = snprintf(reply, sizeof(reply), "# Server\r\nrun_id:%s\r\n", f->run_id);
        char head[32];
        int h = snprintf(head, sizeof(head), "$%d\r\n", n);
        send_all(c->fd, head, (size_t)h);
        send_all(c->fd, reply, (size_t)n);
        send_all(c->fd, "\r\n", 2);
        return true;
    }
    if (is_script) {
        answer_script_load(c, cmd, cmd_len);
        return true;
    }
    switch (f->mode) {
    case FAKE_GARBAGE: {
        const char *junk = "this is not RESP at all\r\n";
        send_all(c->fd, junk, strlen(junk));
        return true;
    }
    case FAKE_HALF_REPLY: {
        /* A bulk string of 40 bytes, of which 7 ever come. */
        const char *half = "$40\r\nhalf-a-";
        send_all(c->fd, half, strlen(half));
        return false;
    }
    case FAKE_WRONG_TYPE: {
        const char *r = strcasecmp(name, "SET") == 0 ? ":42\r\n" : "+OK\r\n";
        send_all(c->fd, r, strlen(r));
        return true;
    }
    case FAKE_BAD_HANDSHAKE: {
        const char *ok = "+OK\r\n";
        send_all(c->fd, ok, strlen(ok));
        return true;
    }
    case FAKE_HUGE_ARRAY: {
        static const char head[] = "*2147483647\r\n", one[] = ":1\r\n";
        char *r = malloc(sizeof(head) - 1 + 100000 * (sizeof(one) - 1));
        if (r == NULL)
            return false;
        size_t n = sizeof(head) - 1;
        memcpy(r, head, n);
        for (int i = 0; i < 100000; i++, n += sizeof(one) - 1)
            memcpy(r + n, one, sizeof(one) - 1);
        send_all(c->fd, r, n); /* fails once the client has closed: then it is gone anyway */
        free(r);
        return true;
    }
    case FAKE_TRICKLE_BULK: {
        const char *head = "$1000000000\r\n";
        send_all(c->fd, head, strlen(head));
        c->trickling = true;
        return true;
    }
    case FAKE_ERROR:
        break;
    }
    return true;
}

/* A little more of every trickled bulk string, never blocking: a client that does not read gets
 * nothing more meanwhile. */
static void trickle(fake_redis *f)
{
    static const char chunk[TRICKLE_BYTES] = {0};
    for (int i = 0; i < MAX_CONNS; i++) {
        fake_conn *c = &f->conns[i];
        if (c->fd < 0 || !c->trickling)
            continue;
        if (send(c->fd, chunk, sizeof(chunk), MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN &&
            errno != EINTR)
            conn_close(c);
    }
}

static void on_readable(fake_redis *f, fake_conn *c)
{
    if (c->cap - c->len < 4096) {
        size_t cap = c->cap == 0 ? 16384 : c->cap * 2;
        char *buf = realloc(c->buf, cap);
        if (buf == NULL) {
            conn_close(c);
            return;
        }
        c->buf = buf;
        c->cap = cap;
    }
    ssize_t n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        conn_close(c);
        return;
    }
    c->len += (size_t)n;
    for (;;) {
        char name[16];
        long used = parse_command(c->buf, c->len, name);
        if (used == 0)
            return;
        if (used < 0 || !answer(f, c, name, c->buf, (size_t)used)) {
            conn_close(c);
            return;
        }
        memmove(c->buf, c->buf + used, c->len - (size_t)used);
        c->len -= (size_t)used;
    }
}

static void *run(void *arg)
{
    fake_redis *f = arg;
    for (;;) {
        struct pollfd pfd[MAX_CONNS + 2];
        int map[MAX_CONNS + 2];
        nfds_t n = 0;
        pfd[n] = (struct pollfd){.fd = f->wake[0], .events = POLLIN};
        map[n++] = -2;
        pfd[n] = (struct pollfd){.fd = f->listen_fd, .events = POLLIN};
        map[n++] = -1;
        for (int i = 0; i < MAX_CONNS; i++) {
            if (f->conns[i].fd >= 0) {
                pfd[n] = (struct pollfd){.fd = f->conns[i].fd, .events = POLLIN};
                map[n++] = i;
            }
        }
        bool trickling = false;
        for (int i = 0; i < MAX_CONNS; i++)
            trickling = trickling || (f->conns[i].fd >= 0 && f->conns[i].trickling);
        if (poll(pfd, n, trickling ? TRICKLE_EVERY_MS : -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pfd[0].revents != 0)
            break;
        trickle(f);
        for (nfds_t k = 1; k < n; k++) {
            if (pfd[k].revents == 0)
                continue;
            if (map[k] == -1) {
                int fd = accept(f->listen_fd, NULL, NULL);
                if (fd < 0)
                    continue;
                int slot = -1;
                for (int i = 0; i < MAX_CONNS && slot < 0; i++)
                    slot = f->conns[i].fd < 0 ? i : -1;
                if (slot < 0) {
                    close(fd);
                    continue;
                }
                f->conns[slot].fd = fd;
            } else {
                on_readable(f, &f->conns[map[k]]);
            }
        }
    }
    for (int i = 0; i < MAX_CONNS; i++)
        conn_close(&f->conns[i]);
    return NULL;
}

fake_redis *fake_redis_start(fake_mode mode, const char *error_text)
{
    fake_redis *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return NULL;
    f->mode = mode;
    snprintf(f->error_text, sizeof(f->error_text), "%s", error_text != NULL ? error_text : "ERR");
    atomic_init(&f->commands, 0);
    atomic_init(&f->scripts, 0);
    for (int i = 0; i < MAX_CONNS; i++)
        f->conns[i].fd = -1;
    f->wake[0] = f->wake[1] = -1;
    f->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sa_len = sizeof(sa);
    if (f->listen_fd < 0 || bind(f->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(f->listen_fd, 16) != 0 ||
        getsockname(f->listen_fd, (struct sockaddr *)&sa, &sa_len) != 0 ||
        pipe2(f->wake, O_CLOEXEC) != 0) {
        perror("fake_redis: listen");
        goto fail;
    }
    f->port = ntohs(sa.sin_port);
    /* The port makes it unique among the fakes of one test; "fa4e" makes it no real run_id. */
    snprintf(f->run_id, sizeof(f->run_id), "fa4e%036d", f->port);
    if (pthread_create(&f->thread, NULL, run, f) != 0) {
        fprintf(stderr, "fake_redis: cannot start its thread\n");
        goto fail;
    }
    return f;
fail:
    if (f->listen_fd >= 0)
        close(f->listen_fd);
    if (f->wake[0] >= 0)
        close(f->wake[0]);
    if (f->wake[1] >= 0)
        close(f->wake[1]);
    free(f);
    return NULL;
}

int fake_redis_port(const fake_redis *f)
{
    return f->port;
}

unsigned fake_redis_commands(const fake_redis *f)
{
    return atomic_load(&f->commands);
}

unsigned fake_redis_scripts(const fake_redis *f)
{
    return atomic_load(&f->scripts);
}

void fake_redis_stop(fake_redis *f)
{
    if (f == NULL)
        return;
    char b = 1;
    while (write(f->wake[1], &b, 1) < 0 && errno == EINTR)
        ;
    pthread_join(f->thread, NULL);
    close(f->listen_fd);
    close(f->wake[0]);
    close(f->wake[1]);
    free(f);
}
