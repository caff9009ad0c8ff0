//! The semaphore's protocol model: clients that take 1 or 2 expirable permits with single
//! attempts (`try_acquire`) or as waiters that reserve (`acquire`), give them back, renew
//! them (`lua/sem_renew.lua`, as the watchdog does), lose replies and re-send with the same
//! permit id, while the clock moves past leases and reservations. The model holds the
//! world only: every call is built and every reply read by the library's own
//! `redis_locks::protocol::semaphore`, re-sent by its `resend::Resend`, judged by its
//! `given_back`, `renew::decode_renew` and `hold::HoldState`; every call runs the real
//! `lua/sem_*.lua` in the embedded Lua against the keyspace model. A small breadth-first
//! explorer checks the properties in every state.
//!
//! Assumptions (as the read-write lock's checker): one semaphore, one Redis, no restart,
//! no crash; the size is set once by `lua/sem_set.lua` before anything else and never
//! changed (shrinking takes no permit back, by design); the clock only moves when no call
//! is waiting to execute (a request executes at its send time); a request whose reply was
//! lost is re-sent as it was (same permit id, same first send time, as `held::acquire_until`
//! keeps it), and the copy given up on never runs after the retry. A waiter between two
//! attempts either attempts again (a new round of `acquire_until`'s loop, same call) or
//! stops waiting, and then gives back what it may hold with its reservation, as
//! `held::Cleanup` does (`give_back(hold_too = true, leaving = true)`). Every lease is the
//! watchdog's.
#![allow(dead_code)]

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use redis_locks::protocol::hold::HoldState;
use redis_locks::protocol::renew::{RenewItem, Renewed, decode_renew};
use redis_locks::protocol::resend::{GivenBack, Resend, given_back};
use redis_locks::protocol::semaphore::{
    SemAcquired, SemaphoreKeys, acquire_call, decode_acquire, release_call, renew_call, set_call,
};
use redis_locks::protocol::{Call, Env, Failure, Machine, Millis, Next, Reply, RequestIds};

use crate::keyspace::Keyspace;
use crate::lua::ScriptRunner;

/// The lease of every acquisition (the watchdog's), in ms.
pub const LEASE: Millis = 100;
/// How far the clock moves in one step: one step leaves a permit 40 ms, two expire it.
pub const ADVANCE: Millis = 60;
/// How long a waiter's reservation lasts: one step leaves it, two end it.
pub const RESERVATION: Millis = 90;
/// The model's clock at the start (Redis's TIME answers from it).
pub const START: Millis = 1_000_000;
/// How long an attempt or a give-back keeps re-sending (the model's faults run out long
/// before).
pub const GIVE_UP_AFTER: Millis = 10 * LEASE;

/// The properties, checked in every state.
pub const PROPERTIES: [&str; 7] = [
    "never more permits than the size",
    "belief is true",
    "no permit counted twice",
    "a call takes only its own permits and reservation",
    "release is true",
    "losses are told",
    "no orphans, no garbage",
];
const SIZE: &str = PROPERTIES[0];
const BELIEF: &str = PROPERTIES[1];
const TWICE: &str = PROPERTIES[2];
const OWN: &str = PROPERTIES[3];
const RELEASE: &str = PROPERTIES[4];
const LOSSES: &str = PROPERTIES[5];
const GARBAGE: &str = PROPERTIES[6];

/// What each configuration must reach (else the run is vacuous), but those it lists as
/// out of its reach.
pub const MILESTONES: [&str; 8] = [
    "a grant of 2 permits",
    "every permit out",
    "a retried acquire found its permits",
    "a retried release",
    "a renewal kept a permit past its first lease",
    "a renewal told a loss",
    "a reservation kept permits for a waiter",
    "a waiter gave back its reservation",
];

pub use crate::lua::Scripts;

/// The parties and bounds of one exploration.
#[derive(Clone, Debug)]
pub struct Config {
    pub name: &'static str,
    pub clients: usize,
    /// The size `sem_set.lua` sets before anything else.
    pub size: u64,
    /// What a user may ask for: (permits, waits). A waiter reserves (`reserve = '1'`).
    pub requests: Vec<(u32, bool)>,
    /// Budgets in all: attempts (a waiter's next attempt counts), clock advances, lost
    /// replies, renewal calls.
    pub acquires: u8,
    pub advances: u8,
    pub faults: u8,
    pub renewals: u8,
    /// Milestones this configuration cannot reach (2 permits of a semaphore of 1).
    pub out_of_reach: Vec<&'static str>,
}

