//! One guard for every kind: [`Guard<K>`], what every hold's guard does (its lost signal,
//! its release, its drop, detaching), written once.
//!
//! A kind's guard is `Guard<its handle>` ([`LockGuard`](crate::LockGuard) is
//! `Guard<Lock>`, [`RwGuard`](crate::RwGuard) is `Guard<RwLock>`, ...). What only one kind
//! has (the plain lock's `extend`, a read-write hold's `read`/`write`, a semaphore
//! guard's `permits`) is an `impl Guard<ThatKind>` block in the kind's own module. A kind
//! plugs in with a [`GiveBack`]: how its release call is made and read, the one thing
//! that differs between kinds once a hold exists (`lock_api`'s raw trait, in miniature).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::background::Unreleased;
use crate::client::LockClient;
use crate::error::{Error, LostReason, Result};
use crate::owner::Fingerprint;
use crate::protocol::release::{Found, Leaving, Told, told};
use crate::protocol::{Millis, timing};
use crate::watchdog::{HoldEntry, LeaseMode};

/// A kind of hold that has a [`Guard`]: [`Lock`](crate::Lock),
/// [`RwLock`](crate::RwLock), [`FairLock`](crate::FairLock) and
/// [`Semaphore`](crate::Semaphore). Sealed: the kinds are this crate's.
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
/// use redis_locks::{Guard, GuardKind};
///
/// // One helper for every kind's guard: a lock, a read or write, a fair hold, permits.
/// async fn finish<K: GuardKind>(guard: Guard<K>) -> redis_locks::Result<()> {
///     println!("giving back {}", guard.name());
///     guard.release().await
/// }
///
/// finish(client.lock("invoice:42")?.acquire().await?).await?;
/// finish(client.semaphore("gpu-pool")?.acquire(1).await?).await?;
/// # Ok(()) }
/// ```
pub trait GuardKind: sealed::Sealed + Clone + Send + Sync + 'static {
    /// What a guard of this kind knows about its hold beyond what every guard knows: the
    /// plain lock's hold count, a read-write hold's side, a semaphore guard's permits.
    ///
    /// ```
    /// use redis_locks::{GuardKind, Lock, RwKind, RwLock, Semaphore};
    /// let count: <Lock as GuardKind>::Detail = 1u64; // LockGuard::hold_count
    /// let side: <RwLock as GuardKind>::Detail = RwKind::Read; // RwGuard::kind
    /// let permits: <Semaphore as GuardKind>::Detail = 2u32; // SemaphoreGuard::permits
    /// ```
    type Detail: Clone + Send + Sync + std::fmt::Debug + 'static;
    /// The guard's name in `{:?}` output.
    ///
    /// ```
    /// use redis_locks::{GuardKind, Lock, Semaphore};
    /// assert_eq!(<Lock as GuardKind>::GUARD, "LockGuard");
    /// assert_eq!(<Semaphore as GuardKind>::GUARD, "SemaphoreGuard");
    /// ```
    const GUARD: &'static str;
}

pub(crate) mod sealed {
    /// Only this crate's kinds have guards.
    pub trait Sealed {}
}

/// The future a [`GiveBack`] returns: `'static`, so that a release can move to a
/// background task when its caller stops waiting.
pub(crate) type GivingBack = Pin<Box<dyn Future<Output = Result<Found>> + Send>>;

/// How a kind gives one of its holds back: the kind's release call, driven through lost
/// replies until `give_up_at`, and what it found.
pub(crate) trait GiveBack: Send + Sync + 'static {
    /// Gives back `hold` of `owner`, as `leaving` says: retries until its `give_up_at`;
    /// its `rearm`, the expiry to leave for this process's other guards of the hold, and
    /// its `first_hold` (a kind whose release can do neither ignores them).
    fn give_back(&self, owner: Arc<str>, hold: Arc<str>, leaving: Leaving) -> GivingBack;
}

/// What a grant gives a guard: the hold and how it is tracked.
pub(crate) struct Grant {
    pub(crate) client: LockClient,
    pub(crate) name: Arc<str>,
    pub(crate) mode: LeaseMode,
    pub(crate) owner: Arc<str>,
    /// The hold's id: the same for every guard of one hold.
    pub(crate) hold: Arc<str>,
    pub(crate) token: Option<u64>,
    pub(crate) entry: Arc<HoldEntry>,
    /// For a fixed lease: when it ends (the acquire's send time plus the lease).
    pub(crate) fixed_end: Option<Millis>,
    pub(crate) give_back: Arc<dyn GiveBack>,
}

