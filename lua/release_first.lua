-- release_first.lua: give back a first hold of the reentrant lock, the string that
-- take.lua or acquire.lua wrote (see acquire.lua, "the string form"), and only that hold.
--
-- KEYS[1]  the lock key        (<prefix>:{<name>})
-- ARGV[1]  the hold's value as taken, unmarked: "\1" <hold id> "\1" <owner id>
-- ARGV[2]  wake-up channel     (<prefix>:{<name>}:db<n>:released)
-- ARGV[3]  publish how         ('1': SPUBLISH, a sharded channel on a cluster; else PUBLISH)
--
-- Returns an integer, read as release.lua's:
--   0    the hold was given back: the key was deleted, and waiters were woken if a failed
--        attempt had marked it ("\2" as its first byte)
--   -1   the named hold is not current: it ended, or the key holds another first hold.
--        Nothing was written.
--   -2   the key is a string that is not one of our locks; nothing was written
--   -4   the key is not a string: a re-entry turned the hold into the hash form (in
--        another client of the same owner: the sender re-entered none of its own), or the
--        key is of another type. Nothing was written; the client sends release.lua, with
--        the same request id, which reads both forms.
-- An error reply (a command the ACL refuses, say) means that nothing was written.
--
-- Why a script of its own: a client that never re-entered a hold it took as a string
-- (HoldState::hash_form) gives it back with three arguments instead of release.lua's
-- eight, and Redis builds every argument into the script's ARGV, so three cost it less
-- per release (docs/performance.md). A first hold carries no request records (its
-- release is final), so exactly-once needs none: a retry whose first copy deleted the key
-- finds it gone, which the client reports as unconfirmed, as with release.lua's string
-- path.
-- Why compare the whole value: the hold id and the owner both (see release.lua, "Why the
-- hold id"); only the mark byte may differ from what was taken.
-- Why PUBLISH only when marked, and before the DEL: as release.lua.
local lock = KEYS[1]
local value = redis.pcall('GET', lock)
if type(value) == 'string' then
  if value == ARGV[1] then
    redis.call('DEL', lock)
    return 0
  end
  if string.byte(value) == 2 and string.sub(value, 2) == string.sub(ARGV[1], 2) then
    redis.call(ARGV[3] == '1' and 'SPUBLISH' or 'PUBLISH', ARGV[2], 'released')
    redis.call('DEL', lock)
    return 0
  end
  if string.match(value, '^[\1\2][^\1]+\1.+$') then
    return -1
  end
  return -2
end
if not value then
  return -1
end
if not string.find(value.err, 'WRONGTYPE') then
  return redis.error_reply(value.err)
end
return -4
