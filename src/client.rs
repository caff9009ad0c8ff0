//! The client: configuration, connections and the background tasks shared by every lock.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::background::Background;
use crate::calls::{Calls, ReplicaAck};
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::keys;
use crate::lanes::Lanes;
use crate::pubsub::Hub;
use crate::scripts::Scripts;
use crate::topology::{self, Conn, REDACTED, Target};
use crate::watchdog::{Registry, Watchdog, WatchdogStats};

/// Default watchdog timeout: the lease of locks taken without an explicit lease.
///
/// ```no_run
/// # async fn demo() -> redis_locks::Result<()> {
/// let client = redis_locks::LockClient::connect("redis://127.0.0.1:6379").await?;
/// assert_eq!(client.watchdog_timeout(), redis_locks::DEFAULT_WATCHDOG_TIMEOUT);
/// # Ok(()) }
/// ```
pub const DEFAULT_WATCHDOG_TIMEOUT: Duration = Duration::from_secs(30);
/// Default key prefix.
///
/// ```no_run
/// # async fn demo() -> redis_locks::Result<()> {
/// let client = redis_locks::LockClient::connect("redis://127.0.0.1:6379").await?;
/// assert_eq!(client.prefix(), redis_locks::DEFAULT_PREFIX);
/// # Ok(()) }
/// ```
pub const DEFAULT_PREFIX: &str = "redis-locks";
/// Default time allowed for establishing a connection.
///
/// ```no_run
/// # async fn demo() -> redis_locks::Result<()> {
/// use redis_locks::{DEFAULT_CONNECT_TIMEOUT, LockClient};
/// // A slow link to another region: allow twice the default.
/// let client = LockClient::builder("redis://redis.eu-west.internal:6379")
///     .connect_timeout(DEFAULT_CONNECT_TIMEOUT * 2)
///     .connect()
///     .await?;
/// # Ok(()) }
/// ```
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default time allowed for one command's reply.
///
/// ```no_run
/// # async fn demo() -> redis_locks::Result<()> {
/// use redis_locks::{DEFAULT_RESPONSE_TIMEOUT, LockClient};
/// // A Redis that is sometimes slow to answer (large scripts, busy persistence).
/// let client = LockClient::builder("redis://127.0.0.1:6379")
///     .response_timeout(DEFAULT_RESPONSE_TIMEOUT * 2)
///     .connect()
///     .await?;
/// # Ok(()) }
/// ```
pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(3);
/// Default number of locks renewed by one watchdog script call.
///
/// ```no_run
/// # async fn demo() -> redis_locks::Result<()> {
/// use redis_locks::{DEFAULT_RENEW_BATCH, LockClient};
/// // Shorter renewal scripts for a Redis shared with latency-sensitive traffic.
/// let client = LockClient::builder("redis://127.0.0.1:6379")
///     .renew_batch(DEFAULT_RENEW_BATCH / 5)
///     .connect()
///     .await?;
/// # Ok(()) }
/// ```
pub const DEFAULT_RENEW_BATCH: usize = 500;

/// A handle to Redis for taking locks. Cheap to clone: clones share one command
/// connection, one subscription connection and one watchdog task.
///
/// ```no_run
/// # async fn demo() -> Result<(), redis_locks::Error> {
/// use std::time::Duration;
/// let client = redis_locks::LockClient::builder("redis://127.0.0.1:6379")
///     .watchdog_timeout(Duration::from_secs(10))
///     .prefix("billing")
///     .connect()
///     .await?;
/// let guard = client.lock("invoice:42")?.acquire().await?;
/// // ... critical section ...
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LockClient {
    pub(crate) inner: Arc<ClientInner>,
}

impl std::fmt::Debug for LockClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Short on purpose: a client appears in the Debug output of every lock and guard.
        f.debug_struct("LockClient")
            .field("id", &crate::owner::Fingerprint(&self.inner.calls.id))
            .field("addr", &self.inner.calls.addr)
            .field("prefix", &self.inner.layout.prefix)
            .finish_non_exhaustive()
    }
}

