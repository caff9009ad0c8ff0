//! One acquire attempt in its (lock, owner) lane, and the reconciliation of an attempt
//! whose reply was lost.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;

use super::LockGuard;
use crate::detach::Detachable;
use crate::error::{Error, Result};
use crate::protocol::Millis;
use crate::protocol::acquire::{self, AcquireRequest, Granted};
use crate::protocol::attempt::{AttemptOp, AttemptOutcome, ReconcileRound, RoundOutcome};
use crate::waiting::AttemptHints;
use crate::watchdog::LeaseMode;

use super::Lock;
use crate::drive::drive;

// One attempt's result, moved once per attempt: boxing the guard would cost an
// allocation on the hot path to save a copy of a few hundred bytes.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Attempt {
    Acquired(LockGuard),
    Held { pttl: Duration },
}

impl Lock {
    /// One acquire attempt. It runs in the caller's task; if the caller drops it after it
    /// was sent, the rest of it runs in a background task, where a won hold is released
    /// at once (its guard is dropped). So cancelling can never strand a hold.
    /// `hints`: what the waiting loop knows (the caller is one of the hub's listeners for
    /// this lock; the lock is most likely held).
    pub(super) fn attempt(&self, owner: &Arc<str>, hints: AttemptHints) -> Detachable<Attempt> {
        let lock = self.clone();
        let owner = owner.clone();
        Detachable::new(
            Box::pin(async move { lock.attempt_here(&owner, hints).await }),
            &self.client.inner.background,
            &self.client.inner.runtime,
            false,
        )
    }

    pub(super) async fn attempt_here(
        &self,
        owner: &Arc<str>,
        hints: AttemptHints,
    ) -> Result<Attempt> {
        // The replica check runs after the lane is left: giving an unreplicated hold back
        // is a release, which enters the lane itself.
        let (attempt, acked) = self.attempt_in_lane(owner, hints).await?;
        self.replicated(attempt, acked).await
    }

    /// [`Lock::attempt_here`] inside the (lock, owner) lane: the core's [`AttemptOp`],
    /// driven to its end. Also returns how many replicas acknowledged a won hold
    /// (`None`: not asked, or unknown).
    pub(super) async fn attempt_in_lane(
        &self,
        owner: &Arc<str>,
        hints: AttemptHints,
    ) -> Result<(Attempt, Option<u32>)> {
        let inner = &self.client.inner;
        let mut lane = inner.lanes.enter(&self.keys.hash, owner).await;
        // Other local waiters may sleep on a wake-up that only one of them got: a hold this
        // attempt takes must announce its release to them (see `lua/acquire.lua`, "\1w").
        let others_waiting =
            acquire::others_waiting(inner.hub.listeners(&self.keys.channel), hints.listening);
        let request = AcquireRequest {
            owner: owner.clone(),
            lease_ms: self.lease_ms(),
            request: inner.calls.next_request_id(),
            fenced: self.fenced,
            others_waiting,
            contended: hints.expects_held,
        };
        let may_reenter = inner.registry.holds(&self.keys.hash, owner);
        let mut op = AttemptOp::new(self.keys.protocol.clone(), request).may_reenter(may_reenter);
        let driven = drive(&inner.calls, lane.state(), &mut op).await;
        match driven.outcome {
            AttemptOutcome::Granted {
                granted,
                sent_at,
                lease_ms,
                adopted,
            } => {
                if adopted {
                    tracing::debug!(lock = self.name(), "adopted a hold whose reply was lost");
                }
                let guard = self.guard_for(owner, &granted, sent_at, lease_ms);
                let acked = acquire::acknowledged(driven.acked, adopted);
                Ok((Attempt::Acquired(guard), acked))
            }
            AttemptOutcome::Held { pttl_ms } => Ok((
                Attempt::Held {
                    pttl: Duration::from_millis(pttl_ms),
                },
                None,
            )),
            AttemptOutcome::NotALock(found) => Err(self.wrong_type(&found)),
            AttemptOutcome::Unreadable(unreadable) => Err(Error::UnexpectedReply(unreadable)),
            AttemptOutcome::Failed {
                reconcile_in_background,
                ..
            } => {
                drop(lane);
                if reconcile_in_background {
                    self.reconcile_in_background(owner.clone());
                }
                let error = driven
                    .last_error
                    .unwrap_or_else(|| inner.calls.timeout_error());
                Err(inner.calls.redis_error(error))
            }
        }
    }

