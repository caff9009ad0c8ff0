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
-- not part of a read-write lock (nothing was written). An error reply (a command the ACL
-- refuses, say) means that nothing was written but the dropping of expired holds, which
-- no reader can tell from their expiry.
--
-- Who is woken: the last write leaving wakes readers (they may all go in) and, if no read
-- remains, writers; the last read leaving wakes writers. Nobody else can proceed, so no
-- other release publishes. A dropped reservation wakes the readers it held back.
-- Why ZREM by id: a hold is given back only by its own acquisition ("release is true").
-- Why the expiry is recomputed: a set's expiry then never outlives its latest deadline.
-- Why no write is left half done: Redis does not roll back a script, so a command that the
-- ACL refuses after a write would leave that write in place (a hold given back by a call
-- reported failed). Every read comes first (what remains once the hold is out is read
-- from the two latest holds); then the wake-ups, which inside the script are all one to
-- the subscribers; the expiry after the ZREM runs under pcall and puts the hold back if
-- it fails (free on the hot path); a dropped reservation's DEL, when writes follow it,
-- checks them with redis.acl_check_cmd (Redis 7.0+).
local W, R, Q = KEYS[1], KEYS[2], KEYS[3]
local publish = ARGV[5] == '1' and 'SPUBLISH' or 'PUBLISH'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Each set is looked at through its first member, and its expired holds (a prefix: the
-- sets are scored by deadline) are dropped only when that one has expired, as in
-- rw_acquire.lua: one call per set while nothing has expired, which also tells whether
-- any hold of that set is live. The look doubles as the type check.
local first = {}
for _, key in ipairs({W, R}) do
  local found = redis.pcall('ZRANGE', key, 0, 0, 'WITHSCORES')
  if found.err then
    if string.find(found.err, 'WRONGTYPE') then
      return -2
    end
    return redis.error_reply(found.err)
  end
  if found[1] and tonumber(found[2]) <= now then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
    found = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  end
  first[key] = found[1]
end
local wake_readers, wake_writers = false, false
local waiting = ARGV[6] == '1' and redis.pcall('GET', Q)
if type(waiting) == 'table' and waiting.err then
  if string.find(waiting.err, 'WRONGTYPE') then
    return -2
  end
  return redis.error_reply(waiting.err)
end
local unreserve = waiting and waiting == ARGV[1]
if unreserve then
  wake_readers = true
end
local set, member = nil, ARGV[1] .. ':1'
if ARGV[2] == 'w' then
  set = W
elseif ARGV[2] == 'r' then
  set = R
end
-- The hold's deadline (nil: it is not there), and the latest deadline left once it is
-- out, from the two latest holds (the hold itself is one of them unless others outlast it).
local score, rest
local top = set and redis.call('ZRANGE', set, -2, -1, 'WITHSCORES') or {}
if top[3] == member then
  score, rest = top[4], top[2]
elseif top[1] == member then
  score, rest = top[2], top[4]
elseif top[1] then
  score, rest = redis.call('ZSCORE', set, member), top[4] or top[2]
end
if score and not rest then
  if ARGV[2] == 'w' then
    wake_readers = true
    wake_writers = not first[R]
  else
    wake_writers = not first[W]
  end
end
if wake_readers then
  redis.call(publish, ARGV[3], 'released')
end
if wake_writers then
  redis.call(publish, ARGV[4], 'released')
end
local expire_in = rest and math.max(tonumber(rest) - now, 1)
if unreserve and score then
  -- The writes after the DEL are checked first: a refused one is run now, before any
  -- write, for the ACL's own error and ACL LOG entry.
  if not redis.acl_check_cmd('ZREM', set, member) then
    redis.call('ZREM', set, member)
  end
  if rest and not redis.acl_check_cmd('PEXPIRE', set, expire_in) then
    redis.call('PEXPIRE', set, expire_in)
  end
end
if unreserve then
  redis.call('DEL', Q)
end
if not score then
  return 0
end
redis.call('ZREM', set, member)
if rest then
  local expiry = redis.pcall('PEXPIRE', set, expire_in)
  if type(expiry) == 'table' then
    -- Failed (refused): put the hold back (ZADD, which every acquire needs).
    redis.pcall('ZADD', set, score, member)
    return expiry
  end
end
return 1
