//! The multi-lock's protocol model: a few clients, each taking several reentrant locks all
//! or none, in one Redis (or two), which may answer `BUSY`/`LOADING` and restart empty,
//! and whose operator may force-unlock one member lock.
//!
//! Every decision is the library's own: the order members are taken in comes from
//! `protocol::multi::global_order`, the all-or-none walk from `MultiAcquire`, the order
//! of a give-back or release and what the user is told of it from `MultiRelease`, each
//! member is taken by the core's `AttemptOp` in that lock's (lock, owner) lane and given back by
//! its `ReleaseFlow`, a lost acquire is reconciled by its `ReconcileRound`, and what a
//! client believes about a hold is its `HoldState`. Every call runs the real `lua/*.lua`
//! in the embedded Lua against the keyspace model. What the model adds is what
//! `src/multi/mod.rs` and the async runtime do around the core (starting the member the
//! walk names, waiting, releasing the member `MultiRelease` names) and the world: users, lost replies, `BUSY`/`LOADING` replies,
//! restarts that lose all data, an operator's force-unlocks, and the clock.
//!
//! Assumptions and reductions (each keeps every behaviour the properties can see):
//! * One server: every member's `OrderKey` has the same server part; except where a
//!   configuration places its locks ([`Config::placed`]): there two members may have one
//!   key on two servers. The model's one keyspace then stands for both servers' (every
//!   script touches only its own lock's keys, so their union is one keyspace), and holds
//!   each lock under its own name (`L:{a}`, `L:{b}`); its `OrderKey` is the key as its
//!   own server names it.
//! * Fixed leases ([`LEASE`]), no watchdog: a holder that stops loses its members when
//!   their leases run out. (The library's watchdog also checks fixed-lease holds and
//!   tells a wiped one lost within a tick; without it a belief in a wiped member lasts
//!   longest, which the restart rule below allows for.)
//! * A call runs in Redis and its reply reaches the client in one step (`Run`), or it is
//!   lost before running (`LoseRequest`) or after (`LoseReply`), or Redis answers it
//!   `BUSY`/`LOADING` without running it (`Busy`: fed to the core as
//!   `Failure::Transient`, as the driver classifies that reply). The clock moves only when
//!   no call is in flight, so a call runs at its send time (the client's lease estimate is
//!   then exact: the tightest case for "never two holders").
//! * One operation at a time per client (the user's member calls, and background
//!   reconciliation rounds in between). One multi-lock acquisition at a time per client.
//! * A waiting member is retried (`Retry`: the wake-up, or the end of the pttl-bounded
//!   sleep) only when the lock is not held by another owner in Redis at that moment, once
//!   the member was refused: a retry then would only get "held" again and draw a fresh
//!   request id. A retry sent just before the holder's release runs is the same as one sent
//!   just after, since the clock does not move in between. A member whose attempt failed
//!   before any refusal (`BUSY`) is retried whatever Redis holds: its refusal is news.
//! * What a member attempt that got no usable reply leads to is the library's waiting loop's
//!   decision (`protocol::wait::Wait` with the plain lock's policy, asked only how the
//!   attempt ended, as `Lock::acquire` asks it): a `BUSY`/`LOADING` is ridden out from the
//!   first attempt on (the member is attempted again: `Retry`); a lost request or reply
//!   ends the member's wait with that error (`on_member(false)`) on the first attempt,
//!   and is ridden out once the member was refused (until the wait runs out: `GiveUp`).
//!   The outage tolerance never runs out: the model's faults run out long before.
//!   A release (give-back or the user's) and a probe answered `BUSY` are re-sent by the
//!   core's own `ReleaseFlow` / `ReconcileRound` (a background round that got `BUSY` ends,
//!   and the lane's next `Reconcile` asks again).
//! * A `BUSY` is judged by what the world did, not by how the library classifies it: the
//!   model chose the `Busy` step, so it knows the call did not run and that asking again
//!   can succeed. "BUSY never fails an operation": a member attempt, a give-back, a
//!   release or a probe whose call the model answered `BUSY` does not end failed on it,
//!   nor leave a hold to its lease; it is re-sent or ridden out until a real bound (the
//!   release's retry bound, the lease a lost acquire's hold could live for, a wait that
//!   runs out: `GiveUp`). An attempt that ends on a lost reply the model chose (its probe
//!   then answered `BUSY`) ends on that loss, as above.
//! * Restarts ([`Config::restarts`]): a Redis server restarts without persistence and
//!   loses every key it has (`Restart`: every member's, with one server; with
//!   [`Config::placed`], the members placed on it, the other server keeps its own). Only
//!   when no call is in flight: a call on its way at the crash is the same as one lost,
//!   before or after running, just before it (`LoseRequest` / `LoseReply`). The restart
//!   takes 1 ms (the clock moves by 1).
//! * Force-unlocks ([`Config::force_unlocks`]): an operator runs the real
//!   `lua/force_unlock.lua` on one member lock (`ForceUnlock`, built by the library's
//!   `force_unlock_call`, as the plain lock's model does), whoever holds it or waits for
//!   it and whatever is in flight: a call in flight, on that lock or another, runs after
//!   it (a lost member reply's probe may then find the lost acquire's hold gone). The
//!   other members stay. Only of a lock Redis has (of a free one it changes nothing).
//! * Late requests ([`Config::timeouts`], as the plain, fair and read-write locks' models):
//!   a call sent and not yet run may get no reply within the response timeout (`TimeOut`:
//!   fed to the core as `Failure::TimedOut`). The copy on the wire is then late (a
//!   *stray*): it may still run (`ExecuteStray`), possibly after the clock moved, or never
//!   (`DropStray`: its connection went away before Redis read it); a call that ran before
//!   its reply timed out is the same as a stray that runs at once (what its client does
//!   next waits behind it, the clock still). Every member call (an attempt, a probe, a
//!   give-back, a release, a background round's calls) goes on the client's one
//!   multiplexed connection to the member's server, which a timeout does not drop: a
//!   stray runs, if at all, before anything its client sends after it (TCP keeps a
//!   connection's requests in order), so a call sent behind strays waits for them (`Run`,
//!   `LoseRequest`, `LoseReply` and `Busy` only once they ran or were dropped, the clock
//!   still: a connection that drops under it drops them first), and a client's strays run
//!   in the order they were sent. Only with one server (the late configurations have one:
//!   across two servers the model would order them needlessly). What the client does on a
//!   timeout is its core's decision: a member attempt's `AttemptOp` hands a timed-out
//!   acquire to its lane (`Lane::lost_acquire`, reconciled by the next request of the lane,
//!   a probe sent behind the stray, or by a background `ReconcileRound`) and ends failed,
//!   and the waiting loop (`protocol::wait::Wait`, as for a lost reply) ends the member's
//!   wait on a first attempt (the walk gives back what it took, last taken first) or rides it
//!   out once the member was refused; a give-back's or release's `ReleaseFlow` re-sends the
//!   same request (the script applies it at most once, and what the release reports counts
//!   a stray copy that gave the hold back); a round's probe that fails asks again later
//!   or, past the lost acquire's lease from when the loss was noticed, stops, but not
//!   while it times out (`Lane::on_probe_failure`, `Reconcile::on_failure`: see below). A stray runs with every check a run on time gets; it is
//!   not "in flight". A restart drops the strays on its server with their connection; a
//!   force-unlock leaves them (one sent before it may run after it).
//!
//!   Why no late member acquire is left to its lease: the lane's reconciliation has a
//!   bound, a lease after the loss was noticed (`t + LEASE`), after which a hold the
//!   request took by then must have expired. A stray is not bounded by that: it may run
//!   after the clock moved, and its hold then lives a lease from its own run. So the core
//!   (`Reconcile::on_failure`) moves the bound a lease on at every probe failure until
//!   one shows the request's connection gone (a timed-out or `BUSY` probe: the request
//!   ran by now, or may still run; the first lost or unsent one: it may have run just
//!   before), and stops only past that bound or on an answer. With the first bound alone
//!   (`Defect::ReconcileStopsOnTimeouts`) the late configuration finds a hold that is
//!   nobody's ("all or none"); the milestone "a reconciliation kept asking past its bound
//!   while its probes timed out" shows that the case is reached. Found by this model:
//!   the core stopped at the first bound until then.
//!
//! What a restart or a force-unlock excludes, and why (the rule of the plain lock's model,
//! `model.rs`): a hold that was live in Redis when its key went is *doomed*. Nothing the library can do
//! keeps a belief in it true: until its holder learns it (here, with fixed leases and no
//! watchdog, when its release finds it gone, or its lease runs out by the client's clock),
//! another client may take the member and both believe they hold it. A force-unlock is a
//! wipe of one key, so its member is doomed as a restart's is. So "never two holders of one lock" is about the
//! beliefs in holds that are not doomed (unchanged for them: one owner, current in Redis,
//! Redis keeps it at least as long), and a belief in a doomed hold is held instead to its
//! lease: it ends by the client's clock no later than the lease the acquire asked Redis
//! for, counted from its send time (what the client could prove). "Release is true"
//! checks what a release tells the user (`release::told`, as `LockGuard::release` and
//! `MultiGuard::release` tell it): a member's release says `Ok` only if that release's
//! request gave the hold back in Redis, so a multi-lock a restart or a force-unlock wiped
//! is never reported released while held (the release tells the member lost). "All or
//! none" and "no deadlock" hold
//! with no exception of a restart or a force-unlock (and a
//! give-back or release may end unreleased only on a permanent error: the clock does not
//! move while it is in flight, so its lease never runs out under it; and never on a call
//! the model answered `BUSY`, whatever the library made of it: "BUSY never fails an
//! operation"). Hold ids are request ids (`c<client>.<n>`), unique: a hold a restart
//! wiped never comes back.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Arc;

use redis_locks_protocol::acquire::{self, AcquireRequest};
use redis_locks_protocol::attempt::{AttemptOp, AttemptOutcome, ReconcileRound, RoundOutcome};
use redis_locks_protocol::hold::{HoldState, LostReason};
use redis_locks_protocol::lane::Lane;
use redis_locks_protocol::multi::{MultiAcquire, MultiRelease, MultiStep, OrderKey, global_order};
use redis_locks_protocol::release::{
    self, Found, ReleaseFlow, ReleaseOutcome, ReleaseResult, Told, told,
};
use redis_locks_protocol::wait::{Tried, WaitPolicy, WaitStep, WaitTiming};
use redis_locks_protocol::{
    Call, Env, Failure, LockKeys, Machine, Millis, Next, Reply, RequestIds, ScriptId,
    force_unlock_call,
};

use crate::checker::{Model, Stepped, wait_at_attempt};
use crate::keyspace::Keyspace;
use crate::lua::ScriptRunner;

