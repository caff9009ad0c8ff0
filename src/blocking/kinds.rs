//! The blocking handles of the other kinds: the read-write lock, the fair lock, the
//! semaphore and the count-down latch, each the async handle with the client's runtime.
//! Every method is its async namesake's, blocking.

use std::sync::Arc;
use std::time::Duration;

use super::guard::{FairGuard, Guard, RwGuard, SemaphoreGuard};
use super::{LockClient, Shared};
use crate::error::Result;
use crate::{FairLockState, RwLockState, SemaphoreState};

/// The options every lock-like handle shares (`with_lease`, `with_watchdog`, ...), each
/// returning a new blocking handle around the async one's result.
macro_rules! options {
    ($handle:ident) => {
        impl $handle {
            pub(super) fn new(inner: crate::$handle, shared: &Arc<Shared>) -> Self {
                $handle {
                    inner,
                    shared: shared.clone(),
                }
            }

            fn with(&self, inner: crate::$handle) -> Self {
                Self::new(inner, &self.shared)
            }

            fn guard<K: crate::GuardKind>(&self, guard: crate::Guard<K>) -> Guard<K> {
                Guard::new(guard, &self.shared)
            }

            /// The name.
            ///
            /// ```no_run
            /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
            /// assert_eq!(client.rw_lock("catalog")?.name(), "catalog");
            /// assert_eq!(client.fair_lock("printer")?.name(), "printer");
            /// assert_eq!(client.semaphore("gpu-pool")?.name(), "gpu-pool");
            /// # Ok(()) }
            /// ```
            pub fn name(&self) -> &str {
                self.inner.name()
            }

            /// A handle whose holds have this fixed lease; see the async handle's
            /// `with_lease`.
            ///
            /// ```no_run
            /// # use std::time::Duration;
            /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
            /// // Every read-write, fair and semaphore handle takes the same options.
            /// let lease = Duration::from_secs(60);
            /// let catalog = client.rw_lock("catalog")?.with_lease(lease)?;
            /// let printer = client.fair_lock("printer")?.with_lease(lease)?;
            /// let pool = client.semaphore("gpu-pool")?.with_lease(lease)?;
            /// let read = catalog.read()?; // expires 60 s after it was taken
            /// # read.release()?;
            /// # Ok(()) }
            /// ```
            pub fn with_lease(&self, lease: Duration) -> Result<Self> {
                Ok(self.with(self.inner.with_lease(lease)?))
            }

            /// A handle whose holds the watchdog renews; see the async handle's
            /// `with_watchdog`.
            ///
            /// ```no_run
            /// # use std::time::Duration;
            /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
            /// let lease = Duration::from_secs(60);
            /// let catalog = client.rw_lock("catalog")?.with_lease(lease)?.with_watchdog();
            /// let printer = client.fair_lock("printer")?.with_lease(lease)?.with_watchdog();
            /// let pool = client.semaphore("gpu-pool")?.with_lease(lease)?.with_watchdog();
            /// let gpu = pool.acquire(1)?; // renewed while held
            /// # gpu.release()?;
            /// # Ok(()) }
            /// ```
            pub fn with_watchdog(&self) -> Self {
                self.with(self.inner.with_watchdog())
            }
        }

        impl std::fmt::Debug for $handle {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.inner.fmt(f)
            }
        }
    };
}

