-- rw_state.lua: what a read-write lock looks like now (read-only).
--
-- KEYS[1]  write holds   (<prefix>:{<name>}:rw:write)
-- KEYS[2]  read holds    (<prefix>:{<name>}:rw:read)
-- KEYS[3]  reservation   (<prefix>:{<name>}:rw:writer-waiting)
--
-- Returns {write holds, writer owner ('' when none), read holds, reservation ms left
-- (0 when no writer waits), remaining ms of the latest hold (0 when none)}, counting only
-- holds whose deadline is still ahead; or {-2, what} when a key is of another type.
local W, R, Q = KEYS[1], KEYS[2], KEYS[3]
for _, key in ipairs({W, R}) do
  local kind = redis.call('TYPE', key).ok
  if kind ~= 'zset' and kind ~= 'none' then
    return {-2, key .. ' holds a ' .. kind}
  end
end
local qkind = redis.call('TYPE', Q).ok
if qkind ~= 'string' and qkind ~= 'none' then
  return {-2, Q .. ' holds a ' .. qkind}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local writes = redis.call('ZCOUNT', W, '(' .. now, '+inf')
local reads = redis.call('ZCOUNT', R, '(' .. now, '+inf')
local writer = ''
local latest = 0
if writes > 0 then
  local top = redis.call('ZRANGEBYSCORE', W, '(' .. now, '+inf', 'WITHSCORES')
  writer = string.match(top[1], '^(.*)\1') or ''
  latest = math.max(latest, tonumber(top[#top]) - now)
end
if reads > 0 then
  local top = redis.call('ZRANGE', R, -1, -1, 'WITHSCORES')
  latest = math.max(latest, tonumber(top[2]) - now)
end
local waiting = redis.call('PTTL', Q)
return {writes, writer, reads, math.max(waiting, 0), latest}
