//! The blocking guard of every kind: [`crate::Guard`] with the client's runtime.

use std::sync::Arc;
use std::time::Duration;

use super::Shared;
use crate::error::{LostReason, Result};
use crate::guard::GuardKind;

/// A blocking guard of any kind; see [`crate::Guard`]. Dropping it releases the hold in
/// the background (the client's runtime), never blocking.
///
/// ```no_run
/// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
/// use redis_locks::blocking::{Guard, LockGuard};
/// let guard: LockGuard = client.lock("invoice:42")?.acquire()?;
/// // ... charge the invoice ...
/// guard.release()?;
/// # Ok(()) }
/// ```
#[must_use = "dropping a guard releases the hold at once"]
pub struct Guard<K: GuardKind> {
    inner: Option<crate::Guard<K>>,
    shared: Arc<Shared>,
}

/// A blocking hold of a [`Lock`](super::Lock).
///
/// ```no_run
/// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
/// let guard = client.lock("invoice:42")?.acquire()?;
/// let nested = guard.reenter()?;
/// assert_eq!(nested.hold_count(), 2);
/// nested.release()?;
/// guard.release()?;
/// # Ok(()) }
/// ```
pub type LockGuard = Guard<crate::Lock>;
/// A blocking hold of an [`RwLock`](super::RwLock): a read or the write.
///
/// ```no_run
/// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
/// let write = client.rw_lock("catalog")?.write()?;
/// let read = write.read()?; // downgrade
/// write.release()?;
/// read.release()?;
/// # Ok(()) }
/// ```
pub type RwGuard = Guard<crate::RwLock>;
/// A blocking hold of a [`FairLock`](super::FairLock).
///
/// ```no_run
/// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
/// let turn = client.fair_lock("printer")?.acquire()?;
/// turn.release()?;
/// # Ok(()) }
/// ```
pub type FairGuard = Guard<crate::FairLock>;
/// A blocking hold of a [`RedissonLock`](super::RedissonLock).
///
/// ```no_run
/// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
/// let guard = client.redisson_lock("invoice:42")?.acquire()?;
/// guard.release()?;
/// # Ok(()) }
/// ```
pub type RedissonGuard = Guard<crate::RedissonLock>;
/// A blocking read or write hold of a [`RedissonRwLock`](super::RedissonRwLock).
///
/// ```no_run
/// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
/// let read = client.redisson_rw_lock("catalog")?.read()?;
/// read.release()?;
/// # Ok(()) }
/// ```
pub type RedissonRwGuard = Guard<crate::RedissonRwLock>;
/// Blocking permits of a [`Semaphore`](super::Semaphore).
///
/// ```no_run
/// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
/// let gpus = client.semaphore("gpu-pool")?.acquire(2)?;
/// assert_eq!(gpus.permits(), 2);
/// gpus.release()?;
/// # Ok(()) }
/// ```
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
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::Error;
    /// let guard = client.lock("invoice:42")?.acquire()?;
    /// match guard.release() {
    ///     Ok(()) => {}
    ///     Err(Error::LockLost { reason, .. }) => eprintln!("not protected to the end: {reason}"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
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
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.lock("migration:v42")?.with_owner("deploy-7f3c9a1e")?;
    /// lock.with_lease(Duration::from_secs(600))?.acquire()?.detach();
    /// # Ok(()) }
    /// ```
    pub fn detach(mut self) {
        if let Some(guard) = self.inner.take() {
            guard.detach();
        }
    }

    /// The name of the lock (or semaphore) held.
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.lock("invoice:42")?.acquire()?;
    /// assert_eq!(guard.name(), "invoice:42");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.get().name()
    }

    /// Whether the hold has been lost; see [`crate::Guard::is_lost`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.lock("invoice:42")?.acquire()?;
    /// for batch in 0..100 {
    ///     if guard.is_lost() {
    ///         break; // the rest would not be protected
    ///     }
    ///     // ... process `batch` ...
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.get().is_lost()
    }

    /// Why the hold was lost, if it was.
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.lock("invoice:42")?.acquire()?;
    /// if let Some(reason) = guard.lost_reason() {
    ///     eprintln!("lost: {reason}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.get().lost_reason()
    }

    /// A token cancelled when the hold is lost; see [`crate::Guard::lost_token`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.lock("invoice:42")?.acquire()?;
    /// let stop = guard.lost_token();
    /// let worker = std::thread::spawn(move || {
    ///     while !stop.is_cancelled() {
    ///         // ... one step of the job ...
    ///     }
    /// });
    /// # Ok(()) }
    /// ```
    pub fn lost_token(&self) -> crate::CancellationToken {
        self.get().lost_token()
    }

    /// The fencing token, for a fenced handle.
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.lock("ledger")?.with_fencing().acquire()?;
    /// println!("write with token {:?}", guard.fencing_token());
    /// # Ok(()) }
    /// ```
    pub fn fencing_token(&self) -> Option<u64> {
        self.get().fencing_token()
    }

    /// The owner id of this hold (a secret: see [`crate::Guard::owner`]).
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.lock("invoice:42")?.with_owner("billing-worker-3")?.acquire()?;
    /// assert_eq!(guard.owner(), "billing-worker-3");
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> &str {
        self.get().owner()
    }

    /// The hold's id; see [`crate::Guard::hold_id`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.lock("invoice:42")?.acquire()?;
    /// let nested = guard.reenter()?;
    /// assert_eq!(nested.hold_id(), guard.hold_id());
    /// # Ok(()) }
    /// ```
    pub fn hold_id(&self) -> &str {
        self.get().hold_id()
    }

    /// Whether the watchdog renews the hold (no fixed lease).
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.lock("invoice:42")?.acquire()?;
    /// assert!(guard.is_watchdog_leased());
    /// # Ok(()) }
    /// ```
    pub fn is_watchdog_leased(&self) -> bool {
        self.get().is_watchdog_leased()
    }

    /// Makes the hold last at least `lease` from now; see [`crate::Guard::extend`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.lock("export")?.with_lease(Duration::from_secs(10))?.acquire()?;
    /// // ... the export needs longer than planned:
    /// guard.extend(Duration::from_secs(30))?;
    /// # guard.release()?;
    /// # Ok(()) }
    /// ```
    pub fn extend(&self, lease: Duration) -> Result<()> {
        self.shared.block_on(self.get().extend(lease))?
    }

    /// How long the hold is known to last; see [`crate::Guard::remaining_lease`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.lock("invoice:42")?.acquire()?;
    /// println!("held for {:?} more", guard.remaining_lease());
    /// # Ok(()) }
    /// ```
    pub fn remaining_lease(&self) -> Duration {
        self.get().remaining_lease()
    }
}

