//! The reentrant lock handle: its options and the acquire entry points.
//!
//! The rest of the handle lives in submodules, one concern each: `wait` (its attempts and
//! waiting policy, for the one waiting loop), `attempt` (one acquire attempt in its lane,
//! and the reconciliation of a lost reply), `guard` (`LockGuard`), `release` (giving back a
//! hold), `inspect` (reading a lock, deleting it).

mod attempt;
mod guard;
mod inspect;
mod release;
mod wait;

pub(crate) use attempt::Attempt;
pub use guard::LockGuard;
pub use inspect::LockState;

use std::sync::Arc;
use std::time::Duration;

use crate::client::LockClient;
use crate::error::{Error, Result};
use crate::keys::{self, LockKeys};
use crate::owner::fingerprint;
use crate::watchdog::LeaseMode;

/// The reserved hash field holding the current hold's fencing token (see `lua/acquire.lua`).
pub(crate) const TOKEN_FIELD: &str = "\u{1}fence";
/// The reserved hash field holding the current hold's id.
pub(crate) const HOLD_FIELD: &str = "\u{1}h";

/// A handle to one named lock. Cheap to clone; creating it does not touch Redis.
///
/// By default the lock is taken with the **watchdog lease**: the lease is the client's
/// watchdog timeout and the client renews it while the guard lives. [`Lock::with_lease`]
/// gives a fixed lease instead, which is never renewed and simply expires.
///
/// Reentrancy is per owner, and explicit: each acquire of a handle without an explicit
/// owner is a new owner (two futures joined in one task exclude each other); a nested
/// critical section re-enters through its guard ([`LockGuard::reenter`]);
/// [`Lock::with_owner`] names an owner to share, for example to hand a lock over between
/// processes.
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> Result<(), redis_locks::Error> {
/// use std::time::Duration;
/// let lock = client.lock("inventory:sku-9")?;
/// let outer = lock.acquire().await?;           // count 1, watchdog-renewed
/// let inner = outer.reenter().await?;         // nested: re-entered, count 2
/// inner.release().await?;
/// outer.release().await?;                      // count 0: deleted, waiters woken
///
/// let leased = lock.with_lease(Duration::from_secs(5))?;
/// match leased.acquire_timeout(Duration::from_millis(200)).await {
///     Ok(guard) => guard.release().await?,
///     Err(redis_locks::Error::Timeout { .. }) => { /* someone else has it */ }
///     Err(other) => return Err(other),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Lock {
    pub(crate) client: LockClient,
    /// Shared by every clone of the handle (and by each guard of it): a clone is then a
    /// reference count, not one per key name.
    pub(crate) keys: Arc<LockKeys>,
    owner: Option<Arc<str>>,
    pub(crate) mode: LeaseMode,
    fenced: bool,
}

impl LockClient {
    /// A handle to the lock called `name`. Validates the name (see
    /// [`MAX_NAME_LEN`](crate::MAX_NAME_LEN)); does not talk to Redis.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> Result<(), redis_locks::Error> {
    /// let lock = client.lock("reports:daily")?;
    /// if let Some(guard) = lock.try_acquire().await? {
    ///     guard.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lock(&self, name: &str) -> Result<Lock> {
        let keys = LockKeys::new(
            &self.inner.layout.prefix,
            self.inner.layout.db,
            self.inner.layout.sharded,
            name,
        )?;
        Ok(Lock::new(self.clone(), keys))
    }
}

impl std::fmt::Debug for Lock {
    /// One line: what identifies the lock and how it is taken (no client internals).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("key", &self.keys.hash)
            .field("owner", &fingerprint(self.owner.as_deref()))
            .field("lease", &self.mode)
            .field("fenced", &self.fenced)
            .finish()
    }
}

impl Lock {
    pub(crate) fn new(client: LockClient, keys: LockKeys) -> Self {
        Lock {
            client,
            keys: Arc::new(keys),
            owner: None,
            mode: LeaseMode::Watchdog,
            fenced: false,
        }
    }

    /// The same lock with a fixed lease: acquisitions through the returned handle expire
    /// after `lease` and are not renewed. Redis counts whole milliseconds, so a fraction
    /// rounds up (1.9 ms is 2 ms). Fails with [`Error::InvalidDuration`] for a lease below
    /// 1 ms or above [`MAX_DURATION`](crate::MAX_DURATION).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// // A fixed lease: the hold expires after 30 s whatever happens, and is never renewed.
    /// let lock = client.lock("invoice:42")?.with_lease(Duration::from_secs(30))?;
    /// let guard = lock.acquire().await?;
    /// assert!(!guard.is_watchdog_leased());
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_lease(&self, lease: Duration) -> Result<Lock> {
        let ms = keys::validate_ms("lease", lease)?;
        Ok(Lock {
            mode: LeaseMode::Fixed(Duration::from_millis(ms)),
            ..self.clone()
        })
    }

