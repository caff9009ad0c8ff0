//! RedLock: one lock over N independent Redis servers, held while a majority holds it.
//!
//! The algorithm as described on redis.io: try the lock on every server at once, with a
//! short per-server timeout; it is acquired when a majority (N/2 + 1) granted it and the
//! time spent leaves some validity: `lease − elapsed − drift`, with
//! `drift = 0.01 × lease + 2 ms`. Otherwise every server's hold is given back and the
//! attempt is retried after
//! a random delay. Here each server's hold is an ordinary [`Lock`] hold of that server's
//! client (hold ids, exactly-once, reconciliation of lost replies, watchdog renewal), so
//! the quorum is renewed by the servers' watchdogs, and the guard is lost when fewer than
//! a majority of its holds remain.
//!
//! What it does not give: see `docs/redlock.md` (clocks, process pauses,
//! fencing).

use crate::protocol::redlock::{self, Won};
use crate::protocol::wait::WaitPolicy;
use crate::protocol::{Failure, Millis};
use crate::pubsub::Listener;
use crate::waiting::{Attempts, Outcome};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::lock::Lock;
use crate::lock::LockGuard;

mod guard;

pub use guard::RedGuard;
use guard::give_back;

/// The default longest random pause between two attempts.
///
/// ```no_run
/// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
/// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
/// // Many contenders: spread their retries over twice the default.
/// let job = job.with_retry_delay(redis_locks::REDLOCK_RETRY_DELAY * 2)?;
/// # Ok(()) }
/// ```
pub const REDLOCK_RETRY_DELAY: Duration = Duration::from_millis(200);

/// One lock over N independent Redis servers (a [`Lock`] of the same name on each
/// server's own [`LockClient`](crate::LockClient)), acquired on a majority. Cheap to
/// clone.
///
/// ```no_run
/// # async fn demo(clients: Vec<redis_locks::LockClient>) -> Result<(), redis_locks::Error> {
/// use redis_locks::RedLock;
/// // Five clients, each connected to its own independent Redis server.
/// let lock = RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<Result<Vec<_>, _>>()?)?;
/// let guard = lock.acquire().await?;     // held on at least 3 of 5
/// // ... `guard.lost()` fires when fewer than 3 holds remain ...
/// guard.release().await?;               // given back on every server
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedLock {
    members: Arc<[Lock]>,
    /// How many servers the majority is counted over (at least the members).
    servers: usize,
    retry_delay: Duration,
}

impl std::fmt::Debug for RedLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedLock")
            .field("name", &self.members.first().map(Lock::name))
            .field("servers", &self.servers)
            .field("quorum", &self.quorum())
            .finish()
    }
}

impl RedLock {
    /// A RedLock over `locks`, one per independent server (at least one; the same server
    /// twice, under any name or address that resolves to it, is an
    /// [`Error::InvalidConfig`]: it would count twice towards the majority).
    ///
    /// ```no_run
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// use redis_locks::RedLock;
    /// // One client per independent Redis server (not replicas of one another).
    /// let locks = clients.iter().map(|client| client.lock("nightly-job"));
    /// let job = RedLock::new(locks.collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// assert_eq!(job.quorum(), clients.len() / 2 + 1);
    /// # Ok(()) }
    /// ```
    pub fn new(locks: impl IntoIterator<Item = Lock>) -> Result<Self> {
        let members: Vec<Lock> = locks.into_iter().collect();
        if members.is_empty() {
            return Err(Error::InvalidConfig(
                "a RedLock needs at least one server".into(),
            ));
        }
        // One server twice would count twice towards the majority: compare servers (the
        // address as written, and as resolved at connect), not locks.
        let same_server = |a: &Lock, b: &Lock| {
            let (a, b) = (&a.client().inner, &b.client().inner);
            a.calls.addr == b.calls.addr || a.resolved.iter().any(|addr| b.resolved.contains(addr))
        };
        for (i, a) in members.iter().enumerate() {
            if members[..i].iter().any(|b| same_server(a, b)) {
                return Err(Error::InvalidConfig(format!(
                    "a RedLock names the server {} twice: it would count twice towards the majority",
                    a.client().inner.calls.addr
                )));
            }
        }
        Ok(RedLock {
            servers: members.len(),
            members: members.into(),
            retry_delay: REDLOCK_RETRY_DELAY,
        })
    }

