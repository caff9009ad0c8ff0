//! A read-write lock kept in Redisson's RReadWriteLock layout, so that a Rust reader
//! blocks a Java writer using Redisson (3.x, 4.x), and the reverse.
//!
//! Layout (Redisson's, see `protocol::redisson`): the hash named by the lock's name alone,
//! with `mode` (`read` or `write`), a field per reading owner (its read count) and
//! `<owner>:write` for the writer (its write count); a timeout key per read level
//! (`{<name>}:<owner>:rwlock_timeout:<k>`); readers and writers listen on
//! `redisson_rwlock:{<name>}`, a read release publishes `0`, a write release `1`. Scripts:
//! `lua/redisson_rw_acquire.lua`, `lua/redisson_rw_release.lua`, renewal in
//! `lua/redisson_renew.lua`. The waiting loop, the give-back, the watchdog and the guard are
//! the ones every kind shares (`held.rs`).

use std::sync::Arc;
use std::time::Duration;

use crate::client::LockClient;
use crate::error::{Error, Result};
use crate::guard::{Guard, GuardKind, sealed};
use crate::held::{self, Attempt, SetKind};
use crate::keys;
use crate::protocol::attempted::Attempted;
use crate::protocol::redisson::{
    RedissonFound, RedissonKeys, decode_rw_acquire, decode_state, owner_of, rw_acquire_call,
    rw_release_call, state_call,
};
use crate::protocol::rwlock::{RwKind, hold_id};
use crate::protocol::wait::{WaitPolicy, WaitTiming};
use crate::protocol::{Call, Millis, Reply};
use crate::watchdog::{HoldShape, LeaseMode};

/// A read-write lock in [Redisson]'s `RReadWriteLock` layout: a Java service that takes
/// `redisson.getReadWriteLock(name).readLock()` or `.writeLock()` and a Rust service that
/// takes [`LockClient::redisson_rw_lock`]`(name)` `.read()` or `.write()` exclude each
/// other as readers and writers do, and each side's releases wake the other's waiters.
/// Cheap to clone.
///
/// * **Any number of readers, or one writer**, across both sides. Redisson's lock is not
///   fair: readers go in while a writer waits (this library's own [`RwLock`](crate::RwLock)
///   lets a waiting writer go first; in Redisson's layout that would be a key Redisson's
///   readers do not read, so it is not done).
/// * **Downgrade** through a write guard ([`RedissonRwGuard::read`]), as Redisson allows;
///   **no upgrade**: a write asked through a read guard, or by an owner that holds a read,
///   is [`Error::WouldDeadlock`] at once (in Redisson it waits forever).
/// * Owners, re-entry, the watchdog, lost signals and exactly-once calls are as for
///   [`RedissonLock`](crate::RedissonLock), with the same weaker guarantee: holds of one
///   owner cannot be told apart (see [`RedissonLock`](crate::RedissonLock), and the guide's
///   "Working with Redisson", `docs/redisson.md` in the repository).
///
/// [Redisson]: https://redisson.org
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> Result<(), redis_locks::Error> {
/// // Java: redisson.getReadWriteLock("catalog").readLock().lock()
/// let catalog = client.redisson_rw_lock("catalog")?;
/// let read = catalog.read().await?;   // with Java readers; no Java writer meanwhile
/// read.release().await?;
/// let write = catalog.write().await?; // alone, against both sides
/// write.release().await?;             // wakes every waiter, as Redisson's does
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedissonRwLock {
    client: LockClient,
    name: Arc<str>,
    keys: RedissonKeys,
    mode: LeaseMode,
    owner: Option<Arc<str>>,
}

impl std::fmt::Debug for RedissonRwLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedissonRwLock")
            .field("name", &self.name)
            .field("owner", &crate::owner::fingerprint(self.owner.as_deref()))
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl LockClient {
    /// A handle to the read-write lock called `name` in Redisson's `RReadWriteLock`
    /// layout (see [`RedissonRwLock`]). Validates the name; does not talk to Redis. Its key
    /// is the name itself, so it is the same lock as Redisson's `getReadWriteLock(name)`.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let catalog = client.redisson_rw_lock("catalog")?;
    /// assert_eq!(catalog.key(), "catalog");
    /// assert_eq!(catalog.channel(), "redisson_rwlock:{catalog}");
    /// # Ok(()) }
    /// ```
    pub fn redisson_rw_lock(&self, name: &str) -> Result<RedissonRwLock> {
        keys::validate_name(name)?;
        let inner = &self.inner;
        Ok(RedissonRwLock {
            client: self.clone(),
            name: name.into(),
            keys: RedissonKeys::new(&inner.layout.prefix, inner.layout.sharded, name),
            mode: LeaseMode::Watchdog,
            owner: None,
        })
    }
}

/// What a read-write lock in Redisson's layout looks like now
/// ([`RedissonRwLock::state`]).
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
/// let state = client.redisson_rw_lock("catalog")?.state().await?;
/// println!("{:?}: readers {:?}, writer {:?}", state.mode, state.readers, state.writer);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedissonRwLockState {
    /// The hash's `mode`: `Some(Read)` or `Some(Write)` while held.
    pub mode: Option<RwKind>,
    /// Each reading owner with its read count.
    pub readers: Vec<(String, u64)>,
    /// The writing owner with its write count.
    pub writer: Option<(String, u64)>,
    /// How long the lock lives on unless renewed, if it is held and has an expiry.
    pub remaining: Option<Duration>,
}

