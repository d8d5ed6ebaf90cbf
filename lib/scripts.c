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

/* Several resources at once (redlock_acquire_multi): KEYS are the set's keys, all or none on
 * this node. Each script checks every key before it changes any, so a node either grants the
 * whole set or leaves it as it was. */
#define ACQUIRE_MULTI_SOURCE                                                                       \
    "for i = 1, #KEYS do\n"                                                                        \
    "    if redis.call(\"exists\", KEYS[i]) == 1 then\n"                                           \
    "        return false\n"                                                                       \
    "    end\n"                                                                                    \
    "end\n"                                                                                        \
    "for i = 1, #KEYS do\n"                                                                        \
    "    redis.call(\"set\", KEYS[i], ARGV[1], \"px\", ARGV[2])\n"                                 \
    "end\n"                                                                                        \
    "return redis.status_reply(\"OK\")\n"

#define EXTEND_MULTI_SOURCE                                                                        \
    "for i = 1, #KEYS do\n"                                                                        \
    "    local v = redis.call(\"get\", KEYS[i])\n"                                                 \
    "    if v ~= ARGV[1] and not (v == false and ARGV[3] == \"1\") then\n"                         \
    "        return 0\n"                                                                           \
    "    end\n"                                                                                    \
    "end\n"                                                                                        \
    "for i = 1, #KEYS do\n"                                                                        \
    "    redis.call(\"set\", KEYS[i], ARGV[1], \"px\", ARGV[2])\n"                                 \
    "end\n"                                                                                        \
    "return 1\n"

/* Deletes every key of the set that still holds the token (a key taken by another holder is left
 * alone) and tells its subscribers, as the release of one key does; 1 only if all of them held
 * it. */
#define RELEASE_MULTI_SOURCE                                                                       \
    "local n = 0\n"                                                                                \
    "for i = 1, #KEYS do\n"                                                                        \
    "    if redis.call(\"get\", KEYS[i]) == ARGV[1] then\n"                                        \
    "        redis.call(\"del\", KEYS[i])\n"                                                       \
    "        redis.pcall(\"publish\", KEYS[i], ARGV[1])\n"                                         \
    "        n = n + 1\n"                                                                          \
    "    end\n"                                                                                    \
    "end\n"                                                                                        \
    "if n == #KEYS then\n"                                                                         \
    "    return 1\n"                                                                               \
    "end\n"                                                                                        \
    "return 0\n"

/* The first key's value and the smallest PTTL of the set when every key holds the same value
 * (or none exists); an error naming the first key that differs otherwise. */
#define INSPECT_MULTI_SOURCE                                                                       \
    "local v = redis.call(\"get\", KEYS[1])\n"                                                     \
    "local t = redis.call(\"pttl\", KEYS[1])\n"                                                    \
    "for i = 2, #KEYS do\n"                                                                        \
    "    local w = redis.call(\"get\", KEYS[i])\n"                                                 \
    "    if w ~= v then\n"                                                                         \
    "        local what = \"holds another value\"\n"                                               \
    "        if w == false then\n"                                                                 \
    "            what = \"is free\"\n"                                                             \
    "        elseif v == false then\n"                                                             \
    "            what = \"is held\"\n"                                                             \
    "        end\n"                                                                                \
    "        return redis.error_reply(\"resources disagree: resource \" .. i .. \" of \" ..\n"     \
    "            #KEYS .. \" \" .. what .. \" (resource 1 \" .. (v and \"is held\" or \"is "       \
    "free\") ..\n"                                                                                 \
    "            \")\")\n"                                                                         \
    "    end\n"                                                                                    \
    "    local p = redis.call(\"pttl\", KEYS[i])\n"                                                \
    "    if p < t then\n"                                                                          \
    "        t = p\n"                                                                              \
    "    end\n"                                                                                    \
    "end\n"                                                                                        \
    "return {v, t, false}\n"

/* Fair turns among waiters (docs/operations.md, "Waiting for a lock"): KEYS[2] is the resource's
 * queue, a sorted set of waiter ids by the time each began to wait (a wall clock in us, the same
 * number on every node, so every node orders the same waiters the same way), and KEYS[3] each
 * waiter's deadline there (the server's clock, ms): a waiter that stops asking (gone, crashed)
 * leaves the queue when it passes. The free key goes to the queue's head, or to anyone when the
 * queue is empty; the head keeps its place while it holds the key, until its release. */
/* head = the queue's first waiter whose deadline has not passed (or me, the caller's own id, even
 * if it has), after dropping those whose deadline has; nil when nobody waits. */
