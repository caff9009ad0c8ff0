-- sem_release.lua: give back the permits of one acquisition, and wake waiters.
--
-- KEYS[1]  the semaphore hash  (<prefix>:{<name>}:semaphore)
-- KEYS[2]  the permits         (<prefix>:{<name>}:permits)
-- ARGV[1]  permit id
-- ARGV[2]  n                   (permits of that acquisition; -1: however many it has, for
--                              a drain whose grant was never read)
-- ARGV[3]  wake-up channel     (<prefix>:{<name>}:semaphore:db<n>:released)
-- ARGV[4]  publish how         ('1': SPUBLISH, a sharded channel on a cluster; else PUBLISH)
-- ARGV[5]  reservation to drop ('1': the caller was waiting and gives up: drop its
--                              reservation if it holds one; n may then be 0)
--
-- Returns an integer: how many permits were given back (0: they had expired, or were
-- given back already, e.g. by an attempt whose reply was lost); -2: not a semaphore. An
-- error reply (a command the ACL refuses, say) means that nothing was written.
-- Why ZREM by id: a permit is given back only by its own acquisition; giving back twice
-- removes nothing the second time ("release is true").
-- Why no write is left half done: Redis does not roll back a script, so a command that the
-- ACL refuses after a write would leave that write in place (permits given back by a call
-- reported failed). Every read comes first (the permits of one acquisition are added,
-- renewed, expire and are given back together, so its first one says whether any are
-- held); then the PUBLISH, which inside the script is all one to the subscribers; a
-- reservation dropped with permits is checked with redis.acl_check_cmd (Redis 7.0+)
-- before the first write.
local sem, permits = KEYS[1], KEYS[2]
local pkind = redis.call('TYPE', permits).ok
if pkind ~= 'zset' and pkind ~= 'none' then
  return -2
end
local skind = redis.call('TYPE', sem).ok
if skind ~= 'hash' and skind ~= 'none' then
  return -2
end
local n = tonumber(ARGV[2])
local held = n ~= 0 and redis.call('ZSCORE', permits, ARGV[1] .. ':1')
local unreserve = ARGV[5] == '1' and redis.call('HGET', sem, 'resv') == ARGV[1]
if held or unreserve then
  redis.call(ARGV[4] == '1' and 'SPUBLISH' or 'PUBLISH', ARGV[3], 'released')
end
if held and unreserve and not redis.acl_check_cmd('HDEL', sem, 'resv') then
  -- Refused: run it now, before any write, for the ACL's own error and ACL LOG entry.
  redis.call('HDEL', sem, 'resv')
end
local removed = 0
if held and n < 0 then
  -- An acquisition's permits are 1..n with no gap: remove until the first one missing.
  while redis.call('ZREM', permits, ARGV[1] .. ':' .. (removed + 1)) == 1 do
    removed = removed + 1
  end
elseif held then
  for k = 1, n do
    removed = removed + redis.call('ZREM', permits, ARGV[1] .. ':' .. k)
  end
end
if unreserve then
  redis.call('HDEL', sem, 'resv', 'resv_n', 'resv_until')
end
return removed
