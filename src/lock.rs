//! The reentrant lock handle and its acquire, release and inspection operations.

use std::sync::Arc;

use std::time::Duration;

use redis::{FromRedisValue, Value};
use tokio::time::Instant;

use crate::client::LockClient;
use crate::detach::Detachable;
use crate::error::{Error, LostReason, Result};
use crate::guard::LockGuard;
use crate::keys::{self, LockKeys};
use crate::lanes::LaneGuard;
use crate::protocol::acquire::{
    AcquireReply, AcquireRequest, AfterFailure, Granted, ReconcileStep, after_failure,
};
use crate::protocol::hold::Rearm;
use crate::protocol::lane::Resolved;
use crate::protocol::release::{ReleaseOp, ReleaseOutcome, ReleaseStep};
use crate::protocol::{Failure, Millis, Reply, force_unlock_call};
use crate::pubsub::Listener;
use crate::scripts::CallError;
use crate::watchdog::LeaseMode;

/// The reserved hash field holding the current hold's fencing token (see `lua/acquire.lua`).
const TOKEN_FIELD: &str = "\u{1}fence";
/// The reserved hash field holding the current hold's id.
pub(crate) const HOLD_FIELD: &str = "\u{1}h";

/// A handle to one named lock. Cheap to clone; creating it does not touch Redis.
///
/// By default the lock is taken with the **watchdog lease**: the lease is the client's
/// watchdog timeout and the client renews it while the guard lives. [`Lock::with_lease`]
/// gives a fixed lease instead, which is never renewed and simply expires.
///
/// Reentrancy is per owner, and explicit: each acquire of a handle without an explicit
/// owner is a new owner (two futures joined in one task exclude each other); a nested
/// critical section re-enters through its guard ([`LockGuard::reenter`]);
/// [`Lock::with_owner`] names an owner to share, for example to hand a lock over between
/// processes.
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> Result<(), redis_locks::Error> {
/// use std::time::Duration;
/// let lock = client.lock("inventory:sku-9")?;
/// let outer = lock.acquire().await?;           // count 1, watchdog-renewed
/// let inner = outer.reenter().await?;         // nested: re-entered, count 2
/// inner.release().await?;
/// outer.release().await?;                      // count 0: deleted, waiters woken
///
/// let leased = lock.with_lease(Duration::from_secs(5))?;
/// match leased.acquire_timeout(Duration::from_millis(200)).await {
///     Ok(guard) => guard.release().await?,
///     Err(redis_locks::Error::Timeout { .. }) => { /* someone else has it */ }
///     Err(other) => return Err(other),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Lock {
    pub(crate) client: LockClient,
    pub(crate) keys: LockKeys,
    owner: Option<Arc<str>>,
    pub(crate) mode: LeaseMode,
    fenced: bool,
}

impl std::fmt::Debug for Lock {
    /// One line: what identifies the lock and how it is taken (no client internals).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("key", &self.keys.hash)
            .field("owner", &self.owner)
            .field("lease", &self.mode)
            .field("fenced", &self.fenced)
            .finish()
    }
}

/// A snapshot of a lock's state in Redis, from [`Lock::state`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockState {
    /// Every owner field with its hold count. Empty when the lock is free.
    pub holders: Vec<(String, u64)>,
    /// The remaining time to live, `None` when the lock is free.
    pub ttl: Option<Duration>,
    /// The fencing counter's current value (the latest token handed out), `None` when
    /// fencing was never used on this name.
    pub fence: Option<u64>,
    /// The fencing token of the current hold, `None` when it was not taken with fencing.
    pub hold_token: Option<u64>,
}

impl LockState {
    /// Whether anyone holds the lock.
    pub fn is_locked(&self) -> bool {
        !self.holders.is_empty()
    }

    /// The hold count of `owner`, 0 if it does not hold the lock.
    pub fn count_of(&self, owner: &str) -> u64 {
        self.holders
            .iter()
            .find(|(field, _)| field == owner)
            .map_or(0, |(_, count)| *count)
    }
}

// One attempt's result, moved once per attempt: boxing the guard would cost an
// allocation on the hot path to save a copy of a few hundred bytes.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Attempt {
    Acquired(LockGuard),
    Held { pttl: Duration },
}

/// Passes a received wake-up on to the next local waiter unless disarmed, so a waiter
/// that is cancelled or fails after being woken does not strand the others.
struct WakeBaton<'a> {
    listener: &'a Listener,
    armed: bool,
}

impl Drop for WakeBaton<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.listener.pass_on();
        }
    }
}

impl Lock {
    pub(crate) fn new(client: LockClient, keys: LockKeys) -> Self {
        Lock {
            client,
            keys,
            owner: None,
            mode: LeaseMode::Watchdog,
            fenced: false,
        }
    }

    /// The same lock with a fixed lease: acquisitions through the returned handle expire
    /// after `lease` and are not renewed. Redis counts whole milliseconds, so a fraction
    /// rounds up (1.9 ms is 2 ms). Fails with [`Error::InvalidDuration`] for a lease below
    /// 1 ms or above [`MAX_DURATION`](crate::MAX_DURATION).
    pub fn with_lease(&self, lease: Duration) -> Result<Lock> {
        let ms = keys::validate_ms("lease", lease)?;
        Ok(Lock {
            mode: LeaseMode::Fixed(Duration::from_millis(ms)),
            ..self.clone()
        })
    }

