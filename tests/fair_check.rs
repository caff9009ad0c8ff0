//! The fair lock's protocol checker: explores every interleaving of waiting and single
//! attempts, asks again, give-ups, deaths, releases, renewals, lost replies, expiry,
//! `BUSY`/`LOADING` replies, restarts that lose all data, force-unlocks and late requests
//! (timeouts, dropped acquires, strays that run before the client's next request or
//! never), up to a bound, with the library's own `protocol::fair` calls and decoders and
//! the real `lua/fair_*.lua` and `lua/sem_renew.lua` (see `tests/protocol/fairmodel.rs`),
//! and checks the properties in every state.
//!
//! `CHECK_DEPTH=n` runs deeper; `CHECK_CONFIG=<part of a name>` runs only the matching
//! configurations; `CHECK_REPLAY='<config>:<path>'` replays a counterexample step by step;

#[path = "protocol/fairmodel.rs"]
mod fairmodel;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;

use std::process::ExitCode;
use std::time::Instant;

use fairmodel::{
    Config, MILESTONES, Op, PROPERTIES, Scripts, State, World, keys, members, show, t,
};

/// The default bound: steps per run. A debug build (plain `cargo test`) explores less, and
/// does not hold the configurations to their milestones.
const DEFAULT_DEPTH: usize = if cfg!(debug_assertions) {
    8
} else {
    fairmodel::DEFAULT_DEPTH
};
/// A safety net against a blow-up of the state space: a run that hits it fails.
const MAX_STATES: usize = 3_000_000;

