-- sem_state.lua: a semaphore's size and the permits in use (read-only).
--
-- KEYS[1]  the semaphore hash  (<prefix>:{<name>}:semaphore)
-- KEYS[2]  the permits         (<prefix>:{<name>}:permits)
--
-- Returns {size or -1 when none was set, permits in use (deadline after Redis's now),
-- reserved permits (a waiter's live reservation, else 0)}; {-2} when the keys are not a
-- semaphore.
local sem, permits = KEYS[1], KEYS[2]
local skind = redis.call('TYPE', sem).ok
local pkind = redis.call('TYPE', permits).ok
if (skind ~= 'hash' and skind ~= 'none') or (pkind ~= 'zset' and pkind ~= 'none') then
  return {-2}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local used = redis.call('ZCOUNT', permits, '(' .. now, '+inf')
local state = redis.call('HMGET', sem, 'size', 'resv_n', 'resv_until')
local reserved = 0
if tonumber(state[3] or '0') > now then
  reserved = tonumber(state[2]) or 0
end
return {tonumber(state[1] or '-1'), used, reserved}
