//! The RAII guard for one hold of a lock.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use super::Lock;
use crate::background::Unreleased;
use crate::error::{Error, LostReason, Result};
use crate::protocol::Millis;
use crate::protocol::hold::Rearm;
use crate::protocol::release::{Found, ReleaseOutcome, Told, told};
use crate::watchdog::{HoldEntry, LeaseMode};

/// How many response timeouts [`LockGuard::release`] waits for its outcome.
const RELEASE_WAIT_TIMEOUTS: u32 = 4;

/// Proof of one hold of a lock. `Send` and `'static`, so it can move between tasks.
///
/// * [`release`](LockGuard::release) gives the hold back and reports the outcome: the
///   way to end a critical section whose result matters.
/// * Dropping the guard without `release` gives the hold back in the background (on the
///   current tokio runtime). It never blocks and never panics. Outside a runtime it logs a
///   warning, stops renewing, and lets the lease expire.
/// * [`lost`](LockGuard::lost) resolves when the library can no longer prove the lock is
///   held (renewal found the owner's field gone, Redis was unreachable until the lease ran
///   out, or a fixed lease elapsed). Stop the protected work when it fires.
///
/// Nested guards of the same owner share one lost signal.
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
#[must_use = "dropping a guard releases the lock at once"]
pub struct LockGuard {
    /// When this guard's acquire returned (for the hold-time metric).
    acquired_at: std::time::Instant,
    lock: Lock,
    owner: Arc<str>,
    entry: Arc<HoldEntry>,
    hold: Arc<str>,
    count: u64,
    token: Option<u64>,
    /// For a fixed lease: when it ends (the acquire's send time plus the lease).
    fixed_end: Option<Millis>,
    armed: bool,
}

impl std::fmt::Debug for LockGuard {
    /// One line: the lock, the owner, the hold and its state.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("key", &self.lock.keys.hash)
            .field("owner", &self.owner)
            .field("hold", &self.hold)
            .field("count", &self.count)
            .field("token", &self.token)
            .field("lease", &self.lock.mode)
            .field("lost", &self.entry.lost_reason())
            .finish()
    }
}

impl LockGuard {
    pub(crate) fn new(
        lock: Lock,
        owner: Arc<str>,
        entry: Arc<HoldEntry>,
        hold: Arc<str>,
        count: u64,
        token: Option<u64>,
        fixed_end: Option<Millis>,
    ) -> Self {
        LockGuard {
            acquired_at: std::time::Instant::now(),
            lock,
            owner,
            entry,
            hold,
            count,
            token,
            fixed_end,
            armed: true,
        }
    }

    /// The fencing token of this hold, when the lock was taken through
    /// [`Lock::with_fencing`]. Tokens grow strictly with each fresh acquisition of the lock
    /// name; a reentrant hold carries its outer hold's token.
    pub fn fencing_token(&self) -> Option<u64> {
        self.token
    }

    /// The client this guard's lock belongs to.
    pub(crate) fn lock_client(&self) -> &crate::LockClient {
        self.lock.client()
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.lock.name()
    }

    /// The owner id this hold belongs to.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Enters the lock again as this guard's owner: a nested critical section. The new
    /// guard joins this hold (the owner's count goes up by one, one round trip) with this
    /// guard's token and lease: the watchdog's, or what is left of this guard's fixed
    /// lease, so a nested hold never stretches it. Each guard gives back its own count. It
    /// never waits: the owner already holds the lock.
    ///
    /// This is how nesting works when the handle has no explicit owner: a plain
    /// [`Lock::acquire`] is always a new owner, so a nested one would wait for the outer
    /// hold (and two futures joined in one task exclude each other, as they should).
    /// The new guard is `Send`: hand it to a spawned helper that must work inside the
    /// same critical section.
    ///
    /// Fails with [`Error::LockLost`] when this hold has ended (nothing is taken then).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> Result<(), redis_locks::Error> {
    /// let outer = client.lock("account-42")?.acquire().await?;
    /// let inner = outer.reenter().await?; // nested: count 2
    /// assert_eq!(inner.hold_count(), 2);
    /// inner.release().await?;
    /// outer.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`Lock::acquire`]: a nested hold won after the caller left is given
    /// back at once.
    pub async fn reenter(&self) -> Result<LockGuard> {
        self.ensure_not_lost()?;
        let mut lock = self.lock.as_owner(&self.owner);
        if let LeaseMode::Fixed(_) = self.lock.mode {
            // The nested hold ends with this one: re-entering must not stretch a fixed
            // lease (the script only ever lengthens the expiry).
            let left = self.remaining_lease();
            if left < Duration::from_millis(1) {
                return Err(Error::LockLost {
                    name: self.lock.name().to_owned(),
                    reason: LostReason::LeaseElapsed,
                });
            }
            lock = lock.with_lease(left)?;
        }
        match lock.try_acquire().await? {
            Some(guard) if guard.hold == self.hold => Ok(guard),
            // The owner holds a newer hold (another handle with the same explicit owner
            // took it after this one ended): not this critical section. Dropping the new
            // guard gives back exactly the count this call added.
            Some(_) | None => {
                // The hold is certainly gone: tell every guard of it now, not at the next
                // tick.
                self.lock.client.inner.registry.gone(&self.entry);
                Err(self.lost_error())
            }
        }
    }