impl RedissonRwLock {
    /// The lock's name.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// assert_eq!(client.redisson_rw_lock("catalog")?.name(), "catalog");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The client this handle belongs to.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// println!("{}", client.redisson_rw_lock("catalog")?.client().id());
    /// # Ok(()) }
    /// ```
    pub fn client(&self) -> &LockClient {
        &self.client
    }

    /// The lock hash: the name itself, as in Redisson.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// assert_eq!(client.redisson_rw_lock("catalog")?.key(), "catalog");
    /// # Ok(()) }
    /// ```
    pub fn key(&self) -> &str {
        &self.keys.hash
    }

    /// The channel readers and writers listen on, Redisson's and this library's alike.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let catalog = client.redisson_rw_lock("catalog")?;
    /// assert_eq!(catalog.channel(), "redisson_rwlock:{catalog}");
    /// # Ok(()) }
    /// ```
    // The keys serve both of Redisson's lock layouts; this one's channel is `rw_channel`.
    #[allow(clippy::misnamed_getters)]
    pub fn channel(&self) -> &str {
        &self.keys.rw_channel
    }

    /// The explicit owner of this handle, if any.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// assert_eq!(client.redisson_rw_lock("catalog")?.owner(), None);
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    /// A handle whose holds have a fixed lease instead of the watchdog's renewal.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let catalog = client.redisson_rw_lock("catalog")?.with_lease(Duration::from_secs(10))?;
    /// # Ok(()) }
    /// ```
    pub fn with_lease(&self, lease: Duration) -> Result<Self> {
        let ms = keys::validate_ms("lease", lease)?;
        Ok(RedissonRwLock {
            mode: LeaseMode::Fixed(Duration::from_millis(ms)),
            ..self.clone()
        })
    }

    /// A handle whose holds the watchdog renews (the default).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let fixed = client.redisson_rw_lock("catalog")?.with_lease(Duration::from_secs(10))?;
    /// let renewed = fixed.with_watchdog();
    /// # Ok(()) }
    /// ```
    pub fn with_watchdog(&self) -> Self {
        RedissonRwLock {
            mode: LeaseMode::Watchdog,
            ..self.clone()
        }
    }

    /// A handle that acquires for an explicit owner id (the hash field). Owner ids are as
    /// good as passwords.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let catalog = client.redisson_rw_lock("catalog")?.with_owner("importer-2")?;
    /// assert_eq!(catalog.owner(), Some("importer-2"));
    /// # Ok(()) }
    /// ```
    pub fn with_owner(&self, owner: impl Into<String>) -> Result<Self> {
        let owner = owner.into();
        keys::validate_owner(&owner)?;
        Ok(RedissonRwLock {
            owner: Some(owner.into()),
            ..self.clone()
        })
    }

