-- SPDX-License-Identifier: MIT
-- release_queued: the release of a waiter's lock, or of its lost attempt (queue.lua).
-- KEYS = the lock's keys. ARGV[1] = token, ARGV[2] = the releasing waiter's id ("": none),
-- ARGV[3] = "1" when it leaves the queues (done: it holds nothing and waits no more), else it
-- waits on; ARGV[4] = "1" for a holder's release, which may wake the next waiter, "0" for a lost
-- attempt's, which wakes nobody.
-- For each key: compare-and-delete as release.lua, then the waiter's grant record goes (the token
-- it names is being released), and a deleted key goes to its queue's next head at once
-- when that head has a grant record and listens on the channel the record names: the key is set
-- to the record's token, with the record's ttl when the head's place deadline is at least that
-- far, else only until that deadline (a head that cannot act on it, crashed or cut off behind a
-- half-open connection, delays the others no longer than its place would have), and for a fenced
-- head the counter its record names goes up by one (fence.lua). The head hears "g:stamp:tag:j:full:counter:token"
-- on its channel (full: 1 when the ttl was the record's; counter: "" unless fenced), and its
-- client counts that as the yes of node tag for its attempt sent at stamp (docs/algorithm.md,
-- "Handoff by grant"). Otherwise a holder's release tells the head ("w:token" on its channel;
-- when nobody listens there, "head:token" on the queue's channel, K:queue), or with nobody
-- queued the key's own channel, as release.lua does. No pubsub refusal changes the reply.
-- Returns 1 if every key held the token (and was deleted), else 0; {that, error} when the queue's
-- upkeep failed (the release itself stands).
--@include fence.lua
--@include queue.lua
local tok, me, tell = ARGV[1], ARGV[2], ARGV[4] == "1"
-- A grant record's fields (acquire_queued.lua), or nil for anything else. ck: the counter of a
-- fence domain (fenced "2"), else nil.
local function record(g)
    local ttl, stamp, tag, j, fenced, rest =
        string.match(g, "^(%d+):(%d+):(%d+):(%d+):([012]):(.*)$")
    if not rest then
        return nil
    end
    local ck
    if fenced == "2" then
        local klen, after = string.match(rest, "^(%d+):(.*)$")
        if not after then
            return nil
        end
        klen = tonumber(klen)
        if string.sub(after, klen + 1, klen + 1) ~= ":" then
            return nil
        end
        ck = string.sub(after, 1, klen)
        rest = string.sub(after, klen + 2)
    end
    local clen, tail = string.match(rest, "^(%d+):(.*)$")
    if not tail then
        return nil
    end
    clen = tonumber(clen)
    return {ttl = tonumber(ttl), stamp = stamp, tag = tag, j = j, fenced = fenced ~= "0", ck = ck,
            ch = string.sub(tail, 1, clen), token = string.sub(tail, clen + 1)}
end
-- Set key for head h as its record r says, if h listens; returns whether it did.
local function grant(key, h, r)
    if not listens(r.ch) then
        return false
    end
    local c = ""
    local ck = r.ck or key .. ":fence"
    if r.fenced then
        c = fence_read(ck)
        if c == nil then
            return false
        end
    end
    local left = tonumber(redis.call("hget", key .. ":queue-due", h)) - now
    local full = r.ttl <= left
    redis.call("set", key, r.token, "px", full and r.ttl or left)
    redis.call("hdel", key .. ":queue-due", h .. ":g")
    if r.fenced then
        c = fence_bump(ck, c)
    end
    local msg = "g:" .. r.stamp .. ":" .. r.tag .. ":" .. r.j .. ":" .. (full and "1" or "0")
    redis.pcall("publish", r.ch, msg .. ":" .. c .. ":" .. r.token)
    return true
end
-- key was deleted: hand it to its queue's head, or tell.
local function hand_on(key)
    local h = queue_head(key, nil)
    if not h then
        if tell then
            redis.pcall("publish", key, tok)
        end
        return
    end
    local ch = key .. ":queue:" .. h
    local g = redis.call("hget", key .. ":queue-due", h .. ":g")
    local r = g and record(g)
    if r then
        if grant(key, h, r) then
            return
        end
        ch = r.ch
    end
    if not tell then
        return
    end
    local told = redis.pcall("publish", ch, "w:" .. tok)
    if type(told) ~= "number" or told == 0 then
        redis.pcall("publish", key .. ":queue", h .. ":" .. tok)
    end
end
-- The compare-and-delete runs first and its result stands whatever the queue's upkeep meets
-- (another client's writes into the queue keys: wrong types, garbage): the upkeep runs protected,
-- and its first error goes back beside the result, {result, error}, never in its place.
local upkeep_error
local function upkeep(f, key)
    local ok, err = pcall(f, key)
    if not ok and not upkeep_error then
        upkeep_error = type(err) == "table" and err.err or tostring(err)
    end
end
local function leave(key)
    local d = key .. ":queue-due"
    if ARGV[3] == "1" then
        redis.call("zrem", key .. ":queue", me)
        redis.call("hdel", d, me)
    end
    redis.call("hdel", d, me .. ":g")
end
local n = 0
for i = 1, #KEYS do
    local ok, v = pcall(redis.call, "get", KEYS[i])
    local deleted = ok and v == tok
    if deleted then
        redis.call("del", KEYS[i])
        n = n + 1
    end
    -- The waiter's own grant record goes before any hand-on: the key is never handed back to it.
    if me ~= "" then
        upkeep(leave, KEYS[i])
    end
    if deleted then
        upkeep(hand_on, KEYS[i])
    end
end
local result = 0
if n == #KEYS then
    result = 1
end
if upkeep_error then
    return {result, upkeep_error}
end
return result
