//! The fair lock's protocol checker: explores every interleaving of waiting and single
//! attempts, asks again, give-ups, deaths, releases, renewals, lost replies, expiry,
//! `BUSY`/`LOADING` replies, restarts that lose all data, force-unlocks and late requests
//! (timeouts, dropped acquires, strays that run before the client's next request or
//! never), and guards' `extend` (the core's `extension_call`, a `sem_renew.lua` of one hold
//! to a longer lease), up to a bound, with the library's own `protocol::fair` calls and decoders and
//! the real `lua/fair_*.lua` and `lua/sem_renew.lua` (see `tests/protocol/fairmodel.rs`),
//! and checks the properties in every state.
//!
//! `CHECK_DEPTH=n` runs deeper; `CHECK_CONFIG=<part of a name>` runs only the matching
//! configurations; `CHECK_REPLAY='<config>:<path>'` replays a counterexample step by step.

#[path = "protocol/checker.rs"]
mod checker;
#[path = "protocol/fairmodel.rs"]
mod fairmodel;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;

use std::process::ExitCode;

use checker::Checker;
use fairmodel::{Fair, PROPERTIES, Scripts, World};

fn main() -> ExitCode {
    Checker::<Fair> {
        title: "fair lock checker: real lua/fair_*.lua + sem_renew.lua",
        test: "fair_check",
        release_depth: fairmodel::DEFAULT_DEPTH,
        debug_depth: 8,
        max_states: 3_000_000,
        properties: &PROPERTIES,
        configs: fairmodel::configs(),
        must_reach: fairmodel::must_reach,
        world: || World::new(Scripts::real()),
    }
    .run()
}