/// The fixed lease of every member.
pub const LEASE: Millis = 20;
/// The clients' response timeout: a release keeps retrying for at least twice this (the
/// core's `timing::release_give_up_at`).
pub const RESPONSE: Millis = 10;
/// The one server's address (the server part of every `OrderKey`).
pub const SERVER: &str = "127.0.0.1:6379";
/// The servers a configuration may place its locks on ([`Config::placed`]).
pub const SERVERS: [&str; 2] = [SERVER, "127.0.0.1:6380"];
/// The locks' names.
pub const NAMES: [&str; 3] = ["a", "b", "c"];

/// The waiting loop's timing (`Lock::acquire`'s): an outage tolerance the model's faults
/// never exhaust.
const TIMING: WaitTiming = WaitTiming {
    tolerance: 30_000,
    response: 1_000,
};

/// The properties, checked in every state. "All or none" allows a late member hold left to
/// its lease, and only that (see the header). The first leaves out beliefs in holds a restart
/// or a force-unlock wiped (see the header). The last is checked on every `Busy` step: what the operation
/// answered `BUSY` did next.
pub const PROPERTIES: [&str; 6] = [
    "never two holders of one lock",
    "all or none",
    "no deadlock",
    "release is true",
    "every reply is understood",
    "BUSY never fails an operation",
];

/// What the configurations must reach, so that none of them is vacuous. The first eight
/// need neither `BUSY` nor restarts nor force-unlocks; the next ten need `BUSY` or
/// restarts, the next five a force-unlock; the last eight late requests (`timeouts`), the
/// last of them a restart too.
pub const MILESTONES: [&str; 31] = [
    "a multi-lock held",
    "a waiter took every member after the holder released",
    "gave back a partial acquisition",
    "clients named the locks in opposite orders and both completed",
    "took a member whose holder's lease ran out",
    "a lost member reply resolved by a probe",
    "a waiter waited for a holder that itself waits",
    // Not required anywhere: reported when seen. A fixed lease can run out while a later
    // member is waited for; the multi-lock is then held with a member told lost, so its
    // lost signal fires at once (`MultiGuard::is_lost`).
    "held a multi-lock with a member already lost",
    "a member answered BUSY was attempted again and granted once",
    "a member's release answered BUSY gave it back when re-sent",
    "a probe answered BUSY kept the lost acquire pending",
    "a background give-back answered BUSY gave the hold back when re-sent",
    "a restart wiped a held multi-lock",
    "a release told the user of a member a restart wiped",
    "a multi-lock taken again after a restart wiped it",
    "a wiped member's holder and a new holder both believed (the documented exception)",
    "a lost member acquire whose hold a restart wiped was probed and found nothing",
    // Not required anywhere: reported when seen.
    "held a multi-lock with a member a restart wiped while it was being taken",
    "a force-unlock removed a member a multi-lock held",
    "a multi-lock's release reported a force-unlocked member lost",
    "a multi-lock's release told a member's failure",
    "a waiter took a member a force-unlock freed",
    "a lost member acquire whose hold a force-unlock removed was probed and found nothing",
    "a stray member acquire ran after its multi-lock gave up",
    "a stray member acquire took a member after its multi-lock gave up",
    "a stray member acquire's hold was given back by reconciliation",
    "a stray member acquire's hold was adopted by a later attempt",
    "a stray copy of a give-back or release ran",
    "a waiting member rode out a timed-out attempt",
    // Past a lease after the loss was noticed, a timed-out probe is asked again (the lost
    // request may not have run yet): no late hold is left to its lease.
    "a reconciliation kept asking past its bound while its probes timed out",
    "a restart dropped a stray",
];

pub use crate::lua::Scripts;

/// The parties and the bounds of one exploration.
#[derive(Clone, Debug)]
pub struct Config {
    /// Name of the configuration, for the report.
    pub name: &'static str,
    /// How many locks (`L:{a}`, `L:{b}`, ...).
    pub locks: usize,
    /// Per client (one owner each): the locks its user names, in the user's own order.
    pub named: Vec<Vec<usize>>,
    /// Multi-lock acquisitions each client's user may start.
    pub acquires: u8,
    /// Waits that run out ("give up waiting"), in all.
    pub give_ups: u8,
    /// Lost requests and lost replies, in all.
    pub faults: u8,
    /// Clock steps, in all.
    pub advances: u8,
    /// `BUSY`/`LOADING` replies (the call did not run), in all.
    pub busy: u8,
    /// Restarts of Redis that lose all data, in all.
    pub restarts: u8,
    /// An operator's force-unlocks of one member lock (`lua/force_unlock.lua`), in all.
    pub force_unlocks: u8,
    /// Per lock, as the global order sees it: the name its key is made of and the server
    /// it is on (indices into [`NAMES`] and [`SERVERS`]). Empty: lock `i` is `NAMES[i]`
    /// on the one server.
    pub placed: Vec<(usize, usize)>,
    /// Calls that get no reply within the response timeout before they ran (late
    /// requests: strays, see the header), in all. Only with one server.
    pub timeouts: u8,
}

/// The default configurations.
pub fn configs() -> Vec<Config> {
    vec![
        Config {
            name: "multi: two clients, opposite orders, expiry",
            locks: 2,
            named: vec![vec![0, 1], vec![1, 0]],
            acquires: 3,
            give_ups: 2,
            faults: 0,
            advances: 6,
            busy: 0,
            restarts: 0,
            force_unlocks: 0,
            placed: Vec::new(),
            timeouts: 0,
        },
        Config {
            name: "multi: two clients, opposite orders, lost replies",
            locks: 2,
            named: vec![vec![0, 1], vec![1, 0]],
            acquires: 2,
            give_ups: 1,
            faults: 3,
            advances: 2,
            busy: 0,
            restarts: 0,
            force_unlocks: 0,
            placed: Vec::new(),
            timeouts: 0,
        },
        Config {
            name: "multi: three clients in a named cycle",
            locks: 3,
            named: vec![vec![0, 1], vec![1, 2], vec![2, 0]],
            acquires: 1,
            give_ups: 2,
            faults: 1,
            advances: 2,
            busy: 0,
            restarts: 0,
            force_unlocks: 0,
            placed: Vec::new(),
            timeouts: 0,
        },
        Config {
            name: "multi: two clients, three locks, overlapping sets",
            locks: 3,
            named: vec![vec![2, 0, 1], vec![1, 2]],
            acquires: 2,
            give_ups: 1,
            faults: 1,
            advances: 2,
            busy: 0,
            restarts: 0,
            force_unlocks: 0,
            placed: Vec::new(),
            timeouts: 0,
        },
        Config {
            // Both locks are `L:{a}`, one on each server (the model keeps the second as
            // `L:{b}`): only the server part of the order tells them apart.
            name: "multi: one key on two servers, opposite orders",
            locks: 2,
            named: vec![vec![0, 1], vec![1, 0]],
            acquires: 2,
            give_ups: 1,
            faults: 0,
            advances: 2,
            busy: 0,
            restarts: 0,
            force_unlocks: 0,
            placed: vec![(0, 0), (0, 1)],
            timeouts: 0,
        },
        Config {
            // One key on two servers (as above), and one of the servers restarts empty:
            // one member of a held multi-lock wiped, the other kept.
            name: "multi: one key on two servers, opposite orders, one restarts",
            locks: 2,
            named: vec![vec![0, 1], vec![1, 0]],
            acquires: 2,
            give_ups: 1,
            faults: 0,
            advances: 2,
            busy: 0,
            restarts: 1,
            force_unlocks: 0,
            placed: vec![(0, 0), (0, 1)],
            timeouts: 0,
        },
        Config {
            // A member attempt, probe, give-back or release answered BUSY/LOADING: the
            // core re-sends (a member attempt from the first one on), and nothing runs twice.
            name: "multi: two clients, opposite orders, BUSY",
            locks: 2,
            named: vec![vec![0, 1], vec![1, 0]],
            acquires: 2,
            give_ups: 1,
            faults: 0,
            advances: 1,
            busy: 2,
            restarts: 0,
            force_unlocks: 0,
            placed: Vec::new(),
            timeouts: 0,
        },
        Config {
            // Redis restarts empty while members are held or being taken.
            name: "multi: two clients, opposite orders, restart",
            locks: 2,
            named: vec![vec![0, 1], vec![1, 0]],
            acquires: 2,
            give_ups: 1,
            faults: 0,
            advances: 2,
            busy: 0,
            restarts: 1,
            force_unlocks: 0,
            placed: Vec::new(),
            timeouts: 0,
        },
        Config {
            // All three together: a lost reply's reconciliation across a restart, a probe
            // answered BUSY.
            name: "multi: two clients, opposite orders, restart, BUSY, a lost reply",
            locks: 2,
            named: vec![vec![0, 1], vec![1, 0]],
            acquires: 1,
            give_ups: 1,
            faults: 1,
            advances: 2,
            busy: 1,
            restarts: 1,
            force_unlocks: 0,
            placed: Vec::new(),
            timeouts: 0,
        },
        Config {
            // A lost member reply whose probes are answered BUSY: the attempt's own probe,
            // then the background round's probe or its give-back of the hold the lost
            // acquire took. Each is asked again, not given up.
            name: "multi: two clients, opposite orders, a lost reply, probes answered BUSY",
            locks: 2,
            named: vec![vec![0, 1], vec![1, 0]],
            acquires: 1,
            give_ups: 0,
            faults: 1,
            advances: 1,
            busy: 2,
            restarts: 0,
            force_unlocks: 0,
            placed: Vec::new(),
            timeouts: 0,
        },
        Config {
            // An operator force-unlocks one member (`lua/force_unlock.lua`) while
            // multi-locks hold it, wait for it or have a call on it in flight (a lost
            // member reply's probe among them): the other member stays.
            name: "multi: two clients, opposite orders, a force-unlock, a lost reply",
            locks: 2,
            named: vec![vec![0, 1], vec![1, 0]],
            acquires: 2,
            give_ups: 1,
            faults: 1,
            advances: 1,
            busy: 0,
            restarts: 0,
            force_unlocks: 1,
            placed: Vec::new(),
            timeouts: 0,
        },
        Config {
            // Member calls that time out before they ran: a timed-out attempt ends the
            // walk (or is ridden out by a waiter), and its stray may take the member
            // later, to be adopted or given back by the lane; a give-back's or release's
            // stray runs before its re-sent copy; a probe that times out too.
            name: LATE,
            locks: 2,
            named: vec![vec![0, 1], vec![1, 0]],
            acquires: 2,
            give_ups: 0,
            faults: 0,
            advances: 2,
            busy: 0,
            restarts: 0,
            force_unlocks: 0,
            placed: Vec::new(),
            timeouts: 2,
        },
        Config {
            // A late member call and a restart, which drops the strays with the
            // connection.
            name: LATE_RESTART,
            locks: 2,
            named: vec![vec![0, 1], vec![1, 0]],
            acquires: 2,
            give_ups: 0,
            faults: 0,
            advances: 1,
            busy: 0,
            restarts: 1,
            force_unlocks: 0,
            placed: Vec::new(),
            timeouts: 1,
        },
    ]
}

/// The late-request configurations' names.
pub const LATE: &str = "multi: two clients, opposite orders, late requests";
pub const LATE_RESTART: &str = "multi: two clients, opposite orders, late requests, a restart";

