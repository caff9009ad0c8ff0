//! The count-down latch's protocol checker: explores every interleaving of closings,
//! count-downs (re-sent through lost replies and `BUSY`/`LOADING` by the library's own
//! `Resend`), deletes and restarts that lose the latch, up to a bound, with the library's
//! `protocol::latch` calls and decoders and the real `lua/latch_*.lua` (see
//! `tests/protocol/latchmodel.rs`), and checks the properties in every state. It prints,
//! per configuration, the states, whether it was exhaustive to the bound, and each
//! milestone; hitting the state bound fails, and so does a missed milestone at the default
//! release bound. `./scripts/check-protocol.sh` runs it; `CHECK_DEPTH=n` runs deeper,
//! `CHECK_CONFIG=<part of a name>` runs only the configurations that match and
//! `CHECK_REPLAY='<config>:<path>'` replays a counterexample step by step (see
//! `tests/protocol/checker.rs`).

#[path = "protocol/checker.rs"]
mod checker;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/latchmodel.rs"]
mod latchmodel;
#[path = "protocol/lua.rs"]
mod lua;

use std::process::ExitCode;

use checker::Checker;
use latchmodel::{Driver, Latch, PROPERTIES, Scripts, World};

fn main() -> ExitCode {
    Checker::<Latch> {
        title: "count-down latch checker: real lua/latch_*.lua + redis_locks_protocol",
        test: "latch_check",
        release_depth: 18,
        debug_depth: 12,
        max_states: 3_000_000,
        properties: &PROPERTIES,
        configs: latchmodel::configs(),
        must_reach: latchmodel::must_reach,
        world: || World::new(Scripts::real(), Driver::Library),
    }
    .run()
}