/// The options of the handles whose holds have owners and may be fenced.
macro_rules! owners {
    ($handle:ident) => {
        impl $handle {
            /// A handle of this explicit owner; see the async handle's `with_owner`.
            ///
            /// ```no_run
            /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
            /// let catalog = client.rw_lock("catalog")?.with_owner("importer-2")?;
            /// let printer = client.fair_lock("printer")?.with_owner("spooler-1")?;
            /// let turn = printer.acquire()?;
            /// let again = printer.try_acquire()?; // the same owner re-enters without queueing
            /// # drop(again); turn.release()?;
            /// # Ok(()) }
            /// ```
            pub fn with_owner(&self, owner: impl Into<String>) -> Result<Self> {
                Ok(self.with(self.inner.with_owner(owner)?))
            }

            /// A handle whose holds carry fencing tokens; see the async handle's
            /// `with_fencing`.
            ///
            /// ```no_run
            /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
            /// let write = client.rw_lock("catalog")?.with_fencing().write()?;
            /// let turn = client.fair_lock("printer")?.with_fencing().acquire()?;
            /// println!("tokens {:?} and {:?}", write.fencing_token(), turn.fencing_token());
            /// # write.release()?; turn.release()?;
            /// # Ok(()) }
            /// ```
            pub fn with_fencing(&self) -> Self {
                self.with(self.inner.with_fencing())
            }

            /// The explicit owner of this handle, if any; see the async handle's `owner`.
            ///
            /// ```no_run
            /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
            /// let catalog = client.rw_lock("catalog")?;
            /// assert_eq!(catalog.owner(), None);
            /// assert_eq!(catalog.with_owner("importer-2")?.owner(), Some("importer-2"));
            /// let printer = client.fair_lock("printer")?.with_owner("spooler-1")?;
            /// assert_eq!(printer.owner(), Some("spooler-1"));
            /// # Ok(()) }
            /// ```
            pub fn owner(&self) -> Option<&str> {
                self.inner.owner()
            }

            /// The client this handle belongs to (another handle of it); see the async
            /// handle's `client`.
            ///
            /// ```no_run
            /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
            /// let catalog = client.rw_lock("catalog")?;
            /// let prices = catalog.client().rw_lock("prices")?; // the same client
            /// println!("queued through client {}", client.fair_lock("printer")?.client().id());
            /// # Ok(()) }
            /// ```
            pub fn client(&self) -> LockClient {
                LockClient::of(&self.shared)
            }
        }
    };
}

/// A blocking read-write lock; see [`crate::RwLock`].
///
/// ```no_run
/// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
/// let catalog = client.rw_lock("catalog")?;
/// let read = catalog.read()?;
/// read.release()?;
/// let write = catalog.write()?; // waits for the readers to leave
/// write.release()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RwLock {
    pub(super) inner: crate::RwLock,
    pub(super) shared: Arc<Shared>,
}

options!(RwLock);
owners!(RwLock);

impl RwLock {
    /// The sorted set of its write holds; see [`crate::RwLock::write_key`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let catalog = client.rw_lock("catalog")?;
    /// println!("writes in {}, reads in {}", catalog.write_key(), catalog.read_key());
    /// # Ok(()) }
    /// ```
    pub fn write_key(&self) -> &str {
        self.inner.write_key()
    }

    /// The sorted set of its read holds; see [`crate::RwLock::read_key`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let catalog = client.rw_lock("catalog")?;
    /// println!("read holds are the members of {}", catalog.read_key());
    /// # Ok(()) }
    /// ```
    pub fn read_key(&self) -> &str {
        self.inner.read_key()
    }

    /// Blocks until a read is held; see [`crate::RwLock::read`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let read = client.rw_lock("catalog")?.read()?;
    /// // ... read the catalog ...
    /// read.release()?;
    /// # Ok(()) }
    /// ```
    pub fn read(&self) -> Result<RwGuard> {
        let guard = self.shared.block_on(self.inner.read())??;
        Ok(self.guard(guard))
    }

    /// Tries once; see [`crate::RwLock::try_read`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// match client.rw_lock("catalog")?.try_read()? {
    ///     Some(read) => read.release()?,
    ///     None => println!("a writer holds or waits; serve the cached copy"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_read(&self) -> Result<Option<RwGuard>> {
        let guard = self.shared.block_on(self.inner.try_read())??;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// Waits at most `wait` (zero: tries once); see [`crate::RwLock::try_read_for`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// if let Some(read) = client.rw_lock("catalog")?.try_read_for(Duration::from_millis(200))? {
    ///     read.release()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_read_for(&self, wait: Duration) -> Result<Option<RwGuard>> {
        let guard = self.shared.block_on(self.inner.try_read_for(wait))??;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// Blocks until the write is held; see [`crate::RwLock::write`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let write = client.rw_lock("catalog")?.write()?;
    /// // ... import the new prices ...
    /// write.release()?;
    /// # Ok(()) }
    /// ```
    pub fn write(&self) -> Result<RwGuard> {
        let guard = self.shared.block_on(self.inner.write())??;
        Ok(self.guard(guard))
    }

