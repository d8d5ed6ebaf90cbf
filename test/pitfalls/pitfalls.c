/* SPDX-License-Identifier: MIT */
/* pitfalls.c - see pitfalls.h. */
#include "pitfalls.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the history and its checker --------------------------------------------------------- */

void pf_history_init(pf_history *h, const char *title)
{
    memset(h, 0, sizeof(*h));
    h->title = title;
    h->t0_us = redlock_now_us();
}

void pf_history_add(pf_history *h, const char *who, uint64_t from_us, uint64_t to_us)
{
    if (h->n == PF_MAX_HOLDS)
        fail_msg("history '%s' is full", h->title);
    if (to_us < from_us)
        fail_msg("hold of %s ends %llu us before it begins", who,
                 (unsigned long long)(from_us - to_us));
    pf_hold *hold = &h->holds[h->n++];
    snprintf(hold->who, sizeof(hold->who), "%s", who);
    hold->from_us = from_us;
    hold->to_us = to_us;
}

bool pf_holds_overlap(const pf_hold *a, const pf_hold *b)
{
    return a->from_us < b->to_us && b->from_us < a->to_us;
}

unsigned pf_overlaps(const pf_history *h)
{
    unsigned n = 0;
    for (unsigned i = 0; i < h->n; i++)
        for (unsigned j = i + 1; j < h->n; j++)
            n += pf_holds_overlap(&h->holds[i], &h->holds[j]);
    return n;
}

static const pf_hold *find_hold(const pf_history *h, const char *who)
{
    for (unsigned i = 0; i < h->n; i++)
        if (strcmp(h->holds[i].who, who) == 0)
            return &h->holds[i];
    fail_msg("no hold of %s in history '%s'", who, h->title);
    return NULL;
}

bool pf_overlap_between(const pf_history *h, const char *a, const char *b)
{
    return pf_holds_overlap(find_hold(h, a), find_hold(h, b));
}

static double rel_ms(const pf_history *h, uint64_t t_us)
{
    return t_us >= h->t0_us ? (double)(t_us - h->t0_us) / 1e3 : -(double)(h->t0_us - t_us) / 1e3;
}

unsigned pf_report(const pf_history *h)
{
    printf("# %s:\n", h->title);
    for (unsigned i = 0; i < h->n; i++)
        printf("#   %-12s held from %10.3f ms to %10.3f ms\n", h->holds[i].who,
               rel_ms(h, h->holds[i].from_us), rel_ms(h, h->holds[i].to_us));
    unsigned n = 0;
    for (unsigned i = 0; i < h->n; i++)
        for (unsigned j = i + 1; j < h->n; j++)
            if (pf_holds_overlap(&h->holds[i], &h->holds[j])) {
                n++;
                printf("#   overlap: %s and %s both held the lock\n", h->holds[i].who,
                       h->holds[j].who);
            }
    printf("#   %u overlapping pair(s)\n", n);
    fflush(stdout);
    return n;
}

/* ---- holders in child processes ------------------------------------------------------------ */

/* The children of this process not reaped yet, for the teardown. */
#define MAX_CHILDREN 8
static pid_t live_children[MAX_CHILDREN];

static void remember(pid_t pid)
{
    for (unsigned i = 0; i < MAX_CHILDREN; i++)
        if (live_children[i] == 0) {
            live_children[i] = pid;
            return;
        }
    fail_msg("more than %d live children", MAX_CHILDREN);
}

static void forget(pid_t pid)
{
    for (unsigned i = 0; i < MAX_CHILDREN; i++)
        if (live_children[i] == pid)
            live_children[i] = 0;
}

