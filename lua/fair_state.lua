-- fair_state.lua: what a fair lock looks like now (read-only).
--
-- KEYS[1]  holds        (<prefix>:{<name>}:fair)
-- KEYS[2]  queue        (<prefix>:{<name>}:fair:queue)
-- KEYS[3]  alive        (<prefix>:{<name>}:fair:alive)
--
-- Returns {holds, holder owner ('' when none), live waiters in the queue, remaining ms of
-- the latest hold (0 when none)}, counting only holds and waiters whose deadlines are
-- still ahead; or {-2, what} when a key is of another type.
local H, Q, A = KEYS[1], KEYS[2], KEYS[3]
for _, key in ipairs({H, Q, A}) do
  local kind = redis.call('TYPE', key).ok
  if kind ~= 'zset' and kind ~= 'none' then
    return {-2, key .. ' holds a ' .. kind}
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local holds = redis.call('ZRANGEBYSCORE', H, '(' .. now, '+inf', 'WITHSCORES')
local holder, latest = '', 0
if #holds > 0 then
  holder = string.match(holds[1], '^(.*)\1') or ''
  latest = tonumber(holds[#holds]) - now
end
local waiters = redis.call('ZCOUNT', A, '(' .. now, '+inf')
return {#holds / 2, holder, waiters, latest}
