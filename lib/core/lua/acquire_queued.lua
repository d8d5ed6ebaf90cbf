-- SPDX-License-Identifier: MIT
-- acquire_queued: a waiter's attempt (queue.lua). KEYS = the lock's keys (one, or a set's).
-- ARGV[1] = token, ARGV[2] = ttl ms, ARGV[3] = waiter id, ARGV[4] = its place (us),
-- ARGV[5] = how long its place is kept (ms), ARGV[6] = the attempt's stamp (its send time on the
-- client's clock, us; "": no grant on this node), ARGV[7] = tag (the node's index on the client),
-- ARGV[8] = "1" for a fenced lock (one key) with its own counter, KEYS[1]:fence, "2" for one
-- with its fence domain's counter, ARGV[10] (in KEYS[1]'s hash slot), else "0"; ARGV[9] = the
-- waiter's own channel.
-- Each key is the waiter's when it holds the token already (set for it by a grant: renewed) or
-- is free and the waiter heads its queue (or nobody waits). If every key is, every key is set to
-- the token with the ttl: +OK, or for a fenced lock the counter as it was (the counter goes up
-- by one: fence.lua). Else nothing is taken; the waiter is in every key's queue (at its place: a
-- later attempt never moves it back) with a fresh deadline, and for each key it does not hold a
-- grant record "ttl:stamp:tag:j:fenced:#channel:channel..token" (j: the key's index in the set;
-- for fenced "2", "2:#counter:counter" in place of fenced) says what a release may set for it
-- (release_queued.lua); the reply is how long (ms) until this
-- node could let it in without a release: the longest of the blocking keys' PTTLs and of the
-- deadlines of the heads before it, or -1 when one has no end.
--@include fence.lua
--@include queue.lua
local tok, ttl, me = ARGV[1], ARGV[2], ARGV[3]
local fenced = ARGV[8] == "1" or ARGV[8] == "2"
local ck = KEYS[1] .. ":fence"
if ARGV[8] == "2" then
    ck = ARGV[10]
end
local c
if fenced then
    c = fence_read(ck)
    if c == nil then
        return redis.error_reply(FENCE_BAD)
    end
end
local mine = {}
local free = true
local wait = 0
for i = 1, #KEYS do
    local v = redis.call("get", KEYS[i])
    mine[i] = v == tok
    if not mine[i] then
        local h, due = queue_head(KEYS[i], me)
        if v or (h and h ~= me) then
            free = false
            local left = -1 -- a head nobody vouches for: no end this node can tell
            if v then
                left = redis.call("pttl", KEYS[i])
            elseif due then
                left = due - now
            end
            if left < 0 or wait < 0 then
                wait = -1
            elseif left > wait then
                wait = left
            end
        end
    end
end
if free then
    for i = 1, #KEYS do
        redis.call("set", KEYS[i], tok, "px", ttl)
    end
    if fenced then
        return fence_bump(ck, c)
    end
    return redis.status_reply("OK")
end
local place_ttl = tonumber(ARGV[5])
for i = 1, #KEYS do
    local q, d = KEYS[i] .. ":queue", KEYS[i] .. ":queue-due"
    redis.call("zadd", q, "nx", ARGV[4], me)
    redis.call("hset", d, me, now + place_ttl)
    if ARGV[6] ~= "" and not mine[i] then
        local rec = ttl .. ":" .. ARGV[6] .. ":" .. ARGV[7] .. ":" .. (i - 1) .. ":" .. ARGV[8]
        if ARGV[8] == "2" then
            rec = rec .. ":" .. #ck .. ":" .. ck
        end
        redis.call("hset", d, me .. ":g", rec .. ":" .. #ARGV[9] .. ":" .. ARGV[9] .. tok)
    end
    if redis.call("pttl", q) < place_ttl then
        redis.call("pexpire", q, place_ttl)
        redis.call("pexpire", d, place_ttl)
    end
end
return wait
