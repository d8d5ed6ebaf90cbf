/* SPDX-License-Identifier: MIT */
/* subscriber.c - the subscriber connections that wake waiters (subscriber.h): one object,
 * redlock__sub, one prefix; the channels they follow are chanset.c's. */
#include "subscriber.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "command.h"
#include "handshake.h"
#include "reader.h"
#include "scrub.h"
#include "stream.h"

struct redlock__sub {
    uv_loop_t *loop;
    redlock__node_config cfg;
    const redlock__chanset *set;
    redlock__sub_msg_cb cb;
    void *ctx;
    unsigned node;
    redlock__stream stream;
    bool stream_live;    /* initialised and started, its close not complete */
    bool stream_closing; /* redlock__stream_close called, on_closed not yet */
    bool closing;        /* redlock__sub_close called */
    bool auth_pending;   /* the reply to AUTH is still owed */
    bool info_pending;   /* the reply to INFO server is still owed */
    bool ready;          /* connected, and SUBSCRIBE sent for everything wanted */
    bool refused_said;   /* a refused SUBSCRIBE was logged on this connection */
    /* The run_id of the server this connection reached (INFO server; "" unknown): the io counts
     * a message as its node's word only when the node's command connection reached that same
     * server (a grant is a vote for exactly one server). */
    char run_id[REDLOCK__RUN_ID_LEN + 1];
    redlock__reader *reader;
    uv_timer_t idle_timer;
    redlock__closing closes; /* the idle timer, and the stream if it ever started */
};

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void
sub_log(redlock__sub *s, redlock_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redlock__node_cfg_vlog(&s->cfg, level, "subscriber: ", fmt, ap);
    va_end(ap);
}

/* (UN)SUBSCRIBE name onto the stream's output buffer. */
static int append_sub(redlock__sub *s, const char *verb, const char *name, size_t len)
{
    redlock__reader_allow_bulk(s->reader, len); /* the channel comes back in the replies */
    const char *argv[2] = {verb, name};
    size_t argvlen[2] = {strlen(verb), len};
    return redlock__resp_append(2, argv, argvlen, redlock__stream_out(&s->stream), s->cfg.alloc);
}

/* The connection is accepted: subscribe to everything wanted now. */
static void sub_ready(redlock__sub *s)
{
    redlock__stream_established(&s->stream);
    s->ready = true;
    int rc = 0;
    for (unsigned i = 0; rc == 0 && i < s->set->n; i++)
        rc = append_sub(s, "SUBSCRIBE", s->set->v[i].name, s->set->v[i].len);
    if (rc != 0) {
        sub_log(s, REDLOCK_LOG_WARN, "out of memory: waiters poll until the next connection");
        s->ready = false;
        redlock__stream_drop(&s->stream);
        return;
    }
    redlock__stream_flush(&s->stream);
}

static void on_open(redlock__stream *st)
{
    redlock__sub *s = REDLOCK__CONTAINER_OF(st, redlock__sub, stream);
    redlock__reader_free(s->reader);
    s->reader = redlock__reader_new(REDLOCK__READER_SUBSCRIBER, s->cfg.alloc);
    s->ready = false;
    s->refused_said = false;
    s->run_id[0] = '\0';
    if (s->reader == NULL) {
        redlock__stream_drop(st);
        return;
    }
    const char *argv[3];
    size_t argvlen[3];
    int argc = redlock__handshake_auth_argv(s->cfg.url, argv, argvlen);
    s->auth_pending = argc > 0;
    int rc = argc > 0
                 ? redlock__resp_append(argc, argv, argvlen, redlock__stream_out(st), s->cfg.alloc)
                 : 0;
    /* INFO server, before any SUBSCRIBE: which server this is. */
    argv[0] = "INFO", argvlen[0] = 4;
    argv[1] = "server", argvlen[1] = 6;
    if (rc == 0)
        rc = redlock__resp_append(2, argv, argvlen, redlock__stream_out(st), s->cfg.alloc);
    if (rc != 0) {
        redlock__stream_drop(st);
        return;
    }
    s->info_pending = true;
    redlock__stream_flush(st);
}

