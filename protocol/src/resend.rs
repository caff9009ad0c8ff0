//! One idempotent call, re-sent *as it was* through lost replies, refused connections and
//! transient server states, and what a give-back of a sorted-set hold found.
//!
//! The kinds whose holds are sorted-set members (the read-write lock, the fair lock, the
//! semaphore) and the latch's count-down carry their own idempotency key in the call (a
//! hold id, a request id), so a copy that runs twice changes nothing more than one. Their
//! attempts, give-backs and reads are one [`Resend`] each; the decisions (what is retried,
//! how long, which send time a grant is confirmed from, whether a retry's "nothing there"
//! can be believed) are here, not in the driver.

use super::backoff::Backoff;
use super::planted::{self, Defect};
use super::{Call, Env, Failure, Machine, Millis, Next, Reply};

/// A reply to a re-sent call.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Resent {
    /// The reply.
    pub reply: Reply,
    /// When the first copy was sent: what a grant's lease is confirmed from (the copy that
    /// took it may be an earlier one whose reply was lost).
    pub first_sent_at: Millis,
    /// Whether an earlier copy may have run (a reply was lost): a reply that finds
    /// nothing cannot then tell whether that copy did it.
    pub after_loss: bool,
}

/// How a re-sent call ended without a reply.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GaveUp {
    /// The last failure.
    pub failure: Failure,
    /// Whether a copy may have run.
    pub after_loss: bool,
    /// When the first copy was sent (`None`: none was).
    pub first_sent_at: Option<Millis>,
}

/// The attempts of one acquisition of a sorted-set kind: each attempt is one [`Resend`] of
/// the same call (its hold id is its idempotency key), and the waiting loop may start a new
/// attempt after one that gave up with its outcome unknown. A copy of that earlier attempt
/// may have taken the hold, which the new attempt then finds: its grant must be confirmed
/// from the earlier attempt's first send, not its own (else a client believes a lease
/// longer than the one Redis set). A reply to a later attempt ends that doubt: the script
/// finds the hold under its id if any copy took it, so a refusal means none did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct SendHistory {
    /// The first send of an attempt whose outcome is unknown, since the last reply.
    unknown_since: Option<Millis>,
}

impl SendHistory {
    /// The next attempt: `call` re-sent until `give_up_at`, continuing the send history.
    pub fn resend(&self, call: Call, give_up_at: Millis) -> Resend {
        let mut resend = Resend::new(call, give_up_at);
        let remembered = self
            .unknown_since
            .filter(|_| !planted::is(Defect::AttemptsForgetEarlierSends));
        if let Some(since) = remembered {
            resend.first_sent_at = Some(since);
            resend.after_loss = true;
        }
        resend
    }

    /// An attempt ended: with a reply (`None`) or without one.
    pub fn ended(&mut self, gave_up: Option<&GaveUp>) {
        match gave_up {
            Some(gave_up) if gave_up.after_loss => {
                self.unknown_since = self.unknown_since.or(gave_up.first_sent_at);
            }
            Some(_) => {}
            None => self.unknown_since = None,
        }
    }
}

/// One call, re-sent until `give_up_at`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Resend {
    call: Call,
    give_up_at: Millis,
    backoff: Backoff,
    first_sent_at: Option<Millis>,
    after_loss: bool,
}

impl Resend {
    /// `call`, re-sent until `give_up_at` (on the driver's clock).
    pub fn new(call: Call, give_up_at: Millis) -> Self {
        Resend {
            call,
            give_up_at,
            backoff: Backoff::RESEND,
            first_sent_at: None,
            after_loss: false,
        }
    }

    fn send(&mut self, env: &mut dyn Env) -> Next<Result<Resent, GaveUp>> {
        if self.first_sent_at.is_none() || planted::is(Defect::ResendMovesSendTime) {
            self.first_sent_at = Some(env.now());
        }
        Next::Send(self.call.clone())
    }
}

impl Machine for Resend {
    type Ctx = ();
    type Outcome = Result<Resent, GaveUp>;

    fn start(&mut self, env: &mut dyn Env, _cx: &mut ()) -> Next<Self::Outcome> {
        self.send(env)
    }

    fn on_reply(&mut self, env: &mut dyn Env, _cx: &mut (), reply: &Reply) -> Next<Self::Outcome> {
        Next::Done(Ok(Resent {
            reply: reply.clone(),
            first_sent_at: self.first_sent_at.unwrap_or_else(|| env.now()),
            after_loss: self.after_loss,
        }))
    }

