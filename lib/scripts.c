/* SPDX-License-Identifier: MIT */
/* scripts.c - the Lua scripts. Compare-and-X is done server-side so that no other client's
 * command can slip between the comparison and the change. */
#include "scripts.h"

#define EXTEND_SOURCE                                                                              \
    "local v = redis.call(\"get\", KEYS[1])\n"                                                     \
    "if v == ARGV[1] then\n"                                                                       \
    "    return redis.call(\"pexpire\", KEYS[1], ARGV[2])\n"                                       \
    "end\n"                                                                                        \
    "if v == false and ARGV[3] == \"1\" then\n"                                                    \
    "    redis.call(\"set\", KEYS[1], ARGV[1], \"px\", ARGV[2])\n"                                 \
    "    return 1\n"                                                                               \
    "end\n"                                                                                        \
    "return 0\n"

/* Delete the key where it still holds the token; tell the node's subscribers (waiters of other
 * clients, notify.h) that it was freed, on a channel named like the key, with the token that
 * held it (so a client can tell its own lost attempts' releases). pcall: an ACL that forbids
 * PUBLISH or the channel must not make the release fail. */
#define RELEASE_SOURCE                                                                             \
    "if redis.call(\"get\", KEYS[1]) == ARGV[1] then\n"                                            \
    "    redis.call(\"del\", KEYS[1])\n"                                                           \
    "    redis.pcall(\"publish\", KEYS[1], ARGV[1])\n"                                             \
    "    return 1\n"                                                                               \
    "end\n"                                                                                        \
    "return 0\n"

#define INSPECT_SOURCE                                                                             \
    "return {redis.call(\"get\", KEYS[1]), redis.call(\"pttl\", KEYS[1]),\n"                       \
    "        redis.call(\"get\", KEYS[2])}\n"

/* Fencing. A counter is a decimal number without leading zeros, so two of them compare as
 * numbers by length, then digit by digit: no conversion to Lua's doubles, which would round
 * counters above 2^53, and no Lua string comparison, which follows the server's locale
 * (strcoll). A counter of any other form is refused before anything is written. */
#define COUNTER_CHECK                                                                              \
    "local c = redis.call(\"get\", KEYS[2])\n"                                                     \
    "if c and not (c == \"0\" or string.find(c, \"^[1-9]%d*$\")) then\n"                           \
    "    return redis.error_reply(\"fence counter is not a decimal number\")\n"                    \
    "end\n"
/* counter = max(counter, ARGV[n]) */
#define COUNTER_RAISE(n)                                                                           \
    "local f = ARGV[" n "]\n"                                                                      \
    "local below = c == false or #c < #f\n"                                                        \
    "if c and #c == #f then\n"                                                                     \
    "    for i = 1, #f do\n"                                                                       \
    "        local x, y = string.byte(c, i), string.byte(f, i)\n"                                  \
    "        if x ~= y then\n"                                                                     \
    "            below = x < y\n"                                                                  \
    "            break\n"                                                                          \
    "        end\n"                                                                                \
    "    end\n"                                                                                    \
    "end\n"                                                                                        \
    "if below then\n"                                                                              \
    "    redis.call(\"set\", KEYS[2], f)\n"                                                        \
    "end\n"

/* SET NX PX; where it set the key, the counter goes up by one and its value before is the reply.
 * c + 1 is c's digits plus one, carried by hand: no Lua number (a double) holds every counter.
 * A yes-voter that read the largest counter has thereby written the fence (1 + that counter)
 * while its key stands: the commit round has nothing left to do there (docs/algorithm.md,
 * "Fencing tokens"). */
#define ACQUIRE_FENCED_SOURCE                                                                      \
    COUNTER_CHECK                                                                                  \
    "if not redis.call(\"set\", KEYS[1], ARGV[1], \"nx\", \"px\", ARGV[2]) then\n"                 \
    "    return false\n"                                                                           \
    "end\n"                                                                                        \
    "local n = c or \"0\"\n"                                                                       \
    "local i = #n\n"                                                                               \
    "while i > 0 and string.byte(n, i) == 57 do\n"                                                 \
    "    i = i - 1\n"                                                                              \
    "end\n"                                                                                        \
    "local up = \"1\"\n"                                                                           \
    "if i > 0 then\n"                                                                              \
    "    up = string.sub(n, 1, i - 1) .. string.char(string.byte(n, i) + 1)\n"                     \
    "end\n"                                                                                        \
    "redis.call(\"set\", KEYS[2], up .. string.rep(\"0\", #n - i))\n"                              \
    "return n\n"
#define COMMIT_SOURCE                                                                              \
    "if redis.call(\"get\", KEYS[1]) ~= ARGV[1] then\n"                                            \
    "    return 0\n"                                                                               \
    "end\n" COUNTER_CHECK COUNTER_RAISE("2") "return 1\n"

#define EXTEND_FENCED_SOURCE                                                                       \
    "local v = redis.call(\"get\", KEYS[1])\n"                                                     \
    "if v == ARGV[1] then\n"                                                                       \
    "    return redis.call(\"pexpire\", KEYS[1], ARGV[2])\n"                                       \
    "end\n"                                                                                        \
    "if v ~= false or ARGV[3] ~= \"1\" then\n"                                                     \
    "    return 0\n"                                                                               \
    "end\n" COUNTER_CHECK                                                                          \
    "redis.call(\"set\", KEYS[1], ARGV[1], \"px\", ARGV[2])\n" COUNTER_RAISE("4") "return 1\n"

const redlock__script redlock__script_extend = {
    "extend",
    EXTEND_SOURCE,
    sizeof(EXTEND_SOURCE) - 1,
    "e8d0177eea86a7a2517ed17a5fc662d1c3f5b5df",
};

const redlock__script redlock__script_release = {
    "release",
    RELEASE_SOURCE,
    sizeof(RELEASE_SOURCE) - 1,
    "3e1a5debaa508c3ed0e7cf368dc9456c2a9ae080",
};

const redlock__script redlock__script_inspect = {
    "inspect",
    INSPECT_SOURCE,
    sizeof(INSPECT_SOURCE) - 1,
    "da03fd8ff57a14615aed4183024a5bd6fba20998",
};

const redlock__script redlock__script_acquire_fenced = {
    "acquire_fenced",
    ACQUIRE_FENCED_SOURCE,
    sizeof(ACQUIRE_FENCED_SOURCE) - 1,
    "a71b102066fa6b643763f58ccad5f591642324b1",
};

const redlock__script redlock__script_commit = {
    "commit",
    COMMIT_SOURCE,
    sizeof(COMMIT_SOURCE) - 1,
    "9a1716c389dfe0762c20559e283c7f955ec2e9fe",
};

const redlock__script redlock__script_extend_fenced = {
    "extend_fenced",
    EXTEND_FENCED_SOURCE,
    sizeof(EXTEND_FENCED_SOURCE) - 1,
    "e016b39c8167624957b508816f09d33bea388a12",
};