    /// Counts the majority over `total` servers, of which only the members are reachable
    /// (the others count as refusing): a RedLock built from the servers that could be
    /// connected must still win a majority of all of them. `total` below the number of
    /// members is an [`Error::InvalidConfig`].
    ///
    /// ```no_run
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// use redis_locks::RedLock;
    /// // Five servers are configured, but only the reachable ones could be connected:
    /// // the majority is still 3 of 5.
    /// let locks = clients.iter().map(|client| client.lock("nightly-job"));
    /// let job = RedLock::new(locks.collect::<redis_locks::Result<Vec<_>>>()?)?.with_servers(5)?;
    /// assert_eq!(job.quorum(), 3);
    /// # Ok(()) }
    /// ```
    pub fn with_servers(&self, total: usize) -> Result<Self> {
        if total < self.members.len() {
            return Err(Error::InvalidConfig(format!(
                "a RedLock over {} servers cannot count its majority over {total}",
                self.members.len()
            )));
        }
        let mut red = self.clone();
        red.servers = total;
        Ok(red)
    }

    /// The longest random pause between two attempts (default 200 ms).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let job = job.with_retry_delay(Duration::from_millis(50))?; // few contenders: retry sooner
    /// let held = job.acquire().await?;
    /// # held.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_retry_delay(&self, delay: Duration) -> Result<Self> {
        crate::keys::validate_ms("retry delay", delay)?;
        let mut red = self.clone();
        red.retry_delay = delay;
        Ok(red)
    }

    /// A RedLock whose holds all have the fixed lease `lease` (see [`Lock::with_lease`]).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// // A fixed 30 s lease on every server: the lock must not be relied on after `valid_until`.
    /// let held = job.with_lease(Duration::from_secs(30))?.acquire().await?;
    /// println!("valid until {:?}", held.valid_until());
    /// # held.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_lease(&self, lease: Duration) -> Result<Self> {
        let members = self
            .members
            .iter()
            .map(|lock| lock.with_lease(lease))
            .collect::<Result<Vec<_>>>()?;
        Ok(RedLock {
            members: members.into(),
            ..self.clone()
        })
    }

    /// A RedLock whose holds all belong to the explicit owner `owner` (reentrant across
    /// handles and processes that share it).
    ///
    /// ```no_run
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let owned = job.with_owner("scheduler-eu-1")?;
    /// let held = owned.acquire().await?;
    /// # held.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_owner(&self, owner: impl Into<String>) -> Result<Self> {
        let owner = owner.into();
        let members = self
            .members
            .iter()
            .map(|lock| lock.with_owner(owner.clone()))
            .collect::<Result<Vec<_>>>()?;
        Ok(RedLock {
            members: members.into(),
            ..self.clone()
        })
    }

    /// How many servers the majority is counted over (the members, or
    /// [`RedLock::with_servers`]).
    ///
    /// ```no_run
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let job = job.with_servers(5)?; // five configured, some not connected
    /// println!("a majority is {} of {}", job.quorum(), job.servers());
    /// # Ok(()) }
    /// ```
    pub fn servers(&self) -> usize {
        self.servers
    }

    /// How many servers must hold the lock: N/2 + 1 (N: the members, or
    /// [`RedLock::with_servers`]).
    ///
    /// ```no_run
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let held = job.acquire().await?;
    /// assert!(held.held_on() >= job.quorum());
    /// # held.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn quorum(&self) -> usize {
        redlock::quorum(self.servers)
    }

    /// The members, one per server.
    ///
    /// ```no_run
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// for lock in job.locks() {
    ///     println!("{} on client {}", lock.key(), lock.client().id());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn locks(&self) -> &[Lock] {
        &self.members
    }

    /// Acquires on a majority, retrying without limit while the lock is held elsewhere.
    /// Fails with [`Error::NoQuorum`] when too few servers answer for longer than the
    /// lease (a majority cannot be reached).
    ///
    /// ```no_run
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let held = job.acquire().await?; // on a majority of the servers
    /// // ... run the nightly job; `held.lost()` fires if the majority is lost ...
    /// held.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: holds taken by the attempt in flight are given back.
    pub async fn acquire(&self) -> Result<RedGuard> {
        match self.acquire_until(None).await? {
            Some(guard) => Ok(guard),
            None => Err(Error::UnexpectedReply(
                "RedLock wait without limit ended without the lock".into(),
            )),
        }
    }

    /// One attempt: `None` when the lock is held elsewhere; [`Error::NoQuorum`] when too
    /// few servers answered.
    ///
    /// ```no_run
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// match job.try_acquire().await? {
    ///     Some(held) => held.release().await?,
    ///     None => println!("another scheduler runs the job tonight"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: holds taken by the attempt are given back.
    pub async fn try_acquire(&self) -> Result<Option<RedGuard>> {
        self.acquire_until(Some(Duration::ZERO)).await
    }

    /// Attempts until `wait` has passed.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// if let Some(held) = job.try_acquire_for(Duration::from_secs(5)).await? {
    ///     // ... run the job ...
    ///     held.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: holds taken by the attempt in flight are given back.
    pub async fn try_acquire_for(&self, wait: Duration) -> Result<Option<RedGuard>> {
        crate::keys::validate_wait(wait)?;
        self.acquire_until(Some(wait)).await
    }

    /// Attempts until `wait` has passed, then fails with [`Error::Timeout`]. Zero tries
    /// once.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// use redis_locks::Error;
    /// match job.acquire_timeout(Duration::from_secs(5)).await {
    ///     Ok(held) => held.release().await?,
    ///     Err(Error::Timeout { .. }) => println!("held elsewhere"),
    ///     Err(Error::NoQuorum { failed, .. }) => eprintln!("too few servers answer: {failed:?}"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: holds taken by the attempt in flight are given back.
    pub async fn acquire_timeout(&self, wait: Duration) -> Result<RedGuard> {
        let got = self.try_acquire_for(wait).await?;
        crate::keys::or_timeout(got, self.members[0].name(), wait)
    }

    /// Runs `body` holding the lock: acquires (waiting without limit), runs the body with
    /// the guard and releases. If the lock is lost meanwhile (fewer than a majority of
    /// holds remain), the body is stopped (its future dropped at its next await point)
    /// and the result is [`Error::LockLost`].
    ///
    /// ```no_run
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// let rows = job
    ///     .run(async |_held| {
    ///         // ... the nightly job; stopped if the majority is lost ...
    ///         1_000
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the future stops the body and releases every hold in the
    /// background.
    pub async fn run<T>(&self, body: impl AsyncFnOnce(&RedGuard) -> T) -> Result<T> {
        let guard = self.acquire().await?;
        let finished = crate::guard::unless_lost(guard.lost(), body(&guard)).await;
        match finished {
            Some(out) => guard.release().await.map(|()| out),
            None => Err(Error::LockLost {
                name: guard.name().to_owned(),
                reason: guard
                    .lost_reason()
                    .unwrap_or(crate::LostReason::OwnerFieldGone),
            }),
        }
    }

    /// Whether someone holds the lock on a majority of the servers (asked of every server
    /// at once). A server that cannot answer counts for neither side: when the answers
    /// leave it undecided, the first server's error.
    ///
    /// ```no_run
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// if job.is_locked().await? {
    ///     println!("the nightly job is running somewhere");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn is_locked(&self) -> Result<bool> {
        Ok(self.remaining_ttls().await?.is_some())
    }

    /// The lease left on a majority of the servers: the longest that at least a majority
    /// still have (`None` when fewer than a majority hold it). Asked of every server at
    /// once; a server that cannot answer counts for neither side, and when the answers
    /// leave it undecided the result is the first server's error.
    ///
    /// ```no_run
    /// # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
    /// # let job = redis_locks::RedLock::new(clients.iter().map(|c| c.lock("nightly-job")).collect::<redis_locks::Result<Vec<_>>>()?)?;
    /// if let Some(left) = job.remaining_ttl().await? {
    ///     println!("held on a majority for at least {left:?} more");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn remaining_ttl(&self) -> Result<Option<Duration>> {
        self.remaining_ttls().await
    }

    async fn remaining_ttls(&self) -> Result<Option<Duration>> {
        let answers = crate::join::join_all(
            self.members
                .iter()
                .map(|lock| lock.remaining_ttl())
                .collect(),
        )
        .await;
        let quorum = self.quorum();
        let mut held: Vec<Duration> = Vec::new();
        let (mut free, mut first_error) = (0, None);
        for answer in answers {
            match answer {
                Ok(Some(left)) => held.push(left),
                Ok(None) => free += 1,
                Err(err) => {
                    first_error.get_or_insert(err);
                }
            }
        }
        held.sort_unstable_by(|a, b| b.cmp(a));
        if let Some(left) = held.get(quorum - 1) {
            return Ok(Some(*left));
        }
        // Not held on a majority of those that answered: free for sure only if too few
        // are left (failed or never connected) to make a majority with the holders.
        if self.servers - free < quorum {
            return Ok(None);
        }
        match first_error {
            Some(err) => Err(err),
            None => Ok(None),
        }
    }

    /// The lease every hold was taken with: the fixed lease, or the watchdog timeout.
    fn lease_of(lock: &Lock) -> Duration {
        Duration::from_millis(lock.lease_ms())
    }

    /// Acquires within `wait` (`None`: without limit; zero: one attempt) in the one
    /// waiting loop (`src/waiting.rs`, deciding in `protocol::wait`), where one attempt is
    /// one try on every server at once.
    async fn acquire_until(&self, wait: Option<Duration>) -> Result<Option<RedGuard>> {
        let n = self.members.len();
        let quorum = self.quorum();
        if n < quorum {
            // The servers without a member never answer: no attempt can win a majority.
            return Err(Error::NoQuorum {
                name: self.members[0].name().to_owned(),
                servers: self.servers,
                needed: quorum,
                failed: vec![format!("{} server(s) not connected", self.servers - n)],
            });
        }
        let first = &self.members[0];
        let inner = &first.client().inner;
        let policy = WaitPolicy::redlock(self.outage_tolerance().as_millis() as Millis);
        // Each member's attempt is observed as its own lock's acquisition: the RedLock's
        // wait is not counted again.
        crate::waiting::run(
            inner,
            &first.keys.channel,
            policy,
            wait.map(crate::keys::ceil_ms),
            QuorumAttempts {
                lock: self,
                attempts: 0,
            },
            false,
        )
        .await
    }

    /// One attempt on every server at once: the guard if it won, else the holds given
    /// back and whether too few servers answered for a majority (with their errors).
    async fn attempt(&self) -> std::result::Result<RedGuard, Option<Error>> {
        let n = self.members.len();
        let quorum = self.quorum();
        let attempt = Instant::now();
        // Once a majority granted (the core's `may_decide_early`), the others get the
        // core's `late_grace`: a stalled server must not hold every acquire up for its
        // whole timeout. An attempt dropped then gives back any hold it wins, in the
        // background.
        let servers = self.servers;
        let replies = crate::join::join_until(
            self.members
                .iter()
                .map(|lock| {
                    // A server that does not answer within this must not eat the validity.
                    let limit = Duration::from_millis(redlock::server_limit(
                        Self::lease_of(lock).as_millis() as Millis,
                        lock.client().inner.calls.response_timeout.as_millis() as Millis,
                    ));
                    tokio::time::timeout(limit, lock.try_acquire())
                })
                .collect(),
            |done| {
                redlock::may_decide_early(
                    done.iter()
                        .filter(|reply| matches!(reply, Some(Ok(Ok(Some(_))))))
                        .count(),
                    servers,
                )
            },
            |took| {
                let took_ms = took.as_micros().div_ceil(1_000) as Millis;
                Duration::from_millis(redlock::late_grace(took_ms))
            },
        )
        .await;
        let mut holds: Vec<Option<LockGuard>> = Vec::with_capacity(n);
        let mut errors: Vec<String> = Vec::new();
        for (i, reply) in replies.into_iter().enumerate() {
            holds.push(match reply {
                // Still running when the majority's grace ended: left out.
                None => None,
                Some(Ok(Ok(hold))) => hold,
                Some(Ok(Err(err))) => {
                    errors.push(format!("{}: {err}", self.server(i)));
                    None
                }
                Some(Err(_)) => {
                    errors.push(format!("{}: no answer in time", self.server(i)));
                    None
                }
            });
        }
        let granted = holds.iter().filter(|hold| hold.is_some()).count();
        let lease = self
            .members
            .iter()
            .map(Self::lease_of)
            .min()
            .unwrap_or_default();
        let now = Instant::now();
        // Elapsed time rounded up, so the validity errs short; from the start of the
        // oldest granted lease if that is earlier (an adopted hold).
        let elapsed = redlock::elapsed(
            (now - attempt).as_micros().div_ceil(1_000) as Millis,
            holds.iter().flatten().map(LockGuard::confirmed_age),
        );
        if let Won::Acquired { validity_ms } =
            redlock::decide(granted, self.servers, lease.as_millis() as Millis, elapsed)
        {
            return Ok(RedGuard::new(
                self.members[0].name().to_owned(),
                holds,
                self.servers,
                now + Duration::from_millis(validity_ms),
            ));
        }
        give_back(holds).await;
        // Too few servers answered: a majority cannot be had now.
        let unreachable = self.servers - n;
        if unreachable > 0 {
            errors.push(format!("{unreachable} server(s) not connected"));
        }
        let failed = errors.len() - usize::from(unreachable > 0) + unreachable;
        if redlock::no_quorum(failed, self.servers) {
            return Err(Some(Error::NoQuorum {
                name: self.members[0].name().to_owned(),
                servers: self.servers,
                needed: quorum,
                failed: errors,
            }));
        }
        Err(None)
    }

    /// How long attempts go on while too few servers answer before [`Error::NoQuorum`].
    fn outage_tolerance(&self) -> Duration {
        self.members
            .iter()
            .map(Self::lease_of)
            .max()
            .unwrap_or_default()
    }

    fn server(&self, i: usize) -> String {
        self.members[i].client().inner.calls.addr.to_string()
    }
}

