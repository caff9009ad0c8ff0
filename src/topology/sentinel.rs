//! Following a Sentinel-managed primary.
//!
//! redis-rs's Sentinel support resolves the primary when a connection is made, and then
//! never again (its issue #1438): after a failover a long-lived connection keeps talking
//! to the old primary, which is dead, or demoted and answering writes with `READONLY`.
//! Here the primary is looked up again
//! - when a command fails in a way that suggests the primary moved (connection errors,
//!   `READONLY`, `MASTERDOWN`), and
//! - when a sentinel announces `+switch-master` for the service (the client stays
//!   subscribed on one sentinel), and every 5 s in the background as a safety net for a
//!   missed announcement; both catch a failover while idle, and a demoted primary that
//!   still accepts connections.
//!
//! When the sentinels name another primary, a new `ConnectionManager` replaces the old
//! one and the generation is bumped; the pub/sub hub reconnects on that, and the
//! watchdog's next call goes to the new primary. A failed call is not re-sent here: the
//! protocol core decides, because the call may have run on the old primary.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::{
    AsyncConnectionConfig, Cmd, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, Pipeline,
    RedisConnectionInfo, RedisError, RedisFuture, Value,
};
use tokio::sync::watch;

use super::SentinelTarget;
use super::settings::{Settings, suggests_topology_change};

/// How often the primary is looked up while nothing fails and no announcement came.
const POLL_INTERVAL: Duration = Duration::from_secs(5);
/// How soon after one lookup an error may trigger another.
const MIN_LOOKUP_GAP: Duration = Duration::from_millis(200);

/// A connection to the current primary. Cheap to clone.
#[derive(Clone)]
pub(crate) struct SentinelConn {
    shared: Arc<Shared>,
}

struct Shared {
    target: SentinelTarget,
    settings: Settings,
    /// Serialises lookups; the time of the last one.
    looking_up: tokio::sync::Mutex<Instant>,
    current: Mutex<Current>,
    changed: watch::Sender<u64>,
}

struct Current {
    generation: u64,
    addr: String,
    client: redis::Client,
    conn: ConnectionManager,
}

impl SentinelConn {
    pub(crate) async fn connect(
        target: SentinelTarget,
        settings: Settings,
    ) -> Result<SentinelConn, RedisError> {
        let client = primary(&target, settings).await?;
        let addr = client.get_connection_info().addr().to_string();
        let conn =
            ConnectionManager::new_with_config(client.clone(), settings.manager_config()).await?;
        let shared = Arc::new(Shared {
            target,
            settings,
            looking_up: tokio::sync::Mutex::new(Instant::now()),
            current: Mutex::new(Current {
                generation: 0,
                addr,
                client,
                conn,
            }),
            changed: watch::channel(0).0,
        });
        tokio::spawn(poll(Arc::downgrade(&shared)));
        Ok(SentinelConn { shared })
    }

    pub(crate) fn generation(&self) -> watch::Receiver<u64> {
        self.shared.changed.subscribe()
    }

    pub(crate) fn primary_addr(&self) -> String {
        self.shared.current.lock().addr.clone()
    }

    /// A client for the current primary (the hub subscribes through it).
    pub(crate) fn primary_client(&self) -> redis::Client {
        self.shared.current.lock().client.clone()
    }

    pub(crate) fn db(&self) -> i64 {
        self.shared.target.db
    }

    fn snapshot(&self) -> (u64, ConnectionManager) {
        let current = self.shared.current.lock();
        (current.generation, current.conn.clone())
    }

    fn after_error(&self, seen: u64, err: &RedisError) {
        if suggests_topology_change(err) {
            let shared = Arc::downgrade(&self.shared);
            tokio::spawn(async move {
                if let Some(shared) = shared.upgrade() {
                    shared.look_up(Some(seen)).await;
                }
            });
        }
    }
}

impl ConnectionLike for SentinelConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let (generation, mut conn) = self.snapshot();
            let result = conn.req_packed_command(cmd).await;
            if let Err(err) = &result {
                self.after_error(generation, err);
            }
            result
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let (generation, mut conn) = self.snapshot();
            let result = conn.req_packed_commands(pipeline, offset, count).await;
            if let Err(err) = &result {
                self.after_error(generation, err);
            }
            result
        })
    }

    fn get_db(&self) -> i64 {
        self.shared.target.db
    }
}

