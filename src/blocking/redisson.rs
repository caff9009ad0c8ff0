//! The blocking handles of the locks in Redisson's layouts: the async
//! [`crate::RedissonLock`] and [`crate::RedissonRwLock`] with the client's runtime. Every
//! method is its async namesake's, blocking.

use std::sync::Arc;
use std::time::Duration;

use super::guard::{Guard, RedissonGuard, RedissonRwGuard};
use super::{LockClient, Shared};
use crate::error::Result;

/// A blocking lock in Redisson's `RLock` layout; see [`crate::RedissonLock`].
///
/// ```no_run
/// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
/// // Java: redisson.getLock("invoice:42")
/// let invoice = client.redisson_lock("invoice:42")?;
/// let guard = invoice.acquire()?;
/// guard.release()?; // wakes a Java waiter
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedissonLock {
    pub(super) inner: crate::RedissonLock,
    pub(super) shared: Arc<Shared>,
}

impl std::fmt::Debug for RedissonLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl RedissonLock {
    pub(super) fn new(inner: crate::RedissonLock, shared: &Arc<Shared>) -> Self {
        RedissonLock {
            inner,
            shared: shared.clone(),
        }
    }

    fn with(&self, inner: crate::RedissonLock) -> Self {
        Self::new(inner, &self.shared)
    }

    fn guard(&self, guard: crate::RedissonGuard) -> RedissonGuard {
        Guard::new(guard, &self.shared)
    }

    /// The name; see [`crate::RedissonLock::name`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// assert_eq!(client.redisson_lock("invoice:42")?.name(), "invoice:42");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The lock hash, the name itself; see [`crate::RedissonLock::key`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// assert_eq!(client.redisson_lock("invoice:42")?.key(), "invoice:42");
    /// # Ok(()) }
    /// ```
    pub fn key(&self) -> &str {
        self.inner.key()
    }

    /// The waiters' channel; see [`crate::RedissonLock::channel`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.redisson_lock("invoice:42")?;
    /// assert_eq!(lock.channel(), "redisson_lock__channel:{invoice:42}");
    /// # Ok(()) }
    /// ```
    pub fn channel(&self) -> &str {
        self.inner.channel()
    }

    /// The explicit owner of this handle, if any; see [`crate::RedissonLock::owner`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.redisson_lock("invoice:42")?.with_owner("billing-7")?;
    /// assert_eq!(lock.owner(), Some("billing-7"));
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> Option<&str> {
        self.inner.owner()
    }

    /// The client this handle belongs to (another handle of it).
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.redisson_lock("invoice:42")?;
    /// let other = lock.client().redisson_lock("invoice:43")?; // the same client
    /// # Ok(()) }
    /// ```
    pub fn client(&self) -> LockClient {
        LockClient::of(&self.shared)
    }

    /// A handle whose holds have this fixed lease; see
    /// [`crate::RedissonLock::with_lease`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.redisson_lock("invoice:42")?.with_lease(Duration::from_secs(10))?;
    /// # Ok(()) }
    /// ```
    pub fn with_lease(&self, lease: Duration) -> Result<Self> {
        Ok(self.with(self.inner.with_lease(lease)?))
    }

    /// A handle whose holds the watchdog renews; see
    /// [`crate::RedissonLock::with_watchdog`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let fixed = client.redisson_lock("invoice:42")?.with_lease(Duration::from_secs(10))?;
    /// let renewed = fixed.with_watchdog();
    /// # Ok(()) }
    /// ```
    pub fn with_watchdog(&self) -> Self {
        self.with(self.inner.with_watchdog())
    }

    /// A handle of this explicit owner (the hash field); see
    /// [`crate::RedissonLock::with_owner`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.redisson_lock("invoice:42")?.with_owner("billing-7")?;
    /// let guard = lock.acquire()?;
    /// let again = lock.try_acquire()?; // the same owner re-enters
    /// # drop(again); guard.release()?;
    /// # Ok(()) }
    /// ```
    pub fn with_owner(&self, owner: impl Into<String>) -> Result<Self> {
        Ok(self.with(self.inner.with_owner(owner)?))
    }

