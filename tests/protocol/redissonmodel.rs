//! The protocol model of the lock kept in Redisson's RLock layout
//! (`LockClient::redisson_lock`): clients take the lock with waiting attempts and single
//! attempts (`try_acquire`), re-enter (`RedissonGuard::reenter`: a second hold of the same
//! owner), give holds back, renew them (`lua/redisson_renew.lua`, as the watchdog does),
//! cancel attempts and lose replies, while the clock moves past leases, Redis answers
//! `BUSY`/`LOADING`, restarts losing all data, and a Java service's Redisson force-unlocks
//! the lock (`RLock.forceUnlock`: `DEL` of the hash and the unlock message, the script
//! [`FORCE_UNLOCK`] below, which stands for the Java side). Every call is built and every
//! reply read by the library's own `protocol::redisson` (`acquire_call`,
//! `decode_acquire`, `release_call`, `renew_call`, `owner_of`), `resend::Resend` /
//! `given_back`, `renew::decode_renew`, `hold::HoldState`, `release::told` and
//! `wait::Wait` (with `WaitPolicy::redisson`: whether an attempt that ends without a grant
//! gives back); every call runs the real `lua/redisson_*.lua` in the embedded Lua against
//! the keyspace model. The one checker (`tests/protocol/checker.rs`) explores it
//! breadth-first and checks the properties in every state.
//!
//! Owners: a client of a default handle takes a fresh owner per acquisition
//! (`<client>:<n>`, as `Calls::next_owner`), and its guards re-enter with their own owner;
//! a client of a `with_owner` handle uses its one explicit owner for every acquisition, and
//! one configuration gives two clients the same one, so that holds re-enter across handles.
//! A hold's id is `<owner>\x01<request id>` (`rwlock::hold_id`); it is one count of its
//! owner's field in the hash, and the request id names its record
//! (`<prefix>_redisson_acquire:{n}:<request id>`), which makes a re-sent acquire count once
//! and a re-sent give-back give back once.
//!
//! **The layout's weaker guarantee, by design** (the doc of `RedissonLock` says so): two
//! holds of the same owner share one field and cannot be told apart. A hold whose count
//! went away without its own give-back (the hash expired, a restart or a force-unlock took
//! it) and whose owner took the lock again has its give-back take the new hold's count,
//! and a renewal of it reports the owner's field, not the hold. So the model does not
//! assert a hold's identity across a same-owner loss and re-take: a give-back that takes a
//! count of its owner although its own count was lost (a *stale give-back*) is allowed
//! when the script could not know better (a guard's give-back whose record says granted,
//! or whose record a restart took; an abandoned acquire's give-back only when its record
//! says granted), and the owner's holds then counted are *doomed* (one of them lost its
//! count, nobody can say which). Every other count is held to exactly once.
//!
//! What this model found (fixed): the doc of `RedissonLock` says a default handle (a fresh
//! owner per acquisition) cannot meet that case, but `RedissonGuard::reenter` of a guard
//! whose hold a restart or a force-unlock took (its guard not told yet) made a fresh count
//! of the same owner (`redisson_acquire.lua` granted on a missing hash as on a re-entry),
//! and the first guard's release then took it and was told "released"; the re-entered
//! guard believed a hold Redis no longer had. A re-entry now joins (`acquire_call`:
//! granted only while the owner's field exists), and a stale give-back of a fresh owner is
//! a violation of "exactly once".
//!
//! Not modelled: fixed leases (`with_lease`), `Guard::extend`, `detach`, a Redisson peer's
//! own `lock`/`unlock` (only its force-unlock), the cluster's sharded channel, and a copy
//! that arrives after its record expired (above).
//!
//! Assumptions (as the fair lock's model): one lock, one Redis; a request runs when it is
//! sent, but for late requests (below); a request whose reply was lost is re-sent as it
//! was (the library's `Resend`, which never gives up within the model's clock: the faults
//! run out first), and a copy given up on never runs after the next call. A `BUSY`/`LOADING`
//! reply (one step makes Redis refuse the next call sent) means the call did not run: the
//! `Resend` sleeps and sends it again, a renewal waits for the next tick. A restart takes at
//! least 1 ms, loses every key and every reply on its way, and drops every connection. A
//! force-unlock runs at once, between two calls; replies and strays on their way stay.
//! Every lease is the watchdog's ([`LEASE`]). The records live as `src/redisson.rs` sizes
//! them ([`ACQUIRE_RECORD_MS`], [`RELEASE_RECORD_MS`]); the model's clock never runs that
//! far (asserted at the start), so every copy meets its record: a copy that arrives after
//! its record expired is outside the library's assumptions (it sizes the records to
//! outlive every copy it re-sends) and is not modelled. Wake-ups are checked as published:
//! nobody listens, and a waiter asks again whenever the model chooses (which covers every
//! moment a wake-up or a pttl could make it ask).
//!
//! Late requests (configurations with `timeouts` or `drops`, as the fair lock's): a call
//! sent may get no reply within the response timeout (`TimeOut`: the next call sent,
//! whoever sends it; `Failure::TimedOut`), and a caller may drop an acquire while an
//! attempt is in flight (`Drop`). The copy not yet run is a *stray*: it runs later
//! (`ExecuteStray`), possibly after the clock moved, or never (`DropStray`), but before
//! anything its client sends after it (one connection keeps its requests in order; a call
//! sent behind a stray waits for it: `Run`). A timed-out attempt or give-back is re-sent by
//! its `Resend`, a timed-out renewal is not (the next tick renews). A dropped acquire gives
//! back (`release_call` with `abandoned`, on the same connection, so after the stray)
//! exactly when the core's `Wait::give_back_if_dropped` says so. A restart drops the
//! strays; a force-unlock leaves them, so one sent before it may run after it.
//!
//! The oracle (never the library's reading of a reply): each hold's [`Fate`] as the model
//! saw the counts change when its calls ran: counted (its count is in its owner's field),
//! lost (the count went with the hash: expired, restarted, force-unlocked) or given back
//! (by a give-back of its own), and whether its record still says so (a restart takes the
//! records, a force-unlock does not). A hold taken out of Redis behind its holders' backs
//! (a restart, a force-unlock, a stale give-back) is *doomed*, as in the fair lock's model:
//! a belief in it is left out of "never two holders" and "belief is true" and held instead
//! to "losses are told"; a fresh count under its id (a re-sent acquire that ran after a
//! restart) makes it a valid belief again.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use redis_locks::LostReason;
use redis_locks_protocol::attempted::Attempted;
use redis_locks_protocol::hold::HoldState;
use redis_locks_protocol::redisson::{
    RedissonKeys, acquire_call, decode_acquire, owner_of, release_call, renew_call,
};
use redis_locks_protocol::release::{Found, Told, told};
use redis_locks_protocol::renew::{RenewItem, Renewed, decode_renew};
use redis_locks_protocol::resend::{GivenBack, Resend, given_back};
use redis_locks_protocol::rwlock::hold_id;
use redis_locks_protocol::wait::{Tried, Wait, WaitEnd, WaitPolicy, WaitStep, WaitTiming};
use redis_locks_protocol::{Call, Env, Failure, Machine, Millis, Next, Reply, RequestIds};

use crate::checker::{Model, Stepped, wait_at_attempt};
use crate::keyspace::{Keyspace, parse_i64};
use crate::lua::ScriptRunner;

pub use crate::lua::Scripts;

/// The lease of every hold (the watchdog's), in ms.
pub const LEASE: Millis = 100;
/// How far the clock moves in one step: one step leaves a hold 40 ms, two end it.
pub const ADVANCE: Millis = 60;
/// The client's response timeout, from which `src/redisson.rs` sizes the records.
pub const RESPONSE: Millis = 100;
/// How long an acquire's record lives: `src/redisson.rs`'s `attempt_call` (four response
/// timeouts, `RECORD_RESPONSES`; `acquire_call` makes it at least the lease).
pub const ACQUIRE_RECORD_MS: Millis = redis_locks_protocol::redisson::acquire_record_ms(RESPONSE);
/// How long a record lives once released: `src/redisson.rs`'s `give_back_call` (the
/// lease, at least the watchdog's, and a response timeout).
pub const RELEASE_RECORD_MS: Millis =
    redis_locks_protocol::redisson::release_record_ms(LEASE, LEASE, RESPONSE);
/// The model's clock at the start (Redis's TIME answers from it).
const START: Millis = 1_000_000;
/// How long an attempt or a give-back keeps re-sending (the model's faults run out first).
const GIVE_UP_AFTER: Millis = 10 * LEASE;
/// The waiting loop's timing (only its give-back decisions are asked).
const TIMING: WaitTiming = WaitTiming {
    tolerance: GIVE_UP_AFTER,
    response: RESPONSE,
};
/// The bound (steps per run) of a release build: `tests/redisson_check.rs` runs it and
/// `tests/redisson_teeth.rs` must find every planted defect within it.
pub const DEFAULT_DEPTH: usize = 12;

