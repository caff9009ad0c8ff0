//! The crate's one error type.

use std::time::Duration;

/// Everything that can go wrong with a lock operation.
///
/// Each variant names one cause, so callers can match on what happened instead of parsing
/// messages. Errors never mean "maybe": when an operation cannot tell whether it took
/// effect, it retries (see [`Error::Redis`]) or reports the lock as lost.
///
/// ```no_run
/// # use std::time::Duration;
/// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
/// use redis_locks::Error;
/// match client.lock("invoice:42")?.acquire_timeout(Duration::from_secs(2)).await {
///     Ok(guard) => guard.release().await?,
///     Err(Error::Timeout { .. }) => println!("busy: try again later"),
///     Err(Error::Redis(failed)) => eprintln!("Redis failed: {failed}"),
///     Err(other) => return Err(other),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The client could not connect to Redis at `addr` (refused, unreachable, timed out,
    /// wrong password, bad database index, ...).
    // The cause is the error's `source()`, not part of this message, so that reporters
    // that print the chain (anyhow, the CLI) do not print it twice.
    #[error("cannot connect to Redis at {addr}")]
    Connect {
        /// The address that was tried, as `host:port` (or the socket path).
        addr: String,
        /// What the connection attempt reported.
        #[source]
        source: ConnectError,
    },

    /// A command failed after the client was connected (connection lost, timeout, server
    /// error), at the server it names. The operation may be retried.
    // Not a `#[source]`: the message already carries the server and the cause, and a
    // chain-printing reporter would repeat them. Match on the variant for the details.
    #[error("Redis command failed at {}: {}", .0.server, .0.error)]
    Redis(CommandError),

    /// The connection URL could not be parsed.
    #[error("invalid Redis URL: {0}")]
    InvalidUrl(String),

    /// A builder setting is out of range (for example an empty key prefix).
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),

    /// The caller does not hold the lock it tried to release.
    // The message shows the owner's fingerprint, not the id: messages end up in logs, and
    // whoever knows an owner id can release that owner's holds.
    #[error("lock {name:?} is not held by owner {}", crate::owner::Fingerprint(.owner))]
    NotHeld {
        /// The lock name.
        name: String,
        /// The owner id that tried to release (kept out of the message: a secret).
        owner: String,
    },

    /// The lock was held by this guard but is no longer: its lease expired, it was deleted
    /// (for example by `force_unlock`), or Redis lost it (restart, failover). Whatever the
    /// critical section did after the loss was not protected.
    #[error("lock {name:?} was lost: {reason}")]
    LockLost {
        /// The lock name.
        name: String,
        /// Why the library believes the lock is gone.
        reason: LostReason,
    },

    /// A release whose reply was lost was retried, and the retry found the hold already
    /// gone: either the lost attempt gave it back, or the hold had ended before (expired,
    /// force-unlocked, lost by Redis). Nothing else was touched, and the hold is not held
    /// now; what cannot be confirmed is that the critical section was protected to the end.
    #[error(
        "lock {name:?}: the release's reply was lost and the hold is gone; cannot confirm that this release gave it back"
    )]
    ReleaseUnconfirmed {
        /// The lock name.
        name: String,
    },

    /// A bounded wait ran out before the lock could be acquired.
    #[error("timed out after {waited:?} waiting for lock {name:?}")]
    Timeout {
        /// The lock name.
        name: String,
        /// How long the caller waited.
        waited: Duration,
    },

    /// The lock name (or an explicit owner id) is unusable.
    #[error("invalid lock name {name:?}: {reason}")]
    InvalidName {
        /// The rejected name, shortened if it was very long.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// A lease, wait or timeout duration is zero or too large for Redis.
    #[error("invalid duration for {what}: {value:?} ({reason})")]
    InvalidDuration {
        /// Which parameter was rejected (`"lease"`, `"watchdog timeout"`, ...).
        what: &'static str,
        /// The rejected value.
        value: Duration,
        /// Why it was rejected.
        reason: &'static str,
    },

    /// The lock's key exists in Redis but is not a lock written by this library (a string,
    /// a list, a hash without an expiry, ...). Nothing was changed.
    #[error("key {key:?} is not a redis-locks lock: it holds {found}; nothing was changed")]
    WrongType {
        /// The full Redis key.
        key: String,
        /// What was found there, as a noun phrase: "a string", "a list", "a hash without
        /// an expiry", "a value that is not a hash", ...
        found: String,
    },

    /// Replica acknowledgement was asked for ([`min_replicas`]) and fewer replicas than
    /// that acknowledged the acquisition within the timeout. The acquisition was given
    /// back (nothing is left held by it); retrying may succeed once replicas catch up.
    ///
    /// [`min_replicas`]: crate::LockClientBuilder::min_replicas
    #[error(
        "lock {name:?}: {} of {wanted} replica(s) acknowledged the acquisition within {timeout:?}; it was given back",
        acked.map_or_else(|| "an unknown number".to_owned(), |n| n.to_string())
    )]
    NotReplicated {
        /// The lock name.
        name: String,
        /// Replicas asked for.
        wanted: u32,
        /// Replicas that acknowledged, or `None` when unknown (the acquire's reply was
        /// lost, and the hold was found afterwards).
        acked: Option<u32>,
        /// The time allowed.
        timeout: Duration,
    },

    /// The request could never be granted, because the caller's own holds stand in its
    /// way: a read holder asking for the write lock of a read-write lock
    /// ([`RwLock`](crate::RwLock)). It is refused at once instead of waiting forever (an
    /// upgrade would wait for the caller's own reads). Nothing was changed.
    #[error("lock {name:?}: {reason}; refused at once (it would wait forever)")]
    WouldDeadlock {
        /// The lock name.
        name: String,
        /// Why it could never be granted.
        reason: &'static str,
    },

    /// A [`RedLock`](crate::RedLock) could not reach a majority of its servers: too
    /// few of them answered (down, unreachable, or refusing) for longer than the lease.
    /// Nothing is left held.
    #[error(
        "lock {name:?}: fewer than {needed} of {servers} servers answered; a majority cannot be reached ({})",
        failed.join("; ")
    )]
    NoQuorum {
        /// The lock name.
        name: String,
        /// How many servers the RedLock has.
        servers: usize,
        /// How many must grant it.
        needed: usize,
        /// What each failing server answered.
        failed: Vec<String>,
    },

    /// A script returned a reply the library does not understand. This points at a version
    /// mismatch or a bug, never at user input.
    #[error("unexpected reply from Redis: {0}")]
    UnexpectedReply(String),
}