    /// Blocks until held; see [`crate::RedissonLock::acquire`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.redisson_lock("invoice:42")?.acquire()?;
    /// guard.release()?;
    /// # Ok(()) }
    /// ```
    pub fn acquire(&self) -> Result<RedissonGuard> {
        let guard = self.shared.block_on(self.inner.acquire())??;
        Ok(self.guard(guard))
    }

    /// Tries once; see [`crate::RedissonLock::try_acquire`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// if let Some(guard) = client.redisson_lock("invoice:42")?.try_acquire()? {
    ///     guard.release()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire(&self) -> Result<Option<RedissonGuard>> {
        let guard = self.shared.block_on(self.inner.try_acquire())??;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// Waits at most `wait` (zero: tries once); see
    /// [`crate::RedissonLock::try_acquire_for`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// if let Some(guard) = client.redisson_lock("invoice:42")?.try_acquire_for(Duration::from_secs(5))? {
    ///     guard.release()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_for(&self, wait: Duration) -> Result<Option<RedissonGuard>> {
        let guard = self.shared.block_on(self.inner.try_acquire_for(wait))??;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// See [`crate::RedissonLock::acquire_timeout`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.redisson_lock("invoice:42")?.acquire_timeout(Duration::from_secs(5))?;
    /// guard.release()?;
    /// # Ok(()) }
    /// ```
    pub fn acquire_timeout(&self, wait: Duration) -> Result<RedissonGuard> {
        let guard = self.shared.block_on(self.inner.acquire_timeout(wait))??;
        Ok(self.guard(guard))
    }

    /// See [`crate::RedissonLock::is_locked`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// if client.redisson_lock("invoice:42")?.is_locked()? {
    ///     println!("held");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_locked(&self) -> Result<bool> {
        self.shared.block_on(self.inner.is_locked())?
    }

    /// See [`crate::RedissonLock::remaining_ttl`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// if let Some(ttl) = client.redisson_lock("invoice:42")?.remaining_ttl()? {
    ///     println!("expires in {ttl:?} unless renewed");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn remaining_ttl(&self) -> Result<Option<Duration>> {
        self.shared.block_on(self.inner.remaining_ttl())?
    }

    /// See [`crate::RedissonLock::state`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let state = client.redisson_lock("invoice:42")?.state()?;
    /// println!("{:?}", state.holders);
    /// # Ok(()) }
    /// ```
    pub fn state(&self) -> Result<crate::RedissonLockState> {
        self.shared.block_on(self.inner.state())?
    }

    /// See [`crate::RedissonLock::force_unlock`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// if client.redisson_lock("invoice:42")?.force_unlock()? {
    ///     println!("freed");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn force_unlock(&self) -> Result<bool> {
        self.shared.block_on(self.inner.force_unlock())?
    }

    /// Runs `body` holding the lock and releases; see [`crate::RedissonLock::run`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let total = client.redisson_lock("invoice:42")?.run(|_guard| 42)?;
    /// # Ok(()) }
    /// ```
    pub fn run<T>(&self, body: impl FnOnce(&RedissonGuard) -> T) -> Result<T> {
        let guard = self.acquire()?;
        let out = body(&guard);
        guard.release().map(|()| out)
    }
}

/// A blocking read-write lock in Redisson's `RReadWriteLock` layout; see
/// [`crate::RedissonRwLock`].
///
/// ```no_run
/// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
/// // Java: redisson.getReadWriteLock("catalog")
/// let catalog = client.redisson_rw_lock("catalog")?;
/// let read = catalog.read()?;
/// read.release()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedissonRwLock {
    pub(super) inner: crate::RedissonRwLock,
    pub(super) shared: Arc<Shared>,
}

