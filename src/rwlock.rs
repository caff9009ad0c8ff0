//! The read-write lock: many readers or one writer, reentrant per owner, with writer
//! preference, per-hold expiry, renewal by the client's watchdog, and lost signals.
//!
//! Layout (one slot, the name's hash tag): the sorted sets `<prefix>:{<name>}:rw:write`
//! and `<prefix>:{<name>}:rw:read` (one member per hold, scored by its deadline on Redis's
//! clock; each set's expiry follows its latest deadline, so nothing outlives the last
//! hold), the string `<prefix>:{<name>}:rw:writer-waiting` (the reservation of the writer
//! waiting for the readers to leave; it lapses unless renewed), the fencing counter
//! `<prefix>:{<name>}:rw:fence`, and two wake-up channels, `…:rw:db<n>:read` and
//! `…:rw:db<n>:write`, so that a release wakes only those who can now proceed. Scripts:
//! `lua/rw_acquire.lua`, `lua/rw_release.lua`, `lua/rw_state.lua`; renewal is
//! `lua/sem_renew.lua`'s (a hold renews like a one-permit semaphore acquisition).
//!
//! Each hold has its own id and deadline, so a crashed reader's hold ages out within its
//! lease whatever the other readers do, a stale guard can only give back its own hold,
//! and a retried acquire finds the hold an earlier copy took.

use std::sync::Arc;
use std::time::Duration;

use crate::client::LockClient;
use crate::error::{Error, Result};
use crate::guard::{Guard, GuardKind, sealed};
use crate::held::{self, Attempt, SetKind};
use crate::keys;
use crate::owner::fingerprint;
use crate::protocol::attempted::Attempted;
use crate::protocol::rwlock::{RwAcquire, RwKeys, RwKind, hold_id, release_call, state_call};
use crate::protocol::wait::{WaitPolicy, WaitTiming};
use crate::protocol::{Call, Reply};
use crate::watchdog::LeaseMode;

/// How long a waiting writer's reservation lasts without being renewed by its next
/// attempt: a writer that died or gave up stops holding readers back after this long.
const RESERVATION: Duration = Duration::from_secs(2);

/// A read-write lock: any number of read holds at once, or one owner's write holds.
/// Cheap to clone. Obtain one with [`LockClient::rw_lock`].
///
/// * **Owners and reentrancy.** As with [`Lock`](crate::Lock), every acquire of a handle
///   without an explicit owner is a new owner; nesting goes through the guard
///   ([`RwGuard::reenter`], [`RwGuard::read`], [`RwGuard::write`]). A write holder may
///   read (downgrade: take a read through the write guard, then release the write). A
///   read holder asking for the write lock gets [`Error::WouldDeadlock`] at once.
/// * **Writer preference.** A waiting writer that finds readers reserves the lock: new
///   readers wait (re-entries of live reads excepted) until that writer has had its turn,
///   so a stream of readers cannot starve writers. The reservation lapses 2 s after the
///   writer stops asking (it died or gave up).
/// * **Expiry.** Every hold has its own deadline on Redis's clock, renewed by the
///   client's watchdog while its guard lives (or a fixed lease, [`RwLock::with_lease`]);
///   a crashed holder's hold ages out within its lease.
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> Result<(), redis_locks::Error> {
/// let config = client.rw_lock("config")?;
/// let read = config.read().await?;         // shared with other readers
/// // ... read the configuration ...
/// read.release().await?;
/// let write = config.write().await?;       // waits for the readers to leave
/// // ... change it; `write.lost()` fires if the hold is lost ...
/// write.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RwLock {
    client: LockClient,
    name: Arc<str>,
    keys: RwKeys,
    mode: LeaseMode,
    owner: Option<Arc<str>>,
    fenced: bool,
}

impl std::fmt::Debug for RwLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RwLock")
            .field("name", &self.name)
            .field("owner", &fingerprint(self.owner.as_deref()))
            .field("mode", &self.mode)
            .field("fenced", &self.fenced)
            .finish_non_exhaustive()
    }
}

