//! The waiting loop of an acquire, for every kind that waits for a release (the plain
//! lock, the read-write lock, the fair lock, the semaphore): when to attempt, when to
//! subscribe to wake-ups, how long to sleep, what to do with a wake-up it got but will
//! not use, which Redis errors to ride out and for how long, and what an acquire that
//! ends without a grant must give back.
//!
//! Sans-IO: [`Wait`] only decides. The runtime (`src/waiting.rs`) makes the attempts,
//! subscribes, sleeps and reports back, and the checker (`tests/wait_check.rs`) drives
//! this same type through every sequence of replies, wake-ups and errors up to a bound.
//!
//! The rules it keeps, whatever the kind:
//! * **A lost wake-up costs only latency.** Every sleep ends by the time the last refusal
//!   said the hold could last (its pttl), and by the kind's re-check interval.
//! * **The deadline is kept.** No sleep runs past it; an acquire that gives up waiting
//!   gives up only at it.
//! * **No orphans.** An acquire that ends without a grant gives back whatever its attempts
//!   may have left under its id (a place in a queue, a reservation, a hold whose reply was
//!   lost), when the kind leaves that to the waiting loop.
//! * **No stranded waiters.** A wake-up this waiter received and did not use goes on to
//!   the next local waiter when this one leaves (its attempts failed for good, its wait
//!   ran out, its caller dropped it); through errors it retries itself, after a pause,
//!   holding the wake-up (handing it on at once could bounce it between waiters without
//!   pause). A grant of a kind whose holders share (readers, permits) lets the next local
//!   waiter look too.
//! * **Errors are ridden out, within limits.** The first attempt fails fast unless the
//!   server is only busy (`BUSY`, `LOADING`, ...); a waiter rides out any error but a
//!   permanent one, for at most the outage tolerance.

use super::backoff::Backoff;
use super::planted::{self, Defect};
use super::{Failure, Millis};

/// How a kind waits.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WaitPolicy {
    /// A waiter subscribes after its first refusal (an acquire granted at once never
    /// pays for a subscription). When subscribing: wait for the server to confirm the
    /// subscription, at most this long, and attempt again (so a release meanwhile is not
    /// missed).
    /// `None`: go to sleep at once (a release missed meanwhile costs at most one pause).
    pub confirm_within: Option<Millis>,
    /// A grant lets the next local waiter look too (readers go in together; a release
    /// may free more permits than one acquisition takes).
    pub shares: bool,
    /// A waiter attempts at least this often (it keeps a place in a queue or a
    /// reservation alive by attempting). `None`: the refusal's pttl alone bounds a sleep.
    pub recheck: Option<Millis>,
    /// The loop gives back what its attempts may have left under the acquisition's id
    /// when it ends without a grant (the set kinds). `false`: the kind does that itself
    /// (the plain lock's lane reconciles a lost attempt in the background).
    pub gives_back: bool,
    /// How long Redis errors are ridden out before they are reported.
    pub tolerance: Millis,
}

/// What the client's settings give every kind's waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WaitTiming {
    /// How long Redis errors are ridden out (the client's outage tolerance).
    pub tolerance: Millis,
    /// The client's response timeout.
    pub response: Millis,
}

/// A read-write lock's waiter attempts at least this often (which keeps a writer's
/// reservation alive), so a lost wake-up costs at most this much.
pub const READ_WRITE_RECHECK: Millis = 700;
/// A fair lock's queued waiter asks again at least this often (which keeps its place
/// alive), so a lost wake-up costs at most this much.
pub const FAIR_RECHECK: Millis = 1_000;
/// A semaphore's waiter attempts at least this often, which keeps its reservation alive.
pub const SEMAPHORE_RECHECK: Millis = 700;

impl WaitPolicy {
    /// The plain (reentrant) lock: subscribed after the first refusal, and the next
    /// attempt waits for the server's confirmation (bounded by the refusal's pttl), so a
    /// release between that attempt and the sleep cannot be missed. A lost attempt is
    /// reconciled by its lane, not given back here.
    pub fn reentrant(timing: WaitTiming) -> WaitPolicy {
        WaitPolicy {
            confirm_within: Some(Millis::MAX),
            shares: false,
            recheck: None,
            gives_back: false,
            tolerance: timing.tolerance,
        }
    }

