//! The watchdog: one task per client that keeps every held lease alive and tells holders
//! when a lock is lost.
//!
//! Every hold taken through this client is recorded in the [`Registry`], one
//! [`HoldEntry`] per (lock key, owner). Entries with at least one watchdog-leased hold are
//! renewed every `timeout / 3`, in batches of many keys per script call, all batches sent
//! at once over the multiplexed connection (so a tick costs about one round trip whatever
//! the number of locks). Entries with only explicit leases are not renewed.
//!
//! Each entry remembers until when its lease is *confirmed*: the send time of the last
//! acquire or renewal that Redis acknowledged, plus the lease. Measuring from the send
//! time (not the reply) keeps the estimate on the safe side. A lock is declared lost, its
//! token cancelled and its renewal stopped, when
//! * a renewal reports that the owner's field is gone, or
//! * the confirmed deadline (minus a small drift margin) passes without a newer
//!   confirmation: Redis was unreachable, or the explicit lease ran out.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use redis::aio::ConnectionManager;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::LostReason;
use crate::scripts::{self, Scripts, evalsha};

/// How a hold's lease is maintained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseMode {
    /// The lease is the watchdog timeout and the watchdog renews it.
    Watchdog,
    /// A fixed lease that simply expires.
    Fixed(Duration),
}

/// Safety margin subtracted from a confirmed deadline before a lock is declared lost,
/// covering clock-rate drift between this host and Redis (the RedLock rule: 1 % + 2 ms).
pub(crate) fn drift(lease: Duration) -> Duration {
    lease / 100 + Duration::from_millis(2)
}

#[derive(Debug)]
struct HoldState {
    local_holds: usize,
    watchdog_holds: usize,
    confirmed_until: Instant,
    lease: Duration,
}

/// Local bookkeeping for one (lock key, owner) pair held through this client.
#[derive(Debug)]
pub(crate) struct HoldEntry {
    pub(crate) key: Arc<str>,
    pub(crate) owner: Arc<str>,
    lost: CancellationToken,
    lost_reason: Mutex<Option<LostReason>>,
    state: Mutex<HoldState>,
}

impl HoldEntry {
    pub(crate) fn lost_token(&self) -> &CancellationToken {
        &self.lost
    }

    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        *self.lost_reason.lock()
    }

    /// The time left on the lease as last confirmed by Redis, or zero once lost.
    pub(crate) fn remaining_lease(&self) -> Duration {
        if self.lost.is_cancelled() {
            return Duration::ZERO;
        }
        let state = self.state.lock();
        state
            .confirmed_until
            .saturating_duration_since(Instant::now())
    }

    pub(crate) fn confirm(&self, sent_at: Instant, lease: Duration) {
        let mut state = self.state.lock();
        let until = sent_at + lease;
        if until > state.confirmed_until || lease != state.lease {
            state.confirmed_until = until;
            state.lease = lease;
        }
    }

    fn mark_lost(&self, reason: LostReason) {
        {
            let mut slot = self.lost_reason.lock();
            if slot.is_none() {
                *slot = Some(reason);
            }
        }
        self.lost.cancel();
    }

    fn deadline(&self) -> Instant {
        let state = self.state.lock();
        state.confirmed_until - drift(state.lease)
    }
}

/// Counters describing the watchdog's work, for monitoring and the benchmark.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WatchdogStats {
    /// Renewal ticks that had at least one lock to renew.
    pub ticks: u64,
    /// Renew script calls sent, over all ticks.
    pub renew_calls: u64,
    /// Lock renewals that Redis confirmed, over all ticks.
    pub renewed: u64,
    /// Locks declared lost, for any reason.
    pub lost: u64,
    /// Renew script calls that failed (connection error or timeout).
    pub failed_calls: u64,
    /// Locks renewed in the most recent tick.
    pub last_tick_locks: u64,
    /// Script calls in the most recent tick.
    pub last_tick_calls: u64,
    /// Wall time from the start of the most recent tick to its last reply, in microseconds.
    pub last_tick_micros: u64,
}

#[derive(Debug, Default)]
struct Counters {
    ticks: AtomicU64,
    renew_calls: AtomicU64,
    renewed: AtomicU64,
    lost: AtomicU64,
    failed_calls: AtomicU64,
    last_tick_locks: AtomicU64,
    last_tick_calls: AtomicU64,
    last_tick_micros: AtomicU64,
}

