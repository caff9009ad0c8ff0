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
use std::time::{Duration, Instant};

use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::client::LockClient;
use crate::error::{Error, LostReason, Result};
use crate::keys;
use crate::protocol::Reply;
use crate::protocol::rwlock::{
    RwAcquire, RwAcquired, RwKeys, RwKind, hold_id, release_call, state_call,
};
use crate::watchdog::{HoldEntry, LeaseMode};

/// How long a waiting writer's reservation lasts without being renewed by its next
/// attempt: a writer that died or gave up stops holding readers back after this long.
const RESERVATION: Duration = Duration::from_secs(2);
/// A waiter re-attempts at least this often (which keeps a writer's reservation alive),
/// so a lost wake-up costs at most this much.
const WAITER_RECHECK: Duration = Duration::from_millis(700);
/// Longest pause between attempts when wake-ups are unavailable (spin mode, or SUBSCRIBE
/// refused): the back-off doubles from 1 ms up to this.
const SPIN_MAX: Duration = Duration::from_millis(128);

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
            .field("owner", &self.owner)
            .field("mode", &self.mode)
            .field("fenced", &self.fenced)
            .finish_non_exhaustive()
    }
}

impl LockClient {
    /// A handle to the read-write lock called `name`. Validates the name; does not talk
    /// to Redis. Its keys are distinct from the [`Lock`](crate::Lock) of the same name.
    pub fn rw_lock(&self, name: &str) -> Result<RwLock> {
        keys::validate_name(name)?;
        let inner = &self.inner;
        Ok(RwLock {
            client: self.clone(),
            name: name.into(),
            keys: RwKeys::new(&inner.prefix, inner.db, inner.sharded, name),
            mode: LeaseMode::Watchdog,
            owner: None,
            fenced: false,
        })
    }
}

/// What a read-write lock looks like now ([`RwLock::state`]).
#[derive(Debug, Clone, PartialEq, Eq)]
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
    pub fn is_locked(&self) -> bool {
        self.writes + self.reads > 0
    }
}

impl RwLock {
    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The sorted set of its write holds.
    pub fn write_key(&self) -> &str {
        &self.keys.write
    }

    /// The sorted set of its read holds.
    pub fn read_key(&self) -> &str {
        &self.keys.read
    }

    /// The explicit owner of this handle, if any.
    pub fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    /// A handle whose holds have a fixed lease instead of the watchdog's renewal: each
    /// expires `lease` after its acquire (its guard's lost signal fires then).
    pub fn with_lease(&self, lease: Duration) -> Result<Self> {
        keys::validate_ms("lease", lease)?;
        Ok(RwLock {
            mode: LeaseMode::Fixed(lease),
            ..self.clone()
        })
    }

    /// A handle whose holds the watchdog renews (the default).
    pub fn with_watchdog(&self) -> Self {
        RwLock {
            mode: LeaseMode::Watchdog,
            ..self.clone()
        }
    }

    /// A handle that acquires for an explicit owner id: every handle with that id shares
    /// its holds (its reads let it read again while a writer waits; a write asked while
    /// it reads is [`Error::WouldDeadlock`]). Owner ids are as good as passwords.
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
    pub fn with_fencing(&self) -> Self {
        RwLock {
            fenced: true,
            ..self.clone()
        }
    }

    fn lease_ms(&self) -> u64 {
        match self.mode {
            LeaseMode::Watchdog => self.client.inner.watchdog_timeout.as_millis() as u64,
            LeaseMode::Fixed(lease) => lease.as_millis() as u64,
        }
    }

    /// Takes a read hold, waiting without limit.
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn read(&self) -> Result<RwGuard> {
        self.wait_forever(RwKind::Read).await
    }

    /// Takes a read hold if no writer holds or waits.
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn try_read(&self) -> Result<Option<RwGuard>> {
        self.acquire_until(RwKind::Read, Some(Instant::now()), None, None)
            .await
    }

    /// Takes a read hold, waiting at most `wait`.
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn try_read_for(&self, wait: Duration) -> Result<Option<RwGuard>> {
        keys::validate_ms("wait", wait)?;
        self.acquire_until(RwKind::Read, Some(Instant::now() + wait), None, None)
            .await
    }

