//! The reentrant lock handle and its acquire, release and inspection operations.

use std::sync::Arc;
use std::time::Duration;

use redis::{FromRedisValue, Value};
use tokio::time::Instant;

use crate::client::{ClientInner, LockClient, RELEASE_ATTEMPTS};
use crate::error::{Error, Result};
use crate::guard::LockGuard;
use crate::keys::{self, LockKeys};
use crate::owner::current_owner;
use crate::pubsub::Listener;
use crate::watchdog::LeaseMode;

/// A handle to one named lock. Cheap to clone; creating it does not touch Redis.
///
/// By default the lock is taken with the **watchdog lease**: the lease is the client's
/// watchdog timeout and the client renews it while the guard lives. [`Lock::with_lease`]
/// gives a fixed lease instead, which is never renewed and simply expires.
///
/// Reentrancy is per owner. The default owner is the current tokio task (or thread
/// outside a task); [`Lock::with_owner`] picks an explicit one, for example to hand a lock
/// over between processes.
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> Result<(), redis_locks::Error> {
/// use std::time::Duration;
/// let lock = client.lock("inventory:sku-9")?;
/// let outer = lock.acquire().await?;           // count 1, watchdog-renewed
/// let inner = lock.acquire().await?;           // same task: re-entered, count 2
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
#[derive(Clone, Debug)]
pub struct Lock {
    pub(crate) client: LockClient,
    pub(crate) keys: LockKeys,
    owner: Option<Arc<str>>,
    pub(crate) mode: LeaseMode,
    fenced: bool,
}

/// A snapshot of a lock's state in Redis, from [`Lock::state`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockState {
    /// Every owner field with its hold count. Empty when the lock is free.
    pub holders: Vec<(String, u64)>,
    /// The remaining time to live, `None` when the lock is free.
    pub ttl: Option<Duration>,
    /// The fencing counter's current value (the token of the current or latest hold),
    /// `None` when fencing was never used on this name.
    pub fence: Option<u64>,
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
    /// after `lease` and are not renewed. Fails with [`Error::InvalidDuration`] for a lease
    /// below 1 ms or above [`MAX_DURATION`](crate::MAX_DURATION).
    pub fn with_lease(&self, lease: Duration) -> Result<Lock> {
        keys::validate_ms("lease", lease)?;
        Ok(Lock {
            mode: LeaseMode::Fixed(lease),
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
    /// lock name that ever used fencing). Once it exists, every fresh acquisition
    /// increments it, fenced or not, so its value always names the current hold. Tokens
    /// restart from 1 if the counter is deleted (e.g. Redis loses its data).
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

    /// The owner id this handle acquires as, resolved now: the explicit owner, or the
    /// current task's (thread's) default owner.
    pub fn owner(&self) -> String {
        self.resolve_owner().to_string()
    }

    fn resolve_owner(&self) -> Arc<str> {
        match &self.owner {
            Some(owner) => owner.clone(),
            None => current_owner(&self.client.inner.id).into(),
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
    /// Fails fast with [`Error::Redis`] when Redis cannot be reached, and with
    /// [`Error::WrongType`] when the key holds something else.
    ///
    /// # Cancel safety
    /// Cancel-safe. Each attempt runs in its own task; if the caller is gone when an
    /// attempt succeeds, that task releases the hold at once. A wake-up this waiter
    /// received is passed to the next local waiter.
    pub async fn acquire(&self) -> Result<LockGuard> {
        match self.acquire_until(None).await? {
            Some(guard) => Ok(guard),
            None => Err(Error::UnexpectedReply(
                "an unbounded wait ended without the lock".into(),
            )),
        }
    }

    /// Tries once, without waiting. `Ok(None)` means another owner holds the lock.
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`Lock::acquire`].
    pub async fn try_acquire(&self) -> Result<Option<LockGuard>> {
        self.acquire_until(Some(Duration::ZERO)).await
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

    async fn acquire_until(&self, wait: Option<Duration>) -> Result<Option<LockGuard>> {
        let owner = self.resolve_owner();
        let deadline = wait.map(|wait| Instant::now() + wait);
        let remaining = |now: Instant| deadline.map(|d| d.saturating_duration_since(now));

        let pttl = match self.attempt(&owner).await? {
            Attempt::Acquired(guard) => return Ok(Some(guard)),
            Attempt::Held { pttl } => pttl,
        };
        let first_pause = match remaining(Instant::now()) {
            Some(left) if left.is_zero() => return Ok(None),
            Some(left) => left.min(pttl),
            None => pttl,
        };
        // Subscribe before the next attempt, so a release between that attempt and our
        // sleep cannot be missed.
        let listener = self.client.inner.hub.listen(&self.keys.channel);
        let _ = tokio::time::timeout(first_pause, listener.ready()).await;

        let mut woken = false;
        loop {
            let mut baton = WakeBaton {
                listener: &listener,
                armed: woken,
            };
            let pttl = match self.attempt(&owner).await? {
                Attempt::Acquired(guard) => {
                    baton.armed = false;
                    return Ok(Some(guard));
                }
                Attempt::Held { pttl } => {
                    // Someone else holds it now and will announce its release.
                    baton.armed = false;
                    pttl
                }
            };
            drop(baton);
            let pause = match remaining(Instant::now()) {
                Some(left) if left.is_zero() => return Ok(None),
                Some(left) => left.min(pttl),
                None => pttl,
            };
            tokio::select! {
                _ = listener.notified() => woken = true,
                _ = tokio::time::sleep(pause) => woken = false,
            }
        }
    }

    /// One acquire attempt, run in its own task so that cancelling the caller can never
    /// strand a hold: if nobody receives the guard, dropping it releases the hold.
    async fn attempt(&self, owner: &Arc<str>) -> Result<Attempt> {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return self.attempt_here(owner).await;
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let lock = self.clone();
        let owner = owner.clone();
        let background = self.client.inner.background.clone();
        background.spawn(&runtime, async move {
            let outcome = lock.attempt_here(&owner).await;
            // If the caller is gone, the outcome comes back and is dropped here; a guard
            // in it releases the hold in its Drop.
            let _ = tx.send(outcome);
        });
        rx.await.unwrap_or(Err(Error::RuntimeShutdown))
    }

    async fn attempt_here(&self, owner: &Arc<str>) -> Result<Attempt> {
        let inner = &self.client.inner;
        let mut invocation = inner.scripts.acquire.prepare_invoke();
        invocation
            .key(&*self.keys.hash)
            .key(&*self.keys.fence)
            .arg(&**owner)
            .arg(self.lease_ms())
            .arg(if self.fenced { "1" } else { "0" });
        let sent_at = Instant::now();
        let reply: Vec<Value> = inner.eval(&invocation).await?;
        match reply.as_slice() {
            [Value::Int(1), Value::Int(count), Value::Int(token)] => {
                let entry = inner.registry.hold(
                    &self.keys.hash,
                    owner,
                    self.mode,
                    inner.watchdog_timeout,
                    sent_at,
                );
                Ok(Attempt::Acquired(LockGuard::new(
                    self.clone(),
                    owner.clone(),
                    entry,
                    *count as u64,
                    (self.fenced && *token > 0).then_some(*token as u64),
                )))
            }
            [Value::Int(0), Value::Int(pttl), _] => Ok(Attempt::Held {
                // At least 1 ms so a lock on the verge of expiry cannot make us spin.
                pttl: Duration::from_millis((*pttl).max(1) as u64),
            }),
            [Value::Int(2), found, _] => Err(Error::WrongType {
                key: self.keys.hash.to_string(),
                found: String::from_redis_value(found.clone()).unwrap_or_default(),
            }),
            other => Err(Error::UnexpectedReply(format!("acquire: {other:?}"))),
        }
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
        let owner = self.resolve_owner();
        match release(&self.client.inner, &self.keys, &owner, self.lease_ms()).await? {
            remaining if remaining >= 0 => Ok(remaining as u64),
            -1 => Err(Error::NotHeld {
                name: self.keys.name.to_string(),
                owner: owner.to_string(),
            }),
            _ => Err(self.wrong_type("not a hash")),
        }
    }

    /// Deletes the lock whoever holds it and wakes its waiters. Returns whether there was
    /// a lock. Holders find out at their next renewal (their lost signal fires) or release.
    ///
    /// # Cancel safety
    /// A cancelled call may or may not have deleted the lock.
    pub async fn force_unlock(&self) -> Result<bool> {
        let inner = &self.client.inner;
        let mut invocation = inner.scripts.force_unlock.prepare_invoke();
        invocation.key(&*self.keys.hash).arg(&*self.keys.channel);
        match inner.eval::<i64>(&invocation).await? {
            -2 => Err(self.wrong_type("not a hash")),
            deleted => Ok(deleted > 0),
        }
    }

    /// Reads the lock's holders and TTL in one snapshot.
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn state(&self) -> Result<LockState> {
        let inner = &self.client.inner;
        let mut invocation = inner.scripts.inspect.prepare_invoke();
        invocation.key(&*self.keys.hash).key(&*self.keys.fence);
        let reply: Vec<Value> = inner.eval(&invocation).await?;
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
            }),
            "hash" => {
                let mut holders = Vec::new();
                for pair in reply[3..].chunks(2) {
                    let [field, count] = pair else {
                        return Err(bad());
                    };
                    let field = String::from_redis_value(field.clone()).map_err(|_| bad())?;
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
                })
            }
            other => Err(self.wrong_type(other)),
        }
    }

    /// How many connections are subscribed to this lock's release channel
    /// (`PUBSUB NUMSUB`): one per client (process) with waiters, however many waiters it
    /// has.
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn waiting_clients(&self) -> Result<u64> {
        let inner = &self.client.inner;
        let mut conn = inner.conn.clone();
        let mut cmd = redis::cmd("PUBSUB");
        cmd.arg("NUMSUB").arg(&*self.keys.channel);
        let reply = tokio::time::timeout(
            inner.response_timeout,
            cmd.query_async::<Vec<(String, u64)>>(&mut conn),
        )
        .await
        .map_err(|_| Error::Redis(inner.timeout_error()))??;
        Ok(reply.first().map_or(0, |(_, n)| *n))
    }

    /// Whether anyone holds the lock.
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn is_locked(&self) -> Result<bool> {
        Ok(self.state().await?.is_locked())
    }

    /// Whether this handle's owner (see [`Lock::owner`]) holds the lock.
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn is_held_by_owner(&self) -> Result<bool> {
        Ok(self.hold_count().await? > 0)
    }

    /// This handle's owner's hold count (0 when it does not hold the lock).
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn hold_count(&self) -> Result<u64> {
        let owner = self.resolve_owner();
        Ok(self.state().await?.count_of(&owner))
    }

    /// The lock's remaining time to live in Redis, `None` when it is free.
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn remaining_ttl(&self) -> Result<Option<Duration>> {
        Ok(self.state().await?.ttl)
    }

    pub(crate) fn wrong_type(&self, found: &str) -> Error {
        Error::WrongType {
            key: self.keys.hash.to_string(),
            found: found.to_owned(),
        }
    }

    pub(crate) fn lease_ms_for_release(&self) -> u64 {
        self.lease_ms()
    }
}

/// Sends the release script, retrying with the same request id when the reply was lost,
/// so the hold is decremented at most once. Returns the script's raw code.
pub(crate) async fn release(
    inner: &ClientInner,
    keys: &LockKeys,
    owner: &str,
    lease_ms: u64,
) -> Result<i64> {
    let request = inner.next_request_id();
    let latch = keys.latch(&request);
    let latch_ms = inner.latch_ttl().as_millis() as u64;
    let mut invocation = inner.scripts.release.prepare_invoke();
    invocation
        .key(&*keys.hash)
        .key(&latch)
        .arg(owner)
        .arg(lease_ms)
        .arg(&*keys.channel)
        .arg(latch_ms);
    let mut attempt = 1;
    loop {
        match inner.eval::<i64>(&invocation).await {
            Err(Error::Redis(err)) if attempt < RELEASE_ATTEMPTS && may_have_run(&err) => {
                tracing::debug!(error = %err, attempt, "release reply lost; retrying");
                tokio::time::sleep(Duration::from_millis(50 * u64::from(attempt))).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// Whether a failed command may still have run on the server.
fn may_have_run(err: &redis::RedisError) -> bool {
    err.is_timeout() || err.is_io_error() || err.is_connection_dropped()
}

impl ClientInner {
    /// Runs a script with the client's response timeout.
    pub(crate) async fn eval<T: FromRedisValue>(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> Result<T> {
        let mut conn = self.conn.clone();
        match tokio::time::timeout(self.response_timeout, invocation.invoke_async(&mut conn)).await
        {
            Ok(reply) => reply.map_err(Error::Redis),
            Err(_) => Err(Error::Redis(self.timeout_error())),
        }
    }

    pub(crate) fn timeout_error(&self) -> redis::RedisError {
        std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "no reply from {} within {:?}",
                self.addr, self.response_timeout
            ),
        )
        .into()
    }
}
