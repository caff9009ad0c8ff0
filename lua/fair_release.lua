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
local freed = false
if ARGV[3] == '1' then
  freed = redis.call('ZREM', Q, id) == 1
  redis.call('ZREM', A, id)
end
local removed = 0
if ARGV[2] == '1' then
  removed = redis.call('ZREM', H, id .. ':1')
  local last = redis.call('ZRANGE', H, -1, -1, 'WITHSCORES')
  if last[2] then
    redis.call('PEXPIRE', H, math.max(tonumber(last[2]) - now, 1))
  end
  freed = freed or removed == 1
end
if freed and redis.call('EXISTS', H) == 0 then
  local head = redis.call('ZRANGE', Q, 0, 0)[1]
  if head then
    redis.call(ARGV[5] == '1' and 'SPUBLISH' or 'PUBLISH', ARGV[4] .. head, 'released')
  end
end
return removed