/// Why a guard's hold was lost, as [`Guard::lost_reason`](crate::Guard::lost_reason)
/// reports it.
///
/// ```no_run
/// # use std::time::Duration;
/// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
/// use redis_locks::LostReason;
/// let guard = client.lock("export")?.with_lease(Duration::from_secs(60))?.acquire().await?;
/// guard.lost().await;
/// match guard.lost_reason() {
///     Some(LostReason::LeaseElapsed) => eprintln!("the fixed lease ran out: extend it sooner"),
///     Some(other) => eprintln!("lost: {other}"),
///     None => {}
/// }
/// # Ok(()) }
/// ```
pub use crate::protocol::hold::LostReason;

/// A Redis command that failed, with the server it was sent to. Displays as
/// `<server>: <what Redis or the connection reported>`.
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
/// use redis_locks::Error;
/// match client.lock("invoice:42")?.try_acquire().await {
///     Ok(guard) => drop(guard),
///     Err(Error::Redis(failed)) => {
///         eprintln!("{} failed: {:?}", failed.server, failed.error.kind());
///     }
///     Err(other) => return Err(other),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, thiserror::Error)]
#[error("{server}: {error}")]
#[non_exhaustive]
pub struct CommandError {
    /// The server, as `host:port` (or the socket path).
    pub server: String,
    /// What redis-rs reported.
    #[source]
    pub error: redis::RedisError,
}

/// Shorthand for `Result<T, redis_locks::Error>`.
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
/// use redis_locks::{LockClient, Result};
///
/// async fn charge_invoice(client: &LockClient, id: u64) -> Result<()> {
///     let guard = client.lock(&format!("invoice:{id}"))?.acquire().await?;
///     // ... charge it ...
///     guard.release().await
/// }
/// # charge_invoice(&client, 42).await?;
/// # Ok(()) }
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a connection could not be made: the error redis-rs reported
/// ([`ConnectError::redis_error`]). It is [`Error::Connect`]'s `source()`; its own
/// `source()` skips the causes its message already shows, so that a reporter that prints
/// the whole chain (anyhow's `{:#}`, the CLI) prints "Connection refused (os error 111)"
/// once, not twice (redis-rs repeats its I/O error's text in its own message).
///
/// ```no_run
/// # async fn demo() -> redis_locks::Result<()> {
/// use redis_locks::{Error, LockClient};
/// match LockClient::connect("redis://127.0.0.1:6379").await {
///     Ok(client) => drop(client),
///     Err(Error::Connect { addr, source }) => eprintln!("{addr}: {source}"),
///     Err(other) => return Err(other),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ConnectError(redis::RedisError);

impl ConnectError {
    /// The error redis-rs reported.
    ///
    /// ```no_run
    /// # async fn demo() -> redis_locks::Result<()> {
    /// use redis_locks::{Error, LockClient};
    /// if let Err(Error::Connect { source, .. }) = LockClient::connect("redis://127.0.0.1:6379").await {
    ///     if source.redis_error().is_connection_refusal() {
    ///         eprintln!("nothing listens there: is Redis running?");
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn redis_error(&self) -> &redis::RedisError {
        &self.0
    }
}

impl From<redis::RedisError> for ConnectError {
    fn from(error: redis::RedisError) -> Self {
        ConnectError(error)
    }
}

impl From<std::io::Error> for ConnectError {
    fn from(error: std::io::Error) -> Self {
        ConnectError(error.into())
    }
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for ConnectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        let shown = self.0.to_string();
        let mut cause = std::error::Error::source(&self.0);
        while let Some(inner) = cause {
            if !shown.contains(&inner.to_string()) {
                return Some(inner);
            }
            cause = inner.source();
        }
        None
    }
}