type HoldKey = (Arc<str>, Arc<str>);

/// All holds of one client.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    holds: Mutex<HashMap<HoldKey, Arc<HoldEntry>>>,
    counters: Counters,
    /// Wakes the watchdog when a hold with a fixed lease may now expire before the
    /// watchdog's next planned wake-up.
    deadline_added: tokio::sync::Notify,
}

impl Registry {
    /// Records one successful acquire. A live entry for the same (key, owner) is joined;
    /// a lost one is left to the guards that still point at it and replaced.
    pub(crate) fn hold(
        &self,
        key: &Arc<str>,
        owner: &Arc<str>,
        mode: LeaseMode,
        watchdog_lease: Duration,
        sent_at: Instant,
    ) -> Arc<HoldEntry> {
        let lease = match mode {
            LeaseMode::Watchdog => watchdog_lease,
            LeaseMode::Fixed(lease) => lease,
        };
        let mut holds = self.holds.lock();
        let map_key = (key.clone(), owner.clone());
        // Join the live entry whatever `count` says: replies of concurrent attempts by the
        // same owner are processed in any order, so a count of 1 may arrive after a 2.
        let joinable = holds
            .get(&map_key)
            .filter(|entry| !entry.lost.is_cancelled())
            .cloned();
        let entry = match joinable {
            Some(entry) => entry,
            None => {
                let entry = Arc::new(HoldEntry {
                    key: key.clone(),
                    owner: owner.clone(),
                    lost: CancellationToken::new(),
                    lost_reason: Mutex::new(None),
                    state: Mutex::new(HoldState {
                        local_holds: 0,
                        watchdog_holds: 0,
                        confirmed_until: sent_at + lease,
                        lease,
                    }),
                });
                holds.insert(map_key, entry.clone());
                entry
            }
        };
        {
            let mut state = entry.state.lock();
            state.local_holds += 1;
            if mode == LeaseMode::Watchdog {
                state.watchdog_holds += 1;
            }
            // Every acquire re-sets the key's TTL to its own lease.
            state.confirmed_until = sent_at + lease;
            state.lease = lease;
        }
        drop(holds);
        if matches!(mode, LeaseMode::Fixed(_)) {
            self.deadline_added.notify_one();
        }
        entry
    }

    /// Forgets one local hold. When the entry has no holds left it leaves the registry, so
    /// the watchdog stops renewing it.
    pub(crate) fn unhold(&self, entry: &Arc<HoldEntry>, mode: LeaseMode) {
        let mut holds = self.holds.lock();
        let mut state = entry.state.lock();
        state.local_holds = state.local_holds.saturating_sub(1);
        if mode == LeaseMode::Watchdog {
            state.watchdog_holds = state.watchdog_holds.saturating_sub(1);
        }
        if state.local_holds == 0 {
            drop(state);
            Self::remove_locked(&mut holds, entry);
        }
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

    /// Marks a hold lost (fires its signal) and stops renewing it.
    pub(crate) fn declare_lost(&self, entry: &Arc<HoldEntry>, reason: LostReason) {
        if entry.lost.is_cancelled() {
            return;
        }
        tracing::warn!(key = %entry.key, owner = %entry.owner, %reason, "lock lost");
        entry.mark_lost(reason);
        self.counters.lost.fetch_add(1, Ordering::Relaxed);
        Self::remove_locked(&mut self.holds.lock(), entry);
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
            lost: c.lost.load(Ordering::Relaxed),
            failed_calls: c.failed_calls.load(Ordering::Relaxed),
            last_tick_locks: c.last_tick_locks.load(Ordering::Relaxed),
            last_tick_calls: c.last_tick_calls.load(Ordering::Relaxed),
            last_tick_micros: c.last_tick_micros.load(Ordering::Relaxed),
        }
    }

    fn renewable(&self) -> Vec<Arc<HoldEntry>> {
        self.holds
            .lock()
            .values()
            .filter(|entry| entry.state.lock().watchdog_holds > 0)
            .cloned()
            .collect()
    }

