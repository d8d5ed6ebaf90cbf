/* SPDX-License-Identifier: MIT */
/* check_conn.c - the check's connection to one server (check_conn.h): TCP or a unix socket, in
 * TLS for rediss:// and clusters:// nodes, one command at a time, every wait bounded.
 *
 * The socket is non-blocking and every wait is a poll(2) with what is left of a deadline: the
 * connection (and its TLS handshake) has one, each command has its own. TLS goes through the
 * library's own layer (lib/net/tls.c: OpenSSL on memory BIOs, the client's verification of the
 * chain and of the host name), so the check trusts exactly what the client would. hiredis only
 * encodes the commands and parses the replies. */
#include "check_conn.h"

#include "reader.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define READ_CHUNK 16384

struct check_conn {
    int fd;
    redlock__tls *tls; /* NULL: plaintext */
    redlock__alloc alloc;
    redlock__buf out; /* ciphertext waiting for the socket */
    redlock__reader *reader;
    bool answered; /* a reply came: the server accepted the connection */
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Wait until fd is ready for events or the deadline passes: 1 ready, 0 timed out, -1 failed
 * (errno set). */
static int wait_fd(int fd, short events, uint64_t deadline_ms)
{
    for (;;) {
        uint64_t now = now_ms();
        if (now >= deadline_ms)
            return 0;
        uint64_t left = deadline_ms - now;
        struct pollfd p = {fd, events, 0};
        int rc = poll(&p, 1, left > 60000 ? 60000 : (int)left);
        if (rc > 0)
            return 1;
        if (rc < 0 && errno != EINTR)
            return -1;
    }
}

/* After a send or recv that failed: CHECK_CONN_OK to try again (interrupted, or the socket is
 * ready again before the deadline), else CHECK_CONN_TIMEOUT or CHECK_CONN_FAILED (why set). */
static int retry_after(int fd, short events, uint64_t deadline_ms, char *why, size_t why_len)
{
    if (errno == EINTR)
        return CHECK_CONN_OK;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
        int w = wait_fd(fd, events, deadline_ms);
        if (w == 0)
            return CHECK_CONN_TIMEOUT;
        if (w > 0)
            return CHECK_CONN_OK;
    }
    snprintf(why, why_len, "%s", strerror(errno));
    return CHECK_CONN_FAILED;
}

/* Write all of data: CHECK_CONN_OK, CHECK_CONN_TIMEOUT or CHECK_CONN_FAILED (why set). */
static int send_all(check_conn *c, const char *data, size_t len, uint64_t deadline_ms, char *why,
                    size_t why_len)
{
    while (len > 0) {
        ssize_t n = send(c->fd, data, len, MSG_NOSIGNAL);
        if (n > 0) {
            data += n;
            len -= (size_t)n;
            continue;
        }
        int rc = retry_after(c->fd, POLLOUT, deadline_ms, why, why_len);
        if (rc != CHECK_CONN_OK)
            return rc;
    }
    return CHECK_CONN_OK;
}

/* Send the TLS layer's waiting ciphertext. */
static int flush_tls(check_conn *c, uint64_t deadline_ms, char *why, size_t why_len)
{
    c->out.len = 0;
    if (redlock__tls_take(c->tls, &c->out, &c->alloc) != 0) {
        snprintf(why, why_len, "out of memory");
        return CHECK_CONN_FAILED;
    }
    return send_all(c, c->out.data, c->out.len, deadline_ms, why, why_len);
}

/* Read what the socket has (waiting for it until the deadline) into buf: *got bytes, at least
 * one. The server closing the connection is CHECK_CONN_FAILED, "closed by the server". */
static int recv_some(check_conn *c, char *buf, size_t len, size_t *got, uint64_t deadline_ms,
                     char *why, size_t why_len)
{
    for (;;) {
        ssize_t n = recv(c->fd, buf, len, 0);
        if (n > 0) {
            *got = (size_t)n;
            return CHECK_CONN_OK;
        }
        if (n == 0) {
            snprintf(why, why_len, "closed by the server");
            return CHECK_CONN_FAILED;
        }
        int rc = retry_after(c->fd, POLLIN, deadline_ms, why, why_len);
        if (rc != CHECK_CONN_OK)
            return rc;
    }
}

