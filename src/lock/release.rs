//! Giving back a hold: `unlock` by an explicit owner, and the release a guard drives.

use std::sync::Arc;

use crate::drive::drive;
use crate::error::{Error, Result};
use crate::protocol::Millis;
use crate::protocol::release::{Leaving, ReleaseFlow, ReleaseOutcome};

use super::Lock;

impl Lock {
    /// Releases one hold of this handle's owner without a guard: for owners that took the
    /// lock in another process or task under an explicit owner id. Returns the holds
    /// left (0 when the lock was freed and its waiters woken).
    ///
    /// Fails with [`Error::NotHeld`] when the owner holds no hold, and with
    /// [`Error::WrongType`] when the key is not a lock.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// // The worker that took the lock as this owner detached its guard and exited.
    /// let lock = client.lock("migration:v42")?.with_owner("deploy-7f3c9a1e")?;
    /// let left = lock.unlock().await?;
    /// println!("{left} hold(s) left");
    /// # Ok(()) }
    /// ```
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
        let hold = self.current_hold_id().await?;
        let Some(hold) = hold else {
            return Err(not_held());
        };
        // The owner's hold may be in either form here (another process took it): the
        // release that reads both.
        let leaving = Leaving {
            give_up_at: inner.calls.clock.now()
                + 2 * inner.calls.response_timeout.as_millis() as Millis,
            rearm: None,
            last: true,
            first_hold: false,
        };
        match self
            .release_hold(&owner, &hold.clone().into(), &leaving)
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
            ReleaseOutcome::Failed(_) => Err(inner.calls.redis_error(inner.calls.timeout_error())),
        }
    }

    /// Gives back one hold: the protocol core's [`ReleaseFlow`], driven until it is done
    /// in the (lock, owner) lane. An earlier acquire of the owner whose reply was lost is
    /// resolved first; every retry of the release sends the same request id, so the hold
    /// is given back at most once, and only if it is still the named hold. Retries through
    /// lost replies and transient server states stop at `leaving.give_up_at`; the expiry
    /// is re-armed as `leaving.rearm` says, and a hold that may still be a first hold's
    /// string (`leaving.first_hold`) is given back with `lua/release_first.lua` first.
    pub(crate) async fn release_hold(
        &self,
        owner: &Arc<str>,
        hold: &Arc<str>,
        leaving: &Leaving,
    ) -> Result<ReleaseOutcome> {
        let inner = &self.client.inner;
        let mut lane = inner.lanes.enter(&self.keys.hash, owner).await;
        let mut flow = ReleaseFlow::new(
            self.keys.protocol.clone(),
            owner.clone(),
            hold.clone(),
            leaving.give_up_at,
            leaving.rearm,
        )
        .first_hold(leaving.first_hold);
        let driven = drive(&inner.calls, lane.state(), &mut flow).await;
        match driven.outcome {
            Ok(ReleaseOutcome::Failed(_)) => {
                let error = driven
                    .last_error
                    .unwrap_or_else(|| inner.calls.timeout_error());
                Err(inner.calls.redis_error(error))
            }
            Ok(outcome) => Ok(outcome),
            Err(unreadable) => Err(Error::UnexpectedReply(unreadable)),
        }
    }
}
