/* SPDX-License-Identifier: MIT */
/* stats.c - the client's counters, the text of a failure, the names of log levels and node
 * states, and the node state query (stats.h). */
#include "stats.h"

#include <stdio.h>

#include "abi.h"
#include "lock.h"

/* ---- names ----------------------------------------------------------------------------------- */

const char *redlock_log_level_name(redlock_log_level level)
{
    switch (level) {
    case REDLOCK_LOG_ERROR:
        return "error";
    case REDLOCK_LOG_WARN:
        return "warn";
    case REDLOCK_LOG_INFO:
        return "info";
    case REDLOCK_LOG_DEBUG:
        return "debug";
    }
    return "?";
}

const char *redlock_node_state_name(redlock_node_state state)
{
    switch (state) {
    case REDLOCK_NODE_CONNECTING:
        return "connecting";
    case REDLOCK_NODE_UP:
        return "up";
    case REDLOCK_NODE_DOWN:
        return "down";
    case REDLOCK_NODE_CLOSED:
        return "closed";
    }
    return "?";
}

/* ---- the text of a failure ------------------------------------------------------------------ */

void redlock__stats_failure_text(char *out, size_t out_len, int status, const redlock_result *res)
{
    size_t used = (size_t)snprintf(out, out_len, "%s", redlock_strerror(status));
    unsigned listed = 0;
    for (unsigned i = 0; res != NULL && i < res->n_nodes; i++) {
        const redlock_node_result *nr = &res->nodes[i];
        if (nr->vote == REDLOCK_VOTE_YES || nr->vote == REDLOCK_VOTE_NONE)
            continue;
        const char *why = nr->error != NULL             ? nr->error
                          : nr->vote == REDLOCK_VOTE_NO ? "held by another holder"
                                                        : "";
        const char *vote = nr->vote == REDLOCK_VOTE_NO        ? "no"
                           : nr->vote == REDLOCK_VOTE_TIMEOUT ? "timeout"
                                                              : "error";
        if (used + 1 >= out_len)
            break; /* what does not fit is cut, as any of the library's texts */
        int n = snprintf(out + used, out_len - used, "%s%s %s (%s)", listed == 0 ? ": " : "; ",
                         nr->url != NULL ? nr->url : "?", vote, why);
        if (n < 0)
            break;
        used = REDLOCK__MIN(used + (size_t)n, out_len - 1);
        listed++;
    }
}

/* ---- counters -------------------------------------------------------------------------------- */

static uint64_t slow_round_us(const redlock_client *c)
{
    uint64_t ms = c->opts.slow_round_ms != 0 ? c->opts.slow_round_ms
                                             : redlock__client_slowest_timeout_ms(c) / 2;
    return REDLOCK__MAX(ms, 1) * 1000;
}

static const char *kind_name(redlock__cmd_kind kind)
{
    switch (kind) {
    case REDLOCK__CMD_ACQUIRE:
        return "acquire";
    case REDLOCK__CMD_ACQUIRE_FENCED:
        return "fenced acquire";
    case REDLOCK__CMD_COMMIT:
        return "fenced acquire's commit";
    case REDLOCK__CMD_EXTEND:
        return "extend";
    case REDLOCK__CMD_RELEASE:
        return "release";
    case REDLOCK__CMD_INSPECT:
        return "inspect";
    default: /* a node's own commands (cluster.c), never a round */
        return redlock__cmd_name(kind);
    }
}

static void log_slow_round(redlock_client *c, redlock__cmd_kind kind, uint64_t took_us,
                           const redlock_node_result *results)
{
    unsigned slowest = 0;
    for (unsigned i = 1; i < c->n_nodes; i++)
        if (results[i].latency_us > results[slowest].latency_us)
            slowest = i;
    const redlock_node_result *s = &results[slowest];
    redlock__client_log(c, REDLOCK_LOG_WARN, NULL,
                        "slow %s round: %llu ms (slow_round_ms %llu); slowest node %s: %s after "
                        "%llu ms",
                        kind_name(kind), (unsigned long long)(took_us / 1000),
                        (unsigned long long)(slow_round_us(c) / 1000), s->url,
                        redlock_vote_name(s->vote), (unsigned long long)(s->latency_us / 1000));
}

void redlock__stats_round(redlock_client *c, redlock__cmd_kind kind, int status,
                          const redlock_round *q, const redlock_node_result *results)
{
    redlock__stats *st = &c->stats;
    switch (kind) {
    case REDLOCK__CMD_ACQUIRE:
    case REDLOCK__CMD_ACQUIRE_FENCED: /* a lost one; a won one is counted with its commit */
    case REDLOCK__CMD_COMMIT:
        if (status == 0)
            st->rounds_won++;
        else if (status == REDLOCK_EBUSY)
            st->rounds_busy++;
        else if (status == REDLOCK_EEXPIRED)
            st->rounds_expired++;
        else
            st->rounds_broken++;
        break;
    case REDLOCK__CMD_EXTEND:
        if (status == 0)
            st->extensions_ok++;
        else
            st->extensions_failed++;
        break;
    case REDLOCK__CMD_RELEASE:
        if (status == 0)
            st->releases_ok++;
        else if (status == REDLOCK_ELOST)
            st->releases_lapsed++;
        else
            st->releases_unknown++;
        break;
    case REDLOCK__CMD_INSPECT:
    default:
        break;
    }
    /* A release waits for every node: its time runs to now; the others end at their decision. */
    uint64_t end =
        kind == REDLOCK__CMD_RELEASE || redlock_round_decision(q) == REDLOCK_ROUND_PENDING
            ? redlock__client_now(c)
            : redlock__round_decided_us(q);
    uint64_t start = redlock__round_start_us(q);
    uint64_t took = end > start ? end - start : 0;
    if (took > 1000 && took > slow_round_us(c)) { /* it is 1 ms at least: most rounds skip it */
        st->slow_rounds++;
        log_slow_round(c, kind, took, results);
    }
}

