/* SPDX-License-Identifier: MIT */
/* checker.c - see checker.h. Pure: lines in, verdict out; no clock, no network. */
#include "checker.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "redlock.h"

#define MAX_PRINTED 10 /* overlaps described in full; the rest are only counted */

int torture_hold_format(const torture_hold *hold, char *buf, size_t len)
{
    int n = snprintf(
        buf, len,
        "H %u %u %u %s %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %d %d\n",
        hold->resource, hold->process, hold->thread, hold->token, hold->acquire_start_us,
        hold->acquire_done_us, hold->deadline_us, hold->release_us, hold->write_done_us,
        hold->incremented ? 1 : 0, hold->release_status);
    return n < 0 || (size_t)n >= len ? -1 : n;
}

int torture_failure_format(const torture_failure *failure, char *buf, size_t len)
{
    int n = snprintf(buf, len, "F %u %u %u %d %" PRIu64 " %" PRIu64 "\n", failure->resource,
                     failure->process, failure->thread, failure->status, failure->acquire_start_us,
                     failure->acquire_done_us);
    return n < 0 || (size_t)n >= len ? -1 : n;
}

int torture_history_add(torture_history *history, const torture_hold *hold)
{
    if (history->n_holds == history->cap_holds) {
        size_t cap = history->cap_holds == 0 ? 1024 : history->cap_holds * 2;
        torture_hold *holds = realloc(history->holds, cap * sizeof(*holds));
        if (holds == NULL)
            return -1;
        history->holds = holds;
        history->cap_holds = cap;
    }
    history->holds[history->n_holds++] = *hold;
    return 0;
}

static int parse_hold(torture_history *history, const char *line)
{
    torture_hold hold = {0};
    int incremented, consumed = 0;
    char token_format[32];
    snprintf(token_format, sizeof(token_format), "%%%ds", TORTURE_TOKEN_MAX);
    char format[160];
    snprintf(format, sizeof(format),
             "H %%u %%u %%u %s %%" SCNu64 " %%" SCNu64 " %%" SCNu64 " %%" SCNu64 " %%" SCNu64
             " %%d %%d%%n",
             token_format);
    int fields =
        sscanf(line, format, &hold.resource, &hold.process, &hold.thread, hold.token,
               &hold.acquire_start_us, &hold.acquire_done_us, &hold.deadline_us, &hold.release_us,
               &hold.write_done_us, &incremented, &hold.release_status, &consumed);
    if (fields != 11 || (line[consumed] != '\0' && line[consumed] != '\n') ||
        (incremented != 0 && incremented != 1))
        return -1;
    hold.incremented = incremented == 1;
    return torture_history_add(history, &hold);
}

static int parse_failure(torture_history *history, const char *line)
{
    torture_failure failure = {0};
    int consumed = 0;
    int fields = sscanf(line, "F %u %u %u %d %" SCNu64 " %" SCNu64 "%n", &failure.resource,
                        &failure.process, &failure.thread, &failure.status,
                        &failure.acquire_start_us, &failure.acquire_done_us, &consumed);
    if (fields != 6 || (line[consumed] != '\0' && line[consumed] != '\n'))
        return -1;
    history->failures++;
    if (failure.status == REDLOCK_EBUSY)
        history->failures_busy++;
    else if (failure.status == REDLOCK_ENOQUORUM)
        history->failures_noquorum++;
    return 0;
}

int torture_history_parse_line(torture_history *history, const char *line)
{
    switch (line[0]) {
    case '\0':
    case '\n':
        return 0;
    case 'H':
        return parse_hold(history, line);
    case 'F':
        return parse_failure(history, line);
    default:
        return -1;
    }
}

int torture_history_load(torture_history *history, const char *path, FILE *diag)
{
    FILE *file = fopen(path, "r");
    if (file == NULL) {
        if (diag != NULL)
            fprintf(diag, "# %s: cannot open\n", path);
        return -1;
    }
    char line[TORTURE_LINE_MAX];
    unsigned long line_no = 0;
    int rc = 0;
    while (fgets(line, sizeof(line), file) != NULL) {
        line_no++;
        size_t len = strlen(line);
        bool complete = len > 0 && line[len - 1] == '\n';
        if (!complete || torture_history_parse_line(history, line) != 0) {
            if (diag != NULL)
                fprintf(diag, "# %s:%lu: %s line: %.*s\n", path, line_no,
                        complete ? "malformed" : "torn or overlong", (int)strcspn(line, "\n"),
                        line);
            rc = -1;
            break;
        }
    }
    fclose(file);
    return rc;
}

void torture_history_free(torture_history *history)
{
    free(history->holds);
    *history = (torture_history){0};
}

/* The end of a hold: the holder stops trusting the lock at its release or at its deadline,
 * whichever comes first. */
static uint64_t hold_end_us(const torture_hold *hold)
{
    return hold->release_us < hold->deadline_us ? hold->release_us : hold->deadline_us;
}

