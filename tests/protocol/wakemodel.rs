//! The plain lock's wake-up model: waiters of two clients (processes) around one lock, with
//! the real `lua/acquire.lua` and `lua/release.lua` (its `"\1w"` mark and its conditional
//! PUBLISH), each client's subscription hub (one subscription per channel, confirmed as a
//! step; a message wakes ONE local waiter, or is kept as a permit when none sleeps, as
//! `src/pubsub.rs` does with `Notify::notify_one`), and every acquire's waiting loop, the
//! core's `protocol::wait::Wait` with `WaitPolicy::reentrant`, driven as `src/waiting.rs`
//! drives it.
//!
//! Nothing is decided here that the library decides: each attempt is the core's
//! `AttemptOp` over an `AcquireRequest` whose `others_waiting` is the core's
//! `acquire::others_waiting(listeners of this client on the channel, caller listens)`
//! (as `src/lock/attempt.rs` builds it), each release is the core's `ReleaseFlow` (as
//! `src/lock/release.rs` drives it, with its retry bound from `release::leave`), replies are
//! read by the core's decoders, and when to attempt, subscribe, sleep (and until when), what
//! a wake-up does and whether a leaving waiter hands its wake-up on is `Wait`'s answer. The
//! model is the runtime around them (`src/waiting.rs`, `src/pubsub.rs`) and the world:
//! users, the network (pending messages per client), the clock.
//!
//! The runtime, as modelled:
//! * `WaitStep::Subscribe`: the waiter gets a listener at once (the client's hub asks for a
//!   subscription if the channel had none), then waits for the server's confirmation (a
//!   step of the client: `Confirm`; then each waiting user goes on: `Ready`), or until
//!   `confirm_until` (the clock), then `Wait::subscribed_at`.
//! * `WaitStep::Sleep`: a waiter that may be woken (`wake_on_release`) joins its client's
//!   queue of notified waiters, unless a permit is stored, which it takes at once (tokio's
//!   `Notified`, polled first in the `select!`). It wakes by a message or a handed-on
//!   wake-up (the queue's oldest is woken: `notify_one` is FIFO), or at `until` (the clock).
//! * A message the scripts PUBLISH goes to every client whose subscription is confirmed at
//!   that moment, into its pending queue; delivering one is a step (`Deliver`), dispatched
//!   to the oldest sleeper of the client, or kept as the client's permit (one at most).
//! * A waiting loop that ends (granted, timed out) hands its wake-up on when `Wait` says so,
//!   then drops its listener; a dropped acquire (`Drop`, the caller went away) hands it on
//!   when `Wait::pass_on_if_dropped` says so. When a client's last listener goes, its
//!   channel goes with its permit, its subscription and the messages on their way.
//! * Attempts and releases run and answer in one step, at the step's time (no faults),
//!   but in configurations with `in_flight` ([`InFlight`]: every attempt, or only a woken
//!   waiter's): there an attempt is sent (its request, with `others_waiting` read then,
//!   built and started by the core) and run later as a step of its own (`Run`; the clock
//!   and any other step may come between; each further call of the attempt,
//!   `acquire.lua` after a bare `SET` that found the key, is a `Run` of its own too), and
//!   a caller may drop its acquire while the attempt is in flight: the attempt then runs
//!   detached (`RunDetached`) and a hold it wins is given back (`ReleaseOrphan`), as
//!   `Detachable` and the dropped guard do.
//! * The clock (`Tick`) moves to the next instant something is due: a sleep's end, the end
//!   of a confirmation wait, the lock key's expiry. Holders have a fixed lease
//!   ([`LEASE`], no watchdog), release it, or stop without releasing (`Stop`: the key then
//!   expires, nothing is published, the waiters must wake by their pttl).
//!
//! Properties, checked in every state:
//! * **no wake-up lost without a fault**: while the lock's key is absent because it was
//!   released (not expired), every client with a *covered* sleeper (asleep, woken by
//!   releases, and its last attempt was made while its client's subscription was confirmed:
//!   that attempt marked the hash it failed on while the client listened) has a wake-up on
//!   its way: a message pending for it, a stored permit, or a user that is awake and will
//!   attempt (its attempt either takes the lock and marks the fresh hash for the local
//!   waiters, flag '2', or fails on a newer hash and marks it). A sleeper whose last attempt
//!   ran before its subscription was confirmed (a confirmation slower than a pttl) is not
//!   covered: its sleep is bounded by the pttl only (latency, no hang).
//! * **a sleep is bounded by the pttl**: a sleep (or a wait for the confirmation) chosen
//!   after a refusal ends no later than the key's expiry as that refusal saw it (at least
//!   1 ms on); and while the key is absent because it expired, no waiter sleeps without a
//!   wake-up on its way.
//! * **never two holders** (sanity): no two users believe in their fixed lease at once.
//!
//! Milestones: a waiter woken by a release message took the lock; a waiter woken by the
//! message of a release whose hash only a fresh acquire of its own client had marked
//! (flag '2', nobody failed on it: the local hand-off); a waiter woke at its pttl and took
//! the lock after the holder's key expired; a dropped waiter handed its wake-up on; a hold
//! a detached attempt won was given back.
//!
//! Not modelled: faults (lost replies and messages, reconnects of the hub and its
//! `wake_everyone`, refused subscriptions and spinning), re-entries, watchdog leases,
//! fencing, the semaphore's first-in-line wake-ups (never set by the plain lock).
#![allow(dead_code)]

use std::sync::Arc;