/// Redisson's own force-unlock (`RedissonLock.forceUnlockAsync`, 3.24 to 4.x), as a Java
/// service sends it: KEYS = the lock hash and its channel, ARGV = the unlock message (`0`)
/// and the publish command.
pub const FORCE_UNLOCK: &str = "\
if (redis.call('del', KEYS[1]) == 1) then \
redis.call(ARGV[2], KEYS[2], ARGV[1]); \
return 1 \
else \
return 0 \
end";

/// The properties, checked in every state (and each run's effects):
/// 1. Redis never has two owners' fields at once, and no two owners' guards both believe.
/// 2. A believed hold is counted in Redis (its owner's field) and the hash lasts at least
///    until the believed deadline; a renewal never reports a live field gone.
/// 3. Exactly once: an acquire's copies count it once, a give-back's copies give back one
///    count, and only one its hold had (but the stale give-back of the header); every
///    owner's field equals the holds the oracle counts for it.
/// 4. What `given_back` and a give-back's reply report is what its copies did; nothing but
///    a give-back changes an owner's count or ends the hash, and nothing shortens its
///    expiry.
/// 5. A holder whose hold is gone is told: a renewal never reports a gone field current, a
///    release is told "released" (`release::told`) only if a copy gave a count back, and
///    no guard believes past its deadline.
/// 6. A call that ends the hash publishes the unlock message (`0`) once on Redisson's
///    channel; nothing else publishes.
/// 7. With nothing in flight (a stray is not) every counted hold is a guard's; the hash
///    has a TTL within a lease, each record one within its lifetime, and nothing else is
///    written.
///
/// 1 and 2 leave out the doomed beliefs (see the header).
pub const PROPERTIES: [&str; 7] = [
    "never two holders",
    "belief is true",
    "exactly once",
    "release is true",
    "losses are told",
    "waiters are woken",
    "no orphans, no garbage",
];

/// What runs reach (each configuration names those it must reach, else it is vacuous).
pub const MILESTONES: [&str; 27] = [
    "an owner re-entered",
    "a re-entered hold was given back, another kept",
    "a waiter was granted after a refusal",
    "a try_acquire was refused",
    "a waiter gave up",
    "a cancelled grant was given back",
    "a final release woke the waiters",
    "a retried acquire found its hold",
    "a re-sent give-back was answered by its record",
    "a renewal kept a hold past its first lease",
    "a hold expired in Redis",
    "a restart emptied the keyspace while a hold was believed",
    "a force-unlock took a believed hold",
    "a call refused as BUSY ran when re-sent",
    "a holder was told its wiped hold is lost",
    "a wiped holder and a new one both believed",
    "an owner re-entered across handles",
    "a stale give-back took a count of its owner's later hold",
    "a stray acquire ran after its client gave up",
    "a stray acquire took the lock after its client gave up",
    "a stray acquire ran before its re-sent copy",
    "a stray release copy ran",
    "a stray renewal ran",
    "a restart dropped a stray",
    "a stray ran after a restart",
    "a stray copy of a call refused as BUSY ran",
    "a stray sent before a force-unlock ran after it",
];

/// The milestones of late requests (out of reach without `timeouts` and `drops`).
pub const STRAY_MILESTONES: [&str; 5] = [
    MILESTONES[18],
    MILESTONES[19],
    MILESTONES[20],
    MILESTONES[21],
    MILESTONES[22],
];

/// The parties and bounds of one exploration.
#[derive(Clone, Debug)]
pub struct Config {
    pub name: &'static str,
    /// Per client: its handle's explicit owner (`with_owner`; one named twice: two clients
    /// share it), or `None`: a fresh owner per acquisition.
    pub owners: Vec<Option<&'static str>>,
    /// New acquisitions, re-entries (`RedissonGuard::reenter`), asks again, clock
    /// advances, lost replies and renewals, in all.
    pub acquires: u8,
    pub reenters: u8,
    pub asks: u8,
    pub advances: u8,
    pub faults: u8,
    pub renewals: u8,
    /// Restarts that lose all data, Redisson force-unlocks and `BUSY`/`LOADING` replies.
    pub restarts: u8,
    pub force_unlocks: u8,
    pub busy: u8,
    /// Late requests (see the header): calls that get no reply within the response
    /// timeout, and acquires their callers drop while an attempt is in flight.
    pub timeouts: u8,
    pub drops: u8,
    /// The milestones it must reach at the default bound.
    pub required: Vec<&'static str>,
}

pub fn keys() -> RedissonKeys {
    RedissonKeys::new("p", false, "n")
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
    fn next_id(&mut self) -> Arc<str> {
        "".into()
    }
}

/// One acquisition: the same call on every attempt (its request id is its idempotency
/// key), as `held::SetAttempts` makes it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Request {
    /// `<owner>\x01<request id>`.
    pub hold: Arc<str>,
    pub owner: Arc<str>,
    /// It waits (`acquire`); `false`: a single attempt (`try_acquire`, `reenter`).
    pub waits: bool,
    /// A re-entry through a guard (`RedissonGuard::reenter`): granted only while the
    /// owner's field exists.
    pub joins: bool,
    /// An attempt was refused before: a waiter asking again.
    pub refused: bool,
}

impl Request {
    /// `RedissonLock::attempt_call`.
    fn call(&self, keys: &RedissonKeys) -> Call {
        acquire_call(
            keys,
            &self.owner,
            &self.hold,
            LEASE,
            ACQUIRE_RECORD_MS,
            self.joins,
        )
    }
}

/// A call in flight. Attempts and give-backs are re-sent by the library's own [`Resend`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Acquire {
        request: Request,
        resend: Resend,
    },
    /// `leaving`: the give-back of an acquire that ended without a grant (`abandoned`),
    /// else a guard's release.
    Release {
        hold: Arc<str>,
        leaving: bool,
        resend: Resend,
        /// A guard's release: the loss its client had noticed when it started (`None`
        /// inside: none).
        noticed: Option<Option<LostReason>>,
    },
    Renew {
        items: Vec<RenewItem>,
        order: Vec<usize>,
        sent_at: Millis,
    },
}

impl Op {
    fn names(&self, hold: &Arc<str>) -> bool {
        match self {
            Op::Acquire { request, .. } => request.hold == *hold,
            Op::Release { hold: h, .. } => h == hold,
            Op::Renew { items, .. } => items.iter().any(|i| i.hold == *hold),
        }
    }

