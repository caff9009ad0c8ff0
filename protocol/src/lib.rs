//! The lock protocol of [redis-locks](https://crates.io/crates/redis-locks) as a sans-IO
//! core: every decision the client makes, with no I/O, no clock, no tokio and no
//! dependencies.
//!
//! Most users want the `redis-locks` crate, not this one. This crate exists so that the
//! code the protocol checkers explore is the code that ships: the async client
//! (`redis-locks`' `src/drive.rs`) drives these types against Redis through one loop, and
//! the checkers (`redis-locks`' `tests/*_check.rs`) drive the same types inside models that
//! run the real scripts of `lua/` against an in-memory keyspace and explore every
//! interleaving of users, replies, faults and time.
//!
//! # Versioning
//! Released in lockstep with `redis-locks`, which re-exports two of its types
//! ([`hold::LostReason`] and [`rwlock::RwKind`]): a breaking change here is a breaking
//! change there. Its API follows the engine's needs; it is public so that the checkers can
//! drive it, and so that another runtime could.
//!
//! The cut, after quinn-proto: an operation is a [`Machine`]. It is started, fed the
//! [`Reply`] or [`Failure`] of each call it asks for and the end of each sleep, and answers
//! with what to do next ([`Next`]: send a [`Call`], sleep until a time, or done with an
//! outcome). Time, randomness and request ids come in through [`Env`] ([`Millis`]: the
//! driver's monotonic clock).
//!
//! * [`attempt`]: one acquire attempt of the reentrant lock in its lane, and background
//!   reconciliation of an attempt whose reply was lost; [`acquire`] and [`lane`]: its
//!   call, reply and probe, and the per-(lock, owner) lane.
//! * [`release`]: giving back one hold, exactly once, retrying through lost replies and
//!   transient server states, after resolving a pending lost acquire.
//! * [`resend`]: one idempotent call re-sent as it was (the sorted-set kinds, the latch),
//!   and what a give-back found.
//! * [`wait`]: the waiting loop of an acquire, for every kind that waits for a release:
//!   attempts, subscription, pttl-bounded sleeps, wake-ups passed on, errors ridden out,
//!   and what an acquire that ends without a grant gives back.
//! * [`hold`]: what a client knows about one hold: until when its lease is confirmed, and
//!   whether it is lost.
//! * [`renew`]: the watchdog's batched renewal call and how to read its reply.
//! * [`semaphore`], [`rwlock`], [`fair`], [`latch`]: the calls of the semaphore, the
//!   read-write lock, the fair lock and the latch.
//! * [`redisson`]: the calls of a lock kept in Redisson's RLock layout.
//! * [`multi`], [`redlock`]: the multi-lock's order and all-or-none walk; RedLock's quorum
//!   and validity.
//! * [`mod@backoff`]: the one back-off policy.
//! * [`planted`]: the defects the checkers' teeth switch on (feature `planted-defects`).

#![warn(missing_docs)]

pub mod acquire;
pub mod args;
pub mod attempt;
pub mod attempted;
pub mod backoff;
pub mod extend;
pub mod fair;
pub mod force;
pub mod hold;
pub mod lane;
pub mod latch;
pub mod multi;
pub mod planted;
pub mod redisson;
pub mod redlock;
pub mod release;
pub mod renew;
pub mod resend;
pub mod rwlock;
pub mod semaphore;
pub mod timing;
pub mod wait;

use std::sync::Arc;

/// Milliseconds on the driver's monotonic clock.
pub type Millis = u64;

