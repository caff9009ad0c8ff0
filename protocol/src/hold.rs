//! What a client knows about one hold: its id, how many local guards share it, until when
//! its lease is confirmed, and whether it is lost.
//!
//! The lease is *confirmed* until the send time of the last acquire or renewal that Redis
//! acknowledged, plus the lease: measuring from the send time keeps the estimate on the
//! safe side of Redis's own clock. A hold is lost, and its guards are told, when
//! * a renewal or check finds that the hold is no longer current (deleted, expired,
//!   replaced by a newer hold of the same owner), within one watchdog tick for every
//!   hold, fixed leases included, or
//! * its confirmed deadline, less a drift margin, passes: Redis could not be reached, or
//!   the fixed lease ran out.

use std::sync::Arc;

use super::Millis;
use super::planted::{self, Defect};

/// Why a held lock is considered lost. Carried by `redis_locks::Error::LockLost` and by a guard's
/// `redis_locks::LockGuard::lost_reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LostReason {
    /// A renewal, check or release found that this hold is no longer current: the key was
    /// deleted, flushed or expired, Redis restarted without it, or the owner now holds a
    /// newer hold.
    OwnerFieldGone,
    /// Renewals could not reach Redis until the lease must have run out.
    LeaseExpiredUnconfirmed,
    /// The lock was taken with an explicit lease (no watchdog) and it has run out.
    LeaseElapsed,
    /// The hold was given back without this guard: `redis_locks::Lock::unlock`
    /// in this client released its last count.
    Unlocked,
}

impl LostReason {
    /// A short snake_case label, stable across releases (metrics and logs use it):
    /// `owner_field_gone`, `lease_expired_unconfirmed`, `lease_elapsed` or `unlocked`.
    pub fn as_str(&self) -> &'static str {
        match self {
            LostReason::OwnerFieldGone => "owner_field_gone",
            LostReason::LeaseExpiredUnconfirmed => "lease_expired_unconfirmed",
            LostReason::LeaseElapsed => "lease_elapsed",
            LostReason::Unlocked => "unlocked",
        }
    }
}

impl std::fmt::Display for LostReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LostReason::OwnerFieldGone => "the hold is gone from Redis",
            LostReason::LeaseExpiredUnconfirmed => {
                "Redis could not be reached to renew the lease before it ran out"
            }
            LostReason::LeaseElapsed => "the explicit lease ran out",
            LostReason::Unlocked => "it was released without this guard, by Lock::unlock",
        })
    }
}

/// Safety margin subtracted from a confirmed deadline before a hold is declared lost,
/// covering clock-rate drift between this host and Redis (the RedLock rule: 1 % + 2 ms).
pub fn drift(lease_ms: Millis) -> Millis {
    lease_ms / 100 + 2
}

/// One hold as this client knows it. Guards of the same (lock, owner) in this client share
/// one `HoldState` while the hold id stays the same.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HoldState {
    hold: Arc<str>,
    local_holds: usize,
    watchdog_holds: usize,
    /// The end (grant send time + lease) of each local fixed-lease guard.
    fixed_ends: Vec<Millis>,
    /// The hold must last until at least this (set by `LockGuard::extend`).
    floor: Millis,
    confirmed_until: Millis,
    lease_ms: Millis,
    lost: Option<LostReason>,
    /// The hold is certainly in the hash form in Redis (see `lua/acquire.lua`): it was
    /// granted with a count above 1 or a fencing token, or this client re-entered it. A
    /// hash never turns back into a string, so its renewal may read the hash first.
    hash_form: bool,
}

/// Re-arming the expiry at a partial release (see `lua/release.lua`): to `ms` from the
/// release, if the owner's count after it is `expected` (all of it this client's guards).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rearm {
    /// The expiry to set, in ms from when Redis runs the release.
    pub ms: Millis,
    /// This client's guards of the hold after the release.
    pub expected: u64,
}

/// How a grant relates to the hold this client already tracks for the same (lock, owner).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Joining {
    /// The same hold: join it.
    Join,
    /// Another hold (the tracked one ended and the owner holds a newer one): the tracked
    /// one is lost; track the new one.
    Replace,
}

