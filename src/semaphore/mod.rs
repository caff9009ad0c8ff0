//! The semaphore with expiring permits: at most `size` permits out at once, each with its
//! own deadline on Redis's clock, renewed by the client's watchdog while its guard lives
//! (or a fixed lease), and lost with a signal like a lock's hold.
//!
//! Layout (one slot, the name's hash tag): the hash `<prefix>:{<name>}:semaphore` (the
//! size, and the reservation of the waiter the next free permits are kept for), the sorted
//! set `<prefix>:{<name>}:permits` (one member per permit, scored by its deadline; its own
//! expiry follows the latest deadline, so nothing outlives the last permit), and the
//! wake-up channel `<prefix>:{<name>}:semaphore:db<n>:released` (sharded on a cluster).
//! Scripts: `lua/sem_*.lua`.
//!
//! Waiting: a waiter subscribes, retries, and sleeps until a release is announced or for
//! at most the time its attempt named (the earliest permit deadline, or its reservation's
//! renewal), so a lost message costs latency only. Waiters that take several permits at
//! once are not starved by a stream of single-permit takers: the first waiter that cannot
//! be served reserves the next free permits (`lua/sem_acquire.lua`).
//!
//! An acquisition of n permits is a hold of n members on the shared machinery of the
//! kinds kept in sorted sets (`held.rs`): its waiting loop, the give-back of abandoned
//! attempts and the guard's core.

use std::sync::Arc;
use std::time::Duration;

use crate::client::LockClient;
use crate::error::{Error, Result};
use crate::guard::{Guard, GuardKind, sealed};
use crate::held::{self, Attempt};
use crate::keys;
use crate::protocol::Reply;
use crate::protocol::semaphore::{
    SemaphoreKeys, SizeSet, add_call, added, decode_set, set_call, state_call,
};
use crate::watchdog::LeaseMode;

mod permits;

use permits::{Count, Permits};

/// A semaphore whose permits expire. Cheap to clone. Obtain one with
/// [`LockClient::semaphore`].
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> Result<(), redis_locks::Error> {
/// let pool = client.semaphore("gpu-pool")?;
/// pool.try_set_permits(4).await?;             // 4 permits, unless already configured
/// let permit = pool.acquire(2).await?;        // waits; renewed by the watchdog
/// // ... use two GPUs; `permit.lost()` fires if the permits are lost ...
/// permit.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Semaphore {
    client: LockClient,
    name: Arc<str>,
    keys: SemaphoreKeys,
    mode: LeaseMode,
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.name)
            .field("key", &self.keys.hash)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl LockClient {
    /// A handle to the semaphore called `name`. Validates the name; does not talk to
    /// Redis.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let pool = client.semaphore("gpu-pool")?;
    /// pool.try_set_permits(4).await?;
    /// let gpu = pool.acquire(1).await?;
    /// // ... train on one GPU ...
    /// gpu.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self, name: &str) -> Result<Semaphore> {
        keys::validate_name(name)?;
        let inner = &self.inner;
        let base = format!("{}:{{{name}}}", inner.layout.prefix);
        Ok(Semaphore {
            client: self.clone(),
            name: name.into(),
            keys: SemaphoreKeys {
                hash: format!("{base}:semaphore").into(),
                permits: format!("{base}:permits").into(),
                channel: format!("{base}:semaphore:db{}:released", inner.layout.db).into(),
                sharded: inner.layout.sharded,
            },
            mode: LeaseMode::Watchdog,
        })
    }
}

/// The state of a semaphore ([`Semaphore::state`]).
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
/// let state = client.semaphore("gpu-pool")?.state().await?;
/// println!(
///     "size {:?}: {} in use, {} reserved, {} free",
///     state.size, state.in_use, state.reserved, state.available()
/// );
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SemaphoreState {
    /// The number of permits, or `None` if none was set.
    pub size: Option<u64>,
    /// Permits out now (not expired).
    pub in_use: u64,
    /// Permits kept for a waiter that asked for more than were free.
    pub reserved: u64,
}

impl SemaphoreState {
    /// Permits that an acquire could take now.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let pool = client.semaphore("gpu-pool")?;
    /// if pool.state().await?.available() >= 2 {
    ///     println!("a two-GPU job would start at once");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn available(&self) -> u64 {
        self.size
            .unwrap_or(0)
            .saturating_sub(self.in_use + self.reserved)
    }
}

