//! The command connection, whatever the topology.
//!
//! - One server: redis-rs's `ConnectionManager` (reconnects by itself).
//! - A cluster: redis-rs's async `ClusterConnection`, built with **no internal retries**.
//!   Its retry loop would re-send a script whose connection dropped after it ran, and a
//!   blind re-send of `acquire.lua` is a second re-entry: the protocol core must see
//!   every lost reply so that it can ask what ran (`lua/probe.lua`). Redirections and
//!   cluster-down states are retried here instead, where it is known that nothing ran.
//!   redis-rs refreshes its slot map on a `MOVED` but not when a primary simply dies, so
//!   after connection errors the whole cluster connection is rebuilt from the seeds.
//! - Sentinel: a `ConnectionManager` to the primary the sentinels name, replaced when
//!   they name another one (see `sentinel.rs`).
//!
//! Every replacement bumps a generation that the pub/sub hub watches, so that
//! subscriptions follow the primary too.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisError, RedisFuture, Value};
use tokio::sync::watch;

use super::sentinel::SentinelConn;
use super::settings::{Settings, suggests_topology_change};
use super::{ClusterTarget, Target};

/// The shared command connection. Cheap to clone.
#[derive(Clone)]
pub(crate) enum Conn {
    Single(ConnectionManager),
    Cluster(Arc<ClusterLink>),
    Sentinel(SentinelConn),
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Conn::Single(_) => f.write_str("Conn::Single"),
            Conn::Cluster(link) => write!(f, "Conn::Cluster(generation {})", link.generation()),
            Conn::Sentinel(link) => write!(f, "Conn::Sentinel({})", link.primary_addr()),
        }
    }
}

impl Conn {
    /// Connects to `target`. The error names nothing: the caller adds the address.
    pub(crate) async fn connect(target: &Target, settings: Settings) -> Result<Conn, RedisError> {
        match target {
            Target::Single(client) => Ok(Conn::Single(
                ConnectionManager::new_with_config(client.clone(), settings.manager_config())
                    .await?,
            )),
            Target::Cluster(cluster) => Ok(Conn::Cluster(Arc::new(
                ClusterLink::connect(cluster.clone(), settings).await?,
            ))),
            Target::Sentinel(sentinel) => Ok(Conn::Sentinel(
                SentinelConn::connect(sentinel.clone(), settings).await?,
            )),
        }
    }

    /// Bumped each time the connection was rebuilt for a topology change (a new cluster
    /// map, a new Sentinel primary). Always 0 for one server.
    pub(crate) fn generation(&self) -> watch::Receiver<u64> {
        match self {
            Conn::Single(_) => watch::channel(0).1,
            Conn::Cluster(link) => link.changed.subscribe(),
            Conn::Sentinel(link) => link.generation(),
        }
    }

    /// Whether this is a cluster connection (renewal batches must then stay in one slot).
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Conn::Cluster(_))
    }

    /// The primaries of a cluster's slot ranges (`CLUSTER SLOTS`, asked of any node).
    pub(crate) async fn cluster_slots(&self) -> Result<Vec<SlotRange>, RedisError> {
        let mut conn = self.clone();
        let reply: Value = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query_async(&mut conn)
            .await?;
        let Value::Array(ranges) = reply else {
            return Err(unexpected("CLUSTER SLOTS", &reply));
        };
        let mut out = Vec::with_capacity(ranges.len());
        for range in &ranges {
            let parsed = match range {
                Value::Array(fields) => match fields.as_slice() {
                    [
                        Value::Int(start),
                        Value::Int(end),
                        Value::Array(primary),
                        ..,
                    ] => match primary.as_slice() {
                        [host, Value::Int(port), ..] => text(host).map(|host| SlotRange {
                            start: u16::try_from(*start).unwrap_or(u16::MAX),
                            end: u16::try_from(*end).unwrap_or(0),
                            host,
                            port: u16::try_from(*port).unwrap_or(0),
                        }),
                        _ => None,
                    },
                    _ => None,
                },
                _ => None,
            };
            out.push(parsed.ok_or_else(|| unexpected("CLUSTER SLOTS", range))?);
        }
        Ok(out)
    }

    /// Sends `pipeline` to the cluster node `host:port` as it is (each command must be
    /// valid there on its own). Errors of single commands come back as
    /// `Value::ServerError` items.
    pub(crate) async fn pipeline_on_node(
        &self,
        pipeline: redis::Pipeline,
        count: usize,
        host: &str,
        port: u16,
    ) -> Result<Vec<Value>, RedisError> {
        let Conn::Cluster(link) = self else {
            let mut conn = self.clone();
            return pipeline.query_async(&mut conn).await;
        };
        let (generation, mut conn) = link.snapshot();
        let route = redis::cluster_routing::SingleNodeRoutingInfo::ByAddress {
            host: host.to_owned(),
            port,
        };
        let result = conn.route_pipeline(pipeline, 0, count, route).await;
        if result.as_ref().is_err_and(suggests_topology_change) {
            link.rebuild_in_background(generation);
        }
        result
    }

    /// The current Sentinel primary's client, for subscriptions.
    pub(crate) fn sentinel(&self) -> Option<&SentinelConn> {
        match self {
            Conn::Sentinel(link) => Some(link),
            _ => None,
        }
    }
}