impl HoldState {
    /// A hold granted to a request sent at `sent_at` with `lease_ms`.
    pub fn new(hold: Arc<str>, sent_at: Millis, lease_ms: Millis, watchdog: bool) -> Self {
        HoldState {
            hold,
            local_holds: 1,
            watchdog_holds: usize::from(watchdog),
            fixed_ends: if watchdog {
                Vec::new()
            } else {
                vec![sent_at.saturating_add(lease_ms)]
            },
            floor: 0,
            confirmed_until: sent_at.saturating_add(lease_ms),
            lease_ms,
            lost: None,
            hash_form: false,
        }
    }

    /// The same state, for a hold known to be in the hash form when `hash_form` (see
    /// [`Granted::hash_form`](super::acquire::Granted::hash_form)).
    pub fn in_hash_form(mut self, hash_form: bool) -> Self {
        self.hash_form |= hash_form || planted::is(Defect::HashFormAssumed);
        self
    }

    /// Whether the hold is certainly in the hash form in Redis (its renewal reads the hash
    /// first: `renew::RenewItem::of`).
    pub fn hash_form(&self) -> bool {
        self.hash_form
    }

    /// The hold id.
    pub fn hold(&self) -> &Arc<str> {
        &self.hold
    }

    /// Whether a grant of `hold` joins this state or replaces it. Only an active state
    /// (guards left, not lost) is joined: once its last guard left, what it confirmed may
    /// no longer be true (another client of the owner may have re-armed the expiry
    /// shorter since), so a new grant starts a new state.
    pub fn joining(&self, hold: &str) -> Joining {
        if self.is_active() && &*self.hold == hold {
            Joining::Join
        } else {
            Joining::Replace
        }
    }

    /// One more local guard of this hold, granted to a request sent at `sent_at`. The
    /// script only lengthens the expiry, so the confirmed deadline only moves later.
    pub fn join(&mut self, sent_at: Millis, lease_ms: Millis, watchdog: bool) {
        // A re-entry turned a first hold's string into the hash, for good.
        self.hash_form = true;
        self.local_holds += 1;
        if watchdog {
            self.watchdog_holds += 1;
        } else {
            self.fixed_ends.push(sent_at.saturating_add(lease_ms));
        }
        let until = sent_at.saturating_add(lease_ms);
        if until > self.confirmed_until {
            self.confirmed_until = until;
            self.lease_ms = lease_ms;
        }
    }

    /// One local guard left (released, dropped or detached); `fixed_end` is its end when
    /// it had a fixed lease. Returns whether none is left.
    pub fn leave(&mut self, watchdog: bool, fixed_end: Option<Millis>) -> bool {
        self.local_holds = self.local_holds.saturating_sub(1);
        if watchdog {
            self.watchdog_holds = self.watchdog_holds.saturating_sub(1);
        }
        let ended = fixed_end.and_then(|end| self.fixed_ends.iter().position(|e| *e == end));
        if let Some(i) = ended {
            self.fixed_ends.swap_remove(i);
        }
        self.local_holds == 0
    }

    /// After a guard left, with a partial release of it about to be sent at `now`: the
    /// expiry that this client's remaining guards need (`watchdog_lease_ms` from now while
    /// a watchdog guard remains, each fixed guard's end, an extension's floor), so that a
    /// longer lease that a released nested guard set does not outlive it. `None` when no
    /// guard remains, the hold is lost, or nothing is needed any more.
    ///
    /// The confirmed deadline drops to what the re-arm would leave (never below what a
    /// remaining guard needs), whether or not Redis applies it: the expiry Redis ends up
    /// with is at least the old confirmed one (no re-arm) or `now + ms` (re-armed later
    /// than now), so belief never exceeds Redis.
    pub fn prepare_rearm(&mut self, now: Millis, watchdog_lease_ms: Millis) -> Option<Rearm> {
        if self.local_holds == 0 || self.lost.is_some() {
            return None;
        }
        let watchdog_until = if self.watchdog_holds > 0 {
            now.saturating_add(watchdog_lease_ms)
        } else {
            0
        };
        let fixed_until = self.fixed_ends.iter().copied().max().unwrap_or(0);
        let until = watchdog_until.max(fixed_until).max(self.floor);
        if until <= now {
            return None;
        }
        self.confirmed_until = self.confirmed_until.min(until);
        Some(Rearm {
            ms: until - now,
            expected: self.local_holds as u64,
        })
    }

