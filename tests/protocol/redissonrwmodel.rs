//! The protocol model of the read-write lock kept in Redisson's RReadWriteLock layout
//! (`LockClient::redisson_rw_lock`), built like `redissonmodel.rs` (the RLock layout's):
//! clients take reads and the write with waiting attempts and single attempts, re-enter
//! through a guard (`Guard::reenter`), downgrade (a read through a write guard, then the
//! write given back), give holds back, renew them (`lua/redisson_renew.lua` through
//! `renew_call_shaped`, as the watchdog does: a read by its owner with every timeout key,
//! a write by `<owner>:write`), cancel attempts and lose replies, while the clock moves
//! past leases, Redis answers `BUSY`, restarts losing all data, and a Java service's
//! Redisson force-unlocks the lock ([`FORCE_UNLOCK`]: a `DEL` of the hash and the message,
//! standing for the Java side). Every call is built and every reply read by the library's
//! own `protocol::redisson` (`rw_acquire_call`, `decode_rw_acquire`, `rw_release_call`,
//! `renew_call_shaped`, `owner_of`), `resend::Resend` / `given_back`,
//! `renew::decode_renew`, `hold::HoldState`, `release::told` and `wait::Wait` (with the
//! policy `src/redisson_rw.rs` builds: `WaitPolicy::redisson`, readers sharing a wake-up):
//! whether an attempt that ends without a grant gives back, including a refused upgrade
//! (`Attempted::Refused`, `claim_may_remain`). Every call runs the real
//! `lua/redisson_rw_*.lua` and `lua/redisson_renew.lua` in the embedded Lua against the
//! keyspace model.
//!
//! Owners: as in `redissonmodel.rs`, a default handle takes a fresh owner per acquisition
//! and its guards re-enter and downgrade with their own owner (`joins`: granted only while
//! the owner still holds there); one configuration gives two clients one explicit owner,
//! so that holds re-enter across handles and an owner that holds a read asks for the
//! write (`{-3}`, refused, never granted, never waiting). A write asked through a read
//! guard is refused by the client before any call (`WouldDeadlock`): nothing to model.
//!
//! **The layout's weaker guarantee, by design** (the doc of `RedissonRwLock` says so, as
//! `RedissonLock`'s): two holds of one owner on one side share one field (and a read's
//! timeout keys are its owner's levels `1..count`, not its own), so they cannot be told
//! apart. As in `redissonmodel.rs`, a give-back that takes a count of its owner although
//! its own count was lost (a *stale give-back*) is allowed where the script could not know
//! better, and the owner's holds then counted on that side are *doomed*.
//!
//! **What this model found (fixed)**: a read give-back deletes the timeout key of its
//! owner's top level (`count`), as Redisson does, whichever of the owner's holds it gives
//! back. When the owner's reads were taken at different times (a re-entry, or two handles
//! of one explicit owner) and the older one was given back first (or an abandoned
//! acquire's copy), the younger read was left with the older read's timeout key, which
//! expires before the younger read's confirmed deadline; another reader's release then
//! found no live timeout key of that owner and deleted the hash (or cut its expiry), and a
//! writer (a Java one too) could take the lock while the younger read still believed. It
//! needed a renewal not to come in between (a watchdog that could not reach Redis for a
//! while, or fixed leases). `redisson_rw_release.lua` now gives the deleted key's expiry to
//! the owner's shortest remaining key when that is longer, so the remaining keys are the
//! longest ones. The oracle tracks the level each counted read stands on: a give-back that
//! deletes another hold's level moves that hold onto the level that took its expiry (and
//! the hold that stood there onto the give-back's own), or onto the give-back's own level;
//! a key that ends before its hold's belief is a violation of "belief is true" everywhere.
//! The configuration `KNOWN_GAP` showed it, and the teeth plant the old release back.
//!
//! Not modelled: fixed leases (`with_lease`), `Guard::extend`, `detach`, a Redisson
//! peer's own `lock`/`unlock` (only its force-unlock), the cluster's sharded channel,
//! `LOADING` (the same as `BUSY` for the re-send machine), and a copy that arrives after
//! its record expired.
//!
//! Assumptions: those of `redissonmodel.rs` (one lock, one Redis; a request runs when it
//! is sent, but for late requests; the re-send machine never gives up within the model's
//! clock; `BUSY` means the call did not run; a restart takes at least 1 ms, loses every
//! key, reply and stray; a force-unlock runs at once, between two calls, and leaves the
//! timeout keys to expire, as Redisson's does; every lease is the watchdog's; the records
//! outlive the model's clock, asserted at the start). Wake-ups are checked as published.
//! Late requests (`timeouts`, `drops`) are as in `redissonmodel.rs`.
//!
//! The oracle (never the library's reading of a reply): each hold's [`Fate`] as the model
//! saw the counts of its side's field change when its calls ran, and for a counted read
//! the level (`1..count`) whose timeout key stands for it.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use redis_locks::LostReason;
use redis_locks_protocol::attempted::Attempted;
use redis_locks_protocol::extend::HoldShape;
use redis_locks_protocol::hold::HoldState;
use redis_locks_protocol::redisson::{
    RedissonKeys, decode_rw_acquire, owner_of, renew_call_shaped, rw_acquire_call, rw_release_call,
};
use redis_locks_protocol::release::{Found, Told, told};
use redis_locks_protocol::renew::{RenewItem, Renewed, decode_renew};
use redis_locks_protocol::resend::{GivenBack, Resend, given_back};
use redis_locks_protocol::rwlock::{RwKind, hold_id};
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
/// The client's response timeout, from which `src/redisson_rw.rs` sizes the records.
pub const RESPONSE: Millis = 100;
/// How long an acquire's record lives (`RedissonRwSide::attempt_call`: four response
/// timeouts, at least the lease).
pub const ACQUIRE_RECORD_MS: Millis = redis_locks_protocol::redisson::acquire_record_ms(RESPONSE);
/// How long a record lives once released (`RedissonRwSide::give_back_call`: the lease,
/// at least the watchdog's, and a response timeout).
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
/// The bound (steps per run) of a release build: `tests/redisson_rw_check.rs` runs it and
/// `tests/redisson_rw_teeth.rs` must find every planted defect within it.
pub const DEFAULT_DEPTH: usize = 10;

/// Redisson's force-unlock as a Java service sends it (`RedissonWriteLock` /
/// `RedissonReadLock.forceUnlockAsync`: delete the hash, wake every waiter): KEYS = the
/// hash and the read-write channel, ARGV = the message (`1`) and the publish command.
pub const FORCE_UNLOCK: &str = "\
if (redis.call('del', KEYS[1]) == 1) then \
redis.call(ARGV[2], KEYS[2], ARGV[1]); \
return 1 \
else \
return 0 \
end";

