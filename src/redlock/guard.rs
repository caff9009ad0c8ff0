//! The guard of a RedLock held on a majority: one lost signal over the servers' holds,
//! re-entry, extension and release, each decided by the core (`protocol::redlock`).

use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::error::{Error, LostReason, Result};
use crate::lock::LockGuard;
use crate::protocol::Millis;
use crate::protocol::redlock::{self, Won};

/// Gives back the holds of an attempt that did not reach a majority (concurrently).
pub(super) async fn give_back(holds: Vec<Option<LockGuard>>) {
    crate::join::join_all(
        holds
            .into_iter()
            .flatten()
            .map(|guard| async move {
                let name = guard.name().to_owned();
                if let Err(err) = guard.release().await {
                    tracing::debug!(lock = %name, error = %err, "RedLock: giving back a hold failed");
                }
            })
            .collect(),
    )
    .await;
}

/// A RedLock held on a majority. One lost signal: it fires when fewer than a majority of
/// its holds remain (each server's watchdog renews its own hold, and tells its loss).
/// Dropping it releases every hold in the background.
///
/// ```no_run
/// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
/// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
/// let held = job.acquire().await?;
/// tokio::select! {
///     _ = held.lost() => eprintln!("fewer than a majority hold the lock; stopping"),
///     _ = async { /* the nightly job */ } => {}
/// }
/// held.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard releases the lock at once"]
pub struct RedGuard {
    name: String,
    /// One slot per server: the hold there, if the acquire got one.
    holds: Vec<Option<LockGuard>>,
    /// The servers the majority is counted over (the RedLock's, with those not connected).
    servers: usize,
    quorum: usize,
    /// Moved on by a successful `extend`.
    valid_until: Mutex<Instant>,
    lost: CancellationToken,
    _watch: tokio_util::sync::DropGuard,
}

impl std::fmt::Debug for RedGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedGuard")
            .field("name", &self.name)
            .field("held_on", &self.held_on())
            .field("servers", &self.holds.len())
            .field("lost", &self.lost.is_cancelled())
            .finish()
    }
}

impl RedGuard {
    pub(super) fn new(
        name: String,
        holds: Vec<Option<LockGuard>>,
        servers: usize,
        valid_until: Instant,
    ) -> Self {
        let quorum = redlock::quorum(servers);
        let lost = CancellationToken::new();
        let stop = CancellationToken::new();
        holds
            .iter()
            .flatten()
            .for_each(LockGuard::mark_quorum_member);
        let tokens: Vec<CancellationToken> =
            holds.iter().flatten().map(LockGuard::lost_token).collect();
        // Lost once fewer than `quorum` holds remain.
        let fatal = redlock::losses_tolerated(tokens.len(), quorum);
        let runtime = holds
            .iter()
            .flatten()
            .next()
            .map(|guard| guard.client().inner.runtime.clone());
        let (fire, watching) = (lost.clone(), stop.clone());
        let lock = name.clone();
        let watch = async move {
            let losses = crate::join::first_n(
                tokens.into_iter().map(|t| t.cancelled_owned()).collect(),
                fatal,
            );
            tokio::select! {
                _ = losses => {
                    // The members' own losses were logged at debug: this is the loss.
                    tracing::warn!(lock = %lock, "RedLock lost: fewer than a majority of its holds remain");
                    fire.cancel();
                }
                _ = watching.cancelled() => {}
            }
        };
        match tokio::runtime::Handle::try_current().ok().or(runtime) {
            Some(handle) => {
                handle.spawn(watch);
            }
            None => lost.cancel(),
        }
        RedGuard {
            name,
            holds,
            servers,
            quorum,
            valid_until: Mutex::new(valid_until),
            lost,
            _watch: stop.drop_guard(),
        }
    }

