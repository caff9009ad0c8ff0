-- renew.lua: extend the lease of many held locks in one call (the watchdog's tick).
--
-- KEYS[1..n]   lock hashes
-- ARGV[1]      lease in ms
-- ARGV[i + 1]  the owner id that must still hold KEYS[i]
--
-- Returns an array of the 1-based positions i whose owner no longer holds KEYS[i] (the
-- field is gone: deleted, expired, flushed, or the key changed type). Those locks are
-- lost and must not be renewed again; every other lock's TTL was set to the lease. The
-- array is empty when all is well, which keeps the reply of a 500-lock batch tiny.
-- Any other error (e.g. a command the ACL does not allow) fails the whole call, so the
-- client counts a failed renewal instead of wrongly declaring locks lost.
--
-- Why pcall: one key that changed type behind our back must not fail the whole batch.
local lease = ARGV[1]
local lost = {}
for i = 1, #KEYS do
  local present = redis.pcall('HEXISTS', KEYS[i], ARGV[i + 1])
  if present == 1 then
    redis.call('PEXPIRE', KEYS[i], lease)
  elseif type(present) == 'table' and present.err and not string.find(present.err, 'WRONGTYPE') then
    return redis.error_reply(present.err)
  else
    lost[#lost + 1] = i
  end
end
return lost
