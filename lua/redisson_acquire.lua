-- redisson_acquire.lua: one attempt at a lock kept in Redisson's RLock layout, so that a
-- Java service using Redisson and this library exclude each other on the same name.
--
-- KEYS[1]  the lock hash, named by the lock's name alone (Redisson's `getRawName()`):
--          field <owner> -> hold count, as Redisson's `<client uuid>:<thread id>`
-- KEYS[2]  this request's record (<prefix>_redisson_acquire:{<name>}:<request id>): set
--          when the request is granted, so that a copy re-sent after a lost reply is
--          answered "granted" without counting the hold twice. Redisson never reads it.
-- ARGV[1]  owner: the hash field
-- ARGV[2]  lease in ms
-- ARGV[3]  how long the record lives, in ms (at least as long as a copy of the request
--          can still arrive)
-- ARGV[4]  '1': a re-entry through a guard (RedissonGuard::reenter): granted only while the
--          owner's field exists; a hold a force-unlock or a restart took is not taken
--          afresh behind the guard's back
--
-- Returns an array:
--   {1}          granted (the field's count went up by one; the hash lasts at least the
--                lease), now or by an earlier copy of this request
--   {0, pttl}    held by another owner; pttl is the hash's remaining TTL in ms (-1: it has
--                none, a hash Redisson would never leave; the caller bounds its wait); or,
--                for a re-entry, the owner holds nothing here (pttl -2 if nobody does)
--   {-2, type}   the name holds something that is not a hash (nothing was written)
--
-- Redisson's own acquire (RedissonLock.tryLockInnerAsync, the same in 3.24 to 4.x) is
-- "if the hash does not exist or has my field: HINCRBY field 1, PEXPIRE lease; else return
-- PTTL". This script takes the same decision and leaves the same keys, with two
-- differences that Redisson cannot see: a re-entry only ever lengthens the expiry (a
-- shorter lease must not cut the owner's earlier hold short, whose guard counts on its
-- own lease), and the record above. Why every read and check comes before the first
-- write: Redis does not roll back a script, so a command the ACL refuses after a write
-- would leave that write behind an error reply. An error reply means that nothing was
-- written.
local lock, record = KEYS[1], KEYS[2]
local owner, lease, record_ms, joins = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4] == '1'
local kind = redis.call('TYPE', lock).ok
if kind ~= 'hash' and kind ~= 'none' then
  return {-2, kind}
end
if redis.call('EXISTS', record) == 1 then
  return {1}
end
local mine = kind == 'hash' and redis.call('HEXISTS', lock, owner) == 1
if (kind == 'hash' or joins) and not mine then
  return {0, redis.call('PTTL', lock)}
end
-- Read before the first write, as every read here: a PTTL refused after the HINCRBY would
-- leave the count raised behind an error reply.
local extend = not mine or redis.call('PTTL', lock) < lease
-- Fails the script before anything is written if the ACL would refuse a later write: the
-- refused command is run now, for the ACL's own error and ACL LOG entry.
for _, command in ipairs({{'HINCRBY', lock, owner, 1}, {'PEXPIRE', lock, lease},
                          {'SET', record, '1', 'PX', record_ms}}) do
  if not redis.acl_check_cmd(unpack(command)) then
    redis.call(unpack(command))
  end
end
redis.call('HINCRBY', lock, owner, 1)
if extend then
  redis.call('PEXPIRE', lock, lease)
end
redis.call('SET', record, '1', 'PX', record_ms)
return {1}