void redlock__stats_granted(redlock_client *c)
{
    c->stats.acquires_granted++;
}

void redlock__stats_lost(redlock_client *c, int reason)
{
    if (reason == REDLOCK_ECANCELED)
        return; /* the client's own close */
    c->stats.locks_lost++;
    redlock__client_log(c, REDLOCK_LOG_WARN, NULL, "an auto-extended lock was lost: %s (%s)",
                        redlock_strerror(reason), redlock_err_name(reason));
}

/* ---- the public queries ---------------------------------------------------------------------- */

static unsigned list_length(const redlock__list *head)
{
    unsigned n = 0;
    for (const redlock__list *it = head->next; it != head; it = it->next)
        n++;
    return n;
}

/* The caller's handles: the list also holds those only the library still uses (a lost
 * attempt's, until its release everywhere is answered; an inspect's). */
static void count_locks(const redlock_client *c, redlock_stats *s)
{
    uint64_t now = c->io != NULL ? c->io->ops->now_us(c->io) : 0;
    for (const redlock__list *it = c->locks.next; it != &c->locks; it = it->next) {
        const redlock_lock *lock = REDLOCK__CONTAINER_OF(it, redlock_lock, closer.link);
        if (!lock->user_owned)
            continue;
        s->locks++;
        s->locks_held += redlock_lock_is_held(lock, now);
        s->locks_auto += redlock__auto_is_active(lock->autox);
    }
}

/* Copy the library's struct src (src_size bytes) into the caller's dst, whose `size` member it
 * keeps: only the bytes the caller has are written. */
static void copy_out(void *dst, const void *src, size_t src_size)
{
    size_t size;
    memcpy(&size, dst, sizeof(size));
    size_t n = REDLOCK__MIN(size, src_size);
    memcpy((char *)dst + sizeof(size_t), (const char *)src + sizeof(size_t), n - sizeof(size_t));
}

void redlock_stats_init_sized(redlock_stats *stats, size_t size)
{
    redlock_stats zero;
    memset(&zero, 0, sizeof(zero));
    zero.size = sizeof(zero);
    redlock__struct_init(stats, size, &zero, sizeof(zero));
}

int redlock_client_stats(const redlock_client *c, redlock_stats *out)
{
    if (c == NULL || out == NULL || out->size < REDLOCK__STATS_MIN ||
        out->size > REDLOCK__STRUCT_SIZE_MAX)
        return REDLOCK_EINVAL;
    const redlock__stats *st = &c->stats;
    redlock_stats s;
    memset(&s, 0, sizeof(s));
    s.size = sizeof(s);
    s.rounds_won = st->rounds_won;
    s.rounds_busy = st->rounds_busy;
    s.rounds_broken = st->rounds_broken;
    s.rounds_expired = st->rounds_expired;
    s.extensions_ok = st->extensions_ok;
    s.extensions_failed = st->extensions_failed;
    s.locks_lost = st->locks_lost;
    s.releases_ok = st->releases_ok;
    s.releases_lapsed = st->releases_lapsed;
    s.releases_unknown = st->releases_unknown;
    s.slow_rounds = st->slow_rounds;
    s.acquires_granted = st->acquires_granted;
    s.pending = list_length(&c->ops);
    count_locks(c, &s);
    copy_out(out, &s, sizeof(s));
    return 0;
}

void redlock_node_info_init_sized(redlock_node_info *info, size_t size)
{
    redlock_node_info zero;
    memset(&zero, 0, sizeof(zero));
    zero.size = sizeof(zero);
    redlock__struct_init(info, size, &zero, sizeof(zero));
}

int redlock_client_node_info(const redlock_client *c, unsigned i, redlock_node_info *out)
{
    if (c == NULL || out == NULL || out->size < REDLOCK__NODE_INFO_MIN ||
        out->size > REDLOCK__STRUCT_SIZE_MAX || i >= c->n_nodes)
        return REDLOCK_EINVAL;
    redlock_node_info info;
    memset(&info, 0, sizeof(info));
    info.size = sizeof(info);
    info.url = c->urls[i].redacted;
    info.state = c->closing ? REDLOCK_NODE_CLOSED : REDLOCK_NODE_CONNECTING;
    /* The io is made last in redlock_client_new (a log line from a connect that failed at once
     * may ask before it exists); the simulator's io has no node state to tell. */
    if (c->io != NULL && c->io->ops->node_info != NULL)
        c->io->ops->node_info(c->io, i, &info);
    copy_out(out, &info, sizeof(info));
    return 0;
}
