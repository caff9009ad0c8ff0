-- redisson_state.lua: what a lock kept in Redisson's RLock layout looks like now (read-only).
--
-- KEYS[1]  the lock hash (the lock's name): field <owner> -> hold count
--
-- Returns an array:
--   {0}                          no lock
--   {1, pttl, owner1, count1, ...}  held: the hash's remaining TTL in ms (-1: none) and
--                                each owner's hold count (in Redisson's layout one owner
--                                at a time, with its count)
--   {-2, type}                   the name holds something that is not a hash
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'none' then
  return {0}
end
if kind ~= 'hash' then
  return {-2, kind}
end
local reply = {1, redis.call('PTTL', KEYS[1])}
for _, value in ipairs(redis.call('HGETALL', KEYS[1])) do
  reply[#reply + 1] = value
end
return reply
