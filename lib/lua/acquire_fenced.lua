-- SPDX-License-Identifier: MIT
-- acquire_fenced: SET NX PX; where it set the key, the counter goes up by one and its value
-- before is the reply. c + 1 is c's digits plus one, carried by hand: no Lua number (a double)
-- holds every counter. A yes-voter that read the largest counter has thereby written the fence
-- (1 + that counter) while its key stands: the commit round has nothing left to do there
-- (docs/algorithm.md, "Fencing tokens").
-- KEYS[1] = the lock key, KEYS[2] = its counter. ARGV[1] = token, ARGV[2] = ttl ms. Returns the
-- counter as it was (a decimal string, "0" when absent) if it set the key; nil when the key
-- exists; an error, before anything is written, when the counter is not a decimal number.
--@include counter_check.lua
if not redis.call("set", KEYS[1], ARGV[1], "nx", "px", ARGV[2]) then
    return false
end
local n = c or "0"
local i = #n
while i > 0 and string.byte(n, i) == 57 do
    i = i - 1
end
local up = "1"
if i > 0 then
    up = string.sub(n, 1, i - 1) .. string.char(string.byte(n, i) + 1)
end
redis.call("set", KEYS[2], up .. string.rep("0", #n - i))
return n
