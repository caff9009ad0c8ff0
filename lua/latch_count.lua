-- latch_count.lua: a latch's remaining count (read-only).
--
-- KEYS[1]  the latch hash    (<prefix>:{<name>}:latch)
--
-- Returns:
--   n        (an integer >= 0) the remaining count; 0 when the latch is open (no key)
--   {-2, k}  the key is not a latch: k is its type, or 'hash' for a hash whose 'count' is
--            missing or not a whole number >= 0
-- An error reply (a command the ACL refuses, say) means that nothing was written. Nothing
-- is ever written. One script, so the type and the count are read at one instant (a
-- count-down that opens the latch cannot come in between).
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'none' then
  return 0
end
if kind ~= 'hash' then
  return {-2, kind}
end
local count = tonumber(redis.call('HGET', KEYS[1], 'count'))
if count == nil or count < 0 or count ~= math.floor(count) then
  return {-2, 'hash'}
end
return count