/// The scripts of `lua/`, by role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScriptId {
    /// `lua/take.lua`: sent as the bare command it wraps (`SET NX PX`).
    Take,
    /// `lua/acquire.lua`
    Acquire,
    /// `lua/release.lua`
    Release,
    /// `lua/release_first.lua`: a release of a hold still in the string form, when the
    /// client never re-entered it.
    ReleaseFirst,
    /// `lua/probe.lua`
    Probe,
    /// `lua/renew.lua`
    Renew,
    /// `lua/force_unlock.lua`
    ForceUnlock,
    /// `lua/inspect.lua`
    Inspect,
    /// `lua/latch_set.lua`
    LatchSet,
    /// `lua/latch_count_down.lua`
    LatchCountDown,
    /// `lua/latch_delete.lua`
    LatchDelete,
    /// `lua/latch_count.lua`
    LatchCount,
    /// `lua/sem_acquire.lua`
    SemAcquire,
    /// `lua/sem_release.lua`
    SemRelease,
    /// `lua/sem_renew.lua`
    SemRenew,
    /// `lua/sem_set.lua`
    SemSet,
    /// `lua/sem_state.lua`
    SemState,
    /// `lua/rw_acquire.lua`
    RwAcquire,
    /// `lua/rw_release.lua`
    RwRelease,
    /// `lua/rw_state.lua`
    RwState,
    /// `lua/fair_acquire.lua`
    FairAcquire,
    /// `lua/fair_release.lua`
    FairRelease,
    /// `lua/fair_state.lua`
    FairState,
    /// `lua/force_delete.lua`
    ForceDelete,
    /// `lua/redisson_acquire.lua`
    RedissonAcquire,
    /// `lua/redisson_release.lua`
    RedissonRelease,
    /// `lua/redisson_renew.lua`
    RedissonRenew,
    /// `lua/redisson_state.lua`
    RedissonState,
    /// `lua/redisson_force_unlock.lua`
    RedissonForceUnlock,
    /// `lua/redisson_rw_acquire.lua`
    RedissonRwAcquire,
    /// `lua/redisson_rw_release.lua`
    RedissonRwRelease,
    /// `lua/redisson_latch_set.lua`
    RedissonLatchSet,
    /// `lua/redisson_latch_count_down.lua`
    RedissonLatchCountDown,
    /// `lua/redisson_latch_delete.lua`
    RedissonLatchDelete,
    /// `lua/redisson_latch_count.lua`
    RedissonLatchCount,
}