/// What a client's handles share, in parts with their own methods: the call driver
/// (connections, the clock, ids), the key layout, the registry of live holds (what the
/// watchdog renews), the pub/sub hub, the lanes, and the background work.
#[derive(Debug)]
pub(crate) struct ClientInner {
    /// How calls are sent (see `calls.rs`); `drive.rs` drives the core's machines on it.
    pub(crate) calls: Calls,
    /// Where this client's keys live.
    pub(crate) layout: Layout,
    pub(crate) registry: Arc<Registry>,
    pub(crate) hub: Hub,
    pub(crate) lanes: Arc<Lanes>,
    pub(crate) background: Arc<Background>,
    /// The runtime the client was connected on (its watchdog and hub run there): work a
    /// guard starts when it is dropped outside any runtime goes there.
    pub(crate) runtime: tokio::runtime::Handle,
    pub(crate) watchdog_timeout: Duration,
    /// The server's socket addresses as resolved at connect (one server only; empty for
    /// a cluster, a Sentinel set or a Unix socket): what tells two spellings of one
    /// server apart from two servers (`RedLock::new`).
    pub(crate) resolved: Vec<std::net::SocketAddr>,
    shutdown: CancellationToken,
}

/// Where a client's keys live: the key prefix and database (in every key and channel
/// name), and whether wake-ups go over sharded channels (a cluster).
#[derive(Debug)]
pub(crate) struct Layout {
    pub(crate) prefix: String,
    pub(crate) db: i64,
    pub(crate) sharded: bool,
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        // Stops the watchdog and the pub/sub hub. Held leases then simply expire.
        self.shutdown.cancel();
    }
}

impl ClientInner {
    /// What this client's settings give every kind's waiting loop: Redis errors are
    /// ridden out for the longer of the watchdog and response timeouts.
    pub(crate) fn wait_timing(&self) -> crate::protocol::wait::WaitTiming {
        crate::protocol::wait::WaitTiming {
            tolerance: self
                .watchdog_timeout
                .max(self.calls.response_timeout)
                .as_millis() as crate::protocol::Millis,
            response: self.calls.response_timeout.as_millis() as crate::protocol::Millis,
        }
    }
}

/// Builds a [`LockClient`]. Obtain one with [`LockClient::builder`] or
/// [`LockClient::builder_from_client`]. Its `Debug` never prints a password.
///
/// ```no_run
/// # use std::time::Duration;
/// # async fn demo() -> redis_locks::Result<()> {
/// use redis_locks::LockClient;
/// let client = LockClient::builder("redis://127.0.0.1:6379")
///     .prefix("billing")
///     .watchdog_timeout(Duration::from_secs(10))
///     .response_timeout(Duration::from_secs(1))
///     .connect()
///     .await?;
/// # Ok(()) }
/// ```
#[must_use = "a builder does nothing until .connect().await"]
pub struct LockClientBuilder {
    target: Result<Target>,
    replica_ack: Option<ReplicaAck>,
    sentinel_auth: Option<(Option<String>, String)>,
    #[cfg(feature = "tls")]
    certificates: Option<redis::TlsCertificates>,
    watchdog_timeout: Duration,
    prefix: String,
    connect_timeout: Duration,
    response_timeout: Duration,
    renew_batch: usize,
    check_interval: Option<Duration>,
    spin: bool,
}

impl std::fmt::Debug for LockClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Destructured so that a new field must be considered here. The target redacts
        // its own passwords (redis-rs's `ConnectionInfo`, and `SentinelTarget`).
        let LockClientBuilder {
            target,
            replica_ack,
            sentinel_auth,
            #[cfg(feature = "tls")]
            certificates,
            watchdog_timeout,
            prefix,
            connect_timeout,
            response_timeout,
            renew_batch,
            check_interval,
            spin,
        } = self;
        let mut out = f.debug_struct("LockClientBuilder");
        out.field("target", target)
            .field("replica_ack", replica_ack)
            .field(
                "sentinel_auth",
                &sentinel_auth
                    .as_ref()
                    .map(|(username, _password)| (username, REDACTED)),
            );
        #[cfg(feature = "tls")]
        out.field(
            "certificates",
            &certificates.as_ref().map(|_| crate::topology::SECRET_SET),
        );
        out.field("watchdog_timeout", watchdog_timeout)
            .field("prefix", prefix)
            .field("connect_timeout", connect_timeout)
            .field("response_timeout", response_timeout)
            .field("renew_batch", renew_batch)
            .field("check_interval", check_interval)
            .field("spin", spin)
            .finish()
    }
}

