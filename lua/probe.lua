-- probe.lua: find out what an acquire whose reply was lost did (read-only).
--
-- KEYS[1]  the lock key    (<prefix>:{<name>}; a string or a hash, see acquire.lua)
-- ARGV[1]  owner id
-- ARGV[2]  the lost acquire's request id ('<client-tag>.<seq>')
--
-- Returns:
--   {1, count, hold, token}  the request's hold is current: it created the hold (the hold id
--                            is the request id) or its re-entry is the client's last
--                            applied request on the current hold. The client then owns
--                            that hold and adopts it or gives it back (release.lua), so no
--                            orphan is left ("no orphans").
--   {0}                      the request holds nothing now: it never ran, or the hold it
--                            took has already ended.
--   an error                 GET or HMGET failed for another reason than WRONGTYPE (an ACL)
--
-- Safe only because the client sends nothing else for this (lock, owner) between the lost
-- acquire and this probe: "\1r<tag>" still names the client's last request.
local lock, owner, request = KEYS[1], ARGV[1], ARGV[2]
local tag, seq = string.match(request, '^(.*)%.(%d+)$')
if not tag then
  return redis.error_reply('ERR probe.lua: malformed request id')
end
-- The string form (take.lua) is a first hold and nothing else: it is the request's when
-- its value names the request and the owner.
local value = redis.pcall('GET', lock)
if type(value) == 'string' then
  local mine = request .. '\1' .. owner
  if value == '\1' .. mine or value == '\2' .. mine then
    return {1, 1, request, 0}
  end
  return {0}
end
if not value then
  return {0}
end
if not string.find(value.err, 'WRONGTYPE') then
  return redis.error_reply(value.err)
end
local held = redis.pcall('HMGET', lock, owner, '\1h', '\1r' .. tag, '\1fence')
if held.err and not string.find(held.err, 'WRONGTYPE') then
  return redis.error_reply(held.err)
end
if held.err or not held[1] or not held[2] then
  return {0}
end
if held[2] == request or held[3] == seq then
  return {1, tonumber(held[1]), held[2], tonumber(held[4]) or 0}
end
return {0}