static bool is_str(const redisReply *r, const char *text)
{
    size_t len = strlen(text);
    return r->type == REDIS_REPLY_STRING && r->len == len && memcmp(r->str, text, len) == 0;
}

/* A refusal's text, cut to fit said (size bytes); returns what to fix when it refused the URL's
 * credentials (handshake.h), else NULL. */
static const char *refusal(const redisReply *r, char *said, size_t size)
{
    if (r->type != REDIS_REPLY_ERROR) {
        redlock__fmt(said, size, "no +OK");
        return NULL;
    }
    redlock__text_fit(said, size, r->str, r->len);
    return redlock__handshake_auth_refusal(r->str, r->len);
}

/* One reply. Returns false if the connection was given up. */
static bool on_reply(redlock__sub *s, const redisReply *r)
{
    if (s->auth_pending) {
        s->auth_pending = false;
        if (r->type == REDIS_REPLY_STATUS && r->len == 2 && memcmp(r->str, "OK", 2) == 0)
            return true; /* INFO's reply comes next */
        char said[124];
        const char *auth = refusal(r, said, sizeof(said));
        sub_log(s, REDLOCK_LOG_WARN, "AUTH refused (%s): waiters poll", auth != NULL ? auth : said);
        redlock__stream_drop(&s->stream);
        return false;
    }
    if (s->info_pending) {
        /* A refused INFO leaves the server unknown: its messages still wake waiters, but no
         * grant heard here counts (subscriber.h). */
        s->info_pending = false;
        if (r->type == REDIS_REPLY_STRING)
            redlock__handshake_run_id(r->str, r->len, s->run_id);
        sub_ready(s);
        return s->ready;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        /* An ACL without +subscribe or access to the channel: nothing will come, waiters poll. */
        char said[124];
        const char *auth = refusal(r, said, sizeof(said));
        if (!s->refused_said && auth != NULL)
            sub_log(s, REDLOCK_LOG_WARN, "SUBSCRIBE refused: %s; waiters poll", auth);
        else if (!s->refused_said)
            sub_log(s, REDLOCK_LOG_WARN,
                    "SUBSCRIBE refused (%s): waiters poll (allow +subscribe and the keys' "
                    "channels, e.g. &<prefix>*)",
                    said);
        s->refused_said = true;
        return true;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 && is_str(r->element[0], "message") &&
        r->element[1]->type == REDIS_REPLY_STRING && r->element[2]->type == REDIS_REPLY_STRING)
        s->cb(s->ctx, s->node, s->run_id, r->element[1]->str, r->element[1]->len,
              r->element[2]->str, r->element[2]->len);
    /* "subscribe" and "unsubscribe" confirmations need nothing. */
    return true;
}

static bool each_reply(void *ctx, redisReply *reply)
{
    redlock__sub *s = ctx;
    redlock__scrub_error(reply, s->cfg.url->password);
    /* The message callback may close the client: the stream's state tells. */
    return on_reply(s, reply) && redlock__stream_is_open(&s->stream);
}

static void on_read(redlock__stream *st, const char *data, size_t len)
{
    redlock__sub *s = REDLOCK__CONTAINER_OF(st, redlock__sub, stream);
    if (redlock__reader_each(s->reader, data, len, each_reply, s) != 0) {
        sub_log(s, REDLOCK_LOG_WARN, "protocol error: %s", redlock__reader_error(s->reader));
        s->ready = false;
        redlock__stream_drop(st);
    }
}

static void on_down(redlock__stream *st, const char *why)
{
    redlock__sub *s = REDLOCK__CONTAINER_OF(st, redlock__sub, stream);
    if (s->ready)
        sub_log(s, REDLOCK_LOG_DEBUG, "connection lost: %s (waiters poll until it is back)", why);
    s->ready = false;
    s->auth_pending = false;
    s->info_pending = false;
}

