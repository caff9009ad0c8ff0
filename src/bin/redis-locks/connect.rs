//! Connecting to Redis with the global options.

use std::time::Duration;

use redis_locks::{DEFAULT_WATCHDOG_TIMEOUT, LockClient};

use crate::args::Global;

/// How often `run` renews or checks its lock (at most a third of the watchdog lease).
const CHECK_INTERVAL: Duration = Duration::from_secs(1);
use crate::exit::Failure;

/// A lock client for `--url` and `--prefix`, with the given watchdog lease (`None`: the
/// library's default; it matters only to commands that take locks).
pub async fn client(global: &Global, watchdog: Option<Duration>) -> Result<LockClient, Failure> {
    let timeout = watchdog.unwrap_or(DEFAULT_WATCHDOG_TIMEOUT);
    // One lock per process: checking it every second is cheap, and a command under a lost
    // lock (even one with a long --lease) is stopped within about a second.
    let check = CHECK_INTERVAL.min(timeout / 3);
    // clap uses the default only when no --url is given.
    let urls: Vec<&String> = global.url.iter().collect();
    let builder = if global.cluster {
        LockClient::builder_cluster(urls)
    } else if let [url] = urls.as_slice() {
        LockClient::builder(url)
    } else {
        return Err(Failure::usage(
            "several --url given: add --cluster if they are seed nodes of one Redis Cluster",
        ));
    };
    let builder = builder.spin_wait(global.spin);
    let builder = match &global.sentinel_password {
        Some(password) => builder.sentinel_auth(None, password),
        None => builder,
    };
    let builder = match global.min_replicas {
        Some(n) => builder.min_replicas(n, global.replica_timeout),
        None => builder,
    };
    let client = builder
        .prefix(global.prefix.as_str())
        .watchdog_timeout(timeout)
        .check_interval(check)
        .connect()
        .await?;
    tracing::debug!(client = client.id(), prefix = client.prefix(), "connected");
    Ok(client)
}