static int compare_holds(const void *a, const void *b)
{
    const torture_hold *x = *(const torture_hold *const *)a;
    const torture_hold *y = *(const torture_hold *const *)b;
    if (x->resource != y->resource)
        return x->resource < y->resource ? -1 : 1;
    if (x->acquire_done_us != y->acquire_done_us)
        return x->acquire_done_us < y->acquire_done_us ? -1 : 1;
    return 0;
}

static void print_hold(FILE *out, const char *what, const torture_hold *hold)
{
    if (out == NULL)
        return;
    fprintf(out,
            "#   %s: process %u thread %u token %s held [%" PRIu64 ", %" PRIu64
            "] (deadline %" PRIu64 ", release %" PRIu64 ")\n",
            what, hold->process, hold->thread, hold->token, hold->acquire_done_us,
            hold_end_us(hold), hold->deadline_us, hold->release_us);
}

/* Per-record checks and counts; returns false for a record that cannot be true. */
static bool check_record(const torture_hold *hold, unsigned n_resources, torture_verdict *v,
                         FILE *out)
{
    v->holds++;
    if (hold->release_status != 0)
        v->release_failures++;
    if (hold->release_us >= hold->deadline_us)
        v->at_deadline++;
    if (hold->resource >= n_resources || hold->acquire_done_us < hold->acquire_start_us ||
        hold->release_us < hold->acquire_done_us ||
        (hold->incremented && hold->write_done_us < hold->acquire_done_us)) {
        if (out != NULL)
            fprintf(out, "# impossible record (resource %u of %u):\n", hold->resource, n_resources);
        print_hold(out, "record", hold);
        v->bad_records++;
        return false;
    }
    if (!hold->incremented) {
        v->skipped++;
        return true;
    }
    v->increments++;
    v->increments_per_resource[hold->resource]++;
    if (hold->write_done_us > hold->deadline_us) {
        v->late_writes++;
        if (out != NULL)
            fprintf(out, "# warning: write finished %" PRIu64 " us after the deadline:\n",
                    hold->write_done_us - hold->deadline_us);
        print_hold(out, "late", hold);
    }
    return true;
}

/* Sweep the holds sorted by resource and start; every hold that starts before the latest end
 * seen so far on its resource overlaps the hold that owns that end. */
static void check_overlaps(torture_hold **sorted, size_t n, torture_verdict *v, FILE *out)
{
    const torture_hold *latest = NULL; /* the hold with the latest end on the current resource */
    for (size_t i = 0; i < n; i++) {
        const torture_hold *hold = sorted[i];
        if (latest != NULL && latest->resource != hold->resource)
            latest = NULL;
        if (latest != NULL && hold->acquire_done_us < hold_end_us(latest) &&
            hold->acquire_done_us < hold_end_us(hold)) {
            v->overlaps++;
            if (out != NULL && v->overlaps == MAX_PRINTED + 1)
                fprintf(out, "# (further overlaps are counted, not printed)\n");
            if (out != NULL && v->overlaps <= MAX_PRINTED)
                fprintf(out,
                        "# VIOLATION: two holders of resource %u at once (%" PRIu64
                        " us of overlap):\n",
                        hold->resource, hold_end_us(latest) - hold->acquire_done_us);
            print_hold(v->overlaps <= MAX_PRINTED ? out : NULL, "first", latest);
            print_hold(v->overlaps <= MAX_PRINTED ? out : NULL, "second", hold);
        }
        if (latest == NULL || hold_end_us(hold) > hold_end_us(latest))
            latest = hold;
    }
}

unsigned long torture_check(const torture_history *history, const long long *counters,
                            unsigned n_resources, torture_verdict *verdict, FILE *out)
{
    torture_verdict *v = verdict;
    *v = (torture_verdict){0};
    if (n_resources > TORTURE_MAX_RESOURCES) {
        if (out != NULL)
            fprintf(out, "# at most %d resources\n", TORTURE_MAX_RESOURCES);
        v->bad_records++;
        return 1;
    }

    torture_hold **sorted = malloc((history->n_holds + 1) * sizeof(*sorted));
    if (sorted == NULL) {
        if (out != NULL)
            fprintf(out, "# out of memory\n");
        v->bad_records++;
        return 1;
    }
    size_t n_sorted = 0;
    for (size_t i = 0; i < history->n_holds; i++) {
        if (check_record(&history->holds[i], n_resources, v, out))
            sorted[n_sorted++] = &history->holds[i];
    }
    qsort(sorted, n_sorted, sizeof(*sorted), compare_holds);
    check_overlaps(sorted, n_sorted, v, out);
    free(sorted);

    for (unsigned r = 0; r < n_resources; r++) {
        if (counters[r] == (long long)v->increments_per_resource[r])
            continue;
        v->counter_mismatches++;
        if (out != NULL)
            fprintf(out,
                    "# VIOLATION: counter of resource %u is %lld, but %lu increments were "
                    "made under the lock\n",
                    r, counters[r], v->increments_per_resource[r]);
    }
    return v->overlaps + v->counter_mismatches + v->bad_records;
}
