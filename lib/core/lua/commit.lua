-- SPDX-License-Identifier: MIT
-- commit: counter = max(counter, fence) where the key still holds the token.
-- KEYS[1] = the lock key, KEYS[2] = its counter. ARGV[1] = token, ARGV[2] = fence.
-- Returns 1 if the key holds the token (the counter raised), else 0; an error when the counter is
-- not a decimal number.
--@include fence.lua
if redis.call("get", KEYS[1]) ~= ARGV[1] then
    return 0
end
local c = fence_read(KEYS[2])
if c == nil then
    return redis.error_reply(FENCE_BAD)
end
fence_raise(KEYS[2], c, ARGV[2])
return 1
