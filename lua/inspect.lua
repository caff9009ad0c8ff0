-- inspect.lua: read a lock's state in one consistent snapshot (read-only).
--
-- KEYS[1]  the lock key          (<prefix>:{<name>}; a string or a hash, see acquire.lua)
-- KEYS[2]  the fencing counter   (<prefix>:{<name>}:fence)
--
-- Returns an array {type, pttl, fence, field1, value1, field2, value2, ...}:
--   type   the key's Redis type ('none' when there is no lock, 'hash' for a lock, in either
--          form: a first hold's string reads as the hash it stands for)
--   pttl   the key's remaining TTL in ms (-2 absent, -1 no expiry)
--   fence  the fencing counter's value, -1 when there is no counter (or it is not a number)
--   then, for a hash only, every field and value: owner ids with their hold counts, and
--   the reserved field "\1fence" with the current hold's fencing token, if it has one
local kind = redis.call('TYPE', KEYS[1]).ok
local fence = -1
if redis.call('TYPE', KEYS[2]).ok == 'string' then
  fence = tonumber(redis.call('GET', KEYS[2])) or -1
end
local result = {kind, redis.call('PTTL', KEYS[1]), fence}
if kind == 'string' then
  -- The string form of a first hold (see acquire.lua) reads as the hash it stands for:
  -- the owner with a count of 1, and the hold id.
  local mark, hold, owner = string.match(redis.call('GET', KEYS[1]), '^([\1\2])([^\1]+)\1(.+)$')
  if mark then
    result[1] = 'hash'
    result[4], result[5], result[6], result[7] = owner, '1', '\1h', hold
  end
elseif kind == 'hash' then
  local fields = redis.call('HGETALL', KEYS[1])
  for i = 1, #fields do
    result[#result + 1] = fields[i]
  end
end
return result
