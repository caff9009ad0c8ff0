-- force_delete.lua: delete every hold of a read-write lock, a fair lock or a semaphore,
-- whoever holds them, and wake their waiters (an operator's `force_unlock`).
--
-- KEYS[1..n]  the hold sets (sorted sets: one member per hold or permit, scored by its
--             deadline on Redis's clock): the read-write lock's write and read holds,
--             the fair lock's holds, the semaphore's permits. For the fair lock the last
--             key is its queue (read, never written), when ARGV[3 + c] is not ''.
-- ARGV[1]     publish how ('1': SPUBLISH, a sharded channel on a cluster; else PUBLISH)
-- ARGV[2]     c: how many wake-up channels follow
-- ARGV[3 .. 2 + c]  the channels to publish 'released' on
-- ARGV[3 + c] the fair lock's wake-up channel prefix (the queue's head is woken on the
--             prefix followed by its id), or ''
--
-- Returns:
--   n >= 0     the holds (members whose deadline has not passed) that were deleted; the
--              sets are gone either way (expired members too)
--   {-2, type} a key is not a sorted set (not one of these kinds' keys): nothing was
--              written
-- An error reply (a command the ACL refuses, say) means that nothing was written.
--
-- What stays: the fencing counters (tokens keep going up), the semaphore's size and a
-- waiter's reservation or place in the fair queue (they wait on; the freed capacity is
-- theirs to take). Holders of the deleted holds learn of it at their next renewal, or at
-- their release ("losses are told").
-- Why PUBLISH before DEL: Redis does not roll back a script, so a PUBLISH that the ACL
-- refuses after the DEL would leave the holds deleted with the call reported failed (and
-- nobody woken). Inside the script the order is all one to the subscribers.
-- Why the fair lock wakes only its head: each fair waiter listens on a channel of its own
-- and only the head may take the lock (a dead head's successors re-check within their
-- waiter lease, as after any release).
local channels = tonumber(ARGV[2])
local wake_prefix = ARGV[3 + channels]
local holds = #KEYS
if wake_prefix ~= '' then
  holds = holds - 1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local live = 0
for i = 1, #KEYS do
  local kind = redis.call('TYPE', KEYS[i]).ok
  if kind ~= 'zset' and kind ~= 'none' then
    return {-2, kind}
  end
  if i <= holds and kind == 'zset' then
    live = live + redis.call('ZCOUNT', KEYS[i], '(' .. now, '+inf')
  end
end
local publish = ARGV[1] == '1' and 'SPUBLISH' or 'PUBLISH'
if live > 0 then
  for c = 1, channels do
    redis.call(publish, ARGV[2 + c], 'released')
  end
  if wake_prefix ~= '' then
    local head = redis.call('ZRANGE', KEYS[#KEYS], 0, 0)[1]
    if head then
      redis.call(publish, wake_prefix .. head, 'released')
    end
  end
end
for i = 1, holds do
  redis.call('DEL', KEYS[i])
end
return live
