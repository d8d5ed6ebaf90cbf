-- SPDX-License-Identifier: MIT
-- inspect_multi: read-only. KEYS = the set's keys. {value or nil, smallest PTTL, nil} when every
-- key holds the same value (or none exists); an error reply naming the first key that differs
-- otherwise.
local v = redis.call("get", KEYS[1])
local t = redis.call("pttl", KEYS[1])
for i = 2, #KEYS do
    local w = redis.call("get", KEYS[i])
    if w ~= v then
        local what = "holds another value"
        if w == false then
            what = "is free"
        elseif v == false then
            what = "is held"
        end
        return redis.error_reply("resources disagree: resource " .. i .. " of " ..
            #KEYS .. " " .. what .. " (resource 1 " .. (v and "is held" or "is free") ..
            ")")
    end
    local p = redis.call("pttl", KEYS[i])
    if p < t then
        t = p
    end
end
return {v, t, false}