use redis_locks_protocol::acquire::{self, AcquireRequest};
use redis_locks_protocol::attempt::{AttemptOp, AttemptOutcome};
use redis_locks_protocol::hold::HoldState;
use redis_locks_protocol::lane::Lane;
use redis_locks_protocol::release::{self, ReleaseFlow, ReleaseOutcome};
use redis_locks_protocol::wait::{Tried, Wait, WaitEnd, WaitPolicy, WaitStep, WaitTiming};
use redis_locks_protocol::{Call, Env, LockKeys, Machine, Millis, Next, Reply, RequestIds};

use crate::checker::{Model, Stepped};
use crate::keyspace::Keyspace;
use crate::lua::ScriptRunner;

pub use crate::lua::Scripts;

/// Every hold's fixed lease, in model ms.
pub const LEASE: Millis = 6;
/// The client's timing (no errors are modelled: the tolerance never matters).
pub const TIMING: WaitTiming = WaitTiming {
    tolerance: 1_000,
    response: 2,
};

pub const PROPERTIES: [&str; 3] = [
    "no wake-up lost without a fault",
    "a sleep is bounded by the pttl",
    "never two holders",
];

pub const MILESTONES: [&str; 6] = [
    "a waiter woken by a release message took the lock",
    "a waiter of the same client woken after a local hand-off",
    "a waiter woke at its pttl after the holder's key expired",
    "a dropped waiter handed its wake-up on",
    "a detached attempt's hold was given back",
    "an attempt's second call ran after other steps",
];

/// One user of a client.
#[derive(Clone, Debug)]
pub struct Plan {
    /// How many acquires it makes (each followed by a release or a stop).
    pub cycles: u8,
    /// How long each acquire waits (`None`: without limit).
    pub wait: Option<Millis>,
    /// Whether its caller may drop a waiting acquire.
    pub may_drop: bool,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub name: &'static str,
    /// Per client, its users.
    pub clients: Vec<Vec<Plan>>,
    /// Holders that stop without releasing, in all.
    pub stops: u8,
    /// Acquires dropped by their caller, in all.
    pub drops: u8,
    /// Which attempts are sent and run as two steps (the clock and other steps may come
    /// between; a caller may drop its acquire while its attempt is in flight, which then
    /// runs detached and gives back a hold it wins, as `Detachable` does).
    pub in_flight: InFlight,
    /// Fenced acquires: every hold has the hash form (`lua/acquire.lua`), where an
    /// unfenced first hold is a string; the marks and the release's PUBLISH of both forms
    /// are explored.
    pub fenced: bool,
    /// Steps explored beyond the run's depth (in a release build). The configurations but
    /// the first have enough to explore every state they can reach (the search ends before
    /// the bound); the first is bounded by the run's depth.
    pub extra: usize,
}

/// Which attempts of a configuration are in flight (sent, then run as steps of their own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InFlight {
    /// None: every attempt runs (all its calls) in the step that sends it.
    No,
    /// Every attempt.
    All,
    /// Only the attempts of a waiter woken by a release (subscribed, and the core no
    /// longer expects the lock held: `Wait::expects_held`), whose bare `SET` and the
    /// `acquire.lua` after it can then be interleaved with other steps; the rest run in one
    /// step. It reaches the races of a woken waiter's take in fewer steps than `All`, whose
    /// every attempt costs a step or two more.
    Woken,
}

const fn plan(cycles: u8) -> Plan {
    Plan {
        cycles,
        wait: None,
        may_drop: false,
    }
}

pub fn configs() -> Vec<Config> {
    vec![
        Config {
            name: "wake: a holder releasing twice, two waiters of the other client",
            clients: vec![vec![plan(2)], vec![plan(1), plan(1)]],
            stops: 0,
            drops: 0,
            in_flight: InFlight::No,
            fenced: false,
            extra: 0,
        },
        Config {
            name: "wake: a holder releasing twice, two waiters of the other client, fenced",
            clients: vec![vec![plan(2)], vec![plan(1), plan(1)]],
            stops: 0,
            drops: 0,
            in_flight: InFlight::No,
            fenced: true,
            extra: 0,
        },
        Config {
            name: "wake: a holder then waiter per client, a holder that stops",
            clients: vec![vec![plan(2)], vec![plan(2)]],
            stops: 1,
            drops: 0,
            in_flight: InFlight::No,
            fenced: false,
            extra: 16,
        },
        Config {
            name: "wake: a waiter with a deadline that is dropped",
            clients: vec![
                vec![plan(1)],
                vec![
                    Plan {
                        cycles: 1,
                        wait: Some(20),
                        may_drop: true,
                    },
                    plan(1),
                ],
            ],
            stops: 0,
            drops: 1,
            in_flight: InFlight::No,
            fenced: false,
            extra: 10,
        },
        Config {
            name: "wake: attempts in flight, a waiter dropped mid-attempt",
            clients: vec![
                vec![plan(1)],
                vec![
                    Plan {
                        cycles: 1,
                        wait: None,
                        may_drop: true,
                    },
                    plan(1),
                ],
            ],
            stops: 0,
            drops: 1,
            in_flight: InFlight::All,
            fenced: false,
            extra: 26,
        },
        Config {
            name: "wake: a holder releasing twice, two waiters of the other client, in flight",
            clients: vec![vec![plan(2)], vec![plan(1), plan(1)]],
            stops: 0,
            drops: 0,
            in_flight: InFlight::All,
            fenced: false,
            extra: 0,
        },
        Config {
            name: "wake: a holder releasing twice, two waiters of the other client, a woken \
                   waiter's take in flight",
            clients: vec![vec![plan(2)], vec![plan(1), plan(1)]],
            stops: 0,
            drops: 0,
            in_flight: InFlight::Woken,
            fenced: false,
            extra: 0,
        },
    ]
}

