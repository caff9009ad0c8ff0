//! The read-write lock's protocol checker: explores every interleaving of read and write
//! attempts, releases, renewals, lost replies and expiry, up to a bound, with the
//! library's own `protocol::rwlock` calls and decoders and the real `lua/rw_*.lua` and
//! `lua/sem_renew.lua` (see `tests/protocol/rwmodel.rs`), and checks the properties in
//! every state.
//!
//! The world includes `BUSY`/`LOADING` replies, restarts that lose all data and an
//! operator's force-unlock (`DEL` of the lock's keys), each in a configuration of its own;
//! and, in configurations of their own, fenced handles (tokens only go up), one explicit
//! owner on two clients, re-entry through guards (`joins`), the refused upgrade, watchdog
//! ticks racing their owner's own calls, late requests (timeouts, dropped acquires,
//! attempts that give up: strays that run before the client's next request, or never,
//! alone and with a restart, `BUSY` or a force-unlock), and guards' `extend` (the core's
//! `extension_call`, a `sem_renew.lua` of one hold to a longer lease). Hitting the state
//! bound fails the run.
//!
//! `./scripts/check-protocol.sh` runs it (`CHECK_DEPTH=n` runs deeper;
//! `CHECK_CONFIG=<part of a name>` runs only the configurations that match;
//! `CHECK_REPLAY='<config>:<path>'` replays a counterexample step by step).

#[path = "protocol/checker.rs"]
mod checker;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;
#[path = "protocol/rwmodel.rs"]
mod rwmodel;

use std::process::ExitCode;

use checker::Checker;
use rwmodel::{PROPERTIES, Rw, Scripts, World};

fn main() -> ExitCode {
    Checker::<Rw> {
        title: "read-write lock checker: real lua/rw_*.lua + sem_renew.lua",
        test: "rw_check",
        release_depth: 12,
        debug_depth: 9,
        max_states: 3_000_000,
        properties: &PROPERTIES,
        configs: rwmodel::configs(),
        must_reach: rwmodel::must_reach,
        world: || World::new(Scripts::real()),
    }
    .run()
}
