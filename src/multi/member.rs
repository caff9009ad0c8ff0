//! What a multi-lock can be made of: a [`Member`] (a lock of any exclusive-or-shared kind
//! and the side to take) and, once taken, its [`MemberGuard`].
//!
//! One enum rather than a trait object, so that a caller can match a member's guard back
//! to its own kind (a [`LockGuard`]'s hold count, a [`RwGuard`]'s side). Every method that
//! all guards share is forwarded, so the multi-lock itself never matches on a kind.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::client::LockClient;
use crate::error::{LostReason, Result};
use crate::fair::{FairGuard, FairLock};
use crate::lock::{Lock, LockGuard};
use crate::rwlock::{RwGuard, RwLock};

/// One member of a [`MultiLock`](crate::MultiLock): a lock and the side of it to take.
/// Redisson's `RedissonMultiLock` takes any `RLock`, including read and write locks; this
/// is the same set: plain, read, write and fair. A [`Lock`] or a [`FairLock`] converts
/// with `.into()` (so `MultiLock::new([lock_a, lock_b])` needs no `Member` at all).
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> Result<(), redis_locks::Error> {
/// use redis_locks::{Member, MultiLock};
/// let report = MultiLock::new([
///     Member::Read(client.rw_lock("prices")?),   // shared with other readers
///     Member::Write(client.rw_lock("report")?),  // alone
///     Member::from(client.lock("mailer")?),
/// ])?;
/// let all = report.acquire().await?;             // all three, or none
/// all.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Member {
    /// A plain (reentrant) lock.
    Lock(Lock),
    /// A read hold of a read-write lock.
    Read(RwLock),
    /// The write hold of a read-write lock.
    Write(RwLock),
    /// A fair lock (it waits its turn in the lock's queue).
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
    /// The lock's name.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::Member;
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

    /// The key that places the member in the global order. A read and a write of one
    /// read-write lock share it, so naming both is refused like naming one lock twice
    /// (the write would wait for the read: there is no upgrade).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::Member;
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

    /// The client the member's lock belongs to.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::Member;
    /// let member = Member::Write(client.rw_lock("ledger")?);
    /// println!("taken through client {}", member.client().id());
    /// # Ok(()) }
    /// ```
    pub fn client(&self) -> &LockClient {
        match self {
            Member::Lock(lock) => lock.client(),
            Member::Read(rw) | Member::Write(rw) => rw.client(),
            Member::Fair(fair) => fair.client(),
        }
    }

    /// The same member, acquiring for the explicit owner `owner`.
    pub(crate) fn with_owner(&self, owner: &str) -> Result<Self> {
        Ok(match self {
            Member::Lock(lock) => Member::Lock(lock.with_owner(owner)?),
            Member::Read(rw) => Member::Read(rw.with_owner(owner)?),
            Member::Write(rw) => Member::Write(rw.with_owner(owner)?),
            Member::Fair(fair) => Member::Fair(fair.with_owner(owner)?),
        })
    }

    /// Takes the member, waiting without limit.
    pub(crate) async fn acquire(&self) -> Result<MemberGuard> {
        Ok(match self {
            Member::Lock(lock) => MemberGuard::Lock(lock.acquire().await?),
            Member::Read(rw) => MemberGuard::Rw(rw.read().await?),
            Member::Write(rw) => MemberGuard::Rw(rw.write().await?),
            Member::Fair(fair) => MemberGuard::Fair(fair.acquire().await?),
        })
    }

    /// Takes the member within `wait` (zero: one try).
    pub(crate) async fn try_acquire_for(&self, wait: Duration) -> Result<Option<MemberGuard>> {
        Ok(match self {
            Member::Lock(lock) => lock.try_acquire_for(wait).await?.map(MemberGuard::Lock),
            Member::Read(rw) => rw.try_read_for(wait).await?.map(MemberGuard::Rw),
            Member::Write(rw) => rw.try_write_for(wait).await?.map(MemberGuard::Rw),
            Member::Fair(fair) => fair.try_acquire_for(wait).await?.map(MemberGuard::Fair),
        })
    }
}

/// One member of a [`MultiGuard`](crate::MultiGuard), held: the guard of its kind. Match
/// it for what only that kind has; the methods every guard shares are here too.
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
/// use redis_locks::{Member, MemberGuard, MultiLock};
/// let report = MultiLock::new([Member::Read(client.rw_lock("prices")?), client.lock("mailer")?.into()])?;
/// let all = report.acquire().await?;
/// for guard in all.guards() {
///     match guard {
///         MemberGuard::Rw(rw) => println!("{}: write? {}", rw.name(), rw.is_write()),
///         MemberGuard::Lock(lock) => println!("{}: count {}", lock.name(), lock.hold_count()),
///         other => println!("{}", other.name()),
///     }
/// }
/// # all.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[non_exhaustive]
#[must_use = "dropping a guard gives the hold back at once"]
pub enum MemberGuard {
    /// A plain lock's guard.
    Lock(LockGuard),
    /// A read or write hold's guard ([`RwGuard::kind`] says which).
    Rw(RwGuard),
    /// A fair lock's guard.
    Fair(FairGuard),
}

/// Forwards a call that every kind's guard has to the guard inside.
macro_rules! each {
    ($guard:expr, $held:ident => $call:expr) => {
        match $guard {
            MemberGuard::Lock($held) => $call,
            MemberGuard::Rw($held) => $call,
            MemberGuard::Fair($held) => $call,
        }
    };
}

