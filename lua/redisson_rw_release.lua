-- redisson_rw_release.lua: give back one read or write hold of a read-write lock kept in
-- Redisson's RReadWriteLock layout, and wake waiters the way Redisson's waiters expect.
--
-- KEYS[1]  the lock hash (the lock's name): 'mode', <owner> -> reads, <owner>:write -> writes
-- KEYS[2]  the channel Redisson's readers and writers listen on (redisson_rwlock:{<name>})
-- KEYS[3]  the record of the acquire that took the hold (see redisson_rw_acquire.lua),
--          marked 'released' by the give-back, as in redisson_release.lua
-- ARGV[1]  owner
-- ARGV[2]  publish how ('1': SPUBLISH, a sharded channel on a cluster; else PUBLISH)
-- ARGV[3]  how long the record lives once released, in ms
-- ARGV[4]  '1': an abandoned acquire (give back only if it was granted); else a guard's hold
-- ARGV[5]  'read' or 'write'
--
-- Returns an integer: 1 a hold was given back (now, or by an earlier copy of this call);
-- 0 the owner holds nothing of that side here; -2 the name holds something that is not a
-- lock hash (nothing was written).
--
-- Redisson's releases (RedissonReadLock / RedissonWriteLock.unlockInnerAsync, 3.x and 4.x):
-- * a read counts the owner's field down (HDEL at zero) and deletes the timeout key of the
--   level it leaves; if other holds remain, the hash's expiry becomes the longest
--   remaining read timeout (readers whose timeout keys expired no longer count), and a
--   hash with no live reader left and no writer is deleted with the message 0
--   (LockPubSub.UNLOCK_MESSAGE: one waiter per process wakes);
-- * a write counts '<owner>:write' down; at zero it leaves, and the hash is deleted with
--   the message 1 (READ_UNLOCK_MESSAGE: every waiter wakes, so all readers go in together),
--   or, when the owner still holds reads (a downgrade), the mode becomes 'read'.
-- This script does the same with the same keys and messages, except that it never
-- shortens the expiry while a writer holds (Redisson sets it to the longest read timeout
-- even then, which can cut the writer's lease short), does not re-arm it on a partial
-- release, and keeps the owner's longest read timeouts (below; found by
-- tests/redisson_rw_check.rs). Every check comes before the first write (see
-- redisson_acquire.lua).
local lock, channel, record = KEYS[1], KEYS[2], KEYS[3]
local owner, sharded, record_ms = ARGV[1], ARGV[2] == '1', tonumber(ARGV[3])
local abandoned, side = ARGV[4] == '1', ARGV[5]
local kind = redis.call('TYPE', lock).ok
if kind ~= 'hash' and kind ~= 'none' then
  return -2
end
local done = redis.call('GET', record)
if done == 'released' then
  return 1
end
if kind == 'none' or (abandoned and not done) then
  return 0
end
local mode = redis.call('HGET', lock, 'mode')
local field = side == 'write' and owner .. ':write' or owner
local count = redis.call('HGET', lock, field)
if not mode or not count or (side == 'write' and mode ~= 'write') then
  return 0
end
count = tonumber(count)
if not count then
  return -2
end
local function timeout_prefix(holder)
  if string.find(lock, '{', 1, true) then
    return lock .. ':' .. holder .. ':rwlock_timeout:'
  end
  return '{' .. lock .. '}:' .. holder .. ':rwlock_timeout:'
end
local publish = sharded and 'SPUBLISH' or 'PUBLISH'
local writes = {{'SET', record, 'released', 'PX', record_ms}}
local left = count - 1
if left > 0 then
  writes[#writes + 1] = {'HINCRBY', lock, field, -1}
else
  writes[#writes + 1] = {'HDEL', lock, field}
end
if side == 'read' then
  writes[#writes + 1] = {'DEL', timeout_prefix(owner) .. count}
end
-- The top level's key goes, whichever of the owner's reads this is (levels are positions;
-- Redisson deletes the top one too). So that no remaining read is left on a key shorter
-- than its own was, the owner's shortest remaining key takes the deleted key's expiry when
-- that is longer: the remaining keys are then the longest of the owner's keys, enough for
-- every remaining read (Redisson does not do this: a re-entered read given back oldest
-- first leaves the younger read on the older read's key, which ends first).
local moved_ttl = -3
if side == 'read' and left > 0 then
  local prefix = timeout_prefix(owner)
  local top = redis.call('PTTL', prefix .. count)
  local shortest, shortest_ttl = nil, nil
  for level = 1, left do
    local ttl = redis.call('PTTL', prefix .. level)
    if shortest_ttl == nil or ttl < shortest_ttl then
      shortest, shortest_ttl = level, ttl
    end
  end
  if top > 0 and shortest and shortest_ttl < top then
    writes[#writes + 1] = {'SET', prefix .. shortest, '1', 'PX', top}
    moved_ttl = top
  end
end
-- What remains once this hold has left: the fields other than 'mode' (and this one, if
-- it reached zero), and for a read, the longest live read timeout among them.
local others, longest = 0, -3
for _, name in ipairs(redis.call('HKEYS', lock)) do
  if name ~= 'mode' and not (name == field and left == 0) then
    others = others + 1
    local held = tonumber(redis.call('HGET', lock, name))
    if name == field then
      held = left
    end
    if held and string.sub(name, -6) ~= ':write' then
      for level = held, 1, -1 do
        longest = math.max(longest, redis.call('PTTL', timeout_prefix(name) .. level))
      end
    end
  end
end
longest = math.max(longest, moved_ttl)
local delete, message, demote, expire = false, nil, false, nil
if side == 'write' then
  if left == 0 then
    if others == 0 then
      delete, message = true, '1'
    else
      demote = true
    end
  end
elseif mode == 'write' then
  -- A downgrading writer's read: the writer still holds, so the expiry stays.
  delete = false
elseif others > 0 and longest > 0 then
  expire = longest
else
  delete, message = true, '0'
end
if delete then
  writes = {{'SET', record, 'released', 'PX', record_ms}, {publish, channel, message}, {'DEL', lock}}
  if side == 'read' then
    writes[#writes + 1] = {'DEL', timeout_prefix(owner) .. count}
  end
else
  if demote then
    writes[#writes + 1] = {'HSET', lock, 'mode', 'read'}
  end
  if expire then
    writes[#writes + 1] = {'PEXPIRE', lock, expire}
  end
end
for _, command in ipairs(writes) do
  if not redis.acl_check_cmd(unpack(command)) then
    redis.call(unpack(command))
  end
end
for _, command in ipairs(writes) do
  redis.call(unpack(command))
end
return 1
