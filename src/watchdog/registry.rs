//! The registry of every live hold of one client (one [`HoldEntry`] per (lock key, owner)
//! and current hold id): what the watchdog renews or checks, what guards observe (their
//! lost signal, their remaining lease), and the watchdog's counters. The decisions (what a
//! grant joins, when a hold is lost, what a renewal confirms) are the protocol core's
//! ([`HoldState`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::error::LostReason;
use crate::protocol::hold::{HoldState, Joining};
use crate::protocol::release::{self, Leaving};
use crate::protocol::renew::{Renewed, decode_renew};
use crate::protocol::{Millis, acquire::Granted};

/// How a hold's lease is maintained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseMode {
    /// The lease is the watchdog timeout and the watchdog renews it.
    Watchdog,
    /// A fixed lease that simply expires.
    Fixed(Duration),
}

pub(crate) use crate::protocol::extend::HoldShape;

/// The members `<id>:1..members` of the sorted set `key`, held by one acquisition of a
/// `kind` (as the metrics label it).
pub(crate) struct SetMembers<'a> {
    pub(crate) kind: &'static str,
    pub(crate) key: &'a Arc<str>,
    pub(crate) id: &'a Arc<str>,
    /// `HoldShape::SetMembers(n)`, or a Redisson field (`id` is `<owner>\x01<request>`).
    pub(crate) shape: HoldShape,
}

/// Local bookkeeping for one hold held through this client.
#[derive(Debug)]
pub(crate) struct HoldEntry {
    pub(crate) key: Arc<str>,
    /// The kind of the hold, as the metrics label it (`lock`, `rwlock`, `fair`,
    /// `semaphore`).
    pub(crate) kind: &'static str,
    pub(crate) owner: Arc<str>,
    pub(crate) shape: HoldShape,
    /// The hold is one server's of a RedLock: losing it alone does not lose the RedLock
    /// (which tells its own loss), so it is logged at debug level, not as a warning.
    pub(crate) quorum_member: std::sync::atomic::AtomicBool,
    pub(super) lost: CancellationToken,
    pub(super) state: Mutex<HoldState>,
    pub(super) clock: Clock,
}

impl HoldEntry {
    pub(crate) fn lost_token(&self) -> &CancellationToken {
        &self.lost
    }

    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        self.state.lock().lost()
    }

    /// A renewal of just this hold to `lease_ms`: `renew.lua` for a lock hash,
    /// `sem_renew.lua` for set members (both answer with the positions that are gone).
    pub(crate) fn extension(&self, lease_ms: Millis) -> crate::protocol::Call {
        let hold = self.state.lock().hold().clone();
        crate::protocol::extend::extension_call(lease_ms, self.key.clone(), hold, self.shape)
    }

    /// The extension sent at `sent_at` was answered with `reply`: `Ok(true)` when the hold
    /// was current (its expiry is now at least `lease_ms` from `sent_at`), `Ok(false)` when
    /// it was gone (the hold is then lost and its guards are told).
    pub(crate) fn on_extension_reply(
        self: &Arc<Self>,
        registry: &Registry,
        reply: &crate::protocol::Reply,
        sent_at: Millis,
        lease_ms: Millis,
    ) -> std::result::Result<bool, String> {
        let status = decode_renew(reply, 1)?;
        if status.first() == Some(&Renewed::Gone) {
            registry.gone(self);
            return Ok(false);
        }
        self.state.lock().on_extended(sent_at, lease_ms);
        Ok(true)
    }

    /// Whether the hold is lost, checking the clock too (so it is right even when the
    /// runtime has not run the watchdog lately).
    pub(crate) fn is_lost(&self, registry: &Registry) -> bool {
        if self.lost.is_cancelled() {
            return true;
        }
        let overdue = self.state.lock().on_clock(self.clock.now());
        if let Some(reason) = overdue {
            registry.told_lost(self, reason);
            return true;
        }
        false
    }

    /// How long ago the lease as last confirmed started (see
    /// [`HoldState::confirmed_age`]).
    pub(crate) fn confirmed_age(&self) -> Millis {
        self.state.lock().confirmed_age(self.clock.now())
    }

    /// The time left on the lease as last confirmed by Redis, or zero once lost.
    pub(crate) fn remaining_lease(&self) -> Duration {
        Duration::from_millis(self.state.lock().remaining(self.clock.now()))
    }
}

