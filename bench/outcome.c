/* SPDX-License-Identifier: MIT */
/* outcome.c - what went wrong in a run, and the run's exit status.
 *
 * A failed cycle is a figure: on a loaded machine a node misses the bench's deadline, the cycle
 * fails, and the row says so under itself (how many, why, the load average then); the run goes
 * on and exits 0. A correctness check that fails (a lost update, a control that lost nothing, a
 * fault row with unexpected results, a fenced lock without its fence) or a scenario that could
 * not be made (no raw fan-out, a server that would not start) is different: said at once, named
 * in the closing line, and the exit status is 1 (correctness) or 2 (not made). The JSON's last
 * line ("outcome") holds all of it, for bench/summary.py's table. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* The causes of the failed cycles of the row being measured. File-static because the callbacks
 * that count a failed cycle have no bench_config (they get a worker); the bench is one thread
 * and runs one row at a time, and bench_row_failures empties it at the end of every row. */
static struct {
    char key[BENCH_CAUSES_MAX][BENCH_CAUSE_LEN];
    uint64_t n[BENCH_CAUSES_MAX];
    unsigned keys;
    uint64_t other; /* past BENCH_CAUSES_MAX distinct causes */
} tally;

/* "no answer within 50 ms" says the deadline; an error says what the node said. */
void bench_cause_of(int status, const redlock_result *result, char *out, size_t len)
{
    const redlock_node_result *timed_out = NULL, *failed = NULL;
    for (unsigned i = 0; result != NULL && i < result->n_nodes; i++) {
        const redlock_node_result *n = &result->nodes[i];
        if (n->vote == REDLOCK_VOTE_TIMEOUT && timed_out == NULL)
            timed_out = n;
        if (n->vote == REDLOCK_VOTE_ERROR && failed == NULL)
            failed = n;
    }
    if (timed_out != NULL)
        snprintf(out, len, "node timeout (%s)",
                 timed_out->error != NULL ? timed_out->error : "no answer in time");
    else if (failed != NULL)
        snprintf(out, len, "node error (%s)", failed->error != NULL ? failed->error : "?");
    else
        snprintf(out, len, "%s", redlock_err_name(status));
}

void bench_cause(int status, const redlock_result *result)
{
    char key[BENCH_CAUSE_LEN];
    bench_cause_of(status, result, key, sizeof(key));
    bench_cause_text(key);
}

void bench_cause_text(const char *key)
{
    for (unsigned i = 0; i < tally.keys; i++) {
        if (strcmp(tally.key[i], key) == 0) {
            tally.n[i]++;
            return;
        }
    }
    if (tally.keys == BENCH_CAUSES_MAX) {
        tally.other++;
        return;
    }
    snprintf(tally.key[tally.keys], BENCH_CAUSE_LEN, "%s", key);
    tally.n[tally.keys++] = 1;
}

/* The causes noted since the last row, most frequent first, into out; failed cycles that no
 * cause was noted for (a call that failed at once) are "unclassified". */
static void causes_text(uint64_t failed, char *out, size_t len, char *top, size_t top_len)
{
    snprintf(top, top_len, "unclassified");
    size_t used = 0;
    out[0] = '\0';
    uint64_t named = tally.other;
    bool done[BENCH_CAUSES_MAX] = {false};
    for (unsigned k = 0; k < tally.keys; k++) {
        unsigned best = BENCH_CAUSES_MAX;
        for (unsigned i = 0; i < tally.keys; i++)
            if (!done[i] && (best == BENCH_CAUSES_MAX || tally.n[i] > tally.n[best]))
                best = i;
        done[best] = true;
        named += tally.n[best];
        if (k == 0)
            snprintf(top, top_len, "%s", tally.key[best]);
        if (used < len)
            used += (size_t)snprintf(out + used, len - used, "%s%llu %s", used > 0 ? ", " : "",
                                     (unsigned long long)tally.n[best], tally.key[best]);
    }
    if (tally.other > 0 && used < len)
        used += (size_t)snprintf(out + used, len - used, ", %llu other",
                                 (unsigned long long)tally.other);
    if (failed > named && used < len)
        snprintf(out + used, len - used, "%s%llu unclassified", used > 0 ? ", " : "",
                 (unsigned long long)(failed - named));
}

void bench_causes_clear(void)
{
    memset(&tally, 0, sizeof(tally));
}