    fn on_failure(
        &mut self,
        env: &mut dyn Env,
        _cx: &mut (),
        failure: Failure,
    ) -> Next<Self::Outcome> {
        let retry = !matches!(failure, Failure::Permanent(_));
        let now = env.now();
        // The bound is checked against the pause without its random part, so a re-send
        // that fits is never dropped for the jitter's sake.
        let base_ms = self.backoff.base().div_ceil(1_000);
        if !retry || now.saturating_add(base_ms) > self.give_up_at {
            let after_loss = self.after_loss || failure.may_have_run();
            return Next::Done(Err(GaveUp {
                failure,
                after_loss,
                first_sent_at: self.first_sent_at,
            }));
        }
        self.after_loss |= failure.may_have_run();
        let pause = self.backoff.pause_ms(env.jitter());
        Next::SleepUntil(now + pause)
    }

    fn resume(&mut self, env: &mut dyn Env, _cx: &mut ()) -> Next<Self::Outcome> {
        self.send(env)
    }
}

/// What a give-back of a sorted-set hold (`rw_release.lua`, `fair_release.lua`,
/// `sem_release.lua`) found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GivenBack {
    /// This give-back removed the hold.
    Removed,
    /// Nothing of it was there, and no earlier copy ran: it had ended before.
    NotHeld,
    /// Nothing of it was there after a copy whose reply was lost: that copy removed it,
    /// or it had ended before; nobody can tell which.
    Unconfirmed,
    /// The key is not of the kind.
    NotALock,
}

/// Until when an acquire attempt of a sorted-set kind re-sends its call through lost
/// replies before it hands the failure to the waiting loop (which rides it out or reports
/// it): three response timeouts from `now`.
pub fn attempt_give_up_at(now: Millis, response_ms: Millis) -> Millis {
    now.saturating_add(response_ms.saturating_mul(3))
}

/// Until when a give-back re-sends: for as long as the hold could live (its lease, which
/// for a fixed lease may be longer than the watchdog's), and at least a watchdog lease and
/// a response timeout. A give-back that stopped earlier would leave the hold of an
/// abandoned acquire behind, an orphan until its lease ends ("no orphans").
pub fn give_back_give_up_at(
    now: Millis,
    lease_ms: Millis,
    watchdog_ms: Millis,
    response_ms: Millis,
) -> Millis {
    now.saturating_add(lease_ms.max(watchdog_ms).max(response_ms))
}

/// Reads a give-back's reply (the members it removed; -2: not of the kind). `hold_too`:
/// the call gave back a hold (not only a place in a queue or a reservation).
pub fn given_back(resent: &Resent, hold_too: bool) -> Result<GivenBack, String> {
    match resent.reply {
        Reply::Int(removed) if removed > 0 => Ok(GivenBack::Removed),
        Reply::Int(0) if planted::is(Defect::GiveBackClaimsGoneHold) && hold_too => {
            Ok(GivenBack::Removed)
        }
        Reply::Int(0) if resent.after_loss && hold_too => Ok(GivenBack::Unconfirmed),
        Reply::Int(0) => Ok(GivenBack::NotHeld),
        Reply::Int(-2) => Ok(GivenBack::NotALock),
        ref other => Err(format!("give-back: {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ScriptId;

    struct At(Millis);
    impl Env for At {
        fn now(&self) -> Millis {
            self.0
        }
        fn jitter(&mut self) -> u64 {
            0
        }
        fn next_id(&mut self) -> std::sync::Arc<str> {
            "c.1".into()
        }
    }

    fn call() -> Call {
        Call {
            script: ScriptId::SemRelease,
            keys: vec![],
            args: vec![],
        }
    }

    #[test]
    fn a_resend_keeps_the_first_send_time_and_remembers_a_loss() {
        let mut resend = Resend::new(call(), 1_000);
        let mut env = At(5);
        assert!(matches!(resend.start(&mut env, &mut ()), Next::Send(_)));
        env.0 = 10;
        assert_eq!(
            resend.on_failure(&mut env, &mut (), Failure::TimedOut),
            Next::SleepUntil(30)
        );
        env.0 = 30;
        assert!(matches!(resend.resume(&mut env, &mut ()), Next::Send(_)));
        let Next::Done(Ok(resent)) = resend.on_reply(&mut env, &mut (), &Reply::Int(0)) else {
            panic!("done");
        };
        assert_eq!((resent.first_sent_at, resent.after_loss), (5, true));
        assert_eq!(given_back(&resent, true), Ok(GivenBack::Unconfirmed));
        assert_eq!(given_back(&resent, false), Ok(GivenBack::NotHeld));
    }

    #[test]
    fn permanent_errors_and_the_bound_end_it() {
        let mut resend = Resend::new(call(), 100);
        let mut env = At(0);
        resend.start(&mut env, &mut ());
        assert!(matches!(
            resend.on_failure(&mut env, &mut (), Failure::Permanent("NOPERM".into())),
            Next::Done(Err(_))
        ));
        let mut resend = Resend::new(call(), 100);
        resend.start(&mut env, &mut ());
        env.0 = 90;
        assert!(matches!(
            resend.on_failure(&mut env, &mut (), Failure::NotSent),
            Next::Done(Err(GaveUp {
                after_loss: false,
                ..
            }))
        ));
    }
}
