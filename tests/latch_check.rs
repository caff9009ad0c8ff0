//! The count-down latch's protocol checker: explores every interleaving of closings,
//! count-downs (re-sent through lost replies and `BUSY`/`LOADING` by the library's own
//! `Resend`), deletes and restarts that lose the latch, up to a bound, with the library's
//! `protocol::latch` calls and decoders and the real `lua/latch_*.lua` (see
//! `tests/protocol/latchmodel.rs`), and checks the properties in every state. It prints,
//! per configuration, the states, whether it was exhaustive to the bound, and each
//! required milestone; hitting the state bound fails, and so does a missed milestone at
//! the default release bound. `./scripts/check-protocol.sh` runs it; `CHECK_DEPTH=n` runs
//! deeper.

#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/latchmodel.rs"]
mod latchmodel;
#[path = "protocol/lua.rs"]
mod lua;

use std::process::ExitCode;
use std::time::Instant;

use latchmodel::{MILESTONES, PROPERTIES, Scripts};

/// The default bound: steps per run. A debug build (plain `cargo test`) explores less.
const DEFAULT_DEPTH: usize = if cfg!(debug_assertions) { 12 } else { 18 };
/// From this bound on every configuration must reach its milestones.
const RELEASE_DEPTH: usize = 18;
const MAX_STATES: usize = 3_000_000;

fn main() -> ExitCode {
    let depth = std::env::var("CHECK_DEPTH")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(DEFAULT_DEPTH);
    let started = Instant::now();
    let mut failed = false;
    let mut total = 0;
    println!(
        "count-down latch checker: real lua/latch_*.lua + redis_locks::protocol, depth {depth}"
    );
    for config in latchmodel::configs() {
        let t = Instant::now();
        let report = latchmodel::explore(&config, Scripts::real(), depth, MAX_STATES);
        total += report.states;
        println!(
            "  {}: {} states, depth {}, {} ({:.1?})",
            config.name,
            report.states,
            report.depth_reached,
            if report.truncated {
                "NOT exhaustive: the state bound was hit"
            } else {
                "exhaustive to that depth"
            },
            t.elapsed()
        );
        failed |= report.truncated;
        for milestone in latchmodel::must_reach(config.name) {
            let index = MILESTONES
                .iter()
                .position(|m| *m == milestone)
                .expect("a known milestone");
            let hit = report.milestones[index];
            println!(
                "    reached {milestone}: {}",
                if hit { "yes" } else { "NO" }
            );
            failed |= !hit && depth >= RELEASE_DEPTH;
        }
        if let Some((property, message, path)) = report.violation {
            failed = true;
            println!("\nFAILED {property}: {message}");
            print!("{}", latchmodel::replay(&config, Scripts::real(), &path));
        }
    }
    println!("states explored: {total}");
    for property in PROPERTIES {
        println!(
            "  {property}: {}",
            if failed { "see above" } else { "holds" }
        );
    }
    println!("time: {:.1?}", started.elapsed());
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
