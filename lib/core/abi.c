/* SPDX-License-Identifier: MIT */
/* abi.c - reading and filling the caller's structs by the caller's size (abi.h). */
#include "abi.h"

#include <string.h>

#include "common.h"

/* Each extensible struct ends on its last member, with no tail padding, on 64-bit targets: so
 * whatever a release appends starts past the old sizeof, and an older library sees it as extra
 * bytes (and refuses them when set) instead of mistaking them for padding it copies and
 * ignores. When you append a member, name it here; if it leaves tail padding, append an explicit
 * reserved member first. (32-bit targets may pad; the check there is the x86-64 baseline.) */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(redlock_options) == REDLOCK__END_OF(redlock_options, reserved_release_),
               "redlock_options: name its last member here, with no tail padding");
_Static_assert(sizeof(redlock_lock_opts) == REDLOCK__END_OF(redlock_lock_opts, fence_domain),
               "redlock_lock_opts: name its last member here, with no tail padding");
_Static_assert(sizeof(redlock_auto_opts) == REDLOCK__END_OF(redlock_auto_opts, extended_data),
               "redlock_auto_opts: name its last member here, with no tail padding");
_Static_assert(sizeof(redlock_node_info) == REDLOCK__END_OF(redlock_node_info, probes),
               "redlock_node_info: name its last member here, with no tail padding");
_Static_assert(sizeof(redlock_stats) == REDLOCK__END_OF(redlock_stats, acquires_granted),
               "redlock_stats: name its last member here, with no tail padding");
/* Frozen: callers index arrays of these, or allocate them. A member is added in place of a
 * reserved slot of the same size, never by growing the struct (abi/README.md, "The reserved slots
 * and what they are for"). */
_Static_assert(sizeof(redlock_node_result) == 120, "redlock_node_result's size is frozen");
_Static_assert(sizeof(redlock_round) == 184, "redlock_round's size is frozen");
_Static_assert(sizeof(redlock_url) == 96, "redlock_url's size is frozen");
/* Members that took a reserved slot keep its offset. */
_Static_assert(offsetof(redlock_node_result, fence) == 56, "fence is reserved_u64[0]'s slot");
_Static_assert(offsetof(redlock_round, fence) == 152, "fence is reserved[0]'s slot");
#endif
_Static_assert(offsetof(redlock_options, size) == 0 && offsetof(redlock_lock_opts, size) == 0 &&
                   offsetof(redlock_auto_opts, size) == 0 && offsetof(redlock_report, size) == 0 &&
                   offsetof(redlock_node_info, size) == 0 && offsetof(redlock_stats, size) == 0,
               "`size` comes first: it is read before anything else is known of the struct");

void redlock__struct_init(void *dst, size_t size, const void *defaults, size_t defaults_size)
{
    if (size < sizeof(size_t))
        return;
    memcpy(dst, defaults, REDLOCK__MIN(size, defaults_size));
    if (size > defaults_size)
        memset((char *)dst + defaults_size, 0, size - defaults_size);
    memcpy(dst, &size, sizeof(size));
}

int redlock__struct_in(void *dst, size_t dst_size, const void *src, size_t min_size,
                       const char *what, const char *init_name, char *err, size_t err_len)
{
    size_t size;
    memcpy(&size, src, sizeof(size));
    if (size < min_size || size > REDLOCK__STRUCT_SIZE_MAX) {
        redlock__fmt(err, err_len, "%s was not set up by %s (its size member is %zu)", what,
                     init_name, size);
        return REDLOCK_EINVAL;
    }
    const unsigned char *bytes = src;
    for (size_t i = dst_size; i < size; i++) {
        if (bytes[i] != 0) {
            redlock__fmt(err, err_len,
                         "%s sets a member this library (libredlock %s) does not know, at byte "
                         "%zu of %zu: the program was built against a newer redlock.h",
                         what, REDLOCK_VERSION_STRING, i, size);
            return REDLOCK_EINVAL;
        }
    }
    /* dst keeps its own size: it is the library's struct from here on. */
    size_t n = REDLOCK__MIN(size, dst_size);
    memcpy((char *)dst + sizeof(size_t), bytes + sizeof(size_t), n - sizeof(size_t));
    return 0;
}

bool redlock__report_ok(const redlock_report *report)
{
    /* No upper bound: the library writes at most its own sizeof(redlock_report) bytes. */
    return report != NULL && report->size >= REDLOCK__REPORT_MIN;
}
