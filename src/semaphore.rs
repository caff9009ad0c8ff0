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

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::client::LockClient;
use crate::error::{Error, LostReason, Result};
use crate::keys;
use crate::protocol::Reply;
use crate::protocol::semaphore::{
    SemAcquired, SemaphoreKeys, acquire_call, decode_acquire, release_call, set_call, state_call,
};
use crate::watchdog::{HoldEntry, LeaseMode};

/// How long a waiter's reservation lasts without being renewed by its next attempt: a
/// waiter that died or gave up stops holding permits back after this long.
const RESERVATION: Duration = Duration::from_secs(2);
/// A waiter re-attempts at least this often, which keeps its reservation alive.
const WAITER_RECHECK: Duration = Duration::from_millis(700);

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
    pub fn semaphore(&self, name: &str) -> Result<Semaphore> {
        keys::validate_name(name)?;
        let inner = &self.inner;
        let base = format!("{}:{{{name}}}", inner.prefix);
        Ok(Semaphore {
            client: self.clone(),
            name: name.into(),
            keys: SemaphoreKeys {
                hash: format!("{base}:semaphore").into(),
                permits: format!("{base}:permits").into(),
                channel: format!("{base}:semaphore:db{}:released", inner.db).into(),
                sharded: inner.sharded,
            },
            mode: LeaseMode::Watchdog,
        })
    }
}

/// The state of a semaphore ([`Semaphore::state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    pub fn available(&self) -> u64 {
        self.size
            .unwrap_or(0)
            .saturating_sub(self.in_use + self.reserved)
    }
}

impl Semaphore {
    /// The semaphore's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its size-and-reservation hash key.
    pub fn key(&self) -> &str {
        &self.keys.hash
    }

    /// Its permits key (a sorted set).
    pub fn permits_key(&self) -> &str {
        &self.keys.permits
    }

    /// A handle whose permits have a fixed lease instead of the watchdog's renewal: they
    /// expire `lease` after each acquire (the guard's lost signal fires then).
    pub fn with_lease(mut self, lease: Duration) -> Result<Self> {
        keys::validate_ms("lease", lease)?;
        self.mode = LeaseMode::Fixed(lease);
        Ok(self)
    }

    fn lease_ms(&self) -> u64 {
        match self.mode {
            LeaseMode::Watchdog => self.client.inner.watchdog_timeout.as_millis() as u64,
            LeaseMode::Fixed(lease) => lease.as_millis() as u64,
        }
    }

    /// Sets the number of permits (at least 1), whether or not one was set before; wakes
    /// waiters (more may fit now). Returns the previous size. Shrinking takes no permit
    /// back: new ones are granted once enough are given back or expire.
    ///
    /// # Cancel safety
    /// Cancelling after the command was sent may leave the new size set.
    pub async fn set_permits(&self, size: u64) -> Result<Option<u64>> {
        self.set(size, false).await
    }

    /// Sets the number of permits unless one is set already; returns whether it set it.
    ///
    /// # Cancel safety
    /// Cancelling after the command was sent may leave the size set.
    pub async fn try_set_permits(&self, size: u64) -> Result<bool> {
        Ok(self.set(size, true).await?.is_none())
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
            .eval(&set_call(&self.keys, size, only_if_unset))
            .await?;
        match reply {
            Reply::Array(items) => match items.as_slice() {
                [Reply::Int(-1), Reply::Int(_)] => Ok(None),
                [Reply::Int(previous), Reply::Int(_)] if *previous >= 0 => {
                    Ok(Some(*previous as u64))
                }
                [Reply::Int(-2)] => Err(self.wrong_type()),
                _ => Err(Error::UnexpectedReply(format!("sem_set.lua: {items:?}"))),
            },
            other => Err(Error::UnexpectedReply(format!("sem_set.lua: {other:?}"))),
        }
    }

