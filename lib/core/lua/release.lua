-- SPDX-License-Identifier: MIT
-- release: compare-and-delete. A holder's release (ARGV[2] = "1") tells the node's subscribers
-- (waiters, subscriber.h) that the key was freed, on a channel named like the key, with the token
-- that held it; the release of a lost attempt ("0") tells nobody: it freed nothing that was
-- anybody's turn, and waking every waiter for it made them storm. pcall: an ACL that forbids
-- PUBLISH or the channel must not make the release fail.
-- KEYS[1] = the lock key. ARGV[1] = token, ARGV[2] = "1" to tell. Returns 1 if the key held the
-- token and was deleted, else 0.
if redis.call("get", KEYS[1]) == ARGV[1] then
    redis.call("del", KEYS[1])
    if ARGV[2] == "1" then
        redis.pcall("publish", KEYS[1], ARGV[1])
    end
    return 1
end
return 0
