//! A blocking API for code that is not async, mirroring the async one (as
//! `reqwest::blocking` mirrors `reqwest`). Feature `blocking`.
//!
//! A [`LockClient`] owns a small tokio runtime (one worker thread) that runs the watchdog,
//! the pub/sub waiters and background releases; each call blocks the calling thread until
//! the async operation is done. Everything else (semantics, errors, the lost signal) is the
//! async API's. Calling it from inside an async runtime would block that runtime's thread,
//! so it is refused with [`Error::InvalidConfig`] (use the async API there).
//!
//! ```no_run
//! # fn demo() -> Result<(), redis_locks::Error> {
//! use redis_locks::blocking::{self, LockClient};
//! let client = LockClient::connect("redis://127.0.0.1:6379")?;
//! let lock = client.lock("nightly-export")?;
//! let guard = lock.acquire()?; // blocks until acquired; renewed by the watchdog
//! let nested = guard.reenter()?;
//! nested.release()?;
//! guard.release()?;
//!
//! // Every kind, the same way: the read-write lock, the fair lock, the semaphore, the latch.
//! let write = client.rw_lock("catalog")?.write()?;
//! write.release()?;
//! let pool = client.semaphore("gpu-pool")?;
//! pool.try_set_permits(4)?;
//! let permit = pool.acquire(1)?;
//! permit.release()?;
//! // And the multi-lock (members of any kind, of any clients) and RedLock.
//! let both = blocking::MultiLock::new([client.lock("a")?, client.lock("b")?])?.acquire()?;
//! both.release()?;
//! # Ok(()) }
//! ```
//!
//! Dropping the last handle of a client waits (up to four response timeouts) for the
//! releases of dropped guards to finish before the runtime stops, so a dropped guard does
//! not leave its lock held until its lease runs out. (Not when that last handle is dropped
//! inside an async runtime: waiting there would block it; such holds then expire with
//! their lease, and an error is logged for each.)

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::lock::LockState;
use crate::watchdog::WatchdogStats;

mod guard;
mod kinds;
mod multi;
mod redisson;

pub use guard::{
    FairGuard, Guard, LockGuard, RedissonGuard, RedissonRwGuard, RwGuard, SemaphoreGuard,
};
pub use kinds::{CountDownLatch, FairLock, RwLock, Semaphore};
pub use multi::{Member, MultiGuard, MultiLock, RedGuard, RedLock};
pub use redisson::{RedissonLock, RedissonRwLock};

/// The runtime and the async client; dropped together, flushing first.
struct Shared {
    client: crate::LockClient,
    /// `None` only during drop.
    runtime: Option<tokio::runtime::Runtime>,
}

impl Shared {
    /// The runtime to block on, or why a blocking call may not be made here.
    fn runtime(&self) -> Result<&tokio::runtime::Runtime> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(Error::InvalidConfig(
                "the blocking API was called inside an async runtime, where it would block \
                 a runtime thread; use the async API there"
                    .into(),
            ));
        }
        self.runtime
            .as_ref()
            .ok_or_else(|| Error::InvalidConfig("the client has shut down".into()))
    }

    fn block_on<F: Future>(&self, work: F) -> Result<F::Output> {
        Ok(self.runtime()?.block_on(work))
    }

    fn client(&self) -> &crate::LockClient {
        &self.client
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let Some(runtime) = self.runtime.take() else {
            return;
        };
        // Let dropped guards' releases reach Redis before the runtime (and with it the
        // background tasks) stops. Bounded: an unreachable Redis must not hang the drop.
        if tokio::runtime::Handle::try_current().is_err() {
            let wait = self.client.inner.calls.response_timeout * 4;
            let client = &self.client;
            runtime.block_on(async {
                let _ = tokio::time::timeout(wait, client.flush()).await;
            });
        }
        runtime.shutdown_background();
    }
}

/// A blocking lock client: [`crate::LockClient`] with its own runtime. Cheap to clone.
///
/// ```no_run
/// # fn demo() -> redis_locks::Result<()> {
/// use redis_locks::blocking::LockClient;
/// let client = LockClient::connect("redis://127.0.0.1:6379")?;
/// let guard = client.lock("invoice:42")?.acquire()?; // blocks this thread until held
/// guard.release()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LockClient {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for LockClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("blocking::LockClient")
            .field(self.shared.client())
            .finish()
    }
}

