-- latch_set.lua: close a count-down latch with a count, unless it is already closed.
--
-- KEYS[1]  the latch hash   (<prefix>:{<name>}:latch)
-- ARGV[1]  count            (>= 1, checked by the client)
--
-- Returns an integer:
--   1   the latch was open (no key) and is now closed with ARGV[1]
--   0   the latch was already closed; nothing was written
--   -2  the key is not a latch (not a hash, or a hash without "count"); nothing was written
--
-- The latch hash, while closed:
--   "count"     the remaining count (>= 1)
--   "\1r<tag>"  the seq of client <tag>'s last applied count-down (latch_count_down.lua)
-- An open latch has no key at all: opening deletes it, so nothing outlives it.
-- Why no expiry: a latch counts events that may be far apart (jobs of a batch); it is
-- opened by counting down, or deleted.
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'none' then
  redis.call('HSET', KEYS[1], 'count', ARGV[1])
  return 1
end
if kind ~= 'hash' or redis.call('HEXISTS', KEYS[1], 'count') == 0 then
  return -2
end
return 0