fn main() -> ExitCode {
    if let Ok(replay) = std::env::var("CHECK_REPLAY") {
        return replay_one(&replay);
    }
    let depth = std::env::var("CHECK_DEPTH")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(DEFAULT_DEPTH);
    // Below the release bound the milestones may lie deeper than the search.
    let hold_to_milestones = depth >= fairmodel::DEFAULT_DEPTH;
    let started = Instant::now();
    let mut total = 0;
    let mut failed = false;
    let mut violated = Vec::new();
    println!("fair lock checker: real lua/fair_*.lua + sem_renew.lua, depth {depth}");
    let mut configs = fairmodel::configs();
    if let Ok(only) = std::env::var("CHECK_CONFIG") {
        configs.retain(|config| config.name.contains(&only));
    }
    for config in configs {
        let t = Instant::now();
        let report = fairmodel::explore(&config, Scripts::real(), depth, MAX_STATES);
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
        for (milestone, hit) in MILESTONES.iter().zip(report.milestones) {
            let required = config.required.contains(milestone);
            let shown = match (hit, required) {
                (true, _) => "yes",
                (false, true) => "NO (required)",
                (false, false) => "no (not required here)",
            };
            println!("    reached {milestone}: {shown}");
            failed |= required && !hit && hold_to_milestones;
        }
        if let Some((property, message, path)) = report.violation {
            failed = true;
            violated.push(property);
            println!("\nFAILED {property}: {message}");
            match replay(&config, &path) {
                Ok((trace, _)) => print!("{trace}"),
                Err(err) => println!("(trace unavailable: {err})"),
            }
            println!(
                "replay: CHECK_REPLAY='{}:{}' cargo test --release --test fair_check\n",
                config.name,
                fairmodel::path_text(&path)
            );
        }
    }
    println!("states explored: {total}");
    for property in PROPERTIES {
        println!(
            "  {property}: {}",
            if violated.contains(&property) {
                "VIOLATED (see above)"
            } else {
                "holds"
            }
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
    let Some(config) = config_by_name(name) else {
        eprintln!("no configuration named {name:?} here");
        return ExitCode::FAILURE;
    };
    let path = match parse_path(path) {
        Ok(path) => path,
        Err(err) => {
            eprintln!("bad path: {err}");
            return ExitCode::FAILURE;
        }
    };
    match replay(&config, &path) {
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

fn config_by_name(name: &str) -> Option<Config> {
    fairmodel::configs().into_iter().find(|c| c.name == name)
}

fn parse_path(text: &str) -> Result<Vec<u8>, String> {
    text.split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.trim().parse::<u8>().map_err(|e| format!("{s:?}: {e}")))
        .collect()
}

/// A violated property and what happened.
type Violation = (&'static str, String);

/// Replays a path: the numbered trace, and the violation the last step produced.
fn replay(config: &Config, path: &[u8]) -> Result<(String, Option<Violation>), String> {
    let world = World::new(Scripts::real());
    let mut state = State::initial(config);
    let mut out = format!("   0. start: {}\n", describe(&state));
    for (n, &index) in path.iter().enumerate() {
        let steps = state.steps();
        let step = steps
            .get(index as usize)
            .cloned()
            .ok_or_else(|| format!("step {n}: index {index}, {} enabled", steps.len()))?;
        let effects = state.apply(&step, &world);
        out += &format!("  {:>2}. {step:?}\n      -> {}\n", n + 1, describe(&state));
        if effects.violation.is_some() {
            return Ok((out, effects.violation));
        }
    }
    Ok((out, None))
}

/// One line: the clock, Redis's holds and queue, and each client's beliefs, place and
/// call in flight.
fn describe(state: &State) -> String {
    let keys = keys();
    let now = state.now;
    let list = |key: &str, per_ms: f64| {
        let items = members(&state.ks, key, now).into_iter();
        let items: Vec<String> = items
            .map(|(m, s)| format!("{}@{}", show(&m), t((s / per_ms) as u64)))
            .collect();
        items.join(" ")
    };
    let mut out = format!(
        "t={} redis: holds[{}] queue[{}] alive[{}]",
        t(now),
        list(&keys.holds, 1.0),
        list(&keys.queue, 1000.0),
        list(&keys.alive, 1.0)
    );
    if state.busy_next {
        out += " (the next call gets BUSY)";
    }
    if state.timeout_next {
        out += " (the next call times out)";
    }
    if !state.doomed.is_empty() {
        let doomed: Vec<String> = state.doomed.iter().map(|h| show(h.as_bytes())).collect();
        out += &format!(" wiped[{}]", doomed.join(" "));
    }
    for (c, client) in state.clients.iter().enumerate() {
        out += &format!("; c{c}({}):", client.owner);
        for guard in &client.guards {
            let believed = guard.lost().is_none() && now < guard.deadline();
            let note = if believed { "" } else { " (not believed)" };
            let hold = show(guard.hold().as_bytes());
            out += &format!(" {hold} until {}{note}", t(guard.deadline()));
        }
        if let Some(waiting) = &client.waiting {
            let how = if waiting.dead { "dead" } else { "waiting" };
            out += &format!(" {how} {}", show(waiting.request.hold.as_bytes()));
        }
        if let Some(p) = &client.place {
            out += &format!(" place(arrived {}, asked {})", t(p.arrival), t(p.last));
        }
        if let Some(flight) = &client.flight {
            let what = match &flight.op {
                Op::Acquire { request, .. } => {
                    let how = if request.waits { "acquire" } else { "try" };
                    format!("{how} {}", show(request.hold.as_bytes()))
                }
                Op::Release { hold, leaving, .. } => {
                    let how = if *leaving { "leave" } else { "release" };
                    format!("{how} {}", show(hold.as_bytes()))
                }
                Op::Renew { items, .. } => format!("renew {} holds", items.len()),
            };
            let stage = match (&flight.reply, &flight.queued) {
                (_, Some(_)) => "sent behind strays".to_string(),
                (None, None) => "sleeping".to_string(),
                (Some(reply), None) => format!("ran -> {reply:?}"),
            };
            out += &format!(" [{what} {stage}]");
        }
        for stray in &client.strays {
            let what = match &stray.op {
                Op::Acquire { request, .. } => format!("acquire {}", show(request.hold.as_bytes())),
                Op::Release { hold, .. } => format!("release {}", show(hold.as_bytes())),
                Op::Renew { items, .. } => format!("renew {} holds", items.len()),
            };
            let note = if stray.given_up { ", given up" } else { "" };
            out += &format!(" stray({what}{note})");
        }
    }
    out
}
