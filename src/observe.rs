//! Observability: one function per event, each emitting a `tracing` event and, with the
//! `metrics` feature, `metrics` facade counters and histograms (names `redis_locks_*`).
//!
//! Metric names and labels (no lock names or owner ids as labels: their number is
//! unbounded, and an owner id is a secret). `kind` is `lock`, `rwlock`, `fair` or
//! `semaphore` (a multi-lock's and a RedLock's members are counted as the locks they are):
//! * `redis_locks_acquisitions_total{kind, outcome}`: `acquired`, `would_block` (a try
//!   without a wait found it held), `timeout`, `error`
//! * `redis_locks_acquire_wait_seconds{kind}`: from the call to the outcome
//! * `redis_locks_hold_seconds{kind, end}`: from acquisition to `released` or `dropped`
//! * `redis_locks_lost_total{kind, reason}`: `owner_field_gone`,
//!   `lease_expired_unconfirmed`, `lease_elapsed`, `unlocked`
//! * `redis_locks_renewals_total{kind}`: holds renewed (or, for a fixed lease, checked)
//!   by the watchdog and found still held
//! * `redis_locks_renewal_seconds`: one watchdog tick, first call to last reply
//! * `redis_locks_renewal_failures_total`: renew calls that failed or timed out
//! * `redis_locks_waiters{kind}`: callers currently waiting (gauge)
//!
//! Spans: `redis_locks::acquire` and `redis_locks::release`, each with the fields `kind` and
//! `lock`, around every kind's acquisition and release.
//!
//! Without a `tracing` subscriber and without the `metrics` feature (or without a recorder)
//! each call costs a few atomic loads; `./scripts/bench.sh` S1 measures it.

use std::time::Duration;

use crate::error::LostReason;

/// An acquire call ended.
pub(crate) fn acquire_ended(
    kind: &'static str,
    lock: &str,
    waited: Duration,
    outcome: &'static str,
) {
    tracing::debug!(
        kind,
        lock,
        waited_ms = waited.as_secs_f64() * 1e3,
        outcome,
        "acquire"
    );
    #[cfg(feature = "metrics")]
    {
        metrics::counter!("redis_locks_acquisitions_total", "kind" => kind, "outcome" => outcome)
            .increment(1);
        metrics::histogram!("redis_locks_acquire_wait_seconds", "kind" => kind)
            .record(waited.as_secs_f64());
    }
}

/// A guard's hold ended: released (`release()`) or dropped.
pub(crate) fn hold_ended(kind: &'static str, lock: &str, held: Duration, end: &'static str) {
    tracing::debug!(
        kind,
        lock,
        held_ms = held.as_secs_f64() * 1e3,
        end,
        "hold ended"
    );
    #[cfg(feature = "metrics")]
    metrics::histogram!("redis_locks_hold_seconds", "kind" => kind, "end" => end)
        .record(held.as_secs_f64());
}

/// A hold was declared lost.
/// `quorum_member`: one server's hold of a RedLock, whose loss alone is not the RedLock's
/// (the RedLock warns when it is lost): logged at debug level.
pub(crate) fn lost(
    kind: &'static str,
    key: &str,
    owner: &str,
    reason: LostReason,
    quorum_member: bool,
) {
    let owner = crate::owner::Fingerprint(owner);
    if quorum_member {
        tracing::debug!(kind, key, %owner, %reason, "RedLock member hold lost");
    } else {
        tracing::warn!(kind, key, %owner, %reason, "lock lost");
    }
    #[cfg(feature = "metrics")]
    {
        metrics::counter!("redis_locks_lost_total", "kind" => kind, "reason" => reason.as_str())
            .increment(1);
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

/// One renew call's reply found `holds` holds of `kind` still held (renewed or checked).
pub(crate) fn renewed(kind: &'static str, holds: u64) {
    #[cfg(feature = "metrics")]
    metrics::counter!("redis_locks_renewals_total", "kind" => kind).increment(holds);
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, holds);
}

/// A renew call failed (it is retried at the next tick).
pub(crate) fn renewal_failed() {
    #[cfg(feature = "metrics")]
    metrics::counter!("redis_locks_renewal_failures_total").increment(1);
}

/// Counts one waiting caller of a kind in the `redis_locks_waiters` gauge while it lives.
pub(crate) struct Waiting(#[cfg_attr(not(feature = "metrics"), allow(dead_code))] &'static str);

impl Waiting {
    pub(crate) fn start(kind: &'static str) -> Self {
        #[cfg(feature = "metrics")]
        metrics::gauge!("redis_locks_waiters", "kind" => kind).increment(1.0);
        Waiting(kind)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        metrics::gauge!("redis_locks_waiters", "kind" => self.0).decrement(1.0);
    }
}
