/* SPDX-License-Identifier: MIT */
/* chaos.c - see chaos.h. */
#include "chaos.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "redlock.h"

#define CHAOS_MIN_GAP_MS 50 /* between chaos events: uniform in [min, max] */
#define CHAOS_MAX_GAP_MS 400
#define RESTART_SLACK_MS 50 /* a killed node stays down ttl + this */
#define DELAY_OVER_MS 20    /* a delay is node timeout + this + up to 2 node timeouts */

static const char *const fault_names[CHAOS_FAULT_KINDS] = {
    [CHAOS_KILL] = "kill",   [CHAOS_PAUSE] = "pause", [CHAOS_BLACKHOLE] = "blackhole",
    [CHAOS_DELAY] = "delay", [CHAOS_RESET] = "reset", [CHAOS_REFUSE] = "refuse",
};

const char *chaos_fault_name(chaos_fault kind)
{
    return kind < CHAOS_FAULT_KINDS ? fault_names[kind] : "?";
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void chaos_init(chaos *ch, fixture_cluster *nodes, proxy *const *proxies, unsigned seed,
                uint64_t ttl_ms, uint64_t node_timeout_ms, uint64_t reconnect_max_ms,
                uint64_t connect_timeout_ms, bool verbose, bool unsafe)
{
    *ch = (chaos){.nodes = nodes,
                  .seed = seed,
                  .ttl_us = ttl_ms * 1000,
                  .node_timeout_us = node_timeout_ms * 1000,
                  .recovery_us = reconnect_max_ms * 1500 + 100000,
                  .connect_timeout_us = connect_timeout_ms * 1000,
                  .verbose = verbose,
                  .unsafe = unsafe};
    for (unsigned i = 0; i < CHAOS_NODES; i++)
        ch->proxies[i] = proxies[i];
}

unsigned long chaos_faults(const chaos *ch)
{
    unsigned long n = 0;
    for (unsigned k = 0; k < CHAOS_FAULT_KINDS; k++)
        n += ch->injected[k];
    return n;
}

void chaos_print_summary(const chaos *ch, FILE *out)
{
    fprintf(out,
            "# chaos: %lu kills, %lu restarts, %lu pauses, %lu resumes, %lu blackholes, "
            "%lu delays, %lu resets, %lu refusals, %lu proxy heals, %lu majority wipes, "
            "%lu fixture errors\n",
            ch->injected[CHAOS_KILL], ch->restarts, ch->injected[CHAOS_PAUSE], ch->resumes,
            ch->injected[CHAOS_BLACKHOLE], ch->injected[CHAOS_DELAY], ch->injected[CHAOS_RESET],
            ch->injected[CHAOS_REFUSE], ch->proxy_heals, ch->wipes, ch->errors);
}

static bool is_down(chaos_node_state s)
{
    return s != CHAOS_UP && s != CHAOS_RECOVERING;
}

static unsigned count_faulty(chaos *ch)
{
    uint64_t now_us = redlock_now_us();
    unsigned n = 0;
    for (unsigned i = 0; i < CHAOS_NODES; i++) {
        if (ch->state[i] == CHAOS_RECOVERING && now_us >= ch->since_us[i] + ch->cooldown_us[i])
            ch->state[i] = CHAOS_UP;
        n += ch->state[i] != CHAOS_UP;
    }
    return n;
}

/* May node come back now? A killed node lost its data, so not before every lock it voted for
 * has expired: it could otherwise vote for a lock a live holder still has. */
static bool may_heal(const chaos *ch, unsigned node, uint64_t now_us)
{
    if (!is_down(ch->state[node]))
        return false;
    return ch->state[node] != CHAOS_KILLED ||
           now_us >= ch->since_us[node] + ch->ttl_us + RESTART_SLACK_MS * 1000;
}

/* A random node that is up (want_up) or may be healed now, or -1 if none. */
static int pick_node(chaos *ch, bool want_up, uint64_t now_us)
{
    unsigned start = (unsigned)rand_r(&ch->seed) % CHAOS_NODES;
    for (unsigned k = 0; k < CHAOS_NODES; k++) {
        unsigned i = (start + k) % CHAOS_NODES;
        if (want_up ? ch->state[i] == CHAOS_UP : may_heal(ch, i, now_us))
            return (int)i;
    }
    return -1;
}

/* The next fault kind: every kind once per bag, in an order shuffled from the seed. */
static chaos_fault next_fault(chaos *ch)
{
    if (ch->bag_left == 0) {
        for (unsigned k = 0; k < CHAOS_FAULT_KINDS; k++)
            ch->bag[k] = (chaos_fault)k;
        for (unsigned k = CHAOS_FAULT_KINDS - 1; k > 0; k--) {
            unsigned j = (unsigned)rand_r(&ch->seed) % (k + 1);
            chaos_fault t = ch->bag[k];
            ch->bag[k] = ch->bag[j];
            ch->bag[j] = t;
        }
        ch->bag_left = CHAOS_FAULT_KINDS;
    }
    return ch->bag[--ch->bag_left];
}

static void note(chaos *ch, const char *what, unsigned node, unsigned delay_ms, int rc)
{
    if (rc != 0)
        ch->errors++;
    if (!ch->verbose && rc == 0)
        return;
    fprintf(stderr, "chaos %.3f: %s node %u", (double)redlock_now_us() / 1e6, what, node);
    if (delay_ms > 0)
        fprintf(stderr, " by %u ms each way", delay_ms);
    fprintf(stderr, "%s\n", rc != 0 ? " FAILED" : "");
}

/* Node is back (or was only reset): it counts as faulty for cooldown_us more. */
static void recovering(chaos *ch, unsigned node, uint64_t cooldown_us)
{
    ch->state[node] = CHAOS_RECOVERING;
    ch->since_us[node] = redlock_now_us();
    ch->cooldown_us[node] = cooldown_us;
}

/* A node lost its data now (its fence counters with it). */
static void note_forgot(chaos *ch)
{
    if (ch->n_forgot < CHAOS_MAX_FORGOT)
        ch->forgot_us[ch->n_forgot++] = redlock_now_us();
    else
        ch->forgot_overflow = true;
}

static void inject(chaos *ch, unsigned node, chaos_fault kind)
{
    proxy *p = ch->proxies[node];
    chaos_node_state down = CHAOS_UP;
    unsigned delay_ms = 0;
    int rc = 0;
    switch (kind) {
    case CHAOS_KILL:
        rc = fixture_kill(ch->nodes, node);
        down = CHAOS_KILLED;
        note_forgot(ch);
        break;
    case CHAOS_PAUSE:
        rc = fixture_pause(ch->nodes, node);
        down = CHAOS_PAUSED;
        break;
    case CHAOS_BLACKHOLE:
        proxy_set_mode(p, PROXY_BLACKHOLE);
        down = CHAOS_BLACKHOLED;
        break;
    case CHAOS_DELAY: {
        /* Each way above the node timeout, so every request's reply is late; up to 3 node
         * timeouts, so a round trip can also outlast the client's silence limit and get the
         * connection dropped and made again through the delay. */
        unsigned timeout_ms = (unsigned)(ch->node_timeout_us / 1000);
        delay_ms = timeout_ms + DELAY_OVER_MS + (unsigned)rand_r(&ch->seed) % (2 * timeout_ms);
        proxy_set_delay_ms(p, delay_ms);
        ch->delay_ms[node] = delay_ms;
        down = CHAOS_DELAYED;
        break;
    }
    case CHAOS_RESET:
        proxy_reset_all(p);
        break;
    case CHAOS_REFUSE:
        /* Refusing only stops the listener; reset the open connections too, so the clients
         * do reconnect, and are refused. */
        proxy_set_mode(p, PROXY_REFUSE);
        proxy_reset_all(p);
        down = CHAOS_REFUSED;
        break;
    case CHAOS_FAULT_KINDS:
        abort();
    }
    note(ch, chaos_fault_name(kind), node, delay_ms, rc);
    if (rc != 0)
        return;
    ch->injected[kind]++;
    if (down == CHAOS_UP) { /* a reset: over at once, but the clients must reconnect */
        recovering(ch, node, ch->recovery_us);
        return;
    }
    ch->state[node] = down;
    ch->since_us[node] = redlock_now_us();
}

static void heal(chaos *ch, unsigned node)
{
    proxy *p = ch->proxies[node];
    uint64_t cooldown_us = ch->recovery_us;
    int rc = 0;
    switch (ch->state[node]) {
    case CHAOS_KILLED:
        rc = fixture_restart(ch->nodes, node);
        ch->restarts++;
        note(ch, "restart", node, 0, rc);
        break;
    case CHAOS_PAUSED:
        rc = fixture_resume(ch->nodes, node);
        ch->resumes++;
        note(ch, "resume", node, 0, rc);
        break;
    case CHAOS_BLACKHOLED:
        /* What the blackhole held is delivered now, in order: stale SETs can make keys that
         * only refuse others until they expire. A client's connect caught in it may still be
         * waiting for its handshake's answer (all of it, if a proxy drops what it swallows). */
        proxy_set_mode(p, PROXY_PASS);
        cooldown_us += ch->connect_timeout_us;
        ch->proxy_heals++;
        note(ch, "unblackhole", node, 0, 0);
        break;
    case CHAOS_DELAYED:
        /* Data already queued keeps its due time: up to a round trip of the old delay. */
        proxy_set_delay_ms(p, 0);
        cooldown_us += 2 * (uint64_t)ch->delay_ms[node] * 1000;
        ch->delay_ms[node] = 0;
        ch->proxy_heals++;
        note(ch, "undelay", node, 0, 0);
        break;
    case CHAOS_REFUSED:
        proxy_set_mode(p, PROXY_PASS);
        ch->proxy_heals++;
        note(ch, "accept", node, 0, 0);
        break;
    case CHAOS_UP:
    case CHAOS_RECOVERING:
        return;
    }
    if (rc == 0)
        recovering(ch, node, cooldown_us);
}

/* The negative control: FLUSHALL a majority of the nodes at once, i.e. restart them with data
 * loss and no delay, which Redlock does not survive. A run with this must fail the checker;
 * otherwise the torture could not see a broken lock. */
static void wipe_majority(chaos *ch)
{
    unsigned first = (unsigned)rand_r(&ch->seed) % CHAOS_NODES;
    for (unsigned k = 0; k < CHAOS_NODES / 2 + 1; k++) {
        unsigned node = (first + k) % CHAOS_NODES;
        redisReply *reply = fixture_command(ch->nodes, node, "FLUSHALL");
        note_forgot(ch);
        note(ch, "wipe", node, 0, reply == NULL || reply->type == REDIS_REPLY_ERROR);
        freeReplyObject(reply);
    }
    ch->wipes++;
}

void chaos_step(chaos *ch)
{
    if (ch->unsafe) {
        wipe_majority(ch);
        return;
    }
    unsigned faulty = count_faulty(ch);
    bool make_fault = faulty == 0 || (faulty < CHAOS_MAX_FAULTY && rand_r(&ch->seed) % 2 == 0);
    uint64_t now_us = redlock_now_us();
    if (make_fault) {
        /* fewer than CHAOS_MAX_FAULTY < CHAOS_NODES are not up: one is */
        int node = pick_node(ch, true, now_us);
        inject(ch, (unsigned)node, next_fault(ch));
        return;
    }
    int node = pick_node(ch, false, now_us);
    if (node >= 0) /* else only recovering nodes, or killed ones too early to come back */
        heal(ch, (unsigned)node);
}

void chaos_heal_all(chaos *ch)
{
    for (unsigned i = 0; i < CHAOS_NODES; i++) {
        if (ch->state[i] == CHAOS_KILLED) {
            uint64_t allowed_us = ch->since_us[i] + ch->ttl_us + RESTART_SLACK_MS * 1000;
            uint64_t now_us = redlock_now_us();
            if (now_us < allowed_us)
                sleep_ms((unsigned)((allowed_us - now_us) / 1000 + 1));
        }
        heal(ch, i);
    }
}

uint64_t chaos_gap_us(chaos *ch)
{
    unsigned span = CHAOS_MAX_GAP_MS - CHAOS_MIN_GAP_MS + 1;
    return (uint64_t)(CHAOS_MIN_GAP_MS + (unsigned)rand_r(&ch->seed) % span) * 1000;
}
