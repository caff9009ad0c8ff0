//! # redis-locks
//!
//! Distributed locks on Redis for tokio, in the style of Redisson: a reentrant lock, a
//! read-write lock, a fair lock, a semaphore with expiring permits, a count-down latch, a
//! multi-lock and RedLock. A hold is renewed by a watchdog while its guard lives, waiters
//! are woken by pub/sub, and every guard has a lost signal.
//!
//! ## Quick start
//!
//! One [`LockClient`] per process; [`LockClient::lock`] names a lock, and
//! [`Lock::acquire`] waits for it and returns a guard.
//!
//! ```no_run
//! use redis_locks::LockClient;
//!
//! #[tokio::main]
//! async fn main() -> redis_locks::Result<()> {
//!     // Cheap to clone: clones share the connections and the watchdog task.
//!     let client = LockClient::connect("redis://127.0.0.1:6379").await?;
//!
//!     let guard = client.lock("invoice:42")?.acquire().await?; // renewed while held
//!     // ... only one owner at a time gets here, across processes and machines ...
//!     guard.release().await?; // Ok only if the lock was held until here
//!
//!     client.flush().await; // before exiting: let background releases finish
//!     Ok(())
//! }
//! ```
//!
//! * **Reentrant**: a lock is a Redis hash; each owner's field holds its hold count.
//!   Acquire and release are single atomic Lua scripts (see `lua/`).
//! * **Watchdog**: locks taken without an explicit lease are renewed by one background
//!   task per client, in batches; when ownership can no longer be proven the guard's
//!   [`lost`](LockGuard::lost) signal fires.
//! * **Pub/sub wake-ups**: waiters sleep until a release is announced, bounded by the
//!   lock's remaining TTL, so a lost message costs only latency.
//! * **RAII guards, one for every kind**: [`Guard`] ([`LockGuard`] is `Guard<Lock>`;
//!   [`RwGuard`], [`FairGuard`] and [`SemaphoreGuard`] likewise) releases on drop (in the
//!   background) or explicitly with [`Guard::release`], which reports the outcome and is
//!   cancel-safe.
//!
//! ## The kinds
//!
//! Every kind is a cheap handle made by the client (it does not talk to Redis until
//! used), and every kind that holds something returns a guard. The handles share one
//! shape: `acquire` waits without limit, `try_acquire` tries once, `try_acquire_for`
//! waits at most a given time and says `None` when it ran out, `acquire_timeout` fails
//! with [`Error::Timeout`] instead, and `run` holds the lock around an async closure.
//!
//! | kind | made by | holds | guard |
//! |------|---------|-------|-------|
//! | [`Lock`] | [`LockClient::lock`] | one owner at a time, reentrant | [`LockGuard`] |
//! | [`RwLock`] | [`LockClient::rw_lock`] | many readers or one writer | [`RwGuard`] |
//! | [`FairLock`] | [`LockClient::fair_lock`] | one owner at a time, in arrival order | [`FairGuard`] |
//! | [`Semaphore`] | [`LockClient::semaphore`] | up to N permits, each with a lease | [`SemaphoreGuard`] |
//! | [`CountDownLatch`] | [`LockClient::latch`] | nothing: waits for a count to reach zero | none |
//! | [`MultiLock`] | [`MultiLock::new`] | several locks, all or none | [`MultiGuard`] |
//! | [`RedLock`] | [`RedLock::new`] | one lock on a majority of independent servers | [`RedGuard`] |
//!
//! ### Lock
//!
//! The reentrant lock. By default a hold is renewed by the watchdog;
//! [`with_lease`](Lock::with_lease) gives it a fixed lease instead, and
//! [`with_fencing`](Lock::with_fencing) hands out a fencing token with each hold.
//!
//! ```no_run
//! # use std::time::Duration;
//! # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
//! let lock = client.lock("invoice:42")?.with_fencing();
//! if let Some(guard) = lock.try_acquire_for(Duration::from_secs(2)).await? {
//!     let token = guard.fencing_token(); // pass it to the store with each write
//!     let nested = guard.reenter().await?; // a nested section: hold count 2
//!     nested.release().await?;
//!     guard.release().await?;
//! }
//! # Ok(()) }
//! ```
//!
//! ### Read-write lock
//!
//! Any number of read holds, or one owner's write holds. A waiting writer keeps new
//! readers out, so readers cannot starve it; a write guard can downgrade to a read.
//!
//! ```no_run
//! # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
//! let catalog = client.rw_lock("catalog")?;
//! let read = catalog.read().await?; // shared with other readers
//! read.release().await?;
//! let write = catalog.write().await?; // waits for the readers to leave
//! write.release().await?;
//! # Ok(()) }
//! ```
//!
//! ### Fair lock
//!
//! An exclusive lock granted in the order the waiters first asked, on Redis's clock.
//! Only the head of the queue is woken, and a waiter that died leaves the queue within
//! [`FAIR_WAITER_LEASE`].
//!
//! ```no_run
//! # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
//! let turn = client.fair_lock("printer")?.acquire().await?; // waits its turn
//! // ... print ...
//! turn.release().await?; // wakes the next in line
//! # Ok(()) }
//! ```
//!
//! ### Semaphore
//!
//! At most N permits out at once. Each permit has a lease like a lock's hold, so the
//! permits of a crashed holder come back when their lease ends.
//!
//! ```no_run
//! # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
//! let pool = client.semaphore("gpu-pool")?;
//! pool.try_set_permits(4).await?; // sets the size unless one is set
//! let gpus = pool.acquire(2).await?; // waits for two free permits
//! gpus.release().await?;
//! # Ok(()) }
//! ```
//!
//! ### Count-down latch
//!
//! A count that tasks and processes count down, and a wait that ends when it reaches
//! zero. A count-down whose reply was lost is retried, and never counted twice.
//!
//! ```no_run
//! # use std::time::Duration;
//! # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
//! let latch = client.latch("import:2024-06")?;
//! latch.try_set_count(3).await?; // three workers
//! latch.count_down().await?; // in each worker, when it is done
//! let done = latch.wait_for(Duration::from_secs(600)).await?; // in the coordinator
//! # Ok(()) }
//! ```
//!
//! ### Multi-lock
//!
//! Several locks taken all or none, as one guard with one lost signal. Members may be
//! plain locks, reads, writes or fair locks ([`Member`]), of one client or several. They
//! are always taken in one global order, so two multi-locks never wait for each other in
//! a cycle.
//!
//! ```no_run
//! # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
//! use redis_locks::MultiLock;
//! let transfer = MultiLock::new([client.lock("account:17")?, client.lock("account:42")?])?;
//! let both = transfer.acquire().await?; // both accounts, or none
//! both.release().await?;
//! # Ok(()) }
//! ```
//!
//! ### RedLock
//!
//! One lock over N independent Redis servers, held while a majority (N/2 + 1) holds
//! it. Each server has its own client.
//!
//! ```no_run
//! # async fn demo(clients: Vec<redis_locks::LockClient>) -> redis_locks::Result<()> {
//! use redis_locks::RedLock;
//! let locks = clients.iter().map(|client| client.lock("nightly-job"));
//! let job = RedLock::new(locks.collect::<redis_locks::Result<Vec<_>>>()?)?;
//! let held = job.acquire().await?; // on a majority of the servers
//! held.release().await?;
//! # Ok(()) }
//! ```
//!
//! ### Blocking API
//!
//! With the feature `blocking`, the module `redis_locks::blocking` has every kind for code
//! that is not async. Its client runs a small runtime of its own, and each call blocks the
//! calling thread.
//!
//! ```no_run
//! # #[cfg(feature = "blocking")]
//! # fn demo() -> redis_locks::Result<()> {
//! let client = redis_locks::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
//! let guard = client.lock("invoice:42")?.acquire()?; // blocks until held
//! guard.release()?;
//! # Ok(()) }
//! ```
//!
//! ## Owners
//! Reentrancy is per owner, and explicit. Every acquire of a handle without an explicit
//! owner is a new owner, so concurrent futures exclude each other even inside one task
//! (`join!`, `select!`). A nested critical section re-enters through its guard
//! ([`LockGuard::reenter`]); [`Lock::with_owner`] names an owner that several handles,
//! tasks or processes share.
//!
//! ## Key layout
//! For lock `name` under prefix `p` (default `redis-locks`): the hash `p:{name}`, the
//! fencing counter `p:{name}:fence` (only once fencing was used), and the channel
//! `p:{name}:db<n>:released`. Nothing else: no key outlives a released lock.
//! The `{name}` hash tag keeps them in one Redis Cluster slot.
//!
//! ## Features
//! * `blocking`: the `blocking` module, the API for code that is not async.
//! * `tls`: `rediss://` URLs, and `LockClientBuilder::tls_certificates` for a private CA.
//! * `metrics`: counters and histograms through the `metrics` facade, named
//!   `redis_locks_*`.
//! * `cli`: the `redis-locks` command-line tool; the library does not need it.

