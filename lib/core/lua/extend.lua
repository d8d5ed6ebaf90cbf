-- SPDX-License-Identifier: MIT
-- extend: compare-and-pexpire, optionally re-taking a missing key.
-- KEYS[1] = the lock key. ARGV[1] = token, ARGV[2] = ttl ms, ARGV[3] = "1" to re-take a missing
-- key. Returns 1 if the key held the token (its ttl reset), 2 if it was missing and is set anew
-- (a re-created key vouches for no moment before: lib/lock/kept.c), else 0.
local v = redis.call("get", KEYS[1])
if v == ARGV[1] then
    return redis.call("pexpire", KEYS[1], ARGV[2])
end
if v == false and ARGV[3] == "1" then
    redis.call("set", KEYS[1], ARGV[1], "px", ARGV[2])
    return 2
end
return 0
