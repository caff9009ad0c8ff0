//! The read-write lock's protocol model: clients that take read and write holds with single
//! attempts, re-enter through their guards, give holds back, renew them
//! (`lua/sem_renew.lua`, as the watchdog does), lose replies and retry with the same hold
//! id, while the clock moves past leases, Redis answers `BUSY`/`LOADING`, restarts losing
//! all data, and an operator force-unlocks the lock (`RwLock::force_unlock`: the real
//! `lua/force_delete.lua`, which deletes the write and read sets, keeps the writer-waiting
//! reservation and the fencing counter, and wakes readers and writers). Every call is
//! built and every reply read by the library's own `redis_locks_protocol::rwlock`
//! (`RwAcquire::call`/`decode`, `release_call`), `resend::Resend` / `given_back`,
//! `release::told`, `semaphore::renew_call`, `renew::decode_renew`, `hold::HoldState` and
//! `force::rwlock_call`/`decode`; every call runs the real `lua/rw_*.lua` /
//! `lua/sem_renew.lua` / `lua/force_delete.lua` in the embedded Lua
//! against the keyspace model; a guard's `extend` is the core's `extend::extension_call`,
//! read as `HoldEntry::on_extension_reply` reads it. A small breadth-first explorer checks
//! the properties in every state.
//!
//! Modelled since the first version (each in configurations of its own, see `configs`):
//! * fenced handles (`RwLock::with_fencing`): a write asks for a token; "tokens only go
//!   up" (see `PROPERTIES`) is checked on every grant, with the counter kept by Redis;
//! * explicit owners (`RwLock::with_owner`, flag `o`): two clients sharing one owner id,
//!   whose holds count as the owner's own (a read of one lets the other's write be an
//!   upgrade, a write of one lets the other read and write); "never a writer with a
//!   holder of another owner" and "a release removes only its own hold" still hold;
//! * re-entry through a guard (`RwGuard::reenter/read/write`, `Step::Reenter`): the
//!   attempt the library makes (the guard's owner named, `joins: Some(hold)` through a
//!   read, no wait), for a live-believed guard: a read through a read, a read through a
//!   write (downgrade), a write through a write (which must keep that write's token);
//! * the refused upgrade: a write asked by an owner that holds reads (through an explicit
//!   owner, or a re-entry whose write is gone) must be answered `{3}` and read by the
//!   library as `RwAcquired::Upgrade` (its `Error::WouldDeadlock`);
//! * a watchdog tick racing its owner's own call (`racing_renewals`): two calls in flight
//!   per client, the user's (attempt, re-entry or release) and the watchdog's renewal, in
//!   any order (one small configuration: it multiplies the interleavings);
//! * a guard's `extend` (`Guard::extend`, `Step::Extend`, in the fenced re-entry
//!   configuration and in the late-request one with a force-unlock): for a guard that
//!   believes in its hold (a read, a write, or one taken through a guard), as the guard
//!   checks first, one call in the user's slot to [`EXTEND_LEASE`] (twice the watchdog's
//!   lease), not re-sent (a failure is the caller's error). The call is the core's
//!   `extend::extension_call` with `HoldShape::SetMembers(1)` for the hold in the set of its
//!   kind (what `HoldEntry::extension` sends: `lua/sem_renew.lua`); its reply is read as
//!   `HoldEntry::on_extension_reply` reads it: `decode_renew`, then gone:
//!   `HoldState::on_gone` (the holder is told), current: `HoldState::on_extended`. It runs
//!   and is checked as a renewal of one hold (its reply must tell the truth, and a later
//!   watchdog tick must not shorten it), is lost with a lost reply or a restart, refused by
//!   `BUSY`, and a timed-out one is a stray that may run late (a stray renewal).
//!
//! Assumptions (as the reentrant lock's checker): one lock, one Redis; the clock only
//! moves when no call is waiting to execute (a request executes at its send time), except
//! for a restart and a late request (below); a request whose reply was lost is re-sent as
//! it was (same hold id, same send time for the lease estimate, as `held::acquire_until`
//! keeps `sent_at`), and the copy given up on never runs after the retry (but for late
//! requests: a copy given up on before it ran may run late). A `BUSY`/`LOADING` reply (one step makes
//! Redis refuse the next call that reaches it, whoever sends it) means the call did not
//! run: the library's `Resend` sleeps and sends it again (as for `Failure::Transient`), a
//! renewal waits for the next tick. A restart takes at least 1 ms, loses every key and
//! every call on its way, run or not (one not yet run is the same as one that ran just
//! before the restart and lost its reply: the keyspace ends empty either way), each as
//! `Failure::Lost`; re-sent copies then run against the empty keyspace. A force-unlock
//! runs at once, between two calls; replies on their way still arrive. It must take every
//! hold out, report their number and, when it took a live one, publish on the read and
//! write channels (checked as "release is true"). Fenced holds only
//! where nothing loses the fencing counter: the configurations with restarts and
//! force-unlocks are unfenced, so that tokens only go up across the counter's loss (which
//! rests on Redis's clock in µs passing the last token, a clock the model moves in whole
//! ms and not at all for a force-unlock) is not checked. Wake-ups are not followed, nobody
//! listens (only the force-unlock's are checked, as published).
//!
//! Late requests (configurations with `timeouts` or `drops`, as the fair lock's and the
//! semaphore's models): a call sent and not yet run may get no reply within the response
//! timeout (`TimeOut`: `Failure::TimedOut`), and a caller may drop an acquire (or a
//! re-entry) whose attempt is in flight (`Drop`: the runtime's `Acquiring::drop`). Either
//! way the copy on the wire is late (a *stray*): it may still run (`ExecuteStray`),
//! possibly after the clock moved, or never (`DropStray`: its connection went away before
//! Redis read it). Every read-write call (attempts, give-backs, renewals) goes on the
//! client's one multiplexed command connection, which a timeout does not drop, and so does
//! every re-sent copy: a stray runs, if at all, before anything its client sends after it
//! (TCP keeps a connection's requests in order). A call sent behind strays waits for them
//! (it runs once they ran or were lost, the clock still), and a client's strays run in the
//! order they were sent. What the client then does is its core's decision: a timed-out
//! attempt or give-back goes on as its `Resend` decides (re-sent after a pause; in one
//! configuration, `attempt_give_up: 0`, an attempt gives up at its first failure, and its
//! waiting loop, `Wait::attempted` with the failure `held` reports, after
//! `Failure::after_earlier_loss`, ends the acquire and says whether to give back); a
//! timed-out renewal is not re-sent (the next tick renews); a dropped acquire gives back
//! (`held::give_back(hold_too = true, leaving = true)`, on the same connection, so after
//! its stray) exactly when `Wait::give_back_if_dropped` says so (for the read-write lock
//! always, since an attempt is in flight). A stray runs with every check a run on time
//! gets (a stray renewal's reply, which nobody reads, must still be true; a stray copy of
//! a release counts in what its give-back reports); it is not "in flight": a hold it
//! leaves must be given back by what its client does next (the re-sent copy's grant
//! becomes a guard, the give-back of a dropped or failed acquire takes it out), or it is
//! an orphan. What Redis runs is mostly what a lost reply's copy could have run, but
//! later; new are the client's decisions (give back or not, which send a grant is
//! confirmed from, what a give-back reports) while a copy it gave up on has not run yet.
//! Late requests meet the other faults in configurations of their own: a restart drops
//! every stray with its connection; a `BUSY` refuses a copy whose re-sent copy may then
//! time out and run late (a stray that reaches Redis while it refuses is one that never
//! runs: `DropStray`); a force-unlock leaves the strays on their connections, so one sent
//! before it may run after it. They are not combined with racing renewals (a client's
//! strays precede whatever it has in flight).
//!
//! What a restart or a force-unlock excludes, and why (as for the fair lock): a hold taken
//! out of Redis behind its holders' backs (it was live when the keys went) is *doomed*.
//! Nothing the library does can keep a belief in it true, so until its holder is told,
//! another owner may take the lock and both believe they hold: such a belief is left out
//! of "never a writer with another holder" and "belief is true", and held instead to
//! "losses are told" (a renewal that ran after the wipe reports it gone, its release is
//! not told "released" by `release::told`, and it is dropped at its deadline anyway).
//! Every other belief is held to both as before, and a re-sent attempt that runs after the
//! wipe and is granted afresh under the same id is a valid belief again (confirmed from
//! its first copy's send time, before the wipe, which only shortens it).
//!
//! Not modelled: more than one Redis (replicas, failover, cluster moves), tokens across the
//! counter's loss (above), a write asked through a read guard (`RwGuard::write` refuses it
//! without a call), the give-back of a refused attempt's leftovers (an `{3}` writes
//! nothing), waiting readers and wake-ups, a writer that waits for its reservation across
//! asks (a waiting writer reserves once and leaves), an acquire attempted again after an
//! attempt that gave up (the model's acquire ends at its first attempt's failure, as the
//! waiting loop ends a first attempt on any failure but a transient one: no configuration
//! whose attempts give up has `BUSY`), fixed leases, and clock drift between client and
//! Redis. A client's
//! owner is fixed (the library gives a handle without an explicit owner a fresh owner per
//! acquisition: the model's repeated acquires by one client stand for re-entries by one
//! owner), and outside `racing_renewals` a client has one call in flight at a time (its
//! strays are not in flight).
#![allow(dead_code)]

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use redis_locks::LostReason;
use redis_locks_protocol::extend::{HoldShape, extension_call};
use redis_locks_protocol::force::{self, ForceDeleted};
use redis_locks_protocol::hold::HoldState;
use redis_locks_protocol::release::{Found as Reading, Told, told};
use redis_locks_protocol::renew::{RenewItem, Renewed, decode_renew};
use redis_locks_protocol::resend::{GaveUp, GivenBack, Resend, given_back};
use redis_locks_protocol::rwlock::{RwAcquire, RwAcquired, RwKeys, RwKind, hold_id, release_call};
use redis_locks_protocol::semaphore::renew_call;
use redis_locks_protocol::wait::{Tried, Wait, WaitEnd, WaitPolicy, WaitStep, WaitTiming};
use redis_locks_protocol::{Call, Env, Failure, Machine, Millis, Next, Reply, RequestIds};

use crate::checker::{Model, Stepped};
use crate::keyspace::Keyspace;
use crate::lua::ScriptRunner;

/// The lease of every hold (the watchdog's), in ms.
pub const LEASE: Millis = 100;
/// The lease of a guard's `extend` (`Guard::extend`): longer than the watchdog's, so that
/// a watchdog renewal after it must not shorten it.
pub const EXTEND_LEASE: Millis = 2 * LEASE;
/// How far the clock moves in one step: one step leaves a hold 40 ms, two expire it.
pub const ADVANCE: Millis = 60;
/// How long a waiting writer's reservation lasts.
pub const RESERVATION: Millis = 150;
/// The model's clock at the start (Redis's TIME answers from it).
const START: Millis = 1_000_000;

