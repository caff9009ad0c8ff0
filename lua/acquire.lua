-- acquire.lua: take or re-enter the reentrant lock for one owner, optionally with a
-- fencing token.
--
-- KEYS[1]  the lock hash            (<prefix>:{<name>})
-- KEYS[2]  the fencing counter      (<prefix>:{<name>}:fence)
-- ARGV[1]  owner id                 (the hash field; its value is the hold count)
-- ARGV[2]  lease in ms              (set as the key's PEXPIRE on every successful acquire)
-- ARGV[3]  '1' to return a fencing token, '0' otherwise
--
-- Returns a three-element array {code, value, token}:
--   {1, count, token}  acquired; count is this owner's hold count after the acquire
--                      (1 = fresh). token is the fencing token when asked for, else 0.
--   {0, pttl, 0}       held by another owner; pttl is the key's remaining TTL in ms
--   {2, what, 0}       the key exists but is not one of our locks; what describes it.
--                      Nothing was written.
--
-- Fencing: once the counter exists, EVERY fresh acquisition increments it, fenced or not,
-- so its current value always names the current hold. A reentrant acquisition therefore
-- takes no new number: it reads the counter and gets the same token as its outer hold.
-- The counter has no TTL; it lives as long as the lock name is in use.
--
-- Why TYPE first: HGET on a string key raises WRONGTYPE, which would surface as a generic
-- script error. Checking up front lets the client report a typed error and touch nothing.
-- Why a hash with no expiry is refused: every lock this library writes has a TTL, so a
-- hash without one belongs to somebody else and must not be mistaken for a held lock.
local fenced = ARGV[3] == '1'
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'none' then
  redis.call('HSET', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  local token = 0
  if fenced or redis.call('EXISTS', KEYS[2]) == 1 then
    token = redis.call('INCR', KEYS[2])
  end
  if not fenced then
    token = 0
  end
  return {1, 1, token}
end
if kind ~= 'hash' then
  return {2, kind, 0}
end
local held = redis.call('HGET', KEYS[1], ARGV[1])
if held then
  local count = tonumber(held)
  if count == nil or count < 1 or count ~= math.floor(count) then
    return {2, 'hash whose owner field is not a hold count', 0}
  end
  count = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  local token = 0
  if fenced then
    token = tonumber(redis.call('GET', KEYS[2]) or 0)
    if token == 0 then
      -- The outer hold was taken before any fencing: start the counter now.
      token = redis.call('INCR', KEYS[2])
    end
  end
  return {1, count, token}
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then
  return {2, 'hash without an expiry', 0}
end
return {0, pttl, 0}
