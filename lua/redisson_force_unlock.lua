-- redisson_force_unlock.lua: delete a lock kept in one of Redisson's layouts (RLock or
-- RReadWriteLock) whoever holds it, and wake its waiters, as Redisson's forceUnlock does.
--
-- KEYS[1]  the lock hash (the lock's name)
-- KEYS[2]  the channel of an RLock's waiters (redisson_lock__channel:{<name>})
-- KEYS[3]  the channel of an RReadWriteLock's readers and writers (redisson_rwlock:{<name>})
-- ARGV[1]  publish how ('1': SPUBLISH, a sharded channel on a cluster; else PUBLISH)
--
-- Returns an integer: 1 the lock existed, was deleted, and waiters were woken; 0 there was
-- no lock; -2 the name holds something that is not a hash (nothing was written). An error
-- reply (a command the ACL refuses, say) means that nothing was written.
--
-- Redisson's forceUnlock: an RLock's (RedissonLock.forceUnlockAsync) is "if DEL deleted
-- it, PUBLISH 0 on the lock's channel"; a read-write lock's is one per side (the read
-- lock's deletes the hash in mode 'read' and publishes 0, the write lock's in mode 'write'
-- and publishes 1). This one deletes either, and for a read-write lock (a 'mode' field)
-- publishes 1 on its channel, which wakes every waiter of both sides. Holders learn of it
-- at their next renewal ("losses are told"). Why the PUBLISH before the DEL: Redis does not
-- roll back a script, so a PUBLISH the ACL refuses after the DEL would leave the lock
-- deleted behind an error reply; inside the script the order is all one to the
-- subscribers, who hear of it once the script is done.
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'none' then
  return 0
end
if kind ~= 'hash' then
  return -2
end
local publish = ARGV[1] == '1' and 'SPUBLISH' or 'PUBLISH'
if redis.call('HEXISTS', KEYS[1], 'mode') == 1 then
  redis.call(publish, KEYS[3], '1')
else
  redis.call(publish, KEYS[2], '0')
end
redis.call('DEL', KEYS[1])
return 1
