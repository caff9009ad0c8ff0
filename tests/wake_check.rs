//! The plain lock's wake-up checker: explores every interleaving of two clients' waiters,
//! holders that release or stop without releasing, dropped acquires, subscription
//! confirmations, message deliveries and the clock, up to a bound, with the real
//! `lua/acquire.lua` and `lua/release.lua` (the `"\1w"` mark and the conditional PUBLISH),
//! each client's one-waiter dispatch (`src/pubsub.rs`), and the library's own attempt,
//! release and waiting loop (`protocol::wait::Wait`, the reentrant policy); see
//! `tests/protocol/wakemodel.rs`. It checks in every state that no wake-up is lost without
//! a fault, that a sleep is bounded by the pttl, and that there are never two holders.
//!
//! `./scripts/check-protocol.sh` runs it; `CHECK_DEPTH=n`, `CHECK_CONFIG=<part of a name>`
//! and `CHECK_REPLAY='<config>:<path>'` work as for the other checkers (see
//! `tests/protocol/checker.rs`).

#[path = "protocol/checker.rs"]
mod checker;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;
#[path = "protocol/wakemodel.rs"]
mod wakemodel;

use std::process::ExitCode;

use checker::Checker;
use wakemodel::{PROPERTIES, Scripts, Wake, World};

/// The bound of a release build (`./scripts/check-protocol.sh`).
pub const RELEASE_DEPTH: usize = 22;

fn main() -> ExitCode {
    Checker::<Wake> {
        title: "plain-lock wake-up checker: real lua/acquire.lua + lua/release.lua + \
                protocol::wait + the hub's one-waiter dispatch",
        test: "wake_check",
        release_depth: RELEASE_DEPTH,
        debug_depth: 14,
        max_states: 3_000_000,
        properties: &PROPERTIES,
        configs: wakemodel::configs(),
        must_reach: wakemodel::must_reach,
        world: || World::new(Scripts::real()),
    }
    .run()
}
