//! The blocking handles of the other kinds: the read-write lock, the fair lock, the
//! semaphore and the count-down latch, each the async handle with the client's runtime.
//! Every method is its async namesake's, blocking.

use std::sync::Arc;
use std::time::Duration;

use super::Shared;
use super::guard::{FairGuard, Guard, RwGuard, SemaphoreGuard};
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
            pub fn name(&self) -> &str {
                self.inner.name()
            }

            /// A handle whose holds have this fixed lease; see the async handle's
            /// `with_lease`.
            pub fn with_lease(&self, lease: Duration) -> Result<Self> {
                Ok(self.with(self.inner.with_lease(lease)?))
            }

            /// A handle whose holds the watchdog renews; see the async handle's
            /// `with_watchdog`.
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
            pub fn with_owner(&self, owner: impl Into<String>) -> Result<Self> {
                Ok(self.with(self.inner.with_owner(owner)?))
            }

            /// A handle whose holds carry fencing tokens; see the async handle's
            /// `with_fencing`.
            pub fn with_fencing(&self) -> Self {
                self.with(self.inner.with_fencing())
            }
        }
    };
}

/// A blocking read-write lock; see [`crate::RwLock`].
#[derive(Clone)]
pub struct RwLock {
    pub(super) inner: crate::RwLock,
    pub(super) shared: Arc<Shared>,
}

options!(RwLock);
owners!(RwLock);

impl RwLock {
    /// Blocks until a read is held; see [`crate::RwLock::read`].
    pub fn read(&self) -> Result<RwGuard> {
        let guard = self.shared.block_on(self.inner.read())??;
        Ok(self.guard(guard))
    }