/// The properties, checked in every state. "Losses are told": a renewal tells the truth
/// about each hold (a late one too, whose reply nobody reads), and a guard's release is told "released" (`release::told`) only if
/// some copy of it took the hold out; "release is true" holds an operator's force-unlock
/// too (every hold out, their number reported, both channels woken when it took a live
/// one). The first two leave out the beliefs in holds a
/// restart or a force-unlock took out of Redis (see the header).
///
/// The last three are the fenced, explicit-owner and re-entry steps' own. "Tokens only go
/// up": a fresh fenced write's token (read by the library's decoder) is strictly greater
/// than every earlier fenced write's of the lock; a write granted while the owner already
/// holds the write (a re-entry, or a retried copy finding its own hold) carries the token
/// of the write the owner holds, the one the counter says; a re-entry through a write
/// guard carries that guard's token; a read, or an unfenced write, carries none (the
/// script answers 0 and the library reads `None`). "An upgrade is refused": a write asked
/// by an owner that holds no live write but holds a live read the script can see as its
/// own (any of the owner's reads with an explicit owner, the joined read with `joins`) is
/// answered `{3}`, which the library reads as `RwAcquired::Upgrade` (its
/// `Error::WouldDeadlock`); it is never granted and never waits, and no other attempt is
/// answered so. "A re-entry is granted while its hold lives": an attempt through a guard
/// whose hold is live when it runs is granted (the library tells a re-entry that waits
/// that its hold is lost, so a wait would be a false loss).
pub const PROPERTIES: [&str; 10] = [
    "never a writer with another holder",
    "belief is true",
    "one hold per acquisition",
    "a release removes only its own hold",
    "release is true",
    "losses are told",
    "no orphans, no garbage",
    "tokens only go up",
    "an upgrade is refused, never granted and never waits",
    "a re-entry is granted while its hold lives",
];

/// What runs reach (each configuration names those it must reach, else it is vacuous):
/// the first six need neither restarts, force-unlocks nor `BUSY`; the next five do; the
/// next seven belong to the fenced, explicit-owner, re-entry and racing-renewal
/// configurations; the next twelve to late requests: [`STRAY_MILESTONES`], then four with
/// a restart, `BUSY` or a force-unlock, and an attempt that gives up; the last five to a
/// guard's `extend` ([`EXTEND_MILESTONES`]).
pub const MILESTONES: [&str; 35] = [
    "a write granted",
    "two owners reading at once",
    "a retried acquire found its hold",
    "a retried release",
    "a renewal kept a hold past its first lease",
    "a renewal told a loss",
    "a restart emptied the keyspace while a write was believed",
    "a force-unlock while a reader held",
    "a call refused as BUSY ran when re-sent",
    "a holder was told its wiped hold is lost",
    "a wiped holder and a new one both believed",
    "a fenced write got a higher token",
    "a re-entered write kept its token",
    "a read re-entered through its guard",
    "a read taken through a write guard (downgrade)",
    "an upgrade was refused",
    "two handles of one owner held together",
    "a renewal ran while the owner's attempt was in flight",
    "a stray acquire ran after its client gave up",
    "a stray acquire took the lock after its client gave up",
    "a stray acquire ran before its re-sent copy",
    "a dropped acquire's hold was given back",
    "a stray release copy ran",
    "a stray renewal ran",
    "a stray renewal named a gone hold",
    "a restart dropped a stray",
    "a stray ran after a restart",
    "a stray copy of a call refused as BUSY ran",
    "a stray sent before a force-unlock ran after it",
    "an attempt that gave up gave back",
    "an extend lengthened a hold",
    "an extend found its hold gone",
    "a stray extend ran",
    "an extend's reply was lost",
    "an extend lengthened a re-entered hold",
];

/// The milestones of a guard's `extend` (out of reach without one; the second needs a
/// wipe, the third late requests, the fourth lost replies, the last re-entries).
pub const EXTEND_MILESTONES: [&str; 5] = [
    MILESTONES[30],
    MILESTONES[31],
    MILESTONES[32],
    MILESTONES[33],
    MILESTONES[34],
];

/// The milestones of late requests (out of reach without `timeouts` and `drops`): the
/// first seven need neither restarts, `BUSY` nor force-unlocks, the last four do.
pub const STRAY_MILESTONES: [&str; 7] = [
    MILESTONES[18],
    MILESTONES[19],
    MILESTONES[20],
    MILESTONES[21],
    MILESTONES[22],
    MILESTONES[23],
    MILESTONES[24],
];

pub use crate::lua::Scripts;

/// The parties and bounds of one exploration.
#[derive(Clone, Debug)]
pub struct Config {
    pub name: &'static str,
    /// One owner per client (a name given twice: two clients, or handles, with one
    /// explicit owner when `explicit`).
    pub owners: Vec<&'static str>,
    /// Attempts name their owner explicitly (`RwLock::with_owner`: flag `o`).
    pub explicit: bool,
    /// Handles are fenced (`RwLock::with_fencing`: a write asks for a token).
    pub fenced: bool,
    /// Re-entries through a guard (`RwGuard::reenter/read/write`) in all.
    pub reentries: u8,
    /// A guard's `extend` calls (`Guard::extend`, to [`EXTEND_LEASE`]) in all.
    pub extends: u8,
    /// A client's watchdog tick may race its own call in flight (two calls in flight per
    /// client: the user's and the watchdog's); otherwise a client has one call at a time.
    pub racing_renewals: bool,
    /// Acquire attempts in all.
    pub acquires: u8,
    /// Clock advances in all.
    pub advances: u8,
    /// Lost replies in all.
    pub faults: u8,
    /// Renewal calls in all.
    pub renewals: u8,
    /// Writers wait (`q`: a writer that finds readers reserves the lock, then leaves).
    pub waiting_writers: bool,
    /// Restarts that lose all data, force-unlocks (an operator's `force_delete.lua`)
    /// and `BUSY`/`LOADING` replies, in all.
    pub restarts: u8,
    pub force_unlocks: u8,
    pub busy: u8,
    /// Late requests (see the header): calls sent that get no reply within the response
    /// timeout before they ran, and acquires their callers drop while an attempt is in
    /// flight, in all.
    pub timeouts: u8,
    pub drops: u8,
    /// How long an attempt re-sends its call before it gives up (the library: three
    /// response timeouts, `resend::attempt_give_up_at`); [`GIVE_UP_AFTER`] is beyond every
    /// configuration's clock, 0 gives up at the first failure.
    pub attempt_give_up: Millis,
}

pub fn keys() -> RwKeys {
    RwKeys::new("p", 0, false, "n")
}

/// One hold a client believes in (a guard).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Guard {
    pub kind: RwKind,
    pub state: HoldState,
    /// The fencing token the library read from the grant.
    pub token: Option<u64>,
    /// Taken through another guard (`RwGuard::reenter/read/write`), for a milestone.
    pub reentered: bool,
}

/// How long an attempt or a give-back keeps re-sending (the model's faults run out long
/// before).
pub const GIVE_UP_AFTER: Millis = 10 * LEASE;
/// The waiting loop's timing (only its give-back decision for a dropped acquire is asked).
const TIMING: WaitTiming = WaitTiming {
    tolerance: GIVE_UP_AFTER,
    response: LEASE,
};

/// The library's waiting loop of an acquire (`RwLock::acquire_until` through
/// `held::acquire_until`, `WaitPolicy::read_write`) with `request`'s attempt in flight:
/// started and attempting (every kind attempts first; a waiter subscribes after its
/// first refusal). The model asks it what an acquire dropped now gives back, and
/// how an attempt that gave up ends (the model's acquires are in their first attempt: a
/// waiting writer leaves after its first refusal).
fn waiting_loop(request: &RwAcquire, now: Millis) -> Wait {
    let policy = WaitPolicy::read_write(request.kind == RwKind::Read, TIMING);
    let limit = if request.waits { None } else { Some(0) };
    let mut wait = Wait::new(policy, now, limit);
    let step = wait.start(now);
    assert_eq!(step, WaitStep::Attempt, "the waiting loop attempts");
    wait
}

/// The give-back of an acquire that ends without a grant, `held::give_back(hold_too =
/// true, leaving = true)`: its hold, if a copy of its attempt took one, and its
/// reservation, re-sent by the library's own [`Resend`].
fn leave(request: &RwAcquire, now: Millis, keys: &RwKeys) -> InFlight {
    let mut resend = Resend::new(
        release_call(keys, &request.hold, Some(request.kind), true),
        now + GIVE_UP_AFTER,
    );
    let call = start_resend(&mut resend, now);
    let op = Op::Release {
        hold: request.hold.clone(),
        kind: request.kind,
        leaving: true,
        resend,
        noticed: None,
    };
    InFlight::new(op, call)
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

/// A call in flight.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// An attempt, re-sent as it was by the library's own [`Resend`] (the same machine
    /// `held::acquire_until` drives).
    Acquire {
        request: RwAcquire,
        resend: Resend,
        /// A re-entry through a guard (`RwGuard::join`): the guard's hold and kind.
        through: Option<(Arc<str>, RwKind)>,
    },
    /// A release (`leaving`: a waiting writer that gives up, with its reservation),
    /// re-sent by the library's own [`Resend`] and read by its `given_back`.
    Release {
        hold: Arc<str>,
        kind: RwKind,
        leaving: bool,
        resend: Resend,
        /// A guard's release (`Held::release`): the loss its client had noticed when it
        /// started, to read what its caller is told (`None` for a leaving writer).
        noticed: Option<Option<LostReason>>,
    },
    Renew {
        items: Vec<RenewItem>,
        order: Vec<usize>,
        sent_at: Millis,
    },
    /// A guard's `extend` of hold `hold` (of `kind`) to [`EXTEND_LEASE`]: one call, not
    /// re-sent (a failure is the caller's error), run and checked as a renewal of one hold.
    Extend {
        hold: Arc<str>,
        kind: RwKind,
        sent_at: Millis,
    },
}

/// What the run of a call found, for the checks at delivery.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Found {
    /// A grant found the hold already there (an earlier copy took it); a re-entry's
    /// guard's hold was live when it ran.
    Acquire { existed: bool, through_live: bool },
    /// Whether this run took the member out.
    Release { removed: bool },
    /// For each item, whether its member was live when the renewal (or extension) ran.
    Renew { live: Vec<bool> },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InFlight {
    pub op: Op,
    /// The call to run (what the machine asked to send).
    pub call: Option<Call>,
    /// The reply and what the run found, once Redis ran it.
    pub ran: Option<(Reply, Found)>,
    pub retried: bool,
    /// The machine sleeps before re-sending (the clock may move meanwhile).
    pub sleeping: bool,
    /// Some copy of this release took the hold out.
    pub removed: bool,
    /// A copy was refused with `BUSY`/`LOADING` (it did not run) and re-sent since.
    pub busied: bool,
}

impl InFlight {
    fn new(op: Op, call: Option<Call>) -> Self {
        InFlight {
            op,
            call,
            ran: None,
            retried: false,
            sleeping: false,
            removed: false,
            busied: false,
        }
    }
}

