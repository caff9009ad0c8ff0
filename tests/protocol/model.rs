//! The model the protocol checker explores: a few clients, one lock, one Redis.
//!
//! Each client is driven by the library's own protocol core (`redis_locks_protocol`):
//! its request builders and reply readers, its lane, its release state machine and its
//! hold bookkeeping. Redis is the in-memory keyspace of `keyspace.rs`, and every call runs
//! the real script from `lua/` in an embedded Lua 5.1 (`lua.rs`). What the model adds is
//! only what the async runtime does around the core (who sends what when) and the world:
//! users, the clock, an administrator, faults and restarts.
//!
//! Time is in model milliseconds. A call is sent, then executed or lost or refused as
//! busy; an executed call's reply is delivered or lost. The clock only moves when no call
//! is waiting to execute (but see the watchdog's, below), so a request executes at its
//! send time (the client's lease estimate is then exact, the tightest case for "never two
//! holders"); a reply may arrive any time later, or never. A call the client timed out on
//! (`TimeOut`: it stays on the connection, a stray) is the exception: the clock moves
//! while it waits, so it may run late (`ExecuteStray`), after the lost acquire's
//! reconciliation passed a lease from when the loss was noticed, as on a stalled server.
//! The core's `Reconcile` must then keep asking (every probe failure before the
//! connection is found gone moves its bound a lease on); "no orphans" finds a
//! reconciliation that stops at the first bound (it did, until the multi-lock's checker
//! found it).
//!
//! The watchdog: a tick is due at every [`PERIOD`] while the client has an active hold; it
//! sends one `renew.lua` call for all of them (client 0 with the keys declared, the others
//! with the keys in ARGV: both layouts are checked), and its reply goes through the core's
//! `decode_renew` and `HoldState::on_renewal`, as `watchdog::settle` does. As in the
//! library (`watchdog::Watchdog::run`), up to [`timing::MAX_TICKS_IN_FLIGHT`] ticks of one
//! client may be in flight at once: a due tick is sent only while fewer are, and is skipped
//! otherwise. Each renewal has its own send time and is executed, lost, refused (BUSY) and
//! answered independently of the others, in any order (each tick's calls are separate
//! tasks, settled in whatever order they are polled, and a connection rebuilt between two
//! ticks does not keep their order either).
//!
//! In every configuration but one, the clock does not move while a renewal is in flight,
//! so a client's ticks never overlap there. In the configuration named
//! [`OVERLAPPING_TICKS`] (`overlapping_ticks()`: two clients, one acquire each, one fault,
//! one force-unlock; selected by its name, as `Config` is spelled out by files this one
//! does not own), the clock moves while renewals are in flight: a renewal may run later
//! than it was sent, two may be in flight at once, and an older one may be answered after
//! a newer one, or lost while the newer one is answered. One that outlives the renewal
//! call timeout (`timing::renewal_call_timeout`, one period here) is given up when the
//! clock passes it: its reply is not read, and a request of it that had not run never
//! runs (not modelled: a given-up renewal running later, which only lengthens an expiry
//! that nobody believes in). Allowing overlap everywhere would multiply the state space
//! well past the budget; the configuration is about 0.3 M states.
//!
//! Extends: in the configuration named [`EXTENDS`] (`extends()`: two clients (owners), one
//! acquire each, one fault, one force-unlock, four clock steps, two extends per run;
//! selected by its name, as for the overlapping ticks) a user may extend a guard it
//! believes in (`Guard::extend` checks first that its hold is not lost, by the clock too):
//! a watchdog guard or a fixed-lease one, to one of [`EXTEND_LEASES`] (twice the
//! watchdog's lease: the watchdog's next tick then asks `renew.lua` for less than the
//! expiry the extend set; one period: less than the expiry a watchdog hold has). As in
//! the library, the extend is one call in the user's slot (`OpKind::Extend`), not re-sent
//! (a failure is its caller's error): the core's `extend::extension_call` with
//! `HoldShape::LockHash` (what `HoldEntry::extension` sends: `renew.lua` for that one hold
//! to the extend's lease), sent now; its reply is read as `HoldEntry::on_extension_reply`
//! reads it: `decode_renew` for one hold, then gone: `HoldState::on_gone` (its guards are
//! told), current: `HoldState::on_extended` from the send time. It meets the faults of
//! every call (lost request or reply, BUSY, a time-out that leaves it a stray that may run
//! late). The watchdog then renews (or checks) the hold as before, with what
//! `on_extended` left it. About 0.7 M states; the other configurations have no extend.
//!
//! Besides the properties of [`PROPERTIES`], checked in every state: a hold's belief never
//! drops below what its client was told (its grants, each renewal reply that found it
//! current while a watchdog guard was there, each extend reply that found it current),
//! short of a re-arm at a partial release; else
//! a hold Redis keeps would be declared lost (reported as "losses are told": a loss told
//! that is not one). Only overlapping ticks can break it: an older tick's late reply.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::sync::Arc;

use redis_locks_protocol::acquire::{self, AcquireRequest, Granted};
use redis_locks_protocol::attempt::{AttemptOp, AttemptOutcome, ReconcileRound};
use redis_locks_protocol::extend::{HoldShape, extension_call};
use redis_locks_protocol::hold::{HoldState, Joining, Rearm, drift};
use redis_locks_protocol::lane::Lane;
use redis_locks_protocol::release::{
    self, Found, ReleaseFlow, ReleaseOp, ReleaseOutcome, ReleaseResult, Told, told,
};
use redis_locks_protocol::renew::{
    RenewItem, Renewed, decode_renew, renew_call, renew_call_on_node,
};
use redis_locks_protocol::timing;
use redis_locks_protocol::{
    Call, Env, Failure, LockKeys, Machine, Millis, Next, Reply, RequestIds, ScriptId,
    force_unlock_call,
};

use crate::checker::{Model, Stepped};
use crate::keyspace::Keyspace;
use crate::lua::ScriptRunner;

/// The watchdog lease.
pub const LEASE: Millis = 30;
/// The watchdog's period: a third of the lease.
pub const PERIOD: Millis = LEASE / 3;
/// The fixed lease of `with_lease` acquisitions.
pub const FIXED: Millis = 15;
/// How far one clock step moves.
pub const STEP: Millis = PERIOD;
/// The leases of a guard's `extend` (`Guard::extend`) in [`EXTENDS`]: twice the
/// watchdog's (longer than any expiry the watchdog or a fixed lease sets, so the
/// watchdog's next renewal asks for less than the expiry the extend set), and one
/// period (shorter than the expiry a watchdog hold has when it is extended).
pub const EXTEND_LEASES: [Millis; 2] = [2 * LEASE, PERIOD];

pub use crate::lua::Scripts;

/// The parties and the bounds of one exploration.
#[derive(Clone, Debug)]
pub struct Config {
    /// Name of the configuration, for the report.
    pub name: &'static str,
    /// One owner id per client; two clients with the same owner share holds (a handover).
    pub owners: Vec<&'static str>,
    /// Acquire calls each client's user may make.
    pub acquires: u8,
    /// Whether acquisitions ask for fencing tokens.
    pub fenced: bool,
    /// Faults (lost request, lost reply, busy) in one run.
    pub faults: u8,
    /// Redis restarts with data loss in one run.
    pub restarts: u8,
    /// Force-unlocks by an administrator in one run.
    pub force_unlocks: u8,
    /// Clock steps in one run.
    pub advances: u8,
}

/// Things the checker must see at least once, so that the model is not vacuous.
pub const MILESTONES: [&str; 14] = [
    "hand-off to another owner",
    "nested release",
    "retried release",
    "reconciled orphan",
    "loss told",
    "two renewals of one client in flight at once",
    "an older renewal's reply arrived after a newer one's",
    "a renewal failed while another of its client was in flight",
    "two renewals of one client executed before either was answered",
    "an extend lengthened a hold",
    "an extend found its hold gone",
    "a watchdog tick after an extend",
    "a re-entry turned a first hold's string into the hash form",
    "a first hold's release found the hash form and sent release.lua",
];

