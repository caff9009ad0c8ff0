//! Following a Sentinel-managed primary.
//!
//! redis-rs's Sentinel support resolves the primary when a connection is made, and then
//! never again (its issue #1438): after a failover a long-lived connection keeps talking
//! to the old primary, which is dead, or demoted and answering writes with `READONLY`.
//! Here the primary is looked up again
//! - when a command fails in a way that suggests the primary moved (connection errors,
//!   `READONLY`, `MASTERDOWN`), and
//! - every second in the background, which catches a failover while idle, and a demoted
//!   primary that still accepts connections.
//!
//! When the sentinels name another primary, a new `ConnectionManager` replaces the old
//! one and the generation is bumped; the pub/sub hub reconnects on that, and the
//! watchdog's next call goes to the new primary. A failed call is not re-sent here: the
//! protocol core decides, because the call may have run on the old primary.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{Cmd, Pipeline, RedisError, RedisFuture, Value};
use tokio::sync::watch;

use super::SentinelTarget;
use super::conn::{Settings, suggests_topology_change};

/// How often the primary is looked up while nothing fails.
const POLL_INTERVAL: Duration = Duration::from_secs(1);
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
    sentinel: tokio::sync::Mutex<(SentinelClient, Instant)>,
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
        let mut sentinel = sentinel_client(&target)?;
        let client = tokio::time::timeout(settings.connect_timeout, sentinel.async_get_client())
            .await
            .map_err(|_| timed_out("no sentinel named the primary in time"))??;
        let addr = client.get_connection_info().addr().to_string();
        let conn =
            ConnectionManager::new_with_config(client.clone(), settings.manager_config()).await?;
        let shared = Arc::new(Shared {
            target,
            settings,
            sentinel: tokio::sync::Mutex::new((sentinel, Instant::now())),
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
        let mut sentinel = self.sentinel.lock().await;
        if let Some(seen) = seen
            && (self.current.lock().generation != seen || sentinel.1.elapsed() < MIN_LOOKUP_GAP)
        {
            return;
        }
        sentinel.1 = Instant::now();
        let client = match tokio::time::timeout(
            self.settings.connect_timeout,
            sentinel.0.async_get_client(),
        )
        .await
        {
            Ok(Ok(client)) => client,
            Ok(Err(err)) => {
                tracing::warn!(error = %err, "sentinel: no primary named");
                return;
            }
            Err(_) => {
                tracing::warn!("sentinel: no answer naming the primary in time");
                return;
            }
        };
        drop(sentinel);
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

/// Looks the primary up every [`POLL_INTERVAL`] until the client is gone.
async fn poll(shared: Weak<Shared>) {
    loop {
        tokio::time::sleep(POLL_INTERVAL).await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        shared.look_up(None).await;
    }
}

fn sentinel_client(target: &SentinelTarget) -> Result<SentinelClient, RedisError> {
    let addrs = target.sentinels.iter().map(|(host, port)| {
        if target.tls {
            redis::ConnectionAddr::TcpTls {
                host: host.clone(),
                port: *port,
                insecure: false,
                tls_params: None,
            }
        } else {
            redis::ConnectionAddr::Tcp(host.clone(), *port)
        }
    });
    let mut builder =
        SentinelClientBuilder::new(addrs, &target.service, SentinelServerType::Master)?
            .set_client_to_redis_db(target.db);
    if let Some(username) = &target.username {
        builder = builder.set_client_to_redis_username(username);
    }
    if let Some(password) = &target.password {
        builder = builder.set_client_to_redis_password(password);
    }
    if target.tls {
        builder = builder
            .set_client_to_redis_tls_mode(redis::TlsMode::Secure)
            .set_client_to_sentinel_tls_mode(redis::TlsMode::Secure);
    }
    #[cfg(feature = "tls")]
    if let Some(certs) = &target.certs {
        builder = builder
            .set_client_to_redis_certificates(certs.clone())
            .set_client_to_sentinel_certificates(certs.clone());
    }
    builder.build()
}

fn timed_out(what: &str) -> RedisError {
    std::io::Error::new(std::io::ErrorKind::TimedOut, what.to_owned()).into()
}