/// One slot range of a cluster and its primary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SlotRange {
    pub(crate) start: u16,
    pub(crate) end: u16,
    pub(crate) host: String,
    pub(crate) port: u16,
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(text) => Some(text.clone()),
        _ => None,
    }
}

fn unexpected(what: &str, value: &Value) -> RedisError {
    RedisError::from((
        redis::ErrorKind::UnexpectedReturnType,
        "unexpected reply",
        format!("{what}: {value:?}"),
    ))
}

/// A reply obtained by following an `ASK` for a single command.
trait FromAsked {
    fn from_asked(value: Value) -> Self;
}

impl FromAsked for Value {
    fn from_asked(value: Value) -> Self {
        value
    }
}

/// Never used (pipelines do not follow `ASK`), but `retrying` serves both.
impl FromAsked for Vec<Value> {
    fn from_asked(value: Value) -> Self {
        vec![value]
    }
}

/// `ASKING` + `cmd` on the node `addr` (`host:port`), as one pipeline on that node's
/// connection (the `ASKING` flag holds for the next command of the connection only).
async fn asking(mut conn: ClusterConnection, cmd: &Cmd, addr: &str) -> Result<Value, RedisError> {
    let (host, port) = addr
        .rsplit_once(':')
        .and_then(|(host, port)| Some((host, port.parse::<u16>().ok()?)))
        .ok_or_else(|| {
            RedisError::from((
                redis::ErrorKind::UnexpectedReturnType,
                "unreadable ASK redirection",
                addr.to_owned(),
            ))
        })?;
    let mut pipe = redis::pipe();
    pipe.ignore_errors().cmd("ASKING").add_command(cmd.clone());
    let route = redis::cluster_routing::SingleNodeRoutingInfo::ByAddress {
        host: host.to_owned(),
        port,
    };
    let values = conn.route_pipeline(pipe, 0, 2, route).await?;
    match values.into_iter().nth(1) {
        Some(Value::ServerError(err)) => Err(err.into()),
        Some(value) => Ok(value),
        None => Err(RedisError::from((
            redis::ErrorKind::UnexpectedReturnType,
            "no reply to the command after ASKING",
        ))),
    }
}

/// Cluster errors for which the command surely did not run and a retry is expected to
/// succeed once the client has the new slot map.
fn did_not_run_retry_soon(err: &RedisError) -> bool {
    matches!(
        err.code(),
        Some("MOVED" | "ASK" | "TRYAGAIN" | "CLUSTERDOWN")
    ) || err.kind() == redis::ErrorKind::ClusterConnectionNotFound
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(conn) => conn.req_packed_command(cmd),
            Conn::Cluster(link) => {
                let link = link.clone();
                Box::pin(async move {
                    link.retrying(
                        |mut conn| async move { conn.req_packed_command(cmd).await },
                        Some(cmd),
                    )
                    .await
                })
            }
            Conn::Sentinel(link) => link.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(link) => {
                let link = link.clone();
                Box::pin(async move {
                    link.retrying(
                        |mut conn| async move {
                            conn.req_packed_commands(pipeline, offset, count).await
                        },
                        None,
                    )
                    .await
                })
            }
            Conn::Sentinel(link) => link.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(conn) => conn.get_db(),
            Conn::Cluster(_) => 0,
            Conn::Sentinel(link) => link.db(),
        }
    }
}

/// A cluster client on `seeds` with these timeouts, RESP2, and no internal retries (see
/// the module's header for why).
pub(crate) fn cluster_client(
    cluster: &ClusterTarget,
    settings: Settings,
) -> redis::cluster::ClusterClientBuilder {
    let builder = redis::cluster::ClusterClientBuilder::new(cluster.seeds.clone())
        .connection_timeout(settings.connect_timeout)
        .response_timeout(settings.response_timeout)
        .retries(0);
    #[cfg(feature = "tls")]
    let builder = match &cluster.certs {
        Some(certs) => builder.certs(certs.clone()),
        None => builder,
    };
    builder
}