    /// The size, the permits in use and the reserved ones.
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn state(&self) -> Result<SemaphoreState> {
        match self.client.inner.read(&state_call(&self.keys)).await? {
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
    /// # Cancel safety
    /// Cancel-safe: permits won by an attempt whose caller has gone are given back.
    pub async fn try_acquire(&self, n: u32) -> Result<Option<SemaphoreGuard>> {
        self.acquire_until(n, Some(Instant::now())).await
    }

    /// Takes `n` permits, waiting at most `wait`.
    ///
    /// # Cancel safety
    /// Cancel-safe: permits won by an attempt whose caller has gone, and the waiter's
    /// reservation, are given back.
    pub async fn try_acquire_for(&self, n: u32, wait: Duration) -> Result<Option<SemaphoreGuard>> {
        keys::validate_ms("wait", wait)?;
        self.acquire_until(n, Some(Instant::now() + wait)).await
    }

    async fn acquire_until(
        &self,
        n: u32,
        deadline: Option<Instant>,
    ) -> Result<Option<SemaphoreGuard>> {
        if n == 0 {
            return Err(Error::InvalidConfig(format!(
                "semaphore {:?}: acquire at least 1 permit",
                self.name
            )));
        }
        let inner = &self.client.inner;
        let id: Arc<str> = inner.next_request_id().into();
        let waits = deadline.is_none_or(|deadline| deadline > Instant::now());
        let mut listener: Option<crate::pubsub::Listener> = None;
        let mut reserved = false;
        // Gives back what this acquisition may hold if the caller goes away meanwhile.
        let mut cleanup = Cleanup {
            semaphore: Some(self.clone()),
            id: id.clone(),
            n,
        };
        loop {
            let sent_at = inner.clock.now();
            let reply = self.attempt(&id, n, waits).await;
            let outcome = match reply {
                Ok(outcome) => outcome,
                Err(err) => return Err(err),
            };
            reserved |= waits;
            let pause = match outcome {
                SemAcquired::Granted => {
                    cleanup.semaphore = None;
                    // A release may have freed more than this acquisition took: let the
                    // next local waiter look too.
                    if let Some(listener) = &listener {
                        listener.pass_on();
                    }
                    let entry = inner.registry.grant_members(
                        &self.keys.permits,
                        &id,
                        n,
                        self.mode,
                        self.lease_ms(),
                        sent_at,
                    );
                    return Ok(Some(SemaphoreGuard {
                        semaphore: self.clone(),
                        id,
                        n,
                        entry,
                        armed: true,
                    }));
                }
                SemAcquired::Wait(ms) => Duration::from_millis(ms),
                SemAcquired::NoSize => {
                    return Err(Error::InvalidConfig(format!(
                        "semaphore {:?} has no size: call set_permits first",
                        self.name
                    )));
                }
                SemAcquired::TooMany(size) => {
                    return Err(Error::InvalidConfig(format!(
                        "semaphore {:?} has {size} permits; {n} can never be granted",
                        self.name
                    )));
                }
                SemAcquired::NotASemaphore(_) => return Err(self.wrong_type()),
            };
            let mut pause = pause.min(WAITER_RECHECK);
            if let Some(deadline) = deadline {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    if !reserved {
                        cleanup.semaphore = None;
                    }
                    return Ok(None);
                }
                pause = pause.min(left);
            }
            let listener = listener.get_or_insert_with(|| inner.hub.listen(&self.keys.channel));
            if listener.denied() {
                pause = pause.min(Duration::from_millis(50));
            }
            tokio::select! {
                _ = listener.notified() => {}
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// One attempt, retried through lost replies with the same permit id (the script finds
    /// permits an earlier copy took).
    async fn attempt(&self, id: &Arc<str>, n: u32, reserve: bool) -> Result<SemAcquired> {
        let inner = &self.client.inner;
        let call = acquire_call(
            &self.keys,
            id,
            n,
            self.lease_ms(),
            reserve,
            RESERVATION.as_millis() as u64,
        );
        let give_up_at = tokio::time::Instant::now() + inner.response_timeout * 3;
        let reply = inner.resend_until(&call, give_up_at).await.0?;
        decode_acquire(&reply).map_err(Error::UnexpectedReply)
    }

    fn wrong_type(&self) -> Error {
        Error::WrongType {
            key: self.keys.hash.to_string(),
            found: "keys that are not a semaphore".into(),
        }
    }

    /// Gives back acquisition `id`; `Ok(given back)`.
    async fn give_back(&self, id: &Arc<str>, n: u32, drop_reservation: bool) -> Result<u64> {
        let inner = &self.client.inner;
        let call = release_call(&self.keys, id, n, drop_reservation);
        // As long as the permits could live (see held.rs, give_back).
        let lease = Duration::from_millis(self.lease_ms());
        let give_up_at = tokio::time::Instant::now()
            + lease
                .max(inner.watchdog_timeout)
                .max(inner.response_timeout);
        let (reply, retried) = inner.resend_until(&call, give_up_at).await;
        match reply? {
            Reply::Int(-2) => Err(self.wrong_type()),
            Reply::Int(removed) if removed >= 0 => {
                if removed == 0 && retried && n > 0 {
                    // The lost attempt may have given them back; cannot tell.
                    return Err(Error::ReleaseUnconfirmed {
                        name: self.name.to_string(),
                    });
                }
                Ok(removed as u64)
            }
            other => Err(Error::UnexpectedReply(format!(
                "sem_release.lua: {other:?}"
            ))),
        }
    }
}

/// Gives back, in the background, what an acquisition whose caller went away may hold
/// (permits won by a reply that came too late, or its reservation).
struct Cleanup {
    semaphore: Option<Semaphore>,
    id: Arc<str>,
    n: u32,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let Some(semaphore) = self.semaphore.take() else {
            return;
        };
        let inner = semaphore.client.inner.clone();
        let runtime =
            tokio::runtime::Handle::try_current().unwrap_or_else(|_| inner.runtime.clone());
        let (id, n) = (self.id.clone(), self.n);
        inner.background.spawn(&runtime, async move {
            if let Err(err) = semaphore.give_back(&id, n, true).await {
                tracing::debug!(semaphore = %semaphore.name, error = %err, "cleanup of an abandoned acquire failed");
            }
        });
    }
}

/// Permits held from a [`Semaphore`]. Released (in the background) when dropped; prefer
/// [`SemaphoreGuard::release`], which reports the outcome.
#[must_use = "dropping the guard gives the permits back at once"]
pub struct SemaphoreGuard {
    semaphore: Semaphore,
    id: Arc<str>,
    n: u32,
    entry: Arc<HoldEntry>,
    armed: bool,
}

impl std::fmt::Debug for SemaphoreGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SemaphoreGuard")
            .field("semaphore", &self.semaphore.name)
            .field("permits", &self.n)
            .field("id", &self.id)
            .field("lost", &self.entry.lost_reason())
            .finish()
    }
}

impl SemaphoreGuard {
    /// The semaphore's name.
    pub fn name(&self) -> &str {
        &self.semaphore.name
    }