#define QUEUE_HEAD(me)                                                                             \
    "local t = redis.call(\"time\")\n"                                                             \
    "local now = t[1] * 1000 + math.floor(t[2] / 1000)\n"                                          \
    "local head\n"                                                                                 \
    "while true do\n"                                                                              \
    "    head = redis.call(\"zrange\", KEYS[2], 0, 0)[1]\n"                                        \
    "    if not head or head == " me " then\n"                                                     \
    "        break\n"                                                                              \
    "    end\n"                                                                                    \
    "    local due = tonumber(redis.call(\"hget\", KEYS[3], head))\n"                              \
    "    if due and due > now then\n"                                                              \
    "        break\n"                                                                              \
    "    end\n"                                                                                    \
    "    redis.call(\"zrem\", KEYS[2], head)\n"                                                    \
    "    redis.call(\"hdel\", KEYS[3], head, head .. \":g\")\n"                                    \
    "end\n"

/* KEYS[1] = key, KEYS[2] = queue, KEYS[3] = deadlines; ARGV[1] = token, ARGV[2] = ttl ms,
 * ARGV[3] = waiter id, ARGV[4] = its place (us), ARGV[5] = how long its place is kept (ms),
 * ARGV[6] = the attempt's stamp (its send time on the client's clock, us; "": no grant). +OK
 * where the key holds the token already (granted to this waiter by a release, below: the
 * attempt renews it), or SET NX PX for the head (or anyone, when nobody waits); else nil, and
 * the waiter is in the queue (at its place: a later attempt never moves it back) with a fresh
 * deadline, and its grant record "ttl:stamp:token" (the field "<id>:g" of KEYS[3]) says what a
 * release may set for it. The queue's own keys live at least as long as the longest deadline set
 * in them (a queue nobody asks in expires). */
#define ACQUIRE_QUEUED_SOURCE                                                                      \
    QUEUE_HEAD("ARGV[3]")                                                                          \
    "local v = redis.call(\"get\", KEYS[1])\n"                                                     \
    "if v == ARGV[1] then\n"                                                                       \
    "    redis.call(\"pexpire\", KEYS[1], ARGV[2])\n"                                              \
    "    return redis.status_reply(\"OK\")\n"                                                      \
    "end\n"                                                                                        \
    "if not v and (not head or head == ARGV[3]) then\n"                                            \
    "    redis.call(\"set\", KEYS[1], ARGV[1], \"px\", ARGV[2])\n"                                 \
    "    return redis.status_reply(\"OK\")\n"                                                      \
    "end\n"                                                                                        \
    "redis.call(\"zadd\", KEYS[2], \"nx\", ARGV[4], ARGV[3])\n"                                    \
    "redis.call(\"hset\", KEYS[3], ARGV[3], now + tonumber(ARGV[5]))\n"                            \
    "if ARGV[6] ~= \"\" then\n"                                                                    \
    "    local rec = ARGV[2] .. \":\" .. ARGV[6] .. \":\" .. ARGV[1]\n"                            \
    "    redis.call(\"hset\", KEYS[3], ARGV[3] .. \":g\", rec)\n"                                  \
    "end\n"                                                                                        \
    "if redis.call(\"pttl\", KEYS[2]) < tonumber(ARGV[5]) then\n"                                  \
    "    redis.call(\"pexpire\", KEYS[2], ARGV[5])\n"                                              \
    "    redis.call(\"pexpire\", KEYS[3], ARGV[5])\n"                                              \
    "end\n"                                                                                        \
    "return false\n"

/* KEYS as above; ARGV[1] = token, ARGV[2] = the releasing waiter's id ("": none), ARGV[3] = "1"
 * when it leaves the queue (done: it holds nothing and waits no more), else it waits on (the
 * release of a lost attempt). Either way its grant record goes: the token it names is being
 * released. Compare-and-delete as the plain release, then the key goes to the queue's next head
 * at once when that head listens on its own channel (the queue's name, ":" and its id) and has a
 * grant record: the key is set to the record's token with the record's ttl, and the head hears
 * "g:stamp:token" there. Its client counts such grants as the yes of its attempt with that stamp,
 * whose send came before this SET (docs/algorithm.md, "Handoff by grant"). A head that does not
 * listen (its client gone, or the channel refused; PUBSUB NUMSUB refused reads as nobody) gets
 * no grant, so a vanished waiter never holds the key: it is told instead, on its own channel
 * with the token as the message when someone listens there; when nobody does, on the queue's
 * channel naming the head ("head:token"), where every waiter of the resource hears it and only
 * the head acts on it; with nobody queued, on the key's channel, as the plain release does. */
