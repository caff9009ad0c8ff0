//! Giving back one hold, exactly once.
//!
//! One [`ReleaseOp`] is one logical release: every retry sends the same request id, so the
//! script applies it at most once (`lua/release.lua`). It names the hold, so it can never
//! give back a newer hold of the same owner. Its outcome is true: `Released` only when
//! this release gave the hold back; a retry that finds the hold gone after an attempt
//! whose reply was lost cannot know whether that attempt did it, and says so
//! (`Unconfirmed`) instead of claiming success.

use std::sync::Arc;

use super::hold::Rearm;
use super::{Call, Failure, LockKeys, Millis, Reply, ScriptId, backoff};

/// One release in progress.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReleaseOp {
    owner: Arc<str>,
    hold: Arc<str>,
    request: String,
    give_up_at: Millis,
    attempts: u32,
    may_have_run: bool,
    rearm: Option<Rearm>,
}

/// How a release ended.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ReleaseOutcome {
    /// This release gave the hold back; `remaining` holds of the owner remain (0: the lock
    /// was freed), `None` when a retry found its own earlier attempt applied.
    Released {
        /// Holds left, when known.
        remaining: Option<u64>,
    },
    /// The hold had already ended before this release (nothing was written).
    NotHeld,
    /// An attempt's reply was lost and the hold is gone now: that attempt gave it back, or
    /// the hold had ended before. Nothing else was touched.
    Unconfirmed,
    /// The key is not one of our locks.
    NotALock,
    /// Redis could not be reached before the hold's lease ran out, or answered with a
    /// permanent error.
    Failed(Failure),
}

/// The next step of a release.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ReleaseStep {
    /// Finished.
    Done(ReleaseOutcome),
    /// Send the same call again at this time.
    RetryAt(Millis),
}

impl ReleaseOp {
    /// A release of `hold` (held by `owner`) with request id `request`. Retries stop at
    /// `give_up_at`: by then the hold has expired anyway.
    pub fn new(owner: Arc<str>, hold: Arc<str>, request: String, give_up_at: Millis) -> Self {
        ReleaseOp {
            owner,
            hold,
            request,
            give_up_at,
            attempts: 0,
            may_have_run: false,
            rearm: None,
        }
    }

    /// The same release, re-arming the expiry if it is partial (see
    /// [`HoldState::prepare_rearm`](super::hold::HoldState::prepare_rearm)).
    pub fn with_rearm(mut self, rearm: Option<Rearm>) -> Self {
        self.rearm = rearm;
        self
    }

    /// The hold being released.
    pub fn hold(&self) -> &Arc<str> {
        &self.hold
    }

    /// The request id every attempt sends.
    pub fn request(&self) -> &str {
        &self.request
    }

    /// How many attempts failed so far (0: the first attempt is the only one).
    pub fn retries(&self) -> u32 {
        self.attempts
    }

    /// The `release.lua` call; the same for every attempt.
    pub fn call(&self, keys: &LockKeys) -> Call {
        Call {
            script: ScriptId::Release,
            keys: vec![keys.hash.clone()],
            args: {
                // '<tag>.<seq>': sent in two parts, so the script need not parse it.
                let (tag, seq) = self
                    .request
                    .rsplit_once('.')
                    .unwrap_or((self.request.as_str(), ""));
                let (ms, expected) = self.rearm.map_or((0, 0), |r| (r.ms, r.expected));
                vec![
                    self.owner.clone(),
                    self.hold.clone(),
                    tag.into(),
                    seq.into(),
                    keys.channel.clone(),
                    ms.to_string().into(),
                    expected.to_string().into(),
                    keys.publish_flag(),
                ]
            },
        }
    }

    /// Reads `release.lua`'s reply.
    pub fn on_reply(&self, reply: &Reply) -> Result<ReleaseOutcome, String> {
        match reply.int() {
            Some(n) if n >= 0 => Ok(ReleaseOutcome::Released {
                remaining: Some(n as u64),
            }),
            Some(-3) => Ok(ReleaseOutcome::Released { remaining: None }),
            Some(-1) if self.may_have_run => Ok(ReleaseOutcome::Unconfirmed),
            Some(-1) => Ok(ReleaseOutcome::NotHeld),
            Some(-2) => Ok(ReleaseOutcome::NotALock),
            _ => Err(format!("release: {reply:?}")),
        }
    }

    /// An attempt got no reply at `now`.
    pub fn on_failure(&mut self, failure: &Failure, now: Millis, jitter: u64) -> ReleaseStep {
        if failure.may_have_run() {
            self.may_have_run = true;
        }
        if matches!(failure, Failure::Permanent(_)) || now >= self.give_up_at {
            return ReleaseStep::Done(if self.may_have_run {
                ReleaseOutcome::Unconfirmed
            } else {
                ReleaseOutcome::Failed(failure.clone())
            });
        }
        self.attempts += 1;
        ReleaseStep::RetryAt((now + backoff(self.attempts, jitter)).min(self.give_up_at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op() -> ReleaseOp {
        ReleaseOp::new("o".into(), "c.1".into(), "c.2".into(), 1_000)
    }

    #[test]
    fn a_gone_hold_is_not_held_first_and_unconfirmed_after_a_lost_reply() {
        let mut release = op();
        assert_eq!(
            release.on_reply(&Reply::Int(-1)),
            Ok(ReleaseOutcome::NotHeld)
        );
        assert!(matches!(
            release.on_failure(&Failure::Lost, 10, 0),
            ReleaseStep::RetryAt(_)
        ));
        assert_eq!(
            release.on_reply(&Reply::Int(-1)),
            Ok(ReleaseOutcome::Unconfirmed)
        );
        assert_eq!(
            release.on_reply(&Reply::Int(-3)),
            Ok(ReleaseOutcome::Released { remaining: None })
        );
    }

    #[test]
    fn transient_errors_are_retried_until_the_lease_is_over() {
        let mut release = op();
        let busy = Failure::Transient("BUSY".into());
        assert!(matches!(
            release.on_failure(&busy, 10, 0),
            ReleaseStep::RetryAt(_)
        ));
        assert_eq!(
            release.on_failure(&busy, 1_000, 0),
            ReleaseStep::Done(ReleaseOutcome::Failed(busy))
        );
    }
}
