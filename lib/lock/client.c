/* SPDX-License-Identifier: MIT */
/* client.c - the client core (client.h): options, creation, the timer queue and clock, the
 * close's steps and its end. Every node and every clock reading goes through the io (io.h); the
 * layers above hear of what they must through callbacks they set themselves (client.h), and the
 * close ends each object through its own closer. */
#include "client.h"

#include <stdarg.h>
#include <stdio.h>

#include "abi.h"
#include "node.h"
#include "rto.h"
#include "url.h"

/* ---- errors and options ---------------------------------------------------------------------- */

int redlock__client_error(redlock_client *c, int err, const char *fmt, ...)
{
    if (c == NULL)
        return err;
    va_list ap;
    va_start(ap, fmt);
    redlock__vfmt(c->last_error, sizeof(c->last_error), fmt, ap);
    va_end(ap);
    return err;
}

int redlock__client_resources_valid(const void *const *resources, const size_t *lens,
                                    unsigned count, char *why, size_t why_len)
{
    if (resources == NULL || lens == NULL || count == 0) {
        redlock__fmt(why, why_len, "no resources");
        return REDLOCK_EINVAL;
    }
    if (count > REDLOCK_RESOURCES_MAX) {
        redlock__fmt(why, why_len, "%u resources, over %u", count, (unsigned)REDLOCK_RESOURCES_MAX);
        return REDLOCK_EINVAL;
    }
    size_t total = 0;
    for (unsigned i = 0; i < count; i++) {
        size_t len = redlock__len(resources[i], lens[i]);
        if (resources[i] == NULL || len == 0) {
            const char *what = resources[i] == NULL ? "NULL" : "empty";
            if (count == 1)
                redlock__fmt(why, why_len, "resource is %s", what);
            else
                redlock__fmt(why, why_len, "resource %u is %s", i, what);
            return REDLOCK_EINVAL;
        }
        if (len > REDLOCK_RESOURCE_MAX - total) {
            if (count == 1)
                redlock__fmt(why, why_len, "resource is %zu bytes, " REDLOCK__OVER_MAX, len,
                             (unsigned)REDLOCK_RESOURCE_MAX);
            else
                redlock__fmt(why, why_len, "resources are %zu bytes or more, " REDLOCK__OVER_MAX,
                             total + len, (unsigned)REDLOCK_RESOURCE_MAX);
            return REDLOCK_EINVAL;
        }
        total += len;
    }
    return 0;
}

int redlock__client_check_resource(redlock_client *c, const void *resource, size_t len)
{
    return redlock__client_check_resources(c, &resource, &len, 1);
}

int redlock__client_check_resources(redlock_client *c, const void *const *resources,
                                    const size_t *lens, unsigned count)
{
    if (c->closing)
        return redlock__client_error(c, REDLOCK_ECLOSING, "client is closing");
    char why[REDLOCK_ERROR_TEXT_MAX];
    int rc = redlock__client_resources_valid(resources, lens, count, why, sizeof(why));
    if (rc != 0)
        return redlock__client_error(c, rc, "%s", why);
    if (count == 1)
        return 0;
    /* Two alike would make a node's script see one key twice: refused, whatever the order. The
     * hashes make the pairwise check cheap (at most REDLOCK_RESOURCES_MAX^2 / 2 of them). */
    uint64_t stack[64];
    uint64_t *hash = count <= 64 ? stack : redlock__malloc(&c->alloc, count * sizeof(*hash));
    if (hash == NULL)
        return redlock__client_error(c, REDLOCK_ENOMEM, "out of memory");
    for (unsigned i = 0; i < count; i++)
        hash[i] = redlock__hash(resources[i], redlock__len(resources[i], lens[i]));
    for (unsigned i = 1; rc == 0 && i < count; i++) {
        size_t len = redlock__len(resources[i], lens[i]);
        for (unsigned j = 0; j < i; j++) {
            if (hash[i] == hash[j] && len == redlock__len(resources[j], lens[j]) &&
                memcmp(resources[i], resources[j], len) == 0) {
                rc = redlock__client_error(c, REDLOCK_EINVAL,
                                           "resources %u and %u are the same (a set names each "
                                           "resource once)",
                                           j, i);
                break;
            }
        }
    }
    if (hash != stack)
        redlock__free(&c->alloc, hash);
    return rc;
}

int redlock__client_check_call(redlock_client *c, const void *const *resources, const size_t *lens,
                               unsigned count, redlock_cb cb)
{
    if (c == NULL)
        return REDLOCK_EINVAL;
    int rc = redlock__client_check_resources(c, resources, lens, count);
    if (rc != 0)
        return rc;
    if (cb == NULL)
        return redlock__client_error(c, REDLOCK_EINVAL, "callback is NULL");
    return 0;
}

