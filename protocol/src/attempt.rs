//! One acquire attempt in its (lock, owner) lane, with every decision it takes: what to
//! send first, whether a hold a lost earlier attempt took is adopted or given back, what a
//! lost reply leads to, when to send a fresh request, when to hand reconciliation to the
//! background, and which lease a grant is credited with. And one background round of that
//! reconciliation ([`ReconcileRound`]).
//!
//! The library's driver (`src/lock/attempt.rs`) and the protocol checker's model both run
//! these machines; neither decides anything of its own. A machine is fed events (a reply
//! or a failure of the call it asked for, the end of a sleep) and answers with the next
//! thing to do ([`Next`]).

use std::sync::Arc;

use super::acquire::{
    AcquireReply, AcquireRequest, AfterFailure, Granted, ReconcileStep, after_failure,
};
use super::lane::{Lane, Resolved};
use super::planted::{self, Defect};
use super::release::{ReleaseOp, ReleaseOutcome, ReleaseStep};
use super::{Env, Failure, LockKeys, Machine, Millis, Next, Reply};

/// How many fresh requests an attempt sends after a probe showed that its lost request did
/// not run: a dropped connection whose probe then answers is not an outage.
pub const RESENDS: u8 = 2;

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AttemptOutcome {
    /// The owner holds the lock: a fresh hold, a re-entry, or a hold that a lost earlier
    /// request took on the same terms (`adopted`).
    Granted {
        /// The hold.
        granted: Granted,
        /// When the request that took it was sent: the lease is confirmed from then.
        sent_at: Millis,
        /// The lease Redis set for it.
        lease_ms: Millis,
        /// Whether it was taken by an earlier request whose reply was lost.
        adopted: bool,
    },
    /// Another owner holds the lock for `pttl_ms` more.
    Held {
        /// The lock's remaining TTL.
        pttl_ms: Millis,
    },
    /// The key is not one of our locks; nothing was written.
    NotALock(String),
    /// A reply could not be read.
    Unreadable(String),
    /// The attempt failed with `failure` (the call named by `failed_call`'s error is the
    /// one to report). When `reconcile_in_background` is set, a request whose reply was
    /// lost is still pending in the lane and a background task must keep asking what it
    /// did ([`ReconcileRound`]).
    Failed {
        /// Why.
        failure: Failure,
        /// Whether the driver must start background reconciliation.
        reconcile_in_background: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Stage {
    /// The probe of an earlier lost request, before this attempt sends its own.
    ProbingFirst,
    /// Giving back a hold an earlier lost request took on other terms.
    GivingBack(ReleaseOp),
    /// The bare `SET NX` of a request that may take a free lock in one plain command
    /// ([`AcquireRequest::take_call`]) is in flight.
    Taking,
    /// The acquire request (`acquire.lua`) is in flight.
    Sending,
    /// The probe right after this attempt's own reply was lost.
    ProbingAfterLoss(Failure),
    Finished,
}

/// One acquire attempt.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AttemptOp {
    keys: LockKeys,
    request: AcquireRequest,
    sent_at: Millis,
    resends: u8,
    stage: Stage,
    abandoned: Option<Arc<str>>,
    may_reenter: bool,
}

impl AttemptOp {
    /// An attempt of `request` (its id is used unless a resend needs a fresh one).
    pub fn new(keys: LockKeys, request: AcquireRequest) -> Self {
        AttemptOp {
            keys,
            request,
            sent_at: 0,
            resends: RESENDS,
            stage: Stage::Finished,
            abandoned: None,
            may_reenter: false,
        }
    }

    /// The same attempt, made while the client tracks a live hold of the owner that the
    /// request may re-enter (see [`Lane::lost_acquire`]).
    pub fn may_reenter(mut self, may_reenter: bool) -> Self {
        self.may_reenter = may_reenter;
        self
    }

    /// A hold that a lost earlier request took and that could not be given back: it
    /// expires with its lease.
    pub fn abandoned(&self) -> Option<&Arc<str>> {
        self.abandoned.as_ref()
    }

    /// The request as it stands (the last one sent).
    pub fn request(&self) -> &AcquireRequest {
        &self.request
    }

    /// Sends the request: as a bare `SET NX` first when it may take the lock that way and
    /// the client tracks no hold of the owner that it would re-enter (a re-entry would
    /// find the key and need `acquire.lua` after all).
    fn send(&mut self, env: &mut dyn Env) -> Next<AttemptOutcome> {
        let take = if self.may_reenter {
            None
        } else {
            self.request.take_call(&self.keys)
        };
        match take {
            Some(call) => {
                self.stage = Stage::Taking;
                self.sent_at = env.now();
                Next::Send(call)
            }
            None => self.send_script(env),
        }
    }

    fn send_script(&mut self, env: &mut dyn Env) -> Next<AttemptOutcome> {
        self.stage = Stage::Sending;
        self.sent_at = env.now();
        Next::Send(self.request.call(&self.keys))
    }

    fn done(&mut self, outcome: AttemptOutcome) -> Next<AttemptOutcome> {
        self.stage = Stage::Finished;
        Next::Done(outcome)
    }

    /// The lease an adopted hold is credited with: the one Redis set, i.e. the lost
    /// request's (adoption requires the same terms, so it is also the caller's).
    fn adopted_lease(&self, lost: &AcquireRequest) -> Millis {
        if planted::is(Defect::AdoptionIgnoresLease) {
            return self.request.lease_ms;
        }
        lost.lease_ms
    }
}

impl Machine for AttemptOp {
    type Ctx = Lane;
    type Outcome = AttemptOutcome;

    /// Starts: an earlier lost request of this lane is resolved first, so that this
    /// attempt's record in the lock hash cannot hide it.
    fn start(&mut self, env: &mut dyn Env, lane: &mut Lane) -> Next<AttemptOutcome> {
        match lane.probe(&self.keys) {
            Some(probe) => {
                self.stage = Stage::ProbingFirst;
                Next::Send(probe)
            }
            None => self.send(env),
        }
    }

    /// The call asked for got this reply.
    fn on_reply(
        &mut self,
        env: &mut dyn Env,
        lane: &mut Lane,
        reply: &Reply,
    ) -> Next<AttemptOutcome> {
        match std::mem::replace(&mut self.stage, Stage::Finished) {
            Stage::ProbingFirst => match lane.on_probe_reply(reply) {
                Ok(Resolved::Holds {
                    granted,
                    sent_at,
                    request: lost,
                }) => {
                    if lost.same_terms(&self.request) {
                        let lease_ms = self.adopted_lease(&lost);
                        return self.done(AttemptOutcome::Granted {
                            granted,
                            sent_at,
                            lease_ms,
                            adopted: true,
                        });
                    }
                    // Taken on other terms (lease, fencing): give it back, then send.
                    let give_back = ReleaseOp::new(
                        lost.owner.clone(),
                        granted.hold,
                        env.next_id(),
                        env.now().saturating_add(lost.lease_ms),
                    );
                    let call = give_back.call(&self.keys);
                    self.stage = Stage::GivingBack(give_back);
                    Next::Send(call)
                }
                // Nothing taken, or an unreadable probe (the lane is clear either way).
                Ok(Resolved::Nothing) | Err(_) => self.send(env),
            },
            Stage::GivingBack(give_back) => match give_back.on_reply(reply) {
                Ok(_) => self.send(env),
                Err(unreadable) => self.done(AttemptOutcome::Unreadable(unreadable)),
            },
            Stage::Taking => match self.request.decode_take(reply) {
                Ok(Some(granted)) => self.done(AttemptOutcome::Granted {
                    granted,
                    sent_at: self.sent_at,
                    lease_ms: self.request.lease_ms,
                    adopted: false,
                }),
                // The key exists: the script says whose it is, and re-enters or waits. The
                // take wrote nothing, so the request id is still unused.
                Ok(None) => self.send_script(env),
                Err(unreadable) => self.done(AttemptOutcome::Unreadable(unreadable)),
            },
            Stage::Sending => {
                let outcome = match self.request.decode(reply) {
                    Ok(AcquireReply::Granted(granted)) => AttemptOutcome::Granted {
                        granted,
                        sent_at: self.sent_at,
                        lease_ms: self.request.lease_ms,
                        adopted: false,
                    },
                    Ok(AcquireReply::Held { pttl_ms }) => AttemptOutcome::Held { pttl_ms },
                    Ok(AcquireReply::NotALock(found)) => AttemptOutcome::NotALock(found),
                    Err(unreadable) => AttemptOutcome::Unreadable(unreadable),
                };
                self.done(outcome)
            }
            Stage::ProbingAfterLoss(lost_with) => match lane.on_probe_reply(reply) {
                Ok(Resolved::Holds {
                    granted,
                    sent_at,
                    request: lost,
                }) => {
                    let lease_ms = self.adopted_lease(&lost);
                    self.done(AttemptOutcome::Granted {
                        granted,
                        sent_at,
                        lease_ms,
                        adopted: true,
                    })
                }
                Ok(Resolved::Nothing) | Err(_) if self.resends > 0 => {
                    // It did not run: Redis answered the probe, so send a fresh request.
                    self.resends -= 1;
                    self.request.request = env.next_id();
                    self.send(env)
                }
                Ok(Resolved::Nothing) | Err(_) => self.done(AttemptOutcome::Failed {
                    failure: lost_with,
                    reconcile_in_background: false,
                }),
            },
            Stage::Finished => Next::Done(AttemptOutcome::Unreadable(
                "attempt: a reply after the attempt ended".into(),
            )),
        }
    }

    /// The call asked for got no reply.
    fn on_failure(
        &mut self,
        env: &mut dyn Env,
        lane: &mut Lane,
        failure: Failure,
    ) -> Next<AttemptOutcome> {
        match std::mem::replace(&mut self.stage, Stage::Finished) {
            // The probe got no reply: the earlier request stays pending (the background
            // task that its loss started keeps asking) and the caller hears the error.
            Stage::ProbingFirst => self.done(AttemptOutcome::Failed {
                failure,
                reconcile_in_background: false,
            }),
            Stage::GivingBack(mut give_back) => {
                match give_back.on_failure(&failure, env.now(), env.jitter()) {
                    ReleaseStep::RetryAt(at) => {
                        self.stage = Stage::GivingBack(give_back);
                        Next::SleepUntil(at)
                    }
                    ReleaseStep::Done(ReleaseOutcome::Failed(failure)) => {
                        self.abandoned = Some(give_back.hold().clone());
                        self.done(AttemptOutcome::Failed {
                            failure,
                            reconcile_in_background: false,
                        })
                    }
                    ReleaseStep::Done(outcome) => {
                        if outcome == ReleaseOutcome::Unconfirmed {
                            self.abandoned = Some(give_back.hold().clone());
                        }
                        self.send(env)
                    }
                }
            }
            Stage::Taking | Stage::Sending => match after_failure(&failure) {
                AfterFailure::DidNotRun | AfterFailure::Fail => self.done(AttemptOutcome::Failed {
                    failure,
                    reconcile_in_background: false,
                }),
                AfterFailure::Reconcile => {
                    // It may have run. Nothing else is sent for this (lock, owner) before
                    // finding out what it did.
                    lane.lost_acquire(
                        self.request.clone(),
                        self.sent_at,
                        env.now(),
                        self.may_reenter,
                    );
                    if failure == Failure::TimedOut {
                        // No answer in a whole response timeout: a probe now would most
                        // likely time out too. The caller hears at once; the next attempt
                        // of this owner or the background task finds out.
                        return self.done(AttemptOutcome::Failed {
                            failure,
                            reconcile_in_background: true,
                        });
                    }
                    match lane.probe(&self.keys) {
                        Some(probe) => {
                            self.stage = Stage::ProbingAfterLoss(failure);
                            Next::Send(probe)
                        }
                        None => self.done(AttemptOutcome::Failed {
                            failure,
                            reconcile_in_background: false,
                        }),
                    }
                }
            },
            Stage::ProbingAfterLoss(lost_with) => self.done(AttemptOutcome::Failed {
                failure: lost_with,
                reconcile_in_background: true,
            }),
            Stage::Finished => Next::Done(AttemptOutcome::Failed {
                failure,
                reconcile_in_background: false,
            }),
        }
    }

    /// A sleep asked for is over.
    fn resume(&mut self, env: &mut dyn Env, _lane: &mut Lane) -> Next<AttemptOutcome> {
        match &self.stage {
            Stage::GivingBack(give_back) => Next::Send(give_back.call(&self.keys)),
            _ => self.send(env),
        }
    }
}

/// How a background reconciliation round ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RoundOutcome {
    /// Nothing is pending any more (resolved here or by another request of the owner).
    Resolved,
    /// Ask again at this time.
    RetryAt(Millis),
    /// A hold the lost request took must have expired by now (or the error is permanent):
    /// stop asking.
    GaveUp,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum RoundStage {
    Probing,
    GivingBack(ReleaseOp),
    Finished,
}

/// One round of background reconciliation, inside the lane: probe what a lost acquire
/// did, and give back a hold it took (nobody waits for it any more).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReconcileRound {
    keys: LockKeys,
    stage: RoundStage,
    abandoned: Option<Arc<str>>,
    /// The round's retry asks past the bound (see [`ReconcileRound::asks_late`]).
    late: bool,
}