impl LockClient {
    /// Starts building a client for a Redis URL such as `redis://user:pass@host:6379/0`.
    /// A malformed URL is reported by [`LockClientBuilder::connect`] as
    /// [`Error::InvalidUrl`].
    ///
    /// A Sentinel-managed primary is named by the sentinels, in Lettuce's form:
    /// `redis-sentinel://[user[:password]@]host1[:port1][,host2[:port2]...][/db]#service`
    /// (default sentinel port 26379; the credentials are the primary's). The client
    /// follows failovers: see `docs/topology.md`.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), redis_locks::Error> {
    /// let client = redis_locks::LockClient::builder(
    ///     "redis-sentinel://10.0.0.1:26379,10.0.0.2:26379,10.0.0.3:26379/0#mymaster",
    /// )
    /// .connect()
    /// .await?;
    /// # Ok(()) }
    /// ```
    pub fn builder(url: &str) -> LockClientBuilder {
        LockClientBuilder::new(Target::parse(url))
    }

    /// Starts building a client for a Redis Cluster, given one or more seed nodes
    /// (`redis://host:port`, `rediss://…`; credentials in the URLs apply to every node).
    /// Each lock's keys and channel share one hash slot (`<prefix>:{<name>}`), wake-ups use
    /// sharded pub/sub, and the watchdog renews per slot.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), redis_locks::Error> {
    /// let client = redis_locks::LockClient::builder_cluster([
    ///     "redis://10.0.0.1:7000",
    ///     "redis://10.0.0.2:7000",
    /// ])
    /// .connect()
    /// .await?;
    /// # Ok(()) }
    /// ```
    pub fn builder_cluster<S: AsRef<str>>(seeds: impl IntoIterator<Item = S>) -> LockClientBuilder {
        LockClientBuilder::new(Target::cluster(seeds))
    }

    /// Starts building a client around an existing `redis::Client` (for custom TLS or
    /// connection settings).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// // A redis-rs client configured elsewhere (here: database 2).
    /// let redis = redis_locks::redis::Client::open("redis://127.0.0.1:6379/2")?;
    /// let client = redis_locks::LockClient::builder_from_client(redis)
    ///     .prefix("billing")
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn builder_from_client(client: redis::Client) -> LockClientBuilder {
        LockClientBuilder::new(Ok(Target::Single(client)))
    }