/// The milestones each default configuration must reach at the default bound: what its
/// parties, faults and clock steps are there for.
pub fn must_reach(name: &str) -> Vec<&'static str> {
    match name {
        "multi: two clients, opposite orders, expiry" => vec![
            "a multi-lock held",
            "a waiter took every member after the holder released",
            "clients named the locks in opposite orders and both completed",
            "took a member whose holder's lease ran out",
        ],
        "multi: two clients, opposite orders, lost replies" => vec![
            "a multi-lock held",
            "gave back a partial acquisition",
            "clients named the locks in opposite orders and both completed",
            "a lost member reply resolved by a probe",
            "a waiter waited for a holder that itself waits",
        ],
        "multi: three clients in a named cycle" => vec![
            "a multi-lock held",
            "a waiter took every member after the holder released",
            "gave back a partial acquisition",
            "took a member whose holder's lease ran out",
            "a waiter waited for a holder that itself waits",
        ],
        "multi: two clients, three locks, overlapping sets" => vec![
            "a multi-lock held",
            "a waiter took every member after the holder released",
            "gave back a partial acquisition",
            "clients named the locks in opposite orders and both completed",
            "took a member whose holder's lease ran out",
            "a lost member reply resolved by a probe",
        ],
        "multi: one key on two servers, opposite orders" => vec![
            "a multi-lock held",
            "a waiter took every member after the holder released",
            "clients named the locks in opposite orders and both completed",
        ],
        "multi: one key on two servers, opposite orders, one restarts" => vec![
            "a multi-lock held",
            "clients named the locks in opposite orders and both completed",
            "a restart wiped a held multi-lock",
            "a release told the user of a member a restart wiped",
            "a multi-lock taken again after a restart wiped it",
            "a wiped member's holder and a new holder both believed (the documented exception)",
        ],
        "multi: two clients, opposite orders, BUSY" => vec![
            "a multi-lock held",
            "a waiter took every member after the holder released",
            "clients named the locks in opposite orders and both completed",
            "a member answered BUSY was attempted again and granted once",
            "a member's release answered BUSY gave it back when re-sent",
        ],
        "multi: two clients, opposite orders, restart, BUSY, a lost reply" => vec![
            "a multi-lock held",
            "a lost member reply resolved by a probe",
            "a member answered BUSY was attempted again and granted once",
            "a probe answered BUSY kept the lost acquire pending",
            "a restart wiped a held multi-lock",
            "a release told the user of a member a restart wiped",
            "a wiped member's holder and a new holder both believed (the documented exception)",
            "a lost member acquire whose hold a restart wiped was probed and found nothing",
        ],
        "multi: two clients, opposite orders, a lost reply, probes answered BUSY" => vec![
            "a multi-lock held",
            "a lost member reply resolved by a probe",
            "a probe answered BUSY kept the lost acquire pending",
            "a background give-back answered BUSY gave the hold back when re-sent",
        ],
        "multi: two clients, opposite orders, a force-unlock, a lost reply" => vec![
            "a multi-lock held",
            "a lost member reply resolved by a probe",
            "a force-unlock removed a member a multi-lock held",
            "a multi-lock's release reported a force-unlocked member lost",
            "a multi-lock's release told a member's failure",
            "a wiped member's holder and a new holder both believed (the documented exception)",
            "a waiter took a member a force-unlock freed",
            "a lost member acquire whose hold a force-unlock removed was probed and found nothing",
        ],
        "multi: two clients, opposite orders, restart" => vec![
            "a multi-lock held",
            "clients named the locks in opposite orders and both completed",
            "a restart wiped a held multi-lock",
            "a release told the user of a member a restart wiped",
            "a multi-lock taken again after a restart wiped it",
            "a wiped member's holder and a new holder both believed (the documented exception)",
        ],
        LATE => vec![
            "a multi-lock held",
            "gave back a partial acquisition",
            "clients named the locks in opposite orders and both completed",
            "a stray member acquire ran after its multi-lock gave up",
            "a stray member acquire took a member after its multi-lock gave up",
            "a stray member acquire's hold was given back by reconciliation",
            "a stray member acquire's hold was adopted by a later attempt",
            "a stray copy of a give-back or release ran",
            "a waiting member rode out a timed-out attempt",
            "a reconciliation kept asking past its bound while its probes timed out",
        ],
        LATE_RESTART => vec![
            "a multi-lock held",
            "a stray member acquire ran after its multi-lock gave up",
            "a stray member acquire's hold was given back by reconciliation",
            "a stray copy of a give-back or release ran",
            "a restart wiped a held multi-lock",
            "a restart dropped a stray",
        ],
        _ => Vec::new(),
    }
}

pub fn by_name(name: &str) -> Option<Config> {
    configs().into_iter().find(|c| c.name == name)
}

/// The hash keys of the locks (`lock_keys(lock).hash`), for the checks that only read.
const HASH_KEYS: [&str; 3] = ["L:{a}", "L:{b}", "L:{c}"];

/// The keys of lock `lock`.
pub fn lock_keys(lock: usize) -> LockKeys {
    let name = NAMES[lock];
    LockKeys {
        hash: format!("L:{{{name}}}").into(),
        fence: format!("L:{{{name}}}:fence").into(),
        channel: format!("L:{{{name}}}:db0:released").into(),
        sharded: false,
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

/// What an operation is fed.
enum Event<'a> {
    Start,
    Reply(&'a Reply),
    Failure(Failure),
    /// The model answered the call `BUSY` (it did not run): what the driver made of the
    /// error reply, fed as a failure. The model judges what follows by the `BUSY`, not by
    /// this classification.
    Busy(Failure),
}

/// Feeds `event` to `machine` until it asks for a call (`Ok`) or is done (`Err`). A sleep
/// it asks for is taken as over at once: time moves only by the model's own steps.
fn feed<M: Machine<Ctx = Lane>>(
    machine: &mut M,
    env: &mut ModelEnv,
    lane: &mut Lane,
    event: Event,
) -> Result<Call, M::Outcome> {
    let mut next = match event {
        Event::Start => machine.start(env, lane),
        Event::Reply(reply) => machine.on_reply(env, lane, reply),
        Event::Failure(failure) | Event::Busy(failure) => machine.on_failure(env, lane, failure),
    };
    loop {
        match next {
            Next::Send(call) => return Ok(call),
            Next::SleepUntil(_) => next = machine.resume(env, lane),
            Next::Done(outcome) => return Err(outcome),
        }
    }
}

/// A member a client took: its guard (one per lock and client in this model).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Member {
    state: HoldState,
    fixed_end: Millis,
}

impl Member {
    /// Not told lost and its lease left by the client's own clock.
    fn believed(&self, now: Millis) -> bool {
        self.state.lost().is_none() && now < self.state.deadline()
    }
}

/// One multi-lock acquisition in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Acquisition {
    /// The locks in the order they are taken (from `global_order`).
    order: Vec<usize>,
    walk: MultiAcquire,
    /// The members taken, in order (the library's `guards`).
    taken: Vec<usize>,
    /// It waited for a member at least once.
    waited: bool,
    /// The clock moved (or Redis restarted) while it was in progress.
    advanced: bool,
    /// The member being taken was refused (held by another owner) at least once: its
    /// waiting loop rides out errors now.
    refused: bool,
    /// The member being taken had an attempt answered `BUSY`/`LOADING`.
    busied: bool,
    /// A restart wiped a member it had taken.
    wiped: bool,
}

/// Where a client's user is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    /// A member's acquire attempt is in flight.
    Taking(Acquisition),
    /// The member `lock` is held by another owner: the client waits.
    Waiting(Acquisition, usize),
    /// An acquisition failed: giving back members of its order `order`.
    GivingBack {
        order: Vec<usize>,
        back: GiveBack,
        /// Some give-back released a member.
        gave: bool,
    },
    /// Every member is held (in `taken` order).
    Held(Vec<usize>),
    /// The user releases the multi-lock.
    Releasing(GiveBack),
}

/// A give-back or release of the members `taken`, walked by the core's `MultiRelease`
/// (which member next, what the user is told), as `MultiGuard::release` does.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct GiveBack {
    taken: Vec<usize>,
    walk: MultiRelease<()>,
    /// Every member released so far was given back by a run of its release.
    all_given_back: bool,
}

impl GiveBack {
    fn new(taken: Vec<usize>) -> Self {
        GiveBack {
            walk: MultiRelease::new(taken.len()),
            taken,
            all_given_back: true,
        }
    }

    /// The members still to be given back (not the one in flight).
    fn left(&self) -> Vec<usize> {
        self.taken[..self.walk.left()].to_vec()
    }
}

/// A client's operation: one of the library's own machines, in the lane of `lock`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum OpKind {
    Acquire(AttemptOp),
    Release {
        flow: ReleaseFlow,
        hold: Arc<str>,
        /// The flow's retry bound (`HoldState::release_until`): until then a `BUSY` must
        /// not end it.
        give_up_at: Millis,
        /// Why the client had noticed the member lost when the release began (what
        /// `release::told` is given).
        noticed: Option<LostReason>,
        /// Some copy of the release itself was answered `BUSY`/`LOADING`.
        busied: bool,
        /// Some run of this release's own request gave the hold back in Redis.
        removed: bool,
    },
    Reconcile {
        round: ReconcileRound,
        /// Its give-back of the hold the lost acquire took was answered `BUSY`/`LOADING`.
        busied: bool,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Op {
    lock: usize,
    kind: OpKind,
    /// The call in flight.
    call: Call,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Client {
    owner: Arc<str>,
    ids: RequestIds,
    named: Vec<usize>,
    /// Per lock.
    lanes: Vec<Lane>,
    /// Per lock.
    guards: Vec<Option<Member>>,
    phase: Phase,
    op: Option<Op>,
    acquires_left: u8,
    /// It held a multi-lock at least once.
    completed: bool,
    /// A restart wiped a multi-lock it held.
    wiped: bool,
    /// Per lock, while its lane has a lost acquire to resolve: until when a hold that
    /// acquire took could be in Redis (its send time, when the model lost it, plus its
    /// lease). A probe answered `BUSY` may stop asking only after it.
    lost_until: Vec<Option<Millis>>,
    /// Late requests on the client's connection, oldest first: each runs, if at all,
    /// before anything the client sends after it (a call sent behind them waits).
    strays: Vec<Stray>,
}

/// A call its client gave up waiting for (it timed out before it ran): it may still run.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Stray {
    lock: usize,
    call: Call,
    /// When it timed out (the loss its lane noticed, for an acquire).
    noticed: Millis,
    /// The client's `acquires_left` when it timed out: which acquisition sent it.
    acquisition: u8,
}

impl Stray {
    /// A member acquire's request id (`None`: another call).
    fn acquire_id(&self) -> Option<Arc<str>> {
        crate::lua::acquire_request(&self.call)
    }
}

/// The whole world.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    now: Millis,
    ks: Keyspace,
    locks: usize,
    clients: Vec<Client>,
    give_ups_left: u8,
    faults_left: u8,
    advances_left: u8,
    busy_left: u8,
    restarts_left: u8,
    force_left: u8,
    /// Hold ids whose give-back or reconciliation gave up (they expire with their lease).
    abandoned: BTreeSet<Arc<str>>,
    /// Hold ids a restart or a force-unlock took out of Redis behind their holders' backs
    /// (see the header).
    doomed: BTreeSet<Arc<str>>,
    /// Those of them a force-unlock took (for its milestones).
    forced: BTreeSet<Arc<str>>,
    /// Per lock, its place in the global order: (key, server).
    order_keys: Arc<[OrderKey]>,
    timeouts_left: u8,
    /// Holds that stray member acquires took (their request ids), and whether the stray
    /// ran after its timeout was noticed (late: the clock had moved).
    stray_holds: BTreeMap<Arc<str>, bool>,
    /// Timed-out member acquires (request ids) whose lane's reconciliation gave up past
    /// its bound (on a dropped connection only; for the trace).
    given_up: BTreeSet<Arc<str>>,
}