    /// Tries once; see [`crate::RwLock::try_write`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// match client.rw_lock("catalog")?.try_write()? {
    ///     Some(write) => write.release()?,
    ///     None => println!("in use; import later"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_write(&self) -> Result<Option<RwGuard>> {
        let guard = self.shared.block_on(self.inner.try_write())??;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// Waits at most `wait` (zero: tries once); see [`crate::RwLock::try_write_for`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// if let Some(write) = client.rw_lock("catalog")?.try_write_for(Duration::from_secs(5))? {
    ///     write.release()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_write_for(&self, wait: Duration) -> Result<Option<RwGuard>> {
        let guard = self.shared.block_on(self.inner.try_write_for(wait))??;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// Runs `body` holding a read and releases; [`Error::LockLost`](crate::Error::LockLost)
    /// if the hold was lost before the release (a blocking body cannot be stopped: check
    /// [`Guard::is_lost`] at safe points).
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let price = client.rw_lock("catalog")?.run_read(|_read| {
    ///     // ... look the price up ...
    ///     1999
    /// })?;
    /// # Ok(()) }
    /// ```
    pub fn run_read<T>(&self, body: impl FnOnce(&RwGuard) -> T) -> Result<T> {
        let guard = self.read()?;
        let out = body(&guard);
        guard.release().map(|()| out)
    }

    /// Runs `body` holding the write; see [`RwLock::run_read`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// client.rw_lock("catalog")?.run_write(|write| {
    ///     // ... import; check `write.is_lost()` between batches ...
    /// })?;
    /// # Ok(()) }
    /// ```
    pub fn run_write<T>(&self, body: impl FnOnce(&RwGuard) -> T) -> Result<T> {
        let guard = self.write()?;
        let out = body(&guard);
        guard.release().map(|()| out)
    }

    /// See [`crate::RwLock::read_timeout`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::Error;
    /// match client.rw_lock("catalog")?.read_timeout(Duration::from_millis(500)) {
    ///     Ok(read) => read.release()?,
    ///     Err(Error::Timeout { .. }) => println!("an import is running"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn read_timeout(&self, wait: Duration) -> Result<RwGuard> {
        let guard = self.shared.block_on(self.inner.read_timeout(wait))??;
        Ok(self.guard(guard))
    }

    /// See [`crate::RwLock::write_timeout`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::Error;
    /// match client.rw_lock("catalog")?.write_timeout(Duration::from_secs(10)) {
    ///     Ok(write) => write.release()?,
    ///     Err(Error::Timeout { .. }) => println!("import postponed"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn write_timeout(&self, wait: Duration) -> Result<RwGuard> {
        let guard = self.shared.block_on(self.inner.write_timeout(wait))??;
        Ok(self.guard(guard))
    }

    /// See [`crate::RwLock::is_locked`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// if client.rw_lock("catalog")?.is_locked()? {
    ///     println!("in use");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_locked(&self) -> Result<bool> {
        self.shared.block_on(self.inner.is_locked())?
    }

    /// See [`crate::RwLock::remaining_ttl`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// if let Some(ttl) = client.rw_lock("catalog")?.remaining_ttl()? {
    ///     println!("the latest hold expires in {ttl:?} unless renewed");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn remaining_ttl(&self) -> Result<Option<Duration>> {
        self.shared.block_on(self.inner.remaining_ttl())?
    }

    /// See [`crate::RwLock::state`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let state = client.rw_lock("catalog")?.state()?;
    /// println!("{} read(s), {} write(s)", state.reads, state.writes);
    /// # Ok(()) }
    /// ```
    pub fn state(&self) -> Result<RwLockState> {
        self.shared.block_on(self.inner.state())?
    }

    /// See [`crate::RwLock::force_unlock`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// if client.rw_lock("catalog")?.force_unlock()? {
    ///     println!("cleared every hold");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn force_unlock(&self) -> Result<bool> {
        self.shared.block_on(self.inner.force_unlock())?
    }
}

/// A blocking fair lock; see [`crate::FairLock`].
///
/// ```no_run
/// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
/// let printer = client.fair_lock("printer")?;
/// let turn = printer.acquire()?; // in arrival order
/// turn.release()?;               // wakes the next in line
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct FairLock {
    pub(super) inner: crate::FairLock,
    pub(super) shared: Arc<Shared>,
}

options!(FairLock);
owners!(FairLock);

impl FairLock {
    /// The sorted set of its holds; see [`crate::FairLock::key`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let printer = client.fair_lock("printer")?;
    /// println!("holds in {}, queue in {}", printer.key(), printer.queue_key());
    /// # Ok(()) }
    /// ```
    pub fn key(&self) -> &str {
        self.inner.key()
    }

    /// The sorted set of its queue; see [`crate::FairLock::queue_key`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let printer = client.fair_lock("printer")?;
    /// println!("waiters queue in {}", printer.queue_key());
    /// # Ok(()) }
    /// ```
    pub fn queue_key(&self) -> &str {
        self.inner.queue_key()
    }