void bench_row_failures(bench_config *cfg, const char *scenario, const char *row, uint64_t failed,
                        uint64_t cycles)
{
    char causes[sizeof(((bench_failed_row *)0)->causes)], top[BENCH_CAUSE_LEN];
    causes_text(failed, causes, sizeof(causes), top, sizeof(top));
    bench_causes_clear();
    if (failed == 0)
        return;
    double load[3];
    if (getloadavg(load, 3) != 3)
        load[0] = -1;
    printf("  failed: %llu cycle%s (%llu completed): %s; load average %.2f\n",
           (unsigned long long)failed, failed == 1 ? "" : "s", (unsigned long long)cycles, causes,
           load[0]);
    fflush(stdout);
    bench_outcome *o = &cfg->outcome;
    o->failed_cycles += failed;
    o->failed_rows_total++;
    if (o->n_failed_rows == BENCH_FAILED_ROWS_MAX)
        return;
    bench_failed_row *r = &o->failed_rows[o->n_failed_rows++];
    snprintf(r->scenario, sizeof(r->scenario), "%s", scenario);
    snprintf(r->row, sizeof(r->row), "%s", row);
    snprintf(r->causes, sizeof(r->causes), "%s", causes);
    snprintf(r->top, sizeof(r->top), "%s", top);
    r->failed = failed;
    r->cycles = cycles;
    r->load = load[0];
}

static void note(bench_outcome *o, bool correctness, const char *scenario, const char *fmt,
                 va_list ap)
{
    char text[BENCH_NOTE_LEN - 32];
    vsnprintf(text, sizeof(text), fmt, ap);
    printf("%s: %s: %s\n", correctness ? "CORRECTNESS FAILURE" : "NOT MADE", scenario, text);
    fflush(stdout);
    unsigned *n = correctness ? &o->n_broken : &o->n_not_made;
    char(*list)[BENCH_NOTE_LEN] = correctness ? o->broken : o->not_made;
    if (*n < BENCH_NOTES_MAX)
        snprintf(list[(*n)++], BENCH_NOTE_LEN, "%s: %s", scenario, text);
}

void bench_broken(bench_config *cfg, const char *scenario, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    note(&cfg->outcome, true, scenario, fmt, ap);
    va_end(ap);
}

void bench_not_made(bench_config *cfg, const char *scenario, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    note(&cfg->outcome, false, scenario, fmt, ap);
    va_end(ap);
}

/* The closing line: what failed, and why the status is what it is. */
static int verdict(const bench_outcome *o, char *out, size_t len)
{
    size_t used = 0;
    int status = o->n_broken > 0 ? 1 : o->n_not_made > 0 ? 2 : 0;
    if (o->n_broken > 0)
        used += (size_t)snprintf(out, len, "FAILED: %u correctness check%s (%s)", o->n_broken,
                                 o->n_broken == 1 ? "" : "s", o->broken[0]);
    else if (o->n_not_made > 0)
        used += (size_t)snprintf(out, len, "NOT MADE: %u scenario%s could not run (%s)",
                                 o->n_not_made, o->n_not_made == 1 ? "" : "s", o->not_made[0]);
    else
        used += (size_t)snprintf(out, len, "ok: no correctness check failed");
    if (o->failed_rows_total > 0 && used < len) {
        const bench_failed_row *r = &o->failed_rows[0];
        snprintf(out + used, len - used,
                 "; timing only: %llu failed cycle%s in %u row%s (first: %s %s, mostly %s)",
                 (unsigned long long)o->failed_cycles, o->failed_cycles == 1 ? "" : "s",
                 o->failed_rows_total, o->failed_rows_total == 1 ? "" : "s", r->scenario, r->row,
                 r->top);
    } else if (used < len) {
        snprintf(out + used, len - used, "; no cycle failed");
    }
    return status;
}

int bench_outcome_end(bench_config *cfg)
{
    const bench_outcome *o = &cfg->outcome;
    char line[1024];
    int status = verdict(o, line, sizeof(line));
    if (cfg->json != NULL) {
        FILE *f = cfg->json;
        json_begin(f, "outcome");
        fprintf(f, ",\"exit_status\":%d,\"failed_cycles\":%llu,\"failed_rows\":[", status,
                (unsigned long long)o->failed_cycles);
        for (unsigned i = 0; i < o->n_failed_rows; i++) {
            const bench_failed_row *r = &o->failed_rows[i];
            fprintf(f, "%s{\"scenario\":", i > 0 ? "," : "");
            json_string(f, r->scenario);
            fprintf(f, ",\"row\":");
            json_string(f, r->row);
            fprintf(f,
                    ",\"failed\":%llu,\"cycles\":%llu,\"causes\":", (unsigned long long)r->failed,
                    (unsigned long long)r->cycles);
            json_string(f, r->causes);
            fprintf(f, ",\"loadavg\":%.2f}", r->load);
        }
        fprintf(f, "],\"correctness_failures\":[");
        for (unsigned i = 0; i < o->n_broken; i++) {
            fprintf(f, "%s", i > 0 ? "," : "");
            json_string(f, o->broken[i]);
        }
        fprintf(f, "],\"not_made\":[");
        for (unsigned i = 0; i < o->n_not_made; i++) {
            fprintf(f, "%s", i > 0 ? "," : "");
            json_string(f, o->not_made[i]);
        }
        fprintf(f, "],\"verdict\":");
        json_string(f, line);
        fprintf(f, "}\n");
        fflush(f);
    }
    printf("%s\n", line);
    fflush(stdout);
    return status;
}