impl Config {
    /// Whether the run must reach milestone `index`.
    pub fn requires(&self, index: usize) -> bool {
        !self.out_of_reach.contains(&MILESTONES[index])
    }
}

pub fn keys() -> SemaphoreKeys {
    SemaphoreKeys {
        hash: "p:{s}:semaphore".into(),
        permits: "p:{s}:permits".into(),
        channel: "p:{s}:semaphore:db0:released".into(),
        sharded: false,
    }
}

/// One acquisition a client believes in (a guard).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Guard {
    pub n: u32,
    /// When its grant's first copy was sent: past this plus a lease only renewals count.
    pub granted_at: Millis,
    pub state: HoldState,
}

/// One acquisition being attempted: the permit id is the request id, the same on every
/// copy and every round.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Request {
    pub id: Arc<str>,
    pub n: u32,
    pub waits: bool,
}

/// The core's view of a model client: the model clock, no randomness, no request ids
/// (a re-sent call carries its own).
struct ModelEnv(Millis);

impl Env for ModelEnv {
    fn now(&self) -> Millis {
        self.0
    }
    fn jitter(&mut self) -> u64 {
        0
    }
    fn next_id(&mut self) -> String {
        String::new()
    }
}

/// What a client is doing.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// An attempt, re-sent as it was by the library's own [`Resend`].
    Acquire { request: Request, resend: Resend },
    /// A waiter between two attempts (nothing sent).
    Waiting { request: Request },
    /// A give-back of `n` permits (`leaving`: a waiter that stops waiting, with its
    /// reservation), re-sent by [`Resend`] and read by `given_back`.
    Release {
        id: Arc<str>,
        n: u32,
        leaving: bool,
        resend: Resend,
    },
    Renew {
        items: Vec<RenewItem>,
        order: Vec<usize>,
        sent_at: Millis,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InFlight {
    pub op: Op,
    /// The call to run (what the machine asked to send).
    pub call: Option<Call>,
    /// The reply, once Redis ran the call.
    pub ran: Option<Reply>,
    pub retried: bool,
    /// The machine sleeps before re-sending (the clock may move meanwhile).
    pub sleeping: bool,
    /// Some copy of this give-back took members out.
    pub removed: bool,
}

impl InFlight {
    fn new(op: Op, call: Option<Call>) -> Self {
        let (ran, retried, sleeping, removed) = (None, false, false, false);
        InFlight {
            op,
            call,
            ran,
            retried,
            sleeping,
            removed,
        }
    }

    /// A call re-sent by the library's [`Resend`], started at `now`.
    fn resent(call: Call, now: Millis, op: impl FnOnce(Resend) -> Op) -> Self {
        let mut resend = Resend::new(call, now + GIVE_UP_AFTER);
        let call = match resend.start(&mut ModelEnv(now), &mut ()) {
            Next::Send(call) => Some(call),
            _ => None,
        };
        InFlight::new(op(resend), call)
    }

    /// An attempt of `request` (every round of `acquire_until` re-sends the same call).
    fn attempt(request: Request, keys: &SemaphoreKeys, now: Millis) -> Self {
        let (id, n, waits) = (&request.id, request.n, request.waits);
        let call = acquire_call(keys, id, n, LEASE, waits, RESERVATION);
        InFlight::resent(call, now, |resend| Op::Acquire { request, resend })
    }

    /// A give-back of `n` permits of `id`.
    fn give_back(id: Arc<str>, n: u32, leaving: bool, keys: &SemaphoreKeys, now: Millis) -> Self {
        let call = release_call(keys, &id, n, leaving);
        InFlight::resent(call, now, |resend| Op::Release {
            id,
            n,
            leaving,
            resend,
        })
    }

    /// The acquisition this client attempts or gives up, if any: its id, its permits,
    /// and whether it is (or was, leaving) a waiter, which may hold a reservation.
    fn acquisition(&self) -> Option<(&Arc<str>, u32, bool)> {
        match &self.op {
            Op::Acquire { request: r, .. } | Op::Waiting { request: r } => {
                Some((&r.id, r.n, r.waits))
            }
            Op::Release { id, n, leaving, .. } => Some((id, *n, *leaving)),
            Op::Renew { .. } => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    pub ids: RequestIds,
    pub guards: Vec<Guard>,
    pub flight: Option<InFlight>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub ks: Keyspace,
    pub now: Millis,
    pub clients: Vec<Client>,
    pub acquires: u8,
    pub advances: u8,
    pub faults: u8,
    pub renewals: u8,
}

/// One step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A user asks for (permits, waits).
    Acquire(usize, u32, bool),
    /// A waiter attempts again.
    Retry(usize),
    /// A waiter stops waiting.
    Leave(usize),
    Release(usize, usize),
    Renew(usize),
    Run(usize),
    Deliver(usize),
    LoseReply(usize),
    /// A re-sending machine's pause is over.
    Resume(usize),
    Advance,
}

/// A violated property and what happened.
pub type Violation = (&'static str, String);

/// A step's outcome: milestones reached and the first violation.
#[derive(Default)]
pub struct Effects {
    pub milestones: Vec<usize>,
    pub violation: Option<Violation>,
}

impl Effects {
    fn fail(&mut self, property: &'static str, message: String) {
        debug_assert!(PROPERTIES.contains(&property));
        self.violation.get_or_insert((property, message));
    }

    fn reach(&mut self, milestone: &str) {
        let index = MILESTONES.iter().position(|m| *m == milestone).unwrap();
        self.milestones.push(index);
    }
}

/// The script runner, the scripts, the keys and what users may ask for.
pub struct World {
    runner: ScriptRunner,
    scripts: Scripts,
    keys: SemaphoreKeys,
    config: Config,
}

impl World {
    pub fn new(scripts: Scripts, config: &Config) -> Self {
        let (runner, keys, config) = (ScriptRunner::new(), keys(), config.clone());
        World {
            runner,
            scripts,
            keys,
            config,
        }
    }

    fn run(&self, call: &Call, ks: &mut Keyspace, now: Millis) -> Reply {
        let bytes = |v: &[Arc<str>]| v.iter().map(|a| a.as_bytes().to_vec()).collect::<Vec<_>>();
        let source = self.scripts.source(call.script);
        let reply = self
            .runner
            .eval(source, &bytes(&call.keys), &bytes(&call.args), ks, now);
        // Nobody listens in the model; a published log would only split equal states.
        ks.published.clear();
        reply
    }
}

/// Every member of the permits set (live or not yet swept) and its score.
pub fn members(ks: &Keyspace, keys: &SemaphoreKeys, now: Millis) -> BTreeMap<Vec<u8>, f64> {
    let zset = ks.zset(keys.permits.as_bytes(), now);
    zset.map(|z| z.iter().map(|(m, s)| (m.clone(), s.0)).collect())
        .unwrap_or_default()
}

fn live(all: &BTreeMap<Vec<u8>, f64>, now: Millis) -> impl Iterator<Item = (&Vec<u8>, f64)> {
    all.iter()
        .filter(move |(_, s)| **s > now as f64)
        .map(|(m, s)| (m, *s))
}

fn member(id: &str, k: u32) -> Vec<u8> {
    format!("{id}:{k}").into_bytes()
}

/// `<id>:<k>` split; `None` when the member is not so named.
fn split_member(member: &[u8]) -> Option<(&[u8], u32)> {
    let colon = member.iter().rposition(|b| *b == b':')?;
    let k = std::str::from_utf8(&member[colon + 1..]).ok()?;
    Some((&member[..colon], k.parse().ok()?))
}

/// A reservation: the waiter's id, and until when.
pub type Resv = Option<(String, Millis)>;

/// The reservation in the hash; an error when it is not whole.
pub fn reservation(ks: &Keyspace, keys: &SemaphoreKeys, now: Millis) -> Result<Resv, String> {
    let Some(hash) = ks.hash(keys.hash.as_bytes(), now) else {
        return Ok(None);
    };
    let field = |f: &str| hash.get(f.as_bytes()).map(|v| show(v));
    match (field("resv"), field("resv_n"), field("resv_until")) {
        (None, None, None) => Ok(None),
        (Some(id), Some(_), Some(until)) if until.parse::<Millis>().is_ok() => {
            Ok(Some((id, until.parse().unwrap_or(0))))
        }
        broken => Err(format!("a broken reservation {broken:?}")),
    }
}

/// The waiter a reservation keeps permits for at `now`.
fn live_waiter(resv: &Resv, now: Millis) -> Option<&[u8]> {
    let (id, until) = resv.as_ref()?;
    (*until > now).then_some(id.as_bytes())
}

pub fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

impl State {
    /// The start: the size set by the real `sem_set.lua`, no permit out.
    pub fn initial(config: &Config, world: &World) -> Self {
        let mut ks = Keyspace::default();
        let reply = world.run(&set_call(&world.keys, config.size, false), &mut ks, START);
        let unset = Reply::Array(vec![Reply::Int(-1), Reply::Int(0)]);
        assert_eq!(reply, unset, "sem_set.lua");
        let client = |i| Client {
            ids: RequestIds::new(format!("c{i}")),
            guards: Vec::new(),
            flight: None,
        };
        State {
            ks,
            now: START,
            clients: (0..config.clients).map(client).collect(),
            acquires: config.acquires,
            advances: config.advances,
            faults: config.faults,
            renewals: config.renewals,
        }
    }

    pub fn steps(&self, world: &World) -> Vec<Step> {
        let mut steps = Vec::new();
        let mut waiting_to_run = false;
        for (c, client) in self.clients.iter().enumerate() {
            match &client.flight {
                None => {
                    if self.acquires > 0 {
                        let asks = world.config.requests.iter();
                        steps.extend(asks.map(|&(n, waits)| Step::Acquire(c, n, waits)));
                    }
                    steps.extend((0..client.guards.len()).map(|g| Step::Release(c, g)));
                    if self.renewals > 0 && client.guards.iter().any(|g| g.state.is_active()) {
                        steps.push(Step::Renew(c));
                    }
                }
                Some(InFlight {
                    op: Op::Waiting { .. },
                    ..
                }) => {
                    if self.acquires > 0 {
                        steps.push(Step::Retry(c));
                    }
                    steps.push(Step::Leave(c));
                }
                Some(InFlight { sleeping: true, .. }) => steps.push(Step::Resume(c)),
                Some(InFlight { ran: None, .. }) => {
                    waiting_to_run = true;
                    steps.push(Step::Run(c));
                }
                Some(InFlight { ran: Some(_), .. }) => {
                    steps.push(Step::Deliver(c));
                    if self.faults > 0 {
                        steps.push(Step::LoseReply(c));
                    }
                }
            }
        }
        if self.advances > 0 && !waiting_to_run {
            steps.push(Step::Advance);
        }
        steps
    }

    pub fn apply(&mut self, step: &Step, world: &World) -> Effects {
        let mut fx = Effects::default();
        let keys = &world.keys;
        let now = self.now;
        match *step {
            Step::Acquire(c, n, waits) => {
                self.acquires -= 1;
                let client = &mut self.clients[c];
                let request = Request {
                    id: client.ids.next_id().into(),
                    n,
                    waits,
                };
                client.flight = Some(InFlight::attempt(request, keys, now));
            }
            Step::Retry(c) | Step::Leave(c) => {
                let flight = &mut self.clients[c].flight;
                let Some(Op::Waiting { request }) = flight.take().map(|f| f.op) else {
                    unreachable!("only a waiter attempts again or leaves")
                };
                *flight = Some(if let Step::Retry(_) = step {
                    self.acquires -= 1;
                    InFlight::attempt(request, keys, now)
                } else {
                    // `held::Cleanup`: the permits too (hold_too), and the reservation.
                    InFlight::give_back(request.id, request.n, true, keys, now)
                });
            }
            Step::Release(c, g) => {
                let client = &mut self.clients[c];
                let guard = client.guards.remove(g);
                let id = guard.state.hold().clone();
                client.flight = Some(InFlight::give_back(id, guard.n, false, keys, now));
            }
            Step::Renew(c) => {
                self.renewals -= 1;
                let client = &mut self.clients[c];
                let active = client.guards.iter().filter(|g| g.state.is_active());
                let (items, sizes): (Vec<RenewItem>, Vec<u32>) = active
                    .map(|g| {
                        let (key, hold) = (keys.permits.clone(), g.state.hold().clone());
                        (
                            RenewItem {
                                key,
                                hold,
                                renew: g.state.renews(),
                            },
                            g.n,
                        )
                    })
                    .unzip();
                let (call, order) = renew_call(LEASE, &items, &sizes);
                let op = Op::Renew {
                    items,
                    order,
                    sent_at: now,
                };
                client.flight = Some(InFlight::new(op, Some(call)));
            }
            Step::Run(c) => self.run(c, world, &mut fx),
            Step::Deliver(c) => self.deliver(c, &mut fx),
            Step::LoseReply(c) => {
                self.faults -= 1;
                let client = &mut self.clients[c];
                let flight = client.flight.as_mut().expect("a call in flight");
                let next = match &mut flight.op {
                    // The watchdog does not re-send a renewal: the next tick renews.
                    Op::Renew { .. } => None,
                    Op::Acquire { resend, .. } | Op::Release { resend, .. } => {
                        Some(resend.on_failure(&mut ModelEnv(now), &mut (), Failure::Lost))
                    }
                    Op::Waiting { .. } => unreachable!("a waiter has nothing in flight"),
                };
                match next {
                    Some(Next::SleepUntil(_)) => {
                        flight.ran = None;
                        flight.retried = true;
                        flight.sleeping = true;
                    }
                    None => client.flight = None,
                    Some(other) => fx.fail(GARBAGE, format!("the re-send gave up: {other:?}")),
                }
            }
            Step::Resume(c) => {
                let flight = self.clients[c].flight.as_mut().expect("a call in flight");
                let next = match &mut flight.op {
                    Op::Acquire { resend, .. } | Op::Release { resend, .. } => {
                        resend.resume(&mut ModelEnv(now), &mut ())
                    }
                    _ => unreachable!("only re-sent calls sleep"),
                };
                flight.sleeping = false;
                flight.call = match next {
                    Next::Send(call) => Some(call),
                    _ => None,
                };
            }
            Step::Advance => {
                self.advances -= 1;
                self.now += ADVANCE;
                self.ks.expire(self.now);
                for guard in self.clients.iter_mut().flat_map(|c| c.guards.iter_mut()) {
                    guard.state.on_clock(self.now);
                }
            }
        }
        self.check(world, &mut fx);
        fx
    }

    fn run(&mut self, c: usize, world: &World, fx: &mut Effects) {
        let (keys, now) = (&world.keys, self.now);
        let before = members(&self.ks, keys, now);
        let resv_before = reservation(&self.ks, keys, now).unwrap_or(None);
        let flight = self.clients[c].flight.clone().expect("a call in flight");
        let call = flight.call.clone().expect("a call to run");
        let reply = world.run(&call, &mut self.ks, now);
        let after = members(&self.ks, keys, now);
        let resv_after = reservation(&self.ks, keys, now).unwrap_or(None);
        let own = flight.acquisition().map(|(id, _, _)| id.clone());
        let own = own.as_ref().map_or(&b""[..], |id| id.as_bytes());
        let is_own = |m: &[u8]| split_member(m).is_some_and(|(id, _)| id == own);
        let releases = matches!(flight.op, Op::Release { .. });
        let what = format!("{:?} of client {c} ({})", call.script, show(own));
        // Nothing but an acquisition's own give-back takes a live permit out or shortens it.
        for (m, score) in live(&before, now) {
            match after.get(m) {
                None if releases && is_own(m) => {}
                None => fx.fail(OWN, format!("{what} took out the live permit {}", show(m))),
                Some(later) if *later < score => {
                    fx.fail(OWN, format!("{what} shortened the permit {}", show(m)))
                }
                Some(_) => {}
            }
        }
        // A live reservation ends only by its own waiter's grant or leave.
        if let Some(waiter) = live_waiter(&resv_before, now)
            && waiter != own
            && resv_after.as_ref().map(|r| r.0.as_bytes()) != Some(waiter)
        {
            fx.fail(OWN, format!("{what} ended {}'s reservation", show(waiter)));
        }
        // The checks that need what the run found, against the reply it gave.
        let mut removed = false;
        match &flight.op {
            Op::Acquire { request, .. } => {
                let first = member(&request.id, 1);
                let existed = live(&before, now).any(|(m, _)| *m == first);
                let own_set = |set: &BTreeMap<Vec<u8>, f64>| {
                    let mine = set.iter().filter(|(m, _)| is_own(m));
                    mine.map(|(m, s)| (m.clone(), s.to_bits()))
                        .collect::<Vec<_>>()
                };
                if existed && own_set(&before) != own_set(&after) {
                    fx.fail(
                        TWICE,
                        format!("a copy of {} took its permits again", request.id),
                    );
                }
                if existed && flight.retried {
                    fx.reach("a retried acquire found its permits");
                }
                // Only a reservation stood between this attempt and enough free permits.
                let used = live(&before, now).count() as u64;
                let held_back = live_waiter(&resv_before, now).is_some_and(|w| w != own);
                let fits = used + u64::from(request.n) <= world.config.size;
                if !after.contains_key(&first) && held_back && fits {
                    fx.reach("a reservation kept permits for a waiter");
                }
            }
            Op::Release { id, n, leaving, .. } => {
                // Members taken out, live or not: `sem_release.lua` does not sweep expired
                // permits first, so it gives back (and counts) one that expired unswept.
                let gone = |m: &Vec<u8>| before.contains_key(m) && !after.contains_key(m);
                let taken = (1..=*n).filter(|&k| gone(&member(id, k))).count();
                if reply != Reply::Int(taken as i64) {
                    fx.fail(
                        RELEASE,
                        format!("give-back of {id} said {reply:?}, took {taken}"),
                    );
                }
                removed = taken > 0;
                let had = resv_before.as_ref().is_some_and(|r| *r.0 == **id);
                if *leaving && had && resv_after.is_none() {
                    fx.reach("a waiter gave back its reservation");
                }
            }
            Op::Renew { items, order, .. } => match decode_renew(&reply, items.len()) {
                Err(err) => fx.fail(LOSSES, err),
                Ok(status) => {
                    for (position, status) in status.iter().enumerate() {
                        let hold = &items[order[position]].hold;
                        let was_live = live(&before, now).any(|(m, _)| *m == member(hold, 1));
                        if (*status == Renewed::Gone) == was_live {
                            let was = if was_live { "live" } else { "gone" };
                            fx.fail(LOSSES, format!("renewal: {status:?} of {hold} ({was})"));
                        }
                    }
                }
            },
            Op::Waiting { .. } => unreachable!("a waiter has nothing to run"),
        }
        let flight = self.clients[c].flight.as_mut().expect("a call in flight");
        flight.removed |= removed;
        flight.ran = Some(reply);
    }

    fn deliver(&mut self, c: usize, fx: &mut Effects) {
        let now = self.now;
        let flight = self.clients[c].flight.take().expect("a call in flight");
        let reply = flight.ran.expect("delivered after it ran");
        let resent = |mut resend: Resend| match resend.on_reply(&mut ModelEnv(now), &mut (), &reply)
        {
            Next::Done(Ok(resent)) => resent,
            other => panic!("a re-send that got a reply: {other:?}"),
        };
        match flight.op {
            Op::Acquire { request, resend } => match decode_acquire(&reply) {
                Ok(SemAcquired::Granted) => {
                    if request.n == 2 {
                        fx.reach("a grant of 2 permits");
                    }
                    let client = &mut self.clients[c];
                    if client.guards.iter().any(|g| g.state.hold() == &request.id) {
                        fx.fail(TWICE, format!("client {c} got {} twice", request.id));
                    }
                    // Confirmed from the send time the library's machine says.
                    let sent_at = resent(resend).first_sent_at;
                    let state = HoldState::new(request.id.clone(), sent_at, LEASE, true);
                    client.guards.push(Guard {
                        n: request.n,
                        granted_at: sent_at,
                        state,
                    });
                }
                Ok(SemAcquired::Wait(_) | SemAcquired::FirstInLine(_)) if request.waits => {
                    self.clients[c].flight = Some(InFlight::new(Op::Waiting { request }, None));
                }
                Ok(SemAcquired::Wait(_) | SemAcquired::FirstInLine(_)) => {}
                Ok(other) => fx.fail(TWICE, format!("unexpected acquire reply {other:?}")),
                Err(err) => fx.fail(TWICE, err),
            },
            Op::Release { id, resend, .. } => {
                if flight.retried {
                    fx.reach("a retried release");
                }
                // What the library reports, read by its own `given_back` (with `hold_too`,
                // as both the guard's release and the waiter's cleanup call it), must be
                // true of all the copies.
                let report = given_back(&resent(resend), true);
                let wrong = match report {
                    Ok(GivenBack::Removed) => !flight.removed,
                    Ok(GivenBack::NotHeld) => flight.removed,
                    Ok(GivenBack::Unconfirmed) => false,
                    Ok(GivenBack::NotALock) | Err(_) => true,
                };
                if wrong {
                    let copies = if flight.removed { "a copy" } else { "no copy" };
                    fx.fail(
                        RELEASE,
                        format!("give-back of {id}: {report:?}; {copies} removed"),
                    );
                }
            }
            Op::Renew {
                items,
                order,
                sent_at,
            } => {
                // Checked against Redis when it ran; here the beliefs follow the reply.
                let status = decode_renew(&reply, items.len()).unwrap_or_default();
                for (position, status) in status.iter().enumerate() {
                    let item = &items[order[position]];
                    let guards = &mut self.clients[c].guards;
                    let Some(guard) = guards.iter_mut().find(|g| g.state.hold() == &item.hold)
                    else {
                        continue; // given back since
                    };
                    match status {
                        Renewed::Current => guard.state.on_renewal(item.renew, sent_at, LEASE),
                        Renewed::Gone => {
                            if guard.state.on_gone().is_some() {
                                fx.reach("a renewal told a loss");
                            }
                        }
                        Renewed::Elsewhere => fx.fail(LOSSES, "Elsewhere on one Redis".into()),
                    }
                }
            }
            Op::Waiting { .. } => unreachable!("a waiter has no reply"),
        }
    }

    /// The properties that hold in every state.
    fn check(&self, world: &World, fx: &mut Effects) {
        let (keys, now) = (&world.keys, self.now);
        let all = members(&self.ks, keys, now);
        // (1), (2): what clients believe (not given back, not lost, before its deadline),
        // against the size and against Redis.
        let mut believed = 0;
        for (c, client) in self.clients.iter().enumerate() {
            for guard in &client.guards {
                let deadline = guard.state.deadline();
                if guard.state.lost().is_some() || now >= deadline {
                    continue;
                }
                believed += guard.n as u64;
                if now >= guard.granted_at + LEASE {
                    fx.reach("a renewal kept a permit past its first lease");
                }
                for k in 1..=guard.n {
                    let m = member(guard.state.hold(), k);
                    let score = all.get(&m).copied();
                    if score.is_none_or(|s| s < deadline as f64) {
                        let redis = score.map(|s| s - START as f64);
                        let until = deadline - START;
                        let what = format!("{} until t={until}; Redis: {redis:?}", show(&m));
                        fx.fail(BELIEF, format!("client {c} believes in {what}"));
                    }
                }
            }
        }
        let in_use = live(&all, now).count() as u64;
        if believed > world.config.size || in_use > world.config.size {
            let what = format!("believed {believed}, live in Redis {in_use}");
            fx.fail(SIZE, format!("{what}, of {} permits", world.config.size));
        }
        if believed == world.config.size {
            fx.reach("every permit out");
        }
        // (3): each acquisition is exactly its members `<id>:1..n`, with one deadline.
        let mut known: BTreeMap<&[u8], u32> = BTreeMap::new();
        for client in &self.clients {
            for guard in &client.guards {
                known.insert(guard.state.hold().as_bytes(), guard.n);
            }
            if let Some((id, n, _)) = client.flight.as_ref().and_then(InFlight::acquisition) {
                known.insert(id.as_bytes(), n);
            }
        }
        let mut sets: BTreeMap<&[u8], Vec<(u32, f64)>> = BTreeMap::new();
        for (m, score) in &all {
            match split_member(m) {
                Some((id, k)) => sets.entry(id).or_default().push((k, *score)),
                None => fx.fail(TWICE, format!("member {} is not '<id>:<k>'", show(m))),
            }
        }
        for (id, set) in &sets {
            let n = known.get(id).copied().unwrap_or(set.len() as u32);
            let mut ks: Vec<u32> = set.iter().map(|(k, _)| *k).collect();
            ks.sort_unstable();
            let one_deadline = set.iter().all(|(_, s)| s.to_bits() == set[0].1.to_bits());
            if !ks.iter().copied().eq(1..=n) || !one_deadline {
                fx.fail(TWICE, format!("{} of {n} permits: {set:?}", show(id)));
            }
        }
        // (6): with nothing in flight, every live permit is a guard's and no reservation
        // is left; a live reservation is always a waiter's.
        let quiet = self.clients.iter().all(|c| c.flight.is_none());
        let guard_of = |id: &[u8]| {
            let mut guards = self.clients.iter().flat_map(|c| c.guards.iter());
            guards.any(|g| g.state.hold().as_bytes() == id)
        };
        for (m, _) in live(&all, now).filter(|_| quiet) {
            if !split_member(m).is_some_and(|(id, _)| guard_of(id)) {
                fx.fail(
                    GARBAGE,
                    format!("live permit {} belongs to no guard", show(m)),
                );
            }
        }
        match reservation(&self.ks, keys, now) {
            Err(err) => fx.fail(GARBAGE, err),
            Ok(Some(resv)) if quiet => fx.fail(GARBAGE, format!("{resv:?} left, nobody waits")),
            Ok(resv) => {
                let flights = || self.clients.iter().filter_map(|c| c.flight.as_ref());
                let waits = |f: &InFlight, w: &[u8]| {
                    let acquisition = f.acquisition();
                    acquisition.is_some_and(|(id, _, waits)| waits && id.as_bytes() == w)
                };
                if live_waiter(&resv, now).is_some_and(|w| !flights().any(|f| waits(f, w))) {
                    fx.fail(GARBAGE, format!("live {resv:?} of no waiter"));
                }
            }
        }
        // No garbage: only the semaphore's two keys. The hash is configuration, without a
        // TTL (`sem_set.lua`); the permits set has one, never before its latest permit's
        // deadline and never more than a lease away (`sem_acquire.lua`, `sem_renew.lua`).
        // Not "exactly at its latest deadline": `sem_release.lua` leaves the expiry where
        // the permit it gave back had it.
        for key in self.ks.keys(now) {
            let expiry = self.ks.pexpire_at(&key, now).flatten();
            if key == keys.hash.as_bytes() {
                let hash = self.ks.hash(&key, now);
                let size = hash
                    .and_then(|h| h.get(b"size".as_slice()))
                    .map(|s| show(s));
                if expiry.is_some() || size != Some(world.config.size.to_string()) {
                    fx.fail(
                        GARBAGE,
                        format!("the size hash: TTL {expiry:?}, size {size:?}"),
                    );
                }
            } else if key == keys.permits.as_bytes() {
                let latest = all.values().copied().fold(f64::MIN, f64::max);
                if !expiry.is_some_and(|at| at as f64 >= latest && at <= now + LEASE) {
                    let what = format!("expires at {expiry:?}, latest permit at {latest}");
                    fx.fail(GARBAGE, format!("the permits set {what} (now {now})"));
                }
            } else {
                fx.fail(GARBAGE, format!("unexpected key {}", show(&key)));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The explorer: breadth-first, states deduplicated by a 64-bit fingerprint.
// ---------------------------------------------------------------------------------------

pub struct Report {
    pub states: usize,
    pub depth_reached: usize,
    pub milestones: [bool; MILESTONES.len()],
    pub violation: Option<(&'static str, String, Vec<u8>)>,
    /// The state bound stopped the search before the depth did.
    pub truncated: bool,
}

fn fingerprint(state: &State) -> u64 {
    let mut hasher = DefaultHasher::new();
    state.hash(&mut hasher);
    hasher.finish()
}

pub fn explore(config: &Config, scripts: Scripts, depth: usize, max_states: usize) -> Report {
    let world = World::new(scripts, config);
    let initial = State::initial(config, &world);
    let mut seen = HashSet::from([fingerprint(&initial)]);
    let mut frontier = vec![(initial, Vec::new())];
    let milestones = [false; MILESTONES.len()];
    let (states, depth_reached, violation, truncated) = (1, 0, None, false);
    let mut report = Report {
        states,
        depth_reached,
        milestones,
        violation,
        truncated,
    };
    for level in 1..=depth {
        let mut next = Vec::new();
        for (state, path) in &frontier {
            if report.truncated {
                break;
            }
            for (index, step) in state.steps(&world).iter().enumerate() {
                let mut successor = state.clone();
                let effects = successor.apply(step, &world);
                for m in effects.milestones {
                    report.milestones[m] = true;
                }
                let path = [path.as_slice(), &[index as u8]].concat();
                if let Some((property, message)) = effects.violation {
                    report.violation = Some((property, message, path));
                    report.depth_reached = level;
                    return report;
                }
                if seen.insert(fingerprint(&successor)) {
                    report.states += 1;
                    report.truncated |= report.states >= max_states;
                    next.push((successor, path));
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

pub fn path_text(path: &[u8]) -> String {
    path.iter().map(u8::to_string).collect::<Vec<_>>().join(",")
}

/// The default configurations.
pub fn configs() -> Vec<Config> {
    vec![
        Config {
            name: "sem: size 2, 1 or 2 permits, waiters, faults, expiry and renewal",
            clients: 2,
            size: 2,
            requests: vec![(1, false), (2, true)],
            acquires: 4,
            advances: 3,
            faults: 2,
            renewals: 2,
            out_of_reach: Vec::new(),
        },
        Config {
            name: "sem: size 1, three clients, waiters, faults, expiry and renewal",
            clients: 3,
            size: 1,
            requests: vec![(1, false), (1, true)],
            acquires: 4,
            advances: 3,
            faults: 2,
            renewals: 2,
            out_of_reach: vec!["a grant of 2 permits"],
        },
    ]
}