impl LockClient {
    /// A handle to the read-write lock called `name`. Validates the name; does not talk
    /// to Redis. Its keys are distinct from the [`Lock`](crate::Lock) of the same name.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let catalog = client.rw_lock("catalog")?;
    /// let read = catalog.read().await?; // many readers at once
    /// // ... serve prices from the catalog ...
    /// read.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn rw_lock(&self, name: &str) -> Result<RwLock> {
        keys::validate_name(name)?;
        let inner = &self.inner;
        Ok(RwLock {
            client: self.clone(),
            name: name.into(),
            keys: RwKeys::new(
                &inner.layout.prefix,
                inner.layout.db,
                inner.layout.sharded,
                name,
            ),
            mode: LeaseMode::Watchdog,
            owner: None,
            fenced: false,
        })
    }
}

/// What a read-write lock looks like now ([`RwLock::state`]).
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
/// let state = client.rw_lock("catalog")?.state().await?;
/// println!(
///     "{} read(s), {} write(s), writer waiting: {}",
///     state.reads, state.writes, state.writer_waiting
/// );
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RwLockState {
    /// Live write holds (all of one owner).
    pub writes: u64,
    /// The owner of the write holds, if any.
    pub writer: Option<String>,
    /// Live read holds (of any owners).
    pub reads: u64,
    /// Whether a writer is waiting with a reservation (new readers then wait too).
    pub writer_waiting: bool,
    /// How long the latest hold has left, if any.
    pub remaining: Option<Duration>,
}

impl RwLockState {
    /// Whether anyone holds the lock.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let state = client.rw_lock("catalog")?.state().await?;
    /// if state.is_locked() && state.writes == 0 {
    ///     println!("only readers");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_locked(&self) -> bool {
        self.writes + self.reads > 0
    }
}

impl RwLock {
    /// The lock's name.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// assert_eq!(client.rw_lock("catalog")?.name(), "catalog");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The client this handle belongs to.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let catalog = client.rw_lock("catalog")?;
    /// println!("through client {}", catalog.client().id());
    /// # Ok(()) }
    /// ```
    pub fn client(&self) -> &LockClient {
        &self.client
    }

    /// The sorted set of its write holds.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let catalog = client.rw_lock("catalog")?;
    /// println!("writes in {}, reads in {}", catalog.write_key(), catalog.read_key());
    /// # Ok(()) }
    /// ```
    pub fn write_key(&self) -> &str {
        &self.keys.write
    }

    /// The sorted set of its read holds.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let catalog = client.rw_lock("catalog")?;
    /// println!("read holds are the members of {}", catalog.read_key());
    /// # Ok(()) }
    /// ```
    pub fn read_key(&self) -> &str {
        &self.keys.read
    }