    /// Tries once; see [`crate::RwLock::try_read`].
    pub fn try_read(&self) -> Result<Option<RwGuard>> {
        let guard = self.shared.block_on(self.inner.try_read())??;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// Waits at most `wait` (zero: tries once); see [`crate::RwLock::try_read_for`].
    pub fn try_read_for(&self, wait: Duration) -> Result<Option<RwGuard>> {
        let guard = self.shared.block_on(self.inner.try_read_for(wait))??;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// Blocks until the write is held; see [`crate::RwLock::write`].
    pub fn write(&self) -> Result<RwGuard> {
        let guard = self.shared.block_on(self.inner.write())??;
        Ok(self.guard(guard))
    }

    /// Tries once; see [`crate::RwLock::try_write`].
    pub fn try_write(&self) -> Result<Option<RwGuard>> {
        let guard = self.shared.block_on(self.inner.try_write())??;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// Waits at most `wait` (zero: tries once); see [`crate::RwLock::try_write_for`].
    pub fn try_write_for(&self, wait: Duration) -> Result<Option<RwGuard>> {
        let guard = self.shared.block_on(self.inner.try_write_for(wait))??;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// Runs `body` holding a read and releases; [`Error::LockLost`](crate::Error::LockLost)
    /// if the hold was lost before the release (a blocking body cannot be stopped: check
    /// [`Guard::is_lost`] at safe points).
    pub fn run_read<T>(&self, body: impl FnOnce(&RwGuard) -> T) -> Result<T> {
        let guard = self.read()?;
        let out = body(&guard);
        guard.release().map(|()| out)
    }

    /// Runs `body` holding the write; see [`RwLock::run_read`].
    pub fn run_write<T>(&self, body: impl FnOnce(&RwGuard) -> T) -> Result<T> {
        let guard = self.write()?;
        let out = body(&guard);
        guard.release().map(|()| out)
    }

    /// See [`crate::RwLock::read_timeout`].
    pub fn read_timeout(&self, wait: Duration) -> Result<RwGuard> {
        let guard = self.shared.block_on(self.inner.read_timeout(wait))??;
        Ok(self.guard(guard))
    }

    /// See [`crate::RwLock::write_timeout`].
    pub fn write_timeout(&self, wait: Duration) -> Result<RwGuard> {
        let guard = self.shared.block_on(self.inner.write_timeout(wait))??;
        Ok(self.guard(guard))
    }

    /// See [`crate::RwLock::is_locked`].
    pub fn is_locked(&self) -> Result<bool> {
        self.shared.block_on(self.inner.is_locked())?
    }

    /// See [`crate::RwLock::remaining_ttl`].
    pub fn remaining_ttl(&self) -> Result<Option<Duration>> {
        self.shared.block_on(self.inner.remaining_ttl())?
    }

    /// See [`crate::RwLock::state`].
    pub fn state(&self) -> Result<RwLockState> {
        self.shared.block_on(self.inner.state())?
    }

    /// See [`crate::RwLock::force_unlock`].
    pub fn force_unlock(&self) -> Result<bool> {
        self.shared.block_on(self.inner.force_unlock())?
    }
}

/// A blocking fair lock; see [`crate::FairLock`].
#[derive(Clone)]
pub struct FairLock {
    pub(super) inner: crate::FairLock,
    pub(super) shared: Arc<Shared>,
}

options!(FairLock);
owners!(FairLock);

impl FairLock {
    /// Blocks until held, in turn; see [`crate::FairLock::acquire`].
    pub fn acquire(&self) -> Result<FairGuard> {
        let guard = self.shared.block_on(self.inner.acquire())??;
        Ok(self.guard(guard))
    }

    /// Tries once; see [`crate::FairLock::try_acquire`].
    pub fn try_acquire(&self) -> Result<Option<FairGuard>> {
        let guard = self.shared.block_on(self.inner.try_acquire())??;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// Waits at most `wait` (zero: tries once); see [`crate::FairLock::try_acquire_for`].
    pub fn try_acquire_for(&self, wait: Duration) -> Result<Option<FairGuard>> {
        let guard = self.shared.block_on(self.inner.try_acquire_for(wait))??;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// Runs `body` holding the lock and releases; see [`RwLock::run_read`].
    pub fn run<T>(&self, body: impl FnOnce(&FairGuard) -> T) -> Result<T> {
        let guard = self.acquire()?;
        let out = body(&guard);
        guard.release().map(|()| out)
    }

    /// See [`crate::FairLock::acquire_timeout`].
    pub fn acquire_timeout(&self, wait: Duration) -> Result<FairGuard> {
        let guard = self.shared.block_on(self.inner.acquire_timeout(wait))??;
        Ok(self.guard(guard))
    }

    /// See [`crate::FairLock::is_locked`].
    pub fn is_locked(&self) -> Result<bool> {
        self.shared.block_on(self.inner.is_locked())?
    }

    /// See [`crate::FairLock::remaining_ttl`].
    pub fn remaining_ttl(&self) -> Result<Option<Duration>> {
        self.shared.block_on(self.inner.remaining_ttl())?
    }

    /// See [`crate::FairLock::state`].
    pub fn state(&self) -> Result<FairLockState> {
        self.shared.block_on(self.inner.state())?
    }

    /// See [`crate::FairLock::force_unlock`].
    pub fn force_unlock(&self) -> Result<bool> {
        self.shared.block_on(self.inner.force_unlock())?
    }
}

/// A blocking semaphore; see [`crate::Semaphore`].
#[derive(Clone)]
pub struct Semaphore {
    inner: crate::Semaphore,
    shared: Arc<Shared>,
}

options!(Semaphore);

impl Semaphore {
    /// See [`crate::Semaphore::set_permits`].
    pub fn set_permits(&self, size: u64) -> Result<Option<u64>> {
        self.shared.block_on(self.inner.set_permits(size))?
    }

    /// See [`crate::Semaphore::try_set_permits`].
    pub fn try_set_permits(&self, size: u64) -> Result<bool> {
        self.shared.block_on(self.inner.try_set_permits(size))?
    }

    /// See [`crate::Semaphore::add_permits`].
    pub fn add_permits(&self, delta: i64) -> Result<u64> {
        self.shared.block_on(self.inner.add_permits(delta))?
    }

    /// Blocks until `n` permits are held; see [`crate::Semaphore::acquire`].
    pub fn acquire(&self, n: u32) -> Result<SemaphoreGuard> {
        let guard = self.shared.block_on(self.inner.acquire(n))??;
        Ok(self.guard(guard))
    }

    /// Tries once; see [`crate::Semaphore::try_acquire`].
    pub fn try_acquire(&self, n: u32) -> Result<Option<SemaphoreGuard>> {
        let guard = self.shared.block_on(self.inner.try_acquire(n))??;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// Waits at most `wait` (zero: tries once); see [`crate::Semaphore::try_acquire_for`].
    pub fn try_acquire_for(&self, n: u32, wait: Duration) -> Result<Option<SemaphoreGuard>> {
        let guard = self
            .shared
            .block_on(self.inner.try_acquire_for(n, wait))??;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// Runs `body` holding `n` permits and gives them back; see [`RwLock::run_read`].
    pub fn run<T>(&self, n: u32, body: impl FnOnce(&SemaphoreGuard) -> T) -> Result<T> {
        let guard = self.acquire(n)?;
        let out = body(&guard);
        guard.release().map(|()| out)
    }

    /// See [`crate::Semaphore::acquire_timeout`].
    pub fn acquire_timeout(&self, n: u32, wait: Duration) -> Result<SemaphoreGuard> {
        let guard = self
            .shared
            .block_on(self.inner.acquire_timeout(n, wait))??;
        Ok(self.guard(guard))
    }

    /// See [`crate::Semaphore::state`].
    pub fn state(&self) -> Result<SemaphoreState> {
        self.shared.block_on(self.inner.state())?
    }

    /// Takes every free permit at once; see [`crate::Semaphore::drain_permits`].
    pub fn drain_permits(&self) -> Result<Option<SemaphoreGuard>> {
        let guard = self.shared.block_on(self.inner.drain_permits())??;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// Gives back permits by id, without their guard; see
    /// [`crate::Semaphore::release_permits`].
    pub fn release_permits(&self, id: &str, n: u32) -> Result<bool> {
        self.shared.block_on(self.inner.release_permits(id, n))?
    }

    /// See [`crate::Semaphore::force_release`].
    pub fn force_release(&self) -> Result<u64> {
        self.shared.block_on(self.inner.force_release())?
    }
}

/// A blocking count-down latch; see [`crate::CountDownLatch`].
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
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// See [`crate::CountDownLatch::try_set_count`].
    pub fn try_set_count(&self, count: u64) -> Result<bool> {
        self.shared.block_on(self.inner.try_set_count(count))?
    }

    /// See [`crate::CountDownLatch::count_down`].
    pub fn count_down(&self) -> Result<u64> {
        self.shared.block_on(self.inner.count_down())?
    }

    /// See [`crate::CountDownLatch::count`].
    pub fn count(&self) -> Result<u64> {
        self.shared.block_on(self.inner.count())?
    }

    /// Blocks until the latch opens; see [`crate::CountDownLatch::wait`].
    pub fn wait(&self) -> Result<()> {
        self.shared.block_on(self.inner.wait())?
    }

    /// Waits at most `timeout`: whether it opened; see [`crate::CountDownLatch::wait_for`].
    pub fn wait_for(&self, timeout: Duration) -> Result<bool> {
        self.shared.block_on(self.inner.wait_for(timeout))?
    }

    /// See [`crate::CountDownLatch::delete`].
    pub fn delete(&self) -> Result<bool> {
        self.shared.block_on(self.inner.delete())?
    }
}
