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
-- nil when nobody waits; and that head's deadline (nil for me, or for a head nobody vouches for).
-- The work is bounded whatever another client wrote into the queue
-- (docs/algorithm.md, "Evidence and hints"): the first QUEUE_SCAN members are read in one call,
-- and at most that many dropped; when all of them are stale, the head is the first member left
-- (a waiter nobody vouches for, kept out of turn until later calls drop it: everybody waits
-- behind it at most its place deadline, or QUEUE_SCAN members a call).
local QUEUE_SCAN = 1000
local function queue_head(key, me)
    local q, d = key .. ":queue", key .. ":queue-due"
    local ids = redis.call("zrange", q, 0, QUEUE_SCAN - 1)
    if #ids == 0 then
        return nil
    end
    local stale = {}
    local head, head_due
    for i = 1, #ids do
        local due = tonumber(redis.call("hget", d, ids[i]))
        if ids[i] == me or (due and due > now) then
            head, head_due = ids[i], due
            break
        end
        stale[#stale + 1] = ids[i]
    end
    if #stale > 0 then
        redis.call("zrem", q, unpack(stale))
        local fields = {}
        for i = 1, #stale do
            fields[#fields + 1] = stale[i]
            fields[#fields + 1] = stale[i] .. ":g"
        end
        redis.call("hdel", d, unpack(fields))
    end
    if head then
        return head, head_due
    end
    return redis.call("zrange", q, 0, 0)[1], nil
end
-- Whether anybody listens on channel ch. Any refusal of PUBSUB (an ACL without +pubsub|numsub)
-- reads as nobody: a grant is then not made, and nothing else depends on the answer.
local function listens(ch)
    local subs = redis.pcall("pubsub", "numsub", ch)
    return type(subs) == "table" and type(subs[2]) == "number" and subs[2] > 0
end