/// The milestones each configuration must reach at the default bound.
pub fn must_reach(name: &str) -> Vec<&'static str> {
    match name {
        "wake: a holder releasing twice, two waiters of the other client"
        | "wake: a holder releasing twice, two waiters of the other client, fenced" => vec![
            "a waiter woken by a release message took the lock",
            "a waiter of the same client woken after a local hand-off",
        ],
        "wake: a holder then waiter per client, a holder that stops" => vec![
            "a waiter woken by a release message took the lock",
            "a waiter woke at its pttl after the holder's key expired",
        ],
        "wake: a waiter with a deadline that is dropped" => vec![
            "a waiter woken by a release message took the lock",
            "a dropped waiter handed its wake-up on",
        ],
        "wake: a holder releasing twice, two waiters of the other client, a woken waiter's \
         take in flight" => vec![
            "a waiter woken by a release message took the lock",
            "a waiter of the same client woken after a local hand-off",
            "an attempt's second call ran after other steps",
        ],
        "wake: attempts in flight, a waiter dropped mid-attempt" => vec![
            "a waiter woken by a release message took the lock",
            "a waiter of the same client woken after a local hand-off",
            "a dropped waiter handed its wake-up on",
            "a detached attempt's hold was given back",
            "an attempt's second call ran after other steps",
        ],
        _ => Vec::new(),
    }
}

/// The lock's hash, as [`keys`] names it.
const HASH: &[u8] = b"L:{x}";

pub fn keys() -> LockKeys {
    LockKeys {
        hash: "L:{x}".into(),
        fence: "L:{x}:fence".into(),
        channel: "L:{x}:db0:released".into(),
        sharded: false,
    }
}

/// An attempt sent and not run yet: the core's operation and the call it asked for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sent {
    pub owner: Arc<str>,
    pub op: AttemptOp,
    pub call: Call,
    /// Its request asked for the mark for the client's other waiters (flag '2').
    pub others_waiting: bool,
    /// Its waiting loop was subscribed when it was sent.
    pub listening: bool,
}

/// How a waiter woke last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Woke {
    Not,
    /// By a release message (`handoff`: the released hash was marked only by a fresh
    /// acquire of this client for its other waiters, flag '2').
    Message {
        handoff: bool,
    },
    /// By a wake-up another local waiter handed on.
    HandedOn,
    /// At the end of its sleep.
    Timer,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// No acquire running.
    Idle,
    /// The waiting loop asked for an attempt.
    Attempt,
    /// Its attempt is sent (configurations with `in_flight`), not run yet.
    Sent(Box<Sent>),
    /// Waiting for the subscription's confirmation, at most until then.
    Confirming { until: Millis },
    /// Asleep until then (or a wake-up, when `wake_on_release`).
    Sleeping {
        until: Millis,
        wake_on_release: bool,
    },
    /// Holds the lock (fixed lease from `sent_at`).
    Holding { hold: Arc<str>, sent_at: Millis },
    /// Gone (all its acquires made, or stopped while holding).
    Done,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct User {
    pub owner: Arc<str>,
    pub phase: Phase,
    pub wait: Option<Wait>,
    /// Holds a listener of the client's hub for the lock's channel.
    pub listening: bool,
    pub cycles: u8,
    /// Its last attempt was made while its client's subscription was confirmed.
    pub covered: bool,
    /// The key's expiry as its last refusal saw it (at least 1 ms after it).
    pub bound: Millis,
    pub woke: Woke,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sub {
    None,
    Requested,
    Confirmed,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    pub ids: RequestIds,
    pub sub: Sub,
    /// Messages on their way from Redis, oldest first (the flag: a local hand-off's).
    pub inbox: Vec<bool>,
    /// A wake-up kept for the next sleeper (`Notify`'s permit): how it came.
    pub permit: Option<Woke>,
    /// The users waiting in `notified()`, oldest first.
    pub queue: Vec<usize>,
    /// Attempts whose caller dropped them while in flight: they run detached.
    pub detached: Vec<Sent>,
    /// Holds a detached attempt won, to give back (owner, hold, sent at).
    pub orphans: Vec<(Arc<str>, Arc<str>, Millis)>,
}

/// Why the lock's key is absent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Free {
    Never,
    Released,
    Expired { at: Millis },
}

/// The current hold in Redis, as the model follows it (for the milestones).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Current {
    pub hold: Arc<str>,
    /// The fresh acquire asked for the mark for its client's other waiters (flag '2').
    pub flagged_by: Option<usize>,
    /// An attempt was refused on it (and marked it).
    pub refused: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub ks: Keyspace,
    pub now: Millis,
    pub clients: Vec<Client>,
    pub users: Vec<Vec<User>>,
    /// `None` while the key exists.
    pub free: Option<Free>,
    pub current: Option<Current>,
    pub stops: u8,
    pub drops: u8,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A user starts an acquire.
    Start(usize, usize),
    /// A user's waiting loop makes its attempt (sends it, in configurations with
    /// `in_flight`).
    Attempt(usize, usize),
    /// A user's attempt in flight runs and is answered.
    Run(usize, usize),
    /// A client's oldest detached attempt runs.
    RunDetached(usize),
    /// A client gives back the oldest hold a detached attempt won (its guard was dropped).
    ReleaseOrphan(usize),
    /// The server confirms a client's subscription.
    Confirm(usize),
    /// A user waiting for the confirmation sees it.
    Ready(usize, usize),
    /// A client's oldest pending message arrives and is dispatched.
    Deliver(usize),
    /// A holder releases.
    Release(usize, usize),
    /// A holder stops without releasing (its key expires).
    Stop(usize, usize),
    /// A user's caller drops its acquire.
    Drop(usize, usize),
    /// The clock moves to the next instant something is due.
    Tick,
}

#[derive(Default)]
pub struct Effects {
    pub milestones: Vec<usize>,
    pub violations: Vec<(&'static str, String)>,
}

impl Effects {
    fn fail(&mut self, property: &'static str, message: String) {
        debug_assert!(PROPERTIES.contains(&property));
        self.violations.push((property, message));
    }

