//! The blocking multi-lock and RedLock: the async ones, blocking on a member's runtime.
//!
//! Their members may belong to several blocking clients (a RedLock's always do: one per
//! server), each with its own runtime. A call blocks on the first member's runtime; every
//! member's own calls, renewals and background releases stay on its client's runtime,
//! which the handle and its guards keep alive (`shared`, one per member).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{FairLock, Lock, LockClient, RwLock, Shared};
use crate::error::{Error, LostReason, Result};

/// One member of a blocking [`MultiLock`]; see [`crate::Member`].
///
/// ```no_run
/// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
/// use redis_locks::blocking::{Member, MultiLock};
/// let report = MultiLock::new([
///     Member::Read(client.rw_lock("prices")?),
///     Member::Write(client.rw_lock("report")?),
///     Member::from(client.fair_lock("mailer")?),
/// ])?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Member {
    /// A plain lock.
    Lock(Lock),
    /// A read hold of a read-write lock.
    Read(RwLock),
    /// The write hold of a read-write lock.
    Write(RwLock),
    /// A fair lock.
    Fair(FairLock),
}

impl From<Lock> for Member {
    fn from(lock: Lock) -> Self {
        Member::Lock(lock)
    }
}

impl From<FairLock> for Member {
    fn from(lock: FairLock) -> Self {
        Member::Fair(lock)
    }
}

impl Member {
    /// The lock's name; see [`crate::Member::name`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::blocking::Member;
    /// let member = Member::Read(client.rw_lock("exchange-rates")?);
    /// assert_eq!(member.name(), "exchange-rates");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        match self {
            Member::Lock(lock) => lock.name(),
            Member::Read(rw) | Member::Write(rw) => rw.name(),
            Member::Fair(fair) => fair.name(),
        }
    }

    /// The key that places the member in the global order; see [`crate::Member::key`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::blocking::Member;
    /// let member = Member::from(client.lock("account:17")?);
    /// assert_eq!(member.key(), client.lock("account:17")?.key());
    /// # Ok(()) }
    /// ```
    pub fn key(&self) -> &str {
        match self {
            Member::Lock(lock) => lock.key(),
            Member::Read(rw) | Member::Write(rw) => rw.write_key(),
            Member::Fair(fair) => fair.key(),
        }
    }

    /// The client the member's lock belongs to (another handle of it); see
    /// [`crate::Member::client`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::blocking::Member;
    /// let member = Member::Write(client.rw_lock("ledger")?);
    /// println!("taken through client {}", member.client().id());
    /// # Ok(()) }
    /// ```
    pub fn client(&self) -> LockClient {
        match self {
            Member::Lock(lock) => lock.client(),
            Member::Read(rw) | Member::Write(rw) => rw.client(),
            Member::Fair(fair) => fair.client(),
        }
    }

    /// The blocking member of the async `member`, whose client owns `shared`.
    fn join(member: crate::Member, shared: &Arc<Shared>) -> Self {
        match member {
            crate::Member::Lock(inner) => Member::Lock(Lock {
                inner,
                shared: shared.clone(),
            }),
            crate::Member::Read(rw) => Member::Read(RwLock::new(rw, shared)),
            crate::Member::Write(rw) => Member::Write(RwLock::new(rw, shared)),
            crate::Member::Fair(fair) => Member::Fair(FairLock::new(fair, shared)),
        }
    }

    /// The async member and the runtime its client owns.
    fn split(self) -> (crate::Member, Arc<Shared>) {
        match self {
            Member::Lock(lock) => (crate::Member::Lock(lock.inner), lock.shared),
            Member::Read(rw) => (crate::Member::Read(rw.inner), rw.shared),
            Member::Write(rw) => (crate::Member::Write(rw.inner), rw.shared),
            Member::Fair(fair) => (crate::Member::Fair(fair.inner), fair.shared),
        }
    }
}

/// The runtime every call of a multi-member handle blocks on: the first member's.
fn first(shared: &[Arc<Shared>]) -> Result<&Shared> {
    shared
        .first()
        .map(Arc::as_ref)
        .ok_or_else(|| Error::InvalidConfig("a handle without members".into()))
}

