-- fair_release.lua: give back one hold of the fair lock and/or leave its queue, and wake
-- the head of the queue alone.
--
-- KEYS[1]  holds        (<prefix>:{<name>}:fair)
-- KEYS[2]  queue        (<prefix>:{<name>}:fair:queue)
-- KEYS[3]  alive        (<prefix>:{<name>}:fair:alive)
-- ARGV[1]  hold id      (member '<hold id>:1'; also the waiter's id in the queue)
-- ARGV[2]  '1': give the hold back
-- ARGV[3]  '1': leave the queue (a waiter that gives up or is cancelled)
-- ARGV[4]  wake-up channel prefix (<prefix>:{<name>}:fair:db<n>:wake:); the head's
--          channel is this prefix followed by its id
-- ARGV[5]  publish how ('1': SPUBLISH, a sharded channel on a cluster; else PUBLISH)
--
-- Returns an integer: 1 the hold was given back; 0 it was not there (expired, given back
-- already, e.g. by a copy of this request whose reply was lost, or deleted), or only the
-- queue was left; -2 a key is not part of a fair lock (nothing was written).
--
-- Only the head is woken: each waiter listens on a channel of its own, and a release
-- that frees the lock (or a head that leaves a free lock) publishes to the new head's
-- channel alone. Dead waiters are dropped first, so the message goes to a live one.
local H, Q, A = KEYS[1], KEYS[2], KEYS[3]
local id = ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for _, key in ipairs({H, A}) do
  local dropped = redis.pcall('ZRANGEBYSCORE', key, '-inf', now)
  if type(dropped) == 'table' and dropped.err then
    if string.find(dropped.err, 'WRONGTYPE') then
      return -2
    end
    return redis.error_reply(dropped.err)
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
  return -2
end
-- Why no write is left half done: Redis does not roll back a script, so a command that the
-- ACL refuses after a write would leave that write in place (a hold given back by a call
-- reported failed). Everything is read first (but the dropping of expired holds and dead
-- waiters above, which no reader can tell from their expiry), the head is woken before
-- anything is removed (inside the script the order is all one to the subscribers), and the
-- set's new expiry runs under pcall and puts the hold back if it fails (checked first with
-- redis.acl_check_cmd, Redis 7.0+, when the caller leaves the queue too).
local member = id .. ':1'
local leaving = ARGV[3] == '1' and redis.call('ZSCORE', Q, id) ~= false
local score = ARGV[2] == '1' and redis.call('ZSCORE', H, member)
-- The latest deadline of the other holds (nil: none), from the two latest holds (the hold
-- itself is one of them unless others outlast it).
local rest
local held
if score then
  local top = redis.call('ZRANGE', H, -2, -1, 'WITHSCORES')
  rest = top[3] == member and top[2] or top[4]
  held = rest ~= nil
else
  held = redis.call('ZCARD', H) > 0
end
if (leaving or score) and not held then
  -- The lock is free now: wake the head (the next one when the caller is the head and
  -- leaves).
  local first = redis.call('ZRANGE', Q, 0, 1)
  local head = first[1]
  if leaving and head == id then
    head = first[2]
  end
  if head then
    redis.call(ARGV[5] == '1' and 'SPUBLISH' or 'PUBLISH', ARGV[4] .. head, 'released')
  end
end
local expire_in = rest and math.max(tonumber(rest) - now, 1)
if leaving and score and expire_in and not redis.acl_check_cmd('PEXPIRE', H, expire_in) then
  redis.call('PEXPIRE', H, expire_in)
end
if ARGV[3] == '1' then
  if not redis.acl_check_cmd('ZREM', A, id) then
    redis.call('ZREM', A, id) -- refused: the ACL's error, before the first ZREM
  end
  redis.call('ZREM', Q, id)
  redis.call('ZREM', A, id)
end
if not score then
  return 0
end
redis.call('ZREM', H, member)
if expire_in then
  local expiry = redis.pcall('PEXPIRE', H, expire_in)
  if type(expiry) == 'table' then
    -- Refused: put the hold back (ZADD, which every acquire needs).
    redis.pcall('ZADD', H, score, member)
    return expiry
  end
end
return 1