impl LockClient {
    /// Another handle of the client that owns `shared`.
    fn of(shared: &Arc<Shared>) -> LockClient {
        LockClient {
            shared: shared.clone(),
        }
    }

    /// Connects with default settings; see [`crate::LockClient::connect`].
    ///
    /// ```no_run
    /// # fn demo() -> redis_locks::Result<()> {
    /// let client = redis_locks::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let guard = client.lock("invoice:42")?.acquire()?;
    /// guard.release()?;
    /// # Ok(()) }
    /// ```
    pub fn connect(url: &str) -> Result<Self> {
        Self::from_builder(crate::LockClient::builder(url))
    }

    /// Connects with the settings of an async builder (prefix, timeouts, ...).
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), redis_locks::Error> {
    /// use std::time::Duration;
    /// let builder = redis_locks::LockClient::builder("redis://127.0.0.1:6379")
    ///     .prefix("billing")
    ///     .watchdog_timeout(Duration::from_secs(10));
    /// let client = redis_locks::blocking::LockClient::from_builder(builder)?;
    /// # let _ = client; Ok(()) }
    /// ```
    pub fn from_builder(builder: crate::LockClientBuilder) -> Result<Self> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(Error::InvalidConfig(
                "a blocking client cannot be created inside an async runtime; use the async \
                 LockClient there"
                    .into(),
            ));
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("redis-locks")
            .enable_all()
            .build()
            .map_err(|err| Error::InvalidConfig(format!("cannot start a runtime: {err}")))?;
        let client = runtime.block_on(builder.connect())?;
        Ok(LockClient {
            shared: Arc::new(Shared {
                client,
                runtime: Some(runtime),
            }),
        })
    }

    /// A handle to the lock called `name`; see [`crate::LockClient::lock`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.lock("invoice:42")?;
    /// let guard = lock.acquire()?;
    /// // ... charge the invoice ...
    /// guard.release()?;
    /// # Ok(()) }
    /// ```
    pub fn lock(&self, name: &str) -> Result<Lock> {
        Ok(Lock {
            inner: self.shared.client().lock(name)?,
            shared: self.shared.clone(),
        })
    }

    /// A handle to the read-write lock called `name`; see [`crate::LockClient::rw_lock`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let catalog = client.rw_lock("catalog")?;
    /// let read = catalog.read()?;
    /// read.release()?;
    /// # Ok(()) }
    /// ```
    pub fn rw_lock(&self, name: &str) -> Result<RwLock> {
        Ok(RwLock::new(
            self.shared.client().rw_lock(name)?,
            &self.shared,
        ))
    }

    /// A handle to the fair lock called `name`; see [`crate::LockClient::fair_lock`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let turn = client.fair_lock("printer")?.acquire()?; // waits its turn
    /// turn.release()?;
    /// # Ok(()) }
    /// ```
    pub fn fair_lock(&self, name: &str) -> Result<FairLock> {
        Ok(FairLock::new(
            self.shared.client().fair_lock(name)?,
            &self.shared,
        ))
    }

    /// A handle to the lock called `name` in Redisson's `RLock` layout; see
    /// [`crate::LockClient::redisson_lock`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let invoice = client.redisson_lock("invoice:42")?; // Java: redisson.getLock("invoice:42")
    /// # Ok(()) }
    /// ```
    pub fn redisson_lock(&self, name: &str) -> Result<RedissonLock> {
        Ok(RedissonLock::new(
            self.shared.client().redisson_lock(name)?,
            &self.shared,
        ))
    }

    /// A handle to the read-write lock called `name` in Redisson's `RReadWriteLock`
    /// layout; see [`crate::LockClient::redisson_rw_lock`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let catalog = client.redisson_rw_lock("catalog")?; // Java: getReadWriteLock("catalog")
    /// # Ok(()) }
    /// ```
    pub fn redisson_rw_lock(&self, name: &str) -> Result<RedissonRwLock> {
        Ok(RedissonRwLock::new(
            self.shared.client().redisson_rw_lock(name)?,
            &self.shared,
        ))
    }

    /// A handle to the semaphore called `name`; see [`crate::LockClient::semaphore`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let pool = client.semaphore("gpu-pool")?;
    /// pool.try_set_permits(4)?;
    /// let gpu = pool.acquire(1)?;
    /// gpu.release()?;
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self, name: &str) -> Result<Semaphore> {
        Ok(Semaphore::new(
            self.shared.client().semaphore(name)?,
            &self.shared,
        ))
    }

    /// A handle to the count-down latch called `name`; see [`crate::LockClient::latch`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let latch = client.latch("import:2024-06")?;
    /// latch.try_set_count(3)?;
    /// # Ok(()) }
    /// ```
    pub fn latch(&self, name: &str) -> Result<CountDownLatch> {
        Ok(CountDownLatch::new(
            self.shared.client().latch(name)?,
            &self.shared,
        ))
    }

    /// A handle to the count-down latch called `name` in Redisson's `RCountDownLatch`
    /// layout; see [`crate::LockClient::redisson_latch`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let latch = client.redisson_latch("import:2024-06")?; // Java: getCountDownLatch(..)
    /// latch.count_down()?;
    /// # Ok(()) }
    /// ```
    pub fn redisson_latch(&self, name: &str) -> Result<CountDownLatch> {
        Ok(CountDownLatch::new(
            self.shared.client().redisson_latch(name)?,
            &self.shared,
        ))
    }

    /// The client id (a UUID v4).
    ///
    /// ```no_run
    /// # fn demo() -> redis_locks::Result<()> {
    /// let client = redis_locks::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// println!("lock client {} started", client.id()); // default owner ids start with it
    /// # Ok(()) }
    /// ```
    pub fn id(&self) -> &str {
        self.shared.client().id()
    }

    /// The lease used, and renewed, for holds taken without an explicit lease; see
    /// [`crate::LockClient::watchdog_timeout`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// println!("holds are renewed every {:?}", client.watchdog_timeout() / 3);
    /// # Ok(()) }
    /// ```
    pub fn watchdog_timeout(&self) -> Duration {
        self.shared.client().watchdog_timeout()
    }

    /// The key prefix in use; see [`crate::LockClient::prefix`].
    ///
    /// ```no_run
    /// # fn demo() -> redis_locks::Result<()> {
    /// let builder = redis_locks::LockClient::builder("redis://127.0.0.1:6379").prefix("billing");
    /// let client = redis_locks::blocking::LockClient::from_builder(builder)?;
    /// assert_eq!(client.prefix(), "billing");
    /// # Ok(()) }
    /// ```
    pub fn prefix(&self) -> &str {
        self.shared.client().prefix()
    }

    /// How many (lock, owner) pairs this client holds; see
    /// [`crate::LockClient::held_count`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.lock("invoice:42")?.acquire()?;
    /// println!("this client holds {} lock(s)", client.held_count()); // at least 1
    /// guard.release()?;
    /// # Ok(()) }
    /// ```
    pub fn held_count(&self) -> usize {
        self.shared.client().held_count()
    }

    /// How many lock channels this client's waiters are subscribed to; see
    /// [`crate::LockClient::waiting_channels`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// // ... while other threads wait in `acquire()` ...
    /// println!("waiting on {} lock(s)", client.waiting_channels());
    /// # Ok(()) }
    /// ```
    pub fn waiting_channels(&self) -> usize {
        self.shared.client().waiting_channels()
    }

    /// Waits for the background releases of dropped guards; see
    /// [`crate::LockClient::flush`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.lock("invoice:42")?.acquire()?;
    /// drop(guard);     // given back in the background
    /// client.flush()?; // wait for it before the process exits
    /// # Ok(()) }
    /// ```
    pub fn flush(&self) -> Result<()> {
        self.shared.block_on(self.shared.client().flush())
    }

    /// The watchdog's counters; see [`crate::LockClient::watchdog_stats`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let stats = client.watchdog_stats();
    /// println!("{} renewals, {} holds lost", stats.renewed, stats.lost);
    /// # Ok(()) }
    /// ```
    pub fn watchdog_stats(&self) -> WatchdogStats {
        self.shared.client().watchdog_stats()
    }
}