    /// Declares lost every entry whose confirmed deadline has passed; returns the earliest
    /// deadline among the others.
    fn expire_overdue(&self, now: Instant) -> Option<Instant> {
        let mut overdue = Vec::new();
        let mut earliest: Option<Instant> = None;
        for entry in self.holds.lock().values() {
            let deadline = entry.deadline();
            if deadline <= now {
                overdue.push(entry.clone());
            } else {
                earliest = Some(earliest.map_or(deadline, |e| e.min(deadline)));
            }
        }
        for entry in overdue {
            let reason = if entry.state.lock().watchdog_holds > 0 {
                LostReason::LeaseExpiredUnconfirmed
            } else {
                LostReason::LeaseElapsed
            };
            self.declare_lost(&entry, reason);
        }
        earliest
    }
}

/// What the watchdog task needs; owned by the task, shared with nothing but the registry.
pub(crate) struct Watchdog {
    pub(crate) registry: Arc<Registry>,
    pub(crate) conn: ConnectionManager,
    pub(crate) scripts: Arc<Scripts>,
    pub(crate) lease: Duration,
    pub(crate) batch: usize,
    pub(crate) call_timeout: Duration,
    pub(crate) shutdown: CancellationToken,
}

impl Watchdog {
    /// Renewals run every third of the lease, so two can fail before it runs out.
    fn period(&self) -> Duration {
        self.lease / 3
    }

