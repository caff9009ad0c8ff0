-- latch_count_down.lua: count a latch down by one, exactly once per request, and open it
-- (delete it and wake its waiters) when the count reaches zero.
--
-- KEYS[1]  the latch hash    (<prefix>:{<name>}:latch)
-- ARGV[1]  client tag        (the request id is '<client-tag>.<seq>'; sent in two parts,
-- ARGV[2]  request seq        the same on every retry of one count-down)
-- ARGV[3]  wake-up channel   (<prefix>:{<name>}:latch:db<n>:open)
-- ARGV[4]  publish how       ('1': SPUBLISH, a sharded channel on a cluster; else PUBLISH)
--
-- Returns an integer:
--   n >= 1  counted down; n remain
--   0       the latch is open: this count-down opened it (the key was deleted and the
--           waiters woken), or it was already open (no key: nothing to count)
--   -2      the key is not a latch (not a hash, or its count is not an integer); nothing
--           was written
-- An error reply (a command the ACL refuses, say) means that nothing was written.
--
-- Why "\1r<tag>": a count-down whose reply was lost is retried with the same request id;
-- the record of the client's last applied count-down answers the retry with the current
-- count instead of counting twice ("exactly once"). The client sends one count-down at a
-- time per latch, so its last applied request is the only one that can be in doubt. The
-- record lives in the hash, which opening deletes: nothing outlives the latch.
-- Why no write is left half done: Redis does not roll back a script, so a command that the
-- ACL refuses after a write would leave that write in place (a count-down reported failed
-- that counted, and counts again when retried). The opening publishes before it deletes
-- (inside the script the order is all one to the subscribers), and does not count down a
-- hash it deletes; a count-down records itself under pcall, and gives the count back if
-- that fails (HINCRBY again: the command that has just run).
local latch = KEYS[1]
local kind = redis.call('TYPE', latch).ok
if kind == 'none' then
  return 0
end
if kind ~= 'hash' then
  return -2
end
local state = redis.call('HMGET', latch, 'count', '\1r' .. ARGV[1])
local count = tonumber(state[1])
if count == nil or count ~= math.floor(count) then
  return -2
end
if state[2] == ARGV[2] then
  return count
end
if count <= 1 then
  redis.call(ARGV[4] == '1' and 'SPUBLISH' or 'PUBLISH', ARGV[3], 'open')
  redis.call('DEL', latch)
  return 0
end
count = redis.call('HINCRBY', latch, 'count', -1)
local recorded = redis.pcall('HSET', latch, '\1r' .. ARGV[1], ARGV[2])
if type(recorded) == 'table' then
  redis.call('HINCRBY', latch, 'count', 1)
  return recorded
end
return count
