//! The one back-off policy: pauses that double from a first one up to a cap, each plus up
//! to half of it again at random (so that clients retrying together spread out). The
//! randomness is injected: the core draws none.
//!
//! Every retry loop of the library takes its pauses from here, with the parameters of its
//! situation ([`Backoff::RETRY`], [`Backoff::WAITER_ERRORS`], [`Backoff::SPIN`],
//! [`Backoff::RESEND`]).

/// Microseconds.
pub type Micros = u64;

/// A sequence of pauses.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Backoff {
    next: Micros,
    cap: Micros,
}

impl Backoff {
    /// A retry after a lost reply or a transient server state (releases, probes, the first
    /// attempt of an acquire): 25 ms doubling to 1 s.
    pub const RETRY: Backoff = Backoff::new(25_000, 1_000_000);
    /// A waiter riding out Redis errors: 50 ms doubling to 1 s.
    pub const WAITER_ERRORS: Backoff = Backoff::new(50_000, 1_000_000);
    /// A waiter polling without wake-ups (spin mode, or SUBSCRIBE refused): 1 ms doubling
    /// to 128 ms.
    pub const SPIN: Backoff = Backoff::new(1_000, 128_000);
    /// An idempotent call re-sent as it was, and reads: 20 ms doubling to 500 ms.
    pub const RESEND: Backoff = Backoff::new(20_000, 500_000);

    /// Pauses from `first` doubling up to `cap` (in µs).
    pub const fn new(first: Micros, cap: Micros) -> Self {
        Backoff { next: first, cap }
    }

    /// The next pause without its random part (what the following [`Backoff::pause`]
    /// is at least).
    pub fn base(&self) -> Micros {
        self.next
    }

    /// The next pause: the base plus up to half of it from `jitter` (any random number).
    pub fn pause(&mut self, jitter: u64) -> Micros {
        let base = self.next;
        self.next = self.next.saturating_mul(2).min(self.cap);
        base + jitter % (base / 2 + 1)
    }

    /// The next pause in whole milliseconds, rounded up.
    pub fn pause_ms(&mut self, jitter: u64) -> super::Millis {
        self.pause(jitter).div_ceil(1_000)
    }

    /// Starts over from the first pause (`first`: the preset's first pause).
    pub fn reset(&mut self, first: &Backoff) {
        self.next = first.next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_to_the_cap_with_at_most_half_again() {
        let mut spin = Backoff::SPIN;
        assert_eq!(spin.pause(0), 1_000);
        assert_eq!(spin.pause(u64::MAX), 2_000 + u64::MAX % 1_001);
        for _ in 0..10 {
            spin.pause(0);
        }
        assert_eq!(spin.base(), 128_000);
        assert!(spin.pause(u64::MAX) <= 192_000);
        let mut retry = Backoff::RETRY;
        assert_eq!(retry.pause_ms(0), 25);
        retry.reset(&Backoff::RETRY);
        assert_eq!(retry.base(), 25_000);
    }
}
