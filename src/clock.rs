//! The driver's monotonic clock: the core counts time in milliseconds since the client
//! started ([`Millis`]); this maps them to tokio's instants and back.

use std::time::Duration;

use tokio::time::Instant;

use crate::protocol::Millis;

/// The driver's monotonic clock, in the core's milliseconds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    epoch: Instant,
}

impl Clock {
    pub(crate) fn new() -> Self {
        Clock {
            epoch: Instant::now(),
        }
    }

    pub(crate) fn now(&self) -> Millis {
        self.epoch.elapsed().as_millis() as Millis
    }

    pub(crate) fn instant(&self, at: Millis) -> Instant {
        self.epoch + Duration::from_millis(at)
    }

    /// `instant` on this clock, rounded up to the next millisecond.
    pub(crate) fn ceil(&self, instant: Instant) -> Millis {
        let since = instant.saturating_duration_since(self.epoch);
        since.as_millis() as Millis + u64::from(since.subsec_nanos() % 1_000_000 != 0)
    }
}
