/* SPDX-License-Identifier: MIT */
/* abi.h - the caller's structs, read and filled by the size the caller was compiled with.
 *
 * A struct the caller allocates (redlock_options, redlock_lock_opts, redlock_auto_opts,
 * redlock_report) starts with `size`, set by its init macro to sizeof as the caller's header
 * had it. A program built against an older header has a smaller struct than this library's;
 * one built against a newer header, a larger one. Every read of a caller's options goes
 * through redlock__struct_in (by way of the per-struct *_in functions next to their defaults),
 * and every init through redlock__struct_init, so the library never touches a byte past the
 * caller's `size`, and members the caller does not have keep the library's defaults. See
 * abi/README.md (the maintainer's procedure; docs/api.md, "ABI policy", the promise). Nothing
 * here is public. */
#ifndef REDLOCK_ABI_H
#define REDLOCK_ABI_H

#include <stdbool.h>
#include <stddef.h>

#include "redlock.h"

/* The offset just past member. */
#define REDLOCK__END_OF(type, member) (offsetof(type, member) + sizeof(((type *)0)->member))

/* Whether a caller's struct of `size` bytes has member (for filling members appended after the
 * first layout, e.g. of redlock_report). */
#define REDLOCK__HAS(size, type, member) (REDLOCK__END_OF(type, member) <= (size))

/* The end of each struct's first layout (soversion 1): no program built against this soversion
 * has less, so a smaller size means the struct was not set up by its init macro. These never
 * change within a soversion, whatever is appended. */
#define REDLOCK__OPTIONS_MIN REDLOCK__END_OF(redlock_options, realloc_ud)
#define REDLOCK__LOCK_OPTS_MIN REDLOCK__END_OF(redlock_lock_opts, lost_data)
#define REDLOCK__AUTO_OPTS_MIN REDLOCK__END_OF(redlock_auto_opts, lost_margin_ms)
#define REDLOCK__REPORT_MIN REDLOCK__END_OF(redlock_report, values)
#define REDLOCK__NODE_INFO_MIN REDLOCK__END_OF(redlock_node_info, last_error)
#define REDLOCK__STATS_MIN REDLOCK__END_OF(redlock_stats, locks_auto)

/* No options struct is anywhere near this large: a larger size is garbage (a struct that was
 * never set up), and reading that far could run off the caller's memory. */
#define REDLOCK__STRUCT_SIZE_MAX 4096

/* Fill the caller's struct dst of `size` bytes from defaults (the library's own struct of
 * defaults_size bytes, its `size` member included): the bytes both have are copied, any bytes
 * past the library's struct are zeroed, and dst's `size` is set to `size`. Writes exactly `size`
 * bytes (nothing when size is smaller than the `size` member itself). */
void redlock__struct_init(void *dst, size_t size, const void *defaults, size_t defaults_size);

/* Read the caller's struct src into dst, the library's struct of dst_size bytes that already
 * holds the defaults: the first min(src size, dst_size) bytes of src are copied (dst keeps its
 * own `size`), so members the caller does not have keep their defaults. Refused with
 * REDLOCK_EINVAL and a message in err (naming `what` and its init macro, `init_name`):
 *   - a size below min_size or above REDLOCK__STRUCT_SIZE_MAX: not set up by its init macro;
 *   - a caller's struct larger than the library's whose extra bytes are not all zero: it asks
 *     for something this library does not know (a program built against a newer header), and
 *     ignoring it could be unsafe (a TLS setting, say).
 * dst is unchanged on failure. */
int redlock__struct_in(void *dst, size_t dst_size, const void *src, size_t min_size,
                       const char *what, const char *init_name, char *err, size_t err_len);

/* The library's defaults, then the caller's struct through redlock__struct_in (src NULL: only
 * the defaults). Each lives next to its init function. */
int redlock__options_in(redlock_options *dst, const redlock_options *src, char *err,
                        size_t err_len);
int redlock__lock_opts_in(redlock_lock_opts *dst, const redlock_lock_opts *src, char *err,
                          size_t err_len);
int redlock__auto_opts_in(redlock_auto_opts *dst, const redlock_auto_opts *src, char *err,
                          size_t err_len);

/* Whether a caller's report was set up by redlock_report_init (NULL is not). */
bool redlock__report_ok(const redlock_report *report);

#endif
