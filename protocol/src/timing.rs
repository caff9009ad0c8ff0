//! The driver's timing decisions, in one place: how long a guard's release keeps
//! retrying and how long its caller waits for it, how long a count-down is re-sent, and
//! the watchdog's schedule (when a tick whose calls failed is retried, how long one
//! renewal call may take, how many ticks may run at once). The async layer asks these
//! and decides nothing of its own; the checkers' models ask the same functions.

use super::Millis;
use super::hold::HoldState;

/// How many response timeouts a guard's `release()` waits for its outcome before it
/// leaves the release to a background task (which goes on until
/// [`release_give_up_at`]).
pub const RELEASE_CALLER_WAIT_RESPONSES: u32 = 4;

/// Until when a release of one of `hold`'s guards, starting at `now`, keeps retrying: the
/// lease as last confirmed (after it, the hold is gone anyway), and at least two response
/// timeouts (a hold about to expire is still given back when Redis answers at once).
pub fn release_give_up_at(hold: &HoldState, now: Millis, response_ms: Millis) -> Millis {
    hold.release_until(now, response_ms.saturating_mul(2))
}

/// Until when a count-down starting at `now` is re-sent through lost replies and
/// transient states: the longer of the watchdog and response timeouts (it is exactly
/// once by its request id, so re-sending is safe for as long as it may take).
pub fn count_down_give_up_at(now: Millis, watchdog_ms: Millis, response_ms: Millis) -> Millis {
    now.saturating_add(watchdog_ms.max(response_ms))
}

/// How soon a watchdog tick with failed calls is followed by another one: a quarter of
/// the period, between 50 ms and 500 ms (renewing is idempotent, and a short lease can
/// then outlast a failover).
pub fn tick_retry_after(period_ms: Millis) -> Millis {
    (period_ms / 4).clamp(50, 500)
}

/// How long one renewal call may take: the response timeout, and at most a third of the
/// lease (two renewals can then fail before it runs out). Not the check interval: a short
/// interval must not make a slow but successful renewal look like a failure.
pub fn renewal_call_timeout(response_ms: Millis, lease_ms: Millis) -> Millis {
    response_ms.min(lease_ms / 3)
}

/// How many watchdog ticks may run at once; a tick due while this many still run is
/// skipped (with a warning), so a slow Redis does not pile up renewals.
pub const MAX_TICKS_IN_FLIGHT: usize = 2;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_retries_within_bounds() {
        assert_eq!(tick_retry_after(100), 50);
        assert_eq!(tick_retry_after(1_000), 250);
        assert_eq!(tick_retry_after(10_000), 500);
        assert_eq!(renewal_call_timeout(3_000, 30_000), 3_000);
        assert_eq!(renewal_call_timeout(3_000, 3_000), 1_000);
        assert_eq!(count_down_give_up_at(10, 30_000, 3_000), 30_010);
    }
}
