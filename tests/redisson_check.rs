//! The protocol checker of the lock kept in Redisson's RLock layout: explores every
//! interleaving of waiting and single attempts, re-entries (on one handle and across two
//! handles of one explicit owner), give-ups, releases, renewals, lost replies, expiry,
//! `BUSY`/`LOADING` replies, restarts that lose all data, a Redisson peer's force-unlock
//! and late requests (timeouts, dropped acquires, strays that run before the client's next
//! request or never), up to a bound, with the library's own `protocol::redisson` calls and
//! decoders and the real `lua/redisson_*.lua` (see `tests/protocol/redissonmodel.rs`), and
//! checks the properties in every state.
//!
//! `CHECK_DEPTH=n` runs deeper; `CHECK_CONFIG=<part of a name>` runs only the matching
//! configurations; `CHECK_REPLAY='<config>:<path>'` replays a counterexample step by step.

#[path = "protocol/checker.rs"]
mod checker;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;
#[path = "protocol/redissonmodel.rs"]
mod redissonmodel;

use std::process::ExitCode;

use checker::Checker;
use redissonmodel::{PROPERTIES, Redisson, Scripts, World};

fn main() -> ExitCode {
    Checker::<Redisson> {
        title: "Redisson-layout lock checker: real lua/redisson_*.lua",
        test: "redisson_check",
        release_depth: redissonmodel::DEFAULT_DEPTH,
        debug_depth: 8,
        max_states: 3_000_000,
        properties: &PROPERTIES,
        configs: redissonmodel::configs(),
        must_reach: redissonmodel::must_reach,
        world: || World::new(Scripts::real()),
    }
    .run()
}