    /// Whether local guards remain and the hold is not known to be lost.
    pub fn is_active(&self) -> bool {
        self.local_holds > 0 && self.lost.is_none()
    }

    /// Whether the watchdog lengthens the lease (some guard has the watchdog lease), as
    /// opposed to only checking that the hold still exists.
    pub fn renews(&self) -> bool {
        self.watchdog_holds > 0
    }

    /// A renewal call sent at `sent_at` found the hold current. `lengthened`: the call
    /// lengthened its lease to `lease_ms` (it was sent as a watchdog renewal, not as a
    /// check of a fixed-lease hold). Belief moves only if the call lengthened the lease
    /// and a watchdog guard is still there: a release since the call was sent may have
    /// re-armed the expiry shorter for the fixed-lease guards that remain.
    pub fn on_renewal(&mut self, lengthened: bool, sent_at: Millis, lease_ms: Millis) {
        if lengthened {
            self.on_renewed(sent_at, lease_ms);
        }
    }

    /// A renewal with `lease_ms`, sent at `sent_at`, found the hold current.
    pub fn on_renewed(&mut self, sent_at: Millis, lease_ms: Millis) {
        let until = sent_at.saturating_add(lease_ms);
        let renews = self.renews() || planted::is(Defect::RenewalIgnoresMode);
        let later = until > self.confirmed_until || planted::is(Defect::RenewalReplyOverwrites);
        if renews && later {
            self.confirmed_until = until;
            self.lease_ms = lease_ms;
        }
    }

    /// An explicit extension (`LockGuard::extend`) to `lease_ms` from `sent_at` found the
    /// hold current: the expiry is at least that now, whatever kind of lease it has.
    pub fn on_extended(&mut self, sent_at: Millis, lease_ms: Millis) {
        let from = if planted::is(Defect::ExtensionCreditedFromLeaseEnd) {
            sent_at.max(self.confirmed_until)
        } else {
            sent_at
        };
        let until = from.saturating_add(lease_ms);
        self.floor = self.floor.max(until);
        if self.lost.is_none() && until > self.confirmed_until {
            self.confirmed_until = until;
            self.lease_ms = lease_ms;
        }
    }

    /// A renewal, check or release found the hold no longer current. Returns the reason
    /// when this newly makes the hold lost (only active holds can be lost: a release that
    /// raced a renewal must not count as a loss).
    pub fn on_gone(&mut self) -> Option<LostReason> {
        self.lose(LostReason::OwnerFieldGone)
    }

    /// Marks the hold lost for `reason`, if it is active and not lost yet.
    pub fn lose(&mut self, reason: LostReason) -> Option<LostReason> {
        if !self.is_active() {
            return None;
        }
        self.lost = Some(reason);
        Some(reason)
    }

    /// Why the hold is lost, if it is.
    pub fn lost(&self) -> Option<LostReason> {
        self.lost
    }

    /// Until when a release of one of this hold's guards, starting at `now`, keeps
    /// retrying: the lease as last confirmed, and at least `min_ms`.
    pub fn release_until(&self, now: Millis, min_ms: Millis) -> Millis {
        self.deadline().max(now.saturating_add(min_ms))
    }

    /// When the hold must be declared lost unless a renewal confirms it first.
    pub fn deadline(&self) -> Millis {
        if planted::is(Defect::DriftAdded) {
            return self.confirmed_until.saturating_add(drift(self.lease_ms));
        }
        self.confirmed_until.saturating_sub(drift(self.lease_ms))
    }