    /// The same lock, handing out a **fencing token** with every acquisition: a number
    /// that grows strictly with each fresh acquisition of this lock name, taken in the same
    /// script (no extra round trip). Read it with [`LockGuard::fencing_token`] and pass it
    /// to the protected resource, which must reject any token lower than one it has seen.
    ///
    /// A reentrant acquisition takes **no new number**: it gets its outer hold's token.
    /// The counter lives at `<prefix>:{<name>}:fence` without a TTL (one small string per
    /// lock name that ever used fencing). A token is `max(counter + 1, server time in µs)`,
    /// so tokens keep growing when Redis loses the counter (restart without persistence,
    /// failover), as long as the server clock does not step back by more than the outage.
    ///
    /// The resource's one comparison: accept `token >= highest seen`, reject lower. Equal
    /// tokens come only from the same hold (nested guards share it).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> Result<(), redis_locks::Error> {
    /// let guard = client.lock("ledger")?.with_fencing().acquire().await?;
    /// let token = guard.fencing_token().expect("fenced");
    /// // storage.write_if_token_at_least(token, ...)
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_fencing(&self) -> Lock {
        Lock {
            fenced: true,
            ..self.clone()
        }
    }

    /// Whether acquisitions through this handle return fencing tokens.
    pub fn is_fenced(&self) -> bool {
        self.fenced
    }

    /// The same lock with the watchdog lease (the default).
    pub fn with_watchdog(&self) -> Lock {
        Lock {
            mode: LeaseMode::Watchdog,
            ..self.clone()
        }
    }

    /// The same lock with an explicit owner id. Holds are reentrant per owner, so every
    /// handle (in any task or process) with this owner id shares the holds. Use an
    /// unguessable id: whoever knows it can release the lock. Fails with
    /// [`Error::InvalidName`] for an empty id or one over
    /// [`MAX_OWNER_LEN`](crate::MAX_OWNER_LEN) bytes.
    pub fn with_owner(&self, owner: impl Into<String>) -> Result<Lock> {
        let owner = owner.into();
        keys::validate_owner(&owner)?;
        Ok(Lock {
            owner: Some(owner.into()),
            ..self.clone()
        })
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.keys.name
    }

    /// The client this handle belongs to.
    pub fn client(&self) -> &LockClient {
        &self.client
    }

    /// The Redis key of the lock hash.
    pub fn key(&self) -> &str {
        &self.keys.hash
    }

    /// The pub/sub channel on which releases are announced.
    pub fn channel(&self) -> &str {
        &self.keys.channel
    }

    /// The explicit owner id this handle acquires as ([`Lock::with_owner`]), or `None`:
    /// then every acquire is a new owner (see [`LockGuard::owner`] for the one a guard
    /// got, and [`LockGuard::reenter`] for nesting).
    pub fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    fn resolve_owner(&self) -> Arc<str> {
        match &self.owner {
            Some(owner) => owner.clone(),
            None => self.client.inner.next_owner(),
        }
    }

    /// This handle acting as `owner` (for [`LockGuard::reenter`]).
    pub(crate) fn as_owner(&self, owner: &Arc<str>) -> Lock {
        Lock {
            owner: Some(owner.clone()),
            ..self.clone()
        }
    }

    fn lease_ms(&self) -> u64 {
        match self.mode {
            LeaseMode::Watchdog => self.client.inner.watchdog_timeout.as_millis() as u64,
            LeaseMode::Fixed(lease) => lease.as_millis() as u64,
        }
    }

    /// Waits until the lock is acquired.
    ///
    /// The first attempt fails fast with [`Error::Redis`] when Redis cannot be reached;
    /// once waiting, it rides out connection blips and restarts, and reports
    /// [`Error::Redis`] only after an outage longer than the watchdog timeout. Fails
    /// with [`Error::WrongType`] when the key holds something else.
    ///
    /// # Cancel safety
    /// Cancel-safe. An attempt dropped after it was sent finishes in a background task,
    /// which releases a hold it won at once (see [`LockClient::flush`]). A wake-up this
    /// waiter received is passed to the next local waiter.
    pub async fn acquire(&self) -> Result<LockGuard> {
        match self.acquire_until(None).await? {
            Some(guard) => Ok(guard),
            None => Err(Error::UnexpectedReply(
                "an unbounded wait ended without the lock".into(),
            )),
        }
    }