/// What a blocking handle over several clients does the same way for its guard `$guard`
/// (the async one's `$async`): wrap a guard, acquire in the four ways, and the scoped run.
macro_rules! acquiring {
    ($guard:ident, $async:literal) => {
        fn guard(&self, guard: crate::$guard) -> $guard {
            $guard {
                inner: Some(guard),
                shared: self.shared.clone(),
            }
        }

        #[doc = concat!("Blocks until held; see [`crate::", $async, "::acquire`].")]
        /// ```no_run
        /// # fn demo(transfer: redis_locks::blocking::MultiLock, job: redis_locks::blocking::RedLock) -> redis_locks::Result<()> {
        /// // The same for a multi-lock (every member) and a RedLock (a majority of servers).
        /// let both = transfer.acquire()?;
        /// both.release()?;
        /// let held = job.acquire()?;
        /// held.release()?;
        /// # Ok(()) }
        /// ```
        pub fn acquire(&self) -> Result<$guard> {
            let guard = first(&self.shared)?.block_on(self.inner.acquire())??;
            Ok(self.guard(guard))
        }

        #[doc = concat!("Tries once; see [`crate::", $async, "::try_acquire`].")]
        /// ```no_run
        /// # fn demo(transfer: redis_locks::blocking::MultiLock, job: redis_locks::blocking::RedLock) -> redis_locks::Result<()> {
        /// if let Some(both) = transfer.try_acquire()? {
        ///     both.release()?;
        /// }
        /// if let Some(held) = job.try_acquire()? {
        ///     held.release()?;
        /// }
        /// # Ok(()) }
        /// ```
        pub fn try_acquire(&self) -> Result<Option<$guard>> {
            let guard = first(&self.shared)?.block_on(self.inner.try_acquire())??;
            Ok(guard.map(|guard| self.guard(guard)))
        }

        #[doc = concat!("Waits at most `wait` (zero: tries once); see [`crate::", $async, "::try_acquire_for`].")]
        /// ```no_run
        /// # use std::time::Duration;
        /// # fn demo(transfer: redis_locks::blocking::MultiLock, job: redis_locks::blocking::RedLock) -> redis_locks::Result<()> {
        /// let wait = Duration::from_secs(2);
        /// if let Some(both) = transfer.try_acquire_for(wait)? {
        ///     both.release()?;
        /// }
        /// if let Some(held) = job.try_acquire_for(wait)? {
        ///     held.release()?;
        /// }
        /// # Ok(()) }
        /// ```
        pub fn try_acquire_for(&self, wait: Duration) -> Result<Option<$guard>> {
            let guard = first(&self.shared)?.block_on(self.inner.try_acquire_for(wait))??;
            Ok(guard.map(|guard| self.guard(guard)))
        }

        #[doc = concat!("See [`crate::", $async, "::acquire_timeout`].")]
        /// ```no_run
        /// # use std::time::Duration;
        /// # fn demo(transfer: redis_locks::blocking::MultiLock, job: redis_locks::blocking::RedLock) -> redis_locks::Result<()> {
        /// use redis_locks::Error;
        /// match transfer.acquire_timeout(Duration::from_secs(2)) {
        ///     Ok(both) => both.release()?,
        ///     Err(Error::Timeout { name, .. }) => println!("{name}: busy"),
        ///     Err(other) => return Err(other),
        /// }
        /// let held = job.acquire_timeout(Duration::from_secs(5))?;
        /// # held.release()?;
        /// # Ok(()) }
        /// ```
        pub fn acquire_timeout(&self, wait: Duration) -> Result<$guard> {
            let guard = first(&self.shared)?.block_on(self.inner.acquire_timeout(wait))??;
            Ok(self.guard(guard))
        }

        /// Runs `body` holding it, then releases; the outcome of the release (`LockLost`
        /// if it was lost meanwhile) is the result's error.
        ///
        /// ```no_run
        /// # fn demo(transfer: redis_locks::blocking::MultiLock, job: redis_locks::blocking::RedLock) -> redis_locks::Result<()> {
        /// let moved = transfer.run(|_both| 100)?;
        /// let rows = job.run(|held| if held.is_lost() { 0 } else { 1_000 })?;
        /// # Ok(()) }
        /// ```
        pub fn run<T>(&self, body: impl FnOnce(&$guard) -> T) -> Result<T> {
            let guard = self.acquire()?;
            let out = body(&guard);
            guard.release().map(|()| out)
        }
    };
}