    fn reach(&mut self, milestone: &str) {
        let index = MILESTONES
            .iter()
            .position(|m| *m == milestone)
            .expect("a known milestone");
        self.milestones.push(index);
    }
}

pub struct World {
    runner: ScriptRunner,
    scripts: Scripts,
    keys: LockKeys,
}

impl World {
    pub fn new(scripts: Scripts) -> Self {
        World {
            runner: ScriptRunner::new(),
            scripts,
            keys: keys(),
        }
    }

    /// Runs `call` at `now`: its reply, and how many messages it published on the lock's
    /// channel.
    fn run(&self, call: &Call, ks: &mut Keyspace, now: Millis) -> (Reply, usize) {
        let keys: Vec<Vec<u8>> = call.keys.iter().map(|k| k.as_bytes().to_vec()).collect();
        let args: Vec<Vec<u8>> = call.args.iter().map(|a| a.as_bytes().to_vec()).collect();
        let reply = self
            .runner
            .eval(self.scripts.source(call.script), &keys, &args, ks, now);
        let published = std::mem::take(&mut ks.published)
            .into_iter()
            .filter(|(channel, _)| channel.as_slice() == self.keys.channel.as_bytes())
            .count();
        (reply, published)
    }
}

/// The core's view of a model client: the model clock, no randomness, its request ids.
struct ModelEnv<'a> {
    now: Millis,
    ids: &'a mut RequestIds,
}

impl Env for ModelEnv<'_> {
    fn now(&self) -> Millis {
        self.now
    }
    fn jitter(&mut self) -> u64 {
        0
    }
    fn next_id(&mut self) -> std::sync::Arc<str> {
        self.ids.next_id()
    }
}

/// Drives a core operation to its end, each call it asks for run at once (no faults):
/// its outcome, and the messages its calls published.
fn drive<M: Machine<Ctx = Lane>>(
    machine: &mut M,
    env: &mut ModelEnv,
    ks: &mut Keyspace,
    world: &World,
) -> (M::Outcome, usize) {
    let mut lane = Lane::default();
    let first = machine.start(env, &mut lane);
    drive_from(machine, env, &mut lane, ks, world, first)
}

/// [`drive`] from `next`, what the operation asked for last.
fn drive_from<M: Machine<Ctx = Lane>>(
    machine: &mut M,
    env: &mut ModelEnv,
    lane: &mut Lane,
    ks: &mut Keyspace,
    world: &World,
    mut next: Next<M::Outcome>,
) -> (M::Outcome, usize) {
    let mut published = 0;
    loop {
        match next {
            Next::Send(call) => {
                let (reply, sent) = world.run(&call, ks, env.now);
                published += sent;
                next = machine.on_reply(env, lane, &reply);
            }
            Next::SleepUntil(_) => next = machine.resume(env, lane),
            Next::Done(outcome) => return (outcome, published),
        }
    }
}

impl State {
    pub fn initial(config: &Config) -> Self {
        State {
            ks: Keyspace::default(),
            now: 0,
            clients: (0..config.clients.len())
                .map(|c| Client {
                    ids: RequestIds::new(format!("c{c}")),
                    sub: Sub::None,
                    inbox: Vec::new(),
                    permit: None,
                    queue: Vec::new(),
                    detached: Vec::new(),
                    orphans: Vec::new(),
                })
                .collect(),
            users: config
                .clients
                .iter()
                .enumerate()
                .map(|(c, plans)| {
                    plans
                        .iter()
                        .enumerate()
                        .map(|(u, plan)| User {
                            owner: format!("o{c}{u}").into(),
                            phase: Phase::Idle,
                            wait: None,
                            listening: false,
                            cycles: plan.cycles,
                            covered: false,
                            bound: 0,
                            woke: Woke::Not,
                        })
                        .collect()
                })
                .collect(),
            free: Some(Free::Never),
            current: None,
            stops: config.stops,
            drops: config.drops,
        }
    }

    fn key_exists(&self) -> bool {
        self.ks.pexpire_at(HASH, self.now).is_some()
    }

    /// The instant the next thing is due (`Tick`), if any.
    fn next_due(&self) -> Option<Millis> {
        let mut due = self
            .ks
            .pexpire_at(HASH, self.now)
            .flatten()
            .map(|at| at + 1);
        for user in self.users.iter().flatten() {
            let at = match user.phase {
                Phase::Sleeping { until, .. } | Phase::Confirming { until } => until,
                _ => continue,
            };
            due = Some(due.map_or(at, |d| d.min(at)));
        }
        due
    }

    pub fn steps(&self, config: &Config) -> Vec<Step> {
        let mut steps = Vec::new();
        for (c, client) in self.clients.iter().enumerate() {
            if client.sub == Sub::Requested {
                steps.push(Step::Confirm(c));
            }
            if !client.inbox.is_empty() {
                steps.push(Step::Deliver(c));
            }
            if !client.detached.is_empty() {
                steps.push(Step::RunDetached(c));
            }
            if !client.orphans.is_empty() {
                steps.push(Step::ReleaseOrphan(c));
            }
            for (u, user) in self.users[c].iter().enumerate() {
                let droppable = config.clients[c][u].may_drop && self.drops > 0;
                match &user.phase {
                    Phase::Idle if user.cycles > 0 => steps.push(Step::Start(c, u)),
                    Phase::Idle | Phase::Done => {}
                    Phase::Attempt => steps.push(Step::Attempt(c, u)),
                    Phase::Sent(_) => steps.push(Step::Run(c, u)),
                    Phase::Confirming { .. } if client.sub == Sub::Confirmed => {
                        steps.push(Step::Ready(c, u))
                    }
                    Phase::Confirming { .. } | Phase::Sleeping { .. } => {}
                    Phase::Holding { .. } => {
                        steps.push(Step::Release(c, u));
                        if self.stops > 0 {
                            steps.push(Step::Stop(c, u));
                        }
                    }
                }
                if droppable
                    && matches!(
                        user.phase,
                        Phase::Attempt
                            | Phase::Sent(_)
                            | Phase::Confirming { .. }
                            | Phase::Sleeping { .. }
                    )
                {
                    steps.push(Step::Drop(c, u));
                }
            }
        }
        if self.next_due().is_some() {
            steps.push(Step::Tick);
        }
        steps
    }

