//! # redis-locks
//!
//! Distributed, reentrant locks on Redis in the style of Redisson's `RLock`, for tokio.
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
//! ```no_run
//! # async fn demo() -> Result<(), redis_locks::Error> {
//! let client = redis_locks::LockClient::connect("redis://127.0.0.1:6379").await?;
//! let lock = client.lock("orders:42")?;
//! let guard = lock.acquire().await?;
//! // ... only one owner at a time gets here, across processes and machines ...
//! guard.release().await?;
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
#[doc(hidden)]
pub mod protocol;
mod pubsub;
mod redlock;
mod rwlock;
mod scripts;
mod semaphore;
mod topology;
mod waiting;
mod watchdog;

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
pub use protocol::rwlock::RwKind;
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