/// A re-entry found the lock in the string form of a first hold (`lua/take.lua`) and turned
/// it into the hash form: reached by the unfenced configurations that re-enter.
pub const STRING_REENTRY_MILESTONE: usize = 12;

/// `release_first.lua` found the hold in the hash form (another client of the owner
/// re-entered it) and the release went on with `release.lua`: the re-arm configuration
/// (one owner on two clients, explored deeper) must reach it.
pub const FIRST_RELEASE_FELL_BACK_MILESTONE: usize = 13;

/// The first of the milestones that only [`EXTENDS`] reaches.
pub const FIRST_EXTEND_MILESTONE: usize = 9;

/// The first of the milestones that only [`OVERLAPPING_TICKS`] reaches (at depth 11 and
/// more: a debug build's smaller bound does not get there), up to
/// [`FIRST_EXTEND_MILESTONE`].
pub const FIRST_OVERLAP_MILESTONE: usize = 5;

/// The name of the one configuration in which the clock moves while renewals are in
/// flight, so that a client's ticks overlap (see the header).
pub const OVERLAPPING_TICKS: &str = "overlapping watchdog ticks";

/// The configuration in which a client's watchdog ticks overlap: two clients (owners),
/// one acquire each (so one client with a hold at a time, the other trying to take it),
/// one fault, one force-unlock (a renewal that ran before it and one that runs after it
/// in flight at once).
pub fn overlapping_ticks() -> Config {
    Config {
        name: OVERLAPPING_TICKS,
        owners: vec!["a", "b"],
        acquires: 1,
        fenced: false,
        faults: 1,
        restarts: 0,
        force_unlocks: 1,
        advances: 4,
    }
}

/// The milestones the overlapping configuration must reach at the default bound.
pub fn overlapping_ticks_must_reach() -> Vec<&'static str> {
    let mut must = vec![MILESTONES[4]];
    must.extend_from_slice(&MILESTONES[FIRST_OVERLAP_MILESTONE..FIRST_EXTEND_MILESTONE]);
    must
}

/// The name of the re-arm configuration.
pub const REARM: &str = "one owner on two clients, re-arm";

/// How much deeper than the run's depth [`rearm`] is explored: the shortest path to a
/// re-arm that cuts short another client's hold of the same owner (client 0 holds twice,
/// client 1 joins with a longer lease, client 0 gives one back, the clock passes client
/// 0's end) is 17 steps, 4 more than the default bound; a configuration with nothing else
/// going on keeps that depth cheap (about 30 s).
pub const REARM_EXTRA_DEPTH: usize = 4;

/// One owner on two clients and nothing else going on, explored deeper (see
/// [`REARM_EXTRA_DEPTH`]): partial releases that re-arm the expiry.
pub fn rearm() -> Config {
    Config {
        name: REARM,
        owners: vec!["a", "a"],
        acquires: 2,
        fenced: false,
        faults: 0,
        restarts: 0,
        force_unlocks: 0,
        advances: 2,
    }
}

/// The name of the one configuration whose users extend their guards (`Guard::extend`;
/// selected by its name, as for [`OVERLAPPING_TICKS`]).
pub const EXTENDS: &str = "extend a watchdog or a fixed lease";

/// Extends in one run of [`EXTENDS`].
pub const EXTENDS_PER_RUN: u8 = 2;

/// The configuration in which users extend their guards (see the header): two clients
/// (owners), one acquire each, one fault, one force-unlock (an extend that finds its hold
/// gone), [`EXTENDS_PER_RUN`] extends, and the clock steps for watchdog ticks after them.
pub fn extends() -> Config {
    Config {
        name: EXTENDS,
        owners: vec!["a", "b"],
        acquires: 1,
        fenced: false,
        faults: 1,
        restarts: 0,
        force_unlocks: 1,
        advances: 4,
    }
}

/// The milestones the extend configuration must reach at the default bound.
pub fn extends_must_reach() -> Vec<&'static str> {
    let mut must = vec![MILESTONES[4]];
    must.extend_from_slice(&MILESTONES[FIRST_EXTEND_MILESTONE..STRING_REENTRY_MILESTONE]);
    must
}

/// One step of the world.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// A client's user calls acquire (watchdog lease or fixed lease).
    Acquire { client: usize, watchdog: bool },
    /// A client's user releases (or drops) a guard.
    Release {
        client: usize,
        guard: usize,
        drop: bool,
    },
    /// A client's user extends a guard it believes in (`Guard::extend`) to `lease` (one
    /// of [`EXTEND_LEASES`]).
    Extend {
        client: usize,
        guard: usize,
        lease: Millis,
    },
    /// A client's background task probes a pending lost acquire.
    Reconcile { client: usize },
    /// A client's watchdog sends its tick.
    Tick { client: usize },
    /// Redis executes a client's sent call (`renewal`: the watchdog's call; in this and
    /// the next four steps, the client's oldest renewal in flight; a newer one's steps are
    /// [`Step::NewerRenewal`]).
    Execute { client: usize, renewal: bool },
    /// A sent call never reaches Redis.
    LoseRequest { client: usize, renewal: bool },
    /// Redis answers a sent call with BUSY/LOADING (it does not run).
    Busy { client: usize, renewal: bool },
    /// An executed call's reply reaches the client.
    Deliver { client: usize, renewal: bool },
    /// An executed call's reply is lost (or arrives after the client gave up).
    LoseReply { client: usize, renewal: bool },
    /// What happens to a client's renewal that is not its oldest one in flight (`index`
    /// in the order they were sent, from 1).
    NewerRenewal {
        client: usize,
        index: usize,
        fate: Fate,
    },
    /// A client's call (sent or executed) gets no reply within the response timeout.
    TimeOut { client: usize },
    /// A request the client gave up on runs after all (late, but before the client's
    /// next request on the connection).
    ExecuteStray { client: usize },
    /// A request the client gave up on never runs (its connection went away).
    DropStray { client: usize },
    /// An administrator force-unlocks the lock.
    ForceUnlock,
    /// Redis restarts and loses all data.
    Restart,
    /// The clock moves by one step.
    Advance,
}

/// What happens to a renewal in flight: the steps `Execute`, `LoseRequest`, `Busy`,
/// `Deliver` and `LoseReply` of one renewal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fate {
    Execute,
    LoseRequest,
    Busy,
    Deliver,
    LoseReply,
}

impl Step {
    fn is_fault(&self) -> bool {
        matches!(
            self,
            Step::LoseRequest { .. }
                | Step::Busy { .. }
                | Step::LoseReply { .. }
                | Step::TimeOut { .. }
                | Step::NewerRenewal {
                    fate: Fate::LoseRequest | Fate::Busy | Fate::LoseReply,
                    ..
                }
        )
    }

    /// A renewal's step: (client, index in its renewals in flight, what happens).
    fn renewal(&self) -> Option<(usize, usize, Fate)> {
        match *self {
            Step::Execute {
                client,
                renewal: true,
            } => Some((client, 0, Fate::Execute)),
            Step::LoseRequest {
                client,
                renewal: true,
            } => Some((client, 0, Fate::LoseRequest)),
            Step::Busy {
                client,
                renewal: true,
            } => Some((client, 0, Fate::Busy)),
            Step::Deliver {
                client,
                renewal: true,
            } => Some((client, 0, Fate::Deliver)),
            Step::LoseReply {
                client,
                renewal: true,
            } => Some((client, 0, Fate::LoseReply)),
            Step::NewerRenewal {
                client,
                index,
                fate,
            } => Some((client, index, fate)),
            _ => None,
        }
    }