    /// A lock in Redisson's layout: as [`WaitPolicy::reentrant`] (one channel for every
    /// waiter, each release wakes one waiter per process, as Redisson's own waiters are
    /// woken), but an attempt whose caller left is given back here: it has no lane.
    pub fn redisson(timing: WaitTiming) -> WaitPolicy {
        WaitPolicy {
            gives_back: true,
            ..WaitPolicy::reentrant(timing)
        }
    }

    /// The read-write lock (`read`: the read side): as [`WaitPolicy::reentrant`],
    /// subscribed (to the side's channel, which every waiter of that side shares) after
    /// the first refusal, and the next attempt waits for the server's confirmation, so a
    /// release between that attempt and the sleep cannot be missed. An acquire that is
    /// granted at once never subscribes: a subscription made before the first attempt
    /// cost every uncontended cycle a `SUBSCRIBE` and an `UNSUBSCRIBE`. Readers go in
    /// together.
    pub fn read_write(read: bool, timing: WaitTiming) -> WaitPolicy {
        WaitPolicy {
            confirm_within: Some(Millis::MAX),
            shares: read,
            recheck: Some(READ_WRITE_RECHECK),
            gives_back: true,
            tolerance: timing.tolerance,
        }
    }

    /// The fair lock: a waiter's channel is its own, subscribed only once it waits (and
    /// confirmed, so that its turn announced meanwhile is not missed).
    pub fn fair(timing: WaitTiming) -> WaitPolicy {
        WaitPolicy {
            confirm_within: Some(timing.response),
            shares: false,
            recheck: Some(FAIR_RECHECK),
            gives_back: true,
            tolerance: timing.tolerance,
        }
    }

    /// The count-down latch (an "attempt" reads the count; it is granted when the latch is
    /// open): subscribed after the first closed reading, confirmed, then read again, so
    /// an opening between the two is heard. The count has no TTL: `recheck` alone bounds
    /// a sleep. Every local waiter must see the opening: a grant hands the wake-up on.
    pub fn latch(recheck: Millis, timing: WaitTiming) -> WaitPolicy {
        WaitPolicy {
            confirm_within: Some(Millis::MAX),
            shares: true,
            recheck: Some(recheck),
            gives_back: false,
            tolerance: timing.tolerance,
        }
    }

    /// RedLock (an attempt tries every server at once; a refusal's pause is random below
    /// the retry delay): subscribed to every server's release announcements after the first
    /// lost attempt, without waiting for confirmation. Too few servers answering is a
    /// transient state ridden out for `tolerance` (the lease), from the first attempt on.
    pub fn redlock(tolerance: Millis) -> WaitPolicy {
        WaitPolicy {
            confirm_within: None,
            shares: false,
            recheck: None,
            gives_back: false,
            tolerance,
        }
    }

    /// The semaphore: subscribed after the first refusal, without waiting for the
    /// confirmation (the channel is shared by every local waiter of the semaphore, usually
    /// subscribed already; a release missed meanwhile costs at most one pause). A release
    /// may free more than one acquisition takes: a grant lets the next waiter look too.
    pub fn semaphore(timing: WaitTiming) -> WaitPolicy {
        WaitPolicy {
            confirm_within: None,
            shares: true,
            recheck: Some(SEMAPHORE_RECHECK),
            gives_back: true,
            tolerance: timing.tolerance,
        }
    }
}

/// What one attempt found, as the driver reports it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Tried {
    /// Granted: the acquisition holds.
    Granted,
    /// Someone else holds; attempt again within this long (the hold's pttl, or when a
    /// place in a queue or a reservation must be renewed).
    Busy {
        /// The bound on the wait, in ms.
        within: Millis,
    },
    /// As [`Tried::Busy`], and the next free capacity is kept for this waiter (a
    /// semaphore's reservation): a release must wake it before any other local waiter,
    /// since a wake-up that reaches another one is wasted (it cannot take what is kept).
    FirstInLine {
        /// The bound on the wait, in ms.
        within: Millis,
    },
    /// No usable reply (what the attempt's own retries could not ride out).
    Failed(Failure),
    /// It can never be granted (not a lock, a refused upgrade, an impossible request).
    /// `claim_may_remain`: an earlier copy of the attempt whose reply was lost may have
    /// taken something all the same.
    Refused {
        /// Whether something may still be held under the acquisition's id.
        claim_may_remain: bool,
    },
}