/// Proof of one hold, of any kind. `Send` and `'static`, so it can move between tasks.
///
/// * [`release`](Guard::release) gives the hold back and reports the outcome: the way to
///   end a critical section whose result matters.
/// * Dropping the guard without `release` gives the hold back in the background (on the
///   current tokio runtime, or else the client's). It never blocks and never panics. If
///   that runtime has shut down, it logs a warning and lets the lease expire.
/// * [`lost`](Guard::lost) resolves when the library can no longer prove the hold exists
///   (renewal found it gone, Redis was unreachable until the lease ran out, or a fixed
///   lease elapsed). Stop the protected work when it fires.
/// * [`detach`](Guard::detach) stops tracking the hold without giving it back.
///
/// Guards of one hold in one process (nested ones, from a guard's `reenter`) share one
/// lost signal.
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> Result<(), redis_locks::Error> {
/// let guard = client.lock("nightly-export")?.acquire().await?;
/// tokio::select! {
///     _ = guard.lost() => eprintln!("lock lost: {:?}; stopping", guard.lost_reason()),
///     _ = async { /* long job */ } => {}
/// }
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping a guard gives the hold back at once"]
pub struct Guard<K: GuardKind> {
    pub(crate) handle: K,
    pub(crate) detail: K::Detail,
    pub(crate) core: Core,
}

impl<K: GuardKind> std::fmt::Debug for Guard<K> {
    /// One line: the lock, the hold and its state.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(K::GUARD)
            .field("lock", &self.core.name)
            .field("detail", &self.detail)
            .field("owner", &Fingerprint(&self.core.owner))
            .field("hold", &Fingerprint(&self.core.hold))
            .field("token", &self.core.token)
            .field("lease", &self.core.mode)
            .field("lost", &self.core.entry.lost_reason())
            .finish()
    }
}

impl<K: GuardKind> Guard<K> {
    pub(crate) fn new(handle: K, detail: K::Detail, grant: Grant) -> Self {
        Guard {
            handle,
            detail,
            core: Core {
                acquired_at: std::time::Instant::now(),
                grant,
                armed: true,
            },
        }
    }