/// The properties, checked in every state (and each run's effects):
/// 1. Readers-writers exclusion: Redis never has a write field with another owner's field
///    (read or write), and no guard believes a write while a guard of another owner
///    believes any hold; a read is never granted to another owner in write mode, a write
///    never over any other field; an upgrade (a write asked by an owner that holds a read
///    and not the write) is refused (`{-3}`), never granted, never waits.
/// 2. A believed hold is counted in its side's field, the hash lasts at least until the
///    believed deadline, and a believed read's timeout key (the level the oracle gives it)
///    lives at least that long; a renewal never reports a live hold gone.
/// 3. Exactly once: an acquire's copies count it once, a give-back's copies give back one
///    count, and only one its hold had (but the stale give-back); every field equals the
///    holds the oracle counts for it.
/// 4. What `given_back` and a give-back's reply report is what its copies did; nothing
///    but a give-back changes an owner's count (but a read release that ends the hash,
///    taking fields of readers none of whose timeout keys lived), nothing shortens the
///    hash's expiry (but a read release, to the longest live timeout of the readers left,
///    none of them writing).
/// 5. A holder whose hold is gone is told: a renewal never reports a gone hold current, a
///    release is told "released" (`release::told`) only if a copy gave a count back, and
///    no guard believes past its deadline.
/// 6. A release that ends the hash publishes exactly once on Redisson's read-write
///    channel: `0` after a read, `1` after a write; nothing else publishes.
/// 7. With nothing in flight every counted hold is a guard's; the hash has a `mode` that
///    says who holds, positive counts and a TTL within a lease; each timeout key has a TTL
///    within a lease and stands for a level its owner counts (but those a force-unlock
///    left, which expire); each record a TTL within its lifetime; nothing else is written.
///
/// 1 and 2 leave out the doomed beliefs (see the header).
pub const PROPERTIES: [&str; 7] = [
    "readers-writers exclusion",
    "belief is true",
    "exactly once",
    "release is true",
    "losses are told",
    "waiters are woken",
    "no orphans, no garbage",
];

/// What runs reach (each configuration names those it must reach, else it is vacuous).
pub const MILESTONES: [&str; 32] = [
    "two owners read at once",
    "an owner re-entered",
    "a writer read while writing",
    "a downgrade: the write was given back while its owner read",
    "a waiter was granted after a refusal",
    "a single attempt was refused",
    "a waiter gave up",
    "a cancelled grant was given back",
    "a read release emptied the lock and woke the waiters",
    "a write release emptied the lock and woke the waiters",
    "a re-entered hold was given back, another kept",
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
    "an upgrade was refused",
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
    MILESTONES[23],
    MILESTONES[24],
    MILESTONES[25],
    MILESTONES[26],
    MILESTONES[27],
];

/// The parties and bounds of one exploration.
#[derive(Clone, Debug)]
pub struct Config {
    pub name: &'static str,
    /// Per client: its handle's explicit owner (`with_owner`; one named twice: two clients
    /// share it), or `None`: a fresh owner per acquisition.
    pub owners: Vec<Option<&'static str>>,
    /// The sides new acquisitions take (reads and writes in one configuration, or one).
    pub sides: &'static [RwKind],
    /// New acquisitions (each waiting or a single attempt), re-entries, downgrades, asks
    /// again, clock advances, lost replies and renewals, in all.
    pub acquires: u8,
    pub reenters: u8,
    pub downgrades: u8,
    pub asks: u8,
    pub advances: u8,
    pub faults: u8,
    pub renewals: u8,
    /// Restarts that lose all data, Redisson force-unlocks and `BUSY` replies.
    pub restarts: u8,
    pub force_unlocks: u8,
    pub busy: u8,
    /// Late requests: calls that get no reply within the response timeout, and acquires
    /// their callers drop while an attempt is in flight.
    pub timeouts: u8,
    pub drops: u8,
    /// The milestones it must reach at the default bound.
    pub required: Vec<&'static str>,
}

pub fn keys() -> RedissonKeys {
    RedissonKeys::new("p", false, "n")
}

/// `{n}:<owner>:rwlock_timeout:` (Redisson's `suffixName(name, owner)`), then the level.
fn level_prefix(keys: &RedissonKeys, owner: &[u8]) -> Vec<u8> {
    let mut prefix = format!("{{{}}}:", keys.hash).into_bytes();
    prefix.extend_from_slice(owner);
    prefix.extend_from_slice(b":rwlock_timeout:");
    prefix
}

/// The owner and level a timeout key names, if it is one.
fn level_of(keys: &RedissonKeys, key: &[u8]) -> Option<(Vec<u8>, i64)> {
    let root = format!("{{{}}}:", keys.hash);
    let rest = key.strip_prefix(root.as_bytes())?;
    let marker = b":rwlock_timeout:";
    let at = (0..=rest.len().saturating_sub(marker.len()))
        .rev()
        .find(|&i| rest[i..].starts_with(marker))?;
    let level = std::str::from_utf8(&rest[at + marker.len()..]).ok()?;
    Some((rest[..at].to_vec(), level.parse().ok()?))
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

/// `src/redisson_rw.rs`'s `RedissonRwSide::wait_policy`.
fn policy(kind: RwKind) -> WaitPolicy {
    let mut policy = WaitPolicy::redisson(TIMING);
    policy.shares = kind == RwKind::Read;
    policy
}

fn side_name(kind: RwKind) -> &'static str {
    match kind {
        RwKind::Read => "read",
        RwKind::Write => "write",
    }
}

/// One acquisition: the same call on every attempt (its request id is its idempotency
/// key), as `held::SetAttempts` makes it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Request {
    /// `<owner>\x01<request id>`.
    pub hold: Arc<str>,
    pub owner: Arc<str>,
    pub kind: RwKind,
    /// It waits (`read`, `write`); `false`: a single attempt (`try_*`, a guard's).
    pub waits: bool,
    /// Through a guard (`reenter`, `read` of a write guard): granted only while the owner
    /// still holds there.
    pub joins: bool,
    /// An attempt was refused before: a waiter asking again.
    pub refused: bool,
}

impl Request {
    /// `RedissonRwSide::attempt_call`.
    fn call(&self, keys: &RedissonKeys) -> Call {
        rw_acquire_call(
            keys,
            &self.owner,
            &self.hold,
            self.kind,
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
        kind: RwKind,
        leaving: bool,
        resend: Resend,
        /// A guard's release: the loss its client had noticed when it started (`None`
        /// inside: none).
        noticed: Option<Option<LostReason>>,
    },
    Renew {
        items: Vec<RenewItem>,
        shapes: Vec<HoldShape>,
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
                let how = match (request.joins, request.waits) {
                    (true, _) => "join",
                    (false, true) => "acquire",
                    (false, false) => "try",
                };
                let side = side_name(request.kind);
                format!("{how} {side} {}", show(request.hold.as_bytes()))
            }
            Op::Release {
                hold,
                kind,
                leaving,
                ..
            } => {
                let how = if *leaving { "abandon" } else { "release" };
                format!("{how} {} {}", side_name(*kind), show(hold.as_bytes()))
            }
            Op::Renew { items, .. } => format!("renew {} holds", items.len()),
        }
    }
}

/// What a renewal item's hold was in Redis when the renewal ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Live {
    /// Its field is gone, or (a read) none of its owner's timeout keys lives.
    Gone,
    /// A read whose owner's field is there with some of its timeout keys, not all: the
    /// documented rule reads it gone (another reader's release would not count a level
    /// whose key expired), a report of "current" is not a lie either.
    Partial,
    /// Its field, and (a read) every timeout key of its owner's levels.
    Whole,
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
    /// For each renewal item, what its hold was when the renewal ran.
    pub live: Vec<Live>,
    /// A copy was refused with `BUSY` and re-sent since.
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
    /// Its count is in its side's field; its record says granted.
    Counted,
    /// Its count went away without a give-back of its own; `record`: its record still
    /// says granted (not after a restart).
    Lost { record: bool },
    /// A give-back of its own gave a count back; `record`: its record still says released.
    GivenBack { record: bool },
}