/* A non-blocking socket connected to addr within the deadline, or -1 (why set). */
static int connect_addr(const struct sockaddr *addr, socklen_t addr_len, int family,
                        uint64_t deadline_ms, uint64_t timeout_ms, char *why, size_t why_len)
{
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        snprintf(why, why_len, "%s", strerror(errno));
        return -1;
    }
    if (connect(fd, addr, addr_len) != 0 && errno != EINPROGRESS) {
        snprintf(why, why_len, "%s", strerror(errno));
        close(fd);
        return -1;
    }
    int w = wait_fd(fd, POLLOUT, deadline_ms);
    int err = 0;
    socklen_t err_len = sizeof(err);
    if (w == 0) {
        snprintf(why, why_len, "no connection within %llu ms", (unsigned long long)timeout_ms);
    } else if (w < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len) != 0) {
        snprintf(why, why_len, "%s", strerror(errno));
    } else if (err != 0) {
        snprintf(why, why_len, "%s", strerror(err));
    } else {
        if (family != AF_UNIX) {
            int one = 1;
            (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        }
        return fd;
    }
    close(fd);
    return -1;
}

static int connect_socket(const check_conn_target *t, uint64_t deadline_ms, uint64_t timeout_ms,
                          char *why, size_t why_len)
{
    if (t->is_unix) {
        struct sockaddr_un local;
        memset(&local, 0, sizeof(local));
        local.sun_family = AF_UNIX;
        if (strlen(t->path) >= sizeof(local.sun_path)) {
            snprintf(why, why_len, "the socket path is too long");
            return -1;
        }
        memcpy(local.sun_path, t->path, strlen(t->path) + 1);
        return connect_addr((const struct sockaddr *)&local, sizeof(local), AF_UNIX, deadline_ms,
                            timeout_ms, why, why_len);
    }
    char port[16];
    snprintf(port, sizeof(port), "%d", t->port);
    struct addrinfo hints, *list = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(t->host, port, &hints, &list);
    if (rc != 0) {
        snprintf(why, why_len, "%s", gai_strerror(rc));
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *a = list; a != NULL && fd < 0; a = a->ai_next)
        fd = connect_addr(a->ai_addr, a->ai_addrlen, a->ai_family, deadline_ms, timeout_ms, why,
                          why_len);
    freeaddrinfo(list);
    return fd;
}

/* The TLS handshake, within the deadline. */
static int handshake(check_conn *c, redlock__tls_ctx *tls, const char *host, uint64_t deadline_ms,
                     char *why, size_t why_len)
{
    if (redlock__tls_new(tls, host, NULL, &c->tls, why, why_len) != 0)
        return CHECK_CONN_FAILED;
    /* The handshake's reason apart: sending its last records (an alert) may fail too. */
    char reason[256];
    char buf[READ_CHUNK];
    for (;;) {
        int h = redlock__tls_handshake(c->tls, reason, sizeof(reason));
        int rc = flush_tls(c, deadline_ms, why, why_len);
        if (h < 0) {
            snprintf(why, why_len, "%s", reason);
            return CHECK_CONN_FAILED;
        }
        if (rc != CHECK_CONN_OK || h == 1)
            return rc;
        size_t got;
        rc = recv_some(c, buf, sizeof(buf), &got, deadline_ms, why, why_len);
        if (rc != CHECK_CONN_OK)
            return rc;
        if (redlock__tls_feed(c->tls, buf, got) != 0) {
            snprintf(why, why_len, "out of memory");
            return CHECK_CONN_FAILED;
        }
    }
}

