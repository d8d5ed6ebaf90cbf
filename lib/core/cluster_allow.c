/* SPDX-License-Identifier: MIT */
/* cluster_allow.c - see cluster_allow.h. */
#include "cluster_allow.h"

#include <string.h>
#include <strings.h>

#include <uv.h>

/* text (len bytes, brackets allowed around an IPv6 one) as an address, IPv4 mapped into IPv6;
 * *v4 says which it was. */
static bool parse_address(const char *text, size_t len, unsigned char addr[16], bool *v4)
{
    char buf[64];
    if (len >= 2 && text[0] == '[' && text[len - 1] == ']') {
        text++;
        len -= 2;
    }
    if (len == 0 || len >= sizeof(buf))
        return false;
    memcpy(buf, text, len);
    buf[len] = '\0';
    *v4 = false;
    if (uv_inet_pton(AF_INET6, buf, addr) == 0)
        return true;
    unsigned char a4[4];
    if (uv_inet_pton(AF_INET, buf, a4) != 0)
        return false;
    memset(addr, 0, 10);
    addr[10] = addr[11] = 0xff;
    memcpy(addr + 12, a4, 4);
    *v4 = true;
    return true;
}

int redlock__cluster_allow_parse(const char *value, size_t len, redlock__allow *out)
{
    memset(out, 0, sizeof(*out));
    const char *slash = memchr(value, '/', len);
    size_t addr_len = slash != NULL ? (size_t)(slash - value) : len;
    bool v4;
    if (!parse_address(value, addr_len, out->addr, &v4)) {
        if (slash != NULL)
            return -1;
        out->name = value;
        out->name_len = len;
        return 0;
    }
    out->is_address = true;
    unsigned max = v4 ? 32 : 128, bits = max;
    if (slash != NULL) {
        const char *d = slash + 1, *end = value + len;
        if (d == end || end - d > 3)
            return -1;
        for (bits = 0; d < end; d++) {
            if (*d < '0' || *d > '9')
                return -1;
            bits = bits * 10 + (unsigned)(*d - '0');
        }
        if (bits > max)
            return -1;
    }
    out->prefix_bits = v4 ? 96 + bits : bits;
    return 0;
}

static bool within(const unsigned char addr[16], const redlock__allow *net)
{
    unsigned whole = net->prefix_bits / 8, rest = net->prefix_bits % 8;
    if (memcmp(addr, net->addr, whole) != 0)
        return false;
    unsigned char mask = (unsigned char)(0xff << (8 - rest));
    return rest == 0 || (addr[whole] & mask) == (net->addr[whole] & mask);
}

/* Whether host is the entry (an address within it, or the same name). */
static bool matches(const char *host, const redlock__allow *entry)
{
    unsigned char addr[16];
    bool v4;
    if (parse_address(host, strlen(host), addr, &v4))
        return entry->is_address && within(addr, entry);
    return !entry->is_address && strlen(host) == entry->name_len &&
           strncasecmp(host, entry->name, entry->name_len) == 0;
}

static bool same_host(const char *host, const char *named)
{
    redlock__allow entry;
    return named != NULL && redlock__cluster_allow_parse(named, strlen(named), &entry) == 0 &&
           matches(host, &entry);
}

bool redlock__cluster_allow_has(const redlock_url *u, const char *host)
{
    /* The query of the redacted URL: after the last '@' (the password is hidden, and neither
     * the user nor the query may hold an unencoded '@'), from the first '?'. */
    const char *text = u->redacted != NULL ? u->redacted : "";
    const char *at = strrchr(text, '@');
    const char *scheme_end = strstr(text, "://");
    const char *rest = at != NULL ? at + 1 : scheme_end != NULL ? scheme_end + 3 : text;
    const char *query = strchr(rest, '?');
    bool restricted = false;
    for (const char *p = query != NULL ? query + 1 : NULL; p != NULL;) {
        const char *amp = strchr(p, '&');
        size_t n = amp != NULL ? (size_t)(amp - p) : strlen(p);
        if (n > 6 && memcmp(p, "allow=", 6) == 0) {
            restricted = true;
            redlock__allow entry;
            if (redlock__cluster_allow_parse(p + 6, n - 6, &entry) == 0 && matches(host, &entry))
                return true;
        }
        p = amp != NULL ? amp + 1 : NULL;
    }
    if (!restricted || same_host(host, u->host))
        return true;
    for (size_t i = 0; u->seeds != NULL && u->seeds[i].host != NULL; i++)
        if (same_host(host, u->seeds[i].host))
            return true;
    return false;
}
