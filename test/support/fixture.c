/* SPDX-License-Identifier: MIT */
/* Integration-test fixture: real redis-server processes on loopback (see fixture.h).
 *
 * Safety model: every pid the fixture signals comes from a small static registry that only
 * fork() fills in, never from the caller's struct, so a stale or garbage fixture_cluster can
 * never make us kill an unrelated process. The registry also keeps its own copy of the pids,
 * ports and temp dir, because the atexit handler runs after test frames (and the clusters in
 * them) are gone - cmocka, for instance, longjmps out of a failing test.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* prctl, close_range, mkdtemp, kill */
#endif

#include "fixture.h"
#include "ports.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define READY_TIMEOUT_MS 10000
#define READY_POLL_MS 10
/* A starting server refuses connects at once; a longer probe timeout only helps a wedged one. */
#define PROBE_TIMEOUT_MS 500
#define START_ATTEMPTS 5
#define RESTART_RETRY_DELAY_MS 100
#define MAX_LIVE_CLUSTERS 32
#define LOG_TAIL_BYTES 2048
/* mkdtemp() template below; the socket path must fit sockaddr_un.sun_path (108 bytes). */
#define DIR_TEMPLATE "/redlock-fixture-XXXXXX"
#define SUN_PATH_MAX 108

typedef struct live_cluster {
    const fixture_cluster *owner; /* identity only: compared, never dereferenced */
    pid_t creator;                /* the process that forked the servers; 0 = free slot */
    unsigned n;
    pid_t pids[FIXTURE_MAX_SERVERS];
    int ports[FIXTURE_MAX_SERVERS];
    char dir[256];
} live_cluster;

static live_cluster live_clusters[MAX_LIVE_CLUSTERS];
static bool atexit_registered;

enum { SERVER_READY, SERVER_EXITED, SERVER_TIMED_OUT };

long long fixture_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void fixture_sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static struct timeval timeval_ms(int ms)
{
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    return tv;
}

/* waitpid() that survives signal handlers installed by the code under test. */
static pid_t wait_child(pid_t pid, int *status, int options)
{
    pid_t r;
    do {
        r = waitpid(pid, status, options);
    } while (r < 0 && errno == EINTR);
    return r;
}

/* SIGKILL and reap one of our children. ECHILD (SIGCHLD ignored, or already reaped) means it is
 * gone too, so there is nothing to report. */
static void kill_and_reap(pid_t pid)
{
    kill(pid, SIGCONT);
    kill(pid, SIGKILL);
    wait_child(pid, NULL, 0);
}

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        int dfd = dirfd(d);
        struct dirent *ent;
        while ((ent = readdir(d)) != NULL) {
            if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0)
                continue;
            if (unlinkat(dfd, ent->d_name, 0) != 0 && errno == EISDIR) {
                /* A server's own directory (Redis 7 keeps its AOF files in one). */
                char sub[4096];
                snprintf(sub, sizeof(sub), "%s/%s", dir, ent->d_name);
                remove_dir(sub);
            }
        }
        closedir(d);
    }
    if (rmdir(dir) != 0 && errno != ENOENT)
        fprintf(stderr, "fixture: cannot remove %s: %s\n", dir, strerror(errno));
}

static live_cluster *registry_find(const fixture_cluster *c)
{
    for (size_t k = 0; k < MAX_LIVE_CLUSTERS; k++) {
        if (live_clusters[k].creator != 0 && live_clusters[k].owner == c)
            return &live_clusters[k];
    }
    return NULL;
}

static live_cluster *registry_free_slot(void)
{
    for (size_t k = 0; k < MAX_LIVE_CLUSTERS; k++) {
        if (live_clusters[k].creator == 0)
            return &live_clusters[k];
    }
    return NULL;
}

/* Kill and reap every server of e, remove its dir and free the slot. In a forked child the
 * servers and dir belong to the parent, so the child only frees its copy of the slot. */
static void registry_stop(live_cluster *e)
{
    if (e->creator == getpid()) {
        // SIGCONT/SIGKILL everything before reaping anything: the kills then run in parallel.
        for (unsigned i = 0; i < e->n; i++) {
            if (e->pids[i] > 0) {
                kill(e->pids[i], SIGCONT);
                kill(e->pids[i], SIGKILL);
            }
        }
        for (unsigned i = 0; i < e->n; i++) {
            if (e->pids[i] > 0)
                wait_child(e->pids[i], NULL, 0);
        }
        if (e->dir[0] != '\0')
            remove_dir(e->dir);
        for (unsigned i = 0; i < e->n; i++)
            fixture_port_release(e->ports[i]);
    }
    memset(e, 0, sizeof(*e));
}

