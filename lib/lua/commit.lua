-- SPDX-License-Identifier: MIT
-- commit: counter = max(counter, fence) where the key still holds the token.
-- KEYS[1] = the lock key, KEYS[2] = its counter. ARGV[1] = token, ARGV[2] = fence. Returns 1 if
-- the key holds the token (the counter raised), else 0.
if redis.call("get", KEYS[1]) ~= ARGV[1] then
    return 0
end
--@include counter_check.lua
local f = ARGV[2]
--@include counter_raise.lua
return 1
