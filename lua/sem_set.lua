-- sem_set.lua: set, or change, the number of permits of a semaphore, and wake waiters.
--
-- KEYS[1]  the semaphore hash  (<prefix>:{<name>}:semaphore)
-- KEYS[2]  the permits         (<prefix>:{<name>}:permits)
-- ARGV[1]  size                (>= 1); with ARGV[2] = '2', the permits to add (an
--                              integer, negative to take some away)
-- ARGV[2]  how                 ('0': set; '1': set only if unset, leaving an existing
--                              size alone; '2': add ARGV[1] to the size, or set it to
--                              ARGV[1] when none is set)
-- ARGV[3]  wake-up channel
-- ARGV[4]  publish how         ('1': SPUBLISH; else PUBLISH)
--
-- Returns {previous size or -1 when none, permits in use (not expired)}; {-2} when the
-- keys are not a semaphore (nothing written); {-3, previous size or -1} when adding would
-- leave fewer than 1 permit or more than 2^53 - 1 (nothing written). An error reply (a command the ACL refuses,
-- say) means that nothing was written.
-- Why no expiry on the size: it is configuration, like a lock's name; `delete` removes it.
-- Shrinking below the permits in use takes nothing back: new permits are granted once
-- enough of the current ones are given back or expire.
-- Why PUBLISH before HSET: Redis does not roll back a script, so a PUBLISH that the ACL
-- refuses after the HSET would leave the size changed with the call reported failed.
-- Inside the script the order is all one to the subscribers, who hear of it once the
-- script is done.
local sem, permits = KEYS[1], KEYS[2]
local skind = redis.call('TYPE', sem).ok
local pkind = redis.call('TYPE', permits).ok
if (skind ~= 'hash' and skind ~= 'none') or (pkind ~= 'zset' and pkind ~= 'none') then
  return {-2}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local used = redis.call('ZCOUNT', permits, '(' .. now, '+inf')
local previous = tonumber(redis.call('HGET', sem, 'size') or '-1')
if ARGV[2] == '1' and previous >= 0 then
  return {previous, used}
end
local size = ARGV[1]
if ARGV[2] == '2' then
  local added = math.max(previous, 0) + tonumber(ARGV[1])
  if added < 1 or added > 9007199254740991 then
    return {-3, previous}
  end
  size = string.format('%d', added)
end
redis.call(ARGV[4] == '1' and 'SPUBLISH' or 'PUBLISH', ARGV[3], 'resized')
redis.call('HSET', sem, 'size', size)
return {previous, used}
