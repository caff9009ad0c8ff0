//! The RedLock model: one lock over N independent Redis servers (3 by default), two
//! clients with different owners, one clock.
//!
//! Every server's hold is an ordinary reentrant-lock hold, taken, probed and given back by
//! the library's own sans-IO core exactly as `src/redlock.rs` does it through
//! `Lock::try_acquire` and `LockGuard::release`: one [`AttemptOp`] per server in that
//! server's (lock, owner) [`Lane`], one [`ReleaseFlow`] per hold, the background
//! [`ReconcileRound`]s of an acquire whose reply was lost, the [`HoldState`] of each hold.
//! When every server's attempt has an outcome, or earlier, once the core's
//! `redlock::may_decide_early` says a majority granted ([`Step::DecideEarly`]), the client
//! asks the core's RedLock decision (`redis_locks_protocol::redlock::decide`) whether it
//! won, with the time spent since the attempt started. Every call runs the real `lua/*.lua` in the embedded Lua against
//! that server's own in-memory keyspace (`keyspace.rs`, `lua.rs`). What the model adds is
//! only the world: the users, the clock, the servers' outages, restarts and clock drift,
//! lost replies.
//!
//! Time is in model milliseconds; the client's clock is exact, and a request runs at its
//! send time (so the client's estimate of elapsed time is tight, the hardest case for the
//! properties). A server's clock may run ahead of the client's by up to the drift margin
//! over a whole run ([`MAX_SKEW`]): the assumption RedLock's drift margin stands for, spent
//! at once, its worst case.
//!
//! What a step is (and the reductions the model makes, each sound for the properties
//! checked, or named here as a limit):
//! * A sent call is, in one step: run and answered ([`Step::Run`]); run with the reply
//!   still on its way, so the clock may move before it arrives ([`Step::Slow`], then
//!   [`Step::Deliver`]); run with the reply lost ([`Step::LoseReply`]); lost before it ran
//!   ([`Step::LoseRequest`]); timed out, having run or not ([`Step::TimeOut`]); refused,
//!   while its server is down ([`Step::Refuse`], `Failure::NotSent`); or answered `BUSY`
//!   without running ([`Step::Busy`], in the configurations with [`Config::busy`]: `LOADING`
//!   instead while its server has run no call since a restart), fed to the core as the
//!   driver classifies that error reply (`Failure::from_server_error`), so the core decides
//!   what follows: a server's attempt answered `BUSY` ends failed (the RedLock is decided
//!   without it), a give-back's `ReleaseFlow` re-sends it after a back-off. Running and
//!   answering at once loses no behaviour that matters: a reply only changes its client,
//!   which commutes with every other step but the clock's, and the clock is covered by
//!   `Slow`. A request that timed out ran at its send time, or never runs, or (in the
//!   configurations with `strays`) stays on its connection as a stray, which runs later
//!   ([`Step::ExecuteStray`], possibly after the clock moved) before the client's next
//!   request on that server's connection, or never ([`Step::DropStray`]); a server that
//!   goes down or restarts breaks its connections, and their strays never run.
//! * The clock moves ([`Step::Advance`]) only when no call waits to run, to the next
//!   instant at which time changes anything (a tick of [`STEP`], a validity's end, a
//!   hold's deadline, a key's expiry and the millisecond after it, the end of a sleep or of
//!   a restarted server's exclusion). Sleeps that the core asks for (retries' back-off)
//!   are honoured: the op waits for the clock.
//! * The early decision: once a majority granted (the core's `redlock::may_decide_early`),
//!   the library gives the servers still running `redlock::late_grace` (as long again as
//!   the majority took, at least 5 ms), then leaves them out. The model lets the client
//!   decide at any time after a majority granted, which covers every grace. A left-out
//!   server's attempt goes on in its lane, as the dropped `try_acquire`'s detached
//!   attempt: a hold it wins is given back at once (a `ReleaseFlow`, as the dropped
//!   guard's release), a lost acquire is reconciled in the background. "Validity as
//!   documented" also checks that no attempt is decided with servers still running before
//!   a majority granted.
//! * A client's per-server lanes are entered one operation at a time: a user's attempt or
//!   release starts only when none of its lanes is busy, and a background reconciliation
//!   round runs only between them (the library would queue on the lane instead).
//! * Leases are fixed ([`LEASE`]; one configuration adds [`SHORT_LEASE`]); no watchdog, no
//!   fencing, no re-entry by the user.
//! * A background reconciliation round may run at any time while its task lives (the
//!   library waits a back-off first): more interleavings, not fewer.
//! * Force-unlocks ([`Config::force_unlocks`], [`Step::ForceUnlock`]): an operator runs the
//!   real `lua/force_unlock.lua` (the call built by the library's `force_unlock_call`, the
//!   reply read as `Lock::force_unlock` reads it) on one server whose lock exists, whoever
//!   holds it and whatever is in flight (a call in flight there runs after it: a lost
//!   acquire's probe may then find its hold gone). Of a free server it would change
//!   nothing, so it is not offered there. The hold it deletes is *doomed*, as a hold a
//!   restart wiped (the rule of the plain lock's and the multi-lock's models): with fixed
//!   leases and no watchdog its holder learns only when its release finds it gone or the
//!   validity ends. So "validity never outlives a counted hold" and "the lost signal is
//!   never late" hold a belief in a wiped hold (restart or force-unlock) to that hold's
//!   lease from its send time (what the client could prove) instead of to Redis's key, and
//!   "never two holders within validity" excuses two believers only when every server both
//!   majorities count had one of their holds wiped there in between (by a restart, in a
//!   configuration where a restarted server rejoins at once, or by a force-unlock).
//!
//!   Why that exception, and not "a force-unlock of one of 3 servers never gives two
//!   holders": it does, whenever the holder won with a bare majority. A holder that counts
//!   2 of 3 (the third failed, or was left out by the early decision, its attempt still
//!   running) loses its majority to one force-unlock, and the other client takes the wiped
//!   server and the free one (9 steps without the exception: `Attempt`, two grants,
//!   `DecideEarly`, the other's `Attempt`, held on one of the holder's members, granted on
//!   the free one, `ForceUnlock` of the holder's other member, granted there). That is the RedLock limit
//!   the README documents for a restart, caused by an operator. What the rule still
//!   asserts: a force-unlock of a member the other client does not also count excuses
//!   nothing, so while the holder keeps a majority the other client is refused (milestone
//!   "a force-unlock left the holder a majority: the other client was refused"; the tooth
//!   `an_acquire_that_grants_over_another_owner_is_caught_despite_force_unlocks` shows the
//!   exception excuses nothing else). Two force-unlocks (of 3 servers) are offered and
//!   asserted by the same rule: they may wipe a whole majority, and the exception then
//!   covers exactly the servers both count.
//! * `BUSY`/`LOADING` is judged by what the world did: the model answered the call
//!   without running it, so asking again can succeed. "BUSY never fails a give-back": a
//!   give-back (a user's release, a lost attempt's, a left-out server's: each a
//!   `ReleaseFlow` the model starts) answered `BUSY`/`LOADING` is not ended on it before
//!   its retry bound (`release::leave`'s `give_up_at`, at least two response timeouts
//!   away), whatever the library's classifier says. A server's attempt answered `BUSY`
//!   may fail: `try_acquire` counts that server as not granting, and the RedLock is
//!   decided by the others ("validity as documented" checks that decision as any other).
//!   A probe answered `BUSY` is the core's to ride out (`Lane::on_probe_failure`): the
//!   lost acquire stays pending, and "no orphans" checks what follows. The give-back of a
//!   lost acquire's hold inside an `AttemptOp` or a background `ReconcileRound` has a retry
//!   bound the model does not see (the lost acquire's lease from when the give-back was
//!   made); it is judged at its first send only (sent at once, the clock still, so its
//!   bound is ahead): answered `BUSY` there, it must not abandon the hold. Limits: a
//!   re-sent copy of such a give-back answered `BUSY` is not judged (a hold it abandons is
//!   excused from "no orphans" as any abandoned hold; the multi-lock's model judges those
//!   with the same core); no configuration combines `BUSY` with a force-unlock, or late
//!   requests with either.
//!
//! The configurations with the new steps: "BUSY/LOADING and a restart" (2 BUSY replies,
//! `LOADING` from the restarted server until it runs a call, no lost replies); "a lost
//! reply, probes answered BUSY" (1 lost reply or request, 1 BUSY); "two force-unlocks, an
//! outage, a lost reply". Each is small next to the others (the BUSY ones have no outage
//! and no slow reply): 48 k, 87 k and 490 k states at depth 12.
//!
//! What it found in the shipped code: a RedLock attempt may count a hold that the server's
//! `AttemptOp` adopted from an earlier attempt's lost request (same owner, same lease).
//! That hold's lease started when the lost request was sent, before this attempt, but
//! `src/redlock.rs` counts the validity from this attempt's start, so the validity outlives
//! the hold, and once such holds make up the majority another client can take it while the
//! first still believes it holds ("validity never outlives a counted hold", then "never two
//! holders within validity"). See [`redlock_elapsed`].
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::collections::hash_map::DefaultHasher;
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use redis_locks_protocol::acquire::AcquireRequest;
use redis_locks_protocol::attempt::{AttemptOp, AttemptOutcome, ReconcileRound, RoundOutcome};
use redis_locks_protocol::hold::HoldState;
use redis_locks_protocol::lane::Lane;
use redis_locks_protocol::redlock::{self, Won};
use redis_locks_protocol::release::{self, ReleaseFlow, ReleaseOutcome, ReleaseResult};
use redis_locks_protocol::{
    Call, Env, Failure, LockKeys, Machine, Millis, Next, Reply, RequestIds, ScriptId,
    force_unlock_call,
};

use crate::checker::{Model, Stepped};
use crate::keyspace::Keyspace;
use crate::lua::ScriptRunner;

