//! The semaphore's protocol model: clients that take 1 or 2 expirable permits with single
//! attempts (`try_acquire`) or as waiters that reserve (`acquire`), or every free permit
//! (`drain_permits`), give them back, renew them (`lua/sem_renew.lua`, as the watchdog does) or
//! extend them (`Guard::extend`), lose replies and re-send with the same permit id, get
//! `BUSY`/`LOADING` and re-send, while the clock moves past leases and reservations, Redis may
//! restart empty and an operator may take every permit back (`Semaphore::force_release`) or add
//! or take away permits (`Semaphore::add_permits`). The model holds the world only: every call
//! is built and every reply read by the library's own `redis_locks_protocol::semaphore` (but
//! the two noted below), re-sent by its `resend::Resend`, judged by its `given_back`,
//! `renew::decode_renew` and `hold::HoldState`; whether an attempt that can never be granted
//! gives back is its `wait::Wait`'s decision; every call runs the real `lua/sem_*.lua` (the
//! force-release: `lua/force_delete.lua`, built by `force::semaphore_call`, read by
//! `force::decode`) in the embedded Lua against the keyspace model. The one checker
//! (`tests/protocol/checker.rs`) explores it breadth-first and checks the properties in every
//! state.
//!
//! Assumptions (as the read-write lock's checker): one semaphore, one Redis, no client crash;
//! the size is set by `lua/sem_set.lua` before anything else, and changed only by the
//! operator's `add_permits` (see "Drains, added permits and extensions" below); the clock only
//! moves when no call is waiting to execute (a request executes at its send time, but a late
//! one: see below); a request whose reply was lost is re-sent as it was (same permit id, same
//! first send time: one attempt is one `Resend` of the same call, as
//! `held::SetAttempts::attempt_once` makes it); a copy given up on (timed out before it ran)
//! may still run late, but only before the client's next request (see "Late requests" below). A
//! waiter between two attempts (the runtime `src/waiting.rs` driving the core's
//! `protocol::wait::Wait`) either attempts again (the same call, a new `Resend`) or stops
//! waiting (its wait ran out, or its caller dropped it), and then gives back what it may hold
//! with its reservation, as the runtime does when `Wait` says `give_back`:
//! `held::give_back(hold_too = true, leaving = true)`. Every lease is the watchdog's (but an
//! extension's, below), and a renewal whose call fails is not re-sent (the next tick renews).
//! In the default configurations but one an attempt's re-send never gives up (the model's
//! faults run out long before its bound); the probes and one configuration with late requests
//! (at the first failure) give up sooner, and then `held` reports the error and the attempt's
//! `Wait` decides: a waiter that was refused before rides it out and attempts again, any other
//! acquire ends and gives back.
//!
//! Late requests (configurations with `timeouts` or `drops`): a call sent and not yet run
//! may get no reply within the response timeout (`TimeOut`: `Failure::TimedOut`), and a
//! caller may drop its acquire while an attempt is in flight (`Drop`: the runtime's
//! `Acquiring::drop`). Either way the copy on the wire is late (a *stray*): it may still
//! run (`ExecuteStray`), or never (`DropStray`: its connection went away before Redis read
//! it). Every semaphore call (attempts, give-backs, renewals) goes on the client's one
//! multiplexed command connection (`Calls::run`; only the plain lock's acquires use the
//! replica-acknowledgement connection), which a timeout does not drop, and a re-sent copy
//! goes on it too: so a stray runs, if at all, before the client's next request on that
//! connection reaches Redis (TCP keeps a connection's requests in order): before the
//! re-sent copy of the same call, before the give-back of an attempt that gave up or was
//! dropped, before a waiter's next attempt, before the next renewal. Strays of one client
//! run in the order they were sent. Unlike a request on time, a stray may run after the
//! clock moved (while its client sleeps between copies or attempts, or sends nothing): it
//! is late (the plain lock's model keeps the clock still until a stray ran or was lost). A
//! timed-out attempt or give-back goes on as its `Resend` decides (re-sent, or given up:
//! then the attempt's `Wait` decides, as above); a timed-out renewal is not re-sent. A
//! dropped acquire gives back (`give_back(hold_too = true, leaving = true)`, after the
//! stray on the same connection) exactly when the core's `Wait::give_back_if_dropped` says
//! so. A restart drops every stray with its connection. A configuration with late requests
//! must see a stray acquire run after its client gave up (it leaves permits no guard will
//! ever give back unless the library gives them back) and a stray release copy run (it must
//! take out only its own permits). What Redis runs is then what a lost reply's copy could
//! have run, but later; what is new is the client side: its decisions (give back or not,
//! which send a grant is confirmed from, what a give-back reports) are taken while a copy
//! it gave up on has not run yet.
//!
//! `BUSY`/`LOADING` (configurations with `busy`): a call sent and not yet run is refused
//! with a transient state: it did not run; an attempt or a give-back is re-sent by its
//! `Resend` (as for `Failure::Transient`), a renewal is not (the next tick renews).
//!
//! Restarts (configurations with `restarts`): Redis restarts without persistence and
//! loses all data, and the restart takes at least 1 ms (the clock moves by 1). Every
//! connection drops: a request not yet run never runs and a reply not yet delivered is
//! lost, and the client sees `Failure::Lost` (it cannot tell whether the call ran; a reply
//! that reached the client before the crash is the same as `Deliver` before `Restart`).
//! The size is gone with the rest: nothing in the library sets it again, so, as in a real
//! deployment, an operator step (`SetSize`: the application's start-up `try_set_permits`,
//! `sem_set.lua` with only-if-unset) sets it again, at any point after the restart or
//! never. Until then an attempt finds no size (`NoSize`: `held` reads it as
//! `Attempted::Invalid`, a refusal after which something may remain) and the acquire ends
//! with an error, giving back what its copies may have left if its `Wait` says so.
//!
//! What data loss does to the properties: the permits a guard held before a restart are
//! gone behind its back (its guard is *doomed*), and the client cannot know until its next
//! renewal. So "belief is true" and the beliefs' side of "never more permits than the
//! size" exclude doomed guards (a doomed guard and a new grant after the size is set again
//! may together believe in more permits than the size: nobody can prevent that without
//! persistence; the README documents the same limit for the plain lock), while what Redis
//! holds never exceeds the size, with no exception. In exchange, "losses are told" is
//! checked for them: every renewal sent after the restart must report a doomed guard's
//! permits gone (and its guard then lost), and a doomed guard's belief ends at its
//! confirmed deadline in any case.
//!
//! Force-release (one configuration, `force_releases`): an operator's
//! `Semaphore::force_release` runs the real `force_delete.lua` at once, between two calls:
//! it deletes the permits set and wakes the waiters (one `PUBLISH` on the semaphore's
//! channel, checked as published: nobody listens in the model); the size and a waiter's
//! reservation stay. It must take every permit out and report how many were live, and
//! wake the waiters when it took a live one ("release is true"). Unlike a restart, no
//! connection drops: replies on their way still arrive. The guards whose permits it took
//! are doomed, the same documented exception as a restart's wiped permits (excused from
//! "belief is true" and the beliefs' side of the size until they are told), and so is a
//! grant whose reply it overtook (the permits it reports are gone); a renewal that ran
//! after it must report them gone, one that ran before it may still report them current
//! (its reply predates it: the guard stays doomed, and the next renewal tells). A waiter
//! refused before it may take the permits it freed.
//!
//! Drains, added permits and extensions (the last configuration; drains also in the late
//! requests' configuration that gives up):
//! * A drain (`Semaphore::drain_permits`, a request of 0 permits in `Config::requests`) is
//!   an acquisition whose ask is the core's `Asked::EveryFree`: its call is `sem_acquire.lua`
//!   with `Asked::n` (0), never waiting (like `try_acquire`); how many permits its grant
//!   gave, and whether the reply's shape fits the ask, is `Asked::granted` (a guard's `n`);
//!   every give-back (a guard's release, or the waiting loop's of an acquire that ended
//!   with copies unseen) is `Asked::give_back_call` (for a drain, `sem_release.lua` with
//!   n = -1: however many its copies took); its renewals carry its granted count, as the
//!   watchdog's `HoldShape::SetMembers(n)` does. Checked besides: a grant's reply counts
//!   exactly the permits Redis holds under its id (a drain's retry too), and a grant
//!   never takes the permits another waiter's live reservation keeps (in use and
//!   reserved stay within the size). Not modelled: a drain handed over by id
//!   (`release_permits`), `detach`, and drains after a restart or a force-release (no
//!   configuration has both).
//! * `add_permits(delta)` (the `AddPermits` step, +1 or -1, between two calls, as an
//!   operator's) runs the core's `add_call`; its reply is read by the core's `decode_set`
//!   and `added`, as `Semaphore::add_permits` reads it: the size it reports must be Redis's, a change wakes the
//!   waiters, a refusal changes nothing, and no change takes a permit or a reservation.
//!   The model's size follows Redis. A shrink takes nothing back: "never more permits
//!   than the size" allows the permits in use at the shrink to stay in use beyond the new
//!   size until given back or expired (`State::over`, which only falls), and grants no
//!   new permit while they are the size or more; believed permits are held to the same
//!   bound. Not modelled: `add_permits` with
//!   no size (after a restart), and its refusal (no configuration shrinks to 0).
//! * `Guard::extend` (the `Extend` step of a client with a guard it believes in, as the
//!   guard checks first): one call, not re-sent (a failure is the caller's error), with
//!   the lease [`EXTEND_LEASE`], longer than the watchdog's. The call is the core's
//!   `extend::extension_call` for the acquisition's members (what `HoldEntry::extension`
//!   sends); its reply is read as
//!   `HoldEntry::on_extension_reply` reads it: `decode_renew`, then gone:
//!   `HoldState::on_gone`, current: `HoldState::on_extended`. It runs and is checked as a
//!   renewal of one acquisition (a lost or timed-out one too: a stray renewal).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::{Arc, LazyLock};

