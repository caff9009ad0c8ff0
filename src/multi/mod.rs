//! The multi-lock: several locks taken all or none, as one guard with one lost signal.
//!
//! Members are locks of any kind that holds ([`Member`]: plain, read, write, fair),
//! possibly of different clients (servers, clusters). They are
//! always taken in one global order, by key and then by server, so two multi-locks over
//! the same names can never wait for each other in a cycle, whatever order their callers
//! named the locks in (the classic lock-ordering rule). A failed or timed-out attempt
//! gives back every member it took before returning, so nothing is left held.

mod member;

pub use member::{Member, MemberGuard};

use crate::protocol::multi::{MultiAcquire, MultiRelease, MultiStep, OrderKey, global_order};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::error::{Error, LostReason, Result};

/// Several locks taken all or none: plain locks, reads and writes of read-write locks,
/// fair locks, in any mix ([`Member`]). Cheap to clone.
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> Result<(), redis_locks::Error> {
/// use redis_locks::MultiLock;
/// let transfer = MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?;
/// let both = transfer.acquire().await?;   // both accounts, or none
/// // ... move the money; `both.lost()` fires if either lock is lost ...
/// both.release().await?;
/// # Ok(()) }
/// ```
///
/// Members of other kinds are named as a [`Member`]; see there for a read and a write.
#[derive(Clone)]
pub struct MultiLock {
    /// In the global order (by key, then by server).
    members: Arc<[Member]>,
}

impl std::fmt::Debug for MultiLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiLock")
            .field(
                "keys",
                &self.members.iter().map(Member::key).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl MultiLock {
    /// A multi-lock over `locks` (at least one; each lock once: the same key on the same
    /// server twice is an [`Error::InvalidConfig`], since a member would wait for itself;
    /// so is a read and a write of one read-write lock). Each member keeps its own options
    /// (lease, fencing, owner).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::{Member, MultiLock};
    /// let transfer = MultiLock::new([
    ///     Member::from(client.lock("account:17")?),
    ///     Member::from(client.lock("account:42")?),
    ///     Member::Read(client.rw_lock("exchange-rates")?),
    /// ])?;
    /// # Ok(()) }
    /// ```
    pub fn new(locks: impl IntoIterator<Item = impl Into<Member>>) -> Result<Self> {
        let named: Vec<Member> = locks.into_iter().map(Into::into).collect();
        if named.is_empty() {
            return Err(Error::InvalidConfig(
                "a multi-lock needs at least one lock".into(),
            ));
        }
        let keys: Vec<OrderKey> = named.iter().map(order_key).collect();
        let order = global_order(&keys).map_err(|twice| {
            Error::InvalidConfig(format!(
                "lock {:?} is named twice in one multi-lock",
                named[twice].name()
            ))
        })?;
        let members: Vec<Member> = order.into_iter().map(|i| named[i].clone()).collect();
        Ok(MultiLock {
            members: members.into(),
        })
    }

    /// The members, in the order they are taken.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// # let transfer = redis_locks::MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?;
    /// for member in transfer.members() {
    ///     println!("takes {} ({})", member.name(), member.key());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// A multi-lock whose members all acquire for the explicit owner `owner` (see
    /// [`Lock::with_owner`](crate::Lock::with_owner)).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// # let transfer = redis_locks::MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?;
    /// // Every member is held by this owner: another process with the id may release them.
    /// let owned = transfer.with_owner("transfer-8d1c")?;
    /// let both = owned.acquire().await?;
    /// # both.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_owner(&self, owner: impl Into<String>) -> Result<Self> {
        let owner = owner.into();
        let members = self
            .members
            .iter()
            .map(|member| member.with_owner(&owner))
            .collect::<Result<Vec<_>>>()?;
        Ok(MultiLock {
            members: members.into(),
        })
    }

    /// Takes every member, waiting without limit.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// # let transfer = redis_locks::MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?;
    /// let both = transfer.acquire().await?; // both accounts, or none
    /// // ... move the money ...
    /// both.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: members taken so far are released (in the background, as dropped
    /// guards are).
    pub async fn acquire(&self) -> Result<MultiGuard> {
        match self.acquire_until(None).await? {
            Some(guard) => Ok(guard),
            None => Err(Error::UnexpectedReply(
                "multi-lock wait without limit ended without the locks".into(),
            )),
        }
    }

    /// Takes every member if all are free now; otherwise takes none.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// # let transfer = redis_locks::MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?;
    /// match transfer.try_acquire().await? {
    ///     Some(both) => both.release().await?,
    ///     None => println!("an account is busy; nothing was taken"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: members taken so far are released.
    pub async fn try_acquire(&self) -> Result<Option<MultiGuard>> {
        self.acquire_until(Some(Instant::now())).await
    }

    /// Takes every member within `wait`; otherwise takes none.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// # let transfer = redis_locks::MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?;
    /// if let Some(both) = transfer.try_acquire_for(Duration::from_secs(2)).await? {
    ///     // ... move the money ...
    ///     both.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: members taken so far are released.
    pub async fn try_acquire_for(&self, wait: Duration) -> Result<Option<MultiGuard>> {
        crate::keys::validate_wait(wait)?;
        self.acquire_until(Some(Instant::now() + wait)).await
    }

    /// Takes every member within `wait`, or fails with [`Error::Timeout`] (naming the
    /// members, comma-separated) having taken none. Zero tries once.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// # let transfer = redis_locks::MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?;
    /// use redis_locks::Error;
    /// match transfer.acquire_timeout(Duration::from_secs(2)).await {
    ///     Ok(both) => both.release().await?,
    ///     Err(Error::Timeout { name, .. }) => println!("{name}: busy; transfer queued"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: members taken so far are released.
    pub async fn acquire_timeout(&self, wait: Duration) -> Result<MultiGuard> {
        let got = self.try_acquire_for(wait).await?;
        let names: Vec<&str> = self.members.iter().map(Member::name).collect();
        crate::keys::or_timeout(got, &names.join(","), wait)
    }

    /// Runs `body` holding every member: acquires (waiting without limit), runs the body
    /// with the guard and releases. If any member is lost meanwhile, the body is stopped
    /// (its future dropped at its next await point) and the result is
    /// [`Error::LockLost`] naming that member; a loss found only at the release is
    /// `LockLost` too.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> Result<(), redis_locks::Error> {
    /// use redis_locks::MultiLock;
    /// let transfer = MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?;
    /// let moved = transfer.run(async |_both| 100).await?;
    /// # let _ = moved; Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the future stops the body and releases every member in the
    /// background.
    pub async fn run<T>(&self, body: impl AsyncFnOnce(&MultiGuard) -> T) -> Result<T> {
        let guard = self.acquire().await?;
        let finished = crate::guard::unless_lost(guard.lost(), body(&guard)).await;
        match finished {
            Some(out) => guard.release().await.map(|()| out),
            None => Err(guard.lost_error()),
        }
    }

    async fn acquire_until(&self, deadline: Option<Instant>) -> Result<Option<MultiGuard>> {
        let mut guards: Vec<MemberGuard> = Vec::with_capacity(self.members.len());
        let mut walk = MultiAcquire::new(self.members.len());
        let mut step = walk.start();
        let mut failure = None;
        loop {
            let lock = match step {
                MultiStep::Take(i) => &self.members[i],
                MultiStep::Held => return Ok(Some(MultiGuard::new(guards))),
                MultiStep::GiveBack(keep) => {
                    // All or none: the core names how many of the members taken are given
                    // back (all of them; fewer only with a planted defect, whose kept
                    // members are left to their lease).
                    let kept = guards.split_off(keep.min(guards.len()));
                    give_back(guards).await;
                    kept.into_iter().for_each(MemberGuard::detach);
                    return match failure {
                        Some(err) => Err(err),
                        None => Ok(None),
                    };
                }
            };
            let got = match deadline {
                None => lock.acquire().await.map(Some),
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    lock.try_acquire_for(left).await
                }
            };
            step = match got {
                Ok(Some(guard)) => {
                    guards.push(guard);
                    walk.on_member(true)
                }
                Ok(None) => walk.on_member(false),
                Err(err) => {
                    failure = Some(err);
                    walk.on_member(false)
                }
            };
        }
    }
}

