-- force_unlock.lua: delete the lock whoever holds it, and wake its waiters.
--
-- KEYS[1]  the lock key          (<prefix>:{<name>}; a string or a hash, see acquire.lua)
-- ARGV[1]  wake-up channel       (<prefix>:{<name>}:db<n>:released)
-- ARGV[2]  publish how           ('1': SPUBLISH, a sharded channel on a cluster; else PUBLISH)
--
-- Returns an integer:
--   1   the lock existed; it was deleted and waiters were woken
--   0   there was no lock
--   -2  the key is not one of our locks (a string not of the first-hold form, a hash
--       without a hold id, another type):
--       nothing was written
-- An error reply (a command the ACL refuses, say) means that nothing was written.
--
-- Why the hold-id check: a user's own hash under our prefix must never be deleted. Every
-- lock this library writes carries its hold id: "\1h" in a hash, the value's first part in
-- a string (see acquire.lua). Holders of the deleted lock
-- learn of it at their next watchdog tick ("losses are told").
-- Why PUBLISH before DEL: Redis does not roll back a script, so a PUBLISH that the ACL
-- refuses after the DEL would leave the lock deleted with the call reported failed (and
-- nobody woken). Inside the script the order is all one to the subscribers, who hear of
-- it once the script is done.
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'none' then
  return 0
end
if kind == 'string' then
  -- The string form of a first hold (see acquire.lua), or a user's own string.
  if not string.match(redis.call('GET', KEYS[1]), '^[\1\2][^\1]+\1.+$') then
    return -2
  end
elseif kind ~= 'hash' or redis.call('HEXISTS', KEYS[1], '\1h') == 0 then
  return -2
end
redis.call(ARGV[2] == '1' and 'SPUBLISH' or 'PUBLISH', ARGV[1], 'released')
redis.call('DEL', KEYS[1])
return 1