    /// The explicit owner of this handle, if any.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let catalog = client.rw_lock("catalog")?;
    /// assert_eq!(catalog.owner(), None);
    /// assert_eq!(catalog.with_owner("importer-2")?.owner(), Some("importer-2"));
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    /// A handle whose holds have a fixed lease instead of the watchdog's renewal: each
    /// expires `lease` after its acquire (its guard's lost signal fires then).
    /// Redis counts whole milliseconds, so a fraction rounds up (1.9 ms is 2 ms), as for
    /// [`Lock::with_lease`](crate::Lock::with_lease).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// // Each read or write expires 10 s after it was taken; never renewed.
    /// let catalog = client.rw_lock("catalog")?.with_lease(Duration::from_secs(10))?;
    /// let read = catalog.read().await?;
    /// # read.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_lease(&self, lease: Duration) -> Result<Self> {
        let ms = keys::validate_ms("lease", lease)?;
        Ok(RwLock {
            mode: LeaseMode::Fixed(Duration::from_millis(ms)),
            ..self.clone()
        })
    }

    /// A handle whose holds the watchdog renews (the default).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let fixed = client.rw_lock("catalog")?.with_lease(Duration::from_secs(10))?;
    /// let write = fixed.with_watchdog().write().await?; // renewed while held
    /// assert!(write.is_watchdog_leased());
    /// # write.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_watchdog(&self) -> Self {
        RwLock {
            mode: LeaseMode::Watchdog,
            ..self.clone()
        }
    }

    /// A handle that acquires for an explicit owner id: every handle with that id shares
    /// its holds (its reads let it read again while a writer waits; a write asked while
    /// it reads is [`Error::WouldDeadlock`]). Owner ids are as good as passwords.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::Error;
    /// let catalog = client.rw_lock("catalog")?.with_owner("importer-2")?;
    /// let read = catalog.read().await?;
    /// // No upgrade: the write would wait for this very read.
    /// assert!(matches!(catalog.write().await, Err(Error::WouldDeadlock { .. })));
    /// read.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_owner(&self, owner: impl Into<String>) -> Result<Self> {
        let owner = owner.into();
        keys::validate_owner(&owner)?;
        Ok(RwLock {
            owner: Some(owner.into()),
            ..self.clone()
        })
    }

    /// A handle whose write holds carry a fencing token
    /// ([`RwGuard::fencing_token`]): `max(counter + 1, Redis time in µs)`, so tokens only
    /// go up, as for [`Lock::with_fencing`](crate::Lock::with_fencing). A re-entered write
    /// keeps its token; reads have none.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let write = client.rw_lock("catalog")?.with_fencing().write().await?;
    /// let token = write.fencing_token().expect("a fenced write");
    /// // the store refuses writes with a token lower than one it has seen
    /// write.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_fencing(&self) -> Self {
        RwLock {
            fenced: true,
            ..self.clone()
        }
    }

    /// Takes a read hold, waiting without limit.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let read = client.rw_lock("catalog")?.read().await?; // waits while a writer holds or waits
    /// // ... read the catalog ...
    /// read.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn read(&self) -> Result<RwGuard> {
        self.wait_forever(RwKind::Read).await
    }

    /// Takes a read hold if no writer holds or waits.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// match client.rw_lock("catalog")?.try_read().await? {
    ///     Some(read) => read.release().await?,
    ///     None => println!("a writer holds or waits for the catalog; serve the cached copy"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn try_read(&self) -> Result<Option<RwGuard>> {
        self.acquire_until(RwKind::Read, Some(Duration::ZERO), None, None)
            .await
    }

    /// Takes a read hold, waiting at most `wait`.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let catalog = client.rw_lock("catalog")?;
    /// if let Some(read) = catalog.try_read_for(Duration::from_millis(200)).await? {
    ///     // ... read ...
    ///     read.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn try_read_for(&self, wait: Duration) -> Result<Option<RwGuard>> {
        keys::validate_wait(wait)?;
        self.acquire_until(RwKind::Read, Some(wait), None, None)
            .await
    }

    /// Takes the write hold, waiting without limit.
    ///
    /// Errors: [`Error::WouldDeadlock`] when this handle's explicit owner holds reads;
    /// [`Error::WrongType`]; [`Error::Redis`].
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let write = client.rw_lock("catalog")?.write().await?; // waits for the readers to leave
    /// // ... import the new prices ...
    /// write.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone, and the waiter's
    /// reservation, are given back.
    pub async fn write(&self) -> Result<RwGuard> {
        self.wait_forever(RwKind::Write).await
    }

    /// Takes the write hold if nobody else holds the lock.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// match client.rw_lock("catalog")?.try_write().await? {
    ///     Some(write) => write.release().await?,
    ///     None => println!("readers or a writer hold the catalog; import later"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn try_write(&self) -> Result<Option<RwGuard>> {
        self.acquire_until(RwKind::Write, Some(Duration::ZERO), None, None)
            .await
    }

    /// Takes the write hold, waiting at most `wait`.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let catalog = client.rw_lock("catalog")?;
    /// match catalog.try_write_for(Duration::from_secs(5)).await? {
    ///     Some(write) => write.release().await?,
    ///     None => println!("still read after 5 s"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone, and the waiter's
    /// reservation, are given back.
    pub async fn try_write_for(&self, wait: Duration) -> Result<Option<RwGuard>> {
        keys::validate_wait(wait)?;
        self.acquire_until(RwKind::Write, Some(wait), None, None)
            .await
    }

    /// Runs `body` holding a read: acquires (waiting without limit), runs the body with
    /// the guard and releases; the body is stopped and the result is
    /// [`Error::LockLost`] if the hold is lost meanwhile (see [`Lock::run`](crate::Lock::run)).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let price = client
    ///     .rw_lock("catalog")?
    ///     .run_read(async |_read| {
    ///         // ... look the price up ...
    ///         1999
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the future stops the body and releases the hold in the
    /// background.
    pub async fn run_read<T>(&self, body: impl AsyncFnOnce(&RwGuard) -> T) -> Result<T> {
        self.read().await?.scoped(body).await
    }

    /// Runs `body` holding the write; see [`RwLock::run_read`].
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// client
    ///     .rw_lock("catalog")?
    ///     .run_write(async |write| {
    ///         // ... import the new prices, passing the token to the store ...
    ///         let _token = write.fencing_token();
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`RwLock::run_read`].
    pub async fn run_write<T>(&self, body: impl AsyncFnOnce(&RwGuard) -> T) -> Result<T> {
        self.write().await?.scoped(body).await
    }

    /// Waits at most `wait` for a read, then fails with [`Error::Timeout`] (zero tries
    /// once).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::Error;
    /// match client.rw_lock("catalog")?.read_timeout(Duration::from_millis(500)).await {
    ///     Ok(read) => read.release().await?,
    ///     Err(Error::Timeout { .. }) => println!("an import is running; serve the cached copy"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`RwLock::try_read_for`].
    pub async fn read_timeout(&self, wait: Duration) -> Result<RwGuard> {
        let got = self.try_read_for(wait).await?;
        keys::or_timeout(got, &self.name, wait)
    }

    /// Waits at most `wait` for the write, then fails with [`Error::Timeout`] (zero tries
    /// once).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::Error;
    /// match client.rw_lock("catalog")?.write_timeout(Duration::from_secs(10)).await {
    ///     Ok(write) => write.release().await?,
    ///     Err(Error::Timeout { .. }) => println!("readers kept it for 10 s; import postponed"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`RwLock::try_write_for`].
    pub async fn write_timeout(&self, wait: Duration) -> Result<RwGuard> {
        let got = self.try_write_for(wait).await?;
        keys::or_timeout(got, &self.name, wait)
    }

    /// Whether anyone holds a read or the write.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// if client.rw_lock("catalog")?.is_locked().await? {
    ///     println!("someone reads or writes the catalog");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn is_locked(&self) -> Result<bool> {
        Ok(self.state().await?.is_locked())
    }

    /// How long the holds live on (`None`: nobody holds one). Redisson's
    /// `remainTimeToLive`.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// if let Some(ttl) = client.rw_lock("catalog")?.remaining_ttl().await? {
    ///     println!("the latest hold expires in {ttl:?} unless renewed");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn remaining_ttl(&self) -> Result<Option<Duration>> {
        Ok(self.state().await?.remaining)
    }

    /// Deletes every hold of the lock (the write and the reads), whoever holds them, and
    /// wakes its waiters. Returns whether any hold was live. The fencing counter stays
    /// (tokens keep going up), and so does a waiting writer's reservation. Holders find
    /// out at their next renewal (their lost signal fires) or at their release
    /// ([`Error::LockLost`]). For an operator clearing a stuck lock
    /// (`redis-locks unlock --force`).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// // An import crashed in a way that left its write held: clear every hold.
    /// if client.rw_lock("catalog")?.force_unlock().await? {
    ///     println!("cleared; the holders are told at their next renewal");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// A cancelled call may or may not have deleted the holds.
    pub async fn force_unlock(&self) -> Result<bool> {
        let call = crate::protocol::force::rwlock_call(&self.keys);
        let deleted = crate::held::force_delete(&self.client, &call).await?;
        deleted
            .map(|holds| holds > 0)
            .map_err(|found| self.wrong_type(found))
    }

    /// The holds, the writer and whether a writer waits.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let state = client.rw_lock("catalog")?.state().await?;
    /// if state.writer_waiting {
    ///     println!("a writer waits for {} reader(s) to leave", state.reads);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn state(&self) -> Result<RwLockState> {
        let reply = self
            .client
            .inner
            .calls
            .read(&state_call(&self.keys))
            .await?;
        let bad = || Error::UnexpectedReply(format!("rw_state.lua: {reply:?}"));
        let Reply::Array(items) = &reply else {
            return Err(bad());
        };
        match items.as_slice() {
            [
                Reply::Int(writes),
                writer,
                Reply::Int(reads),
                Reply::Int(waiting),
                Reply::Int(latest),
            ] => Ok(RwLockState {
                writes: (*writes).max(0) as u64,
                writer: writer.text().filter(|owner| !owner.is_empty()),
                reads: (*reads).max(0) as u64,
                writer_waiting: *waiting > 0,
                remaining: (*latest > 0).then(|| Duration::from_millis(*latest as u64)),
            }),
            [Reply::Int(-2), what] => Err(self.wrong_type(what.text().unwrap_or_default())),
            _ => Err(bad()),
        }
    }

    async fn wait_forever(&self, kind: RwKind) -> Result<RwGuard> {
        match self.acquire_until(kind, None, None, None).await? {
            Some(guard) => Ok(guard),
            None => Err(Error::UnexpectedReply(
                "read-write lock wait without limit ended without a hold".into(),
            )),
        }
    }

    fn wrong_type(&self, found: String) -> Error {
        Error::WrongType {
            key: self.keys.write.to_string(),
            found: if found.is_empty() {
                "keys that are not a read-write lock".into()
            } else {
                found
            },
        }
    }

    /// Acquires a hold of `kind` within `wait` (`None`: no limit; zero: one attempt), for `owner` (the
    /// handle's owner, or a fresh one), re-entering through the live hold `joins`.
    async fn acquire_until(
        &self,
        kind: RwKind,
        wait: Option<Duration>,
        owner: Option<Arc<str>>,
        joins: Option<Arc<str>>,
    ) -> Result<Option<RwGuard>> {
        let inner = &self.client.inner;
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
        let side = RwSide {
            lock: self.clone(),
            kind,
        };
        held::acquire_until(&side, attempt, wait).await
    }
}

