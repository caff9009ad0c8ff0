//! The least-privilege ACL user the security and soundness tests share.
#![allow(dead_code)]

/// The least-privilege ACL rule for a client with the default prefix, found by starting
/// from `-@all` and adding only what an operation was refused (checked by
/// `ACL LOG` staying empty through every operation the library offers). The commands
/// after `+evalsha` are the ones the Lua scripts call: Redis checks ACLs inside scripts
/// too. `+select` is only needed for a database other than 0, `+pubsub|numsub` only for
/// `Lock::waiting_clients`.
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
    // Called by the scripts:
    "+type",
    "+get",
    "+set",
    "+incr",
    "+del",
    "+pttl",
    "+pexpire",
    "+hget",
    "+hmget",
    "+hset",
    "+hsetnx",
    "+hincrby",
    "+hexists",
    "+time",
    "+hgetall",
    "+publish",
];

pub const ACL_USER: &str = "locker";
pub const ACL_PASS: &str = "locker-pw-7f3a";