/// What the driver does next.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum WaitStep {
    /// Make one attempt, then call [`Wait::attempted`].
    Attempt,
    /// Subscribe to the kind's channel (for the rest of the wait). Then, if
    /// `confirm_until` is set, wait until the server confirms the subscription (or until
    /// then); then call [`Wait::subscribed`].
    Subscribe {
        /// Until when to wait for the confirmation.
        confirm_until: Option<Millis>,
    },
    /// Sleep until `until`, or until a release wakes this waiter (when `wake_on_release`);
    /// then call [`Wait::woke`].
    Sleep {
        /// When the sleep ends at the latest.
        until: Millis,
        /// Whether a release message ends the sleep early.
        wake_on_release: bool,
    },
    /// The acquire is over.
    Done(WaitEnd),
}

/// How an acquire ended.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum WaitEnd {
    /// It holds. `pass_on`: let the next local waiter look too.
    Granted {
        /// Whether to hand a wake-up to the next local waiter.
        pass_on: bool,
    },
    /// The wait ran out (or a single attempt was refused). `give_back`: give back what
    /// its attempts may have left (in the background); `pass_on`: hand the wake-up this
    /// waiter received (and could not use: its attempt failed) to the next local waiter.
    TimedOut {
        /// Whether to give back what the attempts may have left.
        give_back: bool,
        /// Whether to hand a wake-up to the next local waiter.
        pass_on: bool,
    },
    /// The last attempt's error is reported. `give_back` as above; `pass_on`: hand the
    /// wake-up this waiter received to the next local waiter.
    Failed {
        /// Whether to give back what the attempts may have left.
        give_back: bool,
        /// Whether to hand a wake-up to the next local waiter.
        pass_on: bool,
    },
}

/// One acquire's waiting loop.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Wait {
    policy: WaitPolicy,
    deadline: Option<Millis>,
    waits: bool,
    /// A refusal was seen: the caller is a waiter now (errors are ridden out).
    waiting: bool,
    subscribed: bool,
    /// The sleep to take once subscribed (a subscription that is not confirmed).
    pending_sleep: Option<Millis>,
    /// A wake-up was received and not used yet.
    woken: bool,
    /// Something may be held under the acquisition's id that it must give back if it
    /// ends without a grant.
    claim: bool,
    /// An attempt is in flight (its outcome unknown until it is reported).
    in_flight: bool,
    /// When the current run of errors began.
    errors_since: Option<Millis>,
    /// The last refusal kept the next free capacity for this waiter (see
    /// [`Wait::first_in_line`]).
    first_in_line: bool,
    errors: Backoff,
    spin: Backoff,
}

impl Wait {
    /// An acquire at `now` that waits at most `wait` ms (`None`: without limit; `0`: a
    /// single attempt, which never queues or reserves).
    pub fn new(policy: WaitPolicy, now: Millis, wait: Option<Millis>) -> Wait {
        Wait {
            policy,
            deadline: wait.map(|wait| now.saturating_add(wait)),
            waits: wait != Some(0),
            waiting: false,
            subscribed: false,
            pending_sleep: None,
            woken: false,
            claim: false,
            in_flight: false,
            errors_since: None,
            first_in_line: false,
            errors: Backoff::RETRY,
            spin: Backoff::SPIN,
        }
    }

    /// Whether a release must wake this waiter before any other local one: its last
    /// refusal ([`Tried::FirstInLine`]) kept the next free capacity for it. A plain
    /// refusal ends that; an error leaves it as it was (the reservation outlives it).
    pub fn first_in_line(&self) -> bool {
        self.first_in_line
    }

    /// Whether the attempts wait (may queue or reserve): `false` for a single attempt.
    pub fn waits(&self) -> bool {
        self.waits
    }

    /// Whether the waiter is subscribed (its attempts count it among the listeners).
    pub fn subscribed(&self) -> bool {
        self.subscribed
    }