/// A late request (see the header): a copy its client heard nothing of within the response
/// timeout, or the copy of an attempt whose caller dropped the acquire, still on the
/// client's one connection. It runs, if at all, before anything the client sent after it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Stray {
    pub call: Call,
    /// What the copy's operation was when it was sent (for the checks of its run).
    pub op: Op,
    /// Its acquire ended without it (the caller dropped it): nothing of the client waits
    /// for it any more.
    pub given_up: bool,
    /// A force-unlock ran while it waited on the connection (for its milestone).
    pub forced: bool,
}

/// A renewal's reply against what Redis had when it ran (`live`, by item): "current" of a
/// gone hold leaves a loss untold, "gone" of a live one is a false report ("losses are
/// told": a renewal tells the truth about each hold). The statuses in `order`, as
/// `decode_renew` reads them.
fn check_renewal(
    items: &[RenewItem],
    order: &[usize],
    reply: &Reply,
    live: &[bool],
    fx: &mut Effects,
) -> Option<Vec<Renewed>> {
    let status = match decode_renew(reply, items.len()) {
        Ok(status) => status,
        Err(err) => {
            fx.fail("losses are told", err);
            return None;
        }
    };
    for (status, &i) in status.iter().zip(order) {
        if (*status == Renewed::Gone) == live[i] {
            fx.fail(
                "losses are told",
                format!(
                    "renewal said {status:?} of {} that was {}",
                    show(items[i].hold.as_bytes()),
                    if live[i] { "live" } else { "gone" }
                ),
            );
        }
    }
    Some(status)
}

/// The one item an extension of `hold` (of `kind`) renews, as a renewal's item (for the
/// truth check of its reply).
fn extension_item(hold: &Arc<str>, kind: RwKind) -> RenewItem {
    RenewItem {
        key: keys().set_of(kind).clone(),
        hold: hold.clone(),
        renew: true,
        hash_form: false,
    }
}

/// Starts a re-sent call at `now`: the call the machine asks for.
fn start_resend(resend: &mut Resend, now: Millis) -> Option<Call> {
    match resend.start(&mut ModelEnv(now), &mut ()) {
        Next::Send(call) => Some(call),
        _ => None,
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    pub owner: Arc<str>,
    pub ids: RequestIds,
    pub guards: Vec<Guard>,
    /// The user's call in flight (an attempt or a release).
    pub flight: Option<InFlight>,
    /// The watchdog's renewal in flight.
    pub tick: Option<InFlight>,
    /// Late requests on the client's connection, oldest first: each runs, if at all,
    /// before anything the client sends after it (a call sent behind them waits).
    pub strays: Vec<Stray>,
}

impl Client {
    fn slot(&mut self, s: usize) -> &mut Option<InFlight> {
        if s == USER {
            &mut self.flight
        } else {
            &mut self.tick
        }
    }

    fn slot_ref(&self, s: usize) -> &Option<InFlight> {
        if s == USER { &self.flight } else { &self.tick }
    }

    fn idle(&self) -> bool {
        self.flight.is_none() && self.tick.is_none()
    }

    /// The library's machine on a `failure` of the call in slot `s` (a lost reply, a
    /// restart, a response timeout): a `Resend` re-sends after a pause, or gives up (an
    /// attempt: see [`Client::attempt_gave_up`]); the watchdog does not re-send a renewal
    /// (the next tick renews). `Ok(true)`: an attempt gave up and gave back; `Err`: a
    /// re-send gave up where the model does not follow it.
    fn failed(
        &mut self,
        s: usize,
        now: Millis,
        failure: Failure,
        keys: &RwKeys,
    ) -> Result<bool, String> {
        let slot = self.slot(s);
        let flight = slot.as_mut().expect("a call in flight");
        let next = match &mut flight.op {
            // Nor an extension: its failure is its caller's error, the hold stays as it was.
            Op::Renew { .. } | Op::Extend { .. } => {
                *slot = None;
                return Ok(false);
            }
            Op::Acquire { resend, .. } | Op::Release { resend, .. } => {
                resend.on_failure(&mut ModelEnv(now), &mut (), failure)
            }
        };
        match (next, &flight.op) {
            (Next::SleepUntil(_), _) => {
                flight.ran = None;
                flight.retried = true;
                flight.sleeping = true;
                Ok(false)
            }
            (Next::Done(Err(gave_up)), Op::Acquire { request, .. }) => {
                let request = request.clone();
                *slot = None;
                self.attempt_gave_up(&request, gave_up, now, keys)
            }
            (other, _) => Err(format!(
                "the re-send gave up within the model's bound: {other:?}"
            )),
        }
    }

    /// An attempt whose re-send gave up (`held` reports the failure, `after_loss` as the
    /// core's `Failure::after_earlier_loss` counts it): its waiting loop decides
    /// (`Wait::attempted`), and the acquire ends, giving back what its copies may have taken
    /// when the loop says so. Its copies still on the connection are given up on.
    fn attempt_gave_up(
        &mut self,
        request: &RwAcquire,
        gave_up: GaveUp,
        now: Millis,
        keys: &RwKeys,
    ) -> Result<bool, String> {
        for stray in &mut self.strays {
            if let Op::Acquire { request: r, .. } = &stray.op
                && r.hold == request.hold
            {
                stray.given_up = true;
            }
        }
        let failure = gave_up.failure.after_earlier_loss(gave_up.after_loss);
        let mut wait = waiting_loop(request, now);
        match wait.attempted(now, Tried::Failed(failure), false, 0) {
            WaitStep::Done(
                WaitEnd::Failed { give_back, .. } | WaitEnd::TimedOut { give_back, .. },
            ) => {
                if give_back {
                    self.flight = Some(leave(request, now, keys));
                }
                Ok(give_back)
            }
            other => Err(format!(
                "the waiting loop goes on after a failed attempt (not modelled): {other:?}"
            )),
        }
    }
}

/// A client's two call slots: the user's and the watchdog's.
pub const USER: usize = 0;
pub const TICK: usize = 1;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub ks: Keyspace,
    pub now: Millis,
    pub clients: Vec<Client>,
    pub acquires: u8,
    pub advances: u8,
    pub faults: u8,
    pub renewals: u8,
    /// Writers wait (see `Config`).
    pub waiting_writers: bool,
    pub restarts: u8,
    pub force_unlocks: u8,
    pub busy: u8,
    /// Redis answers the next call that reaches it with `BUSY`/`LOADING` (it does not run).
    pub busy_next: bool,
    pub reentries: u8,
    pub extends: u8,
    pub explicit: bool,
    pub fenced: bool,
    pub racing_renewals: bool,
    pub timeouts: u8,
    pub drops: u8,
    pub attempt_give_up: Millis,
    /// The highest fencing token a fresh write got (what Redis's counter says).
    pub last_token: u64,
    /// Hold ids taken out of Redis behind their holders' backs (a restart or a
    /// force-unlock while they were live), for as long as a guard or a call still names
    /// them. A belief in one of them is excluded from "never a writer with another holder"
    /// and "belief is true" (nothing can keep it true) and held to "losses are told"; a
    /// fresh grant under the same id (a re-sent attempt that ran after the wipe) takes it
    /// out.
    pub doomed: BTreeSet<Arc<str>>,
}

/// One step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Acquire(usize, RwKind),
    /// Client, guard, kind: an attempt through the guard (`RwGuard::reenter/read/write`:
    /// its owner named, `joins` its hold when it is a read, no wait). A write through a
    /// read guard is refused by the library without a call, so it is not a step.
    Reenter(usize, usize, RwKind),
    Release(usize, usize),
    Renew(usize),
    /// Client, guard: the guard's `extend` (`Guard::extend`) to [`EXTEND_LEASE`], for a
    /// guard that believes in its hold (it checks first that its hold is not lost).
    Extend(usize, usize),
    /// Client and slot (`USER`, `TICK`).
    Run(usize, usize),
    Deliver(usize, usize),
    LoseReply(usize, usize),
    /// A re-sending machine's pause is over.
    Resume(usize),
    Advance,
    /// Redis answers the next call that reaches it, whoever sends it, with
    /// `BUSY`/`LOADING`: it does not run it (a slow script, or a restart still loading).
    Busy,
    /// Redis restarts without persistence: every key is lost, every call on its way is
    /// lost with the connections, and at least 1 ms passes.
    Restart,
    /// An operator force-unlocks the lock (`RwLock::force_unlock`: `force_delete.lua`
    /// deletes the write and read sets and wakes readers and writers; the writer-waiting
    /// reservation and the fencing counter stay).
    ForceUnlock,
    /// Client and slot: the call sent and not yet run gets no reply within the response
    /// timeout (`Failure::TimedOut`): the copy stays on the connection, a stray, and the
    /// library's machine decides what next (a `Resend` re-sends; a renewal is not re-sent).
    TimeOut(usize, usize),
    /// The caller drops an acquire whose attempt is in flight (`Acquiring::drop`): a copy
    /// not yet run stays on the connection, a stray, and the give-back follows it when the
    /// core's `Wait::give_back_if_dropped` says so.
    Drop(usize),
    /// A client's oldest stray runs (late, but before anything it sent after).
    ExecuteStray(usize),
    /// A client's oldest stray never runs (its connection went away before Redis read it).
    DropStray(usize),
}

/// A step's outcome: milestones reached and the first violation.
#[derive(Default)]
pub struct Effects {
    pub milestones: Vec<usize>,
    pub violation: Option<(&'static str, String)>,
}

impl Effects {
    fn fail(&mut self, property: &'static str, message: String) {
        debug_assert!(PROPERTIES.contains(&property));
        if self.violation.is_none() {
            self.violation = Some((property, message));
        }
    }

    fn reach(&mut self, milestone: &str) {
        let index = MILESTONES.iter().position(|m| *m == milestone).unwrap();
        self.milestones.push(index);
    }
}

/// The script runner, the scripts and the keys.
pub struct World {
    runner: ScriptRunner,
    scripts: Scripts,
    keys: RwKeys,
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
        self.run_published(call, ks, now).0
    }

    /// Runs `call`: its reply and the channels it published on (nobody listens in the
    /// model: the log is cleared, so that it does not split equal states).
    fn run_published(&self, call: &Call, ks: &mut Keyspace, now: Millis) -> (Reply, Vec<Vec<u8>>) {
        let keys: Vec<Vec<u8>> = call.keys.iter().map(|k| k.as_bytes().to_vec()).collect();
        let args: Vec<Vec<u8>> = call.args.iter().map(|a| a.as_bytes().to_vec()).collect();
        let reply = self
            .runner
            .eval(self.scripts.source(call.script), &keys, &args, ks, now);
        let published = ks.published.drain(..).map(|(channel, _)| channel).collect();
        (reply, published)
    }
}

