-- SPDX-License-Identifier: MIT
-- extend_fenced: extend, where a re-taken key also raises the counter to the lock's fence (a
-- node that came back empty gets both back).
-- KEYS[1] = the lock key, KEYS[2] = its counter. ARGV as extend, ARGV[4] = the lock's fence.
local v = redis.call("get", KEYS[1])
if v == ARGV[1] then
    return redis.call("pexpire", KEYS[1], ARGV[2])
end
if v ~= false or ARGV[3] ~= "1" then
    return 0
end
--@include counter_check.lua
redis.call("set", KEYS[1], ARGV[1], "px", ARGV[2])
local f = ARGV[4]
--@include counter_raise.lua
return 1
