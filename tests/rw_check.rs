//! The read-write lock's protocol checker: explores every interleaving of read and write
//! attempts, releases, renewals, lost replies and expiry, up to a bound, with the
//! library's own `protocol::rwlock` calls and decoders and the real `lua/rw_*.lua` and
//! `lua/sem_renew.lua` (see `tests/protocol/rwmodel.rs`), and checks the properties in
//! every state.
//!
//! The world includes `BUSY`/`LOADING` replies, restarts that lose all data and an
//! operator's force-unlock (`DEL` of the lock's keys), each in a configuration of its own;
//! and, in configurations of their own, fenced handles (tokens only go up), one explicit
//! owner on two clients, re-entry through guards (`joins`), the refused upgrade, and
//! watchdog ticks racing their owner's own calls. Hitting the state bound fails the run.
//!
//! `./scripts/check-protocol.sh` runs it (`CHECK_DEPTH=n` runs deeper;
//! `CHECK_CONFIG=<part of a name>` runs only the configurations that match;
//! `CHECK_REPLAY='<config>:<path>'` replays a counterexample step by step).

#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;
#[path = "protocol/rwmodel.rs"]
mod rwmodel;

use std::process::ExitCode;
use std::time::Instant;

use rwmodel::{MILESTONES, PROPERTIES, Scripts};

/// The default bound: steps per run. A debug build (plain `cargo test`) explores less.
const DEFAULT_DEPTH: usize = if cfg!(debug_assertions) { 9 } else { 12 };
/// From this bound on (a release build) every configuration must reach its milestones.
const RELEASE_DEPTH: usize = 12;
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
    println!("read-write lock checker: real lua/rw_*.lua + sem_renew.lua, depth {depth}");
    let mut configs = rwmodel::configs();
    if let Ok(only) = std::env::var("CHECK_CONFIG") {
        configs.retain(|config| config.name.contains(&only));
    }
    let all = configs.len() == rwmodel::configs().len();
    for config in configs {
        let t = Instant::now();
        let report = rwmodel::explore(&config, Scripts::real(), depth, MAX_STATES);
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
        // A bound hit fails the run; each configuration must reach its own milestones.
        failed |= report.truncated;
        let required = rwmodel::must_reach(config.name);
        for (milestone, hit) in MILESTONES.iter().zip(report.milestones) {
            let required = required.contains(milestone);
            let shown = match (hit, required) {
                (true, _) => "yes",
                (false, true) => "NO (required)",
                (false, false) => "no (not required here)",
            };
            println!("    reached {milestone}: {shown}");
            failed |= required && !hit && depth >= RELEASE_DEPTH;
        }
        if let Some((property, message, path)) = report.violation {
            failed = true;
            println!("\nFAILED {property}: {message}");
            match rwmodel::replay(&config, Scripts::real(), &path) {
                Ok((trace, _)) => print!("{trace}"),
                Err(err) => println!("(trace unavailable: {err})"),
            }
            println!(
                "replay: CHECK_REPLAY='{}:{}' cargo test --release --test rw_check\n",
                config.name,
                rwmodel::path_text(&path)
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
    for (milestone, hit) in MILESTONES.iter().zip(reached) {
        println!(
            "  reached {milestone} (any configuration): {}",
            if hit { "yes" } else { "NO" }
        );
        failed |= !hit && all;
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
    let Some(config) = rwmodel::config_by_name(name) else {
        eprintln!("no configuration named {name:?} here");
        return ExitCode::FAILURE;
    };
    let path = match rwmodel::parse_path(path) {
        Ok(path) => path,
        Err(err) => {
            eprintln!("bad path: {err}");
            return ExitCode::FAILURE;
        }
    };
    match rwmodel::replay(&config, Scripts::real(), &path) {
        Ok((trace, violation)) => {
            print!("{trace}");
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
