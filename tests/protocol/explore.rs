//! A small breadth-first explorer: every interleaving of the model's steps up to a depth,
//! with states deduplicated by a 64-bit fingerprint.
//!
//! Why not `stateright`: the model's state holds a keyspace that the real Lua scripts
//! mutate through an embedded interpreter that cannot be shared across threads, the
//! properties need the step's effects (what a reply reported) and not only the state, and
//! a counterexample must replay step by step with the library's own types. Forty lines of
//! BFS do that with nothing to adapt.
#![allow(dead_code)]

use std::collections::{HashSet, hash_map::DefaultHasher};
use std::hash::{Hash, Hasher};

use crate::model::{Config, MILESTONES, Scripts, State, Step, World};

/// What one exploration found.
pub struct Report {
    pub config: Config,
    pub states: usize,
    pub depth_reached: usize,
    pub milestones: [bool; MILESTONES.len()],
    /// The first violation: property, message, and the path (step indices) to it.
    pub violation: Option<(&'static str, String, Vec<u8>)>,
    /// Whether the bound on states stopped the search before the depth did.
    pub truncated: bool,
}

fn fingerprint(state: &State) -> u64 {
    let mut hasher = DefaultHasher::new();
    state.hash(&mut hasher);
    hasher.finish()
}

/// Explores `config` to `depth` steps (at most `max_states` states).
pub fn explore(config: &Config, scripts: Scripts, depth: usize, max_states: usize) -> Report {
    let world = World::new(scripts);
    let initial = State::initial(config);
    let mut seen: HashSet<u64> = HashSet::new();
    seen.insert(fingerprint(&initial));
    let mut frontier: Vec<(State, Vec<u8>)> = vec![(initial, Vec::new())];
    let mut report = Report {
        config: config.clone(),
        states: 1,
        depth_reached: 0,
        milestones: [false; MILESTONES.len()],
        violation: None,
        truncated: false,
    };
    for level in 0..depth {
        let mut next = Vec::new();
        for (state, path) in &frontier {
            let steps = state.steps();
            for (index, step) in steps.iter().enumerate() {
                let mut successor = state.clone();
                let effects = successor.apply(step, &world);
                for milestone in effects.milestones {
                    report.milestones[milestone] = true;
                }
                let mut successor_path = path.clone();
                successor_path.push(index as u8);
                if let Some((property, message)) = effects.violation {
                    report.violation = Some((property, message, successor_path));
                    report.depth_reached = level + 1;
                    return report;
                }
                if seen.insert(fingerprint(&successor)) {
                    report.states += 1;
                    if report.states >= max_states {
                        report.truncated = true;
                    }
                    next.push((successor, successor_path));
                }
            }
            if report.truncated {
                break;
            }
        }
        if next.is_empty() {
            break;
        }
        report.depth_reached = level + 1;
        frontier = next;
        if report.truncated {
            break;
        }
    }
    report
}

/// A replayed path: each step with the state after it, and the violation it ended in.
pub type Replayed = (Vec<(Step, String)>, Option<(&'static str, String)>);

/// Replays a path, returning each step with the state after it, and the violation (if
/// any) that the last step produced.
pub fn replay(config: &Config, scripts: Scripts, path: &[u8]) -> Result<Replayed, String> {
    let world = World::new(scripts);
    let mut state = State::initial(config);
    let mut trace = Vec::new();
    let mut violation = None;
    for (n, &index) in path.iter().enumerate() {
        let steps = state.steps();
        let step = steps.get(index as usize).cloned().ok_or_else(|| {
            format!(
                "step {n}: index {index} but only {} steps enabled",
                steps.len()
            )
        })?;
        let effects = state.apply(&step, &world);
        trace.push((step, state.describe()));
        if effects.violation.is_some() {
            violation = effects.violation;
            break;
        }
    }
    Ok((trace, violation))
}

/// A numbered, readable trace.
pub fn format_trace(initial: &str, trace: &[(Step, String)]) -> String {
    let mut out = format!("   0. start: {initial}\n");
    for (n, (step, after)) in trace.iter().enumerate() {
        out.push_str(&format!("  {:>2}. {step:?}\n      -> {after}\n", n + 1));
    }
    out
}

/// `2,0,13` <-> path.
pub fn path_text(path: &[u8]) -> String {
    path.iter().map(u8::to_string).collect::<Vec<_>>().join(",")
}

pub fn parse_path(text: &str) -> Result<Vec<u8>, String> {
    text.split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.trim().parse::<u8>().map_err(|e| format!("{s:?}: {e}")))
        .collect()
}

/// Replays named steps (each must be enabled when its turn comes), returning the first
/// violation, if any. Regression tests use this: named steps survive changes to the order
/// in which the model lists its steps.
pub fn replay_steps(
    config: &Config,
    scripts: Scripts,
    steps: &[Step],
) -> Result<Option<(&'static str, String)>, String> {
    let world = World::new(scripts);
    let mut state = State::initial(config);
    for (n, step) in steps.iter().enumerate() {
        if !state.steps().contains(step) {
            return Err(format!(
                "step {} ({step:?}) is not enabled in: {}",
                n + 1,
                state.describe()
            ));
        }
        let effects = state.apply(step, &world);
        if effects.violation.is_some() {
            return Ok(effects.violation);
        }
    }
    Ok(None)
}
