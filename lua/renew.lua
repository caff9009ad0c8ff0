-- renew.lua: the watchdog's tick: extend many held locks, and check that others still
-- exist, in one call.
--
-- KEYS[1..n]   lock hashes
-- ARGV[1]      lease in ms for the renewed locks
-- ARGV[2]      m: KEYS[1..m] are renewed; KEYS[m+1..n] (fixed leases) are only checked
-- ARGV[i + 2]  the hold id that must still be current in KEYS[i]
--
-- Returns an array of the 1-based positions i whose hold is no longer current (ended,
-- deleted, expired, flushed, replaced by a newer hold, or the key changed type). Those
-- holds are lost; their guards are told ("losses are told"). The array is empty when all
-- is well, which keeps the reply of a 500-lock batch tiny.
-- Any other error (e.g. a command the ACL does not allow) fails the whole call, so the
-- client counts a failed renewal instead of wrongly declaring locks lost.
--
-- Why the hold id and not the owner: a renewal must never extend a hold that is not its
-- own, such as a newer hold of the same owner after this one was lost.
-- Why GT: renewal only lengthens. A longer lease set by a nested fixed-lease hold of the
-- same owner is not cut back ("never two holders").
-- Why check fixed leases without renewing them: a fixed lease must not be extended, but
-- its holder must learn within one tick that it was force-unlocked or lost.
-- Why pcall: one key that changed type behind our back must not fail the whole batch.
local lease, renewing = ARGV[1], tonumber(ARGV[2])
local lost = {}
for i = 1, #KEYS do
  local hold = redis.pcall('HGET', KEYS[i], '\1h')
  if hold == ARGV[i + 2] then
    if i <= renewing then
      redis.call('PEXPIRE', KEYS[i], lease, 'GT')
    end
  elseif type(hold) == 'table' and hold.err and not string.find(hold.err, 'WRONGTYPE') then
    return redis.error_reply(hold.err)
  else
    lost[#lost + 1] = i
  end
end
return lost