/// One side (read or write) of a read-write lock, as the shared machinery sees it.
#[derive(Clone)]
struct RwSide {
    lock: RwLock,
    kind: RwKind,
}

impl SetKind for RwSide {
    const KIND: &'static str = "rwlock";
    type Handle = RwLock;

    fn guarded(&self) -> (RwLock, RwKind) {
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
        self.lock.keys.set_of(self.kind)
    }

    fn channel(&self, _attempt: &Attempt) -> Arc<str> {
        self.lock.keys.channel_of(self.kind).clone()
    }

    fn wait_policy(&self, timing: WaitTiming) -> WaitPolicy {
        WaitPolicy::read_write(self.kind == RwKind::Read, timing)
    }

    fn attempt_call(&self, attempt: &Attempt) -> Call {
        self.request(attempt).call(&self.lock.keys)
    }

    fn decode(&self, reply: &Reply) -> std::result::Result<Attempted, String> {
        let probe = RwAcquire {
            hold: "".into(),
            owner: "".into(),
            kind: self.kind,
            lease_ms: 0,
            waits: false,
            explicit_owner: false,
            fenced: self.lock.fenced,
            joins: None,
            reservation_ms: 0,
        };
        Ok(probe.decode(reply)?.attempted())
    }

    fn give_back_call(&self, hold: &Arc<str>, hold_too: bool, leaving: bool) -> Call {
        release_call(
            &self.lock.keys,
            hold,
            hold_too.then_some(self.kind),
            leaving,
        )
    }

