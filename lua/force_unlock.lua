-- force_unlock.lua: delete the lock whoever holds it, and wake its waiters.
--
-- KEYS[1]  the lock hash         (<prefix>:{<name>})
-- ARGV[1]  wake-up channel       (<prefix>:{<name>}:db<n>:released)
--
-- Returns an integer:
--   1   the lock existed; it was deleted and waiters were woken
--   0   there was no lock
--   -2  the key exists but is not a hash; nothing was written
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'none' then
  return 0
end
if kind ~= 'hash' then
  return -2
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[1], 'released')
return 1