    /// Blocks until held, in turn; see [`crate::FairLock::acquire`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let turn = client.fair_lock("printer")?.acquire()?;
    /// // ... print ...
    /// turn.release()?;
    /// # Ok(()) }
    /// ```
    pub fn acquire(&self) -> Result<FairGuard> {
        let guard = self.shared.block_on(self.inner.acquire())??;
        Ok(self.guard(guard))
    }

    /// Tries once; see [`crate::FairLock::try_acquire`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// if let Some(turn) = client.fair_lock("printer")?.try_acquire()? {
    ///     turn.release()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire(&self) -> Result<Option<FairGuard>> {
        let guard = self.shared.block_on(self.inner.try_acquire())??;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// Waits at most `wait` (zero: tries once); see [`crate::FairLock::try_acquire_for`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// match client.fair_lock("printer")?.try_acquire_for(Duration::from_secs(30))? {
    ///     Some(turn) => turn.release()?,
    ///     None => println!("our turn did not come; we left the queue"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_for(&self, wait: Duration) -> Result<Option<FairGuard>> {
        let guard = self.shared.block_on(self.inner.try_acquire_for(wait))??;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// Runs `body` holding the lock and releases; see [`RwLock::run_read`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let pages = client.fair_lock("printer")?.run(|_turn| {
    ///     // ... print ...
    ///     12
    /// })?;
    /// # Ok(()) }
    /// ```
    pub fn run<T>(&self, body: impl FnOnce(&FairGuard) -> T) -> Result<T> {
        let guard = self.acquire()?;
        let out = body(&guard);
        guard.release().map(|()| out)
    }

    /// See [`crate::FairLock::acquire_timeout`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::Error;
    /// match client.fair_lock("printer")?.acquire_timeout(Duration::from_secs(30)) {
    ///     Ok(turn) => turn.release()?,
    ///     Err(Error::Timeout { .. }) => println!("printer busy"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn acquire_timeout(&self, wait: Duration) -> Result<FairGuard> {
        let guard = self.shared.block_on(self.inner.acquire_timeout(wait))??;
        Ok(self.guard(guard))
    }

    /// See [`crate::FairLock::is_locked`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// if client.fair_lock("printer")?.is_locked()? {
    ///     println!("printing");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_locked(&self) -> Result<bool> {
        self.shared.block_on(self.inner.is_locked())?
    }

    /// See [`crate::FairLock::remaining_ttl`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// if let Some(ttl) = client.fair_lock("printer")?.remaining_ttl()? {
    ///     println!("the hold expires in {ttl:?} unless renewed");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn remaining_ttl(&self) -> Result<Option<Duration>> {
        self.shared.block_on(self.inner.remaining_ttl())?
    }

    /// See [`crate::FairLock::state`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let state = client.fair_lock("printer")?.state()?;
    /// println!("{} waiting", state.waiters);
    /// # Ok(()) }
    /// ```
    pub fn state(&self) -> Result<FairLockState> {
        self.shared.block_on(self.inner.state())?
    }

    /// See [`crate::FairLock::force_unlock`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// if client.fair_lock("printer")?.force_unlock()? {
    ///     println!("freed; the head of the queue is woken");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn force_unlock(&self) -> Result<bool> {
        self.shared.block_on(self.inner.force_unlock())?
    }
}

/// A blocking semaphore; see [`crate::Semaphore`].
///
/// ```no_run
/// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
/// let pool = client.semaphore("gpu-pool")?;
/// pool.try_set_permits(4)?;
/// let gpus = pool.acquire(2)?;
/// gpus.release()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Semaphore {
    inner: crate::Semaphore,
    shared: Arc<Shared>,
}

options!(Semaphore);

impl Semaphore {
    /// Its size-and-reservation hash key; see [`crate::Semaphore::key`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let pool = client.semaphore("gpu-pool")?;
    /// println!("size in {}, permits in {}", pool.key(), pool.permits_key());
    /// # Ok(()) }
    /// ```
    pub fn key(&self) -> &str {
        self.inner.key()
    }

    /// Its permits key (a sorted set); see [`crate::Semaphore::permits_key`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let pool = client.semaphore("gpu-pool")?;
    /// println!("permits in use are the members of {}", pool.permits_key());
    /// # Ok(()) }
    /// ```
    pub fn permits_key(&self) -> &str {
        self.inner.permits_key()
    }