/// The live holds in Redis: (member, kind, score) with score > now.
fn live_members(ks: &Keyspace, keys: &RwKeys, now: Millis) -> Vec<(Vec<u8>, RwKind, f64)> {
    let mut out = Vec::new();
    for kind in [RwKind::Read, RwKind::Write] {
        if let Some(zset) = ks.zset(keys.set_of(kind).as_bytes(), now) {
            for (member, score) in zset {
                if score.0 > now as f64 {
                    out.push((member.clone(), kind, score.0));
                }
            }
        }
    }
    out
}

fn member_of(hold: &str) -> Vec<u8> {
    format!("{hold}:1").into_bytes()
}

fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).replace('\u{1}', "/")
}

impl State {
    pub fn initial(config: &Config) -> Self {
        State {
            ks: Keyspace::default(),
            now: START,
            clients: config
                .owners
                .iter()
                .enumerate()
                .map(|(i, owner)| Client {
                    owner: (*owner).into(),
                    ids: RequestIds::new(format!("c{i}")),
                    guards: Vec::new(),
                    flight: None,
                    tick: None,
                    strays: Vec::new(),
                })
                .collect(),
            acquires: config.acquires,
            advances: config.advances,
            faults: config.faults,
            renewals: config.renewals,
            waiting_writers: config.waiting_writers,
            restarts: config.restarts,
            force_unlocks: config.force_unlocks,
            busy: config.busy,
            busy_next: false,
            reentries: config.reentries,
            extends: config.extends,
            explicit: config.explicit,
            fenced: config.fenced,
            racing_renewals: config.racing_renewals,
            timeouts: config.timeouts,
            drops: config.drops,
            attempt_give_up: config.attempt_give_up,
            last_token: 0,
            doomed: BTreeSet::new(),
        }
    }

    pub fn steps(&self) -> Vec<Step> {
        let mut steps = Vec::new();
        let mut waiting_to_run = false;
        for (c, client) in self.clients.iter().enumerate() {
            // One call at a time per client, unless its watchdog's tick may race the
            // user's call.
            let user_free = client.flight.is_none() && (self.racing_renewals || client.idle());
            let tick_free = client.tick.is_none() && (self.racing_renewals || client.idle());
            if user_free {
                if self.acquires > 0 {
                    steps.push(Step::Acquire(c, RwKind::Read));
                    steps.push(Step::Acquire(c, RwKind::Write));
                }
                if self.reentries > 0 {
                    for (g, guard) in client.guards.iter().enumerate() {
                        // `ensure_not_lost`: a guard that knows its hold lost refuses.
                        if guard.state.lost().is_some() || self.now >= guard.state.deadline() {
                            continue;
                        }
                        steps.push(Step::Reenter(c, g, RwKind::Read));
                        if guard.kind == RwKind::Write {
                            steps.push(Step::Reenter(c, g, RwKind::Write));
                        }
                    }
                }
                for g in 0..client.guards.len() {
                    steps.push(Step::Release(c, g));
                }
                if self.extends > 0 {
                    for (g, guard) in client.guards.iter().enumerate() {
                        // `Guard::extend` checks first that its hold is not lost.
                        if guard.state.lost().is_none() && self.now < guard.state.deadline() {
                            steps.push(Step::Extend(c, g));
                        }
                    }
                }
            }
            if tick_free && self.renewals > 0 && client.guards.iter().any(|g| g.state.is_active()) {
                steps.push(Step::Renew(c));
            }
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
            for s in [USER, TICK] {
                match client.slot_ref(s) {
                    None => {}
                    Some(InFlight { sleeping: true, .. }) => steps.push(Step::Resume(c)),
                    Some(InFlight { ran: None, .. }) => {
                        waiting_to_run = true;
                        // It runs when it reaches Redis: behind its connection's strays.
                        if !stray {
                            steps.push(Step::Run(c, s));
                        }
                        if self.timeouts > 0 {
                            steps.push(Step::TimeOut(c, s));
                        }
                    }
                    Some(InFlight { ran: Some(_), .. }) => {
                        steps.push(Step::Deliver(c, s));
                        if self.faults > 0 {
                            steps.push(Step::LoseReply(c, s));
                        }
                    }
                }
            }
        }
        if self.advances > 0 && !waiting_to_run {
            steps.push(Step::Advance);
        }
        if self.busy > 0 && !self.busy_next {
            steps.push(Step::Busy);
        }
        // Only where they change more than the clock: a key to lose, or a call on its way.
        if self.restarts > 0 || self.force_unlocks > 0 {
            let keys_there = !self.ks.keys(self.now).is_empty();
            let on_its_way = (self.clients.iter()).any(|c| {
                !c.strays.is_empty()
                    || [&c.flight, &c.tick]
                        .iter()
                        .any(|f| f.as_ref().is_some_and(|f| !f.sleeping))
            });
            if self.restarts > 0 && (keys_there || on_its_way) {
                steps.push(Step::Restart);
            }
            if self.force_unlocks > 0 && keys_there {
                steps.push(Step::ForceUnlock);
            }
        }
        steps
    }

    pub fn apply(&mut self, step: &Step, world: &World) -> Effects {
        let mut fx = Effects::default();
        let keys = &world.keys;
        match *step {
            Step::Acquire(c, kind) => {
                self.acquires -= 1;
                let client = &mut self.clients[c];
                let request = RwAcquire {
                    hold: hold_id(&client.owner, &client.ids.next_id()),
                    owner: client.owner.clone(),
                    kind,
                    lease_ms: LEASE,
                    waits: self.waiting_writers && kind == RwKind::Write,
                    explicit_owner: self.explicit,
                    fenced: self.fenced,
                    joins: None,
                    reservation_ms: RESERVATION,
                };
                let give_up_at = self.now + self.attempt_give_up;
                let mut resend = Resend::new(request.call(keys), give_up_at);
                let call = start_resend(&mut resend, self.now);
                let op = Op::Acquire {
                    request,
                    resend,
                    through: None,
                };
                client.flight = Some(InFlight::new(op, call));
            }
            Step::Reenter(c, g, kind) => {
                self.reentries -= 1;
                let client = &mut self.clients[c];
                let guard = &client.guards[g];
                // As `RwGuard::join`: the guard's owner, named; through a read, `joins`
                // its hold; one attempt, no wait.
                let request = RwAcquire {
                    hold: hold_id(&client.owner, &client.ids.next_id()),
                    owner: client.owner.clone(),
                    kind,
                    lease_ms: LEASE,
                    waits: false,
                    explicit_owner: true,
                    fenced: self.fenced,
                    joins: (guard.kind == RwKind::Read).then(|| guard.state.hold().clone()),
                    reservation_ms: RESERVATION,
                };
                let through = Some((guard.state.hold().clone(), guard.kind));
                let give_up_at = self.now + self.attempt_give_up;
                let mut resend = Resend::new(request.call(keys), give_up_at);
                let call = start_resend(&mut resend, self.now);
                let op = Op::Acquire {
                    request,
                    resend,
                    through,
                };
                client.flight = Some(InFlight::new(op, call));
            }
            Step::Release(c, g) => {
                let client = &mut self.clients[c];
                let guard = client.guards.remove(g);
                let hold = guard.state.hold().clone();
                let mut resend = Resend::new(
                    release_call(keys, &hold, Some(guard.kind), false),
                    self.now + GIVE_UP_AFTER,
                );
                let call = start_resend(&mut resend, self.now);
                client.flight = Some(InFlight::new(
                    Op::Release {
                        hold,
                        kind: guard.kind,
                        leaving: false,
                        resend,
                        noticed: Some(guard.state.lost()),
                    },
                    call,
                ));
            }
            Step::Renew(c) => {
                self.renewals -= 1;
                let client = &mut self.clients[c];
                let items: Vec<RenewItem> = client
                    .guards
                    .iter()
                    .filter(|g| g.state.is_active())
                    .map(|g| RenewItem {
                        key: keys.set_of(g.kind).clone(),
                        hold: g.state.hold().clone(),
                        renew: g.state.renews(),
                        hash_form: false,
                    })
                    .collect();
                let sizes = vec![1; items.len()];
                let (_, order) = renew_call(LEASE, &items, &sizes);
                client.tick = Some(InFlight::new(
                    Op::Renew {
                        items,
                        order,
                        sent_at: self.now,
                    },
                    None,
                ));
            }
            Step::Extend(c, g) => {
                self.extends -= 1;
                let client = &mut self.clients[c];
                let guard = &client.guards[g];
                // `Guard::extend`'s call (`HoldEntry::extension`): the core's
                // `extension_call` for the hold's one member, in the set of its kind (the
                // key `held` registers the hold under: `set_key`).
                let hold = guard.state.hold().clone();
                let key = keys.set_of(guard.kind).clone();
                let shape = HoldShape::SetMembers(1);
                let call = extension_call(EXTEND_LEASE, key, hold.clone(), shape);
                let op = Op::Extend {
                    hold,
                    kind: guard.kind,
                    sent_at: self.now,
                };
                client.flight = Some(InFlight::new(op, Some(call)));
            }
            Step::Run(c, s) if self.busy_next => self.refuse(c, s),
            Step::Run(c, s) => self.run(c, s, world, &mut fx),
            Step::Deliver(c, s) => self.deliver(c, s, &mut fx),
            Step::LoseReply(c, s) => {
                self.faults -= 1;
                let flight = self.clients[c].slot_ref(s).as_ref();
                if flight.is_some_and(|f| matches!(f.op, Op::Extend { .. })) {
                    fx.reach("an extend's reply was lost");
                }
                let keys = &world.keys;
                let failed = self.clients[c].failed(s, self.now, Failure::Lost, keys);
                self.gave_up(failed, &mut fx);
            }
            Step::Resume(c) => {
                let now = self.now;
                let flight = self.clients[c].flight.as_mut().expect("a call in flight");
                let next = match &mut flight.op {
                    Op::Acquire { resend, .. } | Op::Release { resend, .. } => {
                        resend.resume(&mut ModelEnv(now), &mut ())
                    }
                    Op::Renew { .. } | Op::Extend { .. } => {
                        unreachable!("renewals and extensions are not re-sent")
                    }
                };
                flight.sleeping = false;
                flight.call = match next {
                    Next::Send(call) => Some(call),
                    _ => None,
                };
            }
            Step::Advance => {
                self.advances -= 1;
                self.advance_to(self.now + ADVANCE);
            }
            Step::Busy => {
                self.busy -= 1;
                self.busy_next = true;
            }
            Step::Restart => {
                self.restarts -= 1;
                let wiped = self.wipe(keys);
                if wiped.iter().any(|(_, kind)| *kind == RwKind::Write) {
                    fx.reach("a restart emptied the keyspace while a write was believed");
                }
                self.ks.flush_all();
                // The connections drop: every call on its way is lost (one that had not
                // run yet is the same as one that ran just before and lost its reply: the
                // restart empties the keyspace either way).
                let now = self.now;
                let mut failures = Vec::new();
                for client in &mut self.clients {
                    // Its connection dropped: a stray never runs.
                    if !client.strays.is_empty() {
                        fx.reach("a restart dropped a stray");
                    }
                    client.strays.clear();
                    for s in [USER, TICK] {
                        if client.slot_ref(s).as_ref().is_none_or(|f| f.sleeping) {
                            continue;
                        }
                        failures.push(client.failed(s, now, Failure::Lost, keys));
                    }
                }
                for failed in failures {
                    self.gave_up(failed, &mut fx);
                }
                // A restart takes at least a millisecond.
                self.advance_to(now + 1);
            }
            Step::ForceUnlock => {
                self.force_unlocks -= 1;
                let live = live_members(&self.ks, keys, self.now).len() as u64;
                let wiped = self.wipe(keys);
                if wiped.iter().any(|(_, kind)| *kind == RwKind::Read) {
                    fx.reach("a force-unlock while a reader held");
                }
                // The operator's `RwLock::force_unlock`: the real `force_delete.lua`.
                let call = force::rwlock_call(keys);
                let (reply, published) = world.run_published(&call, &mut self.ks, self.now);
                self.forced(keys, live, &reply, &published, &mut fx);
                // Strays stay on their connections, and may run after it.
                for client in &mut self.clients {
                    client.strays.iter_mut().for_each(|s| s.forced = true);
                }
            }
            Step::TimeOut(c, s) => {
                self.timeouts -= 1;
                let now = self.now;
                let client = &mut self.clients[c];
                let flight = client.slot_ref(s).as_ref().expect("a call in flight");
                let call = match &flight.op {
                    Op::Renew { items, .. } => renew_call(LEASE, items, &vec![1; items.len()]).0,
                    _ => flight.call.clone().expect("a call sent"),
                };
                let op = flight.op.clone();
                client.strays.push(Stray {
                    call,
                    op,
                    given_up: false,
                    forced: false,
                });
                let failed = client.failed(s, now, Failure::TimedOut, keys);
                self.gave_up(failed, &mut fx);
            }
            Step::Drop(c) => {
                self.drops -= 1;
                let now = self.now;
                let client = &mut self.clients[c];
                let flight = client.flight.take().expect("an acquire in flight");
                let Op::Acquire { request, .. } = &flight.op else {
                    unreachable!("only an acquire is dropped")
                };
                // A copy on the wire stays there: a stray, which runs, if at all, before
                // the give-back (sent after it on the same connection). The reply of a copy
                // that ran is dropped with the acquire.
                if flight.ran.is_none() && !flight.sleeping {
                    client.strays.push(Stray {
                        call: flight.call.clone().expect("a call sent"),
                        op: flight.op.clone(),
                        given_up: false,
                        forced: false,
                    });
                }
                for stray in &mut client.strays {
                    if let Op::Acquire { request: r, .. } = &stray.op
                        && r.hold == request.hold
                    {
                        stray.given_up = true;
                    }
                }
                // The runtime's `Acquiring::drop`: its waiting loop, with this attempt in
                // flight, says whether to give back (`give_back_in_background`:
                // `held::give_back(hold_too = true, leaving = true)`).
                if waiting_loop(request, now).give_back_if_dropped() {
                    client.flight = Some(leave(request, now, keys));
                }
            }
            Step::ExecuteStray(c) => self.execute_stray(c, world, &mut fx),
            Step::DropStray(c) => {
                self.clients[c].strays.remove(0);
            }
        }
        self.forget_doomed();
        self.check(keys, &mut fx);
        fx
    }