const char *redlock_client_last_error(const redlock_client *c)
{
    return c != NULL ? c->last_error : "";
}

static void options_defaults(redlock_options *o)
{
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
    o->ttl_ms = 10000;
    o->node_timeout_ms = 0; /* adaptive */
    o->connect_timeout_ms = 3000;
    o->drift_factor = 0.01;
    o->min_validity_ms = 0;
    o->retry_count = 3;
    o->retry_delay_ms = 200;
    o->retry_jitter_ms = 100;
    o->key_prefix = "";
    o->reconnect_min_ms = 50;
    o->reconnect_max_ms = 5000;
    o->max_inflight_per_node = 65536;
}

void redlock_options_init_sized(redlock_options *o, size_t size)
{
    redlock_options defaults;
    options_defaults(&defaults);
    redlock__struct_init(o, size, &defaults, sizeof(defaults));
}

int redlock__options_in(redlock_options *dst, const redlock_options *src, char *err, size_t err_len)
{
    options_defaults(dst);
    if (src == NULL)
        return 0;
    return redlock__struct_in(dst, sizeof(*dst), src, REDLOCK__OPTIONS_MIN, "opts",
                              "redlock_options_init", err, err_len);
}

static int check_options(const redlock_options *o, char *err, size_t err_len)
{
#define BAD(...) return (redlock__fmt(err, err_len, __VA_ARGS__), REDLOCK_EINVAL)
    if (o->ttl_ms == 0 || o->ttl_ms > REDLOCK_TTL_MAX_MS)
        BAD("ttl_ms must be 1..%llu", (unsigned long long)REDLOCK_TTL_MAX_MS);
    if (o->node_timeout_ms > 3600000)
        BAD("node_timeout_ms must be 0 (adaptive) or 1..3600000");
    if (o->connect_timeout_ms == 0 || o->connect_timeout_ms > 3600000)
        BAD("connect_timeout_ms must be 1..3600000");
    if (!(o->drift_factor >= 0 && o->drift_factor < 1)) /* also false for NaN */
        BAD("drift_factor must be in [0, 1)");
    if (o->retry_count < 0)
        BAD("retry_count must be >= 0");
    if (o->retry_delay_ms > 3600000 || o->retry_jitter_ms > 3600000)
        BAD("retry_delay_ms and retry_jitter_ms must be <= 3600000");
    if (o->reconnect_min_ms == 0 || o->reconnect_max_ms < o->reconnect_min_ms ||
        o->reconnect_max_ms > 3600000)
        BAD("reconnect_min_ms must be >= 1 and <= reconnect_max_ms <= 3600000");
    if (o->max_inflight_per_node == 0)
        BAD("max_inflight_per_node must be >= 1");
    if (o->min_validity_ms >= o->ttl_ms)
        BAD("min_validity_ms must be below ttl_ms");
#undef BAD
    return 0;
}

/* ---- the timer queue ------------------------------------------------------------------------- */

uint64_t redlock__client_now(redlock_client *c)
{
    return c->io->ops->now_us(c->io);
}

uint64_t redlock__client_slowest_timeout_ms(const redlock_client *c)
{
    uint64_t slowest_us = 0;
    for (unsigned i = 0; i < c->n_nodes; i++) {
        uint64_t us;
        if (c->io->ops->timeout_us != NULL) {
            us = c->io->ops->timeout_us(c->io, i);
        } else {
            int url_ms = c->urls[i].timeout_ms;
            us = redlock__rto_bound_us(url_ms > 0 ? (uint64_t)url_ms * 1000
                                                  : c->opts.node_timeout_ms * 1000);
        }
        slowest_us = REDLOCK__MAX(slowest_us, us);
    }
    return redlock__ms_ceil(slowest_us);
}

static void rearm(redlock_client *c)
{
    if (c->in_wake || c->closing)
        return;
    uint64_t due = redlock__timerq_next_due(&c->timers);
    if (due != c->wake_due) {
        c->wake_due = due;
        c->io->ops->wake_at(c->io, due);
    }
}

/* The server kept every key it had: as if it answered a request sent at asked_us (kept.c). */
static void on_io_node_same(redlock__io *io, unsigned node, uint64_t asked_us)
{
    redlock_client *c = io->owner;
    if (node < c->n_nodes && asked_us > c->heard_us[node])
        c->heard_us[node] = asked_us;
}

static void on_wake(redlock__io *io)
{
    redlock_client *c = io->owner;
    c->wake_due = UINT64_MAX;
    c->in_wake = true;
    uint64_t now = redlock__client_now(c);
    redlock__timer *t;
    while (!c->closing && (t = redlock__timerq_pop_due(&c->timers, now)) != NULL)
        t->cb(t);
    c->in_wake = false;
    rearm(c);
}

