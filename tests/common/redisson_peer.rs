//! A test peer that speaks Redisson's `RLock` protocol as Redisson 3.24 to 4.x sends it
//! (`RedissonLock.tryLockInnerAsync`, `unlockInnerAsync`, `renewal/LockTask`,
//! `pubsub/LockPubSub`): what a Java service using Redisson does to Redis, without Java.
//! The scripts below take the same decisions on the same keys as Redisson's, written for
//! this test from their documented behaviour (`../shared/notes`, Redisson's source at
//! 66863978): the hash named by the lock name with a field `<uuid>:<thread id>` holding the
//! count; `PEXPIRE` to the lease on every acquire; `PTTL` as a refusal's reply; the
//! channel `redisson_lock__channel:{name}` with the message `0` on the last unlock; the
//! unlock latch `redisson_unlock_latch:{name}:<request id>`.

#![allow(dead_code)]

use std::time::{Duration, Instant};

/// Redisson's acquire: free or mine → HINCRBY, PEXPIRE lease, nil; else the PTTL.
const TRY_LOCK: &str = "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then \
    redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; \
    return redis.call('pttl', KEYS[1]);";

/// Redisson's unlock with its latch: a retried call gets the stored result; not mine →
/// nil; still held → PEXPIRE lease, latch 0, 0; last → DEL, publish 0, latch 1, 1.
const UNLOCK: &str = "local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val); end; \
    if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; \
    local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); \
    if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0; \
    else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end;";

/// Redisson's watchdog renewal (4.x batches it; one lock here): HEXISTS → PEXPIRE lease.
const RENEW: &str = "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('pexpire', KEYS[1], ARGV[1]); return 1; end; return 0;";

/// Redisson's forceUnlock: DEL, and publish 0 if something was deleted.
const FORCE_UNLOCK: &str = "if (redis.call('del', KEYS[1]) == 1) then redis.call(ARGV[2], KEYS[2], ARGV[1]); return 1 else return 0 end";

/// Redisson's read acquire (RedissonReadLock.tryLockInnerAsync): no mode → read, count 1,
/// timeout key :1, hash expiry; read mode, or write mode held by the same thread's write →
/// count up to k, timeout key :k, hash expiry max(pttl, lease); else the PTTL.
const RW_READ_LOCK: &str = "local mode = redis.call('hget', KEYS[1], 'mode'); \
    if (mode == false) then redis.call('hset', KEYS[1], 'mode', 'read'); redis.call('hset', KEYS[1], ARGV[2], 1); \
      redis.call('set', KEYS[2] .. ':1', 1); redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; \
    if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then \
      local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1); local key = KEYS[2] .. ':' .. ind; \
      redis.call('set', key, 1); redis.call('pexpire', key, ARGV[1]); \
      local remainTime = redis.call('pttl', KEYS[1]); redis.call('pexpire', KEYS[1], math.max(remainTime, ARGV[1])); return nil; end; \
    return redis.call('pttl', KEYS[1]);";

/// Redisson's write acquire (RedissonWriteLock.tryLockInnerAsync): no mode → write, count
/// 1; write mode held by this thread → count up, expiry pttl + lease; else the PTTL.
const RW_WRITE_LOCK: &str = "local mode = redis.call('hget', KEYS[1], 'mode'); \
    if (mode == false) then redis.call('hset', KEYS[1], 'mode', 'write'); redis.call('hset', KEYS[1], ARGV[2], 1); \
      redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; \
    if (mode == 'write') then if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then \
      redis.call('hincrby', KEYS[1], ARGV[2], 1); local currentExpire = redis.call('pttl', KEYS[1]); \
      redis.call('pexpire', KEYS[1], currentExpire + ARGV[1]); return nil; end; end; \
    return redis.call('pttl', KEYS[1]);";

