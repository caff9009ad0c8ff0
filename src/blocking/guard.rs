//! The blocking guard of every kind: [`crate::Guard`] with the client's runtime.

use std::sync::Arc;
use std::time::Duration;

use super::Shared;
use crate::error::{LostReason, Result};
use crate::guard::GuardKind;

/// A blocking guard of any kind; see [`crate::Guard`]. Dropping it releases the hold in
/// the background (the client's runtime), never blocking.
#[must_use = "dropping a guard releases the hold at once"]
pub struct Guard<K: GuardKind> {
    inner: Option<crate::Guard<K>>,
    shared: Arc<Shared>,
}

/// A blocking hold of a [`Lock`](super::Lock).
pub type LockGuard = Guard<crate::Lock>;
/// A blocking hold of an [`RwLock`](super::RwLock): a read or the write.
pub type RwGuard = Guard<crate::RwLock>;
/// A blocking hold of a [`FairLock`](super::FairLock).
pub type FairGuard = Guard<crate::FairLock>;
/// Blocking permits of a [`Semaphore`](super::Semaphore).
pub type SemaphoreGuard = Guard<crate::Semaphore>;

impl<K: GuardKind> std::fmt::Debug for Guard<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.inner {
            Some(guard) => guard.fmt(f),
            None => write!(f, "{}(released)", K::GUARD),
        }
    }
}

impl<K: GuardKind> Guard<K> {
    pub(super) fn new(guard: crate::Guard<K>, shared: &Arc<Shared>) -> Self {
        Guard {
            inner: Some(guard),
            shared: shared.clone(),
        }
    }

    fn get(&self) -> &crate::Guard<K> {
        // Taken only by `release`, `detach` and `drop`, which consume the guard.
        self.inner.as_ref().unwrap_or_else(|| unreachable!())
    }

    /// A blocking guard of another hold of the same client (a re-entry).
    fn wrap<J: GuardKind>(&self, guard: crate::Guard<J>) -> Guard<J> {
        Guard::new(guard, &self.shared)
    }

    /// Gives the hold back; see [`crate::Guard::release`].
    pub fn release(mut self) -> Result<()> {
        // Refuse before taking the guard: a refused call must leave the guard as it was
        // (its drop then releases it on the client's runtime, as for any dropped guard).
        let runtime = self.shared.runtime()?;
        match self.inner.take() {
            Some(guard) => runtime.block_on(guard.release()),
            None => Ok(()),
        }
    }

    /// Leaves the hold in Redis until its lease ends; see [`crate::Guard::detach`].
    pub fn detach(mut self) {
        if let Some(guard) = self.inner.take() {
            guard.detach();
        }
    }

    /// The name of the lock (or semaphore) held.
    pub fn name(&self) -> &str {
        self.get().name()
    }

    /// Whether the hold has been lost; see [`crate::Guard::is_lost`].
    pub fn is_lost(&self) -> bool {
        self.get().is_lost()
    }

    /// Why the hold was lost, if it was.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.get().lost_reason()
    }

    /// A token cancelled when the hold is lost; see [`crate::Guard::lost_token`].
    pub fn lost_token(&self) -> crate::CancellationToken {
        self.get().lost_token()
    }

    /// The fencing token, for a fenced handle.
    pub fn fencing_token(&self) -> Option<u64> {
        self.get().fencing_token()
    }

    /// The owner id of this hold (a secret: see [`crate::Guard::owner`]).
    pub fn owner(&self) -> &str {
        self.get().owner()
    }

    /// The hold's id; see [`crate::Guard::hold_id`].
    pub fn hold_id(&self) -> &str {
        self.get().hold_id()
    }

    /// Whether the watchdog renews the hold (no fixed lease).
    pub fn is_watchdog_leased(&self) -> bool {
        self.get().is_watchdog_leased()
    }

    /// Makes the hold last at least `lease` from now; see [`crate::Guard::extend`].
    pub fn extend(&self, lease: Duration) -> Result<()> {
        self.shared.block_on(self.get().extend(lease))?
    }

    /// How long the hold is known to last; see [`crate::Guard::remaining_lease`].
    pub fn remaining_lease(&self) -> Duration {
        self.get().remaining_lease()
    }
}

impl Guard<crate::Lock> {
    /// A nested hold of the same owner; see [`crate::LockGuard::reenter`].
    pub fn reenter(&self) -> Result<LockGuard> {
        let guard = self.shared.block_on(self.get().reenter())??;
        Ok(self.wrap(guard))
    }

    /// The owner's hold count right after this acquire.
    pub fn hold_count(&self) -> u64 {
        self.get().hold_count()
    }
}

impl Guard<crate::RwLock> {
    /// Whether this is the write hold (else a read).
    pub fn is_write(&self) -> bool {
        self.get().is_write()
    }

    /// Another hold of the same kind by the same owner; see [`crate::RwGuard::reenter`].
    pub fn reenter(&self) -> Result<RwGuard> {
        let guard = self.shared.block_on(self.get().reenter())??;
        Ok(self.wrap(guard))
    }

    /// A read taken through this hold; see [`crate::RwGuard::read`].
    pub fn read(&self) -> Result<RwGuard> {
        let guard = self.shared.block_on(self.get().read())??;
        Ok(self.wrap(guard))
    }

    /// The write taken through this hold; see [`crate::RwGuard::write`].
    pub fn write(&self) -> Result<RwGuard> {
        let guard = self.shared.block_on(self.get().write())??;
        Ok(self.wrap(guard))
    }
}

impl Guard<crate::FairLock> {
    /// A nested hold of the same owner; see [`crate::FairGuard::reenter`].
    pub fn reenter(&self) -> Result<FairGuard> {
        let guard = self.shared.block_on(self.get().reenter())??;
        Ok(self.wrap(guard))
    }
}

impl Guard<crate::Semaphore> {
    /// How many permits this guard holds.
    pub fn permits(&self) -> u32 {
        self.get().permits()
    }

    /// The acquisition's id (its permits' members); see [`crate::SemaphoreGuard::id`].
    pub fn id(&self) -> &str {
        self.get().id()
    }
}

impl<K: GuardKind> Drop for Guard<K> {
    fn drop(&mut self) {
        if let Some(guard) = self.inner.take()
            && let Some(runtime) = &self.shared.runtime
        {
            // The async guard's drop spawns its release on the current runtime: ours.
            let _entered = runtime.enter();
            drop(guard);
        }
    }
}