    /// The lock's name.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.lock("invoice:42")?.acquire().await?;
    /// assert_eq!(guard.name(), "invoice:42");
    /// # guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.core.name
    }

    /// The owner id this hold belongs to (a semaphore acquisition's: its id).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.lock("invoice:42")?.with_owner("billing-worker-3")?;
    /// let guard = lock.acquire().await?;
    /// assert_eq!(guard.owner(), "billing-worker-3");
    /// # guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> &str {
        &self.core.owner
    }

    /// The id of the hold this guard belongs to: the request id of the acquire that
    /// created it. Guards of one hold share it; a fresh acquisition gets a new one.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let outer = client.lock("account:42")?.acquire().await?;
    /// let inner = outer.reenter().await?;
    /// assert_eq!(inner.hold_id(), outer.hold_id()); // one hold, two guards
    /// # inner.release().await?; outer.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn hold_id(&self) -> &str {
        &self.core.hold
    }

    /// The hold's fencing token, when the handle was made with `with_fencing`. Tokens
    /// grow strictly with each fresh acquisition of the lock name; a nested hold carries
    /// its outer hold's token.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.lock("ledger")?.with_fencing().acquire().await?;
    /// let token = guard.fencing_token().expect("a fenced handle");
    /// // storage.write(entry, token): the store refuses tokens lower than one it has seen
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn fencing_token(&self) -> Option<u64> {
        self.core.token
    }

    /// Whether the lease is renewed by the watchdog (as opposed to a fixed lease).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.lock("invoice:42")?;
    /// let renewed = lock.acquire().await?;
    /// assert!(renewed.is_watchdog_leased());
    /// renewed.release().await?;
    /// let fixed = lock.with_lease(Duration::from_secs(30))?.acquire().await?;
    /// assert!(!fixed.is_watchdog_leased());
    /// # fixed.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn is_watchdog_leased(&self) -> bool {
        self.core.mode == LeaseMode::Watchdog
    }

    /// The lease time left as last confirmed by Redis (zero once lost). With the watchdog
    /// this stays between two and three thirds of the watchdog timeout while all is well.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.lock("export")?.with_lease(Duration::from_secs(60))?;
    /// let guard = lock.acquire().await?;
    /// // ... later, the export is not done yet:
    /// if guard.remaining_lease() < Duration::from_secs(10) {
    ///     guard.extend(Duration::from_secs(60)).await?;
    /// }
    /// # guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn remaining_lease(&self) -> Duration {
        self.core.entry.remaining_lease()
    }

    /// Resolves when the hold is lost. Resolves at once if it already is.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.lock("nightly-export")?.acquire().await?;
    /// let finished = tokio::select! {
    ///     _ = guard.lost() => false,
    ///     _ = async { /* the export */ } => true,
    /// };
    /// if !finished {
    ///     eprintln!("lost the lock ({:?}); the export stopped", guard.lost_reason());
    /// }
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: it only observes the signal.
    pub fn lost(&self) -> WaitForCancellationFuture<'_> {
        self.core.entry.lost_token().cancelled()
    }

    /// A token cancelled when the hold is lost, to hand to code that does not borrow the
    /// guard. Cancelling it yourself does not affect the hold.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.lock("nightly-export")?.acquire().await?;
    /// let stop = guard.lost_token();
    /// let worker = tokio::spawn(async move {
    ///     tokio::select! {
    ///         _ = stop.cancelled() => eprintln!("lock lost: stopping the export"),
    ///         _ = async { /* the export */ } => {}
    ///     }
    /// });
    /// let _ = worker.await;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn lost_token(&self) -> CancellationToken {
        self.core.entry.lost_token().child_token()
    }

    /// Whether the hold has been lost. Also checks the clock, so an elapsed lease is
    /// reported even when the runtime has not run the watchdog lately.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.lock("reindex")?.acquire().await?;
    /// for batch in 0..100 {
    ///     if guard.is_lost() {
    ///         break; // stop at a safe point: the rest is no longer protected
    ///     }
    ///     // ... reindex `batch` ...
    /// }
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.core.is_lost()
    }

    /// Why the hold was lost, if it was (checks the clock first, like
    /// [`is_lost`](Guard::is_lost)).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.lock("reindex")?.acquire().await?;
    /// guard.lost().await;
    /// if let Some(reason) = guard.lost_reason() {
    ///     eprintln!("reindex lock lost: {reason}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.core.is_lost();
        self.core.entry.lost_reason()
    }

    /// Gives this hold back: for a reentrant hold, this guard's count; on the last one the
    /// hold ends and waiters are woken. Only this guard's own hold is given back: if the
    /// hold ended and the owner has since taken a newer one, that newer hold is left alone.
    ///
    /// `Ok` means this call gave the hold back while it was held. Errors:
    /// * [`Error::LockLost`] when the hold was lost before the release (the critical
    ///   section was not protected to the end);
    /// * [`Error::ReleaseUnconfirmed`] when a reply was lost and the retry found the hold
    ///   gone, so it cannot be told whether this release or an earlier loss ended it;
    /// * [`Error::Redis`] when Redis could not be reached (retrying through lost replies
    ///   and transient states such as `BUSY` and `LOADING`) within four response
    ///   timeouts, or answered with a permanent error. The release then goes on in the
    ///   background until the lease has run out (renewal has already stopped), so the hold
    ///   is given back as soon as Redis answers again, and never twice.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::Error;
    /// let guard = client.lock("invoice:42")?.acquire().await?;
    /// // ... charge the invoice ...
    /// match guard.release().await {
    ///     Ok(()) => println!("charged under the lock from start to end"),
    ///     Err(Error::LockLost { reason, .. }) => eprintln!("the lock was lost before the end: {reason}"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: once cancelled, the release goes on in a background task; the hold is
    /// given back exactly once (or expires with its lease).
    pub async fn release(self) -> Result<()> {
        self.core.release().await
    }

    /// Stops tracking this hold without giving it back: no more renewal, no release on
    /// drop. The hold stays in Redis until its lease ends, or until an owner with the same
    /// id takes it again or clears it. This is how a hold is handed to another process
    /// that uses the same explicit owner id.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// // Hand the hold to another process that uses the same owner id.
    /// let lock = client.lock("migration:v42")?.with_owner("deploy-7f3c9a1e")?;
    /// let guard = lock.with_lease(Duration::from_secs(600))?.acquire().await?;
    /// guard.detach(); // held for 10 min, or until `unlock` with the same owner id
    /// # Ok(()) }
    /// ```
    pub fn detach(mut self) {
        let _ = self.core.disarm();
    }

    /// Makes the hold last at least `lease` from now (one round trip), like rslock's
    /// `extend`, re-locking in Redisson or a permit's `updateLeaseTime`: for a fixed-lease
    /// hold that needs more time. Every kind: a lock, a read or write, a fair hold, permits.
    /// The expiry only ever lengthens, so a longer remaining lease is kept. The watchdog
    /// goes on as before: it renews watchdog holds, and only checks fixed ones. A
    /// [`Error::InvalidDuration`] for a lease below 1 ms or above
    /// [`MAX_DURATION`](crate::MAX_DURATION); [`Error::LockLost`] when the hold has
    /// already ended (it is then told lost, like a renewal would).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> Result<(), redis_locks::Error> {
    /// use std::time::Duration;
    /// let lock = client.lock("export")?.with_lease(Duration::from_secs(10))?;
    /// let guard = lock.acquire().await?; // any kind's guard: a read, a permit, ...
    /// // ... the export needs longer than planned:
    /// guard.extend(Duration::from_secs(30)).await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: a cancelled extension either lengthened the expiry or did nothing.
    pub async fn extend(&self, lease: Duration) -> Result<()> {
        let lease_ms = crate::keys::validate_ms("lease", lease)?;
        self.ensure_not_lost()?;
        let inner = &self.core.client.inner;
        let sent_at = inner.calls.clock.now();
        let reply = inner
            .calls
            .eval(&self.core.entry.extension(lease_ms))
            .await?;
        match self
            .core
            .entry
            .on_extension_reply(&inner.registry, &reply, sent_at, lease_ms)
        {
            Ok(true) => Ok(()),
            Ok(false) => Err(self.lost_error()),
            Err(unexpected) => Err(Error::UnexpectedReply(unexpected)),
        }
    }

    /// Runs `body` with this guard, then gives the hold back: every handle's scoped `run`.
    /// If the hold is lost meanwhile, the body is stopped (its future dropped at its next
    /// await point) and the result is [`Error::LockLost`]; a loss found only at the
    /// release is `LockLost` too.
    pub(crate) async fn scoped<T>(self, body: impl AsyncFnOnce(&Self) -> T) -> Result<T> {
        let finished = unless_lost(self.lost(), body(&self)).await;
        match finished {
            Some(out) => self.release().await.map(|()| out),
            None => {
                let reason = self.lost_reason().unwrap_or(LostReason::OwnerFieldGone);
                let name = self.core.name.to_string();
                drop(self);
                Err(Error::LockLost { name, reason })
            }
        }
    }

    /// Marks the hold as one server's of a RedLock (its loss alone is logged at debug).
    pub(crate) fn mark_quorum_member(&self) {
        self.core
            .entry
            .quorum_member
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The client this guard's hold belongs to.
    pub(crate) fn client(&self) -> &LockClient {
        &self.core.client
    }

    /// How long ago, in ms, the lease as last confirmed started (RedLock's validity
    /// counts from the oldest of its members').
    pub(crate) fn confirmed_age(&self) -> Millis {
        self.core.entry.confirmed_age()
    }

    /// `LockLost` with the reason this hold was lost (the hold is gone, if none is known).
    pub(crate) fn lost_error(&self) -> Error {
        self.core.lost_error()
    }

    /// `Err(LockLost)` when this hold is known to be lost (the clock included).
    pub(crate) fn ensure_not_lost(&self) -> Result<()> {
        if self.is_lost() {
            return Err(self.lost_error());
        }
        Ok(())
    }

    /// Tells every guard of this hold that it is gone (a re-entry found it ended).
    pub(crate) fn tell_gone(&self) {
        self.core.client.inner.registry.gone(&self.core.entry);
    }
}

