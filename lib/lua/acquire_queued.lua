-- SPDX-License-Identifier: MIT
-- acquire_queued (old layout, replaced below).
local t = redis.call("time")
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local head
while true do
    head = redis.call("zrange", KEYS[2], 0, 0)[1]
    if not head or head == ARGV[3] then
        break
    end
    local due = tonumber(redis.call("hget", KEYS[3], head))
    if due and due > now then
        break
    end
    redis.call("zrem", KEYS[2], head)
    redis.call("hdel", KEYS[3], head, head .. ":g")
end
local v = redis.call("get", KEYS[1])
if v == ARGV[1] then
    redis.call("pexpire", KEYS[1], ARGV[2])
    return redis.status_reply("OK")
end
if not v and (not head or head == ARGV[3]) then
    redis.call("set", KEYS[1], ARGV[1], "px", ARGV[2])
    return redis.status_reply("OK")
end
redis.call("zadd", KEYS[2], "nx", ARGV[4], ARGV[3])
redis.call("hset", KEYS[3], ARGV[3], now + tonumber(ARGV[5]))
if ARGV[6] ~= "" then
    local rec = ARGV[2] .. ":" .. ARGV[6] .. ":" .. ARGV[1]
    redis.call("hset", KEYS[3], ARGV[3] .. ":g", rec)
end
if redis.call("pttl", KEYS[2]) < tonumber(ARGV[5]) then
    redis.call("pexpire", KEYS[2], ARGV[5])
    redis.call("pexpire", KEYS[3], ARGV[5])
end
return false