    fn listeners(&self, c: usize) -> usize {
        self.users[c].iter().filter(|u| u.listening).count()
    }

    /// The hub's `notify_one` on client `c`'s channel (a message, or a wake-up handed on):
    /// the oldest sleeper wakes, or the permit is kept. No channel (no listener): nothing.
    fn notify_one(&mut self, c: usize, how: Woke, world: &World, fx: &mut Effects) {
        if self.listeners(c) == 0 {
            return;
        }
        if self.clients[c].queue.is_empty() {
            self.clients[c].permit = Some(how);
            return;
        }
        let u = self.clients[c].queue.remove(0);
        self.woken(c, u, how, fx);
        let step = {
            let now = self.now;
            let user = &mut self.users[c][u];
            user.wait.as_mut().expect("a waiting loop").woke(now, true)
        };
        self.follow(c, u, step, world, fx);
    }

    fn woken(&mut self, c: usize, u: usize, how: Woke, fx: &mut Effects) {
        if how == (Woke::Message { handoff: true }) {
            fx.reach("a waiter of the same client woken after a local hand-off");
        }
        let _ = c;
        self.users[c][u].woke = how;
    }

    /// Drops user `u`'s listener: the last one of its client takes the channel (its permit,
    /// its subscription, the messages on their way) with it.
    fn unlisten(&mut self, c: usize, u: usize) {
        if !std::mem::take(&mut self.users[c][u].listening) {
            return;
        }
        self.clients[c].queue.retain(|&w| w != u);
        if self.listeners(c) == 0 {
            let client = &mut self.clients[c];
            client.sub = Sub::None;
            client.inbox.clear();
            client.permit = None;
        }
    }

    /// Carries out what the waiting loop of user `u` of client `c` asked for, as
    /// `src/waiting.rs` does, until it waits for something.
    fn follow(&mut self, c: usize, u: usize, mut step: WaitStep, world: &World, fx: &mut Effects) {
        loop {
            let now = self.now;
            match step {
                WaitStep::Attempt => {
                    self.users[c][u].phase = Phase::Attempt;
                    return;
                }
                WaitStep::Subscribe { confirm_until } => {
                    if !self.users[c][u].listening {
                        self.users[c][u].listening = true;
                        if self.clients[c].sub == Sub::None {
                            self.clients[c].sub = Sub::Requested;
                        }
                    }
                    match confirm_until {
                        Some(until) => {
                            self.bounded(c, u, until, "a wait for the confirmation", fx);
                            self.users[c][u].phase = Phase::Confirming { until };
                            return;
                        }
                        None => {
                            let wait = self.users[c][u].wait.as_mut().expect("a waiting loop");
                            step = wait.subscribed_at(now);
                        }
                    }
                }
                WaitStep::Sleep {
                    until,
                    wake_on_release,
                } => {
                    self.bounded(c, u, until, "a sleep", fx);
                    let user = &mut self.users[c][u];
                    if wake_on_release && user.listening {
                        if let Some(how) = self.clients[c].permit.take() {
                            // The `Notified` future takes the stored permit at once.
                            self.woken(c, u, how, fx);
                            let wait = self.users[c][u].wait.as_mut().expect("a waiting loop");
                            step = wait.woke(now, true);
                            continue;
                        }
                        self.clients[c].queue.push(u);
                    }
                    self.users[c][u].phase = Phase::Sleeping {
                        until,
                        wake_on_release,
                    };
                    return;
                }
                WaitStep::Done(end) => {
                    let pass_on = match end {
                        WaitEnd::Granted { pass_on }
                        | WaitEnd::TimedOut { pass_on, .. }
                        | WaitEnd::Failed { pass_on, .. } => pass_on,
                    };
                    let user = &mut self.users[c][u];
                    user.wait = None;
                    user.phase = Phase::Idle;
                    if pass_on && user.listening {
                        self.notify_one(c, Woke::HandedOn, world, fx);
                    }
                    self.unlisten(c, u);
                    if let WaitEnd::Granted { .. } = end {
                        // The caller of `follow` sets the hold.
                        self.users[c][u].phase = Phase::Holding {
                            hold: "".into(),
                            sent_at: 0,
                        };
                    } else if self.users[c][u].cycles == 0 {
                        self.users[c][u].phase = Phase::Done;
                    }
                    return;
                }
            }
        }
    }

    /// A sleep (or a wait for the confirmation) of user `u` until `until`: no later than
    /// the key's expiry as the user's last refusal saw it.
    fn bounded(&self, c: usize, u: usize, until: Millis, what: &str, fx: &mut Effects) {
        let user = &self.users[c][u];
        if until > user.bound {
            fx.fail(
                "a sleep is bounded by the pttl",
                format!(
                    "user {c}.{u}: {what} until {until}, past the key's expiry {} as its last \
                     refusal saw it",
                    user.bound
                ),
            );
        }
    }