impl ReconcileRound {
    /// When the first round is due, after a loss at `now`.
    pub fn first_at(now: Millis, jitter: u64) -> Millis {
        now.saturating_add(super::backoff(1, jitter))
    }

    /// A round for the lane of `keys`.
    pub fn new(keys: LockKeys) -> Self {
        ReconcileRound {
            keys,
            stage: RoundStage::Finished,
            abandoned: None,
            late: false,
        }
    }

    /// Whether the retry this round asked for is past the bound: no hold the lost request
    /// took by then can exist, only one it takes if it still runs (it timed out, and its
    /// probe too). Such asking gives nothing known back, so a client's `flush` need not
    /// wait for it.
    pub fn asks_late(&self) -> bool {
        self.late
    }

    /// A hold the lost request took that could not be given back: it expires with its
    /// lease.
    pub fn abandoned(&self) -> Option<&Arc<str>> {
        self.abandoned.as_ref()
    }
}

impl Machine for ReconcileRound {
    type Ctx = Lane;
    type Outcome = RoundOutcome;

    /// Starts the round.
    fn start(&mut self, _env: &mut dyn Env, lane: &mut Lane) -> Next<RoundOutcome> {
        match lane.probe(&self.keys) {
            Some(probe) => {
                self.stage = RoundStage::Probing;
                Next::Send(probe)
            }
            None => Next::Done(RoundOutcome::Resolved),
        }
    }