int check_conn_open(const check_conn_target *t, uint64_t timeout_ms, check_conn **out, char *why,
                    size_t why_len)
{
    *out = NULL;
    check_conn *c = calloc(1, sizeof(*c));
    if (c != NULL)
        redlock__alloc_init(&c->alloc, NULL, NULL);
    if (c == NULL || (c->reader = redlock__reader_new(REDLOCK__READER_CHECK, &c->alloc)) == NULL) {
        free(c);
        snprintf(why, why_len, "out of memory");
        return CHECK_CONN_FAILED;
    }
    uint64_t deadline = now_ms() + timeout_ms;
    c->fd = connect_socket(t, deadline, timeout_ms, why, why_len);
    int rc = c->fd >= 0 ? CHECK_CONN_OK : CHECK_CONN_FAILED;
    if (rc == CHECK_CONN_OK && t->tls != NULL)
        rc = handshake(c, t->tls, t->host, deadline, why, why_len);
    if (rc == CHECK_CONN_TIMEOUT)
        snprintf(why, why_len, "no TLS handshake within %llu ms", (unsigned long long)timeout_ms);
    if (rc != CHECK_CONN_OK) {
        check_conn_close(c);
        return CHECK_CONN_FAILED;
    }
    *out = c;
    return CHECK_CONN_OK;
}

/* Give plaintext to the reply parser. */
static int parse_bytes(check_conn *c, const char *data, size_t len, char *why, size_t why_len)
{
    if (redlock__reader_feed(c->reader, data, len) == 0)
        return CHECK_CONN_OK;
    snprintf(why, why_len, "protocol error: %s", redlock__reader_error(c->reader));
    return CHECK_CONN_FAILED;
}

/* Read bytes to the reply parser, through the TLS layer when there is one. */
static int take_bytes(check_conn *c, const char *buf, size_t len, char *why, size_t why_len)
{
    if (c->tls == NULL)
        return parse_bytes(c, buf, len, why, why_len);
    if (redlock__tls_feed(c->tls, buf, len) != 0) {
        snprintf(why, why_len, "out of memory");
        return CHECK_CONN_FAILED;
    }
    for (;;) {
        const char *plain;
        size_t plain_len;
        int r = redlock__tls_read(c->tls, &plain, &plain_len, why, why_len);
        if (r <= 0)
            return r == 0 ? CHECK_CONN_OK : CHECK_CONN_FAILED;
        int rc = parse_bytes(c, plain, plain_len, why, why_len);
        if (rc != CHECK_CONN_OK)
            return rc;
    }
}

int check_conn_command(check_conn *c, int argc, const char **argv, const size_t *lens,
                       uint64_t timeout_ms, redisReply **reply, char *why, size_t why_len)
{
    *reply = NULL;
    uint64_t deadline = now_ms() + timeout_ms;
    char *cmd = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, argv, lens);
    if (len < 0) {
        snprintf(why, why_len, "out of memory");
        return CHECK_CONN_FAILED;
    }
    int rc;
    if (c->tls == NULL)
        rc = send_all(c, cmd, (size_t)len, deadline, why, why_len);
    else if (redlock__tls_write(c->tls, cmd, (size_t)len, why, why_len) != 0)
        rc = CHECK_CONN_FAILED;
    else
        rc = flush_tls(c, deadline, why, why_len);
    redisFreeCommand(cmd);
    char buf[READ_CHUNK];
    while (rc == CHECK_CONN_OK) {
        redisReply *r = NULL;
        if (redlock__reader_get(c->reader, &r) != 0) {
            snprintf(why, why_len, "protocol error: %s", redlock__reader_error(c->reader));
            return CHECK_CONN_FAILED;
        }
        if (r != NULL) {
            c->answered = true;
            *reply = r;
            return CHECK_CONN_OK;
        }
        size_t got;
        rc = recv_some(c, buf, sizeof(buf), &got, deadline, why, why_len);
        if (rc == CHECK_CONN_OK)
            rc = take_bytes(c, buf, got, why, why_len);
    }
    /* A TLS 1.3 server that refuses the client's certificate (or wants one) says so after the
     * handshake, then closes: the first command's failure is that refusal. */
    if (rc == CHECK_CONN_FAILED && c->tls != NULL && !c->answered)
        (void)redlock__tls_explain_drop(c->tls, why, why_len);
    return rc;
}

void check_conn_close(check_conn *c)
{
    if (c == NULL)
        return;
    if (c->fd >= 0)
        close(c->fd);
    if (c->tls != NULL)
        redlock__tls_free(c->tls);
    redlock__free(&c->alloc, c->out.data);
    redlock__reader_free(c->reader);
    free(c);
}
