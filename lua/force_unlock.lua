-- force_unlock.lua: delete the lock whoever holds it, and wake its waiters.
--
-- KEYS[1]  the lock hash         (<prefix>:{<name>})
-- ARGV[1]  wake-up channel       (<prefix>:{<name>}:db<n>:released)
-- ARGV[2]  publish how           ('1': SPUBLISH, a sharded channel on a cluster; else PUBLISH)
--
-- Returns an integer:
--   1   the lock existed; it was deleted and waiters were woken
--   0   there was no lock
--   -2  the key is not one of our locks (not a hash, or a hash without a hold id):
--       nothing was written
-- An error reply (a command the ACL refuses, say) means that nothing was written.
--
-- Why the hold-id check: a user's own hash under our prefix must never be deleted. Every
-- lock this library writes carries "\1h" (see acquire.lua). Holders of the deleted lock
-- learn of it at their next watchdog tick ("losses are told").
-- Why PUBLISH before DEL: Redis does not roll back a script, so a PUBLISH that the ACL
-- refuses after the DEL would leave the lock deleted with the call reported failed (and
-- nobody woken). Inside the script the order is all one to the subscribers, who hear of
-- it once the script is done.
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'none' then
  return 0
end
if kind ~= 'hash' or redis.call('HEXISTS', KEYS[1], '\1h') == 0 then
  return -2
end
redis.call(ARGV[2] == '1' and 'SPUBLISH' or 'PUBLISH', ARGV[1], 'released')
redis.call('DEL', KEYS[1])
return 1