impl Semaphore {
    /// The semaphore's name.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let pool = client.semaphore("gpu-pool")?;
    /// assert_eq!(pool.name(), "gpu-pool");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its size-and-reservation hash key.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let pool = client.semaphore("gpu-pool")?;
    /// println!("size in {}, permits in {}", pool.key(), pool.permits_key());
    /// # Ok(()) }
    /// ```
    pub fn key(&self) -> &str {
        &self.keys.hash
    }

    /// Its permits key (a sorted set).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let pool = client.semaphore("gpu-pool")?;
    /// println!("permits in use are the members of {}", pool.permits_key());
    /// # Ok(()) }
    /// ```
    pub fn permits_key(&self) -> &str {
        &self.keys.permits
    }

    /// A handle whose permits have a fixed lease instead of the watchdog's renewal: they
    /// expire `lease` after each acquire (the guard's lost signal fires then).
    /// Redis counts whole milliseconds, so a fraction rounds up (1.9 ms is 2 ms), as for
    /// [`Lock::with_lease`](crate::Lock::with_lease).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// // Each permit expires 15 minutes after it was taken, renewed or not.
    /// let pool = client.semaphore("gpu-pool")?.with_lease(Duration::from_secs(900))?;
    /// let gpu = pool.acquire(1).await?;
    /// # gpu.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_lease(&self, lease: Duration) -> Result<Self> {
        let ms = keys::validate_ms("lease", lease)?;
        Ok(Semaphore {
            mode: LeaseMode::Fixed(Duration::from_millis(ms)),
            ..self.clone()
        })
    }

    /// A handle whose permits are renewed by the watchdog while their guard lives (the
    /// default): undoes [`with_lease`](Self::with_lease).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let fixed = client.semaphore("gpu-pool")?.with_lease(Duration::from_secs(900))?;
    /// let gpu = fixed.with_watchdog().acquire(1).await?; // renewed while held
    /// assert!(gpu.is_watchdog_leased());
    /// # gpu.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_watchdog(&self) -> Self {
        Semaphore {
            mode: LeaseMode::Watchdog,
            ..self.clone()
        }
    }

    /// Sets the number of permits (at least 1), whether or not one was set before; wakes
    /// waiters (more may fit now). Returns the previous size. Shrinking takes no permit
    /// back: new ones are granted once enough are given back or expire.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// // Two more GPUs were installed.
    /// let previous = client.semaphore("gpu-pool")?.set_permits(6).await?;
    /// println!("resized from {previous:?} to 6");
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancelling after the command was sent may leave the new size set.
    pub async fn set_permits(&self, size: u64) -> Result<Option<u64>> {
        self.set(size, false).await
    }

    /// Sets the number of permits unless one is set already; returns whether it set it.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// // Every service instance runs this at start; the first one sets the size.
    /// let pool = client.semaphore("gpu-pool")?;
    /// if pool.try_set_permits(4).await? {
    ///     println!("configured the pool with 4 permits");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancelling after the command was sent may leave the size set.
    pub async fn try_set_permits(&self, size: u64) -> Result<bool> {
        Ok(self.set(size, true).await?.is_none())
    }

    /// Adds `delta` permits to the size (negative: takes some away; with no size set, the
    /// size becomes `delta`), atomically, and wakes waiters. Returns the new size. Like
    /// [`set_permits`](Self::set_permits), shrinking takes no permit in use back
    /// (Redisson's `addPermits`).
    ///
    /// Errors: [`Error::InvalidConfig`] when the size would end below 1 or above
    /// [`MAX_COUNT`](crate::MAX_COUNT) (nothing is changed); [`Error::WrongType`];
    /// [`Error::Redis`].
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let pool = client.semaphore("gpu-pool")?;
    /// let size = pool.add_permits(2).await?; // two GPUs added
    /// println!("the pool has {size} permits now");
    /// pool.add_permits(-1).await?;           // one taken out for repair
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancelling after the command was sent may leave the permits added.
    pub async fn add_permits(&self, delta: i64) -> Result<u64> {
        let out_of_range = |previous: Option<u64>| {
            Error::InvalidConfig(format!(
                "semaphore {:?}: adding {delta} permits to {} would leave a size outside 1 to {}",
                self.name,
                previous.map_or_else(|| "no size".to_owned(), |size| size.to_string()),
                crate::latch::MAX_COUNT
            ))
        };
        if delta.unsigned_abs() > crate::latch::MAX_COUNT {
            return Err(out_of_range(None));
        }
        let reply = self
            .client
            .inner
            .calls
            .eval(&add_call(&self.keys, delta))
            .await?;
        match decode_set(&reply).map_err(Error::UnexpectedReply)? {
            SizeSet::Done { previous, .. } => Ok(added(previous, delta).max(0) as u64),
            SizeSet::OutOfRange { previous } => Err(out_of_range(previous)),
            SizeSet::NotASemaphore => Err(self.wrong_type()),
        }
    }

    async fn set(&self, size: u64, only_if_unset: bool) -> Result<Option<u64>> {
        if size == 0 || size > crate::latch::MAX_COUNT {
            return Err(Error::InvalidConfig(format!(
                "semaphore {:?}: the number of permits must be from 1 to {}, not {size}",
                self.name,
                crate::latch::MAX_COUNT
            )));
        }
        let reply = self
            .client
            .inner
            .calls
            .eval(&set_call(&self.keys, size, only_if_unset))
            .await?;
        match decode_set(&reply).map_err(Error::UnexpectedReply)? {
            SizeSet::Done { previous, .. } => Ok(previous),
            SizeSet::NotASemaphore => Err(self.wrong_type()),
            SizeSet::OutOfRange { .. } => Err(Error::UnexpectedReply(format!(
                "sem_set.lua refused a set: {reply:?}"
            ))),
        }
    }

    /// Takes back every permit in use, whoever holds it, and wakes the waiters. Returns
    /// how many permits were in use. The size stays, and so does a waiter's reservation.
    /// Holders find out at their next renewal (their lost signal fires) or at their
    /// release ([`Error::LockLost`]). For an operator clearing stuck permits
    /// (`redis-locks unlock --force`).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// // Workers crashed with permits that a fixed lease keeps for hours: take them back.
    /// let freed = client.semaphore("gpu-pool")?.force_release().await?;
    /// println!("took back {freed} permit(s)");
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// A cancelled call may or may not have taken the permits back.
    pub async fn force_release(&self) -> Result<u64> {
        let call = crate::protocol::force::semaphore_call(&self.keys);
        crate::held::force_delete(&self.client, &call)
            .await?
            .map_err(|_| self.wrong_type())
    }

    /// Gives back the `n` permits of the acquisition `id` (its guard's
    /// [`id`](SemaphoreGuard::id)) without its guard: a hand-over between processes, where
    /// the holder [detaches](crate::Guard::detach) its guard and passes the id on, and the
    /// receiver gives the permits back when done (Redisson's `release(permitId)`). Returns
    /// whether the permits were still held (`false`: they expired, or were given back
    /// already). Exactly once through lost replies, as a guard's release.
    ///
    /// Errors: [`Error::InvalidConfig`] for an empty or malformed id or `n` = 0;
    /// [`Error::ReleaseUnconfirmed`] when a lost reply leaves it unknown whether this call
    /// gave them back; [`Error::Redis`].
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// // The scheduler takes a permit and hands it to a worker process by id.
    /// let pool = client.semaphore("gpu-pool")?;
    /// let permit = pool.acquire(1).await?;
    /// let id = permit.id().to_owned();
    /// permit.detach();
    /// // ... later, in the worker, once the job is done:
    /// if !pool.release_permits(&id, 1).await? {
    ///     eprintln!("the permit had expired already");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// A cancelled call may or may not have given the permits back.
    pub async fn release_permits(&self, id: &str, n: u32) -> Result<bool> {
        // Not echoed in the error: whoever knows the id can give the permits back.
        if id.is_empty() || id.len() > keys::MAX_OWNER_LEN || id.chars().any(char::is_control) {
            return Err(Error::InvalidConfig(
                "a permit id is 1 to 256 bytes without control characters (a guard's id())".into(),
            ));
        }
        if n == 0 {
            return Err(Error::InvalidConfig(
                "a release needs at least 1 permit".into(),
            ));
        }
        let permits = Permits {
            semaphore: self.clone(),
            count: Count::exactly(n),
        };
        crate::held::give_back(&permits, &Arc::from(id), true, false).await
    }

    /// The size, the permits in use and the reserved ones.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let state = client.semaphore("gpu-pool")?.state().await?;
    /// println!("{} of {:?} permits in use", state.in_use, state.size);
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn state(&self) -> Result<SemaphoreState> {
        match self
            .client
            .inner
            .calls
            .read(&state_call(&self.keys))
            .await?
        {
            Reply::Array(items) => match items.as_slice() {
                [Reply::Int(size), Reply::Int(used), Reply::Int(reserved)] => Ok(SemaphoreState {
                    size: (*size >= 0).then_some(*size as u64),
                    in_use: (*used).max(0) as u64,
                    reserved: (*reserved).max(0) as u64,
                }),
                [Reply::Int(-2)] => Err(self.wrong_type()),
                _ => Err(Error::UnexpectedReply(format!("sem_state.lua: {items:?}"))),
            },
            other => Err(Error::UnexpectedReply(format!("sem_state.lua: {other:?}"))),
        }
    }

    /// Takes `n` permits, waiting without limit.
    ///
    /// Errors: [`Error::InvalidConfig`] for `n` = 0, for more permits than the semaphore
    /// has, or when no size was set; [`Error::WrongType`]; [`Error::Redis`].
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let pool = client.semaphore("gpu-pool")?;
    /// let gpus = pool.acquire(2).await?; // waits until two permits are free
    /// // ... train on two GPUs ...
    /// gpus.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: permits won by an attempt whose caller has gone are given back.
    pub async fn acquire(&self, n: u32) -> Result<SemaphoreGuard> {
        match self.acquire_until(n, None).await? {
            Some(guard) => Ok(guard),
            None => Err(Error::UnexpectedReply(
                "semaphore wait without limit ended without permits".into(),
            )),
        }
    }

    /// Takes `n` permits if they are free now.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// match client.semaphore("gpu-pool")?.try_acquire(1).await? {
    ///     Some(gpu) => gpu.release().await?,
    ///     None => println!("every GPU is busy; queue the job"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: permits won by an attempt whose caller has gone are given back.
    pub async fn try_acquire(&self, n: u32) -> Result<Option<SemaphoreGuard>> {
        self.acquire_until(n, Some(Duration::ZERO)).await
    }

    /// Runs `body` holding `n` permits: acquires (waiting without limit), runs the body
    /// with the guard and gives the permits back; the body is stopped and the result is
    /// [`Error::LockLost`] if the permits are lost meanwhile (see
    /// [`Lock::run`](crate::Lock::run)).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let loss = client
    ///     .semaphore("gpu-pool")?
    ///     .run(2, async |_gpus| {
    ///         // ... train on two GPUs ...
    ///         0.03
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the future stops the body and gives the permits back in the
    /// background.
    pub async fn run<T>(&self, n: u32, body: impl AsyncFnOnce(&SemaphoreGuard) -> T) -> Result<T> {
        self.acquire(n).await?.scoped(body).await
    }

    /// Waits at most `wait` for `n` permits, then fails with [`Error::Timeout`] (zero
    /// tries once).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::Error;
    /// match client.semaphore("gpu-pool")?.acquire_timeout(1, Duration::from_secs(60)).await {
    ///     Ok(gpu) => gpu.release().await?,
    ///     Err(Error::Timeout { .. }) => println!("no GPU freed up within a minute"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`Semaphore::try_acquire_for`].
    pub async fn acquire_timeout(&self, n: u32, wait: Duration) -> Result<SemaphoreGuard> {
        let got = self.try_acquire_for(n, wait).await?;
        keys::or_timeout(got, &self.name, wait)
    }

    /// Takes `n` permits, waiting at most `wait`.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let pool = client.semaphore("gpu-pool")?;
    /// if let Some(gpus) = pool.try_acquire_for(2, Duration::from_secs(5)).await? {
    ///     // ... train ...
    ///     gpus.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: permits won by an attempt whose caller has gone, and the waiter's
    /// reservation, are given back.
    pub async fn try_acquire_for(&self, n: u32, wait: Duration) -> Result<Option<SemaphoreGuard>> {
        keys::validate_wait(wait)?;
        self.acquire_until(n, Some(wait)).await
    }

    /// Takes every permit free now, at least one, as one acquisition (Redisson's
    /// `drainPermits`): `None` when none is free. Never waits, and leaves alone the
    /// permits kept for a waiter's reservation. The guard's [`permits`](Guard::permits)
    /// says how many it took; they are renewed, lost and given back together like any
    /// acquisition's, or handed over by [`id`](Guard::id) ([`release_permits`]).
    /// Unlike Redisson's drained permits, these are leased: a holder that dies gives
    /// them back when its lease ends.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> Result<(), redis_locks::Error> {
    /// let pool = client.semaphore("gpu-pool")?;
    /// if let Some(all) = pool.drain_permits().await? {
    ///     println!("took the {} free permits for maintenance", all.permits());
    ///     all.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// Errors: [`Error::InvalidConfig`] when no size is set; [`Error::WrongType`];
    /// [`Error::Redis`].
    ///
    /// # Cancel safety
    /// Cancel-safe: permits taken by an attempt whose caller has gone are given back.
    ///
    /// [`release_permits`]: Semaphore::release_permits
    pub async fn drain_permits(&self) -> Result<Option<SemaphoreGuard>> {
        let id: Arc<str> = self.client.inner.calls.next_request_id();
        let attempt = Attempt {
            hold: id.clone(),
            owner: id,
            waits: false,
            explicit_owner: false,
            joins: None,
        };
        let permits = Permits {
            semaphore: self.clone(),
            count: Count::every_free(),
        };
        held::acquire_until(&permits, attempt, Some(Duration::ZERO)).await
    }

    async fn acquire_until(
        &self,
        n: u32,
        wait: Option<Duration>,
    ) -> Result<Option<SemaphoreGuard>> {
        if n == 0 {
            return Err(Error::InvalidConfig(format!(
                "semaphore {:?}: acquire at least 1 permit",
                self.name
            )));
        }
        let id: Arc<str> = self.client.inner.calls.next_request_id();
        let attempt = Attempt {
            hold: id.clone(),
            owner: id,
            waits: wait != Some(Duration::ZERO),
            explicit_owner: false,
            joins: None,
        };
        let permits = Permits {
            semaphore: self.clone(),
            count: Count::exactly(n),
        };
        held::acquire_until(&permits, attempt, wait).await
    }

    fn wrong_type(&self) -> Error {
        Error::WrongType {
            key: self.keys.hash.to_string(),
            found: "keys that are not a semaphore".into(),
        }
    }
}