use redis_locks_protocol::extend::{HoldShape, extension_call};
use redis_locks_protocol::force::{self, ForceDeleted};
use redis_locks_protocol::hold::HoldState;
use redis_locks_protocol::renew::{RenewItem, Renewed, decode_renew};
use redis_locks_protocol::resend::{GivenBack, Resend, SendHistory, given_back};
use redis_locks_protocol::semaphore;
use redis_locks_protocol::semaphore::{
    Asked, SemAcquired, SemaphoreKeys, SizeSet, acquire_call, add_call, added, decode_acquire,
    decode_set, renew_call, set_call,
};
use redis_locks_protocol::wait::{Tried, Wait, WaitEnd, WaitPolicy, WaitStep, WaitTiming};
use redis_locks_protocol::{Call, Env, Failure, Machine, Millis, Next, Reply, RequestIds};

use crate::checker::{Model, Stepped, wait_at_attempt};
use crate::keyspace::Keyspace;
use crate::lua::ScriptRunner;

/// The lease of every acquisition (the watchdog's), in ms.
pub const LEASE: Millis = 100;
/// The lease of a guard's `extend` (`Guard::extend`): longer than the watchdog's, so that
/// an extended guard outlives its first lease without a renewal.
pub const EXTEND_LEASE: Millis = 2 * LEASE;
/// How far the clock moves in one step: one step leaves a permit 40 ms, two expire it.
pub const ADVANCE: Millis = 60;
/// How long a waiter's reservation lasts: one step leaves it, two end it.
pub const RESERVATION: Millis = 90;
/// The model's clock at the start (Redis's TIME answers from it).
pub const START: Millis = 1_000_000;
/// How long an attempt or a give-back keeps re-sending (the model's faults run out long
/// before).
pub const GIVE_UP_AFTER: Millis = 10 * LEASE;
/// The waiting loop's timing (only its give-back decision is asked).
const TIMING: WaitTiming = WaitTiming {
    tolerance: GIVE_UP_AFTER,
    response: LEASE,
};

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
pub const MILESTONES: [&str; 30] = [
    "a grant of 2 permits",
    "every permit out",
    "a retried acquire found its permits",
    "a retried release",
    "a renewal kept a permit past its first lease",
    "a renewal told a loss",
    "a reservation kept permits for a waiter",
    "a waiter gave back its reservation",
    "a BUSY reply was re-sent and ran",
    "a restart emptied the keyspace while permits were held",
    "an attempt found no size after a restart and gave back",
    "permits granted anew while a restart's loss was still believed",
    "a renewal told a restart's loss",
    "a stray acquire ran after its client gave up",
    "a stray acquire took permits after its client gave up",
    "a stray acquire ran before its re-sent copy",
    "a stray release copy ran",
    "a stray renewal ran",
    "a force-release took back permits in use",
    "a holder was told its taken-back permits are lost",
    "a waiter got a permit a force-release freed",
    "a drain took 2 permits",
    "a drain's reply was lost and its retry found its permits",
    "a drain left a reservation alone",
    "a drain's permits were given back whole",
    "permits added let a waiter in",
    "a size shrunk below the permits in use",
    "an extended guard outlived its first lease",
    "an abandoned drain gave back what its lost copy took",
    "a renewal kept a drain's 2 permits past their first lease",
];

/// The milestones of a drain (`Semaphore::drain_permits`; out of reach without one).
pub const DRAIN_MILESTONES: [&str; 6] = [
    MILESTONES[21],
    MILESTONES[22],
    MILESTONES[23],
    MILESTONES[24],
    MILESTONES[28],
    MILESTONES[29],
];

/// The milestones of an operator's `Semaphore::add_permits` (out of reach without one).
pub const ADD_MILESTONES: [&str; 2] = [MILESTONES[25], MILESTONES[26]];

/// The milestone of a guard's `extend` (out of reach without one).
pub const EXTEND_MILESTONES: [&str; 1] = [MILESTONES[27]];

/// The milestones of the restart steps (out of reach without one).
pub const RESTART_MILESTONES: [&str; 4] = [
    MILESTONES[9],
    MILESTONES[10],
    MILESTONES[11],
    MILESTONES[12],
];

/// The milestones of an operator's force-release (out of reach without one).
pub const FORCE_MILESTONES: [&str; 3] = [MILESTONES[18], MILESTONES[19], MILESTONES[20]];

/// The milestones of late requests (out of reach without `timeouts` and `drops`).
pub const STRAY_MILESTONES: [&str; 5] = [
    MILESTONES[13],
    MILESTONES[14],
    MILESTONES[15],
    MILESTONES[16],
    MILESTONES[17],
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
    /// 0 permits: a drain (`Semaphore::drain_permits`: every free permit, never waits).
    pub requests: Vec<(u32, bool)>,
    /// Budgets in all: attempts (a waiter's next attempt counts), clock advances, lost
    /// replies, renewal calls, `BUSY`/`LOADING` replies, restarts with data loss.
    pub acquires: u8,
    pub advances: u8,
    pub faults: u8,
    pub renewals: u8,
    pub busy: u8,
    pub restarts: u8,
    /// An operator's force-releases (`Semaphore::force_release`: `force_delete.lua`).
    pub force_releases: u8,
    /// Late requests (see the header): calls that time out before they run, and acquires
    /// their callers drop while an attempt is in flight.
    pub timeouts: u8,
    pub drops: u8,
    /// An operator's `Semaphore::add_permits` (`sem_set.lua` mode '2', +1 or -1), and
    /// guards' `extend` calls (to [`EXTEND_LEASE`]).
    pub adds: u8,
    pub extends: u8,
    /// How long one attempt re-sends its call before it gives up (the library: three
    /// response timeouts); [`GIVE_UP_AFTER`] is beyond every configuration's clock.
    pub attempt_give_up: Millis,
    /// Milestones this configuration cannot reach (2 permits of a semaphore of 1).
    pub out_of_reach: Vec<&'static str>,
    /// Steps it explores beyond the run's depth (the probes: 2).
    pub extra_depth: usize,
}

impl Config {
    /// Whether the run must reach milestone `index`.
    pub fn requires(&self, index: usize) -> bool {
        !self.out_of_reach.contains(&MILESTONES[index])
    }

    /// The longest lease a call of this configuration sets (the permits set's expiry is
    /// never further away).
    fn longest_lease(&self) -> Millis {
        if self.extends > 0 {
            EXTEND_LEASE
        } else {
            LEASE
        }
    }
}

/// What a request of `n` permits asks for (0: a drain).
fn asked(n: u32) -> Asked {
    if n == 0 {
        Asked::EveryFree
    } else {
        Asked::Exactly(n)
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

/// The keys, built once: every configuration's.
static KEYS: LazyLock<SemaphoreKeys> = LazyLock::new(keys);

/// One acquisition a client believes in (a guard).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Guard {
    /// Its permits: what the core's `Asked::granted` read from the grant.
    pub n: u32,
    /// What its acquisition asked for (its give-back is `Asked::give_back_call`).
    pub asked: Asked,
    /// An `extend` confirmed it (for a milestone).
    pub extended: bool,
    /// When its grant's first copy was sent: past this plus a lease only renewals count.
    pub granted_at: Millis,
    pub state: HoldState,
    /// A restart or a force-release took its permits behind the client's back (see the
    /// header).
    pub doomed: bool,
    /// It was a force-release (for the milestones).
    pub forced: bool,
}

impl Guard {
    /// Whether the client believes in it at `now`: not lost, before its deadline.
    pub fn believed(&self, now: Millis) -> bool {
        self.state.lost().is_none() && now < self.state.deadline()
    }
}

/// One acquisition being attempted: the permit id is the request id, the same on every
/// copy and every round.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Request {
    pub id: Arc<str>,
    pub asked: Asked,
    pub waits: bool,
    /// The send history of this acquisition's attempts (the library's `SendHistory`,
    /// as `held::SetAttempts` keeps it).
    pub sends: SendHistory,
    /// A waiter that was refused once (its `Wait` is waiting: it rides out errors).
    pub refused: bool,
    /// It was refused before a force-release took back permits in use (for a milestone).
    pub freed: bool,
    /// It was refused before permits were added (for a milestone).
    pub added: bool,
}

impl Request {
    /// An attempt's reply: it ends the doubt about earlier attempts (the library's
    /// `SendHistory`); read by the library's decoder.
    fn replied(&mut self, reply: &Reply) -> Result<SemAcquired, String> {
        self.sends.ended(None);
        decode_acquire(reply)
    }