    /// Takes the write hold, waiting without limit.
    ///
    /// Errors: [`Error::WouldDeadlock`] when this handle's explicit owner holds reads;
    /// [`Error::WrongType`]; [`Error::Redis`].
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone, and the waiter's
    /// reservation, are given back.
    pub async fn write(&self) -> Result<RwGuard> {
        self.wait_forever(RwKind::Write).await
    }

    /// Takes the write hold if nobody else holds the lock.
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn try_write(&self) -> Result<Option<RwGuard>> {
        self.acquire_until(RwKind::Write, Some(Instant::now()), None, None)
            .await
    }

    /// Takes the write hold, waiting at most `wait`.
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone, and the waiter's
    /// reservation, are given back.
    pub async fn try_write_for(&self, wait: Duration) -> Result<Option<RwGuard>> {
        keys::validate_ms("wait", wait)?;
        self.acquire_until(RwKind::Write, Some(Instant::now() + wait), None, None)
            .await
    }

    /// The holds, the writer and whether a writer waits.
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn state(&self) -> Result<RwLockState> {
        let reply = self.client.inner.read(&state_call(&self.keys)).await?;
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

    /// Acquires a hold of `kind` until `deadline` (`None`: no limit), for `owner` (the
    /// handle's owner, or a fresh one), re-entering through the live hold `joins`.
    async fn acquire_until(
        &self,
        kind: RwKind,
        deadline: Option<Instant>,
        owner: Option<Arc<str>>,
        joins: Option<Arc<str>>,
    ) -> Result<Option<RwGuard>> {
        let inner = &self.client.inner;
        let explicit_owner = owner.is_some() || self.owner.is_some();
        let owner = owner
            .or_else(|| self.owner.clone())
            .unwrap_or_else(|| inner.next_owner());
        let hold = hold_id(&owner, &inner.next_request_id());
        let waits = deadline.is_none_or(|deadline| deadline > Instant::now());
        // Listening before the first attempt: a release between a failed attempt and the
        // subscription would otherwise cost a whole re-check.
        let listener = waits.then(|| inner.hub.listen(self.keys.channel_of(kind)));
        // Gives back what this acquisition may hold (or its reservation) if the caller
        // goes away, or an attempt's outcome stays unknown.
        let mut cleanup = Cleanup {
            lock: Some(self.clone()),
            hold: hold.clone(),
            kind,
        };
        let request = RwAcquire {
            hold: hold.clone(),
            owner: owner.clone(),
            kind,
            lease_ms: self.lease_ms(),
            waits,
            explicit_owner,
            fenced: self.fenced,
            joins,
            reservation_ms: RESERVATION.as_millis() as u64,
        };
        let started = Instant::now();
        let mut spin = Duration::from_millis(1);
        loop {
            let sent_at = inner.clock.now();
            let give_up_at = tokio::time::Instant::now() + inner.response_timeout * 3;
            let call = request.call(&self.keys);
            let reply = inner.resend_until(&call, give_up_at).await.0?;
            let outcome = request.decode(&reply).map_err(Error::UnexpectedReply)?;
            let pause = match outcome {
                RwAcquired::Granted(token) => {
                    cleanup.lock = None;
                    // Readers go in together: let the next local reader look too.
                    if kind == RwKind::Read
                        && let Some(listener) = &listener
                    {
                        listener.pass_on();
                    }
                    let entry = inner.registry.grant_permits(
                        self.keys.set_of(kind),
                        &hold,
                        1,
                        self.mode,
                        self.lease_ms(),
                        sent_at,
                    );
                    crate::observe::acquire_ended(&self.name, started.elapsed(), "acquired");
                    return Ok(Some(RwGuard {
                        lock: self.clone(),
                        kind,
                        owner,
                        hold,
                        token,
                        entry,
                        armed: true,
                    }));
                }
                RwAcquired::Wait(ms) => Duration::from_millis(ms),
                RwAcquired::NotALock(what) => {
                    cleanup.lock = None;
                    return Err(self.wrong_type(what));
                }
                RwAcquired::Upgrade => {
                    cleanup.lock = None;
                    return Err(Error::WouldDeadlock {
                        name: self.name.to_string(),
                        reason: "the owner holds a read and asks for the write lock",
                    });
                }
            };
            let mut pause = pause.min(WAITER_RECHECK);
            if let Some(deadline) = deadline {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    if !waits {
                        // A single attempt never reserves: nothing to give back.
                        cleanup.lock = None;
                    }
                    return Ok(None);
                }
                pause = pause.min(left);
            }
            let Some(listener) = &listener else {
                cleanup.lock = None;
                return Ok(None);
            };
            if listener.denied() {
                pause = pause.min(spin);
                spin = (spin * 2).min(SPIN_MAX);
                tokio::time::sleep(jittered(pause, inner.jitter())).await;
                continue;
            }
            tokio::select! {
                _ = listener.notified() => {}
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// Gives back hold `hold` of `kind` (and the caller's reservation when
    /// `drop_reservation`); `Ok(true)` when this call gave the hold back.
    async fn give_back(
        &self,
        hold: &Arc<str>,
        kind: Option<RwKind>,
        drop_reservation: bool,
    ) -> Result<bool> {
        let inner = &self.client.inner;
        let call = release_call(&self.keys, hold, kind, drop_reservation);
        let give_up_at =
            tokio::time::Instant::now() + inner.watchdog_timeout.max(inner.response_timeout);
        let (reply, retried) = inner.resend_until(&call, give_up_at).await;
        match reply? {
            Reply::Int(1) => Ok(true),
            Reply::Int(0) if retried && kind.is_some() => Err(Error::ReleaseUnconfirmed {
                name: self.name.to_string(),
            }),
            Reply::Int(0) => Ok(false),
            Reply::Int(-2) => Err(self.wrong_type(String::new())),
            other => Err(Error::UnexpectedReply(format!("rw_release.lua: {other:?}"))),
        }
    }
}

/// `pause` plus up to half of it at random, so that pollers do not move in step.
fn jittered(pause: Duration, random: u64) -> Duration {
    let half = pause.as_micros() as u64 / 2;
    if half == 0 {
        return pause;
    }
    pause + Duration::from_micros(random % half)
}

/// Gives back, in the background, what an acquisition whose caller went away may hold (a
/// hold won by a reply that came too late, or a writer's reservation).
struct Cleanup {
    lock: Option<RwLock>,
    hold: Arc<str>,
    kind: RwKind,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let Some(lock) = self.lock.take() else {
            return;
        };
        let inner = lock.client.inner.clone();
        let runtime =
            tokio::runtime::Handle::try_current().unwrap_or_else(|_| inner.runtime.clone());
        let (hold, kind) = (self.hold.clone(), self.kind);
        inner.background.spawn(&runtime, async move {
            if let Err(err) = lock.give_back(&hold, Some(kind), true).await {
                tracing::debug!(lock = %lock.name, error = %err, "cleanup of an abandoned read-write acquire failed");
            }
        });
    }
}

/// A read or write hold of an [`RwLock`]. Released (in the background) when dropped;
/// prefer [`RwGuard::release`], which reports the outcome.
#[must_use = "dropping the guard releases the hold at once"]
pub struct RwGuard {
    lock: RwLock,
    kind: RwKind,
    owner: Arc<str>,
    hold: Arc<str>,
    token: Option<u64>,
    entry: Arc<HoldEntry>,
    armed: bool,
}

impl std::fmt::Debug for RwGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RwGuard")
            .field("lock", &self.lock.name)
            .field("kind", &self.kind)
            .field("owner", &self.owner)
            .field("lost", &self.entry.lost_reason())
            .finish_non_exhaustive()
    }
}