    /// Runs until the client's shutdown token is cancelled.
    pub(crate) async fn run(self) {
        let period = self.period();
        let mut next_tick = Instant::now() + period;
        // The earliest confirmed deadline seen by the last scan. Renewals only move
        // deadlines later, so until then no hold can be overdue and scanning (which visits
        // every hold) is skipped; a new fixed-lease hold forces a scan.
        let mut next_scan = Instant::now();
        let mut ticks: JoinSet<()> = JoinSet::new();
        loop {
            let now = Instant::now();
            if now >= next_scan {
                next_scan = self.registry.expire_overdue(now).unwrap_or(next_tick);
            }
            let wake_at = next_scan.min(next_tick);
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = self.registry.deadline_added.notified() => {
                    next_scan = Instant::now();
                    continue;
                }
                _ = tokio::time::sleep_until(wake_at) => {}
                // Reap finished ticks so the set does not grow.
                Some(_) = ticks.join_next(), if !ticks.is_empty() => continue,
            }
            let now = Instant::now();
            if now >= next_tick {
                next_tick = now + period;
                if ticks.len() < 2 {
                    ticks.spawn(self.tick());
                } else {
                    tracing::warn!("watchdog: previous renewals still running; skipping a tick");
                }
            }
        }
    }

    /// Renews every watchdog-leased hold once: all batches concurrently.
    fn tick(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let entries = self.registry.renewable();
        let registry = self.registry.clone();
        let conn = self.conn.clone();
        let scripts = self.scripts.clone();
        let lease = self.lease;
        let batch = self.batch.max(1);
        let call_timeout = self.call_timeout.min(self.period());
        async move {
            if entries.is_empty() {
                return;
            }
            let started = Instant::now();
            let lease_ms = lease.as_millis() as u64;
            let mut calls = JoinSet::new();
            let mut call_count = 0u64;
            // Move the entries into the batches: no second reference count per lock.
            let mut entries = entries.into_iter();
            loop {
                let chunk: Vec<Arc<HoldEntry>> = entries.by_ref().take(batch).collect();
                if chunk.is_empty() {
                    break;
                }
                let mut conn = conn.clone();
                let scripts = scripts.clone();
                let registry = registry.clone();
                call_count += 1;
                calls.spawn(async move {
                    let keys: Vec<&str> = chunk.iter().map(|entry| &*entry.key).collect();
                    let mut cmd = evalsha(&scripts.renew, &keys);
                    cmd.arg(lease_ms);
                    for entry in &chunk {
                        cmd.arg(&*entry.owner);
                    }
                    let sent_at = Instant::now();
                    let reply = tokio::time::timeout(
                        call_timeout,
                        scripts::call::<Vec<usize>>(&mut conn, &scripts.renew, &cmd),
                    )
                    .await;
                    registry
                        .counters
                        .renew_calls
                        .fetch_add(1, Ordering::Relaxed);
                    match reply {
                        Ok(Ok(lost)) if lost.iter().all(|&i| i >= 1 && i <= chunk.len()) => {
                            let mut gone = vec![false; chunk.len()];
                            for &i in &lost {
                                gone[i - 1] = true;
                            }
                            let mut renewed = 0;
                            for (entry, gone) in chunk.iter().zip(gone) {
                                if gone {
                                    registry.declare_lost(entry, LostReason::OwnerFieldGone);
                                } else {
                                    entry.confirm(sent_at, lease);
                                    renewed += 1;
                                }
                            }
                            registry
                                .counters
                                .renewed
                                .fetch_add(renewed, Ordering::Relaxed);
                            renewed
                        }
                        Ok(Ok(lost)) => {
                            tracing::error!(
                                batch = chunk.len(),
                                ?lost,
                                "watchdog: renew reply names positions outside the batch"
                            );
                            registry
                                .counters
                                .failed_calls
                                .fetch_add(1, Ordering::Relaxed);
                            0
                        }
                        Ok(Err(err)) => {
                            tracing::warn!(error = %err, "watchdog: renewal failed; will retry");
                            registry
                                .counters
                                .failed_calls
                                .fetch_add(1, Ordering::Relaxed);
                            0
                        }
                        Err(_) => {
                            tracing::warn!("watchdog: renewal timed out; will retry");
                            registry
                                .counters
                                .failed_calls
                                .fetch_add(1, Ordering::Relaxed);
                            0
                        }
                    }
                });
            }
            let mut renewed = 0;
            while let Some(result) = calls.join_next().await {
                renewed += result.unwrap_or(0);
            }
            let c = &registry.counters;
            c.ticks.fetch_add(1, Ordering::Relaxed);
            c.last_tick_calls.store(call_count, Ordering::Relaxed);
            c.last_tick_locks.store(renewed, Ordering::Relaxed);
            c.last_tick_micros
                .store(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> Arc<str> {
        s.into()
    }

    #[tokio::test(start_paused = true)]
    async fn reentrant_holds_share_one_entry_until_the_last_leaves() {
        let registry = Registry::default();
        let (k, o) = (key("k"), key("o"));
        let lease = Duration::from_secs(30);
        let now = Instant::now();
        let a = registry.hold(&k, &o, LeaseMode::Watchdog, lease, now);
        let b = registry.hold(&k, &o, LeaseMode::Watchdog, lease, now);
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(registry.renewable().len(), 1);
        registry.unhold(&b, LeaseMode::Watchdog);
        assert_eq!(registry.len(), 1);
        registry.unhold(&a, LeaseMode::Watchdog);
        assert_eq!(registry.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn fresh_acquire_replaces_a_lost_entry() {
        let registry = Registry::default();
        let (k, o) = (key("k"), key("o"));
        let lease = Duration::from_secs(3);
        let old = registry.hold(&k, &o, LeaseMode::Watchdog, lease, Instant::now());
        registry.declare_lost(&old, LostReason::OwnerFieldGone);
        assert!(old.lost_token().is_cancelled());
        assert_eq!(registry.len(), 0);
        let new = registry.hold(&k, &o, LeaseMode::Watchdog, lease, Instant::now());
        assert!(!Arc::ptr_eq(&old, &new));
        assert!(!new.lost_token().is_cancelled());
        // Releasing the stale guard must not remove the fresh entry.
        registry.unhold(&old, LeaseMode::Watchdog);
        assert_eq!(registry.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn unconfirmed_leases_expire_with_the_right_reason() {
        let registry = Registry::default();
        let lease = Duration::from_secs(1);
        let start = Instant::now();
        let watched = registry.hold(&key("a"), &key("o"), LeaseMode::Watchdog, lease, start);
        let fixed = registry.hold(
            &key("b"),
            &key("o"),
            LeaseMode::Fixed(Duration::from_millis(500)),
            lease,
            start,
        );
        let next = registry.expire_overdue(start + Duration::from_millis(100));
        assert_eq!(
            next,
            Some(start + Duration::from_millis(500) - drift(Duration::from_millis(500)))
        );
        registry.expire_overdue(start + Duration::from_millis(600));
        assert_eq!(fixed.lost_reason(), Some(LostReason::LeaseElapsed));
        assert_eq!(watched.lost_reason(), None);
        registry.expire_overdue(start + lease);
        assert_eq!(
            watched.lost_reason(),
            Some(LostReason::LeaseExpiredUnconfirmed)
        );
        assert_eq!(registry.len(), 0);
    }
}