    fn wrong_type(&self, found: String) -> Error {
        self.lock.wrong_type(found)
    }
}

impl RwSide {
    fn request(&self, attempt: &Attempt) -> RwAcquire {
        RwAcquire {
            hold: attempt.hold.clone(),
            owner: attempt.owner.clone(),
            kind: self.kind,
            lease_ms: self.lease_ms(),
            waits: attempt.waits,
            explicit_owner: attempt.explicit_owner,
            fenced: self.lock.fenced,
            joins: attempt.joins.clone(),
            reservation_ms: RESERVATION.as_millis() as u64,
        }
    }
}

/// A read or write hold of an [`RwLock`]: the one [`Guard`] of every kind (see it for what
/// every guard does), with the read-write lock's own methods ([`kind`](Guard::kind),
/// [`reenter`](Guard::reenter), [`read`](Guard::read), [`write`](Guard::write)).
/// Released in the background when dropped; prefer [`release`](Guard::release), which
/// reports the outcome.
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
/// use redis_locks::RwGuard;
/// let write: RwGuard = client.rw_lock("catalog")?.write().await?;
/// assert!(write.is_write());
/// write.release().await?;
/// # Ok(()) }
/// ```
pub type RwGuard = Guard<RwLock>;

impl sealed::Sealed for RwLock {}

