//! The fair lock: an exclusive, reentrant lock granted in arrival order.
//!
//! Layout (one slot, the name's hash tag): the sorted set `<prefix>:{<name>}:fair` (the
//! holds, scored by their deadlines on Redis's clock), the queue
//! `<prefix>:{<name>}:fair:queue` (waiters by arrival, Redis time), the liveness set
//! `<prefix>:{<name>}:fair:alive` (until when each waiter counts as alive), the fencing
//! counter `<prefix>:{<name>}:fair:fence`, and one wake-up channel per waiter
//! `<prefix>:{<name>}:fair:db<n>:wake:<waiter id>`, so a release wakes the head alone.
//! Scripts: `lua/fair_acquire.lua`, `lua/fair_release.lua`, `lua/fair_state.lua`;
//! renewal is `lua/sem_renew.lua`'s. The waiting loop, the give-back of abandoned attempts
//! and the guard's core are shared with the read-write lock (`held.rs`).

use std::sync::Arc;
use std::time::Duration;

use crate::client::LockClient;
use crate::error::{Error, Result};
use crate::guard::{Guard, GuardKind, sealed};
use crate::held::{self, Attempt, SetKind};
use crate::keys;
use crate::protocol::attempted::Attempted;
use crate::protocol::fair::{FairAcquire, FairKeys, decode_acquire, release_call, state_call};
use crate::protocol::rwlock::hold_id;
use crate::protocol::wait::{WaitPolicy, WaitTiming};
use crate::protocol::{Call, Reply};
use crate::watchdog::LeaseMode;

/// How long a queued waiter counts as alive without asking again: a waiter that died
/// leaves the queue within this long (a cancelled one leaves at once).
///
/// ```
/// use std::time::Duration;
/// // A waiter that crashed holds up the queue behind it for at most this long.
/// assert_eq!(redis_locks::FAIR_WAITER_LEASE, Duration::from_secs(3));
/// ```
pub const FAIR_WAITER_LEASE: Duration = Duration::from_secs(3);

/// An exclusive, reentrant lock granted in arrival order. Cheap to clone. Obtain one with
/// [`LockClient::fair_lock`].
///
/// * **First come, first served.** Waiters queue in the order their first attempt
///   reached Redis (Redis's clock, not the clients'). A free lock with waiters goes to
///   the head of the queue; a newcomer, even a `try_acquire`, does not jump it.
/// * **Only the head is woken.** Each waiter listens on a channel of its own (one
///   `SUBSCRIBE` for the time it waits; a caller that gets the lock at once subscribes to
///   nothing), and a release publishes to the head's channel alone.
/// * **Dead and cancelled waiters leave.** A waiter keeps its place by asking again at
///   least every second; one that died leaves the queue within
///   [`FAIR_WAITER_LEASE`] (3 s), and the waiter behind it is told to come back exactly
///   then. A wait that is cancelled (its future dropped) or times out leaves at once.
/// * Holds, renewal, lost signals, fencing and reentrancy through the guard are as for
///   [`Lock`](crate::Lock); the owner of the current hold re-enters without queueing.
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> Result<(), redis_locks::Error> {
/// let turn = client.fair_lock("printer")?;
/// let guard = turn.acquire().await?;   // waits its turn; renewed by the watchdog
/// // ... `guard.lost()` fires if the hold is lost ...
/// guard.release().await?;              // wakes the next in line, and only it
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct FairLock {
    client: LockClient,
    name: Arc<str>,
    keys: FairKeys,
    mode: LeaseMode,
    owner: Option<Arc<str>>,
    fenced: bool,
}

impl std::fmt::Debug for FairLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FairLock")
            .field("name", &self.name)
            .field("key", &self.keys.holds)
            .field("owner", &crate::owner::fingerprint(self.owner.as_deref()))
            .field("mode", &self.mode)
            .field("fenced", &self.fenced)
            .finish_non_exhaustive()
    }
}