    /// Moves the clock to `to`: keys expire, and every guard's clock says whether its
    /// deadline passed.
    fn advance_to(&mut self, to: Millis) {
        self.now = to;
        self.ks.expire(to);
        for client in &mut self.clients {
            for guard in &mut client.guards {
                guard.state.on_clock(to);
            }
        }
    }

    /// Redis is about to lose the lock's keys behind everyone's back: the live holds are
    /// doomed. Returns the believed holds it dooms (hold, kind).
    fn wipe(&mut self, keys: &RwKeys) -> Vec<(Arc<str>, RwKind)> {
        let now = self.now;
        let mut believed = Vec::new();
        for (member, kind, _) in live_members(&self.ks, keys, now) {
            let member = String::from_utf8_lossy(&member).into_owned();
            let hold: Arc<str> = member.strip_suffix(":1").unwrap_or(&member).into();
            let held = self.clients.iter().any(|c| {
                c.guards.iter().any(|g| {
                    g.state.hold() == &hold
                        && g.kind == kind
                        && g.state.lost().is_none()
                        && now < g.state.deadline()
                })
            });
            if held {
                believed.push((hold.clone(), kind));
            }
            self.doomed.insert(hold);
        }
        believed
    }

    /// What a force-unlock (`force_delete.lua`, `live` holds live before it) must have
    /// done: every hold gone, their number reported (read by the library's
    /// `force::decode`), and, when it took a live hold, readers and writers woken on their
    /// channels (nobody listens in the model: the wake-up is checked as published).
    fn forced(
        &self,
        keys: &RwKeys,
        live: u64,
        reply: &Reply,
        published: &[Vec<u8>],
        fx: &mut Effects,
    ) {
        let left = (self.ks.keys(self.now).into_iter())
            .filter(|k| *k == keys.write.as_bytes() || *k == keys.read.as_bytes());
        let left: Vec<String> = left.map(|k| show(&k)).collect();
        if !left.is_empty() {
            fx.fail("release is true", format!("the force-unlock left {left:?}"));
        }
        let read = force::decode(reply);
        if read != Ok(ForceDeleted::Holds(live)) {
            let what = format!("the force-unlock of {live} live holds reported {read:?}");
            fx.fail("release is true", what);
        }
        let channels = [&keys.read_channel, &keys.write_channel];
        let expected: Vec<Vec<u8>> = (channels.iter())
            .filter(|_| live > 0)
            .map(|ch| ch.as_bytes().to_vec())
            .collect();
        if published != expected {
            let woke: Vec<String> = published.iter().map(|ch| show(ch)).collect();
            let what = format!("the force-unlock of {live} live holds woke {woke:?}");
            fx.fail("release is true", what);
        }
    }

    /// Forgets the doomed ids nothing names any more (they would only tell states apart).
    fn forget_doomed(&mut self) {
        if self.doomed.is_empty() {
            return;
        }
        let clients = &self.clients;
        let named = |hold: &Arc<str>| {
            clients.iter().any(|c| {
                c.guards.iter().any(|g| g.state.hold() == hold)
                    || ([&c.flight, &c.tick].into_iter())
                        .filter_map(|f| f.as_ref().map(|f| &f.op))
                        .chain(c.strays.iter().map(|s| &s.op))
                        .any(|op| match op {
                            Op::Acquire { request, .. } => request.hold == *hold,
                            Op::Release { hold: h, .. } => h == hold,
                            Op::Renew { items, .. } => items.iter().any(|i| i.hold == *hold),
                            Op::Extend { hold: h, .. } => h == hold,
                        })
            })
        };
        self.doomed.retain(named);
    }

    /// Redis refuses client `c`'s call with `BUSY`/`LOADING` (it does not run it), and the
    /// library's machine decides what next: a re-send after a pause, as for any transient
    /// failure; the watchdog's next tick renews.
    fn refuse(&mut self, c: usize, s: usize) {
        self.busy_next = false;
        let now = self.now;
        let slot = self.clients[c].slot(s);
        let flight = slot.as_mut().expect("a call in flight");
        match &mut flight.op {
            Op::Renew { .. } | Op::Extend { .. } => *slot = None,
            Op::Acquire { resend, .. } | Op::Release { resend, .. } => {
                let busy = Failure::Transient("BUSY Redis is busy running a script".into());
                match resend.on_failure(&mut ModelEnv(now), &mut (), busy) {
                    Next::SleepUntil(_) => {
                        flight.sleeping = true;
                        flight.busied = true;
                    }
                    other => panic!("a re-send that does not retry BUSY: {other:?}"),
                }
            }
        }
    }

    /// What a client's machine made of a failure ([`Client::failed`]), as effects.
    fn gave_up(&self, failed: Result<bool, String>, fx: &mut Effects) {
        match failed {
            Ok(true) => fx.reach("an attempt that gave up gave back"),
            Ok(false) => {}
            Err(message) => fx.fail("one hold per acquisition", message),
        }
    }

    fn run(&mut self, c: usize, s: usize, world: &World, fx: &mut Effects) {
        let flight = self.clients[c].slot(s).clone().expect("a call in flight");
        if s == TICK
            && matches!(
                &self.clients[c].flight,
                Some(InFlight {
                    op: Op::Acquire { .. },
                    ..
                })
            )
        {
            fx.reach("a renewal ran while the owner's attempt was in flight");
        }
        let call = match &flight.op {
            Op::Acquire { .. } | Op::Release { .. } | Op::Extend { .. } => {
                flight.call.clone().expect("a call to run")
            }
            Op::Renew { items, .. } => renew_call(LEASE, items, &vec![1; items.len()]).0,
        };
        let (reply, found) = self.execute(c, &call, &flight.op, world, fx);
        let flight = self.clients[c].slot(s).as_mut().expect("a call in flight");
        flight.removed |= found == (Found::Release { removed: true });
        flight.ran = Some((reply, found));
    }

    /// Runs client `c`'s `call` of `op` (its flight's, or a stray's: nobody reads a
    /// stray's reply, but its run gets every check a run on time gets): the reply and what
    /// the run found.
    fn execute(
        &mut self,
        c: usize,
        call: &Call,
        op: &Op,
        world: &World,
        fx: &mut Effects,
    ) -> (Reply, Found) {
        let keys = &world.keys;
        let now = self.now;
        let before = live_members(&self.ks, keys, now);
        let own = match op {
            Op::Release { hold, .. } => Some(member_of(hold)),
            _ => None,
        };
        let reply = world.run(call, &mut self.ks, now);
        let after = live_members(&self.ks, keys, now);
        // Nothing but the caller's own release takes a live hold out or shortens one.
        for (member, kind, score) in &before {
            match after.iter().find(|(m, k, _)| m == member && k == kind) {
                None if own.as_ref() == Some(member) => {}
                None => fx.fail(
                    "a release removes only its own hold",
                    format!(
                        "{call:?} (client {c}) took out the live hold {} ({kind:?})",
                        show(member)
                    ),
                ),
                Some((_, _, later)) if later < score => fx.fail(
                    "a release removes only its own hold",
                    format!("{call:?} shortened the hold {}", show(member)),
                ),
                Some(_) => {}
            }
        }
        let present = |list: &[(Vec<u8>, RwKind, f64)], member: &[u8]| {
            list.iter().any(|(m, _, _)| m == member)
        };
        let found = match op {
            Op::Acquire {
                request, through, ..
            } => Found::Acquire {
                existed: present(&before, &member_of(&request.hold)),
                through_live: through.as_ref().is_some_and(|(hold, kind)| {
                    let member = member_of(hold);
                    before.iter().any(|(m, k, _)| *m == member && k == kind)
                }),
            },
            Op::Release { hold, .. } => {
                let member = member_of(hold);
                Found::Release {
                    removed: present(&before, &member) && !present(&after, &member),
                }
            }
            Op::Renew { items, .. } => Found::Renew {
                live: items
                    .iter()
                    .map(|item| present(&before, &member_of(&item.hold)))
                    .collect(),
            },
            Op::Extend { hold, kind, .. } => {
                let member = member_of(hold);
                Found::Renew {
                    live: vec![before.iter().any(|(m, k, _)| *m == member && k == kind)],
                }
            }
        };
        if let (Op::Release { leaving: true, .. }, Found::Release { removed: true }) = (op, &found)
        {
            fx.reach("a dropped acquire's hold was given back");
        }
        if let Op::Acquire { request, .. } = op {
            let member = member_of(&request.hold);
            if !present(&before, &member) && present(&after, &member) {
                // A fresh grant: whatever a wipe took of this id before is history.
                self.doomed.remove(&request.hold);
            }
            self.check_attempt(request, &found, &before, &reply, fx);
        }
        (reply, found)
    }

