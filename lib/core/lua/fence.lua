-- SPDX-License-Identifier: MIT
-- fence.lua - the fence counter's arithmetic, included by every script that reads or writes one.
-- A counter is a decimal number without leading zeros, so two of them compare as numbers by
-- length, then digit by digit, and c + 1 is c's digits plus one carried by hand: no conversion
-- to Lua's numbers (doubles, which round counters above 2^53), and no Lua string comparison,
-- which follows the server's locale (strcoll). A counter of any other form is refused before
-- anything is written.
local FENCE_BAD = "fence counter is not a decimal number"
-- The counter at ck: its digits, false when there is none, nil when it is not a decimal number.
local function fence_read(ck)
    local c = redis.call("get", ck)
    if c and not (c == "0" or string.find(c, "^[1-9]%d*$")) then
        return nil
    end
    return c
end
-- Counter c (as fence_read gave it) + 1 into ck; returns c ("0" when there was none). A script
-- that sets a lock key and does this in the same step has written the fence 1 + c while its key
-- stands: a yes that read the largest counter needs no commit (docs/algorithm.md, "Fencing").
local function fence_bump(ck, c)
    local n = c or "0"
    local i = #n
    while i > 0 and string.byte(n, i) == 57 do
        i = i - 1
    end
    local up = "1"
    if i > 0 then
        up = string.sub(n, 1, i - 1) .. string.char(string.byte(n, i) + 1)
    end
    redis.call("set", ck, up .. string.rep("0", #n - i))
    return n
end
-- ck = max(counter c, fence f).
local function fence_raise(ck, c, f)
    local below = c == false or #c < #f
    if c and #c == #f then
        for i = 1, #f do
            local x, y = string.byte(c, i), string.byte(f, i)
            if x ~= y then
                below = x < y
                break
            end
        end
    end
    if below then
        redis.call("set", ck, f)
    end
end
