-- sem_release.lua: give back the permits of one acquisition, and wake waiters.
--
-- KEYS[1]  the semaphore hash  (<prefix>:{<name>}:semaphore)
-- KEYS[2]  the permits         (<prefix>:{<name>}:permits)
-- ARGV[1]  permit id
-- ARGV[2]  n                   (permits of that acquisition)
-- ARGV[3]  wake-up channel     (<prefix>:{<name>}:semaphore:db<n>:released)
-- ARGV[4]  publish how         ('1': SPUBLISH, a sharded channel on a cluster; else PUBLISH)
-- ARGV[5]  reservation to drop ('1': the caller was waiting and gives up: drop its
--                              reservation if it holds one; n may then be 0)
--
-- Returns an integer: how many permits were given back (0: they had expired, or were
-- given back already, e.g. by an attempt whose reply was lost); -2: not a semaphore.
-- Why ZREM by id: a permit is given back only by its own acquisition; giving back twice
-- removes nothing the second time ("release is true").
local sem, permits = KEYS[1], KEYS[2]
local pkind = redis.call('TYPE', permits).ok
if pkind ~= 'zset' and pkind ~= 'none' then
  return -2
end
local skind = redis.call('TYPE', sem).ok
if skind ~= 'hash' and skind ~= 'none' then
  return -2
end
local removed = 0
for k = 1, tonumber(ARGV[2]) do
  removed = removed + redis.call('ZREM', permits, ARGV[1] .. ':' .. k)
end
local woke = removed > 0
if ARGV[5] == '1' and redis.call('HGET', sem, 'resv') == ARGV[1] then
  redis.call('HDEL', sem, 'resv', 'resv_n', 'resv_until')
  woke = true
end
if woke then
  redis.call(ARGV[4] == '1' and 'SPUBLISH' or 'PUBLISH', ARGV[3], 'released')
end
return removed
