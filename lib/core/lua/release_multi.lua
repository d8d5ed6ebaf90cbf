-- SPDX-License-Identifier: MIT
-- release_multi: KEYS = the set's keys, ARGV as release.lua. Deletes (and, for a holder's
-- release, announces as release.lua does) each key that holds the token; a key taken by another
-- holder is left alone. 1 if all of them held it, else 0.
local n = 0
for i = 1, #KEYS do
    if redis.call("get", KEYS[i]) == ARGV[1] then
        redis.call("del", KEYS[i])
        if ARGV[2] == "1" then
            redis.pcall("publish", KEYS[i], ARGV[1])
        end
        n = n + 1
    end
end
if n == #KEYS then
    return 1
end
return 0
