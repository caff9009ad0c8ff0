//! The protocol checker: explores every interleaving of users, replies, faults, expiry
//! and restarts, up to a bound, with the library's own protocol core and the real Lua
//! scripts (see `tests/protocol/model.rs`), and checks the properties in every state.
//!
//! `./scripts/check-protocol.sh` runs it (`CHECK_DEPTH=n` runs deeper; `CHECK_CONFIG`,
//! `CHECK_MAX_STATES` and `CHECK_REPLAY='<config>:<path>'`: see `tests/protocol/checker.rs`). It also runs as
//! part of the test suite (`cargo test --test protocol_check`).

#[path = "protocol/checker.rs"]
mod checker;
#[path = "protocol/configs.rs"]
mod configs;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;
#[path = "protocol/model.rs"]
mod model;

use std::process::ExitCode;

use checker::Checker;
use model::{Lock, PROPERTIES, Scripts, World};

fn main() -> ExitCode {
    Checker::<Lock> {
        title: "protocol checker: real lua/ scripts + redis_locks_protocol",
        test: "protocol_check",
        // About 65 s in a release build on 2 cores; a debug build (plain `cargo test`)
        // explores less.
        release_depth: 13,
        debug_depth: 9,
        max_states: 3_000_000,
        properties: &PROPERTIES,
        configs: configs::checked(),
        must_reach: configs::must_reach_checked,
        world: || World::new(Scripts::real()),
    }
    .run()
}
