-- sem_renew.lua: the watchdog's tick for semaphore permits: extend the permits of many
-- acquisitions, and check that others still exist, in one call.
--
-- KEYS[i]          the permits sorted set of acquisition i (<prefix>:{<name>}:permits)
-- ARGV[1]          lease in ms for the renewed acquisitions
-- ARGV[2]          m: acquisitions 1..m are renewed; m+1.. (fixed leases) only checked
-- ARGV[2i + 1]     permit id of acquisition i
-- ARGV[2i + 2]     its number of permits
--
-- Returns an array of the 1-based positions i whose permits are gone (expired, given
-- back, deleted, or the key changed type): those permits are lost and their guards are
-- told ("losses are told"). Renewal moves every permit of the acquisition to Redis's
-- now + lease (ZADD XX GT: only ever later) and keeps the set's expiry at least that far.
-- An error reply (a command the ACL refuses, say) means that nothing was written: every
-- acquisition is read first, and the writes are checked with redis.acl_check_cmd (Redis
-- 7.0+) before the first of them; a refusal half-way would leave permits moved past their
-- set's expiry (they would vanish with the set, early) behind a reply that says the tick
-- failed.
local lease, renewing = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lost = {}
-- {key, permit id, n, whether the set's expiry must be lengthened} per renewal
local renewals = {}
for i = 1, #KEYS do
  local id, n = ARGV[2 * i + 1], tonumber(ARGV[2 * i + 2])
  local score = redis.pcall('ZSCORE', KEYS[i], id .. ':1')
  if type(score) == 'table' and score.err and not string.find(score.err, 'WRONGTYPE') then
    return redis.error_reply(score.err)
  end
  if type(score) ~= 'string' or tonumber(score) <= now then
    lost[#lost + 1] = i
  elseif i <= renewing then
    -- Read before the ZADD, which leaves the expiry alone.
    local extend = redis.call('PTTL', KEYS[i]) < lease
    renewals[#renewals + 1] = {KEYS[i], id, n, extend}
  end
end
local function check(...)
  if not redis.acl_check_cmd(...) then
    -- Refused: run it now, before any write, for the ACL's own error and ACL LOG entry.
    redis.call(...)
  end
end
for _, renewal in ipairs(renewals) do
  local key, id, _, extend = unpack(renewal)
  check('ZADD', key, 'XX', 'GT', now + lease, id .. ':1')
  if extend then
    check('PEXPIRE', key, lease)
  end
end
for _, renewal in ipairs(renewals) do
  local key, id, n, extend = unpack(renewal)
  for k = 1, n do
    redis.call('ZADD', key, 'XX', 'GT', now + lease, id .. ':' .. k)
  end
  if extend then
    redis.call('PEXPIRE', key, lease)
  end
end
return lost
