-- acquire.lua: take or re-enter the reentrant lock for one owner.
--
-- KEYS[1]  the lock hash        (<prefix>:{<name>})
-- KEYS[2]  the fencing counter  (<prefix>:{<name>}:fence; touched only when ARGV[4] is '1')
-- ARGV[1]  owner id             (the hash field; its value is the owner's hold count)
-- ARGV[2]  lease in ms
-- ARGV[3]  request id           ('<client-tag>.<seq>', unique per request)
-- ARGV[4]  '1' to hand out a fencing token, '0' otherwise
--
-- Returns:
--   {1, count, hold, token}  acquired. count is the owner's hold count after this acquire
--                            (1 = fresh); hold is the hold id; token is the hold's fencing
--                            token, 0 when it has none or none was asked for.
--   {0, pttl}                held by another owner; pttl is the key's remaining TTL in ms
--   {2, what}                the key is not one of our locks; nothing was written
--
-- The hash of a held lock:
--   <owner>          hold count (the reentrancy depth, summed over every client of the owner)
--   "\1h"            hold id: the request id of the fresh acquire that created this hold.
--                    Every release, renewal and reconciliation names it and acts only while
--                    it is current, so a stale guard, or a retry that arrives after the hold
--                    ended, can never give back a newer hold of the same owner
--                    (property "release is true", "never two holders").
--   "\1r<tag>"       the seq of the last re-entry or partial release that client <tag>
--                    applied to this hold. It makes re-entries and partial releases
--                    exactly-once without per-request latch keys: a client serialises its
--                    requests per (lock, owner), so "my last applied request" is enough to
--                    answer "did my lost request run?" (see probe.lua, release.lua).
--                    It lives and dies with the hash: no key outlives the lock ("no garbage").
--   "\1fence"        the hold's fencing token, for fenced holds
-- A fresh acquire needs no record: the hold id itself says whether it ran.
--
-- Expiry: a fresh acquire sets the lease. A re-entry only ever lengthens it (PEXPIRE GT;
-- Redis 7.0+), so a short lease nested in a longer hold, from this client or another
-- client of the same owner, cannot cut the outer hold's expiry ("never two holders").
--
-- Fencing: token = max(counter + 1, server time in microseconds). The time floor keeps
-- tokens increasing when the counter is lost (restart without persistence, FLUSHALL,
-- failover to a replica that missed the INCR), as long as the server clock does not step
-- back by more than the outage lasted ("tokens only go up"). Lua 5.1 numbers are doubles:
-- exact up to 2^53, i.e. for microsecond times until the year 2255.
--
-- Why TYPE first: HGET on a string key raises WRONGTYPE, a generic script error; checking
-- first gives a typed error and writes nothing. A hash without an expiry or without a hold
-- id was not written by this library and is refused.
local HOLD, FENCE = '\1h', '\1fence'
local lock, owner, lease, request = KEYS[1], ARGV[1], ARGV[2], ARGV[3]

local function next_token()
  local now = redis.call('TIME')
  local floor = tonumber(now[1]) * 1000000 + tonumber(now[2])
  local last = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
  local token = math.max(last + 1, floor)
  redis.call('SET', KEYS[2], string.format('%.0f', token))
  return token
end

local kind = redis.call('TYPE', lock).ok
if kind == 'none' then
  local token = 0
  if ARGV[4] == '1' then
    token = next_token()
    redis.call('HSET', lock, owner, 1, HOLD, request, FENCE, string.format('%.0f', token))
  else
    redis.call('HSET', lock, owner, 1, HOLD, request)
  end
  redis.call('PEXPIRE', lock, lease)
  return {1, 1, request, token}
end
if kind ~= 'hash' then
  return {2, kind}
end
local held = redis.call('HMGET', lock, owner, HOLD, FENCE)
if not held[1] then
  local pttl = redis.call('PTTL', lock)
  if pttl < 0 then
    return {2, 'hash without an expiry'}
  end
  if not held[2] then
    return {2, 'hash without a hold id'}
  end
  return {0, pttl}
end
local count = tonumber(held[1])
if count == nil or count < 1 or count ~= math.floor(count) then
  return {2, 'hash whose owner field is not a hold count'}
end
if not held[2] then
  return {2, 'hash without a hold id'}
end
local tag, seq = string.match(request, '^(.*)%.(%d+)$')
if not tag then
  return redis.error_reply('ERR acquire.lua: malformed request id')
end
count = redis.call('HINCRBY', lock, owner, 1)
redis.call('HSET', lock, '\1r' .. tag, seq)
redis.call('PEXPIRE', lock, lease, 'GT')
local token = 0
if ARGV[4] == '1' then
  token = tonumber(held[3])
  if token == nil then
    token = next_token()
    redis.call('HSET', lock, FENCE, string.format('%.0f', token))
  end
end
return {1, count, held[2], token}
