-- SPDX-License-Identifier: MIT
-- queue.lua - fair turns among waiters (docs/algorithm.md, "Waiting"), included by the queued
-- scripts. Each lock key K has a queue K:queue, a sorted set of waiter ids by their place (when
-- each began to wait: a wall clock in us, the same number on every node, so every node orders
-- the same waiters the same way; ties by id), and K:queue-due, a hash of each waiter's place
-- deadline (the server's clock, ms; every attempt moves it on) and of its grant record (field
-- "<id>:g"). A waiter that stops asking (gone, crashed, cut off) leaves the queue when its
-- deadline passes. The names are K's with a suffix, so they share K's hash tag: on a Redis Cluster
-- the library queues only keys with one (ops.c), and the scripts may name them without declaring
-- them (the same slot).
local now
do
    local t = redis.call("time")
    now = t[1] * 1000 + math.floor(t[2] / 1000)
end
-- The head of key's queue: its first waiter whose deadline has not passed, or me (the caller's
-- own id, even if its deadline has: it is asking now), after dropping those whose deadline has.
-- nil when nobody waits.
local function queue_head(key, me)
    local q, d = key .. ":queue", key .. ":queue-due"
    while true do
        local h = redis.call("zrange", q, 0, 0)[1]
        if not h or h == me then
            return h
        end
        local due = tonumber(redis.call("hget", d, h))
        if due and due > now then
            return h
        end
        redis.call("zrem", q, h)
        redis.call("hdel", d, h, h .. ":g")
    end
end
-- Whether anybody listens on channel ch. Any refusal of PUBSUB (an ACL without +pubsub|numsub)
-- reads as nobody: a grant is then not made, and nothing else depends on the answer.
local function listens(ch)
    local subs = redis.pcall("pubsub", "numsub", ch)
    return type(subs) == "table" and type(subs[2]) == "number" and subs[2] > 0
end