    /// The same lock, handing out a **fencing token** with every acquisition: a number
    /// that grows strictly with each fresh acquisition of this lock name, taken in the same
    /// script (no extra round trip). Read it with [`LockGuard::fencing_token`] and pass it
    /// to the protected resource, which must reject any token lower than one it has seen.
    ///
    /// A reentrant acquisition takes **no new number**: it gets its outer hold's token.
    /// The counter lives at `<prefix>:{<name>}:fence` without a TTL (one small string per
    /// lock name that ever used fencing). A token is `max(counter + 1, server time in µs)`,
    /// so tokens keep growing when Redis loses the counter (restart without persistence,
    /// failover), as long as the server clock does not step back by more than the outage.
    ///
    /// The resource's one comparison: accept `token >= highest seen`, reject lower. Equal
    /// tokens come only from the same hold (nested guards share it).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> Result<(), redis_locks::Error> {
    /// let guard = client.lock("ledger")?.with_fencing().acquire().await?;
    /// let token = guard.fencing_token().expect("fenced");
    /// // storage.write_if_token_at_least(token, ...)
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_fencing(&self) -> Lock {
        Lock {
            fenced: true,
            ..self.clone()
        }
    }

    /// Whether acquisitions through this handle return fencing tokens.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let ledger = client.lock("ledger")?.with_fencing();
    /// assert!(ledger.is_fenced());
    /// assert!(!client.lock("ledger")?.is_fenced());
    /// # Ok(()) }
    /// ```
    pub fn is_fenced(&self) -> bool {
        self.fenced
    }

    /// The same lock with the watchdog lease (the default).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let fixed = client.lock("invoice:42")?.with_lease(Duration::from_secs(5))?;
    /// let renewed = fixed.with_watchdog(); // back to the default: renewed while the guard lives
    /// let guard = renewed.acquire().await?;
    /// assert!(guard.is_watchdog_leased());
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_watchdog(&self) -> Lock {
        Lock {
            mode: LeaseMode::Watchdog,
            ..self.clone()
        }
    }