impl std::fmt::Debug for RedissonRwLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl RedissonRwLock {
    pub(super) fn new(inner: crate::RedissonRwLock, shared: &Arc<Shared>) -> Self {
        RedissonRwLock {
            inner,
            shared: shared.clone(),
        }
    }

    fn with(&self, inner: crate::RedissonRwLock) -> Self {
        Self::new(inner, &self.shared)
    }

    fn guard(&self, guard: crate::RedissonRwGuard) -> RedissonRwGuard {
        Guard::new(guard, &self.shared)
    }

    /// The name; see [`crate::RedissonRwLock::name`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// assert_eq!(client.redisson_rw_lock("catalog")?.name(), "catalog");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The lock hash, the name itself; see [`crate::RedissonRwLock::key`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// assert_eq!(client.redisson_rw_lock("catalog")?.key(), "catalog");
    /// # Ok(()) }
    /// ```
    pub fn key(&self) -> &str {
        self.inner.key()
    }

    /// The readers' and writers' channel; see [`crate::RedissonRwLock::channel`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// assert_eq!(client.redisson_rw_lock("catalog")?.channel(), "redisson_rwlock:{catalog}");
    /// # Ok(()) }
    /// ```
    pub fn channel(&self) -> &str {
        self.inner.channel()
    }

    /// The explicit owner of this handle, if any.
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// assert_eq!(client.redisson_rw_lock("catalog")?.owner(), None);
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> Option<&str> {
        self.inner.owner()
    }

    /// The client this handle belongs to (another handle of it).
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let other = client.redisson_rw_lock("catalog")?.client().redisson_rw_lock("prices")?;
    /// # Ok(()) }
    /// ```
    pub fn client(&self) -> LockClient {
        LockClient::of(&self.shared)
    }

    /// See [`crate::RedissonRwLock::with_lease`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let catalog = client.redisson_rw_lock("catalog")?.with_lease(Duration::from_secs(10))?;
    /// # Ok(()) }
    /// ```
    pub fn with_lease(&self, lease: Duration) -> Result<Self> {
        Ok(self.with(self.inner.with_lease(lease)?))
    }

    /// See [`crate::RedissonRwLock::with_watchdog`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let catalog = client.redisson_rw_lock("catalog")?.with_watchdog();
    /// # Ok(()) }
    /// ```
    pub fn with_watchdog(&self) -> Self {
        self.with(self.inner.with_watchdog())
    }

    /// See [`crate::RedissonRwLock::with_owner`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let catalog = client.redisson_rw_lock("catalog")?.with_owner("importer-2")?;
    /// # Ok(()) }
    /// ```
    pub fn with_owner(&self, owner: impl Into<String>) -> Result<Self> {
        Ok(self.with(self.inner.with_owner(owner)?))
    }

    /// Blocks until a read is held; see [`crate::RedissonRwLock::read`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let read = client.redisson_rw_lock("catalog")?.read()?;
    /// read.release()?;
    /// # Ok(()) }
    /// ```
    pub fn read(&self) -> Result<RedissonRwGuard> {
        let guard = self.shared.block_on(self.inner.read())??;
        Ok(self.guard(guard))
    }

    /// See [`crate::RedissonRwLock::try_read`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// if let Some(read) = client.redisson_rw_lock("catalog")?.try_read()? {
    ///     read.release()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_read(&self) -> Result<Option<RedissonRwGuard>> {
        let guard = self.shared.block_on(self.inner.try_read())??;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// See [`crate::RedissonRwLock::try_read_for`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let catalog = client.redisson_rw_lock("catalog")?;
    /// if let Some(read) = catalog.try_read_for(Duration::from_secs(5))? {
    ///     read.release()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_read_for(&self, wait: Duration) -> Result<Option<RedissonRwGuard>> {
        let guard = self.shared.block_on(self.inner.try_read_for(wait))??;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// See [`crate::RedissonRwLock::read_timeout`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let read = client.redisson_rw_lock("catalog")?.read_timeout(Duration::from_secs(5))?;
    /// read.release()?;
    /// # Ok(()) }
    /// ```
    pub fn read_timeout(&self, wait: Duration) -> Result<RedissonRwGuard> {
        let guard = self.shared.block_on(self.inner.read_timeout(wait))??;
        Ok(self.guard(guard))
    }