/// What every guard holds and does, whatever its kind: not generic, so that it is
/// compiled once.
pub(crate) struct Core {
    grant: Grant,
    armed: bool,
    /// When this guard's acquire returned (for the hold-time metric).
    acquired_at: std::time::Instant,
}

impl std::ops::Deref for Core {
    type Target = Grant;

    fn deref(&self) -> &Grant {
        &self.grant
    }
}

impl Core {
    fn is_lost(&self) -> bool {
        self.entry.is_lost(&self.client.inner.registry)
    }

    fn lost_error(&self) -> Error {
        Error::LockLost {
            name: self.name.to_string(),
            reason: self
                .entry
                .lost_reason()
                .unwrap_or(LostReason::OwnerFieldGone),
        }
    }

    async fn release(mut self) -> Result<()> {
        // A lease that ran out before this call is a loss, even if the watchdog task has
        // not run since (the runtime was busy): check the clock before leaving.
        self.is_lost();
        // A guard is armed until it leaves, and only `release`, `detach` and `drop` make it
        // leave, each consuming it: this is always `Some`.
        let Some(leaving) = self.disarm() else {
            return Err(self.lost_error());
        };
        crate::observe::hold_ended(
            self.entry.kind,
            &self.name,
            self.acquired_at.elapsed(),
            "released",
        );
        let span =
            tracing::debug_span!("redis_locks::release", kind = self.entry.kind, lock = %self.name);
        let found = tracing::Instrument::instrument(self.release_detached(leaving), span).await?;
        let fixed = matches!(self.mode, LeaseMode::Fixed(_));
        match told(found, self.entry.lost_reason(), fixed) {
            Told::Released => Ok(()),
            Told::Lost { reason, gone } => {
                if gone {
                    // Tell every other guard of this hold, even if the watchdog had not
                    // noticed.
                    self.client.inner.registry.gone(&self.entry);
                }
                Err(Error::LockLost {
                    name: self.name.to_string(),
                    reason,
                })
            }
            Told::Unconfirmed => Err(Error::ReleaseUnconfirmed {
                name: self.name.to_string(),
            }),
        }
    }

