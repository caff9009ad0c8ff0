-- latch_delete.lua: open a latch whatever its count (delete it), and wake its waiters.
--
-- KEYS[1]  the latch hash    (<prefix>:{<name>}:latch)
-- ARGV[1]  wake-up channel   (<prefix>:{<name>}:latch:db<n>:open)
-- ARGV[2]  publish how       ('1': SPUBLISH, a sharded channel on a cluster; else PUBLISH)
--
-- Returns an integer:
--   1   the latch was closed; it was deleted and its waiters woken
--   0   there was no latch
--   -2  the key is not a latch; nothing was written
-- An error reply (a command the ACL refuses, say) means that nothing was written.
--
-- Why PUBLISH before DEL: Redis does not roll back a script, so a PUBLISH that the ACL
-- refuses after the DEL would leave the latch open with the call reported failed (and its
-- waiters asleep). Inside the script the order is all one to the subscribers, who hear of
-- it once the script is done.
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'none' then
  return 0
end
if kind ~= 'hash' or redis.call('HEXISTS', KEYS[1], 'count') == 0 then
  return -2
end
redis.call(ARGV[2] == '1' and 'SPUBLISH' or 'PUBLISH', ARGV[1], 'open')
redis.call('DEL', KEYS[1])
return 1