/// The fixed lease of every server's hold (model ms).
pub const LEASE: Millis = 30;
/// The second lease of the "two leases" configuration (a RedLock `with_lease` of the same
/// owner on the same clients, whose lanes it shares).
pub const SHORT_LEASE: Millis = 15;
/// The clock's tick: it always stops at multiples of this.
pub const STEP: Millis = 10;
/// The clients' response timeout: a release retries for at least twice this
/// (`protocol::timing::release_give_up_at`).
pub const RESPONSE_TIMEOUT: Millis = STEP;
/// How far a server's clock may run ahead of the client's over a run: the documented
/// drift margin of a lease, `1 % + 2 ms` (written out here, not taken from the core, so
/// that the model does not share a defect of it).
pub const MAX_SKEW: Millis = LEASE / 100 + 2;

/// The documented majority: N/2 + 1 (the model's own, independent of the core's).
pub fn documented_quorum(servers: usize) -> usize {
    servers / 2 + 1
}

/// The documented drift margin: 1 % of the lease plus 2 ms.
pub fn documented_drift(lease: Millis) -> Millis {
    lease / 100 + 2
}

/// How much time an attempt that started at `start` spent by `now`, as the library's core
/// says (`redlock::elapsed`): since the attempt started, or since the earliest send of a
/// request that took a granted hold (`granted_sent_at`: a hold adopted from an earlier
/// attempt's lost request started its lease before this attempt), whichever is longer.
/// The checker found the gap that made the library count from the attempt's start only.
pub fn redlock_elapsed(
    start: Millis,
    now: Millis,
    granted_sent_at: impl IntoIterator<Item = Millis>,
) -> Millis {
    redlock::elapsed(
        now - start,
        granted_sent_at.into_iter().map(|sent_at| now - sent_at),
    )
}

/// The properties, checked in every state.
pub const PROPERTIES: [&str; 8] = [
    "never two holders within validity",
    "validity as documented",
    "validity never outlives a counted hold",
    "no orphans",
    "the lost signal is never late",
    "replies are understood",
    "BUSY never fails a give-back",
    "a force-unlock deletes what it reports",
];
/// (1) Two clients never both believe they hold the RedLock (acquired, not released,
/// now < valid_until). One documented exception, see `check`.
const TWO_HOLDERS: &str = PROPERTIES[0];
/// (2a) The decision follows the README's rule: acquired exactly when N/2 + 1 granted and
/// `lease − elapsed − (1 % of the lease + 2 ms)` is positive, with that validity.
const VALIDITY: &str = PROPERTIES[1];
/// (2b) While the RedLock is believed, every hold counted for it is current on its server
/// and its key lives at least until the validity's end (by the client's clock), unless
/// that server restarted empty since the hold was taken (RedLock promises nothing then).
const OUTLIVES: &str = PROPERTIES[2];
/// (3) Once nothing is in flight, no attempt or give-back is under way and no lost acquire
/// is pending, every hold on every server belongs to a RedGuard that holds it, unless its
/// give-back failed (it expires with its lease).
const ORPHANS: &str = PROPERTIES[3];
/// (4) Each server's guard (its `HoldState`, whose losses make the RedGuard's lost signal)
/// never believes its hold past the key's expiry, unless that server restarted empty.
const LOST_SIGNAL: &str = PROPERTIES[4];
/// Every reply is one the core can read.
const UNDERSTOOD: &str = PROPERTIES[5];
/// (5) A give-back (a user's release, a lost attempt's or a left-out server's) whose call
/// the model answered `BUSY`/`LOADING` (it did not run, asking again can succeed) is not
/// given up on it before its retry bound (`timing::release_give_up_at`): it is re-sent.
/// Judged by what the world did, whatever the library's classifier made of the error.
const BUSY_NEVER_FAILS: &str = PROPERTIES[6];
/// (6) An operator's force-unlock (`lua/force_unlock.lua`, read as `Lock::force_unlock`
/// reads it) reports a lock deleted exactly when the server had one, and the server has
/// none after it.
const FORCE_TRUE: &str = PROPERTIES[7];

/// Things a configuration must see (at the default bound), so that it is not vacuous.
pub const MILESTONES: [&str; 25] = [
    "acquired with one server failing",
    "gave back a minority",
    "acquired after a restart",
    "a hand-off between the clients",
    "acquired with time spent (validity < lease - drift)",
    "a majority too late: given back",
    "split vote: nobody won",
    "adopted the hold of a lost acquire",
    "a background reconciliation gave a hold back",
    "a give-back failed (the hold expires with its lease)",
    "two holders after a majority member restarted empty (documented exception)",
    "acquired early, a server left out",
    "a left-out server won a hold: given back",
    "a stray acquire ran after its client timed out",
    "a stray ran after the clock moved",
    "acquired with a server answering BUSY",
    "a give-back answered BUSY gave the hold back when re-sent",
    "a restarted server answered LOADING",
    "a force-unlock removed a hold a RedLock holder counts",
    "a release found a force-unlocked hold gone",
    "a force-unlock left the holder a majority: the other client was refused",
    "two holders after every shared member was force-unlocked (asserted exception)",
    "a probe answered BUSY kept the lost acquire pending",
    "a lost acquire's probe found its hold force-unlocked",
    "a lost acquire's give-back answered BUSY was re-sent",
];
const M_FAILING: usize = 0;
const M_GAVE_BACK: usize = 1;
const M_AFTER_RESTART: usize = 2;
const M_HAND_OFF: usize = 3;
const M_ELAPSED: usize = 4;
const M_TOO_LATE: usize = 5;
const M_SPLIT: usize = 6;
const M_ADOPTED: usize = 7;
const M_RECONCILED: usize = 8;
const M_ABANDONED: usize = 9;
const M_RESTART_TWICE: usize = 10;
const M_EARLY: usize = 11;
const M_LEFT_OUT: usize = 12;
const M_STRAY: usize = 13;
const M_STRAY_LATE: usize = 14;
const M_BUSY_ACQUIRED: usize = 15;
const M_BUSY_GAVE_BACK: usize = 16;
const M_LOADING: usize = 17;
const M_FORCED_HOLDER: usize = 18;
const M_FORCED_RELEASE: usize = 19;
const M_FORCED_REFUSED: usize = 20;
const M_FORCED_TWICE: usize = 21;
const M_BUSY_PROBE: usize = 22;
const M_FORCED_PROBE: usize = 23;
const M_BUSY_LOST_GIVE_BACK: usize = 24;

pub use crate::lua::Scripts;

/// The parties and the bounds of one exploration.
#[derive(Clone, Debug)]
pub struct Config {
    /// Name, for the report and replays.
    pub name: &'static str,
    /// How many independent servers (every one a member).
    pub servers: usize,
    /// The leases an attempt may use (a RedLock `with_lease` of the same owner).
    pub leases: Vec<Millis>,
    /// RedLock attempts (`try_acquire`) per client.
    pub attempts: u8,
    /// Server outages (requests refused, `Failure::NotSent`, until it is up again).
    pub downs: u8,
    /// Restarts that lose every key (no persistence).
    pub restarts: u8,
    /// Whether a restarted server is kept out for a lease before it rejoins (antirez's
    /// remedy; the library does not do it for you, see the README).
    pub rejoin_after_lease: bool,
    /// Lost replies, lost requests and timeouts, in all.
    pub faults: u8,
    /// Replies that arrive after the clock moved.
    pub slow: u8,
    /// Servers whose clock jumps ahead by [`MAX_SKEW`].
    pub skews: u8,
    /// Clock steps.
    pub advances: u8,
    /// Whether an attempt may be decided once a majority granted, leaving out the servers
    /// still running (as the library does after the core's `late_grace`).
    pub early: bool,
    /// Whether a request that timed out without running stays on its connection as a
    /// stray, which runs later (before the client's next request there) or never.
    pub strays: bool,
    /// Calls answered `BUSY` (or `LOADING`, by a restarted server before it ran a call)
    /// without running, in all.
    pub busy: u8,
    /// An operator's force-unlocks of the lock on one server (`lua/force_unlock.lua`).
    pub force_unlocks: u8,
    /// The milestones this configuration must reach at the default bound.
    pub must_reach: Vec<&'static str>,
}

