//! Observability: one function per event, each emitting a `tracing` event and, with the
//! `metrics` feature, `metrics` facade counters and histograms (names `redis_locks_*`).
//!
//! Metric names and labels (no lock names as labels: their number is unbounded):
//! * `redis_locks_acquisitions_total{outcome}`: `acquired`, `timeout`, `error`
//! * `redis_locks_acquire_wait_seconds`: from the call to the outcome
//! * `redis_locks_hold_seconds{end}`: from acquisition to `released` or `dropped`
//! * `redis_locks_lost_total{reason}`: `owner_field_gone`, `lease_expired_unconfirmed`,
//!   `lease_elapsed`, `unlocked`
//! * `redis_locks_renewal_seconds`: one watchdog tick, first call to last reply
//! * `redis_locks_renewal_failures_total`: renew calls that failed or timed out
//! * `redis_locks_waiters`: callers currently waiting for a lock (gauge)
//!
//! Without a `tracing` subscriber and without the `metrics` feature (or without a recorder)
//! each call costs a few atomic loads; `./scripts/bench.sh` S1 measures it.

use std::time::Duration;

use crate::error::LostReason;

/// An acquire call ended.
pub(crate) fn acquire_ended(lock: &str, waited: Duration, outcome: &'static str) {
    tracing::debug!(
        lock,
        waited_ms = waited.as_secs_f64() * 1e3,
        outcome,
        "acquire"
    );
    #[cfg(feature = "metrics")]
    {
        metrics::counter!("redis_locks_acquisitions_total", "outcome" => outcome).increment(1);
        metrics::histogram!("redis_locks_acquire_wait_seconds").record(waited.as_secs_f64());
    }
}

/// A guard's hold ended: released (`release()`) or dropped.
pub(crate) fn hold_ended(lock: &str, held: Duration, end: &'static str) {
    tracing::debug!(lock, held_ms = held.as_secs_f64() * 1e3, end, "hold ended");
    #[cfg(feature = "metrics")]
    metrics::histogram!("redis_locks_hold_seconds", "end" => end).record(held.as_secs_f64());
}

/// A hold was declared lost.
pub(crate) fn lost(key: &str, owner: &str, reason: LostReason) {
    let owner = crate::owner::Fingerprint(owner);
    tracing::warn!(key, %owner, %reason, "lock lost");
    #[cfg(feature = "metrics")]
    {
        let reason = match reason {
            LostReason::OwnerFieldGone => "owner_field_gone",
            LostReason::LeaseExpiredUnconfirmed => "lease_expired_unconfirmed",
            LostReason::LeaseElapsed => "lease_elapsed",
            LostReason::Unlocked => "unlocked",
        };
        metrics::counter!("redis_locks_lost_total", "reason" => reason).increment(1);
    }
}

/// A watchdog tick finished.
pub(crate) fn renewal_tick(took: Duration, locks: u64, calls: u64) {
    tracing::debug!(
        took_ms = took.as_secs_f64() * 1e3,
        locks,
        calls,
        "watchdog tick"
    );
    #[cfg(feature = "metrics")]
    metrics::histogram!("redis_locks_renewal_seconds").record(took.as_secs_f64());
}

/// A renew call failed (it is retried at the next tick).
pub(crate) fn renewal_failed() {
    #[cfg(feature = "metrics")]
    metrics::counter!("redis_locks_renewal_failures_total").increment(1);
}

/// Counts one waiting caller in the `redis_locks_waiters` gauge while it lives.
pub(crate) struct Waiting(());

impl Waiting {
    pub(crate) fn start() -> Self {
        #[cfg(feature = "metrics")]
        metrics::gauge!("redis_locks_waiters").increment(1.0);
        Waiting(())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        metrics::gauge!("redis_locks_waiters").decrement(1.0);
    }
}