/// A RedLock's attempts, for the one waiting loop.
struct QuorumAttempts<'a> {
    lock: &'a RedLock,
    attempts: u32,
}

impl Attempts for QuorumAttempts<'_> {
    type Won = RedGuard;

    async fn attempt(&mut self, _hints: crate::waiting::AttemptHints) -> Outcome<RedGuard> {
        let inner = &self.lock.members[0].client().inner;
        if self.attempts > 0 {
            // Every waiter of every client is woken by the same release: a random head
            // start spreads them, so that one of them gets a majority rather than each
            // getting a minority (a split vote).
            let spread = Duration::from_micros(inner.calls.jitter() % 1_000);
            tokio::time::sleep(spread).await;
        }
        self.attempts += 1;
        match self.lock.attempt().await {
            Ok(guard) => Outcome::Granted(guard),
            // Too few servers answered: ridden out as a transient state of the servers,
            // for as long as the lease (then reported).
            Err(Some(error)) => Outcome::Failed {
                error,
                failure: Failure::Transient("no quorum".into()),
            },
            Err(None) => Outcome::Busy(redlock::retry_pause(
                self.lock.retry_delay.as_millis() as Millis,
                inner.calls.jitter(),
            )),
        }
    }

    fn give_back_in_background(&self) {
        // Each attempt gives back what it took before it reports (and a dropped attempt
        // in the background): the policy never asks for this.
    }

    /// After a failed attempt a waiter listens to every server's release announcements
    /// (the attempt marked each lock it found held, so its release publishes).
    fn listen_all(&self) -> Option<Vec<Listener>> {
        Some(
            self.lock
                .members
                .iter()
                .map(|lock| lock.client().inner.hub.listen(&lock.keys.channel))
                .collect(),
        )
    }
}
