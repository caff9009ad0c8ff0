-- acquire.lua: take or re-enter the reentrant lock for one owner, optionally with a
-- fencing token; exactly once per request.
--
-- KEYS[1]  the lock hash            (<prefix>:{<name>})
-- KEYS[2]  the fencing counter      (<prefix>:{<name>}:fence)
-- KEYS[3]  the request's latch key  (<prefix>:{<name>}:latch:<request-id>)
-- ARGV[1]  owner id                 (the hash field; its value is the hold count)
-- ARGV[2]  lease in ms              (set as the key's PEXPIRE on every successful acquire)
-- ARGV[3]  '1' to return a fencing token, '0' otherwise
-- ARGV[4]  '1' to only ask what became of an earlier request whose reply was lost,
--          '0' to acquire
-- ARGV[5]  latch lifetime in ms
--
-- Returns a three-element array {code, value, token}:
--   {1, count, token}  acquired; count is this owner's hold count after the acquire
--                      (1 = fresh). token is the hold's fencing token when asked for, else 0.
--   {0, pttl, 0}       held by another owner; pttl is the key's remaining TTL in ms
--   {2, what, 0}       the key exists but is not one of our locks; what describes it.
--                      Nothing was written.
--   {3, 0, 0}          (only when ARGV[4] is '1') no acquire ran under this request id
--
-- Why the latch: a client whose reply was lost (timeout, reconnect) cannot know whether
-- the acquire ran. It asks again with the same request id and ARGV[4] = '1': the latch
-- hands back the first result (so the client can give that hold back), or the answer is
-- that nothing ran. Asking never acquires.
--
-- Fencing: a fenced acquisition takes the next number from the counter (INCR) and records
-- it in the hash under the reserved field "\1fence" (owner ids never contain control
-- characters). A reentrant acquisition returns the recorded token: no new number. An
-- unfenced hold that is re-entered with fencing gets a fresh number then.
--
-- Why TYPE first: HGET on a string key raises WRONGTYPE, which would surface as a generic
-- script error. Checking up front lets the client report a typed error and touch nothing.
-- Why a hash with no expiry is refused: every lock this library writes has a TTL, so a
-- hash without one belongs to somebody else and must not be mistaken for a held lock.
local TOKEN_FIELD = '\1fence'
if ARGV[4] == '1' then
  local earlier = redis.call('GET', KEYS[3])
  if earlier then
    local count, token = string.match(earlier, '^(%d+):(%d+)$')
    return {1, tonumber(count), tonumber(token)}
  end
  return {3, 0, 0}
end
local fenced = ARGV[3] == '1'
local kind = redis.call('TYPE', KEYS[1]).ok
local count
local token = 0
if kind == 'none' then
  count = 1
  if fenced then
    token = redis.call('INCR', KEYS[2])
    redis.call('HSET', KEYS[1], ARGV[1], 1, TOKEN_FIELD, token)
  else
    redis.call('HSET', KEYS[1], ARGV[1], 1)
  end
elseif kind ~= 'hash' then
  return {2, kind, 0}
else
  local held = redis.call('HGET', KEYS[1], ARGV[1])
  if not held then
    local pttl = redis.call('PTTL', KEYS[1])
    if pttl < 0 then
      return {2, 'hash without an expiry', 0}
    end
    return {0, pttl, 0}
  end
  count = tonumber(held)
  if count == nil or count < 1 or count ~= math.floor(count) then
    return {2, 'hash whose owner field is not a hold count', 0}
  end
  count = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  if fenced then
    token = tonumber(redis.call('HGET', KEYS[1], TOKEN_FIELD))
    if token == nil then
      token = redis.call('INCR', KEYS[2])
      redis.call('HSET', KEYS[1], TOKEN_FIELD, token)
    end
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('SET', KEYS[3], count .. ':' .. token, 'PX', ARGV[5])
return {1, count, token}