/// One guard: what its client believes of its hold, and its side.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Held {
    pub state: HoldState,
    pub kind: RwKind,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// The handle's explicit owner, or `None`: a fresh owner per acquisition.
    pub owner: Option<Arc<str>>,
    pub ids: RequestIds,
    /// The holds it believes in (its guards; lost ones until released).
    pub guards: Vec<Held>,
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
    pub downgrades: u8,
    pub asks: u8,
    pub advances: u8,
    pub faults: u8,
    pub renewals: u8,
    pub restarts: u8,
    pub force_unlocks: u8,
    pub busy: u8,
    /// Redis answers the next call sent with `BUSY` (it does not run it).
    pub busy_next: bool,
    pub timeouts: u8,
    pub drops: u8,
    /// The next call sent gets no reply within the response timeout: a stray.
    pub timeout_next: bool,
    /// The oracle, by hold id (with its side), for as long as something names the hold or
    /// it is counted.
    pub fates: BTreeMap<Arc<str>, (RwKind, Fate)>,
    /// For each counted read: the level whose timeout key stands for it.
    pub levels: BTreeMap<Arc<str>, i64>,
    /// Holds taken out of Redis behind their holders' backs (see the header), for as long
    /// as something names them.
    pub doomed: BTreeSet<Arc<str>>,
    /// Timeout keys a force-unlock left behind (Redisson's leaves them to expire).
    pub leftover: BTreeSet<Vec<u8>>,
}

/// One step. Every call is sent and run in the step that starts it (but behind strays).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A new acquisition of a side: `true` waits (`read`, `write`), `false` is a single
    /// attempt (`try_read`, `try_write`).
    Acquire(usize, RwKind, bool),
    /// Client, guard: `Guard::reenter` (a single attempt of the guard's side with its
    /// owner), for a guard that believes in its hold.
    Reenter(usize, usize),
    /// Client, write guard: `Guard::read`, a downgrade's read.
    Downgrade(usize, usize),
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
    /// Redis answers the next call, whoever sends it, with `BUSY`.
    Busy,
    /// Redis restarts without persistence: every key and every reply on its way is lost,
    /// and at least 1 ms passes.
    Restart,
    /// A Java service's Redisson force-unlock ([`FORCE_UNLOCK`]).
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
        let keys = [&self.keys.hash, &self.keys.rw_channel].map(|k| k.as_bytes().to_vec());
        let args = [b"1".to_vec(), b"PUBLISH".to_vec()];
        let reply = self.runner.eval(FORCE_UNLOCK, &keys, &args, ks, now);
        (reply, std::mem::take(&mut ks.published))
    }
}

/// The lock as one run saw it: each field's count (`mode` apart), the mode, the hash's
/// expiry (`None`: no hash; `Some(None)`: no TTL) and every timeout key's expiry by
/// (owner, level) (`None`: no TTL).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub fields: BTreeMap<Vec<u8>, i64>,
    pub mode: Option<Vec<u8>>,
    pub expiry: Option<Option<u64>>,
    pub levels: BTreeMap<(Vec<u8>, i64), Option<u64>>,
}

impl Snapshot {
    pub fn of(ks: &Keyspace, keys: &RedissonKeys, now: Millis) -> Snapshot {
        let levels = (ks.keys(now).iter())
            .filter_map(|key| Some((level_of(keys, key)?, ks.pexpire_at(key, now).flatten())))
            .collect();
        let key = keys.hash.as_bytes();
        let Some(hash) = ks.hash(key, now) else {
            return Snapshot {
                levels,
                ..Snapshot::default()
            };
        };
        let count = |v: &Vec<u8>| parse_i64(v).unwrap_or(i64::MIN);
        Snapshot {
            fields: (hash.iter())
                .filter(|(f, _)| f.as_slice() != b"mode")
                .map(|(f, v)| (f.clone(), count(v)))
                .collect(),
            mode: hash.get(b"mode".as_slice()).cloned(),
            expiry: ks.pexpire_at(key, now),
            levels,
        }
    }

    fn count(&self, field: &[u8]) -> i64 {
        self.fields.get(field).copied().unwrap_or(0)
    }

    fn exists(&self) -> bool {
        self.expiry.is_some()
    }

    /// The owners of write fields.
    fn writers(&self) -> Vec<&[u8]> {
        (self.fields.keys())
            .filter_map(|f| f.strip_suffix(b":write"))
            .collect()
    }

    /// The expiry of `owner`'s timeout key at `level`: `None`: no such key; `u64::MAX`:
    /// no TTL.
    fn level(&self, owner: &[u8], level: i64) -> Option<u64> {
        (self.levels.get(&(owner.to_vec(), level))).map(|at| at.unwrap_or(u64::MAX))
    }

    /// How many of `owner`'s levels `1..count` have a timeout key.
    fn live_levels(&self, owner: &[u8]) -> i64 {
        let count = self.count(owner);
        (1..=count)
            .filter(|&k| self.level(owner, k).is_some())
            .count() as i64
    }

    /// The latest expiry of a timeout key of a level some owner in the hash counts.
    fn longest_level(&self) -> Option<u64> {
        (self.fields.iter())
            .filter(|(f, _)| !f.ends_with(b":write"))
            .flat_map(|(owner, &count)| (1..=count).filter_map(|k| self.level(owner, k)))
            .max()
    }
}

pub fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).replace('\u{1}', "/")
}

/// Model time as the traces show it (from the start).
pub fn t(at: Millis) -> i64 {
    at as i64 - START as i64
}

/// The owner of a hold id, as bytes.
fn owner_bytes(hold: &str) -> &[u8] {
    owner_of(hold).as_bytes()
}

/// The hash field a hold of `kind` counts in: `<owner>` or `<owner>:write`.
fn field(hold: &str, kind: RwKind) -> Vec<u8> {
    let mut field = owner_bytes(hold).to_vec();
    if kind == RwKind::Write {
        field.extend_from_slice(b":write");
    }
    field
}

/// The owner a field belongs to.
fn field_owner(field: &[u8]) -> &[u8] {
    field.strip_suffix(b":write").unwrap_or(field)
}

/// What `redisson_rw_acquire.lua`'s header calls a grant (`{1}`), read without the
/// library.
fn says_granted(reply: &Reply) -> bool {
    matches!(reply, Reply::Array(items) if items.as_slice() == [Reply::Int(1)])
}

/// What the header calls a refused upgrade (`{-3}`), read without the library.
fn says_no_upgrade(reply: &Reply) -> bool {
    matches!(reply, Reply::Array(items) if items.as_slice() == [Reply::Int(-3)])
}

/// A renewal's reply against what Redis had when it ran (`live`, by item), the statuses in
/// `order`, as `decode_renew` reads them: "current" of a gone hold leaves a loss untold,
/// "gone" of a whole one is a false report.
fn check_renewal(
    items: &[RenewItem],
    order: &[usize],
    reply: &Reply,
    live: &[Live],
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
        let property = match (*status == Renewed::Current, live[i]) {
            (true, Live::Gone) => "losses are told",
            (false, Live::Whole) => "belief is true",
            _ => continue,
        };
        let message = format!(
            "renewal said {status:?} of {} ({:?} in Redis)",
            show(items[i].hold.as_bytes()),
            live[i]
        );
        fx.fail(property, message);
    }
    Some(status)
}

/// Whether the library's waiting loop gives back after the single attempt of an
/// acquisition (`try_*`, a guard's) was refused: the core's `Wait` decides.
fn single_attempt_gives_back(kind: RwKind, now: Millis, within: Millis) -> bool {
    let mut wait = wait_at_attempt(policy(kind), now, Some(0), None).expect("the loop attempts");
    match wait.attempted(now, Tried::Busy { within }, false, 0) {
        WaitStep::Done(WaitEnd::TimedOut { give_back, .. }) => give_back,
        other => panic!("a refused single attempt that goes on: {other:?}"),
    }
}