impl ScriptId {
    /// The script's source, as loaded by the library (the same bytes the checker runs).
    pub fn source(self) -> &'static str {
        match self {
            ScriptId::Take => include_str!("../lua/take.lua"),
            ScriptId::Acquire => include_str!("../lua/acquire.lua"),
            ScriptId::Release => include_str!("../lua/release.lua"),
            ScriptId::ReleaseFirst => include_str!("../lua/release_first.lua"),
            ScriptId::Probe => include_str!("../lua/probe.lua"),
            ScriptId::Renew => include_str!("../lua/renew.lua"),
            ScriptId::ForceUnlock => include_str!("../lua/force_unlock.lua"),
            ScriptId::Inspect => include_str!("../lua/inspect.lua"),
            ScriptId::LatchSet => include_str!("../lua/latch_set.lua"),
            ScriptId::LatchCountDown => include_str!("../lua/latch_count_down.lua"),
            ScriptId::LatchDelete => include_str!("../lua/latch_delete.lua"),
            ScriptId::LatchCount => include_str!("../lua/latch_count.lua"),
            ScriptId::SemAcquire => include_str!("../lua/sem_acquire.lua"),
            ScriptId::SemRelease => include_str!("../lua/sem_release.lua"),
            ScriptId::SemRenew => include_str!("../lua/sem_renew.lua"),
            ScriptId::SemSet => include_str!("../lua/sem_set.lua"),
            ScriptId::SemState => include_str!("../lua/sem_state.lua"),
            ScriptId::RwAcquire => include_str!("../lua/rw_acquire.lua"),
            ScriptId::RwRelease => include_str!("../lua/rw_release.lua"),
            ScriptId::RwState => include_str!("../lua/rw_state.lua"),
            ScriptId::FairAcquire => include_str!("../lua/fair_acquire.lua"),
            ScriptId::FairRelease => include_str!("../lua/fair_release.lua"),
            ScriptId::FairState => include_str!("../lua/fair_state.lua"),
            ScriptId::ForceDelete => include_str!("../lua/force_delete.lua"),
            ScriptId::RedissonAcquire => include_str!("../lua/redisson_acquire.lua"),
            ScriptId::RedissonRelease => include_str!("../lua/redisson_release.lua"),
            ScriptId::RedissonRenew => include_str!("../lua/redisson_renew.lua"),
            ScriptId::RedissonState => include_str!("../lua/redisson_state.lua"),
            ScriptId::RedissonForceUnlock => include_str!("../lua/redisson_force_unlock.lua"),
            ScriptId::RedissonRwAcquire => include_str!("../lua/redisson_rw_acquire.lua"),
            ScriptId::RedissonRwRelease => include_str!("../lua/redisson_rw_release.lua"),
            ScriptId::RedissonLatchSet => include_str!("../lua/redisson_latch_set.lua"),
            ScriptId::RedissonLatchCountDown => {
                include_str!("../lua/redisson_latch_count_down.lua")
            }
            ScriptId::RedissonLatchDelete => include_str!("../lua/redisson_latch_delete.lua"),
            ScriptId::RedissonLatchCount => include_str!("../lua/redisson_latch_count.lua"),
        }
    }

    /// Every script.
    pub const ALL: [ScriptId; 35] = [
        ScriptId::Take,
        ScriptId::Acquire,
        ScriptId::Release,
        ScriptId::ReleaseFirst,
        ScriptId::Probe,
        ScriptId::Renew,
        ScriptId::ForceUnlock,
        ScriptId::Inspect,
        ScriptId::LatchSet,
        ScriptId::LatchCountDown,
        ScriptId::LatchDelete,
        ScriptId::LatchCount,
        ScriptId::SemAcquire,
        ScriptId::SemRelease,
        ScriptId::SemRenew,
        ScriptId::SemSet,
        ScriptId::SemState,
        ScriptId::RwAcquire,
        ScriptId::RwRelease,
        ScriptId::RwState,
        ScriptId::FairAcquire,
        ScriptId::FairRelease,
        ScriptId::FairState,
        ScriptId::ForceDelete,
        ScriptId::RedissonAcquire,
        ScriptId::RedissonRelease,
        ScriptId::RedissonRenew,
        ScriptId::RedissonState,
        ScriptId::RedissonForceUnlock,
        ScriptId::RedissonRwAcquire,
        ScriptId::RedissonRwRelease,
        ScriptId::RedissonLatchSet,
        ScriptId::RedissonLatchCountDown,
        ScriptId::RedissonLatchDelete,
        ScriptId::RedissonLatchCount,
    ];
}

/// One script call to send: `EVALSHA <script> <keys> <args>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Call {
    /// Which script.
    pub script: ScriptId,
    /// KEYS.
    pub keys: Vec<Arc<str>>,
    /// ARGV (shared strings: a renewal batch names hundreds of hold ids without copying
    /// them).
    pub args: Vec<Arc<str>>,
}

/// A script's reply, as Redis converts a Lua value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Reply {
    /// nil / false
    Nil,
    /// An integer (a Lua number, truncated).
    Int(i64),
    /// A string.
    Bulk(Vec<u8>),
    /// A status reply (`{ok = ...}`).
    Status(String),
    /// An error reply (`{err = ...}` or a failed `redis.call`).
    Error(String),
    /// An array.
    Array(Vec<Reply>),
}

impl Reply {
    fn int(&self) -> Option<i64> {
        match self {
            Reply::Int(n) => Some(*n),
            _ => None,
        }
    }

    /// A bulk string (if UTF-8) or a status line as text; `None` for any other reply.
    pub fn text(&self) -> Option<String> {
        match self {
            Reply::Bulk(bytes) => String::from_utf8(bytes.clone()).ok(),
            Reply::Status(text) => Some(text.clone()),
            _ => None,
        }
    }
}

