//! The multi-lock's protocol checker: explores every interleaving of clients taking
//! several reentrant locks all or none (each naming them in its own order), waiting,
//! giving up, giving back, releasing, lost replies and leases running out, up to a bound,
//! with the library's own `protocol::multi` decisions, its `AttemptOp` / `ReleaseFlow` /
//! `ReconcileRound` / `HoldState`, and the real `lua/*.lua` (see
//! `tests/protocol/multimodel.rs`), and checks the properties in every state.
//!
//! `CHECK_DEPTH=n` runs deeper; `CHECK_REPLAY='<config>:<path>'` replays a counterexample
//! step by step; `CHECK_SHOW=1` prints a shortest trace to each milestone reached;
//! `CHECK_CONFIG=<text>` runs only the configurations whose name
//! contains the text; `CHECK_MAX_STATES=n` lowers the bound on states (a run that hits it
//! fails). See `tests/protocol/checker.rs`.
//!
//! Besides users, waits, lost requests and replies and the clock, the configurations with
//! `busy` have Redis answer calls `BUSY`/`LOADING` (they do not run), those with
//! `restarts` have a Redis server restart empty, those with `force_unlocks` have an
//! operator force-unlock one member lock with the real `lua/force_unlock.lua` (see the
//! module doc of the model for what a restart or a force-unlock excludes from "never two
//! holders", and why), and those with `timeouts` have member calls time out before they
//! ran: late requests (strays) that run before the client's next call on the connection,
//! or never (see the model's module doc for the one late member hold "all or none" leaves
//! to its lease, and why).

#[path = "protocol/checker.rs"]
mod checker;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;
#[path = "protocol/multimodel.rs"]
mod multimodel;

use std::cell::RefCell;
use std::process::ExitCode;

use checker::{Checker, Model, Stepped};
use multimodel::{Config, MILESTONES, Multi, PROPERTIES, Scripts, State, Step, World};

/// The bound of a release build: from it on every configuration must reach its milestones.
const RELEASE_DEPTH: usize = 22;
/// The bound of a debug build (plain `cargo test`).
const DEBUG_DEPTH: usize = 12;
/// A safety net against a blow-up of the state space: hitting it fails the run.
const MAX_STATES: usize = 3_000_000;

fn main() -> ExitCode {
    let checked = Checker::<Multi> {
        title: "multi-lock checker: real lua/ scripts + redis_locks_protocol",
        test: "multi_check",
        release_depth: RELEASE_DEPTH,
        debug_depth: DEBUG_DEPTH,
        max_states: MAX_STATES,
        properties: &PROPERTIES,
        configs: multimodel::configs(),
        must_reach: multimodel::must_reach,
        world: || World::new(Scripts::real()),
    }
    .run();
    if std::env::var_os("CHECK_SHOW").is_some() && std::env::var_os("CHECK_REPLAY").is_none() {
        show();
    }
    checked
}

/// `CHECK_SHOW=1`: a shortest trace to each milestone each configuration reaches (a
/// second exploration, of [`Shown`]).
fn show() {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok());
    let default_depth = if cfg!(debug_assertions) {
        DEBUG_DEPTH
    } else {
        RELEASE_DEPTH
    };
    let depth = env("CHECK_DEPTH").unwrap_or(default_depth);
    let max_states = env("CHECK_MAX_STATES").unwrap_or(MAX_STATES);
    let only = std::env::var("CHECK_CONFIG").unwrap_or_default();
    for config in multimodel::configs() {
        if !config.name.contains(&only) {
            continue;
        }
        println!("{}: traces to its milestones", config.name);
        let world = (
            World::new(Scripts::real()),
            RefCell::new(vec![None; MILESTONES.len()]),
        );
        checker::explore::<Shown>(&world, &config, depth, max_states, &[]);
        let (world, paths) = world;
        for (milestone, path) in MILESTONES.iter().zip(paths.into_inner()) {
            if let Some(path) = path
                && let Ok((trace, _)) = checker::replay::<Multi>(&world, &config, &path, &[])
            {
                println!("    trace to {milestone}:");
                print!("{trace}");
            }
        }
    }
}

/// The multi-lock's model with each state's path (step indices) kept, and the world noting
/// the first path, in breadth-first order a shortest one, to each milestone.
struct Shown;

impl Model for Shown {
    type Config = Config;
    type State = (State, Vec<u8>);
    type Step = (u8, Step);
    type World = (World, RefCell<Vec<Option<Vec<u8>>>>);
    const MILESTONES: &'static [&'static str] = Multi::MILESTONES;

    fn name(config: &Config) -> &'static str {
        Multi::name(config)
    }
    fn initial(config: &Config) -> Self::State {
        (Multi::initial(config), Vec::new())
    }
    fn steps((state, _): &Self::State, config: &Config) -> Vec<Self::Step> {
        let steps = Multi::steps(state, config).into_iter();
        (0..=u8::MAX).zip(steps).collect()
    }
    fn apply(
        (state, path): &mut Self::State,
        (index, step): &Self::Step,
        (world, paths): &Self::World,
        config: &Config,
    ) -> Stepped {
        path.push(*index);
        let stepped = Multi::apply(state, step, world, config);
        for &milestone in &stepped.milestones {
            paths.borrow_mut()[milestone].get_or_insert_with(|| path.clone());
        }
        stepped
    }
    fn describe((state, _): &Self::State) -> String {
        Multi::describe(state)
    }
    fn fingerprint((state, _): &Self::State) -> u64 {
        Multi::fingerprint(state)
    }
}