/// What the blocking guard `$guard` over several clients' holds does the same way:
/// re-entry, extension, detach and release, each its async namesake's.
macro_rules! guarding {
    ($guard:ident) => {
        fn get(&self) -> &crate::$guard {
            // Taken only by `release` and `detach`, which consume the guard.
            self.inner.as_ref().unwrap_or_else(|| unreachable!())
        }

        /// A nested hold of every member or server; see the async guard's `reenter`.
        ///
        /// ```no_run
        /// # fn demo(both: redis_locks::blocking::MultiGuard, held: redis_locks::blocking::RedGuard) -> redis_locks::Result<()> {
        /// // The same for a multi-lock's guard and a RedLock's.
        /// let nested = both.reenter()?;
        /// nested.release()?;
        /// let nested = held.reenter()?;
        /// nested.release()?;
        /// # Ok(()) }
        /// ```
        pub fn reenter(&self) -> Result<$guard> {
            let nested = first(&self.shared)?.block_on(self.get().reenter())??;
            Ok($guard {
                inner: Some(nested),
                shared: self.shared.clone(),
            })
        }

        /// Makes it last at least `lease` from now; see the async guard's `extend`.
        ///
        /// ```no_run
        /// # use std::time::Duration;
        /// # fn demo(both: redis_locks::blocking::MultiGuard, held: redis_locks::blocking::RedGuard) -> redis_locks::Result<()> {
        /// both.extend(Duration::from_secs(30))?; // every member
        /// held.extend(Duration::from_secs(30))?; // on a majority of servers
        /// # Ok(()) }
        /// ```
        pub fn extend(&self, lease: Duration) -> Result<()> {
            first(&self.shared)?.block_on(self.get().extend(lease))?
        }

        /// How long it is known to last; see the async guard's `remaining_lease`.
        ///
        /// ```no_run
        /// # fn demo(both: redis_locks::blocking::MultiGuard, held: redis_locks::blocking::RedGuard) -> redis_locks::Result<()> {
        /// println!("every member is held for {:?} more", both.remaining_lease());
        /// println!("a majority is held for {:?} more", held.remaining_lease());
        /// # Ok(()) }
        /// ```
        pub fn remaining_lease(&self) -> Duration {
            self.get().remaining_lease()
        }

        /// Leaves the holds until their leases end; see the async guard's `detach`.
        ///
        /// ```no_run
        /// # fn demo(both: redis_locks::blocking::MultiGuard, held: redis_locks::blocking::RedGuard) -> redis_locks::Result<()> {
        /// both.detach(); // the holds stay until their leases end
        /// held.detach();
        /// # Ok(()) }
        /// ```
        pub fn detach(mut self) {
            if let Some(guard) = self.inner.take() {
                guard.detach();
            }
        }

        /// Whether it is lost; see the async guard's `is_lost`.
        ///
        /// ```no_run
        /// # fn demo(both: redis_locks::blocking::MultiGuard, held: redis_locks::blocking::RedGuard) -> redis_locks::Result<()> {
        /// if both.is_lost() || held.is_lost() {
        ///     eprintln!("stop: the work is no longer protected");
        /// }
        /// # Ok(()) }
        /// ```
        pub fn is_lost(&self) -> bool {
            self.get().is_lost()
        }

        /// Why it was lost, if it was.
        ///
        /// ```no_run
        /// # fn demo(both: redis_locks::blocking::MultiGuard, held: redis_locks::blocking::RedGuard) -> redis_locks::Result<()> {
        /// if let Some(reason) = both.lost_reason() {
        ///     eprintln!("a member was lost: {reason}");
        /// }
        /// if let Some(reason) = held.lost_reason() {
        ///     eprintln!("the RedLock was lost: {reason}");
        /// }
        /// # Ok(()) }
        /// ```
        pub fn lost_reason(&self) -> Option<LostReason> {
            self.get().lost_reason()
        }

        /// A token cancelled when it is lost.
        ///
        /// ```no_run
        /// # fn demo(both: redis_locks::blocking::MultiGuard, held: redis_locks::blocking::RedGuard) -> redis_locks::Result<()> {
        /// let stop = both.lost_token();
        /// std::thread::spawn(move || {
        ///     while !stop.is_cancelled() {
        ///         // ... one step of the transfer ...
        ///     }
        /// });
        /// let _ = held.lost_token(); // the same for a RedLock's guard
        /// # Ok(()) }
        /// ```
        pub fn lost_token(&self) -> crate::CancellationToken {
            self.get().lost_token()
        }

        /// Gives every hold back; see the async guard's `release`.
        ///
        /// ```no_run
        /// # fn demo(both: redis_locks::blocking::MultiGuard, held: redis_locks::blocking::RedGuard) -> redis_locks::Result<()> {
        /// both.release()?; // every member
        /// held.release()?; // every server's hold
        /// # Ok(()) }
        /// ```
        pub fn release(mut self) -> Result<()> {
            // Refuse before taking the guard: a refused call leaves it to its drop.
            let shared = self.shared.clone();
            let runtime = first(&shared)?.runtime()?;
            match self.inner.take() {
                Some(guard) => runtime.block_on(guard.release()),
                None => Ok(()),
            }
        }
    };
}