impl GuardKind for RwLock {
    /// Read or write.
    type Detail = RwKind;
    const GUARD: &'static str = "RwGuard";
}

impl Guard<RwLock> {
    /// Read or write.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::RwKind;
    /// let read = client.rw_lock("catalog")?.read().await?;
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
    /// let catalog = client.rw_lock("catalog")?;
    /// let read = catalog.read().await?;
    /// assert!(!read.is_write());
    /// # read.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn is_write(&self) -> bool {
        self.kind() == RwKind::Write
    }

    /// One attempt of `kind` for this guard's owner, re-entering through this hold.
    async fn join(&self, kind: RwKind) -> Result<RwGuard> {
        self.ensure_not_lost()?;
        let joins = (self.kind() == RwKind::Read).then(|| self.core.hold.clone());
        let owner = Some(self.core.owner.clone());
        match self
            .handle
            .acquire_until(kind, Some(Duration::ZERO), owner, joins)
            .await?
        {
            Some(guard) => Ok(guard),
            // Only another owner's write could stand in the way, and it cannot exist
            // while this hold lives: the hold is gone.
            None => Err(self.lost_error()),
        }
    }

    /// Another hold of the same kind for the same owner, with this handle's lease terms:
    /// a nested critical section. Never waits (this hold already lets it in).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let read = client.rw_lock("catalog")?.read().await?;
    /// let nested = read.reenter().await?; // another read, even while a writer waits
    /// nested.release().await?;
    /// read.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn reenter(&self) -> Result<RwGuard> {
        self.join(self.kind()).await
    }

    /// A read hold for the same owner: a re-entry of a read, or, through a write hold, a
    /// downgrade (take the read, then release the write: other readers may then join,
    /// and no writer can get in between). Never waits.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let write = client.rw_lock("catalog")?.write().await?;
    /// // ... import the new prices ...
    /// let read = write.read().await?; // downgrade: no writer can get in between
    /// write.release().await?;         // other readers may join now
    /// // ... check the import ...
    /// read.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn read(&self) -> Result<RwGuard> {
        self.join(RwKind::Read).await
    }

    /// A write hold for the same owner: a re-entry of a write. Through a read hold it is
    /// [`Error::WouldDeadlock`] at once: the write would wait for this very read.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::Error;
    /// let catalog = client.rw_lock("catalog")?;
    /// let write = catalog.write().await?;
    /// let nested = write.write().await?; // a re-entered write
    /// nested.release().await?;
    /// let read = write.read().await?;
    /// assert!(matches!(read.write().await, Err(Error::WouldDeadlock { .. }))); // no upgrade
    /// # read.release().await?; write.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe.
    pub async fn write(&self) -> Result<RwGuard> {
        if self.kind() == RwKind::Read {
            return Err(Error::WouldDeadlock {
                name: self.name().to_string(),
                reason: "a read holder asks for the write lock (no upgrade)",
            });
        }
        self.join(RwKind::Write).await
    }
}