    /// The call asked for got this reply.
    fn on_reply(
        &mut self,
        env: &mut dyn Env,
        lane: &mut Lane,
        reply: &Reply,
    ) -> Next<RoundOutcome> {
        match std::mem::replace(&mut self.stage, RoundStage::Finished) {
            RoundStage::Probing => match lane.on_probe_reply(reply) {
                Ok(Resolved::Holds {
                    granted,
                    request: lost,
                    ..
                }) => {
                    let give_back = ReleaseOp::new(
                        lost.owner.clone(),
                        granted.hold,
                        env.next_id(),
                        env.now().saturating_add(lost.lease_ms),
                    );
                    let call = give_back.call(&self.keys);
                    self.stage = RoundStage::GivingBack(give_back);
                    Next::Send(call)
                }
                Ok(Resolved::Nothing) | Err(_) => Next::Done(RoundOutcome::Resolved),
            },
            // Whatever the give-back found, nothing is pending any more.
            RoundStage::GivingBack(_) | RoundStage::Finished => Next::Done(RoundOutcome::Resolved),
        }
    }

    /// The call asked for got no reply.
    fn on_failure(
        &mut self,
        env: &mut dyn Env,
        lane: &mut Lane,
        failure: Failure,
    ) -> Next<RoundOutcome> {
        match std::mem::replace(&mut self.stage, RoundStage::Finished) {
            RoundStage::Probing => match lane.on_probe_failure(&failure, env.now(), env.jitter()) {
                ReconcileStep::RetryAt(at) => {
                    self.late = lane.asks_late(at);
                    Next::Done(RoundOutcome::RetryAt(at))
                }
                ReconcileStep::GiveUp => Next::Done(RoundOutcome::GaveUp),
            },
            RoundStage::GivingBack(mut give_back) => {
                match give_back.on_failure(&failure, env.now(), env.jitter()) {
                    ReleaseStep::RetryAt(at) => {
                        self.stage = RoundStage::GivingBack(give_back);
                        Next::SleepUntil(at)
                    }
                    // Given up: the hold expires with its lease.
                    ReleaseStep::Done(outcome) => {
                        if matches!(
                            outcome,
                            ReleaseOutcome::Failed(_) | ReleaseOutcome::Unconfirmed
                        ) {
                            self.abandoned = Some(give_back.hold().clone());
                        }
                        Next::Done(RoundOutcome::Resolved)
                    }
                }
            }
            RoundStage::Finished => Next::Done(RoundOutcome::Resolved),
        }
    }

