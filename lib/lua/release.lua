-- SPDX-License-Identifier: MIT
-- release: compare-and-delete. Where the key held the token, tell the node's subscribers
-- (waiters of other clients, notify.h) that it was freed, on a channel named like the key, with
-- the token that held it. pcall: an ACL that forbids PUBLISH or the channel must not make the
-- release fail.
-- KEYS[1] = the lock key. ARGV[1] = token. Returns 1 if the key held the token and was deleted,
-- else 0.
if redis.call("get", KEYS[1]) == ARGV[1] then
    redis.call("del", KEYS[1])
    redis.pcall("publish", KEYS[1], ARGV[1])
    return 1
end
return 0