/// A blocking handle to one named lock; see [`crate::Lock`].
///
/// ```no_run
/// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
/// let lock = client.lock("invoice:42")?;
/// if let Some(guard) = lock.try_acquire()? {
///     // ... charge the invoice ...
///     guard.release()?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Lock {
    inner: crate::Lock,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl Lock {
    fn guard(&self, guard: crate::LockGuard) -> LockGuard {
        Guard::new(guard, &self.shared)
    }

    fn with(&self, inner: crate::Lock) -> Lock {
        Lock {
            inner,
            shared: self.shared.clone(),
        }
    }

    /// See [`crate::Lock::with_lease`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.lock("invoice:42")?.with_lease(Duration::from_secs(30))?;
    /// let guard = lock.acquire()?; // expires after 30 s; never renewed
    /// # guard.release()?;
    /// # Ok(()) }
    /// ```
    pub fn with_lease(&self, lease: Duration) -> Result<Lock> {
        Ok(self.with(self.inner.with_lease(lease)?))
    }

    /// See [`crate::Lock::with_fencing`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.lock("ledger")?.with_fencing().acquire()?;
    /// let token = guard.fencing_token().expect("a fenced handle");
    /// guard.release()?;
    /// # Ok(()) }
    /// ```
    pub fn with_fencing(&self) -> Lock {
        self.with(self.inner.with_fencing())
    }

    /// Whether acquisitions through this handle return fencing tokens; see
    /// [`crate::Lock::is_fenced`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// assert!(client.lock("ledger")?.with_fencing().is_fenced());
    /// assert!(!client.lock("ledger")?.is_fenced());
    /// # Ok(()) }
    /// ```
    pub fn is_fenced(&self) -> bool {
        self.inner.is_fenced()
    }

    /// The same lock with the watchdog lease (the default); see
    /// [`crate::Lock::with_watchdog`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let fixed = client.lock("invoice:42")?.with_lease(Duration::from_secs(5))?;
    /// let guard = fixed.with_watchdog().acquire()?; // renewed while the guard lives
    /// assert!(guard.is_watchdog_leased());
    /// # guard.release()?;
    /// # Ok(()) }
    /// ```
    pub fn with_watchdog(&self) -> Lock {
        self.with(self.inner.with_watchdog())
    }

    /// See [`crate::Lock::with_owner`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.lock("migration:v42")?.with_owner("deploy-7f3c9a1e")?;
    /// lock.acquire()?.detach(); // left held for another process with this owner id
    /// # Ok(()) }
    /// ```
    pub fn with_owner(&self, owner: impl Into<String>) -> Result<Lock> {
        Ok(self.with(self.inner.with_owner(owner)?))
    }

    /// The lock's name.
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.lock("invoice:42")?;
    /// assert_eq!(lock.name(), "invoice:42");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The client this handle belongs to (another handle of it); see
    /// [`crate::Lock::client`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.lock("invoice:42")?;
    /// let receipt = lock.client().lock("receipt:42")?; // the same client
    /// # Ok(()) }
    /// ```
    pub fn client(&self) -> LockClient {
        LockClient::of(&self.shared)
    }

    /// The Redis key of the lock hash.
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.lock("invoice:42")?;
    /// println!("the lock lives in {}", lock.key());
    /// # Ok(()) }
    /// ```
    pub fn key(&self) -> &str {
        self.inner.key()
    }

    /// The pub/sub channel on which releases are announced; see [`crate::Lock::channel`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.lock("invoice:42")?;
    /// println!("releases of {} are announced on {}", lock.name(), lock.channel());
    /// # Ok(()) }
    /// ```
    pub fn channel(&self) -> &str {
        self.inner.channel()
    }

    /// The explicit owner id this handle acquires as, if any; see [`crate::Lock::owner`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.lock("invoice:42")?;
    /// assert_eq!(lock.owner(), None); // every acquire is a new owner
    /// assert_eq!(lock.with_owner("billing-worker-3")?.owner(), Some("billing-worker-3"));
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> Option<&str> {
        self.inner.owner()
    }

    /// Blocks until acquired; see [`crate::Lock::acquire`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.lock("invoice:42")?.acquire()?;
    /// // ... charge the invoice ...
    /// guard.release()?;
    /// # Ok(()) }
    /// ```
    pub fn acquire(&self) -> Result<LockGuard> {
        let guard = self.shared.block_on(self.inner.acquire())??;
        Ok(self.guard(guard))
    }

    /// Tries once; see [`crate::Lock::try_acquire`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// match client.lock("cron:cleanup")?.try_acquire()? {
    ///     Some(guard) => guard.release()?,
    ///     None => println!("another instance runs the cleanup"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire(&self) -> Result<Option<LockGuard>> {
        let guard = self.shared.block_on(self.inner.try_acquire())??;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// Waits at most `wait`, then `None`; see [`crate::Lock::try_acquire_for`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// if let Some(guard) = client.lock("invoice:42")?.try_acquire_for(Duration::from_secs(2))? {
    ///     guard.release()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_for(&self, wait: Duration) -> Result<Option<LockGuard>> {
        let guard = self.shared.block_on(self.inner.try_acquire_for(wait))??;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// Waits at most `wait`, then [`Error::Timeout`]; see [`crate::Lock::acquire_timeout`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::Error;
    /// match client.lock("invoice:42")?.acquire_timeout(Duration::from_secs(1)) {
    ///     Ok(guard) => guard.release()?,
    ///     Err(Error::Timeout { .. }) => println!("busy; retry later"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn acquire_timeout(&self, wait: Duration) -> Result<LockGuard> {
        let guard = self.shared.block_on(self.inner.acquire_timeout(wait))??;
        Ok(self.guard(guard))
    }

    /// Runs `body` under the lock and releases; [`Error::LockLost`] if the lock was lost
    /// before the release. Unlike [`crate::Lock::run`], a blocking body cannot be stopped
    /// when the lock is lost: check [`LockGuard::is_lost`] at safe points.
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let total = client.lock("invoice:42")?.run(|guard| {
    ///     // ... a blocking body cannot be stopped: check at safe points ...
    ///     if guard.is_lost() { return 0; }
    ///     100
    /// })?;
    /// # Ok(()) }
    /// ```
    pub fn run<T>(&self, body: impl FnOnce(&LockGuard) -> T) -> Result<T> {
        let guard = self.acquire()?;
        let out = body(&guard);
        guard.release().map(|()| out)
    }

    /// See [`crate::Lock::state`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let state = client.lock("invoice:42")?.state()?;
    /// println!("{} holder(s)", state.holders.len());
    /// # Ok(()) }
    /// ```
    pub fn state(&self) -> Result<LockState> {
        self.shared.block_on(self.inner.state())?
    }

    /// See [`crate::Lock::is_locked`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// if client.lock("deploy")?.is_locked()? {
    ///     println!("a deploy is in progress");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_locked(&self) -> Result<bool> {
        self.shared.block_on(self.inner.is_locked())?
    }

    /// Whether this handle's explicit owner holds the lock; see
    /// [`crate::Lock::is_held_by_owner`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.lock("migration:v42")?.with_owner("deploy-7f3c9a1e")?;
    /// if lock.is_held_by_owner()? {
    ///     lock.unlock()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_held_by_owner(&self) -> Result<bool> {
        self.shared.block_on(self.inner.is_held_by_owner())?
    }

    /// This handle's explicit owner's hold count (0 when it does not hold the lock); see
    /// [`crate::Lock::hold_count`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.lock("migration:v42")?.with_owner("deploy-7f3c9a1e")?;
    /// let guard = lock.acquire()?;
    /// assert_eq!(lock.hold_count()?, 1);
    /// guard.release()?;
    /// # Ok(()) }
    /// ```
    pub fn hold_count(&self) -> Result<u64> {
        self.shared.block_on(self.inner.hold_count())?
    }

    /// How many clients (processes) wait for the lock; see
    /// [`crate::Lock::waiting_clients`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let waiting = client.lock("invoice:42")?.waiting_clients()?;
    /// println!("{waiting} process(es) are waiting for the lock");
    /// # Ok(()) }
    /// ```
    pub fn waiting_clients(&self) -> Result<u64> {
        self.shared.block_on(self.inner.waiting_clients())?
    }

    /// See [`crate::Lock::remaining_ttl`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// if let Some(ttl) = client.lock("deploy")?.remaining_ttl()? {
    ///     println!("expires in {ttl:?} unless renewed");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn remaining_ttl(&self) -> Result<Option<Duration>> {
        self.shared.block_on(self.inner.remaining_ttl())?
    }

    /// See [`crate::Lock::force_unlock`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// if client.lock("deploy")?.force_unlock()? {
    ///     println!("deleted the lock");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn force_unlock(&self) -> Result<bool> {
        self.shared.block_on(self.inner.force_unlock())?
    }

    /// See [`crate::Lock::unlock`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.lock("migration:v42")?.with_owner("deploy-7f3c9a1e")?;
    /// let left = lock.unlock()?;
    /// # Ok(()) }
    /// ```
    pub fn unlock(&self) -> Result<u64> {
        self.shared.block_on(self.inner.unlock())?
    }
}
