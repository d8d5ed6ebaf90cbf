-- SPDX-License-Identifier: MIT
-- extend_multi: KEYS = the set's keys, ARGV as extend. If every key holds the token (or, with
-- ARGV[3] = "1", holds it or is missing), every key is set to the token with the new ttl: 1 when
-- every key held it, 2 when one was missing and is set anew; else nothing changes: 0.
local anew = false
for i = 1, #KEYS do
    local v = redis.call("get", KEYS[i])
    if v == false and ARGV[3] == "1" then
        anew = true
    elseif v ~= ARGV[1] then
        return 0
    end
end
for i = 1, #KEYS do
    redis.call("set", KEYS[i], ARGV[1], "px", ARGV[2])
end
if anew then
    return 2
end
return 1