    /// See [`crate::Semaphore::set_permits`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let pool = client.semaphore("gpu-pool")?;
    /// let previous = pool.set_permits(6)?; // two GPUs were installed
    /// println!("resized from {previous:?} to 6");
    /// # Ok(()) }
    /// ```
    pub fn set_permits(&self, size: u64) -> Result<Option<u64>> {
        self.shared.block_on(self.inner.set_permits(size))?
    }

    /// See [`crate::Semaphore::try_set_permits`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// if client.semaphore("gpu-pool")?.try_set_permits(4)? {
    ///     println!("configured the pool");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_set_permits(&self, size: u64) -> Result<bool> {
        self.shared.block_on(self.inner.try_set_permits(size))?
    }

    /// See [`crate::Semaphore::add_permits`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let size = client.semaphore("gpu-pool")?.add_permits(2)?;
    /// println!("{size} permits now");
    /// # Ok(()) }
    /// ```
    pub fn add_permits(&self, delta: i64) -> Result<u64> {
        self.shared.block_on(self.inner.add_permits(delta))?
    }

    /// Blocks until `n` permits are held; see [`crate::Semaphore::acquire`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let gpus = client.semaphore("gpu-pool")?.acquire(2)?;
    /// // ... train on two GPUs ...
    /// gpus.release()?;
    /// # Ok(()) }
    /// ```
    pub fn acquire(&self, n: u32) -> Result<SemaphoreGuard> {
        let guard = self.shared.block_on(self.inner.acquire(n))??;
        Ok(self.guard(guard))
    }

    /// Tries once; see [`crate::Semaphore::try_acquire`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// match client.semaphore("gpu-pool")?.try_acquire(1)? {
    ///     Some(gpu) => gpu.release()?,
    ///     None => println!("every GPU is busy"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire(&self, n: u32) -> Result<Option<SemaphoreGuard>> {
        let guard = self.shared.block_on(self.inner.try_acquire(n))??;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// Waits at most `wait` (zero: tries once); see [`crate::Semaphore::try_acquire_for`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// if let Some(gpu) = client.semaphore("gpu-pool")?.try_acquire_for(1, Duration::from_secs(5))? {
    ///     gpu.release()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_for(&self, n: u32, wait: Duration) -> Result<Option<SemaphoreGuard>> {
        let guard = self
            .shared
            .block_on(self.inner.try_acquire_for(n, wait))??;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// Runs `body` holding `n` permits and gives them back; see [`RwLock::run_read`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let loss = client.semaphore("gpu-pool")?.run(2, |_gpus| {
    ///     // ... train on two GPUs ...
    ///     0.03
    /// })?;
    /// # Ok(()) }
    /// ```
    pub fn run<T>(&self, n: u32, body: impl FnOnce(&SemaphoreGuard) -> T) -> Result<T> {
        let guard = self.acquire(n)?;
        let out = body(&guard);
        guard.release().map(|()| out)
    }

    /// See [`crate::Semaphore::acquire_timeout`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::Error;
    /// match client.semaphore("gpu-pool")?.acquire_timeout(1, Duration::from_secs(60)) {
    ///     Ok(gpu) => gpu.release()?,
    ///     Err(Error::Timeout { .. }) => println!("no GPU within a minute"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn acquire_timeout(&self, n: u32, wait: Duration) -> Result<SemaphoreGuard> {
        let guard = self
            .shared
            .block_on(self.inner.acquire_timeout(n, wait))??;
        Ok(self.guard(guard))
    }

    /// See [`crate::Semaphore::state`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let state = client.semaphore("gpu-pool")?.state()?;
    /// println!("{} free", state.available());
    /// # Ok(()) }
    /// ```
    pub fn state(&self) -> Result<SemaphoreState> {
        self.shared.block_on(self.inner.state())?
    }

    /// Takes every free permit at once; see [`crate::Semaphore::drain_permits`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// if let Some(all) = client.semaphore("gpu-pool")?.drain_permits()? {
    ///     println!("took {} permits for maintenance", all.permits());
    ///     all.release()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn drain_permits(&self) -> Result<Option<SemaphoreGuard>> {
        let guard = self.shared.block_on(self.inner.drain_permits())??;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// Gives back permits by id, without their guard; see
    /// [`crate::Semaphore::release_permits`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let pool = client.semaphore("gpu-pool")?;
    /// let permit = pool.acquire(1)?;
    /// let id = permit.id().to_owned();
    /// permit.detach(); // handed to a worker by id
    /// // ... in the worker, when done:
    /// pool.release_permits(&id, 1)?;
    /// # Ok(()) }
    /// ```
    pub fn release_permits(&self, id: &str, n: u32) -> Result<bool> {
        self.shared.block_on(self.inner.release_permits(id, n))?
    }

    /// See [`crate::Semaphore::force_release`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let freed = client.semaphore("gpu-pool")?.force_release()?;
    /// println!("took back {freed} permit(s)");
    /// # Ok(()) }
    /// ```
    pub fn force_release(&self) -> Result<u64> {
        self.shared.block_on(self.inner.force_release())?
    }
}

