-- SPDX-License-Identifier: MIT
-- extend_fenced: extend, where a re-taken key also raises the counter to the lock's fence (a
-- node that came back empty gets both back).
-- KEYS[1] = the lock key, KEYS[2] = its counter. ARGV as extend.lua, ARGV[4] = the lock's fence.
-- Returns as extend.lua: 1 renewed, 2 set anew, 0 not ours.
--@include fence.lua
local v = redis.call("get", KEYS[1])
if v == ARGV[1] then
    return redis.call("pexpire", KEYS[1], ARGV[2])
end
if v ~= false or ARGV[3] ~= "1" then
    return 0
end
local c = fence_read(KEYS[2])
if c == nil then
    return redis.error_reply(FENCE_BAD)
end
redis.call("set", KEYS[1], ARGV[1], "px", ARGV[2])
fence_raise(KEYS[2], c, ARGV[4])
return 2