    /// Takes a read hold, waiting without limit.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let read = client.redisson_rw_lock("catalog")?.read().await?;
    /// read.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn read(&self) -> Result<RedissonRwGuard> {
        self.wait_forever(RwKind::Read).await
    }

    /// Takes a read hold if no writer holds the lock, without waiting.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// if let Some(read) = client.redisson_rw_lock("catalog")?.try_read().await? {
    ///     read.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn try_read(&self) -> Result<Option<RedissonRwGuard>> {
        self.acquire_until(RwKind::Read, Some(Duration::ZERO), None)
            .await
    }

    /// Takes a read hold, waiting at most `wait`.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let catalog = client.redisson_rw_lock("catalog")?;
    /// if let Some(read) = catalog.try_read_for(Duration::from_secs(5)).await? {
    ///     read.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn try_read_for(&self, wait: Duration) -> Result<Option<RedissonRwGuard>> {
        keys::validate_wait(wait)?;
        self.acquire_until(RwKind::Read, Some(wait), None).await
    }

    /// A read hold within `wait`, else [`Error::Timeout`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let read = client.redisson_rw_lock("catalog")?.read_timeout(Duration::from_secs(5)).await?;
    /// read.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`RedissonRwLock::try_read_for`].
    pub async fn read_timeout(&self, wait: Duration) -> Result<RedissonRwGuard> {
        let got = self.try_read_for(wait).await?;
        keys::or_timeout(got, &self.name, wait)
    }

    /// Takes the write hold, waiting without limit.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let write = client.redisson_rw_lock("catalog")?.write().await?;
    /// write.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn write(&self) -> Result<RedissonRwGuard> {
        self.wait_forever(RwKind::Write).await
    }

    /// Takes the write hold if nobody holds the lock, without waiting.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// if let Some(write) = client.redisson_rw_lock("catalog")?.try_write().await? {
    ///     write.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn try_write(&self) -> Result<Option<RedissonRwGuard>> {
        self.acquire_until(RwKind::Write, Some(Duration::ZERO), None)
            .await
    }

    /// Takes the write hold, waiting at most `wait`.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let catalog = client.redisson_rw_lock("catalog")?;
    /// if let Some(write) = catalog.try_write_for(Duration::from_secs(5)).await? {
    ///     write.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn try_write_for(&self, wait: Duration) -> Result<Option<RedissonRwGuard>> {
        keys::validate_wait(wait)?;
        self.acquire_until(RwKind::Write, Some(wait), None).await
    }

    /// The write hold within `wait`, else [`Error::Timeout`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let write = client.redisson_rw_lock("catalog")?.write_timeout(Duration::from_secs(5)).await?;
    /// write.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`RedissonRwLock::try_write_for`].
    pub async fn write_timeout(&self, wait: Duration) -> Result<RedissonRwGuard> {
        let got = self.try_write_for(wait).await?;
        keys::or_timeout(got, &self.name, wait)
    }

    /// Runs `body` holding a read, then releases (the body is stopped and the result is
    /// [`Error::LockLost`] if the hold is lost meanwhile).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let n = client.redisson_rw_lock("catalog")?.run_read(async |_read| 3).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the future stops the body and releases in the background.
    pub async fn run_read<T>(&self, body: impl AsyncFnOnce(&RedissonRwGuard) -> T) -> Result<T> {
        self.read().await?.scoped(body).await
    }

    /// Runs `body` holding the write, then releases (see [`RedissonRwLock::run_read`]).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// client.redisson_rw_lock("catalog")?.run_write(async |_write| ()).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the future stops the body and releases in the background.
    pub async fn run_write<T>(&self, body: impl AsyncFnOnce(&RedissonRwGuard) -> T) -> Result<T> {
        self.write().await?.scoped(body).await
    }

    /// Whether anyone holds the lock, reading or writing.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// if client.redisson_rw_lock("catalog")?.is_locked().await? {
    ///     println!("held");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn is_locked(&self) -> Result<bool> {
        Ok(self.state().await?.mode.is_some())
    }

    /// How long the lock lives on unless renewed (`None`: nobody holds it).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// if let Some(ttl) = client.redisson_rw_lock("catalog")?.remaining_ttl().await? {
    ///     println!("expires in {ttl:?} unless renewed");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn remaining_ttl(&self) -> Result<Option<Duration>> {
        Ok(self.state().await?.remaining)
    }

    /// The mode, the readers and the writer, and the remaining TTL.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let state = client.redisson_rw_lock("catalog")?.state().await?;
    /// println!("{} reader(s)", state.readers.len());
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn state(&self) -> Result<RedissonRwLockState> {
        let reply = self
            .client
            .inner
            .calls
            .read(&state_call(&self.keys))
            .await?;
        match decode_state(&reply).map_err(Error::UnexpectedReply)? {
            RedissonFound::Free => Ok(RedissonRwLockState::default()),
            RedissonFound::NotALock(found) => Err(self.wrong_type(found)),
            RedissonFound::Held { pttl, holders } => {
                let mut state = RedissonRwLockState {
                    remaining: pttl.map(Duration::from_millis),
                    ..RedissonRwLockState::default()
                };
                for (field, count) in holders {
                    if field == "mode" {
                        continue;
                    }
                    match field.strip_suffix(":write") {
                        Some(owner) => state.writer = Some((owner.to_owned(), count)),
                        None => state.readers.push((field, count)),
                    }
                }
                // The mode's value is not a count: read it from who holds.
                state.mode = if state.writer.is_some() {
                    Some(RwKind::Write)
                } else if state.readers.is_empty() {
                    None
                } else {
                    Some(RwKind::Read)
                };
                Ok(state)
            }
        }
    }

    /// Deletes the lock whoever holds it, readers or writer, Java or Rust, and wakes every
    /// waiter of both sides (Redisson's `forceUnlock` of the side that holds it). Returns
    /// whether there was a lock. Holders on this side find out at their next renewal
    /// (their lost signal fires) or at their release ([`Error::LockLost`]).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// if client.redisson_rw_lock("catalog")?.force_unlock().await? {
    ///     println!("freed");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// A cancelled call may or may not have deleted the lock.
    pub async fn force_unlock(&self) -> Result<bool> {
        let reply = self
            .client
            .inner
            .calls
            .eval(&crate::protocol::redisson::force_unlock_call(&self.keys))
            .await?;
        match reply {
            Reply::Int(1) => Ok(true),
            Reply::Int(0) => Ok(false),
            Reply::Int(-2) => Err(self.wrong_type(String::new())),
            other => Err(Error::UnexpectedReply(format!(
                "redisson_force_unlock: {other:?}"
            ))),
        }
    }

    async fn wait_forever(&self, kind: RwKind) -> Result<RedissonRwGuard> {
        match self.acquire_until(kind, None, None).await? {
            Some(guard) => Ok(guard),
            None => Err(Error::UnexpectedReply(
                "Redisson-layout read-write lock wait without limit ended without a hold".into(),
            )),
        }
    }

    fn wrong_type(&self, found: String) -> Error {
        Error::WrongType {
            key: self.keys.hash.to_string(),
            found: if found.is_empty() {
                "a key that is not a Redisson read-write lock hash".into()
            } else {
                found
            },
        }
    }

    /// Acquires a hold of `kind` within `wait` for `owner` (a guard's owner, through its
    /// hold: granted only while that owner still holds), else the handle's owner or a
    /// fresh one.
    async fn acquire_until(
        &self,
        kind: RwKind,
        wait: Option<Duration>,
        owner: Option<(Arc<str>, Arc<str>)>,
    ) -> Result<Option<RedissonRwGuard>> {
        let inner = &self.client.inner;
        let (owner, joins) = match owner {
            Some((owner, hold)) => (Some(owner), Some(hold)),
            None => (None, None),
        };
        let explicit_owner = owner.is_some() || self.owner.is_some();
        let owner = owner
            .or_else(|| self.owner.clone())
            .unwrap_or_else(|| inner.calls.next_owner());
        let attempt = Attempt {
            hold: hold_id(&owner, &inner.calls.next_request_id()),
            owner,
            waits: wait != Some(Duration::ZERO),
            explicit_owner,
            joins,
        };
        let side = RedissonRwSide {
            lock: self.clone(),
            kind,
        };
        held::acquire_until(&side, attempt, wait).await
    }

    fn response_ms(&self) -> Millis {
        self.client.inner.calls.response_timeout.as_millis() as Millis
    }
}