    /// How long ago, at `now`, the lease as last confirmed started: the send time of the
    /// acquire or renewal that confirmed it (a hold adopted from a lost request started
    /// before the attempt that adopted it).
    pub fn confirmed_age(&self, now: Millis) -> Millis {
        now.saturating_sub(self.confirmed_until.saturating_sub(self.lease_ms))
    }

    /// The lease left at `now` as last confirmed (0 once lost). The hold is declared lost
    /// a drift margin before this runs out.
    pub fn remaining(&self, now: Millis) -> Millis {
        if self.lost.is_some() {
            return 0;
        }
        self.confirmed_until.saturating_sub(now)
    }

    /// The clock reached `now`: declares the hold lost when its deadline has passed.
    pub fn on_clock(&mut self, now: Millis) -> Option<LostReason> {
        if now < self.deadline() {
            return None;
        }
        let reason = if self.renews() {
            LostReason::LeaseExpiredUnconfirmed
        } else {
            LostReason::LeaseElapsed
        };
        self.lose(reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_holds_share_the_state_and_never_shorten_the_deadline() {
        let mut hold = HoldState::new("c.1".into(), 0, 30_000, true);
        hold.join(10, 1_000, false);
        assert_eq!(hold.deadline(), 30_000 - drift(30_000));
        assert!(!hold.leave(false, Some(1_010)));
        assert!(hold.renews());
        assert!(hold.leave(true, None));
        assert!(!hold.is_active());
    }

    #[test]
    fn a_rearm_covers_the_remaining_guards_and_only_lowers_belief() {
        // Outer fixed 1 s (ends at 1_000), inner watchdog 30 s: the inner leaves at 200.
        let mut hold = HoldState::new("c.1".into(), 0, 1_000, false);
        hold.join(100, 30_000, true);
        assert_eq!(hold.deadline(), 30_100 - drift(30_000));
        assert!(!hold.leave(true, None));
        let rearm = hold.prepare_rearm(200, 30_000).expect("a guard remains");
        assert_eq!((rearm.ms, rearm.expected), (800, 1));
        assert!(
            hold.deadline() <= 1_000,
            "belief must drop to the outer's end"
        );
        // The reverse: outer watchdog, inner fixed: the watchdog's lease is kept.
        let mut hold = HoldState::new("c.2".into(), 0, 30_000, true);
        hold.join(100, 1_000, false);
        assert!(!hold.leave(false, Some(1_100)));
        let rearm = hold.prepare_rearm(200, 30_000).expect("a guard remains");
        assert_eq!(rearm.ms, 30_000);
        assert_eq!(hold.deadline(), 30_000 - drift(30_000), "never raised");
        // An extension is a floor.
        let mut hold = HoldState::new("c.3".into(), 0, 1_000, false);
        hold.on_extended(0, 5_000);
        hold.join(10, 1_000, false);
        assert!(!hold.leave(false, Some(1_010)));
        assert_eq!(hold.prepare_rearm(100, 30_000).map(|r| r.ms), Some(4_900));
        // The last guard leaving: nothing to re-arm.
        assert!(hold.leave(false, Some(1_000)));
        assert_eq!(hold.prepare_rearm(100, 30_000), None);
    }

    #[test]
    fn a_release_racing_a_renewal_is_not_a_loss() {
        let mut hold = HoldState::new("c.1".into(), 0, 30_000, true);
        assert!(hold.leave(true, None));
        assert_eq!(hold.on_gone(), None);
        assert_eq!(hold.lost(), None);
    }

    #[test]
    fn leases_run_out_with_the_right_reason() {
        let mut fixed = HoldState::new("c.1".into(), 0, 500, false);
        assert_eq!(fixed.on_clock(400), None);
        assert_eq!(fixed.on_clock(500), Some(LostReason::LeaseElapsed));
        let mut watched = HoldState::new("c.2".into(), 0, 500, true);
        assert_eq!(
            watched.on_clock(500),
            Some(LostReason::LeaseExpiredUnconfirmed)
        );
        assert_eq!(watched.joining("c.2"), Joining::Replace);
    }
}