#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

mod background;
#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
pub mod blocking;
mod calls;
mod client;
mod clock;
mod detach;
mod drive;
mod error;
mod fair;
mod guard;
mod held;
mod join;
mod keys;
mod lanes;
mod latch;
mod lock;
mod multi;
mod observe;
mod owner;
mod pubsub;
mod redisson;
mod redisson_rw;
mod redlock;
mod rwlock;
mod scripts;
mod semaphore;
mod topology;
mod waiting;
mod watchdog;

// The sans-IO core is its own package (`protocol/`); the modules here reach it as
// `crate::protocol`.
use redis_locks_protocol as protocol;

pub use client::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_PREFIX, DEFAULT_RENEW_BATCH, DEFAULT_RESPONSE_TIMEOUT,
    DEFAULT_WATCHDOG_TIMEOUT, LockClient, LockClientBuilder,
};
pub use error::{CommandError, ConnectError, Error, LostReason, Result};
pub use fair::{FAIR_WAITER_LEASE, FairGuard, FairLock, FairLockState};
pub use guard::{Guard, GuardKind};
pub use keys::{MAX_DURATION, MAX_NAME_LEN, MAX_OWNER_LEN, validate_name};
pub use latch::{CountDownLatch, DEFAULT_LATCH_RECHECK, MAX_COUNT};
pub use lock::{Lock, LockGuard, LockState};
pub use multi::{Member, MemberGuard, MultiGuard, MultiLock};
/// The side of a read-write hold, as [`RwGuard::kind`] reports it.
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
/// use redis_locks::RwKind;
/// let read = client.rw_lock("catalog")?.read().await?;
/// assert_eq!(read.kind(), RwKind::Read);
/// # read.release().await?;
/// # Ok(()) }
/// ```
pub use redis_locks_protocol::rwlock::RwKind;
pub use redisson::{RedissonGuard, RedissonLock, RedissonLockState};
pub use redisson_rw::{RedissonRwGuard, RedissonRwLock, RedissonRwLockState};
pub use redlock::{REDLOCK_RETRY_DELAY, RedGuard, RedLock};
pub use rwlock::{RwGuard, RwLock, RwLockState};
pub use semaphore::{Semaphore, SemaphoreGuard, SemaphoreState};
pub use watchdog::WatchdogStats;

