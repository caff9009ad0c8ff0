-- redisson_latch_delete.lua: open a latch kept in Redisson's RCountDownLatch layout
-- whatever its count (delete it), and wake its waiters, Redisson's and ours.
--
-- KEYS[1]  the latch: a string named by the latch's name alone, holding the count
-- KEYS[2]  the channel (redisson_countdownlatch__channel__{<name>})
-- ARGV[1]  publish how ('1': SPUBLISH, a sharded channel on a cluster; else PUBLISH)
--
-- Returns an integer:
--   1   the latch was closed; it was deleted and its waiters woken
--   0   there was no latch
--   -2  the key is not a latch; nothing was written
-- An error reply (a command the ACL refuses, say) means that nothing was written.
--
-- Where this differs from Redisson's delete, on purpose: Redisson's publishes 1
-- (NEW_COUNT_MESSAGE), which its waiters read as "closed", so a Java await() without a
-- timeout sleeps on after the delete until another message comes. This one publishes 0
-- (ZERO_COUNT_MESSAGE): Redisson's waiters read the count again, find none, and return,
-- as ours do. Both commands are checked before the first write (Redis does not roll back
-- a script).
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
  return 0
end
if kind ~= 'string' then
  return -2
end
if not count_of(redis.call('GET', latch)) then
  return -2
end
local publish = ARGV[1] == '1' and 'SPUBLISH' or 'PUBLISH'
local writes = {{publish, channel, '0'}, {'DEL', latch}}
for _, command in ipairs(writes) do
  if not redis.acl_check_cmd(unpack(command)) then
    redis.call(unpack(command))
  end
end
redis.call(publish, channel, '0')
redis.call('DEL', latch)
return 1
