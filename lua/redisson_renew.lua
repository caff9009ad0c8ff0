-- redisson_renew.lua: the watchdog's tick for holds kept in Redisson's layouts (RLock and
-- RReadWriteLock): extend the expiry of many, and check that others are still held, in
-- one call.
--
-- KEYS[i]      the lock hash of hold i (the lock's name)
-- ARGV[1]      lease in ms for the renewed holds
-- ARGV[2]      m: holds 1..m are renewed; m+1.. (fixed leases) only checked
-- ARGV[2 + i]  hold i: a letter, then its owner:
--              'l' an RLock hold: the field <owner>
--              'w' an RReadWriteLock write hold: the field <owner>:write
--              'r' an RReadWriteLock read hold: the field <owner> with its count c, and the
--                  owner's read timeout keys <prefix>:1..c, where <prefix> is Redisson's
--                  suffixName(name, owner) .. ':rwlock_timeout' ({name}:<owner>:rwlock_timeout,
--                  or name:<owner>:rwlock_timeout when the name has a brace)
--
-- Returns an array of the 1-based positions i whose hold is gone (the field is gone, no
-- read timeout key of the owner lives, or the name holds another type): those holds are
-- lost and their guards are told ("losses are told").
--
-- Redisson's watchdog (renewal/LockTask and ReadLockTask in 4.x; renewExpirationAsync in
-- 3.x) does "if the field exists: PEXPIRE lease" (and for a reader, PEXPIRE each of its
-- timeout keys, then the hash). This one only ever lengthens an expiry: a hash is shared by
-- the holds of one owner (and a read-write lock's by every reader), and a renewal must not
-- cut short a longer lease that another hold set. A read hold counts as held while any of
-- its owner's timeout keys lives (the owner's holds cannot be told apart, and
-- redisson_rw_release.lua keeps an owner's longest keys), and its live keys are
-- lengthened; when none lives, another reader's release no longer counts the owner
-- (Redisson's release takes the hash's expiry from the live timeout keys), so it is gone.
-- (A key of the owner that expired belongs to a hold whose own lease ended: a fixed lease
-- beside a renewed one; it is not renewed back.)
-- An error reply (a command the ACL refuses, say) means that nothing was written: every
-- hold is read (its field, its timeout keys, the expiries) before the first PEXPIRE, since
-- Redis does not roll back a script and a refusal half-way would leave the holds ahead of
-- it lengthened behind a reply that says the tick failed.
local lease, renewing = tonumber(ARGV[1]), tonumber(ARGV[2])
-- The keys whose expiry falls short of the lease, lengthened once every hold is read.
local short = {}
local function lengthen(key)
  if redis.call('PTTL', key) < lease then
    short[#short + 1] = key
  end
end
local lost = {}
for i = 1, #KEYS do
  local hash, item = KEYS[i], ARGV[2 + i]
  local side, owner = string.sub(item, 1, 1), string.sub(item, 2)
  local field = side == 'w' and owner .. ':write' or owner
  local count = redis.pcall('HGET', hash, field)
  if type(count) == 'table' and count.err and not string.find(count.err, 'WRONGTYPE') then
    return redis.error_reply(count.err)
  end
  local alive = type(count) == 'string'
  local levels = {}
  if alive and side == 'r' then
    local prefix
    if string.find(hash, '{', 1, true) then
      prefix = hash .. ':' .. owner .. ':rwlock_timeout:'
    else
      prefix = '{' .. hash .. '}:' .. owner .. ':rwlock_timeout:'
    end
    for level = 1, tonumber(count) or 0 do
      if redis.call('EXISTS', prefix .. level) == 1 then
        levels[#levels + 1] = prefix .. level
      end
    end
    alive = #levels > 0
  end
  if not alive then
    lost[#lost + 1] = i
  elseif i <= renewing then
    for _, key in ipairs(levels) do
      lengthen(key)
    end
    lengthen(hash)
  end
end
for _, key in ipairs(short) do
  redis.call('PEXPIRE', key, lease)
end
return lost