/// Counters describing the watchdog's work, for monitoring and the benchmark.
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
/// let stats = client.watchdog_stats();
/// if stats.failed_calls > 0 {
///     eprintln!("{} renewal call(s) failed; last tick took {} µs", stats.failed_calls, stats.last_tick_micros);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WatchdogStats {
    /// Renewal ticks that had at least one lock to renew or check.
    pub ticks: u64,
    /// Renew script calls sent, over all ticks.
    pub renew_calls: u64,
    /// Lock renewals that Redis confirmed, over all ticks.
    pub renewed: u64,
    /// Fixed-lease holds that a tick found still held (checked, not extended).
    pub checked: u64,
    /// Locks declared lost, for any reason.
    pub lost: u64,
    /// Renew script calls that failed: a connection error, a timeout, or an error reply.
    pub failed_calls: u64,
    /// Of `failed_calls`, those Redis answered with an error reply (an ACL refusal, a
    /// script error, `BUSY`/`LOADING`), apart from calls that got no reply in time: a
    /// refusal does not go away by waiting, a slow reply on a busy machine does.
    pub refused_calls: u64,
    /// Locks renewed or checked in the most recent tick.
    pub last_tick_locks: u64,
    /// Script calls in the most recent tick.
    pub last_tick_calls: u64,
    /// Wall time from the start of the most recent tick to its last reply, in microseconds.
    pub last_tick_micros: u64,
}

#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) ticks: AtomicU64,
    pub(super) renew_calls: AtomicU64,
    pub(super) renewed: AtomicU64,
    pub(super) checked: AtomicU64,
    pub(super) lost: AtomicU64,
    pub(super) failed_calls: AtomicU64,
    pub(super) refused_calls: AtomicU64,
    pub(super) last_tick_locks: AtomicU64,
    pub(super) last_tick_calls: AtomicU64,
    pub(super) last_tick_micros: AtomicU64,
}

type HoldKey = (Arc<str>, Arc<str>);

/// All holds of one client.
#[derive(Debug)]
pub(crate) struct Registry {
    pub(super) holds: Mutex<HashMap<HoldKey, Arc<HoldEntry>>>,
    pub(super) counters: Counters,
    pub(crate) clock: Clock,
    /// Wakes the watchdog when a hold may now expire before its next planned scan.
    pub(super) deadline_added: tokio::sync::Notify,
    /// When the watchdog next scans for overdue holds (clock ms); 0 while it scans. A grant
    /// wakes the watchdog only when its hold's deadline comes earlier, so the common grant
    /// (a deadline a lease away) costs no task wake-up.
    pub(super) planned_scan: AtomicU64,
}

impl Registry {
    pub(crate) fn new(clock: Clock) -> Self {
        Registry {
            holds: Mutex::default(),
            counters: Counters::default(),
            clock,
            deadline_added: tokio::sync::Notify::new(),
            planned_scan: AtomicU64::new(0),
        }
    }

    /// Records one grant, to a request sent at `sent_at`. The live entry of the same hold
    /// is joined; an entry of another (older) hold of the same (key, owner) is lost (its
    /// hold ended and was replaced) and the grant gets an entry of its own.
    pub(crate) fn grant(
        &self,
        key: &Arc<str>,
        owner: &Arc<str>,
        granted: &Granted,
        mode: LeaseMode,
        lease_ms: Millis,
        sent_at: Millis,
    ) -> Arc<HoldEntry> {
        let watchdog = mode == LeaseMode::Watchdog;
        let mut holds = self.holds.lock();
        let map_key = (key.clone(), owner.clone());
        if let Some(entry) = holds.get(&map_key).cloned() {
            let mut state = entry.state.lock();
            match state.joining(&granted.hold) {
                Joining::Join => {
                    state.join(sent_at, lease_ms, watchdog);
                    let deadline = state.deadline();
                    drop(state);
                    drop(holds);
                    self.deadline_set(deadline);
                    return entry;
                }
                Joining::Replace => {
                    let reason = state.on_gone();
                    drop(state);
                    holds.remove(&map_key);
                    if let Some(reason) = reason {
                        self.announce_lost(&entry, reason);
                    }
                }
            }
        }
        let entry = Arc::new(HoldEntry {
            key: key.clone(),
            kind: "lock",
            owner: owner.clone(),
            shape: HoldShape::LockHash,
            quorum_member: std::sync::atomic::AtomicBool::new(false),
            lost: CancellationToken::new(),
            state: Mutex::new(
                HoldState::new(granted.hold.clone(), sent_at, lease_ms, watchdog)
                    .in_hash_form(granted.hash_form()),
            ),
            clock: self.clock,
        });
        let deadline = entry.state.lock().deadline();
        holds.insert(map_key, entry.clone());
        drop(holds);
        self.deadline_set(deadline);
        entry
    }

