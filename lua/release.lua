-- release.lua: give back one hold of the reentrant lock, never twice per request.
--
-- KEYS[1]  the lock hash             (<prefix>:{<name>})
-- KEYS[2]  the request's latch key   (<prefix>:{<name>}:latch:<request-id>)
-- ARGV[1]  owner id
-- ARGV[2]  lease in ms               (re-armed when holds remain)
-- ARGV[3]  wake-up channel           (<prefix>:{<name>}:db<n>:released)
-- ARGV[4]  latch lifetime in ms
-- ARGV[5]  '1' when this is a retry of a request whose reply was lost, '0' otherwise
--
-- Returns an integer:
--   n >= 1  one hold released; n holds remain and the lease was re-armed
--   0       the last hold was released: the key was deleted and waiters were woken
--   -1      this owner holds no hold on the lock (never did, expired, deleted, or, on a
--           retry, the first attempt already released the last hold)
--   -2      the key exists but is not a hash; nothing was written
--
-- Why the latch, and only for partial releases: a client that timed out or reconnected
-- retries with the same request id. A retried partial release must not decrement again,
-- so the first attempt records its result and only retries read it. A retried final
-- release needs no latch: the field is gone, the retry answers -1 and cannot decrement
-- anything. Keeping the common (final) release free of writes beyond DEL keeps it cheap.
if ARGV[5] == '1' then
  local earlier = redis.call('GET', KEYS[2])
  if earlier then
    return tonumber(earlier)
  end
end
local held = redis.pcall('HGET', KEYS[1], ARGV[1])
if type(held) == 'table' and held.err then
  return -2
end
if not held then
  return -1
end
local count = tonumber(held)
if count ~= nil and count > 1 then
  count = redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('SET', KEYS[2], count, 'PX', ARGV[4])
  return count
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[3], 'released')
return 0
