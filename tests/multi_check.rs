//! The multi-lock's protocol checker: explores every interleaving of clients taking
//! several reentrant locks all or none (each naming them in its own order), waiting,
//! giving up, giving back, releasing, lost replies and leases running out, up to a bound,
//! with the library's own `protocol::multi` decisions, its `AttemptOp` / `ReleaseFlow` /
//! `ReconcileRound` / `HoldState`, and the real `lua/*.lua` (see
//! `tests/protocol/multimodel.rs`), and checks the properties in every state.
//!
//! `CHECK_DEPTH=n` runs deeper; `CHECK_REPLAY='<config>:<path>'` replays a counterexample
//! step by step; `CHECK_SHOW=1` prints a shortest trace to each milestone reached;
//! `CHECK_ONLY=<text>` runs only the configurations whose name contains the text;
//! `CHECK_MAX_STATES=n` lowers the bound on states (a run that hits it fails).
//!
//! Besides users, waits, lost requests and replies and the clock, the configurations with
//! `busy` have Redis answer calls `BUSY`/`LOADING` (they do not run), and those with
//! `restarts` have a Redis server restart empty (see the module doc of the model for what
//! a restart excludes from "never two holders", and why).

#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;
#[path = "protocol/multimodel.rs"]
mod multimodel;

use std::process::ExitCode;
use std::time::Instant;

use multimodel::{MILESTONES, PROPERTIES, Scripts};

/// The default bound: steps per run. A debug build (plain `cargo test`) explores less.
const DEFAULT_DEPTH: usize = if cfg!(debug_assertions) { 12 } else { 22 };
/// From this bound on every configuration must reach its milestones.
const RELEASE_DEPTH: usize = 22;
/// A safety net against a blow-up of the state space: hitting it fails the run.
const MAX_STATES: usize = 3_000_000;

fn main() -> ExitCode {
    if let Ok(replay) = std::env::var("CHECK_REPLAY") {
        return replay_one(&replay);
    }
    let depth = std::env::var("CHECK_DEPTH")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(DEFAULT_DEPTH);
    let max_states = std::env::var("CHECK_MAX_STATES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(MAX_STATES);
    let started = Instant::now();
    let mut failed = false;
    let mut total = 0;
    let mut reasons: Vec<String> = Vec::new();
    println!("multi-lock checker: real lua/ scripts + redis_locks::protocol, depth {depth}");
    // CHECK_ONLY=<text>: only the configurations whose name contains it.
    let only = std::env::var("CHECK_ONLY").unwrap_or_default();
    for config in multimodel::configs() {
        if !config.name.contains(only.as_str()) {
            continue;
        }
        let t = Instant::now();
        let report = multimodel::explore(&config, Scripts::real(), depth, max_states);
        total += report.states;
        println!(
            "  {} (faults {}, busy {}, restarts {}): {} states, depth {}, {} ({:.1?})",
            config.name,
            config.faults,
            config.busy,
            config.restarts,
            report.states,
            report.depth_reached,
            if report.truncated {
                "NOT exhaustive: the state bound was hit"
            } else {
                "exhaustive to that depth"
            },
            t.elapsed()
        );
        // A bound hit means part of the space went unexplored: a failure, not a note.
        failed |= report.truncated;
        if report.truncated {
            reasons.push(format!("{}: the state bound was hit", config.name));
        }
        // Each configuration must reach its own milestones.
        for milestone in multimodel::must_reach(config.name) {
            let index = MILESTONES
                .iter()
                .position(|m| *m == milestone)
                .expect("a known milestone");
            let hit = report.milestones[index];
            println!(
                "    reached {milestone}: {}",
                if hit { "yes" } else { "NO" }
            );
            if !hit && depth >= RELEASE_DEPTH {
                failed = true;
                reasons.push(format!("{}: {milestone} not reached", config.name));
            }
        }
        let also: Vec<&str> = MILESTONES
            .iter()
            .zip(report.milestones)
            .filter(|(m, hit)| *hit && !multimodel::must_reach(config.name).contains(m))
            .map(|(m, _)| *m)
            .collect();
        if !also.is_empty() {
            println!("    also reached: {}", also.join("; "));
        }
        // CHECK_SHOW=1: a shortest trace to each milestone reached.
        if std::env::var_os("CHECK_SHOW").is_some() {
            for (milestone, path) in MILESTONES.iter().zip(&report.milestone_paths) {
                if let Some(path) = path {
                    println!("    trace to {milestone}:");
                    print!("{}", multimodel::replay(&config, Scripts::real(), path));
                }
            }
        }
        if let Some((property, message, path)) = report.violation {
            failed = true;
            reasons.push(format!("{}: {property} violated", config.name));
            println!("\nFAILED {property}: {message}");
            print!("{}", multimodel::replay(&config, Scripts::real(), &path));
            println!(
                "replay: CHECK_REPLAY='{}:{}' cargo test --release --test multi_check\n",
                config.name,
                multimodel::path_text(&path)
            );
        }
    }
    println!("states explored: {total}");
    for reason in &reasons {
        println!("FAILED: {reason}");
    }
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

fn replay_one(spec: &str) -> ExitCode {
    let Some((name, path)) = spec.rsplit_once(':') else {
        eprintln!("CHECK_REPLAY must be '<config name>:<steps>'");
        return ExitCode::FAILURE;
    };
    let Some(config) = multimodel::by_name(name) else {
        eprintln!("no configuration named {name:?}");
        return ExitCode::FAILURE;
    };
    let path = match multimodel::parse_path(path) {
        Ok(path) => path,
        Err(err) => {
            eprintln!("bad path: {err}");
            return ExitCode::FAILURE;
        }
    };
    let trace = multimodel::replay(&config, Scripts::real(), &path);
    print!("{trace}");
    if trace.contains("violates ") {
        ExitCode::FAILURE
    } else {
        println!("no violation on this path");
        ExitCode::SUCCESS
    }
}
