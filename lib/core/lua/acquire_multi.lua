-- SPDX-License-Identifier: MIT
-- acquire_multi: several resources (redlock_acquire_multi), all or none on this node: every key
-- is checked before any is changed.
-- KEYS = the set's keys. ARGV[1] = token, ARGV[2] = ttl ms. SETs every key PX if none exists
-- (+OK), else nil and nothing written.
for i = 1, #KEYS do
    if redis.call("exists", KEYS[i]) == 1 then
        return false
    end
end
for i = 1, #KEYS do
    redis.call("set", KEYS[i], ARGV[1], "px", ARGV[2])
end
return redis.status_reply("OK")