/// Whether a waiter whose wait runs out between attempts gives back: the core's `Wait`,
/// through a refusal, then a refused attempt at its deadline.
fn waiter_gives_back(kind: RwKind, now: Millis) -> bool {
    let mut wait =
        wait_at_attempt(policy(kind), now, Some(1), Some(LEASE)).expect("the loop attempts");
    match wait.attempted(now + 1, Tried::Busy { within: LEASE }, false, 0) {
        WaitStep::Done(WaitEnd::TimedOut { give_back, .. }) => give_back,
        other => panic!("a waiter at its deadline that goes on: {other:?}"),
    }
}

/// The library's waiting loop of `request` as it stands before an attempt.
fn wait_of(request: &Request, now: Millis) -> Wait {
    let limit = if request.waits { None } else { Some(0) };
    let refused = request.refused.then_some(LEASE);
    wait_at_attempt(policy(request.kind), now, limit, refused).expect("the waiting loop attempts")
}

/// Whether an attempt refused for good (`Attempted::Refused`: an upgrade) gives back:
/// the core's `claim_may_remain`, then its `Wait`.
fn refused_gives_back(
    request: &Request,
    attempted: &Attempted,
    after_loss: bool,
    now: Millis,
) -> bool {
    let claim_may_remain = attempted.claim_may_remain(after_loss);
    let mut wait = wait_of(request, now);
    match wait.attempted(now, Tried::Refused { claim_may_remain }, false, 0) {
        WaitStep::Done(WaitEnd::Failed { give_back, .. } | WaitEnd::TimedOut { give_back, .. }) => {
            give_back
        }
        other => panic!("a refused attempt that goes on: {other:?}"),
    }
}