static void stop_all_at_exit(void)
{
    for (size_t k = 0; k < MAX_LIVE_CLUSTERS; k++) {
        if (live_clusters[k].creator != 0)
            registry_stop(&live_clusters[k]);
    }
}

/* Ports this process has handed to servers it still tracks, including killed ones waiting for
 * a restart; a fresh probe must not reuse them. */
static bool port_reserved(int port)
{
    for (size_t k = 0; k < MAX_LIVE_CLUSTERS; k++) {
        const live_cluster *e = &live_clusters[k];
        for (unsigned i = 0; e->creator != 0 && i < e->n; i++) {
            if (e->ports[i] == port)
                return true;
        }
    }
    return false;
}

/* A port from the kernel: free at this moment, for this process only. */
static int kernel_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        fprintf(stderr, "fixture: socket: %s\n", strerror(errno));
        return -1;
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    int port = -1;
    if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0)
        fprintf(stderr, "fixture: bind 127.0.0.1:0: %s\n", strerror(errno));
    else if (getsockname(fd, (struct sockaddr *)&addr, &len) != 0)
        fprintf(stderr, "fixture: getsockname: %s\n", strerror(errno));
    else
        port = ntohs(addr.sin_port);
    close(fd);
    return port;
}

/* A claimed port (ports.h), which no other test process is handed while this one has it, even
 * while its server is down for a restart; else one from the kernel. */
static int pick_port(void)
{
    int port = fixture_port_claim();
    if (port > 0)
        return port;
    // The kernel may hand out the same ephemeral port twice in a row; skip ones we hold.
    for (int tries = 0; tries < 100; tries++) {
        port = kernel_port();
        if (port < 0 || !port_reserved(port))
            return port;
    }
    fprintf(stderr, "fixture: no unreserved loopback port found\n");
    return -1;
}

int fixture_free_port(void)
{
    return pick_port();
}

/* Resolve the binary once, in the parent: the child must not do anything that allocates. */
static int find_redis_server(char *buf, size_t size)
{
    const char *override = getenv("FIXTURE_REDIS_SERVER");
    if (override && override[0] != '\0') {
        if ((size_t)snprintf(buf, size, "%s", override) < size && access(buf, X_OK) == 0)
            return 0;
        fprintf(stderr, "fixture: FIXTURE_REDIS_SERVER=%s is not executable\n", override);
        return -1;
    }
    const char *path = getenv("PATH");
    if (!path || path[0] == '\0')
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path != '\0') {
        size_t dir_len = strcspn(path, ":");
        int written = snprintf(buf, size, "%.*s/redis-server", (int)dir_len, path);
        if (dir_len > 0 && written > 0 && (size_t)written < size && access(buf, X_OK) == 0)
            return 0;
        path += dir_len;
        if (*path == ':')
            path++;
    }
    fprintf(stderr, "fixture: redis-server not found in $PATH (set FIXTURE_REDIS_SERVER)\n");
    return -1;
}

static int server_file(const fixture_cluster *c, unsigned i, const char *ext, char *buf,
                       size_t size)
{
    int written = snprintf(buf, size, "%s/redis-%u.%s", c->dir, i, ext);
    return written > 0 && (size_t)written < size ? 0 : -1;
}

static void print_log_tail(const fixture_cluster *c, unsigned i)
{
    char log_path[512];
    if (server_file(c, i, "log", log_path, sizeof(log_path)) != 0)
        return;
    int fd = open(log_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "fixture: no log at %s: %s\n", log_path, strerror(errno));
        return;
    }
    char tail[LOG_TAIL_BYTES];
    off_t size = lseek(fd, 0, SEEK_END);
    off_t from = size > (off_t)sizeof(tail) ? size - (off_t)sizeof(tail) : 0;
    ssize_t got = pread(fd, tail, sizeof(tail), from);
    close(fd);
    const char *start = tail;
    if (got > 0 && from > 0) {
        // Begin at a whole line.
        const char *newline = memchr(tail, '\n', (size_t)got);
        if (newline) {
            got -= newline + 1 - tail;
            start = newline + 1;
        }
    }
    fprintf(stderr, "fixture: ---- tail of %s ----\n%.*s\nfixture: ---- end of log ----\n",
            log_path, got > 0 ? (int)got : 0, start);
}