/// One step of the world.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// A client's user starts a multi-lock acquisition over the locks it names.
    Acquire(usize),
    /// A waiting client attempts its member again (woken, or its sleep ended).
    Retry(usize),
    /// A waiting client's wait runs out.
    GiveUp(usize),
    /// A client's user releases its multi-lock.
    Release(usize),
    /// A client's background task resolves a lost acquire of `lock`.
    Reconcile { client: usize, lock: usize },
    /// A client's call runs in Redis and its reply arrives.
    Run(usize),
    /// A client's call never reaches Redis (the connection dropped).
    LoseRequest(usize),
    /// A client's call runs, and its reply is lost.
    LoseReply(usize),
    /// Redis answers a client's call with `BUSY`/`LOADING`: it does not run.
    Busy(usize),
    /// The Redis server `SERVERS[_]` restarts and loses all its data (no call is in
    /// flight).
    Restart(usize),
    /// An operator force-unlocks lock `_` (`lua/force_unlock.lua` runs on its server),
    /// whoever holds it and whatever is in flight.
    ForceUnlock(usize),
    /// A client's call (not run yet) gets no reply within the response timeout: it
    /// stays on the connection as a stray.
    TimeOut(usize),
    /// A client's oldest stray runs (late, but before anything the client sent after it).
    ExecuteStray(usize),
    /// A client's oldest stray never runs (its connection went away before Redis read it).
    DropStray(usize),
    /// The clock moves to the next instant at which anything changes.
    Advance,
}

/// What a step did that the checker reports on.
#[derive(Debug, Default)]
pub struct Effects {
    /// Milestones reached (indices into [`MILESTONES`]).
    pub milestones: Vec<usize>,
    /// A property violated: its name and why.
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
        let index = MILESTONES
            .iter()
            .position(|m| *m == milestone)
            .expect("a known milestone");
        self.milestones.push(index);
    }
}

/// Runs calls against the keyspace with the model's scripts.
pub struct World {
    runner: ScriptRunner,
    scripts: Scripts,
}