void redlock__client_timer_start(redlock_client *c, redlock__timer *t, uint64_t due_us,
                                 redlock__timer_cb cb)
{
    redlock__timerq_start(&c->timers, t, due_us, cb);
    rearm(c);
}

void redlock__client_timer_stop(redlock_client *c, redlock__timer *t)
{
    redlock__timerq_stop(&c->timers, t);
    rearm(c);
}

/* ---- the client ------------------------------------------------------------------------------ */

static void client_free(redlock_client *c)
{
    for (unsigned i = 0; c->urls != NULL && i < c->n_nodes; i++)
        redlock_url_free(&c->urls[i]);
    redlock__alloc alloc = c->alloc;
    redlock__spares_free(&c->spare_rounds, &alloc);
    redlock__spares_free(&c->spare_ops, &alloc);
    redlock__buf_free(&c->wire, &alloc);
    redlock__free(&alloc, c->urls);
    redlock__free(&alloc, c->key_prefix);
    redlock__tls_ctx_free(c->tls);
    redlock__free(&alloc, c);
}

/* The close's end, once every request has completed (rounds are gone but those the operations
 * hold). docs/api.md promises its order, and it is the one central sequence left: each object
 * knows only its own end, while the order runs across them all - every operation delivered
 * (REDLOCK_ECANCELED; handles are still valid there), then every auto-extension told its lock is
 * lost, then every hold of redlock_using told it ended, then every handle freed, then the close
 * callback. So the client keeps one list per phase, each object links itself into its phase's
 * and unlinks itself when it ends (client.h, redlock__closer), and this walks the lists in
 * order. A callback may end other objects (free a handle, release a lock): they unlink
 * themselves, so each list is taken from its head again after every call. */
static void on_io_closed(redlock__io *io)
{
    redlock_client *c = io->owner;
    redlock__list *const phases[] = {&c->ops, &c->closing_lost, &c->closing_ended, &c->locks};
    for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]); i++) {
        while (!redlock__list_empty(phases[i])) {
            redlock__closer *closer = REDLOCK__CONTAINER_OF(phases[i]->next, redlock__closer, link);
            redlock__closer_unlink(closer);
            closer->close_cb(closer);
        }
    }
    if (c->close_cb != NULL)
        c->close_cb(c, c->close_data);
    client_free(c);
}

int redlock__client_close_begin(redlock_client *c, unsigned flags, redlock_close_cb close_cb,
                                void *data)
{
    if (c == NULL)
        return REDLOCK_EINVAL;
    if (c->closing)
        return REDLOCK_ECLOSING;
    if ((flags & ~REDLOCK_CLOSE_FAST) != 0)
        return redlock__client_error(c, REDLOCK_EINVAL, "unknown flags 0x%x", flags);
    c->closing = true;
    c->close_cb = close_cb;
    c->close_data = data;
    /* Pending retries and deferred deliveries will not run: the close delivers them. */
    while (redlock__timerq_pop_due(&c->timers, UINT64_MAX) != NULL)
        ;
    /* The io closes once the last release is done; this count keeps it open while they are
     * started (a node that is down answers at once), until the caller's last step. */
    c->close_rounds = 1;
    return 0;
}

void redlock__client_close_step(redlock_client *c)
{
    if (--c->close_rounds == 0)
        c->io->ops->close(c->io);
}

unsigned redlock_client_node_count(const redlock_client *c)
{
    return c != NULL ? c->n_nodes : 0;
}

const char *redlock_client_node_url(const redlock_client *c, unsigned i)
{
    return c != NULL && i < c->n_nodes ? c->urls[i].redacted : NULL;
}

uv_loop_t *redlock_client_loop(const redlock_client *c)
{
    return c != NULL ? c->loop : NULL;
}

static int parse_nodes(redlock_client *c, const char *const *urls, char *err, size_t err_len)
{
    for (unsigned i = 0; i < c->n_nodes; i++) {
        char msg[200];
        if (urls[i] == NULL) {
            redlock__fmt(err, err_len, "node %u: URL is NULL", i);
            return REDLOCK_EINVAL;
        }
        int rc = redlock_url_parse(&c->urls[i], urls[i], msg, sizeof(msg));
        if (rc != 0) {
            redlock__fmt(err, err_len, "node %u: %s", i, msg);
            return rc;
        }
        for (unsigned j = 0; j < i; j++) {
            if (redlock__url_same_node(&c->urls[i], &c->urls[j])) {
                char where[160];
                redlock__url_endpoint(&c->urls[i], where, sizeof(where));
                redlock__fmt(err, err_len,
                             "node %u (%s) is the same as node %u: it would count twice toward "
                             "the quorum",
                             i, where, j);
                return REDLOCK_EDUPNODE;
            }
        }
    }
    return 0;
}

