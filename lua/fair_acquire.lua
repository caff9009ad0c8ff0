-- fair_acquire.lua: take the fair lock in arrival order, or queue and say how long to
-- wait.
--
-- KEYS[1]  holds        (<prefix>:{<name>}:fair, a sorted set: '<hold id>:1' -> deadline)
-- KEYS[2]  queue        (<prefix>:{<name>}:fair:queue, a sorted set: waiter id -> arrival,
--                       Redis time in us)
-- KEYS[3]  alive        (<prefix>:{<name>}:fair:alive, a sorted set: waiter id -> until when
--                       the waiter counts as alive, Redis ms)
-- KEYS[4]  fencing counter (<prefix>:{<name>}:fair:fence; declared, and touched, only by a
--          fenced acquire)
-- ARGV[1]  hold id      ('<owner>\1<request id>': unique per acquisition, the same on
--                       retries; it is also the waiter's id in the queue)
-- ARGV[2]  owner id
-- ARGV[3]  lease in ms  (the hold's deadline is Redis's now + lease)
-- ARGV[4]  flags, any of: 'q' the caller waits (it takes or keeps its place in the queue),
--          'f' fenced (a fresh hold gets a token)
-- ARGV[5]  waiter lease in ms (a queued waiter that does not ask again within this long
--          is taken to be dead and leaves the queue)
--
-- Returns:
--   {1, token}    granted (now, or by an earlier copy of this request whose reply was lost:
--                 the hold is found under its id). token: the fencing token, 0 unfenced.
--   {0, wait_ms}  not granted; wait_ms (>= 1) bounds the wait
--   {2, what}     a key is not part of a fair lock; nothing was written
--
-- Fairness: the lock goes to the head of the queue, in arrival order by Redis's clock
-- (never the clients' clocks). A free lock with a queue is not taken by a newcomer, even
-- one that does not wait (try_acquire). The owner of the current hold re-enters without
-- queueing (else it would wait for itself).
-- Liveness: each attempt of a queued waiter moves its "alive" deadline to now + ARGV[5];
-- waiters ask again well within that. A waiter that died stops asking and is dropped here
-- once its deadline passes, so a dead head delays the others by at most about ARGV[5], and
-- the waiter behind it is told to come back exactly then. A waiter that gives up or is
-- cancelled leaves at once (fair_release.lua).
-- Every hold is one member scored by its deadline, renewed by the watchdog with
-- sem_renew.lua like a one-permit semaphore acquisition; each set's expiry follows its
-- latest deadline, so nothing outlives the last hold or waiter.
local H, Q, A = KEYS[1], KEYS[2], KEYS[3]
local id, owner, lease, flags = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local waiter_lease = tonumber(ARGV[5])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Dropping what expired doubles as the type check (no TYPE calls on the hot path).
for _, key in ipairs({H, A}) do
  local dropped = redis.pcall('ZRANGEBYSCORE', key, '-inf', now)
  if type(dropped) == 'table' and dropped.err then
    if not string.find(dropped.err, 'WRONGTYPE') then
      return redis.error_reply(dropped.err)
    end
    return {2, key .. ' holds a ' .. redis.call('TYPE', key).ok}
  end
  if #dropped > 0 then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
    if key == A then
      redis.call('ZREM', Q, unpack(dropped))
    end
  end
end
local qkind = redis.call('TYPE', Q).ok
if qkind ~= 'zset' and qkind ~= 'none' then
  return {2, Q .. ' holds a ' .. qkind}
end
local fenced = string.find(flags, 'f', 1, true) ~= nil
local member = id .. ':1'

local function current_token()
  if not fenced then
    return 0
  end
  return tonumber(redis.call('GET', KEYS[4]) or '0') or 0
end

if redis.call('ZSCORE', H, member) then
  return {1, current_token()}
end

-- Why no write is left half done: Redis does not roll back a script, so a command that the
-- ACL refuses after a write would leave that write in place (a hold granted, or a place in
-- the queue taken, by a call reported failed; a fresh set with no expiry, which never
-- frees). Every read comes before the first write (but the dropping of expired holds and
-- dead waiters above, which no reader can tell from their expiry); a grant runs its
-- PEXPIRE under pcall and takes the hold back out if that fails (free on the hot path);
-- a path that writes before its grant (a queued waiter that leaves the queue as it is
-- granted, a fenced grant's token) and a waiter taking its place in the queue check their
-- later writes first with redis.acl_check_cmd (Redis 7.0+).
local function check(...)
  if not redis.acl_check_cmd(...) then
    -- Refused: run it now, before any write, for the ACL's own error and ACL LOG entry.
    redis.call(...)
  end
end

-- Whether a grant must lengthen the set's expiry; read before the ZADD (which leaves the
-- expiry alone).
local function extends()
  return redis.call('PTTL', H) < lease
end

local function grant(token, extend)
  redis.call('ZADD', H, now + lease, member)
  if extend then
    local expiry = redis.pcall('PEXPIRE', H, lease)
    if type(expiry) == 'table' then
      -- Refused: take the hold back out (ZREM, which every release needs).
      redis.pcall('ZREM', H, member)
      return expiry
    end
  end
  return {1, token}
end

-- The grant's writes, checked before something else is written first.
local function check_grant(extend)
  check('ZADD', H, now + lease, member)
  if extend then
    check('PEXPIRE', H, lease)
  end
end

-- Takes (or keeps) the caller's place in the queue and moves its alive deadline, then
-- answers "wait at most wait_ms" (read by the caller before this writes).
local function queue(wait_ms)
  if string.find(flags, 'q', 1, true) then
    local extend_queue = redis.call('PTTL', Q) < waiter_lease
    local extend_alive = redis.call('PTTL', A) < waiter_lease
    check('ZADD', A, now + waiter_lease, id)
    if extend_queue then
      check('PEXPIRE', Q, waiter_lease)
    end
    if extend_alive then
      check('PEXPIRE', A, waiter_lease)
    end
    redis.call('ZADD', Q, 'NX', tonumber(t[1]) * 1000000 + tonumber(t[2]), id)
    redis.call('ZADD', A, now + waiter_lease, id)
    if extend_queue then
      redis.call('PEXPIRE', Q, waiter_lease)
    end
    if extend_alive then
      redis.call('PEXPIRE', A, waiter_lease)
    end
  end
  return {0, math.max(wait_ms, 1)}
end

local holder = redis.call('ZRANGE', H, 0, 0)[1]
if holder then
  if string.match(holder, '^(.*)\1') == owner then
    -- A re-entry: the hold keeps the owner's token. A waiter of the owner that queued
    -- behind another owner leaves the queue as it is granted: left there, its entry would
    -- head the queue with nobody asking, and hold every later attempt up for a waiter
    -- lease (found by the fair lock's checker, tests/fair_check.rs).
    local token, extend = current_token(), extends()
    if redis.call('ZSCORE', Q, id) then
      check_grant(extend)
      check('ZREM', A, id)
      redis.call('ZREM', Q, id)
      redis.call('ZREM', A, id)
    end
    return grant(token, extend)
  end
  return queue(redis.call('PTTL', H))
end
local head = redis.call('ZRANGE', Q, 0, 0)[1]
if head and head ~= id then
  -- The head is alive until its deadline; come back then at the latest.
  local alive = tonumber(redis.call('ZSCORE', A, head) or now + 1)
  return queue(alive - now)
end
local token = 0
if fenced then
  -- As acquire.lua: max(counter + 1, server time in us): tokens only go up.
  local floor = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local last = tonumber(redis.call('GET', KEYS[4]) or '0') or 0
  token = math.max(last + 1, floor)
end
local extend = extends()
if head or fenced then
  check_grant(extend)
end
if head and fenced then
  check('SET', KEYS[4], string.format('%.0f', token))
end
if head then
  check('ZREM', A, id)
  redis.call('ZREM', Q, id)
  redis.call('ZREM', A, id)
end
if fenced then
  redis.call('SET', KEYS[4], string.format('%.0f', token))
end
return grant(token, extend)
