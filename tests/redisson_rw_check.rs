//! The protocol checker of the read-write lock kept in Redisson's RReadWriteLock layout:
//! explores every interleaving of reads and writes (waiting and single attempts),
//! re-entries (on one handle and across two handles of one explicit owner), downgrades,
//! refused upgrades, give-ups, releases, renewals, lost replies, expiry, `BUSY` replies,
//! restarts that lose all data, a Redisson peer's force-unlock and late requests
//! (timeouts, dropped acquires, strays that run before the client's next request or
//! never), up to a bound, with the library's own `protocol::redisson` calls and decoders
//! and the real `lua/redisson_rw_*.lua` and `lua/redisson_renew.lua` (see
//! `tests/protocol/redissonrwmodel.rs`), and checks the properties in every state.
//!
//! `CHECK_DEPTH=n` runs deeper; `CHECK_CONFIG=<part of a name>` runs only the matching
//! configurations; `CHECK_REPLAY='<config>:<path>'` replays a counterexample step by step.

#[path = "protocol/checker.rs"]
mod checker;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;
#[path = "protocol/redissonrwmodel.rs"]
mod redissonrwmodel;

use std::process::ExitCode;

use checker::Checker;
use redissonrwmodel::{PROPERTIES, RedissonRw, Scripts, World};

fn main() -> ExitCode {
    Checker::<RedissonRw> {
        title: "Redisson-layout read-write lock checker: real lua/redisson_rw_*.lua",
        test: "redisson_rw_check",
        release_depth: redissonrwmodel::DEFAULT_DEPTH,
        debug_depth: 7,
        max_states: 3_000_000,
        properties: &PROPERTIES,
        configs: redissonrwmodel::configs(),
        must_reach: redissonrwmodel::must_reach,
        world: || World::new(Scripts::real()),
    }
    .run()
}