    /// Whether the coming attempt most likely finds the lock held: the waiter failed an
    /// attempt (it is subscribed) and no release message has woken it since. Then the
    /// attempt that also reads the holder's TTL is the one to send; after a release
    /// message the lock is most likely free, and the cheapest attempt that takes a free
    /// lock is (for the reentrant lock: the bare `SET NX`, see
    /// [`AcquireRequest::contended`](crate::acquire::AcquireRequest::contended)).
    pub fn expects_held(&self) -> bool {
        self.subscribed && !self.woken
    }

    /// Whether an acquire dropped now (its caller went away) must give back what its
    /// attempts may have left: an attempt in flight may have taken a hold.
    pub fn give_back_if_dropped(&self) -> bool {
        let in_flight = self.in_flight && !planted::is(Defect::DropForgetsAttemptInFlight);
        self.policy.gives_back && (self.claim || in_flight)
    }

    /// Whether an acquire dropped now must hand on a wake-up it received and did not use.
    pub fn pass_on_if_dropped(&self) -> bool {
        self.woken
    }

    /// The first step.
    pub fn start(&mut self, _now: Millis) -> WaitStep {
        self.attempt()
    }

    /// The subscription was made (and confirmed, or the confirmation wait ended).
    pub fn subscribed_at(&mut self, _now: Millis) -> WaitStep {
        self.subscribed = true;
        match self.pending_sleep.take() {
            Some(until) => self.sleep(until, false),
            None => self.attempt(),
        }
    }

    /// A sleep ended: by a release message (`notified`), or at its end.
    pub fn woke(&mut self, _now: Millis, notified: bool) -> WaitStep {
        // A wake-up kept through an error stays until an attempt uses it.
        self.woken |= notified;
        self.attempt()
    }

    /// An attempt's result, at `now`. `spinning`: the waiter gets no wake-ups (the
    /// subscription was refused, or the client polls): it polls with growing pauses.
    /// `jitter`: any random number (for the back-off).
    pub fn attempted(
        &mut self,
        now: Millis,
        tried: Tried,
        spinning: bool,
        jitter: u64,
    ) -> WaitStep {
        self.in_flight = false;
        match tried {
            Tried::Granted => {
                self.claim = false;
                self.woken = false;
                WaitStep::Done(WaitEnd::Granted {
                    pass_on: self.policy.shares && self.subscribed,
                })
            }
            Tried::Busy { within } => {
                self.first_in_line = false;
                self.refused(now, within, spinning, jitter)
            }
            Tried::FirstInLine { within } => {
                self.first_in_line = true;
                self.refused(now, within, spinning, jitter)
            }
            Tried::Failed(failure) => self.failed(now, failure, jitter),
            Tried::Refused { claim_may_remain } => {
                self.claim = self.policy.gives_back && claim_may_remain;
                self.end_failed()
            }
        }
    }

    fn attempt(&mut self) -> WaitStep {
        self.in_flight = true;
        WaitStep::Attempt
    }

    fn refused(&mut self, now: Millis, within: Millis, spinning: bool, jitter: u64) -> WaitStep {
        // Someone else holds it and will announce its release: the wake-up was used.
        self.woken = false;
        self.errors_since = None;
        self.errors = Backoff::WAITER_ERRORS;
        self.waiting = true;
        if self.waits && self.policy.gives_back {
            // A waiting attempt queues or reserves under the acquisition's id.
            self.claim = true;
        }
        if !self.waits || self.deadline.is_some_and(|deadline| now >= deadline) {
            return self.timed_out();
        }
        // At least 1 ms: a refusal that says "0 ms left" must not become a busy loop.
        let mut pause = within.max(1);
        if planted::is(Defect::WaitIgnoresPttl) {
            pause = Millis::MAX;
        }
        if let Some(recheck) = self.policy.recheck {
            pause = pause.min(recheck);
        }
        if spinning {
            pause = pause.min(self.spin.pause_ms(jitter));
        }
        let until = now.saturating_add(pause);
        if !self.subscribed {
            return match self.policy.confirm_within {
                Some(confirm) => WaitStep::Subscribe {
                    confirm_until: Some(self.cut(now.saturating_add(confirm).min(until))),
                },
                None => {
                    self.pending_sleep = Some(until);
                    WaitStep::Subscribe {
                        confirm_until: None,
                    }
                }
            };
        }
        self.sleep(until, spinning)
    }