/// The order members are taken in: by key, then by the server that holds it (its first
/// address as resolved at connect, so that `localhost` and `127.0.0.1` sort alike; the
/// address as written for a cluster or a Sentinel set).
fn order_key(member: &Member) -> (String, String) {
    let inner = &member.client().inner;
    let server = inner
        .resolved
        .first()
        .map_or_else(|| inner.calls.addr.clone(), ToString::to_string);
    (member.key().to_owned(), server)
}

/// Releases the members taken by an attempt that failed; errors only logged (the
/// caller gets the attempt's outcome, and a member that cannot be released expires).
async fn give_back(guards: Vec<MemberGuard>) {
    // Each member's failure is logged by `release_all`; the caller gets the attempt's
    // outcome, not the give-back's.
    let _ = release_all(guards).await;
}

/// Gives back every member, in the order and with the outcome the core's
/// [`MultiRelease`] decides.
async fn release_all(guards: Vec<MemberGuard>) -> Result<()> {
    let mut guards: Vec<Option<MemberGuard>> = guards.into_iter().map(Some).collect();
    let mut walk = MultiRelease::new(guards.len());
    while let Some(i) = walk.next_member() {
        let Some(guard) = guards.get_mut(i).and_then(Option::take) else {
            continue;
        };
        let name = guard.name().to_owned();
        let outcome = guard.release().await;
        if let Err(err) = &outcome {
            tracing::debug!(lock = %name, error = %err, "multi-lock: a member's release failed");
        }
        walk.on_member(outcome);
    }
    walk.told()
}