/// Permits held from a [`Semaphore`]: the one [`Guard`] of every kind (see it for what
/// every guard does; its [`owner`](Guard::owner) and [`hold_id`](Guard::hold_id) are the
/// acquisition's id), with [`permits`](Guard::permits). Released in the background when
/// dropped; prefer [`release`](Guard::release), which reports the outcome.
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
/// use redis_locks::SemaphoreGuard;
/// let gpus: SemaphoreGuard = client.semaphore("gpu-pool")?.acquire(2).await?;
/// assert_eq!(gpus.permits(), 2);
/// gpus.release().await?;
/// # Ok(()) }
/// ```
pub type SemaphoreGuard = Guard<Semaphore>;

impl sealed::Sealed for Semaphore {}

impl GuardKind for Semaphore {
    /// How many permits the guard holds.
    type Detail = u32;
    const GUARD: &'static str = "SemaphoreGuard";
}

impl Guard<Semaphore> {
    /// How many permits this guard holds.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let pool = client.semaphore("gpu-pool")?;
    /// if let Some(all) = pool.drain_permits().await? {
    ///     println!("took all {} free GPUs", all.permits());
    ///     all.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn permits(&self) -> u32 {
        self.detail
    }

    /// The id of this acquisition (its permits are `<id>:1..n` in the permits set); the
    /// same as [`hold_id`](Guard::hold_id).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let permit = client.semaphore("gpu-pool")?.acquire(1).await?;
    /// let id = permit.id().to_owned(); // what `Semaphore::release_permits` takes
    /// permit.detach();
    /// # Ok(()) }
    /// ```
    pub fn id(&self) -> &str {
        self.hold_id()
    }
}
