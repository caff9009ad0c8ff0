//! A lock kept in Redisson's RLock layout, so that Rust services using this library and
//! Java services using Redisson (3.24 to 4.x) exclude each other on the same name.
//!
//! Layout (Redisson's, see `protocol::redisson`): the hash named by the lock's name
//! alone, one field per owner (`<client uuid>:<n>` by default, Redisson's
//! `<client uuid>:<thread id>` shape) holding its hold count; waiters on
//! `redisson_lock__channel:{<name>}`, woken by the message `0`. This library adds a record
//! per granted acquire (exactly-once acquires and give-backs), which Redisson never reads.
//! Scripts: `lua/redisson_acquire.lua`, `lua/redisson_release.lua`,
//! `lua/redisson_renew.lua`. The waiting loop, the give-back of abandoned attempts, the
//! watchdog and the guard are the ones every kind shares (`held.rs`).

use std::sync::Arc;
use std::time::Duration;

use crate::client::LockClient;
use crate::error::{Error, Result};
use crate::guard::{Guard, GuardKind, sealed};
use crate::held::{self, Attempt, SetKind};
use crate::keys;
use crate::protocol::attempted::Attempted;
use crate::protocol::redisson::{
    RedissonFound, RedissonKeys, acquire_call, decode_acquire, decode_state, force_unlock_call,
    owner_of, release_call, state_call,
};
use crate::protocol::rwlock::hold_id;
use crate::protocol::wait::{WaitPolicy, WaitTiming};
use crate::protocol::{Call, Millis, Reply};
use crate::watchdog::{HoldShape, LeaseMode};

/// An exclusive, reentrant lock in [Redisson]'s `RLock` layout: a Java service that takes
/// `redisson.getLock(name)` and a Rust service that takes
/// [`LockClient::redisson_lock`]`(name)` exclude each other, and each one's release wakes
/// the other's waiters. Cheap to clone.
///
/// * **Opt-in, per lock.** Only locks made with [`LockClient::redisson_lock`] use this
///   layout; every other kind keeps this library's own keys, so a fleet moves lock by
///   lock, and the layout a lock uses is visible where it is made.
/// * **Redisson's keys, exactly.** The hash named by the lock's name (no prefix), a field
///   per owner with its hold count, the expiry set with `PEXPIRE`, the waiters' channel
///   `redisson_lock__channel:{name}` and the message `0` on the last release. On a cluster
///   the channel is sharded (`SPUBLISH`), as Redisson 3.22+ does on Redis 7. Beside them,
///   one key of this library's per acquisition (`<prefix>_redisson_acquire:{name}:<id>`,
///   for exactly-once calls) that Redisson never reads; it expires by itself, at the
///   latest a watchdog lease and a response timeout after the release.
/// * **Owners.** By default each acquisition is its own owner `<client uuid>:<n>`, the
///   shape of Redisson's `<client uuid>:<thread id>`; [`with_owner`](Self::with_owner)
///   names one (a hold re-enters, as a Java thread does, when the owner is the same).
/// * **Weaker than this library's own layout.** Redisson's hash has no per-hold
///   identity: a guard whose hold expired and was taken again *by the same owner* cannot
///   tell the new hold from its own, so its release gives back the new hold's count.
///   With the default, a fresh owner per acquisition, that cannot happen; with an
///   explicit owner it can, as it can between Redisson threads today. Exactly-once
///   acquires and releases through lost replies, lost signals, renewal and mutual
///   exclusion hold as for [`Lock`](crate::Lock).
///
/// [Redisson]: https://redisson.org
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> Result<(), redis_locks::Error> {
/// // The Java side: redisson.getLock("invoice:42").lock()
/// let invoice = client.redisson_lock("invoice:42")?;
/// let guard = invoice.acquire().await?; // waits while a Java thread holds it
/// // ... `guard.lost()` fires if the hold is lost ...
/// guard.release().await?;               // wakes a Java waiter as Redisson's unlock does
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedissonLock {
    client: LockClient,
    name: Arc<str>,
    keys: RedissonKeys,
    mode: LeaseMode,
    owner: Option<Arc<str>>,
}

impl std::fmt::Debug for RedissonLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedissonLock")
            .field("name", &self.name)
            .field("owner", &crate::owner::fingerprint(self.owner.as_deref()))
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl LockClient {
    /// A handle to the lock called `name` in Redisson's `RLock` layout (see
    /// [`RedissonLock`]). Validates the name; does not talk to Redis. Its key is the name
    /// itself, so it is the same lock as Redisson's `getLock(name)`, and a different one
    /// from this library's [`lock`](LockClient::lock) of the same name.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.redisson_lock("invoice:42")?;
    /// assert_eq!(lock.key(), "invoice:42");
    /// assert_eq!(lock.channel(), "redisson_lock__channel:{invoice:42}");
    /// # Ok(()) }
    /// ```
    pub fn redisson_lock(&self, name: &str) -> Result<RedissonLock> {
        keys::validate_name(name)?;
        let inner = &self.inner;
        Ok(RedissonLock {
            client: self.clone(),
            name: name.into(),
            keys: RedissonKeys::new(&inner.layout.prefix, inner.layout.sharded, name),
            mode: LeaseMode::Watchdog,
            owner: None,
        })
    }
}

/// What a lock in Redisson's layout looks like now ([`RedissonLock::state`]).
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
/// let state = client.redisson_lock("invoice:42")?.state().await?;
/// for (owner, count) in &state.holders {
///     println!("{owner} holds it {count} time(s), for {:?} more", state.remaining);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedissonLockState {
    /// Each owner (hash field: Redisson's `<client uuid>:<thread id>`, or this library's
    /// owner id) with its hold count. One owner at a time holds an `RLock`.
    pub holders: Vec<(String, u64)>,
    /// How long the lock lives on unless renewed, if it is held and has an expiry.
    pub remaining: Option<Duration>,
}