    pub fn apply(&mut self, step: &Step, config: &Config, world: &World) -> Effects {
        let mut fx = Effects::default();
        match *step {
            Step::Start(c, u) => {
                let now = self.now;
                let user = &mut self.users[c][u];
                user.cycles -= 1;
                user.woke = Woke::Not;
                user.covered = false;
                let mut wait = Wait::new(
                    WaitPolicy::reentrant(TIMING),
                    now,
                    config.clients[c][u].wait,
                );
                let next = wait.start(now);
                user.wait = Some(wait);
                self.follow(c, u, next, world, &mut fx);
            }
            Step::Attempt(c, u) => {
                let woken = self.users[c][u]
                    .wait
                    .as_ref()
                    .is_some_and(|wait| wait.subscribed() && !wait.expects_held());
                let sent = self.send_attempt(c, u, config.fenced, world);
                let in_flight = match config.in_flight {
                    InFlight::No => false,
                    InFlight::All => true,
                    InFlight::Woken => woken,
                };
                if in_flight {
                    self.users[c][u].phase = Phase::Sent(Box::new(sent));
                } else {
                    self.run_attempt(c, Some(u), sent, false, world, &mut fx);
                }
            }
            Step::Run(c, u) => {
                let Phase::Sent(sent) =
                    std::mem::replace(&mut self.users[c][u].phase, Phase::Attempt)
                else {
                    unreachable!("an attempt in flight")
                };
                self.run_attempt(c, Some(u), *sent, true, world, &mut fx);
            }
            Step::RunDetached(c) => {
                let sent = self.clients[c].detached.remove(0);
                self.run_attempt(c, None, sent, false, world, &mut fx);
            }
            Step::ReleaseOrphan(c) => {
                let (owner, hold, sent_at) = self.clients[c].orphans.remove(0);
                if self.release_hold(c, owner, hold, sent_at, world, &mut fx) {
                    fx.reach("a detached attempt's hold was given back");
                }
            }
            Step::Confirm(c) => self.clients[c].sub = Sub::Confirmed,
            Step::Ready(c, u) => {
                let now = self.now;
                let wait = self.users[c][u].wait.as_mut().expect("a waiting loop");
                let next = wait.subscribed_at(now);
                self.follow(c, u, next, world, &mut fx);
            }
            Step::Deliver(c) => {
                let handoff = self.clients[c].inbox.remove(0);
                self.notify_one(c, Woke::Message { handoff }, world, &mut fx);
            }
            Step::Release(c, u) => self.release(c, u, world, &mut fx),
            Step::Stop(c, u) => {
                self.stops -= 1;
                self.users[c][u].phase = Phase::Done;
            }
            Step::Drop(c, u) => {
                self.drops -= 1;
                let user = &mut self.users[c][u];
                let wait = user.wait.take().expect("a waiting loop");
                let left = std::mem::replace(
                    &mut user.phase,
                    if user.cycles == 0 {
                        Phase::Done
                    } else {
                        Phase::Idle
                    },
                );
                if let Phase::Sent(sent) = left {
                    // `Detachable`: the attempt goes on without its caller.
                    self.clients[c].detached.push(*sent);
                }
                if wait.pass_on_if_dropped() && user.listening {
                    fx.reach("a dropped waiter handed its wake-up on");
                    self.clients[c].queue.retain(|&w| w != u);
                    self.notify_one(c, Woke::HandedOn, world, &mut fx);
                }
                self.unlisten(c, u);
            }
            Step::Tick => self.tick(world, &mut fx),
        }
        self.check(&mut fx);
        fx
    }

    /// User `u`'s attempt, as `src/lock/attempt.rs` builds it: the request (with the
    /// core's `others_waiting` over this client's listeners) and the core's `AttemptOp`,
    /// started (the call it sends).
    fn send_attempt(&mut self, c: usize, u: usize, fenced: bool, world: &World) -> Sent {
        let now = self.now;
        let listeners = self.listeners(c);
        let user = &self.users[c][u];
        let wait = user.wait.as_ref().expect("a waiting loop");
        let listening = wait.subscribed();
        let contended = wait.expects_held();
        let others_waiting = acquire::others_waiting(listeners, listening);
        let client = &mut self.clients[c];
        let request = AcquireRequest {
            owner: user.owner.clone(),
            lease_ms: LEASE,
            request: client.ids.next_id(),
            fenced,
            others_waiting,
            contended,
        };
        let mut op = AttemptOp::new(world.keys.clone(), request);
        let mut env = ModelEnv {
            now,
            ids: &mut client.ids,
        };
        let Next::Send(call) = op.start(&mut env, &mut Lane::default()) else {
            unreachable!("an attempt in a clear lane sends its request")
        };
        Sent {
            owner: user.owner.clone(),
            op,
            call,
            others_waiting,
            listening,
        }
    }

