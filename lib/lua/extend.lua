-- SPDX-License-Identifier: MIT
-- extend: compare-and-pexpire, optionally re-taking a missing key.
-- KEYS[1] = the lock key. ARGV[1] = token, ARGV[2] = ttl ms, ARGV[3] = "1" to re-take a missing
-- key. Returns 1 if the key holds the token (its ttl reset) or was re-taken, else 0.
local v = redis.call("get", KEYS[1])
if v == ARGV[1] then
    return redis.call("pexpire", KEYS[1], ARGV[2])
end
if v == false and ARGV[3] == "1" then
    redis.call("set", KEYS[1], ARGV[1], "px", ARGV[2])
    return 1
end
return 0