/// One side (read or write) of the lock, as the shared machinery sees it.
#[derive(Clone)]
struct RedissonRwSide {
    lock: RedissonRwLock,
    kind: RwKind,
}

impl SetKind for RedissonRwSide {
    const KIND: &'static str = "redisson_rwlock";
    type Handle = RedissonRwLock;

    fn guarded(&self) -> (RedissonRwLock, RwKind) {
        (self.lock.clone(), self.kind)
    }

    fn client(&self) -> &LockClient {
        &self.lock.client
    }

    fn name(&self) -> &Arc<str> {
        &self.lock.name
    }

    fn lease_mode(&self) -> LeaseMode {
        self.lock.mode
    }

    fn set_key(&self) -> &Arc<str> {
        &self.lock.keys.hash
    }

    fn shape(&self) -> HoldShape {
        match self.kind {
            RwKind::Read => HoldShape::RedissonRead,
            RwKind::Write => HoldShape::RedissonWrite,
        }
    }

    fn channel(&self, _attempt: &Attempt) -> Arc<str> {
        self.lock.keys.rw_channel.clone()
    }

    fn wait_policy(&self, timing: WaitTiming) -> WaitPolicy {
        // Readers share a wake-up (a write release lets every reader in); writers take
        // one each.
        let mut policy = WaitPolicy::redisson(timing);
        policy.shares = self.kind == RwKind::Read;
        policy
    }

