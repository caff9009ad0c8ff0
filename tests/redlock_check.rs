//! The RedLock checker: explores every interleaving of two clients' RedLock attempts and
//! releases over independent servers, with outages, restarts without persistence, clock
//! drift, lost and slow replies, late (stray) requests, `BUSY`/`LOADING` replies, an
//! operator's force-unlocks (`lua/force_unlock.lua`) and the clock, up to a bound, with
//! the library's own protocol core (per-server `AttemptOp`, `ReleaseFlow`,
//! `ReconcileRound`, `HoldState`, and `protocol::redlock::decide` and
//! `may_decide_early`) and the real Lua scripts (see
//! `tests/protocol/redmodel.rs`), and checks the properties in every state.
//!
//! `cargo test --release --test redlock_check`; `CHECK_DEPTH=n` runs deeper (or
//! shallower: then milestones are not required); `CHECK_CONFIG=<part of a name>` runs only
//! the configurations that match; `CHECK_REPLAY='<config>:<path>'` replays a
//! counterexample step by step (see `tests/protocol/checker.rs`).
//!
//! Diagnostics (such a run always fails, as it is not a check of the shipped code):
//! `CHECK_IGNORE='<property>,...'` lets paths go on past violations of those properties,
//! to see what lies beyond (also for `CHECK_REPLAY`).

#[path = "protocol/checker.rs"]
mod checker;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;
#[path = "protocol/redmodel.rs"]
mod redmodel;

use std::process::ExitCode;

use checker::Checker;
use redmodel::{PROPERTIES, Red, Scripts, World};

/// The bound of a release build, at which every configuration must reach its milestones.
const RELEASE_DEPTH: usize = 12;
/// The bound of a debug build (plain `cargo test`), which need not reach every milestone.
const DEBUG_DEPTH: usize = 8;
/// A safety net against a blow-up of the state space: a configuration that hits it was not
/// explored to its depth, and fails the run.
const MAX_STATES: usize = 2_000_000;

fn main() -> ExitCode {
    let ignore: Vec<String> = std::env::var("CHECK_IGNORE")
        .map(|list| list.split(',').map(|p| p.trim().to_owned()).collect())
        .unwrap_or_default();
    if !ignore.is_empty() {
        return diagnose(&ignore.iter().map(String::as_str).collect::<Vec<_>>());
    }
    Checker::<Red> {
        title: "RedLock checker: real lua/ scripts + redis_locks_protocol (redlock, attempt, release)",
        test: "redlock_check",
        release_depth: RELEASE_DEPTH,
        debug_depth: DEBUG_DEPTH,
        max_states: MAX_STATES,
        properties: &PROPERTIES,
        configs: redmodel::configs(),
        must_reach: redmodel::must_reach,
        world: || World::new(Scripts::real()),
    }
    .run()
}

/// `CHECK_IGNORE`: a path that violates one of `ignore` goes on (the checker's `ignore`
/// list), to see what else lies beyond; with `CHECK_REPLAY`, the replay goes on past them.
/// Such a run always fails.
fn diagnose(ignore: &[&str]) -> ExitCode {
    println!("IGNORING {ignore:?}: a diagnostic run, not a check (it fails)");
    let world = World::new(Scripts::real());
    let configs = redmodel::configs();
    let find = |name: &str| configs.iter().find(|c| c.name == name);
    if let Ok(spec) = std::env::var("CHECK_REPLAY") {
        let Some((config, path)) = spec.rsplit_once(':').and_then(|(name, path)| {
            let path = checker::parse_path(path).ok()?;
            Some((find(name)?, path))
        }) else {
            eprintln!("CHECK_REPLAY must be '<config name>:<steps>', of a configuration here");
            return ExitCode::FAILURE;
        };
        match checker::replay::<Red>(&world, config, &path, ignore) {
            Ok((trace, violation)) => {
                print!("{trace}");
                match violation {
                    Some((property, message)) => println!("violates {property}: {message}"),
                    None => println!("no violation on this path"),
                }
            }
            Err(err) => eprintln!("{err}"),
        }
        return ExitCode::FAILURE;
    }
    let env = |name: &str| std::env::var(name).ok();
    let depth =
        env("CHECK_DEPTH")
            .and_then(|d| d.parse().ok())
            .unwrap_or(if cfg!(debug_assertions) {
                DEBUG_DEPTH
            } else {
                RELEASE_DEPTH
            });
    let only = env("CHECK_CONFIG").unwrap_or_default();
    for config in configs.iter().filter(|c| c.name.contains(&only)) {
        let report = checker::explore::<Red>(&world, config, depth, MAX_STATES, ignore);
        println!(
            "  {}: {} states, depth {}{}",
            config.name,
            report.states,
            report.depth_reached,
            if report.truncated {
                ", NOT exhaustive"
            } else {
                ""
            }
        );
        if let Some((property, message, path)) = report.violation {
            println!("\nFAILED {property}: {message}");
            if let Ok((trace, _)) = checker::replay::<Red>(&world, config, &path, ignore) {
                print!("{trace}");
            }
            println!(
                "replay: CHECK_IGNORE='{}' CHECK_REPLAY='{}:{}' cargo test --release --test redlock_check\n",
                ignore.join(","),
                config.name,
                checker::path_text(&path)
            );
        }
    }
    ExitCode::FAILURE
}