    /// The step of `fate` for a client's operation (`renewal` none) or for its renewal
    /// at that index of those in flight.
    fn of_flight(client: usize, renewal: Option<usize>, fate: Fate) -> Step {
        if let Some(index @ 1..) = renewal {
            return Step::NewerRenewal {
                client,
                index,
                fate,
            };
        }
        let renewal = renewal.is_some();
        match fate {
            Fate::Execute => Step::Execute { client, renewal },
            Fate::LoseRequest => Step::LoseRequest { client, renewal },
            Fate::Busy => Step::Busy { client, renewal },
            Fate::Deliver => Step::Deliver { client, renewal },
            Fate::LoseReply => Step::LoseReply { client, renewal },
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Flight {
    Sent(Call),
    Executed(Reply),
}

/// A guard a user holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Guard {
    /// Index into the client's hold states.
    state: usize,
    hold: Arc<str>,
    watchdog: bool,
    /// For a fixed lease: its end (the acquire's send time plus the lease).
    fixed_end: Option<Millis>,
    /// The expiry re-arm its release sends (computed when it left, as the driver does).
    rearm: Option<Rearm>,
    released: bool,
}

/// A client's operation in its lane: one of the library's own machines.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum OpKind {
    Acquire {
        watchdog: bool,
        op: AttemptOp,
    },
    Release {
        guard: usize,
        reported: bool,
        flow: ReleaseFlow,
    },
    Reconcile {
        round: ReconcileRound,
    },
    /// A guard's `extend` (not one of the core's machines: one call, not re-sent, as
    /// `Guard::extend` sends it; a failure is its caller's error).
    Extend {
        guard: usize,
        sent_at: Millis,
        lease: Millis,
    },
}

/// What an operation is fed.
enum Event<'a> {
    Start,
    Reply(&'a Reply),
    Failure(Failure),
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

/// Feeds `event` to `machine` until it asks for a call (`Ok`) or is done (`Err`).
fn feed<M: Machine<Ctx = Lane>>(
    machine: &mut M,
    env: &mut ModelEnv,
    lane: &mut Lane,
    event: Event,
) -> Result<Call, M::Outcome> {
    let mut next = match event {
        Event::Start => machine.start(env, lane),
        Event::Reply(reply) => machine.on_reply(env, lane, reply),
        Event::Failure(failure) => machine.on_failure(env, lane, failure),
    };
    loop {
        match next {
            Next::Send(call) => return Ok(call),
            Next::SleepUntil(_) => next = machine.resume(env, lane),
            Next::Done(outcome) => return Err(outcome),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Op {
    kind: OpKind,
    flight: Flight,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Renewal {
    items: Vec<RenewItem>,
    /// The state (by index) each item renews, as the watchdog's batch carries its
    /// registry entries: a reply is applied to the state the item was built from, never
    /// to an older state of the same hold id (a hold told lost, then granted again to a
    /// re-entry that was in flight, is a new state).
    states: Vec<usize>,
    sent_at: Millis,
    flight: Flight,
    /// Holds (by state index) first seen gone after this renewal had run: its reply
    /// cannot know.
    blind: Vec<usize>,
    /// A newer renewal of the client was answered before this one.
    overtaken: bool,
    /// Sent (renewing) after an extend of one of its holds was confirmed (a milestone).
    after_extend: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Client {
    owner: Arc<str>,
    ids: RequestIds,
    lane: Lane,
    states: Vec<HoldState>,
    current: Option<usize>,
    guards: Vec<Guard>,
    op: Option<Op>,
    /// The watchdog's ticks in flight, oldest first (at most
    /// `timing::MAX_TICKS_IN_FLIGHT`).
    renewals: Vec<Renewal>,
    tick_due: bool,
    acquires_left: u8,
    /// Holds (by state index) seen gone from Redis while still active (each renewal that
    /// had already run then is blind to it).
    gone_since: Vec<usize>,
    /// For each hold state: the deadline that what it was told confirms (its grants and
    /// joins, each renewal reply that found it current while a watchdog guard was there),
    /// lowered only by a re-arm at a partial release. Belief must never drop below it:
    /// the hold would be declared lost while Redis keeps it.
    kept: Vec<Millis>,
    /// For each hold state: whether an extend of it was confirmed.
    extended: Vec<bool>,
    /// A request the client gave up on (timed out before Redis ran it) that may still
    /// run: on the client's one connection it runs, if at all, before the client's next
    /// request (TCP keeps a connection's requests in order), at any point until then.
    stray: Option<Call>,
}

/// The current hold id and each owner's hold count.
type CurrentHold = (Arc<str>, Vec<(String, u64)>);

/// The whole world.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    now: Millis,
    ks: Keyspace,
    clients: Vec<Client>,
    faults_left: u8,
    restarts_left: u8,
    force_left: u8,
    advances_left: u8,
    /// Hold ids removed behind their holders' backs (force-unlock, data loss).
    doomed: BTreeSet<Arc<str>>,
    /// Hold ids whose release or reconciliation gave up (they expire with their lease).
    abandoned: BTreeSet<Arc<str>>,
    /// Release request ids that some execution applied.
    applied: BTreeSet<String>,
    highest_token: u64,
    last_fresh_owner: Option<Arc<str>>,
    fenced: bool,
    /// Whether the clock moves while renewals are in flight ([`OVERLAPPING_TICKS`]).
    ticks_overlap: bool,
    /// Extends the users may still make ([`EXTENDS`] only).
    extends_left: u8,
}

/// What a step did that the checker reports on.
#[derive(Debug, Default)]
pub struct Effects {
    /// Milestones reached (indices into [`MILESTONES`]).
    pub milestones: Vec<usize>,
    /// A property violated: its name and why.
    pub violation: Option<(&'static str, String)>,
}

/// The properties, by name.
pub const PROPERTIES: [&str; 6] = [
    "never two holders",
    "losses are told",
    "release is true",
    "no orphans",
    "no garbage",
    "tokens only go up",
];

/// The lock's keys in the model.
pub fn keys() -> LockKeys {
    LockKeys {
        hash: "L:{x}".into(),
        fence: "L:{x}:fence".into(),
        channel: "L:{x}:db0:released".into(),
        sharded: false,
    }
}

/// Runs calls against the keyspace with the model's scripts.
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

    fn run(&self, call: &Call, ks: &mut Keyspace, now: Millis) -> Reply {
        let keys: Vec<Vec<u8>> = call.keys.iter().map(|k| k.as_bytes().to_vec()).collect();
        let args: Vec<Vec<u8>> = call.args.iter().map(|a| a.as_bytes().to_vec()).collect();
        let reply = self
            .runner
            .eval(self.scripts.source(call.script), &keys, &args, ks, now);
        ks.published.clear();
        reply
    }
}

impl State {
    pub fn initial(config: &Config) -> Self {
        let clients = config
            .owners
            .iter()
            .enumerate()
            .map(|(i, owner)| Client {
                owner: (*owner).into(),
                ids: RequestIds::new(format!("c{i}")),
                lane: Lane::default(),
                states: Vec::new(),
                current: None,
                guards: Vec::new(),
                op: None,
                renewals: Vec::new(),
                tick_due: false,
                acquires_left: config.acquires,
                gone_since: Vec::new(),
                kept: Vec::new(),
                extended: Vec::new(),
                stray: None,
            })
            .collect();
        State {
            now: 0,
            ks: Keyspace::default(),
            clients,
            faults_left: config.faults,
            restarts_left: config.restarts,
            force_left: config.force_unlocks,
            advances_left: config.advances,
            doomed: BTreeSet::new(),
            abandoned: BTreeSet::new(),
            applied: BTreeSet::new(),
            highest_token: 0,
            last_fresh_owner: None,
            fenced: config.fenced,
            ticks_overlap: config.name == OVERLAPPING_TICKS,
            extends_left: if config.name == EXTENDS {
                EXTENDS_PER_RUN
            } else {
                0
            },
        }
    }

    /// Whether any call waits to execute (`renewals`: counting the watchdog's).
    fn any_sent(&self, renewals: bool) -> bool {
        self.clients.iter().any(|c| c.stray.is_some()) || self.any_sent_on_time(renewals)
    }

    /// Whether a call that is not a stray waits to execute: the clock waits for those
    /// only (a stray may run after the clock moved, as on a stalled server).
    fn any_sent_on_time(&self, renewals: bool) -> bool {
        self.clients.iter().any(|c| {
            matches!(
                c.op,
                Some(Op {
                    flight: Flight::Sent(_),
                    ..
                })
            ) || (renewals
                && c.renewals
                    .iter()
                    .any(|r| matches!(r.flight, Flight::Sent(_))))
        })
    }

    /// Whether any call is in flight at all (the watchdog's only where ticks do not
    /// overlap). The clock moves only when none is: a reply that would come later than
    /// the client's response timeout is a lost reply.
    fn any_flight(&self) -> bool {
        self.clients
            .iter()
            .any(|c| c.op.is_some() || (!self.ticks_overlap && !c.renewals.is_empty()))
    }

    /// The flight of a client's operation, or of its oldest renewal.
    fn flight(&self, client: usize, renewal: bool) -> Option<&Flight> {
        let c = &self.clients[client];
        if renewal {
            c.renewals.first().map(|r| &r.flight)
        } else {
            c.op.as_ref().map(|o| &o.flight)
        }
    }

    /// Every step enabled in this state, in a fixed order (replays name steps by index).
    pub fn steps(&self) -> Vec<Step> {
        let mut steps = Vec::new();
        for (i, c) in self.clients.iter().enumerate() {
            if c.op.is_none() {
                if c.acquires_left > 0 {
                    steps.push(Step::Acquire {
                        client: i,
                        watchdog: true,
                    });
                    steps.push(Step::Acquire {
                        client: i,
                        watchdog: false,
                    });
                }
                for (g, guard) in c.guards.iter().enumerate() {
                    if !guard.released {
                        steps.push(Step::Release {
                            client: i,
                            guard: g,
                            drop: false,
                        });
                        steps.push(Step::Release {
                            client: i,
                            guard: g,
                            drop: true,
                        });
                    }
                }
                // `Guard::extend` checks first that its hold is not lost (by the clock too).
                if self.extends_left > 0 {
                    for (g, guard) in c.guards.iter().enumerate() {
                        let state = &c.states[guard.state];
                        if !guard.released && state.lost().is_none() && self.now < state.deadline()
                        {
                            for lease in EXTEND_LEASES {
                                steps.push(Step::Extend {
                                    client: i,
                                    guard: g,
                                    lease,
                                });
                            }
                        }
                    }
                }
                if c.lane.is_pending() {
                    steps.push(Step::Reconcile { client: i });
                }
            }
            // As the watchdog: a due tick is sent only while fewer than the maximum of
            // ticks are in flight (else it is skipped when the clock moves on).
            if c.tick_due && c.renewals.len() < timing::MAX_TICKS_IN_FLIGHT {
                steps.push(Step::Tick { client: i });
            }
            if c.stray.is_some() {
                steps.push(Step::ExecuteStray { client: i });
                steps.push(Step::DropStray { client: i });
            }
            let flights = c.op.iter().map(|o| (None, &o.flight)).chain(
                c.renewals
                    .iter()
                    .enumerate()
                    .map(|(r, x)| (Some(r), &x.flight)),
            );
            for (index, flight) in flights {
                let step = |fate: Fate| Step::of_flight(i, index, fate);
                match flight {
                    // Its connection runs a stray request first.
                    Flight::Sent(_) if c.stray.is_some() => {}
                    Flight::Sent(_) => {
                        steps.push(step(Fate::Execute));
                        if self.faults_left > 0 {
                            steps.push(step(Fate::LoseRequest));
                            steps.push(step(Fate::Busy));
                        }
                    }
                    Flight::Executed(_) => {
                        steps.push(step(Fate::Deliver));
                        if self.faults_left > 0 {
                            steps.push(step(Fate::LoseReply));
                        }
                    }
                }
            }
            if self.faults_left > 0 && c.op.is_some() {
                steps.push(Step::TimeOut { client: i });
            }
        }
        let quiet = !self.any_sent(true);
        if self.force_left > 0 && quiet {
            steps.push(Step::ForceUnlock);
        }
        if self.restarts_left > 0 && quiet {
            steps.push(Step::Restart);
        }
        if self.advances_left > 0
            && !self.any_flight()
            && !self.any_sent_on_time(!self.ticks_overlap)
            && !self
                .clients
                .iter()
                .any(|c| c.tick_due && c.renewals.len() < timing::MAX_TICKS_IN_FLIGHT)
        {
            steps.push(Step::Advance);
        }
        steps
    }

    /// Applies one step and checks every property afterwards.
    pub fn apply(&mut self, step: &Step, world: &World) -> Effects {
        let mut fx = Effects::default();
        if step.is_fault() {
            self.faults_left -= 1;
        }
        if let Some((client, index, fate)) = step.renewal() {
            self.renewal_step(client, index, fate, world, &mut fx);
            return self.after_step(fx);
        }
        match *step {
            Step::Acquire { client, watchdog } => {
                self.clients[client].acquires_left -= 1;
                self.start_acquire(client, watchdog, world, &mut fx);
            }
            Step::Release {
                client,
                guard,
                drop,
            } => self.start_release(client, guard, !drop, world, &mut fx),
            Step::Extend {
                client,
                guard,
                lease,
            } => {
                self.extends_left -= 1;
                let now = self.now;
                let c = &mut self.clients[client];
                // `Guard::extend`'s call (`HoldEntry::extension`): the core's
                // `extension_call` for the guard's hold in the lock hash, sent now.
                let hold = c.states[c.guards[guard].state].hold().clone();
                let call =
                    extension_call(lease, world.keys.hash.clone(), hold, HoldShape::LockHash);
                let kind = OpKind::Extend {
                    guard,
                    sent_at: now,
                    lease,
                };
                self.put_in_flight(client, kind, call);
            }
            Step::Reconcile { client } => {
                let round = ReconcileRound::new(world.keys.clone());
                self.drive(client, OpKind::Reconcile { round }, Event::Start, &mut fx);
            }
            Step::Tick { client } => self.start_tick(client, &mut fx),
            Step::Execute { client, .. } => self.execute(client, world, &mut fx),
            Step::LoseRequest { client, .. } | Step::Busy { client, .. } => {
                let failure = if matches!(step, Step::Busy { .. }) {
                    Failure::Transient("BUSY".into())
                } else {
                    Failure::Lost
                };
                self.fail(client, failure, &mut fx);
            }
            Step::TimeOut { client } => {
                if let Some(Op {
                    flight: Flight::Sent(call),
                    ..
                }) = &self.clients[client].op
                {
                    self.clients[client].stray = Some(call.clone());
                }
                self.fail(client, Failure::TimedOut, &mut fx);
            }
            Step::ExecuteStray { client } => {
                if let Some(call) = self.clients[client].stray.take() {
                    self.run_call(&call, world, &mut fx);
                }
            }
            Step::DropStray { client } => {
                self.clients[client].stray = None;
            }
            Step::Deliver { client, .. } => {
                let reply = match self.flight(client, false) {
                    Some(Flight::Executed(reply)) => reply.clone(),
                    _ => return fx,
                };
                self.on_reply(client, reply, &mut fx);
            }
            Step::LoseReply { client, .. } => {
                self.fail(client, Failure::Lost, &mut fx);
            }
            Step::ForceUnlock => {
                self.force_left -= 1;
                self.doom_current();
                let call = force_unlock_call(&world.keys);
                let now = self.now;
                world.run(&call, &mut self.ks, now);
            }
            Step::Restart => {
                // A restart takes at least a millisecond: the fencing floor (server time in
                // microseconds) then exceeds every token handed out before, as long as fewer
                // than 1000 were handed out per millisecond (the README's assumption).
                self.restarts_left -= 1;
                self.doom_current();
                self.ks.flush_all();
                self.now += 1;
            }
            Step::NewerRenewal { .. } => {}
            Step::Advance => {
                self.advances_left -= 1;
                self.now = self.next_event();
                self.ks.expire(self.now);
                let now = self.now;
                let timeout = timing::renewal_call_timeout(STEP, LEASE);
                let boundary = now % PERIOD == 0;
                for c in &mut self.clients {
                    // A renewal call that took longer than its timeout is given up: its
                    // reply, if any, is not read.
                    c.renewals.retain(|r| now - r.sent_at <= timeout);
                    // A tick due and not sent (too many in flight) was skipped.
                    c.tick_due = boundary && c.states.iter().any(HoldState::is_active);
                }
                self.clock_all(&mut fx);
            }
        }
        self.after_step(fx)
    }

    fn after_step(&mut self, mut fx: Effects) -> Effects {
        // The watchdog declares overdue holds lost as soon as their deadline passes.
        self.clock_all(&mut fx);
        self.ks.published.clear();
        if fx.violation.is_none() {
            fx.violation = self.check();
        }
        fx
    }

    /// The next instant at which the passing of time changes anything: a watchdog tick
    /// (every [`PERIOD`]), a believed hold's deadline, the lock key's expiry. The clock
    /// jumps there, so every such instant is visited (as 1 ms steps would), without the
    /// steps in between, where nothing but the clock's value changes.
    fn next_event(&self) -> Millis {
        let mut next = (self.now / PERIOD + 1) * PERIOD;
        for c in &self.clients {
            for state in c.states.iter().filter(|s| s.is_active()) {
                if state.deadline() > self.now {
                    next = next.min(state.deadline());
                }
            }
        }
        // The key still exists at its expiry time and is gone a millisecond later: both
        // instants matter.
        if let Some(Some(at)) = self.ks.pexpire_at(b"L:{x}", self.now) {
            if at > self.now {
                next = next.min(at);
            } else {
                next = next.min(at + 1);
            }
        }
        next
    }

    /// The current hold id in Redis and every owner's count.
    fn current_hold(&self) -> Option<CurrentHold> {
        let hash = self.ks.lock_hash(b"L:{x}", self.now)?;
        let hold = hash.get(b"\x01h".as_slice())?;
        let hold: Arc<str> = String::from_utf8_lossy(hold).into_owned().into();
        let counts = hash
            .iter()
            .filter(|(field, _)| !field.starts_with(b"\x01"))
            .map(|(field, value)| {
                (
                    String::from_utf8_lossy(field).into_owned(),
                    String::from_utf8_lossy(value).parse().unwrap_or(0),
                )
            })
            .collect();
        Some((hold, counts))
    }

    fn doom_current(&mut self) {
        if let Some((hold, _)) = self.current_hold() {
            self.doomed.insert(hold);
        }
    }

    fn start_acquire(&mut self, client: usize, watchdog: bool, world: &World, fx: &mut Effects) {
        let fenced = self.fenced;
        let c = &mut self.clients[client];
        let request = AcquireRequest {
            owner: c.owner.clone(),
            lease_ms: if watchdog { LEASE } else { FIXED },
            request: c.ids.next_id(),
            fenced,
            // The model has no waiters; the wake-up marker is not a safety matter.
            others_waiting: false,
            contended: false,
        };
        let holds = c.current.is_some_and(|i| c.states[i].is_active());
        let op = AttemptOp::new(world.keys.clone(), request).may_reenter(holds);
        self.drive(client, OpKind::Acquire { watchdog, op }, Event::Start, fx);
    }

    fn start_release(
        &mut self,
        client: usize,
        guard: usize,
        reported: bool,
        world: &World,
        fx: &mut Effects,
    ) {
        let now = self.now;
        let c = &mut self.clients[client];
        let g = &mut c.guards[guard];
        g.released = true;
        let (state, watchdog, fixed_end) = (g.state, g.watchdog, g.fixed_end);
        // As the guard does, the core's `release::leave`: the retry bound is taken before
        // it leaves, then it disarms (renewal stops if this was the last guard; if not,
        // the release re-arms the expiry to what the remaining guards need). The model's
        // response timeout is one clock step.
        let leaving = release::leave(&mut c.states[state], now, STEP, watchdog, fixed_end, LEASE);
        let give_up_at = leaving.give_up_at;
        if !leaving.last {
            g.rearm = leaving.rearm;
            // A re-arm may shorten the expiry: what was confirmed before no longer holds.
            c.kept[state] = c.kept[state].min(c.states[state].deadline());
        }
        let flow = ReleaseFlow::new(
            world.keys.clone(),
            c.owner.clone(),
            g.hold.clone(),
            give_up_at,
            g.rearm,
        )
        // Client 0 gives a first hold back as a guard does, with release_first.lua; the
        // others as `Lock::unlock` (or a give-back of a hold of unknown form) does, with
        // release.lua at once: so both scripts' string paths are checked.
        .first_hold(leaving.first_hold && client == 0);
        self.drive(
            client,
            OpKind::Release {
                guard,
                reported,
                flow,
            },
            Event::Start,
            fx,
        );
    }

    /// Feeds an event to a client's operation (the library's own machine, exactly as
    /// its driver does) and acts on what it answers: a call to put in flight, or an
    /// outcome to report. A sleep it asks for is taken as over at once: the model
    /// explores every order of events, and time moves only by its own steps.
    fn drive(&mut self, client: usize, kind: OpKind, event: Event, fx: &mut Effects) {
        let now = self.now;
        let c = &mut self.clients[client];
        let mut env = ModelEnv {
            now,
            ids: &mut c.ids,
        };
        match kind {
            OpKind::Acquire { watchdog, mut op } => {
                let fed = feed(&mut op, &mut env, &mut c.lane, event);
                if let Some(hold) = op.abandoned() {
                    self.abandoned.insert(hold.clone());
                }
                match fed {
                    Ok(call) => self.put_in_flight(client, OpKind::Acquire { watchdog, op }, call),
                    Err(outcome) => self.attempt_done(client, watchdog, outcome, fx),
                }
            }
            OpKind::Release {
                guard,
                reported,
                mut flow,
            } => {
                let fed = feed(&mut flow, &mut env, &mut c.lane, event);
                if let Some(hold) = flow.abandoned() {
                    self.abandoned.insert(hold.clone());
                }
                match fed {
                    Ok(call) => self.put_in_flight(
                        client,
                        OpKind::Release {
                            guard,
                            reported,
                            flow,
                        },
                        call,
                    ),
                    Err(outcome) => {
                        self.finish_release(client, guard, reported, flow.release(), outcome, fx)
                    }
                }
            }
            OpKind::Reconcile { mut round } => {
                let fed = feed(&mut round, &mut env, &mut c.lane, event);
                if let Some(hold) = round.abandoned() {
                    self.abandoned.insert(hold.clone());
                }
                if let Ok(call) = fed {
                    self.put_in_flight(client, OpKind::Reconcile { round }, call);
                }
            }
            OpKind::Extend {
                guard,
                sent_at,
                lease,
            } => {
                // A failure (lost, BUSY, timed out) is the caller's error: nothing changes
                // (a timed-out request may still run: a stray).
                if let Event::Reply(reply) = event {
                    self.extension_reply(client, guard, sent_at, lease, reply, fx);
                }
            }
        }
    }

    /// An extension's reply, read as `HoldEntry::on_extension_reply` reads it: the core's
    /// `decode_renew` for one hold, then gone: the hold is lost and its guards are told
    /// (`Registry::gone`: `HoldState::on_gone`); current: `HoldState::on_extended`.
    fn extension_reply(
        &mut self,
        client: usize,
        guard: usize,
        sent_at: Millis,
        lease: Millis,
        reply: &Reply,
        fx: &mut Effects,
    ) {
        let status = match decode_renew(reply, 1) {
            Ok(status) => status,
            Err(err) => {
                // The caller's `UnexpectedReply`: Redis answered something renew.lua never
                // answers.
                fx.violation = Some(("no garbage", format!("unreadable extend reply: {err}")));
                return;
            }
        };
        let c = &mut self.clients[client];
        let i = c.guards[guard].state;
        let state = &mut c.states[i];
        match status.first() {
            Some(Renewed::Gone) => {
                fx.milestones.push(FIRST_EXTEND_MILESTONE + 1);
                if state.on_gone().is_some() {
                    fx.milestones.push(4);
                }
                Self::told(&self.ks, self.now, state, fx);
            }
            Some(Renewed::Elsewhere) => {
                // One node holds the whole model keyspace: nothing is ever elsewhere.
                fx.violation = Some(("losses are told", "an extend found a lock elsewhere".into()));
            }
            _ => {
                let before = state.deadline();
                state.on_extended(sent_at, lease);
                if state.is_active() {
                    // What the reply confirms: the expiry is at least the lease from the
                    // send (renew.lua only lengthens it), whatever guards the hold has.
                    c.kept[i] = c.kept[i].max(sent_at + lease - drift(lease));
                    c.extended[i] = true;
                    if state.deadline() > before {
                        fx.milestones.push(FIRST_EXTEND_MILESTONE);
                    }
                }
            }
        }
    }

    fn put_in_flight(&mut self, client: usize, kind: OpKind, call: Call) {
        self.clients[client].op = Some(Op {
            kind,
            flight: Flight::Sent(call),
        });
    }

    fn attempt_done(
        &mut self,
        client: usize,
        watchdog: bool,
        outcome: AttemptOutcome,
        fx: &mut Effects,
    ) {
        match outcome {
            AttemptOutcome::Granted {
                granted,
                sent_at,
                lease_ms,
                adopted,
            } => {
                if adopted {
                    fx.milestones.push(3);
                }
                self.grant(client, &granted, watchdog, lease_ms, sent_at, fx);
            }
            AttemptOutcome::Held { .. }
            | AttemptOutcome::NotALock(_)
            | AttemptOutcome::Failed { .. } => {}
            AttemptOutcome::Unreadable(err) => {
                fx.violation = Some(("no garbage", format!("unreadable reply: {err}")));
            }
        }
    }

    fn start_tick(&mut self, client: usize, fx: &mut Effects) {
        let now = self.now;
        let c = &mut self.clients[client];
        c.tick_due = false;
        let after_extend = c
            .states
            .iter()
            .zip(&c.extended)
            .any(|(s, extended)| *extended && s.is_active() && s.renews());
        let active: Vec<usize> = (0..c.states.len())
            .filter(|&i| c.states[i].is_active())
            .collect();
        let items: Vec<RenewItem> = active
            .iter()
            .map(|&i| RenewItem::of(keys().hash, &c.states[i]))
            .collect();
        if items.is_empty() {
            return;
        }
        // Client 0 sends the keys declared (one server), the others in ARGV (one cluster
        // node, many slots): both layouts of renew.lua are checked.
        let (call, items) = if client == 0 {
            renew_call(LEASE, items)
        } else {
            renew_call_on_node(LEASE, items)
        };
        // The call may reorder its items; an active state's hold id is unique (one entry
        // per (lock, owner), as the registry keeps).
        let states = items
            .iter()
            .map(|item| {
                active
                    .iter()
                    .copied()
                    .find(|&i| **c.states[i].hold() == *item.hold)
                    .unwrap_or(usize::MAX)
            })
            .collect();
        c.renewals.push(Renewal {
            items,
            states,
            sent_at: now,
            flight: Flight::Sent(call),
            blind: Vec::new(),
            overtaken: false,
            after_extend,
        });
        if c.renewals.len() > 1 {
            fx.milestones.push(5);
        }
    }

    fn execute(&mut self, client: usize, world: &World, fx: &mut Effects) {
        let call = match self.flight(client, false) {
            Some(Flight::Sent(call)) => call.clone(),
            _ => return,
        };
        let reply = self.run_call(&call, world, fx);
        if let Some(o) = self.clients[client].op.as_mut() {
            o.flight = Flight::Executed(reply);
        }
    }

    /// One step of the client's renewal at `index` (in send order) of those in flight.
    fn renewal_step(
        &mut self,
        client: usize,
        index: usize,
        fate: Fate,
        world: &World,
        fx: &mut Effects,
    ) {
        let Some(renewal) = self.clients[client].renewals.get(index) else {
            return;
        };
        match (fate, &renewal.flight) {
            (Fate::Execute, Flight::Sent(call)) => {
                let call = call.clone();
                let reply = self.run_call(&call, world, fx);
                let renewals = &mut self.clients[client].renewals;
                renewals[index].flight = Flight::Executed(reply);
                if renewals.len() > 1
                    && renewals
                        .iter()
                        .all(|r| matches!(r.flight, Flight::Executed(_)))
                {
                    fx.milestones.push(8);
                }
            }
            (Fate::Deliver, Flight::Executed(reply)) => {
                let reply = reply.clone();
                let c = &mut self.clients[client];
                let renewal = c.renewals.remove(index);
                // Every older one still in flight is answered after this one, if at all.
                for older in &mut c.renewals[..index] {
                    older.overtaken = true;
                }
                if renewal.overtaken {
                    fx.milestones.push(6);
                }
                self.on_renew_reply(client, renewal, reply, fx);
            }
            (Fate::LoseRequest | Fate::Busy, Flight::Sent(_))
            | (Fate::LoseReply, Flight::Executed(_)) => {
                // A failed renewal confirms nothing; the clock will tell.
                let c = &mut self.clients[client];
                c.renewals.remove(index);
                if !c.renewals.is_empty() {
                    fx.milestones.push(7);
                }
            }
            _ => {}
        }
    }

    /// Runs `call` in Redis now, with the bookkeeping the properties need.
    fn run_call(&mut self, call: &Call, world: &World, fx: &mut Effects) -> Reply {
        let now = self.now;
        let was_string = self.ks.get_str(b"L:{x}", now).is_some();
        let reply = world.run(call, &mut self.ks, now);
        if was_string && self.ks.hash(b"L:{x}", now).is_some() {
            fx.milestones.push(STRING_REENTRY_MILESTONE);
        }
        // Bookkeeping the properties need: what the script did in Redis.
        match call.script {
            ScriptId::Release if matches!(reply, Reply::Int(n) if n >= 0) => {
                // ARGV: owner, hold, client tag, seq, channel.
                self.applied
                    .insert(format!("{}.{}", call.args[2], call.args[3]));
                // A hold no guard ever had: one a lost acquire took, given back.
                let hold = &call.args[1];
                if !self
                    .clients
                    .iter()
                    .any(|c| c.guards.iter().any(|g| g.hold == *hold))
                {
                    fx.milestones.push(3);
                }
            }
            // A first hold's release names no request id (its value is the hold's): what it
            // gave back is recorded under that value.
            ScriptId::ReleaseFirst if reply == Reply::Int(0) => {
                self.applied.insert(first_applied(&call.args[0]));
            }
            ScriptId::ReleaseFirst if reply == Reply::Int(-4) => {
                fx.milestones.push(FIRST_RELEASE_FELL_BACK_MILESTONE);
            }
            ScriptId::Take | ScriptId::Acquire => {
                // A fresh hold: take.lua's OK, a bare 0 (unfenced), or {1, 1, hold, token}.
                if let (Some(token), Some(owner)) = (
                    crate::lua::fresh_grant(call, &reply),
                    crate::lua::acquire_owner(call),
                ) {
                    if let Some(last) = &self.last_fresh_owner
                        && *last != owner
                    {
                        fx.milestones.push(0);
                    }
                    self.last_fresh_owner = Some(owner);
                    let token = token as u64;
                    if token > 0 {
                        if token <= self.highest_token && fx.violation.is_none() {
                            fx.violation = Some((
                                "tokens only go up",
                                format!("token {token} handed out after {}", self.highest_token),
                            ));
                        }
                        self.highest_token = self.highest_token.max(token);
                    }
                }
            }
            _ => {}
        }
        reply
    }

    fn fail(&mut self, client: usize, failure: Failure, fx: &mut Effects) {
        let Some(op) = self.clients[client].op.take() else {
            return;
        };
        self.drive(client, op.kind, Event::Failure(failure), fx);
    }

    fn on_reply(&mut self, client: usize, reply: Reply, fx: &mut Effects) {
        let Some(op) = self.clients[client].op.take() else {
            return;
        };
        self.drive(client, op.kind, Event::Reply(&reply), fx);
    }

    #[allow(clippy::too_many_arguments)]
    fn grant(
        &mut self,
        client: usize,
        granted: &Granted,
        watchdog: bool,
        lease: Millis,
        sent_at: Millis,
        fx: &mut Effects,
    ) -> usize {
        let c = &mut self.clients[client];
        // As `Registry::grant`: join the tracked hold, or replace it (it is lost).
        let state = match c.current {
            Some(i) if c.states[i].joining(&granted.hold) == Joining::Join => {
                c.states[i].join(sent_at, lease, watchdog);
                c.kept[i] = c.kept[i].max(c.states[i].deadline());
                i
            }
            current => {
                if let Some(i) = current
                    && c.states[i].on_gone().is_some()
                {
                    fx.milestones.push(4);
                    Self::told(&self.ks, self.now, &c.states[i], fx);
                }
                c.states.push(
                    HoldState::new(granted.hold.clone(), sent_at, lease, watchdog)
                        .in_hash_form(granted.hash_form()),
                );
                c.kept.push(c.states[c.states.len() - 1].deadline());
                c.extended.push(false);
                c.current = Some(c.states.len() - 1);
                c.states.len() - 1
            }
        };
        c.guards.push(Guard {
            state,
            hold: granted.hold.clone(),
            watchdog,
            fixed_end: acquire::fixed_end(watchdog, sent_at, lease),
            rearm: None,
            released: false,
        });
        c.guards.len() - 1
    }

    /// A hold was just told it is lost because it is gone: check that it is.
    fn told(ks: &Keyspace, now: Millis, state: &HoldState, fx: &mut Effects) {
        let current = ks
            .lock_hash(b"L:{x}", now)
            .and_then(|h| h.get(b"\x01h".as_slice()).cloned());
        if current.as_deref() == Some(state.hold().as_bytes()) && fx.violation.is_none() {
            fx.violation = Some((
                "losses are told",
                format!(
                    "hold {} was told it is gone while it is current",
                    state.hold()
                ),
            ));
        }
    }

    fn finish_release(
        &mut self,
        client: usize,
        guard: usize,
        reported: bool,
        release: Option<&ReleaseOp>,
        outcome: ReleaseResult,
        fx: &mut Effects,
    ) {
        let c = &mut self.clients[client];
        let g = c.guards[guard].clone();
        let lost = c.states[g.state].lost();
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(err) => {
                fx.violation = Some((
                    "release is true",
                    format!("unreadable release reply: {err}"),
                ));
                return;
            }
        };
        // What the guard tells its caller: the core's `release::told`, as the guard asks it.
        let told = Found::of_release(&outcome).map(|found| told(found, lost, !g.watchdog));
        match &outcome {
            ReleaseOutcome::Released { remaining } => {
                if remaining.is_some_and(|n| n > 0) {
                    fx.milestones.push(1);
                }
                if release.is_some_and(|r| r.retries() > 0) {
                    fx.milestones.push(2);
                }
                // "Release is true": the guard reports Ok (not lost) only if an execution of
                // this very release gave the hold back.
                let first = first_applied(&format!("\u{1}{}\u{1}{}", g.hold, c.owner));
                let applied = release.is_some_and(|r| {
                    self.applied.contains(r.request()) || self.applied.contains(&first)
                });
                if reported && told == Some(Told::Released) && !applied && fx.violation.is_none() {
                    fx.violation = Some((
                        "release is true",
                        format!(
                            "release {} of hold {} reported Ok, but no execution of it gave a hold back",
                            release.map_or("(none sent)", |r| r.request()),
                            g.hold
                        ),
                    ));
                }
            }
            ReleaseOutcome::NotHeld
            | ReleaseOutcome::Unconfirmed
            | ReleaseOutcome::Failed(_)
            | ReleaseOutcome::NotALock => {}
        }
        match told {
            // As the guard does: every guard of this hold is told.
            Some(Told::Lost { gone: true, .. }) => {
                if c.states[g.state].on_gone().is_some() {
                    fx.milestones.push(4);
                    Self::told(&self.ks, self.now, &c.states[g.state], fx);
                }
            }
            Some(Told::Released) => {}
            Some(Told::Lost { gone: false, .. } | Told::Unconfirmed) | None => {
                if matches!(
                    outcome,
                    ReleaseOutcome::Failed(_) | ReleaseOutcome::Unconfirmed
                ) {
                    self.abandoned.insert(g.hold.clone());
                }
            }
        }
    }

    fn on_renew_reply(&mut self, client: usize, renewal: Renewal, reply: Reply, fx: &mut Effects) {
        let now = self.now;
        let status = match decode_renew(&reply, renewal.items.len()) {
            Ok(status) => status,
            Err(err) => {
                fx.violation = Some(("losses are told", format!("unreadable renew reply: {err}")));
                return;
            }
        };
        let c = &mut self.clients[client];
        for ((item, &i), status) in renewal.items.iter().zip(&renewal.states).zip(status) {
            let Some(state) = c.states.get_mut(i) else {
                continue;
            };
            if status == Renewed::Elsewhere {
                // One node holds the whole model keyspace: nothing is ever elsewhere.
                fx.violation = Some(("losses are told", "a renewal found a lock elsewhere".into()));
                return;
            }
            if status == Renewed::Gone {
                if state.on_gone().is_some() {
                    fx.milestones.push(4);
                    Self::told(&self.ks, now, state, fx);
                }
            } else {
                // What the reply confirms: the lease from its send time, if it lengthened
                // it and a watchdog guard is still there (a release since may have
                // re-armed the expiry shorter for the fixed-lease guards left).
                if item.renew && state.renews() {
                    let confirmed = renewal.sent_at + LEASE - drift(LEASE);
                    c.kept[i] = c.kept[i].max(confirmed);
                    if renewal.after_extend && c.extended[i] && state.is_active() {
                        fx.milestones.push(FIRST_EXTEND_MILESTONE + 2);
                    }
                }
                state.on_renewal(item.renew, renewal.sent_at, LEASE);
            }
        }
        // "Losses are told": after a renewal round trip, no active hold of this client that
        // was gone when the renewal ran may still believe it holds.
        for &i in &c.gone_since {
            if !renewal.blind.contains(&i)
                && c.states[i].is_active()
                && renewal.states.contains(&i)
                && fx.violation.is_none()
            {
                fx.violation = Some((
                    "losses are told",
                    format!(
                        "hold {} is gone, and a renewal that ran after that did not tell it",
                        c.states[i].hold()
                    ),
                ));
            }
        }
    }

    fn clock_all(&mut self, fx: &mut Effects) {
        let now = self.now;
        for c in &mut self.clients {
            for state in &mut c.states {
                if state.on_clock(now).is_some() {
                    fx.milestones.push(4);
                }
            }
        }
    }

    /// Checks every property in this state.
    fn check(&mut self) -> Option<(&'static str, String)> {
        let now = self.now;
        let current = self.current_hold();
        // Track when active holds were first seen gone.
        for c in &mut self.clients {
            for (i, state) in c.states.iter().enumerate() {
                let is_current = current.as_ref().is_some_and(|(h, _)| h == state.hold());
                if state.is_active() && !is_current && !c.gone_since.contains(&i) {
                    c.gone_since.push(i);
                    // The renewals that already ran cannot know.
                    for r in &mut c.renewals {
                        if matches!(r.flight, Flight::Executed(_)) {
                            r.blind.push(i);
                        }
                    }
                }
            }
            c.gone_since.retain(|i| c.states[*i].is_active());
        }

        // Never two holders: guards that believe they hold (not released, not told lost,
        // lease left by their own clock) name one hold, and that hold is current in Redis,
        // unless it was removed behind its holders' backs (force-unlock, data loss), which
        // they learn within a tick ("losses are told").
        let mut believers: Vec<(usize, Arc<str>)> = Vec::new();
        for (ci, c) in self.clients.iter().enumerate() {
            for g in &c.guards {
                let state = &c.states[g.state];
                if !g.released && state.lost().is_none() && now < state.deadline() {
                    believers.push((ci, g.hold.clone()));
                }
            }
        }
        let live: Vec<&(usize, Arc<str>)> = believers
            .iter()
            .filter(|(_, hold)| !self.doomed.contains(hold))
            .collect();
        // One hold, and one owner (two owners must never share a hold either).
        let differs = |(ci, hold): &&&(usize, Arc<str>)| {
            *hold != live[0].1 || self.clients[*ci].owner != self.clients[live[0].0].owner
        };
        if let Some((ci, hold)) = live.iter().find(differs) {
            return Some((
                "never two holders",
                format!(
                    "client {} (owner {}) believes it holds {hold} while client {} (owner {}) believes it holds {}",
                    ci,
                    self.clients[*ci].owner,
                    live[0].0,
                    self.clients[live[0].0].owner,
                    live[0].1
                ),
            ));
        }
        for (ci, hold) in &live {
            let is_current = current.as_ref().is_some_and(|(h, _)| h == hold);
            if !is_current {
                return Some((
                    "never two holders",
                    format!(
                        "client {ci} believes it holds {hold}, but Redis has {:?}: anyone may take it",
                        current.as_ref().map(|(h, _)| h.clone())
                    ),
                ));
            }
        }
        // ... and no believer's deadline lies past the expiry Redis has for its hold: once
        // the key expires anyone may take it, whatever the clock steps the model takes in
        // between (this is what catches a belief that runs ahead of Redis the moment it is
        // formed, not only once the clock has moved past the expiry).
        if let Some(Some(expires_at)) = self.ks.pexpire_at(b"L:{x}", now) {
            for (ci, c) in self.clients.iter().enumerate() {
                for g in &c.guards {
                    let state = &c.states[g.state];
                    let believes = !g.released && state.lost().is_none() && now < state.deadline();
                    let current = current.as_ref().is_some_and(|(h, _)| *h == g.hold);
                    if believes
                        && current
                        && !self.doomed.contains(&g.hold)
                        && state.deadline() > expires_at
                    {
                        return Some((
                            "never two holders",
                            format!(
                                "client {ci} believes it holds {} until t={}, but Redis expires it at t={expires_at}",
                                g.hold,
                                state.deadline()
                            ),
                        ));
                    }
                }
            }
        }

        // Losses are told: no guard believes past its hold's deadline (checked by the clock
        // in the core; here as a backstop).
        for (ci, c) in self.clients.iter().enumerate() {
            for state in &c.states {
                if state.is_active() && now > state.deadline() + drift(LEASE) {
                    return Some((
                        "losses are told",
                        format!(
                            "client {ci}: hold {} past its deadline, not lost",
                            state.hold()
                        ),
                    ));
                }
            }
        }
        // ... and only losses are told: belief never drops below what the client was told
        // (a renewal reply confirmed, a grant), short of a re-arm: else the hold is
        // declared lost (LeaseExpiredUnconfirmed) while Redis keeps it for it. With ticks
        // in flight at once, this is what an older tick's late reply must not undo.
        for (ci, c) in self.clients.iter().enumerate() {
            for (state, kept) in c.states.iter().zip(&c.kept) {
                if state.is_active() && state.deadline() < *kept {
                    return Some((
                        "losses are told",
                        format!(
                            "client {ci}: hold {} believed until t={}, but it was confirmed until t={kept}: it would be declared lost while Redis keeps it",
                            state.hold(),
                            state.deadline()
                        ),
                    ));
                }
            }
        }

        // No garbage: only the lock hash (with a TTL) and the fencing counter exist.
        for key in self.ks.keys(now) {
            let key = String::from_utf8_lossy(&key).into_owned();
            match key.as_str() {
                "L:{x}" => {
                    if self.ks.pexpire_at(b"L:{x}", now) == Some(None) {
                        return Some(("no garbage", "the lock hash has no TTL".into()));
                    }
                }
                "L:{x}:fence" => {}
                other => return Some(("no garbage", format!("unexpected key {other}"))),
            }
        }

        // No orphans: when nothing is in flight or pending anywhere, every hold count in
        // Redis belongs to a guard that has not been released.
        let quiet = self
            .clients
            .iter()
            .all(|c| c.op.is_none() && !c.lane.is_pending());
        if quiet
            && let Some((hold, counts)) = &current
            && !self.abandoned.contains(hold)
            && !self.doomed.contains(hold)
        {
            {
                for (owner, count) in counts {
                    let guards = self
                        .clients
                        .iter()
                        .filter(|c| &*c.owner == owner)
                        .flat_map(|c| c.guards.iter())
                        .filter(|g| g.hold == *hold && !g.released)
                        .count() as u64;
                    if *count > guards {
                        return Some((
                            "no orphans",
                            format!(
                                "Redis counts {count} holds of {owner} on {hold}, but only {guards} guards hold it"
                            ),
                        ));
                    }
                }
            }
        }
        None
    }

    /// A readable picture of the state, for traces.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        let _ = write!(out, "t={}", self.now);
        match self.ks.lock_hash(b"L:{x}", self.now) {
            Some(hash) => {
                let fields: Vec<String> = hash
                    .iter()
                    .map(|(k, v)| {
                        format!(
                            "{}={}",
                            String::from_utf8_lossy(k).replace('\u{1}', "\\1"),
                            String::from_utf8_lossy(v)
                        )
                    })
                    .collect();
                let ttl = match self.ks.pexpire_at(b"L:{x}", self.now) {
                    Some(Some(at)) => format!("expires t={at}"),
                    _ => "no ttl".into(),
                };
                let _ = write!(out, " | Redis: {{{}}} {ttl}", fields.join(", "));
            }
            None => out.push_str(" | Redis: free"),
        }
        for (i, c) in self.clients.iter().enumerate() {
            let _ = write!(out, "\n      client {i} (owner {}):", c.owner);
            for g in &c.guards {
                let s = &c.states[g.state];
                let belief = if g.released {
                    "released".to_string()
                } else if let Some(reason) = s.lost() {
                    format!("told lost ({reason:?})")
                } else {
                    format!("believes held until t={}", s.deadline())
                };
                let _ = write!(
                    out,
                    " [guard {} {} {belief}]",
                    g.hold,
                    if g.watchdog { "watchdog" } else { "fixed" },
                );
            }
            if c.lane.is_pending() {
                out.push_str(" [lost acquire pending]");
            }
            if let Some(op) = &c.op {
                let what = match op.kind {
                    OpKind::Extend { guard, lease, .. } => {
                        format!("guard {guard}'s extend to {lease}: ")
                    }
                    _ => String::new(),
                };
                let _ = write!(out, " [in flight: {what}{}]", flight_text(&op.flight));
            }
            for r in &c.renewals {
                let _ = write!(
                    out,
                    " [renewal sent t={}: {}]",
                    r.sent_at,
                    flight_text(&r.flight)
                );
            }
        }
        out
    }
}

fn flight_text(flight: &Flight) -> String {
    match flight {
        Flight::Sent(call) => format!("sent {:?} {}", call.script, call.args.join(" ")),
        Flight::Executed(reply) => format!("executed, reply {reply:?} on its way"),
    }
}

/// The reentrant lock's model, for the one checker (`tests/protocol/checker.rs`).
pub struct Lock;

impl Model for Lock {
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
    fn steps(state: &State, _config: &Config) -> Vec<Step> {
        state.steps()
    }
    fn apply(state: &mut State, step: &Step, world: &World, _config: &Config) -> Stepped {
        let effects = state.apply(step, world);
        Stepped {
            milestones: effects.milestones,
            violations: effects.violation.into_iter().collect(),
        }
    }
    fn describe(state: &State) -> String {
        state.describe()
    }
    fn extra_depth(config: &Config) -> usize {
        if config.name == REARM {
            REARM_EXTRA_DEPTH
        } else {
            0
        }
    }
}

/// How `applied` records a `release_first.lua` run that gave back the first hold whose
/// unmarked value is `value` (a first hold has one guard, so one release: its own).
fn first_applied(value: &str) -> String {
    format!("first:{value}")
}