impl LockClient {
    /// A handle to the fair lock called `name`. Validates the name; does not talk to
    /// Redis. Its keys are distinct from the [`Lock`](crate::Lock) of the same name.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// // Print jobs are served in the order they asked, across every process.
    /// let printer = client.fair_lock("printer")?;
    /// let turn = printer.acquire().await?;
    /// // ... print ...
    /// turn.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn fair_lock(&self, name: &str) -> Result<FairLock> {
        keys::validate_name(name)?;
        let inner = &self.inner;
        Ok(FairLock {
            client: self.clone(),
            name: name.into(),
            keys: FairKeys::new(
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

/// What a fair lock looks like now ([`FairLock::state`]).
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
/// let state = client.fair_lock("printer")?.state().await?;
/// println!("{} hold(s), {} waiting, expires in {:?}", state.holds, state.waiters, state.remaining);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FairLockState {
    /// Live holds (all of one owner: its nesting depth).
    pub holds: u64,
    /// The owner of the holds, if any.
    pub holder: Option<String>,
    /// Live waiters in the queue.
    pub waiters: u64,
    /// How long the latest hold has left, if any.
    pub remaining: Option<Duration>,
}

impl FairLockState {
    /// Whether anyone holds the lock.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let state = client.fair_lock("printer")?.state().await?;
    /// if !state.is_locked() && state.waiters == 0 {
    ///     println!("idle");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_locked(&self) -> bool {
        self.holds > 0
    }
}

impl FairLock {
    /// The lock's name.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// assert_eq!(client.fair_lock("printer")?.name(), "printer");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The client this handle belongs to.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let printer = client.fair_lock("printer")?;
    /// println!("queued through client {}", printer.client().id());
    /// # Ok(()) }
    /// ```
    pub fn client(&self) -> &LockClient {
        &self.client
    }

    /// The sorted set of its holds.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let printer = client.fair_lock("printer")?;
    /// println!("holds in {}, queue in {}", printer.key(), printer.queue_key());
    /// # Ok(()) }
    /// ```
    pub fn key(&self) -> &str {
        &self.keys.holds
    }

    /// The sorted set of its queue.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let printer = client.fair_lock("printer")?;
    /// println!("waiters queue in {}", printer.queue_key());
    /// # Ok(()) }
    /// ```
    pub fn queue_key(&self) -> &str {
        &self.keys.queue
    }

    /// The explicit owner of this handle, if any.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let printer = client.fair_lock("printer")?;
    /// assert_eq!(printer.owner(), None);
    /// assert_eq!(printer.with_owner("spooler-1")?.owner(), Some("spooler-1"));
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    /// A handle whose holds have a fixed lease instead of the watchdog's renewal.
    /// Redis counts whole milliseconds, so a fraction rounds up (1.9 ms is 2 ms), as for
    /// [`Lock::with_lease`](crate::Lock::with_lease).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// // A print job never holds the printer longer than 5 minutes.
    /// let printer = client.fair_lock("printer")?.with_lease(Duration::from_secs(300))?;
    /// let turn = printer.acquire().await?;
    /// # turn.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_lease(&self, lease: Duration) -> Result<Self> {
        let ms = keys::validate_ms("lease", lease)?;
        Ok(FairLock {
            mode: LeaseMode::Fixed(Duration::from_millis(ms)),
            ..self.clone()
        })
    }

    /// A handle whose holds the watchdog renews (the default).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let fixed = client.fair_lock("printer")?.with_lease(Duration::from_secs(300))?;
    /// let renewed = fixed.with_watchdog();
    /// let turn = renewed.acquire().await?;
    /// assert!(turn.is_watchdog_leased());
    /// # turn.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_watchdog(&self) -> Self {
        FairLock {
            mode: LeaseMode::Watchdog,
            ..self.clone()
        }
    }