    /// Connects with default settings. Shorthand for `LockClient::builder(url).connect()`.
    ///
    /// ```no_run
    /// # async fn demo() -> redis_locks::Result<()> {
    /// let client = redis_locks::LockClient::connect("redis://127.0.0.1:6379").await?;
    /// let guard = client.lock("invoice:42")?.acquire().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the future drops the half-built client and its connections.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::builder(url).connect().await
    }

    /// This client's random identity (UUID v4). Default owner ids start with it.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// // Default owner ids start with the client's id: log it to match holders to processes.
    /// println!("lock client {} started", client.id());
    /// # Ok(()) }
    /// ```
    pub fn id(&self) -> &str {
        &self.inner.calls.id
    }

    /// The lease used, and renewed, for locks taken without an explicit lease.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// // A watchdog-leased hold is renewed about every third of this.
    /// println!("holds are renewed every {:?}", client.watchdog_timeout() / 3);
    /// # Ok(()) }
    /// ```
    pub fn watchdog_timeout(&self) -> Duration {
        self.inner.watchdog_timeout
    }

    /// The key prefix in use.
    ///
    /// ```no_run
    /// # async fn demo() -> redis_locks::Result<()> {
    /// let client = redis_locks::LockClient::builder("redis://127.0.0.1:6379")
    ///     .prefix("billing")
    ///     .connect()
    ///     .await?;
    /// assert_eq!(client.prefix(), "billing");
    /// # Ok(()) }
    /// ```
    pub fn prefix(&self) -> &str {
        &self.inner.layout.prefix
    }

    /// What the watchdog has done so far.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let stats = client.watchdog_stats();
    /// println!("{} renewals, {} failed calls, {} holds lost", stats.renewed, stats.failed_calls, stats.lost);
    /// # Ok(()) }
    /// ```
    pub fn watchdog_stats(&self) -> WatchdogStats {
        self.inner.registry.stats()
    }

    /// Number of (lock, owner) pairs this client currently holds.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.lock("invoice:42")?.acquire().await?;
    /// println!("this client holds {} lock(s)", client.held_count()); // at least 1
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn held_count(&self) -> usize {
        self.inner.registry.len()
    }

    /// Waits until background work started so far has finished: releases of guards that
    /// were dropped without [`release`](crate::LockGuard::release), and holds won by
    /// acquire attempts whose caller had already gone. Call it before a process exits so
    /// that such holds are given back instead of waiting for their lease.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let guard = client.lock("invoice:42")?.acquire().await?;
    /// drop(guard);          // given back in the background
    /// client.flush().await; // wait for that release before the process exits
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: it only observes; the background work goes on.
    pub async fn flush(&self) {
        self.inner.background.idle().await;
    }

    /// Number of lock channels that local waiters are currently subscribed to.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
    /// let lock = client.lock("invoice:42")?;
    /// // ... while tasks wait in `lock.acquire()` ...
    /// println!("waiting on {} lock(s)", client.waiting_channels());
    /// # Ok(()) }
    /// ```
    pub fn waiting_channels(&self) -> usize {
        self.inner.hub.channel_count()
    }
}

impl LockClientBuilder {
    fn new(target: Result<Target>) -> Self {
        LockClientBuilder {
            target,
            replica_ack: None,
            sentinel_auth: None,
            #[cfg(feature = "tls")]
            certificates: None,
            watchdog_timeout: DEFAULT_WATCHDOG_TIMEOUT,
            prefix: DEFAULT_PREFIX.to_owned(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            response_timeout: DEFAULT_RESPONSE_TIMEOUT,
            renew_batch: DEFAULT_RENEW_BATCH,
            check_interval: None,
            spin: false,
        }
    }

    /// The lease of locks taken without an explicit lease; the watchdog renews it every
    /// third of this. Default 30 s. Must be at least 30 ms.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo() -> redis_locks::Result<()> {
    /// // Shorter leases: a crashed holder's locks free up within 10 s.
    /// let client = redis_locks::LockClient::builder("redis://127.0.0.1:6379")
    ///     .watchdog_timeout(Duration::from_secs(10))
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn watchdog_timeout(mut self, timeout: Duration) -> Self {
        self.watchdog_timeout = timeout;
        self
    }

    /// The namespace in front of every key and channel (`<prefix>:{<name>}`). Default
    /// `redis-locks`. Clients must agree on it to see each other's locks. The separating
    /// `:` is added here, so `"app"` and `"app:"` are the same prefix (`app:{name}`).
    ///
    /// ```no_run
    /// # async fn demo() -> redis_locks::Result<()> {
    /// let client = redis_locks::LockClient::builder("redis://127.0.0.1:6379")
    ///     .prefix("billing")
    ///     .connect()
    ///     .await?;
    /// assert_eq!(client.lock("invoice:42")?.key(), "billing:{invoice:42}");
    /// # Ok(()) }
    /// ```
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        let mut prefix = prefix.into();
        if prefix.len() > 1 && prefix.ends_with(':') {
            prefix.pop();
        }
        self.prefix = prefix;
        self
    }