#define RELEASE_QUEUED_DELETE                                                                      \
    "if ARGV[2] ~= \"\" then\n"                                                                    \
    "    if ARGV[3] == \"1\" then\n"                                                               \
    "        redis.call(\"zrem\", KEYS[2], ARGV[2])\n"                                             \
    "        redis.call(\"hdel\", KEYS[3], ARGV[2])\n"                                             \
    "    end\n"                                                                                    \
    "    redis.call(\"hdel\", KEYS[3], ARGV[2] .. \":g\")\n"                                       \
    "end\n"                                                                                        \
    "if redis.call(\"get\", KEYS[1]) ~= ARGV[1] then\n"                                            \
    "    return 0\n"                                                                               \
    "end\n"                                                                                        \
    "redis.call(\"del\", KEYS[1])\n"
#define RELEASE_QUEUED_GRANT                                                                       \
    "if head then\n"                                                                               \
    "    local g = redis.call(\"hget\", KEYS[3], head .. \":g\")\n"                                \
    "    local ch = KEYS[2] .. \":\" .. head\n"                                                    \
    "    local subs = g and redis.pcall(\"pubsub\", \"numsub\", ch)\n"                             \
    "    if type(subs) == \"table\" and tonumber(subs[2]) > 0 then\n"                              \
    "        local a = string.find(g, \":\", 1, true)\n"                                           \
    "        local b = string.find(g, \":\", a + 1, true)\n"                                       \
    "        local ttl = string.sub(g, 1, a - 1)\n"                                                \
    "        redis.call(\"set\", KEYS[1], string.sub(g, b + 1), \"px\", ttl)\n"                    \
    "        redis.call(\"hdel\", KEYS[3], head .. \":g\")\n"                                      \
    "        redis.pcall(\"publish\", ch, \"g:\" .. string.sub(g, a + 1))\n"                       \
    "        return 1\n"                                                                           \
    "    end\n"                                                                                    \
    "end\n"
#define RELEASE_QUEUED_TELL                                                                        \
    "local told = 0\n"                                                                             \
    "if head then\n"                                                                               \
    "    told = redis.pcall(\"publish\", KEYS[2] .. \":\" .. head, ARGV[1])\n"                     \
    "end\n"                                                                                        \
    "if type(told) ~= \"number\" or told == 0 then\n"                                              \
    "    if head then\n"                                                                           \
    "        redis.pcall(\"publish\", KEYS[2], head .. \":\" .. ARGV[1])\n"                        \
    "    else\n"                                                                                   \
    "        redis.pcall(\"publish\", KEYS[1], ARGV[1])\n"                                         \
    "    end\n"                                                                                    \
    "end\n"                                                                                        \
    "return 1\n"
#define RELEASE_QUEUED_SOURCE                                                                      \
    RELEASE_QUEUED_DELETE QUEUE_HEAD("nil") RELEASE_QUEUED_GRANT RELEASE_QUEUED_TELL

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

const redlock__script redlock__script_acquire_multi = {
    "acquire_multi",
    ACQUIRE_MULTI_SOURCE,
    sizeof(ACQUIRE_MULTI_SOURCE) - 1,
    "fae383dd57921c37ca4fd97a50b098f4fe2a786f",
};

const redlock__script redlock__script_extend_multi = {
    "extend_multi",
    EXTEND_MULTI_SOURCE,
    sizeof(EXTEND_MULTI_SOURCE) - 1,
    "109131c414984217197c55453625f096309590c5",
};

const redlock__script redlock__script_release_multi = {
    "release_multi",
    RELEASE_MULTI_SOURCE,
    sizeof(RELEASE_MULTI_SOURCE) - 1,
    "b2e6aef0f0d3c60b762d31ea2f208539289d2997",
};

const redlock__script redlock__script_inspect_multi = {
    "inspect_multi",
    INSPECT_MULTI_SOURCE,
    sizeof(INSPECT_MULTI_SOURCE) - 1,
    "9edaae551a8def096309c4ce7aa3ade9ddbf96ca",
};

const redlock__script redlock__script_acquire_queued = {
    "acquire_queued",
    ACQUIRE_QUEUED_SOURCE,
    sizeof(ACQUIRE_QUEUED_SOURCE) - 1,
    "032468e6d2b2ac9df6a30e03830f7c72b2e6c61c",
};

const redlock__script redlock__script_release_queued = {
    "release_queued",
    RELEASE_QUEUED_SOURCE,
    sizeof(RELEASE_QUEUED_SOURCE) - 1,
    "1dff47f26f9d7882d269481a995a205b81977ba7",
};

const redlock__script *const redlock__scripts[REDLOCK__SCRIPTS] = {
    &redlock__script_extend,         &redlock__script_release,
    &redlock__script_inspect,        &redlock__script_acquire_fenced,
    &redlock__script_commit,         &redlock__script_extend_fenced,
    &redlock__script_acquire_multi,  &redlock__script_extend_multi,
    &redlock__script_release_multi,  &redlock__script_inspect_multi,
    &redlock__script_acquire_queued, &redlock__script_release_queued,
};