impl RedissonLockState {
    /// Whether anyone holds the lock.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// if client.redisson_lock("invoice:42")?.state().await?.is_locked() {
    ///     println!("a Java or Rust service holds it");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_locked(&self) -> bool {
        !self.holders.is_empty()
    }
}

impl RedissonLock {
    /// The lock's name.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// assert_eq!(client.redisson_lock("invoice:42")?.name(), "invoice:42");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The client this handle belongs to.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.redisson_lock("invoice:42")?;
    /// println!("through client {}", lock.client().id());
    /// # Ok(()) }
    /// ```
    pub fn client(&self) -> &LockClient {
        &self.client
    }

    /// The lock hash: the name itself, as in Redisson.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// assert_eq!(client.redisson_lock("invoice:42")?.key(), "invoice:42");
    /// # Ok(()) }
    /// ```
    pub fn key(&self) -> &str {
        &self.keys.hash
    }

    /// The channel waiters listen on, Redisson's and this library's alike.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.redisson_lock("invoice:42")?;
    /// assert_eq!(lock.channel(), "redisson_lock__channel:{invoice:42}");
    /// # Ok(()) }
    /// ```
    pub fn channel(&self) -> &str {
        &self.keys.channel
    }

    /// The explicit owner of this handle, if any.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.redisson_lock("invoice:42")?;
    /// assert_eq!(lock.owner(), None);
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    /// A handle whose holds have a fixed lease instead of the watchdog's renewal (Redisson's
    /// `lock(leaseTime, unit)`). Whole milliseconds; a fraction rounds up.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.redisson_lock("invoice:42")?.with_lease(Duration::from_secs(10))?;
    /// let guard = lock.acquire().await?;
    /// # guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_lease(&self, lease: Duration) -> Result<Self> {
        let ms = keys::validate_ms("lease", lease)?;
        Ok(RedissonLock {
            mode: LeaseMode::Fixed(Duration::from_millis(ms)),
            ..self.clone()
        })
    }

    /// A handle whose holds the watchdog renews (the default), like Redisson's `lock()`.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let fixed = client.redisson_lock("invoice:42")?.with_lease(Duration::from_secs(10))?;
    /// let guard = fixed.with_watchdog().acquire().await?;
    /// assert!(guard.is_watchdog_leased());
    /// # guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_watchdog(&self) -> Self {
        RedissonLock {
            mode: LeaseMode::Watchdog,
            ..self.clone()
        }
    }

    /// A handle that acquires for an explicit owner id, the hash field (Redisson's
    /// `<client uuid>:<thread id>`): every handle with that id shares its holds, and
    /// re-enters while it holds. Owner ids are as good as passwords.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.redisson_lock("invoice:42")?.with_owner("billing-7")?;
    /// let guard = lock.acquire().await?;
    /// let again = lock.try_acquire().await?.expect("the owner re-enters");
    /// again.release().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_owner(&self, owner: impl Into<String>) -> Result<Self> {
        let owner = owner.into();
        keys::validate_owner(&owner)?;
        Ok(RedissonLock {
            owner: Some(owner.into()),
            ..self.clone()
        })
    }

    /// Takes the lock, waiting without limit (Redisson's `lock()`).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.redisson_lock("invoice:42")?.acquire().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn acquire(&self) -> Result<RedissonGuard> {
        match self.acquire_until(None, None).await? {
            Some(guard) => Ok(guard),
            None => Err(Error::UnexpectedReply(
                "Redisson-layout lock wait without limit ended without a hold".into(),
            )),
        }
    }

    /// Takes the lock if it is free (or this handle's owner holds it), without waiting
    /// (Redisson's `tryLock()`).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// match client.redisson_lock("invoice:42")?.try_acquire().await? {
    ///     Some(guard) => guard.release().await?,
    ///     None => println!("a Java or Rust service holds it"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn try_acquire(&self) -> Result<Option<RedissonGuard>> {
        self.acquire_until(Some(Duration::ZERO), None).await
    }

    /// Takes the lock, waiting at most `wait`; `None` if it stayed held (Redisson's
    /// `tryLock(waitTime, unit)`).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.redisson_lock("invoice:42")?;
    /// if let Some(guard) = lock.try_acquire_for(Duration::from_secs(5)).await? {
    ///     guard.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn try_acquire_for(&self, wait: Duration) -> Result<Option<RedissonGuard>> {
        keys::validate_wait(wait)?;
        self.acquire_until(Some(wait), None).await
    }

    /// Waits at most `wait`, then fails with [`Error::Timeout`] (zero tries once).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.redisson_lock("invoice:42")?;
    /// let guard = lock.acquire_timeout(Duration::from_secs(5)).await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`RedissonLock::try_acquire_for`].
    pub async fn acquire_timeout(&self, wait: Duration) -> Result<RedissonGuard> {
        let got = self.try_acquire_for(wait).await?;
        keys::or_timeout(got, &self.name, wait)
    }

    /// Runs `body` holding the lock: acquires (waiting without limit), runs the body with
    /// the guard and releases; the body is stopped and the result is [`Error::LockLost`]
    /// if the hold is lost meanwhile (see [`Lock::run`](crate::Lock::run)).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let total = client
    ///     .redisson_lock("invoice:42")?
    ///     .run(async |_guard| 42)
    ///     .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the future stops the body and releases the hold in the
    /// background.
    pub async fn run<T>(&self, body: impl AsyncFnOnce(&RedissonGuard) -> T) -> Result<T> {
        self.acquire().await?.scoped(body).await
    }

    /// Whether anyone holds the lock (Redisson's `isLocked`).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// if client.redisson_lock("invoice:42")?.is_locked().await? {
    ///     println!("held");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn is_locked(&self) -> Result<bool> {
        Ok(self.state().await?.is_locked())
    }

    /// How long the lock lives on unless renewed (`None`: nobody holds it); Redisson's
    /// `remainTimeToLive`.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// if let Some(ttl) = client.redisson_lock("invoice:42")?.remaining_ttl().await? {
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

    /// The holders and their counts, and the remaining TTL.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let state = client.redisson_lock("invoice:42")?.state().await?;
    /// println!("{:?}, {:?} left", state.holders, state.remaining);
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn state(&self) -> Result<RedissonLockState> {
        let reply = self
            .client
            .inner
            .calls
            .read(&state_call(&self.keys))
            .await?;
        match decode_state(&reply).map_err(Error::UnexpectedReply)? {
            RedissonFound::Free => Ok(RedissonLockState::default()),
            RedissonFound::Held { pttl, holders } => Ok(RedissonLockState {
                holders,
                remaining: pttl.map(Duration::from_millis),
            }),
            RedissonFound::NotALock(found) => Err(self.wrong_type(found)),
        }
    }

    /// Deletes the lock whoever holds it, Java or Rust, and wakes its waiters (Redisson's
    /// `forceUnlock`). Returns whether there was a lock. Holders on this side find out at
    /// their next renewal (their lost signal fires) or at their release
    /// ([`Error::LockLost`]). For an operator clearing a stuck lock.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// if client.redisson_lock("invoice:42")?.force_unlock().await? {
    ///     println!("freed; a waiter on either side is woken");
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
            .eval(&force_unlock_call(&self.keys))
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

    fn wrong_type(&self, found: String) -> Error {
        Error::WrongType {
            key: self.keys.hash.to_string(),
            found: if found.is_empty() {
                "a key that is not a Redisson lock hash".into()
            } else {
                found
            },
        }
    }

    /// Acquires within `wait` (`None`: no limit; zero: one attempt) for `owner` (a guard's
    /// owner re-entering through its hold: granted only while that owner still holds),
    /// else the handle's owner or a fresh one.
    async fn acquire_until(
        &self,
        wait: Option<Duration>,
        owner: Option<(Arc<str>, Arc<str>)>,
    ) -> Result<Option<RedissonGuard>> {
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
        held::acquire_until(self, attempt, wait).await
    }

    fn response_ms(&self) -> Millis {
        self.client.inner.calls.response_timeout.as_millis() as Millis
    }
}