    /// Makes the hold last at least `lease` from now (one round trip), like rslock's
    /// `extend` or re-locking in Redisson: for a fixed-lease hold that needs more time.
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
    /// let guard = lock.acquire().await?;
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
        let inner = &self.lock.client.inner;
        let sent_at = inner.clock.now();
        let reply = inner.eval(&self.entry.extension(lease_ms)).await?;
        match self
            .entry
            .on_extension_reply(&inner.registry, &reply, sent_at, lease_ms)
        {
            Ok(true) => Ok(()),
            Ok(false) => Err(self.lost_error()),
            Err(unexpected) => Err(Error::UnexpectedReply(unexpected)),
        }
    }

    /// `LockLost` with the reason this hold was lost (the hold is gone, if none is known).
    fn lost_error(&self) -> Error {
        Error::LockLost {
            name: self.lock.name().to_owned(),
            reason: self.lost_reason().unwrap_or(LostReason::OwnerFieldGone),
        }
    }

    /// `Err(LockLost)` when this hold is known to be lost (the clock included).
    fn ensure_not_lost(&self) -> Result<()> {
        if self.is_lost() {
            return Err(self.lost_error());
        }
        Ok(())
    }

    /// The owner's hold count right after this acquire: 1 for a fresh acquisition, more
    /// for a reentrant one.
    pub fn hold_count(&self) -> u64 {
        self.count
    }

    /// Whether this acquire re-entered a lock the owner already held.
    pub fn is_reentrant(&self) -> bool {
        self.count > 1
    }

    /// Whether the lease is renewed by the watchdog (as opposed to a fixed lease).
    pub fn is_watchdog_leased(&self) -> bool {
        self.lock.mode == LeaseMode::Watchdog
    }

    /// The lease time left as last confirmed by Redis (zero once lost). With the watchdog
    /// this stays between two and three thirds of the watchdog timeout while all is well.
    pub fn remaining_lease(&self) -> Duration {
        self.entry.remaining_lease()
    }

    /// How long ago, in ms, the lease as last confirmed started (RedLock's validity
    /// counts from the oldest of its members').
    pub(crate) fn confirmed_age(&self) -> crate::protocol::Millis {
        self.entry.confirmed_age()
    }

    /// Resolves when the lock is lost. Resolves at once if it already is.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only observes the signal.
    pub fn lost(&self) -> WaitForCancellationFuture<'_> {
        self.entry.lost_token().cancelled()
    }

    /// A token cancelled when the lock is lost, to hand to code that does not borrow the
    /// guard. Cancelling it yourself does not affect the lock.
    pub fn lost_token(&self) -> CancellationToken {
        self.entry.lost_token().child_token()
    }

    /// Whether the lock has been lost. Also checks the clock, so an elapsed lease is
    /// reported even when the runtime has not run the watchdog lately.
    pub fn is_lost(&self) -> bool {
        self.entry.is_lost(&self.lock.client.inner.registry)
    }

    /// The id of the hold this guard belongs to: the request id of the acquire that
    /// created it. Nested guards of one hold share it; a fresh acquisition gets a new one.
    pub fn hold_id(&self) -> &str {
        &self.hold
    }

    /// Why the lock was lost, if it was.
    pub fn lost_reason(&self) -> Option<LostReason> {
        // Checks the clock first, like `is_lost`.
        self.is_lost();
        self.entry.lost_reason()
    }

    /// Gives this hold back. On the last hold the key is deleted and one waiter per
    /// process is woken. Only this guard's own hold is given back: if the hold ended and the
    /// owner has since taken a newer one, that newer hold is left alone.
    ///
    /// `Ok` means this call gave the hold back while it was held. Errors:
    /// * [`Error::LockLost`] when the hold was lost before the release (the critical
    ///   section was not protected to the end);
    /// * [`Error::ReleaseUnconfirmed`] when a reply was lost and the retry found the hold
    ///   gone, so it cannot be told whether this release or an earlier loss ended it;
    /// * [`Error::Redis`] when Redis could not be reached (retrying through lost replies
    ///   and transient states such as `BUSY` and `LOADING`) until the lease ran out, or
    ///   answered with a permanent error; the hold then expires with its lease (renewal
    ///   has already stopped).
    ///
    /// # Cancel safety
    /// Cancel-safe: the release runs in a background task, so dropping this future does
    /// not stop it; the hold is given back exactly once (or expires with its lease).
    pub async fn release(mut self) -> Result<()> {
        // A lease that ran out before this call is a loss, even if the watchdog task has
        // not run since (the runtime was busy): check the clock before leaving.
        self.is_lost();
        let give_up_at = self.give_up_at();
        let rearm = self.disarm();
        crate::observe::hold_ended(self.lock.name(), self.acquired_at.elapsed(), "released");
        let span = tracing::debug_span!("redis_locks::release", lock = %self.lock.name());
        let outcome =
            tracing::Instrument::instrument(self.release_detached(give_up_at, rearm), span).await?;
        let lost = |reason| Error::LockLost {
            name: self.lock.name().to_owned(),
            reason,
        };
        let Some(found) = Found::of_release(&outcome) else {
            return match outcome {
                ReleaseOutcome::NotALock => Err(self.lock.wrong_type("not a hash")),
                other => Err(Error::UnexpectedReply(format!("release failed: {other:?}"))),
            };
        };
        let fixed = matches!(self.lock.mode, LeaseMode::Fixed(_));
        match told(found, self.entry.lost_reason(), fixed) {
            Told::Released => Ok(()),
            Told::Lost { reason, gone } => {
                if gone {
                    // Tell every other guard of this hold, even if the watchdog had not
                    // noticed.
                    self.lock.client.inner.registry.gone(&self.entry);
                }
                Err(lost(reason))
            }
            Told::Unconfirmed => Err(Error::ReleaseUnconfirmed {
                name: self.lock.name().to_owned(),
            }),
        }
    }

    /// Runs the release (in this task; in a background task once the caller stops
    /// waiting) and waits for it for at most
    /// [`RELEASE_WAIT_TIMEOUTS`] response timeouts. If Redis is unreachable or busy for
    /// longer, the caller gets an error and the task keeps retrying until the lease has
    /// run out, so the lock is freed as soon as Redis answers again (never twice).
    async fn release_detached(
        &self,
        give_up_at: Millis,
        rearm: Option<Rearm>,
    ) -> Result<ReleaseOutcome> {
        let inner = &self.lock.client.inner;
        let (lock, owner, hold) = (self.lock.clone(), self.owner.clone(), self.hold.clone());
        let mut work = crate::detach::Detachable::new(
            Box::pin(async move { lock.release_hold(&owner, &hold, give_up_at, rearm).await }),
            &inner.background,
            &inner.runtime,
            true,
        );
        let wait = inner.response_timeout * RELEASE_WAIT_TIMEOUTS;
        match tokio::time::timeout(wait, &mut work).await {
            Ok(outcome) => outcome,
            // Dropping `work` moves the release to a background task.
            Err(_) => Err(inner.redis_error(
                std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "release of {:?} not confirmed within {wait:?}; still retrying in \
                         the background until the lease runs out",
                        self.lock.name(),
                    ),
                )
                .into(),
            )),
        }
    }

    /// Until when a release keeps retrying: the lease as last confirmed, and at least two
    /// response timeouts.
    fn give_up_at(&self) -> Millis {
        let inner = &self.lock.client.inner;
        let min_ms = 2 * inner.response_timeout.as_millis() as Millis;
        self.entry.release_until(inner.clock.now(), min_ms)
    }

    /// Stops tracking this hold without releasing it: no more renewal, no release on
    /// drop. The hold stays in Redis until its lease ends, or until an owner with the same
    /// id re-acquires or [`unlock`](Lock::unlock)s it. This is how a hold is handed to
    /// another process that uses the same explicit owner id.
    pub fn detach(mut self) {
        let _ = self.disarm();
    }

    /// Stops renewal of this hold (once) and makes `Drop` do nothing more.
    /// Stops tracking this guard. Returns the expiry re-arm for its release when other
    /// guards of the hold remain here (see `HoldState::prepare_rearm`).
    fn disarm(&mut self) -> Option<Rearm> {
        if !std::mem::replace(&mut self.armed, false) {
            return None;
        }
        let inner = &self.lock.client.inner;
        inner.registry.leave(
            &self.entry,
            self.lock.mode,
            self.fixed_end,
            inner.watchdog_timeout.as_millis() as Millis,
        )
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let give_up_at = self.give_up_at();
        let lease_left = self.remaining_lease();
        let rearm = self.disarm();
        crate::observe::hold_ended(self.lock.name(), self.acquired_at.elapsed(), "dropped");
        let inner = &self.lock.client.inner;
        // The current runtime, or else the client's own (a guard dropped on a plain
        // thread): the release runs there as long as that runtime lives. If it has shut
        // down, the task is dropped unrun and `Unreleased` says so.
        let runtime =
            tokio::runtime::Handle::try_current().unwrap_or_else(|_| inner.runtime.clone());
        let lock = self.lock.clone();
        let owner = self.owner.clone();
        let hold = self.hold.clone();
        let background = inner.background.clone();
        let unfinished = Unreleased::new(lock.name(), lease_left);
        background.spawn(&runtime, async move {
            let mut unfinished = unfinished;
            let outcome = lock.release_hold(&owner, &hold, give_up_at, rearm).await;
            unfinished.ran();
            match outcome {
                Ok(ReleaseOutcome::Released { .. }) => {}
                Ok(outcome) => tracing::debug!(
                    lock = lock.name(),
                    ?outcome,
                    "dropped guard: the hold was not given back by this release"
                ),
                Err(err) => tracing::warn!(
                    lock = lock.name(),
                    error = %err,
                    "dropped guard: background release failed; the lease will expire"
                ),
            }
        });
    }
}