    /// Runs an attempt sent by user `u` of client `c` (`None`: a detached one, whose
    /// caller dropped it) and carries out its outcome. `split` (configurations with
    /// `in_flight`): a user's attempt that asks for another call (a bare `SET` that found
    /// the key, then `acquire.lua`) is left in flight with that call, so that other steps
    /// run between its calls, as they do between a client's round trips.
    fn run_attempt(
        &mut self,
        c: usize,
        u: Option<usize>,
        sent: Sent,
        split: bool,
        world: &World,
        fx: &mut Effects,
    ) {
        let now = self.now;
        let confirmed = self.clients[c].sub == Sub::Confirmed;
        let Sent {
            owner,
            mut op,
            call,
            others_waiting,
            listening,
        } = sent;
        let (reply, _) = world.run(&call, &mut self.ks, now);
        let mut env = ModelEnv {
            now,
            ids: &mut self.clients[c].ids,
        };
        let mut lane = Lane::default();
        let first = op.on_reply(&mut env, &mut lane, &reply);
        let first = match (first, u) {
            (Next::Send(call), Some(u)) if split => {
                fx.reach("an attempt's second call ran after other steps");
                self.users[c][u].phase = Phase::Sent(Box::new(Sent {
                    owner,
                    op,
                    call,
                    others_waiting,
                    listening,
                }));
                return;
            }
            (first, _) => first,
        };
        let (outcome, _) = drive_from(&mut op, &mut env, &mut lane, &mut self.ks, world, first);
        let tried = match outcome {
            AttemptOutcome::Granted {
                granted, sent_at, ..
            } => {
                let expired = matches!(self.free, Some(Free::Expired { .. }));
                self.free = None;
                self.current = Some(Current {
                    hold: granted.hold.clone(),
                    flagged_by: others_waiting.then_some(c),
                    refused: false,
                });
                let Some(u) = u else {
                    // Its guard is dropped at once: the hold is given back.
                    self.clients[c].orphans.push((owner, granted.hold, sent_at));
                    return;
                };
                let woke = self.users[c][u].woke;
                if matches!(woke, Woke::Message { .. }) {
                    fx.reach("a waiter woken by a release message took the lock");
                }
                if woke == Woke::Timer && expired {
                    fx.reach("a waiter woke at its pttl after the holder's key expired");
                }
                let wait = self.users[c][u].wait.as_mut().expect("a waiting loop");
                let next = wait.attempted(now, Tried::Granted, false, 0);
                self.follow(c, u, next, world, fx);
                assert!(
                    matches!(self.users[c][u].phase, Phase::Holding { .. }),
                    "a grant that the waiting loop did not end with"
                );
                self.users[c][u].phase = Phase::Holding {
                    hold: granted.hold,
                    sent_at,
                };
                return;
            }
            AttemptOutcome::Held { pttl_ms } => {
                let expiry = self
                    .ks
                    .pexpire_at(HASH, now)
                    .flatten()
                    .expect("a refusal by a key with an expiry");
                if let Some(current) = &mut self.current {
                    current.refused = true;
                }
                let Some(u) = u else {
                    return;
                };
                let user = &mut self.users[c][u];
                user.bound = expiry.max(now + 1);
                user.covered = confirmed && listening;
                Tried::Busy { within: pttl_ms }
            }
            other => panic!("client {c}: an attempt ended with {other:?}"),
        };
        let u = u.expect("a user's attempt");
        let wait = self.users[c][u].wait.as_mut().expect("a waiting loop");
        let next = wait.attempted(now, tried, false, 0);
        self.follow(c, u, next, world, fx);
    }

    fn release(&mut self, c: usize, u: usize, world: &World, fx: &mut Effects) {
        let Phase::Holding { hold, sent_at } = self.users[c][u].phase.clone() else {
            unreachable!("a release by a holder")
        };
        let owner = self.users[c][u].owner.clone();
        self.release_hold(c, owner, hold, sent_at, world, fx);
        let user = &mut self.users[c][u];
        user.phase = if user.cycles == 0 {
            Phase::Done
        } else {
            Phase::Idle
        };
    }

    /// Client `c` gives back `hold` of `owner` (granted from a call sent at `sent_at`), as
    /// a guard does: the retry bound from the core's `release::leave`, then the core's
    /// `ReleaseFlow`. The messages the release publishes go to every client whose
    /// subscription is confirmed. Whether it gave the hold back.
    ///
    /// Client 0 gives a hold back as a guard does (`release_first.lua` for a first hold,
    /// `release.lua` after it answers "hash form"); client 1 as `Lock::unlock` does, or a
    /// give-back of a hold whose form is unknown (`release.lua` at once): so the wake-ups
    /// of both scripts' string paths are checked.
    fn release_hold(
        &mut self,
        c: usize,
        owner: Arc<str>,
        hold: Arc<str>,
        sent_at: Millis,
        world: &World,
        fx: &mut Effects,
    ) -> bool {
        let now = self.now;
        let mut state = HoldState::new(hold.clone(), sent_at, LEASE, false);
        let fixed_end = acquire::fixed_end(false, sent_at, LEASE);
        let leaving = release::leave(&mut state, now, TIMING.response, false, fixed_end, LEASE);
        let mut flow = ReleaseFlow::new(
            world.keys.clone(),
            owner,
            hold,
            leaving.give_up_at,
            leaving.rearm,
        )
        .first_hold(leaving.first_hold && c == 0);
        let existed = self.key_exists();
        let mut env = ModelEnv {
            now,
            ids: &mut self.clients[c].ids,
        };
        let (outcome, published) = drive(&mut flow, &mut env, &mut self.ks, world);
        let released = match outcome {
            Ok(ReleaseOutcome::Released { remaining: Some(0) }) => {
                if self.key_exists() {
                    fx.fail(
                        "never two holders",
                        format!("client {c}: a final release left the key"),
                    );
                }
                true
            }
            Ok(ReleaseOutcome::NotHeld) => false,
            other => panic!("client {c}: a release ended with {other:?}"),
        };
        if existed && !self.key_exists() {
            self.free = Some(Free::Released);
            let current = self.current.take();
            for (d, client) in self.clients.iter_mut().enumerate() {
                if client.sub != Sub::Confirmed {
                    continue;
                }
                let handoff = current
                    .as_ref()
                    .is_some_and(|h| h.flagged_by == Some(d) && !h.refused);
                for _ in 0..published {
                    client.inbox.push(handoff);
                }
            }
        }
        released
    }

