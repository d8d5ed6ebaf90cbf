-- SPDX-License-Identifier: MIT
-- A fence counter is a decimal number without leading zeros, so two of them compare as numbers by
-- length, then digit by digit: no conversion to Lua's doubles, which would round counters above
-- 2^53, and no Lua string comparison, which follows the server's locale (strcoll). A counter of
-- any other form is refused before anything is written.
local c = redis.call("get", KEYS[2])
if c and not (c == "0" or string.find(c, "^[1-9]%d*$")) then
    return redis.error_reply("fence counter is not a decimal number")
end