    /// The same lock with an explicit owner id. Holds are reentrant per owner, so every
    /// handle (in any task or process) with this owner id shares the holds. Use an
    /// unguessable id: whoever knows it can release the lock. Fails with
    /// [`Error::InvalidName`] for an empty id or one over
    /// [`MAX_OWNER_LEN`](crate::MAX_OWNER_LEN) bytes.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// // Process A takes the lock for a long migration and leaves it held.
    /// let lock = client.lock("migration:v42")?.with_owner("deploy-7f3c9a1e")?;
    /// let guard = lock.with_lease(Duration::from_secs(600))?.acquire().await?;
    /// guard.detach();
    /// // Process B, knowing the owner id, gives it back when the migration is done.
    /// lock.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_owner(&self, owner: impl Into<String>) -> Result<Lock> {
        let owner = owner.into();
        keys::validate_owner(&owner)?;
        Ok(Lock {
            owner: Some(owner.into()),
            ..self.clone()
        })
    }

    /// The lock's name.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.lock("invoice:42")?;
    /// assert_eq!(lock.name(), "invoice:42");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.keys.name
    }

    /// The client this handle belongs to.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.lock("invoice:42")?;
    /// // The same client, for a related lock.
    /// let receipt = lock.client().lock("receipt:42")?;
    /// # Ok(()) }
    /// ```
    pub fn client(&self) -> &LockClient {
        &self.client
    }

    /// The Redis key of the lock hash.
    ///
    /// ```no_run
    /// # async fn demo() -> redis_locks::Result<()> {
    /// let client = redis_locks::LockClient::connect("redis://127.0.0.1:6379").await?;
    /// assert_eq!(client.lock("invoice:42")?.key(), "redis-locks:{invoice:42}");
    /// # Ok(()) }
    /// ```
    pub fn key(&self) -> &str {
        &self.keys.hash
    }

    /// The pub/sub channel on which releases are announced.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.lock("invoice:42")?;
    /// println!("releases of {} are announced on {}", lock.name(), lock.channel());
    /// # Ok(()) }
    /// ```
    pub fn channel(&self) -> &str {
        &self.keys.channel
    }

    /// The explicit owner id this handle acquires as ([`Lock::with_owner`]), or `None`:
    /// then every acquire is a new owner (see [`LockGuard::owner`] for the one a guard
    /// got, and [`LockGuard::reenter`] for nesting).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.lock("invoice:42")?;
    /// assert_eq!(lock.owner(), None); // every acquire is a new owner
    /// let shared = lock.with_owner("billing-worker-3")?;
    /// assert_eq!(shared.owner(), Some("billing-worker-3"));
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    pub(super) fn resolve_owner(&self) -> Arc<str> {
        match &self.owner {
            Some(owner) => owner.clone(),
            None => self.client.inner.calls.next_owner(),
        }
    }

    /// This handle acting as `owner` (for [`LockGuard::reenter`]).
    pub(crate) fn as_owner(&self, owner: &Arc<str>) -> Lock {
        Lock {
            owner: Some(owner.clone()),
            ..self.clone()
        }
    }

    pub(crate) fn lease_ms(&self) -> u64 {
        match self.mode {
            LeaseMode::Watchdog => self.client.inner.watchdog_timeout.as_millis() as u64,
            LeaseMode::Fixed(lease) => lease.as_millis() as u64,
        }
    }

    /// Waits until the lock is acquired.
    ///
    /// The first attempt fails fast with [`Error::Redis`] when Redis cannot be reached;
    /// once waiting, it rides out connection blips and restarts, and reports
    /// [`Error::Redis`] only after an outage longer than the watchdog timeout. Fails
    /// with [`Error::WrongType`] when the key holds something else.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.lock("invoice:42")?.acquire().await?;
    /// // ... charge the invoice: no other owner holds the lock until the release ...
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe. An attempt dropped after it was sent finishes in a background task,
    /// which releases a hold it won at once (see [`LockClient::flush`]). A wake-up this
    /// waiter received is passed to the next local waiter.
    pub async fn acquire(&self) -> Result<LockGuard> {
        match self.acquire_until(None).await? {
            Some(guard) => Ok(guard),
            None => Err(Error::UnexpectedReply(
                "an unbounded wait ended without the lock".into(),
            )),
        }
    }

    /// Runs `body` under the lock: acquires (waiting without limit, like
    /// [`Lock::acquire`]), runs the body with the guard, and releases. Returns the body's
    /// result when the lock was held from start to end. If the lock is lost meanwhile, the
    /// body is **stopped** (its future is dropped at its next await point) and the result is
    /// [`Error::LockLost`]; a loss found only at the release is `LockLost` too, since the
    /// end of the body was not protected. The guard lets the body read its fencing token
    /// or re-enter ([`LockGuard::reenter`]).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> Result<(), redis_locks::Error> {
    /// let lock = client.lock("nightly-report")?.with_fencing();
    /// let rows = lock
    ///     .run(async |guard| {
    ///         let token = guard.fencing_token();
    ///         // ... write, passing `token` to the store ...
    ///         42
    ///     })
    ///     .await?;
    /// # let _ = rows; Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the future stops the body and releases the hold in the
    /// background (as dropping a guard does).
    pub async fn run<T>(&self, body: impl AsyncFnOnce(&LockGuard) -> T) -> Result<T> {
        self.acquire().await?.scoped(body).await
    }

    /// Tries once, without waiting. `Ok(None)` means another owner holds the lock. (A
    /// request whose connection dropped before Redis ran it, as a probe on the new
    /// connection shows, is sent again: that is still one attempt.)
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// match client.lock("cron:cleanup")?.try_acquire().await? {
    ///     Some(guard) => {
    ///         // ... run the cleanup ...
    ///         guard.release().await?;
    ///     }
    ///     None => println!("another instance is running the cleanup"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`Lock::acquire`].
    pub async fn try_acquire(&self) -> Result<Option<LockGuard>> {
        self.acquire_until(Some(Duration::ZERO)).await
    }

    /// Waits at most `wait`; `Ok(None)` when the lock was still held by another owner
    /// then. The `Option` form of [`Lock::acquire_timeout`], for callers to whom a busy lock
    /// is an ordinary outcome. A wait over [`MAX_DURATION`](crate::MAX_DURATION) is
    /// [`Error::InvalidDuration`].
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> Result<(), redis_locks::Error> {
    /// use std::time::Duration;
    /// match client.lock("report")?.try_acquire_for(Duration::from_secs(2)).await? {
    ///     Some(guard) => guard.release().await?,
    ///     None => println!("still busy after 2 s"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`Lock::acquire`].
    pub async fn try_acquire_for(&self, wait: Duration) -> Result<Option<LockGuard>> {
        keys::validate_wait(wait)?;
        self.acquire_until(Some(wait)).await
    }

    /// Waits at most `wait`, then fails with [`Error::Timeout`]. A zero wait tries once.
    /// A wait over [`MAX_DURATION`](crate::MAX_DURATION) is [`Error::InvalidDuration`]
    /// (use [`Lock::acquire`] to wait without limit).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::Error;
    /// match client.lock("invoice:42")?.acquire_timeout(Duration::from_secs(1)).await {
    ///     Ok(guard) => guard.release().await?,
    ///     Err(Error::Timeout { waited, .. }) => println!("still busy after {waited:?}; retry later"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`Lock::acquire`].
    pub async fn acquire_timeout(&self, wait: Duration) -> Result<LockGuard> {
        let got = self.try_acquire_for(wait).await?;
        keys::or_timeout(got, &self.keys.name, wait)
    }
}