    fn show(&self) -> String {
        match self {
            Op::Acquire { request, .. } => {
                let how = if request.waits { "acquire" } else { "try" };
                format!("{how} {}", show(request.hold.as_bytes()))
            }
            Op::Release { hold, leaving, .. } => {
                let how = if *leaving { "abandon" } else { "release" };
                format!("{how} {}", show(hold.as_bytes()))
            }
            Op::Renew { items, .. } => format!("renew {} holds", items.len()),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InFlight {
    pub op: Op,
    /// The last run's reply; `None` while the machine sleeps before a re-send.
    pub reply: Option<Reply>,
    pub retried: bool,
    /// The last run answered "granted" without counting (an earlier copy counted it).
    pub existed: bool,
    /// The last run / some run of this give-back gave a count back.
    pub removed_now: bool,
    pub removed: bool,
    /// For each renewal item, whether its owner's field was there when the renewal ran.
    pub live: Vec<bool>,
    /// A copy was refused with `BUSY`/`LOADING` and re-sent since.
    pub busied: bool,
    /// A copy sent behind the client's strays, not yet run.
    pub queued: Option<Call>,
}

/// A late request: a copy its client heard nothing of within the response timeout, still
/// on the client's one connection.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Stray {
    pub call: Call,
    pub op: Op,
    /// Its acquire ended without it (the caller dropped it).
    pub given_up: bool,
    /// A force-unlock ran while it waited.
    pub forced: bool,
}

/// What the oracle knows of one hold (see the header).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fate {
    /// Its count is in its owner's field; its record says granted.
    Counted,
    /// Its count went away without a give-back of its own; `record`: its record still
    /// says granted (not after a restart).
    Lost { record: bool },
    /// A give-back of its own gave a count back; `record`: its record still says released.
    GivenBack { record: bool },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// The handle's explicit owner, or `None`: a fresh owner per acquisition.
    pub owner: Option<Arc<str>>,
    pub ids: RequestIds,
    /// The holds it believes in (its guards; lost ones until released).
    pub guards: Vec<HoldState>,
    pub flight: Option<InFlight>,
    /// A waiting acquisition between attempts.
    pub waiting: Option<Request>,
    /// Late requests on its connection, oldest first.
    pub strays: Vec<Stray>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub ks: Keyspace,
    pub now: Millis,
    pub clients: Vec<Client>,
    pub acquires: u8,
    pub reenters: u8,
    pub asks: u8,
    pub advances: u8,
    pub faults: u8,
    pub renewals: u8,
    pub restarts: u8,
    pub force_unlocks: u8,
    pub busy: u8,
    /// Redis answers the next call sent with `BUSY`/`LOADING` (it does not run it).
    pub busy_next: bool,
    pub timeouts: u8,
    pub drops: u8,
    /// The next call sent gets no reply within the response timeout: a stray.
    pub timeout_next: bool,
    /// The oracle, by hold id, for as long as something names the hold or it is counted.
    pub fates: BTreeMap<Arc<str>, Fate>,
    /// Holds taken out of Redis behind their holders' backs (see the header), for as long
    /// as something names them.
    pub doomed: BTreeSet<Arc<str>>,
}

/// One step. Every call is sent and run in the step that starts it (but behind strays).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A new acquisition: `true` waits (`acquire`), `false` is a `try_acquire`.
    Acquire(usize, bool),
    /// Client, guard: `RedissonGuard::reenter` (a single attempt with the guard's owner),
    /// for a guard that believes in its hold (it checks first that it is not lost).
    Reenter(usize, usize),
    /// A waiter attempts again (woken, or its pttl ran out).
    Ask(usize),
    /// A waiter's wait runs out, or an attempt is cancelled once it ran: what it may hold
    /// is given back when the core's `Wait` says so.
    GiveUp(usize),
    Release(usize, usize),
    Renew(usize),
    Deliver(usize),
    LoseReply(usize),
    /// A re-sending machine's pause is over.
    Resume(usize),
    Advance,
    /// Redis answers the next call, whoever sends it, with `BUSY`/`LOADING`.
    Busy,
    /// Redis restarts without persistence: every key and every reply on its way is lost,
    /// and at least 1 ms passes.
    Restart,
    /// A Java service's `RLock.forceUnlock` ([`FORCE_UNLOCK`]).
    ForceUnlock,
    /// The next call sent gets no reply within the response timeout: a stray.
    TimeOut,
    /// The caller drops an acquire whose attempt is in flight (`Acquiring::drop`).
    Drop(usize),
    /// A client's oldest stray runs (late, but before anything it sent after).
    ExecuteStray(usize),
    /// A client's oldest stray never runs.
    DropStray(usize),
    /// A copy sent behind strays runs, now that they ran or were lost.
    Run(usize),
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
    keys: RedissonKeys,
}

type Published = Vec<(Vec<u8>, Vec<u8>)>;

impl World {
    pub fn new(scripts: Scripts) -> Self {
        World {
            runner: ScriptRunner::new(),
            scripts,
            keys: keys(),
        }
    }

    /// Runs `call`: its reply and what it published.
    fn run(&self, call: &Call, ks: &mut Keyspace, now: Millis) -> (Reply, Published) {
        let keys: Vec<Vec<u8>> = call.keys.iter().map(|k| k.as_bytes().to_vec()).collect();
        let args: Vec<Vec<u8>> = call.args.iter().map(|a| a.as_bytes().to_vec()).collect();
        let source = self.scripts.source(call.script);
        let reply = self.runner.eval(source, &keys, &args, ks, now);
        (reply, std::mem::take(&mut ks.published))
    }

    /// The Java side's force-unlock: its reply and what it published.
    fn force_unlock(&self, ks: &mut Keyspace, now: Millis) -> (Reply, Published) {
        let keys = [&self.keys.hash, &self.keys.channel].map(|k| k.as_bytes().to_vec());
        let args = [b"0".to_vec(), b"PUBLISH".to_vec()];
        let reply = self.runner.eval(FORCE_UNLOCK, &keys, &args, ks, now);
        (reply, std::mem::take(&mut ks.published))
    }
}

/// The lock hash as one run saw it: each owner's count, and the hash's expiry (`None`: no
/// hash; `Some(None)`: no TTL).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub fields: BTreeMap<Vec<u8>, i64>,
    pub expiry: Option<Option<u64>>,
}

impl Snapshot {
    pub fn of(ks: &Keyspace, keys: &RedissonKeys, now: Millis) -> Snapshot {
        let key = keys.hash.as_bytes();
        let Some(hash) = ks.hash(key, now) else {
            return Snapshot::default();
        };
        let count = |v: &Vec<u8>| parse_i64(v).unwrap_or(i64::MIN);
        Snapshot {
            fields: hash.iter().map(|(f, v)| (f.clone(), count(v))).collect(),
            expiry: ks.pexpire_at(key, now),
        }
    }

    fn count(&self, owner: &[u8]) -> i64 {
        self.fields.get(owner).copied().unwrap_or(0)
    }

    fn exists(&self) -> bool {
        self.expiry.is_some()
    }
}

pub fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).replace('\u{1}', "/")
}

/// Model time as the traces show it (from the start).
pub fn t(at: Millis) -> i64 {
    at as i64 - START as i64
}

/// The owner of a hold id, as bytes of the hash field.
fn field(hold: &str) -> &[u8] {
    owner_of(hold).as_bytes()
}

/// What `redisson_acquire.lua`'s header calls a grant (`{1}`), read without the library.
fn says_granted(reply: &Reply) -> bool {
    matches!(reply, Reply::Array(items) if items.as_slice() == [Reply::Int(1)])
}

/// A renewal's reply against what Redis had when it ran (`live`, by item), the statuses in
/// `order`, as `decode_renew` reads them: "current" of a gone field leaves a loss untold,
/// "gone" of a live one is a false report.
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
            fx.fail("belief is true", err);
            return None;
        }
    };
    for (status, &i) in status.iter().zip(order) {
        if (*status == Renewed::Current) != live[i] {
            let message = format!(
                "renewal said {status:?} of {}",
                show(items[i].hold.as_bytes())
            );
            let property = match live[i] {
                false => "losses are told",
                true => "belief is true",
            };
            fx.fail(property, message);
        }
    }
    Some(status)
}

/// Whether the library's waiting loop gives back after the single attempt of an
/// acquisition (`try_acquire`, `reenter`) was refused: the core's `Wait` decides.
fn single_attempt_gives_back(now: Millis, within: Millis) -> bool {
    let policy = WaitPolicy::redisson(TIMING);
    let mut wait = wait_at_attempt(policy, now, Some(0), None).expect("the loop attempts");
    match wait.attempted(now, Tried::Busy { within }, false, 0) {
        WaitStep::Done(WaitEnd::TimedOut { give_back, .. }) => give_back,
        other => panic!("a refused single attempt that goes on: {other:?}"),
    }
}

/// Whether a waiter whose wait runs out between attempts gives back: the core's `Wait`,
/// through a refusal, then a refused attempt at its deadline.
fn waiter_gives_back(now: Millis) -> bool {
    let policy = WaitPolicy::redisson(TIMING);
    let mut wait = wait_at_attempt(policy, now, Some(1), Some(LEASE)).expect("the loop attempts");
    match wait.attempted(now + 1, Tried::Busy { within: LEASE }, false, 0) {
        WaitStep::Done(WaitEnd::TimedOut { give_back, .. }) => give_back,
        other => panic!("a waiter at its deadline that goes on: {other:?}"),
    }
}

/// The library's waiting loop of an acquisition dropped (or cancelled) with `request`'s
/// attempt in flight: only its give-back decision is asked.
fn dropped_wait(request: &Request, now: Millis) -> Wait {
    let limit = if request.waits { None } else { Some(0) };
    let refused = request.refused.then_some(LEASE);
    wait_at_attempt(WaitPolicy::redisson(TIMING), now, limit, refused)
        .expect("the waiting loop attempts")
}

/// What one run did (see [`InFlight`]'s fields of the same names).
struct Ran {
    reply: Reply,
    existed: bool,
    removed_now: bool,
    live: Vec<bool>,
}

impl State {
    pub fn initial(config: &Config) -> Self {
        // Every copy must meet its record (see the header).
        let horizon = Millis::from(config.advances) * ADVANCE + Millis::from(config.restarts);
        assert!(horizon < ACQUIRE_RECORD_MS.min(RELEASE_RECORD_MS));
        let client = |(i, owner): (usize, &Option<&str>)| Client {
            owner: owner.map(Arc::from),
            ids: RequestIds::new(format!("c{i}")),
            guards: Vec::new(),
            flight: None,
            waiting: None,
            strays: Vec::new(),
        };
        State {
            ks: Keyspace::default(),
            now: START,
            clients: config.owners.iter().enumerate().map(client).collect(),
            acquires: config.acquires,
            reenters: config.reenters,
            asks: config.asks,
            advances: config.advances,
            faults: config.faults,
            renewals: config.renewals,
            restarts: config.restarts,
            force_unlocks: config.force_unlocks,
            busy: config.busy,
            busy_next: false,
            timeouts: config.timeouts,
            drops: config.drops,
            timeout_next: false,
            fates: BTreeMap::new(),
            doomed: BTreeSet::new(),
        }
    }

