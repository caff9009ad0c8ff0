-- rw_acquire.lua: take a read or a write hold of a read-write lock, or say how long to
-- wait.
--
-- KEYS[1]  write holds   (<prefix>:{<name>}:rw:write, a sorted set)
-- KEYS[2]  read holds    (<prefix>:{<name>}:rw:read, a sorted set)
-- KEYS[3]  reservation   (<prefix>:{<name>}:rw:writer-waiting, a string: the hold id of
--                        the writer that waits for the readers to leave)
-- KEYS[4]  fencing counter (<prefix>:{<name>}:rw:fence; declared, and touched, only by a
--          fenced write)
-- ARGV[1]  hold id       ('<owner>\1<request id>': unique per acquisition, the same on
--                        retries; the member is '<hold id>:1')
-- ARGV[2]  owner id
-- ARGV[3]  'r' (read) or 'w' (write)
-- ARGV[4]  lease in ms   (the hold's deadline is Redis's now + lease)
-- ARGV[5]  flags, any of: 'q' the caller waits (a writer that cannot get in reserves the
--          lock against new readers), 'o' the owner is explicit (holds of the same owner
--          from other handles count as its own), 'f' fenced (a write gets a token),
--          'j' the caller re-enters through the live hold ARGV[6]
-- ARGV[6]  the hold member re-entered ('' when none)
-- ARGV[7]  reservation ms (how long a writer's reservation lasts unless renewed)
--
-- Returns:
--   {1, token}    granted (now, or by an earlier copy of this request whose reply was
--                 lost: the hold is found under its id). token: the write hold's fencing
--                 token, 0 for reads and unfenced writes.
--   {0, wait_ms}  not granted; wait_ms (>= 1) bounds the wait
--   {2, what}     a key is not part of a read-write lock; nothing was written
--   {3}           a write asked by an owner that holds reads: it could never be granted
--                 (an upgrade would deadlock against its own reads); nothing was written
-- An error reply (a command the ACL refuses, say) means that nothing was written but the
-- dropping of expired holds, which no reader can tell from their expiry.
--
-- Every hold is one member of a sorted set scored by its deadline on Redis's clock, so:
--   * each hold expires by itself ("per-read-hold expiry"): a crashed reader's hold ages
--     out within its lease, and expired members are dropped here before anything is
--     decided;
--   * a hold is given back only by its own id ("release is true"), and a retried
--     acquire finds the hold an earlier copy took ("exactly once", no orphan);
--   * the watchdog renews a hold with sem_renew.lua (ZADD XX GT), as a one-permit
--     semaphore acquisition, and learns of its loss the same way;
--   * each set's own expiry follows its latest deadline: no key outlives the last hold.
-- Reentrancy: the same owner may hold several reads and writes. A write held by the
-- owner lets it read (downgrade) and write again; reads let it read again even while a
-- writer waits (else it would deadlock against its own reads); a write asked while it
-- reads is refused at once ({3}).
-- Writer preference: a waiting writer that finds readers reserves the lock (KEYS[3]);
-- new readers then wait, except re-entries of live reads, until that writer has had its
-- turn. The reservation is renewed by the writer's attempts and lapses after ARGV[7] ms
-- when the writer dies or gives up, so it cannot block readers for longer than that.
-- Why no write is left half done: Redis does not roll back a script, so a command that the
-- ACL refuses after a write would leave that write in place (a hold granted to a caller
-- told it failed, or without the set's expiry to cover it). Every read comes before the
-- first write; a grant runs its PEXPIRE under pcall and takes the hold back out if that
-- fails (free on the hot path); a fresh write that first drops its reservation or stores
-- a token checks the writes after that with redis.acl_check_cmd (Redis 7.0+).
local W, R, Q = KEYS[1], KEYS[2], KEYS[3]
local id, owner, mode, lease, flags = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Reading each set (below) doubles as the type check (no TYPE calls on the hot path): a key
-- of another type answers WRONGTYPE, and nothing has been written then.
local function foreign(key, err)
  if not string.find(err, 'WRONGTYPE') then
    return redis.error_reply(err)
  end
  return {2, key .. ' holds a ' .. redis.call('TYPE', key).ok}
end
-- Expired holds are a prefix of each set (scored by deadline). Each set is looked at
-- through its first member, and its expired holds are dropped only when that one has
-- expired: one call per set while nothing has expired, and what it finds answers the
-- questions that needed more calls before (is a writer in the way, is any read live, is
-- the set there at all).
local function first_live(key)
  local first = redis.pcall('ZRANGE', key, 0, 0, 'WITHSCORES')
  if first.err then
    return nil, first.err
  end
  if first[1] and tonumber(first[2]) <= now then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
    first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  end
  return first
end
local first_write, write_err = first_live(W)
if not first_write then
  return foreign(W, write_err)
end
local first_read, read_err = first_live(R)
if not first_read then
  return foreign(R, read_err)
end
local waiting = redis.pcall('GET', Q)
if type(waiting) == 'table' and waiting.err then
  return foreign(Q, waiting.err)
end
local fenced = mode == 'w' and string.find(flags, 'f', 1, true) ~= nil

local function current_token()
  if not fenced then
    return 0
  end
  return tonumber(redis.call('GET', KEYS[4]) or '0') or 0
end

local member = id .. ':1'
local mine = R
if mode == 'w' then
  mine = W
end
-- A hold that an earlier copy of this request took ("exactly once"). Looked up first only
-- for a fenced write, whose grant would store a new token; on every other path the
-- grant's own ZADD NX finds it (and leaves it as the earlier copy set it), and only a
-- refusal has to look (`taken_earlier`), so that the common grant saves the call.
local function taken_earlier()
  return redis.call('ZSCORE', mine, member) ~= false
end
if fenced and taken_earlier() then
  return {1, current_token()}
end

-- Whether a grant must lengthen the set's expiry; read before the ZADD (which leaves the
-- expiry alone). A set with no live member is not there (its expired ones were dropped
-- above, and Redis deletes an empty set): it needs its expiry, and no call says so.
local function extends()
  local first = first_read
  if mode == 'w' then
    first = first_write
  end
  if not first[1] then
    return true
  end
  return redis.call('PTTL', mine) < lease
end

local function grant(token, extend)
  -- NX: a hold already there is an earlier copy's grant, told as granted and left as it
  -- is (its deadline counts from that copy, as the caller's belief does). Setting it
  -- again would be a write that the PEXPIRE below could fail after, and taking it back
  -- out then would take out the earlier copy's hold.
  if redis.call('ZADD', mine, 'NX', now + lease, member) == 0 then
    return {1, token}
  end
  if extend then
    local expiry = redis.pcall('PEXPIRE', mine, lease)
    if type(expiry) == 'table' then
      -- Failed (refused): take the hold back out (ZREM, which every release needs).
      redis.pcall('ZREM', mine, member)
      return expiry
    end
  end
  return {1, token}
end

-- Whether the caller already holds a live read.
local function reads_already()
  if string.find(flags, 'j', 1, true) and redis.call('ZSCORE', R, ARGV[6]) then
    return true
  end
  if string.find(flags, 'o', 1, true) then
    local prefix = owner .. '\1'
    for _, m in ipairs(redis.call('ZRANGE', R, 0, -1)) do
      if string.sub(m, 1, #prefix) == prefix then
        return true
      end
    end
  end
  return false
end

local writer = first_write[1]
local writer_owner = writer and string.match(writer, '^(.*)\1')
if writer_owner and writer_owner ~= owner then
  if taken_earlier() then
    return {1, 0}
  end
  return {0, math.max(redis.call('PTTL', W), 1)}
end

if mode == 'r' then
  if not writer_owner then
    if waiting and not reads_already() then
      if taken_earlier() then
        return {1, 0}
      end
      return {0, math.max(redis.call('PTTL', Q), 1)}
    end
  end
  return grant(0, extends())
end

if writer_owner then
  -- A re-entry of this owner's write: the hold keeps the owner's token.
  return grant(current_token(), extends())
end
if reads_already() then
  if taken_earlier() then
    return {1, 0}
  end
  return {3}
end
if first_read[1] then
  if taken_earlier() then
    return {1, 0}
  end
  if string.find(flags, 'q', 1, true) then
    if not waiting then
      redis.call('SET', Q, id, 'PX', ARGV[7])
    elseif waiting == id then
      redis.call('PEXPIRE', Q, ARGV[7])
    end
  end
  return {0, math.max(tonumber(first_read[2]) - now, 1)}
end
if waiting and waiting ~= id then
  if taken_earlier() then
    return {1, 0}
  end
  return {0, math.max(redis.call('PTTL', Q), 1)}
end
-- A fresh write. Its reservation (now its own) goes, and a fenced one stores a new token,
-- before the grant's writes: those are checked first.
local token = 0
if fenced then
  -- As acquire.lua: max(counter + 1, server time in us), so tokens only go up even when
  -- the counter is lost.
  local floor = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local last = tonumber(redis.call('GET', KEYS[4]) or '0') or 0
  token = math.max(last + 1, floor)
end
local extend = extends()
-- Fails the script, before anything is written, if the ACL would refuse this command
-- later: the refused command is run now, for the ACL's own error and ACL LOG entry.
local function check(...)
  if not redis.acl_check_cmd(...) then
    redis.call(...)
  end
end
if waiting or fenced then
  check('ZADD', mine, now + lease, member)
  if extend then
    check('PEXPIRE', mine, lease)
  end
end
if waiting and fenced then
  check('SET', KEYS[4], string.format('%.0f', token))
end
if waiting then
  redis.call('DEL', Q)
end
if fenced then
  redis.call('SET', KEYS[4], string.format('%.0f', token))
end
return grant(token, extend)