impl Shared {
    /// Asks the sentinels for the primary and switches to it if it moved. With
    /// `Some(seen)`, does nothing when the connection was already replaced since
    /// generation `seen`, or when the last lookup was moments ago.
    async fn look_up(&self, seen: Option<u64>) {
        let mut last = self.looking_up.lock().await;
        if seen.is_some_and(|seen| {
            self.current.lock().generation != seen || last.elapsed() < MIN_LOOKUP_GAP
        }) {
            return;
        }
        *last = Instant::now();
        let client = match primary(&self.target, self.settings).await {
            Ok(client) => client,
            Err(err) => {
                tracing::warn!(error = %err, "sentinel: no primary named");
                return;
            }
        };
        drop(last);
        let addr = client.get_connection_info().addr().to_string();
        if addr == self.current.lock().addr {
            return;
        }
        let conn = match ConnectionManager::new_with_config(
            client.clone(),
            self.settings.manager_config(),
        )
        .await
        {
            Ok(conn) => conn,
            Err(err) => {
                tracing::warn!(error = %err, primary = %addr, "sentinel: cannot connect to the new primary");
                return;
            }
        };
        let generation = {
            let mut current = self.current.lock();
            current.generation += 1;
            current.addr = addr.clone();
            current.client = client;
            current.conn = conn;
            current.generation
        };
        tracing::warn!(primary = %addr, generation, "sentinel: following the new primary");
        self.changed.send_replace(generation);
    }
}

/// Follows the sentinels' `+switch-master` announcements (subscribed on one sentinel at
/// a time, moving to the next when it goes away), and looks the primary up every
/// [`POLL_INTERVAL`] as a safety net: an announcement is fire-and-forget, and may be
/// missed while this task reconnects. Ends once the client is gone.
async fn poll(shared: Weak<Shared>) {
    let (target, settings) = match shared.upgrade() {
        Some(shared) => (shared.target.clone(), shared.settings),
        None => return,
    };
    if target.sentinels.is_empty() {
        return;
    }
    let mut next_sentinel = 0usize;
    let mut backoff = Duration::from_millis(100);
    loop {
        let (host, port) = &target.sentinels[next_sentinel % target.sentinels.len()];
        next_sentinel += 1;
        let subscribed = async {
            let client = client_for(
                &target,
                address(&target, host, *port),
                sentinel_info(&target),
            )?;
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe("+switch-master").await?;
            Ok::<_, RedisError>(pubsub)
        };
        let mut pubsub = match tokio::time::timeout(settings.connect_timeout, subscribed).await {
            Ok(Ok(pubsub)) => {
                backoff = Duration::from_millis(100);
                Some(pubsub)
            }
            _ => None,
        };
        loop {
            let pause = if pubsub.is_some() {
                POLL_INTERVAL
            } else {
                backoff
            };
            let announced = async {
                match pubsub.as_mut() {
                    Some(pubsub) => {
                        let mut messages = pubsub.on_message();
                        futures_next(&mut messages).await
                    }
                    None => std::future::pending().await,
                }
            };
            let event = tokio::select! {
                message = announced => Some(message),
                _ = tokio::time::sleep(pause) => None,
            };
            let Some(shared) = shared.upgrade() else {
                return;
            };
            match event {
                // "<service> <old-ip> <old-port> <new-ip> <new-port>"
                Some(Some(message)) => {
                    let payload: String = message.get_payload().unwrap_or_default();
                    if payload.split(' ').next() == Some(target.service.as_str()) {
                        tracing::info!(%payload, "sentinel: +switch-master");
                        shared.look_up(None).await;
                    }
                }
                // The sentinel went away: look up now, then try the next one.
                Some(None) => {
                    shared.look_up(None).await;
                    break;
                }
                None => {
                    shared.look_up(None).await;
                    if pubsub.is_none() {
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                        break;
                    }
                }
            }
        }
    }
}