    pub fn steps(&self) -> Vec<Step> {
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
            match (&client.flight, &client.waiting) {
                (Some(flight), _) if flight.queued.is_some() => {
                    waiting_to_run = true;
                    if !stray {
                        steps.push(Step::Run(c));
                    }
                }
                (Some(flight), _) => {
                    if flight.reply.is_none() {
                        steps.push(Step::Resume(c));
                    } else {
                        steps.push(Step::Deliver(c));
                        if self.faults > 0 {
                            steps.push(Step::LoseReply(c));
                        }
                        // Cancelled once it ran (before, it is the same as no attempt).
                        if matches!(flight.op, Op::Acquire { .. }) {
                            steps.push(Step::GiveUp(c));
                        }
                    }
                }
                (None, Some(_)) => {
                    if self.asks > 0 {
                        steps.push(Step::Ask(c));
                    }
                    steps.push(Step::GiveUp(c));
                }
                (None, None) => {
                    if self.acquires > 0 {
                        steps.push(Step::Acquire(c, true));
                        steps.push(Step::Acquire(c, false));
                    }
                    if self.reenters > 0 {
                        for (g, guard) in client.guards.iter().enumerate() {
                            // `reenter` checks first that its hold is not lost.
                            if guard.lost().is_none() && self.now < guard.deadline() {
                                steps.push(Step::Reenter(c, g));
                            }
                        }
                    }
                    steps.extend((0..client.guards.len()).map(|g| Step::Release(c, g)));
                    if self.renewals > 0 && client.guards.iter().any(|g| g.is_active()) {
                        steps.push(Step::Renew(c));
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
        if self.timeouts > 0 && !self.timeout_next {
            steps.push(Step::TimeOut);
        }
        // Only where they change more than the clock: a key to lose, or a reply.
        let keys_there = !self.ks.keys(self.now).is_empty();
        let replies =
            (self.clients.iter()).any(|c| c.flight.as_ref().is_some_and(|f| f.reply.is_some()));
        if self.restarts > 0 && (keys_there || replies) {
            steps.push(Step::Restart);
        }
        let hash = keys().hash;
        if self.force_unlocks > 0 && self.ks.hash(hash.as_bytes(), self.now).is_some() {
            steps.push(Step::ForceUnlock);
        }
        steps
    }

    pub fn apply(&mut self, step: &Step, world: &World) -> Effects {
        let mut fx = Effects::default();
        let keys = &world.keys;
        let now = self.now;
        let resend = |call: Call| Resend::new(call, now + GIVE_UP_AFTER);
        match *step {
            Step::Acquire(c, waits) => {
                self.acquires -= 1;
                let client = &mut self.clients[c];
                // A default handle's fresh owner (`<client>:<n>`), then the request id.
                let owner = match &client.owner {
                    Some(owner) => owner.clone(),
                    None => client.ids.next_id().replace('.', ":").into(),
                };
                let request = Request {
                    hold: hold_id(&owner, &client.ids.next_id()),
                    owner,
                    waits,
                    joins: false,
                    refused: false,
                };
                let resend = resend(request.call(keys));
                self.send(c, Op::Acquire { request, resend }, world, &mut fx);
            }
            Step::Reenter(c, g) => {
                self.reenters -= 1;
                let client = &mut self.clients[c];
                let owner: Arc<str> = owner_of(client.guards[g].hold()).into();
                let request = Request {
                    hold: hold_id(&owner, &client.ids.next_id()),
                    owner,
                    waits: false,
                    joins: true,
                    refused: false,
                };
                let resend = resend(request.call(keys));
                self.send(c, Op::Acquire { request, resend }, world, &mut fx);
            }
            Step::Ask(c) => {
                self.asks -= 1;
                let request = self.clients[c].waiting.take().expect("a waiter");
                let resend = resend(request.call(keys));
                self.send(c, Op::Acquire { request, resend }, world, &mut fx);
            }
            Step::GiveUp(c) => {
                let client = &mut self.clients[c];
                let (request, give_back) = match client.flight.take() {
                    // Cancelled in flight: the copy given up on never runs again.
                    Some(InFlight {
                        op: Op::Acquire { request, .. },
                        ..
                    }) => {
                        let give_back = dropped_wait(&request, now).give_back_if_dropped();
                        (request, give_back)
                    }
                    Some(other) => unreachable!("only an acquire is given up: {other:?}"),
                    None => {
                        fx.reach("a waiter gave up");
                        let request = client.waiting.take().expect("a waiter");
                        (request, waiter_gives_back(now))
                    }
                };
                if give_back {
                    self.abandon(c, request.hold, world, &mut fx);
                }
            }
            Step::Release(c, g) => {
                let guard = self.clients[c].guards.remove(g);
                let hold = guard.hold().clone();
                // `RedissonLock::give_back_call` of a guard's hold.
                let owner: Arc<str> = owner_of(&hold).into();
                let call = release_call(keys, &owner, &hold, false, RELEASE_RECORD_MS);
                let op = Op::Release {
                    hold,
                    leaving: false,
                    resend: resend(call),
                    noticed: Some(guard.lost()),
                };
                self.send(c, op, world, &mut fx);
            }
            Step::Renew(c) => {
                self.renewals -= 1;
                // The watchdog's `keyed_batches` for `HoldShape::RedissonField`.
                let active = self.clients[c].guards.iter().filter(|g| g.is_active());
                let items: Vec<RenewItem> = active
                    .map(|g| RenewItem::of(keys.hash.clone(), g))
                    .collect();
                let (_, order) = renew_call(LEASE, &items);
                let op = Op::Renew {
                    items,
                    order,
                    sent_at: now,
                };
                self.send(c, op, world, &mut fx);
            }
            Step::Deliver(c) => self.deliver(c, world, &mut fx),
            Step::LoseReply(c) => {
                self.faults -= 1;
                let client = &mut self.clients[c];
                let flight = client.flight.as_mut().expect("a call in flight");
                match &mut flight.op {
                    // The watchdog does not re-send a renewal: the next tick renews.
                    Op::Renew { .. } => client.flight = None,
                    Op::Acquire { resend, .. } | Op::Release { resend, .. } => {
                        match resend.on_failure(&mut ModelEnv(now), &mut (), Failure::Lost) {
                            Next::SleepUntil(_) => {
                                flight.reply = None;
                                flight.retried = true;
                            }
                            other => panic!("the re-send gave up within the model: {other:?}"),
                        }
                    }
                }
            }
            Step::Resume(c) => {
                let flight = self.clients[c].flight.as_mut().expect("a call in flight");
                let (Op::Acquire { resend, .. } | Op::Release { resend, .. }) = &mut flight.op
                else {
                    unreachable!("renewals are not re-sent")
                };
                match resend.resume(&mut ModelEnv(now), &mut ()) {
                    Next::Send(call) => self.transmit(c, &call, world, &mut fx),
                    other => panic!("a resumed re-send that does not send: {other:?}"),
                }
            }
            Step::Advance => {
                self.advances -= 1;
                self.advance_to(now + ADVANCE, keys, &mut fx);
            }
            Step::Busy => {
                self.busy -= 1;
                self.busy_next = true;
            }
            Step::Restart => {
                self.restarts -= 1;
                if self.believed().next().is_some() {
                    fx.reach("a restart emptied the keyspace while a hold was believed");
                }
                self.wipe(true);
                self.ks.flush_all();
                for client in &mut self.clients {
                    // Its connection dropped: a stray never runs, nor a copy behind one.
                    if !client.strays.is_empty() {
                        fx.reach("a restart dropped a stray");
                    }
                    client.strays.clear();
                    let on_the_wire = |f: &&mut InFlight| f.reply.is_some() || f.queued.is_some();
                    let Some(flight) = client.flight.as_mut().filter(on_the_wire) else {
                        continue;
                    };
                    flight.queued = None;
                    match &mut flight.op {
                        Op::Renew { .. } => client.flight = None,
                        Op::Acquire { resend, .. } | Op::Release { resend, .. } => {
                            match resend.on_failure(&mut ModelEnv(now), &mut (), Failure::Lost) {
                                Next::SleepUntil(_) => {
                                    flight.reply = None;
                                    flight.retried = true;
                                }
                                other => panic!("the re-send gave up within the model: {other:?}"),
                            }
                        }
                    }
                }
                // A restart takes at least a millisecond.
                self.advance_to(now + 1, keys, &mut fx);
            }
            Step::ForceUnlock => {
                self.force_unlocks -= 1;
                let counted = |h: &Arc<str>| self.fates.get(h) == Some(&Fate::Counted);
                if self.believed().any(|(_, g)| counted(g.hold())) {
                    fx.reach("a force-unlock took a believed hold");
                }
                self.wipe(false);
                for client in &mut self.clients {
                    client.strays.iter_mut().for_each(|s| s.forced = true);
                }
                let (reply, published) = world.force_unlock(&mut self.ks, now);
                // The Java side's script, not the library's: only its effect matters.
                assert_eq!(reply, Reply::Int(1), "the model's force-unlock");
                assert_eq!(published.len(), 1, "the model's force-unlock");
            }
            Step::TimeOut => {
                self.timeouts -= 1;
                self.timeout_next = true;
            }
            Step::Drop(c) => {
                self.drops -= 1;
                let client = &mut self.clients[c];
                let flight = client.flight.take().expect("an acquire in flight");
                // A copy on the wire stays there: a stray, which runs, if at all, before
                // the give-back (sent after it on the same connection).
                if let Some(call) = flight.queued {
                    client.strays.push(Stray {
                        call,
                        op: flight.op.clone(),
                        given_up: true,
                        forced: false,
                    });
                }
                client.strays.iter_mut().for_each(|s| s.given_up = true);
                let Op::Acquire { request, .. } = flight.op else {
                    unreachable!("only an acquire is dropped")
                };
                // The runtime's `Acquiring::drop`: the waiting loop, with this attempt in
                // flight, says whether to give back (`give_back_in_background`).
                if dropped_wait(&request, now).give_back_if_dropped() {
                    self.abandon(c, request.hold, world, &mut fx);
                }
            }
            Step::ExecuteStray(c) => self.execute_stray(c, world, &mut fx),
            Step::DropStray(c) => {
                self.clients[c].strays.remove(0);
            }
            Step::Run(c) => {
                let flight = self.clients[c].flight.as_mut().expect("a call in flight");
                let call = flight.queued.take().expect("a call sent behind strays");
                self.transmit(c, &call, world, &mut fx);
            }
        }
        self.forget();
        self.check(keys, &mut fx);
        fx
    }

    /// The give-back of an acquisition that ended without a grant
    /// (`held::give_back(hold_too = true, leaving = true)`: `release_call` with
    /// `abandoned`).
    fn abandon(&mut self, c: usize, hold: Arc<str>, world: &World, fx: &mut Effects) {
        let owner: Arc<str> = owner_of(&hold).into();
        let call = release_call(&world.keys, &owner, &hold, true, RELEASE_RECORD_MS);
        let op = Op::Release {
            hold,
            leaving: true,
            resend: Resend::new(call, self.now + GIVE_UP_AFTER),
            noticed: None,
        };
        self.send(c, op, world, fx);
    }

    fn execute_stray(&mut self, c: usize, world: &World, fx: &mut Effects) {
        let stray = self.clients[c].strays.remove(0);
        if stray.forced {
            fx.reach("a stray sent before a force-unlock ran after it");
        }
        // The operation the stray is a copy of had a copy refused as BUSY before.
        let busied = self.clients[c].flight.as_ref().is_some_and(|f| {
            f.busied
                && match (&f.op, &stray.op) {
                    (Op::Acquire { request: a, .. }, Op::Acquire { request: b, .. }) => {
                        a.hold == b.hold
                    }
                    (Op::Release { hold: a, .. }, Op::Release { hold: b, .. }) => a == b,
                    _ => false,
                }
        });
        if busied {
            fx.reach("a stray copy of a call refused as BUSY ran");
        }
        let counted_before = match &stray.op {
            Op::Acquire { request, .. } => self.fates.get(&request.hold) == Some(&Fate::Counted),
            _ => false,
        };
        let ran = self.execute(c, &stray.call, &stray.op, world, fx);
        let client = &mut self.clients[c];
        match (&stray.op, &mut client.flight) {
            (Op::Acquire { request, .. }, _) if stray.given_up => {
                fx.reach("a stray acquire ran after its client gave up");
                if !counted_before && self.fates.get(&request.hold) == Some(&Fate::Counted) {
                    fx.reach("a stray acquire took the lock after its client gave up");
                }
            }
            (
                Op::Acquire { .. },
                Some(InFlight {
                    op: Op::Acquire { .. },
                    ..
                }),
            ) => fx.reach("a stray acquire ran before its re-sent copy"),
            (Op::Acquire { .. }, _) => {}
            (Op::Release { hold, .. }, flight) => {
                fx.reach("a stray release copy ran");
                // What its give-back reports must count the copies that ran late.
                if let Some(InFlight {
                    op: Op::Release { hold: current, .. },
                    removed,
                    ..
                }) = flight
                    && current == hold
                {
                    *removed |= ran.removed_now;
                }
            }
            (Op::Renew { items, order, .. }, _) => {
                fx.reach("a stray renewal ran");
                // Nobody reads it, but the script must tell the truth all the same.
                check_renewal(items, order, &ran.reply, &ran.live, fx);
            }
        }
    }

    /// The guards that believe they hold: not told lost, deadline not reached.
    fn believed(&self) -> impl Iterator<Item = (usize, &HoldState)> {
        let now = self.now;
        (self.clients.iter().enumerate())
            .flat_map(|(c, client)| client.guards.iter().map(move |g| (c, g)))
            .filter(move |(_, g)| g.lost().is_none() && now < g.deadline())
    }

    /// Moves the clock to `to`: keys expire (a hash that expired took its counts along),
    /// and every guard's clock says whether its deadline passed.
    fn advance_to(&mut self, to: Millis, keys: &RedissonKeys, fx: &mut Effects) {
        self.now = to;
        self.ks.expire(to);
        if self.ks.hash(keys.hash.as_bytes(), to).is_none() {
            for fate in self.fates.values_mut() {
                if *fate == Fate::Counted {
                    *fate = Fate::Lost { record: true };
                    fx.reach("a hold expired in Redis");
                }
            }
        }
        for (c, client) in self.clients.iter_mut().enumerate() {
            for guard in &mut client.guards {
                guard.on_clock(to);
                if guard.is_active() && to >= guard.deadline() {
                    let message = format!(
                        "client {c} still believes in {} at t={}, past its deadline t={}",
                        show(guard.hold().as_bytes()),
                        t(to),
                        t(guard.deadline())
                    );
                    fx.fail("losses are told", message);
                }
            }
        }
    }

    /// Redis is about to lose the hash behind everyone's back: the counted holds are
    /// doomed; a restart (`records`) takes the records too.
    fn wipe(&mut self, records: bool) {
        for (hold, fate) in &mut self.fates {
            if *fate == Fate::Counted {
                self.doomed.insert(hold.clone());
                *fate = Fate::Lost { record: true };
            }
            if records {
                *fate = match *fate {
                    Fate::Lost { .. } => Fate::Lost { record: false },
                    Fate::GivenBack { .. } => Fate::GivenBack { record: false },
                    Fate::Counted => unreachable!("taken out above"),
                };
            }
        }
    }

    /// Forgets the holds nothing names any more (they would only tell states apart): no
    /// call can run for them, so their fates cannot matter, but a counted one's.
    fn forget(&mut self) {
        if self.fates.is_empty() && self.doomed.is_empty() {
            return;
        }
        let clients = &self.clients;
        let named = |hold: &Arc<str>| {
            clients.iter().any(|c| {
                c.guards.iter().any(|g| g.hold() == hold)
                    || c.waiting.as_ref().is_some_and(|w| w.hold == *hold)
                    || (c.flight.iter().map(|f| &f.op))
                        .chain(c.strays.iter().map(|s| &s.op))
                        .any(|op| op.names(hold))
            })
        };
        self.fates
            .retain(|hold, fate| *fate == Fate::Counted || named(hold));
        self.doomed.retain(named);
    }

    /// Sends `call` for client `c`'s flight: Redis runs it, or it waits behind strays,
    /// times out (a stray), or is refused with `BUSY`/`LOADING`.
    fn transmit(&mut self, c: usize, call: &Call, world: &World, fx: &mut Effects) {
        let now = self.now;
        let client = &mut self.clients[c];
        let flight = client.flight.as_mut().expect("a call in flight");
        if !client.strays.is_empty() {
            flight.queued = Some(call.clone());
            return;
        }
        let failure = if self.timeout_next {
            self.timeout_next = false;
            client.strays.push(Stray {
                call: call.clone(),
                op: flight.op.clone(),
                given_up: false,
                forced: false,
            });
            Failure::TimedOut
        } else if self.busy_next {
            self.busy_next = false;
            Failure::Transient("BUSY Redis is busy running a script".into())
        } else {
            return self.run(c, call, world, fx);
        };
        let busy = matches!(failure, Failure::Transient(_));
        match &mut flight.op {
            // The watchdog does not re-send a failed renewal: its next tick renews.
            Op::Renew { .. } => client.flight = None,
            Op::Acquire { resend, .. } | Op::Release { resend, .. } => {
                match resend.on_failure(&mut ModelEnv(now), &mut (), failure) {
                    Next::SleepUntil(_) => {
                        flight.reply = None;
                        flight.retried |= !busy;
                        flight.busied |= busy;
                    }
                    other => panic!("the re-send gave up within the model: {other:?}"),
                }
            }
        }
    }

    /// Starts `op` (its machine's first call, or the renewal) and runs it.
    fn send(&mut self, c: usize, mut op: Op, world: &World, fx: &mut Effects) {
        let call = match &mut op {
            Op::Acquire { resend, .. } | Op::Release { resend, .. } => {
                match resend.start(&mut ModelEnv(self.now), &mut ()) {
                    Next::Send(call) => call,
                    other => panic!("a re-send that does not send first: {other:?}"),
                }
            }
            Op::Renew { items, .. } => renew_call(LEASE, items).0,
        };
        self.clients[c].flight = Some(InFlight {
            op,
            reply: None,
            retried: false,
            existed: false,
            removed_now: false,
            removed: false,
            live: Vec::new(),
            busied: false,
            queued: None,
        });
        self.transmit(c, &call, world, fx);
    }

    fn run(&mut self, c: usize, call: &Call, world: &World, fx: &mut Effects) {
        let mut flight = self.clients[c].flight.take().expect("a call in flight");
        let ran = self.execute(c, call, &flight.op, world, fx);
        flight.existed = ran.existed;
        flight.removed_now = ran.removed_now;
        flight.removed |= ran.removed_now;
        flight.live = ran.live;
        flight.reply = Some(ran.reply);
        self.clients[c].flight = Some(flight);
    }

    /// Runs `call` of `op` (a flight's, or a stray's: nobody reads a stray's reply, but its
    /// run gets every check a run on time gets), and updates the oracle.
    fn execute(&mut self, c: usize, call: &Call, op: &Op, world: &World, fx: &mut Effects) -> Ran {
        let keys = &world.keys;
        let now = self.now;
        let before = Snapshot::of(&self.ks, keys, now);
        let (reply, published) = world.run(call, &mut self.ks, now);
        let after = Snapshot::of(&self.ks, keys, now);
        let mut ran = Ran {
            reply: reply.clone(),
            existed: false,
            removed_now: false,
            live: Vec::new(),
        };
        let own: Option<&[u8]> = match op {
            Op::Acquire { request, .. } => Some(request.owner.as_bytes()),
            Op::Release { hold, .. } => Some(field(hold)),
            Op::Renew { .. } => None,
        };
        // Nothing but a call of the owner's changes its count (a renewal changes none).
        let owners: BTreeSet<&Vec<u8>> = before.fields.keys().chain(after.fields.keys()).collect();
        for owner in owners {
            if Some(owner.as_slice()) != own && before.count(owner) != after.count(owner) {
                let (was, is) = (before.count(owner), after.count(owner));
                let message = format!(
                    "{:?} changed {}'s count from {was} to {is}",
                    call.script,
                    show(owner)
                );
                fx.fail("release is true", message);
            }
        }
        // Nothing shortens the hash's expiry but its end.
        if let (Some(Some(was)), Some(Some(is))) = (before.expiry, after.expiry)
            && is < was
        {
            let message = format!(
                "{:?} moved the hash's expiry from t={} to t={}",
                call.script,
                t(was),
                t(is)
            );
            fx.fail("release is true", message);
        }
        // Redisson's waiters wake on the unlock message, sent when the hash ends.
        let ended = before.exists() && !after.exists();
        let expected: Published = match ended {
            true => vec![(keys.channel.as_bytes().to_vec(), b"0".to_vec())],
            false => Vec::new(),
        };
        if published != expected {
            let published: Vec<String> = (published.iter())
                .map(|(ch, m)| format!("{} {}", show(ch), show(m)))
                .collect();
            let what = if ended { "ended" } else { "left" };
            let message = format!(
                "{:?} {what} the hash and published {published:?}",
                call.script
            );
            fx.fail("waiters are woken", message);
        }
        match op {
            Op::Acquire { request, .. } => {
                ran.existed = self.on_acquire_ran(c, request, &reply, &before, &after, fx);
            }
            Op::Release { hold, leaving, .. } => {
                ran.removed_now = self.on_give_back_ran(c, hold, *leaving, &before, &after, fx);
                if ran.removed_now && *leaving {
                    fx.reach("a cancelled grant was given back");
                }
                if ran.removed_now && ended {
                    fx.reach("a final release woke the waiters");
                }
                if ran.removed_now && !*leaving && after.count(field(hold)) > 0 {
                    fx.reach("a re-entered hold was given back, another kept");
                }
                if !ran.removed_now && reply == Reply::Int(1) {
                    fx.reach("a re-sent give-back was answered by its record");
                }
            }
            Op::Renew { items, .. } => {
                let live = items.iter().map(|i| before.count(field(&i.hold)) > 0);
                ran.live = live.collect();
            }
        }
        ran
    }

    /// The oracle's reading of an acquire's run: whether it answered "granted" from an
    /// earlier copy's count.
    fn on_acquire_ran(
        &mut self,
        c: usize,
        request: &Request,
        reply: &Reply,
        before: &Snapshot,
        after: &Snapshot,
        fx: &mut Effects,
    ) -> bool {
        let owner = request.owner.as_bytes();
        let name = show(request.hold.as_bytes());
        let fate = self.fates.get(&request.hold).copied();
        let granted = says_granted(reply);
        match after.count(owner) - before.count(owner) {
            1 => {
                if let Some(other) = before.fields.keys().find(|f| f.as_slice() != owner) {
                    let message = format!("{name} granted over {}'s hold", show(other));
                    fx.fail("never two holders", message);
                }
                // A fresh count: only where the record cannot say it was counted.
                let fresh = matches!(
                    fate,
                    None | Some(Fate::Lost { record: false } | Fate::GivenBack { record: false })
                );
                if !fresh {
                    let message = format!("a copy of acquire {name} counted it again ({fate:?})");
                    fx.fail("exactly once", message);
                }
                if !granted {
                    let message = format!("acquire {name} counted its hold but answered {reply:?}");
                    fx.fail("no orphans, no garbage", message);
                }
                if before.count(owner) > 0 {
                    fx.reach("an owner re-entered");
                    // Another client's guard has a count in the same field.
                    let counted = |g: &HoldState| {
                        field(g.hold()) == owner && self.fates.get(g.hold()) == Some(&Fate::Counted)
                    };
                    let others = (self.clients.iter().enumerate()).filter(|(o, _)| *o != c);
                    if others.flat_map(|(_, cl)| &cl.guards).any(counted) {
                        fx.reach("an owner re-entered across handles");
                    }
                }
                self.fates.insert(request.hold.clone(), Fate::Counted);
                // A fresh grant: whatever a wipe took of this id before is history.
                self.doomed.remove(&request.hold);
                false
            }
            0 if granted => {
                // Answered from its record: an earlier copy's count, which the record keeps
                // (a force-unlock or the hash's expiry took the count, not the record).
                if !matches!(fate, Some(Fate::Counted | Fate::Lost { record: true })) {
                    let message =
                        format!("acquire {name} answered granted, never counted ({fate:?})");
                    fx.fail("belief is true", message);
                }
                true
            }
            0 => false,
            delta => {
                let message = format!("acquire {name} changed its owner's count by {delta}");
                fx.fail("exactly once", message);
                false
            }
        }
    }

    /// The oracle's reading of a give-back's run: whether it gave a count back.
    fn on_give_back_ran(
        &mut self,
        c: usize,
        hold: &Arc<str>,
        leaving: bool,
        before: &Snapshot,
        after: &Snapshot,
        fx: &mut Effects,
    ) -> bool {
        let owner = field(hold);
        let name = show(hold.as_bytes());
        let fate = self.fates.get(hold).copied();
        match after.count(owner) - before.count(owner) {
            0 => false,
            -1 => {
                // A stale give-back (see the header): its own count went away, and the
                // script cannot tell its owner's later count from it.
                let stale = match fate {
                    Some(Fate::Counted) => false,
                    Some(Fate::Lost { record }) if record || !leaving => true,
                    Some(Fate::GivenBack { record: false }) if !leaving => true,
                    _ => {
                        let message =
                            format!("give-back of {name} took a count it did not have ({fate:?})");
                        fx.fail("exactly once", message);
                        false
                    }
                };
                if stale {
                    fx.reach("a stale give-back took a count of its owner's later hold");
                    if self.clients[c].owner.is_none() {
                        // A default handle's owner is fresh per acquisition, and its guards
                        // re-enter only while its field exists: no later hold of it can
                        // exist for a stale give-back to take (`RedissonLock`'s doc).
                        fx.fail(
                            "exactly once",
                            format!("a stale give-back of {name} took a count of its fresh owner"),
                        );
                    }
                    let victims: Vec<Arc<str>> = (self.fates.iter())
                        .filter(|(h, f)| field(h) == owner && **f == Fate::Counted)
                        .map(|(h, _)| h.clone())
                        .collect();
                    // One of them lost its count, nobody can say which: all are doomed.
                    self.doomed.extend(victims.iter().cloned());
                    if let Some(victim) = victims.first() {
                        self.fates
                            .insert(victim.clone(), Fate::Lost { record: true });
                    }
                }
                self.fates
                    .insert(hold.clone(), Fate::GivenBack { record: true });
                true
            }
            delta => {
                let message = format!("give-back of {name} changed its owner's count by {delta}");
                fx.fail("exactly once", message);
                delta < 0
            }
        }
    }

    fn deliver(&mut self, c: usize, world: &World, fx: &mut Effects) {
        let now = self.now;
        let flight = self.clients[c].flight.take().expect("a call in flight");
        let reply = flight.reply.clone().expect("delivered after it ran");
        if flight.busied {
            fx.reach("a call refused as BUSY ran when re-sent");
        }
        let resent = |mut resend: Resend| match resend.on_reply(&mut ModelEnv(now), &mut (), &reply)
        {
            Next::Done(Ok(resent)) => resent,
            other => panic!("a re-send that got a reply: {other:?}"),
        };
        match flight.op {
            Op::Acquire { request, resend } => match decode_acquire(&reply) {
                Ok(Attempted::Granted(_)) => {
                    if flight.retried && flight.existed {
                        fx.reach("a retried acquire found its hold");
                    }
                    if request.refused {
                        fx.reach("a waiter was granted after a refusal");
                    }
                    // Confirmed from the send time the library's machine says.
                    let sent_at = resent(resend).first_sent_at;
                    let guard = HoldState::new(request.hold, sent_at, LEASE, true);
                    self.clients[c].guards.push(guard);
                }
                Ok(Attempted::Wait(_)) if request.waits => {
                    let refused = true;
                    self.clients[c].waiting = Some(Request { refused, ..request });
                }
                Ok(Attempted::Wait(within)) => {
                    fx.reach("a try_acquire was refused");
                    if single_attempt_gives_back(now, within) {
                        self.abandon(c, request.hold, world, fx);
                    }
                }
                other => fx.fail("belief is true", format!("an attempt read as {other:?}")),
            },
            Op::Release {
                hold,
                resend,
                noticed,
                ..
            } => {
                // What the library reports, read by its own `given_back` (`hold_too`: a
                // Redisson give-back always names the hold), and what the reply says,
                // must be true.
                let given = given_back(&resent(resend), true);
                let claim = match given {
                    Ok(GivenBack::Removed) if !flight.removed => {
                        Some("it gave a count back, but no copy did")
                    }
                    Ok(GivenBack::NotHeld) if flight.removed => {
                        Some("nothing there, but a copy gave a count back")
                    }
                    Ok(_) => match reply {
                        Reply::Int(1) if !flight.removed => Some("1, but no copy gave back"),
                        Reply::Int(0) if flight.removed_now => Some("0, but it gave back"),
                        Reply::Int(0 | 1) => None,
                        _ => Some("an unknown reply"),
                    },
                    Err(_) => Some("an unreadable reply"),
                };
                if let Some(claim) = claim {
                    let message = format!(
                        "give-back of {} said {claim} ({reply:?})",
                        show(hold.as_bytes())
                    );
                    fx.fail("release is true", message);
                }
                // What the guard's caller is told (`Guard::release`, by the core's `told`).
                let found = given.ok().as_ref().and_then(Found::of_given_back);
                if let (Some(noticed), Some(found)) = (noticed, found) {
                    let said = told(found, noticed, false);
                    if said == Told::Released && !flight.removed {
                        let message = format!(
                            "release of {} told released, but no copy gave back",
                            show(hold.as_bytes())
                        );
                        fx.fail("losses are told", message);
                    }
                    if said != Told::Released && self.doomed.contains(&hold) {
                        fx.reach("a holder was told its wiped hold is lost");
                    }
                }
            }
            Op::Renew {
                items,
                order,
                sent_at,
            } => {
                // Belief rests on what renewals say: a renewal must tell the truth.
                let Some(status) = check_renewal(&items, &order, &reply, &flight.live, fx) else {
                    return;
                };
                let doomed = &self.doomed;
                let client = &mut self.clients[c];
                for (status, &i) in status.iter().zip(&order) {
                    let item = &items[i];
                    let Some(guard) = client.guards.iter_mut().find(|g| g.hold() == &item.hold)
                    else {
                        continue; // released since
                    };
                    if *status == Renewed::Current {
                        guard.on_renewal(item.renew, sent_at, LEASE);
                        if now > START + LEASE {
                            fx.reach("a renewal kept a hold past its first lease");
                        }
                    } else if guard.on_gone().is_some() && doomed.contains(&item.hold) {
                        fx.reach("a holder was told its wiped hold is lost");
                    }
                }
            }
        }
    }

    /// The properties that hold in every state.
    fn check(&self, keys: &RedissonKeys, fx: &mut Effects) {
        let now = self.now;
        let hash = Snapshot::of(&self.ks, keys, now);
        // Exclusive in Redis: one owner's field at most.
        let mut owners = hash.fields.keys();
        if let (Some(a), Some(b)) = (owners.next(), owners.next()) {
            let message = format!("Redis holds {} and {} at once", show(a), show(b));
            fx.fail("never two holders", message);
        }
        // Exactly once: each owner's count is the holds the oracle counts for it.
        let mut counted: BTreeMap<&[u8], i64> = BTreeMap::new();
        for (hold, fate) in &self.fates {
            if *fate == Fate::Counted {
                *counted.entry(field(hold)).or_default() += 1;
            }
        }
        let all: BTreeSet<&[u8]> = (hash.fields.keys().map(|f| f.as_slice()))
            .chain(counted.keys().copied())
            .collect();
        for owner in all {
            let (redis, oracle) = (hash.count(owner), counted.get(owner).copied());
            if redis != oracle.unwrap_or(0) {
                let message = format!(
                    "{}'s count is {redis}, its holds counted {}",
                    show(owner),
                    oracle.unwrap_or(0)
                );
                fx.fail("exactly once", message);
            }
        }
        // Who believes what: each believed hold counted, the hash lasting at least until
        // its deadline; a doomed belief is excused (see the header).
        let mut believers = Vec::new();
        let mut wiped = Vec::new();
        for (c, guard) in self.believed() {
            let hold = guard.hold();
            let owner = field(hold);
            if self.doomed.contains(hold) {
                wiped.push(owner);
                continue;
            }
            believers.push((c, owner, hold));
            let counted = self.fates.get(hold) == Some(&Fate::Counted);
            let until = hash.expiry.flatten();
            if !counted || until.is_none_or(|at| at < guard.deadline()) {
                let message = format!(
                    "client {c} believes in {} until t={}, Redis has {} ({:?}) until {:?}",
                    show(hold.as_bytes()),
                    t(guard.deadline()),
                    hash.count(owner),
                    self.fates.get(hold),
                    until.map(t)
                );
                fx.fail("belief is true", message);
            }
        }
        for (i, a) in believers.iter().enumerate() {
            if let Some(b) = believers[i + 1..].iter().find(|b| b.1 != a.1) {
                let message = format!(
                    "client {} holds {} while client {} holds {}",
                    a.0,
                    show(a.2.as_bytes()),
                    b.0,
                    show(b.2.as_bytes())
                );
                fx.fail("never two holders", message);
            }
        }
        if (wiped.iter()).any(|w| believers.iter().any(|b| b.1 != *w)) {
            fx.reach("a wiped holder and a new one both believed");
        }
        // No orphans: with nothing in flight, every counted hold is some guard's.
        if self.clients.iter().all(|c| c.flight.is_none()) {
            let guarded = |hold: &Arc<str>| {
                (self.clients.iter()).any(|c| c.guards.iter().any(|g| g.hold() == hold))
            };
            let orphan = (self.fates.iter()).find(|(h, f)| **f == Fate::Counted && !guarded(h));
            if let Some((hold, _)) = orphan {
                let message = format!("counted hold {} belongs to no guard", show(hold.as_bytes()));
                fx.fail("no orphans, no garbage", message);
            }
        }
        // No garbage: the hash (positive counts, a TTL within a lease) and the records
        // (each with a TTL within its lifetime), nothing else.
        for key in self.ks.keys(now) {
            let expiry = self.ks.pexpire_at(&key, now).flatten();
            let problem = if key == keys.hash.as_bytes() {
                if let Some((owner, count)) = hash.fields.iter().find(|(_, n)| **n < 1) {
                    Some(format!("has {} at {count}", show(owner)))
                } else if expiry.is_none_or(|at| at > now + LEASE) {
                    Some(format!("expires at {:?}", expiry.map(t)))
                } else {
                    None
                }
            } else if key.starts_with(keys.record_prefix.as_bytes()) {
                let life = ACQUIRE_RECORD_MS.max(RELEASE_RECORD_MS);
                (expiry.is_none_or(|at| at > now + life))
                    .then(|| format!("expires at {:?}", expiry.map(t)))
            } else {
                Some("is not the lock's".into())
            };
            if let Some(problem) = problem {
                let message = format!("{} {problem}", show(&key));
                fx.fail("no orphans, no garbage", message);
            }
        }
    }

    /// One line: the clock, Redis's hash, and each client's beliefs and calls.
    pub fn describe(&self) -> String {
        let keys = keys();
        let now = self.now;
        let hash = Snapshot::of(&self.ks, &keys, now);
        let fields: Vec<String> = (hash.fields.iter())
            .map(|(owner, count)| format!("{}={count}", show(owner)))
            .collect();
        let until = match hash.expiry {
            Some(Some(at)) => format!(" until t={}", t(at)),
            _ => String::new(),
        };
        let records = (self.ks.keys(now).iter())
            .filter(|k| k.starts_with(keys.record_prefix.as_bytes()))
            .count();
        let mut out = format!(
            "t={} redis: hash[{}]{until} records:{records}",
            t(now),
            fields.join(" ")
        );
        if self.busy_next {
            out += " (the next call gets BUSY)";
        }
        if self.timeout_next {
            out += " (the next call times out)";
        }
        let fates: Vec<String> = (self.fates.iter())
            .map(|(h, f)| format!("{}:{f:?}", show(h.as_bytes())))
            .collect();
        out += &format!(" fates[{}]", fates.join(" "));
        if !self.doomed.is_empty() {
            let doomed: Vec<String> = self.doomed.iter().map(|h| show(h.as_bytes())).collect();
            out += &format!(" doomed[{}]", doomed.join(" "));
        }
        for (c, client) in self.clients.iter().enumerate() {
            let owner = client.owner.as_deref().unwrap_or("fresh");
            out += &format!("; c{c}({owner}):");
            for guard in &client.guards {
                let believed = guard.lost().is_none() && now < guard.deadline();
                let note = if believed { "" } else { " (not believed)" };
                let hold = show(guard.hold().as_bytes());
                out += &format!(" {hold} until {}{note}", t(guard.deadline()));
            }
            if let Some(waiting) = &client.waiting {
                out += &format!(" waiting {}", show(waiting.hold.as_bytes()));
            }
            if let Some(flight) = &client.flight {
                let stage = match (&flight.reply, &flight.queued) {
                    (_, Some(_)) => "sent behind strays".to_string(),
                    (None, None) => "sleeping".to_string(),
                    (Some(reply), None) => format!("ran -> {reply:?}"),
                };
                out += &format!(" [{} {stage}]", flight.op.show());
            }
            for stray in &client.strays {
                let note = if stray.given_up { ", given up" } else { "" };
                out += &format!(" stray({}{note})", stray.op.show());
            }
        }
        out
    }
}

/// The Redisson-layout lock's model, for the one checker (`tests/protocol/checker.rs`).
pub struct Redisson;

impl Model for Redisson {
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
            name: "redisson: two clients, waits, re-entry, give-ups",
            owners: vec![None, None],
            acquires: 3,
            reenters: 1,
            asks: 2,
            advances: 2,
            faults: 0,
            renewals: 0,
            restarts: 0,
            force_unlocks: 0,
            busy: 0,
            timeouts: 0,
            drops: 0,
            required: MILESTONES[..7].to_vec(),
        },
        Config {
            name: "redisson: two clients, lost replies, re-entry, expiry and renewal",
            owners: vec![None, None],
            acquires: 2,
            reenters: 1,
            asks: 1,
            advances: 3,
            faults: 1,
            renewals: 1,
            restarts: 0,
            force_unlocks: 0,
            busy: 0,
            timeouts: 0,
            drops: 0,
            required: MILESTONES[..11].to_vec(),
        },
        shared_owner(),
        Config {
            name: "redisson: a restart, BUSY and a lost reply",
            owners: vec![None, None],
            acquires: 2,
            reenters: 0,
            asks: 1,
            advances: 1,
            faults: 1,
            renewals: 1,
            restarts: 1,
            force_unlocks: 0,
            busy: 1,
            timeouts: 0,
            drops: 0,
            required: vec![
                "a restart emptied the keyspace while a hold was believed",
                "a call refused as BUSY ran when re-sent",
                "a holder was told its wiped hold is lost",
                "a wiped holder and a new one both believed",
            ],
        },
        Config {
            name: "redisson: a Redisson force-unlock, a lost reply and renewal",
            owners: vec![None, None],
            acquires: 2,
            reenters: 1,
            asks: 1,
            advances: 1,
            faults: 1,
            renewals: 1,
            restarts: 0,
            force_unlocks: 1,
            busy: 0,
            timeouts: 0,
            drops: 0,
            required: vec![
                "a force-unlock took a believed hold",
                "a holder was told its wiped hold is lost",
                "a wiped holder and a new one both believed",
            ],
        },
        Config {
            name: "redisson: late requests: timeouts, a dropped acquire, renewal",
            owners: vec![None, None],
            acquires: 3,
            reenters: 0,
            asks: 1,
            advances: 2,
            faults: 0,
            renewals: 1,
            restarts: 0,
            force_unlocks: 0,
            busy: 0,
            timeouts: 1,
            drops: 1,
            required: [
                vec!["a retried acquire found its hold"],
                STRAY_MILESTONES.to_vec(),
            ]
            .concat(),
        },
        Config {
            name: "redisson: late requests, a restart and BUSY",
            owners: vec![None, None],
            acquires: 2,
            reenters: 0,
            asks: 0,
            advances: 1,
            faults: 0,
            renewals: 1,
            restarts: 1,
            force_unlocks: 0,
            busy: 1,
            timeouts: 1,
            drops: 1,
            required: vec![
                "a restart dropped a stray",
                "a stray ran after a restart",
                "a stray copy of a call refused as BUSY ran",
                "a call refused as BUSY ran when re-sent",
                "a stray acquire ran after its client gave up",
            ],
        },
        Config {
            name: "redisson: late requests and a force-unlock",
            owners: vec![None, None],
            acquires: 2,
            reenters: 0,
            asks: 1,
            advances: 1,
            faults: 0,
            renewals: 1,
            restarts: 0,
            force_unlocks: 1,
            busy: 0,
            timeouts: 1,
            drops: 1,
            required: vec![
                "a stray sent before a force-unlock ran after it",
                "a force-unlock took a believed hold",
                "a holder was told its wiped hold is lost",
                "a stray acquire ran after its client gave up",
            ],
        },
    ]
}

/// Two clients of handles with one explicit owner (`with_owner`) and a third: holds
/// re-enter across handles, and a hold that expired is taken again by its owner's other
/// client, whose count the first one's give-back then takes (the layout's weaker
/// guarantee, see the header).
pub fn shared_owner() -> Config {
    Config {
        name: "redisson: one explicit owner on two clients",
        owners: vec![Some("a"), Some("a"), Some("b")],
        acquires: 3,
        reenters: 0,
        asks: 1,
        advances: 2,
        faults: 0,
        renewals: 0,
        restarts: 0,
        force_unlocks: 0,
        busy: 0,
        timeouts: 0,
        drops: 0,
        required: vec![
            "an owner re-entered",
            "an owner re-entered across handles",
            "a stale give-back took a count of its owner's later hold",
        ],
    }
}

/// The milestones default configuration `name` must reach at the default bound.
pub fn must_reach(name: &str) -> Vec<&'static str> {
    let mut all = configs().into_iter();
    all.find(|c| c.name == name)
        .map(|c| c.required)
        .unwrap_or_default()
}
