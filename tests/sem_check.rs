//! The semaphore's protocol checker: explores every interleaving of single and waiting
//! acquisitions of 1 or 2 permits, drains (every free permit), give-backs, renewals,
//! extensions (`Guard::extend`), lost replies, `BUSY`/`LOADING` replies, expiry, a
//! waiter's reservation, a Redis restart that loses all data (and the size set again by an
//! operator), an operator adding or taking away a permit, and late requests (a copy that
//! timed out, or whose acquire its caller dropped, runs later, before the client's next
//! request on its connection, or never), up to a bound, with the library's own
//! `protocol::semaphore` calls and decoders, its `Resend`, `given_back`, `HoldState` and
//! `Wait`, and the real `lua/sem_*.lua` (see `tests/protocol/semmodel.rs`), and checks the
//! properties in every state.
//!
//! `CHECK_DEPTH=n` runs deeper; `CHECK_CONFIG=<part of a name>` runs only the matching
//! configurations; `CHECK_REPLAY='<config>:<path>'` replays a counterexample step by step;
//! `CHECK_PROBES=1` explores the probes instead (configurations the default run explores 2
//! steps deeper than the others), at the run's depth.

#[path = "protocol/checker.rs"]
mod checker;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;
#[path = "protocol/semmodel.rs"]
mod semmodel;

use std::process::ExitCode;

use checker::{Checker, Model, Stepped};
use semmodel::{Config, PROPERTIES, Scripts, Sem, State, Step, World};

fn main() -> ExitCode {
    // `CHECK_PROBES=1`: the probes (known findings) alone, at the run's depth.
    if std::env::var("CHECK_PROBES").is_ok_and(|p| p == "1") {
        return checker::<Probes>(semmodel::probes()).run();
    }
    // The probes run 2 steps deeper than the others (`Config::extra_depth`): their finding
    // (a grant credited from too late a send, fixed by the core's `SendHistory`) needs 14.
    let configs = semmodel::configs().into_iter().chain(semmodel::probes());
    checker::<Sem>(configs.collect()).run()
}

fn checker<M: Model<Config = Config, World = World>>(configs: Vec<Config>) -> Checker<M> {
    Checker {
        title: "semaphore checker: real lua/sem_*.lua",
        test: "sem_check",
        release_depth: 12,
        debug_depth: 9,
        max_states: 3_000_000,
        properties: &PROPERTIES,
        configs,
        must_reach: semmodel::must_reach,
        world: || World::new(Scripts::real()),
    }
}

/// The semaphore's model for a run of the probes alone (`CHECK_PROBES=1`): at the run's
/// depth, and held to no milestone (every one is out of a probe's reach, and the probes
/// alone are not the whole run that must reach each of them somewhere).
struct Probes;

impl Model for Probes {
    type Config = Config;
    type State = State;
    type Step = Step;
    type World = World;
    const MILESTONES: &'static [&'static str] = &[];

    fn name(config: &Config) -> &'static str {
        Sem::name(config)
    }
    fn initial(config: &Config) -> State {
        Sem::initial(config)
    }
    fn steps(state: &State, config: &Config) -> Vec<Step> {
        Sem::steps(state, config)
    }
    fn apply(state: &mut State, step: &Step, world: &World, config: &Config) -> Stepped {
        let stepped = Sem::apply(state, step, world, config);
        let milestones = Vec::new();
        Stepped {
            milestones,
            ..stepped
        }
    }
    fn describe(state: &State) -> String {
        Sem::describe(state)
    }
}