/* Write server i's redis.conf. Paths are quoted because the config parser splits on spaces. */
static int write_config(const fixture_cluster *c, unsigned i, const char *conf_path,
                        const char *log_path)
{
    FILE *f = fopen(conf_path, "we");
    if (!f) {
        fprintf(stderr, "fixture: cannot write %s: %s\n", conf_path, strerror(errno));
        return -1;
    }
    const fixture_server *s = &c->servers[i];
    fprintf(f,
            "port %d\n"
            "bind 127.0.0.1\n"
            "protected-mode no\n"
            "unixsocket \"%s\"\n"
            "unixsocketperm 700\n"
            "save \"\"\n"
            "appendonly no\n"
            "dir \"%s\"\n"
            "dbfilename \"dump-%d.rdb\"\n"
            "appendfilename \"appendonly-%d.aof\"\n"
            "daemonize no\n"
            "logfile \"%s\"\n",
            s->port, s->unix_path, c->dir, s->port, s->port, log_path);
    size_t extra_len = strlen(c->extra_conf);
    if (extra_len > 0) {
        fputs(c->extra_conf, f);
        if (c->extra_conf[extra_len - 1] != '\n')
            fputc('\n', f);
    }
    if (fclose(f) != 0) {
        fprintf(stderr, "fixture: cannot write %s: %s\n", conf_path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Runs between fork() and exec(): async-signal-safe calls only, because the test process may
 * have other threads holding malloc or stdio locks. Never returns. */
static void exec_server(const char *server_path, char *const argv[], const char *log_path,
                        pid_t parent, long max_fd)
{
    int log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (log_fd < 0 || null_fd < 0)
        _exit(126);
    // Errors before redis opens its logfile (bad config, exec failure) land in the log too.
    if (dup2(null_fd, STDIN_FILENO) < 0 || dup2(log_fd, STDOUT_FILENO) < 0 ||
        dup2(log_fd, STDERR_FILENO) < 0)
        _exit(126);
    // Inherited sockets would keep the test's connections open in the server after the test
    // closes them, hiding exactly the disconnects integration tests want to see.
    if (close_range(3, ~0U, 0) != 0) {
        for (long fd = 3; fd < max_fd; fd++)
            close((int)fd);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    // Die with the test even if it crashes; the getppid() check closes the race where the
    // parent died before prctl() took effect.
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(125);
    execv(server_path, argv);
    static const char msg[] = "fixture: execv redis-server failed\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof(msg) - 1);
    (void)ignored;
    _exit(127);
}

/* Write server i's config and fork/exec it; does not wait for readiness. */
static int launch(fixture_cluster *c, live_cluster *e, unsigned i, const char *server_path)
{
    fixture_server *s = &c->servers[i];
    char conf_path[512], log_path[512];
    if (server_file(c, i, "conf", conf_path, sizeof(conf_path)) != 0 ||
        server_file(c, i, "log", log_path, sizeof(log_path)) != 0) {
        fprintf(stderr, "fixture: temp dir path too long: %s\n", c->dir);
        return -1;
    }
    if (write_config(c, i, conf_path, log_path) != 0)
        return -1;
    // Remove a socket left by a killed server so the readiness probe cannot be confused by it.
    unlink(s->unix_path);

    char *argv[] = {(char *)server_path, conf_path, NULL};
    long max_fd = sysconf(_SC_OPEN_MAX);
    pid_t parent = getpid();
    fflush(NULL); // Buffered test output must not be written twice by the child.
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "fixture: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0)
        exec_server(server_path, argv, log_path, parent, max_fd > 0 ? max_fd : 1024);
    s->pid = pid;
    s->paused = false;
    e->pids[i] = pid;
    return 0;
}

/* True if a PING over ctx got any reply at all: -NOAUTH and -LOADING also prove the server is
 * accepting and answering. Frees ctx. */
static bool ping_answered(redisContext *ctx)
{
    if (!ctx)
        return false;
    bool answered = false;
    if (!ctx->err && redisSetTimeout(ctx, timeval_ms(PROBE_TIMEOUT_MS)) == REDIS_OK) {
        redisReply *reply = redisCommand(ctx, "PING");
        answered = reply != NULL;
        freeReplyObject(reply);
    }
    redisFree(ctx);
    return answered;
}

/* Poll server i until it answers or exits. The unix socket lives in our private dir, so an
 * answer there proves it is our process that is up, and redis binds TCP before the unix socket
 * and exits if TCP fails - an answer on the port cannot come from some other server. */
static int wait_ready(fixture_cluster *c, live_cluster *e, unsigned i)
{
    fixture_server *s = &c->servers[i];
    long long deadline_ms = fixture_now_ms() + READY_TIMEOUT_MS;
    for (;;) {
        pid_t r = wait_child(s->pid, NULL, WNOHANG);
        if (r == s->pid || (r < 0 && errno == ECHILD)) {
            s->pid = 0;
            e->pids[i] = 0;
            return SERVER_EXITED;
        }
        struct timeval tv = timeval_ms(PROBE_TIMEOUT_MS);
        if (ping_answered(redisConnectUnixWithTimeout(s->unix_path, tv)) &&
            ping_answered(redisConnectWithTimeout("127.0.0.1", s->port, tv)))
            return SERVER_READY;
        if (fixture_now_ms() >= deadline_ms)
            return SERVER_TIMED_OUT;
        fixture_sleep_ms(READY_POLL_MS);
    }
}

static void set_port(fixture_cluster *c, live_cluster *e, unsigned i, int port)
{
    fixture_server *s = &c->servers[i];
    s->port = port;
    e->ports[i] = port;
    snprintf(s->url, sizeof(s->url), "redis://127.0.0.1:%d", port);
}

/* Wait for server i (already launched) to come up. If it exits first - usually because another
 * process bound the port between our probe and its bind - launch it again, on a fresh port
 * unless keep_port. On failure nothing of server i is left running. */
static int ensure_ready(fixture_cluster *c, live_cluster *e, unsigned i, bool keep_port,
                        const char *server_path)
{
    fixture_server *s = &c->servers[i];
    for (int attempt = 1;; attempt++) {
        int state = wait_ready(c, e, i);
        if (state == SERVER_READY)
            return 0;
        if (state == SERVER_TIMED_OUT) {
            fprintf(stderr,
                    "fixture: redis-server %u (pid %d, port %d) not answering PING "
                    "after %d ms\n",
                    i, (int)s->pid, s->port, READY_TIMEOUT_MS);
            kill_and_reap(s->pid);
            s->pid = 0;
            e->pids[i] = 0;
            print_log_tail(c, i);
            return -1;
        }
        if (attempt == START_ATTEMPTS) {
            fprintf(stderr,
                    "fixture: redis-server %u exited during startup %d times (last port "
                    "%d); giving up\n",
                    i, START_ATTEMPTS, s->port);
            print_log_tail(c, i);
            return -1;
        }
        if (keep_port) {
            fixture_sleep_ms(RESTART_RETRY_DELAY_MS);
        } else {
            int port = pick_port();
            if (port < 0)
                return -1;
            fixture_port_release(e->ports[i]);
            set_port(c, e, i, port);
        }
        if (launch(c, e, i, server_path) != 0)
            return -1;
    }
}

/* Pick the temp root: $TMPDIR unless the socket path would not fit sun_path there. */
static const char *temp_root(void)
{
    const char *tmp = getenv("TMPDIR");
    size_t longest_tail = strlen(DIR_TEMPLATE "/redis-15.sock");
    if (tmp && tmp[0] != '\0' && strlen(tmp) + longest_tail < SUN_PATH_MAX)
        return tmp;
    return "/tmp";
}

static int init_cluster(fixture_cluster *c, unsigned n, const char *extra_conf)
{
    memset(c, 0, sizeof(*c));
    if (n == 0 || n > FIXTURE_MAX_SERVERS) {
        fprintf(stderr, "fixture: server count %u not in 1..%d\n", n, FIXTURE_MAX_SERVERS);
        return -1;
    }
    c->n = n;
    if (extra_conf) {
        if (strlen(extra_conf) >= sizeof(c->extra_conf)) {
            fprintf(stderr, "fixture: extra_conf longer than %zu bytes\n",
                    sizeof(c->extra_conf) - 1);
            return -1;
        }
        strcpy(c->extra_conf, extra_conf);
    }
    int written = snprintf(c->dir, sizeof(c->dir), "%s" DIR_TEMPLATE, temp_root());
    if (written < 0 || (size_t)written >= sizeof(c->dir) || !mkdtemp(c->dir)) {
        fprintf(stderr, "fixture: mkdtemp %s: %s\n", c->dir, strerror(errno));
        c->dir[0] = '\0';
        return -1;
    }
    for (unsigned i = 0; i < n; i++) {
        fixture_server *s = &c->servers[i];
        written = snprintf(s->unix_path, sizeof(s->unix_path), "%s/redis-%u.sock", c->dir, i);
        if (written < 0 || (size_t)written >= SUN_PATH_MAX) {
            fprintf(stderr, "fixture: socket path too long in %s\n", c->dir);
            return -1;
        }
        // memcpy, not snprintf: gcc's -Wrestrict cannot tell the two fields of *c apart.
        memcpy(s->unix_url, "unix://", 7);
        memcpy(s->unix_url + 7, s->unix_path, (size_t)written + 1);
        c->urls[i] = s->url;
    }
    return 0;
}

int fixture_start(fixture_cluster *c, unsigned n, const char *extra_conf)
{
    if (!c) {
        fprintf(stderr, "fixture: fixture_start: NULL cluster\n");
        return -1;
    }
    live_cluster *old = registry_find(c);
    if (old) {
        // Typically a failed test that never reached fixture_stop, its stack slot now reused.
        fprintf(stderr, "fixture: fixture_start on a live cluster; stopping its servers first\n");
        registry_stop(old);
    }
    if (!atexit_registered) {
        if (atexit(stop_all_at_exit) != 0) {
            fprintf(stderr, "fixture: atexit failed\n");
            return -1;
        }
        atexit_registered = true;
    }
    char server_path[4096];
    if (find_redis_server(server_path, sizeof(server_path)) != 0)
        return -1;
    live_cluster *e = registry_free_slot();
    if (!e) {
        fprintf(stderr, "fixture: more than %d live clusters\n", MAX_LIVE_CLUSTERS);
        return -1;
    }
    // Register before the first fork, so even a half-started cluster is cleaned up at exit.
    e->owner = c;
    e->creator = getpid();
    int init_rc = init_cluster(c, n, extra_conf);
    // Copy even on failure: a dir already made by mkdtemp() must be removed by the stop below.
    e->n = c->n;
    memcpy(e->dir, c->dir, sizeof(e->dir));
    if (init_rc != 0)
        goto fail;

    // Launch all, then wait for all: the servers start up in parallel.
    for (unsigned i = 0; i < n; i++) {
        int port = pick_port();
        if (port < 0)
            goto fail;
        set_port(c, e, i, port);
        if (launch(c, e, i, server_path) != 0)
            goto fail;
    }
    for (unsigned i = 0; i < n; i++) {
        if (ensure_ready(c, e, i, false, server_path) != 0)
            goto fail;
    }
    return 0;

fail:
    fixture_stop(c);
    return -1;
}

void fixture_stop(fixture_cluster *c)
{
    if (!c)
        return;
    live_cluster *e = registry_find(c);
    if (!e)
        return; // Never started, already stopped, or garbage: there is nothing of ours in it.
    registry_stop(e);
    for (unsigned i = 0; i < FIXTURE_MAX_SERVERS; i++) {
        c->servers[i].pid = 0;
        c->servers[i].paused = false;
    }
    c->dir[0] = '\0';
}

unsigned fixture_stop_all(void)
{
    unsigned stopped = 0;
    for (size_t k = 0; k < MAX_LIVE_CLUSTERS; k++) {
        // A slot inherited through fork() is the parent's cluster: registry_stop only forgets it.
        if (live_clusters[k].creator == getpid())
            stopped++;
        if (live_clusters[k].creator != 0)
            registry_stop(&live_clusters[k]);
    }
    return stopped;
}

/* The registry entry for a started cluster owned by this process with i in range, or NULL with
 * a message. */
static live_cluster *checked_cluster(fixture_cluster *c, unsigned i, const char *what)
{
    live_cluster *e = c ? registry_find(c) : NULL;
    if (!e || e->creator != getpid()) {
        fprintf(stderr, "fixture: %s: cluster not started (or already stopped) by this process\n",
                what);
        return NULL;
    }
    if (i >= c->n) {
        fprintf(stderr, "fixture: %s: server %u out of range (n = %u)\n", what, i, c->n);
        return NULL;
    }
    return e;
}

static live_cluster *running_server(fixture_cluster *c, unsigned i, const char *what)
{
    live_cluster *e = checked_cluster(c, i, what);
    if (e && e->pids[i] <= 0) {
        fprintf(stderr, "fixture: %s: server %u is not running\n", what, i);
        return NULL;
    }
    return e;
}

int fixture_kill(fixture_cluster *c, unsigned i)
{
    live_cluster *e = running_server(c, i, "fixture_kill");
    if (!e)
        return -1;
    kill_and_reap(e->pids[i]);
    e->pids[i] = 0;
    c->servers[i].pid = 0;
    c->servers[i].paused = false;
    return 0;
}

int fixture_pause(fixture_cluster *c, unsigned i)
{
    live_cluster *e = running_server(c, i, "fixture_pause");
    if (!e)
        return -1;
    fixture_server *s = &c->servers[i];
    if (s->paused)
        return 0; // Its stop was already reported; waiting again would block forever.
    if (kill(e->pids[i], SIGSTOP) != 0) {
        fprintf(stderr, "fixture: SIGSTOP %d: %s\n", (int)e->pids[i], strerror(errno));
        return -1;
    }
    // SIGSTOP takes effect asynchronously; wait so the caller's next request surely hangs.
    int status;
    pid_t r = wait_child(e->pids[i], &status, WUNTRACED);
    if (r == e->pids[i] && WIFSTOPPED(status)) {
        s->paused = true;
        return 0;
    }
    if (r == e->pids[i]) {
        fprintf(stderr, "fixture: fixture_pause: server %u died\n", i);
        e->pids[i] = 0;
        s->pid = 0;
    } else {
        fprintf(stderr, "fixture: waitpid %d: %s\n", (int)e->pids[i], strerror(errno));
    }
    return -1;
}

int fixture_resume(fixture_cluster *c, unsigned i)
{
    live_cluster *e = running_server(c, i, "fixture_resume");
    if (!e)
        return -1;
    if (kill(e->pids[i], SIGCONT) != 0) {
        fprintf(stderr, "fixture: SIGCONT %d: %s\n", (int)e->pids[i], strerror(errno));
        return -1;
    }
    c->servers[i].paused = false;
    return 0;
}

int fixture_restart(fixture_cluster *c, unsigned i)
{
    live_cluster *e = checked_cluster(c, i, "fixture_restart");
    if (!e)
        return -1;
    char server_path[4096];
    if (find_redis_server(server_path, sizeof(server_path)) != 0)
        return -1;
    if (e->pids[i] > 0)
        fixture_kill(c, i);
    if (launch(c, e, i, server_path) != 0)
        return -1;
    return ensure_ready(c, e, i, true, server_path);
}

redisContext *fixture_connect(fixture_cluster *c, unsigned i)
{
    if (!c || i >= c->n) {
        fprintf(stderr, "fixture: fixture_connect: server %u out of range\n", i);
        return NULL;
    }
    struct timeval tv = timeval_ms(FIXTURE_COMMAND_TIMEOUT_MS);
    redisContext *ctx = redisConnectWithTimeout("127.0.0.1", c->servers[i].port, tv);
    if (ctx && !ctx->err)
        redisSetTimeout(ctx, tv);
    return ctx;
}

/* Common tail of the two command functions: report and close. */
static redisReply *finish_command(redisContext *ctx, redisReply *reply, unsigned i)
{
    if (!reply)
        fprintf(stderr, "fixture: command on server %u failed: %s\n", i,
                ctx->err ? ctx->errstr : "no reply");
    redisFree(ctx);
    return reply;
}

static redisContext *command_connection(fixture_cluster *c, unsigned i)
{
    redisContext *ctx = fixture_connect(c, i);
    if (ctx && ctx->err) {
        fprintf(stderr, "fixture: connect to server %u (port %d): %s\n", i, c->servers[i].port,
                ctx->errstr);
        redisFree(ctx);
        return NULL;
    }
    return ctx;
}

redisReply *fixture_command(fixture_cluster *c, unsigned i, const char *fmt, ...)
{
    redisContext *ctx = command_connection(c, i);
    if (!ctx)
        return NULL;
    va_list ap;
    va_start(ap, fmt);
    redisReply *reply = redisvCommand(ctx, fmt, ap);
    va_end(ap);
    return finish_command(ctx, reply, i);
}

redisReply *fixture_command_argv(fixture_cluster *c, unsigned i, int argc, const char **argv,
                                 const size_t *argvlen)
{
    redisContext *ctx = command_connection(c, i);
    if (!ctx)
        return NULL;
    return finish_command(ctx, redisCommandArgv(ctx, argc, argv, argvlen), i);
}
