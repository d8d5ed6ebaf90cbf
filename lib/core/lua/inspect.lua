-- SPDX-License-Identifier: MIT
-- inspect: read-only. KEYS[1] = the lock key, KEYS[2] = its fence counter. Returns
-- {value or nil, PTTL, counter or nil}.
return {redis.call("get", KEYS[1]), redis.call("pttl", KEYS[1]),
        redis.call("get", KEYS[2])}
