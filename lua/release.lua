-- release.lua: give back one hold of the reentrant lock, exactly once per request.
--
-- KEYS[1]  the lock hash             (<prefix>:{<name>})
-- KEYS[2]  the request's latch key   (<prefix>:{<name>}:latch:<request-id>)
-- ARGV[1]  owner id
-- ARGV[2]  lease in ms               (re-armed when holds remain)
-- ARGV[3]  wake-up channel           (<prefix>:{<name>}:db<n>:released)
-- ARGV[4]  latch lifetime in ms
--
-- Returns an integer:
--   n >= 1  one hold released; n holds remain and the lease was re-armed
--   0       the last hold was released: the key was deleted and waiters were woken
--   -1      this owner holds no hold on the lock (never did, expired, or deleted)
--   -2      the key exists but is not a hash; nothing was written
--
-- Why the latch: a client that timed out or reconnected cannot know whether its first
-- attempt ran. It retries with the same request id, and the latch hands back the first
-- attempt's result instead of decrementing a second time. The latch lives only as long
-- as a retry can arrive.
local earlier = redis.call('GET', KEYS[2])
if earlier then
  return tonumber(earlier)
end
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'none' then
  return -1
end
if kind ~= 'hash' then
  return -2
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return -1
end
local remaining = redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
if remaining > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
else
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[3], 'released')
  remaining = 0
end
redis.call('SET', KEYS[2], remaining, 'PX', ARGV[4])
return remaining
