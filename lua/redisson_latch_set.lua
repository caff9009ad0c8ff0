-- redisson_latch_set.lua: close a count-down latch kept in Redisson's RCountDownLatch
-- layout with a count, unless it is already closed (Redisson's trySetCount).
--
-- KEYS[1]  the latch: a string named by the latch's name alone, holding the count
-- KEYS[2]  the channel Redisson's waiters listen on
--          (redisson_countdownlatch__channel__{<name>})
-- ARGV[1]  count (>= 1, checked by the client)
-- ARGV[2]  publish how ('1': SPUBLISH, a sharded channel on a cluster; else PUBLISH)
--
-- Returns an integer:
--   1   the latch was open (no key) and is now closed with ARGV[1]
--   0   the latch was already closed; nothing was written
--   -2  the key is not a latch (not a string holding a whole number from 1 to 2^53 - 1,
--       written as DECR reads one); nothing was written
-- An error reply (a command the ACL refuses, say) means that nothing was written.
--
-- Redisson's trySetCount (RedissonCountDownLatch, 3.x to 4.x): "EXISTS; if not: SET count,
-- PUBLISH 1 (CountDownLatchPubSub.NEW_COUNT_MESSAGE: its waiters' local latch closes)". The
-- same key and message. Why no expiry: Redisson sets none (a latch counts events that may
-- be far apart). Why both commands are checked first: Redis does not roll back a script,
-- so a refused PUBLISH after the SET would leave the latch closed behind an error reply.
-- A count as Redis's DECR and Redisson's Long read it: a decimal integer without sign,
-- leading zero, space or fraction (Lua's tonumber also takes '2.0', ' 2', '0x2', '2e0' and
-- '02', which Redis's DECR refuses: such a string is another program's, not a latch), from
-- 1 to 2^53 - 1 (exact in Lua's numbers; Redisson allows more, read here as not a latch).
local function count_of(value)
  if type(value) ~= 'string' or #value > 16 or not string.find(value, '^[1-9]%d*$') then
    return nil
  end
  local count = tonumber(value)
  if count > 9007199254740991 then
    return nil
  end
  return count
end
local latch, channel = KEYS[1], KEYS[2]
local kind = redis.call('TYPE', latch).ok
if kind == 'none' then
  local publish = ARGV[2] == '1' and 'SPUBLISH' or 'PUBLISH'
  local writes = {{'SET', latch, ARGV[1]}, {publish, channel, '1'}}
  for _, command in ipairs(writes) do
    if not redis.acl_check_cmd(unpack(command)) then
      redis.call(unpack(command))
    end
  end
  redis.call('SET', latch, ARGV[1])
  redis.call(publish, channel, '1')
  return 1
end
if kind ~= 'string' then
  return -2
end
if not count_of(redis.call('GET', latch)) then
  return -2
end
return 0