    /// Client `c`'s oldest stray runs: with every check a run on time gets, and what it did
    /// counted where the client still waits for its operation (a release's re-sent copy
    /// reports what any copy did).
    fn execute_stray(&mut self, c: usize, world: &World, fx: &mut Effects) {
        let stray = self.clients[c].strays.remove(0);
        if stray.forced {
            fx.reach("a stray sent before a force-unlock ran after it");
        }
        // Whether `op` is the operation the stray is a copy of.
        let same = |op: &Op| match (op, &stray.op) {
            (Op::Acquire { request: a, .. }, Op::Acquire { request: b, .. }) => a.hold == b.hold,
            (Op::Release { hold: a, .. }, Op::Release { hold: b, .. }) => a == b,
            _ => false,
        };
        // The operation the stray is a copy of had a copy refused as BUSY before.
        let flight = self.clients[c].flight.as_ref();
        if flight.is_some_and(|f| f.busied && same(&f.op)) {
            fx.reach("a stray copy of a call refused as BUSY ran");
        }
        let (reply, found) = self.execute(c, &stray.call, &stray.op, world, fx);
        let now = self.now;
        let live = live_members(&self.ks, &world.keys, now);
        let flight = self.clients[c].flight.as_mut();
        match (&stray.op, found) {
            (Op::Acquire { request, .. }, Found::Acquire { existed, .. }) if stray.given_up => {
                fx.reach("a stray acquire ran after its client gave up");
                let member = member_of(&request.hold);
                if !existed && live.iter().any(|(m, _, _)| *m == member) {
                    fx.reach("a stray acquire took the lock after its client gave up");
                }
            }
            (Op::Acquire { .. }, _) => {
                if flight.is_some_and(|f| same(&f.op)) {
                    fx.reach("a stray acquire ran before its re-sent copy");
                }
            }
            (Op::Release { .. }, Found::Release { removed }) => {
                fx.reach("a stray release copy ran");
                // What its give-back reports must count the copies that ran late.
                if let Some(flight) = flight.filter(|f| same(&f.op)) {
                    flight.removed |= removed;
                }
            }
            (Op::Renew { items, order, .. }, Found::Renew { live }) => {
                fx.reach("a stray renewal ran");
                if live.contains(&false) {
                    fx.reach("a stray renewal named a gone hold");
                }
                // Nobody reads it, but the script must tell the truth all the same (only a
                // late renewal can name a hold that expired meanwhile).
                check_renewal(items, order, &reply, &live, fx);
            }
            (Op::Extend { hold, kind, .. }, Found::Renew { live }) => {
                fx.reach("a stray extend ran");
                // Nobody reads it either: it must tell the truth all the same.
                check_renewal(&[extension_item(hold, *kind)], &[0], &reply, &live, fx);
            }
            _ => unreachable!("a run finds what its operation looks for"),
        }
    }

    /// What an attempt's run answered, read by the library's decoder, against what Redis
    /// held when it ran: tokens, the refused upgrade, and re-entries.
    fn check_attempt(
        &mut self,
        request: &RwAcquire,
        found: &Found,
        before: &[(Vec<u8>, RwKind, f64)],
        reply: &Reply,
        fx: &mut Effects,
    ) {
        let Found::Acquire {
            existed,
            through_live,
        } = *found
        else {
            return;
        };
        let decoded = request.decode(reply);
        let prefix = format!("{}\u{1}", request.owner).into_bytes();
        let owners = |kind: RwKind| {
            before
                .iter()
                .any(|(m, k, _)| *k == kind && m.starts_with(&prefix))
        };
        let owner_writes = owners(RwKind::Write);
        let sees_own_read = (request.explicit_owner && owners(RwKind::Read))
            || request.joins.as_ref().is_some_and(|joined| {
                let member = member_of(joined);
                before
                    .iter()
                    .any(|(m, k, _)| *m == member && *k == RwKind::Read)
            });
        let upgrade = request.kind == RwKind::Write && !existed && !owner_writes && sees_own_read;
        let hold = show(request.hold.as_bytes());
        match (&decoded, upgrade) {
            (Ok(RwAcquired::Upgrade), true) => {}
            (other, true) => fx.fail(
                "an upgrade is refused, never granted and never waits",
                format!("write {hold} by an owner that reads was answered {other:?} ({reply:?})"),
            ),
            (Ok(RwAcquired::Upgrade), false) => fx.fail(
                "an upgrade is refused, never granted and never waits",
                format!(
                    "{:?} {hold} refused as an upgrade, but it is none",
                    request.kind
                ),
            ),
            _ => {}
        }
        if through_live && !matches!(decoded, Ok(RwAcquired::Granted(_))) {
            fx.fail(
                "a re-entry is granted while its hold lives",
                format!("re-entry {hold} through a live hold answered {decoded:?}"),
            );
        }
        let Ok(RwAcquired::Granted(token)) = decoded else {
            return;
        };
        if !(request.fenced && request.kind == RwKind::Write) {
            // (A reply that is no grant at all is the other properties' business.)
            let raw_token = match reply {
                Reply::Array(items) if items.first() == Some(&Reply::Int(1)) => items.get(1),
                _ => None,
            };
            if token.is_some() || raw_token.is_some_and(|t| *t != Reply::Int(0)) {
                fx.fail(
                    "tokens only go up",
                    format!(
                        "{:?} {hold} (unfenced or a read) granted with a token: {reply:?}",
                        request.kind
                    ),
                );
            }
            return;
        }
        let Some(token) = token else {
            fx.fail(
                "tokens only go up",
                format!("fenced write {hold} granted without a token: {reply:?}"),
            );
            return;
        };
        if existed || owner_writes {
            // The owner already holds the write (its own copy, or a re-entry): the token
            // of the write it holds, the counter's.
            if token != self.last_token {
                fx.fail(
                    "tokens only go up",
                    format!(
                        "write {hold} granted under the owner's live write with token {token}, \
                         the owner's is {}",
                        self.last_token
                    ),
                );
            }
        } else {
            if token <= self.last_token {
                fx.fail(
                    "tokens only go up",
                    format!(
                        "fresh write {hold} got token {token}, not above the earlier {}",
                        self.last_token
                    ),
                );
            } else if self.last_token > 0 {
                fx.reach("a fenced write got a higher token");
            }
            self.last_token = self.last_token.max(token);
        }
    }

