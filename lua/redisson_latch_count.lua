-- redisson_latch_count.lua: the remaining count of a latch kept in Redisson's
-- RCountDownLatch layout (read-only).
--
-- KEYS[1]  the latch: a string named by the latch's name alone, holding the count
--
-- Returns:
--   n        (an integer >= 0) the remaining count; 0 when the latch is open (no key)
--   {-2, k}  the key is not a latch: k is its type ('string' for a string that is not a
--            whole number from 1 to 2^53 - 1, written as DECR reads one)
-- An error reply (a command the ACL refuses, say) means that nothing was written. Nothing
-- is ever written.
--
-- Redisson's getCount is a GET (a missing key reads as 0). One script, so the type and the
-- count are read at one instant.
-- A count as Redis's DECR and Redisson's Long read it: a decimal integer without sign,
-- leading zero, space or fraction (Lua's tonumber also takes '2.0', ' 2', '0x2', '2e0' and
-- '02', which Redis's DECR refuses: such a string is another program's, not a latch), from
-- 1 to 2^53 - 1 (exact in Lua's numbers; Redisson allows more, read here as not a latch).
local function count_of(value)
  if type(value) ~= 'string' or #value > 16 or not string.find(value, '^[1-9]%d*$') then
    return nil
  end
  local count = tonumber(value)
  if count > 9007199254740991 then
    return nil
  end
  return count
end
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'none' then
  return 0
end
if kind ~= 'string' then
  return {-2, kind}
end
local count = count_of(redis.call('GET', KEYS[1]))
if not count then
  return {-2, 'string'}
end
return count
