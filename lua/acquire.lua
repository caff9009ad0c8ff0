-- acquire.lua: take or re-enter the reentrant lock for one owner.
--
-- KEYS[1]  the lock hash  (<prefix>:{<name>})
-- ARGV[1]  owner id       (the hash field; its value is the hold count)
-- ARGV[2]  lease in ms    (set as the key's PEXPIRE on every successful acquire)
--
-- Returns a two-element array {code, value}:
--   {1, count}  acquired; count is this owner's hold count after the acquire (1 = fresh)
--   {0, pttl}   held by another owner; pttl is the key's remaining time to live in ms
--   {2, what}   the key exists but is not one of our locks; what describes it. Nothing
--               was written.
--
-- Why TYPE first: HGET on a string key raises WRONGTYPE, which would surface as a generic
-- script error. Checking up front lets the client report a typed error and touch nothing.
-- Why a hash with no expiry is refused: every lock this library writes has a TTL, so a
-- hash without one belongs to somebody else and must not be mistaken for a held lock.
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'none' then
  redis.call('HSET', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, 1}
end
if kind ~= 'hash' then
  return {2, kind}
end
local held = redis.call('HGET', KEYS[1], ARGV[1])
if held then
  local count = tonumber(held)
  if count == nil or count < 1 or count ~= math.floor(count) then
    return {2, 'hash whose owner field is not a hold count'}
  end
  count = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, count}
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then
  return {2, 'hash without an expiry'}
end
return {0, pttl}