/// Why a call got no usable reply. The driver classifies the error; the core decides.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Failure {
    /// The call was never sent (connection refused, not connected): it did not run.
    NotSent,
    /// The call was sent but its reply was lost (connection dropped): it may or may not
    /// have run.
    Lost,
    /// No reply within the response timeout: it may or may not have run, and the server
    /// (or the way to it) is slow enough that asking again at once would most likely time
    /// out too.
    TimedOut,
    /// The server answered with a transient state (`BUSY`, `LOADING`, `TRYAGAIN`,
    /// `MASTERDOWN`): the call did not run and may succeed later.
    Transient(String),
    /// A permanent error (`NOPERM`, `WRONGTYPE`, a script error, ...): retrying will not help.
    Permanent(String),
}

impl Failure {
    /// Classifies a server error reply's message by its first word.
    pub fn from_server_error(message: &str) -> Failure {
        let code = message.split_whitespace().next().unwrap_or("");
        let read_as_permanent = planted::is(planted::Defect::TransientReadAsPermanent)
            || (code == "LOADING" && planted::is(planted::Defect::LoadingReadAsPermanent));
        if TRANSIENT_CODES.contains(&code) && !read_as_permanent {
            Failure::Transient(message.to_owned())
        } else {
            Failure::Permanent(message.to_owned())
        }
    }

    /// Whether the call may have run on the server.
    pub fn may_have_run(&self) -> bool {
        matches!(self, Failure::Lost | Failure::TimedOut)
    }

    /// How a re-sent call's failure counts when `after_loss` (an earlier copy of it lost
    /// its reply): as a loss, whatever the last copy's error says (a refused connection, a
    /// `BUSY`), since the call may have run.
    pub fn after_earlier_loss(self, after_loss: bool) -> Failure {
        if after_loss && !self.may_have_run() {
            Failure::Lost
        } else {
            self
        }
    }
}

/// Server error codes of transient states: the command did not run and a retry may succeed.
pub const TRANSIENT_CODES: [&str; 8] = [
    "BUSY",
    "LOADING",
    "TRYAGAIN",
    "MASTERDOWN",
    "READONLY",
    "MOVED",
    "ASK",
    "CLUSTERDOWN",
];

/// What a core operation ([`attempt::AttemptOp`], [`release::ReleaseFlow`],
/// [`attempt::ReconcileRound`]) asks its driver to do next. The driver does it and feeds
/// the result back (`on_reply`, `on_failure`, `resume`); the operation records the send
/// time itself, from the [`Env`] it is given.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Next<T> {
    /// Send this call now, then feed back its reply or failure.
    Send(Call),
    /// Wait until this time on the driver's clock, then `resume`.
    SleepUntil(Millis),
    /// Finished with this outcome.
    Done(T),
}

/// A core operation, as its drivers see it: started, fed the results of the calls it asks
/// for and the ends of the sleeps it asks for, until it is done. The library's async
/// driver and the protocol checkers' models drive every operation through this one
/// interface, so neither can decide anything of its own. `Ctx` is the state it works in
/// besides its own: the (lock, owner) [`lane::Lane`] for the reentrant lock's operations,
/// nothing for a [`resend::Resend`].
pub trait Machine {
    /// The state the operation works in besides its own.
    type Ctx;
    /// What the operation ends with.
    type Outcome;
    /// Starts the operation.
    fn start(&mut self, env: &mut dyn Env, cx: &mut Self::Ctx) -> Next<Self::Outcome>;
    /// The call asked for got this reply.
    fn on_reply(
        &mut self,
        env: &mut dyn Env,
        cx: &mut Self::Ctx,
        reply: &Reply,
    ) -> Next<Self::Outcome>;
    /// The call asked for got no usable reply.
    fn on_failure(
        &mut self,
        env: &mut dyn Env,
        cx: &mut Self::Ctx,
        failure: Failure,
    ) -> Next<Self::Outcome>;
    /// The sleep asked for is over.
    fn resume(&mut self, env: &mut dyn Env, cx: &mut Self::Ctx) -> Next<Self::Outcome>;
}

