//! The RedLock checker: explores every interleaving of two clients' RedLock attempts and
//! releases over independent servers, with outages, restarts without persistence, clock
//! drift, lost and slow replies and the clock, up to a bound, with the library's own
//! protocol core (per-server `AttemptOp`, `ReleaseFlow`, `ReconcileRound`, `HoldState`,
//! and `protocol::redlock::decide`) and the real Lua scripts (see
//! `tests/protocol/redmodel.rs`), and checks the properties in every state.
//!
//! `cargo test --release --test redlock_check`; `CHECK_DEPTH=n` runs deeper (or
//! shallower: then milestones are not required); `CHECK_REPLAY='<config>:<path>'`
//! replays a counterexample step by step.
//!
//! Diagnostics (such a run always fails, as it is not a check of the shipped code):
//! `CHECK_IGNORE='<property>,...'` lets paths go on past violations of those properties,
//! to see what lies beyond (also for `CHECK_REPLAY`).

#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;
#[path = "protocol/redmodel.rs"]
mod redmodel;

use std::process::ExitCode;
use std::time::Instant;

use redmodel::{MILESTONES, PROPERTIES, Scripts};

/// The default bound: steps per run. A debug build (plain `cargo test`) explores less, and
/// then need not reach every milestone.
pub const DEFAULT_DEPTH: usize = if cfg!(debug_assertions) {
    8
} else {
    RELEASE_DEPTH
};
/// The bound of a release build, at which every configuration must reach its milestones.
pub const RELEASE_DEPTH: usize = 12;
/// A safety net against a blow-up of the state space: a configuration that hits it was not
/// explored to its depth, and fails the run.
const MAX_STATES: usize = 2_000_000;

fn main() -> ExitCode {
    if let Ok(replay) = std::env::var("CHECK_REPLAY") {
        return replay_one(&replay);
    }
    let depth = std::env::var("CHECK_DEPTH")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(DEFAULT_DEPTH);
    // Milestones are a claim about the release bound; a shallower run only checks safety.
    let milestones_count = depth >= RELEASE_DEPTH;
    // Diagnostics only: `CHECK_IGNORE='<property>,...'` lets a path that violates one of
    // these go on (it is cut there), to see what else lies beyond. Such a run always fails.
    let ignore: Vec<String> = std::env::var("CHECK_IGNORE")
        .map(|list| list.split(',').map(|p| p.trim().to_owned()).collect())
        .unwrap_or_default();
    let ignore: Vec<&str> = ignore.iter().map(String::as_str).collect();
    if !ignore.is_empty() {
        println!("IGNORING {ignore:?}: a diagnostic run, not a check (it fails)");
    }
    let started = Instant::now();
    let mut total = 0;
    let mut violated = Vec::new();
    let mut failed = false;
    println!(
        "RedLock checker: real lua/ scripts + redis_locks::protocol (redlock, attempt, release), depth {depth}"
    );
    for config in redmodel::configs() {
        let t = Instant::now();
        let report = redmodel::explore(&config, Scripts::real(), depth, MAX_STATES, &ignore);
        total += report.states;
        println!(
            "  {}: {} states, depth {}, {} ({:.1?})",
            config.name,
            report.states,
            report.depth_reached,
            if report.truncated {
                "NOT exhaustive (state bound hit)"
            } else {
                "exhaustive to that depth"
            },
            t.elapsed()
        );
        failed |= report.truncated;
        for (milestone, hit) in MILESTONES.iter().zip(report.milestones) {
            let required = config.must_reach.contains(milestone);
            let verdict = match (hit, required) {
                (true, _) => "yes",
                (false, false) => "no (not required here)",
                (false, true) => {
                    failed |= milestones_count && report.violation.is_none();
                    "NO"
                }
            };
            println!("    reached {milestone}: {verdict}");
        }
        if let Some((property, message, path)) = report.violation {
            failed = true;
            violated.push(property);
            println!("\nFAILED {property}: {message}");
            match redmodel::replay(&config, Scripts::real(), &path, &ignore) {
                Ok((trace, _)) => print!("{}", redmodel::format_trace(&config, &trace)),
                Err(err) => println!("(trace unavailable: {err})"),
            }
            println!(
                "replay: CHECK_REPLAY='{}:{}' cargo test --release --test redlock_check\n",
                config.name,
                redmodel::path_text(&path)
            );
        }
    }
    println!("states explored: {total}");
    for property in PROPERTIES {
        println!(
            "  {property}: {}",
            if violated.contains(&property) {
                "VIOLATED (see above)".to_owned()
            } else if violated.is_empty() {
                "holds".to_owned()
            } else {
                format!(
                    "not violated, but {} configuration(s) stopped at a violation, short of the bound",
                    violated.len()
                )
            }
        );
    }
    println!("time: {:.1?}", started.elapsed());
    if failed || !ignore.is_empty() {
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
    let Some(config) = redmodel::configs().into_iter().find(|c| c.name == name) else {
        eprintln!("no configuration named {name:?}");
        return ExitCode::FAILURE;
    };
    let ignore: Vec<String> = std::env::var("CHECK_IGNORE")
        .map(|list| list.split(',').map(|p| p.trim().to_owned()).collect())
        .unwrap_or_default();
    let ignore: Vec<&str> = ignore.iter().map(String::as_str).collect();
    let path = match redmodel::parse_path(path) {
        Ok(path) => path,
        Err(err) => {
            eprintln!("bad path: {err}");
            return ExitCode::FAILURE;
        }
    };
    match redmodel::replay(&config, Scripts::real(), &path, &ignore) {
        Ok((trace, violation)) => {
            print!("{}", redmodel::format_trace(&config, &trace));
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