impl RwGuard {
    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.lock.name
    }

    /// Read or write.
    pub fn kind(&self) -> RwKind {
        self.kind
    }

    /// Whether this is a write hold.
    pub fn is_write(&self) -> bool {
        self.kind == RwKind::Write
    }

    /// The owner id this hold belongs to.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The fencing token of a write hold of a fenced handle ([`RwLock::with_fencing`]).
    pub fn fencing_token(&self) -> Option<u64> {
        self.token
    }

    /// Resolves when the hold is lost (expired unrenewed, deleted). Cancel-safe.
    pub fn lost(&self) -> WaitForCancellationFuture<'_> {
        self.entry.lost_token().cancelled()
    }

    /// A token cancelled when the hold is lost.
    pub fn lost_token(&self) -> CancellationToken {
        self.entry.lost_token().child_token()
    }

    /// Whether the hold is lost (also checks the clock).
    pub fn is_lost(&self) -> bool {
        self.entry.is_lost(&self.lock.client.inner.registry)
    }

    /// Why the hold was lost, if it was.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.entry.lost_reason()
    }

    /// The lease this client can still count on.
    pub fn remaining_lease(&self) -> Duration {
        self.entry.remaining_lease()
    }

    fn lost_error(&self) -> Error {
        Error::LockLost {
            name: self.lock.name.to_string(),
            reason: self.lost_reason().unwrap_or(LostReason::OwnerFieldGone),
        }
    }

    /// One attempt of `kind` for this guard's owner, re-entering through this hold.
    async fn join(&self, kind: RwKind) -> Result<RwGuard> {
        if self.is_lost() {
            return Err(self.lost_error());
        }
        let joins = (self.kind == RwKind::Read).then(|| self.hold.clone());
        match self
            .lock
            .acquire_until(kind, Some(Instant::now()), Some(self.owner.clone()), joins)
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
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn reenter(&self) -> Result<RwGuard> {
        self.join(self.kind).await
    }

    /// A read hold for the same owner: a re-entry of a read, or, through a write hold, a
    /// downgrade (take the read, then release the write: other readers may then join,
    /// and no writer can get in between). Never waits.
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn read(&self) -> Result<RwGuard> {
        self.join(RwKind::Read).await
    }

    /// A write hold for the same owner: a re-entry of a write. Through a read hold it is
    /// [`Error::WouldDeadlock`] at once: the write would wait for this very read.
    ///
    /// # Cancel safety
    /// Cancel-safe.
    pub async fn write(&self) -> Result<RwGuard> {
        if self.kind == RwKind::Read {
            return Err(Error::WouldDeadlock {
                name: self.lock.name.to_string(),
                reason: "a read holder asks for the write lock (no upgrade)",
            });
        }
        self.join(RwKind::Write).await
    }

    fn disarm(&mut self) {
        self.armed = false;
        let inner = &self.lock.client.inner;
        let lease = inner.watchdog_timeout.as_millis() as u64;
        let _ = inner
            .registry
            .leave(&self.entry, self.lock.mode, None, lease);
    }

    /// Gives the hold back. `Err(LockLost)` when it had been lost (expired, deleted);
    /// `Err(ReleaseUnconfirmed)` when a retry after a lost reply found it gone.
    ///
    /// # Cancel safety
    /// Not cancel-safe: cancelled after it was sent, the hold may or may not be back.
    pub async fn release(mut self) -> Result<()> {
        let lost = if self.is_lost() {
            self.lost_reason()
        } else {
            None
        };
        self.disarm();
        let given = self
            .lock
            .give_back(&self.hold, Some(self.kind), false)
            .await?;
        if let Some(reason) = lost {
            return Err(Error::LockLost {
                name: self.lock.name.to_string(),
                reason,
            });
        }
        if !given {
            return Err(Error::LockLost {
                name: self.lock.name.to_string(),
                reason: LostReason::OwnerFieldGone,
            });
        }
        Ok(())
    }
}

impl Drop for RwGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.disarm();
        let lock = self.lock.clone();
        let inner = lock.client.inner.clone();
        let runtime =
            tokio::runtime::Handle::try_current().unwrap_or_else(|_| inner.runtime.clone());
        let (hold, kind) = (self.hold.clone(), self.kind);
        inner.background.spawn(&runtime, async move {
            if let Err(err) = lock.give_back(&hold, Some(kind), false).await {
                tracing::warn!(lock = %lock.name, error = %err, "dropped read-write guard: background release failed; the hold expires with its lease");
            }
        });
    }
}