/// What the core needs from the world around it: the time, randomness and fresh request
/// ids. The library's driver reads its monotonic clock and draws random jitter; the
/// protocol checker supplies its model clock and fixed numbers.
pub trait Env {
    /// Now, on the driver's monotonic clock.
    fn now(&self) -> Millis;
    /// Any random number (back-off jitter).
    fn jitter(&mut self) -> u64;
    /// A fresh request id (see [`RequestIds`]).
    fn next_id(&mut self) -> Arc<str>;
}

/// The back-off before retry number `attempt` (1-based) of [`backoff::Backoff::RETRY`]:
/// doubling from 25 ms to at most 1 s, plus up to half of it again from `jitter` (any
/// random number; the core draws none), in whole ms.
pub fn backoff(attempt: u32, jitter: u64) -> Millis {
    let mut policy = backoff::Backoff::RETRY;
    for _ in 0..attempt.min(6) {
        policy.pause(0);
    }
    policy.pause_ms(jitter)
}

/// The request ids a client hands out: `<client-tag>.<seq>`, unique per request and per
/// client. A fresh hold's id is the id of the acquire that created it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RequestIds {
    tag: Arc<str>,
    next: u64,
}

impl RequestIds {
    /// Ids under `tag`, which must not contain `.` and must differ between clients.
    pub fn new(tag: impl Into<Arc<str>>) -> Self {
        RequestIds {
            tag: tag.into(),
            next: 1,
        }
    }

    /// The next request id.
    pub fn next_id(&mut self) -> Arc<str> {
        let seq = self.next;
        self.next += 1;
        args::numbered(&[&self.tag, "."], seq)
    }
}

/// The keys of one lock that its scripts touch.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LockKeys {
    /// The lock hash `<prefix>:{<name>}`.
    pub hash: Arc<str>,
    /// The fencing counter `<prefix>:{<name>}:fence`.
    pub fence: Arc<str>,
    /// The release channel `<prefix>:{<name>}:db<n>:released`.
    pub channel: Arc<str>,
    /// Whether the channel is a sharded one (`SPUBLISH`, on a cluster) rather than a
    /// classic one (`PUBLISH`).
    pub sharded: bool,
}

impl LockKeys {
    /// The scripts' "publish how" argument: `'1'` sharded, `'0'` classic.
    pub fn publish_flag(&self) -> Arc<str> {
        args::number(u64::from(self.sharded))
    }
}

/// A call that deletes the lock whoever holds it (`force_unlock`).
pub fn force_unlock_call(keys: &LockKeys) -> Call {
    Call {
        script: ScriptId::ForceUnlock,
        keys: vec![keys.hash.clone()],
        args: vec![keys.channel.clone(), keys.publish_flag()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_codes_are_told_apart_from_permanent_ones() {
        assert_eq!(
            Failure::from_server_error("BUSY Redis is busy running a script"),
            Failure::Transient("BUSY Redis is busy running a script".into())
        );
        assert!(matches!(
            Failure::from_server_error("NOPERM this user has no permissions"),
            Failure::Permanent(_)
        ));
    }

    #[test]
    fn lost_and_timed_out_calls_may_have_run() {
        assert!(Failure::Lost.may_have_run());
        assert!(Failure::TimedOut.may_have_run());
        assert!(!Failure::NotSent.may_have_run());
        assert!(!Failure::Transient("BUSY".into()).may_have_run());
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        assert_eq!(backoff(1, 0), 50);
        assert_eq!(backoff(10, 0), 1_000);
        assert!(backoff(10, u64::MAX) <= 1_500);
    }

    #[test]
    fn request_ids_are_unique_and_parseable() {
        let mut ids = RequestIds::new("c1");
        assert_eq!(&*ids.next_id(), "c1.1");
        assert_eq!(&*ids.next_id(), "c1.2");
    }
}
