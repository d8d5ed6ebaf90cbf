/* SPDX-License-Identifier: MIT */
/* trace.c - a fleet's trace (<redlock/sim.h>): one line per event, after the true time. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet.h"

void kit_trace(redlock_sim *sim, const char *fmt, ...)
{
    if (sim->untraced)
        return;
    char line[512];
    int head =
        snprintf(line, sizeof(line), "%llu.%06llu ", (unsigned long long)(sim->now / 1000000),
                 (unsigned long long)(sim->now % 1000000));
    va_list ap;
    va_start(ap, fmt);
    int body = vsnprintf(line + head, sizeof(line) - (size_t)head - 1, fmt, ap);
    va_end(ap);
    size_t len =
        (size_t)head + (body < 0 ? 0 : REDLOCK__MIN((size_t)body, sizeof(line) - head - 2));
    line[len++] = '\n';
    if (sim->trace_len + len + 1 > sim->trace_cap) {
        size_t cap = sim->trace_cap > 0 ? sim->trace_cap * 2 : 4096;
        while (cap < sim->trace_len + len + 1)
            cap *= 2;
        char *p = realloc(sim->trace, cap);
        if (p == NULL) {
            sim->oom = true;
            return;
        }
        sim->trace = p;
        sim->trace_cap = cap;
    }
    memcpy(sim->trace + sim->trace_len, line, len);
    sim->trace_len += len;
    sim->trace[sim->trace_len] = '\0';
}

const char *redlock_sim_trace(const redlock_sim *sim, size_t *len)
{
    if (len != NULL)
        *len = sim->trace_len;
    return sim->trace != NULL ? sim->trace : "";
}