    fn deliver(&mut self, c: usize, s: usize, fx: &mut Effects) {
        let now = self.now;
        let flight = self.clients[c].slot(s).take().expect("a call in flight");
        let (reply, found) = flight.ran.expect("delivered after it ran");
        if flight.busied {
            fx.reach("a call refused as BUSY ran when re-sent");
        }
        let resent = |resend: Resend| {
            let mut resend = resend;
            match resend.on_reply(&mut ModelEnv(now), &mut (), &reply) {
                Next::Done(Ok(resent)) => resent,
                other => panic!("a re-send that got a reply: {other:?}"),
            }
        };
        match flight.op {
            Op::Acquire {
                request,
                resend,
                through,
            } => match request.decode(&reply) {
                Ok(RwAcquired::Granted(token)) => {
                    let Found::Acquire {
                        existed,
                        through_live,
                    } = found
                    else {
                        unreachable!()
                    };
                    if flight.retried && existed {
                        fx.reach("a retried acquire found its hold");
                    }
                    if request.kind == RwKind::Write {
                        fx.reach("a write granted");
                    }
                    let client = &mut self.clients[c];
                    // What the library says of a re-entry: the hold it went through lets
                    // it in, and a write through a write keeps that write's token.
                    let outer = through.as_ref().and_then(|(hold, _)| {
                        client.guards.iter().find(|g| g.state.hold() == hold)
                    });
                    match (&through, outer) {
                        (Some((_, RwKind::Read)), _) if through_live => {
                            fx.reach("a read re-entered through its guard");
                        }
                        (Some((_, RwKind::Write)), _)
                            if through_live && request.kind == RwKind::Read =>
                        {
                            fx.reach("a read taken through a write guard (downgrade)");
                        }
                        (Some((_, RwKind::Write)), Some(outer))
                            if through_live && request.kind == RwKind::Write =>
                        {
                            if token != outer.token {
                                fx.fail(
                                    "tokens only go up",
                                    format!(
                                        "write {} re-entered through {} got token {token:?}, \
                                         the guard's is {:?}",
                                        show(request.hold.as_bytes()),
                                        show(outer.state.hold().as_bytes()),
                                        outer.token
                                    ),
                                );
                            } else if token.is_some() {
                                fx.reach("a re-entered write kept its token");
                            }
                        }
                        _ => {}
                    }
                    if client
                        .guards
                        .iter()
                        .any(|g| g.state.hold() == &request.hold)
                    {
                        fx.fail(
                            "one hold per acquisition",
                            format!("client {c} got {} twice", show(request.hold.as_bytes())),
                        );
                    }
                    // Confirmed from the send time the library's machine says.
                    let sent_at = resent(resend).first_sent_at;
                    client.guards.push(Guard {
                        kind: request.kind,
                        state: HoldState::new(request.hold.clone(), sent_at, LEASE, true),
                        token,
                        reentered: through.is_some(),
                    });
                }
                Ok(RwAcquired::Wait(_)) if request.waits => {
                    // A waiting writer that gives up: give back what the attempt may hold
                    // (its reservation), as `held::Cleanup` does.
                    self.clients[c].flight = Some(leave(&request, now, &keys()));
                }
                // The library's `Error::WouldDeadlock`: nothing was written (checked where it
                // ran); a re-entry that waits is told its hold is lost (`RwGuard::join`).
                Ok(RwAcquired::Upgrade) => fx.reach("an upgrade was refused"),
                Ok(RwAcquired::Wait(_)) => {}
                Ok(other) => fx.fail(
                    "one hold per acquisition",
                    format!("unexpected acquire reply {other:?}"),
                ),
                Err(err) => fx.fail("one hold per acquisition", err),
            },
            Op::Release {
                hold,
                resend,
                noticed,
                ..
            } => {
                if flight.retried {
                    fx.reach("a retried release");
                }
                // What the library reports, read by its own `given_back`, must be true
                // (every give-back of the read-write lock names its hold: `hold_too`, as
                // `held::give_back_found` reads it, a leaving waiter's too).
                let given = given_back(&resent(resend), true);
                // What the guard's caller is told (`Held::release`, by the core's `told`):
                // "released" only if a copy of this release took the hold out, so a hold
                // lost before (expired, or wiped by a restart or a force-unlock) is told.
                let reading = given.as_ref().ok().and_then(Reading::of_given_back);
                if let (Some(noticed), Some(reading)) = (noticed, reading) {
                    let said = told(reading, noticed, false);
                    if said == Told::Released && !flight.removed {
                        fx.fail(
                            "losses are told",
                            format!(
                                "release of {} told released, but no copy took it out",
                                show(hold.as_bytes())
                            ),
                        );
                    }
                    if said != Told::Released && self.doomed.contains(&hold) {
                        fx.reach("a holder was told its wiped hold is lost");
                    }
                }
                match given {
                    Ok(GivenBack::Removed) if !flight.removed => fx.fail(
                        "release is true",
                        format!(
                            "release of {} reported it removed the hold, but no copy did",
                            show(hold.as_bytes())
                        ),
                    ),
                    Ok(GivenBack::NotHeld) if flight.removed => fx.fail(
                        "release is true",
                        format!(
                            "release of {} reported nothing there, but a copy removed it",
                            show(hold.as_bytes())
                        ),
                    ),
                    Ok(_) => {}
                    Err(err) => fx.fail("release is true", err),
                }
                let removed = found == (Found::Release { removed: true });
                match reply {
                    Reply::Int(1) if !removed => fx.fail(
                        "release is true",
                        format!(
                            "release of {} said 1 but took nothing out",
                            show(hold.as_bytes())
                        ),
                    ),
                    Reply::Int(0) if removed => fx.fail(
                        "release is true",
                        format!(
                            "release of {} said 0 but took it out",
                            show(hold.as_bytes())
                        ),
                    ),
                    Reply::Int(0 | 1) => {}
                    other => fx.fail("release is true", format!("release reply {other:?}")),
                }
            }
            Op::Renew {
                items,
                order,
                sent_at,
            } => {
                let Found::Renew { live } = found else {
                    unreachable!()
                };
                let Some(status) = check_renewal(&items, &order, &reply, &live, fx) else {
                    return;
                };
                for (position, status) in status.iter().enumerate() {
                    let item = &items[order[position]];
                    let client = &mut self.clients[c];
                    let Some(guard) = client
                        .guards
                        .iter_mut()
                        .find(|g| g.state.hold() == &item.hold)
                    else {
                        continue; // released since
                    };
                    match status {
                        Renewed::Current => {
                            guard.state.on_renewal(item.renew, sent_at, LEASE);
                            if now > START + LEASE {
                                fx.reach("a renewal kept a hold past its first lease");
                            }
                        }
                        Renewed::Gone => {
                            if guard.state.on_gone().is_some() {
                                fx.reach("a renewal told a loss");
                                if self.doomed.contains(&item.hold) {
                                    fx.reach("a holder was told its wiped hold is lost");
                                }
                            }
                        }
                        Renewed::Elsewhere => fx.fail(
                            "losses are told",
                            "renewal answered Elsewhere on one Redis".into(),
                        ),
                    }
                }
            }
            // Read as `HoldEntry::on_extension_reply` reads it (`decode_renew`, one item):
            // gone, the hold is lost and its guard told (`Registry::gone`:
            // `HoldState::on_gone`); otherwise its expiry is at least the extension's lease
            // from the send (`HoldState::on_extended`). The reply must tell the truth about
            // the hold as it was when the call ran, as a renewal's.
            Op::Extend {
                hold,
                kind,
                sent_at,
            } => {
                let Found::Renew { live } = found else {
                    unreachable!()
                };
                let items = [extension_item(&hold, kind)];
                let Some(status) = check_renewal(&items, &[0], &reply, &live, fx) else {
                    return;
                };
                let client = &mut self.clients[c];
                let Some(guard) = client.guards.iter_mut().find(|g| g.state.hold() == &hold) else {
                    return; // released since
                };
                match status.first() {
                    Some(Renewed::Gone) => {
                        if guard.state.on_gone().is_some() {
                            fx.reach("an extend found its hold gone");
                            if self.doomed.contains(&hold) {
                                fx.reach("a holder was told its wiped hold is lost");
                            }
                        }
                    }
                    Some(Renewed::Elsewhere) => fx.fail(
                        "losses are told",
                        "extension answered Elsewhere on one Redis".into(),
                    ),
                    _ => {
                        let before = guard.state.deadline();
                        guard.state.on_extended(sent_at, EXTEND_LEASE);
                        if guard.state.deadline() > before {
                            fx.reach("an extend lengthened a hold");
                            if guard.reentered {
                                fx.reach("an extend lengthened a re-entered hold");
                            }
                        }
                    }
                }
            }
        }
    }

    /// The properties that hold in every state.
    fn check(&self, keys: &RwKeys, fx: &mut Effects) {
        let now = self.now;
        let live = live_members(&self.ks, keys, now);
        // Who believes what: (client, owner, kind, hold).
        let mut believers = Vec::new();
        // Beliefs in holds wiped behind their holders' backs (see the header): left out.
        let mut wiped = Vec::new();
        for (c, client) in self.clients.iter().enumerate() {
            for guard in &client.guards {
                let believed = guard.state.lost().is_none() && now < guard.state.deadline();
                if believed && self.doomed.contains(guard.state.hold()) {
                    wiped.push(&client.owner);
                } else if believed {
                    believers.push((c, &client.owner, guard.kind, guard.state.hold()));
                    let member = member_of(guard.state.hold());
                    // Its deadline on Redis's clock (the model's clock, scored in ms).
                    let score = live
                        .iter()
                        .find(|(m, k, _)| *m == member && *k == guard.kind)
                        .map(|(_, _, score)| *score);
                    if let Some(score) = score
                        && guard.state.deadline() as f64 > score
                    {
                        fx.fail(
                            "belief is true",
                            format!(
                                "client {c} believes in {} until t={} but Redis ends it at t={score}",
                                show(&member),
                                guard.state.deadline()
                            ),
                        );
                    }
                    if score.is_none() {
                        fx.fail(
                            "belief is true",
                            format!(
                                "client {c} believes in {} ({:?}) but Redis has no live such hold",
                                show(&member),
                                guard.kind
                            ),
                        );
                    }
                }
            }
        }
        if (wiped.iter()).any(|w| believers.iter().any(|b| b.1 != *w)) {
            fx.reach("a wiped holder and a new one both believed");
        }
        for (i, a) in believers.iter().enumerate() {
            for b in &believers[i + 1..] {
                if a.1 != b.1 && (a.2 == RwKind::Write || b.2 == RwKind::Write) {
                    fx.fail(
                        "never a writer with another holder",
                        format!(
                            "client {} holds {:?} ({}) while client {} holds {:?} ({})",
                            a.0,
                            a.2,
                            show(a.3.as_bytes()),
                            b.0,
                            b.2,
                            show(b.3.as_bytes())
                        ),
                    );
                }
                if a.1 != b.1 && a.2 == RwKind::Read && b.2 == RwKind::Read {
                    fx.reach("two owners reading at once");
                }
                if a.0 != b.0 && a.1 == b.1 {
                    fx.reach("two handles of one owner held together");
                }
            }
        }
        // One member per acquisition, named '<hold id>:1'.
        let mut ids = HashSet::new();
        for (member, kind, _) in &live {
            let Some(id) = member.strip_suffix(b":1") else {
                fx.fail(
                    "one hold per acquisition",
                    format!("member {} is not '<hold id>:1'", show(member)),
                );
                continue;
            };
            if !ids.insert(id.to_vec()) {
                fx.fail(
                    "one hold per acquisition",
                    format!("{} holds twice ({kind:?})", show(id)),
                );
            }
        }
        // No orphans: with nothing in flight (a stray is not), every live hold is some
        // guard's.
        if self.clients.iter().all(Client::idle) {
            for (member, kind, _) in &live {
                let owned = self.clients.iter().any(|c| {
                    c.guards
                        .iter()
                        .any(|g| member_of(g.state.hold()) == *member && g.kind == *kind)
                });
                if !owned {
                    fx.fail(
                        "no orphans, no garbage",
                        format!("live hold {} ({kind:?}) belongs to no guard", show(member)),
                    );
                }
            }
        }
        // No garbage: only the lock's keys, each with a TTL; a set's expiry is its latest
        // deadline (no hold outlives its set, no set outlives its last hold).
        for key in self.ks.keys(now) {
            let expiry = self.ks.pexpire_at(&key, now).flatten();
            if key == keys.fence.as_bytes() {
                // The fencing counter outlives the holds (no TTL): tokens only go up.
                continue;
            }
            if key == keys.reservation.as_bytes() {
                if expiry.is_none() {
                    fx.fail("no orphans, no garbage", "reservation without a TTL".into());
                }
                continue;
            }
            let Some(zset) = [&keys.read, &keys.write]
                .iter()
                .find(|k| k.as_bytes() == key)
                .and_then(|_| self.ks.zset(&key, now))
            else {
                fx.fail(
                    "no orphans, no garbage",
                    format!("unexpected key {}", show(&key)),
                );
                continue;
            };
            let latest = zset.values().map(|s| s.0).fold(f64::MIN, f64::max);
            if expiry.map(|at| at as f64) != Some(latest) {
                fx.fail(
                    "no orphans, no garbage",
                    format!(
                        "{} expires at {expiry:?}, its latest hold at {latest}",
                        show(&key)
                    ),
                );
            }
        }
    }