int redlock__client_create(uv_loop_t *loop, const char *const *node_urls, unsigned n_nodes,
                           const redlock_options *opts, redlock__io_factory make_io, void *make_ctx,
                           redlock_client **client_out, char *err, size_t err_len)
{
    char scratch[1];
    redlock__err_start(&err, &err_len, scratch, sizeof(scratch));
    if (node_urls == NULL || client_out == NULL) {
        redlock__fmt(err, err_len, "node_urls and client_out must not be NULL");
        return REDLOCK_EINVAL;
    }
    *client_out = NULL;
    if (n_nodes == 0 || n_nodes > REDLOCK_MAX_NODES) {
        redlock__fmt(err, err_len, "need 1..%d nodes, got %u", REDLOCK_MAX_NODES, n_nodes);
        return REDLOCK_EINVAL;
    }
    redlock_options o;
    int rc = redlock__options_in(&o, opts, err, err_len);
    if (rc != 0)
        return rc;
    if (o.key_prefix == NULL)
        o.key_prefix = "";
    rc = check_options(&o, err, err_len);
    if (rc != 0)
        return rc;

    redlock__keep_stdio_taken();
    redlock__alloc alloc;
    redlock__alloc_init(&alloc, o.realloc_fn, o.realloc_ud);
    redlock_client *c = redlock__calloc(&alloc, 1, sizeof(*c));
    if (c == NULL) {
        redlock__fmt(err, err_len, "out of memory");
        return REDLOCK_ENOMEM;
    }
    c->alloc = alloc;
    c->loop = loop;
    c->opts = o;
    c->n_nodes = n_nodes;
    c->wake_due = UINT64_MAX;
    redlock__timerq_init(&c->timers);
    redlock__list_init(&c->ops);
    redlock__list_init(&c->closing_lost);
    redlock__list_init(&c->closing_ended);
    redlock__list_init(&c->locks);
    redlock__list_init(&c->releases);
    c->key_prefix = redlock__strdup(&alloc, o.key_prefix);
    c->urls = redlock__calloc(&alloc, n_nodes, sizeof(c->urls[0]));
    if (c->key_prefix == NULL || c->urls == NULL) {
        redlock__fmt(err, err_len, "out of memory");
        client_free(c);
        return REDLOCK_ENOMEM;
    }
    c->key_prefix_len = strlen(c->key_prefix);
    c->opts.key_prefix = c->key_prefix;
    rc = parse_nodes(c, node_urls, err, err_len);
    for (unsigned i = 0; rc == 0 && i < n_nodes; i++)
        c->has_cluster |= c->urls[i].cluster;
    if (rc == 0)
        rc = redlock__client_tls_setup(c, err, err_len);
    if (rc != 0) {
        client_free(c);
        return rc;
    }

    redlock__node_config cfgs[REDLOCK_MAX_NODES];
    for (unsigned i = 0; i < n_nodes; i++) {
        const redlock_url *u = &c->urls[i];
        uint64_t timeout_ms = u->timeout_ms > 0 ? (uint64_t)u->timeout_ms : o.node_timeout_ms;
        cfgs[i] = (redlock__node_config){
            .url = u,
            .name = u->redacted,
            .timeout_us = timeout_ms * 1000,
            .connect_timeout_us = o.connect_timeout_ms * 1000,
            .reconnect_min_us = o.reconnect_min_ms * 1000,
            .reconnect_max_us = o.reconnect_max_ms * 1000,
            .max_inflight = o.max_inflight_per_node,
            .alloc = &c->alloc,
            .tls = u->tls ? c->tls : NULL,
            .log = o.log_fn != NULL ? redlock__client_node_log : NULL,
            .log_ctx = c,
        };
    }
    rc = make_io(make_ctx, cfgs, n_nodes, &c->alloc, &c->io);
    if (rc != 0) {
        redlock__fmt(err, err_len, "out of memory");
        client_free(c);
        return rc;
    }
    c->io->owner = c;
    c->io->on_wake = on_wake;
    c->io->on_closed = on_io_closed;
    c->io->on_node_same = on_io_node_same;
    *client_out = c;
    return 0;
}

/* ---- the log --------------------------------------------------------------------------------- */

void redlock__client_node_log(void *ctx, redlock_log_level level, const char *url,
                              const char *message)
{
    redlock_client *c = ctx;
    c->opts.log_fn(c, level, url, message, c->opts.log_data);
}

void redlock__client_log(redlock_client *c, redlock_log_level level, const char *url,
                         const char *fmt, ...)
{
    if (c->opts.log_fn == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    redlock__vlog(redlock__client_node_log, c, level, url, "", fmt, ap);
    va_end(ap);
}