    fn attempt_call(&self, attempt: &Attempt) -> Call {
        let record_ms = crate::protocol::redisson::acquire_record_ms(self.lock.response_ms());
        rw_acquire_call(
            &self.lock.keys,
            &attempt.owner,
            &attempt.hold,
            self.kind,
            self.lease_ms(),
            record_ms,
            attempt.joins.is_some(),
        )
    }

    fn decode(&self, reply: &Reply) -> std::result::Result<Attempted, String> {
        decode_rw_acquire(reply)
    }

    fn give_back_call(&self, hold: &Arc<str>, _hold_too: bool, leaving: bool) -> Call {
        let inner = &self.lock.client.inner;
        let record_ms = crate::protocol::redisson::release_record_ms(
            self.lease_ms(),
            inner.watchdog_timeout.as_millis() as Millis,
            self.lock.response_ms(),
        );
        let owner: Arc<str> = owner_of(hold).into();
        rw_release_call(&self.lock.keys, &owner, hold, self.kind, leaving, record_ms)
    }

    fn wrong_type(&self, found: String) -> Error {
        self.lock.wrong_type(found)
    }
}

/// A read or write hold of a [`RedissonRwLock`]: the one [`Guard`] of every kind, with
/// [`kind`](Guard::kind), [`reenter`](Guard::reenter), [`read`](Guard::read) (a
/// downgrade through a write) and [`write`](Guard::write).
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
/// use redis_locks::RedissonRwGuard;
/// let write: RedissonRwGuard = client.redisson_rw_lock("catalog")?.write().await?;
/// assert!(write.is_write());
/// write.release().await?;
/// # Ok(()) }
/// ```
pub type RedissonRwGuard = Guard<RedissonRwLock>;

impl sealed::Sealed for RedissonRwLock {}

impl GuardKind for RedissonRwLock {
    /// Read or write.
    type Detail = RwKind;
    const GUARD: &'static str = "RedissonRwGuard";
}

impl Guard<RedissonRwLock> {
    /// Read or write.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::RwKind;
    /// let read = client.redisson_rw_lock("catalog")?.read().await?;
    /// assert_eq!(read.kind(), RwKind::Read);
    /// # read.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn kind(&self) -> RwKind {
        self.detail
    }

    /// Whether this is a write hold.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let write = client.redisson_rw_lock("catalog")?.write().await?;
    /// assert!(write.is_write());
    /// # write.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn is_write(&self) -> bool {
        self.kind() == RwKind::Write
    }

    async fn join(&self, kind: RwKind) -> Result<RedissonRwGuard> {
        self.ensure_not_lost()?;
        let through = Some((self.core.owner.clone(), self.core.hold.clone()));
        match self
            .handle
            .acquire_until(kind, Some(Duration::ZERO), through)
            .await?
        {
            Some(guard) => Ok(guard),
            None => Err(self.lost_error()),
        }
    }

    /// Another hold of the same kind for the same owner. Never waits.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let read = client.redisson_rw_lock("catalog")?.read().await?;
    /// let nested = read.reenter().await?; // the owner's read count is 2
    /// nested.release().await?;
    /// read.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn reenter(&self) -> Result<RedissonRwGuard> {
        self.join(self.kind()).await
    }

    /// A read for the same owner: a re-entry of a read, or through a write a downgrade
    /// (Redisson's: the write's owner may read while it writes). Never waits.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let write = client.redisson_rw_lock("catalog")?.write().await?;
    /// let read = write.read().await?; // downgrade
    /// write.release().await?;         // the mode becomes read: other readers may join
    /// read.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn read(&self) -> Result<RedissonRwGuard> {
        self.join(RwKind::Read).await
    }

    /// A write for the same owner: a re-entry of a write. Through a read hold it is
    /// [`Error::WouldDeadlock`] at once: the write would wait for this very read.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::Error;
    /// let read = client.redisson_rw_lock("catalog")?.read().await?;
    /// assert!(matches!(read.write().await, Err(Error::WouldDeadlock { .. })));
    /// # read.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe.
    pub async fn write(&self) -> Result<RedissonRwGuard> {
        if self.kind() == RwKind::Read {
            return Err(Error::WouldDeadlock {
                name: self.name().to_string(),
                reason: "a read holder asks for the write lock (no upgrade)",
            });
        }
        self.join(RwKind::Write).await
    }
}