    /// A handle that acquires for an explicit owner id: every handle with that id shares
    /// its holds (it re-enters without queueing while it holds). Owner ids are as good as
    /// passwords.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// // Every handle of this spooler shares its holds: it re-enters without queueing.
    /// let printer = client.fair_lock("printer")?.with_owner("spooler-1")?;
    /// let turn = printer.acquire().await?;
    /// let again = printer.try_acquire().await?.expect("the owner re-enters");
    /// again.release().await?;
    /// turn.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_owner(&self, owner: impl Into<String>) -> Result<Self> {
        let owner = owner.into();
        keys::validate_owner(&owner)?;
        Ok(FairLock {
            owner: Some(owner.into()),
            ..self.clone()
        })
    }

    /// A handle whose holds carry a fencing token ([`FairGuard::fencing_token`]), as for
    /// [`Lock::with_fencing`](crate::Lock::with_fencing).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let turn = client.fair_lock("printer")?.with_fencing().acquire().await?;
    /// let token = turn.fencing_token().expect("a fenced handle");
    /// // the printer refuses jobs with a token lower than one it has seen
    /// turn.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_fencing(&self) -> Self {
        FairLock {
            fenced: true,
            ..self.clone()
        }
    }

    /// Takes the lock in its turn, waiting without limit.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let turn = client.fair_lock("printer")?.acquire().await?; // waits its turn
    /// // ... print ...
    /// turn.release().await?; // wakes the next in line
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: the waiter leaves the queue at once, and a hold won by an attempt
    /// whose caller has gone is given back.
    pub async fn acquire(&self) -> Result<FairGuard> {
        match self.acquire_until(None, None).await? {
            Some(guard) => Ok(guard),
            None => Err(Error::UnexpectedReply(
                "fair lock wait without limit ended without a hold".into(),
            )),
        }
    }

    /// Takes the lock if it is free and nobody is queued for it.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// match client.fair_lock("printer")?.try_acquire().await? {
    ///     Some(turn) => turn.release().await?,
    ///     None => println!("busy, or others are queued first"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn try_acquire(&self) -> Result<Option<FairGuard>> {
        self.acquire_until(Some(Duration::ZERO), None).await
    }

    /// Takes the lock in its turn, waiting at most `wait`; `None` if the turn did not come.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let printer = client.fair_lock("printer")?;
    /// match printer.try_acquire_for(Duration::from_secs(30)).await? {
    ///     Some(turn) => turn.release().await?,
    ///     None => println!("our turn did not come within 30 s; we left the queue"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: the waiter leaves the queue at once, and a hold won by an attempt
    /// whose caller has gone is given back.
    pub async fn try_acquire_for(&self, wait: Duration) -> Result<Option<FairGuard>> {
        keys::validate_wait(wait)?;
        self.acquire_until(Some(wait), None).await
    }

    /// Runs `body` holding the lock, in turn: acquires (waiting without limit), runs the
    /// body with the guard and releases; the body is stopped and the result is
    /// [`Error::LockLost`] if the hold is lost meanwhile (see [`Lock::run`](crate::Lock::run)).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let pages = client
    ///     .fair_lock("printer")?
    ///     .run(async |_turn| {
    ///         // ... print the document ...
    ///         12
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the future stops the body and releases the hold (or leaves
    /// the queue) in the background.
    pub async fn run<T>(&self, body: impl AsyncFnOnce(&FairGuard) -> T) -> Result<T> {
        self.acquire().await?.scoped(body).await
    }

    /// Waits at most `wait`, then fails with [`Error::Timeout`] (zero tries once).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::Error;
    /// match client.fair_lock("printer")?.acquire_timeout(Duration::from_secs(30)).await {
    ///     Ok(turn) => turn.release().await?,
    ///     Err(Error::Timeout { .. }) => println!("printer busy; job postponed"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`FairLock::try_acquire_for`].
    pub async fn acquire_timeout(&self, wait: Duration) -> Result<FairGuard> {
        let got = self.try_acquire_for(wait).await?;
        keys::or_timeout(got, &self.name, wait)
    }

    /// Whether anyone holds the lock.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// if client.fair_lock("printer")?.is_locked().await? {
    ///     println!("printing");
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
    /// if let Some(ttl) = client.fair_lock("printer")?.remaining_ttl().await? {
    ///     println!("the current hold expires in {ttl:?} unless renewed");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn remaining_ttl(&self) -> Result<Option<Duration>> {
        Ok(self.state().await?.remaining)
    }

    /// Deletes the lock's holds, whoever holds them, and wakes the head of its queue.
    /// Returns whether a hold was live. The queue (every waiter keeps its place) and the
    /// fencing counter stay. Holders find out at their next renewal (their lost signal
    /// fires) or at their release ([`Error::LockLost`]). For an operator clearing a stuck
    /// lock (`redis-locks unlock --force`).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// // The spooler holding the printer hangs: free it; the queue keeps its order.
    /// if client.fair_lock("printer")?.force_unlock().await? {
    ///     println!("freed; the head of the queue is woken");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// A cancelled call may or may not have deleted the holds.
    pub async fn force_unlock(&self) -> Result<bool> {
        let call = crate::protocol::force::fair_call(&self.keys);
        let deleted = crate::held::force_delete(&self.client, &call).await?;
        deleted
            .map(|holds| holds > 0)
            .map_err(|found| self.wrong_type(found))
    }

    /// The holds, the holder and the queue's length.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let state = client.fair_lock("printer")?.state().await?;
    /// println!("{} waiting behind {} hold(s)", state.waiters, state.holds);
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn state(&self) -> Result<FairLockState> {
        let reply = self
            .client
            .inner
            .calls
            .read(&state_call(&self.keys))
            .await?;
        let bad = || Error::UnexpectedReply(format!("fair_state.lua: {reply:?}"));
        let Reply::Array(items) = &reply else {
            return Err(bad());
        };
        match items.as_slice() {
            [
                Reply::Int(holds),
                holder,
                Reply::Int(waiters),
                Reply::Int(latest),
            ] => Ok(FairLockState {
                holds: (*holds).max(0) as u64,
                holder: holder.text().filter(|owner| !owner.is_empty()),
                waiters: (*waiters).max(0) as u64,
                remaining: (*latest > 0).then(|| Duration::from_millis(*latest as u64)),
            }),
            [Reply::Int(-2), what] => Err(self.wrong_type(what.text().unwrap_or_default())),
            _ => Err(bad()),
        }
    }

    fn wrong_type(&self, found: String) -> Error {
        Error::WrongType {
            key: self.keys.holds.to_string(),
            found: if found.is_empty() {
                "keys that are not a fair lock".into()
            } else {
                found
            },
        }
    }

    /// Acquires within `wait` (`None`: no limit; zero: one attempt) for `owner` (a guard's owner
    /// re-entering), else the handle's owner or a fresh one.
    async fn acquire_until(
        &self,
        wait: Option<Duration>,
        owner: Option<Arc<str>>,
    ) -> Result<Option<FairGuard>> {
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
            joins: None,
        };
        held::acquire_until(self, attempt, wait).await
    }
}

