//! One checker for every kind: the breadth-first explorer, the replay of a counterexample,
//! the command-line run (`tests/*_check.rs`) and the teeth's search (`tests/*_teeth.rs`),
//! written once over a small [`Model`] trait that each kind's model implements.
//!
//! Why not `stateright`: a model's state holds a keyspace that the real Lua scripts mutate
//! through an embedded interpreter that cannot be shared across threads, the properties
//! need the step's effects (what a reply reported) and not only the state, and a
//! counterexample must replay step by step with the library's own types. A hundred lines of
//! BFS do that with nothing to adapt.
//!
//! The environment of a run:
//! * `CHECK_DEPTH=n`: explore n steps deep (a configuration may add its own extra depth);
//! * `CHECK_CONFIG=<part of a name>`: only the configurations whose name contains it;
//! * `CHECK_MAX_STATES=n`: the bound on states per configuration (hitting it fails the run:
//!   no configuration is marked as sampled);
//! * `CHECK_REPLAY='<config>:<steps>'`: replay a counterexample step by step.
#![allow(dead_code)]

use std::collections::{HashSet, hash_map::DefaultHasher};
use std::fmt::{Debug, Write as _};
use std::hash::{Hash, Hasher};
use std::process::ExitCode;
use std::time::Instant;

/// A violated property and why.
pub type Violation = (&'static str, String);

/// What one step did, as the checker needs it.
pub struct Stepped {
    /// Milestones reached (indices into [`Model::MILESTONES`]).
    pub milestones: Vec<usize>,
    /// The properties violated, in the order found.
    pub violations: Vec<Violation>,
}

impl Stepped {
    /// The first violation of a property not in `ignore`.
    fn violation(&self, ignore: &[&str]) -> Option<Violation> {
        self.violations
            .iter()
            .find(|(property, _)| !ignore.contains(property))
            .cloned()
    }
}

/// A kind's model: the world (keyspace, network, clock, users) around the library's core.
pub trait Model {
    type Config: Clone;
    type State: Clone + Hash;
    type Step: Clone + Debug + PartialEq;
    /// What every state of a run shares (the Lua interpreter with the scripts).
    type World;
    /// The milestones, by name: things a configuration must be seen to do, so that its
    /// properties are not vacuous.
    const MILESTONES: &'static [&'static str];
    fn name(config: &Self::Config) -> &'static str;
    fn initial(config: &Self::Config) -> Self::State;
    fn steps(state: &Self::State, config: &Self::Config) -> Vec<Self::Step>;
    fn apply(
        state: &mut Self::State,
        step: &Self::Step,
        world: &Self::World,
        config: &Self::Config,
    ) -> Stepped;
    fn describe(state: &Self::State) -> String;
    /// The key states are deduplicated by (a model with interchangeable parts, e.g.
    /// RedLock's servers, makes it the same for their permutations).
    fn fingerprint(state: &Self::State) -> u64 {
        let mut hasher = DefaultHasher::new();
        state.hash(&mut hasher);
        hasher.finish()
    }
    /// Steps this configuration explores beyond the run's depth (one whose shortest
    /// interesting path is longer than the others').
    fn extra_depth(_config: &Self::Config) -> usize {
        0
    }
}