impl SetKind for RedissonLock {
    const KIND: &'static str = "redisson";
    type Handle = RedissonLock;

    fn guarded(&self) -> (RedissonLock, ()) {
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
        &self.keys.hash
    }

    fn shape(&self) -> HoldShape {
        HoldShape::RedissonField
    }

    fn channel(&self, _attempt: &Attempt) -> Arc<str> {
        self.keys.channel.clone()
    }

    fn wait_policy(&self, timing: WaitTiming) -> WaitPolicy {
        WaitPolicy::redisson(timing)
    }

    fn attempt_call(&self, attempt: &Attempt) -> Call {
        let record_ms = crate::protocol::redisson::acquire_record_ms(self.response_ms());
        acquire_call(
            &self.keys,
            &attempt.owner,
            &attempt.hold,
            self.lease_ms(),
            record_ms,
            attempt.joins.is_some(),
        )
    }

    fn decode(&self, reply: &Reply) -> std::result::Result<Attempted, String> {
        decode_acquire(reply)
    }

    fn give_back_call(&self, hold: &Arc<str>, _hold_too: bool, leaving: bool) -> Call {
        // The released record answers every copy of this give-back for as long as one is
        // re-sent (`resend::give_back_give_up_at`), and a response timeout more.
        let inner = &self.client.inner;
        let record_ms = crate::protocol::redisson::release_record_ms(
            self.lease_ms(),
            inner.watchdog_timeout.as_millis() as Millis,
            self.response_ms(),
        );
        let owner: Arc<str> = owner_of(hold).into();
        release_call(&self.keys, &owner, hold, leaving, record_ms)
    }