impl Guard<crate::Lock> {
    /// A nested hold of the same owner; see [`crate::LockGuard::reenter`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.lock("invoice:42")?.acquire()?;
    /// let nested = guard.reenter()?; // count 2
    /// nested.release()?;
    /// guard.release()?;
    /// # Ok(()) }
    /// ```
    pub fn reenter(&self) -> Result<LockGuard> {
        let guard = self.shared.block_on(self.get().reenter())??;
        Ok(self.wrap(guard))
    }

    /// The owner's hold count right after this acquire.
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.lock("invoice:42")?.acquire()?;
    /// assert_eq!(guard.hold_count(), 1);
    /// # Ok(()) }
    /// ```
    pub fn hold_count(&self) -> u64 {
        self.get().hold_count()
    }

    /// Whether this acquire re-entered a lock the owner already held; see
    /// [`crate::LockGuard::is_reentrant`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let outer = client.lock("account:42")?.acquire()?;
    /// let inner = outer.reenter()?;
    /// assert!(!outer.is_reentrant() && inner.is_reentrant());
    /// # inner.release()?; outer.release()?;
    /// # Ok(()) }
    /// ```
    pub fn is_reentrant(&self) -> bool {
        self.get().is_reentrant()
    }
}

impl Guard<crate::RwLock> {
    /// Read or write; see [`crate::RwGuard::kind`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::RwKind;
    /// let read = client.rw_lock("catalog")?.read()?;
    /// assert_eq!(read.kind(), RwKind::Read);
    /// # read.release()?;
    /// # Ok(()) }
    /// ```
    pub fn kind(&self) -> crate::RwKind {
        self.get().kind()
    }

    /// Whether this is the write hold (else a read).
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let read = client.rw_lock("catalog")?.read()?;
    /// assert!(!read.is_write());
    /// # Ok(()) }
    /// ```
    pub fn is_write(&self) -> bool {
        self.get().is_write()
    }

    /// Another hold of the same kind by the same owner; see [`crate::RwGuard::reenter`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let read = client.rw_lock("catalog")?.read()?;
    /// let nested = read.reenter()?;
    /// nested.release()?;
    /// read.release()?;
    /// # Ok(()) }
    /// ```
    pub fn reenter(&self) -> Result<RwGuard> {
        let guard = self.shared.block_on(self.get().reenter())??;
        Ok(self.wrap(guard))
    }

