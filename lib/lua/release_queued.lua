-- SPDX-License-Identifier: MIT
-- release_queued (old layout, replaced below).
if ARGV[2] ~= "" then
    if ARGV[3] == "1" then
        redis.call("zrem", KEYS[2], ARGV[2])
        redis.call("hdel", KEYS[3], ARGV[2])
    end
    redis.call("hdel", KEYS[3], ARGV[2] .. ":g")
end
if redis.call("get", KEYS[1]) ~= ARGV[1] then
    return 0
end
redis.call("del", KEYS[1])
local t = redis.call("time")
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local head
while true do
    head = redis.call("zrange", KEYS[2], 0, 0)[1]
    if not head or head == nil then
        break
    end
    local due = tonumber(redis.call("hget", KEYS[3], head))
    if due and due > now then
        break
    end
    redis.call("zrem", KEYS[2], head)
    redis.call("hdel", KEYS[3], head, head .. ":g")
end
if head then
    local g = redis.call("hget", KEYS[3], head .. ":g")
    local ch = KEYS[2] .. ":" .. head
    local subs = g and redis.pcall("pubsub", "numsub", ch)
    if type(subs) == "table" and tonumber(subs[2]) > 0 then
        local a = string.find(g, ":", 1, true)
        local b = string.find(g, ":", a + 1, true)
        local ttl = string.sub(g, 1, a - 1)
        redis.call("set", KEYS[1], string.sub(g, b + 1), "px", ttl)
        redis.call("hdel", KEYS[3], head .. ":g")
        redis.pcall("publish", ch, "g:" .. string.sub(g, a + 1))
        return 1
    end
end
local told = 0
if head then
    told = redis.pcall("publish", KEYS[2] .. ":" .. head, ARGV[1])
end
if type(told) ~= "number" or told == 0 then
    if head then
        redis.pcall("publish", KEYS[2], head .. ":" .. ARGV[1])
    else
        redis.pcall("publish", KEYS[1], ARGV[1])
    end
end
return 1