/// Redisson's read release (RedissonReadLock.unlockInnerAsync), with its latch.
const RW_READ_UNLOCK: &str = "local val = redis.call('get', KEYS[5]); if val ~= false then return tonumber(val); end; \
    local mode = redis.call('hget', KEYS[1], 'mode'); \
    if (mode == false) then redis.call(ARGV[3], KEYS[2], ARGV[1]); redis.call('set', KEYS[5], 1, 'px', ARGV[4]); return nil; end; \
    local lockExists = redis.call('hexists', KEYS[1], ARGV[2]); if (lockExists == 0) then return nil; end; \
    local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1); \
    if (counter == 0) then redis.call('hdel', KEYS[1], ARGV[2]); end; \
    redis.call('del', KEYS[3] .. ':' .. (counter+1)); \
    if (redis.call('hlen', KEYS[1]) > 1) then local maxRemainTime = -3; local keys = redis.call('hkeys', KEYS[1]); \
      for n, key in ipairs(keys) do counter = tonumber(redis.call('hget', KEYS[1], key)); \
        if type(counter) == 'number' then for i=counter, 1, -1 do \
          local remainTime = redis.call('pttl', KEYS[4] .. ':' .. key .. ':rwlock_timeout:' .. i); \
          maxRemainTime = math.max(remainTime, maxRemainTime); end; end; end; \
      if maxRemainTime > 0 then redis.call('pexpire', KEYS[1], maxRemainTime); redis.call('set', KEYS[5], 0, 'px', ARGV[4]); return 0; end; \
      if mode == 'write' then redis.call('set', KEYS[5], 0, 'px', ARGV[4]); return 0; end; end; \
    redis.call('del', KEYS[1]); redis.call(ARGV[3], KEYS[2], ARGV[1]); redis.call('set', KEYS[5], 1, 'px', ARGV[4]); return 1;";

/// Redisson's write release (RedissonWriteLock.unlockInnerAsync), with its latch.
const RW_WRITE_UNLOCK: &str = "local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val); end; \
    local mode = redis.call('hget', KEYS[1], 'mode'); \
    if (mode == false) then redis.call(ARGV[4], KEYS[2], ARGV[1]); redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return nil; end; \
    if (mode == 'write') then local lockExists = redis.call('hexists', KEYS[1], ARGV[3]); \
      if (lockExists == 0) then return nil; else local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); \
        if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0; \
        else redis.call('hdel', KEYS[1], ARGV[3]); \
          if (redis.call('hlen', KEYS[1]) == 1) then redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); \
          else redis.call('hset', KEYS[1], 'mode', 'read'); end; \
          redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end; end; end; \
    return nil;";

/// Redisson's read-lock renewal (renewal/ReadLockTask, one owner): if the field exists,
/// PEXPIRE its timeout keys and the hash.
const RW_READ_RENEW: &str = "local counter = redis.call('hget', KEYS[1], ARGV[2]); \
    if (counter ~= false) then for c=counter, 1, -1 do redis.call('pexpire', KEYS[2] .. ':' .. ARGV[2] .. ':rwlock_timeout:' .. c, ARGV[1]); end; \
      redis.call('pexpire', KEYS[1], ARGV[1]); return 1; end; return 0;";

/// Redisson's `suffixName(name, suffix)`.
/// `RedissonCountDownLatch.trySetCountAsync`: KEYS latch, channel; ARGV message 1 (new
/// count), count, publish command.
const LATCH_TRY_SET_COUNT: &str = "if redis.call('exists', KEYS[1]) == 0 then redis.call('set', KEYS[1], ARGV[2]); redis.call(ARGV[3], KEYS[2], ARGV[1]); return 1 else return 0 end";
/// `RedissonCountDownLatch.countDownAsync`: KEYS latch, channel; ARGV message 0 (zero
/// count), publish command. Redisson sends it without retries.
const LATCH_COUNT_DOWN: &str = "local v = redis.call('decr', KEYS[1]); if v <= 0 then redis.call('del', KEYS[1]) end; if v == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end;";
/// `RedissonCountDownLatch.deleteAsync`: KEYS latch, channel; ARGV message 1 (Redisson's
/// delete announces a new count, not zero), publish command.
const LATCH_DELETE: &str = "if redis.call('del', KEYS[1]) == 1 then redis.call(ARGV[2], KEYS[2], ARGV[1]); return 1 else return 0 end";