    /// A read taken through this hold; see [`crate::RwGuard::read`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let write = client.rw_lock("catalog")?.write()?;
    /// let read = write.read()?; // downgrade: no writer gets in between
    /// write.release()?;
    /// read.release()?;
    /// # Ok(()) }
    /// ```
    pub fn read(&self) -> Result<RwGuard> {
        let guard = self.shared.block_on(self.get().read())??;
        Ok(self.wrap(guard))
    }

    /// The write taken through this hold; see [`crate::RwGuard::write`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let write = client.rw_lock("catalog")?.write()?;
    /// let nested = write.write()?; // a re-entered write
    /// nested.release()?;
    /// write.release()?;
    /// # Ok(()) }
    /// ```
    pub fn write(&self) -> Result<RwGuard> {
        let guard = self.shared.block_on(self.get().write())??;
        Ok(self.wrap(guard))
    }
}

impl Guard<crate::FairLock> {
    /// A nested hold of the same owner; see [`crate::FairGuard::reenter`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let turn = client.fair_lock("printer")?.acquire()?;
    /// let nested = turn.reenter()?; // never queues
    /// nested.release()?;
    /// turn.release()?;
    /// # Ok(()) }
    /// ```
    pub fn reenter(&self) -> Result<FairGuard> {
        let guard = self.shared.block_on(self.get().reenter())??;
        Ok(self.wrap(guard))
    }
}

impl Guard<crate::RedissonLock> {
    /// A nested hold of the same owner; see [`crate::RedissonGuard::reenter`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.redisson_lock("invoice:42")?.acquire()?;
    /// let nested = guard.reenter()?; // the owner's count is 2
    /// nested.release()?;
    /// guard.release()?;
    /// # Ok(()) }
    /// ```
    pub fn reenter(&self) -> Result<RedissonGuard> {
        let guard = self.shared.block_on(self.get().reenter())??;
        Ok(self.wrap(guard))
    }
}

impl Guard<crate::RedissonRwLock> {
    /// Read or write; see [`crate::RedissonRwGuard::kind`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let read = client.redisson_rw_lock("catalog")?.read()?;
    /// assert_eq!(read.kind(), redis_locks::RwKind::Read);
    /// # read.release()?;
    /// # Ok(()) }
    /// ```
    pub fn kind(&self) -> crate::RwKind {
        self.get().kind()
    }

    /// Another hold of the same kind for the same owner; see
    /// [`crate::RedissonRwGuard::reenter`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let read = client.redisson_rw_lock("catalog")?.read()?;
    /// let nested = read.reenter()?;
    /// nested.release()?;
    /// read.release()?;
    /// # Ok(()) }
    /// ```
    pub fn reenter(&self) -> Result<RedissonRwGuard> {
        let guard = self.shared.block_on(self.get().reenter())??;
        Ok(self.wrap(guard))
    }

    /// A read through this hold (a downgrade through a write); see
    /// [`crate::RedissonRwGuard::read`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let write = client.redisson_rw_lock("catalog")?.write()?;
    /// let read = write.read()?;
    /// write.release()?;
    /// read.release()?;
    /// # Ok(()) }
    /// ```
    pub fn read(&self) -> Result<RedissonRwGuard> {
        let guard = self.shared.block_on(self.get().read())??;
        Ok(self.wrap(guard))
    }

    /// A write re-entry through this write hold; see [`crate::RedissonRwGuard::write`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let write = client.redisson_rw_lock("catalog")?.write()?;
    /// let nested = write.write()?;
    /// nested.release()?;
    /// write.release()?;
    /// # Ok(()) }
    /// ```
    pub fn write(&self) -> Result<RedissonRwGuard> {
        let guard = self.shared.block_on(self.get().write())??;
        Ok(self.wrap(guard))
    }
}

impl Guard<crate::Semaphore> {
    /// How many permits this guard holds.
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// if let Some(all) = client.semaphore("gpu-pool")?.drain_permits()? {
    ///     println!("took all {} free permits", all.permits());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn permits(&self) -> u32 {
        self.get().permits()
    }

    /// The acquisition's id (its permits' members); see [`crate::SemaphoreGuard::id`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let pool = client.semaphore("gpu-pool")?;
    /// let permit = pool.acquire(1)?;
    /// let id = permit.id().to_owned();
    /// permit.detach();
    /// // ... later, possibly in another process:
    /// pool.release_permits(&id, 1)?;
    /// # Ok(()) }
    /// ```
    pub fn id(&self) -> &str {
        self.get().id()
    }
}

impl<K: GuardKind> Drop for Guard<K> {
    fn drop(&mut self) {
        if let Some(guard) = self.inner.take() {
            if let Some(runtime) = &self.shared.runtime {
                // The async guard's drop spawns its release on the current runtime: ours.
                let _entered = runtime.enter();
                drop(guard);
            }
        }
    }
}
