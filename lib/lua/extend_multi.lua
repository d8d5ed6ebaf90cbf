-- SPDX-License-Identifier: MIT
-- extend_multi: KEYS = the set's keys, ARGV as extend. If every key holds the token (or, with
-- ARGV[3] = "1", holds it or is missing), every key is set to the token with the new ttl: 1;
-- else nothing changes: 0.
for i = 1, #KEYS do
    local v = redis.call("get", KEYS[i])
    if v ~= ARGV[1] and not (v == false and ARGV[3] == "1") then
        return 0
    end
end
for i = 1, #KEYS do
    redis.call("set", KEYS[i], ARGV[1], "px", ARGV[2])
end
return 1