    /// Time allowed to establish a connection. Default 5 s.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo() -> redis_locks::Result<()> {
    /// let client = redis_locks::LockClient::builder("redis://127.0.0.1:6379")
    ///     .connect_timeout(Duration::from_secs(2))
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Time allowed for a reply to one command. Default 3 s.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo() -> redis_locks::Result<()> {
    /// let client = redis_locks::LockClient::builder("redis://127.0.0.1:6379")
    ///     .response_timeout(Duration::from_millis(500))
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// How many locks one watchdog script call renews. Default 500.
    ///
    /// ```no_run
    /// # async fn demo() -> redis_locks::Result<()> {
    /// // Many thousand holds per process: fewer, larger renewal calls.
    /// let client = redis_locks::LockClient::builder("redis://127.0.0.1:6379")
    ///     .renew_batch(2_000)
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn renew_batch(mut self, batch: usize) -> Self {
        self.renew_batch = batch;
        self
    }

    /// How often the watchdog renews watchdog-leased holds and checks fixed-lease holds,
    /// which is how soon a hold learns that it was lost (deleted, force-unlocked, taken over
    /// after a restart). Default and maximum: a third of the watchdog timeout. A shorter
    /// interval tells fixed-lease holds of a loss sooner (for example a job with a long
    /// fixed lease that must stop within a second of a `force_unlock`), for one script call
    /// per interval. At least 10 ms.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo() -> redis_locks::Result<()> {
    /// // Jobs with long fixed leases learn of a force-unlock within a second.
    /// let client = redis_locks::LockClient::builder("redis://127.0.0.1:6379")
    ///     .check_interval(Duration::from_secs(1))
    ///     .connect()
    ///     .await?;
    /// let job = client.lock("reindex")?.with_lease(Duration::from_secs(3600))?;
    /// # Ok(()) }
    /// ```
    pub fn check_interval(mut self, interval: Duration) -> Self {
        self.check_interval = Some(interval);
        self
    }

    /// Opt-in replica acknowledgement: every lock acquisition is followed, in the same
    /// pipeline on the same connection, by `WAIT replicas timeout`. Acquisitions use a
    /// connection of their own for this, because Redis blocks a connection for the whole
    /// of a `WAIT`. Semaphore permits and latches are not acknowledged. When fewer replicas
    /// acknowledge within `timeout`, the acquisition is given back and
    /// [`Error::NotReplicated`] is returned. This narrows, but does not close, the window
    /// in which a failover loses a lock: see `docs/topology.md`, "Replica acknowledgement".
    /// `replicas` must be at least 1; `timeout` at least 1 ms.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo() -> redis_locks::Result<()> {
    /// use redis_locks::{Error, LockClient};
    /// let client = LockClient::builder("redis://127.0.0.1:6379")
    ///     .min_replicas(1, Duration::from_millis(100))
    ///     .connect()
    ///     .await?;
    /// match client.lock("invoice:42")?.acquire().await {
    ///     Ok(guard) => guard.release().await?,
    ///     Err(Error::NotReplicated { acked, .. }) => eprintln!("only {acked:?} replica(s) acknowledged"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn min_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.replica_ack = Some(ReplicaAck { replicas, timeout });
        self
    }

    /// TLS roots (a private CA) and an optional client certificate, for every TLS
    /// connection the client makes: to the server, to each cluster node, to the sentinels
    /// and to the primary they name. Without it, `rediss://` uses the system's roots.
    /// Feature `tls`.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use redis_locks::redis::TlsCertificates;
    /// // The company's private CA; no client certificate.
    /// let certificates = TlsCertificates {
    ///     client_tls: None,
    ///     root_cert: Some(std::fs::read("/etc/redis/ca.pem")?),
    /// };
    /// let client = redis_locks::LockClient::builder("rediss://redis.internal:6380")
    ///     .tls_certificates(certificates)
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls_certificates(mut self, certificates: redis::TlsCertificates) -> Self {
        self.certificates = Some(certificates);
        self
    }

    /// Spin mode: waiters never subscribe; they retry with exponential back-off (1 ms
    /// doubling to 128 ms) plus up to half of it again at random, never sleeping past the
    /// lock's remaining TTL. For deployments where pub/sub is unavailable (some proxies,
    /// managed services). A release still publishes when a waiter marked the lock, so
    /// spinning and subscribing clients can share locks. Default: off (pub/sub wake-ups).
    ///
    /// ```no_run
    /// # async fn demo() -> redis_locks::Result<()> {
    /// // Behind a proxy that does not forward SUBSCRIBE: waiters poll with back-off.
    /// let client = redis_locks::LockClient::builder("redis://redis-proxy:6379")
    ///     .spin_wait(true)
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn spin_wait(mut self, spin: bool) -> Self {
        self.spin = spin;
        self
    }