    fn failed(&mut self, now: Millis, failure: Failure, jitter: u64) -> WaitStep {
        if self.policy.gives_back && failure.may_have_run() {
            self.claim = true;
        }
        // The first attempt fails fast on an unreachable Redis (the caller's to handle);
        // a server that answered with a transient state is healthy, only busy.
        let retried = match failure {
            Failure::Permanent(_) => false,
            Failure::Transient(_) => true,
            Failure::NotSent | Failure::Lost | Failure::TimedOut => self.waiting,
        };
        let since = *self.errors_since.get_or_insert(now);
        if !retried || now.saturating_sub(since) > self.policy.tolerance {
            return self.end_failed();
        }
        if self.deadline.is_some_and(|deadline| now >= deadline) {
            // Before the first refusal the error is the caller's answer; a waiter whose
            // time is up simply did not get the lock.
            return if self.waiting {
                self.timed_out()
            } else {
                self.end_failed()
            };
        }
        let until = now.saturating_add(self.errors.pause_ms(jitter));
        // A wake-up this waiter got stays with it through its own retries: it attempts
        // again after the pause, and hands the wake-up on if it leaves. Handing it on now
        // would bounce it between the local waiters, or straight back to this one (a
        // wake-up handed on with nobody asleep is kept for the next sleeper), in a loop
        // without pause for as long as Redis cannot be reached.
        WaitStep::Sleep {
            until: self.cut(until),
            wake_on_release: self.subscribed,
        }
    }

    /// A sleep until `until`, cut at the deadline.
    fn sleep(&self, until: Millis, spinning: bool) -> WaitStep {
        WaitStep::Sleep {
            until: self.cut(until),
            wake_on_release: self.subscribed && !spinning,
        }
    }

    fn cut(&self, at: Millis) -> Millis {
        match self.deadline {
            Some(deadline) => at.min(deadline),
            None => at,
        }
    }

    fn timed_out(&mut self) -> WaitStep {
        let give_back = self.claim && !planted::is(Defect::WaitForgetsClaim);
        let pass_on = self.leave_wake_up();
        WaitStep::Done(WaitEnd::TimedOut { give_back, pass_on })
    }

    /// Whether a leaving waiter hands on the wake-up it holds.
    fn leave_wake_up(&mut self) -> bool {
        std::mem::take(&mut self.woken) && !planted::is(Defect::WaitDropsWakeUp)
    }

    fn end_failed(&mut self) -> WaitStep {
        let pass_on = self.leave_wake_up();
        WaitStep::Done(WaitEnd::Failed {
            give_back: self.claim,
            pass_on,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock_policy() -> WaitPolicy {
        WaitPolicy::reentrant(WaitTiming {
            tolerance: 30_000,
            response: 1_000,
        })
    }

    #[test]
    fn a_single_attempt_that_is_refused_times_out_without_subscribing() {
        let mut wait = Wait::new(lock_policy(), 100, Some(0));
        assert_eq!(wait.start(100), WaitStep::Attempt);
        assert_eq!(
            wait.attempted(100, Tried::Busy { within: 500 }, false, 0),
            WaitStep::Done(WaitEnd::TimedOut {
                give_back: false,
                pass_on: false
            })
        );
    }

    #[test]
    fn a_waiter_subscribes_then_sleeps_at_most_the_pttl() {
        let mut wait = Wait::new(lock_policy(), 0, None);
        wait.start(0);
        assert_eq!(
            wait.attempted(0, Tried::Busy { within: 500 }, false, 0),
            WaitStep::Subscribe {
                confirm_until: Some(500)
            }
        );
        assert_eq!(wait.subscribed_at(3), WaitStep::Attempt);
        assert_eq!(
            wait.attempted(4, Tried::Busy { within: 200 }, false, 0),
            WaitStep::Sleep {
                until: 204,
                wake_on_release: true,
            }
        );
    }
}