static bool write_all(int fd, const void *p, size_t len)
{
    const char *b = p;
    while (len > 0) {
        ssize_t n = write(fd, b, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        b += n;
        len -= (size_t)n;
    }
    return true;
}

static bool read_all(int fd, void *p, size_t len)
{
    char *b = p;
    while (len > 0) {
        ssize_t n = read(fd, b, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        b += n;
        len -= (size_t)n;
    }
    return true;
}

void pf_child_start(pf_child *ch, pf_child_fn fn, void *arg)
{
    int report[2], go[2];
    assert_int_equal(pipe(report), 0);
    assert_int_equal(pipe(go), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(report[0]);
        close(go[1]);
        _exit(fn(report[1], go[0], arg));
    }
    close(report[1]);
    close(go[0]);
    remember(pid);
    ch->pid = pid;
    ch->from_fd = report[0];
    ch->go_fd = go[1];
}

bool pf_child_read(pf_child *ch, void *msg, size_t len)
{
    struct pollfd pfd = {.fd = ch->from_fd, .events = POLLIN};
    int n;
    do
        n = poll(&pfd, 1, H_WAIT_MS);
    while (n < 0 && errno == EINTR);
    return n == 1 && read_all(ch->from_fd, msg, len);
}

void pf_child_go(pf_child *ch)
{
    assert_true(write_all(ch->go_fd, "g", 1));
}

void pf_child_stop(pf_child *ch)
{
    assert_int_equal(kill(ch->pid, SIGSTOP), 0);
    int status = 0;
    assert_int_equal(waitpid(ch->pid, &status, WUNTRACED), ch->pid);
    assert_true(WIFSTOPPED(status));
}

void pf_child_cont(pf_child *ch)
{
    assert_int_equal(kill(ch->pid, SIGCONT), 0);
}

static void close_pipes(pf_child *ch)
{
    if (ch->from_fd >= 0)
        close(ch->from_fd);
    if (ch->go_fd >= 0)
        close(ch->go_fd);
    ch->from_fd = ch->go_fd = -1;
}

void pf_child_kill(pf_child *ch)
{
    assert_int_equal(kill(ch->pid, SIGKILL), 0);
    assert_int_equal(waitpid(ch->pid, NULL, 0), ch->pid);
    forget(ch->pid);
    ch->pid = 0;
    close_pipes(ch);
}

int pf_child_wait(pf_child *ch)
{
    uint64_t give_up = redlock_now_us() + H_WAIT_MS * 1000ull;
    int status = 0;
    pid_t got;
    while ((got = waitpid(ch->pid, &status, WNOHANG)) == 0 && redlock_now_us() < give_up)
        pf_sleep_ms(10);
    if (got == 0) {
        kill(ch->pid, SIGKILL);
        waitpid(ch->pid, &status, 0);
    }
    forget(ch->pid);
    ch->pid = 0;
    close_pipes(ch);
    if (got == 0)
        fail_msg("the child did not exit within %d ms", H_WAIT_MS);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool pf_tell(int report_fd, const void *msg, size_t len)
{
    return write_all(report_fd, msg, len);
}

bool pf_await_go(int go_fd)
{
    char go;
    return read_all(go_fd, &go, 1);
}

int pf_teardown(void **state)
{
    for (unsigned i = 0; i < MAX_CHILDREN; i++)
        if (live_children[i] > 0) {
            kill(live_children[i], SIGKILL);
            waitpid(live_children[i], NULL, 0);
            live_children[i] = 0;
        }
    return h_teardown(state);
}

/* ---- blocking helpers on the servers ------------------------------------------------------- */

redisContext *pf_connect(fixture_cluster *c, unsigned i)
{
    redisContext *ctx = fixture_connect(c, i);
    assert_non_null(ctx);
    if (ctx->err != 0)
        fail_msg("connect to server %u: %s", i, ctx->errstr);
    return ctx;
}

redisReply *pf_cmd(redisContext *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(ctx, fmt, ap);
    va_end(ap);
    if (r == NULL)
        fail_msg("'%s': no reply: %s", fmt, ctx->errstr);
    return r;
}

bool pf_exists(fixture_cluster *c, unsigned i, const char *key)
{
    redisReply *r = fixture_command(c, i, "EXISTS %s", key);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    bool exists = r->integer == 1;
    freeReplyObject(r);
    return exists;
}

bool pf_wait_gone(fixture_cluster *c, unsigned i, const char *key, uint64_t timeout_ms)
{
    uint64_t give_up = redlock_now_us() + timeout_ms * 1000;
    while (pf_exists(c, i, key)) {
        if (redlock_now_us() >= give_up)
            return false;
        pf_sleep_ms(10);
    }
    return true;
}

void pf_sleep_ms(uint64_t ms)
{
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ---- the single-instance lock, done as redis.io says ---------------------------------------- */

bool pf_token_lock(redisContext *ctx, const char *key, const char *token, uint64_t ttl_ms)
{
    redisReply *r =
        redisCommand(ctx, "SET %s %s NX PX %llu", key, token, (unsigned long long)ttl_ms);
    bool taken = r != NULL && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
    freeReplyObject(r);
    return taken;
}

long long pf_token_unlock(redisContext *ctx, const char *key, const char *token)
{
    redisReply *r = redisCommand(ctx, "EVAL %s 1 %s %s",
                                 "if redis.call('get', KEYS[1]) == ARGV[1] then "
                                 "return redis.call('del', KEYS[1]) else return 0 end",
                                 key, token);
    long long deleted = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return deleted;
}

bool pf_random_token(char *buf, size_t len)
{
    unsigned char raw[16];
    if (len < 2 * sizeof(raw) + 1 || uv_random(NULL, NULL, raw, sizeof(raw), 0, NULL) != 0)
        return false;
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(buf + 2 * i, 3, "%02x", raw[i]);
    return true;
}

bool pf_token_lock_wait(redisContext *ctx, const char *key, const char *token, uint64_t ttl_ms,
                        uint64_t wait_ms)
{
    uint64_t give_up = redlock_now_us() + wait_ms * 1000;
    for (;;) {
        if (pf_token_lock(ctx, key, token, ttl_ms))
            return true;
        if (redlock_now_us() >= give_up)
            return false;
        pf_sleep_ms(20);
    }
}

long long pf_wall_ms(long long skew_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + skew_ms;
}

/* ---- libredlock on the loop ---------------------------------------------------------------- */

static void pending_cb(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    pf_pending *p = data;
    h_record_cb(lock, status, result, &p->rec);
    (*p->done)++;
}

void pf_acquire_start(redlock_client *c, const char *resource, uint64_t ttl_ms,
                      const redlock_lock_opts *opts, pf_pending *p, int *done)
{
    memset(p, 0, sizeof(*p));
    p->done = done;
    assert_int_equal(redlock_acquire(c, resource, strlen(resource), ttl_ms, opts, pending_cb, p),
                     0);
}

redlock_client *pf_client(h_env *env)
{
    redlock_options o;
    h_test_options(&o);
    redlock_client *c = NULL;
    char err[256];
    int rc =
        redlock_client_new(&env->loop, env->cluster.urls, env->cluster.n, &o, &c, err, sizeof(err));
    if (rc != 0)
        fail_msg("redlock_client_new: %s: %s", redlock_err_name(rc), err);
    return c;
}

void pf_redlock_overrun(h_env *env, const char *resource, uint64_t ttl_ms, const char *title)
{
    const unsigned n = env->cluster.n;
    const size_t rlen = strlen(resource);
    redlock_client *a = pf_client(env), *b = pf_client(env), *c = pf_client(env);
    pf_history h;
    pf_history_init(&h, title);

    h_record ra;
    assert_int_equal(h_acquire(env, a, resource, ttl_ms, NULL, &ra), 0);
    const uint64_t a_deadline_us = redlock_lock_deadline_us(ra.lock);

    /* A's slow step: B waits for the lock meanwhile and gets it once A's keys expired. */
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.wait_ms = ttl_ms + H_WAIT_MS;
    h_record rb;
    int rc = h_acquire(env, b, resource, PF_LONG_TTL_MS, &lo, &rb);
    if (rc != 0)
        h_dump_record("B's acquire", &rb);
    assert_int_equal(rc, 0);
    if (rb.at_us < a_deadline_us)
        fail_msg("B got the lock %llu us before A's deadline",
                 (unsigned long long)(a_deadline_us - rb.at_us));
    size_t a_token_len = 0, b_token_len = 0;
    const char *a_token = redlock_lock_token(ra.lock, &a_token_len);
    const char *b_token = redlock_lock_token(rb.lock, &b_token_len);
    /* A's keys expire node by node: B may have found one still there and won on a majority
     * without it (and the callback came at the majority, before the last node's answer). Once
     * A's keys are all gone, the nodes holding B's token are the ones B keeps to its release. */
    assert_true(h_wait_holding(env, resource, rlen, a_token, a_token_len, 0, H_WAIT_MS));
    const unsigned b_held = h_count_holding(env, resource, rlen, b_token, b_token_len);
    assert_true(b_held > n / 2);
    assert_true(b_held >= rb.votes_yes);

    /* A's slow step ends. It checks before going on: not held any more, so it stops there (its
     * hold ended at its deadline), and unlocks as the legacy code does. Compare-and-delete: no
     * node deletes B's key, and the release says the hold had lapsed. */
    assert_false(redlock_lock_is_held(ra.lock, redlock_now_us()));
    pf_history_add(&h, "A", ra.at_us, a_deadline_us);
    h_record rel;
    assert_int_equal(h_release(env, ra.lock, &rel), REDLOCK_ELOST);
    assert_int_equal(rel.votes_yes, 0);
    assert_int_equal(h_count_holding(env, resource, rlen, b_token, b_token_len), b_held);

    /* C tries while B works: refused, every node B holds still holds its token. */
    h_record rc_rec;
    rc = h_acquire(env, c, resource, ttl_ms, NULL, &rc_rec);
    if (rc != REDLOCK_EBUSY)
        h_dump_record("C's acquire", &rc_rec);
    assert_int_equal(rc, REDLOCK_EBUSY);
    h_drain(env, c); /* C's lost round released its own keys everywhere: none of B's */
    assert_int_equal(h_count_holding(env, resource, rlen, b_token, b_token_len), b_held);

    /* B's work ends: its release finds its key on every node it holds. */
    const uint64_t b_end_us = redlock_now_us();
    assert_true(redlock_lock_is_held(rb.lock, b_end_us));
    assert_int_equal(h_release(env, rb.lock, &rel), 0);
    assert_int_equal(rel.votes_yes, b_held);
    pf_history_add(&h, "B", rb.at_us, b_end_us);
    unsigned overlaps = pf_report(&h);
    printf("#   A's release: REDLOCK_ELOST, 0 keys deleted; C's acquire: REDLOCK_EBUSY\n");
    assert_int_equal(overlaps, 0);

    redlock_lock_free(ra.lock);
    redlock_lock_free(rb.lock);
    h_close_client(env, a);
    h_close_client(env, b);
    h_close_client(env, c);
}
