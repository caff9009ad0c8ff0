//! Connecting to Redis with the global options.

use std::time::Duration;

use redis_locks::{DEFAULT_WATCHDOG_TIMEOUT, LockClient};

use crate::args::Global;
use crate::exit::Failure;

/// A lock client for `--url` and `--prefix`, with the given watchdog lease (`None`: the
/// library's default; it matters only to commands that take locks).
pub async fn client(global: &Global, watchdog: Option<Duration>) -> Result<LockClient, Failure> {
    let client = LockClient::builder(&global.url)
        .prefix(global.prefix.as_str())
        .watchdog_timeout(watchdog.unwrap_or(DEFAULT_WATCHDOG_TIMEOUT))
        .connect()
        .await?;
    tracing::debug!(client = client.id(), prefix = client.prefix(), "connected");
    Ok(client)
}
