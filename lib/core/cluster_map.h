/* SPDX-License-Identifier: MIT */
/* cluster_map.h - which master of a Redis Cluster owns which hash slot (issue 14).
 *
 * A node URL may name a whole Redis Cluster; its keys then go to the master that owns their hash
 * slot (slot.h). This file is the sans-IO part of that: the slot map, built from a reply to
 * CLUSTER SHARDS (Redis 7) or CLUSTER SLOTS (older servers) as hiredis parsed it, updated by a
 * MOVED redirect, and the parser of MOVED / ASK error texts. No IO, no clock; memory through the
 * library's allocator. Not yet used by the node layer.
 *
 * Rules the loaders follow:
 *   - a master's address is the "endpoint" the server reported (its preferred endpoint type:
 *     ip, hostname or unknown), else its "ip"; an endpoint of "" or "?" (or NIL in CLUSTER
 *     SLOTS) means unknown, and then the host the reply came from is used if the caller gave
 *     one, as clients do;
 *   - a master whose health is not "online" (CLUSTER SHARDS) still owns its slots, marked
 *     online = 0: whether to send to it is the caller's choice;
 *   - slots no master owns map to no master; a shard with no slots is left out;
 *   - anything malformed (a wrong type, a missing field, a slot out of 0..16383, end < start,
 *     one shard's ranges out of order, a slot owned twice, one node id at two addresses, two
 *     masters in one shard, more than REDLOCK__CLUSTER_MASTERS_MAX masters, a host longer than
 *     REDLOCK__CLUSTER_HOST_MAX or with a byte outside '!'..'~') is refused with REDLOCK_EINVAL
 *     and a message, and the map is left as it was;
 *   - unknown fields are ignored, so a newer server's additions do not break the parse. */
#ifndef REDLOCK_CLUSTER_MAP_H
#define REDLOCK_CLUSTER_MAP_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "common.h"
#include "slot.h"

#define REDLOCK__CLUSTER_MASTERS_MAX 1024
#define REDLOCK__CLUSTER_HOST_MAX 255         /* bytes of a host name or address, NUL excluded */
#define REDLOCK__CLUSTER_ID_MAX 64            /* bytes of a node id (Redis's are 40 hex digits) */
#define REDLOCK__CLUSTER_NO_MASTER UINT16_MAX /* all bits set: init fills owner with 0xff */

typedef struct redlock__cluster_master {
    char *host;     /* where to connect, NUL-terminated; owned by the map */
    char *id;       /* the node id, NUL-terminated, owned by the map; NULL when not known (a
                       master learnt from MOVED) */
    int port;       /* plain TCP port; 0 when none. From CLUSTER SLOTS or MOVED: the port the
                       server gave for a connection like the one that asked, whatever its kind */
    int tls_port;   /* TLS port from CLUSTER SHARDS' "tls-port"; 0 when none or not reported */
    int online;     /* 0 when CLUSTER SHARDS said its health is not "online" */
    uint32_t slots; /* how many slots the map gives it (0 after MOVED took them all) */
} redlock__cluster_master;

/* Plain data: read masters and owner directly; change it only through the functions below.
 * About 32 KiB: keep it on the heap. */
typedef struct redlock__cluster_map {
    redlock__alloc alloc;
    redlock__cluster_master *masters; /* masters_len entries, in the order the reply gave */
    size_t masters_len, masters_cap;
    uint16_t owner[REDLOCK__CLUSTER_SLOTS]; /* index into masters, or REDLOCK__CLUSTER_NO_MASTER */
} redlock__cluster_map;

/* An empty map (no masters, every slot unowned) whose memory comes from a (copied). */
void redlock__cluster_map_init(redlock__cluster_map *map, const redlock__alloc *a);

/* Free what the map holds and leave it empty, ready to load again. */
void redlock__cluster_map_free(redlock__cluster_map *map);

/* Replace the map's contents with the topology in reply, a CLUSTER SHARDS reply (RESP2 flat
 * key/value arrays, or RESP3 maps under hiredis 1.x) or a CLUSTER SLOTS reply. reply_host is the
 * host the reply came from, used for a master whose endpoint the server does not know; NULL
 * refuses such a reply. reply is only read and stays the caller's. Returns 0; REDLOCK_EINVAL
 * with a message in err (NUL-terminated when err_len > 0; err may be NULL) for a malformed
 * reply; REDLOCK_ENOMEM. On error the map is unchanged. */
int redlock__cluster_map_load_shards(redlock__cluster_map *map, const redisReply *reply,
                                     const char *reply_host, char *err, size_t err_len);
int redlock__cluster_map_load_slots(redlock__cluster_map *map, const redisReply *reply,
                                    const char *reply_host, char *err, size_t err_len);

/* The index of the master owning slot, or -1 when no master owns it (or slot > 16383). */
int redlock__cluster_map_master(const redlock__cluster_map *map, unsigned slot);

/* The port of master m for a connection of the given kind, or 0 when the map has none. CLUSTER
 * SHARDS names a master's TLS port "tls-port" (Redis 7 does so only with tls-cluster yes);
 * CLUSTER SLOTS (from_slots: the map was loaded from it) and MOVED (a master without an id) give
 * the port for a connection like the one that asked, which is TLS when tls is. */
int redlock__cluster_map_master_port(const redlock__cluster_master *m, bool tls, bool from_slots);

/* Apply "MOVED slot host:port": slot now belongs to the master at host:port (the same host
 * byte for byte, case aside, and port equal to its port or TLS port), which is added, with no
 * id, when the map does not have it. A master left with no slots stays in the list until the
 * next load. host stays the caller's. Returns the master's index; REDLOCK_EINVAL for a slot
 * over 16383, a port outside 1..65535 or a host that is empty, too long or has a byte outside
 * '!'..'~'; REDLOCK_ENOMEM when memory runs out or the map has REDLOCK__CLUSTER_MASTERS_MAX
 * masters already. On error the map is unchanged. */
int redlock__cluster_map_moved(redlock__cluster_map *map, unsigned slot, const char *host,
                               int port);

typedef enum redlock__redirect_kind {
    REDLOCK__REDIRECT_MOVED = 1, /* the slot has moved for good: update the map, resend */
    REDLOCK__REDIRECT_ASK = 2,   /* this once: send ASKING then the command to host:port */
} redlock__redirect_kind;

typedef struct redlock__redirect {
    redlock__redirect_kind kind;
    uint16_t slot;
    int port;
    /* "" when the server does not know the target's endpoint ("MOVED 1 :7000"): the host of
     * the connection the redirect came on is meant. IPv6 addresses come without brackets. */
    char host[REDLOCK__CLUSTER_HOST_MAX + 1];
} redlock__redirect;

/* Parse an error reply's text (without the leading '-'), len bytes at text: "MOVED <slot>
 * <host>:<port>" or "ASK <slot> <host>:<port>", the port after the LAST ':' (so "MOVED 1
 * ::1:7000" is host "::1", port 7000; "[::1]:7000" is accepted too). Returns 1 and fills out;
 * 0 when the text is not a redirect (out zeroed); REDLOCK_EINVAL when it starts as one but is
 * malformed: a slot outside 0..16383, a port outside 1..65535, a bad host, anything after the
 * port (out zeroed). */
int redlock__cluster_map_parse_redirect(const char *text, size_t len, redlock__redirect *out);

#endif /* REDLOCK_CLUSTER_MAP_H */