/// A blocking multi-lock; see [`crate::MultiLock`]. Cheap to clone.
///
/// ```no_run
/// # fn demo(client: redis_locks::blocking::LockClient) -> Result<(), redis_locks::Error> {
/// use redis_locks::blocking::{Member, MultiLock};
/// let transfer = MultiLock::new([
///     Member::from(client.lock("account:17")?),
///     Member::Write(client.rw_lock("ledger")?),
/// ])?;
/// let both = transfer.acquire()?; // both, or none
/// both.release()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct MultiLock {
    inner: crate::MultiLock,
    shared: Arc<[Arc<Shared>]>,
}

impl std::fmt::Debug for MultiLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl MultiLock {
    /// A multi-lock over `members`; see [`crate::MultiLock::new`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::blocking::MultiLock;
    /// let transfer = MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?;
    /// let both = transfer.acquire()?;
    /// both.release()?;
    /// # Ok(()) }
    /// ```
    pub fn new(members: impl IntoIterator<Item = impl Into<Member>>) -> Result<Self> {
        let (members, shared): (Vec<crate::Member>, Vec<Arc<Shared>>) = members
            .into_iter()
            .map(|member| member.into().split())
            .unzip();
        Ok(MultiLock {
            inner: crate::MultiLock::new(members)?,
            shared: shared.into(),
        })
    }

    /// Every member for the explicit owner `owner`; see [`crate::MultiLock::with_owner`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::blocking::MultiLock;
    /// let transfer = MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?
    ///     .with_owner("transfer-8d1c")?;
    /// # Ok(()) }
    /// ```
    pub fn with_owner(&self, owner: impl Into<String>) -> Result<Self> {
        Ok(MultiLock {
            inner: self.inner.with_owner(owner)?,
            shared: self.shared.clone(),
        })
    }

    /// The members, in the order they are taken (new handles of their locks); see
    /// [`crate::MultiLock::members`].
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// # let transfer = redis_locks::blocking::MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?;
    /// for member in transfer.members() {
    ///     println!("takes {} ({})", member.name(), member.key());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn members(&self) -> Vec<Member> {
        // The async multi-lock keeps its members in the global order, `shared` is in the
        // order given: pair each member with the runtime of its own client (always one of
        // them, since a blocking member is made only from its client's `shared`).
        self.inner
            .members()
            .iter()
            .filter_map(|member| {
                let shared = self
                    .shared
                    .iter()
                    .find(|shared| Arc::ptr_eq(&shared.client().inner, &member.client().inner))?;
                Some(Member::join(member.clone(), shared))
            })
            .collect()
    }

    acquiring!(MultiGuard, "MultiLock");
}

/// Every member of a blocking [`MultiLock`], held; see [`crate::MultiGuard`]. Dropping it
/// releases every member in the background (each on its client's runtime), never
/// blocking.
///
/// ```no_run
/// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
/// # use redis_locks::blocking::MultiLock;
/// let both = MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?.acquire()?;
/// // ... move the money, checking `both.is_lost()` at safe points ...
/// both.release()?;
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard releases every member at once"]
pub struct MultiGuard {
    /// `None` once released (only by `release`, which consumes the guard).
    inner: Option<crate::MultiGuard>,
    shared: Arc<[Arc<Shared>]>,
}

impl std::fmt::Debug for MultiGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.inner {
            Some(guard) => guard.fmt(f),
            None => write!(f, "MultiGuard(released)"),
        }
    }
}

impl MultiGuard {
    guarding!(MultiGuard);

    /// The members' names, in the order they were taken.
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// # use redis_locks::blocking::MultiLock;
    /// let both = MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?.acquire()?;
    /// assert_eq!(both.names(), ["account:17", "account:42"]);
    /// # Ok(()) }
    /// ```
    pub fn names(&self) -> Vec<&str> {
        self.get().names()
    }