impl MemberGuard {
    /// The lock's name.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// # use redis_locks::MultiLock;
    /// let both = MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?.acquire().await?;
    /// let names: Vec<&str> = both.guards().iter().map(|guard| guard.name()).collect();
    /// assert_eq!(names, ["account:17", "account:42"]); // the order they were taken in
    /// # both.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        each!(self, held => held.name())
    }

    /// The owner id the hold belongs to (treat it as a secret: it can release the hold).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::MultiLock;
    /// let transfer = MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?;
    /// let both = transfer.with_owner("transfer-8d1c")?.acquire().await?;
    /// assert!(both.guards().iter().all(|guard| guard.owner() == "transfer-8d1c"));
    /// # both.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> &str {
        each!(self, held => held.owner())
    }

    /// The hold's fencing token, when the member's handle was made `with_fencing`.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::MultiLock;
    /// let ledger = MultiLock::new([client.lock("ledger:eu")?.with_fencing(), client.lock("ledger:us")?])?;
    /// let both = ledger.acquire().await?;
    /// for guard in both.guards() {
    ///     println!("{}: token {:?}", guard.name(), guard.fencing_token()); // `None` unless fenced
    /// }
    /// # both.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn fencing_token(&self) -> Option<u64> {
        each!(self, held => held.fencing_token())
    }

    /// Whether the hold has been lost (also checks the clock).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// # use redis_locks::MultiLock;
    /// let both = MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?.acquire().await?;
    /// if let Some(lost) = both.guards().iter().find(|guard| guard.is_lost()) {
    ///     eprintln!("{} was lost", lost.name());
    /// }
    /// # both.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        each!(self, held => held.is_lost())
    }

    /// Why the hold was lost, if it was.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// # use redis_locks::MultiLock;
    /// let both = MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?.acquire().await?;
    /// for guard in both.guards() {
    ///     if let Some(reason) = guard.lost_reason() {
    ///         eprintln!("{}: {reason}", guard.name());
    ///     }
    /// }
    /// # both.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn lost_reason(&self) -> Option<LostReason> {
        each!(self, held => held.lost_reason())
    }

    /// A token cancelled when the hold is lost.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// # use redis_locks::MultiLock;
    /// let both = MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?.acquire().await?;
    /// // Watch one member alone (the multi-guard's own signal fires for any member).
    /// let first = both.guards()[0].lost_token();
    /// tokio::spawn(async move { first.cancelled().await; eprintln!("account:17 was lost") });
    /// # both.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn lost_token(&self) -> CancellationToken {
        each!(self, held => held.lost_token())
    }

    /// The lease time left as last confirmed by Redis.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// # use redis_locks::MultiLock;
    /// let both = MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?.acquire().await?;
    /// for guard in both.guards() {
    ///     println!("{}: {:?} left", guard.name(), guard.remaining_lease());
    /// }
    /// # both.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn remaining_lease(&self) -> Duration {
        each!(self, held => held.remaining_lease())
    }

    /// Makes the hold last at least `lease` from now (see [`Guard::extend`](crate::Guard::extend)).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// use redis_locks::MultiLock;
    /// let transfer = MultiLock::new([
    ///     client.lock("account:17")?.with_lease(Duration::from_secs(10))?,
    ///     client.lock("account:42")?,
    /// ])?;
    /// let both = transfer.acquire().await?;
    /// both.guards()[0].extend(Duration::from_secs(30)).await?; // only the fixed-lease member
    /// # both.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: a cancelled extension either lengthened the expiry or did nothing.
    pub async fn extend(&self, lease: Duration) -> Result<()> {
        each!(self, held => held.extend(lease).await)
    }

    /// Gives the hold back (see [`Guard::release`](crate::Guard::release)).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// # use redis_locks::MultiLock;
    /// let both = MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?.acquire().await?;
    /// // An owned member guard: a nested hold of one member.
    /// let nested = both.guards()[0].reenter().await?;
    /// // ... work on account:17 alone ...
    /// nested.release().await?;
    /// # both.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: the hold is given back exactly once, in the background if cancelled.
    pub async fn release(self) -> Result<()> {
        each!(self, held => held.release().await)
    }

    /// Stops tracking the hold without giving it back (see [`Guard::detach`](crate::Guard::detach)).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// # use redis_locks::MultiLock;
    /// let both = MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?.acquire().await?;
    /// let nested = both.guards()[0].reenter().await?;
    /// nested.detach(); // this count stays held until the lease ends
    /// # both.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn detach(self) {
        each!(self, held => held.detach())
    }

    /// One more hold of the same kind for the same owner: a nested critical section.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// # use redis_locks::MultiLock;
    /// let both = MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?.acquire().await?;
    /// let nested = both.guards()[0].reenter().await?; // one more hold of account:17 alone
    /// nested.release().await?;
    /// # both.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: a hold won by an attempt whose caller has gone is given back.
    pub async fn reenter(&self) -> Result<MemberGuard> {
        Ok(match self {
            MemberGuard::Lock(held) => MemberGuard::Lock(held.reenter().await?),
            MemberGuard::Rw(held) => MemberGuard::Rw(held.reenter().await?),
            MemberGuard::Fair(held) => MemberGuard::Fair(held.reenter().await?),
        })
    }

    /// The client the hold was taken through (for the runtime its watch task runs on).
    pub(crate) fn client(&self) -> &LockClient {
        each!(self, held => &held.core.client)
    }
}