    fn tick(&mut self, world: &World, fx: &mut Effects) {
        let due = self.next_due().expect("something due");
        let existed = self.key_exists();
        self.now = due;
        self.ks.expire(due);
        if existed && !self.key_exists() {
            self.free = Some(Free::Expired { at: due });
            self.current = None;
        }
        for c in 0..self.users.len() {
            for u in 0..self.users[c].len() {
                let next = {
                    let user = &mut self.users[c][u];
                    let wait = user.wait.as_mut();
                    match (&user.phase, wait) {
                        (Phase::Sleeping { until, .. }, Some(wait)) if *until <= due => {
                            user.woke = Woke::Timer;
                            Some((true, wait.woke(due, false)))
                        }
                        (Phase::Confirming { until }, Some(wait)) if *until <= due => {
                            Some((false, wait.subscribed_at(due)))
                        }
                        _ => None,
                    }
                };
                if let Some((slept, next)) = next {
                    if slept {
                        self.clients[c].queue.retain(|&w| w != u);
                    }
                    self.follow(c, u, next, world, fx);
                }
            }
        }
    }

    /// Whether client `c` has a wake-up on its way: a pending message, a stored permit, or
    /// a user that is awake and will attempt.
    fn wake_on_its_way(&self, c: usize) -> bool {
        let client = &self.clients[c];
        !client.inbox.is_empty()
            || client.permit.is_some()
            || self.users[c].iter().any(|u| {
                matches!(
                    u.phase,
                    Phase::Attempt | Phase::Sent(_) | Phase::Confirming { .. }
                )
            })
    }

    fn check(&self, fx: &mut Effects) {
        let now = self.now;
        let mut believing: Vec<String> = Vec::new();
        for (c, users) in self.users.iter().enumerate() {
            for (u, user) in users.iter().enumerate() {
                if matches!(user.phase, Phase::Holding { sent_at, .. } if now < sent_at + LEASE) {
                    believing.push(format!("{c}.{u}"));
                }
            }
        }
        for (c, client) in self.clients.iter().enumerate() {
            for (_, _, sent_at) in &client.orphans {
                if now < sent_at + LEASE {
                    believing.push(format!("{c}.detached"));
                }
            }
        }
        if believing.len() > 1 {
            fx.fail(
                "never two holders",
                format!("users {believing:?} hold at once"),
            );
        }
        if self.key_exists() {
            return;
        }
        for (c, users) in self.users.iter().enumerate() {
            for (u, user) in users.iter().enumerate() {
                let Phase::Sleeping {
                    until,
                    wake_on_release,
                } = user.phase
                else {
                    continue;
                };
                let on_its_way = wake_on_release && self.wake_on_its_way(c);
                match self.free {
                    Some(Free::Released) if user.covered && wake_on_release && !on_its_way => fx
                        .fail(
                            "no wake-up lost without a fault",
                            format!(
                                "the lock was released and user {c}.{u} sleeps until {until} \
                                 with no wake-up on its way to client {c}"
                            ),
                        ),
                    Some(Free::Expired { at }) if !(user.covered && on_its_way) => fx.fail(
                        "a sleep is bounded by the pttl",
                        format!(
                            "the lock expired at {at} and user {c}.{u} sleeps until {until} \
                             with no wake-up on its way"
                        ),
                    ),
                    _ => {}
                }
            }
        }
    }

    pub fn describe(&self) -> String {
        let mut out = format!("t={} key:", self.now);
        match self.ks.lock_hash(keys().hash.as_bytes(), self.now) {
            None => out.push_str(&format!(" absent ({:?})", self.free)),
            Some(fields) => {
                let owner = fields
                    .keys()
                    .find(|f| f.starts_with(b"o"))
                    .map(|f| String::from_utf8_lossy(f).into_owned());
                let marked = fields.contains_key(b"\x01w".as_slice());
                let expiry = self
                    .ks
                    .pexpire_at(keys().hash.as_bytes(), self.now)
                    .flatten();
                out.push_str(&format!(
                    " {owner:?}{} exp {expiry:?}",
                    if marked { " marked" } else { "" }
                ));
            }
        }
        for (c, client) in self.clients.iter().enumerate() {
            out.push_str(&format!(
                " | c{c} {:?} inbox {} permit {:?}:",
                client.sub,
                client.inbox.len(),
                client.permit
            ));
            for (u, user) in self.users[c].iter().enumerate() {
                let phase = match &user.phase {
                    Phase::Idle => format!("idle({})", user.cycles),
                    Phase::Attempt => "attempt".into(),
                    Phase::Sent(_) => "sent".into(),
                    Phase::Confirming { until } => format!("confirming<={until}"),
                    Phase::Sleeping {
                        until,
                        wake_on_release,
                    } => format!(
                        "asleep<={until}{}{}",
                        if *wake_on_release { "" } else { " deaf" },
                        if user.covered { " covered" } else { "" }
                    ),
                    Phase::Holding { sent_at, .. } => format!("holds@{sent_at}"),
                    Phase::Done => "done".into(),
                };
                out.push_str(&format!(" u{u} {phase}"));
                if user.listening {
                    out.push('*');
                }
            }
        }
        out
    }
}

/// The plain lock's wake-up model, for the one checker (`tests/protocol/checker.rs`).
pub struct Wake;

impl Model for Wake {
    type Config = Config;
    type State = State;
    type Step = Step;
    type World = World;
    const MILESTONES: &'static [&'static str] = &MILESTONES;

    fn name(config: &Config) -> &'static str {
        config.name
    }
    fn initial(config: &Config) -> State {
        State::initial(config)
    }
    fn steps(state: &State, config: &Config) -> Vec<Step> {
        state.steps(config)
    }
    fn apply(state: &mut State, step: &Step, world: &World, config: &Config) -> Stepped {
        let effects = state.apply(step, config, world);
        Stepped {
            milestones: effects.milestones,
            violations: effects.violations,
        }
    }
    fn describe(state: &State) -> String {
        state.describe()
    }
    fn extra_depth(config: &Config) -> usize {
        // A debug build (plain `cargo test`) runs the run's depth only.
        if cfg!(debug_assertions) {
            0
        } else {
            config.extra
        }
    }
}
