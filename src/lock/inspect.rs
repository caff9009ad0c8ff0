//! Reading a lock (its holders, TTL and waiters), and deleting it whoever holds it.

use std::time::Duration;

use redis::{FromRedisValue, Value};

use crate::error::{Error, Result};
use crate::protocol::{Reply, force_unlock_call};

use super::{HOLD_FIELD, Lock, TOKEN_FIELD};

/// A snapshot of a lock's state in Redis, from [`Lock::state`].
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
/// let state = client.lock("invoice:42")?.state().await?;
/// if state.is_locked() {
///     println!("held by {} owner(s)", state.holders.len());
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockState {
    /// Every owner field with its hold count. Empty when the lock is free.
    pub holders: Vec<(String, u64)>,
    /// How long the lock has left to live in Redis, `None` when it is free.
    pub remaining: Option<Duration>,
    /// The fencing counter's current value (the latest token handed out), `None` when
    /// fencing was never used on this name.
    pub fence: Option<u64>,
    /// The fencing token of the current hold, `None` when it was not taken with fencing.
    pub hold_token: Option<u64>,
}

impl LockState {
    /// Whether anyone holds the lock.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let state = client.lock("invoice:42")?.state().await?;
    /// if !state.is_locked() {
    ///     println!("free");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_locked(&self) -> bool {
        !self.holders.is_empty()
    }

    /// The hold count of `owner`, 0 if it does not hold the lock.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.lock("migration:v42")?.with_owner("deploy-7f3c9a1e")?;
    /// let state = lock.state().await?;
    /// println!("deploy-7f3c9a1e holds it {} time(s)", state.count_of("deploy-7f3c9a1e"));
    /// # Ok(()) }
    /// ```
    pub fn count_of(&self, owner: &str) -> u64 {
        self.holders
            .iter()
            .find(|(field, _)| field == owner)
            .map_or(0, |(_, count)| *count)
    }
}

impl Lock {
    /// Deletes the lock whoever holds it and wakes its waiters. Returns whether there was
    /// a lock. Holders find out at their next renewal (their lost signal fires) or release.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// // An operator clears the lock of a deploy that crashed.
    /// if client.lock("deploy")?.force_unlock().await? {
    ///     println!("deleted; its holder is told at its next renewal");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// A cancelled call may or may not have deleted the lock.
    pub async fn force_unlock(&self) -> Result<bool> {
        let inner = &self.client.inner;
        match inner
            .calls
            .eval(&force_unlock_call(&self.keys.protocol))
            .await?
        {
            Reply::Int(-2) => Err(self.wrong_type("not a hash")),
            Reply::Int(deleted) => Ok(deleted > 0),
            other => Err(Error::UnexpectedReply(format!("force_unlock: {other:?}"))),
        }
    }

    /// Reads the lock's holders and TTL in one snapshot.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let state = client.lock("invoice:42")?.state().await?;
    /// for (_owner, count) in &state.holders {
    ///     println!("an owner holds it {count} time(s)");
    /// }
    /// println!("latest fencing token: {:?}", state.fence);
    /// # Ok(()) }
    /// ```
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
        let reply: Vec<Value> = match inner.calls.read(&call).await? {
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
                remaining: None,
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
                    remaining: Some(Duration::from_millis(pttl as u64)),
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
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let waiting = client.lock("invoice:42")?.waiting_clients().await?;
    /// println!("{waiting} process(es) are waiting for the lock");
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn waiting_clients(&self) -> Result<u64> {
        let inner = &self.client.inner;
        let mut conn = inner.calls.conn.clone();
        let mut cmd = redis::cmd("PUBSUB");
        // A cluster's wake-ups are sharded; redis-rs sends this to every primary and adds
        // the counts up.
        let numsub = if inner.layout.sharded {
            "SHARDNUMSUB"
        } else {
            "NUMSUB"
        };
        cmd.arg(numsub).arg(&*self.keys.channel);
        let reply = tokio::time::timeout(
            inner.calls.response_timeout,
            cmd.query_async::<Vec<(String, u64)>>(&mut conn),
        )
        .await
        .map_err(|_| inner.calls.redis_error(inner.calls.timeout_error()))?
        .map_err(|err| inner.calls.redis_error(err))?;
        Ok(reply.first().map_or(0, |(_, n)| *n))
    }

    /// Whether anyone holds the lock.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// if client.lock("deploy")?.is_locked().await? {
    ///     println!("a deploy is in progress");
    /// }
    /// # Ok(()) }
    /// ```
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
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.lock("migration:v42")?.with_owner("deploy-7f3c9a1e")?;
    /// if lock.is_held_by_owner().await? {
    ///     lock.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn is_held_by_owner(&self) -> Result<bool> {
        Ok(self.hold_count().await? > 0)
    }

    /// This handle's explicit owner's hold count (0 when it does not hold the lock).
    /// Fails with [`Error::InvalidConfig`] for a handle without an explicit owner.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.lock("migration:v42")?.with_owner("deploy-7f3c9a1e")?;
    /// let guard = lock.acquire().await?;
    /// assert_eq!(lock.hold_count().await?, 1);
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
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
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// if let Some(ttl) = client.lock("deploy")?.remaining_ttl().await? {
    ///     println!("held; expires in {ttl:?} unless renewed");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: read-only.
    pub async fn remaining_ttl(&self) -> Result<Option<Duration>> {
        Ok(self.state().await?.remaining)
    }

    /// The id of the lock's current hold (whoever holds it), from the same snapshot as
    /// [`Lock::state`]: a first hold's string and a hash read alike (see `lua/inspect.lua`).
    /// `None` when the lock is free.
    pub(crate) async fn current_hold_id(&self) -> Result<Option<String>> {
        let inner = &self.client.inner;
        let call = crate::protocol::Call {
            script: crate::protocol::ScriptId::Inspect,
            keys: vec![self.keys.hash.clone(), self.keys.fence.clone()],
            args: Vec::new(),
        };
        let Reply::Array(items) = inner.calls.read(&call).await? else {
            return Err(Error::UnexpectedReply("inspect: not an array".into()));
        };
        let kind = items.first().and_then(Reply::text).unwrap_or_default();
        match kind.as_str() {
            "none" => Ok(None),
            "hash" => Ok(items
                .get(3..)
                .unwrap_or_default()
                .chunks(2)
                .find(|pair| pair.first().and_then(Reply::text).as_deref() == Some(HOLD_FIELD))
                .and_then(|pair| pair.get(1))
                .and_then(Reply::text)),
            _ => Err(self.wrong_type("not a hash")),
        }
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