    /// Credentials for the sentinels themselves (`requirepass` or an ACL user on the
    /// sentinels), for a `redis-sentinel://` URL; the URL's own credentials are the
    /// primary's. An error at connect for other URLs.
    ///
    /// ```no_run
    /// # async fn demo() -> redis_locks::Result<()> {
    /// let client = redis_locks::LockClient::builder(
    ///     "redis-sentinel://:primary-secret@10.0.0.1:26379,10.0.0.2:26379#mymaster",
    /// )
    /// .sentinel_auth(None, "sentinel-secret")
    /// .connect()
    /// .await?;
    /// # Ok(()) }
    /// ```
    pub fn sentinel_auth(mut self, username: Option<&str>, password: &str) -> Self {
        self.sentinel_auth = Some((username.map(str::to_owned), password.to_owned()));
        self
    }

    /// Validates the settings, connects, and starts the watchdog and pub/sub tasks.
    ///
    /// Errors: [`Error::InvalidUrl`], [`Error::InvalidConfig`], [`Error::InvalidDuration`],
    /// or [`Error::Connect`] naming the address when Redis cannot be reached or refuses
    /// the credentials or database.
    ///
    /// Must be called inside a tokio runtime.
    ///
    /// ```no_run
    /// # async fn demo() -> redis_locks::Result<()> {
    /// use redis_locks::{Error, LockClient};
    /// match LockClient::builder("redis://127.0.0.1:6379").prefix("billing").connect().await {
    ///     Ok(client) => println!("connected as {}", client.id()),
    ///     Err(Error::Connect { addr, source }) => eprintln!("Redis at {addr} is unreachable: {source}"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe: nothing is started until the connection is established.
    pub async fn connect(self) -> Result<LockClient> {
        let target = self.target?;
        let target = match self.sentinel_auth {
            Some((username, password)) => target.with_sentinel_auth(username, password)?,
            None => target,
        };
        #[cfg(feature = "tls")]
        let target = match self.certificates {
            Some(certs) => target.with_certificates(certs)?,
            None => target,
        };
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            Error::InvalidConfig(
                "LockClient::connect must run inside a tokio runtime (or use the `blocking` \
                 feature's client)"
                    .into(),
            )
        })?;
        keys::validate_prefix(&self.prefix)?;
        let watchdog_ms = keys::validate_ms("watchdog timeout", self.watchdog_timeout)?;
        let watchdog_timeout = Duration::from_millis(watchdog_ms);
        if self.watchdog_timeout < Duration::from_millis(30) {
            return Err(Error::InvalidDuration {
                what: "watchdog timeout",
                value: self.watchdog_timeout,
                reason: "must be at least 30 ms so renewals every third of it are possible",
            });
        }
        keys::validate_ms("connect timeout", self.connect_timeout)?;
        keys::validate_ms("response timeout", self.response_timeout)?;
        let period = match self.check_interval {
            None => watchdog_timeout / 3,
            Some(interval) if interval < Duration::from_millis(10) => {
                return Err(Error::InvalidDuration {
                    what: "check interval",
                    value: interval,
                    reason: "must be at least 10 ms",
                });
            }
            Some(interval) if interval > watchdog_timeout / 3 => {
                return Err(Error::InvalidDuration {
                    what: "check interval",
                    value: interval,
                    reason: "must be at most a third of the watchdog timeout",
                });
            }
            Some(interval) => interval,
        };
        if self.renew_batch == 0 {
            return Err(Error::InvalidConfig(
                "renew batch must be at least 1".into(),
            ));
        }

        if let Some(ack) = self.replica_ack {
            if ack.replicas == 0 {
                return Err(Error::InvalidConfig(
                    "min_replicas: at least 1 replica (leave it unset for none)".into(),
                ));
            }
            if ack.timeout < Duration::from_millis(1) {
                return Err(Error::InvalidDuration {
                    what: "replica timeout",
                    value: ack.timeout,
                    reason: "must be at least 1 ms",
                });
            }
            keys::validate_ms("replica timeout", ack.timeout)?;
        }
        let addr = target.describe();
        let resolved = target.resolve().await;
        let db = target.db();
        let settings = topology::Settings {
            connect_timeout: self.connect_timeout,
            response_timeout: self.response_timeout,
        };
        let connecting = Conn::connect(&target, settings);
        let mut conn = match tokio::time::timeout(self.connect_timeout, connecting).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(source)) => {
                return Err(Error::Connect {
                    addr,
                    source: source.into(),
                });
            }
            Err(_) => {
                let source = std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "no connection within {:?}{}",
                        self.connect_timeout,
                        tls_hint(&target)
                    ),
                );
                return Err(Error::Connect {
                    addr,
                    source: source.into(),
                });
            }
        };

        // The connection sends no command on its own unless credentials or a database are
        // given, so a server that wants a password (or an ACL that refuses this user)
        // would only show at the first acquire. Ask once, now.
        let ping = redis::cmd("PING");
        match tokio::time::timeout(
            self.response_timeout,
            ping.query_async::<redis::Value>(&mut conn),
        )
        .await
        {
            Ok(Ok(_)) => {}
            // An ACL without +ping: the server checked who we are and answered, which is
            // all this asks.
            Ok(Err(err)) if err.code() == Some("NOPERM") => {}
            Ok(Err(source)) => {
                return Err(Error::Connect {
                    addr,
                    source: source.into(),
                });
            }
            Err(_) => {
                let source = std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "no reply to PING within {:?}{}",
                        self.response_timeout,
                        tls_hint(&target)
                    ),
                );
                return Err(Error::Connect {
                    addr,
                    source: source.into(),
                });
            }
        }

        let ack_conn = match self.replica_ack {
            None => None,
            Some(ack) => {
                let ack_settings = topology::Settings {
                    connect_timeout: self.connect_timeout,
                    response_timeout: self.response_timeout + ack.timeout,
                };
                match tokio::time::timeout(
                    self.connect_timeout,
                    Conn::connect(&target, ack_settings),
                )
                .await
                {
                    Ok(Ok(conn)) => Some(conn),
                    Ok(Err(source)) => {
                        return Err(Error::Connect {
                            addr,
                            source: source.into(),
                        });
                    }
                    Err(_) => {
                        let source = std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            format!("no connection within {:?}", self.connect_timeout),
                        );
                        return Err(Error::Connect {
                            addr,
                            source: source.into(),
                        });
                    }
                }
            }
        };

        let shutdown = CancellationToken::new();
        let scripts = Arc::new(Scripts::new());
        let clock = Clock::new();
        let registry = Arc::new(Registry::new(clock));
        let hub = if self.spin {
            Hub::spinning()
        } else {
            Hub::start(&target, &conn, settings, shutdown.clone())
        };
        let watchdog = Watchdog {
            registry: registry.clone(),
            conn: conn.clone(),
            scripts: scripts.clone(),
            lease: watchdog_timeout,
            period,
            batch: self.renew_batch,
            call_timeout: self.response_timeout,
            shutdown: shutdown.clone(),
        };
        runtime.spawn(watchdog.run());

        Ok(LockClient {
            inner: Arc::new(ClientInner {
                calls: Calls::new(
                    conn,
                    ack_conn,
                    self.replica_ack,
                    scripts,
                    self.response_timeout,
                    addr,
                    clock,
                ),
                layout: Layout {
                    prefix: self.prefix,
                    db,
                    sharded: target.sharded(),
                },
                registry,
                hub,
                resolved,
                watchdog_timeout,
                shutdown,
                background: Arc::default(),
                lanes: Arc::default(),
                runtime,
            }),
        })
    }
}

/// What a timeout over TLS adds: a plain (non-TLS) server never answers a TLS handshake,
/// so `rediss://` against it looks like a server that does not answer at all.
fn tls_hint(target: &crate::topology::Target) -> &'static str {
    if target.uses_tls() {
        " (rediss:// speaks TLS: is the server TLS-enabled? A plain server never answers \
         a TLS handshake; use redis:// for it)"
    } else {
        ""
    }
}