/// What one exploration found.
pub struct Report {
    pub states: usize,
    pub depth_reached: usize,
    /// Per milestone: reached.
    pub milestones: Vec<bool>,
    /// The first violation: property, message, and the path (step indices) to it.
    pub violation: Option<(&'static str, String, Vec<u8>)>,
    /// Whether the bound on states stopped the search before the depth did.
    pub truncated: bool,
}

/// Explores `config` breadth-first to `depth` steps (at most `max_states` states), with
/// states deduplicated by [`Model::fingerprint`]. A violation of a property named in
/// `ignore` is not reported (its path goes on): a tooth uses it to show that a defect
/// caught early by one property is also caught, deeper, by another.
pub fn explore<M: Model>(
    world: &M::World,
    config: &M::Config,
    depth: usize,
    max_states: usize,
    ignore: &[&str],
) -> Report {
    let initial = M::initial(config);
    let mut seen = HashSet::from([M::fingerprint(&initial)]);
    let mut frontier: Vec<(M::State, Vec<u8>)> = vec![(initial, Vec::new())];
    let mut report = Report {
        states: 1,
        depth_reached: 0,
        milestones: vec![false; M::MILESTONES.len()],
        violation: None,
        truncated: false,
    };
    for level in 1..=depth {
        let mut next = Vec::new();
        for (state, path) in &frontier {
            if report.truncated {
                break;
            }
            for (index, step) in M::steps(state, config).iter().enumerate() {
                let mut successor = state.clone();
                let stepped = M::apply(&mut successor, step, world, config);
                for &milestone in &stepped.milestones {
                    report.milestones[milestone] = true;
                }
                let successor_path = [path.as_slice(), &[index as u8]].concat();
                if let Some((property, message)) = stepped.violation(ignore) {
                    report.violation = Some((property, message, successor_path));
                    report.depth_reached = level;
                    return report;
                }
                if seen.insert(M::fingerprint(&successor)) {
                    report.states += 1;
                    report.truncated |= report.states >= max_states;
                    next.push((successor, successor_path));
                }
            }
        }
        if next.is_empty() {
            break;
        }
        (report.depth_reached, frontier) = (level, next);
        if report.truncated {
            break;
        }
    }
    report
}

/// Replays a path (step indices) to its first violation of a property not in `ignore`:
/// the numbered trace, and that violation.
pub fn replay<M: Model>(
    world: &M::World,
    config: &M::Config,
    path: &[u8],
    ignore: &[&str],
) -> Result<(String, Option<Violation>), String> {
    let mut state = M::initial(config);
    let mut trace = format!("   0. start: {}\n", M::describe(&state));
    for (n, &index) in path.iter().enumerate() {
        let steps = M::steps(&state, config);
        let step = steps
            .get(index as usize)
            .cloned()
            .ok_or_else(|| format!("step {n}: index {index}, {} enabled", steps.len()))?;
        let stepped = M::apply(&mut state, &step, world, config);
        let _ = writeln!(
            trace,
            "  {:>2}. {step:?}\n      -> {}",
            n + 1,
            M::describe(&state)
        );
        if let Some(violation) = stepped.violation(ignore) {
            return Ok((trace, Some(violation)));
        }
    }
    Ok((trace, None))
}

/// Replays named steps (each must be enabled when its turn comes): the first violation,
/// if any. Regression tests use this: named steps survive changes to the order in which a
/// model lists its steps.
pub fn replay_steps<M: Model>(
    world: &M::World,
    config: &M::Config,
    steps: &[M::Step],
) -> Result<Option<Violation>, String> {
    let mut state = M::initial(config);
    for (n, step) in steps.iter().enumerate() {
        if !M::steps(&state, config).contains(step) {
            return Err(format!(
                "step {} ({step:?}) is not enabled in: {}",
                n + 1,
                M::describe(&state)
            ));
        }
        let stepped = M::apply(&mut state, step, world, config);
        if let Some(violation) = stepped.violation(&[]) {
            return Ok(Some(violation));
        }
    }
    Ok(None)
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

/// A counterexample a tooth found: the property, why, and the replay spec
/// (`<config>:<steps>`).
pub type Found = (&'static str, String, String);

/// How many steps short of the bound a tooth's search first looks (`counterexample`).
const SHALLOW_BY: usize = 3;

/// Explores `configs` in turn at `depth` (plus each one's extra depth) until one finds a
/// violation (a tooth's search). Panics when a configuration hits the state bound without
/// a violation: "nothing found" must mean the whole bound was explored.
///
/// Every configuration is first explored `SHALLOW_BY` steps short of the bound: a planted
/// defect is usually found well inside it, and that pass over all of them costs a fraction
/// of one configuration's full exploration, where searching them in turn at the full bound
/// explored every configuration before the one that finds it in full (most of the teeth's
/// time). Only when the shallow pass finds nothing are they explored at the full bound.
pub fn counterexample<M: Model>(
    world: &M::World,
    configs: &[M::Config],
    depth: usize,
    max_states: usize,
) -> Option<Found> {
    let started = Instant::now();
    let search = |depth: usize| {
        configs.iter().find_map(|config| {
            let depth = depth + M::extra_depth(config);
            let report = explore::<M>(world, config, depth, max_states, &[]);
            assert!(
                report.violation.is_some() || !report.truncated,
                "{}: the state bound ({max_states}) was hit before depth {depth}",
                M::name(config)
            );
            report.violation.map(|(property, message, path)| {
                let spec = format!("{}:{}", M::name(config), path_text(&path));
                (property, message, spec)
            })
        })
    };
    let found = search(depth.saturating_sub(SHALLOW_BY)).or_else(|| search(depth));
    // A defect must be found within minutes at the default bound: the time says how far
    // from that a tooth is (shared with the other tests of its binary on 2 cores).
    println!("searched for {:.1?}", started.elapsed());
    found
}

/// Asserts that a tooth's search found a violation of one of `properties`.
pub fn expect_found(found: Option<Found>, properties: &[&str]) {
    println!("{found:?}");
    let (property, message, spec) = found.expect("the checker found no counterexample");
    assert!(
        properties.contains(&property),
        "found {property} ({message}; {spec}), expected one of {properties:?}"
    );
}

/// A kind's checker as a command (`tests/*_check.rs`'s `main`).
pub struct Checker<M: Model> {
    /// The first line printed: what is checked, with what.
    pub title: &'static str,
    /// The test target, for the replay command printed with a counterexample.
    pub test: &'static str,
    /// The bound of a release build (`./scripts/check-protocol.sh`): from it on, every
    /// configuration must reach its milestones.
    pub release_depth: usize,
    /// The bound of a debug build (plain `cargo test`).
    pub debug_depth: usize,
    /// A safety net against a blow-up of the state space.
    pub max_states: usize,
    pub properties: &'static [&'static str],
    pub configs: Vec<M::Config>,
    /// The milestones a configuration must reach at the release bound.
    pub must_reach: fn(&str) -> Vec<&'static str>,
    /// A fresh world (the real scripts).
    pub world: fn() -> M::World,
}

impl<M: Model> Checker<M> {
    /// Runs the checker as the environment says (see the module docs): exits non-zero on a
    /// violation, a state bound hit, or a required milestone not reached.
    pub fn run(self) -> ExitCode {
        if let Ok(spec) = std::env::var("CHECK_REPLAY") {
            return self.replay_one(&spec);
        }
        let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok());
        let default_depth = if cfg!(debug_assertions) {
            self.debug_depth
        } else {
            self.release_depth
        };
        let depth = env("CHECK_DEPTH").unwrap_or(default_depth);
        let max_states = env("CHECK_MAX_STATES").unwrap_or(self.max_states);
        let mut configs = self.configs.clone();
        if let Ok(only) = std::env::var("CHECK_CONFIG") {
            configs.retain(|config| M::name(config).contains(&only));
        }
        let all = configs.len() == self.configs.len();
        let started = Instant::now();
        let (mut total, mut failed) = (0, false);
        let mut reached = vec![false; M::MILESTONES.len()];
        println!("{}, depth {depth}", self.title);
        let world = (self.world)();
        for config in &configs {
            let t = Instant::now();
            let name = M::name(config);
            let report = explore::<M>(
                &world,
                config,
                depth + M::extra_depth(config),
                max_states,
                &[],
            );
            total += report.states;
            println!(
                "  {name}: {} states, depth {}, {} ({:.1?})",
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
            // Each configuration must reach its own milestones, so that none of them is
            // vacuous; one reached in another configuration does not count.
            let required = (self.must_reach)(name);
            for (i, milestone) in M::MILESTONES.iter().enumerate() {
                let hit = report.milestones[i];
                reached[i] |= hit;
                let required = required.contains(milestone);
                let shown = match (hit, required) {
                    (true, _) => "yes",
                    (false, true) => "NO (required)",
                    (false, false) => "no (not required here)",
                };
                println!("    reached {milestone}: {shown}");
                failed |= required && !hit && depth >= self.release_depth;
            }
            if let Some((property, message, path)) = report.violation {
                failed = true;
                println!("\nFAILED {property}: {message}");
                match replay::<M>(&world, config, &path, &[]) {
                    Ok((trace, _)) => print!("{trace}"),
                    Err(err) => println!("(trace unavailable: {err})"),
                }
                println!(
                    "replay: CHECK_REPLAY='{name}:{}' cargo test --release --test {}\n",
                    path_text(&path),
                    self.test
                );
            }
        }
        println!("states explored: {total}");
        for property in self.properties {
            println!(
                "  {property}: {}",
                if failed { "see above" } else { "holds" }
            );
        }
        // Every milestone is some configuration's: one reached nowhere is a dead step.
        for (milestone, hit) in M::MILESTONES.iter().zip(&reached) {
            println!(
                "  reached {milestone} (any configuration): {}",
                if *hit { "yes" } else { "NO" }
            );
            failed |= !hit && all && depth >= self.release_depth;
        }
        println!("time: {:.1?}", started.elapsed());
        if failed {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        }
    }

    fn replay_one(&self, spec: &str) -> ExitCode {
        let Some((name, path)) = spec.rsplit_once(':') else {
            eprintln!("CHECK_REPLAY must be '<config name>:<steps>'");
            return ExitCode::FAILURE;
        };
        let Some(config) = self.configs.iter().find(|c| M::name(c) == name) else {
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
        match replay::<M>(&(self.world)(), config, &path, &[]) {
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
}

/// For the models of kinds that wait: the library's waiting loop
/// (`protocol::wait::Wait`) of an acquisition with `policy` and `limit` (`None`: no
/// limit), as it stands before an attempt: started, and with `refused_within`, through
/// one refusal that said the holder's pttl (subscribed, slept, woken, attempting again).
/// A model asks it only how an attempt ends and what a drop gives back; it attempts again
/// at any time, not after the loop's sleeps. `Err`: the loop was not about to attempt.
pub fn wait_at_attempt(
    policy: redis_locks_protocol::wait::WaitPolicy,
    now: redis_locks_protocol::Millis,
    limit: Option<redis_locks_protocol::Millis>,
    refused_within: Option<redis_locks_protocol::Millis>,
) -> Result<redis_locks_protocol::wait::Wait, redis_locks_protocol::wait::WaitStep> {
    use redis_locks_protocol::wait::{Tried, Wait, WaitStep};
    let mut wait = Wait::new(policy, now, limit);
    let mut step = wait.start(now);
    if let Some(within) = refused_within {
        step = wait.attempted(now, Tried::Busy { within }, false, 0);
        if let WaitStep::Subscribe { .. } = step {
            step = wait.subscribed_at(now);
        }
        if let WaitStep::Sleep { .. } = step {
            step = wait.woke(now, false);
        }
    }
    match step {
        WaitStep::Attempt => Ok(wait),
        other => Err(other),
    }
}
