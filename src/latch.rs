//! The count-down latch: a count that tasks and processes count down, and a wait that
//! ends when it reaches zero.
//!
//! Layout: the hash `<prefix>:{<name>}:latch` holds the remaining count while the latch is
//! closed (`lua/latch_set.lua`); opening it deletes it, so an open latch is no key at all
//! and nothing outlives it. The wake-up channel is `<prefix>:{<name>}:latch:db<n>:open`
//! (sharded on a cluster). Both carry the name's hash tag: one slot.
//!
//! Or, opt-in per latch ([`LockClient::redisson_latch`]), Redisson's `RCountDownLatch`
//! layout: the string `<name>` holds the count, and openings are announced on
//! `redisson_countdownlatch__channel__{<name>}` with Redisson's messages
//! (`lua/redisson_latch_*.lua`), so that Java services using Redisson share the latch.
//! One type, one API: only the scripts differ ([`crate::protocol::latch::LatchLayout`]).
//!
//! Counting down is exactly once under lost replies: a count-down whose reply was lost is
//! retried with the same request id, and the script answers a retry of an applied
//! request with the current count instead of counting again
//! (`lua/latch_count_down.lua`; in Redisson's layout a record key per count-down,
//! `lua/redisson_latch_count_down.lua`). One count-down at a time per latch and client,
//! through the same lanes that serialise a lock's requests per owner.
//!
//! Waiting: subscribe, re-check, then sleep until the opening is announced or for at most
//! the re-check interval (1 s by default), so a lost message costs at most that much
//! latency and no wait can hang. In spin mode (or when the ACL refuses `SUBSCRIBE`) the
//! waiter polls with back-off instead.

use std::sync::Arc;
use std::time::Duration;

use crate::client::LockClient;
use crate::error::{Error, Result};
use crate::keys;
use crate::protocol::latch::{self, LatchCount, LatchKeys, LatchLayout, LatchReply};
use crate::protocol::wait::WaitPolicy;
use crate::protocol::{Millis, timing};
use crate::waiting::{Attempts, Outcome};

/// The largest count a latch (and size a semaphore) can have: the scripts' Lua numbers
/// are doubles, exact up to 2^53.
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
/// let latch = client.latch("import:2024-06")?;
/// assert!(latch.try_set_count(redis_locks::MAX_COUNT + 1).await.is_err());
/// # Ok(()) }
/// ```
pub const MAX_COUNT: u64 = (1 << 53) - 1;

/// Default bound on how long a waiter sleeps between two checks of the count.
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
/// use redis_locks::DEFAULT_LATCH_RECHECK;
/// // Check the count ten times as often as the default.
/// let latch = client.latch("import:2024-06")?.with_recheck(DEFAULT_LATCH_RECHECK / 10)?;
/// # Ok(()) }
/// ```
pub const DEFAULT_LATCH_RECHECK: Duration = Duration::from_secs(1);

/// A count-down latch. Cheap to clone. Obtain one with [`LockClient::latch`].
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> Result<(), redis_locks::Error> {
/// use std::time::Duration;
/// let latch = client.latch("batch:42")?;
/// latch.try_set_count(3).await?;          // three jobs to wait for
/// // ... in each job, anywhere:
/// latch.count_down().await?;
/// // ... in the coordinator:
/// if latch.wait_for(Duration::from_secs(60)).await? {
///     println!("all three jobs are done");
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct CountDownLatch {
    client: LockClient,
    name: Arc<str>,
    keys: LatchKeys,
    recheck: Duration,
}

impl std::fmt::Debug for CountDownLatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountDownLatch")
            .field("name", &self.name)
            .field("key", &self.keys.key)
            .field("layout", &self.keys.layout)
            .finish_non_exhaustive()
    }
}