/// `StreamExt::next` without pulling in `futures`.
async fn futures_next<S: futures_core::Stream + Unpin>(stream: &mut S) -> Option<S::Item> {
    std::future::poll_fn(|cx| std::pin::Pin::new(&mut *stream).poll_next(cx)).await
}

/// Asks the sentinels, in order, for the primary of the service, and checks with `ROLE`
/// that the node named is a primary (a sentinel may lag behind a failover). Every
/// connection and reply is bounded by the client's own timeouts: redis-rs's
/// `SentinelClient` would use its defaults (1 s to connect, 500 ms per reply) whatever the
/// builder says, which makes a slow but working sentinel look down.
async fn primary(target: &SentinelTarget, settings: Settings) -> Result<redis::Client, RedisError> {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(settings.connect_timeout))
        .set_response_timeout(Some(settings.response_timeout));
    let mut last_error = None;
    for (host, port) in &target.sentinels {
        let sentinel = client_for(target, address(target, host, *port), sentinel_info(target))?;
        let named = async {
            let mut conn = sentinel
                .get_multiplexed_async_connection_with_config(&config)
                .await?;
            redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(&target.service)
                .query_async::<Option<(String, u16)>>(&mut conn)
                .await
        };
        let (primary_host, primary_port) = match named.await {
            Ok(Some(addr)) => addr,
            Ok(None) => {
                last_error = Some(RedisError::from((
                    redis::ErrorKind::MasterNameNotFoundBySentinel,
                    "the sentinel does not know the service",
                    format!("{host}:{port} has no primary for {:?}", target.service),
                )));
                continue;
            }
            Err(err) => {
                last_error = Some(err);
                continue;
            }
        };
        let mut redis_info = RedisConnectionInfo::default().set_db(target.db);
        if let Some(username) = &target.username {
            redis_info = redis_info.set_username(username);
        }
        if let Some(password) = &target.password {
            redis_info = redis_info.set_password(password);
        }
        let client = client_for(
            target,
            address(target, &primary_host, primary_port),
            redis_info,
        )?;
        let role = async {
            let mut conn = client
                .get_multiplexed_async_connection_with_config(&config)
                .await?;
            redis::cmd("ROLE").query_async::<Value>(&mut conn).await
        };
        match role.await {
            Ok(Value::Array(fields)) if matches!(fields.first(), Some(Value::BulkString(role)) if role == b"master") =>
            {
                return Ok(client);
            }
            Ok(other) => {
                last_error = Some(RedisError::from((
                    redis::ErrorKind::MasterNameNotFoundBySentinel,
                    "the node the sentinel named is not a primary",
                    format!("{primary_host}:{primary_port} answered ROLE with {other:?}"),
                )));
            }
            Err(err) => last_error = Some(err),
        }
    }
    Err(last_error.unwrap_or_else(|| timed_out("no sentinel to ask")))
}

/// How to log in to a sentinel: anonymously unless `sentinel_auth` was given.
fn sentinel_info(target: &SentinelTarget) -> RedisConnectionInfo {
    match &target.sentinel_auth {
        None => RedisConnectionInfo::default(),
        Some((username, password)) => {
            let info = RedisConnectionInfo::default().set_password(password);
            match username {
                Some(username) => info.set_username(username),
                None => info,
            }
        }
    }
}

fn address(target: &SentinelTarget, host: &str, port: u16) -> ConnectionAddr {
    if target.tls {
        ConnectionAddr::TcpTls {
            host: host.to_owned(),
            port,
            insecure: false,
            tls_params: None,
        }
    } else {
        ConnectionAddr::Tcp(host.to_owned(), port)
    }
}

fn client_for(
    target: &SentinelTarget,
    addr: ConnectionAddr,
    redis_info: RedisConnectionInfo,
) -> Result<redis::Client, RedisError> {
    let info: ConnectionInfo = addr.into_connection_info()?.set_redis_settings(redis_info);
    #[cfg(feature = "tls")]
    if let Some(certs) = &target.certs {
        return redis::Client::build_with_tls(info, certs.clone());
    }
    #[cfg(not(feature = "tls"))]
    let _ = target;
    redis::Client::open(info)
}

fn timed_out(what: &str) -> RedisError {
    std::io::Error::new(std::io::ErrorKind::TimedOut, what.to_owned()).into()
}