/// Every member of a [`MultiLock`], held. One lost signal (fires when any member is
/// lost), one release. Dropping it releases every member in the background.
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
/// # let transfer = redis_locks::MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?;
/// let both = transfer.acquire().await?;
/// tokio::select! {
///     _ = both.lost() => eprintln!("an account lock was lost: {:?}", both.lost_reason()),
///     _ = async { /* move the money */ } => {}
/// }
/// both.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard releases every member at once"]
pub struct MultiGuard {
    guards: Vec<MemberGuard>,
    lost: CancellationToken,
    /// Stops the task that watches the members' lost signals.
    _watch: tokio_util::sync::DropGuard,
}

impl std::fmt::Debug for MultiGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiGuard")
            .field(
                "locks",
                &self
                    .guards
                    .iter()
                    .map(MemberGuard::name)
                    .collect::<Vec<_>>(),
            )
            .field("lost", &self.lost.is_cancelled())
            .finish()
    }
}

/// Dropping gives every member back in the background, in the order the core's
/// [`MultiRelease`] names (the last taken first), as [`MultiGuard::release`] does.
impl Drop for MultiGuard {
    fn drop(&mut self) {
        let mut guards: Vec<Option<MemberGuard>> = std::mem::take(&mut self.guards)
            .into_iter()
            .map(Some)
            .collect();
        let mut walk = MultiRelease::<()>::new(guards.len());
        while let Some(i) = walk.next_member() {
            drop(guards.get_mut(i).and_then(Option::take));
        }
    }
}