impl World {
    pub fn new(scripts: Scripts) -> Self {
        World {
            runner: ScriptRunner::new(),
            scripts,
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

/// Whether two users named two common locks in opposite orders.
fn opposite(one: &[usize], other: &[usize]) -> bool {
    let position = |list: &[usize], lock: usize| list.iter().position(|l| *l == lock);
    one.iter().any(|&x| {
        one.iter().any(|&y| {
            match (
                position(one, x),
                position(one, y),
                position(other, x),
                position(other, y),
            ) {
                (Some(a), Some(b), Some(c), Some(d)) => a < b && c > d,
                _ => false,
            }
        })
    })
}

/// A member's release that ended, and what the model knows of it.
struct Released {
    lock: usize,
    hold: Arc<str>,
    noticed: Option<LostReason>,
    busied: bool,
    removed: bool,
}

/// The library's waiting loop (`protocol::wait::Wait`, the plain lock's policy, a wait
/// without limit: the model's `GiveUp` is a wait that runs out) as it stands before a
/// member attempt's outcome: started, and for a member that was refused, through that
/// refusal (subscribed, slept, woken, attempting again). Asked only what an attempt that
/// failed with `failure` at `now` leads to: `Ok(true)` to attempt again after a pause,
/// `Ok(false)` to end the member's wait with the error; `Err` with anything else.
fn waiting_loop(refused: bool, now: Millis, failure: Failure) -> Result<bool, WaitStep> {
    let policy = WaitPolicy::reentrant(TIMING);
    let mut wait = wait_at_attempt(policy, now, None, refused.then_some(LEASE))?;
    match wait.attempted(now, Tried::Failed(failure), false, 0) {
        WaitStep::Sleep { .. } => Ok(true),
        WaitStep::Done(
            redis_locks_protocol::wait::WaitEnd::Failed { .. }
            | redis_locks_protocol::wait::WaitEnd::TimedOut { .. },
        ) => Ok(false),
        other => Err(other),
    }
}

/// A lock in Redis: its hold id and each owner's count.
#[derive(Debug, Clone, PartialEq, Eq)]
struct InRedis {
    hold: Arc<str>,
    counts: BTreeMap<String, u64>,
    expires_at: Option<Millis>,
}

impl State {
    pub fn initial(config: &Config) -> Self {
        let clients = config
            .named
            .iter()
            .enumerate()
            .map(|(i, named)| Client {
                owner: format!("o{i}").into(),
                ids: RequestIds::new(format!("c{i}")),
                named: named.clone(),
                lanes: vec![Lane::default(); config.locks],
                guards: vec![None; config.locks],
                phase: Phase::Idle,
                op: None,
                acquires_left: config.acquires,
                completed: false,
                wiped: false,
                lost_until: vec![None; config.locks],
                strays: Vec::new(),
            })
            .collect();
        State {
            now: 0,
            ks: Keyspace::default(),
            locks: config.locks,
            clients,
            give_ups_left: config.give_ups,
            faults_left: config.faults,
            advances_left: config.advances,
            busy_left: config.busy,
            restarts_left: config.restarts,
            force_left: config.force_unlocks,
            abandoned: BTreeSet::new(),
            doomed: BTreeSet::new(),
            forced: BTreeSet::new(),
            order_keys: (0..config.locks)
                .map(|lock| {
                    let (name, server) = config.placed.get(lock).copied().unwrap_or((lock, 0));
                    (lock_keys(name).hash.to_string(), SERVERS[server].to_owned())
                })
                .collect(),
            timeouts_left: {
                assert!(
                    config.timeouts == 0 || config.placed.is_empty(),
                    "{}: late requests with one server only",
                    config.name
                );
                config.timeouts
            },
            stray_holds: BTreeMap::new(),
            given_up: BTreeSet::new(),
        }
    }

    /// The server lock `lock` is on (an index into [`SERVERS`]).
    fn on(&self, lock: usize) -> usize {
        let server = &self.order_keys[lock].1;
        SERVERS
            .iter()
            .position(|s| s == server)
            .expect("a known server")
    }

    /// Lock `lock` as Redis has it now (`None`: free).
    fn in_redis(&self, lock: usize) -> Option<InRedis> {
        let key = HASH_KEYS[lock];
        let hash = self.ks.lock_hash(key.as_bytes(), self.now)?;
        let hold = hash.get(b"\x01h".as_slice())?;
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
        Some(InRedis {
            hold: String::from_utf8_lossy(hold).into_owned().into(),
            counts,
            expires_at: self.ks.pexpire_at(key.as_bytes(), self.now).flatten(),
        })
    }

    /// Whether another owner than `owner` holds `lock` in Redis now.
    fn held_by_other(&self, lock: usize, owner: &str) -> bool {
        self.in_redis(lock)
            .is_some_and(|r| r.counts.keys().any(|o| o != owner))
    }

    /// Every step enabled in this state, in a fixed order (replays name steps by index).
    pub fn steps(&self) -> Vec<Step> {
        let mut steps = Vec::new();
        for (i, c) in self.clients.iter().enumerate() {
            if !c.strays.is_empty() {
                steps.push(Step::ExecuteStray(i));
                steps.push(Step::DropStray(i));
            }
            if c.op.is_some() {
                // It reaches Redis (or its connection drops) behind its strays.
                if c.strays.is_empty() {
                    steps.push(Step::Run(i));
                    if self.faults_left > 0 {
                        steps.push(Step::LoseRequest(i));
                        steps.push(Step::LoseReply(i));
                    }
                    if self.busy_left > 0 {
                        steps.push(Step::Busy(i));
                    }
                }
                if self.timeouts_left > 0 {
                    steps.push(Step::TimeOut(i));
                }
                continue;
            }
            match &c.phase {
                Phase::Idle if c.acquires_left > 0 => steps.push(Step::Acquire(i)),
                Phase::Waiting(acq, lock) => {
                    if !acq.refused || !self.held_by_other(*lock, &c.owner) {
                        steps.push(Step::Retry(i));
                    }
                    if self.give_ups_left > 0 {
                        steps.push(Step::GiveUp(i));
                    }
                }
                Phase::Held(_) => steps.push(Step::Release(i)),
                _ => {}
            }
            for (lock, lane) in c.lanes.iter().enumerate() {
                if lane.is_pending() {
                    steps.push(Step::Reconcile { client: i, lock });
                }
            }
        }
        let quiet = self.clients.iter().all(|c| c.op.is_none());
        if self.restarts_left > 0 && quiet {
            for server in 0..SERVERS.len() {
                // A restart of an empty server changes nothing but the clock.
                if (0..self.locks)
                    .any(|lock| self.on(lock) == server && self.in_redis(lock).is_some())
                {
                    steps.push(Step::Restart(server));
                }
            }
        }
        if self.force_left > 0 {
            // Of a free lock it changes nothing.
            for lock in 0..self.locks {
                if self.in_redis(lock).is_some() {
                    steps.push(Step::ForceUnlock(lock));
                }
            }
        }
        if self.advances_left > 0 && quiet && self.next_event().is_some() {
            steps.push(Step::Advance);
        }
        steps
    }

    /// The next instant at which the passing of time changes anything: a believed
    /// member's deadline, a lock key's expiry (gone a millisecond after its expire time).
    fn next_event(&self) -> Option<Millis> {
        let deadlines = self.clients.iter().flat_map(|c| {
            c.guards
                .iter()
                .flatten()
                .filter(|m| m.state.is_active())
                .map(|m| m.state.deadline())
        });
        let expiries = (0..self.locks).filter_map(|lock| {
            self.ks
                .pexpire_at(HASH_KEYS[lock].as_bytes(), self.now)
                .flatten()
                .map(|at| at + 1)
        });
        deadlines.chain(expiries).filter(|t| *t > self.now).min()
    }

    /// Applies one step and checks every property afterwards.
    pub fn apply(&mut self, step: &Step, world: &World) -> Effects {
        let mut fx = self.take(step, world);
        if fx.violation.is_none() {
            self.check(&mut fx);
        }
        fx
    }

    /// Applies one step, with the checks of the step itself but not those of the state it
    /// leads to ([`State::check`], a function of the state alone: the checker runs it on
    /// every way in, so a state reached again is checked again, finding nothing new).
    fn take(&mut self, step: &Step, world: &World) -> Effects {
        let mut fx = Effects::default();
        match *step {
            Step::Acquire(c) => self.start_acquisition(c, &mut fx),
            Step::Retry(c) => {
                if let Phase::Waiting(acq, lock) =
                    std::mem::replace(&mut self.clients[c].phase, Phase::Idle)
                {
                    self.clients[c].phase = Phase::Taking(acq);
                    self.start_member(c, lock, &mut fx);
                }
            }
            Step::GiveUp(c) => {
                self.give_ups_left -= 1;
                if let Phase::Waiting(mut acq, _) =
                    std::mem::replace(&mut self.clients[c].phase, Phase::Idle)
                {
                    let next = acq.walk.on_member(false);
                    self.next_member(c, acq, next, &mut fx);
                }
            }
            Step::Release(c) => {
                if let Phase::Held(taken) =
                    std::mem::replace(&mut self.clients[c].phase, Phase::Idle)
                {
                    // MultiGuard::release: every member, in the core's `MultiRelease` order.
                    self.clients[c].phase = Phase::Releasing(GiveBack::new(taken));
                    self.next_release(c, &mut fx);
                }
            }
            Step::Reconcile { client, lock } => {
                let round = ReconcileRound::new(lock_keys(lock));
                self.drive(
                    client,
                    lock,
                    OpKind::Reconcile {
                        round,
                        busied: false,
                    },
                    Event::Start,
                    &mut fx,
                );
            }
            Step::Run(c) => {
                if let Some(mut op) = self.clients[c].op.take() {
                    let reply = self.execute(c, &mut op, world, &mut fx);
                    // The probe names the lost request, whose id is the hold it took.
                    if op.call.script == ScriptId::Probe
                        && op
                            .call
                            .args
                            .get(1)
                            .is_some_and(|id| self.doomed.contains(id))
                    {
                        if self.forced.contains(&*op.call.args[1]) {
                            fx.reach(
                                "a lost member acquire whose hold a force-unlock removed was probed and found nothing",
                            );
                        } else {
                            fx.reach(
                                "a lost member acquire whose hold a restart wiped was probed and found nothing",
                            );
                        }
                    }
                    self.drive(c, op.lock, op.kind, Event::Reply(&reply), &mut fx);
                }
            }
            Step::LoseRequest(c) => {
                self.faults_left -= 1;
                if let Some(op) = self.clients[c].op.take() {
                    self.lost(c, &op);
                    self.drive(c, op.lock, op.kind, Event::Failure(Failure::Lost), &mut fx);
                }
            }
            Step::LoseReply(c) => {
                self.faults_left -= 1;
                if let Some(mut op) = self.clients[c].op.take() {
                    self.execute(c, &mut op, world, &mut fx);
                    self.lost(c, &op);
                    self.drive(c, op.lock, op.kind, Event::Failure(Failure::Lost), &mut fx);
                }
            }
            Step::Busy(c) => {
                self.busy_left -= 1;
                if let Some(mut op) = self.clients[c].op.take() {
                    match (&mut op.kind, &mut self.clients[c].phase) {
                        (OpKind::Acquire(_), Phase::Taking(acq)) => acq.busied = true,
                        (OpKind::Release { flow, busied, .. }, _) if flow.release().is_some() => {
                            *busied = true;
                        }
                        (OpKind::Reconcile { busied, .. }, _)
                            if op.call.script == ScriptId::Release =>
                        {
                            *busied = true;
                        }
                        _ => {}
                    }
                    // What the driver makes of a BUSY/LOADING error reply.
                    let busy = Failure::from_server_error("BUSY Redis is busy running a script");
                    let (lock, script) = (op.lock, op.call.script);
                    self.drive(c, lock, op.kind, Event::Busy(busy), &mut fx);
                    if script == ScriptId::Probe && self.clients[c].lanes[lock].is_pending() {
                        fx.reach("a probe answered BUSY kept the lost acquire pending");
                    }
                }
            }
            Step::Restart(server) => {
                self.restarts_left -= 1;
                let wiped: Vec<usize> = (0..self.locks).filter(|&l| self.on(l) == server).collect();
                for &lock in &wiped {
                    if let Some(r) = self.in_redis(lock) {
                        self.doomed.insert(r.hold);
                    }
                }
                let doomed = &self.doomed;
                for client in &mut self.clients {
                    let wiped = |lock: &usize| {
                        client.guards[*lock]
                            .as_ref()
                            .is_some_and(|m| doomed.contains(m.state.hold()))
                    };
                    match &mut client.phase {
                        Phase::Held(taken) if taken.iter().any(wiped) => {
                            client.wiped = true;
                            fx.reach("a restart wiped a held multi-lock");
                        }
                        Phase::Taking(acq) | Phase::Waiting(acq, _) => {
                            acq.advanced = true;
                            acq.wiped |= acq.taken.iter().any(wiped);
                        }
                        _ => {}
                    }
                }
                // Its connections drop: the strays on them never run.
                let servers: Vec<usize> = (0..self.locks).map(|lock| self.on(lock)).collect();
                let on = |lock: usize| servers[lock] == server;
                let mut dropped = false;
                for client in &mut self.clients {
                    let before = client.strays.len();
                    client.strays.retain(|stray| !on(stray.lock));
                    dropped |= client.strays.len() < before;
                }
                if dropped {
                    fx.reach("a restart dropped a stray");
                }
                if wiped.len() == self.locks {
                    self.ks.flush_all();
                } else {
                    for lock in wiped {
                        let keys = lock_keys(lock);
                        for key in [keys.hash, keys.fence] {
                            self.ks
                                .command(self.now, &[b"DEL".to_vec(), key.as_bytes().to_vec()]);
                        }
                    }
                }
                self.now += 1;
            }
            Step::ForceUnlock(lock) => {
                self.force_left -= 1;
                // The hold it takes out is doomed, as a restart's (see the header).
                if let Some(r) = self.in_redis(lock) {
                    let hit = self.clients.iter().any(|client| {
                        matches!(client.phase, Phase::Held(_))
                            && client.guards[lock]
                                .as_ref()
                                .is_some_and(|m| *m.state.hold() == r.hold)
                    });
                    if hit {
                        fx.reach("a force-unlock removed a member a multi-lock held");
                    }
                    self.forced.insert(r.hold.clone());
                    self.doomed.insert(r.hold);
                }
                // A waiter that then takes the member was not let in by a release.
                for client in &mut self.clients {
                    if let Phase::Taking(acq) | Phase::Waiting(acq, _) = &mut client.phase {
                        acq.advanced = true;
                    }
                }
                let call = force_unlock_call(&lock_keys(lock));
                world.run(&call, &mut self.ks, self.now);
                if self.in_redis(lock).is_some() {
                    fx.fail(
                        "every reply is understood",
                        format!("a force-unlock left {} in Redis", NAMES[lock]),
                    );
                }
            }
            Step::TimeOut(c) => {
                self.timeouts_left -= 1;
                if let Some(op) = self.clients[c].op.take() {
                    let client = &mut self.clients[c];
                    client.strays.push(Stray {
                        lock: op.lock,
                        call: op.call.clone(),
                        noticed: self.now,
                        acquisition: client.acquires_left,
                    });
                    self.lost(c, &op);
                    let acquire = matches!(op.kind, OpKind::Acquire(_));
                    let lock = op.lock;
                    self.drive(c, lock, op.kind, Event::Failure(Failure::TimedOut), &mut fx);
                    if acquire && matches!(self.clients[c].phase, Phase::Waiting(_, l) if l == lock)
                    {
                        fx.reach("a waiting member rode out a timed-out attempt");
                    }
                }
            }
            Step::ExecuteStray(c) => {
                let stray = self.clients[c].strays.remove(0);
                self.execute_stray(c, stray, world, &mut fx);
            }
            Step::DropStray(c) => {
                self.clients[c].strays.remove(0);
            }
            Step::Advance => {
                self.advances_left -= 1;
                if let Some(at) = self.next_event() {
                    self.now = at;
                }
                self.ks.expire(self.now);
                for c in &mut self.clients {
                    if let Phase::Taking(acq) | Phase::Waiting(acq, _) = &mut c.phase {
                        acq.advanced = true;
                    }
                }
            }
        }
        // Each client's clock declares members lost once their deadline passes.
        let now = self.now;
        for c in &mut self.clients {
            for member in c.guards.iter_mut().flatten() {
                member.state.on_clock(now);
            }
        }
        fx
    }

    fn start_acquisition(&mut self, c: usize, fx: &mut Effects) {
        let client = &mut self.clients[c];
        client.acquires_left -= 1;
        // The order comes from the library: `MultiLock::new` sorts by (key, server).
        let keys: Vec<OrderKey> = client
            .named
            .iter()
            .map(|&lock| self.order_keys[lock].clone())
            .collect();
        let order = match global_order(&keys) {
            Ok(order) => order.into_iter().map(|i| client.named[i]).collect(),
            Err(twice) => {
                fx.fail(
                    "every reply is understood",
                    format!("global_order refused the locks: {twice} named twice"),
                );
                return;
            }
        };
        let acq = Acquisition {
            walk: MultiAcquire::new(client.named.len()),
            order,
            taken: Vec::new(),
            waited: false,
            advanced: false,
            refused: false,
            busied: false,
            wiped: false,
        };
        let first = acq.walk.start();
        self.next_member(c, acq, first, fx);
    }

    /// Acts on the walk's next step, as `MultiLock::acquire_until` does.
    fn next_member(&mut self, c: usize, acq: Acquisition, step: MultiStep, fx: &mut Effects) {
        match step {
            MultiStep::Take(i) => {
                let lock = acq.order[i];
                self.clients[c].phase = Phase::Taking(acq);
                self.start_member(c, lock, fx);
            }
            MultiStep::Held => {
                fx.reach("a multi-lock held");
                if acq.waited && !acq.advanced {
                    // No clock step since it started: the member it waited for was freed
                    // by its holder's release (or give-back), not by expiry.
                    fx.reach("a waiter took every member after the holder released");
                }
                let client = &mut self.clients[c];
                if acq.taken.iter().any(|&lock| {
                    client.guards[lock]
                        .as_ref()
                        .is_some_and(|m| !m.believed(self.now))
                }) {
                    fx.reach("held a multi-lock with a member already lost");
                }
                if acq.wiped {
                    fx.reach(
                        "held a multi-lock with a member a restart wiped while it was being taken",
                    );
                }
                if client.wiped {
                    fx.reach("a multi-lock taken again after a restart wiped it");
                }
                client.completed = true;
                client.phase = Phase::Held(acq.taken);
                let named = &self.clients[c].named;
                if self
                    .clients
                    .iter()
                    .enumerate()
                    .any(|(j, other)| j != c && other.completed && opposite(named, &other.named))
                {
                    fx.reach("clients named the locks in opposite orders and both completed");
                }
            }
            MultiStep::GiveBack(keep) => {
                // All or none: give back the first `keep` members taken (`MultiRelease`); any
                // others (only with a planted defect) are detached and left to their lease.
                let mut give = acq.taken;
                let kept = give.split_off(keep.min(give.len()));
                let client = &mut self.clients[c];
                for lock in kept {
                    if let Some(mut member) = client.guards[lock].take() {
                        member.state.leave(false, Some(member.fixed_end));
                    }
                }
                client.phase = Phase::GivingBack {
                    order: acq.order,
                    back: GiveBack::new(give),
                    gave: false,
                };
                self.next_release(c, fx);
            }
        }
    }

    /// Starts an acquire attempt of member `lock` (a fixed lease, no watchdog).
    fn start_member(&mut self, c: usize, lock: usize, fx: &mut Effects) {
        let client = &mut self.clients[c];
        let request = AcquireRequest {
            owner: client.owner.clone(),
            lease_ms: LEASE,
            request: client.ids.next_id(),
            fenced: false,
            others_waiting: false,
            contended: false,
        };
        let holds = client.guards[lock]
            .as_ref()
            .is_some_and(|m| m.state.is_active());
        let op = AttemptOp::new(lock_keys(lock), request).may_reenter(holds);
        self.drive(c, lock, OpKind::Acquire(op), Event::Start, fx);
    }

    /// Releases the next member of a give-back or a release, or ends it.
    fn next_release(&mut self, c: usize, fx: &mut Effects) {
        let now = self.now;
        let client = &mut self.clients[c];
        let next = match &mut client.phase {
            Phase::GivingBack { back, .. } | Phase::Releasing(back) => {
                back.walk.next_member().map(|i| back.taken[i])
            }
            _ => return,
        };
        let Some(lock) = next else {
            let phase = std::mem::replace(&mut client.phase, Phase::Idle);
            match phase {
                Phase::GivingBack { order, gave, .. } => {
                    if gave {
                        fx.reach("gave back a partial acquisition");
                    }
                    self.check_given_back(c, &order, fx);
                }
                // What `MultiGuard::release` tells the user (the core's `MultiRelease`).
                Phase::Releasing(back) => {
                    let all_given_back = back.all_given_back;
                    match back.walk.told() {
                        Ok(()) if !all_given_back => fx.fail(
                            "release is true",
                            format!(
                                "client {c}'s multi-lock release tells Ok, but a member was not given back while held"
                            ),
                        ),
                        Err(()) => fx.reach("a multi-lock's release told a member's failure"),
                        Ok(()) => {}
                    }
                }
                _ => {}
            }
            return;
        };
        let Some(mut member) = client.guards[lock].take() else {
            fx.fail(
                "all or none",
                format!(
                    "client {c} gives back {} but has no guard of it",
                    NAMES[lock]
                ),
            );
            return;
        };
        // As the guard does (the core's `release::leave`: the retry bound first, then the
        // guard leaves), and what it tells the user is judged by the loss the client
        // noticed (`LockGuard::release`).
        let noticed = member.state.lost();
        let fixed_end = Some(member.fixed_end);
        let leaving = release::leave(&mut member.state, now, RESPONSE, false, fixed_end, LEASE);
        let give_up_at = leaving.give_up_at;
        let hold = member.state.hold().clone();
        let flow = ReleaseFlow::new(
            lock_keys(lock),
            client.owner.clone(),
            hold.clone(),
            give_up_at,
            leaving.rearm,
        )
        .first_hold(leaving.first_hold);
        let kind = OpKind::Release {
            flow,
            hold,
            give_up_at,
            noticed,
            busied: false,
            removed: false,
        };
        self.drive(c, lock, kind, Event::Start, fx);
    }

    /// The model lost a call of client `c` (its request or its reply): a lost acquire
    /// leaves a hold that could be in Redis until its send time (now: the clock does not
    /// move while a call is in flight) plus its lease.
    fn lost(&mut self, c: usize, op: &Op) {
        if matches!(op.call.script, ScriptId::Take | ScriptId::Acquire) {
            self.clients[c].lost_until[op.lock] = Some(self.now + LEASE);
        }
    }

    /// Feeds an event to a client's operation (the library's own machine) and acts on
    /// what it answers: a call to put in flight, or an outcome. After a `BUSY` the model
    /// chose, it checks "BUSY never fails an operation" on what the operation did.
    fn drive(&mut self, c: usize, lock: usize, kind: OpKind, event: Event, fx: &mut Effects) {
        const BUSY_RULE: &str = "BUSY never fails an operation";
        let busy = matches!(event, Event::Busy(_));
        let now = self.now;
        let client = &mut self.clients[c];
        let lost_until = client.lost_until[lock];
        let mut env = ModelEnv {
            now,
            ids: &mut client.ids,
        };
        let lane = &mut client.lanes[lock];
        // A hold left to its lease because of the BUSY: the call did not run, and the
        // bound of every give-back (the hold's lease, counted from now) is still ahead.
        let abandoned_on_busy = |before: Option<Arc<str>>,
                                 after: Option<&Arc<str>>,
                                 fx: &mut Effects| {
            if let Some(hold) = after
                && busy
                && before.as_ref() != Some(hold)
            {
                fx.fail(
                    BUSY_RULE,
                    format!(
                        "client {c} gave up giving back {} (hold {hold}) on a call Redis answered BUSY, at t={now}",
                        NAMES[lock]
                    ),
                );
            }
        };
        match kind {
            OpKind::Acquire(mut op) => {
                let before = op.abandoned().cloned();
                let fed = feed(&mut op, &mut env, lane, event);
                let pending = lane.is_pending();
                abandoned_on_busy(before, op.abandoned(), fx);
                if let Some(hold) = op.abandoned() {
                    self.abandoned.insert(hold.clone());
                }
                if !pending {
                    client.lost_until[lock] = None;
                }
                match fed {
                    Ok(call) => {
                        client.op = Some(Op {
                            lock,
                            kind: OpKind::Acquire(op),
                            call,
                        })
                    }
                    Err(outcome) => self.member_done(c, lock, outcome, busy, fx),
                }
            }
            OpKind::Release {
                mut flow,
                hold,
                give_up_at,
                noticed,
                busied,
                removed,
            } => {
                let before = flow.abandoned().cloned();
                let fed = feed(&mut flow, &mut env, lane, event);
                let pending = lane.is_pending();
                abandoned_on_busy(before, flow.abandoned(), fx);
                if let Some(abandoned) = flow.abandoned() {
                    self.abandoned.insert(abandoned.clone());
                }
                if !pending {
                    client.lost_until[lock] = None;
                }
                match fed {
                    Ok(call) => {
                        client.op = Some(Op {
                            lock,
                            kind: OpKind::Release {
                                flow,
                                hold,
                                give_up_at,
                                noticed,
                                busied,
                                removed,
                            },
                            call,
                        })
                    }
                    Err(outcome) => {
                        // Judged after `released`, whose older rule (only a permanent
                        // error may end a release unreleased) names a give-up on a BUSY
                        // read as transient.
                        let ended_on_busy = (busy && now < give_up_at).then(|| {
                            format!(
                                "client {c}'s release of {} (hold {hold}) ended with {outcome:?} on a call Redis answered BUSY, at t={now}, before its retry bound t={give_up_at}",
                                NAMES[lock]
                            )
                        });
                        let done = Released {
                            lock,
                            hold,
                            noticed,
                            busied,
                            removed,
                        };
                        self.released(c, done, outcome, fx);
                        if let Some(message) = ended_on_busy {
                            fx.fail(BUSY_RULE, message);
                        }
                        self.next_release(c, fx);
                    }
                }
            }
            OpKind::Reconcile { mut round, busied } => {
                let replied = matches!(event, Event::Reply(_));
                let before = round.abandoned().cloned();
                // The lost acquire the lane asks about (the probe names its request id).
                let asked = lane
                    .probe(&lock_keys(lock))
                    .map(|probe| probe.args[1].clone());
                let fed = feed(&mut round, &mut env, lane, event);
                let pending = lane.is_pending();
                // Past its bound (a lease after the loss was noticed) the lane goes on asking
                // while its probes time out: the lost request may not have run yet.
                if let (Err(RoundOutcome::RetryAt(_)), Some(until)) = (&fed, lost_until)
                    && now > until
                {
                    fx.reach(
                        "a reconciliation kept asking past its bound while its probes timed out",
                    );
                }
                // The lane stopped asking about a timed-out acquire past its bound (only on a
                // dropped connection now): noted for the trace.
                if let (Err(RoundOutcome::GaveUp), false, Some(id), Some(until)) =
                    (&fed, pending, &asked, lost_until)
                    && now > until
                    && (self.stray_holds.contains_key(id)
                        || client
                            .strays
                            .iter()
                            .any(|s| s.acquire_id().as_ref() == Some(id)))
                {
                    self.given_up.insert(id.clone());
                }
                abandoned_on_busy(before, round.abandoned(), fx);
                if let Some(hold) = round.abandoned() {
                    self.abandoned.insert(hold.clone());
                }
                if !pending {
                    client.lost_until[lock] = None;
                }
                match fed {
                    Ok(call) => {
                        if call.script == ScriptId::Release {
                            fx.reach("a lost member reply resolved by a probe");
                            if self.stray_holds.contains_key(&call.args[1]) {
                                fx.reach(
                                    "a stray member acquire's hold was given back by reconciliation",
                                );
                            }
                        }
                        client.op = Some(Op {
                            lock,
                            kind: OpKind::Reconcile { round, busied },
                            call,
                        });
                    }
                    Err(RoundOutcome::Resolved)
                        if busied
                            && replied
                            && self.in_redis(lock).is_none_or(|r| {
                                !r.counts.contains_key(&*self.clients[c].owner)
                            }) =>
                    {
                        fx.reach(
                            "a background give-back answered BUSY gave the hold back when re-sent",
                        );
                    }
                    // A background round answered BUSY ends; it may stop asking only once
                    // a hold the lost acquire took must have expired (inclusive: a key
                    // whose expiry is `t` still exists at `t`).
                    Err(RoundOutcome::GaveUp)
                        if busy && lost_until.is_none_or(|until| now <= until) =>
                    {
                        fx.fail(
                            BUSY_RULE,
                            format!(
                                "client {c}'s background probe of a lost acquire of {} was answered BUSY at t={now} and stopped asking, though a hold it took could be in Redis until t={}",
                                NAMES[lock],
                                lost_until.map_or("?".into(), |t| t.to_string())
                            ),
                        );
                    }
                    Err(_) => {}
                }
            }
        }
    }

    /// A member's attempt ended (`busy`: on a call the model answered `BUSY`).
    fn member_done(
        &mut self,
        c: usize,
        lock: usize,
        outcome: AttemptOutcome,
        busy: bool,
        fx: &mut Effects,
    ) {
        let Phase::Taking(mut acq) = std::mem::replace(&mut self.clients[c].phase, Phase::Idle)
        else {
            fx.fail(
                "every reply is understood",
                format!("client {c}: a member attempt ended outside an acquisition"),
            );
            return;
        };
        match outcome {
            AttemptOutcome::Granted {
                granted,
                sent_at,
                lease_ms,
                adopted,
            } => {
                if adopted {
                    fx.reach("a lost member reply resolved by a probe");
                    if self.stray_holds.contains_key(&granted.hold) {
                        fx.reach("a stray member acquire's hold was adopted by a later attempt");
                    }
                }
                if acq.busied {
                    fx.reach("a member answered BUSY was attempted again and granted once");
                }
                // It waited for the member, and the hold it waited for is one a
                // force-unlock took out (its holder's guard names it still).
                if acq.refused
                    && self.clients.iter().enumerate().any(|(j, other)| {
                        j != c
                            && other.guards[lock]
                                .as_ref()
                                .is_some_and(|m| self.forced.contains(m.state.hold()))
                    })
                {
                    fx.reach("a waiter took a member a force-unlock freed");
                }
                let client = &mut self.clients[c];
                if client.guards[lock].is_some() {
                    fx.fail(
                        "all or none",
                        format!(
                            "client {c} took {} while it already had a guard of it",
                            NAMES[lock]
                        ),
                    );
                }
                client.guards[lock] = Some(Member {
                    state: HoldState::new(granted.hold, sent_at, lease_ms, false),
                    fixed_end: acquire::fixed_end(false, sent_at, lease_ms)
                        .expect("a fixed lease ends"),
                });
                acq.taken.push(lock);
                acq.refused = false;
                acq.busied = false;
                let next = acq.walk.on_member(true);
                self.next_member(c, acq, next, fx);
            }
            AttemptOutcome::Held { .. } => {
                // Held by another owner: wait (Lock::acquire's loop), not on_member yet.
                acq.waited = true;
                acq.refused = true;
                self.clients[c].phase = Phase::Waiting(acq, lock);
            }
            // The waiting loop decides: it rides out the error (the member is attempted
            // again; a wait that runs out meanwhile is `GiveUp`), or reports it, and the
            // walk gives back.
            AttemptOutcome::Failed { failure, .. } => {
                // The model fails a call only with a lost request or reply (`Lost`) or a
                // `BUSY`: an attempt that ended on a `BUSY` and reports anything but a
                // loss reports the `BUSY`, however the library classified it. The call
                // did not run, and the wait has no bound left but `GiveUp`: it must be
                // ridden out.
                let on_busy = busy && failure != Failure::Lost;
                match waiting_loop(acq.refused, self.now, failure.clone()) {
                    Ok(true) => self.clients[c].phase = Phase::Waiting(acq, lock),
                    Ok(false) if on_busy => fx.fail(
                        "BUSY never fails an operation",
                        format!(
                            "client {c}'s attempt of {} was answered BUSY, and its wait ended with {failure:?}",
                            NAMES[lock]
                        ),
                    ),
                    Ok(false) => {
                        let next = acq.walk.on_member(false);
                        self.next_member(c, acq, next, fx);
                    }
                    Err(step) => fx.fail(
                        "every reply is understood",
                        format!("client {c}: the waiting loop after a failed attempt: {step:?}"),
                    ),
                }
            }
            AttemptOutcome::NotALock(found) => fx.fail(
                "every reply is understood",
                format!("client {c}: {} is not a lock: {found}", NAMES[lock]),
            ),
            AttemptOutcome::Unreadable(err) => fx.fail(
                "every reply is understood",
                format!("client {c}: unreadable reply: {err}"),
            ),
        }
    }

    /// A member's release (of a give-back or the user's release) ended.
    fn released(&mut self, c: usize, done: Released, outcome: ReleaseResult, fx: &mut Effects) {
        let Released {
            lock,
            hold,
            noticed,
            busied,
            removed,
        } = done;
        // What the guard's release tells the user of this member, for `MultiRelease`.
        let mut member_told_released = false;
        if let Ok(found) = &outcome
            && let Some(found) = Found::of_release(found)
        {
            member_told_released = told(found, noticed, true) == Told::Released;
            if busied && found == Found::Removed {
                fx.reach("a member's release answered BUSY gave it back when re-sent");
            }
            // What `MultiGuard::release` tells the user of this member (`LockGuard::release`).
            if matches!(self.clients[c].phase, Phase::Releasing(_)) {
                match told(found, noticed, true) {
                    Told::Released if !removed => fx.fail(
                        "release is true",
                        format!(
                            "client {c}'s release of {} (hold {hold}) tells Ok, but no run of it gave the hold back{}",
                            NAMES[lock],
                            if self.doomed.contains(&hold) {
                                ": a restart or a force-unlock had wiped it"
                            } else {
                                ""
                            }
                        ),
                    ),
                    Told::Lost { .. } if self.forced.contains(&hold) => {
                        fx.reach("a multi-lock's release reported a force-unlocked member lost");
                    }
                    Told::Lost { .. } if self.doomed.contains(&hold) => {
                        fx.reach("a release told the user of a member a restart wiped");
                    }
                    _ => {}
                }
            }
        }
        if let Phase::GivingBack { back, .. } | Phase::Releasing(back) = &mut self.clients[c].phase
        {
            back.walk.on_member(if member_told_released {
                Ok(())
            } else {
                Err(())
            });
            back.all_given_back &= removed;
        }
        match outcome {
            Ok(ReleaseOutcome::Released { .. }) => {
                if let Phase::GivingBack { gave, .. } = &mut self.clients[c].phase {
                    *gave = true;
                }
            }
            // The clock does not move while a release is in flight, so its lease is never
            // over: only a permanent error may end it unreleased. Giving up on a lost reply
            // or a BUSY now would leave the member held by nobody. (A BUSY read as
            // permanent is judged by the world in `drive`: "BUSY never fails an
            // operation".)
            Ok(ReleaseOutcome::Failed(failure)) if !matches!(failure, Failure::Permanent(_)) => {
                fx.fail(
                    "all or none",
                    format!(
                        "client {c} gave up releasing {} (hold {hold}) on {failure:?} before its lease ran out",
                        NAMES[lock]
                    ),
                );
            }
            Ok(ReleaseOutcome::NotHeld) => {}
            Ok(ReleaseOutcome::Failed(_) | ReleaseOutcome::Unconfirmed) => {
                self.abandoned.insert(hold);
            }
            Ok(ReleaseOutcome::NotALock) => fx.fail(
                "every reply is understood",
                format!("client {c}: release found no lock at {hold}"),
            ),
            Err(err) => fx.fail(
                "every reply is understood",
                format!("client {c}: unreadable release reply: {err}"),
            ),
        }
    }

    /// Runs a client's call in Redis now.
    fn execute(&mut self, c: usize, op: &mut Op, world: &World, fx: &mut Effects) -> Reply {
        let now = self.now;
        // The owner's count of the hold a release names, before the call runs (what it
        // did is judged by Redis, not by its reply).
        let count = |state: &State| -> u64 {
            match &op.kind {
                OpKind::Release { hold, .. } => state
                    .in_redis(op.lock)
                    .filter(|r| r.hold == *hold)
                    .and_then(|r| r.counts.get(&*state.clients[c].owner).copied())
                    .unwrap_or(0),
                _ => 0,
            }
        };
        let before = count(self);
        let reply = world.run(&op.call, &mut self.ks, now);
        let after = count(self);
        // A fresh hold taken while another client still has an unreleased guard of the
        // lock (not one a restart wiped): that holder stopped, and its lease ran out.
        if crate::lua::fresh_grant(&op.call, &reply) == Some(0)
            && self.clients.iter().enumerate().any(|(j, other)| {
                j != c
                    && other.guards[op.lock]
                        .as_ref()
                        .is_some_and(|m| !self.doomed.contains(m.state.hold()))
            })
        {
            fx.reach("took a member whose holder's lease ran out");
        }
        // The release's own request (not a give-back of a lost acquire's hold first) gave
        // one hold back in Redis.
        if let OpKind::Release { flow, removed, .. } = &mut op.kind
            && flow.release().is_some()
            && after < before
        {
            *removed = true;
        }
        reply
    }

    /// Runs a client's stray (its oldest) in Redis now: with the checks of a run on time;
    /// nobody reads its reply.
    fn execute_stray(&mut self, c: usize, stray: Stray, world: &World, fx: &mut Effects) {
        let now = self.now;
        let owner = self.clients[c].owner.clone();
        let lock = stray.lock;
        // The owner's count of `hold` in Redis.
        let count = |state: &State, hold: &str| -> u64 {
            state
                .in_redis(lock)
                .filter(|r| &*r.hold == hold)
                .and_then(|r| r.counts.get(&*owner).copied())
                .unwrap_or(0)
        };
        match stray.call.script {
            ScriptId::Take | ScriptId::Acquire => {
                let id = stray.acquire_id().expect("an acquire");
                world.run(&stray.call, &mut self.ks, now);
                let client = &self.clients[c];
                // Its acquisition is over: the walk that sent it gave up on the member.
                let same = client.acquires_left == stray.acquisition
                    && matches!(client.phase, Phase::Taking(_) | Phase::Waiting(..));
                if !same {
                    fx.reach("a stray member acquire ran after its multi-lock gave up");
                }
                // A fresh hold: the hold id is the request id.
                if count(self, &id) > 0 {
                    if !same {
                        fx.reach(
                            "a stray member acquire took a member after its multi-lock gave up",
                        );
                    }
                    self.stray_holds.insert(id, now > stray.noticed);
                }
            }
            ScriptId::Release | ScriptId::ReleaseFirst => {
                // release.lua names the hold in ARGV[2]; release_first.lua in its value,
                // "\1" <hold id> "\1" <owner>.
                let hold: Arc<str> = if stray.call.script == ScriptId::Release {
                    stray.call.args[1].clone()
                } else {
                    stray.call.args[0]
                        .trim_start_matches('\u{1}')
                        .split('\u{1}')
                        .next()
                        .unwrap_or_default()
                        .into()
                };
                let before = count(self, &hold);
                world.run(&stray.call, &mut self.ks, now);
                let after = count(self, &hold);
                fx.reach("a stray copy of a give-back or release ran");
                // What the release reports counts the copies that ran late: its re-sent
                // copy (the same request) is in flight behind it.
                if let Some(Op {
                    kind: OpKind::Release { flow, removed, .. },
                    call,
                    ..
                }) = &mut self.clients[c].op
                    && *call == stray.call
                    && flow.release().is_some()
                    && after < before
                {
                    *removed = true;
                }
            }
            _ => {
                world.run(&stray.call, &mut self.ks, now);
            }
        }
    }

    /// A give-back of the members `order` just ended: Redis holds none of them for the
    /// client's owner, except a hold whose give-back or reconciliation gave up (it
    /// expires with its lease) and one that a lost acquire may have taken and that the
    /// lane still has to resolve (the background task gives it back).
    fn check_given_back(&self, c: usize, order: &[usize], fx: &mut Effects) {
        let client = &self.clients[c];
        for &lock in order {
            if let Some(r) = self.in_redis(lock)
                && r.counts.contains_key(&*client.owner)
                && !self.abandoned.contains(&r.hold)
                && !client.lanes[lock].is_pending()
            {
                fx.fail(
                    "all or none",
                    format!(
                        "client {c} gave back a failed acquisition, but Redis still holds {} (hold {}) for {}",
                        NAMES[lock], r.hold, client.owner
                    ),
                );
            }
        }
    }

    /// Checks every property in this state.
    fn check(&self, fx: &mut Effects) {
        let now = self.now;
        // Never two holders of one lock: the clients that believe they hold a lock (a
        // guard not released, not told lost, lease left by their own clock) in a hold no
        // restart wiped have one owner, their hold is current in Redis for it, and Redis
        // keeps it at least as long as they believe. A belief in a hold a restart wiped
        // (doomed, see the header) ends no later than the lease its acquire asked for.
        for (lock, name) in NAMES.iter().enumerate().take(self.locks) {
            let mut believers: Vec<usize> = Vec::new();
            let mut wiped: Vec<usize> = Vec::new();
            for (c, client) in self.clients.iter().enumerate() {
                let Some(m) = client.guards[lock].as_ref().filter(|m| m.believed(now)) else {
                    continue;
                };
                if !self.doomed.contains(m.state.hold()) {
                    believers.push(c);
                    continue;
                }
                wiped.push(c);
                if m.state.deadline() > m.fixed_end {
                    fx.fail(
                        "never two holders of one lock",
                        format!(
                            "client {c} believes it holds {name} (hold {}, wiped by a restart or a force-unlock) until t={}, past its lease's end t={}",
                            m.state.hold(),
                            m.state.deadline(),
                            m.fixed_end
                        ),
                    );
                    return;
                }
            }
            if wiped.iter().any(|&w| {
                believers
                    .iter()
                    .any(|&b| self.clients[b].owner != self.clients[w].owner)
            }) {
                fx.reach(
                    "a wiped member's holder and a new holder both believed (the documented exception)",
                );
            }
            if let Some(&first) = believers.first()
                && let Some(&other) = believers
                    .iter()
                    .find(|&&c| self.clients[c].owner != self.clients[first].owner)
            {
                fx.fail(
                    "never two holders of one lock",
                    format!(
                        "clients {first} ({}) and {other} ({}) both believe they hold {}",
                        self.clients[first].owner, self.clients[other].owner, name
                    ),
                );
                return;
            }
            let redis = self.in_redis(lock);
            for &c in &believers {
                let client = &self.clients[c];
                let state = &client.guards[lock].as_ref().expect("a believer").state;
                let current = redis.as_ref().is_some_and(|r| {
                    r.hold == *state.hold() && r.counts.contains_key(&*client.owner)
                });
                if !current {
                    fx.fail(
                        "never two holders of one lock",
                        format!(
                            "client {c} believes it holds {} (hold {}), but Redis has {:?}: anyone may take it",
                            name,
                            state.hold(),
                            redis.as_ref().map(|r| r.hold.clone())
                        ),
                    );
                    return;
                }
                if let Some(at) = redis.as_ref().and_then(|r| r.expires_at)
                    && state.deadline() > at
                {
                    fx.fail(
                        "never two holders of one lock",
                        format!(
                            "client {c} believes it holds {} until t={}, but Redis expires it at t={at}",
                            name,
                            state.deadline()
                        ),
                    );
                    return;
                }
            }
        }

        // All or none, as the client sees it: between acquisitions it has no member; a
        // held multi-lock has every member (each believed, or told lost, which fires the
        // multi-lock's lost signal); during a give-back only the members still to give
        // back remain.
        for (c, client) in self.clients.iter().enumerate() {
            let has: Vec<usize> = (0..self.locks)
                .filter(|&lock| client.guards[lock].is_some())
                .collect();
            // During a give-back or a release, the member being released has left its
            // guard already: what remains is what is still to be released.
            let mut expected: Vec<usize> = match &client.phase {
                Phase::Idle => Vec::new(),
                Phase::Held(taken) => {
                    let mut all = client.named.clone();
                    all.sort_unstable();
                    let mut taken = taken.clone();
                    taken.sort_unstable();
                    if taken != all {
                        fx.fail(
                            "all or none",
                            format!(
                                "client {c} holds a multi-lock of {:?}, not {:?}",
                                names(&taken),
                                names(&all)
                            ),
                        );
                        return;
                    }
                    all
                }
                Phase::GivingBack { back, .. } | Phase::Releasing(back) => back.left(),
                Phase::Taking(acq) | Phase::Waiting(acq, _) => acq.taken.clone(),
            };
            expected.sort_unstable();
            if has != expected {
                fx.fail(
                    "all or none",
                    format!(
                        "client {c} ({}) has guards of {:?}, expected {:?}",
                        phase_name(&client.phase),
                        names(&has),
                        names(&expected)
                    ),
                );
                return;
            }
        }

        // All or none, in Redis: when no call is in flight and no lost acquire is left to
        // resolve, every hold count in Redis belongs to a client that has a guard of that
        // hold, or to a hold whose give-back gave up (it expires with its lease).
        let quiet = self
            .clients
            .iter()
            .all(|c| c.op.is_none() && c.lanes.iter().all(|l| !l.is_pending()));
        if quiet {
            for (lock, name) in NAMES.iter().enumerate().take(self.locks) {
                let Some(r) = self.in_redis(lock) else {
                    continue;
                };
                if self.abandoned.contains(&r.hold) {
                    continue;
                }
                for owner in r.counts.keys() {
                    let guarded = self.clients.iter().any(|c| {
                        &*c.owner == owner
                            && c.guards[lock]
                                .as_ref()
                                .is_some_and(|m| *m.state.hold() == r.hold)
                    });
                    if !guarded {
                        fx.fail(
                            "all or none",
                            format!(
                                "Redis holds {} (hold {}) for {owner}, but no client of {owner} has a guard of it",
                                name, r.hold
                            ),
                        );
                        return;
                    }
                }
            }
        }

        // No deadlock: the wait-for graph over waiting clients. Client i waits for lock X
        // (its member); X is held by client j when Redis holds X live for j's owner and X
        // is a member j's acquisition took. A cycle is a deadlock.
        let waits: Vec<Option<usize>> = self
            .clients
            .iter()
            .enumerate()
            .map(|(i, client)| {
                let Phase::Waiting(_, lock) = &client.phase else {
                    return None;
                };
                let r = self.in_redis(*lock)?;
                self.clients.iter().enumerate().position(|(j, other)| {
                    j != i
                        && r.counts.contains_key(&*other.owner)
                        && matches!(&other.phase, Phase::Waiting(acq, _) if acq.taken.contains(lock))
                })
            })
            .collect();
        if waits.iter().any(Option::is_some) {
            fx.reach("a waiter waited for a holder that itself waits");
        }
        for start in 0..waits.len() {
            let mut at = start;
            let mut path = vec![start];
            while let Some(next) = waits[at] {
                if next == start {
                    let text: Vec<String> = path
                        .iter()
                        .map(|&i| match &self.clients[i].phase {
                            Phase::Waiting(acq, lock) => format!(
                                "client {i} holds {:?} and waits for {}",
                                names(&acq.taken),
                                NAMES[*lock]
                            ),
                            _ => String::new(),
                        })
                        .collect();
                    fx.fail(
                        "no deadlock",
                        format!("a wait-for cycle: {}", text.join("; ")),
                    );
                    return;
                }
                if path.contains(&next) {
                    break;
                }
                path.push(next);
                at = next;
            }
        }
    }

    /// A readable picture of the state, for traces.
    pub fn describe(&self) -> String {
        let mut out = format!("t={}", self.now);
        for (lock, name) in NAMES.iter().enumerate().take(self.locks) {
            match self.in_redis(lock) {
                Some(r) => {
                    let _ = write!(
                        out,
                        " | {}: hold {} {:?} expires t={}",
                        name,
                        r.hold,
                        r.counts,
                        r.expires_at.map_or("never".into(), |t| t.to_string())
                    );
                }
                None => {
                    let _ = write!(out, " | {}: free", name);
                }
            }
        }
        for (i, c) in self.clients.iter().enumerate() {
            let _ = write!(
                out,
                "\n      client {i} ({}, names {:?}): {}",
                c.owner,
                names(&c.named),
                phase_name(&c.phase)
            );
            for (lock, member) in c.guards.iter().enumerate() {
                if let Some(m) = member {
                    let belief = match m.state.lost() {
                        Some(reason) => format!("told lost ({reason:?})"),
                        None => format!("believed until t={}", m.state.deadline()),
                    };
                    let _ = write!(out, " [{} hold {} {belief}]", NAMES[lock], m.state.hold());
                }
            }
            for (lock, lane) in c.lanes.iter().enumerate() {
                if lane.is_pending() {
                    let _ = write!(out, " [lost acquire of {} pending]", NAMES[lock]);
                }
            }
            if let Some(op) = &c.op {
                let _ = write!(
                    out,
                    " [in flight on {}: {:?} {}]",
                    NAMES[op.lock],
                    op.call.script,
                    op.call.args.join(" ")
                );
            }
            for stray in &c.strays {
                let _ = write!(
                    out,
                    " [stray on {}: {:?} {} (timed out at t={})]",
                    NAMES[stray.lock],
                    stray.call.script,
                    stray.call.args.join(" "),
                    stray.noticed
                );
            }
        }
        for (hold, late) in &self.stray_holds {
            let _ = write!(
                out,
                "\n      a stray took hold {hold}{}{}",
                if *late { " late" } else { "" },
                if self.given_up.contains(hold) {
                    ", its reconciliation gave up"
                } else {
                    ""
                }
            );
        }
        out
    }
}

fn names(locks: &[usize]) -> Vec<&'static str> {
    locks.iter().map(|&l| NAMES[l]).collect()
}

fn phase_name(phase: &Phase) -> String {
    match phase {
        Phase::Idle => "idle".into(),
        Phase::Taking(acq) => format!(
            "taking (order {:?}, took {:?})",
            names(&acq.order),
            names(&acq.taken)
        ),
        Phase::Waiting(acq, lock) => format!(
            "waiting for {} (order {:?}, took {:?})",
            NAMES[*lock],
            names(&acq.order),
            names(&acq.taken)
        ),
        Phase::GivingBack { back, .. } => format!("giving back, {:?} left", names(&back.left())),
        Phase::Held(taken) => format!("holds {:?}", names(taken)),
        Phase::Releasing(back) => format!("releasing, {:?} left", names(&back.left())),
    }
}

/// The multi-lock's model, for the one checker (`tests/protocol/checker.rs`). A step is
/// [`State::apply`]: the step's own checks, then those of the state it leads to.
pub struct Multi;

impl Model for Multi {
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
}
