-- redisson_latch_count_down.lua: count a latch kept in Redisson's RCountDownLatch layout
-- down by one, exactly once per request, and open it (delete it and wake its waiters,
-- Redisson's and ours) when the count reaches zero.
--
-- KEYS[1]  the latch: a string named by the latch's name alone, holding the count
-- KEYS[2]  the channel (redisson_countdownlatch__channel__{<name>})
-- KEYS[3]  this count-down's record (<prefix>_redisson_count_down:{<name>}:<request id>):
--          the same on every copy of one count-down
-- ARGV[1]  publish how ('1': SPUBLISH, a sharded channel on a cluster; else PUBLISH)
-- ARGV[2]  how long the record lives, in ms (as long as a copy of this count-down can
--          still arrive)
--
-- Returns an integer:
--   n >= 1  counted down (now, or by an earlier copy of this call); n remain now
--   0       the latch is open: this count-down opened it (now or by an earlier copy), or
--           it was already open (no key: nothing to count, nothing written)
--   -2      the key is not a latch (not a string holding a whole number from 1 to
--           2^53 - 1, written as DECR reads one); nothing was written
-- An error reply (a command the ACL refuses, say) means that nothing was written.
--
-- Redisson's countDown (3.x to 4.x): "DECR; at or below 0: DEL; at exactly 0: PUBLISH 0
-- (CountDownLatchPubSub.ZERO_COUNT_MESSAGE)", sent without retries, so a lost reply leaves
-- its caller in doubt. The same key and message here; what this script adds, invisible to
-- Redisson: the record, a key of its own (a string latch has no room for it) in the
-- latch's slot with an expiry, so that a copy re-sent after a lost reply answers with the
-- count instead of counting again, even when the latch was opened and closed again in
-- between. A count-down of an open latch writes nothing (Redisson's DECR creates -1 and
-- deletes it again). Every command is checked before the first write (Redis does not roll
-- back a script: a refused PUBLISH after the DEL would open the latch behind an error
-- reply, and a refused record would count again when re-sent).
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
local latch, channel, record = KEYS[1], KEYS[2], KEYS[3]
local record_ms = ARGV[2]
local function current()
  local kind = redis.call('TYPE', latch).ok
  if kind == 'none' then
    return 0
  end
  if kind ~= 'string' then
    return -2
  end
  return count_of(redis.call('GET', latch)) or -2
end
local count = current()
if redis.call('EXISTS', record) == 1 then
  return count
end
if count <= 0 then
  return count
end
local publish = ARGV[1] == '1' and 'SPUBLISH' or 'PUBLISH'
local writes = {{'SET', record, '1', 'PX', record_ms}}
if count == 1 then
  writes[#writes + 1] = {publish, channel, '0'}
  writes[#writes + 1] = {'DEL', latch}
else
  writes[#writes + 1] = {'DECR', latch}
end
for _, command in ipairs(writes) do
  if not redis.acl_check_cmd(unpack(command)) then
    redis.call(unpack(command))
  end
end
redis.call('SET', record, '1', 'PX', record_ms)
if count == 1 then
  redis.call(publish, channel, '0')
  redis.call('DEL', latch)
  return 0
end
return redis.call('DECR', latch)