    /// The members' fencing tokens, in member order.
    ///
    /// ```no_run
    /// # fn demo(client: redis_locks::blocking::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::blocking::MultiLock;
    /// let ledgers = MultiLock::new([
    ///     client.lock("ledger:eu")?.with_fencing(),
    ///     client.lock("ledger:us")?.with_fencing(),
    /// ])?;
    /// let both = ledgers.acquire()?;
    /// println!("tokens: {:?}", both.fencing_tokens());
    /// # Ok(()) }
    /// ```
    pub fn fencing_tokens(&self) -> Vec<Option<u64>> {
        self.get().fencing_tokens()
    }
}

/// A blocking RedLock; see [`crate::RedLock`]. Cheap to clone.
///
/// ```no_run
/// # fn demo(servers: Vec<redis_locks::blocking::LockClient>) -> Result<(), redis_locks::Error> {
/// use redis_locks::blocking::RedLock;
/// let locks = servers.iter().map(|c| c.lock("nightly-job")).collect::<Result<Vec<_>, _>>()?;
/// let job = RedLock::new(locks)?;
/// let held = job.acquire()?; // on a majority of the servers
/// held.release()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedLock {
    inner: crate::RedLock,
    shared: Arc<[Arc<Shared>]>,
}

impl std::fmt::Debug for RedLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl RedLock {
    /// A RedLock over `locks`, one per independent server; see [`crate::RedLock::new`].
    ///
    /// ```no_run
    /// # fn demo(servers: Vec<redis_locks::blocking::LockClient>) -> redis_locks::Result<()> {
    /// use redis_locks::blocking::RedLock;
    /// let locks = servers.iter().map(|client| client.lock("nightly-job"));
    /// let job = RedLock::new(locks.collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// # Ok(()) }
    /// ```
    pub fn new(locks: impl IntoIterator<Item = Lock>) -> Result<Self> {
        let (locks, shared): (Vec<crate::Lock>, Vec<Arc<Shared>>) = locks
            .into_iter()
            .map(|lock| (lock.inner, lock.shared))
            .unzip();
        Ok(RedLock {
            inner: crate::RedLock::new(locks)?,
            shared: shared.into(),
        })
    }

    fn with(&self, inner: crate::RedLock) -> Self {
        RedLock {
            inner,
            shared: self.shared.clone(),
        }
    }

    /// See [`crate::RedLock::with_servers`].
    ///
    /// ```no_run
    /// # fn demo(servers: Vec<redis_locks::blocking::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::blocking::RedLock::new(servers.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let job = job.with_servers(5)?; // a majority of all five, connected or not
    /// assert_eq!(job.quorum(), 3);
    /// # Ok(()) }
    /// ```
    pub fn with_servers(&self, total: usize) -> Result<Self> {
        Ok(self.with(self.inner.with_servers(total)?))
    }

    /// See [`crate::RedLock::with_retry_delay`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(servers: Vec<redis_locks::blocking::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::blocking::RedLock::new(servers.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let job = job.with_retry_delay(Duration::from_millis(50))?; // few contenders
    /// let held = job.acquire()?;
    /// # held.release()?;
    /// # Ok(()) }
    /// ```
    pub fn with_retry_delay(&self, delay: Duration) -> Result<Self> {
        Ok(self.with(self.inner.with_retry_delay(delay)?))
    }

    /// See [`crate::RedLock::with_lease`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(servers: Vec<redis_locks::blocking::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::blocking::RedLock::new(servers.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let held = job.with_lease(Duration::from_secs(30))?.acquire()?;
    /// println!("valid until {:?}", held.valid_until());
    /// # Ok(()) }
    /// ```
    pub fn with_lease(&self, lease: Duration) -> Result<Self> {
        Ok(self.with(self.inner.with_lease(lease)?))
    }

    /// See [`crate::RedLock::with_owner`].
    ///
    /// ```no_run
    /// # fn demo(servers: Vec<redis_locks::blocking::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::blocking::RedLock::new(servers.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let held = job.with_owner("scheduler-eu-1")?.acquire()?;
    /// held.detach(); // another process with this owner id takes over
    /// # Ok(()) }
    /// ```
    pub fn with_owner(&self, owner: impl Into<String>) -> Result<Self> {
        Ok(self.with(self.inner.with_owner(owner)?))
    }

    /// How many servers the majority is counted over.
    ///
    /// ```no_run
    /// # fn demo(servers: Vec<redis_locks::blocking::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::blocking::RedLock::new(servers.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let job = job.with_servers(5)?;
    /// println!("needs {} of {}", job.quorum(), job.servers());
    /// # Ok(()) }
    /// ```
    pub fn servers(&self) -> usize {
        self.inner.servers()
    }

