//! The RAII guard for one hold of a lock.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::error::{Error, LostReason, Result};
use crate::lock::Lock;
use crate::watchdog::{HoldEntry, LeaseMode};

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
#[derive(Debug)]
#[must_use = "dropping a guard releases the lock at once"]
pub struct LockGuard {
    lock: Lock,
    owner: Arc<str>,
    entry: Arc<HoldEntry>,
    count: u64,
    token: Option<u64>,
    armed: bool,
}

impl LockGuard {
    pub(crate) fn new(
        lock: Lock,
        owner: Arc<str>,
        entry: Arc<HoldEntry>,
        count: u64,
        token: Option<u64>,
    ) -> Self {
        LockGuard {
            lock,
            owner,
            entry,
            count,
            token,
            armed: true,
        }
    }

    /// The fencing token of this hold, when the lock was taken through
    /// [`Lock::with_fencing`]. Tokens grow strictly with each fresh acquisition of the lock
    /// name; a reentrant hold carries its outer hold's token.
    pub fn fencing_token(&self) -> Option<u64> {
        self.token
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.lock.name()
    }

    /// The owner id this hold belongs to.
    pub fn owner(&self) -> &str {
        &self.owner
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

    /// Whether the lock has been lost.
    pub fn is_lost(&self) -> bool {
        self.entry.lost_token().is_cancelled()
    }

    /// Why the lock was lost, if it was.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.entry.lost_reason()
    }

    /// Gives this hold back. On the last hold the key is deleted and one waiter per
    /// process is woken.
    ///
    /// Errors:
    /// * [`Error::LockLost`] when the lock was lost before the release (the critical
    ///   section was not protected to the end);
    /// * [`Error::Redis`] when Redis could not be reached after retries; the hold then
    ///   expires with its lease (renewal has already stopped).
    ///
    /// # Cancel safety
    /// If the future is dropped before completing, the hold may or may not have been
    /// released; it is never released twice, renewal has stopped, and the lease bounds
    /// how long it can stay.
    pub async fn release(mut self) -> Result<()> {
        self.disarm();
        let code = self.lock.release_hold(&self.owner).await?;
        let lost = |reason| Error::LockLost {
            name: self.lock.name().to_owned(),
            reason,
        };
        match code {
            remaining if remaining >= 0 => match self.entry.lost_reason() {
                Some(reason) => Err(lost(reason)),
                None => Ok(()),
            },
            -1 => {
                let reason = self.entry.lost_reason().unwrap_or(match self.lock.mode {
                    LeaseMode::Fixed(_) => LostReason::LeaseElapsed,
                    LeaseMode::Watchdog => LostReason::OwnerFieldGone,
                });
                // Tell every clone of the lost token, even if the watchdog had not noticed.
                self.lock
                    .client
                    .inner
                    .registry
                    .declare_lost(&self.entry, reason);
                Err(lost(reason))
            }
            _ => Err(self.lock.wrong_type("not a hash")),
        }
    }

    /// Stops tracking this hold without releasing it: no more renewal, no release on
    /// drop. The hold stays in Redis until its lease ends, or until an owner with the same
    /// id re-acquires or [`unlock`](Lock::unlock)s it. This is how a hold is handed to
    /// another process that uses the same explicit owner id.
    pub fn detach(mut self) {
        self.disarm();
    }

    /// Stops renewal of this hold (once) and makes `Drop` do nothing more.
    fn disarm(&mut self) {
        if std::mem::replace(&mut self.armed, false) {
            self.lock
                .client
                .inner
                .registry
                .unhold(&self.entry, self.lock.mode);
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.disarm();
        let inner = &self.lock.client.inner;
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let lock = self.lock.clone();
                let owner = self.owner.clone();
                let background = inner.background.clone();
                background.spawn(&runtime, async move {
                    match lock.release_hold(&owner).await {
                        Ok(code) if code >= 0 => {}
                        Ok(_) => tracing::debug!(
                            lock = lock.name(),
                            "dropped guard: the hold was already gone"
                        ),
                        Err(err) => tracing::warn!(
                            lock = lock.name(),
                            error = %err,
                            "dropped guard: background release failed; the lease will expire"
                        ),
                    }
                });
            }
            Err(_) => tracing::warn!(
                lock = self.lock.name(),
                "guard dropped outside a tokio runtime; the lock expires with its lease"
            ),
        }
    }
}