    /// Records the set members `held` (unique: never joined), taken by a request sent at
    /// `sent_at`.
    pub(crate) fn grant_members(
        &self,
        held: SetMembers<'_>,
        mode: LeaseMode,
        lease_ms: Millis,
        sent_at: Millis,
    ) -> Arc<HoldEntry> {
        let SetMembers {
            kind,
            key,
            id,
            shape,
        } = held;
        let entry = Arc::new(HoldEntry {
            key: key.clone(),
            kind,
            owner: id.clone(),
            shape,
            quorum_member: std::sync::atomic::AtomicBool::new(false),
            lost: CancellationToken::new(),
            state: Mutex::new(HoldState::new(
                id.clone(),
                sent_at,
                lease_ms,
                mode == LeaseMode::Watchdog,
            )),
            clock: self.clock,
        });
        let deadline = entry.state.lock().deadline();
        self.holds
            .lock()
            .insert((key.clone(), id.clone()), entry.clone());
        self.deadline_set(deadline);
        entry
    }

    /// A hold (already in the map) must be checked by `deadline`: wakes the watchdog if its
    /// next scan comes later, or if it is scanning now (the scan may have missed the hold).
    fn deadline_set(&self, deadline: Millis) {
        let planned = self.planned_scan.load(Ordering::SeqCst);
        if planned == 0 || deadline < planned {
            self.deadline_added.notify_one();
        }
    }

    /// Forgets one local guard leaving at `now` (the core's [`release::leave`]: the
    /// retry bound of its release, then the re-arm when guards remain). When the entry has
    /// none left it leaves the registry, so the watchdog stops renewing it.
    pub(crate) fn leave(
        &self,
        entry: &Arc<HoldEntry>,
        mode: LeaseMode,
        fixed_end: Option<Millis>,
        watchdog_lease_ms: Millis,
        response_ms: Millis,
    ) -> Leaving {
        let mut holds = self.holds.lock();
        let mut state = entry.state.lock();
        let leaving = release::leave(
            &mut state,
            self.clock.now(),
            response_ms,
            mode == LeaseMode::Watchdog,
            fixed_end,
            watchdog_lease_ms,
        );
        drop(state);
        if leaving.last {
            Self::remove_locked(&mut holds, entry);
        }
        leaving
    }

    fn remove_locked(holds: &mut HashMap<HoldKey, Arc<HoldEntry>>, entry: &Arc<HoldEntry>) {
        let map_key = (entry.key.clone(), entry.owner.clone());
        if holds
            .get(&map_key)
            .is_some_and(|current| Arc::ptr_eq(current, entry))
        {
            holds.remove(&map_key);
        }
    }

    /// Whether this client tracks a live hold of `owner` on `key` (one an acquire of the
    /// owner may re-enter).
    pub(crate) fn holds(&self, key: &Arc<str>, owner: &Arc<str>) -> bool {
        self.holds
            .lock()
            .get(&(key.clone(), owner.clone()))
            .is_some_and(|entry| entry.state.lock().is_active())
    }

    /// `Lock::unlock` in this client gave back the last count of `hold`: the guards of that
    /// hold here are told (their own release would otherwise report it gone).
    pub(crate) fn unlocked(&self, key: &Arc<str>, owner: &Arc<str>, hold: &str) {
        let entry = self
            .holds
            .lock()
            .get(&(key.clone(), owner.clone()))
            .cloned();
        if let Some(entry) = entry {
            let reason = {
                let mut state = entry.state.lock();
                if &**state.hold() != hold {
                    return;
                }
                state.lose(LostReason::Unlocked)
            };
            if let Some(reason) = reason {
                self.told_lost(&entry, reason);
            }
        }
    }

    /// A renewal or release found the hold gone: lost, if it is still active.
    pub(crate) fn gone(&self, entry: &Arc<HoldEntry>) {
        let reason = entry.state.lock().on_gone();
        if let Some(reason) = reason {
            self.told_lost(entry, reason);
        }
    }