    /// How many servers must hold the lock.
    ///
    /// ```no_run
    /// # fn demo(servers: Vec<redis_locks::blocking::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::blocking::RedLock::new(servers.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let held = job.acquire()?;
    /// assert!(held.held_on() >= job.quorum());
    /// # Ok(()) }
    /// ```
    pub fn quorum(&self) -> usize {
        self.inner.quorum()
    }

    /// The members, one per server in the order given (new handles of the locks); see
    /// [`crate::RedLock::locks`].
    ///
    /// ```no_run
    /// # fn demo(servers: Vec<redis_locks::blocking::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::blocking::RedLock::new(servers.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// for lock in job.locks() {
    ///     println!("{} on client {}", lock.key(), lock.client().id());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn locks(&self) -> Vec<Lock> {
        // The async RedLock keeps its locks in the order given, as `shared` is.
        self.inner
            .locks()
            .iter()
            .zip(self.shared.iter())
            .map(|(lock, shared)| Lock {
                inner: lock.clone(),
                shared: shared.clone(),
            })
            .collect()
    }

    /// Whether someone holds it on a majority; see [`crate::RedLock::is_locked`].
    ///
    /// ```no_run
    /// # fn demo(servers: Vec<redis_locks::blocking::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::blocking::RedLock::new(servers.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// if job.is_locked()? {
    ///     println!("the job runs somewhere");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_locked(&self) -> Result<bool> {
        first(&self.shared)?.block_on(self.inner.is_locked())?
    }

    /// The lease left on a majority; see [`crate::RedLock::remaining_ttl`].
    ///
    /// ```no_run
    /// # fn demo(servers: Vec<redis_locks::blocking::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::blocking::RedLock::new(servers.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// if let Some(left) = job.remaining_ttl()? {
    ///     println!("held on a majority for {left:?} more");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn remaining_ttl(&self) -> Result<Option<Duration>> {
        first(&self.shared)?.block_on(self.inner.remaining_ttl())?
    }

    acquiring!(RedGuard, "RedLock");
}

/// A blocking RedLock hold; see [`crate::RedGuard`]. Dropping it releases every server's
/// hold in the background, never blocking.
///
/// ```no_run
/// # fn demo(servers: Vec<redis_locks::blocking::LockClient>) -> redis_locks::Result<()> {
/// # let job = redis_locks::blocking::RedLock::new(servers.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
/// let held = job.acquire()?;
/// // ... the nightly job, checking `held.is_lost()` at safe points ...
/// held.release()?;
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard releases the lock at once"]
pub struct RedGuard {
    inner: Option<crate::RedGuard>,
    shared: Arc<[Arc<Shared>]>,
}

impl std::fmt::Debug for RedGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.inner {
            Some(guard) => guard.fmt(f),
            None => write!(f, "RedGuard(released)"),
        }
    }
}

impl RedGuard {
    guarding!(RedGuard);

    /// The lock's name.
    ///
    /// ```no_run
    /// # fn demo(servers: Vec<redis_locks::blocking::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::blocking::RedLock::new(servers.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let held = job.acquire()?;
    /// assert_eq!(held.name(), "nightly-job");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.get().name()
    }

    /// On how many servers the lock is held; see [`crate::RedGuard::held_on`].
    ///
    /// ```no_run
    /// # fn demo(servers: Vec<redis_locks::blocking::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::blocking::RedLock::new(servers.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let held = job.acquire()?;
    /// println!("held on {} of {} servers", held.held_on(), job.servers());
    /// # Ok(()) }
    /// ```
    pub fn held_on(&self) -> usize {
        self.get().held_on()
    }

    /// The validity the acquire computed; see [`crate::RedGuard::valid_until`].
    ///
    /// ```no_run
    /// # fn demo(servers: Vec<redis_locks::blocking::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::blocking::RedLock::new(servers.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let held = job.acquire()?;
    /// if std::time::Instant::now() >= held.valid_until() {
    ///     eprintln!("past the computed validity: stop relying on the lock");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn valid_until(&self) -> Instant {
        self.get().valid_until()
    }

    /// Holds lost so far.
    ///
    /// ```no_run
    /// # fn demo(servers: Vec<redis_locks::blocking::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::blocking::RedLock::new(servers.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let held = job.acquire()?;
    /// println!("{} server(s) lost their hold", held.lost_holds());
    /// # Ok(()) }
    /// ```
    pub fn lost_holds(&self) -> usize {
        self.get().lost_holds()
    }
}