    /// One line: the clock, Redis's holds and each client's beliefs and call in flight.
    pub fn describe(&self) -> String {
        let keys = keys();
        let mut out = format!("t={} redis:", self.now - START);
        for kind in [RwKind::Read, RwKind::Write] {
            let key = keys.set_of(kind);
            if let Some(zset) = self.ks.zset(key.as_bytes(), self.now) {
                let items: Vec<String> = zset
                    .iter()
                    .map(|(m, s)| format!("{}@{}", show(m), s.0 as i64 - START as i64))
                    .collect();
                out += &format!(" {kind:?}[{}]", items.join(" "));
            }
        }
        if let Some(q) = self.ks.get_str(keys.reservation.as_bytes(), self.now) {
            out += &format!(" reserved-by {}", show(q));
        }
        if self.busy_next {
            out += " (next call BUSY)";
        }
        for (c, client) in self.clients.iter().enumerate() {
            out += &format!("; c{c}({}):", client.owner);
            for guard in &client.guards {
                let believed = guard.state.lost().is_none() && self.now < guard.state.deadline();
                out += &format!(
                    " {:?} {}{} until {}{}",
                    guard.kind,
                    show(guard.state.hold().as_bytes()),
                    guard.token.map_or(String::new(), |t| format!(" token {t}")),
                    guard.state.deadline() as i64 - START as i64,
                    match (believed, self.doomed.contains(guard.state.hold())) {
                        (false, _) => " (not believed)",
                        (true, true) => " (wiped)",
                        (true, false) => "",
                    }
                );
            }
            for flight in [&client.flight, &client.tick].into_iter().flatten() {
                let what = match &flight.op {
                    Op::Acquire {
                        request, through, ..
                    } => {
                        format!(
                            "{} {:?} {}",
                            if through.is_some() {
                                "re-enter"
                            } else {
                                "acquire"
                            },
                            request.kind,
                            show(request.hold.as_bytes())
                        )
                    }
                    Op::Release { hold, leaving, .. } => format!(
                        "{} {}",
                        if *leaving { "leave" } else { "release" },
                        show(hold.as_bytes())
                    ),
                    Op::Renew { items, .. } => format!("renew {} holds", items.len()),
                    Op::Extend { hold, .. } => format!("extend {}", show(hold.as_bytes())),
                };
                let stage = match &flight.ran {
                    None if flight.sleeping => "asleep before a re-send".to_string(),
                    None if !client.strays.is_empty() => "sent behind strays".to_string(),
                    None => "sent".to_string(),
                    Some((reply, _)) => format!("ran -> {reply:?}"),
                };
                out += &format!(" [{what} {stage}]");
            }
            for stray in &client.strays {
                let what = match &stray.op {
                    Op::Acquire { request, .. } => {
                        format!(
                            "acquire {:?} {}",
                            request.kind,
                            show(request.hold.as_bytes())
                        )
                    }
                    Op::Release { hold, leaving, .. } => format!(
                        "{} {}",
                        if *leaving { "leave" } else { "release" },
                        show(hold.as_bytes())
                    ),
                    Op::Renew { items, .. } => format!("renew {} holds", items.len()),
                    Op::Extend { hold, .. } => format!("extend {}", show(hold.as_bytes())),
                };
                let given_up = if stray.given_up { ", given up" } else { "" };
                let forced = if stray.forced {
                    ", sent before a force-unlock"
                } else {
                    ""
                };
                out += &format!(" stray({what}{given_up}{forced})");
            }
        }
        out
    }
}

/// The read-write lock's model, for the one checker (`tests/protocol/checker.rs`).
pub struct Rw;

impl Model for Rw {
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
    fn apply(state: &mut State, step: &Step, world: &World, config: &Config) -> Stepped {
        let mut effects = state.apply(step, world);
        // A restart drops every stray: one that runs after it was sent after it.
        if matches!(step, Step::ExecuteStray(_)) && state.restarts < config.restarts {
            effects.reach("a stray ran after a restart");
        }
        Stepped {
            milestones: effects.milestones,
            violations: effects.violation.into_iter().collect(),
        }
    }
    fn describe(state: &State) -> String {
        state.describe()
    }
}

/// The default configurations.
pub fn configs() -> Vec<Config> {
    vec![
        Config {
            name: "rw: three owners, lost replies, expiry and renewal",
            owners: vec!["a", "b", "c"],
            acquires: 4,
            advances: 3,
            faults: 2,
            renewals: 2,
            waiting_writers: false,
            restarts: 0,
            force_unlocks: 0,
            busy: 0,
            explicit: false,
            fenced: false,
            reentries: 0,
            extends: 0,
            racing_renewals: false,
            timeouts: 0,
            drops: 0,
            attempt_give_up: GIVE_UP_AFTER,
        },
        Config {
            name: "rw: two owners, waiting writers, faults",
            owners: vec!["a", "b"],
            acquires: 3,
            advances: 3,
            faults: 2,
            renewals: 2,
            waiting_writers: true,
            restarts: 0,
            force_unlocks: 0,
            busy: 0,
            explicit: false,
            fenced: false,
            reentries: 0,
            extends: 0,
            racing_renewals: false,
            timeouts: 0,
            drops: 0,
            attempt_give_up: GIVE_UP_AFTER,
        },
        Config {
            name: RESTART,
            owners: vec!["a", "b"],
            acquires: 3,
            advances: 2,
            faults: 1,
            renewals: 1,
            waiting_writers: false,
            restarts: 1,
            force_unlocks: 0,
            busy: 1,
            explicit: false,
            fenced: false,
            reentries: 0,
            extends: 0,
            racing_renewals: false,
            timeouts: 0,
            drops: 0,
            attempt_give_up: GIVE_UP_AFTER,
        },
        Config {
            name: FORCE_UNLOCK,
            owners: vec!["a", "b"],
            acquires: 3,
            advances: 2,
            faults: 1,
            renewals: 1,
            waiting_writers: true,
            restarts: 0,
            force_unlocks: 1,
            busy: 0,
            explicit: false,
            fenced: false,
            reentries: 0,
            extends: 0,
            racing_renewals: false,
            timeouts: 0,
            drops: 0,
            attempt_give_up: GIVE_UP_AFTER,
        },
        Config {
            name: FENCED_REENTRY,
            owners: vec!["a", "b"],
            acquires: 3,
            advances: 2,
            faults: 1,
            renewals: 1,
            waiting_writers: true,
            restarts: 0,
            force_unlocks: 0,
            busy: 0,
            explicit: false,
            fenced: true,
            reentries: 2,
            extends: 1,
            racing_renewals: false,
            timeouts: 0,
            drops: 0,
            attempt_give_up: GIVE_UP_AFTER,
        },
        Config {
            name: EXPLICIT,
            owners: vec!["a", "a", "b"],
            acquires: 3,
            advances: 2,
            faults: 1,
            renewals: 0,
            waiting_writers: true,
            restarts: 0,
            force_unlocks: 0,
            busy: 0,
            explicit: true,
            fenced: true,
            reentries: 1,
            extends: 0,
            racing_renewals: false,
            timeouts: 0,
            drops: 0,
            attempt_give_up: GIVE_UP_AFTER,
        },
        Config {
            name: RACING,
            owners: vec!["a", "b"],
            acquires: 3,
            advances: 2,
            faults: 1,
            renewals: 2,
            waiting_writers: false,
            restarts: 0,
            force_unlocks: 0,
            busy: 0,
            explicit: false,
            fenced: false,
            reentries: 0,
            extends: 0,
            racing_renewals: true,
            timeouts: 0,
            drops: 0,
            attempt_give_up: GIVE_UP_AFTER,
        },
        Config {
            name: LATE,
            owners: vec!["a", "b"],
            acquires: 3,
            advances: 2,
            faults: 0,
            renewals: 1,
            waiting_writers: true,
            restarts: 0,
            force_unlocks: 0,
            busy: 0,
            explicit: false,
            fenced: false,
            reentries: 0,
            extends: 0,
            racing_renewals: false,
            timeouts: 1,
            drops: 1,
            attempt_give_up: GIVE_UP_AFTER,
        },
        Config {
            name: LATE_WIPE,
            owners: vec!["a", "b"],
            acquires: 2,
            advances: 1,
            faults: 0,
            renewals: 1,
            waiting_writers: false,
            restarts: 1,
            force_unlocks: 0,
            busy: 1,
            explicit: false,
            fenced: false,
            reentries: 0,
            extends: 0,
            racing_renewals: false,
            timeouts: 1,
            drops: 1,
            attempt_give_up: GIVE_UP_AFTER,
        },
        Config {
            name: LATE_FORCE,
            owners: vec!["a", "b"],
            acquires: 3,
            advances: 1,
            faults: 0,
            renewals: 1,
            waiting_writers: true,
            restarts: 0,
            force_unlocks: 1,
            busy: 0,
            explicit: false,
            fenced: false,
            reentries: 0,
            extends: 1,
            racing_renewals: false,
            timeouts: 1,
            drops: 1,
            attempt_give_up: 0,
        },
    ]
}

const RESTART: &str = "rw: two owners, a restart, BUSY and a lost reply";
const FORCE_UNLOCK: &str = "rw: two owners, waiting writers, a force-unlock";
const FENCED_REENTRY: &str = "rw: fenced writes, re-entry through guards, extend, a lost reply";
const EXPLICIT: &str =
    "rw: one explicit owner on two clients and a third, fenced, waiting writers, a lost reply";
const RACING: &str = "rw: renewals race their owner's own calls";
const LATE: &str = "rw: two owners, late requests: timeouts, a dropped acquire, renewal";
const LATE_WIPE: &str = "rw: two owners, late requests, a restart and BUSY";
const LATE_FORCE: &str =
    "rw: two owners, late requests, attempts that give up at once, a force-unlock, extend";

/// The milestones each default configuration must reach at the default bound: the first
/// two configurations the first six milestones; the restart and force-unlock ones those
/// their steps make possible.
pub fn must_reach(name: &str) -> Vec<&'static str> {
    match name {
        RESTART => vec![
            "a write granted",
            "a restart emptied the keyspace while a write was believed",
            "a call refused as BUSY ran when re-sent",
            "a holder was told its wiped hold is lost",
            "a wiped holder and a new one both believed",
        ],
        FORCE_UNLOCK => vec![
            "two owners reading at once",
            "a force-unlock while a reader held",
            "a holder was told its wiped hold is lost",
            "a wiped holder and a new one both believed",
        ],
        FENCED_REENTRY => vec![
            "a write granted",
            "a fenced write got a higher token",
            "a re-entered write kept its token",
            "a read re-entered through its guard",
            "a read taken through a write guard (downgrade)",
            "an extend lengthened a hold",
            "an extend's reply was lost",
            "an extend lengthened a re-entered hold",
        ],
        EXPLICIT => vec![
            "a write granted",
            "a fenced write got a higher token",
            "an upgrade was refused",
            "two handles of one owner held together",
        ],
        RACING => vec![
            "a write granted",
            "a renewal kept a hold past its first lease",
            "a renewal ran while the owner's attempt was in flight",
        ],
        // A timed-out copy is re-sent: the re-sent copy may find what the stray took.
        LATE => [
            vec![
                "a write granted",
                "a retried acquire found its hold",
                "a retried release",
            ],
            STRAY_MILESTONES.to_vec(),
        ]
        .concat(),
        LATE_WIPE => vec![
            "a restart dropped a stray",
            "a stray ran after a restart",
            "a stray copy of a call refused as BUSY ran",
            "a call refused as BUSY ran when re-sent",
            "a holder was told its wiped hold is lost",
            "a stray acquire ran after its client gave up",
        ],
        LATE_FORCE => vec![
            "an extend lengthened a hold",
            "an extend found its hold gone",
            "a stray extend ran",
            "an attempt that gave up gave back",
            "a stray sent before a force-unlock ran after it",
            "a force-unlock while a reader held",
            "a holder was told its wiped hold is lost",
            "a wiped holder and a new one both believed",
            "a stray acquire ran after its client gave up",
        ],
        _ => MILESTONES[..6].to_vec(),
    }
}
