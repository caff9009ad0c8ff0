//! Giving back a hold: `unlock` by an explicit owner, and the release a guard drives.

use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::lanes::LaneGuard;
use crate::protocol::Millis;
use crate::protocol::hold::Rearm;
use crate::protocol::release::{ReleaseOp, ReleaseOutcome, ReleaseStep};

use super::{HOLD_FIELD, Lock};

impl Lock {
    /// Releases one hold of this handle's owner without a guard: for owners that took the
    /// lock in another process or task under an explicit owner id. Returns the holds
    /// left (0 when the lock was freed and its waiters woken).
    ///
    /// Fails with [`Error::NotHeld`] when the owner holds no hold, and with
    /// [`Error::WrongType`] when the key is not a lock.
    ///
    /// # Cancel safety
    /// Not cancel-safe in the sense that a cancelled call may or may not have released
    /// the hold; it never releases twice.
    pub async fn unlock(&self) -> Result<u64> {
        let Some(owner) = self.owner.clone() else {
            return Err(Error::InvalidConfig(format!(
                "unlock of {:?} needs an explicit owner (Lock::with_owner): a handle without one \
                 is a new owner on every acquire; release its guard instead",
                self.keys.name
            )));
        };
        let inner = &self.client.inner;
        let not_held = || Error::NotHeld {
            name: self.keys.name.to_string(),
            owner: owner.to_string(),
        };
        // The owner's current hold, whichever it is: a guardless release acts for the owner.
        let mut conn = inner.conn.clone();
        let hold: Option<String> = tokio::time::timeout(
            inner.response_timeout,
            redis::cmd("HGET")
                .arg(&*self.keys.hash)
                .arg(HOLD_FIELD)
                .query_async(&mut conn),
        )
        .await
        .map_err(|_| inner.redis_error(inner.timeout_error()))?
        .map_err(|err| match err.code() {
            Some("WRONGTYPE") => self.wrong_type("not a hash"),
            _ => inner.redis_error(err),
        })?;
        let Some(hold) = hold else {
            return Err(not_held());
        };
        let give_up_at = inner.clock.now() + 2 * inner.response_timeout.as_millis() as Millis;
        match self
            .release_hold(&owner, &hold.clone().into(), give_up_at, None)
            .await?
        {
            ReleaseOutcome::Released { remaining: Some(0) } => {
                inner.registry.unlocked(&self.keys.hash, &owner, &hold);
                Ok(0)
            }
            ReleaseOutcome::Released {
                remaining: Some(remaining),
            } => Ok(remaining),
            // A retry found its lost first attempt applied: that was a partial release (a
            // final one deletes the hash with the record), so holds remain. Read how many.
            ReleaseOutcome::Released { remaining: None } => {
                Ok(self.state().await?.count_of(&owner))
            }
            ReleaseOutcome::NotHeld => Err(not_held()),
            ReleaseOutcome::Unconfirmed => Err(Error::ReleaseUnconfirmed {
                name: self.keys.name.to_string(),
            }),
            ReleaseOutcome::NotALock => Err(self.wrong_type("not a hash")),
            ReleaseOutcome::Failed(_) => Err(inner.redis_error(inner.timeout_error())),
        }
    }

    /// Gives back one hold: the protocol core's [`ReleaseOp`], driven until it is done.
    /// Every retry sends the same request id, so the hold is given back at most once, and
    /// only if it is still the named hold. Retries through lost replies and transient
    /// server states stop at `give_up_at`.
    pub(crate) async fn release_hold(
        &self,
        owner: &Arc<str>,
        hold: &Arc<str>,
        give_up_at: Millis,
        rearm: Option<Rearm>,
    ) -> Result<ReleaseOutcome> {
        let inner = &self.client.inner;
        let mut lane = inner.lanes.enter(&self.keys.hash, owner).await;
        // A pending lost acquire of this owner is resolved first (its hold given back), so
        // this release's record cannot hide it.
        loop {
            match self.resolve_pending(&mut lane).await {
                Ok(Some((granted, _, _))) => {
                    self.release_in_lane(&mut lane, owner, &granted.hold, give_up_at, None)
                        .await?;
                }
                Ok(None) => break,
                Err(err) => {
                    let now = inner.clock.now();
                    lane.state()
                        .on_probe_failure(&err.failure, now, inner.jitter());
                    if now >= give_up_at {
                        return Err(self.client.inner.redis_error(err.error));
                    }
                    let delay = crate::protocol::backoff(1, inner.jitter());
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                }
            }
        }
        self.release_in_lane(&mut lane, owner, hold, give_up_at, rearm)
            .await
    }

    /// The release loop, for a caller that holds the lane.
    pub(super) async fn release_in_lane(
        &self,
        _lane: &mut LaneGuard,
        owner: &Arc<str>,
        hold: &Arc<str>,
        give_up_at: Millis,
        rearm: Option<Rearm>,
    ) -> Result<ReleaseOutcome> {
        let inner = &self.client.inner;
        let mut op = ReleaseOp::new(
            owner.clone(),
            hold.clone(),
            inner.next_request_id(),
            give_up_at,
        )
        .with_rearm(rearm);
        let call = op.call(&self.keys.protocol);
        loop {
            let failure = match inner.run(&call).await {
                Ok(reply) => return op.on_reply(&reply).map_err(Error::UnexpectedReply),
                Err(err) => {
                    tracing::debug!(lock = self.name(), error = %err.error, "release: no reply");
                    err
                }
            };
            match op.on_failure(&failure.failure, inner.clock.now(), inner.jitter()) {
                ReleaseStep::Done(ReleaseOutcome::Failed(_)) => {
                    return Err(inner.redis_error(failure.error));
                }
                ReleaseStep::Done(outcome) => return Ok(outcome),
                ReleaseStep::RetryAt(at) => {
                    tokio::time::sleep_until(inner.clock.instant(at)).await;
                }
            }
        }
    }
}