    /// Runs `body` under the lock: acquires (waiting without limit, like
    /// [`Lock::acquire`]), runs the body with the guard, and releases. Returns the body's
    /// result when the lock was held from start to end. If the lock is lost meanwhile, the
    /// body is **stopped** (its future is dropped at its next await point) and the result is
    /// [`Error::LockLost`]; a loss found only at the release is `LockLost` too, since the
    /// end of the body was not protected. The guard lets the body read its fencing token
    /// or re-enter ([`LockGuard::reenter`]).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> Result<(), redis_locks::Error> {
    /// let lock = client.lock("nightly-report")?.with_fencing();
    /// let rows = lock
    ///     .run(async |guard| {
    ///         let token = guard.fencing_token();
    ///         // ... write, passing `token` to the store ...
    ///         42
    ///     })
    ///     .await?;
    /// # let _ = rows; Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the future stops the body and releases the hold in the
    /// background (as dropping a guard does).
    pub async fn run<T>(&self, body: impl AsyncFnOnce(&LockGuard) -> T) -> Result<T> {
        let guard = self.acquire().await?;
        let finished = {
            let work = body(&guard);
            tokio::select! {
                biased;
                _ = guard.lost() => None,
                out = work => Some(out),
            }
        };
        let lost = |reason| Error::LockLost {
            name: self.keys.name.to_string(),
            reason,
        };
        match finished {
            Some(out) => guard.release().await.map(|()| out),
            None => {
                let reason = guard.lost_reason().unwrap_or(LostReason::OwnerFieldGone);
                drop(guard);
                Err(lost(reason))
            }
        }
    }