    /// The library's waiting loop for this request as it stands before its current
    /// attempt's outcome: started, and for a waiter that was refused, through that
    /// refusal (subscribed, slept, woken, attempting again). Only its decisions on how an
    /// attempt ended are asked, not its sleeps (the model attempts again at any time).
    fn wait(&self, now: Millis) -> Wait {
        let limit = if self.waits { None } else { Some(0) };
        let refused = self.refused.then_some(RESERVATION);
        wait_at_attempt(WaitPolicy::semaphore(TIMING), now, limit, refused)
            .expect("the waiting loop attempts")
    }
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
    fn next_id(&mut self) -> std::sync::Arc<str> {
        "".into()
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
        asked: Asked,
        leaving: bool,
        resend: Resend,
    },
    Renew {
        items: Vec<RenewItem>,
        order: Vec<usize>,
        sent_at: Millis,
    },
    /// A guard's `extend` of acquisition `hold` to [`EXTEND_LEASE`] (one call, not
    /// re-sent: a failure is the caller's error).
    Extend { hold: Arc<str>, sent_at: Millis },
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
    /// A copy was refused with `BUSY`/`LOADING`.
    pub busied: bool,
    /// Its reply, on its way, predates a force-release that took the permits it grants
    /// or renews (a grant delivered so is doomed from the start).
    pub forced: bool,
}

impl InFlight {
    fn new(op: Op, call: Option<Call>) -> Self {
        let (ran, retried, sleeping, removed, busied) = (None, false, false, false, false);
        InFlight {
            op,
            call,
            ran,
            retried,
            sleeping,
            removed,
            busied,
            forced: false,
        }
    }

    /// A call re-sent by the library's [`Resend`], started at `now`.
    fn resent(call: Call, give_up_at: Millis, now: Millis, op: impl FnOnce(Resend) -> Op) -> Self {
        let mut resend = Resend::new(call, give_up_at);
        let call = match resend.start(&mut ModelEnv(now), &mut ()) {
            Next::Send(call) => Some(call),
            _ => None,
        };
        InFlight::new(op(resend), call)
    }

    /// An attempt of `request` (every attempt of a waiter sends the same call).
    fn attempt(request: Request, world: &Ctx, now: Millis) -> Self {
        let (id, n, waits) = (&request.id, request.asked.n(), request.waits);
        let call = acquire_call(&KEYS, id, n, LEASE, waits, RESERVATION);
        let give_up_at = now + world.config.attempt_give_up;
        let mut resend = request.sends.resend(call, give_up_at);
        let call = match resend.start(&mut ModelEnv(now), &mut ()) {
            Next::Send(call) => Some(call),
            _ => None,
        };
        InFlight::new(Op::Acquire { request, resend }, call)
    }

    /// A give-back of the permits of `id` (what it `asked` for: the core's
    /// `Asked::give_back_call`, with `hold_too` as both the guard's release and the
    /// waiting loop's cleanup call it).
    fn give_back(
        id: Arc<str>,
        asked: Asked,
        leaving: bool,
        keys: &SemaphoreKeys,
        now: Millis,
    ) -> Self {
        let call = asked.give_back_call(keys, &id, true, leaving);
        InFlight::resent(call, now + GIVE_UP_AFTER, now, |resend| Op::Release {
            id,
            asked,
            leaving,
            resend,
        })
    }

    /// What its call does (`None`: a waiter between attempts sends nothing).
    fn sent(&self) -> Option<Sent> {
        match &self.op {
            Op::Acquire { request: r, .. } => Some(Sent::Acquire {
                id: r.id.clone(),
                asked: r.asked,
            }),
            Op::Release {
                id, asked, leaving, ..
            } => Some(Sent::Release {
                id: id.clone(),
                asked: *asked,
                leaving: *leaving,
            }),
            Op::Renew { items, order, .. } => Some(Sent::Renew {
                holds: order.iter().map(|&i| items[i].hold.clone()).collect(),
            }),
            Op::Extend { hold, .. } => Some(Sent::Renew {
                holds: vec![hold.clone()],
            }),
            Op::Waiting { .. } => None,
        }
    }

    /// Sent and not yet run (nor refused, nor timed out).
    fn on_the_wire(&self) -> bool {
        self.call.is_some() && self.ran.is_none() && !self.sleeping
    }

    /// The acquisition this client attempts or gives up, if any: its id, what it asked
    /// for, and whether it is (or was, leaving) a waiter, which may hold a reservation.
    fn acquisition(&self) -> Option<(&Arc<str>, Asked, bool)> {
        match &self.op {
            Op::Acquire { request: r, .. } | Op::Waiting { request: r } => {
                Some((&r.id, r.asked, r.waits))
            }
            Op::Release {
                id, asked, leaving, ..
            } => Some((id, *asked, *leaving)),
            Op::Renew { .. } | Op::Extend { .. } => None,
        }
    }
}

/// What a call on the wire does, for the checks of its run (a stray's call has no
/// operation left to ask).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Sent {
    Acquire {
        id: Arc<str>,
        asked: Asked,
    },
    Release {
        id: Arc<str>,
        asked: Asked,
        leaving: bool,
    },
    /// The hold of each position of the call (`renew_call`'s order; an `extend`: one).
    Renew {
        holds: Vec<Arc<str>>,
    },
}

impl Sent {
    /// The acquisition whose permits (or reservation) the call may take or give back.
    fn own(&self) -> Option<&Arc<str>> {
        match self {
            Sent::Acquire { id, .. } | Sent::Release { id, .. } => Some(id),
            Sent::Renew { .. } => None,
        }
    }
}

/// A late request (see the header): a copy its client gave up on, still on the connection.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Stray {
    pub call: Call,
    pub sent: Sent,
    /// The attempt it belongs to ended without a reply (its `Resend` gave up, or its caller
    /// dropped the acquire): nothing of the client waits for it any more.
    pub given_up: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    pub ids: RequestIds,
    pub guards: Vec<Guard>,
    pub flight: Option<InFlight>,
    /// Late requests on the client's connection, oldest first: each runs, if at all,
    /// before anything the client sends after it.
    pub strays: Vec<Stray>,
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
    pub busy: u8,
    pub restarts: u8,
    pub force_releases: u8,
    pub timeouts: u8,
    pub drops: u8,
    pub adds: u8,
    pub extends: u8,
    /// The size as Redis has it (set, or changed by `add_permits`): the model follows it.
    pub size: u64,
    /// The permits in use when the size last shrank, less those given back or expired
    /// since: so many may stay in use beyond a smaller size (a shrink takes nothing back),
    /// and no new permit is granted until they are fewer than the size.
    pub over: u64,
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
    /// Redis answers a client's call with `BUSY`/`LOADING`: it did not run.
    Busy(usize),
    Advance,
    /// Redis restarts and loses all data (every connection drops).
    Restart,
    /// An operator sets the size again after a restart (`sem_set.lua`, only if unset).
    SetSize,
    /// An operator takes every permit back (`Semaphore::force_release`: the real
    /// `force_delete.lua`, which deletes the permits set and wakes the waiters; the size
    /// and a waiter's reservation stay).
    ForceRelease,
    /// A client's call sent and not yet run gets no reply within the response timeout:
    /// the copy stays on the connection, a stray.
    TimeOut(usize),
    /// The caller drops an acquire whose attempt is in flight (a copy not yet run stays
    /// on the connection, a stray).
    Drop(usize),
    /// A client's oldest stray runs (late, but before anything it sent after).
    ExecuteStray(usize),
    /// A client's oldest stray never runs (its connection went away).
    DropStray(usize),
    /// An operator adds permits (negative: takes some away) with
    /// `Semaphore::add_permits`: `sem_set.lua` mode '2', built by the core's `add_call`.
    AddPermits(i64),
    /// A client extends its guard `g` (`Guard::extend`) to [`EXTEND_LEASE`].
    Extend(usize, usize),
}

/// What a call's run did.
struct Ran {
    reply: Reply,
    /// An acquire found its permits taken (by an earlier copy).
    found: bool,
    /// Its permits changed hands: an acquire took them, a give-back took some out.
    changed: bool,
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

/// The script runner and the scripts, shared by every configuration of a run.
pub struct World {
    runner: ScriptRunner,
    scripts: Scripts,
}

/// The world as one configuration sees it: with what users may ask for and the size.
struct Ctx<'a> {
    world: &'a World,
    config: &'a Config,
}

impl Deref for Ctx<'_> {
    type Target = World;
    fn deref(&self) -> &World {
        self.world
    }
}

impl World {
    pub fn new(scripts: Scripts) -> Self {
        let runner = ScriptRunner::new();
        World { runner, scripts }
    }

    fn run(&self, call: &Call, ks: &mut Keyspace, now: Millis) -> Reply {
        self.run_published(call, ks, now).0
    }

