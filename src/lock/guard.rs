//! The plain lock's guard: [`LockGuard`] is the one generic guard over [`Lock`], with what
//! only a reentrant lock's hold has (re-entry through the guard, `extend`, the hold
//! count), and how a plain lock's hold is given back.

use std::sync::Arc;
use std::time::Duration;

use super::Lock;
use crate::error::{Error, LostReason, Result};
use crate::guard::{GiveBack, GivingBack, Grant, Guard, GuardKind, sealed};
use crate::protocol::Millis;
use crate::protocol::release::Leaving;
use crate::protocol::release::{Found, ReleaseOutcome};
use crate::watchdog::{HoldEntry, LeaseMode};

/// Proof of one hold of a [`Lock`]: the one [`Guard`] of every kind, with the plain lock's
/// own methods ([`reenter`](Guard::reenter), [`extend`](Guard::extend),
/// [`hold_count`](Guard::hold_count)). See [`Guard`] for what every guard does.
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> Result<(), redis_locks::Error> {
/// let guard = client.lock("nightly-export")?.acquire().await?;
/// tokio::select! {
///     _ = guard.lost() => eprintln!("lock lost: {:?}; stopping", guard.lost_reason()),
///     _ = async { /* long job */ } => {}
/// }
/// guard.release().await?;
/// # Ok(()) }
/// ```
pub type LockGuard = Guard<Lock>;

impl sealed::Sealed for Lock {}

impl GuardKind for Lock {
    /// The owner's hold count right after the acquire.
    type Detail = u64;
    const GUARD: &'static str = "LockGuard";
}

impl GiveBack for Lock {
    fn give_back(&self, owner: Arc<str>, hold: Arc<str>, leaving: Leaving) -> GivingBack {
        let lock = self.clone();
        Box::pin(async move {
            let outcome = lock.release_hold(&owner, &hold, &leaving).await?;
            match Found::of_release(&outcome) {
                Some(found) => Ok(found),
                None => match outcome {
                    ReleaseOutcome::NotALock => Err(lock.wrong_type("not a hash")),
                    other => Err(Error::UnexpectedReply(format!("release failed: {other:?}"))),
                },
            }
        })
    }
}

impl Guard<Lock> {
    /// The guard of a plain lock's hold.
    pub(crate) fn of_lock(
        lock: Lock,
        owner: Arc<str>,
        entry: Arc<HoldEntry>,
        hold: Arc<str>,
        count: u64,
        token: Option<u64>,
        fixed_end: Option<Millis>,
    ) -> Self {
        let grant = Grant {
            client: lock.client.clone(),
            name: lock.keys.name.clone(),
            mode: lock.mode,
            owner,
            hold,
            token,
            entry,
            fixed_end,
            give_back: Arc::new(lock.clone()),
        };
        Guard::new(lock, count, grant)
    }

    /// Enters the lock again as this guard's owner: a nested critical section. The new
    /// guard joins this hold (the owner's count goes up by one, one round trip) with this
    /// guard's token and lease: the watchdog's, or what is left of this guard's fixed
    /// lease, so a nested hold never stretches it. Each guard gives back its own count. It
    /// never waits: the owner already holds the lock.
    ///
    /// This is how nesting works when the handle has no explicit owner: a plain
    /// [`Lock::acquire`] is always a new owner, so a nested one would wait for the outer
    /// hold (and two futures joined in one task exclude each other, as they should).
    /// The new guard is `Send`: hand it to a spawned helper that must work inside the
    /// same critical section.
    ///
    /// Fails with [`Error::LockLost`] when this hold has ended (nothing is taken then).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> Result<(), redis_locks::Error> {
    /// let outer = client.lock("account-42")?.acquire().await?;
    /// let inner = outer.reenter().await?; // nested: count 2
    /// assert_eq!(inner.hold_count(), 2);
    /// inner.release().await?;
    /// outer.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`Lock::acquire`]: a nested hold won after the caller left is given
    /// back at once.
    pub async fn reenter(&self) -> Result<LockGuard> {
        self.ensure_not_lost()?;
        let mut lock = self.handle.as_owner(&self.core.owner);
        if let LeaseMode::Fixed(_) = self.handle.mode {
            // The nested hold ends with this one: re-entering must not stretch a fixed
            // lease (the script only ever lengthens the expiry).
            let left = self.remaining_lease();
            if left < Duration::from_millis(1) {
                return Err(Error::LockLost {
                    name: self.handle.name().to_owned(),
                    reason: LostReason::LeaseElapsed,
                });
            }
            lock = lock.with_lease(left)?;
        }
        match lock.try_acquire().await? {
            Some(guard) if guard.core.hold == self.core.hold => Ok(guard),
            // The owner holds a newer hold (another handle with the same explicit owner
            // took it after this one ended): not this critical section. Dropping the new
            // guard gives back exactly the count this call added.
            Some(_) | None => {
                // The hold is certainly gone: tell every guard of it now, not at the next
                // tick.
                self.tell_gone();
                Err(self.lost_error())
            }
        }
    }

    /// The owner's hold count right after this acquire: 1 for a fresh acquisition, more
    /// for a reentrant one.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let outer = client.lock("account:42")?.acquire().await?;
    /// assert_eq!(outer.hold_count(), 1);
    /// let inner = outer.reenter().await?;
    /// assert_eq!(inner.hold_count(), 2);
    /// # inner.release().await?; outer.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn hold_count(&self) -> u64 {
        self.detail
    }

    /// Whether this acquire re-entered a lock the owner already held.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let outer = client.lock("account:42")?.acquire().await?;
    /// let inner = outer.reenter().await?;
    /// assert!(!outer.is_reentrant() && inner.is_reentrant());
    /// # inner.release().await?; outer.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn is_reentrant(&self) -> bool {
        self.detail > 1
    }
}