impl MultiGuard {
    fn new(guards: Vec<MemberGuard>) -> Self {
        let lost = CancellationToken::new();
        let stop = CancellationToken::new();
        let tokens: Vec<CancellationToken> = guards.iter().map(MemberGuard::lost_token).collect();
        let (any_lost, watching) = (lost.clone(), stop.clone());
        let runtime = guards
            .first()
            .map(|guard| guard.client().inner.runtime.clone());
        let watch = async move {
            let any =
                crate::join::first_n(tokens.into_iter().map(|t| t.cancelled_owned()).collect(), 1);
            tokio::select! {
                _ = any => any_lost.cancel(),
                _ = watching.cancelled() => {}
            }
        };
        match tokio::runtime::Handle::try_current().ok().or(runtime) {
            Some(handle) => {
                handle.spawn(watch);
            }
            None => lost.cancel(),
        }
        MultiGuard {
            guards,
            lost,
            _watch: stop.drop_guard(),
        }
    }

    /// The members' guards, in the order they were taken.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// # let transfer = redis_locks::MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?;
    /// use redis_locks::MemberGuard;
    /// let both = transfer.acquire().await?;
    /// for guard in both.guards() {
    ///     if let MemberGuard::Lock(lock) = guard {
    ///         println!("{}: hold count {}", lock.name(), lock.hold_count());
    ///     }
    /// }
    /// # both.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn guards(&self) -> &[MemberGuard] {
        &self.guards
    }

    /// The members' names, in the order they were taken.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// # let transfer = redis_locks::MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?;
    /// let both = transfer.acquire().await?;
    /// assert_eq!(both.names(), ["account:17", "account:42"]);
    /// # both.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn names(&self) -> Vec<&str> {
        self.guards.iter().map(MemberGuard::name).collect()
    }

    /// The lease left on every member, as last confirmed by Redis: the shortest of the
    /// members' (zero once one is lost).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// # let transfer = redis_locks::MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?;
    /// let both = transfer.acquire().await?;
    /// println!("every member is held for at least {:?} more", both.remaining_lease());
    /// # both.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn remaining_lease(&self) -> Duration {
        self.guards
            .iter()
            .map(MemberGuard::remaining_lease)
            .min()
            .unwrap_or_default()
    }

    /// Stops tracking every member without giving it back (see
    /// [`Guard::detach`](crate::Guard::detach)): the holds stay until their leases end.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::MultiLock;
    /// let transfer = MultiLock::new([
    ///     client.lock("account:17")?.with_owner("transfer-8d1c")?,
    ///     client.lock("account:42")?.with_owner("transfer-8d1c")?,
    /// ])?;
    /// let both = transfer.acquire().await?;
    /// both.detach(); // left held for another process with the owner id
    /// # Ok(()) }
    /// ```
    pub fn detach(mut self) {
        std::mem::take(&mut self.guards)
            .into_iter()
            .for_each(MemberGuard::detach);
    }

    /// Resolves when any member is lost. Cancel-safe.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// # let transfer = redis_locks::MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?;
    /// let both = transfer.acquire().await?;
    /// tokio::select! {
    ///     _ = both.lost() => eprintln!("a member was lost; the transfer stopped"),
    ///     _ = async { /* move the money */ } => {}
    /// }
    /// # drop(both);
    /// # Ok(()) }
    /// ```
    pub fn lost(&self) -> WaitForCancellationFuture<'_> {
        self.lost.cancelled()
    }

    /// A token cancelled when any member is lost.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// # let transfer = redis_locks::MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?;
    /// let both = transfer.acquire().await?;
    /// let stop = both.lost_token();
    /// tokio::spawn(async move {
    ///     stop.cancelled().await;
    ///     eprintln!("a member of the transfer was lost");
    /// });
    /// # both.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn lost_token(&self) -> CancellationToken {
        self.lost.child_token()
    }

    /// Whether any member is lost (also checks the clock).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// # let transfer = redis_locks::MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?;
    /// let both = transfer.acquire().await?;
    /// for step in 0..3 {
    ///     if both.is_lost() {
    ///         break; // stop: the accounts are no longer protected
    ///     }
    ///     // ... step `step` of the transfer ...
    /// }
    /// # both.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.lost.is_cancelled() || self.guards.iter().any(MemberGuard::is_lost)
    }

    /// Why the first lost member was lost, if one was.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// # let transfer = redis_locks::MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?;
    /// let both = transfer.acquire().await?;
    /// both.lost().await;
    /// eprintln!("transfer stopped: {:?}", both.lost_reason());
    /// # Ok(()) }
    /// ```
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.guards.iter().find_map(MemberGuard::lost_reason)
    }

    /// `LockLost` naming the first lost member and why (or the first member, if the loss
    /// was signalled and no member knows its reason yet).
    fn lost_error(&self) -> Error {
        let lost = self
            .guards
            .iter()
            .find(|guard| guard.lost_reason().is_some());
        match lost.or(self.guards.first()) {
            Some(guard) => Error::LockLost {
                name: guard.name().to_owned(),
                reason: guard.lost_reason().unwrap_or(LostReason::OwnerFieldGone),
            },
            None => Error::UnexpectedReply("a multi-lock guard without members".into()),
        }
    }

    /// Makes every member last at least `lease` from now (see
    /// [`Guard::extend`](crate::Guard::extend)), in member order. `Ok` only if every
    /// member was extended; otherwise the first error (for example `LockLost`), after
    /// trying every member.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::MultiLock;
    /// let lease = Duration::from_secs(10);
    /// let transfer = MultiLock::new([
    ///     client.lock("account:17")?.with_lease(lease)?,
    ///     client.lock("account:42")?.with_lease(lease)?,
    /// ])?;
    /// let both = transfer.acquire().await?;
    /// both.extend(Duration::from_secs(30)).await?; // the transfer needs longer
    /// both.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: each member's expiry was either lengthened or left as it was.
    pub async fn extend(&self, lease: Duration) -> Result<()> {
        let mut first_error = None;
        for guard in &self.guards {
            if let Err(err) = guard.extend(lease).await {
                first_error.get_or_insert(err);
            }
        }
        match first_error {
            None => Ok(()),
            Some(err) => Err(err),
        }
    }

    /// The fencing tokens of the members taken with fencing, in member order.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::MultiLock;
    /// let transfer = MultiLock::new([
    ///     client.lock("account:17")?.with_fencing(),
    ///     client.lock("account:42")?.with_fencing(),
    /// ])?;
    /// let both = transfer.acquire().await?;
    /// let tokens = both.fencing_tokens(); // in member order
    /// # both.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn fencing_tokens(&self) -> Vec<Option<u64>> {
        self.guards.iter().map(MemberGuard::fencing_token).collect()
    }

    /// Re-enters every member (a nested critical section over all of them): one more
    /// hold of each, for the same owners. Never waits. If one member cannot be
    /// re-entered (it was lost), the re-entries made are given back.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// # let transfer = redis_locks::MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?;
    /// let both = transfer.acquire().await?;
    /// let nested = both.reenter().await?; // a nested section over both accounts
    /// nested.release().await?;
    /// both.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: re-entries made so far are released.
    pub async fn reenter(&self) -> Result<MultiGuard> {
        let mut nested = Vec::with_capacity(self.guards.len());
        for guard in &self.guards {
            match guard.reenter().await {
                Ok(inner) => nested.push(inner),
                Err(err) => {
                    give_back(nested).await;
                    return Err(err);
                }
            }
        }
        Ok(MultiGuard::new(nested))
    }

    /// Releases every member, the last taken first (the core's
    /// `protocol::multi::MultiRelease` decides the order and the outcome). `Ok` only when
    /// every member was given back while held; otherwise the first error (for example
    /// `LockLost` for a member that had been lost), after trying every member.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// # let transfer = redis_locks::MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?;
    /// let both = transfer.acquire().await?;
    /// // ... move the money ...
    /// if let Err(err) = both.release().await {
    ///     eprintln!("the transfer was not protected to the end: {err}");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: every member is still given back exactly once (the one being released
    /// finishes in the background, as every guard's release does; those not yet reached
    /// are released in the background when dropped). Only the outcome is lost.
    pub async fn release(mut self) -> Result<()> {
        release_all(std::mem::take(&mut self.guards)).await
    }
}