pub fn suffix_name(name: &str, suffix: &str) -> String {
    if name.contains('{') {
        format!("{name}:{suffix}")
    } else {
        format!("{{{name}}}:{suffix}")
    }
}

/// Redisson's `prefixName`.
pub fn prefix_name(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// The peer's command connection: one server, or a cluster (routed by key).
#[derive(Clone)]
enum PeerConn {
    Single(redis::aio::MultiplexedConnection),
    Cluster(redis::cluster_async::ClusterConnection),
}

impl PeerConn {
    async fn invoke<T: redis::FromRedisValue>(&self, call: redis::ScriptInvocation<'_>) -> T {
        match self.clone() {
            PeerConn::Single(mut conn) => call.invoke_async(&mut conn).await.unwrap(),
            PeerConn::Cluster(mut conn) => call.invoke_async(&mut conn).await.unwrap(),
        }
    }

    async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> T {
        match self.clone() {
            PeerConn::Single(mut conn) => cmd.query_async(&mut conn).await.unwrap(),
            PeerConn::Cluster(mut conn) => cmd.query_async(&mut conn).await.unwrap(),
        }
    }
}

/// Where the peer's waiters subscribe.
enum Source {
    Single(Box<redis::Client>),
    /// Sharded `SSUBSCRIBE` on a cluster, as Redisson 3.22+ does on Redis 7.
    Cluster(Vec<String>),
}

/// One Redisson client instance: its UUID, and a connection.
pub struct RedissonPeer {
    pub uuid: String,
    source: Source,
    conn: PeerConn,
    /// `PUBLISH`, or `SPUBLISH` on a cluster.
    publish: &'static str,
}

/// A stream of the payloads published on one channel.
enum Subscription {
    Single(redis::aio::PubSub),
    Cluster {
        _conn: redis::cluster_async::ClusterConnection,
        pushes: tokio::sync::mpsc::UnboundedReceiver<redis::PushInfo>,
    },
}

impl Subscription {
    async fn next(&mut self) -> Option<String> {
        match self {
            Subscription::Single(pubsub) => {
                let mut messages = std::pin::pin!(pubsub.on_message());
                let message = std::future::poll_fn(|cx| {
                    futures_core::Stream::poll_next(messages.as_mut(), cx)
                })
                .await?;
                Some(message.get_payload().unwrap())
            }
            Subscription::Cluster { pushes, .. } => loop {
                let push = pushes.recv().await?;
                if push.kind == redis::PushKind::SMessage {
                    return redis::from_redis_value(push.data.get(1)?.clone()).ok();
                }
            },
        }
    }
}

impl RedissonPeer {
    pub async fn connect(url: &str) -> Self {
        let client = redis::Client::open(url).unwrap();
        let conn = client.get_multiplexed_async_connection().await.unwrap();
        RedissonPeer {
            uuid: uuid::Uuid::new_v4().to_string(),
            source: Source::Single(Box::new(client)),
            conn: PeerConn::Single(conn),
            publish: "PUBLISH",
        }
    }

    pub async fn connect_cluster(seeds: &[String]) -> Self {
        let conn = redis::cluster::ClusterClient::new(seeds.to_vec())
            .unwrap()
            .get_async_connection()
            .await
            .unwrap();
        RedissonPeer {
            uuid: uuid::Uuid::new_v4().to_string(),
            source: Source::Cluster(seeds.to_vec()),
            conn: PeerConn::Cluster(conn),
            publish: "SPUBLISH",
        }
    }

    async fn subscribe(&self, channel: &str) -> Subscription {
        match &self.source {
            Source::Single(client) => {
                let mut pubsub = client.get_async_pubsub().await.unwrap();
                pubsub.subscribe(channel).await.unwrap();
                Subscription::Single(pubsub)
            }
            Source::Cluster(seeds) => {
                let (tx, pushes) = tokio::sync::mpsc::unbounded_channel();
                let mut conn = redis::cluster::ClusterClientBuilder::new(seeds.clone())
                    .use_protocol(redis::ProtocolVersion::RESP3)
                    .push_sender(tx)
                    .build()
                    .unwrap()
                    .get_async_connection()
                    .await
                    .unwrap();
                conn.ssubscribe(channel).await.unwrap();
                Subscription::Cluster {
                    _conn: conn,
                    pushes,
                }
            }
        }
    }

    /// The hash field of `thread` (Redisson's `getLockName(threadId)`).
    pub fn field(&self, thread: u64) -> String {
        format!("{}:{thread}", self.uuid)
    }

    pub fn channel(name: &str) -> String {
        prefix_name("redisson_lock__channel", name)
    }

    /// One attempt: `None` acquired, `Some(pttl)` held by someone else.
    pub async fn try_lock(&self, name: &str, thread: u64, lease: Duration) -> Option<i64> {
        let script = redis::Script::new(TRY_LOCK);
        let mut call = script.key(name);
        call.arg(lease.as_millis() as u64).arg(self.field(thread));
        self.conn.invoke(call).await
    }

    /// Redisson's `lock()`/`tryLock(wait)`: try; on a refusal subscribe to the channel, then
    /// try again and wait for a message for at most the pttl, until `wait` has passed.
    /// Returns whether it acquired.
    pub async fn lock(&self, name: &str, thread: u64, lease: Duration, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        if self.try_lock(name, thread, lease).await.is_none() {
            return true;
        }
        let mut subscription = self.subscribe(&Self::channel(name)).await;
        loop {
            let Some(ttl) = self.try_lock(name, thread, lease).await else {
                return true;
            };
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            let sleep = if ttl > 0 {
                Duration::from_millis(ttl as u64).min(deadline - now)
            } else {
                deadline - now
            };
            if let Ok(Some(payload)) = tokio::time::timeout(sleep, subscription.next()).await {
                assert_eq!(
                    payload, "0",
                    "Redisson's LockPubSub reads only 0 and 1 for a lock"
                );
            }
        }
    }

    /// Redisson's `unlock()`: `Some(true)` released for good, `Some(false)` a count is
    /// left, `None` not held by this thread (Redisson throws IllegalMonitorStateException).
    pub async fn unlock(&self, name: &str, thread: u64, lease: Duration) -> Option<bool> {
        let request = uuid::Uuid::new_v4().simple().to_string();
        let latch = format!("{}:{request}", prefix_name("redisson_unlock_latch", name));
        let script = redis::Script::new(UNLOCK);
        let mut call = script.key(name);
        call.key(Self::channel(name))
            .key(&latch)
            .arg(0)
            .arg(lease.as_millis() as u64)
            .arg(self.field(thread))
            .arg(self.publish)
            .arg(13_500);
        let released: Option<i64> = self.conn.invoke(call).await;
        let _: i64 = self.conn.query(redis::cmd("DEL").arg(&latch)).await;
        released.map(|r| r == 1)
    }

    /// One watchdog renewal: whether the field was still there.
    pub async fn renew(&self, name: &str, thread: u64, lease: Duration) -> bool {
        let script = redis::Script::new(RENEW);
        let mut call = script.key(name);
        call.arg(lease.as_millis() as u64).arg(self.field(thread));
        let renewed: i64 = self.conn.invoke(call).await;
        renewed == 1
    }

    /// Redisson's `forceUnlock()`.
    pub async fn force_unlock(&self, name: &str) -> bool {
        let script = redis::Script::new(FORCE_UNLOCK);
        let mut call = script.key(name);
        call.key(Self::channel(name)).arg(0).arg(self.publish);
        let deleted: i64 = self.conn.invoke(call).await;
        deleted == 1
    }

    /// The read-write lock's channel (`RedissonReadLock.getChannelName`).
    pub fn rw_channel(name: &str) -> String {
        prefix_name("redisson_rwlock", name)
    }

    /// One read attempt (`readLock().tryLock()`): `None` acquired, `Some(pttl)` refused.
    pub async fn try_read(&self, name: &str, thread: u64, lease: Duration) -> Option<i64> {
        let field = self.field(thread);
        let script = redis::Script::new(RW_READ_LOCK);
        let mut call = script.key(name);
        call.key(format!("{}:rwlock_timeout", suffix_name(name, &field)))
            .arg(lease.as_millis() as u64)
            .arg(&field)
            .arg(format!("{field}:write"));
        self.conn.invoke(call).await
    }

    /// One write attempt (`writeLock().tryLock()`).
    pub async fn try_write(&self, name: &str, thread: u64, lease: Duration) -> Option<i64> {
        let script = redis::Script::new(RW_WRITE_LOCK);
        let mut call = script.key(name);
        call.arg(lease.as_millis() as u64)
            .arg(format!("{}:write", self.field(thread)));
        self.conn.invoke(call).await
    }

    /// `readLock().tryLock(wait)` or `writeLock().tryLock(wait)`: as [`Self::lock`] on the
    /// read-write lock's channel, where a message is `0` (a read released) or `1` (a
    /// write released). Returns whether it acquired.
    pub async fn rw_lock(
        &self,
        name: &str,
        thread: u64,
        write: bool,
        lease: Duration,
        wait: Duration,
    ) -> bool {
        let deadline = Instant::now() + wait;
        let attempt = || async {
            if write {
                self.try_write(name, thread, lease).await
            } else {
                self.try_read(name, thread, lease).await
            }
        };
        if attempt().await.is_none() {
            return true;
        }
        let mut subscription = self.subscribe(&Self::rw_channel(name)).await;
        loop {
            let Some(ttl) = attempt().await else {
                return true;
            };
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            let sleep = if ttl > 0 {
                Duration::from_millis(ttl as u64).min(deadline - now)
            } else {
                deadline - now
            };
            if let Ok(Some(payload)) = tokio::time::timeout(sleep, subscription.next()).await {
                assert!(
                    payload == "0" || payload == "1",
                    "Redisson's LockPubSub reads only 0 and 1, got {payload:?}"
                );
            }
        }
    }

    /// `readLock().unlock()`: `Some(true)` the hash was deleted, `Some(false)` holds
    /// remain, `None` not held.
    pub async fn unlock_read(&self, name: &str, thread: u64) -> Option<bool> {
        let field = self.field(thread);
        let request = uuid::Uuid::new_v4().simple().to_string();
        let latch = format!("{}:{request}", prefix_name("redisson_unlock_latch", name));
        let timeout_prefix = format!("{}:rwlock_timeout", suffix_name(name, &field));
        let key_prefix = timeout_prefix
            .split(&format!(":{field}"))
            .next()
            .unwrap_or_default()
            .to_owned();
        let script = redis::Script::new(RW_READ_UNLOCK);
        let mut call = script.key(name);
        call.key(Self::rw_channel(name))
            .key(&timeout_prefix)
            .key(&key_prefix)
            .key(&latch)
            .arg(0)
            .arg(&field)
            .arg(self.publish)
            .arg(13_500);
        let released: Option<i64> = self.conn.invoke(call).await;
        let _: i64 = self.conn.query(redis::cmd("DEL").arg(&latch)).await;
        released.map(|r| r == 1)
    }

    /// `writeLock().unlock()`: `Some(true)` the write was left (hash deleted or
    /// downgraded), `Some(false)` write holds remain, `None` not held.
    pub async fn unlock_write(&self, name: &str, thread: u64, lease: Duration) -> Option<bool> {
        let request = uuid::Uuid::new_v4().simple().to_string();
        let latch = format!("{}:{request}", prefix_name("redisson_unlock_latch", name));
        let script = redis::Script::new(RW_WRITE_UNLOCK);
        let mut call = script.key(name);
        call.key(Self::rw_channel(name))
            .key(&latch)
            .arg(1)
            .arg(lease.as_millis() as u64)
            .arg(format!("{}:write", self.field(thread)))
            .arg(self.publish)
            .arg(13_500);
        let released: Option<i64> = self.conn.invoke(call).await;
        let _: i64 = self.conn.query(redis::cmd("DEL").arg(&latch)).await;
        released.map(|r| r == 1)
    }

    /// One read-lock watchdog renewal: whether the owner still had reads.
    pub async fn renew_read(&self, name: &str, thread: u64, lease: Duration) -> bool {
        let key_prefix = suffix_name(name, "x");
        let key_prefix = key_prefix.trim_end_matches(":x").to_owned();
        let script = redis::Script::new(RW_READ_RENEW);
        let mut call = script.key(name);
        call.key(key_prefix)
            .arg(lease.as_millis() as u64)
            .arg(self.field(thread));
        let renewed: i64 = self.conn.invoke(call).await;
        renewed == 1
    }

    /// Any command on the peer's connection (routed by key on a cluster).
    pub async fn cmd<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> T {
        self.conn.query(cmd).await
    }

    /// The hold count of `field` (Redisson's `getHoldCount` for its own thread).
    pub async fn hold_count(&self, name: &str, field: &str) -> i64 {
        let count: Option<i64> = self
            .conn
            .query(redis::cmd("HGET").arg(name).arg(field))
            .await;
        count.unwrap_or(0)
    }

    /// Redisson's count-down latch channel: the name in braces as it is.
    pub fn latch_channel(name: &str) -> String {
        format!("redisson_countdownlatch__channel__{{{name}}}")
    }

    /// `RCountDownLatch.trySetCount(count)`.
    pub async fn latch_try_set_count(&self, name: &str, count: u64) -> bool {
        let script = redis::Script::new(LATCH_TRY_SET_COUNT);
        let mut call = script.key(name);
        call.key(Self::latch_channel(name))
            .arg(1)
            .arg(count)
            .arg(self.publish);
        let set: i64 = self.conn.invoke(call).await;
        set == 1
    }

    /// `RCountDownLatch.countDown()`.
    pub async fn latch_count_down(&self, name: &str) {
        let script = redis::Script::new(LATCH_COUNT_DOWN);
        let mut call = script.key(name);
        call.key(Self::latch_channel(name)).arg(0).arg(self.publish);
        let _: redis::Value = self.conn.invoke(call).await;
    }

    /// `RCountDownLatch.delete()`.
    pub async fn latch_delete(&self, name: &str) -> bool {
        let script = redis::Script::new(LATCH_DELETE);
        let mut call = script.key(name);
        call.key(Self::latch_channel(name)).arg(1).arg(self.publish);
        let deleted: i64 = self.conn.invoke(call).await;
        deleted == 1
    }

    /// `RCountDownLatch.getCount()`: a GET, a missing key reading as 0.
    pub async fn latch_count(&self, name: &str) -> i64 {
        let count: Option<i64> = self.conn.query(redis::cmd("GET").arg(name)).await;
        count.unwrap_or(0)
    }

    /// `RCountDownLatch.await(time)`, stricter: read the count; if it is not 0, subscribe,
    /// then read it again after every `0` message (Redisson's `CountDownLatchPubSub` opens
    /// its local latch on `0` and closes it on `1`, asserted to be the only messages)
    /// until it reads 0. Returns whether it did within `wait`; unlike Redisson's, a
    /// reading at the end of the wait does not count, so `true` means the count was 0 at
    /// the start or a `0` message woke it.
    pub async fn latch_await(&self, name: &str, wait: Duration) -> bool {
        if self.latch_count(name).await == 0 {
            return true;
        }
        let deadline = Instant::now() + wait;
        let mut subscription = self.subscribe(&Self::latch_channel(name)).await;
        if self.latch_count(name).await == 0 {
            return true;
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, subscription.next()).await {
                Ok(Some(message)) => {
                    assert!(
                        message == "0" || message == "1",
                        "Redisson's CountDownLatchPubSub reads only 0 and 1, not {message:?}"
                    );
                    if message == "0" && self.latch_count(name).await == 0 {
                        return true;
                    }
                }
                _ => return false,
            }
        }
    }
}
