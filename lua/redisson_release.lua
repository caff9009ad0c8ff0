-- redisson_release.lua: give back one hold of a lock kept in Redisson's RLock layout, and
-- wake waiters the way Redisson's waiters expect.
--
-- KEYS[1]  the lock hash (the lock's name): field <owner> -> hold count
-- KEYS[2]  the channel Redisson's waiters listen on (redisson_lock__channel:{<name>})
-- KEYS[3]  the record of the acquire that took the hold (see redisson_acquire.lua); the
--          give-back marks it 'released', so that a copy of this call re-sent after a lost
--          reply, and a late copy of that acquire, each find their answer there
-- ARGV[1]  owner: the hash field
-- ARGV[2]  publish how ('1': SPUBLISH, a sharded channel on a cluster; else PUBLISH)
-- ARGV[3]  how long the record lives once released, in ms (as long as a copy of this
--          call or of the acquire can still arrive)
-- ARGV[4]  '1': an abandoned acquire (its caller left before reading the reply): give a
--          count back only if that acquire was granted (its record exists); else a
--          guard's hold: give one back if the field has one
--
-- Returns an integer: 1 a count was given back (now, or by an earlier copy of this call);
-- 0 the owner holds nothing here (expired, taken away, or never granted); -2 the name
-- holds something that is not a lock hash (nothing was written).
--
-- Redisson's unlock (RedissonLock.unlockInnerAsync, 3.24 to 4.x): "no field: nil;
-- HINCRBY field -1; above 0: PEXPIRE lease; else DEL, PUBLISH 0 on the channel". Redisson's
-- waiters read the message 0 as "unlocked" (LockPubSub.UNLOCK_MESSAGE) and wake one waiter
-- per process. This script leaves the same keys and sends the same message. Where Redisson
-- answers its own retries from a latch key (redisson_unlock_latch:{<name>}:<request id>,
-- which only the request that wrote it reads), this one uses the acquire's record, one key
-- for both. It does not re-arm the expiry when other holds of the owner remain: they keep
-- the expiry their own leases set (Redisson re-arms to its lease, which could cut a longer
-- one short). Every check comes before the first write (see redisson_acquire.lua).
local lock, channel, record = KEYS[1], KEYS[2], KEYS[3]
local owner, sharded, record_ms, abandoned = ARGV[1], ARGV[2] == '1', tonumber(ARGV[3]), ARGV[4] == '1'
local kind = redis.call('TYPE', lock).ok
if kind ~= 'hash' and kind ~= 'none' then
  return -2
end
local done = redis.call('GET', record)
if done == 'released' then
  return 1
end
if abandoned and not done then
  return 0
end
if kind == 'none' or redis.call('HEXISTS', lock, owner) == 0 then
  return 0
end
local count = tonumber(redis.call('HGET', lock, owner))
if not count then
  return -2
end
local last = count <= 1
local publish = sharded and 'SPUBLISH' or 'PUBLISH'
local writes = {{'SET', record, 'released', 'PX', record_ms}}
if last then
  writes[#writes + 1] = {'DEL', lock}
  writes[#writes + 1] = {publish, channel, '0'}
else
  writes[#writes + 1] = {'HINCRBY', lock, owner, -1}
end
for _, command in ipairs(writes) do
  if not redis.acl_check_cmd(unpack(command)) then
    redis.call(unpack(command))
  end
end
if last then
  redis.call('DEL', lock)
  redis.call(publish, channel, '0')
else
  redis.call('HINCRBY', lock, owner, -1)
end
redis.call('SET', record, 'released', 'PX', record_ms)
return 1
