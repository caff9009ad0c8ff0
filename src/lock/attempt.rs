//! One acquire attempt in its (lock, owner) lane, and the reconciliation of an attempt
//! whose reply was lost.

use std::sync::Arc;
use std::time::Duration;

use crate::detach::Detachable;
use crate::error::{Error, Result};
use crate::guard::LockGuard;
use crate::lanes::LaneGuard;
use crate::protocol::Millis;
use crate::protocol::acquire::{
    AcquireReply, AcquireRequest, AfterFailure, Granted, ReconcileStep, after_failure,
};
use crate::protocol::lane::Resolved;
use crate::scripts::CallError;
use crate::watchdog::LeaseMode;

use super::Lock;

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
    /// `listening`: the caller is one of the hub's listeners for this lock.
    pub(super) fn attempt(&self, owner: &Arc<str>, listening: bool) -> Detachable<Attempt> {
        let lock = self.clone();
        let owner = owner.clone();
        Detachable::new(
            Box::pin(async move { lock.attempt_here(&owner, listening).await }),
            &self.client.inner,
            false,
        )
    }

    pub(super) async fn attempt_here(&self, owner: &Arc<str>, listening: bool) -> Result<Attempt> {
        // The replica check runs after the lane is left: giving an unreplicated hold back
        // is a release, which enters the lane itself.
        let (attempt, acked) = self.attempt_in_lane(owner, listening).await?;
        self.replicated(attempt, acked).await
    }

    /// [`Lock::attempt_here`] inside the (lock, owner) lane. Also returns how many
    /// replicas acknowledged a won hold (`None`: not asked, or unknown).
    pub(super) async fn attempt_in_lane(
        &self,
        owner: &Arc<str>,
        listening: bool,
    ) -> Result<(Attempt, Option<u32>)> {
        let inner = &self.client.inner;
        let mut lane = inner.lanes.enter(&self.keys.hash, owner).await;
        // Other local waiters may sleep on a wake-up that only one of them got: a hold this
        // attempt takes must announce its release to them (see `lua/acquire.lua`, "\1w").
        let others_waiting = inner.hub.listeners(&self.keys.channel) > usize::from(listening);
        let request = AcquireRequest {
            owner: owner.clone(),
            lease_ms: self.lease_ms(),
            request: inner.next_request_id(),
            fenced: self.fenced,
            others_waiting,
        };
        // An earlier acquire of this (lock, owner) whose reply was lost comes first: a hold
        // it took on the same terms is this attempt's result; on other terms it is given
        // back before this attempt is sent.
        match self.resolve_pending(&mut lane).await {
            Ok(Some((granted, sent_at, lost))) => {
                if lost.same_terms(&request) {
                    let guard = self.guard_for(owner, &granted, sent_at);
                    return Ok((Attempt::Acquired(guard), None));
                }
                let give_up_at = inner.clock.now() + lost.lease_ms;
                self.release_in_lane(&mut lane, owner, &granted.hold, give_up_at, None)
                    .await?;
            }
            Ok(None) => {}
            Err(err) => return Err(self.client.inner.redis_error(err.error)),
        }
        let mut request = request;
        // A dropped connection whose probe then shows that nothing ran is not an outage:
        // Redis answered the probe. Send a fresh request (a couple of times at most).
        let mut resends = 2;
        loop {
            let sent_at = inner.clock.now();
            let error = match inner.run_acquire(&request.call(&self.keys.protocol)).await {
                Ok((reply, acked)) => {
                    let decoded = request.decode(&reply).map_err(Error::UnexpectedReply)?;
                    return Ok((self.on_acquire_reply(owner, decoded, sent_at)?, acked));
                }
                Err(CallError { failure, error }) => match after_failure(&failure) {
                    AfterFailure::Reconcile => error,
                    AfterFailure::DidNotRun | AfterFailure::Fail => {
                        return Err(self.client.inner.redis_error(error));
                    }
                },
            };
            // The reply was lost, but the acquire may have run. Nothing else is sent for
            // this (lock, owner) before finding out what it did: ask now, and if that
            // fails too, keep asking in the background.
            let retry = AcquireRequest {
                request: inner.next_request_id(),
                ..request.clone()
            };
            lane.state()
                .lost_acquire(request, sent_at, inner.clock.now());
            if error.is_timeout() {
                // No answer in a whole response timeout: a probe now would most likely
                // time out too. The caller hears at once; the next attempt of this owner
                // (a waiter's) or the background task finds out what the request did.
                drop(lane);
                self.reconcile_in_background(owner.clone());
                return Err(self.client.inner.redis_error(error));
            }
            match self.resolve_pending(&mut lane).await {
                Ok(Some((granted, sent_at, _))) => {
                    tracing::debug!(lock = self.name(), "adopted a hold whose reply was lost");
                    let guard = self.guard_for(owner, &granted, sent_at);
                    return Ok((Attempt::Acquired(guard), None));
                }
                Ok(None) if resends > 0 => {
                    resends -= 1;
                    tracing::debug!(lock = self.name(), error = %error, "acquire: resending");
                    request = retry;
                }
                Ok(None) => return Err(self.client.inner.redis_error(error)),
                Err(_) => {
                    drop(lane);
                    self.reconcile_in_background(owner.clone());
                    return Err(self.client.inner.redis_error(error));
                }
            }
        }
    }

    /// Finds out what the lane's pending acquire (if any) did: the hold it took, to be
    /// adopted or given back, or nothing. The pending acquire stays when the probe got no
    /// reply (the caller reports the error; the background task asks again).
    pub(super) async fn resolve_pending(
        &self,
        lane: &mut LaneGuard,
    ) -> std::result::Result<Option<(Granted, Millis, AcquireRequest)>, CallError> {
        let Some(probe) = lane.state().probe(&self.keys.protocol) else {
            return Ok(None);
        };
        let reply = self.client.inner.run(&probe).await?;
        match lane.state().on_probe_reply(&reply) {
            Ok(Resolved::Holds {
                granted,
                sent_at,
                request,
            }) => Ok(Some((granted, sent_at, request))),
            Ok(Resolved::Nothing) => Ok(None),
            Err(unexpected) => {
                tracing::error!(lock = self.name(), %unexpected, "probe: unreadable reply");
                Ok(None)
            }
        }
    }

    /// Keeps asking what a lost acquire did, for as long as a hold it took could exist,
    /// and gives such a hold back. Takes the lane only for each probe, so other requests of
    /// the owner are not held up (they resolve the pending acquire themselves first).
    pub(super) fn reconcile_in_background(&self, owner: Arc<str>) {
        let runtime = tokio::runtime::Handle::try_current()
            .unwrap_or_else(|_| self.client.inner.runtime.clone());
        let lock = self.clone();
        let background = self.client.inner.background.clone();
        background.spawn(&runtime, async move {
            let inner = &lock.client.inner;
            let mut attempt = 1;
            loop {
                let delay = crate::protocol::backoff(attempt, inner.jitter());
                tokio::time::sleep(Duration::from_millis(delay)).await;
                attempt += 1;
                let mut lane = inner.lanes.enter(&lock.keys.hash, &owner).await;
                if !lane.state().is_pending() {
                    return; // resolved by the next request of this owner
                }
                match lock.resolve_pending(&mut lane).await {
                    Ok(Some((granted, _, _))) => {
                        tracing::debug!(
                            lock = lock.name(),
                            "giving back a hold whose reply was lost"
                        );
                        let give_up_at = inner.clock.now() + lock.lease_ms();
                        let _ = lock
                            .release_in_lane(&mut lane, &owner, &granted.hold, give_up_at, None)
                            .await;
                        return;
                    }
                    Ok(None) => return,
                    Err(err) => {
                        let now = inner.clock.now();
                        let step = lane
                            .state()
                            .on_probe_failure(&err.failure, now, inner.jitter());
                        if step == ReconcileStep::GiveUp {
                            tracing::warn!(
                                lock = lock.name(),
                                "could not learn whether an acquire whose reply was lost \
                                 took the lock before its lease ran out; if it did, it \
                                 has expired"
                            );
                            return;
                        }
                    }
                }
            }
        });
    }

    pub(super) fn on_acquire_reply(
        &self,
        owner: &Arc<str>,
        reply: AcquireReply,
        sent_at: Millis,
    ) -> Result<Attempt> {
        match reply {
            AcquireReply::Granted(granted) => {
                Ok(Attempt::Acquired(self.guard_for(owner, &granted, sent_at)))
            }
            AcquireReply::Held { pttl_ms } => Ok(Attempt::Held {
                pttl: Duration::from_millis(pttl_ms),
            }),
            AcquireReply::NotALock(found) => Err(self.wrong_type(&found)),
        }
    }

    /// With replica acknowledgement configured: a won hold that fewer replicas than asked
    /// acknowledged (or whose acknowledgement is unknown, because its reply was lost and
    /// the hold was found by a probe) is given back, and the caller gets
    /// [`Error::NotReplicated`].
    pub(super) async fn replicated(&self, attempt: Attempt, acked: Option<u32>) -> Result<Attempt> {
        let Some(ack) = self.client.inner.replica_ack else {
            return Ok(attempt);
        };
        let Attempt::Acquired(guard) = attempt else {
            return Ok(attempt);
        };
        if acked.is_some_and(|acked| acked >= ack.replicas) {
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

    pub(super) fn guard_for(
        &self,
        owner: &Arc<str>,
        granted: &Granted,
        sent_at: Millis,
    ) -> LockGuard {
        let inner = &self.client.inner;
        let entry = inner.registry.grant(
            &self.keys.hash,
            owner,
            granted,
            self.mode,
            self.lease_ms(),
            sent_at,
        );
        let fixed_end = match self.mode {
            LeaseMode::Fixed(_) => Some(sent_at + self.lease_ms()),
            LeaseMode::Watchdog => None,
        };
        LockGuard::new(
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
