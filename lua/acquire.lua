-- acquire.lua: take or re-enter the reentrant lock for one owner.
--
-- KEYS[1]  the lock key         (<prefix>:{<name>}; a string or a hash, below)
-- KEYS[2]  the fencing counter  (<prefix>:{<name>}:fence; declared, and touched, only by a
--          fenced acquire: while a cluster slot is being migrated, Redis answers TRYAGAIN to
--          a command whose declared keys are not all present on one node, so an unfenced
--          acquire declares the hash alone)
-- ARGV[1]  owner id             (the hash field; its value is the owner's hold count)
-- ARGV[2]  lease in ms
-- ARGV[3]  request id           ('<client-tag>.<seq>', unique per request)
-- ARGV[4]  flags: '0' plain, '1' fenced (hand out a fencing token), '2' other waiters of
--          this client wait (mark a fresh hold: "\2" first in a string, "\1w" in a hash),
--          '3' both
--
-- Returns (the two commonest outcomes as bare integers: a table reply costs Redis about
-- as much as one more command):
--   0                        acquired afresh, unfenced: count 1, the hold id is ARGV[3],
--                            no token
--   n > 0                    held by another owner; n is the key's remaining TTL in ms (>= 1)
--   {1, count, hold, token}  acquired (a re-entry, or a fenced fresh hold). count is the
--                            owner's hold count after this acquire (1 = fresh); hold is the
--                            hold id; token is the hold's fencing token, 0 when it has none
--                            or none was asked for.
--   {2, what}                the key is not one of our locks; nothing was written
-- An error reply (a command the ACL refuses, say) means that nothing was written.
--
-- A held lock has one of two forms:
--   a string  <mark> .. <hold id> .. "\1" .. <owner>: a first hold and nothing else (count
--             1, no records, no token). <mark> is "\1", or "\2" when someone may be
--             waiting (the string's "\1w", below). take.lua writes it with a bare
--             SET NX PX, and so does this script for an unfenced fresh acquire, so that an
--             uncontended cycle costs what a raw lock costs. A failed attempt marks it with
--             SET XX KEEPTTL (its expiry unchanged). A re-entry turns it into the hash
--             form, with the same holder, hold id, mark and expiry (below); a hash never
--             turns back into a string. Its guard gives it back with release_first.lua
--             (release.lua reads it too).
--   a hash, with these fields:
--   <owner>          hold count (the reentrancy depth, summed over every client of the owner)
--   "\1h"            hold id: the request id of the fresh acquire that created this hold.
--                    Every release, renewal and reconciliation names it and acts only while
--                    it is current, so a stale guard, or a retry that arrives after the hold
--                    ended, can never give back a newer hold of the same owner
--                    (property "release is true", "never two holders").
--   "\1r<tag>"       the seq of the last re-entry or partial release that client <tag>
--                    applied to this hold. It makes re-entries and partial releases
--                    exactly-once without per-request latch keys: a client serialises its
--                    requests per (lock, owner), so "my last applied request" is enough to
--                    answer "did my lost request run?" (see probe.lua, release.lua).
--                    It lives and dies with the hash: no key outlives the lock ("no garbage").
--   "\1fence"        the hold's fencing token, for fenced holds
--   "\1w"            someone may be waiting: the last release publishes the wake-up only
--                    then (release.lua), which saves the PUBLISH on every uncontended
--                    cycle. Set by every failed attempt (HSETNX: only the first one on a
--                    hold writes and replicates), and by a fresh acquire whose client has
--                    other waiters for this lock (flag '2'). Why that is enough: a waiter
--                    sleeps only after a failed attempt, which marked the hash current then.
--                    Its release wakes one waiter per client (process); that waiter either
--                    fails on the next hash (and marks it) or takes the lock, and then
--                    marks its fresh hash for the waiters of its client that still sleep.
--                    Every sleep is bounded by the pttl anyway, so a missing mark could
--                    cost latency, never a hang.
-- A fresh acquire needs no record: the hold id itself says whether it ran.
--
-- Expiry: a fresh acquire sets the lease. A re-entry only ever lengthens it (PEXPIRE GT;
-- Redis 7.0+), so a short lease nested in a longer hold, from this client or another
-- client of the same owner, cannot cut the outer hold's expiry ("never two holders").
--
-- Fencing: token = max(counter + 1, server time in microseconds). The time floor keeps
-- tokens increasing when the counter is lost (restart without persistence, FLUSHALL,
-- failover to a replica that missed its last SET), as long as the server clock does not
-- step back by more than the outage lasted ("tokens only go up"). Lua 5.1 numbers are
-- doubles: exact up to 2^53, i.e. for microsecond times until the year 2255.
--
-- Why PTTL first: -2 says "no key" in one call, and for a held lock it is the TTL that the
-- waiter needs. Then GET tells the string form from the rest (WRONGTYPE, caught with
-- pcall), and HMGET a hash from a key of another type (WRONGTYPE again), so a foreign key
-- gets a typed answer and nothing is written; any other error (an ACL that refuses the
-- read) is returned as the error it is, not mistaken for a foreign key. A string not of
-- the form above, and a string or hash without an expiry or a hash without a hold id, was
-- not written by this library (every lock gets both in one command or script) and is
-- refused.
-- Why no write is left half done: Redis does not roll back a script, so a command that the
-- ACL refuses after a write would leave that write in place (a fresh hash without an
-- expiry never frees). Every read comes before the first write; a fresh acquire runs its
-- later writes under pcall and deletes the new hash if one fails (free on the hot path);
-- a re-entry checks its later writes with redis.acl_check_cmd before the first one.
local HOLD, FENCE, WAITING = '\1h', '\1fence', '\1w'
local lock, owner, lease, request = KEYS[1], ARGV[1], ARGV[2], ARGV[3]

-- The next fencing token, as a string; read-only (the caller writes it to KEYS[2] last).
local function next_token()
  local now = redis.call('TIME')
  local floor = tonumber(now[1]) * 1000000 + tonumber(now[2])
  local last = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
  return string.format('%.0f', math.max(last + 1, floor))
end

local flags = ARGV[4]
local fenced = flags == '1' or flags == '3'
local pttl = redis.call('PTTL', lock)
if pttl == -2 and not fenced then
  -- The string form (see take.lua), marked when others of this client wait: one
  -- command, nothing to undo.
  local mark = flags == '2' and '\2' or '\1'
  redis.call('SET', lock, mark .. request .. '\1' .. owner, 'PX', lease)
  return 0
end
if pttl == -2 then
  -- A fenced fresh hold (an unfenced one is a string, above): the hash form, with its
  -- token.
  local token = next_token()
  if flags == '3' then
    redis.call('HSET', lock, owner, 1, HOLD, request, FENCE, token, WAITING, 1)
  else
    redis.call('HSET', lock, owner, 1, HOLD, request, FENCE, token)
  end
  -- The later writes run under pcall: if one failed, the new hash is deleted (DEL, which
  -- every release needs) and the error returned.
  local expiry = redis.pcall('PEXPIRE', lock, lease)
  if type(expiry) == 'table' then
    redis.pcall('DEL', lock)
    return expiry
  end
  local stored = redis.pcall('SET', KEYS[2], token)
  if stored.err then
    redis.pcall('DEL', lock)
    return stored
  end
  return {1, 1, request, tonumber(token)}
end
-- Fails the script, before anything is written, if the ACL would refuse this command
-- later: the refused command is run now, for the ACL's own error and ACL LOG entry.
local function check(...)
  if not redis.acl_check_cmd(...) then
    redis.call(...)
  end
end
local value = redis.pcall('GET', lock)
if type(value) == 'table' and not string.find(value.err, 'WRONGTYPE') then
  return redis.error_reply(value.err)
end
if type(value) == 'string' then
  -- A first hold in the string form, or a string that is not one of our locks.
  local mark, hold, holder = string.match(value, '^([\1\2])([^\1]+)\1(.+)$')
  if not mark then
    return {2, 'string'}
  end
  if pttl < 0 then
    return {2, 'string without an expiry'}
  end
  if holder ~= owner then
    -- Held by another owner: mark it (its release then publishes), keeping its expiry
    -- to the millisecond. Only the first waiter writes (and replicates) the mark.
    if mark == '\1' then
      redis.call('SET', lock, '\2' .. hold .. '\1' .. holder, 'XX', 'KEEPTTL')
    end
    return math.max(pttl, 1)
  end
  -- A re-entry into a first hold: the hash form, count 2, with this request's record, the
  -- mark if set, a first token if asked for, and the later of the two expiries (what
  -- PEXPIRE GT gives a re-entry of a hash; script time stands still, so the PTTL read
  -- above is the string's expiry to the millisecond). Every write is checked before the
  -- first one, the DEL.
  local tag, seq = string.match(request, '^(.*)%.(%d+)$')
  if not tag then
    return redis.error_reply('ERR acquire.lua: malformed request id')
  end
  local fields = {owner, 2, HOLD, hold, '\1r' .. tag, seq}
  local token = fenced and next_token()
  if token then
    fields[#fields + 1], fields[#fields + 2] = FENCE, token
  end
  if mark == '\2' then
    fields[#fields + 1], fields[#fields + 2] = WAITING, 1
  end
  local expiry = math.max(pttl, tonumber(lease))
  check('HSET', lock, unpack(fields))
  check('PEXPIRE', lock, expiry)
  if token then
    check('SET', KEYS[2], token)
  end
  redis.call('DEL', lock)
  redis.call('HSET', lock, unpack(fields))
  redis.call('PEXPIRE', lock, expiry)
  if token then
    redis.call('SET', KEYS[2], token)
  end
  return {1, 2, hold, tonumber(token) or 0}
end
local held = redis.pcall('HMGET', lock, owner, HOLD, FENCE)
if held.err and not string.find(held.err, 'WRONGTYPE') then
  -- Not a question of type (an ACL that refuses HMGET, say): report it as it is.
  return redis.error_reply(held.err)
end
if held.err then
  return {2, redis.call('TYPE', lock).ok}
end
if pttl < 0 then
  return {2, 'hash without an expiry'}
end
if not held[2] then
  return {2, 'hash without a hold id'}
end
if not held[1] then
  redis.call('HSETNX', lock, WAITING, 1)
  return math.max(pttl, 1)
end
local count = tonumber(held[1])
if count == nil or count < 1 or count ~= math.floor(count) then
  return {2, 'hash whose owner field is not a hold count'}
end
local tag, seq = string.match(request, '^(.*)%.(%d+)$')
if not tag then
  return redis.error_reply('ERR acquire.lua: malformed request id')
end
-- A re-entry. Its later writes are checked before the first one (check() above), while
-- nothing is written yet.
-- The hold's first token, when a fenced re-entry finds none, is new.
local token, new_token = 0, nil
if fenced then
  token = tonumber(held[3])
  if token == nil then
    new_token = next_token()
    token = tonumber(new_token)
  end
end
check('HSET', lock, '\1r' .. tag, seq)
check('PEXPIRE', lock, lease, 'GT')
if new_token then
  check('SET', KEYS[2], new_token)
end
count = redis.call('HINCRBY', lock, owner, 1)
if new_token then
  redis.call('HSET', lock, '\1r' .. tag, seq, FENCE, new_token)
else
  redis.call('HSET', lock, '\1r' .. tag, seq)
end
redis.call('PEXPIRE', lock, lease, 'GT')
if new_token then
  redis.call('SET', KEYS[2], new_token)
end
return {1, count, held[2], token}