    /// Tries once, without waiting. `Ok(None)` means another owner holds the lock. (A
    /// request whose connection dropped before Redis ran it, as a probe on the new
    /// connection shows, is sent again: that is still one attempt.)
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`Lock::acquire`].
    pub async fn try_acquire(&self) -> Result<Option<LockGuard>> {
        self.acquire_until(Some(Duration::ZERO)).await
    }

    /// Waits at most `wait`; `Ok(None)` when the lock was still held by another owner
    /// then. The `Option` form of [`Lock::acquire_timeout`], for callers to whom a busy lock
    /// is an ordinary outcome. A wait over [`MAX_DURATION`](crate::MAX_DURATION) is
    /// [`Error::InvalidDuration`].
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> Result<(), redis_locks::Error> {
    /// use std::time::Duration;
    /// match client.lock("report")?.try_acquire_for(Duration::from_secs(2)).await? {
    ///     Some(guard) => guard.release().await?,
    ///     None => println!("still busy after 2 s"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`Lock::acquire`].
    pub async fn try_acquire_for(&self, wait: Duration) -> Result<Option<LockGuard>> {
        if wait > keys::MAX_DURATION {
            return Err(Error::InvalidDuration {
                what: "wait",
                value: wait,
                reason: "must be at most 100 years; use acquire() to wait without limit",
            });
        }
        self.acquire_until(Some(wait)).await
    }

    /// Waits at most `wait`, then fails with [`Error::Timeout`]. A zero wait tries once.
    /// A wait over [`MAX_DURATION`](crate::MAX_DURATION) is [`Error::InvalidDuration`]
    /// (use [`Lock::acquire`] to wait without limit).
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`Lock::acquire`].
    pub async fn acquire_timeout(&self, wait: Duration) -> Result<LockGuard> {
        if wait > keys::MAX_DURATION {
            return Err(Error::InvalidDuration {
                what: "wait",
                value: wait,
                reason: "must be at most 100 years; use acquire() to wait without limit",
            });
        }
        match self.acquire_until(Some(wait)).await? {
            Some(guard) => Ok(guard),
            None => Err(Error::Timeout {
                name: self.keys.name.to_string(),
                waited: wait,
            }),
        }
    }

    /// One acquire call (wait `None`: without limit), observed: a `tracing` span and
    /// the acquisition metrics (see `observe.rs`).
    async fn acquire_until(&self, wait: Option<Duration>) -> Result<Option<LockGuard>> {
        use tracing::Instrument;
        let started = Instant::now();
        let span = tracing::debug_span!("redis_locks::acquire", lock = %self.keys.name);
        let outcome = self.wait_for(wait).instrument(span).await;
        let label = match &outcome {
            Ok(Some(_)) => "acquired",
            Ok(None) => "timeout",
            Err(_) => "error",
        };
        crate::observe::acquire_ended(&self.keys.name, started.elapsed(), label);
        outcome
    }

    async fn wait_for(&self, wait: Option<Duration>) -> Result<Option<LockGuard>> {
        let owner = self.resolve_owner();
        let deadline = wait.map(|wait| Instant::now() + wait);
        // How long to pause: `wanted`, cut to the time left; `None` once the wait is over.
        let pause_for = |wanted: Duration| match deadline {
            None => Some(wanted),
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                (!left.is_zero()).then(|| left.min(wanted))
            }
        };

        // The first attempt fails fast on an unreachable Redis (the caller's to handle),
        // but rides out transient server states (BUSY, LOADING, MASTERDOWN, TRYAGAIN, ...)
        // within the wait and the outage tolerance: Redis answered, it is healthy.
        let mut backoff = Duration::from_millis(25);
        let first_try = Instant::now();
        let pttl = loop {
            match self.attempt(&owner, false).await {
                Ok(Attempt::Acquired(guard)) => return Ok(Some(guard)),
                Ok(Attempt::Held { pttl }) => break pttl,
                Err(Error::Redis(err))
                    if matches!(crate::scripts::classify(&err.error), Failure::Transient(_)) =>
                {
                    let spread = self.client.inner.jitter() % (backoff.as_micros() as u64 / 2 + 1);
                    let Some(pause) = pause_for(backoff + Duration::from_micros(spread)) else {
                        return Err(Error::Redis(err));
                    };
                    if first_try.elapsed() > self.outage_tolerance() {
                        return Err(Error::Redis(err));
                    }
                    tracing::debug!(lock = self.name(), error = %err, "first attempt: server busy, retrying");
                    tokio::time::sleep(pause).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
                Err(err) => return Err(err),
            }
        };
        let Some(first_pause) = pause_for(pttl) else {
            return Ok(None);
        };
        // Subscribe before the next attempt, so a release between that attempt and our
        // sleep cannot be missed.
        let listener = self.client.inner.hub.listen(&self.keys.channel);
        let _waiting = crate::observe::Waiting::start();
        let _ = tokio::time::timeout(first_pause, listener.ready()).await;

        let mut woken = false;
        let mut outage: Option<Instant> = None;
        let mut backoff = Duration::from_millis(50);
        let mut poll_backoff = Duration::from_millis(1);
        loop {
            let mut baton = WakeBaton {
                listener: &listener,
                armed: woken,
            };
            let pause = match self.attempt(&owner, true).await {
                Ok(Attempt::Acquired(guard)) => {
                    baton.armed = false;
                    return Ok(Some(guard));
                }
                Ok(Attempt::Held { pttl }) => {
                    // Someone else holds it now and will announce its release.
                    baton.armed = false;
                    outage = None;
                    backoff = Duration::from_millis(50);
                    pttl
                }
                Err(Error::Redis(err)) if is_transient(&err.error) => {
                    // A waiter rides out a connection blip or a Redis restart; a longer
                    // outage is reported. An attempt whose reply was lost is cleaned up
                    // in the background (see `attempt_here`).
                    let since = *outage.get_or_insert_with(Instant::now);
                    if since.elapsed() > self.outage_tolerance() {
                        return Err(Error::Redis(err));
                    }
                    tracing::debug!(lock = self.name(), error = %err, "waiter: retrying");
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                    backoff
                }
                Err(err) => return Err(err),
            };
            drop(baton);
            // Without a subscription (spin mode, or the ACL refused it), poll: 1 ms doubling
            // to 128 ms, plus up to half of it again at random so that spinning waiters
            // spread out, never past the lock's TTL.
            let pause = if listener.denied() {
                let poll = poll_backoff;
                poll_backoff = (poll_backoff * 2).min(Duration::from_millis(128));
                let spread = self.client.inner.jitter() % (poll.as_micros() as u64 / 2 + 1);
                pause.min(poll + Duration::from_micros(spread))
            } else {
                pause
            };
            let Some(pause) = pause_for(pause) else {
                return Ok(None);
            };
            tokio::select! {
                _ = listener.notified() => woken = true,
                _ = tokio::time::sleep(pause) => woken = false,
            }
        }
    }

    /// How long a waiter keeps retrying through Redis errors before reporting them.
    fn outage_tolerance(&self) -> Duration {
        let inner = &self.client.inner;
        inner.watchdog_timeout.max(inner.response_timeout)
    }

    /// One acquire attempt. It runs in the caller's task; if the caller drops it after it
    /// was sent, the rest of it runs in a background task, where a won hold is released
    /// at once (its guard is dropped). So cancelling can never strand a hold.
    /// `listening`: the caller is one of the hub's listeners for this lock.
    fn attempt(&self, owner: &Arc<str>, listening: bool) -> Detachable<Attempt> {
        let lock = self.clone();
        let owner = owner.clone();
        Detachable::new(
            Box::pin(async move { lock.attempt_here(&owner, listening).await }),
            &self.client.inner,
            false,
        )
    }

    async fn attempt_here(&self, owner: &Arc<str>, listening: bool) -> Result<Attempt> {
        // The replica check runs after the lane is left: giving an unreplicated hold back
        // is a release, which enters the lane itself.
        let (attempt, acked) = self.attempt_in_lane(owner, listening).await?;
        self.replicated(attempt, acked).await
    }

    /// [`Lock::attempt_here`] inside the (lock, owner) lane. Also returns how many
    /// replicas acknowledged a won hold (`None`: not asked, or unknown).
    async fn attempt_in_lane(
        &self,
        owner: &Arc<str>,
        listening: bool,
    ) -> Result<(Attempt, Option<u32>)> {
        let inner = &self.client.inner;
        let mut lane = inner.lanes.enter(&self.keys.hash, owner).await;
        // Other local waiters may sleep on a wake-up that only one of them got: a hold this
        // attempt takes must announce its release to them (see `lua/acquire.lua`, "\1w").
        let others_waiting = inner.hub.listeners(&self.keys.channel) > usize::from(listening);
        let request = AcquireRequest {
            owner: owner.clone(),
            lease_ms: self.lease_ms(),
            request: inner.next_request_id(),
            fenced: self.fenced,
            others_waiting,
        };
        // An earlier acquire of this (lock, owner) whose reply was lost comes first: a hold
        // it took on the same terms is this attempt's result; on other terms it is given
        // back before this attempt is sent.
        match self.resolve_pending(&mut lane).await {
            Ok(Some((granted, sent_at, lost))) => {
                if lost.same_terms(&request) {
                    let guard = self.guard_for(owner, &granted, sent_at);
                    return Ok((Attempt::Acquired(guard), None));
                }
                let give_up_at = inner.clock.now() + lost.lease_ms;
                self.release_in_lane(&mut lane, owner, &granted.hold, give_up_at, None)
                    .await?;
            }
            Ok(None) => {}
            Err(err) => return Err(self.client.inner.redis_error(err.error)),
        }
        let mut request = request;
        // A dropped connection whose probe then shows that nothing ran is not an outage:
        // Redis answered the probe. Send a fresh request (a couple of times at most).
        let mut resends = 2;
        loop {
            let sent_at = inner.clock.now();
            let error = match inner.run_acquire(&request.call(&self.keys.protocol)).await {
                Ok((reply, acked)) => {
                    let decoded = request.decode(&reply).map_err(Error::UnexpectedReply)?;
                    return Ok((self.on_acquire_reply(owner, decoded, sent_at)?, acked));
                }
                Err(CallError { failure, error }) => match after_failure(&failure) {
                    AfterFailure::Reconcile => error,
                    AfterFailure::DidNotRun | AfterFailure::Fail => {
                        return Err(self.client.inner.redis_error(error));
                    }
                },
            };
            // The reply was lost, but the acquire may have run. Nothing else is sent for
            // this (lock, owner) before finding out what it did: ask now, and if that
            // fails too, keep asking in the background.
            let retry = AcquireRequest {
                request: inner.next_request_id(),
                ..request.clone()
            };
            lane.state()
                .lost_acquire(request, sent_at, inner.clock.now());
            if error.is_timeout() {
                // No answer in a whole response timeout: a probe now would most likely
                // time out too. The caller hears at once; the next attempt of this owner
                // (a waiter's) or the background task finds out what the request did.
                drop(lane);
                self.reconcile_in_background(owner.clone());
                return Err(self.client.inner.redis_error(error));
            }
            match self.resolve_pending(&mut lane).await {
                Ok(Some((granted, sent_at, _))) => {
                    tracing::debug!(lock = self.name(), "adopted a hold whose reply was lost");
                    let guard = self.guard_for(owner, &granted, sent_at);
                    return Ok((Attempt::Acquired(guard), None));
                }
                Ok(None) if resends > 0 => {
                    resends -= 1;
                    tracing::debug!(lock = self.name(), error = %error, "acquire: resending");
                    request = retry;
                }
                Ok(None) => return Err(self.client.inner.redis_error(error)),
                Err(_) => {
                    drop(lane);
                    self.reconcile_in_background(owner.clone());
                    return Err(self.client.inner.redis_error(error));
                }
            }
        }
    }

    /// Finds out what the lane's pending acquire (if any) did: the hold it took, to be
    /// adopted or given back, or nothing. The pending acquire stays when the probe got no
    /// reply (the caller reports the error; the background task asks again).
    async fn resolve_pending(
        &self,
        lane: &mut LaneGuard,
    ) -> std::result::Result<Option<(Granted, Millis, AcquireRequest)>, CallError> {
        let Some(probe) = lane.state().probe(&self.keys.protocol) else {
            return Ok(None);
        };
        let reply = self.client.inner.run(&probe).await?;
        match lane.state().on_probe_reply(&reply) {
            Ok(Resolved::Holds {
                granted,
                sent_at,
                request,
            }) => Ok(Some((granted, sent_at, request))),
            Ok(Resolved::Nothing) => Ok(None),
            Err(unexpected) => {
                tracing::error!(lock = self.name(), %unexpected, "probe: unreadable reply");
                Ok(None)
            }
        }
    }

    /// Keeps asking what a lost acquire did, for as long as a hold it took could exist,
    /// and gives such a hold back. Takes the lane only for each probe, so other requests of
    /// the owner are not held up (they resolve the pending acquire themselves first).
    fn reconcile_in_background(&self, owner: Arc<str>) {
        let runtime = tokio::runtime::Handle::try_current()
            .unwrap_or_else(|_| self.client.inner.runtime.clone());
        let lock = self.clone();
        let background = self.client.inner.background.clone();
        background.spawn(&runtime, async move {
            let inner = &lock.client.inner;
            let mut attempt = 1;
            loop {
                let delay = crate::protocol::backoff(attempt, inner.jitter());
                tokio::time::sleep(Duration::from_millis(delay)).await;
                attempt += 1;
                let mut lane = inner.lanes.enter(&lock.keys.hash, &owner).await;
                if !lane.state().is_pending() {
                    return; // resolved by the next request of this owner
                }
                match lock.resolve_pending(&mut lane).await {
                    Ok(Some((granted, _, _))) => {
                        tracing::debug!(
                            lock = lock.name(),
                            "giving back a hold whose reply was lost"
                        );
                        let give_up_at = inner.clock.now() + lock.lease_ms();
                        let _ = lock
                            .release_in_lane(&mut lane, &owner, &granted.hold, give_up_at, None)
                            .await;
                        return;
                    }
                    Ok(None) => return,
                    Err(err) => {
                        let now = inner.clock.now();
                        let step = lane
                            .state()
                            .on_probe_failure(&err.failure, now, inner.jitter());
                        if step == ReconcileStep::GiveUp {
                            tracing::warn!(
                                lock = lock.name(),
                                "could not learn whether an acquire whose reply was lost \
                                 took the lock before its lease ran out; if it did, it \
                                 has expired"
                            );
                            return;
                        }
                    }
                }
            }
        });
    }

    fn on_acquire_reply(
        &self,
        owner: &Arc<str>,
        reply: AcquireReply,
        sent_at: Millis,
    ) -> Result<Attempt> {
        match reply {
            AcquireReply::Granted(granted) => {
                Ok(Attempt::Acquired(self.guard_for(owner, &granted, sent_at)))
            }
            AcquireReply::Held { pttl_ms } => Ok(Attempt::Held {
                pttl: Duration::from_millis(pttl_ms),
            }),
            AcquireReply::NotALock(found) => Err(self.wrong_type(&found)),
        }
    }

    /// With replica acknowledgement configured: a won hold that fewer replicas than asked
    /// acknowledged (or whose acknowledgement is unknown, because its reply was lost and
    /// the hold was found by a probe) is given back, and the caller gets
    /// [`Error::NotReplicated`].
    async fn replicated(&self, attempt: Attempt, acked: Option<u32>) -> Result<Attempt> {
        let Some(ack) = self.client.inner.replica_ack else {
            return Ok(attempt);
        };
        let Attempt::Acquired(guard) = attempt else {
            return Ok(attempt);
        };
        if acked.is_some_and(|acked| acked >= ack.replicas) {
            return Ok(Attempt::Acquired(guard));
        }
        tracing::warn!(
            lock = self.name(),
            wanted = ack.replicas,
            acked,
            "acquisition not acknowledged by enough replicas; giving it back"
        );
        // Dropping the guard would release it in the background; releasing here means
        // the caller hears only once it is given back (or could not be).
        if let Err(err) = guard.release().await {
            tracing::warn!(lock = self.name(), error = %err, "giving back an unreplicated hold failed");
        }
        Err(Error::NotReplicated {
            name: self.name().to_owned(),
            wanted: ack.replicas,
            acked,
            timeout: ack.timeout,
        })
    }

    fn guard_for(&self, owner: &Arc<str>, granted: &Granted, sent_at: Millis) -> LockGuard {
        let inner = &self.client.inner;
        let entry = inner.registry.grant(
            &self.keys.hash,
            owner,
            granted,
            self.mode,
            self.lease_ms(),
            sent_at,
        );
        let fixed_end = match self.mode {
            LeaseMode::Fixed(_) => Some(sent_at + self.lease_ms()),
            LeaseMode::Watchdog => None,
        };
        LockGuard::new(
            self.clone(),
            owner.clone(),
            entry,
            granted.hold.clone(),
            granted.count,
            granted.token,
            fixed_end,
        )
    }

    /// Releases one hold of this handle's owner without a guard: for owners that took the
    /// lock in another process or task under an explicit owner id. Returns the holds
    /// left (0 when the lock was freed and its waiters woken).
    ///
    /// Fails with [`Error::NotHeld`] when the owner holds no hold, and with
    /// [`Error::WrongType`] when the key is not a lock.
    ///
    /// # Cancel safety
    /// Not cancel-safe in the sense that a cancelled call may or may not have released
    /// the hold; it never releases twice.
    pub async fn unlock(&self) -> Result<u64> {
        let Some(owner) = self.owner.clone() else {
            return Err(Error::InvalidConfig(format!(
                "unlock of {:?} needs an explicit owner (Lock::with_owner): a handle without one \
                 is a new owner on every acquire; release its guard instead",
                self.keys.name
            )));
        };
        let inner = &self.client.inner;
        let not_held = || Error::NotHeld {
            name: self.keys.name.to_string(),
            owner: owner.to_string(),
        };
        // The owner's current hold, whichever it is: a guardless release acts for the owner.
        let mut conn = inner.conn.clone();
        let hold: Option<String> = tokio::time::timeout(
            inner.response_timeout,
            redis::cmd("HGET")
                .arg(&*self.keys.hash)
                .arg(HOLD_FIELD)
                .query_async(&mut conn),
        )
        .await
        .map_err(|_| inner.redis_error(inner.timeout_error()))?
        .map_err(|err| match err.code() {
            Some("WRONGTYPE") => self.wrong_type("not a hash"),
            _ => inner.redis_error(err),
        })?;
        let Some(hold) = hold else {
            return Err(not_held());
        };
        let give_up_at = inner.clock.now() + 2 * inner.response_timeout.as_millis() as Millis;
        match self
            .release_hold(&owner, &hold.clone().into(), give_up_at, None)
            .await?
        {
            ReleaseOutcome::Released { remaining: Some(0) } => {
                inner.registry.unlocked(&self.keys.hash, &owner, &hold);
                Ok(0)
            }
            ReleaseOutcome::Released {
                remaining: Some(remaining),
            } => Ok(remaining),
            // A retry found its lost first attempt applied: that was a partial release (a
            // final one deletes the hash with the record), so holds remain. Read how many.
            ReleaseOutcome::Released { remaining: None } => {
                Ok(self.state().await?.count_of(&owner))
            }
            ReleaseOutcome::NotHeld => Err(not_held()),
            ReleaseOutcome::Unconfirmed => Err(Error::ReleaseUnconfirmed {
                name: self.keys.name.to_string(),
            }),
            ReleaseOutcome::NotALock => Err(self.wrong_type("not a hash")),
            ReleaseOutcome::Failed(_) => Err(inner.redis_error(inner.timeout_error())),
        }
    }

    /// Deletes the lock whoever holds it and wakes its waiters. Returns whether there was
    /// a lock. Holders find out at their next renewal (their lost signal fires) or release.
    ///
    /// # Cancel safety
    /// A cancelled call may or may not have deleted the lock.
    pub async fn force_unlock(&self) -> Result<bool> {
        let inner = &self.client.inner;
        match inner.eval(&force_unlock_call(&self.keys.protocol)).await? {
            Reply::Int(-2) => Err(self.wrong_type("not a hash")),
            Reply::Int(deleted) => Ok(deleted > 0),
            other => Err(Error::UnexpectedReply(format!("force_unlock: {other:?}"))),
        }
    }

    /// Reads the lock's holders and TTL in one snapshot.
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn state(&self) -> Result<LockState> {
        let inner = &self.client.inner;
        let call = crate::protocol::Call {
            script: crate::protocol::ScriptId::Inspect,
            keys: vec![self.keys.hash.clone(), self.keys.fence.clone()],
            args: Vec::new(),
        };
        let reply: Vec<Value> = match inner.read(&call).await? {
            Reply::Array(items) => items.into_iter().map(to_value).collect(),
            other => return Err(Error::UnexpectedReply(format!("inspect: {other:?}"))),
        };
        let bad = || Error::UnexpectedReply(format!("inspect: {reply:?}"));
        let (kind, pttl, fence) = match reply.as_slice() {
            [kind, Value::Int(pttl), Value::Int(fence), ..] => (
                String::from_redis_value(kind.clone()).map_err(|_| bad())?,
                *pttl,
                u64::try_from(*fence).ok(),
            ),
            _ => return Err(bad()),
        };
        match kind.as_str() {
            "none" => Ok(LockState {
                holders: Vec::new(),
                ttl: None,
                fence,
                hold_token: None,
            }),
            "hash" => {
                let mut holders = Vec::new();
                let mut hold_token = None;
                for pair in reply[3..].chunks(2) {
                    let [field, count] = pair else {
                        return Err(bad());
                    };
                    let field = String::from_redis_value(field.clone()).map_err(|_| bad())?;
                    if field == TOKEN_FIELD {
                        hold_token = String::from_redis_value(count.clone())
                            .ok()
                            .and_then(|t| t.parse::<u64>().ok());
                        continue;
                    }
                    if field.starts_with('\u{1}') {
                        // The hold id and the per-client request records.
                        continue;
                    }
                    let count = String::from_redis_value(count.clone())
                        .ok()
                        .and_then(|c| c.parse::<u64>().ok())
                        .ok_or_else(|| self.wrong_type("hash with a non-count field"))?;
                    holders.push((field, count));
                }
                if pttl < 0 {
                    return Err(self.wrong_type("hash without an expiry"));
                }
                Ok(LockState {
                    holders,
                    ttl: Some(Duration::from_millis(pttl as u64)),
                    fence,
                    hold_token,
                })
            }
            other => Err(self.wrong_type(other)),
        }
    }

    /// How many connections are subscribed to this lock's release channel
    /// (`PUBSUB NUMSUB`, or `PUBSUB SHARDNUMSUB` on a cluster): one per client (process) with waiters, however many waiters it
    /// has.
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn waiting_clients(&self) -> Result<u64> {
        let inner = &self.client.inner;
        let mut conn = inner.conn.clone();
        let mut cmd = redis::cmd("PUBSUB");
        // A cluster's wake-ups are sharded; redis-rs sends this to every primary and adds
        // the counts up.
        let numsub = if inner.sharded {
            "SHARDNUMSUB"
        } else {
            "NUMSUB"
        };
        cmd.arg(numsub).arg(&*self.keys.channel);
        let reply = tokio::time::timeout(
            inner.response_timeout,
            cmd.query_async::<Vec<(String, u64)>>(&mut conn),
        )
        .await
        .map_err(|_| inner.redis_error(inner.timeout_error()))?
        .map_err(|err| inner.redis_error(err))?;
        Ok(reply.first().map_or(0, |(_, n)| *n))
    }

    /// Whether anyone holds the lock.
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn is_locked(&self) -> Result<bool> {
        Ok(self.state().await?.is_locked())
    }

    /// Whether this handle's explicit owner (see [`Lock::with_owner`]) holds the lock.
    /// Fails with [`Error::InvalidConfig`] for a handle without one (each of its acquires
    /// is a new owner; ask the guard).
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn is_held_by_owner(&self) -> Result<bool> {
        Ok(self.hold_count().await? > 0)
    }

    /// This handle's explicit owner's hold count (0 when it does not hold the lock).
    /// Fails with [`Error::InvalidConfig`] for a handle without an explicit owner.
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn hold_count(&self) -> Result<u64> {
        let Some(owner) = &self.owner else {
            return Err(Error::InvalidConfig(format!(
                "the hold count of {:?} needs an explicit owner (Lock::with_owner)",
                self.keys.name
            )));
        };
        Ok(self.state().await?.count_of(owner))
    }

    /// The lock's remaining time to live in Redis, `None` when it is free.
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn remaining_ttl(&self) -> Result<Option<Duration>> {
        Ok(self.state().await?.ttl)
    }

    /// `found`: a Redis type name (`string`, from `TYPE`) or a description from a script
    /// (`hash without an expiry`); the error gets it as a noun phrase ("a string").
    pub(crate) fn wrong_type(&self, found: &str) -> Error {
        let found = match found {
            "zset" => "a sorted set".to_owned(),
            "not a hash" => "a value that is not a hash".to_owned(),
            other if other.starts_with("a ") || other.starts_with("an ") => other.to_owned(),
            other => format!("a {other}"),
        };
        Error::WrongType {
            key: self.keys.hash.to_string(),
            found,
        }
    }

    /// Gives back one hold: the protocol core's [`ReleaseOp`], driven until it is done.
    /// Every retry sends the same request id, so the hold is given back at most once, and
    /// only if it is still the named hold. Retries through lost replies and transient
    /// server states stop at `give_up_at`.
    pub(crate) async fn release_hold(
        &self,
        owner: &Arc<str>,
        hold: &Arc<str>,
        give_up_at: Millis,
        rearm: Option<Rearm>,
    ) -> Result<ReleaseOutcome> {
        let inner = &self.client.inner;
        let mut lane = inner.lanes.enter(&self.keys.hash, owner).await;
        // A pending lost acquire of this owner is resolved first (its hold given back), so
        // this release's record cannot hide it.
        loop {
            match self.resolve_pending(&mut lane).await {
                Ok(Some((granted, _, _))) => {
                    self.release_in_lane(&mut lane, owner, &granted.hold, give_up_at, None)
                        .await?;
                }
                Ok(None) => break,
                Err(err) => {
                    let now = inner.clock.now();
                    lane.state()
                        .on_probe_failure(&err.failure, now, inner.jitter());
                    if now >= give_up_at {
                        return Err(self.client.inner.redis_error(err.error));
                    }
                    let delay = crate::protocol::backoff(1, inner.jitter());
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                }
            }
        }
        self.release_in_lane(&mut lane, owner, hold, give_up_at, rearm)
            .await
    }

    /// The release loop, for a caller that holds the lane.
    async fn release_in_lane(
        &self,
        _lane: &mut LaneGuard,
        owner: &Arc<str>,
        hold: &Arc<str>,
        give_up_at: Millis,
        rearm: Option<Rearm>,
    ) -> Result<ReleaseOutcome> {
        let inner = &self.client.inner;
        let mut op = ReleaseOp::new(
            owner.clone(),
            hold.clone(),
            inner.next_request_id(),
            give_up_at,
        )
        .with_rearm(rearm);
        let call = op.call(&self.keys.protocol);
        loop {
            let failure = match inner.run(&call).await {
                Ok(reply) => return op.on_reply(&reply).map_err(Error::UnexpectedReply),
                Err(err) => {
                    tracing::debug!(lock = self.name(), error = %err.error, "release: no reply");
                    err
                }
            };
            match op.on_failure(&failure.failure, inner.clock.now(), inner.jitter()) {
                ReleaseStep::Done(ReleaseOutcome::Failed(_)) => {
                    return Err(inner.redis_error(failure.error));
                }
                ReleaseStep::Done(outcome) => return Ok(outcome),
                ReleaseStep::RetryAt(at) => {
                    tokio::time::sleep_until(inner.clock.instant(at)).await;
                }
            }
        }
    }
}

fn to_value(reply: Reply) -> Value {
    match reply {
        Reply::Nil => Value::Nil,
        Reply::Int(n) => Value::Int(n),
        Reply::Bulk(bytes) => Value::BulkString(bytes),
        Reply::Status(text) | Reply::Error(text) => Value::SimpleString(text),
        Reply::Array(items) => Value::Array(items.into_iter().map(to_value).collect()),
    }
}

/// Errors a waiter retries through: the connection failed, or the server is in a transient
/// state (`BUSY`, `LOADING`, ...).
fn is_transient(err: &redis::RedisError) -> bool {
    !matches!(crate::scripts::classify(err), Failure::Permanent(_))
}