impl SetKind for FairLock {
    const KIND: &'static str = "fair";
    type Handle = FairLock;

    fn guarded(&self) -> (FairLock, ()) {
        (self.clone(), ())
    }

    fn client(&self) -> &LockClient {
        &self.client
    }

    fn name(&self) -> &Arc<str> {
        &self.name
    }

    fn lease_mode(&self) -> LeaseMode {
        self.mode
    }

    fn set_key(&self) -> &Arc<str> {
        &self.keys.holds
    }

    fn channel(&self, attempt: &Attempt) -> Arc<str> {
        self.keys.wake_channel(&attempt.hold)
    }

    fn wait_policy(&self, timing: WaitTiming) -> WaitPolicy {
        WaitPolicy::fair(timing)
    }

    fn attempt_call(&self, attempt: &Attempt) -> Call {
        FairAcquire {
            hold: attempt.hold.clone(),
            owner: attempt.owner.clone(),
            lease_ms: self.lease_ms(),
            waits: attempt.waits,
            fenced: self.fenced,
            waiter_lease_ms: FAIR_WAITER_LEASE.as_millis() as u64,
        }
        .call(&self.keys)
    }

    fn decode(&self, reply: &Reply) -> std::result::Result<Attempted, String> {
        Ok(decode_acquire(reply, self.fenced)?.attempted())
    }

    fn give_back_call(&self, hold: &Arc<str>, hold_too: bool, leaving: bool) -> Call {
        release_call(&self.keys, hold, hold_too, leaving)
    }

    fn wrong_type(&self, found: String) -> Error {
        FairLock::wrong_type(self, found)
    }
}

/// A hold of a [`FairLock`]: the one [`Guard`] of every kind (see it for what every guard
/// does), with [`reenter`](Guard::reenter). Released in the background when dropped;
/// prefer [`release`](Guard::release), which reports the outcome and wakes the head of the
/// queue.
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
/// use redis_locks::FairGuard;
/// let turn: FairGuard = client.fair_lock("printer")?.acquire().await?;
/// tokio::select! {
///     _ = turn.lost() => eprintln!("lost our turn: {:?}", turn.lost_reason()),
///     _ = async { /* print */ } => {}
/// }
/// turn.release().await?;
/// # Ok(()) }
/// ```
pub type FairGuard = Guard<FairLock>;

impl sealed::Sealed for FairLock {}

impl GuardKind for FairLock {
    /// Nothing beyond what every guard knows.
    type Detail = ();
    const GUARD: &'static str = "FairGuard";
}

impl Guard<FairLock> {
    /// Another hold for the same owner, with this handle's lease terms: a nested critical
    /// section. Never waits and never queues (this hold already lets it in).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let turn = client.fair_lock("printer")?.acquire().await?;
    /// let nested = turn.reenter().await?; // never queues: this hold lets it in
    /// nested.release().await?;
    /// turn.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn reenter(&self) -> Result<FairGuard> {
        self.ensure_not_lost()?;
        let owner = self.core.owner.clone();
        match self
            .handle
            .acquire_until(Some(Duration::ZERO), Some(owner))
            .await?
        {
            Some(guard) => Ok(guard),
            None => Err(self.lost_error()),
        }
    }
}