    /// How many permits this guard holds.
    pub fn permits(&self) -> u32 {
        self.n
    }

    /// The id of this acquisition (its permits are `<id>:1..n` in the permits set).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Resolves when the permits are lost (expired unrenewed, deleted, or the semaphore's
    /// keys removed). Cancel-safe.
    pub fn lost(&self) -> WaitForCancellationFuture<'_> {
        self.entry.lost_token().cancelled()
    }

    /// A token cancelled when the permits are lost.
    pub fn lost_token(&self) -> CancellationToken {
        self.entry.lost_token().child_token()
    }

    /// Whether the permits are lost (also checks the clock).
    pub fn is_lost(&self) -> bool {
        self.entry.is_lost(&self.semaphore.client.inner.registry)
    }

    /// Why the permits were lost, if they were.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.entry.lost_reason()
    }

    /// The lease this client can still count on.
    pub fn remaining_lease(&self) -> Duration {
        self.entry.remaining_lease()
    }

    fn disarm(&mut self) {
        self.armed = false;
        let inner = &self.semaphore.client.inner;
        let lease = inner.watchdog_timeout.as_millis() as u64;
        let _ = inner
            .registry
            .leave(&self.entry, self.semaphore.mode, None, lease);
    }

    /// Gives the permits back. `Err(LockLost)` when they had been lost (expired, deleted);
    /// `Err(ReleaseUnconfirmed)` when a retry after a lost reply found them gone.
    ///
    /// # Cancel safety
    /// Not cancel-safe: cancelled after it was sent, the permits may or may not be back.
    pub async fn release(mut self) -> Result<()> {
        let lost = if self.is_lost() {
            self.lost_reason()
        } else {
            None
        };
        self.disarm();
        let given = self.semaphore.give_back(&self.id, self.n, false).await?;
        if let Some(reason) = lost {
            return Err(Error::LockLost {
                name: self.semaphore.name.to_string(),
                reason,
            });
        }
        if given == 0 {
            return Err(Error::LockLost {
                name: self.semaphore.name.to_string(),
                reason: LostReason::OwnerFieldGone,
            });
        }
        Ok(())
    }
}

impl Drop for SemaphoreGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.disarm();
        let semaphore = self.semaphore.clone();
        let inner = semaphore.client.inner.clone();
        let runtime =
            tokio::runtime::Handle::try_current().unwrap_or_else(|_| inner.runtime.clone());
        let (id, n) = (self.id.clone(), self.n);
        inner.background.spawn(&runtime, async move {
            if let Err(err) = semaphore.give_back(&id, n, false).await {
                tracing::warn!(semaphore = %semaphore.name, error = %err, "dropped permits: background release failed; they expire with their lease");
            }
        });
    }
}
