/* SPDX-License-Identifier: MIT */
/* errors.c - error texts generated from REDLOCK_ERRNO_MAP, the version, the library's clock. */
#include "common.h"

const char *redlock_strerror(int err)
{
    /* One switch generated from the one list: a code added to the map gets its text here. */
    switch (err) {
    case 0:
        return "success";
#define REDLOCK_XX_(name, value, msg)                                                              \
    case REDLOCK_##name:                                                                           \
        return msg;
        REDLOCK_ERRNO_MAP(REDLOCK_XX_)
#undef REDLOCK_XX_
    default:
        return "unknown error";
    }
}

const char *redlock_err_name(int err)
{
    switch (err) {
    case 0:
        return "REDLOCK_OK";
#define REDLOCK_XX_(name, value, msg)                                                              \
    case REDLOCK_##name:                                                                           \
        return "REDLOCK_" #name;
        REDLOCK_ERRNO_MAP(REDLOCK_XX_)
#undef REDLOCK_XX_
    default:
        return "REDLOCK_UNKNOWN";
    }
}

const char *redlock_version_string(void)
{
    return REDLOCK_VERSION_STRING;
}

uint64_t redlock_now_us(void)
{
    /* Monotonic: lock deadlines must not move with wall-clock jumps. */
    return redlock__now_us();
}
