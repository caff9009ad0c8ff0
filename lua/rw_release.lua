-- rw_release.lua: give back one hold of a read-write lock, and wake who can proceed.
--
-- KEYS[1]  write holds   (<prefix>:{<name>}:rw:write)
-- KEYS[2]  read holds    (<prefix>:{<name>}:rw:read)
-- KEYS[3]  reservation   (<prefix>:{<name>}:rw:writer-waiting)
-- ARGV[1]  hold id       (member '<hold id>:1')
-- ARGV[2]  'r' or 'w'    (the hold's kind), or '' to give back no hold (a waiter that
--                        leaves, ARGV[6] = '1')
-- ARGV[3]  readers' wake-up channel (<prefix>:{<name>}:rw:db<n>:read)
-- ARGV[4]  writers' wake-up channel (<prefix>:{<name>}:rw:db<n>:write)
-- ARGV[5]  publish how   ('1': SPUBLISH, a sharded channel on a cluster; else PUBLISH)
-- ARGV[6]  '1': the caller was waiting and leaves: drop its reservation if it holds one
--
-- Returns an integer: 1 the hold was given back; 0 it was not there (expired, given back
-- already, e.g. by a copy of this request whose reply was lost, or deleted); -2 a key is
-- not part of a read-write lock (nothing was written).
--
-- Who is woken: the last write leaving wakes readers (they may all go in) and, if no read
-- remains, writers; the last read leaving wakes writers. Nobody else can proceed, so no
-- other release publishes. A dropped reservation wakes the readers it held back.
-- Why ZREM by id: a hold is given back only by its own acquisition ("release is true").
-- Why the expiry is recomputed: a set's expiry then never outlives its latest deadline.
local W, R, Q = KEYS[1], KEYS[2], KEYS[3]
local publish = ARGV[5] == '1' and 'SPUBLISH' or 'PUBLISH'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Dropping expired holds doubles as the type check (see rw_acquire.lua).
for _, key in ipairs({W, R}) do
  local dropped = redis.pcall('ZREMRANGEBYSCORE', key, '-inf', now)
  if type(dropped) == 'table' and dropped.err then
    if string.find(dropped.err, 'WRONGTYPE') then
      return -2
    end
    return redis.error_reply(dropped.err)
  end
end
local wake_readers, wake_writers = false, false
local waiting = ARGV[6] == '1' and redis.pcall('GET', Q)
if type(waiting) == 'table' and waiting.err then
  return -2
end
if waiting and waiting == ARGV[1] then
  redis.call('DEL', Q)
  wake_readers = true
end
local removed = 0
if ARGV[2] == 'r' or ARGV[2] == 'w' then
  local set = ARGV[2] == 'w' and W or R
  removed = redis.call('ZREM', set, ARGV[1] .. ':1')
  if removed == 1 then
    local last = redis.call('ZRANGE', set, -1, -1, 'WITHSCORES')
    if last[2] then
      redis.call('PEXPIRE', set, math.max(tonumber(last[2]) - now, 1))
    elseif ARGV[2] == 'w' then
      wake_readers = true
      wake_writers = redis.call('EXISTS', R) == 0
    else
      wake_writers = redis.call('EXISTS', W) == 0
    end
  end
end
if wake_readers then
  redis.call(publish, ARGV[3], 'released')
end
if wake_writers then
  redis.call(publish, ARGV[4], 'released')
end
return removed