    fn wrong_type(&self, found: String) -> Error {
        RedissonLock::wrong_type(self, found)
    }
}

/// A hold of a [`RedissonLock`]: the one [`Guard`] of every kind (see it for what every
/// guard does), with [`reenter`](Guard::reenter). Released in the background when
/// dropped; prefer [`release`](Guard::release), which reports the outcome.
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
/// use redis_locks::RedissonGuard;
/// let guard: RedissonGuard = client.redisson_lock("invoice:42")?.acquire().await?;
/// tokio::select! {
///     _ = guard.lost() => eprintln!("lost: {:?}", guard.lost_reason()),
///     _ = async { /* bill */ } => {}
/// }
/// guard.release().await?;
/// # Ok(()) }
/// ```
pub type RedissonGuard = Guard<RedissonLock>;

impl sealed::Sealed for RedissonLock {}

impl GuardKind for RedissonLock {
    /// Nothing beyond what every guard knows.
    type Detail = ();
    const GUARD: &'static str = "RedissonGuard";
}

impl Guard<RedissonLock> {
    /// Another hold for the same owner (the hash field's count goes up by one, as a Java
    /// thread's nested `lock()` does), with this handle's lease terms. Never waits.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.redisson_lock("invoice:42")?.acquire().await?;
    /// let nested = guard.reenter().await?; // the owner's count is 2
    /// nested.release().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn reenter(&self) -> Result<RedissonGuard> {
        self.ensure_not_lost()?;
        let through = (self.core.owner.clone(), self.core.hold.clone());
        match self
            .handle
            .acquire_until(Some(Duration::ZERO), Some(through))
            .await?
        {
            Some(guard) => Ok(guard),
            None => Err(self.lost_error()),
        }
    }
}
