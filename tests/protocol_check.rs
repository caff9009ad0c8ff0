//! The protocol checker: explores every interleaving of users, replies, faults, expiry
//! and restarts, up to a bound, with the library's own protocol core and the real Lua
//! scripts (see `tests/protocol/model.rs`), and checks the properties in every state.
//!
//! `./scripts/check-protocol.sh` runs it (`CHECK_DEPTH=n` runs deeper;
//! `CHECK_REPLAY='<config>:<path>'` replays a counterexample step by step). It also runs as
//! part of the test suite (`cargo test --test protocol_check`).

#[path = "protocol/configs.rs"]
mod configs;
#[path = "protocol/explore.rs"]
mod explore;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;
#[path = "protocol/model.rs"]
mod model;

use std::process::ExitCode;
use std::time::Instant;

use model::{MILESTONES, PROPERTIES, Scripts, State};

/// The default bound: steps per run (about 40 s in a release build on 2 cores). A debug
/// build (plain `cargo test`) explores less; `./scripts/check-protocol.sh` runs the
/// release build at this bound.
const DEFAULT_DEPTH: usize = if cfg!(debug_assertions) { 9 } else { 13 };
/// The bound of `./scripts/check-protocol.sh` (a release build): from it on, every
/// configuration must reach its milestones.
const RELEASE_DEPTH: usize = 13;
/// A safety net against a blow-up of the state space.
const MAX_STATES: usize = 3_000_000;

fn main() -> ExitCode {
    if let Ok(replay) = std::env::var("CHECK_REPLAY") {
        return replay_one(&replay);
    }
    let depth = std::env::var("CHECK_DEPTH")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(DEFAULT_DEPTH);
    let started = Instant::now();
    let mut total = 0;
    let mut failed = false;
    let mut reached = [false; MILESTONES.len()];
    println!("protocol checker: real lua/ scripts + redis_locks::protocol, depth {depth}");
    for config in all_configs() {
        let t = Instant::now();
        let report = explore::explore(&config, Scripts::real(), depth, MAX_STATES);
        total += report.states;
        for (r, m) in reached.iter_mut().zip(report.milestones) {
            *r |= m;
        }
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
        // A bound hit means part of the space went unexplored: that is a failure, not a
        // note (no configuration is marked as sampled).
        failed |= report.truncated;
        // Each configuration must reach its own milestones, so that none of them is
        // vacuous; a milestone reached in another configuration does not count.
        for milestone in must_reach(config.name) {
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
            print_trace(&config, &path);
            println!(
                "replay: CHECK_REPLAY='{}:{}' ./scripts/check-protocol.sh\n",
                config.name,
                explore::path_text(&path)
            );
        }
    }
    println!("states explored: {total}");
    for property in PROPERTIES {
        println!(
            "  {property}: {}",
            if failed { "see above" } else { "holds" }
        );
    }
    for (i, (milestone, hit)) in MILESTONES.iter().zip(reached).enumerate() {
        println!(
            "  reached {milestone} (any configuration): {}",
            if hit { "yes" } else { "NO" }
        );
        // The overlapping ticks' milestones lie deeper than a debug build's bound.
        failed |= !hit && (i < model::FIRST_OVERLAP_MILESTONE || depth >= RELEASE_DEPTH);
    }
    println!("time: {:.1?}", started.elapsed());
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The default configurations, and the one in which a client's watchdog ticks overlap
/// (`model::overlapping_ticks`; kept out of `configs::all`, which the teeth explore as
/// "the other configurations": one tooth asserts that only this one catches its defect).
fn all_configs() -> Vec<model::Config> {
    let mut all = configs::all();
    all.push(model::overlapping_ticks());
    all
}

fn must_reach(name: &str) -> Vec<&'static str> {
    if name == model::OVERLAPPING_TICKS {
        model::overlapping_ticks_must_reach()
    } else {
        configs::must_reach(name)
    }
}

fn print_trace(config: &model::Config, path: &[u8]) {
    match explore::replay(config, Scripts::real(), path) {
        Ok((trace, _)) => {
            let initial = State::initial(config).describe();
            print!("{}", explore::format_trace(&initial, &trace));
        }
        Err(err) => println!("(trace unavailable: {err})"),
    }
}

fn replay_one(spec: &str) -> ExitCode {
    let Some((name, path)) = spec.rsplit_once(':') else {
        eprintln!("CHECK_REPLAY must be '<config name>:<steps>'");
        return ExitCode::FAILURE;
    };
    let Some(config) = all_configs().into_iter().find(|c| c.name == name) else {
        eprintln!("no configuration named {name:?}");
        return ExitCode::FAILURE;
    };
    let path = match explore::parse_path(path) {
        Ok(path) => path,
        Err(err) => {
            eprintln!("bad path: {err}");
            return ExitCode::FAILURE;
        }
    };
    match explore::replay(&config, Scripts::real(), &path) {
        Ok((trace, violation)) => {
            print!(
                "{}",
                explore::format_trace(&State::initial(&config).describe(), &trace)
            );
            match violation {
                Some((property, message)) => {
                    println!("violates {property}: {message}");
                    ExitCode::FAILURE
                }
                None => {
                    println!("no violation on this path");
                    ExitCode::SUCCESS
                }
            }
        }
        Err(err) => {
            eprintln!("{err}");
            ExitCode::FAILURE
        }
    }
}