/// A cluster connection that is rebuilt from the seeds when the topology moved.
pub(crate) struct ClusterLink {
    target: ClusterTarget,
    settings: Settings,
    current: Mutex<(u64, ClusterConnection)>,
    rebuilding: tokio::sync::Mutex<Instant>,
    changed: watch::Sender<u64>,
}

/// How soon after one rebuild another may start: a dead node makes every in-flight call
/// fail at once, and one rebuild serves them all.
const MIN_REBUILD_GAP: Duration = Duration::from_millis(250);
/// Attempts for a call that failed with a redirection or cluster-down error.
const REDIRECT_ATTEMPTS: u32 = 6;

impl ClusterLink {
    async fn connect(target: ClusterTarget, settings: Settings) -> Result<ClusterLink, RedisError> {
        let conn = Self::build(&target, settings).await?;
        Ok(ClusterLink {
            target,
            settings,
            current: Mutex::new((0, conn)),
            rebuilding: tokio::sync::Mutex::new(Instant::now()),
            changed: watch::channel(0).0,
        })
    }

    async fn build(
        target: &ClusterTarget,
        settings: Settings,
    ) -> Result<ClusterConnection, RedisError> {
        cluster_client(target, settings)
            .build()?
            .get_async_connection()
            .await
    }

    fn generation(&self) -> u64 {
        self.current.lock().0
    }

    pub(crate) fn snapshot(&self) -> (u64, ClusterConnection) {
        let current = self.current.lock();
        (current.0, current.1.clone())
    }

    /// Runs `send` on the current connection. Redirections and cluster-down errors are
    /// retried a few times (nothing ran); errors that suggest the node is gone start a
    /// rebuild in the background and are returned as they are (the caller must find out
    /// whether its command ran). An `ASK` (the key's slot is being migrated and the key
    /// is not on the old node) is followed for `single`: `ASKING` and the command, in one
    /// pipeline to the node named.
    async fn retrying<T, F, Fut>(
        self: &Arc<Self>,
        send: F,
        single: Option<&Cmd>,
    ) -> Result<T, RedisError>
    where
        F: Fn(ClusterConnection) -> Fut,
        Fut: std::future::Future<Output = Result<T, RedisError>>,
        T: FromAsked,
    {
        let mut attempt = 0;
        loop {
            let (generation, conn) = self.snapshot();
            match send(conn.clone()).await {
                Ok(value) => return Ok(value),
                Err(err) if err.code() == Some("ASK") && single.is_some() => {
                    attempt += 1;
                    let (Some(cmd), Some((addr, _slot))) = (single, err.redirect_node()) else {
                        return Err(err);
                    };
                    match asking(conn, cmd, addr).await {
                        Ok(value) => return Ok(T::from_asked(value)),
                        Err(err) if did_not_run_retry_soon(&err) && attempt < REDIRECT_ATTEMPTS => {
                            tokio::time::sleep(Duration::from_millis(10 << attempt.min(5))).await;
                        }
                        Err(err) => return Err(err),
                    }
                }
                Err(err) => {
                    attempt += 1;
                    if suggests_topology_change(&err) {
                        self.rebuild_in_background(generation);
                    }
                    if !did_not_run_retry_soon(&err) || attempt >= REDIRECT_ATTEMPTS {
                        return Err(err);
                    }
                    tokio::time::sleep(Duration::from_millis(10 << attempt.min(5))).await;
                }
            }
        }
    }

    pub(crate) fn rebuild_in_background(self: &Arc<Self>, seen: u64) {
        let link = Arc::downgrade(self);
        tokio::spawn(async move {
            if let Some(link) = link.upgrade() {
                link.rebuild(seen).await;
            }
        });
    }

    /// Replaces the connection with a fresh one from the seeds, unless another rebuild
    /// already replaced generation `seen`.
    async fn rebuild(&self, seen: u64) {
        let mut last = self.rebuilding.lock().await;
        if self.generation() != seen {
            return;
        }
        let wait = MIN_REBUILD_GAP.saturating_sub(last.elapsed());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        *last = Instant::now();
        match Self::build(&self.target, self.settings).await {
            Ok(conn) => {
                let generation = {
                    let mut current = self.current.lock();
                    current.0 += 1;
                    current.1 = conn;
                    current.0
                };
                tracing::info!(generation, "cluster: connection rebuilt from the seeds");
                self.changed.send_replace(generation);
            }
            Err(err) => {
                tracing::warn!(error = %err, "cluster: rebuilding the connection failed");
            }
        }
    }
}