/// The redis-rs crate this library is built on (its `Client` appears in
/// [`LockClient::builder_from_client`], its errors in [`Error`]).
pub use redis;
/// The token type of [`LockGuard::lost_token`].
pub use tokio_util::sync::CancellationToken;

/// The README's Rust blocks, compiled as doc tests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The guide's Rust blocks (`docs/*.md`), compiled as doc tests like the README's. Only in
/// a checkout: the package ships no `docs/`, and `cfg(doctest)` is never set in a build.
#[cfg(doctest)]
mod guide_doctests {
    #[doc = include_str!("../docs/blocking.md")]
    pub struct Blocking;
    #[doc = include_str!("../docs/fair-lock.md")]
    pub struct FairLock;
    #[doc = include_str!("../docs/fencing.md")]
    pub struct Fencing;
    #[doc = include_str!("../docs/latch.md")]
    pub struct Latch;
    #[doc = include_str!("../docs/lock.md")]
    pub struct Lock;
    #[doc = include_str!("../docs/multi-lock.md")]
    pub struct MultiLock;
    #[doc = include_str!("../docs/redisson.md")]
    pub struct Redisson;
    #[doc = include_str!("../docs/redlock.md")]
    pub struct Redlock;
    #[doc = include_str!("../docs/rwlock.md")]
    pub struct Rwlock;
    #[doc = include_str!("../docs/security.md")]
    pub struct Security;
    #[doc = include_str!("../docs/semaphore.md")]
    pub struct Semaphore;
    #[doc = include_str!("../docs/topology.md")]
    pub struct Topology;
}
