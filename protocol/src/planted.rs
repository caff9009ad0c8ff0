//! Known defects that the protocol checker's teeth plant in this core (feature
//! `planted-defects`, for the checker's own tests only; without the feature every check
//! below is a constant `false` and compiles away).
//!
//! A checker counts only if it finds a defect in the code that ships. The Lua scripts'
//! defects are planted by editing a copy of a script; the Rust core's are planted here, in
//! the real decision, switched on for the current thread only, so the teeth tests of one
//! test binary cannot disturb each other.

#[cfg(feature = "planted-defects")]
use std::cell::Cell;

/// A defect of the core.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Defect {
    /// Every hold is taken for the hash form (`HoldState::in_hash_form`): the renewal of a
    /// first hold's string then reads a hash that is not there.
    HashFormAssumed,
    /// `release_first.lua`'s "the hold is in the hash form" (-4, nothing written) is read
    /// as the hold given back (`ReleaseOp::read`), instead of sending `release.lua`.
    HashFormReadAsReleased,
    /// A bare `SET NX` that found the key (nil) is read as a grant
    /// (`AcquireRequest::decode_take`).
    TakeNilReadAsGranted,
    /// `HoldState::deadline` adds the drift margin instead of subtracting it: a client
    /// believes it holds past the lease Redis was told.
    DriftAdded,
    /// `HoldState::on_renewed` lengthens belief even when no watchdog guard is left (a
    /// renewal sent before the last watchdog guard left, whose reply comes after the
    /// release re-armed the expiry shorter).
    RenewalIgnoresMode,
    /// A lost acquire's hold is adopted on any terms and credited with the caller's lease,
    /// not the lease Redis set (the bug the checker once found in the library).
    AdoptionIgnoresLease,
    /// A release retry that finds the hold gone reports success although it cannot know
    /// whether its lost attempt gave the hold back.
    ReleaseClaimsGoneHold,
    /// An acquire whose reply was lost is treated as one that did not run: no
    /// reconciliation, so a hold it took is stranded.
    LostAcquireForgotten,
    /// Reconciliation gives up at the first probe that gets no reply, while the hold the
    /// lost acquire took may still exist.
    ReconcileGivesUpEarly,
    /// A re-sent call's grant is confirmed from the last copy's send time, not the first:
    /// the copy that took the hold may be an earlier one whose reply was lost.
    ResendMovesSendTime,
    /// A re-sent give-back that finds nothing reports that it removed the hold.
    GiveBackClaimsGoneHold,
    /// The read-write lock reads a "wait" reply as a grant.
    RwWaitReadAsGrant,
    /// The latch reads "1 remains" as "open".
    LatchOneReadAsOpen,
    /// A count-down names only its client, not its own sequence number: the script takes
    /// the client's next count-down for a copy of the last one.
    LatchSeqDropped,
    /// RedLock counts half of the servers as a majority (N/2 rounded up).
    RedlockHalfIsAMajority,
    /// RedLock's validity leaves out the clock-drift margin.
    RedlockDriftIgnored,
    /// RedLock counts the time spent from the attempt's start only, ignoring holds adopted
    /// from an earlier attempt's lost request, whose leases started earlier.
    RedlockElapsedFromAttempt,
    /// RedLock decides an attempt without the servers still running once one grant short
    /// of a majority, not once a majority granted (`redlock::may_decide_early`).
    RedlockDecidesBeforeMajority,
    /// The multi-lock takes its members in the order they were named, not the global one.
    MultiOrderAsNamed,
    /// The multi-lock keeps the members it took when a later one cannot be taken.
    MultiKeepsPartial,
    // --- semaphore defects (tests/sem_teeth.rs) go below this line ---
    /// The semaphore reads a "wait" reply as a grant.
    SemWaitReadAsGrant,
    /// The semaphore's renewal names 1 permit for every acquisition: the other permits of
    /// an acquisition of n keep their first deadline.
    SemRenewsOnePermit,
    // --- fair lock defects (tests/fair_teeth.rs) go below this line ---
    /// The fair lock reads a "wait" reply as a grant.
    FairWaitReadAsGrant,
    /// The fair lock's attempt drops the 'q' flag: a waiter believes it queues but takes
    /// no place, so a newcomer may overtake it.
    FairQueueFlagDropped,
    // --- Redisson-layout lock defects (tests/redisson_teeth.rs) go below this line ---
    /// The Redisson-layout lock reads a "wait" reply (`{0, pttl}`) as a grant
    /// (`redisson::decode_acquire`).
    RedissonWaitReadAsGrant,
    /// The Redisson-layout lock names an acquire's record by its owner instead of its
    /// request (`redisson::request_of`): a re-entry finds the owner's earlier hold's record
    /// and is answered "granted" without a count of its own.
    RedissonRecordPerOwner,
    /// The Redisson-layout read-write lock reads a refused upgrade (`{-3}`) as a wait
    /// (`redisson::decode_rw_acquire`): an owner that reads and asks for the write waits
    /// for itself (found by `tests/redisson_rw_teeth.rs`).
    RedissonRwRefusalReadAsWait,
    // --- Redisson-layout latch defects (tests/redisson_latch_teeth.rs) go below this line ---
    /// A Redisson-layout count-down's record key names only its client, not the request
    /// id's sequence number: a client's next count-down finds the last one's record, is
    /// taken for a copy of it, and never counts.
    RedissonLatchRecordSeqDropped,
    /// A Redisson-layout count-down's record is sent with a quarter of its lifetime
    /// (`count_down_record_ms`): it expires while the count-down is still re-sent, and a
    /// copy re-sent after that counts again.
    RedissonLatchRecordShortLived,
    // --- waiting-loop defects (tests/wait_check.rs) go below this line ---
    /// A waiter's sleep is not bounded by the refusal's pttl: a lost wake-up costs the
    /// re-check interval (or the whole wait) instead of the hold's remaining time.
    WaitIgnoresPttl,
    /// A waiter that times out forgets what its attempts left (its place in a queue, its
    /// reservation): an orphan until it expires.
    WaitForgetsClaim,
    /// A waiter that leaves (its attempt after a wake-up failed for good, or its wait ran
    /// out) keeps the wake-up: the next local waiter sleeps on.
    WaitDropsWakeUp,
    /// An acquire dropped with its attempt in flight gives back only what earlier attempts
    /// left (`Wait::give_back_if_dropped` forgets the attempt in flight): a hold that
    /// attempt took unseen, or takes late, is an orphan (found by `tests/rw_teeth.rs`).
    DropForgetsAttemptInFlight,
    /// A set-kind acquisition's next attempt, after one that gave up with its outcome
    /// unknown, confirms a grant from its own first send: the earlier attempt's copy may
    /// have taken the hold, earlier (found by `tests/sem_teeth.rs`).
    AttemptsForgetEarlierSends,
    // --- latch and multi-lock defects, second set (tests/latch_teeth.rs,
    // tests/multi_teeth.rs) go below this line ---
    /// A count-down names only its sequence number, not its client: every client's
    /// count-downs share one record in the latch, so another client's count-down with the
    /// same sequence number is taken for a copy of an applied one and not counted.
    LatchTagDropped,
    /// The count-down's reply reader takes "the key is not a latch" (-2) for "open": a
    /// count-down of a key that holds something else reports the latch open.
    LatchWrongTypeReadAsOpen,
    /// The set/delete reply reader takes "the key is not a latch" (-2) for "nothing to
    /// do": closing a key that holds something else reports the latch already closed.
    LatchWrongTypeReadAsNotDone,
    /// The all-or-none walk compares the members taken with the index of the last member,
    /// not the count: it reports the multi-lock held before its last member is taken.
    MultiHeldBeforeLast,
    /// A failed acquisition gives back one member fewer than it took (the index of the
    /// last member taken used as the count): the last member taken stays held.
    MultiGivesBackOneFewer,
    /// The global order sorts members by key only, not by key then server: two members
    /// with one key on two servers are taken in the order they were named, so two
    /// multi-locks naming them in opposite orders can wait for each other in a cycle.
    MultiOrderByKeyOnly,
    /// An acquire that timed out is read as one that did not run (`after_failure`): no
    /// reconciliation, so a hold its late copy takes is stranded (found only by the late
    /// configurations of `tests/multi_teeth.rs`; a lost reply is still reconciled).
    TimeoutReadAsNotRun,
    /// A lost acquire's reconciliation stops a lease after the loss was noticed, whatever
    /// its probes met since (the bound never moves): the request may not have run yet,
    /// and a hold it takes late is nobody's until it expires (found by the late
    /// configurations of `tests/multi_teeth.rs` and by `tests/protocol_teeth.rs`).
    ReconcileStopsOnTimeouts,
    /// `MultiRelease::told` says `Ok` although a member's release failed (for example
    /// one a force-unlock or a restart took: the user believes every member was given
    /// back while held).
    MultiReleaseHidesFailure,
    /// `acquire::others_waiting` counts one listener too few (`listeners > caller + 1`): a
    /// waiter woken by a release takes the lock without marking it for the other local
    /// waiter, whose wake-up then never comes (found by `tests/wake_teeth.rs`).
    OthersWaitingOffByOne,
    /// `AcquireRequest::value` never marks a first hold (`"\1"` even when others of the
    /// client wait): a waiter woken by a release takes the lock with its bare `SET`
    /// unmarked, and its release wakes none of its client's other waiters (found by
    /// `tests/wake_teeth.rs`).
    FirstHoldValueUnmarked,
    // --- transient server error defects (tests/latch_teeth.rs, tests/multi_teeth.rs) go
    // below this line ---
    /// `Failure::from_server_error` classifies every transient code (`BUSY`, `LOADING`,
    /// ...) as `Permanent`: a call Redis refused without running it is given up at once
    /// instead of re-sent (a count-down ends without counting).
    TransientReadAsPermanent,
    /// `Failure::from_server_error` classifies `LOADING` as `Permanent` (a classifier
    /// without it): only a call refused while Redis loads after a restart is given up.
    LoadingReadAsPermanent,
    /// The release operation (`ReleaseOp::on_failure`, for `ReleaseFlow`'s give-backs and
    /// releases) treats `Failure::Transient` as permanent: a release answered `BUSY` ends
    /// unreleased, its hold left to its lease although Redis would take it back if asked
    /// again.
    ReleaseGivesUpOnTransient,
    // --- watchdog defects (tests/protocol_teeth.rs) go below this line ---
    /// `HoldState::on_renewed` takes the confirmed deadline from whichever renewal reply
    /// comes last, not the latest one confirmed: an older tick's late reply (two ticks in
    /// flight at once) moves belief back, and a hold Redis keeps is declared lost.
    RenewalReplyOverwrites,
    /// `HoldState::on_extended` credits an extension from the end of the lease as last
    /// confirmed instead of from its send (an extend to 30 s read as 30 s more), while
    /// `renew.lua` sets the expiry to the lease from when it runs: the holder believes
    /// past the expiry Redis has (found by the extend configuration of
    /// `tests/protocol_teeth.rs`).
    ExtensionCreditedFromLeaseEnd,
}

#[cfg(feature = "planted-defects")]
thread_local! {
    static PLANTED: Cell<Option<Defect>> = const { Cell::new(None) };
}

/// Plants `defect` (or none) for the current thread.
#[cfg(feature = "planted-defects")]
pub fn plant(defect: Option<Defect>) {
    PLANTED.with(|planted| planted.set(defect));
}

/// Whether `defect` is planted on the current thread: always `false` without the
/// `planted-defects` feature.
#[inline(always)]
pub fn is(defect: Defect) -> bool {
    #[cfg(feature = "planted-defects")]
    {
        PLANTED.with(|planted| planted.get() == Some(defect))
    }
    #[cfg(not(feature = "planted-defects"))]
    {
        let _ = defect;
        false
    }
}