    /// The lock's name.
    ///
    /// ```no_run
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let held = job.acquire().await?;
    /// assert_eq!(held.name(), "nightly-job");
    /// # held.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// On how many servers the lock is held (not yet known lost).
    ///
    /// ```no_run
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let held = job.acquire().await?;
    /// println!("held on {} of {} servers", held.held_on(), job.servers());
    /// # held.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn held_on(&self) -> usize {
        self.holds
            .iter()
            .flatten()
            .filter(|guard| !guard.is_lost())
            .count()
    }

    /// The servers' holds, one slot per server in the order given (`None` where the
    /// acquire got no hold).
    ///
    /// ```no_run
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let held = job.acquire().await?;
    /// for (server, hold) in held.holds().iter().enumerate() {
    ///     match hold {
    ///         Some(guard) => println!("server {server}: {:?} left", guard.remaining_lease()),
    ///         None => println!("server {server}: not held"),
    ///     }
    /// }
    /// # held.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn holds(&self) -> &[Option<LockGuard>] {
        &self.holds
    }

    /// The validity the acquire computed (`lease − time spent − drift`), counted from
    /// the acquire's start: with fixed leases, the lock must not be relied on after this.
    /// With watchdog leases the servers' renewals extend it, and [`RedGuard::lost`] is
    /// the signal to watch.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let held = job.with_lease(Duration::from_secs(30))?.acquire().await?;
    /// if std::time::Instant::now() < held.valid_until() {
    ///     // ... still safe to act under the lock ...
    /// }
    /// # held.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn valid_until(&self) -> Instant {
        *self.valid_until.lock()
    }

    /// Resolves when fewer than a majority of holds remain. Cancel-safe.
    ///
    /// ```no_run
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let held = job.acquire().await?;
    /// tokio::select! {
    ///     _ = held.lost() => eprintln!("lost: {:?}", held.lost_reason()),
    ///     _ = async { /* the nightly job */ } => {}
    /// }
    /// # drop(held);
    /// # Ok(()) }
    /// ```
    pub fn lost(&self) -> WaitForCancellationFuture<'_> {
        self.lost.cancelled()
    }

    /// A token cancelled when fewer than a majority of holds remain.
    ///
    /// ```no_run
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let held = job.acquire().await?;
    /// let stop = held.lost_token();
    /// let job_task = tokio::spawn(async move {
    ///     tokio::select! {
    ///         _ = stop.cancelled() => eprintln!("majority lost: stopping"),
    ///         _ = async { /* the nightly job */ } => {}
    ///     }
    /// });
    /// let _ = job_task.await;
    /// held.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn lost_token(&self) -> CancellationToken {
        self.lost.child_token()
    }

    /// Whether fewer than a majority of holds remain (also checks the clock).
    ///
    /// ```no_run
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let held = job.acquire().await?;
    /// for batch in 0..100 {
    ///     if held.is_lost() {
    ///         break;
    ///     }
    ///     // ... process `batch` ...
    /// }
    /// # held.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.lost.is_cancelled() || self.held_on() < self.quorum
    }

    /// Why a hold was lost, from the first lost one, when the lock is lost.
    ///
    /// ```no_run
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let held = job.acquire().await?;
    /// held.lost().await;
    /// eprintln!("RedLock lost: {:?}", held.lost_reason());
    /// # Ok(()) }
    /// ```
    pub fn lost_reason(&self) -> Option<LostReason> {
        if !self.is_lost() {
            return None;
        }
        self.holds.iter().flatten().find_map(LockGuard::lost_reason)
    }

    /// Holds lost so far (the guard is lost once fewer than a majority remain).
    ///
    /// ```no_run
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let held = job.acquire().await?;
    /// if held.lost_holds() > 0 {
    ///     eprintln!("{} server(s) lost the lock; still held on a majority", held.lost_holds());
    /// }
    /// # held.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn lost_holds(&self) -> usize {
        self.holds
            .iter()
            .flatten()
            .filter(|guard| guard.is_lost())
            .count()
    }

    /// The lease left on a majority, as last confirmed by the servers: the longest lease
    /// that at least a majority of the live holds still have (zero once lost).
    ///
    /// ```no_run
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let held = job.acquire().await?;
    /// println!("held on a majority for {:?} more", held.remaining_lease());
    /// # held.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn remaining_lease(&self) -> Duration {
        let mut left: Vec<Duration> = self
            .holds
            .iter()
            .flatten()
            .filter(|guard| !guard.is_lost())
            .map(LockGuard::remaining_lease)
            .collect();
        left.sort_unstable_by(|a, b| b.cmp(a));
        left.get(self.quorum.saturating_sub(1))
            .copied()
            .unwrap_or_default()
    }

    /// Stops tracking every server's hold without giving it back (see
    /// [`Guard::detach`](crate::Guard::detach)): the holds stay until their leases end.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// use redis_locks::RedLock;
    /// let locks = clients.iter().map(|c| c.lock("nightly-job")?.with_owner("scheduler-eu-1"));
    /// let job = RedLock::new(locks.collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let held = job.with_lease(Duration::from_secs(3600))?.acquire().await?;
    /// held.detach(); // held for an hour, or until an owner with the same id gives it back
    /// # Ok(()) }
    /// ```
    pub fn detach(mut self) {
        for guard in std::mem::take(&mut self.holds).into_iter().flatten() {
            guard.detach();
        }
    }

    /// Makes the lock last at least `lease` from now on a majority (rslock's `extend`):
    /// every live hold is extended at once, and as for an acquisition, it counts only if
    /// a majority extended it and `lease` less the time it took and the clock drift
    /// allowance leaves some validity; [`valid_until`](RedGuard::valid_until) then moves
    /// to the end of that validity. Otherwise the first server's error, or
    /// [`Error::LockLost`] when the lock is lost (`valid_until` stays as it was).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let held = job.with_lease(Duration::from_secs(30))?.acquire().await?;
    /// // ... the job needs longer ...
    /// held.extend(Duration::from_secs(60)).await?;
    /// println!("valid until {:?} now", held.valid_until());
    /// # held.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: each hold's expiry was either lengthened or left as it was, and
    /// `valid_until` is unchanged.
    pub async fn extend(&self, lease: Duration) -> Result<()> {
        let lease_ms = crate::keys::validate_ms("lease", lease)?;
        if self.is_lost() {
            return Err(self.lost_error());
        }
        let started = Instant::now();
        let outcomes = crate::join::join_all(
            self.holds
                .iter()
                .flatten()
                .map(|guard| guard.extend(lease))
                .collect(),
        )
        .await;
        let extended = outcomes.iter().filter(|outcome| outcome.is_ok()).count();
        let took = started.elapsed().as_micros().div_ceil(1_000) as Millis;
        match redlock::decide(extended, self.servers, lease_ms, took) {
            Won::Acquired { validity_ms } => {
                let until = Instant::now() + Duration::from_millis(validity_ms);
                let mut valid_until = self.valid_until.lock();
                *valid_until = until.max(*valid_until);
                Ok(())
            }
            Won::GiveBack => Err(outcomes
                .into_iter()
                .find_map(std::result::Result::err)
                .unwrap_or_else(|| self.lost_error())),
        }
    }

    /// `LockLost` with the first lost hold's reason.
    fn lost_error(&self) -> Error {
        Error::LockLost {
            name: self.name.clone(),
            reason: self
                .holds
                .iter()
                .flatten()
                .find_map(LockGuard::lost_reason)
                .unwrap_or(LostReason::OwnerFieldGone),
        }
    }

    /// Re-enters the lock on every server where it is held (a nested critical section).
    /// Never waits; fails with [`Error::LockLost`] if a majority cannot be re-entered.
    ///
    /// ```no_run
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let held = job.acquire().await?;
    /// let nested = held.reenter().await?; // a nested section on the same servers
    /// nested.release().await?;
    /// held.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: re-entries made so far are released.
    pub async fn reenter(&self) -> Result<RedGuard> {
        let mut nested: Vec<Option<LockGuard>> = Vec::with_capacity(self.holds.len());
        for hold in &self.holds {
            nested.push(match hold {
                Some(guard) => guard.reenter().await.ok(),
                None => None,
            });
        }
        if nested.iter().flatten().count() < self.quorum {
            give_back(nested).await;
            return Err(Error::LockLost {
                name: self.name.clone(),
                reason: self.lost_reason().unwrap_or(LostReason::OwnerFieldGone),
            });
        }
        Ok(RedGuard::new(
            self.name.clone(),
            nested,
            self.servers,
            self.valid_until(),
        ))
    }

    /// Releases the lock on every server. `Ok` when a majority of holds were given back
    /// while held; otherwise `Err(LockLost)` (the lock had been lost).
    ///
    /// ```no_run
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let held = job.acquire().await?;
    /// // ... the nightly job ...
    /// if let Err(err) = held.release().await {
    ///     eprintln!("the job was not protected to the end: {err}");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: every hold is still given back exactly once (each member's release
    /// finishes in the background, as every guard's release does). Only the outcome is
    /// lost.
    pub async fn release(mut self) -> Result<()> {
        let holds = std::mem::take(&mut self.holds);
        let outcomes = crate::join::join_all(
            holds
                .into_iter()
                .flatten()
                .map(LockGuard::release)
                .collect(),
        )
        .await;
        let held = outcomes.len();
        let (mut released, mut lost_n, mut lost, mut other) = (0, 0, None, None);
        for outcome in outcomes {
            match outcome {
                Ok(()) => released += 1,
                Err(err @ Error::LockLost { .. }) => {
                    lost_n += 1;
                    lost.get_or_insert(err);
                }
                Err(err) => {
                    other.get_or_insert(err);
                }
            }
        }
        match redlock::released(held, released, lost_n, self.quorum) {
            redlock::Released::Majority => Ok(()),
            // Fewer than a majority were still held when the release ran: the lock had
            // been lost.
            redlock::Released::Lost => Err(lost.unwrap_or(Error::LockLost {
                name: self.name.clone(),
                reason: LostReason::OwnerFieldGone,
            })),
            // Servers refused or did not answer: their own error, not an invented loss
            // (a majority may well still hold the lock until the leases run out).
            redlock::Released::Failed => Err(other.or(lost).unwrap_or(Error::LockLost {
                name: self.name.clone(),
                reason: LostReason::OwnerFieldGone,
            })),
        }
    }
}