impl LockClient {
    /// A handle to the count-down latch called `name`. Validates the name (as for a
    /// lock); does not talk to Redis.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let latch = client.latch("import:2024-06")?;
    /// latch.try_set_count(12).await?; // one per monthly file
    /// # Ok(()) }
    /// ```
    pub fn latch(&self, name: &str) -> Result<CountDownLatch> {
        keys::validate_name(name)?;
        let layout = &self.inner.layout;
        Ok(self.latch_in(
            name,
            LatchKeys::native(&layout.prefix, layout.db, layout.sharded, name),
        ))
    }

    /// A handle to the count-down latch called `name` in Redisson's `RCountDownLatch`
    /// layout: the count is the string `name` itself and openings are announced on
    /// `redisson_countdownlatch__channel__{name}` with Redisson's messages, so a Java
    /// service's `redisson.getCountDownLatch(name)` and this handle are one latch: either
    /// side sets it, counts it down and waits for it, and each side's waiters are woken by
    /// the other side's last count-down. The same API as [`LockClient::latch`];
    /// see `docs/redisson.md` for what differs (Redisson's own count-downs are not
    /// exactly once). Validates the name; does not talk to Redis.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// // A Java service called `redisson.getCountDownLatch("import:2024-06").trySetCount(12)`.
    /// let latch = client.redisson_latch("import:2024-06")?;
    /// latch.count_down().await?; // the Java waiters see it
    /// # Ok(()) }
    /// ```
    pub fn redisson_latch(&self, name: &str) -> Result<CountDownLatch> {
        keys::validate_name(name)?;
        let inner = &self.inner;
        let record_ms = latch::count_down_record_ms(
            inner.watchdog_timeout.as_millis() as Millis,
            inner.calls.response_timeout.as_millis() as Millis,
        );
        Ok(self.latch_in(
            name,
            LatchKeys::redisson(&inner.layout.prefix, inner.layout.sharded, name, record_ms),
        ))
    }

    fn latch_in(&self, name: &str, keys: LatchKeys) -> CountDownLatch {
        CountDownLatch {
            client: self.clone(),
            name: name.into(),
            keys,
            recheck: DEFAULT_LATCH_RECHECK,
        }
    }
}

impl CountDownLatch {
    /// The latch's name.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let latch = client.latch("import:2024-06")?;
    /// assert_eq!(latch.name(), "import:2024-06");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Redis key of the latch (`<prefix>:{<name>}:latch`, or the name itself in
    /// Redisson's layout).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let latch = client.latch("import:2024-06")?;
    /// println!("the count lives in {}", latch.key());
    /// # Ok(()) }
    /// ```
    pub fn key(&self) -> &str {
        &self.keys.key
    }

    /// Whether the latch is kept in Redisson's `RCountDownLatch` layout
    /// ([`LockClient::redisson_latch`]).
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// assert!(client.redisson_latch("import:2024-06")?.is_redisson());
    /// assert!(!client.latch("import:2024-06")?.is_redisson());
    /// # Ok(()) }
    /// ```
    pub fn is_redisson(&self) -> bool {
        matches!(self.keys.layout, LatchLayout::Redisson { .. })
    }