/// A blocking count-down latch; see [`crate::CountDownLatch`].
///
/// ```no_run
/// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
/// let latch = client.latch("import:2024-06")?;
/// latch.try_set_count(3)?;
/// // ... each of three workers calls `latch.count_down()?` when done ...
/// latch.wait()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct CountDownLatch {
    inner: crate::CountDownLatch,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for CountDownLatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl CountDownLatch {
    pub(super) fn new(inner: crate::CountDownLatch, shared: &Arc<Shared>) -> Self {
        CountDownLatch {
            inner,
            shared: shared.clone(),
        }
    }

    /// The name.
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let latch = client.latch("import:2024-06")?;
    /// assert_eq!(latch.name(), "import:2024-06");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The Redis key of the latch; see [`crate::CountDownLatch::key`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let latch = client.latch("import:2024-06")?;
    /// println!("the count lives in {}", latch.key());
    /// # Ok(()) }
    /// ```
    pub fn key(&self) -> &str {
        self.inner.key()
    }

    /// Whether the latch is kept in Redisson's layout; see
    /// [`crate::CountDownLatch::is_redisson`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// assert!(client.redisson_latch("import:2024-06")?.is_redisson());
    /// # Ok(()) }
    /// ```
    pub fn is_redisson(&self) -> bool {
        self.inner.is_redisson()
    }

    /// A handle whose waiters check the count at least every `interval`; see
    /// [`crate::CountDownLatch::with_recheck`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let latch = client.latch("import:2024-06")?.with_recheck(Duration::from_millis(100))?;
    /// latch.wait()?; // checks at least every 100 ms, even if a wake-up message is lost
    /// # Ok(()) }
    /// ```
    pub fn with_recheck(&self, interval: Duration) -> Result<Self> {
        Ok(Self::new(self.inner.with_recheck(interval)?, &self.shared))
    }

    /// See [`crate::CountDownLatch::try_set_count`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let latch = client.latch("import:2024-06")?;
    /// if !latch.try_set_count(3)? {
    ///     println!("already closed: {} left", latch.count()?);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_set_count(&self, count: u64) -> Result<bool> {
        self.shared.block_on(self.inner.try_set_count(count))?
    }

    /// See [`crate::CountDownLatch::count_down`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// if client.latch("import:2024-06")?.count_down()? == 0 {
    ///     println!("that was the last worker");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn count_down(&self) -> Result<u64> {
        self.shared.block_on(self.inner.count_down())?
    }

    /// See [`crate::CountDownLatch::count`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let latch = client.latch("import:2024-06")?;
    /// println!("{} file(s) still importing", latch.count()?);
    /// # Ok(()) }
    /// ```
    pub fn count(&self) -> Result<u64> {
        self.shared.block_on(self.inner.count())?
    }

    /// Blocks until the latch opens; see [`crate::CountDownLatch::wait`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let latch = client.latch("import:2024-06")?;
    /// latch.wait()?; // blocks until every worker has counted down
    /// println!("import complete");
    /// # Ok(()) }
    /// ```
    pub fn wait(&self) -> Result<()> {
        self.shared.block_on(self.inner.wait())?
    }

    /// Waits at most `timeout`: whether it opened; see [`crate::CountDownLatch::wait_for`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let latch = client.latch("import:2024-06")?;
    /// if !latch.wait_for(Duration::from_secs(600))? {
    ///     eprintln!("not done after 10 min");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn wait_for(&self, timeout: Duration) -> Result<bool> {
        self.shared.block_on(self.inner.wait_for(timeout))?
    }

    /// See [`crate::CountDownLatch::delete`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// if client.latch("import:2024-06")?.delete()? {
    ///     println!("opened early; the waiters are woken");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn delete(&self) -> Result<bool> {
        self.shared.block_on(self.inner.delete())?
    }
}
