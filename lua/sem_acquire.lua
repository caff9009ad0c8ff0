-- sem_acquire.lua: take n permits of a semaphore whose permits expire, or say how long to
-- wait.
--
-- KEYS[1]  the semaphore hash  (<prefix>:{<name>}:semaphore)
-- KEYS[2]  the permits         (<prefix>:{<name>}:permits, a sorted set)
-- ARGV[1]  permit id           (the request id: unique per acquisition, the same on retries)
-- ARGV[2]  n                   (permits wanted, >= 1; 0: every free permit, at least 1
--                              (a drain): never waits, never reserves)
-- ARGV[3]  lease in ms         (each permit's deadline is Redis's now + lease)
-- ARGV[4]  reserve             ('1': a waiter; if it cannot be served, it reserves the
--                              next free permits for itself for ARGV[5] ms)
-- ARGV[5]  reservation ms
--
-- Returns:
--   {1, deadline}   granted now (or earlier, by an attempt of this request whose reply was
--                   lost: the permits are found under its id): deadline is Redis's ms
--   {1, deadline, n} the same for a drain: n permits were granted (found again on a retry)
--   {0, wait_ms}    not granted; wait_ms bounds the wait (until the earliest permit
--                   expires, or the reservation must be renewed)
--   {0, wait_ms, 1} the same, and the caller is first in line: it holds the reservation
--                   (its client wakes it, rather than another waiter, on a release)
--   {2, what}       the keys are not a semaphore (wrong type); nothing was written
--   {3}             no size was set (set_permits): nothing was written
--   {4, size}       n is more than the semaphore's size: it can never be granted
-- An error reply (a command the ACL refuses, say) means that nothing was written but the
-- dropping of expired permits, which no reader can tell from their expiry.
--
-- The semaphore hash: "size" the number of permits; "resv", "resv_n", "resv_until": the
-- waiter that the next free permits are kept for, how many, and until when (Redis ms).
-- The permits: one member "<permit id>:<k>" (k = 1..n) per permit, scored by its deadline.
--
-- Why deadlines from Redis TIME: every client's permits expire on one clock, whatever the
-- clients' clocks say. Expired permits are dropped here, so a crashed holder's permits
-- return within their lease ("no orphans"), and the sorted set's own expiry is kept at its
-- latest deadline, so nothing outlives the last permit.
-- Why the reservation: without it, a waiter for n > 1 permits starves while single
-- permits are taken as soon as they free. The first waiter that cannot be served keeps
-- the next free permits for itself (others may take only what is left beyond them); it
-- renews the reservation on each attempt, and a waiter that died or gave up loses it
-- after ARGV[5] ms.
-- Why no write is left half done: Redis does not roll back a script, so a command that the
-- ACL refuses after a write would leave that write in place (permits granted to a caller
-- told it failed). Every read comes before the first write, and a grant checks its later
-- writes with redis.acl_check_cmd (Redis 7.0+) before the first one.
local sem, permits = KEYS[1], KEYS[2]
local id, n, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local kind = redis.call('TYPE', sem).ok
if kind ~= 'hash' then
  if kind == 'none' then
    return {3}
  end
  return {2, kind}
end
local pkind = redis.call('TYPE', permits).ok
if pkind ~= 'zset' and pkind ~= 'none' then
  return {2, pkind}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', permits, '-inf', now)
local drain = n == 0
local mine = redis.call('ZSCORE', permits, id .. ':1')
if mine then
  if drain then
    -- An acquisition's permits are added, renewed and expire together: 1..n, no gap.
    local k = 1
    while redis.call('ZSCORE', permits, id .. ':' .. (k + 1)) do
      k = k + 1
    end
    return {1, tonumber(mine), k}
  end
  return {1, tonumber(mine)}
end
local state = redis.call('HMGET', sem, 'size', 'resv', 'resv_n', 'resv_until')
local size = tonumber(state[1])
if size == nil then
  return {3}
end
if n > size then
  return {4, size}
end
local reserved = 0
if state[2] and tonumber(state[4] or '0') > now and state[2] ~= id then
  reserved = tonumber(state[3]) or 0
end
local used = redis.call('ZCARD', permits)
if drain then
  n = size - used - reserved
end
if n >= 1 and used + reserved + n <= size then
  local deadline = now + lease
  -- Fails the script, before anything is written, if the ACL would refuse this command
  -- later: the refused command is run now, for the ACL's own error and ACL LOG entry.
  local function check(...)
    if not redis.acl_check_cmd(...) then
      redis.call(...)
    end
  end
  -- Read before the ZADDs, which leave the expiry alone.
  local extend = redis.call('PTTL', permits) < lease
  local unreserve = state[2] == id
  if extend then
    check('PEXPIRE', permits, lease)
  end
  if unreserve then
    check('HDEL', sem, 'resv', 'resv_n', 'resv_until')
  end
  for k = 1, n do
    redis.call('ZADD', permits, deadline, id .. ':' .. k)
  end
  if extend then
    redis.call('PEXPIRE', permits, lease)
  end
  if unreserve then
    redis.call('HDEL', sem, 'resv', 'resv_n', 'resv_until')
  end
  if drain then
    return {1, deadline, n}
  end
  return {1, deadline}
end
local resv_ms = tonumber(ARGV[5])
local wait = resv_ms
local first = redis.call('ZRANGE', permits, 0, 0, 'WITHSCORES')
if first[2] then
  wait = math.min(wait, math.max(tonumber(first[2]) - now, 1))
end
if ARGV[4] == '1' and reserved == 0 and not drain then
  redis.call('HSET', sem, 'resv', id, 'resv_n', n, 'resv_until', now + resv_ms)
  return {0, wait, 1}
end
return {0, wait}
