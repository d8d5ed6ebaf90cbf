/* SPDX-License-Identifier: MIT */
/* constants.c - print the constants of redlock.h that programs compile in and the ABI dump
 * (abi/redlock.abi) cannot see: error codes are ints, limits are macros. abi/constants.txt is
 * its output, checked by test/packaging/check.sh like the ABI. */
#include <inttypes.h>
#include <stdio.h>

#include <redlock.h>

int main(void)
{
#define PRINT_ERROR(name, value, msg) printf("REDLOCK_%s %d\n", #name, (int)(value));
    REDLOCK_ERRNO_MAP(PRINT_ERROR)
#undef PRINT_ERROR
    printf("REDLOCK_MAX_NODES %d\n", (int)REDLOCK_MAX_NODES);
    printf("REDLOCK_TTL_MAX_MS %" PRIu64 "\n", (uint64_t)REDLOCK_TTL_MAX_MS);
    printf("REDLOCK_DRIFT_FIXED_US %d\n", (int)REDLOCK_DRIFT_FIXED_US);
    printf("REDLOCK_ERROR_TEXT_MAX %d\n", (int)REDLOCK_ERROR_TEXT_MAX);
    printf("REDLOCK_TOKEN_MAX %d\n", (int)REDLOCK_TOKEN_MAX);
    printf("REDLOCK_RESOURCE_MAX %u\n", (unsigned)REDLOCK_RESOURCE_MAX);
    printf("REDLOCK_RESOURCES_MAX %u\n", (unsigned)REDLOCK_RESOURCES_MAX);
    printf("REDLOCK_STRLEN %" PRIu64 "\n", (uint64_t)REDLOCK_STRLEN);
    printf("REDLOCK_EXTEND_RETAKE %u\n", (unsigned)REDLOCK_EXTEND_RETAKE);
    printf("REDLOCK_CLOSE_FAST %u\n", (unsigned)REDLOCK_CLOSE_FAST);
    printf("REDLOCK_ROUND_PLAIN %u\n", (unsigned)REDLOCK_ROUND_PLAIN);
    printf("REDLOCK_ROUND_FENCED %u\n", (unsigned)REDLOCK_ROUND_FENCED);
    printf("REDLOCK_ROUND_COMMIT %u\n", (unsigned)REDLOCK_ROUND_COMMIT);
    return 0;
}
