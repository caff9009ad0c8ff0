-- release.lua: give back one hold of the reentrant lock, exactly once, and only the hold
-- that the caller names.
--
-- KEYS[1]  the lock key        (<prefix>:{<name>}; a string or a hash, see acquire.lua)
-- ARGV[1]  owner id
-- ARGV[2]  hold id             (from acquire.lua: the hold this guard belongs to)
-- ARGV[3]  client tag          (the request id is '<client-tag>.<seq>'; sent in two parts
-- ARGV[4]  request seq          so that the script need not parse it; the same on every
--                               retry of one release)
-- ARGV[5]  wake-up channel     (<prefix>:{<name>}:db<n>:released)
-- ARGV[6]  re-arm ms           ('0': leave the expiry alone)
-- ARGV[7]  expected count      (the sender's own guards of this hold after this release)
-- ARGV[8]  publish how         ('1': SPUBLISH, a sharded channel on a cluster; else PUBLISH)
--
-- Returns an integer:
--   n >= 1  one hold given back; n remain (the expiry is re-armed to ARGV[6] ms when n
--           equals ARGV[7], else left alone)
--   0       the last hold was given back: the key was deleted, and waiters were woken if
--           a failed attempt had marked the lock ("\1w", see acquire.lua)
--   -1      the named hold is not current: it ended (released, expired, deleted, Redis lost
--           it) or the owner now has another hold. Nothing was written.
--   -2      the key is not one of our locks; nothing was written
--   -3      this request was already applied (a retry whose first attempt's reply was
--           lost, after a partial release); nothing was written
-- An error other than WRONGTYPE from the HMGET (an ACL refusing it) is returned as an error.
-- An error reply (a command the ACL refuses, say) means that nothing was written.
--
-- Why GET first: a first hold is a string (take.lua; acquire.lua names both forms), which
-- a final release compares whole, hold id and owner, and deletes: the raw lock's
-- compare-and-delete, plus the PUBLISH when its first byte marks it. WRONGTYPE sends
-- every other key to the hash path.
-- Why the hold id: the owner field alone cannot tell a guard's own hold from a newer hold
-- of the same owner (after a force-unlock or an expiry the owner may acquire afresh).
-- Matching "\1h" makes a stale guard or a late retry answer -1 instead of freeing a
-- newer hold ("release is true", "never two holders").
-- Why "\1r<tag>": a retried partial release must not decrement again. The client sends
-- one request at a time per (lock, owner), so the record of its last applied request
-- answers the retry ("exactly once"). A final release deletes the hash with its records;
-- its retry then answers -1, which the client reports as unconfirmed, never as Ok.
-- Why the re-arm, and why only when n equals ARGV[7]: a nested hold with a longer lease
-- (a watchdog re-entry into a short fixed hold) lengthened the expiry, which would
-- otherwise outlive it: nobody holding, everybody waiting. The sender knows what its own
-- remaining guards need (ARGV[6]), but not what another client's holds of the same owner
-- need. When the count left is exactly its own guards, there is no other hold to cut
-- short; otherwise (another client's counts, a lost acquire not yet reconciled, a release
-- of its own still in flight) the expiry is left alone, which is always safe. PEXPIRE
-- without GT: the point is to shorten. The sender never believes in more than it asked
-- for here (protocol/hold.rs, prepare_rearm), so the expiry never ends before a live
-- hold's confirmed deadline ("never two holders").
-- Why SPUBLISH on a cluster: a classic PUBLISH is broadcast to every node of the cluster
-- over the bus; a sharded one goes to the lock's shard only, and its channel carries the
-- lock's hash tag, so it lives in the script's slot (no CROSSSLOT).
-- Why PUBLISH only when marked: an uncontended cycle then costs no PUBLISH. A waiter always
-- marks the hash it failed on before it sleeps, and its sleep is bounded by the pttl, so
-- a missed mark could cost latency only, never a hang.
-- Why no write is left half done: Redis does not roll back a script, so a command that the
-- ACL refuses after a write would leave that write in place (a release reported failed
-- that gave the hold back). The final release publishes before it deletes: inside the
-- script the order is all one to the subscribers, who hear of it once the script is done.
-- A partial release checks its later writes with redis.acl_check_cmd (Redis 7.0+) before
-- the first one.
local lock, owner, hold, seq = KEYS[1], ARGV[1], ARGV[2], ARGV[4]
local value = redis.pcall('GET', lock)
if type(value) == 'string' then
  -- The string form (see acquire.lua): a first hold, count 1; "\2" first when marked.
  local mine = hold .. '\1' .. owner
  if value == '\1' .. mine then
    redis.call('DEL', lock)
    return 0
  end
  if value == '\2' .. mine then
    redis.call(ARGV[8] == '1' and 'SPUBLISH' or 'PUBLISH', ARGV[5], 'released')
    redis.call('DEL', lock)
    return 0
  end
  if string.match(value, '^[\1\2][^\1]+\1.+$') then
    return -1
  end
  return -2
end
if not value then
  return -1
end
if not string.find(value.err, 'WRONGTYPE') then
  return redis.error_reply(value.err)
end
local held = redis.pcall('HMGET', lock, owner, '\1h', '\1r' .. ARGV[3], '\1w')
if held.err and not string.find(held.err, 'WRONGTYPE') then
  return redis.error_reply(held.err)
end
if held.err then
  return -2
end
if not held[1] or held[2] ~= hold then
  return -1
end
if held[3] == seq then
  return -3
end
local count = tonumber(held[1])
if count ~= nil and count > 1 then
  -- Fails the script, before anything is written, if the ACL would refuse this command
  -- later: the refused command is run now, for the ACL's own error and ACL LOG entry.
  local function check(...)
    if not redis.acl_check_cmd(...) then
      redis.call(...)
    end
  end
  local rearm = ARGV[6] ~= '0' and count - 1 == tonumber(ARGV[7])
  check('HSET', lock, '\1r' .. ARGV[3], seq)
  if rearm then
    check('PEXPIRE', lock, ARGV[6])
  end
  count = redis.call('HINCRBY', lock, owner, -1)
  redis.call('HSET', lock, '\1r' .. ARGV[3], seq)
  if rearm then
    redis.call('PEXPIRE', lock, ARGV[6])
  end
  return count
end
if held[4] then
  redis.call(ARGV[8] == '1' and 'SPUBLISH' or 'PUBLISH', ARGV[5], 'released')
end
redis.call('DEL', lock)
return 0
