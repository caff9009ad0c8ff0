#!lua flags=allow-cross-slot-keys,allow-oom
-- renew.lua: the watchdog's tick: extend many held locks, and check that others still
-- exist, in one call.
--
-- KEYS[1..n]       lock keys (one server, or one cluster slot), or none: then the n lock
--                  keys come after the hold ids, in ARGV[n + 3 .. 2n + 2], and may be in
--                  any slots that this cluster node serves
-- ARGV[1]          lease in ms for the renewed locks
-- ARGV[2]          m: locks 1..m are renewed; locks m+1..n (fixed leases) are only checked
-- ARGV[i + 2]      the hold id that must still be current in lock i, after a '#' when the
--                  client knows the hold is in the hash form (see acquire.lua): fenced, or
--                  re-entered
--
-- Returns an array of 1-based positions: i when lock i's hold is no longer current (ended,
-- deleted, expired, flushed, replaced by a newer hold, or the key changed type): those
-- holds are lost, and their guards are told ("losses are told"); -i when lock i is not
-- served by this cluster node (its slot moved since the client looked): nothing was done
-- for it, and the client renews it by key. The array is empty when all is well, which
-- keeps the reply of a 500-lock batch tiny.
--
-- Why the flags: allow-cross-slot-keys lets one call renew every lock of a cluster node,
-- whatever its slot, instead of one call per slot (a node serves thousands of slots; the
-- keys are then undeclared, which Redis allows with this flag, and each access is checked
-- to be local). allow-oom keeps renewals running when Redis is at maxmemory: the
-- script only reads and moves expiries, and refusing it would lose every lock. Both need
-- Redis 7.0, which the library requires anyway (PEXPIRE GT).
-- Any other error (e.g. a command the ACL does not allow) fails the whole call, so the
-- client counts a failed renewal instead of wrongly declaring locks lost; and it means
-- that nothing was written: every hold is read before the first PEXPIRE (Redis does not
-- roll back a script, so a refusal half-way would leave the holds ahead of it lengthened
-- behind a reply that says the tick failed).
--
-- Why GET, then HGET: a first hold is a string whose value starts (after its mark byte)
-- with its hold id; any other hold is a hash with the id in "\1h" (see acquire.lua).
-- Why the '#': a hash's renewal would otherwise pay for a failed GET (a WRONGTYPE error
-- under pcall costs Redis about a microsecond, more than the GET and HGET together).
-- Why the hold id and not the owner: a renewal must never extend a hold that is not its
-- own, such as a newer hold of the same owner after this one was lost.
-- Why GT: renewal only lengthens. A longer lease set by a nested fixed-lease hold of the
-- same owner is not cut back ("never two holders").
-- Why check fixed leases without renewing them: a fixed lease must not be extended, but
-- its holder must learn within one tick that it was force-unlocked or lost.
-- Why pcall: one key that changed type behind our back must not fail the whole batch.
local lease, renewing = ARGV[1], tonumber(ARGV[2])
-- Where the keys are: KEYS (declared: one server, or one slot), or after the hold ids in
-- ARGV (one cluster node, many slots).
local keys, n = KEYS, #KEYS
if n == 0 then
  n = (#ARGV - 2) / 2
  keys = {}
  for i = 1, n do
    keys[i] = ARGV[n + i + 2]
  end
end
local result = {}
-- The keys of the holds found current and renewed, lengthened once all are read (counted
-- here: `#` costs a search per insert, in a loop over hundreds of locks per call).
local renewed, renewed_count = {}, 0
for i = 1, n do
  local id, hold = ARGV[i + 2], nil
  if string.byte(id) == 35 then
    -- '#': the client knows this hold is a hash (fenced, or re-entered); a hash never
    -- turns back into a string, so anything else under the key is not this hold.
    id = string.sub(id, 2)
    hold = redis.pcall('HGET', keys[i], '\1h')
  else
    -- Maybe a first hold's string, whose value names its hold id after the mark byte.
    hold = redis.pcall('GET', keys[i])
    if type(hold) == 'string' then
      -- Compared in place (no new string per lock): the id at byte 2, then "\1".
      local mark = string.byte(hold)
      hold = (mark == 1 or mark == 2) and string.find(hold, id, 2, true) == 2
        and string.byte(hold, #id + 2) == 1 and id
    elseif type(hold) == 'table' and hold.err and string.find(hold.err, 'WRONGTYPE') then
      hold = redis.pcall('HGET', keys[i], '\1h')
    end
  end
  if hold == id then
    if i <= renewing then
      renewed_count = renewed_count + 1
      renewed[renewed_count] = keys[i]
    end
  elseif type(hold) == 'table' and hold.err and string.find(hold.err, 'non local key') then
    result[#result + 1] = -i
  elseif type(hold) == 'table' and hold.err and not string.find(hold.err, 'WRONGTYPE') then
    return redis.error_reply(hold.err)
  else
    result[#result + 1] = i
  end
end
for k = 1, renewed_count do
  redis.call('PEXPIRE', renewed[k], lease, 'GT')
end
return result