/// The default configurations.
pub fn configs() -> Vec<Config> {
    let m = |indices: &[usize]| indices.iter().map(|&i| MILESTONES[i]).collect::<Vec<_>>();
    vec![
        Config {
            name: "3 servers: an outage, a lost reply, slow replies",
            servers: 3,
            leases: vec![LEASE],
            attempts: 2,
            downs: 1,
            restarts: 0,
            rejoin_after_lease: false,
            faults: 1,
            slow: 1,
            skews: 0,
            advances: 3,
            early: true,
            strays: false,
            busy: 0,
            force_unlocks: 0,
            must_reach: m(&[
                M_FAILING,
                M_GAVE_BACK,
                M_HAND_OFF,
                M_ELAPSED,
                M_TOO_LATE,
                M_SPLIT,
                M_ADOPTED,
                M_RECONCILED,
                M_ABANDONED,
            ]),
        },
        Config {
            name: "3 servers: a restart without persistence",
            servers: 3,
            leases: vec![LEASE],
            attempts: 2,
            downs: 1,
            restarts: 1,
            rejoin_after_lease: false,
            faults: 0,
            slow: 1,
            skews: 0,
            advances: 3,
            early: true,
            strays: false,
            busy: 0,
            force_unlocks: 0,
            must_reach: m(&[
                M_FAILING,
                M_GAVE_BACK,
                M_AFTER_RESTART,
                M_HAND_OFF,
                M_ELAPSED,
                M_SPLIT,
                M_RESTART_TWICE,
            ]),
        },
        Config {
            name: "3 servers: a restart kept out for a lease",
            servers: 3,
            leases: vec![LEASE],
            attempts: 2,
            downs: 1,
            restarts: 1,
            rejoin_after_lease: true,
            faults: 0,
            slow: 1,
            skews: 0,
            advances: 4,
            early: true,
            strays: false,
            busy: 0,
            force_unlocks: 0,
            must_reach: m(&[
                M_FAILING,
                M_AFTER_RESTART,
                M_HAND_OFF,
                M_ELAPSED,
                M_TOO_LATE,
            ]),
        },
        Config {
            name: "3 servers: clock drift and expiry",
            servers: 3,
            leases: vec![LEASE],
            attempts: 2,
            downs: 1,
            restarts: 0,
            rejoin_after_lease: false,
            faults: 0,
            slow: 1,
            skews: 2,
            advances: 4,
            early: true,
            strays: false,
            busy: 0,
            force_unlocks: 0,
            must_reach: m(&[M_FAILING, M_HAND_OFF, M_ELAPSED, M_TOO_LATE, M_SPLIT]),
        },
        Config {
            name: "3 servers: timeouts, lost replies, two leases",
            servers: 3,
            leases: vec![SHORT_LEASE, LEASE],
            attempts: 2,
            downs: 0,
            restarts: 0,
            rejoin_after_lease: false,
            faults: 2,
            slow: 0,
            skews: 0,
            advances: 2,
            early: true,
            strays: false,
            busy: 0,
            force_unlocks: 0,
            must_reach: m(&[
                M_FAILING,
                M_GAVE_BACK,
                M_HAND_OFF,
                M_ADOPTED,
                M_RECONCILED,
                M_ABANDONED,
            ]),
        },
        Config {
            name: "2 servers (an even count): an outage",
            servers: 2,
            leases: vec![LEASE],
            attempts: 2,
            downs: 1,
            restarts: 0,
            rejoin_after_lease: false,
            faults: 1,
            slow: 0,
            skews: 0,
            advances: 3,
            early: true,
            strays: false,
            busy: 0,
            force_unlocks: 0,
            must_reach: m(&[
                M_HAND_OFF,
                M_TOO_LATE,
                M_SPLIT,
                M_ADOPTED,
                M_RECONCILED,
                M_ABANDONED,
            ]),
        },
        Config {
            name: "3 servers: late requests (strays) and early decisions",
            servers: 3,
            leases: vec![LEASE],
            attempts: 2,
            downs: 0,
            restarts: 0,
            rejoin_after_lease: false,
            faults: 2,
            slow: 0,
            skews: 0,
            advances: 3,
            early: true,
            strays: true,
            busy: 0,
            force_unlocks: 0,
            must_reach: m(&[
                M_HAND_OFF,
                M_EARLY,
                M_LEFT_OUT,
                M_STRAY,
                M_STRAY_LATE,
                M_RECONCILED,
            ]),
        },
        Config {
            name: "3 servers: BUSY/LOADING and a restart",
            servers: 3,
            leases: vec![LEASE],
            attempts: 2,
            downs: 0,
            restarts: 1,
            rejoin_after_lease: false,
            faults: 0,
            slow: 0,
            skews: 0,
            advances: 3,
            early: true,
            strays: false,
            busy: 2,
            force_unlocks: 0,
            must_reach: m(&[
                M_BUSY_ACQUIRED,
                M_BUSY_GAVE_BACK,
                M_LOADING,
                M_AFTER_RESTART,
                M_HAND_OFF,
                M_GAVE_BACK,
            ]),
        },
        Config {
            name: "3 servers: a lost reply, probes answered BUSY",
            servers: 3,
            leases: vec![LEASE],
            attempts: 2,
            downs: 0,
            restarts: 0,
            rejoin_after_lease: false,
            faults: 1,
            slow: 0,
            skews: 0,
            advances: 3,
            early: true,
            strays: false,
            busy: 1,
            force_unlocks: 0,
            must_reach: m(&[
                M_ADOPTED,
                M_RECONCILED,
                M_BUSY_PROBE,
                M_BUSY_LOST_GIVE_BACK,
                M_BUSY_ACQUIRED,
                M_BUSY_GAVE_BACK,
                M_HAND_OFF,
            ]),
        },
        Config {
            name: "3 servers: two force-unlocks, an outage, a lost reply",
            servers: 3,
            leases: vec![LEASE],
            attempts: 2,
            downs: 1,
            restarts: 0,
            rejoin_after_lease: false,
            faults: 1,
            slow: 0,
            skews: 0,
            advances: 3,
            early: true,
            strays: false,
            busy: 0,
            force_unlocks: 2,
            must_reach: m(&[
                M_FAILING,
                M_HAND_OFF,
                M_FORCED_HOLDER,
                M_FORCED_RELEASE,
                M_FORCED_REFUSED,
                M_FORCED_TWICE,
                M_FORCED_PROBE,
            ]),
        },
    ]
}

/// The milestones the default configuration `name` must reach at the default bound.
pub fn must_reach(name: &str) -> Vec<&'static str> {
    configs()
        .into_iter()
        .find(|c| c.name == name)
        .map(|c| c.must_reach)
        .unwrap_or_default()
}

/// The lock's keys on every server.
pub fn keys() -> LockKeys {
    LockKeys {
        hash: "L:{x}".into(),
        fence: "L:{x}:fence".into(),
        channel: "L:{x}:db0:released".into(),
        sharded: false,
    }
}

/// Runs calls against a server's keyspace with the model's scripts.
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

    fn run(&self, call: &Call, ks: &mut Keyspace, server_now: Millis) -> Reply {
        let keys: Vec<Vec<u8>> = call.keys.iter().map(|k| k.as_bytes().to_vec()).collect();
        let args: Vec<Vec<u8>> = call.args.iter().map(|a| a.as_bytes().to_vec()).collect();
        let reply = self.runner.eval(
            self.scripts.source(call.script),
            &keys,
            &args,
            ks,
            server_now,
        );
        ks.published.clear();
        reply
    }
}

/// One step of the world.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// A client's user makes one RedLock attempt (`try_acquire`) with `leases[lease]`.
    Attempt { client: usize, lease: usize },
    /// A client's user releases the RedLock it holds (`RedGuard::release`).
    Release { client: usize },
    /// A client's background task runs a reconciliation round on a server.
    Reconcile { client: usize, server: usize },
    /// The server runs the call and the reply arrives at once.
    Run { client: usize, server: usize },
    /// The server runs the call; its reply arrives later (the clock may move first).
    Slow { client: usize, server: usize },
    /// A slow reply arrives.
    Deliver { client: usize, server: usize },
    /// The server runs the call; the reply is lost (`Failure::Lost`).
    LoseReply { client: usize, server: usize },
    /// The request is lost before it runs (`Failure::Lost`).
    LoseRequest { client: usize, server: usize },
    /// No reply within the response timeout (`Failure::TimedOut`); the call ran or not.
    TimeOut {
        client: usize,
        server: usize,
        ran: bool,
    },
    /// A down server refuses the call (`Failure::NotSent`).
    Refuse { client: usize, server: usize },
    /// A server goes down (keeps its data).
    Down { server: usize },
    /// A down server comes back.
    Up { server: usize },
    /// A server restarts and loses every key.
    Restart { server: usize },
    /// A server's clock jumps ahead by [`MAX_SKEW`].
    ClockAhead { server: usize },
    /// The client decides its attempt once a majority granted, leaving out the servers
    /// still running (their attempts go on in their lanes; a hold one wins is given back).
    DecideEarly { client: usize },
    /// A request that timed out runs now, late (its reply goes nowhere).
    ExecuteStray { client: usize, server: usize },
    /// A request that timed out never runs.
    DropStray { client: usize, server: usize },
    /// The server answers the call `BUSY` (`LOADING` while it loads after a restart)
    /// without running it: fed to the core as the driver classifies that error reply
    /// (`Failure::from_server_error`).
    Busy { client: usize, server: usize },
    /// An operator force-unlocks the lock on one server (`lua/force_unlock.lua`, the call
    /// built by the library's `force_unlock_call`), whoever holds it.
    ForceUnlock { server: usize },
    /// The clock moves to the next instant that matters.
    Advance,
}

impl Step {
    fn is_fault(&self) -> bool {
        matches!(
            self,
            Step::LoseReply { .. } | Step::LoseRequest { .. } | Step::TimeOut { .. }
        )
    }
}

/// The core's view of a model client on one server: the model clock, no randomness, that
/// server's client's request ids.
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

/// What an operation is fed.
enum Event<'a> {
    Start,
    Reply(&'a Reply),
    Failure(Failure),
    Resume,
}

/// Feeds `event` to `machine`, exactly as the library's driver (`src/drive.rs`) would,
/// and returns what it asks for next.
fn feed<M: Machine<Ctx = Lane>>(
    machine: &mut M,
    env: &mut ModelEnv,
    lane: &mut Lane,
    event: Event,
) -> Next<M::Outcome> {
    match event {
        Event::Start => machine.start(env, lane),
        Event::Reply(reply) => machine.on_reply(env, lane, reply),
        Event::Failure(failure) => machine.on_failure(env, lane, failure),
        Event::Resume => machine.resume(env, lane),
    }
}

/// One server's hold, as the client's `LockGuard` for it knows it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Hold {
    hold: Arc<str>,
    state: HoldState,
    /// When the request that took it was sent, and its lease.
    sent_at: Millis,
    lease: Millis,
    /// The server's restart count when the call that found it ran: a later restart lost it.
    epoch: u8,
    adopted: bool,
}

/// What a server's attempt ended with.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Outcome {
    Granted,
    Held,
    Failed,
    /// Failed on a `BUSY`/`LOADING` reply (counted as failed).
    Busy,
}