    /// Tells the guards of a hold that the core declared lost, and stops renewing it.
    pub(super) fn told_lost(&self, entry: &HoldEntry, reason: LostReason) {
        self.announce_lost(entry, reason);
        let mut holds = self.holds.lock();
        let map_key = (entry.key.clone(), entry.owner.clone());
        if holds
            .get(&map_key)
            .is_some_and(|current| std::ptr::eq(&**current, entry))
        {
            holds.remove(&map_key);
        }
    }

    pub(super) fn announce_lost(&self, entry: &HoldEntry, reason: LostReason) {
        let member = entry.quorum_member.load(Ordering::Relaxed);
        crate::observe::lost(entry.kind, &entry.key, &entry.owner, reason, member);
        self.counters.lost.fetch_add(1, Ordering::Relaxed);
        entry.lost.cancel();
    }

    pub(crate) fn len(&self) -> usize {
        self.holds.lock().len()
    }

    pub(crate) fn stats(&self) -> WatchdogStats {
        let c = &self.counters;
        WatchdogStats {
            ticks: c.ticks.load(Ordering::Relaxed),
            renew_calls: c.renew_calls.load(Ordering::Relaxed),
            renewed: c.renewed.load(Ordering::Relaxed),
            checked: c.checked.load(Ordering::Relaxed),
            lost: c.lost.load(Ordering::Relaxed),
            failed_calls: c.failed_calls.load(Ordering::Relaxed),
            refused_calls: c.refused_calls.load(Ordering::Relaxed),
            last_tick_locks: c.last_tick_locks.load(Ordering::Relaxed),
            last_tick_calls: c.last_tick_calls.load(Ordering::Relaxed),
            last_tick_micros: c.last_tick_micros.load(Ordering::Relaxed),
        }
    }

    pub(super) fn entries(&self) -> Vec<Arc<HoldEntry>> {
        self.holds.lock().values().cloned().collect()
    }

    /// Declares lost every entry whose confirmed deadline has passed; returns the earliest
    /// deadline among the others.
    pub(super) fn expire_overdue(&self, now: Millis) -> Option<Millis> {
        let mut earliest: Option<Millis> = None;
        for entry in self.entries() {
            let mut state = entry.state.lock();
            match state.on_clock(now) {
                Some(reason) => {
                    drop(state);
                    self.told_lost(&entry, reason);
                }
                None => {
                    let deadline = state.deadline();
                    earliest = Some(earliest.map_or(deadline, |e| e.min(deadline)));
                }
            }
        }
        earliest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn granted(hold: &str) -> Granted {
        Granted {
            count: 1,
            hold: hold.into(),
            token: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn nested_grants_share_one_entry_until_the_last_leaves() {
        let registry = Registry::new(Clock::new());
        let (k, o) = (Arc::from("k"), Arc::from("o"));
        let a = registry.grant(&k, &o, &granted("h1"), LeaseMode::Watchdog, 30_000, 0);
        let b = registry.grant(&k, &o, &granted("h1"), LeaseMode::Watchdog, 30_000, 0);
        assert!(Arc::ptr_eq(&a, &b));
        registry.leave(&b, LeaseMode::Watchdog, None, 30_000, 3_000);
        assert_eq!(registry.len(), 1);
        registry.leave(&a, LeaseMode::Watchdog, None, 30_000, 3_000);
        assert_eq!(registry.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_newer_hold_replaces_and_loses_the_stale_entry() {
        let registry = Registry::new(Clock::new());
        let (k, o) = (Arc::from("k"), Arc::from("o"));
        let old = registry.grant(&k, &o, &granted("h1"), LeaseMode::Watchdog, 3_000, 0);
        let new = registry.grant(&k, &o, &granted("h2"), LeaseMode::Watchdog, 3_000, 0);
        assert!(!Arc::ptr_eq(&old, &new));
        assert_eq!(old.lost_reason(), Some(LostReason::OwnerFieldGone));
        assert!(old.lost_token().is_cancelled());
        assert!(!new.lost_token().is_cancelled());
        // Leaving the stale entry must not remove the fresh one.
        registry.leave(&old, LeaseMode::Watchdog, None, 30_000, 3_000);
        assert_eq!(registry.len(), 1);
    }
}
