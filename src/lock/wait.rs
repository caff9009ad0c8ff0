//! The waiting loop of an acquire: attempts, pub/sub wake-ups, pttl-bounded sleeps.

use std::time::Duration;

use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::guard::LockGuard;
use crate::protocol::Failure;
use crate::protocol::backoff::Backoff;
use crate::pubsub::Listener;

use super::{Attempt, Lock};

/// Passes a received wake-up on to the next local waiter unless disarmed, so a waiter
/// that is cancelled or fails after being woken does not strand the others.
struct WakeBaton<'a> {
    listener: &'a Listener,
    armed: bool,
}

impl Drop for WakeBaton<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.listener.pass_on();
        }
    }
}

impl Lock {
    /// One acquire call (wait `None`: without limit), observed: a `tracing` span and
    /// the acquisition metrics (see `observe.rs`).
    pub(super) async fn acquire_until(&self, wait: Option<Duration>) -> Result<Option<LockGuard>> {
        use tracing::Instrument;
        let started = Instant::now();
        let span = tracing::debug_span!("redis_locks::acquire", lock = %self.keys.name);
        let outcome = self.wait_for(wait).instrument(span).await;
        let label = match &outcome {
            Ok(Some(_)) => "acquired",
            Ok(None) => "timeout",
            Err(_) => "error",
        };
        crate::observe::acquire_ended(&self.keys.name, started.elapsed(), label);
        outcome
    }

    pub(super) async fn wait_for(&self, wait: Option<Duration>) -> Result<Option<LockGuard>> {
        let owner = self.resolve_owner();
        let deadline = wait.map(|wait| Instant::now() + wait);
        // How long to pause: `wanted`, cut to the time left; `None` once the wait is over.
        let pause_for = |wanted: Duration| match deadline {
            None => Some(wanted),
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                (!left.is_zero()).then(|| left.min(wanted))
            }
        };

        // The first attempt fails fast on an unreachable Redis (the caller's to handle),
        // but rides out transient server states (BUSY, LOADING, MASTERDOWN, TRYAGAIN, ...)
        // within the wait and the outage tolerance: Redis answered, it is healthy.
        let mut backoff = Backoff::RETRY;
        let first_try = Instant::now();
        let pttl = loop {
            match self.attempt(&owner, false).await {
                Ok(Attempt::Acquired(guard)) => return Ok(Some(guard)),
                Ok(Attempt::Held { pttl }) => break pttl,
                Err(Error::Redis(err))
                    if matches!(crate::scripts::classify(&err.error), Failure::Transient(_)) =>
                {
                    let wanted = backoff.pause(self.client.inner.jitter());
                    let Some(pause) = pause_for(Duration::from_micros(wanted)) else {
                        return Err(Error::Redis(err));
                    };
                    if first_try.elapsed() > self.outage_tolerance() {
                        return Err(Error::Redis(err));
                    }
                    tracing::debug!(lock = self.name(), error = %err, "first attempt: server busy, retrying");
                    tokio::time::sleep(pause).await;
                }
                Err(err) => return Err(err),
            }
        };
        let Some(first_pause) = pause_for(pttl) else {
            return Ok(None);
        };
        // Subscribe before the next attempt, so a release between that attempt and our
        // sleep cannot be missed.
        let listener = self.client.inner.hub.listen(&self.keys.channel);
        let _waiting = crate::observe::Waiting::start();
        let _ = tokio::time::timeout(first_pause, listener.ready()).await;

        let mut woken = false;
        let mut outage: Option<Instant> = None;
        let mut backoff = Backoff::WAITER_ERRORS;
        let mut poll_backoff = Backoff::SPIN;
        loop {
            let mut baton = WakeBaton {
                listener: &listener,
                armed: woken,
            };
            let pause = match self.attempt(&owner, true).await {
                Ok(Attempt::Acquired(guard)) => {
                    baton.armed = false;
                    return Ok(Some(guard));
                }
                Ok(Attempt::Held { pttl }) => {
                    // Someone else holds it now and will announce its release.
                    baton.armed = false;
                    outage = None;
                    backoff.reset(&Backoff::WAITER_ERRORS);
                    pttl
                }
                Err(Error::Redis(err)) if is_transient(&err.error) => {
                    // A waiter rides out a connection blip or a Redis restart; a longer
                    // outage is reported. An attempt whose reply was lost is cleaned up
                    // in the background (see `attempt_here`).
                    let since = *outage.get_or_insert_with(Instant::now);
                    if since.elapsed() > self.outage_tolerance() {
                        return Err(Error::Redis(err));
                    }
                    tracing::debug!(lock = self.name(), error = %err, "waiter: retrying");
                    Duration::from_micros(backoff.pause(self.client.inner.jitter()))
                }
                Err(err) => return Err(err),
            };
            drop(baton);
            // Without a subscription (spin mode, or the ACL refused it), poll: 1 ms doubling
            // to 128 ms, plus up to half of it again at random so that spinning waiters
            // spread out, never past the lock's TTL.
            let pause = if listener.denied() {
                pause.min(Duration::from_micros(
                    poll_backoff.pause(self.client.inner.jitter()),
                ))
            } else {
                pause
            };
            let Some(pause) = pause_for(pause) else {
                return Ok(None);
            };
            tokio::select! {
                _ = listener.notified() => woken = true,
                _ = tokio::time::sleep(pause) => woken = false,
            }
        }
    }

    /// How long a waiter keeps retrying through Redis errors before reporting them.
    pub(super) fn outage_tolerance(&self) -> Duration {
        let inner = &self.client.inner;
        inner.watchdog_timeout.max(inner.response_timeout)
    }
}

/// Errors a waiter retries through: the connection failed, or the server is in a transient
/// state (`BUSY`, `LOADING`, ...).
fn is_transient(err: &redis::RedisError) -> bool {
    !matches!(crate::scripts::classify(err), Failure::Permanent(_))
}
