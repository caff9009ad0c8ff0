-- redisson_rw_acquire.lua: one attempt at a read or the write of a read-write lock kept in
-- Redisson's RReadWriteLock layout, so that Java services using Redisson and this library
-- exclude each other: a reader here blocks a Java writer, and the reverse.
--
-- KEYS[1]  the lock hash, named by the lock's name alone: field 'mode' ('read' or
--          'write'), <owner> -> read hold count, <owner>:write -> write hold count
-- KEYS[2]  this request's record (<prefix>_redisson_acquire:{<name>}:<request id>), as in
--          redisson_acquire.lua: a copy re-sent after a lost reply is answered "granted"
--          without counting twice
-- ARGV[1]  owner
-- ARGV[2]  lease in ms
-- ARGV[3]  how long the record lives, in ms
-- ARGV[4]  'read' or 'write'
-- ARGV[5]  '1': a re-entry or a downgrade through a guard: granted only while the owner
--          still holds here (a read or the write for a read, the write for a write), so a
--          hold a force-unlock or a restart took is not taken afresh behind the guard's back
--
-- A read hold at level k of an owner also has its timeout key
-- <prefix>:k = '1' with the lease, where <prefix> is Redisson's
-- suffixName(name, owner) .. ':rwlock_timeout' ({name}:<owner>:rwlock_timeout, or
-- name:<owner>:rwlock_timeout when the name has a brace): in the name's slot, so not
-- declared, as Redisson does.
--
-- Returns an array:
--   {1}          granted, now or by an earlier copy of this request
--   {0, pttl}    refused; pttl is the hash's remaining TTL in ms (-1: none); or, for a
--                re-entry, the owner holds nothing here (pttl -2 if nobody does)
--   {-3}         a write asked by an owner that holds a read of this lock (Redisson has
--                no upgrade: it would wait for itself forever); nothing was written
--   {-2, type}   the name holds something that is not a hash (nothing was written)
--
-- Redisson's acquires (RedissonReadLock / RedissonWriteLock.tryLockInnerAsync, the same
-- in 3.x and 4.x): a read is granted when there is no mode, in mode 'read', or in mode
-- 'write' to the owner of the write (a downgrade); it counts the owner's field up to k,
-- sets the timeout key for level k, and the hash's expiry to at least the lease. A write
-- is granted when there is no mode, or in mode 'write' to its owner (a re-entry). This
-- script takes the same decisions with the same keys; where Redisson re-enters a write by
-- adding the lease to the remaining TTL, this one only ever lengthens the expiry to the
-- lease (enough for this hold, and nobody's shorter). Every read and check comes before
-- the first write (see redisson_acquire.lua): an error reply means that nothing was
-- written.
local lock, record = KEYS[1], KEYS[2]
local owner, lease, record_ms, side = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local joins = ARGV[5] == '1'
local kind = redis.call('TYPE', lock).ok
if kind ~= 'hash' and kind ~= 'none' then
  return {-2, kind}
end
if redis.call('EXISTS', record) == 1 then
  return {1}
end
local mode = redis.call('HGET', lock, 'mode')
local write_field = owner .. ':write'
if joins then
  local holds = redis.call('HEXISTS', lock, write_field) == 1
  if side == 'read' and not holds then
    holds = redis.call('HEXISTS', lock, owner) == 1
  end
  if not holds then
    return {0, redis.call('PTTL', lock)}
  end
end
local writes
if side == 'write' then
  if mode == 'write' and redis.call('HEXISTS', lock, write_field) == 1 then
    writes = {{'HINCRBY', lock, write_field, 1}}
  elseif not mode then
    writes = {{'HSET', lock, 'mode', 'write'}, {'HINCRBY', lock, write_field, 1}}
  elseif mode == 'read' and redis.call('HEXISTS', lock, owner) == 1 then
    return {-3}
  else
    return {0, redis.call('PTTL', lock)}
  end
else
  if not mode then
    writes = {{'HSET', lock, 'mode', 'read'}}
  elseif not (mode == 'read' or (mode == 'write' and redis.call('HEXISTS', lock, write_field) == 1)) then
    return {0, redis.call('PTTL', lock)}
  else
    writes = {}
  end
  writes[#writes + 1] = {'HINCRBY', lock, owner, 1}
end
local level_key
if side == 'read' then
  local prefix
  if string.find(lock, '{', 1, true) then
    prefix = lock .. ':' .. owner .. ':rwlock_timeout:'
  else
    prefix = '{' .. lock .. '}:' .. owner .. ':rwlock_timeout:'
  end
  level_key = prefix .. ((tonumber(redis.call('HGET', lock, owner)) or 0) + 1)
  writes[#writes + 1] = {'SET', level_key, '1', 'PX', lease}
end
writes[#writes + 1] = {'PEXPIRE', lock, lease}
writes[#writes + 1] = {'SET', record, '1', 'PX', record_ms}
-- Read before the first write (the HSET and HINCRBY leave the expiry alone): a PTTL
-- refused after them would leave a hash with no expiry, which never frees. -2: no hash
-- yet.
local extend = redis.call('PTTL', lock) < lease
for _, command in ipairs(writes) do
  if not redis.acl_check_cmd(unpack(command)) then
    redis.call(unpack(command))
  end
end
for _, command in ipairs(writes) do
  if command[1] ~= 'PEXPIRE' then
    redis.call(unpack(command))
  elseif extend then
    redis.call('PEXPIRE', lock, lease)
  end
end
return {1}