    /// A sleep asked for is over.
    fn resume(&mut self, env: &mut dyn Env, lane: &mut Lane) -> Next<RoundOutcome> {
        match &self.stage {
            RoundStage::GivingBack(give_back) => Next::Send(give_back.call(&self.keys)),
            _ => self.start(env, lane),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct TestEnv {
        now: Millis,
        next: u64,
    }

    impl Env for TestEnv {
        fn now(&self) -> Millis {
            self.now
        }
        fn jitter(&mut self) -> u64 {
            0
        }
        fn next_id(&mut self) -> std::sync::Arc<str> {
            self.next += 1;
            format!("c.{}", self.next).into()
        }
    }

    fn keys() -> LockKeys {
        LockKeys {
            hash: "k".into(),
            fence: "k:fence".into(),
            channel: "k:c".into(),
            sharded: false,
        }
    }

    fn request(id: &str, lease_ms: Millis) -> AcquireRequest {
        AcquireRequest {
            owner: "o".into(),
            lease_ms,
            request: id.into(),
            fenced: false,
            others_waiting: false,
            contended: false,
        }
    }

    fn probe_holds(hold: &str) -> Reply {
        Reply::Array(vec![
            Reply::Int(1),
            Reply::Int(1),
            Reply::Bulk(hold.as_bytes().to_vec()),
            Reply::Int(0),
        ])
    }

    #[test]
    fn a_lost_reply_is_probed_and_a_hold_it_took_adopted_with_its_lease() {
        let mut env = TestEnv { now: 5, next: 1 };
        let mut lane = Lane::default();
        let mut op = AttemptOp::new(keys(), request("c.1", 100));
        assert!(matches!(op.start(&mut env, &mut lane), Next::Send(_)));
        env.now = 9;
        let next = op.on_failure(&mut env, &mut lane, Failure::Lost);
        assert!(
            matches!(next, Next::Send(ref call) if call.script == super::super::ScriptId::Probe)
        );
        let next = op.on_reply(&mut env, &mut lane, &probe_holds("c.1"));
        assert_eq!(
            next,
            Next::Done(AttemptOutcome::Granted {
                granted: Granted {
                    count: 1,
                    hold: "c.1".into(),
                    token: None
                },
                sent_at: 5,
                lease_ms: 100,
                adopted: true
            })
        );
    }

    #[test]
    fn a_probe_that_finds_nothing_leads_to_fresh_requests_then_the_error() {
        let mut env = TestEnv { now: 0, next: 1 };
        let mut lane = Lane::default();
        let mut op = AttemptOp::new(keys(), request("c.1", 100));
        op.start(&mut env, &mut lane);
        for _ in 0..RESENDS {
            op.on_failure(&mut env, &mut lane, Failure::Lost);
            let next = op.on_reply(&mut env, &mut lane, &Reply::Array(vec![Reply::Int(0)]));
            assert!(
                matches!(next, Next::Send(ref call) if call.script == super::super::ScriptId::Take)
            );
        }
        op.on_failure(&mut env, &mut lane, Failure::Lost);
        let next = op.on_reply(&mut env, &mut lane, &Reply::Array(vec![Reply::Int(0)]));
        assert_eq!(
            next,
            Next::Done(AttemptOutcome::Failed {
                failure: Failure::Lost,
                reconcile_in_background: false
            })
        );
        assert!(!lane.is_pending());
    }

    #[test]
    fn a_timeout_hands_reconciliation_to_the_background() {
        let mut env = TestEnv { now: 0, next: 1 };
        let mut lane = Lane::default();
        let mut op = AttemptOp::new(keys(), request("c.1", 100));
        op.start(&mut env, &mut lane);
        let next = op.on_failure(&mut env, &mut lane, Failure::TimedOut);
        assert_eq!(
            next,
            Next::Done(AttemptOutcome::Failed {
                failure: Failure::TimedOut,
                reconcile_in_background: true
            })
        );
        assert!(lane.is_pending());
        // The background round gives the hold back.
        let mut round = ReconcileRound::new(keys());
        assert!(matches!(round.start(&mut env, &mut lane), Next::Send(_)));
        let next = round.on_reply(&mut env, &mut lane, &probe_holds("c.1"));
        assert!(
            matches!(next, Next::Send(ref call) if call.script == super::super::ScriptId::Release)
        );
        assert_eq!(
            round.on_reply(&mut env, &mut lane, &Reply::Int(0)),
            Next::Done(RoundOutcome::Resolved)
        );
    }

    #[test]
    fn a_hold_on_other_terms_is_given_back_before_sending() {
        let mut env = TestEnv { now: 0, next: 1 };
        let mut lane = Lane::default();
        lane.lost_acquire(request("c.0", 15), 0, 1, false);
        let mut op = AttemptOp::new(keys(), request("c.1", 30));
        assert!(matches!(op.start(&mut env, &mut lane), Next::Send(_)));
        let next = op.on_reply(&mut env, &mut lane, &probe_holds("c.0"));
        assert!(
            matches!(next, Next::Send(ref call) if call.script == super::super::ScriptId::Release)
        );
        let next = op.on_reply(&mut env, &mut lane, &Reply::Int(0));
        assert!(
            matches!(next, Next::Send(ref call) if call.script == super::super::ScriptId::Take)
        );
    }

    #[test]
    fn a_free_lock_is_taken_with_a_bare_set_and_a_taken_one_asked_with_the_same_request() {
        use super::super::ScriptId;
        let mut env = TestEnv { now: 3, next: 1 };
        let mut lane = Lane::default();
        let mut op = AttemptOp::new(keys(), request("c.1", 100));
        let Next::Send(call) = op.start(&mut env, &mut lane) else {
            panic!("sends");
        };
        assert_eq!(call.script, ScriptId::Take);
        assert_eq!(&*call.args[0], "\u{1}c.1\u{1}o");
        assert_eq!(
            op.on_reply(&mut env, &mut lane, &Reply::Status("OK".into())),
            Next::Done(AttemptOutcome::Granted {
                granted: Granted {
                    count: 1,
                    hold: "c.1".into(),
                    token: None
                },
                sent_at: 3,
                lease_ms: 100,
                adopted: false
            })
        );
        // The key exists: acquire.lua, with the same request id, says whose it is.
        let mut op = AttemptOp::new(keys(), request("c.1", 100));
        op.start(&mut env, &mut lane);
        let Next::Send(call) = op.on_reply(&mut env, &mut lane, &Reply::Nil) else {
            panic!("sends the script");
        };
        assert_eq!(call.script, ScriptId::Acquire);
        assert_eq!(&*call.args[2], "c.1");
        // A contended request, or one that may re-enter, sends the script at once.
        let contended = AcquireRequest {
            contended: true,
            ..request("c.2", 100)
        };
        let mut op = AttemptOp::new(keys(), contended);
        assert!(matches!(op.start(&mut env, &mut lane),
            Next::Send(ref call) if call.script == ScriptId::Acquire));
        let mut op = AttemptOp::new(keys(), request("c.3", 100)).may_reenter(true);
        assert!(matches!(op.start(&mut env, &mut lane),
            Next::Send(ref call) if call.script == ScriptId::Acquire));
    }
}