    /// Runs the release (in this task; in a background task once the caller stops
    /// waiting) and waits for it for at most the core's
    /// [`RELEASE_CALLER_WAIT_RESPONSES`](timing::RELEASE_CALLER_WAIT_RESPONSES) response
    /// timeouts.
    /// If Redis is unreachable or busy for longer, the caller gets an error and the task
    /// keeps retrying until the lease has run out, so the hold is freed as soon as Redis
    /// answers again (never twice).
    async fn release_detached(&self, leaving: Leaving) -> Result<Found> {
        let inner = &self.client.inner;
        let giving_back = self
            .give_back
            .give_back(self.owner.clone(), self.hold.clone(), leaving);
        let mut work =
            crate::detach::Detachable::new(giving_back, &inner.background, &inner.runtime, true);
        let wait = inner.calls.response_timeout * timing::RELEASE_CALLER_WAIT_RESPONSES;
        match tokio::time::timeout(wait, &mut work).await {
            Ok(found) => found,
            // Dropping `work` moves the release to a background task.
            Err(_) => Err(inner.calls.redis_error(
                std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "release of {:?} not confirmed within {wait:?}; still retrying in \
                         the background until the lease runs out",
                        self.name,
                    ),
                )
                .into(),
            )),
        }
    }

    /// Makes this guard leave its hold (once): the core's
    /// [`release::leave`](crate::protocol::release::leave) (the retry bound of its
    /// release, then the re-arm its release carries when guards of the hold remain here);
    /// renewal stops with the last guard, and `Drop` does nothing more.
    /// `None` when it had already left.
    fn disarm(&mut self) -> Option<Leaving> {
        if !std::mem::replace(&mut self.armed, false) {
            return None;
        }
        let inner = &self.client.inner;
        Some(inner.registry.leave(
            &self.entry,
            self.mode,
            self.fixed_end,
            inner.watchdog_timeout.as_millis() as Millis,
            inner.calls.response_timeout.as_millis() as Millis,
        ))
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let lease_left = self.entry.remaining_lease();
        let Some(leaving) = self.disarm() else {
            return;
        };
        crate::observe::hold_ended(
            self.entry.kind,
            &self.name,
            self.acquired_at.elapsed(),
            "dropped",
        );
        let inner = &self.client.inner;
        // The current runtime, or else the client's own (a guard dropped on a plain
        // thread): the release runs there as long as that runtime lives. If it has shut
        // down, the task is dropped unrun and `Unreleased` says so.
        let runtime =
            tokio::runtime::Handle::try_current().unwrap_or_else(|_| inner.runtime.clone());
        let name = self.name.clone();
        let giving_back = self
            .give_back
            .give_back(self.owner.clone(), self.hold.clone(), leaving);
        let mut unfinished = Unreleased::new(&name, lease_left);
        inner.background.spawn(&runtime, async move {
            let outcome = giving_back.await;
            unfinished.ran();
            match outcome {
                Ok(Found::Removed) => {}
                Ok(found) => tracing::debug!(
                    lock = %name,
                    ?found,
                    "dropped guard: the hold was not given back by this release"
                ),
                Err(err) => tracing::warn!(
                    lock = %name,
                    error = %err,
                    "dropped guard: background release failed; the hold expires with its lease"
                ),
            }
        });
    }
}

/// Runs `work` (a scoped body) unless `lost` resolves first: `None` then, and `work` is
/// dropped at its next await point. Every scoped `run` (a guard's, a multi-lock's, a
/// RedLock's) stops its body this way.
pub(crate) async fn unless_lost<T>(
    lost: impl Future<Output = ()>,
    work: impl Future<Output = T>,
) -> Option<T> {
    tokio::select! {
        biased;
        _ = lost => None,
        out = work => Some(out),
    }
}
