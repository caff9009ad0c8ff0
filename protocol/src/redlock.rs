//! RedLock's decisions over N independent servers, sans I/O: the quorum, how long a
//! server may take, when an attempt is decided without the servers still running (and how
//! long they get first), whether an attempt won, the validity it leaves, when too few servers
//! answer, and when a held RedLock is lost. The per-server holds are ordinary reentrant
//! lock holds ([`super::attempt::AttemptOp`] and friends, one lane per server).

use super::Millis;
use super::planted::{self, Defect};

/// How many of `servers` must hold the lock: N/2 + 1.
pub fn quorum(servers: usize) -> usize {
    if planted::is(Defect::RedlockHalfIsAMajority) {
        return servers.div_ceil(2);
    }
    servers / 2 + 1
}

/// The margin for clock drift between the client and the servers over a lease: 1 % of it
/// plus 2 ms (the RedLock rule).
pub fn drift(lease_ms: Millis) -> Millis {
    lease_ms / 100 + 2
}

/// How long one server's attempt may take before it is left out: a tenth of the lease,
/// at least 50 ms, at most the response timeout (a server that does not answer must not
/// eat the validity).
pub fn server_limit(lease_ms: Millis, response_timeout_ms: Millis) -> Millis {
    (lease_ms / 10).max(50).min(response_timeout_ms)
}

/// The least grace the servers still running get once a majority granted
/// ([`late_grace`]).
pub const MIN_LATE_GRACE_MS: Millis = 5;

/// Whether an attempt may be decided before every server answered: once `granted` of
/// `servers` granted a majority. The others still get [`late_grace`]; then they are left
/// out, and a hold one of them still wins is given back (in the background: the left-out
/// server's attempt runs on in its lane, and its hold is released as soon as it is won).
pub fn may_decide_early(granted: usize, servers: usize) -> bool {
    if planted::is(Defect::RedlockDecidesBeforeMajority) {
        return granted + 1 >= quorum(servers);
    }
    granted >= quorum(servers)
}

/// How long the servers still running get once a majority granted, given how long the
/// majority took (`majority_took_ms`, since the attempt started): as long again, at least
/// [`MIN_LATE_GRACE_MS`]. A stalled server must not hold every acquire up for its whole
/// timeout, and one that is merely a little slower than the others still counts.
pub fn late_grace(majority_took_ms: Millis) -> Millis {
    majority_took_ms.max(MIN_LATE_GRACE_MS)
}

/// The time an attempt spent, as far as its validity goes: since it started
/// (`attempt_elapsed_ms`), or since the lease of a granted hold started, whichever is
/// longer. A hold adopted from an earlier attempt's lost request was taken before this
/// attempt started, and its lease runs out that much earlier (found by the RedLock
/// checker, `tests/redlock_check.rs`).
pub fn elapsed(
    attempt_elapsed_ms: Millis,
    granted_ages_ms: impl IntoIterator<Item = Millis>,
) -> Millis {
    if planted::is(Defect::RedlockElapsedFromAttempt) {
        return attempt_elapsed_ms;
    }
    granted_ages_ms
        .into_iter()
        .fold(attempt_elapsed_ms, Millis::max)
}

/// What an attempt over every server won.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Won {
    /// A majority granted it and this much validity is left, counted from the moment of
    /// the decision.
    Acquired {
        /// `lease − elapsed − drift`, in ms.
        validity_ms: Millis,
    },
    /// Too few granted, or nothing is left of the lease: give every hold back.
    GiveBack,
}

/// Decides an attempt that started `elapsed_ms` ago: `granted` of the servers granted a
/// hold with (at least) `lease_ms`.
pub fn decide(granted: usize, servers: usize, lease_ms: Millis, elapsed_ms: Millis) -> Won {
    let margin = if planted::is(Defect::RedlockDriftIgnored) {
        0
    } else {
        drift(lease_ms)
    };
    let validity = lease_ms
        .checked_sub(elapsed_ms)
        .and_then(|left| left.checked_sub(margin))
        .filter(|left| *left > 0);
    match validity {
        Some(validity_ms) if granted >= quorum(servers) => Won::Acquired { validity_ms },
        _ => Won::GiveBack,
    }
}

/// The pause before the next attempt after one that lost (the majority is held
/// elsewhere): at random below `retry_delay_ms` (`jitter`: any random number), so that
/// contending clients do not retry in step.
pub fn retry_pause(retry_delay_ms: Millis, jitter: u64) -> Millis {
    jitter % retry_delay_ms.max(1)
}

/// Whether an attempt's failures mean a majority cannot be had now: more servers failed
/// (errors, no answer in time, not connected) than may fail.
pub fn no_quorum(failed: usize, servers: usize) -> bool {
    failed > servers - quorum(servers)
}

/// What a RedLock's release found, over its members' releases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Released {
    /// A majority were given back while held: the lock was held to the end.
    Majority,
    /// So many members were found lost that fewer than a majority were still held: the
    /// lock had been lost.
    Lost,
    /// Too few were given back, but not because they were lost (servers refused or did
    /// not answer): the servers' own error, never an invented loss.
    Failed,
}

/// Decides a release of `held` member holds, of which `released` were given back and
/// `lost` were found lost (the rest failed otherwise).
pub fn released(held: usize, released: usize, lost: usize, quorum: usize) -> Released {
    if released >= quorum {
        Released::Majority
    } else if held.saturating_sub(lost) < quorum {
        Released::Lost
    } else {
        Released::Failed
    }
}

/// How many of `held` holds must be lost before a RedLock held on them is lost: it is
/// held while at least `quorum` of them remain.
pub fn losses_tolerated(held: usize, quorum: usize) -> usize {
    (held + 1).saturating_sub(quorum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_majority_with_validity_left_wins() {
        assert_eq!(quorum(5), 3);
        assert_eq!(quorum(4), 3);
        assert_eq!(
            decide(3, 5, 1_000, 100),
            Won::Acquired {
                validity_ms: 1_000 - 100 - 12
            }
        );
        assert_eq!(decide(2, 5, 1_000, 100), Won::GiveBack);
        assert_eq!(decide(3, 5, 1_000, 990), Won::GiveBack);
        assert!(no_quorum(3, 5));
        assert!(!no_quorum(2, 5));
        assert_eq!(losses_tolerated(3, quorum(5)), 1);
        assert_eq!(losses_tolerated(5, quorum(5)), 3);
        assert_eq!(server_limit(30_000, 2_000), 2_000);
        assert_eq!(server_limit(100, 2_000), 50);
    }

    #[test]
    fn the_others_get_as_long_again_once_a_majority_granted() {
        assert!(!may_decide_early(1, 3));
        assert!(may_decide_early(2, 3));
        assert!(!may_decide_early(2, 4));
        assert!(may_decide_early(3, 4));
        assert!(!may_decide_early(0, 1));
        assert!(may_decide_early(1, 1));
        assert_eq!(late_grace(0), MIN_LATE_GRACE_MS);
        assert_eq!(late_grace(3), MIN_LATE_GRACE_MS);
        assert_eq!(late_grace(40), 40);
    }

    #[test]
    fn a_release_reports_a_loss_only_when_a_majority_was_lost() {
        assert_eq!(released(5, 3, 0, 3), Released::Majority);
        assert_eq!(released(5, 2, 3, 3), Released::Lost);
        // Three servers refused (NOPERM): a majority may still hold it.
        assert_eq!(released(5, 2, 0, 3), Released::Failed);
        assert_eq!(released(5, 0, 2, 3), Released::Failed);
        assert_eq!(released(3, 1, 2, 2), Released::Lost);
    }
}