static void maybe_done(redlock__sub *s)
{
    if (!redlock__closing_done(&s->closes))
        return;
    redlock__closing told = s->closes;
    redlock__reader_free(s->reader);
    redlock__free(s->cfg.alloc, s);
    redlock__closing_tell(told);
}

static void start_stream(redlock__sub *s);

static void on_stream_closed(redlock__stream *st)
{
    redlock__sub *s = REDLOCK__CONTAINER_OF(st, redlock__sub, stream);
    s->stream_live = false;
    s->stream_closing = false;
    s->ready = false;
    if (s->closing) {
        maybe_done(s);
        return;
    }
    if (s->set->n > 0) /* wanted again while it was closing */
        start_stream(s);
}

static void start_stream(redlock__sub *s)
{
    redlock__stream_config scfg = {
        .url = s->cfg.url,
        .tls = s->cfg.tls,
        .connect_timeout_us = s->cfg.connect_timeout_us,
        .reconnect_min_us = s->cfg.reconnect_min_us,
        .reconnect_max_us = s->cfg.reconnect_max_us,
        .alloc = s->cfg.alloc,
        .on_open = on_open,
        .on_read = on_read,
        .on_down = on_down,
        .on_closed = on_stream_closed,
    };
    memset(&s->stream, 0, sizeof(s->stream));
    redlock__stream_init(&s->stream, s->loop, &scfg);
    s->stream_live = true;
    redlock__stream_start(&s->stream);
}

static void close_stream(redlock__sub *s)
{
    s->stream_closing = true;
    s->ready = false;
    redlock__stream_close(&s->stream);
}

static void on_idle(uv_timer_t *t)
{
    redlock__sub *s = t->data;
    if (s->set->n == 0 && s->stream_live && !s->stream_closing)
        close_stream(s);
}

int redlock__sub_new(uv_loop_t *loop, const redlock__node_config *cfg, unsigned node,
                     const redlock__chanset *set, redlock__sub_msg_cb cb, void *ctx,
                     redlock__sub **out)
{
    redlock__sub *s = redlock__calloc(cfg->alloc, 1, sizeof(*s));
    if (s == NULL)
        return REDLOCK_ENOMEM;
    s->loop = loop;
    s->cfg = *cfg;
    s->set = set;
    s->cb = cb;
    s->ctx = ctx;
    s->node = node;
    *out = s;
    return 0;
}

void redlock__sub_start(redlock__sub *s)
{
    uv_timer_init(s->loop, &s->idle_timer);
    s->idle_timer.data = s;
}

void redlock__sub_free_unstarted(redlock__sub *s)
{
    redlock__free(s->cfg.alloc, s);
}

void redlock__sub_changed(redlock__sub *s, const char *name, size_t len, bool joined)
{
    if (s->closing)
        return;
    if (joined) {
        uv_timer_stop(&s->idle_timer);
        if (!s->stream_live) {
            start_stream(s); /* subscribes to the whole set once connected */
            return;
        }
        if (s->ready && append_sub(s, "SUBSCRIBE", name, len) == 0)
            redlock__stream_flush(&s->stream);
        return;
    }
    if (s->ready && append_sub(s, "UNSUBSCRIBE", name, len) == 0)
        redlock__stream_flush(&s->stream);
    if (s->set->n == 0)
        uv_timer_start(&s->idle_timer, on_idle, REDLOCK__SUB_IDLE_MS, 0);
}

static void on_timer_closed(uv_handle_t *h)
{
    maybe_done(h->data);
}

void redlock__sub_close(redlock__sub *s, void (*cb)(void *data), void *data)
{
    s->closing = true;
    s->closes = (redlock__closing){.pending = 1, .cb = cb, .data = data}; /* the idle timer */
    if (s->stream_live) {
        redlock__closing_add(&s->closes, 1);
        if (!s->stream_closing)
            close_stream(s);
    }
    uv_timer_stop(&s->idle_timer);
    uv_close((uv_handle_t *)&s->idle_timer, on_timer_closed);
}