/// A client's operation in one server's lane: one of the library's own machines.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum OpKind {
    Acquire(AttemptOp),
    Release {
        flow: ReleaseFlow,
        hold: Hold,
        /// Giving back the hold of an attempt that lost (not a user's release).
        lost_attempt: bool,
        /// Its retry bound (`release::leave`'s `give_up_at`): before it, a `BUSY` must
        /// not end it.
        give_up_at: Millis,
        /// Some copy of it was answered `BUSY`/`LOADING`.
        busied: bool,
    },
    Reconcile(ReconcileRound),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Flight {
    /// Sent, not run yet.
    Sent(Call),
    /// Run when the server's restart count was `epoch`; the reply is on its way.
    Replied { reply: Reply, epoch: u8 },
    /// Sleeping until then (a retry's back-off).
    Sleeping(Millis),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Op {
    kind: OpKind,
    flight: Flight,
    /// The call in flight was sent when a sleep ended (a retry), not at once.
    resumed: bool,
}

/// What the RedLock client is doing.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    /// An attempt started at `start` with `lease`: each server's outcome, once known.
    Attempting {
        start: Millis,
        lease: Millis,
        outcomes: Vec<Option<Outcome>>,
    },
    /// Acquired: the RedLock is believed held until `valid_until`.
    Holding {
        valid_until: Millis,
    },
    /// Giving back (an attempt that lost, or a release): every hold's release runs.
    Releasing,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Client {
    owner: Arc<str>,
    /// Per server: that server's client's lane and request ids.
    lanes: Vec<Lane>,
    ids: Vec<RequestIds>,
    ops: Vec<Option<Op>>,
    /// Per server: a background reconciliation task is running.
    background: Vec<bool>,
    /// Per server: the hold the current attempt got, or the RedGuard holds.
    holds: Vec<Option<Hold>>,
    phase: Phase,
    attempts_left: u8,
    /// Per server: a request that timed out without running, still on the connection,
    /// with its send time: it runs before the client's next request there, or never.
    strays: Vec<Option<(Call, Millis)>>,
}

/// A server's current hold id and each owner's hold count.
type CurrentHold = (Arc<str>, Vec<(String, u64)>);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Server {
    ks: Keyspace,
    up: bool,
    /// A restarted server kept out rejoins at this time.
    out_until: Option<Millis>,
    /// Restarts so far.
    epoch: u8,
    /// How far its clock is ahead of the client's.
    skew: Millis,
    /// Restarted and has run no call since: it may answer `LOADING`.
    loading: bool,
}

impl Server {
    fn now(&self, now: Millis) -> Millis {
        now + self.skew
    }

    /// The current hold id and the owners' counts, at client time `now`.
    fn current(&self, now: Millis) -> Option<CurrentHold> {
        let hash = self.ks.lock_hash(b"L:{x}", self.now(now))?;
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

    /// The last client-clock instant at which the lock key still exists (it exists at its
    /// server-clock expiry time and is gone a millisecond later).
    fn expiry(&self, now: Millis) -> Option<Millis> {
        match self.ks.pexpire_at(b"L:{x}", self.now(now)) {
            Some(Some(at)) => Some(at.saturating_sub(self.skew)),
            Some(None) => Some(Millis::MAX),
            None => None,
        }
    }
}

/// The whole world.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub now: Millis,
    servers: Vec<Server>,
    clients: Vec<Client>,
    downs_left: u8,
    restarts_left: u8,
    faults_left: u8,
    slow_left: u8,
    skews_left: u8,
    advances_left: u8,
    /// (server, hold) whose give-back failed or went unconfirmed: it expires with its
    /// lease.
    abandoned: BTreeSet<(usize, Arc<str>)>,
    busy_left: u8,
    force_left: u8,
    /// (server, hold) a force-unlock deleted behind its holder's back: *doomed* (see the
    /// header), as a hold a restart wiped.
    doomed: BTreeSet<(usize, Arc<str>)>,
    /// Which clients have acquired the RedLock so far (a bit each).
    acquired_by: u8,
}

/// What a step did that the checker reports on.
#[derive(Debug, Default)]
pub struct Effects {
    /// Milestones reached (indices into [`MILESTONES`]).
    pub milestones: Vec<usize>,
    /// The properties violated, each once, with why, in the order found.
    pub violations: Vec<(&'static str, String)>,
}

impl Effects {
    fn violate(&mut self, property: &'static str, message: String) {
        if !self.violations.iter().any(|(p, _)| *p == property) {
            self.violations.push((property, message));
        }
    }
}

impl State {
    pub fn initial(config: &Config) -> Self {
        let n = config.servers;
        let clients = ["a", "b"]
            .iter()
            .enumerate()
            .map(|(c, owner)| Client {
                owner: (*owner).into(),
                lanes: vec![Lane::default(); n],
                // Each server's client hands out its own ids; one tag per model client on
                // every server keeps the servers interchangeable (see `fingerprint`).
                ids: vec![RequestIds::new(format!("c{c}")); n],
                ops: vec![None; n],
                background: vec![false; n],
                holds: vec![None; n],
                phase: Phase::Idle,
                attempts_left: config.attempts,
                strays: vec![None; n],
            })
            .collect();
        State {
            now: 0,
            servers: vec![
                Server {
                    ks: Keyspace::default(),
                    up: true,
                    out_until: None,
                    epoch: 0,
                    skew: 0,
                    loading: false,
                };
                n
            ],
            clients,
            downs_left: config.downs,
            restarts_left: config.restarts,
            faults_left: config.faults,
            slow_left: config.slow,
            skews_left: config.skews,
            advances_left: config.advances,
            abandoned: BTreeSet::new(),
            busy_left: config.busy,
            force_left: config.force_unlocks,
            doomed: BTreeSet::new(),
            acquired_by: 0,
        }
    }

    fn any_sent(&self) -> bool {
        self.clients.iter().any(|c| {
            c.ops.iter().any(|op| {
                matches!(
                    op,
                    Some(Op {
                        flight: Flight::Sent(_),
                        ..
                    })
                )
            })
        })
    }

    /// Every step enabled in this state, in a fixed order (replays name steps by index).
    pub fn steps(&self, config: &Config) -> Vec<Step> {
        let mut steps = Vec::new();
        for (i, c) in self.clients.iter().enumerate() {
            let lanes_free = c.ops.iter().all(Option::is_none);
            match c.phase {
                Phase::Idle if lanes_free && c.attempts_left > 0 => {
                    for lease in 0..config.leases.len() {
                        steps.push(Step::Attempt { client: i, lease });
                    }
                }
                Phase::Holding { .. } if lanes_free => steps.push(Step::Release { client: i }),
                // The core's rule: once a majority granted, the servers still running may be
                // left out (after `redlock::late_grace`; any time after, here, which covers
                // every grace).
                Phase::Attempting { ref outcomes, .. }
                    if config.early
                        && outcomes.iter().any(Option::is_none)
                        && redlock::may_decide_early(
                            outcomes
                                .iter()
                                .filter(|o| **o == Some(Outcome::Granted))
                                .count(),
                            outcomes.len(),
                        ) =>
                {
                    steps.push(Step::DecideEarly { client: i });
                }
                _ => {}
            }
            for (s, stray) in c.strays.iter().enumerate() {
                if stray.is_some() {
                    if self.servers[s].up {
                        steps.push(Step::ExecuteStray {
                            client: i,
                            server: s,
                        });
                    }
                    steps.push(Step::DropStray {
                        client: i,
                        server: s,
                    });
                }
            }
            if matches!(c.phase, Phase::Idle | Phase::Holding { .. }) {
                for (s, running) in c.background.iter().enumerate() {
                    if *running && c.ops[s].is_none() {
                        steps.push(Step::Reconcile {
                            client: i,
                            server: s,
                        });
                    }
                }
            }
            for (s, op) in c.ops.iter().enumerate() {
                let (client, server) = (i, s);
                match op.as_ref().map(|op| &op.flight) {
                    // Its connection runs (or drops) a stray request first.
                    Some(Flight::Sent(_)) if c.strays[s].is_some() => {}
                    Some(Flight::Sent(_)) if !self.servers[s].up => {
                        steps.push(Step::Refuse { client, server });
                    }
                    Some(Flight::Sent(_)) => {
                        steps.push(Step::Run { client, server });
                        if self.slow_left > 0 {
                            steps.push(Step::Slow { client, server });
                        }
                        if self.busy_left > 0 {
                            steps.push(Step::Busy { client, server });
                        }
                        if self.faults_left > 0 {
                            steps.push(Step::LoseReply { client, server });
                            steps.push(Step::LoseRequest { client, server });
                            for ran in [false, true] {
                                steps.push(Step::TimeOut {
                                    client,
                                    server,
                                    ran,
                                });
                            }
                        }
                    }
                    Some(Flight::Replied { .. }) => steps.push(Step::Deliver { client, server }),
                    Some(Flight::Sleeping(_)) | None => {}
                }
            }
        }
        for (s, server) in self.servers.iter().enumerate() {
            if server.up {
                if self.downs_left > 0 {
                    steps.push(Step::Down { server: s });
                }
                if self.restarts_left > 0 {
                    steps.push(Step::Restart { server: s });
                }
            } else if server.out_until.is_none_or(|at| self.now >= at) {
                steps.push(Step::Up { server: s });
            }
            if self.skews_left > 0 && server.skew == 0 {
                steps.push(Step::ClockAhead { server: s });
            }
            // Only of a lock the server has (of a free one it changes nothing).
            if self.force_left > 0 && server.up && server.current(self.now).is_some() {
                steps.push(Step::ForceUnlock { server: s });
            }
        }
        if self.advances_left > 0 && !self.any_sent() {
            steps.push(Step::Advance);
        }
        steps
    }

    /// Applies one step and checks every property afterwards.
    pub fn apply(&mut self, step: &Step, world: &World, config: &Config) -> Effects {
        let mut fx = Effects::default();
        if step.is_fault() {
            self.faults_left -= 1;
        }
        match *step {
            Step::Attempt { client, lease } => {
                self.start_attempt(client, config.leases[lease], world, &mut fx);
            }
            Step::Release { client } => {
                self.give_back(client, world, false, &mut fx);
            }
            Step::Reconcile { client, server } => {
                let round = ReconcileRound::new(world.keys.clone());
                let epoch = self.servers[server].epoch;
                self.drive(
                    client,
                    server,
                    OpKind::Reconcile(round),
                    Event::Start,
                    epoch,
                    world,
                    &mut fx,
                );
            }
            Step::Run { client, server } => {
                // A probe for a lost acquire whose hold (the hold id is the request id) a
                // force-unlock deleted.
                if let Some(Op {
                    flight: Flight::Sent(call),
                    ..
                }) = &self.clients[client].ops[server]
                    && call.script == ScriptId::Probe
                    && call
                        .args
                        .get(1)
                        .is_some_and(|request| self.doomed.contains(&(server, request.clone())))
                {
                    fx.milestones.push(M_FORCED_PROBE);
                }
                let (reply, epoch) = self.execute(client, server, world, &mut fx);
                self.feed_op(client, server, Event::Reply(&reply), epoch, world, &mut fx);
            }
            Step::Slow { client, server } => {
                self.slow_left -= 1;
                let (reply, epoch) = self.execute(client, server, world, &mut fx);
                if let Some(op) = self.clients[client].ops[server].as_mut() {
                    op.flight = Flight::Replied { reply, epoch };
                }
            }
            Step::Deliver { client, server } => {
                let Some(Op {
                    flight: Flight::Replied { reply, epoch },
                    ..
                }) = self.clients[client].ops[server].clone()
                else {
                    return fx;
                };
                self.feed_op(client, server, Event::Reply(&reply), epoch, world, &mut fx);
            }
            Step::LoseReply { client, server } => {
                let (_, epoch) = self.execute(client, server, world, &mut fx);
                self.feed_op(
                    client,
                    server,
                    Event::Failure(Failure::Lost),
                    epoch,
                    world,
                    &mut fx,
                );
            }
            Step::LoseRequest { client, server } => {
                let epoch = self.servers[server].epoch;
                self.feed_op(
                    client,
                    server,
                    Event::Failure(Failure::Lost),
                    epoch,
                    world,
                    &mut fx,
                );
            }
            Step::TimeOut {
                client,
                server,
                ran,
            } => {
                let epoch = if ran {
                    self.execute(client, server, world, &mut fx).1
                } else {
                    if config.strays
                        && let Some(Op {
                            flight: Flight::Sent(call),
                            ..
                        }) = &self.clients[client].ops[server]
                    {
                        // It may still run, late: it stays on the connection.
                        self.clients[client].strays[server] = Some((call.clone(), self.now));
                    }
                    self.servers[server].epoch
                };
                self.feed_op(
                    client,
                    server,
                    Event::Failure(Failure::TimedOut),
                    epoch,
                    world,
                    &mut fx,
                );
            }
            Step::Refuse { client, server } => {
                let epoch = self.servers[server].epoch;
                self.feed_op(
                    client,
                    server,
                    Event::Failure(Failure::NotSent),
                    epoch,
                    world,
                    &mut fx,
                );
            }
            Step::Down { server } => {
                self.downs_left -= 1;
                self.servers[server].up = false;
                // Its connections break: what they still carried never runs.
                self.drop_strays(server);
            }
            Step::Up { server } => {
                self.servers[server].up = true;
                self.servers[server].out_until = None;
            }
            Step::Restart { server } => {
                self.restarts_left -= 1;
                let now = self.now;
                let s = &mut self.servers[server];
                s.ks.flush_all();
                s.epoch += 1;
                // It answers `LOADING` until it runs a call (only where the model answers
                // calls without running them).
                s.loading = config.busy > 0;
                self.drop_strays(server);
                let s = &mut self.servers[server];
                if config.rejoin_after_lease {
                    // Kept out for as long as any hold it had could have lasted.
                    s.up = false;
                    s.out_until = Some(now + config.leases.iter().copied().max().unwrap_or(0));
                }
            }
            Step::ClockAhead { server } => {
                self.skews_left -= 1;
                let now = self.now;
                let s = &mut self.servers[server];
                s.skew = MAX_SKEW;
                let server_now = s.now(now);
                s.ks.expire(server_now);
            }
            Step::DecideEarly { client } => self.decide(client, world, &mut fx),
            Step::ExecuteStray { client, server } => {
                if let Some((call, sent_at)) = self.clients[client].strays[server].take() {
                    let now = self.now;
                    let s = &mut self.servers[server];
                    let server_now = s.now(now);
                    world.run(&call, &mut s.ks, server_now);
                    s.loading = false;
                    if matches!(call.script, ScriptId::Take | ScriptId::Acquire) {
                        fx.milestones.push(M_STRAY);
                    }
                    if now > sent_at {
                        fx.milestones.push(M_STRAY_LATE);
                    }
                }
            }
            Step::DropStray { client, server } => {
                self.clients[client].strays[server] = None;
            }
            Step::Busy { client, server } => {
                self.busy_left -= 1;
                let loading = self.servers[server].loading;
                if loading {
                    fx.milestones.push(M_LOADING);
                }
                // What the driver makes of the error reply.
                let failure = Failure::from_server_error(if loading {
                    "LOADING Redis is loading the dataset in memory"
                } else {
                    "BUSY Redis is busy running a script"
                });
                // A give-back answered BUSY: the model knows the call did not run.
                let bound = match self.clients[client].ops[server].as_mut() {
                    Some(Op {
                        kind:
                            OpKind::Release {
                                give_up_at, busied, ..
                            },
                        ..
                    }) => {
                        *busied = true;
                        Some(*give_up_at)
                    }
                    _ => None,
                };
                let probe = matches!(
                    &self.clients[client].ops[server],
                    Some(Op { flight: Flight::Sent(call), .. }) if call.script == ScriptId::Probe
                );
                // The give-back of a lost acquire's hold inside an attempt or a background
                // round, at its first send: its retry bound (the lost acquire's lease from
                // now) is ahead, as the clock has not moved since it was made.
                let first_give_back = matches!(
                    &self.clients[client].ops[server],
                    Some(Op {
                        kind: OpKind::Acquire(_) | OpKind::Reconcile(_),
                        flight: Flight::Sent(call),
                        resumed: false,
                    }) if call.script == ScriptId::Release
                );
                let abandoned = self.abandoned.len();
                let epoch = self.servers[server].epoch;
                self.feed_op(
                    client,
                    server,
                    Event::Failure(failure),
                    epoch,
                    world,
                    &mut fx,
                );
                if probe && self.clients[client].lanes[server].is_pending() {
                    fx.milestones.push(M_BUSY_PROBE);
                }
                if first_give_back {
                    if self.abandoned.len() > abandoned {
                        fx.violate(
                            BUSY_NEVER_FAILS,
                            format!(
                                "client {client}: a lost acquire's give-back on server {server} \
                                 answered {} at its first send was given up, not re-sent",
                                if loading { "LOADING" } else { "BUSY" },
                            ),
                        );
                    } else if matches!(
                        self.clients[client].ops[server],
                        Some(Op {
                            flight: Flight::Sleeping(_),
                            ..
                        })
                    ) {
                        fx.milestones.push(M_BUSY_LOST_GIVE_BACK);
                    }
                }
                if let Some(give_up_at) = bound
                    && self.now < give_up_at
                    && self.clients[client].ops[server].is_none()
                {
                    fx.violate(
                        BUSY_NEVER_FAILS,
                        format!(
                            "client {client}: a give-back on server {server} answered {} ended \
                             at t={} before its retry bound t={give_up_at}, not re-sent",
                            if loading { "LOADING" } else { "BUSY" },
                            self.now
                        ),
                    );
                }
            }
            Step::ForceUnlock { server } => {
                self.force_left -= 1;
                let now = self.now;
                let before = self.servers[server].current(now).map(|(h, _)| h);
                if let Some(hold) = &before {
                    let hit = self.clients.iter().any(|c| {
                        matches!(c.phase, Phase::Holding { .. })
                            && c.holds[server].as_ref().is_some_and(|h| h.hold == *hold)
                    });
                    if hit {
                        fx.milestones.push(M_FORCED_HOLDER);
                    }
                }
                let call = force_unlock_call(&world.keys);
                let s = &mut self.servers[server];
                let server_now = s.now(now);
                let reply = world.run(&call, &mut s.ks, server_now);
                let after = s.current(now).map(|(h, _)| h);
                // The hold it took out is doomed, as a restart's (see the header).
                if let Some(hold) = &before
                    && after.as_ref() != Some(hold)
                {
                    self.doomed.insert((server, hold.clone()));
                }
                // Read as `Lock::force_unlock` reads it: whether there was a lock.
                match reply {
                    Reply::Int(n) if n >= 0 => {
                        if (n > 0) != before.is_some() || after.is_some() {
                            fx.violate(
                                FORCE_TRUE,
                                format!(
                                    "server {server}: force-unlock reported {}, the server had \
                                     {before:?} and has {after:?} after it",
                                    if n > 0 { "a lock deleted" } else { "no lock" }
                                ),
                            );
                        }
                    }
                    other => fx.violate(
                        UNDERSTOOD,
                        format!("server {server}: force-unlock answered {other:?}"),
                    ),
                }
            }
            Step::Advance => {
                self.advances_left -= 1;
                self.now = self.next_event();
                let now = self.now;
                for s in &mut self.servers {
                    let server_now = s.now(now);
                    s.ks.expire(server_now);
                }
                // Sleeps that are over end now (in a fixed order).
                for c in 0..self.clients.len() {
                    for s in 0..self.servers.len() {
                        let due = matches!(
                            self.clients[c].ops[s],
                            Some(Op { flight: Flight::Sleeping(at), .. }) if at <= now
                        );
                        if due {
                            let epoch = self.servers[s].epoch;
                            self.feed_op(c, s, Event::Resume, epoch, world, &mut fx);
                        }
                    }
                }
            }
        }
        self.check(config, &mut fx);
        fx
    }

    /// The next instant at which the passing of time changes anything.
    fn next_event(&self) -> Millis {
        let now = self.now;
        let mut next = (now / STEP + 1) * STEP;
        let mut consider = |at: Millis| {
            if at > now {
                next = next.min(at);
            }
        };
        for c in &self.clients {
            if let Phase::Holding { valid_until } = c.phase {
                consider(valid_until);
            }
            for hold in c.holds.iter().flatten() {
                consider(hold.state.deadline());
            }
            for op in c.ops.iter().flatten() {
                if let Flight::Sleeping(at) = op.flight {
                    consider(at);
                }
            }
        }
        for s in &self.servers {
            if let Some(at) = s.expiry(now)
                && at != Millis::MAX
            {
                consider(at);
                consider(at + 1);
            }
            if let Some(at) = s.out_until {
                consider(at);
            }
        }
        next
    }

    /// Runs the call in flight on `server` now; returns the reply and the server's restart
    /// count.
    fn execute(
        &mut self,
        client: usize,
        server: usize,
        world: &World,
        fx: &mut Effects,
    ) -> (Reply, u8) {
        let Some(Op {
            kind,
            flight: Flight::Sent(call),
            ..
        }) = &self.clients[client].ops[server]
        else {
            return (Reply::Nil, self.servers[server].epoch);
        };
        let now = self.now;
        let s = &mut self.servers[server];
        let server_now = s.now(now);
        let reply = world.run(call, &mut s.ks, server_now);
        s.loading = false;
        // A background round's give-back that gave a lost acquire's hold back.
        if matches!(kind, OpKind::Reconcile(_))
            && call.script == ScriptId::Release
            && matches!(reply, Reply::Int(n) if n >= 0)
        {
            fx.milestones.push(M_RECONCILED);
        }
        (reply, s.epoch)
    }

    /// Feeds an event to the op in flight on `server`.
    #[allow(clippy::too_many_arguments)]
    fn feed_op(
        &mut self,
        client: usize,
        server: usize,
        event: Event,
        epoch: u8,
        world: &World,
        fx: &mut Effects,
    ) {
        let Some(op) = self.clients[client].ops[server].take() else {
            return;
        };
        self.drive(client, server, op.kind, event, epoch, world, fx);
    }

    /// Feeds an event to a client's operation on one server (the library's own machine,
    /// exactly as its driver does) and acts on what it answers: a call to put in flight, a
    /// sleep, or an outcome. `epoch`: the server's restart count when the reply's call ran.
    #[allow(clippy::too_many_arguments)]
    fn drive(
        &mut self,
        client: usize,
        server: usize,
        kind: OpKind,
        event: Event,
        epoch: u8,
        world: &World,
        fx: &mut Effects,
    ) {
        let now = self.now;
        let resumed = matches!(event, Event::Resume);
        let c = &mut self.clients[client];
        let mut env = ModelEnv {
            now,
            ids: &mut c.ids[server],
        };
        let lane = &mut c.lanes[server];
        let (kind, next) = match kind {
            OpKind::Acquire(mut op) => {
                let next = feed(&mut op, &mut env, lane, event);
                if let Some(hold) = op.abandoned() {
                    self.abandon(server, hold.clone(), fx);
                }
                match next {
                    Next::Done(outcome) => {
                        self.attempt_done(client, server, outcome, epoch, world, fx);
                        return;
                    }
                    Next::Send(call) => (OpKind::Acquire(op), Flight::Sent(call)),
                    Next::SleepUntil(at) => (OpKind::Acquire(op), Flight::Sleeping(at)),
                }
            }
            OpKind::Release {
                mut flow,
                hold,
                lost_attempt,
                give_up_at,
                busied,
            } => {
                let next = feed(&mut flow, &mut env, lane, event);
                if let Some(given) = flow.abandoned() {
                    self.abandon(server, given.clone(), fx);
                }
                let kind = |flow| OpKind::Release {
                    flow,
                    hold: hold.clone(),
                    lost_attempt,
                    give_up_at,
                    busied,
                };
                match next {
                    Next::Done(outcome) => {
                        self.release_done(client, server, &hold, lost_attempt, busied, outcome, fx);
                        return;
                    }
                    Next::Send(call) => (kind(flow), Flight::Sent(call)),
                    Next::SleepUntil(at) => (kind(flow), Flight::Sleeping(at)),
                }
            }
            OpKind::Reconcile(mut round) => {
                let next = feed(&mut round, &mut env, lane, event);
                if let Some(hold) = round.abandoned() {
                    self.abandon(server, hold.clone(), fx);
                }
                match next {
                    Next::Done(outcome) => {
                        // As the library's background task: it goes on only when told to
                        // ask again; resolved or given up, it ends.
                        if !matches!(outcome, RoundOutcome::RetryAt(_)) {
                            self.clients[client].background[server] = false;
                        }
                        return;
                    }
                    Next::Send(call) => (OpKind::Reconcile(round), Flight::Sent(call)),
                    Next::SleepUntil(at) => (OpKind::Reconcile(round), Flight::Sleeping(at)),
                }
            }
        };
        self.clients[client].ops[server] = Some(Op {
            kind,
            flight: next,
            resumed,
        });
    }

    /// A server's connections break (it went down or restarted): the stray requests they
    /// still carried never run.
    fn drop_strays(&mut self, server: usize) {
        for c in &mut self.clients {
            c.strays[server] = None;
        }
    }

    fn abandon(&mut self, server: usize, hold: Arc<str>, fx: &mut Effects) {
        if self.abandoned.insert((server, hold)) {
            fx.milestones.push(M_ABANDONED);
        }
    }

    fn start_attempt(&mut self, client: usize, lease: Millis, world: &World, fx: &mut Effects) {
        let n = self.servers.len();
        let now = self.now;
        let c = &mut self.clients[client];
        c.attempts_left -= 1;
        c.phase = Phase::Attempting {
            start: now,
            lease,
            outcomes: vec![None; n],
        };
        for server in 0..n {
            let c = &mut self.clients[client];
            let request = AcquireRequest {
                owner: c.owner.clone(),
                lease_ms: lease,
                request: c.ids[server].next_id(),
                fenced: false,
                others_waiting: false,
                contended: false,
            };
            // As `Lock::attempt_in_lane`: the client tracks no live hold of the owner on
            // this server when a RedLock attempt starts (the user re-enters nothing).
            let op = AttemptOp::new(world.keys.clone(), request).may_reenter(false);
            let epoch = self.servers[server].epoch;
            self.drive(
                client,
                server,
                OpKind::Acquire(op),
                Event::Start,
                epoch,
                world,
                fx,
            );
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn attempt_done(
        &mut self,
        client: usize,
        server: usize,
        outcome: AttemptOutcome,
        epoch: u8,
        world: &World,
        fx: &mut Effects,
    ) {
        // The attempt was decided without this server (a new attempt starts only once
        // every lane is free): its outcome goes nowhere, as a dropped `try_acquire`'s.
        let left_out = !matches!(self.clients[client].phase, Phase::Attempting { .. });
        let result = match outcome {
            AttemptOutcome::Granted {
                granted,
                sent_at,
                lease_ms,
                adopted,
            } => {
                if adopted {
                    fx.milestones.push(M_ADOPTED);
                }
                // As `Lock::guard_for`: a fixed-lease guard credited from `sent_at`.
                let hold = Hold {
                    state: HoldState::new(granted.hold.clone(), sent_at, lease_ms, false),
                    hold: granted.hold,
                    sent_at,
                    lease: lease_ms,
                    epoch,
                    adopted,
                };
                if left_out {
                    // As the detached attempt: its guard is dropped at once, which gives
                    // the hold back (`LockGuard::release` in the background).
                    fx.milestones.push(M_LEFT_OUT);
                    self.release_hold(client, server, hold, false, world, fx);
                    return;
                }
                self.clients[client].holds[server] = Some(hold);
                Outcome::Granted
            }
            AttemptOutcome::Held { .. } => Outcome::Held,
            AttemptOutcome::Failed {
                reconcile_in_background,
                failure,
            } => {
                if reconcile_in_background {
                    self.clients[client].background[server] = true;
                }
                // Whatever the classifier made of it, the model's own BUSY/LOADING reply.
                let busy = match &failure {
                    Failure::Transient(m) | Failure::Permanent(m) => {
                        m.starts_with("BUSY ") || m.starts_with("LOADING ")
                    }
                    _ => false,
                };
                if busy { Outcome::Busy } else { Outcome::Failed }
            }
            AttemptOutcome::NotALock(found) => {
                fx.violate(UNDERSTOOD, format!("server {server}: not a lock: {found}"));
                Outcome::Failed
            }
            AttemptOutcome::Unreadable(err) => {
                fx.violate(UNDERSTOOD, format!("server {server}: unreadable: {err}"));
                Outcome::Failed
            }
        };
        let c = &mut self.clients[client];
        let Phase::Attempting { outcomes, .. } = &mut c.phase else {
            return;
        };
        outcomes[server] = Some(result);
        if outcomes.iter().all(Option::is_some) {
            self.decide(client, world, fx);
        }
    }

    /// Every server answered, or a majority granted and the rest are left out
    /// ([`Step::DecideEarly`]): the core's RedLock decision, as `RedLock::attempt` takes
    /// it.
    fn decide(&mut self, client: usize, world: &World, fx: &mut Effects) {
        let now = self.now;
        let n = self.servers.len();
        let c = &mut self.clients[client];
        let Phase::Attempting {
            start,
            lease,
            outcomes,
        } = c.phase.clone()
        else {
            return;
        };
        let granted = outcomes
            .iter()
            .filter(|o| **o == Some(Outcome::Granted))
            .count();
        let failed = outcomes
            .iter()
            .filter(|o| matches!(o, Some(Outcome::Failed | Outcome::Busy)))
            .count();
        let busied = outcomes.contains(&Some(Outcome::Busy));
        let sent: Vec<Millis> = c.holds.iter().flatten().map(|h| h.sent_at).collect();
        let elapsed = redlock_elapsed(start, now, sent);
        let won = redlock::decide(granted, n, lease, elapsed);
        let early = outcomes.iter().any(Option::is_none);
        if early && granted < documented_quorum(n) {
            // The README's rule: the others are left out only once a majority granted.
            fx.violate(
                VALIDITY,
                format!(
                    "client {client}: decided with servers still running after {granted} of \
                     {n} granted, documented: only once {} granted",
                    documented_quorum(n)
                ),
            );
        }
        // "Validity as documented": the decision itself, against the README's rule,
        // written out here (N/2 + 1; lease − elapsed − (1 % + 2 ms), > 0).
        let documented = lease as i64 - elapsed as i64 - documented_drift(lease) as i64;
        let should_win = granted >= documented_quorum(n) && documented > 0;
        match won {
            Won::Acquired { validity_ms } => {
                if !should_win || validity_ms as i64 != documented {
                    fx.violate(
                        VALIDITY,
                        format!(
                            "client {client}: {granted} of {n} granted, {elapsed} ms spent, lease {lease}: \
                             acquired with validity {validity_ms}, documented: {}",
                            if should_win {
                                format!("validity {documented}")
                            } else {
                                "give back".into()
                            }
                        ),
                    );
                }
                c.phase = Phase::Holding {
                    valid_until: now + validity_ms,
                };
                if failed > 0 {
                    fx.milestones.push(M_FAILING);
                }
                if busied {
                    fx.milestones.push(M_BUSY_ACQUIRED);
                }
                if early {
                    fx.milestones.push(M_EARLY);
                }
                if validity_ms < lease - documented_drift(lease) {
                    fx.milestones.push(M_ELAPSED);
                }
                if self.servers.iter().any(|s| s.epoch > 0) {
                    fx.milestones.push(M_AFTER_RESTART);
                }
                if self.acquired_by & !(1 << client) != 0 {
                    fx.milestones.push(M_HAND_OFF);
                }
                self.acquired_by |= 1 << client;
            }
            Won::GiveBack => {
                if should_win {
                    fx.violate(
                        VALIDITY,
                        format!(
                            "client {client}: {granted} of {n} granted, {elapsed} ms spent, lease {lease}: \
                             gave back, documented: acquired with validity {documented}"
                        ),
                    );
                }
                if granted >= documented_quorum(n) {
                    fx.milestones.push(M_TOO_LATE);
                }
                let held = outcomes
                    .iter()
                    .filter(|o| **o == Some(Outcome::Held))
                    .count();
                let anyone_holds = self
                    .clients
                    .iter()
                    .any(|c| matches!(c.phase, Phase::Holding { .. }));
                if granted > 0 && held > 0 && failed == 0 && !anyone_holds {
                    // It got a minority, the others were held, and nobody holds the RedLock.
                    fx.milestones.push(M_SPLIT);
                }
                // Refused although a force-unlock took one of a holder's members.
                let doomed = &self.doomed;
                if granted > 0
                    && self.clients.iter().any(|c| {
                        matches!(c.phase, Phase::Holding { valid_until } if now < valid_until)
                            && c.holds.iter().enumerate().any(|(s, h)| {
                                h.as_ref()
                                    .is_some_and(|h| doomed.contains(&(s, h.hold.clone())))
                            })
                    })
                {
                    fx.milestones.push(M_FORCED_REFUSED);
                }
                self.give_back(client, world, true, fx);
            }
        }
    }

    /// Gives back every hold of the client (`give_back` after a lost attempt,
    /// `RedGuard::release`): one `LockGuard::release` per hold, in that server's lane.
    fn give_back(&mut self, client: usize, world: &World, lost_attempt: bool, fx: &mut Effects) {
        let n = self.servers.len();
        self.clients[client].phase = Phase::Releasing;
        for server in 0..n {
            let Some(hold) = self.clients[client].holds[server].take() else {
                continue;
            };
            self.release_hold(client, server, hold, lost_attempt, world, fx);
        }
        self.maybe_idle(client);
    }

    /// Gives back one hold (`LockGuard::release`, or a dropped guard's release) in that
    /// server's lane.
    fn release_hold(
        &mut self,
        client: usize,
        server: usize,
        mut hold: Hold,
        lost_attempt: bool,
        world: &World,
        fx: &mut Effects,
    ) {
        let now = self.now;
        // As `LockGuard::release`, the core's `release::leave`: the retry bound first,
        // then the guard leaves (the last one: nothing to re-arm).
        let fixed_end = Some(hold.state_fixed_end());
        let leaving = release::leave(
            &mut hold.state,
            now,
            RESPONSE_TIMEOUT,
            false,
            fixed_end,
            LEASE,
        );
        let flow = ReleaseFlow::new(
            world.keys.clone(),
            self.clients[client].owner.clone(),
            hold.hold.clone(),
            leaving.give_up_at,
            None,
        )
        .first_hold(leaving.first_hold);
        let epoch = self.servers[server].epoch;
        self.drive(
            client,
            server,
            OpKind::Release {
                flow,
                hold,
                lost_attempt,
                give_up_at: leaving.give_up_at,
                busied: false,
            },
            Event::Start,
            epoch,
            world,
            fx,
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn release_done(
        &mut self,
        client: usize,
        server: usize,
        hold: &Hold,
        lost_attempt: bool,
        busied: bool,
        outcome: ReleaseResult,
        fx: &mut Effects,
    ) {
        match outcome {
            Ok(ReleaseOutcome::Released { .. }) => {
                if lost_attempt {
                    fx.milestones.push(M_GAVE_BACK);
                }
                if busied {
                    fx.milestones.push(M_BUSY_GAVE_BACK);
                }
            }
            Ok(ReleaseOutcome::NotHeld) => {
                if self.doomed.contains(&(server, hold.hold.clone())) {
                    fx.milestones.push(M_FORCED_RELEASE);
                }
            }
            Ok(ReleaseOutcome::Failed(_) | ReleaseOutcome::Unconfirmed) => {
                self.abandon(server, hold.hold.clone(), fx);
            }
            Ok(ReleaseOutcome::NotALock) => {
                fx.violate(
                    UNDERSTOOD,
                    format!("server {server}: release found no lock"),
                );
            }
            Err(err) => fx.violate(UNDERSTOOD, format!("server {server}: {err}")),
        }
        self.maybe_idle(client);
    }

    /// A client giving back is idle once every release is over.
    fn maybe_idle(&mut self, client: usize) {
        let c = &mut self.clients[client];
        let releasing = c
            .ops
            .iter()
            .flatten()
            .any(|op| matches!(op.kind, OpKind::Release { .. }));
        if c.phase == Phase::Releasing && !releasing {
            c.phase = Phase::Idle;
        }
    }

    /// Checks every property in this state.
    fn check(&self, config: &Config, fx: &mut Effects) {
        let now = self.now;
        // (2b) The validity never outlives a counted hold, and (4) no hold's guard believes
        // past its key: for every hold the client's RedGuard (or its attempt) counts, on a
        // server that has not restarted since, Redis has that very hold, and its key lives
        // at least until the validity's end and the hold's own deadline.
        //
        // EXCEPTION (documented, README "A server that restarts without its data can give
        // the lock twice"): a hold on a server that restarted empty since it was taken is
        // gone, and RedLock guarantees nothing about it. Nothing else is excused.
        for (ci, c) in self.clients.iter().enumerate() {
            let believes_until = match c.phase {
                Phase::Holding { valid_until } if now < valid_until => Some(valid_until),
                _ => None,
            };
            for (s, hold) in c.holds.iter().enumerate() {
                let Some(hold) = hold else { continue };
                let server = &self.servers[s];
                if server.epoch != hold.epoch || self.doomed.contains(&(s, hold.hold.clone())) {
                    // Wiped behind its holder's back (a restart, a force-unlock): the
                    // beliefs in it are held to its lease instead, from its send time (what
                    // the client could prove).
                    let end = hold.sent_at + hold.lease;
                    let guard_believes = hold.state.lost().is_none() && now < hold.state.deadline();
                    if guard_believes && hold.state.deadline() > end {
                        fx.violate(
                            LOST_SIGNAL,
                            format!(
                                "client {ci}: server {s}'s guard believes its wiped hold {} \
                                 until t={}, past its lease's end t={end}",
                                hold.hold,
                                hold.state.deadline()
                            ),
                        );
                    }
                    if let Some(valid_until) = believes_until
                        && valid_until > end
                    {
                        fx.violate(
                            OUTLIVES,
                            format!(
                                "client {ci}: the RedLock is valid until t={valid_until}, past \
                                 the lease's end t={end} of its wiped hold {} on server {s}",
                                hold.hold
                            ),
                        );
                    }
                    continue;
                }
                let current = server.current(now).map(|(h, _)| h);
                let expiry = server.expiry(now);
                let guard_believes = hold.state.lost().is_none() && now < hold.state.deadline();
                if guard_believes
                    && (current.as_ref() != Some(&hold.hold)
                        || expiry.is_none_or(|e| e < hold.state.deadline()))
                {
                    fx.violate(
                        LOST_SIGNAL,
                        format!(
                            "client {ci}: server {s}'s guard believes it holds {} until t={}, \
                             but the server has {:?} until t={:?}",
                            hold.hold,
                            hold.state.deadline(),
                            current,
                            expiry
                        ),
                    );
                }
                if let Some(valid_until) = believes_until
                    && (current.as_ref() != Some(&hold.hold)
                        || expiry.is_none_or(|e| e < valid_until))
                {
                    fx.violate(
                        OUTLIVES,
                        format!(
                            "client {ci}: the RedLock is valid until t={valid_until}, but its \
                             counted hold {} on server {s} (sent at t={}, lease {}{}) is {}",
                            hold.hold,
                            hold.sent_at,
                            hold.lease,
                            if hold.adopted { ", adopted" } else { "" },
                            match (&current, expiry) {
                                (Some(h), Some(e)) if *h == hold.hold =>
                                    format!("there only until t={e}"),
                                (other, _) => format!("not there (the server has {other:?})"),
                            }
                        ),
                    );
                }
            }
        }

        // (1) Never two holders within validity.
        let believers: Vec<usize> = self
            .clients
            .iter()
            .enumerate()
            .filter(|(_, c)| matches!(c.phase, Phase::Holding { valid_until } if now < valid_until))
            .map(|(i, _)| i)
            .collect();
        if let [a, b] = believers[..] {
            // EXCEPTION (documented in the README: "A server that restarts without its data
            // can give the lock twice"): allowed only when every server that both majorities
            // count restarted empty between the two grants, and the configuration lets a
            // restarted server rejoin at once. With the remedy (kept out for a lease) the
            // property holds without exception.
            let (ha, hb) = (&self.clients[a].holds, &self.clients[b].holds);
            let shared: Vec<usize> = (0..self.servers.len())
                .filter(|s| ha[*s].is_some() && hb[*s].is_some())
                .collect();
            let restarted = |s: &usize| {
                !config.rejoin_after_lease
                    && ha[*s].as_ref().map(|h| h.epoch) != hb[*s].as_ref().map(|h| h.epoch)
            };
            // The same for a force-unlock (see the header): the hold one of them counts
            // there was deleted behind its back.
            let forced = |s: &usize| {
                [ha, hb].iter().any(|holds| {
                    holds[*s]
                        .as_ref()
                        .is_some_and(|h| self.doomed.contains(&(*s, h.hold.clone())))
                })
            };
            let all_wiped = !shared.is_empty() && shared.iter().all(|s| restarted(s) || forced(s));
            if all_wiped {
                fx.milestones.push(if shared.iter().any(forced) {
                    M_FORCED_TWICE
                } else {
                    M_RESTART_TWICE
                });
            } else {
                fx.violate(
                    TWO_HOLDERS,
                    format!(
                        "clients {a} and {b} both believe they hold the RedLock (until t={:?} and t={:?}); \
                         servers both count: {shared:?}",
                        valid(&self.clients[a].phase),
                        valid(&self.clients[b].phase),
                    ),
                );
            }
        }

        // (3) No orphans: once nothing is in flight, no attempt or give-back is under way
        // and no lost acquire is pending, every hold on every server belongs to a RedGuard
        // that holds it, once per guard, unless its give-back failed (it expires with its
        // lease).
        let quiet = self.clients.iter().all(|c| {
            c.ops.iter().all(Option::is_none)
                && matches!(c.phase, Phase::Idle | Phase::Holding { .. })
                && c.lanes.iter().all(|lane| !lane.is_pending())
        });
        if quiet {
            for (s, server) in self.servers.iter().enumerate() {
                let Some((hold, counts)) = server.current(now) else {
                    continue;
                };
                if self.abandoned.contains(&(s, hold.clone())) {
                    continue;
                }
                for (owner, count) in counts {
                    let guards = self
                        .clients
                        .iter()
                        .filter(|c| *c.owner == *owner)
                        .filter(|c| c.holds[s].as_ref().is_some_and(|h| h.hold == hold))
                        .count() as u64;
                    if count > guards {
                        fx.violate(
                            ORPHANS,
                            format!(
                                "server {s} counts {count} holds of {owner} on {hold}, but only \
                                 {guards} RedGuard holds it"
                            ),
                        );
                    }
                }
            }
        }
    }

    /// A readable picture of the state, for traces.
    pub fn describe(&self) -> String {
        let now = self.now;
        let mut out = format!("t={now}");
        for (s, server) in self.servers.iter().enumerate() {
            let _ = write!(out, " | s{s}");
            if !server.up {
                out.push_str(" DOWN");
            }
            if server.epoch > 0 {
                let _ = write!(out, " restarted x{}", server.epoch);
            }
            if server.skew > 0 {
                let _ = write!(out, " clock +{}", server.skew);
            }
            if server.loading {
                out.push_str(" loading");
            }
            for (d, hold) in &self.doomed {
                if *d == s {
                    let _ = write!(out, " (force-unlocked {hold})");
                }
            }
            match (server.current(now), server.expiry(now)) {
                (Some((hold, counts)), expiry) => {
                    let counts: Vec<String> =
                        counts.iter().map(|(o, n)| format!("{o}={n}")).collect();
                    let _ = write!(
                        out,
                        ": {hold} [{}] until t={}",
                        counts.join(","),
                        expiry.map_or("?".into(), |e| e.to_string())
                    );
                }
                (None, _) => out.push_str(": free"),
            }
        }
        for (i, c) in self.clients.iter().enumerate() {
            let _ = write!(out, "\n      client {i} ({}): ", c.owner);
            match &c.phase {
                Phase::Idle => out.push_str("idle"),
                Phase::Attempting {
                    start,
                    lease,
                    outcomes,
                } => {
                    let _ = write!(
                        out,
                        "attempting since t={start} (lease {lease}) {outcomes:?}"
                    );
                }
                Phase::Holding { valid_until } => {
                    let _ = write!(out, "HOLDS the RedLock, valid until t={valid_until}");
                }
                Phase::Releasing => out.push_str("giving back"),
            }
            for (s, hold) in c.holds.iter().enumerate() {
                if let Some(h) = hold {
                    let _ = write!(
                        out,
                        " [s{s}: {} sent t={} lease {}{} deadline t={}]",
                        h.hold,
                        h.sent_at,
                        h.lease,
                        if h.adopted { " adopted" } else { "" },
                        h.state.deadline()
                    );
                }
            }
            for (s, op) in c.ops.iter().enumerate() {
                if let Some(op) = op {
                    let what = match &op.kind {
                        OpKind::Acquire(_) => "attempt",
                        OpKind::Release { .. } => "release",
                        OpKind::Reconcile(_) => "reconcile",
                    };
                    let flight = match &op.flight {
                        Flight::Sent(call) => {
                            format!("sent {:?} {}", call.script, call.args.join(" "))
                        }
                        Flight::Replied { reply, .. } => format!("ran, reply {reply:?} on its way"),
                        Flight::Sleeping(at) => format!("sleeping until t={at}"),
                    };
                    let _ = write!(out, " [s{s} {what}: {flight}]");
                }
            }
            for (s, stray) in c.strays.iter().enumerate() {
                if let Some((call, sent_at)) = stray {
                    let _ = write!(
                        out,
                        " [s{s}: stray {:?} sent t={sent_at} still on the connection]",
                        call.script
                    );
                }
            }
            for (s, lane) in c.lanes.iter().enumerate() {
                if lane.is_pending() {
                    let _ = write!(out, " [s{s}: lost acquire pending]");
                }
            }
        }
        out
    }
}

fn valid(phase: &Phase) -> Option<Millis> {
    match phase {
        Phase::Holding { valid_until } => Some(*valid_until),
        _ => None,
    }
}

impl Hold {
    /// The end of its fixed lease (`LockGuard`'s `fixed_end`).
    fn state_fixed_end(&self) -> Millis {
        self.sent_at + self.lease
    }
}

/// RedLock's model, for the one checker (`tests/protocol/checker.rs`).
pub struct Red;

impl Model for Red {
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
            violations: effects.violations,
        }
    }
    fn describe(state: &State) -> String {
        state.describe()
    }
    /// A state's fingerprint, the same for states that differ only by a permutation of
    /// the servers (they are interchangeable: same scripts, same budgets, and no property
    /// or step treats one server differently from another). Everything that belongs to one
    /// server (its keyspace and status, and every client's lane, ids, operation, background
    /// task, hold and attempt outcome there, and its abandoned holds) is hashed as one
    /// column; the columns are hashed as a sorted multiset.
    fn fingerprint(state: &State) -> u64 {
        let mut columns: Vec<u64> = (0..state.servers.len())
            .map(|s| {
                let mut h = DefaultHasher::new();
                state.servers[s].hash(&mut h);
                for c in &state.clients {
                    c.lanes[s].hash(&mut h);
                    c.ids[s].hash(&mut h);
                    c.ops[s].hash(&mut h);
                    c.background[s].hash(&mut h);
                    c.holds[s].hash(&mut h);
                    c.strays[s].hash(&mut h);
                    if let Phase::Attempting { outcomes, .. } = &c.phase {
                        outcomes[s].hash(&mut h);
                    }
                }
                for (server, hold) in &state.abandoned {
                    if *server == s {
                        hold.hash(&mut h);
                    }
                }
                for (server, hold) in &state.doomed {
                    if *server == s {
                        (1u8, hold).hash(&mut h);
                    }
                }
                h.finish()
            })
            .collect();
        columns.sort_unstable();
        let mut h = DefaultHasher::new();
        columns.hash(&mut h);
        state.now.hash(&mut h);
        (
            state.downs_left,
            state.restarts_left,
            state.faults_left,
            state.slow_left,
            state.skews_left,
            state.advances_left,
            state.acquired_by,
            state.busy_left,
            state.force_left,
        )
            .hash(&mut h);
        for c in &state.clients {
            c.attempts_left.hash(&mut h);
            match &c.phase {
                Phase::Idle => 0u8.hash(&mut h),
                Phase::Attempting { start, lease, .. } => (1u8, start, lease).hash(&mut h),
                Phase::Holding { valid_until } => (2u8, valid_until).hash(&mut h),
                Phase::Releasing => 3u8.hash(&mut h),
            }
        }
        h.finish()
    }
}