    /// Runs `call`: its reply and the channels it published on.
    fn run_published(&self, call: &Call, ks: &mut Keyspace, now: Millis) -> (Reply, Vec<Vec<u8>>) {
        let bytes = |v: &[Arc<str>]| v.iter().map(|a| a.as_bytes().to_vec()).collect::<Vec<_>>();
        let source = self.scripts.source(call.script);
        let reply = self
            .runner
            .eval(source, &bytes(&call.keys), &bytes(&call.args), ks, now);
        // Nobody listens in the model; a published log would only split equal states.
        let published = ks.published.drain(..).map(|(channel, _)| channel).collect();
        (reply, published)
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

/// The size in the hash, if any.
pub fn size_of(ks: &Keyspace, keys: &SemaphoreKeys, now: Millis) -> Option<String> {
    let hash = ks.hash(keys.hash.as_bytes(), now)?;
    hash.get(b"size".as_slice()).map(|s| show(s))
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

/// The live reservation at `now`, as `sem_acquire.lua` counts it: its waiter and how many
/// permits it keeps.
fn reserved(ks: &Keyspace, keys: &SemaphoreKeys, now: Millis) -> Option<(String, u64)> {
    let hash = ks.hash(keys.hash.as_bytes(), now)?;
    let field = |f: &str| hash.get(f.as_bytes()).map(|v| show(v));
    let until: Millis = field("resv_until")?.parse().ok()?;
    let n = field("resv_n")?.parse().ok()?;
    (until > now).then_some((field("resv")?, n))
}

/// The waiter a reservation keeps permits for at `now`.
fn live_waiter(resv: &Resv, now: Millis) -> Option<&[u8]> {
    let (id, until) = resv.as_ref()?;
    (*until > now).then_some(id.as_bytes())
}

/// What an acquisition asked for, for a trace: its permits, or "all" (a drain).
fn shown(asked: Asked) -> String {
    match asked {
        Asked::Exactly(n) => n.to_string(),
        Asked::EveryFree => "all".into(),
    }
}

pub fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

impl State {
    /// The start: the size set by the real `sem_set.lua` (never a planted one: no tooth
    /// plants a defect in it), no permit out.
    pub fn initial(config: &Config) -> Self {
        let mut ks = Keyspace::default();
        let world = World::new(Scripts::real());
        let reply = world.run(&set_call(&KEYS, config.size, false), &mut ks, START);
        let unset = Reply::Array(vec![Reply::Int(-1), Reply::Int(0)]);
        assert_eq!(reply, unset, "sem_set.lua");
        let client = |i| Client {
            ids: RequestIds::new(format!("c{i}")),
            guards: Vec::new(),
            flight: None,
            strays: Vec::new(),
        };
        State {
            ks,
            now: START,
            clients: (0..config.clients).map(client).collect(),
            acquires: config.acquires,
            advances: config.advances,
            faults: config.faults,
            renewals: config.renewals,
            busy: config.busy,
            restarts: config.restarts,
            force_releases: config.force_releases,
            timeouts: config.timeouts,
            drops: config.drops,
            adds: config.adds,
            extends: config.extends,
            size: config.size,
            over: 0,
        }
    }

    pub fn steps(&self, config: &Config) -> Vec<Step> {
        let mut steps = Vec::new();
        let mut waiting_to_run = false;
        for (c, client) in self.clients.iter().enumerate() {
            let stray = !client.strays.is_empty();
            if stray {
                steps.push(Step::ExecuteStray(c));
                steps.push(Step::DropStray(c));
            }
            if self.drops > 0
                && let Some(InFlight {
                    op: Op::Acquire { .. },
                    ..
                }) = &client.flight
            {
                steps.push(Step::Drop(c));
            }
            match &client.flight {
                None => {
                    if self.acquires > 0 {
                        let asks = config.requests.iter();
                        steps.extend(asks.map(|&(n, waits)| Step::Acquire(c, n, waits)));
                    }
                    steps.extend((0..client.guards.len()).map(|g| Step::Release(c, g)));
                    if self.renewals > 0 && client.guards.iter().any(|g| g.state.is_active()) {
                        steps.push(Step::Renew(c));
                    }
                    // `Guard::extend` checks first that its hold is not lost.
                    if self.extends > 0 {
                        let believed = |(_, g): &(usize, &Guard)| g.believed(self.now);
                        let guards = client.guards.iter().enumerate().filter(believed);
                        steps.extend(guards.map(|(g, _)| Step::Extend(c, g)));
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
                    // Its connection runs (or loses) the strays before it.
                    if !stray {
                        steps.push(Step::Run(c));
                        if self.busy > 0 {
                            steps.push(Step::Busy(c));
                        }
                        if self.timeouts > 0 {
                            steps.push(Step::TimeOut(c));
                        }
                    }
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
        if self.restarts > 0 {
            steps.push(Step::Restart);
        }
        // Only where it changes more than its budget: a permits set to delete.
        if self.force_releases > 0 && self.ks.zset(KEYS.permits.as_bytes(), self.now).is_some() {
            steps.push(Step::ForceRelease);
        }
        if size_of(&self.ks, &KEYS, self.now).is_none() {
            steps.push(Step::SetSize);
        } else if self.adds > 0 {
            steps.push(Step::AddPermits(1));
            steps.push(Step::AddPermits(-1));
        }
        steps
    }

    pub fn apply(&mut self, step: &Step, world: &World, config: &Config) -> Effects {
        let world = &Ctx { world, config };
        let mut fx = Effects::default();
        let keys: &SemaphoreKeys = &KEYS;
        let now = self.now;
        match *step {
            Step::Acquire(c, n, waits) => {
                self.acquires -= 1;
                let client = &mut self.clients[c];
                let request = Request {
                    id: client.ids.next_id(),
                    asked: asked(n),
                    waits,
                    sends: SendHistory::default(),
                    refused: false,
                    freed: false,
                    added: false,
                };
                client.flight = Some(InFlight::attempt(request, world, now));
            }
            Step::Retry(c) | Step::Leave(c) => {
                let flight = &mut self.clients[c].flight;
                let Some(Op::Waiting { request }) = flight.take().map(|f| f.op) else {
                    unreachable!("only a waiter attempts again or leaves")
                };
                *flight = Some(if let Step::Retry(_) = step {
                    self.acquires -= 1;
                    InFlight::attempt(request, world, now)
                } else {
                    // The wait ended (or its caller dropped it) after a refusal that
                    // reserved: `Wait` says give back, and the runtime gives back the
                    // permits too (hold_too) and the reservation (leaving).
                    InFlight::give_back(request.id, request.asked, true, keys, now)
                });
            }
            Step::Release(c, g) => {
                let client = &mut self.clients[c];
                let guard = client.guards.remove(g);
                let id = guard.state.hold().clone();
                client.flight = Some(InFlight::give_back(id, guard.asked, false, keys, now));
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
                                hash_form: false,
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
                self.fail_call(c, Failure::Lost, &mut fx);
            }
            Step::Busy(c) => {
                self.busy -= 1;
                let failure = Failure::Transient("BUSY Redis is busy running a script".into());
                self.fail_call(c, failure, &mut fx);
            }
            Step::Restart => {
                self.restarts -= 1;
                let all = members(&self.ks, keys, now);
                let believed = |g: &Guard| {
                    let first = member(g.state.hold(), 1);
                    g.believed(now) && live(&all, now).any(|(m, _)| *m == first)
                };
                let guards = || self.clients.iter().flat_map(|c| c.guards.iter());
                if guards().any(believed) {
                    fx.reach("a restart emptied the keyspace while permits were held");
                }
                self.ks.flush_all();
                // A restart takes at least a millisecond.
                self.now += 1;
                for c in 0..self.clients.len() {
                    // Its connection dropped: a stray never runs.
                    self.clients[c].strays.clear();
                    for guard in &mut self.clients[c].guards {
                        guard.doomed = true;
                        guard.state.on_clock(self.now);
                    }
                    // Every connection drops: what is on the wire (a request not yet run,
                    // a reply not yet delivered) is lost, and the client cannot tell which.
                    let on_the_wire = |f: &InFlight| f.call.is_some() && !f.sleeping;
                    if self.clients[c].flight.as_ref().is_some_and(on_the_wire) {
                        self.fail_call(c, Failure::Lost, &mut fx);
                    }
                }
            }
            Step::ForceRelease => {
                self.force_releases -= 1;
                self.force_release(world, &mut fx);
            }
            Step::SetSize => {
                // As the application's start-up `try_set_permits`: only if unset.
                let call = set_call(keys, world.config.size, true);
                let reply = world.run(&call, &mut self.ks, now);
                let unset = Reply::Array(vec![Reply::Int(-1), Reply::Int(0)]);
                if reply != unset {
                    fx.fail(GARBAGE, format!("the size set again: {reply:?}"));
                }
                (self.size, self.over) = (world.config.size, 0);
            }
            Step::TimeOut(c) => {
                self.timeouts -= 1;
                let client = &mut self.clients[c];
                let flight = client.flight.as_ref().expect("a call in flight");
                let (call, sent) = (flight.call.clone(), flight.sent());
                let (call, sent) = (call.expect("a call sent"), sent.expect("a call"));
                let given_up = false;
                client.strays.push(Stray {
                    call,
                    sent,
                    given_up,
                });
                self.fail_call(c, Failure::TimedOut, &mut fx);
            }
            Step::Drop(c) => {
                self.drops -= 1;
                let client = &mut self.clients[c];
                let flight = client.flight.take().expect("an acquire in flight");
                if flight.on_the_wire() {
                    let (call, sent) = (flight.call.clone(), flight.sent());
                    let (call, sent) = (call.expect("a call sent"), sent.expect("a call"));
                    let given_up = true;
                    client.strays.push(Stray {
                        call,
                        sent,
                        given_up,
                    });
                }
                client.strays.iter_mut().for_each(|s| s.given_up = true);
                let Op::Acquire { request, .. } = flight.op else {
                    unreachable!("only an acquire is dropped")
                };
                // The runtime's `Acquiring::drop`: its waiting loop, with this attempt in
                // flight, says whether to give back (in the background: on the same
                // connection, after the stray).
                if request.wait(now).give_back_if_dropped() {
                    let (id, asked) = (request.id, request.asked);
                    client.flight = Some(InFlight::give_back(id, asked, true, keys, now));
                }
            }
            Step::ExecuteStray(c) => {
                let stray = self.clients[c].strays.remove(0);
                // Nobody reads its reply.
                let ran = self.execute(c, &stray.call, &stray.sent, world, &mut fx);
                match &stray.sent {
                    Sent::Acquire { .. } if !stray.given_up => {
                        fx.reach("a stray acquire ran before its re-sent copy");
                    }
                    Sent::Acquire { .. } => {
                        fx.reach("a stray acquire ran after its client gave up");
                        if ran.changed {
                            fx.reach("a stray acquire took permits after its client gave up");
                        }
                    }
                    Sent::Release { id, .. } => {
                        fx.reach("a stray release copy ran");
                        // What its give-back reports must count the copies that ran late.
                        if let Some(InFlight {
                            op: Op::Release { id: current, .. },
                            removed: flight_removed,
                            ..
                        }) = &mut self.clients[c].flight
                            && current == id
                        {
                            *flight_removed |= ran.changed;
                        }
                    }
                    Sent::Renew { .. } => fx.reach("a stray renewal ran"),
                }
            }
            Step::DropStray(c) => {
                self.clients[c].strays.remove(0);
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
            Step::AddPermits(delta) => {
                self.adds -= 1;
                self.add_permits(delta, world, &mut fx);
            }
            Step::Extend(c, g) => {
                self.extends -= 1;
                let client = &mut self.clients[c];
                let guard = &client.guards[g];
                // `Guard::extend`'s call (`HoldEntry::extension`): the core's
                // `extension_call` for the acquisition's permits.
                let hold = guard.state.hold().clone();
                let shape = HoldShape::SetMembers(guard.n);
                let call = extension_call(EXTEND_LEASE, keys.permits.clone(), hold.clone(), shape);
                let op = Op::Extend { hold, sent_at: now };
                client.flight = Some(InFlight::new(op, Some(call)));
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
        // Permits given back or expired since a shrink are no longer allowed beyond the
        // size.
        let in_use = live(&members(&self.ks, keys, self.now), self.now).count() as u64;
        self.over = self.over.min(in_use);
        self.check(world, &mut fx);
        fx
    }

    /// An operator's `Semaphore::add_permits(delta)`: the core's `add_call`, run at once
    /// between two calls, its reply read as `Semaphore::add_permits` reads it (the reading
    /// is not in the core: the model reads it the same way). The size it reports must be
    /// the one Redis has; a size that grows wakes the waiters (checked as published);
    /// shrinking takes nothing back: the permits in use beyond the new size stay allowed
    /// until given back or expired ([`State::over`]).
    fn add_permits(&mut self, delta: i64, world: &Ctx, fx: &mut Effects) {
        let (keys, now) = (&*KEYS, self.now);
        let before = members(&self.ks, keys, now);
        let resv_before = reservation(&self.ks, keys, now);
        let in_use = live(&before, now).count() as u64;
        let call = add_call(keys, delta);
        let (reply, published) = world.run_published(&call, &mut self.ks, now);
        // It takes nothing back: every live permit and the reservation stay as they were.
        let after = members(&self.ks, keys, now);
        let kept = live(&before, now).all(|(m, s)| after.get(m).is_some_and(|l| *l >= s));
        if !kept || reservation(&self.ks, keys, now) != resv_before {
            let names = |set: &BTreeMap<Vec<u8>, f64>| set.keys().map(|m| show(m)).collect();
            let (before, after): (Vec<String>, Vec<String>) = (names(&before), names(&after));
            let what = format!("add_permits({delta}) took permits or a reservation");
            fx.fail(OWN, format!("{what}: {before:?} -> {after:?}"));
        }
        let wanted = self.size as i64 + delta;
        let size = size_of(&self.ks, keys, now);
        // Read by the core's `decode_set`, as `Semaphore::add_permits` reads it.
        let (told, woke) = match decode_set(&reply) {
            Ok(SizeSet::OutOfRange { previous }) => {
                let told = format!("refused (previous {previous:?})");
                let right = wanted < 1 && previous == Some(self.size);
                (told, if right { Some(false) } else { None })
            }
            Ok(SizeSet::Done {
                previous,
                in_use: used,
            }) => {
                let new = added(previous, delta);
                let told = format!("{new} (previous {previous:?}, {used} in use)");
                let right = previous == Some(self.size)
                    && used == in_use
                    && new >= 1
                    && size == Some(new.to_string());
                if right {
                    self.size = new as u64;
                    self.over = in_use;
                }
                (told, right.then_some(true))
            }
            other => (format!("{other:?} ({reply:?})"), None),
        };
        let what = format!("add_permits({delta}) of a size {}", self.size);
        match woke {
            None => fx.fail(SIZE, format!("{what} told {told}; Redis: {size:?}")),
            Some(woke) => {
                let channel = keys.channel.as_bytes().to_vec();
                if published != woke.then_some(channel).into_iter().collect::<Vec<_>>() {
                    fx.fail(RELEASE, format!("{what} ({told}) published {published:?}"));
                }
            }
        }
        if woke == Some(true) && delta > 0 {
            for client in &mut self.clients {
                if let Some(InFlight {
                    op: Op::Acquire { request, .. } | Op::Waiting { request },
                    ..
                }) = &mut client.flight
                {
                    request.added |= request.refused;
                }
            }
        }
        if woke == Some(true) && in_use > self.size {
            fx.reach("a size shrunk below the permits in use");
        }
    }

    /// A call of client `c` got no reply (`failure`): an attempt or a give-back is re-sent
    /// as its `Resend` decides; the watchdog does not re-send a renewal (the next tick
    /// renews).
    fn fail_call(&mut self, c: usize, failure: Failure, fx: &mut Effects) {
        let now = self.now;
        let client = &mut self.clients[c];
        let flight = client.flight.as_mut().expect("a call in flight");
        let (lost, busy) = (
            failure.may_have_run(),
            matches!(failure, Failure::Transient(_)),
        );
        let next = match &mut flight.op {
            Op::Renew { .. } | Op::Extend { .. } => None,
            Op::Acquire { resend, .. } | Op::Release { resend, .. } => {
                Some(resend.on_failure(&mut ModelEnv(now), &mut (), failure))
            }
            Op::Waiting { .. } => unreachable!("a waiter has nothing in flight"),
        };
        match next {
            Some(Next::SleepUntil(_)) => {
                flight.ran = None;
                flight.retried |= lost;
                flight.busied |= busy;
                flight.sleeping = true;
            }
            None => client.flight = None,
            // An attempt that gave up: `held` reports the error, a transient one as a
            // loss when a copy may have run (`Outcome::from_error`); the waiting loop
            // decides.
            Some(Next::Done(Err(gave_up))) if matches!(flight.op, Op::Acquire { .. }) => {
                let Some(Op::Acquire { mut request, .. }) = client.flight.take().map(|f| f.op)
                else {
                    unreachable!("an attempt")
                };
                // Its copies still on the wire now run, if at all, after it gave up.
                client.strays.iter_mut().for_each(|s| s.given_up = true);
                request.sends.ended(Some(&gave_up));
                let failure = gave_up.failure.after_earlier_loss(gave_up.after_loss);
                self.attempt_ended(c, request, Tried::Failed(failure), fx);
            }
            Some(other) => fx.fail(GARBAGE, format!("the re-send gave up: {other:?}")),
        }
    }

    /// Attempt `request` of client `c` ended without a grant (`tried`): as its waiting
    /// loop decides, the client attempts again later (a waiter riding out errors), or the
    /// acquire ends, giving back what its copies may have left (`give_back(hold_too =
    /// true, leaving = true)`, as the runtime does). Returns whether it gives back.
    fn attempt_ended(
        &mut self,
        c: usize,
        request: Request,
        tried: Tried,
        fx: &mut Effects,
    ) -> bool {
        let now = self.now;
        let flight = &mut self.clients[c].flight;
        match request.wait(now).attempted(now, tried, false, 0) {
            WaitStep::Sleep { .. } => {
                *flight = Some(InFlight::new(Op::Waiting { request }, None));
                false
            }
            WaitStep::Done(WaitEnd::Failed { give_back, .. })
            | WaitStep::Done(WaitEnd::TimedOut { give_back, .. }) => {
                *flight = give_back.then(|| {
                    let (id, asked) = (request.id, request.asked);
                    InFlight::give_back(id, asked, true, &KEYS, now)
                });
                give_back
            }
            other => {
                fx.fail(
                    GARBAGE,
                    format!("the waiting loop after {request:?}: {other:?}"),
                );
                false
            }
        }
    }

    /// An operator's `Semaphore::force_release`: the real `force_delete.lua` through the
    /// library's `force::semaphore_call`, its reply read by `force::decode`. The guards
    /// whose permits it takes are doomed (as after a restart: excused until they are
    /// told), and so is a grant whose reply, on its way, it overtakes; a waiter refused
    /// before it may take what it freed. It must take every permit out, report how many
    /// were live, and wake the waiters when it took a live one (nobody listens in the
    /// model: the wake-up is checked as published).
    fn force_release(&mut self, world: &Ctx, fx: &mut Effects) {
        let (keys, now) = (&*KEYS, self.now);
        let all = members(&self.ks, keys, now);
        let in_redis = |id: &str| live(&all, now).any(|(m, _)| *m == member(id, 1));
        let taken = live(&all, now).count() as u64;
        for client in &mut self.clients {
            for guard in &mut client.guards {
                // Believed or not: a renewal that ran before it may still revive it.
                if !guard.doomed && in_redis(guard.state.hold()) {
                    if guard.believed(now) {
                        fx.reach("a force-release took back permits in use");
                    }
                    guard.doomed = true;
                    guard.forced = true;
                }
            }
            let Some(flight) = &mut client.flight else {
                continue;
            };
            match &mut flight.op {
                // A reply on its way (a grant, a renewal) predates it.
                Op::Acquire { request, .. } if flight.ran.is_some() => {
                    flight.forced = in_redis(&request.id);
                }
                Op::Renew { .. } | Op::Extend { .. } if flight.ran.is_some() => {
                    flight.forced = true
                }
                _ => {}
            }
            match &mut flight.op {
                Op::Acquire { request, .. } | Op::Waiting { request } => {
                    request.freed |= request.refused && taken > 0;
                }
                _ => {}
            }
        }
        let call = force::semaphore_call(keys);
        let (reply, published) = world.run_published(&call, &mut self.ks, now);
        if !members(&self.ks, keys, now).is_empty() {
            fx.fail(RELEASE, "the force-release left permits".into());
        }
        let read = force::decode(&reply);
        if read != Ok(ForceDeleted::Holds(taken)) {
            let what = format!("the force-release of {taken} live permits reported {read:?}");
            fx.fail(RELEASE, what);
        }
        let channel = keys.channel.as_bytes().to_vec();
        let expected: Vec<Vec<u8>> = (taken > 0).then_some(channel).into_iter().collect();
        if published != expected {
            let woke: Vec<String> = published.iter().map(|ch| show(ch)).collect();
            let what = format!("the force-release of {taken} live permits woke {woke:?}");
            fx.fail(RELEASE, what);
        }
    }

    fn run(&mut self, c: usize, world: &Ctx, fx: &mut Effects) {
        let flight = self.clients[c].flight.as_ref().expect("a call in flight");
        let call = flight.call.clone().expect("a call to run");
        let sent = flight.sent().expect("a call");
        if flight.busied {
            fx.reach("a BUSY reply was re-sent and ran");
        }
        let retried = flight.retried;
        let ran = self.execute(c, &call, &sent, world, fx);
        if let Sent::Acquire { asked, .. } = sent
            && ran.found
            && retried
        {
            fx.reach("a retried acquire found its permits");
            if asked == Asked::EveryFree {
                fx.reach("a drain's reply was lost and its retry found its permits");
            }
        }
        let flight = self.clients[c].flight.as_mut().expect("a call in flight");
        if let Sent::Release { .. } = sent {
            flight.removed |= ran.changed;
        }
        flight.ran = Some(ran.reply);
        flight.forced = false;
    }

    /// Runs `call` of client `c` (`sent`: what it does), in time or late, and checks what
    /// it did to Redis against the reply it gave.
    fn execute(
        &mut self,
        c: usize,
        call: &Call,
        sent: &Sent,
        world: &Ctx,
        fx: &mut Effects,
    ) -> Ran {
        let (keys, now) = (&*KEYS, self.now);
        let before = members(&self.ks, keys, now);
        let resv_before = reservation(&self.ks, keys, now).unwrap_or(None);
        let kept_before = reserved(&self.ks, keys, now);
        let reply = world.run(call, &mut self.ks, now);
        let after = members(&self.ks, keys, now);
        let resv_after = reservation(&self.ks, keys, now).unwrap_or(None);
        let own = sent.own().map_or(&b""[..], |id| id.as_bytes());
        let is_own = |m: &[u8]| split_member(m).is_some_and(|(id, _)| id == own);
        let releases = matches!(sent, Sent::Release { .. });
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
        let (mut found, mut changed) = (false, false);
        match sent {
            Sent::Acquire { id, asked } => {
                let first = member(id, 1);
                let existed = live(&before, now).any(|(m, _)| *m == first);
                let own_set = |set: &BTreeMap<Vec<u8>, f64>| {
                    let mine = set.iter().filter(|(m, _)| is_own(m));
                    mine.map(|(m, s)| (m.clone(), s.to_bits()))
                        .collect::<Vec<_>>()
                };
                if existed && own_set(&before) != own_set(&after) {
                    fx.fail(TWICE, format!("a copy of {id} took its permits again"));
                }
                found = existed;
                changed = !existed && after.contains_key(&first);
                // A grant's reply counts the acquisition's permits (a drain's: how many it
                // took, or on a retry, found).
                let mine = after.keys().filter(|m| is_own(m)).count() as u32;
                match (
                    asked.granted(&decode_acquire(&reply).unwrap_or(SemAcquired::NoSize)),
                    asked,
                ) {
                    (Ok(Some(n)), _) if n != mine => {
                        let what = format!("{id} granted {n} permits; Redis has {mine}");
                        fx.fail(TWICE, what);
                    }
                    (Ok(Some(2)), Asked::EveryFree) => fx.reach("a drain took 2 permits"),
                    (Err(err), _) => fx.fail(TWICE, err),
                    _ => {}
                }
                // Another waiter's live reservation keeps its permits: a grant leaves them
                // free (in use and reserved within the size).
                let used = live(&before, now).count() as u64;
                let kept = kept_before.filter(|(w, _)| w.as_bytes() != own);
                if let Some((waiter, kept)) = &kept
                    && changed
                    && live(&after, now).count() as u64 + kept > self.size
                {
                    let what = format!("{what} took permits kept for {waiter}'s reservation");
                    fx.fail(OWN, what);
                }
                // Only a reservation stood between this attempt and enough free permits.
                let held_back = live_waiter(&resv_before, now).is_some_and(|w| w != own);
                let fits = used + u64::from(asked.n().max(1)) <= self.size;
                if !after.contains_key(&first) && held_back && fits {
                    fx.reach("a reservation kept permits for a waiter");
                }
                if *asked == Asked::EveryFree && held_back && fits && kept.is_some() {
                    fx.reach("a drain left a reservation alone");
                }
            }
            Sent::Release { id, asked, leaving } => {
                // Members taken out, live or not: `sem_release.lua` does not sweep expired
                // permits first, so it gives back (and counts) one that expired unswept.
                let gone = |m: &&Vec<u8>| is_own(m) && !after.contains_key(*m);
                let taken = before.keys().filter(gone).count();
                if reply != Reply::Int(taken as i64) {
                    fx.fail(
                        RELEASE,
                        format!("give-back of {id} said {reply:?}, took {taken}"),
                    );
                }
                if *asked == Asked::EveryFree && taken >= 2 && !after.keys().any(|m| is_own(m)) {
                    fx.reach("a drain's permits were given back whole");
                }
                if *asked == Asked::EveryFree && *leaving && taken > 0 {
                    fx.reach("an abandoned drain gave back what its lost copy took");
                }
                changed = taken > 0;
                let had = resv_before.as_ref().is_some_and(|r| *r.0 == **id);
                if *leaving && had && resv_after.is_none() {
                    fx.reach("a waiter gave back its reservation");
                }
            }
            Sent::Renew { holds } => match decode_renew(&reply, holds.len()) {
                Err(err) => fx.fail(LOSSES, err),
                Ok(status) => {
                    for (hold, status) in holds.iter().zip(status.iter()) {
                        let was_live = live(&before, now).any(|(m, _)| *m == member(hold, 1));
                        if (*status == Renewed::Gone) == was_live {
                            let was = if was_live { "live" } else { "gone" };
                            fx.fail(LOSSES, format!("renewal: {status:?} of {hold} ({was})"));
                        }
                    }
                }
            },
        }
        Ran {
            reply,
            found,
            changed,
        }
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
            Op::Acquire {
                mut request,
                resend,
            } => match request.replied(&reply).and_then(|found| {
                // How many it was granted: the core's `Asked::granted` (a drain's count
                // is Redis's).
                let granted = request.asked.granted(&found)?;
                Ok((found, granted))
            }) {
                Ok((_, Some(n))) => {
                    if n == 2 {
                        fx.reach("a grant of 2 permits");
                    }
                    if request.added {
                        fx.reach("permits added let a waiter in");
                    }
                    let mut guards = self.clients.iter().flat_map(|c| c.guards.iter());
                    if guards.any(|g| g.doomed && !g.forced && g.believed(now)) {
                        fx.reach("permits granted anew while a restart's loss was still believed");
                    }
                    if request.freed {
                        fx.reach("a waiter got a permit a force-release freed");
                    }
                    let client = &mut self.clients[c];
                    if client.guards.iter().any(|g| g.state.hold() == &request.id) {
                        fx.fail(TWICE, format!("client {c} got {} twice", request.id));
                    }
                    // Confirmed from the send time the library's machine says.
                    let sent_at = resent(resend).first_sent_at;
                    let state = HoldState::new(request.id.clone(), sent_at, LEASE, true);
                    // A grant whose permits a force-release took since it ran is doomed.
                    client.guards.push(Guard {
                        n,
                        asked: request.asked,
                        extended: false,
                        granted_at: sent_at,
                        state,
                        doomed: flight.forced,
                        forced: flight.forced,
                    });
                }
                // The size is gone (a restart), or now smaller than the permits asked for
                // (`add_permits`): a refusal. Whether an earlier copy may have left
                // something is the core's call (`Attempted::claim_may_remain`), and what to
                // give back the waiting loop's core decides.
                Ok((found @ (SemAcquired::NoSize | SemAcquired::TooMany(_)), None)) => {
                    let no_size = found == SemAcquired::NoSize;
                    let after_loss = resent(resend).after_loss;
                    let attempted = semaphore::attempted(found, "s", request.asked.n());
                    let refused = Tried::Refused {
                        claim_may_remain: attempted.claim_may_remain(after_loss),
                    };
                    if self.attempt_ended(c, request, refused, fx) && no_size {
                        fx.reach("an attempt found no size after a restart and gave back");
                    }
                }
                Ok((SemAcquired::Wait(_) | SemAcquired::FirstInLine(_), _)) if request.waits => {
                    let request = Request {
                        refused: true,
                        ..request
                    };
                    self.clients[c].flight = Some(InFlight::new(Op::Waiting { request }, None));
                }
                Ok((SemAcquired::Wait(_) | SemAcquired::FirstInLine(_), _)) => {}
                Ok((other, _)) => fx.fail(TWICE, format!("unexpected acquire reply {other:?}")),
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
                                if guard.forced {
                                    fx.reach("a holder was told its taken-back permits are lost");
                                } else if guard.doomed {
                                    fx.reach("a renewal told a restart's loss");
                                }
                            }
                        }
                        Renewed::Elsewhere => fx.fail(LOSSES, "Elsewhere on one Redis".into()),
                    }
                    // Every renewal was sent after the restart (the restart lost those on
                    // the wire): it must have told a doomed guard its loss; so must one that
                    // ran after the force-release (one that ran before it is not `forced`).
                    if guard.doomed && guard.state.is_active() && !flight.forced {
                        let hold = guard.state.hold();
                        fx.fail(
                            LOSSES,
                            format!("a renewal left {hold} believed after a restart"),
                        );
                    }
                }
            }
            // Read as `HoldEntry::on_extension_reply` reads it: gone, the hold is lost
            // (`Registry::gone`); current, its expiry is at least the extension's lease
            // from the send (`HoldState::on_extended`). Checked against Redis when it ran.
            Op::Extend { hold, sent_at } => {
                let guards = &mut self.clients[c].guards;
                let Some(guard) = guards.iter_mut().find(|g| g.state.hold() == &hold) else {
                    return; // given back since
                };
                match decode_renew(&reply, 1).as_deref() {
                    Ok([Renewed::Gone]) => {
                        guard.state.on_gone();
                    }
                    Ok([_]) => {
                        guard.state.on_extended(sent_at, EXTEND_LEASE);
                        guard.extended = true;
                    }
                    _ => {} // an error: the caller's (`UnexpectedReply`)
                }
                if guard.doomed && guard.state.is_active() && !flight.forced {
                    let hold = guard.state.hold();
                    let what = format!("an extension left {hold} believed after a restart");
                    fx.fail(LOSSES, what);
                }
            }
            Op::Waiting { .. } => unreachable!("a waiter has no reply"),
        }
    }

    /// The properties that hold in every state.
    fn check(&self, world: &Ctx, fx: &mut Effects) {
        let (keys, now) = (&*KEYS, self.now);
        let all = members(&self.ks, keys, now);
        // (1), (2): what clients believe (not given back, not lost, before its deadline),
        // against the size and against Redis; but for the beliefs a restart made untrue
        // (doomed: told by the next renewal, see the header). What Redis holds is checked
        // against the size with no exception but one: the permits in use when the size
        // shrank may stay in use beyond it (`over`: a shrink takes nothing back), but none
        // is granted while they are the size or more.
        let mut believed = 0;
        for (c, client) in self.clients.iter().enumerate() {
            for guard in &client.guards {
                let deadline = guard.state.deadline();
                if !guard.believed(now) || guard.doomed {
                    continue;
                }
                believed += guard.n as u64;
                if now >= guard.granted_at + LEASE {
                    fx.reach(if guard.extended {
                        "an extended guard outlived its first lease"
                    } else {
                        "a renewal kept a permit past its first lease"
                    });
                    if !guard.extended && guard.asked == Asked::EveryFree && guard.n >= 2 {
                        fx.reach("a renewal kept a drain's 2 permits past their first lease");
                    }
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
        let allowed = self.size.max(self.over);
        if believed > allowed || in_use > allowed {
            let what = format!("believed {believed}, live in Redis {in_use}");
            let over = format!("{} in use when it shrank", self.over);
            fx.fail(SIZE, format!("{what}, of {} permits ({over})", self.size));
        }
        if believed == self.size {
            fx.reach("every permit out");
        }
        // (3): each acquisition is exactly its members `<id>:1..n`, with one deadline.
        let mut known: BTreeMap<&[u8], u32> = BTreeMap::new();
        for client in &self.clients {
            for guard in &client.guards {
                known.insert(guard.state.hold().as_bytes(), guard.n);
            }
            // A drain's count is known once its grant is read (its guard's).
            let flight = client.flight.as_ref().and_then(InFlight::acquisition);
            if let Some((id, Asked::Exactly(n), _)) = flight {
                known.insert(id.as_bytes(), n);
            }
            for stray in &client.strays {
                if let Sent::Acquire { id, asked } | Sent::Release { id, asked, .. } = &stray.sent
                    && let Asked::Exactly(n) = asked
                {
                    known.insert(id.as_bytes(), *n);
                }
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
        // is left; a live reservation is always a waiter's. A stray is not in flight: what
        // it takes when it runs, nothing of its client will give back.
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
        // deadline and never more than the longest lease away (`sem_acquire.lua`,
        // `sem_renew.lua`; an extension's is longer).
        // Not "exactly at its latest deadline": `sem_release.lua` leaves the expiry where
        // the permit it gave back had it.
        for key in self.ks.keys(now) {
            let expiry = self.ks.pexpire_at(&key, now).flatten();
            if key == keys.hash.as_bytes() {
                let hash = self.ks.hash(&key, now);
                let size = hash
                    .and_then(|h| h.get(b"size".as_slice()))
                    .map(|s| show(s));
                if expiry.is_some() || size != Some(self.size.to_string()) {
                    fx.fail(
                        GARBAGE,
                        format!("the size hash: TTL {expiry:?}, size {size:?}"),
                    );
                }
            } else if key == keys.permits.as_bytes() {
                let latest = all.values().copied().fold(f64::MIN, f64::max);
                let longest = world.config.longest_lease();
                if !expiry.is_some_and(|at| at as f64 >= latest && at <= now + longest) {
                    let what = format!("expires at {expiry:?}, latest permit at {latest}");
                    fx.fail(GARBAGE, format!("the permits set {what} (now {now})"));
                }
            } else {
                fx.fail(GARBAGE, format!("unexpected key {}", show(&key)));
            }
        }
    }
}

impl State {
    /// One line: the clock (from the start), Redis's permits and reservation, each
    /// client's beliefs and what it is doing.
    pub fn describe(&self) -> String {
        let (keys, now) = (&*KEYS, self.now);
        let at = |ms: f64| ms as i64 - START as i64;
        let permits: Vec<String> = members(&self.ks, keys, now)
            .iter()
            .map(|(m, s)| format!("{}@{}", show(m), at(*s)))
            .collect();
        let mut out = format!("t={} redis: permits[{}]", now - START, permits.join(" "));
        match size_of(&self.ks, keys, now) {
            None => out += " (no size)",
            Some(size) if self.over > self.size => {
                out += &format!(" size {size} ({} in use when it shrank)", self.over)
            }
            Some(size) => out += &format!(" size {size}"),
        }
        if let Some(expiry) = self.ks.pexpire_at(keys.permits.as_bytes(), now) {
            out += &format!(" expires@{}", expiry.map_or(-1, |t| at(t as f64)));
        }
        if let Ok(Some((id, until))) = reservation(&self.ks, keys, now) {
            out += &format!(" reserved for {id} until {}", at(until as f64));
        }
        for (c, client) in self.clients.iter().enumerate() {
            out += &format!("; c{c}:");
            for guard in &client.guards {
                let deadline = guard.state.deadline();
                let (id, n) = (guard.state.hold(), guard.n);
                let note = match (guard.believed(now), guard.doomed, guard.forced) {
                    (false, _, _) => " (not believed)",
                    (true, true, true) => " (taken back by a force-release, not told yet)",
                    (true, true, false) => " (lost to the restart, not told yet)",
                    (true, false, _) => "",
                };
                out += &format!(" {id}x{n} until {}{note}", at(deadline as f64));
            }
            for stray in &client.strays {
                let what = match &stray.sent {
                    Sent::Acquire { id, asked } => format!("acquire {id}x{}", shown(*asked)),
                    Sent::Release { id, asked, .. } => {
                        format!("give-back {id}x{}", shown(*asked))
                    }
                    Sent::Renew { holds } => format!("renewal of {}", holds.len()),
                };
                let whose = if stray.given_up { ", given up" } else { "" };
                out += &format!(" [late {what}{whose}]");
            }
            let Some(flight) = &client.flight else {
                continue;
            };
            let what = match &flight.op {
                Op::Acquire { request: r, .. } => {
                    let waits = if r.waits { " waiting" } else { "" };
                    format!("acquire {}x{}{waits}", r.id, shown(r.asked))
                }
                Op::Waiting { request: r } => {
                    format!("waiter {}x{} between attempts", r.id, shown(r.asked))
                }
                Op::Release {
                    id, asked, leaving, ..
                } => {
                    let n = shown(*asked);
                    let verb = if *leaving { "leave" } else { "release" };
                    format!("{verb} {id}x{n}")
                }
                Op::Renew { items, .. } => format!("renew {} acquisitions", items.len()),
                Op::Extend { hold, .. } => format!("extend {hold}"),
            };
            let stage = match (&flight.op, &flight.ran, flight.sleeping) {
                (Op::Waiting { .. }, _, _) => String::new(),
                (_, _, true) => " sleeping".into(),
                (_, None, _) => " sent".into(),
                (_, Some(reply), _) => format!(" ran -> {reply:?}"),
            };
            out += &format!(" [{what}{stage}]");
        }
        out
    }
}

/// The semaphore's model, for the one checker (`tests/protocol/checker.rs`).
pub struct Sem;

impl Model for Sem {
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
        let effects = state.apply(step, world, config);
        Stepped {
            milestones: effects.milestones,
            violations: effects.violation.into_iter().collect(),
        }
    }
    fn describe(state: &State) -> String {
        state.describe()
    }
    fn extra_depth(config: &Config) -> usize {
        config.extra_depth
    }
}

/// The default configurations.
pub fn configs() -> Vec<Config> {
    let restarts_or_busy = || {
        let mut out = RESTART_MILESTONES.to_vec();
        out.push("a BUSY reply was re-sent and ran");
        out
    };
    let without_restarts_or_busy = || [restarts_or_busy(), STRAY_MILESTONES.to_vec()].concat();
    let force = || FORCE_MILESTONES.to_vec();
    // The steps the configurations before the last ones do not take.
    let later = || {
        let (drain, add) = (DRAIN_MILESTONES.to_vec(), ADD_MILESTONES.to_vec());
        [drain, add, EXTEND_MILESTONES.to_vec()].concat()
    };
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
            busy: 0,
            restarts: 0,
            force_releases: 0,
            timeouts: 0,
            drops: 0,
            adds: 0,
            extends: 0,
            attempt_give_up: GIVE_UP_AFTER,
            out_of_reach: [without_restarts_or_busy(), force(), later()].concat(),
            extra_depth: 0,
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
            busy: 0,
            restarts: 0,
            force_releases: 0,
            timeouts: 0,
            drops: 0,
            adds: 0,
            extends: 0,
            attempt_give_up: GIVE_UP_AFTER,
            out_of_reach: [
                vec!["a grant of 2 permits"],
                without_restarts_or_busy(),
                force(),
                later(),
            ]
            .concat(),
            extra_depth: 0,
        },
        Config {
            name: "sem: size 1, restart with data loss, BUSY, lost replies, expiry and renewal",
            clients: 2,
            size: 1,
            requests: vec![(1, false), (1, true)],
            acquires: 3,
            advances: 2,
            faults: 1,
            renewals: 2,
            busy: 1,
            restarts: 1,
            force_releases: 0,
            timeouts: 0,
            drops: 0,
            adds: 0,
            extends: 0,
            attempt_give_up: GIVE_UP_AFTER,
            out_of_reach: [
                vec!["a grant of 2 permits"],
                STRAY_MILESTONES.to_vec(),
                force(),
                later(),
            ]
            .concat(),
            extra_depth: 0,
        },
        Config {
            name: "sem: size 2, 1 or 2 permits, restart with data loss, BUSY, a lost reply, expiry",
            clients: 2,
            size: 2,
            requests: vec![(1, false), (2, true)],
            acquires: 3,
            advances: 2,
            faults: 1,
            renewals: 2,
            busy: 1,
            restarts: 1,
            force_releases: 0,
            timeouts: 0,
            drops: 0,
            adds: 0,
            extends: 0,
            attempt_give_up: GIVE_UP_AFTER,
            out_of_reach: [STRAY_MILESTONES.to_vec(), force(), later()].concat(),
            extra_depth: 0,
        },
        Config {
            // An attempt gives up at its first timeout or lost reply (the library: after
            // three response timeouts; scaled down so that one fault ends it): a waiter
            // refused before rides it out, any other acquire gives back, after the stray
            // (a drain's give-back: every permit its copies took, n = -1).
            // No attempt re-sends here: a retried copy is the other configuration's.
            name: "sem: size 1, late requests: an attempt that gives up, a dropped acquire, renewal",
            clients: 2,
            size: 1,
            requests: vec![(1, false), (1, true), (0, false)],
            acquires: 3,
            advances: 2,
            faults: 1,
            renewals: 1,
            busy: 0,
            restarts: 0,
            force_releases: 0,
            timeouts: 1,
            drops: 1,
            adds: 0,
            extends: 0,
            attempt_give_up: 0,
            out_of_reach: [
                vec![
                    "a grant of 2 permits",
                    "a retried acquire found its permits",
                    "a stray acquire ran before its re-sent copy",
                ],
                restarts_or_busy(),
                force(),
                // A drain of 1 that gives up, and none re-sent.
                vec![
                    "a drain took 2 permits",
                    "a drain's reply was lost and its retry found its permits",
                    "a drain's permits were given back whole",
                    "a renewal kept a drain's 2 permits past their first lease",
                ],
                ADD_MILESTONES.to_vec(),
                EXTEND_MILESTONES.to_vec(),
            ]
            .concat(),
            extra_depth: 0,
        },
        Config {
            name: "sem: size 2, 1 or 2 permits, late requests: re-sent after a timeout, a dropped acquire",
            clients: 2,
            size: 2,
            requests: vec![(1, false), (2, true)],
            acquires: 3,
            advances: 2,
            faults: 1,
            renewals: 1,
            busy: 0,
            restarts: 0,
            force_releases: 0,
            timeouts: 1,
            drops: 1,
            adds: 0,
            extends: 0,
            attempt_give_up: GIVE_UP_AFTER,
            out_of_reach: [restarts_or_busy(), force(), later()].concat(),
            extra_depth: 0,
        },
        Config {
            // An operator's `Semaphore::force_release` (see the header): the holders it
            // takes permits from are excused until they are told, as after a restart.
            name: "sem: size 2, 1 or 2 permits, a force-release, a lost reply, renewals",
            clients: 2,
            size: 2,
            requests: vec![(1, false), (2, true)],
            acquires: 3,
            advances: 2,
            faults: 1,
            renewals: 2,
            busy: 0,
            restarts: 0,
            force_releases: 1,
            timeouts: 0,
            drops: 0,
            adds: 0,
            extends: 0,
            attempt_give_up: GIVE_UP_AFTER,
            out_of_reach: [without_restarts_or_busy(), later()].concat(),
            extra_depth: 0,
        },
        Config {
            // A drain (`Semaphore::drain_permits`, asked as 0 permits) races single
            // acquisitions, a waiter for 2 and their give-backs, with a lost reply (a
            // drain's retry counts its permits again); an operator adds a permit or takes
            // one away (`add_permits`); a guard is extended (`Guard::extend`).
            name: "sem: size 2, a drain, a waiter for 2, add_permits, extend, a lost reply",
            clients: 2,
            size: 2,
            requests: vec![(1, false), (2, true), (0, false)],
            acquires: 3,
            advances: 2,
            faults: 1,
            renewals: 1,
            busy: 0,
            restarts: 0,
            force_releases: 0,
            timeouts: 0,
            drops: 0,
            adds: 1,
            extends: 1,
            attempt_give_up: GIVE_UP_AFTER,
            out_of_reach: [
                vec!["an abandoned drain gave back what its lost copy took"],
                without_restarts_or_busy(),
                force(),
            ]
            .concat(),
            extra_depth: 0,
        },
    ]
}

/// Configurations the default run explores 2 steps deeper than the others
/// (`CHECK_PROBES=1` explores only them, and `CHECK_REPLAY` finds them by name). This one
/// found a real defect: a waiter's next attempt credited a grant taken by an earlier
/// attempt's lost copy from its own, later, send (fixed: the core's `SendHistory`).
pub fn probes() -> Vec<Config> {
    vec![Config {
        // An attempt re-sends for 50 ms (the library: three response timeouts, 9 s by
        // default, against a 302 ms drift margin on a 30 s lease): a waiter's attempt
        // that was granted and lost every reply gives up, the waiter rides the error
        // out, and its next attempt finds the permits (credited, since the fix, from the
        // earlier attempt's first send).
        name: "sem: size 1, a waiter's attempt gives up after a grant",
        clients: 2,
        size: 1,
        requests: vec![(1, false), (1, true)],
        acquires: 4,
        advances: 3,
        faults: 1,
        renewals: 0,
        busy: 1,
        restarts: 0,
        force_releases: 0,
        timeouts: 0,
        drops: 0,
        adds: 0,
        extends: 0,
        attempt_give_up: 50,
        out_of_reach: MILESTONES.to_vec(),
        extra_depth: 2,
    }]
}

/// The milestones configuration `name` (a default one or a probe) must reach: all but
/// those out of its reach.
pub fn must_reach(name: &str) -> Vec<&'static str> {
    let mut all = configs().into_iter().chain(probes());
    let Some(config) = all.find(|c| c.name == name) else {
        return Vec::new();
    };
    let required = (0..MILESTONES.len()).filter(|&index| config.requires(index));
    required.map(|index| MILESTONES[index]).collect()
}