/// What one run did (see [`InFlight`]'s fields of the same names).
struct Ran {
    reply: Reply,
    existed: bool,
    removed_now: bool,
    live: Vec<Live>,
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
            downgrades: config.downgrades,
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
            levels: BTreeMap::new(),
            doomed: BTreeSet::new(),
            leftover: BTreeSet::new(),
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
                        for &kind in config.sides {
                            steps.push(Step::Acquire(c, kind, true));
                            steps.push(Step::Acquire(c, kind, false));
                        }
                    }
                    for (g, guard) in client.guards.iter().enumerate() {
                        // A guard's joins check first that its hold is not lost.
                        if guard.state.lost().is_some() || self.now >= guard.state.deadline() {
                            continue;
                        }
                        if self.reenters > 0 {
                            steps.push(Step::Reenter(c, g));
                        }
                        if self.downgrades > 0 && guard.kind == RwKind::Write {
                            steps.push(Step::Downgrade(c, g));
                        }
                    }
                    steps.extend((0..client.guards.len()).map(|g| Step::Release(c, g)));
                    if self.renewals > 0 && client.guards.iter().any(|g| g.state.is_active()) {
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

    /// A new acquisition of `kind` by client `c`: its handle's owner or a fresh one, or
    /// (`through`) the owner of a guard's hold, joining.
    fn request(&mut self, c: usize, kind: RwKind, waits: bool, through: Option<usize>) -> Request {
        let client = &mut self.clients[c];
        let (owner, joins): (Arc<str>, bool) = match (through, &client.owner) {
            (Some(g), _) => (owner_of(client.guards[g].state.hold()).into(), true),
            (None, Some(owner)) => (owner.clone(), false),
            // A default handle's fresh owner (`<client>:<n>`), then the request id.
            (None, None) => (client.ids.next_id().replace('.', ":").into(), false),
        };
        Request {
            hold: hold_id(&owner, &client.ids.next_id()),
            owner,
            kind,
            waits,
            joins,
            refused: false,
        }
    }

    pub fn apply(&mut self, step: &Step, world: &World) -> Effects {
        let mut fx = Effects::default();
        let keys = &world.keys;
        let now = self.now;
        let resend = |call: Call| Resend::new(call, now + GIVE_UP_AFTER);
        match *step {
            Step::Acquire(c, kind, waits) => {
                self.acquires -= 1;
                let request = self.request(c, kind, waits, None);
                let resend = resend(request.call(keys));
                self.send(c, Op::Acquire { request, resend }, world, &mut fx);
            }
            Step::Reenter(c, g) => {
                self.reenters -= 1;
                let kind = self.clients[c].guards[g].kind;
                let request = self.request(c, kind, false, Some(g));
                let resend = resend(request.call(keys));
                self.send(c, Op::Acquire { request, resend }, world, &mut fx);
            }
            Step::Downgrade(c, g) => {
                self.downgrades -= 1;
                let request = self.request(c, RwKind::Read, false, Some(g));
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
                        let give_back = wait_of(&request, now).give_back_if_dropped();
                        (request, give_back)
                    }
                    Some(other) => unreachable!("only an acquire is given up: {other:?}"),
                    None => {
                        fx.reach("a waiter gave up");
                        let request = client.waiting.take().expect("a waiter");
                        let give_back = waiter_gives_back(request.kind, now);
                        (request, give_back)
                    }
                };
                if give_back {
                    self.abandon(c, request.hold, request.kind, world, &mut fx);
                }
            }
            Step::Release(c, g) => {
                let guard = self.clients[c].guards.remove(g);
                let hold = guard.state.hold().clone();
                // `RedissonRwSide::give_back_call` of a guard's hold.
                let owner: Arc<str> = owner_of(&hold).into();
                let call =
                    rw_release_call(keys, &owner, &hold, guard.kind, false, RELEASE_RECORD_MS);
                let op = Op::Release {
                    hold,
                    kind: guard.kind,
                    leaving: false,
                    resend: resend(call),
                    noticed: Some(guard.state.lost()),
                };
                self.send(c, op, world, &mut fx);
            }
            Step::Renew(c) => {
                self.renewals -= 1;
                // The watchdog's `keyed_batches` for the Redisson shapes.
                let active = self.clients[c]
                    .guards
                    .iter()
                    .filter(|g| g.state.is_active());
                let (items, shapes): (Vec<RenewItem>, Vec<HoldShape>) = active
                    .map(|g| {
                        let shape = match g.kind {
                            RwKind::Read => HoldShape::RedissonRead,
                            RwKind::Write => HoldShape::RedissonWrite,
                        };
                        (RenewItem::of(keys.hash.clone(), &g.state), shape)
                    })
                    .unzip();
                let (_, order) = renew_call_shaped(LEASE, &items, &shapes);
                let op = Op::Renew {
                    items,
                    shapes,
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
                self.leftover.clear();
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
                let counted = |h: &Arc<str>| self.fates.get(h).map(|e| e.1) == Some(Fate::Counted);
                if self.believed().any(|(_, g)| counted(g.state.hold())) {
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
                // Redisson's force-unlock leaves the timeout keys to expire.
                let left = self.ks.keys(now).into_iter();
                self.leftover
                    .extend(left.filter(|k| level_of(keys, k).is_some()));
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
                if wait_of(&request, now).give_back_if_dropped() {
                    self.abandon(c, request.hold, request.kind, world, &mut fx);
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
    /// (`held::give_back(hold_too = true, leaving = true)`: `rw_release_call` with
    /// `abandoned`).
    fn abandon(&mut self, c: usize, hold: Arc<str>, kind: RwKind, world: &World, fx: &mut Effects) {
        let owner: Arc<str> = owner_of(&hold).into();
        let call = rw_release_call(&world.keys, &owner, &hold, kind, true, RELEASE_RECORD_MS);
        let op = Op::Release {
            hold,
            kind,
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
        let counted =
            |s: &Self, hold: &Arc<str>| s.fates.get(hold).map(|e| e.1) == Some(Fate::Counted);
        let counted_before = match &stray.op {
            Op::Acquire { request, .. } => counted(self, &request.hold),
            _ => false,
        };
        let ran = self.execute(c, &stray.call, &stray.op, world, fx);
        let counted_after = match &stray.op {
            Op::Acquire { request, .. } => counted(self, &request.hold),
            _ => false,
        };
        let client = &mut self.clients[c];
        match (&stray.op, &mut client.flight) {
            (Op::Acquire { .. }, _) if stray.given_up => {
                fx.reach("a stray acquire ran after its client gave up");
                if !counted_before && counted_after {
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
    fn believed(&self) -> impl Iterator<Item = (usize, &Held)> {
        let now = self.now;
        (self.clients.iter().enumerate())
            .flat_map(|(c, client)| client.guards.iter().map(move |g| (c, g)))
            .filter(move |(_, g)| g.state.lost().is_none() && now < g.state.deadline())
    }

    /// Moves the clock to `to`: keys expire (a hash that expired took its counts along),
    /// and every guard's clock says whether its deadline passed.
    fn advance_to(&mut self, to: Millis, keys: &RedissonKeys, fx: &mut Effects) {
        self.now = to;
        self.ks.expire(to);
        if self.ks.hash(keys.hash.as_bytes(), to).is_none() {
            for (_, fate) in self.fates.values_mut() {
                if *fate == Fate::Counted {
                    *fate = Fate::Lost { record: true };
                    fx.reach("a hold expired in Redis");
                }
            }
        }
        for (c, client) in self.clients.iter_mut().enumerate() {
            for guard in &mut client.guards {
                guard.state.on_clock(to);
                if guard.state.is_active() && to >= guard.state.deadline() {
                    let message = format!(
                        "client {c} still believes in {} at t={}, past its deadline t={}",
                        show(guard.state.hold().as_bytes()),
                        t(to),
                        t(guard.state.deadline())
                    );
                    fx.fail("losses are told", message);
                }
            }
        }
    }

    /// Redis is about to lose the hash behind everyone's back: the counted holds are
    /// doomed; a restart (`records`) takes the records too.
    fn wipe(&mut self, records: bool) {
        for (hold, (_, fate)) in &mut self.fates {
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
    /// call can run for them, so their fates cannot matter, but a counted one's; and the
    /// levels of holds no longer counted, and leftover keys gone.
    fn forget(&mut self) {
        let now = self.now;
        let ks = &self.ks;
        self.leftover
            .retain(|key| ks.pexpire_at(key, now).is_some());
        if self.fates.is_empty() && self.doomed.is_empty() {
            return;
        }
        let clients = &self.clients;
        let named = |hold: &Arc<str>| {
            clients.iter().any(|c| {
                c.guards.iter().any(|g| g.state.hold() == hold)
                    || c.waiting.as_ref().is_some_and(|w| w.hold == *hold)
                    || (c.flight.iter().map(|f| &f.op))
                        .chain(c.strays.iter().map(|s| &s.op))
                        .any(|op| op.names(hold))
            })
        };
        self.fates
            .retain(|hold, (_, fate)| *fate == Fate::Counted || named(hold));
        self.doomed.retain(named);
        let fates = &self.fates;
        self.levels
            .retain(|hold, _| fates.get(hold).map(|e| e.1) == Some(Fate::Counted));
    }

    /// Sends `call` for client `c`'s flight: Redis runs it, or it waits behind strays,
    /// times out (a stray), or is refused with `BUSY`.
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
            Op::Renew { items, shapes, .. } => renew_call_shaped(LEASE, items, shapes).0,
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
        let own: Option<Vec<u8>> = match op {
            Op::Acquire { request, .. } => Some(field(&request.hold, request.kind)),
            Op::Release { hold, kind, .. } => Some(field(hold, *kind)),
            Op::Renew { .. } => None,
        };
        let ended = before.exists() && !after.exists();
        let read_release = matches!(
            op,
            Op::Release {
                kind: RwKind::Read,
                ..
            }
        );
        // Nothing but a call of the owner's changes its count (a renewal changes none),
        // but a read release that ends the hash over readers whose timeout keys all went.
        let fields: BTreeSet<&Vec<u8>> = before.fields.keys().chain(after.fields.keys()).collect();
        for f in fields {
            if Some(f) == own.as_ref() || before.count(f) == after.count(f) {
                continue;
            }
            let dead_reader =
                read_release && ended && !f.ends_with(b":write") && before.live_levels(f) == 0;
            if !dead_reader {
                let (was, is) = (before.count(f), after.count(f));
                let message = format!(
                    "{:?} changed {}'s count from {was} to {is}",
                    call.script,
                    show(f)
                );
                fx.fail("release is true", message);
            }
        }
        // Nothing shortens the hash's expiry but its end, or a read release down to the
        // longest live timeout of the readers left (none of them writing).
        if let (Some(Some(was)), Some(Some(is))) = (before.expiry, after.expiry)
            && is < was
        {
            let allowed = read_release
                && after.writers().is_empty()
                && after.longest_level().is_some_and(|longest| longest <= is);
            if !allowed {
                let message = format!(
                    "{:?} moved the hash's expiry from t={} to t={}",
                    call.script,
                    t(was),
                    t(is)
                );
                fx.fail("release is true", message);
            }
        }
        // Redisson's readers and writers wake on the message of the release that ends the
        // hash: `0` after a read, `1` after a write.
        let expected: Published = match (ended, op) {
            (true, Op::Release { kind, .. }) => {
                let message = match kind {
                    RwKind::Read => b"0".to_vec(),
                    RwKind::Write => b"1".to_vec(),
                };
                vec![(keys.rw_channel.as_bytes().to_vec(), message)]
            }
            _ => Vec::new(),
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
            Op::Release {
                hold,
                kind,
                leaving,
                ..
            } => {
                ran.removed_now =
                    self.on_give_back_ran(c, hold, *kind, *leaving, &before, &after, fx);
                if ran.removed_now && *leaving {
                    fx.reach("a cancelled grant was given back");
                }
                if ran.removed_now && ended {
                    fx.reach(match kind {
                        RwKind::Read => "a read release emptied the lock and woke the waiters",
                        RwKind::Write => "a write release emptied the lock and woke the waiters",
                    });
                }
                let f = field(hold, *kind);
                if ran.removed_now && !*leaving && after.count(&f) > 0 {
                    fx.reach("a re-entered hold was given back, another kept");
                }
                let read_field = field(hold, RwKind::Read);
                if ran.removed_now
                    && *kind == RwKind::Write
                    && after.count(&f) == 0
                    && after.count(&read_field) > 0
                {
                    fx.reach("a downgrade: the write was given back while its owner read");
                }
                if !ran.removed_now && reply == Reply::Int(1) {
                    fx.reach("a re-sent give-back was answered by its record");
                }
            }
            Op::Renew { items, shapes, .. } => {
                let live = items.iter().zip(shapes).map(|(item, shape)| {
                    let owner = owner_bytes(&item.hold);
                    if *shape == HoldShape::RedissonWrite {
                        return match before.count(&field(&item.hold, RwKind::Write)) > 0 {
                            true => Live::Whole,
                            false => Live::Gone,
                        };
                    }
                    let (count, live) = (before.count(owner), before.live_levels(owner));
                    match (count, live) {
                        (0, _) | (_, 0) => Live::Gone,
                        _ if live == count => Live::Whole,
                        _ => Live::Partial,
                    }
                });
                ran.live = live.collect();
            }
        }
        // A release that ended the hash took the dead readers' counts along.
        if ended {
            for (_, fate) in self.fates.values_mut() {
                if *fate == Fate::Counted {
                    *fate = Fate::Lost { record: true };
                }
            }
        }
        ran
    }

    fn fate(&self, hold: &Arc<str>) -> Option<Fate> {
        self.fates.get(hold).map(|e| e.1)
    }

    /// The counted holds of `f` (a side's field).
    fn counted_in(&self, f: &[u8], kind: RwKind) -> Vec<Arc<str>> {
        (self.fates.iter())
            .filter(|(h, (k, fate))| *k == kind && *fate == Fate::Counted && field(h, *k) == f)
            .map(|(h, _)| h.clone())
            .collect()
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
        let kind = request.kind;
        let owner = request.owner.as_bytes();
        let f = field(&request.hold, kind);
        let write_field = field(&request.hold, RwKind::Write);
        let name = format!("{} {}", side_name(kind), show(request.hold.as_bytes()));
        let fate = self.fate(&request.hold);
        let granted = says_granted(reply);
        match after.count(&f) - before.count(&f) {
            1 => {
                // A write only alone (but its owner's reads while it writes), a read never
                // beside another owner's write.
                let writes = before.count(&write_field) > 0;
                let intruder = before.fields.keys().find(|g| match kind {
                    RwKind::Write => *g != &write_field && !(g.as_slice() == owner && writes),
                    RwKind::Read => g.ends_with(b":write") && *g != &write_field,
                });
                if let Some(other) = intruder {
                    let message = format!("{name} granted beside {}", show(other));
                    fx.fail("readers-writers exclusion", message);
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
                if kind == RwKind::Read {
                    let other_reader = (before.fields.keys())
                        .any(|g| !g.ends_with(b":write") && g.as_slice() != owner);
                    if other_reader {
                        fx.reach("two owners read at once");
                    }
                    if writes {
                        fx.reach("a writer read while writing");
                    }
                }
                if before.count(&f) > 0 {
                    fx.reach("an owner re-entered");
                    // Another client's guard has a count in the same field.
                    let counted = |g: &Held| {
                        g.kind == kind
                            && field(g.state.hold(), kind) == f
                            && self.fate(g.state.hold()) == Some(Fate::Counted)
                    };
                    let others = (self.clients.iter().enumerate()).filter(|(o, _)| *o != c);
                    if others.flat_map(|(_, cl)| &cl.guards).any(counted) {
                        fx.reach("an owner re-entered across handles");
                    }
                }
                self.fates
                    .insert(request.hold.clone(), (kind, Fate::Counted));
                if kind == RwKind::Read {
                    self.levels.insert(request.hold.clone(), after.count(&f));
                }
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
            0 => {
                // Redisson has no upgrade: an owner that reads and asks for the write is
                // told so, not made to wait for itself.
                let upgrade = kind == RwKind::Write
                    && before.count(owner) > 0
                    && before.count(&write_field) == 0;
                if upgrade && !says_no_upgrade(reply) {
                    let message = format!("the upgrade {name} was answered {reply:?}");
                    fx.fail("readers-writers exclusion", message);
                }
                false
            }
            delta => {
                let message = format!("acquire {name} changed its field's count by {delta}");
                fx.fail("exactly once", message);
                false
            }
        }
    }

    /// The oracle's reading of a give-back's run: whether it gave a count back.
    #[allow(clippy::too_many_arguments)]
    fn on_give_back_ran(
        &mut self,
        c: usize,
        hold: &Arc<str>,
        kind: RwKind,
        leaving: bool,
        before: &Snapshot,
        after: &Snapshot,
        fx: &mut Effects,
    ) -> bool {
        let f = field(hold, kind);
        let owner = owner_bytes(hold);
        let name = format!("{} {}", side_name(kind), show(hold.as_bytes()));
        let fate = self.fate(hold);
        let top = before.count(&f);
        // A read give-back that ends the hash takes its owner's other counts along when
        // none of their timeout keys lives (they are dead: nobody can believe in them).
        let dead_rest = kind == RwKind::Read
            && !after.exists()
            && top > 1
            && (1..top).all(|k| before.level(owner, k).is_none());
        let delta = match after.count(&f) - top {
            delta if dead_rest && delta == -top => -1,
            delta => delta,
        };
        match delta {
            0 => false,
            -1 => {
                // A read give-back deletes its owner's top level, whichever hold it is.
                let at_top = (self.levels.iter())
                    .find(|(h, level)| **level == top && *h != hold && field(h, kind) == f)
                    .map(|(h, _)| h.clone());
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
                        // join only while its field exists: no later hold of it can exist
                        // for a stale give-back to take.
                        fx.fail(
                            "exactly once",
                            format!("a stale give-back of {name} took a count of its fresh owner"),
                        );
                    }
                    let victims = self.counted_in(&f, kind);
                    // One of them lost its count (a read: the one on the top level, whose
                    // key went), nobody can say which: all are doomed.
                    self.doomed.extend(victims.iter().cloned());
                    let victim = match kind {
                        RwKind::Read => at_top,
                        RwKind::Write => victims.first().cloned(),
                    };
                    if let Some(victim) = victim {
                        self.fates
                            .insert(victim, (kind, Fate::Lost { record: true }));
                    }
                } else if let (Some(own), Some(moved)) = (self.levels.get(hold).copied(), at_top) {
                    // The top level's key went. `redisson_rw_release.lua` gives its expiry
                    // to the owner's shortest remaining key when that is longer (the first
                    // such level, as PTTL orders them: no key, no expiry, then by expiry):
                    // the hold on the top level stands on that level now, and the hold that
                    // stood there (another than this one) on this one's. Otherwise the
                    // top's hold takes this one's level. A key shorter than its hold's
                    // belief is then caught by "belief is true".
                    let rank = |k: i64| match before.level(owner, k) {
                        None => 0,
                        Some(u64::MAX) => 1,
                        Some(at) => at.saturating_add(2),
                    };
                    let shortest = (1..top).min_by_key(|&k| rank(k));
                    match shortest {
                        Some(s) if rank(s) < rank(top) && rank(top) > 1 => {
                            let displaced = (self.levels.iter())
                                .find(|(h, level)| {
                                    **level == s && *h != hold && field(h, kind) == f
                                })
                                .map(|(h, _)| h.clone());
                            self.levels.insert(moved.clone(), s);
                            if let Some(displaced) = displaced {
                                self.levels.insert(displaced, own);
                            }
                        }
                        _ => {
                            self.levels.insert(moved.clone(), own);
                        }
                    }
                }
                self.fates
                    .insert(hold.clone(), (kind, Fate::GivenBack { record: true }));
                true
            }
            delta => {
                let message = format!("give-back of {name} changed its field's count by {delta}");
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
            Op::Acquire { request, resend } => {
                let done = resent(resend);
                let decoded = decode_rw_acquire(&reply);
                // A refused upgrade must end the acquisition: a waiter would wait for itself.
                if says_no_upgrade(&reply) && !matches!(decoded, Ok(Attempted::Refused(_))) {
                    let message = format!("a refused upgrade read as {decoded:?}");
                    fx.fail("readers-writers exclusion", message);
                }
                match decoded {
                    Ok(Attempted::Granted(_)) => {
                        if flight.retried && flight.existed {
                            fx.reach("a retried acquire found its hold");
                        }
                        if request.refused {
                            fx.reach("a waiter was granted after a refusal");
                        }
                        // Confirmed from the send time the library's machine says.
                        let state = HoldState::new(request.hold, done.first_sent_at, LEASE, true);
                        let kind = request.kind;
                        self.clients[c].guards.push(Held { state, kind });
                    }
                    Ok(Attempted::Wait(_)) if request.waits => {
                        let refused = true;
                        self.clients[c].waiting = Some(Request { refused, ..request });
                    }
                    Ok(Attempted::Wait(within)) => {
                        fx.reach("a single attempt was refused");
                        if single_attempt_gives_back(request.kind, now, within) {
                            self.abandon(c, request.hold, request.kind, world, fx);
                        }
                    }
                    Ok(attempted @ Attempted::Refused(_)) => {
                        fx.reach("an upgrade was refused");
                        if refused_gives_back(&request, &attempted, done.after_loss, now) {
                            self.abandon(c, request.hold, request.kind, world, fx);
                        }
                    }
                    other => fx.fail("belief is true", format!("an attempt read as {other:?}")),
                }
            }
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
                ..
            } => {
                // Belief rests on what renewals say: a renewal must tell the truth.
                let Some(status) = check_renewal(&items, &order, &reply, &flight.live, fx) else {
                    return;
                };
                let doomed = &self.doomed;
                let client = &mut self.clients[c];
                for (status, &i) in status.iter().zip(&order) {
                    let item = &items[i];
                    let held = client
                        .guards
                        .iter_mut()
                        .find(|g| g.state.hold() == &item.hold);
                    let Some(guard) = held else {
                        continue; // released since
                    };
                    if *status == Renewed::Current {
                        guard.state.on_renewal(item.renew, sent_at, LEASE);
                        if now > START + LEASE {
                            fx.reach("a renewal kept a hold past its first lease");
                        }
                    } else if guard.state.on_gone().is_some() && doomed.contains(&item.hold) {
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
        // Exclusive in Redis: a writer's field with no other owner's.
        let writers = hash.writers();
        if let Some(writer) = writers.first() {
            let other = hash.fields.keys().find(|f| field_owner(f) != *writer);
            if let Some(other) = other {
                let message = format!("Redis holds {}:write and {}", show(writer), show(other));
                fx.fail("readers-writers exclusion", message);
            }
        }
        // The mode says who holds: Redisson's readers and writers read it.
        if hash.exists() {
            let fits = match hash.mode.as_deref() {
                Some(b"write") => writers.len() == 1,
                Some(b"read") => writers.is_empty() && !hash.fields.is_empty(),
                _ => false,
            };
            if !fits {
                let mode = hash.mode.as_deref().map(show);
                let message = format!("mode {mode:?} with {} field(s)", hash.fields.len());
                fx.fail("no orphans, no garbage", message);
            }
        }
        // Exactly once: each field's count is the holds the oracle counts for it.
        let mut counted: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
        for (hold, (kind, fate)) in &self.fates {
            if *fate == Fate::Counted {
                *counted.entry(field(hold, *kind)).or_default() += 1;
            }
        }
        let all: BTreeSet<&Vec<u8>> = hash.fields.keys().chain(counted.keys()).collect();
        for f in all {
            let (redis, oracle) = (hash.count(f), counted.get(f).copied().unwrap_or(0));
            if redis != oracle {
                let message = format!("{}'s count is {redis}, its holds counted {oracle}", show(f));
                fx.fail("exactly once", message);
            }
        }
        // Who believes what: each believed hold counted, the hash (and a read's timeout
        // key) lasting at least until its deadline; a doomed belief is excused.
        let mut believers = Vec::new();
        let mut wiped = Vec::new();
        for (c, guard) in self.believed() {
            let hold = guard.state.hold();
            let owner = owner_bytes(hold);
            if self.doomed.contains(hold) {
                wiped.push(owner);
                continue;
            }
            believers.push((c, owner, guard.kind, hold));
            let deadline = guard.state.deadline();
            let counted = self.fate(hold) == Some(Fate::Counted);
            let until = hash.expiry.flatten();
            let level = self.levels.get(hold).copied();
            let key_until = level.and_then(|level| hash.level(owner, level));
            let problem = if !counted {
                Some(format!("{:?}", self.fate(hold)))
            } else if until.is_none_or(|at| at < deadline) {
                Some(format!("the hash until {:?}", until.map(t)))
            } else if guard.kind == RwKind::Read && key_until.is_none_or(|at| at < deadline) {
                let at = key_until.map(|at| t(at.min(Millis::MAX / 2)));
                Some(format!("its timeout key (level {level:?}) until {at:?}"))
            } else {
                None
            };
            if let Some(problem) = problem {
                let message = format!(
                    "client {c} believes in {} {} until t={}, Redis has {problem}",
                    side_name(guard.kind),
                    show(hold.as_bytes()),
                    t(deadline),
                );
                fx.fail("belief is true", message);
            }
        }
        for a in &believers {
            if a.2 != RwKind::Write {
                continue;
            }
            if let Some(b) = believers.iter().find(|b| b.1 != a.1) {
                let message = format!(
                    "client {} writes {} while client {} holds {} {}",
                    a.0,
                    show(a.3.as_bytes()),
                    b.0,
                    side_name(b.2),
                    show(b.3.as_bytes())
                );
                fx.fail("readers-writers exclusion", message);
            }
        }
        if (wiped.iter()).any(|w| believers.iter().any(|b| b.1 != *w)) {
            fx.reach("a wiped holder and a new one both believed");
        }
        // No orphans: with nothing in flight, every counted hold is some guard's.
        if self.clients.iter().all(|c| c.flight.is_none()) {
            let guarded = |hold: &Arc<str>| {
                (self.clients.iter()).any(|c| c.guards.iter().any(|g| g.state.hold() == hold))
            };
            let orphan = (self.fates.iter()).find(|(h, (_, f))| *f == Fate::Counted && !guarded(h));
            if let Some((hold, _)) = orphan {
                let message = format!("counted hold {} belongs to no guard", show(hold.as_bytes()));
                fx.fail("no orphans, no garbage", message);
            }
        }
        // No garbage: the hash (positive counts, a TTL within a lease), the timeout keys
        // (a TTL within a lease, each a level its owner counts, but a force-unlock's
        // leftovers) and the records (a TTL within their lifetime), nothing else.
        for key in self.ks.keys(now) {
            let expiry = self.ks.pexpire_at(&key, now).flatten();
            let problem = if key == keys.hash.as_bytes() {
                if let Some((f, count)) = hash.fields.iter().find(|(_, n)| **n < 1) {
                    Some(format!("has {} at {count}", show(f)))
                } else if expiry.is_none_or(|at| at > now + LEASE) {
                    Some(format!("expires at {:?}", expiry.map(t)))
                } else {
                    None
                }
            } else if let Some((owner, level)) = level_of(keys, &key) {
                if expiry.is_none_or(|at| at > now + LEASE) {
                    Some(format!("expires at {:?}", expiry.map(t)))
                } else if level > hash.count(&owner) && !self.leftover.contains(&key) {
                    Some(format!("stands for no level {} counts", show(&owner)))
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

    /// One line: the clock, Redis's hash and timeout keys, and each client's beliefs and
    /// calls.
    pub fn describe(&self) -> String {
        let keys = keys();
        let now = self.now;
        let hash = Snapshot::of(&self.ks, &keys, now);
        let fields: Vec<String> = (hash.fields.iter())
            .map(|(f, count)| format!("{}={count}", show(f)))
            .collect();
        let until = match hash.expiry {
            Some(Some(at)) => format!(" until t={}", t(at)),
            _ => String::new(),
        };
        let mode = hash.mode.as_deref().map(show).unwrap_or_default();
        let levels: Vec<String> = (hash.levels.iter())
            .map(|((owner, k), at)| {
                let at = at.map(|at| t(at).to_string()).unwrap_or("-".into());
                format!("{}:{k}@{at}", show(owner))
            })
            .collect();
        let records = (self.ks.keys(now).iter())
            .filter(|k| k.starts_with(keys.record_prefix.as_bytes()))
            .count();
        let mut out = format!(
            "t={} redis: hash[{mode} {}]{until} timeouts[{}] records:{records}",
            t(now),
            fields.join(" "),
            levels.join(" ")
        );
        if self.busy_next {
            out += " (the next call gets BUSY)";
        }
        if self.timeout_next {
            out += " (the next call times out)";
        }
        let fates: Vec<String> = (self.fates.iter())
            .map(|(h, (k, f))| {
                let level = self
                    .levels
                    .get(h)
                    .map(|l| format!("@{l}"))
                    .unwrap_or_default();
                format!("{}:{}:{f:?}{level}", show(h.as_bytes()), side_name(*k))
            })
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
                let state = &guard.state;
                let believed = state.lost().is_none() && now < state.deadline();
                let note = if believed { "" } else { " (not believed)" };
                let hold = show(state.hold().as_bytes());
                let side = side_name(guard.kind);
                out += &format!(" {side} {hold} until {}{note}", t(state.deadline()));
            }
            if let Some(waiting) = &client.waiting {
                let side = side_name(waiting.kind);
                out += &format!(" waiting {side} {}", show(waiting.hold.as_bytes()));
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

/// The Redisson-layout read-write lock's model, for the one checker
/// (`tests/protocol/checker.rs`).
pub struct RedissonRw;

impl Model for RedissonRw {
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

const BOTH: &[RwKind] = &[RwKind::Read, RwKind::Write];
const READS: &[RwKind] = &[RwKind::Read];

/// A configuration with nothing in it but its name, parties and sides.
fn base(name: &'static str, owners: Vec<Option<&'static str>>, sides: &'static [RwKind]) -> Config {
    Config {
        name,
        owners,
        sides,
        acquires: 0,
        reenters: 0,
        downgrades: 0,
        asks: 0,
        advances: 0,
        faults: 0,
        renewals: 0,
        restarts: 0,
        force_unlocks: 0,
        busy: 0,
        timeouts: 0,
        drops: 0,
        required: Vec::new(),
    }
}

/// The configuration that showed the gap this model found (see the header): a re-entered
/// read whose older sibling is given back first, then time passes. It passes since the
/// release keeps the owner's longest timeout keys; `tests/redisson_rw_teeth.rs` plants the
/// old release back and requires this configuration to catch it.
pub const KNOWN_GAP: &str = "redisson rw: re-entered reads given back oldest first";

/// The default configurations.
pub fn configs() -> Vec<Config> {
    let two = || vec![None, None];
    vec![
        Config {
            acquires: 3,
            reenters: 1,
            downgrades: 1,
            asks: 1,
            advances: 1,
            required: vec![
                "two owners read at once",
                "an owner re-entered",
                "a writer read while writing",
                "a downgrade: the write was given back while its owner read",
                "a waiter was granted after a refusal",
                "a single attempt was refused",
                "a waiter gave up",
                "a cancelled grant was given back",
                "a read release emptied the lock and woke the waiters",
                "a write release emptied the lock and woke the waiters",
                "a re-entered hold was given back, another kept",
            ],
            ..base(
                "redisson rw: readers and writers, waits, re-entry, downgrade",
                two(),
                BOTH,
            )
        },
        Config {
            acquires: 2,
            reenters: 1,
            asks: 1,
            advances: 3,
            faults: 1,
            renewals: 1,
            required: vec![
                "a retried acquire found its hold",
                "a re-sent give-back was answered by its record",
                "a renewal kept a hold past its first lease",
                "a hold expired in Redis",
            ],
            ..base("redisson rw: lost replies, expiry and renewal", two(), BOTH)
        },
        shared_owner(),
        Config {
            acquires: 2,
            advances: 1,
            faults: 1,
            renewals: 1,
            restarts: 1,
            busy: 1,
            required: vec![
                "a restart emptied the keyspace while a hold was believed",
                "a call refused as BUSY ran when re-sent",
                "a holder was told its wiped hold is lost",
                "a wiped holder and a new one both believed",
            ],
            ..base("redisson rw: a restart, BUSY and a lost reply", two(), BOTH)
        },
        Config {
            acquires: 2,
            reenters: 1,
            asks: 1,
            advances: 1,
            faults: 1,
            renewals: 1,
            force_unlocks: 1,
            required: vec![
                "a force-unlock took a believed hold",
                "a holder was told its wiped hold is lost",
                "a wiped holder and a new one both believed",
            ],
            ..base(
                "redisson rw: a Redisson force-unlock, a lost reply and renewal",
                two(),
                BOTH,
            )
        },
        Config {
            acquires: 2,
            asks: 1,
            advances: 2,
            renewals: 1,
            timeouts: 1,
            drops: 1,
            required: [
                vec!["a retried acquire found its hold"],
                STRAY_MILESTONES.to_vec(),
            ]
            .concat(),
            ..base(
                "redisson rw: late requests: timeouts, a dropped acquire, renewal",
                two(),
                BOTH,
            )
        },
        Config {
            acquires: 2,
            restarts: 1,
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
            ..base(
                "redisson rw: late requests, a restart and BUSY",
                two(),
                BOTH,
            )
        },
        Config {
            acquires: 2,
            asks: 1,
            advances: 1,
            renewals: 1,
            force_unlocks: 1,
            timeouts: 1,
            drops: 1,
            required: vec![
                "a stray sent before a force-unlock ran after it",
                "a force-unlock took a believed hold",
                "a holder was told its wiped hold is lost",
                "a stray acquire ran after its client gave up",
            ],
            ..base("redisson rw: late requests and a force-unlock", two(), BOTH)
        },
        known_gap(),
    ]
}

/// Two clients of handles with one explicit owner (`with_owner`) and a third: holds
/// re-enter across handles, an owner that reads asks for the write (refused), and a write
/// that expired is taken again by its owner's other client, whose count the first one's
/// give-back then takes (the layout's weaker guarantee, see the header).
pub fn shared_owner() -> Config {
    Config {
        acquires: 2,
        asks: 1,
        advances: 2,
        required: vec![
            "an owner re-entered",
            "an owner re-entered across handles",
            "an upgrade was refused",
            "a stale give-back took a count of its owner's later hold",
        ],
        ..base(
            "redisson rw: one explicit owner on two clients",
            vec![Some("a"), Some("a"), Some("b")],
            BOTH,
        )
    }
}

/// The gap this model found (see the header): one client's reads, a re-entry, and the
/// clock.
pub fn known_gap() -> Config {
    Config {
        acquires: 1,
        reenters: 1,
        advances: 2,
        ..base(KNOWN_GAP, vec![None], READS)
    }
}

/// The milestones default configuration `name` must reach at the default bound.
pub fn must_reach(name: &str) -> Vec<&'static str> {
    let mut all = configs().into_iter();
    all.find(|c| c.name == name)
        .map(|c| c.required)
        .unwrap_or_default()
}