    /// How long a waiter sleeps at most between two checks of the count, whatever the
    /// wake-ups: the latency a lost message can cost. Default 1 s; from 10 ms to 1 hour.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// // Waiters check at least every 100 ms, even if a wake-up message is lost.
    /// let latch = client.latch("import:2024-06")?.with_recheck(Duration::from_millis(100))?;
    /// latch.wait().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_recheck(&self, interval: Duration) -> Result<Self> {
        if interval < Duration::from_millis(10) || interval > Duration::from_secs(3600) {
            return Err(Error::InvalidDuration {
                what: "latch re-check interval",
                value: interval,
                reason: "must be between 10 ms and 1 hour",
            });
        }
        let mut latch = self.clone();
        latch.recheck = interval;
        Ok(latch)
    }

    /// Closes the latch with `count` (at least 1) unless it is already closed. Returns
    /// whether it was set.
    ///
    /// Errors: [`Error::InvalidConfig`] for a count of 0 or above [`MAX_COUNT`], [`Error::WrongType`] when the key
    /// holds something else, [`Error::Redis`].
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let latch = client.latch("import:2024-06")?;
    /// if !latch.try_set_count(3).await? {
    ///     println!("already closed by another coordinator; {} left", latch.count().await?);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancelling after the command was sent may leave the latch set.
    pub async fn try_set_count(&self, count: u64) -> Result<bool> {
        if count == 0 || count > MAX_COUNT {
            return Err(Error::InvalidConfig(format!(
                "latch {:?}: the count must be from 1 to {MAX_COUNT}, not {count}",
                self.name
            )));
        }
        let call = latch::set_call(self.keys(), count);
        match latch::decode_done(&self.client.inner.calls.eval(&call).await?) {
            Ok(LatchReply::Done(closed)) => Ok(closed),
            Ok(LatchReply::NotALatch) => Err(self.wrong_type().await),
            Ok(other) => Err(Error::UnexpectedReply(format!("latch_set.lua: {other:?}"))),
            Err(unreadable) => Err(Error::UnexpectedReply(unreadable)),
        }
    }

    /// Counts the latch down by one; returns the remaining count (0: the latch is open,
    /// and its waiters were woken). Counting down an open latch does nothing and returns
    /// 0. Exactly once: a count-down whose reply was lost is retried with the same request
    /// id until Redis answers (through reconnects and transient states, for as long as
    /// the watchdog timeout), and never counts twice in one closing of the latch. One
    /// limit (see `docs/latch.md`): if the latch that count-down was meant for is gone before
    /// the retry arrives (opened, deleted, or lost in a restart) and it is closed again,
    /// the retry counts the new closing down once.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let latch = client.latch("import:2024-06")?;
    /// // ... a worker finished its file ...
    /// if latch.count_down().await? == 0 {
    ///     println!("that was the last file");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Not cancel-safe: cancelled after it was sent, it may or may not have counted down.
    pub async fn count_down(&self) -> Result<u64> {
        let inner = &self.client.inner;
        let _lane = inner.lanes.enter(&self.keys.key, &inner.calls.tag).await;
        let call = latch::count_down_call(self.keys(), &inner.calls.next_request_id());
        let give_up_at = timing::count_down_give_up_at(
            inner.calls.clock.now(),
            inner.watchdog_timeout.as_millis() as Millis,
            inner.calls.response_timeout.as_millis() as Millis,
        );
        let resent = inner
            .calls
            .resend(&call, give_up_at)
            .await
            .map_err(|(error, _)| error)?;
        match latch::decode_count_down(&resent.reply) {
            Ok(LatchReply::Remaining(n)) => Ok(n),
            Ok(LatchReply::NotALatch) => Err(self.wrong_type().await),
            Ok(other) => Err(Error::UnexpectedReply(format!(
                "latch_count_down.lua: {other:?}"
            ))),
            Err(unreadable) => Err(Error::UnexpectedReply(unreadable)),
        }
    }

    /// The remaining count; 0 when the latch is open.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let left = client.latch("import:2024-06")?.count().await?;
    /// println!("{left} file(s) still importing");
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn count(&self) -> Result<u64> {
        // Read-only, so re-sent through connection errors, redirections and transient
        // states for up to a response timeout (right after a failover the first call can
        // meet a dead node). Any other server error (an ACL that refuses the script's
        // TYPE or HGET) fails at once, as it is.
        let inner = &self.client.inner;
        let reply = inner.calls.read(&latch::count_call(self.keys())).await?;
        match latch::decode_count(&reply) {
            Ok(LatchCount::Remaining(count)) => Ok(count),
            Ok(LatchCount::NotALatch(found)) if found == "hash" && !self.is_redisson() => {
                Err(self.not_a_latch("a hash without a whole count"))
            }
            Ok(LatchCount::NotALatch(found)) if found == "string" && self.is_redisson() => {
                Err(self.not_a_latch("a string that is not a whole count of at least 1"))
            }
            Ok(LatchCount::NotALatch(found)) => Err(self.not_a_latch(&format!("a {found}"))),
            Err(unreadable) => Err(Error::UnexpectedReply(unreadable)),
        }
    }

    /// Waits until the latch is open (its count reached zero, or it was deleted, or it was
    /// never set), without limit.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let latch = client.latch("import:2024-06")?;
    /// latch.wait().await?; // every worker has counted down
    /// println!("import complete: building the report");
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: it only observes.
    pub async fn wait(&self) -> Result<()> {
        self.wait_until(None).await.map(|_| ())
    }

    /// Waits at most `timeout` for the latch to open; returns whether it did.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let latch = client.latch("import:2024-06")?;
    /// if !latch.wait_for(Duration::from_secs(600)).await? {
    ///     eprintln!("{} file(s) not imported after 10 min", latch.count().await?);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: it only observes.
    pub async fn wait_for(&self, timeout: Duration) -> Result<bool> {
        keys::validate_wait(timeout)?;
        self.wait_until(Some(timeout)).await
    }

    /// Opens the latch whatever its count (deletes it) and wakes its waiters. Returns
    /// whether it was closed.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// // The import was cancelled: release everyone waiting for it.
    /// if client.latch("import:2024-06")?.delete().await? {
    ///     println!("opened the latch early");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancelling after the command was sent may leave the latch deleted.
    pub async fn delete(&self) -> Result<bool> {
        let inner = &self.client.inner;
        let call = latch::delete_call(self.keys());
        match latch::decode_done(&inner.calls.eval(&call).await?) {
            Ok(LatchReply::Done(deleted)) => Ok(deleted),
            Ok(LatchReply::NotALatch) => Err(self.wrong_type().await),
            Ok(other) => Err(Error::UnexpectedReply(format!(
                "latch_delete.lua: {other:?}"
            ))),
            Err(unreadable) => Err(Error::UnexpectedReply(unreadable)),
        }
    }

    /// Waits within `wait` (`None`: without limit; zero: one reading) in the one waiting
    /// loop (`src/waiting.rs`), where reading the count is the "attempt" and an open latch
    /// is the "grant".
    async fn wait_until(&self, wait: Option<Duration>) -> Result<bool> {
        let inner = &self.client.inner;
        let policy = WaitPolicy::latch(crate::keys::ceil_ms(self.recheck), inner.wait_timing());
        let opened = crate::waiting::run(
            inner,
            &self.keys.channel,
            policy,
            wait.map(crate::keys::ceil_ms),
            Readings { latch: self },
            false,
        )
        .await?;
        Ok(opened.is_some())
    }

    fn not_a_latch(&self, found: &str) -> Error {
        Error::WrongType {
            key: self.keys.key.to_string(),
            found: found.to_owned(),
        }
    }

    /// The latch's keys as the core's call builders take them.
    fn keys(&self) -> &LatchKeys {
        &self.keys
    }

    async fn wrong_type(&self) -> Error {
        match self.count().await {
            Err(err) => err,
            Ok(_) => self.not_a_latch("something that is not a latch"),
        }
    }
}

/// A latch's readings, as the waiting loop's attempts: open is a grant, closed a refusal
/// that only the re-check interval bounds.
struct Readings<'a> {
    latch: &'a CountDownLatch,
}

impl Attempts for Readings<'_> {
    type Won = ();

    async fn attempt(&mut self, _hints: crate::waiting::AttemptHints) -> Outcome<()> {
        match self.latch.count().await {
            Ok(0) => Outcome::Granted(()),
            Ok(_) => Outcome::Busy(crate::protocol::Millis::MAX),
            Err(error) => Outcome::from_error(error, false),
        }
    }

    fn give_back_in_background(&self) {
        // Reading takes nothing: the latch's policy never asks for this.
    }
}
