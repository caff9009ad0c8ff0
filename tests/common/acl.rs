//! The least-privilege ACL user the security and soundness tests share.
#![allow(dead_code)]

/// The least-privilege ACL rule for a client with the default prefix, found by starting
/// from `-@all` and adding only what an operation was refused (checked by
/// `ACL LOG` staying empty through every operation the library offers). The commands
/// after "Called by the scripts" are the ones the Lua scripts (`lua/*.lua`) call: Redis
/// checks ACLs inside scripts too. `+select` is only needed for a database other than 0,
/// `+pubsub|numsub` only for `Lock::waiting_clients`. `tests/acl_permissions.rs` takes
/// each command away in turn and checks what fails.
pub const ACL_RULES: &[&str] = &[
    "resetchannels",
    "~redis-locks:*",
    "&redis-locks:*",
    "-@all",
    // connect() checks the connection with PING (a refusal is tolerated, but logged).
    "+ping",
    "+evalsha",
    "+eval",
    "+subscribe",
    "+unsubscribe",
    "+select",
    // Only for Lock::waiting_clients (PUBSUB NUMSUB):
    "+pubsub|numsub",
    // Called by the scripts (also CountDownLatch::count's TYPE and HGET, and
    // Lock::unlock's HGET):
    "+type",
    "+get",
    "+set",
    "+del",
    "+pttl",
    "+pexpire",
    "+hget",
    "+hmget",
    "+hset",
    "+hsetnx",
    "+hincrby",
    "+hexists",
    "+hdel",
    "+time",
    "+hgetall",
    "+publish",
    // The semaphore's and the read-write lock's sorted sets:
    "+zadd",
    "+zcard",
    "+zcount",
    "+zrange",
    "+zrangebyscore",
    "+zrem",
    "+zremrangebyscore",
    "+zscore",
];

pub const ACL_USER: &str = "locker";
pub const ACL_PASS: &str = "locker-pw-7f3a";

/// The least-privilege ACL rule for the Redisson layout (`redisson_lock`,
/// `redisson_rw_lock`, `redisson_latch`) on names matching `jobs:*`, with the default
/// prefix (docs/security.md, "The Redisson layout", shows it with `<names>`): the names
/// themselves, a read hold's timeout keys (`{<name>}:<owner>:rwlock_timeout:<n>`, or
/// `<name>:…` for a name with a brace), the library's exactly-once records
/// (`<prefix>_redisson_acquire:…`, `<prefix>_redisson_count_down:…`) and Redisson's three
/// channels, as channels and as keys (the scripts that publish declare the channel among
/// their KEYS, as Redisson's own do, so that a cluster routes them by its slot).
/// `tests/acl_permissions.rs` runs every Redisson-layout operation under it, and takes
/// each command the scripts call away in turn.
pub const REDISSON_ACL_RULES: &[&str] = &[
    "resetchannels",
    "~jobs:*",
    "~{jobs:*}:*",
    "~redis-locks_redisson_*",
    "~redisson_lock__channel:{jobs:*}",
    "~redisson_rwlock:{jobs:*}",
    "~redisson_countdownlatch__channel__{jobs:*}",
    "&redisson_lock__channel:{jobs:*}",
    "&redisson_rwlock:{jobs:*}",
    "&redisson_countdownlatch__channel__{jobs:*}",
    "-@all",
    "+ping",
    "+evalsha",
    "+eval",
    "+subscribe",
    "+unsubscribe",
    "+select",
    // Called by the scripts (lua/redisson_*.lua):
    "+type",
    "+get",
    "+set",
    "+del",
    "+decr",
    "+exists",
    "+pttl",
    "+pexpire",
    "+hget",
    "+hset",
    "+hdel",
    "+hexists",
    "+hincrby",
    "+hkeys",
    "+hgetall",
    "+publish",
];