    /// Keeps asking what a lost acquire did, for as long as a hold it took could exist
    /// (the core decides: past a lease, only while the probes time out, since the request
    /// may not have run yet), and gives such a hold back: rounds of the core's [`ReconcileRound`], each inside
    /// the lane, so other requests of the owner are not held up between rounds (they
    /// resolve the pending acquire themselves first).
    pub(super) fn reconcile_in_background(&self, owner: Arc<str>) {
        let runtime = tokio::runtime::Handle::try_current()
            .unwrap_or_else(|_| self.client.inner.runtime.clone());
        let inner = &self.client.inner;
        let at = ReconcileRound::first_at(inner.calls.clock.now(), inner.calls.jitter());
        let rounds = self
            .clone()
            .reconcile_rounds(owner, at, runtime.clone(), true);
        inner.background.spawn(&runtime, rounds);
    }

    /// The rounds from `at` on. While a hold the lost request took could exist they are
    /// background work that `flush` waits for (`counted`, on `runtime`); asking past that
    /// bound (the core's `ReconcileRound::asks_late`: only a request that has not run yet
    /// could still take the lock) goes on in a task of its own, not waited for, as long
    /// as the probes time out (until one answers, the connection drops, or the runtime
    /// stops).
    fn reconcile_rounds(
        self,
        owner: Arc<str>,
        mut at: Millis,
        runtime: Handle,
        counted: bool,
    ) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move {
            let inner = &self.client.inner;
            loop {
                tokio::time::sleep_until(inner.calls.clock.instant(at)).await;
                let mut lane = inner.lanes.enter(&self.keys.hash, &owner).await;
                let mut round = ReconcileRound::new(self.keys.protocol.clone());
                match drive(&inner.calls, lane.state(), &mut round).await.outcome {
                    RoundOutcome::Resolved => return,
                    RoundOutcome::RetryAt(next) if counted && round.asks_late() => {
                        drop(lane);
                        tracing::debug!(
                            lock = self.name(),
                            "an acquire whose reply was lost may still run: asking on"
                        );
                        let later =
                            self.clone()
                                .reconcile_rounds(owner, next, runtime.clone(), false);
                        runtime.spawn(later);
                        return;
                    }
                    RoundOutcome::RetryAt(next) => at = next,
                    RoundOutcome::GaveUp => {
                        tracing::warn!(
                            lock = self.name(),
                            "could not learn whether an acquire whose reply was lost \
                             took the lock before its lease ran out; if it did, it \
                             has expired"
                        );
                        return;
                    }
                }
            }
        })
    }

    /// With replica acknowledgement configured: a won hold that fewer replicas than asked
    /// acknowledged (or whose acknowledgement is unknown, because its reply was lost and
    /// the hold was found by a probe) is given back, and the caller gets
    /// [`Error::NotReplicated`].
    pub(super) async fn replicated(&self, attempt: Attempt, acked: Option<u32>) -> Result<Attempt> {
        let Some(ack) = self.client.inner.calls.replica_ack else {
            return Ok(attempt);
        };
        let Attempt::Acquired(guard) = attempt else {
            return Ok(attempt);
        };
        if acquire::replicated(acked, ack.replicas) {
            return Ok(Attempt::Acquired(guard));
        }
        tracing::warn!(
            lock = self.name(),
            wanted = ack.replicas,
            acked,
            "acquisition not acknowledged by enough replicas; giving it back"
        );
        // Dropping the guard would release it in the background; releasing here means
        // the caller hears only once it is given back (or could not be).
        if let Err(err) = guard.release().await {
            tracing::warn!(lock = self.name(), error = %err, "giving back an unreplicated hold failed");
        }
        Err(Error::NotReplicated {
            name: self.name().to_owned(),
            wanted: ack.replicas,
            acked,
            timeout: ack.timeout,
        })
    }

    /// The guard of a granted hold, credited with `lease_ms` from `sent_at`.
    pub(super) fn guard_for(
        &self,
        owner: &Arc<str>,
        granted: &Granted,
        sent_at: Millis,
        lease_ms: Millis,
    ) -> LockGuard {
        let inner = &self.client.inner;
        let entry = inner.registry.grant(
            &self.keys.hash,
            owner,
            granted,
            self.mode,
            lease_ms,
            sent_at,
        );
        let fixed_end = acquire::fixed_end(self.mode == LeaseMode::Watchdog, sent_at, lease_ms);
        LockGuard::of_lock(
            self.clone(),
            owner.clone(),
            entry,
            granted.hold.clone(),
            granted.count,
            granted.token,
            fixed_end,
        )
    }
}
