//! What every connection of a topology shares: the timeouts it is built with, and the
//! reading of an error as a sign that the topology changed (so `conn.rs` and `sentinel.rs`
//! both depend on this, not on each other).

use std::time::Duration;

use redis::RedisError;
use redis::aio::ConnectionManagerConfig;

/// Timeouts a connection is built with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    pub(crate) connect_timeout: Duration,
    pub(crate) response_timeout: Duration,
}

impl Settings {
    pub(crate) fn manager_config(&self) -> ConnectionManagerConfig {
        ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.response_timeout))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(500))
    }
}

/// Whether an error means the connection may point at the wrong node, so the topology
/// should be looked up again.
pub(crate) fn suggests_topology_change(err: &RedisError) -> bool {
    err.is_io_error()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || err.is_timeout()
        || matches!(err.code(), Some("READONLY" | "CLUSTERDOWN" | "MASTERDOWN"))
        || err.kind() == redis::ErrorKind::ClusterConnectionNotFound
}
