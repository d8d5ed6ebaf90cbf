-- SPDX-License-Identifier: MIT
-- counter = max(counter c, f), compared as decimal numbers (counter_check.lua).
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
    redis.call("set", KEYS[2], f)
end