    /// Blocks until the write is held; see [`crate::RedissonRwLock::write`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let write = client.redisson_rw_lock("catalog")?.write()?;
    /// write.release()?;
    /// # Ok(()) }
    /// ```
    pub fn write(&self) -> Result<RedissonRwGuard> {
        let guard = self.shared.block_on(self.inner.write())??;
        Ok(self.guard(guard))
    }

    /// See [`crate::RedissonRwLock::try_write`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// if let Some(write) = client.redisson_rw_lock("catalog")?.try_write()? {
    ///     write.release()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_write(&self) -> Result<Option<RedissonRwGuard>> {
        let guard = self.shared.block_on(self.inner.try_write())??;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// See [`crate::RedissonRwLock::try_write_for`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let catalog = client.redisson_rw_lock("catalog")?;
    /// if let Some(write) = catalog.try_write_for(Duration::from_secs(5))? {
    ///     write.release()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_write_for(&self, wait: Duration) -> Result<Option<RedissonRwGuard>> {
        let guard = self.shared.block_on(self.inner.try_write_for(wait))??;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// See [`crate::RedissonRwLock::write_timeout`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let write = client.redisson_rw_lock("catalog")?.write_timeout(Duration::from_secs(5))?;
    /// write.release()?;
    /// # Ok(()) }
    /// ```
    pub fn write_timeout(&self, wait: Duration) -> Result<RedissonRwGuard> {
        let guard = self.shared.block_on(self.inner.write_timeout(wait))??;
        Ok(self.guard(guard))
    }

    /// Runs `body` holding a read, then releases.
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let n = client.redisson_rw_lock("catalog")?.run_read(|_read| 3)?;
    /// # Ok(()) }
    /// ```
    pub fn run_read<T>(&self, body: impl FnOnce(&RedissonRwGuard) -> T) -> Result<T> {
        let guard = self.read()?;
        let out = body(&guard);
        guard.release().map(|()| out)
    }

    /// Runs `body` holding the write, then releases.
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// client.redisson_rw_lock("catalog")?.run_write(|_write| ())?;
    /// # Ok(()) }
    /// ```
    pub fn run_write<T>(&self, body: impl FnOnce(&RedissonRwGuard) -> T) -> Result<T> {
        let guard = self.write()?;
        let out = body(&guard);
        guard.release().map(|()| out)
    }

    /// See [`crate::RedissonRwLock::is_locked`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let held = client.redisson_rw_lock("catalog")?.is_locked()?;
    /// # Ok(()) }
    /// ```
    pub fn is_locked(&self) -> Result<bool> {
        self.shared.block_on(self.inner.is_locked())?
    }

    /// See [`crate::RedissonRwLock::remaining_ttl`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let ttl = client.redisson_rw_lock("catalog")?.remaining_ttl()?;
    /// # Ok(()) }
    /// ```
    pub fn remaining_ttl(&self) -> Result<Option<Duration>> {
        self.shared.block_on(self.inner.remaining_ttl())?
    }

    /// See [`crate::RedissonRwLock::state`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let state = client.redisson_rw_lock("catalog")?.state()?;
    /// # Ok(()) }
    /// ```
    pub fn state(&self) -> Result<crate::RedissonRwLockState> {
        self.shared.block_on(self.inner.state())?
    }

    /// See [`crate::RedissonRwLock::force_unlock`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let freed = client.redisson_rw_lock("catalog")?.force_unlock()?;
    /// # Ok(()) }
    /// ```
    pub fn force_unlock(&self) -> Result<bool> {
        self.shared.block_on(self.inner.force_unlock())?
    }
}
