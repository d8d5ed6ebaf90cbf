/* SPDX-License-Identifier: MIT */
/* rto.c - a node's request timeout (rto.h). */
#include "rto.h"

#include "common.h"

static uint64_t clamp(uint64_t us)
{
    return REDLOCK__MIN(REDLOCK__MAX(us, (uint64_t)REDLOCK__RTO_MIN_US),
                        (uint64_t)REDLOCK__RTO_MAX_US);
}

void redlock__rto_init(redlock__rto *r, uint64_t fixed_us)
{
    *r = (redlock__rto){.fixed_us = fixed_us};
    r->rto_us = r->base_us = fixed_us != 0 ? fixed_us : REDLOCK__RTO_INITIAL_US;
}

void redlock__rto_sample(redlock__rto *r, uint64_t sample_us)
{
    if (r->fixed_us != 0)
        return;
    if (sample_us == 0)
        sample_us = 1;
    if (r->srtt_us == 0) { /* RFC 6298 2.2 */
        r->srtt_us = sample_us;
        r->rttvar_us = sample_us / 2;
    } else { /* 2.3: beta 1/4, alpha 1/8 */
        uint64_t dev = r->srtt_us > sample_us ? r->srtt_us - sample_us : sample_us - r->srtt_us;
        r->rttvar_us = r->rttvar_us - r->rttvar_us / 4 + dev / 4;
        r->srtt_us = r->srtt_us - r->srtt_us / 8 + sample_us / 8;
        if (r->srtt_us == 0)
            r->srtt_us = 1;
    }
    r->rto_us = r->base_us = clamp(r->srtt_us + 4 * r->rttvar_us);
}

void redlock__rto_timeout(redlock__rto *r)
{
    if (r->fixed_us == 0)
        r->rto_us = clamp(2 * r->rto_us);
}
