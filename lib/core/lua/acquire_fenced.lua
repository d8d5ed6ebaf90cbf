-- SPDX-License-Identifier: MIT
-- acquire_fenced: SET NX PX, and where it set the key the counter goes up by one in the same
-- atomic step (fence.lua, fence_bump).
-- KEYS[1] = the lock key, KEYS[2] = its counter. ARGV[1] = token, ARGV[2] = ttl ms.
-- Returns the counter as it was (a decimal string, "0" when absent) if it set the key; nil when
-- the key exists; an error, before anything is written, when the counter is not a decimal number.
--@include fence.lua
local c = fence_read(KEYS[2])
if c == nil then
    return redis.error_reply(FENCE_BAD)
end
if not redis.call("set", KEYS[1], ARGV[1], "nx", "px", ARGV[2]) then
    return false
end
return fence_bump(KEYS[2], c)
